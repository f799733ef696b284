// The sandbox-probe playbook: its program run for real (on the host, in a temp dir) and the
// daemon's checks of what it wrote, including tampered findings.
#include "playbooks/sandbox_probe/playbook.h"

#include <sys/wait.h>
#include <unistd.h>

#include <cstdlib>
#include <fstream>
#include <map>
#include <sstream>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "gtest/gtest.h"
#include "nlohmann/json.hpp"

namespace sandgate::playbooks {
namespace {

class SandboxProbeTest : public ::testing::Test {
 protected:
  void SetUp() override {
    char tmpl[] = "/tmp/sg-probe-XXXXXX";
    dir_ = mkdtemp(tmpl);
    settings_.env = {{"TEAM", "research"}};
    settings_.setup_commands = {"echo prepared > setup.txt"};
    inputs_ = {{"data.csv", "year,revenue\n2024,1\n"}};
  }
  void TearDown() override { std::system(("rm -rf " + dir_).c_str()); }

  // Places the plan's files and the inputs, runs the setup and the plan's steps in dir_ with
  // exactly the requested environment, and returns the artifacts.
  Artifacts RunReference() {
    ReferencePlan plan = playbook_.Reference(inputs_, dir_, settings_);
    for (const auto& f : plan.files) std::ofstream(dir_ + "/" + f.path) << f.content;
    for (const auto& in : inputs_) std::ofstream(dir_ + "/" + in.name) << in.content;
    std::string env = "env -i PATH=/usr/bin:/bin TEAM=research";
    for (const std::string& setup : settings_.setup_commands) {
      EXPECT_EQ(
          std::system(("cd " + dir_ + " && " + env + " sh -c '" + setup + "' >/dev/null").c_str()),
          0);
    }
    for (const auto& step : plan.steps) {
      std::string cmd = "cd " + dir_ + " && " + env;
      for (const auto& a : step.argv) cmd += " '" + a + "'";
      int rc = std::system((cmd + " >/dev/null").c_str());
      EXPECT_TRUE(WIFEXITED(rc) && WEXITSTATUS(rc) == 0) << cmd;
    }
    Artifacts out;
    for (const auto& name : playbook_.ExpectedArtifacts()) {
      std::ifstream in(dir_ + "/" + name);
      std::stringstream ss;
      ss << in.rdbuf();
      out[name] = ss.str();
    }
    return out;
  }
  static const Check* Find(const std::vector<Check>& checks, const std::string& name) {
    for (const auto& c : checks) {
      if (c.name == name) return &c;
    }
    return nullptr;
  }
  static std::vector<std::string> Failed(const std::vector<Check>& checks) {
    std::vector<std::string> failed;
    for (const auto& c : checks) {
      if (!c.passed) failed.push_back(c.name);
    }
    return failed;
  }

  std::string dir_;
  SandboxProbePlaybook playbook_;
  TaskSettings settings_;
  std::vector<InputFile> inputs_;
};

TEST_F(SandboxProbeTest, ReferenceProbePassesEveryCheck) {
  Artifacts artifacts = RunReference();
  std::vector<Check> checks = playbook_.Verify(inputs_, settings_, artifacts).checks;
  EXPECT_EQ(Failed(checks), std::vector<std::string>{});
  for (const char* name : {"probe.facts", "probe.inputs", "probe.env", "probe.setup_output",
                           "report.sections", "checks.parses"}) {
    EXPECT_NE(Find(checks, name), nullptr) << name;
  }
  nlohmann::json doc = nlohmann::json::parse(artifacts["checks.json"]);
  EXPECT_EQ(doc["env"]["TEAM"], "matches");
  EXPECT_FALSE(absl::StrContains(artifacts["checks.json"], "research"))
      << "values are not recorded";
}

// The summary a client shows: the findings the checks looked at, the daemon's verdict on the
// network, the counts and which file is which.
TEST_F(SandboxProbeTest, SummaryHoldsTheVerifiedFindings) {
  Artifacts artifacts = RunReference();
  v1::RunSummary s = playbook_.Verify(inputs_, settings_, artifacts).summary;
  nlohmann::json doc = nlohmann::json::parse(artifacts["checks.json"]);
  EXPECT_EQ(s.headline(), absl::StrCat("sandbox: ", doc["facts"]["os"].get<std::string>(),
                                       ", isolation ", doc["facts"]["isolation"].get<std::string>(),
                                       ", kernel ", doc["facts"]["kernel"].get<std::string>()));
  std::map<std::string, std::string> metrics;
  for (const auto& m : s.metrics()) metrics[m.label()] = m.text();
  EXPECT_EQ(metrics["cwd"], doc["facts"]["cwd"].get<std::string>());
  EXPECT_TRUE(absl::StartsWith(metrics["network (disabled)"], "blocked as configured"))
      << metrics["network (disabled)"];
  std::map<std::string, uint64_t> counts;
  for (const auto& c : s.counts()) counts[c.label()] = c.value();
  EXPECT_EQ(counts["inputs read intact"], 1u);
  EXPECT_EQ(counts["checks failed"], 0u);
  EXPECT_EQ(counts["checks passed"], playbook_.Verify(inputs_, settings_, artifacts).checks.size());
  ASSERT_EQ(s.files_size(), 2);
  EXPECT_EQ(s.files(0).role(), "report");
  EXPECT_EQ(s.files(0).name(), "sandbox-report.md");

  // With no findings file there is nothing to show but the counts and the report.
  artifacts.erase("checks.json");
  s = playbook_.Verify(inputs_, settings_, artifacts).summary;
  EXPECT_TRUE(s.headline().empty());
  EXPECT_EQ(s.metrics_size(), 0);
  EXPECT_EQ(s.files_size(), 1);
}

// A setup that ran but left no file is what was asked for (`--setup 'echo setup-ran'` used to
// fail with "the setup commands left no file"); so is no setup at all.
// The level the probe saw is checked against the one the run was given. Run here on the
// host, the probe sees no sandbox at all.
TEST_F(SandboxProbeTest, TheIsolationLevelSeenMustBeTheOneAskedFor) {
  settings_.isolation = "gvisor";
  Artifacts artifacts = RunReference();
  nlohmann::json doc = nlohmann::json::parse(artifacts["checks.json"]);
  EXPECT_EQ(doc["facts"]["isolation"], "none") << doc["facts"].dump();
  std::vector<Check> checks = playbook_.Verify(inputs_, settings_, artifacts).checks;
  const Check* c = Find(checks, "probe.isolation");
  ASSERT_NE(c, nullptr);
  EXPECT_FALSE(c->passed);
  EXPECT_TRUE(absl::StartsWith(c->detail, "asked for gvisor, saw none (no seccomp filter"))
      << c->detail;
  doc["facts"]["isolation"] = "gvisor";
  artifacts["checks.json"] = doc.dump();
  EXPECT_EQ(Failed(playbook_.Verify(inputs_, settings_, artifacts).checks),
            std::vector<std::string>{});
  // Without a level to compare (a kept session, a hosted provider), there is no such check.
  settings_.isolation.clear();
  EXPECT_EQ(Find(playbook_.Verify(inputs_, settings_, artifacts).checks, "probe.isolation"),
            nullptr);
}

TEST_F(SandboxProbeTest, SetupThatLeavesNoFilePasses) {
  for (std::vector<std::string> setup :
       {std::vector<std::string>{"echo setup-ran"}, std::vector<std::string>{}}) {
    settings_.setup_commands = setup;
    std::system(("rm -rf " + dir_ + "/*").c_str());
    Artifacts artifacts = RunReference();
    std::vector<Check> checks = playbook_.Verify(inputs_, settings_, artifacts).checks;
    EXPECT_EQ(Failed(checks), std::vector<std::string>{}) << setup.size();
    const Check* c = Find(checks, "probe.setup_output");
    ASSERT_NE(c, nullptr);
    EXPECT_TRUE(absl::StrContains(c->detail, absl::StrCat(setup.size(), " setup command(s) ran")))
        << c->detail;
    EXPECT_TRUE(absl::StrContains(artifacts["sandbox-report.md"], "ran, exit 0") || setup.empty());
  }
}

TEST_F(SandboxProbeTest, EachTamperedFindingFailsItsCheck) {
  Artifacts good = RunReference();
  nlohmann::json doc = nlohmann::json::parse(good["checks.json"]);
  struct Case {
    std::function<void(nlohmann::json&)> tamper;
    std::string failing;
  };
  std::vector<Case> cases = {
      {[](nlohmann::json& d) { d["network"]["reached"] = true; }, "probe.network_blocked"},
      {[](nlohmann::json& d) { d["env"]["TEAM"] = "missing"; }, "probe.env"},
      {[](nlohmann::json& d) { d["inputs"][0]["sha256"] = std::string(64, '0'); }, "probe.inputs"},
      {[](nlohmann::json& d) { d["setup"]["commands"] = {"something else"}; },
       "probe.setup_output"},
      {[](nlohmann::json& d) { d.erase("setup"); }, "probe.setup_output"},
      {[](nlohmann::json& d) { d["facts"].erase("kernel"); }, "probe.facts"},
  };
  for (const auto& c : cases) {
    nlohmann::json bad = doc;
    c.tamper(bad);
    Artifacts artifacts = good;
    artifacts["checks.json"] = bad.dump();
    EXPECT_EQ(Failed(playbook_.Verify(inputs_, settings_, artifacts).checks),
              std::vector<std::string>{c.failing});
  }
  Artifacts broken = good;
  broken["checks.json"] = "{not json";
  EXPECT_EQ(Failed(playbook_.Verify(inputs_, settings_, broken).checks),
            std::vector<std::string>{"checks.parses"});
  Artifacts missing = good;
  missing.erase("sandbox-report.md");
  EXPECT_EQ(Failed(playbook_.Verify(inputs_, settings_, missing).checks),
            std::vector<std::string>{"artifact.sandbox-report.md"});
}

TEST_F(SandboxProbeTest, ReachingTheNetworkIsOnlyRecordedWhenItIsAllowed) {
  Artifacts good = RunReference();
  nlohmann::json doc = nlohmann::json::parse(good["checks.json"]);
  doc["network"]["reached"] = true;
  good["checks.json"] = doc.dump();
  settings_.network = "restricted";
  settings_.allowed_domains = {"api.example.org"};
  std::vector<Check> checks = playbook_.Verify(inputs_, settings_, good).checks;
  EXPECT_EQ(Failed(checks), std::vector<std::string>{});
  EXPECT_NE(Find(checks, "probe.network_recorded"), nullptr);
}

TEST_F(SandboxProbeTest, InputsAreValidated) {
  EXPECT_FALSE(playbook_.ValidateInputs({}).ok());
  EXPECT_FALSE(playbook_.ValidateInputs({{"probe.json", "x"}}).ok());
  EXPECT_TRUE(playbook_.ValidateInputs({{"anything.bin", "x"}}).ok());
  std::string brief = playbook_.Instructions(inputs_, "/work", settings_);
  EXPECT_TRUE(absl::StrContains(brief, "TEAM")) << brief;
  EXPECT_FALSE(absl::StrContains(brief, "research")) << "env values may be secrets";
}

}  // namespace
}  // namespace sandgate::playbooks
