// PostgresDatabase: a small pool of libpq connections to one PostgreSQL database, and the
// parameterised statements every PostgreSQL-backed part of the daemon runs through it.
//
// Shared by PostgresStore and anything else that keeps state in the same database (the
// replica tables): take the pool with PostgresStore::database(), or open another one.
//
//   SANDGATE_ASSIGN_OR_RETURN(auto db, PostgresDatabase::Open(options));
//   SANDGATE_ASSIGN_OR_RETURN(PgResult r, db->Exec("get run",
//                             "SELECT proto FROM runs WHERE id = $1", PgParams().Text(run_id)));
//   // Several statements, one transaction; each error names "move run".
//   absl::Status st = db->Transaction("move run", [&](PgTx& tx) -> absl::Status {
//     SANDGATE_RETURN_IF_ERROR(tx.Run("DELETE FROM a WHERE id = $1", PgParams().Text(id)));
//     return tx.Run("INSERT INTO b(id) VALUES($1)", PgParams().Text(id));
//   });
//
// Every statement is parameterised (prepared once per connection, PQprepare /
// PQexecPrepared), results come back in binary format, and
// every libpq error is an absl::Status naming the operation and the server's message. The
// password is given to libpq as its own keyword, never put in a string we build, log or
// return.
//
// Thread safe: the pool is; one PgConnection is used by one thread at a time (the lease's
// holder).
#ifndef SANDGATE_STORE_POSTGRES_CONNECTION_H_
#define SANDGATE_STORE_POSTGRES_CONNECTION_H_

#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <type_traits>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "common/clock.h"

typedef struct pg_conn PGconn;
typedef struct pg_result PGresult;

namespace sandgate::store {

// SQLSTATE of a unique constraint violation (an idempotency key, an event's seq).
inline constexpr const char kPgUniqueViolation[] = "23505";

// A statement's parameters, each passed as text (the server casts it to the column's type)
// or as raw bytes (bytea, binary format: no escaping, no copy into a hex string). The
// values are copied in, so the caller's strings may go away.
class PgParams {
 public:
  PgParams& Text(absl::string_view v);
  PgParams& Int(int64_t v);
  // As unix nanoseconds (a BIGINT column; see PgResult::Time).
  PgParams& Time(absl::Time t) { return Int(absl::ToUnixNanos(t)); }
  PgParams& Bytes(absl::string_view v);
  // Takes a string whose bytes are the parameter, without a copy (a serialized message).
  PgParams& Bytes(std::string&& v);
  int size() const { return static_cast<int>(values_.size()); }

 private:
  friend class PgConnection;
  std::vector<std::string> values_;
  std::vector<int> formats_;  // 0 text, 1 binary
};

// One statement's result rows; binary format, so text columns are their bytes and bigint
// columns 8 bytes in network order. Owns the PGresult.
class PgResult {
 public:
  explicit PgResult(PGresult* r) : r_(r) {}
  PgResult(PgResult&& other) noexcept : r_(other.r_) { other.r_ = nullptr; }
  PgResult& operator=(PgResult&& other) noexcept;
  PgResult(const PgResult&) = delete;
  PgResult& operator=(const PgResult&) = delete;
  ~PgResult();

  int rows() const;
  bool IsNull(int row, int col) const;
  // The column's bytes in libpq's buffer, valid while this result lives.
  absl::string_view Bytes(int row, int col) const;
  std::string Text(int row, int col) const { return std::string(Bytes(row, col)); }
  // A bigint (int8) or integer (int4) column.
  int64_t Int(int row, int col) const;
  // A BIGINT column of unix nanoseconds (PgParams::Time).
  absl::Time Time(int row, int col) const { return absl::FromUnixNanos(Int(row, col)); }
  // Rows changed by an INSERT / UPDATE / DELETE.
  int64_t affected() const;

 private:
  friend class PgConnection;
  PGresult* r_;
};

// One open connection. Not thread safe: used by the holder of its PgLease.
class PgConnection {
 public:
  ~PgConnection();
  PgConnection(const PgConnection&) = delete;
  PgConnection& operator=(const PgConnection&) = delete;

  // Runs one parameterised statement, prepared on this connection at its first use and kept
  // for the connection's life: `sql` is one of a fixed set of texts, never one with values
  // spliced in. `what` names the operation in errors:
  // "postgres <what>: <server message>". A unique violation is ALREADY_EXISTS, a lost
  // connection UNAVAILABLE, anything else INTERNAL.
  absl::StatusOr<PgResult> Exec(absl::string_view what, absl::string_view sql,
                                const PgParams& params = PgParams());
  // As Exec, for statements whose rows do not matter.
  absl::Status Run(absl::string_view what, absl::string_view sql,
                   const PgParams& params = PgParams());
  // Runs a fixed script of several statements, no parameters (a migration step).
  absl::Status Script(const char* sql);
  // Runs `body` between BEGIN and COMMIT; on any error, ROLLBACK and body's error.
  template <typename Fn>
  absl::Status Transaction(absl::string_view what, Fn body) {
    absl::Status st = Run(what, "BEGIN");
    if (st.ok()) st = body();
    if (st.ok()) st = Run(what, "COMMIT");
    if (!st.ok()) (void)Run(what, "ROLLBACK");  // the first error is the one to report
    return st;
  }
  bool broken() const;
  // Connected and outside any transaction: safe to give to the next holder.
  bool reusable() const;

 private:
  friend class PostgresDatabase;
  friend class PostgresNotifier;  // waits on the socket of its LISTENing connection
  explicit PgConnection(PGconn* conn) : conn_(conn) {}
  // The statement's result, or its error as a Status (see Exec).
  absl::StatusOr<PgResult> Check(absl::string_view what, PGresult* result);
  static std::vector<const char*> Pointers(const PgParams& params);
  static std::vector<int> Lengths(const PgParams& params);
  PGconn* const conn_;
  // The statements prepared on this connection, by their SQL text, and their names.
  std::map<std::string, std::string, std::less<>> prepared_;
};

// One operation's statements on one connection, each naming the operation in its error
// ("postgres <what>: …", as PgConnection::Exec): what PostgresDatabase::Transaction gives
// its body. A view of the connection and of `what`, valid while the body runs. Not thread
// safe.
class PgTx {
 public:
  PgTx(PgConnection& conn, absl::string_view what) : conn_(conn), what_(what) {}

  absl::StatusOr<PgResult> Exec(absl::string_view sql, const PgParams& params = PgParams()) {
    return conn_.Exec(what_, sql, params);
  }
  absl::Status Run(absl::string_view sql, const PgParams& params = PgParams()) {
    return conn_.Run(what_, sql, params);
  }
  // The connection, for what runs its own statements in the transaction (PgNotify).
  PgConnection& connection() const { return conn_; }
  absl::string_view what() const { return what_; }

 private:
  PgConnection& conn_;
  const absl::string_view what_;
};

struct PostgresOptions {
  // A libpq connection string without a password ("host=/run/postgresql dbname=sandgate").
  std::string dsn;
  // Read by the caller from the configured password file; empty = none (peer or trust
  // authentication). Never logged.
  std::string password;
  // Connections kept open; each statement holds one. The event log's writer, the stream
  // readers and the RPC handlers share them.
  int pool_size = 8;
  // How long Acquire waits for a free connection before UNAVAILABLE.
  absl::Duration acquire_timeout = absl::Seconds(10);
  Clock* clock = Clock::Real();  // not owned; outlives the database
};

class PostgresDatabase;

// A connection taken from the pool, given back when the lease goes. A connection found
// broken is closed then, and a new one opened at the next Acquire.
class PgLease {
 public:
  PgLease(PostgresDatabase* db, std::unique_ptr<PgConnection> conn)
      : db_(db), conn_(std::move(conn)) {}
  PgLease(PgLease&&) = default;
  PgLease& operator=(PgLease&&) = delete;
  ~PgLease();
  PgConnection* operator->() const { return conn_.get(); }
  PgConnection& operator*() const { return *conn_; }

 private:
  PostgresDatabase* db_;
  std::unique_ptr<PgConnection> conn_;
};

// Thread safe.
class PostgresDatabase {
 public:
  // Opens one connection at once (so a wrong DSN or password fails here, naming the
  // server's reason); the others as they are first needed.
  static absl::StatusOr<std::unique_ptr<PostgresDatabase>> Open(const PostgresOptions& options);
  ~PostgresDatabase();

  // A free connection, waiting up to options.acquire_timeout; `what` names the caller in
  // the error.
  absl::StatusOr<PgLease> Acquire(absl::string_view what);

  // Runs `body(PgTx&)` in one transaction on a free connection, as PgConnection::Transaction
  // does: on any error, ROLLBACK and the first error. `body` returns absl::Status or
  // absl::StatusOr<T>, and so does Transaction (with the body's value, once committed).
  // `what` names the operation in every error, the wait for a connection's included.
  template <typename Fn, typename R = std::invoke_result_t<Fn, PgTx&>>
  R Transaction(absl::string_view what, Fn body) {
    absl::StatusOr<PgLease> conn = Acquire(what);
    if (!conn.ok()) return conn.status();
    PgTx tx(**conn, what);
    std::optional<R> result;
    absl::Status st = (*conn)->Transaction(what, [&]() -> absl::Status {
      result.emplace(body(tx));
      if constexpr (std::is_same_v<R, absl::Status>) {
        return *result;
      } else {
        return result->status();
      }
    });
    if (!st.ok()) return st;
    return *std::move(result);
  }
  // One statement on a free connection, outside any transaction (it commits alone); errors
  // as PgConnection::Exec's. The result outlives the connection's lease.
  absl::StatusOr<PgResult> Exec(absl::string_view what, absl::string_view sql,
                                const PgParams& params = PgParams());
  // As Exec, for statements whose rows do not matter.
  absl::Status Run(absl::string_view what, absl::string_view sql,
                   const PgParams& params = PgParams());

 private:
  friend class PgLease;
  explicit PostgresDatabase(const PostgresOptions& options) : options_(options) {}
  absl::StatusOr<std::unique_ptr<PgConnection>> Connect();
  void Release(std::unique_ptr<PgConnection> conn);

  const PostgresOptions options_;
  absl::Mutex mu_;
  std::vector<std::unique_ptr<PgConnection>> idle_ ABSL_GUARDED_BY(mu_);
  int open_ ABSL_GUARDED_BY(mu_) = 0;  // idle and leased, and those being opened
};

// The password in `path` (store.password_file), without its trailing newline. Refused,
// naming the file, when it is not a regular file or when its group or others may read it
// (libpq's rule for ~/.pgpass): a password others can read is not one.
absl::StatusOr<std::string> ReadPasswordFile(const std::string& path);

}  // namespace sandgate::store

#endif  // SANDGATE_STORE_POSTGRES_CONNECTION_H_
