// Exposed ports and the Codex exec-server route through a replica that does not hold the
// session (docs/replicas.md, "Forwarding"): two real daemons sharing one PostgreSQL database
// (tests/fakes' throwaway server), each on loopback TCP with mutual TLS and an HTTPS REST
// port. The session lives on replica A; every REST request here goes to replica B, which
// relays it on A's ConnectPort or CodexExec stream. The tenant and signed-URL checks hold on
// both hops, a forged forwarding marker grants nothing, and A going away ends B's relay.
#include <fcntl.h>
#include <netinet/in.h>
#include <openssl/err.h>
#include <openssl/hmac.h>
#include <openssl/ssl.h>
#include <sys/socket.h>
#include <unistd.h>

#include <fstream>
#include <string>

#include "absl/strings/escaping.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "common/sha256.h"
#include "gtest/gtest.h"
#include "tests/fakes/postgres_server.h"
#include "tests/fakes/test_certs.h"
#include "tests/integration/daemon_harness.h"
#include "tests/integration/echo_server.h"
#include "tests/integration/tls_replica.h"

namespace sandgate::testing {
namespace {

constexpr char kAlice[] = "replica-ports-alice";
constexpr char kBob[] = "replica-ports-bob";
// Both replicas sign with this key (ports.signing_key_file), so the test can sign a grant
// that has expired.
constexpr char kSigningKey[] = "replica-ports-signing-key-0123456789abcdef";

// One HTTPS connection to a replica's REST port (the test CA verifies it).
class Https {
 public:
  Https(int port, const std::string& ca) {
    ctx_ = SSL_CTX_new(TLS_client_method());
    SSL_CTX_load_verify_locations(ctx_, ca.c_str(), nullptr);
    SSL_CTX_set_verify(ctx_, SSL_VERIFY_PEER, nullptr);
    fd_ = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    sockaddr_in a{};
    a.sin_family = AF_INET;
    a.sin_port = htons(static_cast<uint16_t>(port));
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    struct timeval tv = {20, 0};
    setsockopt(fd_, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
    if (connect(fd_, reinterpret_cast<sockaddr*>(&a), sizeof(a)) != 0) return;
    ssl_ = SSL_new(ctx_);
    SSL_set_fd(ssl_, fd_);
    ok_ = SSL_connect(ssl_) == 1;
  }
  ~Https() {
    if (ssl_ != nullptr) SSL_free(ssl_);
    close(fd_);
    SSL_CTX_free(ctx_);
  }
  bool ok() const { return ok_; }
  bool Write(const std::string& data) {
    return ok_ && SSL_write(ssl_, data.data(), static_cast<int>(data.size())) ==
                      static_cast<int>(data.size());
  }
  // Up to `n` bytes (fewer when the connection ends or 20 s pass).
  std::string Read(size_t n) {
    std::string out;
    char buf[16384];
    while (ok_ && out.size() < n) {
      int r = SSL_read(ssl_, buf, static_cast<int>(std::min(sizeof(buf), n - out.size())));
      if (r <= 0) break;
      out.append(buf, static_cast<size_t>(r));
    }
    return out;
  }
  std::string ReadHead() {
    std::string head;
    while (!absl::EndsWith(head, "\r\n\r\n")) {
      std::string c = Read(1);
      if (c.empty()) break;
      head += c;
    }
    return head;
  }
  // True when the connection ends (or breaks) within 20 s while the client keeps writing
  // `ping` every half second (libmicrohttpd closes an upgraded TLS connection that its taker
  // closed at the connection's next activity).
  bool EndsWhileWriting(const std::string& ping) {
    struct timeval tv = {0, 500000};
    setsockopt(fd_, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
    for (int i = 0; i < 40; ++i) {
      if (SSL_write(ssl_, ping.data(), static_cast<int>(ping.size())) <= 0) return true;
      char buf[4096];
      int r = SSL_read(ssl_, buf, sizeof(buf));
      if (r > 0) continue;
      const int e = SSL_get_error(ssl_, r);
      if (e != SSL_ERROR_WANT_READ &&
          !(e == SSL_ERROR_SYSCALL && (errno == EAGAIN || errno == EWOULDBLOCK))) {
        return true;
      }
    }
    return false;
  }
  // True when the connection ends (or breaks) within the read timeout.
  bool Ends() {
    char buf[4096];
    for (;;) {
      int r = SSL_read(ssl_, buf, sizeof(buf));
      if (r > 0) continue;
      const int e = SSL_get_error(ssl_, r);
      return e != SSL_ERROR_WANT_READ &&
             !(e == SSL_ERROR_SYSCALL && (errno == EAGAIN || errno == EWOULDBLOCK));
    }
  }

 private:
  SSL_CTX* ctx_ = nullptr;
  SSL* ssl_ = nullptr;
  int fd_ = -1;
  bool ok_ = false;
};

struct Answer {
  int status = 0;
  std::string head, body;
};

// A client's masked text frame of `text` (under 64 KiB).
std::string MaskedFrame(const std::string& text, unsigned char opcode = 0x81) {
  const unsigned char mask[4] = {0x12, 0x34, 0x56, 0x78};
  std::string f = {static_cast<char>(opcode)};
  if (text.size() < 126) {
    f.push_back(static_cast<char>(0x80 | text.size()));
  } else {
    f += {static_cast<char>(0x80 | 126), static_cast<char>(text.size() >> 8),
          static_cast<char>(text.size() & 0xff)};
  }
  f.append(reinterpret_cast<const char*>(mask), 4);
  for (size_t i = 0; i < text.size(); ++i) f.push_back(static_cast<char>(text[i] ^ mask[i % 4]));
  return f;
}

// The next frame's payload from the server (unmasked, under 64 KiB); "" when none came.
std::string ReadFrame(Https& c, int* opcode = nullptr) {
  std::string h = c.Read(2);
  if (h.size() < 2) return "";
  if (opcode != nullptr) *opcode = h[0] & 0x0f;
  size_t n = static_cast<unsigned char>(h[1]) & 127;
  if (n == 126) {
    std::string l = c.Read(2);
    n = (static_cast<unsigned char>(l[0]) << 8) | static_cast<unsigned char>(l[1]);
  }
  return c.Read(n);
}

std::string Grant(const std::string& session, int port, int64_t expiry) {
  const std::string message = absl::StrCat(session, "\n", port, "\n", expiry);
  unsigned char mac[EVP_MAX_MD_SIZE];
  unsigned int len = 0;
  HMAC(EVP_sha256(), kSigningKey, static_cast<int>(sizeof(kSigningKey) - 1),
       reinterpret_cast<const unsigned char*>(message.data()), message.size(), mac, &len);
  return absl::StrCat(expiry, ".",
                      absl::BytesToHexString(absl::string_view(reinterpret_cast<char*>(mac), len)));
}

class ReplicaPortsTest : public TlsFixture {
 protected:
  void SetUp() override {
    TlsFixture::SetUp();
    auto dsn = PostgresServer::Shared().CreateDatabase();
    ASSERT_TRUE(dsn.ok()) << dsn.status();
    const std::string key_file = tmp_.path() + "/signing.key";
    std::ofstream(key_file) << kSigningKey;
    const nlohmann::json tenants = {{{"name", "alice"}, {"token_sha256", Sha256::Hex(kAlice)}},
                                    {{"name", "bob"}, {"token_sha256", Sha256::Hex(kBob)}}};
    for (int i = 0; i < 2; ++i) {
      http_[i] = FreePort();
      nlohmann::json config = TlsReplicaConfig(*dsn, i == 0 ? "replica-a" : "replica-b",
                                               i == 0 ? 362000 : 362100, certs_, tenants);
      config["http_listen"] = absl::StrCat("127.0.0.1:", http_[i]);
      config["ports"] = {{"signing_key_file", key_file}};
      replicas_[i] =
          std::make_unique<TlsReplica>(tmp_.path() + (i == 0 ? "/a" : "/b"), config, certs_);
      ASSERT_TRUE(replicas_[i]->Start(kAlice)) << replicas_[i]->Log();
    }
    a_ = replicas_[0]->Stub();
    // A's session: index.txt, a 300 KB file (several relayed chunks), the echo server.
    v1::CreateSessionRequest req;
    req.mutable_sandbox()->mutable_idle_timeout()->set_seconds(600);
    auto add = [&](const std::string& path, const std::string& content) {
      auto* f = req.mutable_sandbox()->add_files();
      f->set_path(path);
      f->set_content(content);
    };
    add("index.txt", "alice's page on A\n");
    big_ = std::string(300000, 'b');
    add("big.bin", big_);
    add("echo.py", kEchoServer);
    v1::Session s;
    grpc::Status st = a_->CreateSession(DaemonHarness::Context(kAlice).get(), req, &s);
    ASSERT_TRUE(st.ok()) << st.error_message() << replicas_[0]->Log();
    ASSERT_EQ(s.replica(), "replica-a");
    sid_ = s.id();
    for (const char* command :
         {"python3 -m http.server 8000 --bind 127.0.0.1", "python3 echo.py 9000"}) {
      v1::StartProcessRequest p;
      p.set_session_id(sid_);
      p.set_command(command);
      v1::Process process;
      st = a_->StartProcess(DaemonHarness::Context(kAlice).get(), p, &process);
      ASSERT_TRUE(st.ok()) << st.error_message();
    }
  }

  // One HTTP/1.0 request to replica `i`'s REST port.
  Answer Http(int i, const std::string& method, const std::string& path,
              const std::string& token = kAlice, const std::string& body = "",
              const std::string& headers = "") {
    Https c(http_[i], certs_.ca);
    EXPECT_TRUE(c.ok());
    std::string req = absl::StrCat(method, " ", path, " HTTP/1.0\r\nHost: 127.0.0.1\r\n", headers);
    if (!token.empty()) absl::StrAppend(&req, "Authorization: Bearer ", token, "\r\n");
    if (!body.empty() || method == "POST") {
      absl::StrAppend(&req, "Content-Length: ", body.size(), "\r\n");
    }
    absl::StrAppend(&req, "\r\n", body);
    c.Write(req);
    const std::string raw = c.Read(size_t{1} << 24);
    Answer a;
    const size_t end = raw.find("\r\n\r\n");
    a.head = raw.substr(0, end);
    if (end != std::string::npos) a.body = raw.substr(end + 4);
    if (raw.size() > 12) (void)absl::SimpleAtoi(raw.substr(9, 3), &a.status);
    return a;
  }
  // Exposes `port` of A's session through B (the call is forwarded to A).
  nlohmann::json Expose(int port, const std::string& extra = "") {
    Answer a = Http(1, "POST", "/v1/sessions/" + sid_ + "/ports", kAlice,
                    absl::StrCat(R"({"port": )", port, extra, "}"));
    EXPECT_EQ(a.status, 200) << a.body;
    return a.status == 200 ? nlohmann::json::parse(a.body) : nlohmann::json::object();
  }
  // GETs `path` on B until the sandbox's server answers.
  Answer Ready(const std::string& path) {
    Answer a;
    EXPECT_TRUE(Eventually(
        "the sandbox's server answers through B",
        [&] {
          a = Http(1, "GET", path);
          return a.status == 200;
        },
        absl::Seconds(30)))
        << a.status << " " << a.body << "\nA:\n"
        << replicas_[0]->Log() << "\nB:\n"
        << replicas_[1]->Log();
    return a;
  }
  // A WebSocket through B to `path` (its handshake answered); `head` gets the answer's head.
  std::unique_ptr<Https> Upgrade(const std::string& path, std::string* head,
                                 const std::string& auth = "") {
    auto c = std::make_unique<Https>(http_[1], certs_.ca);
    c->Write(absl::StrCat("GET ", path,
                          " HTTP/1.1\r\nHost: x\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n"
                          "Sec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\n"
                          "Sec-WebSocket-Version: 13\r\n",
                          auth, "\r\n"));
    *head = c->ReadHead();
    return c;
  }

  // Exposes the echo server's port through B and opens a WebSocket to it there (once the
  // server listens); null, with the last answer's head in `head`, if it never answered.
  std::unique_ptr<Https> OpenEcho(std::string* head) {
    Expose(9000);
    std::unique_ptr<Https> ws;
    const bool open = Eventually(
        "the echo server's handshake through B",
        [&] {
          ws = Upgrade("/v1/sessions/" + sid_ + "/ports/9000/chat", head,
                       absl::StrCat("Authorization: Bearer ", kAlice, "\r\n"));
          return absl::StartsWith(*head, "HTTP/1.1 101");
        },
        absl::Seconds(30));
    return open ? std::move(ws) : nullptr;
  }

  int http_[2] = {0, 0};
  std::unique_ptr<TlsReplica> replicas_[2];
  std::unique_ptr<v1::Sandgate::Stub> a_;
  std::string sid_, big_;
};

TEST_F(ReplicaPortsTest, HttpAndWebSocketReachASessionOnAnotherReplica) {
  nlohmann::json exposed = Expose(8000);
  const std::string path = "/v1/sessions/" + sid_ + "/ports/8000/";
  EXPECT_EQ(Ready(path + "index.txt").body, "alice's page on A\n");
  Answer big = Http(1, "GET", path + "big.bin");
  EXPECT_EQ(big.status, 200);
  EXPECT_EQ(big.body.size(), big_.size());
  EXPECT_TRUE(big.body == big_);
  EXPECT_TRUE(absl::StrContains(big.head, "Content-Security-Policy: sandbox")) << big.head;
  // A request body crosses too (http.server answers POST with its own 501).
  EXPECT_EQ(Http(1, "POST", path + "index.txt", kAlice, "a=b").status, 501);

  std::string head;
  std::unique_ptr<Https> ws = OpenEcho(&head);
  ASSERT_NE(ws, nullptr) << head;
  EXPECT_TRUE(absl::StrContains(head, "s3pPLMBiTxaQ9kYGzzhZRbK+xOo=")) << head;
  for (const std::string& text : {std::string("hello"), std::string(3000, 'x')}) {
    ASSERT_TRUE(ws->Write(MaskedFrame(text)));
    EXPECT_EQ(ReadFrame(*ws), text);
  }
}

TEST_F(ReplicaPortsTest, TheTenantAndTheSignedUrlAreCheckedOnBothHops) {
  nlohmann::json exposed = Expose(8000, R"(, "signedUrl": true, "signedTtl": "600s")");
  const std::string path = "/v1/sessions/" + sid_ + "/ports/8000/index.txt";
  Ready(path);
  // B refuses another tenant, no token and a bad token, as A would.
  EXPECT_EQ(Http(1, "GET", path, kBob).status, 404);
  EXPECT_EQ(Http(1, "GET", path, "").status, 401);
  EXPECT_EQ(Http(1, "GET", path, "wrong").status, 401);
  // A forged forwarding marker on B's REST port is only a header.
  EXPECT_EQ(Http(1, "GET", path, "", "", "sandgate-forwarded-by: replica-b\r\n").status, 401);

  // The signed URL works through B; A checks it (it holds the exposure).
  const std::string signed_path = exposed["signedPath"];
  Answer by_url = Http(1, "GET", signed_path + "index.txt", "");
  EXPECT_EQ(by_url.status, 200) << by_url.body;
  EXPECT_EQ(by_url.body, "alice's page on A\n");
  // Expired (correctly signed), forged, for another port: refused.
  const int64_t past = absl::ToUnixSeconds(absl::Now()) - 10;
  Answer expired = Http(1, "GET",
                        absl::StrCat("/v1/sessions/", sid_, "/ports/8000:signed/",
                                     Grant(sid_, 8000, past), "/index.txt"),
                        "");
  EXPECT_EQ(expired.status, 403) << expired.body;
  EXPECT_TRUE(absl::StrContains(expired.body, "expired")) << expired.body;
  std::string forged = signed_path;
  char& last = forged[forged.size() - 2];
  last = last == '0' ? '1' : '0';
  EXPECT_EQ(Http(1, "GET", forged + "index.txt", "").status, 403);

  // The owner's hop checks too: a gRPC client calling A's ConnectPort directly, with another
  // tenant's token, with none (a forged marker grants nothing), with an expired grant.
  auto connect = [&](const std::string& token, const std::string& grant, bool marker,
                     uint32_t port = 8000, const std::string& session = "") {
    auto ctx = DaemonHarness::Context(token);
    if (token.empty()) ctx = std::make_unique<grpc::ClientContext>();
    if (marker) ctx->AddMetadata("sandgate-forwarded-by", "replica-b");
    auto stream = a_->ConnectPort(ctx.get());
    v1::ConnectPortRequest first;
    first.set_session_id(session.empty() ? sid_ : session);
    first.set_port(port);
    first.set_grant(grant);
    stream->Write(first);
    stream->WritesDone();
    v1::ConnectPortResponse m;
    while (stream->Read(&m)) {
    }
    return stream->Finish();
  };
  EXPECT_EQ(connect(kBob, "", true).error_code(), grpc::StatusCode::NOT_FOUND);
  EXPECT_EQ(connect("", "", true).error_code(), grpc::StatusCode::UNAUTHENTICATED);
  EXPECT_EQ(connect("", Grant(sid_, 8000, past), true).error_code(),
            grpc::StatusCode::PERMISSION_DENIED);
  EXPECT_EQ(connect(kAlice, "", false).error_code(), grpc::StatusCode::OK);
  // Hostile first messages: no port, one out of range, a port not exposed, an unknown or
  // traversing session id.
  EXPECT_EQ(connect(kAlice, "", false, 0).error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_EQ(connect(kAlice, "", false, 70000).error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_EQ(connect(kAlice, "", false, 8001).error_code(), grpc::StatusCode::NOT_FOUND);
  EXPECT_EQ(connect(kAlice, "", false, 8000, "s-nope").error_code(), grpc::StatusCode::NOT_FOUND);
  EXPECT_EQ(connect(kAlice, "", false, 8000, "../" + sid_).error_code(),
            grpc::StatusCode::NOT_FOUND);
}

TEST_F(ReplicaPortsTest, TheCodexRouteWorksThroughAnotherReplica) {
  std::string head;
  std::unique_ptr<Https> ws = Upgrade("/v1/sessions/" + sid_ + "/codex?token=" + kAlice, &head);
  ASSERT_TRUE(absl::StartsWith(head, "HTTP/1.1 101")) << head << replicas_[1]->Log();
  ASSERT_TRUE(ws->Write(MaskedFrame(R"({"id":1,"method":"initialize","params":{}})")));
  nlohmann::json init = nlohmann::json::parse(ReadFrame(*ws), nullptr, false);
  EXPECT_TRUE(init.contains("result")) << init.dump();
  ASSERT_TRUE(ws->Write(MaskedFrame(
      R"({"id":2,"method":"fs/writeFile","params":{"path":"file:///work/from-b.txt","dataBase64":")" +
      absl::Base64Escape("written through B\n") + R"("}})")));
  EXPECT_TRUE(nlohmann::json::parse(ReadFrame(*ws), nullptr, false).contains("result"));
  ASSERT_TRUE(ws->Write(MaskedFrame(
      R"({"id":3,"method":"fs/readFile","params":{"path":"file:///work/index.txt"}})")));
  nlohmann::json read = nlohmann::json::parse(ReadFrame(*ws), nullptr, false);
  EXPECT_EQ(read["result"]["dataBase64"], absl::Base64Escape("alice's page on A\n")) << read.dump();
  ws.reset();
  // The file is in A's sandbox.
  v1::DownloadFileRequest d;
  d.set_session_id(sid_);
  d.set_path("from-b.txt");
  auto ctx = DaemonHarness::Context(kAlice);
  auto reader = a_->DownloadFile(ctx.get(), d);
  std::string got;
  v1::FileChunk chunk;
  while (reader->Read(&chunk)) got += chunk.data();
  EXPECT_TRUE(reader->Finish().ok());
  EXPECT_EQ(got, "written through B\n");

  // Another tenant is refused before the upgrade, on B.
  Upgrade("/v1/sessions/" + sid_ + "/codex?token=" + kBob, &head);
  EXPECT_TRUE(absl::StartsWith(head, "HTTP/1.1 404")) << head;

  // And on A's own hop: CodexExec called directly with another tenant's token, none (a forged
  // forwarding marker grants nothing), an unknown or traversing session, no first message.
  auto codex = [&](const std::string& token, const std::string& session, bool send_first) {
    auto ctx =
        token.empty() ? std::make_unique<grpc::ClientContext>() : DaemonHarness::Context(token);
    ctx->AddMetadata("sandgate-forwarded-by", "replica-b");
    auto stream = a_->CodexExec(ctx.get());
    v1::CodexExecRequest first;
    first.set_session_id(session);
    if (send_first) stream->Write(first);
    stream->WritesDone();
    v1::CodexExecResponse m;
    while (stream->Read(&m)) {
    }
    return stream->Finish().error_code();
  };
  EXPECT_EQ(codex(kBob, sid_, true), grpc::StatusCode::NOT_FOUND);
  EXPECT_EQ(codex("", sid_, true), grpc::StatusCode::UNAUTHENTICATED);
  EXPECT_EQ(codex(kAlice, "s-nope", true), grpc::StatusCode::NOT_FOUND);
  EXPECT_EQ(codex(kAlice, "../" + sid_, true), grpc::StatusCode::NOT_FOUND);
  EXPECT_EQ(codex(kAlice, sid_, false), grpc::StatusCode::CANCELLED);
  EXPECT_EQ(codex(kAlice, sid_, true), grpc::StatusCode::OK);
}

TEST_F(ReplicaPortsTest, TheOwnerGoingAwayEndsTheRelayCleanly) {
  std::string head;
  std::unique_ptr<Https> ws = OpenEcho(&head);
  ASSERT_NE(ws, nullptr) << head;
  ASSERT_TRUE(ws->Write(MaskedFrame("before")));
  EXPECT_EQ(ReadFrame(*ws), "before");
  std::string codex_head;
  std::unique_ptr<Https> codex =
      Upgrade("/v1/sessions/" + sid_ + "/codex?token=" + kAlice, &codex_head);
  ASSERT_TRUE(absl::StartsWith(codex_head, "HTTP/1.1 101")) << codex_head;

  replicas_[0]->Kill();
  // B ends both connections (the port's bytes stop; Codex's WebSocket closes with why).
  EXPECT_TRUE(ws->EndsWhileWriting(MaskedFrame("after"))) << replicas_[1]->Log();
  int opcode = 0;
  const std::string close = ReadFrame(*codex, &opcode);
  EXPECT_EQ(opcode, 8);
  EXPECT_TRUE(absl::StrContains(close, "replica-a")) << close;
  // B goes on serving: a new request is refused saying why, not hung.
  Answer after = Http(1, "GET", "/v1/sessions/" + sid_ + "/ports/9000/");
  // (503 while A's lease runs, 412 once B's takeover ended the session.)
  EXPECT_TRUE(after.status == 503 || after.status == 412) << after.status << " " << after.body;
  EXPECT_TRUE(absl::StrContains(after.body, "replica-a")) << after.body;
}

}  // namespace
}  // namespace sandgate::testing
