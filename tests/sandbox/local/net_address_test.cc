// The proxy's judgement of addresses: the SSRF denylist, the host's own addresses, CIDR
// ranges. (The proxy serving real sandboxes is tested in tests/security.)
#include "sandbox/local/net_address.h"

#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace sandgate::sandbox::local {
namespace {

using ::testing::HasSubstr;

TEST(NetAddressTest, SsrfGuardRefusesEveryNonPublicRange) {
  for (const char* ip : {"0.0.0.0",
                         "10.1.2.3",
                         "100.64.0.1",
                         "127.0.0.1",
                         "127.255.255.254",
                         "169.254.169.254",
                         "172.16.0.1",
                         "172.31.255.255",
                         "192.0.0.8",
                         "192.0.2.1",
                         "192.168.1.1",
                         "198.18.0.1",
                         "198.51.100.2",
                         "203.0.113.9",
                         "224.0.0.1",
                         "239.255.255.250",
                         "255.255.255.255",
                         "::",
                         "::1",
                         "fe80::1",
                         "fd00::1",
                         "fc00::1",
                         "ff02::1",
                         "::ffff:127.0.0.1",
                         "::ffff:10.0.0.1",
                         "64:ff9b::a9fe:a9fe",
                         "2002:c0a8:0101::1",
                         "2001:db8::1",
                         "::10.0.0.1",
                         "100::1"}) {
    auto a = IpAddress::Parse(ip);
    ASSERT_TRUE(a.ok()) << ip;
    EXPECT_NE(NonPublicReason(*a), "") << ip;
  }
  for (const char* ip : {"1.1.1.1", "8.8.8.8", "172.32.0.1", "100.128.0.1", "2606:4700::1111",
                         "::ffff:8.8.8.8", "64:ff9b::808:808"}) {
    EXPECT_EQ(NonPublicReason(*IpAddress::Parse(ip)), "") << ip;
  }
  EXPECT_THAT(NonPublicReason(*IpAddress::Parse("169.254.169.254")), HasSubstr("link-local"));
  EXPECT_THAT(NonPublicReason(*IpAddress::Parse("::ffff:192.168.0.1")), HasSubstr("RFC 1918"));
}

// Issue 9, item 11: the host's own addresses are refused, and when they cannot be listed the
// guard refuses every address instead of letting all of them through.
TEST(NetAddressTest, HostAddressGuardFailsClosed) {
  auto host = ListHostAddresses();
  ASSERT_TRUE(host.ok()) << host.status();
  const IpAddress loopback = *IpAddress::Parse("127.0.0.1");
  const IpAddress public_ip = *IpAddress::Parse("8.8.8.8");
  EXPECT_EQ(HostAddressReason(loopback, host), "an address of the daemon's host");
  EXPECT_EQ(HostAddressReason(public_ip, host), "");
  // Same address bytes, other family: not a match.
  EXPECT_EQ(HostAddressReason(*IpAddress::Parse("7f00:1::"), host), "");
  const absl::StatusOr<std::vector<IpAddress>> failed =
      absl::UnavailableError("getifaddrs: Cannot allocate memory");
  for (const IpAddress& ip : {loopback, public_ip, *IpAddress::Parse("2606:4700::1111")}) {
    std::string why = HostAddressReason(ip, failed);
    EXPECT_THAT(why, HasSubstr("could not be listed")) << ip.ToString();
    EXPECT_THAT(why, HasSubstr("getifaddrs: Cannot allocate memory")) << ip.ToString();
  }
  EXPECT_NE(HostAddressReason(public_ip, std::vector<IpAddress>{public_ip}), "");
}

TEST(NetAddressTest, CidrContains) {
  auto c = Cidr::Parse("198.51.100.0/24");
  ASSERT_TRUE(c.ok());
  EXPECT_TRUE(c->Contains(*IpAddress::Parse("198.51.100.200")));
  EXPECT_FALSE(c->Contains(*IpAddress::Parse("198.51.101.1")));
  EXPECT_FALSE(c->Contains(*IpAddress::Parse("::ffff:198.51.100.1")));
  EXPECT_TRUE(Cidr::Parse("fc00::/7")->Contains(*IpAddress::Parse("fdff::1")));
  EXPECT_FALSE(Cidr::Parse("10.0.0.0/33").ok());
  EXPECT_FALSE(Cidr::Parse("nonsense/8").ok());
}

}  // namespace
}  // namespace sandgate::sandbox::local
