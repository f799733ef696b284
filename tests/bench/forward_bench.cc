// The cost of forwarding (docs/replicas.md, "Forwarding"): Exec on a kept session of replica
// A, sent directly to A and through replica B, alternately in the same run, with two real
// daemons on one throwaway PostgreSQL database and loopback TCP with mutual TLS. Prints the
// median and p90 of each, for a command with no output and one writing 1 MiB.
//
//   build/bin/bench_forward [rounds]     # default 200
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

#include "common/sha256.h"
#include "tests/common/temp_dir.h"
#include "tests/fakes/postgres_server.h"
#include "tests/fakes/test_certs.h"
#include "tests/integration/tls_replica.h"

namespace sandgate::testing {
namespace {

constexpr char kToken[] = "bench-forward-token";

// Wall time of one Exec, from the call to its status, in ms; -1 when it failed.
double TimedExec(v1::Sandgate::Stub& stub, const std::string& session, const std::string& cmd) {
  const auto start = std::chrono::steady_clock::now();
  auto ctx = DaemonHarness::Context(kToken);
  v1::ExecRequest req;
  req.set_session_id(session);
  req.set_command(cmd);
  auto reader = stub.Exec(ctx.get(), req);
  v1::ExecResponse r;
  while (reader->Read(&r)) {
  }
  if (!reader->Finish().ok()) return -1;
  return std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start)
      .count();
}

double Percentile(std::vector<double> v, double p) {
  std::sort(v.begin(), v.end());
  return v[static_cast<size_t>(p * (v.size() - 1))];
}

int Run(int rounds) {
  ScopedTempDir tmp("sg-bench-forward");
  absl::StatusOr<TestCertificates> certs = TestCertificates::Create(tmp.path());
  if (!certs.ok()) {
    std::fprintf(stderr, "certificates: %s\n", certs.status().ToString().c_str());
    return 1;
  }
  absl::StatusOr<std::string> dsn = PostgresServer::Shared().CreateDatabase();
  if (!dsn.ok()) {
    std::fprintf(stderr, "postgres: %s\n", dsn.status().ToString().c_str());
    return 1;
  }
  const nlohmann::json tenants = {{{"name", "bench"}, {"token_sha256", Sha256::Hex(kToken)}}};
  TlsReplica a(tmp.path() + "/a", TlsReplicaConfig(*dsn, "replica-a", 306000, *certs, tenants, 15),
               *certs);
  TlsReplica b(tmp.path() + "/b", TlsReplicaConfig(*dsn, "replica-b", 306100, *certs, tenants, 15),
               *certs);
  if (!a.Start(kToken) || !b.Start(kToken)) {
    std::fprintf(stderr, "a replica did not start:\n%s\n%s\n", a.Log().c_str(), b.Log().c_str());
    return 1;
  }
  auto direct = a.Stub();
  auto through = b.Stub();
  v1::Session s;
  {
    grpc::Status st = direct->CreateSession(DaemonHarness::Context(kToken).get(), {}, &s);
    if (!st.ok()) {
      std::fprintf(stderr, "CreateSession: %s\n", st.error_message().c_str());
      return 1;
    }
  }
  struct Case {
    const char* name;
    std::string command;
  };
  for (const Case& c :
       {Case{"true", "true"}, Case{"1 MiB of output", "head -c 1048576 /dev/zero"}}) {
    for (int i = 0; i < 10; ++i) {  // warm: channels connected, caches filled
      TimedExec(*direct, s.id(), c.command);
      TimedExec(*through, s.id(), c.command);
    }
    std::vector<double> on_a, via_b;
    for (int i = 0; i < rounds; ++i) {
      double x = TimedExec(*direct, s.id(), c.command);
      double y = TimedExec(*through, s.id(), c.command);
      if (x < 0 || y < 0) {
        std::fprintf(stderr, "an Exec failed\n%s\n", b.Log().c_str());
        return 1;
      }
      on_a.push_back(x);
      via_b.push_back(y);
    }
    const double ma = Percentile(on_a, 0.5), mb = Percentile(via_b, 0.5);
    std::printf(
        "Exec %-16s rounds %d: directly on A median %.2f ms p90 %.2f; through B median %.2f ms "
        "p90 %.2f; +%.2f ms (%.2fx)\n",
        c.name, rounds, ma, Percentile(on_a, 0.9), mb, Percentile(via_b, 0.9), mb - ma, mb / ma);
  }
  return 0;
}

}  // namespace
}  // namespace sandgate::testing

int main(int argc, char** argv) {
  return sandgate::testing::Run(argc > 1 ? std::atoi(argv[1]) : 200);
}
