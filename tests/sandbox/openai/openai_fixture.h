// The openai provider's test fixture: the fake OpenAI server (real HTTP on 127.0.0.1), a
// client with a retry policy that does not sleep, a journal, and the check that a test left
// nothing upstream. Shared by openai_provider_test.cc and openai_session_test.cc.
#ifndef SANDGATE_TESTS_SANDBOX_OPENAI_OPENAI_FIXTURE_H_
#define SANDGATE_TESTS_SANDBOX_OPENAI_OPENAI_FIXTURE_H_

#include <memory>
#include <string>

#include "absl/time/clock.h"
#include "gtest/gtest.h"
#include "sandbox/openai/openai_provider.h"
#include "tests/common/eventually.h"
#include "tests/fakes/fake_clock.h"
#include "tests/fakes/fake_credentials.h"
#include "tests/fakes/fake_journal.h"
#include "tests/fakes/openai/fake_openai_server.h"
#include "upstream/curl_http_client.h"
#include "upstream/retry.h"

namespace sandgate::sandbox {

class OpenAiFixture : public ::testing::Test {
 protected:
  void SetUp() override {
    ASSERT_TRUE(fake_.Start());
    upstream::RetryOptions ro;
    ro.sleep = [](absl::Duration, const CancelToken*) { return false; };
    http_ = std::make_unique<upstream::RetryingHttpClient>(&curl_, ro);
    client_ = std::make_unique<upstream::OpenAiClient>(http_.get(), &creds_, fake_.base_url());
  }
  void TearDown() override {
    // Whatever a test did, nothing may be left upstream.
    nlohmann::json state = fake_.State();
    EXPECT_TRUE(state["containers"].empty()) << state.dump();
    EXPECT_TRUE(state["files"].empty()) << state.dump();
  }

  std::unique_ptr<OpenAiProvider> Provider(OpenAiProviderOptions options = {}) {
    auto p = OpenAiProvider::Create(client_.get(), &journal_, options);
    EXPECT_TRUE(p.ok()) << p.status();
    return p.ok() ? std::move(*p) : nullptr;
  }
  // Options whose keeper waits on `clock` and may run `true` as its fallback touch.
  static OpenAiProviderOptions KeeperOptions(testing::FakeClock* clock) {
    OpenAiProviderOptions o = ClockedOptions(clock);
    o.keepalive_model = "fake-model";
    return o;
  }
  // The default options, with every wait (the keeper's, the looker's) and time on `clock`.
  static OpenAiProviderOptions ClockedOptions(testing::FakeClock* clock) {
    OpenAiProviderOptions o;
    o.clock = clock;
    return o;
  }
  static SessionSpec Spec(const std::string& id) {
    SessionSpec spec;
    spec.id = id;
    return spec;
  }
  // The entry of a daemon that asked for session `id`'s container just now and died before
  // the answer.
  static JournalEntry RequestedJustNow(const std::string& id) {
    return {OpenAiContainerJournalId(id),
            "openai",
            "container",
            {{"name", "sandgate-" + id},
             {"session", id},
             {"requested_at_ms", absl::ToUnixMillis(absl::Now())}}};
  }

  testing::FakeOpenAiServer fake_{"sk-provider-test-key"};
  upstream::CurlHttpClient curl_;
  testing::FakeCredentials creds_{"sk-provider-test-key"};
  std::unique_ptr<upstream::RetryingHttpClient> http_;
  std::unique_ptr<upstream::OpenAiClient> client_;
  testing::FakeJournal journal_;
};

}  // namespace sandgate::sandbox

#endif  // SANDGATE_TESTS_SANDBOX_OPENAI_OPENAI_FIXTURE_H_
