// EventLog: appends a run's events (dense seq from 1), persists them, and wakes followers.
//
// Every stream reads through here: Read() replays from the store, Wait() parks a follower
// until an event past its position exists. Followers never block producers: Append only
// queues; a slow reader simply reads more later. The newest events of each live run are
// also kept in memory (a bounded tail), so the followers of a run, who are usually within a
// few events of its end, are served without a store read each; one who falls further behind
// reads from the store, which holds every event.
//
//   log.Append(event);                       // producer (a run thread): queued, not yet stored
//   log.Flush(run);                          // producer: returns once it is stored
//   log.Wait(run, last_seq, Seconds(15), cb);  // follower: cb(kReady | kTimeout | kShutdown)
//
// Group commit (LevelDB's DBImpl::Write, with a writer thread instead of a leading caller):
// Append gives the event its seq and time and queues it; the log's writer thread stores
// everything queued, of all runs, in one store transaction per batch, so a burst costs one
// commit and the producer never waits for SQLite (nor for its WAL checkpoints, which run on
// the writer thread). The contract:
//  - A follower sees an event only once the batch holding it is committed: Read, Wait and
//    the tails hold committed events only, so no follower sees an event a crash could lose.
//  - Per run, events are stored and seen in seq order, each once.
//  - A store error does not vanish: it is logged and counted (store_errors()), the failed
//    run's events still queued are dropped with it, and its seq continues after its last
//    stored event. The run's next Append (which is refused) or Flush returns the error.
//  - A run's terminal event is stored before its Append returns, so the run's end is
//    reported (run record, Wait, the drain) only once all its events are stored. Flush(run)
//    returns once every event appended before it is committed, for anything else that must
//    be stored before the caller goes on. Shutdown flushes everything.
//
// Followers of a run another process appends (another replica's, on a shared store): the
// tails and committed seqs are kept only for runs this log appends, so such a follower
// always reads the store, which is the truth. Its wait ends when the store has an event past
// its position: at once when a store notification (store/notifier.h) says so, or at the
// latest at the next poll of the store, `follow_poll` after the wait began (and every
// follow_poll after), so a lost notification delays a follower but never loses an event.
// On SQLite (several daemons on one file) there are no notifications: the poll is the
// mechanism.
//
// A wait times out at exactly its deadline on the injected clock (StreamEvents' heartbeats
// are these timeouts). Thread safe. Wait callbacks run on the writer thread, the log's timer
// thread, the notifier's thread, or the caller of Wait/Shutdown, never under the log's lock;
// they must not block.
#ifndef SANDGATE_CORE_EVENT_LOG_H_
#define SANDGATE_CORE_EVENT_LOG_H_

#include <cstdint>
#include <deque>
#include <functional>
#include <map>
#include <optional>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "common/clock.h"
#include "core/config.h"
#include "core/event_bounds.h"
#include "store/notifier.h"
#include "store/store.h"

namespace sandgate::core {

// Whether `event` ends its log: a run's run.finished, or a kept session's session.closed in
// the session's own log (its run id is the session's). It is the log's last event: a stream
// that has sent it is over, and a follower at or past it has nothing left to wait for
// (EventLog::Ended). The one place both edges (gRPC and REST) learn where a log ends.
bool IsTerminal(const v1::Event& event);

// How the log follows runs another process appends (see the header comment).
struct FollowOptions {
  store::Notifier* notifier = nullptr;  // not owned, outlives the log; null: polls only
  // replica.follow_poll_ms: the longest a lost notification delays a follower.
  absl::Duration poll = absl::Milliseconds(500);
};

class EventLog {
 public:
  enum class WaitResult { kReady, kTimeout, kShutdown };
  using WaitCallback = std::function<void(WaitResult)>;

  // store and clock outlive the log. With `bounds`, the events a sandbox causes at will are
  // bounded per run or session (core/event_bounds.h); without, every event is stored.
  EventLog(store::Store* store, Clock* clock, FollowOptions follow = FollowOptions(),
           std::optional<SandboxEventLimits> bounds = std::nullopt);
  ~EventLog();

  // Sets seq (the run's next) and time and queues the event for the writer thread; returns
  // it without waiting for the store, except for a run's terminal event (run.finished, a
  // kept session's own session.closed), which returns once it is stored. Refused, with the
  // error, when an earlier event of the run failed to be stored and that was not yet
  // reported (see the contract above). An event over its log's bounds is counted for the
  // log's next events.dropped and not stored: it is returned as given, with seq 0.
  absl::StatusOr<v1::Event> Append(v1::Event event);
  // Appends a run's terminal event (run.finished) as Append does, and stores `record`, the
  // run's final record (its id the event's run), in the same store transaction: a process
  // killed at any point leaves both or neither, never a finished run whose log does not end.
  // A follower that sees the event and then reads the record finds it final. On error
  // neither is stored. INVALID_ARGUMENT when the event is not terminal or not the record's.
  absl::StatusOr<v1::Event> Finish(v1::Event terminal, v1::Run record);
  // The same for a kept session: its own log's session.closed (run and session id the
  // record's) with its final record, in one store transaction.
  absl::StatusOr<v1::Event> Finish(v1::Event terminal, v1::Session record);
  // Ends several logs at once, each terminal event with its final record as Finish does, all
  // in one store transaction, written before it returns: OK, or the error, and then nothing
  // is stored. With `lost`, that transaction is a takeover's settling (Store::SettleTakeover:
  // the cleanup after `lost` marked done, its slots freed), refused unless `by` holds the
  // claim: a takeover commits once.
  absl::Status FinishAll(std::vector<std::pair<v1::Event, v1::Run>> runs,
                         std::vector<std::pair<v1::Event, v1::Session>> sessions,
                         const std::string& lost = "", const std::string& by = "");
  // Appends `event` through a transaction of another store: gives it the run's next seq and
  // its time as Append would, and `write` stores it there (a run's run.queued with its queue
  // row, store::AdmissionStore::Enqueue), saying whether it did (null: its seq could not be
  // read; write without it). Stored, the log's followers see it; not, its seq is given back.
  // Returns whether it was stored.
  bool AppendThrough(v1::Event event, const std::function<bool(v1::Event*)>& write);
  // Waits until every event appended before the call (of any run) is committed. Returns the
  // store error of `run_id`'s events not yet reported, if any (and reports it: once).
  absl::Status Flush(const std::string& run_id);
  // Batches that failed to be stored, since the log was made (each logged as it happened).
  int64_t store_errors() const;
  // Up to `limit` committed events with seq > after_seq, in seq order, each once: from the
  // run's in-memory tail when it reaches back to after_seq + 1, else from the store.
  absl::StatusOr<std::vector<v1::Event>> Read(const std::string& run_id, int64_t after_seq,
                                              uint32_t limit);
  // True when the run's log has ended at or before `after_seq`: its terminal event (its last)
  // is stored with a seq <= after_seq, so a follower there will never get another event.
  // A follow that starts there ends at once instead of waiting (only heartbeats would come):
  // an SSE client that reconnects with the last event's id, a client resuming after the
  // last seq it saw. False for a run this log is appending (no store read), for one with no
  // terminal event yet, and for a follower before the end (it reads the terminal event and
  // ends on it). At most two store reads.
  absl::StatusOr<bool> Ended(const std::string& run_id, int64_t after_seq);
  // Calls `cb` exactly once: when the run has an event with seq > after_seq (at once if it
  // already has), after `timeout`, or at Shutdown. Returns an id for CancelWait (0, or the
  // id of a wait that has fired, when cb ran before Wait returned).
  uint64_t Wait(const std::string& run_id, int64_t after_seq, absl::Duration timeout,
                WaitCallback cb);
  // True when the wait was removed before firing: its callback will never run. False when it
  // has fired or is firing.
  bool CancelWait(uint64_t id);
  // This log no longer appends `run_id` (another replica claimed the waiting run and writes
  // its events from now on): once the run's queued events are stored, its cached tail and
  // seq go, and its followers are woken (kReady) so they read the store and, waiting again,
  // are polled and notified as for any run another process appends. Without it they would
  // wait on a cache nothing updates any more.
  void Forget(const std::string& run_id);
  // Flushes, then fires every waiter with kShutdown and refuses new waits (they fire
  // kShutdown at once). Appends still work after it (they are stored, and seen by Read).
  void Shutdown();

 private:
  struct Waiter {
    std::string run_id;
    int64_t after_seq = 0;
    absl::Time deadline;
    // When the store is next read for the run: a run this log does not append (no
    // committed seq here) is polled; InfiniteFuture for one it appends.
    absl::Time poll_at = absl::InfiniteFuture();
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
  // The run's last committed seq: cached while this log appends the run (from its first
  // Append to its terminal event), read from the store for any other run.
  absl::StatusOr<int64_t> CommittedSeqLocked(const std::string& run_id)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Removes the waiter; returns its callback.
  WaitCallback TakeWaiterLocked(std::map<uint64_t, Waiter>::iterator it)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Reads the last seq of the runs of the waiters `polled` from the store (once per run, not
  // under mu_), then answers those of them it is past.
  void PollStore(const std::vector<uint64_t>& polled) ABSL_LOCKS_EXCLUDED(mu_);
  // A store notification: "<run> <last seq>" answers that run's polled waiters behind it;
  // an empty one (the notifier has just listened again) makes every polled waiter poll now.
  void OnNotification(const std::string& payload) ABSL_LOCKS_EXCLUDED(mu_);

  // The writer thread: stores each batch of queued events in one transaction, then
  // publishes it (tails, committed seqs, wake-ups).
  void WriterLoop();
  bool WriterWoken() const ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    return stop_writer_ || !queue_.empty();
  }
  // Stores `batch`; returns the runs whose events failed, with the error. A failed batch is
  // retried event by event, so that one bad event fails only its own run.
  absl::flat_hash_map<std::string, absl::Status> Write(
      const std::vector<v1::Event>& batch, const absl::flat_hash_map<std::string, v1::Run>& records,
      const absl::flat_hash_map<std::string, v1::Session>& sessions);
  // Makes a committed batch visible; returns the callbacks of the waiters it answers.
  std::vector<WaitCallback> PublishLocked(
      std::vector<v1::Event> batch, const absl::flat_hash_map<std::string, absl::Status>& failed)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // The store error of run_id's events not yet reported, or OK; reports it (once).
  absl::Status TakeUnreportedLocked(const std::string& run_id) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Append and Finish: passes `event` through the bounds, with the events.dropped they
  // add, then queues it (and the final record, when given), as Append says.
  absl::StatusOr<v1::Event> AppendLocked(v1::Event event, std::optional<v1::Run> record,
                                         std::optional<v1::Session> session = std::nullopt)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  absl::StatusOr<v1::Event> QueueLocked(v1::Event event, std::optional<v1::Run> record,
                                        std::optional<v1::Session> session)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // INVALID_ARGUMENT unless `terminal` ends the log of the record `record_id` (a kept
  // session's: its session.closed).
  static absl::Status CheckFinal(const v1::Event& terminal, const std::string& record_id,
                                 bool session);
  // Returns once the writer has finished every event appended so far.
  void AwaitWrittenLocked() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void AddToTailLocked(v1::Event event) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  store::Store* const store_;
  Clock* const clock_;
  const FollowOptions follow_;
  uint64_t subscription_ = 0;  // on follow_.notifier; 0 when none

  mutable absl::Mutex mu_;
  std::optional<EventBounds> bounds_ ABSL_GUARDED_BY(mu_);
  // Per live run: the last seq given out (queued or committed), and the last committed.
  absl::flat_hash_map<std::string, int64_t> last_seq_ ABSL_GUARDED_BY(mu_);
  absl::flat_hash_map<std::string, int64_t> committed_seq_ ABSL_GUARDED_BY(mu_);
  absl::flat_hash_map<std::string, Tail> tails_ ABSL_GUARDED_BY(mu_);
  // Appended, not yet taken by the writer; in append order (so each run's in seq order).
  std::vector<v1::Event> queue_ ABSL_GUARDED_BY(mu_);
  // The final records (Finish) of the runs whose terminal event is in queue_, by run: the
  // writer stores each in the transaction that stores its event.
  absl::flat_hash_map<std::string, v1::Run> records_ ABSL_GUARDED_BY(mu_);
  // The same for kept sessions whose session.closed is in queue_ (their log's key is their id).
  absl::flat_hash_map<std::string, v1::Session> session_records_ ABSL_GUARDED_BY(mu_);
  // Events ever appended, and ever finished by the writer (stored or failed): Flush waits
  // for the second to reach the first's value at its call.
  uint64_t appended_ ABSL_GUARDED_BY(mu_) = 0;
  uint64_t written_ ABSL_GUARDED_BY(mu_) = 0;
  // Store errors of runs' events, not yet returned by the run's Append or Flush.
  absl::flat_hash_map<std::string, absl::Status> unreported_ ABSL_GUARDED_BY(mu_);
  int64_t store_errors_ ABSL_GUARDED_BY(mu_) = 0;
  bool stop_writer_ ABSL_GUARDED_BY(mu_) = false;
  std::map<uint64_t, Waiter> waiters_ ABSL_GUARDED_BY(mu_);
  uint64_t next_waiter_ ABSL_GUARDED_BY(mu_) = 1;
  int64_t polled_waiters_ ABSL_GUARDED_BY(mu_) = 0;  // those with a finite poll_at
  bool shutdown_ ABSL_GUARDED_BY(mu_) = false;
  absl::Time timer_due_ ABSL_GUARDED_BY(mu_) = absl::InfiniteFuture();  // the timer wakes then
  bool timer_kicked_ ABSL_GUARDED_BY(mu_) = false;
  std::thread timer_;
  std::thread writer_;
};

}  // namespace sandgate::core

#endif  // SANDGATE_CORE_EVENT_LOG_H_
