// RecordingSink: an EventSink that keeps every event, for agent tests. Thread safe.
#ifndef SANDGATE_TESTS_AGENT_RECORDING_SINK_H_
#define SANDGATE_TESTS_AGENT_RECORDING_SINK_H_

#include <string>
#include <vector>

#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "agent/agent.h"

namespace sandgate::testing {

class RecordingSink : public agent::EventSink {
 public:
  void Emit(v1::Event event) override {
    absl::MutexLock l(&mu_);
    events_.push_back(std::move(event));
  }
  uint32_t NextCommandId() override {
    absl::MutexLock l(&mu_);
    return ++next_id_;
  }
  std::vector<v1::Event> events() const {
    absl::MutexLock l(&mu_);
    return events_;
  }
  std::vector<v1::Event> OfType(const std::string& type) const {
    std::vector<v1::Event> out;
    for (const v1::Event& e : events()) {
      if (e.type() == type) out.push_back(e);
    }
    return out;
  }
  // Blocks until an event of `type` has been emitted; false after `real_timeout`, so a test
  // fails instead of hanging.
  bool AwaitType(const std::string& type, absl::Duration real_timeout = absl::Seconds(30)) const {
    auto seen = [this, &type]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
      for (const v1::Event& e : events_) {
        if (e.type() == type) return true;
      }
      return false;
    };
    absl::MutexLock l(&mu_);
    return mu_.AwaitWithTimeout(absl::Condition(&seen), real_timeout);
  }
  // Every command.output of `command_id` joined.
  std::string Output(uint32_t command_id) const {
    std::string out;
    for (const v1::Event& e : OfType("command.output")) {
      if (e.command_output().command_id() == command_id) out += e.command_output().data();
    }
    return out;
  }

 private:
  mutable absl::Mutex mu_;
  std::vector<v1::Event> events_ ABSL_GUARDED_BY(mu_);
  uint32_t next_id_ ABSL_GUARDED_BY(mu_) = 0;
};

}  // namespace sandgate::testing

#endif  // SANDGATE_TESTS_AGENT_RECORDING_SINK_H_
