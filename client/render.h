// How the CLI shows events and runs to a person (and as JSON lines to a program).
#ifndef SANDGATE_CLIENT_RENDER_H_
#define SANDGATE_CLIENT_RENDER_H_

#include <cstdio>
#include <map>
#include <string>

#include "sandgate/v1/labels.h"
#include "sandgate/v1/sandgate.pb.h"

namespace sandgate::cli {

std::string ToJson(const google::protobuf::Message& m);
std::string StatusName(v1::RunStatus s);
std::string HumanBytes(uint64_t n);

// Renders a run's events as live progress: steps, each command with the tail of its output,
// the verification checks. Keeps per-command output to print its tail when it finishes.
class ProgressPrinter {
 public:
  explicit ProgressPrinter(FILE* out) : out_(out) {}
  void Print(const v1::Event& e);

 private:
  FILE* const out_;
  std::map<uint32_t, std::string> output_;  // command id -> output so far (tail-capped)
};

void PrintRun(FILE* out, const v1::Run& run);

}  // namespace sandgate::cli

#endif  // SANDGATE_CLIENT_RENDER_H_
