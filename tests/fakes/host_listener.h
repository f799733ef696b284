// HostListener: a TCP listener on the host's loopback that answers every request with
// "200 ok". A sandbox reaches it only through the host's network, so a network probe pointed at
// it tells whether the network was really off (an offline machine cannot resolve the daemon's
// default probe URL either way). Header-only; for tests.
#ifndef SANDGATE_TESTS_FAKES_HOST_LISTENER_H_
#define SANDGATE_TESTS_FAKES_HOST_LISTENER_H_

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <thread>

namespace sandgate::testing {

class HostListener {
 public:
  HostListener() {
    fd_ = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    sockaddr_in a{};
    a.sin_family = AF_INET;
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    bind(fd_, reinterpret_cast<sockaddr*>(&a), sizeof(a));
    listen(fd_, 8);
    socklen_t len = sizeof(a);
    getsockname(fd_, reinterpret_cast<sockaddr*>(&a), &len);
    port_ = ntohs(a.sin_port);
    thread_ = std::thread([this] {
      while (true) {
        int c = accept4(fd_, nullptr, nullptr, SOCK_CLOEXEC);
        if (c < 0) return;
        char buf[1024];
        (void)!read(c, buf, sizeof(buf));
        const char kAnswer[] =
            "HTTP/1.1 200 OK\r\nContent-Length: 2\r\nConnection: close\r\n\r\nok";
        (void)!write(c, kAnswer, sizeof(kAnswer) - 1);
        close(c);
      }
    });
  }
  ~HostListener() {
    shutdown(fd_, SHUT_RDWR);
    close(fd_);
    thread_.join();
  }
  HostListener(const HostListener&) = delete;
  HostListener& operator=(const HostListener&) = delete;

  int port() const { return port_; }

 private:
  int fd_ = -1;
  int port_ = 0;
  std::thread thread_;
};

}  // namespace sandgate::testing

#endif  // SANDGATE_TESTS_FAKES_HOST_LISTENER_H_
