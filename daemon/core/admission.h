// Admission: who runs next when there is more work than room.
//
// Runs wait in one queue per tenant and are admitted round robin across tenants, so a tenant
// with a thousand queued runs delays another tenant's single run by at most one run per
// tenant. A run is admitted only while the global concurrency limit, its tenant's
// concurrency quota and (for a run that needs its own sandbox) the machine's sandbox budget
// all have room. The queue is bounded.
//
// The queue and the tenants' quotas are an AdmissionStore's (store/admission_store.h): with a
// shared one (the replicas of one store) they are gateway-wide, any replica may claim any
// waiting run, and Admit claims, while THIS replica has room of its own (max_running, the
// machine's sandbox budget), the next runs in the gateway's fair order, which may be runs
// another replica queued (the caller starts them from their kept requests). Without one, the
// queue keeps a store of its own in memory, for this daemon alone: one code path either way.
// A run queued while this replica has room for it, and is next, is admitted by Enqueue
// itself (claimed in the same transaction), so no other replica takes it first.
//
//   AdmissionQueue q(/*max_running=*/4, /*max_queued=*/1024, &budget);
//   SANDGATE_ASSIGN_OR_RETURN(bool now, q.Enqueue({run_id, tenant, /*tenant_limit=*/2, true}));
//   if (now) Start(ticket);                       // admitted as it was queued
//   for (const auto& t : q.Admit()) Start(t);     // … and when one ends:
//   q.Done(ticket); for (const auto& t : q.Admit()) Start(t);
//
// Thread safe.
#ifndef SANDGATE_CORE_ADMISSION_H_
#define SANDGATE_CORE_ADMISSION_H_

#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/synchronization/mutex.h"
#include "common/clock.h"
#include "store/admission_store.h"
#include "store/notifier.h"

namespace sandgate::core {

// Sandboxes alive at once on this machine: a run's own sandbox and every kept session take
// one. Thread safe.
class SandboxBudget {
 public:
  explicit SandboxBudget(uint32_t max) : max_(max) {}
  bool TryTake();
  // Returns one; calls the release listener (outside the lock) so waiting runs can start.
  void Give();
  // Returns one taken a moment ago and never used, without calling the listener (the taker
  // is the one looking for work).
  void Untake();
  uint32_t used();
  uint32_t max() const { return max_; }
  void set_on_release(std::function<void()> fn);

 private:
  const uint32_t max_;
  absl::Mutex mu_;
  uint32_t used_ ABSL_GUARDED_BY(mu_) = 0;
  std::function<void()> on_release_ ABSL_GUARDED_BY(mu_);
};

// A store write that settles a run (its finish, its quota slot) is tried again after this,
// doubling up to the most.
inline constexpr absl::Duration kReleaseRetryFirst = absl::Milliseconds(100);
inline constexpr absl::Duration kReleaseRetryMost = absl::Seconds(2);
// How long a release is tried before it is left to the takeover or the restart.
inline constexpr absl::Duration kReleaseRetryFor = absl::Minutes(5);

class AdmissionQueue {
 public:
  struct Ticket {
    std::string run_id;
    std::string tenant;
    uint32_t tenant_limit = 0;  // the tenant's concurrent-run quota; 0 = none
    bool needs_sandbox = true;  // false for runs in a kept session
  };

  // Shared across replicas: the store, this replica's id, the clock for the queue's times.
  // All outlive the queue. Without a store the queue keeps its own in memory.
  struct Shared {
    store::AdmissionStore* store = nullptr;
    std::string replica;
    Clock* clock = nullptr;
  };

  AdmissionQueue(uint32_t max_running, uint32_t max_queued, SandboxBudget* budget)
      : AdmissionQueue(max_running, max_queued, budget, Shared()) {}
  AdmissionQueue(uint32_t max_running, uint32_t max_queued, SandboxBudget* budget, Shared shared);
  // Whether the queue is shared with other replicas (a store was given).
  bool shared() const { return shared_.store != nullptr; }

  // RESOURCE_EXHAUSTED naming the limit when the queue is full. True when the run was claimed
  // for this replica as it was queued, with this replica's room (store::AdmissionStore::Enqueue,
  // which also stores `queued`): the caller starts it, and calls Done when it ends; false when
  // it waits (Admit admits it). Shared: `only_here` when only this replica can start the run
  // (its kept session is here, or its request is not kept in the store).
  absl::StatusOr<bool> Enqueue(Ticket ticket, bool only_here = false, v1::Event* queued = nullptr);
  // Takes a waiting run out (cancelled before it started); false if it is not waiting.
  bool Remove(const std::string& run_id);
  // Admits every run the limits allow now, in fair order.
  std::vector<Ticket> Admit();
  // An admitted run has ended; its room (and sandbox, if it took one) is free again, and its
  // tenant's slot in the store goes back exactly once (store::AdmissionStore::Release); a
  // store error is retried with backoff for kReleaseRetryFor, then left to a takeover or restart.
  void Done(const Ticket& ticket);
  // Waiting runs in the order they would be admitted if room appeared one run at a time
  // (shared: every replica's); with `plus`, as if it waited too.
  std::vector<std::string> Order(const Ticket* plus = nullptr);
  // Runs waiting (shared: in the whole gateway).
  size_t waiting();
  size_t running();  // on this replica
  // Shared: whether this replica claimed `run_id` (and has not called Done): a run it queued
  // that is neither waiting nor claimed here was claimed by another replica. Waits for a
  // claim under way.
  bool ClaimedHere(const std::string& run_id);
  // Shared: this replica claims nothing (neither in Admit nor at Enqueue) while `gate` says
  // it may not take work (its lease lost or fenced: core/replica.h CanTakeWork). Set once the
  // replica exists; until then every claim is allowed. Called without this queue's locks.
  void SetClaimGate(std::function<absl::Status()> gate);
  // Whether the gate lets this replica take work now (always, without one).
  bool MayClaim();
  // Shared: the replica that queued `run_id`, which this one claimed ("" when it has not).
  std::string QueuedBy(const std::string& run_id);

 private:
  const uint32_t max_running_;
  const uint32_t max_queued_;
  SandboxBudget* const budget_;  // not owned
  absl::Mutex mu_;
  uint32_t running_ ABSL_GUARDED_BY(mu_) = 0;

  const Shared shared_;
  // Without a shared store: this daemon's own, in memory.
  const std::unique_ptr<store::AdmissionStore> own_;
  store::AdmissionStore* const store_;  // shared_.store or own_
  // Held across a claim and the note of what it claimed, so ClaimedHere never answers
  // between the two.
  absl::Mutex claim_mu_ ABSL_ACQUIRED_BEFORE(mu_);
  // The runs claimed here, each with the replica that queued it.
  std::map<std::string, std::string> claimed_here_ ABSL_GUARDED_BY(mu_);
  std::function<absl::Status()> claim_gate_ ABSL_GUARDED_BY(mu_);
};

// When a replica of a shared queue looks for runs it may claim: at once when nudged (a
// notification on store::kQueueChannel: a run was queued, or room freed, somewhere in the
// gateway; or another replica claimed a run `replica` queued, store::ClaimedFrom), and `poll`
// after its last look otherwise, so a lost notification delays a waiting run by at most
// `poll`. Waits on the injected clock.
//
//   ClaimWakeups wakeups(clock, notifier, absl::Seconds(1), "replica-a");
//   SANDGATE_RETURN_IF_ERROR(wakeups.Start());
//   while (wakeups.Wait()) Dispatch();         // another thread: wakeups.Stop()
//
// Thread safe. The clock and the notifier (null: the poll only, as on SQLite) outlive it.
class ClaimWakeups {
 public:
  ClaimWakeups(Clock* clock, store::Notifier* notifier, absl::Duration poll,
               std::string replica = "")
      : clock_(clock),
        notifier_(notifier),
        poll_(poll),
        claimed_from_(store::ClaimedFrom(replica)) {}
  ~ClaimWakeups();
  // Subscribes to the queue's notifications.
  absl::Status Start();
  // Ends the wait under way now (or the next one) at once.
  void Nudge();
  // Returns true when nudged since the last return, or `poll` after the wait began; false
  // once Stop was called.
  bool Wait();
  void Stop();

 private:
  Clock* const clock_;
  store::Notifier* const notifier_;
  const absl::Duration poll_;
  const std::string claimed_from_;  // the payload of a claim of one of this replica's runs
  uint64_t subscription_ = 0;       // set by Start, before any notification can come
  absl::Mutex mu_;
  bool nudged_ ABSL_GUARDED_BY(mu_) = false;
  bool stopped_ ABSL_GUARDED_BY(mu_) = false;
};

// The order round robin across tenants gives `waiting` (each tenant's runs in their order),
// starting with the first tenant after `last_tenant` by name and wrapping around.
std::vector<std::string> RoundRobinOrder(
    const std::map<std::string, std::vector<std::string>>& waiting, const std::string& last_tenant);

}  // namespace sandgate::core

#endif  // SANDGATE_CORE_ADMISSION_H_
