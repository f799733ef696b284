// WebSocket connections (server/websocket.h) upgraded by a real HttpServer on loopback: the
// handshake, messages both ways, pings, and the hostile frames a client may send (invalid
// UTF-8, a binary message, a message over the cap, a broken frame). The test's client makes
// good frames with websocketpp's client-side processor and writes the bad ones by hand.
#include "server/websocket.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <memory>
#include <string>
#include <websocketpp/config/core.hpp>
#include <websocketpp/processors/hybi13.hpp>

#include "absl/strings/str_cat.h"
#include "absl/synchronization/mutex.h"
#include "gtest/gtest.h"

namespace sandgate::server {
namespace {

using Config = websocketpp::config::core;
using ClientProcessor = websocketpp::processor::hybi13<Config>;

// A server with one route, GET /echo, that answers each text message with "echo: " + it.
class WebSocketTest : public ::testing::Test {
 protected:
  void SetUp() override {
    HttpServer::Routes routes;
    routes.push_back(
        {"GET", "/echo", [this](const HttpRequest& r, std::shared_ptr<HttpExchange> x) {
           absl::StatusOr<HttpHeaders> accept = WebSocketHandshake(r);
           if (!accept.ok()) return x->Reply({400, {}, std::string(accept.status().message())});
           auto holder = std::make_shared<std::shared_ptr<WebSocket>>();
           x->Upgrade(
               HttpResponse{101, *accept, ""},
               [this, holder](HttpExchange::Upgraded c) {
                 WebSocketOptions options;
                 options.max_message_bytes = 1024;
                 auto ws = WebSocket::Create(std::move(c), options);
                 *holder = ws;
                 std::weak_ptr<WebSocket> weak = ws;
                 ws->Run(
                     [weak](std::string m) {
                       if (auto w = weak.lock()) w->Send("echo: " + m);
                     },
                     [this](const absl::Status& why) {
                       absl::MutexLock lock(&mu_);
                       ended_ = why;
                       has_ended_ = true;
                     });
               },
               [holder] {
                 if (*holder) (*holder)->Close(1001, "stopping");
               });
         }});
    HttpServerOptions options;
    options.address = "127.0.0.1:0";
    server_ = *HttpServer::Start(options, std::move(routes));
  }
  void TearDown() override {
    if (fd_ >= 0) close(fd_);
    server_->Stop();
  }

  // Connects and sends `request`; the answer's head.
  std::string Open(const std::string& request) {
    fd_ = socket(AF_INET, SOCK_STREAM, 0);
    sockaddr_in addr = {};
    addr.sin_family = AF_INET;
    addr.sin_port = htons(static_cast<uint16_t>(server_->port()));
    inet_pton(AF_INET, "127.0.0.1", &addr.sin_addr);
    EXPECT_EQ(connect(fd_, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)), 0);
    Write(request);
    std::string head;
    char c;
    while (head.find("\r\n\r\n") == std::string::npos && read(fd_, &c, 1) == 1) head += c;
    return head;
  }
  std::string Handshake() {
    return Open(
        "GET /echo HTTP/1.1\r\nHost: x\r\nConnection: Upgrade\r\nUpgrade: websocket\r\n"
        "Sec-WebSocket-Version: 13\r\nSec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\n\r\n");
  }
  void Write(const std::string& bytes) {
    ASSERT_EQ(write(fd_, bytes.data(), bytes.size()), static_cast<ssize_t>(bytes.size()));
  }
  // A masked frame as a client sends it, made by the library.
  std::string Frame(websocketpp::frame::opcode::value op, const std::string& payload) {
    auto in = messages_->get_message(op, payload.size());
    in->set_payload(payload);
    auto out = messages_->get_message();
    EXPECT_FALSE(client_.prepare_data_frame(in, out));
    return out->get_header() + out->get_payload();
  }
  // A frame by hand (FIN set, masked with a zero key): what the library would refuse to make.
  static std::string RawFrame(uint8_t op, const std::string& payload) {
    std::string f;
    f += static_cast<char>(0x80 | op);
    f += static_cast<char>(0x80 | payload.size());  // payloads under 126 bytes
    f += std::string(4, '\0');
    return f + payload;
  }
  // The next message from the server (text, pong or close).
  Config::message_type::ptr Next() {
    char buf[4096];
    for (;;) {
      if (reader_.ready()) return reader_.get_message();
      ssize_t n = read(fd_, buf, sizeof(buf));
      if (n <= 0) return nullptr;
      size_t at = 0;
      while (at < static_cast<size_t>(n)) {
        websocketpp::lib::error_code ec;
        at += reader_.consume(reinterpret_cast<uint8_t*>(buf) + at, n - at, ec);
        EXPECT_FALSE(ec) << ec.message();
        if (ec) return nullptr;
        if (reader_.ready()) {
          pending_.assign(buf + at, n - at);
          break;
        }
      }
      if (reader_.ready()) {
        auto m = reader_.get_message();
        // What came after the message is consumed on the next call.
        std::string rest = std::move(pending_);
        size_t p = 0;
        while (p < rest.size()) {
          websocketpp::lib::error_code ec;
          p += reader_.consume(reinterpret_cast<uint8_t*>(rest.data()) + p, rest.size() - p, ec);
          if (ec || reader_.ready()) break;
        }
        return m;
      }
    }
  }
  static uint16_t CloseCode(const Config::message_type::ptr& m) {
    EXPECT_NE(m, nullptr);
    if (m == nullptr || m->get_opcode() != websocketpp::frame::opcode::close) return 0;
    const std::string& p = m->get_payload();
    return static_cast<uint16_t>((static_cast<uint8_t>(p[0]) << 8) | static_cast<uint8_t>(p[1]));
  }
  absl::Status WaitEnded() {
    absl::MutexLock lock(&mu_);
    mu_.AwaitWithTimeout(absl::Condition(&has_ended_), absl::Seconds(10));
    EXPECT_TRUE(has_ended_);
    return ended_;
  }

  std::unique_ptr<HttpServer> server_;
  int fd_ = -1;
  Config::con_msg_manager_type::ptr messages_ =
      websocketpp::lib::make_shared<Config::con_msg_manager_type>();
  Config::rng_type rng_;
  ClientProcessor client_{false, false, messages_, rng_};
  ClientProcessor reader_{false, false, messages_, rng_};
  std::string pending_;
  absl::Mutex mu_;
  absl::Status ended_ ABSL_GUARDED_BY(mu_);
  bool has_ended_ ABSL_GUARDED_BY(mu_) = false;
};

TEST_F(WebSocketTest, HandshakeMessagesPingAndClose) {
  const std::string head = Handshake();
  EXPECT_EQ(head.rfind("HTTP/1.1 101", 0), 0u) << head;
  EXPECT_NE(head.find("Sec-WebSocket-Accept: s3pPLMBiTxaQ9kYGzzhZRbK+xOo="), std::string::npos);
  // One Connection: Upgrade (MHD's), not two.
  EXPECT_NE(head.find("Connection: Upgrade\r\n"), std::string::npos) << head;
  // Two messages in one write.
  Write(Frame(websocketpp::frame::opcode::text, "h\xc3\xa9llo") +
        Frame(websocketpp::frame::opcode::text, "second"));
  auto m = Next();
  ASSERT_NE(m, nullptr);
  EXPECT_EQ(m->get_payload(), "echo: h\xc3\xa9llo");
  m = Next();
  ASSERT_NE(m, nullptr);
  EXPECT_EQ(m->get_payload(), "echo: second");
  auto ping = messages_->get_message();
  ASSERT_FALSE(client_.prepare_ping("are you there", ping));
  Write(ping->get_header() + ping->get_payload());
  m = Next();
  ASSERT_NE(m, nullptr);
  EXPECT_EQ(m->get_opcode(), websocketpp::frame::opcode::pong);
  EXPECT_EQ(m->get_payload(), "are you there");
  auto close = messages_->get_message();
  ASSERT_FALSE(client_.prepare_close(1000, "bye", close));
  Write(close->get_header() + close->get_payload());
  EXPECT_EQ(CloseCode(Next()), 1000);
  EXPECT_TRUE(WaitEnded().ok());
}

TEST_F(WebSocketTest, InvalidUtf8ClosesWith1007) {
  Handshake();
  Write(RawFrame(0x1, "ok \xff\xfe"));
  EXPECT_EQ(CloseCode(Next()), 1007);
  EXPECT_FALSE(WaitEnded().ok());
}

TEST_F(WebSocketTest, ABinaryMessageClosesWith1003) {
  Handshake();
  Write(RawFrame(0x2, "\x01\x02"));
  EXPECT_EQ(CloseCode(Next()), 1003);
  EXPECT_FALSE(WaitEnded().ok());
}

TEST_F(WebSocketTest, AMessageOverTheCapClosesWith1009BeforeItArrives) {
  Handshake();
  // A header announcing 2^40 bytes: refused on the header, nothing more is read.
  std::string f = "\x81\xff";
  for (int shift = 56; shift >= 0; shift -= 8) f += static_cast<char>((uint64_t{1} << 40) >> shift);
  f += std::string(4, '\0');
  Write(f);
  EXPECT_EQ(CloseCode(Next()), 1009);
  absl::Status why = WaitEnded();
  EXPECT_NE(std::string(why.message()).find("1024 bytes"), std::string::npos) << why;
}

TEST_F(WebSocketTest, AnUnmaskedClientFrameIsAProtocolError) {
  Handshake();
  Write(std::string("\x81\x02hi", 4));
  EXPECT_EQ(CloseCode(Next()), 1002);
  EXPECT_FALSE(WaitEnded().ok());
}

TEST_F(WebSocketTest, ABadHandshakeIsAnHttpError) {
  const std::string head = Open(
      "GET /echo HTTP/1.1\r\nHost: x\r\nConnection: Upgrade\r\nUpgrade: websocket\r\n"
      "Sec-WebSocket-Version: 13\r\nSec-WebSocket-Key: short\r\n\r\n");
  EXPECT_EQ(head.rfind("HTTP/1.1 400", 0), 0u) << head;
}

TEST_F(WebSocketTest, StopClosesOpenConnectionsAndWaitsForThem) {
  Handshake();
  Write(Frame(websocketpp::frame::opcode::text, "x"));
  ASSERT_NE(Next(), nullptr);
  server_->Stop();
  EXPECT_EQ(CloseCode(Next()), 1001);
  {
    absl::MutexLock lock(&mu_);
    EXPECT_TRUE(has_ended_);  // before Stop returned
  }
}

}  // namespace
}  // namespace sandgate::server
