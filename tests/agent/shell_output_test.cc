#include "agent/shell_output.h"

#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <memory>

#include "agent/agent.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/agent/recording_sink.h"
#include "tests/fakes/host_sandbox.h"

namespace sandgate::agent {
namespace {

using ::testing::HasSubstr;

TEST(ShellOutputTest, Utf8CleanReplacesInvalidBytesOnly) {
  EXPECT_EQ(Utf8Clean("plain"), "plain");
  EXPECT_EQ(Utf8Clean("caf\xC3\xA9"), "caf\xC3\xA9");
  EXPECT_EQ(Utf8Clean("a\xFF"
                      "b"),
            "a\xEF\xBF\xBD"
            "b");
  EXPECT_EQ(Utf8Clean("\xC3"), "\xEF\xBF\xBD");  // truncated sequence
  EXPECT_EQ(Utf8Clean("\xED\xA0\x80"), "\xEF\xBF\xBD\xEF\xBF\xBD\xEF\xBF\xBD");  // surrogate
  EXPECT_EQ(Utf8Length("caf\xC3\xA9"), 4u);
}

TEST(ShellOutputTest, HeadTailKeepsBothEndsWithinBudget) {
  EXPECT_EQ(HeadTail("short", 10), "short");
  EXPECT_EQ(HeadTail("abcdefghij", 4), "abij");  // small budgets: no marker
  std::string big = std::string(500, 'h') + std::string(500, 't');
  std::string cut = HeadTail(big, 100);
  EXPECT_EQ(Utf8Length(cut), 100u);
  EXPECT_EQ(cut.front(), 'h');
  EXPECT_EQ(cut.back(), 't');
  EXPECT_THAT(cut, HasSubstr("characters omitted"));
  // Never splits a multi-byte character.
  std::string accents;
  for (int i = 0; i < 200; ++i) accents += "\xC3\xA9";
  std::string a = HeadTail(accents, 80);
  EXPECT_EQ(Utf8Clean(a), a);
  EXPECT_EQ(Utf8Length(a), 80u);
}

TEST(ShellOutputTest, CapCombinedSharesTheBudget) {
  std::string out(300, 'o'), err(300, 'e');
  EXPECT_TRUE(CapCombined(&out, &err, 100));
  EXPECT_EQ(Utf8Length(out) + Utf8Length(err), 100u);
  std::string small_out = "ok", big_err(300, 'e');
  EXPECT_TRUE(CapCombined(&small_out, &big_err, 100));
  EXPECT_EQ(small_out, "ok");
  EXPECT_EQ(Utf8Length(big_err), 98u);
  std::string fits = "a", none;
  EXPECT_FALSE(CapCombined(&fits, &none, 10));
  std::string zero = "abc", zero_err = "def";
  EXPECT_TRUE(CapCombined(&zero, &zero_err, 0));
  EXPECT_EQ(zero + zero_err, "");
}

// RunShellCall on a host session of its own, with its events recorded.
class ShellCallTest : public ::testing::Test {
 protected:
  void Open(const std::string& id) {
    sandbox::SessionSpec spec;
    spec.id = id;
    absl::StatusOr<std::unique_ptr<sandbox::Session>> made = provider_.Create(spec, nullptr);
    ASSERT_TRUE(made.ok()) << made.status();
    session_ = *std::move(made);
  }

  testing::HostProvider provider_;
  std::unique_ptr<sandbox::Session> session_;
  testing::RecordingSink events_;
  CancelToken cancel_;
};

TEST_F(ShellCallTest, RunShellCallRunsInOrderAndTruncates) {
  ASSERT_NO_FATAL_FAILURE(Open("shell-out-1"));
  ShellCall call;
  call.commands = {"echo first > f.txt", "cat f.txt; echo oops >&2; exit 3",
                   "head -c 5000 /dev/zero | tr '\\0' x"};
  // (A timing-out command is not tried here: HostSession's timeout path spins forever once
  // its deadline is infinite; the agents' timeouts are covered through the fake's hosted shell.)
  call.timeout_ms = 30000;
  call.max_output_length = 100;
  auto out = RunShellCall(*session_, events_, call, absl::Seconds(10), cancel_);
  ASSERT_TRUE(out.ok()) << out.status();
  ASSERT_EQ(out->size(), 3u);
  EXPECT_EQ((*out)[0]["outcome"]["exit_code"], 0);
  EXPECT_EQ((*out)[1]["stdout"], "first\n");
  EXPECT_EQ((*out)[1]["stderr"], "oops\n");
  EXPECT_EQ((*out)[1]["outcome"]["exit_code"], 3);
  EXPECT_EQ(Utf8Length((*out)[2]["stdout"].get<std::string>()), 100u);
  EXPECT_EQ(events_.OfType("command.started").size(), 3u);
  EXPECT_EQ(events_.OfType("command.finished").size(), 3u);
  EXPECT_EQ(events_.OfType("command.started")[1].command_started().argv(2),
            "cat f.txt; echo oops >&2; exit 3");

  cancel_.Cancel("stop");
  EXPECT_EQ(RunShellCall(*session_, events_, call, absl::Seconds(10), cancel_).status().code(),
            absl::StatusCode::kCancelled);
}

// CI hung in waitpid once (agent.OpenAiAgentTest.CancellationStopsALocalCommand, 180 s): a
// host session whose fork failed went on as if it had a child, and waitpid(-1) waits for any
// child of the test, such as the fake OpenAI server, which ends only after the test. Here the
// bystander is a child that has already exited: waited on, it would be reaped (and its exit
// taken for the command's).
TEST_F(ShellCallTest, AFailedForkFailsTheCallAndWaitsOnNoOtherChild) {
  const pid_t bystander = fork();
  if (bystander == 0) _exit(7);
  ASSERT_GT(bystander, 0);
  ASSERT_NO_FATAL_FAILURE(Open("shell-out-nofork"));
  ShellCall call;
  call.commands = {"echo never"};
  provider_.FailNextFork(EAGAIN);
  auto out = RunShellCall(*session_, events_, call, absl::Seconds(10), cancel_);
  EXPECT_EQ(out.status().code(), absl::StatusCode::kUnavailable) << out.status();
  EXPECT_THAT(out.status().message(), HasSubstr("running a shell command for the model: fork"));
  ASSERT_EQ(events_.OfType("command.finished").size(), 1u);
  EXPECT_EQ(events_.OfType("command.finished")[0].command_finished().exit_code(), -1);
  int status = 0;
  EXPECT_EQ(waitpid(bystander, &status, 0), bystander) << "the session reaped another child";
  EXPECT_EQ(WEXITSTATUS(status), 7);
}

// A process the seccomp filter killed says so in the model's output and the run's events.
TEST(DescribeExitTest, SigsysNamesTheSeccompFilter) {
  sandbox::ExecResult r;
  r.term_signal = SIGSYS;
  EXPECT_EQ(DescribeExit(r, absl::Seconds(10)),
            "killed by signal 31 (SIGSYS: a system call the sandbox's seccomp filter forbids)");
  r.term_signal = SIGKILL;
  EXPECT_EQ(DescribeExit(r, absl::Seconds(10)), "killed by signal 9");
}

}  // namespace
}  // namespace sandgate::agent
