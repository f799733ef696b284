#include "server/edge_streams.h"

#include <utility>

#include "absl/strings/str_cat.h"
#include "common/errors.h"
#include "common/events.h"
#include "common/status_macros.h"
#include "core/file_transfer.h"
#include "server/edge_unary.h"
#include "server/reactor.h"
#include "server/utf8_fields.h"

namespace sandgate::server {
namespace {

constexpr uint32_t kEventBatch = 256;

absl::Status Gone() { return errors::Cancelled("the subscriber went away"); }

}  // namespace

absl::Status EventFollower::Check(const v1::StreamEventsRequest& request) {
  if (request.run_id().empty()) return errors::InvalidArgument("run_id: required");
  if (request.after_seq() < 0) return errors::InvalidArgument("after_seq: must not be negative");
  return CheckNoNul(request);
}

EventFollower::EventFollower(const ServiceDeps& deps, core::Caller caller,
                             v1::StreamEventsRequest request)
    : deps_(deps),
      caller_(std::move(caller)),
      req_(std::move(request)),
      last_seq_(req_.after_seq()) {}

absl::StatusOr<bool> EventFollower::Open(Sink sink) {
  sink_ = std::move(sink);
  SANDGATE_RETURN_IF_ERROR(Check(req_));
  // A run's log, or a kept session's own (its id); following the latter holds the session.
  absl::StatusOr<std::unique_ptr<core::SessionManager::Lease>> lease =
      deps_.api->StartEventStream(caller_, req_);
  if (!lease.ok()) return lease.status();
  if (req_.follow()) {
    absl::StatusOr<bool> ended = deps_.events->Ended(req_.run_id(), req_.after_seq());
    if (!ended.ok()) return ended.status();
    if (*ended) return false;
  }
  absl::MutexLock lock(&mu_);
  lease_ = *std::move(lease);
  return true;
}

void EventFollower::Pull() {
  auto self = shared_from_this();
  if (!deps_.io->Submit([self] { self->Fetch(); })) sink_.end(QueueFull());
}

void EventFollower::Close() {
  uint64_t wait_id;
  std::unique_ptr<core::SessionManager::Lease> lease;
  {
    absl::MutexLock lock(&mu_);
    closed_ = true;
    wait_id = wait_id_;
    wait_id_ = 0;
    lease = std::move(lease_);
  }
  // Removed before it fired: its Pull is answered here (else the firing answers it).
  if (wait_id != 0 && deps_.events->CancelWait(wait_id)) sink_.end(Gone());
}

void EventFollower::Fetch() {
  int64_t after;
  {
    absl::MutexLock lock(&mu_);
    if (closed_) return sink_.end(Gone());
    if (ended_) return sink_.end(absl::OkStatus());
    after = last_seq_;
  }
  absl::StatusOr<std::vector<v1::Event>> batch =
      deps_.events->Read(req_.run_id(), after, kEventBatch);
  if (!batch.ok()) return sink_.end(batch.status());
  if (batch->empty()) {
    if (!req_.follow()) return sink_.end(absl::OkStatus());
    {
      absl::MutexLock lock(&mu_);
      woken_ = false;
    }
    auto self = shared_from_this();
    // The callback may run before Wait returns; woken_ tells whether the id is still live.
    uint64_t id = deps_.events->Wait(req_.run_id(), after, deps_.heartbeat_interval,
                                     [self](core::EventLog::WaitResult r) { self->OnWake(r); });
    bool cancel;
    {
      absl::MutexLock lock(&mu_);
      if (!woken_) wait_id_ = id;
      cancel = closed_ && !woken_;  // closed while the wait was being made
      if (cancel) wait_id_ = 0;
    }
    if (cancel && deps_.events->CancelWait(id)) sink_.end(Gone());
    return;
  }
  // Nothing past the log's last event is handed out; the next Pull ends the stream.
  std::vector<v1::Event> out;
  bool terminal = false;
  for (v1::Event& e : *batch) {
    terminal = core::IsTerminal(e);
    EscapeStringFields(&e);
    out.push_back(std::move(e));
    if (terminal) break;
  }
  {
    absl::MutexLock lock(&mu_);
    last_seq_ = out.back().seq();
    ended_ = terminal;
  }
  sink_.events(std::move(out));
}

void EventFollower::OnWake(core::EventLog::WaitResult result) {
  {
    absl::MutexLock lock(&mu_);
    wait_id_ = 0;
    woken_ = true;
  }
  switch (result) {
    case core::EventLog::WaitResult::kReady: {
      auto self = shared_from_this();
      if (!deps_.io->Submit([self] { self->Fetch(); })) sink_.end(QueueFull());
      break;
    }
    case core::EventLog::WaitResult::kTimeout:
      sink_.heartbeat();
      break;
    case core::EventLog::WaitResult::kShutdown:
      sink_.end(errors::Unavailable(
          "the daemon is shutting down; the run stays queued: follow again after the last "
          "seq you saw once it is back"));
      break;
  }
}

absl::StatusOr<ArtifactSource> ArtifactSource::Open(const ServiceDeps& deps,
                                                    const core::Caller& caller,
                                                    const v1::DownloadArtifactRequest& request) {
  SANDGATE_RETURN_IF_ERROR(CheckNoNul(request));
  SANDGATE_ASSIGN_OR_RETURN(v1::Run run, deps.runs->Get(caller, request.run_id()));
  for (const v1::Artifact& a : run.artifacts()) {
    if (a.name() == request.name()) return ArtifactSource(deps, std::move(run), a);
  }
  return errors::NotFound("artifact", absl::StrCat(request.run_id(), "/", request.name()));
}

absl::StatusOr<v1::ArtifactChunk> ArtifactSource::Next() {
  SANDGATE_ASSIGN_OR_RETURN(
      std::string data,
      deps_->runs->ReadArtifact(run_, artifact_.name(), offset_, core::kTransferChunkBytes));
  v1::ArtifactChunk chunk;
  chunk.set_offset(offset_);
  chunk.set_total_size(artifact_.size_bytes());
  offset_ += data.size();
  const bool short_read = data.empty() && !done();
  chunk.set_data(std::move(data));
  if (short_read) {
    return errors::Internal(absl::StrCat("artifact ", run_.id(), "/", artifact_.name(),
                                         " ends before its recorded size"));
  }
  if (done()) chunk.set_sha256(artifact_.sha256());
  return chunk;
}

absl::Status ServeExec(const ServiceDeps& deps, const core::Caller& caller,
                       const v1::ExecRequest& request, CancelToken* cancel,
                       core::ExecOutput* output) {
  core::ExecOutcome outcome = core::RunExec(*deps.sessions, caller, request, cancel, output);
  if (outcome.ran) {
    AuditCall(deps, Policy("Exec"), caller, request.session_id(), outcome.command_status);
  }
  return outcome.stream_status;
}

}  // namespace sandgate::server
