// OwnerLookup: which replica owns a run or a kept session, and where another replica reaches
// it (docs/replicas.md, "Forwarding"). A call that acts on a live sandbox (Exec, the file
// transfers, KeepAlive, CloseSession, CancelRun…) must run on the replica whose memory holds
// it; the gRPC edge asks here first and forwards the call when the answer is another replica.
//
//   core::OwnerLookup owners(store, leases, config.replica.id, Clock::Real());
//   SANDGATE_ASSIGN_OR_RETURN(std::optional<core::Peer> peer, owners.OfSession(caller, id));
//   if (!peer) { ... serve here, as a single daemon does ... }
//   else       { ... forward to peer->address ... }
//
// The record answers, not the owner, whenever there is nothing live to act on: a finished run
// or an ended session (also one a takeover failed or expired) is served here, exactly as a
// single daemon answers for it. So is any id the caller may not see (the local path answers
// NOT_FOUND as it does directly), and anything this replica owns itself.
//
// Thread safe; `store`, `leases` and `clock` are not owned and outlive it.
#ifndef SANDGATE_CORE_OWNER_H_
#define SANDGATE_CORE_OWNER_H_

#include <functional>
#include <optional>
#include <string>

#include "absl/status/statusor.h"
#include "common/clock.h"
#include "core/tenants.h"
#include "store/replica_store.h"
#include "store/store.h"

namespace sandgate::core {

// A live replica that owns what a call acts on.
struct Peer {
  std::string replica;
  std::string address;  // its replica.advertise_address, "tcp:host:port" or "unix:/path"
  absl::Time lease_ends = absl::InfinitePast();  // as last renewed
};

// What this replica holds in memory, asked before the store (the common case, a call on the
// replica's own work, then costs no store read). Either may be empty.
struct HeldHere {
  std::function<bool(const std::string&)> session;
  std::function<bool(const std::string&)> run;
};

class OwnerLookup {
 public:
  OwnerLookup(store::Store* store, store::ReplicaStore* leases, std::string self, Clock* clock,
              HeldHere held = {})
      : store_(store),
        leases_(leases),
        self_(std::move(self)),
        clock_(clock),
        held_(std::move(held)) {}

  // nullopt: serve the call here. A Peer: the live replica to forward it to. UNAVAILABLE,
  // naming the owner, when the owner's lease has ended (or it is being taken over) or it
  // advertises no address; a store error as it is.
  absl::StatusOr<std::optional<Peer>> OfSession(const Caller& caller, const std::string& id);
  absl::StatusOr<std::optional<Peer>> OfRun(const Caller& caller, const std::string& id);

  const std::string& self() const { return self_; }

 private:
  // The owner `replica` of `what` (e.g. "session s-1"), which is live and not this replica's.
  absl::StatusOr<std::optional<Peer>> Owner(const std::string& what, const std::string& replica);

  store::Store* const store_;
  store::ReplicaStore* const leases_;
  const std::string self_;
  Clock* const clock_;
  const HeldHere held_;
};

}  // namespace sandgate::core

#endif  // SANDGATE_CORE_OWNER_H_
