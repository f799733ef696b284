// An openai session's container against the fake OpenAI server: files, the keeper, expiry,
// close.
#include "sandbox/openai/openai_session.h"

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

using OpenAiSessionTest = OpenAiFixture;
using testing::Eventually;

TEST(IsExpiredErrorTest, OnlyAContainerExpiryCounts) {
  EXPECT_TRUE(OpenAiSession::IsExpiredError(absl::InvalidArgumentError(
      "POST /containers/cntr_1/files: HTTP 400: Container is expired.")));
  EXPECT_FALSE(OpenAiSession::IsExpiredError(absl::UnauthenticatedError("API key expired")));
  EXPECT_FALSE(OpenAiSession::IsExpiredError(absl::OkStatus()));
}

TEST_F(OpenAiSessionTest, SessionLifecycleUploadsListsReadsAndDeletesEverything) {
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

TEST_F(OpenAiSessionTest, DestructorDeletesTheContainer) {
  auto provider = Provider();
  {
    auto session = provider->Create(Spec("dtor-1"), nullptr);
    ASSERT_TRUE(session.ok()) << session.status();
    EXPECT_EQ(fake_.State()["containers"].size(), 1u);
  }
  EXPECT_TRUE(fake_.State()["containers"].empty());
  EXPECT_TRUE(journal_.List()->empty());
}

TEST_F(OpenAiSessionTest, KeeperKeepsAHeldContainerAlive) {
  testing::FakeClock clock(absl::Now());
  const OpenAiProviderOptions o = ClockedOptions(&clock);
  auto provider = Provider(o);
  auto session = provider->Create(Spec("keep-1"), nullptr);
  ASSERT_TRUE(session.ok()) << session.status();
  ASSERT_TRUE((*session)->WriteFile("a.txt", "hello", 0644).ok());
  ASSERT_TRUE(clock.BlockUntilSettled(1));
  // Three idle stretches of 15 minutes each; expiry is 20 minutes after the last activity.
  for (int i = 0; i < 3; ++i) {
    fake_.AdvanceClock(15 * 60);
    clock.Advance(o.keepalive_interval);
    ASSERT_TRUE(clock.BlockUntilSettled(1));  // the keeper has touched it and waits again
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
TEST_F(OpenAiSessionTest, KeeperFallsBackToACommandWhenListingFilesDoesNotCount) {
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
TEST_F(OpenAiSessionTest, KeeperThatCannotExtendTheContainerSaysWhenItExpires) {
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
  // The keeper's HTTP calls take real time; having seen the expiry, it stops.
  EXPECT_TRUE(Eventually("the keeper to see the container expired",
                         [&] { return (*session)->Health().expired; }));
  h = (*session)->Health();
  EXPECT_TRUE(h.expired);
  EXPECT_THAT(h.reason, HasSubstr("expired"));
}

TEST_F(OpenAiSessionTest, AnExpiredContainerIsReportedNeverReused) {
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
TEST_F(OpenAiSessionTest, AnExpiryIsReportedAsTheApiSaidIt) {
  testing::FakeClock clock(absl::FromUnixSeconds(1796117200));  // 2026-12-01T09:26:40Z
  const OpenAiProviderOptions o = ClockedOptions(&clock);
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

TEST_F(OpenAiSessionTest, KeeperNoticesExpiry) {
  testing::FakeClock clock(absl::Now());
  const OpenAiProviderOptions o = ClockedOptions(&clock);
  auto provider = Provider(o);
  auto session = provider->Create(Spec("exp-2"), nullptr);
  ASSERT_TRUE(session.ok()) << session.status();
  auto* s = dynamic_cast<OpenAiSession*>(session->get());
  fake_.AdvanceClock(25 * 60);
  ASSERT_TRUE(clock.BlockUntilSettled(1));
  clock.Advance(o.keepalive_interval - absl::Nanoseconds(1));
  ASSERT_TRUE(clock.BlockUntilSettled(1));
  EXPECT_TRUE(s->CheckUsable().ok()) << "no touch, so nothing seen, before keepalive_interval";
  clock.Advance(absl::Nanoseconds(1));
  EXPECT_TRUE(Eventually("the keeper's touch to find the container expired",
                         [&] { return !s->CheckUsable().ok(); }));
  EXPECT_THAT(s->CheckUsable().message(), HasSubstr("expired"));
}

}  // namespace
}  // namespace sandgate::sandbox
