// The one address syntax of sandgate, for the daemon's `listen` and the CLI's --addr alike,
// so that what the daemon prints ("sandgated listening on tcp:127.0.0.1:7443") can be pasted
// into the CLI.
//
//   unix:PATH        a Unix socket (PATH as gRPC takes it: relative or absolute)
//   tcp:HOST:PORT    TCP; HOST a name, an IPv4 address or a bracketed IPv6 one
//   HOST:PORT        the same as tcp:HOST:PORT
//
//   absl::StatusOr<Address> a = ParseAddress("tcp:127.0.0.1:7443");
//   grpc::CreateChannel(a->GrpcTarget(), ...);   // "127.0.0.1:7443"
//
// Plain functions and values; thread safe.
#ifndef SANDGATE_COMMON_ADDRESS_H_
#define SANDGATE_COMMON_ADDRESS_H_

#include <string>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace sandgate {

struct Address {
  bool unix_socket = false;
  std::string path;  // unix_socket only
  std::string host;  // TCP only; IPv6 keeps its brackets ("[::1]")
  int port = 0;      // TCP only; 0 = any free port (listening only)

  // "unix:PATH" or "tcp:HOST:PORT": the canonical form, as the daemon prints it.
  std::string ToString() const;
  // What gRPC's channel and server builder take: "unix:PATH" or "HOST:PORT".
  std::string GrpcTarget() const;
};

// INVALID_ARGUMENT naming the accepted forms when `text` is none of them.
absl::StatusOr<Address> ParseAddress(absl::string_view text);

}  // namespace sandgate

#endif  // SANDGATE_COMMON_ADDRESS_H_
