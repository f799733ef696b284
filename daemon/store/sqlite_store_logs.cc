// SqliteStore's logs: every run's and kept session's events (appended in one transaction per
// batch, fenced by the writer's lease and the log's owner) and the resource journal. The
// records (runs, sessions, kept requests) are in sqlite_store.cc.
#include <sqlite3.h>

#include <utility>

#include "absl/cleanup/cleanup.h"
#include "absl/strings/str_cat.h"
#include "common/errors.h"
#include "common/status_macros.h"
#include "store/replica_store.h"
#include "store/sqlite_stmt.h"
#include "store/sqlite_store.h"

namespace sandgate::store {

absl::Status SqliteStore::InsertEvent(const v1::Event& event) {
  // Fenced (FenceWrites): written only while the writer's lease is current at its epoch, and
  // only to a log whose record (run or session) is the writer's, has no owner, or is of a
  // replica the writer took over; checked under the database's write lock, so a claim making
  // a waiting run another replica's commits wholly before this append or after it.
  const bool fenced = !fence_replica_.empty();
  Stmt s(Cached(fenced ? "INSERT INTO events(run_id, seq, proto) SELECT ?1, ?2, ?3 WHERE "
                         "EXISTS(SELECT 1 FROM replica_leases WHERE id = ?4 AND epoch = ?5 "
                         "AND taken_over_by = '') AND NOT EXISTS(SELECT 1 FROM (SELECT replica "
                         "FROM runs WHERE id = ?1 UNION ALL SELECT replica FROM sessions WHERE "
                         "id = ?1) o WHERE o.replica NOT IN (?4, '') AND NOT EXISTS(SELECT 1 "
                         "FROM replica_leases l WHERE l.id = o.replica AND l.taken_over_by = ?4))"
                       : "INSERT INTO events(run_id, seq, proto) VALUES(?,?,?)"));
  if (!s.ok()) return Error("prepare append event");
  s.Bind(1, event.run_id());
  s.Bind(2, static_cast<int64_t>(event.seq()));
  s.BindBlob(3, event.SerializeAsString());
  if (fenced) {
    s.Bind(4, fence_replica_);
    s.Bind(5, fence_epoch_);
  }
  int rc = s.Step();
  if (rc == SQLITE_CONSTRAINT) {
    return errors::AlreadyExists("event", absl::StrCat(event.run_id(), "#", event.seq()));
  }
  if (rc != SQLITE_DONE) return Error("append event");
  if (fenced && sqlite3_changes(db_) == 0) {
    return Fenced(nullptr, absl::StrCat("the log of ", event.run_id()), event.run_id());
  }
  return absl::OkStatus();
}

absl::Status SqliteStore::AppendEvent(const v1::Event& event) {
  absl::MutexLock lock(&mu_);
  return InsertEvent(event);
}

absl::Status SqliteStore::AppendEventsWithRuns(const std::vector<v1::Event>& events,
                                               const std::vector<v1::Run>& runs) {
  return AppendEventsWithRecords(events, runs, {});
}

absl::Status SqliteStore::AppendEventsWithRecords(const std::vector<v1::Event>& events,
                                                  const std::vector<v1::Run>& runs,
                                                  const std::vector<v1::Session>& sessions) {
  return SettleTakeover(events, runs, sessions, "", "");
}

absl::Status SqliteStore::SettleTakeover(const std::vector<v1::Event>& events,
                                         const std::vector<v1::Run>& runs,
                                         const std::vector<v1::Session>& sessions,
                                         const std::string& lost, const std::string& by) {
  absl::MutexLock lock(&mu_);
  // One event is its own transaction (autocommit). BEGIN and COMMIT are prepared once: a
  // batch is often small, and parsing them again cost as much as the insert.
  if (events.size() == 1 && runs.empty() && sessions.empty() && lost.empty()) {
    return InsertEvent(events.front());
  }
  SANDGATE_RETURN_IF_ERROR(StepCached("BEGIN", "begin events"));
  absl::Status st;
  for (size_t i = 0; st.ok() && i < runs.size(); ++i) st = PutRunLocked(runs[i]);
  for (size_t i = 0; st.ok() && i < sessions.size(); ++i) {
    st = PutRecordLocked("sessions", "session", sessions[i],
                         static_cast<int64_t>(sessions[i].status()), nullptr);
  }
  for (size_t i = 0; st.ok() && i < events.size(); ++i) st = InsertEvent(events[i]);
  if (st.ok() && !lost.empty()) {
    // Last: the final records' trigger has freed their runs' slots; the lease's frees the rest.
    Stmt s(
        Cached("UPDATE replica_leases SET cleaned = 1 WHERE id = ?1 AND taken_over_by = ?2 "
               "AND cleaned = 0"));
    s.Bind(1, lost);
    s.Bind(2, by);
    st = !s.ok() || s.Step() != SQLITE_DONE ? Error("finish takeover")
         : sqlite3_changes(db_) != 1        ? ClaimLost(lost, by)
                                            : absl::OkStatus();
  }
  if (!st.ok()) {
    (void)Exec("ROLLBACK");  // the write's error is the one to report
    return st;
  }
  absl::Status committed = StepCached("COMMIT", "commit events");
  if (!committed.ok()) (void)Exec("ROLLBACK");  // a failed COMMIT may leave it open
  return committed;
}

absl::Status SqliteStore::StepCached(const char* sql, const char* what) {
  Stmt s(Cached(sql));
  if (!s.ok() || s.Step() != SQLITE_DONE) return Error(what);
  return absl::OkStatus();
}

absl::StatusOr<std::vector<v1::Event>> SqliteStore::ReadEvents(const std::string& run_id,
                                                               int64_t after_seq, uint32_t limit) {
  absl::MutexLock lock(&mu_);
  Stmt s(Cached("SELECT proto FROM events WHERE run_id = ? AND seq > ? ORDER BY seq LIMIT ?"));
  if (!s.ok()) return Error("prepare read events");
  s.Bind(1, run_id);
  s.Bind(2, after_seq);
  s.Bind(3, static_cast<int64_t>(limit));
  return CollectProtos<v1::Event>(s, "event");
}

absl::StatusOr<int64_t> SqliteStore::LastSeq(const std::string& run_id) {
  absl::MutexLock lock(&mu_);
  Stmt s(Cached("SELECT COALESCE(MAX(seq), 0) FROM events WHERE run_id = ?"));
  if (!s.ok()) return Error("prepare last seq");
  s.Bind(1, run_id);
  if (s.Step() != SQLITE_ROW) return Error("last seq");
  return s.Int(0);
}

absl::Status SqliteStore::Record(const JournalEntry& entry) {
  absl::MutexLock lock(&mu_);
  // A durable record must be on disk before the resource it names exists; any other is
  // safe once committed (JournalEntry::durable).
  if (entry.durable) SANDGATE_RETURN_IF_ERROR(Exec("PRAGMA synchronous=FULL"));
  absl::Cleanup normal = [this, &entry]() ABSL_NO_THREAD_SAFETY_ANALYSIS {
    if (entry.durable) (void)Exec("PRAGMA synchronous=NORMAL");
  };
  Stmt s(db_,
         "INSERT INTO journal(id, provider, kind, details) VALUES(?,?,?,?) "
         "ON CONFLICT(id) DO UPDATE SET details=excluded.details");
  if (!s.ok()) return Error("prepare journal record");
  s.Bind(1, entry.id);
  s.Bind(2, entry.provider);
  s.Bind(3, entry.kind);
  s.Bind(4, entry.details.dump());
  if (s.Step() != SQLITE_DONE) return Error("journal record");
  return absl::OkStatus();
}

absl::Status SqliteStore::Erase(const std::string& id) {
  absl::MutexLock lock(&mu_);
  Stmt s(db_, "DELETE FROM journal WHERE id = ?");
  if (!s.ok()) return Error("prepare journal erase");
  s.Bind(1, id);
  if (s.Step() != SQLITE_DONE) return Error("journal erase");
  return absl::OkStatus();
}

absl::StatusOr<std::vector<JournalEntry>> SqliteStore::List() {
  absl::MutexLock lock(&mu_);
  Stmt s(db_, "SELECT id, provider, kind, details FROM journal ORDER BY id");
  if (!s.ok()) return Error("prepare journal list");
  std::vector<JournalEntry> entries;
  int rc;
  while ((rc = s.Step()) == SQLITE_ROW) {
    JournalEntry e{s.Text(0), s.Text(1), s.Text(2)};
    e.details = nlohmann::json::parse(s.Text(3), nullptr, /*allow_exceptions=*/false);
    if (e.details.is_discarded())
      return errors::Internal(absl::StrCat("corrupt journal row ", e.id));
    entries.push_back(std::move(e));
  }
  if (rc != SQLITE_DONE) return Error("journal list");
  return entries;
}

}  // namespace sandgate::store
