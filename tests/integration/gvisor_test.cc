// gVisor sessions on the real daemon: the level a request gets (its own, its tenant's
// default, the daemon's), the tenant policy that bounds it, and nothing left of a gVisor
// sandbox (processes, runsc state, cgroups, mounts) after a SIGKILLed daemon restarts.
// Needs runsc (Debian package runsc, deploy/setup.sh); each test says so when it is missing.
#include <dirent.h>
#include <signal.h>
#include <unistd.h>

#include <fstream>
#include <sstream>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "common/sha256.h"
#include "gtest/gtest.h"
#include "tests/integration/daemon_harness.h"

namespace sandgate::testing {
namespace {

constexpr char kToken[] = "gvisor-a";        // no isolation policy
constexpr char kOnlyNsToken[] = "gvisor-b";  // may use namespaces only
constexpr char kGvisorToken[] = "gvisor-c";  // gvisor by default
constexpr uint32_t kUidBase = 351000;        // this binary's range (CMakeLists.txt)
constexpr char kGvisorDir[] = "/run/sandgate-sandboxes/gvisor";

// Host processes whose command line names `needle` (runsc, its gofer and its Sentry all
// carry the container id, "sandgate-<session id>", in theirs).
std::vector<std::string> ProcessesNaming(const std::string& needle) {
  std::vector<std::string> out;
  DIR* d = opendir("/proc");
  while (struct dirent* e = readdir(d)) {
    const pid_t pid = atoi(e->d_name);
    if (pid <= 0) continue;
    std::ifstream in(absl::StrCat("/proc/", pid, "/cmdline"));
    std::stringstream cmd;
    cmd << in.rdbuf();
    std::string line = cmd.str();
    std::replace(line.begin(), line.end(), '\0', ' ');
    std::string state;
    std::ifstream stat(absl::StrCat("/proc/", pid, "/stat"));
    std::getline(stat, state);
    const size_t paren = state.rfind(')');
    const bool zombie =
        paren != std::string::npos && state.size() > paren + 2 && state[paren + 2] == 'Z';
    if (!zombie && absl::StrContains(line, needle)) out.push_back(absl::StrCat(pid, ": ", line));
  }
  closedir(d);
  return out;
}

// Lines of the host's mountinfo that name `needle`.
std::vector<std::string> MountsNaming(const std::string& needle) {
  std::vector<std::string> out;
  std::ifstream in("/proc/self/mountinfo");
  std::string line;
  while (std::getline(in, line)) {
    if (absl::StrContains(line, needle)) out.push_back(line);
  }
  return out;
}

// Cgroup directories named `name` anywhere under /sys/fs/cgroup (three levels deep at most
// below the daemon's own cgroup: enough for sandgate/<name>).
void FindCgroups(const std::string& dir, const std::string& name, int depth,
                 std::vector<std::string>* out) {
  if (depth > 6) return;
  DIR* d = opendir(dir.c_str());
  if (d == nullptr) return;
  while (struct dirent* e = readdir(d)) {
    if (e->d_type != DT_DIR || e->d_name[0] == '.') continue;
    const std::string path = dir + "/" + e->d_name;
    if (name == e->d_name) out->push_back(path);
    FindCgroups(path, name, depth + 1, out);
  }
  closedir(d);
}

class GvisorTest : public ::testing::Test {
 protected:
  void SetUp() override {
    if (access("/usr/bin/runsc", X_OK) != 0) {
      GTEST_SKIP() << "runsc is NOT INSTALLED (Debian package runsc; deploy/setup.sh): "
                      "the gVisor integration tests did not run";
    }
    daemon_ = std::make_unique<DaemonHarness>(
        nlohmann::json{{"tenants",
                        {{{"name", "a"}, {"token_sha256", Sha256::Hex(kToken)}},
                         {{"name", "b"},
                          {"token_sha256", Sha256::Hex(kOnlyNsToken)},
                          {"policy", {{"isolation_levels", {"namespaces"}}}}},
                         {{"name", "c"},
                          {"token_sha256", Sha256::Hex(kGvisorToken)},
                          {"policy", {{"default_isolation", "gvisor"}}}}}},
                       {"local", {{"uid_base", kUidBase}, {"uid_count", 16}}}});
    daemon_->Start();
    stub_ = daemon_->Stub();
  }

  grpc::Status Create(const std::string& token, const std::string& isolation, v1::Session* s) {
    v1::CreateSessionRequest req;
    req.mutable_sandbox()->set_isolation(isolation);
    return stub_->CreateSession(DaemonHarness::Context(token).get(), req, s);
  }

  std::string Exec(const std::string& token, const std::string& id, const std::string& command) {
    v1::ExecRequest req;
    req.set_session_id(id);
    req.set_command(command);
    auto ctx = DaemonHarness::Context(token);
    auto reader = stub_->Exec(ctx.get(), req);
    std::string out;
    v1::ExecResponse r;
    while (reader->Read(&r)) {
      if (r.has_output() && r.output().stream() == v1::CommandOutput::STREAM_STDOUT) {
        out += r.output().data();
      }
    }
    grpc::Status st = reader->Finish();
    EXPECT_TRUE(st.ok()) << st.error_message();
    return out;
  }

  std::unique_ptr<DaemonHarness> daemon_;
  std::unique_ptr<v1::Sandgate::Stub> stub_;
};

// The issue's "done when": `session create --isolation gvisor` gives a session whose kernel is
// gVisor's; the level each request gets is recorded on the session.
TEST_F(GvisorTest, EachLevelRunsOnItsKernelAndTheSessionSaysWhichItGot) {
  v1::Session g;
  ASSERT_TRUE(Create(kToken, "gvisor", &g).ok());
  EXPECT_EQ(g.sandbox().isolation(), "gvisor");
  EXPECT_EQ(Exec(kToken, g.id(), "uname -r"), "4.4.0\n");
  std::string host_kernel;
  std::ifstream("/proc/sys/kernel/osrelease") >> host_kernel;
  v1::Session n;
  ASSERT_TRUE(Create(kToken, "", &n).ok());
  EXPECT_EQ(n.sandbox().isolation(), "namespaces") << "the daemon's default";
  EXPECT_EQ(Exec(kToken, n.id(), "uname -r"), host_kernel + "\n");
  v1::Session c;
  ASSERT_TRUE(Create(kGvisorToken, "", &c).ok());
  EXPECT_EQ(c.sandbox().isolation(), "gvisor") << "tenant c's default";
  EXPECT_EQ(Exec(kGvisorToken, c.id(), "uname -r"), "4.4.0\n");
}

// A warm pool of gVisor sandboxes serves gVisor sessions (and only those).
TEST(GvisorWarmPoolTest, AGvisorShapeServesGvisorSessions) {
  if (access("/usr/bin/runsc", X_OK) != 0) {
    GTEST_SKIP() << "runsc is NOT INSTALLED (Debian package runsc; deploy/setup.sh)";
  }
  DaemonHarness daemon(nlohmann::json{{"local", {{"uid_base", kUidBase}, {"uid_count", 16}}},
                                      {"warm_pool", {{{"size", 1}, {"isolation", "gvisor"}}}}});
  daemon.Start();
  auto stub = daemon.Stub();
  ASSERT_TRUE(Eventually("the pool is full",
                         [&] { return absl::StrContains(daemon.Log(), "warm_pool.filled"); }));
  v1::CreateSessionRequest req;
  v1::Session n;
  ASSERT_TRUE(stub->CreateSession(DaemonHarness::Context().get(), req, &n).ok());
  EXPECT_FALSE(n.from_warm_pool()) << "a namespaces session took a gVisor sandbox";
  req.mutable_sandbox()->set_isolation("gvisor");
  v1::Session g;
  ASSERT_TRUE(stub->CreateSession(DaemonHarness::Context().get(), req, &g).ok());
  EXPECT_TRUE(g.from_warm_pool());
  v1::ExecRequest exec;
  exec.set_session_id(g.id());
  exec.set_command("uname -r");
  auto ctx = DaemonHarness::Context();
  auto reader = stub->Exec(ctx.get(), exec);
  std::string out;
  v1::ExecResponse r;
  while (reader->Read(&r)) {
    if (r.has_output()) out += r.output().data();
  }
  EXPECT_TRUE(reader->Finish().ok());
  EXPECT_EQ(out, "4.4.0\n");
}

// The issue's "done when": the financial analysis verifies under gVisor, as under namespaces.
TEST_F(GvisorTest, TheFinancialAnalysisVerifiesUnderGvisor) {
  v1::RunAnalysisRequest req = SampleRequest();
  req.mutable_sandbox()->set_isolation("gvisor");
  v1::Run run;
  grpc::Status st = stub_->RunAnalysis(DaemonHarness::Context(kToken).get(), req, &run);
  ASSERT_TRUE(st.ok()) << st.error_message();
  std::vector<v1::Event> events = FollowToEnd(*stub_, run.id(), kToken);
  ASSERT_FALSE(events.empty());
  EXPECT_EQ(events.back().run_finished().status(), v1::RUN_STATUS_SUCCEEDED)
      << events.back().run_finished().reason();
  // Its one sandbox was a gVisor one.
  EXPECT_TRUE(absl::StrContains(daemon_->Log(), R"("isolation":"gvisor","level":"info")"))
      << daemon_->Log();
  EXPECT_FALSE(absl::StrContains(daemon_->Log(), R"("isolation":"namespaces")"));
}

// The probe playbook reports the level and kernel it saw: gVisor's under gvisor, the host's
// otherwise; its probe.isolation check compares the level seen with the one asked for.
TEST_F(GvisorTest, TheProbeReportsTheKernelOfItsLevel) {
  std::string host_kernel;
  std::ifstream("/proc/sys/kernel/osrelease") >> host_kernel;
  for (const std::string level : {"gvisor", "namespaces"}) {
    v1::RunAnalysisRequest req;
    req.set_playbook("sandbox-probe");
    auto* in = req.add_inputs();
    in->set_name("data.csv");
    in->set_content("year,revenue\n2024,1\n");
    req.mutable_sandbox()->set_isolation(level);
    v1::Run run;
    ASSERT_TRUE(stub_->RunAnalysis(DaemonHarness::Context(kToken).get(), req, &run).ok());
    std::vector<v1::Event> events = FollowToEnd(*stub_, run.id(), kToken);
    ASSERT_FALSE(events.empty());
    const v1::RunFinished& finished = events.back().run_finished();
    EXPECT_EQ(finished.status(), v1::RUN_STATUS_SUCCEEDED) << finished.reason();
    EXPECT_TRUE(absl::EndsWith(
        finished.summary().headline(),
        ", isolation " + level + ", kernel " + (level == "gvisor" ? "4.4.0" : host_kernel)))
        << level << ": " << finished.summary().headline();
  }
}

// Processes you talk to, through the real daemon: stdin crosses the bridge's tunnel; a
// terminal cannot (its descriptor would have to leave gVisor), so it is refused by name when
// the process is started, and the session lives on.
TEST_F(GvisorTest, StdinReachesAProcessAndATerminalIsRefusedByName) {
  v1::Session s;
  ASSERT_TRUE(Create(kToken, "gvisor", &s).ok());
  v1::StartProcessRequest pty;
  pty.set_session_id(s.id());
  pty.add_argv("python3");
  pty.add_argv("-i");
  pty.mutable_pty()->set_rows(24);
  pty.mutable_pty()->set_cols(80);
  v1::Process refused;
  grpc::Status st = stub_->StartProcess(DaemonHarness::Context(kToken).get(), pty, &refused);
  EXPECT_EQ(st.error_code(), grpc::StatusCode::FAILED_PRECONDITION);
  EXPECT_TRUE(
      absl::StrContains(st.error_message(), "a terminal is not available under isolation gvisor"))
      << st.error_message();

  v1::StartProcessRequest cat;
  cat.set_session_id(s.id());
  cat.add_argv("cat");
  cat.set_stdin(true);
  v1::Process p;
  ASSERT_TRUE(stub_->StartProcess(DaemonHarness::Context(kToken).get(), cat, &p).ok());
  v1::WriteProcessInputRequest in;
  in.set_session_id(s.id());
  in.set_process_id(p.id());
  in.set_data("through the tunnel\n");
  in.set_close_stdin(true);
  v1::WriteProcessInputResponse written;
  st = stub_->WriteProcessInput(DaemonHarness::Context(kToken).get(), in, &written);
  ASSERT_TRUE(st.ok()) << st.error_message();
  EXPECT_EQ(written.written_bytes(), 19u);
  v1::ReadProcessOutputRequest read;
  read.set_session_id(s.id());
  read.set_process_id(p.id());
  read.set_until_exit(true);
  read.mutable_wait()->set_seconds(20);
  v1::ProcessOutput out;
  st = stub_->ReadProcessOutput(DaemonHarness::Context(kToken).get(), read, &out);
  ASSERT_TRUE(st.ok()) << st.error_message();
  std::string text;
  for (const auto& c : out.chunks()) text += c.data();
  EXPECT_EQ(text, "through the tunnel\n");
  EXPECT_EQ(out.process().state(), v1::Process::STATE_EXITED);
  EXPECT_EQ(Exec(kToken, s.id(), "echo alive"), "alive\n");
}

TEST_F(GvisorTest, ThePolicyBoundsTheLevelAndBadLevelsAreNamed) {
  v1::Session s;
  grpc::Status st = Create(kOnlyNsToken, "gvisor", &s);
  EXPECT_EQ(st.error_code(), grpc::StatusCode::PERMISSION_DENIED);
  EXPECT_TRUE(absl::StrContains(st.error_message(),
                                "isolation level 'gvisor' is not allowed (allowed: namespaces)"))
      << st.error_message();
  EXPECT_TRUE(Create(kOnlyNsToken, "namespaces", &s).ok());
  for (const std::string& bad : std::vector<std::string>{
           "vm", "GVISOR", std::string("gvisor\0x", 8), std::string(300, 'g')}) {
    st = Create(kToken, bad, &s);
    EXPECT_EQ(st.error_code(), grpc::StatusCode::INVALID_ARGUMENT) << bad;
    EXPECT_TRUE(absl::StrContains(st.error_message(), "sandbox.isolation: unknown level"))
        << st.error_message();
  }
  st = Create(kToken, "\xff\xfe", &s);  // not UTF-8: refused before anything reads it
  EXPECT_EQ(st.error_code(), grpc::StatusCode::INVALID_ARGUMENT) << st.error_message();
  // A run gets the level the same way.
  v1::RunAnalysisRequest run = SampleRequest();
  run.mutable_sandbox()->set_isolation("gvisor");
  v1::Run r;
  st = stub_->RunAnalysis(DaemonHarness::Context(kOnlyNsToken).get(), run, &r);
  EXPECT_EQ(st.error_code(), grpc::StatusCode::PERMISSION_DENIED) << st.error_message();
}

// Issue 22's cleanup test: gVisor sandboxes alive (one with a setsid sleeper), the daemon
// SIGKILLed, restarted: nothing of them is left on the host.
TEST_F(GvisorTest, ASigkilledDaemonLeavesNothingOfItsGvisorSandboxesAfterRestart) {
  std::vector<std::string> ids;
  for (int i = 0; i < 2; ++i) {
    v1::Session s;
    ASSERT_TRUE(Create(kToken, "gvisor", &s).ok());
    ids.push_back(s.id());
  }
  Exec(kToken, ids[0], "setsid sleep 300 >/dev/null 2>&1 < /dev/null & echo started");
  const std::string mounts = absl::StrCat("/run/sandgate-sandboxes/", kUidBase / 100);
  for (const std::string& id : ids) {
    const std::string container = "sandgate-" + id;
    EXPECT_FALSE(ProcessesNaming(container).empty()) << "no runsc for " << id;
    EXPECT_EQ(access(absl::StrCat(kGvisorDir, "/", container).c_str(), F_OK), 0);
  }
  EXPECT_FALSE(MountsNaming(mounts).empty()) << "the sessions' tmpfs mounts";
  daemon_->Stop(SIGKILL);
  daemon_->Start();  // sweeps before it serves
  for (const std::string& id : ids) {
    const std::string container = "sandgate-" + id;
    EXPECT_TRUE(Eventually("runsc, its gofer and its Sentry gone", [&] {
      return ProcessesNaming(container).empty();
    })) << ::testing::PrintToString(ProcessesNaming(container));
    EXPECT_NE(access(absl::StrCat(kGvisorDir, "/", container).c_str(), F_OK), 0)
        << "runsc state or bundle of " << id << " left";
    std::vector<std::string> cgroups;
    FindCgroups("/sys/fs/cgroup", container, 0, &cgroups);
    EXPECT_EQ(cgroups, std::vector<std::string>{});
  }
  EXPECT_EQ(MountsNaming(mounts), std::vector<std::string>{});
  EXPECT_TRUE(absl::StrContains(daemon_->Log(), "sandbox.swept"));
}

}  // namespace
}  // namespace sandgate::testing
