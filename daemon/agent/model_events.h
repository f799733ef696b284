// Events the model-driven agents (openai, chat) emit, built one way for both: the model's
// text, token usage per model call and its total, and notices.
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

#include "agent/agent.h"

namespace sandgate::agent {

// The model and turn budget of a run: AgentTask.model, else the agent's default model;
// AgentTask.max_turns, else the agent's default, else 30. INVALID_ARGUMENT when there is no
// model at all.
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

}  // namespace sandgate::agent

#endif  // SANDGATE_AGENT_MODEL_EVENTS_H_
