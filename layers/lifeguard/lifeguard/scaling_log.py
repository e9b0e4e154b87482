"""Records of the PCS scaling log (vended log type `PCS_SCALING_LOGS`), one JSON object per log event.

Parsing is tolerant: unknown status or reason codes are kept as they are and flagged, optional fields may
be missing, and anything that is not a scaling-log record comes back as a `ScalingLogParseError` value,
never as an exception, so one bad record cannot stop a batch.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from dataclasses import field
from typing import Any

from lifeguard._records import (
    describe_validation_error,
    load_json_object,
    read_from_json,
    reason_of,
    unique_keys,
)
from lifeguard.bounds import EPOCH_MS_MAX, ID_MAX_CHARS, INSTANCE_ID, NODE_NAME, PCS_ID, WORD
from lifeguard.schema import (
    BAD,
    Check,
    Invalid,
    Model,
    Problem,
    checked,
    integer,
    model,
    optional,
    slot_setters,
    string,
)
from lifeguard.values import frozen

__all__ = [
    "BOOTSTRAP_FAILED",
    "BOOTSTRAP_OUTCOMES",
    "BOOTSTRAP_SUCCEEDED",
    "KNOWN_PAIRS",
    "KNOWN_REASONS",
    "UNHEALTHY_TERMINATION",
    "ScalingLogDetails",
    "ScalingLogParseError",
    "ScalingLogRecord",
    "is_known_pair",
    "parse_scaling_log_record",
    "passed_over",
    "read_scaling_log_message",
]

# The two outcomes of a boot, as (status, reason): the one rule for which records count as outcomes.
BOOTSTRAP_FAILED = ("TERMINATED", "BOOTSTRAP_FAILED")
BOOTSTRAP_SUCCEEDED = ("ACTIVE", "BOOTSTRAP_SUCCESS")
BOOTSTRAP_OUTCOMES = frozenset({BOOTSTRAP_FAILED, BOOTSTRAP_SUCCEEDED})
# A node PCS found unhealthy and replaced: a loop of these on fresh instances is a `replacement` loop.
UNHEALTHY_TERMINATION = ("TERMINATED", "UNHEALTHY_NODE")
# The same pairs apart, for the records' predicates (read for every record of a batch: no tuple made).
_FAILED_STATUS, _FAILED_REASON = BOOTSTRAP_FAILED
_SUCCEEDED_STATUS, _SUCCEEDED_REASON = BOOTSTRAP_SUCCEEDED
_UNHEALTHY_STATUS, _UNHEALTHY_REASON = UNHEALTHY_TERMINATION

# The status/reason pairs PCS documents for its scaling log.
KNOWN_REASONS: Mapping[str, frozenset[str]] = {
    "LAUNCHED": frozenset({"SCHEDULER_REQUESTED", "MAINTAIN_MIN_CAPACITY"}),
    "REGISTERED": frozenset({"REGISTER_SUCCESS"}),
    "ACTIVE": frozenset({"BOOTSTRAP_SUCCESS"}),
    "PENDING_REPLACEMENT": frozenset({"NODE_GROUP_UPDATE", "EC2_HEALTH_CHECK_FAILED", "EC2_SCHEDULED_EVENT"}),
    "LAUNCH_FAILED": frozenset({"INSUFFICIENT_CAPACITY", "LIMIT_EXCEEDED", "LAUNCH_ERROR"}),
    "TERMINATED": frozenset(
        {
            "SCHEDULER_REQUESTED",
            "UNHEALTHY_NODE",
            "BOOTSTRAP_FAILED",
            "EXTERNALLY_TERMINATED",
            "REPLACEMENT_REQUESTED",
            "NODE_GROUP_DELETION",
        }
    ),
    "TERMINATE_FAILED": frozenset({"EC2_OPERATION_NOT_PERMITTED", "EC2_ERROR"}),
}

# The documented pairs that the detection never reads: no launch, no outcome, no unhealthy termination, no
# launch failure (which is counted and logged). Most of a healthy cluster's log is these.
PASSED_OVER = frozenset(
    (status, reason)
    for status, reasons in KNOWN_REASONS.items()
    if status not in ("LAUNCHED", "LAUNCH_FAILED")
    for reason in reasons
    if (status, reason) not in BOOTSTRAP_OUTCOMES and (status, reason) != UNHEALTHY_TERMINATION
)
# A key and its string value as JSON writes them; inside a JSON string a quote is escaped, so a match is a
# real key (of the record, or of an object nested in it: then there are two, and the filter stands aside).
_STATUS_KEY = re.compile(r'"status_code"\s*:\s*"([A-Z0-9_]{1,64})"')
_REASON_KEY = re.compile(r'"reason_code"\s*:\s*"([A-Z0-9_]{1,64})"')

_RAW_EXCERPT_CHARS = 200

# A record as PCS writes it: its keys in PCS's order, each once (`description` may be left out), with
# JSON's separators written compact or with one space. Each value kept is a string holding no quote,
# backslash or control character, so the text matched is exactly the string JSON decodes from it; the time
# is an integer JSON writes; the description is passed over as any JSON string (runs of plain characters
# between escapes). A record in any other form (keys in another order, an escape in a value kept, a null, a
# float) is read the way of `json.loads`. The names and the details are matched only as their checks take
# them (`_MATCHED_CHECKS`): a match needs no check run, and anything else is checked the long way.
_TEXT = r'"([^"\\\x00-\x1f]*)"'
# What PCS_ID, WORD, NODE_NAME and INSTANCE_ID take, in a JSON string without escapes: a WORD is at most 64
# characters, none a lone surrogate (no UTF-8 holds one: the check refuses it).
_PCS_ID_TEXT = f'"(pcs_[a-zA-Z0-9]{{1,{ID_MAX_CHARS - 4}}})"'
_WORD_TEXT = r'"([^"\\\x00-\x1f\ud800-\udfff]{0,64})"'
_NODE_NAME_TEXT = r'"([A-Za-z0-9._-]{1,128})"'
_INSTANCE_ID_TEXT = r'"(i-[A-Za-z0-9]{1,32})"'
# Each of those with the check it stands for (the tests hold every match to its check).
_MATCHED_CHECKS = (
    (_PCS_ID_TEXT, PCS_ID),
    (_WORD_TEXT, WORD),
    (_NODE_NAME_TEXT, NODE_NAME),
    (_INSTANCE_ID_TEXT, INSTANCE_ID),
)
_ANY_TEXT = r'"[^"\\\x00-\x1f]*(?:\\(?:["\\/bfnrt]|u[0-9A-Fa-f]{4})[^"\\\x00-\x1f]*)*"'


def _object(*members: str) -> str:
    return r"\{" + ", ?".join(members) + r"\}"


def _member(name: str, value: str) -> str:
    return f'"{name}": ?{value}'


_AS_WRITTEN = re.compile(
    _object(
        _member("resource_id", _PCS_ID_TEXT),
        _member("resource_type", _WORD_TEXT),
        _member("event_timestamp", "(0|[1-9][0-9]{0,15})"),
        _member("compute_node_group_id", _PCS_ID_TEXT),
        _member("scheduler_node_id", _NODE_NAME_TEXT),
        _member("status_code", _TEXT),
        _member("reason_code", _TEXT) + f"(?:, ?{_member('description', _ANY_TEXT)})?",
        _member(
            "details",
            _object(
                _member("instance_id", _INSTANCE_ID_TEXT),
                _member("instance_type", _WORD_TEXT),
                _member("subnet_id", _WORD_TEXT),
            ),
        ),
    )
).fullmatch

# Codes are PCS's upper-case words; an unknown one is kept (and counted), a 600 KB one is not a code.
CODE: Check = string(min_length=1, max_length=64, pattern=r"^[A-Za-z0-9_]+$")


# Every (status, reason) PCS documents, and each documented status without a reason.
KNOWN_PAIRS = frozenset(
    [(status, reason) for status, reasons in KNOWN_REASONS.items() for reason in reasons]
    + [(status, None) for status in KNOWN_REASONS]
)


def is_known_pair(status_code: str, reason_code: str | None) -> bool:
    """True when PCS documents the status code and, if given, the reason code with it."""
    return (status_code, reason_code) in KNOWN_PAIRS


@checked(instance_id=optional(INSTANCE_ID), instance_type=optional(WORD), subnet_id=optional(WORD))
@frozen(slots=True, kw_only=True)
class ScalingLogDetails(Model):
    """The instance a record is about; every key is optional (and bounded: `lifeguard.bounds`)."""

    instance_id: str | None = None
    instance_type: str | None = None
    subnet_id: str | None = None


# Strict, as every check is: a time sent as text, or a float, is a broken record, not one to guess at.
@checked(
    event_timestamp=integer(ge=0, lt=EPOCH_MS_MAX),
    status_code=CODE,
    reason_code=optional(CODE),
    resource_id=optional(PCS_ID),
    resource_type=optional(WORD),
    compute_node_group_id=optional(PCS_ID),
    scheduler_node_id=optional(NODE_NAME),
    details=model(ScalingLogDetails),
)
@frozen(slots=True, kw_only=True)
class ScalingLogRecord(Model):
    """One node state transition of a PCS cluster. Every field Lifeguard reads is bounded
    (`lifeguard.bounds`); fields it does not read, such as `description`, are not kept."""

    event_timestamp: int  # epoch milliseconds
    status_code: str
    reason_code: str | None = None
    resource_id: str | None = None
    resource_type: str | None = None
    compute_node_group_id: str | None = None
    scheduler_node_id: str | None = None
    details: ScalingLogDetails = field(default_factory=ScalingLogDetails)

    @property
    def cluster_id(self) -> str | None:
        """The cluster the record belongs to (`resource_id` of a PCS_CLUSTER record)."""
        return self.resource_id

    @property
    def instance_id(self) -> str | None:
        """The EC2 instance of the record, when it names one."""
        return self.details.instance_id

    @property
    def unknown_codes(self) -> tuple[str, ...]:
        """Codes PCS does not document (empty for a known pair), e.g. `status_code=HIBERNATED`."""
        reasons = KNOWN_REASONS.get(self.status_code)
        if reasons is None:
            return (f"status_code={self.status_code}",)
        if self.reason_code is not None and self.reason_code not in reasons:
            return (f"reason_code={self.reason_code}",)
        return ()

    @property
    def is_known(self) -> bool:
        """True when both codes are ones PCS documents."""
        return is_known_pair(self.status_code, self.reason_code)

    @property
    def is_bootstrap_failure(self) -> bool:
        """TERMINATED/BOOTSTRAP_FAILED: a lifecycle script (or PCS's own setup) failed the boot."""
        return self.reason_code == _FAILED_REASON and self.status_code == _FAILED_STATUS

    @property
    def is_bootstrap_success(self) -> bool:
        """ACTIVE/BOOTSTRAP_SUCCESS: the node finished bootstrapping and joined Slurm."""
        return self.reason_code == _SUCCEEDED_REASON and self.status_code == _SUCCEEDED_STATUS

    @property
    def is_unhealthy_termination(self) -> bool:
        """TERMINATED/UNHEALTHY_NODE: PCS replaced a node it found unhealthy (maybe a drained static one)."""
        return self.reason_code == _UNHEALTHY_REASON and self.status_code == _UNHEALTHY_STATUS

    @property
    def is_launch_failure(self) -> bool:
        """LAUNCH_FAILED/*: capacity, quota or launch errors, never a script's fault."""
        return self.status_code == "LAUNCH_FAILED"


@frozen
class ScalingLogParseError:
    """A log event that is not a scaling-log record: what is wrong (`reason`, short, for counting;
    `message`, in full), where, and an excerpt of it."""

    message: str
    excerpt: str
    where: str | None = None
    reason: str = "not a scaling-log record"

    def __str__(self) -> str:
        prefix = f"{self.where}: " if self.where else ""
        return f"{prefix}{self.message}"


def passed_over(raw: str) -> bool:
    """True when the message is, beyond doubt, a record of a pair the detection never reads (`PASSED_OVER`):
    it is ignored without being validated, since nothing of it is used or stored. A message holding either
    key other than exactly once, or a pair that is not passed over, is left to the parser (False), as is
    one whose pair JSON does not read as its own keys (a nested object's, a cut record, no object at all):
    no record, it is skipped and counted. The handler asks only of a message not as PCS writes one
    (`_AS_WRITTEN`), so the JSON read costs nothing on the way of real records."""
    statuses = _STATUS_KEY.findall(raw)
    if len(statuses) != 1:
        return False
    reasons = _REASON_KEY.findall(raw)
    pair = (statuses[0], reasons[0]) if len(reasons) == 1 else None
    if pair not in PASSED_OVER or not _two_codes(raw):
        return False
    try:
        data = json.loads(raw, object_pairs_hook=unique_keys)
    except (ValueError, RecursionError):
        return False
    return type(data) is dict and (data.get("status_code"), data.get("reason_code")) == pair


def _two_codes(raw: str) -> bool:
    """Two `_code"` in all: no second status or reason key whose value is not a string the patterns read
    (and, as the filter cannot tell, no value ending in `_code`), and no `\\u` escape, which could spell a
    key the patterns do not see (`"reason\\u005fcode"`, which JSON reads as a second `reason_code`)."""
    return raw.count('_code"') == 2 and "\\u" not in raw


def read_scaling_log_message(
    raw: str, *, where: str | None = None
) -> ScalingLogRecord | ScalingLogParseError | None:
    """One log event's message as the handler reads it: None when it is `passed_over`, else what
    `parse_scaling_log_record` makes of it. A record as PCS writes it (`_AS_WRITTEN`) is read without
    `json.loads`: its values are the ones JSON decodes, matched only as their checks take them, so it comes
    out as the parser would make it, for about the cost of `json.loads` alone."""
    found = _AS_WRITTEN(raw)
    if found is None:
        return None if passed_over(raw) else parse_scaling_log_record(raw, where=where)
    cluster, kind, at, group, node, status, reason, instance, instance_type, subnet = found.groups()
    if (status, reason) in PASSED_OVER:  # as `passed_over` says, so the same records are ignored
        return None if _two_codes(raw) else parse_scaling_log_record(raw, where=where)
    at_ms = int(at)
    if at_ms >= EPOCH_MS_MAX or status not in _DOCUMENTED_CODES or reason not in _DOCUMENTED_CODES:
        return parse_scaling_log_record(raw, where=where)
    # Every value matched as its check takes it (`_MATCHED_CHECKS`): made without running the checks.
    return _made(at_ms, status, reason, (cluster, kind, group, node), (instance, instance_type, subnet))


def parse_scaling_log_record(
    raw: str | bytes | Mapping[str, Any], *, where: str | None = None
) -> ScalingLogRecord | ScalingLogParseError:
    """Parse one log event's message; `where` (e.g. `stream:event-id`) is kept for the error. The one
    way records are parsed: the handler (through `read_scaling_log_message`), replays and tests all come
    through here, but for the records `_AS_WRITTEN` reads."""
    if type(raw) is str:  # the way of nearly every record: as PCS writes it, read at once
        try:
            record = _as_pcs_writes_it(json.loads(raw, object_pairs_hook=unique_keys))
        except (ValueError, RecursionError):
            record = None  # not JSON: `load_json_object` says why
        if record is not None:
            return record
    data = load_json_object(raw)
    if isinstance(data, str):
        return ScalingLogParseError(data, _excerpt(raw), where, reason_of(data))
    record = _as_pcs_writes_it(data)
    if record is not None:
        return record
    try:
        return ScalingLogRecord.model_validate(data)
    except Invalid as exc:
        found = read_from_json(exc) if isinstance(raw, str | bytes) else exc
        message = f"not a scaling-log record: {describe_validation_error(found)}"
        return ScalingLogParseError(message, _excerpt(raw), where, reason_of(found))


# Every code PCS documents: each passes the CODE check, so a record using only these needs no pattern run.
_DOCUMENTED_CODES = frozenset(
    code for status, reasons in KNOWN_REASONS.items() for code in (status, *reasons)
)
_NO_DETAILS = ScalingLogDetails()  # frozen: one serves every record without details


_AT, _STATUS, _REASON, _CLUSTER, _KIND, _GROUP, _NODE, _DETAILS = slot_setters(
    ScalingLogRecord,
    "event_timestamp",
    "status_code",
    "reason_code",
    "resource_id",
    "resource_type",
    "compute_node_group_id",
    "scheduler_node_id",
    "details",
)
_INSTANCE, _INSTANCE_TYPE, _SUBNET = slot_setters(
    ScalingLogDetails, "instance_id", "instance_type", "subnet_id"
)


def _as_pcs_writes_it(data: Mapping[str, Any]) -> ScalingLogRecord | None:
    """The record, built at once, when it is as PCS writes one: an int time within bounds, documented codes
    and values that pass their checks; None for anything else, which `ScalingLogRecord.model_validate` then
    takes or reports on. The same checks in both ways, so both take exactly the same records; this one is
    the way of nearly every record, and costs a third as much."""
    if type(data) is not dict:
        return None
    at = data.get("event_timestamp")
    status = data.get("status_code")
    reason = data.get("reason_code")
    if type(at) is not int or type(status) is not str or not (reason is None or type(reason) is str):
        return None
    raw_details = data.get("details", BAD)
    details: tuple[Any, Any, Any] | None
    if raw_details is BAD:
        details = None
    elif type(raw_details) is dict:
        details = (
            raw_details.get("instance_id"),
            raw_details.get("instance_type"),
            raw_details.get("subnet_id"),
        )
    else:
        return None
    names = (
        data.get("resource_id"),
        data.get("resource_type"),
        data.get("compute_node_group_id"),
        data.get("scheduler_node_id"),
    )
    return _built(at, status, reason, names, details)


def _built(
    at: int,
    status: str,
    reason: str | None,
    names: tuple[Any, Any, Any, Any],
    details: tuple[Any, Any, Any] | None,
) -> ScalingLogRecord | None:
    """The record of values read as JSON would read them (`names`: the cluster, its kind, the group and the
    node; `details`: its three keys, or None when the record has none), if each passes its check; None
    otherwise."""
    if not 0 <= at < EPOCH_MS_MAX or status not in _DOCUMENTED_CODES:
        return None
    if not (reason is None or reason in _DOCUMENTED_CODES):
        return None
    cluster, kind, group, node = names
    problems: list[Problem] = []  # unread: a problem sends the record to the full check
    if (
        (cluster is not None and PCS_ID(cluster, (), problems) is BAD)
        or (kind is not None and WORD(kind, (), problems) is BAD)
        or (group is not None and PCS_ID(group, (), problems) is BAD)
        or (node is not None and NODE_NAME(node, (), problems) is BAD)
    ):
        return None
    if details is not None:
        instance, instance_type, subnet = details
        if (
            (instance is not None and INSTANCE_ID(instance, (), problems) is BAD)
            or (instance_type is not None and WORD(instance_type, (), problems) is BAD)
            or (subnet is not None and WORD(subnet, (), problems) is BAD)
        ):
            return None
    return _made(at, status, reason, names, details)


def _made(
    at: int,
    status: str,
    reason: str | None,
    names: tuple[Any, Any, Any, Any],
    details: tuple[Any, Any, Any] | None,
) -> ScalingLogRecord:
    """The record of values that passed their checks (`_built`'s arguments), filled in as `__init__`
    would."""
    cluster, kind, group, node = names
    if details is None:
        made = _NO_DETAILS
    else:
        made = object.__new__(ScalingLogDetails)
        _INSTANCE(made, details[0])
        _INSTANCE_TYPE(made, details[1])
        _SUBNET(made, details[2])
    record = object.__new__(ScalingLogRecord)
    _AT(record, at)
    _STATUS(record, status)
    _REASON(record, reason)
    _CLUSTER(record, cluster)
    _KIND(record, kind)
    _GROUP(record, group)
    _NODE(record, node)
    _DETAILS(record, made)
    return record


def _excerpt(raw: str | bytes | Mapping[str, Any]) -> str:
    if isinstance(raw, bytes):
        text = raw.decode("utf-8", "replace")
    elif isinstance(raw, str):
        text = raw
    else:
        text = json.dumps(raw, default=str)
    return text if len(text) <= _RAW_EXCERPT_CHARS else text[: _RAW_EXCERPT_CHARS - 1] + "…"
