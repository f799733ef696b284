"""Exposed ports from the Python client (docs/sessions.md "Exposed ports"): a background
http.server in a session, exposed, fetched through the daemon's REST port with the token and
through a signed URL without one; listed and unexposed."""

from __future__ import annotations

import time
import urllib.error
import urllib.request

import pytest

import sandgate
from conftest import TOKEN, running_daemon


def fetch(url: str, token: str = "") -> tuple[int, bytes]:
    request = urllib.request.Request(url)
    if token:
        request.add_header("Authorization", f"Bearer {token}")
    try:
        with urllib.request.urlopen(request, timeout=30) as answer:
            return answer.status, answer.read()
    except urllib.error.HTTPError as e:
        return e.code, e.read()


def test_an_exposed_port_is_reached_with_the_token_or_a_signed_url():
    with running_daemon(config={"http_listen": "127.0.0.1:0", "allow_plaintext_tokens": True,
                                "local": {"uid_base": 330900, "uid_count": 8}}) as d, \
            sandgate.Client(d.address, token=TOKEN) as client, client.session() as s:
        s.write("hello.txt", b"from the sandbox\n")
        s.start("python3 -m http.server 8000 --bind 127.0.0.1")
        p = s.expose(8000, signed=True, ttl=600)
        assert p.port == 8000
        assert p.url.startswith("http://127.0.0.1:") and p.url.endswith(f"/ports/8000/")
        status = 0
        for _ in range(300):  # the server starts in the background
            status, body = fetch(p.url + "hello.txt", TOKEN)
            if status == 200:
                break
            time.sleep(0.1)
        assert (status, body) == (200, b"from the sandbox\n")
        assert fetch(p.url + "hello.txt")[0] == 401
        assert fetch(p.signed_url + "hello.txt") == (200, b"from the sandbox\n")
        assert [x.port for x in s.ports()] == [8000]
        s.unexpose(8000)
        assert fetch(p.url + "hello.txt", TOKEN)[0] == 404
        assert s.ports() == []
        with pytest.raises(sandgate.InvalidArgument):
            s.expose(70000)
