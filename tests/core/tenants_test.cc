#include "core/tenants.h"

#include "common/sha256.h"
#include "gtest/gtest.h"

namespace sandgate::core {
namespace {

TEST(TenantsTest, NoTenantsMeansOneLocalOperator) {
  Tenants t({});
  auto c = t.Authenticate(std::nullopt);
  ASSERT_TRUE(c.ok());
  EXPECT_EQ(c->tenant, "local");
}

TEST(TenantsTest, TokensMapToTheirTenantByHash) {
  TenantConfig a, ops;
  a.name = "a";
  a.token_sha256 = Sha256::Hex("tok-a");
  ops.name = "ops";
  ops.token_sha256 = Sha256::Hex("tok-ops");
  ops.is_operator = true;
  Tenants t({a, ops});
  EXPECT_EQ(t.Authenticate(std::string("Bearer tok-a"))->tenant, "a");
  EXPECT_FALSE(t.Authenticate(std::string("Bearer tok-a"))->is_operator);
  EXPECT_TRUE(t.Authenticate(std::string("Bearer tok-ops"))->is_operator);
  for (auto bad : {std::optional<std::string>(), std::optional<std::string>("tok-a"),
                   std::optional<std::string>("Bearer "), std::optional<std::string>("Bearer nope"),
                   std::optional<std::string>("Basic tok-a")}) {
    EXPECT_EQ(t.Authenticate(bad).status().code(), absl::StatusCode::kUnauthenticated);
  }
}

}  // namespace
}  // namespace sandgate::core
