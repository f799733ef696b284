#include "core/event_bounds.h"

#include <algorithm>
#include <utility>

#include "absl/strings/str_cat.h"
#include "common/events.h"

namespace sandgate::core {
namespace {

// A summary of drops goes with an admitted event at most this often.
constexpr absl::Duration kSummaryEvery = absl::Seconds(1);

}  // namespace

bool EventBounds::Bounded(absl::string_view type) {
  return type == "network.decision" || type == "command.output";
}

EventBounds::Verdict EventBounds::Admit(const v1::Event& event, absl::Time now) {
  Verdict v;
  if (!Bounded(event.type())) return v;
  const absl::Duration cost = absl::Seconds(1) / limits_.per_second;
  const absl::Duration capacity = cost * limits_.burst;
  Log& log = logs_[event.run_id()];
  if (log.refilled == absl::InfinitePast()) {
    log.credit = capacity;
  } else if (now > log.refilled) {
    log.credit = std::min(capacity, log.credit + (now - log.refilled));
  }
  log.refilled = std::max(log.refilled, now);
  if (log.stored >= limits_.max_per_log) {
    v.store = false;
    ++log.untold[event.type()];
    if (!log.total_told) {
      log.total_told = true;
      v.summary = Summary(log, /*total_reached=*/true);
    }
    return v;
  }
  if (log.credit < cost) {
    v.store = false;
    ++log.untold[event.type()];
    return v;
  }
  log.credit -= cost;
  ++log.stored;
  if (!log.untold.empty() && now - log.last_summary >= kSummaryEvery) {
    log.last_summary = now;
    v.summary = Summary(log, /*total_reached=*/false);
  }
  return v;
}

std::optional<v1::Event> EventBounds::End(const std::string& run_id) {
  auto it = logs_.find(run_id);
  if (it == logs_.end()) return std::nullopt;
  std::optional<v1::Event> last;
  if (!it->second.untold.empty()) last = Summary(it->second, it->second.total_told);
  logs_.erase(it);
  return last;
}

v1::Event EventBounds::Summary(Log& log, bool total_reached) const {
  v1::EventsDropped d;
  for (const auto& [type, n] : log.untold) (*d.mutable_counts())[type] = n;
  log.untold.clear();
  d.set_total_reached(total_reached);
  d.set_reason(total_reached
                   ? absl::StrCat("the log's total of ", limits_.max_per_log,
                                  " is reached (sandbox_events.max_per_log); no more of these "
                                  "events are stored in it")
                   : absl::StrCat("over ", limits_.per_second, " a second (burst ", limits_.burst,
                                  "; sandbox_events.per_second, sandbox_events.burst)"));
  return events::EventsDropped(std::move(d));
}

}  // namespace sandgate::core
