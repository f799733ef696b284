#include "upstream/http_client.h"

#include <string>
#include <utility>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace sandgate::upstream {
namespace {

using ::testing::ElementsAre;
using ::testing::Pair;

TEST(HttpHeadersTest, LookupIgnoresCaseAndReturnsTheFirstField) {
  HttpHeaders h;
  h.Add("X-Request-Id", "req_1");
  h.Add("x-request-id", "req_2");
  ASSERT_NE(h.Find("X-REQUEST-ID"), nullptr);
  EXPECT_EQ(*h.Find("x-request-id"), "req_1");
  EXPECT_EQ(h.Get("missing"), "");
  EXPECT_EQ(h.Find("missing"), nullptr);
}

TEST(HttpHeadersTest, RedactedHeadersHideCredentialValuesOnly) {
  HttpHeaders h;
  h.Add("authorization", "Bearer sk-1");
  h.Add("Content-Type", "application/json");
  h.Add("api-key", "azure-key");
  EXPECT_THAT(RedactedHeaders(h),
              ElementsAre(Pair("authorization", "[REDACTED]"),
                          Pair("Content-Type", "application/json"), Pair("api-key", "[REDACTED]")));
}

TEST(HttpHeadersTest, RedactSecretsRemovesTheBearerTokenFromText) {
  HttpHeaders h;
  h.Add("Authorization", "Bearer sk-live-123");
  EXPECT_EQ(RedactSecrets("bad key sk-live-123; header 'Bearer sk-live-123'", h),
            "bad key [REDACTED]; header '[REDACTED]'");
  EXPECT_EQ(RedactSecrets("nothing to hide", HttpHeaders()), "nothing to hide");
}

}  // namespace
}  // namespace sandgate::upstream
