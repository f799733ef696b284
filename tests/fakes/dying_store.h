// DyingStore: a Store that writes `budget` times, then refuses every write (as after a
// SIGKILL): what a killed process leaves is what the inner store holds. With
// `at_final_record`, it dies at once after the first write that stores a finished run's
// record (the moment a run's finish is most fragile) instead. Reads go on (a test reads what
// is left).
//
//   DyingStore dying(inner.get(), /*budget=*/7);
//   ... run a daemon on &dying ...
//   if (dying.died()) { /* inspect *inner */ }
//
// Thread safe as the inner store is. `inner` outlives it.
#ifndef SANDGATE_TESTS_FAKES_DYING_STORE_H_
#define SANDGATE_TESTS_FAKES_DYING_STORE_H_

#include <atomic>
#include <string>
#include <vector>

#include "tests/fakes/forwarding_store.h"

namespace sandgate::testing {

class DyingStore : public ForwardingStore {
 public:
  DyingStore(store::Store* inner, int budget, bool at_final_record = false)
      : ForwardingStore(inner), left_(budget), at_final_record_(at_final_record) {}
  // Whether it refused a write, or was killed at a final record.
  bool died() const { return left_.load() < 0 || killed_at_final_.load(); }

  absl::Status CreateRun(const v1::Run& r, const std::string& sha) override {
    return Write([&] { return inner()->CreateRun(r, sha); });
  }
  absl::Status PutRun(const v1::Run& r) override {
    return Write([&] { return inner()->PutRun(r); }, {r});
  }
  absl::Status PutRunRequest(const std::string& id, const v1::RunAnalysisRequest& r) override {
    return Write([&] { return inner()->PutRunRequest(id, r); });
  }
  absl::Status CreateSession(const v1::Session& s, const std::string& sha) override {
    return Write([&] { return inner()->CreateSession(s, sha); });
  }
  absl::Status PutSession(const v1::Session& s) override {
    return Write([&] { return inner()->PutSession(s); });
  }
  absl::Status AppendEvent(const v1::Event& e) override {
    return Write([&] { return inner()->AppendEvent(e); });
  }
  absl::Status AppendEventsWithRuns(const std::vector<v1::Event>& events,
                                    const std::vector<v1::Run>& runs) override {
    return Write([&] { return inner()->AppendEventsWithRuns(events, runs); }, runs);
  }
  absl::Status AppendEventsWithRecords(const std::vector<v1::Event>& events,
                                       const std::vector<v1::Run>& runs,
                                       const std::vector<v1::Session>& sessions) override {
    return Write([&] { return inner()->AppendEventsWithRecords(events, runs, sessions); }, runs);
  }
  absl::Status SettleTakeover(const std::vector<v1::Event>& events,
                              const std::vector<v1::Run>& runs,
                              const std::vector<v1::Session>& sessions, const std::string& lost,
                              const std::string& by) override {
    return Write([&] { return inner()->SettleTakeover(events, runs, sessions, lost, by); }, runs);
  }
  absl::Status Record(const JournalEntry& e) override {
    return Write([&] { return inner()->Record(e); });
  }
  absl::Status Erase(const std::string& id) override {
    return Write([&] { return inner()->Erase(id); });
  }

 private:
  template <typename Fn>
  absl::Status Write(Fn write, const std::vector<v1::Run>& runs = {}) {
    if (left_.fetch_sub(1) <= 0) return absl::UnavailableError("the process was killed");
    absl::Status st = write();
    for (const v1::Run& r : runs) {
      if (st.ok() && at_final_record_ && r.status() >= v1::RUN_STATUS_SUCCEEDED) {
        left_ = 0;
        killed_at_final_ = true;
      }
    }
    return st;
  }
  std::atomic<int> left_;
  const bool at_final_record_;
  std::atomic<bool> killed_at_final_{false};
};

}  // namespace sandgate::testing

#endif  // SANDGATE_TESTS_FAKES_DYING_STORE_H_
