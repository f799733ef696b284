#include "server/http_server.h"

#include <arpa/inet.h>
#include <microhttpd.h>
#include <netinet/in.h>

#include <cstdarg>
#include <cstdio>
#include <cstring>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "common/errors.h"
#include "common/log.h"

namespace sandgate::server {

std::string HttpRequest::Header(const std::string& lower_name) const {
  auto it = headers.find(lower_name);
  return it == headers.end() ? "" : it->second;
}

std::string HttpHost(const std::string& address) { return address.substr(0, address.rfind(':')); }

namespace {

MHD_Response* MakeResponse(const HttpResponse& r) {
  MHD_Response* response = MHD_create_response_from_buffer(
      r.body.size(), const_cast<char*>(r.body.data()), MHD_RESPMEM_MUST_COPY);
  MHD_add_response_header(response, "X-Content-Type-Options", "nosniff");
  for (const auto& [name, value] : r.headers) {
    MHD_add_response_header(response, name.c_str(), value.c_str());
  }
  return response;
}

// The server's own refusals (no route, too big, stopping), in the REST API's error shape.
HttpResponse ErrorResponse(unsigned int http, absl::StatusCode code, const std::string& message) {
  std::string body =
      absl::StrCat("{\"code\":", static_cast<int>(code), ",\"status\":\"",
                   absl::StatusCodeToString(code), "\",\"message\":\"", message, "\"}\n");
  return {http, {{"Content-Type", "application/json; charset=utf-8"}}, std::move(body)};
}

void QueueNow(MHD_Connection* connection, const HttpResponse& r) {
  MHD_Response* response = MakeResponse(r);
  MHD_queue_response(connection, r.status, response);
  MHD_destroy_response(response);
}

// Matches `path` against `pattern`, filling the {name} segments ("{id}:cancel" matches a
// segment ending in ":cancel").
bool Match(const std::string& pattern, const std::string& path,
           std::map<std::string, std::string>* params) {
  std::vector<absl::string_view> want = absl::StrSplit(pattern, '/');
  std::vector<absl::string_view> got = absl::StrSplit(path, '/');
  if (want.size() != got.size()) return false;
  std::map<std::string, std::string> found;
  for (size_t i = 0; i < want.size(); ++i) {
    absl::string_view w = want[i], g = got[i];
    if (!absl::StartsWith(w, "{")) {
      if (w != g) return false;
      continue;
    }
    size_t close = w.find('}');
    absl::string_view verb = w.substr(close + 1);  // "" or ":cancel"
    if (!absl::ConsumeSuffix(&g, verb) || g.empty() || absl::StrContains(g, ':')) return false;
    found[std::string(w.substr(1, close - 1))] = std::string(g);
  }
  *params = std::move(found);
  return true;
}

enum MHD_Result CollectHeader(void* cls, enum MHD_ValueKind, const char* key, const char* value) {
  (*static_cast<std::map<std::string, std::string>*>(cls))[absl::AsciiStrToLower(key)] =
      value ? value : "";
  return MHD_YES;
}

enum MHD_Result CollectArg(void* cls, enum MHD_ValueKind, const char* key, const char* value) {
  (*static_cast<std::map<std::string, std::string>*>(cls))[key] = value ? value : "";
  return MHD_YES;
}

void LogFromMhd(void*, const char* fmt, va_list ap) {
  char buf[512];
  vsnprintf(buf, sizeof(buf), fmt, ap);
  std::string text(buf);
  while (!text.empty() && text.back() == '\n') text.pop_back();
  log::Warning("http.library", {{"message", text}});
}

}  // namespace

// One request: its data, and its answer's state. The connection is suspended while the
// handler works and while a stream waits for its producer; it is resumed (under mu_, so a
// resume never races the suspend it undoes) when there is something to send.
class HttpServer::Exchange final : public HttpExchange,
                                   public std::enable_shared_from_this<Exchange> {
 public:
  Exchange(HttpServer* server, MHD_Connection* connection)
      : server_(server), connection_(connection) {}

  // On the polling thread, before the handler runs.
  void Suspend() {
    absl::MutexLock lock(&mu_);
    suspended_ = true;
    MHD_suspend_connection(connection_);
  }

  void Reply(HttpResponse response) override {
    MHD_Response* r = MakeResponse(response);
    {
      absl::MutexLock lock(&mu_);
      if (!answered_) {
        answered_ = true;
        MHD_queue_response(connection_, response.status, r);
        ResumeLocked();
      }
    }
    MHD_destroy_response(r);
    server_->Answered();
  }

  void Stream(unsigned int status, HttpHeaders headers, Pull pull,
              std::function<void()> on_close) override {
    MHD_Response* r = MHD_create_response_from_callback(
        MHD_SIZE_UNKNOWN, 16 << 10, &Exchange::Read,
        new std::shared_ptr<Exchange>(shared_from_this()), &Exchange::Free);
    MHD_add_response_header(r, "X-Content-Type-Options", "nosniff");
    for (const auto& [name, value] : headers) {
      MHD_add_response_header(r, name.c_str(), value.c_str());
    }
    {
      absl::MutexLock lock(&mu_);
      pull_ = std::move(pull);
      on_close_ = std::move(on_close);
      if (!answered_) {
        answered_ = true;
        streaming_ = true;
        MHD_queue_response(connection_, status, r);
        ResumeLocked();
      }
    }
    MHD_destroy_response(r);
    server_->Answered();
  }

  bool Write(std::string data) override {
    absl::MutexLock lock(&mu_);
    if (closed_ || ended_) return false;
    if (offset_ > 0) {
      buffer_.erase(0, offset_);
      offset_ = 0;
    }
    buffer_.append(data);
    pulling_ = false;
    ResumeLocked();
    return true;
  }

  void End(bool failed) override {
    absl::MutexLock lock(&mu_);
    ended_ = true;
    failed_ = failed;
    ResumeLocked();
  }

  // The server stops: the stream ends now (its producer is told), and a suspended
  // connection is resumed so that MHD can close it.
  void Close() {
    std::function<void()> on_close;
    {
      absl::MutexLock lock(&mu_);
      if (closed_) return;
      closed_ = true;
      on_close = std::move(on_close_);
      ResumeLocked();
    }
    if (on_close) on_close();
  }

  MHD_Connection* connection() const { return connection_; }

  HttpRequest request;
  bool too_large = false;
  bool dispatched = false;

 private:
  void ResumeLocked() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    if (!suspended_) return;
    suspended_ = false;
    MHD_resume_connection(connection_);
  }

  // MHD's content reader, on the polling thread.
  static ssize_t Read(void* cls, uint64_t, char* buf, size_t max) {
    Exchange* self = static_cast<std::shared_ptr<Exchange>*>(cls)->get();
    Pull pull;
    {
      absl::MutexLock lock(&self->mu_);
      if (self->offset_ < self->buffer_.size()) {
        size_t n = std::min(max, self->buffer_.size() - self->offset_);
        std::memcpy(buf, self->buffer_.data() + self->offset_, n);
        self->offset_ += n;
        return static_cast<ssize_t>(n);
      }
      if (self->closed_) return MHD_CONTENT_READER_END_WITH_ERROR;
      if (self->ended_) {
        return self->failed_ ? MHD_CONTENT_READER_END_WITH_ERROR : MHD_CONTENT_READER_END_OF_STREAM;
      }
      // Nothing to send: wait, suspended, for the producer (0 here would busy-loop).
      self->suspended_ = true;
      MHD_suspend_connection(self->connection_);
      if (!self->pulling_) {
        self->pulling_ = true;
        pull = self->pull_;
      }
    }
    if (pull) pull();
    return 0;
  }

  // The response is gone (the connection ended): the producer is told, once.
  static void Free(void* cls) {
    auto* holder = static_cast<std::shared_ptr<Exchange>*>(cls);
    (*holder)->Close();
    delete holder;
  }

  HttpServer* const server_;
  MHD_Connection* const connection_;
  absl::Mutex mu_;
  bool suspended_ ABSL_GUARDED_BY(mu_) = false;
  bool answered_ ABSL_GUARDED_BY(mu_) = false;
  bool streaming_ ABSL_GUARDED_BY(mu_) = false;
  bool closed_ ABSL_GUARDED_BY(mu_) = false;
  bool ended_ ABSL_GUARDED_BY(mu_) = false;
  bool failed_ ABSL_GUARDED_BY(mu_) = false;
  bool pulling_ ABSL_GUARDED_BY(mu_) = false;
  std::string buffer_ ABSL_GUARDED_BY(mu_);
  size_t offset_ ABSL_GUARDED_BY(mu_) = 0;  // buffer_ sent up to here
  Pull pull_ ABSL_GUARDED_BY(mu_);
  std::function<void()> on_close_ ABSL_GUARDED_BY(mu_);
};

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
  if (tls && MHD_is_feature_supported(MHD_FEATURE_TLS) != MHD_YES) {
    return errors::FailedPrecondition(
        absl::StrCat(options.key_name, ": this libmicrohttpd was built without TLS"));
  }
  std::unique_ptr<HttpServer> server(new HttpServer(std::move(options), std::move(routes)));
  const HttpServerOptions& o = server->options_;
  unsigned int flags = MHD_USE_INTERNAL_POLLING_THREAD | MHD_USE_EPOLL | MHD_ALLOW_SUSPEND_RESUME |
                       MHD_USE_ERROR_LOG;
  if (tls) flags |= MHD_USE_TLS;
  // Options after the TLS pair are ignored when it is absent: MHD_OPTION_END ends the list.
  server->daemon_ = MHD_start_daemon(
      flags, 0, nullptr, nullptr, reinterpret_cast<MHD_AccessHandlerCallback>(&AccessHandler),
      server.get(), MHD_OPTION_SOCK_ADDR, &addr, MHD_OPTION_NOTIFY_COMPLETED, &Completed,
      server.get(), MHD_OPTION_CONNECTION_LIMIT, o.max_connections, MHD_OPTION_CONNECTION_TIMEOUT,
      o.idle_timeout_seconds, MHD_OPTION_EXTERNAL_LOGGER, &LogFromMhd, nullptr,
      tls ? MHD_OPTION_HTTPS_MEM_KEY : MHD_OPTION_END, o.tls_key_pem.c_str(),
      MHD_OPTION_HTTPS_MEM_CERT, o.tls_cert_pem.c_str(), MHD_OPTION_END);
  if (server->daemon_ == nullptr) {
    return errors::Unavailable(absl::StrCat(o.key_name, ": cannot serve HTTP on ", o.address,
                                            " (in use, or a bad TLS key or certificate)"));
  }
  const union MHD_DaemonInfo* info =
      MHD_get_daemon_info(server->daemon_, MHD_DAEMON_INFO_BIND_PORT);
  server->port_ = info ? info->port : port;
  server->tls_ = tls;
  return server;
}

HttpServer::~HttpServer() { Stop(); }

int HttpServer::AccessHandler(void* cls, MHD_Connection* connection, const char* url,
                              const char* method, const char*, const char* upload_data,
                              size_t* upload_data_size, void** con_cls) {
  auto* server = static_cast<HttpServer*>(cls);
  if (*con_cls == nullptr) {
    auto exchange = std::make_shared<Exchange>(server, connection);
    exchange->request.method = method;
    exchange->request.path = url;
    MHD_get_connection_values(connection, MHD_HEADER_KIND, &CollectHeader,
                              &exchange->request.headers);
    MHD_get_connection_values(connection, MHD_GET_ARGUMENT_KIND, &CollectArg,
                              &exchange->request.query);
    *con_cls = new std::shared_ptr<Exchange>(std::move(exchange));
    return MHD_YES;
  }
  std::shared_ptr<Exchange>& exchange = *static_cast<std::shared_ptr<Exchange>*>(*con_cls);
  if (*upload_data_size > 0) {
    if (exchange->request.body.size() + *upload_data_size > server->options_.max_body_bytes) {
      exchange->too_large = true;
    } else {
      exchange->request.body.append(upload_data, *upload_data_size);
    }
    *upload_data_size = 0;
    return MHD_YES;
  }
  if (exchange->dispatched) return MHD_YES;
  exchange->dispatched = true;
  server->Dispatch(exchange);
  return MHD_YES;
}

void HttpServer::Dispatch(const std::shared_ptr<Exchange>& exchange) {
  HttpRequest& request = exchange->request;
  if (exchange->too_large) {
    QueueNow(exchange->connection(),
             ErrorResponse(
                 413, absl::StatusCode::kInvalidArgument,
                 absl::StrCat("the request body is over ", options_.max_body_bytes, " bytes")));
    return;
  }
  const HttpRoute* route = nullptr;
  bool path_known = false;
  for (const HttpRoute& r : routes_) {
    std::map<std::string, std::string> params;
    if (!Match(r.pattern, request.path, &params)) continue;
    path_known = true;
    if (r.method != request.method) continue;
    route = &r;
    request.params = std::move(params);
    break;
  }
  if (route == nullptr) {
    QueueNow(exchange->connection(),
             path_known
                 ? ErrorResponse(405, absl::StatusCode::kUnimplemented,
                                 absl::StrCat(request.method, " is not allowed on ", request.path))
                 : ErrorResponse(404, absl::StatusCode::kNotFound,
                                 absl::StrCat("no such path: ", request.path)));
    return;
  }
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
  route->handler(request, exchange);
}

void HttpServer::Answered() {
  absl::MutexLock lock(&mu_);
  --unanswered_;
}

void HttpServer::Completed(void* cls, MHD_Connection*, void** con_cls, int) {
  auto* server = static_cast<HttpServer*>(cls);
  auto* holder = static_cast<std::shared_ptr<Exchange>*>(*con_cls);
  if (holder == nullptr) return;
  {
    absl::MutexLock lock(&server->mu_);
    server->live_.erase(holder->get());
  }
  delete holder;
  *con_cls = nullptr;
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
  // MHD must not be stopped with a connection suspended: each stream ends and resumes.
  for (auto& e : live) e->Close();
  MHD_stop_daemon(daemon_);
  daemon_ = nullptr;
}

}  // namespace sandgate::server
