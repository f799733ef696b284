#include "store/postgres_schema.h"

#include "absl/strings/str_cat.h"
#include "common/errors.h"
#include "common/status_macros.h"

namespace sandgate::store {
namespace {

// Any fixed number: every sandgated migrating this database waits on it. One key for all
// components keeps the order simple (migrations run once per start, they are rare).
constexpr int64_t kMigrationLockKey = 0x73616e6467617465;  // "sandgate"

constexpr const char kVersionTable[] =
    "CREATE TABLE IF NOT EXISTS schema_version ("
    "component TEXT PRIMARY KEY, version BIGINT NOT NULL)";

// Runs and sessions are kept as their serialized API message (proto), as in SqliteStore,
// with the columns the queries need beside it: n orders ListRuns newest first (and is its
// page token), ended_ns (finished_at / closed_at in Unix nanoseconds) lets PurgeBefore
// select without parsing every row.
constexpr const char* kStoreSteps[] = {
    // 1
    R"sql(
CREATE TABLE runs (
  n BIGINT GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
  id TEXT NOT NULL UNIQUE,
  tenant TEXT NOT NULL,
  idempotency_key TEXT NOT NULL,
  request_sha256 TEXT NOT NULL DEFAULT '',
  status INTEGER NOT NULL,
  ended_ns BIGINT,
  proto BYTEA NOT NULL);
CREATE UNIQUE INDEX runs_idempotency ON runs(tenant, idempotency_key)
  WHERE idempotency_key <> '';
CREATE INDEX runs_tenant ON runs(tenant, n);
CREATE INDEX runs_unfinished ON runs(n) WHERE status IN (1, 2);
CREATE TABLE sessions (
  n BIGINT GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
  id TEXT NOT NULL UNIQUE,
  tenant TEXT NOT NULL,
  idempotency_key TEXT NOT NULL,
  request_sha256 TEXT NOT NULL DEFAULT '',
  status INTEGER NOT NULL,
  ended_ns BIGINT,
  proto BYTEA NOT NULL);
CREATE UNIQUE INDEX sessions_idempotency ON sessions(tenant, idempotency_key)
  WHERE idempotency_key <> '';
CREATE TABLE events (
  run_id TEXT NOT NULL,
  seq BIGINT NOT NULL,
  proto BYTEA NOT NULL,
  PRIMARY KEY (run_id, seq));
CREATE TABLE run_requests (
  run_id TEXT PRIMARY KEY,
  proto BYTEA NOT NULL);
CREATE TABLE journal (
  id TEXT PRIMARY KEY,
  provider TEXT NOT NULL,
  kind TEXT NOT NULL,
  details TEXT NOT NULL);
)sql",
};

absl::StatusOr<int64_t> ReadVersion(PgConnection& conn, absl::string_view component) {
  SANDGATE_ASSIGN_OR_RETURN(
      PgResult r,
      conn.Exec("read schema version", "SELECT version FROM schema_version WHERE component = $1",
                PgParams().Text(component)));
  return r.rows() == 0 ? 0 : r.Int(0, 0);
}

}  // namespace

absl::Span<const char* const> StoreMigrations() { return kStoreSteps; }

absl::Status MigrateSchema(PostgresDatabase& db, absl::string_view component,
                           absl::Span<const char* const> steps) {
  const int64_t target = static_cast<int64_t>(steps.size());
  SANDGATE_ASSIGN_OR_RETURN(PgLease conn, db.Acquire("migrate"));
  return conn->Transaction("migrate", [&]() -> absl::Status {
    // The lock first: even CREATE TABLE IF NOT EXISTS fails when two sessions race it.
    SANDGATE_RETURN_IF_ERROR(conn->Run("migration lock", "SELECT pg_advisory_xact_lock($1)",
                                       PgParams().Int(kMigrationLockKey)));
    SANDGATE_RETURN_IF_ERROR(conn->Run("create schema_version", kVersionTable));
    SANDGATE_ASSIGN_OR_RETURN(int64_t version, ReadVersion(*conn, component));
    if (version > target) {
      return errors::FailedPrecondition(
          absl::StrCat("postgres schema of '", component, "' is at version ", version,
                       ", newer than this sandgated's ", target, "; run the newer sandgated"));
    }
    for (int64_t v = version; v < target; ++v) {
      absl::Status st = conn->Script(steps[v]);
      if (!st.ok()) {
        return errors::Internal(absl::StrCat("migrating postgres schema of '", component,
                                             "' to version ", v + 1, ": ", st.message()));
      }
    }
    if (version == target) return absl::OkStatus();
    return conn->Run("set schema version",
                     "INSERT INTO schema_version(component, version) VALUES($1, $2) "
                     "ON CONFLICT(component) DO UPDATE SET version = excluded.version",
                     PgParams().Text(component).Int(target));
  });
}

absl::StatusOr<int64_t> SchemaVersion(PostgresDatabase& db, absl::string_view component) {
  SANDGATE_ASSIGN_OR_RETURN(PgLease conn, db.Acquire("read schema version"));
  SANDGATE_ASSIGN_OR_RETURN(
      PgResult exists,
      conn->Exec("read schema version", "SELECT to_regclass('schema_version') IS NOT NULL"));
  if (exists.rows() == 0 || exists.Bytes(0, 0) != absl::string_view("\1", 1)) return 0;
  return ReadVersion(*conn, component);
}

}  // namespace sandgate::store
