// Named event constructors: every payload case has its type string, and each constructor
// fills the payload it names, with the type that payload means.
#include "common/events.h"

#include <map>
#include <set>
#include <string>

#include "gtest/gtest.h"

namespace sandgate {
namespace {

TEST(EventsTest, EveryPayloadCaseHasItsOwnTypeString) {
  // Clients filter on these strings: they are part of the API and may not change.
  const std::map<std::string, std::string> expected = {
      {"heartbeat", "heartbeat"},
      {"run_queued", "run.queued"},
      {"run_started", "run.started"},
      {"session_created", "session.created"},
      {"session_closed", "session.closed"},
      {"step_started", "step.started"},
      {"step_finished", "step.finished"},
      {"command_started", "command.started"},
      {"command_output", "command.output"},
      {"command_finished", "command.finished"},
      {"file_transferred", "file.transferred"},
      {"artifact_collected", "artifact.collected"},
      {"check", "check"},
      {"notice", "notice"},
      {"agent_message", "agent_message"},
      {"token_usage", "token_usage"},
      {"run_finished", "run.finished"},
      {"network", "network.decision"},
      {"session_expiring", "session.expiring"},
      {"events_dropped", "events.dropped"},
  };
  const google::protobuf::OneofDescriptor* payload =
      v1::Event::descriptor()->FindOneofByName("payload");
  ASSERT_NE(payload, nullptr);
  std::set<std::string> seen;
  for (int i = 0; i < payload->field_count(); ++i) {
    const google::protobuf::FieldDescriptor* field = payload->field(i);
    const std::string type(events::TypeOf(static_cast<v1::Event::PayloadCase>(field->number())));
    EXPECT_FALSE(type.empty()) << field->name() << " has no type string";
    EXPECT_TRUE(seen.insert(type).second) << type << " is used twice";
    auto it = expected.find(field->name());
    ASSERT_NE(it, expected.end()) << field->name() << ": add it to this table";
    EXPECT_EQ(type, it->second) << field->name();
  }
  EXPECT_EQ(seen.size(), expected.size());
  EXPECT_EQ(events::TypeOf(v1::Event::PAYLOAD_NOT_SET), "");
}

// The type of every constructed event is its payload's.
void ExpectTyped(const v1::Event& e, v1::Event::PayloadCase payload) {
  EXPECT_EQ(e.payload_case(), payload);
  EXPECT_EQ(e.type(), events::TypeOf(payload));
  EXPECT_TRUE(e.run_id().empty()) << "ids are the appender's";
}

TEST(EventsTest, ConstructorsFillThePayloadTheyName) {
  ExpectTyped(events::Heartbeat(), v1::Event::kHeartbeat);

  v1::Event queued = events::RunQueued(3);
  ExpectTyped(queued, v1::Event::kRunQueued);
  EXPECT_EQ(queued.run_queued().position(), 3u);

  v1::Event started = events::RunStarted("financial-analyst", "local", "reference", "m");
  ExpectTyped(started, v1::Event::kRunStarted);
  EXPECT_EQ(started.run_started().playbook(), "financial-analyst");
  EXPECT_EQ(started.run_started().provider(), "local");
  EXPECT_EQ(started.run_started().agent(), "reference");
  EXPECT_EQ(started.run_started().model(), "m");

  v1::Event closed = events::SessionClosed("s-1", "idle");
  ExpectTyped(closed, v1::Event::kSessionClosed);
  EXPECT_EQ(closed.session_closed().session_id(), "s-1");
  EXPECT_EQ(closed.session_closed().reason(), "idle");

  v1::Event step = events::StepStarted("validate", "python3 validate.py");
  ExpectTyped(step, v1::Event::kStepStarted);
  EXPECT_EQ(step.step_started().description(), "python3 validate.py");

  v1::Event command = events::CommandStarted(7, "setup", {"/bin/sh", "-c", "true"});
  ExpectTyped(command, v1::Event::kCommandStarted);
  EXPECT_EQ(command.command_started().command_id(), 7u);
  EXPECT_EQ(command.command_started().step(), "setup");
  ASSERT_EQ(command.command_started().argv_size(), 3);
  EXPECT_EQ(command.command_started().argv(2), "true");

  v1::Event output = events::CommandOutput(7, v1::CommandOutput::STREAM_STDERR, "oops");
  ExpectTyped(output, v1::Event::kCommandOutput);
  EXPECT_EQ(output.command_output().stream(), v1::CommandOutput::STREAM_STDERR);
  EXPECT_EQ(output.command_output().data(), "oops");

  v1::Event moved =
      events::FileTransferred(v1::FileTransferred::DIRECTION_INTO_SANDBOX, "in.csv", 12);
  ExpectTyped(moved, v1::Event::kFileTransferred);
  EXPECT_EQ(moved.file_transferred().path(), "in.csv");
  EXPECT_EQ(moved.file_transferred().size_bytes(), 12u);

  v1::Event notice = events::Notice(v1::Notice::SEVERITY_WARNING, "careful");
  ExpectTyped(notice, v1::Event::kNotice);
  EXPECT_EQ(notice.notice().severity(), v1::Notice::SEVERITY_WARNING);
  EXPECT_EQ(notice.notice().message(), "careful");

  v1::Event said = events::AgentMessage("assistant", "done");
  ExpectTyped(said, v1::Event::kAgentMessage);
  EXPECT_EQ(said.agent_message().text(), "done");

  v1::Event tokens = events::TokenUsage(1, 2, 3);
  ExpectTyped(tokens, v1::Event::kTokenUsage);
  EXPECT_EQ(tokens.token_usage().total_tokens(), 3u);

  v1::Event finished =
      events::RunFinished(v1::RUN_STATUS_FAILED, "verification failed", {"a", "b"});
  ExpectTyped(finished, v1::Event::kRunFinished);
  EXPECT_EQ(finished.run_finished().status(), v1::RUN_STATUS_FAILED);
  EXPECT_EQ(finished.run_finished().reason(), "verification failed");
  ASSERT_EQ(finished.run_finished().failed_checks_size(), 2);
  EXPECT_EQ(finished.run_finished().failed_checks(1), "b");

  // The constructors that take their payload whole keep it as given.
  v1::SessionCreated created;
  created.set_session_id("s-1");
  created.add_unenforced("memory limit");
  v1::Event made = events::SessionCreated(created);
  ExpectTyped(made, v1::Event::kSessionCreated);
  EXPECT_EQ(made.session_created().unenforced(0), "memory limit");
  v1::StepFinished step_done;
  step_done.set_ok(true);
  ExpectTyped(events::StepFinished(step_done), v1::Event::kStepFinished);
  v1::CommandFinished command_done;
  command_done.set_exit_code(4);
  EXPECT_EQ(events::CommandFinished(command_done).command_finished().exit_code(), 4);
  ExpectTyped(events::CommandFinished(command_done), v1::Event::kCommandFinished);
  v1::Artifact artifact;
  artifact.set_name("memo.md");
  EXPECT_EQ(events::ArtifactCollected(artifact).artifact_collected().artifact().name(), "memo.md");
  ExpectTyped(events::ArtifactCollected(artifact), v1::Event::kArtifactCollected);
  v1::CheckResult check;
  check.set_name("metrics_match");
  ExpectTyped(events::Check(check), v1::Event::kCheck);
  v1::NetworkDecision decision;
  decision.set_host("example.com");
  EXPECT_EQ(events::NetworkDecision(decision).network().host(), "example.com");
  ExpectTyped(events::NetworkDecision(decision), v1::Event::kNetwork);
  v1::SessionExpiring expiring;
  expiring.set_session_id("s-1");
  ExpectTyped(events::SessionExpiring(expiring), v1::Event::kSessionExpiring);
}

}  // namespace
}  // namespace sandgate
