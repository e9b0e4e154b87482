"""Slack: Block Kit messages through an incoming webhook whose URL lives in Secrets Manager.

The URL is a credential: it is read once per `ttl` and never logged or put in an error message. Posting
honours 429 `Retry-After`, retries 5xx and failed connections with backoff (a message sent whole and
unanswered in time is left to Lambda's retry: Slack may have posted it), and keeps to one message a second
per webhook. Messages stay within Block Kit's limits (header 150 characters, section 3,000, 50 blocks).
"""

from __future__ import annotations

import contextlib
import email.utils
import hashlib
import http.client
import json
import math
import os
import re
import socket
import ssl
import threading
import time
import urllib.error
import urllib.request
from collections.abc import Callable, Mapping
from typing import Any, Protocol
from urllib.parse import urlsplit

from lifeguard.errors import AwsCallError, LifeguardError
from lifeguard.metrics import Metric, uncounted
from lifeguard.notify.summary import Summary

__all__ = ["SecretWebhook", "SlackChannel", "SlackError", "shown_text", "slack_message"]

HEADER_MAX_CHARS = 150
SECTION_MAX_CHARS = 3000
MAX_BLOCKS = 50
_EMOJI = {
    "critical": ":rotating_light:",
    "high": ":warning:",
    "medium": ":wrench:",
    "info": ":white_check_mark:",
}
_LOOPBACK = ("127.0.0.1", "localhost", "::1")
# When each webhook (by hash) may take its next message: shared by every channel of the process.
_NEXT_POST: dict[str, float] = {}


# (webhook key, interval, the longest wait the sender can take) -> seconds to wait before posting, or None
# when the next free slot is further away than that (none is taken): a pace shared beyond this process.
class Pacer(Protocol):
    """The webhook's pace shared by every invocation (`lifeguard.store.notices.NoticeStore`)."""

    def reserve_post(
        self, webhook_key: str, interval_seconds: float, max_wait: float | None = None
    ) -> float | None:
        """Take the next free slot; the seconds to wait for it (None: none within `max_wait`)."""

    def hold_post(self, webhook_key: str, seconds: float) -> None:
        """No message for `seconds` from now, whoever sends it (held ends merged)."""

    def held_for(self, webhook_key: str) -> float:
        """Seconds from now no message is taken for (0: no hold)."""


# Of the invocation's time left, what a post needs after its wait: its attempts' timeouts and backoff.
SEND_MARGIN_SECONDS = 40.0
# The longest a 429's Retry-After is taken at: a webhook held for more is held for an hour.
RETRY_AFTER_MAX_SECONDS = 3600.0


def _webhook_key(url: str) -> str:
    """A webhook's key in the shared pace: its URL's hash (the URL is the credential, never stored)."""
    return hashlib.sha256(url.encode()).hexdigest()


class SlackError(LifeguardError):
    """A Slack message could not be delivered; the message never contains the webhook URL."""


def _units(text: str) -> int:
    """The text's length as Slack may count it against a limit: in UTF-16 code units (a character past
    U+FFFF, as most emoji are, is two), never fewer than its characters."""
    return len(text.encode("utf-16-le", "surrogatepass")) // 2


def _clip(text: str, limit: int) -> str:
    """The text cut to `limit` UTF-16 units, its end an ellipsis when cut (never inside an escape:
    `_escaped`'s `&amp;` cut to `&am` would show as such)."""
    if len(text) * 2 <= limit or _units(text) <= limit:
        return text
    kept = text.encode("utf-16-le", "surrogatepass")[: (limit - 1) * 2]
    cut = kept.decode("utf-16-le", "ignore")  # a pair cut in half is dropped whole
    entity = _ENTITY_CUT.search(text, max(0, len(cut) - 4), len(cut) + 4)
    if entity is not None and entity.start() < len(cut) < entity.end():
        cut = cut[: entity.start()]
    return cut + "…"


def _tail(text: str, limit: int) -> str:
    """The end of the text in `limit` UTF-16 units, an ellipsis first when cut (never inside an escape)."""
    if len(text) * 2 <= limit or _units(text) <= limit:
        return text
    kept = text.encode("utf-16-le", "surrogatepass")[-(limit - 1) * 2 :]
    cut = kept.decode("utf-16-le", "ignore")
    start = len(text) - len(cut)
    entity = _ENTITY_CUT.search(text, max(0, start - 4), start + 4)
    if entity is not None and entity.start() < start < entity.end():
        cut = cut[entity.end() - start :]
    return "…" + cut


# `_escaped`'s escapes, which a cut must take whole or not at all.
_ENTITY_CUT = re.compile(r"&(?:amp|lt|gt);")


def _escaped(text: str) -> str:
    """Text from an event as mrkdwn shows it, never as markup: Slack reads `<!channel>`, `<@U…>` and
    `<https://…|label>` in mrkdwn, and a script's location or log can hold any of them. Its three control
    characters are escaped as Slack documents. Text that is not Unicode (a lone surrogate in a value the
    event carries as it came) is shown as its escape, as SNS shows it: JSON would carry it as `\\ud800`,
    which is no character, and a post Slack refused for it would be refused on every retry."""
    if not text.isascii():
        text = text.encode("utf-8", "backslashreplace").decode("utf-8")
    return text.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")


def shown_text(mrkdwn: str) -> str:
    """Text of a message as the channel shows it: `_escaped` undone."""
    return mrkdwn.replace("&lt;", "<").replace("&gt;", ">").replace("&amp;", "&")


def _mrkdwn(text: str) -> dict[str, Any]:
    """A mrkdwn text object Slack shows as written: `verbatim`, so it does not turn a plain URL, channel
    name or `@here` in an event's values into a link or a mention (it still reads Lifeguard's own
    `<url|label>`; `_escaped` keeps an event's values from forming one)."""
    return {"type": "mrkdwn", "text": _clip(text, SECTION_MAX_CHARS), "verbatim": True}


def _section(text: str) -> dict[str, Any]:
    return {"type": "section", "text": _mrkdwn(text)}


def _code(text: str, limit: int = SECTION_MAX_CHARS) -> str:
    body = _escaped(text).replace("```", "'''")
    return f"```{_tail(body, limit - 8)}```"  # the end of a log is what explains the failure


# What a section ends with when its lines do not all fit: how many it leaves to the SNS message.
_MORE_ROOM = 120


def _fitted(lines: list[str], room: int) -> tuple[list[str], int]:
    """The first of `lines` (mrkdwn, each a line of the section) that fit in `room` UTF-16 units with their
    line breaks, and how many were left out; when any is, the room of a closing line is kept. A first line
    longer than the room alone is cut (`_clip`)."""
    if _units("\n".join(lines)) <= room:
        return lines, 0
    kept: list[str] = []
    used = 0
    for line in lines:
        size = _units(line) + 1
        if used + size > room - _MORE_ROOM:
            break
        kept.append(line)
        used += size
    if not kept and lines:
        kept = [_clip(lines[0], room - _MORE_ROOM)]
    return kept, len(lines) - len(kept)


def _more(left_out: int, what: str) -> str:
    return f"… and {left_out} more {what} (the SNS message shows them all)"


def _diff_block(diff: tuple[str, ...], title: str) -> str:
    """A change's diff as a code block from its first line (the first paths are the change's own), whole
    lines only, those left out counted after it."""
    head = f"*{_escaped(title)}*\n"
    lines = [_escaped(line).replace("```", "'''") for line in diff]
    shown, left_out = _fitted(lines, SECTION_MAX_CHARS - len(head) - 8)
    block = head + "```" + "\n".join(shown) + "```"
    return block + ("\n" + _more(left_out, "line(s) of the change") if left_out else "")


def _bullets(title: str, lines: tuple[str, ...]) -> str:
    """A titled list of an event's lines, whole lines only, those left out counted at its end."""
    head = f"*{_escaped(title)}*\n"
    shown, left_out = _fitted([f"• {_escaped(line)}" for line in lines], SECTION_MAX_CHARS - len(head))
    return head + "\n".join(shown) + ("\n" + _more(left_out, "line(s)") if left_out else "")


def slack_message(
    summary: Summary, detail: Mapping[str, Any], *, sequence: int | None = None
) -> dict[str, Any]:
    """The Block Kit payload of one event, with a plain `text` fallback."""
    emoji = _EMOJI.get(summary.severity, ":information_source:")
    header = _clip(summary.heading(HEADER_MAX_CHARS), HEADER_MAX_CHARS)  # plain text
    blocks: list[dict[str, Any]] = [
        {"type": "header", "text": {"type": "plain_text", "text": header, "emoji": True}},
        _section(f"{emoji} {_escaped(summary.headline)}"),
    ]
    if summary.evidence:
        blocks.append(_section(_bullets(summary.evidence_title, summary.evidence)))
    if summary.suspect:
        blocks.append(_section(f"*Failing script*: {_escaped(summary.suspect)}"))
        if summary.log_tail:
            blocks.append(_section(_code(summary.log_tail)))
    if summary.action:
        blocks.append(_section(f"*Action*: {_escaped(summary.action)}"))
    if summary.diff:
        blocks.append(_section(_diff_block(summary.diff, summary.diff_title)))
    if summary.undo:
        blocks.append(_section(f"*Undo*: `{_escaped(summary.undo)}`"))
    if summary.console:
        way = _escaped(summary.console_way)
        blocks.append(_section(f"<{summary.console}|Open the cluster in the AWS PCS console>, then {way}"))
    if summary.nodes:
        blocks.append(_section(f"<{summary.nodes}|The group's instances in the EC2 console>"))
    if summary.problems:
        blocks.append(_section(_bullets("Not shown (not valid in the event)", summary.problems)))
    episode = _escaped(str(detail.get("episode_id") or "-"))
    context = (
        f"Episode `{episode}`" + (f" · message {sequence}" if sequence else "") + f" · {summary.detail_type}"
    )
    blocks.append({"type": "context", "elements": [_mrkdwn(context)]})
    return {"text": _clip(_escaped(summary.text()), 3900), "blocks": blocks[:MAX_BLOCKS]}


# What Slack answers a post to a webhook that is no more: revoked (403, 404) or its channel archived (410).
_GONE = frozenset({403, 404, 410})
# Slack's answer to a post it took is `ok`; an answer is read up to this many bytes.
_ANSWER_MAX_BYTES = 1024


# Slack names why it refused a post in a word of its answer (`channel_not_found`, `invalid_token`,
# `no_service`, `channel_is_archived`, `invalid_payload`): each asks for another fix, so it is said. Read up
# to this many bytes, and taken only when it is such a word.
_REFUSAL_MAX_BYTES = 64
_REFUSAL_WORD = re.compile(r"[a-z_]{1,40}")


class _Refused(urllib.error.HTTPError):
    """An answer of 300 or more, with the word Slack said why in (`slack_error`, empty when none)."""

    def __init__(self, refused: urllib.error.HTTPError, slack_error: str) -> None:
        super().__init__(refused.url, refused.code, refused.msg, refused.headers, None)
        self.slack_error = slack_error


def _refusal_word(refused: urllib.error.HTTPError) -> str:
    """The word a refusal's answer begins with, when it is one of Slack's (read while the post's time
    runs: a body that stalls is cut with it)."""
    try:
        text = refused.read(_REFUSAL_MAX_BYTES).strip().decode("ascii")
    except (OSError, http.client.HTTPException, ValueError):
        return ""
    return text if _REFUSAL_WORD.fullmatch(text) else ""


# What becomes of a message not sent in its invocation: the stack's notify function is retried twice by
# Lambda (EventInvokeConfig), then its event is parked in ParkedEventsQueue for a redrive.
RETRIED_THEN_PARKED = "Lambda retries it about 1 and 3 minutes later, then parks it for a redrive"


def _unreached(reason: object) -> str:
    """Why a post got no answer, in words (never the exception's own text: urllib's may quote the URL, the
    credential)."""
    if isinstance(reason, TimeoutError):
        return "timed out"
    if isinstance(reason, str):
        return "the URL could not be used"
    if isinstance(reason, socket.gaierror):
        return "the webhook's host name does not resolve (DNS, or no route out of the VPC)"
    if isinstance(reason, ssl.SSLCertVerificationError):
        return "the webhook's TLS certificate is not valid for its host (a proxy that intercepts TLS?)"
    if isinstance(reason, ConnectionRefusedError):
        return "the connection was refused"
    if isinstance(reason, ConnectionResetError | http.client.RemoteDisconnected):
        return "the connection was closed without an answer"
    return type(reason).__name__


def _refused(code: int, slack_error: str = "") -> str:
    if 300 <= code < 400:
        return f"Slack refused the message: HTTP {code}, a redirect (not followed: Slack answers directly)"
    return f"Slack refused the message: HTTP {code}" + (f" {slack_error}" if slack_error else "")


class _NoRedirect(urllib.request.HTTPRedirectHandler):
    """A redirect is an answer, not a way on: urllib would follow it as a GET and take that page's 200."""

    def redirect_request(self, *args: Any, **kwargs: Any) -> None:
        return None


class _Connections:
    """The sockets of one attempt, cut when its time is up (a socket's timeout bounds each read, not the
    attempt: a far end that answers a byte at a time would hold it for as long as it likes). Each is kept
    once connected: urllib lets go of a connection's socket once the answer's head is read, and the body
    is read from it after."""

    def __init__(self) -> None:
        self._sockets: list[socket.socket] = []
        self._lock = threading.Lock()
        self.cut = False
        self.sent = False  # the whole request went out: Slack may have the message, answered or not

    def plain(self, host: str, **kwargs: Any) -> http.client.HTTPConnection:
        return self._watched(http.client.HTTPConnection(host, **kwargs))

    def tls(self, host: str, **kwargs: Any) -> http.client.HTTPConnection:
        return self._watched(http.client.HTTPSConnection(host, **kwargs))

    def _watched(self, connection: http.client.HTTPConnection) -> http.client.HTTPConnection:
        """`connection`, whose socket is kept (and cut at once when the time is already up) on connect."""
        connect = connection.connect

        def watched() -> None:
            connect()
            with self._lock:
                self._sockets.append(connection.sock)
                if self.cut:
                    _shut(connection.sock)

        connection.connect = watched  # type: ignore[method-assign]
        getresponse = connection.getresponse

        def answered() -> http.client.HTTPResponse:
            self.sent = True  # asked for the answer: the request and its body were written
            return getresponse()

        connection.getresponse = answered  # type: ignore[method-assign]
        return connection

    def stop(self) -> None:
        with self._lock:
            self.cut = True
            for sock in self._sockets:
                _shut(sock)


def _shut(sock: socket.socket) -> None:
    with contextlib.suppress(OSError):
        sock.shutdown(socket.SHUT_RDWR)


class _Http(urllib.request.HTTPHandler):
    def __init__(self, connections: _Connections) -> None:
        super().__init__()
        self._connections = connections

    def http_open(self, req: urllib.request.Request) -> http.client.HTTPResponse:
        return self.do_open(self._connections.plain, req)


class _Https(urllib.request.HTTPSHandler):
    def __init__(self, connections: _Connections) -> None:
        super().__init__()
        self._connections = connections

    def https_open(self, req: urllib.request.Request) -> http.client.HTTPResponse:
        return self.do_open(self._connections.tls, req)


def _post(url: str, body: bytes, seconds: float) -> tuple[int, bytes]:
    """POST `body` as JSON; (status, the answer's first bytes), within `seconds` in all. Raises urllib's
    HTTPError for an answer of 300 or more (a redirect too: not followed), TimeoutError when the time ran
    out, and what urllib and http.client raise for no answer or one that is not HTTP. A 200 whose body is
    cut short after Slack's `ok` is `ok`: Slack has the message, and a retry would post it twice."""
    connections = _Connections()
    opener = urllib.request.build_opener(_NoRedirect(), _Http(connections), _Https(connections))
    request = urllib.request.Request(
        url, data=body, headers={"Content-Type": "application/json"}, method="POST"
    )
    timer = threading.Timer(seconds, connections.stop)
    timer.daemon = True
    timer.start()
    try:
        with opener.open(request, timeout=seconds) as response:
            try:
                answer = response.read(_ANSWER_MAX_BYTES)
            except http.client.IncompleteRead as exc:
                answer = exc.partial
            answer = answer.strip()
            if connections.cut and answer != b"ok":  # cut mid-answer: what came is not all of it
                raise _Unanswered(f"no whole answer within {seconds:g} s to the message sent")
            return response.status, answer
    except (OSError, http.client.HTTPException) as exc:
        if isinstance(exc, urllib.error.HTTPError):
            raise _Refused(exc, _refusal_word(exc)) from None
        if isinstance(exc, _Unanswered):
            raise
        timed_out = connections.cut or isinstance(exc, TimeoutError)
        if timed_out and connections.sent:  # the time ran out waiting for the answer: Slack may have it
            raise _Unanswered(f"no whole answer within {seconds:g} s to the message sent") from None
        if connections.cut:
            raise TimeoutError(f"no whole answer within {seconds:g} s") from None
        raise
    finally:
        timer.cancel()


class _Unanswered(OSError):
    """The message went out whole and the time ran out before its whole answer came: Slack may have
    posted it (a reply that is no HTTP, or a connection cut by the far end, is no such case)."""


def _unusable(url: str) -> str | None:
    """Why a webhook URL is not one to post to, or None. Slack's are https to hooks.slack.com; any https
    host is taken (a Slack-compatible service, a relay), but none that is no host, or an address of the
    machine's own link (169.254.0.0/16, fe80::/10: the instance metadata service). Plain http only to this
    machine, and not inside a Lambda, whose loopback is its runtime's API (a local Slack, for tests and
    `lifeguard replay`)."""
    if not (url.isascii() and url.isprintable() and " " not in url):
        return "not a printable URL"
    try:
        parts = urlsplit(url)
    except ValueError:  # `https://[::1/x`: a bracket not closed
        return "not a URL"
    try:
        host, _ = parts.hostname, parts.port
    except ValueError:
        return "its port is not a number"
    if not host or any(not label for label in host.rstrip(".").split(".")):
        return "no host"  # `hooks..slack.com` too: an empty label, which no name has
    if "@" in parts.netloc:  # urllib takes no credentials from a URL: every post would fail, later
        return "a user name or password in it"
    if _link_local(host):
        return "a link-local address"
    if parts.scheme == "https":
        return None
    if parts.scheme == "http" and host in _LOOPBACK and not os.environ.get("AWS_LAMBDA_RUNTIME_API"):
        return None
    return "not https"


def _link_local(host: str) -> bool:
    """Whether `host` is an address of the machine's own link, however written: `169.254.169.254`, and the
    forms a resolver reads as that address too (`2852039166`, `0xa9fea9fe`, `169.254.43518`), or IPv6's
    (`fe80::1`, `::ffff:169.254.169.254`)."""
    import ipaddress  # here: read with the secret, not at every cold start

    address: ipaddress.IPv4Address | ipaddress.IPv6Address
    try:
        address = ipaddress.ip_address(host)
    except ValueError:
        try:
            address = ipaddress.IPv4Address(socket.inet_aton(host))
        except OSError:  # a name
            return False
    mapped = address.ipv4_mapped if isinstance(address, ipaddress.IPv6Address) else None
    return address.is_link_local or (mapped is not None and mapped.is_link_local)


class SecretWebhook:
    """The webhook URL from a Secrets Manager secret (the URL itself, or JSON with `url`/`webhook_url`),
    read through Powertools Parameters, which keeps it `ttl_seconds` (a rotated URL is used within that)."""

    PERMISSIONS = ("secretsmanager:GetSecretValue",)

    def __init__(self, client: Any, secret_id: str, *, ttl_seconds: float = 300.0) -> None:
        self._client = client
        self.secret_id = secret_id
        self.ttl_seconds = ttl_seconds
        self._provider: Any = None
        self.reads = 0  # GetSecretValue calls made (the others were answered from the cache)

    def fresh(self) -> str:
        """The URL read from the secret now, past the cache (Slack refused the one it held: rotated?)."""
        return self(fresh=True)

    def __call__(self, *, fresh: bool = False) -> str:
        """The URL; raises AwsCallError when the secret cannot be read, SlackError when it holds no URL."""
        if self._provider is None:
            # Here, not at import: Powertools' parameters module imports boto3 (the cold start's budget).
            from aws_lambda_powertools.utilities.parameters import SecretsProvider

            self._client.meta.events.register("before-call.secrets-manager.GetSecretValue", self._counted)
            self._provider = SecretsProvider(boto3_client=self._client)
        from aws_lambda_powertools.utilities.parameters.exceptions import GetParameterError

        try:
            raw = str(self._provider.get(self.secret_id, max_age=int(self.ttl_seconds), force_fetch=fresh))
        except GetParameterError as exc:
            cause = exc.__cause__ or exc.__context__ or exc
            raise AwsCallError.from_exception("GetSecretValue", cause) from exc
        url = raw.strip()
        if url.startswith("{"):
            try:
                data = json.loads(url)
                url = str(data.get("url") or data.get("webhook_url") or "")
            except (ValueError, AttributeError):
                url = ""
        problem = _unusable(url)
        if problem is not None:
            # Named by the secret, never by its value: the URL is the credential.
            raise SlackError(f"secret {self.secret_id} does not hold an https webhook URL: {problem}")
        return url

    def _counted(self, **_: Any) -> None:
        self.reads += 1


class SlackChannel:
    """Posts to one incoming webhook."""

    name = "slack"
    _guard = threading.Lock()

    def __init__(
        self,
        webhook: Callable[[], str],
        *,
        attempts: int = 4,
        timeout_seconds: float = 5.0,
        min_interval_seconds: float = 1.0,
        max_retry_after_seconds: float = 30.0,
        sleep: Callable[[float], None] = time.sleep,
        clock: Callable[[], float] = time.monotonic,
        pacer: Pacer | None = None,
        metric: Metric = uncounted,
        time_left: Callable[[], float] | None = None,
    ) -> None:
        self._webhook = webhook
        self.attempts = attempts
        self.timeout_seconds = timeout_seconds
        self.min_interval_seconds = min_interval_seconds
        self.max_retry_after_seconds = max_retry_after_seconds
        self._sleep = sleep
        self._clock = clock
        self._pacer = pacer
        self._metric = metric  # SlackRetries: a post tried again (429, 5xx, a failed connection)
        # Seconds the invocation has left (None: no bound): no slot is taken that it could not wait for.
        self._time_left = time_left

    def send(self, summary: Summary, detail: Mapping[str, Any], *, sequence: int | None = None) -> None:
        """Post the event; raises SlackError when every attempt failed. A URL Slack says is gone (403,
        404, 410: revoked, or its channel archived) is read again from its secret once, past the cache: a
        URL rotated there is used at once, not only once the cache expires. Delivered means Slack's own
        answer, 200 and `ok`: a redirect is not followed, and another page (a proxy's, a portal's) is not
        taken for Slack's. Each attempt takes at most `timeout_seconds` in all, however slowly the far end
        answers."""
        url = self._webhook()
        reread = False
        body = json.dumps(slack_message(summary, detail, sequence=sequence)).encode()
        problem = "no attempt made"
        for attempt in range(1, self.attempts + 1):
            self._pace(url)
            delay = min(8.0, 0.5 * 2 ** (attempt - 1))
            try:
                status, answer = _post(url, body, self.timeout_seconds)
            except urllib.error.HTTPError as exc:
                said = getattr(exc, "slack_error", "")
                problem = f"HTTP {exc.code}" + (f" {said}" if said else "")
                retry_after = exc.headers.get("Retry-After") if exc.headers is not None else None
                if exc.code == 429 or (exc.code == 503 and retry_after is not None):
                    # No message before the time Slack (or a relay, unavailable for a while) asked for,
                    # from this sender or any other: the webhook's pace is held that long, and the next
                    # attempt waits in it.
                    hold = self._retry_after(retry_after, delay)
                    self._hold(url, hold)
                    if hold > self._longest_wait():
                        raise SlackError(
                            f"Slack asked for no message for {hold:g} s (HTTP {exc.code}, Retry-After), "
                            f"longer than this invocation can wait; {RETRIED_THEN_PARKED}"
                        ) from None
                    delay = 0.0
                elif exc.code in _GONE and not reread:
                    reread = True
                    fresh = getattr(self._webhook, "fresh", None)
                    newer = fresh() if fresh is not None else url
                    if newer != url:
                        url = newer
                        continue  # the next attempt, at once, on the rotated URL
                    raise SlackError(_refused(exc.code, said)) from None
                elif exc.code < 500:
                    raise SlackError(_refused(exc.code, said)) from None
            except http.client.InvalidURL:  # its message quotes the URL: the credential
                raise SlackError("Slack message not sent: the webhook URL is not valid") from None
            except _Unanswered:
                # Posted again here, a slow Slack that had it shows it once an attempt: Lambda's retries
                # alone post it again (twice at most: three posts in all), each after a minute or more.
                raise SlackError(
                    f"Slack did not answer the message it was sent within {self.timeout_seconds:g} s (it may "
                    "have been posted); not posted again in this invocation"
                ) from None
            except (urllib.error.URLError, http.client.HTTPException, OSError) as exc:
                # No answer, a cut connection, a reply that is not HTTP, or the attempt's time ran out.
                reason = getattr(exc, "reason", exc)
                problem = _unreached(reason)
                if isinstance(reason, ssl.SSLCertVerificationError):
                    # The same certificate on every try: said at once, not retried.
                    raise SlackError(f"Slack message not sent: {problem}") from None
            else:
                if status == 200 and answer == b"ok":
                    return
                raise SlackError(
                    f"Slack did not take the message: HTTP {status} without Slack's `ok` (a proxy or "
                    "portal answered? is the secret's URL a Slack webhook?)"
                )
            if attempt < self.attempts:
                self._metric("SlackRetries", 1)
                if delay > 0:
                    self._sleep(delay)
        raise SlackError(f"Slack message not delivered after {self.attempts} attempts: {problem}")

    @staticmethod
    def _retry_after(header: str | None, default: float) -> float:
        """Seconds a Retry-After asks for, in either of HTTP's forms (seconds, or a date), at most an hour;
        `default` when it says none or nothing that can be read (`nan`, a negative number, a bad date)."""
        text = (header or "").strip()[:64]
        if not text:
            return default
        try:
            seconds = float(text)
        except ValueError:
            try:
                seconds = email.utils.parsedate_to_datetime(text).timestamp() - time.time()
            except (TypeError, ValueError, IndexError, OverflowError):
                return default
            seconds = max(0.0, seconds)  # a date gone by: at once
        if math.isnan(seconds) or seconds < 0:
            return default
        return min(RETRY_AFTER_MAX_SECONDS, seconds)

    def _longest_wait(self) -> float:
        """The longest a post may wait here: `max_retry_after_seconds`, and no more than the invocation has
        left for it (its time less what a post needs after its wait)."""
        longest = self.max_retry_after_seconds
        if self._time_left is not None:
            longest = min(longest, self._time_left() - SEND_MARGIN_SECONDS)
        return longest

    def _hold(self, url: str, seconds: float) -> None:
        """Take no message on the webhook for `seconds` from now, whoever sends it: the shared pace's next
        free slot moves past that (the table's, for every invocation; else this process's)."""
        key = _webhook_key(url)
        if self._pacer is not None:
            self._pacer.hold_post(key, seconds)
            return
        with self._guard:
            until = self._clock() + seconds
            _NEXT_POST[key] = max(_NEXT_POST.get(key, until), until)

    def _pace(self, url: str) -> None:
        key = _webhook_key(url)
        if self._pacer is not None:
            # Shared by every concurrent invocation: each takes the webhook's next free slot, one it can
            # wait for; else the message is retried later (Lambda's retry), holding up no one meanwhile.
            most = self._time_left() - SEND_MARGIN_SECONDS if self._time_left is not None else None
            wait = self._pacer.reserve_post(key, self.min_interval_seconds, most)
            if wait is None:
                # Past a 429's hold (Slack's), or behind the other senders' messages (the pace's).
                held = self._pacer.held_for(key)
                why = (
                    f"Slack asked for no message for {held:.0f} s more (HTTP 429, Retry-After), longer than"
                    if held > 0
                    else "the webhook takes one message a second, and the ones queued before it take "
                    "longer than"
                )
                raise SlackError(
                    f"Slack message not sent yet: {why} this invocation has left; {RETRIED_THEN_PARKED}"
                )
            if wait <= 0:
                return  # a slot now: a hold before it moved the slots past its end (`hold_post`)
            self._sleep(wait)
            # A slot taken before another sender's 429 (while this one waited) is not used inside the time
            # Slack asked for.
            held = self._pacer.held_for(key)
            if held > 0:
                if held > self._longest_wait():
                    raise SlackError(
                        f"Slack asked for no message for {held:g} s more (HTTP 429 to another sender), "
                        f"longer than this invocation can wait; {RETRIED_THEN_PARKED}"
                    )
                self._sleep(held)
            return
        with self._guard:
            now = self._clock()
            wait = _NEXT_POST.get(key, -1e9) - now
            # A hold an earlier invocation of this process was given, longer than this one has left.
            if wait > 0 and self._time_left is not None and wait > self._time_left() - SEND_MARGIN_SECONDS:
                raise SlackError(
                    f"Slack message not sent yet: Slack asked for no message for {wait:.0f} s more (HTTP "
                    f"429, Retry-After), longer than this invocation has left; {RETRIED_THEN_PARKED}"
                )
            _NEXT_POST[key] = now + max(0.0, wait) + self.min_interval_seconds
        if wait > 0:
            self._sleep(wait)
