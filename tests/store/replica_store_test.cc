// The ReplicaStore contract, run on every implementation: a lease is claimed for cleanup
// only once it has ended, by exactly one of the replicas racing for it, and a restarted
// replica waits for a cleanup under way. Each backend gives two instances on one database,
// as two replicas have.
#include "store/replica_store.h"

#include <atomic>
#include <memory>
#include <thread>
#include <vector>

#include "gtest/gtest.h"
#include "store/postgres_replica_store.h"
#include "store/sqlite_replica_store.h"
#include "tests/common/temp_dir.h"
#include "tests/fakes/postgres_server.h"

namespace sandgate::store {
namespace {

constexpr absl::Duration kNs = absl::Nanoseconds(1);
const absl::Time kT0 = absl::FromUnixSeconds(1800000000);
const absl::Duration kPeriod = absl::Seconds(15);

// A database for one test; Connect() may be called several times: each is another replica.
class Backend {
 public:
  virtual ~Backend() = default;
  virtual std::unique_ptr<ReplicaStore> Connect() = 0;
};

class SqliteBackend : public Backend {
 public:
  std::unique_ptr<ReplicaStore> Connect() override {
    auto s = SqliteReplicaStore::Open(dir_.path() + "/state.db");
    EXPECT_TRUE(s.ok()) << s.status();
    return s.ok() ? std::move(*s) : nullptr;
  }

 private:
  testing::ScopedTempDir dir_{"sg-leases"};
};

// One database on the binary's shared throwaway server; each Connect a pool of its own.
class PostgresBackend : public Backend {
 public:
  PostgresBackend() {
    absl::StatusOr<std::string> dsn = sandgate::testing::PostgresServer::Shared().CreateDatabase();
    EXPECT_TRUE(dsn.ok()) << dsn.status();
    if (dsn.ok()) dsn_ = *dsn;
  }
  std::unique_ptr<ReplicaStore> Connect() override {
    PostgresOptions options;
    options.dsn = dsn_;
    options.pool_size = 2;
    auto db = PostgresDatabase::Open(options);
    EXPECT_TRUE(db.ok()) << db.status();
    if (!db.ok()) return nullptr;
    auto s = PostgresReplicaStore::Create(db->get());
    EXPECT_TRUE(s.ok()) << s.status();
    pools_.push_back(std::move(*db));
    return s.ok() ? std::move(*s) : nullptr;
  }
  ~PostgresBackend() override = default;

 private:
  std::string dsn_;
  std::vector<std::unique_ptr<PostgresDatabase>> pools_;  // outlive the stores (fixture order)
};

// A lease held by its own replica.
Lease Own(const std::string& id, const std::string& address, absl::Time expires_at) {
  Lease lease;
  lease.replica_id = id;
  lease.address = address;
  lease.expires_at = expires_at;
  return lease;
}

using BackendFactory = std::unique_ptr<Backend> (*)();

class ReplicaStoreContract : public ::testing::TestWithParam<BackendFactory> {
 protected:
  void SetUp() override {
    backend_ = GetParam()();
    a_ = backend_->Connect();
    b_ = backend_->Connect();
    ASSERT_NE(a_, nullptr);
    ASSERT_NE(b_, nullptr);
  }
  std::unique_ptr<Backend> backend_;
  std::unique_ptr<ReplicaStore> a_, b_;  // replica "a"'s and replica "b"'s connections
};

TEST_P(ReplicaStoreContract, JoinedLeaseIsSeenByOthersAndRenewed) {
  ASSERT_TRUE(a_->Join(Own("a", "tcp:127.0.0.1:7001", kT0 + kPeriod), kT0).ok());
  ASSERT_TRUE(a_->Renew("a", kT0 + 2 * kPeriod).ok());
  absl::StatusOr<std::vector<Lease>> leases = b_->ListLeases();
  ASSERT_TRUE(leases.ok()) << leases.status();
  ASSERT_EQ(leases->size(), 1u);
  EXPECT_EQ((*leases)[0].replica_id, "a");
  EXPECT_EQ((*leases)[0].address, "tcp:127.0.0.1:7001");
  EXPECT_EQ((*leases)[0].expires_at, kT0 + 2 * kPeriod);
  EXPECT_EQ((*leases)[0].taken_over_by, "");
  EXPECT_EQ(a_->Renew("nobody", kT0).code(), absl::StatusCode::kNotFound);
}

TEST_P(ReplicaStoreContract, ClaimedNotBeforeTheLeaseEndsAndAtIt) {
  ASSERT_TRUE(a_->Join(Own("a", "", kT0 + kPeriod), kT0).ok());
  const absl::Time end = kT0 + kPeriod;
  EXPECT_FALSE(*b_->ClaimTakeover("a", "b", end - kNs, end + kPeriod)) << "1 ns before the end";
  EXPECT_TRUE(*b_->ClaimTakeover("a", "b", end, end + kPeriod)) << "at the end";
  EXPECT_FALSE(*a_->ClaimTakeover("a", "c", end, end + kPeriod)) << "claimed once only";
  absl::Status renew = a_->Renew("a", end + kPeriod);
  EXPECT_EQ(renew.code(), absl::StatusCode::kFailedPrecondition) << renew;
  EXPECT_NE(renew.message().find("taken over by replica b"), absl::string_view::npos) << renew;
}

TEST_P(ReplicaStoreContract, RacingClaimersWinOnceOnly) {
  const absl::Time end = kT0 + kPeriod;
  for (int round = 0; round < 20; ++round) {
    const std::string dead = "dead-" + std::to_string(round);
    ASSERT_TRUE(a_->Join(Own(dead, "", end), kT0).ok());
    std::atomic<int> wins{0};
    std::vector<std::thread> claimers;
    for (ReplicaStore* s : {a_.get(), b_.get(), a_.get(), b_.get()}) {
      claimers.emplace_back([&, s, i = claimers.size()] {
        absl::StatusOr<bool> won =
            s->ClaimTakeover(dead, "claimer-" + std::to_string(i), end, end + kPeriod);
        EXPECT_TRUE(won.ok()) << won.status();
        if (won.ok() && *won) ++wins;
      });
    }
    for (std::thread& t : claimers) t.join();
    EXPECT_EQ(wins.load(), 1) << "round " << round;
  }
}

TEST_P(ReplicaStoreContract, RestartedReplicaWaitsForTheCleanupThenRejoins) {
  const absl::Time end = kT0 + kPeriod;
  ASSERT_TRUE(a_->Join(Own("a", "", end), kT0).ok());
  ASSERT_TRUE(*b_->ClaimTakeover("a", "b", end, end + kPeriod));
  absl::Status early = a_->Join(Own("a", "", end + 2 * kPeriod), end + kNs);
  EXPECT_EQ(early.code(), absl::StatusCode::kUnavailable) << early;
  EXPECT_NE(early.message().find("replica b is cleaning up after replica a"),
            absl::string_view::npos)
      << early;
  ASSERT_TRUE(b_->FinishTakeover("a", "b").ok());
  EXPECT_FALSE(*b_->ClaimTakeover("a", "c", end + kPeriod, end + 2 * kPeriod))
      << "a cleaned-up lease is not claimed again";
  ASSERT_TRUE(a_->Join(Own("a", "", end + 2 * kPeriod), end + kNs).ok());
  EXPECT_TRUE(a_->Renew("a", end + 3 * kPeriod).ok()) << "its own again";
}

TEST_P(ReplicaStoreContract, ClaimOfADeadClaimerIsTakenOverWhenItEnds) {
  const absl::Time end = kT0 + kPeriod;
  ASSERT_TRUE(a_->Join(Own("a", "", end), kT0).ok());
  ASSERT_TRUE(*b_->ClaimTakeover("a", "b", end, end + kPeriod));
  EXPECT_FALSE(*a_->ClaimTakeover("a", "c", end + kPeriod - kNs, end + 2 * kPeriod));
  EXPECT_TRUE(*a_->ClaimTakeover("a", "c", end + kPeriod, end + 2 * kPeriod));
  EXPECT_EQ(b_->FinishTakeover("a", "b").code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_TRUE(a_->FinishTakeover("a", "c").ok());
}

INSTANTIATE_TEST_SUITE_P(Postgres, ReplicaStoreContract,
                         ::testing::Values(+[]() -> std::unique_ptr<Backend> {
                           return std::make_unique<PostgresBackend>();
                         }),
                         [](const auto&) { return std::string("two_pools"); });

INSTANTIATE_TEST_SUITE_P(Sqlite, ReplicaStoreContract,
                         ::testing::Values(+[]() -> std::unique_ptr<Backend> {
                           return std::make_unique<SqliteBackend>();
                         }),
                         [](const auto&) { return std::string("two_connections"); });

}  // namespace
}  // namespace sandgate::store
