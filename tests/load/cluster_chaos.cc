// Load and chaos across three replicas sharing one PostgreSQL database (the fixture of
// tests/integration/cluster.h: loopback TCP, mutual TLS, a 2 s lease): clients of two tenants
// send runs (local and, a quarter, on the openai provider against the fake OpenAI server) and
// kept sessions with execs to random replicas, while a chaos thread SIGKILLs a replica (never
// the one it killed last, so at least two different ones die) and restarts it. A refused or
// cut call is retried on another replica with the same idempotency key.
//
// At the end, with every replica back and then drained: no sandbox process, cgroup, journal
// entry, live session or unfinished run, no container or file at the fake OpenAI; every run's
// log, read from each of the three replicas, is the same dense 1..N ending in run.finished
// (and each client saw every event once, in order); each idempotency key made one run. Prints
// runs by final status, latency percentiles and the leaks; exits non-zero on any of them.
//
//   build/bin/cluster_chaos --runs 300 --clients 12 --kills 12    (full size, by hand)
//   build/bin/cluster_chaos --runs 30 --clients 4 --kills 3       (CI: load.cluster_chaos_small)
//
// A session's execs and close go to random replicas too (forwarded to the one that owns it).
// A run is followed on the replica that owns it, until a follower on another is woken live.
#include <signal.h>

#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <map>
#include <mutex>
#include <random>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/str_cat.h"
#include "sandgate/v1/labels.h"
#include "store/postgres_connection.h"
#include "tests/fakes/openai/fake_openai_server.h"
#include "tests/fakes/postgres_server.h"
#include "tests/integration/cluster.h"
#include "tests/load/leak_checks.h"
#include "tests/sandbox/openai/analyst_scenario.h"

namespace {

namespace v1 = sandgate::v1;
using sandgate::testing::Cluster;
using Steady = std::chrono::steady_clock;

constexpr uint32_t kUidBase = 430000;
constexpr uint32_t kUidCount = 64;  // per replica; replica i from kUidBase + 100 i
constexpr char kOpenAiKey[] = "sk-cluster-chaos-fake-key";
constexpr char kInput[] = "statements.csv";
const char* const kTokens[] = {Cluster::kAlphaToken, Cluster::kBetaToken};

struct Options {
  int runs = 30, clients = 4, kills = 3;
};

struct Stats {
  std::mutex mu;
  std::map<std::string, int> by_status;
  std::map<std::string, std::set<std::string>> runs_by_key;  // what each key answered
  std::vector<double> latency_ms;
  std::map<std::string, int> rpc_errors;
  std::map<std::string, int> failed_why;  // FAILED runs by reason, up to its first digit
  int sessions = 0, execs = 0, seq_errors = 0;
  // The runs started and not yet seen to finish, by the replica that took them: the chaos
  // thread kills one of those, so every kill lands on runs in flight.
  std::multiset<int> in_flight;
  int kills_in_flight = 0;  // runs in flight on the victim, summed over the kills

  void Count(std::map<std::string, int>* m, const std::string& what) {
    std::lock_guard<std::mutex> lock(mu);
    ++(*m)[what];
  }
};

void Pause(int ms) { std::this_thread::sleep_for(std::chrono::milliseconds(ms)); }

class Client {
 public:
  Client(int id, const Cluster& cluster, Stats* stats, const std::string& csv,
         std::atomic<int>* remaining)
      : id_(id),
        cluster_(cluster),
        stats_(stats),
        csv_(csv),
        remaining_(remaining),
        rng_(id * 7919 + 17),
        token_(kTokens[id % 2]) {}

  // Takes operations from `remaining`, and then from `extra` while the chaos thread still has
  // kills to make (they need runs in flight).
  void Loop(std::atomic<int>* extra, const std::atomic<bool>* kills_done) {
    while (remaining_->fetch_sub(1) > 0 || (!kills_done->load() && extra->fetch_sub(1) > 0)) {
      const int dice = std::uniform_int_distribution<int>(0, 7)(rng_);
      if (dice < 2) {
        Run("openai", "openai");
      } else if (dice < 6) {
        Run("local", "reference");
      } else {
        Session();
      }
    }
  }

 private:
  int Any() { return std::uniform_int_distribution<int>(0, cluster_.size() - 1)(rng_); }
  std::unique_ptr<grpc::ClientContext> Context(int seconds = 60) {
    auto ctx = Cluster::Context(token_);
    ctx->set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(seconds));
    return ctx;
  }
  void Error(const char* rpc, const grpc::Status& st) {
    stats_->Count(
        &stats_->rpc_errors,
        absl::StrCat(rpc, " ",
                     absl::StatusCodeToString(static_cast<absl::StatusCode>(st.error_code()))));
  }
  // The replica that owns `run_id` now (it changes when its owner dies), or a random one.
  int Owner(const std::string& run_id) {
    v1::GetRunRequest req;
    req.set_run_id(run_id);
    v1::Run run;
    auto ctx = Context(5);
    if (!cluster_.Stub(Any())->GetRun(ctx.get(), req, &run).ok()) return Any();
    const int owner = cluster_.IndexOf(run.replica());
    return owner < 0 ? Any() : owner;
  }

  // RunAnalysis to a random replica, retried on another with the same key until one takes
  // it; then followed to run.finished, resuming after the last seq on whichever replica owns
  // the run (a replica that has died is noticed at its lease's end).
  void Run(const std::string& provider, const std::string& agent) {
    const auto t0 = Steady::now();
    v1::RunAnalysisRequest req;
    const std::string key = absl::StrCat("c", id_, "-", counter_++);
    req.set_idempotency_key(key);
    req.set_provider(provider);
    req.set_agent(agent);
    auto* in = req.add_inputs();
    in->set_name(kInput);
    in->set_content(csv_);
    v1::Run run;
    for (int attempt = 0;; ++attempt) {
      auto ctx = Context();
      grpc::Status st = cluster_.Stub(Any())->RunAnalysis(ctx.get(), req, &run);
      if (st.ok()) break;
      Error("RunAnalysis", st);
      if (st.error_code() != grpc::StatusCode::UNAVAILABLE || attempt > 100) {
        stats_->Count(&stats_->by_status, "REFUSED");
        return;
      }
      Pause(100);
    }
    const int took = cluster_.IndexOf(run.replica());
    {
      std::lock_guard<std::mutex> lock(stats_->mu);
      stats_->runs_by_key[key].insert(run.id());
      stats_->in_flight.insert(took);
    }
    // However the follow ends, the run is no longer in flight for the chaos thread.
    struct Landed {
      Stats* stats;
      int took;
      ~Landed() {
        std::lock_guard<std::mutex> lock(stats->mu);
        stats->in_flight.erase(stats->in_flight.find(took));
      }
    } landed{stats_, took};
    int64_t last = 0;
    // Long enough for a lease to end and a takeover, a restart and a queue to drain; a run
    // whose log never ends is reported, not waited for until the test's timeout.
    const auto give_up = Steady::now() + std::chrono::seconds(60);
    while (Steady::now() < give_up) {
      auto ctx = Context(10);
      v1::StreamEventsRequest sreq;
      sreq.set_run_id(run.id());
      sreq.set_after_seq(last);
      sreq.set_follow(true);
      auto reader = cluster_.Stub(Owner(run.id()))->StreamEvents(ctx.get(), sreq);
      v1::Event e;
      while (reader->Read(&e)) {
        if (e.seq() == 0) continue;
        if (e.seq() != last + 1) {
          std::fprintf(stderr, "run %s: seq %lld after %lld\n", run.id().c_str(),
                       static_cast<long long>(e.seq()), static_cast<long long>(last));
          std::lock_guard<std::mutex> lock(stats_->mu);
          ++stats_->seq_errors;
        }
        last = e.seq();
        if (e.has_run_finished()) {
          ctx->TryCancel();
          reader->Finish();
          std::lock_guard<std::mutex> lock(stats_->mu);
          ++stats_->by_status[v1::RunStatusLabel(e.run_finished().status())];
          if (e.run_finished().status() == v1::RUN_STATUS_FAILED) {
            const std::string& why = e.run_finished().reason();
            ++stats_->failed_why[why.substr(0, why.find_first_of("0123456789"))];
          }
          stats_->latency_ms.push_back(
              std::chrono::duration<double, std::milli>(Steady::now() - t0).count());
          return;
        }
      }
      reader->Finish();
      Pause(100);
    }
    std::fprintf(stderr, "run %s: no run.finished after seq %lld in 60 s\n", run.id().c_str(),
                 static_cast<long long>(last));
    stats_->Count(&stats_->by_status, "UNFINISHED");
  }

  // A kept local session made on a random replica, two execs and maybe a close each through
  // another random one; half are left to the idle reaper, a drain or a takeover.
  void Session() {
    v1::CreateSessionRequest req;
    req.mutable_sandbox()->mutable_idle_timeout()->set_seconds(20);
    v1::Session s;
    {
      auto ctx = Context();
      grpc::Status st = cluster_.Stub(Any())->CreateSession(ctx.get(), req, &s);
      if (!st.ok()) return Error("CreateSession", st);
    }
    {
      std::lock_guard<std::mutex> lock(stats_->mu);
      ++stats_->sessions;
    }
    for (int i = 0; i < 2; ++i) {
      auto ctx = Context(30);
      v1::ExecRequest ereq;
      ereq.set_session_id(s.id());
      ereq.set_command(i == 1 ? "setsid nohup sleep 300 >/dev/null 2>&1 & echo left" : "ls");
      auto reader = cluster_.Stub(Any())->Exec(ctx.get(), ereq);
      v1::ExecResponse r;
      while (reader->Read(&r)) {
      }
      grpc::Status st = reader->Finish();
      if (!st.ok()) {
        Error("Exec", st);
      } else {
        std::lock_guard<std::mutex> lock(stats_->mu);
        ++stats_->execs;
      }
    }
    if (std::uniform_int_distribution<int>(0, 1)(rng_)) {
      auto ctx = Context();
      v1::CloseSessionRequest creq;
      creq.set_session_id(s.id());
      v1::Session closed;
      grpc::Status st = cluster_.Stub(Any())->CloseSession(ctx.get(), creq, &closed);
      if (!st.ok()) Error("CloseSession", st);
    }
  }

  const int id_;
  const Cluster& cluster_;
  Stats* const stats_;
  const std::string& csv_;
  std::atomic<int>* const remaining_;
  std::mt19937 rng_;
  const std::string token_;
  int counter_ = 0;
};

// Every row of `sql`'s first column, as text.
std::vector<std::string> Column(const std::string& dsn, const char* sql) {
  std::vector<std::string> out;
  sandgate::store::PostgresOptions o;
  o.dsn = dsn;
  o.pool_size = 1;
  auto db = sandgate::store::PostgresDatabase::Open(o);
  if (!db.ok()) return out;
  auto conn = (*db)->Acquire("chaos");
  if (!conn.ok()) return out;
  auto r = (*conn)->Exec("chaos", sql);
  if (!r.ok()) return out;
  for (int i = 0; i < r->rows(); ++i) out.push_back(r->Text(i, 0));
  return out;
}

// A run's stored log as replica i serves it (no follow): the seqs, and whether the last is
// run.finished. Empty on an error.
std::vector<int64_t> Log(const Cluster& c, int i, const std::string& token,
                         const std::string& run_id, bool* finished, std::string* error) {
  auto ctx = Cluster::Context(token);
  v1::StreamEventsRequest req;
  req.set_run_id(run_id);
  auto reader = c.Stub(i)->StreamEvents(ctx.get(), req);
  std::vector<int64_t> seqs;
  v1::Event e;
  *finished = false;
  while (reader->Read(&e)) {
    if (e.seq() == 0) continue;
    seqs.push_back(e.seq());
    *finished = e.has_run_finished();
  }
  if (grpc::Status st = reader->Finish(); !st.ok()) {
    seqs.clear();
    *error = st.error_message();
  }
  return seqs;
}

}  // namespace

int main(int argc, char** argv) {
  Options opt;
  for (int i = 1; i + 1 < argc; i += 2) {
    const std::string a = argv[i];
    const int v = std::atoi(argv[i + 1]);
    if (a == "--runs") {
      opt.runs = v;
    } else if (a == "--clients") {
      opt.clients = v;
    } else if (a == "--kills") {
      opt.kills = v;
    } else {
      std::fprintf(stderr, "cluster_chaos: unknown flag %s (--runs, --clients, --kills)\n",
                   a.c_str());
      return 2;
    }
  }
  absl::StatusOr<std::unique_ptr<sandgate::testing::PostgresServer>> pg =
      sandgate::testing::PostgresServer::Start();
  if (!pg.ok()) {
    std::fprintf(stderr, "%s\n", pg.status().ToString().c_str());
    return 2;
  }
  absl::StatusOr<std::string> dsn = (*pg)->CreateDatabase();
  if (!dsn.ok()) return 2;
  char tmpl[] = "/tmp/sg-cluster-chaos-XXXXXX";
  const std::string dir = mkdtemp(tmpl);
  // The fake outlives every replica: what a killed one left there is another's to delete.
  sandgate::testing::FakeOpenAiServer fake(kOpenAiKey);
  if (!fake.Start(dir + "/fake_openai.log")) return 2;
  fake.Scenario(sandgate::testing::AnalystTurns(kInput));

  sandgate::testing::ClusterOptions o;
  o.dsn = *dsn;
  o.uid_base = kUidBase;
  o.uid_count = kUidCount;
  o.openai_base_url = fake.base_url();
  o.openai_key = kOpenAiKey;
  o.config = {{"max_concurrent_runs", 4},
              {"defaults", {{"drain_grace_seconds", 30}}},
              // The fake makes a container at once: a short window lets a cut create settle.
              {"openai", {{"container_create_settle_seconds", 2}}}};
  absl::StatusOr<std::unique_ptr<Cluster>> made = Cluster::Create(o);
  if (!made.ok()) {
    std::fprintf(stderr, "%s\n", made.status().ToString().c_str());
    return 2;
  }
  Cluster& cluster = **made;
  if (absl::Status st = cluster.StartAll(); !st.ok()) {
    std::fprintf(stderr, "%s\n", st.ToString().c_str());
    return 2;
  }
  const std::string csv = sandgate::testing::SampleStatementsCsv();
  const auto t0 = Steady::now();

  Stats stats;
  std::atomic<int> remaining{opt.runs};
  // At most: the kills have run out of time then. Runs take ~0.2 s and a restart up to 4 s,
  // so twice the runs could be used up before a restarted replica took any (2 kills of 3).
  std::atomic<int> extra{20 * opt.runs};
  std::atomic<bool> done{false}, kills_done{opt.kills == 0};
  std::set<int> killed;
  int kills = 0;
  std::thread chaos([&] {
    std::mt19937 rng(42);
    int last = -1;
    while (!done && kills < opt.kills) {
      Pause(std::uniform_int_distribution<int>(300, 1500)(rng));
      // A replica with runs in flight, never the one killed last (so at least two different
      // ones die), as soon as there is one.
      int victim = -1, on_victim = 0;
      while (!done && victim < 0) {
        {
          std::lock_guard<std::mutex> lock(stats.mu);
          std::vector<int> candidates;
          for (int r : stats.in_flight) {
            if (r >= 0 && r != last && (candidates.empty() || candidates.back() != r)) {
              candidates.push_back(r);
            }
          }
          if (!candidates.empty()) {
            victim =
                candidates[std::uniform_int_distribution<size_t>(0, candidates.size() - 1)(rng)];
            on_victim = static_cast<int>(stats.in_flight.count(victim));
            stats.kills_in_flight += on_victim;
          }
        }
        if (victim < 0) Pause(20);
      }
      if (victim < 0) break;
      std::fprintf(stderr, "cluster_chaos: SIGKILL %s with %d runs in flight\n",
                   Cluster::Id(victim).c_str(), on_victim);
      cluster.Stop(victim, SIGKILL);
      killed.insert(victim);
      last = victim;
      ++kills;
      // Down for up to two lease periods: sometimes taken over, sometimes back first.
      Pause(std::uniform_int_distribution<int>(200, 4000)(rng));
      if (absl::Status st = cluster.Start(victim); !st.ok()) {
        std::fprintf(stderr, "restart: %s\n", st.ToString().c_str());
      }
    }
    kills_done = true;
  });
  std::vector<std::thread> clients;
  for (int i = 0; i < opt.clients; ++i) {
    clients.emplace_back(
        [&, i] { Client(i, cluster, &stats, csv, &remaining).Loop(&extra, &kills_done); });
  }
  for (auto& t : clients) t.join();
  done = true;
  chaos.join();
  const double seconds = std::chrono::duration<double>(Steady::now() - t0).count();

  // A run a client stopped following (refused, given up) may still be settled by a takeover:
  // its log is compared once every run is final, not while a replica still appends to it.
  for (int i = 0;
       i < 150 && cluster.QueryInt("SELECT count(*) FROM runs WHERE status IN (1, 2)") != 0; ++i) {
    Pause(100);
  }
  // Every run's log from every replica: the same, dense from 1, ending in run.finished.
  int bad_logs = 0;
  std::vector<std::pair<std::string, std::string>> runs;  // id, its tenant's token
  for (const auto& [tenant, token] :
       {std::pair<const char*, const char*>{"alpha", kTokens[0]}, {"beta", kTokens[1]}}) {
    const std::string sql = absl::StrCat("SELECT id FROM runs WHERE tenant = '", tenant, "'");
    for (std::string& id : Column(*dsn, sql.c_str())) runs.emplace_back(std::move(id), token);
  }
  std::vector<std::string> run_ids;
  for (const auto& [id, token] : runs) {
    run_ids.push_back(id);
    std::vector<int64_t> first;
    for (int i = 0; i < cluster.size(); ++i) {
      bool finished = false;
      std::string error;
      std::vector<int64_t> seqs = Log(cluster, i, token, id, &finished, &error);
      bool dense = !seqs.empty() && finished;
      for (size_t k = 0; dense && k < seqs.size(); ++k) dense = seqs[k] == int64_t(k) + 1;
      if (i == 0) first = seqs;
      if (!dense || seqs != first) {
        ++bad_logs;
        std::fprintf(stderr, "run %s: %zu events from %s (%zu from %s), %sdense, %sfinished%s%s\n",
                     id.c_str(), seqs.size(), Cluster::Id(i).c_str(), first.size(),
                     Cluster::Id(0).c_str(), dense ? "" : "not ", finished ? "" : "not ",
                     error.empty() ? "" : ": ", error.c_str());
      }
    }
  }
  int duplicate_keys = 0;
  size_t keyed_runs = 0;
  for (const auto& [key, ids] : stats.runs_by_key) {
    keyed_runs += ids.size();
    if (ids.size() != 1) {
      ++duplicate_keys;
      std::fprintf(stderr, "key %s answered %zu runs\n", key.c_str(), ids.size());
    }
  }
  // Every stored run was answered to a key, and none twice.
  const int stored_runs = static_cast<int>(run_ids.size());

  for (int i = 0; i < cluster.size(); ++i) cluster.Stop(i, SIGTERM);  // drains
  // The sessions the cluster made: the kept ones, and each run's own ("s" + the run id's hex).
  std::set<std::string> ours;
  for (const std::string& s : Column(*dsn, "SELECT id FROM sessions")) ours.insert(s);
  for (const std::string& r : run_ids) ours.insert("s" + r.substr(4));
  const int leaked_processes =
      sandgate::load::LiveProcessesWithUids(kUidBase, 100 * (cluster.size() - 1) + kUidCount);
  const int leaked_cgroups = sandgate::load::LeakedCgroups(ours);
  const int journal = static_cast<int>(cluster.QueryInt("SELECT count(*) FROM journal"));
  const int live_sessions =
      static_cast<int>(cluster.QueryInt("SELECT count(*) FROM sessions WHERE status = 1"));
  const int unfinished =
      static_cast<int>(cluster.QueryInt("SELECT count(*) FROM runs WHERE status IN (1, 2)"));
  const nlohmann::json upstream = fake.State();
  const int containers =
      upstream["containers"].is_array() ? static_cast<int>(upstream["containers"].size()) : -1;
  const int files = upstream["files"].is_array() ? static_cast<int>(upstream["files"].size()) : -1;

  std::printf(
      "cluster_chaos: %d operations, %d clients, 3 replicas, %d kills of %zu replicas (on %d runs "
      "in flight), %.1f s\n",
      opt.runs, opt.clients, kills, killed.size(), stats.kills_in_flight, seconds);
  std::printf("runs stored %d, asked for by %zu keys; by final status:", stored_runs,
              stats.runs_by_key.size());
  for (const auto& [status, n] : stats.by_status) std::printf(" %s %d", status.c_str(), n);
  for (const auto& [why, n] : stats.failed_why) std::printf("\n  FAILED %d: %s…", n, why.c_str());
  std::printf("\nrun latency (RunAnalysis to run.finished): p50 %.0f ms, p99 %.0f ms\n",
              sandgate::load::Percentile(stats.latency_ms, 0.5),
              sandgate::load::Percentile(stats.latency_ms, 0.99));
  std::printf("sessions %d, execs %d, rpc errors:", stats.sessions, stats.execs);
  for (const auto& [what, n] : stats.rpc_errors) std::printf(" %s %d", what.c_str(), n);
  std::printf("\nevents: %d seq errors seen by clients, %d logs not dense/identical on all 3\n",
              stats.seq_errors, bad_logs);
  std::printf("idempotency: %d keys with more than one run, %zu runs answered, %d stored\n",
              duplicate_keys, keyed_runs, stored_runs);
  std::printf(
      "leaks: sandbox processes %d, cgroups %d, journal entries %d, live sessions %d, unfinished "
      "runs %d, upstream containers %d, upstream files %d\n",
      leaked_processes, leaked_cgroups, journal, live_sessions, unfinished, containers, files);
  const bool ok =
      leaked_processes == 0 && leaked_cgroups == 0 && journal == 0 && live_sessions == 0 &&
      unfinished == 0 && containers == 0 && files == 0 && stats.seq_errors == 0 && bad_logs == 0 &&
      duplicate_keys == 0 && keyed_runs == static_cast<size_t>(stored_runs) &&
      stats.by_status.count("UNFINISHED") == 0 && stats.by_status.count("REFUSED") == 0 &&
      (opt.kills < 2 || killed.size() >= 2) && kills == opt.kills && stats.kills_in_flight >= kills;
  std::printf("%d passed, %d failed\n", ok ? 1 : 0, ok ? 0 : 1);
  if (ok) {
    std::system(("rm -rf " + dir).c_str());
  } else {
    cluster.keep_dir();
    std::fprintf(stderr, "kept %s (the fake's log)\n", dir.c_str());
  }
  return ok ? 0 : 1;
}
