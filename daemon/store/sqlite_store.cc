#include "store/sqlite_store.h"

#include <sqlite3.h>

#include <limits>
#include <utility>

#include "absl/cleanup/cleanup.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "common/errors.h"
#include "common/status_macros.h"
#include "google/protobuf/io/zero_copy_stream_impl_lite.h"
#include "store/replica_store.h"
#include "store/sqlite_file.h"
#include "store/sqlite_stmt.h"

namespace sandgate::store {
namespace {

// Version 0, as the first releases made it; Migrate() brings it to
// kSchemaVersion.
constexpr const char* kSchema = R"sql(
CREATE TABLE IF NOT EXISTS runs (
  n INTEGER PRIMARY KEY AUTOINCREMENT,
  id TEXT NOT NULL UNIQUE,
  tenant TEXT NOT NULL,
  idempotency_key TEXT NOT NULL,
  status INTEGER NOT NULL,
  proto BLOB NOT NULL);
CREATE UNIQUE INDEX IF NOT EXISTS runs_idempotency ON runs(tenant, idempotency_key)
  WHERE idempotency_key != '';
CREATE INDEX IF NOT EXISTS runs_tenant ON runs(tenant, n);
CREATE TABLE IF NOT EXISTS sessions (
  n INTEGER PRIMARY KEY AUTOINCREMENT,
  id TEXT NOT NULL UNIQUE,
  tenant TEXT NOT NULL,
  idempotency_key TEXT NOT NULL,
  status INTEGER NOT NULL,
  proto BLOB NOT NULL);
CREATE UNIQUE INDEX IF NOT EXISTS sessions_idempotency ON sessions(tenant, idempotency_key)
  WHERE idempotency_key != '';
CREATE TABLE IF NOT EXISTS events (
  run_id TEXT NOT NULL,
  seq INTEGER NOT NULL,
  proto BLOB NOT NULL,
  PRIMARY KEY (run_id, seq)) WITHOUT ROWID;
CREATE TABLE IF NOT EXISTS run_requests (
  run_id TEXT PRIMARY KEY,
  proto BLOB NOT NULL);
CREATE TABLE IF NOT EXISTS journal (
  id TEXT PRIMARY KEY,
  provider TEXT NOT NULL,
  kind TEXT NOT NULL,
  details TEXT NOT NULL);
)sql";

// Each step takes the database from version i to i + 1 (PRAGMA user_version).
constexpr const char* kMigrations[] = {
    // 1: the fingerprint of the request that made a run or session, so a
    // different request
    // under the same idempotency key is refused. Rows from version 0 get ''
    // (see KeyedRecord).
    "ALTER TABLE runs ADD COLUMN request_sha256 TEXT NOT NULL DEFAULT '';"
    "ALTER TABLE sessions ADD COLUMN request_sha256 TEXT NOT NULL DEFAULT '';",
    // The owner of a run or session (Run.replica, Session.replica) as a column, so "the
    // unfinished runs of replica A" is an index lookup and a fenced write checks the owner in
    // its own statement (FenceWrites). Rows from before get '' (listed as anyone's; see
    // Store::ListUnfinishedRunsOf), filled at their next write.
    "ALTER TABLE runs ADD COLUMN replica TEXT NOT NULL DEFAULT '';"
    "ALTER TABLE sessions ADD COLUMN replica TEXT NOT NULL DEFAULT '';"
    "CREATE INDEX runs_replica_unfinished ON runs(replica, n) WHERE status IN (1, 2);"
    "CREATE INDEX sessions_replica_live ON sessions(replica, n) WHERE status = 1;",
};
constexpr int64_t kSchemaVersion = sizeof(kMigrations) / sizeof(kMigrations[0]);

// Writes a serialized message into an open SQLite blob, in order, from the start.
class BlobOutput final : public google::protobuf::io::CopyingOutputStream {
 public:
  explicit BlobOutput(sqlite3_blob* blob) : blob_(blob) {}
  bool Write(const void* buffer, int size) override {
    if (sqlite3_blob_write(blob_, buffer, size, offset_) != SQLITE_OK) return false;
    offset_ += size;
    return true;
  }

 private:
  sqlite3_blob* const blob_;
  int offset_ = 0;
};

}  // namespace

absl::StatusOr<std::unique_ptr<SqliteStore>> SqliteStore::Open(const std::string& path) {
  SANDGATE_ASSIGN_OR_RETURN(sqlite3 * db, OpenSqliteFile(path, "state database"));
  std::unique_ptr<SqliteStore> store(new SqliteStore(db));
  absl::MutexLock lock(&store->mu_);
  // Runs and events survive a killed daemon with NORMAL in WAL mode (only a power loss can
  // drop the newest commits); journal records are written with FULL, see Record.
  SANDGATE_RETURN_IF_ERROR(store->Exec("PRAGMA synchronous=NORMAL"));
  SANDGATE_RETURN_IF_ERROR(store->Exec(kSchema));
  SANDGATE_RETURN_IF_ERROR(store->Migrate());
  return store;
}

absl::Status SqliteStore::Migrate() {
  // The version is read inside the write transaction: an instance that read it before
  // another's migration committed would run the same steps again (duplicate columns).
  SANDGATE_RETURN_IF_ERROR(Exec("BEGIN IMMEDIATE"));
  int64_t version;
  {
    Stmt s(db_, "PRAGMA user_version");
    if (!s.ok() || s.Step() != SQLITE_ROW) {
      absl::Status st = Error("read schema version");
      (void)Exec("ROLLBACK");
      return st;
    }
    version = s.Int(0);
  }
  if (version >= kSchemaVersion) {
    SANDGATE_RETURN_IF_ERROR(Exec("COMMIT"));
    if (version == kSchemaVersion) return absl::OkStatus();
    return errors::FailedPrecondition(absl::StrCat("state database has schema version ", version,
                                                   ", newer than this daemon's ", kSchemaVersion,
                                                   "; run the newer sandgated"));
  }
  for (int64_t v = version; v < kSchemaVersion; ++v) {
    absl::Status st = Exec(kMigrations[v]);
    if (!st.ok()) {
      (void)Exec("ROLLBACK");  // the migration's error is the one to report
      return errors::Internal(
          absl::StrCat("migrating the state database to version ", v + 1, ": ", st.message()));
    }
  }
  const std::string set_version = absl::StrCat("PRAGMA user_version = ", kSchemaVersion);
  SANDGATE_RETURN_IF_ERROR(Exec(set_version.c_str()));
  return Exec("COMMIT");
}

SqliteStore::~SqliteStore() {
  absl::MutexLock lock(&mu_);
  for (auto& [sql, stmt] : cached_) sqlite3_finalize(stmt);
  sqlite3_close(db_);
}

sqlite3_stmt* SqliteStore::Cached(const char* sql) {
  auto it = cached_.find(sql);
  if (it != cached_.end()) return it->second;
  sqlite3_stmt* stmt = nullptr;
  if (sqlite3_prepare_v3(db_, sql, -1, SQLITE_PREPARE_PERSISTENT, &stmt, nullptr) != SQLITE_OK) {
    sqlite3_finalize(stmt);
    return nullptr;
  }
  cached_.emplace(sql, stmt);
  return stmt;
}

absl::Status SqliteStore::Exec(const char* sql) {
  char* err = nullptr;
  if (sqlite3_exec(db_, sql, nullptr, nullptr, &err) != SQLITE_OK) {
    std::string msg = err ? err : "unknown error";
    sqlite3_free(err);
    return errors::Internal(absl::StrCat("sqlite: ", msg));
  }
  return absl::OkStatus();
}

absl::Status SqliteStore::Error(const char* what) {
  return errors::Internal(absl::StrCat("sqlite ", what, ": ", sqlite3_errmsg(db_)));
}

template <typename Message>
absl::Status SqliteStore::PutRecord(const char* table, const char* kind, const Message& m,
                                    int64_t status, const std::string* request_sha256) {
  absl::MutexLock lock(&mu_);
  return PutRecordLocked(table, kind, m, status, request_sha256);
}

template <typename Message>
absl::Status SqliteStore::PutRecordLocked(const char* table, const char* kind, const Message& m,
                                          int64_t status, const std::string* request_sha256) {
  // A fenced write (FenceWrites) is written only while the writer's lease is current at its
  // epoch, and an update only over a row the writer owns (or one without an owner, or one of a
  // replica the writer has taken over): checked in this statement, which SQLite runs under the
  // database's write lock, so a takeover commits wholly before it or after it. A new record
  // (request_sha256 set) is fenced too: one made by a replica already taken over would be
  // nobody's to settle.
  const bool fenced = !fence_replica_.empty();
  const bool update = request_sha256 == nullptr;
  std::string sql =
      absl::StrCat("INSERT INTO ", table,
                   "(id, tenant, idempotency_key, status, proto, request_sha256, replica) ",
                   fenced ? "SELECT ?1, ?2, ?3, ?4, ?5, ?6, ?7 WHERE EXISTS(SELECT 1 FROM "
                            "replica_leases WHERE id = ?8 AND epoch = ?9 AND taken_over_by = '')"
                          : "VALUES(?1, ?2, ?3, ?4, ?5, ?6, ?7)",
                   request_sha256 ? ""
                                  : " ON CONFLICT(id) DO UPDATE SET status=excluded.status, "
                                    "proto=excluded.proto, replica=excluded.replica");
  if (fenced && update) {
    // A waiting run is the next claimer's (store/admission_store.h: a claim is exclusive),
    // whichever replica queued it.
    const std::string waiting = std::string(table) == "runs"
                                    ? absl::StrCat(" OR runs.status = ", v1::RUN_STATUS_QUEUED)
                                    : "";
    absl::StrAppend(&sql, " WHERE ", table, ".replica IN (?8, '')", waiting,
                    " OR EXISTS(SELECT 1 FROM replica_leases l WHERE l.id = ", table,
                    ".replica AND l.taken_over_by = ?8)");
  }
  Stmt s(db_, sql.c_str());
  if (!s.ok()) return Error("prepare put");
  s.Bind(1, m.id());
  s.Bind(2, m.tenant());
  s.Bind(3, m.idempotency_key());
  s.Bind(4, status);
  s.BindBlob(5, m.SerializeAsString());
  s.Bind(6, request_sha256 ? *request_sha256 : std::string());
  s.Bind(7, m.replica());
  if (fenced) {
    s.Bind(8, fence_replica_);
    s.Bind(9, fence_epoch_);
  }
  int rc = s.Step();
  if (rc == SQLITE_CONSTRAINT) {
    return errors::AlreadyExists(absl::StrCat(kind, " idempotency key"), m.idempotency_key());
  }
  if (rc != SQLITE_DONE) return Error("put");
  if (fenced && sqlite3_changes(db_) == 0) {
    return Fenced(table, absl::StrCat(kind, " ", m.id()), m.id());
  }
  return absl::OkStatus();
}

absl::Status SqliteStore::Fenced(const char* table, const std::string& record,
                                 const std::string& id) {
  std::string owner;
  // An event's log is a run's or a kept session's.
  Stmt o(db_, table != nullptr
                  ? absl::StrCat("SELECT replica FROM ", table, " WHERE id = ?1").c_str()
                  : "SELECT replica FROM runs WHERE id = ?1 UNION ALL "
                    "SELECT replica FROM sessions WHERE id = ?1");
  o.Bind(1, id);
  if (o.ok() && o.Step() == SQLITE_ROW) owner = o.Text(0);
  Stmt l(db_, "SELECT epoch, taken_over_by, claimed_at FROM replica_leases WHERE id = ?1");
  l.Bind(1, fence_replica_);
  if (!l.ok()) return Error("read the writer's lease");
  const int rc = l.Step();
  if (rc != SQLITE_ROW && rc != SQLITE_DONE) return Error("read the writer's lease");
  Lease lease;
  if (rc == SQLITE_ROW) {
    lease.epoch = l.Int(0);
    lease.taken_over_by = l.Text(1);
    lease.claimed_at = absl::FromUnixNanos(l.Int(2));
  }
  return FencedWrite(record, fence_replica_, fence_epoch_, rc == SQLITE_ROW ? &lease : nullptr,
                     owner);
}

void SqliteStore::FenceWrites(const std::string& replica, int64_t epoch) {
  absl::MutexLock lock(&mu_);
  fence_replica_ = replica;
  fence_epoch_ = epoch;
}

template <typename Message>
absl::StatusOr<Message> SqliteStore::GetRecord(const char* table, const char* kind,
                                               const std::string& id) {
  absl::MutexLock lock(&mu_);
  std::string sql = absl::StrCat("SELECT proto FROM ", table, " WHERE id = ?");
  Stmt s(db_, sql.c_str());
  if (!s.ok()) return Error("prepare get");
  s.Bind(1, id);
  int rc = s.Step();
  if (rc == SQLITE_DONE) return errors::NotFound(kind, id);
  if (rc != SQLITE_ROW) return Error("get");
  return ParseBlob<Message>(s.Text(0), kind);
}

absl::StatusOr<std::optional<KeyedRecord>> SqliteStore::FindByKey(const char* table,
                                                                  const std::string& tenant,
                                                                  const std::string& key) {
  absl::MutexLock lock(&mu_);
  std::string sql = absl::StrCat("SELECT id, request_sha256 FROM ", table,
                                 " WHERE tenant = ? AND idempotency_key = ?");
  Stmt s(db_, sql.c_str());
  if (!s.ok()) return Error("prepare find by key");
  s.Bind(1, tenant);
  s.Bind(2, key);
  int rc = s.Step();
  if (rc == SQLITE_DONE) return std::optional<KeyedRecord>();
  if (rc != SQLITE_ROW) return Error("find by key");
  return std::optional<KeyedRecord>(KeyedRecord{s.Text(0), s.Text(1)});
}

absl::Status SqliteStore::CreateRun(const v1::Run& run, const std::string& request_sha256) {
  return PutRecord("runs", "run", run, static_cast<int64_t>(run.status()), &request_sha256);
}

absl::Status SqliteStore::PutRun(const v1::Run& run) {
  absl::MutexLock lock(&mu_);
  return PutRunLocked(run);
}

absl::Status SqliteStore::PutRunLocked(const v1::Run& run) {
  SANDGATE_RETURN_IF_ERROR(
      PutRecordLocked("runs", "run", run, static_cast<int64_t>(run.status()), nullptr));
  if (run.status() == v1::RUN_STATUS_QUEUED) return absl::OkStatus();
  Stmt d(db_, "DELETE FROM run_requests WHERE run_id = ?");
  d.Bind(1, run.id());
  if (!d.ok() || d.Step() != SQLITE_DONE) return Error("delete run request");
  return absl::OkStatus();
}

absl::Status SqliteStore::PutRunRequest(const std::string& run_id,
                                        const v1::RunAnalysisRequest& request) {
  // A request carries up to max_input_bytes of inputs: it is serialized straight into a
  // zeroblob of its size through SQLite's incremental blob I/O, so neither a serialized copy
  // nor SQLite's record copy of it is ever held in memory.
  const size_t size = request.ByteSizeLong();
  if (size > static_cast<size_t>(std::numeric_limits<int>::max())) {
    return errors::InvalidArgument(
        absl::StrCat("run request: ", size, " bytes is too large to keep"));
  }
  absl::MutexLock lock(&mu_);
  SANDGATE_RETURN_IF_ERROR(Exec("BEGIN"));
  absl::Status written = [&]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) -> absl::Status {
    Stmt s(db_, "INSERT OR REPLACE INTO run_requests(run_id, proto) VALUES(?, zeroblob(?))");
    s.Bind(1, run_id);
    s.Bind(2, static_cast<int64_t>(size));
    if (!s.ok() || s.Step() != SQLITE_DONE) return Error("put run request");
    sqlite3_blob* blob = nullptr;
    int rc = sqlite3_blob_open(db_, "main", "run_requests", "proto", sqlite3_last_insert_rowid(db_),
                               /*flags=*/1, &blob);
    absl::Cleanup close = [blob] { sqlite3_blob_close(blob); };
    if (rc != SQLITE_OK) return Error("open run request blob");
    BlobOutput out(blob);
    google::protobuf::io::CopyingOutputStreamAdaptor stream(&out, 64 << 10);
    if (!request.SerializeToZeroCopyStream(&stream) || !stream.Flush()) {
      return Error("write run request");
    }
    return absl::OkStatus();
  }();
  if (!written.ok()) {
    (void)Exec("ROLLBACK");
    return written;
  }
  return Exec("COMMIT");
}

absl::StatusOr<v1::RunAnalysisRequest> SqliteStore::GetRunRequest(const std::string& run_id) {
  absl::MutexLock lock(&mu_);
  Stmt s(db_, "SELECT proto FROM run_requests WHERE run_id = ?");
  if (!s.ok()) return Error("prepare get run request");
  s.Bind(1, run_id);
  int rc = s.Step();
  if (rc == SQLITE_DONE) return errors::NotFound("request of run", run_id);
  if (rc != SQLITE_ROW) return Error("get run request");
  return ParseBlob<v1::RunAnalysisRequest>(s.Blob(0), "run request");
}

absl::StatusOr<v1::Run> SqliteStore::GetRun(const std::string& run_id) {
  return GetRecord<v1::Run>("runs", "run", run_id);
}

absl::StatusOr<RunPage> SqliteStore::ListRuns(const std::string& tenant, uint32_t page_size,
                                              const std::string& page_token) {
  int64_t before = INT64_MAX;
  if (!page_token.empty() && (!absl::SimpleAtoi(page_token, &before) || before <= 0)) {
    return errors::InvalidArgument(
        absl::StrCat("page_token: not a token from ListRuns: '", page_token, "'"));
  }
  absl::MutexLock lock(&mu_);
  Stmt s(db_,
         "SELECT n, proto FROM runs WHERE (?1 = '' OR tenant = ?1) AND n < ?2 "
         "ORDER BY n DESC LIMIT ?3");
  if (!s.ok()) return Error("prepare list runs");
  s.Bind(1, tenant);
  s.Bind(2, before);
  s.Bind(3, static_cast<int64_t>(page_size) + 1);
  RunPage page;
  int64_t last_n = 0;
  int rc;
  while ((rc = s.Step()) == SQLITE_ROW) {
    if (page.runs.size() == page_size) {
      page.next_page_token = absl::StrCat(last_n);
      break;
    }
    last_n = s.Int(0);
    SANDGATE_ASSIGN_OR_RETURN(v1::Run run, ParseBlob<v1::Run>(s.Text(1), "run"));
    page.runs.push_back(std::move(run));
  }
  if (rc != SQLITE_ROW && rc != SQLITE_DONE) return Error("list runs");
  return page;
}

absl::StatusOr<std::optional<KeyedRecord>> SqliteStore::FindRunByIdempotencyKey(
    const std::string& tenant, const std::string& key) {
  return FindByKey("runs", tenant, key);
}

absl::StatusOr<std::vector<v1::Run>> SqliteStore::ListUnfinishedRunsOf(const std::string& replica) {
  absl::MutexLock lock(&mu_);
  // The literal statuses, as in the partial index's WHERE, so SQLite uses it.
  Stmt s(db_, "SELECT proto FROM runs WHERE status IN (1, 2) AND replica IN (?1, '') ORDER BY n");
  if (!s.ok()) return Error("prepare unfinished runs of a replica");
  s.Bind(1, replica);
  return CollectProtos<v1::Run>(s, "run");
}

absl::StatusOr<std::vector<v1::Session>> SqliteStore::ListLiveSessionsOf(
    const std::string& replica) {
  absl::MutexLock lock(&mu_);
  Stmt s(db_, "SELECT proto FROM sessions WHERE status = 1 AND replica IN (?1, '') ORDER BY n");
  if (!s.ok()) return Error("prepare live sessions of a replica");
  s.Bind(1, replica);
  return CollectProtos<v1::Session>(s, "session");
}

absl::StatusOr<std::vector<v1::Run>> SqliteStore::ListUnfinishedRuns() {
  absl::MutexLock lock(&mu_);
  Stmt s(db_, "SELECT proto FROM runs WHERE status IN (?, ?) ORDER BY n");
  if (!s.ok()) return Error("prepare unfinished runs");
  s.Bind(1, static_cast<int64_t>(v1::RUN_STATUS_QUEUED));
  s.Bind(2, static_cast<int64_t>(v1::RUN_STATUS_RUNNING));
  return CollectProtos<v1::Run>(s, "run");
}

absl::Status SqliteStore::CreateSession(const v1::Session& session,
                                        const std::string& request_sha256) {
  return PutRecord("sessions", "session", session, static_cast<int64_t>(session.status()),
                   &request_sha256);
}

absl::Status SqliteStore::PutSession(const v1::Session& session) {
  return PutRecord("sessions", "session", session, static_cast<int64_t>(session.status()), nullptr);
}

absl::StatusOr<v1::Session> SqliteStore::GetSession(const std::string& session_id) {
  return GetRecord<v1::Session>("sessions", "session", session_id);
}

absl::StatusOr<std::vector<v1::Session>> SqliteStore::ListSessions(const std::string& tenant,
                                                                   bool include_closed) {
  absl::MutexLock lock(&mu_);
  Stmt s(db_,
         "SELECT proto FROM sessions WHERE (?1 = '' OR tenant = ?1) AND (?2 OR status = ?3) "
         "ORDER BY n DESC LIMIT 1000");
  if (!s.ok()) return Error("prepare list sessions");
  s.Bind(1, tenant);
  s.Bind(2, static_cast<int64_t>(include_closed));
  s.Bind(3, static_cast<int64_t>(v1::SESSION_STATUS_ACTIVE));
  return CollectProtos<v1::Session>(s, "session");
}

absl::StatusOr<std::optional<KeyedRecord>> SqliteStore::FindSessionByIdempotencyKey(
    const std::string& tenant, const std::string& key) {
  return FindByKey("sessions", tenant, key);
}

absl::StatusOr<std::vector<std::string>> SqliteStore::PurgeBefore(absl::Time cutoff) {
  const int64_t cutoff_ns = absl::ToUnixNanos(cutoff);
  auto before = [cutoff_ns](const google::protobuf::Timestamp& t) {
    return t.seconds() * 1000000000LL + t.nanos() < cutoff_ns;
  };
  std::vector<std::string> runs, sessions;
  absl::MutexLock lock(&mu_);
  {
    Stmt s(db_, "SELECT id, proto FROM runs WHERE status NOT IN (?, ?)");
    if (!s.ok()) return Error("prepare purge runs");
    s.Bind(1, static_cast<int64_t>(v1::RUN_STATUS_QUEUED));
    s.Bind(2, static_cast<int64_t>(v1::RUN_STATUS_RUNNING));
    while (s.Step() == SQLITE_ROW) {
      v1::Run run;
      if (run.ParseFromString(s.Text(1)) && run.has_finished_at() && before(run.finished_at())) {
        runs.push_back(s.Text(0));
      }
    }
  }
  {
    Stmt s(db_, "SELECT id, proto FROM sessions WHERE status != ?");
    if (!s.ok()) return Error("prepare purge sessions");
    s.Bind(1, static_cast<int64_t>(v1::SESSION_STATUS_ACTIVE));
    while (s.Step() == SQLITE_ROW) {
      v1::Session session;
      if (session.ParseFromString(s.Text(1)) && session.has_closed_at() &&
          before(session.closed_at())) {
        sessions.push_back(s.Text(0));
      }
    }
  }
  SANDGATE_RETURN_IF_ERROR(Exec("BEGIN"));
  for (const std::string& id : runs) {
    for (const char* sql :
         {"DELETE FROM events WHERE run_id = ?", "DELETE FROM run_requests WHERE run_id = ?",
          "DELETE FROM runs WHERE id = ?"}) {
      Stmt d(db_, sql);
      d.Bind(1, id);
      if (!d.ok() || d.Step() != SQLITE_DONE) {
        (void)Exec("ROLLBACK");
        return Error("purge run");
      }
    }
  }
  for (const std::string& id : sessions) {
    for (const char* sql :
         {"DELETE FROM events WHERE run_id = ?", "DELETE FROM sessions WHERE id = ?"}) {
      Stmt d(db_, sql);
      d.Bind(1, id);
      if (!d.ok() || d.Step() != SQLITE_DONE) {
        (void)Exec("ROLLBACK");
        return Error("purge session");
      }
    }
  }
  SANDGATE_RETURN_IF_ERROR(Exec("COMMIT"));
  return runs;
}

}  // namespace sandgate::store
