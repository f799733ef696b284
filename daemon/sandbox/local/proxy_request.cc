#include "sandbox/local/proxy_request.h"

#include <sys/socket.h>

#include <algorithm>
#include <cstring>

#include "absl/strings/ascii.h"
#include "absl/strings/escaping.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "common/errors.h"
#include "sandbox/local/net_address.h"

namespace sandgate::sandbox::local {

absl::StatusOr<std::string> NormaliseHost(absl::string_view host) {
  auto bad = [&](absl::string_view why) {
    return errors::InvalidArgument(absl::StrCat("invalid host (", why, ")"));
  };
  if (host.size() >= 2 && host.front() == '[' && host.back() == ']') {
    absl::StatusOr<IpAddress> ip = IpAddress::Parse(host.substr(1, host.size() - 2));
    if (!ip.ok() || ip->family != AF_INET6) return bad("bracketed but not IPv6");
    return ip->ToString();
  }
  std::string h = absl::AsciiStrToLower(host);
  if (!h.empty() && h.back() == '.') h.pop_back();
  if (h.empty()) return bad("empty");
  if (h.size() > 253) return bad("longer than 253 characters");
  if (absl::StatusOr<IpAddress> ip = IpAddress::Parse(h); ip.ok()) return ip->ToString();
  for (absl::string_view label : absl::StrSplit(h, '.')) {
    if (label.empty() || label.size() > 63) return bad("empty or overlong label");
    if (label.front() == '-' || label.back() == '-') return bad("label starts or ends with -");
    for (char c : label) {
      if (!absl::ascii_islower(c) && !absl::ascii_isdigit(c) && c != '-') {
        return bad("characters other than a-z, 0-9, '-' and '.'");
      }
    }
  }
  return h;
}

absl::StatusOr<std::vector<std::string>> NormaliseAllowlist(
    const std::vector<std::string>& patterns) {
  std::vector<std::string> out;
  for (const std::string& p : patterns) {
    absl::string_view rest = p;
    const bool wildcard = absl::ConsumePrefix(&rest, "*.");
    absl::StatusOr<std::string> host = NormaliseHost(rest);
    if (!host.ok()) {
      return errors::InvalidArgument(
          absl::StrCat("allowed_domains: \"", absl::CEscape(p), "\": ", host.status().message()));
    }
    out.push_back(wildcard ? absl::StrCat("*.", *host) : *host);
  }
  return out;
}

bool HostAllowed(const std::vector<std::string>& allowlist, absl::string_view host) {
  for (const std::string& p : allowlist) {
    absl::string_view suffix = p;
    if (absl::ConsumePrefix(&suffix, "*")) {
      if (host.size() > suffix.size() && absl::EndsWith(host, suffix)) return true;
    } else if (host == p) {
      return true;
    }
  }
  return false;
}

namespace {

bool IsTokenChar(char c) {
  return absl::ascii_isalnum(c) || strchr("!#$%&'*+-.^_`|~", c) != nullptr;
}

// "host:port" or "[v6]:port"; port required unless default_port != 0.
absl::Status ParseAuthority(absl::string_view authority, uint16_t default_port, ProxyRequest* req) {
  absl::string_view host = authority, port_text;
  if (!authority.empty() && authority.front() == '[') {
    size_t close = authority.find(']');
    if (close == absl::string_view::npos) return errors::InvalidArgument("unterminated [");
    host = authority.substr(0, close + 1);
    absl::string_view rest = authority.substr(close + 1);
    if (!rest.empty()) {
      if (rest.front() != ':') return errors::InvalidArgument("garbage after ]");
      port_text = rest.substr(1);
    }
  } else if (size_t colon = authority.rfind(':'); colon != absl::string_view::npos) {
    host = authority.substr(0, colon);
    port_text = authority.substr(colon + 1);
    if (port_text.empty()) return errors::InvalidArgument("empty port");
  }
  int port = default_port;
  if (!port_text.empty()) {
    if (!std::all_of(port_text.begin(), port_text.end(), absl::ascii_isdigit) ||
        port_text.size() > 5 || !absl::SimpleAtoi(port_text, &port)) {
      return errors::InvalidArgument("bad port");
    }
  }
  if (port <= 0 || port > 65535) return errors::InvalidArgument("missing or bad port");
  absl::StatusOr<std::string> h = NormaliseHost(host);
  if (!h.ok()) return h.status();
  req->host = *h;
  req->port = static_cast<uint16_t>(port);
  return absl::OkStatus();
}

}  // namespace

absl::StatusOr<ProxyRequest> ParseProxyRequest(absl::string_view head) {
  if (!absl::ConsumeSuffix(&head, "\r\n\r\n")) {
    return errors::InvalidArgument("head does not end with an empty line");
  }
  std::vector<absl::string_view> lines = absl::StrSplit(head, "\r\n");
  for (absl::string_view line : lines) {
    for (char c : line) {
      const unsigned char u = static_cast<unsigned char>(c);
      if (c == '\r' || c == '\n' || (u < 0x20 && c != '\t') || u == 0x7f) {
        return errors::InvalidArgument("control character in the head (CR/LF injection?)");
      }
    }
  }
  std::vector<absl::string_view> parts = absl::StrSplit(lines[0], ' ');
  if (parts.size() != 3)
    return errors::InvalidArgument("request line is not METHOD TARGET VERSION");
  ProxyRequest req;
  req.method = std::string(parts[0]);
  if (req.method.empty() || !std::all_of(req.method.begin(), req.method.end(), IsTokenChar)) {
    return errors::InvalidArgument("bad method");
  }
  if (parts[2] != "HTTP/1.1" && parts[2] != "HTTP/1.0") {
    return errors::InvalidArgument("unsupported HTTP version");
  }
  absl::string_view target = parts[1];
  if (target.empty() || target.find('@') != absl::string_view::npos) {
    return errors::InvalidArgument("empty target or user info");
  }
  if (req.method == "CONNECT") {
    req.connect = true;
    if (absl::Status s = ParseAuthority(target, 0, &req); !s.ok()) return s;
    return req;
  }
  absl::string_view rest = target;
  if (!absl::ConsumePrefix(&rest, "http://") && !absl::ConsumePrefix(&rest, "HTTP://")) {
    return errors::InvalidArgument(
        absl::StartsWithIgnoreCase(target, "https://")
            ? "https:// URLs need CONNECT (use the proxy as an HTTPS proxy)"
            : "not a proxy request (expected CONNECT or an absolute http:// URI)");
  }
  size_t end = rest.find_first_of("/?#");
  absl::string_view authority = rest.substr(0, end);
  std::string path = end == absl::string_view::npos ? "/" : std::string(rest.substr(end));
  if (path.front() != '/') path.insert(0, "/");
  if (size_t hash = path.find('#'); hash != std::string::npos) path.resize(hash);
  if (absl::Status s = ParseAuthority(authority, 80, &req); !s.ok()) return s;
  const bool v6 = req.host.find(':') != std::string::npos;
  std::string host_header = v6 ? absl::StrCat("[", req.host, "]") : req.host;
  if (req.port != 80) absl::StrAppend(&host_header, ":", req.port);
  req.upstream_head =
      absl::StrCat(req.method, " ", path, " ", parts[2], "\r\nHost: ", host_header, "\r\n");
  for (size_t i = 1; i < lines.size(); ++i) {
    absl::string_view line = lines[i];
    size_t colon = line.find(':');
    if (colon == 0 || colon == absl::string_view::npos ||
        !std::all_of(line.begin(), line.begin() + colon, IsTokenChar)) {
      return errors::InvalidArgument("malformed header line");
    }
    absl::string_view name = line.substr(0, colon);
    if (absl::StartsWithIgnoreCase(name, "proxy-") || absl::EqualsIgnoreCase(name, "host") ||
        absl::EqualsIgnoreCase(name, "connection") || absl::EqualsIgnoreCase(name, "keep-alive") ||
        absl::EqualsIgnoreCase(name, "upgrade") || absl::EqualsIgnoreCase(name, "te")) {
      continue;
    }
    absl::StrAppend(&req.upstream_head, line, "\r\n");
  }
  absl::StrAppend(&req.upstream_head, "Connection: close\r\n\r\n");
  return req;
}

}  // namespace sandgate::sandbox::local
