#include "upstream/credentials.h"

#include <stdlib.h>
#include <unistd.h>

#include <fstream>
#include <string>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/common/temp_dir.h"

namespace sandgate::upstream {
namespace {

using ::testing::HasSubstr;
using ::testing::Not;

class FileCredentialsTest : public ::testing::Test {
 protected:
  void SetUp() override { ASSERT_TRUE(tmp_.ok()); }
  std::string path() const { return tmp_.path() + "/openai.key"; }
  void Write(const std::string& content) {
    std::ofstream(path(), std::ios::binary | std::ios::trunc) << content;
  }

  testing::ScopedTempDir tmp_{"sandgate-cred"};
};

TEST_F(FileCredentialsTest, ReadsAndTrimsTheKey) {
  Write("  sk-proj-abc123\n\n");
  absl::StatusOr<std::string> key = FileCredentials(path()).ApiKey();
  ASSERT_TRUE(key.ok()) << key.status();
  EXPECT_EQ(*key, "sk-proj-abc123");
}

TEST_F(FileCredentialsTest, ReReadsTheFileSoRotationNeedsNoRestart) {
  FileCredentials creds(path());
  Write("sk-one");
  EXPECT_EQ(*creds.ApiKey(), "sk-one");
  Write("sk-two\n");
  EXPECT_EQ(*creds.ApiKey(), "sk-two");
}

TEST_F(FileCredentialsTest, MissingFileIsNotFoundAndNamesThePath) {
  absl::Status s = FileCredentials(path()).ApiKey().status();
  EXPECT_EQ(s.code(), absl::StatusCode::kNotFound);
  EXPECT_THAT(s.message(), HasSubstr(path()));
}

TEST_F(FileCredentialsTest, EmptyFileIsFailedPrecondition) {
  Write(" \n\t\n");
  absl::Status s = FileCredentials(path()).ApiKey().status();
  EXPECT_EQ(s.code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(s.message(), HasSubstr(path()));
}

TEST_F(FileCredentialsTest, ErrorsNeverQuoteTheContent) {
  // Two lines: probably a wrong file, and the content may well be secret.
  Write("sk-first-line-SECRET\nsk-second-line-SECRET\n");
  absl::Status s = FileCredentials(path()).ApiKey().status();
  EXPECT_EQ(s.code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(s.message(), HasSubstr(path()));
  EXPECT_THAT(s.message(), Not(HasSubstr("SECRET")));
}

TEST(EnvCredentialsTest, ReadsTrimsAndReportsUnsetOrEmpty) {
  const char* var = "SANDGATE_TEST_UPSTREAM_KEY";
  setenv(var, " sk-env-key \n", 1);
  absl::StatusOr<std::string> key = EnvCredentials(var).ApiKey();
  ASSERT_TRUE(key.ok()) << key.status();
  EXPECT_EQ(*key, "sk-env-key");

  setenv(var, "", 1);
  absl::Status empty = EnvCredentials(var).ApiKey().status();
  EXPECT_EQ(empty.code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(empty.message(), HasSubstr(var));

  unsetenv(var);
  absl::Status unset = EnvCredentials(var).ApiKey().status();
  EXPECT_EQ(unset.code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(unset.message(), HasSubstr(var));
}

// A key goes into an HTTP header: a CR/LF inside would split it (header injection).
TEST(EnvCredentialsTest, RefusesAControlCharacterInsideTheKeyWithoutQuotingIt) {
  const char* var = "SANDGATE_TEST_UPSTREAM_KEY";
  setenv(var, "sk-a\r\nX-Evil: SECRET", 1);
  absl::Status s = EnvCredentials(var).ApiKey().status();
  unsetenv(var);
  EXPECT_EQ(s.code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(s.message(), HasSubstr("control character"));
  EXPECT_THAT(s.message(), Not(HasSubstr("SECRET")));
}

}  // namespace
}  // namespace sandgate::upstream
