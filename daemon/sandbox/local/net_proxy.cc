#include "sandbox/local/net_proxy.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <ifaddrs.h>
#include <netdb.h>
#include <netinet/in.h>
#include <sched.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <deque>
#include <map>
#include <set>
#include <thread>

#include "absl/base/thread_annotations.h"
#include "absl/strings/ascii.h"
#include "absl/strings/escaping.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/synchronization/mutex.h"
#include "absl/synchronization/notification.h"
#include "common/errors.h"
#include "common/log.h"

namespace sandgate::sandbox::local {

// ---------------------------------------------------------------------------------------------
// Addresses

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

// ---------------------------------------------------------------------------------------------
// Names and requests

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

// ---------------------------------------------------------------------------------------------
// Listener in a network namespace

absl::StatusOr<UniqueFd> ListenInNetns(int netns_fd, uint16_t port) {
  absl::StatusOr<UniqueFd> result = errors::Internal("not run");
  // A thread of its own: setns(CLONE_NEWNET) changes only the calling thread, and this one
  // ends right after, so no other thread ever runs in the sandbox's namespace.
  std::thread t([&] {
    if (setns(netns_fd, CLONE_NEWNET) != 0) {
      result = errors::FromErrno(errno, "setns(sandbox netns)");
      return;
    }
    UniqueFd fd(socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0));
    if (!fd.valid()) {
      result = errors::FromErrno(errno, "socket in sandbox netns");
      return;
    }
    int one = 1;
    setsockopt(fd.get(), SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
    struct sockaddr_in addr = {};
    addr.sin_family = AF_INET;
    addr.sin_port = htons(port);
    addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    if (bind(fd.get(), reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) != 0) {
      result = errors::FromErrno(errno, absl::StrCat("bind 127.0.0.1:", port, " in sandbox netns"));
      return;
    }
    if (listen(fd.get(), 128) != 0) {
      result = errors::FromErrno(errno, "listen in sandbox netns");
      return;
    }
    result = std::move(fd);
  });
  t.join();
  return result;
}

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

// ---------------------------------------------------------------------------------------------
// The proxy thread

namespace {

constexpr size_t kMaxHead = 8192;
constexpr size_t kChunk = 65536;

std::string Response(int code, absl::string_view phrase, absl::string_view proxy_error,
                     absl::string_view detail) {
  std::string body = absl::StrCat(code, " ", phrase, ": ", proxy_error, detail.empty() ? "" : " (",
                                  detail, detail.empty() ? "" : ")", "\n");
  // The detail comes from our own messages, never from the request, so no CR/LF gets in.
  return absl::StrCat("HTTP/1.1 ", code, " ", phrase, "\r\nX-Proxy-Error: ", proxy_error,
                      "\r\nContent-Type: text/plain\r\nContent-Length: ", body.size(),
                      "\r\nConnection: close\r\n\r\n", body);
}

}  // namespace

class NetProxy::Loop {
 public:
  Loop(std::shared_ptr<Resolver> resolver, const NetProxyOptions& options)
      : resolver_(std::move(resolver)), options_(options), mailbox_(std::make_shared<Mailbox>()) {}

  ~Loop() {
    if (thread_.joinable()) {
      Post([this] { stopping_ = true; });
      thread_.join();
    }
  }

  absl::Status Start() {
    epoll_.reset(epoll_create1(EPOLL_CLOEXEC));
    if (!epoll_.valid()) return errors::FromErrno(errno, "epoll_create1");
    mailbox_->wake.reset(eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC));
    if (!mailbox_->wake.valid()) return errors::FromErrno(errno, "eventfd");
    wake_handle_.kind = Handle::kWake;
    struct epoll_event ev = {};
    ev.events = EPOLLIN;
    ev.data.ptr = &wake_handle_;
    if (epoll_ctl(epoll_.get(), EPOLL_CTL_ADD, mailbox_->wake.get(), &ev) != 0) {
      return errors::FromErrno(errno, "epoll_ctl(eventfd)");
    }
    thread_ = std::thread([this] { Run(); });
    return absl::OkStatus();
  }

  absl::Status AddSession(const std::string& id, UniqueFd listener, ProxyPolicy policy,
                          DecisionCallback cb) {
    absl::Status status;
    absl::Notification done;
    auto s = std::make_shared<std::unique_ptr<Session>>(new Session);
    (*s)->id = id;
    (*s)->listener = std::move(listener);
    (*s)->policy = std::move(policy);
    (*s)->cb = std::move(cb);
    Post([&, s] {
      if (sessions_.count(id) > 0) {
        status = errors::AlreadyExists("proxied session", id);
      } else {
        Session* raw = s->get();
        raw->handle = {Handle::kListener, raw, nullptr};
        struct epoll_event ev = {};
        ev.events = EPOLLIN;
        ev.data.ptr = &raw->handle;
        if (epoll_ctl(epoll_.get(), EPOLL_CTL_ADD, raw->listener.get(), &ev) != 0) {
          status = errors::FromErrno(errno, "epoll_ctl(listener)");
        } else {
          sessions_[id] = std::move(*s);
        }
      }
      done.Notify();
    });
    done.WaitForNotification();
    return status;
  }

  void RemoveSession(const std::string& id) {
    absl::Notification done;
    Post([&] {
      auto it = sessions_.find(id);
      if (it != sessions_.end()) {
        Session* s = it->second.get();
        s->removed = true;  // its listener may still have an event in this round
        std::vector<uint64_t> keys(s->conns.begin(), s->conns.end());
        for (uint64_t k : keys) Close(conns_[k].get(), "session-closed");
        epoll_ctl(epoll_.get(), EPOLL_CTL_DEL, s->listener.get(), nullptr);
        graveyard_sessions_.push_back(std::move(it->second));
        sessions_.erase(it);
      }
      done.Notify();
    });
    done.WaitForNotification();
  }

 private:
  struct Session;
  struct Conn;
  struct Handle {
    enum Kind { kWake, kListener, kClient, kUpstream } kind = kWake;
    Session* session = nullptr;
    Conn* conn = nullptr;
  };
  struct Session {
    std::string id;
    UniqueFd listener;
    ProxyPolicy policy;
    DecisionCallback cb;
    Handle handle;
    uint64_t next_number = 1;
    uint64_t bytes = 0;
    std::set<uint64_t> conns;  // keys into conns_
    bool removed = false;      // RemoveSession ran; freed at the end of the round
    absl::Time resume_at = absl::InfiniteFuture();  // listening paused until then
  };
  enum class State { kHead, kResolving, kConnecting, kTunnel, kReplyThenClose };
  struct Conn {
    uint64_t key = 0;
    Session* session = nullptr;
    NetworkDecision d;  // what is known so far; reported at each step
    UniqueFd client, upstream;
    Handle client_handle, upstream_handle;
    State state = State::kHead;
    bool closed = false;
    bool allowed = false;
    std::string head;
    ProxyRequest req;
    std::vector<IpAddress> addrs;
    size_t next_addr = 0;
    std::string to_up, to_client;  // pending bytes, written from the front
    bool client_eof = false, up_eof = false, up_shut = false, client_shut = false;
    absl::Time deadline;
    uint32_t client_events = 0, upstream_events = 0;  // registered interest
  };
  // Where worker threads and other threads hand work to the proxy thread.
  struct Mailbox {
    UniqueFd wake;
    absl::Mutex mu;
    std::deque<std::function<void()>> tasks ABSL_GUARDED_BY(mu);
    void Post(std::function<void()> f) {
      {
        absl::MutexLock l(&mu);
        tasks.push_back(std::move(f));
      }
      uint64_t one = 1;
      (void)!write(wake.get(), &one, sizeof(one));
    }
  };

  void Post(std::function<void()> f) { mailbox_->Post(std::move(f)); }

  void Run() {
    struct epoll_event events[64];
    while (!stopping_) {
      int n = epoll_wait(epoll_.get(), events, 64, 500);
      if (n < 0 && errno != EINTR) {
        log::Error("sandbox.proxy_epoll_failed", {{"errno", errno}});
        absl::SleepFor(absl::Milliseconds(10));
      }
      for (int i = 0; i < n; ++i) {
        Handle* h = static_cast<Handle*>(events[i].data.ptr);
        switch (h->kind) {
          case Handle::kWake:
            RunTasks();
            break;
          case Handle::kListener:
            Accept(h->session);
            break;
          case Handle::kClient:
            if (!h->conn->closed) OnClient(h->conn, events[i].events);
            break;
          case Handle::kUpstream:
            if (!h->conn->closed) OnUpstream(h->conn, events[i].events);
            break;
        }
      }
      CheckDeadlines();
      graveyard_.clear();
      graveyard_sessions_.clear();
    }
    for (auto& [id, s] : sessions_) {
      std::vector<uint64_t> keys(s->conns.begin(), s->conns.end());
      for (uint64_t k : keys) Close(conns_[k].get(), "proxy-stopped");
    }
    graveyard_.clear();
    sessions_.clear();
  }

  void RunTasks() {
    uint64_t v;
    (void)!read(mailbox_->wake.get(), &v, sizeof(v));
    std::deque<std::function<void()>> tasks;
    {
      absl::MutexLock l(&mailbox_->mu);
      tasks.swap(mailbox_->tasks);
    }
    for (auto& t : tasks) t();
  }

  void Report(Conn* c, NetworkDecision::Verdict verdict, absl::string_view reason,
              absl::string_view detail, int http_status) {
    c->d.verdict = verdict;
    c->d.reason = std::string(reason);
    c->d.detail = std::string(detail);
    c->d.http_status = http_status;
    if (c->session->cb) c->session->cb(c->d);
  }

  void Listen(Session* s, bool on) {
    struct epoll_event ev = {};
    ev.events = on ? static_cast<uint32_t>(EPOLLIN) : 0u;
    ev.data.ptr = &s->handle;
    epoll_ctl(epoll_.get(), EPOLL_CTL_MOD, s->listener.get(), &ev);
  }

  void Accept(Session* s) {
    while (!s->removed) {
      UniqueFd fd(accept4(s->listener.get(), nullptr, nullptr, SOCK_NONBLOCK | SOCK_CLOEXEC));
      if (!fd.valid()) {
        if (errno == EMFILE || errno == ENFILE) {
          // Out of descriptors: stop listening for a moment rather than spin on the backlog.
          log::Warning("sandbox.proxy_out_of_fds", {{"session", s->id}});
          Listen(s, false);
          s->resume_at = absl::Now() + absl::Milliseconds(200);
        }
        return;  // EAGAIN, or a transient error: epoll calls again
      }
      auto c = std::make_unique<Conn>();
      c->key = next_key_++;
      c->session = s;
      c->d.session_id = s->id;
      c->d.connection = s->next_number++;
      c->client = std::move(fd);
      c->client_handle = {Handle::kClient, s, c.get()};
      c->upstream_handle = {Handle::kUpstream, s, c.get()};
      c->deadline = absl::Now() + options_.head_timeout;
      Conn* raw = c.get();
      const bool over = s->conns.size() >= s->policy.max_connections;
      conns_[raw->key] = std::move(c);
      s->conns.insert(raw->key);
      if (over) {
        Deny(raw, 403, "Forbidden", "connection-limit",
             absl::StrCat("at most ", s->policy.max_connections, " connections at once"));
        continue;
      }
      Interest(raw);
    }
  }

  // Registers the epoll interest that the connection's state calls for.
  void Interest(Conn* c) {
    uint32_t ce = 0, ue = 0;
    switch (c->state) {
      case State::kHead:
        ce = EPOLLIN;
        break;
      case State::kResolving:
        break;
      case State::kConnecting:
        ue = EPOLLOUT;
        break;
      case State::kTunnel:
        if (c->to_up.empty() && !c->client_eof) ce |= EPOLLIN;
        if (!c->to_client.empty()) ce |= EPOLLOUT;
        if (c->to_client.empty() && !c->up_eof) ue |= EPOLLIN;
        if (!c->to_up.empty()) ue |= EPOLLOUT;
        break;
      case State::kReplyThenClose:
        ce = c->to_client.empty() ? EPOLLIN : EPOLLOUT;
        break;
    }
    // Each fd stays registered while open, with an empty mask when idle (errors and hang-ups
    // are still reported; the handlers close on them).
    auto update = [&](const UniqueFd& fd, Handle* h, uint32_t want, uint32_t* have) {
      if (!fd.valid() || (*have == want && want != 0)) return;
      struct epoll_event ev = {};
      ev.events = want;
      ev.data.ptr = h;
      if (epoll_ctl(epoll_.get(), EPOLL_CTL_MOD, fd.get(), &ev) != 0 && errno == ENOENT) {
        epoll_ctl(epoll_.get(), EPOLL_CTL_ADD, fd.get(), &ev);
      }
      *have = want;
    };
    update(c->client, &c->client_handle, ce, &c->client_events);
    update(c->upstream, &c->upstream_handle, ue, &c->upstream_events);
  }

  void Deny(Conn* c, int code, absl::string_view phrase, absl::string_view error,
            absl::string_view detail) {
    Report(c, code == 502 ? NetworkDecision::Verdict::kFailed : NetworkDecision::Verdict::kDenied,
           error, detail, code);
    if (c->upstream.valid()) {
      epoll_ctl(epoll_.get(), EPOLL_CTL_DEL, c->upstream.get(), nullptr);
      c->upstream.reset();
    }
    c->to_client = Response(code, phrase, error, detail);
    c->state = State::kReplyThenClose;
    c->deadline = absl::Now() + absl::Seconds(5);
    Interest(c);
  }

  void Close(Conn* c, absl::string_view reason) {
    if (c->closed) return;
    c->closed = true;
    if (c->allowed) {
      c->d.bytes_up = up_bytes_[c->key];
      c->d.bytes_down = down_bytes_[c->key];
      Report(c, NetworkDecision::Verdict::kClosed, reason, "", c->d.http_status);
    }
    up_bytes_.erase(c->key);
    down_bytes_.erase(c->key);
    c->session->conns.erase(c->key);
    auto it = conns_.find(c->key);
    graveyard_.push_back(std::move(it->second));
    conns_.erase(it);
    // Closing the fds removes them from the epoll set.
  }

  // Bytes moved through the session; false once the cap is crossed (every connection of the
  // session is then closed).
  bool Count(Conn* c, size_t n, bool up) {
    (up ? up_bytes_ : down_bytes_)[c->key] += n;
    Session* s = c->session;
    s->bytes += n;
    if (s->bytes <= s->policy.max_bytes) return true;
    std::vector<uint64_t> keys(s->conns.begin(), s->conns.end());
    for (uint64_t k : keys) Close(conns_[k].get(), "byte-limit");
    return false;
  }

  void OnClient(Conn* c, uint32_t events) {
    if (c->state == State::kHead) {
      char buf[kMaxHead + 1];
      ssize_t n = recv(c->client.get(), buf, kMaxHead + 1 - c->head.size(), 0);
      if (n < 0 && (errno == EAGAIN || errno == EINTR)) return;
      if (n <= 0) return Close(c, "client-closed");
      c->head.append(buf, static_cast<size_t>(n));
      size_t end = c->head.find("\r\n\r\n");
      if (end == std::string::npos) {
        if (c->head.size() > kMaxHead) {
          Deny(c, 400, "Bad Request", "bad-request", "request head larger than 8 KiB");
        }
        return;
      }
      c->to_up = c->head.substr(end + 4);  // early data (TLS hello, a request body)
      c->head.resize(end + 4);
      return Decide(c);
    }
    if (events & (EPOLLERR | EPOLLHUP) && c->state != State::kTunnel &&
        c->state != State::kReplyThenClose) {
      return Close(c, "client-closed");
    }
    if (c->state == State::kReplyThenClose) {
      if (!c->to_client.empty()) {
        if (!Flush(c->client.get(), &c->to_client)) return Close(c, "client-closed");
        if (c->to_client.empty()) shutdown(c->client.get(), SHUT_WR);
        return Interest(c);
      }
      // Drain until the client closes, so the answer is not lost to a reset.
      char buf[4096];
      ssize_t n = recv(c->client.get(), buf, sizeof(buf), 0);
      if (n == 0 || (n < 0 && errno != EAGAIN && errno != EINTR)) return Close(c, "answered");
      return;
    }
    if (c->state == State::kTunnel) Pump(c, events, true);
  }

  void OnUpstream(Conn* c, uint32_t events) {
    if (c->state == State::kConnecting) {
      int err = 0;
      socklen_t len = sizeof(err);
      getsockopt(c->upstream.get(), SOL_SOCKET, SO_ERROR, &err, &len);
      if (err == 0 && (events & EPOLLERR)) err = ECONNREFUSED;
      if (err != 0) return ConnectNext(c, strerror(err));
      return Connected(c);
    }
    if (c->state == State::kTunnel) Pump(c, events, false);
  }

  // Moves bytes for one side of a tunnel: what is pending for it goes out on EPOLLOUT, what it
  // sends is read (only when the previous chunk for the other side is gone) and passed on.
  void Pump(Conn* c, uint32_t events, bool client_side) {
    const int self = client_side ? c->client.get() : c->upstream.get();
    const int other = client_side ? c->upstream.get() : c->client.get();
    std::string* to_self = client_side ? &c->to_client : &c->to_up;
    std::string* to_other = client_side ? &c->to_up : &c->to_client;
    bool* eof = client_side ? &c->client_eof : &c->up_eof;
    const char* self_reset = client_side ? "client-reset" : "upstream-reset";
    const char* other_reset = client_side ? "upstream-reset" : "client-reset";
    if (events & EPOLLERR) return Close(c, self_reset);
    if ((events & EPOLLOUT) && !to_self->empty() && !Flush(self, to_self)) {
      return Close(c, self_reset);
    }
    // A few chunks per wake-up while the other side takes everything: fewer epoll rounds.
    for (int round = 0; round < 8 && (events & (EPOLLIN | EPOLLHUP)) && to_other->empty() && !*eof;
         ++round) {
      to_other->resize(kChunk);
      ssize_t n = recv(self, to_other->data(), kChunk, 0);
      to_other->resize(n > 0 ? static_cast<size_t>(n) : 0);
      if (n > 0) {
        if (!Count(c, static_cast<size_t>(n), client_side)) return;
        if (!Flush(other, to_other)) return Close(c, other_reset);
      } else if (n == 0) {
        *eof = true;
      } else if (errno != EAGAIN && errno != EINTR) {
        return Close(c, self_reset);
      } else {
        break;
      }
    }
    AfterTunnelIo(c);
  }

  // Half-closes what is finished, ends the connection when both directions are.
  void AfterTunnelIo(Conn* c) {
    if (c->closed) return;
    c->deadline = absl::Now() + options_.idle_timeout;
    if (c->client_eof && c->to_up.empty() && !c->up_shut) {
      shutdown(c->upstream.get(), SHUT_WR);
      c->up_shut = true;
    }
    if (c->up_eof && c->to_client.empty() && !c->client_shut) {
      shutdown(c->client.get(), SHUT_WR);
      c->client_shut = true;
    }
    if (c->up_shut && c->client_shut) return Close(c, "done");
    Interest(c);
  }

  // Writes what the socket takes; false on a hard error.
  static bool Flush(int fd, std::string* pending) {
    while (!pending->empty()) {
      ssize_t n = send(fd, pending->data(), pending->size(), MSG_NOSIGNAL);
      if (n < 0 && errno == EINTR) continue;
      if (n < 0) return errno == EAGAIN;
      pending->erase(0, static_cast<size_t>(n));
    }
    return true;
  }

  void Decide(Conn* c) {
    absl::StatusOr<ProxyRequest> req = ParseProxyRequest(c->head);
    if (!req.ok()) {
      return Deny(c, 400, "Bad Request", "bad-request", req.status().message());
    }
    c->req = std::move(*req);
    c->head.clear();
    c->d.method = c->req.method;
    c->d.host = c->req.host;
    c->d.port = c->req.port;
    const ProxyPolicy& p = c->session->policy;
    if (c->session->bytes >= p.max_bytes) {
      return Deny(c, 403, "Forbidden", "byte-limit",
                  absl::StrCat("the session used its ", p.max_bytes, " bytes"));
    }
    if (p.mode == NetworkMode::kRestricted && !HostAllowed(p.allowed_domains, c->req.host)) {
      return Deny(c, 403, "Forbidden", "blocked-by-allowlist",
                  absl::StrCat(c->req.host, " is not in the allowlist"));
    }
    if (std::find(p.allowed_ports.begin(), p.allowed_ports.end(), c->req.port) ==
        p.allowed_ports.end()) {
      return Deny(c, 403, "Forbidden", "blocked-by-allowlist",
                  absl::StrCat("port ", c->req.port, " is not allowed"));
    }
    if (c->req.host == "localhost" || absl::EndsWith(c->req.host, ".localhost")) {
      return Deny(c, 403, "Forbidden", "blocked-by-ssrf-guard", "localhost is loopback");
    }
    if (absl::StatusOr<IpAddress> ip = IpAddress::Parse(c->req.host); ip.ok()) {
      return Resolved(c, std::vector<IpAddress>{*ip});
    }
    c->state = State::kResolving;
    c->deadline = absl::Now() + options_.connect_timeout;
    Interest(c);
    std::thread([mailbox = mailbox_, resolver = resolver_, host = c->req.host, key = c->key, this] {
      absl::StatusOr<std::vector<IpAddress>> r = resolver->Resolve(host);
      // `this` is used only on the proxy thread, which runs the task only while alive
      // (pending tasks die with the mailbox's last owner otherwise).
      mailbox->Post([this, key, r = std::move(r)] {
        auto it = conns_.find(key);
        if (it == conns_.end() || it->second->state != State::kResolving) return;
        if (!r.ok()) {
          return Deny(it->second.get(), 502, "Bad Gateway", "resolution-failed",
                      r.status().message());
        }
        Resolved(it->second.get(), *r);
      });
    }).detach();
  }

  void Resolved(Conn* c, std::vector<IpAddress> addrs) {
    const ProxyPolicy& p = c->session->policy;
    if (addrs.empty()) return Deny(c, 502, "Bad Gateway", "resolution-failed", "no address");
    // Listed afresh for each request: interfaces come and go.
    const absl::StatusOr<std::vector<IpAddress>> host_addresses =
        options_.host_addresses ? options_.host_addresses() : ListHostAddresses();
    for (const IpAddress& ip : addrs) {
      // The host's own addresses are refused whatever the exemptions say.
      std::string why = HostAddressReason(ip, host_addresses);
      if (why.empty()) {
        why = NonPublicReason(ip);
        if (why.empty()) continue;
        bool exempt = std::any_of(p.ssrf_exempt.begin(), p.ssrf_exempt.end(),
                                  [&](const Cidr& r) { return r.Contains(ip); });
        if (exempt) continue;
      }
      c->d.ip = ip.ToString();
      return Deny(c, 403, "Forbidden", "blocked-by-ssrf-guard",
                  absl::StrCat(c->req.host, " resolves to ", c->d.ip, ", ", why));
    }
    c->addrs = std::move(addrs);
    c->next_addr = 0;
    ConnectNext(c, "");
  }

  void ConnectNext(Conn* c, absl::string_view last_error) {
    if (c->upstream.valid()) {
      epoll_ctl(epoll_.get(), EPOLL_CTL_DEL, c->upstream.get(), nullptr);
      c->upstream.reset();
      c->upstream_events = 0;
    }
    while (c->next_addr < c->addrs.size()) {
      const IpAddress& ip = c->addrs[c->next_addr++];
      c->d.ip = ip.ToString();
      struct sockaddr_storage ss = {};
      socklen_t len;
      if (ip.family == AF_INET) {
        auto* sa = reinterpret_cast<sockaddr_in*>(&ss);
        sa->sin_family = AF_INET;
        sa->sin_port = htons(c->req.port);
        memcpy(&sa->sin_addr, ip.bytes, 4);
        len = sizeof(*sa);
      } else {
        auto* sa = reinterpret_cast<sockaddr_in6*>(&ss);
        sa->sin6_family = AF_INET6;
        sa->sin6_port = htons(c->req.port);
        memcpy(&sa->sin6_addr, ip.bytes, 16);
        len = sizeof(*sa);
      }
      UniqueFd fd(socket(ip.family, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0));
      if (!fd.valid()) continue;
      int r = connect(fd.get(), reinterpret_cast<sockaddr*>(&ss), len);
      if (r != 0 && errno != EINPROGRESS) {
        last_error = strerror(errno);
        continue;
      }
      c->upstream = std::move(fd);
      struct epoll_event ev = {};
      ev.events = EPOLLOUT;
      ev.data.ptr = &c->upstream_handle;
      epoll_ctl(epoll_.get(), EPOLL_CTL_ADD, c->upstream.get(), &ev);
      c->upstream_events = EPOLLOUT;
      c->state = State::kConnecting;
      c->deadline = absl::Now() + options_.connect_timeout;
      Interest(c);
      return;
    }
    Deny(c, 502, "Bad Gateway", "upstream-unreachable",
         absl::StrCat("cannot connect to ", c->d.ip, " port ", c->req.port,
                      last_error.empty() ? "" : ": ", last_error));
  }

  void Connected(Conn* c) {
    c->state = State::kTunnel;
    c->allowed = true;
    const bool restricted = c->session->policy.mode == NetworkMode::kRestricted;
    Report(c, NetworkDecision::Verdict::kAllowed, restricted ? "allowlist" : "enabled", "",
           c->req.connect ? 200 : 0);
    if (c->req.connect) {
      c->to_client = "HTTP/1.1 200 Connection established\r\n\r\n";
    } else {
      c->to_up = c->req.upstream_head + c->to_up;
    }
    // What goes up now (the rewritten head, early data) counts like any later byte.
    if (!c->to_up.empty() && !Count(c, c->to_up.size(), true)) return;
    c->deadline = absl::Now() + options_.idle_timeout;
    if (!Flush(c->client.get(), &c->to_client)) return Close(c, "client-reset");
    if (!Flush(c->upstream.get(), &c->to_up)) return Close(c, "upstream-reset");
    Interest(c);
  }

  void CheckDeadlines() {
    const absl::Time now = absl::Now();
    if (now < next_check_) return;
    next_check_ = now + absl::Milliseconds(200);
    for (auto& [id, s] : sessions_) {
      if (s->resume_at <= now) {
        s->resume_at = absl::InfiniteFuture();
        Listen(s.get(), true);
      }
    }
    std::vector<Conn*> expired;
    for (auto& [key, c] : conns_) {
      if (c->deadline <= now) expired.push_back(c.get());
    }
    for (Conn* c : expired) {
      if (c->closed) continue;
      switch (c->state) {
        case State::kHead:
          Deny(c, 400, "Bad Request", "bad-request", "no complete request head in time");
          break;
        case State::kResolving:
          Deny(c, 502, "Bad Gateway", "resolution-failed", "name resolution timed out");
          break;
        case State::kConnecting:
          ConnectNext(c, "connect timed out");
          break;
        case State::kTunnel:
          Close(c, "idle-timeout");
          break;
        case State::kReplyThenClose:
          Close(c, "answered");
          break;
      }
    }
  }

  const std::shared_ptr<Resolver> resolver_;
  const NetProxyOptions options_;
  const std::shared_ptr<Mailbox> mailbox_;
  UniqueFd epoll_;
  Handle wake_handle_;
  std::thread thread_;

  // Proxy thread only.
  bool stopping_ = false;
  uint64_t next_key_ = 1;
  absl::Time next_check_;
  std::map<std::string, std::unique_ptr<Session>> sessions_;
  std::map<uint64_t, std::unique_ptr<Conn>> conns_;
  std::map<uint64_t, uint64_t> up_bytes_, down_bytes_;
  std::vector<std::unique_ptr<Conn>> graveyard_;  // closed this round; freed after it
  std::vector<std::unique_ptr<Session>> graveyard_sessions_;
};

NetProxy::NetProxy(std::unique_ptr<Loop> loop) : loop_(std::move(loop)) {}
NetProxy::~NetProxy() = default;

absl::StatusOr<std::unique_ptr<NetProxy>> NetProxy::Create(std::shared_ptr<Resolver> resolver,
                                                           const NetProxyOptions& options) {
  if (resolver == nullptr) return errors::InvalidArgument("resolver: required");
  auto loop = std::make_unique<Loop>(std::move(resolver), options);
  if (absl::Status s = loop->Start(); !s.ok()) return s;
  return std::unique_ptr<NetProxy>(new NetProxy(std::move(loop)));
}

absl::Status NetProxy::AddSession(const std::string& session_id, UniqueFd listener,
                                  ProxyPolicy policy, DecisionCallback on_decision) {
  return loop_->AddSession(session_id, std::move(listener), std::move(policy),
                           std::move(on_decision));
}

void NetProxy::RemoveSession(const std::string& session_id) { loop_->RemoveSession(session_id); }

}  // namespace sandgate::sandbox::local
