// The OpenAI retry policy (docs/openai-api.md §1, copied from openai-python's
// _base_client.py) and RetryingHttpClient, which applies it to any HttpClient.
//
// Policy:
//  - `x-should-retry: true|false` on the response decides, overriding everything below.
//  - Otherwise retry 408, 409, 429, >= 500 and connection errors (UNAVAILABLE from the
//    transport). Timeouts, cancellation and a stopped body callback are not retried.
//  - Never retry when the server asks for a wait above 120 s (Retry-After / retry-after-ms).
//  - Wait `retry-after-ms`, else `Retry-After` (float seconds or HTTP date) when in (0, 120] s;
//    otherwise min(0.5 * 2^n, 8) s * jitter, jitter in [0.75, 1], n = retries so far.
//  - At most `max_retries` retries (default 2), and never once a streaming body callback has
//    received data (the caller has already consumed part of the answer), unless the request
//    says how to start its body over (HttpRequest::on_body_restart, for downloads).
//  - This is the one place that decides whether and how often a call is tried: callers above
//    it (the OpenAI client, the agents) do not repeat a call that failed here.
//
//   CurlHttpClient curl;
//   RetryingHttpClient http(&curl, RetryOptions{});
//   OpenAiClient openai(&http, &credentials);
#ifndef SANDGATE_UPSTREAM_RETRY_H_
#define SANDGATE_UPSTREAM_RETRY_H_

#include <functional>
#include <optional>

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "common/cancel.h"
#include "common/clock.h"
#include "upstream/http_client.h"

namespace sandgate::upstream {

// What the policy decides about one attempt's outcome.
struct RetryDecision {
  bool retry = false;
  absl::Duration wait = absl::ZeroDuration();  // meaningful only when retry
};

// Pure function of the policy above. `outcome` is the attempt's result, `retries_so_far` is n
// (0 before the first retry), `uniform01` a random number in [0, 1] for the jitter (0 gives
// jitter 1, 1 gives 0.75), `now` is used to read an HTTP-date Retry-After. Does not look at
// max_retries or at whether a body callback saw data; RetryingHttpClient does.
RetryDecision DecideRetry(const absl::StatusOr<HttpResponse>& outcome, int retries_so_far,
                          double uniform01, absl::Time now);

// The server's requested wait from retry-after-ms or Retry-After, if either parses.
std::optional<absl::Duration> ParseRetryAfter(const HttpHeaders& headers, absl::Time now);

struct RetryOptions {
  int max_retries = 2;
  // Sleeps for `d` or until `cancel` (may be null) fires; returns true when cancelled.
  // Default: CancelToken::WaitFor, or absl::SleepFor without a token. Tests inject a recorder.
  std::function<bool(absl::Duration d, const CancelToken* cancel)> sleep;
  // Returns a uniform random number in [0, 1]. Default: a thread-local PRNG.
  std::function<double()> uniform01;
  // For HTTP-date Retry-After values. Null: Clock::Real(). Not owned; must outlive the client.
  const Clock* clock = nullptr;
  // Told of every attempt that did not succeed, and whether it will be retried (metrics).
  // Called on the sending thread; may be null.
  std::function<void(const HttpRequest& request, const absl::StatusOr<HttpResponse>& outcome,
                     bool retrying)>
      on_failed_attempt;
};

// What kind of upstream error an attempt's outcome is, for counting: the HTTP status ("429",
// "500", …), "connection" (could not connect or the connection broke) or "timeout"; nullopt
// when it is not the upstream's failure: a success, our own cancellation or a stopped body
// callback, a malformed request, or a DELETE answered 404 (already gone: what was asked).
std::optional<std::string> UpstreamErrorKind(const HttpRequest& request,
                                             const absl::StatusOr<HttpResponse>& outcome);

// The API a URL addresses, for a metric label: the first path segment after "v1"
// ("https://api.openai.com/v1/containers/c1/files" → "containers"), else the first segment;
// lower-case letters, digits and '_' only, at most 32 characters; "other" when none.
std::string EndpointLabel(absl::string_view url);

// Thread safe if `inner` is and the injected functions are. Does not own `inner`, which must
// outlive it.
class RetryingHttpClient : public HttpClient {
 public:
  RetryingHttpClient(HttpClient* inner, RetryOptions options);

  // The outcome of the last attempt: a response (possibly an HTTP error status after the
  // retries ran out) or the transport's failure. CANCELLED when `cancel` fires during a wait.
  absl::StatusOr<HttpResponse> Send(const HttpRequest& request, const CancelToken* cancel) override;

 private:
  HttpClient* const inner_;
  const RetryOptions options_;
};

}  // namespace sandgate::upstream

#endif  // SANDGATE_UPSTREAM_RETRY_H_
