#include "playbooks/sandbox_probe/playbook.h"

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "common/errors.h"
#include "common/sha256.h"
#include "nlohmann/json.hpp"
#include "playbooks/sandbox_probe/reference_files.h"
#include "playbooks/summary.h"

namespace sandgate::playbooks {
namespace {

using nlohmann::json;

constexpr char kProgram[] = "sandbox_probe.py";
constexpr char kConfig[] = "probe.json";
constexpr char kReport[] = "sandbox-report.md";
constexpr char kChecks[] = "checks.json";
constexpr size_t kMaxInputs = 16;

std::string ProbeUrl(const TaskSettings& settings) {
  for (const std::string& d : settings.allowed_domains) {
    if (!absl::StartsWith(d, "*.")) return absl::StrCat("https://", d, "/");
  }
  return "https://example.com/";
}

Check Make(std::string name, bool passed, std::string detail) {
  return Check{std::move(name), passed, std::move(detail)};
}

}  // namespace

absl::Status SandboxProbePlaybook::ValidateInputs(const std::vector<InputFile>& inputs) const {
  if (inputs.empty())
    return errors::InvalidArgument("sandbox-probe needs at least one input file to read");
  if (inputs.size() > kMaxInputs) {
    return errors::InvalidArgument(absl::StrCat("sandbox-probe takes at most ", kMaxInputs,
                                                " input files, got ", inputs.size()));
  }
  for (const InputFile& in : inputs) {
    if (in.name == kProgram || in.name == kConfig || in.name == kReport || in.name == kChecks) {
      return errors::InvalidArgument(
          absl::StrCat("input \"", in.name, "\": the probe uses that name"));
    }
  }
  return absl::OkStatus();
}

std::vector<std::string> SandboxProbePlaybook::ExpectedArtifacts() const {
  return {kReport, kChecks};
}

ReferencePlan SandboxProbePlaybook::Reference(const std::vector<InputFile>& inputs,
                                              const std::string& /*workdir*/,
                                              const TaskSettings& settings) const {
  json config = {{"env", settings.env},
                 {"network", settings.network},
                 {"allowed_domains", settings.allowed_domains},
                 {"probe_url", ProbeUrl(settings)},
                 {"setup_commands", settings.setup_commands},
                 {"isolation", settings.isolation},
                 {"inputs", json::array()}};
  for (const InputFile& in : inputs) {
    config["inputs"].push_back({{"name", in.name}, {"sha256", Sha256::Hex(in.content)}});
  }
  ReferencePlan plan;
  plan.files.push_back(
      {kProgram, std::string(probe::kSandboxProbeSource, probe::kSandboxProbeSize), 0644});
  plan.files.push_back({kConfig, config.dump(2), 0644});
  Step step;
  step.name = "probe";
  step.argv = {"python3", kProgram, kConfig};
  step.timeout = absl::Minutes(1);
  plan.steps.push_back(step);
  return plan;
}

std::string SandboxProbePlaybook::Instructions(const std::vector<InputFile>& inputs,
                                               const std::string& workdir,
                                               const TaskSettings& settings) const {
  std::vector<std::string> names;
  for (const InputFile& in : inputs) names.push_back(in.name);
  return absl::StrCat(
      "You are checking a sandbox before it is trusted. Work in ", workdir,
      ". Use shell commands to record: the OS (/etc/os-release) and kernel (uname -r), the "
      "isolation level you see (gvisor if `dmesg` says gVisor, namespaces if /proc/self/status "
      "shows Seccomp: 2, else none) and what showed it, the working directory, the Python and Node "
      "versions (a missing tool is a finding), the "
      "sha256 of each input file (",
      absl::StrJoin(names, ", "), "), whether these environment variables are visible: ",
      settings.env.empty() ? "none requested" : "",
      // Names only: a value may be a secret, and the model has no need to see it.
      absl::StrJoin(settings.env, ", ",
                    [](std::string* out, const auto& kv) { out->append(kv.first); }),
      ", the setup commands you were given and that they ran (the daemon ran them before you "
      "and stops a run at the first that fails; a setup need not leave any file), the files in "
      "the workspace, and the result of `curl -sS -m 5 ",
      ProbeUrl(settings),
      "` (exit code and message; a blocked network is a finding, not a failure; the network "
      "policy is ",
      settings.network,
      "). Write sandbox-report.md (sections: Environment, "
      "Inputs, Environment variables, Setup, Network, Checks, Outputs) and checks.json with "
      "the keys facts{os,kernel,isolation,isolation_evidence,cwd,python,node}, "
      "inputs[{name,sha256,readable}], "
      "env{NAME: matches|differs|missing}, network{tool,exit_code,message,reached}, "
      "workspace[{path,bytes}], setup{commands,ran}, checks[{name,ok,detail}]. Do not stop "
      "until both files exist.");
}

namespace {

// The checks; the summary gets the findings they verified, as far as they got.
std::vector<Check> CheckProbe(const std::vector<InputFile>& inputs, const TaskSettings& settings,
                              const Artifacts& artifacts, v1::RunSummary* summary) {
  std::vector<Check> checks;
  auto report = artifacts.find(kReport);
  auto raw = artifacts.find(kChecks);
  bool have_report = report != artifacts.end() && !report->second.empty();
  bool have_checks = raw != artifacts.end() && !raw->second.empty();
  checks.push_back(Make(absl::StrCat("artifact.", kReport), have_report,
                        have_report ? "present" : "missing or empty"));
  checks.push_back(Make(absl::StrCat("artifact.", kChecks), have_checks,
                        have_checks ? "present" : "missing or empty"));
  if (have_report) AddFile("report", kReport, summary);
  if (have_checks) AddFile("findings", kChecks, summary);
  if (have_report) {
    std::vector<std::string> missing;
    for (const char* h : {"## Environment", "## Inputs", "## Network", "## Checks"}) {
      if (!absl::StrContains(report->second, h)) missing.push_back(h);
    }
    checks.push_back(Make("report.sections", missing.empty(),
                          missing.empty()
                              ? "every section present"
                              : absl::StrCat("missing: ", absl::StrJoin(missing, ", "))));
  }
  if (!have_checks) return checks;
  json doc = json::parse(raw->second, nullptr, /*allow_exceptions=*/false);
  bool parses = doc.is_object() && doc.contains("facts") && doc["facts"].is_object() &&
                doc.contains("inputs") && doc["inputs"].is_array() && doc.contains("env") &&
                doc["env"].is_object() && doc.contains("network") && doc["network"].is_object();
  checks.push_back(Make("checks.parses", parses,
                        parses ? "a JSON object with facts, inputs, env and network"
                               : "not a JSON object with facts, inputs, env and network"));
  if (!parses) return checks;

  // What the sandbox reported about itself: only it can say, and these are shown as its words.
  const json& facts = doc["facts"];
  auto fact = [&](const char* key, const char* if_absent) {
    const json& v = facts.value(key, json());
    return v.is_string() ? v.get<std::string>() : v.is_null() ? std::string(if_absent) : v.dump();
  };
  summary->set_headline(absl::StrCat("sandbox: ", fact("os", "unknown OS"), ", isolation ",
                                     fact("isolation", "unknown"), ", kernel ",
                                     fact("kernel", "unknown")));
  for (const char* key : {"python", "node", "cwd", "uid", "isolation_evidence"}) {
    *summary->add_metrics() = SummaryText(key, fact(key, "not available"));
  }

  std::vector<std::string> absent;
  for (const char* k : {"os", "kernel", "cwd", "python"}) {
    const json& v = doc["facts"].value(k, json());
    if (!v.is_string() || v.get<std::string>().empty()) absent.push_back(k);
  }
  checks.push_back(Make("probe.facts", absent.empty(),
                        absent.empty() ? absl::StrCat(doc["facts"].value("os", ""), ", kernel ",
                                                      doc["facts"].value("kernel", ""))
                                       : absl::StrCat("missing: ", absl::StrJoin(absent, ", "))));

  // The level the sandbox saw from inside against the one the run was given.
  if (!settings.isolation.empty()) {
    const std::string seen = fact("isolation", "not reported");
    checks.push_back(Make("probe.isolation", seen == settings.isolation,
                          absl::StrCat("asked for ", settings.isolation, ", saw ", seen, " (",
                                       fact("isolation_evidence", "no evidence"), "), kernel ",
                                       fact("kernel", "unknown"))));
  }

  std::vector<std::string> bad_inputs;
  for (const InputFile& in : inputs) {
    std::string want = Sha256::Hex(in.content);
    bool ok = false;
    for (const json& e : doc["inputs"]) {
      if (e.is_object() && e.value("name", "") == in.name &&
          e.value("sha256", json()).is_string() && e["sha256"].get<std::string>() == want) {
        ok = true;
      }
    }
    if (!ok) bad_inputs.push_back(in.name);
  }
  checks.push_back(Make("probe.inputs", bad_inputs.empty(),
                        bad_inputs.empty()
                            ? absl::StrCat(inputs.size(), " input(s) read intact")
                            : absl::StrCat("not read intact: ", absl::StrJoin(bad_inputs, ", "))));
  AddCount("inputs read intact", inputs.size() - bad_inputs.size(), summary);

  std::vector<std::string> bad_env;
  for (const auto& [name, value] : settings.env) {
    const json& v = doc["env"].value(name, json());
    if (!v.is_string() || v.get<std::string>() != "matches") bad_env.push_back(name);
  }
  checks.push_back(Make(
      "probe.env", bad_env.empty(),
      bad_env.empty() ? absl::StrCat(settings.env.size(), " variable(s) visible as requested")
                      : absl::StrCat("not visible as requested: ", absl::StrJoin(bad_env, ", "))));

  // The probe runs after the setup, and a failing setup command ends the run before it, so a
  // probe that ran shows that the setup ran. What it must show is that it saw the commands the
  // caller asked for. No file is required: `echo setup-ran` leaves none, and the request has no
  // field naming files a setup must leave.
  const json& setup = doc.contains("setup") ? doc["setup"] : json();
  bool recorded = setup.is_object() && setup.value("ran", json()) == json(true) &&
                  setup.value("commands", json()) == json(settings.setup_commands);
  checks.push_back(Make(
      "probe.setup_output", recorded,
      recorded
          ? absl::StrCat(settings.setup_commands.size(),
                         " setup command(s) ran before the probe, each exited 0 (their "
                         "output is in the run's setup events)")
          : absl::StrCat("checks.json does not record that the ", settings.setup_commands.size(),
                         " requested setup command(s) ran before the probe")));

  const json& net = doc["network"];
  bool reached = net.value("reached", false);
  std::string what =
      absl::StrCat(net.value("tool", json("?")).is_string() ? net.value("tool", "?") : "?",
                   " exit ", net.value("exit_code", json()).dump(), ": ",
                   net.value("message", json("")).is_string() ? net.value("message", "") : "");
  if (settings.network == "disabled") {
    checks.push_back(
        Make("probe.network_blocked", !reached,
             reached ? absl::StrCat("the network was reached with networking disabled (", what, ")")
                     : absl::StrCat("blocked as configured (", what, ")")));
  } else {
    checks.push_back(Make("probe.network_recorded", net.contains("exit_code"), what));
  }
  *summary->add_metrics() =
      SummaryText(absl::StrCat("network (", settings.network, ")"), checks.back().detail);
  return checks;
}

}  // namespace

Verdict SandboxProbePlaybook::Verify(const std::vector<InputFile>& inputs,
                                     const TaskSettings& settings,
                                     const Artifacts& artifacts) const {
  Verdict verdict;
  verdict.checks = CheckProbe(inputs, settings, artifacts, &verdict.summary);
  CountChecks(verdict.checks, &verdict.summary);
  return verdict;
}

}  // namespace sandgate::playbooks
