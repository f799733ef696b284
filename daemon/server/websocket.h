// WebSocket (RFC 6455) connections on the HTTP port: the handshake of an upgrade request and
// the messages of a connection the HttpServer upgraded (HttpExchange::Upgrade), for a route
// that speaks a protocol over a WebSocket (Codex's exec-server, server/codex_exec_route.h).
//
// The framing is websocketpp's (Debian libwebsocketpp-dev, header-only), its transport-free
// hybi13 processor: it parses frames (masking, fragments, control frames, the UTF-8 of text
// messages, a cap on a message's size) and makes them; this file only moves bytes between it
// and the socket. Why not libwebsockets or Boost.Beast: libwebsockets brings its own event
// loop and listener (the port is libmicrohttpd's), and Beast wants Asio streams; the processor
// needs neither, and the connection's reader is a plain thread on a blocking socket.
//
//   absl::StatusOr<HttpHeaders> accept = WebSocketHandshake(request);   // 101's headers
//   x->Upgrade(HttpResponse{101, *accept, ""}, [](HttpExchange::Upgraded c) {
//     auto ws = WebSocket::Create(std::move(c), {});
//     ws->Run(on_message, on_end);         // the reader starts
//   });
//   ws->Send(R"({"jsonrpc":"2.0"})");     // a text message, from any thread
//
// Each connection has one reader thread: it answers pings, hands each whole text message to
// `on_message` in order (on that thread: a slow handler holds back the next message, not the
// server), and ends on a close frame, a framing error (closing with the RFC's code: 1002
// protocol, 1003 a binary message, 1007 invalid UTF-8, 1009 too big), the socket's end, Close,
// or `stop_fd` becoming readable; then `on_end` runs once, on that thread, and the socket goes
// back to the HttpServer. Thread safe.
#ifndef SANDGATE_SERVER_WEBSOCKET_H_
#define SANDGATE_SERVER_WEBSOCKET_H_

#include <cstdint>
#include <functional>
#include <memory>
#include <string>

#include "absl/base/thread_annotations.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/synchronization/mutex.h"
#include "server/http_server.h"

namespace sandgate::server {

// The 101 answer's headers (Upgrade, Connection, Sec-WebSocket-Accept) for a WebSocket
// upgrade request; INVALID_ARGUMENT naming what is wrong with it otherwise (not a GET, no
// Upgrade: websocket, a version other than 13, a bad Sec-WebSocket-Key).
absl::StatusOr<HttpHeaders> WebSocketHandshake(const HttpRequest& request);

struct WebSocketOptions {
  uint64_t max_message_bytes = 16 << 20;  // a bigger message closes the connection (1009)
  int stop_fd = -1;  // when readable, the connection is closed (1001, `stop_reason`)
  std::string stop_reason = "going away";
};

class WebSocket : public std::enable_shared_from_this<WebSocket> {
 public:
  // A whole text message (valid UTF-8).
  using OnMessage = std::function<void(std::string message)>;
  // Why the connection ended: OK for a close by either side, else the error.
  using OnEnd = std::function<void(const absl::Status& why)>;

  static std::shared_ptr<WebSocket> Create(HttpExchange::Upgraded connection,
                                           WebSocketOptions options);
  ~WebSocket();
  // Starts the reader (once): it holds the connection until its end, then gives the socket
  // back to the server.
  void Run(OnMessage on_message, OnEnd on_end);

  // Sends a text message; false once the connection is closing or gone.
  bool Send(absl::string_view text);
  // Closes the connection (a close frame with `code` and `reason`, then the socket); the
  // reader ends and runs on_end. Any thread, any number of times.
  void Close(uint16_t code = 1000, absl::string_view reason = "");

 private:
  struct Codec;  // websocketpp's processor (websocket.cc)
  WebSocket(HttpExchange::Upgraded connection, WebSocketOptions options);
  void ReadLoop(OnMessage on_message, OnEnd on_end);
  // Decodes what arrived; OK to read on, else why the connection ends (closed: OK).
  absl::Status Consume(const char* data, size_t size, const OnMessage& on_message, bool* closed);
  bool WriteLocked(const std::string& bytes) ABSL_EXCLUSIVE_LOCKS_REQUIRED(write_mu_);
  void SendClose(uint16_t code, absl::string_view reason);

  HttpExchange::Upgraded connection_;
  const WebSocketOptions options_;
  std::unique_ptr<Codec> codec_;  // its reader side: the reader thread's only
  absl::Mutex write_mu_;          // one frame at a time on the socket
  bool closing_ ABSL_GUARDED_BY(write_mu_) = false;
};

}  // namespace sandgate::server

#endif  // SANDGATE_SERVER_WEBSOCKET_H_
