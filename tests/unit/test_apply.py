"""How any change of a group is made (remediation and `lifeguard undo` alike): the intent saved pending in
the ledger before PCS is asked, applied once PCS took it, and left pending when PCS or the table failed, so
a retry recognises it. PCS is the local model in process, the table the in-memory fake."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

import pytest

from lifeguard.aws.pcs import PcsGateway
from lifeguard.errors import AwsCallError
from lifeguard.lifecycle import fingerprint_of
from lifeguard.remediation.apply import ChangeMaker
from lifeguard.remediation.records import AppliedChange, Ledger
from lifeguard.store.remediations import RemediationStore
from lifeguard_cli.local.pcs import LocalPcs, ManualClock
from tests.unit.fakes import FakeDynamoDB, LocalPcsClient, client_error

CLUSTER, GROUP = "pcs_abc123de45", "pcs_abcdef01"
SCRIPT = {"name": "setup", "scriptSource": {"scriptLocation": "s3://bucket/setup.sh"}}
BEFORE = {"stages": {"nodeBootstrapped": [{**SCRIPT, "onError": "TERMINATE"}]}}
AFTER = {"stages": {"nodeBootstrapped": [{**SCRIPT, "onError": "STOP_SEQUENCE"}]}}


class World:
    def __init__(self) -> None:
        self.clock = ManualClock(datetime(2026, 10, 21, 1, 0, tzinfo=UTC))
        self.pcs = LocalPcs(clock=self.clock, update_seconds=60)
        self.pcs.add_cluster("lca", cluster_id=CLUSTER)
        self.pcs.add_compute_node_group(CLUSTER, "lca-static", group_id=GROUP, node_lifecycle_actions=BEFORE)
        self.table = FakeDynamoDB()
        self.store = RemediationStore(self.table, "t")  # type: ignore[arg-type]
        self.maker = ChangeMaker(self.store, PcsGateway(LocalPcsClient(self.pcs)))

    def intent(self, **changed: Any) -> AppliedChange:
        fields: dict[str, Any] = {
            "at": 1.0,
            "episode_id": "ep-1",
            "revision": 1,
            "action": "quarantine",
            "config_before": BEFORE,
            "config_after": AFTER,
            "fingerprint_before": fingerprint_of(BEFORE),
            "fingerprint_after": fingerprint_of(AFTER),
            "client_token": "lifeguard-0123456789",
        }
        return AppliedChange(**{**fields, **changed})

    def actions(self) -> Any:
        group = LocalPcsClient(self.pcs).get_compute_node_group(
            clusterIdentifier=CLUSTER, computeNodeGroupIdentifier=GROUP
        )
        return group["computeNodeGroup"].get("nodeLifecycleActions")


def test_a_change_is_recorded_pending_then_made_then_recorded_applied() -> None:
    world, ledger = World(), Ledger()
    intent = world.intent(status="applied")
    world.maker.record(CLUSTER, GROUP, ledger=ledger, intent=intent)
    stored = world.store.ledger(CLUSTER, GROUP).changes
    assert [c.status for c in stored] == ["pending"]  # written before PCS is asked
    assert world.actions() == BEFORE
    updated = world.maker.ask(CLUSTER, GROUP, intent)
    assert world.actions() == AFTER
    world.maker.applied(CLUSTER, GROUP, ledger=ledger, intent=intent, updated=updated)
    (change,) = world.store.ledger(CLUSTER, GROUP).changes
    assert change.status == "applied"
    assert change.modified_at_after == updated.modified_at_ms


def test_asking_again_with_the_same_token_is_the_same_change_not_a_second_one() -> None:
    world = World()
    intent = world.intent()
    first = world.maker.ask(CLUSTER, GROUP, intent)
    again = world.maker.ask(CLUSTER, GROUP, intent)
    assert again.modified_at_ms == first.modified_at_ms
    updates = [c for c in world.pcs.calls if c.operation == "UpdateComputeNodeGroup" and c.error is None]
    assert len(updates) == 2
    assert world.actions() == AFTER


def test_a_refused_change_is_raised_and_stays_pending_in_the_ledger() -> None:
    world, ledger = World(), Ledger()
    intent = world.intent()
    world.maker.record(CLUSTER, GROUP, ledger=ledger, intent=intent)
    world.pcs.inject_fault("ThrottlingException", operation="UpdateComputeNodeGroup", retry_after_seconds=5)
    with pytest.raises(AwsCallError) as raised:
        world.maker.ask(CLUSTER, GROUP, intent)
    assert (raised.value.code, raised.value.retry_after_seconds) == ("ThrottlingException", 5)
    assert world.actions() == BEFORE
    assert [c.status for c in world.store.ledger(CLUSTER, GROUP).changes] == ["pending"]


def test_asking_goes_through_the_retrying_it_is_given() -> None:
    world = World()
    attempts: list[int] = []

    def twice(call: Any) -> Any:
        attempts.append(1)
        call()
        attempts.append(2)
        return call()

    world.maker.ask(CLUSTER, GROUP, world.intent(), twice)
    assert attempts == [1, 2]


def test_a_lost_ledger_write_after_pcs_took_the_change_is_raised_so_the_retry_finds_it_pending() -> None:
    world, ledger = World(), Ledger()
    intent = world.intent()
    world.maker.record(CLUSTER, GROUP, ledger=ledger, intent=intent)
    updated = world.maker.ask(CLUSTER, GROUP, intent)
    world.table.fail["PutItem"] = [client_error("InternalServerError", "PutItem")]
    with pytest.raises(AwsCallError):
        world.maker.applied(CLUSTER, GROUP, ledger=ledger, intent=intent, updated=updated)
    assert world.actions() == AFTER
    (change,) = world.store.ledger(CLUSTER, GROUP).changes
    assert change.status == "pending"
    assert change.fingerprint_after == fingerprint_of(world.actions())


def test_an_intent_no_one_can_confirm_any_more_is_recorded_unconfirmed_and_still_counts() -> None:
    world, ledger = World(), Ledger()
    intent = world.intent()
    world.maker.record(CLUSTER, GROUP, ledger=ledger, intent=intent)
    world.maker.unconfirmed(CLUSTER, GROUP, ledger=ledger, intent=intent)
    stored = world.store.ledger(CLUSTER, GROUP)
    assert [c.status for c in stored.changes] == ["unconfirmed"]
    assert stored.made_since(0) == [intent.at]  # the cooldown and the cap count it
    assert stored.of_episode("ep-1") == stored.changes  # and the ladder
    found = stored.intent("ep-1", 1)
    assert found is not None
    assert found.status == "unconfirmed"  # a retry finds it settled, not pending


def test_an_intent_that_will_not_be_made_is_recorded_abandoned_and_no_longer_counts() -> None:
    world, ledger = World(), Ledger()
    intent = world.intent()
    world.maker.record(CLUSTER, GROUP, ledger=ledger, intent=intent)
    world.maker.abandoned(CLUSTER, GROUP, ledger=ledger, intent=intent)
    stored = world.store.ledger(CLUSTER, GROUP)
    assert [c.status for c in stored.changes] == ["abandoned"]
    assert stored.intent("ep-1", 1) is None  # a retry of the detection does not find it pending
    assert world.actions() == BEFORE
