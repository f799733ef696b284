#include "store/sqlite_admission_store.h"

#include <sqlite3.h>

#include <initializer_list>

#include "absl/strings/str_cat.h"
#include "common/errors.h"
#include "common/status_macros.h"
#include "sandgate/v1/sandgate.pb.h"
#include "store/sqlite_file.h"
#include "store/sqlite_sql.h"

namespace sandgate::store {
namespace {

// Times are unix nanoseconds from the callers' clock; booleans 0/1.
// NORMAL: a power loss may drop the newest rows, which recovery rebuilds from the runs
// (waiting runs are queued again, and a restart frees the previous life's slots).
constexpr const char* kSchema = R"sql(
PRAGMA synchronous=NORMAL;
CREATE TABLE IF NOT EXISTS admission_queue (
  run_id TEXT PRIMARY KEY,
  tenant TEXT NOT NULL,
  needs_sandbox INTEGER NOT NULL,
  only_replica TEXT NOT NULL,
  enqueued_by TEXT NOT NULL,
  enqueued_at INTEGER NOT NULL,
  seq INTEGER NOT NULL,
  claimed_by TEXT NOT NULL DEFAULT '');
CREATE INDEX IF NOT EXISTS admission_queue_by_tenant ON admission_queue(tenant, claimed_by, seq);
CREATE TABLE IF NOT EXISTS admission_tenants (
  tenant TEXT PRIMARY KEY,
  max_running INTEGER NOT NULL DEFAULT 0,
  running INTEGER NOT NULL DEFAULT 0,
  last_claimed INTEGER NOT NULL DEFAULT 0);
CREATE TABLE IF NOT EXISTS admission_starts (tenant TEXT NOT NULL, at INTEGER NOT NULL);
CREATE INDEX IF NOT EXISTS admission_starts_by_tenant ON admission_starts(tenant, at);
CREATE TABLE IF NOT EXISTS admission_sessions (
  session_id TEXT PRIMARY KEY,
  tenant TEXT NOT NULL,
  replica TEXT NOT NULL);
)sql";

// The queue rows with their tenants' quotas, for Queued; then `rest`: the WHERE, the order.
Sql SelectQueued(const SqlTx& tx, const char* rest, std::initializer_list<Value> params) {
  return tx.Query(absl::StrCat("SELECT q.run_id, q.tenant, t.max_running, q.needs_sandbox, "
                               "q.only_replica, q.enqueued_by, q.enqueued_at, q.claimed_by "
                               "FROM admission_queue q JOIN admission_tenants t "
                               "ON t.tenant = q.tenant ",
                               rest),
                  params);
}

// The row SelectQueued's statement is at.
QueuedRun Queued(Sql& s) {
  return {s.Text(0),     s.Text(1), static_cast<uint32_t>(s.Int(2)),
          s.Int(3) != 0, s.Text(4), s.Text(5),
          s.Time(6),     s.Text(7)};
}

absl::StatusOr<int64_t> CountWaiting(const SqlTx& tx) {
  return tx.Int("SELECT count(*) FROM admission_queue WHERE claimed_by = ''", {});
}

// Makes the run's record (Run.replica and the owner column) `replica`'s, in the caller's
// transaction, while it is still QUEUED: see AdmissionStore::Claim.
absl::Status OwnRecord(const SqlTx& tx, const std::string& run_id, const std::string& replica) {
  Sql record = tx.Query("SELECT proto FROM runs WHERE id = ?1 AND status = 1", {run_id});
  SANDGATE_ASSIGN_OR_RETURN(bool found, record.Row());
  if (!found) return absl::OkStatus();  // ended meanwhile: the claimer lets it go (Adopt)
  v1::Run run;
  if (!run.ParseFromString(record.Bytes(0))) {
    return errors::Internal(absl::StrCat("sqlite: claim run record: run ", run_id, " is corrupt"));
  }
  run.set_replica(replica);
  return tx.Run("UPDATE runs SET proto = ?2, replica = ?3 WHERE id = ?1",
                {run_id, Blob{run.SerializeAsString()}, replica});
}

// Claims for `replica`, in the caller's transaction, the next waiting run in fair order that
// its tenant's quota admits and `replica` may start; when `only` is given, only if that next
// run is `only` (else nothing is claimed). nullopt when nothing was claimed. With `records`,
// the run's record becomes the claimer's in the same transaction.
absl::StatusOr<std::optional<QueuedRun>> ClaimNext(const SqlTx& tx, const std::string& replica,
                                                   bool sandbox_room, const std::string* only,
                                                   bool records) {
  // The next tenant after the one claimed last (by name, wrapping around) with a run this
  // replica may start, under its quota; that tenant's oldest such run.
  Sql next = SelectQueued(
      tx,
      "WHERE q.claimed_by = '' AND (t.max_running = 0 OR t.running < t.max_running) "
      "AND (q.needs_sandbox = 0 OR ?1 = 1) AND (q.only_replica = '' OR q.only_replica = ?2) "
      "ORDER BY (q.tenant <= coalesce((SELECT tenant FROM admission_tenants "
      "WHERE last_claimed > 0 ORDER BY last_claimed DESC LIMIT 1), '')), q.tenant, q.seq LIMIT 1",
      {int64_t{sandbox_room}, replica});
  SANDGATE_ASSIGN_OR_RETURN(bool found, next.Row());
  if (!found) return std::nullopt;
  QueuedRun claimed = Queued(next);
  if (only != nullptr && claimed.run_id != *only) return std::nullopt;
  claimed.claimed_by = replica;
  SANDGATE_RETURN_IF_ERROR(tx.Run("UPDATE admission_queue SET claimed_by = ?2 WHERE run_id = ?1",
                                  {claimed.run_id, replica}));
  SANDGATE_RETURN_IF_ERROR(
      tx.Run("UPDATE admission_tenants SET running = running + 1, "
             "last_claimed = (SELECT max(last_claimed) + 1 FROM "
             "admission_tenants) WHERE tenant = ?1",
             {claimed.tenant}));
  if (records) SANDGATE_RETURN_IF_ERROR(OwnRecord(tx, claimed.run_id, replica));
  return claimed;
}

}  // namespace

absl::StatusOr<std::unique_ptr<SqliteAdmissionStore>> SqliteAdmissionStore::Open(
    const std::string& path) {
  SANDGATE_ASSIGN_OR_RETURN(sqlite3 * db, OpenSqliteFile(path, "admission database"));
  std::unique_ptr<SqliteAdmissionStore> store(new SqliteAdmissionStore(db));
  SqlTx tx(db, "create the admission tables");
  // The triggers go on the tables that are there: in a daemon, the records and the leases.
  const char* table = "SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = ?1";
  SANDGATE_ASSIGN_OR_RETURN(store->records_, tx.HasRow(table, {"runs"}));
  SANDGATE_ASSIGN_OR_RETURN(bool with_leases, tx.HasRow(table, {"replica_leases"}));
  // A run's finish frees its slot (Release) in the transaction that stores its final record:
  // the write that makes the record final fires it. The commit that marks a takeover's
  // cleanup done frees the lost replica's slots (PostgresAdmissionStore's kTakeoverSteps).
  SANDGATE_RETURN_IF_ERROR(tx.Script(absl::StrCat(
      kSchema,
      store->records_ ? "CREATE TRIGGER IF NOT EXISTS admission_release_finished "
                        "AFTER UPDATE OF status ON runs WHEN NEW.status >= 3 AND OLD.status < 3 "
                        "BEGIN "
                        "UPDATE admission_tenants SET running = running - 1 WHERE running > 0 AND "
                        "tenant = (SELECT tenant FROM admission_queue WHERE run_id = NEW.id AND "
                        "claimed_by <> ''); "
                        "DELETE FROM admission_queue WHERE run_id = NEW.id AND claimed_by <> ''; "
                        "END;"
                      : "",
      with_leases ? "CREATE TRIGGER IF NOT EXISTS admission_release_taken_over "
                    "AFTER UPDATE OF cleaned ON replica_leases "
                    "WHEN NEW.cleaned = 1 AND OLD.cleaned = 0 BEGIN "
                    "UPDATE admission_tenants SET running = max(0, running - (SELECT count(*) "
                    "FROM admission_queue q WHERE q.tenant = admission_tenants.tenant AND "
                    "q.claimed_by = NEW.id)); "
                    "DELETE FROM admission_queue WHERE only_replica = NEW.id; "
                    "UPDATE admission_queue SET claimed_by = '' WHERE claimed_by = NEW.id; "
                    "DELETE FROM admission_sessions WHERE replica = NEW.id; "
                    "END;"
                  : "")));
  return store;
}

SqliteAdmissionStore::~SqliteAdmissionStore() {
  absl::MutexLock lock(&mu_);
  sqlite3_close(db_);
}

absl::StatusOr<bool> SqliteAdmissionStore::Enqueue(const QueuedRun& run, uint32_t max_waiting,
                                                   RoomHere room, v1::Event* queued) {
  absl::MutexLock lock(&mu_);
  bool claimed = false, stored = false;
  SqlTx tx(db_, "queue run");
  SANDGATE_RETURN_IF_ERROR(tx.Immediate([&]() -> absl::Status {
    SANDGATE_ASSIGN_OR_RETURN(
        bool already, tx.HasRow("SELECT 1 FROM admission_queue WHERE run_id = ?1", {run.run_id}));
    if (already) return absl::OkStatus();
    if (max_waiting > 0) {
      SANDGATE_ASSIGN_OR_RETURN(int64_t waiting, CountWaiting(tx));
      if (waiting >= max_waiting) return QueueFull(waiting, max_waiting);
    }
    SANDGATE_RETURN_IF_ERROR(
        tx.Run("INSERT INTO admission_tenants(tenant, max_running) VALUES(?1, ?2) "
               "ON CONFLICT(tenant) DO UPDATE SET max_running = excluded.max_running",
               {run.tenant, int64_t{run.tenant_limit}}));
    SANDGATE_RETURN_IF_ERROR(
        tx.Run("INSERT INTO admission_queue(run_id, tenant, needs_sandbox, only_replica, "
               "enqueued_by, enqueued_at, seq) VALUES(?1, ?2, ?3, ?4, ?5, ?6, "
               "(SELECT coalesce(max(seq), 0) + 1 FROM admission_queue))",
               {run.run_id, run.tenant, int64_t{run.needs_sandbox}, run.only_replica,
                run.enqueued_by, run.enqueued_at}));
    if (room.run_slot) {
      // Under the same write lock: no other replica sees the row before this claim is made.
      SANDGATE_ASSIGN_OR_RETURN(
          std::optional<QueuedRun> here,
          ClaimNext(tx, run.enqueued_by, room.sandbox, &run.run_id, records_));
      claimed = here.has_value();
    }
    if (queued == nullptr || !records_) return absl::OkStatus();
    if (claimed) queued->mutable_run_queued()->set_position(1);
    stored = true;
    return tx.Run("INSERT INTO events(run_id, seq, proto) VALUES(?1, ?2, ?3)",
                  {run.run_id, queued->seq(), Blob{queued->SerializeAsString()}});
  }));
  if (queued != nullptr && !stored) queued->set_seq(0);
  return claimed;
}

absl::StatusOr<std::optional<QueuedRun>> SqliteAdmissionStore::Claim(const std::string& replica,
                                                                     bool sandbox_room) {
  absl::MutexLock lock(&mu_);
  SqlTx tx(db_, "claim run");
  return tx.Immediate([&] { return ClaimNext(tx, replica, sandbox_room, nullptr, records_); });
}

absl::StatusOr<bool> SqliteAdmissionStore::Remove(const std::string& run_id) {
  absl::MutexLock lock(&mu_);
  SqlTx tx(db_, "remove waiting run");
  SANDGATE_ASSIGN_OR_RETURN(
      int changed,
      tx.Changed("DELETE FROM admission_queue WHERE run_id = ?1 AND claimed_by = ''", {run_id}));
  return changed == 1;
}

absl::Status SqliteAdmissionStore::Release(const std::string& run_id) {
  absl::MutexLock lock(&mu_);
  SqlTx tx(db_, "release run");
  return tx.Immediate([&]() -> absl::Status {
    Sql claimed = tx.Query(
        "SELECT tenant FROM admission_queue WHERE run_id = ?1 AND claimed_by <> ''", {run_id});
    SANDGATE_ASSIGN_OR_RETURN(bool found, claimed.Row());
    if (!found) return absl::OkStatus();
    const std::string tenant = claimed.Text(0);
    SANDGATE_RETURN_IF_ERROR(tx.Run("DELETE FROM admission_queue WHERE run_id = ?1", {run_id}));
    return tx.Run(
        "UPDATE admission_tenants SET running = running - 1 WHERE tenant = ?1 AND running > 0",
        {tenant});
  });
}

absl::Status SqliteAdmissionStore::ReleaseReplica(const std::string& replica) {
  absl::MutexLock lock(&mu_);
  SqlTx tx(db_, "release replica");
  return tx.Immediate([&]() -> absl::Status {
    SANDGATE_RETURN_IF_ERROR(tx.Run(
        "UPDATE admission_tenants SET running = max(0, running - (SELECT count(*) FROM "
        "admission_queue q WHERE q.tenant = admission_tenants.tenant AND q.claimed_by = ?1))",
        {replica}));
    SANDGATE_RETURN_IF_ERROR(
        tx.Run("DELETE FROM admission_queue WHERE claimed_by = ?1 OR "
               "(claimed_by = '' AND only_replica = ?1)",
               {replica}));
    return tx.Run("DELETE FROM admission_sessions WHERE replica = ?1", {replica});
  });
}

absl::StatusOr<WaitingRuns> SqliteAdmissionStore::Waiting() {
  absl::MutexLock lock(&mu_);
  SqlTx tx(db_, "list waiting runs");
  WaitingRuns out;
  Sql runs = SelectQueued(tx, "WHERE q.claimed_by = '' ORDER BY q.seq", {});
  SANDGATE_RETURN_IF_ERROR(runs.ForEachRow([&] { out.runs.push_back(Queued(runs)); }));
  Sql cursor = tx.Query(
      "SELECT tenant FROM admission_tenants WHERE last_claimed > 0 "
      "ORDER BY last_claimed DESC LIMIT 1",
      {});
  SANDGATE_ASSIGN_OR_RETURN(bool row, cursor.Row());
  if (row) out.last_tenant = cursor.Text(0);
  return out;
}

absl::StatusOr<std::optional<QueuedRun>> SqliteAdmissionStore::Find(const std::string& run_id) {
  absl::MutexLock lock(&mu_);
  Sql run = SelectQueued(SqlTx(db_, "find queued run"), "WHERE q.run_id = ?1", {run_id});
  SANDGATE_ASSIGN_OR_RETURN(bool row, run.Row());
  if (!row) return std::nullopt;
  return Queued(run);
}

absl::StatusOr<uint64_t> SqliteAdmissionStore::WaitingCount() {
  absl::MutexLock lock(&mu_);
  return CountWaiting(SqlTx(db_, "count waiting runs"));
}

absl::StatusOr<std::optional<absl::Time>> SqliteAdmissionStore::CountStart(
    const std::string& tenant, uint32_t limit, absl::Time now) {
  absl::MutexLock lock(&mu_);
  SqlTx tx(db_, "count run start");
  return tx.Immediate([&]() -> absl::StatusOr<std::optional<absl::Time>> {
    SANDGATE_RETURN_IF_ERROR(tx.Run("DELETE FROM admission_starts WHERE tenant = ?1 AND at <= ?2",
                                    {tenant, now - absl::Minutes(1)}));
    Sql window =
        tx.Query("SELECT count(*), min(at) FROM admission_starts WHERE tenant = ?1", {tenant});
    SANDGATE_ASSIGN_OR_RETURN(bool row, window.Row());
    if (row && window.Int(0) >= limit) {
      return window.Time(1) + absl::Minutes(1);
    }
    SANDGATE_RETURN_IF_ERROR(
        tx.Run("INSERT INTO admission_starts(tenant, at) VALUES(?1, ?2)", {tenant, now}));
    return std::nullopt;
  });
}

absl::StatusOr<bool> SqliteAdmissionStore::TakeSessionSlot(const std::string& tenant,
                                                           const std::string& session_id,
                                                           const std::string& replica,
                                                           uint32_t limit) {
  absl::MutexLock lock(&mu_);
  SqlTx tx(db_, "take session slot");
  return tx.Immediate([&]() -> absl::StatusOr<bool> {
    if (limit > 0) {
      SANDGATE_ASSIGN_OR_RETURN(
          int64_t live,
          tx.Int("SELECT count(*) FROM admission_sessions WHERE tenant = ?1", {tenant}));
      if (live >= limit) return false;
    }
    SANDGATE_RETURN_IF_ERROR(
        tx.Run("INSERT INTO admission_sessions(session_id, tenant, replica) VALUES(?1, ?2, ?3) "
               "ON CONFLICT(session_id) DO NOTHING",
               {session_id, tenant, replica}));
    return true;
  });
}

absl::Status SqliteAdmissionStore::ReleaseSessionSlot(const std::string& session_id) {
  absl::MutexLock lock(&mu_);
  return SqlTx(db_, "release session slot")
      .Run("DELETE FROM admission_sessions WHERE session_id = ?1", {session_id});
}

}  // namespace sandgate::store
