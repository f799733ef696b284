#include "server/service.h"

#include <deque>
#include <memory>
#include <optional>
#include <utility>

#include "common/events.h"
#include "server/edge_streams.h"
#include "server/edge_unary.h"
#include "server/grpc_unary.h"
#include "server/reactor.h"
#include "server/session_streams.h"
#include "server/status.h"
#include "server/unary_rpcs.h"
#include "server/utf8_fields.h"

namespace sandgate::server {
namespace {

// StreamEvents: the gRPC sink of an EventFollower (edge_streams.h). One write in flight at a
// time; the follower is pulled when the last batch was written. Each Pull holds a reference
// to this reactor until the follower answered it (it always does, also after Close).
class EventStream final : public PullWriter<v1::Event> {
 public:
  EventStream(const ServiceDeps& deps, core::Caller caller, v1::StreamEventsRequest req)
      : run_id_(req.run_id()),
        follower_(std::make_shared<EventFollower>(deps, std::move(caller), std::move(req))) {
    Schedule(deps.io, [this] { Open(); });
  }

  void OnWriteDone(bool ok) override {
    if (!ok) {
      FinishOnce(grpc::Status(grpc::StatusCode::CANCELLED, "stream broken"));
      return;
    }
    WriteOrPull();
  }
  // The stream is over: the session it followed may idle from now on.
  void OnDone() override {
    follower_->Close();
    PullWriter::OnDone();
  }
  // A write in flight ends in OnWriteDone(false); a pending Pull is answered end(CANCELLED).
  void OnCancel() override { follower_->Close(); }

 private:
  void Open() {
    absl::StatusOr<bool> open =
        follower_->Open(EventFollower::Sink{[this](std::vector<v1::Event> batch) {
                                              for (v1::Event& e : batch)
                                                buffer_.push_back(std::move(e));
                                              WriteOrPull();
                                              Release();
                                            },
                                            [this] {
                                              buffer_.push_back(events::Heartbeat());
                                              buffer_.back().set_run_id(run_id_);
                                              WriteOrPull();
                                              Release();
                                            },
                                            [this](const absl::Status& st) {
                                              FinishOnce(ToGrpc(st));
                                              Release();
                                            }});
    if (!open.ok()) return FinishOnce(ToGrpc(open.status()));
    if (!*open) return FinishOnce(grpc::Status::OK);  // at or past the log's end
    WriteOrPull();
  }
  // Called with no write in flight and no Pull pending (one actor at a time touches buffer_).
  void WriteOrPull() {
    if (finished()) return;
    if (buffer_.empty()) {
      Acquire();
      follower_->Pull();
      return;
    }
    current_ = std::move(buffer_.front());
    buffer_.pop_front();
    StartWrite(&current_);
  }

  const std::string run_id_;
  const std::shared_ptr<EventFollower> follower_;
  std::deque<v1::Event> buffer_;
  v1::Event current_;  // the write in flight
};

// DownloadArtifact: the gRPC sink of an ArtifactSource, one chunk read on the executor per
// write.
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
    if (source_->done()) {
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
    if (!source_) {
      absl::StatusOr<ArtifactSource> source = ArtifactSource::Open(deps_, caller_, req_);
      if (!source.ok()) return FinishOnce(ToGrpc(source.status()));
      source_.emplace(*std::move(source));
    }
    absl::StatusOr<v1::ArtifactChunk> chunk = source_->Next();
    if (!chunk.ok()) return FinishOnce(ToGrpc(chunk.status()));
    chunk_ = *std::move(chunk);
    StartWrite(&chunk_);
  }

  const ServiceDeps deps_;
  const core::Caller caller_;
  const v1::DownloadArtifactRequest req_;
  // Touched only by the one task or reaction in flight at a time.
  std::optional<ArtifactSource> source_;
  v1::ArtifactChunk chunk_;
};

}  // namespace

grpc::ServerUnaryReactor* SandgateService::RunAnalysis(grpc::CallbackServerContext* ctx,
                                                       const v1::RunAnalysisRequest* request,
                                                       v1::Run* response) {
  return GrpcUnary(deps_, ctx, rpcs::kRunAnalysis, request, response);
}

grpc::ServerUnaryReactor* SandgateService::GetRun(grpc::CallbackServerContext* ctx,
                                                  const v1::GetRunRequest* request,
                                                  v1::Run* response) {
  return GrpcUnary(deps_, ctx, rpcs::kGetRun, request, response);
}

grpc::ServerUnaryReactor* SandgateService::ListRuns(grpc::CallbackServerContext* ctx,
                                                    const v1::ListRunsRequest* request,
                                                    v1::ListRunsResponse* response) {
  return GrpcUnary(deps_, ctx, rpcs::kListRuns, request, response);
}

grpc::ServerUnaryReactor* SandgateService::CancelRun(grpc::CallbackServerContext* ctx,
                                                     const v1::CancelRunRequest* request,
                                                     v1::Run* response) {
  return GrpcUnary(deps_, ctx, rpcs::kCancelRun, request, response);
}

grpc::ServerWriteReactor<v1::Event>* SandgateService::StreamEvents(
    grpc::CallbackServerContext* ctx, const v1::StreamEventsRequest* request) {
  if (absl::Status valid = EventFollower::Check(*request); !valid.ok()) {
    return new FailedWriter<v1::Event>(valid);
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
  return GrpcUnary(deps_, ctx, rpcs::kCreateSession, request, response);
}

grpc::ServerUnaryReactor* SandgateService::GetSession(grpc::CallbackServerContext* ctx,
                                                      const v1::GetSessionRequest* request,
                                                      v1::Session* response) {
  return GrpcUnary(deps_, ctx, rpcs::kGetSession, request, response);
}

grpc::ServerUnaryReactor* SandgateService::ListSessions(grpc::CallbackServerContext* ctx,
                                                        const v1::ListSessionsRequest* request,
                                                        v1::ListSessionsResponse* response) {
  return GrpcUnary(deps_, ctx, rpcs::kListSessions, request, response);
}

grpc::ServerUnaryReactor* SandgateService::KeepAlive(grpc::CallbackServerContext* ctx,
                                                     const v1::KeepAliveRequest* request,
                                                     v1::Session* response) {
  return GrpcUnary(deps_, ctx, rpcs::kKeepAlive, request, response);
}

grpc::ServerUnaryReactor* SandgateService::CloseSession(grpc::CallbackServerContext* ctx,
                                                        const v1::CloseSessionRequest* request,
                                                        v1::Session* response) {
  return GrpcUnary(deps_, ctx, rpcs::kCloseSession, request, response);
}

grpc::ServerUnaryReactor* SandgateService::ListFiles(grpc::CallbackServerContext* ctx,
                                                     const v1::ListFilesRequest* request,
                                                     v1::ListFilesResponse* response) {
  return GrpcUnary(deps_, ctx, rpcs::kListFiles, request, response);
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
  return GrpcUnary(deps_, ctx, rpcs::kDrain, request, response);
}

grpc::ServerUnaryReactor* SandgateService::Purge(grpc::CallbackServerContext* ctx,
                                                 const v1::PurgeRequest* request,
                                                 v1::PurgeResponse* response) {
  return GrpcUnary(deps_, ctx, rpcs::kPurge, request, response);
}

grpc::ServerUnaryReactor* SandgateService::ListResources(grpc::CallbackServerContext* ctx,
                                                         const v1::ListResourcesRequest* request,
                                                         v1::ListResourcesResponse* response) {
  return GrpcUnary(deps_, ctx, rpcs::kListResources, request, response);
}

grpc::ServerUnaryReactor* SandgateService::StartProcess(grpc::CallbackServerContext* ctx,
                                                        const v1::StartProcessRequest* request,
                                                        v1::Process* response) {
  return GrpcUnary(deps_, ctx, rpcs::kStartProcess, request, response);
}

grpc::ServerUnaryReactor* SandgateService::ReadProcessOutput(
    grpc::CallbackServerContext* ctx, const v1::ReadProcessOutputRequest* request,
    v1::ProcessOutput* response) {
  return GrpcUnary(deps_, ctx, rpcs::kReadProcessOutput, request, response);
}

grpc::ServerUnaryReactor* SandgateService::WriteProcessInput(
    grpc::CallbackServerContext* ctx, const v1::WriteProcessInputRequest* request,
    v1::WriteProcessInputResponse* response) {
  return GrpcUnary(deps_, ctx, rpcs::kWriteProcessInput, request, response);
}

grpc::ServerUnaryReactor* SandgateService::ListProcesses(grpc::CallbackServerContext* ctx,
                                                         const v1::ListProcessesRequest* request,
                                                         v1::ListProcessesResponse* response) {
  return GrpcUnary(deps_, ctx, rpcs::kListProcesses, request, response);
}

grpc::ServerUnaryReactor* SandgateService::GetSessionUsage(
    grpc::CallbackServerContext* ctx, const v1::GetSessionUsageRequest* request,
    v1::SessionUsage* response) {
  return GrpcUnary(deps_, ctx, rpcs::kGetSessionUsage, request, response);
}

grpc::ServerUnaryReactor* SandgateService::StatFile(grpc::CallbackServerContext* ctx,
                                                    const v1::StatFileRequest* request,
                                                    v1::FileInfo* response) {
  return GrpcUnary(deps_, ctx, rpcs::kStatFile, request, response);
}

grpc::ServerUnaryReactor* SandgateService::DeleteFile(grpc::CallbackServerContext* ctx,
                                                      const v1::DeleteFileRequest* request,
                                                      v1::DeleteFileResponse* response) {
  return GrpcUnary(deps_, ctx, rpcs::kDeleteFile, request, response);
}

grpc::ServerUnaryReactor* SandgateService::RenameFile(grpc::CallbackServerContext* ctx,
                                                      const v1::RenameFileRequest* request,
                                                      v1::FileInfo* response) {
  return GrpcUnary(deps_, ctx, rpcs::kRenameFile, request, response);
}

grpc::ServerUnaryReactor* SandgateService::MakeDirectory(grpc::CallbackServerContext* ctx,
                                                         const v1::MakeDirectoryRequest* request,
                                                         v1::FileInfo* response) {
  return GrpcUnary(deps_, ctx, rpcs::kMakeDirectory, request, response);
}

grpc::ServerUnaryReactor* SandgateService::ExposePort(grpc::CallbackServerContext* ctx,
                                                      const v1::ExposePortRequest* request,
                                                      v1::ExposedPort* response) {
  return GrpcUnary(deps_, ctx, rpcs::kExposePort, request, response);
}

grpc::ServerUnaryReactor* SandgateService::UnexposePort(grpc::CallbackServerContext* ctx,
                                                        const v1::UnexposePortRequest* request,
                                                        v1::UnexposePortResponse* response) {
  return GrpcUnary(deps_, ctx, rpcs::kUnexposePort, request, response);
}

grpc::ServerUnaryReactor* SandgateService::ListPorts(grpc::CallbackServerContext* ctx,
                                                     const v1::ListPortsRequest* request,
                                                     v1::ListPortsResponse* response) {
  return GrpcUnary(deps_, ctx, rpcs::kListPorts, request, response);
}

grpc::ServerUnaryReactor* SandgateService::SnapshotSession(
    grpc::CallbackServerContext* ctx, const v1::SnapshotSessionRequest* request,
    v1::Snapshot* response) {
  return GrpcUnary(deps_, ctx, rpcs::kSnapshotSession, request, response);
}

grpc::ServerUnaryReactor* SandgateService::GetSnapshot(grpc::CallbackServerContext* ctx,
                                                       const v1::GetSnapshotRequest* request,
                                                       v1::Snapshot* response) {
  return GrpcUnary(deps_, ctx, rpcs::kGetSnapshot, request, response);
}

grpc::ServerUnaryReactor* SandgateService::ListSnapshots(grpc::CallbackServerContext* ctx,
                                                         const v1::ListSnapshotsRequest* request,
                                                         v1::ListSnapshotsResponse* response) {
  return GrpcUnary(deps_, ctx, rpcs::kListSnapshots, request, response);
}

grpc::ServerUnaryReactor* SandgateService::DeleteSnapshot(grpc::CallbackServerContext* ctx,
                                                          const v1::DeleteSnapshotRequest* request,
                                                          v1::DeleteSnapshotResponse* response) {
  return GrpcUnary(deps_, ctx, rpcs::kDeleteSnapshot, request, response);
}

}  // namespace sandgate::server
