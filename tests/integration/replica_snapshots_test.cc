// Snapshots across replicas (docs/sessions.md, "Snapshots"): two real daemons sharing one
// PostgreSQL database (tests/fakes' throwaway server), on loopback TCP with mutual TLS so that
// a call on one replica's session is forwarded to it. A session on replica A is paused
// through replica B (the call goes to A, which holds the sandbox), and its snapshot is
// resumed on B from the shared database: the workspace arrives whole; deleting it on B
// removes the record and the tar's rows for both.
#include <string>

#include "absl/strings/str_cat.h"
#include "common/sha256.h"
#include "gtest/gtest.h"
#include "tests/fakes/postgres_server.h"
#include "tests/fakes/test_certs.h"
#include "tests/integration/daemon_harness.h"
#include "tests/integration/tls_replica.h"

namespace sandgate::testing {
namespace {

constexpr char kToken[] = "replica-snapshots-token";

std::string Exec(v1::Sandgate::Stub& stub, const std::string& id, const std::string& command) {
  v1::ExecRequest req;
  req.set_session_id(id);
  req.set_command(command);
  auto ctx = DaemonHarness::Context(kToken);
  auto reader = stub.Exec(ctx.get(), req);
  std::string out;
  v1::ExecResponse m;
  while (reader->Read(&m)) {
    if (m.has_output() && m.output().stream() == v1::CommandOutput::STREAM_STDOUT)
      out += m.output().data();
  }
  grpc::Status st = reader->Finish();
  EXPECT_TRUE(st.ok()) << st.error_message();
  return out;
}

int64_t Count(const std::string& dsn, const char* sql) {
  absl::StatusOr<int64_t> n = QueryCount(dsn, sql);
  EXPECT_TRUE(n.ok()) << n.status();
  return n.ok() ? *n : -1;
}

class ReplicaSnapshotsTest : public TlsFixture {};

TEST_F(ReplicaSnapshotsTest, PausedOnAThroughBAndResumedOnB) {
  auto dsn = PostgresServer::Shared().CreateDatabase();
  ASSERT_TRUE(dsn.ok()) << dsn.status();
  const nlohmann::json tenants = {{{"name", "alpha"}, {"token_sha256", Sha256::Hex(kToken)}}};
  TlsReplica a(tmp_.path() + "/a", TlsReplicaConfig(*dsn, "replica-a", 301320, certs_, tenants),
               certs_);
  TlsReplica b(tmp_.path() + "/b", TlsReplicaConfig(*dsn, "replica-b", 301340, certs_, tenants),
               certs_);
  ASSERT_TRUE(a.Start(kToken)) << a.Log();
  ASSERT_TRUE(b.Start(kToken)) << b.Log();

  v1::Session s;
  {
    v1::CreateSessionRequest req;
    req.mutable_sandbox()->mutable_idle_timeout()->set_seconds(600);
    ASSERT_TRUE(a.Stub()->CreateSession(DaemonHarness::Context(kToken).get(), req, &s).ok())
        << a.Log();
  }
  ASSERT_EQ(s.replica(), "replica-a");
  auto a_stub = a.Stub();
  // 3 MiB of random bytes cross the artifact store's 1 MiB chunks.
  Exec(*a_stub, s.id(),
       "mkdir -p /work/data && head -c 3000000 /dev/urandom > /work/data/r.bin && "
       "chmod 0600 /work/data/r.bin && ln -s data/r.bin /work/latest");
  const std::string sums =
      Exec(*a_stub, s.id(), "cd /work && sha256sum data/r.bin && stat -c %a data/r.bin");

  // Paused through B: A takes it (it holds the sandbox) and closes the session.
  auto b_stub = b.Stub();
  v1::Snapshot snap;
  {
    v1::SnapshotSessionRequest req;
    req.set_session_id(s.id());
    req.set_close(true);
    grpc::Status st = b_stub->SnapshotSession(DaemonHarness::Context(kToken).get(), req, &snap);
    ASSERT_TRUE(st.ok()) << st.error_message() << "\nA:\n" << a.Log() << "\nB:\n" << b.Log();
  }
  EXPECT_EQ(snap.replica(), "replica-a");
  EXPECT_EQ(Count(*dsn, "SELECT count(*) FROM snapshots"), 1);
  // The tar is in the database, on neither replica's disk.
  EXPECT_EQ(std::system(("test ! -e " + tmp_.path() + "/a/state/artifacts/" + snap.id()).c_str()),
            0);

  // A goes away for good; B resumes the snapshot from the shared database.
  EXPECT_EQ(a.Stop(SIGTERM), 0) << a.Log();
  v1::Session resumed;
  {
    v1::CreateSessionRequest req;
    req.set_from_snapshot(snap.id());
    grpc::Status st = b_stub->CreateSession(DaemonHarness::Context(kToken).get(), req, &resumed);
    ASSERT_TRUE(st.ok()) << st.error_message() << "\n" << b.Log();
  }
  EXPECT_EQ(resumed.replica(), "replica-b");
  EXPECT_EQ(
      Exec(*b_stub, resumed.id(), "cd /work && sha256sum data/r.bin && stat -c %a data/r.bin"),
      sums);
  EXPECT_EQ(Exec(*b_stub, resumed.id(), "readlink /work/latest"), "data/r.bin\n");

  // Deleted on B: the record and every chunk of its tar go.
  v1::DeleteSnapshotRequest del;
  del.set_snapshot_id(snap.id());
  v1::DeleteSnapshotResponse deleted;
  ASSERT_TRUE(b_stub->DeleteSnapshot(DaemonHarness::Context(kToken).get(), del, &deleted).ok());
  EXPECT_EQ(Count(*dsn, "SELECT count(*) FROM snapshots"), 0);
  EXPECT_EQ(Count(*dsn, "SELECT count(*) FROM artifacts"), 0);
  EXPECT_EQ(Count(*dsn, "SELECT count(*) FROM artifact_chunks"), 0);
  EXPECT_EQ(b.Stop(SIGTERM), 0) << b.Log();
}

}  // namespace
}  // namespace sandgate::testing
