// Unit tests of the openat2 file layer against a plain host directory (no sandbox).
#include "sandbox/local/workspace_files.h"

#include <fcntl.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <fstream>
#include <map>

#include "absl/strings/match.h"
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

TEST_F(WorkspaceFilesTest, StatSaysWhatAPathIsWithoutFollowingLinks) {
  ASSERT_TRUE(ws_->WriteFile("d/f.txt", "12345", 0644).ok());
  ASSERT_EQ(symlink("/etc/passwd", P("d/link").c_str()), 0);
  auto f = ws_->Stat("d/f.txt");
  ASSERT_TRUE(f.ok()) << f.status();
  EXPECT_EQ(f->type, FileType::kRegular);
  EXPECT_EQ(f->size, 5u);
  EXPECT_EQ(f->path, "d/f.txt");
  EXPECT_EQ(ws_->Stat("d")->type, FileType::kDirectory);
  EXPECT_EQ(ws_->Stat("")->type, FileType::kDirectory);
  auto link = ws_->Stat("d/link");
  ASSERT_TRUE(link.ok());
  EXPECT_EQ(link->type, FileType::kSymlink);
  EXPECT_EQ(link->size, 0u);  // not /etc/passwd's
  EXPECT_EQ(ws_->Stat("d/none").status().code(), absl::StatusCode::kNotFound);
  // A link in the path is refused, as everywhere.
  ASSERT_EQ(symlink("/etc", P("etc").c_str()), 0);
  EXPECT_EQ(ws_->Stat("etc/passwd").status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_TRUE(absl::StrContains(ws_->Stat("etc/passwd").status().message(), "symbolic link"))
      << ws_->Stat("etc/passwd").status();
  EXPECT_EQ(ws_->Stat("../etc").status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(ws_->Stat("/etc/passwd").status().code(), absl::StatusCode::kInvalidArgument);
}

TEST_F(WorkspaceFilesTest, RemoveTakesFilesLinksAndTreesButNothingOutside) {
  ASSERT_TRUE(ws_->WriteFile("tree/a/b/c.txt", "x", 0644).ok());
  ASSERT_TRUE(ws_->WriteFile("tree/top.txt", "x", 0644).ok());
  // A link to a host directory inside the tree: removed as a link, its target untouched.
  char outside[] = "/tmp/sandgate-outside-XXXXXX";
  ASSERT_NE(mkdtemp(outside), nullptr);
  std::ofstream(absl::StrCat(outside, "/keep.txt")) << "keep";
  ASSERT_EQ(symlink(outside, P("tree/a/escape").c_str()), 0);
  EXPECT_EQ(ws_->Remove("tree", false).code(), absl::StatusCode::kFailedPrecondition);
  ASSERT_TRUE(ws_->Remove("tree/top.txt", false).ok());
  ASSERT_TRUE(ws_->Remove("tree", true).ok());
  struct stat st;
  EXPECT_NE(lstat(P("tree").c_str(), &st), 0);
  EXPECT_EQ(stat(absl::StrCat(outside, "/keep.txt").c_str(), &st), 0) << "followed a link out";
  (void)!system(absl::StrCat("rm -rf ", outside).c_str());
  // Through a link, "..", absolute: refused.
  ASSERT_EQ(symlink("/tmp", P("tmp").c_str()), 0);
  EXPECT_EQ(ws_->Remove("tmp/anything", false).code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(ws_->Remove("../x", false).code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(ws_->Remove("", true).code(), absl::StatusCode::kInvalidArgument);  // not the root
  EXPECT_EQ(ws_->Remove("none", false).code(), absl::StatusCode::kNotFound);
  ASSERT_TRUE(ws_->Remove("tmp", false).ok());  // the link itself
  EXPECT_EQ(stat("/tmp", &st), 0);
}

TEST_F(WorkspaceFilesTest, RenameStaysInsideAndRefusesToClobberUnlessAsked) {
  ASSERT_TRUE(ws_->WriteFile("a.txt", "a", 0644).ok());
  ASSERT_TRUE(ws_->WriteFile("b.txt", "b", 0644).ok());
  ASSERT_TRUE(ws_->Rename("a.txt", "new/dir/a.txt", false).ok());  // parents made
  EXPECT_EQ(*ws_->ReadFile("new/dir/a.txt", 10), "a");
  EXPECT_EQ(ws_->Rename("b.txt", "new/dir/a.txt", false).code(), absl::StatusCode::kAlreadyExists);
  ASSERT_TRUE(ws_->Rename("b.txt", "new/dir/a.txt", true).ok());
  EXPECT_EQ(*ws_->ReadFile("new/dir/a.txt", 10), "b");
  EXPECT_EQ(ws_->Rename("new", "new/dir/inside", false).code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(ws_->Rename("none", "x", false).code(), absl::StatusCode::kNotFound);
  EXPECT_EQ(ws_->Rename("new", "../out", false).code(), absl::StatusCode::kInvalidArgument);
  ASSERT_EQ(symlink("/tmp", P("t").c_str()), 0);
  EXPECT_EQ(ws_->Rename("new", "t/stolen", false).code(), absl::StatusCode::kInvalidArgument);
  struct stat st;
  EXPECT_NE(stat("/tmp/stolen", &st), 0);
}

TEST_F(WorkspaceFilesTest, MakeDirectoryWithAndWithoutParents) {
  EXPECT_EQ(ws_->MakeDirectory("x/y", false).code(), absl::StatusCode::kNotFound);
  ASSERT_TRUE(ws_->MakeDirectory("x/y", true).ok());
  ASSERT_TRUE(ws_->MakeDirectory("x/y", true).ok());  // exists: fine with parents
  EXPECT_EQ(ws_->MakeDirectory("x/y", false).code(), absl::StatusCode::kAlreadyExists);
  ASSERT_TRUE(ws_->WriteFile("f", "", 0644).ok());
  EXPECT_EQ(ws_->MakeDirectory("f", true).code(), absl::StatusCode::kAlreadyExists);
  struct stat st;
  ASSERT_EQ(stat(P("x/y").c_str(), &st), 0);
  EXPECT_EQ(st.st_uid, 12345u);
  ASSERT_EQ(symlink("/tmp", P("l").c_str()), 0);
  EXPECT_EQ(ws_->MakeDirectory("l/made", true).code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(stat("/tmp/made", &st), 0);
}

}  // namespace
}  // namespace sandgate::sandbox::local
