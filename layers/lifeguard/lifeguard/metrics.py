"""How the handlers, the remediator and the notifier count things: a `Metric` is called with a name and a
value (the Lambdas pass Powertools' `add_metric`; tests pass a list's append; nothing is counted by
default)."""

from __future__ import annotations

from collections.abc import Callable

__all__ = ["Metric", "uncounted"]

Metric = Callable[[str, float], None]


def uncounted(name: str, value: float) -> None:
    """The default metric: counts nothing."""
