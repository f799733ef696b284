#include "server/codex_exec_route.h"

#include <atomic>
#include <memory>
#include <optional>
#include <string>
#include <thread>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/synchronization/mutex.h"
#include "common/cancel.h"
#include "common/errors.h"
#include "common/log.h"
#include "server/codex_exec_server.h"
#include "server/forwarding.h"
#include "server/http_api.h"
#include "server/reactor.h"
#include "server/replica_streams.h"
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

// The caller's credentials: the query's token (Codex cannot send headers), or the
// Authorization header.
std::optional<std::string> Authorization(const HttpRequest& http) {
  auto token = http.query.find("token");
  if (token != http.query.end()) return absl::StrCat("Bearer ", token->second);
  if (http.headers.count("authorization") > 0) return http.headers.at("authorization");
  return std::nullopt;
}

absl::StatusOr<core::Caller> Authenticate(const ServiceDeps& deps, const HttpRequest& http) {
  return deps.tenants->Authenticate(Authorization(http));
}

// The WebSocket's options for a connection whose files are up to `max_file_bytes`.
WebSocketOptions SocketOptions(uint64_t max_file_bytes) {
  WebSocketOptions o;
  // A file in fs/writeFile is base64 in one message, with room for the rest.
  o.max_message_bytes = max_file_bytes / 3 * 4 + (64 << 10);
  return o;
}

using CodexStream = grpc::ClientReaderWriter<v1::CodexExecRequest, v1::CodexExecResponse>;

// A connection relayed to the replica that holds its session, over its CodexExec stream: each
// WebSocket message is one message of the stream, both ways. The stream's end closes the
// WebSocket (1000 when the owner ended it cleanly, 1011 with why otherwise), and the
// WebSocket's end cancels the stream.
struct RemoteCodex {
  std::unique_ptr<grpc::ClientContext> context;
  std::unique_ptr<CodexStream> stream;
  std::thread down;  // the owner's messages to the WebSocket
  ~RemoteCodex() {
    context->TryCancel();
    if (down.joinable()) down.join();
  }
};

void ForwardCodex(const ServiceDeps& deps, std::shared_ptr<CodexConnection> conn,
                  std::shared_ptr<HttpExchange> x, const Route& route,
                  const std::optional<std::string>& authorization, const std::string& id,
                  const HttpHeaders& accept) {
  auto remote = std::make_shared<RemoteCodex>();
  remote->context = deps.forwarder->ContextFor({nullptr, authorization.value_or("")});
  v1::CodexExecRequest first;
  first.set_session_id(id);
  std::shared_ptr<v1::Sandgate::Stub> stub = route.stub;
  absl::StatusOr<std::unique_ptr<CodexStream>> stream =
      OpenReplicaStream<v1::CodexExecRequest, v1::CodexExecResponse>(
          route, remote->context.get(),
          [&stub](grpc::ClientContext* c) { return stub->CodexExec(c); }, first);
  if (!stream.ok()) return x->Reply(JsonError(stream.status()));
  remote->stream = *std::move(stream);
  const uint64_t max_file_bytes = deps.api->max_transfer_bytes();
  x->Upgrade(
      HttpResponse{101, accept, ""},
      [conn, remote, route, max_file_bytes](HttpExchange::Upgraded c) {
        std::shared_ptr<WebSocket> socket =
            WebSocket::Create(std::move(c), SocketOptions(max_file_bytes));
        {
          absl::MutexLock lock(&conn->mu);
          conn->ws = socket;
        }
        std::weak_ptr<WebSocket> ws = socket;
        // Joined by ~RemoteCodex, which therefore outlives it.
        RemoteCodex* r = remote.get();
        r->down = std::thread([r, ws, route] {
          v1::CodexExecResponse m;
          while (r->stream->Read(&m)) {
            if (auto w = ws.lock()) w->Send(m.message());
          }
          const grpc::Status st = Forwarder::Explain(route, r->stream->Finish());
          if (auto w = ws.lock()) {
            if (st.ok()) {
              w->Close(1000, "");
            } else {
              // A close frame's reason holds at most 123 bytes.
              w->Close(1001, absl::StrCat("replica ", route.peer.replica, ": ", st.error_message())
                                 .substr(0, 120));
            }
          }
        });
        socket->Run(
            [remote](std::string message) {
              v1::CodexExecRequest m;
              m.set_message(std::move(message));
              remote->stream->Write(m);
            },
            // The reader's end: the stream is cancelled and its reader joined here.
            [conn, remote](const absl::Status&) mutable { remote.reset(); });
      },
      [conn] { conn->Close(1001, "the daemon is stopping"); });
}

// Counts a connection; RESOURCE_EXHAUSTED (and not counted) over kMaxCodexConnections.
absl::StatusOr<std::shared_ptr<CodexConnection>> Count() {
  auto conn = std::make_shared<CodexConnection>();
  if (codex_connections.fetch_add(1) >= kMaxCodexConnections) {
    return errors::ResourceExhausted(absl::StrCat("the daemon serves ", kMaxCodexConnections,
                                                  " Codex exec-server connections at once; "
                                                  "close one"));
  }
  return conn;
}

// Attaches `conn` to `caller`'s session `id`, held here: its lease (watched by conn->ended),
// and the protocol's options. Audited.
absl::StatusOr<CodexExecServer::Options> Attach(const ServiceDeps& deps, const core::Caller& caller,
                                                const std::string& id, CodexConnection* conn) {
  absl::StatusOr<v1::Session> session = deps.sessions->Get(caller, id);
  absl::Status st = session.status();
  if (st.ok() && !deps.sessions->Holds(id)) {
    st = errors::FailedPrecondition(
        absl::StrCat("session ", id, " is held by replica ", session->replica(),
                     ", which this replica cannot forward the connection to"));
  }
  if (st.ok()) {
    core::LeaseWatch watch;
    watch.cancel = conn->ended.get();
    auto lease = deps.sessions->Acquire(caller, id, std::move(watch));
    st = lease.status();
    if (st.ok()) conn->lease = std::move(*lease);
  }
  if (deps.audit != nullptr) deps.audit->Record(caller.tenant, "CodexExecServer", id, st);
  if (!st.ok()) return st;
  CodexExecServer::Options options;
  options.session_id = id;
  options.workdir = session->workdir().empty() ? "/work" : session->workdir();
  options.max_file_bytes = deps.api->max_transfer_bytes();
#ifdef SANDGATE_VERSION
  options.executor_version = absl::StrCat("sandgate ", SANDGATE_VERSION);
#endif
  return options;
}

// The protocol on the WebSocket `c`, for a connection attached here.
void ServeSocket(const ServiceDeps& deps, std::shared_ptr<CodexConnection> conn,
                 const core::Caller& caller, const CodexExecServer::Options& options,
                 HttpExchange::Upgraded c) {
  WebSocketOptions ws_options = SocketOptions(options.max_file_bytes);
  ws_options.stop_fd = conn->ended->fd();
  ws_options.stop_reason = "the session ended";
  std::shared_ptr<WebSocket> socket = WebSocket::Create(std::move(c), ws_options);
  {
    absl::MutexLock lock(&conn->mu);
    conn->ws = socket;
  }
  std::weak_ptr<WebSocket> ws = socket;
  conn->server =
      std::make_unique<CodexExecServer>(CodexExecServer::Deps{deps.api, deps.sessions, deps.clock},
                                        caller, options, [ws](std::string message) {
                                          if (auto w = ws.lock()) w->Send(message);
                                        });
  CodexConnection* raw = conn.get();
  socket->Run(
      [raw](std::string message) { raw->server->Handle(message); },
      // On the reader, before the socket goes back: the processes left running are
      // killed here, not on the server's polling thread.
      [conn, session = options.session_id](const absl::Status& why) {
        conn->server.reset();
        conn->lease.reset();
        if (!why.ok()) {
          log::Info("codex.closed", {{"session", session}, {"why", std::string(why.message())}});
        }
      });
}

using CodexCall = BlockingBidi<v1::CodexExecRequest, v1::CodexExecResponse>;

// The owner's side of a CodexExec stream, on its own thread: the protocol as on a WebSocket,
// one stream message per WebSocket message. The caller's half-close ends it (OK); the
// session's end too (UNAVAILABLE, "the session ended").
grpc::Status ServeStream(const ServiceDeps& deps, grpc::CallbackServerContext* ctx,
                         CodexCall& call) {
  v1::CodexExecRequest first;
  if (!call.Read(&first)) {
    return ToGrpc(errors::Cancelled("the stream ended before it named a session"));
  }
  absl::StatusOr<core::Caller> caller = server::Authenticate(*deps.tenants, ctx);
  if (!caller.ok()) return ToGrpc(caller.status());
  absl::StatusOr<std::shared_ptr<CodexConnection>> conn = Count();
  if (!conn.ok()) return ToGrpc(conn.status());
  absl::StatusOr<CodexExecServer::Options> options =
      Attach(deps, *caller, first.session_id(), conn->get());
  if (!options.ok()) return ToGrpc(options.status());
  if (!call.Write(v1::CodexExecResponse())) return ToGrpc(errors::Cancelled("the caller left"));
  (*conn)->server =
      std::make_unique<CodexExecServer>(CodexExecServer::Deps{deps.api, deps.sessions, deps.clock},
                                        *caller, *options, [&call](std::string message) {
                                          v1::CodexExecResponse m;
                                          m.set_message(std::move(message));
                                          call.Write(m);
                                        });
  v1::CodexExecRequest m;
  while (call.Read(&m, (*conn)->ended.get())) (*conn)->server->Handle(m.message());
  // Kills what the client left running and waits for the pumps: no Write after this.
  (*conn)->server.reset();
  if ((*conn)->ended->cancelled()) {
    return ToGrpc(
        errors::Unavailable(absl::StrCat("the session ended: ", (*conn)->ended->reason())));
  }
  return grpc::Status::OK;
}

}  // namespace

HttpRoute CodexExecServerRoute(const ServiceDeps& deps) {
  return {
      "GET", "/v1/sessions/{session_id}/codex",
      [&deps](const HttpRequest& http, std::shared_ptr<HttpExchange> x) {
        absl::StatusOr<core::Caller> caller = Authenticate(deps, http);
        if (!caller.ok()) return x->Reply(JsonError(caller.status()));
        absl::StatusOr<HttpHeaders> accept = WebSocketHandshake(http);
        if (!accept.ok()) return x->Reply(JsonError(accept.status()));
        const std::string id = http.params.at("session_id");
        auto work = [&deps, x, caller = *caller, id, accept = *accept,
                     authorization = Authorization(http)]() mutable {
          absl::StatusOr<std::shared_ptr<CodexConnection>> conn = Count();
          if (!conn.ok()) return x->Reply(JsonError(conn.status()));
          if (deps.forwarder != nullptr && !deps.sessions->Holds(id)) {
            absl::StatusOr<std::optional<Route>> route =
                deps.forwarder->For(nullptr, caller, Owner::kSession, id);
            if (!route.ok()) return x->Reply(JsonError(route.status()));
            if (route->has_value()) {
              return ForwardCodex(deps, *std::move(conn), x, **route, authorization, id, accept);
            }
          }
          absl::StatusOr<CodexExecServer::Options> options = Attach(deps, caller, id, conn->get());
          if (!options.ok()) return x->Reply(JsonError(options.status()));
          x->Upgrade(
              HttpResponse{101, accept, ""},
              [&deps, conn = *conn, caller, options = *options](HttpExchange::Upgraded c) {
                ServeSocket(deps, conn, caller, options, std::move(c));
              },
              // The client left before the switch, or the daemon stops: the socket ends.
              [conn = *conn] { conn->Close(1001, "the daemon is stopping"); });
        };
        if (!deps.io->Submit(std::move(work))) x->Reply(JsonError(QueueFull()));
      }};
}

grpc::ServerBidiReactor<v1::CodexExecRequest, v1::CodexExecResponse>* SandgateService::CodexExec(
    grpc::CallbackServerContext* ctx) {
  const ServiceDeps& deps = deps_;
  return new CodexCall([&deps, ctx](CodexCall& call) { return ServeStream(deps, ctx, call); });
}

}  // namespace sandgate::server
