// The HTTP port's request entry: what a request carries (its path, query and headers, as they
// arrived) becomes an HttpRequest here, and is checked here once for every route, before any
// handler sees it. Everything a handler reads from a request is then text a proto3 `string`
// field and a JSON document can hold:
//
//   - the path and each query name and value are percent-decoded here (and only here);
//   - each of them, and each header name and value, is refused (400 INVALID_ARGUMENT, naming
//     the field: the route's {param}, the query parameter, the header) when it is not valid
//     UTF-8 or holds a NUL byte, as gRPC refuses such a string field;
//   - ambiguous framing (two Content-Length headers, or Content-Length with
//     Transfer-Encoding; RFC 9112 section 6.3) is refused with 400 and the connection closed
//     ("Connection: close"), so that no second request can hide in the first one's body.
//
// HttpServer (http_server.h) calls RouteRequest for each request; the fuzz target
// (tests/fuzz/) calls it the same way, without a socket.
//
//   RawHttpRequest raw{"GET", "/v1/runs/run_1", {{"page_size", "2"}}, {{"Host", "x"}}};
//   HttpRequest request;
//   std::optional<HttpResponse> refused;
//   const HttpRoute* route = RouteRequest(routes, raw, &request, &refused);
//
// Thread safe (pure functions).
#ifndef SANDGATE_SERVER_HTTP_REQUEST_H_
#define SANDGATE_SERVER_HTTP_REQUEST_H_

#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/string_view.h"
#include "server/http_server.h"

namespace sandgate::server {

// A request as it arrived: nothing decoded or checked yet.
struct RawHttpRequest {
  std::string method;
  std::string path;  // percent-encoded, without the query
  // The query's name=value pairs in order, each still percent-encoded ("+" already a space).
  std::vector<std::pair<std::string, std::string>> query;
  HttpHeaders headers;  // as sent, in order, repeated ones included
};

// `raw` with each %HH decoded; a "%" not followed by two hex digits is kept as it is.
std::string PercentDecode(absl::string_view raw);

// OK when `value` can become a string field: valid UTF-8 without a NUL byte. Otherwise
// INVALID_ARGUMENT "<field>: contains a NUL byte" or "<field>: not valid UTF-8 (byte 0xFF at
// offset 3)".
absl::Status CheckRequestText(absl::string_view field, absl::string_view value);

// Fills `request` from `raw` and returns the route that serves it; or null with `refused`
// set to the answer: bad framing, bad text (above), no such path (404), no such method on it
// (405).
const HttpRoute* RouteRequest(const std::vector<HttpRoute>& routes, const RawHttpRequest& raw,
                              HttpRequest* request, std::optional<HttpResponse>* refused);

// The error answer in the REST API's shape: {"code": <gRPC code>, "status": "NOT_FOUND",
// "message": ...} (invalid UTF-8 in the message escaped as \xNN), with `http_status`.
HttpResponse ErrorAnswer(unsigned int http_status, const absl::Status& status);

}  // namespace sandgate::server

#endif  // SANDGATE_SERVER_HTTP_REQUEST_H_
