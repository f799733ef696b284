// OwnerLookup on one SQLite file shared by the store and the lease table, on a FakeClock:
// which calls are served here, which are forwarded and to where, and what a caller is told
// when the owner is gone.
#include "core/owner.h"

#include <memory>

#include "absl/strings/match.h"
#include "gtest/gtest.h"
#include "store/sqlite_replica_store.h"
#include "store/sqlite_store.h"
#include "tests/common/temp_dir.h"
#include "tests/fakes/fake_clock.h"

namespace sandgate::core {
namespace {

constexpr absl::Duration kLease = absl::Seconds(15);

class OwnerLookupTest : public ::testing::Test {
 protected:
  void SetUp() override {
    ASSERT_TRUE(dir_.ok());
    auto store = store::SqliteStore::Open(dir_.path() + "/state.db");
    ASSERT_TRUE(store.ok()) << store.status();
    store_ = std::move(*store);
    auto leases = store::SqliteReplicaStore::Open(dir_.path() + "/state.db");
    ASSERT_TRUE(leases.ok()) << leases.status();
    leases_ = std::move(*leases);
    ASSERT_TRUE(leases_->Join(LeaseOf("a", "tcp:127.0.0.1:7001"), clock_.Now()).ok());
    ASSERT_TRUE(leases_->Join(LeaseOf("b", "tcp:127.0.0.1:7002"), clock_.Now()).ok());
  }
  store::Lease LeaseOf(const std::string& id, const std::string& address) {
    store::Lease l;
    l.replica_id = id;
    l.address = address;
    l.expires_at = clock_.Now() + kLease;
    return l;
  }
  void PutSession(const std::string& id, const std::string& replica,
                  v1::SessionStatus status = v1::SESSION_STATUS_ACTIVE) {
    v1::Session s;
    s.set_id(id);
    s.set_tenant("t");
    s.set_status(status);
    s.set_replica(replica);
    ASSERT_TRUE(store_->PutSession(s).ok());
  }
  void PutRun(const std::string& id, const std::string& replica, v1::RunStatus status) {
    v1::Run r;
    r.set_id(id);
    r.set_tenant("t");
    r.set_status(status);
    r.set_replica(replica);
    ASSERT_TRUE(store_->PutRun(r).ok());
  }

  testing::ScopedTempDir dir_{"sg-owner"};
  testing::FakeClock clock_;
  std::unique_ptr<store::SqliteStore> store_;
  std::unique_ptr<store::SqliteReplicaStore> leases_;
  static Caller Who(const std::string& tenant) {
    Caller c;
    c.tenant = tenant;
    return c;
  }
  const Caller tenant_ = Who("t");
};

TEST_F(OwnerLookupTest, AnotherLiveReplicasSessionIsForwardedToItsAddress) {
  PutSession("s-1", "a");
  OwnerLookup b(store_.get(), leases_.get(), "b", &clock_);
  absl::StatusOr<std::optional<Peer>> peer = b.OfSession(tenant_, "s-1");
  ASSERT_TRUE(peer.ok()) << peer.status();
  ASSERT_TRUE(peer->has_value());
  EXPECT_EQ((*peer)->replica, "a");
  EXPECT_EQ((*peer)->address, "tcp:127.0.0.1:7001");
}

TEST_F(OwnerLookupTest, OwnOrUnknownOrUnmarkedOrEndedOrHiddenIsServedHere) {
  PutSession("s-own", "b");
  PutSession("s-old", "");  // made before replicas existed
  PutSession("s-closed", "a", v1::SESSION_STATUS_CLOSED);
  PutSession("s-expired", "a", v1::SESSION_STATUS_EXPIRED);
  OwnerLookup b(store_.get(), leases_.get(), "b", &clock_);
  for (const char* id : {"s-own", "s-old", "s-closed", "s-expired", "s-none", ""}) {
    absl::StatusOr<std::optional<Peer>> peer = b.OfSession(tenant_, id);
    ASSERT_TRUE(peer.ok()) << id << ": " << peer.status();
    EXPECT_FALSE(peer->has_value()) << id;
  }
  // Another tenant's live session: the local path answers NOT_FOUND, as it does directly.
  PutSession("s-1", "a");
  absl::StatusOr<std::optional<Peer>> other = b.OfSession(Who("u"), "s-1");
  ASSERT_TRUE(other.ok());
  EXPECT_FALSE(other->has_value());
  Caller op = Who("ops");
  op.is_operator = true;
  EXPECT_TRUE(b.OfSession(op, "s-1")->has_value());
}

TEST_F(OwnerLookupTest, LiveRunsAreForwardedAndFinishedOnesAnsweredByTheRecord) {
  PutRun("r-running", "a", v1::RUN_STATUS_RUNNING);
  PutRun("r-queued", "a", v1::RUN_STATUS_QUEUED);
  PutRun("r-failed", "a", v1::RUN_STATUS_FAILED);
  OwnerLookup b(store_.get(), leases_.get(), "b", &clock_);
  EXPECT_EQ((*b.OfRun(tenant_, "r-running"))->replica, "a");
  EXPECT_EQ((*b.OfRun(tenant_, "r-queued"))->replica, "a");
  EXPECT_FALSE(b.OfRun(tenant_, "r-failed")->has_value());
  EXPECT_FALSE(b.OfRun(tenant_, "r-none")->has_value());
}

TEST_F(OwnerLookupTest, AnOwnerWhoseLeaseEndedIsUnavailableNamingItNotOneNanosecondBefore) {
  PutSession("s-1", "a");
  OwnerLookup b(store_.get(), leases_.get(), "b", &clock_);
  // b renews; a does not.
  clock_.Advance(kLease - absl::Nanoseconds(1));
  ASSERT_TRUE(leases_->Renew("b", 1, clock_.Now() + kLease).ok());
  EXPECT_TRUE(b.OfSession(tenant_, "s-1")->has_value());
  clock_.Advance(absl::Nanoseconds(1));
  absl::StatusOr<std::optional<Peer>> gone = b.OfSession(tenant_, "s-1");
  EXPECT_EQ(gone.status().code(), absl::StatusCode::kUnavailable);
  EXPECT_TRUE(absl::StrContains(gone.status().message(),
                                "session s-1 is owned by replica a, which stopped renewing its "
                                "lease (it ended at "))
      << gone.status();
  // Taken over: the message names who is cleaning up.
  ASSERT_TRUE(*leases_->ClaimTakeover("a", "b", clock_.Now(), clock_.Now() + kLease));
  gone = b.OfSession(tenant_, "s-1");
  EXPECT_EQ(gone.status().code(), absl::StatusCode::kUnavailable);
  EXPECT_TRUE(absl::StrContains(gone.status().message(), "replica b is cleaning up after it"))
      << gone.status();
}

TEST_F(OwnerLookupTest, AnOwnerWithNoLeaseOrNoAddressIsUnavailableSayingSo) {
  PutSession("s-1", "c");
  OwnerLookup b(store_.get(), leases_.get(), "b", &clock_);
  EXPECT_TRUE(absl::StrContains(b.OfSession(tenant_, "s-1").status().message(),
                                "session s-1 is owned by replica c, which holds no lease"));
  ASSERT_TRUE(leases_->Join(LeaseOf("c", ""), clock_.Now()).ok());
  absl::Status st = b.OfSession(tenant_, "s-1").status();
  EXPECT_EQ(st.code(), absl::StatusCode::kUnavailable);
  EXPECT_TRUE(absl::StrContains(st.message(), "advertises no address")) << st;
}

TEST_F(OwnerLookupTest, WhatThisReplicaHoldsIsServedHereWithoutAskingTheStore) {
  PutSession("s-1", "a");  // what the store says does not matter then
  PutRun("r-1", "a", v1::RUN_STATUS_RUNNING);
  HeldHere held{[](const std::string& id) { return id == "s-1"; },
                [](const std::string& id) { return id == "r-1"; }};
  OwnerLookup b(store_.get(), leases_.get(), "b", &clock_, held);
  EXPECT_FALSE(b.OfSession(tenant_, "s-1")->has_value());
  EXPECT_FALSE(b.OfRun(tenant_, "r-1")->has_value());
  PutSession("s-2", "a");
  EXPECT_TRUE(b.OfSession(tenant_, "s-2")->has_value());
}

}  // namespace
}  // namespace sandgate::core
