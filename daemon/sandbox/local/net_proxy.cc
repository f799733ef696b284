#include "sandbox/local/net_proxy.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sched.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <thread>

#include "absl/strings/str_cat.h"
#include "absl/synchronization/notification.h"
#include "common/errors.h"
#include "common/log.h"
#include "sandbox/local/net_proxy_loop.h"

namespace sandgate::sandbox::local {

// ---------------------------------------------------------------------------------------------
// Listener in a network namespace

absl::StatusOr<UniqueFd> ListenInNetns(int netns_fd, uint16_t port) {
  absl::StatusOr<UniqueFd> result = errors::Internal("not run");
  // A thread of its own: setns(CLONE_NEWNET) changes only the calling thread, and this one
  // ends right after, so no other thread ever runs in the sandbox's namespace.
  std::thread t([&] {
    if (setns(netns_fd, CLONE_NEWNET) != 0) {
      result = errors::FromErrno(errno, "setns(sandbox netns)");
      return;
    }
    UniqueFd fd(socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0));
    if (!fd.valid()) {
      result = errors::FromErrno(errno, "socket in sandbox netns");
      return;
    }
    int one = 1;
    setsockopt(fd.get(), SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
    struct sockaddr_in addr = {};
    addr.sin_family = AF_INET;
    addr.sin_port = htons(port);
    addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    if (bind(fd.get(), reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) != 0) {
      result = errors::FromErrno(errno, absl::StrCat("bind 127.0.0.1:", port, " in sandbox netns"));
      return;
    }
    if (listen(fd.get(), 128) != 0) {
      result = errors::FromErrno(errno, "listen in sandbox netns");
      return;
    }
    result = std::move(fd);
  });
  t.join();
  return result;
}

// ---------------------------------------------------------------------------------------------
// The proxy thread: the loop, its sessions and deadlines (one connection's way through is in
// proxy_connection.cc)

NetProxy::Loop::~Loop() {
  if (thread_.joinable()) {
    Post([this] { stopping_ = true; });
    thread_.join();
  }
}

absl::Status NetProxy::Loop::Start() {
  epoll_.reset(epoll_create1(EPOLL_CLOEXEC));
  if (!epoll_.valid()) return errors::FromErrno(errno, "epoll_create1");
  mailbox_->wake.reset(eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC));
  if (!mailbox_->wake.valid()) return errors::FromErrno(errno, "eventfd");
  wake_handle_.kind = Handle::kWake;
  struct epoll_event ev = {};
  ev.events = EPOLLIN;
  ev.data.ptr = &wake_handle_;
  if (epoll_ctl(epoll_.get(), EPOLL_CTL_ADD, mailbox_->wake.get(), &ev) != 0) {
    return errors::FromErrno(errno, "epoll_ctl(eventfd)");
  }
  thread_ = std::thread([this] { Run(); });
  return absl::OkStatus();
}

absl::Status NetProxy::Loop::AddSession(const std::string& id, UniqueFd listener,
                                        ProxyPolicy policy, DecisionCallback cb) {
  absl::Status status;
  absl::Notification done;
  auto s = std::make_shared<std::unique_ptr<Session>>(new Session);
  (*s)->id = id;
  (*s)->listener = std::move(listener);
  (*s)->policy = std::move(policy);
  (*s)->cb = std::move(cb);
  Post([&, s] {
    if (sessions_.count(id) > 0) {
      status = errors::AlreadyExists("proxied session", id);
    } else {
      Session* raw = s->get();
      raw->handle = {Handle::kListener, raw, nullptr};
      struct epoll_event ev = {};
      ev.events = EPOLLIN;
      ev.data.ptr = &raw->handle;
      if (epoll_ctl(epoll_.get(), EPOLL_CTL_ADD, raw->listener.get(), &ev) != 0) {
        status = errors::FromErrno(errno, "epoll_ctl(listener)");
      } else {
        sessions_[id] = std::move(*s);
      }
    }
    done.Notify();
  });
  done.WaitForNotification();
  return status;
}

void NetProxy::Loop::RemoveSession(const std::string& id) {
  absl::Notification done;
  Post([&] {
    auto it = sessions_.find(id);
    if (it != sessions_.end()) {
      Session* s = it->second.get();
      s->removed = true;  // its listener may still have an event in this round
      std::vector<uint64_t> keys(s->conns.begin(), s->conns.end());
      for (uint64_t k : keys) Close(conns_[k].get(), "session-closed");
      epoll_ctl(epoll_.get(), EPOLL_CTL_DEL, s->listener.get(), nullptr);
      graveyard_sessions_.push_back(std::move(it->second));
      sessions_.erase(it);
    }
    done.Notify();
  });
  done.WaitForNotification();
}

void NetProxy::Loop::Run() {
  struct epoll_event events[64];
  while (!stopping_) {
    int n = epoll_wait(epoll_.get(), events, 64, 500);
    if (n < 0 && errno != EINTR) {
      log::Error("sandbox.proxy_epoll_failed", {{"errno", errno}});
      absl::SleepFor(absl::Milliseconds(10));
    }
    for (int i = 0; i < n; ++i) {
      Handle* h = static_cast<Handle*>(events[i].data.ptr);
      switch (h->kind) {
        case Handle::kWake:
          RunTasks();
          break;
        case Handle::kListener:
          Accept(h->session);
          break;
        case Handle::kClient:
          if (!h->conn->closed) OnClient(h->conn, events[i].events);
          break;
        case Handle::kUpstream:
          if (!h->conn->closed) OnUpstream(h->conn, events[i].events);
          break;
      }
    }
    CheckDeadlines();
    graveyard_.clear();
    graveyard_sessions_.clear();
  }
  for (auto& [id, s] : sessions_) {
    std::vector<uint64_t> keys(s->conns.begin(), s->conns.end());
    for (uint64_t k : keys) Close(conns_[k].get(), "proxy-stopped");
  }
  graveyard_.clear();
  sessions_.clear();
}

void NetProxy::Loop::RunTasks() {
  uint64_t v;
  (void)!read(mailbox_->wake.get(), &v, sizeof(v));
  std::deque<std::function<void()>> tasks;
  {
    absl::MutexLock l(&mailbox_->mu);
    tasks.swap(mailbox_->tasks);
  }
  for (auto& t : tasks) t();
}

void NetProxy::Loop::Listen(Session* s, bool on) {
  struct epoll_event ev = {};
  ev.events = on ? static_cast<uint32_t>(EPOLLIN) : 0u;
  ev.data.ptr = &s->handle;
  epoll_ctl(epoll_.get(), EPOLL_CTL_MOD, s->listener.get(), &ev);
}

void NetProxy::Loop::Accept(Session* s) {
  while (!s->removed) {
    UniqueFd fd(accept4(s->listener.get(), nullptr, nullptr, SOCK_NONBLOCK | SOCK_CLOEXEC));
    if (!fd.valid()) {
      if (errno == EMFILE || errno == ENFILE) {
        // Out of descriptors: stop listening for a moment rather than spin on the backlog.
        log::Warning("sandbox.proxy_out_of_fds", {{"session", s->id}});
        Listen(s, false);
        s->resume_at = absl::Now() + absl::Milliseconds(200);
      }
      return;  // EAGAIN, or a transient error: epoll calls again
    }
    auto c = std::make_unique<Conn>();
    c->key = next_key_++;
    c->session = s;
    c->d.session_id = s->id;
    c->d.connection = s->next_number++;
    c->client = std::move(fd);
    c->client_handle = {Handle::kClient, s, c.get()};
    c->upstream_handle = {Handle::kUpstream, s, c.get()};
    c->deadline = absl::Now() + options_.head_timeout;
    Conn* raw = c.get();
    const bool over = s->conns.size() >= s->policy.max_connections;
    conns_[raw->key] = std::move(c);
    s->conns.insert(raw->key);
    if (over) {
      Deny(raw, 403, "Forbidden", "connection-limit",
           absl::StrCat("at most ", s->policy.max_connections, " connections at once"));
      continue;
    }
    Interest(raw);
  }
}

void NetProxy::Loop::Interest(Conn* c) {
  uint32_t ce = 0, ue = 0;
  switch (c->state) {
    case State::kHead:
      ce = EPOLLIN;
      break;
    case State::kResolving:
      break;
    case State::kConnecting:
      ue = EPOLLOUT;
      break;
    case State::kTunnel:
      if (c->to_up.empty() && !c->client_eof) ce |= EPOLLIN;
      if (!c->to_client.empty()) ce |= EPOLLOUT;
      if (c->to_client.empty() && !c->up_eof) ue |= EPOLLIN;
      if (!c->to_up.empty()) ue |= EPOLLOUT;
      break;
    case State::kReplyThenClose:
      ce = c->to_client.empty() ? EPOLLIN : EPOLLOUT;
      break;
  }
  // Each fd stays registered while open, with an empty mask when idle (errors and hang-ups
  // are still reported; the handlers close on them).
  auto update = [&](const UniqueFd& fd, Handle* h, uint32_t want, uint32_t* have) {
    if (!fd.valid() || (*have == want && want != 0)) return;
    struct epoll_event ev = {};
    ev.events = want;
    ev.data.ptr = h;
    if (epoll_ctl(epoll_.get(), EPOLL_CTL_MOD, fd.get(), &ev) != 0 && errno == ENOENT) {
      epoll_ctl(epoll_.get(), EPOLL_CTL_ADD, fd.get(), &ev);
    }
    *have = want;
  };
  update(c->client, &c->client_handle, ce, &c->client_events);
  update(c->upstream, &c->upstream_handle, ue, &c->upstream_events);
}

void NetProxy::Loop::Close(Conn* c, absl::string_view reason) {
  if (c->closed) return;
  c->closed = true;
  if (c->allowed) {
    c->d.bytes_up = up_bytes_[c->key];
    c->d.bytes_down = down_bytes_[c->key];
    Report(c, NetworkDecision::Verdict::kClosed, reason, "", c->d.http_status);
  }
  up_bytes_.erase(c->key);
  down_bytes_.erase(c->key);
  c->session->conns.erase(c->key);
  auto it = conns_.find(c->key);
  graveyard_.push_back(std::move(it->second));
  conns_.erase(it);
  // Closing the fds removes them from the epoll set.
}

bool NetProxy::Loop::Count(Conn* c, size_t n, bool up) {
  (up ? up_bytes_ : down_bytes_)[c->key] += n;
  Session* s = c->session;
  s->bytes += n;
  if (s->bytes <= s->policy.max_bytes) return true;
  std::vector<uint64_t> keys(s->conns.begin(), s->conns.end());
  for (uint64_t k : keys) Close(conns_[k].get(), "byte-limit");
  return false;
}

void NetProxy::Loop::CheckDeadlines() {
  const absl::Time now = absl::Now();
  if (now < next_check_) return;
  next_check_ = now + absl::Milliseconds(200);
  for (auto& [id, s] : sessions_) {
    if (s->resume_at <= now) {
      s->resume_at = absl::InfiniteFuture();
      Listen(s.get(), true);
    }
  }
  std::vector<Conn*> expired;
  for (auto& [key, c] : conns_) {
    if (c->deadline <= now) expired.push_back(c.get());
  }
  for (Conn* c : expired) {
    if (c->closed) continue;
    switch (c->state) {
      case State::kHead:
        Deny(c, 400, "Bad Request", "bad-request", "no complete request head in time");
        break;
      case State::kResolving:
        Deny(c, 502, "Bad Gateway", "resolution-failed", "name resolution timed out");
        break;
      case State::kConnecting:
        ConnectNext(c, "connect timed out");
        break;
      case State::kTunnel:
        Close(c, "idle-timeout");
        break;
      case State::kReplyThenClose:
        Close(c, "answered");
        break;
    }
  }
}

NetProxy::NetProxy(std::unique_ptr<Loop> loop) : loop_(std::move(loop)) {}
NetProxy::~NetProxy() = default;

absl::StatusOr<std::unique_ptr<NetProxy>> NetProxy::Create(std::shared_ptr<Resolver> resolver,
                                                           const NetProxyOptions& options) {
  if (resolver == nullptr) return errors::InvalidArgument("resolver: required");
  auto loop = std::make_unique<Loop>(std::move(resolver), options);
  if (absl::Status s = loop->Start(); !s.ok()) return s;
  return std::unique_ptr<NetProxy>(new NetProxy(std::move(loop)));
}

absl::Status NetProxy::AddSession(const std::string& session_id, UniqueFd listener,
                                  ProxyPolicy policy, DecisionCallback on_decision) {
  return loop_->AddSession(session_id, std::move(listener), std::move(policy),
                           std::move(on_decision));
}

void NetProxy::RemoveSession(const std::string& session_id) { loop_->RemoveSession(session_id); }

}  // namespace sandgate::sandbox::local
