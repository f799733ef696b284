// What the StreamEvents benchmarks share: a run whose sandbox prints what they follow, the
// clock they take lags with, and a follower that records when each event arrived.
#ifndef SANDGATE_TESTS_BENCH_SETUP_RUN_H_
#define SANDGATE_TESTS_BENCH_SETUP_RUN_H_

#include <grpcpp/grpcpp.h>

#include <atomic>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <string>
#include <utility>
#include <vector>

#include "sandgate/v1/sandgate.grpc.pb.h"
#include "tests/bench/bench_daemon.h"  // NowNanos, EventNanos

namespace sandgate::bench {

// Sends `req`; the run's id, or "" (and why, on stderr) when RunAnalysis refused it.
inline std::string Start(v1::Sandgate::Stub& stub, const v1::RunAnalysisRequest& req) {
  v1::Run run;
  grpc::ClientContext ctx;
  grpc::Status st = stub.RunAnalysis(&ctx, req, &run);
  if (!st.ok()) {
    std::fprintf(stderr, "RunAnalysis: %s\n", st.error_message().c_str());
    return "";
  }
  return run.id();
}

// Starts a run whose sandbox runs `setup` before the agent (the sandbox-probe playbook, which
// needs one input; what it then does does not matter here). Returns its id, or "" on failure.
inline std::string StartRun(v1::Sandgate::Stub& stub, const std::string& setup) {
  v1::RunAnalysisRequest req;
  req.set_playbook("sandbox-probe");
  auto* in = req.add_inputs();
  in->set_name("input.txt");
  in->set_content("x\n");
  req.mutable_sandbox()->add_setup_commands(setup);
  return Start(stub, req);
}

// Starts the flagship run (financial-analyst, reference agent) on `csv`, its sandbox waiting a
// second first (a setup command) so that followers attach before its events begin.
inline std::string StartAnalysisRun(v1::Sandgate::Stub& stub, const std::string& csv) {
  v1::RunAnalysisRequest req;
  auto* in = req.add_inputs();
  in->set_name("northstar_cloud_financial_statements.csv");
  in->set_content(csv);
  req.mutable_sandbox()->add_setup_commands("sleep 1");
  return Start(stub, req);
}

// One follower's view of a run: when it received its first event, and (event time, receipt
// time) of every command.output event (`outputs`) and of every event (`all`). `in_order` is false
// if a seq was skipped or repeated.
struct Followed {
  int64_t attached = 0;
  std::vector<std::pair<int64_t, int64_t>> outputs;
  std::vector<std::pair<int64_t, int64_t>> all;  // the same, of every event (seq > 0)
  int64_t events = 0;
  bool in_order = true;
  bool finished = false;
  grpc::Status status;
};

inline Followed Follow(v1::Sandgate::Stub& stub, const std::string& run_id,
                       std::atomic<int>* attached) {
  Followed f;
  grpc::ClientContext ctx;
  v1::StreamEventsRequest req;
  req.set_run_id(run_id);
  req.set_follow(true);
  auto reader = stub.StreamEvents(&ctx, req);
  v1::Event e;
  int64_t last_seq = 0;
  while (reader->Read(&e)) {
    const int64_t now = NowNanos();
    if (f.attached == 0) {
      f.attached = now;
      if (attached != nullptr) attached->fetch_add(1);
    }
    if (e.seq() == 0) continue;  // a heartbeat
    if (e.seq() != last_seq + 1) f.in_order = false;
    last_seq = e.seq();
    ++f.events;
    if (e.has_command_output()) f.outputs.emplace_back(EventNanos(e), now);
    f.all.emplace_back(EventNanos(e), now);
    if (e.has_run_finished()) f.finished = true;
  }
  f.status = reader->Finish();
  return f;
}

}  // namespace sandgate::bench

#endif  // SANDGATE_TESTS_BENCH_SETUP_RUN_H_
