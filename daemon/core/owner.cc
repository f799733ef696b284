#include "core/owner.h"

#include "absl/strings/str_cat.h"
#include "common/errors.h"
#include "common/status_macros.h"

namespace sandgate::core {
namespace {

bool Visible(const Caller& caller, const std::string& tenant) {
  return caller.is_operator || tenant == caller.tenant;
}

bool Live(v1::RunStatus s) { return s == v1::RUN_STATUS_QUEUED || s == v1::RUN_STATUS_RUNNING; }

}  // namespace

absl::StatusOr<std::optional<Peer>> OwnerLookup::OfSession(const Caller& caller,
                                                           const std::string& id) {
  if (id.empty()) return std::nullopt;  // the local path names the missing field
  if (held_.session && held_.session(id)) return std::nullopt;
  absl::StatusOr<v1::Session> s = store_->GetSession(id);
  if (absl::IsNotFound(s.status())) return std::nullopt;
  if (!s.ok()) return s.status();
  if (!Visible(caller, s->tenant()) || s->status() != v1::SESSION_STATUS_ACTIVE) {
    return std::nullopt;
  }
  return Owner(absl::StrCat("session ", id), s->replica());
}

absl::StatusOr<std::optional<Peer>> OwnerLookup::OfRun(const Caller& caller,
                                                       const std::string& id) {
  if (id.empty()) return std::nullopt;
  if (held_.run && held_.run(id)) return std::nullopt;
  absl::StatusOr<v1::Run> run = store_->GetRun(id);
  if (absl::IsNotFound(run.status())) return std::nullopt;
  if (!run.ok()) return run.status();
  if (!Visible(caller, run->tenant()) || !Live(run->status())) return std::nullopt;
  return Owner(absl::StrCat("run ", id), run->replica());
}

absl::StatusOr<std::optional<Peer>> OwnerLookup::Owner(const std::string& what,
                                                       const std::string& replica) {
  // Records made before replicas existed carry none: they are whoever serves them.
  if (replica.empty() || replica == self_) return std::nullopt;
  absl::StatusOr<std::vector<store::Lease>> leases = leases_->ListLeases();
  if (!leases.ok()) return leases.status();
  const store::Lease* lease = nullptr;
  for (const store::Lease& l : *leases) {
    if (l.replica_id == replica) lease = &l;
  }
  const std::string owned = absl::StrCat(what, " is owned by replica ", replica);
  if (lease == nullptr) {
    return errors::Unavailable(absl::StrCat(owned, ", which holds no lease"));
  }
  // On the store's clock, as every lease decision (store/replica_store.h).
  SANDGATE_ASSIGN_OR_RETURN(const absl::Time now, leases_->Now(clock_->Now()));
  if (lease->expires_at <= now || !lease->taken_over_by.empty()) {
    std::string msg = absl::StrCat(owned, ", which stopped renewing its lease (it ended at ",
                                   absl::FormatTime(lease->expires_at), ")");
    if (!lease->taken_over_by.empty()) {
      absl::StrAppend(&msg, "; replica ", lease->taken_over_by, " is cleaning up after it");
    }
    absl::StrAppend(&msg, "; retry later: the takeover fails its runs and ends its sessions");
    return errors::Unavailable(msg);
  }
  if (lease->address.empty()) {
    return errors::Unavailable(absl::StrCat(
        owned, ", which advertises no address to forward the call to (replica.advertise_address)"));
  }
  return Peer{replica, lease->address, lease->expires_at};
}

}  // namespace sandgate::core
