// ReplicaStore: the lease rows of the replicas that share one store.
//
// Each replica (one sandgated) holds a lease row: its identity, the address other replicas
// reach it at, and when the lease ends unless renewed. A replica whose lease has ended is
// cleaned up after by one other replica: the first to claim the row (ClaimTakeover, a guarded
// UPDATE, so two cannot both win) fails its running runs, queues its waiting runs again and
// deletes its remote resources (core/replica.h), then marks the cleanup done.
//
// Every time here comes from the caller (the injected clock), never from the database, so
// a test drives leases with a FakeClock; replicas on several hosts need clocks in step to
// well under the lease period (NTP does that).
//
//   SANDGATE_RETURN_IF_ERROR(leases->Join({"host-a", "tcp:10.0.0.5:7443", now + period}));
//   SANDGATE_RETURN_IF_ERROR(leases->Renew("host-a", now + period));   // every renew interval
//   if (*leases->ClaimTakeover("host-b", "host-a", now, now + period)) { clean up; Finish… }
//
// Thread safe. Implementations: SqliteReplicaStore (several daemons on one host sharing one
// SQLite file), PostgresReplicaStore.
#ifndef SANDGATE_STORE_REPLICA_STORE_H_
#define SANDGATE_STORE_REPLICA_STORE_H_

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
};

class ReplicaStore {
 public:
  virtual ~ReplicaStore() = default;

  // Makes lease.replica_id's row (or makes it the replica's own again, after a restart),
  // with lease.address and lease.expires_at. UNAVAILABLE while another replica's claim on it
  // stands at `now` and its cleanup is not done (the caller waits and tries again: a restarted
  // replica must not queue runs again that the claimer is queueing).
  virtual absl::Status Join(const Lease& lease, absl::Time now) = 0;
  // Moves the end of the replica's own lease to `expires_at`. FAILED_PRECONDITION naming the
  // claimer when another replica has taken it over; NOT_FOUND when it has no row.
  virtual absl::Status Renew(const std::string& replica_id, absl::Time expires_at) = 0;
  // Every lease, by replica id.
  virtual absl::StatusOr<std::vector<Lease>> ListLeases() = 0;
  // Claims the cleanup after `dead` for `by` until `claim_until`. True for exactly one of any
  // number of concurrent callers, and only when dead's lease has ended (expires_at <= now),
  // its cleanup is not done and no earlier claim stands at `now`.
  virtual absl::StatusOr<bool> ClaimTakeover(const std::string& dead, const std::string& by,
                                             absl::Time now, absl::Time claim_until) = 0;
  // Marks the cleanup after `dead` done, if `by` still holds the claim (FAILED_PRECONDITION
  // otherwise: another replica took it over after `by`'s claim ended).
  virtual absl::Status FinishTakeover(const std::string& dead, const std::string& by) = 0;
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
inline absl::Status ClaimLost(const std::string& dead, const std::string& by) {
  return errors::FailedPrecondition(
      absl::StrCat("replica ", by, " no longer holds the claim on replica ", dead, "'s lease"));
}

}  // namespace sandgate::store

#endif  // SANDGATE_STORE_REPLICA_STORE_H_
