// Sandbox images on the real daemon: an image built with mmdebstrap from Debian's archive
// (busybox on the essential set: about 20 s, 150 MiB) serves sessions under both isolation
// levels, and the software they see is the image's (busybox is there, the host's python3 is
// not); the Images RPCs refuse hostile names and what the tenant's policy does not allow; an
// image a live session uses is not deleted; a warm pool shape of the image serves sessions of
// the image only.
//
// The image is built once and kept in SANDGATE_IMAGE_CACHE, so later tests and re-runs reuse
// it: the daemon's <state_dir>/images is a bind mount of that cache, in this test's own mount
// namespace, below a state directory only root may pass (0700, the default), as a real
// daemon's images are: the sandbox's uid reaches an image only through the daemon's bind.
// Needs mmdebstrap (and runsc for the gVisor half); each test says so when it is missing.
#include <sched.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "common/sha256.h"
#include "gtest/gtest.h"
#include "sandgate/v1/images.grpc.pb.h"
#include "tests/common/eventually.h"
#include "tests/integration/daemon_harness.h"

namespace sandgate::testing {
namespace {

constexpr char kToken[] = "images-a";      // may build; every image
constexpr char kUserToken[] = "images-b";  // may use "tiny" only, may not build
constexpr uint32_t kUidBase = 353000;      // this binary's range (CMakeLists.txt)
constexpr char kImage[] = "tiny";

class ImagesTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    // The binds below live in this process's mount namespace (the daemons it starts share
    // it), so none outlives the test binary.
    ASSERT_EQ(unshare(CLONE_NEWNS), 0) << strerror(errno);
    ASSERT_EQ(mount(nullptr, "/", nullptr, MS_REC | MS_PRIVATE, nullptr), 0) << strerror(errno);
  }

  // The daemon's warm_pool, if any.
  virtual nlohmann::json WarmPoolShapes() const { return nullptr; }

  void TearDown() override {
    if (images_dir_.empty()) return;
    // Before the harness removes its directory: rm -rf would go down into the cache.
    if (umount2(images_dir_.c_str(), MNT_DETACH) != 0) {
      perror("umount the image cache");
      std::abort();
    }
  }

  void SetUp() override {
    if (access("/usr/bin/mmdebstrap", X_OK) != 0) {
      GTEST_SKIP() << "mmdebstrap is NOT INSTALLED (Debian package mmdebstrap; "
                      "deploy/setup.sh): the image integration tests did not run";
    }
    nlohmann::json config{{"tenants",
                           {{{"name", "a"},
                             {"token_sha256", Sha256::Hex(kToken)},
                             {"policy", {{"build_images", true}}}},
                            {{"name", "b"},
                             {"token_sha256", Sha256::Hex(kUserToken)},
                             {"policy", {{"images", {kImage}}}}}}},
                          {"local", {{"uid_base", kUidBase}, {"uid_count", 16}}}};
    if (nlohmann::json shapes = WarmPoolShapes(); !shapes.is_null()) config["warm_pool"] = shapes;
    daemon_ = std::make_unique<DaemonHarness>(config);
    std::filesystem::create_directories(SANDGATE_IMAGE_CACHE);
    std::filesystem::create_directories(daemon_->state_dir());
    // The state directory and the one above it as the daemon makes them: root's alone.
    for (const std::string& dir : {daemon_->state_dir(), daemon_->state_dir() + "/.."}) {
      ASSERT_EQ(chmod(dir.c_str(), 0700), 0) << dir;
    }
    const std::string images = daemon_->state_dir() + "/images";
    std::filesystem::create_directory(images);
    ASSERT_EQ(mount(SANDGATE_IMAGE_CACHE, images.c_str(), nullptr, MS_BIND, nullptr), 0)
        << strerror(errno);
    images_dir_ = images;
    daemon_->Start();
    stub_ = daemon_->Stub();
    images_ = v1::Images::NewStub(
        grpc::CreateChannel(daemon_->address(), grpc::InsecureChannelCredentials()));
  }

  // Builds "tiny" unless the cache has it; returns the progress lines seen.
  std::vector<std::string> EnsureImage() {
    v1::GetImageRequest get;
    get.set_name(kImage);
    v1::Image image;
    if (images_->GetImage(DaemonHarness::Context(kToken).get(), get, &image).ok()) return {};
    v1::BuildImageRequest req;
    req.set_name(kImage);
    req.add_packages("busybox");
    auto ctx = DaemonHarness::Context(kToken);
    ctx->set_deadline(std::chrono::system_clock::now() + std::chrono::minutes(5));
    auto reader = images_->BuildImage(ctx.get(), req);
    std::vector<std::string> lines;
    v1::ImageBuildProgress p;
    while (reader->Read(&p)) {
      if (p.has_image()) {
        EXPECT_EQ(p.image().state(), v1::Image::STATE_READY);
      } else {
        lines.push_back(p.line());
      }
    }
    grpc::Status st = reader->Finish();
    EXPECT_TRUE(st.ok()) << st.error_message() << "\n" << daemon_->Log();
    return lines;
  }

  std::string Create(const std::string& token, const std::string& isolation,
                     const std::string& image, grpc::Status* status = nullptr) {
    v1::CreateSessionRequest req;
    req.mutable_sandbox()->set_isolation(isolation);
    req.mutable_sandbox()->set_image(image);
    v1::Session s;
    grpc::Status st = stub_->CreateSession(DaemonHarness::Context(token).get(), req, &s);
    if (status != nullptr) {
      *status = st;
    } else {
      EXPECT_TRUE(st.ok()) << st.error_message();
    }
    if (st.ok()) {
      EXPECT_EQ(s.sandbox().image(), image);
      EXPECT_TRUE(absl::StartsWith(s.sandbox().image_digest(), "sha256-"));
    }
    return s.id();
  }

  // stdout, then stderr after a "|", then the exit code.
  std::string Exec(const std::string& token, const std::string& id, const std::string& command) {
    v1::ExecRequest req;
    req.set_session_id(id);
    req.set_command(command);
    auto ctx = DaemonHarness::Context(token);
    auto reader = stub_->Exec(ctx.get(), req);
    std::string out, err;
    int code = -1;
    v1::ExecResponse r;
    while (reader->Read(&r)) {
      if (r.has_output()) {
        (r.output().stream() == v1::CommandOutput::STREAM_STDOUT ? out : err) += r.output().data();
      }
      if (r.has_finished()) code = r.finished().exit_code();
    }
    grpc::Status st = reader->Finish();
    EXPECT_TRUE(st.ok()) << st.error_message();
    return absl::StrCat(out, "|", err, "|", code);
  }

  void Close(const std::string& token, const std::string& id) {
    v1::CloseSessionRequest req;
    req.set_session_id(id);
    v1::Session s;
    EXPECT_TRUE(stub_->CloseSession(DaemonHarness::Context(token).get(), req, &s).ok());
  }

  std::unique_ptr<DaemonHarness> daemon_;
  std::string images_dir_;  // the cache's bind, unmounted by TearDown
  std::unique_ptr<v1::Sandgate::Stub> stub_;
  std::unique_ptr<v1::Images::Stub> images_;
};

TEST_F(ImagesTest, ASessionFromAnImageRunsTheImagesSoftwareUnderBothLevels) {
  EnsureImage();
  std::vector<std::string> levels = {"namespaces"};
  if (access("/usr/bin/runsc", X_OK) == 0) {
    levels.push_back("gvisor");
  } else {
    ADD_FAILURE() << "runsc is NOT INSTALLED (Debian package runsc): the gvisor half did not run";
  }
  ASSERT_NE(access("/usr/bin/python3", X_OK), -1) << "the host has python3; the image must not";
  ASSERT_EQ(access("/bin/busybox", X_OK), -1) << "the host has no busybox; the image has";
  for (const std::string& level : levels) {
    SCOPED_TRACE(level);
    const std::string id = Create(kUserToken, level, kImage);
    ASSERT_FALSE(id.empty());
    // busybox only the image has; the sandbox's init is there too (commands run at all).
    EXPECT_EQ(Exec(kUserToken, id, "busybox echo from-the-image"), "from-the-image\n||0");
    EXPECT_TRUE(
        absl::StartsWith(Exec(kUserToken, id, "ls /usr/bin/python3 || echo absent"), "absent\n"));
    EXPECT_EQ(Exec(kUserToken, id, "busybox grep -c bookworm /etc/os-release"), "3\n||0");
    // The image is read-only in the sandbox; /work is the session's.
    EXPECT_TRUE(absl::EndsWith(Exec(kUserToken, id, "touch /usr/bin/x"), "|1"));
    EXPECT_EQ(Exec(kUserToken, id, "echo hi > /work/f && busybox cat /work/f"), "hi\n||0");
    // A live session holds its image: it is not deleted, and the error says who uses it.
    v1::DeleteImageRequest del;
    del.set_name(kImage);
    v1::Image image;
    grpc::Status busy = images_->DeleteImage(DaemonHarness::Context(kToken).get(), del, &image);
    EXPECT_EQ(busy.error_code(), grpc::StatusCode::FAILED_PRECONDITION);
    EXPECT_TRUE(absl::StrContains(busy.error_message(), id)) << busy.error_message();
    Close(kUserToken, id);
  }
  // The host root stays the default, with the host's python3.
  v1::CreateSessionRequest req;
  v1::Session host;
  ASSERT_TRUE(stub_->CreateSession(DaemonHarness::Context(kToken).get(), req, &host).ok());
  EXPECT_TRUE(host.sandbox().image_digest().empty());
  EXPECT_EQ(Exec(kToken, host.id(), "python3 -c 'print(1)'"), "1\n||0");
  Close(kToken, host.id());
}

TEST_F(ImagesTest, ThePolicyAndHostileNamesGetClearErrors) {
  EnsureImage();
  grpc::Status st;
  // Tenant b may use "tiny" only: not the host's root, not another name; and may not build.
  Create(kUserToken, "namespaces", "", &st);
  EXPECT_EQ(st.error_code(), grpc::StatusCode::PERMISSION_DENIED);
  EXPECT_TRUE(absl::StrContains(st.error_message(), "image 'host' is not allowed (allowed: tiny)"))
      << st.error_message();
  v1::BuildImageRequest build;
  build.set_name("mine");
  build.add_packages("busybox");
  auto ctx = DaemonHarness::Context(kUserToken);
  auto reader = images_->BuildImage(ctx.get(), build);
  v1::ImageBuildProgress p;
  while (reader->Read(&p)) {
  }
  st = reader->Finish();
  EXPECT_EQ(st.error_code(), grpc::StatusCode::PERMISSION_DENIED);
  EXPECT_TRUE(absl::StrContains(st.error_message(), "policy.build_images")) << st.error_message();

  for (const auto& [name, says] :
       std::vector<std::pair<std::string, std::string>>{{"../../etc", "must start"},
                                                        {"a/b", "'/' is not allowed"},
                                                        {std::string(300, 'a'), "300 bytes"},
                                                        {"x\xff", "not valid UTF-8"},
                                                        {"nosuch", "image not found: nosuch"}}) {
    SCOPED_TRACE(name.substr(0, 20));
    Create(kToken, "namespaces", name, &st);
    EXPECT_NE(st.error_code(), grpc::StatusCode::OK);
    EXPECT_TRUE(absl::StrContains(st.error_message(), says)) << st.error_message();
    v1::GetImageRequest get;
    get.set_name(name);
    v1::Image image;
    st = images_->GetImage(DaemonHarness::Context(kToken).get(), get, &image);
    EXPECT_NE(st.error_code(), grpc::StatusCode::OK);
    v1::DeleteImageRequest del;
    del.set_name(name);
    st = images_->DeleteImage(DaemonHarness::Context(kToken).get(), del, &image);
    EXPECT_NE(st.error_code(), grpc::StatusCode::OK);
  }
  // A package the archive does not have is named (mmdebstrap's own error, streamed).
  build.set_name("nosuchpkg");
  build.clear_packages();
  build.add_packages("sandgate-no-such-package");
  auto ctx2 = DaemonHarness::Context(kToken);
  auto reader2 = images_->BuildImage(ctx2.get(), build);
  while (reader2->Read(&p)) {
  }
  st = reader2->Finish();
  EXPECT_EQ(st.error_code(), grpc::StatusCode::INVALID_ARGUMENT) << st.error_message();
  EXPECT_TRUE(absl::StrContains(st.error_message(), "'sandgate-no-such-package' is not in Debian"))
      << st.error_message();
  // Nothing of it is listed.
  v1::ListImagesResponse list;
  ASSERT_TRUE(images_->ListImages(DaemonHarness::Context(kToken).get(), {}, &list).ok());
  for (const v1::Image& image : list.images()) EXPECT_NE(image.name(), "nosuchpkg");
}

// Under gVisor the image's bind stays on the host while the session lives (the gofer serves
// the image from it); after a SIGKILL of the daemon, the restart's sweep removes it with the
// session's other mounts.
TEST_F(ImagesTest, ASigkilledDaemonsGvisorSessionLeavesNoImageBindAfterRestart) {
  if (access("/usr/bin/runsc", X_OK) != 0) {
    GTEST_SKIP() << "runsc is NOT INSTALLED (Debian package runsc): this test did not run";
  }
  EnsureImage();
  auto image_binds = [] {
    std::vector<std::string> out;
    std::ifstream in("/proc/self/mountinfo");
    const std::string under = absl::StrCat(" /run/sandgate-sandboxes/", kUidBase / 100);
    for (std::string line; std::getline(in, line);) {
      if (absl::StrContains(line, under) && absl::StrContains(line, "/image ")) {
        out.push_back(line);
      }
    }
    return out;
  };
  const std::string id = Create(kUserToken, "gvisor", kImage);
  ASSERT_FALSE(id.empty());
  EXPECT_EQ(image_binds().size(), 1u) << "the session's read-only bind of the image";
  daemon_->Stop(SIGKILL);
  daemon_->Start();  // sweeps before it serves
  EXPECT_EQ(image_binds(), std::vector<std::string>{});
}

// A warm pool shape of the image, on the real daemon and provider: a session asking for the
// image takes a ready sandbox of it and runs the image's software; one on the host's root is
// never given that sandbox.
class ImagesWarmPoolTest : public ImagesTest {
 protected:
  nlohmann::json WarmPoolShapes() const override { return {{{"size", 1}, {"image", kImage}}}; }
  size_t Filled() const {
    size_t n = 0;
    const std::string log = daemon_->Log();
    for (size_t at = 0; (at = log.find("\"event\":\"warm_pool.filled\"", at)) != std::string::npos;
         ++at) {
      ++n;
    }
    return n;
  }
};

TEST_F(ImagesWarmPoolTest, AShapeOfTheImageServesSessionsOfTheImageOnly) {
  EnsureImage();
  // The pool retries each second until the image exists (on a first run it is built above).
  ASSERT_TRUE(Eventually(
      "the pool to hold a sandbox of the image", [&] { return Filled() >= 1; }, absl::Seconds(30)))
      << daemon_->Log();
  v1::CreateSessionRequest req;
  req.mutable_sandbox()->set_image(kImage);
  v1::Session from_pool;
  grpc::Status st = stub_->CreateSession(DaemonHarness::Context(kUserToken).get(), req, &from_pool);
  ASSERT_TRUE(st.ok()) << st.error_message();
  EXPECT_TRUE(from_pool.from_warm_pool());
  EXPECT_EQ(Exec(kUserToken, from_pool.id(), "busybox echo warm"), "warm\n||0");
  EXPECT_TRUE(absl::StartsWith(
      Exec(kUserToken, from_pool.id(), "ls /usr/bin/python3 || echo absent"), "absent\n"));
  // Refilled with the image again: a host-root request does not get it.
  ASSERT_TRUE(Eventually(
      "the pool to refill", [&] { return Filled() >= 2; }, absl::Seconds(30)));
  v1::Session host;
  st =
      stub_->CreateSession(DaemonHarness::Context(kToken).get(), v1::CreateSessionRequest(), &host);
  ASSERT_TRUE(st.ok()) << st.error_message();
  EXPECT_FALSE(host.from_warm_pool());
  EXPECT_EQ(Exec(kToken, host.id(), "python3 -c 'print(1)'"), "1\n||0");
  Close(kToken, host.id());
  Close(kUserToken, from_pool.id());
}

}  // namespace
}  // namespace sandgate::testing
