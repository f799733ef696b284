#include "upstream/retry.h"

#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/time/time.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/fakes/fake_clock.h"
#include "tests/fakes/fake_http_client.h"

namespace sandgate::upstream {
namespace {

using ::sandgate::testing::FakeClock;
using ::sandgate::testing::FakeHttpClient;
using ::sandgate::testing::ScriptedReply;
using ::testing::ElementsAre;

const absl::Time kNow = absl::FromUnixSeconds(1800000000);

absl::StatusOr<HttpResponse> Response(
    int status, std::vector<std::pair<std::string, std::string>> headers = {}) {
  HttpResponse r;
  r.status = status;
  for (auto& [k, v] : headers) r.headers.Add(k, v);
  return r;
}

struct StatusCase {
  int status;
  bool retry;
};

class RetryStatusTest : public ::testing::TestWithParam<StatusCase> {};

TEST_P(RetryStatusTest, RetriesExactlyThePolicyStatuses) {
  const StatusCase c = GetParam();
  EXPECT_EQ(DecideRetry(Response(c.status), 0, 0.0, kNow).retry, c.retry) << c.status;
}

INSTANTIATE_TEST_SUITE_P(Statuses, RetryStatusTest,
                         ::testing::Values(StatusCase{400, false}, StatusCase{401, false},
                                           StatusCase{403, false}, StatusCase{404, false},
                                           StatusCase{408, true}, StatusCase{409, true},
                                           StatusCase{413, false}, StatusCase{422, false},
                                           StatusCase{429, true}, StatusCase{500, true},
                                           StatusCase{502, true}, StatusCase{503, true},
                                           StatusCase{504, true}, StatusCase{599, true}));

TEST(RetryPolicyTest, ConnectionErrorsAreRetriedOtherFailuresAreNot) {
  EXPECT_TRUE(DecideRetry(absl::UnavailableError("refused"), 0, 0.0, kNow).retry);
  EXPECT_FALSE(DecideRetry(absl::DeadlineExceededError("slow"), 0, 0.0, kNow).retry);
  EXPECT_FALSE(DecideRetry(absl::CancelledError("stop"), 0, 0.0, kNow).retry);
  EXPECT_FALSE(DecideRetry(absl::AbortedError("consumer"), 0, 0.0, kNow).retry);
  EXPECT_FALSE(DecideRetry(absl::InvalidArgumentError("url"), 0, 0.0, kNow).retry);
}

TEST(RetryPolicyTest, ShouldRetryHeaderOverridesEverything) {
  EXPECT_TRUE(DecideRetry(Response(400, {{"x-should-retry", "true"}}), 0, 0.0, kNow).retry);
  EXPECT_FALSE(DecideRetry(Response(500, {{"X-Should-Retry", "false"}}), 0, 0.0, kNow).retry);
  EXPECT_FALSE(DecideRetry(Response(429, {{"x-should-retry", "false"}}), 0, 0.0, kNow).retry);
  // Even a Retry-After beyond 120 s: retried, but after the ordinary backoff.
  RetryDecision d = DecideRetry(Response(503, {{"x-should-retry", "true"}, {"retry-after", "300"}}),
                                0, 0.0, kNow);
  EXPECT_TRUE(d.retry);
  EXPECT_EQ(d.wait, absl::Milliseconds(500));
  // Any other value is ignored.
  EXPECT_FALSE(DecideRetry(Response(400, {{"x-should-retry", "yes"}}), 0, 0.0, kNow).retry);
}

struct WaitCase {
  std::vector<std::pair<std::string, std::string>> headers;
  bool retry;
  absl::Duration wait;  // with retries_so_far 0 and jitter 1 the backoff is 0.5 s
};

class RetryWaitTest : public ::testing::TestWithParam<WaitCase> {};

TEST_P(RetryWaitTest, HonoursServerRequestedWaits) {
  const WaitCase& c = GetParam();
  RetryDecision d = DecideRetry(Response(429, c.headers), 0, 0.0, kNow);
  EXPECT_EQ(d.retry, c.retry);
  if (c.retry) {
    EXPECT_EQ(d.wait, c.wait);
  }
}

INSTANTIATE_TEST_SUITE_P(
    Headers, RetryWaitTest,
    ::testing::Values(
        WaitCase{{}, true, absl::Milliseconds(500)},
        WaitCase{{{"retry-after-ms", "1500"}}, true, absl::Milliseconds(1500)},
        WaitCase{{{"Retry-After", "2"}}, true, absl::Seconds(2)},
        WaitCase{{{"retry-after", "2.5"}}, true, absl::Milliseconds(2500)},
        WaitCase{{{"retry-after", "120"}}, true, absl::Seconds(120)},
        WaitCase{{{"retry-after", "120.5"}}, false, absl::ZeroDuration()},
        WaitCase{{{"retry-after", "3600"}}, false, absl::ZeroDuration()},
        WaitCase{{{"retry-after-ms", "200000"}}, false, absl::ZeroDuration()},
        // retry-after-ms wins over Retry-After.
        WaitCase{
            {{"retry-after", "3600"}, {"retry-after-ms", "250"}}, true, absl::Milliseconds(250)},
        // A zero, negative or unparsable value falls back to the backoff.
        WaitCase{{{"retry-after", "0"}}, true, absl::Milliseconds(500)},
        WaitCase{{{"retry-after", "-3"}}, true, absl::Milliseconds(500)},
        WaitCase{{{"retry-after", "soon"}}, true, absl::Milliseconds(500)},
        WaitCase{{{"retry-after-ms", "abc"}, {"retry-after", "3"}}, true, absl::Seconds(3)},
        // An HTTP date 30 s after kNow (2027-01-15T08:00:00Z), and one 10 minutes after.
        WaitCase{{{"retry-after", "Fri, 15 Jan 2027 08:00:30 GMT"}}, true, absl::Seconds(30)},
        WaitCase{{{"retry-after", "Fri, 15 Jan 2027 08:10:00 GMT"}}, false, absl::ZeroDuration()},
        // A date in the past: backoff.
        WaitCase{
            {{"retry-after", "Thu, 01 Jan 2026 00:00:00 GMT"}}, true, absl::Milliseconds(500)}));

TEST(RetryPolicyTest, BackoffDoublesUpToEightSeconds) {
  const absl::Duration expected[] = {absl::Milliseconds(500), absl::Seconds(1), absl::Seconds(2),
                                     absl::Seconds(4),        absl::Seconds(8), absl::Seconds(8),
                                     absl::Seconds(8)};
  for (int n = 0; n < 7; ++n) {
    EXPECT_EQ(DecideRetry(Response(500), n, 0.0, kNow).wait, expected[n]) << "n=" << n;
  }
  EXPECT_EQ(DecideRetry(Response(500), 1000, 0.0, kNow).wait, absl::Seconds(8));
}

TEST(RetryPolicyTest, JitterStaysWithinThreeQuartersAndOne) {
  EXPECT_EQ(DecideRetry(Response(500), 0, 1.0, kNow).wait, absl::Milliseconds(375));
  EXPECT_EQ(DecideRetry(Response(500), 4, 1.0, kNow).wait, absl::Seconds(6));
  for (int i = 0; i <= 100; ++i) {
    const double u = i / 100.0;
    for (int n = 0; n < 6; ++n) {
      const absl::Duration base = DecideRetry(Response(500), n, 0.0, kNow).wait;
      const absl::Duration wait = DecideRetry(Response(500), n, u, kNow).wait;
      EXPECT_LE(wait, base);
      EXPECT_GE(wait, base * 0.75);
    }
  }
}

// Records the waits instead of sleeping; can cancel a token when asked to wait.
struct RecordingSleeper {
  std::vector<absl::Duration> waits;
  CancelToken* cancel_on_wait = nullptr;

  RetryOptions Options(int max_retries = 2) {
    RetryOptions o;
    o.max_retries = max_retries;
    o.sleep = [this](absl::Duration d, const CancelToken* cancel) {
      waits.push_back(d);
      if (cancel_on_wait != nullptr) cancel_on_wait->Cancel("test cancelled during the wait");
      return cancel != nullptr && cancel->cancelled();
    };
    o.uniform01 = [] { return 0.0; };
    return o;
  }
};

BodyChunkCallback AppendTo(std::string* seen) {
  return [seen](absl::string_view c) {
    seen->append(c.data(), c.size());
    return true;
  };
}

HttpRequest Get() {
  HttpRequest r;
  r.url = "http://127.0.0.1:1/v1/x";
  return r;
}

TEST(RetryingHttpClientTest, RetriesUntilSuccessWithGrowingBackoff) {
  FakeHttpClient inner;
  inner.Push(ScriptedReply::Status(500));
  inner.Push(ScriptedReply::Fail(absl::UnavailableError("connection reset")));
  inner.Push(ScriptedReply::Json(200, {{"ok", true}}));
  RecordingSleeper sleeper;
  RetryingHttpClient client(&inner, sleeper.Options());
  absl::StatusOr<HttpResponse> r = client.Send(Get(), nullptr);
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(r->status, 200);
  EXPECT_EQ(inner.requests().size(), 3u);
  EXPECT_THAT(sleeper.waits, ElementsAre(absl::Milliseconds(500), absl::Seconds(1)));
}

TEST(RetryingHttpClientTest, DefaultMaxRetriesIsTwoAndReturnsTheLastResponse) {
  FakeHttpClient inner;
  for (int i = 0; i < 4; ++i) inner.Push(ScriptedReply::Status(503));
  RecordingSleeper sleeper;
  RetryOptions options = sleeper.Options();
  options.max_retries = RetryOptions().max_retries;
  RetryingHttpClient client(&inner, options);
  absl::StatusOr<HttpResponse> r = client.Send(Get(), nullptr);
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(r->status, 503);
  EXPECT_EQ(inner.requests().size(), 3u);
  EXPECT_EQ(sleeper.waits.size(), 2u);
}

TEST(RetryingHttpClientTest, MaxRetriesIsConfigurable) {
  for (int max : {0, 1, 5}) {
    FakeHttpClient inner;
    for (int i = 0; i < 10; ++i) inner.Push(ScriptedReply::Fail(absl::UnavailableError("down")));
    RecordingSleeper sleeper;
    RetryingHttpClient client(&inner, sleeper.Options(max));
    EXPECT_EQ(client.Send(Get(), nullptr).status().code(), absl::StatusCode::kUnavailable);
    EXPECT_EQ(inner.requests().size(), static_cast<size_t>(max + 1)) << max;
  }
}

TEST(RetryingHttpClientTest, WaitsWhatRetryAfterSays) {
  FakeHttpClient inner;
  inner.Push(ScriptedReply::Status(429, {{"Retry-After", "7"}}));
  inner.Push(ScriptedReply::Status(429, {{"retry-after-ms", "20"}}));
  inner.Push(ScriptedReply::Status(200));
  RecordingSleeper sleeper;
  RetryingHttpClient client(&inner, sleeper.Options());
  ASSERT_TRUE(client.Send(Get(), nullptr).ok());
  EXPECT_THAT(sleeper.waits, ElementsAre(absl::Seconds(7), absl::Milliseconds(20)));
}

TEST(RetryingHttpClientTest, HttpDateRetryAfterUsesTheInjectedClock) {
  FakeClock clock(absl::FromUnixSeconds(1800000000));  // 2027-01-15T08:00:00Z
  FakeHttpClient inner;
  inner.Push(ScriptedReply::Status(503, {{"Retry-After", "Fri, 15 Jan 2027 08:00:42 GMT"}}));
  inner.Push(ScriptedReply::Status(200));
  RecordingSleeper sleeper;
  RetryOptions options = sleeper.Options();
  options.clock = &clock;
  RetryingHttpClient client(&inner, options);
  ASSERT_TRUE(client.Send(Get(), nullptr).ok());
  EXPECT_THAT(sleeper.waits, ElementsAre(absl::Seconds(42)));
}

TEST(RetryingHttpClientTest, RetryAfterBeyondTwoMinutesIsNotRetried) {
  FakeHttpClient inner;
  inner.Push(ScriptedReply::Status(429, {{"Retry-After", "121"}}));
  inner.Push(ScriptedReply::Status(200));
  RecordingSleeper sleeper;
  RetryingHttpClient client(&inner, sleeper.Options());
  absl::StatusOr<HttpResponse> r = client.Send(Get(), nullptr);
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(r->status, 429);
  EXPECT_EQ(inner.requests().size(), 1u);
  EXPECT_TRUE(sleeper.waits.empty());
}

TEST(RetryingHttpClientTest, ClientErrorsAreReturnedAtOnce) {
  FakeHttpClient inner;
  inner.Push(ScriptedReply::Status(400));
  RecordingSleeper sleeper;
  RetryingHttpClient client(&inner, sleeper.Options());
  EXPECT_EQ(client.Send(Get(), nullptr)->status, 400);
  EXPECT_EQ(inner.requests().size(), 1u);
}

TEST(RetryingHttpClientTest, CancelDuringTheWaitStopsWithCancelled) {
  FakeHttpClient inner;
  inner.Push(ScriptedReply::Status(500));
  inner.Push(ScriptedReply::Status(200));
  CancelToken cancel;
  RecordingSleeper sleeper;
  sleeper.cancel_on_wait = &cancel;
  RetryingHttpClient client(&inner, sleeper.Options());
  absl::StatusOr<HttpResponse> r = client.Send(Get(), &cancel);
  EXPECT_EQ(r.status().code(), absl::StatusCode::kCancelled);
  EXPECT_EQ(inner.requests().size(), 1u);
  EXPECT_EQ(sleeper.waits.size(), 1u);
}

TEST(RetryingHttpClientTest, NeverRetriesOnceTheStreamDeliveredData) {
  FakeHttpClient inner;
  ScriptedReply dropped = ScriptedReply::Stream({"data: {\"a\":1}\n\n"});
  dropped.error = absl::UnavailableError("connection dropped mid-body");
  inner.Push(dropped);
  inner.Push(ScriptedReply::Stream({"data: {\"a\":1}\n\n"}));
  RecordingSleeper sleeper;
  RetryingHttpClient client(&inner, sleeper.Options());
  HttpRequest req = Get();
  std::string seen;
  req.on_body_chunk = AppendTo(&seen);
  EXPECT_EQ(client.Send(req, nullptr).status().code(), absl::StatusCode::kUnavailable);
  EXPECT_EQ(inner.requests().size(), 1u);
  EXPECT_EQ(seen, "data: {\"a\":1}\n\n");
}

// A download is safe to repeat: one cut short is fetched again, the consumer told to start over.
TEST(RetryingHttpClientTest, ACutDownloadThatCanStartOverIsRetried) {
  FakeHttpClient inner;
  ScriptedReply cut = ScriptedReply::Stream({"hal"});
  cut.error = absl::UnavailableError("download cut after 3 of 6 bytes");
  inner.Push(cut);
  inner.Push(ScriptedReply::Stream({"half", "es"}));
  RecordingSleeper sleeper;
  RetryingHttpClient client(&inner, sleeper.Options());
  HttpRequest req = Get();
  std::string seen;
  int restarts = 0;
  req.on_body_chunk = AppendTo(&seen);
  req.on_body_restart = [&] {
    ++restarts;
    seen.clear();
  };
  ASSERT_TRUE(client.Send(req, nullptr).ok());
  EXPECT_EQ(inner.requests().size(), 2u);
  EXPECT_EQ(restarts, 1);
  EXPECT_EQ(seen, "halfes");
}

TEST(RetryingHttpClientTest, StreamingRequestFailingBeforeDataIsRetried) {
  FakeHttpClient inner;
  inner.Push(ScriptedReply::Status(429));
  inner.Push(ScriptedReply::Stream({"data: 1\n\n", "data: 2\n\n"}));
  RecordingSleeper sleeper;
  RetryingHttpClient client(&inner, sleeper.Options());
  HttpRequest req = Get();
  std::string seen;
  req.on_body_chunk = AppendTo(&seen);
  ASSERT_TRUE(client.Send(req, nullptr).ok());
  EXPECT_EQ(inner.requests().size(), 2u);
  EXPECT_EQ(seen, "data: 1\n\ndata: 2\n\n");
}

}  // namespace
TEST(RetryingHttpClientTest, EveryFailedAttemptIsReportedWithWhetherItIsRetried) {
  FakeHttpClient inner;
  inner.Push(ScriptedReply::Status(429));
  inner.Push(ScriptedReply::Fail(absl::UnavailableError("connection reset")));
  inner.Push(ScriptedReply::Status(500));  // the last retry: reported as not retried
  RecordingSleeper sleeper;
  RetryOptions options = sleeper.Options();
  std::vector<std::pair<std::string, bool>> seen;
  options.on_failed_attempt = [&seen](const HttpRequest& req,
                                      const absl::StatusOr<HttpResponse>& outcome, bool retrying) {
    seen.emplace_back(UpstreamErrorKind(req, outcome).value_or("-"), retrying);
  };
  RetryingHttpClient client(&inner, options);
  EXPECT_EQ(client.Send(Get(), nullptr)->status, 500);
  EXPECT_THAT(seen, ElementsAre(std::make_pair(std::string("429"), true),
                                std::make_pair(std::string("connection"), true),
                                std::make_pair(std::string("500"), false)));

  FakeHttpClient ok;
  ok.Push(ScriptedReply::Json(200, {{"ok", true}}));
  seen.clear();
  RetryingHttpClient quiet(&ok, options);
  ASSERT_TRUE(quiet.Send(Get(), nullptr).ok());
  EXPECT_TRUE(seen.empty()) << "a success is not reported";
}

TEST(UpstreamErrorKindTest, CountsOnlyTheUpstreamsFailures) {
  HttpRequest get = Get();
  HttpRequest del = Get();
  del.method = "DELETE";
  auto response = [](int status) {
    HttpResponse r;
    r.status = status;
    return absl::StatusOr<HttpResponse>(r);
  };
  EXPECT_EQ(UpstreamErrorKind(get, response(200)), std::nullopt);
  EXPECT_EQ(UpstreamErrorKind(get, response(429)), "429");
  EXPECT_EQ(UpstreamErrorKind(get, response(404)), "404");
  EXPECT_EQ(UpstreamErrorKind(del, response(404)), std::nullopt)
      << "already gone is what was asked";
  EXPECT_EQ(UpstreamErrorKind(del, response(500)), "500");
  EXPECT_EQ(UpstreamErrorKind(get, absl::UnavailableError("refused")), "connection");
  EXPECT_EQ(UpstreamErrorKind(get, absl::DeadlineExceededError("slow")), "timeout");
  EXPECT_EQ(UpstreamErrorKind(get, absl::CancelledError("ours")), std::nullopt);
  EXPECT_EQ(UpstreamErrorKind(get, absl::AbortedError("consumer stopped")), std::nullopt);
}

TEST(EndpointLabelTest, NamesTheApiNotTheObject) {
  EXPECT_EQ(EndpointLabel("https://api.openai.com/v1/containers/cntr_1/files?limit=5"),
            "containers");
  EXPECT_EQ(EndpointLabel("https://api.openai.com/v1/responses"), "responses");
  EXPECT_EQ(EndpointLabel("http://127.0.0.1:8080/openai/v1/chat/completions"), "chat");
  EXPECT_EQ(EndpointLabel("http://llm.internal/generate"), "generate");
  EXPECT_EQ(EndpointLabel("http://llm.internal"), "other");
  EXPECT_EQ(EndpointLabel("http://llm.internal/v1/Weird-Name"), "other");
  EXPECT_EQ(EndpointLabel("http://h/v1/Files"), "files");
}

}  // namespace sandgate::upstream
