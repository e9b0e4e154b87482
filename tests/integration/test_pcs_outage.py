"""A PCS front end answering 503 with an HTML body (an outage, as a load balancer answers it): botocore names
the error by its HTTP status, and every handler that reads PCS fails its event for Lambda to retry and then
park, instead of taking the outage for a refusal and dropping what the event said."""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import pytest

from lifeguard.aws.eventbridge import EventPublisher
from lifeguard.aws.pcs import PcsGateway
from lifeguard.detection import DetectionSettings
from lifeguard.errors import AwsCallError
from lifeguard.group_state import GroupState
from lifeguard.handlers.config_review import ConfigReviewHandler
from lifeguard.handlers.scaling_events import ScalingEventsHandler
from lifeguard.handlers.updater import GroupUpdater
from lifeguard.log_subscription import encode_subscription
from lifeguard.store.changes import ChangeStore
from lifeguard.store.groups import GroupStore
from lifeguard.store.remediations import RemediationStore
from tests.integration.conftest import pcs_on_loopback
from tests.integration.test_handlers import SCALING_STREAM, stream
from tests.unit.fakes import FakeDynamoDB, FakeEventBridge
from tests.unit.test_handlers_config_review import AT, recorded

pytestmark = pytest.mark.integration


@pytest.fixture
def outage(monkeypatch: pytest.MonkeyPatch) -> Iterator[tuple[PcsGateway, list[str]]]:
    """A gateway to a PCS endpoint on loopback that answers every call 503 with an HTML body (one attempt a
    call: botocore's own would only take longer), and the operations it was asked."""
    asked: list[str] = []

    def unavailable(operation: str, request: dict[str, Any]) -> tuple[int, str, bytes]:
        asked.append(operation)
        return 503, "text/html", b"<html><body><h1>503 Service Temporarily Unavailable</h1></body></html>"

    with pcs_on_loopback(monkeypatch, unavailable) as gateway:
        yield gateway, asked


def test_a_review_that_must_read_pcs_during_an_outage_fails_for_lambda_s_retry(
    outage: tuple[PcsGateway, list[str]],
) -> None:
    gateway, asked = outage
    table, bus = FakeDynamoDB(), FakeEventBridge()
    handler = ConfigReviewHandler(
        GroupStore(table, "t"),
        ChangeStore(table, "t"),
        gateway,
        EventPublisher(bus, "bus", sleep=lambda _: None),
        ledger=RemediationStore(table, "t").ledger,
        clock=lambda: AT / 1000 + 60,
    )
    event = recorded()
    del event["detail"]["requestParameters"]["nodeLifecycleActions"]  # the review reads the group
    with pytest.raises(AwsCallError) as raised:
        handler.handle_event(event)
    assert raised.value.code == "503"
    assert asked == ["GetComputeNodeGroup"]
    assert bus.events() == []


def _the_articles_loop(
    gateway: PcsGateway,
) -> tuple[list[dict[str, Any]], GroupStore, FakeEventBridge, ScalingEventsHandler, dict[str, Any]]:
    """The article's loop as one subscription batch, and a scaling_events handler on `gateway`: its rows,
    store, bus, handler and the batch."""
    rows = stream("article-terminate-loop")
    store, bus = GroupStore(FakeDynamoDB(), "t"), FakeEventBridge()
    handler = ScalingEventsHandler(
        store,
        gateway,
        GroupUpdater(store, EventPublisher(bus, "bus", sleep=lambda _: None)),
        DetectionSettings(mode="quarantine", threshold=2, window_minutes=60),
        clock=lambda: rows[-1]["event_timestamp"] / 1000 + 60,
    )
    batch = encode_subscription(
        "/aws/vendedlogs/pcs", SCALING_STREAM, [(r["event_timestamp"], json.dumps(r)) for r in rows]
    )
    return rows, store, bus, handler, batch


def test_a_loop_s_batch_during_an_outage_fails_whole_for_lambda_s_retry(
    outage: tuple[PcsGateway, list[str]],
) -> None:
    gateway, asked = outage
    rows, store, bus, handler, batch = _the_articles_loop(gateway)
    # A group seen before (a group seen for the first time is looked up in its cluster's listing first).
    store.save(GroupState(cluster_id=rows[0]["resource_id"], group_id=rows[0]["compute_node_group_id"]))
    with pytest.raises(AwsCallError) as raised:  # not a group counted unreadable, the loop left untold
        handler.handle_event(batch)
    assert raised.value.code == "503"
    assert "GetComputeNodeGroup" in asked
    assert bus.events() == []


def test_a_first_sight_during_an_outage_fails_the_batch_whole_too(
    outage: tuple[PcsGateway, list[str]],
) -> None:
    """The listing that says whether a group seen for the first time exists: an outage fails the batch for
    Lambda's retry, and keeps nothing of it (no group is taken for made up)."""
    gateway, asked = outage
    rows, store, _, handler, batch = _the_articles_loop(gateway)
    with pytest.raises(AwsCallError) as raised:
        handler.handle_event(batch)
    assert raised.value.code == "503"
    assert asked == ["ListComputeNodeGroups"]
    assert store.load(rows[0]["resource_id"], rows[0]["compute_node_group_id"]).version == 0
