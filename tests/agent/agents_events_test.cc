// The Agents API events (openai-api.md §7 shapes, recorded as JSON) as sandgate events.
#include "agent/agents_events.h"

#include <string>
#include <vector>

#include "absl/strings/match.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/agent/recording_sink.h"

namespace sandgate::agent {
namespace {

using nlohmann::json;
using ::testing::ElementsAre;
using ::testing::HasSubstr;
using ::testing::Not;

json Ev(const std::string& text) { return json::parse(text); }

// Feeds every event; returns the first end the mapper reports (nullopt when none).
std::optional<absl::Status> Feed(AgentsEventMapper& m, const std::vector<std::string>& events) {
  for (const std::string& e : events) {
    if (std::optional<absl::Status> end = m.OnEvent(Ev(e))) return end;
  }
  return std::nullopt;
}

TEST(AgentsEventMapperTest, CommandExecutionBecomesStartedOutputFinished) {
  testing::RecordingSink sink;
  AgentsEventMapper m(sink);
  std::optional<absl::Status> end = Feed(
      m,
      {R"({"type":"agent.session.turn.item.added","event_id":"e1","item":{"type":"command_execution","id":"ci_1","command":"python3 --version","cwd":"/workspace","status":"in_progress"}})",
       R"({"type":"agent.output.command_execution_output.delta","event_id":"e2","item_id":"ci_1","output_index":0,"delta":"Python "})",
       R"({"type":"agent.output.command_execution_output.delta","event_id":"e3","item_id":"ci_1","output_index":0,"delta":"3.12"})",
       R"({"type":"agent.session.turn.item.done","event_id":"e4","item":{"type":"command_execution","id":"ci_1","command":"python3 --version","cwd":"/workspace","exit_code":3,"duration_ms":1500,"output":"Python 3.12\n","status":"completed"}})"});
  EXPECT_FALSE(end.has_value());
  std::vector<v1::Event> started = sink.OfType("command.started");
  ASSERT_EQ(started.size(), 1u);
  EXPECT_THAT(started[0].command_started().argv(),
              ElementsAre("/bin/sh", "-c", "python3 --version"));
  EXPECT_EQ(started[0].command_started().step(), "agent");
  const uint32_t id = started[0].command_started().command_id();
  // Live deltas, then what the finished item added.
  EXPECT_EQ(sink.OfType("command.output").size(), 3u);
  EXPECT_EQ(sink.Output(id), "Python 3.12\n");
  std::vector<v1::Event> finished = sink.OfType("command.finished");
  ASSERT_EQ(finished.size(), 1u);
  EXPECT_EQ(finished[0].command_finished().command_id(), id);
  EXPECT_EQ(finished[0].command_finished().exit_code(), 3);
  EXPECT_EQ(finished[0].command_finished().duration().seconds(), 1);
  EXPECT_FALSE(finished[0].command_finished().output_truncated());
}

TEST(AgentsEventMapperTest, OutputOnlyInTheFinishedItemIsRelayedOnce) {
  testing::RecordingSink sink;
  AgentsEventMapper m(sink);
  Feed(
      m,
      {R"({"type":"agent.session.turn.item.done","item":{"type":"command_execution","id":"ci_2","command":["ls","-l"],"exit_code":0,"output":"a\nb\n"}})",
       R"({"type":"agent.session.turn.item.done","item":{"type":"command_execution","id":"ci_2","command":["ls","-l"],"exit_code":0,"output":"a\nb\n"}})"});
  ASSERT_EQ(sink.OfType("command.started").size(), 1u);
  EXPECT_THAT(sink.OfType("command.started")[0].command_started().argv(),
              ElementsAre("/bin/sh", "-c", "ls -l"));
  EXPECT_EQ(sink.Output(1), "a\nb\n");
  EXPECT_EQ(sink.OfType("command.finished").size(), 1u);
}

TEST(AgentsEventMapperTest, FinalOutputShorterThanTheDeltasIsFlaggedCut) {
  testing::RecordingSink sink;
  AgentsEventMapper m(sink);
  Feed(
      m,
      {R"({"type":"agent.session.turn.item.added","item":{"type":"command_execution","id":"c","command":"yes"}})",
       R"({"type":"agent.output.command_execution_output.delta","item_id":"c","delta":"y\ny\ny\n"})",
       R"({"type":"agent.session.turn.item.done","item":{"type":"command_execution","id":"c","exit_code":0,"output":"y\n...\ny\n"}})"});
  EXPECT_EQ(sink.Output(1), "y\ny\ny\n");
  ASSERT_EQ(sink.OfType("command.finished").size(), 1u);
  EXPECT_TRUE(sink.OfType("command.finished")[0].command_finished().output_truncated());
}

TEST(AgentsEventMapperTest, MessagesUsageAndTheCompletedTurn) {
  testing::RecordingSink sink;
  AgentsEventMapper m(sink);
  std::optional<absl::Status> end = Feed(
      m,
      {R"({"type":"agent.session.turn.item.done","item":{"type":"message","id":"m1","role":"assistant","content":[{"type":"output_text","text":"All six files are written."}]}})",
       R"({"type":"agent.session.turn.output_text.done","item_id":"m2","text":"from the text event"})",
       R"({"type":"agent.session.turn.item.done","item":{"type":"message","id":"m2","role":"assistant","content":[]}})",
       R"({"type":"agent.session.turn.item.done","item":{"type":"message","id":"m3","role":"user","content":[{"type":"input_text","text":"the brief"}]}})",
       R"({"type":"agent.session.turn.completed","turn":{"id":"turn_1","object":"agent.session.turn","status":"completed","usage":{"input_tokens":120,"output_tokens":30,"total_tokens":150}}})"});
  ASSERT_TRUE(end.has_value());
  EXPECT_TRUE(end->ok()) << *end;
  std::vector<v1::Event> messages = sink.OfType("agent_message");
  ASSERT_EQ(messages.size(), 2u);
  EXPECT_EQ(messages[0].agent_message().text(), "All six files are written.");
  EXPECT_EQ(messages[0].agent_message().role(), "assistant");
  EXPECT_EQ(messages[1].agent_message().text(), "from the text event");
  std::vector<v1::Event> usage = sink.OfType("token_usage");
  ASSERT_EQ(usage.size(), 1u);
  EXPECT_EQ(usage[0].token_usage().input_tokens(), 120u);
  EXPECT_EQ(usage[0].token_usage().output_tokens(), 30u);
  EXPECT_EQ(usage[0].token_usage().total_tokens(), 150u);
  m.Finish("gpt-test");
  EXPECT_THAT(sink.OfType("notice").back().notice().message(), HasSubstr("150 total"));
}

TEST(AgentsEventMapperTest, EnvironmentStatesAreNoticesAndResetFailsTheRun) {
  testing::RecordingSink sink;
  AgentsEventMapper m(sink);
  std::optional<absl::Status> end = Feed(
      m,
      {R"({"type":"agent.session.environment.pending","environment":{"id":"env_1","status":"pending","type":"openai_hosted"}})",
       R"({"type":"agent.session.environment.ready","environment":{"id":"env_1","status":"ready"}})",
       R"({"type":"agent.session.environment.connected","environment":{"id":"env_1","status":"connected"}})",
       R"({"type":"agent.session.environment.suspended","environment":{"id":"env_1","status":"suspended"}})",
       R"({"type":"agent.session.environment.hibernating","environment":{"id":"env_1"}})",
       R"({"type":"agent.session.turn.item.added","item":{"type":"command_execution","id":"ci_1","command":"sleep 100"}})",
       R"({"type":"agent.session.environment.reset","environment":{"id":"env_1","status":"connected"}})",
       R"({"type":"agent.session.turn.completed","turn":{"id":"turn_1"}})"});
  ASSERT_TRUE(end.has_value());
  EXPECT_EQ(end->code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(end->message(), HasSubstr("env_1 was reset mid-run"));
  std::vector<v1::Event> notices = sink.OfType("notice");
  ASSERT_EQ(notices.size(), 5u);
  EXPECT_EQ(notices[0].notice().message(), "Agents API environment env_1: pending");
  EXPECT_EQ(notices[0].notice().severity(), v1::Notice::SEVERITY_INFO);
  EXPECT_EQ(notices[3].notice().severity(), v1::Notice::SEVERITY_WARNING);  // suspended
  EXPECT_EQ(notices[4].notice().message(), "Agents API environment env_1: hibernating");
  // The command that was running when the sandbox was replaced ends without an exit code.
  std::vector<v1::Event> finished = sink.OfType("command.finished");
  ASSERT_EQ(finished.size(), 1u);
  EXPECT_EQ(finished[0].command_finished().exit_code(), -1);
}

// As the API (and the fake) send it: the reset names its environment at the top level.
TEST(AgentsEventMapperTest, AResetNamesTheEnvironmentItsEventNames) {
  testing::RecordingSink sink;
  AgentsEventMapper m(sink);
  std::optional<absl::Status> end = Feed(
      m, {R"({"type":"agent.session.environment.reset","event_id":"evt_9","session_id":"sess_1",)"
          R"("environment_id":"env_7","reset_count":1,"turn_id":"turn_1"})"});
  ASSERT_TRUE(end.has_value());
  EXPECT_THAT(end->message(), HasSubstr("environment env_7 was reset mid-run"));
  EXPECT_THAT(end->message(), Not(HasSubstr("unnamed")));
}

TEST(AgentsEventMapperTest, ExpiredAndFailedEnvironmentsFailTheRun) {
  for (
      const auto& [event, want] : std::vector<std::pair<std::string, std::string>>{
          {R"({"type":"agent.session.environment.expired","environment":{"id":"env_9"}})",
           "environment env_9 expired mid-run"},
          {R"({"type":"agent.session.environment.failed","environment":{"id":"env_9","error":{"code":"setup_failed","message":"setup command 1 exited 3"}}})",
           "env_9 failed: setup_failed: setup command 1 exited 3"},
          {R"({"type":"agent.session.turn.failed","turn":{"id":"t","status":"failed","error":{"code":"server_error","message":"boom"}}})",
           "the Agents API turn failed: server_error: boom"},
          {R"({"type":"agent.session.failed","session":{"id":"s","status":"failed","error":{"message":"quota"}}})",
           "the Agents API session failed: quota"},
          {R"({"type":"agent.session.turn.cancelled","turn":{"id":"t"}})", "cancelled the turn"},
          {R"({"type":"agent.session.requires_action","session":{"required_actions":[{"type":"function_call","call_id":"c"}]}})",
           "(function_call)"},
          {R"({"type":"error","error":{"code":"rate_limit_exceeded","message":"slow down"}})",
           "rate_limit_exceeded: slow down"}}) {
    testing::RecordingSink sink;
    AgentsEventMapper m(sink);
    std::optional<absl::Status> end = m.OnEvent(Ev(event));
    ASSERT_TRUE(end.has_value()) << event;
    EXPECT_EQ(end->code(), absl::StatusCode::kFailedPrecondition) << event;
    EXPECT_THAT(end->message(), HasSubstr(want));
  }
}

TEST(AgentsEventMapperTest, UnknownEventsAndFieldsAreTolerated) {
  testing::RecordingSink sink;
  AgentsEventMapper m(sink);
  std::optional<absl::Status> end = Feed(
      m,
      {R"({"type":"agent.session.created","session":{"id":"s","status":"brand_new_status"}})",
       R"({"type":"agent.session.subagent.spawned","subagent":{}})",
       R"({"type":"agent.something.new","x":1})", R"({"no_type":true})", R"([1,2])",
       R"({"type":"agent.session.turn.item.added","item":{"type":"web_search","id":"w"}})",
       R"({"type":"agent.output.command_execution_output.delta","item_id":"unknown","delta":"x"})",
       R"({"type":"agent.session.turn.item.done","item":"not an object"})"});
  EXPECT_FALSE(end.has_value());
  EXPECT_TRUE(sink.events().empty());
}

TEST(AgentsEventMapperTest, OpenCommandsEndCancelledWhenTheRunIs) {
  testing::RecordingSink sink;
  {
    AgentsEventMapper m(sink);
    m.OnEvent(Ev(
        R"({"type":"agent.session.turn.item.added","item":{"type":"command_execution","id":"a","command":"sleep 9"}})"));
    m.AbortOpen(true);
    m.AbortOpen(true);
  }
  std::vector<v1::Event> finished = sink.OfType("command.finished");
  ASSERT_EQ(finished.size(), 1u);
  EXPECT_TRUE(finished[0].command_finished().cancelled());
}

}  // namespace
}  // namespace sandgate::agent
