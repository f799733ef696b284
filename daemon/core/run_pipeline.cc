// Execute: a run's steps on its own thread, once admitted (DESIGN.md "A run, end to end",
// 3-7): make the sandbox (its own, or a lease on a kept session) and place the inputs
// (core/sandbox_maker.h), then agent, collect, verify (run_collect.cc), then finish.
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/synchronization/notification.h"
#include "common/events.h"
#include "common/log.h"
#include "core/run_manager.h"
#include "core/sandbox_maker.h"
#include "core/sandbox_spec.h"

namespace sandgate::core {

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
  // An ephemeral session is named after the run and lives and dies with it; a kept one is
  // the caller's, used under a lease and left open for follow-up runs.
  const bool kept = !ar->request.session_id().empty();
  // A ready sandbox of the run's shape is its own at once; the session takes its id. The run
  // already holds a budget unit from admission, so the one the sandbox held goes back.
  std::optional<WarmSandbox> warm;
  if (!kept) warm = TakeWarm(deps_.warm_pool, ar->provider, ar->request.sandbox(), *deps_.config);
  if (warm && deps_.budget != nullptr) deps_.budget->Give();
  const std::string session_id = kept   ? ar->request.session_id()
                                 : warm ? warm->session->id()
                                        : absl::StrCat("s", ar->request_run_id.substr(4));
  BeginRunning(*ar, session_id, events);
  if (!kept) {
    Conclude(ar, events, InOwnSandbox(ar, session_id, warm ? &*warm : nullptr, events));
    return;
  }
  absl::StatusOr<std::unique_ptr<SessionManager::Lease>> lease = LeaseKeptSession(ar, session_id);
  if (!lease.ok()) {  // the run could not start in it: that is the outcome, whatever came since
    Finish(ar, events, v1::RUN_STATUS_FAILED, std::string(lease.status().message()));
    return;
  }
  Conclude(ar, events, InKeptSession(ar, session_id, std::move(*lease), events));
}

void RunManager::BeginRunning(ActiveRun& ar, const std::string& session_id, RunEvents& events) {
  {
    absl::MutexLock lock(&ar.mu);
    ar.run.set_status(v1::RUN_STATUS_RUNNING);
    *ar.run.mutable_started_at() = ToProto(deps_.clock->Now());
    ar.deadline = deps_.clock->Now() + ar.run_timeout;
    ar.run.set_session_id(session_id);
  }
  {
    absl::MutexLock lock(&mu_);
    ++deadlines_set_;  // the watchdog now waits for this run's deadline too
  }
  PutRun(ar);
  events.set_session_id(session_id);
  events.Emit(events::RunStarted(ar.request.playbook(), ar.request.provider(), ar.request.agent(),
                                 ar.request.model()));
}

namespace {

// What the run's sandbox is made from; the callbacks hold the run.
SandboxPlan PlanFor(const std::shared_ptr<ActiveRun>& ar, const std::string& session_id,
                    std::function<void(const sandbox::NetworkDecision&)> on_decision,
                    std::function<void()> flush) {
  return SandboxPlan{session_id,          ar->provider,           &ar->request.sandbox(),
                     ar->command_timeout, std::move(on_decision), &ar->inputs,
                     std::move(flush)};
}

}  // namespace

absl::Status RunManager::InOwnSandbox(const std::shared_ptr<ActiveRun>& ar,
                                      const std::string& session_id, WarmSandbox* warm,
                                      RunEvents& events) {
  // Decisions arrive on the proxy's threads; they are appended from the side executor.
  SandboxPlan plan = PlanFor(
      ar, session_id,
      [this, ar, session_id](const sandbox::NetworkDecision& d) {
        EmitSide(ar, session_id, NetworkDecisionEvent(d));
      },
      [this, ar] { CloseSide(*ar); });
  if (warm != nullptr) {
    warm->ConnectDecisions(plan.on_network_decision);
    plan.warm = warm;
  }
  const SandboxEnv env{deps_.config, deps_.clock, deps_.metrics};
  absl::StatusOr<std::unique_ptr<sandbox::Session>> made =
      MakeSandbox(plan, env, events, ar->cancel);
  if (!made.ok()) return made.status();
  log::Info("session.created",
            {{"run", events.run_id()}, {"tenant", events.tenant()}, {"session", session_id}});
  absl::Status agent_status = RunInSession(*ar, **made, events);
  CloseSandbox(**made, plan, env, events, "ephemeral session ends with its run", "session_close")
      .IgnoreError();  // logged and counted there; the run's outcome is the agent's
  return agent_status;
}

absl::StatusOr<std::unique_ptr<SessionManager::Lease>> RunManager::LeaseKeptSession(
    const std::shared_ptr<ActiveRun>& ar, const std::string& session_id) {
  LeaseWatch watch{&ar->cancel,
                   [this, ar, session_id](const v1::SessionExpiring& x) {
                     EmitSide(ar, session_id, events::SessionExpiring(x));
                   },
                   [this, ar, session_id](const sandbox::NetworkDecision& d) {
                     EmitSide(ar, session_id, NetworkDecisionEvent(d));
                   }};
  return deps_.sessions->Acquire(ar->caller, session_id, std::move(watch));
}

absl::Status RunManager::InKeptSession(const std::shared_ptr<ActiveRun>& ar,
                                       const std::string& session_id,
                                       std::unique_ptr<SessionManager::Lease> lease,
                                       RunEvents& events) {
  if (!ar->request.sandbox().has_command_timeout()) {
    ar->command_timeout = lease->command_timeout();
  }
  events.Notice(v1::Notice::SEVERITY_INFO, absl::StrCat("running in kept session ", session_id,
                                                        "; its workspace stays after the run"));
  // Decisions reach the run through the lease's watch; the session's own sandbox.files and
  // setup ran when it was made.
  SandboxPlan plan = PlanFor(ar, session_id, nullptr, [this, ar] { CloseSide(*ar); });
  plan.spec = nullptr;
  absl::Status agent_status = PrepareSandbox(lease->session(), plan, events, ar->cancel);
  if (agent_status.ok()) agent_status = RunInSession(*ar, lease->session(), events);
  lease.reset();  // no expiry warning or decision is queued for this run after this
  CloseSide(*ar);
  return agent_status;
}

void RunManager::Conclude(const std::shared_ptr<ActiveRun>& ar, RunEvents& events,
                          const absl::Status& agent_status) {
  if (ar->timed_out.load()) {
    Finish(ar, events, v1::RUN_STATUS_TIMED_OUT,
           absl::StrCat("run timed out after ", absl::FormatDuration(ar->run_timeout)));
    return;
  }
  if (ar->cancel.cancelled()) {
    Finish(ar, events, v1::RUN_STATUS_CANCELLED, ar->cancel.reason());
    return;
  }
  if (!agent_status.ok()) {
    Finish(ar, events, v1::RUN_STATUS_FAILED, std::string(agent_status.message()));
    return;
  }
  std::vector<std::string> failed;
  const v1::Run run = ar->Snapshot();
  for (const auto& c : run.checks()) {
    if (!c.passed()) failed.push_back(c.name());
  }
  if (failed.empty()) {
    Finish(ar, events, v1::RUN_STATUS_SUCCEEDED, "");
  } else {
    Finish(ar, events, v1::RUN_STATUS_FAILED,
           absl::StrCat("verification failed: ", absl::StrJoin(failed, ", ")));
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

}  // namespace sandgate::core
