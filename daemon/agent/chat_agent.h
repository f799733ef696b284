// ChatAgent: a model behind any OpenAI-compatible Chat Completions endpoint (OpenAI, vLLM,
// llama.cpp, Ollama) drives the work through one function tool, `shell`, which the daemon
// runs in the session (meant for the `local` provider; a hosted session refuses Exec, and the
// model is told so in the tool result).
//
// The tool (kShellToolJson below):
//   {"type":"function","function":{"name":"shell",
//     "description":"Run shell commands in the task's working directory …",
//     "parameters":{"type":"object",
//       "properties":{"commands":{"type":"array","items":{"type":"string"}},
//                     "timeout_ms":{"type":"integer"},
//                     "max_output_length":{"type":"integer"}},
//       "required":["commands"]}}}
// Each command runs as `/bin/sh -c <command>` (ExecWithEvents, step "agent"), in order, with
// timeout_ms capped by the task's command timeout; the tool message the model gets back is a
// JSON string {"results":[{"command","stdout","stderr","exit_code"} | {…,"timed_out":true}]},
// stdout+stderr of each command cut to max_output_length characters (20000 when absent),
// head and tail kept.
//
// Loop: messages [system: the playbook's Instructions, user: "do the task"], streamed with
// tool_choice "auto" (local servers do not all accept "required") and usage requested; the
// model's text becomes agent_message events and each completion's usage a token_usage event
// (their sum, the total, ends the run as an INFO notice). A completion without tool calls
// ends the run (OK). Failures: malformed tool arguments (not JSON, no commands, wrong types)
// or an unknown tool name are answered to the model as a tool message starting with "error:"
// (and a WARNING notice), never a crash; finish_reason "length" → "the model's answer was cut
// off at its token limit"; "content_filter" → said so; more than max_turns completions →
// "the model did not finish within N turns"; an API error after the HTTP client's retries →
// "the chat completions API: …"; a stream that breaks mid-way is retried as a whole turn up to
// twice (a notice says so). Cancellation aborts the stream and returns CANCELLED.
//
// Thread safe: one agent serves many runs at once.
//
//   ChatAgent agent(&vllm_client, {.default_model = "qwen3-coder", .max_turns = 30});
#ifndef SANDGATE_AGENT_CHAT_AGENT_H_
#define SANDGATE_AGENT_CHAT_AGENT_H_

#include <cstdint>
#include <string>

#include "agent/agent.h"
#include "agent/model_events.h"
#include "upstream/openai_client.h"

namespace sandgate::agent {

// The `shell` function tool offered to the model, as JSON text.
extern const char kShellToolJson[];

class ChatAgent : public Agent {
 public:
  // `client` is not owned and outlives the agent.
  ChatAgent(upstream::OpenAiClient* client, ModelAgentOptions options);

  std::string name() const override { return "chat"; }
  absl::Status Run(const AgentTask& task, sandbox::Session& session, EventSink& events,
                   const CancelToken& cancel) override;

 private:
  upstream::OpenAiClient* const client_;
  const ModelAgentOptions options_;
};

}  // namespace sandgate::agent

#endif  // SANDGATE_AGENT_CHAT_AGENT_H_
