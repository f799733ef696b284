#include "server/http_server.h"

#include <arpa/inet.h>
#include <gnutls/abstract.h>
#include <gnutls/gnutls.h>
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
#include "common/tls.h"
#include "server/http_request.h"

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

// The HTTPS listener's key pair, handed to GnuTLS at each handshake (MHD's certificate
// callback) and re-read from its files every reload interval, at the first handshake after
// it (two small files, once an interval, on the polling thread). Every pair loaded stays until
// the process ends: a handshake under way may still use an older one, and a renewal a day
// costs a few KB. The callback has no user pointer: one TLS identity per process (the daemon
// has one HTTPS port). Thread safe.
class TlsIdentity {
 public:
  static TlsIdentity* Install(const HttpServerOptions& o) {
    auto* identity = new TlsIdentity(o);
    absl::Status st;
    {
      absl::MutexLock lock(&identity->mu_);
      st = identity->AddLocked(o.tls_cert_pem, o.tls_key_pem);
    }
    if (!st.ok()) {
      delete identity;
      return nullptr;
    }
    delete current_.exchange(identity);
    return identity;
  }
  static void Uninstall(TlsIdentity* identity) {
    TlsIdentity* expected = identity;
    if (current_.compare_exchange_strong(expected, nullptr)) delete identity;
  }

  static int Retrieve(gnutls_session_t, const gnutls_datum_t*, int, const gnutls_pk_algorithm_t*,
                      int, gnutls_pcert_st** pcert, unsigned int* pcert_length,
                      gnutls_privkey_t* key) {
    TlsIdentity* self = current_.load();
    if (self == nullptr) return -1;
    absl::MutexLock lock(&self->mu_);
    self->MaybeReloadLocked();
    Pair& p = *self->pairs_.back();
    *pcert = p.certs.data();
    *pcert_length = static_cast<unsigned int>(p.certs.size());
    *key = p.key;
    return 0;
  }

  ~TlsIdentity() {
    absl::MutexLock lock(&mu_);
    for (auto& p : pairs_) {
      for (auto& c : p->certs) gnutls_pcert_deinit(&c);
      gnutls_privkey_deinit(p->key);
    }
  }

 private:
  struct Pair {
    std::vector<gnutls_pcert_st> certs;
    gnutls_privkey_t key = nullptr;
  };

  explicit TlsIdentity(const HttpServerOptions& o)
      : options_(o), next_check_(o.clock->Now() + absl::Seconds(o.tls_reload_interval_seconds)) {}

  void MaybeReloadLocked() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    if (options_.tls_reload_interval_seconds <= 0 || options_.tls_cert_file.empty()) return;
    const absl::Time now = options_.clock->Now();
    if (now < next_check_) return;
    next_check_ = now + absl::Seconds(options_.tls_reload_interval_seconds);
    absl::StatusOr<TlsPem> pem = ReadTlsFiles({options_.tls_cert_file, options_.tls_key_file, ""},
                                              {"tls.cert_file", "tls.key_file", ""});
    absl::Status st = pem.status();
    if (st.ok() && pem->cert_chain == cert_pem_ && pem->private_key == key_pem_) return;
    if (st.ok()) st = AddLocked(pem->cert_chain, pem->private_key);
    if (!st.ok()) {
      log::Warning("tls.reload_refused",
                   {{"listener", options_.key_name}, {"message", std::string(st.message())}});
      return;
    }
    log::Info("tls.reloaded", {{"listener", options_.key_name}});
  }

  absl::Status AddLocked(const std::string& cert_pem, const std::string& key_pem)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    auto pair = std::make_unique<Pair>();
    pair->certs.resize(16);
    unsigned int n = static_cast<unsigned int>(pair->certs.size());
    gnutls_datum_t cert{reinterpret_cast<unsigned char*>(const_cast<char*>(cert_pem.data())),
                        static_cast<unsigned int>(cert_pem.size())};
    if (gnutls_pcert_list_import_x509_raw(pair->certs.data(), &n, &cert, GNUTLS_X509_FMT_PEM, 0) <
        0) {
      return errors::InvalidArgument("the certificate chain does not load into GnuTLS");
    }
    pair->certs.resize(n);
    gnutls_datum_t key{reinterpret_cast<unsigned char*>(const_cast<char*>(key_pem.data())),
                       static_cast<unsigned int>(key_pem.size())};
    if (gnutls_privkey_init(&pair->key) < 0 ||
        gnutls_privkey_import_x509_raw(pair->key, &key, GNUTLS_X509_FMT_PEM, nullptr, 0) < 0) {
      for (auto& c : pair->certs) gnutls_pcert_deinit(&c);
      if (pair->key != nullptr) gnutls_privkey_deinit(pair->key);
      return errors::InvalidArgument("the private key does not load into GnuTLS");
    }
    pairs_.push_back(std::move(pair));
    cert_pem_ = cert_pem;
    key_pem_ = key_pem;
    return absl::OkStatus();
  }

  const HttpServerOptions options_;
  static std::atomic<TlsIdentity*> current_;
  absl::Mutex mu_;
  absl::Time next_check_ ABSL_GUARDED_BY(mu_);
  std::vector<std::unique_ptr<Pair>> pairs_ ABSL_GUARDED_BY(mu_);
  std::string cert_pem_ ABSL_GUARDED_BY(mu_), key_pem_ ABSL_GUARDED_BY(mu_);
};

std::atomic<TlsIdentity*> TlsIdentity::current_{nullptr};

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
    bool counted;
    {
      absl::MutexLock lock(&mu_);
      counted = CountAnsweredLocked();
      // Once closed (the client hung up) the connection may be gone: nothing is queued.
      if (!answered_ && !closed_) {
        answered_ = true;
        MHD_queue_response(connection_, response.status, r);
        ResumeLocked();
      }
    }
    MHD_destroy_response(r);
    if (counted) server_->Answered();
  }

  void Stream(unsigned int status, HttpHeaders headers, Pull pull, std::function<void()> on_close,
              uint64_t content_length) override {
    MHD_Response* r = MHD_create_response_from_callback(
        content_length == kUnknownLength ? MHD_SIZE_UNKNOWN : content_length, 16 << 10,
        &Exchange::Read, new std::shared_ptr<Exchange>(shared_from_this()), &Exchange::Free);
    MHD_add_response_header(r, "X-Content-Type-Options", "nosniff");
    for (const auto& [name, value] : headers) {
      MHD_add_response_header(r, name.c_str(), value.c_str());
    }
    std::function<void()> gone;  // the client left before the stream began
    bool counted;
    {
      absl::MutexLock lock(&mu_);
      counted = CountAnsweredLocked();
      pull_ = std::move(pull);
      if (on_close) on_close_ = std::move(on_close);
      if (closed_) {
        gone = std::move(on_close_);
      } else if (!answered_) {
        answered_ = true;
        streaming_ = true;
        MHD_queue_response(connection_, status, r);
        ResumeLocked();
      }
    }
    MHD_destroy_response(r);
    if (counted) server_->Answered();
    if (gone) gone();
  }

  void Upgrade(HttpResponse response, std::function<void(Upgraded)> on_upgraded,
               std::function<void()> on_close) override {
    MHD_Response* r = MHD_create_response_for_upgrade(
        &Exchange::OnUpgrade, new std::shared_ptr<Exchange>(shared_from_this()));
    MHD_add_response_header(r, "X-Content-Type-Options", "nosniff");
    for (const auto& [name, value] : response.headers) {
      // MHD says "Connection: Upgrade" itself; a second would make it "Upgrade, Upgrade",
      // which strict clients (Codex's tungstenite) refuse.
      if (absl::EqualsIgnoreCase(name, "connection")) continue;
      MHD_add_response_header(r, name.c_str(), value.c_str());
    }
    std::function<void()> gone;
    bool counted;
    {
      absl::MutexLock lock(&mu_);
      counted = CountAnsweredLocked();
      on_upgraded_ = std::move(on_upgraded);
      on_close_ = std::move(on_close);
      if (closed_) {
        gone = std::move(on_close_);
      } else if (!answered_) {
        answered_ = true;
        upgrading_ = true;
        MHD_queue_response(connection_, MHD_HTTP_SWITCHING_PROTOCOLS, r);
        ResumeLocked();
      }
    }
    MHD_destroy_response(r);
    if (counted) server_->Answered();
    if (gone) gone();
  }

  // The 101 went out but the connection ended before the upgrade: its taker is told.
  bool upgrading() {
    absl::MutexLock lock(&mu_);
    return upgrading_;
  }

  void OnClose(std::function<void()> on_close) override {
    {
      absl::MutexLock lock(&mu_);
      if (!closed_) {
        on_close_ = std::move(on_close);
        return;
      }
    }
    if (on_close) on_close();
  }

  bool closed() {
    absl::MutexLock lock(&mu_);
    return closed_;
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
    // Before Stream the connection waits for its answer, not for data: what is written
    // then is sent first.
    if (streaming_) ResumeLocked();
    return true;
  }

  void End(bool failed) override {
    absl::MutexLock lock(&mu_);
    ended_ = true;
    failed_ = failed;
    if (streaming_) ResumeLocked();
  }

  // The client is gone or the server stops: the stream ends now (its producer is told), and
  // a suspended connection is resumed so that MHD can close it. An answer not begun is no
  // longer awaited (Stop waits for none): nothing would be sent, and its handler, told, may
  // stop without answering (a command whose output was stopped never ends its answer).
  void Close() {
    std::function<void()> on_close;
    bool counted;
    {
      absl::MutexLock lock(&mu_);
      if (closed_) return;
      closed_ = true;
      counted = CountAnsweredLocked();
      on_close = std::move(on_close_);
      ResumeLocked();
    }
    if (counted) server_->Answered();
    if (on_close) on_close();
  }

  MHD_Connection* connection() const { return connection_; }

  // The polling thread's, before the handler runs.
  HttpRequest request;
  const HttpRoute* route = nullptr;
  std::optional<HttpBodySink> sink;     // the route's, when it takes the body as it arrives
  std::optional<HttpResponse> refused;  // the answer instead of the handler's
  bool dispatched = false;
  uint64_t watch_id = 0;  // its entry in the server's hang-up watcher, and the socket
  int watch_fd = -1;

 private:
  // True the first time: the exchange leaves the server's count of unanswered ones
  // (Dispatch counted it), when answered or closed, whichever comes first.
  bool CountAnsweredLocked() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    if (counted_) return false;
    counted_ = true;
    return true;
  }
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

  // MHD's upgrade handler, on the polling thread: the connection is the taker's now. The
  // server's Stop reaches it through the exchange's on_close, moved to the server.
  static void OnUpgrade(void* cls, MHD_Connection*, void*, const char* extra_in,
                        size_t extra_in_size, MHD_socket sock, MHD_UpgradeResponseHandle* urh) {
    std::unique_ptr<std::shared_ptr<Exchange>> holder(static_cast<std::shared_ptr<Exchange>*>(cls));
    Exchange* self = holder->get();
    std::function<void(Upgraded)> on_upgraded;
    std::function<void()> stop;
    {
      absl::MutexLock lock(&self->mu_);
      self->upgrading_ = false;
      // Closed before (the client left, the server stops): its taker was told and waits no
      // more, so the connection is closed here.
      if (!self->closed_) {
        on_upgraded = std::move(self->on_upgraded_);
        stop = std::move(self->on_close_);
      }
      self->closed_ = true;  // as HTTP, it is over; Close does nothing more
    }
    HttpServer* server = self->server_;
    const uint64_t id = server->AddUpgraded(std::move(stop));
    Upgraded u;
    u.fd = sock;
    if (extra_in_size > 0) u.early.assign(extra_in, extra_in_size);
    u.close = [server, urh, id] {
      MHD_upgrade_action(urh, MHD_UPGRADE_ACTION_CLOSE);
      server->RemoveUpgraded(id);
    };
    if (on_upgraded) {
      on_upgraded(std::move(u));
    } else {
      u.close();
    }
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
  bool counted_ ABSL_GUARDED_BY(mu_) = false;  // out of the server's unanswered_
  bool streaming_ ABSL_GUARDED_BY(mu_) = false;
  bool closed_ ABSL_GUARDED_BY(mu_) = false;
  bool ended_ ABSL_GUARDED_BY(mu_) = false;
  bool failed_ ABSL_GUARDED_BY(mu_) = false;
  bool pulling_ ABSL_GUARDED_BY(mu_) = false;
  std::string buffer_ ABSL_GUARDED_BY(mu_);
  size_t offset_ ABSL_GUARDED_BY(mu_) = 0;  // buffer_ sent up to here
  Pull pull_ ABSL_GUARDED_BY(mu_);
  std::function<void()> on_close_ ABSL_GUARDED_BY(mu_);
  bool upgrading_ ABSL_GUARDED_BY(mu_) = false;  // the 101 queued, the handler not yet called
  std::function<void(Upgraded)> on_upgraded_ ABSL_GUARDED_BY(mu_);
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
    server->tls_identity_ = TlsIdentity::Install(o);
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
      tls ? MHD_OPTION_HTTPS_CERT_CALLBACK : MHD_OPTION_END, &TlsIdentity::Retrieve,
      MHD_OPTION_END);
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
  if (tls_identity_ != nullptr) TlsIdentity::Uninstall(static_cast<TlsIdentity*>(tls_identity_));
}

}  // namespace sandgate::server
