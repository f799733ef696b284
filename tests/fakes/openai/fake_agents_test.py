#!/usr/bin/env python3
"""Tests of the fake's Agents API (fake_agents.py) over real HTTP, the fake on port 0.

Run: python3 tests/fakes/openai/fake_agents_test.py [-v]
"""

import base64
import hashlib
import json
import os
import socket
import sys
import threading
import time
import unittest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import fake_openai_test  # noqa: E402
from fake_openai_test import KEY, Base, Fake  # noqa: E402

SOURCE = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", "..", ".."))
BETA = {"OpenAI-Beta": "agents=v1"}
TERMINAL_TURN = ("agent.session.turn.completed", "agent.session.turn.failed",
                 "agent.session.turn.cancelled")


def b64(data):
    return base64.b64encode(data).decode()


def hosted(**kw):
    env = {"type": "openai_hosted", "network": {"access": "disabled"}}
    env.update(kw)
    return env


def read_source(rel):
    with open(os.path.join(SOURCE, rel), "rb") as fh:
        return fh.read().decode()


class AgentsBase(Base):
    def areq(self, method, path, body=None, headers=None, **kw):
        h = dict(BETA)
        h.update(headers or {})
        return self.req(method, path, body, headers=h, **kw)

    def aok(self, method, path, body=None, **kw):
        r = self.areq(method, path, body, **kw)
        self.assertIn(r.status, (200, 204), r.body)
        return r.json() if r.body else None

    def create(self, environment=None, stream=False, **kw):
        body = {"agent": {"model": "gpt-test"}, "environment": environment or hosted()}
        body.update(kw)
        if stream:
            body["stream"] = True
            return self.sse("POST", "/v1/agents/sessions", body)
        return self.aok("POST", "/v1/agents/sessions", body)

    def sse(self, method, path, body=None, stop=None, timeout=60):
        """Reads an SSE response; returns (events, complete). `stop(events)` ends reading
        early (the GET stream stays open)."""
        c = self.conn(timeout)
        h = dict(BETA, Authorization="Bearer " + KEY, Accept="text/event-stream")
        data = None
        if body is not None:
            data = json.dumps(body).encode()
            h["Content-Type"] = "application/json"
        c.request(method, path, body=data, headers=h)
        r = c.getresponse()
        if r.status != 200:
            self.fail("%d: %s" % (r.status, r.read()))
        self.assertTrue(r.headers["Content-Type"].startswith("text/event-stream"))
        events = []

        def on_frame(ev, data):
            if not data:
                return False  # a keep-alive comment
            obj = json.loads(data)
            self.assertEqual(obj["type"], ev)
            events.append(obj)
            return stop is not None and stop(events)
        return events, self.read_frames(c, r, 4096, on_frame)

    def send(self, sid, *events, key=None):
        h = {"Idempotency-Key": key} if key else {}
        r = self.areq("POST", "/v1/agents/sessions/%s/events" % sid, {"events": list(events)},
                      headers=h)
        self.assertEqual(r.status, 204, r.body)

    def message(self, text):
        return {"type": "agent.session.input.message",
                "input": [{"role": "user", "content": [{"type": "input_text", "text": text}]}]}

    def wait_status(self, sid, statuses, timeout=60):
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            s = self.aok("GET", "/v1/agents/sessions/" + sid)
            if s["status"] in statuses:
                return s
            time.sleep(0.05)
        self.fail("session %s never reached %s" % (sid, statuses))

    def wait_ready(self, s, timeout=60):
        """A new session is idle while its environment is still provisioning (spec §7)."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            env = self.aok("GET", "/v1/agents/environments/" + s["environment"]["id"])
            if env["status"] == "ready":
                return
            time.sleep(0.05)
        self.fail("environment of %s never ready" % s["id"])

    def turn_events(self, sid, text):
        """Posts a message on an idle session and follows its events to the session's rest."""
        got = []

        def rest(evs):
            ended = any(e["type"] in TERMINAL_TURN for e in evs)
            return ended and evs[-1]["type"] in ("agent.session.idle", "agent.session.failed")
        t = threading.Thread(target=lambda: got.extend(
            self.sse("GET", "/v1/agents/sessions/%s/events" % sid, stop=rest)[0]))
        t.start()
        time.sleep(0.3)  # subscribe before input, as the npm client's helper does
        self.send(sid, self.message(text))
        t.join(timeout=90)
        return got

    def artifacts(self, sid):
        return self.aok("GET", "/v1/agents/sessions/%s/artifacts?order=asc&limit=100" % sid)["data"]

    def content(self, sid, aid):
        r = self.areq("GET", "/v1/agents/sessions/%s/artifacts/%s/content" % (sid, aid))
        self.assertEqual(r.status, 200, r.body)
        self.assertEqual(r.headers["Content-Type"], "application/octet-stream")
        return r.body

    def outputs(self, events):
        return "".join(e["delta"] for e in events
                       if e["type"] == "agent.output.command_execution_output.delta")

    def commands(self, events):
        return [e["item"] for e in events if e["type"] == "agent.session.turn.item.done"
                and e["item"]["type"] == "command_execution"]

    def agents_state(self):
        return self.admin("GET", "/_fake/state")["agents"]


class BasicsTest(AgentsBase):
    def test_beta_header_and_auth_are_required(self):
        r = self.req("GET", "/v1/agents/sessions")
        self.assert_error(r, 400, param="OpenAI-Beta", message_part="OpenAI-Beta: agents=v1")
        self.assert_error(self.req("GET", "/v1/agents/sessions", headers=BETA, auth=False), 401)
        self.assertEqual(self.areq("GET", "/v1/agents/sessions").status, 200)

    def test_create_get_delete_and_nothing_left(self):
        s = self.create(metadata={"team": "a"})
        self.assertEqual(s["object"], "agent.session")
        self.assertEqual(s["environment"]["type"], "openai_hosted")
        self.assertEqual(s["environment"]["container_size"], "medium")
        self.assertEqual(s["environment"]["network"], {"access": "disabled", "allowed_domains": []})
        for k in ("id", "created_at", "last_active_at", "error", "required_actions", "usage",
                  "vault_ids", "agent", "metadata"):
            self.assertIn(k, s)
        self.wait_ready(s)
        env = self.aok("GET", "/v1/agents/environments/" + s["environment"]["id"])
        self.assertEqual((env["object"], env["status"]), ("agent.environment", "ready"))
        listed = self.aok("GET", "/v1/agents/sessions")["data"]
        self.assertEqual([x["id"] for x in listed], [s["id"]])
        d = self.aok("DELETE", "/v1/agents/sessions/" + s["id"])
        self.assertEqual(d, {"id": s["id"], "object": "agent.session.deleted", "deleted": True})
        self.assert_error(self.areq("GET", "/v1/agents/sessions/" + s["id"]), 404)
        self.assert_error(self.areq("GET", "/v1/agents/environments/" + s["environment"]["id"]),
                          404)
        st = self.agents_state()
        self.assertEqual((st["sessions"], st["environments"], st["artifacts"]), ([], [], []))

    def test_streaming_create_runs_the_first_turn(self):
        events, complete = self.create(
            hosted(env={"FOO": "bar"},
                   files=[{"type": "inline", "path": "/workspace/in.txt", "data": b64(b"a\nb\n")}],
                   setup_commands=[{"command": "mkdir -p /workspace/outputs; echo SETUP-SECRET"}]),
            stream=True, input="Count the lines.\n$ pwd; cat in.txt; echo $FOO\n"
                               "$ wc -l < in.txt > outputs/count.txt; exit 3")
        self.assertTrue(complete)
        types = [e["type"] for e in events]
        self.assertEqual(types[0], "agent.session.created")
        self.assertEqual(types[-2:], ["agent.session.turn.completed", "agent.session.idle"])
        for t in ("agent.session.environment.pending", "agent.session.environment.ready",
                  "agent.session.turn.created", "agent.session.turn.in_progress",
                  "agent.session.turn.item.added", "agent.session.turn.output_text.delta",
                  "agent.session.turn.output_text.done"):
            self.assertIn(t, types)
        self.assertTrue(all(e["event_id"] for e in events))
        self.assertTrue(all(e["obfuscation"] for e in events))  # padding, on by default
        self.assertEqual(len({e["event_id"] for e in events}), len(events))
        self.assertEqual(self.outputs(events), "/workspace\na\nb\nbar\n")
        self.assertNotIn("SETUP-SECRET", json.dumps(events))
        cmds = self.commands(events)
        self.assertEqual([(c["command"], c["exit_code"], c["status"], c["cwd"]) for c in cmds], [
            ("pwd; cat in.txt; echo $FOO", 0, "completed", "/workspace"),
            ("wc -l < in.txt > outputs/count.txt; exit 3", 3, "failed", "/workspace")])
        self.assertTrue(all(isinstance(c["duration_ms"], int) for c in cmds))
        done = events[-2]
        self.assertEqual(done["turn"]["status"], "completed")
        self.assertGreater(done["usage"]["total_tokens"], 0)
        self.assertEqual(done["usage"], done["turn"]["usage"])
        sid = events[0]["session"]["id"]
        arts = self.artifacts(sid)
        self.assertEqual([(a["path"], a["size_bytes"], a["turn_id"]) for a in arts],
                         [("/workspace/outputs/count.txt", 2, done["turn_id"])])
        self.assertEqual(self.content(sid, arts[0]["id"]), b"2\n")
        turns = self.aok("GET", "/v1/agents/sessions/%s/turns" % sid)["data"]
        self.assertEqual([t["id"] for t in turns], [done["turn_id"]])
        self.assertEqual(self.aok("GET", "/v1/agents/sessions/%s/turns/%s" % (sid, done["turn_id"]))
                         ["status"], "completed")
        items = self.aok("GET", "/v1/agents/sessions/%s/items" % sid)["data"]
        self.assertEqual([i["type"] for i in items],
                         ["message", "command_execution", "command_execution", "message"])
        self.aok("DELETE", "/v1/agents/sessions/" + sid)

    def test_validation_names_the_field(self):
        cases = [
            (hosted(container_size="huge"), "environment.container_size"),
            (hosted(network={"access": "restricted", "allowed_domains": ["*.example.com"]}),
             "environment.network.allowed_domains[0]"),
            (hosted(network={"access": "restricted"}), "environment.network.allowed_domains"),
            (hosted(network={"access": "off"}), "environment.network.access"),
            (hosted(files=[{"type": "inline", "path": "/etc/x", "data": ""}]),
             "environment.files[0].path"),
            (hosted(files=[{"type": "inline", "path": "/workspace/../etc/x", "data": ""}]),
             "environment.files[0].path"),
            (hosted(files=[{"type": "inline", "path": "/workspace/x", "data": "!!"}]),
             "environment.files[0].data"),
            (hosted(env={"PATH": "/x"}), "environment.env.PATH"),
            (hosted(env={"OPENAI_API_KEY": "k"}), "environment.env.OPENAI_API_KEY"),
            ({"type": "self_hosted", "workspace_directory": "/w"}, "environment.type"),
            (hosted(setup_commands=[{"cwd": "/workspace"}]),
             "environment.setup_commands[0].command"),
        ]
        for env, param in cases:
            with self.subTest(param=param):
                r = self.areq("POST", "/v1/agents/sessions",
                              {"agent": {"model": "m"}, "environment": env})
                self.assert_error(r, 400, param=param)
        missing_file = [{"type": "file_id", "file_id": "file-nope", "path": "/workspace/a"}]
        r = self.areq("POST", "/v1/agents/sessions",
                      {"agent": {"model": "m"}, "environment": hosted(files=missing_file)})
        self.assert_error(r, 404, param="environment.files[0].file_id")
        self.assert_error(self.areq("POST", "/v1/agents/sessions", {"agent": {"model": "m"}}), 400,
                          param="environment")
        self.assertEqual(self.agents_state()["sessions"], [])

    def test_file_id_files_land_at_their_paths(self):
        fid = self.upload(data=b"x,y\n").json()["id"]
        s = self.create(hosted(files=[{"type": "file_id", "file_id": fid,
                                       "path": "/workspace/data/in.csv"}]))
        self.assertEqual(s["environment"]["files"][0]["file_id"], fid)
        self.assertEqual(s["environment"]["files"][0]["size_bytes"], 4)
        self.wait_ready(s)
        events = self.turn_events(s["id"], "$ cat data/in.csv")
        self.assertEqual(self.outputs(events), "x,y\n")

    def test_setup_failure_fails_the_session_without_echoing(self):
        events, complete = self.create(
            hosted(setup_commands=[{"command": "echo one > /workspace/one"},
                                   {"command": "echo TOPSECRET; exit 7"},
                                   {"command": "touch /workspace/never"}]),
            stream=True, input="$ echo agent-ran")
        self.assertTrue(complete)
        types = [e["type"] for e in events]
        self.assertIn("agent.session.environment.failed", types)
        self.assertIn("error", types)
        self.assertEqual(types[-1], "agent.session.failed")
        self.assertNotIn("agent.session.turn.in_progress", types)
        text = json.dumps(events)
        self.assertNotIn("TOPSECRET", text)
        self.assertNotIn("agent-ran\\n", text)
        self.assertIn("Setup command 2 of 3 exited with code 7", events[-1]["session"]["error"])
        sid = events[0]["session"]["id"]
        r = self.areq("POST", "/v1/agents/sessions/%s/events" % sid,
                      {"events": [self.message("$ true")]})
        self.assert_error(r, 400, message_part="failed")

    def test_setup_commands_run_in_order_with_their_cwd(self):
        s = self.create(hosted(setup_commands=[
            {"command": "mkdir -p sub && echo 1 > sub/log"},
            {"command": "echo 2 >> log", "cwd": "/workspace/sub"}]))
        self.wait_ready(s)
        self.assertEqual(self.outputs(self.turn_events(s["id"], "$ cat sub/log")), "1\n2\n")

    def test_second_turn_by_input_message_and_idempotency(self):
        s = self.create()
        sid = s["id"]
        self.wait_ready(s)
        events = self.turn_events(sid, "```sh\nmkdir -p outputs\nprintf 'v1' > outputs/a.txt\n"
                                       "printf 'same' > outputs/b.txt\n```")
        self.assertEqual([c["command"] for c in self.commands(events)],
                         ["mkdir -p outputs\nprintf 'v1' > outputs/a.txt\n"
                          "printf 'same' > outputs/b.txt"])
        # the stream of an idle session starts at its last idle event, not its whole history
        self.assertEqual(events[0]["type"], "agent.session.idle")
        quiet, _ = self.sse("GET", "/v1/agents/sessions/%s/events?include_obfuscation=false" % sid,
                            stop=lambda evs: len(evs) >= 1)
        self.assertNotIn("obfuscation", quiet[0])
        self.assertEqual(sum(1 for e in events if e["type"] == "agent.session.turn.created"), 1)
        events = self.turn_events(sid, "$ printf 'v2' > outputs/a.txt")
        arts = self.artifacts(sid)
        self.assertEqual([a["path"] for a in arts], ["/workspace/outputs/a.txt",
                                                     "/workspace/outputs/b.txt",
                                                     "/workspace/outputs/a.txt"])
        self.assertEqual([self.content(sid, a["id"]) for a in arts], [b"v1", b"same", b"v2"])
        page = self.aok("GET", "/v1/agents/sessions/%s/artifacts?order=asc&limit=2" % sid)
        self.assertTrue(page["has_more"])
        rest = self.aok("GET", "/v1/agents/sessions/%s/artifacts?order=asc&limit=2&after=%s"
                        % (sid, page["last_id"]))
        self.assertEqual([a["id"] for a in page["data"] + rest["data"]], [a["id"] for a in arts])
        self.assertEqual(self.aok("GET", "/v1/agents/sessions/%s/artifacts?environment_id=nope"
                                  % sid)["data"], [])
        d = self.aok("DELETE", "/v1/agents/sessions/%s/artifacts/%s" % (sid, arts[0]["id"]))
        self.assertEqual(d["object"], "agent.session.artifact.deleted")
        self.assert_error(self.areq("GET", "/v1/agents/sessions/%s/artifacts/%s"
                                    % (sid, arts[0]["id"])), 404)
        self.send(sid, self.message("$ echo once"), key="k1")
        self.wait_status(sid, ("idle",))
        self.send(sid, self.message("$ echo once"), key="k1")
        time.sleep(0.3)
        self.assertEqual(len(self.aok("GET", "/v1/agents/sessions/%s/turns" % sid)["data"]), 3)
        self.aok("DELETE", "/v1/agents/sessions/" + sid)
        st = self.agents_state()
        self.assertEqual((st["sessions"], st["artifacts"]), ([], []))

    def test_cancel_stops_the_running_command(self):
        s = self.create()
        sid = s["id"]
        self.wait_ready(s)
        got = []

        def until_ended(evs):
            got[:] = evs  # as they arrive, so that the wait below sees "started"
            return evs and evs[-1]["type"] == "agent.session.idle" and any(
                e["type"] in TERMINAL_TURN for e in evs)
        t = threading.Thread(target=lambda: self.sse(
            "GET", "/v1/agents/sessions/%s/events" % sid, stop=until_ended))
        t.start()
        time.sleep(0.3)
        self.send(sid, self.message("$ echo started; sleep 30\n$ echo never"))
        deadline = time.monotonic() + 20
        while "started" not in self.outputs(got) and time.monotonic() < deadline:
            time.sleep(0.05)
        self.assertIn("started", self.outputs(got))  # the cancel comes while the command runs
        t0 = time.monotonic()
        self.send(sid, {"type": "agent.session.input.cancel"})
        t.join(timeout=30)
        self.assertLess(time.monotonic() - t0, 10)
        types = [e["type"] for e in got]
        self.assertIn("agent.session.turn.cancelled", types)
        self.assertNotIn("never", self.outputs(got))
        self.assertEqual(self.admin("GET", "/_fake/state")["running_commands"], 0)

    def test_the_api_key_never_enters_the_sandbox_or_an_event(self):
        events, _ = self.create(stream=True, input="$ env; cat /proc/self/environ | tr '\\0' '\\n'")
        self.assertIn("HOME=/workspace", self.outputs(events))
        self.assertNotIn(KEY, json.dumps(events))

    def test_a_dropped_create_stream_leaves_the_turn_running(self):
        self.admin("POST", "/_fake/faults", {"drop_mid_stream": True, "after_frames": 2,
                                             "path_prefix": "/v1/agents/sessions",
                                             "method": "POST"})
        events, complete = self.create(stream=True, input="$ sleep 0.5; echo finished")
        self.assertFalse(complete)
        self.assertEqual(len(events), 2)
        sid = events[0]["session"]["id"]
        self.wait_status(sid, ("idle",))
        turn = self.aok("GET", "/v1/agents/sessions/%s/turns" % sid)["data"][0]
        self.assertEqual(turn["status"], "completed")
        items = self.aok("GET", "/v1/agents/sessions/%s/items" % sid)["data"]
        self.assertEqual([i.get("output") for i in items if i["type"] == "command_execution"],
                         ["finished\n"])

    def test_scenario_turns_play_when_the_input_has_no_commands(self):
        self.scenario({"shell": ["echo from-scenario > outputs/s.txt"]}, {"message": "all done"},
                      {"fail": {"code": "server_error", "message": "scripted failure"}})
        events, _ = self.create(hosted(setup_commands=[{"command": "mkdir outputs"}]),
                                stream=True, input="Please analyse the file.")
        texts = [e["text"] for e in events if e["type"] == "agent.session.turn.output_text.done"]
        self.assertEqual(texts, ["all done"])
        sid = events[0]["session"]["id"]
        self.assertEqual(self.content(sid, self.artifacts(sid)[0]["id"]), b"from-scenario\n")
        events = self.turn_events(sid, "Go on.")
        failed = [e for e in events if e["type"] == "agent.session.turn.failed"]
        self.assertEqual(failed[0]["turn"]["error"],
                         {"code": "server_error", "message": "scripted failure"})
        self.assertEqual(events[-1]["type"], "agent.session.idle")


running = fake_openai_test.StartupTest.running  # is a process with that command line alive


class ConcurrencyAndShutdownTest(AgentsBase):
    def test_sessions_in_parallel_keep_their_own_workspaces(self):
        def one(i):
            events, _ = self.create(
                hosted(files=[{"type": "inline", "path": "/workspace/id.txt",
                               "data": b64(str(i).encode())}],
                       setup_commands=[{"command": "mkdir outputs"}]),
                stream=True, input="$ sleep 0.2; cp id.txt outputs/out.txt; cat id.txt")
            sid = events[0]["session"]["id"]
            self.assertEqual(self.outputs(events), str(i))
            self.assertEqual([self.content(sid, a["id"]) for a in self.artifacts(sid)],
                             [str(i).encode()])
            self.aok("DELETE", "/v1/agents/sessions/" + sid)
        self.assertEqual(self.in_parallel(one, 6, 120), [])
        st = self.admin("GET", "/_fake/state")
        self.assertEqual((st["agents"]["sessions"], st["running_commands"]), ([], 0))

    def test_sigterm_kills_running_agent_commands_and_removes_workspaces(self):
        marker = "sleep 43.%d" % os.getpid()
        f = Fake()
        other = AgentsBase()
        other.fake = f
        try:
            s = other.create(input="$ " + marker)
            deadline = time.monotonic() + 20
            while not running(marker) and time.monotonic() < deadline:
                time.sleep(0.05)
            self.assertTrue(running(marker))
        finally:
            f.stop()
        self.assertEqual(f.proc.returncode, 0)
        deadline = time.monotonic() + 10
        while running(marker) and time.monotonic() < deadline:
            time.sleep(0.05)
        self.assertFalse(running(marker))
        workdir = b"".join(f.stderr_chunks).decode().split("workdir ")[1].split(")")[0]
        self.assertFalse(os.path.exists(workdir))
        self.assertTrue(s["id"])


class NetworkTest(AgentsBase):
    def setUp(self):
        super().setUp()
        self.listener = socket.socket()
        self.listener.bind(("127.0.0.1", 0))
        self.listener.listen(16)
        self.port = self.listener.getsockname()[1]
        self.hits = 0
        threading.Thread(target=self.serve, daemon=True).start()

    def tearDown(self):
        self.listener.close()

    def serve(self):
        while True:
            try:
                c, _ = self.listener.accept()
            except OSError:
                return
            self.hits += 1
            try:
                c.recv(4096)
                c.sendall(b"HTTP/1.1 200 OK\r\nContent-Length: 5\r\nConnection: close\r\n\r\nhello")
            except OSError:
                pass
            c.close()

    def connect_cmd(self):
        return ("$ python3 -c \"import socket; socket.create_connection(('127.0.0.1', %d), 3); "
                "print('reached')\"" % self.port)

    def run_turn(self, network):
        s = self.create(hosted(network=network))
        self.wait_ready(s)
        return s["id"], self.turn_events(s["id"], self.connect_cmd())

    def test_disabled_has_no_route_out(self):
        _, events = self.run_turn({"access": "disabled"})
        self.assertNotIn("reached", self.outputs(events))
        self.assertNotEqual(self.commands(events)[0]["exit_code"], 0)
        self.assertEqual(self.hits, 0)

    def test_leave_network_open_switch_breaks_disabled(self):
        self.admin("POST", "/_fake/agents/network", {"leave_open": True})
        _, events = self.run_turn({"access": "disabled"})
        self.assertIn("reached", self.outputs(events))
        self.assertTrue(self.agents_state()["leave_network_open"])
        self.admin("POST", "/_fake/reset", {})
        self.assertFalse(self.agents_state()["leave_network_open"])

    def test_enabled_reaches_the_host(self):
        _, events = self.run_turn({"access": "enabled"})
        self.assertIn("reached", self.outputs(events))

    def test_restricted_goes_through_a_proxy_that_refuses_other_names(self):
        s = self.create(hosted(network={"access": "restricted", "allowed_domains": ["localhost"]}))
        sid = s["id"]
        self.wait_ready(s)
        events = self.turn_events(sid, "\n".join([
            "$ curl -sS -m 5 -p -o /dev/null -w '%%{http_code}\\n' http://localhost:%d/ok; "
            "echo rc=$?" % self.port,
            "$ curl -sS -m 5 -o /dev/null https://example.com/ 2>&1; echo rc=$?",
            "$ curl -sS -m 5 --noproxy '*' http://127.0.0.1:%d/ 2>&1; echo rc=$?" % self.port]))
        out = [c["output"] for c in self.commands(events)]
        self.assertIn("200\nrc=0", out[0])
        self.assertIn("403", out[1])
        self.assertNotIn("rc=0", out[1])
        self.assertNotIn("rc=0", out[2])  # no route around the proxy
        self.assertEqual(self.hits, 1)
        env = [e for e in self.agents_state()["environments"] if e["session_id"] == sid][0]
        self.assertEqual([(d["host"], d["allowed"]) for d in env["proxy_decisions"]],
                         [("localhost", True), ("example.com", False)])


class FaultsTest(AgentsBase):
    def ready_session(self, **env):
        s = self.create(hosted(setup_commands=[{"command": "mkdir outputs"}], **env))
        self.wait_ready(s)
        return s

    def test_http_faults_apply_to_agents_paths(self):
        self.admin("POST", "/_fake/faults", {"status": 429, "retry_after": "1",
                                             "path_prefix": "/v1/agents/", "times": 1})
        r = self.areq("GET", "/v1/agents/sessions")
        self.assert_error(r, 429)
        self.assertEqual(r.headers["Retry-After"], "1")
        self.admin("POST", "/_fake/faults", {"status": 500, "path_prefix": "/v1/agents/sessions",
                                             "method": "POST"})
        self.assert_error(self.areq("POST", "/v1/agents/sessions",
                                    {"agent": {"model": "m"}, "environment": hosted()}), 500)
        self.assertEqual(self.agents_state()["sessions"], [])

    def test_dropped_stream_then_reconnect_replays_the_turn(self):
        s = self.ready_session()
        sid = s["id"]
        self.admin("POST", "/_fake/faults", {"drop_mid_stream": True, "after_frames": 4,
                                             "method": "GET", "path_prefix": "/v1/agents/"})
        first, complete = [], [True]

        def follow():
            evs, ok = self.sse("GET", "/v1/agents/sessions/%s/events" % sid)
            first.extend(evs)
            complete[0] = ok
        t = threading.Thread(target=follow)
        t.start()
        time.sleep(0.3)
        self.send(sid, self.message("$ echo one\n$ sleep 1; echo two"))
        t.join(timeout=30)
        self.assertFalse(complete[0])
        self.assertEqual(len(first), 4)  # after_frames whole frames, then a cut one
        again, _ = self.sse("GET", "/v1/agents/sessions/%s/events" % sid,
                            stop=lambda evs: any(e["type"] == "agent.session.turn.completed"
                                                 for e in evs))
        seen = {e["event_id"] for e in first}
        self.assertTrue(seen <= {e["event_id"] for e in again},
                        ([e["type"] for e in first], [e["type"] for e in again]))  # same ids
        merged = first + [e for e in again if e["event_id"] not in seen]
        self.assertEqual(self.outputs(merged), "one\ntwo\n")
        self.assertEqual(sum(1 for e in merged if e["type"] == "agent.session.turn.created"), 1)

    def test_a_reconnect_after_the_turn_ended_starts_at_idle(self):
        # What a live-only server would do too: the turn's end fell in the gap, so the client
        # reads the turn instead (GET …/turns/{id}).
        self.admin("POST", "/_fake/faults", {"drop_mid_stream": True, "after_frames": 3,
                                             "path_prefix": "/v1/agents/sessions",
                                             "method": "POST"})
        first, complete = self.create(stream=True, input="$ echo done")
        self.assertFalse(complete)
        sid = first[0]["session"]["id"]
        turn_id = [e for e in first if e["type"] == "agent.session.turn.created"][0]["turn_id"]
        self.wait_status(sid, ("idle",))
        again, _ = self.sse("GET", "/v1/agents/sessions/%s/events" % sid,
                            stop=lambda evs: len(evs) >= 1)
        self.assertEqual([e["type"] for e in again], ["agent.session.idle"])
        turn = self.aok("GET", "/v1/agents/sessions/%s/turns/%s" % (sid, turn_id))
        self.assertEqual(turn["status"], "completed")

    def test_stream_settings_cut_hold_and_live_only(self):
        # A server that keeps no backlog, a create stream cut as the first command starts, and
        # a reconnect answered only once the turn is over: the rest of the turn is in the gap.
        self.admin("POST", "/_fake/agents/stream",
                   {"replay": False, "hold_next": 1,
                    "cut_after_type": "agent.session.turn.item.added"})
        first, complete = self.create(stream=True, input="$ echo one\n$ echo two")
        self.assertFalse(complete)
        self.assertEqual(first[-1]["type"], "agent.session.turn.item.added")
        sid = first[0]["session"]["id"]
        c = self.conn(60)
        c.request("GET", "/v1/agents/sessions/%s/events" % sid,
                  headers=dict(BETA, Authorization="Bearer " + KEY))
        r = c.getresponse()  # held until the session rests
        self.assertEqual(r.status, 200)
        self.assertEqual(self.aok("GET", "/v1/agents/sessions/" + sid)["status"], "idle")
        c.close()
        items = self.aok("GET", "/v1/agents/sessions/%s/items" % sid)["data"]
        self.assertEqual([i["type"] for i in items],
                         ["message", "command_execution", "command_execution", "message"])
        # Live only: a new stream has nothing from before it, not even the last rest.
        got = self.turn_events(sid, "$ echo three")
        self.assertEqual(got[0]["type"], "agent.session.in_progress")
        self.assertEqual(self.outputs(got), "three\n")
        self.assertEqual(self.agents_state()["stream"]["cut_times"], 0)

    def test_environment_reset_mid_turn_loses_files(self):
        s = self.ready_session(files=[{"type": "inline", "path": "/workspace/in.txt",
                                       "data": b64(b"x")}])
        self.admin("POST", "/_fake/agents/faults", {"kind": "environment_reset",
                                                    "after_commands": 1})
        events = self.turn_events(s["id"], "$ cat in.txt\n$ cat in.txt")
        resets = [e for e in events if e["type"] == "agent.session.environment.reset"]
        self.assertEqual([(r["environment_id"], r["reset_count"]) for r in resets],
                         [(s["environment"]["id"], 1)])
        cmds = self.commands(events)
        self.assertEqual(cmds[0]["exit_code"], 0)
        self.assertNotEqual(cmds[1]["exit_code"], 0)
        self.assertEqual(self.agents_state()["faults_pending"], 0)

    def test_environment_expiry_fails_the_turn_and_keeps_artifacts(self):
        s = self.ready_session()
        sid = s["id"]
        self.turn_events(sid, "$ echo kept > outputs/k.txt")
        self.admin("POST", "/_fake/agents/faults", {"kind": "environment_expired",
                                                    "after_commands": 1})
        events = self.turn_events(sid, "$ echo lost > outputs/l.txt\n$ echo never")
        types = [e["type"] for e in events]
        self.assertIn("agent.session.environment.expired", types)
        failed = [e for e in events if e["type"] == "agent.session.turn.failed"][0]
        self.assertEqual(failed["turn"]["error"]["code"], "sandbox_error")
        self.assertEqual(types[-1], "agent.session.failed")
        self.assertNotIn("never", self.outputs(events))
        env = self.aok("GET", "/v1/agents/environments/" + s["environment"]["id"])
        self.assertEqual(env["status"], "expired")
        arts = self.artifacts(sid)
        self.assertEqual([a["path"] for a in arts], ["/workspace/outputs/k.txt"])
        self.assertEqual(self.content(sid, arts[0]["id"]), b"kept\n")
        self.aok("DELETE", "/v1/agents/sessions/" + sid)
        self.assertEqual(self.agents_state()["artifacts"], [])

    def test_expire_control_on_an_idle_session(self):
        s = self.ready_session()
        self.turn_events(s["id"], "$ echo a > outputs/a.txt")
        self.admin("POST", "/_fake/agents/environments/%s/expire" % s["environment"]["id"], {})
        self.assertEqual(self.aok("GET", "/v1/agents/sessions/" + s["id"])["status"], "failed")
        self.assertEqual(self.content(s["id"], self.artifacts(s["id"])[0]["id"]), b"a\n")
        self.assertFalse(self.agents_state()["environments"][0]["workspace_exists"])

    def test_failed_turn_fault(self):
        s = self.ready_session()
        self.admin("POST", "/_fake/agents/faults", {"kind": "turn_failed", "code": "server_error",
                                                    "session_id": "sess_other"})
        self.admin("POST", "/_fake/agents/faults", {"kind": "turn_failed", "code": "server_error",
                                                    "message": "boom", "after_commands": 0,
                                                    "session_id": s["id"]})
        events = self.turn_events(s["id"], "$ echo never > outputs/x")
        failed = [e for e in events if e["type"] == "agent.session.turn.failed"][0]
        self.assertEqual(failed["turn"]["error"], {"code": "server_error", "message": "boom"})
        self.assertEqual(self.commands(events), [])
        self.assertEqual(self.artifacts(s["id"]), [])
        self.assertEqual(events[-1]["type"], "agent.session.idle")
        self.assertEqual(self.agents_state()["faults_pending"], 1)  # the other session's

    def test_reset_deletes_every_session(self):
        for _ in range(3):
            self.create()
        self.admin("POST", "/_fake/reset", {})
        st = self.agents_state()
        self.assertEqual((st["sessions"], st["environments"], st["artifacts"]), ([], [], []))


class PlaybooksTest(AgentsBase):
    """The sandgate playbooks' own programs, driven by the scenario (the same mechanism as the
    Responses fake's AnalystTurns), leave their artifacts under /workspace/outputs."""

    def test_financial_analyst_reference_program(self):
        program = read_source("daemon/playbooks/financial_analyst/reference/analyze_financials.py")
        csv = read_source("tests/data/northstar_cloud_financial_statements.csv").encode()
        self.scenario({"shell": ["cat > analyze_financials.py <<'SANDGATE_EOF'\n" + program +
                                 "\nSANDGATE_EOF",
                                 "python3 analyze_financials.py statements.csv --out-dir outputs"],
                       "timeout_ms": 60000},
                      {"message": "The six artifacts are written."})
        events, _ = self.create(
            hosted(files=[{"type": "inline", "path": "/workspace/statements.csv",
                           "data": b64(csv)}]),
            stream=True, input="Analyse statements.csv; write the artifacts to /workspace/outputs.")
        self.assertEqual([c["exit_code"] for c in self.commands(events)], [0, 0])
        sid = events[0]["session"]["id"]
        names = sorted(a["path"].rsplit("/", 1)[1] for a in self.artifacts(sid))
        self.assertEqual(len(names), 6, names)
        self.assertIn("calculated_metrics.csv", names)

    def test_sandbox_probe_reference_program(self):
        program = read_source("daemon/playbooks/sandbox_probe/reference/sandbox_probe.py")
        data = b"year,revenue\n2024,1\n"
        config = {"env": {"TEAM": "blue"}, "network": "disabled", "allowed_domains": [],
                  "probe_url": "https://example.com/", "setup_commands": ["echo setup-ran"],
                  "inputs": [{"name": "data.csv", "sha256": hashlib.sha256(data).hexdigest()}]}
        self.scenario({"shell": ["cat > sandbox_probe.py <<'SANDGATE_EOF'\n" + program +
                                 "\nSANDGATE_EOF",
                                 "cat > probe.json <<'SANDGATE_EOF'\n" + json.dumps(config) +
                                 "\nSANDGATE_EOF",
                                 "python3 sandbox_probe.py probe.json && mkdir -p outputs && "
                                 "mv sandbox-report.md checks.json outputs/"],
                       "timeout_ms": 60000},
                      {"message": "Probe written."})
        events, _ = self.create(
            hosted(env={"TEAM": "blue"}, setup_commands=[{"command": "echo setup-ran"}],
                   files=[{"type": "inline", "path": "/workspace/data.csv", "data": b64(data)}]),
            stream=True, input="Probe this sandbox.")
        sid = events[0]["session"]["id"]
        arts = {a["path"].rsplit("/", 1)[1]: a for a in self.artifacts(sid)}
        self.assertEqual(sorted(arts), ["checks.json", "sandbox-report.md"])
        checks = json.loads(self.content(sid, arts["checks.json"]["id"]))
        self.assertEqual(checks["facts"]["cwd"], "/workspace")
        with open("/etc/os-release") as fh:  # there, as on a hosted box
            pretty = [ln.split("=", 1)[1].strip().strip('"') for ln in fh
                      if ln.startswith("PRETTY_NAME=")]
        self.assertEqual(checks["facts"]["os"], pretty[0])
        self.assertEqual(checks["env"], {"TEAM": "matches"})
        self.assertTrue(checks["inputs"][0]["readable"])
        self.assertFalse(checks["network"]["reached"])


if __name__ == "__main__":
    unittest.main()
