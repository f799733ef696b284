#include "core/policy.h"

#include "absl/strings/match.h"
#include "gtest/gtest.h"

namespace sandgate::core {
namespace {

TEST(PolicyTest, DomainPatterns) {
  std::vector<std::string> p = {"api.example.com", "*.pypi.org"};
  EXPECT_TRUE(DomainAllowed("api.example.com", p));
  EXPECT_TRUE(DomainAllowed("API.Example.com", p));
  EXPECT_TRUE(DomainAllowed("files.pypi.org", p));
  EXPECT_FALSE(DomainAllowed("pypi.org", p));
  EXPECT_FALSE(DomainAllowed("evilpypi.org", p));
  EXPECT_FALSE(DomainAllowed("example.com", p));
}

TEST(PolicyTest, EachRuleIsEnforcedAndNamed) {
  Config config;
  TenantConfig t;
  t.name = "research";
  t.policy.providers = {"local"};
  t.policy.agents = {"reference", "chat"};
  t.policy.models = {"small"};
  t.policy.network_modes = {"disabled"};
  t.policy.max_memory_bytes = 512ull << 20;
  t.policy.max_run_time = absl::Minutes(10);
  Caller caller{"research", false, &t};
  v1::SandboxSpec sb;
  PolicyRequest ok{"local", "reference", "", &sb, absl::Minutes(5)};
  EXPECT_FALSE(CheckPolicy(caller, ok, config).ok())
      << "an unset memory is the daemon's default, 1 GiB";

  sb.set_memory_bytes(256ull << 20);
  EXPECT_TRUE(CheckPolicy(caller, ok, config).ok());
  struct Case {
    PolicyRequest req;
    std::string expect;
  };
  v1::SandboxSpec big = sb;
  big.set_memory_bytes(2ull << 30);
  v1::SandboxSpec net = sb;
  net.mutable_network()->set_mode(v1::NetworkPolicy::MODE_ENABLED);
  for (const Case& c : std::vector<Case>{
           {{"openai", "reference", "", &sb, absl::Minutes(5)},
            "provider 'openai' is not allowed (allowed: local)"},
           {{"local", "openai", "", &sb, absl::Minutes(5)}, "agent 'openai'"},
           {{"local", "chat", "huge", &sb, absl::Minutes(5)}, "model 'huge'"},
           {{"local", "reference", "", &net, absl::Minutes(5)}, "network mode 'enabled'"},
           {{"local", "reference", "", &big, absl::Minutes(5)}, "sandbox.memory_bytes"},
           {{"local", "reference", "", &sb, absl::Hours(1)}, "run_timeout 1h"},
       }) {
    absl::Status st = CheckPolicy(caller, c.req, config);
    EXPECT_EQ(st.code(), absl::StatusCode::kPermissionDenied) << c.expect;
    EXPECT_TRUE(absl::StrContains(st.message(), "policy of tenant research: ")) << st;
    EXPECT_TRUE(absl::StrContains(st.message(), c.expect)) << st;
  }
  // Isolation levels: the resolved level is checked against the tenant's list.
  t.policy.isolation_levels = {"namespaces"};
  v1::SandboxSpec gvisor = sb;
  gvisor.set_isolation("gvisor");
  absl::Status st =
      CheckPolicy(caller, {"local", "reference", "", &gvisor, absl::Minutes(5)}, config);
  EXPECT_EQ(st.code(), absl::StatusCode::kPermissionDenied);
  EXPECT_TRUE(absl::StrContains(st.message(),
                                "isolation level 'gvisor' is not allowed (allowed: namespaces)"))
      << st;
  gvisor.set_isolation("namespaces");
  EXPECT_TRUE(
      CheckPolicy(caller, {"local", "reference", "", &gvisor, absl::Minutes(5)}, config).ok());
  EXPECT_TRUE(CheckPolicy(Caller{"local", true, nullptr},
                          {"openai", "x", "y", &big, absl::Hours(9)}, config)
                  .ok())
      << "the default tenant has no policy";
}

}  // namespace
}  // namespace sandgate::core
