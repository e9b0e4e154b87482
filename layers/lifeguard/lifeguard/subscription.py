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


def decode_subscription(event: Mapping[str, Any]) -> LogBatch:
    """Decode base64 + gzip + JSON through Powertools' CloudWatchLogsModel, keeping logGroup/logStream."""
    from aws_lambda_powertools.utilities.parser.models import CloudWatchLogsModel

    try:
        data = CloudWatchLogsModel.model_validate(event).awslogs.decoded_data
    except ValidationError as exc:
        raise InvalidSubscriptionEventError(
            f"not a CloudWatch Logs subscription event: {exc.errors()[0]['msg']}"
        ) from None
    return LogBatch(data.logGroup, data.logStream, data.messageType, data.logEvents)


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
