// ForwardingStore: a Store that passes every call to another one, for tests that watch or
// break a few calls of a real store (override those, forward the rest).
//
//   class CountingStore : public ForwardingStore {
//     using ForwardingStore::ForwardingStore;
//     absl::Status PutRun(const v1::Run& r) override { ++puts; return inner()->PutRun(r); }
//   };
//
// Thread safe as the inner store is. `inner` outlives it.
#ifndef SANDGATE_TESTS_FAKES_FORWARDING_STORE_H_
#define SANDGATE_TESTS_FAKES_FORWARDING_STORE_H_

#include <optional>
#include <string>
#include <vector>

#include "store/store.h"

namespace sandgate::testing {

class ForwardingStore : public store::Store {
 public:
  explicit ForwardingStore(store::Store* inner) : inner_(inner) {}

  absl::Status CreateRun(const v1::Run& r, const std::string& sha) override {
    return inner_->CreateRun(r, sha);
  }
  absl::Status PutRun(const v1::Run& r) override { return inner_->PutRun(r); }
  absl::StatusOr<v1::Run> GetRun(const std::string& id) override { return inner_->GetRun(id); }
  absl::StatusOr<store::RunPage> ListRuns(const std::string& t, uint32_t n,
                                          const std::string& tok) override {
    return inner_->ListRuns(t, n, tok);
  }
  absl::StatusOr<std::optional<store::KeyedRecord>> FindRunByIdempotencyKey(
      const std::string& t, const std::string& k) override {
    return inner_->FindRunByIdempotencyKey(t, k);
  }
  absl::StatusOr<std::vector<v1::Run>> ListUnfinishedRuns() override {
    return inner_->ListUnfinishedRuns();
  }
  absl::StatusOr<std::vector<v1::Run>> ListUnfinishedRunsOf(const std::string& replica) override {
    return inner_->ListUnfinishedRunsOf(replica);
  }
  absl::StatusOr<std::vector<v1::Session>> ListLiveSessionsOf(const std::string& replica) override {
    return inner_->ListLiveSessionsOf(replica);
  }
  absl::Status PutRunRequest(const std::string& id, const v1::RunAnalysisRequest& r) override {
    return inner_->PutRunRequest(id, r);
  }
  absl::StatusOr<v1::RunAnalysisRequest> GetRunRequest(const std::string& id) override {
    return inner_->GetRunRequest(id);
  }
  absl::Status CreateSession(const v1::Session& s, const std::string& sha) override {
    return inner_->CreateSession(s, sha);
  }
  absl::Status PutSession(const v1::Session& s) override { return inner_->PutSession(s); }
  absl::StatusOr<v1::Session> GetSession(const std::string& id) override {
    return inner_->GetSession(id);
  }
  absl::StatusOr<std::vector<v1::Session>> ListSessions(const std::string& t,
                                                        bool closed) override {
    return inner_->ListSessions(t, closed);
  }
  absl::StatusOr<std::optional<store::KeyedRecord>> FindSessionByIdempotencyKey(
      const std::string& t, const std::string& k) override {
    return inner_->FindSessionByIdempotencyKey(t, k);
  }
  absl::StatusOr<std::vector<std::string>> PurgeBefore(absl::Time cutoff) override {
    return inner_->PurgeBefore(cutoff);
  }
  absl::Status AppendEvent(const v1::Event& e) override { return inner_->AppendEvent(e); }
  absl::Status AppendEventsWithRuns(const std::vector<v1::Event>& events,
                                    const std::vector<v1::Run>& runs) override {
    return inner_->AppendEventsWithRuns(events, runs);
  }
  // Without sessions, through AppendEventsWithRuns: a test store that overrides only that
  // one still sees every batch.
  absl::Status AppendEventsWithRecords(const std::vector<v1::Event>& events,
                                       const std::vector<v1::Run>& runs,
                                       const std::vector<v1::Session>& sessions) override {
    if (sessions.empty()) return AppendEventsWithRuns(events, runs);
    return inner_->AppendEventsWithRecords(events, runs, sessions);
  }
  absl::Status SettleTakeover(const std::vector<v1::Event>& events,
                              const std::vector<v1::Run>& runs,
                              const std::vector<v1::Session>& sessions, const std::string& lost,
                              const std::string& by) override {
    return inner_->SettleTakeover(events, runs, sessions, lost, by);
  }
  absl::StatusOr<std::vector<v1::Event>> ReadEvents(const std::string& run, int64_t after,
                                                    uint32_t limit) override {
    return inner_->ReadEvents(run, after, limit);
  }
  absl::StatusOr<int64_t> LastSeq(const std::string& run) override { return inner_->LastSeq(run); }
  void FenceWrites(const std::string& replica, int64_t epoch) override {
    inner_->FenceWrites(replica, epoch);
  }
  absl::Status Record(const JournalEntry& e) override { return inner_->Record(e); }
  absl::Status Erase(const std::string& id) override { return inner_->Erase(id); }
  absl::StatusOr<std::vector<JournalEntry>> List() override { return inner_->List(); }

 protected:
  store::Store* inner() const { return inner_; }

 private:
  store::Store* const inner_;
};

}  // namespace sandgate::testing

#endif  // SANDGATE_TESTS_FAKES_FORWARDING_STORE_H_
