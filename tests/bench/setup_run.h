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

// Starts a run whose sandbox runs `setup` before the agent (the sandbox-probe playbook, which
// needs one input; what it then does does not matter here). Returns its id, or "" on failure.
inline std::string StartRun(v1::Sandgate::Stub& stub, const std::string& setup) {
  v1::RunAnalysisRequest req;
  req.set_playbook("sandbox-probe");
  auto* in = req.add_inputs();
  in->set_name("input.txt");
  in->set_content("x\n");
  req.mutable_sandbox()->add_setup_commands(setup);
  v1::Run run;
  grpc::ClientContext ctx;
  grpc::Status st = stub.RunAnalysis(&ctx, req, &run);
  if (!st.ok()) {
    std::fprintf(stderr, "RunAnalysis: %s\n", st.error_message().c_str());
    return "";
  }
  return run.id();
}

// One follower's view of a run: when it received its first event, and (event time, receipt
// time) of every command.output event. `in_order` is false if a seq was skipped or repeated.
struct Followed {
  int64_t attached = 0;
  std::vector<std::pair<int64_t, int64_t>> outputs;
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
    if (e.has_run_finished()) f.finished = true;
  }
  f.status = reader->Finish();
  return f;
}

}  // namespace sandgate::bench

#endif  // SANDGATE_TESTS_BENCH_SETUP_RUN_H_
