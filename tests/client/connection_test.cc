#include "client/connection.h"

#include "absl/strings/match.h"
#include "gtest/gtest.h"

namespace sandgate::cli {
namespace {

std::string Target(const std::string& text) {
  absl::StatusOr<std::vector<Address>> a = ParseAddresses(text);
  return a.ok() ? ChannelTarget(*a) : std::string(a.status().message());
}

TEST(ConnectionTest, OneAddressIsTheDaemonsOwnSyntax) {
  EXPECT_EQ(Target("unix:/run/s.sock"), "unix:/run/s.sock");
  EXPECT_EQ(Target("tcp:gateway.internal:7443"), "gateway.internal:7443");
  EXPECT_EQ(Target("127.0.0.1:7443"), "127.0.0.1:7443");
}

TEST(ConnectionTest, SeveralReplicasAreOneRoundRobinTarget) {
  EXPECT_EQ(Target("tcp:10.0.0.1:7443,10.0.0.2:7444"), "ipv4:10.0.0.1:7443,10.0.0.2:7444");
  EXPECT_EQ(Target("tcp:[::1]:7443, tcp:[fd00::2]:7443"), "ipv6:[::1]:7443,[fd00::2]:7443");
}

TEST(ConnectionTest, WhatCannotGoTogetherIsSaid) {
  for (std::string bad : {"tcp:a.internal:1,tcp:b.internal:1", "unix:/s.sock,tcp:10.0.0.1:1",
                          "tcp:10.0.0.1:1,tcp:[::1]:1"}) {
    EXPECT_TRUE(absl::StrContains(Target(bad), "several addresses must all be tcp: IPv4"))
        << bad << ": " << Target(bad);
  }
  EXPECT_TRUE(absl::StrContains(Target("tcp:10.0.0.1:1,tcp:10.0.0.2"), "got 'tcp:10.0.0.2'"))
      << Target("tcp:10.0.0.1:1,tcp:10.0.0.2");
}

TEST(ConnectionTest, TlsFilesAreForTcpAndCheckedBeforeAnyCall) {
  absl::StatusOr<std::vector<Address>> unix_socket = ParseAddresses("unix:/run/s.sock");
  ASSERT_TRUE(unix_socket.ok());
  auto refused = OpenChannel(*unix_socket, {"", "", "/etc/ssl/ca.pem"});
  EXPECT_TRUE(absl::StrContains(refused.status().message(), "TLS is for tcp: addresses"));
  absl::StatusOr<std::vector<Address>> tcp = ParseAddresses("tcp:127.0.0.1:1");
  ASSERT_TRUE(tcp.ok());
  auto missing = OpenChannel(*tcp, {"", "", "/nonexistent/ca.pem"});
  EXPECT_TRUE(
      absl::StrContains(missing.status().message(), "--tls-ca: /nonexistent/ca.pem cannot be read"))
      << missing.status();
  EXPECT_TRUE(OpenChannel(*tcp, {}).ok());
}

TEST(ConnectionTest, ARefusedConnectionNamesItsLikelyCause) {
  // What gRPC says when the TLS handshake fails, with nothing about why.
  absl::Status closed = absl::UnavailableError("Socket closed");
  std::string tls(ExplainConnectionFailure(closed, ChannelKind::kTls).message());
  EXPECT_TRUE(absl::StartsWith(tls, "Socket closed; the TLS connection failed")) << tls;
  for (const char* cause : {"--tls-ca", "certificate", "plaintext", "--tls-cert and --tls-key"}) {
    EXPECT_TRUE(absl::StrContains(tls, cause)) << cause << " in " << tls;
  }
  std::string seen(
      ExplainConnectionFailure(closed, ChannelKind::kTls, "certificate verify failed").message());
  EXPECT_TRUE(absl::StartsWith(
      seen, "Socket closed; the TLS connection failed (certificate verify failed): check"))
      << seen;
  std::string plain(ExplainConnectionFailure(closed, ChannelKind::kTcp).message());
  EXPECT_TRUE(absl::StrContains(plain, "if it serves TLS on this port, pass --tls-ca")) << plain;
  EXPECT_EQ(ExplainConnectionFailure(closed, ChannelKind::kUnix), closed);
  // Nothing listening, or another failure, is not a TLS question.
  absl::Status refused = absl::UnavailableError(
      "failed to connect to all addresses; last error: UNKNOWN: ipv4:127.0.0.1:1: Connection "
      "refused");
  EXPECT_EQ(ExplainConnectionFailure(refused, ChannelKind::kTls), refused);
  absl::Status denied = absl::PermissionDeniedError("operator role is required");
  EXPECT_EQ(ExplainConnectionFailure(denied, ChannelKind::kTls), denied);
}

TEST(ConnectionTest, OpenChannelSaysHowItReachesTheDaemon) {
  absl::StatusOr<std::vector<Address>> tcp = ParseAddresses("tcp:127.0.0.1:1");
  ASSERT_TRUE(tcp.ok());
  ASSERT_TRUE(OpenChannel(*tcp, {}).ok());
  EXPECT_EQ(LastChannelKind(), ChannelKind::kTcp);
  absl::StatusOr<std::vector<Address>> unix_socket = ParseAddresses("unix:/run/s.sock");
  ASSERT_TRUE(unix_socket.ok());
  ASSERT_TRUE(OpenChannel(*unix_socket, {}).ok());
  EXPECT_EQ(LastChannelKind(), ChannelKind::kUnix);
}

}  // namespace
}  // namespace sandgate::cli
