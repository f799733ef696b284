// Every unary RPC as the edge serves it (edge_unary.h): its policy (rpc_policy.h), its
// core::Api (core::ImageApi) function, and for an audited call what it acted on. The gRPC
// services and the REST routes both name these; neither says anything of its own about a
// call.
//
// Internal to server/. Constant; thread safe.
#ifndef SANDGATE_SERVER_UNARY_RPCS_H_
#define SANDGATE_SERVER_UNARY_RPCS_H_

#include <string>

#include "absl/strings/str_cat.h"
#include "core/api.h"
#include "server/edge_unary.h"
#include "server/forwarding.h"

namespace sandgate::server::rpcs {

// What an audited call acted on.
template <typename Req, typename Resp>
std::string RunIdOf(const Req& req, const Resp&) {
  return req.run_id();
}
template <typename Req, typename Resp>
std::string SessionIdOf(const Req& req, const Resp&) {
  return req.session_id();
}
template <typename Req, typename Resp>
std::string NameOf(const Req& req, const Resp&) {
  return req.name();
}
template <typename Req, typename Resp>
std::string CreatedId(const Req&, const Resp& resp) {
  return resp.id();
}
template <typename Req, typename Resp>
std::string SessionPathOf(const Req& q, const Resp&) {
  return absl::StrCat(q.session_id(), "/", q.path());
}
template <typename Req, typename Resp>
std::string SessionPortOf(const Req& q, const Resp&) {
  return absl::StrCat(q.session_id(), "/", q.port());
}

using core::Api;
using core::ImageApi;

// Runs.
inline constexpr auto kRunAnalysis = MakeRpc("RunAnalysis", &Api::RunAnalysis, &CreatedId);
inline constexpr auto kGetRun = MakeRpc("GetRun", &Api::GetRun);
inline constexpr auto kListRuns = MakeRpc("ListRuns", &Api::ListRuns);
inline constexpr auto kCancelRun =
    MakeRpc("CancelRun", &Api::CancelRun, &RunIdOf, &RunMayHaveMoved);

// Sessions.
inline constexpr auto kCreateSession = MakeRpc("CreateSession", &Api::CreateSession, &CreatedId);
inline constexpr auto kGetSession = MakeRpc("GetSession", &Api::GetSession);
inline constexpr auto kListSessions = MakeRpc("ListSessions", &Api::ListSessions);
inline constexpr auto kKeepAlive = MakeRpc("KeepAlive", &Api::KeepAlive, &SessionIdOf);
inline constexpr auto kCloseSession = MakeRpc("CloseSession", &Api::CloseSession, &SessionIdOf);
inline constexpr auto kGetSessionUsage = MakeRpc("GetSessionUsage", &Api::GetSessionUsage);

// A session's files.
inline constexpr auto kListFiles = MakeRpc("ListFiles", &Api::ListFiles);
inline constexpr auto kStatFile = MakeRpc("StatFile", &Api::StatFile);
inline constexpr auto kDeleteFile = MakeRpc("DeleteFile", &Api::DeleteFile, &SessionPathOf);
inline constexpr auto kRenameFile = MakeRpc(
    "RenameFile", &Api::RenameFile, [](const v1::RenameFileRequest& q, const v1::FileInfo&) {
      return absl::StrCat(q.session_id(), "/", q.from(), " -> ", q.to());
    });
inline constexpr auto kMakeDirectory =
    MakeRpc("MakeDirectory", &Api::MakeDirectory, &SessionPathOf);

// Processes you talk to.
inline constexpr auto kStartProcess = MakeRpc(
    "StartProcess", &Api::StartProcess, [](const v1::StartProcessRequest& q, const v1::Process& p) {
      return absl::StrCat(q.session_id(), "/", p.id());
    });
inline constexpr auto kReadProcessOutput = MakeRpc("ReadProcessOutput", &Api::ReadProcessOutput);
inline constexpr auto kWriteProcessInput = MakeRpc("WriteProcessInput", &Api::WriteProcessInput);
inline constexpr auto kListProcesses = MakeRpc("ListProcesses", &Api::ListProcesses);

// Exposed ports.
inline constexpr auto kExposePort = MakeRpc("ExposePort", &Api::ExposePort, &SessionPortOf);
inline constexpr auto kUnexposePort = MakeRpc("UnexposePort", &Api::UnexposePort, &SessionPortOf);
inline constexpr auto kListPorts = MakeRpc("ListPorts", &Api::ListPorts);

// Snapshots.
inline constexpr auto kSnapshotSession =
    MakeRpc("SnapshotSession", &Api::SnapshotSession,
            [](const v1::SnapshotSessionRequest& q, const v1::Snapshot& s) {
              return absl::StrCat(q.session_id(), " -> ", s.id());
            });
inline constexpr auto kGetSnapshot = MakeRpc("GetSnapshot", &Api::GetSnapshot);
inline constexpr auto kListSnapshots = MakeRpc("ListSnapshots", &Api::ListSnapshots);
inline constexpr auto kDeleteSnapshot =
    MakeRpc("DeleteSnapshot", &Api::DeleteSnapshot,
            [](const v1::DeleteSnapshotRequest& q, const v1::DeleteSnapshotResponse&) {
              return q.snapshot_id();
            });

// Images (the Images service; BuildImage's stream is image_service.cc's).
inline constexpr auto kBuildImage = MakeRpc("BuildImage", &ImageApi::BuildImage, &NameOf);
inline constexpr auto kGetImage = MakeRpc("GetImage", &ImageApi::GetImage);
inline constexpr auto kListImages = MakeRpc("ListImages", &ImageApi::ListImages);
inline constexpr auto kDeleteImage = MakeRpc("DeleteImage", &ImageApi::DeleteImage, &NameOf);

// Operators.
inline constexpr auto kDrain = MakeRpc(
    "Drain", &Api::Drain,
    [](const v1::DrainRequest&, const v1::DrainResponse&) { return std::string("daemon"); });
inline constexpr auto kPurge =
    MakeRpc("Purge", &Api::Purge, [](const v1::PurgeRequest& q, const v1::PurgeResponse&) {
      return absl::StrCat("older_than ", q.older_than().seconds(), "s");
    });
inline constexpr auto kListResources = MakeRpc("ListResources", &Api::ListResources);

}  // namespace sandgate::server::rpcs

#endif  // SANDGATE_SERVER_UNARY_RPCS_H_
