// Uploads and downloads without gRPC, against a session of the host fake provider.
#include "core/file_transfer.h"

#include <memory>
#include <string>

#include "absl/strings/match.h"
#include "common/sha256.h"
#include "gtest/gtest.h"
#include "tests/fakes/host_sandbox.h"

namespace sandgate::core {
namespace {

using testing::HostProvider;

v1::UploadFileRequest Header(const std::string& path) {
  v1::UploadFileRequest msg;
  msg.mutable_header()->set_session_id("s-1");
  msg.mutable_header()->set_path(path);
  return msg;
}

v1::UploadFileRequest Data(const std::string& data) {
  v1::UploadFileRequest msg;
  msg.set_data(data);
  return msg;
}

class FileTransferTest : public ::testing::Test {
 protected:
  void SetUp() override {
    sandbox::SessionSpec spec;
    spec.id = "s-1";
    absl::StatusOr<std::unique_ptr<sandbox::Session>> s = provider_.Create(spec, nullptr);
    ASSERT_TRUE(s.ok()) << s.status();
    session_ = std::move(*s);
  }
  bool Exists(const std::string& path) { return session_->ReadFile(path, 1 << 30).ok(); }

  HostProvider provider_;
  std::unique_ptr<sandbox::Session> session_;
};

TEST_F(FileTransferTest, AShortStreamIsWrittenWithItsSizeAndDigest) {
  UploadAssembler up(1 << 20);
  v1::UploadFileRequest header = Header("in/data.csv");
  header.mutable_header()->set_size_bytes(11);
  header.mutable_header()->set_sha256(Sha256::Hex("hello world"));
  ASSERT_TRUE(up.Add(header).ok());
  ASSERT_TRUE(up.Add(Data("hello ")).ok());
  ASSERT_TRUE(up.Add(Data("world")).ok());
  absl::StatusOr<v1::FileInfo> info = up.CommitTo(*session_, /*cut=*/false);
  ASSERT_TRUE(info.ok()) << info.status();
  EXPECT_EQ(info->path(), "in/data.csv");
  EXPECT_EQ(info->size_bytes(), 11u);
  EXPECT_EQ(info->sha256(), Sha256::Hex("hello world"));
  EXPECT_EQ(*session_->ReadFile("in/data.csv", 100), "hello world");
  EXPECT_EQ(up.target(), "s-1:in/data.csv");
}

TEST_F(FileTransferTest, FewerBytesThanTheHeaderSaysWritesNothing) {
  UploadAssembler up(1 << 20);
  v1::UploadFileRequest header = Header("a.txt");
  header.mutable_header()->set_size_bytes(10);
  ASSERT_TRUE(up.Add(header).ok());
  ASSERT_TRUE(up.Add(Data("12345")).ok());
  absl::StatusOr<v1::FileInfo> info = up.CommitTo(*session_, /*cut=*/false);
  EXPECT_EQ(info.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_TRUE(absl::StrContains(info.status().message(), "header.size_bytes says 10 bytes, got 5"))
      << info.status();
  EXPECT_FALSE(Exists("a.txt"));
}

TEST_F(FileTransferTest, MoreBytesThanTheHeaderSaysEndTheUploadAtOnce) {
  UploadAssembler up(1 << 20);
  v1::UploadFileRequest header = Header("a.txt");
  header.mutable_header()->set_size_bytes(3);
  ASSERT_TRUE(up.Add(header).ok());
  absl::Status st = up.Add(Data("1234"));
  EXPECT_EQ(st.code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_TRUE(absl::StrContains(st.message(), "more bytes than header.size_bytes")) << st;
}

TEST_F(FileTransferTest, ADigestMismatchWritesNothing) {
  UploadAssembler up(1 << 20);
  v1::UploadFileRequest header = Header("a.txt");
  header.mutable_header()->set_sha256(Sha256::Hex("something else"));
  ASSERT_TRUE(up.Add(header).ok());
  ASSERT_TRUE(up.Add(Data("hello")).ok());
  absl::StatusOr<v1::FileInfo> info = up.CommitTo(*session_, /*cut=*/false);
  EXPECT_EQ(info.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_TRUE(absl::StrContains(info.status().message(), "header.sha256 says")) << info.status();
  EXPECT_TRUE(absl::StrContains(info.status().message(), Sha256::Hex("hello"))) << info.status();
  EXPECT_FALSE(Exists("a.txt"));
}

TEST_F(FileTransferTest, ACutStreamLeavesNoFile) {
  UploadAssembler up(1 << 20);
  ASSERT_TRUE(up.Add(Header("a.txt")).ok());
  ASSERT_TRUE(up.Add(Data("partial")).ok());
  absl::StatusOr<v1::FileInfo> info = up.CommitTo(*session_, /*cut=*/true);
  EXPECT_EQ(info.status().code(), absl::StatusCode::kCancelled);
  EXPECT_TRUE(absl::StrContains(info.status().message(), "cancelled after 7 bytes"))
      << info.status();
  EXPECT_FALSE(Exists("a.txt"));
}

TEST_F(FileTransferTest, BadStreamsAreRefusedNamingTheProblem) {
  {
    UploadAssembler up(1 << 20);
    absl::Status st = up.Add(Data("no header"));
    EXPECT_EQ(st.code(), absl::StatusCode::kInvalidArgument);
    EXPECT_TRUE(absl::StrContains(st.message(), "first message must carry")) << st;
  }
  {
    UploadAssembler up(1 << 20);
    ASSERT_TRUE(up.Add(Header("a")).ok());
    EXPECT_TRUE(absl::StrContains(up.Add(Header("b")).message(), "only the first message"));
  }
  {
    UploadAssembler up(1 << 20);
    absl::Status st = up.Add(Header("dir/"));
    EXPECT_TRUE(absl::StrContains(st.message(), "name a file, not a directory")) << st;
  }
  {
    UploadAssembler up(1 << 20);
    v1::UploadFileRequest header = Header("a");
    header.mutable_header()->set_sha256("ABC");
    EXPECT_TRUE(absl::StrContains(up.Add(header).message(), "64 lowercase hex digits"));
  }
  {
    UploadAssembler up(4);
    ASSERT_TRUE(up.Add(Header("a")).ok());
    absl::Status st = up.Add(Data("12345"));
    EXPECT_EQ(st.code(), absl::StatusCode::kResourceExhausted);
    EXPECT_TRUE(absl::StrContains(st.message(), "4-byte limit")) << st;
  }
  {
    UploadAssembler up(1 << 20);
    ASSERT_TRUE(up.Add(Header("a")).ok());
    EXPECT_TRUE(absl::StrContains(up.Unparsable().message(), "message 2 is not a valid"));
  }
}

TEST_F(FileTransferTest, ADownloadIsCutIntoChunksAndTheLastCarriesTheDigest) {
  std::string data(kTransferChunkBytes * 2 + kTransferChunkBytes / 2, '\0');
  for (size_t i = 0; i < data.size(); ++i) data[i] = static_cast<char>(i * 31);
  ASSERT_TRUE(session_->WriteFile("out/big.bin", data).ok());
  v1::DownloadFileRequest req;
  req.set_path("out/big.bin");
  absl::StatusOr<FileChunker> chunks = ReadForDownload(*session_, req, 64 << 20);
  ASSERT_TRUE(chunks.ok()) << chunks.status();
  std::string got;
  int n = 0;
  while (!chunks->done()) {
    v1::FileChunk c = chunks->Next();
    EXPECT_EQ(c.offset(), got.size());
    EXPECT_EQ(c.total_size(), data.size());
    EXPECT_EQ(c.sha256().empty(), n < 2) << "chunk " << n;
    got += c.data();
    ++n;
  }
  EXPECT_EQ(n, 3);
  EXPECT_EQ(got, data);
}

TEST_F(FileTransferTest, AnEmptyFileIsOneEmptyChunkWithItsDigest) {
  ASSERT_TRUE(session_->WriteFile("empty", "").ok());
  v1::DownloadFileRequest req;
  req.set_path("empty");
  absl::StatusOr<FileChunker> chunks = ReadForDownload(*session_, req, 64 << 20);
  ASSERT_TRUE(chunks.ok()) << chunks.status();
  ASSERT_FALSE(chunks->done());
  v1::FileChunk c = chunks->Next();
  EXPECT_EQ(c.data(), "");
  EXPECT_EQ(c.sha256(), Sha256::Hex(""));
  EXPECT_TRUE(chunks->done());
}

TEST_F(FileTransferTest, AMissingFileOrOneOverTheCapIsAnError) {
  v1::DownloadFileRequest req;
  req.set_path("nope.txt");
  EXPECT_EQ(ReadForDownload(*session_, req, 64 << 20).status().code(), absl::StatusCode::kNotFound);

  ASSERT_TRUE(session_->WriteFile("ten", "0123456789").ok());
  req.set_path("ten");
  req.set_max_bytes(5);
  EXPECT_EQ(ReadForDownload(*session_, req, 64 << 20).status().code(),
            absl::StatusCode::kResourceExhausted);
  req.clear_max_bytes();
  EXPECT_EQ(ReadForDownload(*session_, req, 4).status().code(),
            absl::StatusCode::kResourceExhausted);
  req.set_path("");
  EXPECT_EQ(ReadForDownload(*session_, req, 64 << 20).status().code(),
            absl::StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace sandgate::core
