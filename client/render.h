// How the CLI shows events and runs to a person (and as JSON lines to a program).
//
// Every text that came from the daemon or a sandbox is shown through TerminalSafe
// (client/terminal_text.h); JSON lines through TerminalSafeJson.
#ifndef SANDGATE_CLIENT_RENDER_H_
#define SANDGATE_CLIENT_RENDER_H_

#include <cstdio>
#include <deque>
#include <map>
#include <string>

#include "sandgate/v1/labels.h"
#include "sandgate/v1/sandgate.pb.h"

namespace sandgate::cli {

// One line of JSON, safe for a terminal.
std::string ToJson(const google::protobuf::Message& m);
std::string StatusName(v1::RunStatus s);
std::string HumanBytes(uint64_t n);

// Renders a run's events as live progress: steps, each command with its output line by line
// as it arrives (the first kLiveLines of a command live; of the rest, a count and the last
// kTailLines when it finishes, where errors usually are), the verification checks.
// Not thread safe.
class ProgressPrinter {
 public:
  static constexpr size_t kLiveLines = 20;
  static constexpr size_t kTailLines = 8;

  explicit ProgressPrinter(FILE* out) : out_(out) {}
  // The lines `e` adds to the progress, each ending in '\n'; empty for an event that shows
  // nothing (a heartbeat, a successful step's end, output with no complete line yet).
  std::string Render(const v1::Event& e);
  // Render, written to `out` and flushed.
  void Print(const v1::Event& e);

 private:
  struct Output {
    std::string partial;           // the line being received, not yet ended by '\n'
    size_t shown = 0;              // lines shown live
    size_t held = 0;               // lines past kLiveLines
    std::deque<std::string> tail;  // the last kTailLines of those
  };
  void AddLine(Output& o, std::string line, std::string* out);

  FILE* const out_;
  std::map<uint32_t, Output> output_;  // by command id, until the command finishes
};

// The run record, and its summary (client/summary.h) when it has one.
void PrintRun(FILE* out, const v1::Run& run);

// `argv` as a POSIX shell would take it back: each word that a shell would split or expand
// in single quotes ("sh -c 'sleep 60'"), so a setup command shows as one word.
std::string ShellWords(const google::protobuf::RepeatedPtrField<std::string>& argv);

// `session list`: a header and one line per session, or a line saying there is none (`all`:
// closed and expired ones were asked for too).
std::string RenderSessionList(const v1::ListSessionsResponse& list, bool all);

}  // namespace sandgate::cli

#endif  // SANDGATE_CLIENT_RENDER_H_
