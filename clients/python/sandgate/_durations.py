"""Seconds (or a timedelta) as the proto's Duration."""

from __future__ import annotations

import datetime
from typing import Optional, Union

import grpc
from google.protobuf import duration_pb2

from .errors import InvalidArgument

Seconds = Union[int, float, datetime.timedelta]


def duration(value: Optional[Seconds], what: str) -> Optional[duration_pb2.Duration]:
    """A Duration from seconds or a timedelta; None stays None (the daemon's default)."""
    if value is None:
        return None
    seconds = value.total_seconds() if isinstance(value, datetime.timedelta) else float(value)
    if seconds <= 0:
        raise InvalidArgument(grpc.StatusCode.INVALID_ARGUMENT,
                              f"{what} must be positive, got {value!r}")
    d = duration_pb2.Duration()
    d.FromNanoseconds(int(seconds * 1e9))
    return d
