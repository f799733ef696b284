// The parts of core::Api that decide before calling a manager: the operator role and the
// arguments it checks itself. (The calls it only forwards are covered by the managers' tests
// and the integration tests.)
#include "core/api.h"

#include "absl/strings/match.h"
#include "gtest/gtest.h"

namespace sandgate::core {
namespace {

// No managers: each call below must answer before it would reach one.
Api NoManagers(std::function<void()> request_drain = nullptr) {
  ApiDeps deps;
  deps.request_drain = std::move(request_drain);
  return Api(std::move(deps));
}

TEST(ApiTest, DrainAndPurgeNeedTheOperatorRole) {
  Api api = NoManagers([] { ADD_FAILURE() << "a tenant started a drain"; });
  Caller tenant{"team-a", false};
  v1::DrainResponse drained;
  absl::Status st = api.Drain(tenant, v1::DrainRequest(), &drained);
  EXPECT_EQ(st.code(), absl::StatusCode::kPermissionDenied);
  EXPECT_TRUE(absl::StrContains(st.message(), "operator role")) << st;
  v1::PurgeResponse purged;
  EXPECT_EQ(api.Purge(tenant, v1::PurgeRequest(), &purged).code(),
            absl::StatusCode::kPermissionDenied);
}

TEST(ApiTest, PurgeRefusesANegativeAge) {
  Api api = NoManagers();
  v1::PurgeRequest req;
  req.mutable_older_than()->set_seconds(-1);
  v1::PurgeResponse purged;
  absl::Status st = api.Purge(Caller{"op", true}, req, &purged);
  EXPECT_EQ(st.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_TRUE(absl::StrContains(st.message(), "older_than")) << st;
}

}  // namespace
}  // namespace sandgate::core

namespace sandgate::core {
namespace {

// A replica without its lease (core/replica.h) answers before a manager would take the work.
TEST(ApiTest, ReplicaWithoutItsLeaseTakesNoNewRunsOrSessions) {
  ApiDeps deps;
  deps.can_take_work = [] {
    return absl::UnavailableError("replica a could not renew its lease; no new work");
  };
  Api api(std::move(deps));
  v1::RunAnalysisRequest run;
  v1::Run started;
  absl::Status st = api.RunAnalysis(Caller{"team-a", false}, &run, &started);
  EXPECT_EQ(st.code(), absl::StatusCode::kUnavailable);
  EXPECT_TRUE(absl::StrContains(st.message(), "could not renew its lease")) << st;
  v1::Session session;
  EXPECT_EQ(api.CreateSession(Caller{"team-a", false}, v1::CreateSessionRequest(), &session).code(),
            absl::StatusCode::kUnavailable);
}

}  // namespace
}  // namespace sandgate::core
