// Eventually: waits, a bounded time of real time, for another thread to reach a state the test
// cannot be told about (a pipeline thread finishes a run, a filler thread refills a pool, a
// process exits, a line appears in a log), instead of sleeping a guessed time.
//
// Not for timing rules: a test of "not before / at" drives the injected clock
// (tests/fakes/fake_clock.h, BlockUntilSettled) and checks at exact instants. Eventually only
// lets real threads run; what it awaits must happen soon whatever the clock says.
//
//   ASSERT_TRUE(Eventually("the pool holds 3 sandboxes", [&] { return pool.ready() == 3; }));
//
// On timeout the failure names what was awaited and for how long. Header-only; thread safe as
// `cond` is.
#ifndef SANDGATE_TESTS_COMMON_EVENTUALLY_H_
#define SANDGATE_TESTS_COMMON_EVENTUALLY_H_

#include <algorithm>
#include <functional>

#include "absl/strings/string_view.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "gtest/gtest.h"

namespace sandgate::testing {

// Polls `cond` until it holds (success) or `timeout` has passed (failure "waited <timeout> for
// <what>"). The first looks come within a millisecond, later ones every 10 ms: a state reached
// at once costs nothing, a slow one little.
inline ::testing::AssertionResult Eventually(absl::string_view what,
                                             const std::function<bool()>& cond,
                                             absl::Duration timeout = absl::Seconds(10)) {
  const absl::Time give_up = absl::Now() + timeout;
  absl::Duration every = absl::Microseconds(100);
  for (;;) {
    if (cond()) return ::testing::AssertionSuccess();
    if (absl::Now() >= give_up) {
      return ::testing::AssertionFailure() << "waited " << absl::FormatDuration(timeout) << " for "
                                           << what << ", and it did not happen";
    }
    absl::SleepFor(every);  // real time by design: see the file comment
    every = std::min(every * 2, absl::Milliseconds(10));
  }
}

}  // namespace sandgate::testing

#endif  // SANDGATE_TESTS_COMMON_EVENTUALLY_H_
