"""The local PCS's clocks: the system clock, and a manual one for tests, replays and simulations."""

from __future__ import annotations

import threading
from collections.abc import Callable
from datetime import UTC, datetime, timedelta

__all__ = ["Clock", "ManualClock", "system_clock"]

Clock = Callable[[], datetime]


class ManualClock:
    """A clock that moves only when told to: for tests, replays and simulations."""

    def __init__(self, start: datetime | None = None) -> None:
        self._now = start or datetime(2026, 10, 21, tzinfo=UTC)
        self._lock = threading.Lock()

    def __call__(self) -> datetime:
        with self._lock:
            return self._now

    def advance(self, seconds: float) -> datetime:
        """Move forward by `seconds` and return the new time."""
        with self._lock:
            self._now += timedelta(seconds=seconds)
            return self._now

    def set(self, moment: datetime) -> None:
        """Jump to `moment` (never backwards: a stream's clock only moves on)."""
        with self._lock:
            self._now = max(self._now, moment)


def system_clock() -> datetime:
    """The current time in UTC: the clock of a `LocalPcs` not given one."""
    return datetime.now(UTC)
