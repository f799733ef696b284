// Replica: this daemon as one of several sharing a store. What it guarantees, and why, is
// docs/replicas.md ("The lease", "Fencing", "When a replica dies"); in short:
//  - a lease row (store/replica_store.h), renewed every renew_interval to the store's clock's
//    now + lease_period; a renewal the store did not answer is tried again soon
//    (kRenewRetryFirst doubling to kRenewRetryMost). Without it, no new work (CanTakeWork).
//  - at the moment another replica's lease ends (the store's clock), the first to claim it
//    (exactly one) cleans up after it on a thread of its own: remote resources swept, local
//    ones reported, then one commit: running runs failed, kept sessions expired, slots
//    freed, waiting runs left to the shared queue, the cleanup marked done.
//  - each Join is a new epoch, and every write of this replica is fenced by it
//    (Store::FenceWrites); a replica taken over ends its work, sweeps its host and rejoins;
//    one whose id joined again elsewhere only stops.
//
//   ReplicaJournal journal(store, config.replica.id);       // providers record through it
//   ReplicaMember member(deps, config.replica);
//   SANDGATE_RETURN_IF_ERROR(member.Join());                  // before recovering
//   member.Start();                                           // heartbeat + watching
//   ... member.CanTakeWork() at every new run and session ...
//   member.Stop();                                            // on drain
//
// Thread safe.
#ifndef SANDGATE_CORE_REPLICA_H_
#define SANDGATE_CORE_REPLICA_H_

#include <cstdint>
#include <deque>
#include <functional>
#include <map>
#include <memory>
#include <set>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "common/clock.h"
#include "common/journal.h"
#include "core/config.h"
#include "core/event_log.h"
#include "core/recovery.h"
#include "core/tenants.h"
#include "sandbox/sandbox.h"
#include "store/admission_store.h"
#include "store/replica_store.h"
#include "store/store.h"

namespace sandgate::core {

// "<host name>-<8 hex digits of sha256(state_dir)>": stable across restarts, and distinct for
// two daemons on one host with different state directories.
std::string DefaultReplicaId(const std::string& state_dir);

// The resource journal as one replica sees it: every entry it records carries its id (in
// details["replica"], so both stores keep it without a schema change), and List() returns
// its own entries (and those recorded before replicas existed, which have none).
// A view for cleaning up after another replica lists that replica's entries of the given
// providers only. An erase the store did not take (a resource deleted while the database
// was away) still fails, and is kept: RetryErases (the heartbeat, after each renewal the
// store answered, and the drain) erases it once the store answers, so the entry of a deleted
// resource does not stay until the next start. Thread safe; `base` outlives it.
class ReplicaJournal : public ResourceJournal {
 public:
  ReplicaJournal(ResourceJournal* base, std::string replica)
      : base_(base), id_(std::move(replica)), unerased_(std::make_unique<Unerased>()) {}
  // `replica`'s entries of `providers`, recorded under its id (not the unmarked ones).
  static ReplicaJournal Of(ResourceJournal* base, std::string replica,
                           std::set<std::string> providers);

  absl::Status Record(const JournalEntry& entry) override;
  absl::Status Erase(const std::string& id) override;
  absl::StatusOr<std::vector<JournalEntry>> List() override;
  // Erases again what an Erase could not, of the entries still this replica's (another's
  // entry under the same id since is left alone); those the store still refuses stay kept.
  void RetryErases();

  static constexpr const char* kKey = "replica";

 private:
  struct Unerased {
    absl::Mutex mu;
    std::set<std::string> ids ABSL_GUARDED_BY(mu);
  };

  ResourceJournal* const base_;
  const std::string id_;
  bool include_unmarked_ = true;
  std::set<std::string> providers_;     // empty: all
  std::unique_ptr<Unerased> unerased_;  // behind a pointer: the view stays movable (Of)
};

// Not owned; all outlive the member.
struct ReplicaDeps {
  store::ReplicaStore* leases = nullptr;
  store::Store* store = nullptr;
  ResourceJournal* journal = nullptr;  // the shared journal, every replica's entries
  EventLog* events = nullptr;
  Clock* clock = nullptr;
  // Providers whose resources another host can delete (not "local").
  std::map<std::string, sandbox::Provider*> remote_providers;
  // The shared queue: a lost replica's waiting runs in it are left to it. May be null.
  store::AdmissionStore* admission = nullptr;
  Metrics* metrics = nullptr;  // may be null
  // Once taken over: ends every run and session still going on here (their records were
  // settled by the claimer), returning when they have ended. May be empty.
  std::function<void(const std::string& why)> end_local_work;
  // Every provider of this replica, local ones too: what the ended work leaves on this host
  // is swept through them before it joins again. Empty: no sweep.
  std::map<std::string, sandbox::Provider*> own_providers;
  // The journal this replica's providers record through: its erases the store did not take
  // are tried again after each renewal the store answered. May be null.
  ReplicaJournal* own_journal = nullptr;
};

// A renewal the store did not answer is tried again after this, doubling up to the most.
inline constexpr absl::Duration kRenewRetryFirst = absl::Milliseconds(200);
inline constexpr absl::Duration kRenewRetryMost = absl::Seconds(2);
// A replica whose clock and the store's differ by more than this says so (replica.clock_skew,
// the metric sandgate_replica_clock_skew_seconds); it acts on the store's clock alone.
inline constexpr absl::Duration kClockSkewBound = absl::Seconds(1);
// The heartbeat looks at the store's clock at least this often; a change of more than
// kClockStepBound in the offset between the two clocks is a step of this replica's clock,
// undone in the times it counts (replica.clock_stepped).
inline constexpr absl::Duration kClockCheck = absl::Seconds(2);
inline constexpr absl::Duration kClockStepBound = absl::Seconds(1);
// A replica the store did not answer claims no lease until this long after: every replica's
// retries after a store outage land within two kRenewRetryMost of its own last failure, and
// a lease that ended meanwhile is renewed by its owner first.
inline constexpr absl::Duration kClaimGraceAfterOutage = absl::Seconds(4);  // 2 × kRenewRetryMost

class ReplicaMember {
 public:
  ReplicaMember(ReplicaDeps deps, ReplicaConfig config);
  ~ReplicaMember() { Stop(); }

  // Makes the lease this replica's own, for lease_period from now. While another replica is
  // cleaning up after this one (a restart within its claim), waits on the clock and tries
  // again, for at most two lease periods; then the error.
  absl::Status Join();
  // Starts the heartbeat thread: renews the lease every renew_interval and, at the moment
  // another replica's lease ends, tries to claim its cleanup. Call once, after Join.
  void Start();
  // Ends the thread (and the background sweeps of cleanups, by `deadline`). Idempotent.
  void Stop(absl::Time deadline = absl::InfinitePast());

  // OK while the lease is held; UNAVAILABLE, saying why, once it has ended unrenewed or
  // another replica has taken it over.
  absl::Status CanTakeWork() const;
  const std::string& id() const { return config_.id; }
  // Cleanups this replica has done (claimed and finished).
  int takeovers() const;
  // The epoch of the lease as last joined (0 before Join).
  int64_t epoch() const;
  // How far this replica's clock was ahead of the store's at its last look (negative:
  // behind), the round trip included.
  absl::Duration clock_skew() const;

 private:
  void Loop();
  // One try at making the lease this replica's own at a new epoch; logs `event`.
  absl::Status JoinOnce(absl::Time now, const char* event);
  // Once taken over: ends the local work and sweeps this host (once), then tries to join.
  // Once superseded: ends the local work only.
  void Rejoin(absl::Time now);
  // Sweeps `view`'s entries through `providers`; what they cannot tell yet goes on until Stop.
  absl::Status Sweep(std::unique_ptr<ReplicaJournal> view,
                     const std::map<std::string, sandbox::Provider*>* providers);
  // Renews the lease to the store's now (`store_now`, its error if unread); notes its loss.
  // False when the store did not answer (try again soon).
  bool Renew(absl::Time now, const absl::StatusOr<absl::Time>& store_now);
  // Claims whatever lease has ended, by the store's clock, and hands its cleanup to the
  // cleaner thread; returns when the next one may end (InfiniteFuture: none).
  absl::Time Watch(absl::Time now, const absl::StatusOr<absl::Time>& store_now);
  // Notes the offset of this replica's clock from the store's; returns the step of this
  // replica's clock since the last note (zero for none), already undone in lease_end_ and
  // held_since_.
  absl::Duration NoteSkew(absl::Time now, absl::Time store_now);
  // The cleaner thread: the cleanups Watch claimed, one at a time, off the heartbeat thread.
  void CleanLoop();
  // Whether this replica may claim another's lease now.
  bool MayClaim(absl::Time now) const;
  // The cleanup after `dead`, once claimed.
  absl::Status CleanUpAfter(const store::Lease& dead);
  // Logs what of `dead`'s only its own host can delete (replica.resources_left).
  void ReportLeftOnItsHost(const store::Lease& dead);

  const ReplicaDeps deps_;
  const ReplicaConfig config_;

  mutable absl::Mutex mu_;
  bool stop_ ABSL_GUARDED_BY(mu_) = false;
  absl::Time lease_end_ ABSL_GUARDED_BY(mu_) = absl::InfinitePast();
  // Since when the lease has been held without a gap.
  absl::Time held_since_ ABSL_GUARDED_BY(mu_) = absl::InfiniteFuture();
  std::string lost_ ABSL_GUARDED_BY(mu_);  // why work is refused; "" while the lease holds
  int takeovers_ ABSL_GUARDED_BY(mu_) = 0;
  int64_t epoch_ ABSL_GUARDED_BY(mu_) = 0;
  bool taken_over_ ABSL_GUARDED_BY(mu_) = false;  // a renewal said so; until it joins again
  bool work_ended_ ABSL_GUARDED_BY(mu_) = false;  // end_local_work and the sweep are done
  // Another process joined under this id since (a renewal said so): this one ends its work
  // and never renews or joins again, which would fence the live one out.
  bool superseded_ ABSL_GUARDED_BY(mu_) = false;
  absl::Duration skew_ ABSL_GUARDED_BY(mu_);
  bool skew_known_ ABSL_GUARDED_BY(mu_) = false;
  // When the store last failed to answer a renewal or a look at the leases.
  absl::Time last_unanswered_ ABSL_GUARDED_BY(mu_) = absl::InfinitePast();
  bool skewed_ ABSL_GUARDED_BY(mu_) = false;  // |skew_| past kClockSkewBound, as last said
  // Claimed leases waiting for the cleaner, and those it has not finished (not claimed again
  // by this replica meanwhile).
  std::deque<store::Lease> to_clean_ ABSL_GUARDED_BY(mu_);
  std::set<std::string> cleaning_ ABSL_GUARDED_BY(mu_);
  // The journal views and sweepers of cleanups whose deferred sweeps go on in the background.
  std::vector<std::unique_ptr<ReplicaJournal>> views_ ABSL_GUARDED_BY(mu_);
  std::vector<std::unique_ptr<JournalSweeper>> sweepers_ ABSL_GUARDED_BY(mu_);
  std::thread thread_;
  std::thread cleaner_;
};

}  // namespace sandgate::core

#endif  // SANDGATE_CORE_REPLICA_H_
