// Artifacts on PostgreSQL, through two real daemons sharing one database (tests/fakes'
// throwaway server): a run collected on replica A is downloaded through replica B byte for
// byte (gRPC and the CLI), and a purge on B deletes them for both.
#include <cstdio>
#include <fstream>
#include <map>
#include <sstream>

#include "absl/strings/str_cat.h"
#include "gtest/gtest.h"
#include "tests/fakes/postgres_server.h"
#include "tests/integration/daemon_harness.h"

namespace sandgate::testing {
namespace {

nlohmann::json ReplicaConfig(const std::string& dsn, const std::string& id, uint32_t uid_base) {
  return {{"store", {{"type", "postgres"}, {"dsn", dsn}}},
          {"replica", {{"id", id}}},
          {"local", {{"uid_base", uid_base}, {"uid_count", 8}}}};
}

int64_t Count(const std::string& dsn, const char* sql) {
  absl::StatusOr<int64_t> n = QueryCount(dsn, sql);
  EXPECT_TRUE(n.ok()) << n.status();
  return n.ok() ? *n : -1;
}

std::string Slurp(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

TEST(ReplicaArtifactsTest, ARunOnADownloadsThroughBAndAPurgeOnBRemovesThem) {
  auto dsn = PostgresServer::Shared().CreateDatabase();
  ASSERT_TRUE(dsn.ok()) << dsn.status();
  DaemonHarness a(ReplicaConfig(*dsn, "replica-a", 305000));
  DaemonHarness b(ReplicaConfig(*dsn, "replica-b", 305100));
  a.Start();
  b.Start();

  v1::Run run;
  {
    auto ctx = DaemonHarness::Context();
    ASSERT_TRUE(a.Stub()->RunAnalysis(ctx.get(), SampleRequest(), &run).ok()) << a.Log();
  }
  std::vector<v1::Event> events = FollowToEnd(*a.Stub(), run.id());
  ASSERT_FALSE(events.empty());
  ASSERT_EQ(events.back().run_finished().status(), v1::RUN_STATUS_SUCCEEDED) << a.Log();

  v1::Run seen;
  {
    auto ctx = DaemonHarness::Context();
    v1::GetRunRequest req;
    req.set_run_id(run.id());
    ASSERT_TRUE(b.Stub()->GetRun(ctx.get(), req, &seen).ok());
  }
  EXPECT_EQ(seen.replica(), "replica-a");
  ASSERT_GE(seen.artifacts_size(), 6);
  std::map<std::string, std::string> on_a;
  for (const v1::Artifact& art : seen.artifacts()) {
    DownloadedArtifact from_a = DownloadArtifact(*a.Stub(), run.id(), art.name());
    DownloadedArtifact from_b = DownloadArtifact(*b.Stub(), run.id(), art.name());
    ASSERT_TRUE(from_a.status.ok()) << art.name() << ": " << from_a.status.error_message();
    ASSERT_TRUE(from_b.status.ok())
        << art.name() << " through B: " << from_b.status.error_message() << "\n"
        << b.Log();
    EXPECT_EQ(from_b.data, from_a.data) << art.name();
    EXPECT_EQ(from_b.data.size(), art.size_bytes()) << art.name();
    EXPECT_EQ(Sha256Hex(from_b.data), art.sha256()) << art.name();
    EXPECT_EQ(from_b.sha256, art.sha256()) << art.name();
    on_a[art.name()] = from_a.data;
  }
  // Nothing of it on either replica's disk: the database holds the artifacts.
  EXPECT_EQ(std::system(("test ! -e " + a.state_dir() + "/artifacts/" + run.id()).c_str()), 0);

  // The CLI, pointed at B, writes the same files.
  const std::string out = b.dir() + "/dl";
  const std::string cmd = absl::StrCat(SANDGATE_CLI_PATH, " --addr ", b.address(), " download ",
                                       run.id(), " --out ", out, " 2>&1");
  FILE* cli = popen(cmd.c_str(), "r");
  ASSERT_NE(cli, nullptr);
  std::string cli_out;
  char buf[4096];
  for (size_t n; (n = fread(buf, 1, sizeof buf, cli)) > 0;) cli_out.append(buf, n);
  EXPECT_EQ(pclose(cli), 0) << cli_out;
  for (const auto& [name, data] : on_a) {
    EXPECT_EQ(Slurp(out + "/" + name), data) << name << " from the CLI through B";
  }

  // A purge on B deletes the run's artifacts from the database: neither replica serves them.
  v1::PurgeRequest purge;
  purge.mutable_older_than()->set_seconds(0);
  v1::PurgeResponse purged;
  {
    auto ctx = DaemonHarness::Context();
    ASSERT_TRUE(b.Stub()->Purge(ctx.get(), purge, &purged).ok());
  }
  EXPECT_EQ(purged.runs_deleted(), 1u);
  const std::string name = seen.artifacts(0).name();
  EXPECT_EQ(DownloadArtifact(*a.Stub(), run.id(), name).status.error_code(),
            grpc::StatusCode::NOT_FOUND);
  EXPECT_EQ(DownloadArtifact(*b.Stub(), run.id(), name).status.error_code(),
            grpc::StatusCode::NOT_FOUND);
  EXPECT_EQ(Count(*dsn, "SELECT count(*) FROM artifacts"), 0);
  EXPECT_EQ(Count(*dsn, "SELECT count(*) FROM artifact_chunks"), 0);

  EXPECT_EQ(a.Stop(SIGTERM), 0) << a.Log();
  EXPECT_EQ(b.Stop(SIGTERM), 0) << b.Log();
}

}  // namespace
}  // namespace sandgate::testing
