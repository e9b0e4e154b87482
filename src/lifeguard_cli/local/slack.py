"""A Slack incoming webhook on loopback: records what it receives, answers with injected faults.

Used by `lifeguard replay` in place of Slack and by the tests, which read the messages back.
"""

from __future__ import annotations

import contextlib
import json
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

from lifeguard_cli.local.loopback import serving

__all__ = ["SlackSink", "serve_slack"]


@dataclass
class _Fault:
    status: int
    retry_after: str | None = None
    delay_seconds: float = 0.0
    posted: bool = False  # a stalled post Slack posts all the same (it answers late, not never)
    body: bytes | None = None  # the answer's body (None: Slack's word for the status, `_SLACK_SAYS`)


# What Slack's webhooks answer a refused post with (its documented errors of each status): a word naming why.
_SLACK_SAYS = {
    400: b"invalid_payload",
    403: b"invalid_token",
    404: b"no_service",
    410: b"channel_is_archived",
}


@dataclass
class SlackSink:
    """What the webhook received, and the faults it will answer the next posts with."""

    url: str = ""
    messages: list[dict[str, Any]] = field(default_factory=list)
    attempts: int = 0
    _faults: list[_Fault] = field(default_factory=list)
    _lock: threading.Lock = field(default_factory=threading.Lock)

    def fail_next(
        self, status: int, *, times: int = 1, retry_after: str | None = None, body: bytes | None = None
    ) -> None:
        """Answer the next `times` posts with HTTP `status` (and a Retry-After header when given), its body
        Slack's word for the status unless `body` is given."""
        with self._lock:
            self._faults.extend(_Fault(status, retry_after, body=body) for _ in range(times))

    def stall_next(self, seconds: float, *, times: int = 1, posted: bool = False) -> None:
        """Hold the next `times` posts for `seconds` before answering 200 (a client times out first);
        `posted`: each is posted to the channel all the same, as Slack does with a message it answers
        late."""
        with self._lock:
            self._faults.extend(_Fault(200, None, seconds, posted) for _ in range(times))

    def _answer(self, body: bytes) -> _Fault:
        with self._lock:
            self.attempts += 1
            fault = self._faults.pop(0) if self._faults else _Fault(200)
            if fault.status == 200 and (not fault.delay_seconds or fault.posted):
                self.messages.append(json.loads(body))
            return fault


class _Handler(BaseHTTPRequestHandler):
    server: _SlackServer

    def do_POST(self) -> None:
        body = self.rfile.read(int(self.headers.get("Content-Length", "0")))
        fault = self.server.sink._answer(body)
        if fault.delay_seconds:
            time.sleep(fault.delay_seconds)
        self.send_response(fault.status)
        if fault.retry_after is not None:
            self.send_header("Retry-After", fault.retry_after)
        text = b"ok" if fault.status == 200 else fault.body
        if text is None:
            text = _SLACK_SAYS.get(fault.status, b"")
        self.send_header("Content-Length", str(len(text)))
        self.end_headers()
        with contextlib.suppress(OSError):  # the client may have given up waiting
            self.wfile.write(text)

    def log_message(self, format: str, *args: Any) -> None:
        pass


class _SlackServer(ThreadingHTTPServer):
    daemon_threads = True

    def __init__(self, sink: SlackSink) -> None:
        super().__init__(("127.0.0.1", 0), _Handler)
        self.sink = sink


@contextmanager
def serve_slack() -> Iterator[SlackSink]:
    """A running sink; its `url` is the webhook URL."""
    sink = SlackSink()
    with serving(_SlackServer(sink), "slack-sink") as base:
        sink.url = f"{base}/services/T000/B000/local"
        yield sink
