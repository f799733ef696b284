#include "common/address.h"

#include "absl/strings/match.h"
#include "gtest/gtest.h"

namespace sandgate {
namespace {

TEST(AddressTest, TheDaemonsPrintedFormAndPlainHostPortMeanTheSame) {
  absl::StatusOr<Address> tcp = ParseAddress("tcp:127.0.0.1:7443");
  absl::StatusOr<Address> plain = ParseAddress("127.0.0.1:7443");
  ASSERT_TRUE(tcp.ok()) << tcp.status();
  ASSERT_TRUE(plain.ok()) << plain.status();
  for (const Address& a : {*tcp, *plain}) {
    EXPECT_FALSE(a.unix_socket);
    EXPECT_EQ(a.GrpcTarget(), "127.0.0.1:7443");
    EXPECT_EQ(a.ToString(), "tcp:127.0.0.1:7443");
  }
}

TEST(AddressTest, UnixSocketsAndIpv6) {
  absl::StatusOr<Address> u = ParseAddress("unix:/run/sandgate/sandgated.sock");
  ASSERT_TRUE(u.ok());
  EXPECT_TRUE(u->unix_socket);
  EXPECT_EQ(u->GrpcTarget(), "unix:/run/sandgate/sandgated.sock");
  EXPECT_EQ(u->ToString(), "unix:/run/sandgate/sandgated.sock");
  absl::StatusOr<Address> v6 = ParseAddress("tcp:[::1]:0");
  ASSERT_TRUE(v6.ok());
  EXPECT_EQ(v6->GrpcTarget(), "[::1]:0");
  EXPECT_EQ(ParseAddress("localhost:80")->host, "localhost");
}

TEST(AddressTest, RefusalsSayWhatIsAccepted) {
  for (const char* bad : {"", "unix:", "tcp:", "tcp:host", "host:", ":80", "host:http",
                          "host:70000", "::1:80", "tcp:a/b:1"}) {
    absl::StatusOr<Address> a = ParseAddress(bad);
    ASSERT_FALSE(a.ok()) << bad;
    EXPECT_EQ(a.status().code(), absl::StatusCode::kInvalidArgument);
    EXPECT_TRUE(
        absl::StrContains(a.status().message(), "expected unix:PATH, tcp:HOST:PORT or HOST:PORT"))
        << a.status();
  }
}

}  // namespace
}  // namespace sandgate
