"""Notify at the edges: what a person reads of a loop that was contained, resolved and contained again, text
that is not Unicode, a webhook secret that is not a URL, and headlines that say what the event says."""

from __future__ import annotations

import json
import logging
from typing import Any

import boto3
import pytest
from botocore.stub import Stubber

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
