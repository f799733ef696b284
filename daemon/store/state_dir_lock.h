// StateDirLock: one daemon per state directory.
//
// Two daemons on one state_dir wreck each other: the second deletes the first's socket,
// bumps its lease epoch (after which the first's writes are refused) and sweeps the
// sandboxes the first is using. So the daemon takes this lock first thing, before it opens
// or removes anything in the directory, and holds it for its whole life: an exclusive
// flock(2) on `<state_dir>/lock`, which the kernel drops when the process dies (however it
// dies), so a crash never leaves a stale lock. The descriptor is close-on-exec: no sandbox
// or other child inherits the lock and keeps it past the daemon. The file holds the pid of
// the holder, for the error that names it.
//
//   SANDGATE_ASSIGN_OR_RETURN(std::unique_ptr<StateDirLock> lock,
//                             StateDirLock::Acquire("/var/lib/sandgate"));
//   ...                                 // the directory is this process's until `lock` goes
//
// Thread safe (immutable after Acquire).
#ifndef SANDGATE_STORE_STATE_DIR_LOCK_H_
#define SANDGATE_STORE_STATE_DIR_LOCK_H_

#include <memory>
#include <string>

#include "absl/status/statusor.h"
#include "common/unique_fd.h"

namespace sandgate::store {

class StateDirLock {
 public:
  // Takes the lock of `state_dir` (which must exist) without waiting. FAILED_PRECONDITION
  // naming the directory and the holder's pid when another process holds it; the errno's
  // status when the lock file cannot be opened or locked.
  static absl::StatusOr<std::unique_ptr<StateDirLock>> Acquire(const std::string& state_dir);
  // Releases the lock (closes the descriptor).
  ~StateDirLock() = default;
  StateDirLock(const StateDirLock&) = delete;
  StateDirLock& operator=(const StateDirLock&) = delete;

  const std::string& path() const { return path_; }

 private:
  StateDirLock(std::string path, UniqueFd fd) : path_(std::move(path)), fd_(std::move(fd)) {}
  const std::string path_;
  const UniqueFd fd_;
};

}  // namespace sandgate::store

#endif  // SANDGATE_STORE_STATE_DIR_LOCK_H_
