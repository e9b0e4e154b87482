"""What a post to Slack takes for delivered, against a loopback server that answers as a broken Slack, a
proxy or a portal would: only Slack's own `200 ok` is a delivery, a redirect is not followed, anything
http.client raises is one SlackError, and an attempt is bounded in all, not read by read."""

from __future__ import annotations

import contextlib
import threading
import time
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest

from lifeguard.event_contract import make_detail
from lifeguard.notify import Notifier
from lifeguard.notify.slack import SlackChannel, SlackError
from lifeguard.notify.summary import summarize
from tests.conftest import applied_event

pytestmark = pytest.mark.integration
SEEN: list[tuple[str, str]] = []


class _Answers(BaseHTTPRequestHandler):
    def log_message(self, *args: object) -> None:
        pass

    def do_GET(self) -> None:
        SEEN.append(("GET", self.path))
        self._answer(200, b"<html>not slack</html>")

    def do_POST(self) -> None:
        self.rfile.read(int(self.headers.get("Content-Length", 0)))
        SEEN.append(("POST", self.path))
        if self.path == "/ok":
            self._answer(200, b"ok")
        elif self.path == "/html":  # a proxy's login page, a portal, a URL that is not Slack's
            self._answer(200, b"<html>proxy login</html>")
        elif self.path == "/redirect":
            self.send_response(302)
            self.send_header("Location", "/elsewhere")
            self.send_header("Content-Length", "0")
            self.end_headers()
        elif self.path == "/garbage":  # no HTTP at all
            self.wfile.write(b"garbage\r\n\r\n")
        elif self.path == "/short":  # Slack took it; the connection dropped before the body's end
            self.send_response(200)
            self.send_header("Content-Length", "10")
            self.end_headers()
            self.wfile.write(b"ok")
        elif self.path == "/drip":  # each byte within a read's timeout, the whole far past it
            self.send_response(200)
            self.send_header("Content-Length", "12")
            self.end_headers()
            with contextlib.suppress(BrokenPipeError, ConnectionResetError):  # the client gave up: as meant
                for _ in range(12):
                    self.wfile.write(b"o")
                    self.wfile.flush()
                    time.sleep(0.4)

    def _answer(self, status: int, body: bytes) -> None:
        self.send_response(status)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)


@pytest.fixture(scope="module")
def base() -> Iterator[str]:
    server = ThreadingHTTPServer(("127.0.0.1", 0), _Answers)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{server.server_port}"
    server.shutdown()
    server.server_close()


def _send(url: str, *, attempts: int = 2, timeout: float = 1.0) -> None:
    detail = make_detail(cluster_id="pcs_abc123de45", compute_node_group_id="pcs_abcdef01")
    channel = SlackChannel(
        lambda: url, attempts=attempts, timeout_seconds=timeout, sleep=lambda _: None, min_interval_seconds=0
    )
    channel.send(summarize("LoopResolved", detail), detail)


def test_slacks_own_ok_is_a_delivery(base: str) -> None:
    SEEN.clear()
    _send(f"{base}/ok")
    assert SEEN == [("POST", "/ok")]


def test_a_200_that_is_not_slacks_ok_is_not_taken_for_delivered_nor_posted_again(base: str) -> None:
    SEEN.clear()
    with pytest.raises(SlackError, match="HTTP 200 without Slack's `ok`"):
        _send(f"{base}/html")
    assert SEEN == [("POST", "/html")]


def test_a_redirect_is_a_refusal_not_a_get_of_the_page_it_names(base: str) -> None:
    SEEN.clear()
    with pytest.raises(SlackError, match="HTTP 302, a redirect"):
        _send(f"{base}/redirect")
    assert SEEN == [("POST", "/redirect")]


def test_a_reply_that_is_not_http_is_tried_again_then_one_slack_error(base: str) -> None:
    SEEN.clear()
    with pytest.raises(SlackError, match="not delivered after 2 attempts: BadStatusLine"):
        _send(f"{base}/garbage")
    assert SEEN == [("POST", "/garbage")] * 2


def test_a_body_cut_short_after_slacks_ok_is_delivered_once(base: str) -> None:
    """Slack has the message: giving the claim back would have Lambda's retry post it again."""
    SEEN.clear()
    notifier = Notifier([SlackChannel(lambda: f"{base}/short", sleep=lambda _: None, min_interval_seconds=0)])
    assert notifier.handle_event(applied_event()).sent == ["slack"]
    assert SEEN.count(("POST", "/short")) == 1


def test_a_webhook_url_with_a_port_that_is_no_number_is_one_slack_error_without_the_url() -> None:
    url = "https://hooks.slack.com:abc/services/T0/B0/secret-part"
    with pytest.raises(SlackError) as raised:
        _send(url, attempts=1)
    assert str(raised.value) == "Slack message not sent: the webhook URL is not valid"


def test_an_attempt_is_bounded_in_all_not_read_by_read(base: str) -> None:
    """A far end answering a byte every 0.4 s holds each read under the 1 s timeout, the post 4.8 s."""
    started = time.monotonic()
    with pytest.raises(SlackError, match="did not answer the message it was sent within 1 s"):
        _send(f"{base}/drip", attempts=1, timeout=1.0)
    assert time.monotonic() - started < 2.0
