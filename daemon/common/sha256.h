// Streaming SHA-256 (OpenSSL's), hex-encoded.
//
// Not thread safe; one hasher per stream.
#ifndef SANDGATE_COMMON_SHA256_H_
#define SANDGATE_COMMON_SHA256_H_

#include <memory>
#include <string>

#include "absl/strings/string_view.h"

namespace sandgate {

class Sha256 {
 public:
  Sha256();
  ~Sha256();
  void Update(absl::string_view data);
  // Lower-case hex; the hasher must not be updated afterwards.
  std::string HexDigest();

  static std::string Hex(absl::string_view data);

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace sandgate

#endif  // SANDGATE_COMMON_SHA256_H_
