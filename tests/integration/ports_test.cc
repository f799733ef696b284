// Exposed ports (docs/sessions.md "Exposed ports") through the real daemon: a background
// `python3 -m http.server` and a stdlib WebSocket echo server inside sessions, reached over the
// REST port; the tenant and signature checks; and the escape probes of the port proxy: the
// host's loopback, another session's port, a port not exposed, hostile URLs and headers.
// Both isolation levels (gVisor where runsc is installed).
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <string>

#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "common/sha256.h"
#include "gtest/gtest.h"
#include "tests/integration/daemon_harness.h"
#include "tests/integration/echo_server.h"

namespace sandgate::testing {
namespace {

constexpr char kAlice[] = "alice-token";
constexpr char kBob[] = "bob-token";

struct Answer {
  int status = 0;
  std::string head, body;
};

Answer Parse(const std::string& raw) {
  Answer a;
  size_t end = raw.find("\r\n\r\n");
  a.head = raw.substr(0, end);
  if (end != std::string::npos) a.body = raw.substr(end + 4);
  if (raw.size() > 12) (void)absl::SimpleAtoi(raw.substr(9, 3), &a.status);
  return a;
}

// One HTTP/1.0 request (so the answer is never chunked) with `token` and extra header lines.
Answer Http(int port, const std::string& method, const std::string& path,
            const std::string& token = kAlice, const std::string& body = "",
            const std::string& headers = "") {
  std::string req = absl::StrCat(method, " ", path, " HTTP/1.0\r\nHost: 127.0.0.1\r\n", headers);
  if (!token.empty()) absl::StrAppend(&req, "Authorization: Bearer ", token, "\r\n");
  if (!body.empty() || method == "POST")
    absl::StrAppend(&req, "Content-Length: ", body.size(), "\r\n");
  absl::StrAppend(&req, "\r\n", body);
  bool closed = false;
  return Parse(HttpRaw(port, req, absl::Seconds(60), &closed));
}

int Connect(int port) {
  int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  struct sockaddr_in a = {};
  a.sin_family = AF_INET;
  a.sin_port = htons(static_cast<uint16_t>(port));
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  if (connect(fd, reinterpret_cast<sockaddr*>(&a), sizeof(a)) != 0) {
    close(fd);
    return -1;
  }
  struct timeval tv = {30, 0};
  setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
  return fd;
}

// A client's masked text frame of `text` (under 126 bytes).
std::string MaskedFrame(const std::string& text) {
  const unsigned char mask[4] = {0x12, 0x34, 0x56, 0x78};
  std::string f = {static_cast<char>(0x81), static_cast<char>(0x80 | text.size())};
  f.append(reinterpret_cast<const char*>(mask), 4);
  for (size_t i = 0; i < text.size(); ++i) f.push_back(static_cast<char>(text[i] ^ mask[i % 4]));
  return f;
}

std::string ReadN(int fd, size_t n) {
  std::string out;
  char buf[4096];
  while (out.size() < n) {
    ssize_t r = read(fd, buf, std::min(sizeof(buf), n - out.size()));
    if (r <= 0) break;
    out.append(buf, static_cast<size_t>(r));
  }
  return out;
}

class PortsTest : public ::testing::TestWithParam<std::string> {
 protected:
  void SetUp() override {
    if (GetParam() == "gvisor" && access("/usr/bin/runsc", X_OK) != 0) {
      GTEST_SKIP() << "runsc is NOT INSTALLED (Debian package runsc; deploy/setup.sh)";
    }
    daemon_ = std::make_unique<DaemonHarness>(nlohmann::json{
        {"http_listen", "127.0.0.1:0"},
        {"allow_plaintext_tokens", true},
        {"tenants",
         {{{"name", "alice"}, {"token_sha256", Sha256Hex(kAlice)}},
          {{"name", "bob"}, {"token_sha256", Sha256Hex(kBob)}}}},
        {"ports", {{"max_body_bytes", 4096}}},
        {"local", {{"uid_base", GetParam() == "gvisor" ? 356000 : 355000}, {"uid_count", 8}}}});
    daemon_->Start();
    stub_ = daemon_->Stub();
    const std::string log = daemon_->Log();
    size_t at = log.find("\"event\":\"daemon.http\"");
    size_t url = log.find("127.0.0.1:", at);
    ASSERT_NE(url, std::string::npos) << log;
    port_ = std::atoi(log.c_str() + url + 10);
  }

  // A session of `token`'s tenant whose workspace holds `who` in index.txt.
  std::string NewSession(const std::string& token, const std::string& who) {
    v1::CreateSessionRequest req;
    req.mutable_sandbox()->set_isolation(GetParam());
    auto* f = req.mutable_sandbox()->add_files();
    f->set_path("index.txt");
    f->set_content(who);
    auto* e = req.mutable_sandbox()->add_files();
    e->set_path("echo.py");
    e->set_content(kEchoServer);
    v1::Session s;
    grpc::Status st = stub_->CreateSession(DaemonHarness::Context(token).get(), req, &s);
    EXPECT_TRUE(st.ok()) << st.error_message();
    return s.id();
  }
  // `command` in the background: a process of the session (StartProcess); under gVisor a
  // command that leaves it running (StartProcess there is the processes' work: its stdin pipe
  // does not cross the gVisor tunnel yet).
  void Start(const std::string& token, const std::string& sid, const std::string& command) {
    if (GetParam() == "gvisor") {
      v1::ExecRequest req;
      req.set_session_id(sid);
      // Its own session (the init ends the command's process group with the command), once
      // setsid has run.
      req.set_command("setsid " + command + " >/dev/null 2>&1 & sleep 1");
      auto ctx = DaemonHarness::Context(token);
      auto reader = stub_->Exec(ctx.get(), req);
      v1::ExecResponse r;
      while (reader->Read(&r)) {
      }
      grpc::Status st = reader->Finish();
      ASSERT_TRUE(st.ok()) << st.error_message();
      return;
    }
    v1::StartProcessRequest req;
    req.set_session_id(sid);
    req.set_command(command);
    v1::Process p;
    grpc::Status st = stub_->StartProcess(DaemonHarness::Context(token).get(), req, &p);
    ASSERT_TRUE(st.ok()) << st.error_message();
  }
  Answer Expose(const std::string& token, const std::string& sid, const std::string& body) {
    return Http(port_, "POST", "/v1/sessions/" + sid + "/ports", token, body);
  }
  // GETs `path` until the sandbox's server answers (it starts in the background).
  Answer Ready(const std::string& path, const std::string& token = kAlice) {
    Answer a;
    EXPECT_TRUE(Eventually(
        "the sandbox's server answers",
        [&] {
          a = Http(port_, "GET", path, token);
          return a.status == 200;
        },
        absl::Seconds(30)))
        << a.status << " " << a.body;
    return a;
  }

  std::unique_ptr<DaemonHarness> daemon_;
  std::unique_ptr<v1::Sandgate::Stub> stub_;
  int port_ = 0;
};

TEST_P(PortsTest, AnHttpServerInTheSessionIsReachedThroughItsExposedPort) {
  const std::string sid = NewSession(kAlice, "alice's page\n");
  Start(kAlice, sid, "python3 -m http.server 8000 --bind 127.0.0.1");
  Answer exposed = Expose(kAlice, sid, R"({"port": 8000})");
  ASSERT_EQ(exposed.status, 200) << exposed.body;
  nlohmann::json j = nlohmann::json::parse(exposed.body);
  const std::string path = "/v1/sessions/" + sid + "/ports/8000/";
  EXPECT_EQ(j["path"], path);
  EXPECT_EQ(j["url"], absl::StrCat("http://127.0.0.1:", port_, path));

  Answer page = Ready(path + "index.txt");
  EXPECT_EQ(page.body, "alice's page\n");
  // A page of the sandbox never runs as the daemon's origin.
  EXPECT_TRUE(absl::StrContains(page.head, "Content-Security-Policy: sandbox allow-scripts"))
      << page.head;
  Answer listing = Http(port_, "GET", path + "?x=1");
  EXPECT_EQ(listing.status, 200);
  EXPECT_TRUE(absl::StrContains(listing.body, "index.txt")) << listing.body;
  // Every method reaches it; http.server answers POST with its own 501.
  EXPECT_EQ(Http(port_, "POST", path + "index.txt", kAlice, "a=b").status, 501);
  EXPECT_EQ(Http(port_, "HEAD", path + "index.txt").status, 200);

  Answer listed = Http(port_, "GET", "/v1/sessions/" + sid + "/ports");
  ASSERT_EQ(listed.status, 200);
  EXPECT_EQ(nlohmann::json::parse(listed.body)["ports"][0]["port"], 8000) << listed.body;

  // Unexposed: nothing reaches it any more.
  EXPECT_EQ(Http(port_, "POST", "/v1/sessions/" + sid + "/ports/8000:unexpose").status, 200);
  EXPECT_EQ(Http(port_, "GET", path + "index.txt").status, 404);
  EXPECT_EQ(Http(port_, "POST", "/v1/sessions/" + sid + "/ports/8000:unexpose").status, 404);
}

TEST_P(PortsTest, AWebSocketIsRelayedByteForByteAfterTheHandshake) {
  const std::string sid = NewSession(kAlice, "");
  Start(kAlice, sid, "python3 echo.py 9000");
  ASSERT_EQ(Expose(kAlice, sid, R"({"port": 9000})").status, 200);
  const std::string handshake = absl::StrCat(
      "GET /v1/sessions/", sid,
      "/ports/9000/chat HTTP/1.1\r\nHost: x\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n"
      "Sec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\nSec-WebSocket-Version: 13\r\n"
      "Authorization: Bearer ",
      kAlice, "\r\n\r\n");
  std::string head;
  int fd = -1;
  ASSERT_TRUE(Eventually(
      "the echo server's handshake",
      [&] {
        if (fd >= 0) close(fd);
        fd = Connect(port_);
        // The first frame rides with the handshake: bytes the server read early pass too.
        std::string first = handshake + MaskedFrame("early");
        (void)!write(fd, first.data(), first.size());
        head.clear();
        char c;
        while (!absl::EndsWith(head, "\r\n\r\n") && read(fd, &c, 1) == 1) head.push_back(c);
        return absl::StartsWith(head, "HTTP/1.1 101");
      },
      absl::Seconds(30)))
      << head;
  // RFC 6455's example key and its accept value, computed by the sandbox's server.
  EXPECT_TRUE(absl::StrContains(head, "s3pPLMBiTxaQ9kYGzzhZRbK+xOo=")) << head;
  EXPECT_EQ(ReadN(fd, 7), std::string("\x81\x05") + "early");
  for (const std::string& text : {std::string("hello"), std::string(100, 'x')}) {
    std::string frame = MaskedFrame(text);
    ASSERT_EQ(write(fd, frame.data(), frame.size()), static_cast<ssize_t>(frame.size()));
    const std::string echoed = std::string{'\x81', static_cast<char>(text.size())} + text;
    EXPECT_EQ(ReadN(fd, 2 + text.size()), echoed);
  }
  close(fd);
}

TEST_P(PortsTest, OnlyTheSessionsTenantOrASignedUrlReachesThePort) {
  const std::string sid = NewSession(kAlice, "alice's page\n");
  Start(kAlice, sid, "python3 -m http.server 8000 --bind 127.0.0.1");
  Answer exposed = Expose(kAlice, sid, R"({"port": 8000, "signedUrl": true, "signedTtl": "600s"})");
  ASSERT_EQ(exposed.status, 200) << exposed.body;
  const std::string path = "/v1/sessions/" + sid + "/ports/8000/index.txt";
  Ready(path);
  // Another tenant, and no token: as for every other route.
  EXPECT_EQ(Http(port_, "GET", path, kBob).status, 404);
  EXPECT_EQ(Http(port_, "GET", "/v1/sessions/" + sid + "/ports", kBob).status, 404);
  EXPECT_EQ(Expose(kBob, sid, R"({"port": 8000})").status, 404);
  EXPECT_EQ(Http(port_, "GET", path, "").status, 401);
  EXPECT_EQ(Http(port_, "GET", path, "wrong-token").status, 401);

  const std::string signed_path = nlohmann::json::parse(exposed.body)["signedPath"];
  ASSERT_TRUE(absl::StartsWith(signed_path, "/v1/sessions/" + sid + "/ports/8000:signed/"))
      << signed_path;
  Answer by_url = Http(port_, "GET", signed_path + "index.txt", "");
  EXPECT_EQ(by_url.status, 200) << by_url.body;
  EXPECT_EQ(by_url.body, "alice's page\n");
  // A forged signature, the grant moved to another port or session, a malformed one.
  std::string forged = signed_path;
  char& last = forged[forged.size() - 2];
  last = last == '0' ? '1' : '0';
  EXPECT_EQ(Http(port_, "GET", forged + "index.txt", "").status, 403);
  std::string other_port = signed_path;
  other_port.replace(other_port.find("/8000:"), 6, "/8001:");
  EXPECT_EQ(Http(port_, "GET", other_port + "index.txt", "").status, 403);
  const std::string grant = signed_path.substr(signed_path.find(":signed/") + 8);
  const std::string bob_sid = NewSession(kBob, "bob's\n");
  EXPECT_EQ(
      Http(port_, "GET", "/v1/sessions/" + bob_sid + "/ports/8000:signed/" + grant, "").status,
      403);
  EXPECT_EQ(
      Http(port_, "GET", "/v1/sessions/" + sid + "/ports/8000:signed/123.abc/index.txt", "").status,
      403);
  // Unexposed: the signed URL dies with the exposure.
  ASSERT_EQ(Http(port_, "POST", "/v1/sessions/" + sid + "/ports/8000:unexpose").status, 200);
  EXPECT_EQ(Http(port_, "GET", signed_path + "index.txt", "").status, 404);
}

TEST_P(PortsTest, TheProxyReachesNeitherTheHostNorAnotherSessionNorAnUnexposedPort) {
  const std::string a = NewSession(kAlice, "session a\n");
  const std::string b = NewSession(kAlice, "session b\n");
  Start(kAlice, a, "python3 -m http.server 8000 --bind 127.0.0.1");
  Start(kAlice, a, "python3 -m http.server 8001 --bind 127.0.0.1");
  Start(kAlice, b, "python3 -m http.server 8000 --bind 127.0.0.1");
  for (const std::string& sid : {a, b})
    ASSERT_EQ(Expose(kAlice, sid, R"({"port": 8000})").status, 200);
  // Each session's port 8000 is its own server, never the other's.
  EXPECT_EQ(Ready("/v1/sessions/" + a + "/ports/8000/index.txt").body, "session a\n");
  EXPECT_EQ(Ready("/v1/sessions/" + b + "/ports/8000/index.txt").body, "session b\n");
  // 8001 listens in session a but is not exposed.
  Answer unexposed = Http(port_, "GET", "/v1/sessions/" + a + "/ports/8001/index.txt");
  EXPECT_EQ(unexposed.status, 404) << unexposed.body;
  // The daemon's own REST port listens on the host's loopback: exposed in the session, it is
  // the sandbox's 127.0.0.1, where nothing listens.
  const std::string host_port = absl::StrCat(port_);
  ASSERT_EQ(Expose(kAlice, a, absl::StrCat(R"({"port": )", port_, "}")).status, 200);
  Answer host = Http(port_, "GET", "/v1/sessions/" + a + "/ports/" + host_port + "/v1/whoami");
  EXPECT_EQ(host.status, 412) << host.body;
  EXPECT_TRUE(absl::StrContains(host.body, "nothing listens on 127.0.0.1:" + host_port))
      << host.body;
}

TEST_P(PortsTest, HostileUrlsAndHeadersAreRefusedNamingTheProblem) {
  const std::string sid = NewSession(kAlice, "page\n");
  Start(kAlice, sid, "python3 -m http.server 8000 --bind 127.0.0.1");
  ASSERT_EQ(Expose(kAlice, sid, R"({"port": 8000})").status, 200);
  const std::string ports = "/v1/sessions/" + sid + "/ports/";
  Ready(ports + "8000/index.txt");
  for (const std::string bad : {"0", "65536", "abc", "80a", "-1", "008000x"}) {
    Answer a = Http(port_, "GET", ports + bad + "/index.txt");
    EXPECT_EQ(a.status, 400) << bad;
    EXPECT_TRUE(absl::StrContains(a.body, "port: expected a number 1..65535")) << a.body;
  }
  for (const std::string body : {R"({"port": 0})", R"({"port": 65536})", R"({"port": "x"})"}) {
    EXPECT_EQ(Expose(kAlice, sid, body).status, 400) << body;
  }
  EXPECT_EQ(
      Expose(kAlice, sid, R"({"port": 8000, "signedUrl": true, "signedTtl": "999999s"})").status,
      400);
  // Traversal, plain or encoded, is refused before anything reaches the sandbox.
  for (const std::string path : {"8000/../../etc/passwd", "8000/%2e%2e/%2E%2E/etc/passwd",
                                 "8000/a/./b", "8000/..%2findex.txt"}) {
    Answer a = Http(port_, "GET", ports + path);
    EXPECT_EQ(a.status, 400) << path << " " << a.body;
  }
  // Invalid UTF-8 and a NUL in the proxied path.
  EXPECT_EQ(Http(port_, "GET", ports + "8000/%ff%fe").status, 400);
  EXPECT_EQ(Http(port_, "GET", ports + "8000/a%00b").status, 400);
  // A huge header, a body over ports.max_body_bytes (4096 here).
  Answer huge = Http(port_, "GET", ports + "8000/index.txt", kAlice, "",
                     "X-Big: " + std::string(200 << 10, 'a') + "\r\n");
  EXPECT_NE(huge.status, 200);
  Answer big = Http(port_, "POST", ports + "8000/index.txt", kAlice, std::string(8192, 'b'));
  EXPECT_EQ(big.status, 413) << big.body;
  // The daemon is fine after all of it.
  EXPECT_EQ(Ready(ports + "8000/index.txt").body, "page\n");
}

INSTANTIATE_TEST_SUITE_P(Isolation, PortsTest, ::testing::Values("namespaces", "gvisor"),
                         [](const auto& info) { return info.param; });

}  // namespace
}  // namespace sandgate::testing
