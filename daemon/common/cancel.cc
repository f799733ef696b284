#include "common/cancel.h"

#include <poll.h>
#include <sys/eventfd.h>
#include <unistd.h>

#include <cstdint>

namespace sandgate {

CancelToken::CancelToken() : fd_(eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK)) {}

CancelToken::~CancelToken() {
  if (fd_ >= 0) close(fd_);
}

void CancelToken::Cancel(std::string reason) {
  {
    absl::MutexLock lock(&mu_);
    if (cancelled_.load()) return;
    reason_ = std::move(reason);
    cancelled_.store(true, std::memory_order_release);
  }
  uint64_t one = 1;
  if (fd_ >= 0) (void)!write(fd_, &one, sizeof(one));
}

std::string CancelToken::reason() const {
  absl::MutexLock lock(&mu_);
  return reason_;
}

bool CancelToken::WaitFor(absl::Duration d) const {
  if (cancelled()) return true;
  struct pollfd p = {fd_, POLLIN, 0};
  int ms = static_cast<int>(absl::ToInt64Milliseconds(d));
  poll(&p, 1, ms < 0 ? 0 : ms);
  return cancelled();
}

}  // namespace sandgate
