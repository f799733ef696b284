// Audit: who did what, one JSON object per line in <state_dir>/audit.log.
//
// Every call that changes something (runs started or cancelled, sessions created, kept alive
// or closed, commands, uploads) is recorded with the tenant, the action, its target and the
// outcome. Nothing a caller sent is copied beyond names and ids: no input, no command line,
// no environment value.
//
// Thread safe.
#ifndef SANDGATE_CORE_AUDIT_H_
#define SANDGATE_CORE_AUDIT_H_

#include <cstdio>
#include <memory>
#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "common/clock.h"

namespace sandgate::core {

class AuditLog {
 public:
  static absl::StatusOr<std::unique_ptr<AuditLog>> Open(const std::string& path, Clock* clock);
  ~AuditLog();
  void Record(const std::string& tenant, const std::string& action, const std::string& target,
              const absl::Status& outcome);

 private:
  AuditLog(FILE* f, Clock* clock) : file_(f), clock_(clock) {}
  absl::Mutex mu_;
  FILE* const file_ ABSL_PT_GUARDED_BY(mu_);
  Clock* const clock_;
};

}  // namespace sandgate::core

#endif  // SANDGATE_CORE_AUDIT_H_
