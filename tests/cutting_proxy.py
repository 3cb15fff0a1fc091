"""A loopback TCP proxy that cuts connections after a number of bytes from the server."""
from __future__ import annotations

import socket
import threading


class CuttingProxy:
    """Forwards 127.0.0.1:<port> to a server; the first ``cuts`` connections that carry more
    than ``cut_after`` bytes from the server are closed abruptly mid-stream."""

    def __init__(self, target_host: str, target_port: int, *, cut_after: int, cuts: int = 1) -> None:
        self.target = (target_host, target_port)
        self.cut_after = cut_after
        self.cuts_left = cuts
        self.cuts_done = 0
        self.listener = socket.socket()
        self.listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        self.listener.bind(("127.0.0.1", 0))
        self.listener.listen(16)
        self.port = self.listener.getsockname()[1]
        self._lock = threading.Lock()
        self._closed = False
        threading.Thread(target=self._accept, daemon=True).start()

    def _accept(self) -> None:
        while not self._closed:
            try:
                client, _ = self.listener.accept()
            except OSError:
                return
            server = socket.create_connection(self.target)
            with self._lock:
                cut = self.cuts_left > 0
            threading.Thread(target=self._pipe, args=(client, server, None), daemon=True).start()
            threading.Thread(target=self._pipe, args=(server, client, self.cut_after if cut else None),
                             daemon=True).start()

    def _pipe(self, src: socket.socket, dst: socket.socket, limit) -> None:
        sent = 0
        try:
            while True:
                data = src.recv(65536)
                if not data:
                    break
                if limit is not None and sent + len(data) > limit:
                    with self._lock:
                        if self.cuts_left > 0:
                            self.cuts_left -= 1
                            self.cuts_done += 1
                            dst.sendall(data[: max(0, limit - sent)])
                            break
                    limit = None
                dst.sendall(data)
                sent += len(data)
        except OSError:
            pass
        for s in (src, dst):
            try:
                s.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass
            s.close()

    def close(self) -> None:
        self._closed = True
        self.listener.close()
