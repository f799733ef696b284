#include "sandbox/local/exit_watcher.h"

#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <unistd.h>

#include <cerrno>

#include "common/errors.h"
#include "common/log.h"

namespace sandgate::sandbox::local {

absl::StatusOr<std::unique_ptr<ExitWatcher>> ExitWatcher::Create() {
  UniqueFd epoll(epoll_create1(EPOLL_CLOEXEC));
  if (!epoll.valid()) return errors::FromErrno(errno, "exit watcher: epoll_create1");
  UniqueFd wake(eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC));
  if (!wake.valid()) return errors::FromErrno(errno, "exit watcher: eventfd");
  struct epoll_event ev = {};
  ev.events = EPOLLIN;
  ev.data.u64 = 0;  // no watch has key 0
  if (epoll_ctl(epoll.get(), EPOLL_CTL_ADD, wake.get(), &ev) != 0) {
    return errors::FromErrno(errno, "exit watcher: epoll_ctl(eventfd)");
  }
  std::unique_ptr<ExitWatcher> w(new ExitWatcher(std::move(epoll), std::move(wake)));
  w->thread_ = std::thread([p = w.get()] { p->Loop(); });
  return w;
}

ExitWatcher::~ExitWatcher() {
  {
    absl::MutexLock l(&mu_);
    stopping_ = true;
  }
  const uint64_t one = 1;
  (void)!write(wake_.get(), &one, sizeof(one));
  if (thread_.joinable()) thread_.join();
}

uint64_t ExitWatcher::Watch(int pidfd, std::function<void()> exited) {
  absl::MutexLock l(&mu_);
  const uint64_t key = next_key_++;
  struct epoll_event ev = {};
  // One shot: a pidfd stays readable for good once its process has exited.
  ev.events = EPOLLIN | EPOLLONESHOT;
  ev.data.u64 = key;
  if (epoll_ctl(epoll_.get(), EPOLL_CTL_ADD, pidfd, &ev) != 0) {
    log::Warning("sandbox.exit_watch_failed", {{"errno", errno}});
    return 0;
  }
  watched_.emplace(key, Watched{pidfd, std::move(exited)});
  return key;
}

void ExitWatcher::Unwatch(uint64_t key) {
  absl::MutexLock l(&mu_);
  auto it = watched_.find(key);
  if (it == watched_.end()) return;
  epoll_ctl(epoll_.get(), EPOLL_CTL_DEL, it->second.pidfd, nullptr);
  watched_.erase(it);
}

void ExitWatcher::Loop() {
  for (;;) {
    struct epoll_event events[16];
    const int n = epoll_wait(epoll_.get(), events, 16, -1);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) {
      log::Error("sandbox.exit_watcher_failed", {{"errno", errno}});
      return;
    }
    absl::MutexLock l(&mu_);
    if (stopping_) return;
    for (int i = 0; i < n; ++i) {
      auto it = watched_.find(events[i].data.u64);
      if (it == watched_.end()) continue;  // the wake-up, or unwatched meanwhile
      std::function<void()> exited = std::move(it->second.exited);
      epoll_ctl(epoll_.get(), EPOLL_CTL_DEL, it->second.pidfd, nullptr);
      watched_.erase(it);
      if (exited) exited();
    }
  }
}

}  // namespace sandgate::sandbox::local
