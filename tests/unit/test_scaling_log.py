from __future__ import annotations

import json
from types import MappingProxyType
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from lifeguard.scaling_log import (
    KNOWN_REASONS,
    PASSED_OVER,
    ScalingLogParseError,
    ScalingLogRecord,
    parse_scaling_log_record,
    passed_over,
)

ARTICLE_FAILURE = {
    "resource_id": "pcs_abc123de45",
    "resource_type": "PCS_CLUSTER",
    "event_timestamp": 1792544802000,
    "compute_node_group_id": "pcs_abcdef01",
    "scheduler_node_id": "lca-static-1",
    "status_code": "TERMINATED",
    "reason_code": "BOOTSTRAP_FAILED",
    "description": "Backing Instance Failed To Bootstrap",
    "details": {"instance_id": "i-059b4b99b4f2e9739", "instance_type": "c7i.large", "subnet_id": "subnet-1"},
}


def parse(value: Any) -> ScalingLogRecord:
    record = parse_scaling_log_record(json.dumps(value))
    assert isinstance(record, ScalingLogRecord), record
    return record


def test_bootstrap_failure_record_is_recognised() -> None:
    record = parse(ARTICLE_FAILURE)
    assert record.is_bootstrap_failure
    assert not record.is_bootstrap_success
    assert record.is_known
    assert record.instance_id == "i-059b4b99b4f2e9739"
    assert record.cluster_id == "pcs_abc123de45"
    assert record.event_timestamp == 1792544802000


@pytest.mark.parametrize(
    ("status", "reason", "failure", "success", "launch_failure"),
    [
        ("TERMINATED", "BOOTSTRAP_FAILED", True, False, False),
        ("ACTIVE", "BOOTSTRAP_SUCCESS", False, True, False),
        ("TERMINATED", "REPLACEMENT_REQUESTED", False, False, False),
        ("TERMINATED", "EXTERNALLY_TERMINATED", False, False, False),
        ("TERMINATED", "SCHEDULER_REQUESTED", False, False, False),
        ("LAUNCH_FAILED", "INSUFFICIENT_CAPACITY", False, False, True),
        ("LAUNCH_FAILED", "LIMIT_EXCEEDED", False, False, True),
        ("REGISTERED", "REGISTER_SUCCESS", False, False, False),
    ],
)
def test_only_terminated_bootstrap_failed_is_a_bootstrap_failure(
    status: str, reason: str, failure: bool, success: bool, launch_failure: bool
) -> None:
    record = parse({**ARTICLE_FAILURE, "status_code": status, "reason_code": reason})
    assert (record.is_bootstrap_failure, record.is_bootstrap_success, record.is_launch_failure) == (
        failure,
        success,
        launch_failure,
    )
    assert record.is_known


def test_unknown_codes_are_kept_and_flagged() -> None:
    record = parse({**ARTICLE_FAILURE, "status_code": "HIBERNATED", "reason_code": "USER_ASKED"})
    assert record.status_code == "HIBERNATED"
    assert record.unknown_codes == ("status_code=HIBERNATED",)
    other = parse({**ARTICLE_FAILURE, "reason_code": "COSMIC_RAY"})
    assert other.unknown_codes == ("reason_code=COSMIC_RAY",)
    assert not other.is_bootstrap_failure


def test_missing_optional_fields_are_fine() -> None:
    record = parse({"event_timestamp": 1, "status_code": "TERMINATED", "reason_code": "BOOTSTRAP_FAILED"})
    assert record.instance_id is None
    assert record.compute_node_group_id is None
    assert record.is_bootstrap_failure


def test_extra_fields_from_newer_pcs_are_tolerated() -> None:
    record = parse({**ARTICLE_FAILURE, "details": {"instance_id": "i-1", "az": "use1-az1"}, "new_field": 1})
    assert record.instance_id == "i-1"


@pytest.mark.parametrize(
    ("raw", "reason"),
    [
        ("not json at all", "not JSON"),
        ("[1, 2]", "not a JSON object"),
        ('{"status_code": "TERMINATED"}', "event_timestamp"),
        ('{"event_timestamp": "yesterday", "status_code": "X"}', "event_timestamp"),
        ('{"event_timestamp": -5, "status_code": "X"}', "event_timestamp"),
        ('{"event_timestamp": 5, "status_code": 7}', "status_code"),
        ('{"event_timestamp": 5, "status_code": "X", "details": "i-1"}', "details"),
    ],
)
def test_non_records_become_typed_errors(raw: str, reason: str) -> None:
    result = parse_scaling_log_record(raw, where="AWSLogs/PCS/pcs_a/node_lifecycle.log:42")
    assert isinstance(result, ScalingLogParseError)
    assert reason in result.message
    assert str(result).startswith("AWSLogs/PCS/pcs_a/node_lifecycle.log:42: ")
    assert result.excerpt == raw


def test_long_garbage_is_excerpted() -> None:
    result = parse_scaling_log_record("x" * 10_000)
    assert isinstance(result, ScalingLogParseError)
    assert len(result.excerpt) == 200


json_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text(),
    lambda children: st.lists(children) | st.dictionaries(st.text(), children),
    max_leaves=20,
)


@given(st.one_of(st.text(), st.binary(), json_values.map(json.dumps)))
def test_no_input_makes_the_parser_raise(raw: str | bytes) -> None:
    result = parse_scaling_log_record(raw)
    assert isinstance(result, ScalingLogRecord | ScalingLogParseError)


@pytest.mark.parametrize(
    ("status", "reason"),
    [
        ("REGISTERED", "REGISTER_SUCCESS"),
        ("TERMINATED", "SCHEDULER_REQUESTED"),
        ("PENDING_REPLACEMENT", "NODE_GROUP_UPDATE"),
        ("PENDING_REPLACEMENT", "EC2_HEALTH_CHECK_FAILED"),  # a code with a digit
        ("TERMINATE_FAILED", "EC2_ERROR"),
    ],
)
def test_records_the_detection_never_reads_are_passed_over_unvalidated(status: str, reason: str) -> None:
    record = {**ARTICLE_FAILURE, "status_code": status, "reason_code": reason}
    assert passed_over(json.dumps(record))
    assert passed_over(json.dumps(record, separators=(",", ":")))
    assert passed_over(json.dumps({**record, "event_timestamp": "soon"}))  # nothing of it is used


@pytest.mark.parametrize(
    "record",
    [
        ARTICLE_FAILURE,
        {**ARTICLE_FAILURE, "status_code": "ACTIVE", "reason_code": "BOOTSTRAP_SUCCESS"},
        {**ARTICLE_FAILURE, "status_code": "LAUNCHED", "reason_code": "SCHEDULER_REQUESTED"},
        {**ARTICLE_FAILURE, "status_code": "LAUNCH_FAILED", "reason_code": "INSUFFICIENT_CAPACITY"},
        {**ARTICLE_FAILURE, "reason_code": "UNHEALTHY_NODE"},
        {**ARTICLE_FAILURE, "status_code": "HIBERNATED", "reason_code": "NAPPING"},  # unknown: counted
        {**ARTICLE_FAILURE, "status_code": "REGISTERED", "reason_code": None},
        # A passed-over pair named where it is not the record's own: the parser decides.
        {**ARTICLE_FAILURE, "details": {"status_code": "REGISTERED", "reason_code": "REGISTER_SUCCESS"}},
        {**ARTICLE_FAILURE, "description": '"status_code": "REGISTERED", "reason_code": "REGISTER_SUCCESS"'},
        {**ARTICLE_FAILURE, "status_code": 5, "details": {"status_code": "REGISTERED"}},
    ],
)
def test_anything_the_detection_may_read_is_left_to_the_parser(record: dict[str, Any]) -> None:
    assert not passed_over(json.dumps(record))


def test_a_record_whose_key_comes_twice_is_left_to_the_parser() -> None:
    text = json.dumps(ARTICLE_FAILURE)  # the last of duplicate keys is the one JSON readers keep
    assert not passed_over(text[:-1] + ', "status_code": "REGISTERED", "reason_code": "REGISTER_SUCCESS"}')


@given(
    status=st.sampled_from([*sorted(KNOWN_REASONS), "HIBERNATED"]),
    reason=st.one_of(st.none(), st.sampled_from(sorted(set().union(*KNOWN_REASONS.values())))),
    nested=st.dictionaries(
        st.sampled_from(["status_code", "reason_code", "x"]),
        st.sampled_from(["REGISTERED", "REGISTER_SUCCESS", "ACTIVE"]),
    ),
    compact=st.booleans(),
)
def test_a_passed_over_message_is_never_a_record_the_detection_reads(
    status: str, reason: str | None, nested: dict[str, str], compact: bool
) -> None:
    record = {
        **ARTICLE_FAILURE,
        "status_code": status,
        "reason_code": reason,
        "details": {**ARTICLE_FAILURE["details"], **nested},
    }
    text = json.dumps(record, separators=(",", ":") if compact else None)
    if passed_over(text):
        parsed = parse_scaling_log_record(text)
        assert isinstance(parsed, ScalingLogRecord)
        assert (parsed.status_code, parsed.reason_code) in PASSED_OVER


@pytest.mark.parametrize(
    "change",
    [
        {},
        {"status_code": "HIBERNATED"},  # undocumented: the full check takes it, and flags it
        {"reason_code": None, "details": {"instance_id": "i-0abc"}},
        {"resource_id": "pcs_abc\n"},
        {"details": None},
        {"details": {"instance_id": "i-0abc", "instance_type": "x" * 65}},
        {"event_timestamp": True},
        {"scheduler_node_id": "n\ud800"},
    ],
)
def test_the_fast_path_takes_exactly_what_the_full_check_takes(change: dict[str, Any]) -> None:
    data = {**ARTICLE_FAILURE, **change}
    parsed = parse_scaling_log_record(data)
    try:
        full: object = ScalingLogRecord.model_validate(data)
    except ValueError:
        full = None
    assert parsed == full if full is not None else isinstance(parsed, ScalingLogParseError)
    # A mapping that is not a dict goes to the full check, which refuses it, as it always did.
    assert isinstance(parse_scaling_log_record(MappingProxyType(data)), ScalingLogParseError)
