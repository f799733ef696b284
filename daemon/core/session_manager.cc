#include "core/session_manager.h"

#include <algorithm>
#include <functional>
#include <map>
#include <utility>

#include "absl/cleanup/cleanup.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/strip.h"
#include "absl/synchronization/notification.h"
#include "agent/model_events.h"
#include "common/errors.h"
#include "common/events.h"
#include "common/ids.h"
#include "common/log.h"
#include "common/status_macros.h"
#include "core/policy.h"
#include "core/request_fingerprint.h"
#include "core/request_validation.h"
#include "core/sandbox_maker.h"
#include "core/sandbox_spec.h"
#include "core/session_entry.h"

namespace sandgate::core {

SessionManager::SessionManager(SessionManagerDeps deps)
    : deps_(std::move(deps)),
      side_events_("session-events", 1, 10000),
      reaper_([this] { ReaperLoop(); }) {}

SessionManager::~SessionManager() {
  CloseAll("the daemon is shutting down");
  {
    absl::MutexLock lock(&mu_);
    stop_ = true;
  }
  reaper_.join();
  side_events_.Shutdown();
}

void SessionManager::FlushSideEvents() {
  absl::Notification flushed;
  if (side_events_.Submit([&flushed] { flushed.Notify(); })) flushed.WaitForNotification();
}

void SessionManager::OnNetworkDecision(const std::shared_ptr<DecisionRoute>& route,
                                       const std::string& session_id,
                                       const sandbox::NetworkDecision& d) {
  {
    absl::MutexLock lock(&route->mu);
    for (const auto& [id, listener] : route->listeners) listener(d);
  }
  if (deps_.events == nullptr) return;
  if (!side_events_.Submit([this, session_id, e = NetworkDecisionEvent(d)]() mutable {
        SessionEvents(deps_.events, deps_.store, session_id).Emit(std::move(e));
      })) {
    log::Warning("event.dropped", {{"session", session_id}, {"type", "network.decision"}});
  }
}

absl::StatusOr<std::optional<v1::Session>> SessionManager::FindKeyed(
    const Caller& caller, const std::string& key, const std::string& fingerprint) {
  SANDGATE_ASSIGN_OR_RETURN(std::optional<store::KeyedRecord> found,
                            deps_.store->FindSessionByIdempotencyKey(caller.tenant, key));
  if (!found) return std::optional<v1::Session>();
  SANDGATE_RETURN_IF_ERROR(CheckSameRequest(*found, key, fingerprint));
  SANDGATE_ASSIGN_OR_RETURN(v1::Session session, Get(caller, found->id));
  return std::optional<v1::Session>(std::move(session));
}

v1::Session SessionManager::Snapshot(Entry& e) {
  // A sandbox that ends on its own (a hosted container the daemon cannot keep alive) bounds
  // the session's expiry, held or not.
  const absl::Time sandbox_end =
      e.sandbox ? e.sandbox->Health().expires_at : absl::InfiniteFuture();
  absl::MutexLock lock(&e.mu);
  v1::Session s = e.record;
  *s.mutable_last_active_at() = ToProto(e.last_active);
  s.set_in_flight(static_cast<uint32_t>(e.in_flight));
  if (s.status() == v1::SESSION_STATUS_ACTIVE) {
    absl::Time end = std::min(e.created + e.max_lifetime, sandbox_end);
    if (e.in_flight == 0) end = std::min(end, e.last_active + e.idle_timeout);
    *s.mutable_expires_at() = ToProto(end);
  }
  return s;
}

namespace {

// `record` as it ends now: its final record.
v1::Session Ended(v1::Session record, v1::SessionStatus status, std::string reason,
                  absl::Time now) {
  record.set_status(status);
  record.set_status_reason(std::move(reason));
  *record.mutable_closed_at() = ToProto(now);
  return record;
}

}  // namespace

absl::Status SessionManager::Recover() {
  SANDGATE_ASSIGN_OR_RETURN(std::vector<v1::Session> open,
                            deps_.store->ListLiveSessionsOf(deps_.config->replica.id));
  for (v1::Session& s : open) {
    // Another live replica's sessions are its own (those stored before replicas name none).
    if (!s.replica().empty() && s.replica() != deps_.config->replica.id) continue;
    s = Ended(std::move(s), v1::SESSION_STATUS_EXPIRED,
              "the daemon restarted; its sandbox was deleted", deps_.clock->Now());
    // Its log ends as every session's does, so a follower is not left waiting: in the write
    // that ends the record, so a second kill cannot leave one without the other.
    SessionEvents events(deps_.events, deps_.store, s.id());
    events.EndWith([&s](const v1::Event&) { return s; });
    events.Emit(events::SessionClosed(s.id(), s.status_reason()));
    SANDGATE_RETURN_IF_ERROR(events.end_status());
    log::Warning("session.lost_in_restart", {{"session", s.id()}, {"tenant", s.tenant()}});
  }
  return absl::OkStatus();
}

namespace {

absl::Status LiveSessionsReached(uint32_t quota, const std::string& tenant) {
  return errors::ResourceExhausted(absl::StrCat("quota live_sessions (", quota, ") of tenant ",
                                                tenant, " is reached; close a session first"));
}

}  // namespace

absl::StatusOr<v1::Session> SessionManager::Create(const Caller& caller,
                                                   const v1::CreateSessionRequest& req,
                                                   const CancelToken* cancel) {
  const Config& cfg = *deps_.config;
  SANDGATE_RETURN_IF_ERROR(ValidateCreateSessionRequest(req, cfg));
  const std::string fingerprint = req.idempotency_key().empty() ? "" : RequestFingerprint(req);
  if (!req.idempotency_key().empty()) {
    SANDGATE_ASSIGN_OR_RETURN(std::optional<v1::Session> existing,
                              FindKeyed(caller, req.idempotency_key(), fingerprint));
    if (existing) return *std::move(existing);
  }
  std::string provider_name = req.provider().empty() ? "local" : req.provider();
  auto provider = deps_.providers.find(provider_name);
  if (provider == deps_.providers.end()) {
    return errors::InvalidArgument(
        absl::StrCat("provider: '", provider_name, "' is not configured on this daemon"));
  }
  SANDGATE_RETURN_IF_ERROR(CheckProviderRunsCommands(*provider->second, req.sandbox()));
  // The request's sandbox with its isolation level resolved: what is checked, made and kept.
  v1::SandboxSpec sb = req.sandbox();
  SANDGATE_ASSIGN_OR_RETURN(std::string isolation,
                            EffectiveIsolation(sb, provider_name, caller, cfg));
  sb.set_isolation(std::move(isolation));
  SANDGATE_RETURN_IF_ERROR(ResolveImage(&sb, provider_name, deps_.images));
  SANDGATE_RETURN_IF_ERROR(CheckPolicy(caller, PolicyRequest{provider_name, "", "", &sb}, cfg));
  const uint32_t quota = caller.config ? caller.config->quotas.live_sessions : 0;
  // Shared by replicas: the slot is taken in the store, counted across the gateway, and
  // given back when the session ends (or now, if it never starts).
  std::string slot;
  if (deps_.admission != nullptr) {
    slot = absl::StrCat("slot-", RandomHex(8));
    SANDGATE_ASSIGN_OR_RETURN(
        bool taken, deps_.admission->TakeSessionSlot(caller.tenant, slot, cfg.replica.id, quota));
    if (!taken) return LiveSessionsReached(quota, caller.tenant);
  }
  auto give_slot = absl::MakeCleanup([this, &slot] {
    if (!slot.empty()) (void)deps_.admission->ReleaseSessionSlot(slot);
  });
  if (quota > 0 && deps_.admission == nullptr) {
    uint32_t live = 0;
    absl::MutexLock lock(&mu_);
    for (const auto& [id, e] : live_) live += e->tenant == caller.tenant ? 1 : 0;
    if (live >= quota) return LiveSessionsReached(quota, caller.tenant);
  }
  // A ready sandbox brings its own budget unit and its id, which becomes the session's.
  std::optional<WarmSandbox> warm = TakeWarm(deps_.warm_pool, provider->second, sb, cfg);
  // Ready sandboxes of other shapes never keep this request out: one is closed for it.
  auto take_budget = [this] {
    return deps_.budget->TryTake() ||
           (deps_.warm_pool != nullptr && deps_.warm_pool->Evict() && deps_.budget->TryTake());
  };
  if (!warm && deps_.budget && !take_budget()) {
    return errors::ResourceExhausted(absl::StrCat("the machine's sandbox budget (max_sandboxes ",
                                                  deps_.budget->max(),
                                                  ") is used up; retry later"));
  }
  // The budget taken above is given back when the session ends, or now if it never starts.
  auto give_back = absl::MakeCleanup([this] {
    if (deps_.budget) deps_.budget->Give();
  });

  auto e = std::make_shared<Entry>();
  e->id = warm ? warm->session->id() : absl::StrCat("s", RandomHex(8));
  e->tenant = caller.tenant;
  e->slot = slot;
  e->created = deps_.clock->Now();
  e->idle_timeout = IdleTimeout(sb, cfg);
  e->max_lifetime = MaxLifetime(sb, cfg);
  e->command_timeout = CommandTimeout(sb, cfg);
  e->warn_at =
      e->created + e->max_lifetime - std::min(cfg.session_expiry_warning, e->max_lifetime / 2);
  v1::Session record;
  record.set_id(e->id);
  record.set_tenant(caller.tenant);
  record.set_provider(provider_name);
  record.set_status(v1::SESSION_STATUS_ACTIVE);
  *record.mutable_created_at() = ToProto(e->created);
  *record.mutable_idle_timeout() = ToProto(e->idle_timeout);
  *record.mutable_max_lifetime() = ToProto(e->max_lifetime);
  *record.mutable_labels() = req.labels();
  record.set_idempotency_key(req.idempotency_key());
  record.set_from_warm_pool(warm.has_value());
  record.set_replica(cfg.replica.id);
  *record.mutable_sandbox() = sb;
  record.mutable_sandbox()->clear_files();  // may be large; the workspace has them
  // The record (and with it the idempotency key) exists before the sandbox, so a concurrent
  // retry with the same key gets this session instead of making a second sandbox.
  absl::Status put = deps_.store->CreateSession(record, fingerprint);
  if (put.code() == absl::StatusCode::kAlreadyExists) {
    SANDGATE_ASSIGN_OR_RETURN(std::optional<v1::Session> existing,
                              FindKeyed(caller, req.idempotency_key(), fingerprint));
    if (existing) return *std::move(existing);
  }
  SANDGATE_RETURN_IF_ERROR(put);

  SessionEvents events(deps_.events, deps_.store, e->id);
  // A sandbox that fails its setup is closed inside MakeSandbox: the session.closed it emits
  // then ends the record too, in the same write.
  events.EndWith([this, &record](const v1::Event& closed) {
    return Ended(record, v1::SESSION_STATUS_EXPIRED, closed.session_closed().reason(),
                 deps_.clock->Now());
  });
  SandboxPlan plan = ClosePlan(e->id);
  plan.provider = provider->second;
  plan.spec = &sb;
  plan.command_timeout = e->command_timeout;
  plan.on_network_decision = [this, route = e->route,
                              id = e->id](const sandbox::NetworkDecision& d) {
    OnNetworkDecision(route, id, d);
  };
  if (warm) {
    warm->ConnectDecisions(plan.on_network_decision);
    plan.warm = &*warm;
  }
  CancelToken never;
  absl::StatusOr<std::unique_ptr<sandbox::Session>> made = MakeSandbox(
      plan, SandboxEnv{&cfg, deps_.clock, deps_.metrics}, events, cancel ? *cancel : never);
  if (!made.ok()) {
    // The provider made no sandbox (one it made was closed in MakeSandbox, and that ended the
    // record): the session ends here, its log too, so a follower of it is not left waiting.
    if (events.ending()) {
      events.Emit(
          events::SessionClosed(e->id, absl::StrCat("creation failed: ", made.status().message())));
    }
    return made.status();
  }
  events.EndWith(nullptr);  // it lives: Expire ends it
  e->sandbox = std::move(*made);
  // A sandbox that dies on its own ends its session at once (the reaper asks every live
  // sandbox's Health when woken), not at its next use or its idle timeout.
  e->sandbox->OnEnded([this] { Reschedule(); });
  for (const std::string& w : e->sandbox->Warnings()) record.add_unenforced(w);
  record.set_workdir(e->sandbox->workdir());
  {
    absl::MutexLock lock(&e->mu);
    e->record = record;
    e->last_active = deps_.clock->Now();
  }
  SANDGATE_RETURN_IF_ERROR(deps_.store->PutSession(record));
  // The reply promises what the session's log holds so far (session.created, the warm pool's
  // notice, the setup commands' events and decisions): the log only queues them, so they are
  // stored before the caller, who may read the log next, is answered.
  FlushSideEvents();
  if (deps_.events != nullptr) {
    absl::Status stored = deps_.events->Flush(e->id);
    if (!stored.ok()) {
      log::Error("session.events_not_stored", {{"session", e->id}, {"error", stored.ToString()}});
    }
  }
  {
    absl::MutexLock lock(&mu_);
    live_[e->id] = e;
    reschedule_ = true;
  }
  std::move(give_back).Cancel();
  std::move(give_slot).Cancel();
  log::Info("session.created",
            {{"session", e->id}, {"tenant", caller.tenant}, {"provider", provider_name}});
  return Snapshot(*e);
}

SandboxPlan SessionManager::ClosePlan(const std::string& id) {
  SandboxPlan plan;
  plan.session_id = id;
  plan.flush = [this] { FlushSideEvents(); };
  return plan;
}

absl::Status SessionManager::CheckExec(const v1::ExecRequest& request) const {
  return ValidateExecRequest(request, *deps_.config);
}

absl::StatusOr<v1::Session> SessionManager::Get(const Caller& caller, const std::string& id) {
  SANDGATE_RETURN_IF_ERROR(ValidateId(id, "session_id"));
  std::shared_ptr<Entry> e;
  {
    absl::MutexLock lock(&mu_);
    auto it = live_.find(id);
    if (it != live_.end()) e = it->second;
  }
  v1::Session s;
  if (e) {
    CheckSandboxHealth(e);
    s = Snapshot(*e);
  } else {
    SANDGATE_ASSIGN_OR_RETURN(s, deps_.store->GetSession(id));
  }
  if (s.tenant() != caller.tenant && !caller.is_operator) return errors::NotFound("session", id);
  return s;
}

bool SessionManager::Holds(const std::string& id) {
  absl::MutexLock lock(&mu_);
  return live_.count(id) > 0;
}

absl::StatusOr<v1::SessionUsage> SessionManager::Usage(const Caller& caller,
                                                       const std::string& id) {
  std::shared_ptr<Entry> e;
  {
    absl::MutexLock lock(&mu_);
    auto it = live_.find(id);
    if (it != live_.end()) e = it->second;
  }
  if (!e) {
    SANDGATE_ASSIGN_OR_RETURN(v1::Session s, Get(caller, id));  // NOT_FOUND, or not live
    return errors::FailedPrecondition(
        absl::StrCat("session ", id, " is not live: ", s.status_reason()));
  }
  if (e->tenant != caller.tenant && !caller.is_operator) return errors::NotFound("session", id);
  {
    absl::MutexLock lock(&e->mu);
    if (e->ended) {
      return errors::FailedPrecondition(
          absl::StrCat("session ", id, " ended: ", e->record.status_reason()));
    }
  }
  // The sandbox outlives a Close that races this read (the entry holds it); its usage is
  // then FAILED_PRECONDITION from the sandbox itself.
  SANDGATE_ASSIGN_OR_RETURN(sandbox::ResourceUsage u, e->sandbox->Usage());
  v1::SessionUsage out;
  out.set_session_id(id);
  *out.mutable_sampled_at() = ToProto(deps_.clock->Now());
  out.set_memory_bytes(u.memory_bytes);
  out.set_memory_limit_bytes(u.memory_limit_bytes);
  *out.mutable_cpu_time() = ToProto(u.cpu_time);
  out.set_processes(u.processes);
  for (std::string& why : u.unmeasured) out.add_unmeasured(std::move(why));
  return out;
}

absl::StatusOr<std::vector<v1::Session>> SessionManager::List(const Caller& caller,
                                                              bool include_closed) {
  SANDGATE_ASSIGN_OR_RETURN(
      std::vector<v1::Session> stored,
      deps_.store->ListSessions(caller.is_operator ? "" : caller.tenant, include_closed));
  for (v1::Session& s : stored) {
    std::shared_ptr<Entry> e;
    {
      absl::MutexLock lock(&mu_);
      auto it = live_.find(s.id());
      if (it != live_.end()) e = it->second;
    }
    if (!e) continue;
    CheckSandboxHealth(e);
    s = Snapshot(*e);
  }
  return stored;
}

absl::StatusOr<std::unique_ptr<SessionManager::Lease>> SessionManager::Acquire(
    const Caller& caller, const std::string& id, LeaseWatch watch) {
  std::shared_ptr<Entry> e;
  {
    absl::MutexLock lock(&mu_);
    auto it = live_.find(id);
    if (it != live_.end()) e = it->second;
  }
  if (!e) {
    SANDGATE_ASSIGN_OR_RETURN(v1::Session s, Get(caller, id));
    return errors::FailedPrecondition(absl::StrCat(
        "session ", id, " is ", s.status() == v1::SESSION_STATUS_CLOSED ? "closed" : "expired",
        ": ", s.status_reason()));
  }
  if (e->tenant != caller.tenant && !caller.is_operator) return errors::NotFound("session", id);
  CheckSandboxHealth(e);
  absl::MutexLock lock(&e->mu);
  if (e->ended) {
    return errors::FailedPrecondition(
        absl::StrCat("session ", id, " ended: ", e->record.status_reason()));
  }
  ++e->in_flight;
  uint64_t watch_id = e->next_watch++;
  // Already in the warning window: this holder is told now, before it sees anything else.
  if (e->warned && watch.expiring) watch.expiring(e->Expiring());
  if (watch.network_decision) {
    absl::MutexLock route_lock(&e->route->mu);
    e->route->listeners.emplace(watch_id, watch.network_decision);
  }
  e->watchers.emplace(watch_id, std::move(watch));
  return std::unique_ptr<Lease>(new Lease(this, e, watch_id));
}

SessionManager::Lease::~Lease() {
  {
    absl::MutexLock route_lock(&entry_->route->mu);
    entry_->route->listeners.erase(watch_id_);
  }
  bool idle;
  {
    absl::MutexLock lock(&entry_->mu);
    idle = --entry_->in_flight == 0;
    entry_->last_active = manager_->deps_.clock->Now();
    entry_->watchers.erase(watch_id_);
  }
  // The idle clock starts now: its end may come before the reaper's next due time.
  if (idle) manager_->Reschedule();
}

void SessionManager::Reschedule() {
  absl::MutexLock lock(&mu_);
  reschedule_ = true;
}
sandbox::Session& SessionManager::Lease::session() const { return *entry_->sandbox; }
const std::string& SessionManager::Lease::id() const { return entry_->id; }
absl::Duration SessionManager::Lease::command_timeout() const { return entry_->command_timeout; }

absl::StatusOr<v1::Session> SessionManager::KeepAlive(const Caller& caller, const std::string& id) {
  SANDGATE_ASSIGN_OR_RETURN(std::unique_ptr<Lease> lease, Acquire(caller, id));
  lease.reset();  // releasing stamps last_active: the idle clock starts again from now
  return Get(caller, id);
}

absl::StatusOr<v1::Session> SessionManager::Close(const Caller& caller, const std::string& id,
                                                  const std::string& reason) {
  SANDGATE_RETURN_IF_ERROR(ValidateReason(reason));
  SANDGATE_ASSIGN_OR_RETURN(v1::Session s, Get(caller, id));
  std::shared_ptr<Entry> e;
  {
    absl::MutexLock lock(&mu_);
    auto it = live_.find(id);
    if (it != live_.end()) e = it->second;
  }
  if (e)
    Expire(
        e, v1::SESSION_STATUS_CLOSED,
        reason.empty() ? "closed by the caller" : absl::StrCat("closed by the caller: ", reason));
  return Get(caller, id);
}

}  // namespace sandgate::core
