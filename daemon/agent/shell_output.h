// Helpers the model-driven agents share for shell tool results: UTF-8 clean-up (tool output
// goes into JSON, which must be valid UTF-8) and head-and-tail truncation to the
// max_output_length a shell call asks for.
//
//   std::string out = Utf8Clean(raw_stdout), err = Utf8Clean(raw_stderr);
//   CapCombined(&out, &err, 4000);  // at most 4000 characters together, head and tail kept
//
// Thread safe (pure functions).
#ifndef SANDGATE_AGENT_SHELL_OUTPUT_H_
#define SANDGATE_AGENT_SHELL_OUTPUT_H_

#include <cstddef>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/time/time.h"
#include "agent/agent.h"
#include "nlohmann/json.hpp"

namespace sandgate::agent {

// `text` with every byte that is not part of a valid UTF-8 sequence replaced by U+FFFD.
std::string Utf8Clean(absl::string_view text);

// Number of UTF-8 characters (code points) of valid UTF-8 `text`.
size_t Utf8Length(absl::string_view text);

// At most `budget` characters of valid UTF-8 `text`: its head and its tail. When the budget
// allows (>= 64 characters), an "[… N characters omitted …]" line marks the cut and counts
// against the budget.
std::string HeadTail(absl::string_view text, size_t budget);

// Caps stdout and stderr (valid UTF-8) to `max_chars` characters together, keeping the head
// and tail of each; stderr gets at most half the budget unless stdout needs less. Returns
// true when anything was cut.
bool CapCombined(std::string* out, std::string* err, size_t max_chars);

// The output cap when a shell call names none: enough for any sane listing, small enough
// for a model's context.
inline constexpr size_t kDefaultMaxOutputChars = 20000;

// One shell call the daemon runs for a model: commands in order, each `/bin/sh -c <command>`
// in the session's workspace, with the call's timeout (capped by the task's command
// timeout) and output cap.
struct ShellCall {
  std::vector<std::string> commands;
  std::optional<int64_t> timeout_ms;         // nullopt or <= 0: the task's command timeout
  std::optional<int64_t> max_output_length;  // characters of stdout+stderr per command
};

// Runs every command of `call` with ExecWithEvents (step "agent") and returns the results in
// the Responses API's shell_call_output shape:
//   [{"stdout": str, "stderr": str, "outcome": {"type":"exit","exit_code":N} | {"type":"timeout"}}]
// A command ended by a signal reports exit_code 128+signal and says so on stderr. Errors:
// CANCELLED when `cancel` fired; the session's error when it could not run a command.
absl::StatusOr<nlohmann::json> RunShellCall(sandbox::Session& session, EventSink& events,
                                            const ShellCall& call, absl::Duration command_timeout,
                                            const CancelToken& cancel);

}  // namespace sandgate::agent

#endif  // SANDGATE_AGENT_SHELL_OUTPUT_H_
