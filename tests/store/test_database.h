// One database on the test binary's shared throwaway PostgreSQL server, and the connection
// pools its store instances (one per replica, as replicas do) are made on. The pools live as
// long as the TestDatabase, so they outlive the stores a fixture makes on them.
#ifndef SANDGATE_TESTS_STORE_TEST_DATABASE_H_
#define SANDGATE_TESTS_STORE_TEST_DATABASE_H_

#include <memory>
#include <string>
#include <vector>

#include "gtest/gtest.h"
#include "store/postgres_connection.h"
#include "store/postgres_store.h"
#include "tests/fakes/postgres_server.h"

namespace sandgate::testing {

class TestDatabase {
 public:
  TestDatabase() {
    absl::StatusOr<std::string> dsn = PostgresServer::Shared().CreateDatabase();
    EXPECT_TRUE(dsn.ok()) << dsn.status();
    if (dsn.ok()) dsn_ = *dsn;
  }
  const std::string& dsn() const { return dsn_; }
  // The database's store (the run records' tables); null (and a test failure) on error.
  std::unique_ptr<store::PostgresStore> OpenStore() {
    store::PostgresOptions options;
    options.dsn = dsn_;
    options.pool_size = 2;
    auto s = store::PostgresStore::Open(options);
    EXPECT_TRUE(s.ok()) << s.status();
    return s.ok() ? std::move(*s) : nullptr;
  }
  // A new pool of `size` connections; null (and a test failure) on error.
  store::PostgresDatabase* NewPool(int size) {
    store::PostgresOptions options;
    options.dsn = dsn_;
    options.pool_size = size;
    auto db = store::PostgresDatabase::Open(options);
    EXPECT_TRUE(db.ok()) << db.status();
    if (!db.ok()) return nullptr;
    pools_.push_back(std::move(*db));
    return pools_.back().get();
  }

 private:
  std::string dsn_;
  std::vector<std::unique_ptr<store::PostgresDatabase>> pools_;
};

}  // namespace sandgate::testing

#endif  // SANDGATE_TESTS_STORE_TEST_DATABASE_H_
