"""A loopback TCP proxy that resets its first connections, standing for a flaky network.

``with DroppingProxy(server_url, drop=2) as url:`` hands out ``url``; the first ``drop``
connections to it are reset as soon as they are accepted (the client sees a connection error),
later ones are piped to the server byte for byte.
"""

from __future__ import annotations

import contextlib
import socket
import struct
import threading
from urllib.parse import urlsplit

from backend.testing.servers import LOOPBACK


def _pipe(source: socket.socket, sink: socket.socket) -> None:
    try:
        while data := source.recv(65536):
            sink.sendall(data)
    except OSError:
        pass
    finally:
        # Wakes the opposite pipe, which then closes ``sink``, its source.
        with contextlib.suppress(OSError):
            sink.shutdown(socket.SHUT_RDWR)
        source.close()


class DroppingProxy:
    def __init__(self, target_url: str, drop: int) -> None:
        parts = urlsplit(target_url)
        self.target = (parts.hostname, parts.port)
        self.drop = drop
        self.accepted = 0
        self._listener = socket.create_server((LOOPBACK, 0))
        self._closing = threading.Event()
        self._thread = threading.Thread(target=self._accept_loop, daemon=True)

    def _accept_loop(self) -> None:
        while not self._closing.is_set():
            try:
                client, _ = self._listener.accept()
            except OSError:
                return
            self.accepted += 1
            if self.accepted <= self.drop:
                # linger 0: close sends a reset, as a crashed peer or a dropped route would
                client.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
                client.close()
                continue
            upstream = socket.create_connection(self.target)
            for source, sink in ((client, upstream), (upstream, client)):
                threading.Thread(target=_pipe, args=(source, sink), daemon=True).start()

    def __enter__(self) -> str:
        self._thread.start()
        return f"http://{LOOPBACK}:{self._listener.getsockname()[1]}"

    def __exit__(self, *exc: object) -> None:
        self._closing.set()
        with contextlib.suppress(OSError):
            self._listener.shutdown(socket.SHUT_RDWR)  # wakes the blocked accept()
        self._listener.close()
        self._thread.join(5)
