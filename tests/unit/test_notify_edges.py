"""Notify at the edges: what a person reads of a loop that was contained, resolved and contained again, text
that is not Unicode, a webhook secret that is not a URL, and headlines that say what the event says."""

from __future__ import annotations

import contextlib
import json
import logging
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any, ClassVar

import boto3
import pytest
from botocore.config import Config
from botocore.exceptions import ClientError
from botocore.stub import Stubber

from lifeguard.aws.clients import client_config
from lifeguard.errors import AwsCallError
from lifeguard.notify import NotificationError, Notifier, SecretWebhook, SlackChannel, SnsChannel, summarize
from lifeguard.store.notices import NoticeStore
from tests.conftest import applied_event
from tests.unit.fakes import FakeDynamoDB
from tests.unit.test_handlers_scaling_events import (
    ARTICLE,
    REVERTED,
    TERMINATE,
    World,
    at,
    booted_then_replaced,
    failed,
    launched,
    quarantined_config,
    quarantined_node_boots,
    reports_handler,
    ship,
    stop_sequence_failure,
    succeeded,
)
from tests.unit.test_notifier import Channel, Clock


def test_the_resolution_that_follows_a_late_containment_reaches_the_channels() -> None:
    world = World()
    world.feed(ARTICLE[:6])
    world.person_sets(quarantined_config(), at(1, 13))
    kept = "i-0kept00000000000"
    world.feed([launched(kept, at(1, 14)), succeeded(kept, at(1, 19))])  # LoopResolved (too early)
    ship(world, reports_handler(world), [stop_sequence_failure(kept, at(1, 17))])  # "... was wrong"
    world.feed([launched("i-0clean0000000000", at(1, 30)), succeeded("i-0clean0000000000", at(1, 35))])
    assert world.published()[-3:] == ["LoopResolved", "LoopContained", "LoopResolved"]

    sns = Channel("sns")
    notify = Notifier([sns], NoticeStore(FakeDynamoDB(), "t", clock=Clock()))
    results = [notify.handle_event({"detail-type": t, "detail": d}) for t, d in world.bus.events()]
    last = results[-1]
    assert (last.sent, last.already_sent) == (["sns"], []), "the real resolution was never notified"


class FakeSns:
    def __init__(self) -> None:
        self.published: list[dict[str, Any]] = []

    def publish(self, **request: Any) -> dict[str, str]:
        request["Message"].encode()  # botocore sends UTF-8
        self.published.append(request)
        return {"MessageId": "m-1"}


def test_a_lone_surrogate_in_a_diff_value_is_named_or_shown_not_a_failure_every_retry() -> None:
    event = applied_event()
    event["detail"]["diff"] = [
        {"path": "stages.nodeBootstrapped[0].arguments[0]", "old": "after-fail\ud800", "new": "x"}
    ]
    sns = FakeSns()
    notify = Notifier([SnsChannel(sns, "arn:aws:sns:us-east-1:111111111111:t")])
    result = notify.handle_event(event)  # it raised UnicodeEncodeError, and so on every retry
    assert result.sent == ["sns"]
    assert len(sns.published) == 1


def test_a_webhook_url_with_a_stray_space_never_reaches_the_log(caplog: pytest.LogCaptureFixture) -> None:
    client = boto3.client(
        "secretsmanager", region_name="us-east-1", aws_access_key_id="x", aws_secret_access_key="x"
    )
    stub = Stubber(client)
    url = "https://hooks.slack.com/services/T0AAAAAAA/B0BBBBBBB/sEcReTtOkEn 123456"  # pasted with a space
    stub.add_response("get_secret_value", {"Name": "lifeguard/slack", "SecretString": f'{{"url": "{url}"}}'})
    stub.activate()
    slack = SlackChannel(SecretWebhook(client, "lifeguard/slack"), sleep=lambda _: None)
    with caplog.at_level(logging.INFO), pytest.raises(NotificationError) as raised:
        Notifier([slack]).handle_event(applied_event())
    assert "sEcReTtOkEn" not in caplog.text
    assert "sEcReTtOkEn" not in str(raised.value)


def test_a_replacement_loop_is_not_said_to_be_nodes_that_failed_to_bootstrap() -> None:
    world = World()
    world.person_sets(REVERTED, at(1, 10))
    world.feed(booted_then_replaced("i-0sick000000000001", 12))  # ACTIVE/BOOTSTRAP_SUCCESS, then UNHEALTHY
    world.feed(booted_then_replaced("i-0sick000000000002", 22))
    [(detail_type, detail)] = world.bus.events()
    assert detail["kind"] == "replacement"
    headline = summarize(detail_type, detail).headline
    assert "failed to bootstrap" not in headline, headline


def test_a_loop_resolved_by_a_failure_under_a_new_configuration_does_not_say_the_group_bootstraps() -> None:
    world = World()
    quarantined_node_boots(world)  # contained: the kept node still fails fail-terminate
    renamed = json.loads(json.dumps(TERMINATE))
    renamed["stages"]["nodeBootstrapped"][0]["name"] = "fail-terminate-v2"  # the same broken script
    world.person_sets(renamed, at(1, 40))
    world.feed([launched("i-0new0000000000001", at(1, 41)), failed("i-0new0000000000001", at(1, 46))])
    resolved = [d for t, d in world.bus.events() if t == "LoopResolved"]
    assert len(resolved) == 1  # published on the failure of i-0new…1
    summary = summarize("LoopResolved", resolved[0])
    assert "bootstraps nodes again" not in summary.headline, summary.headline


class _SlowSns(BaseHTTPRequestHandler):
    """An SNS that takes every Publish and answers it after the client stopped waiting."""

    published: ClassVar[list[bytes]] = []
    delay_seconds = 1.5

    def do_POST(self) -> None:
        body = self.rfile.read(int(self.headers["Content-Length"]))
        if b"Action=Publish" in body:
            self.published.append(body)
            time.sleep(self.delay_seconds)
        with contextlib.suppress(OSError):  # the client is gone by now
            self.send_response(200)
            self.send_header("Content-Type", "text/xml")
            self.end_headers()
            self.wfile.write(
                b"<PublishResponse><PublishResult><MessageId>m</MessageId></PublishResult></PublishResponse>"
            )

    def log_message(self, *args: Any) -> None:
        pass


def test_a_publish_sns_answers_late_is_not_sent_again_in_the_invocation() -> None:
    """botocore retries a read timeout: one event a slow SNS took was published five times an invocation,
    fifteen with Lambda's two retries. Over the client the notify function builds (no botocore retries),
    once an invocation."""
    server = ThreadingHTTPServer(("127.0.0.1", 0), _SlowSns)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    _SlowSns.published.clear()
    try:
        config = client_config(attempts=1).merge(Config(read_timeout=1))
        sns = boto3.client(
            "sns",
            region_name="us-east-1",
            endpoint_url=f"http://127.0.0.1:{server.server_port}",
            aws_access_key_id="x",
            aws_secret_access_key="x",
            config=config,
        )
        slept: list[float] = []
        channel = SnsChannel(sns, "arn:aws:sns:us-east-1:123456789012:t", sleep=slept.append)
        notifier = Notifier([channel], NoticeStore(FakeDynamoDB(), "t", clock=lambda: 1.8e9))
        for _ in range(3):  # the invocation and Lambda's two retries
            with pytest.raises(NotificationError, match="it may have been published"):
                notifier.handle_event(applied_event())
    finally:
        server.shutdown()
        server.server_close()
    assert len(_SlowSns.published) == 3
    assert slept == []


class _ThrottledSns(FakeSns):
    def __init__(self, refusals: list[str]) -> None:
        super().__init__()
        self.refusals = refusals

    def publish(self, **request: Any) -> dict[str, str]:
        if self.refusals:
            code = self.refusals.pop(0)
            status = 500 if code == "InternalError" else 400
            raise ClientError(
                {"Error": {"Code": code, "Message": "m"}, "ResponseMetadata": {"HTTPStatusCode": status}},
                "Publish",
            )
        return super().publish(**request)


def test_a_publish_sns_refused_for_throttling_or_a_5xx_is_tried_again_and_a_refusal_is_not() -> None:
    slept: list[float] = []
    sns = _ThrottledSns(["Throttled", "InternalError"])
    SnsChannel(sns, "arn:aws:sns:us-east-1:123456789012:t", sleep=slept.append).send(
        summarize(applied_event()["detail-type"], applied_event()["detail"]), applied_event()["detail"]
    )
    assert (len(sns.published), slept) == (1, [0.5, 1.0])
    refused = _ThrottledSns(["AuthorizationError"])
    with pytest.raises(AwsCallError, match="AuthorizationError"):
        SnsChannel(refused, "arn:aws:sns:us-east-1:123456789012:t", sleep=slept.append).send(
            summarize(applied_event()["detail-type"], applied_event()["detail"]), applied_event()["detail"]
        )
    assert (refused.published, slept) == ([], [0.5, 1.0])
