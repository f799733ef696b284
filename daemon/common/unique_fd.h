// UniqueFd: owns one file descriptor and closes it exactly once.
//
// Not thread safe (like any value type).
#ifndef SANDGATE_COMMON_UNIQUE_FD_H_
#define SANDGATE_COMMON_UNIQUE_FD_H_

#include <unistd.h>

#include <utility>

namespace sandgate {

class UniqueFd {
 public:
  UniqueFd() = default;
  explicit UniqueFd(int fd) : fd_(fd) {}
  UniqueFd(UniqueFd&& o) noexcept : fd_(o.release()) {}
  UniqueFd& operator=(UniqueFd&& o) noexcept {
    if (this != &o) reset(o.release());
    return *this;
  }
  UniqueFd(const UniqueFd&) = delete;
  UniqueFd& operator=(const UniqueFd&) = delete;
  ~UniqueFd() { reset(); }

  int get() const { return fd_; }
  bool valid() const { return fd_ >= 0; }
  int release() { return std::exchange(fd_, -1); }
  void reset(int fd = -1) {
    if (fd_ >= 0) ::close(fd_);
    fd_ = fd;
  }

 private:
  int fd_ = -1;
};

}  // namespace sandgate

#endif  // SANDGATE_COMMON_UNIQUE_FD_H_
