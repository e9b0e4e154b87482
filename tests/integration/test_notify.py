"""The notify handler's logic against the local AWS: SNS read back through SQS, Slack on a loopback
webhook, the webhook URL from Secrets Manager; faults on each channel."""

from __future__ import annotations

import hashlib
import json
import logging
import re
import uuid
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import Any

import pytest

from lifeguard.aws.clients import aws_client
from lifeguard.notify import NotificationError, Notifier, SecretWebhook, SlackChannel, SnsChannel, summarize
from lifeguard.store.notices import NoticeStore
from lifeguard_cli.local.slack import SlackSink, serve_slack
from lifeguard_cli.local.stack import LocalChannels, create_notification_channels, create_state_table
from tests.conftest import applied_event

pytestmark = pytest.mark.integration
CLUSTER, GROUP = "pcs_abc123de45", "pcs_abcdef01"


def event(
    detail_type: str = "RemediationApplied", revision: int = 1, episode: str = "ep-1"
) -> dict[str, Any]:
    return applied_event(detail_type, revision=revision, episode=episode)


@dataclass
class Env:
    local: Any
    slack: SlackSink
    channels: LocalChannels
    table: str
    sleeps: list[float] = field(default_factory=list)
    metrics: list[str] = field(default_factory=list)

    def controller(self, *, topic_arn: str | None = None, timeout_seconds: float = 5.0) -> Notifier:
        webhook = SecretWebhook(
            aws_client("secretsmanager", self.local.moto.endpoint_url), self.channels.slack_secret
        )
        slack = SlackChannel(
            webhook,
            sleep=self.sleeps.append,
            clock=lambda: sum(self.sleeps),  # time passes as the channel sleeps, and only then
            timeout_seconds=timeout_seconds,
            metric=lambda name, value: self.metrics.append(name),
        )
        sns = SnsChannel(
            aws_client("sns", self.local.moto.endpoint_url), topic_arn or self.channels.topic_arn
        )
        notices = NoticeStore(
            aws_client("dynamodb", self.local.moto.endpoint_url), self.table, clock=lambda: 1.8e9
        )
        return Notifier([sns, slack], notices, metric=lambda name, value: self.metrics.append(name))

    def sns(self) -> list[dict[str, Any]]:
        return self.channels.received_sns(self.local.client("sqs"))


@pytest.fixture
def env(local: Any, monkeypatch: pytest.MonkeyPatch) -> Iterator[Env]:
    for key, value in local.environ().items():
        monkeypatch.setenv(key, value)
    prefix = f"nt-{uuid.uuid4().hex[:8]}"
    create_state_table(local.client("dynamodb"), f"{prefix}-state")
    with serve_slack() as slack:
        channels = create_notification_channels(
            local.client("sns"), local.client("sqs"), local.client("secretsmanager"), prefix, slack.url
        )
        yield Env(local, slack, channels, f"{prefix}-state")


def test_an_event_reaches_sns_with_filterable_attributes_and_slack_as_block_kit(env: Env) -> None:
    result = env.controller().handle_event(event())
    assert result.sent == ["sns", "slack"]
    (published,) = env.sns()
    assert (
        published["subject"] == f"[Lifeguard] Remediated (quarantine): {GROUP} (fail-terminate) in {CLUSTER}"
    )
    assert published["attributes"] == {
        "cluster_id": CLUSTER,
        "compute_node_group_id": GROUP,
        "event": "RemediationApplied",
        "severity": "medium",
    }
    assert "Applied quarantine." in published["message"]
    assert '"episode_id": "ep-1"' in published["message"]
    (message,) = env.slack.messages
    assert message["blocks"][0]["type"] == "header"
    texts = " ".join(str(block) for block in message["blocks"])
    assert "intentional failure for verification" in texts
    assert f"lifeguard undo {GROUP} --cluster {CLUSTER}" in texts
    assert "message 1" in message["blocks"][-1]["elements"][0]["text"]


def test_a_group_the_event_names_is_named_so_on_sns_and_slack_and_filterable_by_its_name(env: Env) -> None:
    named = event()
    named["detail"]["compute_node_group_name"] = "lca-static"
    assert env.controller().handle_event(named).sent == ["sns", "slack"]
    (published,) = env.sns()
    assert (
        published["subject"]
        == f"[Lifeguard] Remediated (quarantine): lca-static (fail-terminate) in {CLUSTER}"
    )
    assert published["attributes"]["compute_node_group_name"] == "lca-static"
    assert f"lifecycle actions of lca-static ({GROUP} in {CLUSTER})" in published["message"]
    (message,) = env.slack.messages
    assert message["blocks"][0]["text"]["text"].startswith("Remediated (quarantine): lca-static")
    texts = " ".join(str(block) for block in message["blocks"])
    assert f"lifeguard undo {GROUP} --cluster {CLUSTER}" in texts  # the commands take the ids


def test_a_duplicate_event_sends_nothing_twice_and_the_episode_messages_are_numbered(env: Env) -> None:
    controller = env.controller()
    controller.handle_event(event("BootstrapLoopDetected"))
    again = controller.handle_event(event("BootstrapLoopDetected"))
    assert (again.sent, again.already_sent) == ([], ["sns", "slack"])
    controller.handle_event(event("RemediationApplied"))
    assert len(env.sns()) == 2
    assert ["message 1" in m["blocks"][-1]["elements"][0]["text"] for m in env.slack.messages] == [
        True,
        False,
    ]
    assert "message 2" in env.slack.messages[1]["blocks"][-1]["elements"][0]["text"]


def test_a_detection_delivered_after_its_episodes_resolution_is_told_as_late_not_as_a_page(env: Env) -> None:
    """A notify invocation retried a minute later, or events of one PutEvents started in any order: the
    detection arrives after LoopResolved. It goes out once, said as late and as news of the past (severity
    info, no page); a reopened episode's detection (a higher revision) is a loop again."""
    controller = env.controller()
    controller.handle_event(event("RemediationApplied"))
    controller.handle_event(event("LoopResolved"))
    controller.handle_event(event("BootstrapLoopDetected"))
    again = controller.handle_event(event("BootstrapLoopDetected"))
    assert (again.sent, again.already_sent) == ([], ["sns", "slack"])
    sns = env.sns()
    assert [m["attributes"]["event"] for m in sns] == [
        "RemediationApplied",
        "LoopResolved",
        "BootstrapLoopDetected",
    ]
    late = sns[-1]
    assert late["attributes"]["severity"] == "info"
    assert late["subject"].startswith("[Lifeguard] Bootstrap loop, delivered late: ")
    assert late["message"].startswith("Delivered late: episode ep-1 was resolved before this message arrived")
    assert "Delivered late: episode ep-1" in json.dumps(env.slack.messages[-1])
    reopened = controller.handle_event(event("BootstrapLoopDetected", revision=2))
    assert reopened.sent == ["sns", "slack"]
    [loop] = env.sns()
    assert loop["attributes"]["severity"] == "high"
    assert "delivered late" not in loop["subject"]


def test_slack_429_is_retried_after_its_retry_after_and_messages_are_paced(env: Env) -> None:
    env.slack.fail_next(429, retry_after="3")
    controller = env.controller()
    controller.handle_event(event())
    assert len(env.slack.messages) == 1
    assert env.slack.attempts == 2
    assert 3.0 in env.sleeps
    controller.handle_event(event(revision=2))
    assert len(env.slack.messages) == 2
    assert any(0.5 < pause <= 1.0 for pause in env.sleeps)  # one message a second per webhook


def test_slack_pace_holds_across_concurrent_senders_through_the_table(env: Env) -> None:
    def store() -> NoticeStore:
        # One client each, as concurrent Lambda invocations have; one (frozen) clock for exact slots.
        client = aws_client("dynamodb", env.local.moto.endpoint_url)
        return NoticeStore(client, env.table, clock=lambda: 1.8e9)

    senders = [store() for _ in range(4)]
    with ThreadPoolExecutor(max_workers=4) as pool:
        waits = list(pool.map(lambda i: senders[i % 4].reserve_post("hook", 1.0), range(8)))
    assert sorted(waits) == [float(n) for n in range(8)]  # eight distinct slots, a second apart
    assert senders[0].reserve_post("another-hook", 1.0) == 0.0  # each webhook has its own pace

    # A Slack sender keyed by its webhook: another invocation just posted, so this one waits its turn.
    senders[0].reserve_post(hashlib.sha256(env.slack.url.encode()).hexdigest(), 1.0)
    second = SlackChannel(lambda: env.slack.url, sleep=env.sleeps.append, pacer=senders[1])
    applied = event()
    second.send(summarize(applied["detail-type"], applied["detail"]), applied["detail"])
    assert env.sleeps == [1.0]
    assert len(env.slack.messages) == 1


def test_a_retry_after_longer_than_the_sender_may_wait_is_not_posted_early_nor_by_the_next_sender(
    env: Env,
) -> None:
    from lifeguard.notify.slack import SlackError

    env.slack.fail_next(429, retry_after="120")
    sleeps: list[float] = []

    def channel() -> SlackChannel:  # one clock, passing only as the channels sleep
        return SlackChannel(lambda: env.slack.url, sleep=sleeps.append, clock=lambda: sum(sleeps))

    applied = event()
    summary = summarize(applied["detail-type"], applied["detail"])
    with pytest.raises(SlackError, match=r"no message for 120 s \(HTTP 429, Retry-After\)"):
        channel().send(summary, applied["detail"])
    assert (env.slack.attempts, sleeps) == (1, [])  # it gave up at once: nothing posted 30 s later
    channel().send(summary, applied["detail"])  # the next sender on the webhook waits the rest out
    assert sum(sleeps) >= 120
    assert (env.slack.attempts, len(env.slack.messages)) == (2, 1)


def test_a_retry_after_is_waited_in_the_shared_pace_within_the_time_the_invocation_has(env: Env) -> None:
    from lifeguard.notify.slack import SEND_MARGIN_SECONDS, SlackError

    sleeps: list[float] = []

    def store() -> NoticeStore:
        client = aws_client("dynamodb", env.local.moto.endpoint_url)
        return NoticeStore(client, env.table, clock=lambda: 1.8e9 + sum(sleeps))

    left = SEND_MARGIN_SECONDS + 20  # 20 s to wait in, at most
    sender = SlackChannel(
        lambda: env.slack.url,
        sleep=sleeps.append,
        pacer=store(),
        time_left=lambda: left - sum(sleeps),
    )
    applied = event()
    summary = summarize(applied["detail-type"], applied["detail"])
    env.slack.fail_next(429, retry_after="5")
    sender.send(summary, applied["detail"])  # within what it may wait: waited in the pace, then posted
    (waited,) = sleeps
    assert 5.0 <= waited <= 6.0  # what Slack asked for, and at most the webhook's pace of a second more
    assert (env.slack.attempts, len(env.slack.messages)) == (2, 1)
    env.slack.fail_next(429, retry_after="30")
    with pytest.raises(SlackError, match="longer than this invocation can wait"):
        sender.send(summary, applied["detail"])
    assert sum(sleeps) <= left - SEND_MARGIN_SECONDS  # never waited past the invocation's time
    # Another invocation's sender finds the webhook held for the 30 s Slack asked for.
    webhook = hashlib.sha256(env.slack.url.encode()).hexdigest()
    assert store().reserve_post(webhook, 1.0) >= 29.0


def test_slack_500s_are_retried_and_a_timeout_is_left_to_lambdas_retry(env: Env) -> None:
    env.slack.fail_next(500, times=2)
    env.slack.stall_next(4.0)
    controller = env.controller(timeout_seconds=2.0)  # every post but the stalled one answered within it
    # Two 500s are retried at once; the post Slack then holds past the timeout may have been posted: it is
    # not posted again in this invocation (the channel fails, SNS is sent), but by Lambda's retry.
    with pytest.raises(NotificationError, match=r"did not answer the message it was sent within 2 s"):
        controller.handle_event(event())
    assert env.slack.attempts == 3
    assert env.metrics.count("SlackRetries") == 2  # the failures the retries absorbed still show
    retried = controller.handle_event(event())
    assert (retried.sent, retried.already_sent) == (["slack"], ["sns"])
    assert env.slack.attempts == 4
    assert len(env.slack.messages) == 1


def test_a_resolution_delivered_after_its_episode_reopened_is_told_as_late(env: Env) -> None:
    """The episode reopened at revision 2 (told); its revision-1 LoopResolved, retried a minute later or
    started after it, is not the episode's newest word: "Resolved, delivered late", on both channels."""
    controller = env.controller()
    controller.handle_event(event("BootstrapLoopDetected"))
    controller.handle_event(event("LoopContained", revision=2))
    controller.handle_event(event("LoopResolved"))
    stale = env.sns()[-1]
    assert stale["attributes"]["event"] == "LoopResolved"
    assert "delivered late" in stale["subject"]
    assert stale["message"].startswith("Delivered late: episode ep-1 went on after this resolution")
    assert "Delivered late: episode ep-1 went on" in json.dumps(env.slack.messages[-1])


def test_a_message_slack_takes_but_answers_late_is_posted_once_an_invocation(env: Env) -> None:
    """Slack posts it and answers after the timeout, every time: it was posted four times an invocation,
    twelve with Lambda's two retries. Now once an invocation, three at most, the last one answered."""
    env.slack.stall_next(3.0, times=2, posted=True)
    controller = env.controller(timeout_seconds=1.5)  # every post but the stalled ones answered within it
    for _ in range(2):  # the invocation and Lambda's first retry: no answer in time
        with pytest.raises(NotificationError, match="slack"):
            controller.handle_event(event())
    assert controller.handle_event(event()).sent == ["slack"]  # Lambda's second retry
    assert env.slack.attempts == 3
    assert len(env.slack.messages) == 3


def test_a_failing_slack_never_blocks_sns_and_the_retry_sends_only_what_was_missing(
    env: Env, caplog: pytest.LogCaptureFixture
) -> None:
    env.slack.fail_next(500, times=4)
    controller = env.controller()
    with caplog.at_level(logging.INFO), pytest.raises(NotificationError, match="slack") as raised:
        controller.handle_event(event())
    assert len(env.sns()) == 1
    assert env.slack.messages == []
    assert "NotificationFailures" in env.metrics
    assert env.slack.url not in str(raised.value)  # the URL is a credential: never said
    assert env.slack.url not in caplog.text
    retried = controller.handle_event(event())
    assert (retried.sent, retried.already_sent) == (["slack"], ["sns"])
    assert env.sns() == []
    assert len(env.slack.messages) == 1


def test_an_sns_error_never_blocks_slack(env: Env) -> None:
    missing = env.channels.topic_arn.rsplit(":", 1)[0] + ":no-such-topic"
    with pytest.raises(NotificationError, match="sns"):
        env.controller(topic_arn=missing).handle_event(event())
    assert len(env.slack.messages) == 1


def test_a_slack_400_is_not_retried_and_the_webhook_secret_is_read_once(env: Env) -> None:
    env.slack.fail_next(400)
    controller = env.controller()
    with pytest.raises(NotificationError):
        controller.handle_event(event())
    assert env.slack.attempts == 1
    controller.handle_event(event(revision=2))
    slack = controller.channels[1]
    assert isinstance(slack, SlackChannel)
    webhook = slack._webhook
    assert isinstance(webhook, SecretWebhook)
    assert webhook.reads == 1


def test_something_that_is_not_a_controller_event_is_counted_and_ignored(env: Env) -> None:
    result = env.controller().handle_event({"detail-type": "Scheduled Event", "detail": {}})
    assert result.sent == []
    assert env.metrics == ["InvalidEvents"]


def test_the_webhook_comes_from_the_secret_through_powertools_and_a_bad_secret_is_one_error(env: Env) -> None:
    from lifeguard.errors import AwsCallError
    from lifeguard.notify.slack import SlackError

    secrets = aws_client("secretsmanager", env.local.moto.endpoint_url)
    webhook = SecretWebhook(secrets, env.channels.slack_secret)
    assert webhook() == webhook() == env.slack.url
    assert webhook.reads == 1  # the second from Powertools' cache (max_age)
    missing = SecretWebhook(secrets, "lifeguard/no-such-secret")
    with pytest.raises(AwsCallError) as raised:
        missing()
    assert raised.value.code == "ResourceNotFoundException"
    name = f"lifeguard/not-a-url-{uuid.uuid4().hex[:6]}"
    secrets.create_secret(Name=name, SecretString='{"url": "ftp://example.com/hook"}')
    with pytest.raises(SlackError, match="does not hold an https webhook URL"):
        SecretWebhook(secrets, name)()


@pytest.mark.parametrize(
    ("url", "problem"),
    [
        ("https://", "no host"),
        ("https:///services/T0/B0/x", "no host"),
        ("https://hooks.slack.com:abc/services/T0/B0/x", "its port is not a number"),
        ("https://169.254.169.254/latest/meta-data/", "a link-local address"),
        ("https://[fe80::1]/services/T0/B0/x", "a link-local address"),
        # The same address as a resolver reads other ways of writing it: they were taken.
        ("https://2852039166/latest/meta-data/", "a link-local address"),
        ("https://0xa9fea9fe/latest/meta-data/", "a link-local address"),
        ("https://169.254.43518/latest/meta-data/", "a link-local address"),
        ("https://[::ffff:169.254.169.254]/latest/meta-data/", "a link-local address"),
        ("http://hooks.slack.com/services/T0/B0/x", "not https"),
        ("https://[::1/services/T0/B0/x", "not a URL"),
        ('["https://hooks.slack.com/services/T0/B0/x"]', "no host"),
        ("https://hooks..slack.com/services/T0/B0/x", "no host"),
        # urllib takes no credentials from a URL: it failed only at the post, as "not a valid URL".
        ("https://user:secret@hooks.slack.com/services/T0/B0/x", "a user name or password in it"),
    ],
)
def test_a_secret_whose_url_is_no_webhook_to_post_to_is_one_error_naming_why_never_the_url(
    env: Env, url: str, problem: str
) -> None:
    from lifeguard.notify.slack import SlackError

    secrets = aws_client("secretsmanager", env.local.moto.endpoint_url)
    name = f"lifeguard/odd-url-{uuid.uuid4().hex[:6]}"
    secrets.create_secret(Name=name, SecretString=url)
    with pytest.raises(SlackError) as raised:
        SecretWebhook(secrets, name)()
    assert str(raised.value) == f"secret {name} does not hold an https webhook URL: {problem}"


def test_a_local_slack_over_http_is_refused_inside_a_lambda_whose_loopback_is_its_runtime_api(
    env: Env, monkeypatch: pytest.MonkeyPatch
) -> None:
    from lifeguard.notify.slack import SlackError

    secrets = aws_client("secretsmanager", env.local.moto.endpoint_url)
    assert SecretWebhook(secrets, env.channels.slack_secret)().startswith("http://127.0.0.1:")
    monkeypatch.setenv("AWS_LAMBDA_RUNTIME_API", "127.0.0.1:9001")
    with pytest.raises(SlackError, match="does not hold an https webhook URL: not https"):
        SecretWebhook(secrets, env.channels.slack_secret)()


@pytest.mark.parametrize(
    ("status", "body", "said"),
    [
        (410, b"channel_is_archived", "HTTP 410 channel_is_archived"),
        (400, b"invalid_payload\n", "HTTP 400 invalid_payload"),
        # Not one of Slack's words (a proxy's page, a word too long): the status alone, nothing of it shown.
        (403, b"<html>Forbidden: see https://evil.example</html>", "HTTP 403"),
        (404, b"x" * 41, "HTTP 404"),
    ],
)
def test_a_refusal_says_slacks_word_for_why_and_nothing_else_of_the_answer(
    env: Env, status: int, body: bytes, said: str
) -> None:
    controller = env.controller()
    env.slack.fail_next(status, times=3, body=body)
    with pytest.raises(NotificationError) as raised:
        controller.handle_event(event())
    reason = str(raised.value)
    assert re.search(rf"Slack refused the message: {said}(?=[);,]|$)", reason), reason
    for unshown in ("html", "evil", "xxxx"):  # nothing of an answer that is no word of Slack's
        assert unshown not in reason


def test_a_webhook_slack_says_is_gone_is_read_again_from_its_secret_once_and_a_rotated_one_used_at_once(
    env: Env,
) -> None:
    """The URL is cached five minutes; revoked and rotated in the secret meanwhile, Slack answers 404 to the
    old one. The next message goes to the new URL at once (not after the cache, or the Lambda's retries,
    ran out); with no newer URL in the secret, the 404 is final, without more posts."""
    controller = env.controller()
    assert controller.handle_event(event()).sent == ["sns", "slack"]
    slack = controller.channels[1]
    assert isinstance(slack, SlackChannel)
    webhook = slack._webhook
    assert isinstance(webhook, SecretWebhook)
    secrets = aws_client("secretsmanager", env.local.moto.endpoint_url)
    secrets.put_secret_value(SecretId=env.channels.slack_secret, SecretString=f"{env.slack.url}/rotated")
    env.slack.fail_next(404)
    attempts = env.slack.attempts
    assert controller.handle_event(event(revision=2)).sent == ["sns", "slack"]
    assert env.slack.attempts == attempts + 2
    assert len(env.slack.messages) == 2
    assert webhook.reads == 2
    assert "SlackRetries" not in env.metrics  # no retry wait: the rotated URL is posted to at once
    env.slack.fail_next(404, times=3)
    # Slack's word for why (`no_service`: the webhook was revoked) is said: each refusal asks another fix.
    with pytest.raises(NotificationError, match=r"Slack refused the message: HTTP 404 no_service"):
        controller.handle_event(event(revision=3))
    assert env.slack.attempts == attempts + 3
    assert webhook.reads == 3
