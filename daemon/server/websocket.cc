#include "server/websocket.h"

#include <fcntl.h>
#include <poll.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <thread>
#include <utility>
#include <websocketpp/close.hpp>
#include <websocketpp/config/core.hpp>
#include <websocketpp/processors/hybi13.hpp>

#include "absl/strings/ascii.h"
#include "absl/strings/escaping.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "common/errors.h"

namespace sandgate::server {
namespace {

using Config = websocketpp::config::core;
using Processor = websocketpp::processor::hybi13<Config>;
namespace close_status = websocketpp::close::status;
namespace wserror = websocketpp::processor::error;

// A peer that takes nothing for this long is gone: a Send blocked on it gives up.
constexpr int kSendTimeoutSeconds = 30;

bool HeaderHasToken(const std::string& value, absl::string_view token) {
  for (absl::string_view part : absl::StrSplit(value, ',')) {
    if (absl::EqualsIgnoreCase(absl::StripAsciiWhitespace(part), token)) return true;
  }
  return false;
}

}  // namespace

struct WebSocket::Codec {
  Codec()
      : messages(websocketpp::lib::make_shared<Config::con_msg_manager_type>()),
        reader(/*secure=*/false, /*p_is_server=*/true, messages, rng),
        writer(/*secure=*/false, /*p_is_server=*/true, messages, rng) {}
  Config::con_msg_manager_type::ptr messages;
  Config::rng_type rng;
  Processor reader;  // the reader thread's
  Processor writer;  // under write_mu_
};

absl::StatusOr<HttpHeaders> WebSocketHandshake(const HttpRequest& request) {
  if (request.method != "GET") {
    return errors::InvalidArgument("a WebSocket upgrade is a GET request");
  }
  if (!absl::EqualsIgnoreCase(request.Header("upgrade"), "websocket") ||
      !HeaderHasToken(request.Header("connection"), "upgrade")) {
    return errors::InvalidArgument(
        "this route speaks WebSocket: the request needs Upgrade: websocket and Connection: "
        "Upgrade");
  }
  if (request.Header("sec-websocket-version") != "13") {
    return errors::InvalidArgument(absl::StrCat("Sec-WebSocket-Version must be 13, got '",
                                                request.Header("sec-websocket-version"), "'"));
  }
  std::string key_bytes;
  const std::string key = request.Header("sec-websocket-key");
  if (!absl::Base64Unescape(key, &key_bytes) || key_bytes.size() != 16) {
    return errors::InvalidArgument("Sec-WebSocket-Key must be 16 bytes in base64");
  }
  // websocketpp's HTTP parser throws on a header it cannot take (the only throw on this path;
  // the file is built with exceptions for it, server/CMakeLists.txt).
  Config::request_type req;
  try {
    req.set_method("GET");
    req.set_version("HTTP/1.1");
    req.set_uri(request.path);
    for (const char* name : {"Host", "Upgrade", "Connection", "Sec-WebSocket-Version"}) {
      req.replace_header(name, request.Header(absl::AsciiStrToLower(name)));
    }
    req.replace_header("Sec-WebSocket-Key", key);
  } catch (const std::exception& e) {
    return errors::InvalidArgument(absl::StrCat("a bad WebSocket handshake header: ", e.what()));
  }
  auto messages = websocketpp::lib::make_shared<Config::con_msg_manager_type>();
  Config::rng_type rng;
  Processor processor(/*secure=*/false, /*p_is_server=*/true, messages, rng);
  Config::response_type res;
  if (processor.validate_handshake(req) || processor.process_handshake(req, "", res)) {
    return errors::InvalidArgument("not a valid WebSocket handshake");
  }
  HttpHeaders headers;
  for (const auto& [name, value] : res.get_headers()) headers.emplace_back(name, value);
  return headers;
}

std::shared_ptr<WebSocket> WebSocket::Create(HttpExchange::Upgraded connection,
                                             WebSocketOptions options) {
  return std::shared_ptr<WebSocket>(new WebSocket(std::move(connection), std::move(options)));
}

void WebSocket::Run(OnMessage on_message, OnEnd on_end) {
  // Detached, so that the last reference may drop on it; the server's Stop waits for the
  // release at its end.
  std::thread([self = shared_from_this(), on_message = std::move(on_message),
               on_end = std::move(on_end)] {
    self->ReadLoop(on_message, on_end);
  }).detach();
}

WebSocket::WebSocket(HttpExchange::Upgraded connection, WebSocketOptions options)
    : connection_(std::move(connection)), options_(std::move(options)), codec_(new Codec) {
  codec_->reader.set_max_message_size(options_.max_message_bytes);
  // MHD hands the socket over non-blocking; the reader and writers block on it instead.
  const int flags = fcntl(connection_.fd, F_GETFL);
  if (flags >= 0) fcntl(connection_.fd, F_SETFL, flags & ~O_NONBLOCK);
  struct timeval timeout = {kSendTimeoutSeconds, 0};
  setsockopt(connection_.fd, SOL_SOCKET, SO_SNDTIMEO, &timeout, sizeof(timeout));
}

WebSocket::~WebSocket() = default;

bool WebSocket::Send(absl::string_view text) {
  auto in = codec_->messages->get_message(websocketpp::frame::opcode::text, text.size());
  in->set_payload(text.data(), text.size());
  auto out = codec_->messages->get_message();
  absl::MutexLock lock(&write_mu_);
  if (closing_) return false;
  if (codec_->writer.prepare_data_frame(in, out)) return false;
  return WriteLocked(out->get_header() + out->get_payload());
}

bool WebSocket::WriteLocked(const std::string& bytes) {
  size_t sent = 0;
  while (sent < bytes.size()) {
    ssize_t n = send(connection_.fd, bytes.data() + sent, bytes.size() - sent, MSG_NOSIGNAL);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) {
      // Gone or not reading: the reader sees the socket end.
      closing_ = true;
      shutdown(connection_.fd, SHUT_RDWR);
      return false;
    }
    sent += static_cast<size_t>(n);
  }
  return true;
}

void WebSocket::SendClose(uint16_t code, absl::string_view reason) {
  absl::MutexLock lock(&write_mu_);
  if (closing_) return;
  closing_ = true;
  auto out = codec_->messages->get_message();
  // A close frame's reason is at most 123 bytes.
  std::string why(reason.substr(0, 123));
  if (!codec_->writer.prepare_close(code, why, out)) {
    WriteLocked(out->get_header() + out->get_payload());
  }
}

void WebSocket::Close(uint16_t code, absl::string_view reason) {
  SendClose(code, reason);
  // Wakes the reader; the socket itself is the server's to close.
  shutdown(connection_.fd, SHUT_RDWR);
}

absl::Status WebSocket::Consume(const char* data, size_t size, const OnMessage& on_message,
                                bool* closed) {
  Processor& processor = codec_->reader;
  size_t at = 0;
  while (at < size) {
    websocketpp::lib::error_code ec;
    at +=
        processor.consume(reinterpret_cast<uint8_t*>(const_cast<char*>(data)) + at, size - at, ec);
    if (ec) {
      uint16_t code = close_status::protocol_error;
      if (ec == wserror::make_error_code(wserror::message_too_big)) {
        code = close_status::message_too_big;
      } else if (ec == wserror::make_error_code(wserror::invalid_utf8)) {
        code = close_status::invalid_payload;
      }
      std::string why = ec.message();
      if (code == close_status::message_too_big) {
        why = absl::StrCat("a message is over ", options_.max_message_bytes, " bytes");
      }
      SendClose(code, why);
      return errors::InvalidArgument(absl::StrCat("WebSocket: ", why));
    }
    if (!processor.ready()) continue;
    auto message = processor.get_message();
    switch (message->get_opcode()) {
      case websocketpp::frame::opcode::text:
        on_message(message->get_payload());
        break;
      case websocketpp::frame::opcode::binary:
        SendClose(close_status::unsupported_data, "only text messages are taken");
        return errors::InvalidArgument("WebSocket: a binary message (only text is taken)");
      case websocketpp::frame::opcode::ping: {
        auto out = codec_->messages->get_message();
        absl::MutexLock lock(&write_mu_);
        if (!closing_ && !codec_->writer.prepare_pong(message->get_payload(), out)) {
          WriteLocked(out->get_header() + out->get_payload());
        }
        break;
      }
      case websocketpp::frame::opcode::close: {
        const std::string& payload = message->get_payload();
        uint16_t code = close_status::normal;
        if (payload.size() >= 2) {
          code = static_cast<uint16_t>((static_cast<uint8_t>(payload[0]) << 8) |
                                       static_cast<uint8_t>(payload[1]));
        }
        SendClose(close_status::invalid(code) ? close_status::normal : code, "");
        *closed = true;
        return absl::OkStatus();
      }
      default:  // pong: nothing to do
        break;
    }
  }
  return absl::OkStatus();
}

void WebSocket::ReadLoop(OnMessage on_message, OnEnd on_end) {
  absl::Status why;
  bool closed = false;
  if (!connection_.early.empty()) {
    why = Consume(connection_.early.data(), connection_.early.size(), on_message, &closed);
  }
  char buf[64 << 10];
  while (why.ok() && !closed) {
    struct pollfd fds[2] = {{connection_.fd, POLLIN, 0}, {options_.stop_fd, POLLIN, 0}};
    const nfds_t n = options_.stop_fd >= 0 ? 2 : 1;
    if (poll(fds, n, -1) < 0) {
      if (errno == EINTR) continue;
      why = errors::Internal(absl::StrCat("WebSocket: poll: ", std::strerror(errno)));
      break;
    }
    if (n == 2 && (fds[1].revents & POLLIN) != 0) {
      SendClose(close_status::going_away, options_.stop_reason);
      why = errors::Unavailable(absl::StrCat("WebSocket: ", options_.stop_reason));
      break;
    }
    ssize_t got = recv(connection_.fd, buf, sizeof(buf), 0);
    if (got < 0 && errno == EINTR) continue;
    if (got <= 0) {
      bool by_us;
      {
        absl::MutexLock lock(&write_mu_);
        by_us = closing_;
      }
      if (!by_us) why = errors::Unavailable("WebSocket: the client went away without a close");
      break;
    }
    why = Consume(buf, static_cast<size_t>(got), on_message, &closed);
  }
  {
    absl::MutexLock lock(&write_mu_);
    closing_ = true;
  }
  on_end(why);
  if (connection_.close) connection_.close();
}

}  // namespace sandgate::server
