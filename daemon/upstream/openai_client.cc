#include "upstream/openai_client.h"

#include <map>
#include <utility>

#include "absl/strings/ascii.h"
#include "absl/strings/cord.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_replace.h"
#include "absl/strings/strip.h"
#include "common/errors.h"
#include "common/log.h"
#include "common/status_macros.h"
#include "upstream/sse.h"

namespace sandgate::upstream {

using nlohmann::json;

struct OpenAiClient::Call {
  std::string method;
  std::string path;  // below the base URL, with its query
  std::string json_body;
  bool has_json_body = false;
  std::vector<MultipartPart> parts;
  std::string accept;
  BodyChunkCallback on_chunk;
  std::function<void()> on_restart;

  std::string Name() const {
    return absl::StrCat("openai ", method, " ", path.substr(0, path.find('?')));
  }
};

namespace {

constexpr absl::string_view kRedacted = "[REDACTED]";
constexpr absl::string_view kBrokenStreamPayload = "sandgate.dev/upstream/broken_stream";

absl::Status BrokenStream(const absl::Status& status) {
  absl::Status marked(absl::StatusCode::kUnavailable, status.message());
  marked.SetPayload(kBrokenStreamPayload, absl::Cord("1"));
  return marked;
}

// Percent-encodes everything but RFC 3986 unreserved characters, so an id can never leave its
// path segment ("../", "?", "#").
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

std::string Query(const ListParams& p) {
  std::vector<std::string> terms;
  if (!p.after.empty()) terms.push_back(absl::StrCat("after=", Escape(p.after)));
  if (p.limit > 0) terms.push_back(absl::StrCat("limit=", p.limit));
  if (!p.order.empty()) terms.push_back(absl::StrCat("order=", Escape(p.order)));
  return terms.empty() ? "" : absl::StrCat("?", absl::StrJoin(terms, "&"));
}

std::string Scrub(absl::string_view text, absl::string_view key) {
  if (key.empty()) return std::string(text);
  return absl::StrReplaceAll(text, {{key, kRedacted}});
}

absl::Status WithMessage(const absl::Status& status, absl::string_view message) {
  return absl::Status(status.code(), message);
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

// A body that is not the JSON error envelope is quoted, shortened and made printable.
std::string Excerpt(absl::string_view body) {
  constexpr size_t kMax = 300;
  std::string out;
  for (char c : body.substr(0, kMax)) out.push_back(absl::ascii_isprint(c) ? c : ' ');
  if (body.size() > kMax) out += "...";
  return out;
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

absl::Status StreamError(absl::string_view op, const json& error) {
  const std::string code = StringField(error, "code");
  return absl::Status(CodeForStreamError(code.empty() ? StringField(error, "type") : code),
                      absl::StrCat(op, ": stream error: ", DescribeError(error, "")));
}

absl::StatusOr<File> ParseFile(absl::string_view op, const json& j) {
  File f;
  f.id = StringField(j, "id");
  if (f.id.empty()) return errors::Internal(absl::StrCat(op, ": the File object has no id"));
  f.bytes = IntField(j, "bytes");
  f.filename = StringField(j, "filename");
  f.purpose = StringField(j, "purpose");
  return f;
}

absl::StatusOr<Container> ParseContainer(absl::string_view op, const json& j) {
  Container c;
  c.id = StringField(j, "id");
  if (c.id.empty()) return errors::Internal(absl::StrCat(op, ": the container object has no id"));
  c.name = StringField(j, "name");
  c.status = StringField(j, "status");
  c.created_at = IntField(j, "created_at");
  c.last_active_at = IntField(j, "last_active_at");
  c.memory_limit = StringField(j, "memory_limit");
  if (j.contains("expires_after")) {
    c.expires_after_minutes = static_cast<int>(IntField(j["expires_after"], "minutes"));
  }
  return c;
}

absl::StatusOr<ContainerFile> ParseContainerFile(absl::string_view op, const json& j) {
  ContainerFile f;
  f.id = StringField(j, "id");
  if (f.id.empty()) return errors::Internal(absl::StrCat(op, ": the container file has no id"));
  f.path = StringField(j, "path");
  f.bytes = IntField(j, "bytes");
  f.source = StringField(j, "source");
  return f;
}

const json& ListData(const json& page) {
  static const json kEmpty = json::array();
  if (!page.is_object()) return kEmpty;
  auto it = page.find("data");
  return it != page.end() && it->is_array() ? *it : kEmpty;
}

json NetworkPolicyJson(const NetworkPolicy& policy) {
  if (policy.type == NetworkPolicy::Type::kDisabled) return json{{"type", "disabled"}};
  json j = {{"type", "allowlist"}, {"allowed_domains", policy.allowed_domains}};
  if (!policy.domain_secrets.empty()) {
    json secrets = json::array();
    for (const DomainSecret& s : policy.domain_secrets) {
      secrets.push_back({{"domain", s.domain}, {"name", s.name}, {"value", s.value}});
    }
    j["domain_secrets"] = std::move(secrets);
  }
  return j;
}

}  // namespace

bool IsBrokenStream(const absl::Status& status) {
  return status.GetPayload(kBrokenStreamPayload).has_value();
}

json ChatCompletionResult::MessageJson() const {
  json message = {{"role", "assistant"}, {"content", nullptr}};
  if (content.has_value()) message["content"] = *content;
  if (!tool_calls.empty()) {
    json calls = json::array();
    for (const ChatToolCall& call : tool_calls) {
      calls.push_back({{"id", call.id},
                       {"type", call.type},
                       {"function", {{"name", call.name}, {"arguments", call.arguments}}}});
    }
    message["tool_calls"] = std::move(calls);
  }
  return message;
}

OpenAiClient::OpenAiClient(HttpClient* http, const Credentials* credentials, std::string base_url,
                           OpenAiOptions options)
    : http_(http),
      credentials_(credentials),
      base_url_(std::string(absl::StripSuffix(base_url, "/"))),
      options_(std::move(options)) {}

absl::StatusOr<HttpResponse> OpenAiClient::Execute(Call& call, const CancelToken* cancel) {
  const std::string op = call.Name();
  absl::StatusOr<std::string> key = credentials_->ApiKey();
  if (!key.ok()) {
    return WithMessage(key.status(), absl::StrCat(op, ": ", key.status().message()));
  }
  HttpRequest request;
  request.method = call.method;
  request.url = absl::StrCat(base_url_, call.path);
  request.connect_timeout = options_.connect_timeout;
  request.total_timeout = options_.timeout;
  request.headers.Add("Authorization", absl::StrCat("Bearer ", *key));
  for (const auto& [name, value] : options_.extra_headers) request.headers.Add(name, value);
  if (call.has_json_body) {
    request.headers.Add("Content-Type", "application/json");
    request.body = std::move(call.json_body);
  }
  request.headers.Add("Accept", call.accept.empty() ? "application/json" : call.accept);
  request.multipart = std::move(call.parts);
  request.on_body_chunk = call.on_chunk;
  request.on_body_restart = call.on_restart;

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

absl::StatusOr<json> OpenAiClient::JsonCall(absl::string_view method, std::string path,
                                            const json* body, const CancelToken* cancel) {
  Call call;
  call.method = std::string(method);
  call.path = std::move(path);
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

absl::StatusOr<json> OpenAiClient::MultipartCall(std::string path, std::vector<MultipartPart> parts,
                                                 const CancelToken* cancel) {
  Call call;
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

absl::Status OpenAiClient::StreamCall(
    std::string path, const json* request,
    const std::function<absl::Status(const std::string&, const json&, bool*)>& on_event,
    const CancelToken* cancel) {
  Call call;
  call.method = request != nullptr ? "POST" : "GET";
  call.path = std::move(path);
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
      stream_status = on_event(event.event, data, &done);
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

// --- Files ---

absl::StatusOr<File> OpenAiClient::UploadFile(absl::string_view filename, absl::string_view bytes,
                                              absl::string_view purpose,
                                              const CancelToken* cancel) {
  std::vector<MultipartPart> parts;
  parts.push_back(MultipartPart{"purpose", "", "", std::string(purpose)});
  parts.push_back(
      MultipartPart{"file", std::string(filename), "application/octet-stream", std::string(bytes)});
  SANDGATE_ASSIGN_OR_RETURN(json j, MultipartCall("/files", std::move(parts), cancel));
  return ParseFile("openai POST /files", j);
}

absl::Status OpenAiClient::DeleteFile(absl::string_view file_id, const CancelToken* cancel) {
  return JsonCall("DELETE", absl::StrCat("/files/", Escape(file_id)), nullptr, cancel).status();
}

// --- Containers ---

absl::StatusOr<Container> OpenAiClient::CreateContainer(const ContainerSpec& spec,
                                                        const CancelToken* cancel) {
  if (spec.name.empty()) return errors::InvalidArgument("container name: required");
  json body = {{"name", spec.name}};
  if (!spec.file_ids.empty()) body["file_ids"] = spec.file_ids;
  if (!spec.memory_limit.empty()) body["memory_limit"] = spec.memory_limit;
  if (spec.expires_after_minutes > 0) {
    body["expires_after"] = {{"anchor", "last_active_at"}, {"minutes", spec.expires_after_minutes}};
  }
  if (spec.network_policy.has_value()) {
    if (spec.network_policy->type == NetworkPolicy::Type::kAllowlist &&
        spec.network_policy->allowed_domains.empty()) {
      return errors::InvalidArgument("network_policy.allowed_domains: at least one is required");
    }
    body["network_policy"] = NetworkPolicyJson(*spec.network_policy);
  }
  SANDGATE_ASSIGN_OR_RETURN(json j, JsonCall("POST", "/containers", &body, cancel));
  return ParseContainer("openai POST /containers", j);
}

absl::StatusOr<Container> OpenAiClient::RetrieveContainer(absl::string_view container_id,
                                                          const CancelToken* cancel) {
  SANDGATE_ASSIGN_OR_RETURN(
      json j, JsonCall("GET", absl::StrCat("/containers/", Escape(container_id)), nullptr, cancel));
  return ParseContainer("openai GET /containers", j);
}

absl::Status OpenAiClient::DeleteContainer(absl::string_view container_id,
                                           const CancelToken* cancel) {
  return JsonCall("DELETE", absl::StrCat("/containers/", Escape(container_id)), nullptr, cancel)
      .status();
}

absl::StatusOr<ContainerPage> OpenAiClient::ListContainers(const ListParams& params,
                                                           const CancelToken* cancel) {
  SANDGATE_ASSIGN_OR_RETURN(
      json j, JsonCall("GET", absl::StrCat("/containers", Query(params)), nullptr, cancel));
  ContainerPage page;
  for (const json& item : ListData(j)) {
    SANDGATE_ASSIGN_OR_RETURN(Container c, ParseContainer("openai GET /containers", item));
    page.data.push_back(std::move(c));
  }
  page.has_more = j.is_object() && j.value("has_more", false);
  page.last_id = StringField(j, "last_id");
  if (page.last_id.empty() && !page.data.empty()) page.last_id = page.data.back().id;
  return page;
}

// --- Container files ---

absl::StatusOr<ContainerFile> OpenAiClient::UploadContainerFile(absl::string_view container_id,
                                                                absl::string_view filename,
                                                                absl::string_view bytes,
                                                                const CancelToken* cancel) {
  std::vector<MultipartPart> parts;
  parts.push_back(
      MultipartPart{"file", std::string(filename), "application/octet-stream", std::string(bytes)});
  const std::string path = absl::StrCat("/containers/", Escape(container_id), "/files");
  SANDGATE_ASSIGN_OR_RETURN(json j, MultipartCall(path, std::move(parts), cancel));
  return ParseContainerFile(absl::StrCat("openai POST ", path), j);
}

absl::StatusOr<std::vector<ContainerFile>> OpenAiClient::ListContainerFiles(
    absl::string_view container_id, const CancelToken* cancel) {
  // A bound on pages, so a server that never stops saying has_more cannot loop us forever.
  constexpr int kMaxPages = 1000;
  const std::string path = absl::StrCat("/containers/", Escape(container_id), "/files");
  std::vector<ContainerFile> files;
  ListParams params;
  params.limit = 100;
  for (int page = 0; page < kMaxPages; ++page) {
    SANDGATE_ASSIGN_OR_RETURN(json j,
                              JsonCall("GET", absl::StrCat(path, Query(params)), nullptr, cancel));
    for (const json& item : ListData(j)) {
      SANDGATE_ASSIGN_OR_RETURN(ContainerFile f,
                                ParseContainerFile(absl::StrCat("openai GET ", path), item));
      files.push_back(std::move(f));
    }
    std::string last_id = StringField(j, "last_id");
    if (last_id.empty() && !ListData(j).empty()) last_id = StringField(ListData(j).back(), "id");
    const bool has_more = j.is_object() && j.value("has_more", false);
    if (!has_more) return files;
    if (last_id.empty() || last_id == params.after) {
      return errors::Internal(
          absl::StrCat("openai GET ", path, ": has_more without a new cursor; refusing to loop"));
    }
    params.after = std::move(last_id);
  }
  return errors::ResourceExhausted(
      absl::StrCat("openai GET ", path, ": more than ", kMaxPages, " pages of files"));
}

absl::StatusOr<std::string> OpenAiClient::ContainerFileContent(absl::string_view container_id,
                                                               absl::string_view file_id,
                                                               size_t max_bytes,
                                                               const CancelToken* cancel) {
  Call call;
  call.method = "GET";
  call.path =
      absl::StrCat("/containers/", Escape(container_id), "/files/", Escape(file_id), "/content");
  call.accept = "application/binary";
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
        absl::StrCat(op, ": file ", file_id, " is larger than ", max_bytes, " bytes"));
  }
  if (!response.ok()) return response.status();
  return content;
}

absl::Status OpenAiClient::DeleteContainerFile(absl::string_view container_id,
                                               absl::string_view file_id,
                                               const CancelToken* cancel) {
  return JsonCall("DELETE",
                  absl::StrCat("/containers/", Escape(container_id), "/files/", Escape(file_id)),
                  nullptr, cancel)
      .status();
}

// --- Responses ---

absl::StatusOr<json> OpenAiClient::CreateResponse(const json& request, const CancelToken* cancel) {
  return JsonCall("POST", "/responses", &request, cancel);
}

absl::StatusOr<json> OpenAiClient::CreateResponseStream(const json& request,
                                                        const JsonEventCallback& on_event,
                                                        const CancelToken* cancel) {
  return ResponseStream("openai POST /responses (stream)", "/responses", &request, on_event,
                        cancel);
}

absl::StatusOr<json> OpenAiClient::ResumeResponseStream(absl::string_view response_id,
                                                        int64_t starting_after,
                                                        const JsonEventCallback& on_event,
                                                        const CancelToken* cancel) {
  const std::string path = absl::StrCat("/responses/", Escape(response_id),
                                        "?stream=true&starting_after=", starting_after);
  return ResponseStream(absl::StrCat("openai GET /responses/", response_id, " (stream)"), path,
                        nullptr, on_event, cancel);
}

absl::StatusOr<json> OpenAiClient::ResponseStream(const std::string& op, std::string path,
                                                  const json* request,
                                                  const JsonEventCallback& on_event,
                                                  const CancelToken* cancel) {
  std::optional<json> final_response;
  auto handle = [&](const std::string& event_type, const json& data, bool* done) -> absl::Status {
    if (!data.is_object()) return absl::OkStatus();
    const std::string type = data.contains("type") ? StringField(data, "type") : event_type;
    if (on_event) SANDGATE_RETURN_IF_ERROR(on_event(data));
    if (type == "error") return StreamError(op, data);
    if (auto it = data.find("error"); it != data.end() && !it->is_null()) {
      return StreamError(op, it->is_object() ? *it : json{{"message", Dump(*it)}});
    }
    if (type == "response.completed" || type == "response.failed" ||
        type == "response.incomplete") {
      auto it = data.find("response");
      if (it == data.end() || !it->is_object()) {
        return errors::Internal(absl::StrCat(op, ": ", type, " without a response object"));
      }
      final_response = *it;
      *done = true;
    }
    return absl::OkStatus();
  };
  SANDGATE_RETURN_IF_ERROR(StreamCall(std::move(path), request, handle, cancel));
  if (!final_response.has_value()) {
    return BrokenStream(
        errors::Unavailable(absl::StrCat(op, ": the stream ended before a terminal event")));
  }
  return *std::move(final_response);
}

absl::StatusOr<json> OpenAiClient::RetrieveResponse(absl::string_view response_id,
                                                    const CancelToken* cancel) {
  return JsonCall("GET", absl::StrCat("/responses/", Escape(response_id)), nullptr, cancel);
}

absl::StatusOr<json> OpenAiClient::CancelResponse(absl::string_view response_id,
                                                  const CancelToken* cancel) {
  return JsonCall("POST", absl::StrCat("/responses/", Escape(response_id), "/cancel"), nullptr,
                  cancel);
}

// --- Chat Completions ---

absl::StatusOr<json> OpenAiClient::CreateChatCompletion(const json& request,
                                                        const CancelToken* cancel) {
  return JsonCall("POST", "/chat/completions", &request, cancel);
}

absl::StatusOr<ChatCompletionResult> OpenAiClient::CreateChatCompletionStream(
    const json& request, const JsonEventCallback& on_chunk, const CancelToken* cancel) {
  const std::string op = "openai POST /chat/completions (stream)";
  ChatCompletionResult result;
  std::map<int, ChatToolCall> calls;
  auto handle = [&](const std::string&, const json& chunk, bool*) -> absl::Status {
    if (!chunk.is_object()) return absl::OkStatus();
    if (on_chunk) SANDGATE_RETURN_IF_ERROR(on_chunk(chunk));
    if (auto it = chunk.find("error"); it != chunk.end() && !it->is_null()) {
      return StreamError(op, it->is_object() ? *it : json{{"message", Dump(*it)}});
    }
    if (result.id.empty()) result.id = StringField(chunk, "id");
    if (result.model.empty()) result.model = StringField(chunk, "model");
    if (auto it = chunk.find("usage"); it != chunk.end() && !it->is_null()) result.usage = *it;
    auto choices = chunk.find("choices");
    if (choices == chunk.end() || !choices->is_array()) return absl::OkStatus();
    for (const json& choice : *choices) {
      if (!choice.is_object() || IntField(choice, "index") != 0) continue;
      if (auto fr = choice.find("finish_reason"); fr != choice.end() && fr->is_string()) {
        result.finish_reason = fr->get<std::string>();
      }
      auto delta = choice.find("delta");
      if (delta == choice.end() || !delta->is_object()) continue;
      if (auto c = delta->find("content"); c != delta->end() && c->is_string()) {
        if (!result.content.has_value()) result.content.emplace();
        *result.content += c->get<std::string>();
      }
      auto tool_calls = delta->find("tool_calls");
      if (tool_calls == delta->end() || !tool_calls->is_array()) continue;
      for (const json& piece : *tool_calls) {
        const int index = static_cast<int>(IntField(piece, "index"));
        ChatToolCall& call = calls[index];
        call.index = index;
        if (std::string id = StringField(piece, "id"); !id.empty()) call.id = id;
        if (std::string type = StringField(piece, "type"); !type.empty()) call.type = type;
        auto fn = piece.find("function");
        if (fn == piece.end() || !fn->is_object()) continue;
        // The name comes whole in the first piece; some servers repeat it later.
        if (std::string name = StringField(*fn, "name"); !name.empty() && call.name.empty()) {
          call.name = name;
        }
        call.arguments += StringField(*fn, "arguments");
      }
    }
    return absl::OkStatus();
  };
  SANDGATE_RETURN_IF_ERROR(StreamCall("/chat/completions", &request, handle, cancel));
  for (auto& [index, call] : calls) result.tool_calls.push_back(std::move(call));
  return result;
}

}  // namespace sandgate::upstream
