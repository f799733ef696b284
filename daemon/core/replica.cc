#include "core/replica.h"

#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <climits>
#include <cstdio>
#include <utility>

#include "absl/strings/str_cat.h"
#include "common/errors.h"
#include "common/log.h"
#include "common/sha256.h"
#include "common/status_macros.h"

namespace sandgate::core {

std::string DefaultReplicaId(const std::string& state_dir) {
  char host[HOST_NAME_MAX + 1] = {};
  if (gethostname(host, sizeof(host) - 1) != 0 || host[0] == '\0') {
    std::snprintf(host, sizeof(host), "host");
  }
  // A host name may hold characters replica.id does not allow.
  std::string id;
  for (const char* c = host; *c; ++c) id += std::isalnum(*c) || *c == '.' || *c == '-' ? *c : '_';
  return absl::StrCat(id, "-", Sha256::Hex(state_dir).substr(0, 8));
}

ReplicaJournal ReplicaJournal::Of(ResourceJournal* base, std::string replica,
                                  std::set<std::string> providers) {
  ReplicaJournal view(base, std::move(replica));
  view.include_unmarked_ = false;
  view.providers_ = std::move(providers);
  return view;
}

absl::Status ReplicaJournal::Record(const JournalEntry& entry) {
  JournalEntry marked = entry;
  marked.details[kKey] = id_;
  absl::Status recorded = base_->Record(marked);
  if (recorded.ok()) {
    absl::MutexLock lock(&unerased_->mu);
    unerased_->ids.erase(entry.id);  // recorded again since: the resource is new
  }
  return recorded;
}

absl::Status ReplicaJournal::Erase(const std::string& id) {
  absl::Status erased = base_->Erase(id);
  absl::MutexLock lock(&unerased_->mu);
  if (erased.ok()) {
    unerased_->ids.erase(id);
  } else {
    unerased_->ids.insert(id);
  }
  return erased;
}

void ReplicaJournal::RetryErases() {
  std::set<std::string> ids;
  {
    absl::MutexLock lock(&unerased_->mu);
    if (unerased_->ids.empty()) return;
    ids = unerased_->ids;
  }
  absl::StatusOr<std::vector<JournalEntry>> mine = List();
  if (!mine.ok()) return;  // the next try
  std::set<std::string> listed;
  for (const JournalEntry& e : *mine) listed.insert(e.id);
  for (const std::string& id : ids) {
    absl::Status erased = listed.count(id) > 0 ? base_->Erase(id) : absl::OkStatus();
    absl::MutexLock lock(&unerased_->mu);
    if (erased.ok()) unerased_->ids.erase(id);
  }
  log::Info("journal.erases_retried", {{"replica", id_}, {"entries", ids.size()}});
}

absl::StatusOr<std::vector<JournalEntry>> ReplicaJournal::List() {
  SANDGATE_ASSIGN_OR_RETURN(std::vector<JournalEntry> all, base_->List());
  std::vector<JournalEntry> mine;
  for (JournalEntry& e : all) {
    auto owner = e.details.find(kKey);
    const bool ours = owner == e.details.end()
                          ? include_unmarked_
                          : owner->is_string() && owner->get<std::string>() == id_;
    if (ours && (providers_.empty() || providers_.count(e.provider) > 0)) {
      mine.push_back(std::move(e));
    }
  }
  return mine;
}

ReplicaMember::ReplicaMember(ReplicaDeps deps, ReplicaConfig config)
    : deps_(std::move(deps)), config_(std::move(config)) {}

absl::Status ReplicaMember::Join() {
  const absl::Time give_up = deps_.clock->Now() + 2 * config_.lease_period;
  while (true) {
    const absl::Time now = deps_.clock->Now();
    absl::Status joined = JoinOnce(now, "replica.joined");
    if (joined.ok()) return joined;
    if (joined.code() != absl::StatusCode::kUnavailable || now >= give_up) return joined;
    log::Warning("replica.join_waiting", {{"replica", config_.id}, {"why", joined.message()}});
    deps_.clock->SleepFor(config_.renew_interval);
  }
}

absl::Status ReplicaMember::JoinOnce(absl::Time now, const char* event) {
  SANDGATE_ASSIGN_OR_RETURN(const absl::Time store_now, deps_.leases->Now(now));
  store::Lease lease;
  lease.replica_id = config_.id;
  lease.address = config_.advertise_address;
  lease.expires_at = store_now + config_.lease_period;
  SANDGATE_ASSIGN_OR_RETURN(int64_t epoch, deps_.leases->Join(lease, store_now));
  // Every write of this replica's runs and sessions names the new epoch from now on: one
  // still in flight under an older epoch is refused (store/store.h FenceWrites).
  deps_.store->FenceWrites(config_.id, epoch);
  absl::MutexLock lock(&mu_);
  // Counted here from before the store's clock was read: the row's end is no earlier.
  lease_end_ = now + config_.lease_period;
  held_since_ = now;
  lost_.clear();
  taken_over_ = false;
  work_ended_ = false;
  epoch_ = epoch;
  log::Info(event, {{"replica", config_.id},
                    {"address", config_.advertise_address},
                    {"epoch", epoch},
                    {"lease_until", absl::FormatTime(lease.expires_at)}});
  return absl::OkStatus();
}

void ReplicaMember::Rejoin(absl::Time now) {
  std::string why;
  bool ended, superseded;
  {
    absl::MutexLock lock(&mu_);
    if (!taken_over_ && !superseded_) return;
    why = lost_;
    ended = work_ended_;
    superseded = superseded_;
  }
  if (!ended) {
    // Its runs and sessions were settled by the replica that took it over, and every write
    // this one makes to them is refused: what still runs here ends, and what it leaves on
    // this host (no other host can delete it) is swept, before the lease is held again at a
    // new epoch, so nothing of the old work goes on writing under the new one.
    log::Warning("replica.ending_work", {{"replica", config_.id}, {"why", why}});
    if (deps_.end_local_work) deps_.end_local_work(why);
    // What this host's journal holds under the id is the live process's to sweep now.
    absl::Status swept = superseded || deps_.own_providers.empty()
                             ? absl::OkStatus()
                             : Sweep(std::make_unique<ReplicaJournal>(deps_.journal, config_.id),
                                     &deps_.own_providers);
    if (!swept.ok()) {
      log::Error("replica.sweep_failed", {{"replica", config_.id}, {"error", swept.ToString()}});
    }
    absl::MutexLock lock(&mu_);
    work_ended_ = true;
  }
  if (superseded) return;
  // Refused (UNAVAILABLE) while the claimer's cleanup is under way: tried again at the next
  // renewal.
  absl::Status joined = JoinOnce(now, "replica.rejoined");
  if (!joined.ok()) {
    log::Warning("replica.rejoin_waiting", {{"replica", config_.id}, {"why", joined.message()}});
  }
}

absl::Status ReplicaMember::Sweep(std::unique_ptr<ReplicaJournal> view,
                                  const std::map<std::string, sandbox::Provider*>* providers) {
  auto sweeper = std::make_unique<JournalSweeper>(
      SweeperDeps{deps_.store, providers, deps_.clock, deps_.metrics, view.get()});
  absl::Status swept = sweeper->Sweep();
  absl::MutexLock lock(&mu_);
  views_.push_back(std::move(view));
  sweepers_.push_back(std::move(sweeper));
  return swept;
}

void ReplicaMember::Start() {
  thread_ = std::thread([this] { Loop(); });
  cleaner_ = std::thread([this] { CleanLoop(); });
}

void ReplicaMember::Stop(absl::Time deadline) {
  std::vector<JournalSweeper*> sweepers;
  {
    absl::MutexLock lock(&mu_);
    stop_ = true;
    for (auto& s : sweepers_) sweepers.push_back(s.get());
  }
  if (thread_.joinable()) thread_.join();
  if (cleaner_.joinable()) cleaner_.join();
  for (JournalSweeper* s : sweepers) s->StopBy(deadline);
}

absl::Status ReplicaMember::CanTakeWork() const {
  absl::MutexLock lock(&mu_);
  // Exactly at the lease's end, whenever the failing renewals happen to run.
  if (lost_.empty() && deps_.clock->Now() < lease_end_) return absl::OkStatus();
  const std::string why =
      !lost_.empty()
          ? lost_
          : absl::StrCat("replica ", config_.id, " could not renew its lease, which ended at ",
                         absl::FormatTime(lease_end_));
  return errors::Unavailable(absl::StrCat(why, "; this replica takes no new work"));
}

bool ReplicaMember::MayClaim(absl::Time now) const {
  absl::MutexLock lock(&mu_);
  // A replica without its lease must not clean up after others: it may be the one cut off.
  // One whose lease lapsed (the store was out of reach) waits a whole lease period after it
  // has it back: the others, cut off alike, renew meanwhile instead of being taken over.
  // One the store did not answer lately waits for the others' retries too
  // (kClaimGraceAfterOutage): cut off alike, they renew as soon as the store is back.
  return lost_.empty() && now < lease_end_ && now - held_since_ >= config_.lease_period &&
         now - last_unanswered_ >= kClaimGraceAfterOutage;
}

int ReplicaMember::takeovers() const {
  absl::MutexLock lock(&mu_);
  return takeovers_;
}

int64_t ReplicaMember::epoch() const {
  absl::MutexLock lock(&mu_);
  return epoch_;
}

void ReplicaMember::Loop() {
  absl::Time next_renew = deps_.clock->Now() + config_.renew_interval;
  absl::Duration retry = kRenewRetryFirst;
  absl::Time next_end = absl::InfinitePast();
  while (true) {
    {
      absl::MutexLock lock(&mu_);
      // At least every kClockCheck: a step of this replica's clock is found soon. Waited as
      // elapsed time (AwaitFor), so a step back during the wait does not stretch it past the
      // lease.
      const absl::Time now = deps_.clock->Now();
      deps_.clock->AwaitFor(mu_, absl::Condition(&stop_),
                            std::min({next_renew, next_end, now + kClockCheck}) - now);
      if (stop_) return;
    }
    const absl::Time now = deps_.clock->Now();
    // The store's clock, once a round: every lease time of the round is on it, and a step of
    // this replica's own clock shows as a change of the offset between the two, undone in the
    // times this replica counts on its own.
    const absl::StatusOr<absl::Time> store_now = deps_.leases->Now(now);
    if (store_now.ok()) {
      const absl::Duration step = NoteSkew(now, *store_now);
      next_renew += step;
      if (next_end != absl::InfinitePast() && next_end != absl::InfiniteFuture()) next_end += step;
    }
    if (now >= next_renew) {
      const bool answered = Renew(now, store_now);
      Rejoin(now);
      if (answered && deps_.own_journal != nullptr) deps_.own_journal->RetryErases();
      next_renew =
          now + (answered ? config_.renew_interval : std::min(retry, config_.renew_interval));
      retry = answered ? kRenewRetryFirst : std::min(2 * retry, kRenewRetryMost);
    }
    next_end = Watch(now, store_now);
  }
}

bool ReplicaMember::Renew(absl::Time now, const absl::StatusOr<absl::Time>& store_now) {
  int64_t epoch;
  {
    absl::MutexLock lock(&mu_);
    if (superseded_) return true;
    epoch = epoch_;
  }
  // The row's new end is on the store's clock; this replica's own view of it is counted on
  // its clock from `now`, before the store's was read, so it never outlasts the row's.
  absl::Status renewed =
      store_now.ok() ? deps_.leases->Renew(config_.id, epoch, *store_now + config_.lease_period)
                     : store_now.status();
  const absl::Time until = now + config_.lease_period;
  absl::MutexLock lock(&mu_);
  if (renewed.ok()) {
    if (now >= lease_end_) held_since_ = now;  // it had lapsed
    lease_end_ = until;
    if (!lost_.empty()) {
      log::Info("replica.lease_regained", {{"replica", config_.id}});
      lost_.clear();
    }
    return true;
  }
  // Taken over: this replica's runs were failed or moved by another; it must not go on as if
  // it still held them. Otherwise (the store is unreachable) it still holds its lease until
  // the lease ends, and takes no new work from then on.
  // Superseded: another process joined under this id (this one was frozen, or started twice);
  // it holds the lease now, and this one must only stop.
  const bool superseded = renewed.code() == absl::StatusCode::kAborted;
  const bool taken = renewed.code() == absl::StatusCode::kFailedPrecondition || superseded;
  log::Error("replica.renew_failed", {{"replica", config_.id}, {"error", renewed.ToString()}});
  std::string why;
  if (taken) {
    why = std::string(renewed.message());
  } else if (now >= lease_end_) {
    why = absl::StrCat("replica ", config_.id, " could not renew its lease, which ended at ",
                       absl::FormatTime(lease_end_));
  }
  if (superseded) {
    superseded_ = true;
  } else if (taken) {
    taken_over_ = true;
  } else {
    last_unanswered_ = now;
  }
  if (!why.empty() && (lost_.empty() || taken) && lost_ != why) {
    lost_ = why;
    log::Error("replica.lease_lost", {{"replica", config_.id}, {"why", lost_}});
  }
  return taken;
}

absl::Duration ReplicaMember::NoteSkew(absl::Time now, absl::Time store_now) {
  const absl::Duration skew = now - store_now;
  absl::MutexLock lock(&mu_);
  absl::Duration step;
  if (skew_known_ && absl::AbsDuration(skew - skew_) > kClockStepBound) {
    // This replica's clock jumped (an NTP step, an operator) by `step` against the store's:
    // what it counts on its own moves with it, so the jump neither ends its lease early nor
    // stretches it.
    step = skew - skew_;
    lease_end_ += step;
    held_since_ += step;
    last_unanswered_ += step;
    log::Warning("replica.clock_stepped",
                 {{"replica", config_.id}, {"step_seconds", absl::ToDoubleSeconds(step)}});
  }
  skew_known_ = true;
  skew_ = skew;
  const bool off = absl::AbsDuration(skew) > kClockSkewBound;
  if (off == skewed_) return step;
  skewed_ = off;
  // Said, never acted on: every lease decision is on the store's clock.
  if (off) {
    log::Warning("replica.clock_skew", {{"replica", config_.id},
                                        {"ahead_of_store_seconds", absl::ToDoubleSeconds(skew)},
                                        {"bound_seconds", absl::ToDoubleSeconds(kClockSkewBound)}});
  } else {
    log::Info("replica.clock_agrees",
              {{"replica", config_.id}, {"ahead_of_store_seconds", absl::ToDoubleSeconds(skew)}});
  }
  return step;
}

absl::Duration ReplicaMember::clock_skew() const {
  absl::MutexLock lock(&mu_);
  return skew_;
}

absl::Time ReplicaMember::Watch(absl::Time now, const absl::StatusOr<absl::Time>& store_now) {
  absl::StatusOr<std::vector<store::Lease>> leases =
      store_now.ok() ? deps_.leases->ListLeases() : store_now.status();
  if (!leases.ok()) {
    log::Error("replica.watch_failed",
               {{"replica", config_.id}, {"error", leases.status().ToString()}});
    absl::MutexLock lock(&mu_);
    last_unanswered_ = now;
    return absl::InfiniteFuture();  // looked at again at the next round
  }
  absl::Time next = absl::InfiniteFuture();
  for (const store::Lease& l : *leases) {
    if (l.replica_id == config_.id || l.cleaned) continue;
    {
      absl::MutexLock lock(&mu_);
      if (cleaning_.count(l.replica_id) > 0) continue;  // this replica's cleanup is under way
    }
    // When it may next be claimed, by the store's clock: at its end, or when a claim on it
    // runs out. Waited for on this replica's clock, which only counts the time until then.
    const absl::Time claimable =
        l.taken_over_by.empty() ? l.expires_at : std::max(l.expires_at, l.claim_until);
    if (claimable > *store_now) {
      next = std::min(next, now + (claimable - *store_now));
      continue;
    }
    if (!MayClaim(now)) continue;
    absl::StatusOr<bool> claimed = deps_.leases->ClaimTakeover(l.replica_id, config_.id, *store_now,
                                                               *store_now + config_.lease_period);
    if (!claimed.ok() || !*claimed) continue;  // another replica did, or its lease came back
    log::Warning("replica.takeover", {{"replica", config_.id},
                                      {"lost", l.replica_id},
                                      {"lease_ended", absl::FormatTime(l.expires_at)}});
    // The cleanup (store writes, upstream deletes) goes on the cleaner's thread: however long
    // it takes, this one goes on renewing this replica's own lease.
    absl::MutexLock lock(&mu_);
    cleaning_.insert(l.replica_id);
    to_clean_.push_back(l);
  }
  return next;
}

void ReplicaMember::CleanLoop() {
  while (true) {
    store::Lease dead;
    {
      absl::MutexLock lock(&mu_);
      auto ready = [this]()
                       ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) { return stop_ || !to_clean_.empty(); };
      deps_.clock->AwaitWithDeadline(mu_, absl::Condition(&ready), absl::InfiniteFuture());
      // A claim left undone at a stop runs out, and another replica takes it up.
      if (stop_) return;
      dead = to_clean_.front();
      to_clean_.pop_front();
    }
    absl::Status cleaned = CleanUpAfter(dead);
    absl::MutexLock lock(&mu_);
    cleaning_.erase(dead.replica_id);
    if (cleaned.ok()) {
      ++takeovers_;
      continue;
    }
    // The claim runs out and another replica (or this one) takes it up again.
    log::Error("replica.takeover_failed",
               {{"replica", config_.id}, {"lost", dead.replica_id}, {"error", cleaned.ToString()}});
  }
}

absl::Status ReplicaMember::CleanUpAfter(const store::Lease& dead) {
  // Its remote resources first, through this replica's providers (what a provider cannot tell
  // yet is asked again in the background, or swept by the lost replica's return): a sweep
  // done twice deletes nothing twice, so a claimer cut off after it leaves the next one the
  // same cleanup.
  std::set<std::string> remote;
  for (const auto& [name, provider] : deps_.remote_providers) remote.insert(name);
  if (!remote.empty()) {  // an empty set would list every provider's entries
    SANDGATE_RETURN_IF_ERROR(Sweep(std::make_unique<ReplicaJournal>(ReplicaJournal::Of(
                                       deps_.journal, dead.replica_id, std::move(remote))),
                                   &deps_.remote_providers));
  }
  ReportLeftOnItsHost(dead);
  // Then the rest in one commit: its running runs failed, its kept sessions ended, its slots
  // freed, its cleanup marked done.
  const std::string why =
      absl::StrCat("replica ", dead.replica_id, " stopped renewing its lease, which ended at ",
                   absl::FormatTime(dead.expires_at));
  return SettleLostReplica(
      {deps_.store, deps_.events, deps_.clock, dead.replica_id, config_.id, why, deps_.admission});
}

void ReplicaMember::ReportLeftOnItsHost(const store::Lease& dead) {
  // What only the lost replica's host can delete (local sandboxes: processes, cgroups, the
  // workspace) stays until it comes back and sweeps it; if it never does, an operator must.
  absl::StatusOr<std::vector<JournalEntry>> left =
      ReplicaJournal::Of(deps_.journal, dead.replica_id, {}).List();
  if (!left.ok() || left->empty()) return;
  std::vector<std::string> ids;  // the first 20 of `count`
  int64_t count = 0;
  for (const JournalEntry& e : *left) {
    if (deps_.remote_providers.count(e.provider) > 0) continue;  // swept above, or later
    if (++count <= 20) ids.push_back(e.id);
  }
  if (count == 0) return;
  log::Error("replica.resources_left",
             {{"replica", config_.id},
              {"lost", dead.replica_id},
              {"count", count},
              {"resources", ids},
              {"action", absl::StrCat("replica ", dead.replica_id,
                                      " deletes these when it starts again; if it never will, "
                                      "remove its sandboxes on its host (docs/replicas.md)")}});
}

}  // namespace sandgate::core
