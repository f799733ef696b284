#!/usr/bin/env python3
"""Tests of the fake OpenAI server over real HTTP (it runs as a subprocess on port 0).

Run: python3 tests/fakes/openai/fake_openai_test.py [-v]
"""

import http.client
import json
import os
import select
import socket
import subprocess
import sys
import threading
import time
import unittest
import uuid

HERE = os.path.dirname(os.path.abspath(__file__))
FAKE = os.path.join(HERE, "fake_openai.py")
KEY = "test-key"

ANALYZE_PY = r'''import csv, json, sys
rows = list(csv.DictReader(open(sys.argv[1])))
out = []
for r in rows:
    rev, ni = float(r["revenue"]), float(r["net_income"])
    out.append({"year": r["year"], "net_margin": round(ni / rev, 4)})
with open("calculated_metrics.csv", "w") as f:
    f.write("year,net_margin\n")
    for o in out:
        f.write("%s,%s\n" % (o["year"], o["net_margin"]))
print(json.dumps(out))
'''
INPUT_CSV = b"year,revenue,net_income\n2022,100,10\n2023,200,30\n"


def parse_frame(frame):
    """One SSE frame (without its blank line) -> (event, data); a comment gives (None, "")."""
    ev, data = None, []
    for line in frame.decode().split("\n"):
        if line.startswith("event: "):
            ev = line[len("event: "):]
        elif line.startswith("data: "):
            data.append(line[len("data: "):])
    return ev, "\n".join(data)


class Fake:
    def __init__(self, *extra):
        self.proc = subprocess.Popen([sys.executable, FAKE, "--port", "0", "--api-key", KEY] + list(extra),
                                     stdout=subprocess.PIPE, stderr=subprocess.PIPE)
        ready, _, _ = select.select([self.proc.stdout], [], [], 20)
        if not ready:
            self.stop()
            raise RuntimeError("fake did not start within 20 s")
        line = self.proc.stdout.readline().decode()
        if not line.startswith("listening on http://"):
            self.stop()
            raise RuntimeError("unexpected first line: %r" % line)
        hostport = line.strip()[len("listening on http://"):]
        self.host, port = hostport.rsplit(":", 1)
        self.port = int(port)
        self.stderr_chunks = []
        self._t = threading.Thread(target=self._drain, daemon=True)
        self._t.start()

    def _drain(self):
        for line in self.proc.stderr:
            self.stderr_chunks.append(line)

    def stop(self):
        if self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(timeout=10)
        if getattr(self, "_t", None) is not None:
            self._t.join(timeout=5)
        self.rest_of_stdout = self.proc.stdout.read()
        self.proc.stdout.close()
        self.proc.stderr.close()


class Resp:
    def __init__(self, status, headers, body):
        self.status, self.headers, self.body = status, headers, body

    def json(self):
        return json.loads(self.body)


class Base(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.fake = Fake()

    @classmethod
    def tearDownClass(cls):
        cls.fake.stop()
        log = b"".join(cls.fake.stderr_chunks)
        assert KEY.encode() not in log, "the API key leaked into the log"

    def setUp(self):
        self.admin("POST", "/_fake/reset", {})

    # ---- HTTP helpers

    def conn(self, timeout=30):
        return http.client.HTTPConnection(self.fake.host, self.fake.port, timeout=timeout)

    def req(self, method, path, body=None, headers=None, auth=True, raw=None, timeout=30):
        h = dict(headers or {})
        if auth:
            h.setdefault("Authorization", "Bearer " + KEY)
        data = raw
        if body is not None:
            data = json.dumps(body).encode()
            h.setdefault("Content-Type", "application/json")
        c = self.conn(timeout)
        try:
            c.request(method, path, body=data, headers=h)
            r = c.getresponse()
            return Resp(r.status, r.headers, r.read())
        finally:
            c.close()

    def ok(self, method, path, body=None, **kw):
        r = self.req(method, path, body, **kw)
        self.assertEqual(r.status, 200, r.body)
        return r.json()

    def admin(self, method, path, body=None):
        r = self.req(method, path, body, auth=False)
        self.assertEqual(r.status, 200, r.body)
        return r.json()

    @staticmethod
    def in_parallel(fn, n, timeout):
        """Runs fn(0) … fn(n-1) on n threads; returns the (i, repr(exception)) of those that
        raised."""
        errors = []

        def one(i):
            try:
                fn(i)
            except Exception as e:  # noqa: BLE001
                errors.append((i, repr(e)))
        threads = [threading.Thread(target=one, args=(i,)) for i in range(n)]
        for t in threads:
            t.start()
        for t in threads:
            t.join(timeout=timeout)
        return errors

    def scenario(self, *turns):
        self.admin("POST", "/_fake/scenario", {"turns": list(turns)})

    def assert_error(self, r, status, param=None, message_part=None):
        self.assertEqual(r.status, status, r.body)
        err = r.json()["error"]
        self.assertEqual(set(err), {"message", "type", "param", "code"})
        if param is not None:
            self.assertEqual(err["param"], param)
        if message_part is not None:
            self.assertIn(message_part, err["message"])
        self.assertTrue(r.headers.get("x-request-id"))
        return err

    def multipart(self, parts, boundary=None):
        boundary = boundary or "----b" + uuid.uuid4().hex
        out = b""
        for name, value, filename in parts:
            disp = 'form-data; name="%s"' % name
            if filename is not None:
                disp += '; filename="%s"' % filename
            out += b"--" + boundary.encode() + b"\r\n"
            out += ("Content-Disposition: %s\r\n" % disp).encode()
            if filename is not None:
                out += b"Content-Type: application/octet-stream\r\n"
            out += b"\r\n" + value + b"\r\n"
        out += b"--" + boundary.encode() + b"--\r\n"
        return out, "multipart/form-data; boundary=" + boundary

    def upload(self, name="input.csv", data=INPUT_CSV, purpose=b"user_data", reverse=False):
        parts = [("file", data, name), ("purpose", purpose, None)]
        if reverse:
            parts.reverse()
        body, ct = self.multipart(parts)
        return self.req("POST", "/v1/files", raw=body, headers={"Content-Type": ct})

    def container(self, **kw):
        body = {"name": "t"}
        body.update(kw)
        return self.ok("POST", "/v1/containers", body)

    def hosted_tools(self, cid):
        return [{"type": "shell", "environment": {"type": "container_reference", "container_id": cid}}]

    def stream(self, path, body, chunk=7, timeout=30, times=None, method="POST"):
        """POSTs with stream:true (or GETs when body is None); reads in small pieces; returns
        (frames, complete)."""
        c = self.conn(timeout)
        if body is None:
            c.request(method if method != "POST" else "GET", path,
                      headers={"Authorization": "Bearer " + KEY})
        else:
            c.request(method, path, body=json.dumps(body).encode(),
                      headers={"Authorization": "Bearer " + KEY,
                               "Content-Type": "application/json"})
        r = c.getresponse()
        self.assertEqual(r.status, 200)
        self.assertTrue(r.headers["Content-Type"].startswith("text/event-stream"))
        frames = []

        def on_frame(ev, data):
            frames.append((ev, data))
            if times is not None:
                times.append(time.monotonic())
        return frames, self.read_frames(c, r, chunk, on_frame)

    @staticmethod
    def read_frames(c, r, chunk, on_frame):
        """Reads an SSE body in pieces of `chunk` bytes, calling on_frame(event, data) per frame
        until it returns True; closes the connection. True when the body ended cleanly (or
        on_frame stopped reading), False when it was cut."""
        buf = b""
        try:
            while True:
                piece = r.read1(chunk)  # read() would wait for the next chunk header
                if not piece:
                    break
                buf += piece
                while b"\n\n" in buf:
                    frame, buf = buf.split(b"\n\n", 1)
                    if on_frame(*parse_frame(frame)):
                        return True
        except (http.client.IncompleteRead, ConnectionError, OSError):
            return False
        finally:
            c.close()
        return not buf.strip()


class AuthAndRoutingTest(Base):
    def test_missing_and_wrong_key_are_401_with_envelope(self):
        self.assert_error(self.req("GET", "/v1/files", auth=False), 401)
        err = self.assert_error(self.req("GET", "/v1/files", headers={"Authorization": "Bearer nope"}), 401)
        self.assertEqual(err["code"], "invalid_api_key")

    def test_unknown_route_is_404(self):
        self.assert_error(self.req("GET", "/v1/nothing"), 404, message_part="Invalid URL")

    def test_every_response_has_request_id(self):
        r = self.req("GET", "/v1/containers")
        self.assertEqual(r.status, 200)
        self.assertTrue(r.headers["x-request-id"].startswith("req_"))

    def test_bad_json_is_400(self):
        r = self.req("POST", "/v1/containers", raw=b"{nope", headers={"Content-Type": "application/json"})
        self.assert_error(r, 400, message_part="parse the JSON")


class FilesTest(Base):
    def test_upload_parts_in_either_order_list_get_content_delete(self):
        a = self.upload("a.csv", reverse=False)
        b = self.upload("b data.csv", b"x" * 10, reverse=True)
        self.assertEqual(a.status, 200, a.body)
        self.assertEqual(b.status, 200, b.body)
        fa, fb = a.json(), b.json()
        self.assertTrue(fa["id"].startswith("file-"))
        self.assertEqual((fa["object"], fa["bytes"], fa["filename"], fa["purpose"], fa["status"]),
                         ("file", len(INPUT_CSV), "a.csv", "user_data", "processed"))
        self.assertEqual(fb["filename"], "b data.csv")
        lst = self.ok("GET", "/v1/files")
        self.assertEqual([f["id"] for f in lst["data"]], [fb["id"], fa["id"]])  # desc by default
        self.assertEqual(lst["object"], "list")
        asc = self.ok("GET", "/v1/files?order=asc&limit=1")
        self.assertEqual([f["id"] for f in asc["data"]], [fa["id"]])
        self.assertTrue(asc["has_more"])
        self.assertEqual(self.ok("GET", "/v1/files/" + fa["id"]), fa)
        r = self.req("GET", "/v1/files/%s/content" % fa["id"])
        self.assertEqual(r.body, INPUT_CSV)
        d = self.ok("DELETE", "/v1/files/" + fa["id"])
        self.assertEqual(d, {"id": fa["id"], "object": "file", "deleted": True})
        self.assert_error(self.req("GET", "/v1/files/" + fa["id"]), 404)
        self.assert_error(self.req("DELETE", "/v1/files/" + fa["id"]), 404)

    def test_binary_content_with_boundary_like_bytes_survives(self):
        data = bytes(range(256)) * 4 + b"\r\n--notaboundary\r\n"
        f = self.upload("bin.dat", data).json()
        self.assertEqual(self.req("GET", "/v1/files/%s/content" % f["id"]).body, data)

    def test_validation(self):
        body, ct = self.multipart([("file", b"x", "x.txt")])
        self.assert_error(self.req("POST", "/v1/files", raw=body, headers={"Content-Type": ct}),
                          400, param="purpose")
        body, ct = self.multipart([("purpose", b"user_data", None)])
        self.assert_error(self.req("POST", "/v1/files", raw=body, headers={"Content-Type": ct}),
                          400, param="file")
        self.assert_error(self.upload(purpose=b"nonsense"), 400, param="purpose")
        self.assert_error(self.req("POST", "/v1/files", {"purpose": "user_data"}), 400)

    def test_expires_after(self):
        body, ct = self.multipart([("expires_after[seconds]", b"3600", None), ("file", b"x", "x.txt"),
                                   ("purpose", b"batch", None), ("expires_after[anchor]", b"created_at", None)])
        f = self.ok("POST", "/v1/files", raw=body, headers={"Content-Type": ct})
        self.assertEqual(f["expires_at"], f["created_at"] + 3600)
        self.admin("POST", "/_fake/clock", {"advance_seconds": 3601})
        self.assert_error(self.req("GET", "/v1/files/" + f["id"]), 404)
        body, ct = self.multipart([("file", b"x", "x.txt"), ("purpose", b"batch", None),
                                   ("expires_after[anchor]", b"created_at", None),
                                   ("expires_after[seconds]", b"10", None)])
        self.assert_error(self.req("POST", "/v1/files", raw=body, headers={"Content-Type": ct}),
                          400, param="expires_after.seconds")


class ContainersTest(Base):
    def test_create_retrieve_list_delete(self):
        f = self.upload().json()
        c = self.container(name="job-42", file_ids=[f["id"]], memory_limit="4g",
                           expires_after={"anchor": "last_active_at", "minutes": 5},
                           network_policy={"type": "allowlist", "allowed_domains": ["pypi.org"],
                                           "domain_secrets": [{"domain": "pypi.org", "name": "TOKEN",
                                                               "value": "s3cret"}]})
        self.assertTrue(c["id"].startswith("cntr_"))
        self.assertEqual((c["object"], c["name"], c["status"], c["memory_limit"]),
                         ("container", "job-42", "running", "4g"))
        self.assertEqual(c["expires_after"], {"anchor": "last_active_at", "minutes": 5})
        self.assertEqual(c["network_policy"], {"type": "allowlist", "allowed_domains": ["pypi.org"]})
        self.assertNotIn("s3cret", json.dumps(c))
        self.assertEqual(self.ok("GET", "/v1/containers/" + c["id"]), c)
        files = self.ok("GET", "/v1/containers/%s/files" % c["id"])["data"]
        self.assertEqual([(x["path"], x["source"], x["bytes"]) for x in files],
                         [("/mnt/data/input.csv", "user", len(INPUT_CSV))])
        d = self.ok("DELETE", "/v1/containers/" + c["id"])
        self.assertEqual(d, {"id": c["id"], "object": "container.deleted", "deleted": True})
        self.assert_error(self.req("GET", "/v1/containers/" + c["id"]), 404)
        self.assert_error(self.req("DELETE", "/v1/containers/" + c["id"]), 404)
        self.ok("DELETE", "/v1/files/" + f["id"])
        st = self.admin("GET", "/_fake/state")
        self.assertEqual((st["containers"], st["files"]), ([], []))

    def test_defaults(self):
        c = self.container()
        self.assertEqual(c["expires_after"], {"anchor": "last_active_at", "minutes": 20})
        self.assertEqual(c["memory_limit"], "1g")

    def test_list_pagination(self):
        ids = [self.container(name="n%d" % i)["id"] for i in range(5)]
        p1 = self.ok("GET", "/v1/containers?limit=2&order=asc")
        self.assertEqual([c["id"] for c in p1["data"]], ids[:2])
        self.assertTrue(p1["has_more"])
        self.assertEqual((p1["first_id"], p1["last_id"]), (ids[0], ids[1]))
        p2 = self.ok("GET", "/v1/containers?limit=2&order=asc&after=" + p1["last_id"])
        self.assertEqual([c["id"] for c in p2["data"]], ids[2:4])
        p3 = self.ok("GET", "/v1/containers?limit=2&order=asc&after=" + p2["last_id"])
        self.assertEqual([c["id"] for c in p3["data"]], ids[4:])
        self.assertFalse(p3["has_more"])
        desc = self.ok("GET", "/v1/containers")
        self.assertEqual([c["id"] for c in desc["data"]], list(reversed(ids)))
        self.assertEqual(len(self.ok("GET", "/v1/containers?name=n3")["data"]), 1)
        self.assert_error(self.req("GET", "/v1/containers?limit=101"), 400, param="limit")
        self.assert_error(self.req("GET", "/v1/containers?order=up"), 400, param="order")

    def test_validation(self):
        cases = [
            ({}, "name"),
            ({"name": 3}, "name"),
            ({"name": "x", "memory_limit": "2g"}, "memory_limit"),
            ({"name": "x", "expires_after": {"anchor": "created_at", "minutes": 5}}, "expires_after.anchor"),
            ({"name": "x", "expires_after": {"anchor": "last_active_at"}}, "expires_after.minutes"),
            ({"name": "x", "expires_after": {"anchor": "last_active_at", "minutes": 0}}, "expires_after.minutes"),
            ({"name": "x", "network_policy": {"type": "open"}}, "network_policy.type"),
            ({"name": "x", "network_policy": {"type": "allowlist", "allowed_domains": []}},
             "network_policy.allowed_domains"),
            ({"name": "x", "network_policy": {"type": "allowlist", "allowed_domains": ["a.com"],
                                              "domain_secrets": [{"domain": "a.com", "name": "K"}]}},
             "network_policy.domain_secrets[0].value"),
            ({"name": "x", "nme": "typo"}, "nme"),
            ({"name": "x", "file_ids": "file-1"}, "file_ids"),
        ]
        for body, param in cases:
            with self.subTest(body=body):
                self.assert_error(self.req("POST", "/v1/containers", body), 400, param=param)
        self.assert_error(self.req("POST", "/v1/containers", {"name": "x", "file_ids": ["file-nope"]}),
                          404, param="file_ids[0]")
        self.assertEqual(self.admin("GET", "/_fake/state")["containers"], [])

    def test_disabled_network_policy(self):
        c = self.container(network_policy={"type": "disabled"})
        self.assertEqual(c["network_policy"], {"type": "disabled"})


class ContainerFilesTest(Base):
    def test_upload_copy_list_retrieve_content_delete(self):
        c = self.container()
        base = "/v1/containers/%s/files" % c["id"]
        body, ct = self.multipart([("file", b"hello\n", "notes.txt")])
        up = self.ok("POST", base, raw=body, headers={"Content-Type": ct})
        self.assertTrue(up["id"].startswith("cfile_"))
        self.assertEqual((up["object"], up["path"], up["source"], up["bytes"], up["container_id"]),
                         ("container.file", "/mnt/data/notes.txt", "user", 6, c["id"]))
        f = self.upload("data.csv").json()
        cp = self.ok("POST", base, {"file_id": f["id"]})
        self.assertEqual((cp["path"], cp["source"], cp["bytes"]), ("/mnt/data/data.csv", "user", len(INPUT_CSV)))
        lst = self.ok("GET", base + "?order=asc")
        self.assertEqual([x["id"] for x in lst["data"]], [up["id"], cp["id"]])
        self.assertEqual(self.ok("GET", "%s/%s" % (base, up["id"])), up)
        self.assertEqual(self.req("GET", "%s/%s/content" % (base, cp["id"])).body, INPUT_CSV)
        d = self.ok("DELETE", "%s/%s" % (base, up["id"]))
        self.assertEqual(d, {"id": up["id"], "object": "container.file.deleted", "deleted": True})
        self.assert_error(self.req("GET", "%s/%s" % (base, up["id"])), 404)
        self.assert_error(self.req("GET", "%s/cfile_nope/content" % base), 404)
        self.assert_error(self.req("POST", base, {"file_id": "file-nope"}), 404, param="file_id")
        self.assert_error(self.req("POST", base, {}), 400, param="file_id")
        self.assert_error(self.req("GET", "/v1/containers/cntr_nope/files"), 404)


class HostedShellTest(Base):
    def test_analysis_runs_and_its_artifacts_are_listed_and_downloadable(self):
        f = self.upload("input.csv").json()
        c = self.container(file_ids=[f["id"]])
        self.scenario(
            {"shell": ["cat > analyze.py <<'EOF'\n" + ANALYZE_PY + "EOF", "python3 analyze.py input.csv"]},
            {"shell": ["ls /mnt/data", "echo $HOME; pwd; test -e /etc/passwd && echo host-etc-visible; exit 3"]},
            {"message": "Analysis complete."})
        r = self.ok("POST", "/v1/responses", {"model": "m", "input": "analyse", "tool_choice": "required",
                                             "tools": self.hosted_tools(c["id"])})
        self.assertEqual(r["status"], "completed")
        types = [it["type"] for it in r["output"]]
        self.assertEqual(types, ["shell_call", "shell_call_output", "shell_call", "shell_call_output", "message"])
        call, out = r["output"][0], r["output"][1]
        self.assertEqual(call["call_id"], out["call_id"])
        self.assertEqual(call["environment"], {"type": "container_reference", "container_id": c["id"]})
        self.assertEqual(len(out["output"]), 2)
        self.assertEqual(out["output"][0]["outcome"], {"type": "exit", "exit_code": 0})
        res = out["output"][1]
        self.assertEqual(res["outcome"], {"type": "exit", "exit_code": 0}, res)
        self.assertEqual(json.loads(res["stdout"]), [{"year": "2022", "net_margin": 0.1},
                                                     {"year": "2023", "net_margin": 0.15}])
        second = r["output"][3]["output"]
        self.assertEqual(second[0]["stdout"].split(), ["analyze.py", "calculated_metrics.csv", "input.csv"])
        self.assertEqual(second[1]["outcome"], {"type": "exit", "exit_code": 3})
        state = self.admin("GET", "/_fake/state")
        if state["isolation"] == "bwrap":
            self.assertEqual(second[1]["stdout"], "/mnt/data\n/mnt/data\n")
        msg = r["output"][4]
        self.assertEqual(msg["content"][0]["text"], "Analysis complete.")
        cited = sorted(a["filename"] for a in msg["content"][0]["annotations"])
        self.assertEqual(cited, ["analyze.py", "calculated_metrics.csv"])
        self.assertGreater(r["usage"]["output_tokens"], 0)
        self.assertEqual(r["usage"]["total_tokens"], r["usage"]["input_tokens"] + r["usage"]["output_tokens"])
        files = self.ok("GET", "/v1/containers/%s/files" % c["id"])["data"]
        by_path = {x["path"]: x for x in files}
        self.assertEqual(by_path["/mnt/data/calculated_metrics.csv"]["source"], "assistant")
        self.assertEqual(by_path["/mnt/data/input.csv"]["source"], "user")
        got = self.req("GET", "/v1/containers/%s/files/%s/content"
                       % (c["id"], by_path["/mnt/data/calculated_metrics.csv"]["id"])).body
        self.assertEqual(got, b"year,net_margin\n2022,0.1\n2023,0.15\n")
        self.assertEqual(self.ok("GET", "/v1/responses/" + r["id"]), r)
        self.ok("DELETE", "/v1/containers/" + c["id"])
        self.assertEqual(self.admin("GET", "/_fake/state")["containers"], [])

    def test_timeout_and_output_cap(self):
        c = self.container()
        self.scenario({"shell": ["sleep 20"], "timeout_ms": 300},
                      {"shell": ["head -c 5000 /dev/zero | tr '\\0' a; head -c 3000 /dev/zero | tr '\\0' b >&2"],
                       "max_output_length": 100},
                      {"message": "ok"})
        t0 = time.monotonic()
        r = self.ok("POST", "/v1/responses", {"model": "m", "input": "x", "tools": self.hosted_tools(c["id"])})
        self.assertLess(time.monotonic() - t0, 10)
        self.assertEqual(r["output"][1]["output"][0]["outcome"], {"type": "timeout"})
        capped = r["output"][3]
        self.assertEqual(capped["max_output_length"], 100)
        self.assertEqual(r["output"][2]["action"]["max_output_length"], 100)
        o = capped["output"][0]
        self.assertLessEqual(len(o["stdout"]) + len(o["stderr"]), 100)
        self.assertTrue(o["stdout"].startswith("a") and o["stderr"].startswith("b"))

    def test_max_tool_calls_skips_extra_shell_turns(self):
        c = self.container()
        self.scenario({"shell": ["echo 1"]}, {"shell": ["echo 2"]}, {"message": "done"})
        r = self.ok("POST", "/v1/responses", {"model": "m", "input": "x", "max_tool_calls": 1,
                                             "tools": self.hosted_tools(c["id"])})
        self.assertEqual([it["type"] for it in r["output"]], ["shell_call", "shell_call_output", "message"])

    def test_container_auto(self):
        f = self.upload("input.csv").json()
        self.scenario({"shell": ["wc -l < input.csv"]}, {"message": "3 lines"})
        r = self.ok("POST", "/v1/responses", {"model": "m", "input": "x", "tools": [
            {"type": "shell", "environment": {"type": "container_auto", "file_ids": [f["id"]]}}]})
        cid = r["output"][0]["environment"]["container_id"]
        self.assertTrue(cid.startswith("cntr_"))
        self.assertEqual(r["output"][1]["output"][0]["stdout"].strip(), "3")
        self.assertEqual([c["id"] for c in self.admin("GET", "/_fake/state")["containers"]], [cid])

    def test_unknown_container_is_404(self):
        self.scenario({"message": "x"})
        self.assert_error(self.req("POST", "/v1/responses", {"model": "m", "input": "x",
                                                             "tools": self.hosted_tools("cntr_nope")}), 404)

    def test_tool_choice_required_with_message_turn_fails(self):
        c = self.container()
        self.scenario({"message": "no tools"})
        r = self.ok("POST", "/v1/responses", {"model": "m", "input": "x", "tool_choice": "required",
                                             "tools": self.hosted_tools(c["id"])})
        self.assertEqual(r["status"], "failed")
        self.assertIn("tool_choice", r["error"]["message"])


class LocalShellAndFunctionTest(Base):
    def test_local_round_trip_and_call_id_validation(self):
        self.scenario({"shell": ["ls"], "timeout_ms": 5000, "max_output_length": 2000},
                      {"message": "listed"})
        tools = [{"type": "shell", "environment": {"type": "local"}}]
        r1 = self.ok("POST", "/v1/responses", {"model": "m", "input": "list", "tools": tools})
        self.assertEqual(r1["status"], "completed")
        self.assertEqual(len(r1["output"]), 1)
        call = r1["output"][0]
        self.assertEqual((call["type"], call["environment"]), ("shell_call", {"type": "local"}))
        self.assertEqual(call["action"], {"commands": ["ls"], "timeout_ms": 5000, "max_output_length": 2000})
        good = {"type": "shell_call_output", "call_id": call["call_id"], "max_output_length": 2000,
                "output": [{"stdout": "a\n", "stderr": "", "outcome": {"type": "exit", "exit_code": 0}}]}
        wrong = dict(good, call_id="call_wrong")
        self.assert_error(self.req("POST", "/v1/responses", {"model": "m", "tools": tools,
                                                             "previous_response_id": r1["id"], "input": [wrong]}),
                          400, param="input", message_part="call_wrong")
        self.assert_error(self.req("POST", "/v1/responses", {"model": "m", "tools": tools,
                                                             "previous_response_id": r1["id"], "input": []}),
                          400, message_part=call["call_id"])
        bad_shape = dict(good, output=[{"stdout": "a"}])
        self.assert_error(self.req("POST", "/v1/responses", {"model": "m", "tools": tools,
                                                             "previous_response_id": r1["id"], "input": [bad_shape]}),
                          400)
        self.assert_error(self.req("POST", "/v1/responses", {"model": "m", "tools": tools,
                                                             "previous_response_id": "resp_nope", "input": [good]}),
                          400, param="previous_response_id")
        r2 = self.ok("POST", "/v1/responses", {"model": "m", "tools": tools,
                                              "previous_response_id": r1["id"], "input": [good]})
        self.assertEqual(r2["previous_response_id"], r1["id"])
        self.assertEqual(r2["output"][0]["content"][0]["text"], "listed")

    def test_function_call_with_malformed_arguments_round_trip(self):
        self.scenario({"function": {"name": "shell", "arguments": "{\"commands\": [\"ls\""}},
                      {"message": "recovered"})
        tools = [{"type": "function", "name": "shell", "parameters": {"type": "object"}}]
        r1 = self.ok("POST", "/v1/responses", {"model": "m", "input": "x", "tools": tools})
        fc = r1["output"][0]
        self.assertEqual((fc["type"], fc["name"], fc["arguments"]), ("function_call", "shell", "{\"commands\": [\"ls\""))
        r2 = self.ok("POST", "/v1/responses", {"model": "m", "tools": tools, "previous_response_id": r1["id"],
                                              "input": [{"type": "function_call_output", "call_id": fc["call_id"],
                                                         "output": "error: bad JSON"}]})
        self.assertEqual(r2["output"][0]["content"][0]["text"], "recovered")

    def test_full_history_without_previous_response_id_advances_turns(self):
        self.scenario({"function": {"name": "f", "arguments": "{}"}}, {"message": "second"})
        tools = [{"type": "function", "name": "f"}]
        r1 = self.ok("POST", "/v1/responses", {"model": "m", "input": "x", "tools": tools, "store": False})
        fc = r1["output"][0]
        r2 = self.ok("POST", "/v1/responses", {"model": "m", "tools": tools, "input": [
            {"role": "user", "content": "x"}, fc,
            {"type": "function_call_output", "call_id": fc["call_id"], "output": "ok"}]})
        self.assertEqual(r2["output"][0]["content"][0]["text"], "second")

    def test_fail_incomplete_and_max_output_tokens(self):
        self.scenario({"fail": {"code": "server_error", "message": "boom"}},
                      {"incomplete": "max_output_tokens"}, {"message": "z" * 400})
        r1 = self.ok("POST", "/v1/responses", {"model": "m", "input": "x"})
        self.assertEqual((r1["status"], r1["error"]), ("failed", {"code": "server_error", "message": "boom"}))
        r2 = self.ok("POST", "/v1/responses", {"model": "m", "input": "x", "previous_response_id": r1["id"]})
        self.assertEqual((r2["status"], r2["incomplete_details"]), ("incomplete", {"reason": "max_output_tokens"}))
        r3 = self.ok("POST", "/v1/responses", {"model": "m", "input": "x", "previous_response_id": r2["id"],
                                              "max_output_tokens": 20})
        self.assertEqual(r3["status"], "incomplete")
        self.assertEqual(len(r3["output"][0]["content"][0]["text"]), 80)
        self.assert_error(self.req("POST", "/v1/responses", {"model": "m", "input": "x", "max_output_tokens": 3}),
                          400, param="max_output_tokens")
        self.assert_error(self.req("POST", "/v1/responses", {"input": "x"}), 400, param="model")

    def test_store_false_is_neither_retrievable_nor_chainable(self):
        self.scenario({"message": "a"}, {"message": "b"})
        r = self.ok("POST", "/v1/responses", {"model": "m", "input": "x", "store": False})
        self.assert_error(self.req("GET", "/v1/responses/" + r["id"]), 404)
        self.assert_error(self.req("POST", "/v1/responses", {"model": "m", "input": "y",
                                                             "previous_response_id": r["id"]}),
                          400, param="previous_response_id")

    def test_usage_is_deterministic(self):
        self.scenario({"message": "same answer"})
        a = self.ok("POST", "/v1/responses", {"model": "m", "input": "same question"})
        b = self.ok("POST", "/v1/responses", {"model": "m", "input": "same question"})
        self.assertEqual(a["usage"], b["usage"])

    def test_cancel(self):
        self.scenario({"message": "x"})
        r = self.ok("POST", "/v1/responses", {"model": "m", "input": "x"})
        self.assert_error(self.req("POST", "/v1/responses/%s/cancel" % r["id"]), 400)
        self.assert_error(self.req("POST", "/v1/responses/resp_nope/cancel"), 404)
        self.assert_error(self.req("GET", "/v1/responses/resp_nope"), 404)
        c = self.container()
        self.scenario({"shell": ["sleep 30"], "timeout_ms": 60000}, {"message": "never"})
        bg = self.ok("POST", "/v1/responses", {"model": "m", "input": "x", "background": True,
                                              "tools": self.hosted_tools(c["id"])})
        self.assertIn(bg["status"], ("queued", "in_progress"))
        deadline = time.monotonic() + 10
        while self.admin("GET", "/_fake/state")["running_commands"] == 0 and time.monotonic() < deadline:
            time.sleep(0.05)
        t0 = time.monotonic()
        cancelled = self.ok("POST", "/v1/responses/%s/cancel" % bg["id"])
        self.assertLess(time.monotonic() - t0, 5)
        self.assertEqual(cancelled["status"], "cancelled")
        self.assertEqual(self.ok("GET", "/v1/responses/" + bg["id"])["status"], "cancelled")
        self.assertEqual(self.admin("GET", "/_fake/state")["running_commands"], 0)


class StreamingTest(Base):
    def test_hosted_stream_frames_reassemble(self):
        c = self.container()
        self.scenario({"shell": ["printf 'out1\\n'; printf 'err1\\n' >&2", "echo second"]},
                      {"message": "All done, with a message long enough to need several deltas."})
        frames, complete = self.stream("/v1/responses", {"model": "m", "input": "x", "stream": True,
                                                         "tools": self.hosted_tools(c["id"])}, chunk=5)
        self.assertTrue(complete)
        events = [json.loads(d) for _, d in frames]
        self.assertNotIn("[DONE]", [d for _, d in frames])
        for (name, _), ev in zip(frames, events):
            self.assertEqual(name, ev["type"])
        self.assertEqual([e["sequence_number"] for e in events], list(range(len(events))))
        types = [e["type"] for e in events]
        self.assertEqual(types[:2], ["response.created", "response.in_progress"])
        self.assertEqual(types[-1], "response.completed")
        self.assertEqual(types.count("response.shell_call_command.done"), 2)
        self.assertEqual(types.count("response.shell_call_output_content.done"), 2)
        out = "".join(e["delta"].get("stdout", "") for e in events
                      if e["type"] == "response.shell_call_output_content.delta")
        self.assertEqual(out, "out1\nsecond\n")
        text = "".join(e["delta"] for e in events if e["type"] == "response.output_text.delta")
        self.assertEqual(text, "All done, with a message long enough to need several deltas.")
        order = [t for t in types if t.startswith("response.output_item")]
        self.assertEqual(order, ["response.output_item.added", "response.output_item.done"] * 3)
        final = events[-1]["response"]
        self.assertEqual([i["type"] for i in final["output"]], ["shell_call", "shell_call_output", "message"])
        self.assertEqual(self.ok("GET", "/v1/responses/" + final["id"]), final)

    def test_command_output_streams_while_the_command_runs(self):
        c = self.container()
        self.scenario({"shell": ["echo first; sleep 1.5; echo second"]}, {"message": "ok"})
        times = []
        frames, complete = self.stream("/v1/responses", {"model": "m", "input": "x", "stream": True,
                                                         "tools": self.hosted_tools(c["id"])}, times=times)
        self.assertTrue(complete)
        events = [json.loads(d) for _, d in frames]
        first = next(i for i, e in enumerate(events)
                     if e["type"] == "response.shell_call_output_content.delta")
        self.assertEqual(events[first]["delta"], {"stdout": "first\n"})
        self.assertGreater(times[-1] - times[first], 1.0)

    def test_function_call_stream_and_failed_terminal(self):
        self.scenario({"function": {"name": "f", "arguments": "{\"a\": 1, \"b\": \"a long-ish argument\"}"}},
                      {"fail": {"code": "server_error", "message": "boom"}})
        frames, complete = self.stream("/v1/responses", {"model": "m", "input": "x", "stream": True,
                                                         "tools": [{"type": "function", "name": "f"}]})
        events = [json.loads(d) for _, d in frames]
        args = "".join(e["delta"] for e in events if e["type"] == "response.function_call_arguments.delta")
        self.assertEqual(args, "{\"a\": 1, \"b\": \"a long-ish argument\"}")
        self.assertEqual(events[-1]["type"], "response.completed")
        fc = events[-1]["response"]["output"][0]
        frames, complete = self.stream("/v1/responses", {
            "model": "m", "stream": True, "previous_response_id": events[-1]["response"]["id"],
            "tools": [{"type": "function", "name": "f"}],
            "input": [{"type": "function_call_output", "call_id": fc["call_id"], "output": "1"}]})
        last = json.loads(frames[-1][1])
        self.assertEqual(last["type"], "response.failed")
        self.assertEqual(last["response"]["error"], {"code": "server_error", "message": "boom"})

    def test_local_shell_stream_ends_at_call(self):
        self.scenario({"shell": ["ls", "pwd"]}, {"message": "x"})
        frames, _ = self.stream("/v1/responses", {"model": "m", "input": "x", "stream": True,
                                                  "tools": [{"type": "shell", "environment": {"type": "local"}}]})
        events = [json.loads(d) for _, d in frames]
        final = events[-1]["response"]
        self.assertEqual([i["type"] for i in final["output"]], ["shell_call"])
        self.assertEqual(final["output"][0]["action"]["commands"], ["ls", "pwd"])


class ChatTest(Base):
    TOOLS = [{"type": "function", "function": {"name": "run_shell", "description": "run",
                                               "parameters": {"type": "object",
                                                              "properties": {"cmd": {"type": "string"}}}}}]

    def test_tool_call_round_trip(self):
        self.scenario({"function": {"name": "run_shell", "arguments": "{\"cmd\":\"ls\"}"}},
                      {"message": "There are 2 files."})
        msgs = [{"role": "system", "content": "s"}, {"role": "user", "content": "list files"}]
        r1 = self.ok("POST", "/v1/chat/completions", {"model": "m", "messages": msgs, "tools": self.TOOLS})
        self.assertEqual(r1["object"], "chat.completion")
        ch = r1["choices"][0]
        self.assertEqual(ch["finish_reason"], "tool_calls")
        tc = ch["message"]["tool_calls"][0]
        self.assertEqual((tc["type"], tc["function"]), ("function", {"name": "run_shell", "arguments": "{\"cmd\":\"ls\"}"}))
        msgs.append(ch["message"])
        self.assert_error(self.req("POST", "/v1/chat/completions", {"model": "m", "messages": msgs,
                                                                    "tools": self.TOOLS}),
                          400, param="messages.[2].role", message_part=tc["id"])
        bad = msgs + [{"role": "tool", "tool_call_id": "call_other", "content": "x"}]
        self.assert_error(self.req("POST", "/v1/chat/completions", {"model": "m", "messages": bad,
                                                                    "tools": self.TOOLS}), 400)
        msgs.append({"role": "tool", "tool_call_id": tc["id"], "content": "a\nb\n"})
        r2 = self.ok("POST", "/v1/chat/completions", {"model": "m", "messages": msgs, "tools": self.TOOLS})
        self.assertEqual(r2["choices"][0]["finish_reason"], "stop")
        self.assertEqual(r2["choices"][0]["message"]["content"], "There are 2 files.")
        self.assertEqual(r2["usage"]["total_tokens"], r2["usage"]["prompt_tokens"] + r2["usage"]["completion_tokens"])

    def test_streaming_tool_call_assembly(self):
        self.scenario({"shell": ["python3 analyze.py input.csv"]}, {"message": "final words here"})
        body = {"model": "m", "stream": True, "stream_options": {"include_usage": True},
                "messages": [{"role": "user", "content": "go"}],
                "tools": [{"type": "function", "function": {"name": "shell", "parameters": {}}}]}
        frames, complete = self.stream("/v1/chat/completions", body, chunk=3)
        self.assertTrue(complete)
        self.assertEqual(frames[-1], (None, "[DONE]"))
        chunks = [json.loads(d) for _, d in frames[:-1]]
        calls = {}
        finish = None
        for c in chunks:
            self.assertEqual(c["object"], "chat.completion.chunk")
            for ch in c["choices"]:
                finish = ch["finish_reason"] or finish
                for t in ch["delta"].get("tool_calls", []):
                    slot = calls.setdefault(t["index"], {"id": None, "name": None, "arguments": ""})
                    if t.get("id"):
                        slot["id"] = t["id"]
                    fn = t.get("function", {})
                    if fn.get("name"):
                        slot["name"] = fn["name"]
                    slot["arguments"] += fn.get("arguments", "")
        self.assertEqual(finish, "tool_calls")
        self.assertEqual(len(calls), 1)
        self.assertEqual(calls[0]["name"], "shell")
        self.assertEqual(json.loads(calls[0]["arguments"]), {"commands": ["python3 analyze.py input.csv"]})
        self.assertIsNotNone(chunks[-1]["usage"])
        msgs = body["messages"] + [
            {"role": "assistant", "content": None, "tool_calls": [
                {"id": calls[0]["id"], "type": "function",
                 "function": {"name": "shell", "arguments": calls[0]["arguments"]}}]},
            {"role": "tool", "tool_call_id": calls[0]["id"], "content": "ok"}]
        frames, _ = self.stream("/v1/chat/completions", dict(body, messages=msgs))
        chunks = [json.loads(d) for _, d in frames[:-1]]
        text = "".join(ch["delta"].get("content") or "" for c in chunks for ch in c["choices"])
        self.assertEqual(text, "final words here")

    def test_fail_turn_is_500(self):
        self.scenario({"fail": {"code": "server_error", "message": "boom"}})
        self.assert_error(self.req("POST", "/v1/chat/completions",
                                   {"model": "m", "messages": [{"role": "user", "content": "x"}]}), 500)


class ExpiryTest(Base):
    def test_expiry_via_clock(self):
        c = self.container(expires_after={"anchor": "last_active_at", "minutes": 1})
        self.scenario({"shell": ["echo hi > a.txt"]}, {"message": "ok"}, {"message": "again"})
        r1 = self.ok("POST", "/v1/responses", {"model": "m", "input": "x", "tools": self.hosted_tools(c["id"])})
        self.admin("POST", "/_fake/clock", {"advance_seconds": 45})
        self.ok("GET", "/v1/containers/%s/files" % c["id"])  # a file operation refreshes last_active_at
        self.admin("POST", "/_fake/clock", {"advance_seconds": 45})
        self.assertEqual(self.ok("GET", "/v1/containers/" + c["id"])["status"], "running")
        self.admin("POST", "/_fake/clock", {"advance_seconds": 61})
        got = self.ok("GET", "/v1/containers/" + c["id"])
        self.assertEqual(got["status"], "expired")
        self.assertEqual(self.ok("GET", "/v1/containers")["data"][0]["status"], "expired")
        self.assert_error(self.req("GET", "/v1/containers/%s/files" % c["id"]), 400, message_part="expired")
        body, ct = self.multipart([("file", b"x", "x.txt")])
        self.assert_error(self.req("POST", "/v1/containers/%s/files" % c["id"], raw=body,
                                   headers={"Content-Type": ct}), 400, message_part="expired")
        err = self.assert_error(self.req("POST", "/v1/responses", {"model": "m", "input": "x",
                                                                   "tools": self.hosted_tools(c["id"])}), 400)
        self.assertEqual(err, {"message": "Container is expired.", "type": "invalid_request_error",
                               "param": None, "code": None})
        err = self.assert_error(self.req("POST", "/v1/responses", {"model": "m", "input": "more",
                                                                   "previous_response_id": r1["id"]}), 400)
        self.assertEqual(err["message"], "Container is expired.")
        self.ok("DELETE", "/v1/containers/" + c["id"])
        self.assertEqual(self.admin("GET", "/_fake/state")["containers"], [])

    def test_activity_counts_only_what_it_is_told_to(self):
        self.admin("POST", "/_fake/clock", {"freeze": True})  # exact seconds below
        c = self.container(expires_after={"anchor": "last_active_at", "minutes": 1})
        t0 = self.ok("GET", "/v1/containers/" + c["id"])["last_active_at"]
        self.ok("POST", "/_fake/activity", {"counts": "commands"})
        self.admin("POST", "/_fake/clock", {"advance_seconds": 30})
        self.ok("GET", "/v1/containers/%s/files" % c["id"])  # listing files no longer counts
        self.assertEqual(self.ok("GET", "/v1/containers/" + c["id"])["last_active_at"], t0)
        # A plain instruction to run one command is obeyed whatever the scenario says.
        self.scenario({"message": "the scenario is not played"})
        r = self.ok("POST", "/v1/responses", {
            "model": "m", "tools": self.hosted_tools(c["id"]), "tool_choice": {"type": "shell"},
            "input": "Run exactly this shell command, nothing else: `true`"})
        self.assertEqual([i["type"] for i in r["output"]], ["shell_call", "shell_call_output", "message"])
        self.assertEqual(r["output"][0]["action"]["commands"], ["true"])
        self.assertEqual(self.ok("GET", "/v1/containers/" + c["id"])["last_active_at"], t0 + 30)
        self.ok("POST", "/_fake/activity", {"counts": "none"})
        self.admin("POST", "/_fake/clock", {"advance_seconds": 30})
        self.ok("POST", "/v1/responses", {
            "model": "m", "tools": self.hosted_tools(c["id"]),
            "input": "Run exactly this shell command, nothing else: `true`"})
        self.assertEqual(self.ok("GET", "/v1/containers/" + c["id"])["last_active_at"], t0 + 30)
        self.assertEqual(self.req("POST", "/_fake/activity", {"counts": "some"}).status, 400)

    def test_a_frozen_clock_moves_only_when_advanced(self):
        now = self.admin("POST", "/_fake/clock", {"freeze": True})["now"]
        time.sleep(1.1)
        self.assertEqual(self.admin("POST", "/_fake/clock", {})["now"], now)
        self.assertEqual(self.admin("POST", "/_fake/clock", {"advance_seconds": 5})["now"], now + 5)
        self.assertEqual(self.admin("POST", "/_fake/clock", {"freeze": False})["now"], now + 5)
        self.assertEqual(self.req("POST", "/_fake/clock", {"freeze": "yes"}, auth=False).status, 400)
        self.admin("POST", "/_fake/reset", {})
        self.assertGreaterEqual(self.admin("POST", "/_fake/clock", {})["now"], now + 1)


class FaultsTest(Base):
    def test_429_with_retry_after_counts_down(self):
        self.admin("POST", "/_fake/faults", {"path_prefix": "/v1/containers", "method": "POST", "status": 429,
                                             "retry_after": "1", "retry_after_ms": 10, "times": 2})
        self.assertEqual(self.req("GET", "/v1/containers").status, 200)  # method does not match
        for _ in range(2):
            r = self.req("POST", "/v1/containers", {"name": "x"})
            err = self.assert_error(r, 429)
            self.assertEqual(err["code"], "rate_limit_exceeded")
            self.assertEqual(r.headers["Retry-After"], "1")
            self.assertEqual(r.headers["retry-after-ms"], "10")
        self.assertEqual(self.req("POST", "/v1/containers", {"name": "x"}).status, 200)
        reqs = [(q["method"], q["status"]) for q in self.admin("GET", "/_fake/state")["requests"]]
        self.assertEqual(reqs, [("GET", 200), ("POST", 429), ("POST", 429), ("POST", 200)])

    def test_500_once(self):
        self.admin("POST", "/_fake/faults", {"status": 500, "times": 1})
        err = self.assert_error(self.req("GET", "/v1/files"), 500)
        self.assertEqual(err["type"], "server_error")
        self.assertEqual(self.req("GET", "/v1/files").status, 200)

    def test_delay(self):
        self.admin("POST", "/_fake/faults", {"delay_ms": 600, "times": 1})
        t0 = time.monotonic()
        self.assertEqual(self.req("GET", "/v1/files").status, 200)
        self.assertGreaterEqual(time.monotonic() - t0, 0.55)
        t0 = time.monotonic()
        self.req("GET", "/v1/files")
        self.assertLess(time.monotonic() - t0, 0.5)

    def test_drop_mid_stream(self):
        self.scenario({"message": "a fairly long message so that the stream has many frames in it"})
        self.admin("POST", "/_fake/faults", {"drop_mid_stream": True, "times": 1})
        self.assertEqual(self.req("GET", "/v1/files").status, 200)  # not a stream: untouched
        frames, complete = self.stream("/v1/responses", {"model": "m", "input": "x", "stream": True})
        self.assertFalse(complete)
        self.assertNotIn("response.completed", [f[0] for f in frames])
        self.assertLessEqual(len(frames), 3)
        frames, complete = self.stream("/v1/responses", {"model": "m", "input": "x", "stream": True})
        self.assertTrue(complete)
        self.assertEqual(frames[-1][0], "response.completed")

    def test_a_dropped_background_stream_resumes_after_its_last_event(self):
        c = self.container()
        self.scenario({"shell": ["echo ran >> ran.txt; wc -l < ran.txt"]},
                      {"message": "done, and a message long enough for several deltas"})
        self.admin("POST", "/_fake/faults", {"drop_mid_stream": True, "after_frames": 5})
        body = {"model": "m", "input": "x", "stream": True, "background": True,
                "tools": self.hosted_tools(c["id"])}
        frames, complete = self.stream("/v1/responses", body)
        self.assertFalse(complete)
        seen = [json.loads(d) for _, d in frames if d.endswith("}")]
        rid = seen[0]["response"]["id"]
        last = seen[-1]["sequence_number"]
        rest, complete = self.stream("/v1/responses/%s?stream=true&starting_after=%d" % (rid, last),
                                     None)
        self.assertTrue(complete)
        events = [json.loads(d) for _, d in rest]
        self.assertEqual([e["sequence_number"] for e in events],
                         list(range(last + 1, last + 1 + len(events))))
        self.assertEqual(events[-1]["type"], "response.completed")
        out = "".join(e["delta"].get("stdout", "") for e in events
                      if e["type"] == "response.shell_call_output_content.delta")
        self.assertEqual(out, "1\n")  # the command ran once, for both streams
        # From the start again: the same events, numbered the same.
        again, _ = self.stream("/v1/responses/%s?stream=true" % rid, None)
        self.assertEqual([json.loads(d) for _, d in again][last + 1:], events)
        # Only background responses keep their events.
        self.scenario({"message": "plain"})
        plain = self.ok("POST", "/v1/responses", {"model": "m", "input": "x"})
        r = self.req("GET", "/v1/responses/%s?stream=true" % plain["id"])
        self.assertEqual(r.status, 400)

    def test_drop_mid_chat_stream(self):
        self.scenario({"message": "a fairly long message so that the stream has many frames in it"})
        self.admin("POST", "/_fake/faults", {"path_prefix": "/v1/chat", "drop_mid_stream": True})
        frames, complete = self.stream("/v1/chat/completions", {"model": "m", "stream": True,
                                                               "messages": [{"role": "user", "content": "x"}]})
        self.assertFalse(complete)
        self.assertNotIn((None, "[DONE]"), frames)

    def test_drop_connection(self):
        self.admin("POST", "/_fake/faults", {"drop_connection": True, "times": 1})
        with self.assertRaises((ConnectionError, http.client.RemoteDisconnected, OSError)):
            self.req("GET", "/v1/files")
        self.assertEqual(self.req("GET", "/v1/files").status, 200)

    def test_a_fault_after_handling_loses_only_the_answer(self):
        self.admin("POST", "/_fake/faults", {"path_prefix": "/v1/containers", "method": "POST",
                                             "drop_connection": True, "after_handling": True})
        with self.assertRaises((ConnectionError, http.client.HTTPException, OSError)):
            self.req("POST", "/v1/containers", {"name": "landed"})
        self.assertEqual([c["name"] for c in self.admin("GET", "/_fake/state")["containers"]],
                         ["landed"])
        self.admin("POST", "/_fake/faults", {"path_prefix": "/v1/containers", "method": "POST",
                                             "status": 500, "after_handling": True})
        self.assertEqual(self.req("POST", "/v1/containers", {"name": "landed"}).status, 500)
        self.assertEqual(len(self.admin("GET", "/_fake/state")["containers"]), 2)

    def test_bad_fault_is_rejected(self):
        r = self.req("POST", "/_fake/faults", {"times": 1}, auth=False)
        self.assertEqual(r.status, 400)


class AdminAndConcurrencyTest(Base):
    def test_bad_scenario_rejected(self):
        for body in ({}, {"turns": [{"shell": []}]}, {"turns": [{"message": "a", "shell": ["x"]}]},
                     {"turns": [{"incomplete": "nope"}]}):
            with self.subTest(body=body):
                self.assertEqual(self.req("POST", "/_fake/scenario", body, auth=False).status, 400)

    def test_exhausted_scenario_answers_a_marker_message(self):
        self.scenario()
        r = self.ok("POST", "/v1/responses", {"model": "m", "input": "x"})
        self.assertIn("no turn 0", r["output"][0]["content"][0]["text"])

    def test_concurrent_hosted_runs_and_reset_cleans_up(self):
        self.scenario({"shell": ["echo $(cat id.txt) > out.txt; cat out.txt"]}, {"message": "ok"})
        def worker(i):
            c = self.container(name="c%d" % i)
            body, ct = self.multipart([("file", str(i).encode(), "id.txt")])
            self.ok("POST", "/v1/containers/%s/files" % c["id"], raw=body, headers={"Content-Type": ct})
            r = self.ok("POST", "/v1/responses", {"model": "m", "input": "x", "tools": self.hosted_tools(c["id"])})
            self.assertEqual(r["output"][1]["output"][0]["stdout"], "%d\n" % i)
            self.ok("DELETE", "/v1/containers/" + c["id"])

        self.assertEqual(self.in_parallel(worker, 8, 60), [])
        st = self.admin("GET", "/_fake/state")
        self.assertEqual((st["containers"], st["files"], st["running_commands"]), ([], [], 0))
        self.container()
        self.upload()
        self.admin("POST", "/_fake/reset", {})
        st = self.admin("GET", "/_fake/state")
        self.assertEqual((st["containers"], st["files"], st["requests"]), ([], [], []))

    def test_delete_removes_workspace(self):
        c = self.container()
        self.scenario({"shell": ["pwd"]}, {"message": "ok"})
        self.ok("POST", "/v1/responses", {"model": "m", "input": "x", "tools": self.hosted_tools(c["id"])})
        log = b"".join(self.fake.stderr_chunks).decode()
        workdir = log.split("workdir ")[1].split(")")[0]
        self.assertTrue(any(n.startswith(c["id"]) for n in os.listdir(workdir)))
        self.ok("DELETE", "/v1/containers/" + c["id"])
        self.assertFalse(any(n.startswith(c["id"]) for n in os.listdir(workdir)))


class NoBwrapFallbackTest(Base):
    @classmethod
    def setUpClass(cls):
        cls.fake = Fake("--no-bwrap")

    def test_commands_run_in_the_workspace_and_the_log_says_so(self):
        c = self.container()
        self.scenario({"shell": ["echo hi > made.txt; cat made.txt"]}, {"message": "ok"})
        r = self.ok("POST", "/v1/responses", {"model": "m", "input": "x", "tools": self.hosted_tools(c["id"])})
        self.assertEqual(r["output"][1]["output"][0]["stdout"], "hi\n")
        paths = [f["path"] for f in self.ok("GET", "/v1/containers/%s/files" % c["id"])["data"]]
        self.assertEqual(paths, ["/mnt/data/made.txt"])
        self.assertEqual(self.admin("GET", "/_fake/state")["isolation"], "none")
        self.assertIn(b"UNISOLATED", b"".join(self.fake.stderr_chunks))


class StartupTest(unittest.TestCase):
    def test_prints_one_line_and_stops_on_sigterm_removing_its_workdir(self):
        f = Fake()
        try:
            s = socket.create_connection((f.host, f.port), timeout=5)
            s.close()
        finally:
            f.stop()
        self.assertEqual(f.proc.returncode, 0)
        self.assertEqual(f.rest_of_stdout, b"")
        time.sleep(0.2)
        log = b"".join(f.stderr_chunks).decode()
        workdir = log.split("workdir ")[1].split(")")[0]
        self.assertFalse(os.path.exists(workdir))

    def test_sigterm_kills_running_hosted_commands(self):
        marker = "sleep 41.%d" % os.getpid()
        for extra in ((), ("--no-bwrap",)):
            with self.subTest(extra=extra):
                f = Fake(*extra)
                base = Base()
                base.fake = f
                try:
                    c = base.ok("POST", "/v1/containers", {"name": "x"})
                    base.admin("POST", "/_fake/scenario", {"turns": [
                        {"shell": [marker], "timeout_ms": 60000}, {"message": "x"}]})
                    base.ok("POST", "/v1/responses", {"model": "m", "input": "x", "background": True,
                                                     "tools": base.hosted_tools(c["id"])})
                    deadline = time.monotonic() + 10
                    while not self.running(marker) and time.monotonic() < deadline:
                        time.sleep(0.05)
                    self.assertTrue(self.running(marker))
                finally:
                    f.stop()
                deadline = time.monotonic() + 10
                while self.running(marker) and time.monotonic() < deadline:
                    time.sleep(0.05)
                self.assertFalse(self.running(marker))

    @staticmethod
    def running(marker):
        for pid in os.listdir("/proc"):
            if pid.isdigit():
                try:
                    with open("/proc/%s/cmdline" % pid, "rb") as fh:
                        if fh.read().replace(b"\0", b" ").strip() == marker.encode():
                            return True
                except OSError:
                    pass
        return False


if __name__ == "__main__":
    unittest.main()
