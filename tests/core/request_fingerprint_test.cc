#include "core/request_fingerprint.h"

#include <functional>
#include <string>
#include <vector>

#include "gtest/gtest.h"

namespace sandgate::core {
namespace {

v1::RunAnalysisRequest Base() {
  v1::RunAnalysisRequest r;
  auto* in = r.add_inputs();
  in->set_name("a.csv");
  in->set_content("year,revenue\n2020,1\n");
  r.set_idempotency_key("k");
  (*r.mutable_labels())["a"] = "1";
  (*r.mutable_labels())["b"] = "2";
  return r;
}

TEST(RequestFingerprintTest, SameRequestSameFingerprintWhateverTheKeyOrMapOrder) {
  v1::RunAnalysisRequest a = Base(), b;
  b.set_idempotency_key("another");
  (*b.mutable_labels())["b"] = "2";  // inserted in the other order
  (*b.mutable_labels())["a"] = "1";
  *b.mutable_inputs() = a.inputs();
  EXPECT_EQ(RequestFingerprint(a), RequestFingerprint(b));
  EXPECT_EQ(RequestFingerprint(a).size(), 64u);
}

// Every field that can change the outcome changes the fingerprint, the inputs'
// bytes included.
TEST(RequestFingerprintTest, EveryFieldCounts) {
  const std::vector<std::function<void(v1::RunAnalysisRequest&)>> changes = {
      [](auto& r) { r.mutable_inputs(0)->set_content("year,revenue\n2020,2\n"); },
      [](auto& r) { r.mutable_inputs(0)->set_name("b.csv"); },
      [](auto& r) { r.add_inputs()->set_name("c.csv"); },
      [](auto& r) { r.set_playbook("sandbox-probe"); },
      [](auto& r) { r.set_agent("chat"); },
      [](auto& r) { r.set_model("m"); },
      [](auto& r) { r.set_provider("openai"); },
      [](auto& r) { r.set_session_id("s1"); },
      [](auto& r) { r.set_max_turns(3); },
      [](auto& r) { r.mutable_run_timeout()->set_seconds(5); },
      [](auto& r) { (*r.mutable_labels())["a"] = "other"; },
      [](auto& r) { r.mutable_sandbox()->set_memory_bytes(1 << 30); },
      [](auto& r) { r.mutable_sandbox()->add_setup_commands("true"); },
      [](auto& r) { (*r.mutable_sandbox()->mutable_env())["X"] = "1"; },
      [](auto& r) {
        r.mutable_sandbox()->mutable_network()->set_mode(v1::NetworkPolicy::MODE_ENABLED);
      },
      [](auto& r) { r.mutable_sandbox()->add_files()->set_path("x"); },
      // Present but empty differs from absent (an empty sandbox spec means the
      // defaults either way, but nothing here guesses what the daemon makes of
      // a field).
      [](auto& r) { r.mutable_sandbox()->mutable_command_timeout(); },
  };
  const std::string base = RequestFingerprint(Base());
  std::vector<std::string> seen = {base};
  for (size_t i = 0; i < changes.size(); ++i) {
    v1::RunAnalysisRequest r = Base();
    changes[i](r);
    std::string fp = RequestFingerprint(r);
    EXPECT_NE(fp, base) << "change " << i;
    for (const std::string& s : seen) EXPECT_NE(fp, s) << "change " << i << " collides";
    seen.push_back(fp);
  }
}

TEST(RequestFingerprintTest, ADifferentRequestUnderAKeyIsRefusedNamingTheRun) {
  store::KeyedRecord found{"run-1234", "aaaa"};
  EXPECT_TRUE(CheckSameRequest(found, "k", "aaaa").ok());
  absl::Status st = CheckSameRequest(found, "k", "bbbb");
  EXPECT_EQ(st.code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_EQ(st.message(),
            "idempotency_key 'k' was used for a different request (run-1234); "
            "use a new key for a new request");
  // Stored before fingerprints: cannot be compared, answered as before.
  EXPECT_TRUE(CheckSameRequest(store::KeyedRecord{"run-old", ""}, "k", "bbbb").ok());
}

}  // namespace
}  // namespace sandgate::core
