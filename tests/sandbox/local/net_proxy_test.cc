// The proxy's pure parts: host normalisation, allowlist matching, request parsing and the
// SSRF denylist. (The proxy serving real sandboxes is tested in tests/security.)
#include "sandbox/local/net_proxy.h"

#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace sandgate::sandbox::local {
namespace {

using ::testing::HasSubstr;

TEST(NetProxyTest, NormaliseHostLowercasesAndStripsOneTrailingDot) {
  EXPECT_EQ(*NormaliseHost("API.Example.COM."), "api.example.com");
  EXPECT_EQ(*NormaliseHost("[::1]"), "::1");
  EXPECT_EQ(*NormaliseHost("[2001:DB8::1]"), "2001:db8::1");
  EXPECT_EQ(*NormaliseHost("10.0.0.1"), "10.0.0.1");
  for (const char* bad : {"", ".", "a..b", "a b", "a\r\nb", "a%0d", "under_score", "-a.b", "a-.b",
                          "ü.example", "[10.0.0.1]", "a.b/c", "a:b"}) {
    EXPECT_FALSE(NormaliseHost(bad).ok()) << bad;
  }
  EXPECT_FALSE(NormaliseHost(std::string(64, 'a') + ".com").ok());
}

TEST(NetProxyTest, AllowlistMatchesExactNamesAndProperSuffixes) {
  auto list = NormaliseAllowlist({"Example.com.", "*.PyPI.org"});
  ASSERT_TRUE(list.ok()) << list.status();
  EXPECT_TRUE(HostAllowed(*list, "example.com"));
  EXPECT_FALSE(HostAllowed(*list, "www.example.com"));
  EXPECT_TRUE(HostAllowed(*list, "files.pypi.org"));
  EXPECT_TRUE(HostAllowed(*list, "a.b.pypi.org"));
  EXPECT_FALSE(HostAllowed(*list, "pypi.org"));
  EXPECT_FALSE(HostAllowed(*list, "evilpypi.org"));
  EXPECT_FALSE(HostAllowed(*list, "example.com.evil"));
  EXPECT_FALSE(NormaliseAllowlist({"*"}).ok());
  EXPECT_FALSE(NormaliseAllowlist({"a.com\n"}).ok());
  EXPECT_FALSE(NormaliseAllowlist({"*.*.com"}).ok());
}

TEST(NetProxyTest, ParsesConnectAndAbsoluteUriRequests) {
  auto c = ParseProxyRequest("CONNECT Files.PyPI.org:443 HTTP/1.1\r\nHost: x\r\n\r\n");
  ASSERT_TRUE(c.ok()) << c.status();
  EXPECT_TRUE(c->connect);
  EXPECT_EQ(c->host, "files.pypi.org");
  EXPECT_EQ(c->port, 443);
  c = ParseProxyRequest("CONNECT [2001:db8::1]:8443 HTTP/1.1\r\n\r\n");
  ASSERT_TRUE(c.ok()) << c.status();
  EXPECT_EQ(c->host, "2001:db8::1");
  EXPECT_EQ(c->port, 8443);

  auto g = ParseProxyRequest(
      "GET http://example.com/a/b?c=d#frag HTTP/1.1\r\nHost: evil\r\nProxy-Authorization: x\r\n"
      "Connection: keep-alive\r\nAccept: */*\r\n\r\n");
  ASSERT_TRUE(g.ok()) << g.status();
  EXPECT_FALSE(g->connect);
  EXPECT_EQ(g->port, 80);
  EXPECT_EQ(g->upstream_head,
            "GET /a/b?c=d HTTP/1.1\r\nHost: example.com\r\nAccept: */*\r\n"
            "Connection: close\r\n\r\n");
  g = ParseProxyRequest("POST http://example.com:8080 HTTP/1.0\r\n\r\n");
  ASSERT_TRUE(g.ok()) << g.status();
  EXPECT_EQ(g->upstream_head,
            "POST / HTTP/1.0\r\nHost: example.com:8080\r\nConnection: close\r\n\r\n");
}

TEST(NetProxyTest, RejectsMalformedAndInjectedRequests) {
  for (const char* head : {
           "CONNECT example.com:443 HTTP/1.1\r\n",             // no empty line
           "CONNECT example.com HTTP/1.1\r\n\r\n",             // no port
           "CONNECT example.com:0 HTTP/1.1\r\n\r\n",           // port 0
           "CONNECT example.com:99999 HTTP/1.1\r\n\r\n",       // port too large
           "CONNECT example.com:+443 HTTP/1.1\r\n\r\n",        // sign
           "CONNECT example.com:443 HTTP/2\r\n\r\n",           // version
           "CONNECT  example.com:443 HTTP/1.1\r\n\r\n",        // double space
           "CONNECT example.com:443\nX: y HTTP/1.1\r\n\r\n",   // bare LF
           "GET http://example.com/\rX HTTP/1.1\r\n\r\n",      // bare CR
           "GET https://example.com/ HTTP/1.1\r\n\r\n",        // TLS URL without CONNECT
           "GET /path HTTP/1.1\r\nHost: example.com\r\n\r\n",  // origin form
           "GET http://u:p@example.com/ HTTP/1.1\r\n\r\n",     // user info
           "GET http://example.com/ HTTP/1.1\r\nBad Header: x\r\n\r\n",
           "GET http://example.com/ HTTP/1.1\r\nX: \x01\r\n\r\n",
           "G(T http://example.com/ HTTP/1.1\r\n\r\n",
       }) {
    EXPECT_FALSE(ParseProxyRequest(head).ok()) << head;
  }
}

TEST(NetProxyTest, SsrfGuardRefusesEveryNonPublicRange) {
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
TEST(NetProxyTest, HostAddressGuardFailsClosed) {
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

TEST(NetProxyTest, CidrContains) {
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
