// OpenAiClient: the OpenAI HTTP API (docs/openai-api.md) as typed calls.
//
// Files, Containers, Container files, Responses and Chat Completions. Shapes the daemon reads
// field by field are small structs; open-ended shapes (Responses and Chat requests and
// results) stay nlohmann::json. The base URL is configurable, so any OpenAI-compatible server
// (a local vLLM, llama.cpp, Ollama, or the fake in tests/fakes/openai) works.
//
// Every call goes through OpenAiTransport (openai_transport.h): `Authorization: Bearer <key>`
// with the key fetched from Credentials for that call, errors as Statuses whose code follows
// the HTTP status and whose message names the operation and the upstream error, the key
// scrubbed from every message and log line.
//
// Retries are not done here: hand in a RetryingHttpClient (retry.h) for them.
//
//   CurlHttpClient curl;
//   RetryingHttpClient http(&curl, RetryOptions{});
//   EnvCredentials key("OPENAI_API_KEY");
//   OpenAiClient openai(&http, &key);
//   SANDGATE_ASSIGN_OR_RETURN(File f, openai.UploadFile("input.csv", csv, "user_data", &cancel));
//   ContainerSpec spec;
//   spec.name = "run-42";
//   spec.file_ids = {f.id};
//   SANDGATE_ASSIGN_OR_RETURN(Container c, openai.CreateContainer(spec, &cancel));
#ifndef SANDGATE_UPSTREAM_OPENAI_CLIENT_H_
#define SANDGATE_UPSTREAM_OPENAI_CLIENT_H_

#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/time/time.h"
#include "common/cancel.h"
#include "nlohmann/json.hpp"
#include "upstream/credentials.h"
#include "upstream/http_client.h"
#include "upstream/openai_transport.h"

namespace sandgate::upstream {

// Files API object (the fields sandgate reads).
struct File {
  std::string id;
  int64_t bytes = 0;
  std::string filename;
  std::string purpose;
};

struct DomainSecret {
  std::string domain;
  std::string name;
  std::string value;  // a secret: sent upstream, never logged
};

struct NetworkPolicy {
  enum class Type { kDisabled, kAllowlist };
  Type type = Type::kDisabled;
  std::vector<std::string> allowed_domains;  // kAllowlist: at least one
  std::vector<DomainSecret> domain_secrets;  // kAllowlist only; optional
};

struct ContainerSpec {
  std::string name;  // required
  std::vector<std::string> file_ids;
  std::string memory_limit;       // "1g" | "4g" | "16g" | "64g"; empty: server default
  int expires_after_minutes = 0;  // anchor last_active_at; 0: server default (20)
  std::optional<NetworkPolicy> network_policy;  // nullopt: server default
};

struct Container {
  std::string id;
  std::string name;
  std::string status;  // a free string upstream: "running", "active", "expired", ...
  int64_t created_at = 0;
  int64_t last_active_at = 0;     // 0 when absent
  int expires_after_minutes = 0;  // 0 when absent
  std::string memory_limit;
};

struct ContainerFile {
  std::string id;
  std::string path;  // where it is in the container, e.g. /mnt/data/...
  int64_t bytes = 0;
  std::string source;  // "user" or "assistant"
};

// Cursor paging for list calls; empty/zero fields are not sent.
struct ListParams {
  std::string after;
  int limit = 0;
  std::string order;  // "asc" | "desc"
};

struct ContainerPage {
  std::vector<Container> data;
  bool has_more = false;
  std::string last_id;  // pass as ListParams::after for the next page
};

// One tool call assembled from a Chat Completions stream.
struct ChatToolCall {
  int index = 0;
  std::string id;
  std::string type = "function";
  std::string name;
  std::string arguments;  // the concatenated pieces; a JSON string that may be invalid
};

// What a Chat Completions stream adds up to (choice 0).
struct ChatCompletionResult {
  std::optional<std::string> content;    // nullopt when the model sent no text
  std::vector<ChatToolCall> tool_calls;  // ordered by index
  std::string finish_reason;             // "stop" | "length" | "tool_calls" | ... | "" if none
  nlohmann::json usage;                  // null unless the server sent usage
  std::string id;
  std::string model;
  // The assistant message in request shape, ready to append to the next request's messages.
  nlohmann::json MessageJson() const;
};

// Called once per stream event, in order, on the thread that called Create*Stream. A non-OK
// return stops the stream and becomes the call's result.
using JsonEventCallback = std::function<absl::Status(const nlohmann::json& event)>;

// Thread safe if the HttpClient and Credentials are: the client holds no mutable state.
// `http` and `credentials` are not owned and must outlive the client. `cancel` arguments may
// be null; a fired token makes the call fail with CANCELLED.
class OpenAiClient {
 public:
  OpenAiClient(HttpClient* http, const Credentials* credentials,
               std::string base_url = std::string(kOpenAiDefaultBaseUrl),
               OpenAiOptions options = {});

  const std::string& base_url() const { return transport_.base_url(); }

  // --- Files (§2) ---
  absl::StatusOr<File> UploadFile(absl::string_view filename, absl::string_view bytes,
                                  absl::string_view purpose = "user_data",
                                  const CancelToken* cancel = nullptr);
  absl::Status DeleteFile(absl::string_view file_id, const CancelToken* cancel = nullptr);

  // --- Containers (§3) ---
  absl::StatusOr<Container> CreateContainer(const ContainerSpec& spec,
                                            const CancelToken* cancel = nullptr);
  absl::StatusOr<Container> RetrieveContainer(absl::string_view container_id,
                                              const CancelToken* cancel = nullptr);
  absl::Status DeleteContainer(absl::string_view container_id, const CancelToken* cancel = nullptr);
  absl::StatusOr<ContainerPage> ListContainers(const ListParams& params = {},
                                               const CancelToken* cancel = nullptr);

  // --- Container files (§4) ---
  absl::StatusOr<ContainerFile> UploadContainerFile(absl::string_view container_id,
                                                    absl::string_view filename,
                                                    absl::string_view bytes,
                                                    const CancelToken* cancel = nullptr);
  // Every file in the container: follows the cursor through all pages.
  absl::StatusOr<std::vector<ContainerFile>> ListContainerFiles(
      absl::string_view container_id, const CancelToken* cancel = nullptr);
  // The file's bytes. A file larger than `max_bytes` fails with RESOURCE_EXHAUSTED as soon as
  // more than `max_bytes` bytes have actually arrived (whatever Content-Length says), so a
  // huge file is never held in memory.
  absl::StatusOr<std::string> ContainerFileContent(absl::string_view container_id,
                                                   absl::string_view file_id, size_t max_bytes,
                                                   const CancelToken* cancel = nullptr);
  absl::Status DeleteContainerFile(absl::string_view container_id, absl::string_view file_id,
                                   const CancelToken* cancel = nullptr);

  // --- Responses (§5) ---
  // `request` is sent as is (model, input, tools, ...); the response object is returned.
  absl::StatusOr<nlohmann::json> CreateResponse(const nlohmann::json& request,
                                                const CancelToken* cancel = nullptr);
  // Sends `request` with "stream": true and calls `on_event` with each event's JSON. Returns
  // the `response` object of the terminal response.completed / response.failed /
  // response.incomplete event (check its "status"). An `error` event, or any event with a
  // non-null top-level "error", fails the call with the upstream message and code; a stream
  // that ends without a terminal event, or breaks once events arrived, is UNAVAILABLE and
  // IsBrokenStream. Never retried once events arrived.
  absl::StatusOr<nlohmann::json> CreateResponseStream(const nlohmann::json& request,
                                                      const JsonEventCallback& on_event,
                                                      const CancelToken* cancel = nullptr);
  // Streams a background response (one created with "background": true and stored) again:
  // its events numbered above `starting_after` (-1: all of them), then the rest as they come,
  // until its terminal event; otherwise as CreateResponseStream. This is how a caller that
  // lost a response's stream picks it up where it broke instead of creating it again
  // (GET /responses/{id}?stream=true&starting_after=N; openai-python ResponseRetrieveParams).
  absl::StatusOr<nlohmann::json> ResumeResponseStream(absl::string_view response_id,
                                                      int64_t starting_after,
                                                      const JsonEventCallback& on_event,
                                                      const CancelToken* cancel = nullptr);
  absl::StatusOr<nlohmann::json> RetrieveResponse(absl::string_view response_id,
                                                  const CancelToken* cancel = nullptr);
  // `timeout` (zero: OpenAiOptions::timeout) bounds each attempt: a caller stopping a
  // response because its own run was cancelled has no token left to stop the wait with.
  absl::StatusOr<nlohmann::json> CancelResponse(absl::string_view response_id,
                                                const CancelToken* cancel = nullptr,
                                                absl::Duration timeout = absl::ZeroDuration());

  // --- Chat Completions (§6) ---
  absl::StatusOr<nlohmann::json> CreateChatCompletion(const nlohmann::json& request,
                                                      const CancelToken* cancel = nullptr);
  // Sends `request` with "stream": true, calls `on_chunk` with each chunk's JSON, and
  // assembles choice 0: content, tool calls by index (arguments concatenated), finish_reason,
  // usage (ask for it with "stream_options": {"include_usage": true}). Ends at `data: [DONE]`
  // or at the end of the body.
  absl::StatusOr<ChatCompletionResult> CreateChatCompletionStream(
      const nlohmann::json& request, const JsonEventCallback& on_chunk,
      const CancelToken* cancel = nullptr);

 private:
  absl::StatusOr<nlohmann::json> ResponseStream(const std::string& op, std::string path,
                                                const nlohmann::json* request,
                                                const JsonEventCallback& on_event,
                                                const CancelToken* cancel);

  const OpenAiTransport transport_;
};

}  // namespace sandgate::upstream

#endif  // SANDGATE_UPSTREAM_OPENAI_CLIENT_H_
