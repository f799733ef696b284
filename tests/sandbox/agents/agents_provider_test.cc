// The openai-agents provider against the fake OpenAI server: nothing is made upstream until the
// agent runs; the session is journaled before its create and its id recorded; files after the
// create are refused; Close and Sweep cancel and delete; an entry whose id was never learned is
// swept by the session's metadata, and kept while a create could still be landing.
#include "sandbox/agents/agents_provider.h"

#include <memory>
#include <string>

#include "absl/strings/str_replace.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/fakes/fake_clock.h"
#include "tests/fakes/fake_credentials.h"
#include "tests/fakes/fake_journal.h"
#include "tests/fakes/openai/fake_openai_server.h"
#include "upstream/curl_http_client.h"
#include "upstream/retry.h"

namespace sandgate::sandbox {
namespace {

using nlohmann::json;
using ::testing::ElementsAre;
using ::testing::HasSubstr;

class AgentsProviderTest : public ::testing::Test {
 protected:
  void SetUp() override {
    ASSERT_TRUE(fake_.Start());
    upstream::RetryOptions ro;
    ro.sleep = [](absl::Duration, const CancelToken*) { return false; };
    http_ = std::make_unique<upstream::RetryingHttpClient>(&curl_, ro);
    upstream::AgentsOptions agents_options;
    // A stream that waits for an end that never comes fails the test instead of hanging it.
    agents_options.stream_timeout = absl::Seconds(60);
    client_ = std::make_unique<upstream::AgentsClient>(http_.get(), &creds_, fake_.base_url(),
                                                       agents_options);
    AgentsProviderOptions options;
    options.clock = &clock_;
    provider_ = *AgentsProvider::Create(client_.get(), &journal_, options);
  }
  void TearDown() override { EXPECT_EQ(fake_.State()["agents"]["sessions"], json::array()); }

  std::unique_ptr<Session> Make(const std::string& id) {
    SessionSpec spec;
    spec.id = id;
    spec.memory_bytes = 1ull << 30;
    absl::StatusOr<std::unique_ptr<Session>> s = provider_->Create(spec, nullptr);
    EXPECT_TRUE(s.ok()) << s.status();
    return std::move(*s);
  }

  // Runs the scripted agent's input `$ <command>` (one command a line) and stops at the
  // turn's end; `seen`, when given, gets every event the agent was handed.
  absl::Status RunCommand(Session& s, const std::string& command,
                          std::vector<json>* seen = nullptr) {
    CancelToken cancel;
    return s.hosted_agent()->Run(
        {"fake-model", "brief", "$ " + absl::StrReplaceAll(command, {{"\n", "\n$ "}})},
        [seen](const json& e) -> std::optional<absl::Status> {
          if (seen != nullptr) seen->push_back(e);
          if (e.value("type", "") == "agent.session.turn.completed") return absl::OkStatus();
          return std::nullopt;
        },
        cancel);
  }

  testing::FakeOpenAiServer fake_{"sk-agents-provider-test"};
  upstream::CurlHttpClient curl_;
  testing::FakeCredentials creds_{"sk-agents-provider-test"};
  std::unique_ptr<upstream::RetryingHttpClient> http_;
  std::unique_ptr<upstream::AgentsClient> client_;
  testing::FakeJournal journal_;
  testing::FakeClock clock_;
  std::unique_ptr<AgentsProvider> provider_;
};

TEST_F(AgentsProviderTest, NothingIsMadeOrJournaledBeforeTheAgentRuns) {
  std::unique_ptr<Session> s = Make("s-idle");
  ASSERT_TRUE(s->WriteFile("in.txt", "hello\n", 0644).ok());
  ASSERT_TRUE(s->hosted_agent()->AddSetupCommand("true").ok());
  EXPECT_EQ(s->Exec({}, nullptr, nullptr).status().code(), absl::StatusCode::kUnimplemented);
  EXPECT_TRUE(s->Close().ok());
  EXPECT_TRUE(journal_.List()->empty());
  EXPECT_EQ(fake_.State()["requests"], json::array());
}

TEST_F(AgentsProviderTest, RunJournalsCreatesAndCloseDeletes) {
  std::unique_ptr<Session> s = Make("s-run");
  ASSERT_TRUE(s->WriteFile("in.txt", "hello\n", 0644).ok());
  ASSERT_TRUE(s->hosted_agent()->AddSetupCommand("mkdir -p /workspace/outputs").ok());
  ASSERT_TRUE(RunCommand(*s, "wc -l < /workspace/in.txt > /workspace/outputs/count.txt").ok());
  std::vector<JournalEntry> entries = *journal_.List();
  ASSERT_EQ(entries.size(), 1u);
  EXPECT_EQ(entries[0].id, AgentsSessionJournalId("s-run"));
  EXPECT_EQ(entries[0].kind, "agent_session");
  EXPECT_TRUE(entries[0].durable);
  EXPECT_FALSE(entries[0].details.value("agent_session_id", "").empty());
  // After the create, the environment's files and setup are fixed.
  EXPECT_EQ(s->WriteFile("late.txt", "x", 0644).code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_EQ(s->hosted_agent()->AddSetupCommand("true").code(),
            absl::StatusCode::kFailedPrecondition);
  EXPECT_EQ(*s->ReadFile("count.txt", 100), "1\n");
  EXPECT_EQ(s->ReadFile("count.txt", 1).status().code(), absl::StatusCode::kResourceExhausted);
  EXPECT_EQ(s->ReadFile("absent.txt", 100).status().code(), absl::StatusCode::kNotFound);
  FileListing listing = *s->ListFiles("");
  ASSERT_EQ(listing.entries.size(), 1u);
  EXPECT_EQ(listing.entries[0].path, "count.txt");
  EXPECT_THAT(*s->ReadFile(kAgentsEventsArtifact, 1 << 20),
              HasSubstr("\"agent.session.turn.completed\""));
  EXPECT_EQ(s->hosted_agent()->Run({}, nullptr, CancelToken()).code(),
            absl::StatusCode::kFailedPrecondition);
  EXPECT_TRUE(s->Close().ok());
  EXPECT_TRUE(journal_.List()->empty());
}

TEST_F(AgentsProviderTest, SweepCancelsAndDeletesWhatAKilledDaemonLeft) {
  std::unique_ptr<Session> s = Make("s-left");
  ASSERT_TRUE(RunCommand(*s, "true").ok());
  std::vector<JournalEntry> entries = *journal_.List();
  ASSERT_EQ(entries.size(), 1u);
  // As if the daemon were killed before closing it: the next one sweeps the entry.
  EXPECT_EQ(fake_.State()["agents"]["sessions"].size(), 1u);
  EXPECT_TRUE(provider_->Sweep(entries[0]).ok());
  EXPECT_TRUE(journal_.List()->empty());
  EXPECT_TRUE(provider_->Sweep(entries[0]).ok()) << "already gone counts as deleted";
  EXPECT_TRUE(s->Close().ok()) << "already gone counts as deleted";

  // An entry whose create never answered, and nothing upstream names it: while a create could
  // still be landing it is kept (UNAVAILABLE: asked again later); after that it is erased.
  JournalEntry lost = entries[0];
  lost.details.erase("agent_session_id");
  ASSERT_TRUE(journal_.Record(lost).ok());
  absl::Status st = provider_->Sweep(lost);
  EXPECT_EQ(st.code(), absl::StatusCode::kUnavailable) << st;
  EXPECT_THAT(st.message(), HasSubstr("sandgate_session=s-left"));
  EXPECT_TRUE(journal_.Has(lost.id));
  clock_.Advance(absl::Minutes(2));
  EXPECT_TRUE(provider_->Sweep(lost).ok());
  EXPECT_FALSE(journal_.Has(lost.id));
}

TEST_F(AgentsProviderTest, SweepFindsASessionWhoseIdWasNeverLearnedByItsMetadata) {
  std::unique_ptr<Session> other = Make("s-other");
  ASSERT_TRUE(RunCommand(*other, "true").ok());
  std::unique_ptr<Session> s = Make("s-unnamed");
  ASSERT_TRUE(RunCommand(*s, "true").ok());
  JournalEntry lost, kept;
  std::vector<JournalEntry> entries = *journal_.List();
  for (const JournalEntry& e : entries)
    (e.id == AgentsSessionJournalId("s-other") ? kept : lost) = e;
  // As if the daemon were killed after sending the create, before the first event named it.
  lost.details.erase("agent_session_id");
  ASSERT_TRUE(journal_.Record(lost).ok());
  ASSERT_EQ(fake_.State()["agents"]["sessions"].size(), 2u);

  EXPECT_TRUE(provider_->Sweep(lost).ok());
  EXPECT_FALSE(journal_.Has(lost.id));
  json left = fake_.State()["agents"]["sessions"];
  ASSERT_EQ(left.size(), 1u) << "only the session whose metadata names the entry is deleted";
  EXPECT_EQ(left[0]["id"], kept.details.value("agent_session_id", ""));
  EXPECT_TRUE(s->Close().ok()) << "already gone counts as deleted";
  EXPECT_TRUE(other->Close().ok());
}

// The type of each event, with "+" for one read back from the session's turns and items.
std::vector<std::string> Types(const std::vector<json>& events) {
  std::vector<std::string> out;
  for (const json& e : events) {
    out.push_back(e.value("type", "") + (e.value("sandgate_read_back", false) ? "+" : ""));
  }
  return out;
}

// A server that streams only live events (no replay) cuts the create stream as the first
// command starts and answers the reconnect only once the turn is over: the whole rest of the
// turn, its end included, falls in the gap. The run ends at once with the gap's items, in
// order, read back from the session's turns and items (without them it waits for an end that
// never streams, until the stream's timeout).
TEST_F(AgentsProviderTest, ATurnThatEndsWhileTheStreamReconnectsEndsTheRunWithTheGapsItems) {
  fake_.AgentsStream(
      {{"replay", false}, {"hold_next", 1}, {"cut_after_type", "agent.session.turn.item.added"}});
  std::unique_ptr<Session> s = Make("s-gap");
  std::vector<json> seen;
  absl::Status ran = RunCommand(*s, "echo one\necho two", &seen);
  ASSERT_TRUE(ran.ok()) << ran;
  std::vector<std::string> types = Types(seen);
  ASSERT_GE(types.size(), 7u);
  EXPECT_THAT(std::vector<std::string>(types.end() - 7, types.end()),
              ElementsAre("agent.session.turn.item.added",    // echo one, streamed
                          "agent.session.turn.item.done+",    // echo one
                          "agent.session.turn.item.added+",   // echo two
                          "agent.session.turn.item.done+",    // echo two
                          "agent.session.turn.item.added+",   // the final message
                          "agent.session.turn.item.done+",    // the final message
                          "agent.session.turn.completed+"));  // with its usage
  const json& two = seen[seen.size() - 4]["item"];
  EXPECT_EQ(two["command"], "echo two");
  EXPECT_EQ(two["output"], "two\n");
  EXPECT_EQ(two["exit_code"], 0);
  EXPECT_TRUE(seen.back()["turn"]["usage"].is_object());
  // What the agent was handed is what agents-events.jsonl keeps.
  EXPECT_THAT(*s->ReadFile(kAgentsEventsArtifact, 1 << 20), HasSubstr("\"sandgate_read_back\""));
  EXPECT_TRUE(s->Close().ok());
}

// As outside testing saw it: a create stream cut before its first event named the session.
// The session exists upstream; Close finds it by its sandgate_session metadata and deletes it
// while the daemon runs, and the journal entry goes (no restart's sweep needed).
TEST_F(AgentsProviderTest, ACreateCutBeforeTheSessionIsNamedIsFoundAndDeletedAtClose) {
  fake_.Fault({{"path_prefix", "/v1/agents/sessions"},
               {"method", "POST"},
               {"drop_mid_stream", true},
               {"after_frames", 0}});
  std::unique_ptr<Session> s = Make("s-cut");
  absl::Status ran = RunCommand(*s, "true");
  EXPECT_EQ(ran.code(), absl::StatusCode::kUnavailable) << ran;
  EXPECT_THAT(ran.message(), HasSubstr("before the session was named"));
  ASSERT_TRUE(journal_.Has(AgentsSessionJournalId("s-cut")));
  ASSERT_EQ(fake_.State()["agents"]["sessions"].size(), 1u);
  absl::Status closed = s->Close();
  EXPECT_TRUE(closed.ok()) << closed;
  EXPECT_EQ(fake_.State()["agents"]["sessions"], json::array());
  EXPECT_FALSE(journal_.Has(AgentsSessionJournalId("s-cut")));
}

// A persistent HTTP 500 on the artifact list is not an artifact that is missing: the outputs
// cannot be read, FAILED_PRECONDITION naming the list and the status (the run fails with it).
TEST_F(AgentsProviderTest, AnArtifactListThatKeepsFailingIsUnreadableNotMissing) {
  std::unique_ptr<Session> s = Make("s-500");
  ASSERT_TRUE(RunCommand(*s, "mkdir -p outputs && echo 1 > outputs/count.txt").ok());
  fake_.Fault(
      {{"path_prefix", "/v1/agents/sessions/"}, {"method", "GET"}, {"status", 500}, {"times", 3}});
  absl::StatusOr<std::string> read = s->ReadFile("count.txt", 100);
  EXPECT_EQ(read.status().code(), absl::StatusCode::kFailedPrecondition) << read.status();
  EXPECT_THAT(read.status().message(), HasSubstr("artifacts cannot be read (listing them)"));
  EXPECT_THAT(read.status().message(), HasSubstr("500"));
  fake_.Delete("/_fake/faults");
  EXPECT_EQ(*s->ReadFile("count.txt", 100), "1\n");
  EXPECT_TRUE(s->Close().ok());
}

// A kept session runs one agent task: once it has, another run in it is refused before it is
// accepted, saying why; a session that has not run yet takes one.
TEST_F(AgentsProviderTest, ASecondRunInAKeptSessionIsRefusedUpFront) {
  std::unique_ptr<Session> s = Make("s-kept");
  EXPECT_TRUE(provider_->CheckRunIn("s-kept").ok());
  ASSERT_TRUE(RunCommand(*s, "true").ok());
  absl::Status again = provider_->CheckRunIn("s-kept");
  EXPECT_EQ(again.code(), absl::StatusCode::kFailedPrecondition) << again;
  EXPECT_THAT(again.message(), HasSubstr("session_id: session s-kept has run its agent task"));
  EXPECT_THAT(again.message(), HasSubstr("without session_id"));
  EXPECT_TRUE(provider_->CheckRunIn("s-other").ok());
  EXPECT_TRUE(s->Close().ok());
}

TEST_F(AgentsProviderTest, WhatTheApiCannotDoIsRefusedAtCreate) {
  SessionSpec spec;
  spec.id = "s-bad";
  spec.memory_bytes = 2ull << 30;
  EXPECT_EQ(provider_->CheckSpec(spec).code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(provider_->Create(spec, nullptr).status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_FALSE(provider_->runs_commands());
  EXPECT_TRUE(provider_->runs_setup_commands());
}

}  // namespace
}  // namespace sandgate::sandbox
