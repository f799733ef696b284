// A follower's lag on the real daemon after its stream was quiet for a second: gRPC's
// callback threads nap then (server/callback_queue_waker.h), and without the waker an event's
// write completed (OnWriteDone) up to 100 ms late, holding back the events behind it.
#include <algorithm>
#include <chrono>
#include <string>
#include <vector>

#include "gtest/gtest.h"
#include "tests/integration/daemon_harness.h"

namespace sandgate::testing {
namespace {

// Receipt time - event time (the daemon stamps an event as it appends it; both read this
// machine's clock), in ms.
double LagMs(const v1::Event& e) {
  const int64_t now = std::chrono::duration_cast<std::chrono::nanoseconds>(
                          std::chrono::system_clock::now().time_since_epoch())
                          .count();
  return static_cast<double>(now - (e.time().seconds() * 1000000000 + e.time().nanos())) / 1e6;
}

TEST(FollowLatency, EventsAfterAQuietSecondArriveWithoutTheCallbackThreadsNap) {
  DaemonHarness d(nlohmann::json{{"local", {{"uid_base", 303000}, {"uid_count", 8}}}});
  d.Start();
  auto stub = d.Stub();
  v1::RunAnalysisRequest req;
  req.set_playbook("sandbox-probe");
  auto* in = req.add_inputs();
  in->set_name("input.txt");
  in->set_content("x\n");
  // command.started is written to the follower, then a second of quiet (the callback threads'
  // wait times out and they nap for 100 ms), then lines 10 ms apart: the first one's write
  // lands in the nap, and each line after it waits for that write's completion.
  req.mutable_sandbox()->add_setup_commands(
      "sleep 1; for i in 1 2 3 4 5 6 7 8; do echo line $i; sleep 0.01; done");
  v1::Run run;
  auto ctx = DaemonHarness::Context();
  ASSERT_TRUE(stub->RunAnalysis(ctx.get(), req, &run).ok());
  std::vector<double> lags;
  FollowToEnd(*stub, run.id(), "", 0, [&](const v1::Event& e) {
    if (e.has_command_output()) lags.push_back(LagMs(e));
  });
  ASSERT_GE(lags.size(), 4u);
  std::string all;
  double worst = 0;
  for (double l : lags) {
    all += std::to_string(l) + " ";
    worst = std::max(worst, l);
  }
  // A nap costs 50-100 ms; a loaded machine's scheduling, a few ms.
  EXPECT_LT(worst, 40) << "lags (ms): " << all;
}

}  // namespace
}  // namespace sandgate::testing
