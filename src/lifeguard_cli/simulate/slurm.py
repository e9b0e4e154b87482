"""What Slurm shows of each node slot of the twin: `sinfo`'s state and Reason over time, as the article saw
them on a real cluster.

A static node's slot is one Slurm node whatever instance backs it. While an instance boots the node is
`idle#` (powering up); ACTIVE, it is `idle` (the article's STOP_SEQUENCE node too: IDLE+CLOUD, taking jobs);
drained (a drain step's, or PCS's before it replaces the node for an update), `drain`; its instance gone,
`idle%` (powering down) and, 70 s later, `idle~` (powered down) until the next launch. A bootstrap failure's
Reason names the instance: `Backing Instance Failed To Bootstrap: i-…`. In a TERMINATE loop the node
never reaches plain `idle`: it cycles `idle#`, `idle%`, `idle~` (the article's sinfo, 01:04 to 01:15).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

__all__ = ["NOT_RESPONDING_MINUTES", "POWER_DOWN_MINUTES", "POWER_UP_MINUTES", "node_states", "states_at_end"]

# The article's two failed instances, terminated at 01:06:42 and 01:12:42: still idle# at 01:06:50, idle%
# (powering down) at 01:07:08 and 01:13:04, idle~ (powered down) at 01:08:19 and 01:14:15, and idle# again
# (powering up for the next instance) at 01:09:12 and 01:15:08, before its launch at 01:09:44 and 01:15:45.
NOT_RESPONDING_MINUTES = 24 / 60  # from the instance's end to idle%
POWER_DOWN_MINUTES = 70 / 60  # from idle% to idle~
POWER_UP_MINUTES = 53 / 60  # from idle~ to idle#, when another instance is to back the node
FAILED_TO_BOOTSTRAP = "Backing Instance Failed To Bootstrap: {instance}"

_Change = tuple[float, str, str | None]  # (minute, state, reason)


def node_states(instances: Iterable[Mapping[str, Any]], horizon_minutes: float) -> list[dict[str, Any]]:
    """Each node slot's state changes up to the horizon, in time order: `group`, `node`, `minute`,
    `state` and `reason` (None when Slurm shows none). `instances` as the simulation's document lists
    them (minutes)."""
    slots: dict[tuple[str, str], list[Mapping[str, Any]]] = {}
    for instance in instances:
        slots.setdefault((str(instance["group"]), str(instance["node"])), []).append(instance)
    found: list[dict[str, Any]] = []
    for (group, node), backing in slots.items():
        changes = _slot_changes(sorted(backing, key=lambda i: float(i["launched_minute"])), horizon_minutes)
        found += [
            {"group": group, "node": node, "minute": round(minute, 1), "state": state, "reason": reason}
            for minute, state, reason in changes
        ]
    return sorted(found, key=lambda change: (change["minute"], change["group"], change["node"]))


def states_at_end(changes: Iterable[Mapping[str, Any]], group: str) -> str:
    """The group's nodes by their state at the horizon, as one cell: `idle`, `2 idle, 1 drain`; `-` when
    the group has no node in Slurm yet."""
    last: dict[str, str] = {}
    for change in changes:
        if change["group"] == group:
            last[str(change["node"])] = str(change["state"])
    counts: dict[str, int] = {}
    for state in last.values():
        counts[state] = counts.get(state, 0) + 1
    if not counts:
        return "-"
    if len(last) == 1:
        return next(iter(counts))
    return ", ".join(
        f"{count} {state}" for state, count in sorted(counts.items(), key=lambda c: (-c[1], c[0]))
    )


def _slot_changes(backing: list[Mapping[str, Any]], horizon: float) -> list[_Change]:
    """One slot's changes: each instance's, a later instance's launch cutting the last one's short."""
    changes: list[_Change] = []
    for index, instance in enumerate(backing):
        following = backing[index + 1 :]
        next_launch = min((float(i["launched_minute"]) for i in following), default=horizon + 1)
        own = _instance_changes(instance)
        if following and own[-1][1] == "idle~":  # powered up again for the instance to come
            own.append((own[-1][0] + POWER_UP_MINUTES, "idle#", None))
        for minute, state, reason in own:
            if minute <= horizon and minute < next_launch:
                _put(changes, (minute, state, reason))
    return changes


def _instance_changes(instance: Mapping[str, Any]) -> list[_Change]:
    """What one instance makes its node show, in time order. A launch that failed (no instance) leaves the
    node powered down."""
    launched = float(instance["launched_minute"])
    if instance.get("instance_id") is None:
        return [(launched, "idle~", None)]
    changes: list[_Change] = [(launched, "idle#", None)]
    active, drained = _minute(instance.get("active_minute")), _minute(instance.get("drained_minute"))
    pending = _minute(instance.get("pending_replacement_minute"))
    if active is not None:
        changes.append((active, "drain" if drained is not None and drained <= active else "idle", None))
        for at in (drained, pending):
            if at is not None and at > active:
                changes.append((at, "drain", None))
    ended = _minute(instance.get("ended_minute"))
    if ended is not None:
        end = instance.get("end")
        reason = (
            FAILED_TO_BOOTSTRAP.format(instance=instance["instance_id"])
            if end == "BOOTSTRAP_FAILED"
            else None
        )
        down = ended + NOT_RESPONDING_MINUTES
        changes += [(down, "idle%", reason), (down + POWER_DOWN_MINUTES, "idle~", reason)]
    return sorted(changes, key=lambda change: change[0])


def _put(changes: list[_Change], change: _Change) -> None:
    """Add a change unless it changes nothing; one at the same minute as the last replaces it."""
    if changes and changes[-1][1:] == change[1:]:
        return
    if changes and changes[-1][0] >= change[0]:
        changes.pop()
        if changes and changes[-1][1:] == change[1:]:
            return
    changes.append(change)


def _minute(value: Any) -> float | None:
    return None if value is None else float(value)
