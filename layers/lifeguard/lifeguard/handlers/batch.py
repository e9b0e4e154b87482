"""What both handlers do first with their event: decode it, or say why there is nothing to do; the pause
of Python's garbage collector while a batch is read (`CollectorPause`); and what they do last, count the
events a batch published."""

from __future__ import annotations

import gc
import logging
import threading
from collections import Counter
from collections.abc import Iterable, Mapping
from dataclasses import field
from types import TracebackType
from typing import TYPE_CHECKING, Any, Literal

from lifeguard.bounds import clip
from lifeguard.metrics import Metric
from lifeguard.values import mutable

if TYPE_CHECKING:
    from lifeguard.event_contract import ControllerEvent
    from lifeguard.log_subscription import LogBatch

logger = logging.getLogger("lifeguard")


@mutable
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


def count_events(events: Iterable[ControllerEvent], metric: Metric) -> None:
    """Count each event a batch published, by its detail type (the dashboard charts both functions'); a
    batch that fails after publishing some counts those before it raises (its retry does not make them
    again)."""
    for event in events:
        metric(event.detail_type, 1)


def data_batch(event: Mapping[str, Any], metric: Metric) -> LogBatch | Literal["invalid", "control"]:
    """The event's batch of log events, or `invalid` / `control` when it carries none to handle."""
    # Imported here: a function that only counts skips (the review of changes) decodes no subscription.
    from lifeguard.log_subscription import InvalidSubscriptionEventError, decode_subscription

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


class CollectorPause:
    """Python's cyclic garbage collector paused while any batch is read (`with`), and resumed when the last
    one ends, however it ends; a collector that was paused when the first began stays paused. Batches read
    at once (nested, or in threads) are counted under a lock, so none resumes it under another."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._reading = 0
        self._resume = False

    def __enter__(self) -> None:
        with self._lock:
            if not self._reading:
                self._resume = gc.isenabled()
                gc.disable()
            self._reading += 1

    def __exit__(
        self, kind: type[BaseException] | None, error: BaseException | None, trace: TracebackType | None
    ) -> None:
        with self._lock:
            self._reading -= 1
            if not self._reading and self._resume:
                gc.enable()


# The one pause of this process's batch functions (the collector is the process's).
collector_paused = CollectorPause()
