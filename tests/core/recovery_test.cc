// JournalSweeper on a FakeClock: what a provider cannot tell yet is asked again every round,
// and given up on (left for the next start) at the first round past kGiveUpAfter.
#include "core/recovery.h"

#include <atomic>

#include "gtest/gtest.h"
#include "store/sqlite_store.h"
#include "tests/common/temp_dir.h"
#include "tests/fakes/fake_clock.h"

namespace sandgate::core {
namespace {

constexpr absl::Duration kNs = absl::Nanoseconds(1);

// Never knows: every sweep is UNAVAILABLE.
class UnsureProvider : public sandbox::Provider {
 public:
  std::string name() const override { return "unsure"; }
  absl::StatusOr<std::unique_ptr<sandbox::Session>> Create(const sandbox::SessionSpec&,
                                                           const CancelToken*) override {
    return absl::UnimplementedError("sweeps only");
  }
  absl::Status Sweep(const JournalEntry&) override {
    ++sweeps;
    return absl::UnavailableError("may still land");
  }
  std::atomic<int> sweeps{0};
};

TEST(JournalSweeperTest, AsksAgainEachRoundAndGivesUpAtTheFirstRoundPastTheLimit) {
  testing::ScopedTempDir dir("sg-recovery");
  ASSERT_TRUE(dir.ok());
  std::unique_ptr<store::SqliteStore> store = *store::SqliteStore::Open(dir.path() + "/s.db");
  ASSERT_TRUE(store->Record({"unsure:c1", "unsure", "container", {}}).ok());
  UnsureProvider unsure;
  const std::map<std::string, sandbox::Provider*> providers{{"unsure", &unsure}};
  testing::FakeClock clock;
  JournalSweeper sweeper({store.get(), &providers, &clock, nullptr});
  ASSERT_TRUE(sweeper.Sweep().ok());
  EXPECT_EQ(unsure.sweeps.load(), 1);
  ASSERT_TRUE(clock.BlockUntilSettled(1));

  clock.Advance(JournalSweeper::kRound - kNs);
  ASSERT_TRUE(clock.BlockUntilSettled(1));
  EXPECT_EQ(unsure.sweeps.load(), 1) << "not before the round";
  clock.Advance(kNs);
  ASSERT_TRUE(clock.BlockUntilSettled(1));
  EXPECT_EQ(unsure.sweeps.load(), 2) << "at the round";

  clock.Advance(JournalSweeper::kGiveUpAfter - JournalSweeper::kRound - kNs);
  ASSERT_TRUE(clock.BlockUntilSettled(1)) << "still asking just before the limit";
  EXPECT_EQ(unsure.sweeps.load(), 3);
  clock.Advance(JournalSweeper::kRound);
  ASSERT_TRUE(clock.BlockUntilSettled(0));
  sweeper.StopBy(absl::InfiniteFuture());  // returns only once the rounds have ended
  EXPECT_EQ(unsure.sweeps.load(), 4) << "one last round past the limit, then none";
  EXPECT_EQ(store->List()->size(), 1u) << "left for the next start";
}

}  // namespace
}  // namespace sandgate::core
