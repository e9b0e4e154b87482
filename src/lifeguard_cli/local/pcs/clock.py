"""The local PCS's clocks: the system clock, and a manual one for tests, replays and simulations."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from datetime import UTC, datetime, timedelta

__all__ = ["Clock", "ManualClock", "system_clock"]

Clock = Callable[[], datetime]


class ManualClock:
    """A clock that moves only when told to: for tests, replays and simulations; or, once `run`, with real
    time from where it stands (a kept replay's PCS, which people go on using)."""

    def __init__(self, start: datetime | None = None) -> None:
        self._now = start or datetime(2026, 10, 21, tzinfo=UTC)
        self._lock = threading.Lock()
        self._running_since: float | None = None  # time.monotonic() when `run`

    def __call__(self) -> datetime:
        with self._lock:
            return self._current()

    def _current(self) -> datetime:
        if self._running_since is None:
            return self._now
        return self._now + timedelta(seconds=time.monotonic() - self._running_since)

    def advance(self, seconds: float) -> datetime:
        """Move forward by `seconds` and return the new time."""
        with self._lock:
            self._now = self._current() + timedelta(seconds=seconds)
            self._restart()
            return self._now

    def set(self, moment: datetime) -> None:
        """Jump to `moment` (never backwards: a stream's clock only moves on)."""
        with self._lock:
            self._now = max(self._current(), moment)
            self._restart()

    def run(self) -> None:
        """Move with real time from now on (an update made on a kept replay's PCS settles in a minute)."""
        with self._lock:
            self._running_since = time.monotonic()

    def _restart(self) -> None:
        if self._running_since is not None:
            self._running_since = time.monotonic()


def system_clock() -> datetime:
    """The current time in UTC: the clock of a `LocalPcs` not given one."""
    return datetime.now(UTC)
