"""Where a setting comes from, in one place: explicit argument > `LIFEGUARD_<NAME>` environment variable >
default. Python 3.9 compatible (the node bundle uses it)."""

from __future__ import annotations

import os
from collections.abc import Callable
from typing import TypeVar

__all__ = ["ENV_PREFIX", "setting"]

ENV_PREFIX = "LIFEGUARD_"
T = TypeVar("T")


def setting(name: str, explicit: T | None, default: T, parse: Callable[[str], T]) -> T:
    """The value of setting `name` (e.g. `fetch_backoff_seconds` reads `LIFEGUARD_FETCH_BACKOFF_SECONDS`).

    Raises ValueError naming the variable when the environment holds something `parse` refuses.
    """
    if explicit is not None:
        return explicit
    variable = ENV_PREFIX + name.upper()
    raw = os.environ.get(variable)
    if raw is None or raw == "":
        return default
    try:
        return parse(raw)
    except ValueError as exc:
        raise ValueError(f"{variable}={raw!r} is not valid: {exc}") from None
