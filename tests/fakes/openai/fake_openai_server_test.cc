// FakeOpenAiServer, the harness around fake_openai.py: it never waits unbounded on the server.
#include "tests/fakes/openai/fake_openai_server.h"

#include <signal.h>
#include <sys/wait.h>

#include <cerrno>

#include "absl/time/clock.h"
#include "gtest/gtest.h"

namespace sandgate::testing {
namespace {

// A server that does not exit on SIGTERM (here: stopped, so the SIGTERM stays pending; in CI
// a wedged one) is killed after the grace instead of holding its test in waitpid for good.
TEST(FakeOpenAiServerTest, AServerThatIgnoresStopIsKilledAfterTheGrace) {
  FakeOpenAiServer fake("sk-harness-test-key");
  ASSERT_TRUE(fake.Start());
  fake.set_stop_grace(absl::Milliseconds(300));
  const pid_t pid = fake.pid();
  ASSERT_EQ(kill(pid, SIGSTOP), 0);
  const absl::Time t0 = absl::Now();
  fake.Stop();
  EXPECT_LT(absl::Now() - t0, absl::Seconds(5));
  EXPECT_EQ(kill(pid, 0), -1);  // gone and reaped
  EXPECT_EQ(errno, ESRCH);
}

// A stalled server fails an admin call within the harness's bound, as an answer naming the
// transport error, rather than after the HTTP client's default of ten minutes.
TEST(FakeOpenAiServerTest, AStalledServerFailsAnAdminCall) {
  FakeOpenAiServer fake("sk-harness-test-key");
  ASSERT_TRUE(fake.Start());
  ASSERT_TRUE(fake.State().contains("containers"));
  ASSERT_EQ(kill(fake.pid(), SIGSTOP), 0);
  // Stopped for certain before the call (kill only asks: on a loaded machine the server could
  // still answer it); WNOWAIT leaves the stop for the harness to see too.
  siginfo_t info{};
  ASSERT_EQ(waitid(P_PID, static_cast<id_t>(fake.pid()), &info, WSTOPPED | WNOWAIT), 0);
  fake.set_stop_grace(absl::Milliseconds(300));
  fake.set_call_timeout(absl::Milliseconds(500));
  const absl::Time t0 = absl::Now();
  nlohmann::json state = fake.State();
  EXPECT_LT(absl::Now() - t0, absl::Seconds(5));
  EXPECT_TRUE(state.contains("transport_error")) << state.dump();
}

}  // namespace
}  // namespace sandgate::testing
