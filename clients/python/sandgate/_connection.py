"""How the client reaches the daemon, with the CLI's rules (client/connection.h).

Addresses are the daemon's syntax (unix:PATH, tcp:HOST:PORT, HOST:PORT), several comma
separated for replicas: those must all be IPv4 literals or all bracketed IPv6 ones, and make one
channel with the round_robin policy. TLS is for tcp: addresses only.
"""

from __future__ import annotations

import ipaddress
import os
from dataclasses import dataclass
from typing import List, Optional, Sequence, Tuple

import grpc

from .errors import InvalidArgument

DEFAULT_ADDR = "unix:/run/sandgate/sandgated.sock"
# The daemon's limit (server/grpc_server.cc): a run's inputs travel in its request.
MAX_MESSAGE_BYTES = 80 << 20


@dataclass(frozen=True)
class Address:
    unix_socket: bool
    path: str = ""  # unix_socket only
    host: str = ""  # TCP only; IPv6 keeps its brackets ("[::1]")
    port: int = 0

    def __str__(self) -> str:
        return f"unix:{self.path}" if self.unix_socket else f"tcp:{self.host}:{self.port}"

    def grpc_target(self) -> str:
        return f"unix:{self.path}" if self.unix_socket else f"{self.host}:{self.port}"


def parse_address(text: str) -> Address:
    """One address, as common/address.cc parses it; InvalidArgument naming the accepted forms."""

    def bad(why: str) -> InvalidArgument:
        return InvalidArgument(
            grpc.StatusCode.INVALID_ARGUMENT,
            f"expected unix:PATH, tcp:HOST:PORT or HOST:PORT, got '{text}' ({why})")

    if text.startswith("unix:"):
        if len(text) == len("unix:"):
            raise bad("no socket path")
        return Address(unix_socket=True, path=text[len("unix:"):])
    rest = text[len("tcp:"):] if text.startswith("tcp:") else text
    colon = rest.rfind(":")
    if colon < 0:
        raise bad("no port")
    host, port = rest[:colon], rest[colon + 1:]
    if not host:
        raise bad("no host")
    bracketed = host.startswith("[") and host.endswith("]")
    if not bracketed and ":" in host:
        raise bad("an IPv6 host needs brackets: [::1]:PORT")
    if "/" in host:
        raise bad("a host name has no '/'")
    if not port.isdigit() or not 0 <= int(port) <= 65535:
        raise bad("the port must be a number from 0 to 65535")
    return Address(unix_socket=False, host=host, port=int(port))


def _family(host: str) -> int:
    """4 or 6 for an IP literal host ("[::1]" for IPv6), 0 for a name."""
    inner = host[1:-1] if host.startswith("[") and host.endswith("]") else host
    try:
        ip = ipaddress.ip_address(inner)
    except ValueError:
        return 0
    return ip.version


def parse_addresses(text: str) -> List[Address]:
    """A comma-separated list, as the CLI's --addr takes it."""
    addresses = [parse_address(part.strip()) for part in text.split(",")]
    if len(addresses) == 1:
        return addresses
    family = 0 if addresses[0].unix_socket else _family(addresses[0].host)
    for a in addresses:
        if a.unix_socket or _family(a.host) == 0 or _family(a.host) != family:
            raise InvalidArgument(
                grpc.StatusCode.INVALID_ARGUMENT,
                "several addresses must all be tcp: IPv4 addresses, or all [IPv6] ones, got "
                f"'{a}' (a host name that resolves to several replicas works alone)")
    return addresses


def channel_target(addresses: Sequence[Address]) -> str:
    if len(addresses) == 1:
        return addresses[0].grpc_target()
    prefix = "ipv6:" if _family(addresses[0].host) == 6 else "ipv4:"
    return prefix + ",".join(a.grpc_target() for a in addresses)


def _read(path: str, what: str) -> bytes:
    try:
        with open(path, "rb") as f:
            return f.read()
    except OSError as e:
        raise InvalidArgument(grpc.StatusCode.INVALID_ARGUMENT,
                              f"{what}: cannot read {path}: {e.strerror}") from None


def open_channel(addresses: Sequence[Address], tls_ca: Optional[str], tls_cert: Optional[str],
                 tls_key: Optional[str]) -> grpc.Channel:
    """A channel to `addresses`; TLS when any of the files is given (then tcp: only)."""
    options: List[Tuple[str, object]] = [
        ("grpc.max_receive_message_length", MAX_MESSAGE_BYTES),
        ("grpc.max_send_message_length", MAX_MESSAGE_BYTES),
    ]
    first = addresses[0]
    tls = bool(tls_ca or tls_cert or tls_key)
    if first.unix_socket:
        if tls:
            raise InvalidArgument(
                grpc.StatusCode.INVALID_ARGUMENT,
                f"tls_*: TLS is for tcp: addresses; {first} is a local socket (unset "
                "SANDGATE_TLS_* or use the daemon's tcp: address)")
        return grpc.insecure_channel(channel_target(addresses), options=options)
    options.append(("grpc.lb_policy_name", "round_robin"))
    if not tls:
        return grpc.insecure_channel(channel_target(addresses), options=options)
    if bool(tls_cert) != bool(tls_key):
        raise InvalidArgument(grpc.StatusCode.INVALID_ARGUMENT,
                              "tls_cert and tls_key go together (a client certificate and its key)")
    creds = grpc.ssl_channel_credentials(
        root_certificates=_read(tls_ca, "tls_ca") if tls_ca else None,
        private_key=_read(tls_key, "tls_key") if tls_key else None,
        certificate_chain=_read(tls_cert, "tls_cert") if tls_cert else None)
    if len(addresses) > 1:
        # A list's target is not a host name: the replicas' certificates are checked against
        # the first one's host (a certificate for the service names them all).
        options.append(("grpc.ssl_target_name_override", first.host.strip("[]")))
    return grpc.secure_channel(channel_target(addresses), creds, options=options)


def reconnect_window() -> float:
    """Seconds a broken event stream is retried without word from the daemon:
    $SANDGATE_RECONNECT_TIMEOUT, else 60 (docs/client-contract.md)."""
    text = os.environ.get("SANDGATE_RECONNECT_TIMEOUT", "")
    try:
        seconds = float(text)
    except ValueError:
        return 60.0
    return seconds if seconds > 0 else 60.0
