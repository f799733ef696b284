// Tenant B's Exec latency while tenant A saturates the exec threads (issue 20 item 2).
//
// Starts sandgated (two tenants, the default max_concurrent_execs of 32) on a temporary Unix
// socket and drives it from this client process, each tenant on a channel of its own:
//   1. B alone: `--echoes` sequential `Exec(echo hi)` in B's session, each timed from the call
//      to the end of its stream;
//   2. A saturates: `--long` concurrent `Exec(sleep 3600)` in A's session (the bench waits
//      until every one the daemon admitted has said so), then B's echoes again;
//   3. A's calls are cancelled.
// Prints the median and p90 of each phase in ms and their ratio. Before per-tenant fairness,
// B's echo waited for one of A's commands to end (48 long commands, 32 threads: with
// `sleep 3600`, never; the outside report measured 16 s with shorter ones), so each echo of
// phase 2 has a deadline (`--deadline` s) and is counted as timed out instead.
//
//   build/bin/bench_exec_fairness [--echoes 50] [--long 48] [--deadline 30] [--daemon PATH]
//
// (as root, like every sandbox bench). Not a test: nothing asserts timing.
#include <grpcpp/grpcpp.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <memory>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "sandgate/v1/sandgate.grpc.pb.h"
#include "tests/bench/bench_daemon.h"

namespace sandgate::bench {
namespace {

using SteadyClock = std::chrono::steady_clock;

constexpr char kTokenA[] = "tenant-a-bench-token";
constexpr char kTokenB[] = "tenant-b-bench-token";
// sha256 of the two tokens above (the config holds the hash, never the token).
constexpr char kHashA[] = "45bcdbe2687845a28283ab62a36c2b8b138157a12640b10219ae6a7218678a4d";
constexpr char kHashB[] = "ab2be7f94e50453681bebd39da04c2d6ac2e661fd36c6b0fa21f6ba44700f9b2";

std::unique_ptr<grpc::ClientContext> Context(const std::string& token, int deadline_s) {
  auto ctx = std::make_unique<grpc::ClientContext>();
  ctx->AddMetadata("authorization", "Bearer " + token);
  ctx->set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(deadline_s));
  return ctx;
}

std::string CreateSession(v1::Sandgate::Stub& stub, const std::string& token) {
  v1::Session s;
  grpc::Status st = stub.CreateSession(Context(token, 60).get(), v1::CreateSessionRequest(), &s);
  if (!st.ok()) {
    std::fprintf(stderr, "bench: CreateSession: %s\n", st.error_message().c_str());
    std::exit(1);
  }
  return s.id();
}

// One `echo hi` in B's session, timed to the end of its stream; -1 when it did not succeed
// within `deadline_s`.
double EchoMs(v1::Sandgate::Stub& stub, const std::string& session, int deadline_s) {
  v1::ExecRequest req;
  req.set_session_id(session);
  req.set_command("echo hi");
  const SteadyClock::time_point start = SteadyClock::now();
  auto ctx = Context(kTokenB, deadline_s);
  auto reader = stub.Exec(ctx.get(), req);
  v1::ExecResponse r;
  while (reader->Read(&r)) {
  }
  if (!reader->Finish().ok()) return -1;
  return std::chrono::duration<double, std::milli>(SteadyClock::now() - start).count();
}

struct Phase {
  std::vector<double> ms;
  int timed_out = 0;
};

Phase Echoes(v1::Sandgate::Stub& stub, const std::string& session, int n, int deadline_s) {
  Phase p;
  for (int i = 0; i < n; ++i) {
    double ms = EchoMs(stub, session, deadline_s);
    if (ms < 0) {
      ++p.timed_out;
    } else {
      p.ms.push_back(ms);
    }
  }
  return p;
}

void Print(const char* name, const Phase& p) {
  std::printf("%-28s n=%zu median %8.2f ms  p90 %8.2f ms  timed out %d\n", name, p.ms.size(),
              Median(p.ms), Quantile(p.ms, 0.9), p.timed_out);
}

int Main(int argc, char** argv) {
  int echoes = 50, long_execs = 48, deadline_s = 30;
  std::string daemon_path = SANDGATED_PATH;
  for (int i = 1; i + 1 < argc; i += 2) {
    std::string flag = argv[i];
    if (flag == "--echoes") echoes = std::atoi(argv[i + 1]);
    if (flag == "--long") long_execs = std::atoi(argv[i + 1]);
    if (flag == "--deadline") deadline_s = std::atoi(argv[i + 1]);
    if (flag == "--daemon") daemon_path = argv[i + 1];
  }
  const std::string config =
      absl::StrCat(R"({"tenants": [{"name": "a", "token_sha256": ")", kHashA,
                   R"("}, {"name": "b", "token_sha256": ")", kHashB,
                   R"("}], "local": {"uid_base": 196000, "uid_count": 16}})");
  Daemon d = Daemon::Start(config, daemon_path);
  auto stub_a = d.Stub();
  auto stub_b = d.Stub();
  const std::string session_a = CreateSession(*stub_a, kTokenA);
  const std::string session_b = CreateSession(*stub_b, kTokenB);
  EchoMs(*stub_b, session_b, deadline_s);  // warm: the first Exec of a session pays its setup

  Phase alone = Echoes(*stub_b, session_b, echoes, deadline_s);

  // A's long commands: the first 32 (max_concurrent_execs) one at a time, each until it
  // says it runs, so they hold every thread; the rest queue behind them.
  struct Long {
    std::unique_ptr<grpc::ClientContext> ctx;
    std::unique_ptr<grpc::ClientReader<v1::ExecResponse>> reader;
  };
  std::vector<Long> held;
  v1::ExecRequest hold;
  hold.set_session_id(session_a);
  hold.set_command("echo started; exec sleep 3600");
  for (int i = 0; i < long_execs; ++i) {
    Long l;
    l.ctx = Context(kTokenA, 3600);
    l.reader = stub_a->Exec(l.ctx.get(), hold);
    v1::ExecResponse first;
    if (i < 32 && !l.reader->Read(&first)) {
      std::fprintf(stderr, "bench: A's command %d ended before it started\n", i);
      return 1;
    }
    held.push_back(std::move(l));
  }
  Phase saturated = Echoes(*stub_b, session_b, echoes, deadline_s);
  for (Long& l : held) l.ctx->TryCancel();
  for (Long& l : held) {
    v1::ExecResponse r;
    while (l.reader->Read(&r)) {
    }
    l.reader->Finish();
  }

  std::printf("daemon %s; A: %d x `sleep 3600` (32 threads), B: %d x `echo hi`\n",
              daemon_path.c_str(), long_execs, echoes);
  Print("B alone", alone);
  Print("B while A saturates", saturated);
  if (!alone.ms.empty() && !saturated.ms.empty()) {
    std::printf("ratio of medians: %.2f\n", Median(saturated.ms) / Median(alone.ms));
  }
  return 0;
}

}  // namespace
}  // namespace sandgate::bench

int main(int argc, char** argv) { return sandgate::bench::Main(argc, argv); }
