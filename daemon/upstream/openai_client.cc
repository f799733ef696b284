#include "upstream/openai_client.h"

#include <map>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "common/errors.h"
#include "common/status_macros.h"
#include "upstream/sse.h"

namespace sandgate::upstream {

using nlohmann::json;

namespace {

std::string Query(const ListParams& p) {
  std::vector<std::string> terms;
  if (!p.after.empty()) terms.push_back(absl::StrCat("after=", Escape(p.after)));
  if (p.limit > 0) terms.push_back(absl::StrCat("limit=", p.limit));
  if (!p.order.empty()) terms.push_back(absl::StrCat("order=", Escape(p.order)));
  return terms.empty() ? "" : absl::StrCat("?", absl::StrJoin(terms, "&"));
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
    : transport_(http, credentials, std::move(base_url), std::move(options)) {}

// --- Files ---

absl::StatusOr<File> OpenAiClient::UploadFile(absl::string_view filename, absl::string_view bytes,
                                              absl::string_view purpose,
                                              const CancelToken* cancel) {
  std::vector<MultipartPart> parts;
  parts.push_back(MultipartPart{"purpose", "", "", std::string(purpose)});
  parts.push_back(
      MultipartPart{"file", std::string(filename), "application/octet-stream", std::string(bytes)});
  SANDGATE_ASSIGN_OR_RETURN(json j, transport_.MultipartCall("/files", std::move(parts), cancel));
  return ParseFile("openai POST /files", j);
}

absl::Status OpenAiClient::DeleteFile(absl::string_view file_id, const CancelToken* cancel) {
  return transport_.JsonCall("DELETE", absl::StrCat("/files/", Escape(file_id)), nullptr, cancel)
      .status();
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
  SANDGATE_ASSIGN_OR_RETURN(json j, transport_.JsonCall("POST", "/containers", &body, cancel));
  return ParseContainer("openai POST /containers", j);
}

absl::StatusOr<Container> OpenAiClient::RetrieveContainer(absl::string_view container_id,
                                                          const CancelToken* cancel) {
  SANDGATE_ASSIGN_OR_RETURN(
      json j, transport_.JsonCall("GET", absl::StrCat("/containers/", Escape(container_id)),
                                  nullptr, cancel));
  return ParseContainer("openai GET /containers", j);
}

absl::Status OpenAiClient::DeleteContainer(absl::string_view container_id,
                                           const CancelToken* cancel) {
  return transport_
      .JsonCall("DELETE", absl::StrCat("/containers/", Escape(container_id)), nullptr, cancel)
      .status();
}

absl::StatusOr<ContainerPage> OpenAiClient::ListContainers(const ListParams& params,
                                                           const CancelToken* cancel) {
  SANDGATE_ASSIGN_OR_RETURN(
      json j,
      transport_.JsonCall("GET", absl::StrCat("/containers", Query(params)), nullptr, cancel));
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
  SANDGATE_ASSIGN_OR_RETURN(json j, transport_.MultipartCall(path, std::move(parts), cancel));
  return ParseContainerFile(absl::StrCat("openai POST ", path), j);
}

absl::StatusOr<std::vector<ContainerFile>> OpenAiClient::ListContainerFiles(
    absl::string_view container_id, const CancelToken* cancel) {
  const std::string path = absl::StrCat("/containers/", Escape(container_id), "/files");
  const std::string op = absl::StrCat("openai GET ", path);
  return transport_.ListAllAs<ContainerFile>(
      path, [&](const json& item) { return ParseContainerFile(op, item); }, cancel);
}

absl::StatusOr<std::string> OpenAiClient::ContainerFileContent(absl::string_view container_id,
                                                               absl::string_view file_id,
                                                               size_t max_bytes,
                                                               const CancelToken* cancel) {
  return transport_.Download(
      absl::StrCat("/containers/", Escape(container_id), "/files/", Escape(file_id), "/content"),
      "application/binary", max_bytes, absl::StrCat("file ", file_id), cancel);
}

absl::Status OpenAiClient::DeleteContainerFile(absl::string_view container_id,
                                               absl::string_view file_id,
                                               const CancelToken* cancel) {
  return transport_
      .JsonCall("DELETE",
                absl::StrCat("/containers/", Escape(container_id), "/files/", Escape(file_id)),
                nullptr, cancel)
      .status();
}

// --- Responses ---

absl::StatusOr<json> OpenAiClient::CreateResponse(const json& request, const CancelToken* cancel) {
  return transport_.JsonCall("POST", "/responses", &request, cancel);
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
  auto handle = [&](const SseEvent& event, const json& data, bool* done) -> absl::Status {
    if (!data.is_object()) return absl::OkStatus();
    const std::string type = data.contains("type") ? StringField(data, "type") : event.event;
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
  SANDGATE_RETURN_IF_ERROR(transport_.StreamCall(std::move(path), request, handle, cancel));
  if (!final_response.has_value()) {
    return BrokenStream(
        errors::Unavailable(absl::StrCat(op, ": the stream ended before a terminal event")));
  }
  return *std::move(final_response);
}

absl::StatusOr<json> OpenAiClient::RetrieveResponse(absl::string_view response_id,
                                                    const CancelToken* cancel) {
  return transport_.JsonCall("GET", absl::StrCat("/responses/", Escape(response_id)), nullptr,
                             cancel);
}

absl::StatusOr<json> OpenAiClient::CancelResponse(absl::string_view response_id,
                                                  const CancelToken* cancel,
                                                  absl::Duration timeout) {
  return transport_.JsonCall("POST", absl::StrCat("/responses/", Escape(response_id), "/cancel"),
                             nullptr, cancel, {}, timeout);
}

// --- Chat Completions ---

absl::StatusOr<json> OpenAiClient::CreateChatCompletion(const json& request,
                                                        const CancelToken* cancel) {
  return transport_.JsonCall("POST", "/chat/completions", &request, cancel);
}

absl::StatusOr<ChatCompletionResult> OpenAiClient::CreateChatCompletionStream(
    const json& request, const JsonEventCallback& on_chunk, const CancelToken* cancel) {
  const std::string op = "openai POST /chat/completions (stream)";
  ChatCompletionResult result;
  std::map<int, ChatToolCall> calls;
  auto handle = [&](const SseEvent&, const json& chunk, bool*) -> absl::Status {
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
  SANDGATE_RETURN_IF_ERROR(transport_.StreamCall("/chat/completions", &request, handle, cancel));
  for (auto& [index, call] : calls) result.tool_calls.push_back(std::move(call));
  return result;
}

}  // namespace sandgate::upstream
