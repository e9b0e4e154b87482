from __future__ import annotations

import json
import re
from types import MappingProxyType
from typing import Any

import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st

from lifeguard import scaling_log
from lifeguard.bounds import EPOCH_MS_MAX
from lifeguard.scaling_log import (
    KNOWN_REASONS,
    PASSED_OVER,
    ScalingLogParseError,
    ScalingLogRecord,
    parse_scaling_log_record,
    passed_over,
    read_scaling_log_message,
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


@pytest.mark.parametrize(
    ("status", "reason"),
    [("ACTIVE", "BOOTSTRAP_FAILED"), ("REGISTERED", "UNHEALTHY_NODE"), ("TERMINATED", "BOOTSTRAP_SUCCESS")],
)
def test_a_reason_under_another_status_is_not_the_outcome_it_names(status: str, reason: str) -> None:
    """Pairs PCS does not write, of codes it documents: read as they are (unknown pairs), never as a
    failure, a success or an unhealthy node, which each take both codes."""
    record = read_scaling_log_message(
        json.dumps({**ARTICLE_FAILURE, "status_code": status, "reason_code": reason})
    )
    assert isinstance(record, ScalingLogRecord), record
    assert not record.is_known
    assert (record.is_bootstrap_failure, record.is_bootstrap_success, record.is_unhealthy_termination) == (
        False,
        False,
        False,
    )


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
        # A key given twice: readers differ on which value holds (json.loads keeps the last).
        (
            '{"event_timestamp": 5, "status_code": "REGISTERED", "status_code": "TERMINATED"}',
            "duplicate key ('status_code' given twice",
        ),
        ('{"event_timestamp": 5, "details": {"instance_id": "i-1", "instance_id": "i-2"}}', "duplicate key"),
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


# Each names a passed-over pair once, in the text, where JSON does not read it as the record's own.
_NO_RECORD_OF_A_PAIR = {
    "only in details": json.dumps(
        {
            "event_timestamp": 1792544802000,
            "details": {"status_code": "REGISTERED", "reason_code": "REGISTER_SUCCESS"},
        }
    ),
    "cut short": json.dumps(
        {"event_timestamp": 1, "status_code": "REGISTERED", "reason_code": "REGISTER_SUCCESS"}
    )[:-1],
    "in an array": json.dumps([{"status_code": "REGISTERED", "reason_code": "REGISTER_SUCCESS"}]),
    "after an escaped quote": (
        '{"x\\"status_code": "REGISTERED", "reason_code": "REGISTER_SUCCESS", "event_timestamp": 1}'
    ),
}


@pytest.mark.parametrize("raw", _NO_RECORD_OF_A_PAIR.values(), ids=_NO_RECORD_OF_A_PAIR.keys())
def test_a_message_naming_a_passed_over_pair_not_as_its_own_is_no_record_skipped_not_ignored(
    raw: str,
) -> None:
    """A cut or nested record is no record of a pair passed over: it is skipped and counted (a damaged
    stream shows in RecordsSkipped), not ignored as a REGISTERED would be."""
    assert not passed_over(raw)
    found = read_scaling_log_message(raw, where="stream:1")
    assert isinstance(found, ScalingLogParseError)
    assert found == parse_scaling_log_record(raw, where="stream:1")


@pytest.mark.parametrize("key", ["reason\\u005fcode", "\\u0072eason_code", "reason_cod\\u0065"])
def test_a_key_spelled_with_an_escape_is_read_as_json_reads_it_never_passed_over(key: str) -> None:
    """JSON reads `"reason\\u005fcode"` as a second `reason_code`: a record of a pair passed over with such
    a key is no record passed over but one giving its reason twice, and must reach the parser, which skips
    it as ambiguous (counted, with its reason) rather than take either value."""
    passed = {**ARTICLE_FAILURE, "reason_code": "SCHEDULER_REQUESTED"}
    text = json.dumps(passed)[:-1] + f', "{key}": "BOOTSTRAP_FAILED"}}'
    parsed = parse_scaling_log_record(text)
    assert isinstance(parsed, ScalingLogParseError)
    assert parsed.reason == "duplicate key"
    assert "'reason_code' given twice" in parsed.message
    assert not passed_over(text)
    assert read_scaling_log_message(text) == parsed


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


def read_the_long_way(raw: str) -> ScalingLogRecord | ScalingLogParseError | None:
    """What the handler made of a message before records as PCS writes them were read without JSON."""
    return None if passed_over(raw) else parse_scaling_log_record(raw, where="s:1")


def same_reading(raw: str) -> None:
    fast, slow = read_scaling_log_message(raw, where="s:1"), read_the_long_way(raw)
    if isinstance(slow, ScalingLogParseError):
        assert isinstance(fast, ScalingLogParseError), (raw, fast)
        assert (fast.message, fast.reason, fast.excerpt, fast.where) == (
            slow.message,
            slow.reason,
            slow.excerpt,
            slow.where,
        )
    else:
        assert fast == slow, raw


@pytest.mark.parametrize("separators", [(",", ":"), (", ", ": ")])
@pytest.mark.parametrize("description", [True, False])
def test_a_record_as_pcs_writes_it_is_read_without_json(
    separators: tuple[str, str], description: bool, monkeypatch: pytest.MonkeyPatch
) -> None:
    record = (
        dict(ARTICLE_FAILURE)
        if description
        else {k: v for k, v in ARTICLE_FAILURE.items() if k != "description"}
    )
    text = json.dumps(record, separators=separators)
    expected = parse_scaling_log_record(text)

    def no_json(_text: str) -> object:
        raise AssertionError("read with json.loads")

    monkeypatch.setattr(scaling_log.json, "loads", no_json)
    assert read_scaling_log_message(text) == expected
    passed = {**record, "status_code": "REGISTERED", "reason_code": "REGISTER_SUCCESS"}
    assert read_scaling_log_message(json.dumps(passed, separators=separators)) is None


_AT_THE_BOUNDS = [
    "x" * 64,
    "x" * 65,
    "pcs_" + "a" * 60,
    "pcs_" + "a" * 61,
    "pcs_",
    "i-" + "a" * 32,
    "i-" + "a" * 33,
    "n" * 128,
    "n" * 129,
    "",
    "n\ud800",
    "é",
    "a.b_c-d",
    "pcs_abc\n",
]


@settings(max_examples=300)
@given(value=st.one_of(st.sampled_from(_AT_THE_BOUNDS), st.text(max_size=70)))
@example(value="x" * 65)
def test_a_value_the_fast_reading_matches_passes_the_check_it_stands_for(value: str) -> None:
    """A record `_AS_WRITTEN` matches is made without its checks: each of its patterns may take only what
    its check takes (a value it leaves is checked the long way)."""
    text = json.dumps(value, ensure_ascii=False)  # as the message holds it
    for pattern, check in scaling_log._MATCHED_CHECKS:
        if re.fullmatch(pattern, text):
            problems: list[Any] = []
            assert check(value, (), problems) == value, (pattern, value, problems)


# Values near what the fast reading takes: escapes, quotes, control characters, non-ASCII and lone
# surrogates, bounds, other JSON types.
_near_strings = st.one_of(
    st.sampled_from(
        [
            "pcs_abc123de45",
            "i-059b4b99b4f2e9739",
            "lca-static-1",
            "",
            'a"b',
            "a\\b",
            "a\nb",
            "a\u0001",
            "é",
            "n\ud800",
            "x" * 65,
            "pcs_abc\n",
            "/",
            "see_code",
        ]
    ),
    st.text(max_size=12),
    st.none(),
    st.integers(-2, 2),
    st.booleans(),
)
_near_times = st.one_of(
    st.sampled_from(
        [0, 1792544802000, EPOCH_MS_MAX - 1, EPOCH_MS_MAX, -1, 10**16, 10**17, 1.5e12, "1792544802000", True]
    ),
    st.integers(),
)
_near_codes = st.one_of(
    st.sampled_from(
        [*sorted(KNOWN_REASONS), *sorted(set().union(*KNOWN_REASONS.values())), "HIBERNATED", "active"]
    ),
    _near_strings,
)


def _rarely(draw: st.DrawFn) -> bool:
    return draw(st.integers(0, 5)) == 0


@st.composite
def near_records(draw: st.DrawFn) -> str:
    """A record as PCS writes it with, at times, a value or two near it, a key gone, the keys in another
    order, other separators, or one character put in or taken out."""
    near: dict[str, st.SearchStrategy[Any]] = {
        "resource_id": _near_strings,
        "resource_type": st.sampled_from(['PCS"X', "P" * 65, "PCS\\X"]),
        "event_timestamp": _near_times,
        "compute_node_group_id": _near_strings,
        "scheduler_node_id": _near_strings,
        "status_code": _near_codes,
        "reason_code": _near_codes,
        "description": st.one_of(
            st.text(max_size=8), st.sampled_from(['"status_code": "X"', "\\", "\x7f", "see_code", 'a"_code'])
        ),
    }
    near_details = {"instance_id": _near_strings, "instance_type": _near_strings, "subnet_id": _near_strings}
    record: dict[str, Any] = {
        **ARTICLE_FAILURE,
        "status_code": draw(_near_codes if _rarely(draw) else st.sampled_from(sorted(KNOWN_REASONS))),
        "reason_code": draw(st.sampled_from(sorted(set().union(*KNOWN_REASONS.values())))),
    }
    details = dict(ARTICLE_FAILURE["details"])
    for name in draw(st.lists(st.sampled_from(sorted(near)), max_size=2)):
        record[name] = draw(near[name])
    for name in draw(st.lists(st.sampled_from(sorted(near_details)), max_size=1)):
        details[name] = draw(near_details[name])
    record["details"] = details
    if _rarely(draw):
        del record[draw(st.sampled_from(sorted(record)))]
    if _rarely(draw):
        record = dict(draw(st.permutations(list(record.items()))))
    separators = draw(st.sampled_from([(",", ":"), (", ", ": ")]))
    if _rarely(draw):
        separators = draw(st.sampled_from([(",  ", ":"), (",", " : "), (",\n", ":"), (", ", ":\t")]))
    text = json.dumps(record, separators=separators, ensure_ascii=draw(st.booleans()))
    if _rarely(draw):
        at = draw(st.integers(0, len(text)))
        put = draw(st.sampled_from(["", '"', "\\", " ", ",", "}", "{", "0", "-", ".", "\n", "é", "\ufeff"]))
        text = text[:at] + put + text[at + (put == "") :]
    return text


@settings(max_examples=600)
@given(near_records())
@example(json.dumps(ARTICLE_FAILURE))
@example(
    json.dumps({**ARTICLE_FAILURE, "details": {**ARTICLE_FAILURE["details"], "instance_id": "i-1\u00e9"}})
)
@example(json.dumps({**ARTICLE_FAILURE, "event_timestamp": EPOCH_MS_MAX}))
@example(json.dumps({**ARTICLE_FAILURE, "event_timestamp": 1.5e12}))
@example(json.dumps({**ARTICLE_FAILURE, "description": 'say \\"hi\\"'}))
@example(json.dumps(ARTICLE_FAILURE)[:-1] + ', "status_code": "REGISTERED"}')
@example(
    json.dumps(
        {
            **ARTICLE_FAILURE,
            "status_code": "REGISTERED",
            "reason_code": "REGISTER_SUCCESS",
            "description": "see_code",
        }
    )
)
@example(json.dumps(ARTICLE_FAILURE).replace("lca-static-1", "lca-static\t1"))  # not JSON: raw control
@example(json.dumps(ARTICLE_FAILURE).replace("Failed To", "Failed\tTo"))
@example(json.dumps(ARTICLE_FAILURE).replace("Failed To", "Failed \\q To"))  # not JSON: no such escape
@example(json.dumps(ARTICLE_FAILURE).replace("Failed To", 'Failed \\u00e9\\" To'))
def test_the_reading_without_json_makes_what_the_parser_makes(text: str) -> None:
    same_reading(text)
