// Kept sessions through the gRPC API, as a caller sees them: starts sandgated on a temporary
// Unix socket and drives it with a C++ gRPC client (one channel, connected before anything is
// timed), each figure beside its baseline measured in the same run, alternating with it:
//
//   1. CreateSession → first Exec(true) done, cold (no warm pool), against a bare
//      `bwrap <the provider's flags> true` (tests/bench/baselines.h); target ≤ 1.3×.
//   2. The same with a warm pool of the default shape: target ≤ 0.5× bare bwrap.
//   3. Exec(true) in a live session against fork+exec+wait of /bin/true from this process;
//      target ≤ +1 ms.
//   4. `--burst` CreateSession calls at once (one thread each), until all have returned:
//      cold ≤ 1 s, and with a warm pool of `--burst` ≤ 100 ms.
//
//   build/bin/bench_sessions [--runs 30] [--burst 100] [--warm 0] [--daemon PATH]  (as root)
//
// Prints medians in ms and the ratios. Not a test: nothing asserts timing; the exit code is
// 0 when every call succeeded. Between warm iterations the bench waits until the daemon logs
// that the pool is full again (`warm_pool.filled`), so every warm figure is a warm hit.
#include <fcntl.h>
#include <grpcpp/grpcpp.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <functional>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "sandgate/v1/sandgate.grpc.pb.h"
#include "tests/bench/baselines.h"

namespace sandgate::bench {
namespace {

using SteadyClock = std::chrono::steady_clock;

double MsSince(SteadyClock::time_point start) {
  return std::chrono::duration<double, std::milli>(SteadyClock::now() - start).count();
}

// Every daemon of this bench uses its own uids, above the default pool, so a sandgated
// running on the host is not disturbed; the bare baseline uses the uid just above them.
constexpr uint32_t kUidBase = 190000;
constexpr uint32_t kUidCount = 400;

// A sandgated on a temporary socket, killed (SIGTERM, drained) when destroyed.
class Daemon {
 public:
  Daemon(const std::string& binary, const std::string& extra_config) {
    char tmpl[] = "/tmp/sg-sbench-XXXXXX";
    dir_ = mkdtemp(tmpl);
    socket_ = dir_ + "/s.sock";
    log_ = dir_ + "/daemon.log";
    const std::string config = dir_ + "/config.json";
    std::ofstream(config) << "{\"listen\": \"unix:" << socket_ << "\", \"state_dir\": \"" << dir_
                          << "/state\", \"log_level\": \"info\", \"max_sandboxes\": 256, "
                          << "\"max_concurrent_execs\": 128, \"local\": {\"uid_base\": " << kUidBase
                          << ", \"uid_count\": " << kUidCount << "}" << extra_config << "}";
    pid_ = fork();
    if (pid_ == 0) {
      int null = open("/dev/null", O_WRONLY);
      int log = open(log_.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0600);
      dup2(null, 1);
      dup2(log, 2);
      execl(binary.c_str(), "sandgated", "--config", config.c_str(), nullptr);
      _exit(127);
    }
    for (int i = 0; i < 200 && access(socket_.c_str(), F_OK) != 0; ++i) {
      std::this_thread::sleep_for(std::chrono::milliseconds(50));
    }
    channel_ = grpc::CreateChannel("unix:" + socket_, grpc::InsecureChannelCredentials());
    // Connected before anything is timed: the channel's setup is not a session's cost.
    if (!channel_->WaitForConnected(std::chrono::system_clock::now() + std::chrono::seconds(10))) {
      std::fprintf(stderr, "bench: the daemon did not start; its log: %s\n", log_.c_str());
      std::exit(1);
    }
    stub_ = v1::Sandgate::NewStub(channel_);
  }
  ~Daemon() {
    kill(pid_, SIGTERM);
    waitpid(pid_, nullptr, 0);
    std::system(("rm -rf " + dir_).c_str());
  }
  v1::Sandgate::Stub& stub() { return *stub_; }

  // How many lines of the daemon's log contain `needle`.
  int LogCount(const std::string& needle) const {
    std::ifstream in(log_);
    std::string line;
    int n = 0;
    while (std::getline(in, line)) n += line.find(needle) != std::string::npos;
    return n;
  }
  // Waits (polling the log; a benchmark, not a test) until `needle` has appeared `n` times.
  void AwaitLog(const std::string& needle, int n) const {
    for (int i = 0; i < 6000 && LogCount(needle) < n; ++i) {
      std::this_thread::sleep_for(std::chrono::milliseconds(5));
    }
    if (LogCount(needle) < n) {
      std::fprintf(stderr, "bench: no %d× %s in %s\n", n, needle.c_str(), log_.c_str());
      std::exit(1);
    }
  }

 private:
  std::string dir_, socket_, log_;
  pid_t pid_ = -1;
  std::shared_ptr<grpc::Channel> channel_;
  std::unique_ptr<v1::Sandgate::Stub> stub_;
};

[[noreturn]] void Fail(const grpc::Status& st, const char* what) {
  std::fprintf(stderr, "bench: %s: %s\n", what, st.error_message().c_str());
  std::exit(1);
}

std::string CreateSession(v1::Sandgate::Stub& stub) {
  grpc::ClientContext ctx;
  v1::CreateSessionRequest req;
  v1::Session s;
  grpc::Status st = stub.CreateSession(&ctx, req, &s);
  if (!st.ok()) Fail(st, "CreateSession");
  return s.id();
}

void ExecTrue(v1::Sandgate::Stub& stub, const std::string& session) {
  grpc::ClientContext ctx;
  v1::ExecRequest req;
  req.set_session_id(session);
  req.add_argv("true");
  auto reader = stub.Exec(&ctx, req);
  v1::ExecResponse r;
  bool ok = false;
  while (reader->Read(&r)) {
    if (r.has_finished()) ok = r.finished().exit_code() == 0;
  }
  grpc::Status st = reader->Finish();
  if (!st.ok()) Fail(st, "Exec");
  if (!ok) Fail(grpc::Status(grpc::StatusCode::INTERNAL, "true did not exit 0"), "Exec");
}

void CloseSession(v1::Sandgate::Stub& stub, const std::string& session) {
  grpc::ClientContext ctx;
  v1::CloseSessionRequest req;
  req.set_session_id(session);
  v1::Session s;
  grpc::Status st = stub.CloseSession(&ctx, req, &s);
  if (!st.ok()) Fail(st, "CloseSession");
}

// CreateSession → first Exec(true), and the bare baseline, alternating. `before_each` runs
// untimed before each sandgate iteration (the warm bench waits for the refill there).
void CreateFirstExec(Daemon& d, BareBwrap& bare, int runs,
                     const std::function<void(int)>& before_each, std::vector<double>* sandgate,
                     std::vector<double>* baseline) {
  for (int i = 0; i < runs; ++i) {
    baseline->push_back(bare.Run());
    before_each(i);
    const auto start = SteadyClock::now();
    const std::string id = CreateSession(d.stub());
    ExecTrue(d.stub(), id);
    sandgate->push_back(MsSince(start));
    CloseSession(d.stub(), id);
  }
}

// `n` CreateSession at once; ms until the last returned.
double Burst(Daemon& d, int n) {
  std::vector<std::string> ids(n);
  std::atomic<bool> go{false};
  std::vector<std::thread> threads;
  for (int i = 0; i < n; ++i) {
    threads.emplace_back([&, i] {
      while (!go.load()) std::this_thread::yield();
      ids[i] = CreateSession(d.stub());
    });
  }
  std::this_thread::sleep_for(std::chrono::milliseconds(100));  // every thread waiting
  const auto start = SteadyClock::now();
  go = true;
  for (auto& t : threads) t.join();
  const double ms = MsSince(start);
  for (const std::string& id : ids) CloseSession(d.stub(), id);
  return ms;
}

void Row(const char* what, double sandgate, double baseline, const std::string& result,
         const char* target) {
  std::printf("| %-44s | %9.2f | %9.2f | %-10s | %-9s |\n", what, sandgate, baseline,
              result.c_str(), target);
}

int Main(int argc, char** argv) {
  int runs = 30, burst = 100;
  bool warm_pool = true;
  std::string binary = SANDGATED_PATH;
  for (int i = 1; i + 1 < argc; i += 2) {
    const std::string flag = argv[i];
    if (flag == "--runs") {
      runs = std::max(1, std::atoi(argv[i + 1]));
    } else if (flag == "--burst") {
      burst = std::max(1, std::atoi(argv[i + 1]));
    } else if (flag == "--warm") {
      warm_pool = std::atoi(argv[i + 1]) != 0;
    } else if (flag == "--daemon") {
      binary = argv[i + 1];
    } else {
      std::fprintf(stderr,
                   "usage: bench_sessions [--runs N] [--burst N] [--warm 0|1] [--daemon PATH]\n");
      return 2;
    }
  }
  BareBwrap bare("/run/sandgate-sandboxes", kUidBase + kUidCount, SANDGATE_BENCH_INIT_PATH);

  std::vector<double> cold, cold_base, exec, fork_exec, warm, warm_base;
  std::vector<double> bursts_cold, bursts_warm;
  {
    Daemon d(binary, "");
    CloseSession(d.stub(), CreateSession(d.stub()));  // warm-up: page cache, first sandbox
    bare.Run();
    CreateFirstExec(
        d, bare, runs, [](int) {}, &cold, &cold_base);
    const std::string id = CreateSession(d.stub());
    for (int i = 0; i < 3 * runs; ++i) {
      fork_exec.push_back(ForkExecTrue());
      const auto start = SteadyClock::now();
      ExecTrue(d.stub(), id);
      exec.push_back(MsSince(start));
    }
    CloseSession(d.stub(), id);
    for (int i = 0; i < 3; ++i) bursts_cold.push_back(Burst(d, burst));
  }
  if (warm_pool) {
    // One shape, the default sandbox: what an empty CreateSessionRequest asks for.
    Daemon d(binary, absl::StrCat(", \"warm_pool\": [{\"size\": ", burst, "}]"));
    int filled = 1;
    d.AwaitLog("warm_pool.filled", filled);
    CreateFirstExec(
        d, bare, runs, [&](int) { d.AwaitLog("warm_pool.filled", filled++); }, &warm, &warm_base);
    for (int i = 0; i < 3; ++i) {
      d.AwaitLog("warm_pool.filled", filled++);
      bursts_warm.push_back(Burst(d, burst));
    }
  }

  std::printf("bench_sessions: %d runs, bursts of %d, medians in ms\n\n", runs, burst);
  std::printf("| %-44s | %9s | %9s | %-10s | %-9s |\n", "measure", "sandgate", "baseline", "result",
              "target");
  std::printf(
      "|----------------------------------------------|----------:|----------:|"
      "------------|-----------|\n");
  const double c = Median(cold), cb = Median(cold_base);
  Row("CreateSession → first Exec(true), cold", c, cb, absl::StrFormat("%.2fx", c / cb),
      "<= 1.30x");
  const double w = Median(warm), wb = Median(warm_base);
  Row("CreateSession → first Exec(true), warm pool", w, wb, absl::StrFormat("%.2fx", w / wb),
      "<= 0.50x");
  const double e = Median(exec), eb = Median(fork_exec);
  Row("Exec(true) in a live session", e, eb, absl::StrFormat("%+.2f ms", e - eb), "<= +1 ms");
  Row(absl::StrCat(burst, " CreateSession at once, cold").c_str(), Median(bursts_cold), 0, "",
      "<= 1000");
  Row(absl::StrCat(burst, " CreateSession at once, warm pool").c_str(), Median(bursts_warm), 0, "",
      "<= 100");
  std::printf(
      "\nbaselines: bare `bwrap <the provider's flags> true` from a spawner thread as a pool uid;\n"
      "fork+execve+waitpid of /bin/true from this process. Bursts: median of 3, all returned.\n");
  return 0;
}

}  // namespace
}  // namespace sandgate::bench

int main(int argc, char** argv) { return sandgate::bench::Main(argc, argv); }
