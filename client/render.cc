#include "client/render.h"

#include <algorithm>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"
#include "google/protobuf/util/json_util.h"
#include "google/protobuf/util/time_util.h"

namespace sandgate::cli {
namespace {

using google::protobuf::util::TimeUtil;

constexpr size_t kTailLines = 8;
constexpr size_t kKeepBytes = 16 * 1024;

std::string Seconds(const google::protobuf::Duration& d) {
  return absl::StrFormat("%.2fs", TimeUtil::DurationToNanoseconds(d) / 1e9);
}

}  // namespace

std::string ToJson(const google::protobuf::Message& m) {
  std::string out;
  google::protobuf::util::JsonPrintOptions opts;
  opts.preserve_proto_field_names = true;
  (void)google::protobuf::util::MessageToJsonString(m, &out, opts);
  return out;
}

std::string StatusName(v1::RunStatus s) { return v1::RunStatusLabel(s); }

std::string HumanBytes(uint64_t n) {
  if (n < 1024) return absl::StrCat(n, " B");
  if (n < (1 << 20)) return absl::StrFormat("%.1f KiB", n / 1024.0);
  return absl::StrFormat("%.1f MiB", n / 1048576.0);
}

void ProgressPrinter::Print(const v1::Event& e) {
  switch (e.payload_case()) {
    case v1::Event::kRunQueued:
      absl::FPrintF(out_, "queued (position %d)\n", e.run_queued().position());
      break;
    case v1::Event::kRunStarted: {
      const auto& s = e.run_started();
      absl::FPrintF(out_, "run started: playbook %s, agent %s, provider %s\n", s.playbook(),
                    s.agent(), s.provider());
      break;
    }
    case v1::Event::kSessionCreated: {
      const auto& s = e.session_created();
      absl::FPrintF(out_, "sandbox %s ready (%s, %s)\n", s.session_id(), s.provider(),
                    Seconds(s.create_duration()));
      for (const auto& u : s.unenforced()) absl::FPrintF(out_, "  ! not enforced: %s\n", u);
      break;
    }
    case v1::Event::kSessionClosed:
      absl::FPrintF(out_, "sandbox %s closed\n", e.session_closed().session_id());
      break;
    case v1::Event::kSessionExpiring:
      absl::FPrintF(out_, "  ! session %s %s at %s; save what matters before then\n",
                    e.session_expiring().session_id(), e.session_expiring().reason(),
                    google::protobuf::util::TimeUtil::ToString(e.session_expiring().expires_at()));
      break;
    case v1::Event::kStepStarted:
      absl::FPrintF(out_, "step %s\n", e.step_started().name());
      break;
    case v1::Event::kStepFinished:
      if (!e.step_finished().ok()) {
        absl::FPrintF(out_, "step %s failed: %s\n", e.step_finished().name(), e.step_finished().detail());
      }
      break;
    case v1::Event::kCommandStarted: {
      // A model's command can be a whole program in a heredoc: show its first line.
      std::string line = absl::StrJoin(e.command_started().argv(), " ");
      size_t nl = line.find('\n');
      bool cut = nl != std::string::npos || line.size() > 160;
      line = line.substr(0, std::min<size_t>(nl, 160));
      absl::FPrintF(out_, "  $ %s%s\n", line, cut ? " …" : "");
      break;
    }
    case v1::Event::kCommandOutput: {
      std::string& buf = output_[e.command_output().command_id()];
      buf += e.command_output().data();
      if (buf.size() > 2 * kKeepBytes) buf.erase(0, buf.size() - kKeepBytes);
      break;
    }
    case v1::Event::kCommandFinished: {
      const auto& f = e.command_finished();
      std::string text(absl::StripTrailingAsciiWhitespace(output_[f.command_id()]));
      output_.erase(f.command_id());
      std::vector<std::string> lines = absl::StrSplit(text, '\n', absl::SkipEmpty());
      size_t from = lines.size() > kTailLines ? lines.size() - kTailLines : 0;
      if (from > 0) absl::FPrintF(out_, "    │ … %d earlier lines\n", from);
      for (size_t i = from; i < lines.size(); ++i) absl::FPrintF(out_, "    │ %s\n", lines[i]);
      std::string how = f.timed_out()    ? "timed out"
                        : f.cancelled()  ? "cancelled"
                        : f.oom_killed() ? "killed: out of memory"
                        : f.signal()     ? absl::StrCat("killed by signal ", f.signal())
                                         : absl::StrCat("exit ", f.exit_code());
      absl::FPrintF(out_, "    %s %s in %s%s\n",
                    (f.exit_code() == 0 && !f.timed_out() && !f.cancelled()) ? "ok" : "FAILED", how,
                    Seconds(f.duration()), f.output_truncated() ? " (output truncated)" : "");
      break;
    }
    case v1::Event::kArtifactCollected: {
      const auto& a = e.artifact_collected().artifact();
      absl::FPrintF(out_, "  collected %-28s %10s  sha256 %s\n", a.name(), HumanBytes(a.size_bytes()),
                    a.sha256().substr(0, 12));
      break;
    }
    case v1::Event::kCheck:
      absl::FPrintF(out_, "  %s %s%s\n", e.check().passed() ? "pass" : "FAIL", e.check().name(),
                    e.check().passed() || e.check().detail().empty()
                        ? ""
                        : absl::StrCat(": ", e.check().detail()));
      break;
    case v1::Event::kNotice:
      absl::FPrintF(out_, "  ! %s\n", e.notice().message());
      break;
    case v1::Event::kAgentMessage:
      absl::FPrintF(out_, "  [%s] %s\n", e.agent_message().role(), e.agent_message().text());
      break;
    case v1::Event::kTokenUsage:
      absl::FPrintF(out_, "  tokens: %d in, %d out\n", e.token_usage().input_tokens(),
                    e.token_usage().output_tokens());
      break;
    case v1::Event::kRunFinished: {
      const auto& f = e.run_finished();
      absl::FPrintF(out_, "run %s%s\n", StatusName(f.status()),
                    f.reason().empty() ? "" : absl::StrCat(": ", f.reason()));
      break;
    }
    default:
      break;
  }
  std::fflush(out_);
}

void PrintRun(FILE* out, const v1::Run& run) {
  absl::FPrintF(out, "run        %s\n", run.id());
  absl::FPrintF(out, "status     %s%s\n", StatusName(run.status()),
                run.status_reason().empty() ? "" : absl::StrCat(" (", run.status_reason(), ")"));
  absl::FPrintF(out, "tenant     %s\n", run.tenant());
  absl::FPrintF(out, "playbook   %s  agent %s  provider %s\n", run.playbook(), run.agent(), run.provider());
  absl::FPrintF(out, "inputs     %s\n", absl::StrJoin(run.input_names(), ", "));
  absl::FPrintF(out, "created    %s\n", TimeUtil::ToString(run.created_at()));
  if (run.has_finished_at()) absl::FPrintF(out, "finished   %s\n", TimeUtil::ToString(run.finished_at()));
  absl::FPrintF(out, "events     %d\n", run.last_seq());
  for (const auto& a : run.artifacts()) {
    absl::FPrintF(out, "artifact   %-28s %10s  %s\n", a.name(), HumanBytes(a.size_bytes()), a.sha256());
  }
  int failed = 0;
  for (const auto& c : run.checks()) failed += c.passed() ? 0 : 1;
  if (run.checks_size() > 0) {
    absl::FPrintF(out, "checks     %d passed, %d failed\n", run.checks_size() - failed, failed);
  }
}

}  // namespace sandgate::cli
