// Unit tests of the openat2 file layer against a plain host directory (no sandbox).
#include "sandbox/local/workspace_files.h"

#include <fcntl.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <fstream>
#include <map>

#include "absl/strings/str_cat.h"
#include "gtest/gtest.h"

namespace sandgate::sandbox::local {
namespace {

class WorkspaceFilesTest : public ::testing::Test {
 protected:
  void SetUp() override {
    char tmpl[] = "/tmp/sandgate-ws-XXXXXX";
    ASSERT_NE(mkdtemp(tmpl), nullptr);
    dir_ = tmpl;
    // As in a sandbox: the workspace belongs to the session's uid, which writes run as.
    ASSERT_EQ(chown(tmpl, 12345, 12345), 0);
    auto root = WorkspaceFiles::OpenRoot(dir_);
    ASSERT_TRUE(root.ok()) << root.status();
    ws_ = std::make_unique<WorkspaceFiles>(std::move(*root), 12345, 12345);
  }
  void TearDown() override { (void)!system(absl::StrCat("rm -rf ", dir_).c_str()); }
  std::string P(const std::string& rel) { return absl::StrCat(dir_, "/", rel); }

  std::string dir_;
  std::unique_ptr<WorkspaceFiles> ws_;
};

TEST_F(WorkspaceFilesTest, PathsMustStayRelativeAndBelow) {
  EXPECT_FALSE(SplitWorkspacePath("", false).ok());
  EXPECT_TRUE(SplitWorkspacePath("", true).ok());
  EXPECT_FALSE(SplitWorkspacePath("/etc/passwd", false).ok());
  EXPECT_FALSE(SplitWorkspacePath("a/../../b", false).ok());
  EXPECT_FALSE(SplitWorkspacePath(absl::string_view("a\0b", 3), false).ok());
  auto parts = SplitWorkspacePath("./a//b/", false);
  ASSERT_TRUE(parts.ok());
  EXPECT_EQ(*parts, (std::vector<std::string>{"a", "b"}));
}

TEST_F(WorkspaceFilesTest, WriteCreatesOwnedFilesAndReplacesAtomically) {
  ASSERT_TRUE(ws_->WriteFile("x/y/z.txt", "one", 0640).ok());
  struct stat st;
  ASSERT_EQ(stat(P("x/y/z.txt").c_str(), &st), 0);
  EXPECT_EQ(st.st_uid, 12345u);
  EXPECT_EQ(st.st_mode & 0777, 0640u);
  ASSERT_EQ(stat(P("x/y").c_str(), &st), 0);
  EXPECT_EQ(st.st_uid, 12345u);
  const ino_t before = [&] {
    struct stat s;
    stat(P("x/y/z.txt").c_str(), &s);
    return s.st_ino;
  }();
  ASSERT_TRUE(ws_->WriteFile("x/y/z.txt", "two", 0644).ok());
  ASSERT_EQ(stat(P("x/y/z.txt").c_str(), &st), 0);
  EXPECT_NE(st.st_ino, before) << "replaced in place instead of renamed";
  auto r = ws_->ReadFile("x/y/z.txt", 10);
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(*r, "two");
  auto list = ws_->ListFiles("");
  ASSERT_TRUE(list.ok());
  ASSERT_EQ(list->entries.size(), 3u);  // no temporary file left behind
  EXPECT_EQ(list->entries[2].path, "x/y/z.txt");
  EXPECT_EQ(list->entries[2].size, 3u);
}

// Artifacts are collected through ReadFileTo: the file arrives in bounded pieces, with the
// checks of ReadFile, and a sink's error stops the copy.
TEST_F(WorkspaceFilesTest, ReadFileToHandsTheFileOverInBoundedPieces) {
  std::string data(1 << 20, 'd');
  data[12345] = 'e';
  std::ofstream(P("big")) << data;
  std::string back;
  size_t pieces = 0, largest = 0;
  ASSERT_TRUE(ws_->ReadFileTo("big", data.size(),
                              [&](absl::string_view piece) {
                                ++pieces;
                                largest = std::max(largest, piece.size());
                                back.append(piece.data(), piece.size());
                                return absl::OkStatus();
                              })
                  .ok());
  EXPECT_EQ(back, data);
  EXPECT_LE(largest, 64u << 10);
  EXPECT_GE(pieces, 16u);
  auto none = [](absl::string_view) { return absl::OkStatus(); };
  EXPECT_EQ(ws_->ReadFileTo("big", data.size() - 1, none).code(),
            absl::StatusCode::kResourceExhausted);
  EXPECT_EQ(ws_->ReadFileTo("missing", 10, none).code(), absl::StatusCode::kNotFound);
  ASSERT_EQ(symlink("/etc/passwd", P("link").c_str()), 0);
  EXPECT_FALSE(ws_->ReadFileTo("link", 1 << 20, none).ok());
  EXPECT_EQ(ws_->ReadFileTo("big", data.size(),
                            [](absl::string_view) { return absl::DataLossError("disk full"); })
                .message(),
            "disk full");
}

TEST_F(WorkspaceFilesTest, RefusesLinksSpecialFilesAndOversizedReads) {
  ASSERT_EQ(symlink("/etc/passwd", P("link").c_str()), 0);
  ASSERT_EQ(symlink("/etc", P("dirlink").c_str()), 0);
  ASSERT_EQ(mkfifo(P("fifo").c_str(), 0600), 0);
  std::ofstream(P("big")) << std::string(100, 'b');
  ASSERT_EQ(link(P("big").c_str(), P("big2").c_str()), 0);
  EXPECT_EQ(ws_->ReadFile("link", 1 << 20).status().message(), "link: refusing a symbolic link");
  EXPECT_FALSE(ws_->ReadFile("dirlink/passwd", 1 << 20).ok());
  EXPECT_FALSE(ws_->WriteFile("dirlink/x", "x", 0644).ok());
  EXPECT_EQ(ws_->ReadFile("fifo", 10).status().message(), "fifo: not a regular file");
  EXPECT_EQ(ws_->ReadFile("big", 1000).status().code(), absl::StatusCode::kInvalidArgument);
  ASSERT_EQ(unlink(P("big2").c_str()), 0);
  EXPECT_EQ(ws_->ReadFile("big", 99).status().code(), absl::StatusCode::kResourceExhausted);
  EXPECT_TRUE(ws_->ReadFile("big", 100).ok());
}

// A listing is of what sandbox code planted: more entries than the cap, a tree deeper than
// the limit and names that are not UTF-8 are shown (or marked), never a failed listing.
TEST_F(WorkspaceFilesTest, AListingAlwaysSucceedsAndMarksWhatItLeftOut) {
  std::string deep = "d";
  for (int i = 0; i < 5; ++i) deep += "/d";
  ASSERT_EQ(system(absl::StrCat("mkdir -p ", P(deep), " && touch ", P(deep), "/f").c_str()), 0);
  std::ofstream(P("caf\xE9-\xFF")) << "x";  // Latin-1, not UTF-8

  ListLimits shallow;
  shallow.max_depth = 3;
  auto list = ws_->ListFiles("", shallow);
  ASSERT_TRUE(list.ok()) << list.status();
  EXPECT_FALSE(list->truncated);
  std::map<std::string, FileEntry> by_path;
  for (const FileEntry& e : list->entries) by_path[e.path] = e;
  ASSERT_TRUE(by_path.count("d/d/d/d"));
  EXPECT_EQ(by_path["d/d/d/d"].not_listed, "deeper than 3 levels");
  EXPECT_TRUE(by_path["d/d/d"].not_listed.empty());
  EXPECT_FALSE(by_path.count("d/d/d/d/d"));
  ASSERT_TRUE(by_path.count("caf\xE9-\xFF")) << "the name's own bytes, for the edge to escape";
  EXPECT_EQ(by_path["caf\xE9-\xFF"].type, FileType::kRegular);

  ListLimits few;
  few.max_entries = 2;
  auto capped = ws_->ListFiles("", few);
  ASSERT_TRUE(capped.ok()) << capped.status();
  EXPECT_TRUE(capped->truncated);
  EXPECT_EQ(capped->entries.size(), 2u);
}

}  // namespace
}  // namespace sandgate::sandbox::local
