"""The remediate handler's logic against the local AWS over HTTP: PCS changes, rails, faults, audit."""

from __future__ import annotations

import threading
import types
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

import pytest

from lifeguard.aws.clients import aws_client
from lifeguard.aws.pcs import PcsGateway
from lifeguard.errors import AwsCallError
from lifeguard.event_contract import DETAIL_KEYS, make_detail
from lifeguard.group_state import GroupState, ProvenGood
from lifeguard.lifecycle import fingerprint_of
from lifeguard.remediation import RemediationParkedError, RemediationSettings, Remediator
from lifeguard.store.remediations import RemediationStore
from lifeguard.wiring import Wiring, build_remediate
from lifeguard_cli import operate
from lifeguard_cli.local import LocalPcs, ManualClock, serve_local_pcs
from lifeguard_cli.local.stack import LocalStack
from lifeguard_cli.operate import Operator, OperatorError
from tests.conftest import ARTICLE_SUSPECT, load_event
from tests.integration.conftest import deploy, open_episode

pytestmark = pytest.mark.integration
CLUSTER, GROUP = "pcs_abc123de45", "pcs_abcdef01"
START = datetime(2026, 10, 21, 1, 0, tzinfo=UTC)
TERMINATE = load_event("configs/article-terminate.json")
GOOD = load_event("configs/article-reverted.json")
SUSPECT = ARTICLE_SUSPECT


@dataclass
class Env:
    pcs: LocalPcs
    clock: ManualClock
    stack: LocalStack
    local: Any
    wiring: Wiring
    pcs_endpoint: str
    sleeps: list[float] = field(default_factory=list)

    def controller(self, **settings: Any) -> Remediator:
        def sleep(seconds: float) -> None:
            self.sleeps.append(seconds)
            self.clock.advance(seconds)

        return build_remediate(
            self.wiring,
            settings=RemediationSettings(**{"default_mode": "quarantine", **settings}),
            pcs=PcsGateway(aws_client("pcs", self.pcs_endpoint, attempts=1)),
            clock=lambda: self.clock().timestamp(),
            sleep=sleep,
        )

    @property
    def api(self) -> Any:
        """PCS as a person reaches it (boto3 over HTTP)."""
        return aws_client("pcs", self.pcs_endpoint)

    def group(self) -> dict[str, Any]:
        found: dict[str, Any] = self.api.get_compute_node_group(
            clusterIdentifier=CLUSTER, computeNodeGroupIdentifier=GROUP
        )["computeNodeGroup"]
        return found

    def person_sets(self, actions: dict[str, Any]) -> None:
        """Someone runs update-compute-node-group."""
        self.api.update_compute_node_group(
            clusterIdentifier=CLUSTER, computeNodeGroupIdentifier=GROUP, nodeLifecycleActions=actions
        )

    def tag(self, tags: dict[str, str]) -> None:
        self.api.tag_resource(resourceArn=self.group()["arn"], tags=tags)

    def detection(self, episode: str = "ep-1", revision: int = 1, suspect: Any = SUSPECT) -> dict[str, Any]:
        """A BootstrapLoopDetected event of the group as it is now, its episode open in Lifeguard's state."""
        group = self.group()
        actions = group.get("nodeLifecycleActions")
        detail = make_detail(
            episode_id=episode,
            cluster_id=CLUSTER,
            compute_node_group_id=GROUP,
            kind="loop",
            failures=[
                {"instance_id": i, "scheduler_node_id": "lca-static-1", "event_timestamp": 1}
                for i in SUSPECT["instances"]
            ],
            suspect=suspect,
            mode="quarantine",
            config_before=actions,
            revision=revision,
            config_fingerprint=fingerprint_of(actions),
            config_modified_at=int(group["modifiedAt"].timestamp() * 1000),
        )
        open_episode(self.wiring.store, detail)
        return {"detail-type": "BootstrapLoopDetected", "source": "lifeguard", "detail": detail}

    def bus(self) -> list[dict[str, Any]]:
        return self.stack.received_events(self.local.client("sqs"))

    def updates(self) -> list[Any]:
        return [c for c in self.pcs.calls if c.operation == "UpdateComputeNodeGroup" and c.error is None]

    def history(self) -> list[Any]:
        return RemediationStore(self.wiring.store.client, self.stack.table).history(CLUSTER, GROUP)

    def settle(self) -> None:
        self.clock.advance(120)


@pytest.fixture
def env(local: Any, monkeypatch: pytest.MonkeyPatch) -> Iterator[Env]:
    clock = ManualClock(START)
    pcs = LocalPcs(clock=clock, update_seconds=60)
    with serve_local_pcs(pcs) as server:
        pcs.add_cluster("lca", cluster_id=CLUSTER)
        pcs.add_compute_node_group(CLUSTER, "lca-static", group_id=GROUP, node_lifecycle_actions=TERMINATE)
        deployed = deploy(local, monkeypatch, server.endpoint_url, "rm")
        yield Env(pcs, clock, deployed.stack, local, deployed.wiring, server.endpoint_url)


def test_quarantine_switches_the_suspect_to_stop_sequence_once_and_audits_it(env: Env) -> None:
    events = env.controller().handle_event(env.detection())
    assert [e.detail_type for e in events] == ["RemediationApplied"]
    after = env.group()["nodeLifecycleActions"]
    expected = load_event("configs/article-terminate.json")
    expected["stages"]["nodeBootstrapped"][0]["onError"] = "STOP_SEQUENCE"
    assert after == expected
    (update,) = env.updates()
    assert update.params["clientToken"].startswith("lifeguard-")
    (published,) = env.bus()
    detail = published["detail"]
    assert set(DETAIL_KEYS) <= set(detail)
    assert published["detail-type"] == "RemediationApplied"
    assert detail["dry_run"] is False
    assert detail["config_before"] == TERMINATE
    assert detail["config_after"] == expected
    assert detail["diff"] == [
        {"path": "stages.nodeBootstrapped[0].onError", "old": "TERMINATE", "new": "STOP_SEQUENCE"}
    ]
    assert detail["undo"] == f"lifeguard undo {GROUP} --cluster {CLUSTER}"
    (entry,) = env.history()
    assert (entry.decision, entry.action, entry.config_before, entry.config_after) == (
        "applied",
        "quarantine",
        TERMINATE,
        expected,
    )


def test_a_detection_delivered_again_changes_nothing_more_and_is_counted(env: Env) -> None:
    controller = env.controller()
    event = env.detection()
    controller.handle_event(event)
    env.settle()
    assert controller.handle_event(event) == []
    assert controller.handle_event(event) == []
    assert len(env.updates()) == 1
    assert [e["detail-type"] for e in env.bus()] == ["RemediationApplied"]
    assert [e.decision for e in env.history()] == ["applied", "duplicate", "duplicate"]


def test_eight_concurrent_detections_of_one_episode_make_exactly_one_change(env: Env) -> None:
    event = env.detection()
    outcomes: list[Any] = []

    def deliver() -> None:
        controller = build_remediate(
            env.wiring,
            settings=RemediationSettings(default_mode="quarantine", lock_wait_seconds=60),
            pcs=PcsGateway(aws_client("pcs", env.pcs_endpoint, attempts=1)),
        )
        try:
            outcomes.append([e.detail_type for e in controller.handle_event(event)])
        except Exception as exc:  # noqa: BLE001 (every outcome is asserted below)
            outcomes.append(exc)

    threads = [threading.Thread(target=deliver) for _ in range(8)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert sorted(map(str, outcomes)) == sorted(["['RemediationApplied']"] + ["[]"] * 7)
    assert len(env.updates()) == 1
    assert [e["detail-type"] for e in env.bus()] == ["RemediationApplied"]
    decisions = sorted(e.decision for e in env.history())
    assert decisions == ["applied"] + ["duplicate"] * 7


def test_throttling_is_retried_honouring_retry_after_seconds(env: Env) -> None:
    env.pcs.inject_fault(
        "ThrottlingException", operation="UpdateComputeNodeGroup", times=2, retry_after_seconds=7
    )
    events = env.controller().handle_event(env.detection())
    assert [e.detail_type for e in events] == ["RemediationApplied"]
    assert env.sleeps == [7, 7]
    assert len(env.updates()) == 1


def test_a_conflict_while_the_group_updates_is_retried_with_backoff(env: Env) -> None:
    env.pcs.inject_fault("ConflictException", operation="UpdateComputeNodeGroup", times=3)
    events = env.controller().handle_event(env.detection())
    assert [e.detail_type for e in events] == ["RemediationApplied"]
    assert env.sleeps == [1.0, 2.0, 4.0]


def test_500s_that_outlast_the_retries_park_the_event_and_say_so_then_a_retry_applies(env: Env) -> None:
    env.pcs.inject_fault("InternalServerException", operation="UpdateComputeNodeGroup", times=6)
    controller = env.controller()
    event = env.detection()
    with pytest.raises(RemediationParkedError, match="InternalServerException"):
        controller.handle_event(event)
    assert env.group()["nodeLifecycleActions"] == TERMINATE
    (failed,) = env.bus()
    assert failed["detail-type"] == "RemediationFailed"
    assert "parked" in failed["detail"]["reason"]
    assert [e.decision for e in env.history()] == ["failed"]
    # The Lambda's retry of the same event (PCS has recovered) applies it: nothing was dropped.
    assert [e.detail_type for e in controller.handle_event(event)] == ["RemediationApplied"]
    assert env.group()["nodeLifecycleActions"]["stages"]["nodeBootstrapped"][0]["onError"] == "STOP_SEQUENCE"


def test_a_group_changed_since_the_detection_is_left_alone_with_a_reason(env: Env) -> None:
    event = env.detection()
    env.person_sets(GOOD)
    env.settle()
    (skipped,) = env.controller().handle_event(event)
    assert skipped.detail_type == "RemediationSkipped"
    assert "configuration changed since the detection" in skipped.detail["reason"]
    assert env.group()["nodeLifecycleActions"] == GOOD


def test_an_updating_group_is_waited_for_before_acting(env: Env) -> None:
    env.person_sets(TERMINATE)
    event = env.detection()  # of the configuration being applied, while the group is UPDATING
    assert env.group()["status"] == "UPDATING"
    (applied,) = env.controller().handle_event(event)
    assert applied.detail_type == "RemediationApplied"
    assert sum(env.sleeps) >= 60


@pytest.mark.parametrize(
    ("tags", "settings", "says"),
    [
        ({"lifeguard:mode": "notify"}, {}, "Dry run (mode notify)"),
        ({}, {"dry_run": True}, "the stack's DryRun is on"),
    ],
)
def test_notify_and_dry_run_publish_the_same_diff_and_change_nothing(
    env: Env, tags: dict[str, str], settings: dict[str, Any], says: str
) -> None:
    if tags:
        env.tag(tags)
    (event,) = env.controller(**settings).handle_event(env.detection())
    assert event.detail_type == "RemediationSkipped"
    assert event.detail["dry_run"] is True
    assert says in event.detail["reason"]
    assert event.detail["diff"] == [
        {"path": "stages.nodeBootstrapped[0].onError", "old": "TERMINATE", "new": "STOP_SEQUENCE"}
    ]
    assert env.updates() == []
    assert env.group()["nodeLifecycleActions"] == TERMINATE


def test_mode_off_leaves_the_group_alone(env: Env) -> None:
    env.tag({"lifeguard:mode": "off"})
    (event,) = env.controller().handle_event(env.detection())
    assert event.detail_type == "RemediationSkipped"
    assert "off" in event.detail["reason"]
    assert env.updates() == []


def test_a_second_episode_within_the_cooldown_is_only_reported_and_the_daily_cap_holds(env: Env) -> None:
    controller = env.controller(cooldown_seconds=1800, daily_cap=2)
    controller.handle_event(env.detection("ep-1"))
    env.settle()
    env.person_sets(TERMINATE)  # a person
    env.settle()
    (cooled,) = controller.handle_event(env.detection("ep-2"))
    assert cooled.detail_type == "RemediationSkipped"
    assert cooled.detail["reason"].startswith("Cooldown:")
    assert cooled.detail["diff"]  # what would have been done
    env.clock.advance(1800)
    assert [e.detail_type for e in controller.handle_event(env.detection("ep-3"))] == ["RemediationApplied"]
    env.settle()
    env.person_sets(TERMINATE)
    env.clock.advance(1900)
    (capped,) = controller.handle_event(env.detection("ep-4"))
    assert capped.detail["reason"].startswith("Daily cap")
    assert len(env.updates()) == 2 + 2  # two by Lifeguard, two by the person


def test_a_loop_that_goes_on_after_quarantine_escalates_to_revert_then_to_a_person(env: Env) -> None:
    state = GroupState(cluster_id=CLUSTER, group_id=GROUP)
    state.proven_good = ProvenGood(
        fingerprint=fingerprint_of(GOOD),
        node_lifecycle_actions=GOOD,
        modified_at=0,
        proven_at=0,
        instance_id="i-good",
    )
    env.wiring.store.save(state)
    controller = env.controller()
    assert [e.detail_type for e in controller.handle_event(env.detection(revision=1))] == [
        "RemediationApplied"
    ]
    env.settle()
    # The loop goes on under the quarantined configuration: detection publishes the episode again.
    (reverted,) = controller.handle_event(env.detection(revision=2))
    assert reverted.detail_type == "RemediationApplied"
    assert reverted.detail["action"] == "revert"
    assert "escalating to revert" in reverted.detail["reason"]
    assert env.group()["nodeLifecycleActions"] == GOOD
    env.settle()
    (stopped,) = controller.handle_event(env.detection(revision=3))
    assert stopped.detail_type == "RemediationSkipped"
    assert "a person must look" in stopped.detail["reason"]
    assert len(env.updates()) == 2


def test_an_attribution_update_after_the_change_is_not_acted_on_again(env: Env) -> None:
    controller = env.controller()
    first = env.detection(revision=1, suspect=None)
    controller.handle_event(first)
    env.settle()
    later = {**first, "detail": {**first["detail"], "revision": 2, "suspect": SUSPECT}}
    open_episode(env.wiring.store, later["detail"])  # node_reports named the suspect: revision 2
    (skipped,) = controller.handle_event(later)
    assert skipped.detail_type == "RemediationSkipped"
    assert "Already remediated" in skipped.detail["reason"]
    assert len(env.updates()) == 1


def test_a_group_that_no_longer_exists_is_skipped(env: Env) -> None:
    event = env.detection()
    env.api.delete_compute_node_group(clusterIdentifier=CLUSTER, computeNodeGroupIdentifier=GROUP)
    (skipped,) = env.controller().handle_event(event)
    assert skipped.detail_type == "RemediationSkipped"
    assert "no longer exists" in skipped.detail["reason"]


def test_events_that_are_not_detections_are_left_alone(env: Env) -> None:
    controller = env.controller()
    assert controller.handle_event({"detail-type": "LoopResolved", "detail": {}}) == []
    assert (
        controller.handle_event({"detail-type": "BootstrapLoopDetected", "detail": {"episode_id": ""}}) == []
    )
    assert env.updates() == []


def test_a_group_that_cannot_be_read_parks_the_event_with_a_reason(env: Env) -> None:
    event = env.detection()
    env.pcs.inject_fault("InternalServerException", operation="GetComputeNodeGroup", times=6)
    with pytest.raises(RemediationParkedError, match="GetComputeNodeGroup failed: InternalServerException"):
        env.controller().handle_event(event)
    (failed,) = env.bus()
    assert failed["detail-type"] == "RemediationFailed"
    assert failed["detail"]["reason"].endswith("the event is parked for a retry")
    assert env.updates() == []


def test_a_group_still_updating_after_the_wait_parks_the_event(env: Env) -> None:
    env.pcs.update_seconds = 3600
    env.person_sets(TERMINATE)
    event = env.detection()
    with pytest.raises(RemediationParkedError, match="still UPDATING after 240 s"):
        env.controller().handle_event(event)
    assert [e["detail-type"] for e in env.bus()] == ["RemediationFailed"]
    assert sum(env.sleeps) == 240


def test_a_change_someone_else_replaced_is_made_again_after_the_cooldown_if_its_loop_goes_on(
    env: Env,
) -> None:
    (applied,) = env.controller().handle_event(env.detection(revision=1))
    assert applied.detail_type == "RemediationApplied"
    env.settle()
    env.person_sets(TERMINATE)  # a deploy of the group's template, a person, an update PCS did not keep
    env.settle()
    # The loop goes on, on the configuration Lifeguard changed: not "already remediated", and not answered
    # within the cooldown either (no escalation: the ladder starts again), as a new episode would not be.
    (held,) = env.controller().handle_event(env.detection(revision=2))
    assert held.detail_type == "RemediationSkipped", held.detail["reason"]
    assert held.detail["reason"].startswith("Cooldown: Lifeguard changed this group ")
    assert env.group()["nodeLifecycleActions"] == TERMINATE
    env.clock.advance(1800)  # the cooldown over, the loop still going
    (again,) = env.controller().handle_event(env.detection(revision=3))
    assert again.detail_type == "RemediationApplied", again.detail["reason"]
    assert again.detail["action"] == "quarantine"
    assert (
        "is no longer in the group (someone else changed its configuration since)" in again.detail["reason"]
    )
    assert env.group()["nodeLifecycleActions"] != TERMINATE
    env.settle()
    # Its loop goes on under the second quarantine: the ladder counts from it, the cooldown lets it by.
    (escalated,) = env.controller().handle_event(env.detection(revision=4))
    assert "The loop went on after quarantine: escalating to revert." in escalated.detail["reason"]
    assert [entry.decision for entry in env.history()] == ["applied", "skipped", "applied", "applied"]


def _operator(env: Env) -> Operator:
    return Operator(
        env.stack.table,
        client=lambda service: aws_client(
            service, env.pcs_endpoint if service == "pcs" else env.local.moto.endpoint_url
        ),
    )


def _answer_lost(update: Callable[..., Any], code: str = "InternalServerException") -> Callable[..., Any]:
    def took_it(*args: Any) -> Any:
        update(*args)  # PCS makes the change, and its answer is lost (or cannot be read)
        raise AwsCallError("UpdateComputeNodeGroup", code, "answer lost")

    return took_it


def test_an_answer_lost_then_the_old_configuration_set_again_is_not_called_applied(env: Env) -> None:
    """PCS took the quarantine, its answer was lost, and someone put the old configuration back before the
    retry: sent again, the update's clientToken would have PCS answer the first as made and make nothing.
    The change is unconfirmed (it counts), never called applied, and the group is left as they set it."""
    controller = env.controller()
    update = controller.pcs.update_lifecycle_actions
    sent: list[int] = []

    def lost_then_set_again(*args: Any) -> Any:
        sent.append(1)
        if len(sent) == 1:
            update(*args)
            env.clock.advance(120)
            env.person_sets(TERMINATE)  # a deployment puts the configuration from before back
            raise AwsCallError("UpdateComputeNodeGroup", "ReadTimeoutError", "answer lost")
        return update(*args)

    controller.pcs.update_lifecycle_actions = lost_then_set_again  # type: ignore[method-assign]
    (decided,) = controller.handle_event(env.detection())
    assert decided.detail_type == "RemediationSkipped"
    assert "PCS may have made it, so it counts" in decided.detail["reason"]
    assert len(sent) == 1
    assert env.group()["nodeLifecycleActions"] == TERMINATE


def test_a_retry_after_the_operator_undid_the_change_says_so_and_changes_nothing(env: Env) -> None:
    event = env.detection()
    controller = env.controller()
    controller.pcs.update_lifecycle_actions = _answer_lost(controller.pcs.update_lifecycle_actions)  # type: ignore[method-assign]
    with pytest.raises(RemediationParkedError):
        controller.handle_event(event, remaining_ms=30_500)  # no time left for a retry: parked
    assert env.group()["nodeLifecycleActions"] != TERMINATE  # PCS holds the quarantine
    env.settle()
    assert _operator(env).undo(GROUP, CLUSTER).applied
    env.settle()
    assert env.group()["nodeLifecycleActions"] == TERMINATE
    (retried,) = env.controller().handle_event(event)  # Lambda retries the parked event
    assert retried.detail_type == "RemediationSkipped"
    assert retried.detail["reason"].startswith("Undone: the operator undid Lifeguard's quarantine at")
    assert env.group()["nodeLifecycleActions"] == TERMINATE
    assert len(env.updates()) == 2  # the quarantine and its undo
    # The loop goes on after the undo: Lifeguard leaves the episode to people.
    (later,) = env.controller().handle_event(env.detection(revision=2))
    assert later.detail["reason"].startswith("Undone:")
    assert len(env.updates()) == 2


@pytest.mark.parametrize("code", ["InvalidAnswer", "ResponseParserError", "IncompleteReadError"])
def test_an_undo_whose_answer_cannot_be_read_is_not_let_go(env: Env, code: str) -> None:
    """PCS took the undo and its answer could not be read: the undo stays set out, so the next run finds
    it made, and the remediation of the same episode holds back (the operator's undo stands)."""
    (applied,) = env.controller().handle_event(env.detection())
    assert applied.detail_type == "RemediationApplied"
    env.settle()
    operator = _operator(env)
    gateway = PcsGateway(aws_client("pcs", env.pcs_endpoint))
    gateway.update_lifecycle_actions = _answer_lost(gateway.update_lifecycle_actions, code)  # type: ignore[method-assign]
    operator._pcs_client = gateway
    with pytest.raises(OperatorError, match=f"lost or unreadable \\({code}\\); it may have been made"):
        operator.undo(GROUP, CLUSTER)
    env.settle()
    assert env.group()["nodeLifecycleActions"] == TERMINATE  # PCS made the undo
    operator._pcs_client = None
    assert operator.undo(GROUP, CLUSTER).applied  # found made, written down
    assert len(env.updates()) == 2
    (later,) = env.controller().handle_event(env.detection(revision=2))
    assert later.detail["reason"].startswith("Undone:")  # not quarantined again over the operator's undo
    assert len(env.updates()) == 2


def test_an_undo_whose_answer_was_lost_is_found_with_the_operator_s_clock_behind(
    env: Env, monkeypatch: pytest.MonkeyPatch
) -> None:
    (applied,) = env.controller().handle_event(env.detection())
    assert applied.detail_type == "RemediationApplied"
    env.settle()  # two minutes later the operator undoes it, on a clock five minutes behind the Lambdas'
    monkeypatch.setattr(operate, "time", types.SimpleNamespace(time=lambda: env.clock().timestamp() - 300))
    operator = _operator(env)
    gateway = PcsGateway(aws_client("pcs", env.pcs_endpoint))
    gateway.update_lifecycle_actions = _answer_lost(gateway.update_lifecycle_actions)  # type: ignore[method-assign]
    operator._pcs_client = gateway
    with pytest.raises(OperatorError, match="it may have been made: run lifeguard undo again"):
        operator.undo(GROUP, CLUSTER)
    env.settle()
    assert env.group()["nodeLifecycleActions"] == TERMINATE  # PCS made the undo
    operator._pcs_client = None
    # Run again, it finds the undo made, writes it down and changes nothing more (README).
    assert operator.undo(GROUP, CLUSTER).applied
    assert len(env.updates()) == 2
