"""CloudWatch Logs subscription events: decoded and checked, refused in one line when they are not one."""

from __future__ import annotations

import base64
import gzip
import json
from typing import Any

import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st

from lifeguard.bounds import EPOCH_MS_MAX
from lifeguard.log_subscription import (
    _LOG_EVENT_SHAPE,
    InvalidSubscriptionEventError,
    _Payload,
    decode_subscription,
    encode_subscription,
)
from lifeguard.schema import BAD, Invalid, Problem


def packed(document: Any) -> dict[str, Any]:
    return {"awslogs": {"data": base64.b64encode(gzip.compress(json.dumps(document).encode())).decode()}}


def test_a_batch_keeps_its_log_group_stream_and_messages() -> None:
    batch = decode_subscription(
        encode_subscription(
            "/aws/pcs", "AWSLogs/PCS/c/node_lifecycle.log", [(1792544802000, "a"), (1792544802001, "b")]
        )
    )
    assert (batch.log_group, batch.log_stream, batch.message_type) == (
        "/aws/pcs",
        "AWSLogs/PCS/c/node_lifecycle.log",
        "DATA_MESSAGE",
    )
    assert list(batch.messages()) == [
        ("a", "AWSLogs/PCS/c/node_lifecycle.log:0"),
        ("b", "AWSLogs/PCS/c/node_lifecycle.log:1"),
    ]
    assert batch.events[1].timestamp_ms == 1792544802001


@pytest.mark.parametrize(
    ("event", "says"),
    [
        ({}, "no awslogs.data string"),
        ({"awslogs": {"data": 7}}, "no awslogs.data string"),
        ({"awslogs": {"data": "not base64!"}}, "awslogs.data is not base64 gzip"),
        ({"awslogs": {"data": base64.b64encode(b"plain text").decode()}}, "awslogs.data is not base64 gzip"),
        (
            {"awslogs": {"data": base64.b64encode(gzip.compress(b"{not json")).decode()}},
            "(document): Invalid JSON",
        ),
        (
            packed({"messageType": "DATA_MESSAGE", "owner": "1", "logGroup": "g", "logStream": "s"}),
            "subscriptionFilters: Field required",
        ),
    ],
)
def test_what_is_not_a_subscription_event_is_refused_in_one_line(event: dict[str, Any], says: str) -> None:
    with pytest.raises(InvalidSubscriptionEventError) as raised:
        decode_subscription(event)
    assert says in str(raised.value)
    assert "\n" not in str(raised.value)


# Payloads as CloudWatch Logs sends them, and near misses: a few of their keys (or of a log event's) gone or
# of another type.
_ANY_JSON = st.one_of(
    st.none(), st.booleans(), st.integers(), st.floats(allow_nan=False), st.text(max_size=3), st.just([])
)
_SENT = {
    "messageType": "DATA_MESSAGE",
    "owner": "123456789012",
    "logGroup": "/aws/pcs",
    "logStream": "s",
    "subscriptionFilters": ["lifeguard"],
    "policyLevel": "ACCOUNT_LEVEL_POLICY",
}


@st.composite
def _near_misses(draw: st.DrawFn, sent: dict[str, Any]) -> Any:
    """`sent`, with each key left as it is (mostly), taken out, or given another value."""
    kept = {}
    for key, value in sent.items():
        change = draw(st.sampled_from(["keep"] * 12 + ["drop", "other"]))
        if change == "keep":
            kept[key] = value
        elif change == "other":
            kept[key] = draw(_ANY_JSON)
    return kept


def sent_with(**changes: Any) -> dict[str, Any]:
    """A payload as CloudWatch Logs sends one, with `changes`."""
    return {**_SENT, "logEvents": [{"id": "0", "timestamp": 1792544802000, "message": "m"}], **changes}


_LOG_EVENT = _near_misses({"id": "0", "timestamp": 1792544802000, "message": "m"}) | _ANY_JSON
_PAYLOADS = (
    st.builds(
        lambda payload, events, filters: {**payload, "logEvents": events, **filters},
        _near_misses(_SENT),
        st.lists(_LOG_EVENT, max_size=3) | _ANY_JSON,
        st.just({})
        | st.fixed_dictionaries(
            {"subscriptionFilters": st.lists(st.text(max_size=2) | _ANY_JSON, max_size=2)}
        ),
    )
    | _ANY_JSON
)


@settings(max_examples=600, deadline=None)
@given(_PAYLOADS)
@example(sent_with())
@example(sent_with(subscriptionFilters=[], logEvents=[]))
@example(sent_with(policyLevel=None))
@example(sent_with(policyLevel=5))
@example(sent_with(owner=None))
@example(sent_with(subscriptionFilters=["f", 1]))
@example(sent_with(logEvents=[{"id": "1", "timestamp": True, "message": "m"}]))
@example(sent_with(logEvents=[{"id": "1", "timestamp": EPOCH_MS_MAX, "message": "m"}]))
@example(sent_with(logEvents=[{"id": "1", "timestamp": -1, "message": "m"}]))
@example(sent_with(logEvents=[{"id": 1, "timestamp": 0, "message": "m"}]))
@example(sent_with(logEvents=[{"id": "1", "timestamp": 0, "message": None}]))
@example(sent_with(logEvents=[["1", 0, "m"]]))
def test_a_payload_is_taken_or_refused_as_its_full_check_says(payload: Any) -> None:
    """Most batches are taken without the full check (`_as_cloudwatch_sends_it`): that way takes exactly
    what the full check takes, as the same batch, and everything else is left to it. A log event the full
    check refuses is set aside (`malformed`), the rest of its batch taken, as the full check takes it
    without that event."""
    kept, aside = _set_aside(payload)
    try:
        expected: Any = _Payload.model_validate(kept)
    except Invalid:
        expected = None
    try:
        batch = decode_subscription(packed(payload))
    except InvalidSubscriptionEventError:
        assert expected is None
        return
    assert expected is not None
    assert (batch.log_group, batch.log_stream, batch.message_type) == (
        expected.log_group,
        expected.log_stream,
        expected.message_type,
    )
    assert list(batch.raw_events) == list(expected.log_events)
    assert len(batch.malformed) == aside
    assert batch.count == len(payload["logEvents"])


def _set_aside(payload: Any) -> tuple[Any, int]:
    """The payload without the log events the full check refuses, when it holds a list of them, and how
    many those were."""
    if not isinstance(payload, dict) or not isinstance(payload.get("logEvents"), list):
        return payload, 0
    problems: list[Problem] = []
    kept = [event for event in payload["logEvents"] if _LOG_EVENT_SHAPE(event, (), problems) is not BAD]
    return {**payload, "logEvents": kept}, len(payload["logEvents"]) - len(kept)


def test_a_log_event_not_as_sent_is_set_aside_and_named_the_rest_of_its_batch_taken() -> None:
    """One log event of another form (a float time, an id that is a number, no message) refused the whole
    delivery: its genuine records were lost, and no retry brings them back (the handler returned)."""
    events = [
        {"id": "1", "timestamp": 1792544802000, "message": "a"},
        {"id": "x", "timestamp": 1792544802000.0, "message": "b"},
        {"id": 7, "timestamp": 1792544802000, "message": "c"},
        ["not", "an", "event"],
        {"id": "4", "timestamp": 1792544802000},
        {"id": "5", "timestamp": 1792544802001, "message": "e"},
    ]
    batch = decode_subscription(packed({**_SENT, "logStream": "AWSLogs/PCS/c/n.log", "logEvents": events}))
    assert list(batch.messages()) == [("a", "AWSLogs/PCS/c/n.log:1"), ("e", "AWSLogs/PCS/c/n.log:5")]
    assert list(batch.malformed_events()) == [
        ("AWSLogs/PCS/c/n.log:x", "timestamp: Input should be a valid integer"),
        ("AWSLogs/PCS/c/n.log:logEvents[2]", "id: Input should be a valid string"),
        ("AWSLogs/PCS/c/n.log:logEvents[3]", "Input should be an object"),
        ("AWSLogs/PCS/c/n.log:4", "message: Field required"),
    ]
    assert batch.count == len(events)
