"""The scaling_events handler (`handlers.scaling_events`) without a local AWS: Lifeguard's table and bus are
in-memory fakes, PCS is the project's local PCS model in process (`fakes.LocalPcsClient`), and the records
are the article's loop as PCS writes it: LAUNCHED, REGISTERED, TERMINATED/BOOTSTRAP_FAILED every 5-6 min."""

from __future__ import annotations

import base64
import copy
import gc
import gzip
import json
import logging
import random
import zlib
from datetime import UTC, datetime
from typing import Any

import pytest

from lifeguard.aws.eventbridge import EventPublisher
from lifeguard.aws.pcs import BatchReads, PcsGateway
from lifeguard.bounds import CONFIG_MAX_STORED_BYTES, utc
from lifeguard.detection import DetectionSettings, apply_record
from lifeguard.errors import AwsCallError, UnlistedClusterError
from lifeguard.group_state import OUTCOME_LIMIT, BootOutcome, GroupState
from lifeguard.handlers.containment import REPORTS_OVERTURN_MS
from lifeguard.handlers.evidence import INSTANCES_READ_MAX, GroupEvidence
from lifeguard.handlers.node_reports import DETECTION_READS_MAX, NodeReportsHandler
from lifeguard.handlers.scaling_events import BatchSummary, ScalingEventsHandler
from lifeguard.handlers.updater import Change, GroupUpdater
from lifeguard.lifecycle import canonical_json, fingerprint_of
from lifeguard.log_subscription import encode_subscription
from lifeguard.node_report import NodeReport
from lifeguard.notify import summarize
from lifeguard.remediation import RemediationSettings, Remediator
from lifeguard.remediation.records import AppliedChange, Decision, Ledger
from lifeguard.scaling_log import parse_scaling_log_record
from lifeguard.store.groups import INSTANCE_RUNS_MAX, RUNS_READ_MAX, GroupStore
from lifeguard.store.remediations import RemediationStore
from lifeguard.store.table import stored_bytes
from lifeguard.wiring import Wiring, build_remediate, build_scaling_events
from tests.conftest import EVENTS, load_event
from tests.unit.fakes import FakeDynamoDB, FakeEventBridge, Interleaved, client_error, local_pcs_with_group

CLUSTER, GROUP = "pcs_abc123de45", "pcs_abcdef01"
TABLE, BUS = "lifeguard", "lifeguard-bus"
LOG_GROUP, LOG_STREAM = "/aws/vendedlogs/pcs", f"AWSLogs/PCS/{CLUSTER}/node_lifecycle.log"
CONFIG_TIME = datetime(2026, 10, 21, 1, 0, tzinfo=UTC)  # the TERMINATE config took effect before 01:04:45
TERMINATE = load_event("configs/article-terminate.json")
REVERTED = load_event("configs/article-reverted.json")
FIRST, SECOND = "i-059b4b99b4f2e9739", "i-06644f6e5a2b001c9"  # the article's two failed instances


def stream(name: str) -> list[dict[str, Any]]:
    """A recorded stream under events/streams, one row a line."""
    lines = (EVENTS / "streams" / f"{name}.jsonl").read_text().splitlines()
    return [json.loads(line) for line in lines if line.strip()]


ARTICLE = stream("article-terminate-loop")
# The article's loop as a group's scaling log tells it: each failing node's LAUNCHED, then its failure.
LOOP = [r for r in ARTICLE if r["status_code"] == "LAUNCHED" or r["reason_code"] == "BOOTSTRAP_FAILED"]


def at(hour: int, minute: int, second: int = 0) -> int:
    """Epoch ms of a time on the article's day (UTC)."""
    return int(datetime(2026, 10, 21, hour, minute, second, tzinfo=UTC).timestamp() * 1000)


def row(instance: str, status: str, reason: str, when: int, *, group: str = GROUP) -> dict[str, Any]:
    """A scaling-log record shaped as the article's, for another instance, status or time."""
    return {
        **ARTICLE[0],
        "compute_node_group_id": group,
        "status_code": status,
        "reason_code": reason,
        "event_timestamp": when,
        "details": {**ARTICLE[0]["details"], "instance_id": instance},
    }


def failed(instance: str, when: int, *, group: str = GROUP) -> dict[str, Any]:
    return row(instance, "TERMINATED", "BOOTSTRAP_FAILED", when, group=group)


def launched(instance: str, when: int) -> dict[str, Any]:
    return row(instance, "LAUNCHED", "MAINTAIN_MIN_CAPACITY", when)


def succeeded(instance: str, when: int) -> dict[str, Any]:
    return row(instance, "ACTIVE", "BOOTSTRAP_SUCCESS", when)


class World:
    """The article's cluster and group in a local PCS, Lifeguard's table and bus, and the handler, all on
    one manual clock that follows the records as they are delivered."""

    def __init__(
        self, *, tags: dict[str, str] | None = None, actions: dict[str, Any] | None = None, threshold: int = 2
    ) -> None:
        actions = TERMINATE if actions is None else actions
        self.threshold = threshold  # the stack's Threshold
        self.clock, self.pcs, self.api = local_pcs_with_group(
            CONFIG_TIME, CLUSTER, GROUP, actions, update_seconds=0, tags=tags
        )
        self.table = FakeDynamoDB()
        self.bus = FakeEventBridge()
        self.handler = self.container()

    def now(self) -> float:
        return self.clock().timestamp()

    def container(self, table: Any = None) -> ScalingEventsHandler:
        """The handler as a fresh Lambda container builds it: its own store, remembering no state (on
        `table`, the world's table as another invocation meets it, when given)."""
        store = GroupStore(self.table if table is None else table, TABLE)
        updater = GroupUpdater(store, EventPublisher(self.bus, BUS, sleep=lambda _: None), clock=self.now)
        defaults = DetectionSettings(mode="quarantine", threshold=self.threshold, window_minutes=60)
        return build_scaling_events(Wiring(store, PcsGateway(self.api), updater, defaults), clock=self.now)

    def messages(self, rows: list[dict[str, Any]]) -> list[tuple[int, str]]:
        return [(r["event_timestamp"], json.dumps(r)) for r in rows]

    def deliver(self, messages: list[tuple[int, str]]) -> BatchSummary:
        """One subscription batch; the clock first moves on to its newest message (never backwards)."""
        newest = max(timestamp for timestamp, _ in messages)
        self.clock.set(datetime.fromtimestamp(newest / 1000, UTC))
        return self.handler.handle_event(encode_subscription(LOG_GROUP, LOG_STREAM, messages))

    def feed(self, rows: list[dict[str, Any]]) -> BatchSummary:
        return self.deliver(self.messages(rows))

    def person_sets(self, actions: dict[str, Any], when: int) -> None:
        """Someone runs update-compute-node-group at `when`."""
        self.clock.set(datetime.fromtimestamp(when / 1000, UTC))
        self.api.update_compute_node_group(
            clusterIdentifier=CLUSTER, computeNodeGroupIdentifier=GROUP, nodeLifecycleActions=actions
        )

    def state(self, group: str = GROUP) -> GroupState:
        return GroupStore(self.table, TABLE).load(CLUSTER, group)

    def published(self) -> list[str]:
        return [detail_type for detail_type, _ in self.bus.events()]

    def pcs_calls(self, operation: str) -> int:
        return sum(1 for call in self.pcs.calls if call.operation == operation)

    def writes(self) -> int:
        return self.table.single_writes() + self.table.calls("TransactWriteItems")


@pytest.mark.parametrize("named", [True, False], ids=["by its stream", "by its records"])
def test_a_cluster_outside_the_stacks_cluster_ids_is_ignored_not_parked(
    named: bool, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Stacks that deliver to one scaling-log group each see the others' clusters, which their roles may
    not list: those records are ignored and counted, not held as a cluster PCS refused to list (the batch
    failed, was retried and parked, and alarmed, batch after batch)."""
    monkeypatch.setenv("LIFEGUARD_CLUSTER_IDS", "pcs_0fedcba987")
    world = World()
    capacity = {**ARTICLE[0], "status_code": "LAUNCH_FAILED", "reason_code": "INSUFFICIENT_CAPACITY"}
    rows = [*ARTICLE, capacity]  # another stack's capacity problem is that stack's to report
    if named:
        summary = world.feed(rows)
    else:  # a stream not named as PCS names it (a replay, a group wired by hand): each record says, and
        # one of a time this stack would skip is another stack's to judge
        latest = max(r["event_timestamp"] for r in rows) / 1000
        world.clock.set(datetime.fromtimestamp(latest + 30 * 86_400, UTC))
        summary = world.handler.handle_messages((json.dumps(r), "(record)") for r in rows)
    assert (summary.records, summary.ignored, summary.skipped, summary.groups) == (len(rows), len(rows), 0, 0)
    assert summary.launch_failures == 0
    assert world.bus.entries == []
    assert world.pcs_calls("ListComputeNodeGroups") == world.pcs_calls("GetComputeNodeGroup") == 0
    monkeypatch.setenv("LIFEGUARD_CLUSTER_IDS", f"pcs_0fedcba987,{CLUSTER}")
    world = World()
    world.feed(ARTICLE)
    assert world.published() == ["BootstrapLoopDetected"]


# Lines of a cluster's other PCS logs, as PCS's user guide shows them: the scheduler's, its job completions.
SLURMCTLD_LINE = (
    "[2026-10-21T00:55:45.123] sched: _slurm_rpc_allocate_resources JobId=42 NodeList=lca-static-1"
)
JOBCOMP_LINE = json.dumps({"jobcomp": {"job_id": 42, "job_state": "COMPLETED", "partition": "lca-queue"}})
# Any user may name a job anything: its completion record then holds what a scaling record's key does.
NAMED_JOB = json.dumps({"jobcomp": {"job_id": 43, "job_name": "status_code", "job_state": "COMPLETED"}})


@pytest.mark.parametrize(
    ("name", "line"),
    [
        ("slurmctld_25.05.log", SLURMCTLD_LINE),
        ("jobcomp.log", JOBCOMP_LINE),
        ("jobcomp.log", NAMED_JOB),
        ("slurmdbd_25.05.log", "{}"),
    ],
)
def test_another_of_the_clusters_pcs_logs_in_the_same_group_is_ignored_not_unreadable(
    name: str, line: str
) -> None:
    """A cluster may deliver all its logs to one log group: the scheduler's lines are no scaling records, and
    counted unreadable they paged "PCS's format changed" (RecordsSkippedAlarm) batch after batch."""
    world = World()
    metrics: list[tuple[str, float]] = []
    world.handler.metric = lambda metric, value: metrics.append((metric, value))
    event = encode_subscription(LOG_GROUP, f"AWSLogs/PCS/{CLUSTER}/{name}", [(at(1, 0), line)] * 3)
    summary = world.handler.handle_event(event)
    assert (summary.records, summary.ignored, summary.skipped, summary.unreadable) == (3, 3, 0, 0)
    assert metrics == []  # neither unreadable nor processed: the alarm's share is of scaling records
    assert world.writes() == 0
    assert world.pcs.calls == []


def test_a_cut_record_of_a_status_passed_over_is_counted_unreadable_not_ignored() -> None:
    world = World()
    whole = json.dumps(
        {"resource_id": CLUSTER, "status_code": "REGISTERED", "reason_code": "REGISTER_SUCCESS"}
    )
    summary = world.handler.handle_messages([(whole[:-1], "stream:1"), (whole, "stream:2")])
    assert (summary.records, summary.ignored, summary.unreadable, summary.skipped) == (2, 1, 1, 1)
    assert summary.skipped_reasons == {"not JSON": 1}


def test_another_stream_of_the_cluster_is_read_as_its_scaling_log() -> None:
    """Should PCS name its scaling log otherwise, its records still count, and a format changed with the
    name still pages (RecordsUnreadable): only the cluster's other logs, by their names, are ignored."""
    world = World()
    rows = world.messages(ARTICLE)
    world.clock.set(datetime.fromtimestamp(rows[-1][0] / 1000, UTC))
    event = encode_subscription(LOG_GROUP, f"AWSLogs/PCS/{CLUSTER}/scaling.log", rows)
    summary = world.handler.handle_event(event)
    assert summary.skipped == 0
    assert world.published() == ["BootstrapLoopDetected"]
    metrics: list[tuple[str, float]] = []
    world.handler.metric = lambda metric, value: metrics.append((metric, value))
    renamed = [{_camel(key): value for key, value in row.items()} for row in ARTICLE]
    event = encode_subscription(
        LOG_GROUP, f"AWSLogs/PCS/{CLUSTER}/scaling.log", [(at(2, 0), json.dumps(row)) for row in renamed]
    )
    summary = world.handler.handle_event(event)
    assert summary.unreadable == len(renamed)
    assert ("RecordsUnreadable", len(renamed)) in metrics


def _camel(key: str) -> str:
    head, *rest = key.split("_")
    return head + "".join(part.title() for part in rest)


@pytest.mark.parametrize(("tag", "detected"), [("2", True), ("5", False), (None, False)])
def test_a_group_tagged_to_loop_sooner_than_the_stacks_threshold_is_detected_at_its_own(
    tag: str | None, detected: bool
) -> None:
    """A `lifeguard:threshold` tag below the stack's Threshold was read only once the stack's count was
    reached: the group looped a cycle or more longer than its owner set. Its tags are read at the tag's
    least count, once."""
    world = World(tags={"lifeguard:threshold": tag} if tag else None, threshold=5)
    world.feed(ARTICLE)  # two failures
    assert world.published() == (["BootstrapLoopDetected"] if detected else [])
    assert world.pcs_calls("ListTagsForResource") == 1
    if not detected:  # a group whose tags ask no sooner look: read once, not at every failure after
        reads = world.pcs_calls("GetComputeNodeGroup")
        world.feed([failed("i-0third000000000001", ARTICLE[-1]["event_timestamp"] + 300_000)])
        assert world.pcs_calls("ListTagsForResource") == 1
        assert world.pcs_calls("GetComputeNodeGroup") == reads


def test_failures_days_apart_read_no_group_whose_tags_are_unread() -> None:
    """The first look before a group's tags are read lowers the threshold only, within the stack's window:
    two failures days apart read nothing, or a group whose tags PCS refuses was asked at every batch after
    and counted unreadable."""
    world = World(threshold=3)
    world.pcs.inject_fault("AccessDeniedException", operation="ListTagsForResource", times=1000)
    first = ARTICLE[-1]["event_timestamp"]
    summaries = [world.feed([failed(f"i-0apart{n:012d}", first + n * 3 * 86_400_000)]) for n in range(3)]
    assert [s.unreadable_groups for s in summaries] == [0, 0, 0]
    assert world.pcs_calls("ListTagsForResource") == world.pcs_calls("GetComputeNodeGroup") == 0
    assert world.published() == []


def test_the_articles_second_failure_within_the_window_opens_an_episode_and_publishes_it() -> None:
    world = World()
    summary = world.feed(ARTICLE)
    [(detail_type, detail)] = world.bus.events()
    assert detail_type == "BootstrapLoopDetected"
    assert [e.detail_type for e in summary.events] == ["BootstrapLoopDetected"]
    assert (detail["cluster_id"], detail["compute_node_group_id"], detail["kind"]) == (CLUSTER, GROUP, "loop")
    assert detail["failures"] == [
        {"instance_id": FIRST, "scheduler_node_id": "lca-static-1", "event_timestamp": 1792544802000},
        {"instance_id": SECOND, "scheduler_node_id": "lca-static-1", "event_timestamp": 1792545162000},
    ]
    assert (detail["mode"], detail["revision"], detail["suspect"]) == ("quarantine", 1, None)
    assert detail["config_before"] == TERMINATE
    assert detail["config_fingerprint"] == fingerprint_of(TERMINATE)
    assert detail["config_modified_at"] == int(CONFIG_TIME.timestamp() * 1000)
    episode = world.state().episode
    assert episode is not None
    assert episode.episode_id == detail["episode_id"]
    assert [f.instance_id for f in episode.failures] == [FIRST, SECOND]


def test_a_batch_is_read_with_the_garbage_collector_paused_and_it_resumes_after() -> None:
    world = World()
    collecting: list[bool] = []

    def clock() -> float:
        collecting.append(gc.isenabled())
        return world.now()

    world.handler.clock = clock
    assert gc.isenabled()
    assert world.feed(ARTICLE).events  # the loop is found with the collector paused
    assert collecting
    assert not any(collecting)
    assert gc.isenabled()

    def broken() -> float:
        raise RuntimeError("clock")

    world.handler.clock = broken
    with pytest.raises(RuntimeError, match="clock"):
        world.feed([succeeded("i-0aaaaaaaaaaaaaaa1", at(14, 30))])
    assert gc.isenabled()  # resumed when the batch failed too

    gc.disable()  # a caller that paused it itself: left paused
    try:
        world.handler.clock = world.now
        world.feed([succeeded("i-0aaaaaaaaaaaaaaa2", at(14, 31))])
        assert not gc.isenabled()
    finally:
        gc.enable()


def test_a_loop_under_a_configuration_changed_since_the_last_read_is_not_hidden_by_older_successes() -> None:
    """The configuration is judged on what was last read until a rule fires; a node that failed after
    being launched past that read may have run a newer configuration, on which the successes of nodes
    launched before say nothing: the group is read, and the loop under the new configuration found."""
    world = World()
    world.feed(
        [
            r
            for n in range(3)
            for r in (launched(f"i-0c{n}", at(1, 1 + n)), succeeded(f"i-0c{n}", at(1, 5 + n)))
        ]
    )
    config = world.state().config
    assert config is not None
    assert config.checked_at == at(1, 7)  # read to prove it
    world.person_sets(REVERTED, at(1, 7, 30))
    # Within a minute of that read, so the success proves nothing and reads nothing: the two failures'
    # nodes were launched on the new configuration, one before that success came up.
    summary = world.feed(
        [
            launched("i-0c3", at(1, 7, 40)),
            launched("i-0c4", at(1, 7, 45)),
            succeeded("i-0c3", at(1, 7, 50)),
            launched("i-0c5", at(1, 7, 55)),
            failed("i-0c4", at(1, 9)),
            failed("i-0c5", at(1, 9, 10)),
        ]
    )
    assert [e.detail_type for e in summary.events] == ["BootstrapLoopDetected"]
    episode = world.state().episode
    assert episode is not None
    assert [f.instance_id for f in episode.failures] == ["i-0c4", "i-0c5"]
    assert (episode.config_modified_at, episode.config_fingerprint) == (
        at(1, 7, 30),
        fingerprint_of(REVERTED),
    )


def test_one_failure_is_not_a_loop() -> None:
    world = World()
    assert world.feed(ARTICLE[:3]).events == []
    state = world.state()
    assert state.episode is None
    assert [o.instance_id for o in state.outcomes.values() if not o.succeeded] == [FIRST]
    assert world.bus.entries == []


def test_failures_further_apart_than_the_window_are_not_a_loop() -> None:
    world = World()
    assert world.feed([failed(FIRST, at(1, 6)), failed(SECOND, at(2, 7))]).events == []
    assert world.state().episode is None
    assert world.bus.entries == []


def test_a_threshold_tagged_on_the_group_holds_the_detection_until_that_many_failures() -> None:
    world = World(tags={"lifeguard:threshold": "3", "lifeguard:mode": "revert"})
    assert world.feed(ARTICLE).events == []
    assert world.state().episode is None
    world.feed([launched("i-0third00000000000", at(1, 13)), failed("i-0third00000000000", at(1, 18))])
    [(detail_type, detail)] = world.bus.events()
    assert detail_type == "BootstrapLoopDetected"
    assert detail["mode"] == "revert"
    assert [f["instance_id"] for f in detail["failures"]] == [FIRST, SECOND, "i-0third00000000000"]


def test_failures_of_nodes_launched_before_the_configuration_changed_are_not_counted() -> None:
    world = World()
    world.feed([r for r in ARTICLE if r["status_code"] == "LAUNCHED"])
    world.person_sets(REVERTED, at(1, 16))  # the group is changed before the old nodes' failures arrive
    old_failures = [r for r in ARTICLE if r["reason_code"] == "BOOTSTRAP_FAILED"]
    assert world.feed(old_failures).events == []
    assert world.state().episode is None
    # Nodes launched on the new configuration fail too: only they are the evidence.
    new = ["i-0aaaaaaaaaaaaaaa1", "i-0aaaaaaaaaaaaaaa2"]
    world.feed([launched(new[0], at(1, 17)), failed(new[0], at(1, 22))])
    world.feed([launched(new[1], at(1, 23)), failed(new[1], at(1, 28))])
    [(detail_type, detail)] = world.bus.events()
    assert detail_type == "BootstrapLoopDetected"
    assert [f["instance_id"] for f in detail["failures"]] == new
    assert detail["config_modified_at"] == at(1, 16)
    assert detail["config_before"] == REVERTED


def test_a_successful_bootstrap_resolves_the_open_episode() -> None:
    world = World()
    rows = stream("article-terminate-revert")
    before, control, after = rows[:7], rows[7]["lifeguard_replay"], rows[8:]
    world.feed(before)
    world.person_sets(control["update_config"], control["at"])
    summary = world.feed(after)
    assert [e.detail_type for e in summary.events] == ["LoopResolved"]
    (_, detected), (_, resolved) = world.bus.events()
    assert world.published() == ["BootstrapLoopDetected", "LoopResolved"]
    assert resolved["episode_id"] == detected["episode_id"]
    assert "i-0c1d2e3f4a5b6c7d8 (lca-static-1) bootstrapped successfully" in resolved["reason"]
    state = world.state()
    assert state.episode is None
    assert state.last_episode is not None
    assert state.last_episode.episode_id == detected["episode_id"]
    assert state.last_episode.resolved_at == 1792545870000


def test_a_node_launched_on_the_configuration_proves_it_good_and_an_older_node_does_not() -> None:
    world = World()
    world.feed([launched("i-0old0000000000001", at(1, 5))])
    world.person_sets(REVERTED, at(1, 10))
    world.feed([succeeded("i-0old0000000000001", at(1, 12))])
    assert world.state().proven_good is None  # it booted the configuration from before the change
    world.feed([launched("i-0new0000000000001", at(1, 13)), succeeded("i-0new0000000000001", at(1, 18))])
    proof = world.state().proven_good
    assert proof is not None
    assert proof.node_lifecycle_actions == REVERTED
    assert (proof.fingerprint, proof.modified_at) == (fingerprint_of(REVERTED), at(1, 10))
    assert (proof.instance_id, proof.proven_at) == ("i-0new0000000000001", at(1, 18))
    assert world.bus.entries == []  # a proof is kept, not announced


@pytest.mark.parametrize("late", ["success first", "duplicate launch"])
def test_a_success_delivered_before_its_launch_proves_the_configuration_once_the_launch_comes(
    late: str,
) -> None:
    """Delivered in order, a node launched on the configuration proves it good. Its success delivered
    before its LAUNCHED (a subscription does not order deliveries) counted only from 30 minutes after the
    change, and the LAUNCHED, when it came, was not looked at again: a revert had nothing to go back to
    until another node succeeded. A LAUNCHED delivered again after its success changes nothing."""
    world = World()
    world.feed([launched("i-0old0000000000001", at(1, 2))])
    world.person_sets(REVERTED, at(1, 5))
    if late == "success first":
        world.feed([succeeded("i-0new0000000000001", at(1, 15))])
        assert world.state().proven_good is None
        world.feed([launched("i-0new0000000000001", at(1, 10))])
    else:
        world.feed([launched("i-0new0000000000001", at(1, 10)), succeeded("i-0new0000000000001", at(1, 15))])
        writes = world.writes()
        world.feed([launched("i-0new0000000000001", at(1, 10))])
        assert world.writes() == writes
    proof = world.state().proven_good
    assert proof is not None
    assert (proof.fingerprint, proof.instance_id, proof.proven_at) == (
        fingerprint_of(REVERTED),
        "i-0new0000000000001",
        at(1, 15),
    )


def test_a_group_tagged_off_is_left_alone() -> None:
    world = World(tags={"lifeguard:mode": "off"})
    assert world.feed(ARTICLE).events == []
    assert world.state().episode is None
    assert world.bus.entries == []
    # Once its tags are known, its records are not even kept; its tags are read again on a failure, at
    # most every tag_refresh of event time (a group whose tag was taken off is watched again).
    writes = world.writes()
    world.feed([launched("i-0aaaaaaaaaaaaaaa1", at(1, 20)), failed("i-0aaaaaaaaaaaaaaa1", at(1, 25))])
    world.feed([launched("i-0aaaaaaaaaaaaaaa2", at(1, 26)), failed("i-0aaaaaaaaaaaaaaa2", at(1, 27))])
    assert world.writes() <= writes + 1
    outcomes = world.state().outcomes
    assert "i-0aaaaaaaaaaaaaaa1" not in outcomes
    assert "i-0aaaaaaaaaaaaaaa2" not in outcomes
    assert world.bus.entries == []


def test_an_unreadable_and_a_deleted_group_do_not_stop_the_other_groups_of_the_batch() -> None:
    world = World()
    world.pcs.add_compute_node_group(CLUSTER, "denied", group_id="pcs_denied001")
    world.pcs.add_compute_node_group(CLUSTER, "deleted", group_id="pcs_deleted01")
    world.api.delete_compute_node_group(clusterIdentifier=CLUSTER, computeNodeGroupIdentifier="pcs_deleted01")
    # PCS refuses the first group read of the batch: the denied group's (its records come first).
    world.pcs.inject_fault("AccessDeniedException", operation="GetComputeNodeGroup")
    loop = LOOP
    denied = [{**r, "compute_node_group_id": "pcs_denied001"} for r in loop]
    deleted = [{**r, "compute_node_group_id": "pcs_deleted01"} for r in loop]
    summary = world.feed(denied + deleted + ARTICLE)
    reads = [
        (c.params["computeNodeGroupIdentifier"], c.error)
        for c in world.pcs.calls
        if c.operation == "GetComputeNodeGroup"
    ]
    assert reads == [
        ("pcs_denied001", "AccessDeniedException"),
        (GROUP, None),
    ]
    # Three groups of one cluster in a batch: one listing says which exist (the deleted one does not: its
    # records are skipped, and it is never read).
    assert world.pcs_calls("ListComputeNodeGroups") == 1
    assert (summary.groups, summary.unreadable_groups) == (2, 1)
    assert summary.skipped_reasons == {"a group its cluster does not have": len(loop)}
    assert [(t, d["compute_node_group_id"]) for t, d in world.bus.events()] == [
        ("BootstrapLoopDetected", GROUP)
    ]
    # The unreadable group's records stay for the next batch to judge, which reads PCS again.
    assert sorted(world.state("pcs_denied001").outcomes) == [FIRST, SECOND]
    world.feed(
        [
            {**launched("i-0third00000000000", at(1, 13)), "compute_node_group_id": "pcs_denied001"},
            failed("i-0third00000000000", at(1, 18), group="pcs_denied001"),
        ]
    )
    assert [(t, d["compute_node_group_id"]) for t, d in world.bus.events()][-1] == (
        "BootstrapLoopDetected",
        "pcs_denied001",
    )
    assert world.state("pcs_deleted01").episode is None


@pytest.mark.parametrize("then", ["the batch again", "its next launch"])
def test_a_detection_pcs_refusing_the_read_held_back_is_made_by_the_groups_next_batch(then: str) -> None:
    """PCS refused the group's read as its loop was to be detected: its failures were stored, and only its
    next failure, a cycle later, detected it; a redelivery of the batch (a redrive once the permission is
    granted) folded nothing new and detected nothing. The next batch holding any record of it does."""
    world = World()
    world.pcs.add_compute_node_group(CLUSTER, "denied", group_id="pcs_denied001")
    denied = [{**r, "compute_node_group_id": "pcs_denied001"} for r in LOOP]
    world.feed(denied[:1])  # its first launch: a state stored, so the mark is a change of one
    world.pcs.inject_fault("AccessDeniedException", operation="GetComputeNodeGroup")  # its read, once
    assert world.feed(denied).unreadable_groups == 1
    assert (world.published(), world.state("pcs_denied001").detection_due) == ([], True)
    later = [{**launched("i-0third00000000000", at(1, 13)), "compute_node_group_id": "pcs_denied001"}]
    world.feed(denied if then == "the batch again" else later)
    assert [(t, d["compute_node_group_id"]) for t, d in world.bus.events()] == [
        ("BootstrapLoopDetected", "pcs_denied001")
    ]
    assert not world.state("pcs_denied001").detection_due
    world.feed(later)  # nothing more to make
    assert world.published() == ["BootstrapLoopDetected"]


def test_a_group_deleted_under_a_batch_is_let_go_and_the_others_go_on() -> None:
    world = World()
    world.pcs.add_compute_node_group(CLUSTER, "deleted", group_id="pcs_deleted01")
    world.api.delete_compute_node_group(clusterIdentifier=CLUSTER, computeNodeGroupIdentifier="pcs_deleted01")
    loop = LOOP
    summary = world.feed([{**r, "compute_node_group_id": "pcs_deleted01"} for r in loop] + ARTICLE)
    reads = [
        (c.params["computeNodeGroupIdentifier"], c.error)
        for c in world.pcs.calls
        if c.operation == "GetComputeNodeGroup"
    ]
    # The batch's listing shows the deleted group gone: its records are skipped, without a read of it.
    assert reads == [(GROUP, None)]
    assert (summary.groups, summary.unreadable_groups) == (1, 0)
    assert summary.skipped_reasons == {"a group its cluster does not have": len(loop)}
    assert [t for t, _ in world.bus.events()] == ["BootstrapLoopDetected"]
    assert world.state("pcs_deleted01").episode is None


def other_groups(world: World, count: int) -> list[str]:
    """`count` more groups of the article's cluster, with the article's configuration."""
    return [
        world.pcs.add_compute_node_group(
            CLUSTER, f"grp{n}", group_id=f"pcs_g{n:07d}", node_lifecycle_actions=TERMINATE
        )["id"]
        for n in range(count)
    ]


def booted(instance: str, launched_at: int, active_at: int, group: str) -> list[dict[str, Any]]:
    return [
        row(instance, "LAUNCHED", "MAINTAIN_MIN_CAPACITY", launched_at, group=group),
        row(instance, "ACTIVE", "BOOTSTRAP_SUCCESS", active_at, group=group),
    ]


def test_a_warm_container_proves_later_successes_from_the_listing_it_kept_without_reading_pcs() -> None:
    world = World()
    world.feed(booted("i-0a0", at(1, 5), at(1, 9), GROUP))  # the group read alone, at 01:09
    others = other_groups(world, 3)
    world.feed([r for n, g in enumerate(others) for r in booted(f"i-0b{n}", at(1, 15), at(1, 20), g)])
    # Each batch naming groups Lifeguard has no state of lists their cluster once, whatever their number.
    assert world.pcs_calls("ListComputeNodeGroups") == 2
    world.pcs.calls.clear()
    # A node of the group launched after its read and before the listing: proved from the kept listing.
    world.feed(booted("i-0a1", at(1, 16), at(1, 25), GROUP))
    assert world.pcs.calls == []
    config = world.state().config
    assert config is not None
    assert config.checked_at == at(1, 20)  # as of the listing, not of this batch
    proven = world.state().proven_good
    assert proven is not None
    assert proven.fingerprint == fingerprint_of(TERMINATE)


def test_a_record_dated_ahead_of_the_clock_does_not_stretch_what_a_read_of_pcs_knows() -> None:
    """A read of PCS knows the group as of when it is made: a record dated ahead of the invocation's clock
    (within the skew allowed) does not make the configuration known until then, so a node launched after
    the read, on a configuration changed since, does not prove the configuration read."""
    world = World()
    world.clock.set(datetime.fromtimestamp(at(1, 10) / 1000, UTC))
    # A node launched before the configuration came up (it proves nothing, but has the group read), and
    # another node's launch dated four minutes ahead of the clock.
    early = [launched("i-0e0", at(0, 55)), succeeded("i-0e0", at(1, 5)), launched("i-0e1", at(1, 14))]
    world.handler.handle_event(encode_subscription(LOG_GROUP, LOG_STREAM, world.messages(early)))
    config = world.state().config
    assert config is not None
    assert config.checked_at == at(1, 10)  # when it was read, not the newest record's time
    assert world.state().proven_good is None
    world.person_sets(REVERTED, at(1, 11))
    world.feed([launched("i-0e2", at(1, 12)), succeeded("i-0e2", at(1, 13))])
    proven = world.state().proven_good
    assert proven is not None
    assert proven.fingerprint == fingerprint_of(REVERTED)  # what its node booted, read again for the proof


def test_a_mutation_run_again_after_a_lost_race_is_judged_on_its_fresh_state_not_on_a_kept_listing() -> None:
    world = World()
    first = world.handler
    world.feed([launched("i-0z0", at(1, 5)), succeeded("i-0z0", at(1, 9)), launched("i-0z1", at(1, 10))])
    others = other_groups(world, 3)
    world.feed([r for n, g in enumerate(others) for r in booted(f"i-0a{n}", at(1, 15), at(1, 20), g)])
    world.person_sets(REVERTED, at(1, 25))
    # Another container sees the group loop under the new configuration, and opens the episode.
    world.handler = world.container()
    world.feed([launched("i-0f1", at(1, 26)), failed("i-0f1", at(1, 30))])
    world.feed([launched("i-0f2", at(1, 31)), failed("i-0f2", at(1, 35))])
    episode = world.state().episode
    assert episode is not None
    assert (episode.config_modified_at, episode.revision) == (at(1, 25), 1)
    published = len(world.bus.entries)
    # The first container's next batch: a success to prove (its kept listing shows the group as it was at
    # 01:20) and a failure. Its remembered state is stale, so its write loses, and it runs again on the
    # state just read: the episode's configuration is PCS's, and nothing is detected again.
    world.handler = first
    proof = [launched("i-0z2", at(1, 11)), succeeded("i-0z2", at(1, 34))]
    world.feed([*proof, launched("i-0w", at(1, 38)), failed("i-0w", at(1, 42))])
    assert first.updater.conflicts >= 1
    state = world.state()
    assert state.episode is not None
    assert (state.episode.config_modified_at, state.episode.revision) == (at(1, 25), 1)
    assert state.config is not None
    assert (state.config.modified_at, state.config.fingerprint) == (at(1, 25), fingerprint_of(REVERTED))
    assert len(world.bus.entries) == published


def test_a_mutation_run_again_after_a_lost_race_keeps_the_tags_the_other_writer_read() -> None:
    """What a batch read of PCS was made of the state that lost the race (its tags as then known): run
    again on the state read fresh, the configuration is made again of that one, the tags another
    container read since kept, and PCS not asked again."""
    tags = {"lifeguard:mode": "notify", "lifeguard:threshold": "3"}
    world = World(tags=tags)
    first = world.handler
    world.feed([launched("i-0t1", at(1, 5)), succeeded("i-0t1", at(1, 9))])
    assert world.state().config is not None
    assert world.state().config.tags == {}  # a proof reads no tags
    # Another container judges two failures: it reads the tags (threshold 3: no loop) and stores them.
    world.handler = world.container()
    world.feed([launched("i-0t2", at(1, 10)), launched("i-0t3", at(1, 11))])
    world.feed([failed("i-0t2", at(1, 15)), failed("i-0t3", at(1, 17))])
    config = world.state().config
    assert config is not None
    assert (config.tags, config.tags_checked_at) == (tags, at(1, 17))
    assert world.state().episode is None
    # The first container's next success has it read the group for a proof on its stale state: its
    # write loses, and it runs again on the state just read.
    world.handler = first
    reads = world.pcs_calls("GetComputeNodeGroup")
    world.feed([launched("i-0t4", at(1, 20)), succeeded("i-0t4", at(1, 25))])
    assert first.updater.conflicts >= 1
    assert world.pcs_calls("GetComputeNodeGroup") == reads + 1
    config = world.state().config
    assert config is not None
    assert (config.tags, config.tags_checked_at) == (tags, at(1, 17))
    assert config.checked_at == at(1, 25)


def test_a_first_batch_of_many_groups_learns_them_from_one_listing_and_proves_a_few_a_batch() -> None:
    world = World()
    groups = [f"pcs_many{n:06d}" for n in range(30)]
    for group in groups:
        world.pcs.add_compute_node_group(CLUSTER, group.removeprefix("pcs_"), group_id=group)

    def boots(first: int, when: int) -> list[dict[str, Any]]:
        return [
            record
            for n, group in enumerate(groups)
            for record in (
                row(f"i-0{first + n:016x}", "LAUNCHED", "SCHEDULER_REQUESTED", when, group=group),
                row(f"i-0{first + n:016x}", "ACTIVE", "BOOTSTRAP_SUCCESS", when + 150_000, group=group),
            )
        ]

    world.feed(boots(0, at(1, 0)))
    assert world.pcs_calls("ListComputeNodeGroups") == 1
    assert world.pcs_calls("GetComputeNodeGroup") == BatchReads.PROOF_READS  # not one per group
    proven = [g for g in groups if world.state(g).proven_good is not None]
    assert len(proven) == BatchReads.PROOF_READS
    learned = [world.state(g).config for g in groups if g not in proven]
    assert learned
    assert all(c is not None and not c.actions_read and c.node_lifecycle_actions is None for c in learned)
    # The others' next successes prove theirs, in the next batch.
    world.feed(boots(100, at(1, 10)))
    assert all(world.state(g).proven_good is not None for g in groups)
    assert world.pcs_calls("GetComputeNodeGroup") == len(groups)


def test_a_batch_delivered_again_changes_nothing_and_publishes_nothing_twice() -> None:
    world = World()
    world.feed(ARTICLE)
    version, writes = world.state().version, world.writes()
    assert world.feed(ARTICLE).events == []
    world.handler = world.container()  # and again to a container that remembers nothing
    assert world.feed(list(reversed(ARTICLE))).events == []
    assert world.published() == ["BootstrapLoopDetected"]
    assert world.writes() == writes
    assert world.state().version == version


def test_bad_messages_are_skipped_and_counted_by_reason_while_the_rest_of_the_batch_goes_on() -> None:
    world = World()
    messages = world.messages(ARTICLE)
    newest = ARTICLE[-1]["event_timestamp"]
    bad = [
        "{not json",
        json.dumps({"status_code": "TERMINATED"}),
        json.dumps({**ARTICLE[2], "details": {"instance_id": "not-an-instance"}}),
        json.dumps(failed("i-0future000000000", newest + 24 * 3600 * 1000)),
    ]
    odd = [
        json.dumps(row("i-0hibernate0000000", "HIBERNATED", "NAPPING", newest)),
        json.dumps(row("i-0capacity0000000", "LAUNCH_FAILED", "INSUFFICIENT_CAPACITY", newest)),
    ]
    for offset, message in enumerate(bad + odd):
        messages.insert(1 + 2 * offset, (newest, message))
    summary = world.deliver(messages)
    assert summary.records == len(ARTICLE) + len(bad) + len(odd)
    assert summary.skipped == len(bad)
    assert dict(summary.skipped_reasons) == {
        "not JSON": 1,
        "missing event_timestamp": 1,
        "invalid details.instance_id": 1,
        "event_timestamp ahead of the clock": 1,
    }
    assert (summary.unknown_codes, summary.launch_failures) == (1, 1)
    assert [e.detail_type for e in summary.events] == ["BootstrapLoopDetected"]
    assert "i-0future000000000" not in world.state().outcomes


def test_pcs_is_read_only_when_a_detection_needs_it() -> None:
    world = World()
    world.feed([r for r in ARTICLE if r["reason_code"] != "BOOTSTRAP_FAILED"])
    world.feed([ARTICLE[2]])
    # Launches, registrations and one failure decide nothing: the group, seen for the first time, is only
    # looked up in its cluster's listing (it exists), not read.
    assert [c.operation for c in world.pcs.calls] == ["ListComputeNodeGroups"]
    world.feed([ARTICLE[5]])
    assert (world.pcs_calls("GetComputeNodeGroup"), world.pcs_calls("ListTagsForResource")) == (1, 1)
    # The loop goes on: the configuration is read again at most once a minute of event time.
    world.feed([failed("i-0aaaaaaaaaaaaaaa1", ARTICLE[5]["event_timestamp"] + 30_000)])
    assert world.pcs_calls("GetComputeNodeGroup") == 1
    world.feed([failed("i-0aaaaaaaaaaaaaaa2", ARTICLE[5]["event_timestamp"] + 120_000)])
    assert (world.pcs_calls("GetComputeNodeGroup"), world.pcs_calls("ListTagsForResource")) == (2, 1)
    assert world.published() == ["BootstrapLoopDetected"]  # the same configuration: no new revision


def test_successes_read_the_configuration_at_most_once_a_minute() -> None:
    world = World()
    start = at(2, 0)
    for batch in range(4):
        first = start + batch * 30_000
        world.feed(
            [
                succeeded(f"i-0ok{batch}0000000000a", first),
                succeeded(f"i-0ok{batch}0000000000b", first + 15_000),
            ]
        )
    assert world.pcs_calls("GetComputeNodeGroup") == 2  # at 02:00:15 and at 02:01:15
    assert [c.operation for c in world.pcs.calls] == ["ListComputeNodeGroups"] + ["GetComputeNodeGroup"] * 2
    proof = world.state().proven_good
    assert proof is not None
    assert proof.node_lifecycle_actions == TERMINATE


def quarantined_node_boots(world: World) -> None:
    """The article's loop quarantined: its script switched to STOP_SEQUENCE, so the next node still fails
    it but is kept, and PCS logs the node ACTIVE/BOOTSTRAP_SUCCESS (the article). The node's reports of the
    failed run are in the table before its success record arrives."""
    world.feed(ARTICLE[:6])
    quarantined = json.loads(json.dumps(TERMINATE))
    quarantined["stages"]["nodeBootstrapped"][0]["onError"] = "STOP_SEQUENCE"
    world.person_sets(quarantined, at(1, 13))
    kept = "i-0kept00000000000"
    kept_report(kept, at(1, 17), world)
    world.feed([launched(kept, at(1, 14)), succeeded(kept, at(1, 19))])


def kept_report(instance: str, when: int, world: World, *, ready_checked: bool = False) -> None:
    """The instance's report of the article's script failing under STOP_SEQUENCE at `when`, stored; with
    `ready_checked`, its run of the ready check under TERMINATE too, passed (a node is kept only once such
    checks are through: `kept_awaits_ready_checks`)."""
    report = NodeReport.model_validate(
        {
            **stream("article-terminate-node-reports")[0],
            "instance_id": instance,
            "on_error": "STOP_SEQUENCE",
            "started_at": when // 1000,
            "ended_at": when // 1000,
        }
    )
    check = ran(instance, when, script="ready-check", stage="nodeReady", on_error="TERMINATE")
    GroupStore(world.table, TABLE).put_reports([report, check] if ready_checked else [report])


def test_a_node_kept_by_stop_sequence_whose_script_failed_proves_nothing() -> None:
    world = World()
    quarantined_node_boots(world)
    assert world.state().proven_good is None


def test_a_node_kept_by_stop_sequence_whose_script_failed_does_not_resolve_the_loop() -> None:
    world = World()
    quarantined_node_boots(world)
    assert "LoopResolved" not in world.published()
    assert world.state().episode is not None


def test_a_kept_node_contains_the_loop_once_with_the_script_still_failing_and_how_to_go_on() -> None:
    world = World()
    quarantine_in_ledger(world, quarantined_config())  # Lifeguard's quarantine keeps the node
    quarantined_node_boots(world)
    assert world.published().count("LoopContained") == 1
    (detail,) = [d for t, d in world.bus.events() if t == "LoopContained"]
    assert detail["kept"] == [{"instance_id": "i-0kept00000000000", "drained": False}]
    assert (detail["suspect"]["script"], detail["suspect"]["on_error"]) == ("fail-terminate", "STOP_SEQUENCE")
    assert detail["undo"] == f"lifeguard undo {GROUP} --cluster {CLUSTER}"
    assert "still failing" in detail["reason"]
    episode = world.state().episode
    assert episode is not None
    assert (episode.kept, episode.contained_at) == (["i-0kept00000000000"], at(1, 19))
    # A second kept node is listed, not announced again.
    kept_report("i-0kept00000000001", at(1, 22), world)
    world.feed([launched("i-0kept00000000001", at(1, 20)), succeeded("i-0kept00000000001", at(1, 25))])
    assert world.published().count("LoopContained") == 1
    again = world.state().episode
    assert again is not None
    assert again.kept == ["i-0kept00000000000", "i-0kept00000000001"]


@pytest.mark.parametrize("then", ["PCS ends it", "it stays up"])
def test_a_kept_node_whose_ready_check_fails_under_terminate_on_that_boot_contains_nothing(then: str) -> None:
    """Quarantined, the loop's script fails under STOP_SEQUENCE on the next node, and nodeReady runs all the
    same (the article); its ready check, which needs what the script does, fails under TERMINATE: PCS ends
    the node. It was told contained ("the loop stopped", the node kept, taking jobs) for a node ended a
    minute later, while the loop went on. A report of such a failure holds the containment back for the
    reports' grace at most: a node that stays up past it (the report was false) is kept."""
    kept = "i-0kept00000000000"
    world = waiting_kept_nodes([kept])
    check = ran(
        kept, at(1, 18), outcome="failed", script="ready-check", stage="nodeReady", on_error="TERMINATE"
    )
    GroupStore(world.table, TABLE).put_reports([check])
    world.feed([launched(kept, at(1, 14)), succeeded(kept, at(1, 19))])
    assert "LoopContained" not in world.published()
    if then == "PCS ends it":
        world.feed([failed(kept, at(1, 20))])
        assert "LoopContained" not in world.published()
        episode = world.state().episode
        assert episode is not None
        assert (episode.kept, episode.contained_at) == ([], None)
        return
    world.feed([launched("i-0later0000000000", at(1, 30))])  # the reports' grace is over
    assert world.published().count("LoopContained") == 1
    episode = world.state().episode
    assert episode is not None
    assert episode.kept == [kept]


@pytest.mark.parametrize("own", [False, True], ids=["another node's report", "its own reports"])
def test_a_report_read_past_the_grace_ends_no_wait_on_a_kept_node_reported_ending(own: bool) -> None:
    """PCS ended the kept node a minute after its ACTIVE, its record not delivered yet; a report batch read
    ten minutes on (another node's, or the node's own two runs, the episode waiting for its reports) is no
    sign of the node up: judged by the invocation's clock it was told contained, the very thing the wait
    is for. Only PCS's time ends the wait."""
    world = World()
    quarantined = quarantined_config()
    quarantined["stages"]["nodeReady"][0]["onError"] = "TERMINATE"
    quarantine_in_ledger(world, quarantined)
    world.feed(ARTICLE[:6])
    if own:
        ship(world, reports_handler(world), REPORTED)  # the loop's nodes send reports: the success waits
    world.person_sets(quarantined, at(1, 13))
    kept = "i-0kept00000000000"
    ending = ran(
        kept, at(1, 18), outcome="failed", script="ready-check", stage="nodeReady", on_error="TERMINATE"
    )
    stopped = ran(
        kept,
        at(1, 17),
        outcome="failed",
        script="fail-terminate",
        stage="nodeBootstrapped",
        on_error="STOP_SEQUENCE",
    )
    if not own:
        GroupStore(world.table, TABLE).put_reports([stopped, ending])
    world.feed([launched(kept, at(1, 14)), succeeded(kept, at(1, 19))])
    assert "LoopContained" not in world.published()
    world.clock.set(datetime.fromtimestamp(at(1, 30) / 1000, UTC))
    runs = [stopped, ending] if own else [ran("i-0fresh0000000000", at(1, 25))]
    reports_handler(world).handle_messages([(run.to_json(), f"stream:{n}") for n, run in enumerate(runs)])
    assert "LoopContained" not in world.published()


@pytest.mark.parametrize("then", ["its ready check passes", "its ready check fails", "no report comes"])
def test_a_kept_node_is_kept_once_its_ready_checks_are_through_in_pcss_own_order(then: str) -> None:
    """In PCS's own order: the quarantined script fails under STOP_SEQUENCE and the node ships it at once,
    PCS logs the node ACTIVE, then nodeReady runs its ready check (under TERMINATE, needing what the script
    does). The node was told contained at its ACTIVE, and listed kept when its check then failed and PCS
    ended it. It is kept once its reports show the check passed, or once it stays up past the reports'
    grace; never when the check failed."""
    kept = "i-0kept00000000000"
    world = waiting_kept_nodes([kept])  # its report shipped before PCS logs the node ACTIVE
    world.feed([launched(kept, at(1, 14)), succeeded(kept, at(1, 18))])
    assert "LoopContained" not in world.published()
    handler = reports_handler(world)
    outcome = {"its ready check passes": "succeeded", "its ready check fails": "failed"}.get(then)
    if outcome is not None:
        ship(world, handler, [ready_check(kept, at(1, 18) + 2000, outcome)])
    if then == "its ready check fails":
        world.feed([failed(kept, at(1, 19))])  # PCS ends it in nodeReady
        assert "LoopContained" not in world.published()
        episode = world.state().episode
        assert episode is not None
        assert (episode.kept, episode.contained_at) == ([], None)
        return
    if then == "no report comes":
        world.feed([launched("i-0later0000000000", at(1, 27))])  # within the reports' grace
        assert "LoopContained" not in world.published()
        world.feed([launched("i-0later0000000001", at(1, 29))])  # past it, the node still up
    assert world.published().count("LoopContained") == 1
    episode = world.state().episode
    assert episode is not None
    assert (episode.kept, episode.contained_at) == ([kept], at(1, 18))


def test_a_second_kept_node_up_is_kept_while_the_first_waits_for_its_ready_check() -> None:
    """Two nodes of the quarantined configuration come up with the script failing; the second's ready check
    passes while the first's is not in yet (it fails later, and PCS ends that node). Only the first success
    was judged, so the second, up and taking jobs with the script failing, was never kept: no LoopContained,
    not in `kept` nor in `status`."""
    first, second = "i-0kept00000000000", "i-0kept00000000001"
    world, handler = nodes_up([first, second])  # ACTIVE at 01:18:00 and 01:18:10
    assert "LoopContained" not in world.published()
    ship(world, handler, [ready_check(second, at(1, 18) + 40_000, "succeeded")])
    assert world.published().count("LoopContained") == 1
    assert world.bus.events()[-1][1]["reason"].startswith(f"{second} ")
    ship(world, handler, [ready_check(first, at(1, 18) + 50_000, "failed")])
    world.feed([failed(first, at(1, 19))])  # PCS ends it in nodeReady
    world.feed([launched("i-0later0000000000", at(1, 40))])
    assert world.published().count("LoopContained") == 1
    episode = world.state().episode
    assert episode is not None
    assert (episode.kept, episode.contained_at) == ([second], at(1, 18) + 10_000)


def waiting_kept_nodes(nodes: list[str]) -> World:
    """Lifeguard's quarantine of the article's script in place, with the ready check under TERMINATE; each
    of `nodes` reported the script failing under STOP_SEQUENCE (at 01:17)."""
    world = World()
    quarantined = quarantined_config()
    quarantined["stages"]["nodeReady"][0]["onError"] = "TERMINATE"
    quarantine_in_ledger(world, quarantined)
    world.feed(ARTICLE[:6])
    world.person_sets(quarantined, at(1, 13))
    for node in nodes:
        kept_report(node, at(1, 17), world)
    return world


def ready_check(instance: str, when: int, outcome: str) -> dict[str, Any]:
    """The instance's report of its ready check's run under TERMINATE, as shipped."""
    run = ran(instance, when, outcome=outcome, script="ready-check", stage="nodeReady")
    return json.loads(run.to_json()) | {"on_error": "TERMINATE"}


@pytest.mark.parametrize("ending", [9, 10, 12])
def test_a_node_up_behind_ten_waiting_ones_that_then_end_is_kept(ending: int) -> None:
    """A scale-up of the quarantined configuration: the first `ending` nodes fail their ready checks (PCS
    ends them), the next passes it, all reported in one batch. Past ten waiting nodes, the one up was not
    judged, and once their failures came after its success nothing judged it: never kept, never told."""
    nodes = [f"i-0node{k:011d}" for k in range(ending + 1)]
    world, up = waiting_kept_nodes(nodes), nodes[-1]
    world.feed(
        [launched(n, at(1, 14)) for n in nodes]
        + [succeeded(n, at(1, 18) + k * 1000) for k, n in enumerate(nodes)]
    )
    checks = [ready_check(n, at(1, 18) + 40_000, "failed") for n in nodes[:-1]]
    ship(world, reports_handler(world), [*checks, ready_check(up, at(1, 18) + 40_000, "succeeded")])
    world.feed([failed(n, at(1, 19)) for n in nodes[:-1]])  # PCS ends them in nodeReady
    world.feed([launched("i-0later0000000000", at(1, 40))])
    assert world.published().count("LoopContained") == 1
    episode = world.state().episode
    assert episode is not None
    assert episode.kept == [up]


def test_a_waiting_node_kept_after_the_loop_was_contained_is_listed(monkeypatch: pytest.MonkeyPatch) -> None:
    """The second node's ready check passes first (contained by it), then the first's: it is up and kept,
    and was listed only in memory, its state written as if only its maps had changed."""
    monkeypatch.setattr("lifeguard.group_state.CHECK_MAPS_ONLY", False)  # as deployed
    first, second = "i-0kept00000000000", "i-0kept00000000001"
    world, handler = nodes_up([first, second])  # ACTIVE at 01:18:00 and 01:18:10
    ship(world, handler, [ready_check(second, at(1, 18) + 40_000, "succeeded")])
    episode = world.state().episode
    assert episode is not None
    assert episode.kept == [second]
    ship(world, handler, [ready_check(first, at(1, 18) + 50_000, "succeeded")])
    episode = world.state().episode
    assert episode is not None
    assert episode.kept == [second, first]
    assert world.published().count("LoopContained") == 1


def test_a_later_node_without_reports_ends_nothing_while_an_earlier_one_waits() -> None:
    """The first node up shows the quarantined script failing and waits for its ready check; a later node's
    ACTIVE, its reports not in yet, in a loop its failing nodes reported nothing of: "the loop is over",
    while the first node's reports show the script failing on."""
    world = waiting_kept_nodes(["i-0kept00000000000"])
    world.feed(
        [
            launched("i-0kept00000000000", at(1, 14)),
            launched("i-0later0000000000", at(1, 15)),
            succeeded("i-0kept00000000000", at(1, 18)),
        ]
    )
    world.feed([succeeded("i-0later0000000000", at(1, 19))])
    assert "LoopResolved" not in world.published()


def nodes_up(nodes: list[str]) -> tuple[World, NodeReportsHandler]:
    """`waiting_kept_nodes`, launched at 01:14 and ACTIVE from 01:18 ten seconds apart, in order; with the
    world's node_reports handler."""
    world = waiting_kept_nodes(nodes)
    world.feed(
        [launched(n, at(1, 14)) for n in nodes]
        + [succeeded(n, at(1, 18) + k * 10_000) for k, n in enumerate(nodes)]
    )
    return world, reports_handler(world)


KEPT_A, KEPT_B, KEPT_C = (f"i-0kept0000000000{k}" for k in range(3))


@pytest.mark.parametrize("contained", [False, True], ids=["first kept", "another kept already"])
@pytest.mark.parametrize("checked", [True, False], ids=["its check passes later", "no report, it stays up"])
def test_a_node_up_before_another_nodes_end_is_kept(contained: bool, checked: bool) -> None:
    """Two nodes up with the quarantined script failing: the first's ready check fails and PCS ends it, the
    second's check passes later (a longer one) or never reports. The first's failure came after the
    second's success, which then was never judged again: up, taking jobs, not kept nor told."""
    world, handler = nodes_up([KEPT_A, KEPT_B, KEPT_C] if contained else [KEPT_A, KEPT_B])
    if contained:
        ship(world, handler, [ready_check(KEPT_C, at(1, 18, 45), "succeeded")])
        assert world.published()[-1] == "LoopContained"
    ship(world, handler, [ready_check(KEPT_A, at(1, 18, 40), "failed")])
    world.feed([failed(KEPT_A, at(1, 19))])  # PCS ends it in nodeReady
    if checked:
        ship(world, handler, [ready_check(KEPT_B, at(1, 20, 30), "succeeded")])
    world.feed([launched("i-0later0000000000", at(1, 40))])  # past the reports' grace, the node up
    episode = world.state().episode
    assert episode is not None
    assert sorted(episode.kept) == ([KEPT_B, KEPT_C] if contained else [KEPT_B])
    assert world.published().count("LoopContained") == 1


def test_nodes_whose_checks_pass_in_one_delivery_are_all_kept() -> None:
    world, handler = nodes_up([KEPT_A, KEPT_B])
    checks = [
        ready_check(KEPT_A, at(1, 18, 40), "succeeded"),
        ready_check(KEPT_B, at(1, 18, 45), "succeeded"),
    ]
    ship(world, handler, checks)
    episode = world.state().episode
    assert episode is not None
    assert episode.kept == [KEPT_A, KEPT_B]


def test_nodes_seen_up_past_the_reports_grace_are_all_kept_at_once() -> None:
    """Nodes whose checks never report, up past the grace: one was listed per later ACTIVE record (a static
    group at its size logs none), and a clean node's ACTIVE was spent listing one instead of ending the
    loop."""
    world, handler = nodes_up([KEPT_A, KEPT_B, KEPT_C])
    world.feed([launched("i-0later0000000000", at(1, 40))])
    episode = world.state().episode
    assert episode is not None
    assert sorted(episode.kept) == [KEPT_A, KEPT_B, KEPT_C]
    clean = "i-0clean000000000a"
    runs = [
        ran(clean, at(1, 44), script="fail-terminate", stage="nodeBootstrapped", on_error="STOP_SEQUENCE"),
        ran(clean, at(1, 44)),
        ran(clean, at(1, 46), script="ready-check", stage="nodeReady", on_error="TERMINATE"),
    ]
    ship(world, handler, [json.loads(r.to_json()) for r in runs])
    world.feed([launched(clean, at(1, 42)), succeeded(clean, at(1, 45))])
    assert world.published()[-2:] == ["LoopContained", "LoopResolved"]


def test_a_clean_node_ends_the_loop_only_once_an_earlier_node_kept_is_listed() -> None:
    """A node up with the quarantined script failing waits for its ready check; a later node boots clean.
    "The loop is over" went out while the first node's reports showed the script failing, and that node,
    up and taking jobs, was never listed: it is kept (LoopContained), then the clean node ends the loop."""
    clean = "i-0clean000000000a"
    world, handler = nodes_up([KEPT_A])
    world.feed([launched(clean, at(1, 15)), succeeded(clean, at(1, 19))])
    runs = [
        ran(clean, at(1, 17), script="fail-terminate", stage="nodeBootstrapped", on_error="STOP_SEQUENCE"),
        ran(clean, at(1, 17)),
    ]
    ship(
        world,
        handler,
        [*(json.loads(r.to_json()) for r in runs), ready_check(clean, at(1, 19, 5), "succeeded")],
    )
    assert world.published() == ["BootstrapLoopDetected"]
    ship(world, handler, [ready_check(KEPT_A, at(1, 19, 10), "succeeded")])
    assert world.published() == ["BootstrapLoopDetected", "LoopContained", "LoopResolved"]
    last = world.state().last_episode
    assert last is not None
    assert (last.kept, last.resolved_by) == ([KEPT_A], clean)


def test_a_node_up_before_a_later_failure_of_a_plain_loop_contains_nothing_by_another_script() -> None:
    """No quarantine: the article's loop, and the owners run their second script under STOP_SEQUENCE. A node
    gets past the loop's script (a flaky fetch), the owners' script fails on it, and its reports come after
    the next node's TERMINATE failure: it was told to contain the loop ("the loop stopped") with the other
    script as the suspect, while the loop went on. A node up before a later failure is kept only by the
    loop's own script."""
    owners = json.loads(json.dumps(TERMINATE))
    owners["stages"]["nodeBootstrapped"][1]["onError"] = "STOP_SEQUENCE"
    world = World(actions=owners)
    handler = reports_handler(world)
    world.feed(ARTICLE[:6])
    ship(world, handler, REPORTED)
    up, later = "i-0midloop00000000", "i-0later0000000000"
    world.feed([launched(up, at(1, 13)), succeeded(up, at(1, 17))])  # no reports yet: proves nothing
    world.feed([launched(later, at(1, 13, 30)), failed(later, at(1, 18))])  # the loop goes on
    runs = [
        ran(up, at(1, 16), script="fail-terminate", on_error="TERMINATE"),
        ran(up, at(1, 16), outcome="failed", script="record-after-fail", on_error="STOP_SEQUENCE"),
        ran(up, at(1, 17), script="ready-check", stage="nodeReady", on_error="CONTINUE"),
    ]
    ship(world, handler, [json.loads(r.to_json()) for r in runs])
    assert "LoopContained" not in world.published()
    episode = world.state().episode
    assert episode is not None
    assert episode.suspect is not None
    assert (episode.suspect.script, episode.kept) == ("fail-terminate", [])


def test_a_kept_node_waits_for_no_ready_check_its_quarantined_nodeready_script_skips() -> None:
    """The loop's script is a nodeReady one, quarantined: its STOP_SEQUENCE failure skips the rest of the
    stage (the article), so a check under TERMINATE after it never runs and ends no node. The kept node was
    left uncontained until a record of the group came past the reports' grace (a static group: hours)."""
    config = json.loads(json.dumps(TERMINATE))
    config["stages"]["nodeBootstrapped"] = [config["stages"]["nodeBootstrapped"][1]]
    config["stages"]["nodeReady"] = [
        {
            "name": name,
            "scriptSource": {"scriptLocation": f"s3://lca-scripts/{name}.sh"},
            "onError": "TERMINATE",
        }
        for name in ("mount", "health")
    ]
    world = World(actions=config)
    quarantined = json.loads(json.dumps(config))
    quarantined["stages"]["nodeReady"][0]["onError"] = "STOP_SEQUENCE"
    quarantine_in_ledger(world, quarantined)
    store = GroupStore(world.table, TABLE)
    for n, start in enumerate((at(1, 5), at(1, 10))):
        node = f"i-0loop0000000000{n}"
        world.feed([launched(node, start), succeeded(node, start + 120_000)])
        failing = ran(
            node, start + 130_000, outcome="failed", script="mount", stage="nodeReady", on_error="TERMINATE"
        )
        store.put_reports([failing])
        world.feed([failed(node, start + 140_000)])
    world.person_sets(quarantined, at(1, 13))
    kept = "i-0kept00000000000"
    world.feed([launched(kept, at(1, 14)), succeeded(kept, at(1, 18))])
    stopped = ran(kept, at(1, 18) + 5000, outcome="failed", script="mount", stage="nodeReady")
    ship(world, reports_handler(world), [json.loads(stopped.to_json()) | {"on_error": "STOP_SEQUENCE"}])
    assert world.published().count("LoopContained") == 1
    episode = world.state().episode
    assert episode is not None
    assert episode.kept == [kept]


@pytest.mark.parametrize(
    ("behind_s", "contained"),
    [(0, True), (240, True), (299, True), (420, False)],
    ids=["in time", "4 min behind", "just under 5 min behind", "7 min behind"],
)
def test_a_kept_nodes_report_dated_by_a_clock_behind_pcss_still_contains_the_loop(
    behind_s: int, contained: bool
) -> None:
    """The node's runs are dated by its clock, its launch by PCS's. A clock minutes behind put the kept
    node's failed run before its launch: none of its boot's, so the loop was told over (LoopResolved) with
    the script still failing, and the configuration proven good. A node's clock may be behind as far as a
    time may be ahead (FUTURE_SKEW_MS, 5 minutes); one further behind is not believed."""
    world = World()
    quarantine_in_ledger(world, quarantined_config())
    world.feed(ARTICLE[:6])
    quarantined = json.loads(json.dumps(TERMINATE))
    quarantined["stages"]["nodeBootstrapped"][0]["onError"] = "STOP_SEQUENCE"
    world.person_sets(quarantined, at(1, 13))
    kept = "i-0kept00000000000"
    kept_report(kept, at(1, 15) - behind_s * 1000, world)  # its script failed a minute after its launch
    world.feed([launched(kept, at(1, 14)), succeeded(kept, at(1, 19))])
    told = world.published()
    assert ("LoopContained" in told, "LoopResolved" in told) == (contained, not contained)
    if contained:
        assert world.state().proven_good is None


def contained_after_the_owners_switch(world: World, ready_on_error: str = "CONTINUE") -> None:
    """The article's loop; the owners switch its script to STOP_SEQUENCE (and its ready check to
    `ready_on_error`) and nodes of that configuration still fail (their boot fails elsewhere), until one is
    kept with the script failing: contained."""
    world.feed(ARTICLE[:6])
    stopping = json.loads(json.dumps(TERMINATE))
    stopping["stages"]["nodeBootstrapped"][0]["onError"] = "STOP_SEQUENCE"
    stopping["stages"]["nodeReady"][0]["onError"] = ready_on_error
    world.person_sets(stopping, at(1, 13))
    world.feed([launched("i-0went0000000000a", at(1, 14)), failed("i-0went0000000000a", at(1, 18))])
    world.feed([launched("i-0went0000000000b", at(1, 19)), failed("i-0went0000000000b", at(1, 23))])
    kept = "i-0kept00000000000"
    kept_report(kept, at(1, 27), world, ready_checked=ready_on_error == "TERMINATE")
    world.feed([launched(kept, at(1, 24)), succeeded(kept, at(1, 29))])
    assert world.published()[-1] == "LoopContained"


def test_a_contained_loop_failing_again_on_fresh_instances_of_its_configuration_is_told_again() -> None:
    """The owners switch the script to STOP_SEQUENCE, and nodes of that configuration still fail (their boot
    fails elsewhere): the loop goes on after the change. A node kept with the script failing contains it;
    fresh instances of that same configuration failing in a row after it are the loop again, told."""
    world = World()
    contained_after_the_owners_switch(world)
    world.feed([launched("i-0agan0000000000a", at(1, 30)), failed("i-0agan0000000000a", at(1, 34))])
    world.feed([launched("i-0agan0000000000b", at(1, 35)), failed("i-0agan0000000000b", at(1, 39))])
    told = [d for t, d in world.bus.events() if t == "BootstrapLoopDetected"]
    assert told[-1]["reason"].startswith("the group loops again after its loop was contained")
    assert len({d["episode_id"] for d in told}) == 1


def held_back_until(world: World, until: int) -> int:
    """The remediation's decision on the open episode's revision: a skip holding Lifeguard's change back
    until `until` (epoch ms), as the daily cap makes it. The revision."""
    episode = world.state().episode
    assert episode is not None
    RemediationStore(world.table, TABLE).save_decision(
        CLUSTER,
        GROUP,
        (episode.episode_id, episode.revision),
        decision=Decision(status="skipped", held_until=until / 1000),
        now=world.now(),
    )
    return episode.revision


def resumed_while_held(world: World, until: int, ready_on_error: str = "CONTINUE") -> tuple[list[str], int]:
    """A contained loop that resumes while the remediation holds its change back until `until`: told once
    (the next revision, which the remediation holds back too), then contained again, untold. What was
    told, and that revision."""
    contained_after_the_owners_switch(world, ready_on_error)
    held_back_until(world, until)
    world.feed([launched("i-0agan0000000000a", at(1, 30)), failed("i-0agan0000000000a", at(1, 34))])
    world.feed([launched("i-0agan0000000000b", at(1, 35)), failed("i-0agan0000000000b", at(1, 39))])
    told = world.published()
    assert told[-1] == "BootstrapLoopDetected"
    assert world.bus.events()[-1][1]["reason"].startswith(
        "the group loops again after its loop was contained"
    )
    revision = held_back_until(world, until)
    kept_report("i-0kept00000000002", at(1, 42), world, ready_checked=ready_on_error == "TERMINATE")
    world.feed([launched("i-0kept00000000002", at(1, 40)), succeeded("i-0kept00000000002", at(1, 45))])
    assert world.published() == told  # contained again in the hold it resumed in: listed, not told
    again = world.state().episode
    assert again is not None
    assert (again.contained_at, again.resumed_in_hold, again.revision) == (at(1, 45), until, revision)
    assert "i-0kept00000000002" in again.kept
    return told, revision


def test_a_contained_loop_resuming_while_its_change_is_held_back_is_told_once_then_after_the_hold() -> None:
    """Contained, then resuming on the same configuration while the remediation holds Lifeguard's change
    back (the daily cap): each turn (a kept node up, then failing in nodeReady, the next failing) told the
    loop, the containment and the skip again, 146 messages in five hours of a twin with DailyCap 1. The
    resumption is told once in the hold; after that the loop is taken in untold, then told after the hold."""
    world = World()
    until = at(1, 50)
    told, revision = resumed_while_held(world, until)
    world.feed([launched("i-0agan0000000000c", at(1, 45)), failed("i-0agan0000000000c", at(1, 47))])
    world.feed([launched("i-0agan0000000000d", at(1, 46)), failed("i-0agan0000000000d", at(1, 49))])
    assert world.published() == told  # resumed again within the hold: taken in, not told
    going_on = world.state().episode
    assert going_on is not None
    assert (going_on.revision, going_on.contained_at, going_on.held_until) == (revision, None, until)
    assert going_on.failures[-1].instance_id == "i-0agan0000000000d"
    world.feed([launched("i-0agan0000000000e", at(1, 51)), failed("i-0agan0000000000e", at(1, 55))])
    assert world.published() == [*told, "BootstrapLoopDetected"]
    detail = world.bus.events()[-1][1]
    assert detail["reason"].startswith("the loop went on after the hold on Lifeguard's change ended")
    assert detail["revision"] == revision + 1


def test_another_script_failing_in_a_contained_loop_while_it_is_held_back_is_told() -> None:
    """Contained again in a hold its loop resumed in, then the fresh nodes fail on another script of the
    same configuration (broken in place): another loop, told, not taken in as the one told."""
    world = World()
    told, revision = resumed_while_held(world, at(5, 0))
    for n, minute in enumerate((46, 51)):
        instance = f"i-0othr000000000{n}"
        GroupStore(world.table, TABLE).put_reports(
            [
                ran(
                    instance,
                    at(1, minute + 2),
                    outcome="failed",
                    script="record-after-fail",
                    on_error="TERMINATE",
                )
            ]
        )
        world.feed([launched(instance, at(1, minute)), failed(instance, at(1, minute + 3))])
    assert world.published() == [*told, "BootstrapLoopDetected"]
    detail = world.bus.events()[-1][1]
    assert (detail["revision"], detail["suspect"]["script"]) == (revision + 1, "record-after-fail")


def test_reports_contradicting_each_other_in_a_contained_loop_held_back_are_told_not_taken_in() -> None:
    """Another script fails fresh nodes while the hold lasts, and a forged report (any node can write one)
    says the episode's script failed on those boots too: the reports name no suspect, and the loop was taken
    in untold for the rest of the hold. Reports that name no script are told as the loop going on."""
    world = World()
    told, revision = resumed_while_held(world, at(5, 0))
    for n, minute in enumerate((46, 51)):
        instance = f"i-0othr000000000{n}"
        other = ran(
            instance, at(1, minute + 2), outcome="failed", script="record-after-fail", on_error="TERMINATE"
        )
        forged = ran(
            instance,
            at(1, minute + 2),
            outcome="failed",
            script="fail-terminate",
            stage="nodeBootstrapped",
            on_error="TERMINATE",
        )
        GroupStore(world.table, TABLE).put_reports([other, forged])
        world.feed([launched(instance, at(1, minute)), failed(instance, at(1, minute + 3))])
    assert world.published() == [*told, "BootstrapLoopDetected"]
    assert world.bus.events()[-1][1]["revision"] == revision + 1


def test_a_loop_contained_untold_in_the_hold_is_told_contained_at_its_first_record_after_it() -> None:
    """Contained again in the hold its resumption was told in (listed, not told), and still contained when
    the hold ended: nothing more was told, and the last word stayed that the loop resumed."""
    world = World()
    until = at(1, 50)
    told, _ = resumed_while_held(world, until)
    world.feed([launched("i-0later00000000001", at(1, 55))])  # the group's first record after the hold
    assert world.published()[len(told) :] == ["LoopContained"]
    detail = world.bus.events()[-1][1]
    assert f"held back (to {utc(until)}), told now" in detail["reason"]
    assert detail["kept"][-1]["instance_id"] == "i-0kept00000000002"
    world.feed([launched("i-0later00000000002", at(1, 58))])
    assert world.published()[len(told) :] == ["LoopContained"]  # told once


def test_fresh_nodes_reporting_the_stopped_script_failed_as_configured_are_taken_in_during_the_hold() -> None:
    """Under the owners' STOP_SEQUENCE, fresh nodes honestly report the script failed under STOP_SEQUENCE
    (their boot fails elsewhere): no failure that ends a boot, the loop as told, not told at every turn."""
    world = World()
    told, _ = resumed_while_held(world, at(1, 50))
    kept_report("i-0agan0000000000c", at(1, 46), world)
    world.feed([launched("i-0agan0000000000c", at(1, 45)), failed("i-0agan0000000000c", at(1, 47))])
    kept_report("i-0agan0000000000d", at(1, 47), world)
    world.feed([launched("i-0agan0000000000d", at(1, 46)), failed("i-0agan0000000000d", at(1, 49))])
    assert world.published() == told


def test_the_containment_told_after_the_hold_names_a_kept_node_still_up() -> None:
    """The newest kept node died in the hold (PCS ended it after its ACTIVE): the containment told after
    the hold named it, and the time of its end as when it came up."""
    world = World()
    told, _ = resumed_while_held(world, at(1, 50))
    world.feed([failed("i-0kept00000000002", at(1, 48))])
    world.feed([launched("i-0later00000000001", at(1, 55))])
    assert world.published()[len(told) :] == ["LoopContained"]
    reason = world.bus.events()[-1][1]["reason"]
    assert reason.startswith("i-0kept00000000000 ")
    assert "i-0kept00000000002" not in reason


@pytest.mark.parametrize("older_ended", [False, True], ids=["another kept node up", "no other up"])
def test_the_containment_told_after_the_hold_names_a_kept_node_its_reports_do_not_show_ending(
    older_ended: bool,
) -> None:
    """The newest kept node's reports show its ready check failing under TERMINATE on that boot, PCS's
    record of its end not in yet: the containment told after the hold names another kept node still up.
    It is told once: with no other up, it names that one (its report may be forged while it stays up)
    rather than keep the containment untold for good."""
    world = World()
    told, _ = resumed_while_held(world, at(1, 50), ready_on_error="TERMINATE")
    if older_ended:
        world.feed([failed("i-0kept00000000000", at(1, 47))])  # PCS ended the older kept node
    ending = ran(
        "i-0kept00000000002",
        at(1, 46),
        outcome="failed",
        script="ready-check",
        stage="nodeReady",
        on_error="TERMINATE",
    )
    GroupStore(world.table, TABLE).put_reports([ending])
    world.feed([launched("i-0later00000000001", at(1, 54))])
    assert world.published()[len(told) :] == ["LoopContained"]
    named = "i-0kept00000000002" if older_ended else "i-0kept00000000000"
    assert world.bus.events()[-1][1]["reason"].startswith(f"{named} ")


def test_the_containment_told_after_the_hold_names_no_kept_node_pcs_replaced_as_unhealthy() -> None:
    """The newest kept node was replaced as unhealthy in the hold (a drained kept node, as PCS answers one):
    the containment told after it named that node, gone, as up with its script failing."""
    world = World()
    told, _ = resumed_while_held(world, at(1, 50))
    world.feed([row("i-0kept00000000002", "TERMINATED", "UNHEALTHY_NODE", at(1, 48))])
    world.feed([launched("i-0later00000000001", at(1, 54))])
    assert world.published()[len(told) :] == ["LoopContained"]
    assert world.bus.events()[-1][1]["reason"].startswith("i-0kept00000000000 ")


@pytest.mark.parametrize("then", ["its late report says it was kept", "it fails after its ACTIVE"])
def test_an_episode_resolved_in_the_hold_tells_its_own_word_not_the_holds_containment(then: str) -> None:
    """A node of the loop resolved it within the hold, then it was opened again: by its late report of the
    script failing (contained, told), or by its failure after ACTIVE (the loop goes on, told). The hold's
    end told the old containment again, or said "the loop stopped" after the loop was told going on."""
    world = World()
    told, _ = resumed_while_held(world, at(1, 50))
    handler = reports_handler(world)
    node = "i-0good00000000001"
    world.feed([launched(node, at(1, 46))])
    clean_on_error = "STOP_SEQUENCE" if then.startswith("its late") else "TERMINATE"
    clean = _run(
        node,
        "nodeBootstrapped",
        "record-after-fail",
        "succeeded",
        on_error=clean_on_error,
        at_s=at(1, 47) // 1000,
    )
    ship(world, handler, [clean])
    world.feed([succeeded(node, at(1, 48))])
    if then.startswith("its late"):
        late = _run(
            node,
            "nodeBootstrapped",
            "fail-terminate",
            "failed",
            on_error="STOP_SEQUENCE",
            at_s=at(1, 47) // 1000 + 1,
        )
        ship(world, handler, [late])
        expected = ["LoopResolved", "LoopContained"]
    else:
        world.feed([failed(node, at(1, 49))])
        expected = ["LoopResolved", "BootstrapLoopDetected"]
    assert world.published()[len(told) :] == expected
    world.feed([launched("i-0later00000000001", at(1, 55))])
    assert world.published()[len(told) :] == expected


def test_reports_naming_script_after_script_in_a_hold_are_told_once_each_not_at_every_turn() -> None:
    """Any node can write a report: fresh nodes' reports naming another script at each turn of a hold (or
    two at once, or one the configuration does not run under TERMINATE) told the loop again at every turn,
    each told revision skipped again: the flood the hold's quiet was for. Each script is told once."""
    world = World()
    until = at(3, 0)
    told, _ = resumed_while_held(world, until)
    forged = [
        [("record-after-fail", "nodeBootstrapped")],
        [("ready-check", "nodeReady")],  # run under CONTINUE: a TERMINATE failure of it cannot be true
        [("record-after-fail", "nodeBootstrapped"), ("fail-terminate", "nodeBootstrapped")],
        [("record-after-fail", "nodeBootstrapped")],
    ]
    for turn, scripts in enumerate(forged):
        start = 46 + 12 * turn
        for k in range(2):
            instance = f"i-0trn{turn:02d}0000000{k}"
            at_ms = at(1 + (start + 4 * k) // 60, (start + 4 * k) % 60)
            reports = [
                ran(
                    instance, at_ms + 60_000, outcome="failed", script=name, stage=stage, on_error="TERMINATE"
                )
                for name, stage in scripts
            ]
            GroupStore(world.table, TABLE).put_reports(reports)
            world.feed([launched(instance, at_ms), failed(instance, at_ms + 180_000)])
        held_back_until(world, until)  # each revision told is held back to the same end
        kept = f"i-0kpt{turn:02d}00000000"
        kept_at = at(1 + (start + 9) // 60, (start + 9) % 60)
        kept_report(kept, kept_at + 60_000, world)
        world.feed([launched(kept, kept_at), succeeded(kept, kept_at + 120_000)])
    assert world.published()[len(told) :] == ["BootstrapLoopDetected"]  # record-after-fail, once
    assert world.bus.events()[-1][1]["suspect"]["script"] == "record-after-fail"


def test_a_containment_after_another_revision_in_the_hold_is_told_at_once() -> None:
    """The owners pushed another configuration in the hold and the loop went on (told, its revision
    decided with nothing held back): a node kept on it was listed untold for the old hold, and told at the
    hold's end as kept "while Lifeguard's change was held back"."""
    world = World()
    told, _ = resumed_while_held(world, at(5, 0))
    config = quarantined_config()
    config["stages"]["nodeBootstrapped"][1]["arguments"] = ["v2"]
    world.person_sets(config, at(1, 46))
    world.feed([launched("i-0new00000000000a", at(1, 47)), failed("i-0new00000000000a", at(1, 49))])
    world.feed([launched("i-0new00000000000b", at(1, 50)), failed("i-0new00000000000b", at(1, 52))])
    episode = world.state().episode
    assert episode is not None
    assert world.published()[len(told) :] == ["BootstrapLoopDetected"]
    RemediationStore(world.table, TABLE).save_decision(
        CLUSTER,
        GROUP,
        (episode.episode_id, episode.revision),
        decision=Decision(status="applied"),
        now=world.now(),
    )
    kept_report("i-0kept0000000new1", at(1, 55), world)
    world.feed([launched("i-0kept0000000new1", at(1, 53)), succeeded("i-0kept0000000new1", at(1, 57))])
    assert world.published()[len(told) :] == ["BootstrapLoopDetected", "LoopContained"]
    world.feed([launched("i-0late00000000002", at(5, 1))])
    assert world.published()[len(told) :] == ["BootstrapLoopDetected", "LoopContained"]


def test_a_node_kept_after_the_hold_its_loop_resumed_in_is_told() -> None:
    """The hold its loop resumed in is over: a kept node is told again (the loop is contained, news)."""
    world = World()
    until = at(1, 50)
    told, _ = resumed_while_held(world, until)
    world.feed([launched("i-0agan0000000000c", at(1, 45)), failed("i-0agan0000000000c", at(1, 47))])
    world.feed([launched("i-0agan0000000000d", at(1, 46)), failed("i-0agan0000000000d", at(1, 49))])
    kept_report("i-0kept00000000003", at(1, 53), world)
    world.feed([launched("i-0kept00000000003", at(1, 50)), succeeded("i-0kept00000000003", at(1, 55))])
    assert world.published()[len(told) :] == ["LoopContained"]


def test_a_contained_loop_with_fresh_failures_between_kept_nodes_is_not_told_again() -> None:
    """Contained: each fresh node of the configuration fails, each kept one stays up with the script
    failing, turn about. Not a loop in a row, and the episode already says the script fails: nothing is
    told again, and it stays contained (remediation is not re-armed)."""
    world = World()
    contained_after_the_owners_switch(world)
    opened = world.state().episode
    assert opened is not None
    contained_at = opened.contained_at
    assert contained_at is not None
    told = world.published()
    minute = 30
    for n in range(3):
        fresh = f"i-0turn0000000000{n}"
        world.feed([launched(fresh, at(1, minute)), failed(fresh, at(1, minute + 3))])
        if n < 2:
            other = f"i-0kept0000000001{n}"
            kept_report(other, at(1, minute + 5), world)
            world.feed([launched(other, at(1, minute + 4)), succeeded(other, at(1, minute + 7))])
        minute += 8
    assert world.published() == told
    episode = world.state().episode
    assert episode is not None
    assert episode.contained_at == contained_at


def test_after_containment_a_node_that_boots_with_no_failed_script_resolves_the_loop_and_proves_good() -> (
    None
):
    world = World()
    quarantined_node_boots(world)
    world.feed([launched("i-0clean0000000000", at(1, 30)), succeeded("i-0clean0000000000", at(1, 35))])
    assert world.published()[-1] == "LoopResolved"
    state = world.state()
    assert state.episode is None
    assert state.last_episode is not None
    assert state.last_episode.resolved_by == "i-0clean0000000000"


def loop_of_a_script_set_to_continue() -> tuple[World, str, dict[str, Any], NodeReportsHandler]:
    """The article's loop, then the owner lets the script fail and go on (CONTINUE): a success then proves
    the configuration until a report says the script failed (under STOP_SEQUENCE the success alone would
    prove nothing). Returns the world, the node that boots next, its report of the script failing (at
    1:17) and the node_reports handler."""
    world = World()
    world.feed(ARTICLE[:6])
    kept_going = json.loads(json.dumps(TERMINATE))
    kept_going["stages"]["nodeBootstrapped"][0]["onError"] = "CONTINUE"
    world.person_sets(kept_going, at(1, 13))
    kept = "i-0kept00000000000"
    report = {
        **stream("article-terminate-node-reports")[0],
        "instance_id": kept,
        "on_error": "CONTINUE",
        "started_at": at(1, 17) // 1000,
        "ended_at": at(1, 17) // 1000,
    }
    store = GroupStore(world.table, TABLE)
    updater = GroupUpdater(store, EventPublisher(world.bus, BUS, sleep=lambda _: None), clock=world.now)
    reports = NodeReportsHandler(store, updater, DetectionSettings("quarantine", 2, 60), clock=world.now)
    return world, kept, report, reports


def test_reports_that_come_after_the_success_turn_the_resolution_into_containment_and_unprove_it() -> None:
    """The scaling log's success first: resolved (and, with the configuration read, proven good). Then the
    kept node's report of the failed script: the episode is open again, contained, and nothing is proven."""
    world, kept, report, reports = loop_of_a_script_set_to_continue()
    world.feed([launched(kept, at(1, 14)), succeeded(kept, at(1, 19))])
    assert world.published()[-1] == "LoopResolved"
    world.feed([succeeded(kept, at(1, 21))])  # a minute on: the configuration is read and proven
    assert world.state().proven_good is not None
    reports.handle_messages([(json.dumps(report), "stream:1")])
    assert world.published()[-1] == "LoopContained"
    state = world.state()
    assert state.episode is not None
    assert state.episode.kept == [kept]
    assert state.proven_good is None
    (detail,) = [d for t, d in world.bus.events() if t == "LoopContained"]
    assert "came after the scaling log's success" in detail["reason"]
    # The same report again changes nothing and says nothing more.
    reports.handle_messages([(json.dumps(report), "stream:1")])
    assert world.published().count("LoopContained") == 1


def test_late_reports_of_a_node_that_ended_hours_after_the_loop_s_end_still_reopen_it_as_contained() -> None:
    """The success ended the loop on its own configuration; PCS ended the node 7 hours on (past the boot
    that ended the loop: a reboot's script, say, so the loop is not reopened by that end), and only then
    came the node's reports of its launch boot, the loop's script failing under CONTINUE: the node was kept,
    and the loop contained, all those hours. The reports reopen it as contained, as before PCS's end."""
    world, handler, _ = ready_check_under_terminate()
    first, second, node = "i-0own000000000001", "i-0own000000000002", "i-0own000000000003"
    world.feed([launched(first, at(1, 3)), failed(first, at(1, 6))])
    world.feed([launched(second, at(1, 9)), failed(second, at(1, 12))])
    world.feed([launched(node, at(1, 13)), succeeded(node, at(1, 16))])
    world.feed([launched("i-0other0000000001", at(1, 40))])  # past the reports' grace
    assert world.published() == ["BootstrapLoopDetected", "LoopResolved"]
    world.feed([failed(node, at(1, 16) + 7 * 3_600_000)])
    assert not world.state().outcomes[node].succeeded
    failing = _run(
        node, "nodeBootstrapped", "record-after-fail", "failed", on_error="CONTINUE", at_s=at(1, 15) // 1000
    )
    ship(world, handler, [failing])
    assert world.published()[-1] == "LoopContained"


def resolved_by_a_node_with_a_ready_check() -> tuple[World, str, dict[str, Any], NodeReportsHandler]:
    """`loop_of_a_script_set_to_continue`, its configuration's nodeReady check under TERMINATE: the kept
    node's success (1:19) resolves the loop and proves the configuration; its reports are still to come."""
    world, kept, report, reports = loop_of_a_script_set_to_continue()
    ending = json.loads(json.dumps(TERMINATE))
    ending["stages"]["nodeBootstrapped"][0]["onError"] = "CONTINUE"
    ending["stages"]["nodeReady"][0]["onError"] = "TERMINATE"
    world.person_sets(ending, at(1, 13))
    world.feed([launched(kept, at(1, 14)), succeeded(kept, at(1, 19))])
    world.feed([succeeded(kept, at(1, 21))])
    assert world.published()[-1] == "LoopResolved"
    return world, kept, report, reports


def ready_check_failed(instance: str) -> str:
    """The instance's report of its nodeReady check failing under TERMINATE (at 1:18), as shipped."""
    check = ran(
        instance, at(1, 18), outcome="failed", script="ready-check", stage="nodeReady", on_error="TERMINATE"
    )
    return check.to_json()


def test_reports_after_the_success_saying_its_node_ends_still_reopen_the_loop_as_contained() -> None:
    """The success ended the loop; its node's reports then show the loop's script failing under CONTINUE and
    a ready check under TERMINATE, which any node can forge. Nothing judges a resolved loop's node again
    once the reports' grace is over, so held back, a forged report kept "the loop is over" for good while
    the node served with its script failing: it is contained at once, as before."""
    world, kept, report, reports = resolved_by_a_node_with_a_ready_check()
    reports.handle_messages([(json.dumps(report), "stream:1"), (ready_check_failed(kept), "stream:2")])
    world.feed([launched("i-0later0000000000", at(1, 40))])
    assert world.published()[-1] == "LoopContained"


def test_reports_after_the_success_of_a_node_pcs_has_since_ended_reopen_nothing() -> None:
    """The success ended the loop; PCS then ended its node (a ready check under TERMINATE failed, on a
    configuration other than the loop's: a loop of its own, not this one reopened). The node's reports come
    after that end, showing the loop's script failing on: the node is gone, so it keeps nothing, and no
    LoopContained says "the loop stopped" with it kept (dated at its end)."""
    world, kept, report, reports = resolved_by_a_node_with_a_ready_check()
    world.feed([failed(kept, at(1, 22))])
    state = world.state()
    assert state.episode is None
    assert state.last_episode is not None
    assert state.last_episode.resolved_by == kept
    reports.handle_messages([(json.dumps(report), "stream:1"), (ready_check_failed(kept), "stream:2")])
    assert "LoopContained" not in world.published()
    state = world.state()
    assert state.episode is None
    assert state.last_episode is not None
    assert state.last_episode.resolved_by == kept


def ran(
    instance: str,
    when: int,
    *,
    outcome: str = "succeeded",
    script: str = "record-after-fail",
    stage: str | None = None,
    on_error: str | None = None,
) -> NodeReport:
    """A run the instance reported at `when` (epoch ms), of the article's report stream's shape (its stage
    and onError unless given)."""
    failed = outcome == "failed"
    first = stream("article-terminate-node-reports")[0]
    return NodeReport.model_validate(
        {
            **first,
            "instance_id": instance,
            "stage": stage or first["stage"],
            "script": script,
            "outcome": outcome,
            "on_error": on_error or first["on_error"],
            "exit_code": 1 if failed else 0,
            "log_tail": "",
            "started_at": when // 1000,
            "ended_at": when // 1000,
        }
    )


def quarantine_in_ledger(world: World, quarantined: dict[str, Any]) -> None:
    """Lifeguard's ledger holds the quarantine that produced `quarantined` from the article's config."""
    change_in_ledger(
        world, at(1, 10) / 1000, "ep-0123456789abcdef", "quarantine", before=TERMINATE, after=quarantined
    )


def change_in_ledger(
    world: World, when: float, episode: str, action: str, *, before: dict[str, Any], after: dict[str, Any]
) -> None:
    """Lifeguard's ledger holds one change of the group, made at `when` (epoch seconds) for `episode`."""
    change = AppliedChange(
        at=when,
        episode_id=episode,
        revision=1,
        action=action,
        config_before=before,
        config_after=after,
        fingerprint_before=fingerprint_of(before),
        fingerprint_after=fingerprint_of(after),
    )
    RemediationStore(world.table, TABLE).save_ledger(CLUSTER, GROUP, Ledger(changes=[change]))


def quarantined_config() -> dict[str, Any]:
    quarantined: dict[str, Any] = json.loads(json.dumps(TERMINATE))
    quarantined["stages"]["nodeBootstrapped"][0]["onError"] = "STOP_SEQUENCE"
    return quarantined


@pytest.mark.parametrize("lifeguards", [True, False], ids=["Lifeguard's quarantine", "the owners' own"])
def test_a_loop_resolved_under_lifeguards_quarantine_says_it_is_still_in_place_with_the_undo(
    lifeguards: bool,
) -> None:
    """A clean boot ends the loop, and Lifeguard's quarantine stays in the configuration: the flaky script's
    next failure is logged as a success and its node serves without what the script does (a mount). The
    resolution said only that the loop was over."""
    world = World()
    if lifeguards:
        quarantine_in_ledger(world, quarantined_config())
    quarantined_node_boots(world)
    clean = "i-0clean000000000a"
    GroupStore(world.table, TABLE).put_reports(
        [
            ran(
                clean, at(1, 22), script="fail-terminate", stage="nodeBootstrapped", on_error="STOP_SEQUENCE"
            ),
            ran(clean, at(1, 23)),
        ]
    )
    world.feed([launched(clean, at(1, 21)), succeeded(clean, at(1, 25))])
    assert world.published()[-1] == "LoopResolved"
    detail = world.bus.events()[-1][1]
    assert ("Lifeguard's quarantine is still in the configuration" in detail["reason"]) is lifeguards
    assert (detail.get("undo") is not None) is lifeguards


def test_a_loop_resolved_by_reports_under_the_owners_stop_sequence_claims_no_quarantine_of_lifeguards() -> (
    None
):
    """The node_reports handler without the ledger's lookup took every configuration for one holding
    Lifeguard's quarantine: a resolution under the owners' own STOP_SEQUENCE said Lifeguard's quarantine
    was still in place, and offered an undo of a change Lifeguard never made."""
    world = World()
    handler = reports_handler(world)
    GroupStore(world.table, TABLE).put_reports([NodeReport.model_validate(r) for r in REPORTED])
    contained_after_the_owners_switch(world)  # the owners' own STOP_SEQUENCE, no change of Lifeguard's
    told = world.published()
    clean = "i-0clean000000000z"
    world.feed([launched(clean, at(1, 30)), succeeded(clean, at(1, 35))])  # waits for its reports
    scripts = (("fail-terminate", "STOP_SEQUENCE"), ("record-after-fail", "CONTINUE"))
    runs = [
        _run(clean, "nodeBootstrapped", name, "succeeded", on_error=on_error, at_s=at(1, 33) // 1000)
        for name, on_error in scripts
    ]
    ship(world, handler, runs)
    assert world.published()[len(told) :] == ["LoopResolved"]
    detail = world.bus.events()[-1][1]
    assert "Lifeguard's quarantine" not in detail["reason"]
    assert detail.get("undo") is None


def test_a_node_whose_reports_show_every_script_succeeded_proves_good_and_the_proof_says_so() -> None:
    world = World()
    world.person_sets(REVERTED, at(1, 10))
    GroupStore(world.table, TABLE).put_reports([ran("i-0new0000000000001", at(1, 15))])
    world.feed([launched("i-0new0000000000001", at(1, 13)), succeeded("i-0new0000000000001", at(1, 18))])
    proof = world.state().proven_good
    assert proof is not None
    assert proof.evidence == "BOOTSTRAP_SUCCESS, and its reports show 1 script run(s), none failed"


@pytest.mark.parametrize("lifeguards", [True, False])
def test_a_node_without_reports_proves_no_configuration_with_a_script_under_stop_sequence(
    lifeguards: bool,
) -> None:
    """PCS logs a STOP_SEQUENCE script's failure as BOOTSTRAP_SUCCESS (the article): whether Lifeguard's
    quarantine or the owner put it there (the documented manual advice), that success alone proves nothing
    (DESIGN)."""
    world = World()
    quarantined = quarantined_config()
    if lifeguards:
        quarantine_in_ledger(world, quarantined)
    world.person_sets(quarantined, at(1, 10))
    world.feed([launched("i-0new0000000000001", at(1, 13)), succeeded("i-0new0000000000001", at(1, 18))])
    assert world.state().proven_good is None


def test_a_node_without_reports_proves_a_configuration_with_no_script_under_stop_sequence() -> None:
    world = World()
    world.person_sets(REVERTED, at(1, 10))
    world.feed([launched("i-0new0000000000001", at(1, 13)), succeeded("i-0new0000000000001", at(1, 18))])
    proof = world.state().proven_good
    assert proof is not None
    assert (
        proof.evidence
        == "BOOTSTRAP_SUCCESS; no node reports yet, and no STOP_SEQUENCE script in its configuration"
    )


def test_a_loop_whose_nodes_reported_only_succeeded_scripts_is_not_blamed_on_a_script() -> None:
    """Every nodeBootstrapped script of the configuration reported succeeded on every failing node: the boot
    failed elsewhere. Some of them are not enough (any node can write a success of another's script)."""
    partial = World()
    GroupStore(partial.table, TABLE).put_reports(
        [ran(FIRST, 1792544790000), ran(SECOND, 1792545150000, script="fail-terminate")]
    )
    partial.feed(ARTICLE)
    [(_, told)] = partial.bus.events()
    assert told["reason"].startswith("no node report named a failing script")
    world = World()
    GroupStore(world.table, TABLE).put_reports(
        [
            ran(instance, when, script=script)
            for instance, when in ((FIRST, 1792544790000), (SECOND, 1792545150000))
            for script in ("fail-terminate", "record-after-fail")
        ]
    )
    world.feed(ARTICLE)
    [(_, detail)] = world.bus.events()
    assert detail["suspect"] is None
    assert detail["reason"].startswith("no script failed on these nodes")
    assert detail["signals"] == ["scaling_log", "node_reports"]
    episode = world.state().episode
    assert episode is not None
    assert episode.no_script_failed


def test_a_ready_check_under_terminate_that_reported_no_run_keeps_the_loop_on_the_scripts() -> None:
    """The article's ready-check under TERMINATE: PCS logs a node ACTIVE before nodeReady runs, and its
    failure ends the node all the same. Failing nodes whose nodeBootstrapped scripts all reported succeeded,
    but whose ready-check's report never left them, did not fail outside the scripts: the ready-check may be
    why. The detection says no report named a script, and quarantine switches the TERMINATE scripts."""
    actions = copy.deepcopy(TERMINATE)
    del actions["stages"]["nodeReady"][0]["onError"]  # PCS's default: TERMINATE
    reports = [
        ran(instance, when, script=script)
        for instance, when in ((FIRST, 1792544790000), (SECOND, 1792545150000))
        for script in ("fail-terminate", "record-after-fail")
    ]
    world = World(actions=actions)
    GroupStore(world.table, TABLE).put_reports(reports)
    world.feed(ARTICLE)
    [(_, detail)] = world.bus.events()
    assert detail["suspect"] is None
    assert detail["reason"].startswith("no node report named a failing script")
    episode = world.state().episode
    assert episode is not None
    assert not episode.no_script_failed
    checked = World(actions=actions)  # with its ready-check's runs reported too, no script failed
    ready = [
        ran(instance, when + 60_000, stage="nodeReady", script="ready-check")
        for instance, when in ((FIRST, 1792544790000), (SECOND, 1792545150000))
    ]
    GroupStore(checked.table, TABLE).put_reports(reports + ready)
    checked.feed(ARTICLE)
    [(_, told)] = checked.bus.events()
    assert told["reason"].startswith("no script failed on these nodes")


def test_failures_that_leave_a_node_up_name_no_script_of_a_loop_and_the_reason_says_so() -> None:
    """Each failing node reported only a failure of the article's ready-check (nodeReady, CONTINUE): a
    node stays up through that, so it is not why PCS terminated them. No suspect; the reason says what the
    nodes did report."""
    kept_up = "CONTINUE"
    world = World()
    GroupStore(world.table, TABLE).put_reports(
        [
            ran(instance, when, outcome="failed", stage="nodeReady", script="ready-check", on_error=kept_up)
            for instance, when in ((FIRST, 1792544790000), (SECOND, 1792545150000))
        ]
    )
    world.feed(ARTICLE)
    [(_, detail)] = world.bus.events()
    assert detail["suspect"] is None
    assert detail["reason"].startswith(
        "no node report named a script failing under TERMINATE: the failing nodes reported only failures "
        "that leave a node up (last nodeReady/ready-check under CONTINUE)"
    )


def test_a_loop_failing_on_two_scripts_names_the_other_beside_the_suspect() -> None:
    """Each failing node reported a TERMINATE failure of another script (record-after-fail runs under
    PCS's default, TERMINATE): the newest is the suspect, the other is kept beside it for the quarantine."""
    world = World()
    GroupStore(world.table, TABLE).put_reports(
        [
            ran(FIRST, 1792544790000, outcome="failed", script="fail-terminate"),
            ran(SECOND, 1792545150000, outcome="failed", script="record-after-fail", on_error="TERMINATE"),
        ]
    )
    world.feed(ARTICLE)
    [(_, detail)] = world.bus.events()
    assert detail["suspect"]["script"] == "record-after-fail"
    episode = world.state().episode
    assert episode is not None
    assert episode.also_failing == ["nodeBootstrapped/fail-terminate"]


def test_failures_written_of_a_continue_script_under_terminate_do_not_hide_the_suspect() -> None:
    """Reports of ready-check failing under TERMINATE (the configuration runs it under CONTINUE: no node
    booted on it ran it so) beside each node's own failure of fail-terminate made every failing node look
    contradicted: the detection named no suspect, and a quarantine would switch every TERMINATE script."""
    world = World()
    GroupStore(world.table, TABLE).put_reports(
        [
            ran(FIRST, 1792544790000, outcome="failed", script="fail-terminate"),
            ran(SECOND, 1792545150000, outcome="failed", script="fail-terminate"),
            ran(FIRST, 1792544791000, outcome="failed", script="ready-check", stage="nodeReady"),
            ran(SECOND, 1792545151000, outcome="failed", script="ready-check", stage="nodeReady"),
        ]
    )
    world.feed(ARTICLE)
    [(_, detail)] = world.bus.events()
    assert detail["suspect"]["script"] == "fail-terminate"
    assert detail["suspect"]["instances"] == [FIRST, SECOND]


def test_a_log_event_of_another_form_is_skipped_and_counted_and_its_batch_read() -> None:
    """One log event of a delivery with a float `timestamp` (or an `id` that is a number) had the whole
    delivery refused: the loop's records in it were never read, the handler returned (no retry, nothing
    parked), and the summary counted no record at all."""
    world = World()
    events = [
        {"id": str(index), "timestamp": row["event_timestamp"], "message": json.dumps(row)}
        for index, row in enumerate(ARTICLE)
    ]
    events.append({"id": "x", "timestamp": float(ARTICLE[-1]["event_timestamp"]), "message": "{}"})
    payload = {
        "messageType": "DATA_MESSAGE",
        "owner": "123456789012",
        "logGroup": LOG_GROUP,
        "logStream": LOG_STREAM,
        "subscriptionFilters": ["lifeguard"],
        "logEvents": events,
    }
    data = base64.b64encode(gzip.compress(json.dumps(payload).encode())).decode()
    world.clock.set(datetime.fromtimestamp(ARTICLE[-1]["event_timestamp"] / 1000, UTC))
    summary = world.handler.handle_event({"awslogs": {"data": data}})
    assert world.published() == ["BootstrapLoopDetected"]
    assert (summary.records, summary.skipped, summary.unreadable) == (len(ARTICLE) + 1, 1, 1)
    assert summary.skipped_reasons == {"log event not as CloudWatch Logs sends it": 1}


def test_two_long_lived_nodes_failing_at_a_reboot_are_no_loop_and_prove_nothing_wrong() -> None:
    """Ten nodes up two days, then a maintenance reboot (the article's `scontrol reboot`) at which an
    EVERY_BOOT script fails on two: their failures replaced their successes as their outcomes, two failures
    in a row with no success in the window, and the group was told a loop (and quarantined), its proof of
    good taken back as "failed after its BOOTSTRAP_SUCCESS (in nodeReady)". A node's launch boot ended when
    it came up; their replacements, fresh, are what would make a loop."""
    world = World(actions=load_event("configs/article-first-boot-every-boot.json"))
    nodes = [f"i-0node{n:012d}" for n in range(10)]
    world.feed([launched(instance, at(1, 1)) for instance in nodes])
    world.feed([succeeded(instance, at(1, 6, n)) for n, instance in enumerate(nodes)])
    proof = world.state().proven_good
    assert proof is not None
    reboot = at(1, 30) + 2 * 24 * 3600 * 1000
    world.feed([failed(nodes[8], reboot + 20_000), failed(nodes[9], reboot + 21_000)])
    assert world.published() == []
    assert world.state().proven_good == proof
    # Their replacements failing too are a loop.
    fresh = ["i-0fresh0000000001", "i-0fresh0000000002"]
    world.feed([launched(instance, reboot + 60_000) for instance in fresh])
    world.feed([failed(fresh[0], reboot + 300_000), failed(fresh[1], reboot + 301_000)])
    assert world.published() == ["BootstrapLoopDetected"]


def test_a_loop_without_any_report_says_that_no_report_named_a_script() -> None:
    world = World()
    GroupStore(world.table, TABLE).put_reports([ran(FIRST, 1792544790000)])  # one node only: not enough
    world.feed(ARTICLE)
    [(_, detail)] = world.bus.events()
    assert detail["suspect"] is None
    assert detail["reason"] == (
        "no node report named a failing script (are the nodes shipping reports?); the loop began after the "
        "configuration changed at 2026-10-21 01:00:00 UTC (by whom is not known)"
    )
    assert detail["changed_by"] == {"arn": None, "at": at(1, 0), "source": "unknown"}
    assert detail["signals"] == ["scaling_log"]
    episode = world.state().episode
    assert episode is not None
    assert not episode.no_script_failed


def reports_handler(world: World, *, clusters: frozenset[str] = frozenset()) -> NodeReportsHandler:
    """The node_reports handler on the world's table, bus and PCS, as its composition root builds it."""
    store = GroupStore(world.table, TABLE)
    updater = GroupUpdater(store, EventPublisher(world.bus, BUS, sleep=lambda _: None), clock=world.now)
    return NodeReportsHandler(
        store,
        updater,
        DetectionSettings("quarantine", 2, 60),
        pcs=PcsGateway(world.api),
        clusters=clusters,
        clock=world.now,
    )


def ship(world: World, handler: NodeReportsHandler, reports: list[dict[str, Any]]) -> None:
    """The reports delivered as their subscription batch, with the clock a minute after the newest."""
    newest = max(r["ended_at"] for r in reports) + 60
    world.clock.set(datetime.fromtimestamp(newest, UTC))
    handler.handle_messages((json.dumps(r), "(report)") for r in reports)


REPORTED = stream("article-terminate-node-reports")


def test_reports_alone_detect_the_loop_once_and_the_scaling_log_bearing_it_out_announces_it_again() -> None:
    world = World()
    handler = reports_handler(world)
    ship(world, handler, REPORTED)
    [(detail_type, detail)] = world.bus.events()
    assert detail_type == "BootstrapLoopDetected"
    assert detail["signals"] == ["node_reports"]
    assert (detail["suspect"]["stage"], detail["suspect"]["script"]) == ("nodeBootstrapped", "fail-terminate")
    assert [f["instance_id"] for f in detail["failures"]] == [FIRST, SECOND]
    assert detail["config_fingerprint"] == fingerprint_of(TERMINATE)  # read from PCS: reports carry none
    assert detail["reason"].startswith("detected from node reports: 2 instances failed")
    ship(world, handler, REPORTED)  # delivered again
    world.feed(ARTICLE)  # then the scaling log, with the same loop
    world.feed(ARTICLE)
    # Any node can write reports: the loop is acted on once PCS's scaling log bears it out, announced then.
    assert world.published() == ["BootstrapLoopDetected", "BootstrapLoopDetected"]
    borne_out = world.bus.events()[-1][1]
    assert (borne_out["episode_id"], borne_out["revision"]) == (detail["episode_id"], 2)
    assert borne_out["signals"] == ["scaling_log", "node_reports"]
    assert borne_out["reason"].startswith("the scaling log bears out the loop the node reports found: 2 ")
    episode = world.state().episode
    assert episode is not None
    assert (episode.episode_id, episode.signals) == (detail["episode_id"], ["scaling_log", "node_reports"])


def test_reports_after_the_detection_name_the_other_script_a_loops_nodes_failed_on() -> None:
    world = World()
    world.feed(ARTICLE)  # the scaling log first: no report yet, no suspect
    episode = world.state().episode
    assert episode is not None
    assert (episode.suspect, episode.also_failing) == (None, [])
    runs = [
        ran(FIRST, 1792544790000, outcome="failed", script="fail-terminate"),
        ran(SECOND, 1792545150000, outcome="failed", script="record-after-fail", on_error="TERMINATE"),
    ]
    ship(world, reports_handler(world), [json.loads(run.to_json()) for run in runs])
    episode = world.state().episode
    assert episode is not None
    assert episode.suspect is not None
    assert (episode.suspect.script, episode.also_failing) == (
        "record-after-fail",
        ["nodeBootstrapped/fail-terminate"],
    )


def test_reports_dated_ahead_of_the_clock_do_not_stretch_what_a_read_of_pcs_knows() -> None:
    """A node's clock may run ahead of the invocation's: the configuration read to judge a loop from its
    reports is known as of the read, not of the newest report."""
    world = World()
    handler = reports_handler(world)
    newest = max(r["ended_at"] for r in REPORTED)
    world.clock.set(datetime.fromtimestamp(newest - 120, UTC))
    handler.handle_messages((json.dumps(r), "(report)") for r in REPORTED)
    assert world.published() == ["BootstrapLoopDetected"]
    config = world.state().config
    assert config is not None
    assert config.checked_at == config.tags_checked_at == (newest - 120) * 1000


def test_reports_alone_detect_a_loop_past_a_group_read_full_of_older_failed_runs() -> None:
    """A group whose scaling log is not delivered that looped before keeps its failed runs for a fortnight:
    its read stops at its bound, in key order (by instance, not time), before the new loop's. No instance
    is named to read one by one, so the runs for a loop the reports alone show are read further."""
    from lifeguard.node_report import NodeReport

    world = World()
    store = GroupStore(world.table, TABLE)
    template = next(r for r in REPORTED if r["outcome"] == "failed")
    older = [
        NodeReport.model_validate(
            {
                **template,
                "instance_id": f"i-f{n:016x}",
                "started_at": template["started_at"] - 3 * 86_400,
                "ended_at": template["ended_at"] - 3 * 86_400,
            }
        )
        for n in range(RUNS_READ_MAX + 10)
    ]
    store.put_reports(older)  # three days before, sorting after the new loop's instances
    ship(world, reports_handler(world), REPORTED)
    [(detail_type, detail)] = world.bus.events()
    assert detail_type == "BootstrapLoopDetected"
    assert [f["instance_id"] for f in detail["failures"]] == [FIRST, SECOND]


def test_the_scaling_log_first_then_the_reports_is_still_one_episode() -> None:
    world = World()
    world.feed(ARTICLE)
    ship(world, reports_handler(world), REPORTED)
    world.feed(ARTICLE)
    events = world.bus.events()
    assert {d["episode_id"] for _, d in events} == {events[0][1]["episode_id"]}
    assert [(t, d["revision"]) for t, d in events] == [
        ("BootstrapLoopDetected", 1),
        ("BootstrapLoopDetected", 2),
    ]
    assert events[-1][1]["signals"] == ["scaling_log", "node_reports"]  # revision 2 names the script


# The usual fix of a failing script: the same script, its arguments (or its object's version) changed.
FIXED_IN_PLACE = copy.deepcopy(TERMINATE)
FIXED_IN_PLACE["stages"]["nodeBootstrapped"][0]["arguments"] = ["--fixed"]


@pytest.mark.parametrize(
    ("why", "tags", "clusters", "changed_to"),
    [
        ("a cluster outside the stack's ClusterIds", None, frozenset({"pcs_0fedcba987"}), None),
        ("a group tagged off", {"lifeguard:mode": "off"}, frozenset(), None),
        ("runs of the configuration before the current one", None, frozenset(), REVERTED),
        ("runs before a fix that kept the script's name", None, frozenset(), FIXED_IN_PLACE),
    ],
)
def test_node_reports_detect_nothing_for(
    why: str, tags: dict[str, str] | None, clusters: frozenset[str], changed_to: dict[str, Any] | None
) -> None:
    world = World(tags=tags)
    if changed_to is not None:
        world.person_sets(changed_to, at(1, 30))
    ship(world, reports_handler(world, clusters=clusters), REPORTED)
    assert world.bus.entries == [], why
    assert world.state().episode is None, why


def test_node_reports_of_a_loop_in_a_cluster_outside_cluster_ids_are_said_once_a_batch(
    caplog: pytest.LogCaptureFixture,
) -> None:
    """Stored and never looked at, with nothing said: a group enrolled by hand in a cluster the stack does
    not list looped unseen."""
    world = World()
    with caplog.at_level(logging.WARNING):
        ship(world, reports_handler(world, clusters=frozenset({"pcs_0fedcba987"})), REPORTED)
    said = [r.getMessage() for r in caplog.records if "not one of the stack's ClusterIds" in r.getMessage()]
    assert said == [
        f"cluster {CLUSTER}: its nodes report scripts failing under TERMINATE, and it is not one of the "
        "stack's ClusterIds: no loop is looked for there"
    ]
    assert world.bus.entries == []
    caplog.clear()
    with caplog.at_level(logging.WARNING):
        listed = World()
        ship(listed, reports_handler(listed, clusters=frozenset({CLUSTER})), REPORTED)
    assert not [r for r in caplog.records if "ClusterIds" in r.getMessage()]


def test_the_events_a_failed_scaling_log_batch_published_before_it_failed_are_counted() -> None:
    """One group's PutEvents failing fails the batch after the others' events were published: they are out
    of their outboxes and not made again on the retry, so they were never counted."""
    from lifeguard.errors import AwsCallError

    world = World()
    other = "pcs_abcdef02"
    world.pcs.add_compute_node_group(CLUSTER, "lca-gpu", group_id=other, node_lifecycle_actions=TERMINATE)
    theirs = [
        {
            **r,
            "compute_node_group_id": other,
            "details": {**r["details"], "instance_id": r["details"]["instance_id"].replace("i-0", "i-9")},
        }
        for r in ARTICLE[:6]
    ]
    counted: list[str] = []
    world.handler.metric = lambda name, _: counted.append(name)
    world.bus.refuse_calls = 3  # every try of the first group's publish
    with pytest.raises(AwsCallError, match="PutEvents"):
        world.feed([*ARTICLE[:6], *theirs])
    assert [(t, d["compute_node_group_id"]) for t, d in world.bus.events()] == [
        ("BootstrapLoopDetected", other)
    ]
    assert counted.count("BootstrapLoopDetected") == 1
    world.feed([*ARTICLE[:6], *theirs])  # Lambda's retry
    assert [t for t, _ in world.bus.events()] == ["BootstrapLoopDetected", "BootstrapLoopDetected"]
    assert counted.count("BootstrapLoopDetected") == 2


def test_a_groups_publish_that_fails_in_a_report_batch_leaves_the_other_groups_judged_and_is_retried() -> (
    None
):
    """One group's PutEvents failing stopped the batch there: the other groups' loops waited for Lambda's
    retry. Every group is tried, then the batch fails for its retry (its reports are stored; nothing is
    told twice: the judged group's event is out of its outbox)."""
    from lifeguard.errors import AwsCallError

    world = World()
    other = "pcs_abcdef02"
    world.pcs.add_compute_node_group(CLUSTER, "lca-gpu", group_id=other, node_lifecycle_actions=TERMINATE)
    theirs = [
        {**r, "compute_node_group_id": other, "instance_id": r["instance_id"].replace("i-0", "i-9")}
        for r in REPORTED
    ]
    world.bus.refuse_calls = 3  # every try of the first group's publish
    counted: list[str] = []
    handler = reports_handler(world)
    handler.metric = lambda name, _: counted.append(name)
    with pytest.raises(AwsCallError, match="PutEvents"):
        ship(world, handler, [*REPORTED, *theirs])
    assert [(t, d["compute_node_group_id"]) for t, d in world.bus.events()] == [
        ("BootstrapLoopDetected", other)
    ]
    assert counted.count("BootstrapLoopDetected") == 1  # published, so counted, though the batch failed
    ship(world, handler, [*REPORTED, *theirs])  # Lambda's retry
    told = [(t, d["compute_node_group_id"]) for t, d in world.bus.events()]
    assert told == [("BootstrapLoopDetected", other), ("BootstrapLoopDetected", GROUP)]
    assert counted.count("BootstrapLoopDetected") == 2


def test_a_configuration_too_large_to_keep_is_known_by_its_fingerprint_and_the_loop_still_detected() -> None:
    """PCS takes about 700 KB of lifecycle actions; a group's state holding them would pass DynamoDB's
    400 KB and fail every batch of the group. Such a configuration is kept as its fingerprint alone."""
    rng = random.Random(3)

    def arguments() -> list[str]:
        return ["".join(chr(0x4E00 + rng.randrange(20000)) for _ in range(256)) for _ in range(20)]

    big = copy.deepcopy(TERMINATE)
    ready = big["stages"].setdefault("nodeReady", [])
    ready.extend(
        {"name": f"extra-{n}", "scriptSource": {"scriptLocation": "s3://b-x/e.sh"}} for n in range(8)
    )
    for stage in big["stages"].values():
        for script in stage:
            script["arguments"] = arguments()
    world = World()
    resource = next(r for r in world.pcs._resources.values() if r.id == GROUP)
    resource.spec["nodeLifecycleActions"] = big
    assert stored_bytes(canonical_json(big)) > CONFIG_MAX_STORED_BYTES
    world.feed(ARTICLE)
    assert world.published() == ["BootstrapLoopDetected"]
    state = world.state()
    assert state.config is not None
    assert (state.config.fingerprint, state.config.node_lifecycle_actions) == (fingerprint_of(big), None)
    assert not state.config.actions_read
    assert len(state.model_dump_json()) < 16 * 1024


FAKES = ("i-0fake000000000001", "i-0fake000000000002")
LOGGED = ("i-0aaaaaaaaaaaaaaa1", "i-0aaaaaaaaaaaaaaa2")


def forged(instance: str, when_s: int, script: str) -> dict[str, Any]:
    """A failed TERMINATE run as any node can write it into the report log group, for any instance."""
    return {
        **{
            k: v
            for k, v in REPORTED[0].items()
            if k not in {"instance_id", "script", "started_at", "ended_at"}
        },
        "instance_id": instance,
        "script": script,
        "outcome": "failed",
        "on_error": "TERMINATE",
        "exit_code": 1,
        "started_at": when_s,
        "ended_at": when_s,
    }


@pytest.mark.parametrize(
    ("why", "script", "instances", "logged"),
    [
        ("a script the group's configuration does not hold", "no-such-script", FAKES, ()),
        ("instances the group's scaling log never launched", "fail-terminate", FAKES, LOGGED[:1]),
        ("instances the scaling log logged ACTIVE", "record-after-fail", LOGGED, LOGGED),
        ("a script the configuration runs under CONTINUE", "nodeReady/ready-check", FAKES, ()),
    ],
)
def test_forged_reports_never_open_a_loop_of_a_group_that_did_not_loop(
    why: str, script: str, instances: tuple[str, ...], logged: tuple[str, ...]
) -> None:
    """Any node can write any report: a loop from the reports alone is judged only where the group's scaling
    log is not delivered, and takes scripts the configuration PCS gives runs under TERMINATE."""
    world = World()
    world.person_sets(REVERTED, at(1, 10))  # healthy: no failure in the scaling log
    for n, instance in enumerate(logged):
        world.feed([launched(instance, at(1, 12, n)), succeeded(instance, at(1, 14, n))])
    stage, _, name = script.rpartition("/")
    when = at(1, 20) // 1000
    fakes = [
        {**forged(instance, when + n, name), "stage": stage or "nodeBootstrapped"}
        for n, instance in enumerate(instances)
    ]
    ship(world, reports_handler(world), fakes)
    assert [t for t, _ in world.bus.events()] == [], why
    assert world.state().episode is None, why


def test_a_forged_run_beside_a_real_failure_names_no_other_script() -> None:
    """A TERMINATE failure ends its boot: a second failed TERMINATE run of another script for the same
    instance contradicts it, so that instance names no suspect; the loop's other evidence still does. When
    every instance that named the suspect is contradicted, it is withdrawn and told again with none (its
    remediation then switches every TERMINATE script): whichever report came first, one of the two was
    written by another node, and none is named rather than the wrong one."""
    world = World()
    world.feed(ARTICLE)
    handler = reports_handler(world)
    ship(world, handler, REPORTED)
    failed = [r for r in REPORTED if r["outcome"] == "failed"]
    ship(world, handler, [forged(failed[0]["instance_id"], failed[0]["ended_at"] + 1, "record-after-fail")])
    episode = world.state().episode
    assert episode is not None
    assert episode.suspect is not None
    assert (episode.suspect.script, episode.suspect.instances) == (
        "fail-terminate",
        [failed[1]["instance_id"]],
    )
    told = len(world.published())
    ship(
        world, handler, [forged(r["instance_id"], r["ended_at"] + 1, "record-after-fail") for r in failed[1:]]
    )
    episode = world.state().episode
    assert episode is not None
    assert episode.suspect is None  # not record-after-fail: nothing names another one
    assert world.published()[told:] == ["BootstrapLoopDetected"]
    (last, *_) = [d for t, d in reversed(world.bus.events()) if t == "BootstrapLoopDetected"]
    assert last["suspect"] is None
    assert last["reason"].startswith("nodeBootstrapped › fail-terminate is not the suspect")


def test_a_forged_report_of_a_stored_run_lands_beside_it_and_cannot_rewrite_it() -> None:
    """Any node can write a report of any run. One written under a run already stored (the same instance,
    boot, stage, script and start) with another onError, beside a TERMINATE failure of another script, would
    have replaced the node's own report: each instance then held one TERMINATE failure, of the forged
    script, which the loop was blamed on and switched, the real one left on TERMINATE. Stored beside the
    node's own, it contradicts it: no script is named rather than the wrong one."""
    world = World()
    world.feed([r for r in ARTICLE if r["status_code"] == "LAUNCHED"])
    handler = reports_handler(world)
    ship(world, handler, REPORTED)  # the nodes' own reports
    real = [r for r in REPORTED if r["outcome"] == "failed"]
    rewritten = [{**r, "on_error": "CONTINUE", "log_tail": "forged"} for r in real]
    blamed = [{**r, "script": "record-after-fail", "log_tail": "forged"} for r in real]
    ship(world, handler, rewritten + blamed)
    stored = GroupStore(world.table, TABLE).read_runs(CLUSTER, GROUP, marks=False).reports
    assert sorted((r.instance_id, r.script, r.on_error) for r in stored if r.log_tail != "forged") == [
        (r["instance_id"], "fail-terminate", "TERMINATE") for r in real
    ]
    world.feed([r for r in ARTICLE if r["status_code"] != "LAUNCHED"])
    detected = [d for t, d in world.bus.events() if t == "BootstrapLoopDetected"][-1]
    assert detected["suspect"] is None or detected["suspect"]["script"] == "fail-terminate"
    remediate_last_detection(world)
    [update] = [call.params for call in world.pcs.calls if call.operation == "UpdateComputeNodeGroup"]
    scripts = update["nodeLifecycleActions"]["stages"]["nodeBootstrapped"]
    on_error = {script["name"]: script.get("onError", "TERMINATE") for script in scripts}
    assert on_error["fail-terminate"] == "STOP_SEQUENCE", on_error  # the script that fails is held


def test_a_record_of_a_followed_kind_that_names_no_node_is_a_counted_skip() -> None:
    """DESIGN lets a record leave out `details` and each of its keys; a failure that names no instance
    cannot be told from another, nor counted toward a loop. It was neither skipped nor ignored: a loop of
    such records went unseen with nothing to say so."""
    world = World()
    no_id = failed("i-0unused", at(1, 5))
    del no_id["details"]["instance_id"]
    no_details = {k: v for k, v in failed("i-0unused", at(1, 6)).items() if k != "details"}
    no_group = {k: v for k, v in launched("i-0abc", at(1, 7)).items() if k != "compute_node_group_id"}
    summary = world.feed(
        [no_id, no_details, no_group, row("i-0abc", "REGISTERED", "REGISTER_SUCCESS", at(1, 8))]
    )
    assert (summary.records, summary.skipped, summary.ignored) == (4, 3, 1)
    assert dict(summary.skipped_reasons) == {
        "TERMINATED record without details.instance_id": 2,
        "LAUNCHED record without compute_node_group_id": 1,
    }


OTHER = "pcs_other0001"  # a second group of the article's cluster


def _damage(item: dict[str, Any], how: str) -> None:
    """Damage a stored state item as a hand edit or a bad restore might."""
    if how == "no-version":
        del item["version"]
    elif how == "not-zlib":
        item["state"] = {"B": b"not zlib"}
    elif how == "cut-short":
        body = zlib.decompress(item["state"]["B"])
        item["state"] = {"B": zlib.compress(body[: len(body) // 2])}
    elif how == "bad-map-entry":
        item["outcomes"] = {"M": {"i-0x": {"S": "[1,2"}}}
    elif how == "another-groups-state":
        body = json.loads(zlib.decompress(item["state"]["B"]))
        item["state"] = {"B": zlib.compress(json.dumps({**body, "group_id": GROUP}).encode())}


def _world_with_a_damaged_group(how: str) -> World:
    world = World()
    world.pcs.add_compute_node_group(CLUSTER, "other", group_id=OTHER, node_lifecycle_actions=REVERTED)
    world.feed([{**launched("i-0aaa0000000000001", at(1, 1)), "compute_node_group_id": OTHER}])
    _damage(world.table.items[(f"GROUP#{CLUSTER}#{OTHER}", "STATE")], how)
    world.handler = world.container()  # a fresh container reads it from the table
    return world


DAMAGE = ["no-version", "not-zlib", "cut-short", "bad-map-entry", "another-groups-state"]


@pytest.mark.parametrize("how", DAMAGE)
def test_a_damaged_state_item_holds_up_no_other_group_of_its_batch(how: str) -> None:
    """A state item no release wrote (edited by hand, damaged) raised out of the batch read, so every batch
    naming that group failed and was parked, and the loops of the cluster's other groups went unseen. Its
    records are skipped, counted and said; the batch goes on, and so does every next one."""
    world = _world_with_a_damaged_group(how)
    others = [
        {**failed("i-0aaa0000000000001", at(1, 6)), "compute_node_group_id": OTHER},
        {**launched("i-0aaa0000000000002", at(1, 7)), "compute_node_group_id": OTHER},
    ]
    summary = world.feed(sorted(LOOP + others, key=lambda r: r["event_timestamp"]))
    assert world.published() == ["BootstrapLoopDetected"]  # the article's group, in the same batch
    assert dict(summary.skipped_reasons) == {"state item unreadable": 2}
    assert (summary.skipped, summary.unreadable_groups) == (2, 1)
    assert world.state().episode is not None
    if how == "another-groups-state":  # its write would have gone to the other group's item
        assert world.table.items[(f"GROUP#{CLUSTER}#{OTHER}", "STATE")]["version"] == {"N": "1"}


def _other_loops(world: World) -> list[dict[str, Any]]:
    """OTHER's two failed launches, with the article's loop of GROUP, in one batch."""
    world.pcs.add_compute_node_group(CLUSTER, "other", group_id=OTHER, node_lifecycle_actions=REVERTED)
    world.feed([{**launched("i-0aaa0000000000001", at(1, 1)), "compute_node_group_id": OTHER}])
    others = [
        {**failed("i-0aaa0000000000001", at(1, 6)), "compute_node_group_id": OTHER},
        {**launched("i-0aaa0000000000002", at(1, 7)), "compute_node_group_id": OTHER},
        {**failed("i-0aaa0000000000002", at(1, 12)), "compute_node_group_id": OTHER},
    ]
    return sorted(LOOP + others, key=lambda r: r["event_timestamp"])


def test_a_stored_run_no_release_wrote_is_passed_over_and_holds_up_no_group(
    caplog: pytest.LogCaptureFixture,
) -> None:
    """A stored failed run that today's bounds refuse (an older release's `boot: 0`, a hand edit, a
    restore) raised out of the read of the group's runs: the batch failed whole, and the loop of another
    group in it went unseen. It is missing evidence: passed over and said, and both loops are seen."""
    world = World()
    batch = _other_loops(world)
    report = {
        "cluster_id": CLUSTER,
        "compute_node_group_id": OTHER,
        "instance_id": "i-0aaa0000000000001",
        "boot": 1,
        "first_boot": True,
        "stage": "nodeBootstrapped",
        "script": "x",
        "on_error": "TERMINATE",
        "exit_code": 1,
        "outcome": "failed",
        "started_at": at(1, 5) // 1000,
    }
    GroupStore(world.table, TABLE).put_reports([NodeReport.model_validate(report)])
    [key] = [k for k in world.table.items if k[1].startswith("REPORT#")]
    world.table.items[key]["report"]["S"] = json.dumps({**report, "boot": 0})
    world.handler = world.container()
    summary = world.feed(batch)
    assert world.published() == ["BootstrapLoopDetected", "BootstrapLoopDetected"]
    assert world.state(GROUP).episode is not None
    assert world.state(OTHER).episode is not None
    assert (summary.skipped, summary.unreadable_groups) == (0, 0)
    assert "passed over, it cannot be read: Invalid: boot" in caplog.text


def test_a_ledger_item_no_release_wrote_holds_up_its_group_alone() -> None:
    """A group's ledger is read for every detection (who put its configuration in place) and every
    settling (is Lifeguard's quarantine in place?): a damaged one raised out of the batch, and the loop of
    another group in it went unseen. Its group's records are skipped, counted and said, as a damaged
    state's; the others go on."""
    world = World()
    batch = _other_loops(world)
    pk = f"GROUP#{CLUSTER}#{OTHER}"
    world.table.items[(pk, "LEDGER")] = {
        "pk": {"S": pk},
        "sk": {"S": "LEDGER"},
        "doc": {"S": '{"changes": 7}'},
    }
    world.handler = world.container()
    summary = world.feed(batch)
    assert world.published() == ["BootstrapLoopDetected"]
    assert world.state(GROUP).episode is not None
    assert world.state(OTHER).episode is None
    assert (summary.unreadable_groups, dict(summary.skipped_reasons)) == (1, {"state item unreadable": 3})


@pytest.mark.parametrize("changes", [True, False], ids=["changing-it", "changing-nothing"])
@pytest.mark.parametrize("how", ["no-version", "version-moved"])
def test_a_state_item_damaged_while_a_warm_container_remembers_it_holds_up_no_other_group(
    how: str, changes: bool
) -> None:
    """A warm container reads a group from memory: its write then lost to the damaged item's version (or,
    changing nothing, the version check found it moved or gone), and the group was redone from the table,
    whose read raised out of the batch: the loop in the same batch was kept in its outbox, unpublished."""
    world = World()
    world.pcs.add_compute_node_group(CLUSTER, "other", group_id=OTHER, node_lifecycle_actions=REVERTED)
    world.feed([{**launched("i-0aaa0000000000001", at(1, 1)), "compute_node_group_id": OTHER}])
    item = world.table.items[(f"GROUP#{CLUSTER}#{OTHER}", "STATE")]
    if how == "no-version":
        _damage(item, "no-version")
    else:
        _damage(item, "not-zlib")
        item["version"] = {"N": "7"}  # a restore or a hand edit that moved it on
    instance = "i-0aaa0000000000002" if changes else "i-0aaa0000000000001"
    other = {**launched(instance, at(1, 7 if changes else 1)), "compute_node_group_id": OTHER}
    summary = world.feed(sorted([*LOOP, other], key=lambda r: r["event_timestamp"]))
    assert world.published() == ["BootstrapLoopDetected"]
    assert (summary.unreadable_groups, dict(summary.skipped_reasons)) == (1, {"state item unreadable": 1})


def test_a_damaged_state_item_holds_up_no_other_groups_reports() -> None:
    """Node reports of a group whose state item cannot be read are stored, not judged; the batch's other
    groups are: the open loop is attributed to its script."""
    world = _world_with_a_damaged_group("not-zlib")
    world.feed(LOOP)
    handler = reports_handler(world)
    of_other = {**REPORTED[0], "compute_node_group_id": OTHER, "instance_id": "i-0aaa0000000000001"}
    newest = max(r["ended_at"] for r in [of_other, *REPORTED]) + 60
    world.clock.set(datetime.fromtimestamp(newest, UTC))
    summary = handler.handle_messages((json.dumps(r), "(report)") for r in [of_other, *REPORTED])
    assert summary.to_dict()["unreadable_groups"] == 1
    episode = world.state().episode
    assert episode is not None
    assert episode.suspect is not None
    assert episode.suspect.script == "fail-terminate"
    assert any(sk.startswith("REPORT#i-0aaa") for pk, sk in world.table.items if OTHER in pk)


def test_a_batch_naming_many_groups_reads_pcs_for_twenty_and_the_rest_on_their_next_reports() -> None:
    """Reports can name any group of any cluster: a batch naming thirty (each with a loop's worth of
    TERMINATE failures) reads PCS for at most twenty of them; the others wait, and a group that loops sends
    more."""
    world = World()
    when = at(1, 20) // 1000
    many = [
        {
            **forged(f"i-0{g:08x}{n:08x}", when + n, "fail-terminate"),
            "cluster_id": f"pcs_0{g:09d}",  # sorted before the article's cluster
            "compute_node_group_id": f"pcs_{g:08d}x",
        }
        for g in range(30)
        for n in range(2)
    ]
    handler = reports_handler(world)
    ship(world, handler, many)
    assert (
        world.pcs_calls("GetComputeNodeGroup") + world.pcs_calls("ListComputeNodeGroups")
        == DETECTION_READS_MAX
    )
    # The article's group among them, known to Lifeguard (it holds a state of it), goes first although
    # thirty forged ones sort before it: read, and its loop found.
    GroupStore(world.table, TABLE).save(GroupState(cluster_id=CLUSTER, group_id=GROUP))
    ship(world, handler, [*many, *REPORTED])
    assert "BootstrapLoopDetected" in world.published()
    assert world.state().episode is not None


def test_a_loop_from_thousands_of_reports_keeps_its_newest_failures() -> None:
    world = World()
    when = at(1, 20) // 1000
    many = [forged(f"i-0{n:016x}", when + n % 600, "fail-terminate") for n in range(3000)]
    ship(world, reports_handler(world), many)
    [(_, detail)] = world.bus.events()
    episode = world.state().episode
    assert episode is not None
    assert len(episode.failures) == len(detail["failures"]) == OUTCOME_LIMIT
    assert episode.suspect is not None
    assert len(episode.suspect.instances) == OUTCOME_LIMIT


def booted_then_replaced(instance: str, minute: int, reason: str = "UNHEALTHY_NODE") -> list[dict[str, Any]]:
    """A node launched at `minute`, ACTIVE two minutes on, terminated (for `reason`) five minutes later."""
    return [
        launched(instance, at(1, minute)),
        succeeded(instance, at(1, minute + 2)),
        row(instance, "TERMINATED", reason, at(1, minute + 7)),
    ]


def test_nodes_of_the_configuration_replaced_as_unhealthy_again_and_again_are_a_replacement_loop() -> None:
    world = World()
    world.person_sets(REVERTED, at(1, 10))
    world.feed(booted_then_replaced("i-0sick000000000001", 12))
    assert world.bus.entries == []  # one unhealthy node is bad luck
    world.feed(booted_then_replaced("i-0sick000000000002", 22))
    [(detail_type, detail)] = world.bus.events()
    assert (detail_type, detail["kind"]) == ("BootstrapLoopDetected", "replacement")
    assert [f["instance_id"] for f in detail["failures"]] == ["i-0sick000000000001", "i-0sick000000000002"]
    assert "terminated as unhealthy (TERMINATED/UNHEALTHY_NODE)" in detail["reason"]
    assert "drain/replace" not in detail["reason"]  # no drain step of Lifeguard's in the configuration
    episode = world.state().episode
    assert episode is not None
    assert (episode.kind, episode.replacement_revision) == ("replacement", 1)


@pytest.mark.parametrize("order", ["success first", "termination first"])
def test_a_replacement_loop_whose_launches_come_late_is_told_at_the_late_launch_making_it(order: str) -> None:
    """As a bootstrap failure's: a LAUNCHED delivered after its node's unhealthy termination says the node
    was fresh, so the termination counts then, not a replacement later."""
    world = World()
    world.person_sets(REVERTED, at(1, 10))
    for n, minute in enumerate((12, 22), start=1):
        launch, success, termination = booted_then_replaced(f"i-0sick00000000000{n}", minute)
        world.feed([success, termination] if order == "success first" else [termination])
        assert world.bus.entries == []  # not known to be fresh yet
        world.feed([launch] if order == "success first" else [launch, success])
    [(detail_type, detail)] = world.bus.events()
    assert (detail_type, detail["kind"]) == ("BootstrapLoopDetected", "replacement")
    assert [f["instance_id"] for f in detail["failures"]] == ["i-0sick000000000001", "i-0sick000000000002"]
    world.feed([launched("i-0sick000000000002", at(1, 22))])  # the late launch delivered again
    assert len(world.bus.entries) == 1


@pytest.mark.parametrize("then", ["the batch again", "its next launch"])
def test_a_replacement_loop_pcs_refusing_the_read_held_back_is_made_by_the_groups_next_batch(
    then: str,
) -> None:
    """As a bootstrap-failure loop's: PCS refused the group's read as its nodes' unhealthy terminations
    made a loop; the next batch holding any record of the group detects it, not only the next termination."""
    world = World()
    world.person_sets(REVERTED, at(1, 10))
    world.feed(booted_then_replaced("i-0sick000000000001", 12))
    world.pcs.inject_fault("AccessDeniedException", operation="GetComputeNodeGroup")  # its read, once
    second = booted_then_replaced("i-0sick000000000002", 22)
    assert world.feed(second).unreadable_groups == 1
    assert (world.published(), world.state().detection_due) == ([], True)
    world.feed(second if then == "the batch again" else [launched("i-0next000000000001", at(1, 31))])
    [(detail_type, detail)] = world.bus.events()
    assert (detail_type, detail["kind"]) == ("BootstrapLoopDetected", "replacement")
    assert not world.state().detection_due


@pytest.fixture
def claims(monkeypatch: pytest.MonkeyPatch) -> list[bool]:
    """Every claim of a write that it changed the launches and outcomes alone, as it is made."""
    said: list[bool] = []
    say = GroupState.changed_maps_only
    monkeypatch.setattr(
        GroupState, "changed_maps_only", lambda self, only: said.append(only) or say(self, only)
    )
    return said


def test_a_batch_of_launches_and_outcomes_alone_says_so_and_an_unhealthy_termination_is_written(
    claims: list[bool],
) -> None:
    world = World()
    world.person_sets(REVERTED, at(1, 10))
    world.feed(booted_then_replaced("i-0sick000000000001", 12)[:2])  # a configuration read, and a proof
    world.feed([launched("i-0next000000000001", at(1, 13))])
    # A success of a node launched before the last read, of a configuration already proven: nothing to read.
    world.feed([launched("i-0next000000000002", at(1, 16)), succeeded("i-0next000000000001", at(1, 17))])
    # One unhealthy node (bad luck, no loop) is part of the rest of the state: written with it. The tests
    # check every claim (tests/conftest.py), so a wrong one would fail here.
    world.feed([row("i-0sick000000000001", "TERMINATED", "UNHEALTHY_NODE", at(1, 19))])
    assert claims == [False, True, True, False]
    state = world.state()
    assert state.unhealthy == {"i-0sick000000000001": at(1, 19)}
    assert set(state.launches) == {"i-0next000000000002"}
    assert state.outcomes["i-0next000000000001"].succeeded
    assert world.bus.entries == []


def test_a_read_that_finds_the_proven_configuration_as_it_was_writes_its_time_alone(
    claims: list[bool],
) -> None:
    world = World()
    world.person_sets(REVERTED, at(1, 10))
    world.feed(booted("i-0good000000000001", at(1, 12), at(1, 14), GROUP))  # read, and proven
    assert world.state().proven_good is not None
    world.pcs.calls.clear()
    # A node launched after that read may have booted another configuration: the group is read again,
    # and found as it was. Only the launches, the outcomes and the time of the read moved.
    world.feed(booted("i-0good000000000002", at(1, 20), at(1, 22), GROUP))
    assert world.pcs_calls("GetComputeNodeGroup") == 1
    assert claims == [False, True]
    [update] = [
        write["Update"]
        for request in world.table.requests["TransactWriteItems"][-1:]
        for write in request["TransactItems"]
    ]
    assert "state" not in update["ExpressionAttributeNames"].values()
    config = world.state().config
    assert config is not None
    assert config.checked_at == at(1, 22)
    # The configuration changed since: a node launched before the change proves nothing, but the read
    # finds more than the time, and the rest is written (a wrong claim would fail: tests/conftest.py).
    world.person_sets(TERMINATE, at(1, 30))
    world.feed(booted("i-0good000000000003", at(1, 25), at(1, 34), GROUP))
    assert claims[-1] is False
    state = world.state()
    assert state.config is not None
    assert (state.config.modified_at, state.config.fingerprint) == (at(1, 30), fingerprint_of(TERMINATE))
    assert state.proven_good is not None
    assert state.proven_good.fingerprint == fingerprint_of(REVERTED)


@pytest.mark.parametrize(
    "reason", ["REPLACEMENT_REQUESTED", "SCHEDULER_REQUESTED", "NODE_GROUP_DELETION", "EXTERNALLY_TERMINATED"]
)
def test_other_terminations_are_never_a_replacement_loop(reason: str) -> None:
    world = World()
    world.person_sets(REVERTED, at(1, 10))
    for n, minute in enumerate((12, 22, 32)):
        world.feed(booted_then_replaced(f"i-0gone00000000000{n}", minute, reason))
    assert world.bus.entries == []


def test_unhealthy_nodes_launched_before_the_configuration_took_effect_are_not_a_replacement_loop() -> None:
    world = World()
    world.feed([launched("i-0old0000000000001", at(1, 2)), launched("i-0old0000000000002", at(1, 3))])
    world.person_sets(REVERTED, at(1, 10))
    world.feed(
        [
            row("i-0old0000000000001", "TERMINATED", "UNHEALTHY_NODE", at(1, 12)),
            row("i-0old0000000000002", "TERMINATED", "UNHEALTHY_NODE", at(1, 14)),
        ]
    )
    assert world.bus.entries == []


def test_kept_and_drained_nodes_replaced_as_unhealthy_are_the_contained_episodes_drain_replace_loop() -> None:
    world = World()
    world.feed(ARTICLE[:6])
    drained = quarantined_config()
    drained["stages"]["nodeReady"] = [
        {
            "name": "lifeguard-drain",
            "scriptSource": {"scriptLocation": "s3://bundles/lifeguard-node.pyz"},
            "onError": "CONTINUE",  # as Lifeguard writes its drain step
        },
        *drained["stages"].get("nodeReady", []),
    ]
    world.person_sets(drained, at(1, 13))
    for n, minute in enumerate((14, 24)):
        kept = f"i-0kept00000000000{n}"
        kept_report(kept, at(1, minute + 1), world)
        world.feed(booted_then_replaced(kept, minute))
    types = world.published()
    assert types == ["BootstrapLoopDetected", "LoopContained", "BootstrapLoopDetected"]
    (_, first), _, (_, replaced) = world.bus.events()
    assert replaced["episode_id"] == first["episode_id"]
    assert (replaced["kind"], replaced["revision"]) == ("replacement", 2)
    assert replaced["reason"].endswith(
        "PCS replaces the nodes Lifeguard's drain step drains, a drain/replace loop"
    )
    assert replaced["config_fingerprint"] == fingerprint_of(drained)
    episode = world.state().episode
    assert episode is not None
    assert (episode.kind, episode.contained_at is not None) == ("loop", True)  # still the contained loop


def loop_seen_by_both_signals(world: World) -> None:
    """The article's first two failures, from the node reports and then the scaling log (which logged the
    nodes' launches before either: it is delivered, so it opens the loop, and the reports name the
    script at once)."""
    world.feed([row for row in ARTICLE[:6] if row["status_code"] == "LAUNCHED"])
    ship(world, reports_handler(world), REPORTED)
    world.feed(ARTICLE[:6])
    assert world.published() == ["BootstrapLoopDetected"]
    assert world.bus.events()[0][1]["signals"] == ["scaling_log", "node_reports"]


def quarantined_node_up_without_reports() -> World:
    """The loop seen by both signals, Lifeguard's quarantine in place, and a node launched on it logged
    BOOTSTRAP_SUCCESS before any report of its boot came."""
    world = World()
    loop_seen_by_both_signals(world)
    quarantined = quarantined_config()
    quarantine_in_ledger(world, quarantined)
    world.person_sets(quarantined, at(1, 13))
    world.feed([launched("i-0new0000000000001", at(1, 14)), succeeded("i-0new0000000000001", at(1, 17))])
    return world


@pytest.mark.parametrize(
    ("reports", "lifeguards", "ends"),
    [
        (True, True, False),  # the success may be the quarantined script failing: its reports will say
        (True, False, False),  # the owner's STOP_SEQUENCE hides a failure as well as Lifeguard's does
        (False, True, True),  # the group's nodes send no reports: the success is all there will be
    ],
)
def test_a_success_without_reports_ends_a_loop_unless_it_may_be_a_quarantined_failure_still_reporting(
    reports: bool, lifeguards: bool, ends: bool
) -> None:
    # The scaling log can arrive before the node's reports (two log groups, two deliveries).
    world = World()
    if reports:
        loop_seen_by_both_signals(world)
    else:
        world.feed(ARTICLE[:6])
    quarantined = quarantined_config()
    if lifeguards:
        quarantine_in_ledger(world, quarantined)
    world.person_sets(quarantined, at(1, 13))
    world.feed([launched("i-0new0000000000001", at(1, 14)), succeeded("i-0new0000000000001", at(1, 17))])
    if ends:
        assert world.published() == ["BootstrapLoopDetected", "LoopResolved"]
        assert world.state().episode is None
    else:
        assert world.published() == ["BootstrapLoopDetected"]
        assert world.state().episode is not None


def test_a_success_whose_node_stays_silent_past_the_grace_is_judged_without_reports() -> None:
    world = quarantined_node_up_without_reports()
    assert world.published() == ["BootstrapLoopDetected"]
    world.feed([launched("i-0other000000000", at(1, 25))])  # 8 min on: within the 10 min of the grace
    assert world.published() == ["BootstrapLoopDetected"]
    world.feed([launched("i-0other000000001", at(1, 28))])  # any later record of the group, past the grace
    assert world.published() == ["BootstrapLoopDetected", "LoopResolved"]
    (_, resolved) = world.bus.events()[-1]
    assert "(no node reports yet)" in resolved["reason"]


def test_a_later_unhealthy_termination_is_event_time_that_ends_a_silent_successs_wait() -> None:
    """The waits run on the group's newest event time: an unhealthy termination of another node is one of
    the group's events too, and a success whose node stays silent past the grace is judged without reports
    at it, as at any later record."""
    world = quarantined_node_up_without_reports()
    assert world.published() == ["BootstrapLoopDetected"]
    world.feed([row("i-0sick000000000001", "TERMINATED", "UNHEALTHY_NODE", at(2, 0))])
    assert world.published()[-1] == "LoopResolved"


@pytest.mark.parametrize(
    ("outcome", "ends_with"), [("failed", "LoopContained"), ("succeeded", "LoopResolved")]
)
def test_reports_that_come_after_a_success_under_lifeguards_quarantine_contain_or_resolve_the_loop(
    outcome: str, ends_with: str
) -> None:
    world = quarantined_node_up_without_reports()
    assert world.published() == ["BootstrapLoopDetected"]  # the success alone says nothing yet
    run = ran("i-0new0000000000001", at(1, 16), outcome=outcome, script="fail-terminate")
    late = {**run.model_dump(mode="json"), "on_error": "STOP_SEQUENCE"}
    ship(world, reports_handler(world), [late])
    assert world.published() == ["BootstrapLoopDetected", ends_with]
    (_, last) = world.bus.events()[-1]
    assert last["reason"].startswith("i-0new0000000000001")
    episode = world.state().episode
    if ends_with == "LoopResolved":
        assert episode is None
    else:
        assert episode is not None
        assert episode.kept == ["i-0new0000000000001"]


def test_a_success_delivered_late_waits_for_its_reports_in_event_time_as_the_other_waits_do() -> None:
    """The reports' grace ran on the invocation's clock, the other waits on the group's event time: a
    success delivered 11 minutes late (the function retrying through an outage) ended the loop at once
    (LoopResolved), and its node's report of the quarantined script failing, late too, then contained it."""
    world = World()
    loop_seen_by_both_signals(world)
    quarantined = quarantined_config()
    quarantine_in_ledger(world, quarantined)
    world.person_sets(quarantined, at(1, 13))
    rows = [launched("i-0new0000000000001", at(1, 14)), succeeded("i-0new0000000000001", at(1, 17))]
    world.clock.set(datetime.fromtimestamp((at(1, 17) + 11 * 60_000) / 1000, UTC))
    world.handler.handle_event(encode_subscription(LOG_GROUP, LOG_STREAM, world.messages(rows)))
    assert world.published() == ["BootstrapLoopDetected"]  # the success alone says nothing yet
    run = ran("i-0new0000000000001", at(1, 16), outcome="failed", script="fail-terminate")
    ship(world, reports_handler(world), [{**run.model_dump(mode="json"), "on_error": "STOP_SEQUENCE"}])
    assert world.published() == ["BootstrapLoopDetected", "LoopContained"]


def test_a_kept_nodes_report_stored_while_its_success_is_taken_in_still_contains_the_loop() -> None:
    """node_reports (another function) stores the kept node's report while scaling_events, which read the
    group's reports before it, takes in the node's success: each judged without the other's half, and the
    loop stayed open for good (no later record need come). Its write moves the state's version on, so the
    success is judged again with the report."""
    world = World()
    loop_seen_by_both_signals(world)
    quarantined = quarantined_config()
    quarantine_in_ledger(world, quarantined)
    world.person_sets(quarantined, at(1, 13))
    kept = "i-0new0000000000001"
    run = ran(kept, at(1, 16), outcome="failed", script="fail-terminate")
    report = {**run.model_dump(mode="json"), "on_error": "STOP_SEQUENCE"}
    racing = Interleaved(
        world.table, "transact_write_items", lambda: ship(world, reports_handler(world), [report])
    )
    world.handler = world.container(racing)
    world.feed([launched(kept, at(1, 14)), succeeded(kept, at(1, 17))])
    assert racing.ran
    assert world.published() == ["BootstrapLoopDetected", "LoopContained"]
    episode = world.state().episode
    assert episode is not None
    assert episode.kept == [kept]


def test_a_failed_report_stored_while_a_success_proves_its_configuration_takes_the_proof_back() -> None:
    """As above, under a CONTINUE script: the success was told as LoopResolved and proved the configuration
    although the node's stored report says its script failed (a revert would have put it back)."""
    world, kept, report, reports = loop_of_a_script_set_to_continue()
    racing = Interleaved(
        world.table, "transact_write_items", lambda: reports.handle_messages([(json.dumps(report), "s:1")])
    )
    world.handler = world.container(racing)
    world.feed([launched(kept, at(1, 14)), succeeded(kept, at(1, 19))])
    assert racing.ran
    world.feed([succeeded(kept, at(1, 21))])  # a minute on, as in the test of the two one after the other
    assert world.published()[-1] == "LoopContained"
    assert "LoopResolved" not in world.published()
    assert world.state().proven_good is None


def test_clean_reports_of_a_group_with_no_open_episode_write_no_state_and_publish_nothing() -> None:
    world = World()
    world.feed([launched("i-0new0000000000001", at(1, 14)), succeeded("i-0new0000000000001", at(1, 17))])
    before = world.writes()
    run = ran("i-0new0000000000001", at(1, 16))
    ship(world, reports_handler(world), [run.model_dump(mode="json")])
    assert world.bus.events() == []
    assert world.writes() == before  # the group's state is read, not written (the mark is a batch write)


# -- records in an order or a state the detection must still read right --

DAY_MS = 24 * 3600 * 1000


def test_a_group_once_tagged_off_is_watched_again_when_the_tag_is_taken_off() -> None:
    world = World(tags={"lifeguard:mode": "off"})
    world.feed(ARTICLE)  # tagged off: nothing detected (as intended)
    assert world.state().episode is None
    arn = world.api.get_compute_node_group(clusterIdentifier=CLUSTER, computeNodeGroupIdentifier=GROUP)[
        "computeNodeGroup"
    ]["arn"]
    world.api.untag_resource(resourceArn=arn, tagKeys=["lifeguard:mode"])  # the owners turn it back on
    # A day later the group loops: two failures, 6 minutes apart.
    a, b = "i-0aaaaaaaaaaaaaaa1", "i-0aaaaaaaaaaaaaaa2"
    world.feed([launched(a, at(23, 0)), failed(a, at(23, 5))])
    world.feed([launched(b, at(23, 6)), failed(b, at(23, 11))])
    assert world.published() == ["BootstrapLoopDetected"]


def test_a_replacement_episode_whose_nodes_then_stay_up_does_not_hide_a_later_bootstrap_loop() -> None:
    world = World()
    world.person_sets(REVERTED, at(1, 10))
    world.feed(booted_then_replaced("i-0sick000000000001", 12))
    world.feed(booted_then_replaced("i-0sick000000000002", 22))  # unhealthy twice: a replacement episode
    # Their replacements boot fine and stay up for good: no node is launched for a day.
    world.feed([launched("i-0good000000000001", at(1, 30)), succeeded("i-0good000000000001", at(1, 33))])
    assert world.published() == ["BootstrapLoopDetected"]
    # A day later (same configuration: its script's mutable source changed) new nodes loop.
    a, b = "i-0aaaaaaaaaaaaaaa1", "i-0aaaaaaaaaaaaaaa2"
    world.feed([launched(a, at(1, 0) + DAY_MS), failed(a, at(1, 5) + DAY_MS)])
    world.feed([launched(b, at(1, 6) + DAY_MS), failed(b, at(1, 11) + DAY_MS)])
    kinds = [d["kind"] for t, d in world.bus.events() if t == "BootstrapLoopDetected"]
    assert kinds == ["replacement", "loop"]


def test_a_replacement_episode_ends_after_a_replacement_beyond_its_evidence_once_nodes_stay_up() -> None:
    # Three unhealthy replacements: the third came after the detection of two and never became evidence,
    # and the episode waited for good for a boot after it. Two days later a loop of the same configuration
    # was told as a revision of that stale episode.
    world = World()
    world.person_sets(REVERTED, at(1, 10))
    world.feed(booted_then_replaced("i-0sick000000000001", 12))
    world.feed(booted_then_replaced("i-0sick000000000002", 22))
    world.feed(booted_then_replaced("i-0sick000000000003", 32))
    assert world.published() == ["BootstrapLoopDetected"]
    world.feed([launched("i-0good000000000001", at(1, 40)), succeeded("i-0good000000000001", at(1, 43))])
    # A whole window later the group is known to have stayed up.
    world.feed([launched("i-0good000000000002", at(3, 0)), succeeded("i-0good000000000002", at(3, 3))])
    assert world.published() == ["BootstrapLoopDetected", "LoopResolved"]
    assert world.state().episode is None
    a, b = "i-0aaaaaaaaaaaaaaa1", "i-0aaaaaaaaaaaaaaa2"
    world.feed([launched(a, at(1, 0) + 2 * DAY_MS), failed(a, at(1, 5) + 2 * DAY_MS)])
    world.feed([launched(b, at(1, 6) + 2 * DAY_MS), failed(b, at(1, 11) + 2 * DAY_MS)])
    detected = [d for t, d in world.bus.events() if t == "BootstrapLoopDetected"]
    assert [(d["kind"], d["revision"]) for d in detected] == [("replacement", 1), ("loop", 1)]
    assert detected[0]["episode_id"] != detected[1]["episode_id"]


def test_a_replacement_episode_is_not_held_open_by_long_serving_nodes_failing_their_health_checks() -> None:
    # A large group loses a node to hardware now and then: a node that served for hours and is then
    # replaced as unhealthy is no part of the loop (the detection does not count it), nor holds it open.
    world = World()
    world.person_sets(REVERTED, at(1, 10))
    world.feed([launched("i-0old0000000000001", at(1, 11)), succeeded("i-0old0000000000001", at(1, 13))])
    world.feed(booted_then_replaced("i-0sick000000000001", 12))
    world.feed(booted_then_replaced("i-0sick000000000002", 22))
    assert world.published() == ["BootstrapLoopDetected"]
    world.feed([launched("i-0good000000000001", at(1, 40)), succeeded("i-0good000000000001", at(1, 43))])
    # Hours on, the node that served all along fails its health checks.
    world.feed([row("i-0old0000000000001", "TERMINATED", "UNHEALTHY_NODE", at(4, 0))])
    world.feed([launched("i-0good000000000002", at(4, 3)), succeeded("i-0good000000000002", at(4, 6))])
    assert world.published() == ["BootstrapLoopDetected", "LoopResolved"]
    _, detail = world.bus.events()[-1]
    assert "i-0good000000000001" in detail["reason"]


def test_a_node_of_the_configuration_before_the_loop_does_not_resolve_it() -> None:
    world = World()  # the TERMINATE configuration took effect at 01:00
    old = "i-0old0000000000001"
    world.feed([launched(old, at(0, 59))])  # launched on the configuration before it
    a, b = "i-0aaaaaaaaaaaaaaa1", "i-0aaaaaaaaaaaaaaa2"
    world.feed([launched(a, at(1, 1)), launched(b, at(1, 1, 30)), failed(a, at(1, 3)), failed(b, at(1, 4))])
    assert world.published() == ["BootstrapLoopDetected"]
    world.feed([succeeded(old, at(1, 5))])  # the old configuration's node comes up
    assert world.published() == ["BootstrapLoopDetected"]  # the loop of 01:00's configuration goes on
    assert world.state().episode is not None


def test_a_launch_delivered_after_its_success_withdraws_the_proof_of_a_configuration_it_never_ran() -> None:
    world = World()
    world.person_sets(REVERTED, at(1, 2))  # a good configuration
    node = "i-0good000000000001"
    launch = launched(node, at(1, 3))  # launched on it ...
    world.person_sets(TERMINATE, at(1, 4))  # ... then someone pushes the broken one
    world.feed([succeeded(node, at(1, 6))])  # the success is delivered first,
    world.feed([launch])  # its launch in a later batch: the node booted REVERTED
    assert world.state().proven_good is None  # withdrawn: the node never booted TERMINATE


def test_a_node_whose_nodeready_script_fails_after_its_success_withdraws_its_proof_and_counts() -> None:
    """PCS logs a node ACTIVE once nodeBootstrapped is over, before nodeReady runs (the article); a nodeReady
    script failing under TERMINATE then ends it. Its success proved nothing; its failure counts."""
    world = World()
    world.person_sets(TERMINATE, at(1, 2))
    first, second = "i-0ready00000000001", "i-0ready00000000002"
    world.feed([launched(first, at(1, 3)), succeeded(first, at(1, 6))])
    proof = world.state().proven_good
    assert proof is not None  # proven by its BOOTSTRAP_SUCCESS, as any
    assert proof.instance_id == first
    world.feed([failed(first, at(1, 7))])  # nodeReady failed under TERMINATE
    assert world.state().proven_good is None
    summary = world.feed(
        [launched(second, at(1, 10)), succeeded(second, at(1, 13)), failed(second, at(1, 14))]
    )
    assert [e.detail_type for e in summary.events] == ["BootstrapLoopDetected"]
    _, detail = world.bus.events()[-1]
    assert [f["instance_id"] for f in detail["failures"]] == [first, second]


READY_NODES = [f"i-0ready0000000000{k}" for k in range(6)]


def _ready_loop(ready_on_error: str | None = "TERMINATE", *, second_check: bool = False) -> World:
    """A group whose nodes send no reports, its ready-check under TERMINATE (None: its onError left out,
    PCS's default; `second_check`: and a second such check after it): two nodes fail (the loop), the
    third goes ACTIVE (nothing says otherwise: the loop ends) and then fails after its ACTIVE."""
    ready = copy.deepcopy(TERMINATE)
    ready["stages"]["nodeReady"][0]["onError"] = ready_on_error
    if ready_on_error is None:
        del ready["stages"]["nodeReady"][0]["onError"]
    if second_check:
        ready["stages"]["nodeReady"].append({**ready["stages"]["nodeReady"][0], "name": "ready-check-2"})
    world = World()
    world.person_sets(ready, at(1, 2))
    nodes = READY_NODES
    world.feed([launched(nodes[0], at(1, 3)), failed(nodes[0], at(1, 6))])
    world.feed([launched(nodes[1], at(1, 9)), failed(nodes[1], at(1, 12))])
    world.feed([launched(nodes[2], at(1, 15)), succeeded(nodes[2], at(1, 18))])
    assert world.published() == ["BootstrapLoopDetected", "LoopResolved"]  # nothing said otherwise, yet
    world.feed([failed(nodes[2], at(1, 19))])
    return world


def test_a_node_ready_loop_whose_nodes_send_no_reports_is_one_episode_told_again_once() -> None:
    """The node that ended the loop fails after its ACTIVE (its nodeReady script, under TERMINATE): the
    episode is open again, told once more, and on that configuration a success ends it only once its node
    stayed up for the reports' grace."""
    world = _ready_loop()
    nodes = READY_NODES
    assert world.published()[-1] == "BootstrapLoopDetected"
    _, detail = world.bus.events()[-1]
    assert detail["revision"] == 2
    assert "the LoopResolved of" in detail["reason"]
    assert nodes[2] in [f["instance_id"] for f in detail["failures"]]
    state = world.state()
    assert state.episode is not None
    assert state.last_episode is None
    # The loop goes on: node after node ACTIVE, then failed. Nothing more is told.
    for k, minute in ((3, 22), (4, 30)):
        world.feed([launched(nodes[k], at(1, minute)), succeeded(nodes[k], at(1, minute + 3))])
        world.feed([failed(nodes[k], at(1, minute + 4))])
    assert world.published() == ["BootstrapLoopDetected", "LoopResolved", "BootstrapLoopDetected"]
    # A node that stays up: its success ends the loop once the grace has passed (the next batch after it).
    world.feed([launched(nodes[5], at(1, 40)), succeeded(nodes[5], at(1, 43))])
    assert world.published()[-1] == "BootstrapLoopDetected"
    world.feed([launched("i-0ready00000000099", at(1, 54))])
    assert world.published()[-1] == "LoopResolved"
    _, detail = world.bus.events()[-1]
    assert nodes[5] in detail["reason"]


@pytest.mark.parametrize("in_order", [True, False])
def test_a_node_ready_loop_is_one_episode_whether_an_active_comes_before_or_after_its_failure(
    in_order: bool,
) -> None:
    # The loop's second node went ACTIVE, then failed (nodeReady, under TERMINATE); its ACTIVE delivered
    # after its failure (in a later batch), nothing noted it failed after ACTIVE, and the next node's
    # ACTIVE ended the loop (LoopResolved, then the loop told again) where PCS's order left one open episode.
    ready = copy.deepcopy(TERMINATE)
    ready["stages"]["nodeReady"][0]["onError"] = "TERMINATE"
    world = World()
    world.person_sets(ready, at(1, 2))
    nodes = READY_NODES
    world.feed([launched(nodes[0], at(1, 3)), succeeded(nodes[0], at(1, 5)), failed(nodes[0], at(1, 6))])
    world.feed([launched(nodes[1], at(1, 9))])
    second = [[succeeded(nodes[1], at(1, 11))], [failed(nodes[1], at(1, 12))]]
    for batch in second if in_order else second[::-1]:  # a batch's records are taken in time order
        world.feed(batch)
    assert world.published() == ["BootstrapLoopDetected"]
    world.feed([launched(nodes[2], at(1, 15)), succeeded(nodes[2], at(1, 18))])
    assert world.published() == ["BootstrapLoopDetected"]  # seen to stay up first
    world.feed([failed(nodes[2], at(1, 19))])
    assert world.published() == ["BootstrapLoopDetected"]
    assert world.state().episode is not None


def test_a_success_waiting_to_be_seen_up_is_judged_before_a_later_loop_is_folded_in() -> None:
    """A node that stayed up ends the loop, though nothing came until the next day's failures (a quiet
    group): those are a new loop, told as one, not the old one going on."""
    world = _ready_loop()
    world.feed([launched(READY_NODES[5], at(1, 40)), succeeded(READY_NODES[5], at(1, 43))])
    day = 24 * 3600 * 1000
    later = ["i-0nextday00000001", "i-0nextday00000002"]
    world.feed([launched(later[0], at(1, 3) + day), failed(later[0], at(1, 6) + day)])
    world.feed([launched(later[1], at(1, 9) + day), failed(later[1], at(1, 12) + day)])
    assert world.published()[-2:] == ["LoopResolved", "BootstrapLoopDetected"]
    _, detail = world.bus.events()[-1]
    assert [f["instance_id"] for f in detail["failures"]] == later
    assert detail["revision"] == 1


def test_a_node_launched_before_a_fix_fails_after_its_active_without_holding_the_fix_back() -> None:
    """After the loop was told again, a node launched on the looping configuration comes up after a fix
    was pushed, then fails after its ACTIVE: it waits (it booted the loop's configuration), and fails;
    the fix's own node, which stays up, ends the loop when its wait is over."""
    world = _ready_loop()
    fixed = copy.deepcopy(TERMINATE)  # its ready-check back under CONTINUE
    old, new = "i-0oldconfig000001", "i-0newconfig000001"
    world.feed([launched(old, at(1, 21))])
    world.person_sets(fixed, at(1, 22))
    world.feed([succeeded(old, at(1, 24))])
    world.feed([failed(old, at(1, 25))])
    world.feed([launched(new, at(1, 26)), succeeded(new, at(1, 29))])
    assert world.published() == [
        "BootstrapLoopDetected",
        "LoopResolved",
        "BootstrapLoopDetected",
        "LoopResolved",
    ]
    _, detail = world.bus.events()[-1]
    assert new in detail["reason"]


def test_a_waiting_node_whose_own_failure_comes_after_the_grace_neither_ends_nor_reopens_the_loop() -> None:
    """A slow nodeReady check: the node's failure comes 11 minutes after its ACTIVE. It did not stay up:
    nothing is told (neither a LoopResolved at its failure's time nor the episode opened again)."""
    world = _ready_loop()
    told = world.published()
    slow = "i-0slowready000001"
    world.feed([launched(slow, at(1, 22)), succeeded(slow, at(1, 25))])
    world.feed([failed(slow, at(1, 36))])
    assert world.published() == told
    state = world.state()
    assert state.episode is not None  # still open
    assert state.last_episode is None


def test_nodes_failing_after_their_active_on_a_configuration_with_no_such_script_keep_one_episode() -> None:
    """The ready-check under CONTINUE, yet nodes fail after their ACTIVE (what PCS logs wins over what the
    configuration says): no script a report could show passed, so a node of that configuration waits the
    whole grace, and the loop stays one episode."""
    world = _ready_loop("CONTINUE")
    told = world.published()
    assert told[-1] == "BootstrapLoopDetected"  # opened again
    for k, minute in ((3, 22), (4, 30)):
        world.feed([launched(READY_NODES[k], at(1, minute)), succeeded(READY_NODES[k], at(1, minute + 3))])
        world.feed([failed(READY_NODES[k], at(1, minute + 4))])
    assert world.published() == told


def _run(instance: str, stage: str, script: str, outcome: str, *, on_error: str, at_s: int) -> dict[str, Any]:
    """A node report of one script run, shaped as the recorded ones."""
    return {
        **REPORTED[0],
        "instance_id": instance,
        "stage": stage,
        "script": script,
        "outcome": outcome,
        "on_error": on_error,
        "exit_code": 1 if outcome == "failed" else 0,
        "started_at": at_s,
        "ended_at": at_s,
    }


@pytest.mark.parametrize("ready_on_error", ["TERMINATE", None], ids=["written out", "left out"])
def test_a_node_whose_reports_show_its_ready_check_ran_ends_a_node_ready_loop_at_once(
    ready_on_error: str | None,
) -> None:
    """Its reports show the nodeReady check that failed the loop's nodes after their ACTIVE ran and passed:
    nothing is left to fail it, so its success ends the loop without waiting the reports' grace, whether
    the check's onError is written out or left to PCS's default."""
    world = _ready_loop(ready_on_error)
    assert world.published()[-1] == "BootstrapLoopDetected"  # opened again
    node = "i-0readyran0000001"
    world.feed([launched(node, at(1, 22))])
    ship(
        world,
        reports_handler(world),
        [
            _run(node, stage, script, "succeeded", on_error=on_error, at_s=at(1, minute) // 1000)
            for stage, script, on_error, minute in (
                ("nodeBootstrapped", "fail-terminate", "TERMINATE", 23),
                ("nodeBootstrapped", "record-after-fail", "CONTINUE", 23),
                ("nodeReady", "ready-check", "TERMINATE", 26),
            )
        ],
    )
    world.feed([succeeded(node, at(1, 25))])
    assert world.published()[-1] == "LoopResolved"


@pytest.mark.parametrize("ran_both", [True, False], ids=["both checks ran", "one check ran"])
def test_a_node_ready_loop_is_ended_at_once_only_by_a_node_whose_reports_show_every_check_ran(
    ran_both: bool,
) -> None:
    """Two nodeReady checks under TERMINATE: a node whose reports show only the first ran may still fail
    the second after its ACTIVE, so its success waits the reports' grace."""
    world = _ready_loop(second_check=True)
    assert world.published()[-1] == "BootstrapLoopDetected"  # opened again
    node = "i-0readyran0000002"
    world.feed([launched(node, at(1, 22))])
    checks = ["ready-check", "ready-check-2"] if ran_both else ["ready-check"]
    runs = [
        ("nodeBootstrapped", "fail-terminate", "TERMINATE"),
        ("nodeBootstrapped", "record-after-fail", "CONTINUE"),
        *(("nodeReady", check, "TERMINATE") for check in checks),
    ]
    ship(
        world,
        reports_handler(world),
        [
            _run(node, stage, script, "succeeded", on_error=on_error, at_s=at(1, 24) // 1000)
            for stage, script, on_error in runs
        ],
    )
    world.feed([succeeded(node, at(1, 25))])
    assert world.published()[-1] == ("LoopResolved" if ran_both else "BootstrapLoopDetected")


def ready_check_under_terminate() -> tuple[World, NodeReportsHandler, dict[str, Any]]:
    """A group whose second nodeBootstrapped script runs under CONTINUE and whose ready-check (nodeReady)
    under TERMINATE, set at 01:02; the world, its node_reports handler and the configuration."""
    config = copy.deepcopy(TERMINATE)
    config["stages"]["nodeBootstrapped"][1]["onError"] = "CONTINUE"
    config["stages"]["nodeReady"][0]["onError"] = "TERMINATE"
    world = World()
    handler = reports_handler(world)
    world.person_sets(config, at(1, 2))
    return world, handler, config


def kept_where_nodes_die_after_active() -> tuple[World, NodeReportsHandler, dict[str, Any], list[str]]:
    """A loop whose nodes fail after their ACTIVE (a nodeReady script under TERMINATE), told again once its
    resolution proved wrong; then i-0kept00000000009 ACTIVE with a nodeBootstrapped failure under CONTINUE,
    not taken as kept yet. The world, the node_reports handler, the configuration and what was told."""
    world, handler, config = ready_check_under_terminate()
    nodes = READY_NODES
    world.feed([launched(nodes[0], at(1, 3)), failed(nodes[0], at(1, 6))])
    world.feed([launched(nodes[1], at(1, 9)), failed(nodes[1], at(1, 12))])
    world.feed([launched(nodes[2], at(1, 15)), succeeded(nodes[2], at(1, 18))])
    world.feed([failed(nodes[2], at(1, 19))])  # after its ACTIVE: the loop's nodes die in nodeReady
    told = world.published()
    assert told == ["BootstrapLoopDetected", "LoopResolved", "BootstrapLoopDetected"]
    kept = "i-0kept00000000009"
    failing = ran(kept, at(1, 24), outcome="failed", stage="nodeBootstrapped", on_error="CONTINUE")
    GroupStore(world.table, TABLE).put_reports([failing])
    world.feed([launched(kept, at(1, 22)), succeeded(kept, at(1, 25))])
    assert world.published() == told  # not kept yet: it may die in nodeReady as the others did
    return world, handler, config, told


@pytest.mark.parametrize("then", ["stays up", "fails in nodeReady", "reports its ready check passed"])
def test_a_node_kept_in_a_loop_whose_nodes_fail_after_active_is_contained_once_seen_to_stay_up(
    then: str,
) -> None:
    """The loop's nodes fail after their ACTIVE (a nodeReady script under TERMINATE). A node kept with a
    nodeBootstrapped failure went ACTIVE and was told contained at once ("the loop stopped"), then died in
    nodeReady as the others: with the daily cap holding the next change back, the last word for hours. It
    is kept once it is seen to stay up (the reports' grace, as a success ends such a loop), or once its
    reports show its ready check passed, with no other record of the group after it."""
    world, handler, config, told = kept_where_nodes_die_after_active()
    kept, nodes = "i-0kept00000000009", READY_NODES
    if then == "reports its ready check passed":
        passed = _run(
            kept,
            "nodeReady",
            ready_check_of(config),
            "succeeded",
            on_error="TERMINATE",
            at_s=at(1, 26) // 1000,
        )
        ship(world, handler, [passed])
        assert world.published()[len(told) :] == ["LoopContained"]
        return
    if then == "fails in nodeReady":
        world.feed([failed(kept, at(1, 26))])
    world.feed([launched(nodes[3], at(1, 36))])  # the reports' grace is over
    assert world.published()[len(told) :] == (["LoopContained"] if then == "stays up" else [])


def test_a_forged_pass_of_a_ready_check_its_node_reported_failing_ends_no_wait() -> None:
    """A kept node's own report says its ready check failed (under TERMINATE: PCS is ending it); a mark of
    the same check passing, which any node can write, ended its wait: told contained before PCS's end."""
    world, handler, config, told = kept_where_nodes_die_after_active()
    kept = "i-0kept00000000009"
    check = ready_check_of(config)
    real = _run(kept, "nodeReady", check, "failed", on_error="TERMINATE", at_s=at(1, 26) // 1000)
    forged = _run(kept, "nodeReady", check, "succeeded", on_error="TERMINATE", at_s=at(1, 26) // 1000 + 1)
    ship(world, handler, [real, forged])
    world.feed([failed(kept, at(1, 27))])  # PCS ends it in nodeReady
    assert world.published() == told


def ready_check_of(config: dict[str, Any]) -> str:
    """The name of the configuration's first nodeReady script."""
    return str(config["stages"]["nodeReady"][0]["name"])


def test_a_contained_loop_ended_by_a_node_that_then_fails_after_its_active_is_told_again_once() -> None:
    """Contained (a kept node's CONTINUE failure of a nodeBootstrapped script), then ended by a node with no
    failed run, which fails after its ACTIVE (its ready-check, under TERMINATE): one BootstrapLoopDetected,
    the episode opened again, not a second for the contained loop going on."""
    world, handler, _ = ready_check_under_terminate()
    a, b, kept, f, n = (f"i-0contained00000{k}" for k in range(5))
    world.feed([launched(a, at(1, 3)), failed(a, at(1, 6))])
    world.feed([launched(b, at(1, 9)), failed(b, at(1, 12))])
    world.feed([launched(kept, at(1, 13))])
    ship(
        world,
        handler,
        [
            _run(
                kept,
                "nodeBootstrapped",
                "record-after-fail",
                "failed",
                on_error="CONTINUE",
                at_s=at(1, 15) // 1000,
            ),
            # its ready check passed (shipped with it here): it is kept (`kept_awaits_ready_checks`)
            _run(kept, "nodeReady", "ready-check", "succeeded", on_error="TERMINATE", at_s=at(1, 15) // 1000),
        ],
    )
    world.feed([succeeded(kept, at(1, 16))])
    assert world.published() == ["BootstrapLoopDetected", "LoopContained"]
    world.feed([launched(f, at(1, 17)), failed(f, at(1, 20))])
    world.feed([launched(n, at(1, 24))])
    clean = [
        _run(n, "nodeBootstrapped", name, "succeeded", on_error=on_error, at_s=at(1, 26) // 1000)
        for name, on_error in (("fail-terminate", "TERMINATE"), ("record-after-fail", "CONTINUE"))
    ]
    ship(world, handler, clean)
    world.feed([succeeded(n, at(1, 30))])
    before = len(world.published())
    world.feed([failed(n, at(1, 31))])
    assert world.published()[before:] == ["BootstrapLoopDetected"]


def test_a_batch_retried_after_its_publish_failed_publishes_the_detections() -> None:
    world = World()
    other = "pcs_abcdef02"
    world.pcs.add_compute_node_group(CLUSTER, "other", group_id=other)
    loop = LOOP
    rows = loop + [{**r, "compute_node_group_id": other} for r in loop]
    event = encode_subscription(LOG_GROUP, LOG_STREAM, world.messages(rows))
    newest = max(r["event_timestamp"] for r in rows)
    world.clock.set(datetime.fromtimestamp(newest / 1000, UTC))
    world.bus.refuse_calls = 3  # EventBridge fails the first group's put, three tries
    with pytest.raises(AwsCallError):
        world.handler.handle_event(event)
    # Lambda retries the same batch a minute later (asynchronous invocation's first retry).
    world.clock.set(datetime.fromtimestamp(newest / 1000 + 60, UTC))
    world.handler.handle_event(event)
    detected = sorted(
        d["compute_node_group_id"] for t, d in world.bus.events() if t == "BootstrapLoopDetected"
    )
    assert detected == [GROUP, other]


def test_two_long_running_nodes_replaced_as_unhealthy_are_not_a_replacement_loop() -> None:
    world = World()
    world.person_sets(REVERTED, at(1, 10))
    n1, n2 = "i-0node000000000001", "i-0node000000000002"
    world.feed(
        [launched(n1, at(1, 12)), launched(n2, at(1, 12)), succeeded(n1, at(1, 15)), succeeded(n2, at(1, 15))]
    )
    # Two days later EC2 health checks fail on both (a hardware event): PCS replaces them, once each.
    world.feed(
        [
            row(n1, "PENDING_REPLACEMENT", "EC2_HEALTH_CHECK_FAILED", at(10, 0) + 2 * DAY_MS),
            row(n1, "TERMINATED", "UNHEALTHY_NODE", at(10, 2) + 2 * DAY_MS),
        ]
    )
    world.feed(
        [
            row(n2, "PENDING_REPLACEMENT", "EC2_HEALTH_CHECK_FAILED", at(10, 20) + 2 * DAY_MS),
            row(n2, "TERMINATED", "UNHEALTHY_NODE", at(10, 22) + 2 * DAY_MS),
        ]
    )
    assert world.published() == []


# -- node reports and the scaling log on one group state --


def clean_run(instance: str, when: int) -> dict[str, Any]:
    return ran(instance, when, script="record-after-fail").model_dump(mode="json")


def stop_sequence_failure(instance: str, when: int) -> dict[str, Any]:
    run = ran(instance, when, outcome="failed", script="fail-terminate")
    return {**run.model_dump(mode="json"), "on_error": "STOP_SEQUENCE"}


def test_runs_that_did_not_fail_never_push_the_failed_ones_out_of_the_evidence() -> None:
    world = World()
    marks = [ran(f"i-0zz{n:014d}", at(1, 5), script="record-after-fail") for n in range(5_000)]
    GroupStore(world.table, TABLE).put_reports(marks)  # sort after i-0kept…: order is RAN# before REPORT#
    quarantined_node_boots(world)
    assert world.published() == ["BootstrapLoopDetected", "LoopContained"]


def test_a_suspect_the_reports_named_makes_a_later_success_wait_for_its_reports() -> None:
    world = World()
    world.feed(ARTICLE[:6])
    ship(world, reports_handler(world), REPORTED)  # the reports name fail-terminate: revision 2
    quarantine_in_ledger(world, quarantined_config())
    world.person_sets(quarantined_config(), at(1, 13))
    world.feed([launched("i-0new0000000000001", at(1, 14)), succeeded("i-0new0000000000001", at(1, 17))])
    assert world.published() == ["BootstrapLoopDetected", "BootstrapLoopDetected"]


def test_late_reports_undo_a_wrong_resolution_of_a_contained_loop_under_a_new_revision() -> None:
    world = World()
    quarantined_node_boots(world)  # contained by i-0kept…
    late = "i-0late00000000000"
    world.feed([launched(late, at(1, 30)), succeeded(late, at(1, 35))])
    world.feed([launched("i-0other000000001", at(1, 50))])  # past the grace, if any
    assert world.published()[-1] == "LoopResolved"
    ship(world, reports_handler(world), [stop_sequence_failure(late, at(1, 33))])
    assert world.state().episode is not None
    assert world.published()[-1] == "LoopContained"
    first, again = [(d["revision"], d["reason"]) for t, d in world.bus.events() if t == "LoopContained"]
    assert again[0] == first[0] + 1  # its own revision: notify sends it, and the resolution after it
    assert "the LoopResolved before it was wrong" in again[1]


def test_reports_past_what_the_launch_boot_can_report_reopen_no_resolved_loop() -> None:
    """The same report as above, written three days after the success (any node can write it, under any
    instance): it reopened the loop long over, and a new loop days later went on that episode (told a cycle
    late, escalated past the cooldown). Reports read more than REPORTS_OVERTURN_MS after a success overturn
    nothing; within it, they do (above)."""
    world = World()
    quarantined_node_boots(world)
    late = "i-0late00000000000"
    world.feed([launched(late, at(1, 30)), succeeded(late, at(1, 35))])
    world.feed([launched("i-0other000000001", at(1, 50))])
    assert world.published()[-1] == "LoopResolved"
    resolved = world.state().last_episode
    assert resolved is not None
    world.clock.set(datetime.fromtimestamp((at(1, 35) + REPORTS_OVERTURN_MS + 60_000) / 1000, UTC))
    ship(world, reports_handler(world), [stop_sequence_failure(late, at(1, 33))])
    assert world.state().episode is None
    assert world.published()[-1] == "LoopResolved"
    last = world.state().last_episode
    assert last is not None
    assert (last.resolved_by, last.revision) == (late, resolved.revision)


@pytest.mark.parametrize(
    ("after_ms", "revoked"),
    [(3_600_000, True), (20 * 3_600_000, True), (REPORTS_OVERTURN_MS + 60_000, False)],
)
def test_a_proof_is_revoked_by_its_nodes_reports_only_while_they_can_come(
    after_ms: int, revoked: bool
) -> None:
    """Within REPORTS_OVERTURN_MS: a run may start up to 6 h after the success and run for a day (a script
    timeout `lifeguard-node boot` takes) before its failure is shipped, and a delivery is retried for 6 h."""
    world = World()
    world.person_sets(REVERTED, at(1, 10))
    node = "i-0new0000000000001"
    world.feed([launched(node, at(1, 13)), succeeded(node, at(1, 18))])
    proof = world.state().proven_good
    assert proof is not None
    assert proof.instance_id == node
    world.clock.set(datetime.fromtimestamp((at(1, 18) + after_ms) / 1000, UTC))
    report = ran(node, at(1, 16), outcome="failed", stage="nodeBootstrapped", on_error="TERMINATE")
    reports_handler(world).handle_messages([(report.to_json(), "(report)")])
    assert (world.state().proven_good is None) is revoked


def test_clean_reports_resolve_a_contained_loop_whose_success_waited_for_them() -> None:
    world = World()
    loop_seen_by_both_signals(world)
    quarantine_in_ledger(world, quarantined_config())
    world.person_sets(quarantined_config(), at(1, 13))
    kept_report("i-0kept00000000000", at(1, 17), world)
    world.feed([launched("i-0kept00000000000", at(1, 14)), succeeded("i-0kept00000000000", at(1, 19))])
    world.feed([launched("i-0clean0000000000", at(1, 30)), succeeded("i-0clean0000000000", at(1, 35))])
    assert world.published() == ["BootstrapLoopDetected", "LoopContained"]  # the success waits
    ship(world, reports_handler(world), [clean_run("i-0clean0000000000", at(1, 33))])
    assert world.published()[-1] == "LoopResolved"


def test_a_kept_nodes_later_continue_failure_is_not_what_still_fails() -> None:
    world = World()
    world.feed(ARTICLE[:6])
    world.person_sets(quarantined_config(), at(1, 13))
    kept = "i-0kept00000000000"
    kept_report(kept, at(1, 17), world)  # fail-terminate under STOP_SEQUENCE, nodeBootstrapped
    ready = ran(
        kept, at(1, 18), outcome="failed", script="ready-check", stage="nodeReady", on_error="CONTINUE"
    )
    GroupStore(world.table, TABLE).put_reports([ready])
    world.feed([launched(kept, at(1, 14)), succeeded(kept, at(1, 19))])
    (detail,) = [d for t, d in world.bus.events() if t == "LoopContained"]
    assert detail["suspect"]["script"] == "fail-terminate"


def test_a_warm_node_reports_container_sees_an_episode_scaling_events_opened_since() -> None:
    world = World()
    warm = reports_handler(world)  # one warm node_reports container throughout
    ship(world, warm, REPORTED)
    world.feed(ARTICLE[:6])
    quarantine_in_ledger(world, quarantined_config())
    world.person_sets(quarantined_config(), at(1, 13))
    world.feed([launched("i-0new0000000000001", at(1, 14)), succeeded("i-0new0000000000001", at(1, 17))])
    ship(world, warm, [clean_run("i-0new0000000000001", at(1, 16))])
    assert world.published()[-1] == "LoopResolved"  # `warm` wrote it: it remembers "no episode"
    world.person_sets(json.loads(json.dumps(TERMINATE)), at(1, 30))  # a second loop
    bad = ["i-0bad000000000001", "i-0bad000000000002"]
    GroupStore(world.table, TABLE).put_reports(
        [ran(i, at(1, 33 + 6 * n), outcome="failed", script="fail-terminate") for n, i in enumerate(bad)]
    )
    world.feed([launched(bad[0], at(1, 31)), failed(bad[0], at(1, 34))])
    world.feed([launched(bad[1], at(1, 37)), failed(bad[1], at(1, 40))])
    world.person_sets(quarantined_config(), at(1, 45))
    world.feed([launched("i-0new0000000000002", at(1, 46)), succeeded("i-0new0000000000002", at(1, 50))])
    assert world.published()[-1] == "BootstrapLoopDetected"  # the success waits for its reports
    ship(world, warm, [clean_run("i-0new0000000000002", at(1, 48))])
    assert world.published()[-1] == "LoopResolved"


class LaggingDynamoDB(FakeDynamoDB):
    """DynamoDB's default read: a Query without ConsistentRead may not see a write just made."""

    fresh: set[tuple[str, str]]

    def batch_write_item(self, **request: Any) -> dict[str, Any]:
        for write in next(iter(request["RequestItems"].values())):
            self.fresh.add(self._key(write["PutRequest"]["Item"]))
        return super().batch_write_item(**request)

    def query(self, **request: Any) -> dict[str, Any]:
        answer = super().query(**request)
        if request.get("ConsistentRead"):
            return answer
        return {**answer, "Items": [i for i in answer["Items"] if self._key(i) not in self.fresh]}


def test_a_report_batch_decides_on_the_reports_it_has_just_written() -> None:
    world = quarantined_node_up_without_reports()
    world.table.__class__ = LaggingDynamoDB
    world.table.fresh = set()
    ship(world, reports_handler(world), [stop_sequence_failure("i-0new0000000000001", at(1, 16))])
    assert world.published() == ["BootstrapLoopDetected", "LoopContained"]


def test_a_node_the_owners_own_stop_sequence_kept_offers_no_undo_of_lifeguards() -> None:
    world = World()
    quarantined_node_boots(world)  # the owners set STOP_SEQUENCE themselves: Lifeguard changed nothing
    (detail,) = [d for t, d in world.bus.events() if t == "LoopContained"]
    assert detail["undo"] is None
    assert "undo Lifeguard's change" not in detail["reason"]
    assert detail["reason"].endswith("Fix the script and push a configuration.")
    assert "undo Lifeguard's change" not in summarize("LoopContained", detail).headline


def test_a_warm_container_does_not_drop_records_on_a_remembered_state_another_container_moved_on() -> None:
    world = World(tags={"lifeguard:mode": "off"})
    warm = world.handler  # container A: remembers the group as tagged off
    world.feed(ARTICLE)
    group = world.api.get_compute_node_group(clusterIdentifier=CLUSTER, computeNodeGroupIdentifier=GROUP)
    world.api.untag_resource(resourceArn=group["computeNodeGroup"]["arn"], tagKeys=["lifeguard:mode"])
    # Later the group loops; container B (cold) reads the tags again and detects it.
    world.handler = world.container()
    one, two, good = "i-0aaaaaaaaaaaaaaa1", "i-0aaaaaaaaaaaaaaa2", "i-0good000000000001"
    world.feed([launched(one, at(23, 0)), failed(one, at(23, 5))])
    world.feed([launched(two, at(23, 6)), failed(two, at(23, 11))])
    assert world.published() == ["BootstrapLoopDetected"]
    # The next batch, a node that boots fine, goes to warm container A (a cold one passes this test).
    world.handler = warm
    world.feed([launched(good, at(23, 12)), succeeded(good, at(23, 16))])
    assert good in world.state().outcomes
    assert world.published() == ["BootstrapLoopDetected", "LoopResolved"]


# -- what forged reports that opened an episode decide once the scaling log bears it out: nothing


def remediator(world: World) -> Remediator:
    """The remediate function as its composition root builds it, on the world's table, bus and PCS."""
    publisher = EventPublisher(world.bus, BUS, sleep=lambda _: None)
    store = GroupStore(world.table, TABLE)
    wiring = Wiring(
        store,
        PcsGateway(world.api),
        GroupUpdater(store, publisher, clock=world.now),
        DetectionSettings(mode="quarantine", threshold=2, window_minutes=60),
    )
    return build_remediate(
        wiring,
        settings=RemediationSettings(default_mode="quarantine"),
        pcs=PcsGateway(world.api),
        clock=world.now,
        sleep=lambda _: None,
    )


def remediate_last_detection(world: World) -> dict[str, Any]:
    """Hand the newest BootstrapLoopDetected to the remediator; the detail of what it published."""
    detail = [d for t, d in world.bus.events() if t == "BootstrapLoopDetected"][-1]
    [event] = remediator(world).handle_event({"detail-type": "BootstrapLoopDetected", "detail": detail})
    return dict(event.detail)


def _proved_then_broken() -> World:
    """A group in mode revert whose configuration i-0p00000000000001 proved at 01:09, then changed at 01:20
    to one with a nodeReady mount check under TERMINATE (PCS logs a node ACTIVE before it runs)."""
    world = World(actions=REVERTED, tags={"lifeguard:mode": "revert"})
    world.person_sets(REVERTED, at(1, 5))
    world.feed([launched("i-0p00000000000001", at(1, 6)), succeeded("i-0p00000000000001", at(1, 9))])
    broken = copy.deepcopy(REVERTED)
    broken["stages"]["nodeReady"].append(
        {
            "name": "mount-check",
            "onError": "TERMINATE",
            "scriptSource": {"scriptLocation": "s3://lca-scripts-example/scripts/mount-check.sh"},
        }
    )
    world.person_sets(broken, at(1, 20))
    return world


def test_a_proof_taken_back_leaves_the_configuration_proven_before_it_for_the_revert() -> None:
    """PCS logs a node ACTIVE before its nodeReady scripts run: the first node of a broken change proved it,
    replacing the proof of the configuration before, and when that node then failed in nodeReady the proof
    was taken back and none was left. The revert had nothing to go back to, and quarantined instead."""
    world = _proved_then_broken()
    good = world.state().proven_good  # proved by i-0p… before the change
    assert good is not None
    for n, start in enumerate((at(1, 21), at(1, 27), at(1, 33))):
        node = f"i-0a{n:015d}"
        for record in (
            launched(node, start),
            succeeded(node, start + 180_000),
            failed(node, start + 200_000),
        ):
            world.feed([record])
        if n == 0:  # its ACTIVE proved the broken change, its failure took that back: the one before stands
            proof = world.state().proven_good
            assert proof is not None
            assert (proof.fingerprint, proof.instance_id) == (good.fingerprint, "i-0p00000000000001")
    assert world.published()[0] == "BootstrapLoopDetected"
    detail = remediate_last_detection(world)
    assert detail["action"] == "revert", detail["reason"]
    assert detail["config_after"] == REVERTED


_OWNERS_STOP_SEQUENCE = {
    "stages": {
        "nodeBootstrapped": [
            {
                "name": "record-after-fail",
                "arguments": ["after-fail"],
                "onError": "STOP_SEQUENCE",
                "scriptSource": {"scriptLocation": "s3://lca-scripts-example/scripts/record-boot.sh"},
            }
        ],
        "nodeReady": [
            {
                "name": "ready-check",
                "onError": "CONTINUE",
                "scriptSource": {"scriptLocation": "s3://lca-scripts-example/scripts/ready-check.sh"},
            }
        ],
    }
}


@pytest.mark.parametrize("order", ["reports first", "success first"])
def test_a_clean_node_proves_a_configuration_that_hides_failures_whichever_log_comes_first(
    order: str,
) -> None:
    """A configuration with a STOP_SEQUENCE script is proven only by a success whose reports show that
    script ran clean: when the reports came after the scaling log's success, nothing looked again, and a
    static group's one node never proved it (no later success comes)."""
    world = World(actions=_OWNERS_STOP_SEQUENCE)
    world.person_sets(_OWNERS_STOP_SEQUENCE, at(1, 10))
    node, reports = "i-0clean0000000001", reports_handler(world)
    runs = [
        ran(node, at(1, 17), script="record-after-fail", stage="nodeBootstrapped", on_error="STOP_SEQUENCE"),
        ran(node, at(1, 18), script="ready-check", stage="nodeReady", on_error="CONTINUE"),
    ]
    shipped = [(run.model_dump_json(), f"stream:{n}") for n, run in enumerate(runs)]
    if order == "reports first":
        world.feed([launched(node, at(1, 15))])
        reports.handle_messages(shipped)
        world.feed([succeeded(node, at(1, 18))])
    else:
        world.feed([launched(node, at(1, 15)), succeeded(node, at(1, 18))])
        assert world.state().proven_good is None  # no reports yet: a STOP_SEQUENCE failure looks the same
        reports.handle_messages(shipped)
    proof = world.state().proven_good
    assert proof is not None
    assert (proof.instance_id, proof.node_lifecycle_actions) == (node, _OWNERS_STOP_SEQUENCE)
    assert proof.evidence.startswith("BOOTSTRAP_SUCCESS, and its reports show 2 script run(s)")
    assert world.bus.entries == []


def test_the_proof_kept_behind_is_withdrawn_by_its_own_nodes_late_failed_report_too() -> None:
    """The node that proved the configuration before a broken change reported a failed script of that boot
    after the change's first node had proved it: the proof kept behind stood, came back when the newer one
    was withdrawn, and the revert put back a configuration whose script was known to fail."""
    world = _proved_then_broken()
    reports = reports_handler(world)
    for n, start in enumerate((at(1, 21), at(1, 27), at(1, 33))):
        node = f"i-0a{n:015d}"
        world.feed([launched(node, start)])
        world.feed([succeeded(node, start + 180_000)])
        if n == 0:
            late = ran(
                "i-0p00000000000001",
                at(1, 9) + 30_000,
                outcome="failed",
                script="ready-check",
                stage="nodeReady",
                on_error="CONTINUE",
            )
            reports.handle_messages([(late.model_dump_json(), "stream:0")])
            assert world.state().proven_before is None
        world.feed([failed(node, start + 200_000)])
    assert world.state().proven_good is None
    detail = remediate_last_detection(world)
    assert detail["action"] == "quarantine"
    assert "no proven-good configuration is known" in detail["reason"]


def test_reports_that_prove_nothing_write_nothing_however_often_they_come() -> None:
    world = World(actions=_OWNERS_STOP_SEQUENCE)
    world.person_sets(_OWNERS_STOP_SEQUENCE, at(1, 10))
    node, reports = "i-0kept000000000001", reports_handler(world)
    world.feed([launched(node, at(1, 15))])
    stopped = ran(node, at(1, 17), outcome="failed", script="record-after-fail", on_error="STOP_SEQUENCE")
    reports.handle_messages([(stopped.model_dump_json(), "stream:0")])
    world.feed([succeeded(node, at(1, 18))])  # a STOP_SEQUENCE failure, as PCS logs it: no proof
    clean = ran(node, at(1, 18), script="ready-check", stage="nodeReady", on_error="CONTINUE")
    version = world.state().version
    for n in range(20):
        reports.handle_messages([(clean.model_dump_json(), f"stream:{n}")])
    assert (world.state().version, world.state().proven_good) == (version, None)


def test_a_configuration_that_loops_after_its_success_in_the_same_batch_is_not_proven_by_it() -> None:
    """The proof was made after the batch's revocations: a batch holding a node's ACTIVE and then the loop
    of the same configuration stored it as proven, for the remediation to read, and the proof before it
    was gone."""
    world = World(actions=REVERTED)
    world.person_sets(REVERTED, at(1, 10))
    world.feed(
        [
            launched("i-0x00000000000001", at(1, 11)),
            succeeded("i-0x00000000000001", at(1, 14)),
            launched("i-0y00000000000001", at(1, 15)),
            failed("i-0y00000000000001", at(1, 18)),
            launched("i-0z00000000000001", at(1, 19)),
            failed("i-0z00000000000001", at(1, 22)),
        ]
    )
    state = world.state()
    assert state.episode is not None
    assert state.proven_good is None


def _loop_of(group: str, first_minute: int, tag: str) -> list[dict[str, Any]]:
    """Two nodes launched six minutes apart, each failing five minutes after its launch, from 01:MM."""
    rows = []
    for n in range(2):
        instance = f"i-0{tag}{n:015d}"
        start = at(1, first_minute + 6 * n)
        rows.append(
            {**row(instance, "LAUNCHED", "MAINTAIN_MIN_CAPACITY", start), "compute_node_group_id": group}
        )
        rows.append(failed(instance, start + 5 * 60_000, group=group))
    return rows


@pytest.mark.parametrize("second_key", [GROUP, "lca-static"], ids=["by-id", "by-name"])
def test_records_naming_the_group_by_its_name_get_around_no_cooldown(second_key: str) -> None:
    """PCS writes a group's id in its scaling log, and its calls take a name as well: records naming the
    group by its name (forged) would be another state, episode and rails for the same group, and get it
    changed again inside its cooldown. They are skipped, each with its reason."""
    world = World()
    world.feed(_loop_of(GROUP, 4, "a"))
    assert remediate_last_detection(world)["mode"] == "quarantine"
    world.person_sets(TERMINATE, at(1, 18))  # the owners put TERMINATE back
    summary = world.feed(_loop_of(second_key, 19, "b"))
    for _, detail in [e for e in world.bus.events() if e[0] == "BootstrapLoopDetected"][1:]:
        remediator(world).handle_event({"detail-type": "BootstrapLoopDetected", "detail": detail})
    by_lifeguard = [
        call.params["computeNodeGroupIdentifier"]
        for call in world.pcs.calls
        if call.operation == "UpdateComputeNodeGroup"
        and call.error is None
        and str(call.params.get("clientToken", "")).startswith("lifeguard-")
    ]
    assert by_lifeguard == [GROUP]
    if second_key != GROUP:
        assert summary.skipped == 4
        [reason] = summary.skipped_reasons
        assert "compute_node_group_id" in reason
        assert world.state("lca-static").version == 0  # nothing stored under the name


def test_records_of_groups_pcs_does_not_list_store_nothing() -> None:
    """Whoever can write the scaling log could name a made-up group in every record: each would get a state
    stored, never to expire. A group Lifeguard has no state of is kept only once PCS lists it in its
    cluster (one listing a batch, however many groups are named); the others' records are skipped."""
    world = World()
    made_up = [f"pcs_madeup{n:04d}" for n in range(300)]
    rows = [
        {**launched(f"i-0{n:016x}", at(1, 5)), "compute_node_group_id": group}
        for n, group in enumerate(made_up)
    ]
    summary = world.feed([*rows, launched("i-0real00000000000", at(1, 5))])
    assert summary.skipped_reasons == {"a group its cluster does not have": 300}
    assert summary.groups == 1
    assert world.pcs_calls("ListComputeNodeGroups") == 1
    assert all(world.state(group).version == 0 for group in made_up)  # nothing stored
    assert "i-0real00000000000" in world.state().launches


def test_a_group_first_seen_after_its_cluster_was_listed_costs_no_listing_of_its_own() -> None:
    """A warm container keeps each cluster's last listing: a group it shows is known to exist without a
    call; a group it does not show (new since, or made up) has the cluster listed again, once a batch."""
    world = World()
    world.handler = world.container()
    others = other_groups(world, 2)
    world.feed([launched("i-0first0000000000", at(1, 5))])  # the first sight of the cluster: listed
    assert world.pcs_calls("ListComputeNodeGroups") == 1
    world.feed([{**launched("i-0secnd0000000000", at(1, 6)), "compute_node_group_id": others[0]}])
    assert world.pcs_calls("ListComputeNodeGroups") == 1  # shown by the kept listing
    assert "i-0secnd0000000000" in world.state(others[0]).launches
    madeup = {**launched("i-0third0000000000", at(1, 7)), "compute_node_group_id": "pcs_madeup0001"}
    summary = world.feed([madeup, madeup | {"event_timestamp": at(1, 8)}])
    assert world.pcs_calls("ListComputeNodeGroups") == 2  # not shown: listed again, once for the batch
    assert summary.skipped_reasons == {"a group its cluster does not have": 2}


def test_a_cluster_pcs_refuses_to_list_is_asked_once_a_batch_and_stores_nothing_of_new_groups() -> None:
    """PCS refuses to list the cluster (a permission missing): the groups seen for the first time are not
    stored (a group is kept only once PCS lists it), the group Lifeguard knows has its loop told, and the
    batch then fails, naming what to grant, so that Lambda retries it and parks it rather than lose the new
    groups' records. Sent again once PCS answers, it stores them and tells the known group's loop no
    second time."""
    world = World()
    world.feed(LOOP[:1])  # the article's group is known from here on
    others = other_groups(world, 2)
    world.pcs.inject_fault("AccessDeniedException", operation="ListComputeNodeGroups")
    rows = [
        {**launched(f"i-0new{n}000000000000", at(1, 5)), "compute_node_group_id": group}
        for n, group in enumerate(others)
    ]
    lists = world.pcs_calls("ListComputeNodeGroups")
    with pytest.raises(UnlistedClusterError) as refused:
        world.feed(rows + LOOP[1:])
    assert str(refused.value).startswith(
        f"2 record(s) of 2 group(s) seen for the first time are held: PCS refused to list cluster {CLUSTER} "
        "(AccessDeniedException); grant pcs:ListComputeNodeGroups on it."
    )
    # PCS's model: AccessDeniedException also when "the cluster ID doesn't exist".
    assert "for a cluster id it does not have too" in str(refused.value)
    assert world.pcs_calls("ListComputeNodeGroups") == lists + 1
    assert all(world.state(group).version == 0 for group in others)
    assert world.published() == ["BootstrapLoopDetected"]  # the rest of the batch was done
    summary = world.feed(rows + LOOP[1:])  # the batch sent again from the failed-batches queue
    assert (summary.groups, summary.unreadable_groups, summary.skipped) == (3, 0, 0)
    assert [sorted(world.state(group).launches) for group in others] == [
        ["i-0new0000000000000"],
        ["i-0new1000000000000"],
    ]
    assert world.published() == ["BootstrapLoopDetected"]


def test_a_new_groups_loop_held_by_a_refused_listing_is_told_when_its_batch_is_sent_again() -> None:
    """The article's loop in a group seen for the first time, in a batch whose listing PCS refuses: nothing
    of it is lost. Sent again (a retry, or from the failed-batches queue), it is told at the article's
    second failure, not two failures later."""
    world = World()
    world.pcs.inject_fault("AccessDeniedException", operation="ListComputeNodeGroups")
    with pytest.raises(UnlistedClusterError, match=r"^5 record\(s\) of 1 group\(s\)"):
        world.feed(LOOP)
    assert world.state().version == 0
    assert world.published() == []
    world.feed(LOOP)
    assert world.published() == ["BootstrapLoopDetected"]


BOOTSTRAPPED = "nodeBootstrapped"


def _known_groups_then_listing_refused(world: World, count: int) -> list[str]:
    """`count` more groups of the article's cluster, each known to Lifeguard (with the article's), then
    ListComputeNodeGroups refused for good (GetComputeNodeGroup allowed), seen by a cold container."""
    others = other_groups(world, count)
    known = [
        launched(f"i-0k{n:015d}", at(0, 50)) | {"compute_node_group_id": o} for n, o in enumerate(others)
    ]
    world.feed([launched("i-0aaaa00000000000", at(0, 50)), *known])
    assert all(world.state(group).version > 0 for group in others)
    world.pcs.inject_fault("AccessDeniedException", operation="ListComputeNodeGroups", times=1000)
    world.handler = world.container()
    return others


def test_a_loop_of_a_known_group_is_told_when_its_cluster_cannot_be_listed() -> None:
    """Three known groups of a cluster PCS will not list, in one batch: the listing that would spare their
    reads is refused once, and they are read one by one; the loop among them is told, nothing parked."""
    world = World()
    others = _known_groups_then_listing_refused(world, 2)
    rows = [{**launched(f"i-0o{n:015d}", at(1, 1)), "compute_node_group_id": g} for n, g in enumerate(others)]
    lists = world.pcs_calls("ListComputeNodeGroups")
    summary = world.feed(rows + LOOP)
    assert world.published() == ["BootstrapLoopDetected"]
    assert world.pcs_calls("ListComputeNodeGroups") == lists + 1
    assert summary.unreadable_groups == 0


def test_proofs_in_a_cluster_that_cannot_be_listed_keep_to_their_reads_a_batch() -> None:
    """Thirty groups prove their configuration in one batch while PCS will not list their cluster: at most
    `BatchReads.PROOF_READS` are read for it, the rest wait (no listing can stand in for their reads)."""
    world = World()
    others = _known_groups_then_listing_refused(world, 30)
    gets = world.pcs_calls("GetComputeNodeGroup")
    rows = [r for n, g in enumerate(others) for r in booted(f"i-0b{n:015d}", at(1, 1), at(1, 5), g)]
    world.feed(rows)
    assert world.pcs_calls("GetComputeNodeGroup") - gets == BatchReads.PROOF_READS
    assert sum(world.state(group).proven_good is not None for group in others) == BatchReads.PROOF_READS


def three_groups_reporting_loops(world: World) -> list[dict[str, Any]]:
    """The article's loop reported by the nodes of three groups of the cluster (two added to the world)."""
    groups = [GROUP, *other_groups(world, 2)]
    return [
        {**r, "compute_node_group_id": g, "instance_id": r["instance_id"][:-1] + "abc"[i]}
        for i, g in enumerate(groups)
        for r in REPORTED
    ]


def test_reports_loops_of_groups_of_a_cluster_that_cannot_be_listed_are_each_told() -> None:
    """Three groups loop by their reports alone while PCS will not list their cluster: each is told."""
    world = World()
    reports = three_groups_reporting_loops(world)
    world.pcs.inject_fault("AccessDeniedException", operation="ListComputeNodeGroups", times=1000)
    ship(world, reports_handler(world), reports)
    assert world.published().count("BootstrapLoopDetected") == 3


def test_a_group_pcs_will_not_give_to_a_reports_batch_is_counted_unreadable_and_the_others_told() -> None:
    """As scaling_events counts them: a group PCS refused is `unreadable_groups` and GroupsUnreadable (its
    alarm), not a silent log line; its reports are stored, judged again with the next."""
    world = World()
    reports = three_groups_reporting_loops(world)
    world.pcs.inject_fault("AccessDeniedException", operation="GetComputeNodeGroup", times=1)
    metrics: list[tuple[str, float]] = []
    handler = reports_handler(world)
    handler.metric = lambda name, value: metrics.append((name, value))
    world.clock.set(datetime.fromtimestamp(max(r["ended_at"] for r in reports) + 60, UTC))
    summary = handler.handle_messages((json.dumps(r), "(report)") for r in reports)
    assert world.published().count("BootstrapLoopDetected") == 2
    assert summary.unreadable_groups == 1
    assert ("GroupsUnreadable", 1) in metrics


@pytest.mark.parametrize("on_error", ["STOP_SEQUENCE", "CONTINUE"])
def test_a_report_its_configuration_rules_out_takes_no_proof_back(on_error: str) -> None:
    """The node that ended the loop proved its configuration good. Any node then writes that it had
    fail-terminate fail under STOP_SEQUENCE (or CONTINUE), which that configuration runs under TERMINATE:
    not true of that boot. The proof stands and no loop is reopened."""
    world = World()
    handler = reports_handler(world)
    world.feed(ARTICLE)
    node, t = "i-0resolver000000a", at(1, 20) // 1000
    ship(
        world,
        handler,
        [
            _run(node, BOOTSTRAPPED, "fail-terminate", "succeeded", on_error="TERMINATE", at_s=t),
            _run(node, BOOTSTRAPPED, "record-after-fail", "succeeded", on_error="TERMINATE", at_s=t + 1),
            _run(node, "nodeReady", "ready-check", "succeeded", on_error="CONTINUE", at_s=t + 40),
        ],
    )
    world.feed([launched(node, at(1, 18)), succeeded(node, at(1, 21))])
    proof = world.state().proven_good
    assert proof is not None
    assert proof.instance_id == node
    forged = _run(node, BOOTSTRAPPED, "fail-terminate", "failed", on_error=on_error, at_s=t + 2)
    ship(world, handler, [forged])
    assert world.state().proven_good == proof
    assert "LoopContained" not in world.published()


def test_the_records_of_a_cluster_pcs_does_not_have_are_skipped_as_of_no_group() -> None:
    """ListComputeNodeGroups answers ResourceNotFoundException (the cluster deleted, or made up): its groups
    are none of PCS's, their records skipped and counted, and the batch's other records go on."""
    world = World()
    world.pcs.inject_fault("ResourceNotFoundException", operation="ListComputeNodeGroups")
    summary = world.feed(LOOP)
    assert summary.skipped_reasons == {"a group its cluster does not have": len(LOOP)}
    assert (summary.groups, summary.unreadable_groups) == (0, 0)
    assert world.state().version == 0
    assert world.published() == []


def test_forged_reports_that_open_the_episode_choose_the_script_the_real_loop_gets_switched() -> None:
    """A node forges two TERMINATE failures of `record-after-fail` on made-up instances of a group Lifeguard
    has no state of yet. Then the article's real loop comes: `fail-terminate` fails on FIRST and SECOND,
    their nodes report it, and the scaling log logs both BOOTSTRAP_FAILED. `_bear_out` adds `scaling_log` to
    the forged episode but keeps its forged evidence and suspect: the remediation switches the script the
    forger named, not the one PCS's scaling log and the real nodes' reports show failing."""
    world = World()
    when = at(1, 2) // 1000  # after the configuration took effect (01:00), before the real loop (01:04)
    ship(
        world,
        reports_handler(world),
        [
            forged("i-0fake000000000001", when, "record-after-fail"),
            forged("i-0fake000000000002", when + 1, "record-after-fail"),
        ],
    )
    ship(world, reports_handler(world), REPORTED)  # the real nodes' reports
    world.feed(ARTICLE)  # PCS's scaling log: the real loop, FIRST and SECOND
    borne_out = [d for t, d in world.bus.events() if t == "BootstrapLoopDetected"][-1]
    assert "scaling_log" in borne_out["signals"]
    applied = remediate_last_detection(world)
    assert (applied["action"], applied["suspect"]["script"], applied["diff"]) == (
        "quarantine",
        "fail-terminate",
        [{"path": "stages.nodeBootstrapped[0].onError", "old": "TERMINATE", "new": "STOP_SEQUENCE"}],
    )
    # The evidence the scaling log bears out is its own failures.
    assert [f["instance_id"] for f in borne_out["failures"]] == [FIRST, SECOND]


def clean_boot(instance: str, when_s: int) -> list[dict[str, Any]]:
    """A real node's reports of a boot where every lifecycle script succeeded (PCS failed it elsewhere)."""
    return [
        {**forged(instance, when_s + n, script), "outcome": "succeeded", "exit_code": 0, "stage": stage}
        for n, (stage, script) in enumerate(
            [("nodeBootstrapped", "fail-terminate"), ("nodeBootstrapped", "record-after-fail")]
        )
    ]


def test_forged_reports_get_a_script_switched_in_a_group_whose_real_loop_no_script_caused() -> None:
    """The article's loop, but its nodes' reports show every script succeeded (the AMI, slurmd): from the
    scaling log alone Lifeguard switches no script (`no_script_failed`). Forged reports that opened the
    episode first make the remediation switch the forged script all the same."""
    world = World()
    when = at(1, 2) // 1000
    ship(
        world,
        reports_handler(world),
        [
            forged("i-0fake000000000001", when, "record-after-fail"),
            forged("i-0fake000000000002", when + 1, "record-after-fail"),
        ],
    )
    ship(
        world,
        reports_handler(world),
        [*clean_boot(FIRST, at(1, 5) // 1000), *clean_boot(SECOND, at(1, 11) // 1000)],
    )
    world.feed(ARTICLE)
    outcome = remediate_last_detection(world)
    assert world.published()[-1] == "RemediationSkipped", outcome["diff"]
    assert "no script is switched" in outcome["reason"]


def replacement_episode_then_a_broken_script(world: World, failing_nodes: int) -> None:
    """Two fresh nodes replaced as unhealthy (a replacement episode, open), then someone pushes the broken
    script and `failing_nodes` nodes launched on it fail to bootstrap, one every six minutes."""
    world.person_sets(REVERTED, at(1, 10))
    world.feed(booted_then_replaced("i-0sick000000000001", 12))
    world.feed(booted_then_replaced("i-0sick000000000002", 22))
    world.person_sets(TERMINATE, at(1, 35))
    for n in range(failing_nodes):
        instance, minute = f"i-0loop00000000{n:04d}", 36 + 6 * n
        world.feed(
            [
                launched(instance, at(1, 0) + minute * 60_000),
                failed(instance, at(1, 0) + (minute + 5) * 60_000),
            ]
        )


def test_a_loop_of_a_new_configuration_under_a_replacement_episode_is_a_loop_and_is_remediated() -> None:
    world = World()
    replacement_episode_then_a_broken_script(world, 2)
    detections = [d for t, d in world.bus.events() if t == "BootstrapLoopDetected"]
    assert [d["kind"] for d in detections] == ["replacement", "loop"]
    assert [f["instance_id"] for f in detections[-1]["failures"]] == [
        "i-0loop000000000000",
        "i-0loop000000000001",
    ]
    outcome = remediate_last_detection(world)
    assert world.published()[-1] == "RemediationApplied", outcome["reason"]


def test_an_episode_detected_again_carries_at_most_the_newest_100_failures() -> None:
    from lifeguard.event_contract import clean_detail

    world = World(tags={"lifeguard:mode": "notify"})
    world.feed(ARTICLE)  # the loop, detected
    broken = json.loads(json.dumps(TERMINATE))
    broken["stages"]["nodeBootstrapped"][0]["arguments"] = ["another-try"]
    world.person_sets(broken, at(1, 20))
    rows = []
    for n in range(150):  # a scale-out of 150 nodes on the new configuration, all failing, in one batch
        instance = f"i-0big0000000{n:05d}"
        rows += [launched(instance, at(1, 21) + n * 1000), failed(instance, at(1, 21) + 300_000 + n * 1000)]
    world.feed(rows)
    world.feed([launched("i-0late000000000001", at(1, 30)), failed("i-0late000000000001", at(1, 35))])
    last = [d for t, d in world.bus.events() if t == "BootstrapLoopDetected"][-1]
    assert last["revision"] == 2
    assert len(last["failures"]) == 100
    assert last["failures"][-1]["instance_id"] == "i-0late000000000001"  # the newest are the evidence
    assert clean_detail(last)[1] == []


def test_a_replacement_loop_whose_nodes_then_fail_to_bootstrap_on_the_same_configuration_is_detected() -> (
    None
):
    """A replacement episode is open (two fresh nodes replaced as unhealthy); then, the configuration
    unchanged (a script's object overwritten in place), every new node fails to bootstrap: no success will
    end the replacement episode, so the loop is told as a new revision of it, and remediated."""
    world = World()
    world.person_sets(REVERTED, at(1, 10))
    world.feed(booted_then_replaced("i-0sick000000000001", 12))
    world.feed(booted_then_replaced("i-0sick000000000002", 22))
    for n in range(3):
        instance, minute = f"i-0loop00000000{n:04d}", 30 + 6 * n
        world.feed(
            [
                launched(instance, at(1, 0) + minute * 60_000),
                failed(instance, at(1, 0) + (minute + 5) * 60_000),
            ]
        )
    detections = [d for t, d in world.bus.events() if t == "BootstrapLoopDetected"]
    assert [(d["kind"], d["revision"]) for d in detections] == [("replacement", 1), ("loop", 2)]
    assert "now fail to bootstrap" in detections[-1]["reason"]
    outcome = remediate_last_detection(world)
    assert world.published()[-1] == "RemediationApplied", outcome["reason"]


def test_failures_whose_launches_come_late_never_count_against_the_configuration_they_did_not_run() -> None:
    """The owner mends the looping group at 01:16; two nodes launched before (on the broken configuration)
    fail after it, and their LAUNCHED records are delivered after the failures (a retried batch, another
    invocation). Lifeguard must not take them for a loop of the fix, nor change it."""
    world = World()
    world.feed([launched("i-0earlier000000001", at(0, 50)), succeeded("i-0earlier000000001", at(0, 55))])
    world.person_sets(REVERTED, at(1, 16))
    old = ["i-0old0000000000001", "i-0old0000000000002"]
    world.feed([failed(old[0], at(1, 18)), failed(old[1], at(1, 19))])
    world.feed([launched(old[0], at(1, 12)), launched(old[1], at(1, 13))])
    assert world.published() == []
    assert world.state().episode is None


def test_a_loop_whose_launches_come_after_its_failures_is_told_when_they_come() -> None:
    """Batches out of order (a retried one, concurrent invocations): the loop's failures first, then their
    nodes' LAUNCHED records, which show they ran the current configuration."""
    world = World()
    world.feed([launched("i-0earlier000000001", at(0, 50)), succeeded("i-0earlier000000001", at(0, 55))])
    world.feed([r for r in LOOP if r["status_code"] != "LAUNCHED"])
    assert world.published() == []  # which configuration did they run? Not known yet
    world.feed([r for r in LOOP if r["status_code"] == "LAUNCHED"])
    assert world.published() == ["BootstrapLoopDetected"]
    [(_, detail)] = world.bus.events()
    assert [f["instance_id"] for f in detail["failures"]] == [FIRST, SECOND]


def test_a_loop_going_on_under_a_fix_is_told_again_when_its_late_launches_come() -> None:
    """An open episode; a fix that does not work; its nodes' failures come before their LAUNCHED records
    (held back then), and the launches show they ran the fix: the loop is told again (an escalation)."""
    world = World()
    world.feed(LOOP)
    world.person_sets(REVERTED, at(1, 20))
    first, second = "i-0aaaaaaaaaaaaaaa1", "i-0aaaaaaaaaaaaaaa2"
    world.feed([failed(first, at(1, 26))])
    world.feed([failed(second, at(1, 27))])
    assert world.published() == ["BootstrapLoopDetected"]
    world.feed([launched(first, at(1, 21)), launched(second, at(1, 22))])
    assert world.published() == ["BootstrapLoopDetected", "BootstrapLoopDetected"]
    [_, (_, again)] = world.bus.events()
    assert [f["instance_id"] for f in again["failures"]] == [first, second]
    assert again["revision"] == 2


# -- what a node's reports may and may not say about a boot --

NEW_NODE = "i-0new0000000000001"


def _ready_check_failed(when_ms: int, on_error: str) -> dict[str, Any]:
    """The node's nodeReady script failing at `when_ms`: it runs after PCS logged the node ACTIVE."""
    return {
        **REPORTED[0],
        "instance_id": NEW_NODE,
        "stage": "nodeReady",
        "script": "ready-check",
        "on_error": on_error,
        "started_at": when_ms // 1000,
        "ended_at": when_ms // 1000,
    }


def test_a_nodeready_failure_reported_after_the_success_unproves_the_configuration() -> None:
    """The article: ACTIVE at 00:57:52, the nodeReady check from 00:57:54. A nodeReady script's failure is
    of the boot that proved the configuration, though it started after the success was logged."""
    world = World()
    world.person_sets(REVERTED, at(1, 10))
    GroupStore(world.table, TABLE).put_reports([ran(NEW_NODE, at(1, 15), script="record-after-fail")])
    world.feed([launched(NEW_NODE, at(1, 13)), succeeded(NEW_NODE, at(1, 18))])
    assert world.state().proven_good is not None  # its nodeBootstrapped run, so far
    ship(world, reports_handler(world), [_ready_check_failed(at(1, 18, 2), "CONTINUE")])
    assert world.state().proven_good is None


def test_a_nodeready_failure_reported_after_the_success_turns_the_resolution_into_containment() -> None:
    world = World()
    world.feed(ARTICLE[:6])
    fixed = json.loads(json.dumps(TERMINATE))
    del fixed["stages"]["nodeBootstrapped"][0]  # the owner's fix, with a nodeReady script kept
    fixed["stages"]["nodeReady"][0]["onError"] = "STOP_SEQUENCE"
    world.person_sets(fixed, at(1, 13))
    GroupStore(world.table, TABLE).put_reports([ran(NEW_NODE, at(1, 16), script="record-after-fail")])
    world.feed([launched(NEW_NODE, at(1, 14)), succeeded(NEW_NODE, at(1, 19))])
    assert world.published()[-1] == "LoopResolved"
    ship(world, reports_handler(world), [_ready_check_failed(at(1, 19, 2), "STOP_SEQUENCE")])
    assert world.published()[-1] == "LoopContained"


def _forged_failure(when_ms: int) -> dict[str, Any]:
    """A report of a script the group's configuration does not have (any node can write one)."""
    return {
        **REPORTED[0],
        "instance_id": NEW_NODE,
        "script": "no-such-script",
        "started_at": when_ms // 1000,
        "ended_at": when_ms // 1000,
    }


def test_a_failure_of_a_script_the_configuration_does_not_have_unproves_nothing() -> None:
    world = World()
    world.person_sets(REVERTED, at(1, 10))
    world.feed([launched(NEW_NODE, at(1, 13)), succeeded(NEW_NODE, at(1, 18))])
    assert world.state().proven_good is not None
    ship(world, reports_handler(world), [_forged_failure(at(1, 15))])
    assert world.state().proven_good is not None


def test_a_failure_of_a_script_the_configuration_does_not_have_contains_no_fixed_loop() -> None:
    world = World()
    world.feed(ARTICLE[:6])
    world.person_sets(REVERTED, at(1, 13))
    ship(world, reports_handler(world), [_forged_failure(at(1, 16))])
    world.feed([launched(NEW_NODE, at(1, 14)), succeeded(NEW_NODE, at(1, 19))])
    assert world.published()[-1] == "LoopResolved"


def test_a_suspect_named_after_the_detection_said_no_script_failed_is_remediated() -> None:
    """The failing nodes' runs that did not fail came first (their failed runs' batch was retried): they
    are not every nodeBootstrapped script's, so the detection does not say no script failed, and names
    none. Their failed runs, when they come, name the script, and the remediation of that revision
    switches it."""
    world = World()
    GroupStore(world.table, TABLE).put_reports(
        [
            ran(FIRST, 1792544790000, script="record-after-fail"),
            ran(SECOND, 1792545150000, script="record-after-fail"),
        ]
    )
    world.feed(ARTICLE)
    episode = world.state().episode
    assert episode is not None
    assert not episode.no_script_failed
    assert episode.suspect is None
    ship(world, reports_handler(world), REPORTED)
    episode = world.state().episode
    assert episode is not None
    assert episode.suspect is not None
    assert episode.suspect.script == "fail-terminate"
    assert not episode.no_script_failed
    assert world.published() == ["BootstrapLoopDetected", "BootstrapLoopDetected"]
    applied = remediate_last_detection(world)
    assert applied["action"] == "quarantine"
    assert applied["diff"] == [
        {"path": "stages.nodeBootstrapped[0].onError", "old": "TERMINATE", "new": "STOP_SEQUENCE"}
    ]


def _flood(instance: str) -> list[dict[str, Any]]:
    """A group's whole read of forged failed runs, under one instance (any node can write them)."""
    return [
        {**REPORTED[0], "instance_id": instance, "boot": n + 1, "script": "record-after-fail", "log_tail": ""}
        for n in range(RUNS_READ_MAX)
    ]


def _told_fed(rows: list[dict[str, Any]], world: World, batch_ms: int = 0) -> list[tuple[int, str]]:
    """(failures so far, kind) of each detection `rows` make, fed in time order one by one, or in batches of
    the records of each `batch_ms`."""
    rows = sorted(rows, key=lambda r: r["event_timestamp"])
    batches: list[list[dict[str, Any]]] = []
    for one in rows:
        same = (
            batch_ms
            and batches
            and one["event_timestamp"] // batch_ms == batches[-1][0]["event_timestamp"] // batch_ms
        )
        if same:
            batches[-1].append(one)
        else:
            batches.append([one])
    told: list[tuple[int, str]] = []
    failures = 0
    for batch in batches:
        failures += sum(r["status_code"] == "TERMINATED" for r in batch)
        world.feed(batch)
        told += [(failures, detail["kind"]) for _, detail in world.bus.events()[len(told) :]]
    return told


def test_a_busy_group_failing_most_boots_is_told_within_minutes() -> None:
    """A job's node launched every 15 s, 55% of boots failing 1-3 minutes in, each failed node replaced
    20 s later: a busy group always has new nodes booting, and counting those launched after the newest
    failed one as the wave's held its intermittent rule to the 28th failure, a quarter of an hour. The
    intermittent rule's wave ends at the newest failed node's launch."""
    rnd, rows, made = random.Random(9), [], [0]

    def node(when: int, depth: int = 0) -> None:
        made[0] += 1
        name = f"i-0bz{made[0]:015d}"
        rows.append(launched(name, when))
        if rnd.random() < 0.55:
            end = when + rnd.randint(60, 180) * 1000
            rows.append(failed(name, end))
            if depth < 6:
                node(end + 20_000, depth + 1)
        else:
            rows.append(succeeded(name, when + rnd.randint(120, 240) * 1000))

    for launch in range(30):
        node(at(3, 0) + launch * 15_000)
    told = _told_fed(rows, World())
    assert told
    assert told[0][0] <= 8


def _static_group_told_at(nodes: int, boot_ms: int, gap_ms: int) -> list[tuple[int, str]]:
    """A static group of `nodes` launched `gap_ms` apart on a configuration that fails every boot after
    `boot_ms`, each node replaced 20 s after its failure, fed record by record: (failures so far, kind) of
    each detection told."""
    world, rows = World(), []
    for slot in range(nodes):
        launch = at(2, 0) + slot * gap_ms
        for cycle in range(8):
            node = f"i-0f{slot:03d}c{cycle:02d}{'0' * 9}"
            rows += [launched(node, launch), failed(node, launch + boot_ms)]
            launch += boot_ms + 20_000
    return _told_fed(rows, world)


@pytest.mark.parametrize("boot_ms", [30_000, 117_000, 300_000])
def test_a_static_group_on_a_bad_configuration_is_told_by_half_its_nodes_failing(boot_ms: int) -> None:
    """The wave holds a loop back only while half the nodes launched with its failed ones may still come
    up, a loop's replacements included (a version of this session's that counted launches up to 2 minutes
    after the newest failed node's held a group of 20 launched 10 s apart to its 17th failure)."""
    for nodes, gap_ms in (
        (1, 1000),
        (4, 1000),
        (10, 1000),
        (4, 60_000),
        (10, 10_000),
        (10, 20_000),
        (20, 10_000),
        (50, 1000),
    ):
        (count, kind), *_ = _static_group_told_at(nodes, boot_ms, gap_ms)
        assert kind == "loop", (nodes, gap_ms)
        assert 2 <= count <= max(2, nodes // 2), (nodes, gap_ms)


def test_a_stream_of_launches_all_failing_is_told_however_many_boot_at_once() -> None:
    """A node launched every 2 s for ten minutes, each failing 150 s in: 75 still booting at any time. A
    version of this session's counted those launched up to 2 minutes after the newest failed node's as
    nodes that could yet come up: more than the 100 outcomes a group keeps could ever outweigh, so a loop
    of hundreds of failures was never told (`bench/ingest.py`'s one group)."""
    rows = []
    for k in range(300):
        node = f"i-0st{k:015d}"
        rows += [launched(node, at(4, 0) + k * 2000), failed(node, at(4, 0) + k * 2000 + 150_000)]
    assert _told_fed(rows, World())[:1] == [(2, "loop")]
    # In minutes' batches: in the first that holds failures (the 15 of 02:02:30-02:03:00).
    assert _told_fed(rows, World(), 60_000)[:1] == [(15, "loop")]


def test_a_loop_after_a_change_is_told_at_its_threshold_whatever_the_old_configuration_booted() -> None:
    """A flaky failure and twenty clean boots of the old configuration, then a configuration that fails on
    four static nodes launched a minute apart: told at its second failure. (Counting launches up to two
    minutes after the newest failed node's as its wave's held this loop back to its twentieth failure, 25
    minutes: the first look's wave took in the old configuration's successes.)"""
    world = World()
    rows = [launched("i-0old0000000000000", at(1, 5)), failed("i-0old0000000000000", at(1, 7))]
    for n in range(1, 21):
        rows += [launched(f"i-0old{n:014d}", at(1, 5, n)), succeeded(f"i-0old{n:014d}", at(1, 7, 10 + n))]
    for one in sorted(rows, key=lambda r: r["event_timestamp"]):
        world.feed([one])
    world.person_sets(REVERTED, at(1, 30))
    new = []
    for slot in range(4):
        launch = at(1, 31) + slot * 60_000
        for cycle in range(3):
            node = f"i-0n{slot}c{cycle}{'0' * 13}"
            new += [launched(node, launch), failed(node, launch + 117_000)]
            launch += 297_000
    assert world.bus.events() == []  # the flaky failure before told nothing
    assert _told_fed(new, world)[:1] == [(2, "loop")]


def test_a_solid_loop_is_told_at_a_threshold_above_five_as_a_loop() -> None:
    """Five boots of five failing made an intermittent episode at the fifth failure, whatever the stack's
    Threshold (or a tag's) above 5 said; and an intermittent episode ends only after three successes in a
    row. Boots that all fail are a loop, told at its threshold."""
    for booted_before in (False, True):  # a node of the configuration came up before (its object overwritten)
        world = World(threshold=8)
        start, told = at(1, 4, 45), []
        if booted_before:
            world.feed(
                [launched("i-0ok0000000000000", start), succeeded("i-0ok0000000000000", start + 117_000)]
            )
            start += 330_000
        for k in range(10):
            node = f"i-0lp{k:013d}"
            world.feed([launched(node, start)])
            world.feed([failed(node, start + 117_000)])
            told += [(k + 1, detail["kind"]) for _, detail in world.bus.events()[len(told) :]]
            start += 330_000
        assert told == [(8, "loop")], booted_before


def test_a_flood_of_forged_runs_hides_no_failing_nodes_reports_from_node_reports() -> None:
    """The flood sorts first (`i-0`): the group's read holds nothing else; the failing nodes' runs are read
    for themselves, and name the script."""
    world = World()
    world.feed(ARTICLE)
    handler = reports_handler(world)
    ship(world, handler, _flood("i-0"))
    ship(world, handler, REPORTED)
    episode = world.state().episode
    assert episode is not None
    assert episode.suspect is not None
    assert episode.suspect.script == "fail-terminate"


def test_a_flood_of_forged_runs_hides_no_failing_nodes_reports_from_the_detection() -> None:
    """The flood sorts last (`i-zzz…`), where the detection's read begins."""
    world = World()
    store = GroupStore(world.table, TABLE)
    store.put_reports(NodeReport.model_validate(report) for report in _flood("i-zzzzzzzzzzzzzzzzz"))
    store.put_reports(NodeReport.model_validate(report) for report in REPORTED)
    world.feed(ARTICLE)
    [detected] = [d for t, d in world.bus.events() if t == "BootstrapLoopDetected"]
    assert detected["suspect"]["script"] == "fail-terminate"


def test_a_flood_under_the_failing_nodes_own_ids_names_no_other_script_to_blame() -> None:
    """A thousand forged failed runs of another configured script under each failing instance's id, its name
    sorting before the broken one's: each instance's own read held only them, and the episode was told again
    blaming the innocent script, whose quarantine left the broken one on TERMINATE (the loop went on). Past a
    full read of its own, an instance's launch boot is read script by script, as a proof's is: the forger
    can widen the blame (as one contradicting report can), not move it off the broken script."""
    actions = {
        "stages": {
            "nodeBootstrapped": [
                {"name": "a-install", "scriptSource": {"scriptLocation": "s3://lca-scripts-example/a.sh"}},
                {
                    "name": "fail-terminate",
                    "scriptSource": {"scriptLocation": "s3://lca-scripts-example/f.sh"},
                },
            ]
        }
    }
    world = World(actions=actions)
    handler = reports_handler(world)
    real = [report for report in REPORTED if report["outcome"] == "failed"]
    ship(world, handler, real)
    world.feed(LOOP)
    assert [d for t, d in world.bus.events() if t == "BootstrapLoopDetected"][-1]["suspect"]["script"] == (
        "fail-terminate"
    )
    flood = [
        {**report, "script": "a-install", "started_at": report["started_at"] - 2000 + n, "log_tail": "forged"}
        for report in real
        for n in range(INSTANCE_RUNS_MAX)
    ]
    ship(world, handler, flood)
    # The genuine run read beside the forged ones: two scripts failed the same boot under TERMINATE, which
    # cannot be (the first ends it), so no script is named and each one under TERMINATE is switched.
    episode = world.state().episode
    assert episode is not None
    assert episode.suspect is None
    applied = remediate_last_detection(world)
    [update] = [call.params for call in world.pcs.calls if call.operation == "UpdateComputeNodeGroup"]
    stage = update["nodeLifecycleActions"]["stages"]["nodeBootstrapped"]
    on_error = {script["name"]: script.get("onError") for script in stage}
    assert on_error == {"a-install": "STOP_SEQUENCE", "fail-terminate": "STOP_SEQUENCE"}, applied


def test_a_flood_of_forged_runs_lets_no_node_past_the_single_reads_prove_its_configuration() -> None:
    """A scale-up brings more successes in one batch than a decision reads instances one by one
    (`INSTANCES_READ_MAX`), each node's ready check failed (CONTINUE), and a flood fills the group's read:
    the nodes past the single reads are not known to have run clean, nor to have sent nothing, and prove
    nothing. The flood keeps no clean node from proving: one whose runs are read proves at its own batch."""
    world = World()
    world.person_sets(REVERTED, at(1, 10))
    store = GroupStore(world.table, TABLE)
    store.put_reports(NodeReport.model_validate(report) for report in _flood("i-zzzzzzzzzzzzzzzzz"))
    nodes = [f"i-0n{n:015d}" for n in range(INSTANCES_READ_MAX + 1)]
    store.put_reports(
        NodeReport.model_validate({**_ready_check_failed(at(1, 17), "CONTINUE"), "instance_id": node})
        for node in nodes
    )
    world.feed(
        [launched(node, at(1, 13)) for node in nodes]
        + [succeeded(node, at(1, 16) + n * 1000) for n, node in enumerate(nodes)]
    )
    assert world.state().proven_good is None
    store.put_reports([ran(NEW_NODE, at(1, 25)), ran(NEW_NODE, at(1, 27), script="ready-check")])
    world.feed([launched(NEW_NODE, at(1, 23)), succeeded(NEW_NODE, at(1, 26))])
    proof = world.state().proven_good
    assert proof is not None
    assert proof.instance_id == NEW_NODE


def test_a_success_whose_runs_a_flood_left_unread_ends_no_episode_until_they_are_read() -> None:
    """A decision that spent its reads of single instances (`INSTANCES_READ_MAX`), a flood filling the
    group's read: the success that would end the episode is not taken as a node that reported nothing (the
    loop resolved on the success alone); a batch that reads its runs afresh ends it on them."""
    world = World()
    world.feed(ARTICLE[:6])
    store = GroupStore(world.table, TABLE)
    store.put_reports(NodeReport.model_validate(report) for report in _flood("i-zzzzzzzzzzzzzzzzz"))
    store.put_reports(
        [
            ran(NEW_NODE, at(1, 16), script="fail-terminate"),
            ran(NEW_NODE, at(1, 16)),
            ran(NEW_NODE, at(1, 17), script="ready-check"),
        ]
    )
    state = world.state()
    for record in [launched(NEW_NODE, at(1, 14)), succeeded(NEW_NODE, at(1, 19))]:
        apply_record(state, parse_scaling_log_record(record))
    spent = GroupEvidence(store, state)
    for n in range(INSTANCES_READ_MAX):
        spent.of(BootOutcome(f"i-0other{n:012d}", "lca-static-1", at(1, 18), True))

    def settled(runs: GroupEvidence) -> list[Any]:
        change = Change()
        world.handler._settle(state, lambda *_, **__: False, change, runs)
        return change.events

    assert settled(spent) == []
    [resolved] = settled(GroupEvidence(store, state))
    assert resolved.detail_type == "LoopResolved"
    assert "its reports show 2 script run(s), none failed" in resolved.detail["reason"]


def _every_boot_ready_check() -> dict[str, Any]:
    config = json.loads(json.dumps(REVERTED))
    config["stages"]["nodeReady"][0]["executionPolicy"] = "EVERY_BOOT"
    return config


def _reboot_failure(when_ms: int) -> dict[str, Any]:
    """The node's EVERY_BOOT nodeReady check failing (CONTINUE) on a reboot a day later, labelled as a shipper
    of an earlier release labels every run under PCS's agent: boot 1, first boot."""
    return {**_ready_check_failed(when_ms, "CONTINUE"), "boot": 1, "first_boot": True}


def test_a_reboots_failure_a_day_after_the_proof_unproves_nothing() -> None:
    world = World()
    world.person_sets(_every_boot_ready_check(), at(1, 10))
    GroupStore(world.table, TABLE).put_reports(
        [ran(NEW_NODE, at(1, 15)), ran(NEW_NODE, at(1, 17), script="ready-check")]
    )
    world.feed([launched(NEW_NODE, at(1, 13)), succeeded(NEW_NODE, at(1, 16))])
    assert world.state().proven_good is not None
    ship(world, reports_handler(world), [_reboot_failure(at(1, 16) + DAY_MS)])
    assert world.state().proven_good is not None


def test_a_reboots_failure_a_day_after_the_resolution_reopens_nothing() -> None:
    world = World()
    world.feed(ARTICLE[:6])
    world.person_sets(_every_boot_ready_check(), at(1, 13))
    GroupStore(world.table, TABLE).put_reports(
        [ran(NEW_NODE, at(1, 16)), ran(NEW_NODE, at(1, 17), script="ready-check")]
    )
    world.feed([launched(NEW_NODE, at(1, 14)), succeeded(NEW_NODE, at(1, 19))])
    assert world.published()[-1] == "LoopResolved"
    ship(world, reports_handler(world), [_reboot_failure(at(1, 19) + DAY_MS)])
    assert world.published()[-1] == "LoopResolved"


def resolved_on_its_own_configuration() -> World:
    """The article's loop ended on its own configuration (what it fetched was mended in place): a node whose
    reports show every script passed goes ACTIVE."""
    world = World()
    world.feed(ARTICLE[:6])
    GroupStore(world.table, TABLE).put_reports(
        [
            ran(NEW_NODE, at(1, 16), script="fail-terminate"),
            ran(NEW_NODE, at(1, 16)),
            ran(NEW_NODE, at(1, 17), script="ready-check"),
        ]
    )
    world.feed([launched(NEW_NODE, at(1, 14)), succeeded(NEW_NODE, at(1, 19))])
    assert world.published()[-1] == "LoopResolved"
    return world


def test_the_resolving_nodes_termination_days_later_in_the_scaling_log_reopens_nothing() -> None:
    """The loop ended on its own configuration (what it fetched was mended in place), and the node that
    ended it is TERMINATED/BOOTSTRAP_FAILED two days later (an EVERY_BOOT script failing on a reboot): no
    nodeReady script of the boot that ended the loop runs that late, so the LoopResolved stands; one
    failure is no loop."""
    world = resolved_on_its_own_configuration()
    world.feed([failed(NEW_NODE, at(1, 19) + 2 * DAY_MS)])
    assert world.published()[-1] == "LoopResolved"
    assert world.published().count("BootstrapLoopDetected") == 1
    assert world.state().episode is None


def test_failures_from_before_a_resolution_count_toward_no_later_episode() -> None:
    """The loop ended on its own configuration; later one more node fails among successes. The failures
    the LoopResolved ended are not counted again (they would make the group look intermittent now, and the
    new episode's id would be the ended one's)."""
    world = resolved_on_its_own_configuration()
    later = ["i-0later000000001", "i-0later000000002"]
    world.feed([launched(later[0], at(1, 20)), succeeded(later[0], at(1, 24))])
    world.feed([launched(later[1], at(1, 25)), failed(later[1], at(1, 29))])
    assert world.published().count("BootstrapLoopDetected") == 1
    assert world.state().episode is None


def test_a_busy_groups_fortnight_of_runs_that_did_not_fail_costs_the_detection_no_more_reads() -> None:
    """5,000 runs that did not fail fill the group's read after its failed runs: those are all read (they
    come first), so no failing instance is read again on its own."""
    marks = [
        {
            **REPORTED[0],
            "instance_id": f"i-0busy{n // 10:012d}",
            "script": f"s{n % 10}",
            "outcome": "succeeded",
            "exit_code": 0,
            "log_tail": "",
        }
        for n in range(RUNS_READ_MAX)
    ]
    world = World()
    GroupStore(world.table, TABLE).put_reports(NodeReport.model_validate(r) for r in [*marks, *REPORTED])
    world.feed(ARTICLE)
    [detected] = [d for t, d in world.bus.events() if t == "BootstrapLoopDetected"]
    assert detected["suspect"]["script"] == "fail-terminate"
    prefixes = {r["ExpressionAttributeValues"][":prefix"]["S"] for r in world.table.requests["Query"]}
    assert prefixes == {"R"}  # the group's runs, never one instance's


def _slow_first_ready_script(config: dict[str, Any], on_error: str) -> dict[str, Any]:
    """The configuration with a long nodeReady script (a cache warm-up) before its ready-check."""
    config = json.loads(json.dumps(config))
    ready = config["stages"]["nodeReady"]
    ready[0]["onError"] = on_error
    config["stages"]["nodeReady"] = [{**ready[0], "name": "warm-cache", "onError": "CONTINUE"}, *ready]
    return config


def test_a_nodeready_failure_after_a_long_first_script_still_unproves_the_configuration() -> None:
    world = World()
    world.person_sets(_slow_first_ready_script(REVERTED, "CONTINUE"), at(1, 10))
    GroupStore(world.table, TABLE).put_reports(
        [ran(NEW_NODE, at(1, 15)), ran(NEW_NODE, at(1, 18, 2), script="warm-cache")]
    )
    world.feed([launched(NEW_NODE, at(1, 13)), succeeded(NEW_NODE, at(1, 18))])
    assert world.state().proven_good is not None
    ship(world, reports_handler(world), [_ready_check_failed(at(1, 49, 3), "CONTINUE")])  # 31 min on
    assert world.state().proven_good is None


def _relabelled_reboot_failure(when_ms: int) -> dict[str, Any]:
    """A reboot's failure as this release's shipper labels it: boot 2, not the first boot."""
    return {**_ready_check_failed(when_ms, "CONTINUE"), "boot": 2, "first_boot": False}


def _booted_then_rebooted(world: World, launch_ms: int, reboot_ms: int, *, reports_first: bool) -> None:
    """NEW_NODE launched at `launch_ms` runs its first boot (a minute later), succeeds (5 min later) and
    fails an EVERY_BOOT script on a reboot at `reboot_ms`: that report stored before the scaling log's
    success is handled, or shipped after it."""
    reboot = _relabelled_reboot_failure(reboot_ms)
    first_boot = [ran(NEW_NODE, launch_ms + 2 * 60_000)]
    stored = [NodeReport.model_validate(reboot)] if reports_first else []
    GroupStore(world.table, TABLE).put_reports([*first_boot, *stored])
    world.feed([launched(NEW_NODE, launch_ms), succeeded(NEW_NODE, launch_ms + 5 * 60_000)])
    if not reports_first:
        ship(world, reports_handler(world), [reboot])


@pytest.mark.parametrize("reports_first", [True, False])
def test_a_reboots_failure_unproves_nothing_whichever_log_comes_first(reports_first: bool) -> None:
    """A reboot two minutes after ACTIVE whose EVERY_BOOT script fails: the same outcome whether the
    node's reports or the scaling log's success are handled first."""
    world = World()
    world.person_sets(_every_boot_ready_check(), at(1, 10))
    _booted_then_rebooted(world, at(1, 13), at(1, 20), reports_first=reports_first)
    assert world.state().proven_good is not None


@pytest.mark.parametrize("reports_first", [True, False])
def test_a_reboots_failure_contains_no_fixed_loop_whichever_log_comes_first(reports_first: bool) -> None:
    world = World()
    world.feed(ARTICLE[:6])
    world.person_sets(_every_boot_ready_check(), at(1, 13))
    _booted_then_rebooted(world, at(1, 14), at(1, 21), reports_first=reports_first)
    assert world.published()[-1] == "LoopResolved"


def test_a_success_of_a_node_launched_on_the_configuration_before_does_not_break_a_run_of_failures() -> None:
    """TERMINATE took effect at 01:00. A node launched at 00:58, on the configuration before, comes up
    between the failures of two nodes launched on TERMINATE: it says nothing of TERMINATE's boots, and the
    loop is told at the second failure, not one burnt instance later (in a group seen for the first time,
    whose configuration Lifeguard reads first to tell)."""
    world = World()
    old = "i-0old0000000000001"
    first, second = "i-0aaaaaaaaaaaaaaa1", "i-0aaaaaaaaaaaaaaa2"
    world.feed([launched(old, at(0, 58)), launched(first, at(1, 1)), failed(first, at(1, 4))])
    world.feed([launched(second, at(1, 6)), succeeded(old, at(1, 7)), failed(second, at(1, 10))])
    assert world.published() == ["BootstrapLoopDetected"]
    [(_, detail)] = world.bus.events()
    assert [f["instance_id"] for f in detail["failures"]] == [first, second]


@pytest.mark.parametrize("success_first", [True, False])
def test_a_fix_ends_the_loop_whether_its_success_or_an_old_nodes_late_failure_comes_first(
    success_first: bool,
) -> None:
    """A node launched on the looping configuration just before the owner's fix fails a minute after the
    fix's first node came up clean (a static group of one: no other boot follows). In either delivery order
    the loop is resolved: the old node's failure is of the configuration the fix replaced."""
    world = World()
    world.feed(LOOP)
    world.person_sets(REVERTED, at(1, 16))
    old, new = "i-0old0000000000001", "i-0new0000000000001"
    world.feed([launched(old, at(1, 15))])
    fix = [launched(new, at(1, 17)), succeeded(new, at(1, 21))]
    late = [failed(old, at(1, 22))]
    for batch in (fix, late) if success_first else (late, fix):
        world.feed(batch)
    assert world.published() == ["BootstrapLoopDetected", "LoopResolved"]
    assert world.state().episode is None


def _an_intermittent_episode_then_whole() -> World:
    """A static group of four (notify): a flaky mount fails half of the first boots (an intermittent
    episode), then the group is whole again and boots nothing more."""
    world = World(tags={"lifeguard:mode": "notify"})
    world.person_sets(REVERTED, at(1, 10))
    a, b, c, d = (f"i-0flaky00000000{n:03d}" for n in range(4))
    world.feed(
        [launched(x, at(2, 0)) for x in (a, b, c, d)]
        + [succeeded(a, at(2, 5)), failed(b, at(2, 6)), succeeded(c, at(2, 7)), failed(d, at(2, 8))]
    )
    e, f = "i-0flaky00000000004", "i-0flaky00000000005"
    world.feed([launched(e, at(2, 9)), launched(f, at(2, 9)), succeeded(e, at(2, 14)), failed(f, at(2, 15))])
    world.feed([launched("i-0flaky00000000006", at(2, 16)), succeeded("i-0flaky00000000006", at(2, 21))])
    assert [detail["kind"] for _, detail in world.bus.events()] == ["intermittent"]
    return world


def test_an_open_intermittent_episode_still_failing_now_and_then_a_day_later_is_not_told_again() -> None:
    """Its new failures, a day later on the same configuration, still come between successes (never
    `threshold` in a row): still intermittent, not told again as "became a loop" (a new revision, which
    the remediation may escalate)."""
    world = _an_intermittent_episode_then_whole()
    for n in range(8):
        instance = f"i-0more000000000{n:03d}"
        launch = at(2, 30) + DAY_MS + n * 6 * 60_000
        end = failed if n % 2 == 0 else succeeded
        world.feed([launched(instance, launch), end(instance, launch + 5 * 60_000)])
    told = [detail for _, detail in world.bus.events()]
    assert [(t["kind"], t["revision"]) for t in told] == [("intermittent", 1)]


def test_an_open_intermittent_episode_whose_failures_come_in_a_row_a_day_later_is_told_again_as_a_loop() -> (
    None
):
    """A static group of four (notify): a flaky mount fails half of the first boots (intermittent), then
    the group is whole again and boots nothing more, so the episode never sees three successes in a row.
    A day later, on the same configuration (the script's object overwritten in place), every new node
    fails: the loop is told, once, as a new revision of the episode."""
    world = _an_intermittent_episode_then_whole()
    for n in range(6):
        instance = f"i-0loop000000000{n:03d}"
        launch = at(2, 30) + DAY_MS + n * 6 * 60_000
        world.feed([launched(instance, launch), failed(instance, launch + 5 * 60_000)])
    told = [detail for _, detail in world.bus.events()]
    assert [(t["kind"], t["revision"]) for t in told] == [("intermittent", 1), ("loop", 2)]
    assert told[1]["episode_id"] == told[0]["episode_id"]
    assert "the intermittent failures became a loop" in told[1]["reason"]
    assert [f["instance_id"] for f in told[1]["failures"]] == ["i-0loop000000000000", "i-0loop000000000001"]


def test_a_broken_change_to_a_group_of_two_is_told_at_its_two_failures_despite_a_stale_cached_config() -> (
    None
):
    """A static group of two booted clean at 01:17 on the configuration of 01:10 (Lifeguard read it then,
    to prove it). At 01:30 someone sets TERMINATE: PCS replaces both nodes, and both fail. Nothing has
    booted on TERMINATE: two TERMINATE failures of fresh instances, as the article's loop, must be told
    at the second failure."""
    world = World()
    world.person_sets(REVERTED, at(1, 10))
    a, b = "i-0good00000000001", "i-0good00000000002"
    world.feed(
        [launched(a, at(1, 12)), launched(b, at(1, 12)), succeeded(a, at(1, 17)), succeeded(b, at(1, 17, 30))]
    )
    assert world.state().config is not None  # read to prove it
    world.person_sets(TERMINATE, at(1, 30))
    c, d = "i-0bad000000000001", "i-0bad000000000002"
    world.feed([launched(c, at(1, 31)), launched(d, at(1, 31))])
    world.feed([failed(c, at(1, 36))])
    world.feed([failed(d, at(1, 36, 30))])
    assert world.published() == ["BootstrapLoopDetected"]


def test_an_open_intermittent_episodes_loop_a_day_later_is_told_when_its_two_failures_come_in_one_batch() -> (
    None
):
    """As test_an_open_intermittent_episode_whose_failures_come_in_a_row_..., but the loop's first two
    nodes (launches and failures) are delivered in one batch: the same records, the same verdict."""
    world = _an_intermittent_episode_then_whole()
    rows = []
    for n in range(2):
        instance = f"i-0loop000000000{n:03d}"
        launch = at(2, 30) + DAY_MS + n * 6 * 60_000
        rows += [launched(instance, launch), failed(instance, launch + 5 * 60_000)]
    world.feed(rows)
    told = [detail for _, detail in world.bus.events()]
    assert [(t["kind"], t["revision"]) for t in told] == [("intermittent", 1), ("loop", 2)]


@pytest.mark.parametrize(
    ("signals", "failed_at", "fingerprint", "revoked"),
    [
        (["scaling_log"], 1792545162000, "fp-good", True),  # looped since it was proven
        (["scaling_log"], 1792540000000, "fp-good", False),  # looped before: the proof came after
        (["node_reports"], 1792545162000, "fp-good", False),  # the nodes' reports alone decide nothing
        (["scaling_log"], 1792545162000, "fp-other", False),  # another configuration looped
    ],
)
def test_a_proven_configuration_the_scaling_log_shows_looping_since_is_proven_no_more(
    signals: list[str], failed_at: int, fingerprint: str, revoked: bool
) -> None:
    from lifeguard.group_state import Episode, Failure, GroupState, ProvenGood
    from lifeguard.handlers.containment import revoke_proof_of_looped_config

    proof = ProvenGood(
        fingerprint="fp-good",
        node_lifecycle_actions={"stages": {}},
        modified_at=1792540000000,
        proven_at=1792543700000,
        instance_id="i-0aaaaaaaaaaaaaaa1",
    )
    state = GroupState(cluster_id="pcs_abc123de45", group_id="pcs_abcdef01", proven_good=proof)
    state.episode = Episode(
        episode_id="ep-1",
        kind="loop",
        opened_at=failed_at,
        config_fingerprint=fingerprint,
        failures=[Failure(instance_id="i-059b4b99b4f2e9739", event_timestamp=failed_at)],
        signals=signals,
    )
    assert revoke_proof_of_looped_config(state) is revoked
    assert (state.proven_good is None) is revoked


def _script(name: str, **fields: Any) -> dict[str, Any]:
    return {
        "name": name,
        "scriptSource": {"scriptLocation": f"s3://lca-scripts-example/scripts/{name}.sh"},
        **fields,
    }


@pytest.mark.parametrize("outcome", ["failed", "succeeded"])
def test_a_node_whose_reports_show_a_script_failed_under_continue_proves_nothing(outcome: str) -> None:
    """No script of the configuration stops a sequence, so a success alone would prove it (a group whose
    nodes send no reports); but this node reported a script failing (under CONTINUE, so PCS logged it
    ACTIVE): a configuration is proven good only by a boot whose reports show no failed script."""
    world = World()
    config = {
        "stages": {
            "nodeBootstrapped": [
                _script("setup", onError="TERMINATE"),
                _script("optional-tool", onError="CONTINUE"),
            ]
        }
    }
    world.person_sets(config, at(1, 13))
    node = "i-0b00000000000001"
    base = stream("article-terminate-node-reports")[0]
    runs = [
        {**base, "script": "setup", "on_error": "TERMINATE", "outcome": "succeeded", "exit_code": 0},
        {**base, "script": "optional-tool", "on_error": "CONTINUE", "outcome": outcome},
    ]
    GroupStore(world.table, TABLE).put_reports(
        [
            NodeReport.model_validate(
                {
                    **run,
                    "instance_id": node,
                    "exit_code": 1 if run["outcome"] == "failed" else 0,
                    "log_tail": "",
                    "started_at": at(1, 16) // 1000,
                    "ended_at": at(1, 16) // 1000,
                }
            )
            for run in runs
        ]
    )
    world.feed([launched(node, at(1, 14)), succeeded(node, at(1, 19))])
    world.feed([succeeded(node, at(1, 21))])  # a minute on: the configuration is read, and judged
    proof = world.state().proven_good
    if outcome == "failed":
        assert proof is None
    else:
        assert proof is not None
        assert proof.instance_id == node
        assert proof.fingerprint == fingerprint_of(config)


def test_a_ready_check_of_pcss_default_onerror_failing_after_active_takes_the_proof_back() -> None:
    """Most configurations leave onError out (TERMINATE, PCS's default): the proving node's report that
    such a nodeReady check failed (the node terminated after its ACTIVE) takes its proof back, as one of
    an onError written out does."""
    world = World()
    config = {
        "stages": {
            "nodeBootstrapped": [_script("setup", onError="TERMINATE")],
            "nodeReady": [_script("mount-check")],
        }
    }
    world.person_sets(config, at(1, 13))
    node = "i-0b00000000000005"
    world.feed([launched(node, at(1, 14)), succeeded(node, at(1, 19))])
    world.feed([succeeded(node, at(1, 21))])  # a minute on: read, and proven on the success alone
    assert world.state().proven_good is not None
    store = GroupStore(world.table, TABLE)
    updater = GroupUpdater(store, EventPublisher(world.bus, BUS, sleep=lambda _: None), clock=world.now)
    reports = NodeReportsHandler(store, updater, DetectionSettings("quarantine", 2, 60), clock=world.now)
    report = {
        **stream("article-terminate-node-reports")[0],
        "instance_id": node,
        "stage": "nodeReady",
        "script": "mount-check",
        "on_error": "TERMINATE",
        "started_at": at(1, 20) // 1000,
        "ended_at": at(1, 20) // 1000,
    }
    reports.handle_messages([(json.dumps(report), "stream:1")])
    assert world.state().proven_good is None


def test_a_boot_proves_a_configuration_that_hides_failures_once_its_bootstrapped_runs_are_reported() -> None:
    """Scripts under STOP_SEQUENCE hide a failure behind BOOTSTRAP_SUCCESS: a proof needs a report of each
    nodeBootstrapped one, all passed. A nodeReady one runs after ACTIVE and is reported later: its run is
    not waited for (its failure, when it comes, takes the proof back)."""
    world = World()
    config = {
        "stages": {
            "nodeBootstrapped": [_script("mount", onError="STOP_SEQUENCE")],
            "nodeReady": [_script("warm-cache", onError="STOP_SEQUENCE")],
        }
    }
    world.person_sets(config, at(1, 13))
    node = "i-0b00000000000009"
    mount = ran(node, at(1, 16), script="mount", stage="nodeBootstrapped", on_error="STOP_SEQUENCE")
    GroupStore(world.table, TABLE).put_reports([mount])
    world.feed([launched(node, at(1, 14)), succeeded(node, at(1, 19))])
    world.feed([succeeded(node, at(1, 21))])  # a minute on: the configuration is read, and judged
    proof = world.state().proven_good
    assert proof is not None
    assert proof.instance_id == node


# -- a change the cooldown held back is decided again once it is over, if the loop goes on


def _held_back_by_the_cooldown(world: World) -> tuple[dict[str, Any], int]:
    """The article's loop, 10 minutes after a change Lifeguard made to the group for an earlier loop (mended
    since by its owner): the remediation holds its quarantine back for the cooldown. Its skip's detail, and
    when the hold ends (epoch ms)."""
    earlier = at(1, 2, 42) / 1000
    change_in_ledger(world, earlier, "ep-earlier0000000", "revert", before=REVERTED, after=REVERTED)
    world.feed(ARTICLE[:6])
    skipped = remediate_last_detection(world)
    assert skipped["reason"].startswith("Cooldown: Lifeguard changed this group 10 min ago")
    return skipped, int((earlier + 1800) * 1000)


def test_a_loop_held_back_by_the_cooldown_is_decided_again_at_its_first_failure_after_it() -> None:
    """A loop held back by the cooldown was never acted on: the skip was its revision's decision for good,
    and the group looped on all night after a page nobody answered."""
    world = World()
    skipped, until = _held_back_by_the_cooldown(world)
    assert (world.published(), skipped["revision"]) == (["BootstrapLoopDetected", "RemediationSkipped"], 1)
    world.feed([launched("i-0000000000000000a", until - 600_000), failed("i-0000000000000000a", until)])
    assert world.published() == ["BootstrapLoopDetected", "RemediationSkipped"]  # the hold is not over
    episode = world.state().episode
    assert episode is not None
    assert (episode.hold_read, episode.held_until, episode.revision) == (1, until, 1)
    world.feed([launched("i-0000000000000000b", until - 300_000), failed("i-0000000000000000b", until + 1)])
    assert world.published() == ["BootstrapLoopDetected", "RemediationSkipped", "BootstrapLoopDetected"]
    again = world.bus.events()[-1][1]
    assert again["revision"] == 2
    assert again["reason"].startswith(
        f"the loop went on after the hold on Lifeguard's change ended at {utc(until)}: 4 instances "
        "TERMINATED/BOOTSTRAP_FAILED within 60 min, on the same configuration; decided again"
    )
    applied = remediate_last_detection(world)
    assert (applied["action"], applied["revision"]) == ("quarantine", 2)
    assert world.published()[-1] == "RemediationApplied"


def test_a_decision_not_made_yet_is_read_again_at_a_later_batch_once_a_batch() -> None:
    """The loop's failures before its remediation decided (or while its decision failed and waits for the
    retry) read the decision again, once a batch, until one is made."""
    world = World()
    world.feed(ARTICLE[:6])
    store = RemediationStore(world.table, TABLE)
    episode = world.state().episode
    assert episode is not None
    rows = [launched(f"i-00000000000000{n:02x}", at(1, 20 + n)) for n in range(3)]
    rows += [failed(f"i-00000000000000{n:02x}", at(1, 21 + n)) for n in range(3)]
    world.feed(rows)  # three failures, one batch
    assert decision_reads(world) == 1
    assert world.state().episode.hold_read is None  # type: ignore[union-attr]
    store.save_decision(
        CLUSTER, GROUP, (episode.episode_id, 1), decision=Decision(status="failed"), now=world.now()
    )
    world.feed([launched("i-000000000000001a", at(1, 30)), failed("i-000000000000001a", at(1, 31))])
    assert world.state().episode.hold_read is None  # type: ignore[union-attr]
    store.save_decision(
        CLUSTER, GROUP, (episode.episode_id, 1), decision=Decision(status="skipped"), now=world.now()
    )
    world.feed([launched("i-000000000000001b", at(1, 40)), failed("i-000000000000001b", at(1, 41))])
    read = world.state().episode
    assert read is not None
    assert (read.hold_read, read.held_until) == (1, None)
    assert decision_reads(world) == 3
    world.feed([launched("i-000000000000001c", at(1, 50)), failed("i-000000000000001c", at(1, 51))])
    assert decision_reads(world) == 3  # decided, with no hold: not read again
    assert world.published() == ["BootstrapLoopDetected"]


def decision_reads(world: World) -> int:
    """How many times the remediation's decisions were read."""
    reads = world.table.requests.get("GetItem", [])
    return sum(1 for read in reads if read["Key"]["sk"]["S"].startswith("DECISION#"))


def test_a_hold_over_while_the_failures_are_no_loop_waits_for_the_next_that_is() -> None:
    """The loop's failure after the hold, alone in the window (the one before it fell out): nothing to
    decide again yet, and the hold is kept for the failure that makes it a loop again."""
    world = World()
    skipped, until = _held_back_by_the_cooldown(world)
    late = until + 2 * 3_600_000  # two hours on: the article's failures are out of the 60-minute window
    world.feed([launched("i-0000000000000000e", late - 300_000), failed("i-0000000000000000e", late)])
    episode = world.state().episode
    assert episode is not None
    assert (episode.revision, episode.held_until) == (1, until)
    assert world.published() == ["BootstrapLoopDetected", "RemediationSkipped"]
    world.feed(
        [launched("i-0000000000000000f", late + 60_000), failed("i-0000000000000000f", late + 360_000)]
    )
    assert world.published()[-1] == "BootstrapLoopDetected"
    assert world.bus.events()[-1][1]["revision"] == 2
    assert skipped["revision"] == 1


def test_a_damaged_decision_item_holds_nothing_back_and_the_group_is_still_judged() -> None:
    """A decision item edited by hand made every batch with a failure of the group skip it as an unreadable
    state (its records dropped, the loop blind) once scaling_events read decisions: it holds nothing back."""
    world = World()
    world.feed(ARTICLE[:6])
    episode = world.state().episode
    assert episode is not None
    world.table.put_item(
        TableName=TABLE,
        Item={
            "pk": {"S": f"GROUP#{CLUSTER}#{GROUP}"},
            "sk": {"S": f"DECISION#{episode.episode_id}#0001"},
            "doc": {"S": '{"status": 7}'},
        },
    )
    summary = world.feed([launched("i-00000000000000a1", at(1, 20)), failed("i-00000000000000a1", at(1, 25))])
    assert (summary.skipped, summary.unreadable_groups) == (0, 0)
    state = world.state()
    assert "i-00000000000000a1" in state.outcomes
    assert state.episode is not None
    assert (state.episode.hold_read, state.episode.held_until) == (1, None)


def test_records_that_cannot_be_read_are_counted_apart_for_their_alarm() -> None:
    """RecordsSkippedAlarm pages when most records cannot be read (PCS's format changed): records skipped
    for anything else (a group PCS does not list, a damaged state) are not counted there."""
    world = World()
    counted: list[tuple[str, float]] = []
    handler = build_scaling_events(
        Wiring(
            GroupStore(world.table, TABLE),
            PcsGateway(world.api),
            GroupUpdater(GroupStore(world.table, TABLE), EventPublisher(world.bus, BUS), clock=world.now),
            DetectionSettings(mode="quarantine", threshold=2, window_minutes=60),
        ),
        metric=lambda name, value: counted.append((name, value)),
        clock=world.now,
    )
    world.clock.set(datetime.fromtimestamp(ARTICLE[0]["event_timestamp"] / 1000, UTC))
    other = {**ARTICLE[0], "compute_node_group_id": "pcs_notinpcs1"}  # a group PCS does not list
    messages = [json.dumps(ARTICLE[0]), "not json", '{"status_code": 7}', json.dumps(other)]
    summary = handler.handle_messages((message, "(test)") for message in messages)
    assert summary.skipped == 3
    assert dict(counted)["RecordsUnreadable"] == 2
    assert dict(counted)["RecordsSkipped"] == 3
    # A batch that fails (for Lambda's retry) counts neither: its retry counts both, once.
    counted.clear()
    world.table.fail["TransactWriteItems"] = [client_error("InternalServerError", "TransactWriteItems")] * 5
    failing = [json.dumps(launched("i-00000000000000b1", ARTICLE[0]["event_timestamp"])), "not json"]
    with pytest.raises(AwsCallError):
        handler.handle_messages((message, "(test)") for message in failing)
    assert [name for name, _ in counted if name.startswith("Records")] == []
