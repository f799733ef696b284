// Schema versions of a PostgreSQL database several daemons share, and the migrations that
// bring it to this binary's.
//
// Each component of the daemon that keeps tables (the store, the replica tables) has its
// own list of steps and its own row in `schema_version`, so each adds tables in its own
// file without renumbering another's. Every replica runs the migrations at start; they are
// serialised by a transaction-scoped advisory lock, so replicas started at once apply each
// step exactly once and the others find it done. A database whose version is newer than
// the binary's is refused: an older daemon would write rows the newer schema does not
// expect.
//
//   constexpr const char* kSteps[] = {"CREATE TABLE replicas (...)"};
//   SANDGATE_RETURN_IF_ERROR(MigrateSchema(*db, "replicas", kSteps));
//
// Thread safe (each call takes its own connection).
#ifndef SANDGATE_STORE_POSTGRES_SCHEMA_H_
#define SANDGATE_STORE_POSTGRES_SCHEMA_H_

#include <cstdint>

#include "absl/status/status.h"
#include "absl/strings/string_view.h"
#include "absl/types/span.h"
#include "store/postgres_connection.h"

namespace sandgate::store {

// Applies steps[v] for every v from the component's stored version (0 when it has none) to
// steps.size(), in one transaction with the version update. FAILED_PRECONDITION when the
// stored version is above steps.size().
absl::Status MigrateSchema(PostgresDatabase& db, absl::string_view component,
                           absl::Span<const char* const> steps);

// The component's stored version; 0 when it has none.
absl::StatusOr<int64_t> SchemaVersion(PostgresDatabase& db, absl::string_view component);

// The store's own steps (runs, sessions, events, run requests, the journal).
absl::Span<const char* const> StoreMigrations();
inline constexpr const char kStoreComponent[] = "store";

}  // namespace sandgate::store

#endif  // SANDGATE_STORE_POSTGRES_SCHEMA_H_
