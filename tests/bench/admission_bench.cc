// One daemon's run queue as a caller sees it (issue 21): how long RunAnalysis takes to answer
// while runs pile up behind `max_concurrent_runs: 1`, on a daemon without replicas.
//
// Starts sandgated (its own temporary state directory and Unix socket, `max_concurrent_runs`
// 1, `max_queued_runs` 4096, uids from 363000) and, from one client thread on one channel:
//   1. starts a holder run (the sample run, reference agent, its sandbox first running
//      `sleep 600`) and waits until it runs, so it keeps the only slot and nothing else starts;
//   2. sends `--runs` more of the same RunAnalysis back to back, each timed from the call to
//      its answer: each is queued behind the i-1 before it (RunAnalysis answers once the run
//      is persisted, queued and told its position: the admission queue's count, order and
//      enqueue, and a Dispatch that lists the order again);
//   3. cancels the waiting runs, the last queued first (so no other run's position changes),
//      each CancelRun timed, then the holder, and stops the daemon (SIGTERM, drained).
// With `--against PATH` it does this for that daemon and `--daemon` alternately, `--rounds`
// times each (PATH first), so both see the same machine, and prints each round, the medians
// of the rounds and their ratio.
//
//   build/bin/bench_admission [--runs 200] [--daemon PATH] [--against OLD_PATH --rounds 3]
//
// (as root, like every sandbox bench). Not a test: nothing asserts timing; the exit code is
// 0 when every call succeeded.
#include <grpcpp/grpcpp.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <thread>
#include <vector>

#include "sandgate/v1/sandgate.grpc.pb.h"
#include "tests/bench/bench_daemon.h"
#include "tests/sandbox/openai/analyst_scenario.h"

namespace sandgate::bench {
namespace {

using SteadyClock = std::chrono::steady_clock;

// The last calls' median is reported on its own: there the queue is longest.
constexpr int kTail = 50;

constexpr char kConfig[] =
    R"({"max_concurrent_runs": 1, "max_queued_runs": 4096,
        "local": {"uid_base": 363000, "uid_count": 16}})";

double MsSince(SteadyClock::time_point start) {
  return std::chrono::duration<double, std::milli>(SteadyClock::now() - start).count();
}

[[noreturn]] void Fail(const std::string& what, const grpc::Status& st) {
  std::fprintf(stderr, "bench: %s: %s\n", what.c_str(), st.error_message().c_str());
  std::exit(1);
}

// The sample run (financial-analyst, reference agent), its sandbox sleeping first: the one
// admitted holds the slot for the whole round.
v1::RunAnalysisRequest SampleRequest(const std::string& csv) {
  v1::RunAnalysisRequest req;
  auto* in = req.add_inputs();
  in->set_name("northstar_cloud_financial_statements.csv");
  in->set_content(csv);
  req.mutable_sandbox()->add_setup_commands("sleep 600");
  return req;
}

v1::Run RunAnalysis(v1::Sandgate::Stub& stub, const v1::RunAnalysisRequest& req) {
  grpc::ClientContext ctx;
  v1::Run run;
  grpc::Status st = stub.RunAnalysis(&ctx, req, &run);
  if (!st.ok()) Fail("RunAnalysis", st);
  return run;
}

v1::RunStatus Status(v1::Sandgate::Stub& stub, const std::string& run_id) {
  grpc::ClientContext ctx;
  v1::GetRunRequest req;
  req.set_run_id(run_id);
  v1::Run run;
  grpc::Status st = stub.GetRun(&ctx, req, &run);
  if (!st.ok()) Fail("GetRun", st);
  return run.status();
}

void Cancel(v1::Sandgate::Stub& stub, const std::string& run_id) {
  grpc::ClientContext ctx;
  v1::CancelRunRequest req;
  req.set_run_id(run_id);
  req.set_reason("bench_admission is done");
  v1::Run run;
  grpc::Status st = stub.CancelRun(&ctx, req, &run);
  if (!st.ok()) Fail("CancelRun " + run_id, st);
}

struct Round {
  std::string daemon;
  std::vector<double> calls;    // ms, in the order sent
  std::vector<double> cancels;  // ms
  double median = 0, p90 = 0, max = 0, tail = 0, cancel = 0;
};

Round OneRound(const std::string& daemon_path, const std::string& csv, int runs) {
  Round r;
  r.daemon = daemon_path;
  Daemon d = Daemon::Start(kConfig, daemon_path);
  auto stub = d.Stub();
  const v1::RunAnalysisRequest req = SampleRequest(csv);

  const std::string holder = RunAnalysis(*stub, req).id();
  // Until its sandbox is up and sleeping: the timed calls do not share the machine with a
  // sandbox's start.
  for (int i = 0; i < 600 && Status(*stub, holder) != v1::RUN_STATUS_RUNNING; ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  if (Status(*stub, holder) != v1::RUN_STATUS_RUNNING) {
    std::fprintf(stderr, "bench: the holder run %s did not start within 30 s\n", holder.c_str());
    std::exit(1);
  }
  std::this_thread::sleep_for(std::chrono::seconds(1));

  std::vector<std::string> waiting;
  for (int i = 0; i < runs; ++i) {
    const SteadyClock::time_point start = SteadyClock::now();
    const v1::Run run = RunAnalysis(*stub, req);
    r.calls.push_back(MsSince(start));
    if (run.status() != v1::RUN_STATUS_QUEUED) {
      std::fprintf(stderr, "bench: run %d is %s, not queued\n", i,
                   v1::RunStatus_Name(run.status()).c_str());
      std::exit(1);
    }
    waiting.push_back(run.id());
  }
  // Had it ended, a queued run would have started, and some calls measured a shorter queue.
  if (Status(*stub, holder) != v1::RUN_STATUS_RUNNING) {
    std::fprintf(stderr, "bench: the holder run %s ended while the calls were timed\n",
                 holder.c_str());
    std::exit(1);
  }
  for (auto it = waiting.rbegin(); it != waiting.rend(); ++it) {
    const SteadyClock::time_point start = SteadyClock::now();
    Cancel(*stub, *it);
    r.cancels.push_back(MsSince(start));
  }
  Cancel(*stub, holder);

  r.median = Median(r.calls);
  r.p90 = Quantile(r.calls, 0.9);
  r.max = Quantile(r.calls, 1);
  const size_t tail = std::min<size_t>(kTail, r.calls.size());
  r.tail = Median(std::vector<double>(r.calls.end() - static_cast<long>(tail), r.calls.end()));
  r.cancel = Median(r.cancels);
  return r;  // the daemon drains (SIGTERM) and its directory goes
}

void PrintHeader(int runs) {
  std::printf(
      "%d RunAnalysis calls back to back behind one running run (max_concurrent_runs 1)"
      "; ms\n",
      runs);
  std::printf("%-6s %-8s %8s %8s %8s %14s %14s\n", "round", "daemon", "median", "p90", "max",
              "last-50 med", "cancel med");
}

void PrintRow(const std::string& round, const std::string& label, const Round& r) {
  std::printf("%-6s %-8s %8.2f %8.2f %8.2f %14.2f %14.2f\n", round.c_str(), label.c_str(), r.median,
              r.p90, r.max, r.tail, r.cancel);
}

// The median over rounds of one figure of each round.
Round MedianOfRounds(const std::vector<Round>& rounds) {
  auto of = [&](double Round::*field) {
    std::vector<double> v;
    for (const Round& r : rounds) v.push_back(r.*field);
    return Median(v);
  };
  Round m;
  m.median = of(&Round::median);
  m.p90 = of(&Round::p90);
  m.max = of(&Round::max);
  m.tail = of(&Round::tail);
  m.cancel = of(&Round::cancel);
  return m;
}

int Main(int argc, char** argv) {
  int runs = 200, rounds = 3;
  std::string daemon_path = SANDGATED_PATH, against;
  for (int i = 1; i + 1 < argc; i += 2) {
    const std::string flag = argv[i];
    if (flag == "--runs") runs = std::atoi(argv[i + 1]);
    if (flag == "--rounds") rounds = std::atoi(argv[i + 1]);
    if (flag == "--daemon") daemon_path = argv[i + 1];
    if (flag == "--against") against = argv[i + 1];
  }
  if (runs < 1 || rounds < 1) {
    std::fprintf(stderr, "bench: --runs and --rounds must be at least 1\n");
    return 2;
  }
  const std::string csv = testing::SampleStatementsCsv();
  if (csv.empty()) {
    std::fprintf(stderr, "bench: the sample CSV is missing under %s\n", SANDGATE_SOURCE_DIR);
    return 1;
  }

  PrintHeader(runs);
  if (against.empty()) {
    PrintRow("1", "daemon", OneRound(daemon_path, csv, runs));
    std::printf("daemon: %s\n", daemon_path.c_str());
    return 0;
  }
  std::vector<Round> old_rounds, new_rounds;
  for (int i = 0; i < rounds; ++i) {
    old_rounds.push_back(OneRound(against, csv, runs));
    PrintRow(std::to_string(i + 1), "old", old_rounds.back());
    std::fflush(stdout);
    new_rounds.push_back(OneRound(daemon_path, csv, runs));
    PrintRow(std::to_string(i + 1), "new", new_rounds.back());
    std::fflush(stdout);
  }
  const Round old_median = MedianOfRounds(old_rounds), new_median = MedianOfRounds(new_rounds);
  PrintRow("median", "old", old_median);
  PrintRow("median", "new", new_median);
  std::printf("%-6s %-8s %8.2f %8.2f %8.2f %14.2f %14.2f\n", "ratio", "new/old",
              new_median.median / old_median.median, new_median.p90 / old_median.p90,
              new_median.max / old_median.max, new_median.tail / old_median.tail,
              new_median.cancel / old_median.cancel);
  std::printf("old: %s\nnew: %s\n", against.c_str(), daemon_path.c_str());
  return 0;
}

}  // namespace
}  // namespace sandgate::bench

int main(int argc, char** argv) { return sandgate::bench::Main(argc, argv); }
