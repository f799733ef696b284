// WarmPool on the host fake provider and a fake clock: filling and refilling per shape, one
// taker per sandbox under concurrency, the max_sandboxes bound (with its retry, not before and
// at), eviction, failed creates, drain, shapes of images (a request for image X never gets a
// host-root or image-Y sandbox); and SessionManager taking a ready sandbox.
#include "core/warm_pool.h"

#include <cstdlib>
#include <filesystem>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "core/sandbox_spec.h"
#include "core/session_manager.h"
#include "gtest/gtest.h"
#include "store/sqlite_store.h"
#include "tests/common/eventually.h"
#include "tests/common/temp_dir.h"
#include "tests/fakes/fake_clock.h"
#include "tests/fakes/fake_image_builder.h"
#include "tests/fakes/fake_journal.h"
#include "tests/fakes/host_sandbox.h"

namespace sandgate::core {
namespace {

using testing::Eventually;  // the filler thread's progress; timing rules use the fake clock
using testing::FakeClock;
using testing::FakeJournal;
using testing::HostProvider;

class WarmPoolTest : public ::testing::Test {
 protected:
  WarmPoolTest() : provider_(&journal_) {}

  void StartPool(std::vector<WarmPoolShape> shapes, uint32_t max_sandboxes = 64) {
    config_.warm_pool = std::move(shapes);
    budget_ = std::make_unique<SandboxBudget>(max_sandboxes);
    pool_ = std::make_unique<WarmPool>(WarmPoolDeps{&config_, &provider_, budget_.get(), &clock_});
    pool_->Start();
  }
  static WarmPoolShape Shape(uint32_t size, uint64_t memory_bytes = 0) {
    WarmPoolShape s;
    s.size = size;
    s.memory_bytes = memory_bytes;
    return s;
  }
  // What a CreateSession with `sandbox` asks for.
  sandbox::SessionSpec SpecOf(const v1::SandboxSpec& sandbox) {
    return ToSessionSpec("", sandbox, config_);
  }
  sandbox::SessionSpec DefaultSpec() { return SpecOf(v1::SandboxSpec()); }

  Config config_;
  FakeClock clock_;
  FakeJournal journal_;
  HostProvider provider_;
  std::unique_ptr<SandboxBudget> budget_;
  std::unique_ptr<WarmPool> pool_;
};

TEST_F(WarmPoolTest, FillsToSizeJournaledAndRefillsAfterATake) {
  StartPool({Shape(3)});
  ASSERT_TRUE(Eventually("3 ready in the pool", [&] { return pool_->ready() == 3; }));
  EXPECT_EQ(provider_.created_sessions(), 3);
  EXPECT_EQ(budget_->used(), 3u) << "ready sandboxes count in max_sandboxes";
  ASSERT_EQ(journal_.List()->size(), 3u) << "journaled like any sandbox";

  std::optional<WarmSandbox> w = pool_->Take(DefaultSpec());
  ASSERT_TRUE(w.has_value());
  ASSERT_NE(w->session, nullptr);
  EXPECT_TRUE(absl::StrContains(w->shape, "memory_bytes 1073741824")) << w->shape;
  ASSERT_TRUE(Eventually("3 ready in the pool", [&] { return pool_->ready() == 3; }))
      << "refilled in the background";
  EXPECT_EQ(provider_.created_sessions(), 4);
  EXPECT_EQ(budget_->used(), 4u) << "the taken one's unit is the taker's now";
  EXPECT_EQ(provider_.live_sessions(), 4);
}

TEST_F(WarmPoolTest, OnlyTheSameShapeTakesOne) {
  StartPool({Shape(1, 512ull << 20)});
  ASSERT_TRUE(Eventually("1 ready in the pool", [&] { return pool_->ready() == 1; }));
  EXPECT_FALSE(pool_->Take(DefaultSpec()).has_value()) << "default memory is 1 GiB";
  v1::SandboxSpec with_env;
  (*with_env.mutable_env())["A"] = "1";
  with_env.set_memory_bytes(512ull << 20);
  EXPECT_FALSE(pool_->Take(SpecOf(with_env)).has_value()) << "env is part of the shape";
  v1::SandboxSpec same;
  same.set_memory_bytes(512ull << 20);
  same.add_setup_commands("echo not part of the shape");
  same.mutable_idle_timeout()->set_seconds(5);
  EXPECT_TRUE(pool_->Take(SpecOf(same)).has_value());
}

TEST_F(WarmPoolTest, ConcurrentTakersNeverShareASandbox) {
  StartPool({Shape(16)});
  ASSERT_TRUE(Eventually("16 ready in the pool", [&] { return pool_->ready() == 16; }));
  constexpr int kTakers = 48;
  std::vector<std::unique_ptr<sandbox::Session>> got(kTakers);
  std::vector<std::thread> threads;
  std::atomic<bool> go{false};
  for (int i = 0; i < kTakers; ++i) {
    threads.emplace_back([&, i] {
      while (!go.load()) std::this_thread::yield();
      std::optional<WarmSandbox> w = pool_->Take(DefaultSpec());
      if (w) got[i] = std::move(w->session);
    });
  }
  go = true;
  for (auto& t : threads) t.join();
  std::set<const sandbox::Session*> sessions;
  std::set<std::string> ids;
  int taken = 0;
  for (const auto& s : got) {
    if (s == nullptr) continue;
    ++taken;
    sessions.insert(s.get());
    ids.insert(s->id());
  }
  EXPECT_GE(taken, 16);
  EXPECT_EQ(sessions.size(), static_cast<size_t>(taken));
  EXPECT_EQ(ids.size(), static_cast<size_t>(taken));
  EXPECT_LE(taken, provider_.created_sessions());
}

TEST_F(WarmPoolTest, MaxSandboxesBoundsThePoolAndItRetriesEvery100ms) {
  StartPool({Shape(5)}, /*max_sandboxes=*/2);
  ASSERT_TRUE(Eventually("2 ready in the pool", [&] { return pool_->ready() == 2; }));
  ASSERT_TRUE(clock_.BlockUntilSettled(1));  // the filler waits for budget
  EXPECT_EQ(budget_->used(), 2u);
  EXPECT_EQ(provider_.created_sessions(), 2);

  // A caller of another shape, refused by the budget, has one closed for it.
  ASSERT_TRUE(pool_->Evict());
  EXPECT_EQ(pool_->ready(), 1u);
  EXPECT_EQ(budget_->used(), 1u);
  EXPECT_EQ(provider_.live_sessions(), 1);
  ASSERT_TRUE(budget_->TryTake());  // that caller's sandbox
  budget_->Give();                  // ... which ends again
  clock_.Advance(absl::Milliseconds(99));
  ASSERT_TRUE(clock_.BlockUntilSettled(1));
  EXPECT_EQ(pool_->ready(), 1u) << "not before the retry";
  clock_.Advance(absl::Milliseconds(1));
  ASSERT_TRUE(Eventually("2 ready in the pool", [&] { return pool_->ready() == 2; }))
      << "at the retry";
  EXPECT_EQ(budget_->used(), 2u);
  EXPECT_EQ(provider_.created_sessions(), 3);
}

TEST_F(WarmPoolTest, AFailedCreateIsRetriedAfterASecond) {
  provider_.FailNextCreate(absl::UnavailableError("bwrap broke"));
  StartPool({Shape(1)});
  ASSERT_TRUE(clock_.BlockUntilSettled(1));  // backing off
  EXPECT_EQ(pool_->ready(), 0u);
  EXPECT_EQ(budget_->used(), 0u) << "a failed create gives its unit back";
  clock_.Advance(absl::Milliseconds(999));
  ASSERT_TRUE(clock_.BlockUntilSettled(1));
  EXPECT_EQ(pool_->ready(), 0u);
  clock_.Advance(absl::Milliseconds(1));
  ASSERT_TRUE(Eventually("1 ready in the pool", [&] { return pool_->ready() == 1; }));
}

TEST_F(WarmPoolTest, DrainClosesEveryReadySandboxAndGivesTheBudgetBack) {
  StartPool({Shape(2), Shape(3, 512ull << 20)});
  ASSERT_TRUE(Eventually("5 ready in the pool", [&] { return pool_->ready() == 5; }));
  std::optional<WarmSandbox> taken = pool_->Take(DefaultSpec());
  ASSERT_TRUE(taken.has_value());
  ASSERT_TRUE(Eventually("5 ready in the pool", [&] { return pool_->ready() == 5; }));
  pool_->Drain();
  EXPECT_EQ(pool_->ready(), 0u);
  EXPECT_EQ(provider_.live_sessions(), 1) << "only the taken one is left, its taker's to close";
  EXPECT_EQ(budget_->used(), 1u);
  EXPECT_EQ(journal_.List()->size(), 1u);
  EXPECT_FALSE(pool_->Take(DefaultSpec()).has_value()) << "nothing after drain";
  pool_->Drain();  // idempotent
}

// Shapes with an image, on an image store with the fake builder: the pool's sandboxes of a
// shape have the root of its image, and each goes only to a request for that root.
class WarmPoolImagesTest : public WarmPoolTest {
 protected:
  void SetUp() override {
    config_.state_dir = dir_.path();
    ImageStoreOptions o;
    o.dir = ImagesDir(dir_.path());
    o.builder = &builder_;
    o.clock = &clock_;
    absl::StatusOr<std::unique_ptr<ImageStore>> store = ImageStore::Create(o);
    ASSERT_TRUE(store.ok()) << store.status();
    images_ = std::move(*store);
  }
  void TearDown() override { pool_.reset(); }

  void StartPoolWithImages(std::vector<WarmPoolShape> shapes, uint32_t max_sandboxes = 64) {
    config_.warm_pool = std::move(shapes);
    budget_ = std::make_unique<SandboxBudget>(max_sandboxes);
    pool_ = std::make_unique<WarmPool>(
        WarmPoolDeps{&config_, &provider_, budget_.get(), &clock_, images_.get()});
    pool_->Start();
  }
  void Build(const std::string& name, const std::string& package) {
    ASSERT_TRUE(images_->StartBuild(name, {package}, "ops").ok());
    ASSERT_TRUE(Eventually(name + " built", [&] {
      absl::StatusOr<v1::Image> image = images_->Get(name);
      return image.ok() && image->state() == v1::Image::STATE_READY;
    }));
  }
  static WarmPoolShape ImageShape(const std::string& image) {
    WarmPoolShape s = Shape(1);
    s.image = image;
    return s;
  }
  // What a CreateSession asking for `image` ("" = the host's root) asks the pool for.
  sandbox::SessionSpec SpecFor(const std::string& image) {
    v1::SandboxSpec sb;
    sb.set_image(image);
    absl::Status resolved = ResolveImage(&sb, "local", images_.get());
    EXPECT_TRUE(resolved.ok()) << resolved;
    return SpecOf(sb);
  }
  // As the daemon wires them (app/daemon.cc): the store asks the provider which sessions use
  // an image and has the pool give up its ready ones first.
  void WireImagesToPool() {
    images_->SetInUse([this](const std::string& root) { return provider_.SessionsOnRoot(root); });
    images_->SetWarmPool([this](const std::string& root) { return pool_->HoldRoot(root); },
                         [this](const std::string& root) { pool_->ResumeRoot(root); });
  }
  std::string RootOf(const std::string& image) {
    return ImageRootDir(ImagesDir(dir_.path()), images_->Get(image)->digest());
  }

  testing::ScopedTempDir dir_{"sg-wp-images"};
  testing::FakeImageBuilder builder_;
  std::unique_ptr<ImageStore> images_;
};

TEST_F(WarmPoolImagesTest, ARequestForAnImageGetsOnlyThatImagesSandbox) {
  Build("x", "xtool");
  Build("y", "ytool");
  // Two in the budget: once one is taken, nothing is refilled, so what is left is known.
  for (const std::string first : {"x", ""}) {
    SCOPED_TRACE(first.empty() ? "host first" : "x first");
    pool_.reset();
    StartPoolWithImages({Shape(1), ImageShape("x")}, /*max_sandboxes=*/2);
    ASSERT_TRUE(Eventually("2 ready in the pool", [&] { return pool_->ready() == 2; }));
    EXPECT_FALSE(pool_->Take(SpecFor("y")).has_value()) << "no shape of image y";
    std::optional<WarmSandbox> w = pool_->Take(SpecFor(first));
    ASSERT_TRUE(w.has_value());
    EXPECT_EQ(provider_.root_dir_of(w->session->id()), first.empty() ? "" : RootOf("x"));
    if (!first.empty()) {
      EXPECT_TRUE(absl::StrContains(w->shape, "image x")) << w->shape;
    }
    // Only the other kind is ready now: it is not handed to a request like the first.
    ASSERT_TRUE(clock_.BlockUntilSettled(1));  // the filler waits for budget
    EXPECT_EQ(pool_->ready(), 1u);
    EXPECT_FALSE(pool_->Take(SpecFor(first)).has_value());
    const std::string other = first.empty() ? "x" : "";
    std::optional<WarmSandbox> rest = pool_->Take(SpecFor(other));
    ASSERT_TRUE(rest.has_value());
    EXPECT_EQ(provider_.root_dir_of(rest->session->id()), other.empty() ? "" : RootOf("x"));
    ASSERT_TRUE(rest->session->Close().ok());
    ASSERT_TRUE(w->session->Close().ok());
  }
}

TEST_F(WarmPoolImagesTest, AShapeWhoseImageIsNotBuiltYetFillsOnceItIs) {
  StartPoolWithImages({ImageShape("later")});
  ASSERT_TRUE(clock_.BlockUntilSettled(1));  // backing off: the name is unknown
  EXPECT_EQ(pool_->ready(), 0u);
  EXPECT_EQ(provider_.created_sessions(), 0);
  EXPECT_EQ(budget_->used(), 0u);
  Build("later", "ltool");
  clock_.Advance(absl::Seconds(1));
  ASSERT_TRUE(Eventually("1 ready in the pool", [&] { return pool_->ready() == 1; }));
  std::optional<WarmSandbox> w = pool_->Take(SpecFor("later"));
  ASSERT_TRUE(w.has_value());
  EXPECT_EQ(provider_.root_dir_of(w->session->id()), RootOf("later"));
}

// Follow-up of issue 22: the pool's ready sandboxes of an image are no use of it. Removing the
// image closes them (and gives their budget back) instead of being refused; the host-root
// shape's sandbox stays; the image's shape is not refilled, its name being gone.
TEST_F(WarmPoolImagesTest, RemovingAnImageClosesItsReadySandboxesAndKeepsTheRest) {
  Build("x", "xtool");
  WarmPoolShape two = ImageShape("x");
  two.size = 2;
  StartPoolWithImages({Shape(1), two});
  WireImagesToPool();
  ASSERT_TRUE(Eventually("3 ready in the pool", [&] { return pool_->ready() == 3; }));
  const std::string root = RootOf("x");
  ASSERT_EQ(provider_.SessionsOnRoot(root).size(), 2u);

  absl::StatusOr<v1::Image> removed = images_->Remove("x");
  ASSERT_TRUE(removed.ok()) << removed.status();
  EXPECT_TRUE(provider_.SessionsOnRoot(root).empty());
  EXPECT_EQ(pool_->ready(), 1u) << "the host-root sandbox stays";
  EXPECT_EQ(provider_.live_sessions(), 1);
  EXPECT_EQ(budget_->used(), 1u) << "the closed ones gave their budget back";
  EXPECT_FALSE(std::filesystem::exists(root));
  // The name is gone: the shape backs off instead of making a sandbox on a deleted root.
  ASSERT_TRUE(clock_.BlockUntilSettled(1));
  clock_.Advance(absl::Seconds(1));
  ASSERT_TRUE(clock_.BlockUntilSettled(1));
  EXPECT_EQ(pool_->ready(), 1u);
  EXPECT_EQ(provider_.created_sessions(), 3);
}

// A session that took a sandbox of the image uses it: the removal is refused naming that one
// session only (the ready one, closed meanwhile, is not counted), the pool refills once the
// refusal is given, and the removal goes through once the session ends.
TEST_F(WarmPoolImagesTest, ASessionUsingTheImageStillBlocksItsRemovalNamingOnlyIt) {
  Build("x", "xtool");
  StartPoolWithImages({ImageShape("x")});
  WireImagesToPool();
  ASSERT_TRUE(Eventually("1 ready in the pool", [&] { return pool_->ready() == 1; }));
  std::optional<WarmSandbox> taken = pool_->Take(SpecFor("x"));
  ASSERT_TRUE(taken.has_value());
  ASSERT_TRUE(Eventually("refilled", [&] { return pool_->ready() == 1; }));

  absl::StatusOr<v1::Image> refused = images_->Remove("x");
  EXPECT_EQ(refused.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_TRUE(absl::StrContains(refused.status().message(),
                                absl::StrCat("image 'x' is in use by 1 live session (",
                                             taken->session->id(), "); close them first")))
      << refused.status();
  EXPECT_TRUE(images_->Get("x").ok());
  // Held no longer: the pool makes one on the image again (after a failed try's backoff, if
  // it tried while the removal held the root).
  clock_.Advance(absl::Seconds(1));
  ASSERT_TRUE(Eventually("refilled after the refusal", [&] {
    clock_.Advance(absl::Seconds(1));
    return pool_->ready() == 1;
  }));

  ASSERT_TRUE(taken->session->Close().ok());
  budget_->Give();
  EXPECT_TRUE(images_->Remove("x").ok());
  EXPECT_EQ(pool_->ready(), 0u);
  EXPECT_EQ(provider_.live_sessions(), 0);
}

// SessionManager with a pool: a matching CreateSession takes a ready sandbox, says so in the
// session's log, and closing the session deletes that sandbox (it never goes back).
class SessionFromWarmPoolTest : public WarmPoolTest {
 protected:
  void SetUp() override {
    char tmpl[] = "/tmp/sg-wp-XXXXXX";
    dir_ = mkdtemp(tmpl);
    store_ = *store::SqliteStore::Open(dir_ + "/s.db");
    events_ = std::make_unique<EventLog>(store_.get(), &clock_);
  }
  void TearDown() override {
    sessions_.reset();
    pool_.reset();
    events_.reset();
    store_.reset();
    std::system(("rm -rf " + dir_).c_str());
  }
  void StartSessions() {
    SessionManagerDeps deps;
    deps.config = &config_;
    deps.store = store_.get();
    deps.clock = &clock_;
    deps.providers = {{"local", &provider_}};
    deps.budget = budget_.get();
    deps.events = events_.get();
    deps.warm_pool = pool_.get();
    sessions_ = std::make_unique<SessionManager>(deps);
  }
  std::vector<v1::Event> Events(const std::string& id) { return *store_->ReadEvents(id, 0, 1000); }

  std::string dir_;
  Caller caller_{"team-a", false};
  std::unique_ptr<store::SqliteStore> store_;
  std::unique_ptr<EventLog> events_;
  std::unique_ptr<SessionManager> sessions_;
};

TEST_F(SessionFromWarmPoolTest, AMatchingRequestTakesAReadySandbox) {
  StartPool({Shape(1)}, /*max_sandboxes=*/2);
  StartSessions();
  ASSERT_TRUE(Eventually("1 ready in the pool", [&] { return pool_->ready() == 1; }));
  std::set<std::string> made_before;
  const std::vector<JournalEntry> journaled = *journal_.List();
  for (const JournalEntry& j : journaled) made_before.insert(j.id);
  v1::CreateSessionRequest req;
  req.mutable_sandbox()->add_setup_commands("true");  // applied after taking it
  absl::StatusOr<v1::Session> s = sessions_->Create(caller_, req, nullptr);
  ASSERT_TRUE(s.ok()) << s.status();
  EXPECT_EQ(made_before.count("host:" + s->id()), 1u)
      << "the session's sandbox was made before the call";
  bool said = false, created_says = false;
  for (const v1::Event& e : Events(s->id())) {
    said |= e.has_notice() && absl::StrContains(e.notice().message(), "warm pool");
    created_says |= e.has_session_created() && e.session_created().from_warm_pool();
  }
  EXPECT_TRUE(said) << "the session's log says it came from the pool";
  EXPECT_TRUE(created_says) << "session.created says from_warm_pool";
  EXPECT_TRUE(s->from_warm_pool());
  EXPECT_TRUE(sessions_->Get(caller_, s->id())->from_warm_pool());
  ASSERT_TRUE(Eventually("1 ready in the pool", [&] { return pool_->ready() == 1; }));
  EXPECT_EQ(budget_->used(), 2u);

  // The budget is full (one session, one ready): a request of another shape evicts the ready
  // one instead of being refused.
  v1::CreateSessionRequest other;
  other.mutable_sandbox()->set_memory_bytes(512ull << 20);
  absl::StatusOr<v1::Session> o = sessions_->Create(caller_, other, nullptr);
  ASSERT_TRUE(o.ok()) << o.status();
  EXPECT_EQ(budget_->used(), 2u);
  EXPECT_FALSE(o->from_warm_pool());

  ASSERT_TRUE(sessions_->Close(caller_, s->id(), "").ok());
  ASSERT_TRUE(sessions_->Close(caller_, o->id(), "").ok());
  EXPECT_EQ(budget_->used(), 0u + static_cast<uint32_t>(pool_->ready()));
  EXPECT_FALSE(journal_.Has("host:" + s->id())) << "a used sandbox is deleted, never reused";
}

}  // namespace
}  // namespace sandgate::core
