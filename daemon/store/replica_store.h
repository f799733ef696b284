// ReplicaStore: the lease rows of the replicas that share one store.
//
// Each replica (one sandgated) holds a lease row: its identity, the address other replicas
// reach it at, and when the lease ends unless renewed. A replica whose lease has ended is
// cleaned up after by one other replica: the first to claim the row (ClaimTakeover, a guarded
// UPDATE, so two cannot both win) deletes its remote resources, then fails its running runs
// and ends its sessions in the commit that marks the cleanup done (Store::SettleTakeover).
//
// Every time here is on the store's clock (Now): PostgreSQL's, one for every replica of the
// gateway whatever their hosts' clocks say; SQLite's daemons share one host, so there it is
// the caller's injected clock, and a test drives leases with a FakeClock. The times passed in
// are read from Now() and added to, never taken from a replica's own clock, so a replica whose
// clock is wrong neither hides its death nor takes live replicas over (core/replica.h).
//
//   absl::Time now = *leases->Now(clock->Now());
//   SANDGATE_RETURN_IF_ERROR(leases->Join({"host-a", "tcp:10.0.0.5:7443", now + period}, now));
//   SANDGATE_RETURN_IF_ERROR(leases->Renew("host-a", epoch, now + period));  // every renewal
//   if (*leases->ClaimTakeover("host-b", "host-a", now, now + period)) { clean up; Finish… }
//
// Thread safe. Implementations: SqliteReplicaStore (several daemons on one host sharing one
// SQLite file), PostgresReplicaStore.
#ifndef SANDGATE_STORE_REPLICA_STORE_H_
#define SANDGATE_STORE_REPLICA_STORE_H_

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "absl/time/time.h"
#include "common/errors.h"

namespace sandgate::store {

struct Lease {
  std::string replica_id;
  std::string address;  // where other replicas reach it ("tcp:host:port"); may be empty
  absl::Time expires_at;
  // The replica cleaning up after this one (or that did), "" while the lease is its own.
  std::string taken_over_by;
  // Until when that claim stands: a claimer that dies mid-cleanup is replaced after it.
  absl::Time claim_until = absl::UnixEpoch();
  bool cleaned = false;  // the cleanup is done; nobody claims the lease again
  // The fencing token: Join makes it one more than the row's last. Every write the replica
  // makes to its runs and sessions names it (Store::FenceWrites) and is refused once the row
  // holds another epoch or has been taken over.
  int64_t epoch = 0;
  absl::Time claimed_at = absl::UnixEpoch();  // when taken_over_by claimed it
};

class ReplicaStore {
 public:
  virtual ~ReplicaStore() = default;

  // The time on the clock every lease time is on: the database's where it has one of its own
  // (PostgreSQL's clock_timestamp()), else `local`, the caller's (one host: SQLite).
  virtual absl::StatusOr<absl::Time> Now(absl::Time local) { return local; }

  // Makes lease.replica_id's row (or makes it the replica's own again, after a restart or a
  // takeover), with lease.address and lease.expires_at; returns its new epoch (1 for a new
  // row, else one more than the row's). UNAVAILABLE while another replica's claim on it
  // stands at `now` and its cleanup is not done (the caller waits and tries again: a restarted
  // replica must not queue runs again that the claimer is queueing).
  virtual absl::StatusOr<int64_t> Join(const Lease& lease, absl::Time now) = 0;
  // Moves the end of the replica's own lease to `expires_at`, if the row still holds `epoch`
  // (the one Join returned to this process). FAILED_PRECONDITION naming the claimer when
  // another replica has taken it over; ABORTED (LeaseSuperseded) when another process joined
  // under the same id since; NOT_FOUND when it has no row.
  virtual absl::Status Renew(const std::string& replica_id, int64_t epoch,
                             absl::Time expires_at) = 0;
  // Every lease, by replica id.
  virtual absl::StatusOr<std::vector<Lease>> ListLeases() = 0;
  // Claims the cleanup after `dead` for `by` until `claim_until` (claimed_at = now). True for
  // exactly one of any number of concurrent callers, and only when dead's lease has ended
  // (expires_at <= now), its cleanup is not done and no earlier claim stands at `now`.
  virtual absl::StatusOr<bool> ClaimTakeover(const std::string& dead, const std::string& by,
                                             absl::Time now, absl::Time claim_until) = 0;
  // The cleanup is marked done by the commit that settles it (Store::SettleTakeover).
};

// The errors every implementation gives, worded once.
inline absl::Status CleanupUnderWay(const std::string& replica, const std::string& claimer) {
  return errors::Unavailable(absl::StrCat("replica ", claimer, " is cleaning up after replica ",
                                          replica, "; it rejoins when that is done"));
}
inline absl::Status LeaseTakenOver(const std::string& replica, const std::string& claimer) {
  return errors::FailedPrecondition(
      absl::StrCat("the lease of replica ", replica, " was taken over by replica ", claimer));
}
// A process holding `epoch` whose replica id another process joined under since (a frozen
// process woken, or a second daemon given the same id): it must stop, not join again.
inline absl::Status LeaseSuperseded(const std::string& replica, int64_t epoch, int64_t now) {
  return absl::AbortedError(absl::StrCat("the lease of replica ", replica,
                                         " was joined again by another process (epoch ", now,
                                         "; this process holds epoch ", epoch, ")"));
}
inline absl::Status ClaimLost(const std::string& dead, const std::string& by) {
  return errors::FailedPrecondition(
      absl::StrCat("replica ", by, " no longer holds the claim on replica ", dead, "'s lease"));
}

// Why `leases`' Renew of `replica` at `epoch` changed no row, from the row as it is now:
// taken over, joined again by another process, or gone.
inline absl::Status RenewRefused(ReplicaStore& leases, const std::string& replica, int64_t epoch) {
  absl::StatusOr<std::vector<Lease>> rows = leases.ListLeases();
  if (!rows.ok()) return rows.status();
  for (const Lease& row : *rows) {
    if (row.replica_id != replica) continue;
    if (!row.taken_over_by.empty()) return LeaseTakenOver(replica, row.taken_over_by);
    return LeaseSuperseded(replica, epoch, row.epoch);
  }
  return errors::NotFound("lease of replica", replica);
}

// Why `leases`' Join of `replica` changed no row: another replica's claim on it stands.
inline absl::Status JoinRefused(ReplicaStore& leases, const std::string& replica) {
  absl::StatusOr<std::vector<Lease>> rows = leases.ListLeases();
  if (!rows.ok()) return rows.status();
  for (const Lease& row : *rows) {
    if (row.replica_id == replica) return CleanupUnderWay(replica, row.taken_over_by);
  }
  return errors::NotFound("lease of replica", replica);
}

// Why a fenced write (Store::FenceWrites) of `record` ("run r-1") by `replica` at `epoch`
// was refused, from that replica's lease row as it is now (`lease` null: it has none) and the
// record's owner column. ABORTED: the writer must stop the record's work, not retry.
inline absl::Status FencedWrite(const std::string& record, const std::string& replica,
                                int64_t epoch, const Lease* lease, const std::string& owner) {
  std::string why;
  if (lease == nullptr) {
    why = absl::StrCat("replica ", replica, " holds no lease");
  } else if (!lease->taken_over_by.empty()) {
    why = absl::StrCat("replica ", replica, " was taken over by replica ", lease->taken_over_by,
                       " at ", absl::FormatTime(lease->claimed_at), "; ", record,
                       " was settled there (failed, or queued again on a live replica)");
  } else if (lease->epoch != epoch) {
    why = absl::StrCat("replica ", replica, " joined again (lease epoch ", lease->epoch,
                       ") after this writer's epoch ", epoch, " was taken over");
  } else {
    why = absl::StrCat(record, " belongs to replica ", owner, ", not ", replica);
  }
  return absl::AbortedError(absl::StrCat("write to ", record, " refused: ", why));
}

}  // namespace sandgate::store

#endif  // SANDGATE_STORE_REPLICA_STORE_H_
