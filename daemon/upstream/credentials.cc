#include "upstream/credentials.h"

#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>

#include "absl/strings/ascii.h"
#include "absl/strings/str_cat.h"
#include "common/errors.h"
#include "common/unique_fd.h"

namespace sandgate::upstream {
namespace {

// A key is sent in an HTTP header; anything that could end or split the header line is
// refused. `source` names where the key came from; the key itself is never quoted.
absl::StatusOr<std::string> CheckedKey(absl::string_view raw, absl::string_view source) {
  absl::string_view key = absl::StripAsciiWhitespace(raw);
  if (key.empty())
    return errors::FailedPrecondition(absl::StrCat(source, ": the API key is empty"));
  for (char c : key) {
    if (static_cast<unsigned char>(c) < 0x20 || c == 0x7f) {
      return errors::FailedPrecondition(
          absl::StrCat(source, ": the API key contains a line break or control character"));
    }
  }
  return std::string(key);
}

// Keys are short; a larger file is a wrong path, not a key.
constexpr size_t kMaxKeyFileBytes = 64 * 1024;

}  // namespace

absl::StatusOr<std::string> FileCredentials::ApiKey() const {
  const std::string source = absl::StrCat("API key file ", path_);
  UniqueFd fd(open(path_.c_str(), O_RDONLY | O_CLOEXEC | O_NOCTTY));
  if (!fd.valid()) return errors::FromErrno(errno, source);
  std::string content;
  char buf[4096];
  for (;;) {
    ssize_t n = read(fd.get(), buf, sizeof(buf));
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) return errors::FromErrno(errno, source);
    if (n == 0) break;
    content.append(buf, static_cast<size_t>(n));
    if (content.size() > kMaxKeyFileBytes) {
      return errors::FailedPrecondition(
          absl::StrCat(source, ": larger than ", kMaxKeyFileBytes, " bytes, not an API key"));
    }
  }
  return CheckedKey(content, source);
}

absl::StatusOr<std::string> EnvCredentials::ApiKey() const {
  const std::string source = absl::StrCat("environment variable ", variable_);
  const char* value = std::getenv(variable_.c_str());
  if (value == nullptr) return errors::FailedPrecondition(absl::StrCat(source, " is not set"));
  return CheckedKey(value, source);
}

}  // namespace sandgate::upstream
