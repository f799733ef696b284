// ProcessManager on the host fake provider and a fake clock: background processes, their
// output from any offset, stdin, signals, limits, tenants, and the idle clock they hold.
#include "core/processes.h"

#include <cstdlib>
#include <functional>
#include <memory>
#include <string>
#include <thread>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "core/sandbox_spec.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "store/sqlite_store.h"
#include "tests/fakes/fake_clock.h"
#include "tests/fakes/host_sandbox.h"

namespace sandgate::core {
namespace {

using testing::FakeClock;
using ::testing::HasSubstr;
using testing::HostProvider;

std::string Text(const v1::ProcessOutput& out) {
  std::string text;
  for (const auto& c : out.chunks()) text += c.data();
  return text;
}

TEST(OutputRingTest, ReadsFromAnyOffsetAndKeepsStreamsApart) {
  OutputRing ring(1024);
  ring.Append(sandbox::OutputStream::kStdout, "hello ");
  ring.Append(sandbox::OutputStream::kStdout, "world\n");
  ring.Append(sandbox::OutputStream::kStderr, "oops\n");
  v1::ProcessOutput out;
  ASSERT_TRUE(ring.Read(0, 1024, &out).ok());
  ASSERT_EQ(out.chunks_size(), 2);  // one stream's consecutive writes share a chunk
  EXPECT_EQ(out.chunks(0).data(), "hello world\n");
  EXPECT_EQ(out.chunks(0).stream(), v1::CommandOutput::STREAM_STDOUT);
  EXPECT_EQ(out.chunks(1).data(), "oops\n");
  EXPECT_EQ(out.chunks(1).stream(), v1::CommandOutput::STREAM_STDERR);
  EXPECT_EQ(out.next_offset(), 17u);
  out.Clear();
  ASSERT_TRUE(ring.Read(6, 8, &out).ok());
  EXPECT_EQ(Text(out), "world\noo");
  EXPECT_EQ(out.offset(), 6u);
  EXPECT_EQ(out.next_offset(), 14u);
  out.Clear();
  ASSERT_TRUE(ring.Read(17, 8, &out).ok());  // at the end: nothing yet
  EXPECT_EQ(out.chunks_size(), 0);
  EXPECT_EQ(out.next_offset(), 17u);
  EXPECT_EQ(ring.Read(18, 8, &out).code(), absl::StatusCode::kInvalidArgument);
}

TEST(OutputRingTest, DropsTheOldestAndSaysHowMuch) {
  OutputRing ring(10);
  ring.Append(sandbox::OutputStream::kStdout, "0123456789");
  ring.Append(sandbox::OutputStream::kStderr, "abcd");
  EXPECT_EQ(ring.start(), 4u);
  EXPECT_EQ(ring.end(), 14u);
  v1::ProcessOutput out;
  ASSERT_TRUE(ring.Read(0, 100, &out).ok());
  EXPECT_EQ(out.offset(), 4u);
  EXPECT_EQ(out.dropped_bytes(), 4u);
  EXPECT_EQ(Text(out), "456789abcd");
  // One write larger than the ring keeps its tail.
  ring.Append(sandbox::OutputStream::kStdout, std::string(100, 'x') + "TAIL");
  out.Clear();
  ASSERT_TRUE(ring.Read(0, 100, &out).ok());
  EXPECT_EQ(Text(out), "xxxxxxTAIL");
  EXPECT_EQ(out.dropped_bytes(), 108u);
}

class ProcessesTest : public ::testing::Test {
 protected:
  void SetUp() override {
    char tmpl[] = "/tmp/sg-proc-XXXXXX";
    dir_ = mkdtemp(tmpl);
    store_ = *store::SqliteStore::Open(dir_ + "/s.db");
    provider_ = std::make_unique<HostProvider>(store_.get());
    config_.processes.max_running_per_session = 3;
    config_.processes.output_buffer_bytes = 4096;
    config_.processes.session_buffer_bytes = 4 * 4096;
    SessionManagerDeps deps;
    deps.config = &config_;
    deps.store = store_.get();
    deps.clock = &clock_;
    deps.providers = {{"local", provider_.get()}};
    sessions_ = std::make_unique<SessionManager>(deps);
    processes_ =
        std::make_unique<ProcessManager>(ProcessManager::Deps{&config_, sessions_.get(), &clock_});
  }
  void TearDown() override {
    processes_.reset();
    sessions_.reset();
    store_.reset();
    std::system(("rm -rf " + dir_).c_str());
  }
  std::string NewSession(int idle_s = 60) {
    v1::CreateSessionRequest req;
    req.mutable_sandbox()->mutable_idle_timeout()->set_seconds(idle_s);
    auto s = sessions_->Create(caller_, req, nullptr);
    EXPECT_TRUE(s.ok()) << s.status();
    return s.ok() ? s->id() : "";
  }
  absl::StatusOr<v1::Process> Start(const std::string& sid, const std::string& command,
                                    bool stdin = false) {
    v1::StartProcessRequest req;
    req.set_session_id(sid);
    req.set_command(command);
    req.set_stdin(stdin);
    v1::Process p;
    absl::Status st = processes_->Start(caller_, req, &p);
    if (!st.ok()) return st;
    return p;
  }
  // Reads from `offset`, waiting (the fake clock never moves: until output or the end).
  v1::ProcessOutput Read(const std::string& sid, const std::string& pid, uint64_t offset = 0,
                         bool wait = true) {
    v1::ReadProcessOutputRequest req;
    req.set_session_id(sid);
    req.set_process_id(pid);
    req.set_offset(offset);
    if (wait) *req.mutable_wait() = ToProto(absl::Seconds(10));
    v1::ProcessOutput out;
    absl::Status st = processes_->Read(caller_, req, &out);
    EXPECT_TRUE(st.ok()) << st;
    return out;
  }
  // Reads until the process has ended; returns all its output.
  std::string ReadToEnd(const std::string& sid, const std::string& pid, v1::Process* last) {
    std::string text;
    uint64_t offset = 0;
    for (;;) {
      v1::ProcessOutput out = Read(sid, pid, offset);
      text += Text(out);
      offset = out.next_offset();
      *last = out.process();
      if (out.process().state() != v1::Process::STATE_RUNNING && out.chunks_size() == 0) {
        return text;
      }
    }
  }
  absl::StatusOr<v1::WriteProcessInputResponse> Write(const std::string& sid,
                                                      const std::string& pid,
                                                      v1::WriteProcessInputRequest req) {
    req.set_session_id(sid);
    req.set_process_id(pid);
    v1::WriteProcessInputResponse r;
    absl::Status st = processes_->Write(caller_, req, &r);
    if (!st.ok()) return st;
    return r;
  }
  v1::WriteProcessInputRequest Input(std::string data, bool close = false) {
    v1::WriteProcessInputRequest req;
    req.set_data(std::move(data));
    req.set_close_stdin(close);
    return req;
  }

  std::string dir_;
  Config config_;
  FakeClock clock_;
  Caller caller_{"team-a", false};
  std::unique_ptr<store::SqliteStore> store_;
  std::unique_ptr<HostProvider> provider_;
  std::unique_ptr<SessionManager> sessions_;
  std::unique_ptr<ProcessManager> processes_;
};

TEST_F(ProcessesTest, StdinReachesCatAndCloseEndsIt) {
  const std::string sid = NewSession();
  auto p = Start(sid, "cat", /*stdin=*/true);
  ASSERT_TRUE(p.ok()) << p.status();
  EXPECT_EQ(p->id(), "p1");
  EXPECT_EQ(p->state(), v1::Process::STATE_RUNNING);
  EXPECT_TRUE(p->stdin_open());
  auto w = Write(sid, p->id(), Input("hi\n"));
  ASSERT_TRUE(w.ok()) << w.status();
  EXPECT_EQ(w->written_bytes(), 3u);
  EXPECT_EQ(Text(Read(sid, p->id())), "hi\n");
  ASSERT_TRUE(Write(sid, p->id(), Input("bye\n", /*close=*/true)).ok());
  v1::Process last;
  EXPECT_EQ(ReadToEnd(sid, p->id(), &last), "hi\nbye\n");
  EXPECT_EQ(last.state(), v1::Process::STATE_EXITED);
  EXPECT_EQ(last.finished().exit_code(), 0);
  EXPECT_FALSE(last.stdin_open());
  // Ended: nothing more goes in.
  EXPECT_EQ(Write(sid, p->id(), Input("x")).status().code(), absl::StatusCode::kFailedPrecondition);
}

TEST_F(ProcessesTest, WithoutStdinTheProcessReadsEofAndInputIsRefused) {
  const std::string sid = NewSession();
  auto p = Start(sid, "cat; echo done");
  ASSERT_TRUE(p.ok()) << p.status();
  v1::Process last;
  EXPECT_EQ(ReadToEnd(sid, p->id(), &last), "done\n");
  auto q = Start(sid, "sleep 30");
  ASSERT_TRUE(q.ok());
  auto w = Write(sid, q->id(), Input("x"));
  EXPECT_EQ(w.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(w.status().message(), HasSubstr("started without stdin"));
  v1::WriteProcessInputRequest kill;
  kill.set_signal("SIGKILL");
  ASSERT_TRUE(Write(sid, q->id(), kill).ok());
  ReadToEnd(sid, q->id(), &last);
  EXPECT_EQ(last.finished().signal(), SIGKILL);
}

TEST_F(ProcessesTest, OutputIsReadFromAnOffsetAfterTheWriterEnded) {
  const std::string sid = NewSession();
  auto p = Start(sid, "printf 'line1\\nline2\\n'; printf err >&2");
  ASSERT_TRUE(p.ok());
  v1::Process last;
  ReadToEnd(sid, p->id(), &last);
  ASSERT_EQ(last.state(), v1::Process::STATE_EXITED);
  EXPECT_EQ(last.output_bytes(), 15u);
  v1::ProcessOutput out = Read(sid, p->id(), 6, /*wait=*/false);
  EXPECT_EQ(Text(out), "line2\nerr");
  EXPECT_EQ(out.chunks(out.chunks_size() - 1).stream(), v1::CommandOutput::STREAM_STDERR);
  EXPECT_EQ(out.dropped_bytes(), 0u);
}

TEST_F(ProcessesTest, AReadUntilExitWaitsForTheEndNotTheFirstOutput) {
  const std::string sid = NewSession();
  auto p = Start(sid, "cat", /*stdin=*/true);
  ASSERT_TRUE(p.ok());
  ASSERT_TRUE(Write(sid, p->id(), Input("first\n")).ok());
  EXPECT_EQ(Text(Read(sid, p->id())), "first\n");  // a plain read answers at the output
  // Until exit: with output there and the process running, it waits; the fake clock's
  // deadline passing ends the wait with what is there.
  v1::ReadProcessOutputRequest req;
  req.set_session_id(sid);
  req.set_process_id(p->id());
  req.set_until_exit(true);
  *req.mutable_wait() = ToProto(absl::Seconds(5));
  v1::ProcessOutput out;
  std::thread reader([&] { ASSERT_TRUE(processes_->Read(caller_, req, &out).ok()); });
  ASSERT_TRUE(clock_.BlockUntilSettled(2));  // the reaper and the read wait on the clock
  clock_.Advance(absl::Seconds(5));
  reader.join();
  EXPECT_EQ(Text(out), "first\n");
  EXPECT_EQ(out.process().state(), v1::Process::STATE_RUNNING);
  // The end ends such a wait at once, with all the output.
  ASSERT_TRUE(Write(sid, p->id(), Input("second\n", /*close=*/true)).ok());
  out.Clear();
  *req.mutable_wait() = ToProto(absl::Seconds(30));
  ASSERT_TRUE(processes_->Read(caller_, req, &out).ok());
  EXPECT_EQ(Text(out), "first\nsecond\n");
  EXPECT_EQ(out.process().state(), v1::Process::STATE_EXITED);
}

TEST_F(ProcessesTest, TheRingIsBoundedAndReadsSayWhatWasDropped) {
  const std::string sid = NewSession();
  // 10000 bytes through a 4096-byte buffer.
  auto p = Start(sid, "head -c 10000 /dev/zero | tr '\\0' a; printf END");
  ASSERT_TRUE(p.ok());
  v1::Process last;
  ReadToEnd(sid, p->id(), &last);
  last = Read(sid, p->id(), 0, false).process();
  EXPECT_EQ(last.output_bytes(), 10003u);
  EXPECT_EQ(last.dropped_bytes(), 10003u - 4096u);
  v1::ProcessOutput out = Read(sid, p->id(), 0, false);
  EXPECT_EQ(out.dropped_bytes(), 10003u - 4096u);
  EXPECT_EQ(out.offset(), 10003u - 4096u);
  EXPECT_TRUE(absl::EndsWith(Text(out), "aaaEND"));
  EXPECT_EQ(Text(out).size(), 4096u);
}

TEST_F(ProcessesTest, ASignalReachesTheProcessGroup) {
  const std::string sid = NewSession();
  auto p = Start(sid, "trap 'echo term; exit 9' TERM; echo ready; while :; do sleep 0.1; done");
  ASSERT_TRUE(p.ok());
  EXPECT_EQ(Text(Read(sid, p->id())), "ready\n");
  v1::WriteProcessInputRequest term;
  term.set_signal("TERM");
  ASSERT_TRUE(Write(sid, p->id(), term).ok());
  v1::Process last;
  EXPECT_THAT(ReadToEnd(sid, p->id(), &last), HasSubstr("term"));
  EXPECT_EQ(last.finished().exit_code(), 9);
}

TEST_F(ProcessesTest, ARunningProcessKeepsItsSessionFromIdling) {
  const std::string sid = NewSession(/*idle_s=*/60);
  auto p = Start(sid, "cat", /*stdin=*/true);
  ASSERT_TRUE(p.ok());
  // Far past the idle timeout: the process holds the session.
  clock_.Advance(absl::Minutes(10));
  ASSERT_TRUE(clock_.BlockUntilSettled(1));
  EXPECT_EQ(sessions_->Get(caller_, sid)->status(), v1::SESSION_STATUS_ACTIVE);
  ASSERT_TRUE(Write(sid, p->id(), Input("", /*close=*/true)).ok());
  v1::Process last;
  ReadToEnd(sid, p->id(), &last);
  // Its end starts the idle clock: active 1 ns before 60 s, expired at 60 s.
  ASSERT_TRUE(clock_.BlockUntilSettled(1));
  clock_.Advance(absl::Seconds(60) - absl::Nanoseconds(1));
  ASSERT_TRUE(clock_.BlockUntilSettled(1));
  EXPECT_EQ(sessions_->Get(caller_, sid)->status(), v1::SESSION_STATUS_ACTIVE);
  clock_.Advance(absl::Nanoseconds(1));
  ASSERT_TRUE(clock_.BlockUntilSettled(1));
  EXPECT_EQ(sessions_->Get(caller_, sid)->status(), v1::SESSION_STATUS_EXPIRED);
}

TEST_F(ProcessesTest, ClosingTheSessionKillsItsProcessesAndSaysWhy) {
  const std::string sid = NewSession();
  auto p = Start(sid, "sleep 60");
  ASSERT_TRUE(p.ok());
  ASSERT_TRUE(sessions_->Close(caller_, sid, "done").ok());
  v1::Process last;
  ReadToEnd(sid, p->id(), &last);
  EXPECT_EQ(last.state(), v1::Process::STATE_EXITED);
  EXPECT_TRUE(last.finished().cancelled());
  EXPECT_THAT(last.error(), HasSubstr("closed by the caller"));
  // A closed session starts nothing.
  EXPECT_EQ(Start(sid, "true").status().code(), absl::StatusCode::kFailedPrecondition);
}

TEST_F(ProcessesTest, LimitsGiveClearErrors) {
  const std::string sid = NewSession();
  for (int i = 0; i < 3; ++i) ASSERT_TRUE(Start(sid, "sleep 60").ok());
  auto fourth = Start(sid, "sleep 60");
  EXPECT_EQ(fourth.status().code(), absl::StatusCode::kResourceExhausted);
  EXPECT_THAT(fourth.status().message(), HasSubstr("processes.max_running_per_session"));
  // Ended processes make room: the 4 buffers of 4096 bytes hold 3 running and 1 ended; the
  // next start forgets the oldest ended one.
  config_.processes.max_running_per_session = 10;
  auto done = Start(sid, "true");
  ASSERT_TRUE(done.ok());
  v1::Process last;
  ReadToEnd(sid, done->id(), &last);
  // Running until the session ends, so the four below are running whatever the load.
  auto again = Start(sid, "sleep 60");
  ASSERT_TRUE(again.ok()) << again.status();
  v1::ListProcessesRequest list;
  list.set_session_id(sid);
  v1::ListProcessesResponse all;
  ASSERT_TRUE(processes_->List(caller_, list, &all).ok());
  ASSERT_EQ(all.processes_size(), 4);
  EXPECT_EQ(all.processes(3).id(), again->id());
  for (const auto& p : all.processes()) EXPECT_NE(p.id(), done->id());
  // Four running now fill the session's buffers.
  auto full = Start(sid, "sleep 60");
  EXPECT_EQ(full.status().code(), absl::StatusCode::kResourceExhausted);
  EXPECT_THAT(full.status().message(), HasSubstr("processes.session_buffer_bytes"));
}

TEST_F(ProcessesTest, HostileRequestsAreRefusedNamingTheField) {
  const std::string sid = NewSession();
  auto p = Start(sid, "cat", true);
  ASSERT_TRUE(p.ok());
  struct Case {
    std::function<absl::Status()> call;
    absl::StatusCode code;
    std::string says;
  };
  auto write = [&](v1::WriteProcessInputRequest req) {
    return [this, sid, pid = p->id(), req] { return Write(sid, pid, req).status(); };
  };
  v1::WriteProcessInputRequest stop;
  stop.set_signal("SIGSTOP");
  v1::WriteProcessInputRequest huge = Input(std::string(ProcessManager::kMaxInputBytes + 1, 'x'));
  v1::WriteProcessInputRequest tiny;
  tiny.mutable_resize()->set_rows(0);
  tiny.mutable_resize()->set_cols(80);
  v1::WriteProcessInputRequest no_tty;
  no_tty.mutable_resize()->set_rows(10);
  no_tty.mutable_resize()->set_cols(10);
  const Case cases[] = {
      {write(stop), absl::StatusCode::kInvalidArgument, "signal"},
      {write(huge), absl::StatusCode::kInvalidArgument, "data: at most"},
      {write(tiny), absl::StatusCode::kInvalidArgument, "resize: rows and cols"},
      {write(no_tty), absl::StatusCode::kFailedPrecondition, "no terminal"},
      {[&] { return Write(sid, "../p1", Input("x")).status(); }, absl::StatusCode::kInvalidArgument,
       "process_id"},
      {[&] { return Write(sid, "p99", Input("x")).status(); }, absl::StatusCode::kNotFound, "p99"},
      {[&] { return Write("s\xff", p->id(), Input("x")).status(); },
       absl::StatusCode::kInvalidArgument, "session_id"},
      {[&] { return Start(sid, "").status(); }, absl::StatusCode::kInvalidArgument,
       "argv, command"},
      {[&] {
         v1::StartProcessRequest req;
         req.set_session_id(sid);
         req.add_argv("cat");
         req.mutable_pty()->set_rows(5000);
         req.mutable_pty()->set_cols(80);
         v1::Process out;
         return processes_->Start(caller_, req, &out);
       },
       absl::StatusCode::kInvalidArgument, "pty: rows and cols"},
      {[&] {
         v1::ReadProcessOutputRequest req;
         req.set_session_id(sid);
         req.set_process_id(p->id());
         *req.mutable_wait() = ToProto(absl::Hours(1));
         v1::ProcessOutput out;
         return processes_->Read(caller_, req, &out);
       },
       absl::StatusCode::kInvalidArgument, "wait: must be"},
      {[&] {
         v1::ReadProcessOutputRequest req;
         req.set_session_id(sid);
         req.set_process_id(p->id());
         req.set_offset(1000);
         v1::ProcessOutput out;
         return processes_->Read(caller_, req, &out);
       },
       absl::StatusCode::kInvalidArgument, "offset: 1000 is past the end"},
  };
  for (const Case& c : cases) {
    absl::Status st = c.call();
    EXPECT_EQ(st.code(), c.code) << st;
    EXPECT_THAT(st.message(), HasSubstr(c.says));
  }
  ASSERT_TRUE(Write(sid, p->id(), Input("", true)).ok());
}

TEST_F(ProcessesTest, AnotherTenantSeesNoProcessAndNoSession) {
  const std::string sid = NewSession();
  auto p = Start(sid, "cat", true);
  ASSERT_TRUE(p.ok());
  Caller other{"team-b", false};
  v1::ListProcessesRequest list;
  list.set_session_id(sid);
  v1::ListProcessesResponse all;
  EXPECT_EQ(processes_->List(other, list, &all).code(), absl::StatusCode::kNotFound);
  v1::WriteProcessInputRequest w = Input("x");
  w.set_session_id(sid);
  w.set_process_id(p->id());
  v1::WriteProcessInputResponse r;
  EXPECT_EQ(processes_->Write(other, w, &r).code(), absl::StatusCode::kNotFound);
  v1::StartProcessRequest start;
  start.set_session_id(sid);
  start.set_command("true");
  v1::Process out;
  EXPECT_EQ(processes_->Start(other, start, &out).code(), absl::StatusCode::kNotFound);
  ASSERT_TRUE(Write(sid, p->id(), Input("", true)).ok());
}

}  // namespace
}  // namespace sandgate::core
