// The daemon's memory at rest, through the gRPC API: a real sandgated on a temporary Unix
// socket; its VmRSS idle (the baseline, after one call so a connected channel is counted),
// then with N kept sessions that do nothing, then after they are closed. Per idle session =
// (RSS with N − idle) / N. Also the sandboxes' own processes (the daemon's descendants:
// bwrap, sandgate-init), summed, per session.
//
//   build/bin/bench_idle_rss [--sessions 50] [--rounds 3] [--settle 2]      (as root)
#include <dirent.h>
#include <grpcpp/grpcpp.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <map>
#include <string>
#include <thread>
#include <vector>

#include "sandgate/v1/sandgate.grpc.pb.h"
#include "tests/bench/bench_daemon.h"

namespace {

using sandgate::bench::Daemon;
using sandgate::bench::Median;
using sandgate::bench::StatusKiB;
namespace v1 = sandgate::v1;

// VmRSS of every process below `root` (not `root` itself), summed, in KiB.
long DescendantsKiB(pid_t root) {
  std::map<pid_t, pid_t> parent;
  DIR* proc = opendir("/proc");
  if (proc == nullptr) return -1;
  while (dirent* d = readdir(proc)) {
    const pid_t pid = std::atoi(d->d_name);
    if (pid <= 0) continue;
    std::ifstream in(std::string("/proc/") + d->d_name + "/stat");
    std::string stat((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
    // "pid (comm) state ppid ...": comm may hold spaces and parentheses; the last ')' ends it.
    size_t close = stat.rfind(')');
    if (close == std::string::npos) continue;
    char state;
    int ppid;
    if (std::sscanf(stat.c_str() + close + 1, " %c %d", &state, &ppid) == 2) parent[pid] = ppid;
  }
  closedir(proc);
  long total = 0;
  for (const auto& [pid, ppid] : parent) {
    for (pid_t up = ppid; up > 1; up = parent.count(up) ? parent[up] : 0) {
      if (up == root) {
        long kib = StatusKiB(pid, "VmRSS");
        if (kib > 0) total += kib;
        break;
      }
    }
  }
  return total;
}

// The median of five samples 100 ms apart, after `settle` seconds.
long SettledRssKiB(pid_t pid, int settle) {
  std::this_thread::sleep_for(std::chrono::seconds(settle));
  std::vector<double> samples;
  for (int i = 0; i < 5; ++i) {
    samples.push_back(static_cast<double>(StatusKiB(pid, "VmRSS")));
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }
  return static_cast<long>(Median(samples));
}

}  // namespace

int main(int argc, char** argv) {
  int sessions = 50, rounds = 3, settle = 2;
  for (int i = 1; i + 1 < argc; i += 2) {
    const std::string flag = argv[i];
    const int v = std::atoi(argv[i + 1]);
    if (flag == "--sessions")
      sessions = v;
    else if (flag == "--rounds")
      rounds = v;
    else if (flag == "--settle")
      settle = v;
    else {
      std::fprintf(stderr, "unknown flag %s\n", flag.c_str());
      return 2;
    }
  }
  Daemon d = Daemon::Start("{\"max_sandboxes\": " + std::to_string(sessions + 8) + "}");
  auto stub = d.Stub();
  {
    grpc::ClientContext ctx;
    v1::ListRunsResponse resp;
    stub->ListRuns(&ctx, v1::ListRunsRequest(), &resp);
  }
  std::vector<double> idle, per_session, sandbox_per_session, after_close;
  for (int r = 0; r < rounds; ++r) {
    const long before = SettledRssKiB(d.pid(), settle);
    std::vector<std::string> ids;
    for (int i = 0; i < sessions; ++i) {
      grpc::ClientContext ctx;
      v1::Session s;
      grpc::Status st = stub->CreateSession(&ctx, v1::CreateSessionRequest(), &s);
      if (!st.ok()) {
        std::fprintf(stderr, "CreateSession %d: %s\n", i, st.error_message().c_str());
        return 1;
      }
      ids.push_back(s.id());
    }
    const long with = SettledRssKiB(d.pid(), settle);
    const long sandboxes = DescendantsKiB(d.pid());
    for (const std::string& id : ids) {
      grpc::ClientContext ctx;
      v1::CloseSessionRequest req;
      req.set_session_id(id);
      v1::Session s;
      stub->CloseSession(&ctx, req, &s);
    }
    const long closed = SettledRssKiB(d.pid(), settle);
    idle.push_back(before);
    per_session.push_back(static_cast<double>(with - before) / sessions);
    sandbox_per_session.push_back(static_cast<double>(sandboxes) / sessions);
    after_close.push_back(closed);
    std::printf(
        "round %d: idle %ld KiB, with %d sessions %ld KiB (+%.1f KiB each), sandbox "
        "processes %ld KiB (%.1f KiB each), after closing them %ld KiB\n",
        r + 1, before, sessions, with, per_session.back(), sandboxes, sandbox_per_session.back(),
        closed);
    std::fflush(stdout);
  }
  std::printf(
      "median over %d rounds: daemon idle %.0f KiB; per idle session +%.1f KiB in the "
      "daemon, %.1f KiB in its sandbox processes; after closing %.0f KiB\n",
      rounds, Median(idle), Median(per_session), Median(sandbox_per_session), Median(after_close));
  return 0;
}
