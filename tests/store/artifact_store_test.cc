#include "store/artifact_store.h"

#include <cstdlib>

#include "common/sha256.h"
#include "gtest/gtest.h"

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

}  // namespace
}  // namespace sandgate::store
