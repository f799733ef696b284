// ForwardingAdmissionStore: an AdmissionStore that passes every call to another one, for
// tests that break a few calls of a real store (override those, forward the rest).
//
//   class RefusingRelease : public ForwardingAdmissionStore {
//     using ForwardingAdmissionStore::ForwardingAdmissionStore;
//     absl::Status Release(const std::string&) override { return absl::UnavailableError("x"); }
//   };
//
// Thread safe as the inner store is. `inner` outlives it.
#ifndef SANDGATE_TESTS_FAKES_FORWARDING_ADMISSION_STORE_H_
#define SANDGATE_TESTS_FAKES_FORWARDING_ADMISSION_STORE_H_

#include <optional>
#include <string>
#include <vector>

#include "store/admission_store.h"

namespace sandgate::testing {

class ForwardingAdmissionStore : public store::AdmissionStore {
 public:
  explicit ForwardingAdmissionStore(store::AdmissionStore* inner) : inner_(inner) {}

  using store::AdmissionStore::Enqueue;
  absl::StatusOr<bool> Enqueue(const store::QueuedRun& run, uint32_t max_waiting,
                               store::RoomHere room, v1::Event* queued) override {
    return inner_->Enqueue(run, max_waiting, room, queued);
  }
  absl::StatusOr<std::optional<store::QueuedRun>> Claim(const std::string& replica,
                                                        bool sandbox_room) override {
    return inner_->Claim(replica, sandbox_room);
  }
  absl::StatusOr<bool> Remove(const std::string& run_id) override { return inner_->Remove(run_id); }
  absl::Status Release(const std::string& run_id) override { return inner_->Release(run_id); }
  absl::Status ReleaseReplica(const std::string& replica) override {
    return inner_->ReleaseReplica(replica);
  }
  absl::StatusOr<store::WaitingRuns> Waiting() override { return inner_->Waiting(); }
  absl::StatusOr<std::optional<store::QueuedRun>> Find(const std::string& run_id) override {
    return inner_->Find(run_id);
  }
  absl::StatusOr<uint64_t> WaitingCount() override { return inner_->WaitingCount(); }
  absl::StatusOr<std::optional<absl::Time>> CountStart(const std::string& tenant, uint32_t limit,
                                                       absl::Time now) override {
    return inner_->CountStart(tenant, limit, now);
  }
  absl::StatusOr<bool> TakeSessionSlot(const std::string& tenant, const std::string& session_id,
                                       const std::string& replica, uint32_t limit) override {
    return inner_->TakeSessionSlot(tenant, session_id, replica, limit);
  }
  absl::Status ReleaseSessionSlot(const std::string& session_id) override {
    return inner_->ReleaseSessionSlot(session_id);
  }

 protected:
  store::AdmissionStore* inner() const { return inner_; }

 private:
  store::AdmissionStore* const inner_;
};

}  // namespace sandgate::testing

#endif  // SANDGATE_TESTS_FAKES_FORWARDING_ADMISSION_STORE_H_
