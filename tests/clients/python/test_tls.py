"""The Python client over TCP with mutual TLS, as the CLI speaks it (docs/configuration.md, "TCP and TLS"):
certificates made per run with the openssl CLI, as tests/fakes/test_certs.h makes them."""

from __future__ import annotations

import os
import socket
import subprocess

import grpc
import pytest

import sandgate
from conftest import TOKEN, running_daemon

KEY = ["-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1", "-nodes"]


def openssl(*args: str) -> None:
    subprocess.run(["openssl", *args], check=True, capture_output=True)


def make_certs(d: str) -> None:
    """ca.pem; server.pem/.key (SAN 127.0.0.1, localhost) and client.pem/.key it signs."""
    openssl("req", "-x509", *KEY, "-days", "2", "-subj", "/CN=ca", "-keyout", f"{d}/ca.key",
            "-out", f"{d}/ca.pem", "-addext", "basicConstraints=critical,CA:TRUE",
            "-addext", "keyUsage=critical,keyCertSign,cRLSign")
    for name, serial, ext in [
            ("server", 1001, "subjectAltName=IP:127.0.0.1,DNS:localhost\n"
                             "extendedKeyUsage=serverAuth,clientAuth\n"),
            ("client", 2001, "extendedKeyUsage=clientAuth\n")]:
        with open(f"{d}/{name}.ext", "w") as f:
            f.write("basicConstraints=CA:FALSE\n" + ext)
        openssl("req", *KEY, "-subj", f"/CN={name}", "-keyout", f"{d}/{name}.key",
                "-out", f"{d}/{name}.csr")
        openssl("x509", "-req", "-days", "2", "-in", f"{d}/{name}.csr", "-CA", f"{d}/ca.pem",
                "-CAkey", f"{d}/ca.key", "-set_serial", str(serial), "-extfile",
                f"{d}/{name}.ext", "-out", f"{d}/{name}.pem")


def closed_port() -> int:
    """A local port nothing listens on (bound, then released)."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.fixture(scope="module")
def certs(tmp_path_factory) -> str:
    d = str(tmp_path_factory.mktemp("certs"))
    make_certs(d)
    return d


@pytest.fixture(scope="module")
def tls_daemon(certs):
    with running_daemon(listen="tcp:127.0.0.1:0", config={"tls": {
            "cert_file": f"{certs}/server.pem", "key_file": f"{certs}/server.key",
            "client_ca_file": f"{certs}/ca.pem", "require_client_cert": True}}) as d:
        yield d


def test_mutual_tls_with_the_clis_files(tls_daemon, certs, monkeypatch):
    d = certs
    assert tls_daemon.address.startswith("tcp:127.0.0.1:")
    with sandgate.Client(tls_daemon.address, token=TOKEN, tls_ca=f"{d}/ca.pem",
                         tls_cert=f"{d}/client.pem", tls_key=f"{d}/client.key") as c:
        assert list(c.list_runs()) == []
    # The same from the environment, as the CLI reads it.
    for var, name in [("SANDGATE_ADDR", None), ("SANDGATE_TLS_CA", "ca.pem"),
                      ("SANDGATE_TLS_CERT", "client.pem"), ("SANDGATE_TLS_KEY", "client.key")]:
        monkeypatch.setenv(var, tls_daemon.address if name is None else os.path.join(d, name))
    monkeypatch.setenv("SANDGATE_TOKEN", TOKEN)
    with sandgate.Client() as c:
        assert c.list_sessions() == []


def test_several_addresses_go_round_robin_and_skip_one_that_is_down(tls_daemon, certs):
    d = certs
    port = tls_daemon.address.rsplit(":", 1)[1]
    addr = f"127.0.0.1:{closed_port()},127.0.0.1:{port}"
    with sandgate.Client(addr, token=TOKEN, tls_ca=f"{d}/ca.pem", tls_cert=f"{d}/client.pem",
                         tls_key=f"{d}/client.key") as c:
        for _ in range(4):
            assert list(c.list_runs()) == []


def test_without_a_client_certificate_the_handshake_fails(tls_daemon, certs):
    with sandgate.Client(tls_daemon.address, token=TOKEN,
                         tls_ca=f"{certs}/ca.pem") as c:
        with pytest.raises(sandgate.Unavailable) as caught:
            list(c.list_runs())
    assert caught.value.code == grpc.StatusCode.UNAVAILABLE


def test_a_missing_tls_file_is_named(tmp_path):
    with pytest.raises(sandgate.InvalidArgument, match="tls_ca: cannot read .*nope.pem"):
        sandgate.Client("tcp:127.0.0.1:1", tls_ca=str(tmp_path / "nope.pem"))
