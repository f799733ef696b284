#include "core/request_validation.h"

#include <functional>
#include <string>
#include <vector>

#include "absl/strings/match.h"
#include "core/sandbox_spec.h"
#include "gtest/gtest.h"

namespace sandgate::core {
namespace {

struct Case {
  const char* name;
  std::function<void(v1::RunAnalysisRequest&)> change;
  const char* message;  // a part of the INVALID_ARGUMENT message
};

v1::RunAnalysisRequest Valid() {
  v1::RunAnalysisRequest r;
  r.add_inputs()->set_name("a.csv");
  return r;
}

// Each field a request carries, pushed past its bound, is refused naming the
// field and limit.
TEST(RequestValidationTest, EveryRunFieldIsBoundedAndNamed) {
  const std::string big(2000, 'x');
  const std::vector<Case> cases = {
      {"files escape", [](auto& r) { r.mutable_sandbox()->add_files()->set_path("../../etc/x"); },
       "sandbox.files[0].path: '../../etc/x' must stay inside the workspace"},
      {"files inner ..", [](auto& r) { r.mutable_sandbox()->add_files()->set_path("a/../../x"); },
       "sandbox.files[0].path"},
      {"files absolute", [](auto& r) { r.mutable_sandbox()->add_files()->set_path("/etc/x"); },
       "sandbox.files[0].path: '/etc/x' must be relative"},
      {"files dir", [](auto& r) { r.mutable_sandbox()->add_files()->set_path("x/"); },
       "names a directory"},
      {"files duplicate",
       [](auto& r) {
         r.mutable_sandbox()->add_files()->set_path("a");
         r.mutable_sandbox()->add_files()->set_path("a");
       },
       "sandbox.files[1].path: duplicate path 'a'"},
      {"files mode",
       [](auto& r) {
         auto* f = r.mutable_sandbox()->add_files();
         f->set_path("a");
         f->set_mode(04755);
       },
       "sandbox.files[0].mode: permission bits only"},
      {"files count",
       [](auto& r) {
         for (int i = 0; i < 300; ++i)
           r.mutable_sandbox()->add_files()->set_path("f" + std::to_string(i));
       },
       "sandbox.files: at most 256 entries"},
      {"workspace tiny", [](auto& r) { r.mutable_sandbox()->set_workspace_bytes(1); },
       "sandbox.workspace_bytes: at least 1 MiB"},
      {"memory huge", [](auto& r) { r.mutable_sandbox()->set_memory_bytes(1ull << 63); },
       "sandbox.memory_bytes: at most 64 GiB (daemon ceiling "
       "limits.memory_bytes)"},
      {"processes huge", [](auto& r) { r.mutable_sandbox()->set_max_processes(1u << 30); },
       "sandbox.max_processes: at most 4096 (daemon ceiling"},
      {"run_timeout ten years",
       [](auto& r) { r.mutable_run_timeout()->set_seconds(10ll * 365 * 86400); },
       "run_timeout: at most 24h (daemon ceiling limits.run_timeout_seconds)"},
      {"run_timeout negative", [](auto& r) { r.mutable_run_timeout()->set_seconds(-1); },
       "run_timeout: must be positive"},
      {"command_timeout",
       [](auto& r) { r.mutable_sandbox()->mutable_command_timeout()->set_seconds(1ll << 40); },
       "sandbox.command_timeout: at most 24h"},
      {"idempotency key 1 MiB", [](auto& r) { r.set_idempotency_key(std::string(1 << 20, 'k')); },
       "idempotency_key: at most 256 bytes (got 1048576)"},
      {"idempotency key control", [](auto& r) { r.set_idempotency_key("a\nb"); },
       "idempotency_key: printable ASCII"},
      {"labels count",
       [](auto& r) {
         for (int i = 0; i < 65; ++i) (*r.mutable_labels())["k" + std::to_string(i)] = "v";
       },
       "labels: at most 64 entries"},
      {"label value", [big](auto& r) { (*r.mutable_labels())["k"] = big; },
       "labels[k]: at most 1024 bytes"},
      {"label key", [big](auto& r) { (*r.mutable_labels())[big] = "v"; },
       "labels key: at most 128 bytes"},
      {"env count",
       [](auto& r) {
         for (int i = 0; i < 257; ++i)
           (*r.mutable_sandbox()->mutable_env())["V" + std::to_string(i)] = "1";
       },
       "sandbox.env: at most 256 entries"},
      {"env name", [](auto& r) { (*r.mutable_sandbox()->mutable_env())["A=B"] = "1"; },
       "'A=B' is not a variable name"},
      {"env value",
       [](auto& r) { (*r.mutable_sandbox()->mutable_env())["A"] = std::string(40 << 10, 'x'); },
       "sandbox.env[A]: at most 32768 bytes"},
      {"domains count",
       [](auto& r) {
         auto* n = r.mutable_sandbox()->mutable_network();
         n->set_mode(v1::NetworkPolicy::MODE_RESTRICTED);
         for (int i = 0; i < 65; ++i) n->add_allowed_domains("d" + std::to_string(i) + ".example");
       },
       "sandbox.network.allowed_domains: at most 64 entries"},
      {"domain long",
       [](auto& r) {
         auto* n = r.mutable_sandbox()->mutable_network();
         n->set_mode(v1::NetworkPolicy::MODE_RESTRICTED);
         n->add_allowed_domains(std::string(300, 'a'));
       },
       "sandbox.network.allowed_domains[0]"},
      {"setup count",
       [](auto& r) {
         for (int i = 0; i < 33; ++i) r.mutable_sandbox()->add_setup_commands("true");
       },
       "sandbox.setup_commands: at most 32 entries"},
      {"setup long",
       [](auto& r) { r.mutable_sandbox()->add_setup_commands(std::string(70 << 10, 'x')); },
       "sandbox.setup_commands[0]: at most 65536 bytes"},
      {"inputs count",
       [](auto& r) {
         for (int i = 0; i < 64; ++i) r.add_inputs()->set_name("i" + std::to_string(i));
       },
       "inputs: at most 64 entries"},
      {"model long", [big](auto& r) { r.set_model(big); }, "model: at most 128 bytes"},
      {"playbook control", [](auto& r) { r.set_playbook("a\x1b[2J"); },
       "playbook: printable ASCII"},
      {"session_id long", [big](auto& r) { r.set_session_id(big); },
       "session_id: at most 128 bytes"},
      {"max_turns", [](auto& r) { r.set_max_turns(1u << 20); }, "max_turns: at most 1000"},
  };
  const Config config;
  ASSERT_TRUE(ValidateRunRequest(Valid(), config).ok());
  for (const Case& c : cases) {
    v1::RunAnalysisRequest r = Valid();
    c.change(r);
    absl::Status st = ValidateRunRequest(r, config);
    EXPECT_EQ(st.code(), absl::StatusCode::kInvalidArgument) << c.name;
    EXPECT_TRUE(absl::StrContains(st.message(), c.message)) << c.name << ": " << st.message();
  }
}

// The machine's ceilings hold for every caller: they are config, not tenant
// policy.
TEST(RequestValidationTest, CeilingsComeFromTheDaemonsLimits) {
  Config config;
  config.limits.memory_bytes = 2ull << 30;
  v1::RunAnalysisRequest r = Valid();
  r.mutable_sandbox()->set_memory_bytes(3ull << 30);
  EXPECT_EQ(ValidateRunRequest(r, config).message(),
            "sandbox.memory_bytes: at most 2 GiB (daemon ceiling "
            "limits.memory_bytes)");
  r.mutable_sandbox()->set_memory_bytes(2ull << 30);
  EXPECT_TRUE(ValidateRunRequest(r, config).ok());
}

TEST(RequestValidationTest, SessionAndExecRequestsAreBoundedToo) {
  const Config config;
  v1::CreateSessionRequest s;
  s.set_idempotency_key(std::string(300, 'k'));
  EXPECT_TRUE(absl::StrContains(ValidateCreateSessionRequest(s, config).message(),
                                "idempotency_key: at most 256"));
  s.clear_idempotency_key();
  s.mutable_sandbox()->add_files()->set_path("../x");
  EXPECT_TRUE(absl::StrContains(ValidateCreateSessionRequest(s, config).message(),
                                "sandbox.files[0].path"));

  auto exec = [&](std::function<void(v1::ExecRequest&)> change) {
    v1::ExecRequest e;
    e.set_session_id("s1");
    e.set_command("true");
    change(e);
    return ValidateExecRequest(e, config);
  };
  EXPECT_TRUE(exec([](auto&) {}).ok());
  EXPECT_TRUE(exec([](auto& e) { e.set_cwd("."); }).ok());
  EXPECT_TRUE(exec([](auto& e) { e.set_cwd("sub/"); }).ok());
  EXPECT_EQ(exec([](auto& e) { e.clear_session_id(); }).message(), "session_id: required");
  EXPECT_EQ(exec([](auto& e) { e.add_argv("ls"); }).message(), "argv, command: give exactly one");
  EXPECT_TRUE(absl::StrContains(exec([](auto& e) { e.set_cwd("../.."); }).message(),
                                "cwd: '../..' must stay inside"));
  EXPECT_TRUE(absl::StrContains(
      exec([](auto& e) { e.mutable_timeout()->set_seconds(1ll << 40); }).message(),
      "timeout: at most 24h"));
  EXPECT_TRUE(absl::StrContains(exec([](auto& e) { e.set_output_cap_bytes(1ull << 40); }).message(),
                                "output_cap_bytes: at most 64 MiB"));
  EXPECT_TRUE(absl::StrContains(exec([](auto& e) {
                                  e.clear_command();
                                  for (int i = 0; i < 1025; ++i) e.add_argv("x");
                                }).message(),
                                "argv: at most 1024 entries"));
  EXPECT_TRUE(absl::StrContains(
      exec([](auto& e) { (*e.mutable_env())["X"] = std::string("a\0b", 3); }).message(),
      "env[X]: contains a NUL byte"));
  EXPECT_TRUE(absl::StrContains(ValidateReason(std::string(2000, 'r')).message(),
                                "reason: at most 1024 bytes"));
  EXPECT_TRUE(absl::StrContains(ValidateId(std::string(200, 'r'), "run_id").message(),
                                "run_id: at most 128 bytes"));
}

// Issue 20 item 17: a small sandbox whose request leaves the workspace 0 gets one that fits
// its memory, instead of the 256 MiB default refused as above it.
TEST(RequestValidationTest, ASmallSandboxGetsAWorkspaceThatFitsItsMemory) {
  const Config config;
  for (uint64_t mib : {16, 128, 256}) {
    v1::RunAnalysisRequest r = Valid();
    r.mutable_sandbox()->set_memory_bytes(mib << 20);
    EXPECT_TRUE(ValidateRunRequest(r, config).ok())
        << mib << " MiB: " << ValidateRunRequest(r, config).message();
    v1::CreateSessionRequest s;
    *s.mutable_sandbox() = r.sandbox();
    EXPECT_TRUE(ValidateCreateSessionRequest(s, config).ok()) << mib << " MiB";
    const sandbox::SessionSpec spec = ToSessionSpec("s1", r.sandbox(), config);
    EXPECT_EQ(spec.workspace_bytes, (mib << 20) / 4) << mib << " MiB";
    EXPECT_EQ(spec.memory_bytes, mib << 20);
  }
  // The default sandbox keeps the configured default workspace.
  EXPECT_EQ(ToSessionSpec("s1", v1::SandboxSpec(), config).workspace_bytes, config.workspace_bytes);
  // An odd size is rounded down to whole MiB.
  v1::SandboxSpec odd;
  odd.set_memory_bytes((17ull << 20) + 5);
  EXPECT_EQ(WorkspaceBytes(odd, config), 4ull << 20);
}

TEST(RequestValidationTest, AWorkspaceAskedForIsKeptAndOneTooLargeIsNamed) {
  const Config config;
  v1::RunAnalysisRequest r = Valid();
  r.mutable_sandbox()->set_memory_bytes(128ull << 20);
  r.mutable_sandbox()->set_workspace_bytes(100ull << 20);
  EXPECT_TRUE(ValidateRunRequest(r, config).ok()) << ValidateRunRequest(r, config).message();
  EXPECT_EQ(ToSessionSpec("s1", r.sandbox(), config).workspace_bytes, 100ull << 20);
  r.mutable_sandbox()->set_workspace_bytes(128ull << 20);
  const absl::Status st = ValidateRunRequest(r, config);
  EXPECT_EQ(st.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(st.message(),
            "sandbox.workspace_bytes: 128 MiB must be below sandbox.memory_bytes (128 MiB): the "
            "workspace lives in memory; leave it 0 for a quarter of the memory");
}

TEST(RequestValidationTest, BytesReadAsAPersonWritesThem) {
  EXPECT_EQ(FormatBytes(64ull << 30), "64 GiB");
  EXPECT_EQ(FormatBytes(16ull << 20), "16 MiB");
  EXPECT_EQ(FormatBytes(1000), "1000 bytes");
}

}  // namespace
}  // namespace sandgate::core
