// Load and chaos: many clients of several tenants doing runs, sessions, execs, cancels and
// disconnects against one real sandgated, which (in chaos mode) is SIGKILLed and restarted at
// random points. A quarter of the operations use the openai provider (hosted containers) or
// the openai agent, against the fake OpenAI server (tests/fakes/openai), a separate process
// that lives through the kills. At the end nothing may be left: no sandbox process, cgroup,
// journal entry, live session, or container or file at the fake OpenAI. Prints runs by final
// status (also by provider/agent), run latency percentiles, leaks and the daemon's peak
// memory; exits non-zero on any leak or on a run left unfinished.
//
//   build/bin/load_chaos --runs 1000 --clients 16 --tenants 4 --kills 20      (by hand)
//   build/bin/load_chaos --runs 40 --clients 4 --tenants 2 --kills 2          (CI)
#include <fcntl.h>
#include <grpcpp/grpcpp.h>
#include <signal.h>
#include <sqlite3.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cctype>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <functional>
#include <map>
#include <mutex>
#include <random>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"
#include "common/sha256.h"
#include "nlohmann/json.hpp"
#include "sandgate/v1/labels.h"
#include "sandgate/v1/sandgate.grpc.pb.h"
#include "tests/common/temp_dir.h"
#include "tests/fakes/openai/fake_openai_server.h"
#include "tests/load/leak_checks.h"
#include "tests/sandbox/openai/analyst_scenario.h"

namespace {

using Clock = std::chrono::steady_clock;
using sandgate::v1::Sandgate;
namespace v1 = sandgate::v1;

constexpr uint32_t kUidBase = 370000;  // its own range: no other test's sandboxes count as leaks
constexpr uint32_t kUidCount = 256;
// Known only to the fake OpenAI server and the daemon's key file.
constexpr char kOpenAiKey[] = "sk-load-chaos-fake-key";
constexpr char kInput[] = "statements.csv";

struct Options {
  int runs = 40, clients = 4, tenants = 2, kills = 2;
  bool chaos = true;
};

// The daemon under test, restarted in place by the chaos thread; its openai provider and
// agent use the fake OpenAI server at `openai_base_url`.
class Daemon {
 public:
  Daemon(std::string dir, const std::string& openai_base_url) : dir_(std::move(dir)) {
    nlohmann::json tenants = nlohmann::json::array();
    for (int i = 0; i < 8; ++i) {
      tenants.push_back({{"name", absl::StrCat("tenant", i)},
                         {"token_sha256", sandgate::Sha256::Hex(absl::StrCat("token-", i))},
                         {"quotas", {{"concurrent_runs", 2}, {"live_sessions", 4}}}});
    }
    const std::string key_file = sandgate::testing::WriteKeyFile(dir_, kOpenAiKey);
    nlohmann::json config = {{"listen", "unix:" + dir_ + "/s.sock"},
                             {"state_dir", dir_ + "/state"},
                             {"max_concurrent_runs", 4},
                             {"tenants", tenants},
                             {"defaults", {{"drain_grace_seconds", 30}}},
                             {"local", {{"uid_base", kUidBase}, {"uid_count", kUidCount}}},
                             {"openai",
                              {{"base_url", openai_base_url},
                               {"api_key_file", key_file},
                               {"model", "fake-model"},
                               {"max_turns", 10},
                               // The fake makes a container within 200 ms of the request: a
                               // short window lets a cut create settle before the run ends.
                               {"container_create_settle_seconds", 2}}}};
    std::ofstream(dir_ + "/config.json") << config.dump();
  }
  std::string address() const { return "unix:" + dir_ + "/s.sock"; }
  const std::string& dir() const { return dir_; }

  void Start() {
    std::lock_guard<std::mutex> lock(mu_);
    pid_ = fork();
    if (pid_ == 0) {
      int log = open((dir_ + "/daemon.log").c_str(), O_WRONLY | O_CREAT | O_APPEND, 0644);
      dup2(log, 2);
      dup2(log, 1);
      execl(SANDGATED_PATH, "sandgated", "--config", (dir_ + "/config.json").c_str(), nullptr);
      _exit(127);
    }
    for (int i = 0; i < 200; ++i) {  // ready when the socket answers
      auto stub =
          Sandgate::NewStub(grpc::CreateChannel(address(), grpc::InsecureChannelCredentials()));
      grpc::ClientContext ctx;
      ctx.set_deadline(std::chrono::system_clock::now() + std::chrono::milliseconds(200));
      ctx.AddMetadata("authorization", "Bearer token-0");
      v1::ListRunsRequest req;
      req.set_page_size(1);
      v1::ListRunsResponse resp;
      if (stub->ListRuns(&ctx, req, &resp).ok()) return;
      std::this_thread::sleep_for(std::chrono::milliseconds(50));
    }
    std::fprintf(stderr, "daemon did not start; see %s/daemon.log\n", dir_.c_str());
    std::exit(2);
  }
  // Returns the daemon's peak resident memory (kB) just before it went.
  long Stop(int sig) {
    std::lock_guard<std::mutex> lock(mu_);
    long hwm = PeakKb();
    kill(pid_, sig);
    int status;
    waitpid(pid_, &status, 0);
    pid_ = -1;
    return hwm;
  }
  long PeakKb() {
    std::ifstream in(absl::StrCat("/proc/", pid_, "/status"));
    std::string line;
    while (std::getline(in, line)) {
      long kb;
      if (absl::StartsWith(line, "VmHWM:") &&
          absl::SimpleAtoi(absl::StripAsciiWhitespace(line.substr(6, line.size() - 9)), &kb)) {
        return kb;
      }
    }
    return 0;
  }

 private:
  const std::string dir_;
  std::mutex mu_;
  pid_t pid_ = -1;
};

// Which provider makes a run's sandbox and which agent drives it.
struct Flavor {
  const char* provider;
  const char* agent;
};
constexpr Flavor kLocal = {"local", "reference"};
// The fake's scripted model runs the analysis as hosted commands in the container.
constexpr Flavor kHosted = {"openai", "openai"};
// The fake's scripted model with its shell calls run in a local sandbox.
constexpr Flavor kModelOnLocal = {"local", "openai"};

// When a run is cancelled: at its first command, or as soon as it starts (on the openai
// provider: while its container is being made).
enum class CancelAt { kNever, kFirstCommand, kStart };

struct Stats {
  std::mutex mu;
  std::map<std::string, int> by_status;
  std::map<std::string, int> failed_why;  // FAILED runs by reason, ids and numbers masked
  std::map<std::string, std::map<std::string, int>> by_flavor;  // "provider/agent" -> status
  std::vector<double> latency_ms;
  std::set<std::string> started;
  std::map<std::string, int> rpc_errors;  // "Rpc CODE" -> count
  int sessions = 0, execs = 0, execs_refused = 0, cancels = 0, disconnects = 0;

  void Finished(const std::string& flavor, const std::string& status) {
    std::lock_guard<std::mutex> lock(mu);
    ++by_status[status];
    ++by_flavor[flavor][status];
  }
  void FailedBecause(const std::string& reason) {
    // Words with a digit become '#': "session s1a2b3 ended" and "session s9f8e7 ended" count as
    // one.
    std::string shape;
    for (size_t i = 0; i < reason.size() && shape.size() < 120;) {
      size_t j = i;
      while (j < reason.size() && std::isalnum(static_cast<unsigned char>(reason[j]))) ++j;
      if (j == i) {
        shape += reason[i++];
        continue;
      }
      const std::string word = reason.substr(i, j - i);
      shape += word.find_first_of("0123456789") == std::string::npos ? word : "#";
      i = j;
    }
    std::lock_guard<std::mutex> lock(mu);
    ++failed_why[shape];
  }
};

std::string StatusName(v1::RunStatus s) { return v1::RunStatusLabel(s); }

class Client {
 public:
  Client(int id, const Options& opt, Daemon* daemon, Stats* stats, const std::string& csv,
         std::atomic<int>* remaining)
      : id_(id),
        opt_(opt),
        daemon_(daemon),
        stats_(stats),
        csv_(csv),
        remaining_(remaining),
        rng_(id * 7919 + 1),
        token_(absl::StrCat("token-", id % opt.tenants)) {}

  void Loop() {
    while (remaining_->fetch_sub(1) > 0) {
      // A quarter of the operations go to the fake OpenAI, in the same mix as the local ones.
      const bool openai = std::uniform_int_distribution<int>(0, 3)(rng_) == 0;
      int dice = std::uniform_int_distribution<int>(0, 9)(rng_);
      if (dice < 6) {
        static constexpr Flavor kOpenAiRuns[] = {kHosted, kHosted, kModelOnLocal};
        Run(openai ? kOpenAiRuns[dice % 3] : kLocal, CancelAt::kNever, /*disconnect=*/dice == 5);
      } else if (dice < 8) {
        Run(openai ? kHosted : kLocal,
            openai && dice == 6 ? CancelAt::kStart : CancelAt::kFirstCommand, false);
      } else {
        Session(openai ? "openai" : "local");
      }
    }
  }

 private:
  std::unique_ptr<Sandgate::Stub> Stub() {
    return Sandgate::NewStub(
        grpc::CreateChannel(daemon_->address(), grpc::InsecureChannelCredentials()));
  }
  void Prepare(grpc::ClientContext* ctx, int seconds = 120) {
    ctx->AddMetadata("authorization", "Bearer " + token_);
    ctx->set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(seconds));
  }
  void Error(const char* rpc, const grpc::Status& st) {
    std::lock_guard<std::mutex> lock(stats_->mu);
    ++stats_->rpc_errors[absl::StrCat(
        rpc, " ", absl::StatusCodeToString(static_cast<absl::StatusCode>(st.error_code())))];
  }

  // RunAnalysis (in the kept session `session_id` when given), retried with the same
  // idempotency key across daemon restarts; then followed (resuming after disconnects and
  // restarts) until run.finished.
  void Run(const Flavor& flavor, CancelAt cancel, bool disconnect,
           const std::string& session_id = "") {
    auto t0 = Clock::now();
    const std::string label = absl::StrCat(flavor.provider, "/", flavor.agent,
                                           session_id.empty() ? "" : " (kept session)");
    v1::RunAnalysisRequest req;
    req.set_idempotency_key(absl::StrCat("c", id_, "-", counter_++));
    req.set_provider(flavor.provider);
    req.set_agent(flavor.agent);
    req.set_session_id(session_id);
    auto* in = req.add_inputs();
    in->set_name(kInput);
    in->set_content(csv_);
    // A hosted container takes no setup commands; the model's own commands are cancelled there.
    if (cancel != CancelAt::kNever && std::string(flavor.provider) == "local") {
      req.mutable_sandbox()->add_setup_commands("sleep 5");
    }
    v1::Run run;
    for (int attempt = 0;; ++attempt) {
      grpc::ClientContext ctx;
      Prepare(&ctx);
      grpc::Status st = Stub()->RunAnalysis(&ctx, req, &run);
      if (st.ok()) break;
      Error("RunAnalysis", st);
      // Only a daemon that is down or restarting is worth waiting for. A kept session may
      // have been lost in a restart; any other refusal is a failure of the test.
      if (st.error_code() != grpc::StatusCode::UNAVAILABLE || attempt > 100) {
        const bool lost =
            !session_id.empty() && st.error_code() == grpc::StatusCode::FAILED_PRECONDITION;
        stats_->Finished(label, lost ? "SESSION_LOST" : "REFUSED");
        return;
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(200));
    }
    {
      std::lock_guard<std::mutex> lock(stats_->mu);
      stats_->started.insert(run.id());
    }
    int64_t last = 0;
    bool cancelled = false;
    for (int attempt = 0; attempt < 300; ++attempt) {
      grpc::ClientContext ctx;
      Prepare(&ctx);
      v1::StreamEventsRequest sreq;
      sreq.set_run_id(run.id());
      sreq.set_after_seq(last);
      sreq.set_follow(true);
      auto reader = Stub()->StreamEvents(&ctx, sreq);
      v1::Event e;
      while (reader->Read(&e)) {
        if (e.seq() == 0) continue;
        if (e.seq() != last + 1) {
          std::fprintf(stderr, "run %s: seq %lld after %lld\n", run.id().c_str(),
                       static_cast<long long>(e.seq()), static_cast<long long>(last));
          stats_->Finished(label, "SEQ_GAP");
        }
        last = e.seq();
        if (e.has_run_finished()) {
          double ms = std::chrono::duration<double, std::milli>(Clock::now() - t0).count();
          stats_->Finished(label, StatusName(e.run_finished().status()));
          if (e.run_finished().status() == v1::RUN_STATUS_FAILED)
            stats_->FailedBecause(e.run_finished().reason());
          {
            std::lock_guard<std::mutex> lock(stats_->mu);
            stats_->latency_ms.push_back(ms);
          }
          ctx.TryCancel();
          reader->Finish();
          return;
        }
        const bool cancel_now = cancel == CancelAt::kStart
                                    ? e.has_run_started()
                                    : cancel == CancelAt::kFirstCommand && e.has_command_started();
        if (cancel_now && !cancelled) {
          grpc::ClientContext cctx;
          Prepare(&cctx);
          v1::CancelRunRequest creq;
          creq.set_run_id(run.id());
          v1::Run r;
          if (Stub()->CancelRun(&cctx, creq, &r).ok()) {
            cancelled = true;
            std::lock_guard<std::mutex> lock(stats_->mu);
            ++stats_->cancels;
          }
        }
        if (disconnect && last == 3) {  // walk away mid-run, come back later
          disconnect = false;
          ctx.TryCancel();
          std::lock_guard<std::mutex> lock(stats_->mu);
          ++stats_->disconnects;
          break;
        }
      }
      reader->Finish();
      std::this_thread::sleep_for(std::chrono::milliseconds(100));
    }
    stats_->Finished(label, "UNFINISHED");
  }

  // A kept session: on the local provider three execs (the last leaves a process behind);
  // on the openai provider an exec (refused: a hosted container runs only the model's
  // commands) and a run of the openai agent in it.
  void Session(const std::string& provider) {
    v1::CreateSessionRequest req;
    req.set_provider(provider);
    req.mutable_sandbox()->mutable_idle_timeout()->set_seconds(30);
    v1::Session s;
    {
      grpc::ClientContext ctx;
      Prepare(&ctx);
      grpc::Status st = Stub()->CreateSession(&ctx, req, &s);
      if (!st.ok()) {
        Error("CreateSession", st);
        return;
      }
    }
    {
      std::lock_guard<std::mutex> lock(stats_->mu);
      ++stats_->sessions;
    }
    const bool hosted = provider == "openai";
    for (int i = 0; i < (hosted ? 1 : 3); ++i) {
      grpc::ClientContext ctx;
      Prepare(&ctx, 30);
      v1::ExecRequest ereq;
      ereq.set_session_id(s.id());
      ereq.set_command(i == 2 ? "setsid nohup sleep 300 >/dev/null 2>&1 & echo left"
                              : "echo hi; ls");
      auto reader = Stub()->Exec(&ctx, ereq);
      v1::ExecResponse r;
      while (reader->Read(&r)) {
      }
      grpc::Status st = reader->Finish();
      std::lock_guard<std::mutex> lock(stats_->mu);
      if (st.ok()) ++stats_->execs;
      if (st.error_code() == grpc::StatusCode::UNIMPLEMENTED) ++stats_->execs_refused;
    }
    if (hosted) Run(kHosted, CancelAt::kNever, /*disconnect=*/false, s.id());
    // Half the sessions are closed, the rest are abandoned to the idle reaper (or a kill).
    if (std::uniform_int_distribution<int>(0, 1)(rng_)) {
      grpc::ClientContext ctx;
      Prepare(&ctx);
      v1::CloseSessionRequest creq;
      creq.set_session_id(s.id());
      v1::Session closed;
      grpc::Status st = Stub()->CloseSession(&ctx, creq, &closed);
      if (!st.ok()) Error("CloseSession", st);
    }
  }

  const int id_;
  const Options opt_;
  Daemon* const daemon_;
  Stats* const stats_;
  const std::string& csv_;
  std::atomic<int>* const remaining_;
  std::mt19937 rng_;
  const std::string token_;
  int counter_ = 0;
};

// Runs `sql` on the daemon's database, read only; `row` sees each result row.
void Query(const std::string& db_path, const char* sql,
           const std::function<void(sqlite3_stmt*)>& row) {
  sqlite3* db = nullptr;
  sqlite3_open_v2(db_path.c_str(), &db, SQLITE_OPEN_READONLY, nullptr);
  sqlite3_stmt* st = nullptr;
  if (sqlite3_prepare_v2(db, sql, -1, &st, nullptr) == SQLITE_OK) {
    while (sqlite3_step(st) == SQLITE_ROW) row(st);
  }
  sqlite3_finalize(st);
  sqlite3_close(db);
}

int Count(const std::string& db_path, const char* sql) {
  int n = -1;
  Query(db_path, sql, [&](sqlite3_stmt* st) { n = sqlite3_column_int(st, 0); });
  return n;
}

// The sessions this test's daemon may have made: the kept ones, and each run's own ("s" and
// the hex of the run id), all stored before their sandbox exists.
std::set<std::string> OurSessions(const std::string& db_path) {
  std::set<std::string> ids;
  auto text = [](sqlite3_stmt* st) {
    return std::string(reinterpret_cast<const char*>(sqlite3_column_text(st, 0)));
  };
  Query(db_path, "SELECT id FROM sessions", [&](sqlite3_stmt* st) { ids.insert(text(st)); });
  Query(db_path, "SELECT id FROM runs", [&](sqlite3_stmt* st) {
    std::string run = text(st);
    if (absl::StartsWith(run, "run-")) ids.insert("s" + run.substr(4));
  });
  return ids;
}

}  // namespace

int main(int argc, char** argv) {
  Options opt;
  for (int i = 1; i + 1 < argc || (i < argc && std::string(argv[i]) == "--no-chaos"); ++i) {
    std::string a = argv[i];
    if (a == "--no-chaos") {
      opt.chaos = false;
      continue;
    }
    int v = std::atoi(argv[++i]);
    if (a == "--runs")
      opt.runs = v;
    else if (a == "--clients")
      opt.clients = v;
    else if (a == "--tenants")
      opt.tenants = std::min(v, 8);
    else if (a == "--kills")
      opt.kills = v;
  }
  if (!opt.chaos) opt.kills = 0;
  char tmpl[] = "/tmp/sg-load-XXXXXX";
  const std::string dir = mkdtemp(tmpl);
  // The fake OpenAI outlives every daemon incarnation: what a killed daemon left there is
  // for the next one's sweep.
  sandgate::testing::FakeOpenAiServer fake(kOpenAiKey);
  if (!fake.Start(dir + "/fake_openai.log")) {
    std::fprintf(stderr, "the fake OpenAI server did not start; see %s/fake_openai.log\n",
                 dir.c_str());
    return 2;
  }
  fake.Scenario(sandgate::testing::AnalystTurns(kInput));
  // Making a container takes upstream a while (the fake, no time at all): the window in which
  // a kill or a cancel may leave the daemon without the id of a container upstream still
  // makes. (The prefix also slows uploads into containers.)
  fake.Fault({{"path_prefix", "/v1/containers"},
              {"method", "POST"},
              {"delay_ms", 200},
              {"times", 1 << 30}});
  Daemon daemon(dir, fake.base_url());
  const std::string csv = sandgate::testing::SampleStatementsCsv();
  daemon.Start();
  auto t0 = Clock::now();

  Stats stats;
  std::atomic<int> remaining{opt.runs};
  std::atomic<bool> done{false};
  long peak_kb = 0;
  int kills = 0;
  std::thread chaos([&] {
    std::mt19937 rng(42);
    while (!done && kills < opt.kills) {
      // A kill every 0.2–1.2 s: the full size (about 40 s) sees all twenty, mid-run and mid-queue.
      std::this_thread::sleep_for(
          std::chrono::milliseconds(std::uniform_int_distribution<int>(200, 1200)(rng)));
      if (done) break;
      peak_kb = std::max(peak_kb, daemon.Stop(SIGKILL));
      ++kills;
      daemon.Start();
    }
  });
  std::vector<std::thread> clients;
  for (int i = 0; i < opt.clients; ++i) {
    clients.emplace_back([&, i] { Client(i, opt, &daemon, &stats, csv, &remaining).Loop(); });
  }
  for (auto& t : clients) t.join();
  done = true;
  chaos.join();
  double seconds = std::chrono::duration<double>(Clock::now() - t0).count();
  peak_kb = std::max(peak_kb, daemon.Stop(SIGTERM));  // drain: closes what is left

  std::string db = daemon.dir() + "/state/state.db";
  int leaked_processes = sandgate::load::LiveProcessesWithUids(kUidBase, kUidCount);
  int leaked_cgroups = sandgate::load::LeakedCgroups(OurSessions(db));
  int journal = Count(db, "SELECT COUNT(*) FROM journal");
  int live_sessions = Count(db, "SELECT COUNT(*) FROM sessions WHERE status = 1");
  int unfinished_runs = Count(db, "SELECT COUNT(*) FROM runs WHERE status IN (1, 2)");
  // Upstream, after the last daemon swept what its predecessors left and drained: every
  // container and file sandgate made must be deleted.
  nlohmann::json upstream = fake.State();
  const bool upstream_known = upstream["containers"].is_array() && upstream["files"].is_array();
  if (!upstream_known)
    std::fprintf(stderr, "fake OpenAI state unreadable: %s\n", upstream.dump().c_str());
  const int upstream_containers =
      upstream_known ? static_cast<int>(upstream["containers"].size()) : -1;
  const int upstream_files = upstream_known ? static_cast<int>(upstream["files"].size()) : -1;
  if (upstream_known) {
    for (const auto& c : upstream["containers"])
      std::fprintf(stderr, "leaked upstream container %s\n", c.dump().c_str());
    for (const auto& f : upstream["files"])
      std::fprintf(stderr, "leaked upstream file %s\n", f.dump().c_str());
  }
  int containers_created = 0, responses = 0;
  for (const auto& r : upstream.value("requests", nlohmann::json::array())) {
    if (r.value("method", "") != "POST" || r.value("status", 0) != 200) continue;
    containers_created += r.value("path", "") == "/v1/containers" ? 1 : 0;
    responses += r.value("path", "") == "/v1/responses" ? 1 : 0;
  }

  std::printf(
      "load_chaos: %d operations planned, %d clients, %d tenants, %d daemon kills, %.1f s\n",
      opt.runs, opt.clients, opt.tenants, kills, seconds);
  std::printf("runs started %zu; by final status:", stats.started.size());
  for (const auto& [status, n] : stats.by_status) std::printf(" %s %d", status.c_str(), n);
  for (const auto& [flavor, statuses] : stats.by_flavor) {
    std::printf("\n  %s:", flavor.c_str());
    for (const auto& [status, n] : statuses) std::printf(" %s %d", status.c_str(), n);
  }
  for (const auto& [why, n] : stats.failed_why) std::printf("\n  FAILED %d: %s", n, why.c_str());
  std::printf("\nrun latency (RunAnalysis to run.finished): p50 %.0f ms, p99 %.0f ms\n",
              sandgate::load::Percentile(stats.latency_ms, 0.5),
              sandgate::load::Percentile(stats.latency_ms, 0.99));
  std::printf(
      "sessions %d, execs %d (hosted, refused: %d), cancels %d, disconnects %d, rpc errors:",
      stats.sessions, stats.execs, stats.execs_refused, stats.cancels, stats.disconnects);
  for (const auto& [what, n] : stats.rpc_errors) std::printf(" %s %d", what.c_str(), n);
  std::printf("\n");
  std::printf("fake OpenAI: %d containers created, %d responses\n", containers_created, responses);
  std::printf(
      "leaks: sandbox processes %d, cgroups %d, journal entries %d, live sessions %d, unfinished "
      "runs %d, "
      "upstream containers %d, upstream files %d\n",
      leaked_processes, leaked_cgroups, journal, live_sessions, unfinished_runs,
      upstream_containers, upstream_files);
  std::printf("daemon peak memory (VmHWM, max over incarnations): %.1f MiB\n", peak_kb / 1024.0);
  bool ok = leaked_processes == 0 && leaked_cgroups == 0 && journal == 0 && live_sessions == 0 &&
            unfinished_runs == 0 && upstream_containers == 0 && upstream_files == 0 &&
            stats.by_status.count("UNFINISHED") == 0 && stats.by_status.count("SEQ_GAP") == 0 &&
            stats.by_status.count("REFUSED") == 0;
  std::printf("%d passed, %d failed\n", ok ? 1 : 0, ok ? 0 : 1);
  if (ok) std::system(("rm -rf " + daemon.dir()).c_str());
  return ok ? 0 : 1;
}
