// RunAnalysis end to end (reference agent, sample input) against running the same analysis
// program directly under bubblewrap, measured alternately in the same process so both see
// the same machine load. Prints medians and the ratio (target: <= 1.3x).
//
//   build/bin/bench_run_analysis [iterations]     (as root; default 20)
#include <fcntl.h>
#include <grpcpp/grpcpp.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <thread>
#include <vector>

#include "sandgate/v1/sandgate.grpc.pb.h"
#include "tests/bench/follow_run.h"
#include "tests/sandbox/openai/analyst_scenario.h"

namespace {

using Clock = std::chrono::steady_clock;

double Median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v.size() % 2 ? v[v.size() / 2] : (v[v.size() / 2 - 1] + v[v.size() / 2]) / 2;
}

// The same two commands the reference agent runs, straight under bwrap.
double OneBare(const std::string& dir) {
  auto start = Clock::now();
  pid_t pid = fork();
  if (pid == 0) {
    int null = open("/dev/null", O_WRONLY);
    dup2(null, 1);
    execl("/usr/bin/bwrap", "bwrap", "--unshare-all", "--die-with-parent", "--new-session",
          "--cap-drop", "ALL", "--ro-bind", "/usr", "/usr", "--symlink", "usr/lib", "/lib",
          "--symlink", "usr/lib64", "/lib64", "--symlink", "usr/bin", "/bin", "--proc", "/proc",
          "--dev", "/dev", "--tmpfs", "/tmp", "--tmpfs", "/work", "--ro-bind", dir.c_str(), "/in",
          "--chdir", "/work", "/bin/sh", "-c",
          "cp /in/* . && python3 analyze_financials.py northstar_cloud_financial_statements.csv "
          "--out-dir . && python3 recompute_metrics.py northstar_cloud_financial_statements.csv",
          nullptr);
    _exit(127);
  }
  int status;
  waitpid(pid, &status, 0);
  double ms = std::chrono::duration<double, std::milli>(Clock::now() - start).count();
  return WIFEXITED(status) && WEXITSTATUS(status) == 0 ? ms : -1;
}

}  // namespace

int main(int argc, char** argv) {
  int iterations = argc > 1 ? std::atoi(argv[1]) : 20;
  std::string src = SANDGATE_SOURCE_DIR;
  std::string csv = sandgate::testing::SampleStatementsCsv();
  char tmpl[] = "/tmp/sg-bench-XXXXXX";
  std::string dir = mkdtemp(tmpl);
  std::string inputs = dir + "/in";
  std::system(("mkdir " + inputs + " && cp " + src +
               "/daemon/playbooks/financial_analyst/reference/*.py " + src +
               "/tests/data/northstar_cloud_financial_statements.csv " + inputs)
                  .c_str());
  std::string socket = dir + "/s.sock";
  pid_t daemon = fork();
  if (daemon == 0) {
    int null = open("/dev/null", O_WRONLY);
    dup2(null, 1);
    dup2(null, 2);
    execl(SANDGATED_PATH, "sandgated", "--listen", ("unix:" + socket).c_str(), "--state-dir",
          (dir + "/state").c_str(), "--log-level", "error", nullptr);
    _exit(127);
  }
  for (int i = 0; i < 100 && access(socket.c_str(), F_OK) != 0; ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  auto stub = sandgate::v1::Sandgate::NewStub(
      grpc::CreateChannel("unix:" + socket, grpc::InsecureChannelCredentials()));

  sandgate::bench::TimeSampleRun(*stub, csv);  // warm-up: page cache, first sandbox
  OneBare(inputs);
  std::vector<double> runs, bare;
  int failures = 0;
  for (int i = 0; i < iterations; ++i) {
    double r = sandgate::bench::TimeSampleRun(*stub, csv);
    double b = OneBare(inputs);
    if (r < 0 || b < 0) {
      ++failures;
      continue;
    }
    runs.push_back(r);
    bare.push_back(b);
  }
  kill(daemon, SIGTERM);
  waitpid(daemon, nullptr, 0);
  std::system(("rm -rf " + dir).c_str());
  if (runs.empty()) {
    std::fprintf(stderr, "every iteration failed\n");
    return 1;
  }
  double mr = Median(runs), mb = Median(bare);
  std::printf("%-58s %10s\n",
              ("measurement (median of " + std::to_string(runs.size()) + ")").c_str(), "ms");
  std::printf("%-58s %10.1f\n", "bare: analysis + recompute directly under bwrap", mb);
  std::printf("%-58s %10.1f\n", "sandgate: RunAnalysis to run.finished (reference agent)", mr);
  std::printf("%-58s %9.2fx  (target <= 1.30x)\n", "ratio", mr / mb);
  if (failures) std::printf("failed iterations: %d\n", failures);
  return 0;
}
