// Retention on a FakeClock: when a round runs, and which records it takes.
#include "core/retention.h"

#include "core/sandbox_spec.h"
#include "gtest/gtest.h"
#include "store/file_artifact_store.h"
#include "store/sqlite_store.h"
#include "tests/common/temp_dir.h"
#include "tests/fakes/fake_clock.h"

namespace sandgate::core {
namespace {

constexpr absl::Duration kRetention = absl::Hours(24);
constexpr absl::Duration kNs = absl::Nanoseconds(1);

class RetentionTest : public ::testing::Test {
 protected:
  void SetUp() override {
    ASSERT_TRUE(dir_.ok());
    store_ = *store::SqliteStore::Open(dir_.path() + "/s.db");
    artifacts_ = *store::FileArtifactStore::Open(dir_.path() + "/artifacts");
  }
  // A run that finished at `at`.
  void Finished(const std::string& id, absl::Time at) {
    v1::Run run;
    run.set_id(id);
    run.set_tenant("team-a");
    run.set_status(v1::RUN_STATUS_SUCCEEDED);
    *run.mutable_finished_at() = ToProto(at);
    ASSERT_TRUE(store_->CreateRun(run, "").ok());
  }
  bool Kept(const std::string& id) { return store_->GetRun(id).ok(); }

  testing::ScopedTempDir dir_{"sg-retention"};
  testing::FakeClock clock_;
  std::unique_ptr<store::SqliteStore> store_;
  std::unique_ptr<store::ArtifactStore> artifacts_;
};

TEST_F(RetentionTest, ARoundRunsAtStartAndThenEveryPeriodNotBefore) {
  const absl::Time t0 = clock_.Now();
  // Exactly `retention` old at start: the cutoff is strict, so the first round keeps it.
  Finished("run-edge", t0 - kRetention);
  Finished("run-old", t0 - kRetention - kNs);
  Retention retention({store_.get(), artifacts_.get(), &clock_, nullptr, {}}, kRetention);
  ASSERT_TRUE(clock_.BlockUntilSettled(1));
  EXPECT_FALSE(Kept("run-old")) << "the round at start takes what is older than retention";
  EXPECT_TRUE(Kept("run-edge"));

  clock_.Advance(Retention::kPeriod - kNs);
  ASSERT_TRUE(clock_.BlockUntilSettled(1));
  EXPECT_TRUE(Kept("run-edge")) << "no round before the period is over";

  clock_.Advance(kNs);
  ASSERT_TRUE(clock_.BlockUntilSettled(1));
  EXPECT_FALSE(Kept("run-edge")) << "the round at the period takes it";
}

TEST_F(RetentionTest, ARunExactlyRetentionOldAtARoundStaysUntilTheNext) {
  const absl::Time t0 = clock_.Now();
  Finished("run-1", t0 + Retention::kPeriod - kRetention);  // exactly retention old at round 2
  Retention retention({store_.get(), artifacts_.get(), &clock_, nullptr, {}}, kRetention);
  ASSERT_TRUE(clock_.BlockUntilSettled(1));
  clock_.Advance(Retention::kPeriod);
  ASSERT_TRUE(clock_.BlockUntilSettled(1));
  EXPECT_TRUE(Kept("run-1"));
  clock_.Advance(Retention::kPeriod);
  ASSERT_TRUE(clock_.BlockUntilSettled(1));
  EXPECT_FALSE(Kept("run-1"));
}

TEST_F(RetentionTest, ZeroRetentionPurgesNothingInTheBackground) {
  Finished("run-1", clock_.Now() - absl::Hours(1000));
  Retention retention({store_.get(), artifacts_.get(), &clock_, nullptr, {}}, absl::ZeroDuration());
  ASSERT_TRUE(clock_.BlockUntilSettled(1));
  clock_.Advance(absl::Hours(10000));
  ASSERT_TRUE(clock_.BlockUntilSettled(1));
  EXPECT_TRUE(Kept("run-1"));
}

}  // namespace
}  // namespace sandgate::core
