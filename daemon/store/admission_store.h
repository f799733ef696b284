// AdmissionStore: the run queue and the tenant quotas every replica of one store shares, so a
// tenant limited to 2 concurrent runs gets 2 in the whole gateway, not 2 per replica.
//
// A waiting run is a row (run id, tenant, whether it needs a sandbox of its own, when and by
// whom it was queued, its place). A replica with room of its own (core/admission.h decides
// that: its max_concurrent_runs and its machine's sandbox budget) claims the next run in fair
// round-robin order across tenants (the cursor is the tenant claimed last, gateway-wide),
// among tenants whose claimed runs in the WHOLE gateway are under their concurrent_runs quota,
// and marks it claimed by itself, atomically. The claimed row stays until the run ends
// (Release), its replica restarts (ReleaseReplica) or is taken over, so the count is the count
// of runs running anywhere. Any replica may claim any waiting run (it starts it from the kept
// request, Store::GetRunRequest), except a run in a kept session, which only its session's
// replica can start (`only_replica`).
//
// runs_per_minute (a window of start times per tenant) and live_sessions (a slot per kept
// session) are counted in the same store, exactly: each check and its count is one
// transaction serialised on the tenant's row.
//
// Why these locks (PostgreSQL, READ COMMITTED). Each tenant has a row in admission_tenants
// holding its claimed-run count, its concurrent_runs quota and the order of its last claim. A
// claim locks one tenant row with `FOR UPDATE SKIP LOCKED`, chosen in round-robin order among
// tenants under their quota: a second claimer at the same moment skips the tenant being
// claimed and takes the next one (so claimers do not queue behind each other), and a tenant
// row changed by a claim that committed after the statement began is re-checked against its
// latest version before it is locked, so `running < quota` holds on the count every claim and
// release writes under that same lock. That makes the count exact without one global lock.
// The run's row is then taken `FOR UPDATE SKIP LOCKED` too: a cancel deleting it at that
// moment holds it, and the claimer takes the tenant's next run instead. The cursor is the
// tenant with the highest claim order (a sequence), read without a lock: two claimers that
// read the same cursor take the next two tenants, which is the round robin anyway. On SQLite
// every operation is one BEGIN IMMEDIATE transaction: SQLite has one writer at a time.
//
// Times come from the caller (the injected clock), never from the database.
//
//   SANDGATE_ASSIGN_OR_RETURN(bool started_here,
//                             admission->Enqueue({run_id, tenant, 2, true, "", "replica-a"}, 1024,
//                                                /*room=*/{true, true}));
//   SANDGATE_ASSIGN_OR_RETURN(std::optional<QueuedRun> next,
//                             admission->Claim("replica-b", /*sandbox_room=*/true));
//   ... when it ends: admission->Release(next->run_id);
//
// Thread safe. Implementations: SqliteAdmissionStore, PostgresAdmissionStore
// (store/sqlite_admission_store.h, store/postgres_admission_store.h).
#ifndef SANDGATE_STORE_ADMISSION_STORE_H_
#define SANDGATE_STORE_ADMISSION_STORE_H_

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "absl/time/time.h"
#include "common/errors.h"
#include "sandgate/v1/sandgate.pb.h"

namespace sandgate::store {

// The channel every replica is nudged on when the queue changes (a run queued or removed,
// room freed by a release): payload "", sent in the transaction that changed it, so a replica
// with room looks for a run at once instead of at its next poll (store/notifier.h).
inline constexpr char kQueueChannel[] = "sandgate_queue";
// The payload a claim of a run another replica queued sends on kQueueChannel: that replica
// (`queuer`) looks at once, sees the run claimed, and lets go of it, instead of at its next
// claim. Other replicas ignore it: nothing freed or queued for them.
inline std::string ClaimedFrom(const std::string& queuer) {
  return absl::StrCat("claimed-from ", queuer);
}

struct QueuedRun {
  std::string run_id;
  std::string tenant;
  uint32_t tenant_limit = 0;  // the tenant's concurrent_runs quota; 0 = none
  bool needs_sandbox = true;  // false for a run in a kept session
  // "" = any replica may claim it; else only this one (a run in a kept session: its
  // session's replica).
  std::string only_replica;
  std::string enqueued_by;  // the replica that queued it
  absl::Time enqueued_at = absl::UnixEpoch();
  std::string claimed_by;  // "" while it waits
};

// What the replica queueing a run has room for (core/admission.h decides it), so Enqueue can
// claim the run for it at once.
struct RoomHere {
  bool run_slot = false;  // fewer runs running there than its max_concurrent_runs
  bool sandbox = false;   // a unit of its machine's sandbox budget in hand
};

// What waits, for telling runs their place (core/admission.h computes the round robin).
struct WaitingRuns {
  std::vector<QueuedRun> runs;  // in the order they were queued
  std::string last_tenant;      // the tenant claimed last, gateway-wide ("" none yet)
};

class AdmissionStore {
 public:
  virtual ~AdmissionStore() = default;

  // Queues `run` (tenant_limit becomes the tenant's quota for every claim from now on). A run
  // already queued keeps its row and place (a takeover queueing it again); false. When
  // `max_waiting` > 0 and that many runs already wait in the gateway, RESOURCE_EXHAUSTED
  // naming max_queued_runs.
  //
  // When the replica queueing it (run.enqueued_by) has `room` and the run is the one
  // Claim(run.enqueued_by, room.sandbox) would take next (its tenant under its gateway-wide
  // quota, and no run that replica could start waiting ahead of it in fair order), it is
  // claimed for that replica in the same transaction and true is returned: a run sent to a
  // replica with room starts there, and no other replica's claim can take it between the
  // queueing and the claim. Otherwise it waits (false), claimable by any replica at once.
  //
  // `queued`, if given, is the run's `run.queued` event (seq and time set by the caller's
  // event log): where the run records are in this database it is stored in the same
  // transaction, its position made 1 when the run was claimed here, so a replica that claims
  // the run finds it and continues the log after it. Where it is not stored (a queue alone, a
  // run already queued) its seq is made 0: the caller appends it.
  virtual absl::StatusOr<bool> Enqueue(const QueuedRun& run, uint32_t max_waiting, RoomHere room,
                                       v1::Event* queued) = 0;
  absl::StatusOr<bool> Enqueue(const QueuedRun& run, uint32_t max_waiting, RoomHere room) {
    return Enqueue(run, max_waiting, room, nullptr);
  }
  // Claims for `replica` the next waiting run in fair order that its tenant's quota admits
  // and `replica` may start: one needing a sandbox only when `sandbox_room`. nullopt when
  // there is none. The run's record (Run.replica, where the store's records share this
  // database) becomes the claimer's in the same transaction, so no read of the record ever
  // finds a claimed run still owned by its queuer (a cancel forwarded to it, a takeover of a
  // claimer that died before it started the run), and from its commit the store refuses the
  // queuer's appends to the run's log (Store::FenceWrites), so the claimer, reading the log's
  // last seq after its claim, continues it densely. The same holds for a claim in Enqueue.
  virtual absl::StatusOr<std::optional<QueuedRun>> Claim(const std::string& replica,
                                                         bool sandbox_room) = 0;
  // Takes a waiting run out (cancelled before it started); false if it is not waiting
  // (claimed meanwhile, or not queued).
  virtual absl::StatusOr<bool> Remove(const std::string& run_id) = 0;
  // A claimed run has ended: its tenant's slot is free. OK when it holds none. Where the run
  // records share the database, the write that makes a run's record final (SUCCEEDED and
  // after) frees its slot in its own transaction (a trigger on the records), so a finish is
  // one commit: record, terminal event and slot; this call then finds nothing to free.
  virtual absl::Status Release(const std::string& run_id) = 0;
  // `replica` has restarted: the slots of the runs it had claimed and of its kept sessions
  // are free, its claimed runs and those only it could start are out of the queue (they are
  // queued again from the store's records, RecoverRuns). At a takeover the commit that marks
  // the cleanup done frees them (a trigger on the lease row; its claimed runs that had not
  // started wait again).
  virtual absl::Status ReleaseReplica(const std::string& replica) = 0;
  virtual absl::StatusOr<WaitingRuns> Waiting() = 0;
  // The run's row, waiting or claimed (claimed_by); nullopt when it is not in the queue.
  virtual absl::StatusOr<std::optional<QueuedRun>> Find(const std::string& run_id) = 0;
  // How many runs wait in the gateway.
  virtual absl::StatusOr<uint64_t> WaitingCount() = 0;

  // runs_per_minute: counts a start of `tenant` at `now` when fewer than `limit` were counted
  // in the minute before it (a start leaves the window exactly one minute after it was
  // counted) and returns nullopt; otherwise counts nothing and returns when the oldest
  // start leaves the window.
  virtual absl::StatusOr<std::optional<absl::Time>> CountStart(const std::string& tenant,
                                                               uint32_t limit, absl::Time now) = 0;

  // live_sessions: takes a slot for kept session `session_id` of `tenant` on `replica` when
  // the tenant holds fewer than `limit` (0: no limit, always taken); false otherwise.
  virtual absl::StatusOr<bool> TakeSessionSlot(const std::string& tenant,
                                               const std::string& session_id,
                                               const std::string& replica, uint32_t limit) = 0;
  // The session has ended. OK when it holds none.
  virtual absl::Status ReleaseSessionSlot(const std::string& session_id) = 0;
};

// The errors every implementation gives, worded once.
inline absl::Status QueueFull(uint64_t waiting, uint32_t max_waiting) {
  return errors::ResourceExhausted(absl::StrCat("the run queue is full (", waiting,
                                                " runs waiting in the gateway; max_queued_runs ",
                                                max_waiting, ")"));
}

}  // namespace sandgate::store

#endif  // SANDGATE_STORE_ADMISSION_STORE_H_
