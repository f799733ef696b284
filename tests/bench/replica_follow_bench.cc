// Followers across replicas: two real sandgated replicas (A, B) on one throwaway PostgreSQL
// database (tests/fakes/postgres_server.h, fsync on), followers through gRPC from this
// process.
//
//   build/bin/bench_replica_follow [--followers 10] [--events 300] [--interval-ms 10]
//                                  [--lines 100000] [--rounds 3] [--daemon PATH]  (as root)
//
// lag: a run on A prints a line every `interval-ms` (sandbox.setup_commands: each read of
// its pipe is a command.output event); `followers` streams on A and as many on B follow it
// from seq 0 and take receipt time − event time (A stamps the event as it appends it; both
// share this machine's clock) of every command.output event. Same run, same moment, so the
// two sides see the same load: p50 / p99 on A (the owner: tail in memory, woken by its own
// append) against B (woken by A's PostgreSQL notification, reads the table). Target: B's p99
// <= 20 ms.
//
// Each lag round also prints how many events any follower on a side got more than 20 ms late,
// and the line (0 = the first) of the latest one: a tail at the run's first lines after its
// quiet second was gRPC's callback threads napping (server/callback_queue_waker.h).
// `--daemon` runs another sandgated binary for both replicas (e.g. one built before a change).
//
// rate: a run on A prints `lines` lines as fast as the shell can, a write each; one follower
// on A and one on B. Prints events/s appended on A (event times) and delivered to each
// (receipt times), and checks that both saw every event once, in order.
#include <grpcpp/grpcpp.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <thread>
#include <vector>

#include "sandgate/v1/sandgate.grpc.pb.h"
#include "tests/bench/bench_daemon.h"
#include "tests/bench/setup_run.h"
#include "tests/fakes/postgres_server.h"

namespace {

using sandgate::bench::Daemon;
using sandgate::bench::Follow;
using sandgate::bench::Followed;
using sandgate::bench::Quantile;
using sandgate::bench::StartRun;
namespace v1 = sandgate::v1;

// Follows `run_id` with `n` followers on each of `a` and `b` at once; returns the lags in ms
// of the A and the B side. The run waits (a `sleep` first) until every follower is attached.
void LagRound(Daemon& a, Daemon& b, int n, int events, int interval_ms, std::vector<double>* on_a,
              std::vector<double>* on_b) {
  char setup[256];
  std::snprintf(setup, sizeof setup,
                "sleep 1; for i in $(seq 1 %d); do echo line $i; sleep %.3f; done", events,
                interval_ms / 1000.0);
  auto owner = a.Stub();
  const std::string run = StartRun(*owner, setup);
  if (run.empty()) std::exit(1);
  std::atomic<int> attached{0};
  std::vector<Followed> got(2 * n);
  std::vector<std::thread> threads;
  for (int i = 0; i < 2 * n; ++i) {
    threads.emplace_back([&, i] {
      auto stub = (i < n ? a : b).Stub();
      got[i] = Follow(*stub, run, &attached);
    });
  }
  for (auto& t : threads) t.join();
  for (int i = 0; i < 2 * n; ++i) {
    if (!got[i].in_order || !got[i].finished) {
      std::fprintf(stderr, "follower %d on %s: %s\n", i, i < n ? "A" : "B",
                   got[i].in_order ? "no run.finished" : "a seq skipped or repeated");
      std::exit(1);
    }
    for (const auto& [sent, received] : got[i].outputs) {
      (i < n ? on_a : on_b)->push_back((received - sent) / 1e6);
    }
  }
  // Per line, the latest any follower of a side got it.
  const char* side_name[2] = {"A", "B"};
  for (int side = 0; side < 2; ++side) {
    int late = 0, worst_line = -1;
    double worst = 0;
    for (size_t k = 0; k < got[side * n].outputs.size(); ++k) {
      double lag = 0;
      for (int i = side * n; i < (side + 1) * n && k < got[i].outputs.size(); ++i) {
        lag = std::max(lag, (got[i].outputs[k].second - got[i].outputs[k].first) / 1e6);
      }
      if (lag > 20) ++late;
      if (lag > worst) {
        worst = lag;
        worst_line = static_cast<int>(k);
      }
    }
    std::printf("    %s: %d of %zu lines over 20 ms late; the latest, %.2f ms, line %d\n",
                side_name[side], late, got[side * n].outputs.size(), worst, worst_line);
  }
}

void Rate(Daemon& a, Daemon& b, int lines) {
  // A write per line (as bench_stream rate): each is about one read, so one event.
  const std::string setup =
      "sleep 1; i=0; while [ $i -lt " + std::to_string(lines) + " ]; do echo $i; i=$((i+1)); done";
  auto owner = a.Stub();
  const std::string run = StartRun(*owner, setup);
  if (run.empty()) std::exit(1);
  std::atomic<int> attached{0};
  Followed on[2];  // A's, B's
  std::thread ta([&] { on[0] = Follow(*a.Stub(), run, &attached); });
  std::thread tb([&] { on[1] = Follow(*b.Stub(), run, &attached); });
  ta.join();
  tb.join();
  double rate[3];  // appended, delivered on A, delivered on B
  for (int side = 0; side < 2; ++side) {
    const Followed& f = on[side];
    if (!f.in_order || !f.finished || f.outputs.size() < 2) {
      std::fprintf(stderr, "rate: the follower on %s missed events\n", side == 0 ? "A" : "B");
      std::exit(1);
    }
    const double n = static_cast<double>(f.outputs.size());
    rate[0] = n / ((f.outputs.back().first - f.outputs.front().first) / 1e9);
    rate[side + 1] = n / ((f.outputs.back().second - f.outputs.front().second) / 1e9);
  }
  std::printf("rate: %zu output events; appended on A %.0f/s, delivered on A %.0f/s, on B %.0f/s\n",
              on[1].outputs.size(), rate[0], rate[1], rate[2]);
}

}  // namespace

int main(int argc, char** argv) {
  int followers = 10, events = 300, interval_ms = 10, lines = 100000, rounds = 3;
  std::string daemon = SANDGATED_PATH;
  for (int i = 1; i + 1 < argc; i += 2) {
    const std::string flag = argv[i];
    const int v = std::atoi(argv[i + 1]);
    if (flag == "--daemon") {
      daemon = argv[i + 1];
    } else if (flag == "--followers") {
      followers = v;
    } else if (flag == "--events") {
      events = v;
    } else if (flag == "--interval-ms") {
      interval_ms = v;
    } else if (flag == "--lines") {
      lines = v;
    } else if (flag == "--rounds") {
      rounds = v;
    } else {
      std::fprintf(stderr, "unknown flag %s\n", flag.c_str());
      return 2;
    }
  }
  auto pg = sandgate::testing::PostgresServer::Start(/*fsync=*/true);
  if (!pg.ok()) {
    std::fprintf(stderr, "postgres: %s\n", pg.status().ToString().c_str());
    return 1;
  }
  auto dsn = (*pg)->CreateDatabase();
  if (!dsn.ok()) return 1;
  auto config = [&](const char* id, int uid_base) {
    return std::string(R"({"store": {"type": "postgres", "dsn": ")") + *dsn +
           R"("}, "replica": {"id": ")" + id +
           R"("}, "max_sandboxes": 16, "local": {"uid_base": )" + std::to_string(uid_base) +
           R"(, "uid_count": 16}})";
  };
  Daemon a = Daemon::Start(config("bench-a", 306000), daemon);
  Daemon b = Daemon::Start(config("bench-b", 306100), daemon);
  std::printf("lag: %d followers on A (the run's owner) and %d on B, %d events %d ms apart\n",
              followers, followers, events, interval_ms);
  for (int r = 0; r < rounds; ++r) {
    std::vector<double> on_a, on_b;
    LagRound(a, b, followers, events, interval_ms, &on_a, &on_b);
    std::printf("  round %d: A p50 %.2f ms p99 %.2f ms | B p50 %.2f ms p99 %.2f ms\n", r + 1,
                Quantile(on_a, 0.5), Quantile(on_a, 0.99), Quantile(on_b, 0.5),
                Quantile(on_b, 0.99));
  }
  for (int r = 0; r < rounds; ++r) Rate(a, b, lines);
  return 0;
}
