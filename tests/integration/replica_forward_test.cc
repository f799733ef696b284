// Forwarding between replicas, end to end: two real daemons sharing one PostgreSQL database
// (tests/fakes' throwaway server), each on loopback TCP with mutual TLS (certificates made
// for this run), each advertising its own address. Every call here goes to replica B about
// a session or run that lives on replica A, and must behave as if sent to A.

#include <thread>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "common/sha256.h"
#include "gtest/gtest.h"
#include "tests/fakes/postgres_server.h"
#include "tests/fakes/test_certs.h"
#include "tests/integration/daemon_harness.h"
#include "tests/integration/tls_replica.h"

namespace sandgate::testing {
namespace {

constexpr char kToken[] = "forward-token";
constexpr char kOtherToken[] = "forward-other-token";
constexpr double kLeaseSeconds = 2;

struct ExecOutcome {
  std::string out, err;
  v1::CommandFinished finished;
  grpc::Status status;
};

ExecOutcome Exec(v1::Sandgate::Stub& stub, const std::string& session, const std::string& command,
                 const std::string& token = kToken) {
  auto ctx = DaemonHarness::Context(token);
  v1::ExecRequest req;
  req.set_session_id(session);
  req.set_command(command);
  auto reader = stub.Exec(ctx.get(), req);
  ExecOutcome o;
  v1::ExecResponse r;
  while (reader->Read(&r)) {
    if (r.has_output()) {
      (r.output().stream() == v1::CommandOutput::STREAM_STDOUT ? o.out : o.err) +=
          r.output().data();
    }
    if (r.has_finished()) o.finished = r.finished();
  }
  o.status = reader->Finish();
  return o;
}

// An Exec through `stub` left open for the test to read, cancel or cut.
struct OpenExec {
  OpenExec(v1::Sandgate::Stub& stub, const std::string& session, const std::string& command)
      : ctx(DaemonHarness::Context(kToken)) {
    v1::ExecRequest req;
    req.set_session_id(session);
    req.set_command(command);
    reader = stub.Exec(ctx.get(), req);
  }
  // Reads what is left; the stream's status.
  grpc::Status End() {
    v1::ExecResponse r;
    while (reader->Read(&r)) {
    }
    return reader->Finish();
  }
  std::unique_ptr<grpc::ClientContext> ctx;
  std::unique_ptr<grpc::ClientReader<v1::ExecResponse>> reader;
};

grpc::Status KeepAlive(v1::Sandgate::Stub& stub, const std::string& session,
                       const std::string& token = kToken) {
  v1::KeepAliveRequest req;
  req.set_session_id(session);
  v1::Session s;
  return stub.KeepAlive(DaemonHarness::Context(token).get(), req, &s);
}

class ReplicaForwardTest : public TlsFixture {
 protected:
  void SetUp() override {
    TlsFixture::SetUp();
    absl::StatusOr<std::string> dsn = PostgresServer::Shared().CreateDatabase();
    ASSERT_TRUE(dsn.ok()) << dsn.status();
    a_ =
        std::make_unique<TlsReplica>(tmp_.path() + "/a", Config(*dsn, "replica-a", 305000), certs_);
    b_ =
        std::make_unique<TlsReplica>(tmp_.path() + "/b", Config(*dsn, "replica-b", 305100), certs_);
    ASSERT_TRUE(a_->Start(kToken)) << a_->Log();
    ASSERT_TRUE(b_->Start(kToken)) << b_->Log();
  }
  nlohmann::json Config(const std::string& dsn, const std::string& id, uint32_t uid_base) const {
    return TlsReplicaConfig(dsn, id, uid_base, certs_,
                            {{{"name", "alpha"}, {"token_sha256", Sha256::Hex(kToken)}},
                             {{"name", "beta"}, {"token_sha256", Sha256::Hex(kOtherToken)}}},
                            kLeaseSeconds);
  }
  // A kept session on A.
  v1::Session SessionOnA() {
    v1::CreateSessionRequest req;
    v1::Session s;
    grpc::Status st = a_->Stub()->CreateSession(DaemonHarness::Context(kToken).get(), req, &s);
    EXPECT_TRUE(st.ok()) << st.error_message() << a_->Log();
    EXPECT_EQ(s.replica(), "replica-a");
    return s;
  }

  std::unique_ptr<TlsReplica> a_, b_;
};

TEST_F(ReplicaForwardTest, SessionCallsThroughBActOnTheSandboxOnA) {
  const v1::Session s = SessionOnA();
  auto b = b_->Stub();

  ExecOutcome hi = Exec(*b, s.id(), "echo hello; echo oops >&2; exit 3");
  ASSERT_TRUE(hi.status.ok()) << hi.status.error_message() << "\n" << b_->Log();
  EXPECT_EQ(hi.out, "hello\n");
  EXPECT_EQ(hi.err, "oops\n");
  EXPECT_EQ(hi.finished.exit_code(), 3);

  // An upload of several messages, checked by the owner against the header's sha256.
  std::string data;
  for (int i = 0; i < 4096; ++i) absl::StrAppend(&data, "line ", i, "\n");
  {
    auto ctx = DaemonHarness::Context(kToken);
    v1::FileInfo info;
    auto writer = b->UploadFile(ctx.get(), &info);
    v1::UploadFileRequest m;
    m.mutable_header()->set_session_id(s.id());
    m.mutable_header()->set_path("in.txt");
    m.mutable_header()->set_sha256(Sha256::Hex(data));
    ASSERT_TRUE(writer->Write(m));
    for (size_t off = 0; off < data.size(); off += 7000) {
      m.Clear();
      m.set_data(data.substr(off, 7000));
      ASSERT_TRUE(writer->Write(m));
    }
    writer->WritesDone();
    grpc::Status st = writer->Finish();
    ASSERT_TRUE(st.ok()) << st.error_message() << "\n" << b_->Log();
    EXPECT_EQ(info.sha256(), Sha256::Hex(data));
    EXPECT_EQ(info.size_bytes(), data.size());
  }
  ExecOutcome wc = Exec(*a_->Stub(), s.id(), "wc -l < in.txt");
  EXPECT_EQ(wc.out, "4096\n") << "the file is in A's sandbox";

  v1::ListFilesRequest list;
  list.set_session_id(s.id());
  v1::ListFilesResponse listed;
  {
    grpc::Status st = b->ListFiles(DaemonHarness::Context(kToken).get(), list, &listed);
    ASSERT_TRUE(st.ok()) << st.error_code() << ": " << st.error_message() << "\n" << b_->Log();
  }
  bool found = false;
  for (const auto& f : listed.files()) found |= f.path() == "in.txt";
  EXPECT_TRUE(found) << listed.DebugString();

  {
    auto ctx = DaemonHarness::Context(kToken);
    v1::DownloadFileRequest req;
    req.set_session_id(s.id());
    req.set_path("in.txt");
    auto reader = b->DownloadFile(ctx.get(), req);
    std::string got;
    v1::FileChunk chunk;
    while (reader->Read(&chunk)) got += chunk.data();
    grpc::Status st = reader->Finish();
    ASSERT_TRUE(st.ok()) << st.error_message();
    EXPECT_EQ(got, data);
  }

  EXPECT_TRUE(KeepAlive(*b, s.id()).ok());
  {
    // A call marked as forwarded (from a peer with a certificate of the cluster CA) is never
    // forwarded again: B, which does not own the session, says so naming both.
    auto ctx = DaemonHarness::Context(kToken);
    ctx->AddMetadata("sandgate-forwarded-by", "replica-x");
    v1::KeepAliveRequest req;
    req.set_session_id(s.id());
    v1::Session ignored;
    grpc::Status looped = b->KeepAlive(ctx.get(), req, &ignored);
    EXPECT_EQ(looped.error_code(), grpc::StatusCode::FAILED_PRECONDITION);
    EXPECT_TRUE(absl::StrContains(looped.error_message(),
                                  "replica replica-x forwarded this call to replica replica-b, "
                                  "but session " +
                                      s.id() + " is owned by replica replica-a"))
        << looped.error_message();
  }
  // The owner audits what it was asked through B; B audits none of it.
  EXPECT_TRUE(absl::StrContains(a_->Audit(), "\"KeepAlive\"")) << a_->Audit();
  EXPECT_FALSE(absl::StrContains(b_->Audit(), "\"KeepAlive\"")) << b_->Audit();

  // Another tenant's token is refused by the owner exactly as when it calls A directly.
  grpc::Status direct = KeepAlive(*a_->Stub(), s.id(), kOtherToken);
  grpc::Status forwarded = KeepAlive(*b, s.id(), kOtherToken);
  EXPECT_EQ(direct.error_code(), grpc::StatusCode::NOT_FOUND) << direct.error_message();
  EXPECT_EQ(forwarded.error_code(), direct.error_code());
  EXPECT_EQ(forwarded.error_message(), direct.error_message());
  ExecOutcome stranger = Exec(*b, s.id(), "true", kOtherToken);
  EXPECT_EQ(stranger.status.error_code(), grpc::StatusCode::NOT_FOUND);

  v1::CloseSessionRequest close;
  close.set_session_id(s.id());
  v1::Session closed;
  ASSERT_TRUE(b->CloseSession(DaemonHarness::Context(kToken).get(), close, &closed).ok());
  EXPECT_EQ(closed.status(), v1::SESSION_STATUS_CLOSED);
  // Ended: the record answers, on either replica, as it does directly.
  EXPECT_EQ(KeepAlive(*b, s.id()).error_code(), grpc::StatusCode::FAILED_PRECONDITION);
}

// A caller that cancels an Exec it sent to B cancels the command on A.
TEST_F(ReplicaForwardTest, CancellingAForwardedExecCancelsItOnTheOwner) {
  const v1::Session s = SessionOnA();
  auto b = b_->Stub();
  const std::string probe = "cat /proc/[0-9]*/cmdline 2>/dev/null | tr '\\0' ' '";
  {
    OpenExec exec(*b, s.id(), "echo started; exec sleep 4242");
    v1::ExecResponse r;
    ASSERT_TRUE(exec.reader->Read(&r)) << b_->Log();
    EXPECT_EQ(r.output().data(), "started\n");
    // Visible to another command of the session while it runs.
    EXPECT_TRUE(absl::StrContains(Exec(*a_->Stub(), s.id(), probe).out, "sleep 4242"));
    exec.ctx->TryCancel();
    EXPECT_EQ(exec.End().error_code(), grpc::StatusCode::CANCELLED);
  }
  EXPECT_TRUE(Eventually("the command on A to be gone", [&] {
    return !absl::StrContains(Exec(*a_->Stub(), s.id(), probe).out, "sleep 4242");
  }));
}

// Callers that go away at each step of a relayed stream (during the owner lookup, as the
// relayed call starts, mid-stream) leave B serving. The relayed call of a caller cancelled
// during the lookup ends at once, and with it the caller's call: B once read that call's
// (gRPC-owned, by then freed) server context after starting the relay, and crashed.
TEST_F(ReplicaForwardTest, CallersCancellingAtEachStepLeaveBServing) {
  const v1::Session s = SessionOnA();
  auto b = b_->Stub();
  constexpr int kRounds = 16;
  for (int round = 0; round < kRounds; ++round) {
    const int chunks = round % 3;  // cancelled after the header, or 1 or 2 data messages
    {
      auto ctx = DaemonHarness::Context(kToken);
      v1::FileInfo info;
      auto writer = b->UploadFile(ctx.get(), &info);
      v1::UploadFileRequest m;
      m.mutable_header()->set_session_id(s.id());
      m.mutable_header()->set_path("cut.txt");
      writer->Write(m);
      for (int i = 0; i < chunks; ++i) {
        m.Clear();
        m.set_data(std::string(7000, 'x'));
        writer->Write(m);
      }
      ctx->TryCancel();
      EXPECT_FALSE(writer->Finish().ok());
    }
    // Cancelled at once (most often during the lookup), and mid-stream.
    for (bool mid_stream : {false, false, chunks > 0}) {
      OpenExec exec(*b, s.id(), "echo started; exec sleep 60");
      v1::ExecResponse r;
      if (mid_stream) exec.reader->Read(&r);
      exec.ctx->TryCancel();
      EXPECT_FALSE(exec.End().ok());
    }
    {
      auto ctx = DaemonHarness::Context(kToken);
      v1::DownloadFileRequest req;
      req.set_session_id(s.id());
      req.set_path("absent.txt");
      auto reader = b->DownloadFile(ctx.get(), req);
      ctx->TryCancel();
      v1::FileChunk chunk;
      while (reader->Read(&chunk)) {
      }
      EXPECT_FALSE(reader->Finish().ok());
    }
  }
  grpc::Status alive = KeepAlive(*b, s.id());
  EXPECT_TRUE(alive.ok()) << alive.error_message() << "\n" << b_->Log();
  // Every cancelled call ended on A too: a leaked one holds A's drain until its watchdog.
  const int status = a_->Stop(SIGTERM);
  EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0) << status << "\n" << a_->Log();
}

// B drained (SIGTERM) while it relays an Exec: the caller's stream ends with a status, and B
// exits cleanly, not blocked on (or crashing in) the relay.
TEST_F(ReplicaForwardTest, DrainingBMidRelayEndsTheCallersStream) {
  const v1::Session s = SessionOnA();
  auto b = b_->Stub();
  OpenExec exec(*b, s.id(), "echo started; exec sleep 60");
  v1::ExecResponse r;
  ASSERT_TRUE(exec.reader->Read(&r)) << b_->Log();
  EXPECT_EQ(r.output().data(), "started\n");
  const int status = b_->Stop(SIGTERM);
  EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0) << status << "\n" << b_->Log();
  EXPECT_FALSE(exec.End().ok());
}

// CancelRun sent to B ends A's run CANCELLED; then, with A gone, calls through B on its
// session say which replica owned it.
TEST_F(ReplicaForwardTest, CancelThroughBEndsAsRunAndAGoneIsToldInWords) {
  v1::RunAnalysisRequest slow = SampleRequest();
  slow.mutable_sandbox()->add_setup_commands("sleep 300");
  v1::Run run;
  {
    grpc::Status st = a_->Stub()->RunAnalysis(DaemonHarness::Context(kToken).get(), slow, &run);
    ASSERT_TRUE(st.ok()) << st.error_message() << a_->Log();
  }
  v1::CancelRunRequest cancel;
  cancel.set_run_id(run.id());
  cancel.set_reason("from B");
  v1::Run answered;
  grpc::Status st = b_->Stub()->CancelRun(DaemonHarness::Context(kToken).get(), cancel, &answered);
  ASSERT_TRUE(st.ok()) << st.error_message() << "\n" << b_->Log();
  EXPECT_EQ(answered.replica(), "replica-a");
  std::vector<v1::Event> events = FollowToEnd(*a_->Stub(), run.id(), kToken);
  ASSERT_FALSE(events.empty());
  EXPECT_EQ(events.back().run_finished().status(), v1::RUN_STATUS_CANCELLED)
      << events.back().run_finished().reason();
  EXPECT_TRUE(absl::StrContains(events.back().run_finished().reason(), "from B"));

  const v1::Session s = SessionOnA();
  a_->Kill();
  grpc::Status gone = KeepAlive(*b_->Stub(), s.id());
  EXPECT_EQ(gone.error_code(), grpc::StatusCode::UNAVAILABLE);
  EXPECT_TRUE(absl::StrContains(gone.error_message(), "replica replica-a at tcp:127.0.0.1:"))
      << gone.error_message();
  EXPECT_TRUE(absl::StrContains(gone.error_message(), "cannot be reached")) << gone.error_message();
  // Once B has taken A's lease over, the record answers: the session ended, saying why.
  EXPECT_TRUE(Eventually(
      "B to end A's session",
      [&] {
        grpc::Status ended = KeepAlive(*b_->Stub(), s.id());
        return ended.error_code() == grpc::StatusCode::FAILED_PRECONDITION &&
               absl::StrContains(ended.error_message(), "replica replica-a stopped renewing");
      },
      absl::Seconds(kLeaseSeconds + 5)))
      << KeepAlive(*b_->Stub(), s.id()).error_message() << "\n"
      << b_->Log();
}

}  // namespace
}  // namespace sandgate::testing
