"""The rails as a state machine: any sequence of detections, re-deliveries, loops that go on, people's
changes and passing time, against the local AWS, keeps every promise of the rails."""

from __future__ import annotations

import itertools
import uuid
from collections.abc import Iterator
from datetime import UTC, datetime
from typing import Any

import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st

from lifeguard.aws.clients import aws_client
from lifeguard.aws.pcs import PcsGateway
from lifeguard.event_contract import make_detail
from lifeguard.group_state import GroupState, ProvenGood
from lifeguard.lifecycle import fingerprint_of
from lifeguard.remediation import RemediationSettings
from lifeguard.store.remediations import RemediationStore
from lifeguard.wiring import build_remediate
from lifeguard_cli.local import LocalPcs, ManualClock, serve_local_pcs
from tests.conftest import load_event
from tests.integration.conftest import Deployment, deploy, open_episode

pytestmark = pytest.mark.integration
CLUSTER = "pcs_abc123de45"
TERMINATE = load_event("configs/article-terminate.json")
GOOD = load_event("configs/article-reverted.json")
COOLDOWN_S, CAP = 1800, 3

Step = tuple[str, int]
STEPS = st.lists(
    st.one_of(
        st.tuples(st.just("detect"), st.just(0)),  # a new episode, on the group's current configuration
        st.tuples(st.just("again"), st.just(0)),  # the last detection delivered again
        st.tuples(st.just("goes-on"), st.just(0)),  # the last episode's loop goes on under today's config
        st.tuples(st.just("person"), st.just(0)),  # someone pushes the broken configuration again
        st.tuples(st.just("wait"), st.integers(min_value=1, max_value=240)),  # minutes pass
    ),
    min_size=1,
    max_size=10,
)


@pytest.fixture(scope="module")
def world(local: Any) -> Iterator[tuple[LocalPcs, ManualClock, Deployment, str]]:
    monkeypatch = pytest.MonkeyPatch()
    clock = ManualClock(datetime(2026, 10, 21, 1, 0, tzinfo=UTC))
    pcs = LocalPcs(clock=clock, update_seconds=0)
    with serve_local_pcs(pcs) as server:
        pcs.add_cluster("lca", cluster_id=CLUSTER)
        yield pcs, clock, deploy(local, monkeypatch, server.endpoint_url, "rails"), server.endpoint_url
    monkeypatch.undo()


@settings(max_examples=25)
@given(steps=STEPS)
# Always: a person puts the looping configuration back over Lifeguard's change, twice, the loop going on.
@example(steps=[("detect", 0), ("person", 0), ("goes-on", 0), ("goes-on", 0), ("person", 0), ("goes-on", 0)])
def test_any_sequence_keeps_the_cap_the_cooldown_the_ladder_and_audits_every_delivery(
    world: tuple[LocalPcs, ManualClock, Deployment, str], steps: list[Step]
) -> None:
    pcs, clock, deployed, endpoint = world
    group = f"pcs_{uuid.uuid4().hex[:10]}"
    pcs.add_compute_node_group(CLUSTER, f"lca-{group[4:]}", group_id=group, node_lifecycle_actions=TERMINATE)
    api = aws_client("pcs", endpoint)
    state = GroupState(cluster_id=CLUSTER, group_id=group)
    state.proven_good = ProvenGood(
        fingerprint=fingerprint_of(GOOD),
        node_lifecycle_actions=GOOD,
        modified_at=0,
        proven_at=0,
        instance_id="i-1",
    )
    deployed.wiring.store.save(state)
    controller = build_remediate(
        deployed.wiring,
        settings=RemediationSettings(default_mode="quarantine", cooldown_seconds=COOLDOWN_S, daily_cap=CAP),
        pcs=PcsGateway(aws_client("pcs", endpoint, attempts=1)),
        clock=lambda: clock().timestamp(),
        sleep=clock.advance,
    )
    delivered = 0
    last: dict[str, Any] | None = None
    episodes = 0

    def detection(episode: str, revision: int) -> dict[str, Any]:
        found = api.get_compute_node_group(clusterIdentifier=CLUSTER, computeNodeGroupIdentifier=group)
        actions = found["computeNodeGroup"].get("nodeLifecycleActions")
        detail = make_detail(
            episode_id=episode,
            cluster_id=CLUSTER,
            compute_node_group_id=group,
            kind="loop",
            suspect={"stage": "nodeBootstrapped", "script": "fail-terminate", "on_error": "TERMINATE"},
            revision=revision,
            config_fingerprint=fingerprint_of(actions),
            config_modified_at=int(found["computeNodeGroup"]["modifiedAt"].timestamp() * 1000),
        )
        open_episode(deployed.wiring.store, detail)
        return {"detail-type": "BootstrapLoopDetected", "detail": detail}

    store = RemediationStore(deployed.wiring.store.client, deployed.stack.table)
    changed = put_back = False  # Lifeguard changed the group in this episode; a person replaced its change
    for kind, minutes in steps:
        if kind == "wait":
            clock.advance(minutes * 60)
            continue
        if kind == "person":
            api.update_compute_node_group(
                clusterIdentifier=CLUSTER, computeNodeGroupIdentifier=group, nodeLifecycleActions=TERMINATE
            )
            put_back = changed
            continue
        if kind == "detect" or last is None:
            episodes += 1
            last = detection(f"ep-{episodes}", 1)
            changed = put_back = False
        elif kind == "goes-on":
            last = detection(last["detail"]["episode_id"], last["detail"]["revision"] + 1)
        controller.handle_event(last)
        delivered += 1
        clock.advance(1)
        (entry,) = store.history(CLUSTER, group, last=1)
        if kind == "goes-on" and put_back:
            # The loop goes on over what a person put back on Lifeguard's change: never "already" done.
            assert not (entry.reason or "").startswith("Already remediated"), entry.reason
        if entry.decision == "applied":
            changed, put_back = True, False

    history = store.history(CLUSTER, group)
    assert len(history) == delivered  # every delivery is audited: applied, skipped, failed or duplicate
    applied = [entry for entry in history if entry.decision == "applied"]
    for entry in applied:
        in_a_day = [other for other in applied if 0 <= entry.at - other.at < 24 * 3600]
        assert len(in_a_day) <= CAP
    for first, second in itertools.pairwise(applied):
        if first.episode_id != second.episode_id:
            assert second.at - first.at >= COOLDOWN_S
    # Per episode, the ladder; it starts again only where someone else's change replaced Lifeguard's (a
    # change of Lifeguard's whose configuration before is not the one its last change made), and then only
    # once the cooldown of Lifeguard's last change is over (only an escalation is not held by it).
    changes = [change for change in store.ledger(CLUSTER, group).changes if change.counts]
    assert [change.action for change in changes] == [entry.action for entry in applied]
    put_back = sum(1 for kind, _ in steps if kind == "person")
    for episode in {entry.episode_id for entry in applied}:
        ladders: list[list[str]] = []
        made = ""
        for change in (change for change in changes if change.episode_id == episode):
            if not ladders or change.fingerprint_before != made:
                if ladders:  # started again: held by the cooldown of Lifeguard's change before it
                    before = [other.at for other in changes if other.at < change.at]
                    assert change.at - max(before) >= COOLDOWN_S, (change.at, before)
                ladders.append([])
            ladders[-1].append(change.action)
            made = change.fingerprint_after
        assert len(ladders) - 1 <= put_back, ladders
        for ladder in ladders:
            assert ladder in (["quarantine"], ["quarantine", "revert"]), ladders
