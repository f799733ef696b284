#include "core/sandbox_maker.h"

#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/strip.h"
#include "common/errors.h"
#include "common/events.h"
#include "common/log.h"
#include "common/status_macros.h"
#include "core/sandbox_spec.h"

namespace sandgate::core {
namespace {

// Passes events on and keeps the tail of stderr, so a failed setup command says
// what it said.
class KeepStderr : public agent::EventSink {
 public:
  explicit KeepStderr(agent::EventSink& next) : next_(next) {}
  void Emit(v1::Event event) override {
    if (event.has_command_output() &&
        event.command_output().stream() == v1::CommandOutput::STREAM_STDERR) {
      tail_ += event.command_output().data();
      if (tail_.size() > kTail) tail_.erase(0, tail_.size() - kTail);
    }
    next_.Emit(std::move(event));
  }
  uint32_t NextCommandId() override { return next_.NextCommandId(); }
  std::string tail() const { return std::string(absl::StripTrailingAsciiWhitespace(tail_)); }

 private:
  static constexpr size_t kTail = 4096;
  agent::EventSink& next_;
  std::string tail_;
};

void Transferred(agent::EventSink& events, const std::string& path, uint64_t size) {
  events.Emit(events::FileTransferred(v1::FileTransferred::DIRECTION_INTO_SANDBOX, path, size));
}

}  // namespace

v1::Event NetworkDecisionEvent(const sandbox::NetworkDecision& d) {
  v1::NetworkDecision p;
  p.set_connection(d.connection);
  switch (d.verdict) {
    case sandbox::NetworkDecision::Verdict::kAllowed:
      p.set_verdict("allowed");
      break;
    case sandbox::NetworkDecision::Verdict::kDenied:
      p.set_verdict("denied");
      break;
    case sandbox::NetworkDecision::Verdict::kFailed:
      p.set_verdict("failed");
      break;
    case sandbox::NetworkDecision::Verdict::kClosed:
      p.set_verdict("closed");
      break;
  }
  p.set_method(d.method);
  p.set_host(d.host);
  p.set_port(d.port);
  p.set_ip(d.ip);
  p.set_reason(d.reason);
  p.set_detail(d.detail);
  p.set_http_status(d.http_status);
  p.set_bytes_up(d.bytes_up);
  p.set_bytes_down(d.bytes_down);
  return events::NetworkDecision(std::move(p));
}

absl::Status PrepareSandbox(sandbox::Session& session, const SandboxPlan& plan,
                            agent::EventSink& events, const CancelToken& cancel) {
  if (plan.inputs != nullptr) {
    for (const playbooks::InputFile& in : *plan.inputs) {
      SANDGATE_RETURN_IF_ERROR(session.WriteFile(in.name, in.content));
      Transferred(events, in.name, in.content.size());
    }
  }
  if (plan.spec == nullptr) return absl::OkStatus();
  const v1::SandboxSpec& sb = *plan.spec;
  for (int i = 0; i < sb.files_size(); ++i) {
    const v1::InlineFile& f = sb.files(i);
    absl::Status st =
        session.WriteFile(f.path(), f.content(), f.mode() ? static_cast<int>(f.mode()) : 0644);
    if (!st.ok())
      return absl::Status(st.code(), absl::StrCat("sandbox.files[", i, "]: ", st.message()));
    Transferred(events, f.path(), f.content().size());
  }
  for (int i = 0; i < sb.setup_commands_size(); ++i) {
    // Where the agent loop runs upstream, its environment runs them before the agent starts.
    if (sandbox::HostedAgent* hosted = session.hosted_agent()) {
      absl::Status added = hosted->AddSetupCommand(sb.setup_commands(i));
      if (!added.ok()) {
        return absl::Status(added.code(),
                            absl::StrCat("sandbox.setup_commands[", i, "]: ", added.message()));
      }
      continue;
    }
    sandbox::ExecRequest req;
    req.argv = sandbox::ShellCommand(sb.setup_commands(i));
    req.timeout = plan.command_timeout;
    KeepStderr sink(events);
    absl::StatusOr<sandbox::ExecResult> r =
        agent::ExecWithEvents(session, sink, "setup", req, cancel);
    if (!r.ok()) {
      return absl::Status(r.status().code(),
                          absl::StrCat("sandbox.setup_commands[", i, "]: ", r.status().message()));
    }
    if (!r->ok()) {
      std::string err = sink.tail();
      return errors::FailedPrecondition(absl::StrCat("sandbox.setup_commands[", i, "] ",
                                                     agent::DescribeExit(*r, req.timeout),
                                                     err.empty() ? "" : absl::StrCat(": ", err)));
    }
  }
  return absl::OkStatus();
}

std::optional<WarmSandbox> TakeWarm(WarmPool* pool, const sandbox::Provider* provider,
                                    const v1::SandboxSpec& spec, const Config& config) {
  if (pool == nullptr || pool->provider() != provider) return std::nullopt;
  return pool->Take(ToSessionSpec("", spec, config));
}

absl::StatusOr<std::unique_ptr<sandbox::Session>> MakeSandbox(const SandboxPlan& plan,
                                                              const SandboxEnv& env,
                                                              agent::EventSink& events,
                                                              const CancelToken& cancel) {
  const absl::Time t0 = env.clock->Now();
  std::unique_ptr<sandbox::Session> session;
  if (plan.warm != nullptr && plan.warm->session != nullptr) {
    session = std::move(plan.warm->session);
  } else {
    sandbox::SessionSpec spec = ToSessionSpec(plan.session_id, *plan.spec, *env.config);
    spec.on_network_decision = plan.on_network_decision;
    absl::StatusOr<std::unique_ptr<sandbox::Session>> created =
        plan.provider->Create(spec, &cancel);
    if (!created.ok()) {
      return absl::Status(created.status().code(),
                          absl::StrCat("creating the sandbox: ", created.status().message()));
    }
    session = std::move(*created);
  }
  const absl::Duration took = env.clock->Now() - t0;
  if (env.metrics) env.metrics->sandbox_create_seconds.Observe(absl::ToDoubleSeconds(took));
  v1::SessionCreated created_event;
  created_event.set_session_id(plan.session_id);
  created_event.set_provider(plan.provider->name());
  for (const std::string& w : session->Warnings()) created_event.add_unenforced(w);
  *created_event.mutable_create_duration() = ToProto(took);
  created_event.set_from_warm_pool(plan.warm != nullptr);
  events.Emit(events::SessionCreated(std::move(created_event)));
  if (plan.warm != nullptr) {
    // The caller's wait was `took`; what the pool spared it is said here.
    events.Emit(events::Notice(
        v1::Notice::SEVERITY_INFO,
        absl::StrCat("sandbox taken from the warm pool (", plan.warm->shape, "): started ",
                     absl::FormatDuration(env.clock->Now() - plan.warm->made), " before, in ",
                     absl::FormatDuration(plan.warm->make_took))));
  }

  absl::Status prepared = PrepareSandbox(*session, plan, events, cancel);
  if (!prepared.ok()) {
    CloseSandbox(*session, plan, env, events, absl::StrCat("creation failed: ", prepared.message()),
                 "create_failed_close")
        .IgnoreError();  // logged and counted there; the caller is told why
                         // creation failed
    return prepared;
  }
  return session;
}

absl::Status CloseSandbox(sandbox::Session& session, const SandboxPlan& plan, const SandboxEnv& env,
                          agent::EventSink& events, const std::string& reason,
                          const std::string& where) {
  absl::Status closed = session.Close();
  if (plan.flush) plan.flush();
  events.Emit(events::SessionClosed(
      plan.session_id,
      closed.ok() ? reason
                  : absl::StrCat(reason, "; deleting the sandbox failed: ", closed.message())));
  if (!closed.ok()) {
    log::Error("session.close_failed",
               {{"session", plan.session_id}, {"where", where}, {"error", closed.ToString()}});
    if (env.metrics) env.metrics->cleanup_failures.Add({{"where", where}});
  }
  return closed;
}

}  // namespace sandgate::core
