#include "agent/model_events.h"

#include <utility>

#include "absl/strings/str_cat.h"
#include "common/events.h"

namespace sandgate::agent {

absl::StatusOr<ModelChoice> ChooseModel(const AgentTask& task, const std::string& default_model,
                                        uint32_t default_max_turns, const std::string& agent) {
  ModelChoice c;
  c.model = task.model.empty() ? default_model : task.model;
  if (c.model.empty()) {
    return absl::InvalidArgumentError(
        absl::StrCat("model: none given and the ", agent, " agent has no default model"));
  }
  c.max_turns = task.max_turns != 0 ? task.max_turns : default_max_turns;
  if (c.max_turns == 0) c.max_turns = 30;
  return c;
}

void EmitNotice(EventSink& events, v1::Notice::Severity severity, std::string message) {
  events.Emit(events::Notice(severity, std::move(message)));
}

void EmitAssistantMessage(EventSink& events, std::string text) {
  if (text.empty()) return;
  events.Emit(events::AgentMessage("assistant", std::move(text)));
}

void TokenTally::Add(EventSink& events, uint64_t input, uint64_t output, uint64_t total) {
  ++calls_;
  input_ += input;
  output_ += output;
  total_ += total;
  events.Emit(events::TokenUsage(input, output, total));
}

void TokenTally::Finish(EventSink& events, const std::string& model,
                        const std::string& calls) const {
  if (calls_ == 0) return;
  EmitNotice(events, v1::Notice::SEVERITY_INFO,
             absl::StrCat("model ", model, ": ", calls_, " ", calls, ", tokens in total: ", input_,
                          " input, ", output_, " output, ", total_, " total"));
}

}  // namespace sandgate::agent
