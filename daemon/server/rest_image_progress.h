// GET /v1/images/{name}/progress: an image build's progress as server-sent events, so that a
// page follows a build as BuildImage's stream does over gRPC instead of polling
// GET /v1/images/{name} (docs/images.md):
//
//   id: 3                                   one event per progress line, its index as the id
//   event: line
//   data: {"line":"I: installing remaining packages inside the chroot..."}
//
//   event: image                            last, once built: the Image as JSON (READY)
//   data: {"name":"py","state":"STATE_READY",...}
//
//   event: error                            last, for a build that failed or was cancelled
//   data: {"code":9,"status":"FAILED_PRECONDITION","message":"..."}
//
// Resumed after the Last-Event-ID header (what an EventSource sends when it reconnects), else
// from ?from=<index>; lines the store dropped (it keeps the last 2000) are skipped. An image
// built before the daemon started has no progress: its stream is the image event alone. The
// caller must be allowed to see the image, exactly as GET /v1/images/{name} (same errors).
// Leaving does not cancel the build (DELETE does). A stream waits suspended in the HTTP
// server, holding no thread; each read of the store runs on the I/O executor.
#ifndef SANDGATE_SERVER_REST_IMAGE_PROGRESS_H_
#define SANDGATE_SERVER_REST_IMAGE_PROGRESS_H_

#include "core/image_api.h"
#include "server/http_server.h"
#include "server/service.h"

namespace sandgate::server {

// `deps` and `images` (not owned) outlive the server.
HttpRoute ImageProgressRoute(const ServiceDeps& deps, core::ImageApi* images);

}  // namespace sandgate::server

#endif  // SANDGATE_SERVER_REST_IMAGE_PROGRESS_H_
