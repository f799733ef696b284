#include "common/address.h"

#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/strip.h"
#include "common/errors.h"

namespace sandgate {

std::string Address::ToString() const {
  return unix_socket ? absl::StrCat("unix:", path) : absl::StrCat("tcp:", host, ":", port);
}

std::string Address::GrpcTarget() const {
  return unix_socket ? absl::StrCat("unix:", path) : absl::StrCat(host, ":", port);
}

absl::StatusOr<Address> ParseAddress(absl::string_view text) {
  auto bad = [&](absl::string_view why) {
    return errors::InvalidArgument(absl::StrCat(
        "expected unix:PATH, tcp:HOST:PORT or HOST:PORT, got '", text, "' (", why, ")"));
  };
  Address a;
  absl::string_view rest = text;
  if (absl::ConsumePrefix(&rest, "unix:")) {
    if (rest.empty()) return bad("no socket path");
    a.unix_socket = true;
    a.path = std::string(rest);
    return a;
  }
  absl::ConsumePrefix(&rest, "tcp:");
  size_t colon = rest.rfind(':');
  if (colon == absl::string_view::npos) return bad("no port");
  absl::string_view host = rest.substr(0, colon);
  absl::string_view port = rest.substr(colon + 1);
  if (host.empty()) return bad("no host");
  // An IPv6 address has colons of its own: only its bracketed form is unambiguous.
  bool bracketed = absl::StartsWith(host, "[") && absl::EndsWith(host, "]");
  if (!bracketed && absl::StrContains(host, ':'))
    return bad("an IPv6 host needs brackets: [::1]:PORT");
  if (absl::StrContains(host, '/')) return bad("a host name has no '/'");
  if (port.empty() || !absl::SimpleAtoi(port, &a.port) || a.port < 0 || a.port > 65535) {
    return bad("the port must be a number from 0 to 65535");
  }
  a.host = std::string(host);
  return a;
}

}  // namespace sandgate
