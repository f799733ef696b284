#include "core/tar_reader.h"

#include <string>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/fakes/tar_builder.h"

namespace sandgate::core {
namespace {

using ::sandgate::testing::TarBuilder;
using ::testing::HasSubstr;

struct Seen {
  std::vector<TarEntry> entries;
  std::vector<std::string> data;  // each file's bytes
};

// Reads `archive` in pieces of `piece` bytes; the first error.
absl::Status Read(const std::string& archive, Seen* seen, size_t piece = 7,
                  TarReader::Limits limits = {1000, 1 << 20}) {
  TarReader reader(limits);
  TarSink sink{[seen](const TarEntry& e) {
                 seen->entries.push_back(e);
                 seen->data.emplace_back();
                 return absl::OkStatus();
               },
               [seen](absl::string_view d) {
                 seen->data.back().append(d.data(), d.size());
                 return absl::OkStatus();
               },
               [] { return absl::OkStatus(); }};
  for (size_t at = 0; at < archive.size(); at += piece) {
    absl::Status st = reader.Feed(absl::string_view(archive).substr(at, piece), sink);
    if (!st.ok()) return st;
  }
  return reader.Finish();
}

absl::Status Read(const std::string& archive) {
  Seen seen;
  return Read(archive, &seen);
}

TEST(TarReaderTest, ReadsFilesDirectoriesAndLinksInPiecesOfAnySize) {
  const std::string tar = TarBuilder()
                              .Dir("./", 0755)
                              .Dir("./src/", 0700)
                              .File("./src/main.py", "print(42)\n", 0755)
                              .File("./empty", "")
                              .Symlink("./latest", "src/main.py")
                              .Finish();
  for (size_t piece : {1, 7, 512, 100000}) {
    Seen seen;
    ASSERT_TRUE(Read(tar, &seen, piece).ok()) << piece;
    ASSERT_EQ(seen.entries.size(), 4u);
    EXPECT_EQ(seen.entries[0].path, "src");
    EXPECT_EQ(seen.entries[0].type, TarEntry::Type::kDirectory);
    EXPECT_EQ(seen.entries[0].mode, 0700u);
    EXPECT_EQ(seen.entries[1].path, "src/main.py");
    EXPECT_EQ(seen.entries[1].mode, 0755u);
    EXPECT_EQ(seen.data[1], "print(42)\n");
    EXPECT_EQ(seen.entries[2].path, "empty");
    EXPECT_EQ(seen.entries[3].type, TarEntry::Type::kSymlink);
    EXPECT_EQ(seen.entries[3].link_target, "src/main.py");
  }
}

TEST(TarReaderTest, LongNamesFromGnuAndPaxHeaders) {
  const std::string deep = std::string(150, 'a') + "/" + std::string(120, 'b');
  Seen seen;
  ASSERT_TRUE(Read(TarBuilder()
                       .LongName(deep)
                       .File("truncated", "x")
                       .Pax("path", "pax/name.txt")
                       .File("other", "y")
                       .Finish(),
                   &seen)
                  .ok());
  ASSERT_EQ(seen.entries.size(), 2u);
  EXPECT_EQ(seen.entries[0].path, deep);
  EXPECT_EQ(seen.entries[1].path, "pax/name.txt");
}

TEST(TarReaderTest, SetuidSetgidAndStickyBitsAreDropped) {
  Seen seen;
  ASSERT_TRUE(Read(TarBuilder().File("suid", "x", 06755).Dir("tmp", 01777).Finish(), &seen).ok());
  EXPECT_EQ(seen.entries[0].mode, 0755u);
  EXPECT_EQ(seen.entries[1].mode, 0777u);
}

TEST(TarReaderTest, AbsolutePathsAreRefused) {
  absl::Status st = Read(TarBuilder().File("/etc/passwd", "root::0:0::/:/bin/sh\n").Finish());
  EXPECT_EQ(st.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(st.message(), HasSubstr("'/etc/passwd': an absolute path"));
  // Through a pax header too.
  st = Read(TarBuilder().Pax("path", "/tmp/x").File("x", "1").Finish());
  EXPECT_THAT(st.message(), HasSubstr("an absolute path"));
}

TEST(TarReaderTest, DotDotAnywhereIsRefused) {
  for (const char* path : {"../escape", "a/../../escape", "a/..", "./../x"}) {
    absl::Status st = Read(TarBuilder().File(path, "x").Finish());
    EXPECT_EQ(st.code(), absl::StatusCode::kInvalidArgument) << path;
    EXPECT_THAT(st.message(), HasSubstr("'..' component")) << path;
  }
  EXPECT_THAT(Read(TarBuilder().File("a//b", "x").Finish()).message(),
              HasSubstr("an empty path component"));
  EXPECT_THAT(Read(TarBuilder().File("a/./b", "x").Finish()).message(), HasSubstr("'.' component"));
}

TEST(TarReaderTest, NothingIsWrittenThroughALinkOfTheArchive) {
  // A link pointing out, then a file through it: the file is refused.
  absl::Status st = Read(
      TarBuilder().Symlink("out", "/etc").File("out/cron.d/evil", "* * * * * root sh\n").Finish());
  EXPECT_EQ(st.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(st.message(), HasSubstr("below 'out', a symbolic link of the archive"));
  // A directory of the same name after the link, then a file: refused at the directory.
  st = Read(TarBuilder().Symlink("out", "/").Dir("out").File("out/x", "1").Finish());
  EXPECT_THAT(st.message(), HasSubstr("'out': in the archive twice"));
  // A link made over a directory the archive already filled (its target would take them).
  st = Read(TarBuilder().File("d/a", "1").Symlink("d", "/").Finish());
  EXPECT_THAT(st.message(), HasSubstr("'d': not a directory, where the archive already placed"));
  // The same file twice (the second could follow a link made by the first's restore).
  st = Read(TarBuilder().File("a", "1").File("a", "2").Finish());
  EXPECT_THAT(st.message(), HasSubstr("'a': in the archive twice"));
}

TEST(TarReaderTest, HardLinksDevicesFifosAndSparseFilesAreRefused) {
  struct Case {
    char type;
    const char* what;
  };
  for (const Case& c :
       {Case{'1', "a hard link"}, Case{'3', "a character device"}, Case{'4', "a block device"},
        Case{'6', "a fifo"}, Case{'S', "a sparse file"}, Case{'g', "a pax global header"}}) {
    absl::Status st = Read(TarBuilder().Entry(c.type, "x", "", 0644, "/etc/shadow").Finish());
    EXPECT_EQ(st.code(), absl::StatusCode::kInvalidArgument) << c.type;
    EXPECT_THAT(st.message(), HasSubstr(c.what)) << c.type;
  }
  EXPECT_THAT(Read(TarBuilder().Entry('Z', "x", "").Finish()).message(),
              HasSubstr("unknown entry type 'Z'"));
  EXPECT_THAT(
      Read(TarBuilder().Pax("GNU.sparse.size", "1000000000").File("x", "").Finish()).message(),
      HasSubstr("sparse"));
}

TEST(TarReaderTest, OversizeArchivesAreRefusedBeforeTheirData) {
  // A header claiming 4 GiB: refused at the header, nothing read.
  Seen seen;
  absl::Status st =
      Read(TarBuilder().Entry('0', "big", "", 0644, "", int64_t{1} << 32).bytes(), &seen);
  EXPECT_EQ(st.code(), absl::StatusCode::kResourceExhausted);
  EXPECT_THAT(st.message(), HasSubstr("snapshots.max_bytes"));
  EXPECT_TRUE(seen.entries.empty());
  // Files adding up past the bound.
  st = Read(TarBuilder().File("a", std::string(600, 'a')).File("b", std::string(600, 'b')).Finish(),
            &seen, 512, {1000, 1000});
  EXPECT_EQ(st.code(), absl::StatusCode::kResourceExhausted);
  // Too many entries.
  TarBuilder many;
  for (int i = 0; i < 11; ++i) many.File(absl::StrCat("f", i), "");
  st = Read(many.Finish(), &seen, 512, {10, 1 << 20});
  EXPECT_THAT(st.message(), HasSubstr("snapshots.max_entries"));
}

TEST(TarReaderTest, DamagedOrCutArchivesAreRefused) {
  std::string tar = TarBuilder().File("a", "hello").Finish();
  std::string damaged = tar;
  damaged[10] ^= 1;  // in the name: the checksum no longer matches
  EXPECT_THAT(Read(damaged).message(), HasSubstr("wrong checksum"));
  const std::string cut = TarBuilder().File("a", std::string(2000, 'x')).bytes().substr(0, 1000);
  EXPECT_THAT(Read(cut).message(), HasSubstr("ends inside 'a'"));
  EXPECT_THAT(Read(std::string(100, 'x')).message(), HasSubstr("ends inside a header"));
  EXPECT_THAT(
      Read("not a tar archive at all, but long enough to fill a header" + std::string(600, '!'))
          .message(),
      HasSubstr("wrong checksum"));
}

}  // namespace
}  // namespace sandgate::core
