"""EventBridge PutEvents for controller events: batches of 10, failed entries retried, never dropped."""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from typing import Any

from lifeguard.errors import AwsCallError
from lifeguard.event_contract import ENTRY_MAX_BYTES, ControllerEvent, entry_size
from lifeguard.metrics import Metric, uncounted

__all__ = ["EventPublisher"]

_BATCH = 10
_ATTEMPTS = 3


class EventPublisher:
    """Puts controller events on a bus."""

    PERMISSIONS = ("events:PutEvents",)

    def __init__(
        self,
        client: Any,
        bus_name: str = "default",
        *,
        sleep: Callable[[float], None] = time.sleep,
        metric: Metric = uncounted,
    ) -> None:
        self._client = client
        self.bus_name = bus_name
        self._sleep = sleep
        self._metric = metric  # PublishRetries: a put tried again (EventBridge failed, or some entries)

    def publish(self, events: Sequence[ControllerEvent]) -> None:
        """Put every event, in order; raises AwsCallError when some could not be put after retries."""
        from botocore.exceptions import BotoCoreError, ClientError

        for batch in _batches([event.to_entry(self.bus_name) for event in events]):
            pending = batch
            for attempt in range(1, _ATTEMPTS + 1):
                try:
                    response = self._client.put_events(Entries=pending)
                except (ClientError, BotoCoreError) as exc:
                    if attempt == _ATTEMPTS:
                        raise AwsCallError.from_exception("PutEvents", exc) from exc
                    self._metric("PublishRetries", 1)
                    self._sleep(0.2 * 2**attempt)
                    continue
                answers = response.get("Entries", [])
                failed = [
                    (entry, answer)
                    for entry, answer in zip(pending, answers, strict=False)
                    if answer.get("ErrorCode")
                ]
                if not failed:
                    break
                pending = [entry for entry, _ in failed]
                if attempt == _ATTEMPTS:
                    code, message = failed[0][1]["ErrorCode"], failed[0][1].get("ErrorMessage", "")
                    raise AwsCallError("PutEvents", code, f"{len(failed)} entries not put: {message}")
                self._metric("PublishRetries", 1)
                self._sleep(0.2 * 2**attempt)


def _batches(entries: list[dict[str, Any]]) -> list[list[dict[str, Any]]]:
    """Entries in order, at most 10 a request and a request under 256 KB."""
    batches: list[list[dict[str, Any]]] = []
    size = 0
    for entry in entries:
        size_of = entry_size(entry)
        if not batches or len(batches[-1]) == _BATCH or size + size_of > ENTRY_MAX_BYTES:
            batches.append([])
            size = 0
        batches[-1].append(entry)
        size += size_of
    return batches
