// How kept sessions end: closed, expired (idle, max_lifetime, their sandbox's own end) or
// closed all at a stop, and their end stored (retried by the reaper while the store is away).
#include <algorithm>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "agent/model_events.h"
#include "common/log.h"
#include "core/sandbox_maker.h"
#include "core/sandbox_spec.h"
#include "core/session_entry.h"
#include "core/session_manager.h"

namespace sandgate::core {

void SessionManager::Expire(const std::shared_ptr<Entry>& e, v1::SessionStatus status,
                            const std::string& reason) {
  v1::Session record;
  {
    absl::MutexLock lock(&e->mu);
    if (e->ended) return;
    e->ended = true;
    e->record.set_status(status);
    e->record.set_status_reason(reason);
    *e->record.mutable_closed_at() = ToProto(deps_.clock->Now());
    for (const auto& [id, w] : e->watchers) {
      if (w.cancel) w.cancel->Cancel(absl::StrCat("session ", e->id, " ended: ", reason));
    }
    record = e->record;
  }
  // The sandbox is closed first (running commands report cancelled), and only then is the final
  // record stored, with its log's session.closed in the same write: a record that says closed
  // never names a sandbox that may still be alive. A process killed before that write leaves
  // the record live and the sandbox in the journal (the journal entry goes once it is
  // deleted), and the next start (Recover, after the journal sweep) or a takeover ends both;
  // killed after it, nothing is left to do. A failed close is logged and counted there, and
  // leaves the sandbox in the journal for the sweep. The write happens before the entry
  // leaves live_, so Get never reads an older record; a write the store did not take (it was
  // away) is tried again by the reaper (StoreEnd) until it lands, is fenced, or the manager
  // stops, and the entry stays in live_ until then.
  SessionEvents events(deps_.events, deps_.store, e->id);
  events.EndWith([&record](const v1::Event&) { return record; });
  CloseSandbox(*e->sandbox, ClosePlan(e->id), SandboxEnv{deps_.config, deps_.clock, deps_.metrics},
               events, reason, "session_close")
      .IgnoreError();
  if (deps_.budget) deps_.budget->Give();
  {
    absl::MutexLock lock(&e->mu);
    const absl::Status& stored = events.end_status();
    if (!stored.ok() && !store::IsFencedWrite(stored)) e->closed_unstored = events.closed();
    e->slot_held = !e->slot.empty();
  }
  StoreEnd(e);
  log::Info(status == v1::SESSION_STATUS_EXPIRED ? "session.expired" : "session.closed",
            {{"session", e->id}, {"tenant", e->tenant}, {"reason", reason}});
}

bool SessionManager::StoreEnd(const std::shared_ptr<Entry>& e) {
  std::optional<v1::Event> closed;
  v1::Session record;
  bool slot;
  {
    absl::MutexLock lock(&e->mu);
    closed = e->closed_unstored;
    record = e->record;
    slot = e->slot_held;
  }
  if (closed) {
    absl::Status stored = SessionEvents::StoreEnd(deps_.events, deps_.store, *closed, record);
    // Fenced: the replica that took this one over ended the session.
    if (stored.ok() || store::IsFencedWrite(stored)) {
      closed.reset();
      log::Info("session.end_stored", {{"session", e->id}, {"tenant", e->tenant}});
    }
  }
  if (slot) {
    absl::Status freed = deps_.admission->ReleaseSessionSlot(e->slot);
    // Left held at a stop, it is freed when this replica restarts or is taken over
    // (ReleaseReplica).
    if (freed.ok()) {
      slot = false;
    } else {
      log::Error("session.slot_release_failed", {{"session", e->id}, {"error", freed.ToString()}});
    }
  }
  {
    absl::MutexLock lock(&e->mu);
    e->closed_unstored = closed;
    e->slot_held = slot;
    if (closed || slot) {
      e->retry_at = deps_.clock->Now() + e->retry_wait;
      e->retry_wait = std::min(2 * e->retry_wait, kReleaseRetryMost);
    }
  }
  if (closed || slot) {
    Reschedule();
    return false;
  }
  absl::MutexLock lock(&mu_);
  live_.erase(e->id);
  return true;
}

void SessionManager::CheckSandboxHealth(const std::shared_ptr<Entry>& e) {
  const sandbox::SessionHealth h = e->sandbox->Health();
  if (h.expired) {
    Expire(e, v1::SESSION_STATUS_EXPIRED, h.reason);
    return;
  }
  if (h.expires_at == absl::InfiniteFuture()) return;
  if (deps_.clock->Now() >= h.expires_at) {
    Expire(e, v1::SESSION_STATUS_EXPIRED, absl::StrCat("its sandbox expired: ", h.reason));
    return;
  }
  {
    absl::MutexLock lock(&e->mu);
    if (e->ended || e->told_sandbox_end == h.expires_at) return;
    e->told_sandbox_end = h.expires_at;
  }
  SessionEvents events(deps_.events, deps_.store, e->id);
  agent::EmitNotice(events, v1::Notice::SEVERITY_WARNING, h.reason);
  log::Warning("session.sandbox_ends_on_its_own",
               {{"session", e->id}, {"tenant", e->tenant}, {"reason", h.reason}});
}

void SessionManager::Warn(const std::shared_ptr<Entry>& e) {
  absl::MutexLock lock(&e->mu);
  if (e->warned || e->ended) return;
  e->warned = true;
  const v1::SessionExpiring x = e->Expiring();
  for (const auto& [id, w] : e->watchers) {
    if (w.expiring) w.expiring(x);
  }
  log::Info("session.expiring",
            {{"session", e->id}, {"tenant", e->tenant}, {"reason", x.reason()}});
}

void SessionManager::CloseAll(const std::string& reason) {
  std::vector<std::shared_ptr<Entry>> all;
  {
    absl::MutexLock lock(&mu_);
    for (const auto& [id, e] : live_) all.push_back(e);
  }
  for (const auto& e : all) Expire(e, v1::SESSION_STATUS_CLOSED, reason);
}

size_t SessionManager::live() {
  absl::MutexLock lock(&mu_);
  return live_.size();
}

void SessionManager::ReaperLoop() {
  absl::Time next = absl::InfiniteFuture();  // nothing is due until a session exists
  for (;;) {
    std::vector<std::pair<std::shared_ptr<Entry>, std::string>> due;
    std::vector<std::shared_ptr<Entry>> warn, live, unstored;
    {
      absl::MutexLock lock(&mu_);
      deps_.clock->AwaitWithDeadline(mu_, absl::Condition(this, &SessionManager::ReaperWoken),
                                     next);
      if (stop_) return;
      reschedule_ = false;
      const absl::Time now = deps_.clock->Now();
      next = absl::InfiniteFuture();
      for (const auto& [id, e] : live_) {
        live.push_back(e);
        absl::MutexLock l(&e->mu);
        if (e->ended) {  // a Close is deleting it, or its end waits for the store
          if (!e->closed_unstored && !e->slot_held) continue;
          if (now >= e->retry_at) {
            unstored.push_back(e);
          } else {
            next = std::min(next, e->retry_at);
          }
          continue;
        }
        const absl::Time end = e->created + e->max_lifetime;
        const absl::Time idle_end =
            e->in_flight == 0 ? e->last_active + e->idle_timeout : absl::InfiniteFuture();
        if (now >= end) {
          if (!e->warned) warn.push_back(e);  // a late reaper still warns first
          due.emplace_back(e, absl::StrCat("reached its max_lifetime of ",
                                           absl::FormatDuration(e->max_lifetime)));
          continue;
        }
        if (now >= idle_end) {
          due.emplace_back(e, absl::StrCat("idle for its idle_timeout of ",
                                           absl::FormatDuration(e->idle_timeout)));
          continue;
        }
        next = std::min({next, end, idle_end});
        if (e->warned) continue;
        if (now >= e->warn_at) {
          warn.push_back(e);
        } else {
          next = std::min(next, e->warn_at);
        }
      }
    }
    for (const auto& e : live) CheckSandboxHealth(e);
    for (const auto& e : warn) Warn(e);
    for (const auto& [e, why] : due) Expire(e, v1::SESSION_STATUS_EXPIRED, why);
    for (const auto& e : unstored) StoreEnd(e);
  }
}

}  // namespace sandgate::core
