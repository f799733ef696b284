// Records what the published Codex binary says to an exec-server, offline (how
// docs/agent-runtimes.md's "Codex" section was found; not a ctest test: the binary is 400 MB).
// A fake Responses server scripts one exec_command call, then "done"; a WebSocket proxy sits
// between `codex exec` (CODEX_EXEC_SERVER_URL) and the binary's own `codex exec-server` and
// logs every frame to frames.log (the model requests to responses.log). In a scratch folder:
//
//   npm install @openai/codex@0.169.0 ws@8
//   mkdir home work; printf '%s\n' 'model = "fake-model"' 'model_provider = "fake"' \
//     '[model_providers.fake]' 'name = "fake"' 'base_url = "http://127.0.0.1:18431/v1"' \
//     'wire_api = "responses"' 'env_key = "FAKE_KEY"' > home/config.toml
//   CODEX_HOME=$PWD/home npx codex exec-server --listen ws://127.0.0.1:18432 &
//   RESP_PORT=18431 EXEC_PORT=18432 MITM_PORT=18433 node record_exec_server.mjs &
//   cd work && CODEX_HOME=$PWD/../home CODEX_EXEC_SERVER_URL=ws://127.0.0.1:18433 FAKE_KEY=x \
//     npx codex exec --skip-git-repo-check -s danger-full-access "say hi"
import { appendFileSync, writeFileSync } from "node:fs";
import { createServer } from "node:http";
import { WebSocketServer, WebSocket } from "ws";

const log = (line) => appendFileSync("frames.log", line + "\n");
writeFileSync("frames.log", "");
writeFileSync("responses.log", "");
let turn = 0;
const responses = createServer((req, res) => {
  let body = "";
  req.on("data", (d) => (body += d));
  req.on("end", () => {
    appendFileSync("responses.log", `${req.method} ${req.url}\n${body}\n\n`);
    turn += 1;
    res.writeHead(200, { "content-type": "text/event-stream" });
    const send = (type, data) => res.write(`event: ${type}\ndata: ${JSON.stringify({ type, ...data })}\n\n`);
    send("response.created", { response: { id: `resp_${turn}` } });
    // The script: a command to its end; a command on a terminal still running at its yield,
    // then input to it (the session ID Codex gave the model is in the request); "done".
    const call = (name, args) => ({ type: "function_call", id: `fc_${turn}`, name, arguments: JSON.stringify(args), call_id: `call_${turn}` });
    const running = /session ID (\d+)/.exec(body)?.[1];
    let item;
    if (turn === 1) {
      item = call("exec_command", { cmd: "echo hello-from-codex > out.txt; cat out.txt; pwd" });
    } else if (turn === 2 && !running) {
      item = call("exec_command", { cmd: "head -n1", tty: true, yield_time_ms: 300 });
    } else if (turn === 3 && running) {
      item = call("write_stdin", { session_id: Number(running), chars: "typed\n", yield_time_ms: 2000 });
    } else {
      item = { type: "message", id: "msg_1", role: "assistant", content: [{ type: "output_text", text: "done" }] };
    }
    send("response.output_item.done", { item });
    send("response.completed", {
      response: {
        id: `resp_${turn}`,
        usage: {
          input_tokens: 1,
          input_tokens_details: null,
          output_tokens: 1,
          output_tokens_details: null,
          total_tokens: 2,
        },
      },
    });
    res.end();
  });
});
await new Promise((r) => responses.listen(Number(process.env.RESP_PORT), "127.0.0.1", r));

const upstreamUrl = `ws://127.0.0.1:${process.env.EXEC_PORT}`;
const mitm = new WebSocketServer({ host: "127.0.0.1", port: Number(process.env.MITM_PORT) });
mitm.on("connection", (client, req) => {
  log(`# connection ${req.url} ${JSON.stringify(req.headers)}`);
  const upstream = new WebSocket(upstreamUrl);
  const pending = [];
  upstream.on("open", () => pending.splice(0).forEach((m) => upstream.send(m)));
  client.on("message", (m, binary) => {
    log(`> ${binary ? "[binary] " : ""}${m.toString()}`);
    upstream.readyState === WebSocket.OPEN ? upstream.send(m, { binary }) : pending.push(m);
  });
  upstream.on("message", (m, binary) => {
    log(`< ${binary ? "[binary] " : ""}${m.toString()}`);
    client.send(m, { binary });
  });
  client.on("close", () => upstream.close());
  upstream.on("close", () => client.close());
});
console.log("ready");
