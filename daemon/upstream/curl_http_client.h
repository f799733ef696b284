// CurlHttpClient: HttpClient over libcurl.
//
// Each calling thread gets its own libcurl handles (kept in thread-local storage so
// connections are reused across calls on that thread); a handle is never touched by two
// threads. Signals are never used (CURLOPT_NOSIGNAL). The transfer waits in curl_multi_poll
// together with the CancelToken's eventfd, so a cancellation ends a transfer at once rather
// than at libcurl's next progress tick. Redirects are not followed.
//
//   CurlHttpClient curl;
//   absl::StatusOr<HttpResponse> resp = curl.Send(request, &cancel);
#ifndef SANDGATE_UPSTREAM_CURL_HTTP_CLIENT_H_
#define SANDGATE_UPSTREAM_CURL_HTTP_CLIENT_H_

#include <string>

#include "upstream/http_client.h"

namespace sandgate::upstream {

struct CurlHttpClientOptions {
  std::string user_agent = "sandgate/0.1";
  // A CA bundle file; empty means libcurl's default.
  std::string ca_file;
};

// Thread safe: any number of threads may call Send at once.
class CurlHttpClient : public HttpClient {
 public:
  // Runs curl_global_init once per process (the first construction does it). No I/O.
  explicit CurlHttpClient(CurlHttpClientOptions options = {});

  // See HttpClient::Send. Connection failures are UNAVAILABLE carrying libcurl's message; a
  // connect or total timeout is DEADLINE_EXCEEDED; `cancel` firing is CANCELLED; a header name
  // or value containing CR/LF is INVALID_ARGUMENT. Logs one debug line per exchange with the
  // credential-bearing headers redacted.
  absl::StatusOr<HttpResponse> Send(const HttpRequest& request, const CancelToken* cancel) override;

 private:
  const CurlHttpClientOptions options_;
};

}  // namespace sandgate::upstream

#endif  // SANDGATE_UPSTREAM_CURL_HTTP_CLIENT_H_
