// GET /v1/sessions/{session_id}/codex: Codex's exec-server protocol on a WebSocket
// (server/codex_exec_server.h), for `CODEX_EXEC_SERVER_URL=ws://HOST:PORT/v1/sessions/ID/codex
// ?token=TOKEN codex exec …` (docs/agent-runtimes.md, "Codex"). Experimental, as Codex's own.
//
// Codex's WebSocket request carries no header of its own, so the tenant's token may come in
// the query (`token`), or as usual in Authorization. Before the upgrade the route checks the
// token, the session (the caller's, live) and the number of such connections
// (kMaxCodexConnections); a refusal is the REST error. A session another replica holds is
// served there: this replica keeps the WebSocket and relays its messages on the owner's
// CodexExec stream (server/replica_streams.h), which authenticates the caller again, serves
// the protocol (SandgateService::CodexExec, defined here) and ends the stream, closing the
// WebSocket (1001 with why), when the session ends.
// While connected the connection holds a lease on the session (it does not idle out between
// Codex's commands); when the session ends the connection is closed (1001, the reason), and
// when the client leaves, the processes it started and left running are killed.
#ifndef SANDGATE_SERVER_CODEX_EXEC_ROUTE_H_
#define SANDGATE_SERVER_CODEX_EXEC_ROUTE_H_

#include "server/http_server.h"
#include "server/service.h"

namespace sandgate::server {

constexpr int kMaxCodexConnections = 64;  // per daemon, at once

HttpRoute CodexExecServerRoute(const ServiceDeps& deps);

}  // namespace sandgate::server

#endif  // SANDGATE_SERVER_CODEX_EXEC_ROUTE_H_
