// StreamEvents through the gRPC API, as callers see it: a real sandgated on a temporary Unix
// socket, C++ followers on their own connections.
//
//   build/bin/bench_stream lag  [--followers 100] [--events 300] [--interval-ms 10] [--rounds 3]
//                               [--workload trickle|analysis]
//   build/bin/bench_stream rate [--lines 300000] [--rounds 3]          (both as root)
//   ... [--daemon PATH]   another sandgated build (beside its sandgate-init), e.g. one from
//                         before a change, to compare the two on the same machine load
//
// Both also print the daemon's CPU time per event delivered (user + system, from
// /proc/PID/stat): on a machine shared with other work, wall-clock rates follow the load,
// CPU per event much less.
//
// The events come from a real path: a run's `sandbox.setup_commands`, whose output becomes
// command.output events as the daemon reads it (one event per read of the command's pipe).
//
// lag: a setup command prints a line every `interval-ms`; `followers` streams follow the run
// from seq 0 and take receipt time − event time (the daemon stamps an event when it appends
// it; client and daemon share the machine's clock) of every command.output event appended
// after the last follower was attached. Baseline, alternating with it run by run: the same
// run with one follower. Every follower must see every event once, in order (checked).
// --workload analysis follows the flagship run instead (financial-analyst on the sample, a
// second's wait in its setup), over every event: its events come in bursts (the program's
// output, the artifacts, every check), where the trickle never has two events in flight.
//
// rate: a setup command prints `lines` lines as fast as the shell can (a write per line);
// the daemon makes an event of each read, so events/s produced is what its append path
// sustains. One follower, attached before the output starts. Prints events/s produced
// (event times), delivered live to the follower (receipt times), and replayed from the store
// after the run (follow=false from seq 0); the baseline is the same command writing to a pipe
// that nothing but a reader drains (lines/s: how fast the producer could go).
#include <grpcpp/grpcpp.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <iterator>
#include <string>
#include <thread>
#include <vector>

#include "sandgate/v1/sandgate.grpc.pb.h"
#include "tests/bench/bench_daemon.h"
#include "tests/bench/setup_run.h"
#include "tests/sandbox/openai/analyst_scenario.h"

namespace {

using sandgate::bench::Daemon;
using sandgate::bench::EventNanos;
using sandgate::bench::Follow;
using sandgate::bench::Followed;
using sandgate::bench::Median;
using sandgate::bench::NowNanos;
using sandgate::bench::Quantile;
using sandgate::bench::StartAnalysisRun;
using sandgate::bench::StartRun;
namespace v1 = sandgate::v1;

struct LagRound {
  std::vector<double> lags_ms;
  double cpu_us_per_delivery = 0;  // daemon CPU per (event x follower)
  int64_t dropped = 0;             // output events appended before every follower was attached
  bool ok = true;
};

// The run LagOnce follows: `analysis` non-empty makes it the flagship run on that CSV (its
// events in bursts: the program's output, the artifacts, every check), and then every event
// counts; otherwise the trickle (a line every interval_ms) and its command.output events.
LagRound LagOnce(const Daemon& d, int followers, int events, int interval_ms,
                 const std::string& analysis = "") {
  LagRound round;
  auto stub = d.Stub();
  // A second's pause first, so that every follower is attached before the output starts.
  char setup[256];
  std::snprintf(setup, sizeof(setup),
                "sleep 1; i=0; while [ $i -lt %d ]; do echo $i; sleep %.3f; i=$((i+1)); done",
                events, interval_ms / 1000.0);
  const std::string run =
      analysis.empty() ? StartRun(*stub, setup) : StartAnalysisRun(*stub, analysis);
  if (run.empty()) {
    round.ok = false;
    return round;
  }
  std::vector<std::unique_ptr<v1::Sandgate::Stub>> stubs;
  for (int i = 0; i < followers; ++i) stubs.push_back(d.Stub());
  std::vector<Followed> seen(followers);
  const double cpu_before = sandgate::bench::CpuSeconds(d.pid());
  std::vector<std::thread> threads;
  std::atomic<int> attached{0};
  for (int i = 0; i < followers; ++i) {
    threads.emplace_back([&, i] { seen[i] = Follow(*stubs[i], run, &attached); });
  }
  for (auto& t : threads) t.join();
  const double cpu = sandgate::bench::CpuSeconds(d.pid()) - cpu_before;
  int64_t deliveries = 0;
  for (const Followed& f : seen) deliveries += f.events;
  round.cpu_us_per_delivery = deliveries ? cpu * 1e6 / static_cast<double>(deliveries) : 0;
  int64_t all_attached = 0;
  for (const Followed& f : seen) all_attached = std::max(all_attached, f.attached);
  const int64_t expected = seen[0].events;
  for (const Followed& f : seen) {
    if (!f.status.ok() || !f.finished || !f.in_order || f.events != expected) {
      std::fprintf(stderr, "follower: %s, finished %d, in order %d, %lld events (first had %lld)\n",
                   f.status.error_message().c_str(), f.finished, f.in_order,
                   static_cast<long long>(f.events), static_cast<long long>(expected));
      round.ok = false;
    }
    for (const auto& [at, received] : analysis.empty() ? f.outputs : f.all) {
      if (at <= all_attached) {
        ++round.dropped;
        continue;
      }
      round.lags_ms.push_back((received - at) / 1e6);
    }
  }
  return round;
}

int Lag(const std::string& daemon, int followers, int events, int interval_ms, int rounds,
        const std::string& analysis) {
  Daemon d = Daemon::Start(R"({"max_concurrent_runs": 4})", daemon);
  LagOnce(d, 1, 20, interval_ms, analysis);  // warm-up: page cache, first sandbox
  std::vector<double> one_p99, many_p99, one_p50, many_p50, one_cpu, many_cpu;
  int64_t dropped = 0;
  bool ok = true;
  for (int r = 0; r < rounds; ++r) {
    LagRound base = LagOnce(d, 1, events, interval_ms, analysis);
    LagRound full = LagOnce(d, followers, events, interval_ms, analysis);
    ok = ok && base.ok && full.ok;
    dropped += full.dropped + base.dropped;
    one_p50.push_back(Quantile(base.lags_ms, 0.5));
    one_p99.push_back(Quantile(base.lags_ms, 0.99));
    many_p50.push_back(Quantile(full.lags_ms, 0.5));
    many_p99.push_back(Quantile(full.lags_ms, 0.99));
    one_cpu.push_back(base.cpu_us_per_delivery);
    many_cpu.push_back(full.cpu_us_per_delivery);
    std::printf(
        "round %d: 1 follower p50 %.3f p99 %.3f ms (%zu samples, %.1f us CPU/delivery) | "
        "%d followers p50 %.3f p99 %.3f max %.3f ms (%zu samples, %.1f us CPU/delivery)\n",
        r + 1, one_p50.back(), one_p99.back(), base.lags_ms.size(), one_cpu.back(), followers,
        many_p50.back(), many_p99.back(), Quantile(full.lags_ms, 1.0), full.lags_ms.size(),
        many_cpu.back());
    std::fflush(stdout);
  }
  std::printf(
      "median over %d rounds: 1 follower p50 %.3f ms p99 %.3f ms; %d followers p50 %.3f "
      "ms p99 %.3f ms (target p99 <= 10 ms); daemon CPU per delivery %.1f us (1) %.1f "
      "us (%d)%s\n",
      rounds, Median(one_p50), Median(one_p99), followers, Median(many_p50), Median(many_p99),
      Median(one_cpu), Median(many_cpu), followers,
      ok ? "" : "  [SOME FOLLOWER MISSED OR REPEATED AN EVENT]");
  if (dropped > 0)
    std::printf("(%lld samples before the last follower attached, not counted)\n",
                static_cast<long long>(dropped));
  return ok ? 0 : 1;
}

// The fast producer: one write(2) per line (dash's echo is a builtin without stdio buffering).
std::string FastLoop(int lines) {
  return "i=0; while [ $i -lt " + std::to_string(lines) + " ]; do echo $i; i=$((i+1)); done";
}

// Baseline: the same loop writing into a pipe the bench drains; lines per second.
double ProducerAlone(int lines) {
  int p[2];
  if (pipe(p) != 0) return 0;
  const auto start = std::chrono::steady_clock::now();
  pid_t pid = fork();
  if (pid == 0) {
    dup2(p[1], 1);
    close(p[0]);
    close(p[1]);
    execl("/bin/sh", "sh", "-c", FastLoop(lines).c_str(), nullptr);
    _exit(127);
  }
  close(p[1]);
  char buf[65536];
  while (read(p[0], buf, sizeof(buf)) > 0) {
  }
  close(p[0]);
  waitpid(pid, nullptr, 0);
  return lines / std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
}

struct RateRound {
  double produced = 0, live = 0, replayed = 0, bytes_per_event = 0;
  double live_cpu_us = 0, replay_cpu_us = 0;  // daemon CPU per event
  int64_t events = 0;
  bool ok = true;
};

RateRound RateOnce(const Daemon& d, int lines) {
  RateRound round;
  auto stub = d.Stub();
  const std::string run = StartRun(*stub, "sleep 0.5; " + FastLoop(lines));
  if (run.empty()) {
    round.ok = false;
    return round;
  }
  const double cpu_start = sandgate::bench::CpuSeconds(d.pid());
  Followed f = Follow(*stub, run, nullptr);
  const double cpu_followed = sandgate::bench::CpuSeconds(d.pid());
  round.ok = f.status.ok() && f.finished && f.in_order && f.outputs.size() > 1;
  if (!round.ok) {
    std::fprintf(stderr, "follower: %s, finished %d, in order %d\n",
                 f.status.error_message().c_str(), f.finished, f.in_order);
    return round;
  }
  const auto& o = f.outputs;
  round.events = static_cast<int64_t>(o.size());
  round.produced = (o.size() - 1) / ((o.back().first - o.front().first) / 1e9);
  round.live = (o.size() - 1) / ((o.back().second - o.front().second) / 1e9);
  round.live_cpu_us = (cpu_followed - cpu_start) * 1e6 / static_cast<double>(f.events);

  // The whole log again, from the store, as a caller that reconnects with after_seq 0.
  grpc::ClientContext ctx;
  v1::StreamEventsRequest req;
  req.set_run_id(run);
  auto reader = stub->StreamEvents(&ctx, req);
  v1::Event e;
  int64_t n = 0, bytes = 0, outputs = 0;
  const auto start = std::chrono::steady_clock::now();
  while (reader->Read(&e)) {
    ++n;
    if (e.has_command_output()) {
      ++outputs;
      bytes += static_cast<int64_t>(e.command_output().data().size());
    }
  }
  const double secs =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  round.ok = reader->Finish().ok() && n == f.events;
  round.replayed = n / secs;
  round.replay_cpu_us =
      (sandgate::bench::CpuSeconds(d.pid()) - cpu_followed) * 1e6 / static_cast<double>(n);
  round.bytes_per_event = outputs ? static_cast<double>(bytes) / outputs : 0;
  return round;
}

int Rate(const std::string& daemon, int lines, int rounds) {
  Daemon d = Daemon::Start(R"({"max_concurrent_runs": 4})", daemon);
  RateOnce(d, lines / 10);  // warm-up
  std::vector<double> produced, live, replayed, alone, live_cpu, replay_cpu;
  bool ok = true;
  for (int r = 0; r < rounds; ++r) {
    alone.push_back(ProducerAlone(lines));
    RateRound x = RateOnce(d, lines);
    ok = ok && x.ok;
    produced.push_back(x.produced);
    live.push_back(x.live);
    replayed.push_back(x.replayed);
    live_cpu.push_back(x.live_cpu_us);
    replay_cpu.push_back(x.replay_cpu_us);
    std::printf(
        "round %d: %lld output events (%.1f bytes each): produced %.0f/s, delivered live "
        "%.0f/s (%.1f us CPU each), replayed %.0f/s (%.1f us CPU each) | producer alone "
        "%.0f lines/s\n",
        r + 1, static_cast<long long>(x.events), x.bytes_per_event, x.produced, x.live,
        x.live_cpu_us, x.replayed, x.replay_cpu_us, alone.back());
    std::fflush(stdout);
  }
  std::printf(
      "median over %d rounds: produced %.0f events/s, delivered live %.0f events/s "
      "(%.1f us daemon CPU each, append + delivery), replayed %.0f events/s (%.1f us "
      "each) (target >= 50,000); producer alone %.0f lines/s%s\n",
      rounds, Median(produced), Median(live), Median(live_cpu), Median(replayed),
      Median(replay_cpu), Median(alone), ok ? "" : "  [A ROUND FAILED]");
  return ok ? 0 : 1;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 2 || (std::strcmp(argv[1], "lag") != 0 && std::strcmp(argv[1], "rate") != 0)) {
    std::fprintf(stderr, "usage: bench_stream lag|rate [--flag N]... (see the source's header)\n");
    return 2;
  }
  int followers = 100, events = 300, interval_ms = 10, rounds = 3, lines = 300000;
  std::string daemon = SANDGATED_PATH;
  std::string workload = "trickle";
  for (int i = 2; i + 1 < argc; i += 2) {
    const std::string flag = argv[i];
    const int v = std::atoi(argv[i + 1]);
    if (flag == "--daemon")
      daemon = argv[i + 1];
    else if (flag == "--followers")
      followers = v;
    else if (flag == "--events")
      events = v;
    else if (flag == "--interval-ms")
      interval_ms = v;
    else if (flag == "--rounds")
      rounds = v;
    else if (flag == "--lines")
      lines = v;
    else if (flag == "--workload")
      workload = argv[i + 1];
    else {
      std::fprintf(stderr, "unknown flag %s\n", flag.c_str());
      return 2;
    }
  }
  signal(SIGPIPE, SIG_IGN);
  if (workload != "trickle" && workload != "analysis") {
    std::fprintf(stderr, "--workload: trickle or analysis, not %s\n", workload.c_str());
    return 2;
  }
  std::string analysis;
  if (workload == "analysis") {
    analysis = sandgate::testing::SampleStatementsCsv();
    if (analysis.empty()) {
      std::fprintf(stderr, "cannot read the sample statements under %s\n", SANDGATE_SOURCE_DIR);
      return 2;
    }
  }
  return std::strcmp(argv[1], "lag") == 0
             ? Lag(daemon, followers, events, interval_ms, rounds, analysis)
             : Rate(daemon, lines, rounds);
}
