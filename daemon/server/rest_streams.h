// The REST routes that stream (internal to server/): each adapts a stream of the edge core
// (edge_streams.h, core/exec_stream.h, core/file_transfer.h) to an HTTP answer, as the gRPC
// service's reactors adapt the same units to gRPC. The routes are described in http_api.h.
#ifndef SANDGATE_SERVER_REST_STREAMS_H_
#define SANDGATE_SERVER_REST_STREAMS_H_

#include <string>

#include "server/http_server.h"
#include "server/service.h"

namespace sandgate::server {

// A run's streams (rest_run_streams.cc).
HttpRoute EventsRoute(const ServiceDeps& deps);     // GET /v1/runs/{run_id}/events (SSE)
HttpRoute ArtifactsRoute(const ServiceDeps& deps);  // GET /v1/runs/{run_id}/artifacts/{name}

// A session's streams (rest_session_streams.cc).
HttpRoute ExecRoute(const ServiceDeps& deps);      // POST /v1/sessions/{session_id}:exec
HttpRoute DownloadRoute(const ServiceDeps& deps);  // GET /v1/sessions/{session_id}/files/...
HttpRoute UploadRoute(const ServiceDeps& deps);    // PUT /v1/sessions/{session_id}/files/...

// The headers of an answer that carries bytes a sandbox made (an artifact, a workspace file):
// a download, never a page of this origin: were it opened anyway (an SVG, an HTML file named
// .txt), the browser runs it sandboxed (no scripts, no same-origin access) and lets it load
// nothing (default-src 'none': no style sheet, image or font that could carry data away);
// and nosniff (every answer's) keeps the declared type.
HttpHeaders SandboxMadeHeaders(const std::string& path);

}  // namespace sandgate::server

#endif  // SANDGATE_SERVER_REST_STREAMS_H_
