// The internals of SessionManager that its two source files share: a kept session's entry,
// its event sink, and the route of its network decisions. session_manager.cc creates, finds and
// leases sessions; session_end.cc ends them (close, expiry, the reaper) and stores their end.
// Included only by those two files.
#ifndef SANDGATE_CORE_SESSION_ENTRY_H_
#define SANDGATE_CORE_SESSION_ENTRY_H_

#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "agent/model_events.h"
#include "common/log.h"
#include "core/sandbox_spec.h"
#include "core/session_manager.h"

namespace sandgate::core {

// Who hears a session's network decisions besides its log: the lease holders
// that asked. Shared with the sandbox's decision callback, which must never own
// the session (a proxy thread would then destroy the sandbox it runs in).
struct SessionManager::DecisionRoute {
  absl::Mutex mu;
  std::map<uint64_t, std::function<void(const sandbox::NetworkDecision&)>> listeners
      ABSL_GUARDED_BY(mu);
};

// Appends to a kept session's own log (keyed by the session id), when there is
// one. Once told how the session ends (EndWith), its session.closed is stored with the
// session's final record in one write.
class SessionManager::SessionEvents : public agent::EventSink {
 public:
  // `log` may be null (nothing is recorded but the final record); both outlive it.
  SessionEvents(EventLog* log, store::Store* store, std::string session_id)
      : log_(log), store_(store), id_(std::move(session_id)) {}
  // The session ends with the next session.closed emitted here: the record `end` makes of
  // that event, the session's final one, is stored with it in one store transaction
  // (EventLog::Finish), so a process killed at any point leaves both or neither. Without a
  // log, the record alone is stored.
  void EndWith(std::function<v1::Session(const v1::Event& closed)> end) { end_ = std::move(end); }
  // Whether an EndWith is still waiting for its session.closed.
  bool ending() const { return end_ != nullptr; }
  // How storing the end went (OK until then), and the session.closed it stored or tried to.
  const absl::Status& end_status() const { return end_status_; }
  const v1::Event& closed() const { return closed_; }

  void Emit(v1::Event event) override {
    event.set_run_id(id_);
    event.set_session_id(id_);
    if (end_ && event.has_session_closed()) return End(std::move(event));
    if (log_ == nullptr) return;
    absl::StatusOr<v1::Event> stored = log_->Append(std::move(event));
    if (!stored.ok())
      log::Error("event.append_failed", {{"session", id_}, {"error", stored.status().ToString()}});
  }
  uint32_t NextCommandId() override { return ++next_command_id_; }

  // The session's end: `record` (final) with its log's `closed`, in one write.
  static absl::Status StoreEnd(EventLog* log, store::Store* store, v1::Event closed,
                               const v1::Session& record) {
    return log != nullptr ? log->Finish(std::move(closed), record).status()
                          : store->PutSession(record);
  }

 private:
  void End(v1::Event closed) {
    const v1::Session record = std::exchange(end_, nullptr)(closed);
    closed_ = closed;
    end_status_ = StoreEnd(log_, store_, std::move(closed), record);
    // Neither is stored: the record is still live, for a retry (SessionManager::StoreEnd), the
    // next start (Recover) or a takeover to end.
    if (!end_status_.ok())
      log::Error("session.persist_failed", {{"session", id_}, {"error", end_status_.ToString()}});
  }

  EventLog* const log_;
  store::Store* const store_;
  const std::string id_;
  uint32_t next_command_id_ = 0;  // only the creating thread runs commands in the log
  std::function<v1::Session(const v1::Event&)> end_;
  absl::Status end_status_;
  v1::Event closed_;
};

struct SessionManager::Entry {
  // Constant after Create.
  std::unique_ptr<sandbox::Session> sandbox;
  const std::shared_ptr<DecisionRoute> route = std::make_shared<DecisionRoute>();
  std::string id, tenant;
  std::string slot;  // its live_sessions slot in the shared admission store ("" none)
  absl::Time created;
  absl::Duration idle_timeout, max_lifetime, command_timeout;
  absl::Time warn_at;  // when lease holders are told max_lifetime is near

  absl::Mutex mu;
  v1::Session record ABSL_GUARDED_BY(mu);
  absl::Time last_active ABSL_GUARDED_BY(mu);
  int in_flight ABSL_GUARDED_BY(mu) = 0;
  bool ended ABSL_GUARDED_BY(mu) = false;
  bool warned ABSL_GUARDED_BY(mu) = false;
  std::map<uint64_t, LeaseWatch> watchers ABSL_GUARDED_BY(mu);  // by lease
  uint64_t next_watch ABSL_GUARDED_BY(mu) = 0;
  // The sandbox's own end (SessionHealth::expires_at) last told in the session's log.
  absl::Time told_sandbox_end ABSL_GUARDED_BY(mu) = absl::InfinitePast();
  // Ended, but the store has not taken all of it yet (it was away): the final record with its
  // session.closed, and the freeing of its slot. The reaper tries again at retry_at.
  std::optional<v1::Event> closed_unstored ABSL_GUARDED_BY(mu);
  bool slot_held ABSL_GUARDED_BY(mu) = false;
  absl::Time retry_at ABSL_GUARDED_BY(mu) = absl::InfinitePast();
  absl::Duration retry_wait ABSL_GUARDED_BY(mu) = kReleaseRetryFirst;

  v1::SessionExpiring Expiring() const {
    v1::SessionExpiring x;
    x.set_session_id(id);
    *x.mutable_expires_at() = ToProto(created + max_lifetime);
    x.set_reason(absl::StrCat("reaches its max_lifetime of ", absl::FormatDuration(max_lifetime)));
    return x;
  }
};

}  // namespace sandgate::core

#endif  // SANDGATE_CORE_SESSION_ENTRY_H_
