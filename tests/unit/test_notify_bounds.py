"""What keeps a notice deliverable: SNS's 256 KiB for the whole message (body, subject and attributes), what
goes first when a body is trimmed, and how Slack is waited for (backoff, Retry-After and its cap, a hold
another sender met)."""

from __future__ import annotations

import http.client
import io
import json
import socket
import ssl
import urllib.error
from collections.abc import Callable
from typing import Any

import pytest

from lifeguard.event_contract import make_detail
from lifeguard.notify import slack as slack_module
from lifeguard.notify.slack import SlackChannel, SlackError
from lifeguard.notify.sns import SNS_MAX_BYTES, sns_message
from lifeguard.notify.summary import summarize

Post = Callable[[str, bytes, float], tuple[int, bytes]]


def detail(**fields: Any) -> dict[str, Any]:
    return make_detail(cluster_id="pcs_abc123de45", compute_node_group_id="pcs_abcdef01", **fields)


def config_of(length: int) -> dict[str, Any]:
    """A configuration whose one location is `length` characters long."""
    location = "s3://b/" + "k" * length
    return {"stages": {"nodeBootstrapped": [{"name": "a", "scriptSource": {"scriptLocation": location}}]}}


def test_an_sns_message_leaves_room_for_its_subject_and_attributes() -> None:
    """SNS counts the subject and the message attributes in its 256 KiB: a body of 256 KiB alone would be
    refused on every retry."""

    def body_for(length: int) -> tuple[str, dict[str, Any]]:
        made = detail(config_before=config_of(length))
        return sns_message(summarize("RemediationApplied", made), made), made

    probe, _ = body_for(1000)
    body, made = body_for(1000 + SNS_MAX_BYTES - 100 - len(probe.encode()))  # just under 256 KiB whole
    summary = summarize("RemediationApplied", made)
    attributes = {
        "cluster_id": "pcs_abc123de45",
        "compute_node_group_id": "pcs_abcdef01",
        "event": summary.detail_type,
        "severity": summary.severity,
    }
    attribute_bytes = sum(len(name) + len(str(value)) + len("String") for name, value in attributes.items())
    assert len(body.encode()) + len(summary.subject.encode()) + attribute_bytes <= SNS_MAX_BYTES


def test_an_sns_message_fits_however_its_text_grows_on_one_line() -> None:
    """The text above the JSON writes each line break as `⏎` (3 bytes to JSON's 2): a diff of many line
    breaks can take the text alone past the bound after every JSON field is trimmed; the body is still cut
    to fit."""
    made = detail(
        diff=[
            {"path": f"stages.nodeBootstrapped[{n}].arguments", "old": None, "new": "\n" * 400}
            for n in range(300)
        ]
    )
    assert len(sns_message(summarize("RemediationApplied", made), made).encode()) <= SNS_MAX_BYTES


def test_an_sns_body_of_many_long_risks_keeps_json_that_parses() -> None:
    """JSON writes each character past ASCII as a six-byte escape: a review's risks in Japanese (put on
    the bus by hand; Lifeguard's own are held smaller) took the JSON past the bound with every other field
    trimmed, and the body was cut mid-string. The risks go too, and the JSON parses."""
    risks = [
        {"code": "unpinned", "path": f"stages.nodeBootstrapped[{n % 20}]", "message": "スクリプト" * 160}
        for n in range(100)
    ]
    made = detail(risks=risks, reason="レビュー" * 2000)
    body = sns_message(summarize("ConfigChangeReviewed", made), made)
    assert len(body.encode()) <= SNS_MAX_BYTES
    parsed = json.loads(body[body.index("\n{") :])
    # Trimmed as an event is: a list still (the contract's type), its first risks, and the count said.
    assert [risk["path"] for risk in parsed["risks"]] == [risk["path"] for risk in risks[:50]]
    assert parsed["reason"].endswith("The review found 100 risks; the event lists the first 50.")
    assert parsed["compute_node_group_id"] == "pcs_abcdef01"


def test_an_sns_body_whose_text_alone_is_over_its_bound_leaves_the_json_out_and_says_so() -> None:
    made = detail(
        diff=[
            {"path": f"stages.nodeBootstrapped[{n}].arguments", "old": None, "new": "\n" * 400}
            for n in range(300)
        ]
    )
    body = sns_message(summarize("RemediationApplied", made), made)
    assert len(body.encode()) <= SNS_MAX_BYTES
    said = "(the event's JSON detail is left out: even trimmed, it does not fit SNS's 256 KB)\n"
    assert body.endswith(said)
    assert "{" not in body[-200:]


def test_an_sns_body_over_its_bound_lets_the_log_tail_go_before_the_configuration_to_restore() -> None:
    """The log tail is in the text above the JSON already; the configuration from before is what an
    operator restores from."""
    suspect = {
        "stage": "nodeBootstrapped",
        "script": "a",
        "on_error": "TERMINATE",
        "exit_code": 1,
        "log_tail": "e" * 4000,
        "instances": [],
    }

    def body_for(length: int) -> str:
        made = detail(config_before=config_of(length), suspect=suspect)
        return sns_message(summarize("RemediationApplied", made), made)

    probe = body_for(1000)
    length = 1000 + SNS_MAX_BYTES - 1048 - len(probe.encode())  # about a kilobyte over the body's budget
    body = body_for(length)
    assert "(trimmed to fit SNS)" in body
    assert "k" * length in body


def test_an_sns_body_trimmed_to_fit_keeps_each_key_of_its_contracts_type_and_says_what_went() -> None:
    """An event that fits EventBridge can be over SNS's bound as the body shows it (indented, below its
    summary): its configurations became the text "(trimmed to fit SNS)", where a subscriber reads an
    object or null."""

    def config(tag: str) -> dict[str, Any]:
        def script(n: int) -> dict[str, Any]:
            location = f"s3://lca-scripts-example/{tag}/{n}.sh"
            arguments = [f"{tag}{n}{k}" + "a" * 250 for k in range(12)]
            return {"name": f"s{n}", "scriptSource": {"scriptLocation": location}, "arguments": arguments}

        return {
            "stages": {stage: [script(n) for n in range(20)] for stage in ("nodeBootstrapped", "nodeReady")}
        }

    made = detail(mode="quarantine", config_before=config("b"), config_after=config("b"), reason="Applied.")
    body = sns_message(summarize("RemediationApplied", made), made)
    assert len(body.encode()) <= SNS_MAX_BYTES
    parsed = json.loads(body[body.index("\n{") :])
    assert parsed["config_before"] is None
    assert isinstance(parsed["config_after"], dict)  # the first to go was enough
    assert parsed["reason"] == "Applied. config_before left out to fit SNS (`lifeguard history` shows them)."


def _refused(status: int, headers: dict[str, str] | None = None) -> Post:
    def post(url: str, body: bytes, seconds: float) -> tuple[int, bytes]:
        raise urllib.error.HTTPError(url, status, "refused", headers or {}, io.BytesIO(b""))  # type: ignore[arg-type]

    return post


class Pacer:
    """The table pacer's calls, answered as given: a slot at once, no hold; holds set are kept."""

    def __init__(self, wait: float | None = 0.0, held: float = 0.0) -> None:
        self.wait, self.held = wait, held
        self.holds: list[float] = []

    def reserve_post(self, key: str, interval: float, max_wait: float | None = None) -> float | None:
        return self.wait

    def hold_post(self, key: str, seconds: float) -> None:
        self.holds.append(seconds)

    def held_for(self, key: str) -> float:
        return self.held


def send(channel: SlackChannel) -> None:
    made = detail()
    channel.send(summarize("LoopResolved", made), made)


def test_slack_5xx_answers_are_tried_again_after_half_a_second_then_one_then_two(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(slack_module, "_post", _refused(503))
    slept: list[float] = []
    channel = SlackChannel(
        lambda: "https://hooks.example.com/x",
        attempts=4,
        min_interval_seconds=0,
        sleep=slept.append,
        clock=lambda: 0.0,
    )
    with pytest.raises(SlackError):
        send(channel)
    assert [seconds for seconds in slept if seconds > 0] == [0.5, 1.0, 2.0]


def test_a_retry_after_of_a_week_holds_the_webhook_an_hour_at_most(monkeypatch: pytest.MonkeyPatch) -> None:
    """A proxy's or a broken endpoint's Retry-After would silence every loop's alert for its length."""
    monkeypatch.setattr(slack_module, "_post", _refused(429, {"Retry-After": "604800"}))
    pacer = Pacer()
    channel = SlackChannel(lambda: "https://hooks.example.com/x", pacer=pacer, sleep=lambda _: None)
    # Lambda's two retries come within minutes: past them the event is parked (it was said to be retried
    # once the hour was over, which nothing does).
    with pytest.raises(
        SlackError, match=r"no message for 3600 s .*; Lambda retries it about 1 and 3 minutes"
    ):
        send(channel)
    assert pacer.holds == [3600.0]


def test_without_the_table_a_hold_longer_than_the_invocation_has_left_is_no_sleep_past_it(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A 429's hold outlives its invocation in the process (a warm container's next one): the next post
    slept it whole, an hour past Lambda's time limit, where a post with the table fails at once."""
    url = "https://hooks.example.com/held"
    monkeypatch.setattr(slack_module, "_post", _refused(429, {"Retry-After": "3600"}))
    clock = [1_000.0]
    slept: list[float] = []
    channel = SlackChannel(lambda: url, sleep=slept.append, clock=lambda: clock[0], time_left=lambda: 300.0)
    with pytest.raises(SlackError, match="longer than this invocation"):
        send(channel)
    clock[0] += 60  # the next invocation, in the same process
    monkeypatch.setattr(slack_module, "_post", lambda url, body, seconds: (200, b"ok"))
    with pytest.raises(SlackError, match=r"no message for 3540 s more .*; Lambda retries it"):
        send(channel)
    assert all(seconds < 300 for seconds in slept)
    clock[0] += 3600
    send(channel)  # the hold over, it is sent
    # With less left than a post's margin, a post that needs no wait is still made.
    short = SlackChannel(lambda: url, sleep=slept.append, clock=lambda: clock[0], time_left=lambda: 30.0)
    clock[0] += 5
    send(short)


@pytest.mark.parametrize(
    ("status", "retry_after", "held"),
    [
        (429, "Wed, 21 Oct 2026 02:00:20 GMT", 20.0),  # HTTP's date form: until then
        (429, "Wed, 21 Oct 2026 01:59:00 GMT", 0.0),  # a date gone by: at once
        (429, "nan", 0.5),  # nothing readable: the backoff's first wait
        (429, "-5", 0.5),
        (429, "soon", 0.5),
        (503, "12", 12.0),  # a relay out of service for a while says how long, as a 429 does
    ],
)
def test_a_retry_after_in_either_form_holds_the_webhook_and_nonsense_waits_the_backoff(
    monkeypatch: pytest.MonkeyPatch, status: int, retry_after: str, held: float
) -> None:
    """HTTP's Retry-After is seconds or a date. A date was read as nothing (posted again at once, and again),
    and `nan` as no wait at all."""
    monkeypatch.setattr(slack_module, "_post", _refused(status, {"Retry-After": retry_after}))
    monkeypatch.setattr(slack_module.time, "time", lambda: 1792548000.0)  # 2026-10-21 02:00:00 UTC
    pacer = Pacer()
    channel = SlackChannel(
        lambda: "https://hooks.example.com/x", attempts=2, pacer=pacer, sleep=lambda _: None
    )
    with pytest.raises(SlackError):
        send(channel)
    assert pacer.holds[0] == held


@pytest.mark.parametrize("status", [429, 503])
def test_a_hold_longer_than_the_invocation_names_the_status_that_asked_for_it(
    monkeypatch: pytest.MonkeyPatch, status: int
) -> None:
    """A relay's 503 with a Retry-After holds the webhook as a 429 does; its message said HTTP 429."""
    monkeypatch.setattr(slack_module, "_post", _refused(status, {"Retry-After": "7200"}))
    channel = SlackChannel(
        lambda: "https://hooks.example.com/x", attempts=2, pacer=Pacer(), sleep=lambda _: None
    )
    with pytest.raises(SlackError, match=rf"no message for 3600 s \(HTTP {status}, Retry-After\)"):
        send(channel)


@pytest.mark.parametrize(
    ("held", "said"),
    [
        (3500.0, "Slack asked for no message for 3500 s more (HTTP 429, Retry-After), longer than this"),
        (0.0, "the webhook takes one message a second, and the ones queued before it take longer than this"),
    ],
)
def test_a_message_the_pace_has_no_slot_for_says_why_and_what_becomes_of_it(
    monkeypatch: pytest.MonkeyPatch, held: float, said: str
) -> None:
    """No slot within the invocation: behind Slack's 429 (told as the queue of other senders' messages,
    which there need not be), or behind that queue."""
    posts: list[str] = []
    monkeypatch.setattr(slack_module, "_post", lambda url, body, seconds: posts.append(url))
    channel = SlackChannel(
        lambda: "https://hooks.example.com/q",
        pacer=Pacer(wait=None, held=held),
        sleep=lambda _: None,
        time_left=lambda: 60.0,
    )
    with pytest.raises(SlackError) as raised:
        send(channel)
    assert said in str(raised.value)
    assert str(raised.value).endswith(
        "; Lambda retries it about 1 and 3 minutes later, then parks it for a redrive"
    )
    assert posts == []


def test_a_retry_after_of_exactly_the_longest_wait_is_waited_for(monkeypatch: pytest.MonkeyPatch) -> None:
    answers: list[Post | None] = [_refused(429, {"Retry-After": "30"}), None]

    def post(url: str, body: bytes, seconds: float) -> tuple[int, bytes]:
        refuse = answers.pop(0)
        if refuse is not None:
            refuse(url, body, seconds)
        return 200, b"ok"

    monkeypatch.setattr(slack_module, "_post", post)
    channel = SlackChannel(
        lambda: "https://hooks.example.com/y",
        pacer=Pacer(),
        sleep=lambda _: None,
        max_retry_after_seconds=30.0,
    )
    send(channel)  # delivered on its second try
    assert answers == []


def test_a_slot_taken_before_another_senders_429_waits_out_that_hold(monkeypatch: pytest.MonkeyPatch) -> None:
    """The table pacer gave a slot a second away; meanwhile another invocation met a 429 (Retry-After 5 s):
    the post waits that out too, instead of inviting more 429s mid-incident."""
    seen: list[float | str] = []

    def post(url: str, body: bytes, seconds: float) -> tuple[int, bytes]:
        seen.append("post")
        return 200, b"ok"

    monkeypatch.setattr(slack_module, "_post", post)
    channel = SlackChannel(
        lambda: "https://hooks.example.com/z", pacer=Pacer(wait=1.0, held=5.0), sleep=seen.append
    )
    send(channel)
    assert seen == [1.0, 5.0, "post"]


@pytest.mark.parametrize(
    ("reason", "said", "tries"),
    [
        (socket.gaierror(-2, "Name or service not known"), "the webhook's host name does not resolve", 4),
        (http.client.RemoteDisconnected("closed"), "the connection was closed without an answer", 4),
        # The same certificate on every try: said at once.
        (ssl.SSLCertVerificationError(1, "certificate verify failed"), "TLS certificate is not valid", 1),
    ],
)
def test_a_post_that_got_no_answer_says_why_in_words(
    monkeypatch: pytest.MonkeyPatch, reason: Exception, said: str, tries: int
) -> None:
    """They were named by Python's class (`gaierror`, `SSLCertVerificationError`, `RemoteDisconnected`),
    and a certificate that cannot verify was tried four times."""
    posts: list[str] = []

    def post(url: str, body: bytes, seconds: float) -> tuple[int, bytes]:
        posts.append(url)
        if isinstance(reason, http.client.HTTPException):  # raised by the answer's read, unwrapped
            raise reason
        raise urllib.error.URLError(reason)

    monkeypatch.setattr(slack_module, "_post", post)
    channel = SlackChannel(lambda: "https://hooks.example.com/w", attempts=4, sleep=lambda _: None)
    with pytest.raises(SlackError, match=said) as raised:
        send(channel)
    assert len(posts) == tries
    assert type(reason).__name__ not in str(raised.value)


def test_a_refused_connection_is_said_as_such() -> None:
    """A real post to a loopback port nothing listens on."""
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    channel = SlackChannel(lambda: f"http://127.0.0.1:{port}/services/x", attempts=2, sleep=lambda _: None)
    with pytest.raises(SlackError, match="after 2 attempts: the connection was refused"):
        send(channel)
