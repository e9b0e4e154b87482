"""Each bound on what comes from outside (scaling-log records, node reports, subscription batches, events
off the bus), held at its edge: the value just inside is taken, the one just past it refused with its
reason. The modules' own tests hold the checks; these pin the numbers, which those derive from the code."""

from __future__ import annotations

import base64
import gzip
import json
from typing import Any

import pytest

from lifeguard.bounds import implausible_time
from lifeguard.envelope import envelope_problem
from lifeguard.event_contract import clean_detail
from lifeguard.log_subscription import InvalidSubscriptionEventError, decode_subscription, encode_subscription
from lifeguard.node_report import NodeReportParseError, parse_node_report
from lifeguard.scaling_log import (
    ScalingLogParseError,
    ScalingLogRecord,
    parse_scaling_log_record,
    read_scaling_log_message,
)
from tests.unit.test_handlers_node_reports import FAILED, NOW, World
from tests.unit.test_node_report import REPORT
from tests.unit.test_scaling_log import ARTICLE_FAILURE

RECORD: dict[str, Any] = ARTICLE_FAILURE


def refused(raw: str) -> str:
    """The reason a scaling-log record is refused for (it must be)."""
    found = parse_scaling_log_record(raw)
    assert isinstance(found, ScalingLogParseError), found
    return found.reason


def report_refused(raw: str) -> str:
    found = parse_node_report(raw)
    assert isinstance(found, NodeReportParseError), found
    return found.reason


@pytest.mark.parametrize(
    ("change", "reason"),
    [
        ({"event_timestamp": -1}, "invalid event_timestamp"),
        ({"event_timestamp": 4_102_444_800_000}, "invalid event_timestamp"),  # 2100
        ({"scheduler_node_id": "n" * 129}, "invalid scheduler_node_id"),
        ({"compute_node_group_id": "pcs_abc_def"}, "invalid compute_node_group_id"),
        ({"details": {**RECORD["details"], "subnet_id": "s" * 65}}, "invalid details.subnet_id"),
        ({"details": {**RECORD["details"], "subnet_id": 5}}, "invalid details.subnet_id"),
    ],
)
def test_a_record_past_a_bound_is_refused_whichever_way_it_is_read(
    change: dict[str, Any], reason: str
) -> None:
    """By the parser, its keys in any order, and by the handler's reader (PCS's own order)."""
    raw = json.dumps({**RECORD, **change})
    assert refused(raw) == reason
    reordered = json.dumps(dict(reversed(list({**RECORD, **change}.items()))))
    assert refused(reordered) == reason
    found = read_scaling_log_message(raw)
    assert isinstance(found, ScalingLogParseError)
    assert found.reason == reason


def test_the_values_at_a_records_bounds_are_taken() -> None:
    for change in (
        {"scheduler_node_id": "n" * 128},
        {"event_timestamp": 4_102_444_799_999},
        {"details": {**RECORD["details"], "subnet_id": "s" * 64}},
    ):
        assert isinstance(parse_scaling_log_record(json.dumps({**RECORD, **change})), ScalingLogRecord)


def test_a_bad_unicode_escape_in_a_record_as_pcs_writes_it_is_not_json() -> None:
    """The reader that takes PCS's form without json.loads must refuse what json.loads refuses."""
    raw = json.dumps({**RECORD, "description": "HOLE"}, separators=(",", ":")).replace("HOLE", "\\uZZZZ")
    found = read_scaling_log_message(raw)
    assert isinstance(found, ScalingLogParseError)
    assert found.reason == "not JSON"


def test_a_passed_over_record_with_a_second_status_key_is_skipped_not_ignored() -> None:
    raw = (
        '{"event_timestamp":1792544247000,"status_code":"REGISTERED","reason_code":"REGISTER_SUCCESS",'
        '"status_code":null}'
    )
    found = read_scaling_log_message(raw)
    assert isinstance(found, ScalingLogParseError)
    assert found.reason == "duplicate key"


def test_an_unknown_status_that_begins_as_a_passed_over_one_is_read_and_counted_unknown() -> None:
    raw = json.dumps({"status_code": "REGISTEREDx", "reason_code": "REGISTER_SUCCESS", "event_timestamp": 1})
    found = read_scaling_log_message(raw)
    assert isinstance(found, ScalingLogRecord)
    assert found.unknown_codes == ("status_code=REGISTEREDx",)


def test_a_record_time_is_plausible_from_14_days_behind_the_clock_to_5_minutes_ahead() -> None:
    now = 1792544247000
    assert implausible_time(now + 300_000, now) is None
    assert implausible_time(now + 300_001, now) == "ahead of the clock"
    assert implausible_time(now - 1_209_600_000, now) is None
    assert implausible_time(now - 1_209_600_001, now) == "older than 14 days"


@pytest.mark.parametrize(
    ("change", "reason"),
    [
        ({"node_id": "n" * 129}, "invalid node_id"),
        ({"compute_node_group_id": "pcs_abc_def"}, "invalid compute_node_group_id"),
        ({"boot": 1_000_001}, "invalid boot"),
        ({"exit_code": 2**31}, "invalid exit_code"),
        ({"started_at": 4_102_444_800}, "invalid started_at"),  # 2100
    ],
)
def test_a_report_past_a_bound_is_refused(change: dict[str, Any], reason: str) -> None:
    assert report_refused(json.dumps({**REPORT, **change})) == reason


def test_the_values_at_a_reports_bounds_are_taken() -> None:
    for change in ({"node_id": "n" * 128}, {"boot": 1_000_000}, {"exit_code": 2**31 - 1}):
        assert not isinstance(parse_node_report(json.dumps({**REPORT, **change})), NodeReportParseError)


def test_a_report_of_a_run_that_ends_ahead_of_the_clock_is_skipped_and_the_rest_stored() -> None:
    """Its end time drives the windows of a loop known from reports: a forged or broken node's run dated
    ahead is not kept."""
    world = World()
    world.open_episode()
    ahead = json.dumps({**FAILED[0], "ended_at": int(NOW) + 86_400})
    summary = world.deliver([ahead, json.dumps(FAILED[1])])
    assert dict(summary.skipped_reasons) == {"run time ahead of the clock": 1}


def _subscription(events: list[dict[str, Any]]) -> dict[str, Any]:
    payload = {
        "messageType": "DATA_MESSAGE",
        "owner": "123456789012",
        "logGroup": "g",
        "logStream": "s",
        "subscriptionFilters": ["f"],
        "logEvents": events,
    }
    return {"awslogs": {"data": base64.b64encode(gzip.compress(json.dumps(payload).encode())).decode()}}


@pytest.mark.parametrize(
    "event",
    [
        {"id": "1", "timestamp": -1, "message": "m"},
        {"id": 1, "timestamp": 1, "message": "m"},
    ],
)
def test_a_log_event_not_as_cloudwatch_sends_one_is_set_aside_never_read(event: dict[str, Any]) -> None:
    """Set aside for the handler to skip and count, its batch's other log events read (it refused the whole
    batch, and them with it)."""
    batch = decode_subscription(_subscription([{"id": "0", "timestamp": 1, "message": "fine"}, event]))
    assert list(batch.messages()) == [("fine", "s:0")]
    [(where, why)] = batch.malformed_events()
    assert where in ("s:1", "s:logEvents[1]")
    assert why.startswith(("timestamp: ", "id: "))


def test_a_batch_whose_data_holds_a_character_base64_has_not_is_refused() -> None:
    data = encode_subscription("g", "s", [(1, "m")])["awslogs"]["data"]
    with pytest.raises(InvalidSubscriptionEventError, match="not base64 gzip"):
        decode_subscription({"awslogs": {"data": data[:4] + "!" + data[4:]}})


RISK = {"code": "C", "path": "p", "message": "m", "severity": "warning"}
EVENT = {
    "version": "0",
    "id": "1",
    "source": "x",
    "account": "123456789012",
    "time": "2026-10-21T01:12:42Z",
    "region": "us-east-1",
    "resources": [],
    "detail-type": "d",
    "detail": {},
}


def test_an_events_lists_are_held_to_their_bounds() -> None:
    cleaned, _ = clean_detail({"risks": [RISK] * 101 + [{"code": 5}]})
    assert len(cleaned["risks"]) == 100
    suspect = {
        "stage": "nodeBootstrapped",
        "script": "s",
        "on_error": "TERMINATE",
        "exit_code": 1,
        "log_tail": "",
        "instances": ["i-1"] * 101,
    }
    cleaned, problems = clean_detail({"suspect": suspect})
    assert cleaned["suspect"] is None
    assert problems
    cleaned, problems = clean_detail({"signals": ["scaling_log"] * 3})
    assert cleaned["signals"] == []
    assert problems


@pytest.mark.parametrize("time", ["2026-13-45T01:12:42Z", "2026-10-21T01:12:42"])
def test_an_event_whose_time_is_not_as_eventbridge_writes_one_is_refused(time: str) -> None:
    assert envelope_problem(EVENT) is None
    assert envelope_problem({**EVENT, "time": time}) is not None
