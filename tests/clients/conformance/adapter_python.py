"""The conformance suite's Python adapter (test_conformance.py):
    python3 adapter_python.py OP ARGS_JSON
runs one operation with the Python client (clients/python) configured only by the environment
(SANDGATE_ADDR, SANDGATE_TOKEN, SANDGATE_TLS_*, SANDGATE_RECONNECT_TIMEOUT) and prints one JSON
line: {"ok": {...}} or {"error": {"code": "NOT_FOUND", "message": "..."}}."""

from __future__ import annotations

import json
import sys

import sandgate


def perform(client: sandgate.Client, op: str, args: dict) -> dict:
    if op == "exec":
        with client.session() as session:
            code, out, _ = session.run("echo conform")
            return {"exit_code": code, "stdout": out}
    if op == "get_run":
        return {"status": sandgate.RunStatus(client.get_run(args["id"]).status).name}
    if op == "exec_in":
        session = client.get_session(args["id"])
        code, _, _ = session.run("true")
        return {"exit_code": code}
    if op == "usage":
        u = client.get_session(args["id"]).usage()
        return {"session_id": u.session_id, "memory_bytes": u.memory_bytes,
                "unmeasured": list(u.unmeasured)}
    if op == "ports":
        return {"ports": [p.port for p in client.get_session(args["id"]).ports()]}
    if op == "follow":
        events = []
        for e in client.get_run(args["id"]).events():
            events.append({"seq": e.seq, "type": e.type})
            print(json.dumps({"event": events[-1]}), flush=True)  # progress, for the driver
        return {"events": events}
    raise ValueError(f"unknown op {op}")


def main() -> None:
    op, args = sys.argv[1], json.loads(sys.argv[2] if len(sys.argv) > 2 else "{}")
    try:
        with sandgate.Client() as client:
            answer = {"ok": perform(client, op, args)}
    except sandgate.Error as e:
        answer = {"error": {"code": e.code.name, "message": e.message}}
    print(json.dumps(answer), flush=True)


if __name__ == "__main__":
    main()
