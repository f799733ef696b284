// Talking to commands in real local sandboxes (sandbox/exec_channel.h): stdin, a
// pseudo-terminal, signals.
#include "sandbox/exec_channel.h"

#include <signal.h>
#include <unistd.h>

#include <memory>
#include <string>
#include <thread>

#include "absl/strings/escaping.h"
#include "absl/strings/match.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/clock.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "sandbox/local/bwrap_provider.h"
#include "tests/fakes/fake_journal.h"
#include "tests/sandbox/local/sandbox_test_util.h"

namespace sandgate::sandbox {
namespace {

using ::sandgate::testing::FakeJournal;
using ::testing::HasSubstr;

// A uid pool of its own, per test process, away from every other test's range
// (bwrap_provider_test's reach 263999; the daemons' tests start at 300100).
BwrapOptions ChannelTestOptions() {
  BwrapOptions opts;
  opts.init_path = SANDGATE_TEST_INIT_PATH;
  opts.uid_base = 500000 + (getpid() % 1000) * 16;
  opts.uid_pool_size = 8;
  opts.cgroup_parent = "sandgate-test";
  return opts;
}

ExecRequest Request(std::vector<std::string> argv) {
  ExecRequest req;
  req.argv = std::move(argv);
  return req;
}

// A command running on its own thread, its output collected.
class Running {
 public:
  Running(Session* s, ExecRequest req) : channel_(std::make_shared<ExecChannel>()) {
    req.channel = channel_;
    thread_ = std::thread([this, s, req] {
      auto r = s->Exec(
          req,
          [this](OutputStream st, absl::string_view chunk) {
            absl::MutexLock l(&mu_);
            (st == OutputStream::kStdout ? out_ : err_).append(chunk.data(), chunk.size());
          },
          nullptr);
      absl::MutexLock l(&mu_);
      result_ = std::move(r);
      done_ = true;
    });
  }
  ~Running() {
    if (thread_.joinable()) thread_.join();
  }
  ExecChannel& channel() { return *channel_; }
  // Waits until stdout holds `text` (or 20 s); returns stdout.
  std::string AwaitOut(absl::string_view text) {
    absl::MutexLock l(&mu_);
    auto has = [this, text]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
      return absl::StrContains(out_, text) || done_;
    };
    mu_.AwaitWithTimeout(absl::Condition(&has), absl::Seconds(20));
    return out_;
  }
  // Waits for the command's end (20 s at most: then fails with what it wrote, and kills it).
  ExecResult Join() {
    bool ended;
    {
      absl::MutexLock l(&mu_);
      ended = mu_.AwaitWithTimeout(absl::Condition(&done_), absl::Seconds(20));
      if (!ended) ADD_FAILURE() << "the command did not end; its output:\n" << absl::CEscape(out_);
    }
    if (!ended) channel_->Signal(SIGKILL, absl::Seconds(5)).IgnoreError();
    thread_.join();
    absl::MutexLock l(&mu_);
    EXPECT_TRUE(result_.ok()) << result_.status();
    return result_.ok() ? *result_ : ExecResult();
  }
  std::string out() {
    absl::MutexLock l(&mu_);
    return out_;
  }

 private:
  std::shared_ptr<ExecChannel> channel_;
  absl::Mutex mu_;
  std::string out_ ABSL_GUARDED_BY(mu_), err_ ABSL_GUARDED_BY(mu_);
  absl::StatusOr<ExecResult> result_ ABSL_GUARDED_BY(mu_) = absl::UnknownError("running");
  bool done_ ABSL_GUARDED_BY(mu_) = false;
  std::thread thread_;
};

class ExecChannelTest : public ::testing::Test {
 protected:
  void SetUp() override { Start(Isolation::kNamespaces); }
  void Start(Isolation isolation) {
    BwrapOptions opts = ChannelTestOptions();
    // A pool of its own per level: the two fixtures may run at once.
    if (isolation == Isolation::kGvisor) opts.uid_base += 8;
    auto p = BwrapProvider::Create(opts, &journal_);
    ASSERT_TRUE(p.ok()) << p.status();
    provider_ = std::move(*p);
    SessionSpec spec;
    spec.id = absl::StrCat("chan-", IsolationName(isolation), "-", getpid());
    spec.isolation = isolation;
    auto s = provider_->Create(spec, nullptr);
    ASSERT_TRUE(s.ok()) << s.status();
    session_ = std::move(*s);
  }
  void TearDown() override {
    if (session_) {
      EXPECT_TRUE(session_->Close().ok());
    }
  }

  FakeJournal journal_;
  std::unique_ptr<BwrapProvider> provider_;
  std::unique_ptr<Session> session_;
};

TEST_F(ExecChannelTest, StdinReachesCatAndCloseIsEof) {
  ASSERT_TRUE(session_->talks_to_commands());
  Running cat(session_.get(), Request({"cat"}));
  auto n = cat.channel().WriteStdin("hi\n", absl::Seconds(10));
  ASSERT_TRUE(n.ok()) << n.status();
  EXPECT_EQ(*n, 3u);
  EXPECT_EQ(cat.AwaitOut("hi\n"), "hi\n");
  ASSERT_TRUE(cat.channel().CloseStdin(absl::Seconds(5)).ok());
  ExecResult r = cat.Join();
  EXPECT_TRUE(r.ok());
  EXPECT_EQ(cat.out(), "hi\n");
  // Ended: the channel says so.
  EXPECT_EQ(cat.channel().WriteStdin("x", absl::Seconds(1)).status().code(),
            absl::StatusCode::kFailedPrecondition);
}

TEST_F(ExecChannelTest, WithoutAChannelStdinIsDevNull) {
  std::string out;
  auto r = session_->Exec(
      Request({"cat"}), [&](OutputStream, absl::string_view c) { out.append(c.data(), c.size()); },
      nullptr);
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_TRUE(r->ok());  // EOF at once, no hang until the timeout
  EXPECT_EQ(out, "");
}

TEST_F(ExecChannelTest, SignalReachesTheProcessGroup) {
  // The shell's child (sleep) is in the group too: SIGTERM ends both.
  Running sh(session_.get(), Request(ShellCommand("trap 'echo got-term; exit 7' TERM; echo ready; "
                                                  "sleep 30 & wait")));
  sh.AwaitOut("ready");
  ASSERT_TRUE(sh.channel().Signal(SIGTERM, absl::Seconds(5)).ok());
  ExecResult r = sh.Join();
  EXPECT_EQ(r.exit_code, 7);
  EXPECT_THAT(sh.out(), HasSubstr("got-term"));
}

TEST_F(ExecChannelTest, SigkillEndsACommandThatIgnoresTerm) {
  Running sh(session_.get(),
             Request(ShellCommand("trap '' TERM INT; echo ready; while :; do sleep 1; done")));
  sh.AwaitOut("ready");
  ASSERT_TRUE(sh.channel().Signal(SIGINT, absl::Seconds(5)).ok());
  ASSERT_TRUE(sh.channel().Signal(SIGKILL, absl::Seconds(5)).ok());
  ExecResult r = sh.Join();
  EXPECT_EQ(r.term_signal, SIGKILL);
}

// The interpreter reads its terminal through readline: raw while it waits at its prompt, cooked
// while it runs a line. What depends on that is sent when the prompt shows (or, for ^C, while a
// line runs), as a person at a terminal would, so that the test holds on a loaded machine too.
TEST_F(ExecChannelTest, PythonDrivenThroughAPty) {
  ExecRequest req = Request({"python3", "-i", "-q"});
  req.pty = TerminalSize{30, 100};
  Running py(session_.get(), req);
  EXPECT_THAT(py.AwaitOut(">>> "), HasSubstr(">>> "));
  ASSERT_TRUE(py.channel().WriteStdin("import os, sys\n", absl::Seconds(5)).ok());
  ASSERT_TRUE(py.channel().WriteStdin("print(os.isatty(0), 6*7)\n", absl::Seconds(5)).ok());
  EXPECT_THAT(py.AwaitOut("True 42"), HasSubstr("True 42"));
  ASSERT_TRUE(py.channel().WriteStdin("print(os.get_terminal_size())\n", absl::Seconds(5)).ok());
  // A resize, too, waits for the prompt: readline reads the terminal's size and writes it back
  // (TIOCGWINSZ, TIOCSWINSZ) each time it takes the terminal, before it shows the prompt; a
  // resize between the two would be undone.
  EXPECT_THAT(py.AwaitOut("columns=100, lines=30)\r\n>>> "),
              HasSubstr("columns=100, lines=30)\r\n>>> "));
  ASSERT_TRUE(py.channel().Resize(TerminalSize{40, 120}, absl::Seconds(5)).ok());
  ASSERT_TRUE(py.channel().WriteStdin("print(os.get_terminal_size())\n", absl::Seconds(5)).ok());
  EXPECT_THAT(py.AwaitOut("columns=120, lines=40"), HasSubstr("columns=120, lines=40"));
  // ^C through the terminal interrupts what runs, not the interpreter. What runs sleeps in
  // short naps: a SIGINT that lands after the interpreter last looked for signals and before
  // the sleep's system call starts is seen only when that call returns (CPython's time.sleep
  // looks for signals on EINTR alone), which for one long sleep would be its end.
  ASSERT_TRUE(
      py.channel()
          .WriteStdin(
              "import time; exec(\"print('sle' + 'eping')\\nwhile True: time.sleep(0.1)\")\n",
              absl::Seconds(5))
          .ok());
  py.AwaitOut("sleeping");  // not the echo of the line, which says 'sle' + 'eping'
  ASSERT_TRUE(py.channel().WriteStdin("\x03", absl::Seconds(5)).ok());
  EXPECT_THAT(py.AwaitOut("KeyboardInterrupt"), HasSubstr("KeyboardInterrupt"));
  ASSERT_TRUE(py.channel().WriteStdin("print('still', 'alive')\n", absl::Seconds(5)).ok());
  // ^D is EOF only while readline waits at its prompt: one that reaches the line discipline
  // while the line still runs (the terminal cooked) becomes a NUL byte when readline makes the
  // terminal raw again, and the interpreter never ends. Its prompt is written after that.
  EXPECT_THAT(py.AwaitOut("still alive\r\n>>> "), HasSubstr("still alive\r\n>>> "));
  ASSERT_TRUE(py.channel().CloseStdin(absl::Seconds(5)).ok());  // ^D: the interpreter exits
  ExecResult r = py.Join();
  EXPECT_EQ(r.exit_code, 0);
  EXPECT_EQ(r.term_signal, 0);
}

// A terminal whose program does not read fills up; its ^D then waits for room like any key,
// and is not written when none comes: stdin stays open, so that a later close still sends it.
TEST_F(ExecChannelTest, EofOnAFullTerminalIsNotClaimedUnwritten) {
  ExecRequest req = Request({"sleep", "60"});
  req.pty = TerminalSize{24, 80};
  Running sleeper(session_.get(), req);
  const std::string lines(1 << 20, '\n');
  auto n = sleeper.channel().WriteStdin(lines, absl::Seconds(1));
  ASSERT_TRUE(n.ok()) << n.status();
  ASSERT_LT(*n, lines.size());  // full: nothing reads it
  for (int attempt = 0; attempt < 2; ++attempt) {
    absl::Status closed = sleeper.channel().CloseStdin(absl::Milliseconds(100));
    EXPECT_EQ(closed.code(), absl::StatusCode::kUnavailable)
        << "attempt " << attempt << ": " << closed;
  }
  ASSERT_TRUE(sleeper.channel().Signal(SIGKILL, absl::Seconds(5)).ok());
  EXPECT_EQ(sleeper.Join().term_signal, SIGKILL);
}

TEST_F(ExecChannelTest, APtyNeedsAChannelAndASize) {
  ExecRequest req = Request({"true"});
  req.pty = TerminalSize{24, 80};
  auto r = session_->Exec(req, nullptr, nullptr);
  EXPECT_EQ(r.status().code(), absl::StatusCode::kInvalidArgument);
  req.channel = std::make_shared<ExecChannel>();
  req.pty = TerminalSize{0, 80};
  r = session_->Exec(req, nullptr, nullptr);
  EXPECT_EQ(r.status().code(), absl::StatusCode::kInvalidArgument);
  // The failed Exec detached the channel: nobody waits on it.
  EXPECT_EQ(req.channel->WriteStdin("x", absl::Seconds(1)).status().code(),
            absl::StatusCode::kFailedPrecondition);
}

TEST_F(ExecChannelTest, ResizeWithoutAPtyIsRefused) {
  Running cat(session_.get(), Request({"cat"}));
  EXPECT_EQ(cat.channel().Resize(TerminalSize{10, 10}, absl::Seconds(5)).code(),
            absl::StatusCode::kFailedPrecondition);
  ASSERT_TRUE(cat.channel().CloseStdin(absl::Seconds(5)).ok());
  cat.Join();
}

// Under gVisor the init's protocol crosses the bridge's tunnel (bridge_protocol.h), which
// carries stdin but no file descriptor: a terminal is refused by name before anything starts,
// and the session lives on.
class GvisorExecChannelTest : public ExecChannelTest {
 protected:
  void SetUp() override {
    if (access("/usr/bin/runsc", X_OK) != 0) {
      GTEST_SKIP() << "runsc is NOT INSTALLED (Debian package runsc; deploy/setup.sh): the "
                      "gVisor channel tests did not run";
    }
    Start(Isolation::kGvisor);
  }
  // The output of `echo alive`, run without a channel: proof the sandbox still serves.
  std::string EchoAlive() {
    std::string out;
    auto e = session_->Exec(
        Request({"echo", "alive"}),
        [&out](OutputStream, absl::string_view chunk) { out.append(chunk.data(), chunk.size()); },
        nullptr);
    EXPECT_TRUE(e.ok()) << e.status();
    return out;
  }
};

TEST_F(GvisorExecChannelTest, StdinReachesCatAndCloseIsEof) {
  Running cat(session_.get(), Request({"cat"}));
  auto n = cat.channel().WriteStdin("hi\n", absl::Seconds(10));
  ASSERT_TRUE(n.ok()) << n.status();
  EXPECT_EQ(cat.AwaitOut("hi\n"), "hi\n");
  ASSERT_TRUE(cat.channel().CloseStdin(absl::Seconds(5)).ok());
  ExecResult r = cat.Join();
  EXPECT_TRUE(r.ok());
  EXPECT_EQ(cat.out(), "hi\n");
  // The sandbox lives on.
  EXPECT_EQ(EchoAlive(), "alive\n");
}

TEST_F(GvisorExecChannelTest, APtyIsRefusedByNameAndTheSessionLivesOn) {
  ExecRequest req = Request({"python3", "-i", "-q"});
  req.pty = TerminalSize{30, 100};
  req.channel = std::make_shared<ExecChannel>();
  auto r = session_->Exec(req, nullptr, nullptr);
  EXPECT_EQ(r.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(r.status().message(), HasSubstr("isolation gvisor"));
  EXPECT_THAT(r.status().message(), HasSubstr("terminal"));
  EXPECT_EQ(req.channel->WriteStdin("x", absl::Seconds(1)).status().code(),
            absl::StatusCode::kFailedPrecondition);
  EXPECT_EQ(EchoAlive(), "alive\n");
}

TEST(ParseSignalTest, NamesWithAndWithoutSigAndNothingElse) {
  EXPECT_EQ(*ParseSignal("SIGINT"), SIGINT);
  EXPECT_EQ(*ParseSignal("TERM"), SIGTERM);
  EXPECT_EQ(*ParseSignal("SIGKILL"), SIGKILL);
  EXPECT_EQ(ParseSignal("SIGSTOP").status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(ParseSignal("9").status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(ParseSignal("").status().code(), absl::StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace sandgate::sandbox
