"""What both handlers do first with their event: decode it, or say why there is nothing to do."""

from __future__ import annotations

import logging
from collections.abc import Callable, Mapping
from typing import Any, Literal

from lifeguard.subscription import InvalidSubscriptionEventError, LogBatch, decode_subscription

logger = logging.getLogger("lifeguard")


def data_batch(
    event: Mapping[str, Any], metric: Callable[[str, float], None]
) -> LogBatch | Literal["invalid", "control"]:
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
