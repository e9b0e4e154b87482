"""EventBridge PutEvents for controller events: batches of 10, failed entries retried, never dropped."""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from typing import Any

from lifeguard.errors import AwsCallError
from lifeguard.events import ControllerEvent

__all__ = ["EventPublisher"]

_BATCH = 10
_ATTEMPTS = 3


class EventPublisher:
    """Puts controller events on a bus."""

    def __init__(
        self,
        client: Any,
        bus_name: str = "default",
        *,
        sleep: Callable[[float], None] = time.sleep,
    ) -> None:
        self._client = client
        self.bus_name = bus_name
        self._sleep = sleep

    def publish(self, events: Sequence[ControllerEvent]) -> None:
        """Put every event, in order; raises AwsCallError when some could not be put after retries."""
        from botocore.exceptions import BotoCoreError, ClientError

        for start in range(0, len(events), _BATCH):
            pending = list(events[start : start + _BATCH])
            for attempt in range(1, _ATTEMPTS + 1):
                try:
                    response = self._client.put_events(Entries=[e.to_entry(self.bus_name) for e in pending])
                except (ClientError, BotoCoreError) as exc:
                    if attempt == _ATTEMPTS:
                        raise AwsCallError.from_exception("PutEvents", exc) from exc
                    self._sleep(0.2 * 2**attempt)
                    continue
                entries = response.get("Entries", [])
                failed = [
                    (e, entry) for e, entry in zip(pending, entries, strict=False) if entry.get("ErrorCode")
                ]
                if not failed:
                    break
                pending = [event for event, _ in failed]
                if attempt == _ATTEMPTS:
                    code, message = failed[0][1]["ErrorCode"], failed[0][1].get("ErrorMessage", "")
                    raise AwsCallError("PutEvents", code, f"{len(failed)} entries not put: {message}")
                self._sleep(0.2 * 2**attempt)
