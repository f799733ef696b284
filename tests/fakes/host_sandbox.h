// HostProvider: a fake sandbox provider whose sessions are plain temporary
// directories on the host, with commands run as ordinary child processes. No
// isolation at all — it exists so core/ and agent/ can be tested against the
// Provider contract (streaming output, timeouts, cancellation, files,
// journaling) without bubblewrap.
//
// Thread safe. Tests can make the next Create, Close or fork fail, play a network
// decision as a session's proxy would, and count live sessions.
#ifndef SANDGATE_TESTS_FAKES_HOST_SANDBOX_H_
#define SANDGATE_TESTS_FAKES_HOST_SANDBOX_H_

#include <atomic>
#include <functional>
#include <map>
#include <memory>
#include <set>
#include <string>
#include <utility>

#include "absl/synchronization/mutex.h"
#include "common/journal.h"
#include "sandbox/sandbox.h"

namespace sandgate::testing {

class HostProvider : public sandbox::Provider {
 public:
  // `journal` is not owned and may be null.
  explicit HostProvider(ResourceJournal* journal = nullptr) : journal_(journal) {}
  std::string name() const override { return "local"; }
  absl::StatusOr<std::unique_ptr<sandbox::Session>> Create(const sandbox::SessionSpec& spec,
                                                           const CancelToken* cancel) override;
  absl::Status Sweep(const JournalEntry& entry) override;

  void FailNextCreate(absl::Status status) {
    absl::MutexLock lock(&mu_);
    fail_next_ = std::move(status);
  }
  // The next Close of any session deletes what it can, then returns `status`.
  void FailNextClose(absl::Status status) {
    absl::MutexLock lock(&mu_);
    fail_next_close_ = std::move(status);
  }
  absl::Status TakeCloseFailure() {
    absl::MutexLock lock(&mu_);
    return std::exchange(fail_next_close_, absl::OkStatus());
  }
  // The next Exec of any session fails as a fork() failing with `err` would (EAGAIN: the
  // process table is full), without forking.
  void FailNextFork(int err) { fail_next_fork_.store(err); }
  int TakeForkFailure() { return fail_next_fork_.exchange(0); }
  // Calls live session `session_id`'s SessionSpec::on_network_decision with
  // `decision`, as its proxy would on a connection. False when there is no such
  // session or it has no callback.
  bool Decide(const std::string& session_id, const sandbox::NetworkDecision& decision);
  // Ends live session `session_id` on its own, as a sandbox whose processes died: its Health
  // says expired with `reason`, and its OnEnded callback is called from this thread. False
  // when there is no such session.
  bool Die(const std::string& session_id, const std::string& reason);
  // Registers how a live session is killed by Die (`die` takes the reason).
  void OnDie(const std::string& session_id, std::function<void(const std::string&)> die) {
    absl::MutexLock lock(&mu_);
    deaths_[session_id] = std::move(die);
  }
  void Forget(const std::string& session_id) {
    absl::MutexLock lock(&mu_);
    decisions_.erase(session_id);
    deaths_.erase(session_id);
    open_.erase(session_id);
  }
  // The sessions not closed yet whose root is `root_dir` (as BwrapProvider::SessionsOnRoot).
  std::vector<std::string> SessionsOnRoot(const std::string& root_dir) {
    absl::MutexLock lock(&mu_);
    std::vector<std::string> ids;
    for (const std::string& id : open_) {
      if (root_dirs_[id] == root_dir) ids.push_back(id);
    }
    return ids;
  }
  // What every session's Usage() answers from now on (the host fake has no cgroups).
  void SetUsage(sandbox::ResourceUsage usage) {
    absl::MutexLock lock(&mu_);
    usage_ = std::move(usage);
  }
  sandbox::ResourceUsage usage() {
    absl::MutexLock lock(&mu_);
    return usage_;
  }
  // The root file system (SessionSpec::root_dir) session `id` was created with; "" = the host's.
  std::string root_dir_of(const std::string& session_id) {
    absl::MutexLock lock(&mu_);
    auto it = root_dirs_.find(session_id);
    return it == root_dirs_.end() ? "" : it->second;
  }
  int live_sessions() const { return live_.load(); }
  int created_sessions() const { return created_.load(); }
  std::atomic<int>& live() { return live_; }
  ResourceJournal* journal() { return journal_; }

 private:
  ResourceJournal* const journal_;
  absl::Mutex mu_;
  absl::Status fail_next_ ABSL_GUARDED_BY(mu_);
  absl::Status fail_next_close_ ABSL_GUARDED_BY(mu_);
  sandbox::ResourceUsage usage_ ABSL_GUARDED_BY(mu_);
  std::map<std::string, std::function<void(const sandbox::NetworkDecision&)>> decisions_
      ABSL_GUARDED_BY(mu_);
  std::map<std::string, std::function<void(const std::string&)>> deaths_ ABSL_GUARDED_BY(mu_);
  std::map<std::string, std::string> root_dirs_ ABSL_GUARDED_BY(mu_);
  std::set<std::string> open_ ABSL_GUARDED_BY(mu_);  // created, not closed
  std::atomic<int> live_{0};
  std::atomic<int> created_{0};
  std::atomic<int> fail_next_fork_{0};
};

}  // namespace sandgate::testing

#endif  // SANDGATE_TESTS_FAKES_HOST_SANDBOX_H_
