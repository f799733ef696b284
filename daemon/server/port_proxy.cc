#include "server/port_proxy.h"

#include <fcntl.h>
#include <poll.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <unistd.h>

#include <atomic>
#include <optional>
#include <thread>
#include <utility>
#include <vector>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "common/errors.h"
#include "common/log.h"
#include "common/unique_fd.h"
#include "server/http_api.h"
#include "server/proxied_http.h"

namespace sandgate::server {
namespace {

constexpr size_t kChunk = 64 << 10;
using proxied_http::BadGateway;
using proxied_http::ContainsIgnoreCase;
using proxied_http::Head;
using proxied_http::IsHopByHop;
using proxied_http::kSandboxPolicy;
using proxied_http::NotForwarded;
using proxied_http::ParseHead;
using proxied_http::UpstreamPath;
using proxied_http::WantsWebSocket;

}  // namespace

// One relayed request (and, after a 101, its connection), on a thread of its own.
class PortProxy::Relay : public std::enable_shared_from_this<Relay> {
 public:
  Relay(PortProxy* proxy, Target to, std::string prefix, std::string target, HttpRequest request,
        std::string body, std::shared_ptr<HttpExchange> x)
      : proxy_(proxy),
        limits_(*proxy->deps_.limits),
        clock_(proxy->deps_.clock),
        to_(std::move(to)),
        session_(to_.session),
        port_(to_.port),
        prefix_(std::move(prefix)),
        target_(std::move(target)),
        request_(std::move(request)),
        body_(std::move(body)),
        x_(std::move(x)),
        wake_(eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK)) {}

  void Run() {
    Serve();
    // Before the thread leaves the proxy: the connection holds a lease on the session.
    conn_.reset();
    x_.reset();
  }

  void Wake() {
    uint64_t one = 1;
    if (wake_.valid() && write(wake_.get(), &one, sizeof(one)) < 0) {
      // The counter is full: a wake is already pending.
    }
  }
  void Stop() {
    stopping_ = true;
    Wake();
  }

 private:
  // Waits until `fd` is ready for `events` (fd -1: only for a wake). False when the relay must
  // end: stopped, the client gone, the session ended or the port unexposed, or idle for
  // ports.idle_timeout; `why_` says which.
  bool Wait(int fd, short events) {
    for (;;) {
      if (stopping_) return Fail("the daemon is stopping");
      if (client_gone_) return Fail("the client left");
      if (conn_ != nullptr && conn_->cancel().cancelled()) return Fail(conn_->cancel().reason());
      if (clock_->Now() - last_ >= limits_.idle_timeout) {
        return Fail(absl::StrCat("idle for ", absl::FormatDuration(limits_.idle_timeout),
                                 " (ports.idle_timeout_seconds)"));
      }
      struct pollfd p[3] = {{fd, events, 0},
                            {wake_.get(), POLLIN, 0},
                            {conn_ != nullptr ? conn_->cancel().fd() : -1, POLLIN, 0}};
      int r = poll(p, 3, static_cast<int>(absl::ToInt64Milliseconds(kTick)));
      if (r < 0 && errno != EINTR) return Fail(absl::StrCat("poll: ", strerror(errno)));
      if (p[1].revents != 0) {
        uint64_t n;
        (void)read(wake_.get(), &n, sizeof(n));
        return true;  // the caller looks again at what woke it
      }
      if (fd >= 0 && p[0].revents != 0) return true;
    }
  }
  bool Fail(std::string why) {
    why_ = std::move(why);
    return false;
  }
  // Counts `n` bytes through the connection; false over ports.max_connection_bytes.
  bool Count(size_t n) {
    last_ = clock_->Now();
    bytes_ += n;
    if (bytes_ > limits_.max_connection_bytes) {
      return Fail(absl::StrCat("over ", limits_.max_connection_bytes,
                               " bytes (ports.max_connection_bytes)"));
    }
    return true;
  }

  bool WriteAll(int fd, absl::string_view data) {
    while (!data.empty()) {
      ssize_t n = send(fd, data.data(), data.size(), MSG_NOSIGNAL);
      if (n > 0) {
        if (!Count(static_cast<size_t>(n))) return false;
        data.remove_prefix(static_cast<size_t>(n));
        continue;
      }
      if (n < 0 && errno != EAGAIN && errno != EINTR) return Fail(strerror(errno));
      if (!Wait(fd, POLLOUT)) return false;
    }
    return true;
  }

  std::string UpstreamRequest(bool upgrade) const {
    std::string out =
        absl::StrCat(request_.method, " ", target_, upgrade ? " HTTP/1.1\r\n" : " HTTP/1.0\r\n",
                     "Host: 127.0.0.1:", port_, "\r\n");
    for (const auto& [name, value] : request_.headers) {
      if (NotForwarded(name)) continue;
      absl::StrAppend(&out, name, ": ", value, "\r\n");
    }
    if (upgrade) {
      absl::StrAppend(&out, "Connection: Upgrade\r\nUpgrade: ", request_.Header("upgrade"), "\r\n");
    } else {
      absl::StrAppend(&out, "Connection: close\r\n");
    }
    if (!body_.empty() || request_.method == "POST" || request_.method == "PUT" ||
        request_.method == "PATCH") {
      absl::StrAppend(&out, "Content-Length: ", body_.size(), "\r\n");
    }
    absl::StrAppend(&out, "X-Forwarded-Prefix: ", prefix_, "\r\nX-Forwarded-Proto: http\r\n\r\n");
    return out;
  }

  void Serve() {
    absl::StatusOr<std::unique_ptr<PortConnection>> conn = proxy_->Connect(to_);
    if (!conn.ok()) return x_->Reply(JsonError(conn.status()));
    conn_ = *std::move(conn);
    const int up = conn_->fd();
    last_ = clock_->Now();
    const bool upgrade = WantsWebSocket(request_);
    std::weak_ptr<Relay> weak = weak_from_this();
    x_->OnClose([weak] {
      if (auto self = weak.lock()) {
        self->client_gone_ = true;
        self->Wake();
      }
    });
    if (!WriteAll(up, UpstreamRequest(upgrade)) || !WriteAll(up, body_)) {
      return x_->Reply(BadGateway(errors::Unavailable(absl::StrCat(
          "port ", port_, " of session ", session_, " did not take the request: ", why_))));
    }
    // The answer's head, bounded.
    std::string in;
    size_t end = std::string::npos;
    while ((end = in.find("\r\n\r\n")) == std::string::npos) {
      if (in.size() > limits_.max_header_bytes) {
        return x_->Reply(BadGateway(errors::Unavailable(
            absl::StrCat("the answer's head from port ", port_, " is over ",
                         limits_.max_header_bytes, " bytes (ports.max_header_bytes)"))));
      }
      char buf[16384];
      ssize_t n = recv(up, buf, sizeof(buf), 0);
      if (n > 0) {
        if (!Count(static_cast<size_t>(n))) break;
        in.append(buf, static_cast<size_t>(n));
        continue;
      }
      if (n == 0) {
        why_ = "it closed the connection before a whole answer";
        break;
      }
      if (errno != EAGAIN && errno != EINTR) {
        why_ = strerror(errno);
        break;
      }
      if (!Wait(up, POLLIN)) break;
    }
    if (end == std::string::npos) {
      return x_->Reply(BadGateway(errors::Unavailable(
          absl::StrCat("no answer from port ", port_, " of session ", session_, ": ", why_))));
    }
    absl::StatusOr<Head> head = ParseHead(absl::string_view(in).substr(0, end));
    if (!head.ok()) return x_->Reply(BadGateway(head.status()));
    std::string rest = in.substr(end + 4);
    if (head->status == 101) {
      if (!upgrade) {
        return x_->Reply(
            BadGateway(errors::Unavailable("the sandbox's server switched protocols unasked")));
      }
      return Relay101(*head, std::move(rest));
    }
    return StreamAnswer(*head, std::move(rest));
  }

  HttpHeaders AnswerHeaders(const Head& head, bool upgrade) const {
    HttpHeaders headers;
    for (const auto& [name, value] : head.headers) {
      if (upgrade && (name == "upgrade" || absl::StartsWith(name, "sec-websocket-"))) {
        headers.emplace_back(name, value);
        continue;
      }
      if (IsHopByHop(name) || name == "content-length" || name == "set-cookie" ||
          name == "content-security-policy") {
        continue;
      }
      headers.emplace_back(name, value);
    }
    headers.emplace_back("Content-Security-Policy", kSandboxPolicy);
    return headers;
  }

  void StreamAnswer(const Head& head, std::string rest) {
    if (ContainsIgnoreCase(head.Header("transfer-encoding"), "chunked")) {
      return x_->Reply(BadGateway(errors::Unavailable(
          "the sandbox's server answered an HTTP/1.0 request with chunked encoding")));
    }
    HttpHeaders headers = AnswerHeaders(head, false);
    const bool no_body =
        head.status < 200 || head.status == 204 || head.status == 304 || request_.method == "HEAD";
    if (no_body) return x_->Reply({head.status, std::move(headers), ""});
    uint64_t length = HttpExchange::kUnknownLength;
    if (!absl::SimpleAtoi(head.Header("content-length"), &length)) {
      length = HttpExchange::kUnknownLength;
    }
    std::weak_ptr<Relay> weak = weak_from_this();
    auto poke = [weak](bool gone) {
      if (auto self = weak.lock()) {
        if (gone) {
          self->client_gone_ = true;
        } else {
          self->pulled_ = true;
        }
        self->Wake();
      }
    };
    x_->Stream(
        head.status, std::move(headers), [poke] { poke(false); }, [poke] { poke(true); }, length);
    uint64_t sent = 0;
    auto give = [&](std::string data) {
      if (length != HttpExchange::kUnknownLength && sent + data.size() > length) {
        data.resize(length - sent);  // the sandbox sent more than it said: not passed on
      }
      sent += data.size();
      if (!data.empty()) {
        pulled_ = false;
        x_->Write(std::move(data));
      }
    };
    give(std::move(rest));
    const int up = conn_->fd();
    for (;;) {
      if (length != HttpExchange::kUnknownLength && sent >= length) return x_->End(false);
      if (!pulled_) {
        if (!Wait(-1, 0)) break;
        continue;
      }
      char buf[kChunk];
      ssize_t n = recv(up, buf, sizeof(buf), 0);
      if (n > 0) {
        if (!Count(static_cast<size_t>(n))) break;
        give(std::string(buf, static_cast<size_t>(n)));
        continue;
      }
      if (n == 0) return x_->End(length != HttpExchange::kUnknownLength && sent < length);
      if (errno != EAGAIN && errno != EINTR) break;
      if (!Wait(up, POLLIN)) break;
    }
    log::Info("ports.relay_ended",
              {{"session", session_}, {"port", port_}, {"reason", why_}, {"bytes", bytes_}});
    x_->End(true);
  }

  // After the sandbox's 101: the client's connection is taken over, and bytes are copied both
  // ways until either side ends.
  void Relay101(const Head& head, std::string from_sandbox) {
    std::weak_ptr<Relay> weak = weak_from_this();
    x_->Upgrade(
        {101, AnswerHeaders(head, true), ""},
        [weak](HttpExchange::Upgraded u) {
          auto self = weak.lock();
          if (!self) return u.close();
          {
            absl::MutexLock lock(&self->mu_);
            if (!self->abandoned_) {
              self->upgraded_ = std::move(u);
              u.close = nullptr;
            }
          }
          if (u.close) return u.close();  // the relay stopped waiting for it
          self->Wake();
        },
        [weak] {
          if (auto self = weak.lock()) {
            self->client_gone_ = true;
            self->Wake();
          }
        });
    std::optional<HttpExchange::Upgraded> taken;
    for (;;) {
      {
        absl::MutexLock lock(&mu_);
        if (upgraded_) taken = std::move(upgraded_);
      }
      if (taken) break;
      if (!Wait(-1, 0)) {
        absl::MutexLock lock(&mu_);
        if (upgraded_) taken = std::move(upgraded_);
        abandoned_ = !taken;  // a later upgrade closes itself
        break;
      }
    }
    if (!taken) return;
    const int client = taken->fd;
    fcntl(client, F_SETFL, fcntl(client, F_GETFL) | O_NONBLOCK);
    Copy(client, conn_->fd(), std::move(taken->early), std::move(from_sandbox));
    taken->close();
  }

  // Both ways, as they come: `to_sandbox` and `to_client` hold what is already read.
  void Copy(int client, int sandbox, std::string to_sandbox, std::string to_client) {
    bool client_eof = false, sandbox_eof = false;
    for (;;) {
      // A connection cancelled is cut, never half-closed as if it had ended.
      if (conn_->cancel().cancelled()) return (void)Fail(conn_->cancel().reason());
      if (client_eof && to_sandbox.empty()) shutdown(sandbox, SHUT_WR);
      if (sandbox_eof && to_client.empty()) shutdown(client, SHUT_WR);
      if (client_eof && sandbox_eof && to_sandbox.empty() && to_client.empty()) return;
      if (stopping_ || client_gone_) return;
      if (clock_->Now() - last_ >= limits_.idle_timeout) return (void)Fail("idle");
      struct pollfd p[4] = {
          {client,
           static_cast<short>((!client_eof && to_sandbox.size() < kChunk ? POLLIN : 0) |
                              (to_client.empty() ? 0 : POLLOUT)),
           0},
          {sandbox,
           static_cast<short>((!sandbox_eof && to_client.size() < kChunk ? POLLIN : 0) |
                              (to_sandbox.empty() ? 0 : POLLOUT)),
           0},
          {wake_.get(), POLLIN, 0},
          {conn_->cancel().fd(), POLLIN, 0}};
      int r = poll(p, 4, static_cast<int>(absl::ToInt64Milliseconds(kTick)));
      if (r < 0 && errno != EINTR) return;
      if (r <= 0) continue;
      if (p[2].revents != 0) {
        uint64_t n;
        (void)read(wake_.get(), &n, sizeof(n));
      }
      if (!Move(p[0].revents, client, &to_sandbox, &client_eof) ||
          !Move(p[1].revents, sandbox, &to_client, &sandbox_eof) ||
          !Flush(p[1].revents, sandbox, &to_sandbox) || !Flush(p[0].revents, client, &to_client)) {
        return;
      }
    }
  }
  // Reads what `fd` has into `buf`; false on an error or over the byte bound.
  bool Move(short revents, int fd, std::string* buf, bool* eof) {
    if ((revents & (POLLIN | POLLHUP | POLLERR)) == 0 || *eof) return true;
    char tmp[16384];
    ssize_t n = recv(fd, tmp, sizeof(tmp), 0);
    if (n > 0) {
      buf->append(tmp, static_cast<size_t>(n));
      return Count(static_cast<size_t>(n));
    }
    if (n == 0 || (errno != EAGAIN && errno != EINTR)) *eof = true;
    return true;
  }
  bool Flush(short revents, int fd, std::string* buf) {
    if ((revents & POLLOUT) == 0 || buf->empty()) return true;
    ssize_t n = send(fd, buf->data(), buf->size(), MSG_NOSIGNAL);
    if (n > 0) {
      buf->erase(0, static_cast<size_t>(n));
      last_ = clock_->Now();
      return true;
    }
    return n < 0 && (errno == EAGAIN || errno == EINTR);
  }

  PortProxy* const proxy_;
  const core::PortLimits& limits_;
  Clock* const clock_;
  const Target to_;
  const std::string session_;
  const uint16_t port_;
  const std::string prefix_;  // "/v1/sessions/{id}/ports/{port}" (or its signed form)
  const std::string target_;  // the request target the sandbox gets: path and query
  const HttpRequest request_;
  const std::string body_;
  std::shared_ptr<HttpExchange> x_;
  const UniqueFd wake_;
  std::atomic<bool> stopping_{false}, client_gone_{false}, pulled_{false};
  // The relay's thread's own.
  std::unique_ptr<PortConnection> conn_;
  absl::Time last_;  // the last byte either way
  uint64_t bytes_ = 0;
  std::string why_;
  absl::Mutex mu_;
  std::optional<HttpExchange::Upgraded> upgraded_ ABSL_GUARDED_BY(mu_);
  bool abandoned_ ABSL_GUARDED_BY(mu_) = false;  // Relay101 no longer waits for upgraded_
};

namespace {

// A connection this replica's sandbox made.
class LocalPort final : public PortConnection {
 public:
  explicit LocalPort(std::unique_ptr<core::PortManager::Connection> c) : c_(std::move(c)) {}
  int fd() const override { return c_->fd(); }
  const CancelToken& cancel() const override { return c_->cancel(); }

 private:
  const std::unique_ptr<core::PortManager::Connection> c_;
};

}  // namespace

absl::StatusOr<std::unique_ptr<PortConnection>> PortProxy::Connect(const Target& target) {
  if (deps_.forwarder != nullptr && !deps_.sessions->Holds(target.session)) {
    // A grant is checked by the session's holder, which knows its exposure (and the key that
    // signed it): the lookup only routes, as an operator's would.
    core::Caller router;
    if (target.caller.has_value()) {
      router = *target.caller;
    } else {
      router.is_operator = true;
    }
    absl::StatusOr<std::optional<Route>> route =
        deps_.forwarder->For(nullptr, router, Owner::kSession, target.session);
    if (!route.ok()) return route.status();
    if (route->has_value()) {
      std::unique_ptr<grpc::ClientContext> ctx = deps_.forwarder->ContextFor(
          {nullptr, target.caller.has_value() ? target.authorization : ""});
      v1::ConnectPortRequest first;
      first.set_session_id(target.session);
      first.set_port(target.port);
      if (!target.caller.has_value()) first.set_grant(target.grant);
      absl::StatusOr<std::unique_ptr<RemotePort>> remote =
          RemotePort::Open(**route, std::move(ctx), first);
      if (!remote.ok()) return remote.status();
      return std::unique_ptr<PortConnection>(*std::move(remote));
    }
  }
  core::Caller caller;
  if (target.caller.has_value()) {
    caller = *target.caller;
  } else {
    absl::StatusOr<core::Caller> granted =
        deps_.ports->CheckGrant(target.session, target.port, target.grant);
    if (!granted.ok()) return granted.status();
    caller = *granted;
  }
  absl::StatusOr<std::unique_ptr<core::PortManager::Connection>> conn =
      deps_.ports->Open(caller, target.session, target.port);
  if (!conn.ok()) return conn.status();
  return std::unique_ptr<PortConnection>(std::make_unique<LocalPort>(*std::move(conn)));
}

absl::Status PortProxy::Enter(Relay* relay) {
  absl::MutexLock lock(&mu_);
  if (stopping_) return errors::Unavailable("the daemon is shutting down");
  if (relays_.size() >= deps_.limits->max_connections) {
    return errors::ResourceExhausted(
        absl::StrCat("this daemon relays ", deps_.limits->max_connections,
                     " connections to exposed ports already (ports.max_connections)"));
  }
  relays_.insert(relay);
  return absl::OkStatus();
}

void PortProxy::Leave(Relay* relay) {
  absl::MutexLock lock(&mu_);
  relays_.erase(relay);
}

size_t PortProxy::active() {
  absl::MutexLock lock(&mu_);
  return relays_.size();
}

void PortProxy::Stop() {
  absl::MutexLock lock(&mu_);
  stopping_ = true;
  for (Relay* r : relays_) r->Stop();
  mu_.Await(absl::Condition(
      +[](std::set<Relay*>* s) { return s->empty(); }, &relays_));
}

HttpRoute PortProxy::MakeRoute(const std::string& method, const std::string& pattern,
                               bool is_signed) {
  HttpRoute route{method, pattern, nullptr};
  route.open_body = [this, is_signed](const HttpRequest& http) {
    HttpBodySink sink;
    const std::string& session = http.params.at("session_id");
    absl::StatusOr<uint16_t> port = core::PortManager::ParsePort(http.params.at("port"));
    if (!port.ok()) {
      sink.refused = JsonError(port.status());
      return sink;
    }
    Target to;
    to.session = session;
    to.port = *port;
    to.authorization = http.Header("authorization");
    // A signed URL of a session held elsewhere is checked there, when the relay connects.
    const bool grant_elsewhere =
        is_signed && deps_.forwarder != nullptr && !deps_.sessions->Holds(session);
    absl::StatusOr<core::Caller> caller =
        grant_elsewhere ? core::Caller()
        : is_signed     ? deps_.ports->CheckGrant(session, *port, http.params.at("grant"))
                        : deps_.tenants->Authenticate(http.headers.count("authorization") > 0
                                                          ? std::optional<std::string>(to.authorization)
                                                          : std::nullopt);
    if (grant_elsewhere) {
      to.grant = http.params.at("grant");
    } else if (caller.ok()) {
      to.caller = *caller;
    }
    absl::StatusOr<std::string> path = UpstreamPath(http.params.at("path"));
    for (const auto& [name, value] : http.headers) {
      if (!path.ok()) break;
      if (absl::StrContains(value, '\r') || absl::StrContains(value, '\n')) {
        path = errors::InvalidArgument(absl::StrCat("header ", name, ": holds CR or LF"));
      }
    }
    if (!caller.ok() || !path.ok()) {
      sink.refused = JsonError(caller.ok() ? path.status() : caller.status());
      return sink;
    }
    std::string prefix = absl::StrCat("/v1/sessions/", session, "/ports/", *port);
    if (is_signed) absl::StrAppend(&prefix, ":signed/", http.params.at("grant"));
    std::string target = *path;
    if (!http.raw_query.empty()) absl::StrAppend(&target, "?", http.raw_query);
    auto body = std::make_shared<std::string>();
    const uint64_t max_body = deps_.limits->max_body_bytes;
    uint64_t declared = 0;
    if (absl::SimpleAtoi(http.Header("content-length"), &declared) && declared > max_body) {
      sink.refused = JsonError(errors::InvalidArgument(
          absl::StrCat("the request body is over ", max_body, " bytes (ports.max_body_bytes)")));
      sink.refused->status = 413;
      return sink;
    }
    sink.append = [body, max_body](const char* data, size_t size) -> std::optional<HttpResponse> {
      if (body->size() + size > max_body) {
        HttpResponse r = JsonError(errors::InvalidArgument(
            absl::StrCat("the request body is over ", max_body, " bytes (ports.max_body_bytes)")));
        r.status = 413;
        return r;
      }
      body->append(data, size);
      return std::nullopt;
    };
    sink.done = [this, to = std::move(to), prefix, target, http,
                 body](std::shared_ptr<HttpExchange> x) {
      auto relay = std::make_shared<Relay>(this, to, prefix, target, http, std::move(*body), x);
      if (absl::Status st = Enter(relay.get()); !st.ok()) return x->Reply(JsonError(st));
      std::thread([this, relay] {
        relay->Run();
        Leave(relay.get());
      }).detach();
    };
    return sink;
  };
  return route;
}

HttpServer::Routes PortProxy::Routes() {
  HttpServer::Routes routes;
  for (const char* method : {"GET", "HEAD", "POST", "PUT", "PATCH", "DELETE", "OPTIONS"}) {
    routes.push_back(MakeRoute(method, "/v1/sessions/{session_id}/ports/{port}/{path**}", false));
    routes.push_back(
        MakeRoute(method, "/v1/sessions/{session_id}/ports/{port}:signed/{grant}/{path**}", true));
  }
  return routes;
}

}  // namespace sandgate::server
