#include "common/log.h"

#include <atomic>
#include <cstdio>

#include "absl/time/clock.h"
#include "absl/time/time.h"

namespace sandgate::log {
namespace {
std::atomic<int> min_level{static_cast<int>(Level::kInfo)};

const char* Name(Level level) {
  switch (level) {
    case Level::kDebug:
      return "debug";
    case Level::kInfo:
      return "info";
    case Level::kWarning:
      return "warning";
    case Level::kError:
      return "error";
  }
  return "info";
}
}  // namespace

void SetMinLevel(Level level) { min_level.store(static_cast<int>(level)); }

void Write(Level level, absl::string_view event, const nlohmann::json& fields) {
  if (static_cast<int>(level) < min_level.load()) return;
  nlohmann::json line = {
      {"ts", absl::FormatTime("%Y-%m-%dT%H:%M:%E3SZ", absl::Now(), absl::UTCTimeZone())},
      {"level", Name(level)},
      {"event", std::string(event)}};
  if (fields.is_object()) {
    for (auto it = fields.begin(); it != fields.end(); ++it) line[it.key()] = it.value();
  }
  // One fwrite per line keeps concurrent lines whole.
  std::string text = line.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace) + "\n";
  std::fwrite(text.data(), 1, text.size(), stderr);
}

}  // namespace sandgate::log
