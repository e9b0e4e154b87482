"""Serving a local endpoint on loopback for the duration of a block."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from contextlib import contextmanager
from http.server import HTTPServer

__all__ = ["SHUTDOWN_POLL_SECONDS", "serving"]

# How often a server's loop looks whether it is to stop: its shutdown waits up to this long (socketserver's
# default, half a second, made each replay and simulation wait a second or more as its servers stopped).
SHUTDOWN_POLL_SECONDS = 0.02


@contextmanager
def serving(server: HTTPServer, name: str) -> Iterator[str]:
    """Run `server` in a daemon thread named `name`; yields its base URL; shuts it down after the block."""
    thread = threading.Thread(
        target=server.serve_forever, args=(SHUTDOWN_POLL_SECONDS,), name=name, daemon=True
    )
    thread.start()
    host, port = server.server_address[:2]
    try:
        yield f"http://{host!s}:{port}"
    finally:
        server.shutdown()
        server.server_close()
        thread.join()
