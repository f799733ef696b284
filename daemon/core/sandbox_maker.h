// MakeSandbox: the one way a sandbox is made, for a run's own session and a
// kept session alike, so what the two get cannot drift apart again.
//
// In order: the provider journals and creates the sandbox
// (sandbox::Provider::Create), with every network decision of its whole life
// going to `on_network_decision`; `session.created` says what this host does
// not enforce; the plan's inputs and then sandbox.files are placed
// (`file.transferred` each); sandbox.setup_commands run with their output as
// events. When a step fails after the sandbox exists, it is closed again
// through CloseSandbox.
//
// CloseSandbox is the one way it ends: Close(), then the plan's `flush` (so
// every decision queued before the close is in the log before it), then
// `session.closed`. A Close that fails is logged and counted
// (sandgate_cleanup_failures_total{where}), never dropped.
//
//   SandboxPlan plan{session_id, provider, &request.sandbox(), command_timeout,
//   on_decision}; SANDGATE_ASSIGN_OR_RETURN(std::unique_ptr<sandbox::Session>
//   s, MakeSandbox(plan, env, events, cancel));
//   ...
//   CloseSandbox(*s, plan, env, events, "ephemeral session ends with its run",
//   "session_close");
//
// Thread safe (no state of its own); blocks for as long as the provider and the
// commands do.
#ifndef SANDGATE_CORE_SANDBOX_MAKER_H_
#define SANDGATE_CORE_SANDBOX_MAKER_H_

#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "agent/agent.h"
#include "common/cancel.h"
#include "common/clock.h"
#include "core/config.h"
#include "core/metrics.h"
#include "core/warm_pool.h"
#include "playbooks/playbook.h"
#include "sandbox/sandbox.h"
#include "sandgate/v1/sandgate.pb.h"

namespace sandgate::core {

// What a sandbox is made from. Pointers are not owned and outlive the calls
// that take it.
struct SandboxPlan {
  std::string session_id;
  sandbox::Provider* provider = nullptr;
  const v1::SandboxSpec* spec = nullptr;  // validated (core/request_validation.h)
  absl::Duration command_timeout;         // for each setup command
  // Every network decision of the sandbox, from the provider's threads: must
  // not block.
  std::function<void(const sandbox::NetworkDecision&)> on_network_decision;
  // Placed before sandbox.files (a run's inputs); may be null.
  const std::vector<playbooks::InputFile>* inputs = nullptr;
  // Called after the sandbox is closed and before `session.closed` is emitted;
  // may be empty.
  std::function<void()> flush;
  // A sandbox taken from the warm pool (core/warm_pool.h), made for this plan's
  // shape with this plan's session id and decision callback: MakeSandbox uses it
  // instead of creating one, and says so in the log (a notice, and `from_warm_pool` in
  // session.created). May be null; not owned.
  WarmSandbox* warm = nullptr;
};

// A ready sandbox from `pool` (may be null) for a request of `spec` to `provider`, or
// nullopt: no pool, a pool of another provider, or none of that shape ready now. Never
// blocks on a create. The taker owns the budget unit the sandbox holds (core/warm_pool.h).
std::optional<WarmSandbox> TakeWarm(WarmPool* pool, const sandbox::Provider* provider,
                                    const v1::SandboxSpec& spec, const Config& config);

// What the steps use; not owned. `metrics` may be null.
struct SandboxEnv {
  const Config* config = nullptr;
  Clock* clock = nullptr;
  Metrics* metrics = nullptr;
};

// Errors name the step: "creating the sandbox: …", "sandbox.files[0]: …",
// "sandbox.setup_commands[1] exited with status 4: <its stderr>".
absl::StatusOr<std::unique_ptr<sandbox::Session>> MakeSandbox(const SandboxPlan& plan,
                                                              const SandboxEnv& env,
                                                              agent::EventSink& events,
                                                              const CancelToken& cancel);

// Places `inputs` and `spec`'s files, then runs its setup commands, in an
// existing sandbox.
absl::Status PrepareSandbox(sandbox::Session& session, const SandboxPlan& plan,
                            agent::EventSink& events, const CancelToken& cancel);

// Closes `session` (see above; the caller destroys it when nothing uses it any
// more); `where` labels a failed close in the metric and the log. Returns the
// Close status, already logged and counted.
absl::Status CloseSandbox(sandbox::Session& session, const SandboxPlan& plan, const SandboxEnv& env,
                          agent::EventSink& events, const std::string& reason,
                          const std::string& where);

// The event a network decision becomes: `network.decision`.
v1::Event NetworkDecisionEvent(const sandbox::NetworkDecision& decision);

}  // namespace sandgate::core

#endif  // SANDGATE_CORE_SANDBOX_MAKER_H_
