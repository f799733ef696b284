"""The client's own checks, without a daemon: addresses as the CLI takes them, the environment,
and downloads whose bytes do not match."""

from __future__ import annotations

import hashlib
from types import SimpleNamespace

import grpc
import pytest

import sandgate
from sandgate import _connection, _files


@pytest.mark.parametrize("text,target", [
    ("unix:/run/s.sock", "unix:/run/s.sock"),
    ("tcp:gw.internal:7443", "gw.internal:7443"),
    ("127.0.0.1:7443", "127.0.0.1:7443"),
    ("tcp:[::1]:7443", "[::1]:7443"),
    ("10.0.0.1:7443, 10.0.0.2:7443", "ipv4:10.0.0.1:7443,10.0.0.2:7443"),
    ("[::1]:1,[::2]:2", "ipv6:[::1]:1,[::2]:2"),
])
def test_addresses_are_parsed_as_the_cli_parses_them(text, target):
    assert _connection.channel_target(_connection.parse_addresses(text)) == target


@pytest.mark.parametrize("text,why", [
    ("unix:", "no socket path"),
    ("localhost", "no port"),
    ("::1:7443", "an IPv6 host needs brackets"),
    ("host:http", "the port must be a number"),
    ("10.0.0.1:1,gw.internal:2", "several addresses must all be tcp: IPv4"),
    ("unix:/a,unix:/b", "several addresses"),
])
def test_a_bad_address_is_invalid_argument_naming_the_forms(text, why):
    with pytest.raises(sandgate.InvalidArgument) as caught:
        sandgate.Client(text)
    assert why in caught.value.message and caught.value.code == grpc.StatusCode.INVALID_ARGUMENT


def test_the_address_and_token_come_from_the_environment_like_the_cli(monkeypatch):
    monkeypatch.setenv("SANDGATE_ADDR", "unix:/nowhere/sandgated.sock")
    monkeypatch.setenv("SANDGATE_TOKEN", "t0k")
    c = sandgate.Client()
    assert c.addr == "unix:/nowhere/sandgated.sock"
    assert c._metadata == (("authorization", "Bearer t0k"),)
    monkeypatch.delenv("SANDGATE_ADDR")
    assert sandgate.Client().addr == "unix:/run/sandgate/sandgated.sock"


def test_tls_is_refused_for_a_unix_socket():
    with pytest.raises(sandgate.InvalidArgument, match="TLS is for tcp: addresses"):
        sandgate.Client("unix:/x.sock", tls_ca="/etc/ssl/certs/ca-certificates.crt")


def chunks(data: bytes, total: int, sha256: str):
    half = len(data) // 2
    return [SimpleNamespace(data=data[:half], total_size=total, sha256=""),
            SimpleNamespace(data=data[half:], total_size=total, sha256=sha256)]


def test_a_download_is_renamed_into_place_only_when_it_matches(tmp_path):
    data = b"0123456789"
    good = hashlib.sha256(data).hexdigest()
    path = tmp_path / "f"
    assert _files.receive(chunks(data, 10, good), str(path), good) == 10
    assert path.read_bytes() == data
    for stream, expected, why in [(chunks(data, 10, "0" * 64), "", "the stream's"),
                                  (chunks(data, 10, good), "1" * 64, "the run's"),
                                  (chunks(data, 11, good), "", "announced 11"),
                                  (chunks(data, 10, ""), "", "without its sha256")]:
        with pytest.raises(sandgate.DataLoss, match=why):
            _files.receive(stream, str(tmp_path / "g"), expected)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["f"]


@pytest.mark.parametrize("name", ["", ".", "..", "../x", "a/b", "a\\b", "nul\0"])
def test_an_artifact_name_that_is_not_a_file_name_is_refused(name):
    with pytest.raises(sandgate.DataLoss, match="not a file name"):
        _files.safe_name(name, "an artifact")
