// The REST face as a route table onto the edge core: each unary route names its RPC's entry
// (unary_rpcs.h) and is served by the one unary adapter (edge_unary.h) that the gRPC service
// also calls; the streams are rest_run_streams.cc and rest_session_streams.cc. Also the pages
// that have no RPC: /v1/whoami, /metrics and the dashboard's files.
#include <memory>
#include <utility>

#include "absl/strings/str_cat.h"
#include "common/errors.h"
#include "common/utf8.h"
#include "server/codex_exec_route.h"
#include "server/dashboard_assets.h"
#include "server/edge_unary.h"
#include "server/http_api.h"
#include "server/reactor.h"
#include "server/rest_json.h"
#include "server/rest_streams.h"
#include "server/unary_rpcs.h"
#include "server/utf8_fields.h"

namespace sandgate::server {
namespace {

// The REST face of the one unary adapter: the caller authenticated, the request parsed from
// the body, path and query (and checked for NULs, as the gRPC face checks its message) on the
// lane's executor, served by ServeUnary, answered as JSON.
template <typename Api, typename Arg, typename Resp>
HttpRoute Unary(const ServiceDeps& deps, const char* method, const char* pattern,
                const UnaryRpc<Api, Arg, Resp>& rpc) {
  using Req = typename UnaryRpc<Api, Arg, Resp>::Req;
  return AuthenticatedRoute(
      deps, method, pattern,
      [&deps, &rpc](const HttpRequest& http, const Exchange& x, const core::Caller& caller) {
        auto call = std::make_shared<std::pair<Req, Resp>>();
        const bool queued = SubmitOnLane(
            deps, rpc.policy->lane, caller.tenant, [&deps, &rpc, http, x, call, caller] {
              absl::Status st = ParseRequest(http, &call->first);
              if (st.ok()) st = CheckNoNul(call->first);
              if (!st.ok()) return x->Reply(JsonError(st));
              ServeUnary(deps, rpc, EdgeCall{nullptr, http.Header("authorization")}, caller,
                         &call->first, &call->second, [x, call](const absl::Status& st) {
                           x->Reply(st.ok() ? JsonAnswer(&call->second) : JsonError(st));
                         });
            });
        if (!queued) x->Reply(JsonError(QueueFull()));
      });
}

// GET /v1/whoami: the tenant the bearer token names, whether it is an operator, and whether
// it may build (and delete) images (what the dashboard shows in its header, and whether it
// offers a build). REST only, for the dashboard: it has no RPC.
HttpRoute WhoAmIRoute(const ServiceDeps& deps) {
  return AuthenticatedRoute(
      deps, "GET", "/v1/whoami", [](const HttpRequest&, const Exchange& x, const core::Caller& c) {
        nlohmann::json me = {{"tenant", EscapeInvalidUtf8(c.tenant)},
                             {"operator", c.is_operator},
                             {"buildImages", core::ImageApi::CheckMayBuild(c).ok()}};
        x->Reply(Json(me.dump()));
      });
}

}  // namespace

HttpRoute MetricsRoute(std::function<std::string()> render, const core::Tenants* tenants) {
  return {
      "GET", "/metrics",
      [render = std::move(render), tenants](const HttpRequest& http, Exchange x) {
        if (tenants != nullptr) {
          absl::StatusOr<core::Caller> caller = AuthenticateHttp(*tenants, http);
          absl::Status st = caller.status();
          if (st.ok()) st = Authorize(Policy("Metrics"), *caller);
          if (!st.ok()) return x->Reply(JsonError(st));
        }
        x->Reply({200, {{"Content-Type", "text/plain; version=0.0.4; charset=utf-8"}}, render()});
      }};
}

HttpServer::Routes RestRoutes(const ServiceDeps& deps) {
  namespace r = rpcs;
  HttpServer::Routes routes = {
      Unary(deps, "POST", "/v1/runs", r::kRunAnalysis),
      Unary(deps, "GET", "/v1/runs", r::kListRuns),
      Unary(deps, "GET", "/v1/runs/{run_id}", r::kGetRun),
      Unary(deps, "POST", "/v1/runs/{run_id}:cancel", r::kCancelRun),
      EventsRoute(deps),
      ArtifactsRoute(deps),
      Unary(deps, "POST", "/v1/sessions", r::kCreateSession),
      Unary(deps, "GET", "/v1/sessions", r::kListSessions),
      Unary(deps, "GET", "/v1/sessions/{session_id}", r::kGetSession),
      Unary(deps, "POST", "/v1/sessions/{session_id}:keepAlive", r::kKeepAlive),
      Unary(deps, "POST", "/v1/sessions/{session_id}:close", r::kCloseSession),
      Unary(deps, "GET", "/v1/sessions/{session_id}/files", r::kListFiles),
      Unary(deps, "GET", "/v1/resources", r::kListResources),
      ExecRoute(deps),
      // Processes you talk to (docs/sessions.md): start, list, read output from an offset
      // (?offset=&max_bytes=&wait=5s), and input (data in base64, close_stdin, signal, resize).
      Unary(deps, "POST", "/v1/sessions/{session_id}/processes", r::kStartProcess),
      Unary(deps, "GET", "/v1/sessions/{session_id}/processes", r::kListProcesses),
      Unary(deps, "GET", "/v1/sessions/{session_id}/processes/{process_id}/output",
            r::kReadProcessOutput),
      Unary(deps, "POST", "/v1/sessions/{session_id}/processes/{process_id}:input",
            r::kWriteProcessInput),
      // What a session uses now, for the dashboard's live figures (docs/dashboard.md).
      Unary(deps, "GET", "/v1/sessions/{session_id}/usage", r::kGetSessionUsage),
      // The rest of a session's files (docs/sessions.md).
      Unary(deps, "GET", "/v1/sessions/{session_id}/files:stat", r::kStatFile),
      Unary(deps, "POST", "/v1/sessions/{session_id}/files:delete", r::kDeleteFile),
      Unary(deps, "POST", "/v1/sessions/{session_id}/files:rename", r::kRenameFile),
      Unary(deps, "POST", "/v1/sessions/{session_id}/files:mkdir", r::kMakeDirectory),
      // Exposed ports (docs/sessions.md); the proxy itself is server/port_proxy.h.
      Unary(deps, "POST", "/v1/sessions/{session_id}/ports", r::kExposePort),
      Unary(deps, "GET", "/v1/sessions/{session_id}/ports", r::kListPorts),
      Unary(deps, "POST", "/v1/sessions/{session_id}/ports/{port}:unexpose", r::kUnexposePort),
      // Snapshots (docs/sessions.md): take one (?close for a pause), list, get, delete.
      Unary(deps, "POST", "/v1/sessions/{session_id}:snapshot", r::kSnapshotSession),
      Unary(deps, "GET", "/v1/snapshots", r::kListSnapshots),
      Unary(deps, "GET", "/v1/snapshots/{snapshot_id}", r::kGetSnapshot),
      Unary(deps, "POST", "/v1/snapshots/{snapshot_id}:delete", r::kDeleteSnapshot),
      UploadRoute(deps),
      DownloadRoute(deps),
      WhoAmIRoute(deps),
      CodexExecServerRoute(deps),  // server/codex_exec_route.h: a WebSocket
      Unary(deps, "POST", "/v1/daemon:drain", r::kDrain),
      Unary(deps, "POST", "/v1/runs:purge", r::kPurge),
  };
  if (deps.images == nullptr) return routes;
  // Images (docs/images.md). POST /v1/images starts a build and answers the image at once
  // (state BUILDING, or READY when its packages were built already): the build goes on
  // without the call; GET /v1/images/{name} shows its last progress line, and DELETE
  // /v1/images/{name} cancels it (or removes a built image).
  for (HttpRoute& route : HttpServer::Routes{
           Unary(deps, "POST", "/v1/images", r::kBuildImage),
           Unary(deps, "GET", "/v1/images", r::kListImages),
           Unary(deps, "GET", "/v1/images/{name}", r::kGetImage),
           Unary(deps, "DELETE", "/v1/images/{name}", r::kDeleteImage),
       }) {
    routes.push_back(std::move(route));
  }
  return routes;
}

HttpServer::Routes DashboardRoutes() {
  auto serve = [](const HttpRequest& request, Exchange x) {
    const EmbeddedFile* file = FindDashboardFile(request.path);
    if (file == nullptr) {
      x->Reply(JsonError(errors::NotFound("dashboard file", request.path)));
      return;
    }
    HttpResponse response{
        200, {{"Content-Type", std::string(file->content_type)}}, std::string(file->body)};
    for (const auto& [name, value] : DashboardHeaders()) {
      response.headers.emplace_back(std::string(name), std::string(value));
    }
    x->Reply(std::move(response));
  };
  HttpServer::Routes routes;
  for (const char* pattern : {"/", "/ui", "/ui/", "/ui/{file}", "/ui/vendor/{file}"}) {
    routes.push_back({"GET", pattern, serve});
  }
  return routes;
}

}  // namespace sandgate::server
