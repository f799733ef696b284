// Runs/s a gateway sustains with the reference agent before run latency p99 doubles, through
// gRPC (TCP, mutual TLS) from this process: three replicas on one PostgreSQL database
// (tests/integration/cluster.h), against one replica on SQLite and one replica on PostgreSQL,
// measured in the same run so all three see the same machine.
//
// For each gateway the offered rate steps up (open loop: a new RunAnalysis every 1/rate s
// for `window` seconds, each followed to run.finished on the replica that took it); the
// baseline is the p99 at the lowest rate (at least 20 runs), and the sustained rate is the highest
// step whose p99 stays within twice it (and which completed what it was offered).
//
//   build/bin/bench_cluster [window_seconds] [rates...]   (as root; default 6 s; 0.5 1 2 3 4 6 8 12
//   16)
#include <signal.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/str_cat.h"
#include "tests/fakes/postgres_server.h"
#include "tests/integration/cluster.h"
#include "tests/sandbox/openai/analyst_scenario.h"

namespace {

namespace v1 = sandgate::v1;
using sandgate::testing::Cluster;
using Steady = std::chrono::steady_clock;

struct Step {
  double rate = 0;
  int offered = 0, succeeded = 0;
  double p50 = 0, p99 = 0;
};

double Quantile(std::vector<double> v, double q) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  return v[std::min(v.size() - 1, static_cast<size_t>(q * v.size()))];
}

// One run end to end: RunAnalysis through the round-robin channel, then its events followed
// on the replica that owns it. Its latency in ms, or -1 if it did not succeed, with why in
// `failure` (the run, the replica that took it, its final status and reason or the call's
// error), so a lost run can be told apart from a slow one.
double OneRun(const Cluster& c, v1::Sandgate::Stub& any, const std::string& csv,
              std::string* failure) {
  const auto t0 = Steady::now();
  v1::RunAnalysisRequest req;
  req.set_playbook("financial-analyst");
  auto* in = req.add_inputs();
  in->set_name("northstar_cloud_financial_statements.csv");
  in->set_content(csv);
  v1::Run run;
  {
    auto ctx = Cluster::Context(Cluster::kAlphaToken);
    grpc::Status st = any.RunAnalysis(ctx.get(), req, &run);
    if (!st.ok()) {
      *failure = absl::StrCat("RunAnalysis: ", st.error_code(), " ", st.error_message());
      return -1;
    }
  }
  const int owner = std::max(0, c.IndexOf(run.replica()));
  auto ctx = Cluster::Context(Cluster::kAlphaToken);
  v1::StreamEventsRequest sreq;
  sreq.set_run_id(run.id());
  sreq.set_follow(true);
  auto reader = c.Stub(owner)->StreamEvents(ctx.get(), sreq);
  v1::Event e;
  bool ok = false;
  std::string finished = "no run.finished";
  while (reader->Read(&e)) {
    if (e.has_run_finished()) {
      ok = e.run_finished().status() == v1::RUN_STATUS_SUCCEEDED;
      finished = absl::StrCat("run.finished ", v1::RunStatus_Name(e.run_finished().status()), ": ",
                              e.run_finished().reason(), " (seq ", e.seq(), ")");
      ctx->TryCancel();
      break;
    }
  }
  grpc::Status st = reader->Finish();
  if (ok) return std::chrono::duration<double, std::milli>(Steady::now() - t0).count();
  auto get_ctx = Cluster::Context(Cluster::kAlphaToken);
  v1::GetRunRequest get;
  get.set_run_id(run.id());
  v1::Run now;
  grpc::Status got = c.Stub(owner)->GetRun(get_ctx.get(), get, &now);
  *failure =
      absl::StrCat("run ", run.id(), " taken by ", run.replica(), ", followed there: ", finished,
                   "; stream ", st.error_code(), " ", st.error_message(), "; now ",
                   got.ok() ? absl::StrCat(v1::RunStatus_Name(now.status()), " on ", now.replica(),
                                           ": ", now.status_reason())
                            : absl::StrCat("GetRun ", got.error_message()));
  return -1;
}

// `at_least` runs even when rate * window is fewer: the baseline's p99 needs samples.
Step Offer(const Cluster& c, double rate, double window_s, int at_least, const std::string& csv) {
  Step step;
  step.rate = rate;
  step.offered = std::max(at_least, static_cast<int>(rate * window_s));
  auto any = c.StubAll();
  std::mutex mu;
  std::vector<double> latencies;
  std::vector<std::string> failures;
  std::vector<std::thread> threads;
  const auto t0 = Steady::now();
  for (int k = 0; k < step.offered; ++k) {
    std::this_thread::sleep_until(t0 + std::chrono::duration<double>(k / rate));
    threads.emplace_back([&] {
      std::string failure;
      const double ms = OneRun(c, *any, csv, &failure);
      std::lock_guard<std::mutex> lock(mu);
      if (ms >= 0) latencies.push_back(ms);
      if (ms < 0) failures.push_back(std::move(failure));
    });
  }
  for (std::thread& t : threads) t.join();
  for (const std::string& f : failures) std::printf("    lost: %s\n", f.c_str());
  step.succeeded = static_cast<int>(latencies.size());
  step.p50 = Quantile(latencies, 0.5);
  step.p99 = Quantile(latencies, 0.99);
  return step;
}

struct Gateway {
  const char* name;
  int replicas;
  bool sqlite;
};

}  // namespace

int main(int argc, char** argv) {
  double window = argc > 1 ? std::atof(argv[1]) : 8;
  std::vector<double> rates;
  for (int i = 2; i < argc; ++i) rates.push_back(std::atof(argv[i]));
  if (rates.empty()) rates = {1, 2, 3, 4, 6, 8, 12, 16, 24};
  if (window <= 0) {
    std::fprintf(stderr, "usage: bench_cluster [window_seconds] [rates...]\n");
    return 2;
  }
  absl::StatusOr<std::unique_ptr<sandgate::testing::PostgresServer>> pg =
      sandgate::testing::PostgresServer::Start(/*fsync=*/true);
  if (!pg.ok()) {
    std::fprintf(stderr, "%s\n", pg.status().ToString().c_str());
    return 1;
  }
  const std::string csv = sandgate::testing::SampleStatementsCsv();
  const Gateway gateways[] = {{"1 replica, SQLite", 1, true},
                              {"1 replica, PostgreSQL", 1, false},
                              {"3 replicas, PostgreSQL", 3, false}};
  std::printf("bench_cluster: %.0f s per step; runs/s offered, succeeded, latency p50/p99 (ms)\n",
              window);
  std::vector<std::string> summary;
  uint32_t uid_base = 440000;
  for (const Gateway& g : gateways) {
    absl::StatusOr<std::string> dsn = (*pg)->CreateDatabase();
    if (!dsn.ok()) return 1;
    sandgate::testing::ClusterOptions o;
    o.replicas = g.replicas;
    o.dsn = *dsn;
    o.uid_base = uid_base;
    uid_base += 1000;
    o.lease_seconds = 15;
    o.renew_seconds = 5;
    o.config = {{"log_level", "warning"}};
    // The one-daemon embedded store: the same fixture, with the store swapped.
    if (g.sqlite) o.config["store"] = {{"type", "sqlite"}, {"dsn", nullptr}};
    absl::StatusOr<std::unique_ptr<Cluster>> c = Cluster::Create(o);
    if (!c.ok() || !(*c)->StartAll().ok()) {
      std::fprintf(stderr, "%s did not start\n", g.name);
      return 1;
    }
    std::printf("%s\n", g.name);
    double baseline = 0, sustained = 0;
    for (double rate : rates) {
      const Step s = Offer(**c, rate, window, baseline == 0 ? 20 : 1, csv);
      if (baseline == 0) baseline = s.p99;
      const bool holds = s.succeeded == s.offered && s.p99 <= 2 * baseline;
      std::printf("  %5.1f/s  %4d of %4d  %7.0f / %7.0f%s\n", s.rate, s.succeeded, s.offered, s.p50,
                  s.p99, holds ? "" : "   (p99 above 2x the baseline, or runs lost)");
      std::fflush(stdout);
      if (!holds) break;
      sustained = rate;
    }
    summary.push_back(absl::StrCat(g.name, ": ", sustained,
                                   " runs/s before p99 doubled (baseline p99 ",
                                   static_cast<int>(baseline), " ms)"));
  }
  for (const std::string& line : summary) std::printf("%s\n", line.c_str());
  return 0;
}
