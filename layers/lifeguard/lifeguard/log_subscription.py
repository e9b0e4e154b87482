"""CloudWatch Logs subscription events: decoded and checked as CloudWatch Logs documents them, and built
(for replays, tests and benchmarks) the way CloudWatch Logs builds them."""

from __future__ import annotations

import base64
import gzip
import json
import re
import zlib
from collections.abc import Iterator, Mapping, Sequence
from datetime import UTC, datetime, timedelta
from typing import Any

from lifeguard._records import read_from_json
from lifeguard.bounds import EPOCH_MS_MAX, SUBSCRIPTION_MAX_BYTES
from lifeguard.errors import LifeguardError
from lifeguard.schema import (
    BAD,
    Invalid,
    Loc,
    Model,
    Problem,
    checked,
    integer,
    list_of,
    model,
    optional,
    string,
)
from lifeguard.values import frozen

__all__ = [
    "MALFORMED_LOG_EVENT",
    "InvalidSubscriptionEventError",
    "LogBatch",
    "LogEvent",
    "another_pcs_log",
    "decode_subscription",
    "encode_subscription",
]

# The streams of a cluster's other PCS logs, by their names (`slurmctld_<version>.log` and the other
# daemons', `jobcomp.log`, the scheduler's audit log), beside its scaling log (`node_lifecycle.log`) when one
# log group is given them all: no scaling record is in them, whatever their lines hold (a job may be named
# anything, `status_code` too).
_OTHER_PCS_LOG = re.compile(
    r"AWSLogs/PCS/pcs_[A-Za-z0-9]{1,60}/(?:slurmctld|slurmdbd|slurmrestd|jobcomp)[A-Za-z0-9._-]*"
)


def another_pcs_log(log_stream: str) -> bool:
    """Whether a stream is of another of a cluster's PCS logs than its scaling log: ignored whole."""
    return _OTHER_PCS_LOG.fullmatch(log_stream) is not None


# The reason a handler counts a skipped log event under when it is not as CloudWatch Logs sends one.
MALFORMED_LOG_EVENT = "log event not as CloudWatch Logs sends it"


class InvalidSubscriptionEventError(LifeguardError, ValueError):
    """The Lambda's event is not a CloudWatch Logs subscription event."""


_EPOCH = datetime(1970, 1, 1, tzinfo=UTC)


@checked(id=string(), timestamp=integer(ge=0, lt=EPOCH_MS_MAX), message=string())
@frozen(slots=True, kw_only=True)
class _LogEventShape(Model):
    """One log event of a batch as CloudWatch Logs sends it: its checks say what is wrong with one."""

    id: str
    timestamp: int  # epoch milliseconds
    message: str


_LOG_EVENT_SHAPE = model(_LogEventShape)


def _as_sent(value: Any) -> bool:
    """Whether a log event passes `_LogEventShape`'s checks, looked at in place."""
    if not isinstance(value, dict):
        return False
    timestamp = value.get("timestamp")
    return (
        type(value.get("id")) is str
        and type(value.get("message")) is str
        and type(timestamp) is int
        and 0 <= timestamp < EPOCH_MS_MAX
    )


def _log_event(value: Any, loc: Loc, problems: list[Problem]) -> Any:
    """A log event that passes `_LogEventShape`'s checks, kept as the object it is: a batch holds up to
    10,000 of them and the handlers read two keys of each, so none is copied into a record."""
    if _as_sent(value):
        return value
    _LOG_EVENT_SHAPE(value, loc, problems)  # what is wrong with it
    return BAD


@checked(
    keys={
        "message_type": "messageType",
        "log_group": "logGroup",
        "log_stream": "logStream",
        "subscription_filters": "subscriptionFilters",
        "log_events": "logEvents",
        "policy_level": "policyLevel",
    },
    message_type=string(),
    owner=string(),
    log_group=string(),
    log_stream=string(),
    subscription_filters=list_of(string()),
    log_events=list_of(_log_event),
    policy_level=optional(string()),
)
@frozen(slots=True, kw_only=True)
class _Payload(Model):
    """The decompressed payload of a subscription event, keyed as CloudWatch Logs sends it; every key but
    `policyLevel` is required."""

    message_type: str
    owner: str
    log_group: str
    log_stream: str
    subscription_filters: list[str]
    log_events: list[dict[str, Any]]
    policy_level: str | None = None


@frozen
class LogEvent:
    """One log event of a batch; `where` names it for error messages."""

    id: str
    timestamp: datetime
    message: str
    where: str

    @property
    def timestamp_ms(self) -> int:
        """The event's time in epoch milliseconds (computed on demand: the handlers rarely need it)."""
        return int(self.timestamp.timestamp() * 1000)


@frozen
class LogBatch:
    """A decoded subscription batch: its log events as CloudWatch Logs sends them (`raw_events`), and those
    that were not (`malformed`: each one's id, or its place, and what is wrong with it), set aside for the
    handlers to count as skipped records, the rest of the batch read."""

    log_group: str
    log_stream: str
    message_type: str
    raw_events: Sequence[Mapping[str, Any]]  # as sent: `id` and `message` strings, `timestamp` epoch ms
    malformed: tuple[tuple[str, str], ...] = ()

    @property
    def count(self) -> int:
        """How many log events the batch holds, malformed ones included."""
        return len(self.raw_events) + len(self.malformed)

    def malformed_events(self) -> Iterator[tuple[str, str]]:
        """`(where, what is wrong)` of each malformed log event, as `messages` names the others."""
        stream = self.log_stream
        return ((f"{stream}:{label}", why) for label, why in self.malformed)

    @property
    def events(self) -> tuple[LogEvent, ...]:
        """The log events, each with where it came from."""
        return tuple(
            LogEvent(
                e["id"],
                _EPOCH + timedelta(milliseconds=e["timestamp"]),
                e["message"],
                f"{self.log_stream}:{e['id']}",
            )
            for e in self.raw_events
        )

    def messages(self) -> Iterator[tuple[str, str]]:
        """`(message, where)` of each log event: the handlers' fast path (no object per event)."""
        stream = self.log_stream
        return ((e["message"], f"{stream}:{e['id']}") for e in self.raw_events)

    @property
    def is_control_message(self) -> bool:
        """CloudWatch Logs' reachability check, which carries no data."""
        return self.message_type == "CONTROL_MESSAGE"


def decode_subscription(event: Mapping[str, Any], *, max_bytes: int = SUBSCRIPTION_MAX_BYTES) -> LogBatch:
    """Decode base64 + gzip (at most `max_bytes` decompressed), then parse and check the JSON payload: the
    keys CloudWatch Logs sends must all be there with their types, or the whole event is refused in one
    line. A log event not as CloudWatch Logs sends one (`id` and `message` strings, `timestamp` epoch
    milliseconds) is set aside, said in `LogBatch.malformed`, for the handler to skip and count."""
    awslogs = event.get("awslogs") if isinstance(event, Mapping) else None
    data = awslogs.get("data") if isinstance(awslogs, Mapping) else None
    if not isinstance(data, str):
        raise InvalidSubscriptionEventError(
            "not a CloudWatch Logs subscription event: no awslogs.data string"
        )
    try:
        compressed = base64.b64decode(data, validate=True)
    except ValueError as exc:  # binascii.Error, and non-ASCII text
        raise InvalidSubscriptionEventError(
            f"not a CloudWatch Logs subscription event: awslogs.data is not base64 gzip ({exc})"
        ) from None
    raw = _gunzip(compressed, max_bytes)
    try:
        payload = json.loads(raw)
    except (ValueError, RecursionError):
        payload = BAD  # not JSON: `_Payload` says so
    malformed: tuple[tuple[str, str], ...] = ()
    if (
        type(payload) is dict
        and type(payload.get("logEvents")) is list
        and not all(map(_as_sent, payload["logEvents"]))
    ):
        # A log event that is not as CloudWatch Logs sends one is a record that cannot be read: skipped and
        # counted by the handler, the rest of its batch read (a whole batch refused for one would lose them).
        events = payload["logEvents"]
        malformed = tuple(
            _malformed(index, event) for index, event in enumerate(events) if not _as_sent(event)
        )
        payload = {**payload, "logEvents": [event for event in events if _as_sent(event)]}
    batch = _as_cloudwatch_sends_it(payload, malformed)
    if batch is not None:
        return batch
    try:
        decoded = _Payload.model_validate_json(raw) if payload is BAD else _Payload.model_validate(payload)
    except Invalid as exc:
        first = read_from_json(exc).problems[0]
        where = ".".join(str(part) for part in first.loc) or "(document)"
        raise InvalidSubscriptionEventError(
            f"not a CloudWatch Logs subscription event: {where}: {first.msg}"
        ) from None
    return LogBatch(
        decoded.log_group, decoded.log_stream, decoded.message_type, decoded.log_events, malformed
    )


def _malformed(index: int, event: Any) -> tuple[str, str]:
    """A malformed log event's label (its id, or its place in the batch) and what is wrong with it, in the
    words of `_LogEventShape`'s checks."""
    problems: list[Problem] = []
    _LOG_EVENT_SHAPE(event, (), problems)
    first = read_from_json(Invalid(problems)).problems[0]
    what = ".".join(str(part) for part in first.loc)
    label = event.get("id") if isinstance(event, dict) else None
    return (label if type(label) is str else f"logEvents[{index}]"), (
        f"{what}: {first.msg}" if what else first.msg
    )


def _as_cloudwatch_sends_it(data: Any, malformed: tuple[tuple[str, str], ...]) -> LogBatch | None:
    """The batch, made at once, when the payload is as CloudWatch Logs sends one: every key with its type
    (`policyLevel` a string or absent), its log events those `_log_event` takes (`_as_sent`: the caller has
    set the others aside, `malformed`); None for anything else, which `_Payload` then takes or reports on.
    The same checks in both ways, so both take exactly the same payloads; this one is the way of every real
    batch, and costs a fraction of the other."""
    if type(data) is not dict:
        return None
    kind, group, stream = data.get("messageType"), data.get("logGroup"), data.get("logStream")
    filters, events, policy = data.get("subscriptionFilters"), data.get("logEvents"), data.get("policyLevel")
    if not (
        type(kind) is str
        and type(data.get("owner")) is str
        and type(group) is str
        and type(stream) is str
        and type(filters) is list
        and all(type(name) is str for name in filters)
        and type(events) is list
        and (policy is None or type(policy) is str)
    ):
        return None
    return LogBatch(group, stream, kind, events, malformed)


def _gunzip(data: bytes, max_bytes: int) -> bytes:
    """gzip's members decompressed, refused as soon as they hold more than `max_bytes`."""
    inflater = zlib.decompressobj(wbits=31)
    try:
        whole = inflater.decompress(data, max_bytes + 1)
    except zlib.error:
        whole = b""  # said below, member by member
    if inflater.eof and not inflater.unused_data and len(whole) <= max_bytes:
        return whole  # one member, as CloudWatch Logs sends it: no copy
    out = bytearray()
    while data:
        inflater = zlib.decompressobj(wbits=31)
        try:
            out += inflater.decompress(data, max_bytes + 1 - len(out))
        except zlib.error as exc:
            raise InvalidSubscriptionEventError(
                f"not a CloudWatch Logs subscription event: awslogs.data is not base64 gzip ({exc})"
            ) from None
        if len(out) > max_bytes:
            raise InvalidSubscriptionEventError(
                f"subscription payload refused: it decompresses to more than {max_bytes} bytes"
            )
        if not inflater.eof:
            raise InvalidSubscriptionEventError(
                "not a CloudWatch Logs subscription event: awslogs.data is truncated gzip"
            )
        data = inflater.unused_data
    return bytes(out)


def encode_subscription(
    log_group: str,
    log_stream: str,
    messages: Sequence[tuple[int, str]],
    *,
    owner: str = "123456789012",
    first_id: int = 0,
) -> dict[str, Any]:
    """A subscription event carrying `(timestamp_ms, message)` pairs, as `sam local invoke -e` takes it."""
    payload = {
        "messageType": "DATA_MESSAGE",
        "owner": owner,
        "logGroup": log_group,
        "logStream": log_stream,
        "subscriptionFilters": ["lifeguard"],
        "logEvents": [
            {"id": str(first_id + index), "timestamp": timestamp, "message": message}
            for index, (timestamp, message) in enumerate(messages)
        ],
    }
    data = base64.b64encode(gzip.compress(json.dumps(payload).encode())).decode()
    return {"awslogs": {"data": data}}
