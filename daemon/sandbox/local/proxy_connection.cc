// One proxied connection's way through NetProxy's loop: read the head, decide (policy,
// allowlist, SSRF guard), resolve on a worker thread, connect to the checked address, then
// tunnel bytes both ways until both sides are done. Runs on the proxy thread only.
#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/epoll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <thread>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "sandbox/local/net_proxy_loop.h"

namespace sandgate::sandbox::local {

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

void NetProxy::Loop::Report(Conn* c, NetworkDecision::Verdict verdict, absl::string_view reason,
                            absl::string_view detail, int http_status) {
  c->d.verdict = verdict;
  c->d.reason = std::string(reason);
  c->d.detail = std::string(detail);
  c->d.http_status = http_status;
  if (c->session->cb) c->session->cb(c->d);
}

void NetProxy::Loop::Deny(Conn* c, int code, absl::string_view phrase, absl::string_view error,
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

void NetProxy::Loop::OnClient(Conn* c, uint32_t events) {
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

void NetProxy::Loop::OnUpstream(Conn* c, uint32_t events) {
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

void NetProxy::Loop::Pump(Conn* c, uint32_t events, bool client_side) {
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

void NetProxy::Loop::AfterTunnelIo(Conn* c) {
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

bool NetProxy::Loop::Flush(int fd, std::string* pending) {
  while (!pending->empty()) {
    ssize_t n = send(fd, pending->data(), pending->size(), MSG_NOSIGNAL);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) return errno == EAGAIN;
    pending->erase(0, static_cast<size_t>(n));
  }
  return true;
}

void NetProxy::Loop::Decide(Conn* c) {
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

void NetProxy::Loop::Resolved(Conn* c, std::vector<IpAddress> addrs) {
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

void NetProxy::Loop::ConnectNext(Conn* c, absl::string_view last_error) {
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

void NetProxy::Loop::Connected(Conn* c) {
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

}  // namespace sandgate::sandbox::local
