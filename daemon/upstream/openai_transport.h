// OpenAiTransport: the request core every OpenAI API client shares (docs/openai-api.md §1).
//
// One implementation of what each call needs whatever the API: the base URL, the credential
// header with the key fetched for that call, extra headers, timeouts, the mapping of an
// upstream error to a Status, the redaction of the key from every message, JSON, multipart,
// Server-Sent-Events and size-capped download exchanges. OpenAiClient (Containers, Files,
// Responses, Chat) and AgentsClient (the beta Agents API) are thin typed layers over it, so a
// change to credential handling or error reporting lands in one place.
//
// An upstream HTTP error becomes a Status whose code follows the HTTP status (400
// INVALID_ARGUMENT, 401 UNAUTHENTICATED, 403 PERMISSION_DENIED, 404 NOT_FOUND, 408
// DEADLINE_EXCEEDED, 409 ABORTED, 429 RESOURCE_EXHAUSTED, 5xx UNAVAILABLE, other 4xx
// FAILED_PRECONDITION) and whose message carries the operation, the HTTP status, the upstream
// error.message, error.code and the x-request-id. The key never appears in a message or a log
// line (it is scrubbed even if a server echoes it).
//
// Retries are not done here: the HttpClient handed in is a RetryingHttpClient (retry.h) in the
// daemon, the one place that decides whether a call is tried again.
//
//   OpenAiTransport transport(&http, &key, "https://api.openai.com/v1", OpenAiOptions{});
//   SANDGATE_ASSIGN_OR_RETURN(nlohmann::json j,
//                             transport.JsonCall("GET", "/containers/cntr_1", nullptr, &cancel));
#ifndef SANDGATE_UPSTREAM_OPENAI_TRANSPORT_H_
#define SANDGATE_UPSTREAM_OPENAI_TRANSPORT_H_

#include <cstdint>
#include <functional>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/time/time.h"
#include "common/cancel.h"
#include "nlohmann/json.hpp"
#include "upstream/credentials.h"
#include "upstream/http_client.h"
#include "upstream/sse.h"

namespace sandgate::upstream {

inline constexpr absl::string_view kOpenAiDefaultBaseUrl = "https://api.openai.com/v1";

struct OpenAiOptions {
  absl::Duration connect_timeout = absl::Seconds(5);
  // For ordinary calls and for whole streams alike (the SDK default).
  absl::Duration timeout = absl::Seconds(600);
  // Sent with every request, e.g. {"OpenAI-Organization", "org-..."}.
  std::vector<std::pair<std::string, std::string>> extra_headers;
};

// Whether `status` says a streamed response broke after its events began to arrive: the one
// failure the HTTP layer cannot repeat (the caller already holds part of the answer), so only
// a caller that can start the whole exchange again may. Every other failure, an HTTP error
// status above all, has already been retried as often as the server's headers and the one
// retry policy (retry.h) allow, and must not be retried again.
bool IsBrokenStream(const absl::Status& status);

// `status` (its message kept) marked so that IsBrokenStream holds; the code becomes
// UNAVAILABLE.
absl::Status BrokenStream(const absl::Status& status);

// One exchange as a client describes it to the transport.
struct OpenAiCall {
  std::string method = "GET";
  std::string path;  // below the base URL, with its query
  std::string json_body;
  bool has_json_body = false;
  std::vector<MultipartPart> parts;
  std::string accept;                             // empty: application/json
  absl::Duration timeout = absl::ZeroDuration();  // zero: OpenAiOptions::timeout
  // Sent with this call only, after the transport's own (e.g. Idempotency-Key).
  std::vector<std::pair<std::string, std::string>> headers;
  BodyChunkCallback on_chunk;
  std::function<void()> on_restart;
  std::function<bool()> on_open;  // HttpRequest::on_stream_open

  // "openai GET /containers/cntr_1": the operation named in errors (the query left out).
  std::string Name() const;
};

// Called for each Server-Sent Event whose data is JSON (`[DONE]` and empty data are not
// passed on), in order, on the calling thread. Set `*done` to end the stream on purpose (the
// call then returns OK); a non-OK return stops it and becomes the call's result.
using SseJsonHandler =
    std::function<absl::Status(const SseEvent& event, const nlohmann::json& data, bool* done)>;

// Thread safe if the HttpClient and Credentials are: it holds no mutable state. `http` and
// `credentials` are not owned and must outlive it. `cancel` arguments may be null; a fired
// token makes the call fail with CANCELLED.
class OpenAiTransport {
 public:
  OpenAiTransport(HttpClient* http, const Credentials* credentials, std::string base_url,
                  OpenAiOptions options);

  const std::string& base_url() const { return base_url_; }

  // Sends `call` with the credential and common headers; a non-2xx status becomes the error
  // described above. Consumes the call's body and parts.
  absl::StatusOr<HttpResponse> Execute(OpenAiCall& call, const CancelToken* cancel) const;

  // `body` (may be null: none sent) as JSON; the response parsed (an empty body is {}).
  // `timeout` (zero: OpenAiOptions::timeout) bounds each attempt.
  absl::StatusOr<nlohmann::json> JsonCall(
      absl::string_view method, std::string path, const nlohmann::json* body,
      const CancelToken* cancel, std::vector<std::pair<std::string, std::string>> headers = {},
      absl::Duration timeout = absl::ZeroDuration()) const;
  // A multipart/form-data POST; the response parsed as JSON.
  absl::StatusOr<nlohmann::json> MultipartCall(std::string path, std::vector<MultipartPart> parts,
                                               const CancelToken* cancel) const;

  // POSTs `request` with "stream": true added, or GETs `path` when `request` is null, and
  // hands each event to `on_event`. Ends OK at `data: [DONE]`, when the handler sets done, or
  // at the end of the body. A stream that breaks (connection lost, UNAVAILABLE) after its body
  // began is UNAVAILABLE and IsBrokenStream; one that ends normally is OK, and the caller
  // decides whether an end without its terminal event is a break. `headers` as in JsonCall.
  // `timeout` (zero: OpenAiOptions::timeout) bounds the whole stream. `on_open` (optional)
  // runs once the stream is answered, before its first event (HttpRequest::on_stream_open):
  // setting `*done` ends the stream OK, a non-OK return ends it and becomes the result.
  using StreamOpened = std::function<absl::Status(bool* done)>;
  absl::Status StreamCall(std::string path, const nlohmann::json* request,
                          const SseJsonHandler& on_event, const CancelToken* cancel,
                          std::vector<std::pair<std::string, std::string>> headers = {},
                          absl::Duration timeout = absl::ZeroDuration(),
                          const StreamOpened& on_open = nullptr) const;

  // GETs the cursor list at `path` (which may carry a query already) page after page
  // (limit=100, after=<last id>) until has_more is false, calling `on_item` with each element
  // of "data". A server that says has_more without a new cursor fails with INTERNAL, and more
  // than `max_pages` pages with RESOURCE_EXHAUSTED, so it cannot loop us forever.
  absl::Status ListAll(const std::string& path,
                       const std::function<absl::Status(const nlohmann::json& item)>& on_item,
                       const CancelToken* cancel, int max_pages = 1000) const;
  // ListAll with each item read by `parse` (const json& → StatusOr<T>), whose first failure
  // ends the listing.
  template <typename T, typename Parse>
  absl::StatusOr<std::vector<T>> ListAllAs(const std::string& path, const Parse& parse,
                                           const CancelToken* cancel) const {
    std::vector<T> out;
    absl::Status s = ListAll(
        path,
        [&](const nlohmann::json& item) -> absl::Status {
          absl::StatusOr<T> parsed = parse(item);
          if (!parsed.ok()) return parsed.status();
          out.push_back(*std::move(parsed));
          return absl::OkStatus();
        },
        cancel);
    if (!s.ok()) return s;
    return out;
  }

  // GETs `path` as bytes (`accept` sent as Accept). More than `max_bytes` fails with
  // RESOURCE_EXHAUSTED as soon as they have actually arrived (whatever Content-Length says),
  // naming `what`, so a huge file is never held in memory. A download cut short is fetched
  // again from the start (it is safe to repeat).
  absl::StatusOr<std::string> Download(std::string path, absl::string_view accept, size_t max_bytes,
                                       absl::string_view what, const CancelToken* cancel) const;

 private:
  HttpClient* const http_;
  const Credentials* const credentials_;
  const std::string base_url_;
  const OpenAiOptions options_;
};

// --- Helpers for the typed clients (lenient readers of upstream JSON) ---

// Percent-encodes everything but RFC 3986 unreserved characters, so an id can never leave its
// path segment ("../", "?", "#").
std::string Escape(absl::string_view s);
// Compact JSON; invalid UTF-8 replaced rather than failing.
std::string Dump(const nlohmann::json& j);
// The string (or a number, printed) at `key`; "" when absent, null or another type.
std::string StringField(const nlohmann::json& j, const char* key);
// The integer at `key` (a float truncated); 0 when absent or not a number.
int64_t IntField(const nlohmann::json& j, const char* key);
// The "data" array of a list page; an empty array when there is none.
const nlohmann::json& ListData(const nlohmann::json& page);
// A body that is not JSON, quoted in a message: shortened and made printable.
std::string Excerpt(absl::string_view body);
// An error reported inside a stream ({message, type, code}) as a Status for operation `op`.
absl::Status StreamError(absl::string_view op, const nlohmann::json& error);

}  // namespace sandgate::upstream

#endif  // SANDGATE_UPSTREAM_OPENAI_TRANSPORT_H_
