// The real daemon on PostgreSQL (store.type postgres, on tests/fakes' throwaway server): a
// run end to end, and a daemon started afterwards, with a state_dir of its own, still
// serving it from the database.
#include <sys/stat.h>

#include <fstream>

#include "gtest/gtest.h"
#include "store/postgres_connection.h"
#include "tests/fakes/postgres_server.h"
#include "tests/integration/daemon_harness.h"

namespace sandgate::testing {
namespace {

constexpr uint32_t kUidBase = 302000;

// The password user's login (scram) through store.password_file.
nlohmann::json PostgresConfig(const std::string& dir, const std::string& dbname) {
  const std::string password_file = dir + "/pg-password";
  std::ofstream(password_file) << PostgresServer::kPassword << "\n";
  chmod(password_file.c_str(), 0600);
  return {{"store",
           {{"type", "postgres"},
            {"dsn", PostgresServer::Shared().Dsn(dbname, PostgresServer::kPasswordUser)},
            {"password_file", password_file}}},
          {"local", {{"uid_base", kUidBase}, {"uid_count", 16}}}};
}

std::string DbName(const std::string& dsn) {
  const size_t at = dsn.find("dbname=") + 7;
  return dsn.substr(at, dsn.find(' ', at) - at);
}

TEST(PostgresDaemonTest, ARunEndToEndIsServedAgainByTheNextDaemon) {
  auto dsn = PostgresServer::Shared().CreateDatabase();
  ASSERT_TRUE(dsn.ok()) << dsn.status();
  const std::string db = DbName(*dsn);
  char tmpl[] = "/tmp/sg-pgcfg-XXXXXX";
  const std::string dir = mkdtemp(tmpl);

  std::string run_id;
  std::vector<v1::Event> first;
  {
    DaemonHarness daemon(PostgresConfig(dir, db));
    daemon.Start();
    auto stub = daemon.Stub();
    v1::Run run;
    auto ctx = DaemonHarness::Context();
    grpc::Status st = stub->RunAnalysis(ctx.get(), SampleRequest(), &run);
    ASSERT_TRUE(st.ok()) << st.error_message() << "\n" << daemon.Log();
    run_id = run.id();
    first = FollowToEnd(*stub, run_id);
    ASSERT_FALSE(first.empty());
    EXPECT_EQ(first.back().type(), "run.finished");
    EXPECT_EQ(first.back().run_finished().status(), v1::RUN_STATUS_SUCCEEDED)
        << first.back().run_finished().reason() << "\n"
        << daemon.Log();
    struct stat st_db;
    EXPECT_NE(stat((daemon.state_dir() + "/state.db").c_str(), &st_db), 0)
        << "no SQLite state beside PostgreSQL";
    EXPECT_EQ(daemon.Stop(SIGTERM), 0) << daemon.Log();
  }
  // Another daemon, another state_dir, the same database: a second replica, or the first
  // one moved to another machine.
  DaemonHarness again(PostgresConfig(dir, db));
  again.Start();
  auto stub = again.Stub();
  v1::Run got;
  auto ctx = DaemonHarness::Context();
  v1::GetRunRequest req;
  req.set_run_id(run_id);
  grpc::Status st = stub->GetRun(ctx.get(), req, &got);
  ASSERT_TRUE(st.ok()) << st.error_message() << "\n" << again.Log();
  EXPECT_EQ(got.status(), v1::RUN_STATUS_SUCCEEDED);
  EXPECT_EQ(got.last_seq(), first.back().seq());
  std::vector<v1::Event> replayed = FollowToEnd(*stub, run_id);
  ASSERT_EQ(replayed.size(), first.size());
  for (size_t i = 0; i < first.size(); ++i) {
    EXPECT_EQ(replayed[i].SerializeAsString(), first[i].SerializeAsString()) << "event " << i;
  }
  EXPECT_EQ(again.Log().find(PostgresServer::kPassword), std::string::npos)
      << "the password reached the log";
  std::system(("rm -rf " + dir).c_str());
}

// A wrong password stops the daemon at start, naming the store and the server's reason.
TEST(PostgresDaemonTest, AWrongPasswordStopsTheDaemonNamingTheReason) {
  auto dsn = PostgresServer::Shared().CreateDatabase();
  ASSERT_TRUE(dsn.ok()) << dsn.status();
  char tmpl[] = "/tmp/sg-pgcfg-XXXXXX";
  const std::string dir = mkdtemp(tmpl);
  nlohmann::json config = PostgresConfig(dir, DbName(*dsn));
  std::ofstream(dir + "/pg-password", std::ios::trunc) << "not-the-password-5678\n";
  const std::string sandgated = SANDGATED_PATH;
  // Start() fails the test when the daemon does not answer, so run it by hand.
  std::ofstream(dir + "/config.json") << config.dump();
  const std::string out = dir + "/out.log";
  int status = std::system((sandgated + " --config " + dir + "/config.json --state-dir " + dir +
                            "/state --listen unix:" + dir + "/s.sock > " + out + " 2>&1")
                               .c_str());
  std::ifstream in(out);
  std::string log((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  EXPECT_NE(status, 0) << log;
  EXPECT_NE(log.find("password authentication failed"), std::string::npos) << log;
  EXPECT_EQ(log.find("not-the-password-5678"), std::string::npos) << log;
  std::system(("rm -rf " + dir).c_str());
}

}  // namespace
}  // namespace sandgate::testing
