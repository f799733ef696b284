#include "core/event_log.h"

#include <algorithm>
#include <utility>

#include "common/status_macros.h"
#include "google/protobuf/util/time_util.h"

namespace sandgate::core {

using google::protobuf::util::TimeUtil;

EventLog::EventLog(store::Store* store, Clock* clock)
    : store_(store), clock_(clock), timer_([this] { TimerLoop(); }) {}

EventLog::~EventLog() {
  Shutdown();
  if (timer_.joinable()) timer_.join();
}

absl::StatusOr<int64_t> EventLog::LastSeqLocked(const std::string& run_id) {
  auto it = last_seq_.find(run_id);
  if (it != last_seq_.end()) return it->second;
  SANDGATE_ASSIGN_OR_RETURN(int64_t last, store_->LastSeq(run_id));
  last_seq_[run_id] = last;
  return last;
}

absl::StatusOr<v1::Event> EventLog::Append(v1::Event event) {
  absl::MutexLock append(&append_mu_);
  {
    absl::MutexLock lock(&mu_);
    SANDGATE_ASSIGN_OR_RETURN(int64_t last, LastSeqLocked(event.run_id()));
    event.set_seq(last + 1);
  }
  *event.mutable_time() = TimeUtil::NanosecondsToTimestamp(absl::ToUnixNanos(clock_->Now()));
  // Outside mu_: followers keep reading tails and parking while the store writes. Waiters
  // see the new seq only once it is stored (last_seq_ moves below), so a woken follower
  // that reads the store finds it.
  SANDGATE_RETURN_IF_ERROR(store_->AppendEvent(event));
  std::vector<WaitCallback> ready;
  {
    absl::MutexLock lock(&mu_);
    // A run's terminal event (a kept session's own log ends with session.closed) is its
    // last: its cached seq and tail go, so the caches hold live runs only (an event appended
    // later still finds its seq in the store).
    if (event.type() == "run.finished" ||
        (event.type() == "session.closed" && event.run_id() == event.session_id())) {
      last_seq_.erase(event.run_id());
      tails_.erase(event.run_id());
    } else {
      last_seq_[event.run_id()] = event.seq();
      Tail& tail = tails_[event.run_id()];
      if (!tail.events.empty() && tail.events.back().seq() + 1 != event.seq()) {
        tail = Tail();  // not contiguous (cannot happen while appends go through here)
      }
      tail.bytes += event.ByteSizeLong();
      tail.events.push_back(event);
      while (tail.events.size() > kTailEvents ||
             (tail.bytes > kTailBytes && tail.events.size() > 1)) {
        tail.bytes -= tail.events.front().ByteSizeLong();
        tail.events.pop_front();
      }
    }
    for (auto it = waiters_.begin(); it != waiters_.end();) {
      if (it->second.run_id == event.run_id()) {
        ready.push_back(std::move(it->second.cb));
        it = waiters_.erase(it);
      } else {
        ++it;
      }
    }
  }
  for (auto& cb : ready) cb(WaitResult::kReady);
  return event;
}

absl::StatusOr<std::vector<v1::Event>> EventLog::Read(const std::string& run_id,
                                                      int64_t after_seq, uint32_t limit) {
  {
    absl::MutexLock lock(&mu_);
    auto it = tails_.find(run_id);
    if (it != tails_.end() && !it->second.events.empty()) {
      const std::deque<v1::Event>& events = it->second.events;
      const int64_t first = events.front().seq();
      const int64_t last = events.back().seq();
      if (after_seq + 1 >= first) {
        std::vector<v1::Event> out;
        const int64_t from = std::max(after_seq + 1, first);
        for (int64_t seq = from; seq <= last && out.size() < limit; ++seq) {
          out.push_back(events[static_cast<size_t>(seq - first)]);
        }
        return out;
      }
    }
  }
  return store_->ReadEvents(run_id, after_seq, limit);
}

uint64_t EventLog::Wait(const std::string& run_id, int64_t after_seq, absl::Duration timeout,
                        WaitCallback cb) {
  WaitResult immediate;
  {
    absl::MutexLock lock(&mu_);
    uint64_t id = next_waiter_++;
    if (shutdown_) {
      immediate = WaitResult::kShutdown;
    } else {
      absl::StatusOr<int64_t> last = LastSeqLocked(run_id);
      // A store error is reported as "ready": the follower's next Read surfaces it.
      if (!last.ok() || *last > after_seq) {
        immediate = WaitResult::kReady;
      } else {
        const absl::Time deadline = clock_->Now() + timeout;
        waiters_[id] = Waiter{run_id, deadline, std::move(cb)};
        if (deadline < timer_due_) timer_kicked_ = true;
        return id;
      }
    }
  }
  cb(immediate);
  return 0;
}

bool EventLog::CancelWait(uint64_t id) {
  absl::MutexLock lock(&mu_);
  return waiters_.erase(id) > 0;
}

void EventLog::Shutdown() {
  std::vector<WaitCallback> all;
  {
    absl::MutexLock lock(&mu_);
    if (shutdown_) return;
    shutdown_ = true;
    for (auto& [id, w] : waiters_) all.push_back(std::move(w.cb));
    waiters_.clear();
  }
  for (auto& cb : all) cb(WaitResult::kShutdown);
}

void EventLog::TimerLoop() {
  for (;;) {
    std::vector<WaitCallback> expired;
    {
      absl::MutexLock lock(&mu_);
      clock_->AwaitWithDeadline(mu_, absl::Condition(this, &EventLog::TimerWoken), timer_due_);
      if (shutdown_) return;
      timer_kicked_ = false;
      const absl::Time now = clock_->Now();
      timer_due_ = absl::InfiniteFuture();
      for (auto it = waiters_.begin(); it != waiters_.end();) {
        if (it->second.deadline <= now) {
          expired.push_back(std::move(it->second.cb));
          it = waiters_.erase(it);
        } else {
          timer_due_ = std::min(timer_due_, it->second.deadline);
          ++it;
        }
      }
    }
    for (auto& cb : expired) cb(WaitResult::kTimeout);
  }
}

}  // namespace sandgate::core
