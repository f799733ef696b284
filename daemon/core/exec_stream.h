// Exec without gRPC: a command runs in a kept session under a lease, and its messages (output
// as it is produced, the lifetime warning, the final CommandFinished) reach a stream writer
// one at a time through an ExecOutput, which bounds what is queued so that a slow reader
// slows the command (its pipe fills) instead of growing the daemon's memory.
//
//   class Writer : public core::ExecWriter { ... };  // the gRPC reactor adapts one
//   core::ExecOutput out(&writer, &cancel, Clock::Real());
//   core::ExecOutcome o = core::RunExec(sessions, caller, request, &cancel, &out);  // blocks
//   out.Close(o.stream_status);
//   // writer.Send(msg) for each message in order, then writer.End(o.stream_status)
//
// RunExec blocks for the command's whole run: call it on an executor thread.
#ifndef SANDGATE_CORE_EXEC_STREAM_H_
#define SANDGATE_CORE_EXEC_STREAM_H_

#include <deque>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "common/cancel.h"
#include "common/clock.h"
#include "core/session_manager.h"
#include "core/tenants.h"
#include "sandbox/sandbox.h"
#include "sandgate/v1/sandgate.pb.h"

namespace sandgate::core {

// Where an Exec's messages go. ExecOutput calls it with no write in flight and never with its
// own lock held; neither call may block.
class ExecWriter {
 public:
  virtual ~ExecWriter() = default;
  // Starts writing `*msg`, which stays valid until the writer calls ExecOutput::WriteDone.
  virtual void Send(const v1::ExecResponse* msg) = 0;
  // Every message was written; the stream ends with `status`. The last call.
  virtual void End(const absl::Status& status) = 0;
};

// The queue between the command's thread (the producer) and the writer. Thread safe. After
// Stop, the writer is not called again.
class ExecOutput {
 public:
  static constexpr size_t kDefaultMaxQueuedBytes = 1 << 20;

  // `writer`, `cancel` and `clock` are not owned and must outlive this. `cancel` is the
  // command's: a producer waiting for room gives up once it is cancelled (checked every
  // kCancelCheck, as its canceller need not be this class).
  ExecOutput(ExecWriter* writer, const CancelToken* cancel, Clock* clock,
             size_t max_queued_bytes = kDefaultMaxQueuedBytes);

  // Producer. Output waits while max_queued_bytes are queued and drops `msg` if the command
  // was cancelled or the output stopped meanwhile; Notice never waits.
  void Output(v1::ExecResponse msg);
  void Notice(v1::ExecResponse msg);
  // After the last message: the writer finishes with `status` once the queue is written.
  void Close(absl::Status status);

  // Writer side. The write started last completed.
  void WriteDone();
  // The caller went away: queued messages are dropped, a waiting producer returns. Returns
  // whether a write is still in flight (its completion is then the writer's last event).
  bool Stop();

  // For tests and metrics.
  size_t queued_bytes() const;
  bool waiting_for_room() const;

  static constexpr absl::Duration kCancelCheck = absl::Milliseconds(100);

 private:
  void Push(v1::ExecResponse msg, bool wait_for_room);
  // Starts the next write, or finishes when closed and drained.
  void Pump();

  ExecWriter* const writer_;
  const CancelToken* const cancel_;
  Clock* const clock_;
  const size_t max_queued_bytes_;

  mutable absl::Mutex mu_;
  std::deque<v1::ExecResponse> queue_ ABSL_GUARDED_BY(mu_);
  size_t queued_bytes_ ABSL_GUARDED_BY(mu_) = 0;
  bool writing_ ABSL_GUARDED_BY(mu_) = false;
  bool waiting_ ABSL_GUARDED_BY(mu_) = false;
  bool closed_ ABSL_GUARDED_BY(mu_) = false;
  bool stopped_ ABSL_GUARDED_BY(mu_) = false;  // by Stop, or before End
  absl::Status final_status_ ABSL_GUARDED_BY(mu_);
  // The write in flight: set under mu_ while !writing_, read by the writer until WriteDone.
  v1::ExecResponse current_;
};

struct ExecOutcome {
  // What the stream ends with: the session's failure, ABORTED when the session's end ended
  // the command, else OK (a failed command is an OK stream whose CommandFinished says so).
  absl::Status stream_status;
  // Whether the command was started (the lease was granted), and the status it ran with
  // (what the audit log records).
  bool ran = false;
  absl::Status command_status;
};

// The sandbox request for `request`: argv, or `command` through the shell.
sandbox::ExecRequest ToSandboxExec(const v1::ExecRequest& request, absl::Duration default_timeout);

// Runs `request` in `session`, sending each output chunk to `out` as it is produced.
// `cancel` ends the command (and the wait for room).
absl::StatusOr<sandbox::ExecResult> ExecInSession(sandbox::Session& session,
                                                  const v1::ExecRequest& request,
                                                  absl::Duration default_timeout,
                                                  const CancelToken* cancel, ExecOutput* out);

// Leases the session named by `request`, runs the command in it (ExecInSession) and releases
// the lease, then sends CommandFinished; the session's lifetime warning reaches `out` as a
// notice. Does not Close `out`.
// The session's end cancels `cancel` with a reason starting "session ".
ExecOutcome RunExec(SessionManager& sessions, const Caller& caller, const v1::ExecRequest& request,
                    CancelToken* cancel, ExecOutput* out);

}  // namespace sandgate::core

#endif  // SANDGATE_CORE_EXEC_STREAM_H_
