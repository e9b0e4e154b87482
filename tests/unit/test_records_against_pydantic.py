"""The record classes of `scaling_log` and `node_report` take and refuse exactly what their pydantic models
took and refused, with the same problems (where, kind, message), and their parsers give the same records
and the same skip reasons and error lines.

The pydantic models below are the reference: the definitions the layer had, kept here as they were
(pydantic is a test dependency only). Records are made by mutating valid ones: values of the wrong type,
integers just beyond a bound, bools for integers, long and odd strings (a trailing newline, a space, a
character beyond ASCII), keys missing, unknown keys, a broken `details`.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Annotated, Any, Literal

import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st
from pydantic import BaseModel, ConfigDict, Field, StringConstraints, ValidationError, field_validator

from lifeguard import node_report, scaling_log
from lifeguard.bounds import (
    EPOCH_MS_MAX,
    EPOCH_S_MAX,
    ID_MAX_CHARS,
    INSTANCE_ID_PATTERN,
    NODE_NAME_PATTERN,
    PCS_ID_PATTERN,
    pcs_pattern,
)
from lifeguard.lifecycle import OnError, StageName
from lifeguard.node.layout import output_tail
from lifeguard.node_report import NodeReportParseError, parse_node_report
from lifeguard.scaling_log import ScalingLogParseError, parse_scaling_log_record
from lifeguard.schema import Invalid, Model

# --- The reference: the pydantic models and parsers as they were (same class names, since pydantic's
# messages name them) --------------------------------------------------------------------------------

# A scaling-log record and a node report name their cluster and group by id alone, never by name (a name
# would be another key: another state, episode and rails for the same group). PCS writes ids.
PcsId = Annotated[str, StringConstraints(max_length=ID_MAX_CHARS, pattern=PCS_ID_PATTERN)]
InstanceId = Annotated[str, StringConstraints(pattern=INSTANCE_ID_PATTERN)]
NodeName = Annotated[str, StringConstraints(pattern=NODE_NAME_PATTERN)]
ScriptName = Annotated[
    str, StringConstraints(max_length=64, pattern=pcs_pattern("NodeLifecycleScriptNameString"))
]
Code = Annotated[str, StringConstraints(min_length=1, max_length=64, pattern=r"^[A-Za-z0-9_]+$")]
Word = Annotated[str, StringConstraints(max_length=64)]


class ScalingLogDetails(BaseModel):
    model_config = ConfigDict(frozen=True, extra="ignore", strict=True)

    instance_id: InstanceId | None = None
    instance_type: Word | None = None
    subnet_id: Word | None = None


class ScalingLogRecord(BaseModel):
    model_config = ConfigDict(frozen=True, extra="ignore", strict=True)

    event_timestamp: int = Field(ge=0, lt=EPOCH_MS_MAX, description="epoch milliseconds")
    status_code: Code
    reason_code: Code | None = None
    resource_id: PcsId | None = None
    resource_type: Word | None = None
    compute_node_group_id: PcsId | None = None
    scheduler_node_id: NodeName | None = None
    details: ScalingLogDetails = Field(default_factory=ScalingLogDetails)


class NodeReport(BaseModel):
    model_config = ConfigDict(frozen=True, extra="ignore", strict=True)

    kind: Literal["script_run"] = "script_run"
    cluster_id: PcsId
    compute_node_group_id: PcsId
    instance_id: InstanceId
    node_id: NodeName | None = None
    boot: int = Field(ge=1, le=1_000_000)
    first_boot: bool
    stage: StageName
    script: ScriptName
    on_error: OnError
    exit_code: int | None = Field(default=None, ge=-(2**31), lt=2**31)
    outcome: Literal["succeeded", "failed", "skipped"]
    started_at: int = Field(ge=0, lt=EPOCH_S_MAX)
    ended_at: int | None = Field(default=None, ge=0, lt=EPOCH_S_MAX)
    log_tail: str = Field(default="")
    script_sha256: str | None = Field(default=None, pattern=r"^[0-9a-f]{64}$")

    @field_validator("log_tail")
    @classmethod
    def _keep_tail(cls, value: str) -> str:
        return output_tail(value)


def _old_reason(problem: str | ValidationError) -> str:
    if isinstance(problem, str):
        return problem.split(" (", 1)[0]
    first = problem.errors()[0]
    location = ".".join(str(part) for part in first["loc"])
    if first["type"] == "json_invalid":
        return "not JSON"
    if not location:
        return "not a JSON object"
    return f"{'missing' if first['type'] == 'missing' else 'invalid'} {location}"


def _old_describe(exc: ValidationError) -> str:
    errors = exc.errors()
    first = errors[0]
    location = ".".join(str(part) for part in first["loc"])
    more = f" (and {len(errors) - 1} more)" if len(errors) > 1 else ""
    return f"{location}: {first['msg']}{more}" if location else f"{first['msg']}{more}"


def _old_load(raw: str | bytes | Mapping[str, Any]) -> Mapping[str, Any] | str:
    data: object = raw
    if isinstance(raw, str | bytes):
        try:
            data = json.loads(raw)
        except (ValueError, RecursionError) as exc:
            return f"not JSON ({str(exc)[:100]})"
    if not isinstance(data, Mapping):
        return "not a JSON object"
    return data


def _old_excerpt(raw: str | bytes | Mapping[str, Any]) -> str:
    if isinstance(raw, bytes):
        text = raw.decode("utf-8", "replace")
    elif isinstance(raw, str):
        text = raw
    else:
        text = json.dumps(raw, default=str)
    return text if len(text) <= 200 else text[:199] + "…"


def old_parse_scaling_log_record(raw: str | bytes | Mapping[str, Any]) -> Any:
    """`parse_scaling_log_record` as it was: pydantic's validator on the text, else json.loads."""
    if isinstance(raw, str | bytes):
        try:
            return ScalingLogRecord.__pydantic_validator__.validate_json(raw)
        except ValidationError as exc:
            if _old_reason(exc) not in {"not JSON", "not a JSON object"}:
                message = f"not a scaling-log record: {_old_describe(exc)}"
                return ScalingLogParseError(message, _old_excerpt(raw), None, _old_reason(exc))
        except (ValueError, RecursionError):
            pass
    data = _old_load(raw)
    if isinstance(data, str):
        return ScalingLogParseError(data, _old_excerpt(raw), None, _old_reason(data))
    try:
        return ScalingLogRecord.model_validate(data)
    except ValidationError as exc:
        message = f"not a scaling-log record: {_old_describe(exc)}"
        return ScalingLogParseError(message, _old_excerpt(raw), None, _old_reason(exc))


def old_parse_node_report(raw: str | bytes | Mapping[str, Any]) -> Any:
    """`parse_node_report` as it was."""
    data = _old_load(raw)
    if isinstance(data, str):
        return NodeReportParseError(data, None, _old_reason(data))
    if data.get("kind") != "script_run":
        return NodeReportParseError("kind", None)  # decided before the model, by code kept as it was
    try:
        return NodeReport.model_validate(data)
    except ValidationError as exc:
        return NodeReportParseError(f"not a node report: {_old_describe(exc)}", None, _old_reason(exc))


# --- Records, valid and mutated ---------------------------------------------------------------------

CLUSTER_IDS = st.sampled_from(["pcs_abc123de45", "pcs_a", "lca-cluster", "Abc"]) | st.from_regex(
    r"pcs_[a-zA-Z0-9]{1,59}", fullmatch=True
)
GROUP_IDS = st.sampled_from(["pcs_abcdef01", "lca-static", "G-1"]) | st.from_regex(
    r"[A-Za-z][A-Za-z0-9-]{2,25}", fullmatch=True
)
PCS_IDS = st.sampled_from(["pcs_abc123de45", "pcs_abcdef01", "pcs_a"]) | st.from_regex(
    r"pcs_[a-zA-Z0-9]{1,60}", fullmatch=True
)
INSTANCE_IDS = st.sampled_from(["i-059b4b99b4f2e9739", "i-1"]) | st.from_regex(
    r"i-[A-Za-z0-9]{1,32}", fullmatch=True
)
NODE_NAMES = st.sampled_from(["lca-static-1", "a"]) | st.from_regex(r"[A-Za-z0-9._-]{1,128}", fullmatch=True)
CODES = st.sampled_from(["TERMINATED", "BOOTSTRAP_FAILED", "ACTIVE", "x"]) | st.from_regex(
    r"[A-Za-z0-9_]{1,64}", fullmatch=True
)
WORDS = st.text(max_size=64)
SCRIPTS = st.sampled_from(["fail-terminate", "mount fsx", "a"]) | st.from_regex(
    r"[A-Za-z0-9][A-Za-z0-9 _-]{0,63}", fullmatch=True
)
SHA256 = st.from_regex(r"[0-9a-f]{64}", fullmatch=True)


MISSING = object()


def optional_key(value: st.SearchStrategy[Any], *, none: bool = True) -> st.SearchStrategy[Any]:
    """A value, None (when allowed), or the key left out (`MISSING`)."""
    choices = [value, st.just(MISSING)]
    if none:
        choices.append(st.none())
    return st.one_of(*choices)


def record_of(**strategies: st.SearchStrategy[Any]) -> st.SearchStrategy[dict[str, Any]]:
    return st.fixed_dictionaries(strategies).map(
        lambda record: {key: value for key, value in record.items() if value is not MISSING}
    )


VALID_DETAILS = record_of(
    instance_id=optional_key(INSTANCE_IDS),
    instance_type=optional_key(WORDS),
    subnet_id=optional_key(WORDS),
    az=optional_key(st.text(max_size=8), none=False),
)
VALID_SCALING_LOG_RECORDS = record_of(
    event_timestamp=st.integers(0, EPOCH_MS_MAX - 1),
    status_code=CODES,
    reason_code=optional_key(CODES),
    resource_id=optional_key(CLUSTER_IDS),
    resource_type=optional_key(WORDS),
    compute_node_group_id=optional_key(GROUP_IDS),
    scheduler_node_id=optional_key(NODE_NAMES),
    description=optional_key(st.text(max_size=40), none=False),
    details=optional_key(VALID_DETAILS, none=False),
)
VALID_NODE_REPORTS = record_of(
    kind=optional_key(st.just("script_run"), none=False),
    cluster_id=PCS_IDS,
    compute_node_group_id=PCS_IDS,
    instance_id=INSTANCE_IDS,
    node_id=optional_key(NODE_NAMES),
    boot=st.integers(1, 1_000_000),
    first_boot=st.booleans(),
    stage=st.sampled_from(["nodeBootstrapped", "nodeReady"]),
    script=SCRIPTS,
    on_error=st.sampled_from(["TERMINATE", "STOP_SEQUENCE", "CONTINUE"]),
    exit_code=optional_key(st.integers(-(2**31), 2**31 - 1)),
    outcome=st.sampled_from(["succeeded", "failed", "skipped"]),
    started_at=st.integers(0, EPOCH_S_MAX - 1),
    ended_at=optional_key(st.integers(0, EPOCH_S_MAX - 1)),
    log_tail=optional_key(st.text(max_size=20) | st.just("é" * 2100 + "END"), none=False),
    script_sha256=optional_key(SHA256),
)

EDGE_INTEGERS = st.sampled_from(
    [
        -(2**31) - 1,
        -(2**31),
        -1,
        0,
        1,
        1_000_000,
        1_000_001,
        2**31 - 1,
        2**31,
        EPOCH_S_MAX - 1,
        EPOCH_S_MAX,
        EPOCH_MS_MAX - 1,
        EPOCH_MS_MAX,
        2**63,
        10**30,
    ]
)
ODD_STRINGS = st.one_of(
    st.sampled_from(
        ["", " ", "\n", "x", "1", "_", "-", "pcs_", "i-", "i-1\n", "TERMINATED\n", "script_run "]
    ),
    st.sampled_from(["A" * 64, "A" * 65, "a" * 128, "a" * 129, "pcs_" + "a" * 60, "pcs_" + "a" * 61]),
    st.sampled_from(["nodeReady", "TERMINATE", "failed", "é", "Ⅻ", "i-٣", "a\u0301", "\x00", "a#b", "a b"]),
    st.sampled_from(["\ud800", "i-1\udfff", "pcs_abc\ud83d"]),  # lone surrogates: text UTF-8 cannot hold
    st.text(max_size=70),
)
ODD_VALUES = st.one_of(
    st.none(),
    st.booleans(),
    EDGE_INTEGERS,
    st.integers(),
    st.floats(allow_nan=False, allow_infinity=False),
    st.sampled_from([1.0, 0.0, 1.5, -0.0]),
    ODD_STRINGS,
    st.sampled_from([[], [1], {}, {"instance_id": "i-1"}, {"instance_id": 5}]),
)
# A suffix or prefix that takes a valid string out of its pattern, or to its length's edge.
ODD_AFFIXES = st.sampled_from(
    ["\n", "\r", " ", "\t", "#", "é", "\x00", "-", ".", "_", "A" * 64, "a" * 130, "\ud800"]
)


@st.composite
def mutated(draw: st.DrawFn, valid: st.SearchStrategy[dict[str, Any]], keys: list[str]) -> dict[str, Any]:
    """A valid record with one to three things changed (in `details` too, when it has one)."""
    record = draw(valid)
    for _ in range(draw(st.integers(1, 3))):
        target = record
        if "details" in keys and draw(st.booleans()) and isinstance(record.get("details"), dict):
            target = record["details"] = dict(record["details"])
            choices = ["instance_id", "instance_type", "subnet_id", "other"]
        else:
            choices = [*keys, "other"]
        key = draw(st.sampled_from(choices))
        change = draw(st.sampled_from(["odd value", "affix", "drop", "extra"]))
        if change == "odd value":
            target[key] = draw(ODD_VALUES)
        elif change == "affix" and isinstance(target.get(key), str):
            affix = draw(ODD_AFFIXES)
            target[key] = affix + target[key] if draw(st.booleans()) else target[key] + affix
        elif change == "drop":
            target.pop(key, None)
        else:
            target[draw(st.sampled_from(["extra", "description", "kind_", "details_"]))] = draw(ODD_VALUES)
    return record


SCALING_LOG_KEYS = [
    "event_timestamp",
    "status_code",
    "reason_code",
    "resource_id",
    "resource_type",
    "compute_node_group_id",
    "scheduler_node_id",
    "details",
]
NODE_REPORT_KEYS = [
    "kind",
    "cluster_id",
    "compute_node_group_id",
    "instance_id",
    "node_id",
    "boot",
    "first_boot",
    "stage",
    "script",
    "on_error",
    "exit_code",
    "outcome",
    "started_at",
    "ended_at",
    "log_tail",
    "script_sha256",
]
SCALING_LOG_RECORDS = VALID_SCALING_LOG_RECORDS | mutated(VALID_SCALING_LOG_RECORDS, SCALING_LOG_KEYS)
NODE_REPORTS = VALID_NODE_REPORTS | mutated(VALID_NODE_REPORTS, NODE_REPORT_KEYS)


# --- The comparison ---------------------------------------------------------------------------------


def _theirs(reference: type[BaseModel], data: object) -> tuple[str, Any]:
    try:
        return "taken", reference.model_validate(data).model_dump()
    except ValidationError as exc:
        return "refused", [(e["loc"], e["type"], e["msg"]) for e in exc.errors()]


def _ours(cls: type[Model], data: object) -> tuple[str, Any]:
    try:
        return "taken", cls.model_validate(data).model_dump()
    except Invalid as exc:
        return "refused", [(e["loc"], e["type"], e["msg"]) for e in exc.errors()]


def _parsed(result: object) -> tuple[str, Any]:
    """A parser's answer as plain values: the record's fields, or the error's."""
    if isinstance(result, BaseModel | Model):
        return "record", result.model_dump()
    return "error", vars(result)


def _same_problems(ours: tuple[str, Any], theirs: tuple[str, Any], data: object) -> None:
    # Every problem the same: where, kind and message, in the same order (the first is what a skip
    # reason and an error line are made of).
    assert ours == theirs, data


@settings(max_examples=600)
@given(SCALING_LOG_RECORDS)
# Found by Hypothesis: too long and not Unicode is refused as not Unicode, as pydantic reads before it counts.
@example({"event_timestamp": 0, "status_code": "TERMINATED", "reason_code": "A" * 64 + "\ud800"})
def test_scaling_log_records_are_taken_and_refused_as_pydantic_did(data: dict[str, Any]) -> None:
    _same_problems(_ours(scaling_log.ScalingLogRecord, data), _theirs(ScalingLogRecord, data), data)


@settings(max_examples=600)
@given(NODE_REPORTS)
def test_node_reports_are_taken_and_refused_as_pydantic_did(data: dict[str, Any]) -> None:
    _same_problems(_ours(node_report.NodeReport, data), _theirs(NodeReport, data), data)


@settings(max_examples=300)
@given(SCALING_LOG_RECORDS, st.booleans(), st.booleans())
def test_a_scaling_log_message_parses_into_what_it_did(
    data: dict[str, Any], compact: bool, raw: bool
) -> None:
    """From text (as the handler reads it, where pydantic validated the JSON itself) and from a dict."""
    text = json.dumps(data, separators=(",", ":") if compact else None)
    message: str | bytes = text.encode() if raw else text
    ours, theirs = _parsed(parse_scaling_log_record(message)), _parsed(old_parse_scaling_log_record(message))
    if "\\ud" in text and theirs[0] == "error":
        # pydantic's JSON reader refused a lone surrogate's escape anywhere in the text, and the old
        # parser then read it again as Python values, whose wording it used (`a valid dictionary or
        # instance of …`); a message is now worded as JSON names its values whatever it holds.
        assert (ours[0], ours[1]["reason"]) == (theirs[0], theirs[1]["reason"])
    else:
        assert ours == theirs
    assert _parsed(parse_scaling_log_record(data)) == _parsed(old_parse_scaling_log_record(data))


@settings(max_examples=300)
@given(NODE_REPORTS, st.booleans())
def test_a_node_report_parses_into_what_it_did(data: dict[str, Any], as_text: bool) -> None:
    raw: str | dict[str, Any] = json.dumps(data) if as_text else data
    ours, theirs = _parsed(parse_node_report(raw)), _parsed(old_parse_node_report(raw))
    if data.get("kind") != "script_run":  # refused before either model looks at it
        assert ours[0] == theirs[0] == "error"
        return
    assert ours == theirs


@pytest.mark.parametrize(
    "text",
    [
        '{"event_timestamp": 5, "status_code": "X", "details": "i-1"}',
        '{"event_timestamp": 5, "status_code": "X", "details": null}',
        '{"event_timestamp": 5, "status_code": "X", "details": []}',
        '{"event_timestamp": 5.0, "status_code": "X\\n"}',
        '{"event_timestamp": 5, "status_code": "X", "details": {"instance_id": "i-1\\n"}}',
        '{"status_code": "TERMINATED"}',
        "[1, 2]",
        "null",
        "{not json",
        '{"a": 1',
        "",
    ],
)
def test_messages_the_handler_has_always_skipped_say_what_they_said(text: str) -> None:
    assert _parsed(parse_scaling_log_record(text)) == _parsed(old_parse_scaling_log_record(text))


@pytest.mark.parametrize(
    "value", ["TERMINATED\n", "i-1\n", "pcs_abc\n", "lca-static-1\n", "fail-terminate\n", "a" * 64 + "\n"]
)
def test_a_trailing_newline_is_not_part_of_any_pattern(value: str) -> None:
    """pydantic's patterns (Rust's regex) end at the end of the text; Python's `$` also matches before a
    final newline, which must not let `TERMINATED\\n` through as a code."""
    record = {"event_timestamp": 1, "status_code": "X", "resource_id": value, "scheduler_node_id": value}
    assert _ours(scaling_log.ScalingLogRecord, record) == _theirs(ScalingLogRecord, record)
    for key in ("status_code", "reason_code"):
        assert _ours(scaling_log.ScalingLogRecord, {**record, key: value}) == _theirs(
            ScalingLogRecord, {**record, key: value}
        )
    details = {"event_timestamp": 1, "status_code": "X", "details": {"instance_id": value}}
    assert _ours(scaling_log.ScalingLogRecord, details) == _theirs(ScalingLogRecord, details)
