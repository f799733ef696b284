// bench_security: what the local sandbox's security layers cost, each next to a baseline
// measured in the same run.
//
// Usage (as root): bench_security [seccomp|proxy|burst|all] [runs=5]
//
//   seccomp  three sessions side by side: no filter (disable_seccomp_for_benchmarks), the
//            earlier denylist (denylist_filter.cc, through seccomp_bpf_for_benchmarks) and the
//            provider's allowlist. In each, a static program making 2,000,000 getppid() and
//            2,000,000 ioctl(FIONREAD) calls (ns per call); 20 x `runs` Exec(/bin/true) (ms);
//            and the financial analysis's reference program on the sample input in a fresh
//            session of each (ms, session creation to the last step); median of `runs`.
// The sides of each comparison alternate run by run, so load from elsewhere hits them alike.
//   proxy    against an HTTP server in a throwaway network namespace (198.51.100.2, see
//            tests/security/test_netns.h): one request per connection, directly and through
//            NetProxy (absolute URI and CONNECT), 500 times each (median, p99); then a 256 MiB
//            download directly and through a CONNECT tunnel (MiB/s, best of `runs`). The proxy
//            here listens on the host's loopback (the same code path as inside a session's
//            namespace, without the sandbox around the client).
//   burst    100 sessions created at once from 100 threads: time until all are ready (target
//            <= 1 s), against one session created alone (median of `runs`).
#include <arpa/inet.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <iterator>
#include <sstream>
#include <thread>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "playbooks/playbook.h"
#include "sandbox/local/bwrap_provider.h"
#include "sandbox/local/cgroups.h"
#include "sandbox/local/net_proxy.h"
#include "tests/bench/sandbox/denylist_filter.h"
#include "tests/fakes/fake_journal.h"
#include "tests/security/test_netns.h"

namespace sandgate::sandbox {
namespace {

using ::sandgate::testing::TestNetwork;

// Every name is the test host.
class BenchResolver : public local::Resolver {
 public:
  explicit BenchResolver(std::string ip) : ip_(std::move(ip)) {}
  absl::StatusOr<std::vector<local::IpAddress>> Resolve(const std::string&) override {
    return std::vector<local::IpAddress>{*local::IpAddress::Parse(ip_)};
  }

 private:
  const std::string ip_;
};

[[noreturn]] void Die(const absl::Status& s, const char* what) {
  fprintf(stderr, "bench_security: %s: %s\n", what, s.ToString().c_str());
  exit(1);
}

double Percentile(std::vector<double> v, double p) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  return v[std::min(v.size() - 1, static_cast<size_t>(p * static_cast<double>(v.size())))];
}
double Median(std::vector<double> v) { return Percentile(std::move(v), 0.5); }

BwrapOptions Options(uid_t base, uint32_t pool) {
  BwrapOptions o;
  o.init_path = SANDGATE_BENCH_INIT_PATH;
  o.uid_base = base;
  o.uid_pool_size = pool;
  o.cgroup_parent = "sandgate-bench";
  return o;
}

void RemoveCgroupParent() {
  if (absl::StatusOr<local::CgroupHost> host = local::DetectCgroups("sandgate-bench"); host.ok()) {
    for (const std::string* dir :
         {&host->memory_v1, &host->pids_v1, &host->freezer_v1, &host->cpu_v1, &host->unified}) {
      if (!dir->empty()) rmdir(dir->c_str());
    }
  }
}

// --- seccomp -------------------------------------------------------------------------------

// Seconds for `probe loop n name` in `session`, from the command's own duration.
double LoopSeconds(Session* s, long n, const char* name) {
  ExecRequest req;
  req.argv = {"/work/probe", "loop", absl::StrCat(n), name};
  req.timeout = absl::Minutes(2);
  auto r = s->Exec(req, nullptr, nullptr);
  if (!r.ok() || !r->ok()) Die(r.status(), "probe loop");
  return absl::ToDoubleSeconds(r->duration);
}

// The sample analysis as the reference agent runs it: the playbook's files and input placed in
// a fresh session, then its steps in order; ms from the session's creation to the last step.
double AnalysisMs(BwrapProvider* provider, const std::string& id, const std::string& csv) {
  const absl::Time start = absl::Now();
  const playbooks::Playbook* playbook = *playbooks::FindPlaybook("financial-analyst");
  const std::vector<playbooks::InputFile> inputs = {
      {"northstar_cloud_financial_statements.csv", csv}};
  playbooks::ReferencePlan plan = playbook->Reference(inputs, "/work", {});
  SessionSpec spec;
  spec.id = id;
  auto s = provider->Create(spec, nullptr);
  if (!s.ok()) Die(s.status(), "analysis session");
  for (const auto& f : plan.files) {
    if (absl::Status w = (*s)->WriteFile(f.path, f.content, f.mode); !w.ok())
      Die(w, f.path.c_str());
  }
  for (const auto& in : inputs) {
    if (absl::Status w = (*s)->WriteFile(in.name, in.content, 0644); !w.ok()) Die(w, "input");
  }
  for (const auto& step : plan.steps) {
    ExecRequest req;
    req.argv = step.argv;
    req.timeout = step.timeout;
    auto r = (*s)->Exec(req, nullptr, nullptr);
    if (!r.ok()) Die(r.status(), step.name.c_str());
    if (!r->ok())
      Die(absl::InternalError(absl::StrCat("exit ", r->exit_code, " signal ", r->term_signal)),
          step.name.c_str());
  }
  const double ms = absl::ToDoubleMilliseconds(absl::Now() - start);
  (void)(*s)->Close();
  return ms;
}

void BenchSeccomp(int runs) {
  std::ifstream in(SANDGATE_BENCH_PROBE_PATH, std::ios::binary);
  std::stringstream ss;
  ss << in.rdbuf();
  const std::string probe = ss.str();
  std::ifstream data(std::string(SANDGATE_SOURCE_DIR) +
                     "/tests/data/northstar_cloud_financial_statements.csv");
  const std::string csv((std::istreambuf_iterator<char>(data)), std::istreambuf_iterator<char>());
  absl::StatusOr<std::string> denylist = bench::BuildDenylistFilter();
  if (!denylist.ok()) Die(denylist.status(), "denylist");
  const long n = 2000000;
  // The sides alternate run by run: no filter, the earlier denylist, the allowlist.
  const char* names[3] = {"none", "denylist", "allowlist"};
  testing::FakeJournal journal;
  std::vector<std::unique_ptr<BwrapProvider>> providers;
  std::vector<std::unique_ptr<Session>> sessions;
  for (int f = 0; f < 3; ++f) {
    BwrapOptions o = Options(181000 + 8 * f, 8);
    o.disable_seccomp_for_benchmarks = f == 0;
    if (f == 1) o.seccomp_bpf_for_benchmarks = *denylist;
    auto p = BwrapProvider::Create(o, &journal);
    if (!p.ok()) Die(p.status(), "provider");
    SessionSpec spec;
    spec.id = absl::StrCat("bench-seccomp-", names[f]);
    auto s = (*p)->Create(spec, nullptr);
    if (!s.ok()) Die(s.status(), "session");
    if (absl::Status w = (*s)->WriteFile("probe", probe, 0755); !w.ok()) Die(w, "upload probe");
    providers.push_back(std::move(*p));
    sessions.push_back(std::move(*s));
  }
  printf("## seccomp: no filter, the earlier denylist, the allowlist; median of %d\n\n", runs);
  printf(
      "| measure                           | no filter | denylist | allowlist | allowlist vs "
      "denylist |\n");
  printf(
      "|-----------------------------------|----------:|---------:|----------:|--------------------"
      "--:|\n");
  auto row = [](const char* what, const std::vector<double>(&v)[3]) {
    const double m[3] = {Median(v[0]), Median(v[1]), Median(v[2])};
    printf("| %-33s | %9.1f | %8.1f | %9.1f | %+20.1f%% |\n", what, m[0], m[1], m[2],
           100.0 * (m[2] - m[1]) / m[1]);
  };
  for (const char* call : {"getppid", "ioctl_fionread"}) {
    std::vector<double> v[3];
    for (int i = 0; i < runs; ++i) {
      for (int f = 0; f < 3; ++f) {
        const double base = LoopSeconds(sessions[f].get(), 0, call);
        v[f].push_back((LoopSeconds(sessions[f].get(), n, call) - base) * 1e9 / n);
      }
    }
    row(absl::StrCat(call, " (ns per call)").c_str(), v);
  }
  {
    std::vector<double> v[3];
    for (int i = 0; i < runs * 20; ++i) {
      for (int f = 0; f < 3; ++f) {
        ExecRequest req;
        req.argv = {"/bin/true"};
        const absl::Time start = absl::Now();
        auto r = sessions[f]->Exec(req, nullptr, nullptr);
        if (!r.ok() || !r->ok()) Die(r.status(), "exec true");
        v[f].push_back(absl::ToDoubleMilliseconds(absl::Now() - start));
      }
    }
    row("Exec(true) in a live session (ms)", v);
  }
  for (auto& s : sessions) (void)s->Close();
  {
    std::vector<double> v[3];
    for (int i = 0; i < runs; ++i) {
      for (int f = 0; f < 3; ++f) {
        v[f].push_back(
            AnalysisMs(providers[f].get(), absl::StrCat("bench-analysis-", names[f], "-", i), csv));
      }
    }
    row("financial analysis, fresh session (ms)", v);
  }
  printf("\n");
}

// --- proxy ---------------------------------------------------------------------------------

int Connect(const char* ip, int port) {
  int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  struct sockaddr_in a = {};
  a.sin_family = AF_INET;
  a.sin_port = htons(port);
  inet_pton(AF_INET, ip, &a.sin_addr);
  if (connect(fd, reinterpret_cast<sockaddr*>(&a), sizeof(a)) != 0) {
    perror("connect");
    exit(1);
  }
  int one = 1;
  setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
  return fd;
}

void SendAll(int fd, const std::string& s) {
  size_t off = 0;
  while (off < s.size()) {
    ssize_t n = send(fd, s.data() + off, s.size() - off, MSG_NOSIGNAL);
    if (n <= 0) {
      perror("send");
      exit(1);
    }
    off += static_cast<size_t>(n);
  }
}

// Reads until EOF; returns the byte count.
uint64_t Drain(int fd) {
  static char buf[1 << 16];
  uint64_t total = 0;
  ssize_t n;
  while ((n = read(fd, buf, sizeof(buf))) > 0) total += static_cast<uint64_t>(n);
  return total;
}

// Reads the proxy's "200 Connection established" answer, exactly up to its empty line.
void ReadConnectReply(int fd) {
  std::string head;
  char c;
  while (head.size() < 4096 && read(fd, &c, 1) == 1) {
    head.push_back(c);
    if (head.size() >= 4 && head.compare(head.size() - 4, 4, "\r\n\r\n") == 0) break;
  }
  if (head.rfind("HTTP/1.1 200", 0) != 0) {
    fprintf(stderr, "bench_security: CONNECT refused: %s\n", head.c_str());
    exit(1);
  }
}

enum class Path { kDirect, kAbsoluteUri, kConnect };

// One request on a fresh connection; returns the response size.
uint64_t Fetch(Path path, int proxy_port, const std::string& target,
               const std::string& upstream_ip) {
  int fd;
  if (path == Path::kDirect) {
    fd = Connect(upstream_ip.c_str(), 80);
    SendAll(fd, absl::StrCat("GET ", target, " HTTP/1.1\r\nHost: allowed.test\r\n\r\n"));
  } else if (path == Path::kAbsoluteUri) {
    fd = Connect("127.0.0.1", proxy_port);
    SendAll(fd, absl::StrCat("GET http://allowed.test", target,
                             " HTTP/1.1\r\nHost: allowed.test\r\n\r\n"));
  } else {
    fd = Connect("127.0.0.1", proxy_port);
    SendAll(fd, "CONNECT allowed.test:443 HTTP/1.1\r\nHost: allowed.test:443\r\n\r\n");
    ReadConnectReply(fd);
    SendAll(fd, absl::StrCat("GET ", target, " HTTP/1.1\r\nHost: allowed.test\r\n\r\n"));
  }
  uint64_t n = Drain(fd);
  close(fd);
  return n;
}

void BenchProxy(int runs) {
  std::string error;
  auto net = TestNetwork::Create(&error);
  if (net == nullptr) Die(absl::UnavailableError(error), "test network");
  auto proxy = local::NetProxy::Create(std::make_shared<BenchResolver>(net->upstream_ip()), {});
  if (!proxy.ok()) Die(proxy.status(), "proxy");
  // A listener on the host's loopback, served exactly like a session's in-netns listener.
  int l = socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
  struct sockaddr_in a = {};
  a.sin_family = AF_INET;
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  bind(l, reinterpret_cast<sockaddr*>(&a), sizeof(a));
  listen(l, 128);
  socklen_t len = sizeof(a);
  getsockname(l, reinterpret_cast<sockaddr*>(&a), &len);
  const int port = ntohs(a.sin_port);
  local::ProxyPolicy policy;
  policy.mode = NetworkMode::kRestricted;
  policy.allowed_domains = {"allowed.test"};
  policy.ssrf_exempt = {*local::Cidr::Parse(net->upstream_ip() + "/32")};
  policy.max_bytes = ~0ull;
  uint64_t decisions = 0;
  if (absl::Status s = (*proxy)->AddSession("bench", UniqueFd(l), policy,
                                            [&](const NetworkDecision&) { ++decisions; });
      !s.ok()) {
    Die(s, "add session");
  }
  const int requests = 500;
  printf("## proxy: one small request per connection, %d each (ms)\n\n", requests);
  printf("| path                      | median | p99   | added (median) |\n");
  printf("|---------------------------|-------:|------:|---------------:|\n");
  const Path paths[3] = {Path::kDirect, Path::kAbsoluteUri, Path::kConnect};
  std::vector<double> ms[3];
  for (int i = 0; i < requests; ++i) {
    for (int k = 0; k < 3; ++k) {
      absl::Time t = absl::Now();
      Fetch(paths[k], port, "/", net->upstream_ip());
      ms[k].push_back(absl::ToDoubleMilliseconds(absl::Now() - t));
    }
  }
  const char* names[3] = {"direct", "proxy, absolute URI", "proxy, CONNECT tunnel"};
  for (int k = 0; k < 3; ++k) {
    printf("| %-25s | %6.3f | %5.3f | %+13.3f |\n", names[k], Median(ms[k]),
           Percentile(ms[k], 0.99), Median(ms[k]) - Median(ms[0]));
  }
  const uint64_t bytes = 256ull << 20;
  printf("\n## proxy: one %llu MiB download, best of %d (MiB/s)\n\n",
         static_cast<unsigned long long>(bytes >> 20), runs);
  printf("| path                  | MiB/s  |\n|-----------------------|-------:|\n");
  double best[2] = {0, 0};
  for (int i = 0; i < runs; ++i) {
    for (int k = 0; k < 2; ++k) {
      absl::Time t = absl::Now();
      uint64_t got = Fetch(k == 0 ? Path::kDirect : Path::kConnect, port,
                           absl::StrCat("/bytes/", bytes), net->upstream_ip());
      if (got < bytes) {
        fprintf(stderr, "bench_security: short download (%llu)\n",
                static_cast<unsigned long long>(got));
        exit(1);
      }
      best[k] = std::max(
          best[k], static_cast<double>(got) / (1 << 20) / absl::ToDoubleSeconds(absl::Now() - t));
    }
  }
  printf("| %-21s | %6.0f |\n| %-21s | %6.0f |\n", "direct", best[0], "proxy, CONNECT tunnel",
         best[1]);
  (*proxy)->RemoveSession("bench");
  printf("\n(%llu proxy decisions reported)\n\n", static_cast<unsigned long long>(decisions));
}

// --- burst ---------------------------------------------------------------------------------

void BenchBurst(int runs, NetworkMode mode) {
  const int n = 100;
  testing::FakeJournal journal;
  auto p = BwrapProvider::Create(Options(182000, n + 8), &journal);
  if (!p.ok()) Die(p.status(), "provider");
  std::vector<double> alone;
  for (int i = 0; i < runs; ++i) {
    SessionSpec spec;
    spec.id = absl::StrCat("bench-alone-", i);
    spec.network.mode = mode;
    absl::Time t = absl::Now();
    auto s = (*p)->Create(spec, nullptr);
    if (!s.ok()) Die(s.status(), "session");
    alone.push_back(absl::ToDoubleMilliseconds(absl::Now() - t));
    (void)(*s)->Close();
  }
  std::vector<double> bursts, closes;
  std::vector<double> each_ms(n);
  for (int round = 0; round < runs; ++round) {
    std::vector<std::unique_ptr<Session>> sessions(n);
    std::vector<std::thread> threads;
    const absl::Time start = absl::Now();
    for (int i = 0; i < n; ++i) {
      threads.emplace_back([&, i] {
        SessionSpec spec;
        spec.id = absl::StrCat("bench-burst-", i);
        spec.memory_bytes = 256ull << 20;
        spec.workspace_bytes = 32ull << 20;
        spec.network.mode = mode;
        spec.network.allowed_domains = {"pypi.org", "*.pythonhosted.org"};
        auto s = (*p)->Create(spec, nullptr);
        if (!s.ok()) Die(s.status(), "burst session");
        each_ms[i] = absl::ToDoubleMilliseconds(absl::Now() - start);
        sessions[i] = std::move(*s);
      });
    }
    for (std::thread& t : threads) t.join();
    bursts.push_back(absl::ToDoubleMilliseconds(absl::Now() - start));
    // Every session answers a command.
    for (auto& s : sessions) {
      ExecRequest req;
      req.argv = {"true"};
      auto r = s->Exec(req, nullptr, nullptr);
      if (!r.ok() || !r->ok()) Die(r.status(), "burst command");
    }
    const absl::Time c = absl::Now();
    threads.clear();
    for (int i = 0; i < n; ++i) threads.emplace_back([&, i] { (void)sessions[i]->Close(); });
    for (std::thread& t : threads) t.join();
    closes.push_back(absl::ToDoubleMilliseconds(absl::Now() - c));
  }
  printf("## burst: %d sessions (network %s) created at once, %d rounds (ms)\n\n", n,
         mode == NetworkMode::kDisabled ? "disabled" : "restricted: + proxy listener each", runs);
  printf("| measure                                   | ms      |\n");
  printf("|-------------------------------------------|--------:|\n");
  printf("| one session alone (median)                | %7.1f |\n", Median(alone));
  printf("| all %d ready (median round)              | %7.1f |\n", n, Median(bursts));
  printf("| all %d ready (worst round)               | %7.1f |\n", n,
         *std::max_element(bursts.begin(), bursts.end()));
  printf("| last round: median session ready at       | %7.1f |\n", Median(each_ms));
  printf("| all %d closed at once (median round)     | %7.1f |\n", n, Median(closes));
  printf("\ntarget: all ready within 1000 ms: %s\n\n", Median(bursts) <= 1000 ? "met" : "NOT met");
}

int Main(int argc, char** argv) {
  const std::string what = argc > 1 ? argv[1] : "all";
  const int runs = argc > 2 ? std::max(1, atoi(argv[2])) : 5;
  if (what == "seccomp" || what == "all") BenchSeccomp(runs);
  if (what == "proxy" || what == "all") BenchProxy(runs);
  if (what == "burst" || what == "all") {
    BenchBurst(runs, NetworkMode::kDisabled);
    BenchBurst(runs, NetworkMode::kRestricted);
  }
  RemoveCgroupParent();
  return 0;
}

}  // namespace
}  // namespace sandgate::sandbox

int main(int argc, char** argv) { return sandgate::sandbox::Main(argc, argv); }
