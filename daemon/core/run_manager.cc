#include "core/run_manager.h"

#include <algorithm>
#include <atomic>
#include <set>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/synchronization/notification.h"
#include "absl/strings/str_join.h"
#include "common/errors.h"
#include "common/ids.h"
#include "common/log.h"
#include "common/memory.h"
#include "common/status_macros.h"
#include "google/protobuf/util/time_util.h"
#include "sandgate/v1/labels.h"
#include "playbooks/playbook.h"
#include "store/artifact_store.h"
#include "core/policy.h"
#include "core/request_fingerprint.h"
#include "core/request_validation.h"
#include "core/sandbox_maker.h"
#include "core/sandbox_spec.h"

namespace sandgate::core {
namespace {

using google::protobuf::util::TimeUtil;

bool Finished(v1::RunStatus s) {
  return s == v1::RUN_STATUS_SUCCEEDED || s == v1::RUN_STATUS_FAILED || s == v1::RUN_STATUS_CANCELLED || s == v1::RUN_STATUS_TIMED_OUT;
}

template <typename Map>
std::string Known(const Map& map) {
  std::vector<std::string> names;
  for (const auto& [name, _] : map) names.push_back(name);
  return absl::StrJoin(names, ", ");
}

std::string MiB(uint64_t bytes) { return absl::StrCat(bytes / (1 << 20), " MiB"); }

}  // namespace

struct RunManager::ActiveRun {
  // Constant after Start.
  Caller caller;
  std::string request_run_id;
  v1::RunAnalysisRequest request;
  std::vector<playbooks::InputFile> inputs;  // emptied by Finish
  const playbooks::Playbook* playbook = nullptr;
  playbooks::TaskSettings settings;
  sandbox::Provider* provider = nullptr;
  agent::Agent* agent = nullptr;
  absl::Duration run_timeout;
  absl::Duration command_timeout;

  CancelToken cancel;
  std::atomic<bool> timed_out{false};
  AdmissionQueue::Ticket ticket;
  std::atomic<bool> admitted{false};
  std::atomic<uint64_t> queued_bytes{0};
  std::atomic<bool> request_kept{false};  // in the store (PutRunRequest) until it starts  // its inputs, counted in queued_input_bytes_ while it waits
  // The inputs' contents are only in the kept request (names and order stay in `inputs`):
  // a waiting run holds none of its input bytes in memory. Execute reads them back.
  std::atomic<bool> inputs_shelved{false};
  std::atomic<uint32_t> position{0};  // last position told in run.queued
  // Set once the run is done with its session: a proxy decision or expiry warning arriving
  // later is dropped, so run.finished stays the last event.
  std::atomic<bool> side_closed{false};
  std::atomic<uint32_t> next_command_id{0};

  absl::Mutex mu;
  v1::Run run ABSL_GUARDED_BY(mu);
  absl::Time deadline ABSL_GUARDED_BY(mu) = absl::InfiniteFuture();
};

// Fills run and session ids in, appends to the log; a log failure is logged, not fatal to
// the run (the run's final state is still persisted with the run record).
class RunManager::RunEvents : public agent::EventSink {
 public:
  RunEvents(EventLog* log, ActiveRun* run) : log_(log), run_(run) {
    absl::MutexLock lock(&run->mu);
    run_id_ = run->run.id();
    tenant_ = run->run.tenant();
  }
  void set_session_id(std::string id) { session_id_ = std::move(id); }
  const std::string& run_id() const { return run_id_; }
  const std::string& tenant() const { return tenant_; }
  void Emit(v1::Event event) override {
    event.set_run_id(run_id_);
    event.set_session_id(session_id_);
    absl::StatusOr<v1::Event> stored = log_->Append(std::move(event));
    if (!stored.ok()) {
      log::Error("event.append_failed",
                 {{"run", run_id_}, {"tenant", tenant_}, {"error", stored.status().ToString()}});
    }
  }
  uint32_t NextCommandId() override { return ++run_->next_command_id; }
  void Notice(v1::Notice::Severity severity, std::string message) {
    v1::Event e;
    e.set_type("notice");
    e.mutable_notice()->set_severity(severity);
    e.mutable_notice()->set_message(std::move(message));
    Emit(std::move(e));
  }

 private:
  EventLog* const log_;
  ActiveRun* const run_;
  std::string run_id_, tenant_, session_id_;
};

RunManager::RunManager(RunManagerDeps deps)
    : deps_(std::move(deps)),
      executor_("runs", deps_.config->max_concurrent_runs, /*max_queue=*/deps_.config->max_concurrent_runs),
      admission_(deps_.config->max_concurrent_runs, deps_.config->max_queued_runs, deps_.budget),
      side_events_("side-events", 1, 10000),
      watchdog_([this] { WatchdogLoop(); }) {
  // A sandbox freed by a closing kept session may let a queued run start.
  deps_.budget->set_on_release([this] { Dispatch(); });
}

RunManager::~RunManager() {
  Drain(absl::ZeroDuration());
  deps_.budget->set_on_release(nullptr);
  {
    absl::MutexLock lock(&mu_);
    stop_watchdog_ = true;
  }
  watchdog_.join();
  executor_.Shutdown();
  side_events_.Shutdown();
}

void RunManager::LogSweep(const JournalEntry& entry, const absl::Status& st) {
  if (st.ok()) {
    log::Info("sweep.removed", {{"resource", entry.id}, {"provider", entry.provider}});
  } else {
    log::Error("sweep.failed", {{"resource", entry.id}, {"error", st.ToString()}});
    if (deps_.metrics) deps_.metrics->cleanup_failures.Add({{"where", "sweep"}});
  }
}

void RunManager::LateSweep(std::vector<JournalEntry> entries) {
  constexpr absl::Duration kRound = absl::Milliseconds(250);
  constexpr absl::Duration kGiveUpAfter = absl::Minutes(1);
  const absl::Time give_up = absl::Now() + kGiveUpAfter;
  while (!entries.empty()) {
    absl::SleepFor(kRound);
    absl::Time until;
    {
      absl::MutexLock lock(&mu_);
      until = std::min(give_up, late_sweep_until_);
    }
    std::vector<JournalEntry> still;
    for (const JournalEntry& entry : entries) {
      absl::Status st = deps_.providers.at(entry.provider)->Sweep(entry);
      if (st.code() == absl::StatusCode::kUnavailable && absl::Now() < until) {
        still.push_back(entry);
      } else {
        LogSweep(entry, st);  // UNAVAILABLE past the deadline: the next start sweeps it
      }
    }
    entries = std::move(still);
  }
}

absl::Status RunManager::Recover(const Tenants& tenants) {
  SANDGATE_ASSIGN_OR_RETURN(std::vector<JournalEntry> entries, deps_.store->List());
  std::vector<JournalEntry> later;
  for (const JournalEntry& entry : entries) {
    auto it = deps_.providers.find(entry.provider);
    if (it == deps_.providers.end()) {
      log::Warning("sweep.unknown_provider", {{"resource", entry.id}, {"provider", entry.provider}});
      continue;
    }
    absl::Status st = it->second->Sweep(entry);
    if (st.code() == absl::StatusCode::kUnavailable) {
      log::Info("sweep.deferred", {{"resource", entry.id}, {"why", std::string(st.message())}});
      later.push_back(entry);
    } else {
      LogSweep(entry, st);
    }
  }
  // What cannot be told yet is asked again in the background: the daemon serves meanwhile.
  if (!later.empty()) late_sweeper_ = std::thread([this, later] { LateSweep(later); });
  SANDGATE_ASSIGN_OR_RETURN(std::vector<v1::Run> runs, deps_.store->ListUnfinishedRuns());
  for (v1::Run& run : runs) {
    std::string why = "interrupted: the daemon stopped before the run finished";
    if (run.status() == v1::RUN_STATUS_QUEUED) {
      absl::StatusOr<v1::RunAnalysisRequest> request = deps_.store->GetRunRequest(run.id());
      std::optional<Caller> caller = tenants.Find(run.tenant());
      absl::Status requeued =
          !request.ok() ? request.status()
          : !caller     ? errors::FailedPrecondition(absl::StrCat("tenant ", run.tenant(), " is no longer configured"))
                        : Requeue(*caller, run, std::move(*request));
      if (requeued.ok()) {
        log::Info("run.requeued", {{"run", run.id()}, {"tenant", run.tenant()}});
        continue;
      }
      why = absl::StrCat("the daemon restarted while the run waited, and it could not be queued again: ",
                         requeued.message());
    }
    run.set_status(v1::RUN_STATUS_FAILED);
    run.set_status_reason(why);
    *run.mutable_finished_at() = ToProto(deps_.clock->Now());
    SANDGATE_RETURN_IF_ERROR(deps_.store->PutRun(run));
    v1::Event e;
    e.set_run_id(run.id());
    e.set_session_id(run.session_id());
    e.set_type("run.finished");
    e.mutable_run_finished()->set_status(v1::RUN_STATUS_FAILED);
    e.mutable_run_finished()->set_reason(run.status_reason());
    SANDGATE_RETURN_IF_ERROR(deps_.events->Append(std::move(e)).status());
    log::Warning("run.interrupted", {{"run", run.id()}, {"tenant", run.tenant()}});
  }
  return absl::OkStatus();
}

absl::Status RunManager::Validate(const v1::RunAnalysisRequest& req,
                                  std::vector<playbooks::InputFile>* inputs) const {
  const Config& cfg = *deps_.config;
  if (!req.session_id().empty()) {
    if (deps_.sessions == nullptr) return errors::InvalidArgument("session_id: this daemon keeps no sessions");
    if (req.has_sandbox()) {
      return errors::InvalidArgument(
          "sandbox: a run in an existing session uses that session's sandbox; leave sandbox unset");
    }
  }
  if (req.inputs().empty()) return errors::InvalidArgument("inputs: at least one input file is required");
  uint64_t total = 0;
  std::set<std::string> names;
  for (int i = 0; i < req.inputs_size(); ++i) {
    const v1::InputFile& f = req.inputs(i);
    if (!store::IsPlainFileName(f.name()) || f.name()[0] == '.') {
      return errors::InvalidArgument(absl::StrCat("inputs[", i, "].name: '", f.name(),
                                                  "' is not a plain file name"));
    }
    if (!names.insert(f.name()).second) {
      return errors::InvalidArgument(absl::StrCat("inputs[", i, "].name: duplicate name '", f.name(), "'"));
    }
    total += f.content().size();
    inputs->push_back({f.name(), std::string()});  // the content moves in after (Prepare)
  }
  if (total > cfg.max_input_bytes) {
    return errors::InvalidArgument(absl::StrCat("inputs: ", total, " bytes in total, above the ",
                                                MiB(cfg.max_input_bytes), " limit"));
  }
  return absl::OkStatus();
}

absl::StatusOr<std::shared_ptr<RunManager::ActiveRun>> RunManager::Prepare(
    const Caller& caller, v1::RunAnalysisRequest request) const {
  auto ar = std::make_shared<ActiveRun>();
  if (request.playbook().empty()) request.set_playbook("financial-analyst");
  if (request.agent().empty()) request.set_agent("reference");
  if (!request.session_id().empty() && deps_.sessions != nullptr) {
    // A run in a kept session uses that session's sandbox, so its provider.
    SANDGATE_ASSIGN_OR_RETURN(v1::Session session, deps_.sessions->Get(caller, request.session_id()));
    if (session.status() != v1::SESSION_STATUS_ACTIVE) {
      return errors::FailedPrecondition(absl::StrCat("session_id: session ", session.id(),
                                                     " has ended: ", session.status_reason()));
    }
    if (request.provider().empty()) request.set_provider(session.provider());
    if (request.provider() != session.provider()) {
      return errors::InvalidArgument(absl::StrCat("provider: '", request.provider(), "' is not session ",
                                                  session.id(), "'s provider '", session.provider(),
                                                  "'; leave it empty"));
    }
  }
  if (request.provider().empty()) request.set_provider("local");
  absl::StatusOr<const playbooks::Playbook*> playbook = playbooks::FindPlaybook(request.playbook());
  if (!playbook.ok()) return errors::InvalidArgument(absl::StrCat("playbook: ", playbook.status().message()));
  ar->playbook = *playbook;
  auto provider = deps_.providers.find(request.provider());
  if (provider == deps_.providers.end()) {
    return errors::InvalidArgument(absl::StrCat("provider: '", request.provider(),
                                                "' is not configured on this daemon (configured: ",
                                                Known(deps_.providers), ")"));
  }
  ar->provider = provider->second;
  auto agent = deps_.agents.find(request.agent());
  if (agent == deps_.agents.end()) {
    return errors::InvalidArgument(absl::StrCat("agent: '", request.agent(),
                                                "' is not available on this daemon (available: ",
                                                Known(deps_.agents), ")"));
  }
  ar->agent = agent->second;
  if (!ar->provider->runs_commands() && !ar->agent->works_without_exec()) {
    return errors::InvalidArgument(absl::StrCat(
        "agent: '", request.agent(), "' runs its commands in the sandbox, and the '", request.provider(),
        "' provider runs commands only through the openai agent; use agent 'openai', or provider 'local'"));
  }
  SANDGATE_RETURN_IF_ERROR(CheckProviderRunsCommands(*ar->provider, request.sandbox()));
  if (request.agent() == "reference" && !request.model().empty()) {
    return errors::InvalidArgument("model: the reference agent uses no model");
  }
  SANDGATE_RETURN_IF_ERROR(Validate(request, &ar->inputs));
  // Moved, never copied: an input may be max_input_bytes, and the run holds the only copy.
  for (int i = 0; i < request.inputs_size(); ++i) {
    ar->inputs[i].content = std::move(*request.mutable_inputs(i)->mutable_content());
  }
  absl::Status inputs_ok = ar->playbook->ValidateInputs(ar->inputs);
  if (!inputs_ok.ok()) return errors::InvalidArgument(absl::StrCat("inputs: ", inputs_ok.message()));
  PolicyRequest policy{request.provider(), request.agent(), request.model(), &request.sandbox(),
                       request.has_run_timeout() ? FromProto(request.run_timeout()) : deps_.config->run_timeout};
  SANDGATE_RETURN_IF_ERROR(CheckPolicy(caller, policy, *deps_.config));

  const Config& cfg = *deps_.config;
  ar->run_timeout = request.has_run_timeout() ? FromProto(request.run_timeout()) : cfg.run_timeout;
  ar->command_timeout = CommandTimeout(request.sandbox(), cfg);
  v1::Run run;
  run.set_id(absl::StrCat("run-", RandomHex(8)));
  run.set_tenant(caller.tenant);
  run.set_playbook(request.playbook());
  run.set_provider(request.provider());
  run.set_agent(request.agent());
  run.set_model(request.model());
  run.set_status(v1::RUN_STATUS_QUEUED);
  *run.mutable_created_at() = ToProto(deps_.clock->Now());
  *run.mutable_labels() = request.labels();
  run.set_idempotency_key(request.idempotency_key());
  for (const auto& in : ar->inputs) run.add_input_names(in.name);
  const v1::SandboxSpec& sb = request.sandbox();
  ar->settings.env.insert(sb.env().begin(), sb.env().end());
  ar->settings.setup_commands.assign(sb.setup_commands().begin(), sb.setup_commands().end());
  ar->settings.network = sb.network().mode() == v1::NetworkPolicy::MODE_RESTRICTED ? "restricted"
                         : sb.network().mode() == v1::NetworkPolicy::MODE_ENABLED  ? "enabled"
                                                                              : "disabled";
  ar->settings.allowed_domains.assign(sb.network().allowed_domains().begin(),
                                      sb.network().allowed_domains().end());
  // Inputs are held in memory by the active run (and kept in the store while it is queued);
  // the request copy drops them.
  request.clear_inputs();
  ar->request = std::move(request);
  ar->caller = caller;
  ar->request_run_id = run.id();
  {
    absl::MutexLock lock(&ar->mu);
    ar->run = run;
  }
  return ar;
}

absl::StatusOr<std::optional<v1::Run>> RunManager::FindKeyed(
    const Caller& caller, const std::string& key,
    const std::string& fingerprint) {
  SANDGATE_ASSIGN_OR_RETURN(
      std::optional<store::KeyedRecord> found,
      deps_.store->FindRunByIdempotencyKey(caller.tenant, key));
  if (!found) return std::optional<v1::Run>();
  SANDGATE_RETURN_IF_ERROR(CheckSameRequest(*found, key, fingerprint));
  SANDGATE_ASSIGN_OR_RETURN(v1::Run run, Get(caller, found->id));
  return std::optional<v1::Run>(std::move(run));
}

absl::StatusOr<v1::Run> RunManager::Start(const Caller& caller, v1::RunAnalysisRequest request) {
  SANDGATE_RETURN_IF_ERROR(ValidateRunRequest(request, *deps_.config));
  // Over the request as sent (inputs included): a retry sends the same fields.
  const std::string fingerprint =
      request.idempotency_key().empty() ? "" : RequestFingerprint(request);
  if (!request.idempotency_key().empty()) {
    SANDGATE_ASSIGN_OR_RETURN(
        std::optional<v1::Run> existing,
        FindKeyed(caller, request.idempotency_key(), fingerprint));
    if (existing) return *std::move(existing);
  }
  SANDGATE_ASSIGN_OR_RETURN(std::shared_ptr<ActiveRun> ar, Prepare(caller, std::move(request)));
  v1::Run run;
  {
    absl::MutexLock lock(&ar->mu);
    run = ar->run;
  }
  {
    absl::MutexLock lock(&mu_);
    if (draining_) return errors::Unavailable("the daemon is shutting down; not accepting runs");
  }
  if (admission_.waiting() >= deps_.config->max_queued_runs) {
    return errors::ResourceExhausted(absl::StrCat("the run queue is full (max_queued_runs ",
                                                  deps_.config->max_queued_runs, ")"));
  }
  SANDGATE_RETURN_IF_ERROR(HoldQueuedBytes(*ar, /*enforce=*/true));
  absl::Status rate = CheckRate(caller);
  if (!rate.ok()) {
    ReleaseQueuedBytes(*ar);
    return rate;
  }
  absl::Status put = deps_.store->CreateRun(run, fingerprint);
  if (!put.ok()) ReleaseQueuedBytes(*ar);
  if (put.code() == absl::StatusCode::kAlreadyExists) {
    // A concurrent request with the same idempotency key won the race: the same
    // request is answered with its run, a different one refused.
    SANDGATE_ASSIGN_OR_RETURN(
        std::optional<v1::Run> existing,
        FindKeyed(caller, run.idempotency_key(), fingerprint));
    if (existing) return *std::move(existing);
  }
  SANDGATE_RETURN_IF_ERROR(put);
  // Kept while the run waits, so a restarted daemon can queue it again.
  absl::Status kept = KeepRequest(*ar);
  ar->request_kept.store(kept.ok());
  if (!kept.ok()) log::Error("run.request_not_kept", {{"run", run.id()}, {"error", kept.ToString()}});
  if (kept.ok()) ShelveInputs(*ar);
  return Admit(ar);
}

absl::StatusOr<v1::Run> RunManager::Admit(const std::shared_ptr<ActiveRun>& ar) {
  v1::Run run;
  {
    absl::MutexLock lock(&ar->mu);
    run = ar->run;
  }
  const Caller& caller = ar->caller;
  ar->ticket = {run.id(), caller.tenant, caller.config ? caller.config->quotas.concurrent_runs : 0,
                /*needs_sandbox=*/ar->request.session_id().empty()};
  {
    absl::MutexLock lock(&mu_);
    active_[run.id()] = ar;
  }
  log::Info("run.queued", {{"run", run.id()}, {"tenant", run.tenant()},
                           {"playbook", run.playbook()}, {"agent", run.agent()}});
  RunEvents events(deps_.events, ar.get());
  absl::Status queued = admission_.Enqueue(ar->ticket);
  if (!queued.ok()) {
    Finish(ar, events, v1::RUN_STATUS_FAILED, std::string(queued.message()));
    return queued;
  }
  std::vector<std::string> order = admission_.Order();
  uint32_t position = static_cast<uint32_t>(
      std::find(order.begin(), order.end(), run.id()) - order.begin() + 1);
  ar->position.store(position);
  v1::Event queued_event;
  queued_event.set_type("run.queued");
  queued_event.mutable_run_queued()->set_position(position);
  events.Emit(std::move(queued_event));
  Dispatch();
  return run;
}

absl::Status RunManager::KeepRequest(ActiveRun& ar) {
  // The inputs move into the request for the write and back, so keeping it costs no copy.
  for (playbooks::InputFile& in : ar.inputs) {
    v1::InputFile* f = ar.request.add_inputs();
    f->set_name(in.name);
    *f->mutable_content() = std::move(in.content);
  }
  absl::Status kept = deps_.store->PutRunRequest(ar.request_run_id, ar.request);
  for (size_t i = 0; i < ar.inputs.size(); ++i) {
    ar.inputs[i].content =
        std::move(*ar.request.mutable_inputs(static_cast<int>(i))->mutable_content());
  }
  ar.request.clear_inputs();
  return kept;
}

void RunManager::ShelveInputs(ActiveRun& ar) {
  for (playbooks::InputFile& in : ar.inputs) std::string().swap(in.content);
  ar.inputs_shelved.store(true);
}

absl::Status RunManager::UnshelveInputs(ActiveRun& ar) {
  SANDGATE_ASSIGN_OR_RETURN(v1::RunAnalysisRequest kept,
                            deps_.store->GetRunRequest(ar.request_run_id));
  if (static_cast<size_t>(kept.inputs_size()) != ar.inputs.size()) {
    return errors::Internal(absl::StrCat("the kept request has ", kept.inputs_size(),
                                         " inputs, not ", ar.inputs.size()));
  }
  for (size_t i = 0; i < ar.inputs.size(); ++i) {
    v1::InputFile* f = kept.mutable_inputs(static_cast<int>(i));
    if (f->name() != ar.inputs[i].name) {
      return errors::Internal(absl::StrCat("the kept request's input ", i, " is '", f->name(),
                                           "', not '", ar.inputs[i].name, "'"));
    }
    ar.inputs[i].content = std::move(*f->mutable_content());
  }
  ar.inputs_shelved.store(false);
  return absl::OkStatus();
}

absl::Status RunManager::Requeue(const Caller& caller, const v1::Run& run,
                                 v1::RunAnalysisRequest request) {
  // Checked again: the daemon's configuration (and the tenant's policy) may have changed.
  SANDGATE_RETURN_IF_ERROR(ValidateRunRequest(request, *deps_.config));
  SANDGATE_ASSIGN_OR_RETURN(std::shared_ptr<ActiveRun> ar, Prepare(caller, std::move(request)));
  ar->request_run_id = run.id();
  {
    absl::MutexLock lock(&ar->mu);
    ar->run = run;
  }
  (void)HoldQueuedBytes(*ar, /*enforce=*/false);  // accepted before: never refused now
  ar->request_kept.store(true);  // read from the store just now
  ShelveInputs(*ar);
  {
    RunEvents events(deps_.events, ar.get());
    events.Notice(v1::Notice::SEVERITY_WARNING, "the daemon restarted while this run waited; it is queued again");
  }
  return Admit(ar).status();
}

absl::Status RunManager::HoldQueuedBytes(ActiveRun& ar, bool enforce) {
  uint64_t bytes = 0;
  for (const playbooks::InputFile& in : ar.inputs) bytes += in.content.size();
  const uint64_t max = deps_.config->max_queued_input_bytes;
  absl::MutexLock lock(&mu_);
  if (enforce && queued_input_bytes_ > 0 && queued_input_bytes_ + bytes > max) {
    return errors::ResourceExhausted(absl::StrCat(
        "waiting runs already hold ", queued_input_bytes_ >> 20, " MiB of inputs and this run's ",
        (bytes + (1 << 20) - 1) >> 20, " MiB would pass max_queued_input_bytes (", max >> 20, " MiB); retry later"));
  }
  queued_input_bytes_ += bytes;
  ar.queued_bytes.store(bytes);
  return absl::OkStatus();
}

void RunManager::ReleaseQueuedBytes(ActiveRun& ar) {
  const uint64_t bytes = ar.queued_bytes.exchange(0);
  if (bytes == 0) return;
  absl::MutexLock lock(&mu_);
  queued_input_bytes_ -= bytes;
}

absl::Status RunManager::CheckRate(const Caller& caller) {
  uint32_t limit = caller.config ? caller.config->quotas.runs_per_minute : 0;
  if (limit == 0) return absl::OkStatus();
  absl::Time now = deps_.clock->Now();
  absl::MutexLock lock(&mu_);
  std::deque<absl::Time>& starts = recent_starts_[caller.tenant];
  while (!starts.empty() && starts.front() <= now - absl::Minutes(1)) starts.pop_front();
  if (starts.size() >= limit) {
    absl::Duration wait = starts.front() + absl::Minutes(1) - now;
    return errors::ResourceExhausted(absl::StrCat(
        "quota runs_per_minute (", limit, ") of tenant ", caller.tenant, " is used up; retry in ",
        absl::ToInt64Seconds(absl::Ceil(wait, absl::Seconds(1))), "s"));
  }
  starts.push_back(now);
  return absl::OkStatus();
}

void RunManager::Dispatch() {
  for (const AdmissionQueue::Ticket& t : admission_.Admit()) {
    std::shared_ptr<ActiveRun> ar;
    {
      absl::MutexLock lock(&mu_);
      auto it = active_.find(t.run_id);
      if (it != active_.end()) ar = it->second;
    }
    if (!ar) {  // finished while being admitted
      admission_.Done(t);
      continue;
    }
    ar->admitted.store(true);
    ReleaseQueuedBytes(*ar);
    // The executor has a thread for every run the admission lets through.
    if (!executor_.Submit([this, ar] { Execute(ar); })) {
      RunEvents events(deps_.events, ar.get());
      Finish(ar, events, v1::RUN_STATUS_FAILED, "the daemon is shutting down");
    }
  }
  // Tell waiting runs where they stand now (only those whose position changed).
  std::vector<std::string> order = admission_.Order();
  for (size_t i = 0; i < order.size(); ++i) {
    std::shared_ptr<ActiveRun> ar;
    {
      absl::MutexLock lock(&mu_);
      auto it = active_.find(order[i]);
      if (it != active_.end()) ar = it->second;
    }
    uint32_t position = static_cast<uint32_t>(i + 1);
    if (!ar || ar->position.exchange(position) == position) continue;
    RunEvents events(deps_.events, ar.get());
    v1::Event queued;
    queued.set_type("run.queued");
    queued.mutable_run_queued()->set_position(position);
    events.Emit(std::move(queued));
  }
}

void RunManager::PutRun(ActiveRun& ar) {
  v1::Run copy;
  {
    absl::MutexLock lock(&ar.mu);
    copy = ar.run;
  }
  absl::Status st = deps_.store->PutRun(copy);
  if (!st.ok()) log::Error("run.persist_failed", {{"run", copy.id()}, {"error", st.ToString()}});
}

void RunManager::Execute(const std::shared_ptr<ActiveRun>& ar) {
  RunEvents events(deps_.events, ar.get());
  if (ar->cancel.cancelled()) {
    Finish(ar, events, v1::RUN_STATUS_CANCELLED, ar->cancel.reason());
    return;
  }
  // Before the run is RUNNING: that deletes the kept request.
  if (ar->inputs_shelved.load()) {
    absl::Status back = UnshelveInputs(*ar);
    if (!back.ok()) {
      Finish(
          ar, events, v1::RUN_STATUS_FAILED,
          absl::StrCat("reading the run's inputs back from the state database: ", back.message()));
      return;
    }
  }
  const bool kept = !ar->request.session_id().empty();
  // An ephemeral session is named after the run and lives and dies with it; a kept one is
  // the caller's, used under a lease and left open for follow-up runs.
  std::string session_id = kept ? ar->request.session_id() : absl::StrCat("s", ar->request_run_id.substr(4));
  {
    absl::MutexLock lock(&ar->mu);
    ar->run.set_status(v1::RUN_STATUS_RUNNING);
    *ar->run.mutable_started_at() = ToProto(deps_.clock->Now());
    ar->deadline = deps_.clock->Now() + ar->run_timeout;
    ar->run.set_session_id(session_id);
  }
  PutRun(*ar);
  events.set_session_id(session_id);
  v1::Event started;
  started.set_type("run.started");
  auto* rs = started.mutable_run_started();
  rs->set_playbook(ar->request.playbook());
  rs->set_provider(ar->request.provider());
  rs->set_agent(ar->request.agent());
  rs->set_model(ar->request.model());
  events.Emit(std::move(started));

  // Decisions arrive on the proxy's threads; they are appended from the side
  // executor.
  auto on_decision = [this, ar, session_id](const sandbox::NetworkDecision& d) {
    EmitSide(ar, session_id, NetworkDecisionEvent(d));
  };
  SandboxPlan plan{session_id,
                   ar->provider,
                   &ar->request.sandbox(),
                   ar->command_timeout,
                   on_decision,
                   &ar->inputs,
                   [this, ar] { CloseSide(*ar); }};
  const SandboxEnv env{deps_.config, deps_.clock, deps_.metrics};
  std::unique_ptr<SessionManager::Lease> lease;
  std::unique_ptr<sandbox::Session> ephemeral;
  absl::Status agent_status;
  if (kept) {
    LeaseWatch watch{&ar->cancel,
                     [this, ar, session_id](const v1::SessionExpiring& x) {
                       v1::Event e;
                       e.set_type("session.expiring");
                       *e.mutable_session_expiring() = x;
                       EmitSide(ar, session_id, std::move(e));
                     },
                     on_decision};
    absl::StatusOr<std::unique_ptr<SessionManager::Lease>> acquired =
        deps_.sessions->Acquire(ar->caller, session_id, std::move(watch));
    if (!acquired.ok()) {
      Finish(ar, events, v1::RUN_STATUS_FAILED, std::string(acquired.status().message()));
      return;
    }
    lease = std::move(*acquired);
    if (!ar->request.sandbox().has_command_timeout()) ar->command_timeout = lease->command_timeout();
    events.Notice(v1::Notice::SEVERITY_INFO, absl::StrCat("running in kept session ", session_id,
                                                 "; its workspace stays after the run"));
    plan.spec = nullptr;  // the session's own sandbox.files and setup ran when
                          // it was made
    agent_status = PrepareSandbox(lease->session(), plan, events, ar->cancel);
    if (agent_status.ok())
      agent_status = RunInSession(*ar, lease->session(), events);
    lease.reset();  // no expiry warning or decision is queued for this run
                    // after this
    CloseSide(*ar);
  } else {
    absl::StatusOr<std::unique_ptr<sandbox::Session>> made =
        MakeSandbox(plan, env, events, ar->cancel);
    if (made.ok()) {
      log::Info("session.created", {{"run", events.run_id()},
                                    {"tenant", events.tenant()},
                                    {"session", session_id}});
      agent_status = RunInSession(*ar, **made, events);
      CloseSandbox(**made, plan, env, events,
                   "ephemeral session ends with its run", "session_close")
          .IgnoreError();  // logged and counted there; the run's outcome is the
                           // agent's
    } else {
      agent_status = made.status();
    }
  }

  if (ar->timed_out.load()) {
    Finish(ar, events, v1::RUN_STATUS_TIMED_OUT,
           absl::StrCat("run timed out after ", absl::FormatDuration(ar->run_timeout)));
  } else if (ar->cancel.cancelled()) {
    Finish(ar, events, v1::RUN_STATUS_CANCELLED, ar->cancel.reason());
  } else if (!agent_status.ok()) {
    Finish(ar, events, v1::RUN_STATUS_FAILED, std::string(agent_status.message()));
  } else {
    std::vector<std::string> failed;
    {
      absl::MutexLock lock(&ar->mu);
      for (const auto& c : ar->run.checks()) {
        if (!c.passed()) failed.push_back(c.name());
      }
    }
    if (failed.empty()) {
      Finish(ar, events, v1::RUN_STATUS_SUCCEEDED, "");
    } else {
      Finish(ar, events, v1::RUN_STATUS_FAILED,
             absl::StrCat("verification failed: ", absl::StrJoin(failed, ", ")));
    }
  }
}

void RunManager::EmitSide(const std::shared_ptr<ActiveRun>& ar, const std::string& session_id,
                          v1::Event event) {
  std::string type = event.type();
  if (!side_events_.Submit([this, ar, session_id, e = std::move(event)]() mutable {
        if (ar->side_closed.load()) return;
        RunEvents events(deps_.events, ar.get());
        events.set_session_id(session_id);
        events.Emit(std::move(e));
      })) {
    log::Warning("event.dropped", {{"run", ar->request_run_id}, {"type", type}});
  }
}

void RunManager::CloseSide(ActiveRun& ar) {
  absl::Notification flushed;
  if (side_events_.Submit([&flushed] { flushed.Notify(); })) flushed.WaitForNotification();
  ar.side_closed.store(true);
}

absl::Status RunManager::RunInSession(ActiveRun& ar, sandbox::Session& session,
                                      RunEvents& events) {
  agent::AgentTask task;
  task.playbook = ar.playbook;
  task.inputs = &ar.inputs;
  task.settings = &ar.settings;
  task.model = ar.request.model();
  task.max_turns = ar.request.max_turns();
  task.command_timeout = ar.command_timeout;
  absl::Status agent_status = ar.agent->Run(task, session, events, ar.cancel);
  if (ar.cancel.cancelled()) return agent_status;

  // Collect whatever exists, also after a failed agent: a fatal validation still writes
  // analysis_run.json, and the caller should see why. Each artifact streams from the sandbox
  // into the store in bounded pieces, hashed as they pass; only verification reads them
  // whole, from the store.
  std::string run_id;
  {
    absl::MutexLock lock(&ar.mu);
    run_id = ar.run.id();
  }
  std::vector<v1::Artifact> stored;
  for (const std::string& name : ar.playbook->ExpectedArtifacts()) {
    SANDGATE_ASSIGN_OR_RETURN(std::unique_ptr<store::ArtifactStore::Writer> writer,
                              deps_.artifacts->Create(run_id, name));
    absl::Status store_error;
    absl::Status copied =
        session.ReadFileTo(name, deps_.config->max_artifact_bytes, [&](absl::string_view piece) {
          store_error = writer->Append(piece);
          return store_error;
        });
    if (!store_error.ok()) return store_error;
    if (!copied.ok()) {  // the writer removes what it stored of it
      // The sandbox can no longer be read (a hosted container expired, or it was closed):
      // that, not "artifact missing", is why the run fails.
      if (copied.code() == absl::StatusCode::kFailedPrecondition) {
        return agent_status.ok() ? copied : agent_status;
      }
      if (copied.code() != absl::StatusCode::kNotFound) {
        events.Notice(v1::Notice::SEVERITY_WARNING,
                      absl::StrCat("artifact ", name, " refused: ", copied.message()));
      }
      continue;
    }
    SANDGATE_ASSIGN_OR_RETURN(v1::Artifact artifact, writer->Commit());
    v1::Event e;
    e.set_type("artifact.collected");
    *e.mutable_artifact_collected()->mutable_artifact() = artifact;
    events.Emit(std::move(e));
    {
      absl::MutexLock lock(&ar.mu);
      *ar.run.add_artifacts() = artifact;
    }
    stored.push_back(std::move(artifact));
  }
  if (!agent_status.ok()) return agent_status;

  playbooks::Artifacts collected;
  for (const v1::Artifact& a : stored) {
    SANDGATE_ASSIGN_OR_RETURN(collected[a.name()],
                              deps_.artifacts->Read(run_id, a.name(), 0, a.size_bytes()));
  }
  playbooks::Verdict verdict = ar.playbook->Verify(ar.inputs, ar.settings, collected);
  {
    absl::MutexLock lock(&ar.mu);
    *ar.run.mutable_summary() = std::move(verdict.summary);
  }
  for (const playbooks::Check& check : verdict.checks) {
    v1::Event e;
    e.set_type("check");
    v1::CheckResult* c = e.mutable_check();
    c->set_name(check.name);
    c->set_passed(check.passed);
    c->set_detail(check.detail);
    {
      absl::MutexLock lock(&ar.mu);
      *ar.run.add_checks() = *c;
    }
    events.Emit(std::move(e));
  }
  return absl::OkStatus();
}

void RunManager::Finish(const std::shared_ptr<ActiveRun>& ar, RunEvents& events,
                        v1::RunStatus status, std::string reason) {
  v1::Event e;
  e.set_type("run.finished");
  auto* f = e.mutable_run_finished();
  std::string run_id, tenant;
  {
    absl::MutexLock lock(&ar->mu);
    ar->run.set_status(status);
    ar->run.set_status_reason(reason);
    *ar->run.mutable_finished_at() = ToProto(deps_.clock->Now());
    for (const auto& c : ar->run.checks()) {
      if (!c.passed()) f->add_failed_checks(c.name());
    }
    if (ar->run.has_summary()) *f->mutable_summary() = ar->run.summary();
    run_id = ar->run.id();
    tenant = ar->run.tenant();
  }
  if (deps_.metrics) {
    deps_.metrics->runs_finished.Add({{"status", v1::RunStatusLabel(status)}});
    absl::MutexLock lock(&ar->mu);
    if (ar->run.has_started_at()) {
      deps_.metrics->run_seconds.Observe(
          absl::ToDoubleSeconds(FromProto(ar->run.finished_at()) - FromProto(ar->run.started_at())));
    }
  }
  // The record is final before the terminal event, so a caller that sees run.finished and
  // then calls GetRun reads the final status.
  PutRun(*ar);
  f->set_status(status);
  f->set_reason(reason);
  events.Emit(std::move(e));
  log::Info("run.finished", {{"run", run_id}, {"tenant", tenant},
                             {"status", v1::RunStatusLabel(status)}, {"reason", reason}});
  {
    absl::MutexLock lock(&mu_);
    active_.erase(run_id);
  }
  if (ar->admitted.exchange(false)) {
    admission_.Done(ar->ticket);
    Dispatch();
  } else {
    admission_.Remove(run_id);
  }
  ReleaseQueuedBytes(*ar);
  // Done with (placed, verified, or never to run): the inputs go now, not when the last
  // holder of the run lets go of it; after a large run the freed memory goes back too.
  uint64_t handled = 0;
  for (const playbooks::InputFile& in : ar->inputs) handled += in.content.size();
  {
    absl::MutexLock lock(&ar->mu);
    for (const v1::Artifact& a : ar->run.artifacts()) handled += a.size_bytes();
  }
  std::vector<playbooks::InputFile>().swap(ar->inputs);
  if (handled >= kTrimAfterBytes) ReleaseFreeMemory();
}

absl::StatusOr<v1::Run> RunManager::Get(const Caller& caller, const std::string& run_id) {
  SANDGATE_RETURN_IF_ERROR(ValidateId(run_id, "run_id"));
  std::shared_ptr<ActiveRun> ar;
  {
    absl::MutexLock lock(&mu_);
    auto it = active_.find(run_id);
    if (it != active_.end()) ar = it->second;
  }
  v1::Run run;
  if (ar) {
    absl::MutexLock lock(&ar->mu);
    run = ar->run;
  } else {
    SANDGATE_ASSIGN_OR_RETURN(run, deps_.store->GetRun(run_id));
  }
  if (run.tenant() != caller.tenant && !caller.is_operator) return errors::NotFound("run", run_id);
  SANDGATE_ASSIGN_OR_RETURN(int64_t last, deps_.store->LastSeq(run_id));
  run.set_last_seq(last);
  return run;
}

absl::Status RunManager::CheckEventsVisible(const Caller& caller,
                                            const std::string& id) {
  absl::StatusOr<v1::Run> run = Get(caller, id);
  if (run.status().code() != absl::StatusCode::kNotFound ||
      deps_.sessions == nullptr)
    return run.status();
  absl::StatusOr<v1::Session> session = deps_.sessions->Get(caller, id);
  return session.ok() ? absl::OkStatus() : run.status();
}

absl::StatusOr<store::RunPage> RunManager::List(const Caller& caller, uint32_t page_size,
                                                const std::string& page_token) {
  if (page_size == 0) page_size = 50;
  if (page_size > 500) return errors::InvalidArgument("page_size: at most 500");
  SANDGATE_ASSIGN_OR_RETURN(
      store::RunPage page,
      deps_.store->ListRuns(caller.is_operator ? "" : caller.tenant, page_size, page_token));
  for (v1::Run& run : page.runs) {
    SANDGATE_ASSIGN_OR_RETURN(int64_t last, deps_.store->LastSeq(run.id()));
    run.set_last_seq(last);
  }
  return page;
}

absl::StatusOr<v1::Run> RunManager::Cancel(const Caller& caller, const std::string& run_id,
                                           const std::string& reason) {
  SANDGATE_RETURN_IF_ERROR(ValidateReason(reason));
  SANDGATE_ASSIGN_OR_RETURN(v1::Run run, Get(caller, run_id));
  if (Finished(run.status())) return run;
  std::shared_ptr<ActiveRun> ar;
  {
    absl::MutexLock lock(&mu_);
    auto it = active_.find(run_id);
    if (it != active_.end()) ar = it->second;
  }
  if (ar) {
    std::string why = reason.empty() ? "cancelled by the caller" : absl::StrCat("cancelled by the caller: ", reason);
    ar->cancel.Cancel(why);
    log::Info("run.cancel_requested", {{"run", run_id}, {"tenant", caller.tenant}});
    if (admission_.Remove(run_id)) {  // still waiting: it ends now, without a sandbox
      RunEvents events(deps_.events, ar.get());
      Finish(ar, events, v1::RUN_STATUS_CANCELLED, why);
    }
  }
  return Get(caller, run_id);
}

absl::StatusOr<std::string> RunManager::ReadArtifact(const Caller& caller,
                                                     const std::string& run_id,
                                                     const std::string& name, uint64_t offset,
                                                     uint64_t max_bytes) {
  SANDGATE_ASSIGN_OR_RETURN(v1::Run run, Get(caller, run_id));
  for (const v1::Artifact& a : run.artifacts()) {
    if (a.name() == name) return deps_.artifacts->Read(run_id, name, offset, max_bytes);
  }
  return errors::NotFound("artifact", absl::StrCat(run_id, "/", name));
}

absl::StatusOr<size_t> RunManager::PurgeBefore(absl::Time cutoff) {
  SANDGATE_ASSIGN_OR_RETURN(std::vector<std::string> runs, deps_.store->PurgeBefore(cutoff));
  for (const std::string& id : runs) {
    absl::Status st = deps_.artifacts->RemoveRun(id);
    if (!st.ok()) {
      log::Error("retention.artifacts_failed",
                 {{"run", id}, {"error", st.ToString()}});
      if (deps_.metrics)
        deps_.metrics->cleanup_failures.Add({{"where", "retention"}});
    }
  }
  if (!runs.empty()) log::Info("retention.purged", {{"runs", runs.size()}});
  return runs.size();
}

size_t RunManager::active_runs() {
  absl::MutexLock lock(&mu_);
  return active_.size();
}

size_t RunManager::Drain(absl::Duration grace) {
  std::vector<std::shared_ptr<ActiveRun>> runs;
  {
    absl::MutexLock lock(&mu_);
    draining_ = true;
    for (const auto& [id, ar] : active_) runs.push_back(ar);
  }
  for (const auto& ar : runs) {
    if (!admission_.Remove(ar->request_run_id)) {  // running: its sandbox cannot outlive us
      ar->cancel.Cancel("the daemon is shutting down");
      continue;
    }
    RunEvents events(deps_.events, ar.get());
    if (ar->request_kept.load()) {
      // Waiting and kept: it stays QUEUED and is queued again when the daemon is back.
      events.Notice(v1::Notice::SEVERITY_WARNING,
                    "the daemon is shutting down; this run stays queued and starts when it is back "
                    "(follow again from the last seq seen)");
      log::Info("run.shelved", {{"run", ar->request_run_id}, {"tenant", events.tenant()}});
      ReleaseQueuedBytes(*ar);
      absl::MutexLock lock(&mu_);
      active_.erase(ar->request_run_id);
    } else {
      Finish(ar, events, v1::RUN_STATUS_CANCELLED, "the daemon is shutting down");
    }
  }
  const absl::Time deadline = absl::Now() + grace;
  size_t left;
  {
    absl::MutexLock lock(&mu_);
    mu_.AwaitWithTimeout(absl::Condition(
                             +[](absl::flat_hash_map<std::string, std::shared_ptr<ActiveRun>>* m) {
                               return m->empty();
                             },
                             &active_),
                         grace);
    left = active_.size();
    // A late sweep still waiting for upstream may go on until the grace is over.
    late_sweep_until_ = std::min(late_sweep_until_, deadline);
  }
  if (late_sweeper_.joinable()) late_sweeper_.join();
  return left;
}

void RunManager::WatchdogLoop() {
  absl::MutexLock lock(&mu_);
  absl::Time next_purge = deps_.clock->Now();
  while (!stop_watchdog_) {
    mu_.AwaitWithTimeout(absl::Condition(&stop_watchdog_), absl::Milliseconds(100));
    absl::Time now = deps_.clock->Now();
    if (deps_.config->retention > absl::ZeroDuration() && now >= next_purge) {
      next_purge = now + absl::Minutes(1);
      mu_.Unlock();
      absl::StatusOr<size_t> purged = PurgeBefore(now - deps_.config->retention);
      if (!purged.ok()) log::Error("retention.failed", {{"error", purged.status().ToString()}});
      mu_.Lock();
      continue;
    }
    for (const auto& [id, ar] : active_) {
      absl::MutexLock l(&ar->mu);
      if (ar->run.status() == v1::RUN_STATUS_RUNNING && now >= ar->deadline && !ar->timed_out.load()) {
        ar->timed_out.store(true);
        ar->cancel.Cancel(absl::StrCat("run timed out after ", absl::FormatDuration(ar->run_timeout)));
      }
    }
  }
}

}  // namespace sandgate::core
