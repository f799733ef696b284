// Exec's stream logic without gRPC: a kept session on the host fake provider, a writer that
// records what it is sent, and either acknowledges each write at once or only when the test
// says (a slow reader).
#include "core/exec_stream.h"

#include <atomic>
#include <functional>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/match.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/clock.h"
#include "gtest/gtest.h"
#include "store/sqlite_store.h"
#include "tests/common/temp_dir.h"
#include "tests/fakes/fake_clock.h"
#include "tests/fakes/host_sandbox.h"

namespace sandgate::core {
namespace {

using testing::FakeClock;
using testing::HostProvider;
using testing::ScopedTempDir;

// Records every message; with auto_ack, each write completes at once.
class RecordingWriter : public ExecWriter {
 public:
  explicit RecordingWriter(bool auto_ack) : auto_ack_(auto_ack) {}
  void set_output(ExecOutput* out) { out_ = out; }
  // Called with each message before it is acknowledged (on the sender's thread).
  std::function<void(const v1::ExecResponse&)> on_send;

  void Send(const v1::ExecResponse* msg) override {
    {
      absl::MutexLock lock(&mu_);
      EXPECT_FALSE(in_flight_) << "a second write started before the first was done";
      messages_.push_back(*msg);
      in_flight_ = true;
    }
    if (on_send) on_send(*msg);
    if (auto_ack_) Ack();
  }
  void End(const absl::Status& status) override {
    absl::MutexLock lock(&mu_);
    EXPECT_FALSE(ended_) << "End twice";
    EXPECT_FALSE(in_flight_) << "End with a write in flight";
    ended_ = true;
    status_ = status;
  }
  // Completes the write in flight; false when there is none.
  bool Ack() {
    {
      absl::MutexLock lock(&mu_);
      if (!in_flight_) return false;
      in_flight_ = false;
    }
    out_->WriteDone();
    return true;
  }
  // Acknowledges writes as they come until End.
  void AckUntilEnd() {
    for (;;) {
      {
        absl::MutexLock lock(&mu_);
        auto progress = [this]()
                            ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) { return in_flight_ || ended_; };
        mu_.Await(absl::Condition(&progress));
        if (ended_) return;
        in_flight_ = false;
      }
      out_->WriteDone();
    }
  }
  std::vector<v1::ExecResponse> messages() {
    absl::MutexLock lock(&mu_);
    return messages_;
  }
  bool ended() {
    absl::MutexLock lock(&mu_);
    return ended_;
  }
  absl::Status status() {
    absl::MutexLock lock(&mu_);
    return status_;
  }

 private:
  const bool auto_ack_;
  ExecOutput* out_ = nullptr;
  absl::Mutex mu_;
  std::vector<v1::ExecResponse> messages_ ABSL_GUARDED_BY(mu_);
  bool in_flight_ ABSL_GUARDED_BY(mu_) = false;
  bool ended_ ABSL_GUARDED_BY(mu_) = false;
  absl::Status status_ ABSL_GUARDED_BY(mu_);
};

std::string Stdout(const std::vector<v1::ExecResponse>& messages) {
  std::string out;
  for (const auto& m : messages) {
    if (m.has_output() && m.output().stream() == v1::CommandOutput::STREAM_STDOUT) {
      out += m.output().data();
    }
  }
  return out;
}

v1::ExecResponse Notice(size_t bytes) {
  v1::ExecResponse msg;
  msg.mutable_output()->set_data(std::string(bytes, 'x'));
  return msg;
}

class ExecStreamTest : public ::testing::Test {
 protected:
  void SetUp() override {
    ASSERT_TRUE(tmp_.ok());
    store_ = *store::SqliteStore::Open(tmp_.path() + "/s.db");
    provider_ = std::make_unique<HostProvider>(store_.get());
    SessionManagerDeps deps;
    deps.config = &config_;
    deps.store = store_.get();
    deps.clock = &clock_;
    deps.providers = {{"local", provider_.get()}};
    sessions_ = std::make_unique<SessionManager>(deps);
    absl::StatusOr<v1::Session> s = sessions_->Create(caller_, v1::CreateSessionRequest(), nullptr);
    ASSERT_TRUE(s.ok()) << s.status();
    session_id_ = s->id();
  }
  void TearDown() override { sessions_.reset(); }

  v1::ExecRequest Command(const std::string& command) {
    v1::ExecRequest req;
    req.set_session_id(session_id_);
    req.set_command(command);
    return req;
  }

  ScopedTempDir tmp_{"sg-exec-stream"};
  Config config_;
  FakeClock clock_;
  Caller caller_{"team-a", false};
  std::unique_ptr<store::SqliteStore> store_;
  std::unique_ptr<HostProvider> provider_;
  std::unique_ptr<SessionManager> sessions_;
  std::string session_id_;
};

TEST_F(ExecStreamTest, OutputArrivesInOrderThenCommandFinishedWithTheExitStatus) {
  RecordingWriter writer(/*auto_ack=*/true);
  CancelToken cancel;
  ExecOutput out(&writer, &cancel, &clock_);
  writer.set_output(&out);
  ExecOutcome outcome =
      RunExec(*sessions_, caller_, Command("for i in $(seq 1 2000); do echo line$i; done; exit 3"),
              &cancel, &out);
  out.Close(outcome.stream_status);

  EXPECT_TRUE(outcome.ran);
  EXPECT_TRUE(outcome.command_status.ok()) << outcome.command_status;
  ASSERT_TRUE(writer.ended());
  EXPECT_TRUE(writer.status().ok()) << writer.status();
  std::vector<v1::ExecResponse> messages = writer.messages();
  std::string expected;
  for (int i = 1; i <= 2000; ++i) expected += "line" + std::to_string(i) + "\n";
  EXPECT_EQ(Stdout(messages), expected);
  ASSERT_FALSE(messages.empty());
  ASSERT_TRUE(messages.back().has_finished()) << "CommandFinished is the last message";
  EXPECT_EQ(messages.back().finished().exit_code(), 3);
  for (size_t i = 0; i + 1 < messages.size(); ++i) EXPECT_FALSE(messages[i].has_finished());
}

TEST_F(ExecStreamTest, CancelMidCommandEndsItCancelled) {
  RecordingWriter writer(/*auto_ack=*/true);
  CancelToken cancel;
  ExecOutput out(&writer, &cancel, &clock_);
  writer.set_output(&out);
  // The command is running (it printed); the caller goes away.
  writer.on_send = [&cancel](const v1::ExecResponse& msg) {
    if (msg.has_output()) cancel.Cancel("the caller cancelled the stream");
  };
  ExecOutcome outcome =
      RunExec(*sessions_, caller_, Command("echo started; exec sleep 600"), &cancel, &out);
  out.Close(outcome.stream_status);

  EXPECT_TRUE(outcome.stream_status.ok()) << outcome.stream_status;
  std::vector<v1::ExecResponse> messages = writer.messages();
  ASSERT_TRUE(messages.back().has_finished());
  EXPECT_TRUE(messages.back().finished().cancelled());
  EXPECT_EQ(Stdout(messages), "started\n");
}

TEST_F(ExecStreamTest, TheSessionsEndEndsTheCommandAndTheStreamSaysAborted) {
  RecordingWriter writer(/*auto_ack=*/true);
  CancelToken cancel;
  ExecOutput out(&writer, &cancel, &clock_);
  writer.set_output(&out);
  std::thread closer;
  writer.on_send = [&](const v1::ExecResponse& msg) {
    if (msg.has_output() && !closer.joinable()) {
      closer = std::thread([&] { (void)sessions_->Close(caller_, session_id_, "done with it"); });
    }
  };
  ExecOutcome outcome =
      RunExec(*sessions_, caller_, Command("echo started; exec sleep 600"), &cancel, &out);
  out.Close(outcome.stream_status);
  closer.join();

  EXPECT_EQ(outcome.stream_status.code(), absl::StatusCode::kAborted) << outcome.stream_status;
  EXPECT_TRUE(absl::StartsWith(outcome.stream_status.message(), "session "))
      << outcome.stream_status;
  EXPECT_TRUE(writer.messages().back().finished().cancelled());
  EXPECT_EQ(writer.status().code(), absl::StatusCode::kAborted);
}

TEST_F(ExecStreamTest, AnUnknownSessionEndsTheStreamWithoutRunning) {
  RecordingWriter writer(/*auto_ack=*/true);
  CancelToken cancel;
  ExecOutput out(&writer, &cancel, &clock_);
  writer.set_output(&out);
  v1::ExecRequest req = Command("true");
  req.set_session_id("no-such-session");
  ExecOutcome outcome = RunExec(*sessions_, caller_, req, &cancel, &out);
  out.Close(outcome.stream_status);

  EXPECT_FALSE(outcome.ran);
  EXPECT_EQ(writer.status().code(), absl::StatusCode::kNotFound) << writer.status();
  EXPECT_TRUE(writer.messages().empty());
}

// A slow reader holds the command back: with nothing acknowledged, the command's output
// callback waits once the queue is full, and the command cannot finish.
TEST_F(ExecStreamTest, ASlowWriterHoldsTheCommandBackAtTheQueueLimit) {
  constexpr size_t kLimit = 64 * 1024;
  constexpr int kBytes = 4 << 20;
  RecordingWriter writer(/*auto_ack=*/false);
  CancelToken cancel;
  ExecOutput out(&writer, &cancel, &clock_, kLimit);
  writer.set_output(&out);
  std::atomic<bool> returned{false};
  ExecOutcome outcome;
  std::thread command([&] {
    outcome = RunExec(*sessions_, caller_,
                      Command("head -c " + std::to_string(kBytes) + " /dev/zero"), &cancel, &out);
    returned = true;
    out.Close(outcome.stream_status);
  });
  // Bounded, so that a command that never waits fails the test instead of hanging it.
  const absl::Time give_up = absl::Now() + absl::Seconds(10);
  while (!out.waiting_for_room() && absl::Now() < give_up) std::this_thread::yield();
  if (!out.waiting_for_room()) {
    out.Stop();
    command.join();
    FAIL() << "the command never waited for room";
  }

  EXPECT_FALSE(returned.load());
  // One message in flight, the queue at its limit (plus the message that crossed it).
  EXPECT_EQ(writer.messages().size(), 1u);
  EXPECT_GE(out.queued_bytes(), kLimit);
  EXPECT_LT(out.queued_bytes(), kLimit + (1 << 20));

  writer.AckUntilEnd();
  command.join();
  EXPECT_TRUE(writer.status().ok()) << writer.status();
  std::vector<v1::ExecResponse> messages = writer.messages();
  EXPECT_EQ(Stdout(messages).size(), static_cast<size_t>(kBytes));
  EXPECT_EQ(messages.back().finished().exit_code(), 0);
}

// A producer of ten 60-byte messages behind a writer that acknowledges nothing, with room
// for 100 bytes: it waits with the first message in flight and the second queued.
class ExecOutputTest : public ::testing::Test {
 protected:
  void SetUp() override {
    writer_.set_output(&out_);
    producer_ = std::thread([this] {
      for (int i = 0; i < 10; ++i) out_.Output(Notice(60));
    });
    ASSERT_TRUE(clock_.BlockUntilSettled(1));
    ASSERT_TRUE(out_.waiting_for_room());
  }
  void TearDown() override {
    out_.Stop();  // a producer still waiting (a failed SetUp) returns
    if (producer_.joinable()) producer_.join();
  }

  FakeClock clock_;
  RecordingWriter writer_{/*auto_ack=*/false};
  CancelToken cancel_;
  ExecOutput out_{&writer_, &cancel_, &clock_, /*max_queued_bytes=*/100};
  std::thread producer_;
};

TEST_F(ExecOutputTest, StopReleasesAWaitingProducerAndDropsWhatIsQueued) {
  EXPECT_TRUE(out_.Stop()) << "the first message is still being written";
  producer_.join();
  EXPECT_EQ(out_.queued_bytes(), 0u);
  ASSERT_TRUE(writer_.Ack());  // the write in flight completes
  EXPECT_EQ(writer_.messages().size(), 1u) << "nothing is sent after Stop";
  EXPECT_FALSE(writer_.ended()) << "after Stop the writer ends the stream itself";
}

TEST_F(ExecOutputTest, ACancelledCommandStopsWaitingForRoom) {
  // The canceller is not the output (the session's end): the wait notices at its next check.
  cancel_.Cancel("session closed");
  clock_.Advance(ExecOutput::kCancelCheck);
  producer_.join();
  EXPECT_EQ(writer_.messages().size(), 1u);
}

TEST(ExecOutputCloseTest, CloseEndsTheStreamOnlyOnceEverythingQueuedIsWritten) {
  FakeClock clock;
  RecordingWriter writer(/*auto_ack=*/false);
  CancelToken cancel;
  ExecOutput out(&writer, &cancel, &clock);
  writer.set_output(&out);
  for (int i = 0; i < 3; ++i) out.Notice(Notice(10));
  out.Close(absl::OkStatus());
  for (int i = 0; i < 3; ++i) {
    EXPECT_FALSE(writer.ended()) << "after " << i << " writes";
    ASSERT_TRUE(writer.Ack());
  }
  EXPECT_TRUE(writer.ended());
  EXPECT_EQ(writer.messages().size(), 3u);
}

}  // namespace
}  // namespace sandgate::core
