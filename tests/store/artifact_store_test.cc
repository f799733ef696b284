#include "store/artifact_store.h"

#include <cstdlib>

#include "common/sha256.h"
#include "gtest/gtest.h"
#include "tests/fakes/largest_allocation.h"

namespace sandgate::store {
namespace {

TEST(ArtifactStoreTest, PutThenReadInChunks) {
  char tmpl[] = "/tmp/sg-art-XXXXXX";
  std::string dir = mkdtemp(tmpl);
  auto store = ArtifactStore::Open(dir + "/a");
  ASSERT_TRUE(store.ok()) << store.status();
  std::string data(100000, 'x');
  data[5] = 'y';
  auto art = (*store)->Put("run1", "memo.md", data);
  ASSERT_TRUE(art.ok()) << art.status();
  EXPECT_EQ(art->size_bytes(), data.size());
  EXPECT_EQ(art->sha256(), Sha256::Hex(data));
  std::string back;
  for (uint64_t off = 0;;) {
    auto chunk = (*store)->Read("run1", "memo.md", off, 4096);
    ASSERT_TRUE(chunk.ok());
    if (chunk->empty()) break;
    off += chunk->size();
    back += *chunk;
  }
  EXPECT_EQ(back, data);
  EXPECT_EQ((*store)->Read("run1", "nope", 0, 10).status().code(), absl::StatusCode::kNotFound);
  EXPECT_EQ((*store)->Put("run1", "../x", "d").status().code(), absl::StatusCode::kInvalidArgument);
  std::system(("rm -rf " + dir).c_str());
}

// Collecting an artifact of tens of MiB holds one piece of it at a time: the store writes
// and hashes as the pieces come, never gathering the whole file.
TEST(ArtifactStoreTest, AWriterStoresPieceByPieceWithABoundedBuffer) {
  char tmpl[] = "/tmp/sg-art-XXXXXX";
  std::string dir = mkdtemp(tmpl);
  auto store = ArtifactStore::Open(dir + "/a");
  ASSERT_TRUE(store.ok()) << store.status();
  std::string piece(64 << 10, 'p');
  Sha256 expected;
  absl::StatusOr<v1::Artifact> art;
  {
    testing::LargestAllocation probe;
    auto writer = (*store)->Create("run1", "chart.svg");
    ASSERT_TRUE(writer.ok()) << writer.status();
    for (int i = 0; i < 640; ++i) {  // 40 MiB
      piece[0] = static_cast<char>(i);
      expected.Update(piece);
      ASSERT_TRUE((*writer)->Append(piece).ok());
    }
    art = (*writer)->Commit();
    EXPECT_LT(probe.bytes(), 1u << 20) << "the store gathered the artifact in memory";
  }
  ASSERT_TRUE(art.ok()) << art.status();
  EXPECT_EQ(art->name(), "chart.svg");
  EXPECT_EQ(art->size_bytes(), 640u * piece.size());
  EXPECT_EQ(art->sha256(), expected.HexDigest());
  auto whole = (*store)->Read("run1", "chart.svg", 0, art->size_bytes());
  ASSERT_TRUE(whole.ok()) << whole.status();
  EXPECT_EQ(whole->size(), art->size_bytes());
  EXPECT_EQ(Sha256::Hex(*whole), art->sha256());
  EXPECT_EQ((*store)->Read("run1", "chart.svg", art->size_bytes(), 10)->size(), 0u);
  std::system(("rm -rf " + dir).c_str());
}

// A file refused halfway (over the cap, the sandbox gone) leaves no artifact behind.
TEST(ArtifactStoreTest, AWriterNotCommittedLeavesNothing) {
  char tmpl[] = "/tmp/sg-art-XXXXXX";
  std::string dir = mkdtemp(tmpl);
  auto store = ArtifactStore::Open(dir + "/a");
  ASSERT_TRUE(store.ok()) << store.status();
  {
    auto writer = (*store)->Create("run1", "memo.md");
    ASSERT_TRUE(writer.ok()) << writer.status();
    ASSERT_TRUE((*writer)->Append("half of it").ok());
  }
  EXPECT_EQ((*store)->Read("run1", "memo.md", 0, 10).status().code(), absl::StatusCode::kNotFound);
  EXPECT_EQ(std::system(("test -z \"$(ls -A " + dir + "/a/run1)\"").c_str()), 0)
      << "a temporary file was left";
  auto writer = (*store)->Create("run1", "memo.md");
  ASSERT_TRUE(writer.ok());
  ASSERT_TRUE((*writer)->Commit().ok());
  EXPECT_EQ((*writer)->Commit().status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_EQ((*writer)->Append("late").code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_EQ((*store)->Create("run1", "../x").status().code(), absl::StatusCode::kInvalidArgument);
  std::system(("rm -rf " + dir).c_str());
}

}  // namespace
}  // namespace sandgate::store
