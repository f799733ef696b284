// What the StreamEvents benchmarks share: a run whose sandbox prints what they follow, and the
// clock they take lags with.
#ifndef SANDGATE_TESTS_BENCH_SETUP_RUN_H_
#define SANDGATE_TESTS_BENCH_SETUP_RUN_H_

#include <grpcpp/grpcpp.h>

#include <chrono>
#include <cstdint>
#include <cstdio>
#include <string>

#include "sandgate/v1/sandgate.grpc.pb.h"

namespace sandgate::bench {

// The wall clock the daemon stamps events with (client and daemon share the machine's).
inline int64_t NowNanos() {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(
             std::chrono::system_clock::now().time_since_epoch())
      .count();
}

inline int64_t EventNanos(const v1::Event& e) {
  return e.time().seconds() * 1000000000 + e.time().nanos();
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
  v1::Run run;
  grpc::ClientContext ctx;
  grpc::Status st = stub.RunAnalysis(&ctx, req, &run);
  if (!st.ok()) {
    std::fprintf(stderr, "RunAnalysis: %s\n", st.error_message().c_str());
    return "";
  }
  return run.id();
}

}  // namespace sandgate::bench

#endif  // SANDGATE_TESTS_BENCH_SETUP_RUN_H_
