#include "core/exec_stream.h"

#include <memory>
#include <string>
#include <utility>

#include "absl/strings/match.h"
#include "agent/agent.h"
#include "core/sandbox_spec.h"

namespace sandgate::core {

ExecOutput::ExecOutput(ExecWriter* writer, const CancelToken* cancel, Clock* clock,
                       size_t max_queued_bytes)
    : writer_(writer), cancel_(cancel), clock_(clock), max_queued_bytes_(max_queued_bytes) {}

void ExecOutput::Output(v1::ExecResponse msg) { Push(std::move(msg), /*wait_for_room=*/true); }

void ExecOutput::Notice(v1::ExecResponse msg) { Push(std::move(msg), /*wait_for_room=*/false); }

void ExecOutput::Push(v1::ExecResponse msg, bool wait_for_room) {
  {
    absl::MutexLock lock(&mu_);
    if (stopped_) return;
    if (wait_for_room) {
      auto room = [this]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
        return queued_bytes_ < max_queued_bytes_ || stopped_ || cancel_->cancelled();
      };
      waiting_ = true;
      while (!room()) {
        clock_->AwaitWithDeadline(mu_, absl::Condition(&room), clock_->Now() + kCancelCheck);
      }
      waiting_ = false;
      if (stopped_ || cancel_->cancelled()) return;
    }
    queued_bytes_ += msg.ByteSizeLong();
    queue_.push_back(std::move(msg));
  }
  Pump();
}

void ExecOutput::Close(absl::Status status) {
  {
    absl::MutexLock lock(&mu_);
    closed_ = true;
    final_status_ = std::move(status);
  }
  Pump();
}

void ExecOutput::WriteDone() {
  {
    absl::MutexLock lock(&mu_);
    writing_ = false;
  }
  Pump();
}

bool ExecOutput::Stop() {
  absl::MutexLock lock(&mu_);
  stopped_ = true;
  queue_.clear();
  queued_bytes_ = 0;
  return writing_;
}

size_t ExecOutput::queued_bytes() const {
  absl::MutexLock lock(&mu_);
  return queued_bytes_;
}

bool ExecOutput::waiting_for_room() const {
  absl::MutexLock lock(&mu_);
  return waiting_;
}

void ExecOutput::Pump() {
  bool write = false;
  absl::Status finish;
  {
    absl::MutexLock lock(&mu_);
    if (writing_ || stopped_) return;
    if (!queue_.empty()) {
      current_ = std::move(queue_.front());
      queue_.pop_front();
      queued_bytes_ -= current_.ByteSizeLong();
      writing_ = write = true;
    } else if (closed_) {
      stopped_ = true;  // End is the writer's last call
      finish = final_status_;
    } else {
      return;
    }
  }
  // Only the caller that set writing_ (or stopped_) gets here, so current_ is not touched
  // again before the writer's WriteDone.
  if (write) {
    writer_->Send(&current_);
  } else {
    writer_->End(finish);
  }
}

sandbox::ExecRequest ToSandboxExec(const v1::ExecRequest& request, absl::Duration default_timeout) {
  sandbox::ExecRequest exec;
  if (request.argv().empty()) {
    exec.argv = sandbox::ShellCommand(request.command());
  } else {
    exec.argv.assign(request.argv().begin(), request.argv().end());
  }
  exec.env.insert(request.env().begin(), request.env().end());
  exec.cwd = request.cwd();
  exec.timeout = request.has_timeout() ? FromProto(request.timeout()) : default_timeout;
  if (request.output_cap_bytes() > 0) exec.output_cap_bytes = request.output_cap_bytes();
  return exec;
}

absl::StatusOr<sandbox::ExecResult> ExecInSession(sandbox::Session& session,
                                                  const v1::ExecRequest& request,
                                                  absl::Duration default_timeout,
                                                  const CancelToken* cancel, ExecOutput* out) {
  absl::StatusOr<sandbox::ExecResult> result = session.Exec(
      ToSandboxExec(request, default_timeout),
      [out](sandbox::OutputStream stream, absl::string_view data) {
        v1::ExecResponse msg;
        v1::CommandOutput* output = msg.mutable_output();
        output->set_stream(agent::ToProto(stream));
        output->set_data(std::string(data));
        out->Output(std::move(msg));
      },
      cancel);
  return result;
}

ExecOutcome RunExec(SessionManager& sessions, const Caller& caller, const v1::ExecRequest& request,
                    CancelToken* cancel, ExecOutput* out) {
  ExecOutcome outcome;
  LeaseWatch watch;
  watch.cancel = cancel;
  watch.expiring = [out](const v1::SessionExpiring& x) {
    v1::ExecResponse msg;
    *msg.mutable_expiring() = x;
    out->Notice(std::move(msg));
  };
  absl::StatusOr<std::unique_ptr<SessionManager::Lease>> lease =
      sessions.Acquire(caller, request.session_id(), std::move(watch));
  if (!lease.ok()) {
    outcome.stream_status = lease.status();
    return outcome;
  }
  absl::StatusOr<sandbox::ExecResult> result =
      ExecInSession((*lease)->session(), request, (*lease)->command_timeout(), cancel, out);
  // The session is idle again before the caller reads the end of the stream.
  lease->reset();
  outcome.ran = true;
  outcome.command_status = result.status();
  if (!result.ok()) {
    outcome.stream_status = result.status();
    return outcome;
  }
  v1::ExecResponse msg;
  *msg.mutable_finished() = agent::ToCommandFinished(*result);
  out->Notice(std::move(msg));
  // A command ended by its session's end says so in the stream's status.
  if (result->cancelled && absl::StartsWith(cancel->reason(), "session ")) {
    outcome.stream_status = absl::AbortedError(cancel->reason());
  }
  return outcome;
}

}  // namespace sandgate::core
