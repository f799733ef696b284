// The parameters of Codex's exec-server requests (server/codex_exec_server.h): typed fields
// of a JSON-RPC `params` object, and the %-escapes of a file:// URL. Internal to server/.
// Pure functions; thread safe.
#ifndef SANDGATE_SERVER_CODEX_EXEC_PARAMS_H_
#define SANDGATE_SERVER_CODEX_EXEC_PARAMS_H_

#include <nlohmann/json.hpp>
#include <string>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace sandgate::server::codex_params {

// `params[name]`, or null when `params` is not an object or the field is absent or null.
const nlohmann::json* Field(const nlohmann::json& params, const char* name);
// A string field; INVALID_ARGUMENT "params.NAME must be a string" otherwise.
absl::StatusOr<std::string> StringField(const nlohmann::json& params, const char* name);
// A boolean field, or `fallback` when it is absent or not a boolean.
bool BoolField(const nlohmann::json& params, const char* name, bool fallback);
// Decodes the %XX escapes of a URL's path; refuses a bad escape and a NUL.
absl::StatusOr<std::string> PercentDecode(absl::string_view in);

}  // namespace sandgate::server::codex_params

#endif  // SANDGATE_SERVER_CODEX_EXEC_PARAMS_H_
