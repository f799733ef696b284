// The openai agent against the fake OpenAI server: hosted shell on the openai provider, local
// shell on a host session, and every failure path.
#include "agent/openai_agent.h"

#include "absl/strings/match.h"
#include "absl/time/clock.h"
#include "agent/shell_output.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/agent/agent_fixture.h"

namespace sandgate::agent {
namespace {

using ::testing::HasSubstr;
using ::testing::IsEmpty;
using ::testing::StartsWith;

class OpenAiAgentTest : public testing::AgentFixture {
 protected:
  absl::Status RunAgent(sandbox::Session& session) {
    OpenAiAgent agent(client_.get(), {"fake-model", 30});
    EXPECT_EQ(agent.name(), "openai");
    return agent.Run(task_, session, events_, cancel_);
  }
  bool HasNotice(const std::string& text) {
    for (const auto& e : events_.OfType("notice")) {
      if (absl::StrContains(e.notice().message(), text)) return true;
    }
    return false;
  }
};

TEST_F(OpenAiAgentTest, HostedShellProducesVerifiedArtifactsAndRelaysCommands) {
  sandbox::Session& session = NewSession(true, "oa-hosted");
  fake_.Scenario(testing::AnalystTurns(testing::kInputName));
  absl::Status st = RunAgent(session);
  ASSERT_TRUE(st.ok()) << st;
  EXPECT_THAT(VerifyArtifacts(), IsEmpty());

  auto started = events_.OfType("command.started");
  auto finished = events_.OfType("command.finished");
  ASSERT_EQ(started.size(), 2u);
  ASSERT_EQ(finished.size(), 2u);
  EXPECT_THAT(started[0].command_started().argv(2), StartsWith("cat > analyze_financials.py"));
  EXPECT_EQ(started[0].command_started().step(), "agent");
  for (const auto& f : finished) EXPECT_EQ(f.command_finished().exit_code(), 0);
  // Output streamed from shell_call_output_content deltas (the `ls` after the program).
  EXPECT_THAT(events_.Output(started[1].command_started().command_id()),
              HasSubstr("calculated_metrics.csv"));
  auto messages = events_.OfType("agent_message");
  ASSERT_EQ(messages.size(), 1u);
  EXPECT_EQ(messages[0].agent_message().text(), "The six artifacts are written.");
  EXPECT_EQ(messages[0].agent_message().role(), "assistant");
  auto usage = events_.OfType("token_usage");
  ASSERT_EQ(usage.size(), 1u);
  EXPECT_GT(usage[0].token_usage().total_tokens(), 0u);
  EXPECT_TRUE(HasNotice("tokens in total"));
}

// Any session that offers a hosted shell gets the hosted path: the agent meets providers
// through the HostedShell capability, not one provider's class. This one forwards to a
// hosted session without being one.
class ForwardingHostedSession : public sandbox::Session, public sandbox::HostedShell {
 public:
  explicit ForwardingHostedSession(sandbox::Session& s) : s_(s), h_(*s.hosted_shell()) {}
  const std::string& id() const override { return s_.id(); }
  std::string workdir() const override { return s_.workdir(); }
  absl::StatusOr<sandbox::ExecResult> Exec(const sandbox::ExecRequest& r,
                                           const sandbox::OutputCallback& out,
                                           const CancelToken* cancel) override {
    return s_.Exec(r, out, cancel);
  }
  absl::Status WriteFile(absl::string_view path, absl::string_view data, int mode) override {
    return s_.WriteFile(path, data, mode);
  }
  absl::StatusOr<std::string> ReadFile(absl::string_view path, uint64_t max) override {
    return s_.ReadFile(path, max);
  }
  absl::StatusOr<sandbox::FileListing> ListFiles(absl::string_view dir) override {
    return s_.ListFiles(dir);
  }
  std::vector<std::string> Warnings() const override { return s_.Warnings(); }
  absl::Status Close() override { return absl::OkStatus(); }  // the fixture closes s_
  sandbox::HostedShell* hosted_shell() override { return this; }
  const std::string& container_id() const override { return h_.container_id(); }
  absl::Status CheckUsable() const override { return h_.CheckUsable(); }
  bool SaysExpired(const absl::Status& st) const override { return h_.SaysExpired(st); }
  absl::Status MarkExpired(absl::string_view said, absl::string_view during) override {
    return h_.MarkExpired(said, during);
  }

 private:
  sandbox::Session& s_;
  sandbox::HostedShell& h_;
};

TEST_F(OpenAiAgentTest, AnySessionWithAHostedShellGetsTheHostedPath) {
  sandbox::Session& hosted = NewSession(true, "oa-capability");
  ForwardingHostedSession session(hosted);
  fake_.Scenario(testing::AnalystTurns(testing::kInputName));
  absl::Status st = RunAgent(session);
  ASSERT_TRUE(st.ok()) << st;
  std::vector<nlohmann::json> sent = recorder_.JsonBodies("/responses");
  ASSERT_FALSE(sent.empty());
  EXPECT_EQ(sent[0]["tools"][0]["environment"]["type"], "container_reference");
  EXPECT_EQ(sent[0]["tools"][0]["environment"]["container_id"], session.container_id());
  EXPECT_EQ(sent[0]["background"], true);  // hosted responses are resumable
  EXPECT_THAT(VerifyArtifacts(), IsEmpty());
}

TEST_F(OpenAiAgentTest, HostedTimeoutsAndExitCodesAreRelayed) {
  sandbox::Session& session = NewSession(true, "oa-timeout");
  fake_.Scenario({{{"shell", {"echo out; echo err >&2; exit 4", "sleep 5"}}, {"timeout_ms", 300}},
                  {{"message", "done"}}});
  absl::Status st = RunAgent(session);
  ASSERT_TRUE(st.ok()) << st;
  auto started = events_.OfType("command.started");
  auto finished = events_.OfType("command.finished");
  ASSERT_EQ(finished.size(), 2u);
  EXPECT_EQ(finished[0].command_finished().exit_code(), 4);
  EXPECT_TRUE(finished[1].command_finished().timed_out());
  const std::string output = events_.Output(started[0].command_started().command_id());
  EXPECT_THAT(output, HasSubstr("out\n"));
  EXPECT_THAT(output, HasSubstr("err\n"));
}

TEST_F(OpenAiAgentTest, LocalShellRunsCommandsInTheSessionAndPostsOutputs) {
  sandbox::Session& session = NewSession(false, "oa-local");
  fake_.Scenario(testing::AnalystTurns(testing::kInputName));
  absl::Status st = RunAgent(session);
  ASSERT_TRUE(st.ok()) << st;
  EXPECT_THAT(VerifyArtifacts(), IsEmpty());
  EXPECT_EQ(events_.OfType("command.started").size(), 2u);
  EXPECT_EQ(events_.OfType("token_usage").size(), 2u);  // the shell_call, then the message
  EXPECT_EQ(events_.OfType("agent_message").size(), 1u);
}

TEST_F(OpenAiAgentTest, RequestsAskForAToolFirstThenChainWithTheOutputs) {
  sandbox::Session& session = NewSession(false, "oa-shape");
  fake_.Scenario({{{"shell", {"head -c 5000 /dev/zero | tr '\\0' x", "echo small"}},
                   {"max_output_length", 100}},
                  {{"message", "ok"}}});
  absl::Status st = RunAgent(session);
  ASSERT_TRUE(st.ok()) << st;  // the fake also validates the shell_call_output we posted
  std::vector<nlohmann::json> sent = recorder_.JsonBodies("/responses");
  ASSERT_EQ(sent.size(), 2u);
  EXPECT_EQ(sent[0]["tool_choice"], "required");
  EXPECT_EQ(sent[0]["model"], "fake-model");
  EXPECT_EQ(sent[0]["stream"], true);
  EXPECT_EQ(sent[0]["tools"][0]["type"], "shell");
  EXPECT_EQ(sent[0]["tools"][0]["environment"]["type"], "local");
  EXPECT_THAT(sent[0]["instructions"].get<std::string>(), HasSubstr(session.workdir()));
  EXPECT_FALSE(sent[0].contains("previous_response_id"));
  EXPECT_EQ(sent[1]["tool_choice"], "auto");
  EXPECT_TRUE(sent[1]["previous_response_id"].is_string());
  const nlohmann::json& out = sent[1]["input"][0];
  EXPECT_EQ(out["type"], "shell_call_output");
  EXPECT_EQ(out["max_output_length"], 100);
  ASSERT_EQ(out["output"].size(), 2u);
  const std::string cut = out["output"][0]["stdout"];
  EXPECT_EQ(Utf8Length(cut), 100u);  // head and tail of 5000 x's, the omission marked
  EXPECT_THAT(cut, HasSubstr("omitted"));
  EXPECT_EQ(cut.front(), 'x');
  EXPECT_EQ(cut.back(), 'x');
  EXPECT_EQ(out["output"][1]["stdout"], "small\n");
  EXPECT_EQ(out["output"][1]["outcome"]["exit_code"], 0);
}

// Issue 10 item 8: the API streams only the head of a long output and gives head, tail and
// stderr with the result; all of it reaches the event log, and the cut is flagged.
TEST_F(OpenAiAgentTest, LongHostedOutputKeepsHeadTailAndStderrAndIsFlagged) {
  sandbox::Session& session = NewSession(true, "oa-long-hosted");
  fake_.Scenario(
      {{{"shell", {"seq 1 3000; echo boom >&2", "echo small"}}, {"max_output_length", 1000}},
       {{"message", "ok"}}});
  absl::Status st = RunAgent(session);
  ASSERT_TRUE(st.ok()) << st;
  auto started = events_.OfType("command.started");
  auto finished = events_.OfType("command.finished");
  ASSERT_EQ(finished.size(), 2u);
  const std::string output = events_.Output(started[0].command_started().command_id());
  EXPECT_THAT(output, HasSubstr("1\n2\n3\n"));     // the head
  EXPECT_THAT(output, HasSubstr("2999\n3000\n"));  // the tail
  EXPECT_THAT(output, HasSubstr("boom"));          // stderr
  EXPECT_TRUE(finished[0].command_finished().output_truncated());
  EXPECT_EQ(events_.Output(started[1].command_started().command_id()), "small\n");
  EXPECT_FALSE(finished[1].command_finished().output_truncated());
}

TEST_F(OpenAiAgentTest, HostedRequestsReferenceTheSessionsContainer) {
  sandbox::Session& session = NewSession(true, "oa-shape-hosted");
  fake_.Scenario({{{"shell", {"true"}}}, {{"message", "ok"}}});
  ASSERT_TRUE(RunAgent(session).ok());
  std::vector<nlohmann::json> sent = recorder_.JsonBodies("/responses");
  ASSERT_EQ(sent.size(), 1u);
  EXPECT_EQ(sent[0]["tools"][0]["environment"]["type"], "container_reference");
  EXPECT_EQ(sent[0]["tools"][0]["environment"]["container_id"],
            session.hosted_shell()->container_id());
  EXPECT_THAT(sent[0]["instructions"].get<std::string>(), HasSubstr("/mnt/data"));
}

TEST_F(OpenAiAgentTest, GivesUpAfterMaxTurns) {
  sandbox::Session& session = NewSession(false, "oa-turns");
  nlohmann::json turns = nlohmann::json::array();
  for (int i = 0; i < 5; ++i) turns.push_back({{"shell", {"true"}}});
  fake_.Scenario(turns);
  task_.max_turns = 2;
  absl::Status st = RunAgent(session);
  EXPECT_EQ(st.code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_EQ(st.message(), "the model did not finish within 2 turns");
}

TEST_F(OpenAiAgentTest, FailedAndIncompleteResponsesFailClearly) {
  sandbox::Session& session = NewSession(false, "oa-fail");
  fake_.Scenario({{{"fail", {{"code", "server_error"}, {"message", "the model broke"}}}}});
  absl::Status st = RunAgent(session);
  EXPECT_EQ(st.code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_EQ(st.message(), "the model's response failed: server_error: the model broke");

  fake_.Scenario({{{"shell", {"true"}}}, {{"incomplete", "max_output_tokens"}}});
  st = RunAgent(session);
  EXPECT_EQ(st.message(), "the model's response was cut off (incomplete: max_output_tokens)");
}

TEST_F(OpenAiAgentTest, AnExpiredContainerFailsTheRun) {
  sandbox::Session& session = NewSession(true, "oa-expired");
  sandbox::HostedShell* hosted = session.hosted_shell();
  fake_.Scenario(testing::AnalystTurns(testing::kInputName));
  fake_.AdvanceClock(21 * 60);
  absl::Status st = RunAgent(session);
  EXPECT_EQ(st.code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(st.message(), HasSubstr("container " + hosted->container_id() + " expired"));
  EXPECT_EQ(session.ReadFile(testing::kInputName, 1 << 20).status().code(),
            absl::StatusCode::kFailedPrecondition);
}

TEST_F(OpenAiAgentTest, ABrokenStreamIsRetriedAsAWholeTurn) {
  sandbox::Session& session = NewSession(true, "oa-drop");
  fake_.Scenario(testing::AnalystTurns(testing::kInputName));
  fake_.Fault({{"path_prefix", "/v1/responses"}, {"drop_mid_stream", true}, {"after_frames", 12}});
  absl::Status st = RunAgent(session);
  ASSERT_TRUE(st.ok()) << st;
  EXPECT_TRUE(HasNotice("stream broke"));
  EXPECT_THAT(VerifyArtifacts(), IsEmpty());
  // Every relayed command was closed, also those of the broken attempt.
  EXPECT_EQ(events_.OfType("command.started").size(), events_.OfType("command.finished").size());
}

TEST_F(OpenAiAgentTest, RateLimitsServerErrorsAndSlowAnswersAreRetried) {
  sandbox::Session& session = NewSession(false, "oa-faults");
  fake_.Scenario(testing::AnalystTurns(testing::kInputName));
  fake_.Fault({{"path_prefix", "/v1/responses"}, {"status", 429}, {"retry_after", "1"}});
  fake_.Fault({{"path_prefix", "/v1/responses"}, {"status", 500}});
  fake_.Fault({{"path_prefix", "/v1/responses"}, {"delay_ms", 1500}});
  absl::Status st = RunAgent(session);
  ASSERT_TRUE(st.ok()) << st;
  EXPECT_THAT(VerifyArtifacts(), IsEmpty());
}

TEST_F(OpenAiAgentTest, PersistentServerErrorsFailTheRun) {
  sandbox::Session& session = NewSession(false, "oa-500");
  fake_.Scenario(testing::AnalystTurns(testing::kInputName));
  fake_.Fault({{"path_prefix", "/v1/responses"}, {"status", 500}, {"times", 10}});
  absl::Status st = RunAgent(session);
  EXPECT_EQ(st.code(), absl::StatusCode::kUnavailable);
  EXPECT_THAT(std::string(st.message()), StartsWith("the OpenAI Responses API: "));
  EXPECT_THAT(st.message(), HasSubstr("500"));
}

TEST_F(OpenAiAgentTest, AFunctionCallIsAnsweredWithAnError) {
  sandbox::Session& session = NewSession(false, "oa-func");
  fake_.Scenario({{{"function", {{"name", "search"}, {"arguments", "{}"}}}}, {{"message", "ok"}}});
  absl::Status st = RunAgent(session);
  EXPECT_TRUE(st.ok()) << st;
}

TEST_F(OpenAiAgentTest, CancellationStopsAHostedCommandStream) {
  sandbox::Session& session = NewSession(true, "oa-cancel");
  fake_.Scenario(
      {{{"shell", {"echo started; sleep 20"}}, {"timeout_ms", 25000}}, {{"message", "never"}}});
  absl::Time t0 = absl::Now();
  absl::Status st = RunCancelledOnce("command.output", [&] { return RunAgent(session); });
  EXPECT_EQ(st.code(), absl::StatusCode::kCancelled);
  EXPECT_LT(absl::Now() - t0, absl::Seconds(10));
  auto finished = events_.OfType("command.finished");
  ASSERT_EQ(finished.size(), 1u);
  EXPECT_TRUE(finished[0].command_finished().cancelled());
}

// A cancelled hosted turn stops its response upstream (POST /responses/{id}/cancel) with no
// token left to end that wait: an upstream that stalls on it held the run for the whole HTTP
// timeout (600 s, per attempt) before the run could end.
TEST_F(OpenAiAgentTest, ACancelledHostedRunDoesNotWaitOnAStalledStop) {
  sandbox::Session& session = NewSession(true, "oa-cancel-stall");
  fake_.Scenario(
      {{{"shell", {"echo started; sleep 20"}}, {"timeout_ms", 25000}}, {{"message", "never"}}});
  fake_.Fault({{"path_prefix", "/v1/responses/"}, {"method", "POST"}, {"delay_ms", 30000}});
  OpenAiAgent agent(client_.get(), {"fake-model", 30, absl::Seconds(1)});
  absl::Time t0 = absl::Now();
  absl::Status st = RunCancelledOnce("command.output",
                                     [&] { return agent.Run(task_, session, events_, cancel_); });
  EXPECT_EQ(st.code(), absl::StatusCode::kCancelled);
  EXPECT_LT(absl::Now() - t0, absl::Seconds(10));
  int stops = 0;
  for (const testing::RecordedRequest& r : recorder_.requests()) {
    if (!absl::EndsWith(r.url, "/cancel")) continue;
    ++stops;
    EXPECT_EQ(r.total_timeout, absl::Seconds(1));
  }
  EXPECT_EQ(stops, 1);  // sent, timed out, not repeated
}

TEST_F(OpenAiAgentTest, CancellationStopsALocalCommand) {
  sandbox::Session& session = NewSession(false, "oa-cancel-local");
  fake_.Scenario({{{"shell", {"echo started; sleep 20"}}}, {{"message", "never"}}});
  absl::Time t0 = absl::Now();
  absl::Status st = RunCancelledOnce("command.output", [&] { return RunAgent(session); });
  EXPECT_EQ(st.code(), absl::StatusCode::kCancelled);
  EXPECT_LT(absl::Now() - t0, absl::Seconds(10));
}

TEST_F(OpenAiAgentTest, NoModelAtAll) {
  sandbox::Session& session = NewSession(false, "oa-nomodel");
  OpenAiAgent agent(client_.get(), {"", 30});
  EXPECT_EQ(agent.Run(task_, session, events_, cancel_).code(), absl::StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace sandgate::agent
