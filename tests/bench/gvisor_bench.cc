// gVisor sessions through the gRPC API (issue 22), each figure beside a baseline measured in
// the same run, alternating with it:
//
//   1. CreateSession(isolation gvisor) → first Exec(true) done, cold (no warm pool), against a
//      bare `runsc run` of the same bundle (the provider's own OCI spec, /bin/true as its
//      process): what starting gVisor at all costs; target ≤ 1.3×.
//   2. The same with a warm pool of gVisor sandboxes (a hit each time: the pool refills in
//      between): target ≤ 50 ms.
//   3. Exec(true) in a live gVisor session against Exec(true) in a live namespaces session.
//   4. Idle memory per sandbox: the session's memory cgroup (memory.usage_in_bytes) right
//      after CreateSession, gVisor against namespaces.
//   5. The financial analysis end to end (RunAnalysis, reference agent, the sample input) under
//      gVisor against under namespaces.
//
//   build/bin/bench_gvisor [--runs 20]   (as root, with runsc installed)
//
// Prints medians in ms (MiB for memory) and the ratios. Not a test: nothing asserts timing.
#include <dirent.h>
#include <fcntl.h>
#include <grpcpp/grpcpp.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <fstream>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "nlohmann/json.hpp"
#include "sandbox/local/bwrap_command.h"
#include "sandbox/local/runsc_command.h"
#include "sandbox/local/tmpfs_limits.h"
#include "sandgate/v1/sandgate.grpc.pb.h"
#include "tests/bench/bench_daemon.h"
#include "tests/bench/follow_run.h"
#include "tests/sandbox/openai/analyst_scenario.h"

namespace sandgate::bench {
namespace {

using SteadyClock = std::chrono::steady_clock;
constexpr uint32_t kUidBase = 360000;  // this bench's pool; the bare baseline uses the next
constexpr uint32_t kUidCount = 16;

double MsSince(SteadyClock::time_point start) {
  return std::chrono::duration<double, std::milli>(SteadyClock::now() - start).count();
}

[[noreturn]] void Fail(const std::string& what) {
  std::fprintf(stderr, "bench_gvisor: %s\n", what.c_str());
  std::exit(1);
}

v1::Session Create(v1::Sandgate::Stub& stub, const std::string& isolation) {
  grpc::ClientContext ctx;
  v1::CreateSessionRequest req;
  req.mutable_sandbox()->set_isolation(isolation);
  v1::Session s;
  grpc::Status st = stub.CreateSession(&ctx, req, &s);
  if (!st.ok()) Fail("CreateSession: " + st.error_message());
  return s;
}

void ExecTrue(v1::Sandgate::Stub& stub, const std::string& id) {
  grpc::ClientContext ctx;
  v1::ExecRequest req;
  req.set_session_id(id);
  req.add_argv("true");
  auto reader = stub.Exec(&ctx, req);
  v1::ExecResponse r;
  while (reader->Read(&r)) {
  }
  grpc::Status st = reader->Finish();
  if (!st.ok()) Fail("Exec: " + st.error_message());
}

void Close(v1::Sandgate::Stub& stub, const std::string& id) {
  grpc::ClientContext ctx;
  v1::CloseSessionRequest req;
  req.set_session_id(id);
  v1::Session s;
  stub.CloseSession(&ctx, req, &s);
}

// The bare baseline: the provider's own bundle for a session (WriteRunscBundle, its tmpfs
// mounts made beforehand, untimed), its process replaced by /bin/true, then `runsc run` timed
// from fork to reap.
double BareRunsc(const std::string& mount_dir, uid_t uid, int i) {
  namespace local = sandbox::local;
  local::RunscConfig config;
  config.gvisor_dir = mount_dir + "/gvisor";
  config.init_path = SANDGATE_BENCH_INIT_PATH;
  config.bridge_path = SANDGATE_BENCH_BRIDGE_PATH;
  config.hostname = "sandgate";
  config.host_binds = local::HostBinds();
  const local::RunscSandbox sandbox = local::RunscSandbox::Plan(config, absl::StrCat("bare-", i));
  const local::SessionMounts mounts = local::SessionMounts::Plan(mount_dir, uid);
  local::SessionMountSizes sizes{16 << 20, 1024, 64 << 20, 4096, 16 << 20, 256};
  if (!mounts.Mount(sizes).ok()) Fail("mount the bare sandbox's file systems");
  local::RunscBundleOptions options;
  options.uid = uid;
  if (!local::WriteRunscBundle(config, sandbox, mounts, options).ok()) Fail("write the bundle");
  const std::string spec_path = sandbox.dir + "/config.json";
  nlohmann::json spec = nlohmann::json::parse(std::ifstream(spec_path), nullptr, false);
  spec["process"]["args"] = {"/bin/true"};
  std::ofstream(spec_path) << spec.dump();
  const std::vector<std::string> argv = local::RunscRunArgv(config, sandbox);
  const SteadyClock::time_point start = SteadyClock::now();
  pid_t pid = fork();
  if (pid == 0) {
    int null = open("/dev/null", O_RDWR);
    dup2(null, 0);
    dup2(null, 1);
    dup2(null, 2);
    std::vector<char*> args;
    for (const std::string& a : argv) args.push_back(const_cast<char*>(a.c_str()));
    args.push_back(nullptr);
    execv(args[0], args.data());
    _exit(127);
  }
  int status = 0;
  waitpid(pid, &status, 0);
  const double ms = MsSince(start);
  if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) Fail("bare runsc run failed");
  (void)local::RemoveRunscDir(sandbox);
  (void)mounts.Unmount();
  return ms;
}

// memory.usage_in_bytes of the session's v1 memory cgroup (MiB), or -1 where there is none.
double SessionMemoryMib(const std::string& id) {
  std::vector<std::string> stack = {"/sys/fs/cgroup/memory"};
  const std::string name = "sandgate-" + id;
  for (size_t depth = 0; depth < 6 && !stack.empty(); ++depth) {
    std::vector<std::string> next;
    for (const std::string& dir : stack) {
      DIR* d = opendir(dir.c_str());
      if (d == nullptr) continue;
      while (struct dirent* e = readdir(d)) {
        if (e->d_type != DT_DIR || e->d_name[0] == '.') continue;
        const std::string path = dir + "/" + e->d_name;
        if (name == e->d_name) {
          closedir(d);
          uint64_t bytes = 0;
          std::ifstream(path + "/memory.usage_in_bytes") >> bytes;
          return static_cast<double>(bytes) / (1 << 20);
        }
        next.push_back(path);
      }
      closedir(d);
    }
    stack.swap(next);
  }
  return -1;
}

void Row(const char* what, double value, double base, const char* base_name) {
  std::printf("%-52s %9.2f   %-28s %9.2f   %.2fx\n", what, value, base_name, base,
              base > 0 ? value / base : 0.0);
}

int Main(int argc, char** argv) {
  int runs = 20;
  for (int i = 1; i + 1 < argc; i += 2) {
    if (std::string(argv[i]) == "--runs") runs = std::atoi(argv[i + 1]);
  }
  if (access("/usr/bin/runsc", X_OK) != 0) Fail("runsc is not installed (Debian package runsc)");
  const std::string local =
      absl::StrCat(R"({"local": {"uid_base": )", kUidBase, R"(, "uid_count": )", kUidCount, "}");
  std::vector<double> cold, bare, warm, exec_g, exec_n, mem_g, mem_n, run_g, run_n;
  {
    Daemon d = Daemon::Start(local + "}");
    auto stub = d.Stub();
    Close(*stub, Create(*stub, "gvisor").id());  // warm-up: page cache, first sandbox
    BareRunsc("/run/sandgate-sandboxes", kUidBase + kUidCount, -1);
    for (int i = 0; i < runs; ++i) {
      const SteadyClock::time_point start = SteadyClock::now();
      v1::Session s = Create(*stub, "gvisor");
      ExecTrue(*stub, s.id());
      cold.push_back(MsSince(start));
      Close(*stub, s.id());
      bare.push_back(BareRunsc("/run/sandgate-sandboxes", kUidBase + kUidCount, i));
    }
    v1::Session g = Create(*stub, "gvisor"), n = Create(*stub, "namespaces");
    std::this_thread::sleep_for(std::chrono::milliseconds(500));
    mem_g.push_back(SessionMemoryMib(g.id()));
    mem_n.push_back(SessionMemoryMib(n.id()));
    for (int i = 0; i < runs * 5; ++i) {
      SteadyClock::time_point start = SteadyClock::now();
      ExecTrue(*stub, g.id());
      exec_g.push_back(MsSince(start));
      start = SteadyClock::now();
      ExecTrue(*stub, n.id());
      exec_n.push_back(MsSince(start));
    }
    Close(*stub, g.id());
    Close(*stub, n.id());
    const std::string csv = testing::SampleStatementsCsv();
    for (int i = 0; i < runs; ++i) {
      run_g.push_back(TimeSampleRun(*stub, csv, "gvisor"));
      run_n.push_back(TimeSampleRun(*stub, csv, "namespaces"));
      if (run_g.back() < 0 || run_n.back() < 0) Fail("a financial analysis run did not succeed");
    }
  }
  int hits = 0;
  {
    Daemon d = Daemon::Start(local + R"(, "warm_pool": [{"size": 1, "isolation": "gvisor"}]})");
    auto stub = d.Stub();
    for (int i = 0; i < runs; ++i) {
      std::this_thread::sleep_for(std::chrono::milliseconds(1500));  // the pool refills
      const SteadyClock::time_point start = SteadyClock::now();
      v1::Session s = Create(*stub, "gvisor");
      ExecTrue(*stub, s.id());
      const double ms = MsSince(start);
      if (s.from_warm_pool()) {
        warm.push_back(ms);
        ++hits;
      }
      Close(*stub, s.id());
    }
  }
  std::printf("medians of %d runs (ms; memory in MiB)\n", runs);
  Row("CreateSession(gvisor) → first Exec(true), cold", Median(cold), Median(bare),
      "bare `runsc run` true");
  Row(absl::StrFormat("… warm pool (%d of %d hits)", hits, runs).c_str(), Median(warm),
      Median(bare), "bare `runsc run` true");
  Row("Exec(true) in a live gvisor session", Median(exec_g), Median(exec_n),
      "… in a namespaces session");
  Row("idle session memory cgroup, gvisor", Median(mem_g), Median(mem_n), "… namespaces");
  Row("financial analysis end to end, gvisor", Median(run_g), Median(run_n), "… namespaces");
  return 0;
}

}  // namespace
}  // namespace sandgate::bench

int main(int argc, char** argv) { return sandgate::bench::Main(argc, argv); }
