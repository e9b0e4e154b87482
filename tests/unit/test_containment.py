"""What a node is known to have booted, on which containment and resolution judge its reports."""

from __future__ import annotations

from lifeguard.attribution import BootRuns
from lifeguard.detection import DetectionSettings
from lifeguard.group_state import BootOutcome, Episode, Failure, GroupState, KnownConfig, ProvenGood, Suspect
from lifeguard.handlers.containment import (
    booted_actions,
    booted_current,
    newest_event_ms,
    revoke_proof_of_failed_node,
    settle,
)
from tests.unit.test_attribution import run

MIN = 60_000
T0 = 1_792_544_685_000  # 2026-10-21 01:04:45 UTC, the article's first launch
ACTIONS = {
    "stages": {
        "nodeBootstrapped": [
            {"name": "mount-fsx", "scriptSource": {"scriptLocation": "s3://lca-scripts/mount.sh"}}
        ]
    }
}


def test_a_node_launched_after_the_group_was_last_read_is_not_known_to_have_booted_that_configuration() -> (
    None
):
    """Launched on the configuration (at or after its modifiedAt) and the group read since: known. Launched
    after the last read, it may have booted a newer one: its reports are taken at their word, not held to
    an onError of a configuration it may not have run."""
    state = GroupState(cluster_id="pcs_abc123de45", group_id="pcs_abcdef01")
    state.config = KnownConfig(
        modified_at=1_000, fingerprint="f" * 64, node_lifecycle_actions=ACTIONS, checked_at=2_000
    )
    within = BootOutcome("i-0b", "lca-static-2", 1_800, True, launched_at=1_500)
    later = BootOutcome("i-0a", "lca-static-1", 4_000, True, launched_at=3_000)
    before = BootOutcome("i-0c", "lca-static-3", 1_200, True, launched_at=900)
    assert booted_current(state, within)
    assert booted_actions(state, within) == ACTIONS
    assert not booted_current(state, later)
    assert booted_actions(state, later) is None
    assert not booted_current(state, before)


def _group() -> GroupState:
    return GroupState(cluster_id="pcs_abc123de45", group_id="pcs_abcdef01")


def test_a_proof_taken_back_does_not_bring_back_one_whose_configuration_looped_since() -> None:
    """README: a proof withdrawn leaves the proof before it standing, unless that one's node failed or it
    looped since: a revert would put back a configuration known to loop."""
    state = _group()
    old = ProvenGood(
        fingerprint="a" * 64,
        node_lifecycle_actions={},
        modified_at=T0,
        proven_at=T0 + 5 * MIN,
        instance_id="i-old",
    )
    new = ProvenGood(
        fingerprint="b" * 64,
        node_lifecycle_actions={},
        modified_at=T0 + 60 * MIN,
        proven_at=T0 + 70 * MIN,
        instance_id="i-new",
    )
    state.proven_good, state.proven_before = new, old
    state.last_episode = Episode(  # the old configuration looped after its proof, and that loop ended
        episode_id="ep-1",
        kind="loop",
        opened_at=T0 + 30 * MIN,
        config_fingerprint="a" * 64,
        failures=[Failure(instance_id=f"i-f{n}", event_timestamp=T0 + (20 + n) * MIN) for n in range(2)],
        signals=["scaling_log"],
        resolved_at=T0 + 50 * MIN,
    )
    state.outcomes["i-new"] = BootOutcome("i-new", None, T0 + 72 * MIN, False, T0 + 65 * MIN)
    assert revoke_proof_of_failed_node(state)
    assert (state.proven_good, state.proven_before) == (None, None)


def test_a_success_whose_node_failed_another_script_under_terminate_ends_the_loop() -> None:
    """The loop's script passed there; another script's TERMINATE failure (nodeReady) ends the loop as a
    success does (the README), and PCS's end of the node opens it again. Only a node the loop's script
    still fails on is held back by such a failure (it is kept by nothing)."""
    state = _group()
    failures = [Failure(instance_id=f"i-f{n}", event_timestamp=T0 + m * MIN) for n, m in enumerate((2, 4))]
    for n, failure in enumerate(failures):
        state.outcomes[failure.instance_id] = BootOutcome(
            failure.instance_id, None, failure.event_timestamp, False, T0 + (2 * n + 1) * MIN
        )
    success = BootOutcome("i-ok", None, T0 + 10 * MIN, True, T0 + 7 * MIN)
    state.outcomes["i-ok"] = success
    state.episode = Episode(
        episode_id="ep-1",
        kind="loop",
        opened_at=T0 + 4 * MIN,
        config_modified_at=T0,
        failures=failures,
        signals=["scaling_log", "node_reports"],
        suspect=Suspect(
            stage="nodeBootstrapped", script="mount-fsx", on_error="TERMINATE", instances=["i-f0"]
        ),
    )
    at_s = (T0 + 10 * MIN) // 1000 + 2
    other = run("i-ok", "ready-check", stage="nodeReady", started_at=at_s, ended_at=at_s + 1)
    settings = DetectionSettings("notify", 2, 60)
    events = settle(
        state,
        settings,
        success,
        BootRuns([other], 1),
        now_ms=newest_event_ms(state),
        unreported=False,
        lifeguards=lambda: False,
    )
    assert [event.detail_type for event in events] == ["LoopResolved"]
