// Load and chaos: many clients of several tenants doing runs, sessions, execs, cancels and
// disconnects against one real sandgated, which (in chaos mode) is SIGKILLed and restarted at
// random points. At the end nothing may be left: no sandbox process, cgroup, journal entry or
// live session. Prints runs by final status, run latency percentiles, leaks and the daemon's
// peak memory; exits non-zero on any leak or on a run left unfinished.
//
//   build/bin/load_chaos --runs 1000 --clients 16 --tenants 4 --kills 20      (by hand)
//   build/bin/load_chaos --runs 40 --clients 4 --tenants 2 --kills 2          (CI)
#include <dirent.h>
#include <fcntl.h>
#include <signal.h>
#include <sqlite3.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <map>
#include <mutex>
#include <random>
#include <set>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include <grpcpp/grpcpp.h>

#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "common/sha256.h"
#include "nlohmann/json.hpp"
#include "sandgate/v1/sandgate.grpc.pb.h"

namespace {

using Clock = std::chrono::steady_clock;
using sandgate::v1::Sandgate;
namespace v1 = sandgate::v1;

constexpr uint32_t kUidBase = 330000;
constexpr uint32_t kUidCount = 256;

struct Options {
  int runs = 40, clients = 4, tenants = 2, kills = 2;
  bool chaos = true;
};

std::string ReadFile(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

// The daemon under test, restarted in place by the chaos thread.
class Daemon {
 public:
  explicit Daemon(std::string dir) : dir_(std::move(dir)) {
    nlohmann::json tenants = nlohmann::json::array();
    for (int i = 0; i < 8; ++i) {
      tenants.push_back({{"name", absl::StrCat("tenant", i)},
                         {"token_sha256", sandgate::Sha256::Hex(absl::StrCat("token-", i))},
                         {"quotas", {{"concurrent_runs", 2}, {"live_sessions", 4}}}});
    }
    nlohmann::json config = {{"listen", "unix:" + dir_ + "/s.sock"},
                             {"state_dir", dir_ + "/state"},
                             {"max_concurrent_runs", 4},
                             {"tenants", tenants},
                             {"defaults", {{"drain_grace_seconds", 30}}},
                             {"local", {{"uid_base", kUidBase}, {"uid_count", kUidCount}}}};
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
      auto stub = Sandgate::NewStub(grpc::CreateChannel(address(), grpc::InsecureChannelCredentials()));
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

struct Stats {
  std::mutex mu;
  std::map<std::string, int> by_status;
  std::vector<double> latency_ms;
  std::set<std::string> started;
  int rpc_errors = 0, sessions = 0, execs = 0, cancels = 0, disconnects = 0;
};

std::string StatusName(v1::RunStatus s) { return v1::RunStatus_Name(s); }

class Client {
 public:
  Client(int id, const Options& opt, Daemon* daemon, Stats* stats, const std::string& csv,
         std::atomic<int>* remaining)
      : id_(id), opt_(opt), daemon_(daemon), stats_(stats), csv_(csv), remaining_(remaining),
        rng_(id * 7919 + 1), token_(absl::StrCat("token-", id % opt.tenants)) {}

  void Loop() {
    while (remaining_->fetch_sub(1) > 0) {
      int dice = std::uniform_int_distribution<int>(0, 9)(rng_);
      if (dice < 6) {
        Run(/*cancel=*/false, /*disconnect=*/dice == 5);
      } else if (dice < 8) {
        Run(/*cancel=*/true, false);
      } else {
        Session();
      }
    }
  }

 private:
  std::unique_ptr<Sandgate::Stub> Stub() {
    return Sandgate::NewStub(grpc::CreateChannel(daemon_->address(), grpc::InsecureChannelCredentials()));
  }
  void Prepare(grpc::ClientContext* ctx, int seconds = 120) {
    ctx->AddMetadata("authorization", "Bearer " + token_);
    ctx->set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(seconds));
  }
  void Error() {
    std::lock_guard<std::mutex> lock(stats_->mu);
    ++stats_->rpc_errors;
  }

  // RunAnalysis, retried with the same idempotency key across daemon restarts; then followed
  // (resuming after disconnects and restarts) until run.finished.
  void Run(bool cancel, bool disconnect) {
    auto t0 = Clock::now();
    v1::RunAnalysisRequest req;
    req.set_idempotency_key(absl::StrCat("c", id_, "-", counter_++));
    auto* in = req.add_inputs();
    in->set_name("statements.csv");
    in->set_content(csv_);
    if (cancel) req.mutable_sandbox()->add_setup_commands("sleep 5");
    v1::Run run;
    for (int attempt = 0;; ++attempt) {
      grpc::ClientContext ctx;
      Prepare(&ctx);
      grpc::Status st = Stub()->RunAnalysis(&ctx, req, &run);
      if (st.ok()) break;
      Error();
      if (attempt > 100) return;
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
          std::lock_guard<std::mutex> lock(stats_->mu);
          ++stats_->by_status["SEQ_GAP"];
        }
        last = e.seq();
        if (e.has_run_finished()) {
          double ms = std::chrono::duration<double, std::milli>(Clock::now() - t0).count();
          std::lock_guard<std::mutex> lock(stats_->mu);
          ++stats_->by_status[StatusName(e.run_finished().status())];
          stats_->latency_ms.push_back(ms);
          ctx.TryCancel();
          reader->Finish();
          return;
        }
        if (cancel && !cancelled && e.has_command_started()) {
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
    std::lock_guard<std::mutex> lock(stats_->mu);
    ++stats_->by_status["UNFINISHED"];
  }

  void Session() {
    v1::CreateSessionRequest req;
    req.mutable_sandbox()->mutable_idle_timeout()->set_seconds(30);
    v1::Session s;
    {
      grpc::ClientContext ctx;
      Prepare(&ctx);
      if (!Stub()->CreateSession(&ctx, req, &s).ok()) {
        Error();
        return;
      }
    }
    {
      std::lock_guard<std::mutex> lock(stats_->mu);
      ++stats_->sessions;
    }
    for (int i = 0; i < 3; ++i) {
      grpc::ClientContext ctx;
      Prepare(&ctx, 30);
      v1::ExecRequest ereq;
      ereq.set_session_id(s.id());
      ereq.set_command(i == 2 ? "setsid nohup sleep 300 >/dev/null 2>&1 & echo left" : "echo hi; ls");
      auto reader = Stub()->Exec(&ctx, ereq);
      v1::ExecResponse r;
      while (reader->Read(&r)) {
      }
      if (reader->Finish().ok()) {
        std::lock_guard<std::mutex> lock(stats_->mu);
        ++stats_->execs;
      }
    }
    // Half the sessions are closed, the rest are abandoned to the idle reaper (or a kill).
    if (std::uniform_int_distribution<int>(0, 1)(rng_)) {
      grpc::ClientContext ctx;
      Prepare(&ctx);
      v1::CloseSessionRequest creq;
      creq.set_session_id(s.id());
      v1::Session closed;
      if (!Stub()->CloseSession(&ctx, creq, &closed).ok()) Error();
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

// Live (non-zombie) processes running as one of the daemon's sandbox uids.
int LeakedProcesses() {
  int n = 0;
  DIR* d = opendir("/proc");
  while (dirent* e = readdir(d)) {
    int pid;
    if (!absl::SimpleAtoi(e->d_name, &pid)) continue;
    std::ifstream in(absl::StrCat("/proc/", pid, "/status"));
    std::string line;
    bool zombie = false;
    while (std::getline(in, line)) {
      if (absl::StartsWith(line, "State:") && absl::StrContains(line, "zombie")) zombie = true;
      if (absl::StartsWith(line, "Uid:") && !zombie) {
        std::vector<std::string> f = absl::StrSplit(line, absl::ByAnyChar("\t "), absl::SkipEmpty());
        uint32_t uid;
        if (f.size() > 1 && absl::SimpleAtoi(f[1], &uid) && uid >= kUidBase && uid < kUidBase + kUidCount) ++n;
      }
    }
  }
  closedir(d);
  return n;
}

// Session cgroup directories anywhere in the cgroup mounts.
std::set<std::string> SessionCgroups() {
  std::set<std::string> dirs;
  FILE* p = popen("find /sys/fs/cgroup -maxdepth 7 -type d -name 'sandgate-s*' 2>/dev/null", "r");
  char line[4096];
  while (p && fgets(line, sizeof(line), p)) dirs.insert(line);
  if (p) pclose(p);
  return dirs;
}

int Count(const std::string& db_path, const char* sql) {
  sqlite3* db = nullptr;
  sqlite3_open_v2(db_path.c_str(), &db, SQLITE_OPEN_READONLY, nullptr);
  sqlite3_stmt* st = nullptr;
  int n = -1;
  if (sqlite3_prepare_v2(db, sql, -1, &st, nullptr) == SQLITE_OK && sqlite3_step(st) == SQLITE_ROW) {
    n = sqlite3_column_int(st, 0);
  }
  sqlite3_finalize(st);
  sqlite3_close(db);
  return n;
}

double Percentile(std::vector<double> v, double p) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  return v[std::min(v.size() - 1, static_cast<size_t>(p * v.size()))];
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
    if (a == "--runs") opt.runs = v;
    else if (a == "--clients") opt.clients = v;
    else if (a == "--tenants") opt.tenants = std::min(v, 8);
    else if (a == "--kills") opt.kills = v;
  }
  if (!opt.chaos) opt.kills = 0;
  char tmpl[] = "/tmp/sg-load-XXXXXX";
  Daemon daemon(mkdtemp(tmpl));
  std::string csv = ReadFile(std::string(SANDGATE_SOURCE_DIR) + "/tests/data/northstar_cloud_financial_statements.csv");
  // Other programs on this machine may have left session cgroups; only new ones count.
  const std::set<std::string> cgroups_before = SessionCgroups();
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
      std::this_thread::sleep_for(std::chrono::milliseconds(std::uniform_int_distribution<int>(200, 1200)(rng)));
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
  int leaked_processes = LeakedProcesses();
  int leaked_cgroups = 0;
  for (const std::string& dir : SessionCgroups()) {
    if (!cgroups_before.count(dir)) {
      ++leaked_cgroups;
      std::fprintf(stderr, "leaked cgroup %s", dir.c_str());
    }
  }
  int journal = Count(db, "SELECT COUNT(*) FROM journal");
  int live_sessions = Count(db, "SELECT COUNT(*) FROM sessions WHERE status = 1");
  int unfinished_runs = Count(db, "SELECT COUNT(*) FROM runs WHERE status IN (1, 2)");

  std::printf("load_chaos: %d operations planned, %d clients, %d tenants, %d daemon kills, %.1f s\n",
              opt.runs, opt.clients, opt.tenants, kills, seconds);
  std::printf("runs started %zu; by final status:", stats.started.size());
  for (const auto& [status, n] : stats.by_status) std::printf(" %s %d", status.c_str(), n);
  std::printf("\nrun latency (RunAnalysis to run.finished): p50 %.0f ms, p99 %.0f ms\n",
              Percentile(stats.latency_ms, 0.5), Percentile(stats.latency_ms, 0.99));
  std::printf("sessions %d, execs %d, cancels %d, disconnects %d, rpc errors (retried) %d\n", stats.sessions,
              stats.execs, stats.cancels, stats.disconnects, stats.rpc_errors);
  std::printf("leaks: sandbox processes %d, cgroups %d, journal entries %d, live sessions %d, unfinished runs %d\n",
              leaked_processes, leaked_cgroups, journal, live_sessions, unfinished_runs);
  std::printf("daemon peak memory (VmHWM, max over incarnations): %.1f MiB\n", peak_kb / 1024.0);
  bool ok = leaked_processes == 0 && leaked_cgroups == 0 && journal == 0 && live_sessions == 0 &&
            unfinished_runs == 0 && stats.by_status.count("UNFINISHED") == 0 && stats.by_status.count("SEQ_GAP") == 0;
  std::printf("%d passed, %d failed\n", ok ? 1 : 0, ok ? 0 : 1);
  if (ok) std::system(("rm -rf " + daemon.dir()).c_str());
  return ok ? 0 : 1;
}
