#include "tests/store/store_backends.h"

#include <stdlib.h>

#include <cstdlib>

#include "gtest/gtest.h"
#include "store/postgres_store.h"
#include "store/sqlite_store.h"
#include "tests/fakes/postgres_server.h"

namespace sandgate::store::testing {
namespace {

class SqliteBackend : public Backend {
 public:
  SqliteBackend() {
    char tmpl[] = "/tmp/sg-store-XXXXXX";
    dir_ = mkdtemp(tmpl);
  }
  ~SqliteBackend() override { std::system(("rm -rf " + dir_).c_str()); }
  absl::StatusOr<std::unique_ptr<Store>> Open() override {
    auto s = SqliteStore::Open(dir_ + "/state.db");
    if (!s.ok()) return s.status();
    return std::unique_ptr<Store>(std::move(*s));
  }

 private:
  std::string dir_;
};

class PostgresBackend : public Backend {
 public:
  explicit PostgresBackend(std::string dsn) : dsn_(std::move(dsn)) {}
  absl::StatusOr<std::unique_ptr<Store>> Open() override {
    PostgresOptions o;
    o.dsn = dsn_;
    o.pool_size = 4;
    auto s = PostgresStore::Open(o);
    if (!s.ok()) return s.status();
    return std::unique_ptr<Store>(std::move(*s));
  }

 private:
  std::string dsn_;
};

}  // namespace

BackendKind Sqlite() {
  return {"sqlite", [] { return std::unique_ptr<Backend>(new SqliteBackend()); }};
}

BackendKind Postgres() {
  return {"postgres", []() -> std::unique_ptr<Backend> {
            auto dsn = sandgate::testing::PostgresServer::Shared().CreateDatabase();
            EXPECT_TRUE(dsn.ok()) << dsn.status();
            return std::make_unique<PostgresBackend>(dsn.ok() ? *dsn : "");
          }};
}

}  // namespace sandgate::store::testing
