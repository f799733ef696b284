// OpenAiAgent: a model drives the work through the Responses API's `shell` tool.
//
// The model's instructions are the playbook's Instructions (with the session's working
// directory); the first request forces a tool call (tool_choice "required"), later ones let
// the model choose ("auto"). Each request is streamed and is one turn; the run fails with
// "the model did not finish within N turns" after AgentTask.max_turns (0: the default).
//
// Where commands run depends on the session:
//  - a session with a hosted agent (sandbox::Session::hosted_agent(), provider
//    `openai-agents`): the Agents API runs the whole loop; see agent/agents_run.h.
//  - a session with a hosted shell (sandbox::Session::hosted_shell(), provider `openai`): the
//    shell tool is
//    {"type":"container_reference","container_id":…}; OpenAI runs the commands inside the
//    response and the agent relays them as they stream: command.started once a shell call's
//    commands are known (the next command when the previous one finishes), command.output
//    from shell_call_output_content deltas, command.finished with the exit code or timeout.
//  - any other session (provider `local`): the tool is {"type":"local"}; the response ends at
//    a shell_call, the daemon runs its commands in the session (ExecWithEvents), truncates
//    each result to the call's max_output_length (head and tail kept; 20000 characters when
//    none is given) and posts a shell_call_output with previous_response_id.
//
// Events: agent_message (role "assistant") for each message of the model; token_usage for
// each response (their sum is the run's total, which also ends the run as an INFO notice);
// notice WARNING when a turn is retried.
//
// Failures (the run fails with the message): a response that is `failed` ("the model's
// response failed: <code>: <message>") or `incomplete` ("the model's response was cut off:
// <reason>"); an expired container (FAILED_PRECONDITION "container cntr_… expired"); an API
// error after the HTTP client's retries ("the OpenAI Responses API: …"); a function call (no
// function tools are offered) is answered with an error for the model.
//
// A stream that breaks mid-way: on a hosted container the commands run upstream, inside the
// response, so the turn is never sent again (they would run twice). Each hosted response is
// created with "background": true and "store": true; the agent remembers its id and the last
// sequence_number that arrived, and on a broken stream streams the same response again from
// there (GET /responses/{id}?stream=true&starting_after=N), up to 3 times, each with a notice
// WARNING "… resuming response resp_… after event N …". Events a resumed stream repeats are
// skipped, so every command and every response's tokens are relayed once. When it cannot be
// resumed, the response is cancelled upstream and the run fails with "the model's response
// stream broke after its hosted commands may have run, and could not be resumed: …; the turn
// is not sent again". On a local session the daemon runs the commands after the response has
// ended, so a broken stream ran nothing: the turn is sent again, up to twice (a notice says
// so), then fails.
// Cancellation aborts the response stream at once (and cancels a hosted background response
// upstream) and returns CANCELLED.
//
// Thread safe: one agent serves many runs at once; each run's state is local to Run.
//
//   OpenAiAgent agent(&openai_client, {.default_model = "gpt-5.5", .max_turns = 30});
//   absl::Status st = agent.Run(task, session, events, cancel);
#ifndef SANDGATE_AGENT_OPENAI_AGENT_H_
#define SANDGATE_AGENT_OPENAI_AGENT_H_

#include <cstdint>
#include <string>

#include "agent/agent.h"
#include "agent/model_events.h"
#include "upstream/openai_client.h"

namespace sandgate::agent {

class OpenAiAgent : public Agent {
 public:
  // `client` is not owned and outlives the agent.
  OpenAiAgent(upstream::OpenAiClient* client, ModelAgentOptions options);

  std::string name() const override { return "openai"; }
  bool works_without_exec() const override { return true; }  // hosted shell calls run upstream
  absl::Status Run(const AgentTask& task, sandbox::Session& session, EventSink& events,
                   const CancelToken& cancel) override;

 private:
  upstream::OpenAiClient* const client_;
  const ModelAgentOptions options_;
};

}  // namespace sandgate::agent

#endif  // SANDGATE_AGENT_OPENAI_AGENT_H_
