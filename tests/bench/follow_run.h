// What the benchmarks do after RunAnalysis, as a caller would: follow the run's events to its
// terminal event.
#ifndef SANDGATE_TESTS_BENCH_FOLLOW_RUN_H_
#define SANDGATE_TESTS_BENCH_FOLLOW_RUN_H_

#include <grpcpp/grpcpp.h>

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

}  // namespace sandgate::bench

#endif  // SANDGATE_TESTS_BENCH_FOLLOW_RUN_H_
