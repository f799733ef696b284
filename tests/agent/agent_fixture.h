// AgentFixture: the fake OpenAI server, an OpenAiClient pointed at it, an openai provider
// (hosted containers in the fake) and a host provider (local sessions), plus the
// financial-analyst task, for the openai and chat agent tests.
#ifndef SANDGATE_TESTS_AGENT_AGENT_FIXTURE_H_
#define SANDGATE_TESTS_AGENT_AGENT_FIXTURE_H_

#include <functional>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "absl/time/clock.h"
#include "agent/agent.h"
#include "gtest/gtest.h"
#include "playbooks/playbook.h"
#include "sandbox/openai/openai_provider.h"
#include "tests/agent/recording_sink.h"
#include "tests/fakes/fake_credentials.h"
#include "tests/fakes/fake_http_client.h"
#include "tests/fakes/fake_journal.h"
#include "tests/fakes/host_sandbox.h"
#include "tests/fakes/openai/fake_openai_server.h"
#include "tests/sandbox/openai/analyst_scenario.h"
#include "upstream/curl_http_client.h"
#include "upstream/retry.h"

namespace sandgate::testing {

inline constexpr char kInputName[] = "statements.csv";

class AgentFixture : public ::testing::Test {
 protected:
  void SetUp() override {
    ASSERT_TRUE(fake_.Start());
    upstream::RetryOptions ro;
    ro.sleep = [](absl::Duration, const CancelToken* c) { return c != nullptr && c->cancelled(); };
    http_ = std::make_unique<upstream::RetryingHttpClient>(&recorder_, ro);
    client_ = std::make_unique<upstream::OpenAiClient>(http_.get(), &creds_, fake_.base_url());
    auto p = sandbox::OpenAiProvider::Create(client_.get(), &journal_, {});
    ASSERT_TRUE(p.ok()) << p.status();
    hosted_provider_ = std::move(*p);
    auto pb = playbooks::FindPlaybook("financial-analyst");
    ASSERT_TRUE(pb.ok());
    playbook_ = *pb;
    inputs_ = {{kInputName, SampleStatementsCsv()}};
    task_.playbook = playbook_;
    task_.inputs = &inputs_;
    task_.settings = &settings_;
    task_.command_timeout = absl::Seconds(60);
  }
  void TearDown() override {
    session_.reset();  // closes (deletes the container)
    nlohmann::json state = fake_.State();
    EXPECT_TRUE(state["containers"].empty()) << state.dump();
    EXPECT_TRUE(state["files"].empty()) << state.dump();
    EXPECT_TRUE(journal_.List()->empty());
  }

  // A session with the input in place: hosted (openai provider) or local (host provider).
  sandbox::Session& NewSession(bool hosted, const std::string& id) {
    sandbox::SessionSpec spec;
    spec.id = id;
    auto s =
        hosted ? hosted_provider_->Create(spec, nullptr) : local_provider_.Create(spec, nullptr);
    EXPECT_TRUE(s.ok()) << s.status();
    session_ = std::move(*s);
    EXPECT_TRUE(session_->WriteFile(kInputName, inputs_[0].content, 0644).ok());
    return *session_;
  }

  // Collects the expected artifacts from the session and runs the playbook's verifier; returns
  // the names of failed checks (empty: verified).
  std::vector<std::string> VerifyArtifacts() {
    playbooks::Artifacts artifacts;
    for (const std::string& name : playbook_->ExpectedArtifacts()) {
      auto data = session_->ReadFile(name, 8 << 20);
      if (data.ok()) artifacts[name] = *data;
    }
    std::vector<std::string> failed;
    for (const playbooks::Check& c : playbook_->Verify(inputs_, settings_, artifacts).checks) {
      if (!c.passed) failed.push_back(c.name + ": " + c.detail);
    }
    return failed;
  }

  // Runs `run` and fires cancel_ once the agent has emitted an event of `type` (e.g. the
  // command's first output: it is running); returns what `run` returned.
  absl::Status RunCancelledOnce(const std::string& type, const std::function<absl::Status()>& run) {
    std::thread canceller([&] {
      EXPECT_TRUE(events_.AwaitType(type)) << "no " << type << " before the cancel";
      cancel_.Cancel("caller cancelled");
    });
    absl::Status st = run();
    canceller.join();
    return st;
  }

  FakeOpenAiServer fake_{"sk-agent-test-key-0123456789"};
  upstream::CurlHttpClient curl_;
  FakeHttpClient recorder_{&curl_};  // records every request, forwards it to the fake server
  FakeCredentials creds_{"sk-agent-test-key-0123456789"};
  std::unique_ptr<upstream::RetryingHttpClient> http_;
  std::unique_ptr<upstream::OpenAiClient> client_;
  FakeJournal journal_;
  std::unique_ptr<sandbox::OpenAiProvider> hosted_provider_;
  HostProvider local_provider_;
  std::unique_ptr<sandbox::Session> session_;
  const playbooks::Playbook* playbook_ = nullptr;
  std::vector<playbooks::InputFile> inputs_;
  playbooks::TaskSettings settings_;
  agent::AgentTask task_;
  RecordingSink events_;
  CancelToken cancel_;
};

}  // namespace sandgate::testing

#endif  // SANDGATE_TESTS_AGENT_AGENT_FIXTURE_H_
