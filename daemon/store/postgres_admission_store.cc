#include "store/postgres_admission_store.h"

#include "absl/strings/str_cat.h"
#include "common/errors.h"
#include "common/status_macros.h"
#include "sandgate/v1/sandgate.pb.h"
#include "store/postgres_notifier.h"
#include "store/postgres_schema.h"

namespace sandgate::store {
namespace {

// Times are unix nanoseconds from the callers' clock; booleans 0/1. Tenant names compare
// byte-wise (COLLATE "C"), as on SQLite, so the round robin is the same on both.
constexpr const char* kSteps[] = {
    R"sql(
CREATE TABLE admission_queue (
  run_id TEXT PRIMARY KEY,
  tenant TEXT COLLATE "C" NOT NULL,
  needs_sandbox INTEGER NOT NULL,
  only_replica TEXT NOT NULL,
  enqueued_by TEXT NOT NULL,
  enqueued_at BIGINT NOT NULL,
  seq BIGINT GENERATED ALWAYS AS IDENTITY,
  claimed_by TEXT NOT NULL DEFAULT '');
CREATE INDEX admission_queue_by_tenant ON admission_queue(tenant, claimed_by, seq);
CREATE TABLE admission_tenants (
  tenant TEXT COLLATE "C" PRIMARY KEY,
  max_running INTEGER NOT NULL DEFAULT 0,
  running INTEGER NOT NULL DEFAULT 0,
  last_claimed BIGINT NOT NULL DEFAULT 0);
CREATE SEQUENCE admission_claim_order;
CREATE TABLE admission_starts (tenant TEXT NOT NULL, at BIGINT NOT NULL);
CREATE INDEX admission_starts_by_tenant ON admission_starts(tenant, at);
CREATE TABLE admission_sessions (
  session_id TEXT PRIMARY KEY,
  tenant TEXT NOT NULL,
  replica TEXT NOT NULL);
)sql",
    // Pins, a waiting run only its queuer could claim for a moment: unused since an append
    // to a run's log checks its owner (PostgresStore), kept so the versions stay the same.
    "ALTER TABLE admission_queue ADD COLUMN pinned_by TEXT NOT NULL DEFAULT ''",
};

// Component "admission_finish", migrated only where the run records are in this database
// (in a daemon they are: its store migrates first): a run's finish frees its slot
// (AdmissionStore::Release) in the transaction that stores its final record, fired by the
// write that makes the record final.
constexpr const char* kFinishSteps[] = {
    R"sql(
CREATE FUNCTION admission_release_finished() RETURNS trigger LANGUAGE plpgsql AS $f$
BEGIN
  WITH d AS (DELETE FROM admission_queue WHERE run_id = NEW.id AND claimed_by <> ''
             RETURNING tenant)
  UPDATE admission_tenants t SET running = t.running - 1 FROM d
   WHERE t.tenant = d.tenant AND t.running > 0;
  IF FOUND THEN PERFORM pg_notify('sandgate_queue', ''); END IF;
  RETURN NULL;
END $f$;
CREATE TRIGGER admission_release_finished AFTER UPDATE OF status ON runs FOR EACH ROW
  WHEN (NEW.status >= 3 AND OLD.status < 3) EXECUTE FUNCTION admission_release_finished();
)sql",
};

// Component "admission_takeover", migrated only where the lease table is in this database (in
// a daemon it is: the leases are made first): the commit that marks a takeover's cleanup
// done (Store::SettleTakeover) frees the lost replica's slots. Its claimed runs that had not
// started wait again in their place; its runs only it could start go (its takeover fails
// them), and so do its session slots.
constexpr const char* kTakeoverSteps[] = {
    R"sql(
CREATE FUNCTION admission_release_taken_over() RETURNS trigger LANGUAGE plpgsql AS $f$
BEGIN
  WITH c AS (SELECT tenant, count(*) AS n FROM admission_queue WHERE claimed_by = NEW.id
             GROUP BY tenant)
  UPDATE admission_tenants t SET running = greatest(0, t.running - c.n) FROM c
   WHERE t.tenant = c.tenant;
  DELETE FROM admission_queue WHERE only_replica = NEW.id;
  UPDATE admission_queue SET claimed_by = '' WHERE claimed_by = NEW.id;
  DELETE FROM admission_sessions WHERE replica = NEW.id;
  PERFORM pg_notify('sandgate_queue', '');
  RETURN NULL;
END $f$;
CREATE TRIGGER admission_release_taken_over AFTER UPDATE OF cleaned ON replica_leases
  FOR EACH ROW WHEN (NEW.cleaned = 1 AND OLD.cleaned = 0)
  EXECUTE FUNCTION admission_release_taken_over();
)sql",
};

constexpr const char* kComponent = "admission";

constexpr const char kCountWaiting[] = "SELECT count(*) FROM admission_queue WHERE claimed_by = ''";
// The fair order's cursor: the tenant claimed last, gateway-wide.
constexpr const char kLastClaimed[] =
    "SELECT tenant FROM admission_tenants WHERE last_claimed > 0 "
    "ORDER BY last_claimed DESC LIMIT 1";

// A queue row as Queued reads it; the statement's WHERE follows.
constexpr char kQueuedRun[] =
    "SELECT q.run_id, q.tenant, t.max_running, q.needs_sandbox, q.only_replica, q.enqueued_by, "
    "q.enqueued_at, q.claimed_by FROM admission_queue q JOIN admission_tenants t "
    "ON t.tenant = q.tenant WHERE ";
// A waiting queue row q that a replica may start: $1 whether it has room for a sandbox (0/1),
// $2 the replica.
constexpr char kStartable[] =
    "q.claimed_by = '' AND (q.needs_sandbox = 0 OR $1 = 1) "
    "AND (q.only_replica = '' OR q.only_replica = $2)";

QueuedRun Queued(const PgResult& r, int row) {
  return {r.Text(row, 0),     r.Text(row, 1), static_cast<uint32_t>(r.Int(row, 2)),
          r.Int(row, 3) != 0, r.Text(row, 4), r.Text(row, 5),
          r.Time(row, 6),     r.Text(row, 7)};
}

// The tenant's row, made if new and locked: every check of one tenant's quota and the count
// it guards run under this lock.
absl::Status LockTenant(PgTx& tx, const std::string& tenant) {
  SANDGATE_RETURN_IF_ERROR(
      tx.Run("INSERT INTO admission_tenants(tenant) VALUES($1) ON CONFLICT(tenant) DO NOTHING",
             PgParams().Text(tenant)));
  return tx.Run("SELECT 1 FROM admission_tenants WHERE tenant = $1 FOR UPDATE",
                PgParams().Text(tenant));
}

// Tells every replica's claim loop, at the commit, that the queue changed: a run waits, or a
// slot is free.
absl::Status NotifyQueue(PgTx& tx) { return PgNotify(tx.connection(), kQueueChannel, ""); }

// Makes the run's record (Run.replica and the owner column) `replica`'s, in the caller's
// transaction, while it is still QUEUED: see AdmissionStore::Claim.
absl::Status OwnRecord(PgTx& tx, const std::string& run_id, const std::string& replica) {
  SANDGATE_ASSIGN_OR_RETURN(
      PgResult record, tx.Exec("SELECT proto FROM runs WHERE id = $1 AND status = 1 FOR UPDATE",
                               PgParams().Text(run_id)));
  if (record.rows() == 0) return absl::OkStatus();  // ended meanwhile: the claimer lets it go
  v1::Run run;
  const absl::string_view bytes = record.Bytes(0, 0);
  if (!run.ParseFromArray(bytes.data(), static_cast<int>(bytes.size()))) {
    return errors::Internal(absl::StrCat("postgres ", tx.what(), ": run ", run_id, " is corrupt"));
  }
  run.set_replica(replica);
  return tx.Run("UPDATE runs SET proto = $2, replica = $3 WHERE id = $1",
                PgParams().Text(run_id).Bytes(run.SerializeAsString()).Text(replica));
}

// Claims for `replica`, in the caller's transaction, the next waiting run in fair order that
// its tenant's quota admits and `replica` may start; when `only` is given, only if that next
// run is `only` (else nothing is claimed). nullopt when nothing was claimed. With `records`,
// the run's record becomes the claimer's in the same transaction.
absl::StatusOr<std::optional<QueuedRun>> ClaimNext(PgTx& tx, const std::string& replica,
                                                   bool sandbox_room, const std::string* only,
                                                   bool records) {
  // The next tenant after the one claimed last (by name, wrapping around) that is under its
  // quota and has a run this replica may start; a tenant another claimer holds is skipped.
  SANDGATE_ASSIGN_OR_RETURN(
      PgResult tenant,
      tx.Exec(absl::StrCat("SELECT t.tenant FROM admission_tenants t "
                           "WHERE (t.max_running = 0 OR t.running < t.max_running) AND EXISTS "
                           "(SELECT 1 FROM admission_queue q WHERE q.tenant = t.tenant AND ",
                           kStartable, ") ORDER BY (t.tenant <= coalesce((", kLastClaimed,
                           "), '')), t.tenant LIMIT 1 FOR UPDATE OF t SKIP LOCKED"),
              PgParams().Int(sandbox_room).Text(replica)));
  if (tenant.rows() == 0) return std::nullopt;
  const std::string name = tenant.Text(0, 0);
  // Its oldest such run; one a cancel is deleting right now is skipped.
  SANDGATE_ASSIGN_OR_RETURN(PgResult run,
                            tx.Exec(absl::StrCat(kQueuedRun, kStartable,
                                                 " AND q.tenant = $3 ORDER BY q.seq "
                                                 "LIMIT 1 FOR UPDATE OF q SKIP LOCKED"),
                                    PgParams().Int(sandbox_room).Text(replica).Text(name)));
  if (run.rows() == 0) return std::nullopt;  // cancelled meanwhile: the next poll
  QueuedRun claimed = Queued(run, 0);
  if (only != nullptr && claimed.run_id != *only) return std::nullopt;
  claimed.claimed_by = replica;
  SANDGATE_RETURN_IF_ERROR(tx.Run("UPDATE admission_queue SET claimed_by = $2 WHERE run_id = $1",
                                  PgParams().Text(claimed.run_id).Text(replica)));
  SANDGATE_RETURN_IF_ERROR(
      tx.Run("UPDATE admission_tenants SET running = running + 1, "
             "last_claimed = nextval('admission_claim_order') WHERE tenant = $1",
             PgParams().Text(name)));
  if (records) SANDGATE_RETURN_IF_ERROR(OwnRecord(tx, claimed.run_id, replica));
  if (claimed.enqueued_by != replica) {
    SANDGATE_RETURN_IF_ERROR(
        PgNotify(tx.connection(), kQueueChannel, ClaimedFrom(claimed.enqueued_by)));
  }
  return claimed;
}

}  // namespace

absl::StatusOr<std::unique_ptr<PostgresAdmissionStore>> PostgresAdmissionStore::Create(
    PostgresDatabase* db) {
  SANDGATE_RETURN_IF_ERROR(MigrateSchema(*db, kComponent, kSteps));
  std::unique_ptr<PostgresAdmissionStore> store(new PostgresAdmissionStore(db));
  SANDGATE_ASSIGN_OR_RETURN(PgResult r,
                            db->Exec("look for the run records",
                                     "SELECT (to_regclass('runs') IS NOT NULL)::int, "
                                     "(to_regclass('replica_leases') IS NOT NULL)::int"));
  store->records_ = r.Int(0, 0) == 1;
  if (store->records_)
    SANDGATE_RETURN_IF_ERROR(MigrateSchema(*db, "admission_finish", kFinishSteps));
  if (r.Int(0, 1) == 1)
    SANDGATE_RETURN_IF_ERROR(MigrateSchema(*db, "admission_takeover", kTakeoverSteps));
  return store;
}

absl::StatusOr<bool> PostgresAdmissionStore::Enqueue(const QueuedRun& run, uint32_t max_waiting,
                                                     RoomHere room, v1::Event* queued) {
  bool claimed = false, stored = false;
  SANDGATE_RETURN_IF_ERROR(db_->Transaction("queue run", [&](PgTx& tx) -> absl::Status {
    SANDGATE_ASSIGN_OR_RETURN(
        PgResult already,
        tx.Exec("SELECT 1 FROM admission_queue WHERE run_id = $1", PgParams().Text(run.run_id)));
    if (already.rows() > 0) return absl::OkStatus();
    if (max_waiting > 0) {
      // A bound on memory and patience, not a quota: two replicas queueing at once may pass
      // it by one each.
      SANDGATE_ASSIGN_OR_RETURN(PgResult waiting, tx.Exec(kCountWaiting));
      if (static_cast<uint64_t>(waiting.Int(0, 0)) >= max_waiting)
        return QueueFull(waiting.Int(0, 0), max_waiting);
    }
    // Locks the tenant's row (ON CONFLICT DO UPDATE locks the row it finds, updated or not)
    // until the commit, so the claim below counts against the tenant's latest count and no
    // other claimer takes one of its runs meanwhile.
    SANDGATE_RETURN_IF_ERROR(
        tx.Run("INSERT INTO admission_tenants(tenant, max_running) VALUES($1, $2) "
               "ON CONFLICT(tenant) DO UPDATE SET max_running = excluded.max_running "
               "WHERE admission_tenants.max_running <> excluded.max_running",
               PgParams().Text(run.tenant).Int(run.tenant_limit)));
    SANDGATE_RETURN_IF_ERROR(tx.Run(
        "INSERT INTO admission_queue(run_id, tenant, needs_sandbox, only_replica, "
        "enqueued_by, enqueued_at) VALUES($1, $2, $3, $4, $5, $6) ON CONFLICT(run_id) DO NOTHING",
        PgParams()
            .Text(run.run_id)
            .Text(run.tenant)
            .Int(run.needs_sandbox)
            .Text(run.only_replica)
            .Text(run.enqueued_by)
            .Time(run.enqueued_at)));
    if (room.run_slot) {
      // The row is not committed yet, so no other replica sees it before this claim is made.
      SANDGATE_ASSIGN_OR_RETURN(
          std::optional<QueuedRun> here,
          ClaimNext(tx, run.enqueued_by, room.sandbox, &run.run_id, records_));
      claimed = here.has_value();
    }
    if (queued != nullptr && records_) {
      if (claimed) queued->mutable_run_queued()->set_position(1);
      SANDGATE_RETURN_IF_ERROR(tx.Run(
          "INSERT INTO events(run_id, seq, proto) VALUES($1, $2, $3)",
          PgParams().Text(run.run_id).Int(queued->seq()).Bytes(queued->SerializeAsString())));
      SANDGATE_RETURN_IF_ERROR(
          PgNotify(tx.connection(), kEventsChannel, absl::StrCat(run.run_id, " ", queued->seq())));
      stored = true;
    }
    // A run that waits: a replica with room elsewhere claims it now, not at its next poll.
    return claimed ? absl::OkStatus() : NotifyQueue(tx);
  }));
  if (queued != nullptr && !stored) queued->set_seq(0);
  return claimed;
}

absl::StatusOr<std::optional<QueuedRun>> PostgresAdmissionStore::Claim(const std::string& replica,
                                                                       bool sandbox_room) {
  return db_->Transaction("claim run", [&](PgTx& tx) {
    return ClaimNext(tx, replica, sandbox_room, nullptr, records_);
  });
}

absl::StatusOr<bool> PostgresAdmissionStore::Remove(const std::string& run_id) {
  return db_->Transaction("remove waiting run", [&](PgTx& tx) -> absl::StatusOr<bool> {
    SANDGATE_ASSIGN_OR_RETURN(
        PgResult r, tx.Exec("DELETE FROM admission_queue WHERE run_id = $1 AND claimed_by = ''",
                            PgParams().Text(run_id)));
    if (r.affected() != 1) return false;
    // The runs behind it moved up: their replicas tell them.
    SANDGATE_RETURN_IF_ERROR(NotifyQueue(tx));
    return true;
  });
}

absl::Status PostgresAdmissionStore::Release(const std::string& run_id) {
  return db_->Transaction("release run", [&](PgTx& tx) -> absl::Status {
    SANDGATE_ASSIGN_OR_RETURN(
        PgResult r,
        tx.Exec("WITH d AS (DELETE FROM admission_queue WHERE run_id = $1 AND claimed_by <> '' "
                "RETURNING tenant) UPDATE admission_tenants t SET running = t.running - 1 "
                "FROM d WHERE t.tenant = d.tenant AND t.running > 0",
                PgParams().Text(run_id)));
    // The tenant's slot is free: a run of it waiting on a full replica starts elsewhere now.
    return r.affected() > 0 ? NotifyQueue(tx) : absl::OkStatus();
  });
}

absl::Status PostgresAdmissionStore::ReleaseReplica(const std::string& replica) {
  const PgParams params = PgParams().Text(replica);
  return db_->Transaction("release replica", [&](PgTx& tx) -> absl::Status {
    SANDGATE_RETURN_IF_ERROR(
        tx.Run("WITH d AS (DELETE FROM admission_queue WHERE claimed_by = $1 RETURNING tenant), "
               "n AS (SELECT tenant, count(*) AS c FROM d GROUP BY tenant) "
               "UPDATE admission_tenants t SET running = greatest(0, t.running - n.c) "
               "FROM n WHERE t.tenant = n.tenant",
               params));
    SANDGATE_RETURN_IF_ERROR(
        tx.Run("DELETE FROM admission_queue WHERE claimed_by = '' AND only_replica = $1", params));
    SANDGATE_RETURN_IF_ERROR(tx.Run("DELETE FROM admission_sessions WHERE replica = $1", params));
    return NotifyQueue(tx);
  });
}

absl::StatusOr<WaitingRuns> PostgresAdmissionStore::Waiting() {
  // One snapshot for the runs and the cursor.
  return db_->Transaction("list waiting runs", [&](PgTx& tx) -> absl::StatusOr<WaitingRuns> {
    SANDGATE_ASSIGN_OR_RETURN(
        PgResult r, tx.Exec(absl::StrCat(kQueuedRun, "q.claimed_by = '' ORDER BY q.seq")));
    WaitingRuns out;
    for (int i = 0; i < r.rows(); ++i) out.runs.push_back(Queued(r, i));
    SANDGATE_ASSIGN_OR_RETURN(PgResult cursor, tx.Exec(kLastClaimed));
    if (cursor.rows() > 0) out.last_tenant = cursor.Text(0, 0);
    return out;
  });
}

absl::StatusOr<std::optional<QueuedRun>> PostgresAdmissionStore::Find(const std::string& run_id) {
  SANDGATE_ASSIGN_OR_RETURN(PgResult r,
                            db_->Exec("find queued run", absl::StrCat(kQueuedRun, "q.run_id = $1"),
                                      PgParams().Text(run_id)));
  if (r.rows() == 0) return std::nullopt;
  return Queued(r, 0);
}

absl::StatusOr<uint64_t> PostgresAdmissionStore::WaitingCount() {
  SANDGATE_ASSIGN_OR_RETURN(PgResult r, db_->Exec("count waiting runs", kCountWaiting));
  return static_cast<uint64_t>(r.Int(0, 0));
}

absl::StatusOr<std::optional<absl::Time>> PostgresAdmissionStore::CountStart(
    const std::string& tenant, uint32_t limit, absl::Time now) {
  using RetryAt = std::optional<absl::Time>;
  return db_->Transaction("count run start", [&](PgTx& tx) -> absl::StatusOr<RetryAt> {
    SANDGATE_RETURN_IF_ERROR(LockTenant(tx, tenant));
    SANDGATE_RETURN_IF_ERROR(tx.Run("DELETE FROM admission_starts WHERE tenant = $1 AND at <= $2",
                                    PgParams().Text(tenant).Time(now - absl::Minutes(1))));
    SANDGATE_ASSIGN_OR_RETURN(
        PgResult window,
        tx.Exec("SELECT count(*), coalesce(min(at), 0) FROM admission_starts WHERE tenant = $1",
                PgParams().Text(tenant)));
    if (window.Int(0, 0) >= limit) return window.Time(0, 1) + absl::Minutes(1);
    SANDGATE_RETURN_IF_ERROR(tx.Run("INSERT INTO admission_starts(tenant, at) VALUES($1, $2)",
                                    PgParams().Text(tenant).Time(now)));
    return std::nullopt;
  });
}

absl::StatusOr<bool> PostgresAdmissionStore::TakeSessionSlot(const std::string& tenant,
                                                             const std::string& session_id,
                                                             const std::string& replica,
                                                             uint32_t limit) {
  return db_->Transaction("take session slot", [&](PgTx& tx) -> absl::StatusOr<bool> {
    if (limit > 0) {
      SANDGATE_RETURN_IF_ERROR(LockTenant(tx, tenant));
      SANDGATE_ASSIGN_OR_RETURN(PgResult live,
                                tx.Exec("SELECT count(*) FROM admission_sessions WHERE tenant = $1",
                                        PgParams().Text(tenant)));
      if (live.Int(0, 0) >= limit) return false;
    }
    SANDGATE_RETURN_IF_ERROR(
        tx.Run("INSERT INTO admission_sessions(session_id, tenant, replica) VALUES($1, $2, $3) "
               "ON CONFLICT(session_id) DO NOTHING",
               PgParams().Text(session_id).Text(tenant).Text(replica)));
    return true;
  });
}

absl::Status PostgresAdmissionStore::ReleaseSessionSlot(const std::string& session_id) {
  return db_->Run("release session slot", "DELETE FROM admission_sessions WHERE session_id = $1",
                  PgParams().Text(session_id));
}

}  // namespace sandgate::store
