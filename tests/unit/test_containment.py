"""What a node is known to have booted, on which containment and resolution judge its reports."""

from __future__ import annotations

from lifeguard.group_state import BootOutcome, GroupState, KnownConfig
from lifeguard.handlers.containment import booted_actions, booted_current

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
