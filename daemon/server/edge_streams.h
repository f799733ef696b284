// The streams of a run that both faces serve, written once: a follower of its event log
// (gRPC StreamEvents and REST server-sent events are two sinks of one EventFollower) and the
// bytes of one of its artifacts (DownloadArtifact and GET .../artifacts/{name}). A face only
// adapts them: how a message is written, how the end is said.
//
//   auto follower = std::make_shared<EventFollower>(deps, caller, request);
//   absl::StatusOr<bool> open = follower->Open(sink);   // on an executor
//   if (open.ok() && *open) follower->Pull();           // each Pull: one answer to `sink`
//
// Internal to server/.
#ifndef SANDGATE_SERVER_EDGE_STREAMS_H_
#define SANDGATE_SERVER_EDGE_STREAMS_H_

#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "common/cancel.h"
#include "core/event_log.h"
#include "core/exec_stream.h"
#include "core/session_manager.h"
#include "sandgate/v1/sandgate.pb.h"
#include "server/service.h"

namespace sandgate::server {

// One subscriber's follow of a run's event log (or a kept session's own): replays from the
// store after the request's after_seq, then follows live until the log's terminal event
// (core::IsTerminal, the one rule of where a log ends), or ends after the replay when not
// following. A follow that starts at or past that end is over before it begins (Open says
// so): a client resuming after the last event it saw gets nothing, at once.
//
// Pull-driven: the sink asks for more (Pull) when it has written what it got, so a slow
// reader holds nothing but its own write, and a follower that waits holds no thread (it is
// parked in EventLog::Wait). Thread safe; kept alive by its owner and by its pending wait.
class EventFollower : public std::enable_shared_from_this<EventFollower> {
 public:
  // Each Pull is answered by exactly one call of one of these, on an executor or the event
  // log's thread, never under the follower's lock and never two at a time. `events` come in
  // seq order, escaped to UTF-8, at most up to the terminal event; after it, the next Pull
  // is answered end(OK).
  struct Sink {
    std::function<void(std::vector<v1::Event>)> events;
    std::function<void()> heartbeat;               // the log was quiet for heartbeat_interval
    std::function<void(const absl::Status&)> end;  // the stream is over: OK, or why
  };

  // A request either face may follow: run_id named, after_seq not negative, no NUL.
  static absl::Status Check(const v1::StreamEventsRequest& request);

  EventFollower(const ServiceDeps& deps, core::Caller caller, v1::StreamEventsRequest request);

  // On an executor (it reads the store): may `caller` follow this log? Following a kept
  // session's own log holds the session until Close. True: Pull for the events; false: the
  // follow starts at or past the log's end and is over.
  absl::StatusOr<bool> Open(Sink sink);
  // Asks for the next answer (after Open answered true, and after the last answer).
  void Pull();
  // The subscriber is gone (or the server stops): a pending wait is cancelled (its Pull then
  // answered end(CANCELLED)), and the session may idle again. Idempotent.
  void Close();

 private:
  void Fetch();                                    // on the I/O executor
  void OnWake(core::EventLog::WaitResult result);  // never blocks

  const ServiceDeps& deps_;
  const core::Caller caller_;
  const v1::StreamEventsRequest req_;
  Sink sink_;  // set by Open, before any Pull; constant after
  absl::Mutex mu_;
  int64_t last_seq_ ABSL_GUARDED_BY(mu_);
  bool ended_ ABSL_GUARDED_BY(mu_) = false;  // the terminal event was handed out
  bool closed_ ABSL_GUARDED_BY(mu_) = false;
  uint64_t wait_id_ ABSL_GUARDED_BY(mu_) = 0;  // the live wait, 0 when none
  bool woken_ ABSL_GUARDED_BY(mu_) = false;    // the last wait fired (maybe before Wait returned)
  std::unique_ptr<core::SessionManager::Lease> lease_ ABSL_GUARDED_BY(mu_);
};

// One artifact of a run, read chunk by chunk as the caller may see it (the run as
// RunManager::Get gave it to the caller). Not thread safe: one reader at a time.
class ArtifactSource {
 public:
  // NOT_FOUND for a run the caller may not see and for a name the run did not make;
  // INVALID_ARGUMENT for a NUL in the request.
  static absl::StatusOr<ArtifactSource> Open(const ServiceDeps& deps, const core::Caller& caller,
                                             const v1::DownloadArtifactRequest& request);
  const v1::Artifact& artifact() const { return artifact_; }
  bool done() const { return offset_ >= artifact_.size_bytes(); }
  // The next chunk as DownloadArtifact sends it: its offset, the total size, at most
  // core::kTransferChunkBytes of data, and on the last the sha256. An error, or a chunk with
  // no data before the end (the stored file is shorter than recorded), ends the stream.
  absl::StatusOr<v1::ArtifactChunk> Next();

 private:
  ArtifactSource(const ServiceDeps& deps, v1::Run run, v1::Artifact artifact)
      : deps_(&deps), run_(std::move(run)), artifact_(std::move(artifact)) {}

  const ServiceDeps* deps_;
  v1::Run run_;
  v1::Artifact artifact_;
  uint64_t offset_ = 0;
};

// Exec on either face, served here: runs the command (core::RunExec) writing to `output`,
// audits it when it ran, and returns the stream's status (for ExecOutput::Close). Blocks for
// the command's whole run: on Exec's executor.
absl::Status ServeExec(const ServiceDeps& deps, const core::Caller& caller,
                       const v1::ExecRequest& request, CancelToken* cancel,
                       core::ExecOutput* output);

}  // namespace sandgate::server

#endif  // SANDGATE_SERVER_EDGE_STREAMS_H_
