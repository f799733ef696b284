#include "core/run_validate.h"

#include <set>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "common/errors.h"
#include "common/ids.h"
#include "common/status_macros.h"
#include "core/policy.h"
#include "core/sandbox_spec.h"

namespace sandgate::core {
namespace {

template <typename Map>
std::string Known(const Map& map) {
  std::vector<std::string> names;
  for (const auto& [name, _] : map) names.push_back(name);
  return absl::StrJoin(names, ", ");
}

std::string MiB(uint64_t bytes) { return absl::StrCat(bytes / (1 << 20), " MiB"); }

// The session, sandbox and inputs fields against this daemon; `inputs` gets the names (the
// contents move in after).
absl::Status ValidateFields(const RunManagerDeps& deps, const v1::RunAnalysisRequest& req,
                            std::vector<playbooks::InputFile>* inputs) {
  const Config& cfg = *deps.config;
  if (!req.session_id().empty()) {
    if (deps.sessions == nullptr)
      return errors::InvalidArgument("session_id: this daemon keeps no sessions");
    if (req.has_sandbox()) {
      return errors::InvalidArgument(
          "sandbox: a run in an existing session uses that session's sandbox; leave sandbox unset");
    }
  }
  if (req.inputs().empty())
    return errors::InvalidArgument("inputs: at least one input file is required");
  uint64_t total = 0;
  std::set<std::string> names;
  for (int i = 0; i < req.inputs_size(); ++i) {
    const v1::InputFile& f = req.inputs(i);
    if (!store::IsPlainFileName(f.name()) || f.name()[0] == '.') {
      return errors::InvalidArgument(
          absl::StrCat("inputs[", i, "].name: '", f.name(), "' is not a plain file name"));
    }
    if (!names.insert(f.name()).second) {
      return errors::InvalidArgument(
          absl::StrCat("inputs[", i, "].name: duplicate name '", f.name(), "'"));
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

}  // namespace

absl::StatusOr<std::shared_ptr<ActiveRun>> ValidateRun(const RunManagerDeps& deps,
                                                       const Caller& caller,
                                                       v1::RunAnalysisRequest request) {
  auto ar = std::make_shared<ActiveRun>();
  if (request.playbook().empty()) request.set_playbook("financial-analyst");
  if (request.agent().empty()) request.set_agent("reference");
  if (!request.session_id().empty() && deps.sessions != nullptr) {
    // A run in a kept session uses that session's sandbox, so its provider.
    SANDGATE_ASSIGN_OR_RETURN(v1::Session session,
                              deps.sessions->Get(caller, request.session_id()));
    if (session.status() != v1::SESSION_STATUS_ACTIVE) {
      return errors::FailedPrecondition(absl::StrCat("session_id: session ", session.id(),
                                                     " has ended: ", session.status_reason()));
    }
    if (request.provider().empty()) request.set_provider(session.provider());
    if (request.provider() != session.provider()) {
      return errors::InvalidArgument(
          absl::StrCat("provider: '", request.provider(), "' is not session ", session.id(),
                       "'s provider '", session.provider(), "'; leave it empty"));
    }
  }
  if (request.provider().empty()) request.set_provider("local");
  if (request.session_id().empty()) {  // a kept session has its level already
    SANDGATE_ASSIGN_OR_RETURN(
        std::string isolation,
        EffectiveIsolation(request.sandbox(), request.provider(), caller, *deps.config));
    request.mutable_sandbox()->set_isolation(std::move(isolation));
    SANDGATE_RETURN_IF_ERROR(
        ResolveImage(request.mutable_sandbox(), request.provider(), deps.images));
  }
  absl::StatusOr<const playbooks::Playbook*> playbook = playbooks::FindPlaybook(request.playbook());
  if (!playbook.ok())
    return errors::InvalidArgument(absl::StrCat("playbook: ", playbook.status().message()));
  ar->playbook = *playbook;
  auto provider = deps.providers.find(request.provider());
  if (provider == deps.providers.end()) {
    return errors::InvalidArgument(absl::StrCat(
        "provider: '", request.provider(),
        "' is not configured on this daemon (configured: ", Known(deps.providers), ")"));
  }
  ar->provider = provider->second;
  if (!request.session_id().empty()) {
    SANDGATE_RETURN_IF_ERROR(ar->provider->CheckRunIn(request.session_id()));
  }
  auto agent = deps.agents.find(request.agent());
  if (agent == deps.agents.end()) {
    return errors::InvalidArgument(
        absl::StrCat("agent: '", request.agent(),
                     "' is not available on this daemon (available: ", Known(deps.agents), ")"));
  }
  ar->agent = agent->second;
  if (!ar->provider->runs_commands() && !ar->agent->works_without_exec()) {
    return errors::InvalidArgument(absl::StrCat("agent: '", request.agent(),
                                                "' runs its commands in the sandbox, and the '",
                                                request.provider(),
                                                "' provider runs commands only through the openai "
                                                "agent; use agent 'openai', or provider 'local'"));
  }
  SANDGATE_RETURN_IF_ERROR(CheckProviderRunsCommands(*ar->provider, request.sandbox()));
  if (request.session_id().empty()) {  // a kept session's sandbox exists already
    SANDGATE_RETURN_IF_ERROR(
        ar->provider->CheckSpec(ToSessionSpec("check", request.sandbox(), *deps.config)));
  }
  if (request.agent() == "reference" && !request.model().empty()) {
    return errors::InvalidArgument("model: the reference agent uses no model");
  }
  SANDGATE_RETURN_IF_ERROR(ValidateFields(deps, request, &ar->inputs));
  // Moved, never copied: an input may be max_input_bytes, and the run holds the only copy.
  for (int i = 0; i < request.inputs_size(); ++i) {
    ar->inputs[i].content = std::move(*request.mutable_inputs(i)->mutable_content());
  }
  absl::Status inputs_ok = ar->playbook->ValidateInputs(ar->inputs);
  if (!inputs_ok.ok())
    return errors::InvalidArgument(absl::StrCat("inputs: ", inputs_ok.message()));
  PolicyRequest policy{
      request.provider(), request.agent(), request.model(), &request.sandbox(),
      request.has_run_timeout() ? FromProto(request.run_timeout()) : deps.config->run_timeout};
  SANDGATE_RETURN_IF_ERROR(CheckPolicy(caller, policy, *deps.config));

  const Config& cfg = *deps.config;
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
  *run.mutable_created_at() = ToProto(deps.clock->Now());
  *run.mutable_labels() = request.labels();
  run.set_idempotency_key(request.idempotency_key());
  run.set_replica(cfg.replica.id);
  for (const auto& in : ar->inputs) run.add_input_names(in.name);
  const v1::SandboxSpec& sb = request.sandbox();
  ar->settings.env.insert(sb.env().begin(), sb.env().end());
  ar->settings.setup_commands.assign(sb.setup_commands().begin(), sb.setup_commands().end());
  ar->settings.network = sb.network().mode() == v1::NetworkPolicy::MODE_RESTRICTED ? "restricted"
                         : sb.network().mode() == v1::NetworkPolicy::MODE_ENABLED  ? "enabled"
                                                                                   : "disabled";
  ar->settings.allowed_domains.assign(sb.network().allowed_domains().begin(),
                                      sb.network().allowed_domains().end());
  ar->settings.isolation = sb.isolation();  // the effective level of a new local session
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

}  // namespace sandgate::core
