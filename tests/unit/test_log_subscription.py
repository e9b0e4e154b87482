"""CloudWatch Logs subscription events: decoded and checked, refused in one line when they are not one."""

from __future__ import annotations

import base64
import gzip
import json
from typing import Any

import pytest

from lifeguard.log_subscription import InvalidSubscriptionEventError, decode_subscription, encode_subscription


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
