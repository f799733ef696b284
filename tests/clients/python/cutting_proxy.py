"""A byte pump between a Unix socket and the daemon's, whose connections a test can cut: the
gRPC client sees its stream break as it would when a network or a load balancer drops it,
while the daemon and the run go on."""

from __future__ import annotations

import os
import socket
import threading
from typing import List, Tuple


class CuttingProxy:
    """Thread safe. close() stops it; cut() drops every connection open now."""

    def __init__(self, upstream_path: str, listen_path: str) -> None:
        self.upstream_path = upstream_path
        self.address = f"unix:{listen_path}"
        self.connections = 0  # accepted so far
        self._mu = threading.Lock()
        self._open: List[Tuple[socket.socket, socket.socket]] = []
        self._listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        self._listener.bind(listen_path)
        self._listener.listen(16)
        self._path = listen_path
        threading.Thread(target=self._accept, daemon=True).start()

    def _accept(self) -> None:
        while True:
            try:
                downstream, _ = self._listener.accept()
            except OSError:
                return  # closed
            upstream = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
            upstream.connect(self.upstream_path)
            with self._mu:
                self.connections += 1
                self._open.append((downstream, upstream))
            for a, b in ((downstream, upstream), (upstream, downstream)):
                threading.Thread(target=self._pump, args=(a, b), daemon=True).start()

    @staticmethod
    def _pump(source: socket.socket, sink: socket.socket) -> None:
        try:
            while True:
                data = source.recv(65536)
                if not data:
                    break
                sink.sendall(data)
        except OSError:
            pass
        for s in (source, sink):
            try:
                s.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass

    def cut(self) -> int:
        """Drops every open connection; returns how many."""
        with self._mu:
            pairs, self._open = self._open, []
        for pair in pairs:
            for s in pair:
                try:
                    s.shutdown(socket.SHUT_RDWR)
                except OSError:
                    pass
                s.close()
        return len(pairs)

    def close(self) -> None:
        self._listener.close()
        self.cut()
        os.unlink(self._path)
