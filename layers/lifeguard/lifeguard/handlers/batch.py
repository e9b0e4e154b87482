"""What both handlers do first with their event: decode it, or say why there is nothing to do."""

from __future__ import annotations

import logging
from collections import Counter
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Literal

from lifeguard.bounds import clip
from lifeguard.log_subscription import InvalidSubscriptionEventError, LogBatch, decode_subscription
from lifeguard.metrics import Metric

logger = logging.getLogger("lifeguard")


@dataclass
class Skips:
    """The messages of a batch that were skipped, counted by reason (`not JSON`, `invalid instance_id`,
    `event_timestamp ahead of the clock`, …)."""

    skipped: int = 0
    skipped_reasons: Counter[str] = field(default_factory=Counter)

    def skip(self, reason: str, where: str, detail: str = "") -> None:
        """Count one message skipped, and say so in the log (in one bounded line)."""
        self.skipped += 1
        self.skipped_reasons[reason] += 1
        logger.warning(
            "skipped the message at %s: %s%s", clip(where), reason, f" ({clip(detail)})" if detail else ""
        )


def data_batch(event: Mapping[str, Any], metric: Metric) -> LogBatch | Literal["invalid", "control"]:
    """The event's batch of log events, or `invalid` / `control` when it carries none to handle."""
    try:
        batch = decode_subscription(event)
    except InvalidSubscriptionEventError as exc:
        logger.error("event ignored: %s", exc)  # retrying it would not make it readable
        metric("InvalidEvents", 1)
        return "invalid"
    if batch.is_control_message:
        metric("ControlMessages", 1)
        return "control"
    return batch
