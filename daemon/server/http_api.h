// The REST/JSON face of the API (grpc-gateway style) and the /metrics page, as routes of the
// HttpServer (http_server.h).
//
// A route table onto the edge core that the gRPC service also calls (rpc_policy.h,
// edge_unary.h, edge_streams.h), with the same authentication (Authorization: Bearer
// <token>, core::Tenants), so both faces answer the same (tests/integration/
// edge_conformance_test.cc holds them to it): a request body or query is the RPC's request in the
// proto3 JSON mapping (lowerCamelCase names, enums by name, 64-bit integers as strings, bytes as
// base64), the answer its response; an error is {"code": <gRPC code>, "status": "NOT_FOUND",
// "message": "<the daemon's>"} with the usual HTTP status (400, 401, 403, 404, 409, 412, 429, 501,
// 503, 500 ...).
//
//   POST /v1/runs                    RunAnalysis   GET /v1/runs              ListRuns
//   GET  /v1/runs/{id}               GetRun        POST /v1/runs/{id}:cancel CancelRun
//   GET  /v1/runs/{id}/events        StreamEvents, as text/event-stream (below)
//   GET  /v1/runs/{id}/artifacts/{name}            DownloadArtifact, the bytes
//   POST /v1/sessions                CreateSession GET /v1/sessions          ListSessions
//   GET  /v1/sessions/{id}           GetSession    POST /v1/sessions/{id}:keepAlive
//   POST /v1/sessions/{id}:close     CloseSession  GET /v1/sessions/{id}/files  ListFiles
//   POST /v1/sessions/{id}:exec      Exec, as NDJSON (one ExecResponse a line, as produced)
//   PUT  /v1/sessions/{id}/files/{path...}          UploadFile, the body streamed in
//   GET  /v1/sessions/{id}/files/{path...}          DownloadFile, the bytes
//   GET  /v1/resources               ListResources (operators: the cleanup state)
//   POST /v1/runs:purge              Purge         POST /v1/daemon:drain     Drain (operators)
//   POST /v1/images                  BuildImage, answered with the image as its build starts
//   GET  /v1/images                  ListImages    GET /v1/images/{name}     GetImage
//   DELETE /v1/images/{name}         DeleteImage
//   GET  /v1/whoami                  the caller's tenant, operator flag and whether it may build
//                                    images (REST only)
//   GET  /v1/health                  the isolation levels sessions may get (REST only)
//
// With replicas, a call on another replica's session or run is forwarded to its owner by the
// same rule as over gRPC (the policy table; server/forwarding.h), its answer relayed as it
// comes. The bytes a
// sandbox made (artifacts, downloads) carry Content-Security-Policy: sandbox; default-src 'none'.
//
// Events: each as "id: <seq>", "event: <type>", "data: <the Event as JSON>"; resumed after
// the Last-Event-ID header (or ?after_seq=); heartbeats are SSE comments; the stream ends
// after the log's terminal event, run.finished (follow=false: after the replay). A follow
// from at or past that end is answered 204 No Content: an EventSource that reconnects once
// the stream ended (with the last id) stops there, as its spec says it does on a 204, instead
// of waiting on heartbeats for ever. A follower waits in the EventLog (Wait), suspended in
// the HTTP server: it holds no thread.
#ifndef SANDGATE_SERVER_HTTP_API_H_
#define SANDGATE_SERVER_HTTP_API_H_

#include <functional>
#include <string>

#include "absl/status/status.h"
#include "nlohmann/json.hpp"
#include "sandbox/sandbox.h"
#include "server/http_server.h"
#include "server/service.h"

namespace sandgate::server {

// The REST routes, with the image routes (POST/GET /v1/images, GET/DELETE
// /v1/images/{name}) when `deps.images` is set; `deps` (and what it points to) outlive the
// server they are given to.
HttpServer::Routes RestRoutes(const ServiceDeps& deps);
// The web dashboard (server/dashboard_assets.h): GET /, /ui/ and its files, each with the
// dashboard's Content-Security-Policy and headers. The page itself is public (it holds no
// data); everything it shows comes from the REST routes, with the caller's token.
HttpServer::Routes DashboardRoutes();
// GET /v1/health (rest_health.cc): {"isolation": {"namespaces": {"available": true},
// "gvisor": {"available": false, "reason": "..."}}}, as IsolationHealth says of `local` (not
// owned; null: neither level). Any authenticated caller.
HttpRoute HealthRoute(const ServiceDeps& deps, const sandbox::Provider* local);
nlohmann::json IsolationHealth(const sandbox::Provider* local);
// GET /metrics: the Prometheus text page `render` makes. With `tenants` (the REST port) only
// an operator's token reads it (the page counts every tenant's runs and sessions); without
// (metrics_listen, a port of its own for a scraper) it is public.
HttpRoute MetricsRoute(std::function<std::string()> render, const core::Tenants* tenants = nullptr);

// An error in the REST shape, with its HTTP status.
HttpResponse JsonError(const absl::Status& status);
unsigned int HttpStatusOf(absl::StatusCode code);

}  // namespace sandgate::server

#endif  // SANDGATE_SERVER_HTTP_API_H_
