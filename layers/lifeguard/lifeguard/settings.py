"""Where a setting comes from, in one place: explicit argument > `LIFEGUARD_<NAME>` environment variable >
default. Python 3.9 compatible (the node bundle uses it)."""

from __future__ import annotations

import os
from collections.abc import Callable
from typing import TypeVar

__all__ = ["ENV_PREFIX", "bounded_setting", "cluster_ids", "setting"]

ENV_PREFIX = "LIFEGUARD_"
T = TypeVar("T")
N = TypeVar("N", int, float)


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


def bounded_setting(
    name: str, explicit: N | None, default: N, parse: Callable[[str], N], *, least: N, most: N
) -> N:
    """`setting`, from `least` to `most`: else ValueError naming where the value came from (`name` when given
    explicitly, else the variable). NaN is within nothing."""
    value = setting(name, explicit, default, parse)
    if not least <= value <= most:
        source = name if explicit is not None else ENV_PREFIX + name.upper()
        raise ValueError(f"{source}: {value:.15g} is not from {least:.15g} to {most:.15g}")
    return value


def cluster_ids(explicit: str | None = None) -> frozenset[str]:
    """The stack's ClusterIds (`LIFEGUARD_CLUSTER_IDS`, comma-separated): the clusters whose scaling logs are
    read, whose node reports may detect a loop on their own, whose configuration changes are reviewed and
    whose groups may be changed; empty for every cluster of the account."""
    listed = setting("cluster_ids", explicit, "", str)
    return frozenset(part.strip() for part in listed.split(",") if part.strip())
