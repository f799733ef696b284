// Structured logs: one JSON object per line on stderr.
//
// Thread safe. A line says what happened to whom: pass tenant/session/run ids as fields.
// Never pass a credential; nothing here can tell one from an ordinary string.
//
//   log::Info("run.started", {{"tenant", "local"}, {"run", run_id}});
#ifndef SANDGATE_COMMON_LOG_H_
#define SANDGATE_COMMON_LOG_H_

#include <string>

#include "absl/strings/string_view.h"
#include "nlohmann/json.hpp"

namespace sandgate::log {

enum class Level { kDebug, kInfo, kWarning, kError };

void SetMinLevel(Level level);
void Write(Level level, absl::string_view event, const nlohmann::json& fields);
inline void Debug(absl::string_view e, const nlohmann::json& f = nlohmann::json::object()) {
  Write(Level::kDebug, e, f);
}
inline void Info(absl::string_view e, const nlohmann::json& f = nlohmann::json::object()) {
  Write(Level::kInfo, e, f);
}
inline void Warning(absl::string_view e, const nlohmann::json& f = nlohmann::json::object()) {
  Write(Level::kWarning, e, f);
}
inline void Error(absl::string_view e, const nlohmann::json& f = nlohmann::json::object()) {
  Write(Level::kError, e, f);
}

}  // namespace sandgate::log

#endif  // SANDGATE_COMMON_LOG_H_
