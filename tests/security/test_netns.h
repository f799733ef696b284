// TestNetwork: a throwaway upstream for proxy tests and benchmarks.
//
// Creates the network namespace "sg-test-<pid>" and a veth pair on a /30 of 198.51.100.0/24
// (TEST-NET-2, a documentation range nothing real uses): 198.51.100.<4k+1> on the host side
// (root namespace), 198.51.100.<4k+2> inside, and serves a tiny HTTP server there on ports
// 80 and 443 (plain HTTP on both; 443 is reached through CONNECT tunnels). Slot k is held
// with an flock on /tmp/sg-test-net-<k>.lock, so test processes running at the same time
// never share a subnet (two veths on one subnet would route one test's traffic to the
// other's server). Tests send traffic to this host only.
//
//   GET /            -> 200 "hello from upstream\n"
//   GET /bytes/N     -> 200 with N bytes of 'x'
//   GET /echo-host   -> 200 with the Host header the server received
//
// Everything is removed by the destructor (also when a test fails). Needs root and iproute2.
// Not thread safe, except connections(), which the server threads update.
#ifndef SANDGATE_TESTS_SECURITY_TEST_NETNS_H_
#define SANDGATE_TESTS_SECURITY_TEST_NETNS_H_

#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <poll.h>
#include <sched.h>
#include <sys/eventfd.h>
#include <sys/file.h>
#include <sys/socket.h>
#include <unistd.h>

#include <atomic>
#include <cstdio>
#include <cstdlib>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/synchronization/mutex.h"
#include "absl/synchronization/notification.h"

namespace sandgate::testing {

class TestNetwork {
 public:
  static constexpr int kSlots = 63;

  // Returns null (with `error` set) when the namespace cannot be made.
  static std::unique_ptr<TestNetwork> Create(std::string* error) {
    std::unique_ptr<TestNetwork> n(new TestNetwork());
    const std::string pid = absl::StrCat(getpid());
    n->ns_ = absl::StrCat("sg-test-", pid);
    n->veth_host_ = absl::StrCat("sgt", pid, "h");
    n->veth_ns_ = absl::StrCat("sgt", pid, "n");
    n->Teardown();  // left by an earlier run of the same pid
    for (int slot = 0; slot < kSlots && n->lock_ < 0; ++slot) {
      int fd = open(absl::StrCat("/tmp/sg-test-net-", slot, ".lock").c_str(),
                    O_RDWR | O_CREAT | O_CLOEXEC, 0600);
      if (fd >= 0 && flock(fd, LOCK_EX | LOCK_NB) == 0) {
        n->lock_ = fd;
        n->host_ip_ = absl::StrCat("198.51.100.", 4 * slot + 1);
        n->upstream_ip_ = absl::StrCat("198.51.100.", 4 * slot + 2);
      } else if (fd >= 0) {
        close(fd);
      }
    }
    if (n->lock_ < 0) {
      *error = "all test network slots are taken";
      return nullptr;
    }
    const std::vector<std::string> cmds = {
        absl::StrCat("ip netns add ", n->ns_),
        absl::StrCat("ip link add ", n->veth_host_, " type veth peer name ", n->veth_ns_),
        absl::StrCat("ip link set ", n->veth_ns_, " netns ", n->ns_),
        absl::StrCat("ip addr add ", n->host_ip_, "/30 dev ", n->veth_host_),
        absl::StrCat("ip link set ", n->veth_host_, " up"),
        absl::StrCat("ip -n ", n->ns_, " addr add ", n->upstream_ip_, "/30 dev ", n->veth_ns_),
        absl::StrCat("ip -n ", n->ns_, " link set ", n->veth_ns_, " up"),
        absl::StrCat("ip -n ", n->ns_, " link set lo up"),
    };
    n->created_ = true;
    for (const std::string& c : cmds) {
      if (system((c + " >/dev/null 2>&1").c_str()) != 0) {
        *error = absl::StrCat("failed: ", c);
        return nullptr;
      }
    }
    if (!n->StartServer(error)) return nullptr;
    return n;
  }

  ~TestNetwork() {
    if (stop_ >= 0) {
      uint64_t one = 1;
      (void)!write(stop_, &one, sizeof(one));
    }
    if (server_.joinable()) server_.join();
    {
      absl::MutexLock l(&mu_);
      stopping_ = true;
    }
    for (std::thread& t : TakeWorkers()) t.join();
    if (stop_ >= 0) close(stop_);
    Teardown();
    if (lock_ >= 0) close(lock_);  // releases the slot, after the addresses are gone
  }

  // Connections the server accepted so far.
  int connections() const { return connections_.load(); }
  const std::string& ns_name() const { return ns_; }
  // The upstream's address, and the host's side of the veth.
  const std::string& upstream_ip() const { return upstream_ip_; }
  const std::string& host_ip() const { return host_ip_; }

 private:
  TestNetwork() = default;

  void Teardown() {
    if (system(absl::StrCat("ip link del ", veth_host_, " >/dev/null 2>&1").c_str()) != 0) {
    }
    if (system(absl::StrCat("ip netns del ", ns_, " >/dev/null 2>&1").c_str()) != 0) {
    }
  }

  std::vector<std::thread> TakeWorkers() {
    absl::MutexLock l(&mu_);
    return std::move(workers_);
  }

  bool StartServer(std::string* error) {
    stop_ = eventfd(0, EFD_CLOEXEC);
    absl::Notification ready;
    std::string err;
    server_ = std::thread([this, &ready, &err] {
      int ns = open(absl::StrCat("/var/run/netns/", ns_).c_str(), O_RDONLY | O_CLOEXEC);
      // This thread lives in the test namespace for good; nothing else runs on it.
      if (ns < 0 || setns(ns, CLONE_NEWNET) != 0) {
        err = "setns into the test namespace failed";
        ready.Notify();
        return;
      }
      close(ns);
      std::vector<int> listeners;
      for (int port : {80, 443}) {
        int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
        int one = 1;
        setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
        struct sockaddr_in a = {};
        a.sin_family = AF_INET;
        a.sin_port = htons(port);
        inet_pton(AF_INET, upstream_ip_.c_str(), &a.sin_addr);
        if (bind(fd, reinterpret_cast<sockaddr*>(&a), sizeof(a)) != 0 || listen(fd, 64) != 0) {
          err = absl::StrCat("bind/listen ", upstream_ip_, ":", port, " failed");
          ready.Notify();
          return;
        }
        listeners.push_back(fd);
      }
      ready.Notify();
      for (;;) {
        struct pollfd p[3] = {
            {stop_, POLLIN, 0}, {listeners[0], POLLIN, 0}, {listeners[1], POLLIN, 0}};
        if (poll(p, 3, -1) < 0) continue;
        if (p[0].revents) break;
        for (int i = 1; i < 3; ++i) {
          if (!p[i].revents) continue;
          int c = accept4(listeners[i - 1], nullptr, nullptr, SOCK_CLOEXEC);
          if (c < 0) continue;
          connections_++;
          absl::MutexLock l(&mu_);
          if (stopping_) {
            close(c);
            continue;
          }
          workers_.emplace_back([c] { Serve(c); });
        }
      }
      for (int fd : listeners) close(fd);
    });
    ready.WaitForNotification();
    if (!err.empty()) {
      *error = err;
      return false;
    }
    return true;
  }

  // One request per connection; answers, then closes.
  static void Serve(int c) {
    std::string req;
    char buf[8192];
    while (!absl::StrContains(req, "\r\n\r\n") && req.size() < 65536) {
      struct pollfd p = {c, POLLIN, 0};
      if (poll(&p, 1, 3000) <= 0) break;
      ssize_t n = read(c, buf, sizeof(buf));
      if (n <= 0) break;
      req.append(buf, static_cast<size_t>(n));
    }
    std::string body = "hello from upstream\n";
    size_t sp1 = req.find(' '), sp2 = req.find(' ', sp1 + 1);
    std::string path = sp1 == std::string::npos ? "/" : req.substr(sp1 + 1, sp2 - sp1 - 1);
    uint64_t n = 0;
    if (absl::StartsWith(path, "/bytes/") && absl::SimpleAtoi(path.substr(7), &n)) {
      body.clear();
    } else if (path == "/echo-host") {
      size_t h = req.find("\r\nHost: ");
      body = h == std::string::npos ? "" : req.substr(h + 8, req.find("\r\n", h + 2) - h - 8);
    }
    std::string head = absl::StrCat("HTTP/1.1 200 OK\r\nContent-Length: ", n ? n : body.size(),
                                    "\r\nConnection: close\r\n\r\n", body);
    auto send_all = [&](const char* p, size_t len) {
      while (len > 0) {
        ssize_t w = send(c, p, len, MSG_NOSIGNAL);
        if (w <= 0) return false;
        p += w;
        len -= static_cast<size_t>(w);
      }
      return true;
    };
    bool ok = send_all(head.data(), head.size());
    std::string chunk(65536, 'x');
    while (ok && n > 0) {
      size_t k = std::min<uint64_t>(n, chunk.size());
      ok = send_all(chunk.data(), k);
      n -= k;
    }
    shutdown(c, SHUT_WR);
    struct pollfd p = {c, POLLIN, 0};
    if (poll(&p, 1, 1000) > 0) (void)!read(c, buf, sizeof(buf));
    close(c);
  }

  std::string ns_, veth_host_, veth_ns_, host_ip_, upstream_ip_;
  int lock_ = -1;
  bool created_ = false;
  int stop_ = -1;
  std::thread server_;
  std::atomic<int> connections_{0};
  absl::Mutex mu_;
  bool stopping_ = false;
  std::vector<std::thread> workers_;
};

}  // namespace sandgate::testing

#endif  // SANDGATE_TESTS_SECURITY_TEST_NETNS_H_
