"""The local PCS over HTTP: PCS's JSON 1.0 protocol on a loopback port, answered by a `LocalPcs`.

A plain `boto3.client("pcs", endpoint_url=server.endpoint_url)` works against it: the operation comes in
the `X-Amz-Target` header, the parameters as the JSON body, and the answer goes back with the protocol's
content type, a request id and, for an error, `x-amzn-ErrorType`.
"""

from __future__ import annotations

import json
import secrets
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

from lifeguard_cli.local.loopback import serving
from lifeguard_cli.local.pcs.resources import LocalPcs, PcsApiError

__all__ = ["LocalPcsServer", "serve_local_pcs"]

TARGET_PREFIX = "AWSParallelComputingService."
CONTENT_TYPE = "application/x-amz-json-1.0"
BODY_MAX_BYTES = 16 * 1024 * 1024  # a request's body at most (PCS's largest is a group's configuration)


class _Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    disable_nagle_algorithm = True  # headers and body go out in two writes: no 40 ms delayed-ACK stall
    server: _PcsHttpServer

    def do_POST(self) -> None:
        said = self.headers.get("Content-Length") or "0"
        # A length, and one a request of the API can have: a body of gigabytes is read to no end.
        length = int(said) if said.isascii() and said.isdigit() and len(said) <= 9 else -1
        length = length if length <= BODY_MAX_BYTES else -1
        body = self.rfile.read(length) if length >= 0 else b""
        target = self.headers.get("X-Amz-Target", "")
        if length < 0:  # answered, not a traceback and a dropped connection (nor a read to no end)
            error = PcsApiError(
                "ValidationException",
                f"Content-Length {said[:40]!r} is not a length of at most {BODY_MAX_BYTES} bytes",
            )
            status, payload = error.status, error.body()
            self.close_connection = True  # where the body ends is not known
        elif not target.startswith(TARGET_PREFIX):
            error = PcsApiError("UnknownOperationException", f"missing or foreign X-Amz-Target {target!r}")
            status, payload = error.status, error.body()
        else:
            status, payload = self.server.pcs.handle(target.removeprefix(TARGET_PREFIX), body)
        data = json.dumps(payload).encode()
        self.send_response(status)
        self.send_header("Content-Type", CONTENT_TYPE)
        self.send_header("Content-Length", str(len(data)))
        self.send_header("x-amzn-RequestId", secrets.token_hex(16))
        if status >= 300:
            self.send_header("x-amzn-ErrorType", str(payload.get("__type", "")))
        self.end_headers()
        self.wfile.write(data)

    def log_message(self, format: str, *args: Any) -> None:
        """Quiet: the endpoint's calls are in `LocalPcs.calls`."""


class _PcsHttpServer(ThreadingHTTPServer):
    daemon_threads = True

    def __init__(self, pcs: LocalPcs) -> None:
        super().__init__(("127.0.0.1", 0), _Handler)
        self.pcs = pcs


@dataclass
class LocalPcsServer:
    """A running local PCS endpoint: `endpoint_url` for boto3, `pcs` for state, faults and seeding."""

    pcs: LocalPcs
    endpoint_url: str


@contextmanager
def serve_local_pcs(pcs: LocalPcs | None = None) -> Iterator[LocalPcsServer]:
    """Serve a local PCS on a free loopback port for the duration of the block."""
    state = pcs or LocalPcs()
    with serving(_PcsHttpServer(state), "local-pcs") as base:
        yield LocalPcsServer(state, base)
