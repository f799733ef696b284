// PortProxy on a real HttpServer, the host fake provider (a session's port is the host's
// loopback there) and a fake clock: what the sandbox's server gets and what the caller gets,
// the idle timeout at its exact instant on the clock, the bounds, and a WebSocket's bytes.
#include "server/port_proxy.h"

#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/synchronization/mutex.h"
#include "absl/synchronization/notification.h"
#include "gtest/gtest.h"
#include "store/sqlite_store.h"
#include "tests/common/eventually.h"
#include "tests/fakes/fake_clock.h"
#include "tests/fakes/host_sandbox.h"

namespace sandgate::server {
namespace {

using testing::Eventually;
using testing::FakeClock;
using testing::HostProvider;

// A server on the host's loopback that hands each connection to `serve` on a thread.
class Upstream {
 public:
  explicit Upstream(std::function<void(int fd)> serve) : serve_(std::move(serve)) {
    fd_ = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    sockaddr_in a{};
    a.sin_family = AF_INET;
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    bind(fd_, reinterpret_cast<sockaddr*>(&a), sizeof(a));
    listen(fd_, 8);
    socklen_t len = sizeof(a);
    getsockname(fd_, reinterpret_cast<sockaddr*>(&a), &len);
    port_ = ntohs(a.sin_port);
    thread_ = std::thread([this] {
      for (;;) {
        int c = accept4(fd_, nullptr, nullptr, SOCK_CLOEXEC);
        if (c < 0) return;
        absl::MutexLock lock(&mu_);
        connections_.push_back({c, std::thread([this, c] {
                                  serve_(c);
                                  shutdown(c, SHUT_RDWR);  // the peer sees the end; closed below
                                })});
      }
    });
  }
  // Joins every connection's thread before what `serve` captured (the test's locals) goes:
  // a detached one could still be inside a Notification the test has already destroyed.
  ~Upstream() {
    shutdown(fd_, SHUT_RDWR);
    close(fd_);
    thread_.join();
    absl::MutexLock lock(&mu_);
    for (Connection& c : connections_) {
      shutdown(c.fd, SHUT_RDWR);  // a serve blocked in read() returns
      c.thread.join();
      close(c.fd);
    }
  }
  int port() const { return port_; }

 private:
  struct Connection {
    int fd;
    std::thread thread;
  };
  std::function<void(int)> serve_;
  int fd_ = -1;
  int port_ = 0;
  absl::Mutex mu_;
  std::vector<Connection> connections_ ABSL_GUARDED_BY(mu_);
  std::thread thread_;
};

// Reads a request head from `fd`.
std::string ReadHead(int fd) {
  std::string head;
  char c;
  while (!absl::EndsWith(head, "\r\n\r\n") && read(fd, &c, 1) == 1) head.push_back(c);
  return head;
}

// A client connection to 127.0.0.1:port whose reads give up after 20 s, or -1.
int Connect(int port) {
  int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_port = htons(static_cast<uint16_t>(port));
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  if (connect(fd, reinterpret_cast<sockaddr*>(&a), sizeof(a)) != 0) {
    close(fd);
    return -1;
  }
  struct timeval tv = {20, 0};
  setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
  return fd;
}

std::string Exchange(int port, const std::string& bytes) {
  const int fd = Connect(port);
  std::string out;
  if (fd >= 0) {
    (void)!write(fd, bytes.data(), bytes.size());
    char buf[4096];
    ssize_t n;
    while ((n = read(fd, buf, sizeof(buf))) > 0) out.append(buf, static_cast<size_t>(n));
    close(fd);
  }
  return out;
}

class PortProxyTest : public ::testing::Test {
 protected:
  void SetUp() override {
    char tmpl[] = "/tmp/sg-proxy-XXXXXX";
    dir_ = mkdtemp(tmpl);
    store_ = *store::SqliteStore::Open(dir_ + "/s.db");
    provider_ = std::make_unique<HostProvider>(store_.get());
    limits_.max_body_bytes = 64;
    limits_.idle_timeout = absl::Seconds(30);
    core::SessionManagerDeps deps;
    deps.config = &config_;
    deps.store = store_.get();
    deps.clock = &clock_;
    deps.providers = {{"local", provider_.get()}};
    sessions_ = std::make_unique<core::SessionManager>(deps);
    ports_ = std::make_unique<core::PortManager>(
        core::PortManager::Deps{&limits_, sessions_.get(), &clock_, std::string(32, 'k'), ""});
    tenants_ = std::make_unique<core::Tenants>(std::vector<core::TenantConfig>{});
    proxy_ = std::make_unique<PortProxy>(
        PortProxy::Deps{tenants_.get(), ports_.get(), &limits_, &clock_});
    HttpServerOptions o;
    o.address = "127.0.0.1:0";
    server_ = *HttpServer::Start(o, proxy_->Routes());
    auto s = sessions_->Create(caller_, v1::CreateSessionRequest(), nullptr);
    ASSERT_TRUE(s.ok()) << s.status();
    sid_ = s->id();
  }
  void TearDown() override {
    proxy_->Stop();
    server_->Stop();
    proxy_.reset();
    server_.reset();
    ports_.reset();
    sessions_.reset();
    store_.reset();
    std::system(("rm -rf " + dir_).c_str());
  }
  void Expose(int port) {
    v1::ExposePortRequest req;
    req.set_session_id(sid_);
    req.set_port(static_cast<uint32_t>(port));
    v1::ExposedPort out;
    ASSERT_TRUE(ports_->Expose(caller_, req, &out).ok());
  }
  std::string Get(int port, const std::string& rest, const std::string& extra = "") {
    return Exchange(server_->port(), absl::StrCat("GET /v1/sessions/", sid_, "/ports/", port, "/",
                                                  rest, " HTTP/1.0\r\n", extra, "\r\n"));
  }

  std::string dir_;
  std::unique_ptr<store::SqliteStore> store_;
  std::unique_ptr<HostProvider> provider_;
  core::Config config_;
  core::PortLimits limits_;
  FakeClock clock_;
  std::unique_ptr<core::SessionManager> sessions_;
  std::unique_ptr<core::PortManager> ports_;
  std::unique_ptr<core::Tenants> tenants_;
  std::unique_ptr<PortProxy> proxy_;
  std::unique_ptr<HttpServer> server_;
  core::Caller caller_{"local", true, nullptr};  // no tenants configured: every caller's
  std::string sid_;
};

TEST_F(PortProxyTest, TheSandboxGetsThePathAndHeadersButNeverTheCallersCredentials) {
  std::string seen;
  absl::Mutex mu;
  Upstream up([&](int fd) {
    std::string head = ReadHead(fd);
    {
      absl::MutexLock lock(&mu);
      seen = head;
    }
    const char kAnswer[] =
        "HTTP/1.0 200 OK\r\nContent-Length: 5\r\nSet-Cookie: a=b\r\nX-App: yes\r\n"
        "Content-Security-Policy: default-src *\r\n\r\nhello";
    (void)!write(fd, kAnswer, sizeof(kAnswer) - 1);
  });
  Expose(up.port());
  std::string answer = Get(up.port(), "a%20b/c?q=1&r=%2F",
                           "Authorization: Bearer secret\r\nCookie: dash=1\r\nX-Mine: 7\r\n");
  EXPECT_TRUE(absl::StartsWith(answer, "HTTP/1.0 200") || absl::StartsWith(answer, "HTTP/1.1 200"))
      << answer;
  EXPECT_TRUE(absl::EndsWith(answer, "\r\n\r\nhello")) << answer;
  EXPECT_TRUE(absl::StrContains(answer, "x-app: yes")) << answer;  // names lower-cased
  EXPECT_FALSE(absl::StrContains(answer, "Set-Cookie"));
  EXPECT_FALSE(absl::StrContains(answer, "default-src *"));
  EXPECT_TRUE(absl::StrContains(answer, "Content-Security-Policy: sandbox allow-scripts"));
  absl::MutexLock lock(&mu);
  EXPECT_TRUE(absl::StartsWith(seen, "GET /a%20b/c?q=1&r=%2F HTTP/1.0\r\n")) << seen;
  EXPECT_TRUE(absl::StrContains(seen, absl::StrCat("Host: 127.0.0.1:", up.port()))) << seen;
  EXPECT_TRUE(absl::StrContains(seen, "x-mine: 7")) << seen;
  EXPECT_TRUE(absl::StrContains(
      seen, absl::StrCat("X-Forwarded-Prefix: /v1/sessions/", sid_, "/ports/", up.port())));
  EXPECT_FALSE(absl::StrContains(seen, "secret")) << seen;
  EXPECT_FALSE(absl::StrContains(seen, "dash=1")) << seen;
}

TEST_F(PortProxyTest, AQuietConnectionEndsAtTheIdleTimeoutOnTheClock) {
  absl::Notification release;
  Upstream up([&](int fd) {
    ReadHead(fd);
    const char kHead[] = "HTTP/1.0 200 OK\r\n\r\nfirst";
    (void)!write(fd, kHead, sizeof(kHead) - 1);
    release.WaitForNotificationWithTimeout(absl::Seconds(30));  // then nothing more
  });
  Expose(up.port());
  const int fd = Connect(server_->port());
  ASSERT_GE(fd, 0);
  const std::string req =
      absl::StrCat("GET /v1/sessions/", sid_, "/ports/", up.port(), "/slow HTTP/1.0\r\n\r\n");
  ASSERT_EQ(write(fd, req.data(), req.size()), static_cast<ssize_t>(req.size()));
  std::string got;
  char buf[4096];
  while (!absl::StrContains(got, "first")) {  // the relay has read the sandbox's last byte
    ssize_t n = read(fd, buf, sizeof(buf));
    ASSERT_GT(n, 0) << got;
    got.append(buf, static_cast<size_t>(n));
  }
  clock_.Advance(absl::Seconds(29));
  absl::SleepFor(3 * PortProxy::kTick);  // the relay looked at the clock: not idle yet
  EXPECT_EQ(recv(fd, buf, sizeof(buf), MSG_DONTWAIT), -1);
  EXPECT_EQ(errno, EAGAIN);
  EXPECT_EQ(proxy_->active(), 1u);
  clock_.Advance(absl::Seconds(1));
  ssize_t n;
  while ((n = read(fd, buf, sizeof(buf))) > 0) {
  }
  EXPECT_TRUE(n == 0 || errno == ECONNRESET) << "the connection was not ended: " << strerror(errno);
  close(fd);
  release.Notify();
  EXPECT_TRUE(Eventually("the relay ends", [&] { return proxy_->active() == 0; }));
}

TEST_F(PortProxyTest, BoundsAndHostileInputsAreRefusedBeforeTheSandbox) {
  std::atomic<int> reached{0};
  Upstream up([&](int fd) {
    ++reached;
    ReadHead(fd);
    const char kAnswer[] = "HTTP/1.0 200 OK\r\nContent-Length: 2\r\n\r\nok";
    (void)!write(fd, kAnswer, sizeof(kAnswer) - 1);
  });
  Expose(up.port());
  const std::string base = absl::StrCat("/v1/sessions/", sid_, "/ports/");
  auto status = [&](const std::string& request) {
    std::string a = Exchange(server_->port(), request);
    return a.size() > 12 ? a.substr(9, 3) : a;
  };
  EXPECT_EQ(status(absl::StrCat("POST ", base, up.port(),
                                "/x HTTP/1.0\r\nContent-Length: 65\r\n\r\n", std::string(65, 'b'))),
            "413");
  EXPECT_EQ(status(absl::StrCat("GET ", base, up.port(), "/a/../b HTTP/1.0\r\n\r\n")), "400");
  EXPECT_EQ(status(absl::StrCat("GET ", base, up.port(), "/%2E%2E/b HTTP/1.0\r\n\r\n")), "400");
  EXPECT_EQ(status(absl::StrCat("GET ", base, "99999/x HTTP/1.0\r\n\r\n")), "400");
  EXPECT_EQ(status(absl::StrCat("GET ", base, "1x/x HTTP/1.0\r\n\r\n")), "400");
  EXPECT_EQ(status(absl::StrCat("GET ", base, up.port() + 1, "/x HTTP/1.0\r\n\r\n")), "404");
  EXPECT_EQ(status(absl::StrCat("GET /v1/sessions/nope/ports/", up.port(), "/x HTTP/1.0\r\n\r\n")),
            "404");
  EXPECT_EQ(status(absl::StrCat("GET ", base, up.port(), ":signed/1.ab/x HTTP/1.0\r\n\r\n")),
            "403");
  EXPECT_EQ(reached.load(), 0);
  EXPECT_EQ(status(absl::StrCat("GET ", base, up.port(), "/x HTTP/1.0\r\n\r\n")), "200");
  EXPECT_EQ(reached.load(), 1);
}

TEST_F(PortProxyTest, AWebSocketUpgradeIsRelayedBothWaysAsItIs) {
  Upstream up([&](int fd) {
    std::string head = ReadHead(fd);
    const std::string answer =
        "HTTP/1.1 101 Switching Protocols\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n"
        "Sec-WebSocket-Accept: abc=\r\n\r\nfrom-sandbox;";
    (void)!write(fd, answer.data(), answer.size());
    char buf[256];
    ssize_t n;
    while ((n = read(fd, buf, sizeof(buf))) > 0) {
      std::string back = "echo:" + std::string(buf, static_cast<size_t>(n));
      (void)!write(fd, back.data(), back.size());
    }
  });
  Expose(up.port());
  const int fd = Connect(server_->port());
  ASSERT_GE(fd, 0);
  const std::string req =
      absl::StrCat("GET /v1/sessions/", sid_, "/ports/", up.port(),
                   "/ws HTTP/1.1\r\nHost: x\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n"
                   "Sec-WebSocket-Key: k\r\nSec-WebSocket-Version: 13\r\n\r\n");
  ASSERT_EQ(write(fd, req.data(), req.size()), static_cast<ssize_t>(req.size()));
  std::string head = ReadHead(fd);
  EXPECT_TRUE(absl::StartsWith(head, "HTTP/1.1 101")) << head;
  EXPECT_TRUE(absl::StrContains(head, "sec-websocket-accept: abc=")) << head;
  std::string got;
  char buf[256];
  while (got.size() < 13) {
    ssize_t n = read(fd, buf, sizeof(buf));
    if (n <= 0) break;
    got.append(buf, static_cast<size_t>(n));
  }
  EXPECT_EQ(got, "from-sandbox;");
  const std::string bytes("\x81\x00\xff binary", 10);
  ASSERT_EQ(write(fd, bytes.data(), bytes.size()), 10);
  got.clear();
  while (got.size() < 15) {
    ssize_t n = read(fd, buf, sizeof(buf));
    if (n <= 0) break;
    got.append(buf, static_cast<size_t>(n));
  }
  EXPECT_EQ(got, "echo:" + bytes);
  close(fd);
  EXPECT_TRUE(Eventually("the relay ends with the client", [&] { return proxy_->active() == 0; }));
}

}  // namespace
}  // namespace sandgate::server
