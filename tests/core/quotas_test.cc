// RunQuotas: runs_per_minute on a FakeClock, and the bound on waiting runs' input bytes.
#include "core/quotas.h"

#include "absl/strings/match.h"
#include "gtest/gtest.h"
#include "store/sqlite_admission_store.h"
#include "tests/common/temp_dir.h"
#include "tests/fakes/fake_clock.h"

namespace sandgate::core {
namespace {

TEST(RunQuotasTest, AStartLeavesTheRateWindowExactlyAMinuteLaterNotBefore) {
  Config config;
  TenantConfig tenant;
  tenant.name = "team-a";
  tenant.quotas.runs_per_minute = 2;
  const Caller caller{"team-a", false, &tenant};
  testing::FakeClock clock;
  RunQuotas quotas(&config, &clock);

  ASSERT_TRUE(quotas.CheckRate(caller).ok());
  clock.Advance(absl::Seconds(10));
  ASSERT_TRUE(quotas.CheckRate(caller).ok());
  clock.Advance(absl::Seconds(50) - absl::Nanoseconds(1));
  absl::Status refused = quotas.CheckRate(caller);
  EXPECT_EQ(refused.code(), absl::StatusCode::kResourceExhausted);
  EXPECT_TRUE(absl::StrContains(refused.message(), "runs_per_minute (2) of tenant team-a"))
      << refused;
  EXPECT_TRUE(absl::StrContains(refused.message(), "retry in 1s")) << refused;
  clock.Advance(absl::Nanoseconds(1));
  EXPECT_TRUE(quotas.CheckRate(caller).ok()) << "the first start is a minute old now";
  EXPECT_EQ(quotas.CheckRate(caller).code(), absl::StatusCode::kResourceExhausted);
}

TEST(RunQuotasTest, SharedByReplicasTheRateCountsEveryReplicasStartsToTheMinute) {
  Config config;
  TenantConfig tenant;
  tenant.name = "team-a";
  tenant.quotas.runs_per_minute = 2;
  const Caller caller{"team-a", false, &tenant};
  testing::FakeClock clock;
  testing::ScopedTempDir dir("sg-quotas");
  auto store_a = *store::SqliteAdmissionStore::Open(dir.path() + "/state.db");
  auto store_b = *store::SqliteAdmissionStore::Open(dir.path() + "/state.db");
  RunQuotas a(&config, &clock, store_a.get());
  RunQuotas b(&config, &clock, store_b.get());

  ASSERT_TRUE(a.CheckRate(caller).ok());
  clock.Advance(absl::Seconds(10));
  ASSERT_TRUE(b.CheckRate(caller).ok());
  clock.Advance(absl::Seconds(50) - absl::Nanoseconds(1));
  absl::Status refused = a.CheckRate(caller);
  EXPECT_EQ(refused.code(), absl::StatusCode::kResourceExhausted) << "b's start counts on a";
  EXPECT_TRUE(absl::StrContains(refused.message(), "retry in 1s")) << refused;
  clock.Advance(absl::Nanoseconds(1));
  EXPECT_TRUE(b.CheckRate(caller).ok()) << "a's start is a minute old now";
  EXPECT_EQ(a.CheckRate(caller).code(), absl::StatusCode::kResourceExhausted);
}

TEST(RunQuotasTest, NoLimitWithoutATenantPolicy) {
  Config config;
  testing::FakeClock clock;
  RunQuotas quotas(&config, &clock);
  for (int i = 0; i < 1000; ++i) ASSERT_TRUE(quotas.CheckRate(Caller{"local", false}).ok());
}

TEST(RunQuotasTest, WaitingInputsAreBoundedButOneRunAloneAlwaysFits) {
  Config config;
  config.max_queued_input_bytes = 100;
  testing::FakeClock clock;
  RunQuotas quotas(&config, &clock);
  ASSERT_EQ(*quotas.HoldQueuedBytes(150, /*enforce=*/true), 150u) << "alone, it fits";
  EXPECT_EQ(quotas.HoldQueuedBytes(1, /*enforce=*/true).status().code(),
            absl::StatusCode::kResourceExhausted);
  ASSERT_TRUE(quotas.HoldQueuedBytes(1, /*enforce=*/false).ok()) << "a requeued run is not refused";
  EXPECT_EQ(quotas.queued_input_bytes(), 151u);
  quotas.ReleaseQueuedBytes(150);
  quotas.ReleaseQueuedBytes(1);
  EXPECT_EQ(quotas.queued_input_bytes(), 0u);
}

}  // namespace
}  // namespace sandgate::core
