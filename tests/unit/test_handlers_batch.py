"""What both handlers do first: a subscription event decoded (within its size bound) or refused, control
messages told apart, and skipped messages counted by reason."""

from __future__ import annotations

import base64
import gc
import gzip
import json
import logging
import threading
from typing import Any

import pytest

from lifeguard.handlers.batch import CollectorPause, Skips, data_batch
from lifeguard.log_subscription import (
    InvalidSubscriptionEventError,
    LogBatch,
    decode_subscription,
    encode_subscription,
)
from tests.conftest import load_event

STREAM = "AWSLogs/PCS/pcs_abc123de45/node_lifecycle.log"


class Metrics:
    """Records every metric put."""

    def __init__(self) -> None:
        self.put: list[tuple[str, float]] = []

    def __call__(self, name: str, value: float) -> None:
        self.put.append((name, value))


def gzipped(*members: bytes) -> dict[str, Any]:
    return {"awslogs": {"data": base64.b64encode(b"".join(gzip.compress(m) for m in members)).decode()}}


def test_a_recorded_delivery_is_a_batch_of_scaling_log_records() -> None:
    metrics = Metrics()
    batch = data_batch(load_event("subscriptions/article-terminate-loop.json"), metrics)
    assert isinstance(batch, LogBatch)
    assert batch.log_stream.endswith("node_lifecycle.log")
    records = [json.loads(message) for message, _ in batch.messages()]
    assert records
    assert all("status_code" in record for record in records)
    assert metrics.put == []


def test_a_control_message_carries_nothing_to_handle() -> None:
    metrics = Metrics()
    assert data_batch(load_event("subscriptions/control-message.json"), metrics) == "control"
    assert metrics.put == [("ControlMessages", 1)]


def test_an_unreadable_event_is_invalid_counted_and_logged(caplog: pytest.LogCaptureFixture) -> None:
    metrics = Metrics()
    with caplog.at_level(logging.ERROR, logger="lifeguard"):
        assert data_batch({"Records": []}, metrics) == "invalid"
    assert metrics.put == [("InvalidEvents", 1)]
    assert "no awslogs.data string" in caplog.text


def test_a_payload_is_refused_once_it_decompresses_past_the_bound() -> None:
    event = encode_subscription("/aws/pcs", STREAM, [(1792544802000, "x" * 1000)])
    size = len(gzip.decompress(base64.b64decode(event["awslogs"]["data"])))
    assert decode_subscription(event, max_bytes=size).events[0].message == "x" * 1000
    with pytest.raises(InvalidSubscriptionEventError, match=f"more than {size - 1} bytes"):
        decode_subscription(event, max_bytes=size - 1)


def test_a_payload_in_several_gzip_members_is_read_whole() -> None:
    document = json.dumps(
        {
            "messageType": "DATA_MESSAGE",
            "owner": "1",
            "logGroup": "g",
            "logStream": "s",
            "subscriptionFilters": ["f"],
            "logEvents": [{"id": "7", "timestamp": 1792544802000, "message": "m"}],
        }
    ).encode()
    batch = decode_subscription(gzipped(document[:20], document[20:]))
    assert list(batch.messages()) == [("m", "s:7")]


def test_a_truncated_gzip_is_refused() -> None:
    data = gzip.compress(b'{"messageType": "DATA_MESSAGE"}' * 50)[:-12]
    with pytest.raises(InvalidSubscriptionEventError, match="truncated gzip"):
        decode_subscription({"awslogs": {"data": base64.b64encode(data).decode()}})


def test_skips_are_counted_by_reason_and_logged_in_one_bounded_line(caplog: pytest.LogCaptureFixture) -> None:
    skips = Skips()
    with caplog.at_level(logging.WARNING, logger="lifeguard"):
        skips.skip("not JSON", "s:1", "Expecting value\x1b[2J\rline 2" + "z" * 500)
        skips.skip("not JSON", "s:2")
        skips.skip("invalid instance_id", "s:3")
    assert skips.skipped == 3
    assert dict(skips.skipped_reasons) == {"not JSON": 2, "invalid instance_id": 1}
    first, second, _ = caplog.messages
    assert first.startswith("skipped the message at s:1: not JSON (Expecting value?[2J?line 2zz")
    assert "\r" not in first
    assert len(first) < 300
    assert second == "skipped the message at s:2: not JSON"


def test_the_collector_resumes_when_the_last_of_overlapping_batches_ends() -> None:
    pause = CollectorPause()
    assert gc.isenabled()
    pause.__enter__()  # a batch begins
    pause.__enter__()  # another, before the first ends (nested, or another thread)
    pause.__exit__(None, None, None)  # the first ends: the second still reads
    assert not gc.isenabled()
    pause.__exit__(None, None, None)
    assert gc.isenabled()


def test_a_batch_that_raises_resumes_the_collector_and_one_paused_before_stays_paused() -> None:
    pause = CollectorPause()

    def interrupted() -> None:
        with pause:
            assert not gc.isenabled()
            raise KeyboardInterrupt

    with pytest.raises(KeyboardInterrupt):
        interrupted()
    assert gc.isenabled()
    gc.disable()  # paused by the caller itself
    try:
        with pause:
            pass
        assert not gc.isenabled()
    finally:
        gc.enable()


def test_batches_in_threads_leave_the_collector_running() -> None:
    pause = CollectorPause()
    first_in, second_in, first_out = threading.Event(), threading.Event(), threading.Event()
    seen: list[bool] = []

    def first() -> None:
        with pause:
            first_in.set()
            second_in.wait(5)
        first_out.set()

    def second() -> None:
        first_in.wait(5)
        with pause:
            second_in.set()
            first_out.wait(5)
            seen.append(gc.isenabled())  # the first ended while this one reads

    threads = [threading.Thread(target=first), threading.Thread(target=second)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(10)
    assert seen == [False]
    assert gc.isenabled()
