// FakeNotifier: store::Notifier in memory. Notify hands the payload at once, on the caller's
// thread, to the channel's subscribers; a lost notification is one the test does not send.
//
//   FakeNotifier notifier;
//   EventLog log(&store, &clock, {&notifier, absl::Milliseconds(500)});
//   notifier.Notify(store::kEventsChannel, "run_1 3");
//
// Thread safe.
#ifndef SANDGATE_TESTS_FAKES_FAKE_NOTIFIER_H_
#define SANDGATE_TESTS_FAKES_FAKE_NOTIFIER_H_

#include <map>
#include <string>
#include <utility>
#include <vector>

#include "absl/synchronization/mutex.h"
#include "store/notifier.h"

namespace sandgate::testing {

class FakeNotifier : public store::Notifier {
 public:
  absl::StatusOr<uint64_t> Subscribe(const std::string& channel, Callback cb) override {
    absl::MutexLock lock(&mu_);
    subs_[next_] = {channel, std::move(cb)};
    return next_++;
  }
  void Unsubscribe(uint64_t id) override {
    {
      absl::MutexLock lock(&mu_);
      subs_.erase(id);
    }
    absl::MutexLock deliver(&deliver_mu_);  // a delivery under way has ended
  }
  absl::Status Notify(const std::string& channel, const std::string& payload) override {
    absl::MutexLock deliver(&deliver_mu_);
    std::vector<Callback> cbs;
    {
      absl::MutexLock lock(&mu_);
      for (const auto& [id, sub] : subs_) {
        if (sub.first == channel) cbs.push_back(sub.second);
      }
    }
    for (const Callback& cb : cbs) cb(channel, payload);
    return absl::OkStatus();
  }
  size_t subscribers() {
    absl::MutexLock lock(&mu_);
    return subs_.size();
  }

 private:
  absl::Mutex deliver_mu_;  // held while callbacks run (Unsubscribe waits for them)
  absl::Mutex mu_;
  std::map<uint64_t, std::pair<std::string, Callback>> subs_ ABSL_GUARDED_BY(mu_);
  uint64_t next_ ABSL_GUARDED_BY(mu_) = 1;
};

}  // namespace sandgate::testing

#endif  // SANDGATE_TESTS_FAKES_FAKE_NOTIFIER_H_
