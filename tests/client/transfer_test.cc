#include "client/transfer.h"

#include <dirent.h>
#include <sys/stat.h>

#include <string>
#include <vector>

#include "absl/strings/match.h"
#include "common/sha256.h"
#include "gtest/gtest.h"
#include "tests/client/temp_dir_test_base.h"

namespace sandgate::cli {
namespace {

class TransferTest : public TempDirTest {
 protected:
  std::vector<std::string> Files() const {
    std::vector<std::string> names;
    DIR* d = opendir(dir_.c_str());
    while (dirent* e = d ? readdir(d) : nullptr) {
      if (std::string(e->d_name) != "." && std::string(e->d_name) != "..")
        names.push_back(e->d_name);
    }
    if (d) closedir(d);
    return names;
  }
};

TEST_F(TransferTest, AVerifiedDownloadAppearsUnderItsNameOnlyAtCommit) {
  std::string path = dir_ + "/memo.md";
  auto sink = DownloadSink::Create(path);
  ASSERT_TRUE(sink.ok()) << sink.status();
  ASSERT_TRUE((*sink)->Add("hello ", 11, "").ok());
  ASSERT_TRUE((*sink)->Add("world", 11, Sha256::Hex("hello world")).ok());
  struct stat st;
  EXPECT_NE(stat(path.c_str(), &st), 0) << "visible before the check";
  ASSERT_TRUE((*sink)->Commit(Sha256::Hex("hello world")).ok());
  EXPECT_EQ(Slurp(path), "hello world");
  sink->reset();
  EXPECT_EQ(Files(), std::vector<std::string>{"memo.md"});
}

TEST_F(TransferTest, ATamperedStreamFailsNamingTheFileAndBothHashesAndLeavesNothing) {
  std::string path = dir_ + "/calculated_metrics.csv";
  std::string announced = Sha256::Hex("the original bytes");
  std::string received = Sha256::Hex("tampered bytes");
  {
    auto sink = DownloadSink::Create(path);
    ASSERT_TRUE(sink.ok());
    ASSERT_TRUE((*sink)->Add("tampered bytes", 14, announced).ok());
    absl::Status st = (*sink)->Commit();
    EXPECT_EQ(st.code(), absl::StatusCode::kDataLoss);
    EXPECT_TRUE(absl::StrContains(st.message(), path)) << st;
    EXPECT_TRUE(absl::StrContains(st.message(), announced)) << st;
    EXPECT_TRUE(absl::StrContains(st.message(), received)) << st;
  }
  EXPECT_TRUE(Files().empty()) << Files()[0];
}

TEST_F(TransferTest, TheRunsRecordOfTheHashIsCheckedToo) {
  std::string path = dir_ + "/a.csv";
  auto sink = DownloadSink::Create(path);
  ASSERT_TRUE((*sink)->Add("abc", 3, Sha256::Hex("abc")).ok());
  absl::Status st = (*sink)->Commit(Sha256::Hex("abd"));
  EXPECT_EQ(st.code(), absl::StatusCode::kDataLoss);
  EXPECT_TRUE(absl::StrContains(st.message(), Sha256::Hex("abd"))) << st;
}

TEST_F(TransferTest, ACutStreamOrAMissingHashLeavesNothing) {
  {
    auto sink = DownloadSink::Create(dir_ + "/cut.csv");
    ASSERT_TRUE((*sink)->Add("first half", 20, "").ok());
    // The stream broke here: the sink goes away without Commit.
  }
  {
    auto sink = DownloadSink::Create(dir_ + "/nohash.csv");
    ASSERT_TRUE((*sink)->Add("abc", 3, "").ok());
    absl::Status st = (*sink)->Commit();
    EXPECT_EQ(st.code(), absl::StatusCode::kDataLoss);
    EXPECT_TRUE(absl::StrContains(st.message(), "no sha256")) << st;
  }
  {
    auto sink = DownloadSink::Create(dir_ + "/short.csv");
    ASSERT_TRUE((*sink)->Add("abc", 4, Sha256::Hex("abc")).ok());
    absl::Status st = (*sink)->Commit();
    EXPECT_TRUE(absl::StrContains(st.message(), "received 3 bytes, the daemon announced 4")) << st;
  }
  EXPECT_TRUE(Files().empty()) << Files()[0];
}

TEST_F(TransferTest, DigestFileReadsInChunks) {
  std::string path = dir_ + "/in.bin";
  std::string data(3 * 1024 * 1024 + 17, 'x');
  Put("in.bin", data);
  absl::StatusOr<FileDigest> d = DigestFile(path);
  ASSERT_TRUE(d.ok()) << d.status();
  EXPECT_EQ(d->size_bytes, data.size());
  EXPECT_EQ(d->sha256, Sha256::Hex(data));
  EXPECT_FALSE(DigestFile(dir_ + "/missing").ok());
  EXPECT_FALSE(DigestFile(dir_).ok()) << "a directory is not a file to upload";
}

}  // namespace
}  // namespace sandgate::cli
