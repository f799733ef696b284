// FakeJournal: an in-memory ResourceJournal for tests (nothing is durable).
//
// Thread safe.
#ifndef SANDGATE_TESTS_FAKES_FAKE_JOURNAL_H_
#define SANDGATE_TESTS_FAKES_FAKE_JOURNAL_H_

#include <map>
#include <string>
#include <vector>

#include "absl/synchronization/mutex.h"
#include "common/journal.h"

namespace sandgate::testing {

class FakeJournal : public ResourceJournal {
 public:
  absl::Status Record(const JournalEntry& entry) override {
    absl::MutexLock l(&mu_);
    entries_[entry.id] = entry;
    return absl::OkStatus();
  }
  absl::Status Erase(const std::string& id) override {
    absl::MutexLock l(&mu_);
    entries_.erase(id);
    return absl::OkStatus();
  }
  absl::StatusOr<std::vector<JournalEntry>> List() override {
    absl::MutexLock l(&mu_);
    std::vector<JournalEntry> out;
    for (const auto& [id, e] : entries_) out.push_back(e);
    return out;
  }
  bool Has(const std::string& id) {
    absl::MutexLock l(&mu_);
    return entries_.count(id) > 0;
  }

 private:
  absl::Mutex mu_;
  std::map<std::string, JournalEntry> entries_ ABSL_GUARDED_BY(mu_);
};

}  // namespace sandgate::testing

#endif  // SANDGATE_TESTS_FAKES_FAKE_JOURNAL_H_
