// The proxy's reading of requests: host normalisation, allowlist matching, request parsing.
// (The proxy serving real sandboxes is tested in tests/security.)
#include "sandbox/local/proxy_request.h"

#include "gtest/gtest.h"

namespace sandgate::sandbox::local {
namespace {

TEST(ProxyRequestTest, NormaliseHostLowercasesAndStripsOneTrailingDot) {
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

TEST(ProxyRequestTest, AllowlistMatchesExactNamesAndProperSuffixes) {
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

TEST(ProxyRequestTest, ParsesConnectAndAbsoluteUriRequests) {
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

TEST(ProxyRequestTest, RejectsMalformedAndInjectedRequests) {
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

}  // namespace
}  // namespace sandgate::sandbox::local
