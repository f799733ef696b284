#include "client/render.h"

#include <signal.h>

#include <algorithm>
#include <map>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/ascii.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_replace.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"
#include "client/summary.h"
#include "client/terminal_text.h"
#include "google/protobuf/util/json_util.h"
#include "google/protobuf/util/time_util.h"

namespace sandgate::cli {
namespace {

using google::protobuf::util::TimeUtil;

// Longer output lines are cut when shown (the whole output is in events.jsonl).
constexpr size_t kMaxLineBytes = 400;

std::string Safe(absl::string_view text) { return TerminalSafe(text); }

std::string Seconds(const google::protobuf::Duration& d) {
  return absl::StrFormat("%.2fs", TimeUtil::DurationToNanoseconds(d) / 1e9);
}

}  // namespace

std::string ToJson(const google::protobuf::Message& m) {
  std::string out;
  google::protobuf::util::JsonPrintOptions opts;
  opts.preserve_proto_field_names = true;
  (void)google::protobuf::util::MessageToJsonString(m, &out, opts);
  return TerminalSafeJson(out);
}

std::string StatusName(v1::RunStatus s) { return v1::RunStatusLabel(s); }

std::string HumanBytes(uint64_t n) {
  if (n < 1024) return absl::StrCat(n, " B");
  if (n < (1 << 20)) return absl::StrFormat("%.1f KiB", n / 1024.0);
  return absl::StrFormat("%.1f MiB", n / 1048576.0);
}

void ProgressPrinter::AddLine(Output& o, std::string line, std::string* out) {
  if (!line.empty() && line.back() == '\r') line.pop_back();
  if (line.size() > kMaxLineBytes) line = absl::StrCat(line.substr(0, kMaxLineBytes), " …");
  line = absl::StrCat("    │ ", TerminalSafe(line), "\n");
  if (o.shown < kLiveLines) {
    ++o.shown;
    *out += line;
    return;
  }
  ++o.held;
  o.tail.push_back(std::move(line));
  if (o.tail.size() > kTailLines) o.tail.pop_front();
}

std::string ProgressPrinter::Render(const v1::Event& e) {
  std::string out;
  switch (e.payload_case()) {
    case v1::Event::kRunQueued:
      absl::StrAppendFormat(&out, "queued (position %d)\n", e.run_queued().position());
      break;
    case v1::Event::kRunStarted: {
      const auto& s = e.run_started();
      absl::StrAppendFormat(&out, "run started: playbook %s, agent %s, provider %s\n",
                            Safe(s.playbook()), Safe(s.agent()), Safe(s.provider()));
      break;
    }
    case v1::Event::kSessionCreated: {
      const auto& s = e.session_created();
      absl::StrAppendFormat(&out, "sandbox %s ready (%s, %s)\n", Safe(s.session_id()),
                            Safe(s.provider()), Seconds(s.create_duration()));
      for (const auto& u : s.unenforced())
        absl::StrAppendFormat(&out, "  ! not enforced: %s\n", Safe(u));
      break;
    }
    case v1::Event::kSessionClosed:
      absl::StrAppendFormat(&out, "sandbox %s closed\n", Safe(e.session_closed().session_id()));
      break;
    case v1::Event::kSessionExpiring:
      absl::StrAppendFormat(&out, "  ! session %s %s at %s; save what matters before then\n",
                            Safe(e.session_expiring().session_id()),
                            Safe(e.session_expiring().reason()),
                            TimeUtil::ToString(e.session_expiring().expires_at()));
      break;
    case v1::Event::kEventsDropped: {
      std::vector<std::string> counts;
      for (const auto& [type, n] : std::map<std::string, uint64_t>(
               e.events_dropped().counts().begin(), e.events_dropped().counts().end())) {
        counts.push_back(absl::StrCat(n, " ", Safe(type)));
      }
      absl::StrAppendFormat(&out, "  ! not stored: %s (%s)\n", absl::StrJoin(counts, ", "),
                            Safe(e.events_dropped().reason()));
      break;
    }
    case v1::Event::kStepStarted:
      absl::StrAppendFormat(&out, "step %s\n", Safe(e.step_started().name()));
      break;
    case v1::Event::kStepFinished:
      if (!e.step_finished().ok()) {
        absl::StrAppendFormat(&out, "step %s failed: %s\n", Safe(e.step_finished().name()),
                              Safe(e.step_finished().detail()));
      }
      break;
    case v1::Event::kCommandStarted: {
      // A model's command can be a whole program in a heredoc: show its first line.
      std::string line = ShellWords(e.command_started().argv());
      size_t nl = line.find('\n');
      bool cut = nl != std::string::npos || line.size() > 160;
      line = line.substr(0, std::min<size_t>(nl, 160));
      absl::StrAppendFormat(&out, "  $ %s%s\n", Safe(line), cut ? " …" : "");
      break;
    }
    case v1::Event::kCommandOutput: {
      // Shown line by line as it arrives: a long setup is not silent until it ends.
      Output& o = output_[e.command_output().command_id()];
      o.partial += e.command_output().data();
      size_t start = 0;
      for (size_t nl; (nl = o.partial.find('\n', start)) != std::string::npos; start = nl + 1) {
        AddLine(o, o.partial.substr(start, nl - start), &out);
      }
      o.partial.erase(0, start);
      // A line that never ends (a progress bar) is shown in pieces rather than held.
      if (o.partial.size() > kMaxLineBytes) AddLine(o, std::exchange(o.partial, ""), &out);
      break;
    }
    case v1::Event::kCommandFinished: {
      const auto& f = e.command_finished();
      Output& o = output_[f.command_id()];
      if (!absl::StripAsciiWhitespace(o.partial).empty()) AddLine(o, o.partial, &out);
      if (o.held > o.tail.size())
        absl::StrAppendFormat(&out, "    │ … %d more lines\n", o.held - o.tail.size());
      for (const std::string& line : o.tail) out += line;
      output_.erase(f.command_id());
      std::string how = f.timed_out()    ? "timed out"
                        : f.cancelled()  ? "cancelled"
                        : f.oom_killed() ? "killed: out of memory"
                        : f.signal() == SIGSYS
                            ? absl::StrCat("killed by signal ", SIGSYS, " (seccomp)")
                        : f.signal() ? absl::StrCat("killed by signal ", f.signal())
                                     : absl::StrCat("exit ", f.exit_code());
      absl::StrAppendFormat(
          &out, "    %s %s in %s%s\n",
          (f.exit_code() == 0 && !f.timed_out() && !f.cancelled()) ? "ok" : "FAILED", how,
          Seconds(f.duration()), f.output_truncated() ? " (output truncated)" : "");
      break;
    }
    case v1::Event::kArtifactCollected: {
      const auto& a = e.artifact_collected().artifact();
      absl::StrAppendFormat(&out, "  collected %-28s %10s  sha256 %s\n", Safe(a.name()),
                            HumanBytes(a.size_bytes()), Safe(a.sha256().substr(0, 12)));
      break;
    }
    case v1::Event::kCheck:
      absl::StrAppendFormat(&out, "  %s %s%s\n", e.check().passed() ? "pass" : "FAIL",
                            Safe(e.check().name()),
                            e.check().passed() || e.check().detail().empty()
                                ? ""
                                : absl::StrCat(": ", Safe(e.check().detail())));
      break;
    case v1::Event::kNotice:
      absl::StrAppendFormat(&out, "  ! %s\n", Safe(e.notice().message()));
      break;
    case v1::Event::kAgentMessage: {
      // A model writes paragraphs: each of its lines indented under the role, never a line
      // that could pass for the CLI's own.
      std::vector<absl::string_view> lines = absl::StrSplit(e.agent_message().text(), '\n');
      absl::StrAppendFormat(&out, "  [%s] %s\n", Safe(e.agent_message().role()), Safe(lines[0]));
      for (size_t i = 1; i < lines.size(); ++i)
        absl::StrAppendFormat(&out, "    %s\n", Safe(lines[i]));
      break;
    }
    case v1::Event::kTokenUsage:
      absl::StrAppendFormat(&out, "  tokens: %d in, %d out\n", e.token_usage().input_tokens(),
                            e.token_usage().output_tokens());
      break;
    case v1::Event::kRunFinished: {
      const auto& f = e.run_finished();
      absl::StrAppendFormat(&out, "run %s%s\n", StatusName(f.status()),
                            f.reason().empty() ? "" : absl::StrCat(": ", Safe(f.reason())));
      break;
    }
    default:
      break;
  }
  return out;
}

void ProgressPrinter::Print(const v1::Event& e) {
  std::string text = Render(e);
  std::fwrite(text.data(), 1, text.size(), out_);
  std::fflush(out_);
}

void PrintRun(FILE* out, const v1::Run& run) {
  absl::FPrintF(out, "run        %s\n", Safe(run.id()));
  absl::FPrintF(
      out, "status     %s%s\n", StatusName(run.status()),
      run.status_reason().empty() ? "" : absl::StrCat(" (", Safe(run.status_reason()), ")"));
  absl::FPrintF(out, "tenant     %s\n", Safe(run.tenant()));
  absl::FPrintF(out, "playbook   %s  agent %s  provider %s\n", Safe(run.playbook()),
                Safe(run.agent()), Safe(run.provider()));
  absl::FPrintF(out, "inputs     %s\n", Safe(absl::StrJoin(run.input_names(), ", ")));
  absl::FPrintF(out, "created    %s\n", TimeUtil::ToString(run.created_at()));
  if (run.has_finished_at())
    absl::FPrintF(out, "finished   %s\n", TimeUtil::ToString(run.finished_at()));
  absl::FPrintF(out, "events     %d\n", run.last_seq());
  for (const auto& a : run.artifacts()) {
    absl::FPrintF(out, "artifact   %-28s %10s  %s\n", Safe(a.name()), HumanBytes(a.size_bytes()),
                  Safe(a.sha256()));
  }
  int failed = 0;
  for (const auto& c : run.checks()) failed += c.passed() ? 0 : 1;
  if (run.checks_size() > 0) {
    absl::FPrintF(out, "checks     %d passed, %d failed\n", run.checks_size() - failed, failed);
  }
  absl::FPrintF(out, "%s", RenderSummary(run.summary(), ""));
}

std::string ShellWords(const google::protobuf::RepeatedPtrField<std::string>& argv) {
  std::vector<std::string> words;
  for (const std::string& a : argv) {
    bool plain = !a.empty() && std::all_of(a.begin(), a.end(), [](char c) {
      return absl::ascii_isalnum(static_cast<unsigned char>(c)) ||
             absl::string_view("_@%+=:,./-").find(c) != absl::string_view::npos;
    });
    words.push_back(plain ? a : absl::StrCat("'", absl::StrReplaceAll(a, {{"'", "'\\''"}}), "'"));
  }
  return absl::StrJoin(words, " ");
}

std::string RenderSessionList(const v1::ListSessionsResponse& list, bool all) {
  if (list.sessions().empty()) {
    return all ? "no sessions\n" : "no active sessions (--all shows closed and expired ones)\n";
  }
  std::string out =
      absl::StrFormat("%-20s %-16s %-8s %s\n", "SESSION", "STATUS", "PROVIDER", "IN FLIGHT");
  for (const v1::Session& s : list.sessions()) {
    absl::StrAppendFormat(&out, "%-20s %-16s %-8s %u\n", Safe(s.id()),
                          v1::SessionStatusLabel(s.status()), Safe(s.provider()), s.in_flight());
  }
  return out;
}

}  // namespace sandgate::cli
