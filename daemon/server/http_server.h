// HttpServer: the daemon's HTTP port (REST/JSON API, server-sent events, /metrics), on GNU
// libmicrohttpd.
//
// Why libmicrohttpd and not cpp-httplib: it runs every connection on one internal polling
// thread (epoll) and lets a connection be suspended while its answer is produced elsewhere,
// so a request that blocks (the store, a sandbox) runs on the daemon's I/O executor and
// hundreds of SSE followers cost no thread each; cpp-httplib holds a thread per connection.
// It also brings connection limits, timeouts and TLS (GnuTLS), and is in Debian.
//
// A route's handler runs on the polling thread and must not block: it answers through its
// HttpExchange, now or later from any thread (Reply), or streams (Stream), pulling more body
// when the client has taken what was written. Every connection is suspended while its
// handler works, so a slow answer holds no thread.
//
//   HttpServer::Routes routes;
//   routes.push_back({"GET", "/v1/runs/{id}", [](const HttpRequest& r,
//                                                std::shared_ptr<HttpExchange> x) {
//     x->Reply({200, {{"Content-Type", "text/plain"}}, r.params.at("id")});
//   }});
//   auto server = HttpServer::Start({"127.0.0.1:0"}, std::move(routes));
//
// Every answer carries X-Content-Type-Options: nosniff, plus the route's own headers (the
// seam for a dashboard's pages: a route for "/" and "/ui/..." with a strict
// Content-Security-Policy). Thread safe. Stop() ends every stream and waits for answers in
// flight; it must run before the executors the handlers use are shut down.
#ifndef SANDGATE_SERVER_HTTP_SERVER_H_
#define SANDGATE_SERVER_HTTP_SERVER_H_

#include <sys/types.h>

#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "common/clock.h"

struct MHD_Daemon;
struct MHD_Connection;

namespace sandgate::server {

using HttpHeaders = std::vector<std::pair<std::string, std::string>>;

struct HttpRequest {
  std::string method;
  std::string path;                           // decoded, without the query
  std::map<std::string, std::string> params;  // the route's {name} and {name*} segments
  std::map<std::string, std::string> query;
  // The query as it arrived (still percent-encoded, in order, spaces as %20), for a route
  // that passes it on (the port proxy); "" when none.
  std::string raw_query;
  std::map<std::string, std::string> headers;  // names lower-cased
  std::string body;  // empty for a route that takes its body as it arrives (HttpBodySink)
  // The header's value, or "" when absent.
  std::string Header(const std::string& lower_name) const;
};

struct HttpResponse {
  unsigned int status = 200;
  HttpHeaders headers;
  std::string body;
};

// One request's answer. Exactly one of Reply or Stream, once, from any thread.
class HttpExchange {
 public:
  // Pulls a streamed body: called (on an executor or the polling thread, never under the
  // exchange's lock) whenever everything written so far has been sent; it answers later by
  // Write or End. Never called again before one of them.
  using Pull = std::function<void()>;

  virtual ~HttpExchange() = default;
  virtual void Reply(HttpResponse response) = 0;
  // Starts a streamed (chunked) answer; `pull` asks for more, `on_close` is called once when
  // the client is gone or the server stops (the producer should stop then).
  // `content_length`: sent as Content-Length when known (and then the stream must write
  // exactly that many bytes); kUnknownLength: chunked.
  static constexpr uint64_t kUnknownLength = ~uint64_t{0};
  virtual void Stream(unsigned int status, HttpHeaders headers, Pull pull,
                      std::function<void()> on_close, uint64_t content_length = kUnknownLength) = 0;
  // `on_close` is called once when the client is gone (it hung up) or the server stops,
  // also before any answer began: a handler whose work outlives the client (a command) stops
  // it then. Called at once when that has already happened. Stream's on_close replaces it.
  virtual void OnClose(std::function<void()> on_close) = 0;
  // A connection taken over after a 101 answer (a WebSocket): `fd` to read and write (never to
  // close), the bytes the client sent after its request that the server already read
  // (`early`, to be treated as read from `fd`), and `close`, to call exactly once when done:
  // it closes `fd` (MHD_upgrade_action).
  struct Upgraded {
    int fd = -1;
    std::string early;
    std::function<void()> close;
  };
  // Instead of Reply or Stream: answers 101 Switching Protocols with `response.headers`
  // (which must hold Upgrade; the server adds Connection) and then hands the connection to
  // `on_upgraded`, on the polling thread (it must not block). `on_close` is called once when
  // the client left before that, or when the server stops while the connection is taken
  // (its taker must then end and call `close`).
  virtual void Upgrade(HttpResponse response, std::function<void(Upgraded)> on_upgraded,
                       std::function<void()> on_close) = 0;
  // Appends to a stream (before Stream: kept, and sent first); false once it is closed (the
  // data is dropped).
  virtual bool Write(std::string data) = 0;
  // Ends a stream: normally, or (failed) cutting it short so the client sees an error.
  virtual void End(bool failed = false) = 0;
};

// The close rule of an HttpExchange, for its implementations (the server's, http_exchange.h,
// and the REST fuzz target's): whether the exchange closed, and the one `on_close` to tell,
// exactly once, at the close, or at once when it is set after the close. Each method returns
// the callback to run, which the owner runs after releasing its lock.
//
// Not thread safe: its owner guards it with the exchange's own mutex.
class ExchangeClose {
 public:
  // Replaces the callback to run at the close; after the close it is returned, to run now.
  std::function<void()> Set(std::function<void()> on_close) {
    if (closed_) return on_close;
    on_close_ = std::move(on_close);
    return nullptr;
  }
  // Closes: the callback set, to run now; empty when there is none or already closed.
  std::function<void()> Close() {
    closed_ = true;
    return std::exchange(on_close_, nullptr);
  }
  bool closed() const { return closed_; }

 private:
  bool closed_ = false;
  std::function<void()> on_close_;
};

// A request body taken as it arrives, for a route that must not hold it whole (an upload):
// the server hands each piece to `append` and, once all arrived, the exchange to `done`.
struct HttpBodySink {
  // Set: the request is answered with this at once and its body is not read.
  std::optional<HttpResponse> refused;
  // Each piece in order, on the polling thread (must not block). An answer refuses the
  // request: the rest of the body is read and dropped, then that answer is sent.
  std::function<std::optional<HttpResponse>(const char* data, size_t size)> append;
  // The whole body arrived and was taken: answer through the exchange (as a handler does).
  std::function<void(std::shared_ptr<HttpExchange>)> done;
};

struct HttpRoute {
  std::string method;  // "GET", "POST"
  // "/v1/runs/{id}", "/v1/runs/{id}:cancel"; segments are literal or {name}; a last segment
  // {name*} takes the rest of the path (one or more segments, slashes included), {name**}
  // the rest as it is, none or ending in '/' too.
  std::string pattern;
  std::function<void(const HttpRequest&, std::shared_ptr<HttpExchange>)> handler;
  // Set: the route takes its body as it arrives instead of `handler` getting it whole. Called
  // on the polling thread once the headers are in (must not block).
  std::function<HttpBodySink(const HttpRequest&)> open_body = nullptr;
};

struct HttpServerOptions {
  std::string address;                   // "host:port", IPv4; port 0 = any free port
  std::string key_name = "http_listen";  // names the config key in errors
  // TLS: the key and certificate chain, PEM; both empty = plain HTTP.
  std::string tls_key_pem, tls_cert_pem;
  // Where they came from: re-read (ReadTlsFiles) every tls_reload_interval_seconds of
  // `clock`, at the first handshake after it, as the gRPC listener re-reads its files, so a
  // renewed certificate is served to new connections without a restart; a bad replacement
  // is logged (tls.reload_refused) and the last good pair stays. 0 or no files: never.
  std::string tls_key_file, tls_cert_file;
  int tls_reload_interval_seconds = 0;
  Clock* clock = Clock::Real();
  uint64_t max_body_bytes = 96ull << 20;  // bigger requests are refused (413)
  unsigned int max_connections = 1024;
  unsigned int idle_timeout_seconds = 60;  // an idle (not suspended) connection is closed
};

class HttpServer {
 public:
  using Routes = std::vector<HttpRoute>;
  static absl::StatusOr<std::unique_ptr<HttpServer>> Start(HttpServerOptions options,
                                                           Routes routes);
  ~HttpServer();
  int port() const { return port_; }
  bool tls() const { return tls_; }
  void Stop();

  class Exchange;  // http_server.cc

 private:
  HttpServer(HttpServerOptions options, Routes routes);
  static int AccessHandler(void* cls, MHD_Connection* connection, const char* url,
                           const char* method, const char* version, const char* upload_data,
                           size_t* upload_data_size, void** con_cls);
  static void Completed(void* cls, MHD_Connection* connection, void** con_cls, int toe);
  void Dispatch(const std::shared_ptr<Exchange>& exchange);
  void Answered();  // a handler's Reply or Stream has run
  // Upgraded connections (HttpExchange::Upgrade): Stop tells each to end (`stop`) and waits
  // until each called its close, before MHD stops.
  uint64_t AddUpgraded(std::function<void()> stop);
  void RemoveUpgraded(uint64_t id);
  // Hang-ups: a suspended connection is not watched by MHD, so a client that goes away while
  // its answer is being made (a command with no output yet, a quiet stream) would go unseen
  // until something is written. The watcher thread polls each dispatched connection's socket
  // for EPOLLRDHUP and closes its exchange, whose on_close stops the producer.
  void Watch(const std::shared_ptr<Exchange>& exchange);
  void Unwatch(Exchange* exchange);
  void WatchLoop();

  const HttpServerOptions options_;
  const Routes routes_;
  MHD_Daemon* daemon_ = nullptr;
  int port_ = 0;
  bool tls_ = false;
  void* tls_identity_ = nullptr;  // http_server.cc's TlsIdentity, with TLS
  int epoll_fd_ = -1;             // the watcher's; wake_fd_ (an eventfd) in it ends the loop
  int wake_fd_ = -1;
  std::thread watcher_;

  absl::Mutex mu_;
  // Exchanges answered or streaming whose connection MHD has not finished; Stop closes them.
  std::map<Exchange*, std::weak_ptr<Exchange>> live_ ABSL_GUARDED_BY(mu_);
  // The watched sockets' exchanges, by the id in their epoll entry.
  std::map<uint64_t, std::weak_ptr<Exchange>> watched_ ABSL_GUARDED_BY(mu_);
  uint64_t next_watch_id_ ABSL_GUARDED_BY(mu_) = 1;
  int unanswered_ ABSL_GUARDED_BY(mu_) = 0;  // handlers that have not replied yet
  std::map<uint64_t, std::function<void()>> upgraded_ ABSL_GUARDED_BY(mu_);
  uint64_t next_upgraded_id_ ABSL_GUARDED_BY(mu_) = 1;
  bool stopping_ ABSL_GUARDED_BY(mu_) = false;
};

// The path of an address "host:port" without its port, for logs ("127.0.0.1").
std::string HttpHost(const std::string& address);

}  // namespace sandgate::server

#endif  // SANDGATE_SERVER_HTTP_SERVER_H_
