// LoopbackHttpServer: a tiny HTTP/1.1 server on 127.0.0.1:<ephemeral> for libcurl tests.
//
// One thread accepts connections one at a time, reads one request (Content-Length bodies
// only), records it, and hands the connection to the test's handler, which writes whatever
// bytes it likes (canned, slow, chunked, truncated). The connection is closed when the handler
// returns. Thread safe: requests() may be read from any thread.
#ifndef SANDGATE_TESTS_UPSTREAM_LOOPBACK_HTTP_SERVER_H_
#define SANDGATE_TESTS_UPSTREAM_LOOPBACK_HTTP_SERVER_H_

#include <arpa/inet.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cstdint>
#include <functional>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "common/unique_fd.h"
#include "upstream/http_client.h"

namespace sandgate::upstream::testing {

struct ReceivedRequest {
  std::string method;
  std::string target;  // path and query
  HttpHeaders headers;
  std::string body;
};

class LoopbackHttpServer {
 public:
  // Writes the response to `fd`; `stop_fd` becomes readable when the server shuts down.
  using Handler = std::function<void(const ReceivedRequest& request, int fd, int stop_fd)>;

  explicit LoopbackHttpServer(Handler handler) : handler_(std::move(handler)) {
    listen_fd_.reset(socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0));
    sockaddr_in addr{};
    addr.sin_family = AF_INET;
    addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    addr.sin_port = 0;
    bind(listen_fd_.get(), reinterpret_cast<sockaddr*>(&addr), sizeof(addr));
    listen(listen_fd_.get(), 16);
    socklen_t len = sizeof(addr);
    getsockname(listen_fd_.get(), reinterpret_cast<sockaddr*>(&addr), &len);
    port_ = ntohs(addr.sin_port);
    stop_fd_.reset(eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK));
    thread_ = std::thread([this] { Loop(); });
  }
  ~LoopbackHttpServer() {
    uint64_t one = 1;
    (void)!write(stop_fd_.get(), &one, sizeof(one));
    thread_.join();
  }

  int port() const { return port_; }
  std::string Url(absl::string_view path) const {
    return absl::StrCat("http://127.0.0.1:", port_, path);
  }
  std::vector<ReceivedRequest> requests() const {
    absl::MutexLock lock(&mu_);
    return requests_;
  }

  // Helpers for handlers.
  static void WriteAll(int fd, absl::string_view data) {
    while (!data.empty()) {
      ssize_t n = send(fd, data.data(), data.size(), MSG_NOSIGNAL);
      if (n <= 0) return;
      data.remove_prefix(static_cast<size_t>(n));
    }
  }
  static std::string Response(int status, absl::string_view body,
                              std::vector<std::pair<std::string, std::string>> headers = {}) {
    std::string out = absl::StrCat("HTTP/1.1 ", status, " X\r\nContent-Length: ", body.size(),
                                   "\r\nConnection: close\r\n");
    for (auto& [k, v] : headers) absl::StrAppend(&out, k, ": ", v, "\r\n");
    absl::StrAppend(&out, "\r\n", body);
    return out;
  }
  static std::string Chunk(absl::string_view data) {
    return absl::StrCat(absl::Hex(data.size()), "\r\n", data, "\r\n");
  }
  // Blocks until the peer closes the connection, the server stops, or `timeout` passes.
  static void WaitForPeerClose(int fd, int stop_fd, absl::Duration timeout = absl::Seconds(20)) {
    const absl::Time deadline = absl::Now() + timeout;
    char buf[4096];
    while (absl::Now() < deadline) {
      pollfd fds[2] = {{fd, POLLIN | POLLRDHUP, 0}, {stop_fd, POLLIN, 0}};
      if (poll(fds, 2, 100) <= 0) continue;
      if (fds[1].revents != 0) return;
      if (fds[0].revents & (POLLRDHUP | POLLHUP | POLLERR)) return;
      if (fds[0].revents & POLLIN) {
        if (recv(fd, buf, sizeof(buf), 0) <= 0) return;
      }
    }
  }

 private:
  void Loop() {
    for (;;) {
      pollfd fds[2] = {{listen_fd_.get(), POLLIN, 0}, {stop_fd_.get(), POLLIN, 0}};
      if (poll(fds, 2, -1) < 0) continue;
      if (fds[1].revents != 0) return;
      UniqueFd conn(accept4(listen_fd_.get(), nullptr, nullptr, SOCK_CLOEXEC));
      if (!conn.valid()) continue;
      ReceivedRequest request;
      if (!ReadRequest(conn.get(), &request)) continue;
      {
        absl::MutexLock lock(&mu_);
        requests_.push_back(request);
      }
      handler_(request, conn.get(), stop_fd_.get());
    }
  }

  bool ReadRequest(int fd, ReceivedRequest* request) {
    std::string data;
    char buf[8192];
    size_t header_end = std::string::npos;
    while ((header_end = data.find("\r\n\r\n")) == std::string::npos) {
      ssize_t n = recv(fd, buf, sizeof(buf), 0);
      if (n <= 0) return false;
      data.append(buf, static_cast<size_t>(n));
    }
    std::vector<std::string> lines =
        absl::StrSplit(absl::string_view(data).substr(0, header_end), "\r\n");
    std::vector<std::string> request_line = absl::StrSplit(lines[0], ' ');
    if (request_line.size() < 2) return false;
    request->method = request_line[0];
    request->target = request_line[1];
    size_t content_length = 0;
    for (size_t i = 1; i < lines.size(); ++i) {
      size_t colon = lines[i].find(':');
      if (colon == std::string::npos) continue;
      std::string name = lines[i].substr(0, colon);
      std::string value(absl::StripAsciiWhitespace(lines[i].substr(colon + 1)));
      if (absl::EqualsIgnoreCase(name, "Content-Length")) {
        (void)absl::SimpleAtoi(value, &content_length);
      }
      request->headers.Add(std::move(name), std::move(value));
    }
    request->body = data.substr(header_end + 4);
    while (request->body.size() < content_length) {
      ssize_t n = recv(fd, buf, sizeof(buf), 0);
      if (n <= 0) return false;
      request->body.append(buf, static_cast<size_t>(n));
    }
    return true;
  }

  const Handler handler_;
  UniqueFd listen_fd_;
  UniqueFd stop_fd_;
  int port_ = 0;
  mutable absl::Mutex mu_;
  std::vector<ReceivedRequest> requests_ ABSL_GUARDED_BY(mu_);
  std::thread thread_;
};

}  // namespace sandgate::upstream::testing

#endif  // SANDGATE_TESTS_UPSTREAM_LOOPBACK_HTTP_SERVER_H_
