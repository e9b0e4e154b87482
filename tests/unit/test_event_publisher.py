"""Controller events onto EventBridge (`aws.events.EventPublisher`): in order, a failed entry sent again
alone, never dropped silently: after three attempts the caller is told."""

from __future__ import annotations

import json
from typing import Any

import pytest

from lifeguard.aws.eventbridge import EventPublisher
from lifeguard.errors import AwsCallError
from lifeguard.event_contract import ControllerEvent, make_detail
from tests.unit.fakes import FakeEventBridge, client_error


class FlakyEvents:
    """EventBridge whose answers are scripted: per call, the episode ids to refuse, or an error to raise."""

    def __init__(self, *script: set[str] | Exception) -> None:
        self.script = list(script)
        self.requests: list[list[str]] = []
        self.put: list[str] = []

    def put_events(self, Entries: list[dict[str, Any]]) -> dict[str, Any]:
        episodes = [json.loads(entry["Detail"])["episode_id"] for entry in Entries]
        self.requests.append(episodes)
        step = self.script.pop(0) if self.script else set()
        if isinstance(step, Exception):
            raise step
        answers: list[dict[str, Any]] = []
        for episode in episodes:
            if episode in step:
                answers.append({"ErrorCode": "InternalFailure", "ErrorMessage": "try again"})
            else:
                self.put.append(episode)
                answers.append({"EventId": episode})
        return {"FailedEntryCount": sum(1 for a in answers if "ErrorCode" in a), "Entries": answers}


def events(count: int) -> list[ControllerEvent]:
    return [ControllerEvent("LoopResolved", make_detail(episode_id=f"ep-{n}"), f"k{n}") for n in range(count)]


def publisher(client: FlakyEvents, sleeps: list[float]) -> EventPublisher:
    return EventPublisher(client, "lifeguard-bus", sleep=sleeps.append)


def test_events_go_in_order_ten_a_request() -> None:
    client, sleeps = FlakyEvents(), []
    publisher(client, sleeps).publish(events(23))
    assert [len(r) for r in client.requests] == [10, 10, 3]
    assert client.put == [f"ep-{n}" for n in range(23)]
    assert sleeps == []


def test_nothing_to_publish_makes_no_request() -> None:
    client = FlakyEvents()
    publisher(client, []).publish([])
    assert client.requests == []


def test_only_the_refused_entries_are_sent_again_after_a_backoff() -> None:
    client, sleeps = FlakyEvents({"ep-1", "ep-3"}, {"ep-3"}), []
    publisher(client, sleeps).publish(events(4))
    assert client.requests == [["ep-0", "ep-1", "ep-2", "ep-3"], ["ep-1", "ep-3"], ["ep-3"]]
    assert sorted(client.put) == ["ep-0", "ep-1", "ep-2", "ep-3"]
    assert sleeps == [0.4, 0.8]


def test_entries_refused_three_times_are_an_error_naming_how_many() -> None:
    client, sleeps = FlakyEvents({"ep-0", "ep-2"}, {"ep-0", "ep-2"}, {"ep-0", "ep-2"}), []
    with pytest.raises(AwsCallError) as raised:
        publisher(client, sleeps).publish(events(3))
    assert (raised.value.code, raised.value.message) == ("InternalFailure", "2 entries not put: try again")
    assert len(client.requests) == 3
    assert sleeps == [0.4, 0.8]


def test_a_failed_call_is_retried_then_translated_once() -> None:
    throttled = client_error("ThrottlingException", "PutEvents", "Rate exceeded")
    client, sleeps = FlakyEvents(throttled, set()), []
    publisher(client, sleeps).publish(events(1))
    assert client.put == ["ep-0"]
    client = FlakyEvents(throttled, throttled, throttled)
    with pytest.raises(AwsCallError) as raised:
        publisher(client, []).publish(events(1))
    assert (raised.value.operation, raised.value.code) == ("PutEvents", "ThrottlingException")
    assert len(client.requests) == 3


def test_a_batch_that_fails_stops_the_batches_after_it() -> None:
    refused = {f"ep-{n}" for n in range(10)}
    client = FlakyEvents(refused, refused, refused)
    with pytest.raises(AwsCallError):
        publisher(client, []).publish(events(15))
    assert all(request[0] == "ep-0" for request in client.requests)


def test_every_put_tried_again_is_counted_so_a_failure_the_retries_absorbed_still_shows() -> None:
    throttled = client_error("ThrottlingException", "PutEvents", "Rate exceeded")
    counted: list[tuple[str, float]] = []
    client = FlakyEvents(throttled, {"ep-1"}, set())
    EventPublisher(client, "bus", sleep=lambda _: None, metric=lambda n, v: counted.append((n, v))).publish(
        events(2)
    )
    assert sorted(client.put) == ["ep-0", "ep-1"]
    assert counted == [("PublishRetries", 1), ("PublishRetries", 1)]


def test_a_putevents_request_holds_no_more_than_eventbridge_takes_in_one() -> None:
    """Three events of 100 KB: one request of them would be refused whole (256 KB), on every try, and they
    would stay in the outbox for good. They go in two."""
    from lifeguard.event_contract import ENTRY_MAX_BYTES, entry_size

    client = FakeEventBridge()
    events = [
        ControllerEvent("LoopResolved", make_detail(episode_id=f"ep-{n}", reason="x" * 100_000), f"k{n}")
        for n in range(3)
    ]
    EventPublisher(client, "bus", sleep=lambda _: None).publish(events)
    assert len(client.requests) == 2
    for request in client.requests:
        assert sum(entry_size(entry) for entry in request) <= ENTRY_MAX_BYTES
