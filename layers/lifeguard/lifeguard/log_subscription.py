"""CloudWatch Logs subscription events: decoded with Powertools' parser model, and built (for replays,
tests and benchmarks) the way CloudWatch Logs builds them."""

from __future__ import annotations

import base64
import gzip
import json
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from pydantic import ValidationError

from lifeguard.bounds import SUBSCRIPTION_MAX_BYTES
from lifeguard.errors import LifeguardError

__all__ = [
    "InvalidSubscriptionEventError",
    "LogBatch",
    "LogEvent",
    "decode_subscription",
    "encode_subscription",
]


class InvalidSubscriptionEventError(LifeguardError, ValueError):
    """The Lambda's event is not a CloudWatch Logs subscription event."""


@dataclass(frozen=True)
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


@dataclass(frozen=True)
class LogBatch:
    """A decoded subscription batch."""

    log_group: str
    log_stream: str
    message_type: str
    raw_events: Sequence[Any]  # Powertools' CloudWatchLogsLogEvent models

    @property
    def events(self) -> tuple[LogEvent, ...]:
        """The log events, each with where it came from."""
        return tuple(
            LogEvent(e.id, e.timestamp, str(e.message), f"{self.log_stream}:{e.id}") for e in self.raw_events
        )

    def messages(self) -> Iterator[tuple[str, str]]:
        """`(message, where)` of each log event: the handlers' fast path (no object per event)."""
        stream = self.log_stream
        return ((str(e.message), f"{stream}:{e.id}") for e in self.raw_events)

    @property
    def is_control_message(self) -> bool:
        """CloudWatch Logs' reachability check, which carries no data."""
        return self.message_type == "CONTROL_MESSAGE"


def decode_subscription(event: Mapping[str, Any], *, max_bytes: int = SUBSCRIPTION_MAX_BYTES) -> LogBatch:
    """Decode base64 + gzip (at most `max_bytes` decompressed), then parse the JSON straight into
    Powertools' decoded CloudWatch Logs model (`CloudWatchLogsDecode`, keeping logGroup/logStream). Going
    from bytes to the model in one step, rather than through `CloudWatchLogsModel`'s validator (json.loads,
    then validation of Python objects), halves the cost of a batch: it is most of what the handlers spend
    on an event beyond their own records."""
    from aws_lambda_powertools.utilities.parser.models.cloudwatch import CloudWatchLogsDecode

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
        decoded = CloudWatchLogsDecode.model_validate_json(raw)
    except ValidationError as exc:
        first = exc.errors()[0]
        where = ".".join(str(part) for part in first["loc"]) or "(document)"
        raise InvalidSubscriptionEventError(
            f"not a CloudWatch Logs subscription event: {where}: {first['msg']}"
        ) from None
    return LogBatch(decoded.logGroup, decoded.logStream, decoded.messageType, decoded.logEvents)


def _gunzip(data: bytes, max_bytes: int) -> bytes:
    """gzip's members decompressed, refused as soon as they hold more than `max_bytes`."""
    import zlib

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
