// FakeImageBuilder: an ImageBuilder (core/images.h) that makes a tiny root in microseconds:
// <dir>/usr/bin/<package> for each package, saying one progress line per package. A test may
// hold builds at a gate (Hold/Release) to see what happens while one runs, make them fail,
// and read how many ran and how many ran at once.
//
// Thread safe.
#ifndef SANDGATE_TESTS_FAKES_FAKE_IMAGE_BUILDER_H_
#define SANDGATE_TESTS_FAKES_FAKE_IMAGE_BUILDER_H_

#include <sys/stat.h>

#include <algorithm>
#include <fstream>
#include <string>

#include "absl/strings/str_cat.h"
#include "absl/synchronization/mutex.h"
#include "common/errors.h"
#include "core/images.h"

namespace sandgate::testing {

class FakeImageBuilder : public core::ImageBuilder {
 public:
  absl::Status Build(const core::ImageRecipe& recipe, const std::string& dir,
                     const std::function<void(absl::string_view line)>& progress,
                     const CancelToken& cancel) override {
    {
      absl::MutexLock lock(&mu_);
      ++builds_;
      ++running_;
      max_running_ = std::max(max_running_, running_);
    }
    progress("fake: started");
    // Held at the gate until released or cancelled.
    for (;;) {
      {
        absl::MutexLock lock(&mu_);
        if (!held_) break;
      }
      if (cancel.WaitFor(absl::Milliseconds(5))) break;
    }
    absl::Status result;
    {
      absl::MutexLock lock(&mu_);
      --running_;
      result = fail_with_;
    }
    if (cancel.cancelled()) return errors::Cancelled(cancel.reason());
    if (!result.ok()) return result;
    for (const std::string& d : {dir, dir + "/usr", dir + "/usr/bin", dir + "/etc"}) {
      if (mkdir(d.c_str(), 0755) != 0) return errors::FromErrno(errno, absl::StrCat("mkdir ", d));
    }
    for (const std::string& p : recipe.packages) {
      std::ofstream(dir + "/usr/bin/" + p) << "#!/bin/sh\necho " << p << "\n";
      progress(absl::StrCat("fake: unpacked ", p));
    }
    return absl::OkStatus();
  }

  void Hold() {
    absl::MutexLock lock(&mu_);
    held_ = true;
  }
  void Release() {
    absl::MutexLock lock(&mu_);
    held_ = false;
  }
  void FailWith(absl::Status s) {
    absl::MutexLock lock(&mu_);
    fail_with_ = std::move(s);
  }
  // Waits until `n` builds have started (they may be held).
  void AwaitStarted(int n) {
    absl::MutexLock lock(&mu_);
    auto started = [this, n]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) { return builds_ >= n; };
    mu_.Await(absl::Condition(&started));
  }
  int builds() {
    absl::MutexLock lock(&mu_);
    return builds_;
  }
  int max_running() {
    absl::MutexLock lock(&mu_);
    return max_running_;
  }

 private:
  absl::Mutex mu_;
  bool held_ ABSL_GUARDED_BY(mu_) = false;
  absl::Status fail_with_ ABSL_GUARDED_BY(mu_);
  int builds_ ABSL_GUARDED_BY(mu_) = 0;
  int running_ ABSL_GUARDED_BY(mu_) = 0;
  int max_running_ ABSL_GUARDED_BY(mu_) = 0;
};

}  // namespace sandgate::testing

#endif  // SANDGATE_TESTS_FAKES_FAKE_IMAGE_BUILDER_H_
