// What the API benchmarks share: a real sandgated on a temporary Unix socket, a stub on it,
// and the statistics they print.
//
//   sandgate::bench::Daemon d = sandgate::bench::Daemon::Start(R"({"max_sandboxes": 128})");
//   auto stub = d.Stub();   // ... calls ...; the destructor stops the daemon (SIGTERM) and
//                           // removes its directory
#ifndef SANDGATE_TESTS_BENCH_BENCH_DAEMON_H_
#define SANDGATE_TESTS_BENCH_BENCH_DAEMON_H_

#include <fcntl.h>
#include <grpcpp/grpcpp.h>
#include <netinet/in.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "sandgate/v1/sandgate.grpc.pb.h"

namespace sandgate::bench {

// A sandgated child process with its own state directory. Not thread safe; move only.
class Daemon {
 public:
  // Starts `path` with `config_json` as its --config; exits the benchmark if the socket does
  // not appear within 10 s (a benchmark without its daemon has nothing to measure).
  static Daemon Start(const std::string& config_json, const std::string& path = SANDGATED_PATH) {
    Daemon d;
    char tmpl[] = "/tmp/sg-bench-XXXXXX";
    d.dir_ = mkdtemp(tmpl);
    d.socket_ = d.dir_ + "/s.sock";
    const std::string config = d.dir_ + "/config.json";
    std::ofstream(config) << config_json;
    d.pid_ = fork();
    if (d.pid_ == 0) {
      int null = open("/dev/null", O_WRONLY);
      dup2(null, 1);
      dup2(null, 2);
      execl(path.c_str(), "sandgated", "--config", config.c_str(), "--listen",
            ("unix:" + d.socket_).c_str(), "--state-dir", (d.dir_ + "/state").c_str(),
            "--log-level", "error", nullptr);
      _exit(127);
    }
    for (int i = 0; i < 200 && access(d.socket_.c_str(), F_OK) != 0; ++i) {
      std::this_thread::sleep_for(std::chrono::milliseconds(50));
    }
    if (access(d.socket_.c_str(), F_OK) != 0) {
      std::fprintf(stderr, "%s did not listen on %s\n", path.c_str(), d.socket_.c_str());
      std::exit(1);
    }
    return d;
  }

  Daemon(Daemon&& other) noexcept { *this = std::move(other); }
  Daemon& operator=(Daemon&& other) noexcept {
    std::swap(pid_, other.pid_);
    std::swap(dir_, other.dir_);
    std::swap(socket_, other.socket_);
    return *this;
  }
  ~Daemon() {
    if (pid_ > 0) {
      kill(pid_, SIGTERM);
      waitpid(pid_, nullptr, 0);
    }
    if (!dir_.empty()) std::system(("rm -rf " + dir_).c_str());
  }

  pid_t pid() const { return pid_; }
  // Its Unix socket's path.
  const std::string& socket() const { return socket_; }
  // Its directory; the state directory is dir() + "/state".
  const std::string& dir() const { return dir_; }

  // A stub on a channel of its own (its own connection: `local_pool` keeps gRPC from sharing
  // one subchannel between channels), as separate callers would have.
  std::unique_ptr<v1::Sandgate::Stub> Stub() const {
    grpc::ChannelArguments args;
    args.SetMaxReceiveMessageSize(-1);
    args.SetInt(GRPC_ARG_USE_LOCAL_SUBCHANNEL_POOL, 1);
    return v1::Sandgate::NewStub(
        grpc::CreateCustomChannel("unix:" + socket_, grpc::InsecureChannelCredentials(), args));
  }

 private:
  Daemon() = default;
  pid_t pid_ = -1;
  std::string dir_, socket_;
};

// A TCP port free on the loopback now (for a daemon's http_listen, a server of the benchmark).
inline int FreePort() {
  int fd = socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in a = {};
  a.sin_family = AF_INET;
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  bind(fd, reinterpret_cast<sockaddr*>(&a), sizeof(a));
  socklen_t len = sizeof(a);
  getsockname(fd, reinterpret_cast<sockaddr*>(&a), &len);
  close(fd);
  return ntohs(a.sin_port);
}

// Wall-clock now, and an event's time, in ns since the epoch (client and daemon share the
// machine's clock: their difference is a delivery lag).
inline int64_t NowNanos() {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(
             std::chrono::system_clock::now().time_since_epoch())
      .count();
}
inline int64_t EventNanos(const v1::Event& e) {
  return e.time().seconds() * 1000000000 + e.time().nanos();
}

// The q-quantile (0..1) of `v` by nearest rank; 0 for an empty `v`.
inline double Quantile(std::vector<double> v, double q) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  size_t rank = static_cast<size_t>(q * static_cast<double>(v.size()));
  return v[std::min(rank, v.size() - 1)];
}

inline double Median(std::vector<double> v) { return Quantile(std::move(v), 0.5); }

// One field of /proc/PID/status in KiB ("VmRSS", "RssAnon"), or -1.
inline long StatusKiB(pid_t pid, const std::string& field) {
  std::ifstream in("/proc/" + std::to_string(pid) + "/status");
  std::string line;
  while (std::getline(in, line)) {
    if (line.compare(0, field.size(), field) == 0 && line.size() > field.size() &&
        line[field.size()] == ':') {
      return std::atol(line.c_str() + field.size() + 1);
    }
  }
  return -1;
}

// CPU time (user + system) that `pid` has used so far, in seconds, or -1.
inline double CpuSeconds(pid_t pid) {
  std::ifstream in("/proc/" + std::to_string(pid) + "/stat");
  std::string stat((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  // "pid (comm) state ppid ...": comm may hold spaces and parentheses; the last ')' ends it.
  const size_t close = stat.rfind(')');
  if (close == std::string::npos) return -1;
  unsigned long utime = 0, stime = 0;
  if (std::sscanf(stat.c_str() + close + 2, "%*c %*d %*d %*d %*d %*d %*u %*u %*u %*u %*u %lu %lu",
                  &utime, &stime) != 2) {
    return -1;
  }
  return static_cast<double>(utime + stime) / static_cast<double>(sysconf(_SC_CLK_TCK));
}

}  // namespace sandgate::bench

#endif  // SANDGATE_TESTS_BENCH_BENCH_DAEMON_H_
