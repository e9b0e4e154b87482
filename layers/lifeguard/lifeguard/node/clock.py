"""The node's wall clock: the machine's, shifted by `LIFEGUARD_SIM_CLOCK_OFFSET_SECONDS` when set.

Only `lifeguard simulate` sets it: its nodes boot on the twin's virtual clock, so every time the node side
writes (executor.log, the script logs' markers) or sends (node reports) is the twin's. A value that is not
a finite number of seconds within a year is ignored: the node keeps the machine's clock. The twin also sets
`LIFEGUARD_SIM_READY_AFTER_SECONDS`: how far its node's clock moves on between nodeBootstrapped's end and
nodeReady's start (`ready_after`), which a real node spends starting slurmd.
"""

from __future__ import annotations

import os
import re
import time

__all__ = [
    "CLOCK_OFFSET_VARIABLE",
    "READY_AFTER_VARIABLE",
    "advance",
    "now",
    "offset",
    "read_stamp",
    "ready_after",
    "utc_stamp",
]

CLOCK_OFFSET_VARIABLE = "LIFEGUARD_SIM_CLOCK_OFFSET_SECONDS"
READY_AFTER_VARIABLE = "LIFEGUARD_SIM_READY_AFTER_SECONDS"
_MAX_OFFSET_SECONDS = 366 * 24 * 3600.0
_MAX_READY_AFTER_SECONDS = 3600.0


def _seconds(name: str, bound: float) -> float:
    """The variable `name` as a finite number of seconds within `bound` either way; 0 when it is unset or
    not one."""
    raw = os.environ.get(name)
    if not raw:
        return 0.0
    try:
        seconds = float(raw)
    except ValueError:
        return 0.0
    return seconds if abs(seconds) <= bound else 0.0  # False for nan and inf too


def offset() -> float:
    """Seconds added to the machine's clock (0 unless the twin set them)."""
    return _seconds(CLOCK_OFFSET_VARIABLE, _MAX_OFFSET_SECONDS)


def ready_after() -> float:
    """Seconds the twin's node clock moves on between nodeBootstrapped's end and nodeReady's start: slurmd
    starting and registering, and PCS logging the node ACTIVE before nodeReady runs (the article: 25 s, then
    its nodeReady check 2 s later). 0 on a real node (unset, negative, or not a number of seconds within an
    hour), where that time passes by itself."""
    return max(0.0, _seconds(READY_AFTER_VARIABLE, _MAX_READY_AFTER_SECONDS))


def advance(seconds: float) -> str:
    """Move the node's clock on by `seconds`, for this process and what it starts from now on (the twin's
    nodes only); the offset, as `CLOCK_OFFSET_VARIABLE` now holds it."""
    moved = f"{offset() + seconds:.3f}"
    os.environ[CLOCK_OFFSET_VARIABLE] = moved
    return moved


def now() -> float:
    """Epoch seconds, on the node's clock."""
    return time.time() + offset()


def utc_stamp(seconds: float, *, fraction: bool = True) -> str:
    """`seconds` as `2026-10-21T01:12:42.123456Z` (without `.123456` when not `fraction`): the time module's
    work, so a boot does not load `datetime` (nor `math`) for its log lines."""
    whole = float(int(seconds))  # split toward zero, exactly, as math.modf; rounded as datetime does it
    part = seconds - whole
    micro = round(part * 1_000_000)
    if micro >= 1_000_000:
        whole, micro = whole + 1, micro - 1_000_000
    elif micro < 0:
        whole, micro = whole - 1, micro + 1_000_000
    stamp = time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(int(whole)))
    return f"{stamp}.{micro:06d}Z" if fraction else f"{stamp}Z"


# RFC 3339 as the executors write it: a fraction of any length, `Z` or an offset (none: UTC). Compiled by
# the first stamp read (re keeps it): a boot, which reads none, spares the 0.5 ms on the node's Python 3.9.
_RFC3339 = r"(\d{4}-\d\d-\d\d[Tt]\d\d:\d\d:\d\d)(\.\d+)?([Zz]|[+-]\d\d:\d\d)?"


def read_stamp(stamp: object) -> float | None:
    """Epoch seconds of an RFC 3339 time, or None when it is not one. Read the same on every Python: 3.9's
    `datetime.fromisoformat` (the node's) takes a fraction of 3 or 6 digits only, so the fraction is read
    apart."""
    from datetime import datetime  # here: a boot writes times, and reads them only to date records

    found = re.fullmatch(_RFC3339, stamp, re.ASCII) if isinstance(stamp, str) else None
    if found is None:
        return None
    whole, fraction, zone = found.groups()
    try:
        zone = "+00:00" if zone in (None, "Z", "z") else zone
        seconds = datetime.fromisoformat(whole.replace("t", "T") + zone).timestamp()
    except ValueError:
        return None
    return seconds + (float(fraction) if fraction else 0.0)
