// What every REST route shares (internal to server/): a request message from the HTTP
// request (the proto3 JSON mapping of its body, path and query), an answer from a response
// message or a status, the caller from the Authorization header.
#ifndef SANDGATE_SERVER_REST_JSON_H_
#define SANDGATE_SERVER_REST_JSON_H_

#include <google/protobuf/message.h>

#include <functional>
#include <memory>
#include <string>

#include "absl/status/statusor.h"
#include "common/status_macros.h"
#include "core/tenants.h"
#include "nlohmann/json.hpp"
#include "server/http_api.h"
#include "server/http_server.h"
#include "server/service.h"

namespace sandgate::server {

using Exchange = std::shared_ptr<HttpExchange>;

inline constexpr char kJsonType[] = "application/json; charset=utf-8";

// A 200 answer with `body` (JSON text) and a newline.
HttpResponse Json(std::string body);
// `message` as JSON, its strings escaped to UTF-8 first (the printer refuses invalid UTF-8).
absl::StatusOr<std::string> ToJson(google::protobuf::Message* message);
// The 200 answer of `message`, or the error of why it cannot be printed.
HttpResponse JsonAnswer(google::protobuf::Message* message);
// Parses `json` into `message`; INVALID_ARGUMENT naming `what` ("request body") if it does
// not fit.
absl::Status FromJson(const std::string& json, const std::string& what,
                      google::protobuf::Message* message);
// `fields` as JSON text; a byte that is not UTF-8 (the HTTP server let none in) becomes U+FFFD
// instead of an exception.
std::string DumpFields(const nlohmann::json& fields);

// The request message from the body (POST), then the path's {fields} and the query's
// parameters over it. A query value is a JSON string (the mapping takes numbers as strings)
// or, for true/false, a bool.
template <typename Req>
absl::Status ParseRequest(const HttpRequest& http, Req* request) {
  if (http.body.find_first_not_of(" \t\r\n") != std::string::npos) {
    SANDGATE_RETURN_IF_ERROR(FromJson(http.body, "request body", request));
  }
  nlohmann::json fields = nlohmann::json::object();
  for (const auto& [k, v] : http.query) {
    if (v == "true" || v == "false") {
      fields[k] = v == "true";
    } else {
      fields[k] = v;
    }
  }
  if (!fields.empty()) {
    Req from_query;
    SANDGATE_RETURN_IF_ERROR(FromJson(DumpFields(fields), "query", &from_query));
    request->MergeFrom(from_query);
  }
  nlohmann::json path = nlohmann::json::object();
  for (const auto& [k, v] : http.params) path[k] = v;
  if (!path.empty()) {
    Req from_path;
    SANDGATE_RETURN_IF_ERROR(FromJson(DumpFields(path), "path", &from_path));
    request->MergeFrom(from_path);
  }
  return absl::OkStatus();
}

// The caller the Authorization header names (core::Tenants::Authenticate).
absl::StatusOr<core::Caller> AuthenticateHttp(const core::Tenants& tenants,
                                              const HttpRequest& http);

// Runs `fn` on the I/O executor; answers "queue full" when it cannot queue.
void OnIo(const ServiceDeps& deps, const Exchange& x, std::function<void()> fn);

// A route of one handler that needs the caller: authenticates, then `fn(http, x, caller)` on
// the polling thread (it must not block).
HttpRoute AuthenticatedRoute(
    const ServiceDeps& deps, const char* method, const char* pattern,
    std::function<void(const HttpRequest&, const Exchange&, const core::Caller&)> fn);

}  // namespace sandgate::server

#endif  // SANDGATE_SERVER_REST_JSON_H_
