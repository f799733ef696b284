#include "server/metrics_http.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <cstdint>

#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "common/errors.h"

namespace sandgate::server {

absl::StatusOr<std::unique_ptr<MetricsHttpServer>> MetricsHttpServer::Start(
    const std::string& address, std::function<std::string()> render) {
  size_t colon = address.rfind(':');
  int port = 0;
  if (colon == std::string::npos || !absl::SimpleAtoi(address.substr(colon + 1), &port) ||
      port < 0 || port > 65535) {
    return errors::InvalidArgument(
        absl::StrCat("metrics_listen: expected host:port, got '", address, "'"));
  }
  struct sockaddr_in addr = {};
  addr.sin_family = AF_INET;
  addr.sin_port = htons(static_cast<uint16_t>(port));
  if (inet_pton(AF_INET, address.substr(0, colon).c_str(), &addr.sin_addr) != 1) {
    return errors::InvalidArgument(
        absl::StrCat("metrics_listen: '", address.substr(0, colon), "' is not an IPv4 address"));
  }
  UniqueFd fd(socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0));
  if (!fd.valid()) return errors::FromErrno(errno, "metrics socket");
  int one = 1;
  setsockopt(fd.get(), SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
  if (bind(fd.get(), reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) != 0) {
    return errors::FromErrno(errno, absl::StrCat("metrics_listen: bind ", address));
  }
  if (listen(fd.get(), 16) != 0) return errors::FromErrno(errno, "metrics listen");
  socklen_t len = sizeof(addr);
  getsockname(fd.get(), reinterpret_cast<sockaddr*>(&addr), &len);
  UniqueFd stop(eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK));
  return std::unique_ptr<MetricsHttpServer>(new MetricsHttpServer(
      std::move(fd), std::move(stop), ntohs(addr.sin_port), std::move(render)));
}

MetricsHttpServer::MetricsHttpServer(UniqueFd listener, UniqueFd stop, int port,
                                     std::function<std::string()> render)
    : listener_(std::move(listener)),
      stop_(std::move(stop)),
      port_(port),
      render_(std::move(render)) {
  thread_ = std::thread([this] { Loop(); });
}

MetricsHttpServer::~MetricsHttpServer() { Stop(); }

void MetricsHttpServer::Stop() {
  uint64_t one = 1;
  (void)!write(stop_.get(), &one, sizeof(one));
  if (thread_.joinable()) thread_.join();
}

void MetricsHttpServer::Loop() {
  for (;;) {
    struct pollfd fds[2] = {{listener_.get(), POLLIN, 0}, {stop_.get(), POLLIN, 0}};
    if (poll(fds, 2, -1) < 0 && errno != EINTR) return;
    if (fds[1].revents) return;
    if (!(fds[0].revents & POLLIN)) continue;
    UniqueFd conn(accept4(listener_.get(), nullptr, nullptr, SOCK_CLOEXEC));
    if (conn.valid()) Serve(conn.get());
  }
}

void MetricsHttpServer::Serve(int fd) {
  struct timeval tv = {2, 0};
  setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
  setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof(tv));
  std::string request;
  char buf[1024];
  while (request.size() < 8192 && request.find("\r\n\r\n") == std::string::npos) {
    ssize_t n = read(fd, buf, sizeof(buf));
    if (n <= 0) break;
    request.append(buf, static_cast<size_t>(n));
  }
  std::string body, status = "200 OK", type = "text/plain; version=0.0.4; charset=utf-8";
  if (absl::StartsWith(request, "GET /metrics ") || absl::StartsWith(request, "GET /metrics?")) {
    body = render_();
  } else {
    status = "404 Not Found";
    type = "text/plain";
    body = "only /metrics is served here\n";
  }
  std::string response =
      absl::StrCat("HTTP/1.1 ", status, "\r\nContent-Type: ", type,
                   "\r\nContent-Length: ", body.size(), "\r\nConnection: close\r\n\r\n", body);
  size_t off = 0;
  while (off < response.size()) {
    ssize_t n = write(fd, response.data() + off, response.size() - off);
    if (n <= 0) break;
    off += static_cast<size_t>(n);
  }
}

}  // namespace sandgate::server
