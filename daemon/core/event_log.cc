#include "core/event_log.h"

#include <algorithm>
#include <optional>
#include <utility>

#include "absl/container/flat_hash_set.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "common/errors.h"
#include "common/log.h"
#include "common/status_macros.h"
#include "google/protobuf/util/time_util.h"

namespace sandgate::core {

using google::protobuf::util::TimeUtil;

bool IsTerminal(const v1::Event& event) {
  return event.type() == "run.finished" ||
         (event.type() == "session.closed" && event.run_id() == event.session_id());
}

EventLog::EventLog(store::Store* store, Clock* clock, FollowOptions follow,
                   std::optional<SandboxEventLimits> bounds)
    : store_(store),
      clock_(clock),
      follow_(follow),
      bounds_(bounds ? std::optional<EventBounds>(EventBounds(*bounds)) : std::nullopt),
      timer_([this] { TimerLoop(); }),
      writer_([this] { WriterLoop(); }) {
  if (follow_.notifier == nullptr) return;
  absl::StatusOr<uint64_t> id = follow_.notifier->Subscribe(
      store::kEventsChannel,
      [this](const std::string&, const std::string& payload) { OnNotification(payload); });
  // Cannot fail for this channel's name; if it did, the poll still follows every run.
  if (id.ok()) {
    subscription_ = *id;
  } else {
    log::Error("event.subscribe_failed", {{"error", id.status().ToString()}});
  }
}

EventLog::~EventLog() {
  if (subscription_ != 0) follow_.notifier->Unsubscribe(subscription_);
  Shutdown();
  {
    absl::MutexLock lock(&mu_);
    stop_writer_ = true;  // the writer stores what is queued first
  }
  if (writer_.joinable()) writer_.join();
  if (timer_.joinable()) timer_.join();
}

absl::StatusOr<int64_t> EventLog::CommittedSeqLocked(const std::string& run_id) {
  auto it = committed_seq_.find(run_id);
  if (it != committed_seq_.end()) return it->second;
  // Not cached: another process may be appending the run, and a cached seq would go stale.
  return store_->LastSeq(run_id);
}

absl::StatusOr<v1::Event> EventLog::Append(v1::Event event) {
  absl::MutexLock lock(&mu_);
  return AppendLocked(std::move(event), std::nullopt);
}

absl::Status EventLog::CheckFinal(const v1::Event& terminal, const std::string& record_id,
                                  bool session) {
  if (IsTerminal(terminal) && record_id == terminal.run_id() &&
      (!session || terminal.type() == "session.closed")) {
    return absl::OkStatus();
  }
  return errors::InvalidArgument(absl::StrCat(
      "a final record goes with its log's terminal event: ", terminal.type(), " of ",
      terminal.run_id(), " given with the record of ", session ? "session " : "run ", record_id));
}

absl::StatusOr<v1::Event> EventLog::Finish(v1::Event terminal, v1::Run record) {
  SANDGATE_RETURN_IF_ERROR(CheckFinal(terminal, record.id(), false));
  absl::MutexLock lock(&mu_);
  return AppendLocked(std::move(terminal), std::move(record));
}

absl::StatusOr<v1::Event> EventLog::Finish(v1::Event terminal, v1::Session record) {
  SANDGATE_RETURN_IF_ERROR(CheckFinal(terminal, record.id(), true));
  absl::MutexLock lock(&mu_);
  return AppendLocked(std::move(terminal), std::nullopt, std::move(record));
}

absl::Status EventLog::FinishAll(std::vector<std::pair<v1::Event, v1::Run>> runs,
                                 std::vector<std::pair<v1::Event, v1::Session>> sessions,
                                 const std::string& lost, const std::string& by) {
  std::vector<v1::Event> events;
  std::vector<v1::Run> records;
  std::vector<v1::Session> ended;
  {
    absl::MutexLock lock(&mu_);
    // Their events queued before are stored first: each terminal event follows its log's last.
    AwaitWrittenLocked();
    auto stamp = [&](v1::Event& e) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) -> absl::Status {
      auto last = last_seq_.find(e.run_id());
      int64_t seq = 0;
      if (last != last_seq_.end()) {
        seq = last->second;
      } else {
        SANDGATE_ASSIGN_OR_RETURN(seq, CommittedSeqLocked(e.run_id()));
      }
      e.set_seq(seq + 1);
      *e.mutable_time() = TimeUtil::NanosecondsToTimestamp(absl::ToUnixNanos(clock_->Now()));
      last_seq_[e.run_id()] = seq + 1;  // an append meanwhile follows it
      events.push_back(e);
      return absl::OkStatus();
    };
    for (auto& [e, r] : runs) {
      SANDGATE_RETURN_IF_ERROR(CheckFinal(e, r.id(), false));
      SANDGATE_RETURN_IF_ERROR(stamp(e));
      records.push_back(std::move(r));
    }
    for (auto& [e, s] : sessions) {
      SANDGATE_RETURN_IF_ERROR(CheckFinal(e, s.id(), true));
      SANDGATE_RETURN_IF_ERROR(stamp(e));
      ended.push_back(std::move(s));
    }
  }
  // Written here, not by the writer: the writer would store a failed batch's events one at a
  // time, and this is all or nothing.
  const absl::Status st = store_->SettleTakeover(events, records, ended, lost, by);
  std::vector<WaitCallback> ready;
  {
    absl::MutexLock lock(&mu_);
    if (st.ok()) {
      ready = PublishLocked(events, {});
    } else {
      for (const v1::Event& e : events) {
        last_seq_.erase(e.run_id());
        committed_seq_.erase(e.run_id());
      }
    }
  }
  for (auto& cb : ready) cb(WaitResult::kReady);
  return st;
}

absl::StatusOr<v1::Event> EventLog::AppendLocked(v1::Event event, std::optional<v1::Run> record,
                                                 std::optional<v1::Session> session) {
  SANDGATE_RETURN_IF_ERROR(TakeUnreportedLocked(event.run_id()));
  if (bounds_.has_value()) {
    std::optional<v1::Event> summary;
    bool store = true;
    if (IsTerminal(event)) {
      summary = bounds_->End(event.run_id());
    } else {
      EventBounds::Verdict verdict = bounds_->Admit(event, clock_->Now());
      summary = std::move(verdict.summary);
      store = verdict.store;
    }
    if (summary.has_value()) {
      summary->set_run_id(event.run_id());
      summary->set_session_id(event.session_id());
      SANDGATE_RETURN_IF_ERROR(
          QueueLocked(*std::move(summary), std::nullopt, std::nullopt).status());
    }
    if (!store) return event;
  }
  return QueueLocked(std::move(event), std::move(record), std::move(session));
}

absl::StatusOr<v1::Event> EventLog::QueueLocked(v1::Event event, std::optional<v1::Run> record,
                                                std::optional<v1::Session> session) {
  auto last = last_seq_.find(event.run_id());
  if (last == last_seq_.end()) {
    // Nothing of the run is queued: its next seq follows the last committed.
    SANDGATE_ASSIGN_OR_RETURN(int64_t committed, CommittedSeqLocked(event.run_id()));
    last = last_seq_.emplace(event.run_id(), committed).first;
    // This log appends the run from now on: its committed seq is known here, no store read.
    committed_seq_[event.run_id()] = committed;
  }
  event.set_seq(++last->second);
  *event.mutable_time() = TimeUtil::NanosecondsToTimestamp(absl::ToUnixNanos(clock_->Now()));
  const bool terminal = IsTerminal(event);
  if (record.has_value()) records_[event.run_id()] = *std::move(record);
  if (session.has_value()) session_records_[event.run_id()] = *std::move(session);
  queue_.push_back(event);
  ++appended_;
  if (terminal) {
    // Stored before the caller reports the run's end: whoever reads its events after that
    // finds them all.
    AwaitWrittenLocked();
    SANDGATE_RETURN_IF_ERROR(TakeUnreportedLocked(event.run_id()));
  }
  return event;
}

bool EventLog::AppendThrough(v1::Event event, const std::function<bool(v1::Event*)>& write) {
  absl::Status stamped;
  {
    absl::MutexLock lock(&mu_);
    // Its events queued before are stored first, so its seq follows them in the store too.
    if (last_seq_.contains(event.run_id())) AwaitWrittenLocked();
    auto last = last_seq_.find(event.run_id());
    if (last == last_seq_.end()) {
      absl::StatusOr<int64_t> committed = CommittedSeqLocked(event.run_id());
      stamped = committed.status();
      if (stamped.ok()) {
        last = last_seq_.emplace(event.run_id(), *committed).first;
        committed_seq_[event.run_id()] = *committed;  // this log appends the run from now on
      }
    }
    if (stamped.ok()) {
      event.set_seq(++last->second);
      *event.mutable_time() = TimeUtil::NanosecondsToTimestamp(absl::ToUnixNanos(clock_->Now()));
    }
  }
  if (!stamped.ok()) {
    (void)write(nullptr);  // written without it: the caller appends it, and meets the error
    return false;
  }
  const int64_t seq = event.seq();
  const bool stored = write(&event);
  std::vector<WaitCallback> ready;
  {
    absl::MutexLock lock(&mu_);
    auto last = last_seq_.find(event.run_id());
    auto committed = committed_seq_.find(event.run_id());
    if (!stored) {
      if (last != last_seq_.end() && last->second == seq) --last->second;
    } else if (committed == committed_seq_.end() || committed->second < seq) {
      // (A later event of the run, published meanwhile by another thread, stands for it.)
      ready = PublishLocked({event}, {});
    }
  }
  for (auto& cb : ready) cb(WaitResult::kReady);
  return stored;
}

absl::Status EventLog::Flush(const std::string& run_id) {
  absl::MutexLock lock(&mu_);
  AwaitWrittenLocked();
  return TakeUnreportedLocked(run_id);
}

absl::Status EventLog::TakeUnreportedLocked(const std::string& run_id) {
  auto failed = unreported_.find(run_id);
  if (failed == unreported_.end()) return absl::OkStatus();
  absl::Status error = std::move(failed->second);
  unreported_.erase(failed);
  return error;
}

void EventLog::AwaitWrittenLocked() {
  const uint64_t target = appended_;
  auto written = [this, target]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) { return written_ >= target; };
  mu_.Await(absl::Condition(&written));
}

int64_t EventLog::store_errors() const {
  absl::MutexLock lock(&mu_);
  return store_errors_;
}

void EventLog::WriterLoop() {
  for (;;) {
    std::vector<v1::Event> batch;
    absl::flat_hash_map<std::string, v1::Run> records;
    absl::flat_hash_map<std::string, v1::Session> sessions;
    {
      absl::MutexLock lock(&mu_);
      mu_.Await(absl::Condition(this, &EventLog::WriterWoken));
      if (queue_.empty()) return;  // stopping, and everything is stored
      batch.swap(queue_);
      records.swap(records_);
      sessions.swap(session_records_);
    }
    // Outside mu_: producers keep queuing and followers keep reading while the store writes.
    absl::flat_hash_map<std::string, absl::Status> failed = Write(batch, records, sessions);
    const size_t size = batch.size();
    std::vector<WaitCallback> ready;
    {
      absl::MutexLock lock(&mu_);
      ready = PublishLocked(std::move(batch), failed);
    }
    for (auto& cb : ready) cb(WaitResult::kReady);
    // Only now: a Flush returns after the followers the batch answers have been woken.
    absl::MutexLock lock(&mu_);
    written_ += size;
  }
}

absl::flat_hash_map<std::string, absl::Status> EventLog::Write(
    const std::vector<v1::Event>& batch, const absl::flat_hash_map<std::string, v1::Run>& records,
    const absl::flat_hash_map<std::string, v1::Session>& sessions) {
  absl::flat_hash_map<std::string, absl::Status> failed;
  std::vector<v1::Run> runs;
  for (const auto& [run_id, record] : records) runs.push_back(record);
  std::vector<v1::Session> ended;
  for (const auto& [session_id, record] : sessions) ended.push_back(record);
  absl::Status st = store_->AppendEventsWithRecords(batch, runs, ended);
  if (st.ok()) return failed;
  if (batch.size() == 1) {
    failed[batch.front().run_id()] = std::move(st);
    return failed;
  }
  // Nothing of the batch is stored: one event at a time (a terminal one with its run's
  // final record), so that one bad event (or run) does not take the others with it. A run's
  // events after its failed one are not tried (they would leave a gap in its seqs).
  for (const v1::Event& event : batch) {
    if (failed.contains(event.run_id())) continue;
    runs.clear();
    ended.clear();
    auto record = records.find(event.run_id());
    if (record != records.end() && IsTerminal(event)) runs.push_back(record->second);
    auto session = sessions.find(event.run_id());
    if (session != sessions.end() && IsTerminal(event)) ended.push_back(session->second);
    absl::Status one = store_->AppendEventsWithRecords({event}, runs, ended);
    if (!one.ok()) failed[event.run_id()] = std::move(one);
  }
  return failed;
}

std::vector<EventLog::WaitCallback> EventLog::PublishLocked(
    std::vector<v1::Event> batch, const absl::flat_hash_map<std::string, absl::Status>& failed) {
  for (const auto& entry : failed) {
    const std::string& run_id = entry.first;  // a plain name: lambdas below capture it
    const absl::Status& error = entry.second;
    ++store_errors_;
    log::Error("event.store_failed", {{"run", run_id}, {"error", error.ToString()}});
    // The run's events queued meanwhile follow the lost one: dropped with it, so that the
    // run's seqs stay dense from its last stored event.
    const size_t before = queue_.size();
    queue_.erase(std::remove_if(queue_.begin(), queue_.end(),
                                [&](const v1::Event& e) { return e.run_id() == run_id; }),
                 queue_.end());
    records_.erase(run_id);
    session_records_.erase(run_id);
    written_ += before - queue_.size();
    last_seq_.erase(run_id);
    committed_seq_.erase(run_id);
    unreported_[run_id] = absl::Status(
        error.code(), absl::StrCat("an event of ", run_id, " was not stored: ", error.message()));
  }
  absl::flat_hash_set<std::string> touched;
  for (v1::Event& event : batch) {
    if (failed.contains(event.run_id())) {
      // The events before the failed one may be stored: a follower reads them from the store.
      touched.insert(event.run_id());
      tails_.erase(event.run_id());
      continue;
    }
    touched.insert(event.run_id());
    // After a run's terminal event its caches go, so they hold live runs only (an event
    // appended later still finds its seq in the store).
    if (IsTerminal(event)) {
      committed_seq_.erase(event.run_id());
      tails_.erase(event.run_id());
      auto last = last_seq_.find(event.run_id());
      if (last != last_seq_.end() && last->second == event.seq()) last_seq_.erase(last);
    } else {
      committed_seq_[event.run_id()] = event.seq();
      AddToTailLocked(std::move(event));
    }
  }
  std::vector<WaitCallback> ready;
  for (auto it = waiters_.begin(); it != waiters_.end();) {
    if (touched.contains(it->second.run_id)) {
      ready.push_back(TakeWaiterLocked(it++));
    } else {
      ++it;
    }
  }
  return ready;
}

EventLog::WaitCallback EventLog::TakeWaiterLocked(std::map<uint64_t, Waiter>::iterator it) {
  if (it->second.poll_at != absl::InfiniteFuture()) --polled_waiters_;
  WaitCallback cb = std::move(it->second.cb);
  waiters_.erase(it);
  return cb;
}

void EventLog::AddToTailLocked(v1::Event event) {
  Tail& tail = tails_[event.run_id()];
  if (!tail.events.empty() && tail.events.back().seq() + 1 != event.seq()) {
    tail = Tail();  // not contiguous (cannot happen while appends go through here)
  }
  tail.bytes += event.ByteSizeLong();
  tail.events.push_back(std::move(event));
  while (tail.events.size() > kTailEvents || (tail.bytes > kTailBytes && tail.events.size() > 1)) {
    tail.bytes -= tail.events.front().ByteSizeLong();
    tail.events.pop_front();
  }
}

absl::StatusOr<std::vector<v1::Event>> EventLog::Read(const std::string& run_id, int64_t after_seq,
                                                      uint32_t limit) {
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

absl::StatusOr<bool> EventLog::Ended(const std::string& run_id, int64_t after_seq) {
  {
    absl::MutexLock lock(&mu_);
    // Appending here: its terminal event, once published, takes it out of last_seq_.
    if (last_seq_.contains(run_id)) return false;
  }
  SANDGATE_ASSIGN_OR_RETURN(int64_t last, store_->LastSeq(run_id));
  if (last == 0 || last > after_seq) return false;
  SANDGATE_ASSIGN_OR_RETURN(std::vector<v1::Event> newest, store_->ReadEvents(run_id, last - 1, 1));
  return !newest.empty() && IsTerminal(newest.front());
}

uint64_t EventLog::Wait(const std::string& run_id, int64_t after_seq, absl::Duration timeout,
                        WaitCallback cb) {
  std::optional<WaitResult> immediate;
  uint64_t id;
  bool polled = false;
  {
    absl::MutexLock lock(&mu_);
    id = next_waiter_++;
    auto committed = committed_seq_.find(run_id);
    const bool appended_here = committed != committed_seq_.end();
    if (shutdown_) {
      immediate = WaitResult::kShutdown;
    } else if (appended_here && committed->second > after_seq) {
      immediate = WaitResult::kReady;
    } else {
      const absl::Time now = clock_->Now();
      Waiter w{run_id, after_seq, now + timeout, absl::InfiniteFuture(), std::move(cb)};
      // A run this log appends wakes its waiters as it publishes; any other is polled, and
      // woken by its notifications.
      if (!appended_here) {
        w.poll_at = now + follow_.poll;
        ++polled_waiters_;
        polled = true;
      }
      if (std::min(w.deadline, w.poll_at) < timer_due_) timer_kicked_ = true;
      waiters_.emplace(id, std::move(w));
    }
  }
  if (immediate.has_value()) {
    cb(*immediate);
    return 0;
  }
  // Registered first, then the store read: an event committed after the read is announced
  // to the registered waiter (notification or poll), one committed before is seen here.
  if (polled) PollStore({id});
  return id;
}

bool EventLog::CancelWait(uint64_t id) {
  absl::MutexLock lock(&mu_);
  auto it = waiters_.find(id);
  if (it == waiters_.end()) return false;
  TakeWaiterLocked(it);
  return true;
}

void EventLog::PollStore(const std::vector<uint64_t>& polled) {
  absl::flat_hash_set<std::string> runs;
  {
    absl::MutexLock lock(&mu_);
    for (uint64_t id : polled) {
      auto it = waiters_.find(id);
      if (it != waiters_.end()) runs.insert(it->second.run_id);
    }
  }
  absl::flat_hash_map<std::string, absl::StatusOr<int64_t>> last;
  for (const std::string& run : runs) last.emplace(run, store_->LastSeq(run));
  std::vector<WaitCallback> ready;
  {
    absl::MutexLock lock(&mu_);
    for (uint64_t id : polled) {
      auto it = waiters_.find(id);
      if (it == waiters_.end()) continue;  // answered, cancelled or timed out meanwhile
      auto seq = last.find(it->second.run_id);
      if (seq == last.end()) continue;
      // A store error is reported as "ready": the follower's next Read surfaces it.
      if (!seq->second.ok() || *seq->second > it->second.after_seq) {
        ready.push_back(TakeWaiterLocked(it));
      }
    }
  }
  for (auto& cb : ready) cb(WaitResult::kReady);
}

void EventLog::OnNotification(const std::string& payload) {
  std::vector<WaitCallback> ready;
  {
    absl::MutexLock lock(&mu_);
    if (polled_waiters_ == 0 || shutdown_) return;
    if (payload.empty()) {
      // The notifier listens again after a gap: whatever it missed, the store has.
      const absl::Time now = clock_->Now();
      for (auto& [id, w] : waiters_) {
        if (w.poll_at != absl::InfiniteFuture()) w.poll_at = now;
      }
      timer_kicked_ = true;
      return;
    }
    const size_t space = payload.rfind(' ');
    int64_t seq = 0;
    if (space == std::string::npos || !absl::SimpleAtoi(payload.substr(space + 1), &seq)) {
      log::Warning("event.bad_notification", {{"payload", payload}});
      return;
    }
    const absl::string_view run(payload.data(), space);
    for (auto it = waiters_.begin(); it != waiters_.end();) {
      const Waiter& w = it->second;
      if (w.poll_at != absl::InfiniteFuture() && w.run_id == run && w.after_seq < seq) {
        ready.push_back(TakeWaiterLocked(it++));
      } else {
        ++it;
      }
    }
  }
  for (auto& cb : ready) cb(WaitResult::kReady);
}

void EventLog::Forget(const std::string& run_id) {
  std::vector<WaitCallback> woken;
  {
    absl::MutexLock lock(&mu_);
    AwaitWrittenLocked();  // a batch published after this would cache the run again
    last_seq_.erase(run_id);
    committed_seq_.erase(run_id);
    tails_.erase(run_id);
    for (auto it = waiters_.begin(); it != waiters_.end();) {
      if (it->second.run_id == run_id) {
        woken.push_back(TakeWaiterLocked(it++));
      } else {
        ++it;
      }
    }
  }
  for (auto& cb : woken) cb(WaitResult::kReady);
}

void EventLog::Shutdown() {
  std::vector<WaitCallback> all;
  {
    absl::MutexLock lock(&mu_);
    if (shutdown_) return;
    // What is queued is stored (and its followers woken) before the rest hear kShutdown.
    AwaitWrittenLocked();
    shutdown_ = true;
    for (auto& [id, w] : waiters_) all.push_back(std::move(w.cb));
    waiters_.clear();
    polled_waiters_ = 0;
  }
  for (auto& cb : all) cb(WaitResult::kShutdown);
}

void EventLog::TimerLoop() {
  for (;;) {
    std::vector<WaitCallback> expired;
    std::vector<uint64_t> polled;
    {
      absl::MutexLock lock(&mu_);
      clock_->AwaitWithDeadline(mu_, absl::Condition(this, &EventLog::TimerWoken), timer_due_);
      if (shutdown_) return;
      timer_kicked_ = false;
      const absl::Time now = clock_->Now();
      timer_due_ = absl::InfiniteFuture();
      for (auto it = waiters_.begin(); it != waiters_.end();) {
        Waiter& w = it->second;
        if (w.deadline <= now) {
          expired.push_back(TakeWaiterLocked(it++));
          continue;
        }
        if (w.poll_at <= now) {
          polled.push_back(it->first);
          w.poll_at = now + follow_.poll;  // and again one interval later, if still waiting
        }
        timer_due_ = std::min({timer_due_, w.deadline, w.poll_at});
        ++it;
      }
    }
    for (auto& cb : expired) cb(WaitResult::kTimeout);
    if (!polled.empty()) PollStore(polled);
  }
}

}  // namespace sandgate::core
