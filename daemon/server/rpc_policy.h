// The per-RPC policy table: for every RPC of sandgate.v1.Sandgate and sandgate.v1.Images (and
// the REST-only pages that need a rule), who may call it, which replica serves it, what the
// audit log calls it, and where it runs. Both faces read it (the gRPC services, service.cc and
// image_service.cc, and the REST routes, rest_routes.cc) through the one edge core
// (edge_unary.h, edge_streams.h), so a rule is written once:
//
//   const RpcPolicy& p = Policy("KeepAlive");
//   p.owner == Owner::kSession   // forwarded to the replica that holds the session
//   p.audit == "KeepAlive"       // audited under this action
//
// Whether a call may be repeated is not here: the edge repeats nothing (a forwarded call that
// fails is answered with the owner's or the transport's status, server/forwarding.h), and
// which calls a client may repeat is docs/client-contract.md's "Retries of calls".
//
// Constant; thread safe.
#ifndef SANDGATE_SERVER_RPC_POLICY_H_
#define SANDGATE_SERVER_RPC_POLICY_H_

#include <cstdlib>
#include <string_view>

#include "absl/status/status.h"
#include "core/tenants.h"

namespace sandgate::server {

// Who may call it. Every call needs a tenant's token (or the daemon's unauthenticated mode),
// and sees only that tenant's runs and sessions: another tenant's are NOT_FOUND, never
// PERMISSION_DENIED (core/ decides that). kOperator: only an operator's token, else
// PERMISSION_DENIED "<name>: the operator role is required".
enum class Auth { kTenant, kOperator };

// Which replica serves it (server/forwarding.h): any (kAny: reads from the shared store), or
// the owner of the session (session_id) or run (run_id) the request names, to whom it is
// forwarded from any other replica.
enum class Owner { kAny, kSession, kRun };

// Where it runs: the I/O executor (short blocking work), or Exec's executor, shared fairly by
// the tenants, for a call that may wait long (a process's output, the input of a process
// that does not read, a snapshot's tar).
enum class Lane { kIo, kWaits };

struct RpcPolicy {
  std::string_view name;  // the RPC ("KeepAlive"), or a REST-only page ("Metrics")
  Auth auth;
  Owner owner;
  std::string_view audit;  // the audit action; empty: not audited
  Lane lane;
};

inline constexpr RpcPolicy kRpcPolicies[] = {
    // {name, auth, owner, audit action, lane}
    {"RunAnalysis", Auth::kTenant, Owner::kSession, "RunAnalysis", Lane::kIo},
    {"StreamEvents", Auth::kTenant, Owner::kAny, "", Lane::kIo},
    {"GetRun", Auth::kTenant, Owner::kAny, "", Lane::kIo},
    {"ListRuns", Auth::kTenant, Owner::kAny, "", Lane::kIo},
    {"CancelRun", Auth::kTenant, Owner::kRun, "CancelRun", Lane::kIo},
    {"DownloadArtifact", Auth::kTenant, Owner::kAny, "", Lane::kIo},
    {"CreateSession", Auth::kTenant, Owner::kAny, "CreateSession", Lane::kIo},
    {"GetSession", Auth::kTenant, Owner::kAny, "", Lane::kIo},
    {"ListSessions", Auth::kTenant, Owner::kAny, "", Lane::kIo},
    {"Exec", Auth::kTenant, Owner::kSession, "Exec", Lane::kWaits},
    {"UploadFile", Auth::kTenant, Owner::kSession, "UploadFile", Lane::kIo},
    {"DownloadFile", Auth::kTenant, Owner::kSession, "", Lane::kIo},
    {"ListFiles", Auth::kTenant, Owner::kSession, "", Lane::kIo},
    {"KeepAlive", Auth::kTenant, Owner::kSession, "KeepAlive", Lane::kIo},
    {"CloseSession", Auth::kTenant, Owner::kSession, "CloseSession", Lane::kIo},
    {"Drain", Auth::kOperator, Owner::kAny, "Drain", Lane::kIo},
    {"Purge", Auth::kOperator, Owner::kAny, "Purge", Lane::kIo},
    {"ListResources", Auth::kOperator, Owner::kAny, "", Lane::kIo},
    {"StartProcess", Auth::kTenant, Owner::kSession, "StartProcess", Lane::kIo},
    {"ReadProcessOutput", Auth::kTenant, Owner::kSession, "", Lane::kWaits},
    {"WriteProcessInput", Auth::kTenant, Owner::kSession, "", Lane::kWaits},
    {"ListProcesses", Auth::kTenant, Owner::kSession, "", Lane::kIo},
    {"StatFile", Auth::kTenant, Owner::kSession, "", Lane::kIo},
    {"DeleteFile", Auth::kTenant, Owner::kSession, "DeleteFile", Lane::kIo},
    {"RenameFile", Auth::kTenant, Owner::kSession, "RenameFile", Lane::kIo},
    {"MakeDirectory", Auth::kTenant, Owner::kSession, "MakeDirectory", Lane::kIo},
    {"GetSessionUsage", Auth::kTenant, Owner::kSession, "", Lane::kIo},
    {"ExposePort", Auth::kTenant, Owner::kSession, "ExposePort", Lane::kIo},
    {"UnexposePort", Auth::kTenant, Owner::kSession, "UnexposePort", Lane::kIo},
    {"ListPorts", Auth::kTenant, Owner::kSession, "", Lane::kIo},
    // A snapshot is taken where the session's sandbox is, by tar, for as long as it needs.
    {"SnapshotSession", Auth::kTenant, Owner::kSession, "SnapshotSession", Lane::kWaits},
    {"GetSnapshot", Auth::kTenant, Owner::kAny, "", Lane::kIo},
    {"ListSnapshots", Auth::kTenant, Owner::kAny, "", Lane::kIo},
    {"DeleteSnapshot", Auth::kTenant, Owner::kAny, "DeleteSnapshot", Lane::kIo},
    // Replica to replica: the byte stream of an exposed port and the Codex exec-server route,
    // opened by a replica that does not hold the session on the one that does
    // (replica_streams.cc, codex_exec_route.cc), which checks the caller's token or signed
    // grant itself. Never forwarded (kAny): the opener has already found the owner.
    {"ConnectPort", Auth::kTenant, Owner::kAny, "", Lane::kWaits},
    {"CodexExec", Auth::kTenant, Owner::kAny, "", Lane::kWaits},
    // sandgate.v1.Images (docs/images.md). Each replica builds and keeps images in its own
    // state_dir: served where called. BuildImage streams over gRPC; over REST it answers the
    // image as the build starts (ImageApi::BuildImage), and either way the build runs on the
    // image store's own threads.
    {"BuildImage", Auth::kTenant, Owner::kAny, "BuildImage", Lane::kIo},
    {"GetImage", Auth::kTenant, Owner::kAny, "", Lane::kIo},
    {"ListImages", Auth::kTenant, Owner::kAny, "", Lane::kIo},
    {"DeleteImage", Auth::kTenant, Owner::kAny, "DeleteImage", Lane::kIo},
    // REST only: the Prometheus page on the API port counts every tenant's runs and sessions,
    // so it is the operators' as ListResources is (metrics_listen, a port of its own for a
    // scraper, serves it without a token).
    {"Metrics", Auth::kOperator, Owner::kAny, "", Lane::kIo},
};

// The policy named `name`. Evaluated where a constant is needed (as the edge's tables do), a
// name not in the table does not compile; at run time it is a broken invariant (abort).
constexpr const RpcPolicy& Policy(std::string_view name) {
  for (const RpcPolicy& p : kRpcPolicies) {
    if (p.name == name) return p;
  }
  std::abort();
}

// The policy's auth rule for `caller`: OK, or PERMISSION_DENIED naming the call.
absl::Status Authorize(const RpcPolicy& policy, const core::Caller& caller);

}  // namespace sandgate::server

#endif  // SANDGATE_SERVER_RPC_POLICY_H_
