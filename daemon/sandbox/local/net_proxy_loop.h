// NetProxy::Loop: the proxy thread's state, shared by the two files that implement it:
// net_proxy.cc (the epoll loop, the mailbox other threads post to, sessions, deadlines,
// closing) and proxy_connection.cc (one connection's way from its request head through the
// decision, resolution and connect to the byte tunnel). Internal to NetProxy; include only
// from those two files.
//
// Thread compatible, confined: every member is touched on the proxy thread only, except the
// mailbox (its own mutex) and what Start sets up before the thread exists.
#ifndef SANDGATE_SANDBOX_LOCAL_NET_PROXY_LOOP_H_
#define SANDGATE_SANDBOX_LOCAL_NET_PROXY_LOOP_H_

#include <unistd.h>

#include <cstdint>
#include <deque>
#include <functional>
#include <map>
#include <memory>
#include <set>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/status.h"
#include "absl/strings/string_view.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "common/unique_fd.h"
#include "sandbox/local/net_proxy.h"

namespace sandgate::sandbox::local {

class NetProxy::Loop {
 public:
  Loop(std::shared_ptr<Resolver> resolver, const NetProxyOptions& options)
      : resolver_(std::move(resolver)), options_(options), mailbox_(std::make_shared<Mailbox>()) {}
  ~Loop();
  absl::Status Start();
  absl::Status AddSession(const std::string& id, UniqueFd listener, ProxyPolicy policy,
                          DecisionCallback cb);
  void RemoveSession(const std::string& id);

 private:
  struct Session;
  struct Conn;
  struct Handle {
    enum Kind { kWake, kListener, kClient, kUpstream } kind = kWake;
    Session* session = nullptr;
    Conn* conn = nullptr;
  };
  struct Session {
    std::string id;
    UniqueFd listener;
    ProxyPolicy policy;
    DecisionCallback cb;
    Handle handle;
    uint64_t next_number = 1;
    uint64_t bytes = 0;
    std::set<uint64_t> conns;  // keys into conns_
    bool removed = false;      // RemoveSession ran; freed at the end of the round
    absl::Time resume_at = absl::InfiniteFuture();  // listening paused until then
  };
  enum class State { kHead, kResolving, kConnecting, kTunnel, kReplyThenClose };
  struct Conn {
    uint64_t key = 0;
    Session* session = nullptr;
    NetworkDecision d;  // what is known so far; reported at each step
    UniqueFd client, upstream;
    Handle client_handle, upstream_handle;
    State state = State::kHead;
    bool closed = false;
    bool allowed = false;
    std::string head;
    ProxyRequest req;
    std::vector<IpAddress> addrs;
    size_t next_addr = 0;
    std::string to_up, to_client;  // pending bytes, written from the front
    bool client_eof = false, up_eof = false, up_shut = false, client_shut = false;
    absl::Time deadline;
    uint32_t client_events = 0, upstream_events = 0;  // registered interest
  };
  // Where worker threads and other threads hand work to the proxy thread.
  struct Mailbox {
    UniqueFd wake;
    absl::Mutex mu;
    std::deque<std::function<void()>> tasks ABSL_GUARDED_BY(mu);
    void Post(std::function<void()> f) {
      {
        absl::MutexLock l(&mu);
        tasks.push_back(std::move(f));
      }
      uint64_t one = 1;
      (void)!write(wake.get(), &one, sizeof(one));
    }
  };

  void Post(std::function<void()> f) { mailbox_->Post(std::move(f)); }

  // The event loop (net_proxy.cc).
  // The thread's body: dispatches epoll events by Handle kind until stopping_, then closes
  // every connection.
  void Run();
  // Runs what other threads posted (AddSession, RemoveSession, resolver answers, the stop).
  void RunTasks();
  // Turns the listener's interest on or off (off for a moment when out of descriptors).
  void Listen(Session* s, bool on);
  // Takes every pending connection; one over the session's limit is answered 403.
  void Accept(Session* s);
  // Registers the epoll interest that the connection's state calls for.
  void Interest(Conn* c);
  // Ends the connection once (an allowed one reports kClosed with its byte counts); the Conn
  // is freed at the end of the round, so handlers further up the stack may still read it.
  void Close(Conn* c, absl::string_view reason);
  // Bytes moved through the session; false once the cap is crossed (every connection of the
  // session is then closed).
  bool Count(Conn* c, size_t n, bool up);
  // At most every 200 ms: resumes paused listeners and acts on each expired deadline as its
  // state calls for (400, 502, the next address, idle close).
  void CheckDeadlines();

  // One connection, from its head to the tunnel (proxy_connection.cc).
  // Sends the decision so far, with this verdict, to the session's callback.
  void Report(Conn* c, NetworkDecision::Verdict verdict, absl::string_view reason,
              absl::string_view detail, int http_status);
  // Reports a denial (502: a failure) and answers the client with `code`, then closes.
  void Deny(Conn* c, int code, absl::string_view phrase, absl::string_view error,
            absl::string_view detail);
  // Events of the client socket (head, answer, tunnel) and of the upstream one (connect
  // done, tunnel).
  void OnClient(Conn* c, uint32_t events);
  void OnUpstream(Conn* c, uint32_t events);
  // Moves bytes for one side of a tunnel: what is pending for it goes out on EPOLLOUT, what it
  // sends is read (only when the previous chunk for the other side is gone) and passed on.
  void Pump(Conn* c, uint32_t events, bool client_side);
  // Half-closes what is finished, ends the connection when both directions are.
  void AfterTunnelIo(Conn* c);
  // Writes what the socket takes; false on a hard error.
  static bool Flush(int fd, std::string* pending);
  // A complete head: parse it and apply the policy (byte cap, allowlist, ports, localhost);
  // an IP literal goes straight on, a name is resolved on a thread of its own.
  void Decide(Conn* c);
  // The SSRF guard over every address the name has, then the first connect.
  void Resolved(Conn* c, std::vector<IpAddress> addrs);
  // Connects to the next checked address; 502 when none is left.
  void ConnectNext(Conn* c, absl::string_view last_error);
  // Reports kAllowed and starts the tunnel (200 for CONNECT, the rewritten head otherwise).
  void Connected(Conn* c);

  const std::shared_ptr<Resolver> resolver_;
  const NetProxyOptions options_;
  const std::shared_ptr<Mailbox> mailbox_;
  UniqueFd epoll_;
  Handle wake_handle_;
  std::thread thread_;

  // Proxy thread only.
  bool stopping_ = false;
  uint64_t next_key_ = 1;
  absl::Time next_check_;
  std::map<std::string, std::unique_ptr<Session>> sessions_;
  std::map<uint64_t, std::unique_ptr<Conn>> conns_;
  std::map<uint64_t, uint64_t> up_bytes_, down_bytes_;
  std::vector<std::unique_ptr<Conn>> graveyard_;  // closed this round; freed after it
  std::vector<std::unique_ptr<Session>> graveyard_sessions_;
};

}  // namespace sandgate::sandbox::local

#endif  // SANDGATE_SANDBOX_LOCAL_NET_PROXY_LOOP_H_
