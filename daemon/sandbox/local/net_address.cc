#include "sandbox/local/net_address.h"

#include <arpa/inet.h>
#include <ifaddrs.h>
#include <netdb.h>
#include <netinet/in.h>
#include <sys/socket.h>

#include <cerrno>
#include <cstring>
#include <utility>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "common/errors.h"

namespace sandgate::sandbox::local {

absl::StatusOr<IpAddress> IpAddress::Parse(absl::string_view text) {
  std::string t(text);
  IpAddress ip;
  if (inet_pton(AF_INET, t.c_str(), ip.bytes) == 1) {
    ip.family = AF_INET;
    return ip;
  }
  if (inet_pton(AF_INET6, t.c_str(), ip.bytes) == 1) {
    ip.family = AF_INET6;
    return ip;
  }
  return errors::InvalidArgument(absl::StrCat("not an IP address: \"", text, "\""));
}

std::string IpAddress::ToString() const {
  char buf[INET6_ADDRSTRLEN] = {};
  inet_ntop(family, bytes, buf, sizeof(buf));
  return buf;
}

absl::StatusOr<Cidr> Cidr::Parse(absl::string_view text) {
  std::pair<absl::string_view, absl::string_view> parts = absl::StrSplit(text, '/');
  absl::StatusOr<IpAddress> base = IpAddress::Parse(parts.first);
  if (!base.ok()) return base.status();
  Cidr c;
  c.base = *base;
  const int max = base->family == AF_INET ? 32 : 128;
  c.prefix = max;
  if (!parts.second.empty() &&
      (!absl::SimpleAtoi(parts.second, &c.prefix) || c.prefix < 0 || c.prefix > max)) {
    return errors::InvalidArgument(absl::StrCat("bad CIDR prefix: \"", text, "\""));
  }
  return c;
}

bool Cidr::Contains(const IpAddress& ip) const {
  if (ip.family != base.family) return false;
  int bits = prefix;
  for (int i = 0; bits > 0; ++i, bits -= 8) {
    const uint8_t mask = bits >= 8 ? 0xff : static_cast<uint8_t>(0xff << (8 - bits));
    if ((ip.bytes[i] & mask) != (base.bytes[i] & mask)) return false;
  }
  return true;
}

namespace {

struct Range {
  const char* cidr;
  const char* reason;
};
// Everything a sandbox must not reach through the proxy, even when a name resolves there.
constexpr Range kV4Ranges[] = {
    {"0.0.0.0/8", "unspecified (0.0.0.0/8)"},
    {"10.0.0.0/8", "private (RFC 1918)"},
    {"100.64.0.0/10", "shared address space (CGNAT, RFC 6598)"},
    {"127.0.0.0/8", "loopback"},
    {"169.254.0.0/16", "link-local (cloud metadata)"},
    {"172.16.0.0/12", "private (RFC 1918)"},
    {"192.0.0.0/24", "IETF protocol assignments"},
    {"192.0.2.0/24", "documentation (TEST-NET-1)"},
    {"192.88.99.0/24", "6to4 relay anycast"},
    {"192.168.0.0/16", "private (RFC 1918)"},
    {"198.18.0.0/15", "benchmarking"},
    {"198.51.100.0/24", "documentation (TEST-NET-2)"},
    {"203.0.113.0/24", "documentation (TEST-NET-3)"},
    {"224.0.0.0/4", "multicast"},
    {"240.0.0.0/4", "reserved or broadcast"},
};
constexpr Range kV6Ranges[] = {
    {"::/128", "unspecified"},
    {"::1/128", "loopback"},
    {"64:ff9b:1::/48", "local-use NAT64"},
    {"100::/64", "discard-only"},
    {"2001::/32", "Teredo"},
    {"2001:db8::/32", "documentation"},
    {"fc00::/7", "unique local (ULA)"},
    {"fe80::/10", "link-local"},
    {"fec0::/10", "site-local"},
    {"ff00::/8", "multicast"},
};

const std::vector<std::pair<Cidr, const char*>>& DenyRanges() {
  static const auto* ranges = [] {
    auto* v = new std::vector<std::pair<Cidr, const char*>>();
    for (const Range& r : kV4Ranges) v->emplace_back(*Cidr::Parse(r.cidr), r.reason);
    for (const Range& r : kV6Ranges) v->emplace_back(*Cidr::Parse(r.cidr), r.reason);
    return v;
  }();
  return *ranges;
}

IpAddress V4(const uint8_t* b) {
  IpAddress ip;
  ip.family = AF_INET;
  memcpy(ip.bytes, b, 4);
  return ip;
}

}  // namespace

std::string NonPublicReason(const IpAddress& ip) {
  if (ip.family == AF_INET6) {
    static const Cidr mapped = *Cidr::Parse("::ffff:0:0/96");
    static const Cidr nat64 = *Cidr::Parse("64:ff9b::/96");
    static const Cidr compat = *Cidr::Parse("::/96");
    static const Cidr sixto4 = *Cidr::Parse("2002::/16");
    static const Cidr global = *Cidr::Parse("2000::/3");
    if (mapped.Contains(ip) || nat64.Contains(ip)) {
      std::string r = NonPublicReason(V4(ip.bytes + 12));
      return r.empty() ? "" : absl::StrCat("IPv6-embedded IPv4 ", r);
    }
    if (sixto4.Contains(ip)) {
      std::string r = NonPublicReason(V4(ip.bytes + 2));
      return r.empty() ? "" : absl::StrCat("6to4-embedded IPv4 ", r);
    }
    for (const auto& [cidr, reason] : DenyRanges()) {
      if (cidr.Contains(ip)) return reason;
    }
    if (compat.Contains(ip)) return "IPv4-compatible (deprecated)";
    if (!global.Contains(ip)) return "not global unicast";
    return "";
  }
  if (ip.family != AF_INET) return "not an IP address";
  for (const auto& [cidr, reason] : DenyRanges()) {
    if (cidr.Contains(ip)) return reason;
  }
  return "";
}

namespace {

class SystemResolver : public Resolver {
 public:
  absl::StatusOr<std::vector<IpAddress>> Resolve(const std::string& host) override {
    struct addrinfo hints = {};
    hints.ai_family = AF_UNSPEC;
    hints.ai_socktype = SOCK_STREAM;
    hints.ai_flags = AI_ADDRCONFIG;
    struct addrinfo* res = nullptr;
    int rc = getaddrinfo(host.c_str(), nullptr, &hints, &res);
    if (rc != 0) {
      return errors::Unavailable(absl::StrCat("cannot resolve ", host, ": ", gai_strerror(rc)));
    }
    std::vector<IpAddress> out;
    for (struct addrinfo* a = res; a != nullptr; a = a->ai_next) {
      IpAddress ip;
      if (a->ai_family == AF_INET) {
        ip.family = AF_INET;
        memcpy(ip.bytes, &reinterpret_cast<sockaddr_in*>(a->ai_addr)->sin_addr, 4);
      } else if (a->ai_family == AF_INET6) {
        ip.family = AF_INET6;
        memcpy(ip.bytes, &reinterpret_cast<sockaddr_in6*>(a->ai_addr)->sin6_addr, 16);
      } else {
        continue;
      }
      out.push_back(ip);
    }
    freeaddrinfo(res);
    if (out.empty()) return errors::Unavailable(absl::StrCat("no address for ", host));
    return out;
  }
};

}  // namespace

std::shared_ptr<Resolver> NewSystemResolver() { return std::make_shared<SystemResolver>(); }

absl::StatusOr<std::vector<IpAddress>> ListHostAddresses() {
  struct ifaddrs* list = nullptr;
  if (getifaddrs(&list) != 0) return errors::FromErrno(errno, "getifaddrs");
  std::vector<IpAddress> out;
  for (struct ifaddrs* a = list; a != nullptr; a = a->ifa_next) {
    if (a->ifa_addr == nullptr) continue;
    IpAddress ip;
    ip.family = a->ifa_addr->sa_family;
    if (ip.family == AF_INET) {
      memcpy(ip.bytes, &reinterpret_cast<sockaddr_in*>(a->ifa_addr)->sin_addr, 4);
    } else if (ip.family == AF_INET6) {
      memcpy(ip.bytes, &reinterpret_cast<sockaddr_in6*>(a->ifa_addr)->sin6_addr, 16);
    } else {
      continue;
    }
    out.push_back(ip);
  }
  freeifaddrs(list);
  return out;
}

std::string HostAddressReason(const IpAddress& ip,
                              const absl::StatusOr<std::vector<IpAddress>>& host_addresses) {
  if (!host_addresses.ok()) {
    return absl::StrCat("the host's own addresses could not be listed (",
                        host_addresses.status().message(), "), so no address is let through");
  }
  for (const IpAddress& h : *host_addresses) {
    if (h.family == ip.family && memcmp(h.bytes, ip.bytes, ip.family == AF_INET ? 4 : 16) == 0) {
      return "an address of the daemon's host";
    }
  }
  return "";
}

}  // namespace sandgate::sandbox::local
