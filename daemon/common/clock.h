// Clock: the only source of time in sandgate, so tests can advance time instead of sleeping.
//
// Thread safe (both implementations).
#ifndef SANDGATE_COMMON_CLOCK_H_
#define SANDGATE_COMMON_CLOCK_H_

#include "absl/time/time.h"

namespace sandgate {

class Clock {
 public:
  virtual ~Clock() = default;
  virtual absl::Time Now() const = 0;
  // The process-wide real clock; never null, never destroyed.
  static Clock* Real();
};

}  // namespace sandgate

#endif  // SANDGATE_COMMON_CLOCK_H_
