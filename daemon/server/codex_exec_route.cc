#include "server/codex_exec_route.h"

#include <atomic>
#include <memory>
#include <optional>
#include <string>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/synchronization/mutex.h"
#include "common/cancel.h"
#include "common/errors.h"
#include "common/log.h"
#include "server/codex_exec_server.h"
#include "server/http_api.h"
#include "server/reactor.h"
#include "server/websocket.h"

namespace sandgate::server {
namespace {

std::atomic<int> codex_connections{0};

// One connection's state, from the upgrade to the WebSocket's end. Destroyed in this order:
// the protocol (it kills what its client left running), the lease, the token the lease
// watches.
struct CodexConnection {
  std::unique_ptr<CancelToken> ended = std::make_unique<CancelToken>();
  std::unique_ptr<core::SessionManager::Lease> lease;
  std::unique_ptr<CodexExecServer> server;
  absl::Mutex mu;
  std::shared_ptr<WebSocket> ws ABSL_GUARDED_BY(mu);
  ~CodexConnection() {
    server.reset();
    lease.reset();
    codex_connections.fetch_sub(1);
  }
  void Close(uint16_t code, const char* reason) {
    std::shared_ptr<WebSocket> w;
    {
      absl::MutexLock lock(&mu);
      w = ws;
    }
    if (w) w->Close(code, reason);
  }
};

// The caller: the query's token (Codex cannot send headers), or the Authorization header.
absl::StatusOr<core::Caller> Authenticate(const ServiceDeps& deps, const HttpRequest& http) {
  std::optional<std::string> authorization;
  auto token = http.query.find("token");
  if (token != http.query.end()) {
    authorization = absl::StrCat("Bearer ", token->second);
  } else if (http.headers.count("authorization") > 0) {
    authorization = http.headers.at("authorization");
  }
  return deps.tenants->Authenticate(authorization);
}

}  // namespace

HttpRoute CodexExecServerRoute(const ServiceDeps& deps) {
  return {"GET", "/v1/sessions/{session_id}/codex",
          [&deps](const HttpRequest& http, std::shared_ptr<HttpExchange> x) {
            absl::StatusOr<core::Caller> caller = Authenticate(deps, http);
            if (!caller.ok()) return x->Reply(JsonError(caller.status()));
            absl::StatusOr<HttpHeaders> accept = WebSocketHandshake(http);
            if (!accept.ok()) return x->Reply(JsonError(accept.status()));
            const std::string id = http.params.at("session_id");
            auto work = [&deps, x, caller = *caller, id, accept = *accept]() mutable {
              auto conn = std::make_shared<CodexConnection>();
              if (codex_connections.fetch_add(1) >= kMaxCodexConnections) {
                conn.reset();
                return x->Reply(JsonError(errors::ResourceExhausted(
                    absl::StrCat("the daemon serves ", kMaxCodexConnections,
                                 " Codex exec-server connections at once; close one"))));
              }
              absl::StatusOr<v1::Session> session = deps.sessions->Get(caller, id);
              absl::Status st = session.status();
              if (st.ok() && !deps.sessions->Holds(id)) {
                st = errors::FailedPrecondition(absl::StrCat(
                    "session ", id,
                    " is held by another replica: connect to that replica (a WebSocket is not "
                    "forwarded)"));
              }
              if (st.ok()) {
                core::LeaseWatch watch;
                watch.cancel = conn->ended.get();
                auto lease = deps.sessions->Acquire(caller, id, std::move(watch));
                st = lease.status();
                if (st.ok()) conn->lease = std::move(*lease);
              }
              if (deps.audit != nullptr)
                deps.audit->Record(caller.tenant, "CodexExecServer", id, st);
              if (!st.ok()) return x->Reply(JsonError(st));
              CodexExecServer::Options options;
              options.session_id = id;
              options.workdir = session->workdir().empty() ? "/work" : session->workdir();
              options.max_file_bytes = deps.api->max_transfer_bytes();
#ifdef SANDGATE_VERSION
              options.executor_version = absl::StrCat("sandgate ", SANDGATE_VERSION);
#endif
              x->Upgrade(
                  HttpResponse{101, accept, ""},
                  [&deps, conn, caller, options](HttpExchange::Upgraded c) {
                    WebSocketOptions ws_options;
                    // A file in fs/writeFile is base64 in one message, with room for the rest.
                    ws_options.max_message_bytes = options.max_file_bytes / 3 * 4 + (64 << 10);
                    ws_options.stop_fd = conn->ended->fd();
                    ws_options.stop_reason = "the session ended";
                    std::shared_ptr<WebSocket> socket = WebSocket::Create(std::move(c), ws_options);
                    {
                      absl::MutexLock lock(&conn->mu);
                      conn->ws = socket;
                    }
                    std::weak_ptr<WebSocket> ws = socket;
                    conn->server = std::make_unique<CodexExecServer>(
                        CodexExecServer::Deps{deps.api, deps.sessions, deps.clock}, caller, options,
                        [ws](std::string message) {
                          if (auto w = ws.lock()) w->Send(message);
                        });
                    CodexConnection* raw = conn.get();
                    socket->Run(
                        [raw](std::string message) { raw->server->Handle(message); },
                        // On the reader, before the socket goes back: the processes left
                        // running are killed here, not on the server's polling thread.
                        [conn, session = options.session_id](const absl::Status& why) {
                          conn->server.reset();
                          conn->lease.reset();
                          if (!why.ok()) {
                            log::Info("codex.closed",
                                      {{"session", session}, {"why", std::string(why.message())}});
                          }
                        });
                  },
                  // The client left before the switch, or the daemon stops: the socket ends.
                  [conn] { conn->Close(1001, "the daemon is stopping"); });
            };
            if (!deps.io->Submit(std::move(work))) x->Reply(JsonError(QueueFull()));
          }};
}

}  // namespace sandgate::server
