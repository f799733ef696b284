#include "core/event_bounds.h"

#include <map>
#include <string>

#include "absl/strings/str_cat.h"
#include "gtest/gtest.h"

namespace sandgate::core {
namespace {

v1::Event Of(const std::string& run, const std::string& type) {
  v1::Event e;
  e.set_run_id(run);
  e.set_type(type);
  return e;
}

// "type=n,..." of an events.dropped, "" for none.
std::string Counts(const std::optional<v1::Event>& e) {
  if (!e.has_value()) return "";
  std::map<std::string, uint64_t> sorted(e->events_dropped().counts().begin(),
                                         e->events_dropped().counts().end());
  std::string out;
  for (const auto& [type, n] : sorted) absl::StrAppend(&out, out.empty() ? "" : ",", type, "=", n);
  return out;
}

const absl::Time kStart = absl::FromUnixSeconds(1000);

TEST(EventBoundsTest, OnlyTheEventsASandboxCausesAreBounded) {
  EXPECT_TRUE(EventBounds::Bounded("network.decision"));
  EXPECT_TRUE(EventBounds::Bounded("command.output"));
  for (const char* own : {"run.finished", "session.closed", "command.started", "command.finished",
                          "check", "notice", "events.dropped"}) {
    EXPECT_FALSE(EventBounds::Bounded(own)) << own;
  }
  EventBounds bounds(SandboxEventLimits{1, 1, 1});
  for (int i = 0; i < 100; ++i) EXPECT_TRUE(bounds.Admit(Of("r", "notice"), kStart).store);
  EXPECT_EQ(bounds.End("r"), std::nullopt);
}

TEST(EventBoundsTest, TheBucketRefillsAtItsRateExactlyOnTheClock) {
  EventBounds bounds(SandboxEventLimits{/*per_second=*/4, /*burst=*/2, /*max_per_log=*/100});
  EXPECT_TRUE(bounds.Admit(Of("r", "network.decision"), kStart).store);
  EXPECT_TRUE(bounds.Admit(Of("r", "network.decision"), kStart).store);
  EXPECT_FALSE(bounds.Admit(Of("r", "network.decision"), kStart).store);
  // One event costs 250 ms of credit.
  EXPECT_FALSE(bounds.Admit(Of("r", "command.output"), kStart + absl::Milliseconds(249)).store);
  EventBounds::Verdict v =
      bounds.Admit(Of("r", "network.decision"), kStart + absl::Milliseconds(250));
  EXPECT_TRUE(v.store);
  EXPECT_EQ(Counts(v.summary), "command.output=1,network.decision=1");
  EXPECT_FALSE(v.summary->events_dropped().total_reached());
  // A long quiet spell fills the bucket to its burst, no more.
  EXPECT_TRUE(bounds.Admit(Of("r", "network.decision"), kStart + absl::Hours(1)).store);
  EXPECT_TRUE(bounds.Admit(Of("r", "network.decision"), kStart + absl::Hours(1)).store);
  EXPECT_FALSE(bounds.Admit(Of("r", "network.decision"), kStart + absl::Hours(1)).store);
  // Another log has a bucket of its own.
  EXPECT_TRUE(bounds.Admit(Of("s", "network.decision"), kStart + absl::Hours(1)).store);
  EXPECT_EQ(Counts(bounds.End("r")), "network.decision=1");
  EXPECT_EQ(bounds.End("s"), std::nullopt);
}

TEST(EventBoundsTest, TheTotalIsToldOnceWhenReachedAndTheRestAtTheEnd) {
  EventBounds bounds(SandboxEventLimits{/*per_second=*/1000, /*burst=*/1000, /*max_per_log=*/3});
  for (int i = 0; i < 3; ++i) EXPECT_TRUE(bounds.Admit(Of("r", "command.output"), kStart).store);
  EventBounds::Verdict v = bounds.Admit(Of("r", "network.decision"), kStart);
  EXPECT_FALSE(v.store);
  EXPECT_EQ(Counts(v.summary), "network.decision=1");
  EXPECT_TRUE(v.summary->events_dropped().total_reached());
  for (int i = 0; i < 5; ++i) {
    v = bounds.Admit(Of("r", "command.output"), kStart + absl::Hours(i));
    EXPECT_FALSE(v.store);
    EXPECT_FALSE(v.summary.has_value()) << "the total is told once";
  }
  std::optional<v1::Event> last = bounds.End("r");
  EXPECT_EQ(Counts(last), "command.output=5");
  EXPECT_TRUE(last->events_dropped().total_reached());
  EXPECT_EQ(last->type(), "events.dropped");
}

}  // namespace
}  // namespace sandgate::core
