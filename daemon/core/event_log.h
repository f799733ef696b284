// EventLog: appends a run's events (dense seq from 1), persists them, and wakes followers.
//
// Every stream reads through here: Read() replays from the store, Wait() parks a follower
// until an event past its position exists. Followers never block producers: Append only
// persists and schedules wake-ups; a slow reader simply reads more later. The newest events
// of each live run are also kept in memory (a bounded tail), so the followers of a run, who
// are usually within a few events of its end, are served without a store read each; one who
// falls further behind reads from the store, which holds every event.
//
//   log.Append(event);                       // producer (a run thread)
//   log.Wait(run, last_seq, Seconds(15), cb);  // follower: cb(kReady | kTimeout | kShutdown)
//
// A wait times out at exactly its deadline on the injected clock (StreamEvents' heartbeats
// are these timeouts). Thread safe. Wait callbacks run on the appending thread or on the log's
// timer thread, never under the log's lock; they must not block.
#ifndef SANDGATE_CORE_EVENT_LOG_H_
#define SANDGATE_CORE_EVENT_LOG_H_

#include <cstdint>
#include <deque>
#include <functional>
#include <map>
#include <string>
#include <thread>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "common/clock.h"
#include "store/store.h"

namespace sandgate::core {

class EventLog {
 public:
  enum class WaitResult { kReady, kTimeout, kShutdown };
  using WaitCallback = std::function<void(WaitResult)>;

  EventLog(store::Store* store, Clock* clock);  // store and clock outlive the log
  ~EventLog();

  // Sets seq (the run's next) and time, persists, then wakes waiters of that run. Appends
  // are persisted one at a time in seq order; the log's lock is not held while the store
  // writes, so followers' Read and Wait do not wait for the store.
  absl::StatusOr<v1::Event> Append(v1::Event event);
  // Up to `limit` events with seq > after_seq, in seq order, each once: from the run's
  // in-memory tail when it reaches back to after_seq + 1, else from the store.
  absl::StatusOr<std::vector<v1::Event>> Read(const std::string& run_id, int64_t after_seq,
                                              uint32_t limit);
  // Calls `cb` exactly once: when the run has an event with seq > after_seq (at once if it
  // already has), after `timeout`, or at Shutdown. Returns an id for CancelWait.
  uint64_t Wait(const std::string& run_id, int64_t after_seq, absl::Duration timeout,
                WaitCallback cb);
  // True when the wait was removed before firing: its callback will never run. False when it
  // has fired or is firing.
  bool CancelWait(uint64_t id);
  // Fires every waiter with kShutdown and refuses new waits (they fire kShutdown at once).
  void Shutdown();

 private:
  struct Waiter {
    std::string run_id;
    absl::Time deadline;
    WaitCallback cb;
  };
  // The newest events of a live run, with dense seqs ending at the run's last.
  struct Tail {
    std::deque<v1::Event> events;
    size_t bytes = 0;
  };
  // A tail keeps at most this many events and bytes (the oldest go first); a follower
  // further behind reads the store.
  static constexpr size_t kTailEvents = 256;
  static constexpr size_t kTailBytes = 256 << 10;

  // Fires each waiter at its deadline on the injected clock: sleeps until the earliest one,
  // woken when a new waiter's deadline comes before that.
  void TimerLoop();
  bool TimerWoken() const ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) { return shutdown_ || timer_kicked_; }
  absl::StatusOr<int64_t> LastSeqLocked(const std::string& run_id)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  store::Store* const store_;
  Clock* const clock_;

  // Held across a store write, so that a run's events are persisted in seq order (taken
  // before mu_, never while holding it).
  absl::Mutex append_mu_ ABSL_ACQUIRED_BEFORE(mu_);
  absl::Mutex mu_;
  absl::flat_hash_map<std::string, int64_t> last_seq_ ABSL_GUARDED_BY(mu_);
  absl::flat_hash_map<std::string, Tail> tails_ ABSL_GUARDED_BY(mu_);
  std::map<uint64_t, Waiter> waiters_ ABSL_GUARDED_BY(mu_);
  uint64_t next_waiter_ ABSL_GUARDED_BY(mu_) = 1;
  bool shutdown_ ABSL_GUARDED_BY(mu_) = false;
  absl::Time timer_due_ ABSL_GUARDED_BY(mu_) = absl::InfiniteFuture();  // the timer wakes then
  bool timer_kicked_ ABSL_GUARDED_BY(mu_) = false;
  std::thread timer_;
};

}  // namespace sandgate::core

#endif  // SANDGATE_CORE_EVENT_LOG_H_
