// Credentials: where the upstream API key comes from.
//
// The key is read on every call (never cached), so rotating the file or the variable takes
// effect on the next request without a restart. No implementation ever puts the key, or any
// part of the source's content, into a Status message or a log line.
//
//   FileCredentials creds("/etc/sandgate/openai.key");
//   SANDGATE_ASSIGN_OR_RETURN(std::string key, creds.ApiKey());
#ifndef SANDGATE_UPSTREAM_CREDENTIALS_H_
#define SANDGATE_UPSTREAM_CREDENTIALS_H_

#include <string>

#include "absl/status/statusor.h"

namespace sandgate::upstream {

// Thread safe: implementations accept concurrent ApiKey calls.
class Credentials {
 public:
  virtual ~Credentials() = default;
  // The key, surrounding whitespace trimmed; never empty on success. Errors name the source
  // (file path, variable name) and never its content.
  virtual absl::StatusOr<std::string> ApiKey() const = 0;
};

// The key is the content of a file (typically mode 0600). Missing or unreadable file: the
// errno-derived code (NOT_FOUND, PERMISSION_DENIED, ...); empty, or a key with a line break
// or control character inside: FAILED_PRECONDITION.
class FileCredentials : public Credentials {
 public:
  explicit FileCredentials(std::string path) : path_(std::move(path)) {}
  absl::StatusOr<std::string> ApiKey() const override;

 private:
  const std::string path_;
};

// The key is the value of an environment variable. Unset or empty: FAILED_PRECONDITION.
class EnvCredentials : public Credentials {
 public:
  explicit EnvCredentials(std::string variable) : variable_(std::move(variable)) {}
  absl::StatusOr<std::string> ApiKey() const override;

 private:
  const std::string variable_;
};

}  // namespace sandgate::upstream

#endif  // SANDGATE_UPSTREAM_CREDENTIALS_H_
