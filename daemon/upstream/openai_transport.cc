#include "upstream/openai_transport.h"

#include <utility>

#include "absl/strings/ascii.h"
#include "absl/strings/cord.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_replace.h"
#include "absl/strings/strip.h"
#include "common/errors.h"
#include "common/log.h"
#include "common/status_macros.h"

namespace sandgate::upstream {

using nlohmann::json;

namespace {

constexpr absl::string_view kRedacted = "[REDACTED]";
constexpr absl::string_view kBrokenStreamPayload = "sandgate.dev/upstream/broken_stream";

std::string Scrub(absl::string_view text, absl::string_view key) {
  if (key.empty()) return std::string(text);
  return absl::StrReplaceAll(text, {{key, kRedacted}});
}

absl::Status WithMessage(const absl::Status& status, absl::string_view message) {
  return absl::Status(status.code(), message);
}

absl::StatusCode CodeForHttpStatus(int status) {
  switch (status) {
    case 400:
      return absl::StatusCode::kInvalidArgument;
    case 401:
      return absl::StatusCode::kUnauthenticated;
    case 403:
      return absl::StatusCode::kPermissionDenied;
    case 404:
      return absl::StatusCode::kNotFound;
    case 408:
      return absl::StatusCode::kDeadlineExceeded;
    case 409:
      return absl::StatusCode::kAborted;
    case 429:
      return absl::StatusCode::kResourceExhausted;
    default:
      break;
  }
  if (status >= 500) return absl::StatusCode::kUnavailable;
  if (status >= 400) return absl::StatusCode::kFailedPrecondition;
  return absl::StatusCode::kUnknown;
}

// The code for an error reported inside a stream, from its error.code string.
absl::StatusCode CodeForStreamError(absl::string_view code) {
  if (code == "rate_limit_exceeded" || code == "insufficient_quota") {
    return absl::StatusCode::kResourceExhausted;
  }
  if (code == "server_error") return absl::StatusCode::kUnavailable;
  if (code == "invalid_prompt" || code == "invalid_request_error") {
    return absl::StatusCode::kInvalidArgument;
  }
  return absl::StatusCode::kUnknown;
}

// "message (type: t, code: c, request id: r)" from an error object {message, type, code}.
std::string DescribeError(const json& error, absl::string_view request_id) {
  std::string message = StringField(error, "message");
  std::vector<std::string> details;
  if (std::string type = StringField(error, "type"); !type.empty()) {
    details.push_back(absl::StrCat("type: ", type));
  }
  if (std::string code = StringField(error, "code"); !code.empty()) {
    details.push_back(absl::StrCat("code: ", code));
  }
  if (std::string param = StringField(error, "param"); !param.empty()) {
    details.push_back(absl::StrCat("param: ", param));
  }
  if (!request_id.empty()) details.push_back(absl::StrCat("request id: ", request_id));
  if (message.empty()) message = "no error message";
  return details.empty() ? message : absl::StrCat(message, " (", absl::StrJoin(details, ", "), ")");
}

absl::Status ErrorFromResponse(absl::string_view op, const HttpResponse& resp,
                               absl::string_view key) {
  const std::string request_id = resp.headers.Get("x-request-id");
  const json body = json::parse(resp.body, nullptr, /*allow_exceptions=*/false);
  std::string detail;
  std::string code;
  if (body.is_object() && body.contains("error") && body["error"].is_object()) {
    detail = DescribeError(body["error"], request_id);
    code = StringField(body["error"], "code");
  } else {
    detail =
        absl::StrCat(resp.body.empty() ? "empty body" : Excerpt(resp.body),
                     request_id.empty() ? "" : absl::StrCat(" (request id: ", request_id, ")"));
  }
  log::Warning("openai.error", {{"op", std::string(op)},
                                {"http_status", resp.status},
                                {"code", Scrub(code, key)},
                                {"request_id", Scrub(request_id, key)}});
  return absl::Status(CodeForHttpStatus(resp.status),
                      Scrub(absl::StrCat(op, ": HTTP ", resp.status, ": ", detail), key));
}

}  // namespace

bool IsBrokenStream(const absl::Status& status) {
  return status.GetPayload(kBrokenStreamPayload).has_value();
}

absl::Status BrokenStream(const absl::Status& status) {
  absl::Status marked(absl::StatusCode::kUnavailable, status.message());
  marked.SetPayload(kBrokenStreamPayload, absl::Cord("1"));
  return marked;
}

std::string Escape(absl::string_view s) {
  static constexpr char kHex[] = "0123456789ABCDEF";
  std::string out;
  for (unsigned char c : s) {
    if (absl::ascii_isalnum(c) || c == '-' || c == '_' || c == '.' || c == '~') {
      out.push_back(static_cast<char>(c));
    } else {
      out.push_back('%');
      out.push_back(kHex[c >> 4]);
      out.push_back(kHex[c & 15]);
    }
  }
  return out;
}

std::string Dump(const json& j) { return j.dump(-1, ' ', false, json::error_handler_t::replace); }

std::string StringField(const json& j, const char* key) {
  if (!j.is_object()) return "";
  auto it = j.find(key);
  if (it == j.end()) return "";
  if (it->is_string()) return it->get<std::string>();
  if (it->is_number()) return Dump(*it);
  return "";
}

int64_t IntField(const json& j, const char* key) {
  if (!j.is_object()) return 0;
  auto it = j.find(key);
  if (it == j.end() || !it->is_number()) return 0;
  return it->is_number_float() ? static_cast<int64_t>(it->get<double>()) : it->get<int64_t>();
}

std::string Excerpt(absl::string_view body) {
  constexpr size_t kMax = 300;
  std::string out;
  for (char c : body.substr(0, kMax)) out.push_back(absl::ascii_isprint(c) ? c : ' ');
  if (body.size() > kMax) out += "...";
  return out;
}

absl::Status StreamError(absl::string_view op, const json& error) {
  const std::string code = StringField(error, "code");
  return absl::Status(CodeForStreamError(code.empty() ? StringField(error, "type") : code),
                      absl::StrCat(op, ": stream error: ", DescribeError(error, "")));
}

const json& ListData(const json& page) {
  static const json kEmpty = json::array();
  if (!page.is_object()) return kEmpty;
  auto it = page.find("data");
  return it != page.end() && it->is_array() ? *it : kEmpty;
}

std::string OpenAiCall::Name() const {
  return absl::StrCat("openai ", method, " ", path.substr(0, path.find('?')));
}

OpenAiTransport::OpenAiTransport(HttpClient* http, const Credentials* credentials,
                                 std::string base_url, OpenAiOptions options)
    : http_(http),
      credentials_(credentials),
      base_url_(std::string(absl::StripSuffix(base_url, "/"))),
      options_(std::move(options)) {}

absl::StatusOr<HttpResponse> OpenAiTransport::Execute(OpenAiCall& call,
                                                      const CancelToken* cancel) const {
  const std::string op = call.Name();
  absl::StatusOr<std::string> key = credentials_->ApiKey();
  if (!key.ok()) {
    return WithMessage(key.status(), absl::StrCat(op, ": ", key.status().message()));
  }
  HttpRequest request;
  request.method = call.method;
  request.url = absl::StrCat(base_url_, call.path);
  request.connect_timeout = options_.connect_timeout;
  request.total_timeout = call.timeout > absl::ZeroDuration() ? call.timeout : options_.timeout;
  request.headers.Add("Authorization", absl::StrCat("Bearer ", *key));
  for (const auto& [name, value] : options_.extra_headers) request.headers.Add(name, value);
  if (call.has_json_body) {
    request.headers.Add("Content-Type", "application/json");
    request.body = std::move(call.json_body);
  }
  request.headers.Add("Accept", call.accept.empty() ? "application/json" : call.accept);
  for (auto& [name, value] : call.headers) request.headers.Add(name, std::move(value));
  request.multipart = std::move(call.parts);
  request.on_body_chunk = call.on_chunk;
  request.on_body_restart = call.on_restart;
  request.on_stream_open = call.on_open;

  absl::StatusOr<HttpResponse> response = http_->Send(request, cancel);
  if (!response.ok()) {
    return WithMessage(response.status(),
                       Scrub(absl::StrCat(op, ": ", response.status().message()), *key));
  }
  if (response->status < 200 || response->status >= 300) {
    return ErrorFromResponse(op, *response, *key);
  }
  return response;
}

absl::StatusOr<json> OpenAiTransport::JsonCall(
    absl::string_view method, std::string path, const json* body, const CancelToken* cancel,
    std::vector<std::pair<std::string, std::string>> headers, absl::Duration timeout) const {
  OpenAiCall call;
  call.method = std::string(method);
  call.path = std::move(path);
  call.headers = std::move(headers);
  call.timeout = timeout;
  if (body != nullptr) {
    call.json_body = Dump(*body);
    call.has_json_body = true;
  }
  SANDGATE_ASSIGN_OR_RETURN(HttpResponse response, Execute(call, cancel));
  if (absl::StripAsciiWhitespace(response.body).empty()) return json::object();
  json parsed = json::parse(response.body, nullptr, /*allow_exceptions=*/false);
  if (parsed.is_discarded()) {
    return errors::Internal(absl::StrCat(call.Name(), ": the response is not JSON (request id: ",
                                         response.headers.Get("x-request-id"), ")"));
  }
  return parsed;
}

absl::StatusOr<json> OpenAiTransport::MultipartCall(std::string path,
                                                    std::vector<MultipartPart> parts,
                                                    const CancelToken* cancel) const {
  OpenAiCall call;
  call.method = "POST";
  call.path = std::move(path);
  call.parts = std::move(parts);
  SANDGATE_ASSIGN_OR_RETURN(HttpResponse response, Execute(call, cancel));
  json parsed = json::parse(response.body, nullptr, /*allow_exceptions=*/false);
  if (parsed.is_discarded()) {
    return errors::Internal(absl::StrCat(call.Name(), ": the response is not JSON (request id: ",
                                         response.headers.Get("x-request-id"), ")"));
  }
  return parsed;
}

absl::Status OpenAiTransport::StreamCall(std::string path, const json* request,
                                         const SseJsonHandler& on_event, const CancelToken* cancel,
                                         std::vector<std::pair<std::string, std::string>> headers,
                                         absl::Duration timeout,
                                         const StreamOpened& on_open) const {
  OpenAiCall call;
  call.method = request != nullptr ? "POST" : "GET";
  call.path = std::move(path);
  call.headers = std::move(headers);
  call.timeout = timeout;
  if (request != nullptr) {
    json body = request->is_object() ? *request : json::object();
    body["stream"] = true;
    call.json_body = Dump(body);
    call.has_json_body = true;
  }
  call.accept = "text/event-stream";
  const std::string op = call.Name();

  SseParser parser;
  absl::Status stream_status;
  bool done = false;
  bool began = false;  // part of the body arrived: a failure now is a broken stream
  auto handle = [&](std::vector<SseEvent>& events) {
    for (SseEvent& event : events) {
      if (done || !stream_status.ok()) return;
      if (event.IsDone()) {
        done = true;
        return;
      }
      if (event.data.empty()) continue;
      json data = json::parse(event.data, nullptr, /*allow_exceptions=*/false);
      if (data.is_discarded()) {
        stream_status =
            errors::Internal(absl::StrCat(op, ": stream event is not JSON: ", Excerpt(event.data)));
        return;
      }
      stream_status = on_event(event, data, &done);
    }
  };
  call.on_chunk = [&](absl::string_view chunk) -> bool {
    if (!chunk.empty()) began = true;
    std::vector<SseEvent> events;
    if (absl::Status s = parser.Feed(chunk, &events); !s.ok()) {
      stream_status = WithMessage(s, absl::StrCat(op, ": ", s.message()));
      return false;
    }
    handle(events);
    return !done && stream_status.ok();
  };
  if (on_open) {
    call.on_open = [&]() -> bool {
      stream_status = on_open(&done);
      return !done && stream_status.ok();
    };
  }

  absl::StatusOr<HttpResponse> response = Execute(call, cancel);
  if (!stream_status.ok()) return stream_status;
  if (done) return absl::OkStatus();  // stopped on purpose; the transport's ABORTED is ours
  if (!response.ok()) {
    const bool broke = began && response.status().code() == absl::StatusCode::kUnavailable;
    return broke ? BrokenStream(response.status()) : response.status();
  }
  std::vector<SseEvent> events;
  if (!response->body.empty()) {
    // A transport that does not stream hands the whole body over at the end.
    SANDGATE_RETURN_IF_ERROR(parser.Feed(response->body, &events));
  }
  SANDGATE_RETURN_IF_ERROR(parser.Finish(&events));
  handle(events);
  return stream_status;
}

absl::Status OpenAiTransport::ListAll(const std::string& path,
                                      const std::function<absl::Status(const json& item)>& on_item,
                                      const CancelToken* cancel, int max_pages) const {
  const std::string op = absl::StrCat("openai GET ", path.substr(0, path.find('?')));
  const char separator = path.find('?') == std::string::npos ? '?' : '&';
  std::string after;
  for (int page = 0; page < max_pages; ++page) {
    // after before limit, as the other list calls send it.
    std::string url =
        absl::StrCat(path, std::string(1, separator),
                     after.empty() ? "" : absl::StrCat("after=", Escape(after), "&"), "limit=100");
    SANDGATE_ASSIGN_OR_RETURN(json j, JsonCall("GET", std::move(url), nullptr, cancel));
    for (const json& item : ListData(j)) SANDGATE_RETURN_IF_ERROR(on_item(item));
    std::string last_id = StringField(j, "last_id");
    if (last_id.empty() && !ListData(j).empty()) last_id = StringField(ListData(j).back(), "id");
    const bool has_more = j.is_object() && j.value("has_more", false);
    if (!has_more) return absl::OkStatus();
    if (last_id.empty() || last_id == after) {
      return errors::Internal(
          absl::StrCat(op, ": has_more without a new cursor; refusing to loop"));
    }
    after = std::move(last_id);
  }
  return errors::ResourceExhausted(absl::StrCat(op, ": more than ", max_pages, " pages"));
}

absl::StatusOr<std::string> OpenAiTransport::Download(std::string path, absl::string_view accept,
                                                      size_t max_bytes, absl::string_view what,
                                                      const CancelToken* cancel) const {
  OpenAiCall call;
  call.path = std::move(path);
  call.accept = std::string(accept);
  std::string content;
  bool too_big = false;
  call.on_chunk = [&](absl::string_view chunk) {
    if (content.size() + chunk.size() > max_bytes) {
      too_big = true;
      return false;
    }
    content.append(chunk.data(), chunk.size());
    return true;
  };
  // A download is safe to repeat: one cut short is fetched again from the start.
  call.on_restart = [&] {
    content.clear();
    too_big = false;
  };
  const std::string op = call.Name();
  absl::StatusOr<HttpResponse> response = Execute(call, cancel);
  // A transport that does not stream puts the bytes in the body instead.
  if (response.ok() && !response->body.empty()) {
    too_big = content.size() + response->body.size() > max_bytes;
    if (!too_big) content += response->body;
  }
  if (too_big) {
    return errors::ResourceExhausted(
        absl::StrCat(op, ": ", what, " is larger than ", max_bytes, " bytes"));
  }
  if (!response.ok()) return response.status();
  return content;
}

}  // namespace sandgate::upstream
