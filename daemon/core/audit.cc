#include "core/audit.h"

#include <cerrno>

#include "absl/strings/str_cat.h"
#include "absl/time/time.h"
#include "common/errors.h"
#include "nlohmann/json.hpp"

namespace sandgate::core {

absl::StatusOr<std::unique_ptr<AuditLog>> AuditLog::Open(const std::string& path, Clock* clock) {
  FILE* f = std::fopen(path.c_str(), "ae");
  if (f == nullptr) return errors::FromErrno(errno, absl::StrCat("audit log ", path));
  return std::unique_ptr<AuditLog>(new AuditLog(f, clock));
}

AuditLog::~AuditLog() {
  absl::MutexLock lock(&mu_);
  std::fclose(file_);
}

void AuditLog::Record(const std::string& tenant, const std::string& action,
                      const std::string& target, const absl::Status& outcome) {
  nlohmann::json line = {
      {"ts", absl::FormatTime("%Y-%m-%dT%H:%M:%E3SZ", clock_->Now(), absl::UTCTimeZone())},
      {"tenant", tenant},
      {"action", action},
      {"target", target},
      {"outcome", outcome.ok() ? "OK" : absl::StatusCodeToString(outcome.code())}};
  if (!outcome.ok()) line["error"] = std::string(outcome.message());
  std::string text = line.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace) + "\n";
  absl::MutexLock lock(&mu_);
  std::fwrite(text.data(), 1, text.size(), file_);
  std::fflush(file_);
}

}  // namespace sandgate::core
