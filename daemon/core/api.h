// Api: the daemon's unary RPCs as plain functions, in the shape of the Cloud Spanner
// Emulator's handlers: the caller, the request, the response to fill; the status is the
// answer. The gRPC edge (server/) authenticates, calls one of these on the I/O executor and
// maps the status; nothing here knows gRPC. The streams' logic is in exec_stream.h,
// file_transfer.h and event_log.h; StreamEvents starts here (StartEventStream).
//
//   core::Api api({&runs, &sessions, max_transfer_bytes, request_drain});
//   v1::Run run;
//   absl::Status st = api.GetRun(caller, request, &run);
//
// Thread safe; the calls block (store, sandbox), so the edge runs them on an executor.
#ifndef SANDGATE_CORE_API_H_
#define SANDGATE_CORE_API_H_

#include <cstdint>
#include <functional>
#include <memory>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "core/ports.h"
#include "core/processes.h"
#include "core/run_manager.h"
#include "core/session_manager.h"
#include "core/snapshots.h"
#include "core/tenants.h"
#include "sandgate/v1/sandgate.pb.h"

namespace sandgate::core {

struct ApiDeps {
  RunManager* runs = nullptr;  // not owned; outlive the Api
  SessionManager* sessions = nullptr;
  uint64_t max_transfer_bytes = 64ull << 20;  // UploadFile / DownloadFile
  std::function<void()> request_drain;        // starts the daemon's drain; may be empty
  // Refuses new runs and sessions (UNAVAILABLE, saying why) while this replica holds no
  // lease (core/replica.h ReplicaMember::CanTakeWork); may be empty: always taken.
  std::function<absl::Status()> can_take_work;
  // The whole journal, every replica's entries (ListResources); may be null: UNAVAILABLE.
  ResourceJournal* journal = nullptr;
  // Background processes of kept sessions; may be null: UNIMPLEMENTED.
  ProcessManager* processes = nullptr;
  // Exposed ports of kept sessions; may be null: UNIMPLEMENTED.
  PortManager* ports = nullptr;
  // Workspace snapshots (core/snapshots.h); may be null: UNIMPLEMENTED.
  Snapshots* snapshots = nullptr;
};

class Api {
 public:
  explicit Api(ApiDeps deps) : deps_(std::move(deps)) {}

  // Takes the request's contents (its inputs may be max_input_bytes).
  absl::Status RunAnalysis(const Caller& caller, v1::RunAnalysisRequest* request,
                           v1::Run* response);
  absl::Status GetRun(const Caller& caller, const v1::GetRunRequest& request, v1::Run* response);
  absl::Status ListRuns(const Caller& caller, const v1::ListRunsRequest& request,
                        v1::ListRunsResponse* response);
  absl::Status CancelRun(const Caller& caller, const v1::CancelRunRequest& request,
                         v1::Run* response);

  absl::Status CreateSession(const Caller& caller, const v1::CreateSessionRequest& request,
                             v1::Session* response);
  absl::Status GetSession(const Caller& caller, const v1::GetSessionRequest& request,
                          v1::Session* response);
  absl::Status ListSessions(const Caller& caller, const v1::ListSessionsRequest& request,
                            v1::ListSessionsResponse* response);
  absl::Status KeepAlive(const Caller& caller, const v1::KeepAliveRequest& request,
                         v1::Session* response);
  absl::Status CloseSession(const Caller& caller, const v1::CloseSessionRequest& request,
                            v1::Session* response);
  absl::Status ListFiles(const Caller& caller, const v1::ListFilesRequest& request,
                         v1::ListFilesResponse* response);

  // The rest of a session's files (core/file_transfer.h).
  absl::Status StatFile(const Caller& caller, const v1::StatFileRequest& request,
                        v1::FileInfo* response);
  absl::Status DeleteFile(const Caller& caller, const v1::DeleteFileRequest& request,
                          v1::DeleteFileResponse* response);
  absl::Status RenameFile(const Caller& caller, const v1::RenameFileRequest& request,
                          v1::FileInfo* response);
  absl::Status MakeDirectory(const Caller& caller, const v1::MakeDirectoryRequest& request,
                             v1::FileInfo* response);

  // What a live session uses now; no use of it (SessionManager::Usage).
  absl::Status GetSessionUsage(const Caller& caller, const v1::GetSessionUsageRequest& request,
                               v1::SessionUsage* response);

  // Processes of kept sessions (core/processes.h). ReadProcessOutput may wait (up to
  // processes.max_read_wait): the edge runs it where a blocked thread does no harm.
  absl::Status StartProcess(const Caller& caller, const v1::StartProcessRequest& request,
                            v1::Process* response);
  absl::Status ReadProcessOutput(const Caller& caller, const v1::ReadProcessOutputRequest& request,
                                 v1::ProcessOutput* response);
  absl::Status WriteProcessInput(const Caller& caller, const v1::WriteProcessInputRequest& request,
                                 v1::WriteProcessInputResponse* response);
  absl::Status ListProcesses(const Caller& caller, const v1::ListProcessesRequest& request,
                             v1::ListProcessesResponse* response);

  // Exposed ports (core/ports.h).
  absl::Status ExposePort(const Caller& caller, const v1::ExposePortRequest& request,
                          v1::ExposedPort* response);
  absl::Status UnexposePort(const Caller& caller, const v1::UnexposePortRequest& request,
                            v1::UnexposePortResponse* response);
  absl::Status ListPorts(const Caller& caller, const v1::ListPortsRequest& request,
                         v1::ListPortsResponse* response);
  PortManager* ports() const { return deps_.ports; }
  // Snapshots (core/snapshots.h); CreateSession with from_snapshot restores one.
  absl::Status SnapshotSession(const Caller& caller, const v1::SnapshotSessionRequest& request,
                               v1::Snapshot* response);
  absl::Status GetSnapshot(const Caller& caller, const v1::GetSnapshotRequest& request,
                           v1::Snapshot* response);
  absl::Status ListSnapshots(const Caller& caller, const v1::ListSnapshotsRequest& request,
                             v1::ListSnapshotsResponse* response);
  absl::Status DeleteSnapshot(const Caller& caller, const v1::DeleteSnapshotRequest& request,
                              v1::DeleteSnapshotResponse* response);

  // StreamEvents' start, before its first read: OK when `caller` may read the log named by
  // request.run_id() (a run's, or a kept session's own: its id). A follow of a live session's
  // own log also holds the session, like any call in flight (DESIGN.md: a session with an open
  // StreamEvents is not idle): the returned lease keeps the idle reaper off it, and the stream
  // drops it when it ends or its caller goes away. Null for a run's log, a replay without
  // follow, and a session that has ended (its log ends with session.closed).
  absl::StatusOr<std::unique_ptr<SessionManager::Lease>> StartEventStream(
      const Caller& caller, const v1::StreamEventsRequest& request);

  // Operator only.
  absl::Status Drain(const Caller& caller, const v1::DrainRequest& request,
                     v1::DrainResponse* response);
  absl::Status Purge(const Caller& caller, const v1::PurgeRequest& request,
                     v1::PurgeResponse* response);
  absl::Status ListResources(const Caller& caller, const v1::ListResourcesRequest& request,
                             v1::ListResourcesResponse* response);

  uint64_t max_transfer_bytes() const { return deps_.max_transfer_bytes; }

 private:
  const ApiDeps deps_;
};

}  // namespace sandgate::core

#endif  // SANDGATE_CORE_API_H_
