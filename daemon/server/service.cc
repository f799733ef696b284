#include "server/service.h"

#include <deque>
#include <optional>
#include <type_traits>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/synchronization/mutex.h"
#include "common/errors.h"
#include "common/events.h"
#include "core/file_transfer.h"
#include "server/forwarding.h"
#include "server/reactor.h"
#include "server/session_streams.h"
#include "server/status.h"
#include "server/utf8_fields.h"

namespace sandgate::server {
namespace {

constexpr uint32_t kEventBatch = 256;

template <typename T>
struct Identity {
  using type = T;
};

// An audited call: its action, and what it acted on (read after the handler ran).
template <typename Req, typename Resp>
struct Audited {
  const char* action = nullptr;
  std::string (*target)(const Req&, const Resp&) = nullptr;
};

// Where a unary call runs: the I/O executor (short blocking work), or Exec's executor, shared
// fairly by the tenants, for a call that may wait long (ReadProcessOutput's wait, the input
// of a process that does not read).
enum class Lane { kIo, kWaits };

// The one unary adapter: authenticates, runs `handler` on the I/O executor and finishes the
// call with its status and `response` (its strings escaped to UTF-8); with `audit`, the call
// is written to the audit log. A handler that takes its request by pointer takes its contents:
// gRPC owns the (non-const) message and only destroys it after the call.
// With `forward`, a call on another replica's run or session is sent to its owner instead
// (server/forwarding.h), which audits it.
template <typename Arg, typename Req, typename Resp>
grpc::ServerUnaryReactor* Unary(const ServiceDeps& deps, grpc::CallbackServerContext* ctx,
                                absl::Status (core::Api::*handler)(const core::Caller&, Arg, Resp*),
                                const Req* request, Resp* response,
                                typename Identity<Audited<Req, Resp>>::type audit = {},
                                typename Identity<UnaryForward<Req, Resp>>::type forward = {},
                                Lane lane = Lane::kIo) {
  grpc::ServerUnaryReactor* reactor = ctx->DefaultReactor();
  absl::StatusOr<core::Caller> caller = Authenticate(*deps.tenants, ctx);
  if (!caller.ok()) {
    reactor->Finish(ToGrpc(caller.status()));
    return reactor;
  }
  const std::string tenant = caller->tenant;
  auto submit = [&deps, lane, &tenant](std::function<void()> task) {
    return lane == Lane::kWaits ? deps.exec->Submit(tenant, std::move(task))
                                : deps.io->Submit(std::move(task));
  };
  bool queued =
      submit([&deps, ctx, reactor, handler, request, response, caller = *caller, audit, forward] {
        if (ForwardUnary(deps.forwarder, ctx, reactor, caller, forward, request, response)) return;
        absl::Status st;
        if constexpr (std::is_pointer_v<Arg>) {
          st = (deps.api->*handler)(caller, const_cast<Req*>(request), response);
        } else {
          st = (deps.api->*handler)(caller, *request, response);
        }
        if (st.ok() && forward.again != nullptr && forward.again(*response) &&
            ForwardUnary(deps.forwarder, ctx, reactor, caller, forward, request, response)) {
          return;  // the owner answers (and audits)
        }
        if (st.ok()) EscapeStringFields(response);
        if (audit.action != nullptr && deps.audit != nullptr) {
          deps.audit->Record(caller.tenant, audit.action, audit.target(*request, *response), st);
        }
        reactor->Finish(ToGrpc(st));
      });
  if (!queued) reactor->Finish(ToGrpc(QueueFull()));
  return reactor;
}

// StreamEvents: replay from the log, then follow until its terminal event (core::IsTerminal),
// or end at once (OK) when the follow starts at or past it. One write in flight at a time;
// the next batch is read on the executor when the buffer is empty.
class EventStream final : public PullWriter<v1::Event> {
 public:
  EventStream(const ServiceDeps& deps, core::Caller caller, v1::StreamEventsRequest req)
      : deps_(deps), caller_(std::move(caller)), req_(std::move(req)), last_seq_(req_.after_seq()) {
    Schedule(deps_.io, [this] { FirstFetch(); });
  }

  void OnWriteDone(bool ok) override {
    if (!ok) {
      FinishOnce(grpc::Status(grpc::StatusCode::CANCELLED, "stream broken"));
      return;
    }
    bool terminal;
    {
      absl::MutexLock lock(&mu_);
      writing_ = false;
      if (current_.seq() > 0) last_seq_ = current_.seq();
      terminal = core::IsTerminal(current_);
    }
    if (terminal) {
      FinishOnce(grpc::Status::OK);
      return;
    }
    Pump();
  }

  // The stream is over: the session it followed may idle from now on. (Dropped here, not with
  // the reactor, which executor work may keep a while longer.)
  void OnDone() override {
    std::unique_ptr<core::SessionManager::Lease> lease;
    {
      absl::MutexLock lock(&mu_);
      lease = std::move(lease_);
    }
    lease.reset();
    PullWriter::OnDone();
  }

  void OnCancel() override {
    uint64_t wait_id;
    {
      absl::MutexLock lock(&mu_);
      cancelled_ = true;
      wait_id = wait_id_;
      wait_id_ = 0;
    }
    if (wait_id != 0 && deps_.events->CancelWait(wait_id)) Release();
    bool writing;
    {
      absl::MutexLock lock(&mu_);
      writing = writing_;
    }
    if (!writing) FinishOnce(grpc::Status(grpc::StatusCode::CANCELLED, "cancelled by the client"));
  }

 private:
  void FirstFetch() {
    // A run's log, or a kept session's own (its id); following the latter holds the session.
    absl::StatusOr<std::unique_ptr<core::SessionManager::Lease>> lease =
        deps_.api->StartEventStream(caller_, req_);
    if (!lease.ok()) {
      FinishOnce(ToGrpc(lease.status()));
      return;
    }
    {
      absl::MutexLock lock(&mu_);
      lease_ = *std::move(lease);
    }
    // A follow from at or past the log's end (a client resuming after the last event it saw)
    // is over at once: no event will come, only heartbeats.
    if (req_.follow()) {
      absl::StatusOr<bool> ended = deps_.events->Ended(req_.run_id(), req_.after_seq());
      if (!ended.ok()) {
        FinishOnce(ToGrpc(ended.status()));
        return;
      }
      if (*ended) {
        FinishOnce(grpc::Status::OK);
        return;
      }
    }
    Fetch();
  }

  // On the executor: read the next batch, then write it, or wait for more.
  void Fetch() {
    int64_t after;
    {
      absl::MutexLock lock(&mu_);
      if (cancelled_) return;
      after = last_seq_;
    }
    absl::StatusOr<std::vector<v1::Event>> batch =
        deps_.events->Read(req_.run_id(), after, kEventBatch);
    if (!batch.ok()) {
      FinishOnce(ToGrpc(batch.status()));
      return;
    }
    if (batch->empty()) {
      if (!req_.follow()) {
        FinishOnce(grpc::Status::OK);
        return;
      }
      Acquire();
      {
        absl::MutexLock lock(&mu_);
        woken_ = false;
      }
      // The callback may run before Wait returns; woken_ tells whether the id is still live.
      uint64_t id = deps_.events->Wait(req_.run_id(), after, deps_.heartbeat_interval,
                                       [this](core::EventLog::WaitResult r) { OnWake(r); });
      absl::MutexLock lock(&mu_);
      if (!woken_) wait_id_ = id;
      return;
    }
    {
      absl::MutexLock lock(&mu_);
      for (auto& e : *batch) buffer_.push_back(std::move(e));
    }
    Pump();
  }

  // From the EventLog (appending thread or timer): never blocks.
  void OnWake(core::EventLog::WaitResult result) {
    {
      absl::MutexLock lock(&mu_);
      wait_id_ = 0;
      woken_ = true;
    }
    switch (result) {
      case core::EventLog::WaitResult::kReady:
        Schedule(deps_.io, [this] { Fetch(); });
        break;
      case core::EventLog::WaitResult::kTimeout: {
        v1::Event hb = events::Heartbeat();
        hb.set_run_id(req_.run_id());
        {
          absl::MutexLock lock(&mu_);
          buffer_.push_back(std::move(hb));
        }
        Pump();
        break;
      }
      case core::EventLog::WaitResult::kShutdown:
        FinishOnce(grpc::Status(grpc::StatusCode::UNAVAILABLE,
                                "the daemon is shutting down; the run stays queued: follow again "
                                "with after_seq once it is back"));
        break;
    }
    Release();
  }

  // Starts the next write, or the next fetch when nothing is buffered; ends a cancelled
  // stream once no write is in flight (every reactor must reach Finish, or Server::Shutdown
  // waits for it forever).
  void Pump() {
    bool end = false;
    {
      absl::MutexLock lock(&mu_);
      if (writing_) return;
      end = cancelled_;
    }
    if (end) {
      FinishOnce(grpc::Status(grpc::StatusCode::CANCELLED, "cancelled by the client"));
      return;
    }
    {
      absl::MutexLock lock(&mu_);
      if (writing_ || cancelled_) return;
      if (!buffer_.empty()) {
        current_ = std::move(buffer_.front());
        buffer_.pop_front();
        writing_ = true;
      }
    }
    if (finished()) return;
    bool have;
    {
      absl::MutexLock lock(&mu_);
      have = writing_;
    }
    if (have) {
      EscapeStringFields(&current_);
      StartWrite(&current_);
    } else {
      Schedule(deps_.io, [this] { Fetch(); });
    }
  }

  const ServiceDeps deps_;
  const core::Caller caller_;
  const v1::StreamEventsRequest req_;
  int64_t last_seq_ ABSL_GUARDED_BY(mu_);
  std::deque<v1::Event> buffer_ ABSL_GUARDED_BY(mu_);
  v1::Event current_;  // the write in flight; touched only by the writer
  bool writing_ ABSL_GUARDED_BY(mu_) = false;
  bool cancelled_ ABSL_GUARDED_BY(mu_) = false;
  uint64_t wait_id_ ABSL_GUARDED_BY(mu_) = 0;
  bool woken_ ABSL_GUARDED_BY(mu_) = false;
  // Held while a follow of a kept session's own log is open (core::Api::StartEventStream).
  std::unique_ptr<core::SessionManager::Lease> lease_ ABSL_GUARDED_BY(mu_);
};

// DownloadArtifact: one chunk read on the executor per write.
class ArtifactStream final : public PullWriter<v1::ArtifactChunk> {
 public:
  ArtifactStream(const ServiceDeps& deps, core::Caller caller, v1::DownloadArtifactRequest req)
      : deps_(deps), caller_(std::move(caller)), req_(std::move(req)) {
    Schedule(deps_.io, [this] { Next(); });
  }
  void OnWriteDone(bool ok) override {
    if (!ok) {
      FinishOnce(grpc::Status(grpc::StatusCode::CANCELLED, "stream broken"));
      return;
    }
    if (last_) {
      FinishOnce(grpc::Status::OK);
      return;
    }
    Schedule(deps_.io, [this] { Next(); });
  }
  // A write or a read task is always in flight until Finish; the failed write that follows
  // a cancellation ends the stream.
  void OnCancel() override {}

 private:
  void Next() {
    if (finished()) return;
    if (!artifact_) {
      absl::StatusOr<v1::Run> run = deps_.runs->Get(caller_, req_.run_id());
      if (!run.ok()) {
        FinishOnce(ToGrpc(run.status()));
        return;
      }
      for (const auto& a : run->artifacts()) {
        if (a.name() == req_.name()) artifact_ = a;
      }
      if (!artifact_) {
        FinishOnce(
            ToGrpc(errors::NotFound("artifact", absl::StrCat(req_.run_id(), "/", req_.name()))));
        return;
      }
      run_ = std::move(*run);
    }
    absl::StatusOr<std::string> data =
        deps_.runs->ReadArtifact(*run_, req_.name(), offset_, core::kTransferChunkBytes);
    if (!data.ok()) {
      FinishOnce(ToGrpc(data.status()));
      return;
    }
    chunk_.Clear();
    chunk_.set_offset(offset_);
    chunk_.set_total_size(artifact_->size_bytes());
    offset_ += data->size();
    chunk_.set_data(std::move(*data));
    last_ = offset_ >= artifact_->size_bytes();
    if (last_) chunk_.set_sha256(artifact_->sha256());
    StartWrite(&chunk_);
  }

  const ServiceDeps deps_;
  const core::Caller caller_;
  const v1::DownloadArtifactRequest req_;
  // Touched only by the one task or reaction in flight at a time.
  std::optional<v1::Artifact> artifact_;
  std::optional<v1::Run> run_;  // as Get gave it to the caller: who may read it is checked
  uint64_t offset_ = 0;
  bool last_ = false;
  v1::ArtifactChunk chunk_;
};

// What each forwarded unary RPC names, and its call on the owner's stub.
template <typename Req, typename Resp>
using ForwardTo = UnaryForward<Req, Resp>;
using Async = v1::Sandgate::Stub::async_interface;
using Done = std::function<void(grpc::Status)>;
const ForwardTo<v1::RunAnalysisRequest, v1::Run> kForwardRunAnalysis{
    false, &SessionOf<v1::RunAnalysisRequest>,  // a run in a kept session runs in its sandbox
    [](Async* a, grpc::ClientContext* c, const v1::RunAnalysisRequest* q, v1::Run* r, Done d) {
      a->RunAnalysis(c, q, r, std::move(d));
    }};
const ForwardTo<v1::CancelRunRequest, v1::Run> kForwardCancelRun{
    true, &RunOf<v1::CancelRunRequest>,
    [](Async* a, grpc::ClientContext* c, const v1::CancelRunRequest* q, v1::Run* r, Done d) {
      a->CancelRun(c, q, r, std::move(d));
    },
    &RunMayHaveMoved};
const ForwardTo<v1::KeepAliveRequest, v1::Session> kForwardKeepAlive{
    false, &SessionOf<v1::KeepAliveRequest>,
    [](Async* a, grpc::ClientContext* c, const v1::KeepAliveRequest* q, v1::Session* r, Done d) {
      a->KeepAlive(c, q, r, std::move(d));
    }};
const ForwardTo<v1::CloseSessionRequest, v1::Session> kForwardCloseSession{
    false, &SessionOf<v1::CloseSessionRequest>,
    [](Async* a, grpc::ClientContext* c, const v1::CloseSessionRequest* q, v1::Session* r, Done d) {
      a->CloseSession(c, q, r, std::move(d));
    }};
const ForwardTo<v1::ListFilesRequest, v1::ListFilesResponse> kForwardListFiles{
    false, &SessionOf<v1::ListFilesRequest>,
    [](Async* a, grpc::ClientContext* c, const v1::ListFilesRequest* q, v1::ListFilesResponse* r,
       Done d) { a->ListFiles(c, q, r, std::move(d)); }};

const ForwardTo<v1::StartProcessRequest, v1::Process> kForwardStartProcess{
    false, &SessionOf<v1::StartProcessRequest>,
    [](Async* a, grpc::ClientContext* c, const v1::StartProcessRequest* q, v1::Process* r, Done d) {
      a->StartProcess(c, q, r, std::move(d));
    }};
const ForwardTo<v1::ReadProcessOutputRequest, v1::ProcessOutput> kForwardReadProcessOutput{
    false, &SessionOf<v1::ReadProcessOutputRequest>,
    [](Async* a, grpc::ClientContext* c, const v1::ReadProcessOutputRequest* q,
       v1::ProcessOutput* r, Done d) { a->ReadProcessOutput(c, q, r, std::move(d)); }};
const ForwardTo<v1::WriteProcessInputRequest, v1::WriteProcessInputResponse>
    kForwardWriteProcessInput{
        false, &SessionOf<v1::WriteProcessInputRequest>,
        [](Async* a, grpc::ClientContext* c, const v1::WriteProcessInputRequest* q,
           v1::WriteProcessInputResponse* r,
           Done d) { a->WriteProcessInput(c, q, r, std::move(d)); }};
const ForwardTo<v1::ListProcessesRequest, v1::ListProcessesResponse> kForwardListProcesses{
    false, &SessionOf<v1::ListProcessesRequest>,
    [](Async* a, grpc::ClientContext* c, const v1::ListProcessesRequest* q,
       v1::ListProcessesResponse* r, Done d) { a->ListProcesses(c, q, r, std::move(d)); }};

const ForwardTo<v1::GetSessionUsageRequest, v1::SessionUsage> kForwardGetSessionUsage{
    false, &SessionOf<v1::GetSessionUsageRequest>,
    [](Async* a, grpc::ClientContext* c, const v1::GetSessionUsageRequest* q, v1::SessionUsage* r,
       Done d) { a->GetSessionUsage(c, q, r, std::move(d)); }};
const ForwardTo<v1::StatFileRequest, v1::FileInfo> kForwardStatFile{
    false, &SessionOf<v1::StatFileRequest>,
    [](Async* a, grpc::ClientContext* c, const v1::StatFileRequest* q, v1::FileInfo* r, Done d) {
      a->StatFile(c, q, r, std::move(d));
    }};
const ForwardTo<v1::DeleteFileRequest, v1::DeleteFileResponse> kForwardDeleteFile{
    false, &SessionOf<v1::DeleteFileRequest>,
    [](Async* a, grpc::ClientContext* c, const v1::DeleteFileRequest* q, v1::DeleteFileResponse* r,
       Done d) { a->DeleteFile(c, q, r, std::move(d)); }};
const ForwardTo<v1::RenameFileRequest, v1::FileInfo> kForwardRenameFile{
    false, &SessionOf<v1::RenameFileRequest>,
    [](Async* a, grpc::ClientContext* c, const v1::RenameFileRequest* q, v1::FileInfo* r, Done d) {
      a->RenameFile(c, q, r, std::move(d));
    }};
const ForwardTo<v1::MakeDirectoryRequest, v1::FileInfo> kForwardMakeDirectory{
    false, &SessionOf<v1::MakeDirectoryRequest>,
    [](Async* a, grpc::ClientContext* c, const v1::MakeDirectoryRequest* q, v1::FileInfo* r,
       Done d) { a->MakeDirectory(c, q, r, std::move(d)); }};

const ForwardTo<v1::ExposePortRequest, v1::ExposedPort> kForwardExposePort{
    false, &SessionOf<v1::ExposePortRequest>,
    [](Async* a, grpc::ClientContext* c, const v1::ExposePortRequest* q, v1::ExposedPort* r,
       Done d) { a->ExposePort(c, q, r, std::move(d)); }};
const ForwardTo<v1::UnexposePortRequest, v1::UnexposePortResponse> kForwardUnexposePort{
    false, &SessionOf<v1::UnexposePortRequest>,
    [](Async* a, grpc::ClientContext* c, const v1::UnexposePortRequest* q,
       v1::UnexposePortResponse* r, Done d) { a->UnexposePort(c, q, r, std::move(d)); }};
const ForwardTo<v1::ListPortsRequest, v1::ListPortsResponse> kForwardListPorts{
    false, &SessionOf<v1::ListPortsRequest>,
    [](Async* a, grpc::ClientContext* c, const v1::ListPortsRequest* q, v1::ListPortsResponse* r,
       Done d) { a->ListPorts(c, q, r, std::move(d)); }};

// What a port call acted on: "session/port".
template <typename Req, typename Resp>
std::string SessionPortOf(const Req& q, const Resp&) {
  return absl::StrCat(q.session_id(), "/", q.port());
}

// A snapshot is taken where the session's sandbox is.
const ForwardTo<v1::SnapshotSessionRequest, v1::Snapshot> kForwardSnapshotSession{
    false, &SessionOf<v1::SnapshotSessionRequest>,
    [](Async* a, grpc::ClientContext* c, const v1::SnapshotSessionRequest* q, v1::Snapshot* r,
       Done d) { a->SnapshotSession(c, q, r, std::move(d)); }};

// What a file call acted on: "session/path".
template <typename Req, typename Resp>
std::string SessionPathOf(const Req& q, const Resp&) {
  return absl::StrCat(q.session_id(), "/", q.path());
}

}  // namespace

grpc::ServerUnaryReactor* SandgateService::RunAnalysis(grpc::CallbackServerContext* ctx,
                                                       const v1::RunAnalysisRequest* request,
                                                       v1::Run* response) {
  return Unary(deps_, ctx, &core::Api::RunAnalysis, request, response, {"RunAnalysis", &CreatedId},
               kForwardRunAnalysis);
}

grpc::ServerUnaryReactor* SandgateService::GetRun(grpc::CallbackServerContext* ctx,
                                                  const v1::GetRunRequest* request,
                                                  v1::Run* response) {
  return Unary(deps_, ctx, &core::Api::GetRun, request, response);
}

grpc::ServerUnaryReactor* SandgateService::ListRuns(grpc::CallbackServerContext* ctx,
                                                    const v1::ListRunsRequest* request,
                                                    v1::ListRunsResponse* response) {
  return Unary(deps_, ctx, &core::Api::ListRuns, request, response);
}

grpc::ServerUnaryReactor* SandgateService::CancelRun(grpc::CallbackServerContext* ctx,
                                                     const v1::CancelRunRequest* request,
                                                     v1::Run* response) {
  return Unary(deps_, ctx, &core::Api::CancelRun, request, response, {"CancelRun", &RunIdOf},
               kForwardCancelRun);
}

grpc::ServerWriteReactor<v1::Event>* SandgateService::StreamEvents(
    grpc::CallbackServerContext* ctx, const v1::StreamEventsRequest* request) {
  if (request->run_id().empty() || request->after_seq() < 0) {
    return new FailedWriter<v1::Event>(errors::InvalidArgument(
        request->run_id().empty() ? "run_id: required" : "after_seq: must not be negative"));
  }
  return StartStream<EventStream, v1::StreamEventsRequest, v1::Event>(deps_, ctx, *request);
}

grpc::ServerWriteReactor<v1::ArtifactChunk>* SandgateService::DownloadArtifact(
    grpc::CallbackServerContext* ctx, const v1::DownloadArtifactRequest* request) {
  return StartStream<ArtifactStream, v1::DownloadArtifactRequest, v1::ArtifactChunk>(deps_, ctx,
                                                                                     *request);
}

grpc::ServerUnaryReactor* SandgateService::CreateSession(grpc::CallbackServerContext* ctx,
                                                         const v1::CreateSessionRequest* request,
                                                         v1::Session* response) {
  return Unary(deps_, ctx, &core::Api::CreateSession, request, response,
               {"CreateSession", &CreatedId});
}

grpc::ServerUnaryReactor* SandgateService::GetSession(grpc::CallbackServerContext* ctx,
                                                      const v1::GetSessionRequest* request,
                                                      v1::Session* response) {
  return Unary(deps_, ctx, &core::Api::GetSession, request, response);
}

grpc::ServerUnaryReactor* SandgateService::ListSessions(grpc::CallbackServerContext* ctx,
                                                        const v1::ListSessionsRequest* request,
                                                        v1::ListSessionsResponse* response) {
  return Unary(deps_, ctx, &core::Api::ListSessions, request, response);
}

grpc::ServerUnaryReactor* SandgateService::KeepAlive(grpc::CallbackServerContext* ctx,
                                                     const v1::KeepAliveRequest* request,
                                                     v1::Session* response) {
  return Unary(deps_, ctx, &core::Api::KeepAlive, request, response, {"KeepAlive", &SessionIdOf},
               kForwardKeepAlive);
}

grpc::ServerUnaryReactor* SandgateService::CloseSession(grpc::CallbackServerContext* ctx,
                                                        const v1::CloseSessionRequest* request,
                                                        v1::Session* response) {
  return Unary(deps_, ctx, &core::Api::CloseSession, request, response,
               {"CloseSession", &SessionIdOf}, kForwardCloseSession);
}

grpc::ServerUnaryReactor* SandgateService::ListFiles(grpc::CallbackServerContext* ctx,
                                                     const v1::ListFilesRequest* request,
                                                     v1::ListFilesResponse* response) {
  return Unary(deps_, ctx, &core::Api::ListFiles, request, response, {}, kForwardListFiles);
}

grpc::ServerWriteReactor<v1::ExecResponse>* SandgateService::Exec(grpc::CallbackServerContext* ctx,
                                                                  const v1::ExecRequest* request) {
  return NewExecStream(deps_, ctx, *request);
}

grpc::ServerReadReactor<grpc::ByteBuffer>* SandgateService::UploadFile(
    grpc::CallbackServerContext* ctx, grpc::ByteBuffer* response) {
  return NewFileUpload(deps_, ctx, response);
}

grpc::ServerWriteReactor<v1::FileChunk>* SandgateService::DownloadFile(
    grpc::CallbackServerContext* ctx, const v1::DownloadFileRequest* request) {
  return NewFileDownload(deps_, ctx, *request);
}

grpc::ServerUnaryReactor* SandgateService::Drain(grpc::CallbackServerContext* ctx,
                                                 const v1::DrainRequest* request,
                                                 v1::DrainResponse* response) {
  return Unary(deps_, ctx, &core::Api::Drain, request, response,
               {"Drain", [](const v1::DrainRequest&, const v1::DrainResponse&) {
                  return std::string("daemon");
                }});
}

grpc::ServerUnaryReactor* SandgateService::Purge(grpc::CallbackServerContext* ctx,
                                                 const v1::PurgeRequest* request,
                                                 v1::PurgeResponse* response) {
  return Unary(deps_, ctx, &core::Api::Purge, request, response,
               {"Purge", [](const v1::PurgeRequest& req, const v1::PurgeResponse&) {
                  return absl::StrCat("older_than ", req.older_than().seconds(), "s");
                }});
}

grpc::ServerUnaryReactor* SandgateService::ListResources(grpc::CallbackServerContext* ctx,
                                                         const v1::ListResourcesRequest* request,
                                                         v1::ListResourcesResponse* response) {
  return Unary(deps_, ctx, &core::Api::ListResources, request, response);
}

grpc::ServerUnaryReactor* SandgateService::StartProcess(grpc::CallbackServerContext* ctx,
                                                        const v1::StartProcessRequest* request,
                                                        v1::Process* response) {
  return Unary(deps_, ctx, &core::Api::StartProcess, request, response,
               {"StartProcess", [](const v1::StartProcessRequest& q,
                                   const v1::Process& p) { return q.session_id() + "/" + p.id(); }},
               kForwardStartProcess);
}

grpc::ServerUnaryReactor* SandgateService::ReadProcessOutput(
    grpc::CallbackServerContext* ctx, const v1::ReadProcessOutputRequest* request,
    v1::ProcessOutput* response) {
  return Unary(deps_, ctx, &core::Api::ReadProcessOutput, request, response, {},
               kForwardReadProcessOutput, Lane::kWaits);
}

grpc::ServerUnaryReactor* SandgateService::WriteProcessInput(
    grpc::CallbackServerContext* ctx, const v1::WriteProcessInputRequest* request,
    v1::WriteProcessInputResponse* response) {
  // Input waits (up to core::ProcessManager::kInputWait) for a process that does not read.
  return Unary(deps_, ctx, &core::Api::WriteProcessInput, request, response, {},
               kForwardWriteProcessInput, Lane::kWaits);
}

grpc::ServerUnaryReactor* SandgateService::ListProcesses(grpc::CallbackServerContext* ctx,
                                                         const v1::ListProcessesRequest* request,
                                                         v1::ListProcessesResponse* response) {
  return Unary(deps_, ctx, &core::Api::ListProcesses, request, response, {}, kForwardListProcesses);
}

grpc::ServerUnaryReactor* SandgateService::GetSessionUsage(
    grpc::CallbackServerContext* ctx, const v1::GetSessionUsageRequest* request,
    v1::SessionUsage* response) {
  return Unary(deps_, ctx, &core::Api::GetSessionUsage, request, response, {},
               kForwardGetSessionUsage);
}

grpc::ServerUnaryReactor* SandgateService::StatFile(grpc::CallbackServerContext* ctx,
                                                    const v1::StatFileRequest* request,
                                                    v1::FileInfo* response) {
  return Unary(deps_, ctx, &core::Api::StatFile, request, response, {}, kForwardStatFile);
}

grpc::ServerUnaryReactor* SandgateService::DeleteFile(grpc::CallbackServerContext* ctx,
                                                      const v1::DeleteFileRequest* request,
                                                      v1::DeleteFileResponse* response) {
  return Unary(deps_, ctx, &core::Api::DeleteFile, request, response,
               {"DeleteFile", &SessionPathOf<v1::DeleteFileRequest, v1::DeleteFileResponse>},
               kForwardDeleteFile);
}

grpc::ServerUnaryReactor* SandgateService::RenameFile(grpc::CallbackServerContext* ctx,
                                                      const v1::RenameFileRequest* request,
                                                      v1::FileInfo* response) {
  return Unary(deps_, ctx, &core::Api::RenameFile, request, response,
               {"RenameFile",
                [](const v1::RenameFileRequest& q, const v1::FileInfo&) {
                  return absl::StrCat(q.session_id(), "/", q.from(), " -> ", q.to());
                }},
               kForwardRenameFile);
}

grpc::ServerUnaryReactor* SandgateService::MakeDirectory(grpc::CallbackServerContext* ctx,
                                                         const v1::MakeDirectoryRequest* request,
                                                         v1::FileInfo* response) {
  return Unary(deps_, ctx, &core::Api::MakeDirectory, request, response,
               {"MakeDirectory", &SessionPathOf<v1::MakeDirectoryRequest, v1::FileInfo>},
               kForwardMakeDirectory);
}

grpc::ServerUnaryReactor* SandgateService::ExposePort(grpc::CallbackServerContext* ctx,
                                                      const v1::ExposePortRequest* request,
                                                      v1::ExposedPort* response) {
  return Unary(deps_, ctx, &core::Api::ExposePort, request, response,
               {"ExposePort", &SessionPortOf<v1::ExposePortRequest, v1::ExposedPort>},
               kForwardExposePort);
}

grpc::ServerUnaryReactor* SandgateService::UnexposePort(grpc::CallbackServerContext* ctx,
                                                        const v1::UnexposePortRequest* request,
                                                        v1::UnexposePortResponse* response) {
  return Unary(deps_, ctx, &core::Api::UnexposePort, request, response,
               {"UnexposePort", &SessionPortOf<v1::UnexposePortRequest, v1::UnexposePortResponse>},
               kForwardUnexposePort);
}

grpc::ServerUnaryReactor* SandgateService::ListPorts(grpc::CallbackServerContext* ctx,
                                                     const v1::ListPortsRequest* request,
                                                     v1::ListPortsResponse* response) {
  return Unary(deps_, ctx, &core::Api::ListPorts, request, response, {}, kForwardListPorts);
}

// Snapshots (core/snapshots.h). Taking one runs tar in the sandbox for as long as the
// workspace needs: on Exec's executor, not the I/O threads.
grpc::ServerUnaryReactor* SandgateService::SnapshotSession(
    grpc::CallbackServerContext* ctx, const v1::SnapshotSessionRequest* request,
    v1::Snapshot* response) {
  return Unary(deps_, ctx, &core::Api::SnapshotSession, request, response,
               {"SnapshotSession",
                [](const v1::SnapshotSessionRequest& q, const v1::Snapshot& s) {
                  return absl::StrCat(q.session_id(), " -> ", s.id());
                }},
               kForwardSnapshotSession, Lane::kWaits);
}

grpc::ServerUnaryReactor* SandgateService::GetSnapshot(grpc::CallbackServerContext* ctx,
                                                       const v1::GetSnapshotRequest* request,
                                                       v1::Snapshot* response) {
  return Unary(deps_, ctx, &core::Api::GetSnapshot, request, response);
}

grpc::ServerUnaryReactor* SandgateService::ListSnapshots(grpc::CallbackServerContext* ctx,
                                                         const v1::ListSnapshotsRequest* request,
                                                         v1::ListSnapshotsResponse* response) {
  return Unary(deps_, ctx, &core::Api::ListSnapshots, request, response);
}

grpc::ServerUnaryReactor* SandgateService::DeleteSnapshot(grpc::CallbackServerContext* ctx,
                                                          const v1::DeleteSnapshotRequest* request,
                                                          v1::DeleteSnapshotResponse* response) {
  return Unary(
      deps_, ctx, &core::Api::DeleteSnapshot, request, response,
      {"DeleteSnapshot", [](const v1::DeleteSnapshotRequest& q, const v1::DeleteSnapshotResponse&) {
         return q.snapshot_id();
       }});
}

}  // namespace sandgate::server
