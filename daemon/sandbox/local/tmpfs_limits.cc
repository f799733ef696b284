#include "sandbox/local/tmpfs_limits.h"

#include <fcntl.h>
#include <linux/mount.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <cerrno>

#include "absl/strings/str_cat.h"
#include "common/errors.h"
#include "common/unique_fd.h"

namespace sandgate::sandbox::local {

absl::Status SetTmpfsInodeLimit(int dirfd, uint64_t inodes) {
  UniqueFd fs(static_cast<int>(
      syscall(SYS_fspick, dirfd, "", FSPICK_EMPTY_PATH | FSPICK_CLOEXEC | FSPICK_NO_AUTOMOUNT)));
  if (!fs.valid()) return errors::FromErrno(errno, "fspick");
  const std::string value = absl::StrCat(inodes);
  if (syscall(SYS_fsconfig, fs.get(), FSCONFIG_SET_STRING, "nr_inodes", value.c_str(), 0) != 0) {
    return errors::FromErrno(errno, "fsconfig nr_inodes");
  }
  if (syscall(SYS_fsconfig, fs.get(), FSCONFIG_CMD_RECONFIGURE, nullptr, nullptr, 0) != 0) {
    const int err = errno;
    // The kernel's reason, if it left one in the context's message log.
    char msg[256];
    ssize_t n = read(fs.get(), msg, sizeof(msg) - 1);
    return errors::FromErrno(err,
                             n > 0 ? absl::StrCat("reconfigure tmpfs: ", absl::string_view(msg, n))
                                   : "reconfigure tmpfs");
  }
  return absl::OkStatus();
}

}  // namespace sandgate::sandbox::local
