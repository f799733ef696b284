#include "core/api.h"

#include <utility>

#include "common/errors.h"
#include "common/status_macros.h"
#include "core/file_transfer.h"
#include "core/replica.h"
#include "core/sandbox_spec.h"

namespace sandgate::core {
namespace {

// The response is the call's result when it succeeded.
template <typename T>
absl::Status Fill(absl::StatusOr<T> result, T* response) {
  if (!result.ok()) return result.status();
  *response = std::move(*result);
  return absl::OkStatus();
}

absl::StatusOr<Snapshots*> SnapshotsOf(const ApiDeps& deps) {
  if (deps.snapshots == nullptr)
    return absl::UnimplementedError("snapshots are not served by this daemon");
  return deps.snapshots;
}

}  // namespace

absl::Status Api::RunAnalysis(const Caller& caller, v1::RunAnalysisRequest* request,
                              v1::Run* response) {
  if (deps_.can_take_work) SANDGATE_RETURN_IF_ERROR(deps_.can_take_work());
  return Fill(deps_.runs->Start(caller, std::move(*request)), response);
}

absl::Status Api::GetRun(const Caller& caller, const v1::GetRunRequest& request,
                         v1::Run* response) {
  return Fill(deps_.runs->Get(caller, request.run_id()), response);
}

absl::Status Api::ListRuns(const Caller& caller, const v1::ListRunsRequest& request,
                           v1::ListRunsResponse* response) {
  absl::StatusOr<store::RunPage> page =
      deps_.runs->List(caller, request.page_size(), request.page_token());
  if (!page.ok()) return page.status();
  for (auto& run : page->runs) *response->add_runs() = std::move(run);
  response->set_next_page_token(page->next_page_token);
  return absl::OkStatus();
}

absl::Status Api::CancelRun(const Caller& caller, const v1::CancelRunRequest& request,
                            v1::Run* response) {
  return Fill(deps_.runs->Cancel(caller, request.run_id(), request.reason()), response);
}

absl::Status Api::CreateSession(const Caller& caller, const v1::CreateSessionRequest& request,
                                v1::Session* response) {
  if (deps_.can_take_work) SANDGATE_RETURN_IF_ERROR(deps_.can_take_work());
  if (!request.from_snapshot().empty()) {
    SANDGATE_ASSIGN_OR_RETURN(Snapshots * snapshots, SnapshotsOf(deps_));
    return Fill(snapshots->CreateSession(caller, request, nullptr), response);
  }
  return Fill(deps_.sessions->Create(caller, request, nullptr), response);
}

absl::Status Api::SnapshotSession(const Caller& caller, const v1::SnapshotSessionRequest& request,
                                  v1::Snapshot* response) {
  SANDGATE_ASSIGN_OR_RETURN(Snapshots * snapshots, SnapshotsOf(deps_));
  return Fill(snapshots->Take(caller, request), response);
}

absl::Status Api::GetSnapshot(const Caller& caller, const v1::GetSnapshotRequest& request,
                              v1::Snapshot* response) {
  SANDGATE_ASSIGN_OR_RETURN(Snapshots * snapshots, SnapshotsOf(deps_));
  return Fill(snapshots->Get(caller, request.snapshot_id()), response);
}

absl::Status Api::ListSnapshots(const Caller& caller, const v1::ListSnapshotsRequest& request,
                                v1::ListSnapshotsResponse* response) {
  SANDGATE_ASSIGN_OR_RETURN(Snapshots * snapshots, SnapshotsOf(deps_));
  SANDGATE_ASSIGN_OR_RETURN(std::vector<v1::Snapshot> all,
                            snapshots->List(caller, request.session_id()));
  SANDGATE_ASSIGN_OR_RETURN(SnapshotPage page, PageOfSnapshots(std::move(all), request.page_size(),
                                                               request.page_token()));
  for (v1::Snapshot& s : page.snapshots) *response->add_snapshots() = std::move(s);
  response->set_next_page_token(page.next_page_token);
  return absl::OkStatus();
}

absl::Status Api::DeleteSnapshot(const Caller& caller, const v1::DeleteSnapshotRequest& request,
                                 v1::DeleteSnapshotResponse* response) {
  SANDGATE_ASSIGN_OR_RETURN(Snapshots * snapshots, SnapshotsOf(deps_));
  return snapshots->Delete(caller, request.snapshot_id());
}

absl::Status Api::GetSession(const Caller& caller, const v1::GetSessionRequest& request,
                             v1::Session* response) {
  return Fill(deps_.sessions->Get(caller, request.session_id()), response);
}

absl::Status Api::ListSessions(const Caller& caller, const v1::ListSessionsRequest& request,
                               v1::ListSessionsResponse* response) {
  absl::StatusOr<std::vector<v1::Session>> all =
      deps_.sessions->List(caller, request.include_closed());
  if (!all.ok()) return all.status();
  for (auto& s : *all) *response->add_sessions() = std::move(s);
  return absl::OkStatus();
}

absl::Status Api::KeepAlive(const Caller& caller, const v1::KeepAliveRequest& request,
                            v1::Session* response) {
  return Fill(deps_.sessions->KeepAlive(caller, request.session_id()), response);
}

absl::Status Api::CloseSession(const Caller& caller, const v1::CloseSessionRequest& request,
                               v1::Session* response) {
  return Fill(deps_.sessions->Close(caller, request.session_id(), request.reason()), response);
}

absl::Status Api::ListFiles(const Caller& caller, const v1::ListFilesRequest& request,
                            v1::ListFilesResponse* response) {
  return core::ListFiles(*deps_.sessions, caller, request, response);
}

absl::Status Api::GetSessionUsage(const Caller& caller, const v1::GetSessionUsageRequest& request,
                                  v1::SessionUsage* response) {
  return Fill(deps_.sessions->Usage(caller, request.session_id()), response);
}

absl::Status Api::StatFile(const Caller& caller, const v1::StatFileRequest& request,
                           v1::FileInfo* response) {
  return core::StatFile(*deps_.sessions, caller, request, response);
}

absl::Status Api::DeleteFile(const Caller& caller, const v1::DeleteFileRequest& request,
                             v1::DeleteFileResponse* response) {
  return core::DeleteFile(*deps_.sessions, caller, request, response);
}

absl::Status Api::RenameFile(const Caller& caller, const v1::RenameFileRequest& request,
                             v1::FileInfo* response) {
  return core::RenameFile(*deps_.sessions, caller, request, response);
}

absl::Status Api::MakeDirectory(const Caller& caller, const v1::MakeDirectoryRequest& request,
                                v1::FileInfo* response) {
  return core::MakeDirectory(*deps_.sessions, caller, request, response);
}

namespace {

absl::Status NoProcesses() {
  return absl::UnimplementedError("processes are not served by this daemon");
}

absl::Status NoPorts() {
  return absl::UnimplementedError("exposed ports are not served by this daemon");
}

}  // namespace

absl::Status Api::StartProcess(const Caller& caller, const v1::StartProcessRequest& request,
                               v1::Process* response) {
  if (deps_.processes == nullptr) return NoProcesses();
  return deps_.processes->Start(caller, request, response);
}

absl::Status Api::ReadProcessOutput(const Caller& caller,
                                    const v1::ReadProcessOutputRequest& request,
                                    v1::ProcessOutput* response) {
  if (deps_.processes == nullptr) return NoProcesses();
  return deps_.processes->Read(caller, request, response);
}

absl::Status Api::WriteProcessInput(const Caller& caller,
                                    const v1::WriteProcessInputRequest& request,
                                    v1::WriteProcessInputResponse* response) {
  if (deps_.processes == nullptr) return NoProcesses();
  return deps_.processes->Write(caller, request, response);
}

absl::Status Api::ListProcesses(const Caller& caller, const v1::ListProcessesRequest& request,
                                v1::ListProcessesResponse* response) {
  if (deps_.processes == nullptr) return NoProcesses();
  return deps_.processes->List(caller, request, response);
}

absl::Status Api::ExposePort(const Caller& caller, const v1::ExposePortRequest& request,
                             v1::ExposedPort* response) {
  if (deps_.ports == nullptr) return NoPorts();
  return deps_.ports->Expose(caller, request, response);
}

absl::Status Api::UnexposePort(const Caller& caller, const v1::UnexposePortRequest& request,
                               v1::UnexposePortResponse* response) {
  if (deps_.ports == nullptr) return NoPorts();
  return deps_.ports->Unexpose(caller, request, response);
}

absl::Status Api::ListPorts(const Caller& caller, const v1::ListPortsRequest& request,
                            v1::ListPortsResponse* response) {
  if (deps_.ports == nullptr) return NoPorts();
  return deps_.ports->List(caller, request, response);
}

absl::StatusOr<std::unique_ptr<SessionManager::Lease>> Api::StartEventStream(
    const Caller& caller, const v1::StreamEventsRequest& request) {
  if (request.follow() && deps_.sessions != nullptr) {
    // A live session of the caller's: the follower holds it. Anything else (NOT_FOUND: a run's
    // log, or no such id; FAILED_PRECONDITION: a session that has ended) is told apart below.
    absl::StatusOr<std::unique_ptr<SessionManager::Lease>> lease =
        deps_.sessions->Acquire(caller, request.run_id());
    if (lease.ok()) return lease;
  }
  SANDGATE_RETURN_IF_ERROR(deps_.runs->CheckEventsVisible(caller, request.run_id()));
  return nullptr;
}

absl::Status Api::Drain(const Caller& caller, const v1::DrainRequest&,
                        v1::DrainResponse* response) {
  if (!caller.is_operator) return errors::PermissionDenied("Drain: the operator role is required");
  response->set_active_runs(static_cast<uint32_t>(deps_.runs->active_runs()));
  if (!deps_.request_drain) {
    return errors::Unavailable("Drain: this daemon cannot be drained over the API");
  }
  deps_.request_drain();
  return absl::OkStatus();
}

absl::Status Api::Purge(const Caller& caller, const v1::PurgeRequest& request,
                        v1::PurgeResponse* response) {
  if (!caller.is_operator) return errors::PermissionDenied("Purge: the operator role is required");
  absl::Duration older_than = FromProto(request.older_than());
  if (older_than < absl::ZeroDuration()) {
    return errors::InvalidArgument("older_than: must not be negative");
  }
  absl::StatusOr<size_t> purged = deps_.runs->PurgeOlderThan(older_than);
  if (!purged.ok()) return purged.status();
  response->set_runs_deleted(static_cast<uint32_t>(*purged));
  return absl::OkStatus();
}

absl::Status Api::ListResources(const Caller& caller, const v1::ListResourcesRequest&,
                                v1::ListResourcesResponse* response) {
  // The journal is the gateway's, not a tenant's: entries name hosts' uids and cgroups and
  // upstream ids of every tenant's sandboxes.
  if (!caller.is_operator) {
    return errors::PermissionDenied("ListResources: the operator role is required");
  }
  if (deps_.journal == nullptr) return errors::Unavailable("ListResources: no journal here");
  SANDGATE_ASSIGN_OR_RETURN(std::vector<JournalEntry> entries, deps_.journal->List());
  for (const JournalEntry& e : entries) {
    v1::Resource* r = response->add_resources();
    r->set_id(e.id);
    r->set_provider(e.provider);
    r->set_kind(e.kind);
    auto text = [&](const char* key) {
      auto it = e.details.find(key);
      return it != e.details.end() && it->is_string() ? it->get<std::string>() : std::string();
    };
    r->set_session_id(text("session"));
    r->set_replica(text(ReplicaJournal::kKey));
    r->set_details_json(e.details.dump());
  }
  return absl::OkStatus();
}

}  // namespace sandgate::core
