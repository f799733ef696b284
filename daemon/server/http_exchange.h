// HttpServer::Exchange: one request of the HTTP server (http_server.h), its data and its
// answer's state, on libmicrohttpd. The connection is suspended while the handler works and
// while a stream waits for its producer; it is resumed when there is something to send.
// Internal to http_server.cc, which holds the listener, the dispatch, the hang-up watcher and
// the stop; this file holds what one answer goes through (reply, stream, upgrade, close).
#ifndef SANDGATE_SERVER_HTTP_EXCHANGE_H_
#define SANDGATE_SERVER_HTTP_EXCHANGE_H_

#include <microhttpd.h>

#include <cstring>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <utility>

#include "absl/strings/match.h"
#include "absl/synchronization/mutex.h"
#include "server/http_server.h"

namespace sandgate::server {

// An answer whole, with the nosniff every answer carries.
inline MHD_Response* MakeResponse(const HttpResponse& r) {
  MHD_Response* response = MHD_create_response_from_buffer(
      r.body.size(), const_cast<char*>(r.body.data()), MHD_RESPMEM_MUST_COPY);
  MHD_add_response_header(response, "X-Content-Type-Options", "nosniff");
  for (const auto& [name, value] : r.headers) {
    MHD_add_response_header(response, name.c_str(), value.c_str());
  }
  return response;
}

// A resume happens under mu_, so that it never races the suspend it undoes. Thread safe.
class HttpServer::Exchange final : public HttpExchange,
                                   public std::enable_shared_from_this<Exchange> {
 public:
  Exchange(HttpServer* server, MHD_Connection* connection)
      : server_(server), connection_(connection) {}

  // On the polling thread, before the handler runs.
  void Suspend() {
    absl::MutexLock lock(&mu_);
    suspended_ = true;
    MHD_suspend_connection(connection_);
  }

  void Reply(HttpResponse response) override {
    MHD_Response* r = MakeResponse(response);
    bool counted;
    {
      absl::MutexLock lock(&mu_);
      counted = CountAnsweredLocked();
      // Once closed (the client hung up) the connection may be gone: nothing is queued.
      if (!answered_ && !close_.closed()) {
        answered_ = true;
        MHD_queue_response(connection_, response.status, r);
        ResumeLocked();
      }
    }
    MHD_destroy_response(r);
    if (counted) server_->Answered();
  }

  void Stream(unsigned int status, HttpHeaders headers, Pull pull, std::function<void()> on_close,
              uint64_t content_length) override {
    MHD_Response* r = MHD_create_response_from_callback(
        content_length == kUnknownLength ? MHD_SIZE_UNKNOWN : content_length, 16 << 10,
        &Exchange::Read, new std::shared_ptr<Exchange>(shared_from_this()), &Exchange::Free);
    MHD_add_response_header(r, "X-Content-Type-Options", "nosniff");
    for (const auto& [name, value] : headers) {
      MHD_add_response_header(r, name.c_str(), value.c_str());
    }
    std::function<void()> gone;  // the client left before the stream began
    bool counted;
    {
      absl::MutexLock lock(&mu_);
      counted = CountAnsweredLocked();
      pull_ = std::move(pull);
      if (on_close) gone = close_.Set(std::move(on_close));
      if (!close_.closed() && !answered_) {
        answered_ = true;
        streaming_ = true;
        MHD_queue_response(connection_, status, r);
        ResumeLocked();
      }
    }
    MHD_destroy_response(r);
    if (counted) server_->Answered();
    if (gone) gone();
  }

  void Upgrade(HttpResponse response, std::function<void(Upgraded)> on_upgraded,
               std::function<void()> on_close) override {
    MHD_Response* r = MHD_create_response_for_upgrade(
        &Exchange::OnUpgrade, new std::shared_ptr<Exchange>(shared_from_this()));
    MHD_add_response_header(r, "X-Content-Type-Options", "nosniff");
    for (const auto& [name, value] : response.headers) {
      // MHD says "Connection: Upgrade" itself; a second would make it "Upgrade, Upgrade",
      // which strict clients (Codex's tungstenite) refuse.
      if (absl::EqualsIgnoreCase(name, "connection")) continue;
      MHD_add_response_header(r, name.c_str(), value.c_str());
    }
    std::function<void()> gone;
    bool counted;
    {
      absl::MutexLock lock(&mu_);
      counted = CountAnsweredLocked();
      on_upgraded_ = std::move(on_upgraded);
      gone = close_.Set(std::move(on_close));
      if (!close_.closed() && !answered_) {
        answered_ = true;
        upgrading_ = true;
        MHD_queue_response(connection_, MHD_HTTP_SWITCHING_PROTOCOLS, r);
        ResumeLocked();
      }
    }
    MHD_destroy_response(r);
    if (counted) server_->Answered();
    if (gone) gone();
  }

  // The 101 went out but the connection ended before the upgrade: its taker is told.
  bool upgrading() {
    absl::MutexLock lock(&mu_);
    return upgrading_;
  }

  void OnClose(std::function<void()> on_close) override {
    std::function<void()> now;
    {
      absl::MutexLock lock(&mu_);
      now = close_.Set(std::move(on_close));
    }
    if (now) now();
  }

  bool closed() {
    absl::MutexLock lock(&mu_);
    return close_.closed();
  }

  bool Write(std::string data) override {
    absl::MutexLock lock(&mu_);
    if (close_.closed() || ended_) return false;
    if (offset_ > 0) {
      buffer_.erase(0, offset_);
      offset_ = 0;
    }
    buffer_.append(data);
    pulling_ = false;
    // Before Stream the connection waits for its answer, not for data: what is written
    // then is sent first.
    if (streaming_) ResumeLocked();
    return true;
  }

  void End(bool failed) override {
    absl::MutexLock lock(&mu_);
    ended_ = true;
    failed_ = failed;
    if (streaming_) ResumeLocked();
  }

  // The client is gone or the server stops: the stream ends now (its producer is told), and
  // a suspended connection is resumed so that MHD can close it. An answer not begun is no
  // longer awaited (Stop waits for none): nothing would be sent, and its handler, told, may
  // stop without answering (a command whose output was stopped never ends its answer).
  void Close() {
    std::function<void()> on_close;
    bool counted;
    {
      absl::MutexLock lock(&mu_);
      if (close_.closed()) return;
      on_close = close_.Close();
      counted = CountAnsweredLocked();
      ResumeLocked();
    }
    if (counted) server_->Answered();
    if (on_close) on_close();
  }

  MHD_Connection* connection() const { return connection_; }

  // The polling thread's, before the handler runs.
  HttpRequest request;
  const HttpRoute* route = nullptr;
  std::optional<HttpBodySink> sink;     // the route's, when it takes the body as it arrives
  std::optional<HttpResponse> refused;  // the answer instead of the handler's
  bool dispatched = false;
  uint64_t watch_id = 0;  // its entry in the server's hang-up watcher, and the socket
  int watch_fd = -1;

 private:
  // True the first time: the exchange leaves the server's count of unanswered ones
  // (Dispatch counted it), when answered or closed, whichever comes first.
  bool CountAnsweredLocked() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    if (counted_) return false;
    counted_ = true;
    return true;
  }
  void ResumeLocked() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    if (!suspended_) return;
    suspended_ = false;
    MHD_resume_connection(connection_);
  }

  // MHD's content reader, on the polling thread.
  static ssize_t Read(void* cls, uint64_t, char* buf, size_t max) {
    Exchange* self = static_cast<std::shared_ptr<Exchange>*>(cls)->get();
    Pull pull;
    {
      absl::MutexLock lock(&self->mu_);
      if (self->offset_ < self->buffer_.size()) {
        size_t n = std::min(max, self->buffer_.size() - self->offset_);
        std::memcpy(buf, self->buffer_.data() + self->offset_, n);
        self->offset_ += n;
        return static_cast<ssize_t>(n);
      }
      if (self->close_.closed()) return MHD_CONTENT_READER_END_WITH_ERROR;
      if (self->ended_) {
        return self->failed_ ? MHD_CONTENT_READER_END_WITH_ERROR : MHD_CONTENT_READER_END_OF_STREAM;
      }
      // Nothing to send: wait, suspended, for the producer (0 here would busy-loop).
      self->suspended_ = true;
      MHD_suspend_connection(self->connection_);
      if (!self->pulling_) {
        self->pulling_ = true;
        pull = self->pull_;
      }
    }
    if (pull) pull();
    return 0;
  }

  // MHD's upgrade handler, on the polling thread: the connection is the taker's now. The
  // server's Stop reaches it through the exchange's on_close, moved to the server.
  static void OnUpgrade(void* cls, MHD_Connection*, void*, const char* extra_in,
                        size_t extra_in_size, MHD_socket sock, MHD_UpgradeResponseHandle* urh) {
    std::unique_ptr<std::shared_ptr<Exchange>> holder(static_cast<std::shared_ptr<Exchange>*>(cls));
    Exchange* self = holder->get();
    std::function<void(Upgraded)> on_upgraded;
    std::function<void()> stop;
    {
      absl::MutexLock lock(&self->mu_);
      self->upgrading_ = false;
      // Closed before (the client left, the server stops): its taker was told and waits no
      // more, so the connection is closed here.
      if (!self->close_.closed()) on_upgraded = std::move(self->on_upgraded_);
      stop = self->close_.Close();  // as HTTP, it is over; Close does nothing more
    }
    HttpServer* server = self->server_;
    const uint64_t id = server->AddUpgraded(std::move(stop));
    Upgraded u;
    u.fd = sock;
    if (extra_in_size > 0) u.early.assign(extra_in, extra_in_size);
    u.close = [server, urh, id] {
      MHD_upgrade_action(urh, MHD_UPGRADE_ACTION_CLOSE);
      server->RemoveUpgraded(id);
    };
    if (on_upgraded) {
      on_upgraded(std::move(u));
    } else {
      u.close();
    }
  }

  // The response is gone (the connection ended): the producer is told, once.
  static void Free(void* cls) {
    auto* holder = static_cast<std::shared_ptr<Exchange>*>(cls);
    (*holder)->Close();
    delete holder;
  }

  HttpServer* const server_;
  MHD_Connection* const connection_;
  absl::Mutex mu_;
  bool suspended_ ABSL_GUARDED_BY(mu_) = false;
  bool answered_ ABSL_GUARDED_BY(mu_) = false;
  bool counted_ ABSL_GUARDED_BY(mu_) = false;  // out of the server's unanswered_
  bool streaming_ ABSL_GUARDED_BY(mu_) = false;
  ExchangeClose close_ ABSL_GUARDED_BY(mu_);
  bool ended_ ABSL_GUARDED_BY(mu_) = false;
  bool failed_ ABSL_GUARDED_BY(mu_) = false;
  bool pulling_ ABSL_GUARDED_BY(mu_) = false;
  std::string buffer_ ABSL_GUARDED_BY(mu_);
  size_t offset_ ABSL_GUARDED_BY(mu_) = 0;  // buffer_ sent up to here
  Pull pull_ ABSL_GUARDED_BY(mu_);
  bool upgrading_ ABSL_GUARDED_BY(mu_) = false;  // the 101 queued, the handler not yet called
  std::function<void(Upgraded)> on_upgraded_ ABSL_GUARDED_BY(mu_);
};

}  // namespace sandgate::server

#endif  // SANDGATE_SERVER_HTTP_EXCHANGE_H_
