// IP addresses as the network proxy judges them: parsing, CIDR ranges, the SSRF denylist
// (every address a sandbox must not reach even when a name resolves there), the host's own
// addresses, and name resolution (an interface, so tests answer names themselves).
//
//   SANDGATE_ASSIGN_OR_RETURN(IpAddress ip, IpAddress::Parse("169.254.169.254"));
//   NonPublicReason(ip);  // "link-local (cloud metadata)"
//
// Thread safe: free functions and value types; Resolver implementations accept concurrent calls.
#ifndef SANDGATE_SANDBOX_LOCAL_NET_ADDRESS_H_
#define SANDGATE_SANDBOX_LOCAL_NET_ADDRESS_H_

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace sandgate::sandbox::local {

// An IPv4 or IPv6 address.
struct IpAddress {
  int family = 0;          // AF_INET or AF_INET6
  uint8_t bytes[16] = {};  // network order; 4 used for AF_INET
  static absl::StatusOr<IpAddress> Parse(absl::string_view text);
  std::string ToString() const;
};

// "198.51.100.0/24", "fc00::/7".
struct Cidr {
  IpAddress base;
  int prefix = 0;
  static absl::StatusOr<Cidr> Parse(absl::string_view text);
  bool Contains(const IpAddress& ip) const;
};

// Why `ip` is not a public unicast address ("loopback", "private (RFC 1918)", …), or "" when
// it is public. IPv4-mapped and NAT64 IPv6 addresses are judged by their IPv4 part.
std::string NonPublicReason(const IpAddress& ip);

// The addresses of this host's interfaces (getifaddrs, in the daemon's network namespace).
absl::StatusOr<std::vector<IpAddress>> ListHostAddresses();

// Why the SSRF guard refuses `ip` as the host's own: "" if it is none of `host_addresses`.
// Fails closed: when the host's addresses could not be listed, every address is refused
// (any of them might be the host's), and the reason says so.
std::string HostAddressReason(const IpAddress& ip,
                              const absl::StatusOr<std::vector<IpAddress>>& host_addresses);

// Name resolution for the proxy. Resolve is called on a worker thread and may block.
class Resolver {
 public:
  virtual ~Resolver() = default;
  virtual absl::StatusOr<std::vector<IpAddress>> Resolve(const std::string& host) = 0;
};
// getaddrinfo(AI_ADDRCONFIG), TCP.
std::shared_ptr<Resolver> NewSystemResolver();

}  // namespace sandgate::sandbox::local

#endif  // SANDGATE_SANDBOX_LOCAL_NET_ADDRESS_H_
