// FakeCredentials: the Credentials fake, a key held in memory that a test can change or make
// fail (a rotated key, a source that became unreadable). Unlike the real sources it does not
// check the key: a test hands it exactly what the code under test should see. Thread safe.
//
//   FakeCredentials creds("sk-test-key");
//   OpenAiClient client(&http, &creds, base_url);
//   creds.Fail(absl::FailedPreconditionError("API key file /k: the API key is empty"));
#ifndef SANDGATE_TESTS_FAKES_FAKE_CREDENTIALS_H_
#define SANDGATE_TESTS_FAKES_FAKE_CREDENTIALS_H_

#include <string>
#include <utility>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "upstream/credentials.h"

namespace sandgate::testing {

class FakeCredentials : public upstream::Credentials {
 public:
  explicit FakeCredentials(std::string key) : key_(std::move(key)) {}

  absl::StatusOr<std::string> ApiKey() const override {
    absl::MutexLock lock(&mu_);
    if (!error_.ok()) return error_;
    return key_;
  }
  // The key from the next call on.
  void Set(std::string key) {
    absl::MutexLock lock(&mu_);
    key_ = std::move(key);
    error_ = absl::OkStatus();
  }
  // Every call fails with `error` until the next Set.
  void Fail(absl::Status error) {
    absl::MutexLock lock(&mu_);
    error_ = std::move(error);
  }

 private:
  mutable absl::Mutex mu_;
  std::string key_ ABSL_GUARDED_BY(mu_);
  absl::Status error_ ABSL_GUARDED_BY(mu_);
};

}  // namespace sandgate::testing

#endif  // SANDGATE_TESTS_FAKES_FAKE_CREDENTIALS_H_
