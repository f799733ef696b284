#include "server/tls_mirror.h"

#include <sys/stat.h>

#include <filesystem>
#include <fstream>

#include "gtest/gtest.h"
#include "tests/fakes/fake_clock.h"
#include "tests/fakes/test_certs.h"

namespace sandgate::server {
namespace {

using testing::ReadFileOrEmpty;

class TlsMirrorTest : public testing::TlsFixture {
 protected:
  void SetUp() override {
    TlsFixture::SetUp();
    if (HasFatalFailure()) return;
    tls_.cert_file = tmp_.path() + "/live.pem";
    tls_.key_file = tmp_.path() + "/live.key";
    tls_.client_ca_file = certs_.ca;
    tls_.reload_interval_seconds = 5;
    Install(certs_.server);
  }
  void Install(const testing::TestCertificates::Pair& pair) {
    std::filesystem::copy_file(pair.key, tls_.key_file,
                               std::filesystem::copy_options::overwrite_existing);
    std::filesystem::copy_file(pair.cert, tls_.cert_file,
                               std::filesystem::copy_options::overwrite_existing);
  }
  // One reload interval of fake time, and the mirror's thread done with it.
  void NextInterval() {
    clock_.Advance(absl::Seconds(tls_.reload_interval_seconds));
    ASSERT_TRUE(clock_.BlockUntilSettled(1));
  }

  core::TlsConfig tls_;
  testing::FakeClock clock_;
};

TEST_F(TlsMirrorTest, ServesPrivateCopiesAndFollowsAGoodReplacement) {
  auto mirror = TlsMirror::Start(tls_, tmp_.path() + "/mirror", &clock_);
  ASSERT_TRUE(mirror.ok()) << mirror.status();
  const core::TlsConfig& served = (*mirror)->served();
  EXPECT_EQ(ReadFileOrEmpty(served.cert_file), ReadFileOrEmpty(certs_.server.cert));
  EXPECT_EQ(ReadFileOrEmpty(served.key_file), ReadFileOrEmpty(certs_.server.key));
  EXPECT_EQ(ReadFileOrEmpty(served.client_ca_file), ReadFileOrEmpty(certs_.ca));
  struct stat st;
  ASSERT_EQ(stat(served.key_file.c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 0777, 0600u) << "a private key";

  Install(certs_.server2);
  ASSERT_TRUE(clock_.BlockUntilSettled(1));
  clock_.Advance(absl::Seconds(tls_.reload_interval_seconds) - absl::Nanoseconds(1));
  ASSERT_TRUE(clock_.BlockUntilSettled(1));
  EXPECT_EQ(ReadFileOrEmpty(served.cert_file), ReadFileOrEmpty(certs_.server.cert))
      << "not before the interval";
  clock_.Advance(absl::Nanoseconds(1));
  ASSERT_TRUE(clock_.BlockUntilSettled(1));
  EXPECT_EQ(ReadFileOrEmpty(served.cert_file), ReadFileOrEmpty(certs_.server2.cert));
  EXPECT_EQ(ReadFileOrEmpty(served.key_file), ReadFileOrEmpty(certs_.server2.key));
}

TEST_F(TlsMirrorTest, ABadReplacementLeavesTheLastGoodPairServed) {
  auto mirror = TlsMirror::Start(tls_, tmp_.path() + "/mirror", &clock_);
  ASSERT_TRUE(mirror.ok()) << mirror.status();
  const core::TlsConfig& served = (*mirror)->served();
  ASSERT_TRUE(clock_.BlockUntilSettled(1));
  // A renewal caught half way: the new key, the old certificate.
  std::filesystem::copy_file(certs_.server2.key, tls_.key_file,
                             std::filesystem::copy_options::overwrite_existing);
  NextInterval();
  EXPECT_EQ(ReadFileOrEmpty(served.key_file), ReadFileOrEmpty(certs_.server.key));
  std::ofstream(tls_.cert_file) << "half a PEM";
  NextInterval();
  std::filesystem::remove(tls_.key_file);
  NextInterval();
  EXPECT_EQ(ReadFileOrEmpty(served.cert_file), ReadFileOrEmpty(certs_.server.cert));
  EXPECT_EQ(ReadFileOrEmpty(served.key_file), ReadFileOrEmpty(certs_.server.key));
  Install(certs_.server2);
  NextInterval();
  EXPECT_EQ(ReadFileOrEmpty(served.cert_file), ReadFileOrEmpty(certs_.server2.cert));
}

TEST_F(TlsMirrorTest, StartRefusesBadFilesNamingThem) {
  std::ofstream(tls_.cert_file) << "garbage";
  auto mirror = TlsMirror::Start(tls_, tmp_.path() + "/mirror", &clock_);
  ASSERT_FALSE(mirror.ok());
  EXPECT_NE(mirror.status().message().find("tls.cert_file: " + tls_.cert_file), std::string::npos)
      << mirror.status();
}

}  // namespace
}  // namespace sandgate::server
