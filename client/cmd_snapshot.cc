#include "client/cmd_snapshot.h"

#include <cstdio>
#include <string>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "client/render.h"
#include "client/terminal_text.h"
#include "google/protobuf/util/time_util.h"

namespace sandgate::cli {
namespace {

using google::protobuf::util::TimeUtil;

void PrintSnapshot(const v1::Snapshot& s) {
  std::printf("snapshot   %s\n", TerminalSafe(s.id()).c_str());
  std::printf("session    %s  (%s)\n", TerminalSafe(s.session_id()).c_str(),
              TerminalSafe(s.provider()).c_str());
  std::printf("taken      %s on %s\n", TimeUtil::ToString(s.created_at()).c_str(),
              TerminalSafe(s.replica()).c_str());
  std::printf("size       %s  (%llu entries, %s in files)  sha256 %s\n",
              HumanBytes(s.size_bytes()).c_str(), static_cast<unsigned long long>(s.files()),
              HumanBytes(s.content_bytes()).c_str(), s.sha256().c_str());
}

std::string Table(const v1::ListSnapshotsResponse& r) {
  std::string out =
      absl::StrFormat("%-38s %-18s %10s %8s  %s\n", "ID", "SESSION", "SIZE", "ENTRIES", "TAKEN");
  for (const v1::Snapshot& s : r.snapshots()) {
    absl::StrAppend(&out, absl::StrFormat("%-38s %-18s %10s %8d  %s\n", TerminalSafe(s.id()),
                                          TerminalSafe(s.session_id()), HumanBytes(s.size_bytes()),
                                          s.files(), TimeUtil::ToString(s.created_at())));
  }
  return out;
}

}  // namespace

int SessionSnapshot(Client& client, const std::string& sub, const Args& args) {
  const bool json = args.Has("--json");
  if (args.positional.size() != 1) {
    return Usage(sub == "resume" ? "needs exactly one snapshot id"
                                 : "needs exactly one session id");
  }
  grpc::ClientContext ctx;
  client.Prepare(&ctx);
  if (sub == "resume") {
    v1::CreateSessionRequest req;
    req.set_from_snapshot(args.positional[0]);
    v1::Session s;
    grpc::Status st = client.stub().CreateSession(&ctx, req, &s);
    if (!st.ok()) return Fail(st);
    std::printf("%s\n", json ? ToJson(s).c_str() : TerminalSafe(s.id()).c_str());
    return 0;
  }
  v1::SnapshotSessionRequest req;
  req.set_session_id(args.positional[0]);
  req.set_close(sub == "pause" || args.Has("--close"));
  v1::Snapshot s;
  grpc::Status st = client.stub().SnapshotSession(&ctx, req, &s);
  if (!st.ok()) return Fail(st);
  std::printf("%s\n", json ? ToJson(s).c_str() : TerminalSafe(s.id()).c_str());
  return 0;
}

int CmdSnapshot(Client& client, const std::string& sub, const Args& args) {
  const std::vector<std::string>& p = args.positional;
  const bool json = args.Has("--json");
  grpc::ClientContext ctx;
  client.Prepare(&ctx);
  if (sub == "list") {
    if (!p.empty()) return Usage("list takes no arguments (--session ID for one session's)");
    v1::ListSnapshotsRequest req;
    req.set_session_id(args.Get("--session"));
    v1::ListSnapshotsResponse resp;
    grpc::Status st = client.stub().ListSnapshots(&ctx, req, &resp);
    if (!st.ok()) return Fail(st);
    if (json) {
      for (const v1::Snapshot& s : resp.snapshots()) std::printf("%s\n", ToJson(s).c_str());
    } else {
      std::fputs(Table(resp).c_str(), stdout);
    }
    return 0;
  }
  if (sub == "get") {
    if (p.size() != 1) return Usage("needs exactly one snapshot id");
    v1::GetSnapshotRequest req;
    req.set_snapshot_id(p[0]);
    v1::Snapshot s;
    grpc::Status st = client.stub().GetSnapshot(&ctx, req, &s);
    if (!st.ok()) return Fail(st);
    if (json) {
      std::printf("%s\n", ToJson(s).c_str());
    } else {
      PrintSnapshot(s);
    }
    return 0;
  }
  // rm: each id its own call, so one that is gone does not keep the others.
  if (p.empty()) return Usage("needs at least one snapshot id");
  int rc = 0;
  for (const std::string& id : p) {
    grpc::ClientContext one;
    client.Prepare(&one);
    v1::DeleteSnapshotRequest req;
    req.set_snapshot_id(id);
    v1::DeleteSnapshotResponse resp;
    grpc::Status st = client.stub().DeleteSnapshot(&one, req, &resp);
    if (!st.ok()) rc = Fail(st);
  }
  return rc;
}

}  // namespace sandgate::cli
