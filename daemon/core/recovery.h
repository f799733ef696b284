// Recovery: what a restarted daemon does about what the previous one left.
//
// JournalSweeper deletes every resource in the journal (ResourceJournal) through its
// provider. What a provider cannot tell yet (Sweep says UNAVAILABLE: an upstream create may
// still land) is asked again in the background every kRound for at most kGiveUpAfter, waiting
// through the injected Clock; whatever is still unknown then is left for the next start.
//
// RecoverRuns settles the runs the previous daemon left unfinished: a QUEUED one whose request
// was kept is queued again (through `requeue`); every other one, and one that cannot be queued
// again, ends FAILED with a terminal `run.finished` saying why, all in one commit.
// SettleLostReplica does the same for a lost replica at its takeover (core/replica.h), in
// one commit with the cleanup marked done: its running runs fail, its kept sessions end
// EXPIRED, its waiting runs stay in the shared queue (those it alone could start fail).
//
//   JournalSweeper sweeper({&store, &providers, &clock, metrics});
//   SANDGATE_RETURN_IF_ERROR(sweeper.Sweep());
//   SANDGATE_RETURN_IF_ERROR(RecoverRuns({&store, &events, &clock}, tenants, requeue));
//   ...
//   sweeper.StopBy(drain_deadline);  // on drain
//
// Thread safe.
#ifndef SANDGATE_CORE_RECOVERY_H_
#define SANDGATE_CORE_RECOVERY_H_

#include <functional>
#include <map>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "common/clock.h"
#include "common/journal.h"
#include "core/event_log.h"
#include "core/metrics.h"
#include "core/tenants.h"
#include "sandbox/sandbox.h"
#include "store/admission_store.h"
#include "store/store.h"

namespace sandgate::core {

// Not owned; all outlive the sweeper. `metrics` may be null.
struct SweeperDeps {
  store::Store* store = nullptr;
  const std::map<std::string, sandbox::Provider*>* providers = nullptr;
  Clock* clock = nullptr;
  Metrics* metrics = nullptr;
  // The entries swept; null = the store's journal. A replica sweeps only its own
  // (core/replica.h ReplicaJournal).
  ResourceJournal* journal = nullptr;
};

class JournalSweeper {
 public:
  static constexpr absl::Duration kRound = absl::Milliseconds(250);
  static constexpr absl::Duration kGiveUpAfter = absl::Minutes(1);

  explicit JournalSweeper(SweeperDeps deps) : deps_(deps) {}
  ~JournalSweeper() { StopBy(absl::InfinitePast()); }

  // Sweeps every journal entry once; those a provider cannot tell yet go on in the
  // background. Returns without waiting for them. Call at most once.
  absl::Status Sweep();

  // The background rounds end by `deadline` at the latest (those still unknown stay in the
  // journal); returns once they have.
  void StopBy(absl::Time deadline);

 private:
  void Log(const JournalEntry& entry, const absl::Status& swept);
  void Later(std::vector<JournalEntry> entries);

  const SweeperDeps deps_;
  absl::Mutex mu_;
  absl::Time until_ ABSL_GUARDED_BY(mu_) = absl::InfiniteFuture();
  std::thread later_;
};

// Not owned; all outlive the call.
struct RecoveryDeps {
  store::Store* store = nullptr;
  EventLog* events = nullptr;
  Clock* clock = nullptr;
  // Whose runs are settled: this replica's own (and those stored before replicas, which name
  // none); or a lost replica's, whose takeover `adopted_by` claimed, failing its running runs
  // and ending its kept sessions with `lost_why`.
  std::string replica;
  std::string adopted_by;
  std::string lost_why;
  store::AdmissionStore* admission = nullptr;  // the queue the replicas share; null: none
};

// Queues again a run the previous daemon left QUEUED, from its kept request; `why` says to
// the run's followers why it waits again.
using Requeue = std::function<absl::Status(const Caller&, const v1::Run&, v1::RunAnalysisRequest,
                                           const std::string& why)>;

// `run` FAILED with `why` now, and its terminal run.finished, to be stored together.
std::pair<v1::Event, v1::Run> FailedRun(v1::Run run, const std::string& why, Clock* clock);

absl::Status RecoverRuns(const RecoveryDeps& deps, const Tenants& tenants, const Requeue& requeue);
absl::Status SettleLostReplica(const RecoveryDeps& deps);

}  // namespace sandgate::core

#endif  // SANDGATE_CORE_RECOVERY_H_
