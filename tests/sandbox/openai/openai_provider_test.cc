// The openai provider against the fake OpenAI server (real HTTP on 127.0.0.1): making,
// mapping, journaling and sweeping containers.
#include "sandbox/openai/openai_provider.h"

#include <memory>
#include <string>
#include <thread>

#include "absl/strings/match.h"
#include "absl/time/clock.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/sandbox/openai/openai_fixture.h"

namespace sandgate::sandbox {
namespace {

using ::testing::HasSubstr;
using ::testing::Not;

using OpenAiProviderTest = OpenAiFixture;
using testing::Eventually;

TEST(MapMemoryLimitTest, RoundsUpToAHostedSize) {
  EXPECT_EQ(*MapMemoryLimit(16ull << 20, "1g"), "1g");
  EXPECT_EQ(*MapMemoryLimit(1ull << 30, "1g"), "1g");
  EXPECT_EQ(*MapMemoryLimit((1ull << 30) + 1, "1g"), "4g");
  EXPECT_EQ(*MapMemoryLimit(5ull << 30, "1g"), "16g");
  EXPECT_EQ(*MapMemoryLimit(17ull << 30, "1g"), "64g");
  EXPECT_EQ(*MapMemoryLimit(1ull << 30, "4g"), "4g");  // the configured floor
  EXPECT_EQ(MapMemoryLimit(65ull << 30, "1g").status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(MapMemoryLimit(1ull << 30, "2g").status().code(), absl::StatusCode::kInvalidArgument);
}

TEST_F(OpenAiProviderTest, CreateRejectsAKeepaliveNotWellWithinExpiry) {
  OpenAiProviderOptions o;
  o.expires_after_minutes = 20;
  o.keepalive_interval = absl::Minutes(10);
  EXPECT_EQ(OpenAiProvider::Create(client_.get(), &journal_, o).status().code(),
            absl::StatusCode::kInvalidArgument);
  o.memory_limit = "3g";
  o.keepalive_interval = absl::Minutes(1);
  EXPECT_EQ(OpenAiProvider::Create(client_.get(), &journal_, o).status().code(),
            absl::StatusCode::kInvalidArgument);
}

TEST_F(OpenAiProviderTest, NetworkPolicyMapping) {
  auto provider = Provider();
  SessionSpec spec = Spec("net-1");
  spec.network.mode = NetworkMode::kEnabled;
  auto enabled = provider->Create(spec, nullptr);
  EXPECT_EQ(enabled.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(enabled.status().message(), HasSubstr("'enabled' is not available"));
  EXPECT_TRUE(journal_.List()->empty());

  spec.network.mode = NetworkMode::kRestricted;
  spec.network.allowed_domains = {"pypi.org"};
  auto restricted = provider->Create(spec, nullptr);
  ASSERT_TRUE(restricted.ok()) << restricted.status();
  // The fake validates the allowlist shape (type, non-empty allowed_domains) at create.
  bool noted = false;
  for (const auto& w : (*restricted)->Warnings()) noted |= absl::StrContains(w, "ports");
  EXPECT_TRUE(noted);
}

// The first attempt of a create made a container but its answer was lost; the retry made a
// second. The session keeps the second; the first is deleted at once.
TEST_F(OpenAiProviderTest, ARetriedCreateDeletesWhatItsEarlierAttemptMade) {
  fake_.Fault({{"path_prefix", "/v1/containers"},
               {"method", "POST"},
               {"status", 500},
               {"after_handling", true}});
  auto provider = Provider();
  auto session = provider->Create(Spec("twice-1"), nullptr);
  ASSERT_TRUE(session.ok()) << session.status();
  nlohmann::json state = fake_.State();
  ASSERT_EQ(state["containers"].size(), 1u) << state.dump();
  ASSERT_TRUE((*session)->Close().ok());
  EXPECT_TRUE(journal_.List()->empty());
}

TEST_F(OpenAiProviderTest, SweepDeletesWhatAKilledDaemonLeft) {
  auto provider = Provider();
  // A container whose id was journaled, and one the daemon died before learning about.
  upstream::ContainerSpec cs;
  cs.name = "sandgate-left-1";
  auto known = client_->CreateContainer(cs);
  ASSERT_TRUE(known.ok()) << known.status();
  cs.name = "sandgate-left-2";
  auto unknown = client_->CreateContainer(cs);
  ASSERT_TRUE(unknown.ok()) << unknown.status();
  cs.name = "someone-else";
  auto other = client_->CreateContainer(cs);
  ASSERT_TRUE(other.ok());

  JournalEntry a{OpenAiContainerJournalId("left-1"),
                 "openai",
                 "container",
                 {{"name", "sandgate-left-1"}, {"container_id", known->id}}};
  JournalEntry b{
      OpenAiContainerJournalId("left-2"), "openai", "container", {{"name", "sandgate-left-2"}}};
  JournalEntry gone{OpenAiContainerJournalId("left-3"),
                    "openai",
                    "container",
                    {{"name", "sandgate-left-3"}, {"container_id", "cntr_doesnotexist"}}};
  for (const auto& e : {a, b, gone}) ASSERT_TRUE(journal_.Record(e).ok());
  for (const auto& e : {a, b, gone}) EXPECT_TRUE(provider->Sweep(e).ok()) << e.id;
  EXPECT_TRUE(journal_.List()->empty());
  auto state = fake_.State();
  ASSERT_EQ(state["containers"].size(), 1u);
  EXPECT_EQ(state["containers"][0]["id"], other->id);
  EXPECT_TRUE(client_->DeleteContainer(other->id).ok());

  JournalEntry foreign{"local-session:x", "local", "session", {}};
  EXPECT_EQ(provider->Sweep(foreign).code(), absl::StatusCode::kInvalidArgument);
}

TEST_F(OpenAiProviderTest, FailedCreateLeavesNothing) {
  testing::FakeClock clock(absl::Now());
  OpenAiProviderOptions o;
  o.clock = &clock;
  o.recheck_interval = absl::Milliseconds(20);
  auto provider = Provider(o);
  fake_.Fault(
      {{"path_prefix", "/v1/containers"}, {"method", "POST"}, {"status", 500}, {"times", 3}});
  auto session = provider->Create(Spec("fail-1"), nullptr);
  EXPECT_EQ(session.status().code(), absl::StatusCode::kUnavailable);
  EXPECT_THAT(session.status().message(), HasSubstr("creating container"));
  // A 500 does not prove nothing was made: the entry stays until the settle has passed.
  ASSERT_EQ(journal_.List()->size(), 1u);
  EXPECT_TRUE(journal_.List()->front().details.contains("gave_up_at_ms"));
  // The looker's next look (every recheck_interval, on the same clock) settles it.
  ASSERT_TRUE(clock.BlockUntilSettled(1));  // the looker waits
  clock.Advance(o.create_settle + absl::Seconds(1));
  EXPECT_TRUE(Eventually("the looker to settle the failed create",
                         [&] { return journal_.List()->empty(); }));
}

// The issue-10 leak: the create times out on our side, upstream makes the container anyway
// after we gave up; the provider keeps looking by name and deletes it, and the entry stays
// until the settle has passed.
TEST_F(OpenAiProviderTest, ACreateGivenUpOnThatLandsLaterIsFoundAndDeleted) {
  upstream::OpenAiOptions short_timeout;
  short_timeout.timeout = absl::Milliseconds(300);
  upstream::OpenAiClient impatient(http_.get(), &creds_, fake_.base_url(), short_timeout);
  testing::FakeClock clock(absl::Now());
  OpenAiProviderOptions o;
  o.clock = &clock;
  o.recheck_interval = absl::Milliseconds(50);
  auto made = OpenAiProvider::Create(&impatient, &journal_, o);
  ASSERT_TRUE(made.ok()) << made.status();
  std::unique_ptr<OpenAiProvider> provider = std::move(*made);
  fake_.Fault({{"path_prefix", "/v1/containers"}, {"method", "POST"}, {"delay_ms", 800}});
  auto session = provider->Create(Spec("late-1"), nullptr);
  EXPECT_EQ(session.status().code(), absl::StatusCode::kDeadlineExceeded) << session.status();
  ASSERT_EQ(journal_.List()->size(), 1u) << "the create may still land";
  // The fake makes the container ~0.5 s (real time) after we gave up; the looker, looking
  // again every recheck_interval of its clock, finds and deletes it.
  bool landed = false;
  EXPECT_TRUE(Eventually("the looker to delete the container that landed late", [&] {
    clock.Advance(o.recheck_interval);
    nlohmann::json state = fake_.State();
    for (const auto& r : state["requests"]) {
      if (r["method"] == "DELETE") landed = true;
    }
    return landed && state["containers"].empty();
  })) << fake_.State().dump();
  EXPECT_TRUE(fake_.State()["containers"].empty());
  EXPECT_EQ(journal_.List()->size(), 1u) << "kept until the settle has passed";

  // A restarted daemon carries on from the journaled times: still unsettled, then settled.
  JournalEntry entry = journal_.List()->front();
  provider.reset();
  auto restarted = Provider(o);
  EXPECT_EQ(restarted->Sweep(entry).code(), absl::StatusCode::kUnavailable);
  clock.Advance(o.create_settle + absl::Seconds(1));
  EXPECT_TRUE(restarted->Sweep(entry).ok());
  EXPECT_TRUE(journal_.List()->empty());
}

TEST_F(OpenAiProviderTest, ACreateCancelledMidRequestLeavesNothing) {
  auto provider = Provider();
  // Upstream carries out a create whose caller has given up waiting for the answer.
  fake_.Fault({{"path_prefix", "/v1/containers"}, {"method", "POST"}, {"delay_ms", 500}});
  CancelToken cancel;
  std::thread canceller([&] {
    absl::SleepFor(absl::Milliseconds(100));
    cancel.Cancel("the run was cancelled");
  });
  auto session = provider->Create(Spec("cancel-1"), &cancel);
  canceller.join();
  EXPECT_EQ(session.status().code(), absl::StatusCode::kCancelled) << session.status();
  // Create returned only once upstream answered (the request is not cancelled), having
  // deleted the container by id: there is nothing later to wait for.
  EXPECT_TRUE(fake_.State()["containers"].empty());
  EXPECT_TRUE(journal_.List()->empty());
}

// A daemon asked for a container and died before the answer; the next daemon sweeps while
// upstream is still making it.
TEST_F(OpenAiProviderTest, SweepByNameSaysLookAgainWhileACreateMayStillLand) {
  auto provider = Provider();
  fake_.Fault({{"path_prefix", "/v1/containers"}, {"method", "POST"}, {"delay_ms", 700}});
  JournalEntry entry = RequestedJustNow("inflight-1");
  ASSERT_TRUE(journal_.Record(entry).ok());
  upstream::ContainerSpec cs;
  cs.name = "sandgate-inflight-1";
  std::thread dead_daemon([&] { EXPECT_TRUE(client_->CreateContainer(cs).ok()); });
  absl::SleepFor(absl::Milliseconds(100));
  absl::Status early = provider->Sweep(entry);
  EXPECT_EQ(early.code(), absl::StatusCode::kUnavailable) << early;
  EXPECT_THAT(early.message(), HasSubstr("may still land"));
  EXPECT_EQ(journal_.List()->size(), 1u) << "kept, to be asked again";
  dead_daemon.join();
  EXPECT_EQ(provider->Sweep(entry).code(), absl::StatusCode::kUnavailable);
  EXPECT_TRUE(fake_.State()["containers"].empty()) << "deleted as soon as found";
  EXPECT_EQ(journal_.List()->size(), 1u) << "kept until the settle has passed";
}

TEST_F(OpenAiProviderTest, SweepByNameGivesUpOnceTheCreateCannotLandAnyMore) {
  testing::FakeClock clock(absl::Now());
  OpenAiProviderOptions o;
  o.create_settle = absl::Seconds(10);
  o.clock = &clock;
  auto provider = Provider(o);
  JournalEntry entry = RequestedJustNow("never-1");
  ASSERT_TRUE(journal_.Record(entry).ok());
  EXPECT_EQ(provider->Sweep(entry).code(), absl::StatusCode::kUnavailable);
  clock.Advance(absl::Seconds(9));
  EXPECT_EQ(provider->Sweep(entry).code(), absl::StatusCode::kUnavailable);
  clock.Advance(absl::Seconds(2));
  EXPECT_TRUE(provider->Sweep(entry).ok());
  EXPECT_TRUE(journal_.List()->empty());
}

TEST_F(OpenAiProviderTest, RetriesA429WithRetryAfter) {
  auto provider = Provider();
  fake_.Fault({{"path_prefix", "/v1/containers"},
               {"method", "POST"},
               {"status", 429},
               {"retry_after", "1"}});
  auto session = provider->Create(Spec("rl-1"), nullptr);
  ASSERT_TRUE(session.ok()) << session.status();
}

}  // namespace
}  // namespace sandgate::sandbox
