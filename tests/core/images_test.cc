#include "core/images.h"

#include <sys/stat.h>
#include <unistd.h>

#include <filesystem>
#include <string>
#include <vector>

#include "absl/strings/match.h"
#include "absl/synchronization/notification.h"
#include "core/image_api.h"
#include "core/mmdebstrap_builder.h"
#include "gtest/gtest.h"
#include "tests/common/temp_dir.h"
#include "tests/fakes/fake_clock.h"
#include "tests/fakes/fake_image_builder.h"

namespace sandgate::core {
namespace {

using ::sandgate::testing::FakeImageBuilder;

class ImageStoreTest : public ::testing::Test {
 protected:
  std::unique_ptr<ImageStore> Open(size_t max_builds = 1, size_t max_waiting = 8) {
    ImageStoreOptions o;
    o.dir = ImagesDir(dir_.path());
    o.builder = &builder_;
    o.clock = &clock_;
    o.max_builds = max_builds;
    o.max_waiting_builds = max_waiting;
    absl::StatusOr<std::unique_ptr<ImageStore>> s = ImageStore::Create(o);
    EXPECT_TRUE(s.ok()) << s.status();
    return s.ok() ? std::move(*s) : nullptr;
  }

  // Waits for the end of `name`'s build (woken by the store, no polling) and returns it.
  static ImageStore::Progress AwaitBuild(ImageStore& store, const std::string& name) {
    absl::Mutex mu;
    bool woken = false;
    absl::StatusOr<uint64_t> watch = store.Watch(name, [&] {
      absl::MutexLock lock(&mu);
      woken = true;
    });
    EXPECT_TRUE(watch.ok()) << watch.status();
    ImageStore::Progress all;
    for (;;) {
      absl::StatusOr<ImageStore::Progress> p = store.ReadProgress(name, all.next);
      EXPECT_TRUE(p.ok()) << p.status();
      if (!p.ok()) break;
      all.lines.insert(all.lines.end(), p->lines.begin(), p->lines.end());
      all.next = p->next;
      if (p->done) {
        all.done = true;
        all.status = p->status;
        all.image = p->image;
        break;
      }
      if (!p->lines.empty()) continue;
      absl::MutexLock lock(&mu);
      mu.Await(absl::Condition(&woken));
      woken = false;
    }
    if (watch.ok()) store.Unwatch(name, *watch);
    return all;
  }

  size_t TmpEntries() const {
    size_t n = 0;
    for (auto& e : std::filesystem::directory_iterator(ImagesDir(dir_.path()) + "/tmp")) {
      (void)e;
      ++n;
    }
    return n;
  }

  testing::ScopedTempDir dir_{"sg-images"};
  testing::FakeClock clock_;
  FakeImageBuilder builder_;
};

TEST_F(ImageStoreTest, TheDigestIsTheRecipesWhateverTheOrderOrRepeats) {
  absl::StatusOr<std::vector<std::string>> a = NormalizePackages({"python3", "busybox", "python3"});
  ASSERT_TRUE(a.ok()) << a.status();
  EXPECT_EQ(*a, (std::vector<std::string>{"busybox", "python3"}));
  ImageRecipe r1{"bookworm", "essential", *a};
  ImageRecipe r2{"bookworm", "essential", {"busybox", "python3"}};
  ImageRecipe other{"bookworm", "essential", {"busybox"}};
  ImageRecipe other_suite{"trixie", "essential", {"busybox", "python3"}};
  EXPECT_EQ(RecipeDigest(r1), RecipeDigest(r2));
  EXPECT_NE(RecipeDigest(r1), RecipeDigest(other));
  EXPECT_NE(RecipeDigest(r1), RecipeDigest(other_suite));
  EXPECT_TRUE(absl::StartsWith(RecipeDigest(r1), "sha256-"));
  EXPECT_EQ(RecipeDigest(r1).size(), 7u + 64u);
}

TEST_F(ImageStoreTest, ABuildIsRecordedWithItsPackagesAndSizeAndSurvivesARestart) {
  auto store = Open();
  ASSERT_TRUE(store->StartBuild("py", {"python3", "busybox"}, "team-a").ok());
  ImageStore::Progress p = AwaitBuild(*store, "py");
  ASSERT_TRUE(p.status.ok()) << p.status;
  EXPECT_EQ(p.image.state(), v1::Image::STATE_READY);
  EXPECT_EQ(p.image.built_by(), "team-a");
  EXPECT_GT(p.image.size_bytes(), 0u);
  EXPECT_TRUE(std::any_of(p.lines.begin(), p.lines.end(),
                          [](const std::string& l) { return l == "fake: unpacked python3"; }));
  const std::string root = store->RootDir(p.image.digest());
  EXPECT_TRUE(std::filesystem::exists(root + "/usr/bin/busybox"));
  struct stat st;
  ASSERT_EQ(stat((ImagesDir(dir_.path()) + "/" + p.image.digest()).c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 0777, 0555u) << "a built image's directory is read-only";
  EXPECT_EQ(TmpEntries(), 0u);

  store.reset();
  auto again = Open();
  absl::StatusOr<v1::Image> image = again->Get("py");
  ASSERT_TRUE(image.ok()) << image.status();
  EXPECT_EQ(image->digest(), p.image.digest());
  EXPECT_EQ(std::vector<std::string>(image->packages().begin(), image->packages().end()),
            (std::vector<std::string>{"busybox", "python3"}));
  EXPECT_EQ(image->size_bytes(), p.image.size_bytes());
  EXPECT_EQ(again->List().size(), 1u);
}

TEST_F(ImageStoreTest, TwoNamesWithOneRecipeShareOneDirectoryBuiltOnce) {
  auto store = Open();
  ASSERT_TRUE(store->StartBuild("a", {"busybox"}, "t").ok());
  ASSERT_TRUE(AwaitBuild(*store, "a").status.ok());
  ASSERT_TRUE(store->StartBuild("b", {"busybox", "busybox"}, "t").ok());
  absl::StatusOr<v1::Image> b = store->Get("b");
  ASSERT_TRUE(b.ok()) << b.status();
  EXPECT_EQ(b->state(), v1::Image::STATE_READY) << "ready at once: nothing to build";
  EXPECT_EQ(b->digest(), store->Get("a")->digest());
  EXPECT_EQ(builder_.builds(), 1);

  // Removing one name keeps the directory the other uses; removing the last removes it.
  const std::string dir = ImagesDir(dir_.path()) + "/" + b->digest();
  ASSERT_TRUE(store->Remove("a").ok());
  EXPECT_TRUE(std::filesystem::exists(dir));
  EXPECT_EQ(store->Get("a").status().code(), absl::StatusCode::kNotFound);
  ASSERT_TRUE(store->Remove("b").ok());
  EXPECT_FALSE(std::filesystem::exists(dir));
  EXPECT_EQ(TmpEntries(), 0u);
}

TEST_F(ImageStoreTest, ASecondBuildOfANameWhileOneRunsIsRefusedNamingWhoStartedIt) {
  auto store = Open();
  builder_.Hold();
  ASSERT_TRUE(store->StartBuild("py", {"python3"}, "team-a").ok());
  builder_.AwaitStarted(1);
  absl::Status again = store->StartBuild("py", {"python3-pandas"}, "team-b");
  EXPECT_EQ(again.code(), absl::StatusCode::kAlreadyExists);
  EXPECT_TRUE(absl::StrContains(again.message(), "is being built")) << again;
  EXPECT_TRUE(absl::StrContains(again.message(), "team-a")) << again;
  EXPECT_EQ(store->Get("py")->state(), v1::Image::STATE_BUILDING);
  builder_.Release();
  ASSERT_TRUE(AwaitBuild(*store, "py").status.ok());
  absl::Status exists = store->StartBuild("py", {"python3"}, "team-a");
  EXPECT_EQ(exists.code(), absl::StatusCode::kAlreadyExists);
  EXPECT_TRUE(absl::StrContains(exists.message(), "delete it first")) << exists;
  EXPECT_EQ(builder_.builds(), 1);
}

TEST_F(ImageStoreTest, BuildsRunOnTheStoresOwnBoundedThreadsAndQueueBeyond) {
  auto store = Open(/*max_builds=*/1, /*max_waiting=*/2);
  builder_.Hold();
  // StartBuild returns while the build is held: it never runs on the caller's thread.
  ASSERT_TRUE(store->StartBuild("one", {"busybox"}, "t").ok());
  ASSERT_TRUE(store->StartBuild("two", {"dash"}, "t").ok());
  absl::Status third = store->StartBuild("three", {"bash"}, "t");
  EXPECT_EQ(third.code(), absl::StatusCode::kResourceExhausted) << third;
  builder_.Release();
  EXPECT_TRUE(AwaitBuild(*store, "one").status.ok());
  EXPECT_TRUE(AwaitBuild(*store, "two").status.ok());
  EXPECT_EQ(builder_.max_running(), 1);
  EXPECT_TRUE(store->StartBuild("three", {"bash"}, "t").ok()) << "room again once they ended";
  EXPECT_TRUE(AwaitBuild(*store, "three").status.ok());
}

TEST_F(ImageStoreTest, RemovingANameWhileItBuildsCancelsTheBuildAndLeavesNothing) {
  auto store = Open();
  builder_.Hold();
  ASSERT_TRUE(store->StartBuild("py", {"python3"}, "t").ok());
  builder_.AwaitStarted(1);
  absl::StatusOr<v1::Image> removed = store->Remove("py");
  ASSERT_TRUE(removed.ok()) << removed.status();
  EXPECT_EQ(removed->state(), v1::Image::STATE_BUILDING);
  ImageStore::Progress p = AwaitBuild(*store, "py");
  EXPECT_EQ(p.status.code(), absl::StatusCode::kCancelled) << p.status;
  EXPECT_EQ(store->Get("py").status().code(), absl::StatusCode::kNotFound);
  EXPECT_EQ(TmpEntries(), 0u);
  builder_.Release();
  EXPECT_TRUE(store->StartBuild("py", {"python3"}, "t").ok()) << "the name is free again";
  EXPECT_TRUE(AwaitBuild(*store, "py").status.ok());
}

TEST_F(ImageStoreTest, CancelBuildEndsTheBuildCancelled) {
  auto store = Open();
  builder_.Hold();
  ASSERT_TRUE(store->StartBuild("py", {"python3"}, "t").ok());
  builder_.AwaitStarted(1);
  store->CancelBuild("py", "its BuildImage call was cancelled");
  ImageStore::Progress p = AwaitBuild(*store, "py");
  EXPECT_EQ(p.status.code(), absl::StatusCode::kCancelled);
  EXPECT_TRUE(absl::StrContains(p.lines.back(), "cancelled")) << p.lines.back();
}

TEST_F(ImageStoreTest, AFailedBuildLeavesNoImageAndNoDirectory) {
  auto store = Open();
  builder_.FailWith(absl::InvalidArgumentError("packages: 'nosuchpkg' is not in Debian's archive"));
  ASSERT_TRUE(store->StartBuild("bad", {"nosuchpkg"}, "t").ok());
  ImageStore::Progress p = AwaitBuild(*store, "bad");
  EXPECT_EQ(p.status.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_TRUE(absl::StrContains(p.lines.back(), "nosuchpkg")) << p.lines.back();
  EXPECT_EQ(store->Get("bad").status().code(), absl::StatusCode::kNotFound);
  EXPECT_EQ(TmpEntries(), 0u);
  EXPECT_FALSE(std::filesystem::exists(ImagesDir(dir_.path()) + "/" + p.image.digest()));
}

TEST_F(ImageStoreTest, AnImageALiveSessionUsesIsNotRemovedAndTheErrorNamesIt) {
  auto store = Open();
  ASSERT_TRUE(store->StartBuild("py", {"python3"}, "t").ok());
  const std::string digest = AwaitBuild(*store, "py").image.digest();
  std::vector<std::string> users = {"s-2", "s-1"};
  std::string asked;
  store->SetInUse([&](const std::string& root) {
    asked = root;
    return users;
  });
  absl::StatusOr<v1::Image> refused = store->Remove("py");
  EXPECT_EQ(refused.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_TRUE(absl::StrContains(refused.status().message(), "2 live sessions (s-1, s-2)"))
      << refused.status();
  EXPECT_EQ(asked, store->RootDir(digest));
  EXPECT_TRUE(store->Get("py").ok());
  users.clear();
  EXPECT_TRUE(store->Remove("py").ok());
  EXPECT_FALSE(std::filesystem::exists(store->RootDir(digest)));
}

TEST_F(ImageStoreTest, BadNamesAndPackagesAreRefusedNamingTheProblem) {
  auto store = Open();
  struct Case {
    std::string name;
    std::string says;
  };
  for (const Case& c : std::vector<Case>{{"", "empty"},
                                         {"../etc", "must start"},
                                         {"a/../../b", "'/' is not allowed"},
                                         {std::string("py\0x", 4), "is not allowed"},
                                         {"Py", "must start"},
                                         {"py thon", "' ' is not allowed"},
                                         {"host", "host's own root"},
                                         {std::string(64, 'a'), "64 bytes, longer than 63"},
                                         {"p\xff\xfe", "not valid UTF-8"}}) {
    absl::Status st = store->StartBuild(c.name, {"busybox"}, "t");
    EXPECT_EQ(st.code(), absl::StatusCode::kInvalidArgument) << c.name;
    EXPECT_TRUE(absl::StrContains(st.message(), c.says)) << st << " for " << c.name;
    EXPECT_EQ(store->Remove(c.name).status().code(), absl::StatusCode::kInvalidArgument);
  }
  std::vector<std::string> too_many(kMaxImagePackages + 1, "busybox");
  for (const auto& [packages, says] : std::vector<std::pair<std::vector<std::string>, std::string>>{
           {{}, "at least one"},
           {{"../../etc/passwd"}, "not a Debian package name"},
           {{"busybox", "Bash"}, "'Bash' is not a Debian package name"},
           {{"--root=/"}, "not a Debian package name"},
           {{"a,b"}, "not a Debian package name"},
           {{"py\xff"}, "not valid UTF-8"},
           {{std::string(101, 'a')}, "101 bytes"},
           {too_many, "201 named"}}) {
    absl::Status st = store->StartBuild("ok", packages, "t");
    EXPECT_EQ(st.code(), absl::StatusCode::kInvalidArgument);
    EXPECT_TRUE(absl::StrContains(st.message(), says)) << st;
  }
  EXPECT_EQ(builder_.builds(), 0);
}

TEST_F(ImageStoreTest, WhatAStoppedDaemonWasBuildingIsRemovedAtStart) {
  const std::string tmp = ImagesDir(dir_.path()) + "/tmp/sha256-x-1";
  std::filesystem::create_directories(tmp + "/root/usr");
  auto store = Open();
  EXPECT_EQ(TmpEntries(), 0u);
  EXPECT_TRUE(store->List().empty());
}

TEST(ImageApiTest, TheTenantsPolicyBoundsBuildingUsingAndDeleting) {
  testing::ScopedTempDir dir("sg-image-api");
  FakeImageBuilder builder;
  ImageStoreOptions o;
  o.dir = ImagesDir(dir.path());
  o.builder = &builder;
  auto store = ImageStore::Create(o);
  ASSERT_TRUE(store.ok());
  ImageApi api(store->get());
  TenantConfig builder_cfg{"builder", "", false, {}, {}};
  builder_cfg.policy.build_images = true;
  builder_cfg.policy.images = {"py", "host"};
  TenantConfig user_cfg{"user", "", false, {}, {}};
  user_cfg.policy.images = {"py"};
  TenantConfig other_cfg{"other", "", false, {}, {}};
  other_cfg.policy.build_images = true;
  Caller builder_caller{"builder", false, &builder_cfg};
  Caller user{"user", false, &user_cfg};
  Caller other{"other", false, &other_cfg};

  v1::BuildImageRequest build;
  build.set_name("py");
  build.add_packages("python3");
  absl::Status denied = api.StartBuild(user, build);
  EXPECT_EQ(denied.code(), absl::StatusCode::kPermissionDenied);
  EXPECT_TRUE(absl::StrContains(denied.message(), "policy.build_images")) << denied;
  v1::BuildImageRequest elsewhere = build;
  elsewhere.set_name("r");
  absl::Status not_listed = api.StartBuild(builder_caller, elsewhere);
  EXPECT_EQ(not_listed.code(), absl::StatusCode::kPermissionDenied);
  EXPECT_TRUE(absl::StrContains(not_listed.message(), "allowed: py, host")) << not_listed;
  ASSERT_TRUE(api.StartBuild(builder_caller, build).ok());
  ASSERT_TRUE(api.StartBuild(other, elsewhere).ok());

  v1::ListImagesResponse list;
  ASSERT_TRUE(api.ListImages(user, {}, &list).ok());
  ASSERT_EQ(list.images_size(), 1) << "only the images its policy names";
  EXPECT_EQ(list.images(0).name(), "py");
  v1::GetImageRequest get;
  get.set_name("r");
  v1::Image image;
  EXPECT_EQ(api.GetImage(user, get, &image).code(), absl::StatusCode::kPermissionDenied);

  v1::DeleteImageRequest del;
  del.set_name("py");
  EXPECT_EQ(api.DeleteImage(user, del, &image).code(), absl::StatusCode::kPermissionDenied);
  absl::Status not_theirs = api.DeleteImage(other, del, &image);
  EXPECT_EQ(not_theirs.code(), absl::StatusCode::kPermissionDenied);
  EXPECT_TRUE(absl::StrContains(not_theirs.message(), "built by tenant 'builder'")) << not_theirs;
  Caller op{"ops", true, &user_cfg};
  EXPECT_TRUE(api.DeleteImage(op, del, &image).ok()) << "operators may delete any";
}

TEST(MmdebstrapBuilderTest, ItsCommandAndTheMissingPackageItsErrorsName) {
  MmdebstrapBuilder b("/usr/bin/mmdebstrap");
  EXPECT_EQ(b.Argv({"bookworm", "essential", {"busybox", "python3"}}, "/x/root"),
            (std::vector<std::string>{"/usr/bin/mmdebstrap", "--mode=root", "--variant=essential",
                                      "--include=busybox,python3", "bookworm", "/x/root"}));
  EXPECT_EQ(MmdebstrapBuilder::MissingPackage("E: Unable to locate package nosuchpkg"),
            "nosuchpkg");
  EXPECT_EQ(MmdebstrapBuilder::MissingPackage("E: Package 'python2' has no installation candidate"),
            "python2");
  EXPECT_EQ(MmdebstrapBuilder::MissingPackage("I: installing remaining packages..."), "");
}

TEST(MmdebstrapBuilderTest, AMissingMmdebstrapIsAClearError) {
  MmdebstrapBuilder b("/nonexistent/mmdebstrap");
  CancelToken cancel;
  absl::Status st = b.Build(
      {"bookworm", "essential", {"busybox"}}, "/tmp/never", [](auto) {}, cancel);
  EXPECT_EQ(st.code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_TRUE(absl::StrContains(st.message(), "install Debian's mmdebstrap")) << st;
}

}  // namespace
}  // namespace sandgate::core
