// SandgateService: the gRPC edge. Thin on purpose: each unary RPC authenticates, calls its
// plain function in core::Api on the I/O executor and maps the status; each stream is a
// reactor that adapts a core/ unit (the event log, core/exec_stream.h, core/file_transfer.h).
// Streams use the callback API with reactors that pull the next item when the previous write
// is done, so no stream pins a thread and no reaction blocks.
//
// Thread safe. The service and everything it points to must outlive the grpc::Server.
#ifndef SANDGATE_SERVER_SERVICE_H_
#define SANDGATE_SERVER_SERVICE_H_

#include "common/clock.h"
#include "core/api.h"
#include "core/audit.h"
#include "core/event_log.h"
#include "core/executor.h"
#include "core/fair_executor.h"
#include "core/image_api.h"
#include "core/run_manager.h"
#include "core/session_manager.h"
#include "core/tenants.h"
#include "sandgate/v1/sandgate.grpc.pb.h"

namespace sandgate::server {

class Forwarder;  // server/forwarding.h

struct ServiceDeps {
  core::Api* api = nullptr;          // all not owned; outlive the service
  core::ImageApi* images = nullptr;  // the Images service's calls; null: no image routes
  const core::Tenants* tenants = nullptr;
  core::RunManager* runs = nullptr;
  core::EventLog* events = nullptr;
  core::SessionManager* sessions = nullptr;
  core::AuditLog* audit = nullptr;  // may be null
  core::Executor* io = nullptr;     // short blocking work of RPCs (SQLite, files, sandbox create)
  // Commands of Exec, each holding a thread while it runs, shared fairly by the tenants.
  core::FairExecutor* exec = nullptr;
  Clock* clock = Clock::Real();  // the waits of Exec's backpressure
  absl::Duration heartbeat_interval = absl::Seconds(15);
  // Sends calls on another replica's runs and sessions to their owner; null: all served here.
  Forwarder* forwarder = nullptr;
};

// UploadFile is registered raw (ByteBuffer messages) so that it can tell a message that does
// not parse from the end of the stream (see FileUpload in session_streams.cc).
class SandgateService final
    : public v1::Sandgate::WithRawCallbackMethod_UploadFile<v1::Sandgate::CallbackService> {
 public:
  explicit SandgateService(ServiceDeps deps) : deps_(deps) {}

  grpc::ServerUnaryReactor* RunAnalysis(grpc::CallbackServerContext* ctx,
                                        const v1::RunAnalysisRequest* request,
                                        v1::Run* response) override;
  grpc::ServerUnaryReactor* GetRun(grpc::CallbackServerContext* ctx,
                                   const v1::GetRunRequest* request, v1::Run* response) override;
  grpc::ServerUnaryReactor* ListRuns(grpc::CallbackServerContext* ctx,
                                     const v1::ListRunsRequest* request,
                                     v1::ListRunsResponse* response) override;
  grpc::ServerUnaryReactor* CancelRun(grpc::CallbackServerContext* ctx,
                                      const v1::CancelRunRequest* request,
                                      v1::Run* response) override;
  grpc::ServerWriteReactor<v1::Event>* StreamEvents(
      grpc::CallbackServerContext* ctx, const v1::StreamEventsRequest* request) override;
  grpc::ServerWriteReactor<v1::ArtifactChunk>* DownloadArtifact(
      grpc::CallbackServerContext* ctx, const v1::DownloadArtifactRequest* request) override;

  grpc::ServerUnaryReactor* CreateSession(grpc::CallbackServerContext* ctx,
                                          const v1::CreateSessionRequest* request,
                                          v1::Session* response) override;
  grpc::ServerUnaryReactor* GetSession(grpc::CallbackServerContext* ctx,
                                       const v1::GetSessionRequest* request,
                                       v1::Session* response) override;
  grpc::ServerUnaryReactor* ListSessions(grpc::CallbackServerContext* ctx,
                                         const v1::ListSessionsRequest* request,
                                         v1::ListSessionsResponse* response) override;
  grpc::ServerUnaryReactor* KeepAlive(grpc::CallbackServerContext* ctx,
                                      const v1::KeepAliveRequest* request,
                                      v1::Session* response) override;
  grpc::ServerUnaryReactor* CloseSession(grpc::CallbackServerContext* ctx,
                                         const v1::CloseSessionRequest* request,
                                         v1::Session* response) override;
  grpc::ServerUnaryReactor* ListFiles(grpc::CallbackServerContext* ctx,
                                      const v1::ListFilesRequest* request,
                                      v1::ListFilesResponse* response) override;
  grpc::ServerWriteReactor<v1::ExecResponse>* Exec(grpc::CallbackServerContext* ctx,
                                                   const v1::ExecRequest* request) override;
  grpc::ServerReadReactor<grpc::ByteBuffer>* UploadFile(grpc::CallbackServerContext* ctx,
                                                        grpc::ByteBuffer* response) override;
  grpc::ServerWriteReactor<v1::FileChunk>* DownloadFile(
      grpc::CallbackServerContext* ctx, const v1::DownloadFileRequest* request) override;
  grpc::ServerUnaryReactor* Drain(grpc::CallbackServerContext* ctx, const v1::DrainRequest* request,
                                  v1::DrainResponse* response) override;
  grpc::ServerUnaryReactor* Purge(grpc::CallbackServerContext* ctx, const v1::PurgeRequest* request,
                                  v1::PurgeResponse* response) override;
  grpc::ServerUnaryReactor* StartProcess(grpc::CallbackServerContext* ctx,
                                         const v1::StartProcessRequest* request,
                                         v1::Process* response) override;
  grpc::ServerUnaryReactor* ReadProcessOutput(grpc::CallbackServerContext* ctx,
                                              const v1::ReadProcessOutputRequest* request,
                                              v1::ProcessOutput* response) override;
  grpc::ServerUnaryReactor* WriteProcessInput(grpc::CallbackServerContext* ctx,
                                              const v1::WriteProcessInputRequest* request,
                                              v1::WriteProcessInputResponse* response) override;
  grpc::ServerUnaryReactor* ListProcesses(grpc::CallbackServerContext* ctx,
                                          const v1::ListProcessesRequest* request,
                                          v1::ListProcessesResponse* response) override;
  grpc::ServerUnaryReactor* GetSessionUsage(grpc::CallbackServerContext* ctx,
                                            const v1::GetSessionUsageRequest* request,
                                            v1::SessionUsage* response) override;
  grpc::ServerUnaryReactor* ExposePort(grpc::CallbackServerContext* ctx,
                                       const v1::ExposePortRequest* request,
                                       v1::ExposedPort* response) override;
  grpc::ServerUnaryReactor* UnexposePort(grpc::CallbackServerContext* ctx,
                                         const v1::UnexposePortRequest* request,
                                         v1::UnexposePortResponse* response) override;
  grpc::ServerUnaryReactor* ListPorts(grpc::CallbackServerContext* ctx,
                                      const v1::ListPortsRequest* request,
                                      v1::ListPortsResponse* response) override;
  grpc::ServerUnaryReactor* StatFile(grpc::CallbackServerContext* ctx,
                                     const v1::StatFileRequest* request,
                                     v1::FileInfo* response) override;
  grpc::ServerUnaryReactor* DeleteFile(grpc::CallbackServerContext* ctx,
                                       const v1::DeleteFileRequest* request,
                                       v1::DeleteFileResponse* response) override;
  grpc::ServerUnaryReactor* RenameFile(grpc::CallbackServerContext* ctx,
                                       const v1::RenameFileRequest* request,
                                       v1::FileInfo* response) override;
  grpc::ServerUnaryReactor* MakeDirectory(grpc::CallbackServerContext* ctx,
                                          const v1::MakeDirectoryRequest* request,
                                          v1::FileInfo* response) override;
  grpc::ServerUnaryReactor* SnapshotSession(grpc::CallbackServerContext* ctx,
                                            const v1::SnapshotSessionRequest* request,
                                            v1::Snapshot* response) override;
  grpc::ServerUnaryReactor* GetSnapshot(grpc::CallbackServerContext* ctx,
                                        const v1::GetSnapshotRequest* request,
                                        v1::Snapshot* response) override;
  grpc::ServerUnaryReactor* ListSnapshots(grpc::CallbackServerContext* ctx,
                                          const v1::ListSnapshotsRequest* request,
                                          v1::ListSnapshotsResponse* response) override;
  grpc::ServerUnaryReactor* DeleteSnapshot(grpc::CallbackServerContext* ctx,
                                           const v1::DeleteSnapshotRequest* request,
                                           v1::DeleteSnapshotResponse* response) override;
  grpc::ServerUnaryReactor* ListResources(grpc::CallbackServerContext* ctx,
                                          const v1::ListResourcesRequest* request,
                                          v1::ListResourcesResponse* response) override;
  // Between replicas (server/replica_streams.h; defined there and in codex_exec_route.cc).
  grpc::ServerBidiReactor<v1::ConnectPortRequest, v1::ConnectPortResponse>* ConnectPort(
      grpc::CallbackServerContext* ctx) override;
  grpc::ServerBidiReactor<v1::CodexExecRequest, v1::CodexExecResponse>* CodexExec(
      grpc::CallbackServerContext* ctx) override;

 private:
  const ServiceDeps deps_;
};

}  // namespace sandgate::server

#endif  // SANDGATE_SERVER_SERVICE_H_
