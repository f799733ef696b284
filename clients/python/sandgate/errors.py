"""The client's exceptions: one per gRPC status code a caller may want to tell apart.

Every failure of a call to the daemon is raised as an :class:`Error` (or a subclass named after
its code) carrying the daemon's ``code`` (a :class:`grpc.StatusCode`) and its ``message``, which
names the field or thing that is wrong::

    try:
        client.get_run("r-missing")
    except sandgate.NotFound as e:
        print(e.code, e.message)   # StatusCode.NOT_FOUND  run not found: r-missing

Problems the client finds itself use the same classes: a bad address is InvalidArgument, a
download whose bytes do not match their sha256 is DataLoss.
"""

from __future__ import annotations

from typing import Dict, Type

import grpc


class Error(Exception):
    """A call failed. ``code`` is the grpc.StatusCode, ``message`` the daemon's explanation."""

    def __init__(self, code: grpc.StatusCode, message: str) -> None:
        super().__init__(f"{code.name}: {message}")
        self.code = code
        self.message = message


class InvalidArgument(Error, ValueError):
    """A field of the request is wrong; the message names it."""


class NotFound(Error, LookupError):
    """No such run, session, artifact or file (another tenant's things are not found too)."""


class AlreadyExists(Error):
    pass


class PermissionDenied(Error):
    """The token is valid but may not do this (e.g. an operator-only call)."""


class Unauthenticated(Error):
    """No token, or one the daemon does not know."""


class ResourceExhausted(Error):
    """A limit or quota was reached (queue full, too many sessions, message too large)."""


class FailedPrecondition(Error):
    """The thing is not in a state for this (e.g. a closed session, an upload's hash mismatch)."""


class Unavailable(Error, ConnectionError):
    """The daemon cannot be reached, or is draining."""


class DeadlineExceeded(Error, TimeoutError):
    pass


class Cancelled(Error):
    pass


class Unimplemented(Error):
    """The daemon does not offer this feature (the message names the field)."""


class DataLoss(Error):
    """Bytes that arrived do not match their sha256 or size; nothing was written."""


_BY_CODE: Dict[grpc.StatusCode, Type[Error]] = {
    grpc.StatusCode.INVALID_ARGUMENT: InvalidArgument,
    grpc.StatusCode.NOT_FOUND: NotFound,
    grpc.StatusCode.ALREADY_EXISTS: AlreadyExists,
    grpc.StatusCode.PERMISSION_DENIED: PermissionDenied,
    grpc.StatusCode.UNAUTHENTICATED: Unauthenticated,
    grpc.StatusCode.RESOURCE_EXHAUSTED: ResourceExhausted,
    grpc.StatusCode.FAILED_PRECONDITION: FailedPrecondition,
    grpc.StatusCode.UNAVAILABLE: Unavailable,
    grpc.StatusCode.DEADLINE_EXCEEDED: DeadlineExceeded,
    grpc.StatusCode.CANCELLED: Cancelled,
    grpc.StatusCode.UNIMPLEMENTED: Unimplemented,
    grpc.StatusCode.DATA_LOSS: DataLoss,
}


def error(code: grpc.StatusCode, message: str) -> Error:
    """The exception for ``code``: its subclass when there is one, else Error."""
    return _BY_CODE.get(code, Error)(code, message)


def from_rpc_error(e: grpc.RpcError) -> Error:
    """The exception for a failed gRPC call (a grpc.RpcError is also a grpc.Call)."""
    code = e.code() if hasattr(e, "code") else grpc.StatusCode.UNKNOWN
    details = e.details() if hasattr(e, "details") else str(e)
    return error(code or grpc.StatusCode.UNKNOWN, details or "")
