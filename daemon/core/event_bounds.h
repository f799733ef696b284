// EventBounds: what the code in a sandbox can make the daemon store.
//
// Some events happen whenever the sandboxed code wants: each connection through the session's
// proxy is a network.decision, each read of a command's output a command.output. A loop of
// refused CONNECTs stored 155,270 events in 20 s (state.db 2.5 to 72 MB). So those events
// pass, per log (a run's, a kept session's), a token bucket (`per_second` sustained, `burst`
// at once) and a total (`max_per_log`); the rest are counted by type and not stored. What was
// dropped is told in one events.dropped event, stored in the log in place of the dropped ones:
//  - with the first event the bucket lets through again after drops (at most one a second:
//    an endless flood at the bucket's rate is not doubled by its summaries);
//  - when the total is first reached (nothing more of these is stored in the log, and it says
//    so);
//  - before the log's last event (run.finished, a kept session's session.closed), for what
//    the previous ones did not tell.
// Every other event (the daemon's own: steps, checks, the run's end) is never held back.
//
//   EventBounds bounds(config.sandbox_events);
//   EventBounds::Verdict v = bounds.Admit(event, clock->Now());
//   if (v.summary) Store(*v.summary);
//   if (v.store) Store(event);
//   ...
//   if (auto last = bounds.End(run_id)) Store(*last);   // before the terminal event
//
// Time is the caller's (the injected clock). Thread compatible: EventLog calls it under its
// lock.
#ifndef SANDGATE_CORE_EVENT_BOUNDS_H_
#define SANDGATE_CORE_EVENT_BOUNDS_H_

#include <cstdint>
#include <map>
#include <optional>
#include <string>

#include "absl/container/flat_hash_map.h"
#include "absl/strings/string_view.h"
#include "absl/time/time.h"
#include "core/config.h"
#include "sandgate/v1/sandgate.pb.h"

namespace sandgate::core {

class EventBounds {
 public:
  explicit EventBounds(SandboxEventLimits limits) : limits_(limits) {}

  // The event types the bounds apply to: those the sandboxed code causes at will.
  static bool Bounded(absl::string_view type);

  struct Verdict {
    bool store = true;
    // An events.dropped to store before the event (run and session ids the event's).
    std::optional<v1::Event> summary;
  };
  // Whether `event` (its type and run_id set) is stored, at `now`.
  Verdict Admit(const v1::Event& event, absl::Time now);
  // The log `run_id` ends: the events.dropped of what no summary told yet, if anything was
  // dropped (ids to be set by the caller). Forgets the log.
  std::optional<v1::Event> End(const std::string& run_id);

 private:
  struct Log {
    // The bucket, as time: one event costs 1 s / per_second, and it holds `burst` of them.
    // Exact (integer ticks), so the fake clock's instants are the rule's.
    absl::Duration credit;
    absl::Time refilled = absl::InfinitePast();  // InfinitePast: a new log, its bucket full
    uint64_t stored = 0;
    std::map<std::string, uint64_t> untold;  // dropped, by type, since the last summary
    absl::Time last_summary = absl::InfinitePast();
    bool total_told = false;
  };
  v1::Event Summary(Log& log, bool total_reached) const;

  const SandboxEventLimits limits_;
  absl::flat_hash_map<std::string, Log> logs_;
};

}  // namespace sandgate::core

#endif  // SANDGATE_CORE_EVENT_BOUNDS_H_
