// The openai provider against the fake OpenAI server (real HTTP on 127.0.0.1).
#include "sandbox/openai/openai_provider.h"

#include <memory>
#include <string>
#include <thread>

#include "absl/strings/match.h"
#include "absl/time/clock.h"
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

using ::testing::HasSubstr;
using ::testing::Not;

class OpenAiProviderTest : public ::testing::Test {
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
    OpenAiProviderOptions o;
    o.clock = clock;
    o.keepalive_model = "fake-model";
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

TEST(OpenAiSessionTest, OnlyAContainerExpiryCountsAsExpired) {
  EXPECT_TRUE(OpenAiSession::IsExpiredError(absl::InvalidArgumentError(
      "POST /containers/cntr_1/files: HTTP 400: Container is expired.")));
  EXPECT_FALSE(OpenAiSession::IsExpiredError(absl::UnauthenticatedError("API key expired")));
  EXPECT_FALSE(OpenAiSession::IsExpiredError(absl::OkStatus()));
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

TEST_F(OpenAiProviderTest, SessionLifecycleUploadsListsReadsAndDeletesEverything) {
  auto provider = Provider();
  ASSERT_NE(provider, nullptr);
  EXPECT_EQ(provider->name(), "openai");
  SessionSpec spec = Spec("life-1");
  spec.memory_bytes = 3ull << 30;
  auto session = provider->Create(spec, nullptr);
  ASSERT_TRUE(session.ok()) << session.status();
  auto* s = dynamic_cast<OpenAiSession*>(session->get());
  ASSERT_NE(s, nullptr);
  EXPECT_EQ(s->workdir(), "/mnt/data");
  EXPECT_TRUE(absl::StartsWith(s->container_id(), "cntr_"));

  // Journaled with the container id, provider "openai".
  auto entries = journal_.List();
  ASSERT_TRUE(entries.ok());
  ASSERT_EQ(entries->size(), 1u);
  EXPECT_EQ((*entries)[0].provider, "openai");
  EXPECT_EQ((*entries)[0].kind, "container");
  EXPECT_EQ((*entries)[0].details["container_id"], s->container_id());

  // Memory mapped up to 4g, and the mapping is a warning.
  auto c = client_->RetrieveContainer(s->container_id());
  ASSERT_TRUE(c.ok()) << c.status();
  EXPECT_EQ(c->memory_limit, "4g");
  EXPECT_EQ(c->name, "sandgate-life-1");
  EXPECT_EQ(c->expires_after_minutes, 20);
  bool mapped = false;
  for (const auto& w : s->Warnings()) mapped |= absl::StrContains(w, "4g");
  EXPECT_TRUE(mapped);

  ASSERT_TRUE(s->WriteFile("input.csv", "year,revenue\n2024,1\n", 0644).ok());
  auto files = s->ListFiles("");
  ASSERT_TRUE(files.ok()) << files.status();
  ASSERT_EQ(files->entries.size(), 1u);
  EXPECT_EQ(files->entries[0].path, "input.csv");
  EXPECT_EQ(files->entries[0].type, FileType::kRegular);
  EXPECT_EQ(files->entries[0].size, 20u);

  auto data = s->ReadFile("input.csv", 1024);
  ASSERT_TRUE(data.ok()) << data.status();
  EXPECT_EQ(*data, "year,revenue\n2024,1\n");
  EXPECT_EQ(s->ReadFile("input.csv", 10).status().code(), absl::StatusCode::kResourceExhausted);
  EXPECT_EQ(s->ReadFile("missing.csv", 10).status().code(), absl::StatusCode::kNotFound);
  EXPECT_EQ(s->ReadFile("../etc/passwd", 10).status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(s->ReadFile("/etc/passwd", 10).status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(s->WriteFile("sub/x.txt", "x", 0644).code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(s->WriteFile("../x.txt", "x", 0644).code(), absl::StatusCode::kInvalidArgument);

  ExecRequest req;
  req.argv = {"true"};
  auto exec = s->Exec(req, nullptr, nullptr);
  EXPECT_EQ(exec.status().code(), absl::StatusCode::kUnimplemented);
  EXPECT_THAT(exec.status().message(), HasSubstr("only through the openai agent"));

  ASSERT_TRUE(s->Close().ok());
  EXPECT_TRUE(s->Close().ok());  // idempotent
  EXPECT_TRUE(fake_.State()["containers"].empty());
  EXPECT_TRUE(journal_.List()->empty());
  EXPECT_EQ(s->ReadFile("input.csv", 1024).status().code(), absl::StatusCode::kFailedPrecondition);
}

TEST_F(OpenAiProviderTest, DestructorDeletesTheContainer) {
  auto provider = Provider();
  {
    auto session = provider->Create(Spec("dtor-1"), nullptr);
    ASSERT_TRUE(session.ok()) << session.status();
    EXPECT_EQ(fake_.State()["containers"].size(), 1u);
  }
  EXPECT_TRUE(fake_.State()["containers"].empty());
  EXPECT_TRUE(journal_.List()->empty());
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

TEST_F(OpenAiProviderTest, KeeperKeepsAHeldContainerAlive) {
  OpenAiProviderOptions o;
  o.keepalive_interval = absl::Milliseconds(100);
  auto provider = Provider(o);
  auto session = provider->Create(Spec("keep-1"), nullptr);
  ASSERT_TRUE(session.ok()) << session.status();
  ASSERT_TRUE((*session)->WriteFile("a.txt", "hello", 0644).ok());
  // Three idle stretches of 15 minutes each; expiry is 20 minutes after the last activity.
  for (int i = 0; i < 3; ++i) {
    fake_.AdvanceClock(15 * 60);
    absl::SleepFor(absl::Milliseconds(400));  // the keeper touches the container meanwhile
  }
  EXPECT_EQ(fake_.State()["containers"][0]["status"], "running");
  auto data = (*session)->ReadFile("a.txt", 100);
  ASSERT_TRUE(data.ok()) << data.status();
  EXPECT_EQ(*data, "hello");
}

// How many model calls the fake was asked for.
int ResponsesCalls(testing::FakeOpenAiServer& fake) {
  int n = 0;
  const nlohmann::json state = fake.State();
  for (const auto& r : state["requests"]) {
    n += r.value("method", "") == "POST" && r.value("path", "") == "/v1/responses";
  }
  return n;
}

// Against a server where listing files is not activity, the keeper sees that its touch did
// not move last_active_at and runs a command instead, which does; from then on only that.
TEST_F(OpenAiProviderTest, KeeperFallsBackToACommandWhenListingFilesDoesNotCount) {
  fake_.Post("/_fake/activity", {{"counts", "commands"}});
  testing::FakeClock clock(absl::Now());
  const OpenAiProviderOptions o = KeeperOptions(&clock);
  auto provider = Provider(o);
  auto session = provider->Create(Spec("keep-2"), nullptr);
  ASSERT_TRUE(session.ok()) << session.status();
  ASSERT_TRUE(clock.BlockUntilSettled(1));  // the keeper waits for its first interval
  for (int i = 0; i < 3; ++i) {  // three idle stretches of 15 minutes; expiry is after 20
    fake_.AdvanceClock(15 * 60);
    clock.Advance(o.keepalive_interval);
    ASSERT_TRUE(clock.BlockUntilSettled(1));  // one keeper round done
    EXPECT_EQ(ResponsesCalls(fake_), i + 1);
    EXPECT_EQ((*session)->Health().expires_at, absl::InfiniteFuture())
        << (*session)->Health().reason;
  }
  EXPECT_EQ(fake_.State()["containers"][0]["status"], "running");
  const int lists = [&] {
    int n = 0;
    const nlohmann::json state = fake_.State();
    for (const auto& r : state["requests"]) {
      n += r.value("method", "") == "GET" && absl::EndsWith(r.value("path", ""), "/files");
    }
    return n;
  }();
  EXPECT_EQ(lists, 1);  // listing was tried once, found not to count, and dropped
}

// When nothing the keeper does moves last_active_at, it says so: Health() gives when the
// container really expires, and once it has, that it expired.
TEST_F(OpenAiProviderTest, KeeperThatCannotExtendTheContainerSaysWhenItExpires) {
  fake_.Post("/_fake/activity", {{"counts", "none"}});
  testing::FakeClock clock(absl::Now());
  const OpenAiProviderOptions o = KeeperOptions(&clock);
  auto provider = Provider(o);
  auto session = provider->Create(Spec("keep-3"), nullptr);
  ASSERT_TRUE(session.ok()) << session.status();
  const int64_t last_active = fake_.State()["containers"][0]["last_active_at"];
  ASSERT_TRUE(clock.BlockUntilSettled(1));
  fake_.AdvanceClock(5 * 60);
  clock.Advance(o.keepalive_interval);
  ASSERT_TRUE(clock.BlockUntilSettled(1));
  SessionHealth h = (*session)->Health();
  EXPECT_FALSE(h.expired);
  EXPECT_EQ(h.expires_at, absl::FromUnixSeconds(last_active) + absl::Minutes(20));
  EXPECT_THAT(h.reason, HasSubstr("cannot keep container cntr_"));
  EXPECT_THAT(h.reason, HasSubstr("listing its files; running `true` through the hosted shell"));
  EXPECT_EQ(ResponsesCalls(fake_), 1);

  fake_.AdvanceClock(16 * 60);  // past last_active_at + 20 minutes
  clock.Advance(o.keepalive_interval);
  ASSERT_TRUE(clock.BlockUntilSettled(0));
  for (int i = 0; i < 100 && !(*session)->Health().expired; ++i) {
    absl::SleepFor(absl::Milliseconds(20));  // the keeper's HTTP calls take real time
  }
  h = (*session)->Health();
  EXPECT_TRUE(h.expired);
  EXPECT_THAT(h.reason, HasSubstr("expired"));
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

TEST_F(OpenAiProviderTest, AnExpiredContainerIsReportedNeverReused) {
  auto provider = Provider();  // keeper every 5 minutes of real time: it will not run here
  auto session = provider->Create(Spec("exp-1"), nullptr);
  ASSERT_TRUE(session.ok()) << session.status();
  auto* s = dynamic_cast<OpenAiSession*>(session->get());
  fake_.AdvanceClock(21 * 60);
  absl::Status st = s->ReadFile("a.txt", 100).status();
  EXPECT_EQ(st.code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(st.message(), HasSubstr("container " + s->container_id() + " expired"));
  EXPECT_EQ(s->WriteFile("b.txt", "x", 0644).code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_EQ(s->CheckUsable().code(), absl::StatusCode::kFailedPrecondition);
  ASSERT_TRUE(s->Close().ok());  // the expired container is still deleted
  EXPECT_TRUE(journal_.List()->empty());
}

// A fresh container the API calls expired is reported with the API's words, when, and during
// what; not as "idle longer than 20 minutes".
TEST_F(OpenAiProviderTest, AnExpiryIsReportedAsTheApiSaidIt) {
  testing::FakeClock clock(absl::FromUnixSeconds(1796117200));  // 2026-12-01T09:26:40Z
  OpenAiProviderOptions o;
  o.clock = &clock;
  auto provider = Provider(o);
  auto session = provider->Create(Spec("exp-3"), nullptr);
  ASSERT_TRUE(session.ok()) << session.status();
  auto* s = dynamic_cast<OpenAiSession*>(session->get());
  clock.Advance(absl::Milliseconds(300));
  fake_.Fault({{"path_prefix", "/v1/containers/"},
               {"method", "GET"},
               {"status", 400},
               {"message", "Container is expired."}});
  absl::Status st = s->ReadFile("report.md", 100).status();
  EXPECT_EQ(st.code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(st.message(), HasSubstr("container " + s->container_id() + " expired"));
  EXPECT_THAT(st.message(), HasSubstr("Container is expired."));
  EXPECT_THAT(st.message(), HasSubstr("during reading report.md"));
  EXPECT_THAT(st.message(), HasSubstr("at 2026-12-01T09:26:40.300Z (300ms after it was created)"));
  EXPECT_THAT(st.message(), Not(HasSubstr("idle")));
  // Later calls repeat the first report, not a new guess.
  EXPECT_EQ(s->CheckUsable().message(), st.message());
  ASSERT_TRUE(s->Close().ok());
}

TEST_F(OpenAiProviderTest, KeeperNoticesExpiry) {
  OpenAiProviderOptions o;
  o.keepalive_interval = absl::Milliseconds(100);
  auto provider = Provider(o);
  auto session = provider->Create(Spec("exp-2"), nullptr);
  ASSERT_TRUE(session.ok()) << session.status();
  auto* s = dynamic_cast<OpenAiSession*>(session->get());
  fake_.AdvanceClock(25 * 60);
  for (int i = 0; i < 50 && s->CheckUsable().ok(); ++i) absl::SleepFor(absl::Milliseconds(50));
  EXPECT_THAT(s->CheckUsable().message(), HasSubstr("expired"));
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
  clock.Advance(o.create_settle + absl::Seconds(1));
  for (int i = 0; i < 250 && !journal_.List()->empty(); ++i) absl::SleepFor(absl::Milliseconds(20));
  EXPECT_TRUE(journal_.List()->empty());
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
  // The fake makes the container ~0.5 s after we gave up; the looker deletes it.
  bool landed = false;
  for (int i = 0; i < 200; ++i) {
    nlohmann::json state = fake_.State();
    for (const auto& r : state["requests"]) {
      if (r["method"] == "DELETE") landed = true;
    }
    if (landed && state["containers"].empty()) break;
    absl::SleepFor(absl::Milliseconds(25));
  }
  EXPECT_TRUE(landed) << fake_.State().dump();
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
  absl::SleepFor(absl::Milliseconds(600));  // past the fake's delay
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
