// The ArtifactStore contract (store/artifact_store.h), run on both implementations:
// FileArtifactStore and PostgresArtifactStore (on tests/fakes' throwaway server, with the
// daemon's 1 MiB chunks, so sizes around 1 MiB cross chunk boundaries).
#include "store/artifact_store.h"

#include <atomic>
#include <cstdlib>
#include <functional>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/str_cat.h"
#include "common/sha256.h"
#include "gtest/gtest.h"
#include "store/file_artifact_store.h"
#include "store/postgres_artifact_store.h"
#include "tests/fakes/largest_allocation.h"
#include "tests/fakes/postgres_server.h"

namespace sandgate::store {
namespace {

constexpr uint64_t kMiB = 1 << 20;

class Backend {
 public:
  virtual ~Backend() = default;
  virtual ArtifactStore& store() = 0;
  // What writers left that no artifact names (temp files, chunk rows); -1 on error.
  virtual int64_t Leftovers() = 0;
  // The largest buffer a Writer may hold.
  virtual uint64_t writer_buffer_bytes() const = 0;
};

class FileBackend : public Backend {
 public:
  FileBackend() {
    char tmpl[] = "/tmp/sg-art-XXXXXX";
    dir_ = mkdtemp(tmpl);
    auto s = FileArtifactStore::Open(dir_ + "/a");
    EXPECT_TRUE(s.ok()) << s.status();
    if (s.ok()) store_ = std::move(*s);
  }
  ~FileBackend() override { std::system(("rm -rf " + dir_).c_str()); }
  ArtifactStore& store() override { return *store_; }
  int64_t Leftovers() override {
    std::string cmd = absl::StrCat("test -z \"$(find ", dir_, "/a -name '.tmp-*')\"");
    return std::system(cmd.c_str()) == 0 ? 0 : 1;
  }
  uint64_t writer_buffer_bytes() const override { return kMiB; }  // write() as they come

 private:
  std::string dir_;
  std::unique_ptr<FileArtifactStore> store_;
};

class PostgresBackend : public Backend {
 public:
  PostgresBackend() {
    auto dsn = sandgate::testing::PostgresServer::Shared().CreateDatabase();
    EXPECT_TRUE(dsn.ok()) << dsn.status();
    if (!dsn.ok()) return;
    dsn_ = *dsn;
    PostgresOptions o;
    o.dsn = dsn_;
    o.pool_size = 6;
    auto db = PostgresDatabase::Open(o);
    EXPECT_TRUE(db.ok()) << db.status();
    if (!db.ok()) return;
    db_ = std::move(*db);
    auto s = PostgresArtifactStore::Open(db_.get());
    EXPECT_TRUE(s.ok()) << s.status();
    if (s.ok()) store_ = std::move(*s);
  }
  ArtifactStore& store() override { return *store_; }
  int64_t Leftovers() override {
    return Count(
        "SELECT count(*) FROM artifact_chunks c "
        "WHERE NOT EXISTS (SELECT 1 FROM artifacts a WHERE a.upload = c.upload)");
  }
  uint64_t writer_buffer_bytes() const override { return 2 * PostgresArtifactStore::kChunkBytes; }

  int64_t Count(const char* sql) {
    absl::StatusOr<int64_t> n = sandgate::testing::QueryCount(dsn_, sql);
    EXPECT_TRUE(n.ok()) << n.status();
    return n.ok() ? *n : -1;
  }
  absl::Status Exec(const char* sql) {
    auto conn = db_->Acquire("exec");
    if (!conn.ok()) return conn.status();
    return (*conn)->Run("exec", sql);
  }
  PostgresDatabase* db() { return db_.get(); }

 private:
  std::string dsn_;
  std::unique_ptr<PostgresDatabase> db_;
  std::unique_ptr<PostgresArtifactStore> store_;
};

struct BackendKind {
  std::string name;
  std::function<std::unique_ptr<Backend>()> make;
  friend void PrintTo(const BackendKind& kind, std::ostream* os) { *os << kind.name; }
};

class ArtifactStoreContractTest : public ::testing::TestWithParam<BackendKind> {
 protected:
  void SetUp() override {
    backend_ = GetParam().make();
    ASSERT_NE(backend_, nullptr);
  }
  ArtifactStore& store() { return backend_->store(); }
  // Reads the whole artifact `step` bytes at a time, as a download does.
  std::string ReadAll(const std::string& run, const std::string& name, uint64_t step) {
    std::string back;
    for (uint64_t off = 0;;) {
      auto chunk = store().Read(run, name, off, step);
      EXPECT_TRUE(chunk.ok()) << chunk.status();
      if (!chunk.ok() || chunk->empty()) break;
      off += chunk->size();
      back += *chunk;
    }
    return back;
  }
  // `n` bytes that differ at every offset modulo a prime, so a misplaced slice shows.
  static std::string Pattern(size_t n, char salt = 0) {
    std::string s(n, '\0');
    for (size_t i = 0; i < n; ++i) s[i] = static_cast<char>((i % 251) ^ salt);
    return s;
  }
  std::unique_ptr<Backend> backend_;
};

TEST_P(ArtifactStoreContractTest, PutThenReadInChunks) {
  std::string data = Pattern(100000);
  auto art = store().Put("run1", "memo.md", data);
  ASSERT_TRUE(art.ok()) << art.status();
  EXPECT_EQ(art->name(), "memo.md");
  EXPECT_EQ(art->size_bytes(), data.size());
  EXPECT_EQ(art->sha256(), Sha256::Hex(data));
  EXPECT_EQ(ReadAll("run1", "memo.md", 4096), data);
  EXPECT_EQ(store().Read("run1", "nope", 0, 10).status().code(), absl::StatusCode::kNotFound);
  EXPECT_EQ(store().Read("run2", "memo.md", 0, 10).status().code(), absl::StatusCode::kNotFound);
  EXPECT_EQ(store().Read("run1", "../x", 0, 10).status().code(), absl::StatusCode::kNotFound);
  absl::Status bad = store().Put("run1", "../x", "d").status();
  EXPECT_EQ(bad.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(bad.message().find("'../x'"), absl::string_view::npos) << bad;
  EXPECT_EQ(store().Put("a/b", "x", "d").status().code(), absl::StatusCode::kInvalidArgument);
  auto empty = store().Put("run1", "empty.txt", "");
  ASSERT_TRUE(empty.ok()) << empty.status();
  EXPECT_EQ(empty->sha256(), Sha256::Hex(""));
  auto none = store().Read("run1", "empty.txt", 0, 10);
  ASSERT_TRUE(none.ok()) << none.status();
  EXPECT_TRUE(none->empty());
}

// Offsets and lengths on both sides of the 1 MiB chunk boundaries, from pieces whose size
// is no divisor of a chunk.
TEST_P(ArtifactStoreContractTest, ReadsAtAnyOffsetAcrossChunkBoundaries) {
  const std::string data = Pattern(2 * kMiB + kMiB / 2 + 3);
  auto writer = store().Create("run1", "big.bin");
  ASSERT_TRUE(writer.ok()) << writer.status();
  for (size_t at = 0; at < data.size(); at += 77777) {
    ASSERT_TRUE((*writer)->Append(absl::string_view(data).substr(at, 77777)).ok());
  }
  auto art = (*writer)->Commit();
  ASSERT_TRUE(art.ok()) << art.status();
  EXPECT_EQ(art->size_bytes(), data.size());
  EXPECT_EQ(art->sha256(), Sha256::Hex(data));
  struct Case {
    uint64_t offset, max;
  };
  const Case cases[] = {
      {0, 1},         {kMiB - 1, 1},        {kMiB - 1, 2},    {kMiB, 1},      {kMiB - 5, kMiB + 10},
      {10, 2 * kMiB}, {2 * kMiB + 1, kMiB}, {0, data.size()}, {0, 10 * kMiB}, {data.size() - 1, 5}};
  for (const Case& c : cases) {
    auto got = store().Read("run1", "big.bin", c.offset, c.max);
    ASSERT_TRUE(got.ok()) << got.status() << " at " << c.offset;
    EXPECT_EQ(*got, data.substr(c.offset, c.max)) << "offset " << c.offset << " max " << c.max;
  }
  EXPECT_EQ(store().Read("run1", "big.bin", data.size(), 10)->size(), 0u);
  EXPECT_EQ(store().Read("run1", "big.bin", data.size() + 5, 10)->size(), 0u);
  EXPECT_EQ(ReadAll("run1", "big.bin", 256 << 10), data);  // the download's chunk
}

// Collecting an artifact of tens of MiB holds one piece (or one chunk) of it at a time: the
// store writes and hashes as the pieces come, never gathering the whole file.
TEST_P(ArtifactStoreContractTest, AWriterStoresPieceByPieceWithABoundedBuffer) {
  std::string piece(64 << 10, 'p');
  Sha256 expected;
  absl::StatusOr<v1::Artifact> art;
  {
    testing::LargestAllocation probe;
    auto writer = store().Create("run1", "chart.svg");
    ASSERT_TRUE(writer.ok()) << writer.status();
    for (int i = 0; i < 384; ++i) {  // 24 MiB
      piece[0] = static_cast<char>(i);
      expected.Update(piece);
      ASSERT_TRUE((*writer)->Append(piece).ok());
    }
    art = (*writer)->Commit();
    EXPECT_LE(probe.bytes(), backend_->writer_buffer_bytes())
        << "the store gathered the artifact in memory";
  }
  ASSERT_TRUE(art.ok()) << art.status();
  EXPECT_EQ(art->size_bytes(), 384u * piece.size());
  EXPECT_EQ(art->sha256(), expected.HexDigest());
  auto whole = store().Read("run1", "chart.svg", 0, art->size_bytes());
  ASSERT_TRUE(whole.ok()) << whole.status();
  EXPECT_EQ(whole->size(), art->size_bytes());
  EXPECT_EQ(Sha256::Hex(*whole), art->sha256());
}

// A file refused halfway (over the cap, the sandbox gone) leaves no artifact behind, and
// one of the same name stored before stays whole.
TEST_P(ArtifactStoreContractTest, AWriterNotCommittedLeavesNothing) {
  {
    auto writer = store().Create("run1", "memo.md");
    ASSERT_TRUE(writer.ok()) << writer.status();
    ASSERT_TRUE((*writer)->Append(Pattern(kMiB + kMiB / 2)).ok());  // a chunk stored
  }
  EXPECT_EQ(store().Read("run1", "memo.md", 0, 10).status().code(), absl::StatusCode::kNotFound);
  EXPECT_EQ(backend_->Leftovers(), 0) << "a failed writer left something behind";

  const std::string before = Pattern(kMiB + 10, 1);
  ASSERT_TRUE(store().Put("run1", "memo.md", before).ok());
  {
    auto writer = store().Create("run1", "memo.md");
    ASSERT_TRUE(writer.ok());
    ASSERT_TRUE((*writer)->Append(Pattern(3 * kMiB, 2)).ok());
  }
  EXPECT_EQ(ReadAll("run1", "memo.md", 256 << 10), before);
  EXPECT_EQ(backend_->Leftovers(), 0);

  auto writer = store().Create("run1", "memo.md");
  ASSERT_TRUE(writer.ok());
  ASSERT_TRUE((*writer)->Commit().ok());
  EXPECT_EQ(store().Read("run1", "memo.md", 0, 10)->size(), 0u) << "replaced by the empty one";
  EXPECT_EQ((*writer)->Commit().status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_EQ((*writer)->Append("late").code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_EQ(store().Create("run1", "../x").status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(backend_->Leftovers(), 0) << "the replaced artifact's data stayed";
}

TEST_P(ArtifactStoreContractTest, RemoveRunDeletesThatRunsArtifactsOnly) {
  const std::string data = Pattern(kMiB + 1);
  ASSERT_TRUE(store().Put("run1", "a.csv", data).ok());
  ASSERT_TRUE(store().Put("run1", "b.json", "{}").ok());
  ASSERT_TRUE(store().Put("run2", "a.csv", data).ok());
  ASSERT_TRUE(store().RemoveRun("run1").ok());
  EXPECT_EQ(store().Read("run1", "a.csv", 0, 10).status().code(), absl::StatusCode::kNotFound);
  EXPECT_EQ(store().Read("run1", "b.json", 0, 10).status().code(), absl::StatusCode::kNotFound);
  EXPECT_EQ(ReadAll("run2", "a.csv", 256 << 10), data);
  EXPECT_TRUE(store().RemoveRun("run1").ok()) << "twice";
  EXPECT_TRUE(store().RemoveRun("never").ok());
  EXPECT_EQ(store().RemoveRun("../x").code(), absl::StatusCode::kInvalidArgument);
  // The run's artifacts can be stored again (a purge does not poison the name).
  ASSERT_TRUE(store().Put("run1", "a.csv", "again").ok());
  EXPECT_EQ(*store().Read("run1", "a.csv", 0, 10), "again");
}

// Readers at once, while a writer replaces the artifact: each whole read is one version or
// the other, never a mix.
TEST_P(ArtifactStoreContractTest, ConcurrentReadersSeeAWholeVersion) {
  const std::string v1 = Pattern(kMiB + kMiB / 3, 'a'), v2 = Pattern(kMiB + kMiB / 3, 'b');
  ASSERT_TRUE(store().Put("run1", "out.csv", v1).ok());
  std::atomic<bool> stop{false};
  std::atomic<int> reads{0}, torn{0}, errors{0};
  std::vector<std::thread> readers;
  for (int t = 0; t < 4; ++t) {
    readers.emplace_back([&] {
      while (!stop.load() || reads.load() < 8) {
        auto got = store().Read("run1", "out.csv", 0, v1.size());
        if (!got.ok()) {
          ++errors;
        } else if (*got != v1 && *got != v2) {
          ++torn;
        }
        ++reads;
      }
    });
  }
  for (int i = 0; i < 6; ++i) ASSERT_TRUE(store().Put("run1", "out.csv", i % 2 ? v1 : v2).ok());
  stop = true;
  for (std::thread& t : readers) t.join();
  EXPECT_EQ(torn.load(), 0);
  EXPECT_EQ(errors.load(), 0);
  EXPECT_GE(reads.load(), 8);
  EXPECT_EQ(backend_->Leftovers(), 0);
}

INSTANTIATE_TEST_SUITE_P(
    Backends, ArtifactStoreContractTest,
    ::testing::Values(
        BackendKind{"file", [] { return std::unique_ptr<Backend>(new FileBackend()); }},
        BackendKind{"postgres", [] { return std::unique_ptr<Backend>(new PostgresBackend()); }}),
    [](const ::testing::TestParamInfo<BackendKind>& info) { return info.param.name; });

// What only the database does: chunks of a writer that died before Commit (no destructor
// ran) go with the run, and an artifact keeps the chunk size it was written with.
TEST(PostgresArtifactStoreTest, RemoveRunDeletesChunksNoArtifactNames) {
  PostgresBackend b;
  ASSERT_TRUE(b.Exec("INSERT INTO artifact_chunks(upload, seq, run_id, data) "
                     "VALUES (nextval('artifact_uploads'), 0, 'run1', '\\x00')")
                  .ok());
  EXPECT_EQ(b.Leftovers(), 1);
  ASSERT_TRUE(b.store().RemoveRun("run1").ok());
  EXPECT_EQ(b.Count("SELECT count(*) FROM artifact_chunks"), 0);
}

TEST(PostgresArtifactStoreTest, ReadsArtifactsWrittenWithAnotherChunkSize) {
  PostgresBackend b;
  auto small = PostgresArtifactStore::Open(b.db(), 1000);
  ASSERT_TRUE(small.ok()) << small.status();
  std::string data(4321, '\0');
  for (size_t i = 0; i < data.size(); ++i) data[i] = static_cast<char>(i * 7);
  ASSERT_TRUE((*small)->Put("run1", "a.bin", data).ok());
  EXPECT_EQ(b.Count("SELECT count(*) FROM artifact_chunks"), 5);
  EXPECT_EQ(*b.store().Read("run1", "a.bin", 0, data.size()), data);
  EXPECT_EQ(*b.store().Read("run1", "a.bin", 999, 1002), data.substr(999, 1002));
  EXPECT_EQ(PostgresArtifactStore::Open(b.db(), 0).status().code(),
            absl::StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace sandgate::store
