// What the benchmarks do after RunAnalysis, as a caller would: follow the run's events to its
// terminal event.
#ifndef SANDGATE_TESTS_BENCH_FOLLOW_RUN_H_
#define SANDGATE_TESTS_BENCH_FOLLOW_RUN_H_

#include <grpcpp/grpcpp.h>

#include <chrono>
#include <string>

#include "sandgate/v1/sandgate.grpc.pb.h"

namespace sandgate::bench {

// Streams `run_id`'s events with follow until the stream ends; returns the run.finished
// payload (status RUN_STATUS_UNSPECIFIED when the stream ended without one).
inline v1::RunFinished FollowToFinish(v1::Sandgate::Stub& stub, const std::string& run_id) {
  grpc::ClientContext ctx;
  v1::StreamEventsRequest req;
  req.set_run_id(run_id);
  req.set_follow(true);
  auto reader = stub.StreamEvents(&ctx, req);
  v1::RunFinished finished;
  v1::Event e;
  while (reader->Read(&e)) {
    if (e.has_run_finished()) finished = e.run_finished();
  }
  reader->Finish();
  return finished;
}

// One RunAnalysis of the sample statements `csv` (reference agent), followed until
// run.finished. Milliseconds, or -1 when it failed or did not succeed.
// `isolation`: the run's sandbox.isolation ("" = the daemon's default).
inline double TimeSampleRun(v1::Sandgate::Stub& stub, const std::string& csv,
                            const std::string& isolation = "") {
  const auto start = std::chrono::steady_clock::now();
  v1::RunAnalysisRequest req;
  req.mutable_sandbox()->set_isolation(isolation);
  auto* in = req.add_inputs();
  in->set_name("northstar_cloud_financial_statements.csv");
  in->set_content(csv);
  v1::Run run;
  grpc::ClientContext ctx;
  if (!stub.RunAnalysis(&ctx, req, &run).ok()) return -1;
  const bool ok = FollowToFinish(stub, run.id()).status() == v1::RUN_STATUS_SUCCEEDED;
  const double ms =
      std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count();
  return ok ? ms : -1;
}

}  // namespace sandgate::bench

#endif  // SANDGATE_TESTS_BENCH_FOLLOW_RUN_H_
