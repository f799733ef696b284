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

}  // namespace
}  // namespace sandgate::cli
