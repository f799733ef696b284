// Store: the durable state of the daemon — runs, their event logs, the resource journal.
//
// The event log is the source of truth that every stream replays. Runs and events are kept
// as their API messages (sandgate.v1.Run / Event), so what a caller reads after a restart is
// byte for byte what it would have read before.
//
// Thread safe. The real implementation is SqliteStore; tests may use it on a temp file.
#ifndef SANDGATE_STORE_STORE_H_
#define SANDGATE_STORE_STORE_H_

#include <algorithm>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "common/journal.h"
#include "sandgate/v1/sandgate.pb.h"

namespace sandgate::store {

struct RunPage {
  std::vector<v1::Run> runs;
  std::string next_page_token;  // empty at the end
};

// A run or session found by its idempotency key.
struct KeyedRecord {
  std::string id;
  // sha256 (hex) of the request that made it (core/request_fingerprint.h);
  // empty for rows stored before fingerprints were kept (schema version 0),
  // which cannot be compared.
  std::string request_sha256;
};

class Store : public ResourceJournal {
 public:
  // Inserts a new run with the fingerprint of the request that made it, in one
  // statement, so a concurrent request under the same idempotency key either
  // finds it or is refused with ALREADY_EXISTS here.
  virtual absl::Status CreateRun(const v1::Run& run, const std::string& request_sha256) = 0;
  // Inserts or replaces the run with run.id() (a stored fingerprint is kept). A
  // status other than QUEUED also deletes the run's kept request
  // (PutRunRequest): once a run has started it cannot be queued again.
  virtual absl::Status PutRun(const v1::Run& run) = 0;
  virtual absl::StatusOr<v1::Run> GetRun(const std::string& run_id) = 0;
  // Newest first. `tenant` empty = every tenant (operators).
  virtual absl::StatusOr<RunPage> ListRuns(const std::string& tenant, uint32_t page_size,
                                           const std::string& page_token) = 0;
  virtual absl::StatusOr<std::optional<KeyedRecord>> FindRunByIdempotencyKey(
      const std::string& tenant, const std::string& key) = 0;
  // Runs whose status is QUEUED or RUNNING (after a restart: queued ones are queued again
  // from their kept request, the others failed).
  virtual absl::StatusOr<std::vector<v1::Run>> ListUnfinishedRuns() = 0;
  // Keeps a queued run's request, inputs included, so it survives a restart.
  virtual absl::Status PutRunRequest(const std::string& run_id,
                                     const v1::RunAnalysisRequest& request) = 0;
  // NOT_FOUND when none is kept.
  virtual absl::StatusOr<v1::RunAnalysisRequest> GetRunRequest(const std::string& run_id) = 0;

  // Sessions, like runs, are kept as their API message; CreateSession as
  // CreateRun.
  virtual absl::Status CreateSession(const v1::Session& session,
                                     const std::string& request_sha256) = 0;
  virtual absl::Status PutSession(const v1::Session& session) = 0;
  virtual absl::StatusOr<v1::Session> GetSession(const std::string& session_id) = 0;
  // Newest first; `tenant` empty = every tenant.
  virtual absl::StatusOr<std::vector<v1::Session>> ListSessions(const std::string& tenant,
                                                                bool include_closed) = 0;
  virtual absl::StatusOr<std::optional<KeyedRecord>> FindSessionByIdempotencyKey(
      const std::string& tenant, const std::string& key) = 0;

  // Retention: deletes runs that finished before `cutoff` with their events,
  // and sessions that ended before it with theirs (a kept session's own log is
  // keyed by its id). Returns the deleted runs' ids (their artifacts are the
  // caller's).
  virtual absl::StatusOr<std::vector<std::string>> PurgeBefore(absl::Time cutoff) = 0;

  // Appends one event; its seq must be the run's next one (ALREADY_EXISTS otherwise).
  virtual absl::Status AppendEvent(const v1::Event& event) = 0;
  // Appends `events` (of any runs, each run's in seq order) in one transaction: all of them
  // or, on error, none. The event log's group commit: a burst costs one commit.
  absl::Status AppendEvents(const std::vector<v1::Event>& events) {
    return AppendEventsWithRuns(events, {});
  }
  // As AppendEvents, and in the same transaction writes `runs` as PutRun does (fenced alike):
  // all of it or, on error, none. The event log stores a run's final record with its
  // terminal event so, and a process killed at any point leaves both or neither: never a
  // finished run whose log does not end (docs/replicas.md).
  virtual absl::Status AppendEventsWithRuns(const std::vector<v1::Event>& events,
                                            const std::vector<v1::Run>& runs) = 0;
  // As AppendEventsWithRuns, and in the same transaction writes `sessions` as PutSession does
  // (fenced alike). The event log stores a kept session's final record with its own log's
  // session.closed so: never a closed session whose log does not end (docs/replicas.md).
  virtual absl::Status AppendEventsWithRecords(const std::vector<v1::Event>& events,
                                               const std::vector<v1::Run>& runs,
                                               const std::vector<v1::Session>& sessions) = 0;
  // A takeover's settling, one commit: as AppendEventsWithRecords (the lost replica's failed
  // runs and ended sessions with their terminal events), and in the same transaction the
  // cleanup after `lost` is marked done (its lease row's `cleaned`), which frees its quota
  // slots where the shared queue is in this database (a trigger of the queue: its claimed
  // runs that had not started wait again). FAILED_PRECONDITION when `by` no longer holds the
  // claim on `lost`'s lease (store/replica_store.h ClaimLost): then nothing is stored.
  virtual absl::Status SettleTakeover(const std::vector<v1::Event>& events,
                                      const std::vector<v1::Run>& runs,
                                      const std::vector<v1::Session>& sessions,
                                      const std::string& lost, const std::string& by) = 0;
  // Events with seq > after_seq, ascending, at most `limit`.
  virtual absl::StatusOr<std::vector<v1::Event>> ReadEvents(const std::string& run_id,
                                                            int64_t after_seq, uint32_t limit) = 0;
  virtual absl::StatusOr<int64_t> LastSeq(const std::string& run_id) = 0;

  // Fencing (docs/replicas.md): from this call on, PutRun, PutSession and event appends are
  // written as `replica` holding its lease at `epoch` (store/replica_store.h), and the
  // statement that writes checks it: it is refused with ABORTED (IsFencedWrite) once that
  // lease has been taken over or joined again at another epoch, or when the record's owner
  // (for an event, its log's run or session) is another replica that this one is not
  // cleaning up after: a waiting run another replica claimed is the claimer's to append. Until it
  // is called (one daemon alone, tests) writes are not fenced. Stores without lease rows ignore it.
  virtual void FenceWrites(const std::string& replica, int64_t epoch) {}

  // The unfinished runs (QUEUED, RUNNING) and live sessions whose owner is `replica`, by the
  // owner column; rows stored before that column have it empty and are listed too (the
  // caller reads Run.replica / Session.replica). This scan is for stores without the column.
  virtual absl::StatusOr<std::vector<v1::Run>> ListUnfinishedRunsOf(const std::string& replica) {
    return OwnedBy(ListUnfinishedRuns(), replica);
  }
  virtual absl::StatusOr<std::vector<v1::Session>> ListLiveSessionsOf(const std::string& replica) {
    return OwnedBy(ListSessions("", false), replica);
  }

 private:
  template <typename Message>
  static absl::StatusOr<std::vector<Message>> OwnedBy(absl::StatusOr<std::vector<Message>> all,
                                                      const std::string& replica) {
    if (!all.ok()) return all;
    all->erase(std::remove_if(all->begin(), all->end(),
                              [&](const Message& m) {
                                return !m.replica().empty() && m.replica() != replica;
                              }),
               all->end());
    return all;
  }
};

// A write refused by fencing (Store::FenceWrites): the record was settled by another replica.
inline bool IsFencedWrite(const absl::Status& st) {
  return st.code() == absl::StatusCode::kAborted;
}

}  // namespace sandgate::store

#endif  // SANDGATE_STORE_STORE_H_
