#include "upstream/retry.h"

#include <algorithm>
#include <cmath>
#include <random>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"
#include "absl/time/clock.h"
#include "common/errors.h"
#include "common/log.h"

namespace sandgate::upstream {
namespace {

constexpr absl::Duration kMaxServerWait = absl::Seconds(120);
constexpr double kInitialBackoffSeconds = 0.5;
constexpr double kMaxBackoffSeconds = 8.0;

std::optional<double> ParseFiniteDouble(absl::string_view text) {
  double value = 0;
  if (!absl::SimpleAtod(absl::StripAsciiWhitespace(text), &value) || !std::isfinite(value)) {
    return std::nullopt;
  }
  return value;
}

double DefaultUniform01() {
  thread_local std::mt19937_64 rng{std::random_device{}()};
  return std::uniform_real_distribution<double>(0.0, 1.0)(rng);
}

bool DefaultSleep(absl::Duration d, const CancelToken* cancel) {
  if (cancel != nullptr) return cancel->WaitFor(d);
  absl::SleepFor(d);
  return false;
}

absl::Duration Backoff(int retries_so_far, double uniform01) {
  const double base = std::min(kInitialBackoffSeconds * std::pow(2.0, std::min(retries_so_far, 60)),
                               kMaxBackoffSeconds);
  const double jitter = 1.0 - 0.25 * std::clamp(uniform01, 0.0, 1.0);
  return absl::Seconds(base * jitter);
}

bool RetryableStatus(int status) {
  return status == 408 || status == 409 || status == 429 || status >= 500;
}

}  // namespace

std::optional<absl::Duration> ParseRetryAfter(const HttpHeaders& headers, absl::Time now) {
  if (const std::string* ms = headers.Find("retry-after-ms")) {
    if (std::optional<double> v = ParseFiniteDouble(*ms)) return absl::Milliseconds(*v);
  }
  const std::string* value = headers.Find("retry-after");
  if (value == nullptr) return std::nullopt;
  if (std::optional<double> v = ParseFiniteDouble(*value)) return absl::Seconds(*v);
  // An HTTP date (RFC 9110 IMF-fixdate), e.g. "Wed, 21 Oct 2015 07:28:00 GMT".
  absl::Time when;
  std::string err;
  if (absl::ParseTime("%a, %d %b %Y %H:%M:%S GMT", absl::StripAsciiWhitespace(*value),
                      absl::UTCTimeZone(), &when, &err)) {
    return when - now;
  }
  return std::nullopt;
}

RetryDecision DecideRetry(const absl::StatusOr<HttpResponse>& outcome, int retries_so_far,
                          double uniform01, absl::Time now) {
  RetryDecision decision;
  if (!outcome.ok()) {
    // Only a connection error is worth repeating; a timeout, a cancellation or a refused
    // argument would fail the same way again.
    decision.retry = outcome.status().code() == absl::StatusCode::kUnavailable;
    decision.wait = Backoff(retries_so_far, uniform01);
    return decision;
  }
  const HttpHeaders& headers = outcome->headers;
  const std::optional<absl::Duration> server_wait = ParseRetryAfter(headers, now);
  const std::string should_retry = headers.Get("x-should-retry");
  if (absl::EqualsIgnoreCase(should_retry, "true")) {
    decision.retry = true;
  } else if (absl::EqualsIgnoreCase(should_retry, "false")) {
    decision.retry = false;
  } else {
    decision.retry = RetryableStatus(outcome->status) &&
                     !(server_wait.has_value() && *server_wait > kMaxServerWait);
  }
  if (server_wait.has_value() && *server_wait > absl::ZeroDuration() &&
      *server_wait <= kMaxServerWait) {
    decision.wait = *server_wait;
  } else {
    decision.wait = Backoff(retries_so_far, uniform01);
  }
  return decision;
}

std::optional<std::string> UpstreamErrorKind(const HttpRequest& request,
                                             const absl::StatusOr<HttpResponse>& outcome) {
  if (outcome.ok()) {
    if (outcome->status < 400) return std::nullopt;
    if (outcome->status == 404 && request.method == "DELETE") return std::nullopt;
    return absl::StrCat(outcome->status);
  }
  switch (outcome.status().code()) {
    case absl::StatusCode::kUnavailable:
      return "connection";
    case absl::StatusCode::kDeadlineExceeded:
      return "timeout";
    default:
      return std::nullopt;
  }
}

std::string EndpointLabel(absl::string_view url) {
  size_t scheme = url.find("://");
  if (scheme != absl::string_view::npos) url.remove_prefix(scheme + 3);
  size_t end = url.find_first_of("?#");
  if (end != absl::string_view::npos) url = url.substr(0, end);
  size_t slash = url.find('/');
  url = slash == absl::string_view::npos ? absl::string_view() : url.substr(slash + 1);
  std::vector<absl::string_view> segments = absl::StrSplit(url, '/', absl::SkipEmpty());
  size_t i = 0;
  while (i < segments.size() && segments[i] != "v1") ++i;
  absl::string_view pick = i + 1 < segments.size() ? segments[i + 1]
                           : segments.empty()      ? ""
                                                   : segments[0];
  std::string label;
  for (char c : pick.substr(0, 32)) {
    if (!absl::ascii_isalnum(c) && c != '_') return "other";
    label.push_back(absl::ascii_tolower(c));
  }
  return label.empty() ? "other" : label;
}

RetryingHttpClient::RetryingHttpClient(HttpClient* inner, RetryOptions options)
    : inner_(inner), options_([&options] {
        if (!options.sleep) options.sleep = DefaultSleep;
        if (!options.uniform01) options.uniform01 = DefaultUniform01;
        if (options.clock == nullptr) options.clock = Clock::Real();
        return std::move(options);
      }()) {}

absl::StatusOr<HttpResponse> RetryingHttpClient::Send(const HttpRequest& request,
                                                      const CancelToken* cancel) {
  // Watch the body callback: once the caller has seen part of a body, a repeat would hand it
  // the same bytes twice.
  // Only a streaming request is copied (to wrap its callback); uploads can be large.
  bool body_delivered = false;
  std::optional<HttpRequest> watched;
  if (request.on_body_chunk) {
    watched.emplace(request);
    watched->on_body_chunk = [&body_delivered, &request](absl::string_view chunk) -> bool {
      if (!chunk.empty()) body_delivered = true;
      return request.on_body_chunk(chunk);
    };
  }
  const HttpRequest& to_send = watched.has_value() ? *watched : request;
  for (int retries = 0;; ++retries) {
    absl::StatusOr<HttpResponse> outcome = inner_->Send(to_send, cancel);
    if (outcome.ok() && outcome->status < 300) return outcome;
    RetryDecision decision;
    const bool repeatable = !body_delivered || request.on_body_restart;
    if (retries < options_.max_retries && repeatable &&
        (cancel == nullptr || !cancel->cancelled())) {
      decision = DecideRetry(outcome, retries, options_.uniform01(), options_.clock->Now());
    }
    if (options_.on_failed_attempt) options_.on_failed_attempt(request, outcome, decision.retry);
    if (!decision.retry) return outcome;
    log::Warning(
        "upstream.retry",
        {{"method", request.method},
         {"url", request.url},
         {"attempt", retries + 1},
         {"status", outcome.ok() ? outcome->status : 0},
         {"error", outcome.ok() ? std::string()
                                : RedactSecrets(outcome.status().message(), request.headers)},
         {"request_id", outcome.ok()
                            ? RedactSecrets(outcome->headers.Get("x-request-id"), request.headers)
                            : std::string()},
         {"wait_ms", absl::ToInt64Milliseconds(decision.wait)}});
    if (options_.sleep(decision.wait, cancel)) {
      return errors::Cancelled(absl::StrCat("waiting to retry ", request.method, " ", request.url,
                                            ": ", cancel != nullptr ? cancel->reason() : ""));
    }
    if (body_delivered) {
      request.on_body_restart();
      body_delivered = false;
    }
  }
}

}  // namespace sandgate::upstream
