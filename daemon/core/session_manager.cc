#include "core/session_manager.h"

#include <algorithm>
#include <map>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/strip.h"
#include "common/errors.h"
#include "common/ids.h"
#include "common/log.h"
#include "common/status_macros.h"
#include "core/policy.h"
#include "core/sandbox_spec.h"
#include "absl/cleanup/cleanup.h"

namespace sandgate::core {

struct SessionManager::Entry {
  // Constant after Create.
  std::unique_ptr<sandbox::Session> sandbox;
  std::string id, tenant;
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

  v1::SessionExpiring Expiring() const {
    v1::SessionExpiring x;
    x.set_session_id(id);
    *x.mutable_expires_at() = ToProto(created + max_lifetime);
    x.set_reason(absl::StrCat("reaches its max_lifetime of ", absl::FormatDuration(max_lifetime)));
    return x;
  }
};

SessionManager::SessionManager(SessionManagerDeps deps)
    : deps_(std::move(deps)), reaper_([this] { ReaperLoop(); }) {}

SessionManager::~SessionManager() {
  CloseAll("the daemon is shutting down");
  {
    absl::MutexLock lock(&mu_);
    stop_ = true;
  }
  reaper_.join();
}

v1::Session SessionManager::Snapshot(Entry& e) {
  absl::MutexLock lock(&e.mu);
  v1::Session s = e.record;
  *s.mutable_last_active_at() = ToProto(e.last_active);
  s.set_in_flight(static_cast<uint32_t>(e.in_flight));
  if (s.status() == v1::SESSION_STATUS_ACTIVE) {
    absl::Time end = e.created + e.max_lifetime;
    if (e.in_flight == 0) end = std::min(end, e.last_active + e.idle_timeout);
    *s.mutable_expires_at() = ToProto(end);
  }
  return s;
}

absl::Status SessionManager::Recover() {
  SANDGATE_ASSIGN_OR_RETURN(std::vector<v1::Session> open, deps_.store->ListSessions("", false));
  for (v1::Session& s : open) {
    s.set_status(v1::SESSION_STATUS_EXPIRED);
    s.set_status_reason("the daemon restarted; its sandbox was deleted");
    *s.mutable_closed_at() = ToProto(deps_.clock->Now());
    SANDGATE_RETURN_IF_ERROR(deps_.store->PutSession(s));
    log::Warning("session.lost_in_restart", {{"session", s.id()}, {"tenant", s.tenant()}});
  }
  return absl::OkStatus();
}

absl::StatusOr<v1::Session> SessionManager::Create(const Caller& caller,
                                                   const v1::CreateSessionRequest& req,
                                                   const CancelToken* cancel) {
  const Config& cfg = *deps_.config;
  if (!req.idempotency_key().empty()) {
    SANDGATE_ASSIGN_OR_RETURN(std::optional<std::string> existing,
                              deps_.store->FindSessionByIdempotencyKey(caller.tenant, req.idempotency_key()));
    if (existing) return Get(caller, *existing);
  }
  std::string provider_name = req.provider().empty() ? "local" : req.provider();
  auto provider = deps_.providers.find(provider_name);
  if (provider == deps_.providers.end()) {
    return errors::InvalidArgument(absl::StrCat("provider: '", provider_name, "' is not configured on this daemon"));
  }
  SANDGATE_RETURN_IF_ERROR(ValidateSandboxSpec(req.sandbox(), cfg));
  SANDGATE_RETURN_IF_ERROR(CheckProviderRunsCommands(*provider->second, req.sandbox()));
  SANDGATE_RETURN_IF_ERROR(CheckPolicy(caller, PolicyRequest{provider_name, "", "", &req.sandbox()}, cfg));
  if (uint32_t quota = caller.config ? caller.config->quotas.live_sessions : 0) {
    uint32_t live = 0;
    absl::MutexLock lock(&mu_);
    for (const auto& [id, e] : live_) live += e->tenant == caller.tenant ? 1 : 0;
    if (live >= quota) {
      return errors::ResourceExhausted(absl::StrCat("quota live_sessions (", quota, ") of tenant ",
                                                    caller.tenant, " is reached; close a session first"));
    }
  }
  if (deps_.budget && !deps_.budget->TryTake()) {
    return errors::ResourceExhausted(absl::StrCat("the machine's sandbox budget (max_sandboxes ",
                                                  deps_.budget->max(), ") is used up; retry later"));
  }
  // The budget taken above is given back when the session ends, or now if it never starts.
  auto give_back = absl::MakeCleanup([this] {
    if (deps_.budget) deps_.budget->Give();
  });

  auto e = std::make_shared<Entry>();
  e->id = absl::StrCat("s", RandomHex(8));
  e->tenant = caller.tenant;
  e->created = deps_.clock->Now();
  e->idle_timeout = IdleTimeout(req.sandbox(), cfg);
  e->max_lifetime = MaxLifetime(req.sandbox(), cfg);
  e->command_timeout = CommandTimeout(req.sandbox(), cfg);
  e->warn_at = e->created + e->max_lifetime - std::min(cfg.session_expiry_warning, e->max_lifetime / 2);
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
  *record.mutable_sandbox() = req.sandbox();
  record.mutable_sandbox()->clear_files();  // may be large; the workspace has them
  // The record (and with it the idempotency key) exists before the sandbox, so a concurrent
  // retry with the same key gets this session instead of making a second sandbox.
  absl::Status put = deps_.store->PutSession(record);
  if (put.code() == absl::StatusCode::kAlreadyExists) {
    SANDGATE_ASSIGN_OR_RETURN(std::optional<std::string> existing,
                              deps_.store->FindSessionByIdempotencyKey(caller.tenant, req.idempotency_key()));
    if (existing) return Get(caller, *existing);
  }
  SANDGATE_RETURN_IF_ERROR(put);

  auto fail = [&](const absl::Status& why) {
    record.set_status(v1::SESSION_STATUS_EXPIRED);
    record.set_status_reason(absl::StrCat("creation failed: ", why.message()));
    *record.mutable_closed_at() = ToProto(deps_.clock->Now());
    (void)deps_.store->PutSession(record);
    return why;
  };
  absl::StatusOr<std::unique_ptr<sandbox::Session>> sandbox =
      provider->second->Create(ToSessionSpec(e->id, req.sandbox(), cfg), cancel);
  if (!sandbox.ok()) return fail(absl::Status(sandbox.status().code(), absl::StrCat("creating the sandbox: ", sandbox.status().message())));
  e->sandbox = std::move(*sandbox);
  for (int i = 0; i < req.sandbox().files_size(); ++i) {
    const v1::InlineFile& f = req.sandbox().files(i);
    absl::Status st = e->sandbox->WriteFile(f.path(), f.content(), f.mode() ? static_cast<int>(f.mode()) : 0644);
    if (!st.ok()) {
      (void)e->sandbox->Close();
      return fail(errors::InvalidArgument(absl::StrCat("sandbox.files[", i, "]: ", st.message())));
    }
  }
  for (int i = 0; i < req.sandbox().setup_commands_size(); ++i) {
    sandbox::ExecRequest exec;
    exec.argv = {"/bin/sh", "-c", req.sandbox().setup_commands(i)};
    exec.timeout = e->command_timeout;
    std::string err;
    absl::StatusOr<sandbox::ExecResult> r = e->sandbox->Exec(
        exec, [&](sandbox::OutputStream s, absl::string_view d) {
          if (s == sandbox::OutputStream::kStderr && err.size() < 4096) err.append(d.data(), d.size());
        },
        cancel);
    if (!r.ok() || !r->ok()) {
      (void)e->sandbox->Close();
      std::string how = r.ok() ? (r->timed_out ? "timed out" : absl::StrCat("exited with status ", r->exit_code))
                               : std::string(r.status().message());
      return fail(errors::FailedPrecondition(absl::StrCat(
          "sandbox.setup_commands[", i, "] ", how,
          err.empty() ? "" : absl::StrCat(": ", absl::StripTrailingAsciiWhitespace(err)))));
    }
  }
  for (const std::string& w : e->sandbox->Warnings()) record.add_unenforced(w);
  record.set_workdir(e->sandbox->workdir());
  {
    absl::MutexLock lock(&e->mu);
    e->record = record;
    e->last_active = deps_.clock->Now();
  }
  SANDGATE_RETURN_IF_ERROR(deps_.store->PutSession(record));
  {
    absl::MutexLock lock(&mu_);
    live_[e->id] = e;
  }
  std::move(give_back).Cancel();
  log::Info("session.created", {{"session", e->id}, {"tenant", caller.tenant}, {"provider", provider_name}});
  return Snapshot(*e);
}

absl::StatusOr<v1::Session> SessionManager::Get(const Caller& caller, const std::string& id) {
  if (id.empty()) return errors::InvalidArgument("session_id: required");
  std::shared_ptr<Entry> e;
  {
    absl::MutexLock lock(&mu_);
    auto it = live_.find(id);
    if (it != live_.end()) e = it->second;
  }
  v1::Session s;
  if (e) {
    s = Snapshot(*e);
  } else {
    SANDGATE_ASSIGN_OR_RETURN(s, deps_.store->GetSession(id));
  }
  if (s.tenant() != caller.tenant && !caller.is_operator) return errors::NotFound("session", id);
  return s;
}

absl::StatusOr<std::vector<v1::Session>> SessionManager::List(const Caller& caller,
                                                              bool include_closed) {
  SANDGATE_ASSIGN_OR_RETURN(std::vector<v1::Session> stored,
                            deps_.store->ListSessions(caller.is_operator ? "" : caller.tenant, include_closed));
  for (v1::Session& s : stored) {
    absl::MutexLock lock(&mu_);
    auto it = live_.find(s.id());
    if (it != live_.end()) s = Snapshot(*it->second);
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
    return errors::FailedPrecondition(absl::StrCat("session ", id, " is ",
                                                   s.status() == v1::SESSION_STATUS_CLOSED ? "closed" : "expired",
                                                   ": ", s.status_reason()));
  }
  if (e->tenant != caller.tenant && !caller.is_operator) return errors::NotFound("session", id);
  absl::MutexLock lock(&e->mu);
  if (e->ended) {
    return errors::FailedPrecondition(absl::StrCat("session ", id, " ended: ", e->record.status_reason()));
  }
  ++e->in_flight;
  uint64_t watch_id = e->next_watch++;
  // Already in the warning window: this holder is told now, before it sees anything else.
  if (e->warned && watch.expiring) watch.expiring(e->Expiring());
  e->watchers.emplace(watch_id, std::move(watch));
  return std::unique_ptr<Lease>(new Lease(this, e, watch_id));
}

SessionManager::Lease::~Lease() {
  absl::MutexLock lock(&entry_->mu);
  --entry_->in_flight;
  entry_->last_active = manager_->deps_.clock->Now();
  entry_->watchers.erase(watch_id_);
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
  SANDGATE_ASSIGN_OR_RETURN(v1::Session s, Get(caller, id));
  std::shared_ptr<Entry> e;
  {
    absl::MutexLock lock(&mu_);
    auto it = live_.find(id);
    if (it != live_.end()) e = it->second;
  }
  if (e) Expire(e, v1::SESSION_STATUS_CLOSED, reason.empty() ? "closed by the caller" : absl::StrCat("closed by the caller: ", reason));
  return Get(caller, id);
}

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
  // The final record is stored before the entry leaves live_, so Get never reads an older one.
  absl::Status st = deps_.store->PutSession(record);
  if (!st.ok()) log::Error("session.persist_failed", {{"session", e->id}, {"error", st.ToString()}});
  // Ends running commands (they report cancelled) and deletes the sandbox.
  absl::Status closed = e->sandbox->Close();
  if (!closed.ok()) log::Error("session.close_failed", {{"session", e->id}, {"error", closed.ToString()}});
  if (deps_.budget) deps_.budget->Give();
  {
    absl::MutexLock lock(&mu_);
    live_.erase(e->id);
  }
  log::Info(status == v1::SESSION_STATUS_EXPIRED ? "session.expired" : "session.closed",
            {{"session", e->id}, {"tenant", e->tenant}, {"reason", reason}});
}

void SessionManager::Warn(const std::shared_ptr<Entry>& e) {
  absl::MutexLock lock(&e->mu);
  if (e->warned || e->ended) return;
  e->warned = true;
  const v1::SessionExpiring x = e->Expiring();
  for (const auto& [id, w] : e->watchers) {
    if (w.expiring) w.expiring(x);
  }
  log::Info("session.expiring", {{"session", e->id}, {"tenant", e->tenant}, {"reason", x.reason()}});
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
  for (;;) {
    std::vector<std::pair<std::shared_ptr<Entry>, std::string>> due;
    std::vector<std::shared_ptr<Entry>> warn;
    {
      absl::MutexLock lock(&mu_);
      mu_.AwaitWithTimeout(absl::Condition(&stop_), absl::Milliseconds(100));
      if (stop_) return;
      absl::Time now = deps_.clock->Now();
      for (const auto& [id, e] : live_) {
        absl::MutexLock l(&e->mu);
        if (now >= e->created + e->max_lifetime) {
          if (!e->warned) warn.push_back(e);  // a late reaper still warns first
          due.emplace_back(e, absl::StrCat("reached its max_lifetime of ", absl::FormatDuration(e->max_lifetime)));
        } else if (e->in_flight == 0 && now >= e->last_active + e->idle_timeout) {
          due.emplace_back(e, absl::StrCat("idle for its idle_timeout of ", absl::FormatDuration(e->idle_timeout)));
        } else if (!e->warned && now >= e->warn_at) {
          warn.push_back(e);
        }
      }
    }
    for (const auto& e : warn) Warn(e);
    for (const auto& [e, why] : due) Expire(e, v1::SESSION_STATUS_EXPIRED, why);
  }
}

}  // namespace sandgate::core
