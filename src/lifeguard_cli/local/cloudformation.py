"""CloudFormation's side of a custom resource, on loopback: the presigned response URL it waits on, and
what the resource's function PUT there (for the tests of `functions/publish_bundle`)."""

from __future__ import annotations

import json
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

from lifeguard_cli.local.loopback import serving

__all__ = ["ResponseSink", "serve_cloudformation_responses"]


@dataclass
class ResponseSink:
    """The response URL, and one (path, headers, body) per response PUT to it."""

    url: str = ""
    received: list[tuple[str, dict[str, str], dict[str, Any]]] = field(default_factory=list)
    refuse: int = 0  # PUTs to answer 503 (S3's SlowDown) before taking one
    garble: int = 0  # PUTs to answer with no HTTP status line at all (a proxy gone wrong) before taking one

    @property
    def responses(self) -> list[dict[str, Any]]:
        """The response bodies, in order."""
        return [body for _, _, body in self.received]

    def only(self) -> dict[str, Any]:
        """The one response body; fails when there were none or several."""
        assert len(self.received) == 1, self.received
        return self.received[0][2]


@contextmanager
def serve_cloudformation_responses() -> Iterator[ResponseSink]:
    """A loopback endpoint that takes custom-resource responses as CloudFormation's response URL does
    (its query carries a signature, which a function must never log)."""
    sink = ResponseSink()

    class Handler(BaseHTTPRequestHandler):
        def do_PUT(self) -> None:
            body = self.rfile.read(int(self.headers.get("Content-Length", "0")))
            if sink.garble > 0:
                sink.garble -= 1
                self.wfile.write(b"garbage\r\n\r\n")
                self.close_connection = True
                return
            if sink.refuse > 0:
                sink.refuse -= 1
                self.send_response(503)
                self.send_header("Content-Length", "0")
                self.end_headers()
                return
            sink.received.append((self.path, dict(self.headers), json.loads(body)))
            self.send_response(200)
            self.send_header("Content-Length", "0")
            self.end_headers()

        def log_message(self, format: str, *args: Any) -> None:
            pass

    with serving(ThreadingHTTPServer(("127.0.0.1", 0), Handler), "cfn-responses") as base:
        sink.url = f"{base}/cloudformation-response?X-Amz-Signature=secret"
        yield sink
