"""What `lifeguard status` and `history` tell of an open episode's kept nodes (`lifeguard_cli.operate`):
a node PCS has since ended is kept no more, however PCS ended it."""

from __future__ import annotations

from lifeguard.group_state import BootOutcome, Episode, GroupState
from lifeguard_cli.operate import _episode, _episode_ends

UP, UNHEALTHY, FAILED_CHECK = "i-0up000000000000", "i-0sick00000000000", "i-0check0000000000"
CONTAINED_AT = 1_792_545_600_000


def contained_state() -> GroupState:
    """A loop contained by three kept nodes: one still up, one PCS replaced as unhealthy, one PCS ended
    after its ACTIVE (a nodeReady check under TERMINATE failed: its outcome is that failure now)."""
    state = GroupState(cluster_id="pcs_abc123de45", group_id="pcs_abcdef01")
    state.episode = Episode(
        episode_id="ep-1",
        kind="loop",
        opened_at=CONTAINED_AT - 600_000,
        config_modified_at=1,
        config_fingerprint="a" * 64,
        contained_at=CONTAINED_AT,
        kept=[UP, UNHEALTHY, FAILED_CHECK],
    )
    state.outcomes = {
        UP: BootOutcome(UP, "compute-1", CONTAINED_AT, True),
        UNHEALTHY: BootOutcome(UNHEALTHY, "compute-2", CONTAINED_AT + 1_000, True),
        FAILED_CHECK: BootOutcome(FAILED_CHECK, "compute-3", CONTAINED_AT + 90_000, False),
    }
    state.unhealthy = {UNHEALTHY: CONTAINED_AT + 3_600_000}
    return state


def test_status_keeps_only_the_kept_nodes_still_up_and_names_how_the_others_ended() -> None:
    episode = _episode(contained_state())
    assert episode is not None
    assert (episode["kept"], episode["replaced"], episode["ended"]) == ([UP], [UNHEALTHY], [FAILED_CHECK])


def test_history_dates_each_kept_node_s_end_as_pcs_logged_it() -> None:
    ends = [(e.decision, e.at, e.reason) for e in _episode_ends(contained_state())]
    assert [(decision, at) for decision, at, _ in ends] == [
        ("contained", CONTAINED_AT / 1000),
        ("replaced", (CONTAINED_AT + 3_600_000) / 1000),
        ("ended", (CONTAINED_AT + 90_000) / 1000),
    ]
    assert ends[1][2] == f"kept node {UNHEALTHY} terminated by PCS as unhealthy (TERMINATED/UNHEALTHY_NODE)"
    assert (
        ends[2][2]
        == f"kept node {FAILED_CHECK} terminated by PCS after its ACTIVE (TERMINATED/BOOTSTRAP_FAILED)"
    )
