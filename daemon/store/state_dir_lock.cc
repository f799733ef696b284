#include "store/state_dir_lock.h"

#include <fcntl.h>
#include <sys/file.h>
#include <unistd.h>

#include <cerrno>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/strip.h"
#include "common/errors.h"

namespace sandgate::store {
namespace {

// The pid the holder wrote, as text for the error; "unknown" when it wrote none (yet).
std::string HolderPid(int fd) {
  char buf[32] = {0};
  ssize_t n = pread(fd, buf, sizeof(buf) - 1, 0);
  int pid = 0;
  if (n <= 0 || !absl::SimpleAtoi(absl::StripAsciiWhitespace(absl::string_view(buf, n)), &pid) ||
      pid <= 0) {
    return "unknown";
  }
  return absl::StrCat(pid);
}

}  // namespace

absl::StatusOr<std::unique_ptr<StateDirLock>> StateDirLock::Acquire(const std::string& state_dir) {
  std::string path = state_dir + "/lock";
  UniqueFd fd(open(path.c_str(), O_RDWR | O_CREAT | O_CLOEXEC | O_NOFOLLOW, 0600));
  if (!fd.valid()) return errors::FromErrno(errno, absl::StrCat("open the state lock ", path));
  if (flock(fd.get(), LOCK_EX | LOCK_NB) != 0) {
    if (errno != EWOULDBLOCK) {
      return errors::FromErrno(errno, absl::StrCat("lock the state lock ", path));
    }
    return errors::FailedPrecondition(absl::StrCat(
        "state_dir ", state_dir, " is in use by another sandgated (pid ", HolderPid(fd.get()),
        ", holding ", path, "); stop it first, or give this daemon a state_dir of its own"));
  }
  // Ours: the pid for the next one who finds it taken.
  std::string pid = absl::StrCat(getpid(), "\n");
  if (ftruncate(fd.get(), 0) != 0 ||
      pwrite(fd.get(), pid.data(), pid.size(), 0) != static_cast<ssize_t>(pid.size())) {
    return errors::FromErrno(errno, absl::StrCat("write the pid to the state lock ", path));
  }
  return std::unique_ptr<StateDirLock>(new StateDirLock(std::move(path), std::move(fd)));
}

}  // namespace sandgate::store
