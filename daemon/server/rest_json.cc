#include "server/rest_json.h"

#include <google/protobuf/util/json_util.h>

#include "absl/strings/str_cat.h"
#include "common/errors.h"
#include "server/http_request.h"
#include "server/reactor.h"
#include "server/utf8_fields.h"

namespace sandgate::server {

unsigned int HttpStatusOf(absl::StatusCode code) {
  switch (code) {
    case absl::StatusCode::kOk:
      return 200;
    case absl::StatusCode::kCancelled:
      return 499;
    case absl::StatusCode::kInvalidArgument:
      return 400;
    case absl::StatusCode::kOutOfRange:
      return 400;
    case absl::StatusCode::kDeadlineExceeded:
      return 504;
    case absl::StatusCode::kNotFound:
      return 404;
    case absl::StatusCode::kAlreadyExists:
      return 409;
    case absl::StatusCode::kAborted:
      return 409;
    case absl::StatusCode::kPermissionDenied:
      return 403;
    case absl::StatusCode::kUnauthenticated:
      return 401;
    case absl::StatusCode::kResourceExhausted:
      return 429;
    case absl::StatusCode::kFailedPrecondition:
      return 412;
    case absl::StatusCode::kUnimplemented:
      return 501;
    case absl::StatusCode::kUnavailable:
      return 503;
    default:
      return 500;  // UNKNOWN, INTERNAL, DATA_LOSS
  }
}

HttpResponse JsonError(const absl::Status& status) {
  return ErrorAnswer(HttpStatusOf(status.code()), status);
}

HttpResponse Json(std::string body) {
  body.push_back('\n');
  return {200, {{"Content-Type", kJsonType}}, std::move(body)};
}

absl::StatusOr<std::string> ToJson(google::protobuf::Message* message) {
  EscapeStringFields(message);
  std::string out;
  auto st = google::protobuf::util::MessageToJsonString(*message, &out);
  if (!st.ok()) return errors::Internal(absl::StrCat("JSON: ", std::string(st.message())));
  return out;
}

HttpResponse JsonAnswer(google::protobuf::Message* message) {
  absl::StatusOr<std::string> json = ToJson(message);
  return json.ok() ? Json(*std::move(json)) : JsonError(json.status());
}

absl::Status FromJson(const std::string& json, const std::string& what,
                      google::protobuf::Message* message) {
  auto st = google::protobuf::util::JsonStringToMessage(json, message);
  if (!st.ok()) return errors::InvalidArgument(absl::StrCat(what, ": ", std::string(st.message())));
  return absl::OkStatus();
}

std::string DumpFields(const nlohmann::json& fields) {
  return fields.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
}

absl::StatusOr<core::Caller> AuthenticateHttp(const core::Tenants& tenants,
                                              const HttpRequest& http) {
  std::optional<std::string> authorization;
  auto it = http.headers.find("authorization");
  if (it != http.headers.end()) authorization = it->second;
  return tenants.Authenticate(authorization);
}

void OnIo(const ServiceDeps& deps, const Exchange& x, std::function<void()> fn) {
  if (!deps.io->Submit(std::move(fn))) x->Reply(JsonError(QueueFull()));
}

HttpRoute AuthenticatedRoute(
    const ServiceDeps& deps, const char* method, const char* pattern,
    std::function<void(const HttpRequest&, const Exchange&, const core::Caller&)> fn) {
  return {method, pattern, [&deps, fn = std::move(fn)](const HttpRequest& http, Exchange x) {
            absl::StatusOr<core::Caller> caller = AuthenticateHttp(*deps.tenants, http);
            if (!caller.ok()) return x->Reply(JsonError(caller.status()));
            fn(http, x, *caller);
          }};
}

}  // namespace sandgate::server
