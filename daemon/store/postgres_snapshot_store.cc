#include "store/postgres_snapshot_store.h"

#include "common/errors.h"
#include "common/status_macros.h"
#include "store/postgres_schema.h"

namespace sandgate::store {
namespace {

// Component "snapshots"; the same table as on SQLite (sqlite_snapshot_store.cc).
constexpr const char* kSteps[] = {
    R"sql(
CREATE TABLE snapshots (
  n BIGINT GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
  id TEXT NOT NULL UNIQUE,
  tenant TEXT NOT NULL,
  session_id TEXT NOT NULL,
  created_ns BIGINT NOT NULL,
  proto BYTEA NOT NULL);
CREATE INDEX snapshots_tenant ON snapshots(tenant, n);
CREATE INDEX snapshots_created ON snapshots(created_ns);
)sql",
};

}  // namespace

absl::StatusOr<std::unique_ptr<PostgresSnapshotStore>> PostgresSnapshotStore::Open(
    PostgresDatabase* db) {
  SANDGATE_RETURN_IF_ERROR(MigrateSchema(*db, "snapshots", kSteps));
  return std::unique_ptr<PostgresSnapshotStore>(new PostgresSnapshotStore(db));
}

absl::Status PostgresSnapshotStore::Create(const v1::Snapshot& snapshot) {
  absl::Status st = db_->Run("create snapshot",
                             "INSERT INTO snapshots(id, tenant, session_id, created_ns, proto) "
                             "VALUES($1, $2, $3, $4, $5)",
                             PgParams()
                                 .Text(snapshot.id())
                                 .Text(snapshot.tenant())
                                 .Text(snapshot.session_id())
                                 .Int(SnapshotCreatedNs(snapshot))
                                 .Bytes(snapshot.SerializeAsString()));
  if (st.code() == absl::StatusCode::kAlreadyExists) {
    return errors::AlreadyExists("snapshot", snapshot.id());
  }
  return st;
}

absl::StatusOr<v1::Snapshot> PostgresSnapshotStore::Get(const std::string& id) {
  SANDGATE_ASSIGN_OR_RETURN(
      PgResult r,
      db_->Exec("get snapshot", "SELECT proto FROM snapshots WHERE id = $1", PgParams().Text(id)));
  if (r.rows() == 0) return errors::NotFound("snapshot", id);
  return ParseSnapshotRecord(id, r.Text(0, 0));
}

absl::StatusOr<std::vector<v1::Snapshot>> PostgresSnapshotStore::List(
    const std::string& tenant, const std::string& session_id) {
  SANDGATE_ASSIGN_OR_RETURN(PgResult r,
                            db_->Exec("list snapshots",
                                      "SELECT id, proto FROM snapshots WHERE tenant = $1 "
                                      "AND ($2 = '' OR session_id = $2) ORDER BY n DESC",
                                      PgParams().Text(tenant).Text(session_id)));
  std::vector<v1::Snapshot> out;
  for (int i = 0; i < r.rows(); ++i) {
    SANDGATE_ASSIGN_OR_RETURN(v1::Snapshot s, ParseSnapshotRecord(r.Text(i, 0), r.Text(i, 1)));
    out.push_back(std::move(s));
  }
  return out;
}

absl::StatusOr<bool> PostgresSnapshotStore::Delete(const std::string& id) {
  SANDGATE_ASSIGN_OR_RETURN(
      PgResult r,
      db_->Exec("delete snapshot", "DELETE FROM snapshots WHERE id = $1", PgParams().Text(id)));
  return r.affected() > 0;
}

absl::StatusOr<std::vector<std::string>> PostgresSnapshotStore::ListCreatedBefore(
    absl::Time cutoff) {
  SANDGATE_ASSIGN_OR_RETURN(
      PgResult r,
      db_->Exec("list old snapshots", "SELECT id FROM snapshots WHERE created_ns < $1 ORDER BY n",
                PgParams().Int(absl::ToUnixNanos(cutoff))));
  std::vector<std::string> out;
  for (int i = 0; i < r.rows(); ++i) out.push_back(r.Text(i, 0));
  return out;
}

}  // namespace sandgate::store
