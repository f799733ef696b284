// The keystroke round trip through `sandgate session shell`: a key written to the terminal the
// CLI runs on, until the sandbox's terminal echo of it is back on that terminal. Beside it, in
// the same run and alternating with it, the baseline: the same key through a local terminal
// to a local `cat` (the kernel's own echo, no sandgate at all).
//
//   build/bin/bench_shell [--keys 200]   (as root: it starts sandgated with local sandboxes)
//
// Prints the medians and p90 in ms. Not a test: nothing asserts timing.
#include <fcntl.h>
#include <poll.h>
#include <pty.h>
#include <signal.h>
#include <sys/wait.h>
#include <termios.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "tests/bench/bench_daemon.h"

namespace sandgate::bench {
namespace {

using SteadyClock = std::chrono::steady_clock;

// A program on a new terminal (forkpty); its output read from the master.
class OnTerminal {
 public:
  explicit OnTerminal(const std::vector<std::string>& argv) {
    std::vector<char*> args;
    for (const std::string& a : argv) args.push_back(const_cast<char*>(a.c_str()));
    args.push_back(nullptr);
    pid_ = forkpty(&fd_, nullptr, nullptr, nullptr);
    if (pid_ == 0) {
      execv(args[0], args.data());
      _exit(127);
    }
  }
  ~OnTerminal() {
    kill(pid_, SIGKILL);
    waitpid(pid_, nullptr, 0);
    close(fd_);
  }
  // What was read and not yet consumed by Await.
  const std::string& pending() const { return seen_; }
  // Reads until `want` shows in what was read since the last call; false after 20 s.
  bool Await(const std::string& want) {
    const auto deadline = SteadyClock::now() + std::chrono::seconds(20);
    while (seen_.find(want) == std::string::npos) {
      if (SteadyClock::now() > deadline) return false;
      struct pollfd p = {fd_, POLLIN, 0};
      if (poll(&p, 1, 100) <= 0) continue;
      char buf[4096];
      ssize_t n = read(fd_, buf, sizeof(buf));
      if (n <= 0) return false;
      seen_.append(buf, static_cast<size_t>(n));
    }
    seen_.erase(0, seen_.find(want) + want.size());
    return true;
  }
  void Write(const std::string& s) { (void)!write(fd_, s.data(), s.size()); }
  // One key, until its echo is back: ms.
  double RoundTrip(char key) {
    const auto start = SteadyClock::now();
    Write(std::string(1, key));
    if (!Await(std::string(1, key))) return -1;
    return std::chrono::duration<double, std::milli>(SteadyClock::now() - start).count();
  }

 private:
  pid_t pid_ = -1;
  int fd_ = -1;
  std::string seen_;
};

double Percentile(std::vector<double> v, double p) {
  std::sort(v.begin(), v.end());
  return v.empty() ? 0 : v[std::min(v.size() - 1, static_cast<size_t>(p * v.size()))];
}

int Main(int argc, char** argv) {
  int keys = 200;
  for (int i = 1; i + 1 < argc; ++i) {
    if (std::strcmp(argv[i], "--keys") == 0) keys = std::atoi(argv[i + 1]);
  }
  Daemon d = Daemon::Start(R"({"local": {"uid_base": 191000, "uid_count": 8}})");
  auto stub = d.Stub();
  grpc::ClientContext ctx;
  v1::CreateSessionRequest create;
  create.mutable_sandbox()->mutable_idle_timeout()->set_seconds(600);
  v1::Session session;
  grpc::Status st = stub->CreateSession(&ctx, create, &session);
  if (!st.ok()) {
    std::fprintf(stderr, "CreateSession: %s\n", st.error_message().c_str());
    return 1;
  }
  setenv("SANDGATE_ADDR", ("unix:" + d.socket()).c_str(), 1);
  // `cat` on the sandbox's terminal: a key comes back as the terminal's echo (and once more
  // from cat at the end of a line, never sent here).
  OnTerminal shell({SANDGATE_CLI_PATH, "session", "shell", session.id(), "--", "cat"});
  OnTerminal local({"/bin/cat"});
  // A line through first, not timed: the shell is up and its terminal echoes (an error of
  // the CLI could hold any letter; this line it cannot).
  for (OnTerminal* t : {&shell, &local}) {
    t->Write("sandgate-ready-4711\r");
    if (!t->Await("sandgate-ready-4711\r\nsandgate-ready-4711")) {
      std::fprintf(stderr, "no echo from the terminal; it said: %s\n", t->pending().c_str());
      return 1;
    }
    t->Await("\n");
  }
  std::vector<double> through, baseline;
  for (int i = 0; i < keys; ++i) {
    const char key = static_cast<char>('a' + i % 26);
    through.push_back(shell.RoundTrip(key));
    baseline.push_back(local.RoundTrip(key));
    if (through.back() < 0 || baseline.back() < 0) {
      std::fprintf(stderr, "a key's echo did not come back\n");
      return 1;
    }
  }
  std::printf("keystroke round trip, %d keys (median, p90):\n", keys);
  std::printf("  through `sandgate session shell`   %.2f ms, %.2f\n", Percentile(through, 0.5),
              Percentile(through, 0.9));
  std::printf("  local terminal to a local cat      %.3f ms, %.3f\n", Percentile(baseline, 0.5),
              Percentile(baseline, 0.9));
  return 0;
}

}  // namespace
}  // namespace sandgate::bench

int main(int argc, char** argv) { return sandgate::bench::Main(argc, argv); }
