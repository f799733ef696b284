#include "core/sandbox_spec.h"

#include "absl/strings/match.h"
#include "gtest/gtest.h"

namespace sandgate::core {
namespace {

// The level a request gets: its own, else its tenant's default, else the daemon's; and only
// on the local provider.
TEST(SandboxSpecTest, EffectiveIsolationIsTheRequestsThenTheTenantsThenTheDaemons) {
  Config config;
  TenantConfig t;
  t.name = "t";
  Caller caller{"t", false, &t};
  Caller no_policy{"local", true, nullptr};
  v1::SandboxSpec sb;
  EXPECT_EQ(*EffectiveIsolation(sb, "local", caller, config), "namespaces");
  config.isolation = "gvisor";
  EXPECT_EQ(*EffectiveIsolation(sb, "local", no_policy, config), "gvisor");
  t.policy.default_isolation = "namespaces";
  EXPECT_EQ(*EffectiveIsolation(sb, "local", caller, config), "namespaces");
  sb.set_isolation("gvisor");
  EXPECT_EQ(*EffectiveIsolation(sb, "local", caller, config), "gvisor");
  EXPECT_EQ(ToSessionSpec("x", sb, config).isolation, sandbox::Isolation::kGvisor);
  sb.set_isolation("namespaces");
  EXPECT_EQ(ToSessionSpec("x", sb, config).isolation, sandbox::Isolation::kNamespaces);

  // Providers without levels: none is applied, and asking for one is an error naming why.
  v1::SandboxSpec none;
  EXPECT_EQ(*EffectiveIsolation(none, "openai", caller, config), "");
  absl::StatusOr<std::string> named = EffectiveIsolation(sb, "openai", caller, config);
  ASSERT_FALSE(named.ok());
  EXPECT_EQ(named.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_TRUE(absl::StrContains(named.status().message(), "'openai' provider has no isolation"))
      << named.status();
}

}  // namespace
}  // namespace sandgate::core
