// The HTTP port's request entry (server/http_request.h): decoding, the one check of every
// text a request carries, framing, and routing.
#include "server/http_request.h"

#include "absl/strings/match.h"
#include "gtest/gtest.h"
#include "nlohmann/json.hpp"

namespace sandgate::server {
namespace {

std::vector<HttpRoute> Routes() {
  auto none = [](const HttpRequest&, std::shared_ptr<HttpExchange>) {};
  return {{"GET", "/v1/runs", none},
          {"GET", "/v1/runs/{run_id}", none},
          {"POST", "/v1/runs/{run_id}:cancel", none},
          {"GET", "/v1/sessions/{session_id}/files", none},
          {"GET", "/v1/sessions/{session_id}/files/{path*}", none}};
}

struct Routed {
  const HttpRoute* route = nullptr;
  HttpRequest request;
  std::optional<HttpResponse> refused;
  nlohmann::json error;  // the refusal's body
};

Routed Route(RawHttpRequest raw) {
  static const std::vector<HttpRoute> routes = Routes();
  Routed r;
  r.route = RouteRequest(routes, raw, &r.request, &r.refused);
  EXPECT_NE(r.route == nullptr, !r.refused.has_value());
  if (r.refused) {
    r.error = nlohmann::json::parse(r.refused->body, nullptr, false);
    EXPECT_TRUE(r.error.is_object()) << r.refused->body;
  }
  return r;
}

std::string Message(const Routed& r) {
  return r.error.is_object() ? r.error["message"].get<std::string>() : "(no error)";
}

TEST(HttpRequestTest, PercentDecodingKeepsWhatIsNotAnEscape) {
  EXPECT_EQ(PercentDecode("a%2Fb%41"), "a/bA");
  EXPECT_EQ(PercentDecode("100%"), "100%");
  EXPECT_EQ(PercentDecode("%zz%4"), "%zz%4");
  EXPECT_EQ(PercentDecode("x%00y"), std::string("x\0y", 3));
}

TEST(HttpRequestTest, TextThatCannotBeAStringFieldIsRefusedNamingTheField) {
  EXPECT_TRUE(CheckRequestText("dir", "caf\xC3\xA9/ok").ok());
  absl::Status st = CheckRequestText("dir", "ab\x80");
  EXPECT_EQ(st.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(st.message(), "dir: not valid UTF-8 (byte 0x80 at offset 2)");
  st = CheckRequestText("path", std::string("x\0.txt", 6));
  EXPECT_EQ(st.message(), "path: contains a NUL byte");
  EXPECT_FALSE(CheckRequestText("p", "\xED\xA0\x80").ok()) << "a surrogate";
  EXPECT_FALSE(CheckRequestText("p", "\xC0\xAF").ok()) << "an overlong '/'";
}

// Issue 20's requests, each a 400 naming what was wrong instead of reaching a handler.
TEST(HttpRequestTest, EveryPartOfARequestIsCheckedOnceWhereItEnters) {
  struct Case {
    RawHttpRequest raw;
    std::string message;
  };
  const std::vector<Case> cases = {
      {{"GET", "/v1/runs/%ff", {}, {}}, "run_id: not valid UTF-8 (byte 0xFF at offset 0)"},
      {{"GET", "/v1/runs", {{"page_token", "%ff"}}, {}}, "page_token: not valid UTF-8"},
      {{"GET", "/v1/runs", {{"%ff", "1"}}, {}}, "query parameter name: not valid UTF-8"},
      {{"GET", "/v1/sessions/s1/files", {{"dir", "%80"}}, {}}, "dir: not valid UTF-8"},
      {{"GET", "/v1/sessions/s1/files/%ff%fe", {}, {}}, "path: not valid UTF-8"},
      {{"GET", "/v1/sessions/s1/files/x%00.txt", {}, {}}, "path: contains a NUL byte"},
      {{"POST", "/v1/runs/a%00b:cancel", {}, {}}, "run_id: contains a NUL byte"},
      {{"GET", "/nowhere/%ff", {}, {}}, "path: not valid UTF-8"},
      {{"GET", "/v1/runs", {}, {{"X-Trace", "caf\xE9"}}}, "header X-Trace: not valid UTF-8"},
      {{"GET", "/v1/runs", {}, {{"X-\xFF", "1"}}}, "header name: not valid UTF-8"},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.raw.path);
    Routed r = Route(c.raw);
    ASSERT_TRUE(r.refused);
    EXPECT_EQ(r.refused->status, 400u);
    EXPECT_EQ(r.error["status"], "INVALID_ARGUMENT");
    EXPECT_TRUE(absl::StartsWith(Message(r), c.message)) << Message(r);
  }
}

TEST(HttpRequestTest, ARequestIsDecodedAndRouted) {
  Routed r = Route({"GET",
                    "/v1/sessions/s1/files/out/caf%C3%A9%2Fx.md",
                    {{"max%5Fbytes", "10"}, {"q", "a b"}},
                    {{"Authorization", "Bearer t"}}});
  ASSERT_NE(r.route, nullptr) << Message(r);
  EXPECT_EQ(r.route->pattern, "/v1/sessions/{session_id}/files/{path*}");
  EXPECT_EQ(r.request.params["session_id"], "s1");
  EXPECT_EQ(r.request.params["path"], "out/caf\xC3\xA9/x.md");
  EXPECT_EQ(r.request.query["max_bytes"], "10");
  EXPECT_EQ(r.request.query["q"], "a b");
  EXPECT_EQ(r.request.Header("authorization"), "Bearer t");
}

TEST(HttpRequestTest, NoSuchPathOrMethodIsStillJsonWhateverThePathHolds) {
  Routed r = Route({"GET", "/v2/%22x%22\\", {}, {}});
  ASSERT_TRUE(r.refused);
  EXPECT_EQ(r.refused->status, 404u);
  EXPECT_EQ(Message(r), "no such path: /v2/\"x\"\\");
  r = Route({"DELETE", "/v1/runs/r1", {}, {}});
  ASSERT_TRUE(r.refused);
  EXPECT_EQ(r.refused->status, 405u);
  EXPECT_EQ(Message(r), "DELETE is not allowed on /v1/runs/r1");
}

// RFC 9112 section 6.3: a body whose length is ambiguous ends the connection.
TEST(HttpRequestTest, AmbiguousFramingIsRefusedAndClosesTheConnection) {
  for (const HttpHeaders& headers :
       {HttpHeaders{{"Content-Length", "2"}, {"content-length", "40"}},
        HttpHeaders{{"Content-Length", "2"}, {"Content-Length", "2"}},
        HttpHeaders{{"Content-Length", "7"}, {"Transfer-Encoding", "chunked"}}}) {
    Routed r = Route({"GET", "/v1/runs", {}, headers});
    ASSERT_TRUE(r.refused);
    EXPECT_EQ(r.refused->status, 400u);
    EXPECT_TRUE(absl::StrContains(Message(r), "ambiguous")) << Message(r);
    bool close = false;
    for (const auto& [name, value] : r.refused->headers) {
      close = close || (name == "Connection" && value == "close");
    }
    EXPECT_TRUE(close);
  }
  EXPECT_NE(Route({"GET", "/v1/runs", {}, {{"Content-Length", "2"}}}).route, nullptr);
  EXPECT_NE(Route({"GET", "/v1/runs", {}, {{"Transfer-Encoding", "chunked"}}}).route, nullptr);
}

}  // namespace
}  // namespace sandgate::server
