"""A TCP proxy a test can cut: a database outage exactly as its clients see it.

We never stop the shared PostgreSQL; a process under test connects through this proxy instead, and
``cut()`` does to it what a stopped server does: every open connection is ended (the server side
of each is closed too, so PostgreSQL ends those sessions and releases their advisory locks) and new
connections are refused until ``restore()``.
"""

from __future__ import annotations

import contextlib
import socket
import threading

from tests.support import free_port


class TcpProxy:
    def __init__(self, upstream_host: str, upstream_port: int, port: int | None = None) -> None:
        self.upstream = (upstream_host, upstream_port)
        self.port = port or free_port()
        self._listener: socket.socket | None = None
        self._open: set[socket.socket] = set()
        self._lock = threading.Lock()
        self.cuts = 0

    # --- control ----------------------------------------------------------------------------------
    def start(self) -> None:
        listener = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        listener.bind(("127.0.0.1", self.port))
        listener.listen(128)
        self._listener = listener
        threading.Thread(target=self._accept, args=(listener,), daemon=True, name="tcp-proxy").start()

    def cut(self) -> None:
        """Refuse new connections and end every open one, both ways (what a stopped server does)."""
        self.cuts += 1
        listener, self._listener = self._listener, None
        if listener is not None:
            with contextlib.suppress(OSError):
                listener.shutdown(socket.SHUT_RDWR)
            listener.close()
        with self._lock:
            doomed, self._open = self._open, set()
        for sock in doomed:
            # shutdown() first: close() alone does not wake a pump blocked in recv() on the socket,
            # so nothing would reach either peer and the connection would hang instead of failing.
            with contextlib.suppress(OSError):
                sock.shutdown(socket.SHUT_RDWR)
            with contextlib.suppress(OSError):
                sock.close()

    def restore(self) -> None:
        if self._listener is None:
            self.start()

    stop = cut

    # --- plumbing ---------------------------------------------------------------------------------
    def _accept(self, listener: socket.socket) -> None:
        while True:
            try:
                client, _ = listener.accept()
            except OSError:
                return  # cut
            try:
                server = socket.create_connection(self.upstream, timeout=5)
                server.settimeout(None)
            except OSError:
                client.close()
                continue
            with self._lock:
                if self._listener is not listener:  # cut while we connected
                    client.close()
                    server.close()
                    return
                self._open.update((client, server))
            for src, dst in ((client, server), (server, client)):
                threading.Thread(target=self._pump, args=(src, dst), daemon=True).start()

    def _pump(self, src: socket.socket, dst: socket.socket) -> None:
        try:
            while True:
                data = src.recv(65536)
                if not data:
                    break
                dst.sendall(data)
        except OSError:
            pass
        finally:
            with self._lock:
                self._open.discard(src)
                self._open.discard(dst)
            for sock in (src, dst):  # shutdown() wakes the opposite pump and tells the peer
                with contextlib.suppress(OSError):
                    sock.shutdown(socket.SHUT_RDWR)
                with contextlib.suppress(OSError):
                    sock.close()
