// PostgreSQL against SQLite, in the same run so both see the same machine load:
//   1. RunAnalysis end to end (reference agent, sample input) on a daemon with
//      store.type postgres and one with sqlite, alternated (target: PostgreSQL <= 1.2x);
//   2. events/s appended through the Store (one event per commit, and batches of 64 as the
//      event log's group commit makes them) and read back (pages of 1000), on PostgresStore
//      and SqliteStore, alternated round by round;
//   3. DownloadArtifact MiB/s through gRPC of one 32 MiB artifact (max_artifact_bytes) of a
//      finished run, from PostgreSQL chunks and from a file, alternated round by round. The
//      playbooks' artifacts are a few KiB, so the bench adds it to a run of each daemon
//      through the stores' own API, as the collector would (same bytes, same run record).
// PostgreSQL is a throwaway server (tests/fakes/postgres_server.h) with fsync on, on this
// machine's Unix socket.
//
//   build/bin/bench_postgres [runs] [rounds] [downloads]
//   (as root; default 20 runs, 5 rounds, 10 downloads)
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

#include "common/sha256.h"
#include "nlohmann/json.hpp"
#include "store/file_artifact_store.h"
#include "store/postgres_artifact_store.h"
#include "store/postgres_store.h"
#include "store/sqlite_store.h"
#include "tests/bench/bench_daemon.h"
#include "tests/bench/follow_run.h"
#include "tests/fakes/postgres_server.h"
#include "tests/sandbox/openai/analyst_scenario.h"

namespace {

using Steady = std::chrono::steady_clock;
using sandgate::bench::Median;
using sandgate::bench::TimeSampleRun;

double Ms(Steady::time_point since) {
  return std::chrono::duration<double, std::milli>(Steady::now() - since).count();
}

struct Rates {
  double append1 = 0, append64 = 0, read = 0;  // events/s
};

// `events` events over 8 runs: one per AppendEvents, then in batches of 64, then read back.
Rates Measure(sandgate::store::Store& store, const std::string& prefix, int events) {
  sandgate::v1::Event e;
  e.set_type("command.output");
  e.mutable_command_output()->set_data(std::string(200, 'x'));  // a typical output chunk
  Rates r;
  auto start = Steady::now();
  for (int i = 0; i < events; ++i) {
    e.set_run_id(prefix + "-one-" + std::to_string(i % 8));
    e.set_seq(i / 8 + 1);
    if (!store.AppendEvents({e}).ok()) std::exit(1);
  }
  r.append1 = events / (Ms(start) / 1000);
  start = Steady::now();
  std::vector<sandgate::v1::Event> batch;
  for (int i = 0; i < events; ++i) {
    e.set_run_id(prefix + "-batch-" + std::to_string(i % 8));
    e.set_seq(i / 8 + 1);
    batch.push_back(e);
    if (batch.size() == 64) {
      if (!store.AppendEvents(batch).ok()) std::exit(1);
      batch.clear();
    }
  }
  if (!batch.empty() && !store.AppendEvents(batch).ok()) std::exit(1);
  r.append64 = events / (Ms(start) / 1000);
  start = Steady::now();
  int read = 0;
  for (int run = 0; run < 8; ++run) {
    int64_t after = 0;
    for (;;) {
      auto page = store.ReadEvents(prefix + "-batch-" + std::to_string(run), after, 1000);
      if (!page.ok()) std::exit(1);
      if (page->empty()) break;
      read += static_cast<int>(page->size());
      after = page->back().seq();
    }
  }
  if (read != events) std::exit(1);
  r.read = read / (Ms(start) / 1000);
  return r;
}

// A finished sample run on `stub`; its id, or "" when it failed.
std::string SampleRun(sandgate::v1::Sandgate::Stub& stub, const std::string& csv) {
  sandgate::v1::RunAnalysisRequest req;
  auto* in = req.add_inputs();
  in->set_name("northstar_cloud_financial_statements.csv");
  in->set_content(csv);
  sandgate::v1::Run run;
  grpc::ClientContext ctx;
  if (!stub.RunAnalysis(&ctx, req, &run).ok()) return "";
  if (sandgate::bench::FollowToFinish(stub, run.id()).status() !=
      sandgate::v1::RUN_STATUS_SUCCEEDED) {
    return "";
  }
  return run.id();
}

// Stores `data` as artifact `name` of the finished run `id` and lists it in its record.
void AddArtifact(sandgate::store::ArtifactStore& artifacts, sandgate::store::Store& store,
                 const std::string& id, const std::string& name, const std::string& data) {
  auto stored = artifacts.Put(id, name, data);
  auto run = store.GetRun(id);
  if (!stored.ok() || !run.ok()) std::exit(1);
  *run->add_artifacts() = *stored;
  if (!store.PutRun(*run).ok()) std::exit(1);
}

// MiB/s of one DownloadArtifact; -1 on an error or a wrong sha256.
double DownloadMiBs(sandgate::v1::Sandgate::Stub& stub, const std::string& id,
                    const std::string& name, const std::string& sha256) {
  const auto start = Steady::now();
  grpc::ClientContext ctx;
  sandgate::v1::DownloadArtifactRequest req;
  req.set_run_id(id);
  req.set_name(name);
  auto reader = stub.DownloadArtifact(&ctx, req);
  sandgate::v1::ArtifactChunk chunk;
  uint64_t bytes = 0;
  std::string last_sha;
  while (reader->Read(&chunk)) {
    bytes += chunk.data().size();
    if (!chunk.sha256().empty()) last_sha = chunk.sha256();
  }
  if (!reader->Finish().ok() || last_sha != sha256) return -1;
  return static_cast<double>(bytes) / (1 << 20) / (Ms(start) / 1000);
}

// MiB/s of reading the whole artifact in the download's 256 KiB pieces, without gRPC.
double ReadMiBs(sandgate::store::ArtifactStore& artifacts, const std::string& id,
                const std::string& name) {
  const auto start = Steady::now();
  uint64_t offset = 0;
  for (;;) {
    auto piece = artifacts.Read(id, name, offset, 256 << 10);
    if (!piece.ok()) std::exit(1);
    if (piece->empty()) break;
    offset += piece->size();
  }
  return static_cast<double>(offset) / (1 << 20) / (Ms(start) / 1000);
}

}  // namespace

int main(int argc, char** argv) {
  const int runs = argc > 1 ? std::atoi(argv[1]) : 20;
  const int rounds = argc > 2 ? std::atoi(argv[2]) : 5;
  const int downloads = argc > 3 ? std::atoi(argv[3]) : 10;
  auto server = sandgate::testing::PostgresServer::Start(/*fsync=*/true);
  if (!server.ok()) {
    std::fprintf(stderr, "%s\n", std::string(server.status().message()).c_str());
    return 1;
  }
  auto daemon_db = (*server)->CreateDatabase();
  auto store_db = (*server)->CreateDatabase();
  if (!daemon_db.ok() || !store_db.ok()) return 1;

  // 1. RunAnalysis end to end.
  const std::string csv = sandgate::testing::SampleStatementsCsv();
  nlohmann::json pg_config = {{"store", {{"type", "postgres"}, {"dsn", *daemon_db}}},
                              {"local", {{"uid_base", 310000}, {"uid_count", 16}}}};
  nlohmann::json sqlite_config = {{"local", {{"uid_base", 311000}, {"uid_count", 16}}}};
  auto pg = sandgate::bench::Daemon::Start(pg_config.dump());
  auto sqlite = sandgate::bench::Daemon::Start(sqlite_config.dump());
  auto pg_stub = pg.Stub(), sqlite_stub = sqlite.Stub();
  TimeSampleRun(*pg_stub, csv);  // warm-up: page cache, first sandbox, first connections
  TimeSampleRun(*sqlite_stub, csv);
  std::vector<double> pg_ms, sqlite_ms;
  int failures = 0;
  for (int i = 0; i < runs; ++i) {
    // Alternate which goes first, so neither always follows the other's cleanup.
    double a, b;
    if (i % 2) {
      a = TimeSampleRun(*pg_stub, csv);
      b = TimeSampleRun(*sqlite_stub, csv);
    } else {
      b = TimeSampleRun(*sqlite_stub, csv);
      a = TimeSampleRun(*pg_stub, csv);
    }
    if (a < 0 || b < 0) {
      ++failures;
      continue;
    }
    pg_ms.push_back(a);
    sqlite_ms.push_back(b);
  }
  if (pg_ms.empty()) {
    std::fprintf(stderr, "every run failed\n");
    return 1;
  }
  std::printf("RunAnalysis to run.finished, median of %zu (ms)\n", pg_ms.size());
  std::printf("  %-20s %8.1f\n  %-20s %8.1f\n  %-20s %7.2fx  (target <= 1.20x)\n", "sqlite",
              Median(sqlite_ms), "postgres", Median(pg_ms), "ratio",
              Median(pg_ms) / Median(sqlite_ms));
  if (failures) std::printf("  failed iterations: %d\n", failures);

  // 2. Events through the Store.
  char tmpl[] = "/tmp/sg-bench-XXXXXX";
  const std::string dir = mkdtemp(tmpl);
  auto sq = sandgate::store::SqliteStore::Open(dir + "/state.db");
  sandgate::store::PostgresOptions o;
  o.dsn = *store_db;
  auto ps = sandgate::store::PostgresStore::Open(o);
  if (!sq.ok() || !ps.ok()) return 1;
  constexpr int kEvents = 4096;
  std::vector<double> s1, s64, sr, p1, p64, pr;
  for (int round = 0; round < rounds; ++round) {
    Rates s = Measure(**sq, "r" + std::to_string(round), kEvents);
    Rates p = Measure(**ps, "r" + std::to_string(round), kEvents);
    s1.push_back(s.append1);
    s64.push_back(s.append64);
    sr.push_back(s.read);
    p1.push_back(p.append1);
    p64.push_back(p.append64);
    pr.push_back(p.read);
  }
  std::printf("Events through the Store, %d per round, median of %d rounds (events/s)\n", kEvents,
              rounds);
  std::printf("  %-30s %10s %10s %8s\n", "", "sqlite", "postgres", "pg/sq");
  auto line = [](const char* what, double s, double p) {
    std::printf("  %-30s %10.0f %10.0f %7.2fx\n", what, s, p, p / s);
  };
  line("append, 1 event per commit", Median(s1), Median(p1));
  line("append, 64 events per commit", Median(s64), Median(p64));
  line("read back, pages of 1000", Median(sr), Median(pr));
  sq->reset();
  std::system(("rm -rf " + dir).c_str());

  // 3. DownloadArtifact through gRPC, from PostgreSQL and from a file.
  const std::string pg_run = SampleRun(*pg_stub, csv), sqlite_run = SampleRun(*sqlite_stub, csv);
  if (pg_run.empty() || sqlite_run.empty()) return 1;
  std::string blob(32 << 20, '\0');
  for (size_t i = 0; i < blob.size(); ++i) blob[i] = static_cast<char>((i * 2654435761u) >> 13);
  const std::string sha = sandgate::Sha256::Hex(blob);
  sandgate::store::PostgresOptions po;
  po.dsn = *daemon_db;
  auto pstore = sandgate::store::PostgresStore::Open(po);
  if (!pstore.ok()) return 1;
  auto partifacts = sandgate::store::PostgresArtifactStore::Open(&(*pstore)->database());
  auto sstore = sandgate::store::SqliteStore::Open(sqlite.dir() + "/state/state.db");
  auto sartifacts = sandgate::store::FileArtifactStore::Open(sqlite.dir() + "/state/artifacts");
  if (!partifacts.ok() || !sstore.ok() || !sartifacts.ok()) return 1;
  AddArtifact(**partifacts, **pstore, pg_run, "bench.bin", blob);
  AddArtifact(**sartifacts, **sstore, sqlite_run, "bench.bin", blob);
  std::vector<double> pg_mibs, file_mibs, pg_read, file_read;
  for (int i = 0; i < downloads; ++i) {
    pg_read.push_back(ReadMiBs(**partifacts, pg_run, "bench.bin"));
    file_read.push_back(ReadMiBs(**sartifacts, sqlite_run, "bench.bin"));
    double p = DownloadMiBs(*pg_stub, pg_run, "bench.bin", sha);
    double f = DownloadMiBs(*sqlite_stub, sqlite_run, "bench.bin", sha);
    if (p < 0 || f < 0) {
      std::fprintf(stderr, "a download failed or its sha256 differed\n");
      return 1;
    }
    pg_mibs.push_back(p);
    file_mibs.push_back(f);
  }
  std::printf("DownloadArtifact of 32 MiB through gRPC, median of %d (MiB/s)\n", downloads);
  std::printf("  %-20s %8.1f\n  %-20s %8.1f\n  %-20s %7.2fx\n", "file (sqlite)", Median(file_mibs),
              "postgres", Median(pg_mibs), "ratio", Median(pg_mibs) / Median(file_mibs));
  std::printf("The same through ArtifactStore::Read in this process, 256 KiB reads (MiB/s)\n");
  std::printf("  %-20s %8.1f\n  %-20s %8.1f\n", "file", Median(file_read), "postgres",
              Median(pg_read));
  return 0;
}
