// The playbooks' reference plans, played by the fake's scripted Agents API agent
// (ReferencePlanTurns), come back as artifacts that the playbooks' own verifiers accept: the
// fake can stand in for OpenAI-hosted agent environments in the daemon's end-to-end tests. And
// the fake's "leave the network open" switch makes the sandbox probe's verifier fail.
#include "tests/fakes/openai/reference_plan_turns.h"

#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <string>
#include <thread>
#include <vector>

#include "absl/strings/escaping.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "gtest/gtest.h"
#include "playbooks/financial_analyst/playbook.h"
#include "playbooks/sandbox_probe/playbook.h"
#include "tests/fakes/host_listener.h"
#include "tests/fakes/openai/fake_openai_server.h"
#include "tests/sandbox/openai/analyst_scenario.h"

namespace sandgate::testing {
namespace {

using nlohmann::json;

class ReferencePlanTurnsTest : public ::testing::Test {
 protected:
  void SetUp() override { ASSERT_TRUE(fake_.Start()); }

  // Creates a session (streaming: the call returns once the first turn is done) with the
  // inputs as files under /workspace; returns its id.
  std::string RunSession(const std::vector<playbooks::InputFile>& inputs,
                         const playbooks::TaskSettings& settings) {
    json env = {{"type", "openai_hosted"},
                {"network", {{"access", settings.network}}},
                {"env", settings.env},
                {"files", json::array()},
                {"setup_commands", json::array()}};
    if (!settings.allowed_domains.empty()) {
      env["network"]["allowed_domains"] = settings.allowed_domains;
    }
    for (const playbooks::InputFile& in : inputs) {
      env["files"].push_back({{"type", "inline"},
                              {"path", "/workspace/" + in.name},
                              {"data", absl::Base64Escape(in.content)}});
    }
    for (const std::string& c : settings.setup_commands) {
      env["setup_commands"].push_back({{"command", c}});
    }
    upstream::HttpResponse r = fake_.AgentsCall("POST", "/agents/sessions",
                                                {{"agent", {{"model", "gpt-test"}}},
                                                 {"environment", env},
                                                 {"input", "Do the task."},
                                                 {"stream", true}});
    EXPECT_EQ(r.status, 200) << r.body;
    EXPECT_TRUE(absl::StrContains(r.body, "agent.session.turn.completed")) << r.body;
    size_t at = r.body.find("\"session\":{\"id\":\"");
    if (at == std::string::npos) return "";
    at += 17;
    return r.body.substr(at, r.body.find('"', at) - at);
  }

  // The session's artifacts by file name.
  playbooks::Artifacts Download(const std::string& sid) {
    playbooks::Artifacts out;
    upstream::HttpResponse list =
        fake_.AgentsCall("GET", "/agents/sessions/" + sid + "/artifacts?limit=100");
    json page = json::parse(list.body, nullptr, false);
    EXPECT_TRUE(page.is_object()) << list.body;
    if (!page.is_object()) return out;
    for (const json& a : page["data"]) {
      std::string path = a["path"];
      upstream::HttpResponse c =
          fake_.AgentsCall("GET", absl::StrCat("/agents/sessions/", sid, "/artifacts/",
                                               a["id"].get<std::string>(), "/content"));
      out[path.substr(path.rfind('/') + 1)] = c.body;
    }
    return out;
  }

  static std::vector<std::string> Failed(const playbooks::Verdict& v) {
    std::vector<std::string> failed;
    for (const playbooks::Check& c : v.checks) {
      if (!c.passed) failed.push_back(c.name + ": " + c.detail);
    }
    return failed;
  }

  void TearDown() override {
    json st = fake_.State();
    for (const json& s : st["agents"]["sessions"]) {
      fake_.AgentsCall("DELETE", "/agents/sessions/" + s["id"].get<std::string>());
    }
    EXPECT_EQ(fake_.State()["agents"]["sessions"], json::array());
  }

  FakeOpenAiServer fake_{"test-key"};
};

TEST_F(ReferencePlanTurnsTest, FinancialAnalystArtifactsVerify) {
  playbooks::FinancialAnalystPlaybook playbook;
  std::vector<playbooks::InputFile> inputs = {{"statements.csv", SampleStatementsCsv()}};
  playbooks::TaskSettings settings;
  fake_.Scenario(ReferencePlanTurns(playbook.Reference(inputs, "/workspace", settings),
                                    playbook.ExpectedArtifacts()));
  std::string sid = RunSession(inputs, settings);
  playbooks::Artifacts artifacts = Download(sid);
  EXPECT_EQ(artifacts.size(), playbook.ExpectedArtifacts().size());
  playbooks::Verdict v = playbook.Verify(inputs, settings, artifacts);
  EXPECT_FALSE(v.checks.empty());
  EXPECT_EQ(Failed(v), std::vector<std::string>{});
}

class ProbeTest : public ReferencePlanTurnsTest {
 protected:
  // The probe with its URL pointed at the host listener (the daemon sends example.com, which
  // an offline machine cannot reach either way).
  playbooks::Verdict RunProbe() {
    playbooks::SandboxProbePlaybook playbook;
    std::vector<playbooks::InputFile> inputs = {{"data.csv", "year,revenue\n2024,1\n"}};
    playbooks::TaskSettings settings;
    settings.env = {{"TEAM", "blue"}};
    settings.setup_commands = {"echo setup-ran"};
    settings.network = "disabled";
    playbooks::ReferencePlan plan = playbook.Reference(inputs, "/workspace", settings);
    for (playbooks::PlacedFile& f : plan.files) {
      if (f.path != "probe.json") continue;
      json config = json::parse(f.content);
      config["probe_url"] = absl::StrCat("http://127.0.0.1:", listener_.port(), "/");
      f.content = config.dump();
    }
    fake_.Scenario(ReferencePlanTurns(plan, playbook.ExpectedArtifacts()));
    std::string sid = RunSession(inputs, settings);
    return playbook.Verify(inputs, settings, Download(sid));
  }

  HostListener listener_;
};

TEST_F(ProbeTest, NetworkDisabledPasses) {
  playbooks::Verdict v = RunProbe();
  EXPECT_FALSE(v.checks.empty());
  EXPECT_EQ(Failed(v), std::vector<std::string>{});
}

TEST_F(ProbeTest, NetworkLeftOpenFailsTheNetworkCheck) {
  fake_.LeaveNetworkOpen(true);
  std::vector<std::string> failed = Failed(RunProbe());
  ASSERT_EQ(failed.size(), 1u);
  EXPECT_TRUE(absl::StartsWith(failed[0], "probe.network_blocked: the network was reached"))
      << failed[0];
}

}  // namespace
}  // namespace sandgate::testing
