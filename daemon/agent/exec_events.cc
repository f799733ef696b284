#include <signal.h>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "agent/agent.h"
#include "common/events.h"
#include "google/protobuf/util/time_util.h"

namespace sandgate::agent {

using google::protobuf::util::TimeUtil;

absl::StatusOr<sandbox::ExecResult> ExecWithEvents(sandbox::Session& session, EventSink& events,
                                                   const std::string& step,
                                                   const sandbox::ExecRequest& request,
                                                   const CancelToken& cancel) {
  const uint32_t command_id = events.NextCommandId();
  events.Emit(events::CommandStarted(command_id, step, request.argv));

  auto on_output = [&](sandbox::OutputStream stream, absl::string_view chunk) {
    events.Emit(events::CommandOutput(command_id, ToProto(stream), std::string(chunk)));
  };
  absl::StatusOr<sandbox::ExecResult> result = session.Exec(request, on_output, &cancel);

  v1::CommandFinished finished;
  if (result.ok()) {
    finished = ToCommandFinished(*result);
  } else {
    finished.set_exit_code(-1);
  }
  finished.set_command_id(command_id);
  events.Emit(events::CommandFinished(std::move(finished)));
  return result;
}

v1::CommandFinished ToCommandFinished(const sandbox::ExecResult& result) {
  v1::CommandFinished f;
  f.set_exit_code(result.term_signal ? -1 : result.exit_code);
  f.set_signal(result.term_signal);
  f.set_timed_out(result.timed_out);
  f.set_oom_killed(result.oom_killed);
  f.set_cancelled(result.cancelled);
  f.set_output_truncated(result.stdout_truncated || result.stderr_truncated);
  *f.mutable_duration() =
      TimeUtil::NanosecondsToDuration(absl::ToInt64Nanoseconds(result.duration));
  return f;
}

v1::CommandOutput::Stream ToProto(sandbox::OutputStream stream) {
  return stream == sandbox::OutputStream::kStdout ? v1::CommandOutput::STREAM_STDOUT
                                                  : v1::CommandOutput::STREAM_STDERR;
}

std::string DescribeExit(const sandbox::ExecResult& result, absl::Duration timeout) {
  if (result.cancelled) return "cancelled";
  if (result.timed_out) return absl::StrCat("timed out after ", absl::FormatDuration(timeout));
  if (result.oom_killed)
    return absl::StrCat("killed by signal ", result.term_signal, " (out of memory)");
  if (result.term_signal == SIGSYS) {
    // The local sandbox's filter kills a process for a foreign architecture's call; other
    // refusals are an error return, not a signal.
    return absl::StrCat("killed by signal ", SIGSYS,
                        " (SIGSYS: a system call the sandbox's seccomp filter forbids)");
  }
  if (result.term_signal != 0) return absl::StrCat("killed by signal ", result.term_signal);
  return absl::StrCat("exited with status ", result.exit_code);
}

}  // namespace sandgate::agent
