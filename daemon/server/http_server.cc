#include "server/http_server.h"

#include <arpa/inet.h>
#include <microhttpd.h>
#include <netinet/in.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <unistd.h>

#include <atomic>
#include <cstdarg>
#include <cstdio>
#include <cstring>

#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "common/errors.h"
#include "common/log.h"
#include "server/http_exchange.h"
#include "server/http_request.h"
#include "server/http_tls.h"

namespace sandgate::server {

std::string HttpRequest::Header(const std::string& lower_name) const {
  auto it = headers.find(lower_name);
  return it == headers.end() ? "" : it->second;
}

std::string HttpHost(const std::string& address) { return address.substr(0, address.rfind(':')); }

namespace {

// The server's own refusals (too big, stopping), in the REST API's error shape.
HttpResponse ErrorResponse(unsigned int http, absl::StatusCode code, const std::string& message) {
  return ErrorAnswer(http, absl::Status(code, message));
}

void QueueNow(MHD_Connection* connection, const HttpResponse& r) {
  MHD_Response* response = MakeResponse(r);
  MHD_queue_response(connection, r.status, response);
  MHD_destroy_response(response);
}

enum MHD_Result CollectHeader(void* cls, enum MHD_ValueKind, const char* key, const char* value) {
  static_cast<HttpHeaders*>(cls)->emplace_back(key, value ? value : "");
  return MHD_YES;
}

enum MHD_Result CollectArg(void* cls, enum MHD_ValueKind, const char* key, const char* value) {
  static_cast<std::vector<std::pair<std::string, std::string>>*>(cls)->emplace_back(
      key, value ? value : "");
  return MHD_YES;
}

// MHD's percent-decoding, replaced by none: the path and the query reach RouteRequest as they
// arrived, which decodes them and checks the result (a %00 decoded here would end MHD's
// C string, and the path with it, silently).
size_t KeepEscaped(void*, MHD_Connection*, char* s) { return std::strlen(s); }

void LogFromMhd(void*, const char* fmt, va_list ap) {
  char buf[512];
  vsnprintf(buf, sizeof(buf), fmt, ap);
  std::string text(buf);
  while (!text.empty() && text.back() == '\n') text.pop_back();
  log::Warning("http.library", {{"message", text}});
}

}  // namespace

HttpServer::HttpServer(HttpServerOptions options, Routes routes)
    : options_(std::move(options)), routes_(std::move(routes)) {}

absl::StatusOr<std::unique_ptr<HttpServer>> HttpServer::Start(HttpServerOptions options,
                                                              Routes routes) {
  const std::string& address = options.address;
  size_t colon = address.rfind(':');
  int port = 0;
  if (colon == std::string::npos || !absl::SimpleAtoi(address.substr(colon + 1), &port) ||
      port < 0 || port > 65535) {
    return errors::InvalidArgument(
        absl::StrCat(options.key_name, ": expected host:port, got '", address, "'"));
  }
  struct sockaddr_in addr = {};
  addr.sin_family = AF_INET;
  addr.sin_port = htons(static_cast<uint16_t>(port));
  if (inet_pton(AF_INET, address.substr(0, colon).c_str(), &addr.sin_addr) != 1) {
    return errors::InvalidArgument(absl::StrCat(options.key_name, ": '", address.substr(0, colon),
                                                "' is not an IPv4 address"));
  }
  const bool tls = !options.tls_cert_pem.empty();
  if (tls && (MHD_is_feature_supported(MHD_FEATURE_TLS) != MHD_YES ||
              MHD_is_feature_supported(MHD_FEATURE_HTTPS_CERT_CALLBACK) != MHD_YES)) {
    return errors::FailedPrecondition(
        absl::StrCat(options.key_name,
                     ": this libmicrohttpd was built without TLS (or its certificate callback)"));
  }
  std::unique_ptr<HttpServer> server(new HttpServer(std::move(options), std::move(routes)));
  const HttpServerOptions& o = server->options_;
  unsigned int flags = MHD_USE_INTERNAL_POLLING_THREAD | MHD_USE_EPOLL | MHD_ALLOW_SUSPEND_RESUME |
                       MHD_ALLOW_UPGRADE | MHD_USE_ERROR_LOG;
  if (tls) {
    flags |= MHD_USE_TLS;
    server->tls_identity_ = InstallTlsIdentity(o);
    if (server->tls_identity_ == nullptr) {
      return errors::InvalidArgument(
          absl::StrCat(o.key_name, ": the TLS key or certificate does not load into GnuTLS"));
    }
  }
  // Options after the TLS pair are ignored when it is absent: MHD_OPTION_END ends the list.
  server->daemon_ = MHD_start_daemon(
      flags, 0, nullptr, nullptr, reinterpret_cast<MHD_AccessHandlerCallback>(&AccessHandler),
      // The logger first: MHD warns through its own stderr logger until it is set.
      server.get(), MHD_OPTION_EXTERNAL_LOGGER, &LogFromMhd, nullptr, MHD_OPTION_SOCK_ADDR, &addr,
      MHD_OPTION_NOTIFY_COMPLETED, &Completed, server.get(), MHD_OPTION_UNESCAPE_CALLBACK,
      &KeepEscaped, nullptr, MHD_OPTION_CONNECTION_LIMIT, o.max_connections,
      MHD_OPTION_CONNECTION_TIMEOUT, o.idle_timeout_seconds,
      tls ? MHD_OPTION_HTTPS_CERT_CALLBACK : MHD_OPTION_END, &RetrieveTlsIdentity, MHD_OPTION_END);
  if (server->daemon_ == nullptr) {
    return errors::Unavailable(absl::StrCat(o.key_name, ": cannot serve HTTP on ", o.address,
                                            " (in use, or a bad TLS key or certificate)"));
  }
  const union MHD_DaemonInfo* info =
      MHD_get_daemon_info(server->daemon_, MHD_DAEMON_INFO_BIND_PORT);
  server->port_ = info ? info->port : port;
  server->tls_ = tls;
  server->epoll_fd_ = epoll_create1(EPOLL_CLOEXEC);
  server->wake_fd_ = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
  struct epoll_event wake = {};
  wake.events = EPOLLIN;
  wake.data.u64 = 0;  // watch ids start at 1
  if (server->epoll_fd_ < 0 || server->wake_fd_ < 0 ||
      epoll_ctl(server->epoll_fd_, EPOLL_CTL_ADD, server->wake_fd_, &wake) != 0) {
    return errors::Internal(
        absl::StrCat(o.key_name, ": cannot watch connections: ", std::strerror(errno)));
  }
  server->watcher_ = std::thread([s = server.get()] { s->WatchLoop(); });
  return server;
}

HttpServer::~HttpServer() { Stop(); }

int HttpServer::AccessHandler(void* cls, MHD_Connection* connection, const char* url,
                              const char* method, const char*, const char* upload_data,
                              size_t* upload_data_size, void** con_cls) {
  auto* server = static_cast<HttpServer*>(cls);
  if (*con_cls == nullptr) {
    auto exchange = std::make_shared<Exchange>(server, connection);
    HttpRequest& request = exchange->request;
    RawHttpRequest raw{method, url, {}, {}};
    MHD_get_connection_values(connection, MHD_HEADER_KIND, &CollectHeader, &raw.headers);
    MHD_get_connection_values(connection, MHD_GET_ARGUMENT_KIND, &CollectArg, &raw.query);
    *con_cls = new std::shared_ptr<Exchange>(exchange);
    // Refused on its headers alone, the request's body is never read.
    std::optional<HttpResponse> refused;
    exchange->route = RouteRequest(server->routes_, raw, &request, &refused);
    uint64_t length = 0;
    if (exchange->route != nullptr && exchange->route->open_body) {
      exchange->sink = exchange->route->open_body(request);
      refused = std::move(exchange->sink->refused);
    } else if (exchange->route != nullptr &&
               absl::SimpleAtoi(request.Header("content-length"), &length) &&
               length > server->options_.max_body_bytes) {
      refused = ErrorResponse(
          413, absl::StatusCode::kInvalidArgument,
          absl::StrCat("the request body is over ", server->options_.max_body_bytes, " bytes"));
    }
    if (refused) {
      exchange->dispatched = true;
      QueueNow(connection, *refused);
    }
    return MHD_YES;
  }
  std::shared_ptr<Exchange>& exchange = *static_cast<std::shared_ptr<Exchange>*>(*con_cls);
  if (*upload_data_size > 0) {
    size_t size = *upload_data_size;
    *upload_data_size = 0;
    if (exchange->dispatched || exchange->refused) return MHD_YES;  // dropped
    if (exchange->sink) {
      exchange->refused = exchange->sink->append(upload_data, size);
    } else if (exchange->request.body.size() + size > server->options_.max_body_bytes) {
      exchange->refused = ErrorResponse(
          413, absl::StatusCode::kInvalidArgument,
          absl::StrCat("the request body is over ", server->options_.max_body_bytes, " bytes"));
    } else {
      exchange->request.body.append(upload_data, size);
    }
    return MHD_YES;
  }
  // Resumed after the client hung up: MHD closes the connection.
  if (exchange->dispatched) return exchange->closed() ? MHD_NO : MHD_YES;
  exchange->dispatched = true;
  if (exchange->refused) {
    QueueNow(connection, *exchange->refused);
    return MHD_YES;
  }
  server->Dispatch(exchange);
  return MHD_YES;
}

void HttpServer::Dispatch(const std::shared_ptr<Exchange>& exchange) {
  {
    absl::MutexLock lock(&mu_);
    if (stopping_) {
      QueueNow(exchange->connection(),
               ErrorResponse(503, absl::StatusCode::kUnavailable, "the daemon is shutting down"));
      return;
    }
    ++unanswered_;
    live_[exchange.get()] = exchange;
  }
  exchange->Suspend();
  Watch(exchange);
  if (exchange->sink) {
    exchange->sink->done(exchange);
  } else {
    exchange->route->handler(exchange->request, exchange);
  }
}

void HttpServer::Watch(const std::shared_ptr<Exchange>& exchange) {
  const union MHD_ConnectionInfo* info =
      MHD_get_connection_info(exchange->connection(), MHD_CONNECTION_INFO_CONNECTION_FD);
  if (info == nullptr) return;
  absl::MutexLock lock(&mu_);
  const uint64_t id = next_watch_id_++;
  struct epoll_event ev = {};
  ev.events = EPOLLRDHUP;
  ev.data.u64 = id;
  if (epoll_ctl(epoll_fd_, EPOLL_CTL_ADD, info->connect_fd, &ev) != 0) return;
  exchange->watch_id = id;
  exchange->watch_fd = info->connect_fd;
  watched_[id] = exchange;
}

// Before MHD closes the socket (a closed one leaves the epoll set by itself, but its number
// may be reused by the next connection, which must not be dropped instead).
void HttpServer::Unwatch(Exchange* exchange) {
  absl::MutexLock lock(&mu_);
  if (watched_.erase(exchange->watch_id) > 0) {
    epoll_ctl(epoll_fd_, EPOLL_CTL_DEL, exchange->watch_fd, nullptr);
  }
}

void HttpServer::WatchLoop() {
  struct epoll_event events[16];
  for (;;) {
    int n = epoll_wait(epoll_fd_, events, 16, -1);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) return;
    for (int i = 0; i < n; ++i) {
      if (events[i].data.u64 == 0) return;  // Stop
      std::shared_ptr<Exchange> gone;
      {
        absl::MutexLock lock(&mu_);
        auto it = watched_.find(events[i].data.u64);
        if (it == watched_.end()) continue;
        gone = it->second.lock();
        watched_.erase(it);
        if (gone) epoll_ctl(epoll_fd_, EPOLL_CTL_DEL, gone->watch_fd, nullptr);
      }
      if (gone) gone->Close();
    }
  }
}

void HttpServer::Answered() {
  absl::MutexLock lock(&mu_);
  --unanswered_;
}

void HttpServer::Completed(void* cls, MHD_Connection*, void** con_cls, int) {
  auto* server = static_cast<HttpServer*>(cls);
  auto* holder = static_cast<std::shared_ptr<Exchange>*>(*con_cls);
  if (holder == nullptr) return;
  server->Unwatch(holder->get());
  if ((*holder)->upgrading()) (*holder)->Close();  // never upgraded: its taker stops waiting
  {
    absl::MutexLock lock(&server->mu_);
    server->live_.erase(holder->get());
  }
  delete holder;
  *con_cls = nullptr;
}

uint64_t HttpServer::AddUpgraded(std::function<void()> stop) {
  bool stopping;
  uint64_t id;
  {
    absl::MutexLock lock(&mu_);
    id = next_upgraded_id_++;
    upgraded_[id] = stop;
    stopping = stopping_;
  }
  if (stopping && stop) stop();  // taken while Stop runs: it ends at once
  return id;
}

void HttpServer::RemoveUpgraded(uint64_t id) {
  absl::MutexLock lock(&mu_);
  upgraded_.erase(id);
}

void HttpServer::Stop() {
  std::vector<std::shared_ptr<Exchange>> live;
  {
    absl::MutexLock lock(&mu_);
    if (stopping_ || daemon_ == nullptr) return;
    stopping_ = true;
    // A handler's answer in flight touches its connection: MHD must not be gone by then.
    mu_.Await(absl::Condition(
        +[](int* n) { return *n == 0; }, &unanswered_));
    for (auto& [key, weak] : live_) {
      if (auto e = weak.lock()) live.push_back(std::move(e));
    }
  }
  uint64_t one = 1;
  if (wake_fd_ >= 0 && write(wake_fd_, &one, sizeof(one)) < 0) {
    log::Warning("http.watcher", {{"message", "cannot wake the hang-up watcher"}});
  }
  if (watcher_.joinable()) watcher_.join();
  // MHD must not be stopped with a connection suspended: each stream ends and resumes.
  for (auto& e : live) e->Close();
  // Nor with an upgraded connection open: each taker ends and closes it.
  std::vector<std::function<void()>> stops;
  {
    absl::MutexLock lock(&mu_);
    for (auto& [id, stop] : upgraded_) {
      if (stop) stops.push_back(stop);
    }
  }
  for (auto& stop : stops) stop();
  {
    absl::MutexLock lock(&mu_);
    mu_.Await(absl::Condition(
        +[](std::map<uint64_t, std::function<void()>>* m) { return m->empty(); }, &upgraded_));
  }
  MHD_stop_daemon(daemon_);
  daemon_ = nullptr;
  if (epoll_fd_ >= 0) close(epoll_fd_);
  if (wake_fd_ >= 0) close(wake_fd_);
  if (tls_identity_ != nullptr) UninstallTlsIdentity(tls_identity_);
}

}  // namespace sandgate::server
