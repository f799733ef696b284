// GET /v1/health on the real daemon (server/rest_health.cc, docs/api.md): each isolation
// level's availability, and why gVisor is not available when it is not: a runsc that hangs at
// boot on kvm (tests/fakes/runsc_hangs.sh, as Debian 12's does under nested virtualization)
// and one that is not installed. Any tenant's token reads it; no token, a wrong one or one
// that is not UTF-8 is 401; other methods are not routes.
#include <unistd.h>

#include <string>

#include "absl/strings/match.h"
#include "gtest/gtest.h"
#include "nlohmann/json.hpp"
#include "tests/integration/daemon_harness.h"
#include "tests/integration/rest_client.h"

namespace sandgate::testing {
namespace {

constexpr int kUidBase = 358000;  // this binary's range (CMakeLists.txt)

// A daemon whose local provider gets `local` over the REST test configuration; its health.
struct Health {
  std::unique_ptr<DaemonHarness> daemon;
  std::string url;
  nlohmann::json answer;
};
Health Start(const nlohmann::json& local) {
  nlohmann::json config = RestDaemonConfig(1 << 20, kUidBase);
  config["local"].update(local);
  Health h;
  h.daemon = std::make_unique<DaemonHarness>(config);
  h.daemon->Start();
  h.url = HttpBase(*h.daemon) + "/v1/health";
  Answer a = Http("GET", h.url, kBob);
  EXPECT_EQ(a.status, 200) << a.body;
  h.answer = nlohmann::json::parse(a.body, nullptr, false);
  return h;
}

TEST(RestHealthTest, AHangingRunscOnKvmMakesGvisorUnavailableSayingWhy) {
  if (access("/dev/kvm", R_OK | W_OK) != 0) {
    GTEST_SKIP() << "no usable /dev/kvm: the daemon would not probe kvm (it runs ptrace "
                    "there), so this case did not run";
  }
  Health h = Start({{"runsc", FAKE_RUNSC_HANGS},
                    {"gvisor_platform", "kvm"},
                    {"gvisor_probe_timeout_seconds", 1}});
  ASSERT_TRUE(h.answer.is_object()) << h.daemon->Log();
  const nlohmann::json& isolation = h.answer["isolation"];
  EXPECT_EQ(isolation["namespaces"], nlohmann::json({{"available", true}}));
  EXPECT_EQ(isolation["gvisor"]["available"], false);
  const std::string reason = isolation["gvisor"].value("reason", "");
  // The probe's own words: the platform, that runsc hung, and its last line.
  EXPECT_TRUE(absl::StrContains(reason, "kvm")) << reason;
  EXPECT_TRUE(absl::StrContains(reason, "fake runsc: booting")) << reason;
}

TEST(RestHealthTest, AMissingRunscIsNamedWithItsPath) {
  Health h = Start({{"runsc", "/nonexistent/runsc"}});
  ASSERT_TRUE(h.answer.is_object()) << h.daemon->Log();
  EXPECT_EQ(h.answer["isolation"]["namespaces"]["available"], true);
  EXPECT_EQ(h.answer["isolation"]["gvisor"]["available"], false);
  // What a session asking for gvisor is told.
  EXPECT_EQ(h.answer["isolation"]["gvisor"]["reason"],
            "isolation gvisor is not available on this host: runsc not found at "
            "/nonexistent/runsc (Debian package runsc; deploy/setup.sh)");
}

TEST(RestHealthTest, TheInstalledRunscIsAvailableAndOnlyTenantsMayAsk) {
  if (access("/usr/bin/runsc", X_OK) != 0) {
    GTEST_SKIP() << "runsc is NOT INSTALLED (Debian package runsc; deploy/setup.sh): this "
                    "test did not run";
  }
  Health h = Start(nlohmann::json::object());
  ASSERT_TRUE(h.answer.is_object()) << h.daemon->Log();
  EXPECT_EQ(h.answer, nlohmann::json::parse(
                          R"({"isolation": {"namespaces": {"available": true},
                                            "gvisor": {"available": true}}})"));
  // Every tenant reads the same answer; an operator's token is not needed.
  EXPECT_EQ(Http("GET", h.url, kOps).body, Http("GET", h.url, kAlice).body);
  // Hostile callers: no token, a wrong one (401), one that is not UTF-8 (400 from the HTTP
  // server, naming the byte); none of them sees the answer.
  for (const std::string& token : {std::string(), std::string("nope"), std::string("\xff\xfe")}) {
    Answer a = Http("GET", h.url, token);
    EXPECT_EQ(a.status, token == "\xff\xfe" ? 400 : 401) << a.body;
    EXPECT_FALSE(absl::StrContains(a.body, "isolation")) << a.body;
  }
  // A query is not read: a path in it changes nothing, one that is not UTF-8 is refused.
  Answer path = Http("GET", h.url + "?level=..%2F..%2Fetc%2Fpasswd", kBob);
  EXPECT_EQ(path.status, 200) << path.body;
  EXPECT_EQ(nlohmann::json::parse(path.body, nullptr, false), h.answer);
  Answer junk = Http("GET", h.url + "?x=%ff", kBob);
  EXPECT_EQ(junk.status, 400) << junk.body;
  EXPECT_TRUE(absl::StrContains(junk.body, "not valid UTF-8")) << junk.body;
  for (const char* method : {"POST", "DELETE"}) {
    Answer a = Http(method, h.url, kBob, "{}");
    EXPECT_GE(a.status, 400) << method << " " << a.body;
    EXPECT_FALSE(absl::StrContains(a.body, "isolation")) << a.body;
  }
}

}  // namespace
}  // namespace sandgate::testing
