// SessionManager: kept sessions — created, used, kept alive, reaped, closed.
//
// A session is idle only when nothing is in flight: no run, no command, no transfer, no
// open stream (each holds a Lease) — and then only after `idle_timeout` since the last lease
// ended or the last KeepAlive. It is never kept past `max_lifetime`, in use or not; shortly
// before that (config.session_expiry_warning, at most half the lifetime) every lease holder is
// warned once, so open streams can say so. When it is closed or reaped, every lease's watched
// CancelToken fires with the reason, so a run or a command in it ends saying why, and the
// sandbox is deleted; then its final record and its own log's session.closed are stored in one
// write (EventLog::Finish), so no kill leaves a closed session whose log does not end.
//
// A session whose sandbox ends on its own (sandbox::Session::Health: a hosted container that
// expired, a local sandbox whose processes died) is EXPIRED with the sandbox's reason as soon
// as the provider tells (Session::OnEnded wakes the reaper) or a call finds it, whichever is
// first; a lease on it is then FAILED_PRECONDITION naming that reason.
//
// Three clocks, never mixed: the caller's RPC deadline belongs to the RPC (server/); the
// per-command timeout to sandbox::ExecRequest; idle_timeout and max_lifetime to this class.
//
// Thread safe. Time comes from the injected clock, and the reaper waits on it until the next
// due time (an idle or lifetime end, a warning), woken early when a new session or a released
// lease moves that time earlier: with a fake clock each rule takes effect at its exact instant.
#ifndef SANDGATE_CORE_SESSION_MANAGER_H_
#define SANDGATE_CORE_SESSION_MANAGER_H_

#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "common/cancel.h"
#include "common/clock.h"
#include "core/admission.h"
#include "core/config.h"
#include "core/event_log.h"
#include "core/executor.h"
#include "core/images.h"
#include "core/metrics.h"
#include "core/sandbox_maker.h"
#include "core/tenants.h"
#include "core/warm_pool.h"
#include "sandbox/sandbox.h"
#include "store/admission_store.h"
#include "store/store.h"

namespace sandgate::core {

struct SessionManagerDeps {
  const Config* config = nullptr;  // all not owned; outlive the manager
  store::Store* store = nullptr;
  Clock* clock = nullptr;
  std::map<std::string, sandbox::Provider*> providers;
  SandboxBudget* budget = nullptr;  // may be null: no machine-wide budget
  // A kept session's own event log (session.created, files, setup commands,
  // every network.decision, session.closed), keyed by its id:
  // StreamEvents(run_id = session id) reads it. May be null in tests: nothing
  // is recorded.
  EventLog* events = nullptr;
  Metrics* metrics = nullptr;  // may be null
  // Ready sandboxes: a request of a shape it keeps takes one instead of waiting
  // for a create. May be null: every session is made on demand.
  WarmPool* warm_pool = nullptr;
  // The quotas replicas of one store share (store/admission_store.h): live_sessions is
  // counted there, across the gateway. May be null: counted here.
  store::AdmissionStore* admission = nullptr;
  // Built sandbox images (SandboxSpec.image). May be null: only the host's root.
  const ImageStore* images = nullptr;
};

// What the holder of a lease is told while it holds it.
struct LeaseWatch {
  // Cancelled (with the reason) when the session closes or expires. Must outlive the lease.
  CancelToken* cancel = nullptr;
  // Called once when max_lifetime is near: from the reaper's thread, or from Acquire when
  // the session is already in the warning window. Never after the lease is destroyed (it
  // runs under the session's lock, which the lease's destructor takes), so it must be quick
  // and must not call back into the manager.
  std::function<void(const v1::SessionExpiring&)> expiring;
  // Every network decision of the session's sandbox while the lease is held
  // (besides the session's own log), under the same rules as `expiring`.
  std::function<void(const sandbox::NetworkDecision&)> network_decision = nullptr;
};

class SessionManager {
 public:
  class Lease;

  explicit SessionManager(SessionManagerDeps deps);
  ~SessionManager();  // CloseAll, then stops the reaper

  // At start: sessions a previous daemon left ACTIVE are EXPIRED (their sandboxes were swept
  // from the journal), each record with its log's session.closed in one write.
  absl::Status Recover();

  // Validates the request, then takes a ready sandbox of its shape from the warm
  // pool if there is one (the session gets that sandbox's id, and a `notice` in its
  // log says so) or makes one the way runs do
  // (core/sandbox_maker.h): sandbox.files placed, sandbox.setup_commands run (a
  // failing one deletes the sandbox and fails the call with the command's
  // stderr), all of it in the session's own log. The same idempotency_key with
  // the same request returns the same session; with a different request,
  // FAILED_PRECONDITION. Blocks, also until the session's log so far is stored: a
  // caller that reads it next finds session.created and what setup wrote.
  absl::StatusOr<v1::Session> Create(const Caller& caller, const v1::CreateSessionRequest& req,
                                     const CancelToken* cancel);
  absl::StatusOr<v1::Session> Get(const Caller& caller, const std::string& id);
  // Every field of an Exec request, against this daemon's limits
  // (core/request_validation.h).
  absl::Status CheckExec(const v1::ExecRequest& request) const;
  absl::StatusOr<std::vector<v1::Session>> List(const Caller& caller, bool include_closed);
  absl::StatusOr<v1::Session> KeepAlive(const Caller& caller, const std::string& id);
  absl::StatusOr<v1::Session> Close(const Caller& caller, const std::string& id,
                                    const std::string& reason);

  // Marks one use of a live session, watched as `watch` says.
  // FAILED_PRECONDITION when the session is closed or expired, NOT_FOUND when unknown.
  absl::StatusOr<std::unique_ptr<Lease>> Acquire(const Caller& caller, const std::string& id,
                                                 LeaseWatch watch = {});

  // What the live session `id` uses now (sandbox::Session::Usage), sampled at the clock's now.
  // No lease: asking is no use of the session, and keeps no idle session alive.
  // FAILED_PRECONDITION when it ended, NOT_FOUND when unknown (or another tenant's).
  absl::StatusOr<v1::SessionUsage> Usage(const Caller& caller, const std::string& id);

  // Closes every live session (drain). Blocks until their sandboxes are deleted.
  void CloseAll(const std::string& reason);
  size_t live();
  // Whether session `id` is live in this daemon's memory (no store read; any tenant).
  bool Holds(const std::string& id);

 private:
  struct Entry;
  struct DecisionRoute;
  class SessionEvents;
  v1::Session Snapshot(Entry& e);
  // The session stored under idempotency `key`, if made by a request with
  // `fingerprint`.
  absl::StatusOr<std::optional<v1::Session>> FindKeyed(const Caller& caller, const std::string& key,
                                                       const std::string& fingerprint);
  // From the sandbox's proxy threads: to the leases that listen on `route`, and
  // off this thread, to the session's log.
  void OnNetworkDecision(const std::shared_ptr<DecisionRoute>& route, const std::string& session_id,
                         const sandbox::NetworkDecision& d);
  // Waits until every side event queued so far is appended.
  void FlushSideEvents();
  // The part of a SandboxPlan that closing a session's sandbox uses.
  SandboxPlan ClosePlan(const std::string& id);
  void Expire(const std::shared_ptr<Entry>& e, v1::SessionStatus status, const std::string& reason);
  // Stores what of ended `e` the store has not taken yet (its final record with session.closed,
  // its slot's release); once all is, `e` leaves live_ and this is true. Otherwise the reaper
  // tries again after kReleaseRetryFirst, doubling up to kReleaseRetryMost.
  bool StoreEnd(const std::shared_ptr<Entry>& e);
  // What the sandbox says of its own end (sandbox::Session::Health): expired (or past the end
  // it announced) ends the session now as EXPIRED with its reason; an end it cannot be kept
  // past is told once in the session's log as a notice, and bounds expires_at (Snapshot).
  void CheckSandboxHealth(const std::shared_ptr<Entry>& e);
  // Tells every lease holder of `e` that max_lifetime is near, once.
  void Warn(const std::shared_ptr<Entry>& e);
  void ReaperLoop();
  bool ReaperWoken() const ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) { return stop_ || reschedule_; }
  // Tells the reaper its next due time may have moved earlier.
  void Reschedule();

  const SessionManagerDeps deps_;
  // Appends the events that arrive off a caller's thread (network decisions);
  // callers must not block.
  Executor side_events_;
  absl::Mutex mu_;
  absl::flat_hash_map<std::string, std::shared_ptr<Entry>> live_ ABSL_GUARDED_BY(mu_);
  bool stop_ ABSL_GUARDED_BY(mu_) = false;
  bool reschedule_ ABSL_GUARDED_BY(mu_) = false;
  std::thread reaper_;
};

// One use of a session; ends (and refreshes last_active_at) when destroyed.
class SessionManager::Lease {
 public:
  ~Lease();
  sandbox::Session& session() const;
  const std::string& id() const;
  absl::Duration command_timeout() const;

 private:
  friend class SessionManager;
  Lease(SessionManager* manager, std::shared_ptr<Entry> entry, uint64_t watch_id)
      : manager_(manager), entry_(std::move(entry)), watch_id_(watch_id) {}
  SessionManager* const manager_;
  const std::shared_ptr<Entry> entry_;
  const uint64_t watch_id_;
};

}  // namespace sandgate::core

#endif  // SANDGATE_CORE_SESSION_MANAGER_H_
