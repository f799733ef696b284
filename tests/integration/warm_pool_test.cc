// The warm pool on the real daemon: a configured shape is kept ready, CreateSession takes one
// (its log says so, its files and setup commands are applied after), and so does a run's own
// sandbox of that shape; the Session and session.created say from_warm_pool; drain closes
// the ready ones.
#include <chrono>
#include <thread>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "gtest/gtest.h"
#include "tests/integration/daemon_harness.h"

namespace sandgate::testing {
namespace {

// Lines of the log holding needle (and also, when given, the second one).
int Count(const std::string& log, const std::string& needle, const std::string& also = "") {
  int n = 0;
  for (absl::string_view line : absl::StrSplit(log, '\n')) {
    n += absl::StrContains(line, needle) && absl::StrContains(line, also);
  }
  return n;
}

// The daemon fills the pool in the background; wait (bounded) until its log says so.
bool AwaitLog(const DaemonHarness& d, const std::string& needle, int n) {
  for (int i = 0; i < 1000; ++i) {
    if (Count(d.Log(), needle) >= n) return true;
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  return false;
}

TEST(WarmPoolTest, CreateSessionTakesAReadySandboxAndDrainClosesTheRest) {
  DaemonHarness daemon(nlohmann::json{{"warm_pool", {{{"size", 2}}}},
                                      {"local", {{"uid_base", 300400}, {"uid_count", 8}}}});
  daemon.Start();
  ASSERT_TRUE(AwaitLog(daemon, "warm_pool.filled", 1)) << daemon.Log();
  auto stub = daemon.Stub();

  v1::CreateSessionRequest req;
  auto* file = req.mutable_sandbox()->add_files();
  file->set_path("hello.txt");
  file->set_content("from the caller");
  req.mutable_sandbox()->add_setup_commands("cp hello.txt copied.txt");
  v1::Session s;
  const std::string before = daemon.Log();
  grpc::Status st = stub->CreateSession(DaemonHarness::Context().get(), req, &s);
  ASSERT_TRUE(st.ok()) << st.error_message();
  // The session's sandbox is one the pool started before the call. (The pool's refill may
  // already have started another by now, so the count alone would race.)
  EXPECT_EQ(Count(before, "\"sandbox.started\""), 2) << before;
  EXPECT_EQ(Count(before, "\"sandbox.started\"", absl::StrCat("\"session\":\"", s.id(), "\"")), 1)
      << "no sandbox started for the call: " << s.id() << "\n"
      << before;

  v1::StreamEventsRequest events;
  events.set_run_id(s.id());
  grpc::ClientContext ctx;
  auto reader = stub->StreamEvents(&ctx, events);
  v1::Event e;
  std::string notice;
  bool created = false, from_pool = false;
  while (reader->Read(&e)) {
    created |= e.has_session_created();
    from_pool |= e.has_session_created() && e.session_created().from_warm_pool();
    if (e.has_notice()) notice = e.notice().message();
  }
  EXPECT_TRUE(reader->Finish().ok());
  EXPECT_TRUE(created);
  EXPECT_TRUE(absl::StrContains(notice, "sandbox taken from the warm pool")) << notice;
  EXPECT_TRUE(s.from_warm_pool());
  EXPECT_TRUE(from_pool) << "session.created does not say from_warm_pool";

  v1::ExecRequest exec;
  exec.set_session_id(s.id());
  exec.set_command("cat copied.txt");
  grpc::ClientContext ectx;
  auto out = stub->Exec(&ectx, exec);
  v1::ExecResponse r;
  std::string stdout_text;
  while (out->Read(&r)) {
    if (r.has_output()) stdout_text += r.output().data();
  }
  ASSERT_TRUE(out->Finish().ok());
  EXPECT_EQ(stdout_text, "from the caller") << "files and setup commands run after the take";

  // The pool makes another in the background; the drain closes both ready ones, and the
  // session's own sandbox with the session.
  ASSERT_TRUE(AwaitLog(daemon, "warm_pool.filled", 2)) << daemon.Log();
  EXPECT_EQ(daemon.Stop(SIGTERM), 0);
  const std::string log = daemon.Log();
  EXPECT_EQ(Count(log, "\"warm_pool.closed\""), 2) << log;
  EXPECT_EQ(Count(log, "\"sandbox.started\""), 3) << log;
}

TEST(WarmPoolTest, ASessionOfAnotherShapeIsNotFromThePool) {
  DaemonHarness daemon(nlohmann::json{{"warm_pool", {{{"size", 1}}}},
                                      {"local", {{"uid_base", 300410}, {"uid_count", 4}}}});
  daemon.Start();
  ASSERT_TRUE(AwaitLog(daemon, "warm_pool.filled", 1)) << daemon.Log();
  v1::CreateSessionRequest req;
  req.mutable_sandbox()->set_max_processes(77);  // not the pool's shape
  v1::Session s;
  grpc::Status st = daemon.Stub()->CreateSession(DaemonHarness::Context().get(), req, &s);
  ASSERT_TRUE(st.ok()) << st.error_message();
  EXPECT_FALSE(s.from_warm_pool());
  v1::GetSessionRequest get;
  get.set_session_id(s.id());
  v1::Session got;
  ASSERT_TRUE(daemon.Stub()->GetSession(DaemonHarness::Context().get(), get, &got).ok());
  EXPECT_FALSE(got.from_warm_pool());
}

// A run with its own sandbox whose shape the pool keeps (the default one) gets a ready
// sandbox: the run's session.created says so, no sandbox is started for the run, and the
// run succeeds in it. The run keeps only its admission's budget unit: with max_sandboxes 2,
// a second run after the refill is admitted (a unit kept twice would leave it queued).
TEST(WarmPoolTest, ARunsOwnSandboxOfAKeptShapeComesFromThePool) {
  DaemonHarness daemon(nlohmann::json{{"warm_pool", {{{"size", 1}}}},
                                      {"max_sandboxes", 2},
                                      {"local", {{"uid_base", 300420}, {"uid_count", 4}}}});
  daemon.Start();
  ASSERT_TRUE(AwaitLog(daemon, "warm_pool.filled", 1)) << daemon.Log();
  auto stub = daemon.Stub();
  v1::Run run;
  grpc::Status st = stub->RunAnalysis(DaemonHarness::Context().get(), SampleRequest(), &run);
  ASSERT_TRUE(st.ok()) << st.error_message();
  std::vector<v1::Event> events = FollowToEnd(*stub, run.id());
  ASSERT_FALSE(events.empty());
  EXPECT_EQ(events.back().run_finished().status(), v1::RUN_STATUS_SUCCEEDED)
      << events.back().run_finished().reason();
  const v1::Event* created = nullptr;
  for (const v1::Event& e : events) {
    if (e.has_session_created()) created = &e;
  }
  ASSERT_NE(created, nullptr);
  EXPECT_TRUE(created->session_created().from_warm_pool()) << created->DebugString();
  // The pool's first sandbox and its refill: none was started for the run itself.
  ASSERT_TRUE(AwaitLog(daemon, "warm_pool.filled", 2)) << daemon.Log();
  EXPECT_EQ(Count(daemon.Log(), "\"sandbox.started\""), 2) << daemon.Log();

  v1::Run second;
  st = stub->RunAnalysis(DaemonHarness::Context().get(), SampleRequest(), &second);
  ASSERT_TRUE(st.ok()) << st.error_message();
  events = FollowToEnd(*stub, second.id());
  ASSERT_FALSE(events.empty());
  EXPECT_EQ(events.back().run_finished().status(), v1::RUN_STATUS_SUCCEEDED)
      << events.back().run_finished().reason();
}

}  // namespace
}  // namespace sandgate::testing
