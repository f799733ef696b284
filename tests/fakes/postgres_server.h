// PostgresServer: a throwaway PostgreSQL server for tests, in a temporary directory,
// listening on a Unix socket only (listen_addresses='').
//
// initdb and postgres come from PostgreSQL 15's bin directory ($SANDGATE_PG_BINDIR, default
// /usr/lib/postgresql/15/bin; Debian's `postgresql` package, which deploy/setup.sh
// installs). PostgreSQL refuses to run as root, so when the test runs as root the server
// runs as `nobody`. The server is a child of the process, killed with it (a parent-death
// signal) if a test crashes, and the next fixture removes the directory it left; on a
// clean exit the destructor stops it and removes the directory. One server per test binary
// (Shared()) keeps a suite fast; each test or suite takes a fresh database from it.
//
//   PostgresServer& pg = PostgresServer::Shared();
//   std::string dsn = pg.CreateDatabase();     // "host=/tmp/sg-pg-… dbname=t3 user=sandgate"
//
// Authentication is trust for the superuser `sandgate`; kPasswordUser must give
// kPassword (scram-sha-256), for tests of the password path.
//
// Thread safe.
#ifndef SANDGATE_TESTS_FAKES_POSTGRES_SERVER_H_
#define SANDGATE_TESTS_FAKES_POSTGRES_SERVER_H_

#include <sys/types.h>

#include <cstdint>
#include <memory>
#include <string>

#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"

namespace sandgate::testing {

class PostgresServer {
 public:
  static constexpr char kPasswordUser[] = "sg_password_user";
  static constexpr char kPassword[] = "correct horse battery staple";

  // initdb, start, wait until it accepts connections. Must be called from a thread that
  // lives as long as the server (the parent-death signal follows the forking thread).
  // Tests run with fsync off (durability is not what they check); a benchmark comparing
  // stores passes true, so PostgreSQL flushes as a production server would.
  static absl::StatusOr<std::unique_ptr<PostgresServer>> Start(bool fsync = false);
  // The process-wide server, started at first use from the calling thread (the test's main
  // thread) and stopped at exit. A test fails (not skips) if it cannot start.
  static PostgresServer& Shared();
  ~PostgresServer();

  // A new empty database owned by the superuser; returns its DSN.
  absl::StatusOr<std::string> CreateDatabase();
  // The DSN of database `db` as user `user`.
  std::string Dsn(const std::string& db, const std::string& user = "sandgate") const;
  const std::string& dir() const { return dir_; }

 private:
  PostgresServer() = default;
  absl::Status Init(bool fsync);

  std::string dir_;  // data/ inside, the socket beside it
  pid_t pid_ = -1;
  absl::Mutex mu_;
  int databases_ ABSL_GUARDED_BY(mu_) = 0;
};

// The single number `sql` returns (a count(*)) on database `dsn`, on a connection of its
// own: for checking what a daemon left in its tables.
absl::StatusOr<int64_t> QueryCount(const std::string& dsn, const char* sql);

}  // namespace sandgate::testing

#endif  // SANDGATE_TESTS_FAKES_POSTGRES_SERVER_H_
