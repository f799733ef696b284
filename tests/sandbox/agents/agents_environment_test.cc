// A run's sandbox as an Agents API openai_hosted environment, and what such an environment
// cannot do refused naming the field (openai-api.md §7).
#include "sandbox/agents/agents_environment.h"

#include "absl/strings/str_cat.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace sandgate::sandbox {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;

SessionSpec Spec() {
  SessionSpec spec;
  spec.id = "s1";
  spec.memory_bytes = 1ull << 30;
  return spec;
}

TEST(AgentsEnvironmentTest, MemoryMustBeAContainerSize) {
  EXPECT_EQ(*ContainerSize(1ull << 30), "small");
  EXPECT_EQ(*ContainerSize(4ull << 30), "medium");
  EXPECT_EQ(*ContainerSize(16ull << 30), "large");
  for (uint64_t bytes : {512ull << 20, 2ull << 30, 64ull << 30}) {
    SessionSpec spec = Spec();
    spec.memory_bytes = bytes;
    absl::Status st = CheckAgentsSpec(spec);
    EXPECT_EQ(st.code(), absl::StatusCode::kInvalidArgument);
    EXPECT_THAT(st.message(), HasSubstr("sandbox.memory_bytes"));
    EXPECT_THAT(st.message(), HasSubstr("4 GiB (medium"));
  }
}

TEST(AgentsEnvironmentTest, WildcardDomainsAndRejectedEnvNamesAreRefused) {
  SessionSpec spec = Spec();
  spec.network.mode = NetworkMode::kRestricted;
  spec.network.allowed_domains = {"pypi.org", "*.example.com"};
  absl::Status st = CheckAgentsSpec(spec);
  EXPECT_EQ(st.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(st.message(), HasSubstr("sandbox.network.allowed_domains[1]: '*.example.com'"));
  spec.network.allowed_domains = {"pypi.org"};
  EXPECT_TRUE(CheckAgentsSpec(spec).ok());
  for (const char* name : {"PATH", "OPENAI_API_KEY", "CODEX_HOME"}) {
    SessionSpec e = Spec();
    e.env[name] = "x";
    absl::Status bad = CheckAgentsSpec(e);
    EXPECT_EQ(bad.code(), absl::StatusCode::kInvalidArgument);
    EXPECT_THAT(bad.message(), HasSubstr(absl::StrCat("sandbox.env[", name, "]")));
  }
}

TEST(AgentsEnvironmentTest, EnvironmentHasTheShapesOfTheSpec) {
  SessionSpec spec = Spec();
  spec.memory_bytes = 4ull << 30;
  spec.env = {{"PROBE_TOKEN", "abc"}};
  spec.network.mode = NetworkMode::kRestricted;
  spec.network.allowed_domains = {"example.com"};
  upstream::AgentEnvironmentSpec env = EnvironmentFor(
      spec, {{"in.txt", "hello\n"}, {"data/x.csv", "a,b\n"}}, {"mkdir -p /workspace/outputs"});
  EXPECT_EQ(env.type, "openai_hosted");
  EXPECT_EQ(env.container_size, "medium");
  ASSERT_TRUE(env.network.has_value());
  EXPECT_EQ(env.network->access, "restricted");
  EXPECT_THAT(env.network->allowed_domains, ElementsAre("example.com"));
  EXPECT_EQ(env.env.at("PROBE_TOKEN"), "abc");
  ASSERT_EQ(env.files.size(), 2u);
  EXPECT_EQ(env.files[0].kind, upstream::AgentFile::Kind::kInline);
  EXPECT_EQ(env.files[0].path, "/workspace/in.txt");
  EXPECT_EQ(env.files[0].data, "hello\n");
  EXPECT_EQ(env.files[1].path, "/workspace/data/x.csv");
  ASSERT_EQ(env.setup_commands.size(), 1u);
  EXPECT_EQ(env.setup_commands[0].command, "mkdir -p /workspace/outputs");
  EXPECT_EQ(env.setup_commands[0].cwd, "/workspace");
  // The beta's network default is "enabled": disabled is always said.
  upstream::AgentEnvironmentSpec plain = EnvironmentFor(Spec(), {}, {});
  EXPECT_EQ(plain.container_size, "small");
  ASSERT_TRUE(plain.network.has_value());
  EXPECT_EQ(plain.network->access, "disabled");
  SessionSpec open = Spec();
  open.network.mode = NetworkMode::kEnabled;
  EXPECT_EQ(EnvironmentFor(open, {}, {}).network->access, "enabled");
}

TEST(AgentsEnvironmentTest, UnenforcedSaysWhatTheEnvironmentDoesNotDo) {
  std::vector<std::string> w = AgentsUnenforced(Spec());
  ASSERT_FALSE(w.empty());
  EXPECT_THAT(w[0], HasSubstr("container_size small"));
  SessionSpec net = Spec();
  net.network.mode = NetworkMode::kEnabled;
  EXPECT_GT(AgentsUnenforced(net).size(), w.size());
}

}  // namespace
}  // namespace sandgate::sandbox
