"""The numbers the twin's `--json` document gives of a group at the horizon (DESIGN's contract), from the
instances of a run as the twin records them."""

from __future__ import annotations

import pytest

from lifeguard_cli.simulate.scenario import Fault, GroupSpec
from lifeguard_cli.simulate.twin import Instance, RunOptions, TwinRun, _fault_as_written, _Group

GROUP = "burn"


def _run(*instances: Instance, horizon_minutes: float) -> TwinRun:
    run = TwinRun(RunOptions("Lifeguard", "quarantine", 1), horizon_minutes * 60)
    run.groups[GROUP] = _Group(GroupSpec(GROUP, 1, 1, {}), "pcs_abcdef01", {})
    run.instances.extend(instances)
    return run


def _node(**state: object) -> Instance:
    node = Instance(GROUP, f"{GROUP}-1", "i-0123456789abcdef0", 0.0, {}, 0)
    for key, value in state.items():
        setattr(node, key, value)
    return node


@pytest.mark.parametrize(
    ("state", "horizon_minutes"),
    [
        ({"active": 126.0, "boot_failed": True}, 3),  # its nodeReady failed; PCS has not ended it yet
        ({"active": 126.0, "boot_failed": True, "ended": 190.0, "end": "BOOTSTRAP_FAILED"}, 8),
    ],
    ids=["failed, not yet ended", "failed and ended"],
)
def test_a_node_whose_node_ready_failed_under_terminate_never_served(
    state: dict[str, object], horizon_minutes: float
) -> None:
    """The horizon between a nodeReady failure under TERMINATE and PCS ending the node made it serving (and
    its minutes not wasted); a later horizon, not: the same node counts alike at both."""
    summary = _run(_node(**state), horizon_minutes=horizon_minutes).group_summary(GROUP)
    assert (summary["serving_at_end"], summary["drained_at_end"], summary["first_serving_minute"]) == (
        0,
        0,
        None,
    )
    ended = state.get("ended", horizon_minutes * 60)
    assert isinstance(ended, float | int)
    assert summary["instance_minutes_wasted"] == round(ended / 60, 1)


def test_a_node_up_and_serving_is_counted_serving() -> None:
    summary = _run(_node(active=126.0), horizon_minutes=3).group_summary(GROUP)
    assert (summary["active_at_end"], summary["serving_at_end"], summary["drained_at_end"]) == (1, 1, 0)
    assert (summary["first_serving_minute"], summary["instance_minutes_wasted"]) == (2.1, 0.0)


@pytest.mark.parametrize(
    ("fault", "said"),
    [
        (
            Fault("insufficient_capacity", 0.0, until_minute=30.0, group="beta"),
            {"kind": "insufficient_capacity", "at_minute": 0.0, "until_minute": 30.0, "group": "beta"},
        ),
        (
            Fault("pcs_throttle", 6.0, times=2, operation="UpdateComputeNodeGroup", retry_after_seconds=7),
            {
                "kind": "pcs_throttle",
                "at_minute": 6.0,
                "times": 2,
                "operation": "UpdateComputeNodeGroup",
                "retry_after_seconds": 7,
            },
        ),
    ],
    ids=["a lasting fault, from minute 0", "a counted fault"],
)
def test_a_fault_is_told_in_the_timeline_as_a_scenario_writes_it(
    fault: Fault, said: dict[str, object]
) -> None:
    """A lasting fault was told with `times: 1`, which its kind refuses, and one from minute 0 without its
    minute."""
    assert _fault_as_written(fault) == said


def test_a_group_that_never_failed_shows_no_failure_not_a_recovery_that_never_came() -> None:
    """A group none of whose nodes failed showed "never" for the minutes from its first failure to a serving
    node, as a loop that never ended would; the HTML report showed "-" for that loop (its rows of minutes
    that never came said "never", this one did not end in `_minute`)."""
    from lifeguard_cli.simulate.html import _measure_cell
    from lifeguard_cli.simulate.twin import measure_shown

    healthy = {"bootstrap_failed": 0, "recovery_minutes": None, "first_serving_minute": 1.5}
    looping = {"bootstrap_failed": 11, "recovery_minutes": None, "first_serving_minute": None}
    recovered = {"bootstrap_failed": 2, "recovery_minutes": 10.6}
    assert measure_shown("recovery_minutes", healthy) == "no failure"
    assert measure_shown("recovery_minutes", looping) == "never"
    assert measure_shown("recovery_minutes", recovered) == "10.6"
    assert measure_shown("first_serving_minute", looping) == "never"
    assert measure_shown("bootstrap_failed", looping) == "11"
    assert _measure_cell("recovery_minutes", looping) == "<td class='num never'>never</td>"
    assert _measure_cell("recovery_minutes", healthy) == "<td class='num'>no failure</td>"


def test_a_folded_timeline_line_never_stands_for_a_node_that_did_otherwise() -> None:
    """Three boots in one minute, the middle one completing: `boot ×3 compute-1 …: a STOP_SEQUENCE failure
    (and 2 more)` hid the node that came up (the intermittent scenario). Boots of one outcome still fold."""
    from lifeguard_cli.simulate.render import fold_timeline

    def boot(node: str, outcome: str) -> dict[str, object]:
        return {
            "minute": 7.7,
            "group": "compute",
            "what": "boot",
            "detail": f"{node} i-0{node[-1]}: {outcome}",
        }

    timeline = [
        boot("compute-1", "a STOP_SEQUENCE failure"),
        boot("compute-3", "completed"),
        boot("compute-4", "a STOP_SEQUENCE failure"),
        boot("compute-5", "a STOP_SEQUENCE failure"),
    ]
    folded = fold_timeline(timeline)
    assert [(entry["detail"], entry["count"]) for entry in folded] == [
        ("compute-1 i-01: a STOP_SEQUENCE failure", 1),
        ("compute-3 i-03: completed", 1),
        ("compute-4 i-04: a STOP_SEQUENCE failure", 2),
    ]


def test_the_demos_table_shows_each_measure_as_a_scenarios_own_table_does() -> None:
    """The demo's one table said `never/never` for the recovery of a scenario in which no node failed (each
    scenario's table says `no failure`), and had no column for the nodes serving at the end: a bad change
    PCS alone never got out of read as recovered, its one serving node the one up before the change."""
    from rich.console import Console

    from lifeguard_cli.demo import demo_table

    def group(**measures: object) -> dict[str, object]:
        base = {"bootstrap_failed": 0, "first_active_minute": 2.1, "first_serving_minute": 2.1}
        return {
            **base,
            "recovery_minutes": None,
            "instance_minutes_wasted": 0.0,
            "serving_at_end": 4,
            **measures,
        }

    def document(name: str, mine: dict[str, object], alone: dict[str, object]) -> dict[str, object]:
        return {"scenario": name, "groups": {"g": mine}, "baseline": {"groups": {"g": alone}}, "changes": []}

    documents = [
        document("healthy", group(), group()),
        document(
            "bad change",
            group(bootstrap_failed=2, recovery_minutes=10.6),
            group(bootstrap_failed=7, serving_at_end=0),
        ),
    ]
    console = Console(width=200, record=True)
    console.print(demo_table(documents))
    lines = console.export_text().splitlines()
    assert "serving at end" in lines[1] + lines[2]
    [healthy] = [line for line in lines if line.startswith("healthy")]
    assert "no failure" in healthy
    assert "no failure/no failure" not in healthy  # neither failed: said once, not broken over lines
    [bad] = [line for line in lines if line.startswith("bad change")]
    assert bad.split()[-3:] == ["10.6/never", "0/0", "4/0"]
    # As the command prints it (`show`), at any width a pair is never broken across lines.
    from lifeguard_cli.tables import show

    for width in (60, 80, 100, 120, 160):
        narrow = Console(width=width, record=True)
        show(narrow, demo_table(documents))
        words = narrow.export_text().split()
        for pair in ("10.6/never", "0/0", "4/0", "2/7", "2.1/2.1"):
            assert pair in words, (width, pair)
