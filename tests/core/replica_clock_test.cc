// Leases on the store's clock (issue 21 item 5), with replicas on one real PostgreSQL whose
// own clocks are 30 s off: lease times were the hosts' own, so a replica 30 s behind wrote
// leases that had already ended (taken over at once, again and again) and one 30 s ahead
// hid its death for 45 s. Every lease time is on PostgreSQL's clock now; a replica only
// counts durations on its own, and says how far off it is (ReplicaMember::clock_skew).
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "core/replica.h"
#include "gtest/gtest.h"
#include "store/postgres_replica_store.h"
#include "tests/fakes/fake_clock.h"
#include "tests/store/test_database.h"

namespace sandgate::core {
namespace {

// Short enough to wait out in real time: the database's clock is the real one.
constexpr absl::Duration kLease = absl::Seconds(2);
constexpr absl::Duration kRenew = absl::Milliseconds(500);
constexpr absl::Duration kOff = absl::Seconds(30);

// One replica on its own clock: its store and lease connections, its event log.
struct Replica {
  Replica(testing::TestDatabase& db, const std::string& id, absl::Time clock_start)
      : clock(clock_start) {
    store = db.OpenStore();
    leases = *store::PostgresReplicaStore::Create(&store->database());
    events = std::make_unique<EventLog>(store.get(), &clock);
    ReplicaDeps deps;
    deps.leases = leases.get();
    deps.store = store.get();
    deps.journal = store.get();
    deps.events = events.get();
    deps.clock = &clock;
    ReplicaConfig config;
    config.id = id;
    config.lease_period = kLease;
    config.renew_interval = kRenew;
    member = std::make_unique<ReplicaMember>(deps, config);
  }

  testing::FakeClock clock;
  std::unique_ptr<store::PostgresStore> store;
  std::unique_ptr<store::PostgresReplicaStore> leases;
  std::unique_ptr<EventLog> events;
  std::unique_ptr<ReplicaMember> member;
};

// Moves every replica's clock on by `d` in steps of a renewal, each time once its timers (the
// event log's, the heartbeat, the cleaner) have run.
void Advance(const std::vector<Replica*>& replicas, absl::Duration d) {
  for (absl::Duration done; done < d; done += kRenew) {
    for (Replica* r : replicas) {
      ASSERT_TRUE(r->clock.BlockUntilSettled(3));
      r->clock.Advance(kRenew);
    }
  }
  // Twice: a heartbeat hands a claimed cleanup to its cleaner, which takes it at its next look.
  for (Replica* r : replicas) ASSERT_TRUE(r->clock.BlockUntilSettled(3));
  for (Replica* r : replicas) ASSERT_TRUE(r->clock.BlockUntilSettled(3));
}

TEST(ReplicaClockTest, AReplicaWhoseClockIsBehindTheStoresIsNotTakenOver) {
  testing::TestDatabase db;
  Replica behind(db, "behind", absl::Now() - kOff);
  Replica right(db, "right", absl::Now());
  ASSERT_TRUE(behind.member->Join().ok());
  ASSERT_TRUE(right.member->Join().ok());
  behind.member->Start();
  right.member->Start();
  // Past the watcher's own first lease period (it claims nothing before) and the lease the
  // slow one's clock would have written.
  Advance({&behind, &right}, 3 * kLease);
  EXPECT_EQ(right.member->takeovers(), 0);
  EXPECT_TRUE(behind.member->CanTakeWork().ok()) << behind.member->CanTakeWork();
  // Both fake clocks moved on while the database's barely did: what is said is their offset.
  EXPECT_LT(absl::AbsDuration(behind.member->clock_skew() - right.member->clock_skew() + kOff),
            absl::Seconds(1))
      << "said, not acted on: " << behind.member->clock_skew() << " vs "
      << right.member->clock_skew();
}

TEST(ReplicaClockTest, AReplicaWhoseClockIsAheadIsTakenOverWhenItsLeaseEndsByTheStoresClock) {
  testing::TestDatabase db;
  Replica ahead(db, "ahead", absl::Now() + kOff);
  Replica right(db, "right", absl::Now());
  ASSERT_TRUE(ahead.member->Join().ok());
  ASSERT_TRUE(right.member->Join().ok());
  ahead.member->Stop();  // it dies at once, without a renewal
  right.member->Start();
  // By the database's clock its lease ends kLease after it joined; its own clock would have
  // put the end 30 s later.
  std::this_thread::sleep_for(absl::ToChronoSeconds(kLease) + std::chrono::milliseconds(500));
  Advance({&right}, 2 * kLease);
  EXPECT_EQ(right.member->takeovers(), 1);
}

}  // namespace
}  // namespace sandgate::core
