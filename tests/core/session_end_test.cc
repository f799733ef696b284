// A kept session's end (SessionManager: Close, Recover; a takeover's ReplicaMember) against a
// daemon killed at any point: a store that dies after its Nth write (every later write fails,
// as after a SIGKILL) never leaves a closed session whose own log does not end, and the next
// start then ends every session with exactly one session.closed.
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "core/replica.h"
#include "core/session_manager.h"
#include "gtest/gtest.h"
#include "store/sqlite_replica_store.h"
#include "store/sqlite_store.h"
#include "tests/common/temp_dir.h"
#include "tests/fakes/dying_store.h"
#include "tests/fakes/fake_clock.h"
#include "tests/fakes/host_sandbox.h"

namespace sandgate::core {
namespace {

// What a daemon left in `store` for session `id`, read as a follower and GetSession would.
struct Left {
  bool final = false;
  int closed_events = 0;
  bool log_ended = false;  // its last event is session.closed
};

Left Inspect(store::Store& store, const v1::Session& s) {
  Left left;
  left.final = s.status() != v1::SESSION_STATUS_ACTIVE;
  std::vector<v1::Event> events = *store.ReadEvents(s.id(), 0, 10000);
  for (const v1::Event& e : events) left.closed_events += e.type() == "session.closed";
  left.log_ended = !events.empty() && events.back().type() == "session.closed";
  return left;
}

// A manager on `store` as the daemon builds one.
struct Daemon {
  Daemon(store::Store* store, testing::FakeClock* clock)
      : events(store, clock),
        provider(store),
        sessions(SessionManagerDeps{
            &config, store, clock, {{"local", &provider}}, nullptr, &events, nullptr}) {}
  Config config;
  EventLog events;
  testing::HostProvider provider;
  SessionManager sessions;
};

// One daemon life on a fresh database whose store dies after `budget` writes: a session is
// created and closed. Returns whether it died before the close was stored (false: the whole
// life fit in `budget`).
bool KillAfter(int budget) {
  const std::string at = absl::StrCat("killed after write ", budget);
  testing::ScopedTempDir dir("sg-session-end");
  EXPECT_TRUE(dir.ok());
  std::unique_ptr<store::SqliteStore> inner = *store::SqliteStore::Open(dir.path() + "/s.db");
  testing::DyingStore dying(inner.get(), budget);
  testing::FakeClock clock;
  const Caller caller{"team-a", false};
  {
    Daemon daemon(&dying, &clock);
    v1::CreateSessionRequest req;
    req.mutable_sandbox()->add_setup_commands("echo ready");
    absl::StatusOr<v1::Session> s = daemon.sessions.Create(caller, req, nullptr);
    if (s.ok()) {
      EXPECT_TRUE(daemon.sessions.Close(caller, s->id(), "done").ok()) << at;
    }
  }
  // The process is gone: what it left must never be a closed session whose log does not end
  // (a follower would wait to its deadline), nor an ended log under a live record.
  const std::vector<v1::Session> left = *inner->ListSessions("", true);
  for (const v1::Session& s : left) {
    const Left l = Inspect(*inner, s);
    EXPECT_EQ(l.final, l.log_ended)
        << at << ": final record " << l.final << ", log ends with session.closed " << l.log_ended;
  }
  // The next start settles what was left: every session ends, with exactly one session.closed.
  {
    Daemon next(inner.get(), &clock);
    EXPECT_TRUE(next.sessions.Recover().ok()) << at;
  }
  const std::vector<v1::Session> settled = *inner->ListSessions("", true);
  EXPECT_EQ(settled.size(), left.size()) << at;
  for (const v1::Session& s : settled) {
    const Left l = Inspect(*inner, s);
    EXPECT_TRUE(l.final && l.log_ended) << at << ": session " << s.id();
    EXPECT_EQ(l.closed_events, 1) << at << ": session " << s.id();
  }
  return dying.died();
}

// Every write of a session's life in turn (how many it makes varies with the log's batching).
// Its end was the record, the sandbox's close, then session.closed: a kill after the record
// left a closed session whose log never ended, and recovery, which ends live sessions only,
// never ended it.
TEST(SessionEndTest, AKillAtAnyWriteLeavesNoClosedSessionWithoutItsSessionClosed) {
  int budget = 0;
  while (KillAfter(budget) && !HasFailure()) {
    ++budget;
    ASSERT_LT(budget, 100) << "a session this short never fit in its store writes";
  }
}

// A lost replica's kept session, ended by the replica that takes it over, whose store dies
// after `budget` writes. Returns whether it died before the session's end was stored.
bool TakeoverKilledAfter(int budget) {
  constexpr absl::Duration kLease = absl::Seconds(15);
  const std::string at = absl::StrCat("takeover killed after write ", budget);
  testing::ScopedTempDir dir("sg-session-takeover");
  EXPECT_TRUE(dir.ok());
  const std::string path = dir.path() + "/s.db";
  std::unique_ptr<store::SqliteStore> inner = *store::SqliteStore::Open(path);
  std::unique_ptr<store::SqliteReplicaStore> leases = *store::SqliteReplicaStore::Open(path);
  testing::FakeClock clock;
  store::Lease lost;
  lost.replica_id = "a";
  lost.expires_at = clock.Now() + kLease;
  EXPECT_TRUE(leases->Join(lost, clock.Now()).ok());
  v1::Session session;
  session.set_id("s-a");
  session.set_tenant("t");
  session.set_status(v1::SESSION_STATUS_ACTIVE);
  session.set_replica("a");
  EXPECT_TRUE(inner->CreateSession(session, "").ok());
  testing::DyingStore dying(inner.get(), budget);
  {
    EventLog events(&dying, &clock);
    ReplicaDeps deps;
    deps.leases = leases.get();
    deps.store = &dying;
    deps.journal = &dying;
    deps.events = &events;
    deps.clock = &clock;
    ReplicaConfig config;
    config.id = "b";
    config.lease_period = kLease;
    config.renew_interval = absl::Seconds(5);
    ReplicaMember b(deps, config);
    EXPECT_TRUE(b.Join().ok()) << at;
    b.Start();
    // b renews on time until a's lease ends, when it takes a over.
    for (absl::Duration t; t < kLease; t += config.renew_interval) {
      EXPECT_TRUE(clock.BlockUntilSettled(3));  // b's heartbeat and cleaner, the event log's timer
      clock.Advance(config.renew_interval);
    }
    // Twice: the heartbeat hands the cleanup to the cleaner, which takes it at its next look.
    EXPECT_TRUE(clock.BlockUntilSettled(3) && clock.BlockUntilSettled(3));
    EXPECT_EQ(b.takeovers(), dying.died() ? 0 : 1) << at;
  }
  const Left l = Inspect(*inner, *inner->GetSession("s-a"));
  EXPECT_EQ(l.final, l.log_ended) << at << ": final record " << l.final
                                  << ", log ends with session.closed " << l.log_ended;
  if (!dying.died()) {
    EXPECT_TRUE(l.final && l.closed_events == 1) << at;
  }
  return dying.died();
}

// The takeover stored the record, then appended session.closed: a kill between them left the
// session closed with a log that never ended, and no later takeover ends a closed session.
TEST(SessionEndTest, ATakeoverKilledAtAnyWriteLeavesNoClosedSessionWithoutItsSessionClosed) {
  int budget = 0;
  while (TakeoverKilledAfter(budget) && !HasFailure()) {
    ++budget;
    ASSERT_LT(budget, 20) << "a takeover this short never fit in its store writes";
  }
}

}  // namespace
}  // namespace sandgate::core
