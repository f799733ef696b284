// The SnapshotStore contract (store/snapshot_store.h) on both implementations: SQLite on a
// temporary state file, PostgreSQL on tests/fakes' throwaway server; two store instances on
// one database, as two replicas (or two daemons on one state file) would have.
#include "store/snapshot_store.h"

#include <cstdlib>
#include <functional>
#include <memory>
#include <string>

#include "absl/time/time.h"
#include "core/sandbox_spec.h"
#include "gtest/gtest.h"
#include "store/postgres_snapshot_store.h"
#include "store/sqlite_snapshot_store.h"
#include "tests/fakes/postgres_server.h"

namespace sandgate::store {
namespace {

struct Kind {
  std::string name;
  // Two instances on one fresh database.
  std::function<std::pair<std::unique_ptr<SnapshotStore>, std::unique_ptr<SnapshotStore>>()> open;
  friend void PrintTo(const Kind& k, std::ostream* os) { *os << k.name; }
};

Kind Sqlite() {
  return {"sqlite", [] {
            char tmpl[] = "/tmp/sg-snap-XXXXXX";
            const std::string path = std::string(mkdtemp(tmpl)) + "/state.db";
            auto a = SqliteSnapshotStore::Open(path);
            auto b = SqliteSnapshotStore::Open(path);
            EXPECT_TRUE(a.ok() && b.ok());
            return std::make_pair(std::unique_ptr<SnapshotStore>(std::move(*a)),
                                  std::unique_ptr<SnapshotStore>(std::move(*b)));
          }};
}

Kind Postgres() {
  return {"postgres", [] {
            // The databases outlive the stores: kept for the test binary's life.
            static std::vector<std::unique_ptr<PostgresDatabase>>* dbs =
                new std::vector<std::unique_ptr<PostgresDatabase>>();
            auto dsn = sandgate::testing::PostgresServer::Shared().CreateDatabase();
            EXPECT_TRUE(dsn.ok()) << dsn.status();
            PostgresOptions o;
            o.dsn = *dsn;
            auto db = PostgresDatabase::Open(o);
            EXPECT_TRUE(db.ok()) << db.status();
            dbs->push_back(std::move(*db));
            auto a = PostgresSnapshotStore::Open(dbs->back().get());
            auto b = PostgresSnapshotStore::Open(dbs->back().get());
            EXPECT_TRUE(a.ok() && b.ok());
            return std::make_pair(std::unique_ptr<SnapshotStore>(std::move(*a)),
                                  std::unique_ptr<SnapshotStore>(std::move(*b)));
          }};
}

v1::Snapshot Record(const std::string& id, const std::string& tenant, const std::string& session,
                    int64_t created_s) {
  v1::Snapshot s;
  s.set_id(id);
  s.set_tenant(tenant);
  s.set_session_id(session);
  s.set_size_bytes(1024);
  *s.mutable_created_at() = core::ToProto(absl::FromUnixSeconds(created_s));
  s.mutable_sandbox()->set_isolation("gvisor");
  return s;
}

class SnapshotStoreTest : public ::testing::TestWithParam<Kind> {
 protected:
  void SetUp() override { std::tie(a_, b_) = GetParam().open(); }
  std::unique_ptr<SnapshotStore> a_, b_;
};

TEST_P(SnapshotStoreTest, ARecordWrittenByOneIsReadByTheOther) {
  ASSERT_TRUE(a_->Create(Record("snap-1", "t1", "s1", 100)).ok());
  absl::StatusOr<v1::Snapshot> got = b_->Get("snap-1");
  ASSERT_TRUE(got.ok()) << got.status();
  EXPECT_EQ(got->session_id(), "s1");
  EXPECT_EQ(got->sandbox().isolation(), "gvisor");
  EXPECT_EQ(b_->Get("snap-2").status().code(), absl::StatusCode::kNotFound);
  EXPECT_EQ(b_->Create(Record("snap-1", "t2", "s9", 1)).code(), absl::StatusCode::kAlreadyExists);
}

TEST_P(SnapshotStoreTest, ListIsPerTenantNewestFirstAndBySession) {
  ASSERT_TRUE(a_->Create(Record("snap-1", "t1", "s1", 100)).ok());
  ASSERT_TRUE(b_->Create(Record("snap-2", "t1", "s2", 200)).ok());
  ASSERT_TRUE(a_->Create(Record("snap-3", "t2", "s1", 300)).ok());
  ASSERT_TRUE(a_->Create(Record("snap-4", "t1", "s1", 400)).ok());
  auto all = b_->List("t1", "");
  ASSERT_TRUE(all.ok());
  ASSERT_EQ(all->size(), 3u);
  EXPECT_EQ((*all)[0].id(), "snap-4");
  EXPECT_EQ((*all)[2].id(), "snap-1");
  auto of_s1 = b_->List("t1", "s1");
  ASSERT_TRUE(of_s1.ok());
  ASSERT_EQ(of_s1->size(), 2u);
  EXPECT_EQ((*of_s1)[1].id(), "snap-1");
  EXPECT_TRUE(b_->List("nobody", "")->empty());
}

TEST_P(SnapshotStoreTest, DeleteAndTheRetentionScan) {
  ASSERT_TRUE(a_->Create(Record("snap-old", "t1", "s1", 100)).ok());
  ASSERT_TRUE(a_->Create(Record("snap-new", "t2", "s2", 300)).ok());
  auto old = b_->ListCreatedBefore(absl::FromUnixSeconds(200));
  ASSERT_TRUE(old.ok());
  EXPECT_EQ(*old, std::vector<std::string>{"snap-old"});
  // Strictly before: a record made at the cutoff stays.
  EXPECT_TRUE(b_->ListCreatedBefore(absl::FromUnixSeconds(100))->empty());
  EXPECT_TRUE(*b_->Delete("snap-old"));
  EXPECT_FALSE(*a_->Delete("snap-old"));
  EXPECT_EQ(a_->Get("snap-old").status().code(), absl::StatusCode::kNotFound);
}

INSTANTIATE_TEST_SUITE_P(Stores, SnapshotStoreTest, ::testing::Values(Sqlite(), Postgres()),
                         [](const auto& info) { return info.param.name; });

}  // namespace
}  // namespace sandgate::store
