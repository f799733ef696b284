// TLS on the daemon's TCP listener, end to end: the real sandgated on loopback with
// certificates made for this run (tests/fakes/test_certs.h), and the real CLI.
#include <arpa/inet.h>
#include <fcntl.h>
#include <grpcpp/grpcpp.h>
#include <netinet/in.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <regex>
#include <string>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/strip.h"
#include "absl/time/clock.h"
#include "common/sha256.h"
#include "gtest/gtest.h"
#include "nlohmann/json.hpp"
#include "sandgate/v1/sandgate.grpc.pb.h"
#include "server/grpc_server.h"
#include "tests/fakes/test_certs.h"
#include "tests/integration/daemon_harness.h"

namespace sandgate::testing {
namespace {

constexpr char kToken[] = "tls-test-token";

// sandgated on tcp:127.0.0.1:0 with `config` (listen and state_dir filled in). Start returns
// the port it listens on, or 0 when it exited (then error() holds its stderr); the daemon is
// drained (SIGTERM) when the object goes.
class TcpDaemon {
 public:
  explicit TcpDaemon(const std::string& dir) : dir_(dir) {}
  ~TcpDaemon() {
    if (pid_ > 0) {
      kill(pid_, SIGTERM);
      waitpid(pid_, nullptr, 0);
    }
  }
  int Start(nlohmann::json config) {
    config["listen"] = "tcp:127.0.0.1:0";
    config["state_dir"] = dir_ + "/state";
    const std::string path = dir_ + "/config.json";
    std::ofstream(path) << config.dump();
    int out[2];
    if (pipe2(out, O_CLOEXEC) != 0) return 0;
    pid_ = fork();
    if (pid_ == 0) {
      dup2(out[1], STDOUT_FILENO);
      int err = open((dir_ + "/stderr").c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
      dup2(err, STDERR_FILENO);
      execl(SANDGATED_PATH, "sandgated", "--config", path.c_str(), nullptr);
      _exit(127);
    }
    close(out[1]);
    FILE* f = fdopen(out[0], "r");
    char line[256] = {0};
    const bool said = fgets(line, sizeof(line), f) != nullptr;
    fclose(f);
    const std::string prefix = "sandgated listening on tcp:127.0.0.1:";
    if (!said || !absl::StartsWith(line, prefix)) {
      int status = 0;
      waitpid(pid_, &status, 0);
      exit_code_ = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
      pid_ = -1;
      return 0;
    }
    return std::atoi(line + prefix.size());
  }
  std::string error() const { return ReadFileOrEmpty(dir_ + "/stderr"); }
  int exit_code() const { return exit_code_; }

 private:
  std::string dir_;
  pid_t pid_ = -1;
  int exit_code_ = -1;
};

class TlsTest : public TlsFixture {
 protected:
  nlohmann::json Tls(bool mutual) const {
    nlohmann::json tls = {{"cert_file", certs_.server.cert}, {"key_file", certs_.server.key}};
    if (mutual) {
      tls["client_ca_file"] = certs_.ca;
      tls["require_client_cert"] = true;
    }
    return tls;
  }
  static nlohmann::json Tenants() {
    return nlohmann::json::array({{{"name", "alpha"}, {"token_sha256", Sha256::Hex(kToken)}}});
  }
  // A TLS channel trusting the test CA, presenting `client` when given.
  std::shared_ptr<grpc::Channel> Channel(int port, const TestCertificates::Pair* client) const {
    grpc::SslCredentialsOptions options;
    options.pem_root_certs = ReadFileOrEmpty(certs_.ca);
    if (client != nullptr) {
      options.pem_cert_chain = ReadFileOrEmpty(client->cert);
      options.pem_private_key = ReadFileOrEmpty(client->key);
    }
    return grpc::CreateChannel(absl::StrCat("127.0.0.1:", port), grpc::SslCredentials(options));
  }
  // ListRuns through `channel` (with the tenant's token when `token`); on success *peer_pem
  // is the certificate the daemon presented.
  static grpc::Status ListRuns(const std::shared_ptr<grpc::Channel>& channel, bool token,
                               std::string* peer_pem = nullptr) {
    auto ctx = DaemonHarness::Context(token ? kToken : "");
    ctx->set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(5));
    v1::ListRunsResponse resp;
    grpc::Status st = v1::Sandgate::NewStub(channel)->ListRuns(ctx.get(), {}, &resp);
    if (st.ok() && peer_pem != nullptr) {
      auto pems = ctx->auth_context()->FindPropertyValues("x509_pem_cert");
      *peer_pem = pems.empty() ? "" : std::string(pems[0].data(), pems[0].size());
    }
    return st;
  }
  // The CLI with `args` (and `env`, NAME=VALUE words); its exit code, and its stdout and
  // stderr together in *out.
  static int Cli(const std::string& args, std::string* out, const std::string& env = "") {
    FILE* p = popen(absl::StrCat(env, " ", SANDGATE_CLI_PATH, " ", args, " 2>&1").c_str(), "r");
    out->clear();
    char buf[512];
    while (size_t n = fread(buf, 1, sizeof(buf), p)) out->append(buf, n);
    int status = pclose(p);
    return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  }
  std::string DaemonDir(const std::string& name) {
    std::string dir = tmp_.path() + "/" + name;
    std::filesystem::create_directories(dir);
    return dir;
  }
};

TEST_F(TlsTest, PlaintextIsRefusedWhereTlsIsRequired) {
  TcpDaemon daemon(DaemonDir("d"));
  int port = daemon.Start({{"tls", Tls(false)}, {"tenants", Tenants()}});
  ASSERT_GT(port, 0) << daemon.error();
  auto plaintext =
      grpc::CreateChannel(absl::StrCat("127.0.0.1:", port), grpc::InsecureChannelCredentials());
  EXPECT_EQ(ListRuns(plaintext, true).error_code(), grpc::StatusCode::UNAVAILABLE);
  grpc::Status st = ListRuns(Channel(port, nullptr), true);
  EXPECT_TRUE(st.ok()) << st.error_message();
  EXPECT_EQ(ListRuns(Channel(port, nullptr), false).error_code(), grpc::StatusCode::UNAUTHENTICATED)
      << "TLS encrypts; the token still says who calls";
}

TEST_F(TlsTest, MutualTlsNeedsAClientCertificateTheCaSigned) {
  TcpDaemon daemon(DaemonDir("d"));
  // No tenants: the client certificate is what authenticates.
  int port = daemon.Start({{"tls", Tls(true)}});
  ASSERT_GT(port, 0) << daemon.error();
  EXPECT_EQ(ListRuns(Channel(port, nullptr), false).error_code(), grpc::StatusCode::UNAVAILABLE)
      << "no client certificate";
  EXPECT_EQ(ListRuns(Channel(port, &certs_.stranger), false).error_code(),
            grpc::StatusCode::UNAVAILABLE)
      << "a certificate from another CA";
  grpc::Status st = ListRuns(Channel(port, &certs_.client), false);
  EXPECT_TRUE(st.ok()) << st.error_message();
}

TEST_F(TlsTest, BearerTokensOverPlaintextTcpAreRefusedAtStartUnlessOptedIn) {
  TcpDaemon refused(DaemonDir("refused"));
  ASSERT_EQ(refused.Start({{"tenants", Tenants()}}), 0) << "started without TLS";
  EXPECT_EQ(refused.exit_code(), 2);
  EXPECT_TRUE(absl::StrContains(refused.error(), "bearer tokens in the clear")) << refused.error();
  EXPECT_TRUE(absl::StrContains(refused.error(), "\"allow_plaintext_tokens\": true"))
      << refused.error();
  TcpDaemon allowed(DaemonDir("allowed"));
  int port = allowed.Start({{"tenants", Tenants()}, {"allow_plaintext_tokens", true}});
  ASSERT_GT(port, 0) << allowed.error();
  auto plaintext =
      grpc::CreateChannel(absl::StrCat("127.0.0.1:", port), grpc::InsecureChannelCredentials());
  grpc::Status st = ListRuns(plaintext, true);
  EXPECT_TRUE(st.ok()) << st.error_message();
}

TEST_F(TlsTest, AWrongFileStopsTheStartNamingIt) {
  const std::string missing = tmp_.path() + "/missing.key";
  TcpDaemon no_key(DaemonDir("no-key"));
  nlohmann::json tls = Tls(false);
  tls["key_file"] = missing;
  ASSERT_EQ(no_key.Start({{"tls", tls}, {"tenants", Tenants()}}), 0);
  EXPECT_EQ(no_key.exit_code(), 2);
  EXPECT_TRUE(absl::StrContains(no_key.error(), "tls.key_file: " + missing + " cannot be read"))
      << no_key.error();
  TcpDaemon mismatched(DaemonDir("mismatched"));
  tls["key_file"] = certs_.server2.key;
  ASSERT_EQ(mismatched.Start({{"tls", tls}, {"tenants", Tenants()}}), 0);
  EXPECT_TRUE(absl::StrContains(mismatched.error(),
                                "does not match the certificate in " + certs_.server.cert))
      << mismatched.error();
}

TEST_F(TlsTest, ARotatedCertificateIsServedWithoutARestart) {
  const std::string live_cert = tmp_.path() + "/live.pem";
  const std::string live_key = tmp_.path() + "/live.key";
  auto install = [&](const TestCertificates::Pair& pair) {
    InstallPair(pair, live_cert, live_key);
  };
  install(certs_.server);
  TcpDaemon daemon(DaemonDir("d"));
  int port = daemon.Start(
      {{"tls", {{"cert_file", live_cert}, {"key_file", live_key}, {"reload_interval_seconds", 1}}},
       {"tenants", Tenants()}});
  ASSERT_GT(port, 0) << daemon.error();
  std::string peer;
  ASSERT_TRUE(ListRuns(Channel(port, nullptr), true, &peer).ok());
  EXPECT_EQ(peer, ReadFileOrEmpty(certs_.server.cert));

  install(certs_.server2);
  const std::string renewed = ReadFileOrEmpty(certs_.server2.cert);
  // Each attempt on a new channel: an open connection keeps the certificate it began with.
  EXPECT_TRUE(Eventually(
      "the renewed certificate to be served",
      [&] { return ListRuns(Channel(port, nullptr), true, &peer).ok() && peer == renewed; },
      absl::Seconds(15)))
      << "still served:\n"
      << peer;

  // A replacement that is not a certificate: refused, logged, the last good pair still served.
  std::ofstream(live_cert + ".new") << "-----BEGIN CERTIFICATE-----\nhalf written";
  std::filesystem::rename(live_cert + ".new", live_cert);
  ASSERT_TRUE(Eventually(
      "tls.reload_refused in the log",
      [&] { return absl::StrContains(daemon.error(), "tls.reload_refused"); }, absl::Seconds(15)))
      << daemon.error();
  EXPECT_TRUE(absl::StrContains(daemon.error(), live_cert + " holds no PEM certificate"))
      << daemon.error();
  // Every new connection, for a few of gRPC's own re-reads (each second), gets it.
  const absl::Time until = absl::Now() + absl::Seconds(3);
  int attempts = 0;
  while (absl::Now() < until) {
    grpc::Status st = ListRuns(Channel(port, nullptr), true, &peer);
    ASSERT_TRUE(st.ok()) << "attempt " << attempts << ": " << st.error_message();
    ASSERT_EQ(peer, renewed);
    ++attempts;
  }
}

TEST_F(TlsTest, TheCliSpeaksTlsAndSkipsAReplicaThatIsDown) {
  TcpDaemon daemon(DaemonDir("d"));
  int port = daemon.Start({{"tls", Tls(true)}});
  ASSERT_GT(port, 0) << daemon.error();
  // A port nobody listens on: bound, never listened, closed.
  int s = socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in sa{};
  sa.sin_family = AF_INET;
  sa.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  socklen_t len = sizeof(sa);
  ASSERT_EQ(bind(s, reinterpret_cast<sockaddr*>(&sa), len), 0);
  ASSERT_EQ(getsockname(s, reinterpret_cast<sockaddr*>(&sa), &len), 0);
  const int down = ntohs(sa.sin_port);
  close(s);

  const std::string tls = absl::StrCat("--tls-ca ", certs_.ca, " --tls-cert ", certs_.client.cert,
                                       " --tls-key ", certs_.client.key);
  std::string out;
  EXPECT_EQ(Cli(absl::StrCat("--addr tcp:127.0.0.1:", port, " ", tls, " runs"), &out), 0) << out;
  EXPECT_TRUE(absl::StrContains(out, "RUN")) << out;
  EXPECT_EQ(
      Cli(absl::StrCat("--addr tcp:127.0.0.1:", down, ",tcp:127.0.0.1:", port, " ", tls, " runs"),
          &out),
      0)
      << out;
  EXPECT_TRUE(absl::StrContains(out, "RUN")) << out;
  // The same through the environment.
  EXPECT_EQ(
      Cli("runs", &out,
          absl::StrCat("SANDGATE_TLS_CA=", certs_.ca, " SANDGATE_TLS_CERT=", certs_.client.cert,
                       " SANDGATE_TLS_KEY=", certs_.client.key, " SANDGATE_ADDR=127.0.0.1:", port)),
      0)
      << out;

  EXPECT_EQ(
      Cli(absl::StrCat("--addr tcp:127.0.0.1:", port, " --tls-ca ", certs_.ca, " runs"), &out), 2)
      << "no client certificate: " << out;
  // gRPC says only "Socket closed" or "handshake failed"; the CLI names the likely causes, in
  // one line of its own, without gRPC's log lines ("E1202 07:12:20.1 ... ssl_transport...").
  EXPECT_TRUE(absl::StrContains(out, "the TLS connection failed")) << out;
  EXPECT_TRUE(absl::StrContains(out, "--tls-cert and --tls-key")) << out;
  EXPECT_FALSE(std::regex_search(out, std::regex("(^|\n)[EWID][0-9]{4} "))) << out;
  EXPECT_EQ(std::count(out.begin(), out.end(), '\n'), 1) << out;
  // A CA that did not sign the daemon's certificate: the handshake fails in the CLI, which
  // gRPC would log itself.
  EXPECT_EQ(Cli(absl::StrCat("--addr tcp:127.0.0.1:", port, " --tls-ca ", certs_.stranger.cert,
                             " --tls-cert ", certs_.client.cert, " --tls-key ", certs_.client.key,
                             " runs"),
                &out),
            2);
  EXPECT_TRUE(absl::StrContains(out, "the TLS connection failed (certificate verify failed)"))
      << out;
  EXPECT_FALSE(std::regex_search(out, std::regex("(^|\n)[EWID][0-9]{4} "))) << out;
  EXPECT_EQ(std::count(out.begin(), out.end(), '\n'), 1) << out;
  EXPECT_EQ(Cli(absl::StrCat("--addr tcp:127.0.0.1:", port, " runs"), &out), 2) << out;
  EXPECT_TRUE(absl::StrContains(out, "if it serves TLS on this port, pass --tls-ca")) << out;
  EXPECT_EQ(Cli(absl::StrCat("--addr tcp:127.0.0.1:", port, " --tls-ca ", certs_.ca, " --tls-cert ",
                             certs_.client.cert, " runs"),
                &out),
            2);
  EXPECT_TRUE(absl::StrContains(out, "--tls-cert and --tls-key: set both")) << out;
  EXPECT_EQ(Cli(absl::StrCat("--addr unix:/tmp/x.sock --tls-ca ", certs_.ca, " runs"), &out), 2);
  EXPECT_TRUE(absl::StrContains(out, "TLS is for tcp: addresses")) << out;
}

TEST_F(TlsTest, ReplicasCallEachOtherWithMutualTlsFromTheSameSection) {
  TcpDaemon daemon(DaemonDir("d"));
  nlohmann::json tls = Tls(true);
  int port = daemon.Start({{"tls", tls}});
  ASSERT_GT(port, 0) << daemon.error();
  // Another replica's view of the same section: its own certificate is its client certificate.
  core::TlsConfig peer;
  peer.cert_file = certs_.server2.cert;
  peer.key_file = certs_.server2.key;
  peer.client_ca_file = certs_.ca;
  peer.require_client_cert = true;
  absl::StatusOr<std::shared_ptr<grpc::ChannelCredentials>> creds =
      server::PeerChannelCredentials(peer);
  ASSERT_TRUE(creds.ok()) << creds.status();
  grpc::Status st = ListRuns(grpc::CreateChannel(absl::StrCat("127.0.0.1:", port), *creds), false);
  EXPECT_TRUE(st.ok()) << st.error_message();
  peer.key_file = certs_.client.key;
  EXPECT_TRUE(absl::StrContains(server::PeerChannelCredentials(peer).status().message(),
                                "tls.key_file: " + certs_.client.key + " does not match"));
}

}  // namespace
}  // namespace sandgate::testing
