// ReferencePlanTurns: a playbook's reference plan (the files and steps its reference agent
// runs) as a scenario for the fake OpenAI server, so that the fake's scripted model (Responses,
// hosted shell) or scripted agent (Agents API) does what the reference agent does, in its own
// sandbox. Nothing is re-implemented: the playbook's own programs run. Header-only.
//
//   playbooks::ReferencePlan plan = playbook.Reference(inputs, "/workspace", settings);
//   // The Agents API publishes only /workspace/outputs: move the artifacts there.
//   fake.Scenario(testing::ReferencePlanTurns(plan, playbook.ExpectedArtifacts()));
//
// Files travel base64-encoded in pieces (a command is one argv string, at most 128 KiB on
// Linux), so any bytes survive; each step is one command, its argv shell-quoted.
#ifndef SANDGATE_TESTS_FAKES_OPENAI_REFERENCE_PLAN_TURNS_H_
#define SANDGATE_TESTS_FAKES_OPENAI_REFERENCE_PLAN_TURNS_H_

#include <algorithm>
#include <string>
#include <vector>

#include "absl/strings/escaping.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_replace.h"
#include "absl/time/time.h"
#include "nlohmann/json.hpp"
#include "playbooks/playbook.h"

namespace sandgate::testing {

inline std::string ShellQuote(const std::string& s) {
  return absl::StrCat("'", absl::StrReplaceAll(s, {{"'", "'\\''"}}), "'");
}

// The plan's files, then its steps, then (when `to_outputs` is not empty) those files moved into
// outputs/; one shell turn (its timeout the longest step's), then `message`.
inline nlohmann::json ReferencePlanTurns(const playbooks::ReferencePlan& plan,
                                         const std::vector<std::string>& to_outputs = {},
                                         const std::string& message = "Done.") {
  constexpr size_t kPiece = 60000;  // base64 characters per command
  std::vector<std::string> commands;
  for (const playbooks::PlacedFile& f : plan.files) {
    const std::string path = ShellQuote(f.path);
    const std::string staged = ShellQuote(f.path + ".b64");
    const std::string encoded = absl::Base64Escape(f.content);
    commands.push_back(absl::StrCat("mkdir -p \"$(dirname ", path, ")\" && : > ", staged));
    for (size_t at = 0; at < encoded.size(); at += kPiece) {
      commands.push_back(
          absl::StrCat("printf '%s' '", encoded.substr(at, kPiece), "' >> ", staged));
    }
    char mode[8];
    snprintf(mode, sizeof(mode), "%o", f.mode);
    commands.push_back(absl::StrCat("base64 -d ", staged, " > ", path, " && rm ", staged,
                                    " && chmod ", mode, " ", path));
  }
  absl::Duration longest = absl::Seconds(10);
  for (const playbooks::Step& step : plan.steps) {
    std::string line;
    for (const std::string& arg : step.argv)
      absl::StrAppend(&line, line.empty() ? "" : " ", ShellQuote(arg));
    commands.push_back(line);
    longest = std::max(longest, step.timeout);
  }
  if (!to_outputs.empty()) {
    std::string move = "mkdir -p outputs && mv -f";
    for (const std::string& name : to_outputs) absl::StrAppend(&move, " ", ShellQuote(name));
    commands.push_back(absl::StrCat(move, " outputs/"));
  }
  return nlohmann::json::array(
      {{{"shell", commands}, {"timeout_ms", absl::ToInt64Milliseconds(longest)}},
       {{"message", message}}});
}

}  // namespace sandgate::testing

#endif  // SANDGATE_TESTS_FAKES_OPENAI_REFERENCE_PLAN_TURNS_H_
