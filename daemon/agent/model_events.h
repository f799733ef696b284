// Events the model-driven agents (openai, chat) emit, built one way for both: the model's
// text, token usage per model call and its total, and notices; and the run object both build on.
//
//   TokenTally tally;
//   tally.Add(events, 1200, 80, 1280);       // a token_usage event for this call
//   tally.Finish(events, "gpt-5.5", "responses");  // an INFO notice with the total
//
// Not thread safe (one per run).
#ifndef SANDGATE_AGENT_MODEL_EVENTS_H_
#define SANDGATE_AGENT_MODEL_EVENTS_H_

#include <cstdint>
#include <string>
#include <utility>

#include "absl/time/time.h"
#include "agent/agent.h"
#include "upstream/openai_client.h"

namespace sandgate::agent {

// The model and turn budget of a run: AgentTask.model, else the agent's default model;
// AgentTask.max_turns, else the agent's default, else 30. INVALID_ARGUMENT when there is no
// model at all.
struct ModelAgentOptions {
  std::string default_model;  // used when AgentTask.model is empty
  uint32_t max_turns = 30;    // used when AgentTask.max_turns is 0
  // The openai agent's wait for each attempt of the request that stops a hosted response
  // after its run was cancelled (or its stream lost): the run ends after it either way.
  absl::Duration stop_timeout = absl::Seconds(10);
};

struct ModelChoice {
  std::string model;
  uint32_t max_turns = 30;
};
absl::StatusOr<ModelChoice> ChooseModel(const AgentTask& task, const std::string& default_model,
                                        uint32_t default_max_turns, const std::string& agent);

void EmitNotice(EventSink& events, v1::Notice::Severity severity, std::string message);
// agent_message with role "assistant"; nothing for empty text.
void EmitAssistantMessage(EventSink& events, std::string text);

// Sums the token usage of a run's model calls. Each call is its own token_usage event, so the
// events add up to the total; the total itself is said once, as a notice, not as another
// token_usage event that a consumer summing them would count twice.
class TokenTally {
 public:
  void Add(EventSink& events, uint64_t input, uint64_t output, uint64_t total);
  // The INFO notice "model M: N <calls>, tokens in total: …"; nothing when no call was made.
  void Finish(EventSink& events, const std::string& model, const std::string& calls) const;

 private:
  int calls_ = 0;
  uint64_t input_ = 0, output_ = 0, total_ = 0;
};

// What one model-driven run works with: the openai and chat agents' run objects derive from
// it (the chat agent starts one with RunModelAgent; the openai agent also passes its
// stop_timeout).
class ModelRun {
 public:
  ModelRun(upstream::OpenAiClient* client, const AgentTask& task, sandbox::Session& session,
           EventSink& events, const CancelToken& cancel, ModelChoice choice)
      : client_(client),
        task_(task),
        session_(session),
        events_(events),
        cancel_(cancel),
        model_(std::move(choice.model)),
        max_turns_(choice.max_turns) {}

 protected:
  upstream::OpenAiClient* const client_;
  const AgentTask& task_;
  sandbox::Session& session_;
  EventSink& events_;
  const CancelToken& cancel_;
  const std::string model_;
  const uint32_t max_turns_;
  TokenTally tally_;
};

// Chooses the model (ChooseModel), then runs one `Run` object (a ModelRun with the same
// constructor and a Run() method) to its end.
template <typename Run>
absl::Status RunModelAgent(upstream::OpenAiClient* client, const std::string& default_model,
                           uint32_t default_max_turns, const std::string& agent,
                           const AgentTask& task, sandbox::Session& session, EventSink& events,
                           const CancelToken& cancel) {
  absl::StatusOr<ModelChoice> choice = ChooseModel(task, default_model, default_max_turns, agent);
  if (!choice.ok()) return choice.status();
  Run run(client, task, session, events, cancel, std::move(*choice));
  return run.Run();
}

}  // namespace sandgate::agent

#endif  // SANDGATE_AGENT_MODEL_EVENTS_H_
