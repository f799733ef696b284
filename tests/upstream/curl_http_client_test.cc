#include "upstream/curl_http_client.h"

#include <netinet/in.h>
#include <sys/socket.h>

#include <atomic>
#include <map>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_split.h"
#include "absl/synchronization/notification.h"
#include "absl/time/clock.h"
#include "common/log.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/upstream/loopback_http_server.h"

namespace sandgate::upstream {
namespace {

using ::sandgate::upstream::testing::LoopbackHttpServer;
using ::sandgate::upstream::testing::ReceivedRequest;
using ::testing::HasSubstr;
using ::testing::Not;

HttpRequest Request(const LoopbackHttpServer& server, absl::string_view path,
                    absl::string_view method = "GET") {
  HttpRequest r;
  r.method = std::string(method);
  r.url = server.Url(path);
  r.total_timeout = absl::Seconds(20);
  return r;
}

TEST(CurlHttpClientTest, ReturnsStatusHeadersAndBody) {
  LoopbackHttpServer server([](const ReceivedRequest&, int fd, int) {
    LoopbackHttpServer::WriteAll(
        fd, LoopbackHttpServer::Response(201, "hello body",
                                         {{"X-Request-Id", "req_123"}, {"X-Other", "a: b"}}));
  });
  CurlHttpClient client;
  HttpRequest req = Request(server, "/v1/things?limit=2");
  req.headers.Add("X-Test", "yes");
  absl::StatusOr<HttpResponse> resp = client.Send(req, nullptr);
  ASSERT_TRUE(resp.ok()) << resp.status();
  EXPECT_EQ(resp->status, 201);
  EXPECT_EQ(resp->body, "hello body");
  EXPECT_EQ(resp->headers.Get("x-request-id"), "req_123");
  EXPECT_EQ(resp->headers.Get("X-REQUEST-ID"), "req_123");
  EXPECT_EQ(resp->headers.Get("x-other"), "a: b");
  EXPECT_EQ(resp->headers.Find("x-missing"), nullptr);
  ASSERT_EQ(server.requests().size(), 1u);
  const ReceivedRequest got = server.requests()[0];
  EXPECT_EQ(got.method, "GET");
  EXPECT_EQ(got.target, "/v1/things?limit=2");
  EXPECT_EQ(got.headers.Get("x-test"), "yes");
  EXPECT_EQ(got.headers.Find("Expect"), nullptr);
}

TEST(CurlHttpClientTest, SendsMethodBodyAndHeaders) {
  LoopbackHttpServer server([](const ReceivedRequest&, int fd, int) {
    LoopbackHttpServer::WriteAll(fd, LoopbackHttpServer::Response(200, "{}"));
  });
  CurlHttpClient client;
  for (const char* method : {"POST", "DELETE", "PUT"}) {
    HttpRequest req = Request(server, "/v1/x", method);
    req.headers.Add("Content-Type", "application/json");
    req.body = std::string("{\"a\":1,\"big\":\"") + std::string(5000, 'z') + "\"}";
    ASSERT_TRUE(client.Send(req, nullptr).ok()) << method;
  }
  HttpRequest del = Request(server, "/v1/y", "DELETE");
  ASSERT_TRUE(client.Send(del, nullptr).ok());
  std::vector<ReceivedRequest> got = server.requests();
  ASSERT_EQ(got.size(), 4u);
  for (int i = 0; i < 3; ++i) {
    EXPECT_EQ(got[i].headers.Get("content-type"), "application/json");
    EXPECT_EQ(got[i].body.size(), 5000u + 16);
  }
  EXPECT_EQ(got[0].method, "POST");
  EXPECT_EQ(got[1].method, "DELETE");
  EXPECT_EQ(got[2].method, "PUT");
  EXPECT_EQ(got[3].method, "DELETE");
  EXPECT_EQ(got[3].body, "");
}

TEST(CurlHttpClientTest, ErrorStatusIsAResponseNotAFailure) {
  LoopbackHttpServer server([](const ReceivedRequest&, int fd, int) {
    LoopbackHttpServer::WriteAll(
        fd, LoopbackHttpServer::Response(503, "{\"error\":{\"message\":\"busy\"}}"));
  });
  CurlHttpClient client;
  absl::StatusOr<HttpResponse> resp = client.Send(Request(server, "/"), nullptr);
  ASSERT_TRUE(resp.ok()) << resp.status();
  EXPECT_EQ(resp->status, 503);
  EXPECT_THAT(resp->body, HasSubstr("busy"));
}

TEST(CurlHttpClientTest, TotalTimeoutIsDeadlineExceeded) {
  LoopbackHttpServer server([](const ReceivedRequest&, int fd, int stop_fd) {
    LoopbackHttpServer::WriteAll(fd, "HTTP/1.1 200 OK\r\nContent-Length: 100\r\n\r\npart");
    LoopbackHttpServer::WaitForPeerClose(fd, stop_fd);
  });
  CurlHttpClient client;
  HttpRequest req = Request(server, "/slow");
  req.total_timeout = absl::Milliseconds(300);
  const absl::Time start = absl::Now();
  absl::StatusOr<HttpResponse> resp = client.Send(req, nullptr);
  EXPECT_EQ(resp.status().code(), absl::StatusCode::kDeadlineExceeded) << resp.status();
  EXPECT_LT(absl::Now() - start, absl::Seconds(5));
}

TEST(CurlHttpClientTest, CancelMidTransferReturnsCancelledQuickly) {
  absl::Notification first_chunk_seen;
  LoopbackHttpServer server([](const ReceivedRequest&, int fd, int stop_fd) {
    LoopbackHttpServer::WriteAll(fd, "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n" +
                                         LoopbackHttpServer::Chunk("data: 1\n\n"));
    LoopbackHttpServer::WaitForPeerClose(fd, stop_fd);
  });
  CurlHttpClient client;
  CancelToken cancel;
  absl::Time cancelled_at;
  std::thread canceller([&] {
    first_chunk_seen.WaitForNotificationWithTimeout(absl::Seconds(20));
    cancelled_at = absl::Now();
    cancel.Cancel("caller went away");
  });
  HttpRequest req = Request(server, "/stream", "POST");
  req.on_body_chunk = [&](absl::string_view) {
    if (!first_chunk_seen.HasBeenNotified()) first_chunk_seen.Notify();
    return true;
  };
  absl::StatusOr<HttpResponse> resp = client.Send(req, &cancel);
  const absl::Time returned_at = absl::Now();
  canceller.join();
  EXPECT_EQ(resp.status().code(), absl::StatusCode::kCancelled) << resp.status();
  EXPECT_THAT(resp.status().message(), HasSubstr("caller went away"));
  // Woken by the token's eventfd, not by libcurl's once-a-second progress tick.
  EXPECT_LT(returned_at - cancelled_at, absl::Milliseconds(800));
}

TEST(CurlHttpClientTest, CancelWhileWaitingForHeadersReturnsCancelled) {
  absl::Notification request_arrived;
  LoopbackHttpServer server([&](const ReceivedRequest&, int fd, int stop_fd) {
    request_arrived.Notify();
    LoopbackHttpServer::WaitForPeerClose(fd, stop_fd);
  });
  CurlHttpClient client;
  CancelToken cancel;
  std::thread canceller([&] {
    request_arrived.WaitForNotificationWithTimeout(absl::Seconds(20));
    cancel.Cancel("shutdown");
  });
  const absl::Time start = absl::Now();
  absl::StatusOr<HttpResponse> resp = client.Send(Request(server, "/hang"), &cancel);
  canceller.join();
  EXPECT_EQ(resp.status().code(), absl::StatusCode::kCancelled) << resp.status();
  EXPECT_LT(absl::Now() - start, absl::Seconds(5));
}

TEST(CurlHttpClientTest, AlreadyCancelledTokenSendsNothing) {
  LoopbackHttpServer server([](const ReceivedRequest&, int fd, int) {
    LoopbackHttpServer::WriteAll(fd, LoopbackHttpServer::Response(200, ""));
  });
  CurlHttpClient client;
  CancelToken cancel;
  cancel.Cancel("before");
  EXPECT_EQ(client.Send(Request(server, "/"), &cancel).status().code(),
            absl::StatusCode::kCancelled);
  EXPECT_TRUE(server.requests().empty());
}

TEST(CurlHttpClientTest, StreamingCallbackSeesChunksBeforeTheEnd) {
  absl::Notification first_chunk_seen;
  std::atomic<bool> seen_before_second{false};
  LoopbackHttpServer server([&](const ReceivedRequest&, int fd, int) {
    LoopbackHttpServer::WriteAll(
        fd,
        "HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\nTransfer-Encoding: "
        "chunked\r\nConnection: close\r\n\r\n" +
            LoopbackHttpServer::Chunk("event: a\ndata: 1\n\n"));
    // The second chunk is only written once the client has seen the first one.
    seen_before_second = first_chunk_seen.WaitForNotificationWithTimeout(absl::Seconds(20));
    LoopbackHttpServer::WriteAll(fd,
                                 LoopbackHttpServer::Chunk("event: b\ndata: 2\n\n") + "0\r\n\r\n");
  });
  CurlHttpClient client;
  HttpRequest req = Request(server, "/v1/responses", "POST");
  std::string received;
  int calls = 0;
  req.on_body_chunk = [&](absl::string_view chunk) {
    ++calls;
    received.append(chunk.data(), chunk.size());
    if (!first_chunk_seen.HasBeenNotified()) first_chunk_seen.Notify();
    return true;
  };
  absl::StatusOr<HttpResponse> resp = client.Send(req, nullptr);
  ASSERT_TRUE(resp.ok()) << resp.status();
  EXPECT_TRUE(seen_before_second);
  EXPECT_GE(calls, 2);
  EXPECT_EQ(received, "event: a\ndata: 1\n\nevent: b\ndata: 2\n\n");
  EXPECT_EQ(resp->body, "");
  EXPECT_EQ(resp->headers.Get("content-type"), "text/event-stream");
}

TEST(CurlHttpClientTest, ErrorBodyIsCollectedEvenWhenStreaming) {
  LoopbackHttpServer server([](const ReceivedRequest&, int fd, int) {
    LoopbackHttpServer::WriteAll(
        fd, LoopbackHttpServer::Response(429, "{\"error\":{\"message\":\"slow down\"}}"));
  });
  CurlHttpClient client;
  HttpRequest req = Request(server, "/", "POST");
  bool called = false;
  req.on_body_chunk = [&](absl::string_view) {
    called = true;
    return true;
  };
  absl::StatusOr<HttpResponse> resp = client.Send(req, nullptr);
  ASSERT_TRUE(resp.ok());
  EXPECT_EQ(resp->status, 429);
  EXPECT_FALSE(called);
  EXPECT_THAT(resp->body, HasSubstr("slow down"));
}

TEST(CurlHttpClientTest, CallbackReturningFalseAborts) {
  LoopbackHttpServer server([](const ReceivedRequest&, int fd, int) {
    LoopbackHttpServer::WriteAll(fd, LoopbackHttpServer::Response(200, std::string(1000, 'x')));
  });
  CurlHttpClient client;
  HttpRequest req = Request(server, "/");
  req.on_body_chunk = [](absl::string_view) { return false; };
  EXPECT_EQ(client.Send(req, nullptr).status().code(), absl::StatusCode::kAborted);
}

TEST(CurlHttpClientTest, ConnectionDroppedMidBodyIsUnavailable) {
  LoopbackHttpServer server([](const ReceivedRequest&, int fd, int) {
    LoopbackHttpServer::WriteAll(fd, "HTTP/1.1 200 OK\r\nContent-Length: 100\r\n\r\nonly ten b");
  });
  CurlHttpClient client;
  absl::StatusOr<HttpResponse> resp = client.Send(Request(server, "/"), nullptr);
  EXPECT_EQ(resp.status().code(), absl::StatusCode::kUnavailable) << resp.status();
  EXPECT_THAT(resp.status().message(), HasSubstr("GET http://127.0.0.1:"));
}

// Issue 10 item 5: a cut download says what it was and how much of it came.
TEST(CurlHttpClientTest, ACutDownloadSaysHowMuchCame) {
  LoopbackHttpServer server([](const ReceivedRequest&, int fd, int) {
    LoopbackHttpServer::WriteAll(fd, "HTTP/1.1 200 OK\r\nContent-Length: 100\r\n\r\nonly ten b");
  });
  CurlHttpClient client;
  for (bool streaming : {false, true}) {
    HttpRequest req = Request(server, "/file");
    std::string seen;
    if (streaming) {
      req.on_body_chunk = [&seen](absl::string_view c) {
        seen.append(c.data(), c.size());
        return true;
      };
    }
    absl::StatusOr<HttpResponse> resp = client.Send(req, nullptr);
    EXPECT_EQ(resp.status().code(), absl::StatusCode::kUnavailable) << resp.status();
    EXPECT_THAT(resp.status().message(), HasSubstr(absl::StrCat("download of ", server.Url("/file"),
                                                                " cut after 10 of 100 bytes")));
  }
}

TEST(CurlHttpClientTest, ConnectionRefusedIsUnavailableWithCurlsMessage) {
  // A port that was just free and has nobody listening.
  int fd = socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr));
  socklen_t len = sizeof(addr);
  getsockname(fd, reinterpret_cast<sockaddr*>(&addr), &len);
  close(fd);
  CurlHttpClient client;
  HttpRequest req;
  req.url = "http://127.0.0.1:" + std::to_string(ntohs(addr.sin_port)) + "/v1/files";
  absl::StatusOr<HttpResponse> resp = client.Send(req, nullptr);
  EXPECT_EQ(resp.status().code(), absl::StatusCode::kUnavailable);
  EXPECT_THAT(resp.status().message(), HasSubstr("onnect"));  // "Failed to connect ..."
}

TEST(CurlHttpClientTest, MalformedInputIsInvalidArgumentAndNeverEchoesHeaderValues) {
  CurlHttpClient client;
  HttpRequest req;
  req.url = "http://127.0.0.1:1/";
  req.headers.Add("Authorization", "Bearer sk-secret\r\nX-Injected: 1");
  absl::StatusOr<HttpResponse> resp = client.Send(req, nullptr);
  EXPECT_EQ(resp.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(resp.status().message(), HasSubstr("Authorization"));
  EXPECT_THAT(resp.status().message(), Not(HasSubstr("sk-secret")));
  HttpRequest bad_url;
  bad_url.url = "ftp://127.0.0.1/";
  EXPECT_EQ(client.Send(bad_url, nullptr).status().code(), absl::StatusCode::kInvalidArgument);
}

// Splits a multipart/form-data body into {name -> (part headers, content)}.
std::map<std::string, std::pair<std::string, std::string>> ParseMultipart(
    const std::string& body, const std::string& boundary) {
  std::map<std::string, std::pair<std::string, std::string>> parts;
  const std::string delimiter = "--" + boundary;
  size_t pos = body.find(delimiter);
  while (pos != std::string::npos) {
    pos += delimiter.size();
    if (body.compare(pos, 2, "--") == 0) break;
    pos += 2;  // CRLF after the delimiter
    const size_t headers_end = body.find("\r\n\r\n", pos);
    const size_t next = body.find("\r\n" + delimiter, headers_end);
    if (headers_end == std::string::npos || next == std::string::npos) break;
    const std::string headers = body.substr(pos, headers_end - pos);
    const std::string content = body.substr(headers_end + 4, next - headers_end - 4);
    const size_t name_at = headers.find("name=\"") + 6;
    parts[headers.substr(name_at, headers.find('"', name_at) - name_at)] = {headers, content};
    pos = next + 2;
  }
  return parts;
}

TEST(CurlHttpClientTest, MultipartBodyAsTheServerSeesIt) {
  LoopbackHttpServer server([](const ReceivedRequest&, int fd, int) {
    LoopbackHttpServer::WriteAll(fd, LoopbackHttpServer::Response(200, "{}"));
  });
  CurlHttpClient client;
  HttpRequest req = Request(server, "/v1/files", "POST");
  const std::string binary("year,revenue\r\n2023,1\0\xff end", 26);
  req.multipart.push_back({"purpose", "", "", "user_data"});
  req.multipart.push_back({"file", "input.csv", "text/csv", binary});
  ASSERT_TRUE(client.Send(req, nullptr).ok());
  ASSERT_EQ(server.requests().size(), 1u);
  const ReceivedRequest got = server.requests()[0];
  EXPECT_EQ(got.method, "POST");
  const std::string content_type = got.headers.Get("content-type");
  ASSERT_TRUE(absl::StartsWith(content_type, "multipart/form-data; boundary=")) << content_type;
  const std::string boundary = content_type.substr(content_type.find('=') + 1);
  auto parts = ParseMultipart(got.body, boundary);
  ASSERT_EQ(parts.size(), 2u) << got.body;
  EXPECT_THAT(parts["purpose"].first,
              HasSubstr("Content-Disposition: form-data; name=\"purpose\""));
  EXPECT_THAT(parts["purpose"].first, Not(HasSubstr("filename")));
  EXPECT_EQ(parts["purpose"].second, "user_data");
  EXPECT_THAT(parts["file"].first,
              HasSubstr("Content-Disposition: form-data; name=\"file\"; filename=\"input.csv\""));
  EXPECT_THAT(parts["file"].first, HasSubstr("Content-Type: text/csv"));
  EXPECT_EQ(parts["file"].second, binary);
}

TEST(CurlHttpClientTest, ConcurrentCallsFromManyThreads) {
  LoopbackHttpServer server([](const ReceivedRequest& r, int fd, int) {
    LoopbackHttpServer::WriteAll(fd, LoopbackHttpServer::Response(200, r.target));
  });
  CurlHttpClient client;
  std::atomic<int> ok{0};
  std::vector<std::thread> threads;
  for (int t = 0; t < 4; ++t) {
    threads.emplace_back([&, t] {
      for (int i = 0; i < 5; ++i) {
        const std::string path = "/t" + std::to_string(t) + "/" + std::to_string(i);
        absl::StatusOr<HttpResponse> r = client.Send(Request(server, path), nullptr);
        if (r.ok() && r->body == path) ++ok;
      }
    });
  }
  for (auto& th : threads) th.join();
  EXPECT_EQ(ok.load(), 20);
}

TEST(CurlHttpClientTest, DebugLogRedactsTheAuthorizationHeader) {
  LoopbackHttpServer server([](const ReceivedRequest&, int fd, int) {
    LoopbackHttpServer::WriteAll(fd, LoopbackHttpServer::Response(200, "{}"));
  });
  CurlHttpClient client;
  HttpRequest req = Request(server, "/v1/files");
  req.headers.Add("Authorization", "Bearer sk-live-DO-NOT-LOG");
  log::SetMinLevel(log::Level::kDebug);
  ::testing::internal::CaptureStderr();
  ASSERT_TRUE(client.Send(req, nullptr).ok());
  const std::string logged = ::testing::internal::GetCapturedStderr();
  log::SetMinLevel(log::Level::kInfo);
  EXPECT_THAT(logged, HasSubstr("upstream.http"));
  EXPECT_THAT(logged, HasSubstr("[REDACTED]"));
  EXPECT_THAT(logged, Not(HasSubstr("sk-live-DO-NOT-LOG")));
}

}  // namespace
}  // namespace sandgate::upstream
