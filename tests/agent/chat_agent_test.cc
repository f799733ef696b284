// The chat agent against the fake OpenAI server's Chat Completions, on host sessions.
#include "agent/chat_agent.h"

#include "absl/strings/match.h"
#include "absl/time/clock.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/agent/agent_fixture.h"

namespace sandgate::agent {
namespace {

using ::testing::HasSubstr;
using ::testing::IsEmpty;
using ::testing::StartsWith;

class ChatAgentTest : public testing::AgentFixture {
 protected:
  absl::Status RunAgent(sandbox::Session& session) {
    ChatAgent agent(client_.get(), {"local-model", 30});
    EXPECT_EQ(agent.name(), "chat");
    return agent.Run(task_, session, events_, cancel_);
  }
  std::vector<std::string> Notices() {
    std::vector<std::string> out;
    for (const auto& e : events_.OfType("notice")) out.push_back(e.notice().message());
    return out;
  }
};

TEST(ShellToolTest, SchemaIsTheDocumentedOne) {
  nlohmann::json tool = nlohmann::json::parse(kShellToolJson);
  EXPECT_EQ(tool["type"], "function");
  EXPECT_EQ(tool["function"]["name"], "shell");
  const auto& params = tool["function"]["parameters"];
  EXPECT_EQ(params["type"], "object");
  EXPECT_EQ(params["properties"]["commands"]["type"], "array");
  EXPECT_EQ(params["properties"]["commands"]["items"]["type"], "string");
  EXPECT_EQ(params["properties"]["timeout_ms"]["type"], "integer");
  EXPECT_EQ(params["required"], nlohmann::json::array({"commands"}));
}

TEST_F(ChatAgentTest, ProducesVerifiedArtifacts) {
  sandbox::Session& session = NewSession(false, "chat-ok");
  fake_.Scenario(testing::AnalystTurns(testing::kInputName));
  absl::Status st = RunAgent(session);
  ASSERT_TRUE(st.ok()) << st;
  EXPECT_THAT(VerifyArtifacts(), IsEmpty());
  EXPECT_EQ(events_.OfType("command.started").size(), 2u);
  EXPECT_EQ(events_.OfType("token_usage").size(), 2u);
  auto messages = events_.OfType("agent_message");
  ASSERT_EQ(messages.size(), 1u);
  EXPECT_EQ(messages[0].agent_message().text(), "The six artifacts are written.");
}

TEST_F(ChatAgentTest, MalformedArgumentsAreAnsweredNotFatal) {
  sandbox::Session& session = NewSession(false, "chat-bad");
  fake_.Scenario(
      {{{"function", {{"name", "shell"}, {"arguments", "{\"commands\":[\"ls\"]"}}}},
       {{"function", {{"name", "shell"}, {"arguments", "{\"commands\":\"ls\"}"}}}},
       {{"function",
         {{"name", "shell"}, {"arguments", "{\"commands\":[\"ls\"],\"timeout_ms\":\"x\"}"}}}},
       {{"function", {{"name", "python"}, {"arguments", "{}"}}}},
       {{"message", "giving up"}}});
  absl::Status st = RunAgent(session);
  ASSERT_TRUE(st.ok()) << st;
  std::vector<std::string> notices = Notices();
  int refused = 0;
  for (const auto& n : notices) refused += absl::StrContains(n, "was refused") ? 1 : 0;
  EXPECT_EQ(refused, 4);
  EXPECT_TRUE(events_.OfType("command.started").empty());
  // The last request carries four tool answers, each an error for the model.
  std::vector<nlohmann::json> sent = recorder_.JsonBodies("/chat/completions");
  ASSERT_EQ(sent.size(), 5u);
  int errors = 0;
  for (const auto& m : sent[4]["messages"]) {
    if (m["role"] != "tool") continue;
    EXPECT_THAT(m["content"].get<std::string>(), StartsWith("error: "));
    ++errors;
  }
  EXPECT_EQ(errors, 4);
  EXPECT_EQ(sent[0]["tools"][0], nlohmann::json::parse(kShellToolJson));
  EXPECT_EQ(sent[0]["messages"][0]["role"], "system");
}

TEST_F(ChatAgentTest, CutOffAnswerFails) {
  sandbox::Session& session = NewSession(false, "chat-length");
  fake_.Scenario({{{"incomplete", "max_output_tokens"}}});
  absl::Status st = RunAgent(session);
  EXPECT_EQ(st.code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_EQ(st.message(), "the model's answer was cut off at its token limit");
}

TEST_F(ChatAgentTest, ServerErrorsFailAfterRetries) {
  sandbox::Session& session = NewSession(false, "chat-500");
  fake_.Scenario({{{"fail", {{"code", "server_error"}, {"message", "overloaded"}}}}});
  absl::Status st = RunAgent(session);
  EXPECT_EQ(st.code(), absl::StatusCode::kUnavailable);
  EXPECT_THAT(std::string(st.message()), StartsWith("the chat completions API: "));
  EXPECT_THAT(st.message(), HasSubstr("overloaded"));
}

TEST_F(ChatAgentTest, ABrokenStreamIsRetried) {
  sandbox::Session& session = NewSession(false, "chat-drop");
  fake_.Scenario(testing::AnalystTurns(testing::kInputName));
  fake_.Fault(
      {{"path_prefix", "/v1/chat/completions"}, {"drop_mid_stream", true}, {"after_frames", 5}});
  fake_.Fault({{"path_prefix", "/v1/chat/completions"}, {"status", 429}, {"retry_after", "1"}});
  absl::Status st = RunAgent(session);
  ASSERT_TRUE(st.ok()) << st;
  EXPECT_THAT(VerifyArtifacts(), IsEmpty());
}

TEST_F(ChatAgentTest, GivesUpAfterMaxTurns) {
  sandbox::Session& session = NewSession(false, "chat-turns");
  nlohmann::json turns = nlohmann::json::array();
  for (int i = 0; i < 4; ++i) turns.push_back({{"shell", {"true"}}});
  fake_.Scenario(turns);
  task_.max_turns = 3;
  absl::Status st = RunAgent(session);
  EXPECT_EQ(st.message(), "the model did not finish within 3 turns");
}

TEST_F(ChatAgentTest, CancellationStopsTheCommand) {
  sandbox::Session& session = NewSession(false, "chat-cancel");
  fake_.Scenario({{{"shell", {"echo started; sleep 20"}}}, {{"message", "never"}}});
  absl::Status st = RunCancelledOnce("command.output", [&] { return RunAgent(session); });
  EXPECT_EQ(st.code(), absl::StatusCode::kCancelled);
}

TEST_F(ChatAgentTest, OnAHostedSessionTheModelIsToldCommandsCannotRun) {
  sandbox::Session& session = NewSession(true, "chat-hosted");
  fake_.Scenario({{{"shell", {"ls"}}}, {{"message", "cannot run"}}});
  absl::Status st = RunAgent(session);
  EXPECT_TRUE(st.ok()) << st;
}

}  // namespace
}  // namespace sandgate::agent
