// HttpClient: the one interface through which sandgate talks HTTP to an upstream API.
//
// Everything above it (retries, the OpenAI client, agents, providers) is written against this
// interface, so tests swap in a scripted fake and never touch the network. The real
// implementation is CurlHttpClient (curl_http_client.h); RetryingHttpClient (retry.h) decorates
// any HttpClient with the OpenAI retry policy.
//
//   HttpRequest req;
//   req.method = "POST";
//   req.url = "https://api.openai.com/v1/responses";
//   req.headers.Add("Content-Type", "application/json");
//   req.body = R"({"model":"gpt-5.5","input":"hi"})";
//   absl::StatusOr<HttpResponse> resp = client->Send(req, &cancel);
//   if (resp.ok() && resp->status == 200) Use(resp->body);
#ifndef SANDGATE_UPSTREAM_HTTP_CLIENT_H_
#define SANDGATE_UPSTREAM_HTTP_CLIENT_H_

#include <functional>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/time/time.h"
#include "common/cancel.h"

namespace sandgate::upstream {

// An ordered list of header fields; lookup by name ignores ASCII case, as HTTP requires.
// Not thread safe (a value type).
class HttpHeaders {
 public:
  void Add(std::string name, std::string value) {
    fields_.emplace_back(std::move(name), std::move(value));
  }
  // The value of the first field called `name`, or nullptr. Valid until the next Add.
  const std::string* Find(absl::string_view name) const;
  // The value of the first field called `name`, or "" when absent.
  std::string Get(absl::string_view name) const;
  bool empty() const { return fields_.empty(); }
  const std::vector<std::pair<std::string, std::string>>& fields() const { return fields_; }

 private:
  std::vector<std::pair<std::string, std::string>> fields_;
};

// One part of a multipart/form-data body. A part without a filename is a plain form field.
struct MultipartPart {
  std::string name;
  std::string filename;      // empty: no filename= in Content-Disposition
  std::string content_type;  // empty: none sent (plain field) or the transport's default
  std::string data;
};

// Called with consecutive pieces of a 2xx response body as they arrive. Return false to stop
// the transfer; Send then fails with ABORTED. Called on the thread that called Send.
using BodyChunkCallback = std::function<bool(absl::string_view chunk)>;

struct HttpRequest {
  std::string method = "GET";
  std::string url;
  HttpHeaders headers;
  // The request body. Ignored when `multipart` is not empty.
  std::string body;
  // When not empty the body is multipart/form-data made of these parts, and the transport
  // sets Content-Type (with its boundary) itself.
  std::vector<MultipartPart> multipart;
  absl::Duration connect_timeout = absl::Seconds(5);
  // Covers the whole exchange, including a streamed body.
  absl::Duration total_timeout = absl::Seconds(600);
  // When set, a 2xx body is handed here piece by piece instead of being collected in
  // HttpResponse::body (for Server-Sent Events and size-capped downloads). The body of any
  // other status is still collected in HttpResponse::body, so errors can be read.
  BodyChunkCallback on_body_chunk;
  // When set, the exchange may be repeated even after part of a streamed body reached
  // on_body_chunk (a download cut short is safe to fetch again): the retrying layer calls this
  // first, and the consumer drops what it had. Unset: a body that began is never repeated.
  std::function<void()> on_body_restart;
  // With on_body_chunk: called once the headers of a 2xx response have all arrived, before any
  // of its body (the request is now receiving whatever the server sends from here on). Return
  // false to stop the transfer; Send then fails with ABORTED. Called on the thread that called
  // Send, once per exchange (again if a retrying layer repeats it). A transport that cannot
  // tell calls it before the first piece of the body.
  std::function<bool()> on_stream_open;
};

struct HttpResponse {
  int status = 0;
  HttpHeaders headers;
  // The whole body; empty when it was handed to HttpRequest::on_body_chunk.
  std::string body;
};

// Thread safe: implementations must accept concurrent Send calls from many threads.
class HttpClient {
 public:
  virtual ~HttpClient() = default;

  // Performs one exchange. An HTTP error status is NOT a failed Status: the caller reads
  // HttpResponse::status. Failures: UNAVAILABLE (connection failed or dropped; message from the
  // transport), DEADLINE_EXCEEDED (connect or total timeout), CANCELLED (`cancel` fired),
  // ABORTED (on_body_chunk returned false), INVALID_ARGUMENT (malformed URL or method).
  // `cancel` may be null; it is only read during the call.
  virtual absl::StatusOr<HttpResponse> Send(const HttpRequest& request,
                                            const CancelToken* cancel) = 0;
};

// Header fields with the values of credential-bearing fields (Authorization, api-key, ...)
// replaced by "[REDACTED]", as a JSON-friendly list for debug logs.
std::vector<std::pair<std::string, std::string>> RedactedHeaders(const HttpHeaders& headers);

// `text` with every credential carried in `headers` (the whole value, and the token after
// "Bearer ") replaced by "[REDACTED]": for messages that came from elsewhere (a transport, a
// server) and are about to be logged.
std::string RedactSecrets(absl::string_view text, const HttpHeaders& headers);

}  // namespace sandgate::upstream

#endif  // SANDGATE_UPSTREAM_HTTP_CLIENT_H_
