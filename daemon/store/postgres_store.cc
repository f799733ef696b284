#include "store/postgres_store.h"

#include <limits>
#include <utility>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "common/errors.h"
#include "common/status_macros.h"
#include "store/notifier.h"
#include "store/postgres_schema.h"
#include "store/replica_store.h"

namespace sandgate::store {
namespace {

// A multi-row INSERT of this many events is one statement (3 parameters each, far below
// the protocol's 65535); a larger batch is several inside one transaction.
constexpr size_t kEventsPerStatement = 1000;
// bytea's own ceiling.
constexpr size_t kMaxRowBytes = (1u << 30) - 1;

template <typename Message>
absl::StatusOr<Message> Parse(absl::string_view bytes, absl::string_view what) {
  Message m;
  if (!m.ParseFromArray(bytes.data(), static_cast<int>(bytes.size()))) {
    return errors::Internal(absl::StrCat("corrupt ", what, " row"));
  }
  return m;
}

// Every row's column `col` parsed as a Message, in order.
template <typename Message>
absl::StatusOr<std::vector<Message>> Collect(const PgResult& r, int col, absl::string_view what) {
  std::vector<Message> out;
  out.reserve(r.rows());
  for (int i = 0; i < r.rows(); ++i) {
    SANDGATE_ASSIGN_OR_RETURN(Message m, Parse<Message>(r.Bytes(i, col), what));
    out.push_back(std::move(m));
  }
  return out;
}

int64_t UnixNanos(bool has, const google::protobuf::Timestamp& t) {
  return has ? t.seconds() * 1000000000LL + t.nanos() : 0;
}

// The SQL of one multi-row event insert of n rows.
const std::string& InsertEventsSql(size_t n) {
  static const std::vector<std::string>* const kSql = [] {
    auto* all = new std::vector<std::string>(kEventsPerStatement + 1);
    std::string values;
    for (size_t i = 1; i <= kEventsPerStatement; ++i) {
      absl::StrAppend(&values, i > 1 ? "," : "", "($", 3 * i - 2, ",$", 3 * i - 1, ",$", 3 * i,
                      ")");
      // With the rows, in the same transaction, one notification per run: "<run> <last seq>",
      // which wakes that run's followers on the other replicas (store/notifier.h) at commit.
      (*all)[i] = absl::StrCat("WITH ins AS (INSERT INTO events(run_id, seq, proto) VALUES ",
                               values, " RETURNING run_id, seq) SELECT pg_notify('", kEventsChannel,
                               "', run_id || ' ' || max(seq)) FROM ins GROUP BY run_id");
    }
    return all;
  }();
  return (*kSql)[n];
}

// Component "ownership" of the schema: the owner of a run or session (Run.replica,
// Session.replica) as a column beside the store's, so "the unfinished runs of replica A" is
// an index lookup and a fenced write checks the owner in its own statement (FenceWrites).
// Rows from before get '' (listed as anyone's; see Store::ListUnfinishedRunsOf), filled at
// their next write. A component of its own so its versions never clash with the store's.
constexpr const char* kOwnershipSteps[] = {
    // 1
    R"sql(
ALTER TABLE runs ADD COLUMN replica TEXT NOT NULL DEFAULT '';
ALTER TABLE sessions ADD COLUMN replica TEXT NOT NULL DEFAULT '';
CREATE INDEX runs_replica_unfinished ON runs(replica, n) WHERE status IN (1, 2);
CREATE INDEX sessions_replica_live ON sessions(replica, n) WHERE status = 1;
)sql",
};

// The writer's lease row, locked against a concurrent takeover until the write commits: a
// claim (an UPDATE of that row) waits for the write, or the write sees the claim.
constexpr const char* kFenceCte =
    "WITH fence AS (SELECT 1 FROM replica_leases WHERE id = $1 AND epoch = $2 "
    "AND taken_over_by = '' FOR SHARE) ";

// `<table>_owner`: the records of the ids in text[] parameter $`ids`, each locked until the
// commit (MATERIALIZED: no filter of the caller's is pushed below the lock), each with whether
// the writer ($1) may write its log.
std::string OwnersCte(const char* table, size_t ids) {
  return absl::StrCat(
      table,
      "_owner AS MATERIALIZED (SELECT (o.replica IN ($1, '') OR EXISTS(SELECT 1 FROM "
      "replica_leases l WHERE l.id = o.replica AND l.taken_over_by = $1)) AS mine "
      "FROM ",
      table, " o WHERE o.id = ANY($", ids, "::text[]) FOR SHARE OF o)");
}

// `ids` as a text[] literal ({"a","b"}), for one statement over all of them.
std::string TextArray(const std::vector<std::string>& ids) {
  std::string out = "{";
  for (const std::string& id : ids) {
    if (out.size() > 1) out += ',';
    out += '"';
    for (char c : id) {
      if (c == '"' || c == '\\') out += '\\';
      out += c;
    }
    out += '"';
  }
  return out + "}";
}

}  // namespace

absl::StatusOr<std::unique_ptr<PostgresStore>> PostgresStore::Open(const PostgresOptions& options) {
  SANDGATE_ASSIGN_OR_RETURN(std::unique_ptr<PostgresDatabase> db, PostgresDatabase::Open(options));
  SANDGATE_RETURN_IF_ERROR(MigrateSchema(*db, kStoreComponent, StoreMigrations()));
  SANDGATE_RETURN_IF_ERROR(MigrateSchema(*db, "ownership", kOwnershipSteps));
  return std::unique_ptr<PostgresStore>(new PostgresStore(std::move(db)));
}

absl::Status PostgresStore::PutRecord(PgConnection& conn, const char* table, const char* kind,
                                      const std::string& id, const std::string& tenant,
                                      const std::string& key, const std::string& replica,
                                      int64_t status, int64_t ended_ns, std::string proto,
                                      const std::string* request_sha256) {
  // A fenced write (FenceWrites) is written only while the writer's lease is current at its
  // epoch (kFenceCte), and an update only over a row the writer owns, one without an owner, or
  // one of a replica the writer has taken over. A new record (request_sha256 set) is fenced
  // too: one made by a replica already taken over would be nobody's to settle.
  const Fence fence = fence_now();
  const bool fenced = !fence.replica.empty();
  const std::string sql = absl::StrCat(
      fenced ? kFenceCte : "", "INSERT INTO ", table,
      "(id, tenant, idempotency_key, status, ended_ns, proto, request_sha256, replica) ",
      fenced ? "SELECT $3::text, $4::text, $5::text, $6::integer, NULLIF($7::bigint, 0), "
               "$8::bytea, $9::text, $10::text FROM fence"
             : "VALUES($1, $2, $3, $4, NULLIF($5::bigint, 0), $6, $7, $8)",
      request_sha256 ? ""
                     : " ON CONFLICT(id) DO UPDATE SET status = excluded.status, "
                       "ended_ns = excluded.ended_ns, proto = excluded.proto, "
                       "replica = excluded.replica",
      fenced && request_sha256 == nullptr
          ? absl::StrCat(" WHERE ", table, ".replica IN ($1, '')",
                         // A waiting run is the next claimer's (store/admission_store.h: a
                         // claim is exclusive), whichever replica queued it.
                         std::string(table) == "runs"
                             ? absl::StrCat(" OR runs.status = ", v1::RUN_STATUS_QUEUED)
                             : "",
                         " OR EXISTS(SELECT 1 FROM replica_leases l WHERE l.id = ", table,
                         ".replica AND l.taken_over_by = $1)")
          : "");
  PgParams p;
  if (fenced) p.Text(fence.replica).Int(fence.epoch);
  p.Text(id).Text(tenant).Text(key).Int(status).Int(ended_ns).Bytes(std::move(proto));
  p.Text(request_sha256 ? *request_sha256 : std::string()).Text(replica);
  absl::StatusOr<PgResult> r = conn.Exec(absl::StrCat("put ", kind), sql, p);
  if (r.status().code() == absl::StatusCode::kAlreadyExists) {
    return errors::AlreadyExists(absl::StrCat(kind, " idempotency key"), key);
  }
  if (!r.ok()) return r.status();
  if (fenced && r->affected() == 0) {
    return Fenced(conn, fence, table, absl::StrCat(kind, " ", id), id);
  }
  return absl::OkStatus();
}

absl::Status PostgresStore::Fenced(PgConnection& conn, const Fence& fence, const char* table,
                                   const std::string& record, const std::string& id) {
  std::string owner;
  // An event's log is a run's or a kept session's.
  const std::string sql = table != nullptr
                              ? absl::StrCat("SELECT replica FROM ", table, " WHERE id = $1")
                              : "SELECT replica FROM runs WHERE id = $1 UNION ALL "
                                "SELECT replica FROM sessions WHERE id = $1";
  SANDGATE_ASSIGN_OR_RETURN(PgResult o, conn.Exec("read the owner", sql, PgParams().Text(id)));
  if (o.rows() >= 1) owner = o.Text(0, 0);
  SANDGATE_ASSIGN_OR_RETURN(PgResult l,
                            conn.Exec("read the writer's lease",
                                      "SELECT epoch, taken_over_by, claimed_at FROM replica_leases "
                                      "WHERE id = $1",
                                      PgParams().Text(fence.replica)));
  Lease lease;
  if (l.rows() == 1) {
    lease.epoch = l.Int(0, 0);
    lease.taken_over_by = l.Text(0, 1);
    lease.claimed_at = absl::FromUnixNanos(l.Int(0, 2));
  }
  return FencedWrite(record, fence.replica, fence.epoch, l.rows() == 1 ? &lease : nullptr, owner);
}

void PostgresStore::FenceWrites(const std::string& replica, int64_t epoch) {
  absl::MutexLock lock(&fence_mu_);
  fence_ = {replica, epoch};
}

PostgresStore::Fence PostgresStore::fence_now() {
  absl::MutexLock lock(&fence_mu_);
  return fence_;
}

absl::StatusOr<std::optional<KeyedRecord>> PostgresStore::FindByKey(const char* table,
                                                                    const std::string& tenant,
                                                                    const std::string& key) {
  const std::string sql = absl::StrCat("SELECT id, request_sha256 FROM ", table,
                                       " WHERE tenant = $1 AND idempotency_key = $2");
  SANDGATE_ASSIGN_OR_RETURN(PgResult r,
                            db_->Exec("find by key", sql, PgParams().Text(tenant).Text(key)));
  if (r.rows() == 0) return std::optional<KeyedRecord>();
  return std::optional<KeyedRecord>(KeyedRecord{r.Text(0, 0), r.Text(0, 1)});
}

absl::Status PostgresStore::CreateRun(const v1::Run& run, const std::string& request_sha256) {
  SANDGATE_ASSIGN_OR_RETURN(PgLease conn, db_->Acquire("create run"));
  return PutRecord(*conn, "runs", "run", run.id(), run.tenant(), run.idempotency_key(),
                   run.replica(), run.status(), UnixNanos(run.has_finished_at(), run.finished_at()),
                   run.SerializeAsString(), &request_sha256);
}

absl::Status PostgresStore::PutRun(const v1::Run& run) {
  SANDGATE_ASSIGN_OR_RETURN(PgLease conn, db_->Acquire("put run"));
  return PutRunOn(*conn, run);
}

absl::Status PostgresStore::PutRunOn(PgConnection& conn, const v1::Run& run) {
  SANDGATE_RETURN_IF_ERROR(PutRecord(conn, "runs", "run", run.id(), run.tenant(),
                                     run.idempotency_key(), run.replica(), run.status(),
                                     UnixNanos(run.has_finished_at(), run.finished_at()),
                                     run.SerializeAsString(), nullptr));
  if (run.status() == v1::RUN_STATUS_QUEUED) return absl::OkStatus();
  return conn.Run("delete run request", "DELETE FROM run_requests WHERE run_id = $1",
                  PgParams().Text(run.id()));
}

absl::StatusOr<v1::Run> PostgresStore::GetRun(const std::string& run_id) {
  SANDGATE_ASSIGN_OR_RETURN(PgResult r, db_->Exec("get run", "SELECT proto FROM runs WHERE id = $1",
                                                  PgParams().Text(run_id)));
  if (r.rows() == 0) return errors::NotFound("run", run_id);
  return Parse<v1::Run>(r.Bytes(0, 0), "run");
}

absl::Status PostgresStore::PutRunRequest(const std::string& run_id,
                                          const v1::RunAnalysisRequest& request) {
  const size_t size = request.ByteSizeLong();
  if (size > kMaxRowBytes) {
    return errors::InvalidArgument(
        absl::StrCat("run request: ", size, " bytes is too large to keep"));
  }
  return db_->Run("put run request",
                  "INSERT INTO run_requests(run_id, proto) VALUES($1, $2) "
                  "ON CONFLICT(run_id) DO UPDATE SET proto = excluded.proto",
                  PgParams().Text(run_id).Bytes(request.SerializeAsString()));
}

absl::StatusOr<v1::RunAnalysisRequest> PostgresStore::GetRunRequest(const std::string& run_id) {
  SANDGATE_ASSIGN_OR_RETURN(
      PgResult r, db_->Exec("get run request", "SELECT proto FROM run_requests WHERE run_id = $1",
                            PgParams().Text(run_id)));
  if (r.rows() == 0) return errors::NotFound("request of run", run_id);
  return Parse<v1::RunAnalysisRequest>(r.Bytes(0, 0), "run request");
}

absl::StatusOr<RunPage> PostgresStore::ListRuns(const std::string& tenant, uint32_t page_size,
                                                const std::string& page_token) {
  int64_t before = std::numeric_limits<int64_t>::max();
  if (!page_token.empty() && (!absl::SimpleAtoi(page_token, &before) || before <= 0)) {
    return errors::InvalidArgument(
        absl::StrCat("page_token: not a token from ListRuns: '", page_token, "'"));
  }
  SANDGATE_ASSIGN_OR_RETURN(
      PgResult r, db_->Exec("list runs",
                            "SELECT n, proto FROM runs WHERE ($1 = '' OR tenant = $1) AND n < $2 "
                            "ORDER BY n DESC LIMIT $3",
                            PgParams().Text(tenant).Int(before).Int(int64_t{page_size} + 1)));
  RunPage page;
  for (int i = 0; i < r.rows(); ++i) {
    if (page.runs.size() == page_size) {
      page.next_page_token = absl::StrCat(r.Int(i - 1, 0));
      break;
    }
    SANDGATE_ASSIGN_OR_RETURN(v1::Run run, Parse<v1::Run>(r.Bytes(i, 1), "run"));
    page.runs.push_back(std::move(run));
  }
  return page;
}

absl::StatusOr<std::optional<KeyedRecord>> PostgresStore::FindRunByIdempotencyKey(
    const std::string& tenant, const std::string& key) {
  return FindByKey("runs", tenant, key);
}

// The literal statuses in these, as in the partial indexes' WHERE, so the planner may use them.
absl::StatusOr<std::vector<v1::Run>> PostgresStore::ListUnfinishedRunsOf(
    const std::string& replica) {
  return ListOwned<v1::Run>(
      "list unfinished runs of a replica",
      "SELECT proto FROM runs WHERE status IN (1, 2) AND replica IN ($1, '') ORDER BY n", replica,
      "run");
}

absl::StatusOr<std::vector<v1::Session>> PostgresStore::ListLiveSessionsOf(
    const std::string& replica) {
  return ListOwned<v1::Session>(
      "list live sessions of a replica",
      "SELECT proto FROM sessions WHERE status = 1 AND replica IN ($1, '') ORDER BY n", replica,
      "session");
}

template <typename Message>
absl::StatusOr<std::vector<Message>> PostgresStore::ListOwned(const char* what, const char* sql,
                                                              const std::string& replica,
                                                              const char* kind) {
  SANDGATE_ASSIGN_OR_RETURN(PgResult r, db_->Exec(what, sql, PgParams().Text(replica)));
  return Collect<Message>(r, 0, kind);
}

absl::StatusOr<std::vector<v1::Run>> PostgresStore::ListUnfinishedRuns() {
  SANDGATE_ASSIGN_OR_RETURN(
      PgResult r, db_->Exec("list unfinished runs",
                            "SELECT proto FROM runs WHERE status IN ($1, $2) ORDER BY n",
                            PgParams().Int(v1::RUN_STATUS_QUEUED).Int(v1::RUN_STATUS_RUNNING)));
  return Collect<v1::Run>(r, 0, "run");
}

absl::Status PostgresStore::CreateSession(const v1::Session& session,
                                          const std::string& request_sha256) {
  SANDGATE_ASSIGN_OR_RETURN(PgLease conn, db_->Acquire("create session"));
  return PutRecord(*conn, "sessions", "session", session.id(), session.tenant(),
                   session.idempotency_key(), session.replica(), session.status(),
                   UnixNanos(session.has_closed_at(), session.closed_at()),
                   session.SerializeAsString(), &request_sha256);
}

absl::Status PostgresStore::PutSession(const v1::Session& session) {
  SANDGATE_ASSIGN_OR_RETURN(PgLease conn, db_->Acquire("put session"));
  return PutSessionOn(*conn, session);
}

absl::Status PostgresStore::PutSessionOn(PgConnection& conn, const v1::Session& session) {
  return PutRecord(conn, "sessions", "session", session.id(), session.tenant(),
                   session.idempotency_key(), session.replica(), session.status(),
                   UnixNanos(session.has_closed_at(), session.closed_at()),
                   session.SerializeAsString(), nullptr);
}

absl::StatusOr<v1::Session> PostgresStore::GetSession(const std::string& session_id) {
  SANDGATE_ASSIGN_OR_RETURN(PgResult r,
                            db_->Exec("get session", "SELECT proto FROM sessions WHERE id = $1",
                                      PgParams().Text(session_id)));
  if (r.rows() == 0) return errors::NotFound("session", session_id);
  return Parse<v1::Session>(r.Bytes(0, 0), "session");
}

absl::StatusOr<std::vector<v1::Session>> PostgresStore::ListSessions(const std::string& tenant,
                                                                     bool include_closed) {
  SANDGATE_ASSIGN_OR_RETURN(PgResult r,
                            db_->Exec("list sessions",
                                      "SELECT proto FROM sessions WHERE ($1 = '' OR tenant = $1) "
                                      "AND ($2::boolean OR status = $3) ORDER BY n DESC LIMIT 1000",
                                      PgParams()
                                          .Text(tenant)
                                          .Text(include_closed ? "true" : "false")
                                          .Int(v1::SESSION_STATUS_ACTIVE)));
  return Collect<v1::Session>(r, 0, "session");
}

absl::StatusOr<std::optional<KeyedRecord>> PostgresStore::FindSessionByIdempotencyKey(
    const std::string& tenant, const std::string& key) {
  return FindByKey("sessions", tenant, key);
}

absl::StatusOr<std::vector<std::string>> PostgresStore::PurgeBefore(absl::Time cutoff) {
  const int64_t cutoff_ns = absl::ToUnixNanos(cutoff);
  std::vector<std::string> runs;
  SANDGATE_ASSIGN_OR_RETURN(PgLease conn, db_->Acquire("purge"));
  // Each table's rows go with their events in one statement (the CTEs all run); both in
  // one transaction, so a run is never left without its log or the other way round.
  SANDGATE_RETURN_IF_ERROR(conn->Transaction("purge", [&]() -> absl::Status {
    SANDGATE_ASSIGN_OR_RETURN(
        PgResult gone,
        conn->Exec(
            "purge runs",
            "WITH gone AS (DELETE FROM runs WHERE status NOT IN ($1, $2) AND ended_ns < $3 "
            "RETURNING id), "
            "e AS (DELETE FROM events WHERE run_id IN (SELECT id FROM gone)), "
            "q AS (DELETE FROM run_requests WHERE run_id IN (SELECT id FROM gone)) "
            "SELECT id FROM gone",
            PgParams().Int(v1::RUN_STATUS_QUEUED).Int(v1::RUN_STATUS_RUNNING).Int(cutoff_ns)));
    for (int i = 0; i < gone.rows(); ++i) runs.push_back(gone.Text(i, 0));
    return conn->Run("purge sessions",
                     "WITH gone AS (DELETE FROM sessions WHERE status <> $1 AND ended_ns < $2 "
                     "RETURNING id) "
                     "DELETE FROM events WHERE run_id IN (SELECT id FROM gone)",
                     PgParams().Int(v1::SESSION_STATUS_ACTIVE).Int(cutoff_ns));
  }));
  return runs;
}

absl::Status PostgresStore::InsertEvents(PgConnection& conn, const v1::Event* events, size_t n) {
  const Fence fence = fence_now();
  if (!fence.replica.empty()) return InsertFencedEvents(conn, fence, events, n);
  PgParams p;
  for (size_t i = 0; i < n; ++i) {
    p.Text(events[i].run_id()).Int(events[i].seq()).Bytes(events[i].SerializeAsString());
  }
  return conn.Run("append events", InsertEventsSql(n), p);
}

absl::Status PostgresStore::InsertFencedEvents(PgConnection& conn, const Fence& fence,
                                               const v1::Event* events, size_t n) {
  // Written only while the writer's lease is current at its epoch (kFenceCte), and only to
  // logs whose record (run or session) is the writer's, has no owner, or is of a replica the
  // writer took over: all n rows or none. The records are locked (FOR SHARE) until the
  // commit, so a claim that makes a waiting run another replica's (AdmissionStore::Claim
  // updates its row) waits for this append, or this append sees the claim and is refused:
  // the claimer's first seq, read after its claim, follows every event the queuer stored.
  // With the rows, as the unfenced insert does, one notification per run (InsertEventsSql).
  const size_t ids = 3 * n + 3;
  std::string sql = absl::StrCat(
      kFenceCte, ", ", OwnersCte("runs", ids), ", ", OwnersCte("sessions", ids),
      ", ins AS (INSERT INTO events(run_id, seq, proto) SELECT v.run_id, v.seq, v.proto FROM "
      "fence, (VALUES ");
  PgParams p;
  p.Text(fence.replica).Int(fence.epoch);
  std::vector<std::string> run_ids;
  for (size_t i = 0; i < n; ++i) {
    const size_t k = 3 * i + 3;
    absl::StrAppend(&sql, i > 0 ? "," : "", "($", k, "::text,$", k + 1, "::bigint,$", k + 2,
                    "::bytea)");
    p.Text(events[i].run_id()).Int(events[i].seq()).Bytes(events[i].SerializeAsString());
    run_ids.push_back(events[i].run_id());
  }
  p.Text(TextArray(run_ids));
  absl::StrAppend(&sql,
                  ") AS v(run_id, seq, proto) WHERE NOT EXISTS(SELECT 1 FROM runs_owner "
                  "WHERE NOT mine) AND NOT EXISTS(SELECT 1 FROM sessions_owner WHERE NOT mine) "
                  "RETURNING run_id, seq), notified AS (SELECT pg_notify('",
                  kEventsChannel,
                  "', run_id || ' ' || max(seq)) FROM ins GROUP BY run_id) "
                  "SELECT (SELECT count(*) FROM ins), (SELECT count(*) FROM notified)");
  SANDGATE_ASSIGN_OR_RETURN(PgResult r, conn.Exec("append events", sql, p));
  if (r.rows() == 1 && r.Int(0, 0) == static_cast<int64_t>(n)) return absl::OkStatus();
  return Fenced(conn, fence, nullptr, absl::StrCat("the log of ", events[0].run_id()),
                events[0].run_id());
}

absl::Status PostgresStore::AppendEvent(const v1::Event& event) {
  SANDGATE_ASSIGN_OR_RETURN(PgLease conn, db_->Acquire("append event"));
  return InsertEvents(*conn, &event, 1);
}

absl::Status PostgresStore::AppendEventsWithRuns(const std::vector<v1::Event>& events,
                                                 const std::vector<v1::Run>& runs) {
  return AppendEventsWithRecords(events, runs, {});
}

absl::Status PostgresStore::AppendEventsWithRecords(const std::vector<v1::Event>& events,
                                                    const std::vector<v1::Run>& runs,
                                                    const std::vector<v1::Session>& sessions) {
  return SettleTakeover(events, runs, sessions, "", "");
}

absl::Status PostgresStore::SettleTakeover(const std::vector<v1::Event>& events,
                                           const std::vector<v1::Run>& runs,
                                           const std::vector<v1::Session>& sessions,
                                           const std::string& lost, const std::string& by) {
  if (events.empty() && runs.empty() && sessions.empty() && lost.empty()) return absl::OkStatus();
  SANDGATE_ASSIGN_OR_RETURN(PgLease conn, db_->Acquire("append events"));
  // One statement is its own transaction: a burst costs one round trip and one commit.
  if (runs.empty() && sessions.empty() && lost.empty() && events.size() <= kEventsPerStatement) {
    return InsertEvents(*conn, events.data(), events.size());
  }
  // A fenced record's check locks the writer's lease row (kFenceCte) until the commit, as
  // the events' does: a takeover commits wholly before the batch or after it.
  return conn->Transaction("append events", [&]() -> absl::Status {
    for (const v1::Run& run : runs) SANDGATE_RETURN_IF_ERROR(PutRunOn(*conn, run));
    for (const v1::Session& s : sessions) SANDGATE_RETURN_IF_ERROR(PutSessionOn(*conn, s));
    for (size_t i = 0; i < events.size(); i += kEventsPerStatement) {
      SANDGATE_RETURN_IF_ERROR(
          InsertEvents(*conn, &events[i], std::min(kEventsPerStatement, events.size() - i)));
    }
    if (lost.empty()) return absl::OkStatus();
    // Last: the final records' trigger has freed their runs' slots; the lease's frees the rest.
    SANDGATE_ASSIGN_OR_RETURN(PgResult r,
                              conn->Exec("finish takeover",
                                         "UPDATE replica_leases SET cleaned = 1 WHERE id = $1 AND "
                                         "taken_over_by = $2 AND cleaned = 0",
                                         PgParams().Text(lost).Text(by)));
    return r.affected() == 1 ? absl::OkStatus() : ClaimLost(lost, by);
  });
}

absl::StatusOr<std::vector<v1::Event>> PostgresStore::ReadEvents(const std::string& run_id,
                                                                 int64_t after_seq,
                                                                 uint32_t limit) {
  SANDGATE_ASSIGN_OR_RETURN(
      PgResult r,
      db_->Exec("read events",
                "SELECT proto FROM events WHERE run_id = $1 AND seq > $2 ORDER BY seq LIMIT $3",
                PgParams().Text(run_id).Int(after_seq).Int(limit)));
  return Collect<v1::Event>(r, 0, "event");
}

absl::StatusOr<int64_t> PostgresStore::LastSeq(const std::string& run_id) {
  SANDGATE_ASSIGN_OR_RETURN(
      PgResult r,
      db_->Exec("last seq", "SELECT COALESCE(MAX(seq), 0) FROM events WHERE run_id = $1",
                PgParams().Text(run_id)));
  return r.Int(0, 0);
}

absl::Status PostgresStore::Record(const JournalEntry& entry) {
  // A durable record must be on disk before the resource it names exists: this statement's
  // own transaction waits for its flush (set_config(…, true) is SET LOCAL, read at the
  // commit that ends the statement), in one round trip.
  return db_->Run("journal record",
                  "WITH s AS (SELECT set_config('synchronous_commit', $5, true)) "
                  "INSERT INTO journal(id, provider, kind, details) "
                  "SELECT $1::text, $2::text, $3::text, $4::text FROM s "
                  "ON CONFLICT(id) DO UPDATE SET details = excluded.details",
                  PgParams()
                      .Text(entry.id)
                      .Text(entry.provider)
                      .Text(entry.kind)
                      .Text(entry.details.dump())
                      .Text(entry.durable ? "on" : "off"));
}

absl::Status PostgresStore::Erase(const std::string& id) {
  return db_->Run("journal erase", "DELETE FROM journal WHERE id = $1", PgParams().Text(id));
}

absl::StatusOr<std::vector<JournalEntry>> PostgresStore::List() {
  SANDGATE_ASSIGN_OR_RETURN(
      PgResult r,
      db_->Exec("journal list", "SELECT id, provider, kind, details FROM journal ORDER BY id"));
  std::vector<JournalEntry> entries;
  for (int i = 0; i < r.rows(); ++i) {
    JournalEntry e{r.Text(i, 0), r.Text(i, 1), r.Text(i, 2)};
    e.details = nlohmann::json::parse(r.Bytes(i, 3), nullptr, /*allow_exceptions=*/false);
    if (e.details.is_discarded())
      return errors::Internal(absl::StrCat("corrupt journal row ", e.id));
    entries.push_back(std::move(e));
  }
  return entries;
}

}  // namespace sandgate::store
