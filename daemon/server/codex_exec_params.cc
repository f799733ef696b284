#include "server/codex_exec_params.h"

#include "absl/strings/ascii.h"
#include "absl/strings/str_cat.h"
#include "common/errors.h"

namespace sandgate::server::codex_params {

using Json = nlohmann::json;

const Json* Field(const Json& params, const char* name) {
  if (!params.is_object()) return nullptr;
  auto it = params.find(name);
  if (it == params.end() || it->is_null()) return nullptr;
  return &*it;
}

absl::StatusOr<std::string> StringField(const Json& params, const char* name) {
  const Json* v = Field(params, name);
  if (v == nullptr || !v->is_string()) {
    return errors::InvalidArgument(absl::StrCat("params.", name, " must be a string"));
  }
  return v->get<std::string>();
}

bool BoolField(const Json& params, const char* name, bool fallback) {
  const Json* v = Field(params, name);
  return v != nullptr && v->is_boolean() ? v->get<bool>() : fallback;
}

absl::StatusOr<std::string> PercentDecode(absl::string_view in) {
  std::string out;
  for (size_t i = 0; i < in.size(); ++i) {
    if (in[i] != '%') {
      out.push_back(in[i]);
      continue;
    }
    int value = 0;
    if (i + 2 >= in.size()) return errors::InvalidArgument("a bad %-escape in a path");
    for (int k = 1; k <= 2; ++k) {
      const char c = in[i + k];
      int digit = absl::ascii_isdigit(c)   ? c - '0'
                  : (c >= 'a' && c <= 'f') ? c - 'a' + 10
                  : (c >= 'A' && c <= 'F') ? c - 'A' + 10
                                           : -1;
      if (digit < 0) return errors::InvalidArgument("a bad %-escape in a path");
      value = value * 16 + digit;
    }
    if (value == 0) return errors::InvalidArgument("a path may not hold a NUL byte");
    out.push_back(static_cast<char>(value));
    i += 2;
  }
  return out;
}

}  // namespace sandgate::server::codex_params
