#include "upstream/http_client.h"

#include "absl/strings/match.h"
#include "absl/strings/str_replace.h"
#include "absl/strings/strip.h"

namespace sandgate::upstream {
namespace {

bool IsSecretHeader(absl::string_view name) {
  return absl::EqualsIgnoreCase(name, "Authorization") ||
         absl::EqualsIgnoreCase(name, "Proxy-Authorization") ||
         absl::EqualsIgnoreCase(name, "api-key") || absl::EqualsIgnoreCase(name, "x-api-key") ||
         absl::EqualsIgnoreCase(name, "Cookie");
}

}  // namespace

const std::string* HttpHeaders::Find(absl::string_view name) const {
  for (const auto& [key, value] : fields_) {
    if (absl::EqualsIgnoreCase(key, name)) return &value;
  }
  return nullptr;
}

std::string HttpHeaders::Get(absl::string_view name) const {
  const std::string* value = Find(name);
  return value == nullptr ? std::string() : *value;
}

std::vector<std::pair<std::string, std::string>> RedactedHeaders(const HttpHeaders& headers) {
  std::vector<std::pair<std::string, std::string>> out;
  out.reserve(headers.fields().size());
  for (const auto& [name, value] : headers.fields()) {
    out.emplace_back(name, IsSecretHeader(name) ? std::string("[REDACTED]") : value);
  }
  return out;
}

std::string RedactSecrets(absl::string_view text, const HttpHeaders& headers) {
  std::string out(text);
  for (const auto& [name, value] : headers.fields()) {
    if (!IsSecretHeader(name)) continue;
    absl::string_view token = value;
    absl::ConsumePrefix(&token, "Bearer ");
    token = absl::StripAsciiWhitespace(token);
    // Longest first, so the whole value is replaced before its token part.
    if (!value.empty()) out = absl::StrReplaceAll(out, {{value, "[REDACTED]"}});
    if (!token.empty()) out = absl::StrReplaceAll(out, {{token, "[REDACTED]"}});
  }
  return out;
}

}  // namespace sandgate::upstream
