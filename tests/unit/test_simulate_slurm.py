"""What the twin says Slurm shows of a node slot (`sinfo`'s state and Reason), against the article's
observations on a real cluster."""

from __future__ import annotations

from typing import Any

from lifeguard_cli.simulate.slurm import (
    NOT_RESPONDING_MINUTES,
    POWER_DOWN_MINUTES,
    POWER_UP_MINUTES,
    node_states,
    states_at_end,
)


def down(ended: float) -> float:
    """When a node whose instance ended at `ended` shows idle% (powering down), to the tenth as shown."""
    return round(ended + NOT_RESPONDING_MINUTES, 1)


def off(ended: float) -> float:
    """idle~ (powered down)."""
    return round(ended + NOT_RESPONDING_MINUTES + POWER_DOWN_MINUTES, 1)


def up(ended: float) -> float:
    """idle# again (powering up), when another instance is to back the node."""
    return round(ended + NOT_RESPONDING_MINUTES + POWER_DOWN_MINUTES + POWER_UP_MINUTES, 1)


def instance(
    instance_id: str | None,
    launched: float,
    *,
    node: str = "lca-static-1",
    active: float | None = None,
    drained: float | None = None,
    pending: float | None = None,
    ended: float | None = None,
    end: str | None = None,
) -> dict[str, Any]:
    return {
        "group": "lca-static",
        "node": node,
        "instance_id": instance_id,
        "launched_minute": launched,
        "registered_minute": None,
        "active_minute": active,
        "drained_minute": drained,
        "pending_replacement_minute": pending,
        "ended_minute": ended,
        "end": end,
    }


def seen(changes: list[dict[str, Any]]) -> list[tuple[float, str, str | None]]:
    return [(c["minute"], c["state"], c["reason"]) for c in changes]


def test_a_terminate_loop_cycles_powering_up_down_and_off_naming_each_failed_instance() -> None:
    # The article's TERMINATE loop: the node never reached plain idle; sinfo showed idle#, then idle% and
    # idle~ with "Backing Instance Failed To Bootstrap: <instance>" in Reason, then idle# again before the
    # next launch (its minutes: launched 01:04:45, terminated 01:06:42, next launched 01:09:44).
    loop = [
        instance("i-059b4b99b4f2e9739", 0.0, ended=1.95, end="BOOTSTRAP_FAILED"),
        instance("i-06644f6e5a2b001c9", 5.0, ended=7.95, end="BOOTSTRAP_FAILED"),
    ]
    changes = seen(node_states(loop, 30))
    first, second = "i-059b4b99b4f2e9739", "i-06644f6e5a2b001c9"
    assert changes == [
        (0.0, "idle#", None),
        (down(1.95), "idle%", f"Backing Instance Failed To Bootstrap: {first}"),
        (off(1.95), "idle~", f"Backing Instance Failed To Bootstrap: {first}"),
        (up(1.95), "idle#", None),
        (down(7.95), "idle%", f"Backing Instance Failed To Bootstrap: {second}"),
        (off(7.95), "idle~", f"Backing Instance Failed To Bootstrap: {second}"),
    ]
    # As the article saw them (sampled, to a few seconds): idle% 01:07:08, idle~ 01:08:19, idle# 01:09:12.
    article = [(7 * 60 + 8) / 60 - 4.75, (8 * 60 + 19) / 60 - 4.75, (9 * 60 + 12) / 60 - 4.75]
    assert all(
        abs(minute - seen_at) <= 0.1 for (minute, _, _), seen_at in zip(changes[1:4], article, strict=True)
    )
    assert "idle" not in {state for _, state, _ in changes}
    assert states_at_end(node_states(loop, 30), "lca-static") == "idle~"


def test_a_stop_sequence_node_is_idle_and_takes_jobs_as_the_article_found() -> None:
    # IDLE+CLOUD, srun ran: a node whose script failed under STOP_SEQUENCE is plain idle.
    changes = node_states([instance("i-046cb3897e5a0a6a3", 0.0, active=2.1)], 30)
    assert seen(changes) == [(0.0, "idle#", None), (2.1, "idle", None)]
    assert states_at_end(changes, "lca-static") == "idle"


def test_drained_replaced_and_failed_launches_show_as_slurm_shows_them() -> None:
    slots = [
        # Drained by a drain step before it went ACTIVE, then replaced as unhealthy: no reason is known.
        instance("i-1", 0.0, active=2.0, drained=1.9, ended=6.0, end="UNHEALTHY_NODE"),
        instance("i-2", 9.0, active=11.0),
        # Serving, then drained by PCS for an update and replaced.
        instance(
            "i-3", 0.0, node="lca-static-2", active=2.0, pending=5.0, ended=7.0, end="REPLACEMENT_REQUESTED"
        ),
        # No capacity: no instance backs the node, which stays powered down.
        instance(None, 7.5, node="lca-static-2", ended=7.5, end="INSUFFICIENT_CAPACITY"),
    ]
    changes = node_states(slots, 30)
    one = seen([c for c in changes if c["node"] == "lca-static-1"])
    assert one == [
        (0.0, "idle#", None),
        (2.0, "drain", None),
        (down(6.0), "idle%", None),
        (off(6.0), "idle~", None),
        (up(6.0), "idle#", None),  # powered up for i-2, launched at 9.0
        (11.0, "idle", None),
    ]
    two = seen([c for c in changes if c["node"] == "lca-static-2"])
    assert two == [
        (0.0, "idle#", None),
        (2.0, "idle", None),
        (5.0, "drain", None),
        (7.4, "idle%", None),
        (7.5, "idle~", None),  # the launch that failed: no instance backs it
    ]
    assert states_at_end(changes, "lca-static") == "1 idle, 1 idle~"
    assert states_at_end(changes, "another") == "-"
    # Nothing past the horizon: a run cut at minute 6.5 has its node still powering down.
    assert seen(node_states(slots[:1], 6.5))[-1] == (6.4, "idle%", None)
    # In time order across the slots.
    assert [c["minute"] for c in changes] == sorted(c["minute"] for c in changes)
