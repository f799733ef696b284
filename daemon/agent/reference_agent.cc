#include "agent/reference_agent.h"

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"
#include "absl/time/clock.h"
#include "common/errors.h"
#include "common/events.h"
#include "google/protobuf/util/time_util.h"

namespace sandgate::agent {
namespace {

using google::protobuf::util::TimeUtil;

// Keeps the tail of a command's stderr so a failure can say what the program said.
class StderrTail : public EventSink {
 public:
  explicit StderrTail(EventSink& next) : next_(next) {}
  void Emit(v1::Event event) override {
    if (event.has_command_output() &&
        event.command_output().stream() == v1::CommandOutput::STREAM_STDERR) {
      tail_ += event.command_output().data();
      if (tail_.size() > 4096) tail_.erase(0, tail_.size() - 4096);
    }
    next_.Emit(std::move(event));
  }
  uint32_t NextCommandId() override { return next_.NextCommandId(); }
  std::string LastLine() const {
    absl::string_view t = absl::StripTrailingAsciiWhitespace(tail_);
    size_t nl = t.rfind('\n');
    return std::string(nl == absl::string_view::npos ? t : t.substr(nl + 1));
  }

 private:
  EventSink& next_;
  std::string tail_;
};

}  // namespace

absl::Status ReferenceAgent::Run(const AgentTask& task, sandbox::Session& session,
                                 EventSink& events, const CancelToken& cancel) {
  playbooks::ReferencePlan plan =
      task.playbook->Reference(*task.inputs, session.workdir(), *task.settings);
  for (const playbooks::PlacedFile& file : plan.files) {
    absl::Status st = session.WriteFile(file.path, file.content, file.mode);
    if (!st.ok()) return errors::Internal(absl::StrCat("placing ", file.path, ": ", st.message()));
    events.Emit(events::FileTransferred(v1::FileTransferred::DIRECTION_INTO_SANDBOX, file.path,
                                        file.content.size()));
  }
  for (const playbooks::Step& step : plan.steps) {
    if (cancel.cancelled()) return errors::Cancelled(cancel.reason());
    events.Emit(events::StepStarted(step.name, absl::StrJoin(step.argv, " ")));

    absl::Time start = absl::Now();
    sandbox::ExecRequest request;
    request.argv = step.argv;
    request.timeout = std::min(step.timeout, task.command_timeout);
    StderrTail tail(events);
    absl::StatusOr<sandbox::ExecResult> result =
        ExecWithEvents(session, tail, step.name, request, cancel);

    v1::StepFinished end;
    end.set_name(step.name);
    end.set_ok(result.ok() && result->ok());
    *end.mutable_duration() =
        TimeUtil::NanosecondsToDuration(absl::ToInt64Nanoseconds(absl::Now() - start));
    if (!result.ok()) {
      end.set_detail(std::string(result.status().message()));
      events.Emit(events::StepFinished(std::move(end)));
      return result.status();
    }
    if (!result->ok()) end.set_detail(DescribeExit(*result, request.timeout));
    events.Emit(events::StepFinished(std::move(end)));
    if (result->cancelled) return errors::Cancelled(cancel.reason());
    if (!result->ok()) {
      std::string msg =
          absl::StrCat("step ", step.name, " ", DescribeExit(*result, request.timeout));
      std::string last = tail.LastLine();
      if (!last.empty()) absl::StrAppend(&msg, ": ", last);
      return errors::FailedPrecondition(msg);
    }
  }
  return absl::OkStatus();
}

}  // namespace sandgate::agent
