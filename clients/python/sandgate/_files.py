"""Files the client receives, checked end to end, as the CLI's DownloadSink (client/transfer.h).

A download is written under a temporary name beside its final one, hashed as it arrives, and
renamed into place only once the sha256 of the stream's last chunk, the size it announced and
(when known beforehand) the run's record of the artifact all match what arrived: a cut or
corrupted stream leaves no file under the final name.
"""

from __future__ import annotations

import hashlib
import os
import tempfile
from typing import Iterable, Protocol

import grpc

from .errors import DataLoss, InvalidArgument


class Chunk(Protocol):
    """ArtifactChunk and FileChunk alike."""
    data: bytes
    total_size: int
    sha256: str


def safe_name(name: str, what: str) -> str:
    """`name` when it is a plain file name; DataLoss otherwise (the daemon named it)."""
    if name in ("", ".", "..") or "/" in name or "\\" in name or "\0" in name:
        raise DataLoss(grpc.StatusCode.DATA_LOSS,
                       f"the daemon named {what} {name!r}; not a file name")
    return name


def receive(chunks: Iterable[Chunk], path: str, expected_sha256: str = "") -> int:
    """Writes the stream to `path`; returns its size. DataLoss naming the file on a mismatch."""
    directory = os.path.dirname(os.path.abspath(path))
    if not os.path.isdir(directory):
        raise InvalidArgument(grpc.StatusCode.INVALID_ARGUMENT,
                              f"{directory} is not a directory (the download's destination)")
    fd, temp = tempfile.mkstemp(prefix=f".{os.path.basename(path)}.sandgate-partial-",
                                dir=directory)
    committed = False
    try:
        digest = hashlib.sha256()
        size = announced_size = 0
        announced_sha256 = ""
        with os.fdopen(fd, "wb") as out:
            for chunk in chunks:
                out.write(chunk.data)
                digest.update(chunk.data)
                size += len(chunk.data)
                announced_size = chunk.total_size
                if chunk.sha256:
                    announced_sha256 = chunk.sha256
        got = digest.hexdigest()
        if not announced_sha256:
            raise DataLoss(grpc.StatusCode.DATA_LOSS,
                           f"{path}: the stream ended without its sha256 ({size} bytes arrived)")
        if size != announced_size:
            raise DataLoss(grpc.StatusCode.DATA_LOSS,
                           f"{path}: {size} bytes arrived, the daemon announced {announced_size}")
        for source, want in (("the stream", announced_sha256), ("the run", expected_sha256)):
            if want and want != got:
                raise DataLoss(grpc.StatusCode.DATA_LOSS,
                               f"{path}: sha256 {got} does not match {source}'s {want}")
        os.replace(temp, path)
        committed = True
        return size
    finally:
        if not committed:
            try:
                os.unlink(temp)
            except FileNotFoundError:
                pass


def sha256_file(path: str) -> tuple[int, str]:
    """Size and sha256 of a local file, read in bounded chunks (for an upload's header)."""
    digest = hashlib.sha256()
    size = 0
    with open(path, "rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            digest.update(block)
            size += len(block)
    return size, digest.hexdigest()
