#include "store/postgres_replica_store.h"

#include "common/status_macros.h"
#include "store/postgres_schema.h"

namespace sandgate::store {
namespace {

// Times are unix nanoseconds on the database's clock (Now; see replica_store.h).
constexpr const char* kSteps[] = {
    R"sql(
CREATE TABLE replica_leases (
  id TEXT PRIMARY KEY,
  address TEXT NOT NULL,
  expires_at BIGINT NOT NULL,
  taken_over_by TEXT NOT NULL DEFAULT '',
  claim_until BIGINT NOT NULL DEFAULT 0,
  cleaned INTEGER NOT NULL DEFAULT 0);
)sql",
    // 2: the fencing token (Lease::epoch) and when a takeover was claimed.
    R"sql(
ALTER TABLE replica_leases ADD COLUMN epoch BIGINT NOT NULL DEFAULT 0,
  ADD COLUMN claimed_at BIGINT NOT NULL DEFAULT 0;
)sql",
};

}  // namespace

absl::StatusOr<std::unique_ptr<PostgresReplicaStore>> PostgresReplicaStore::Create(
    PostgresDatabase* db) {
  SANDGATE_RETURN_IF_ERROR(MigrateSchema(*db, "replicas", kSteps));
  return std::unique_ptr<PostgresReplicaStore>(new PostgresReplicaStore(db));
}

absl::StatusOr<absl::Time> PostgresReplicaStore::Now(absl::Time) {
  // Microseconds are the clock's resolution; a bigint of them cannot round.
  SANDGATE_ASSIGN_OR_RETURN(
      PgResult r,
      db_->Exec("read clock", "SELECT (extract(epoch FROM clock_timestamp()) * 1000000)::bigint"));
  return absl::FromUnixMicros(r.Int(0, 0));
}

absl::StatusOr<int64_t> PostgresReplicaStore::Join(const Lease& lease, absl::Time now) {
  SANDGATE_ASSIGN_OR_RETURN(
      PgResult r,
      db_->Exec(
          "join",
          "INSERT INTO replica_leases(id, address, expires_at, epoch) VALUES($1, $2, $3, 1) "
          "ON CONFLICT(id) DO UPDATE SET address = excluded.address, "
          "expires_at = excluded.expires_at, taken_over_by = '', claim_until = 0, "
          "cleaned = 0, claimed_at = 0, epoch = replica_leases.epoch + 1 "
          "WHERE replica_leases.taken_over_by = '' OR replica_leases.cleaned = 1 "
          "OR replica_leases.claim_until <= $4 RETURNING epoch",
          PgParams().Text(lease.replica_id).Text(lease.address).Time(lease.expires_at).Time(now)));
  if (r.rows() == 1) return r.Int(0, 0);
  return JoinRefused(*this, lease.replica_id);
}

absl::Status PostgresReplicaStore::Renew(const std::string& replica_id, int64_t epoch,
                                         absl::Time expires_at) {
  SANDGATE_ASSIGN_OR_RETURN(PgResult r,
                            db_->Exec("renew lease",
                                      "UPDATE replica_leases SET expires_at = $2 WHERE id = $1 AND "
                                      "taken_over_by = '' AND epoch = $3",
                                      PgParams().Text(replica_id).Time(expires_at).Int(epoch)));
  if (r.affected() == 1) return absl::OkStatus();
  return RenewRefused(*this, replica_id, epoch);
}

absl::StatusOr<std::vector<Lease>> PostgresReplicaStore::ListLeases() {
  SANDGATE_ASSIGN_OR_RETURN(
      PgResult r, db_->Exec("list leases",
                            "SELECT id, address, expires_at, taken_over_by, claim_until, cleaned, "
                            "epoch, claimed_at FROM replica_leases ORDER BY id"));
  std::vector<Lease> out;
  for (int i = 0; i < r.rows(); ++i) {
    out.push_back({r.Text(i, 0), r.Text(i, 1), r.Time(i, 2), r.Text(i, 3), r.Time(i, 4),
                   r.Int(i, 5) != 0, r.Int(i, 6), r.Time(i, 7)});
  }
  return out;
}

absl::StatusOr<bool> PostgresReplicaStore::ClaimTakeover(const std::string& dead,
                                                         const std::string& by, absl::Time now,
                                                         absl::Time claim_until) {
  SANDGATE_ASSIGN_OR_RETURN(
      PgResult r, db_->Exec("claim lease",
                            "UPDATE replica_leases SET taken_over_by = $2, claim_until = $4, "
                            "claimed_at = $3 WHERE id = $1 AND expires_at <= $3 AND cleaned = 0 "
                            "AND (taken_over_by = '' OR claim_until <= $3)",
                            PgParams().Text(dead).Text(by).Time(now).Time(claim_until)));
  return r.affected() == 1;
}

}  // namespace sandgate::store
