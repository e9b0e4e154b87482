"""The scaling_events and node_reports handlers against the local AWS over HTTP: DynamoDB, EventBridge and
SQS in moto, PCS in the local endpoint on a clock that follows the records."""

from __future__ import annotations

import json
import random
import threading
import zlib
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest

from lifeguard.aws.clients import aws_client
from lifeguard.aws.eventbridge import EventPublisher
from lifeguard.aws.pcs import PcsGateway
from lifeguard.event_contract import DETAIL_KEYS
from lifeguard.handlers.node_reports import NodeReportsHandler
from lifeguard.handlers.scaling_events import ScalingEventsHandler
from lifeguard.handlers.updater import GroupUpdater
from lifeguard.log_subscription import encode_subscription
from lifeguard.scaling_log import PASSED_OVER
from lifeguard.store import groups
from lifeguard.store.groups import GroupStore
from lifeguard.store.table import group_key, item_key
from lifeguard.wiring import Wiring, build_node_reports, build_scaling_events
from lifeguard_cli.local import LocalPcs, ManualClock, serve_local_pcs
from lifeguard_cli.local.stack import LocalStack
from tests.conftest import ARTICLE_SUSPECT, EVENTS, load_event
from tests.integration.conftest import deploy

pytestmark = pytest.mark.integration
CLUSTER, GROUP = "pcs_abc123de45", "pcs_abcdef01"
SCALING_STREAM = f"AWSLogs/PCS/{CLUSTER}/node_lifecycle.log"
CONFIG_TIME = datetime(2026, 10, 21, 1, 0, tzinfo=UTC)  # the TERMINATE config took effect before 01:04:45


def stream(name: str) -> list[dict[str, Any]]:
    lines = (EVENTS / "streams" / f"{name}.jsonl").read_text().splitlines()
    return [json.loads(line) for line in lines if line.strip()]


def records_only(rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
    return [row for row in rows if "lifeguard_replay" not in row]


@dataclass
class Env:
    scaling: ScalingEventsHandler
    reports: NodeReportsHandler
    stack: LocalStack
    pcs: LocalPcs
    clock: ManualClock
    local: Any
    wiring: Wiring
    pcs_client: Any

    def now(self) -> float:
        """The invocations' clock: the stream's, as the local PCS has it."""
        return self.clock().timestamp()

    def catch_up(self, epoch_ms: int) -> None:
        """Records are delivered as they happen: the clock moves on to the newest (never backwards)."""
        self.clock.set(datetime.fromtimestamp(epoch_ms / 1000, UTC))

    def feed(self, rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
        """Deliver records as one subscription batch; returns the events the invocation published."""
        messages = [(row["event_timestamp"], json.dumps(row)) for row in rows]
        self.catch_up(max(row["event_timestamp"] for row in rows))
        summary = self.scaling.handle_event(
            encode_subscription("/aws/vendedlogs/pcs", SCALING_STREAM, messages)
        )
        return summary.to_dict()["events"]

    def feed_reports(self, rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
        messages = [(row["ended_at"] * 1000, json.dumps(row)) for row in rows]
        self.catch_up(max(row["ended_at"] * 1000 for row in rows))
        event = encode_subscription(
            "/pcs-lifeguard/node-reports", f"{CLUSTER}/{rows[0]['instance_id']}", messages
        )
        return self.reports.handle_event(event).to_dict()["events"]

    def bus_events(self) -> list[dict[str, Any]]:
        return self.stack.received_events(self.local.client("sqs"))

    def get_calls(self) -> int:
        return sum(1 for call in self.pcs.calls if call.operation == "GetComputeNodeGroup")


@pytest.fixture
def env(local: Any, monkeypatch: pytest.MonkeyPatch) -> Iterator[Env]:
    clock = ManualClock(CONFIG_TIME)
    pcs = LocalPcs(clock=clock, update_seconds=60)
    with serve_local_pcs(pcs) as server:
        pcs.add_cluster("lca", cluster_id=CLUSTER)
        pcs.add_compute_node_group(
            CLUSTER,
            "lca-static",
            group_id=GROUP,
            node_lifecycle_actions=load_event("configs/article-terminate.json"),
        )
        monkeypatch.setenv("LIFEGUARD_DEFAULT_MODE", "quarantine")
        deployed = deploy(local, monkeypatch, server.endpoint_url, "lg")
        stack, wiring = deployed.stack, deployed.wiring
        monkeypatch.setenv("LIFEGUARD_TABLE", stack.table)
        monkeypatch.setenv("LIFEGUARD_EVENT_BUS", stack.event_bus)
        now = lambda: clock().timestamp()  # noqa: E731 - the invocations run on the stream's clock
        yield Env(
            build_scaling_events(wiring, clock=now),
            build_node_reports(wiring, clock=now),
            stack,
            pcs,
            clock,
            local,
            wiring,
            aws_client("pcs", server.endpoint_url),
        )


def test_the_articles_terminate_loop_is_detected_once_and_attributed(env: Env) -> None:
    rows = stream("article-terminate-loop")
    events = env.feed(rows)
    assert [e["detail-type"] for e in events] == ["BootstrapLoopDetected"]
    detail = events[0]["detail"]
    assert set(DETAIL_KEYS) <= set(detail)
    assert (detail["cluster_id"], detail["compute_node_group_id"], detail["kind"]) == (CLUSTER, GROUP, "loop")
    assert detail["compute_node_group_name"] == "lca-static"  # as PCS names it, read with its configuration
    assert [f["instance_id"] for f in detail["failures"]] == ["i-059b4b99b4f2e9739", "i-06644f6e5a2b001c9"]
    assert detail["suspect"] is None
    assert detail["mode"] == "quarantine"
    assert detail["config_before"] == load_event("configs/article-terminate.json")
    assert detail["revision"] == 1
    # The reports arrive after the detection: the same episode, attributed, at the next revision.
    enriched = env.feed_reports(stream("article-terminate-node-reports"))
    assert [e["detail-type"] for e in enriched] == ["BootstrapLoopDetected"]
    again = enriched[0]["detail"]
    assert again["episode_id"] == detail["episode_id"]
    assert again["revision"] == 2
    assert again["suspect"] == ARTICLE_SUSPECT
    on_bus = env.bus_events()
    assert [(e["detail-type"], e["detail"]["revision"]) for e in on_bus] == [
        ("BootstrapLoopDetected", 1),
        ("BootstrapLoopDetected", 2),
    ]
    assert all(e["source"] == "lifeguard" for e in on_bus)
    # More reports of the same runs change nothing.
    assert env.feed_reports(stream("article-terminate-node-reports")) == []


def test_reports_that_arrive_first_detect_the_loop_and_the_scaling_log_bearing_it_out_announces_it_again(
    env: Env,
) -> None:
    [event] = env.feed_reports(stream("article-terminate-node-reports"))
    assert event["detail-type"] == "BootstrapLoopDetected"
    assert event["detail"]["suspect"]["script"] == "fail-terminate"
    assert event["detail"]["signals"] == ["node_reports"]
    # The same loop, the episode open: the scaling log bears it out, and only then may it be acted on.
    [borne_out] = env.feed(stream("article-terminate-loop"))
    assert (borne_out["detail"]["episode_id"], borne_out["detail"]["revision"]) == (
        event["detail"]["episode_id"],
        2,
    )
    assert borne_out["detail"]["signals"] == ["scaling_log", "node_reports"]
    assert env.feed(stream("article-terminate-loop")) == []  # delivered again: nothing new
    assert [published["detail"]["revision"] for published in env.bus_events()] == [1, 2]


def test_the_same_stream_three_times_or_shuffled_gives_one_event(env: Env) -> None:
    rows = stream("article-terminate-loop")
    published = []
    for seed in range(3):
        shuffled = rows[:]
        random.Random(seed).shuffle(shuffled)
        published += env.feed(shuffled)
    assert [e["detail-type"] for e in published] == ["BootstrapLoopDetected"]
    assert len(env.bus_events()) == 1


def container(env: Env) -> ScalingEventsHandler:
    """A controller of its own, as a separate Lambda container has (its own clients and remembered states)."""
    store = GroupStore(aws_client("dynamodb", env.local.moto.endpoint_url), env.stack.table)
    publisher = EventPublisher(aws_client("events", env.local.moto.endpoint_url), env.stack.event_bus)
    return ScalingEventsHandler(
        store, env.wiring.pcs, GroupUpdater(store, publisher), env.wiring.defaults, clock=env.now
    )


def test_eight_concurrent_invocations_of_one_stream_make_one_event(env: Env) -> None:
    rows = stream("article-terminate-loop") * 2
    random.Random(7).shuffle(rows)
    env.catch_up(max(row["event_timestamp"] for row in rows))
    slices = [rows[i::8] for i in range(8)]
    results: list[list[dict[str, Any]]] = [[] for _ in slices]
    errors: list[BaseException] = []
    barrier = threading.Barrier(len(slices))
    containers = [container(env) for _ in slices]

    def invoke(index: int) -> None:
        barrier.wait()
        messages = [(row["event_timestamp"], json.dumps(row)) for row in slices[index]]
        event = encode_subscription("/aws/vendedlogs/pcs", SCALING_STREAM, messages)
        try:
            results[index] = containers[index].handle_event(event).to_dict()["events"]
        except BaseException as exc:  # noqa: BLE001 - surfaced by the assertion below
            errors.append(exc)

    threads = [threading.Thread(target=invoke, args=(i,)) for i in range(len(slices))]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert errors == []
    published = [e for result in results for e in result]
    assert [e["detail-type"] for e in published] == ["BootstrapLoopDetected"]
    assert len(env.bus_events()) == 1
    state = env.wiring.store.load(CLUSTER, GROUP)
    assert state.episode is not None
    assert sorted(state.outcomes) == ["i-059b4b99b4f2e9739", "i-06644f6e5a2b001c9"]


def test_a_success_resolves_the_loop_and_proves_the_reverted_config_good(env: Env) -> None:
    rows = stream("article-terminate-revert")
    before, control, after = rows[:7], rows[7]["lifeguard_replay"], rows[8:]
    assert [e["detail-type"] for e in env.feed(before)] == ["BootstrapLoopDetected"]
    env.clock.set(datetime.fromtimestamp(control["at"] / 1000, UTC))
    env.pcs_client.update_compute_node_group(
        clusterIdentifier=CLUSTER,
        computeNodeGroupIdentifier=GROUP,
        nodeLifecycleActions=control["update_config"],
    )
    env.clock.set(datetime.fromtimestamp(after[-1]["event_timestamp"] / 1000, UTC))
    events = env.feed(after)
    assert [e["detail-type"] for e in events] == ["LoopResolved"]
    assert "i-0c1d2e3f4a5b6c7d8 (lca-static-1) bootstrapped successfully" in events[0]["detail"]["reason"]
    state = env.wiring.store.load(CLUSTER, GROUP)
    assert state.episode is None
    assert state.proven_good is not None
    assert state.proven_good.node_lifecycle_actions == load_event("configs/article-reverted.json")
    assert state.proven_good.instance_id == "i-0c1d2e3f4a5b6c7d8"


def test_failures_of_nodes_launched_before_a_config_change_never_detect_again(env: Env) -> None:
    rows = records_only(stream("article-terminate-loop"))
    launches = [r for r in rows if r["status_code"] == "LAUNCHED"]
    failures = [r for r in rows if r["reason_code"] == "BOOTSTRAP_FAILED"]
    assert env.feed(launches) == []
    # The group is changed (as a remediation would) before the failures of the old nodes arrive.
    env.clock.set(datetime(2026, 10, 21, 1, 16, tzinfo=UTC))
    env.pcs_client.update_compute_node_group(
        clusterIdentifier=CLUSTER,
        computeNodeGroupIdentifier=GROUP,
        nodeLifecycleActions=load_event("configs/article-stop-sequence.json"),
    )
    assert env.feed(failures) == []
    assert env.wiring.store.load(CLUSTER, GROUP).episode is None


def test_healthy_records_need_no_pcs_call_and_unneeded_records_no_aws_call(env: Env) -> None:
    rows = stream("healthy-scale-up")
    calls_before = env.wiring.store.calls
    registered = [r for r in rows if r["status_code"] == "REGISTERED"]
    assert env.feed(registered) == []
    assert env.wiring.store.calls == calls_before  # nothing to keep: no DynamoDB call either
    assert env.get_calls() == 0


def test_success_records_read_pcs_at_most_once_per_group_per_minute(env: Env) -> None:
    base = stream("healthy-scale-up")[0]
    rows = []
    for n in range(40):  # 40 nodes bootstrap within 2 minutes, in batches of 10
        instance = f"i-0f{n:015x}"
        rows.append(
            {
                **base,
                "compute_node_group_id": GROUP,
                "status_code": "ACTIVE",
                "reason_code": "BOOTSTRAP_SUCCESS",
                "event_timestamp": int(datetime(2026, 10, 21, 2, 0, tzinfo=UTC).timestamp() * 1000)
                + n * 3000,
                "details": {"instance_id": instance},
            }
        )
    for start in range(0, 40, 10):
        env.feed(rows[start : start + 10])
    assert env.get_calls() == 2  # at 02:00:00 and at 02:01:00
    # And nothing else but the listing that found the group at its first sight.
    assert [c.operation for c in env.pcs.calls] == ["ListComputeNodeGroups"] + ["GetComputeNodeGroup"] * 2
    state = env.wiring.store.load(CLUSTER, GROUP)
    assert state.proven_good is not None
    # The second read found the group as it was: DynamoDB holds its time on its own, the rest as it was.
    item = aws_client("dynamodb", env.local.moto.endpoint_url).get_item(
        TableName=env.stack.table, Key=item_key(group_key(CLUSTER, GROUP), "STATE")
    )["Item"]
    second_read = rows[29]["event_timestamp"]
    assert item["checked_at"] == {"N": str(second_read)}
    assert item["checked_version"] == item["version"]
    body = json.loads(zlib.decompress(item["state"]["B"]))
    assert body["config"]["checked_at"] == rows[9]["event_timestamp"]
    assert state.config is not None
    assert state.config.checked_at == second_read
    # A change of the rest (one node replaced as unhealthy) writes it whole, and the time goes back in it.
    env.feed(
        [
            {
                **rows[0],
                "status_code": "TERMINATED",
                "reason_code": "UNHEALTHY_NODE",
                "event_timestamp": second_read + 60_000,
            }
        ]
    )
    item = aws_client("dynamodb", env.local.moto.endpoint_url).get_item(
        TableName=env.stack.table, Key=item_key(group_key(CLUSTER, GROUP), "STATE")
    )["Item"]
    assert "checked_at" not in item
    assert "checked_version" not in item
    body = json.loads(zlib.decompress(item["state"]["B"]))
    assert (body["config"]["checked_at"], list(body["unhealthy"])) == (second_read, ["i-0f000000000000000"])


def test_capacity_shortage_and_malformed_records_are_counted_not_acted_on(env: Env) -> None:
    rows = stream("capacity-shortage")
    for row in rows:
        row["compute_node_group_id"] = GROUP
    messages = [(r["event_timestamp"], json.dumps(r)) for r in rows]
    messages.insert(1, (rows[0]["event_timestamp"], "{not json"))
    messages.insert(2, (rows[0]["event_timestamp"], json.dumps({"status_code": "TERMINATED"})))
    env.catch_up(rows[-1]["event_timestamp"])
    summary = env.scaling.handle_event(encode_subscription("/aws/vendedlogs/pcs", SCALING_STREAM, messages))
    assert (summary.records, summary.skipped, summary.launch_failures, summary.events) == (6, 2, 4, [])
    assert env.get_calls() == 0


def test_a_bad_record_does_not_stop_the_rest_of_its_batch(env: Env) -> None:
    rows = stream("article-terminate-loop")
    messages = [(r["event_timestamp"], json.dumps(r)) for r in rows]
    messages.insert(3, (0, "\x00garbage"))
    messages.append((0, json.dumps({**rows[0], "status_code": "HIBERNATED"})))
    env.catch_up(rows[-1]["event_timestamp"])
    summary = env.scaling.handle_event(encode_subscription("/aws/vendedlogs/pcs", SCALING_STREAM, messages))
    assert (summary.skipped, summary.unknown_codes) == (1, 1)
    assert [e.detail_type for e in summary.events] == ["BootstrapLoopDetected"]


def test_control_messages_and_foreign_events_are_ignored(env: Env) -> None:
    control = load_event("subscriptions/control-message.json")
    assert env.scaling.handle_event(control).to_dict() == env.scaling.handle_event(control).to_dict()
    assert env.scaling.handle_event(control).records == 0
    assert env.scaling.handle_event({"Records": []}).skipped == 1


def test_a_group_tagged_off_is_left_alone(env: Env) -> None:
    arn = env.pcs.add_compute_node_group(CLUSTER, "quiet", group_id="pcs_quiet0001")["arn"]
    env.pcs_client.tag_resource(resourceArn=arn, tags={"lifeguard:mode": "off"})
    rows = [{**r, "compute_node_group_id": "pcs_quiet0001"} for r in stream("article-terminate-loop")]
    assert env.feed(rows) == []


def test_the_tagged_threshold_applies(env: Env) -> None:
    arn = env.pcs.add_compute_node_group(CLUSTER, "patient", group_id="pcs_patient01")["arn"]
    env.pcs_client.tag_resource(
        resourceArn=arn, tags={"lifeguard:threshold": "3", "lifeguard:mode": "revert"}
    )
    rows = [{**r, "compute_node_group_id": "pcs_patient01"} for r in stream("article-terminate-loop")]
    assert env.feed(rows) == []
    third = {
        **rows[2],
        "event_timestamp": rows[-1]["event_timestamp"] + 60_000,
        "details": {"instance_id": "i-0third00000000000"},
    }
    launch = {**rows[0], "event_timestamp": third["event_timestamp"] - 300_000, "details": third["details"]}
    [event] = env.feed([launch, third])
    assert (event["detail"]["mode"], len(event["detail"]["failures"])) == ("revert", 3)


def test_an_intermittent_group_is_detected(env: Env) -> None:
    env.pcs.add_compute_node_group(CLUSTER, "cpu-dy", group_id="pcs_cpu00004")
    events = env.feed(stream("intermittent"))
    assert [(e["detail-type"], e["detail"]["kind"]) for e in events] == [
        ("BootstrapLoopDetected", "intermittent")
    ]
    assert len(events[0]["detail"]["failures"]) == 3  # detected at S F S F S F, as record by record


class BrokenEvents:
    """An EventBridge client whose PutEvents fails: the events must wait in the outbox, not vanish."""

    def put_events(self, **kwargs: Any) -> dict[str, Any]:
        from botocore.exceptions import EndpointConnectionError

        raise EndpointConnectionError(endpoint_url="http://127.0.0.1:9")


def test_events_that_could_not_be_published_are_published_later(env: Env) -> None:
    from lifeguard.aws.eventbridge import EventPublisher
    from lifeguard.errors import AwsCallError

    broken = GroupUpdater(
        env.wiring.store, EventPublisher(BrokenEvents(), env.stack.event_bus, sleep=lambda s: None)
    )
    failing = ScalingEventsHandler(
        env.wiring.store, env.wiring.pcs, broken, env.wiring.defaults, clock=env.now
    )
    rows = stream("article-terminate-loop")
    env.catch_up(rows[-1]["event_timestamp"])
    messages = [(r["event_timestamp"], json.dumps(r)) for r in rows]
    with pytest.raises(AwsCallError):
        failing.handle_event(encode_subscription("/aws/vendedlogs/pcs", SCALING_STREAM, messages))
    assert env.bus_events() == []
    assert len(env.wiring.store.load(CLUSTER, GROUP).outbox) == 1
    # The next invocation for the group, once the event is stale, publishes it.
    later = GroupUpdater(env.wiring.store, env.wiring.updater.publisher, clock=lambda: 4_000_000_000.0)
    recovering = ScalingEventsHandler(
        env.wiring.store, env.wiring.pcs, later, env.wiring.defaults, clock=env.now
    )
    recovering_events = recovering.handle_event(
        encode_subscription("/aws/vendedlogs/pcs", SCALING_STREAM, messages[:1])
    ).to_dict()["events"]
    assert [e["detail-type"] for e in recovering_events] == ["BootstrapLoopDetected"]
    assert [e["detail-type"] for e in env.bus_events()] == ["BootstrapLoopDetected"]
    assert env.wiring.store.load(CLUSTER, GROUP).outbox == []


class StoppedAtTimeout(BaseException):
    """Lambda ending an invocation at its Timeout: no `except` of the handler runs."""


class HangingEvents:
    """PutEvents still being retried (EventBridge unreachable) when the invocation's time runs out."""

    def put_events(self, **kwargs: Any) -> dict[str, Any]:
        raise StoppedAtTimeout


def test_events_of_an_invocation_stopped_while_publishing_are_published_by_lambda_s_retry(env: Env) -> None:
    rows = stream("article-terminate-loop")
    env.catch_up(rows[-1]["event_timestamp"])
    batch = encode_subscription(
        "/aws/vendedlogs/pcs", SCALING_STREAM, [(r["event_timestamp"], json.dumps(r)) for r in rows]
    )
    written_at = 1_800_000_000.0
    stopped = GroupUpdater(
        env.wiring.store, EventPublisher(HangingEvents(), env.stack.event_bus), clock=lambda: written_at
    )
    with pytest.raises(StoppedAtTimeout):
        ScalingEventsHandler(
            env.wiring.store, env.wiring.pcs, stopped, env.wiring.defaults, clock=env.now
        ).handle_event(batch)
    assert len(env.wiring.store.load(CLUSTER, GROUP).outbox) == 1  # written, not published, not marked due
    # Lambda's first retry of the batch, a minute later (the invocation stopped right after its write):
    # the same records change nothing, and it publishes what the stopped one queued.
    retry = GroupUpdater(env.wiring.store, env.wiring.updater.publisher, clock=lambda: written_at + 60)
    ScalingEventsHandler(
        env.wiring.store, env.wiring.pcs, retry, env.wiring.defaults, clock=env.now
    ).handle_event(batch)
    assert [e["detail-type"] for e in env.bus_events()] == ["BootstrapLoopDetected"]
    assert env.wiring.store.load(CLUSTER, GROUP).outbox == []


def template() -> dict[str, Any]:
    import yaml

    class Loader(yaml.SafeLoader):
        pass

    Loader.add_multi_constructor("!", lambda loader, suffix, node: None)
    loaded: dict[str, Any] = yaml.load(
        (Path(__file__).parents[2] / "template.yaml").read_text(), Loader=Loader
    )
    return loaded


def test_the_scaling_events_role_allows_every_pcs_call_it_makes() -> None:
    from tests.unit.test_template import allowed

    # Its role's inline policy and the per-cluster policies attached to it, together.
    assert set(PcsGateway.PERMISSIONS) <= allowed("ScalingEvents")


def test_the_table_schema_matches_the_template() -> None:
    from lifeguard_cli.local.stack import STATE_TABLE_SCHEMA

    table = template()["Resources"]["StateTable"]["Properties"]
    for key in ("BillingMode", "AttributeDefinitions", "KeySchema"):
        assert table[key] == STATE_TABLE_SCHEMA[key]
    assert table["TimeToLiveSpecification"] == {"AttributeName": "expires_at", "Enabled": True}


def test_a_batch_delivered_twice_changes_nothing_and_writes_nothing(env: Env) -> None:
    rows = stream("healthy-scale-up")
    for row in rows:
        row["compute_node_group_id"] = GROUP
    env.feed(rows)
    state = env.wiring.store.load(CLUSTER, GROUP)
    calls = env.wiring.store.calls
    assert env.feed(rows) == []
    # It remembers what it wrote: no write, and one read of the version (a state another container moved
    # on since would be redone from the table, not taken for "nothing to do").
    assert env.wiring.store.calls == calls + 1
    assert env.wiring.store.load(CLUSTER, GROUP).version == state.version


def test_a_container_that_remembers_a_stale_state_redoes_the_group_from_a_fresh_read(env: Env) -> None:
    rows = stream("article-terminate-loop")
    first, second = container(env), container(env)
    assert first.handle_records([]).events == []
    from lifeguard.scaling_log import ScalingLogRecord

    records = [ScalingLogRecord.model_validate(row) for row in rows]
    env.catch_up(rows[-1]["event_timestamp"])
    assert first.handle_records(records[:3]).events == []  # first remembers version 1
    assert second.handle_records(records[3:6]).events != []  # second writes on top: the loop, detected
    # first's remembered state is stale: its write fails, it rereads, and nothing is detected twice.
    assert first.handle_records(records[6:]).events == []
    assert first.updater.conflicts == 1
    state = env.wiring.store.load(CLUSTER, GROUP)
    assert state.episode is not None
    assert sorted(state.outcomes) == ["i-059b4b99b4f2e9739", "i-06644f6e5a2b001c9"]
    assert len(env.bus_events()) == 1


# -- Forged input: what a node, or a writer to the scaling log, may send -----------------------------------


def test_reports_naming_their_group_by_its_name_are_skipped_and_open_no_second_episode(
    env: Env, monkeypatch: pytest.MonkeyPatch
) -> None:
    """PCS takes a group's name where it takes its id, but the reports and the scaling log key a group by its
    id: reports naming `lca-static` would be of another group Lifeguard knows nothing of (no launches), and
    open a reports-only episode for the group the scaling log already tells."""
    monkeypatch.setenv("LIFEGUARD_CLUSTER_IDS", CLUSTER)
    reports = build_node_reports(env.wiring, clock=env.now)
    [detected] = env.feed(stream("article-terminate-loop"))
    assert detected["detail"]["signals"] == ["scaling_log"]
    forged = [
        {
            **row,
            "compute_node_group_id": "lca-static",
            "instance_id": row["instance_id"].replace("i-0", "i-f"),
        }
        for row in stream("article-terminate-node-reports")
    ]
    env.catch_up(max(row["ended_at"] * 1000 for row in forged))
    messages = [(row["ended_at"] * 1000, json.dumps(row)) for row in forged]
    summary = reports.handle_event(
        encode_subscription("/pcs-lifeguard/node-reports", f"{CLUSTER}/{forged[0]['instance_id']}", messages)
    ).to_dict()
    assert summary["events"] == []
    assert summary["skipped"] == len(forged)
    opened = [(s.cluster_id, s.group_id) for s in env.wiring.store.all_states() if s.episode is not None]
    assert opened == [(CLUSTER, GROUP)]


KEPT = "i-0c4d5e6f7a8b9c0d1"  # the node the quarantine keeps, in article-quarantine-contained


def _forged_failure(instance: str, n: int, at: int) -> dict[str, Any]:
    """A failed run of a script in no configuration, named to sort before the real one ('0' < 'f')."""
    return {
        "kind": "script_run",
        "cluster_id": CLUSTER,
        "compute_node_group_id": GROUP,
        "instance_id": instance,
        "node_id": "x",
        "boot": 1,
        "first_boot": True,
        "stage": "nodeBootstrapped",
        "script": f"0-forged-{n:05d}",
        "on_error": "TERMINATE",
        "exit_code": 1,
        "outcome": "failed",
        "started_at": at,
        "ended_at": at,
        "log_tail": "",
    }


def _quarantine_kept_node(env: Env, *, flood: bool, started_at: int | None = None) -> list[str]:
    """The article's loop, its script switched to STOP_SEQUENCE before the third node launches, and that
    node's real failure reported (its runs at `started_at`, when given, epoch seconds); with `flood`,
    forged failed runs first, filling the instance's read (`INSTANCE_RUNS_MAX`) under the kept node's own
    id (any node can read the ids off the report log group and write under them) and the group's
    (`RUNS_READ_MAX`) four times under others."""
    rows = stream("article-quarantine-contained")
    cut = 1792545162000
    scaling = [row for row in rows if "status_code" in row]
    reports = [row for row in rows if row.get("kind") == "script_run"]
    if started_at is not None:
        reports = [
            {**r, "started_at": started_at, "ended_at": started_at} if r["instance_id"] == KEPT else r
            for r in reports
        ]
    seen = [e["detail-type"] for e in env.feed([row for row in scaling if row["event_timestamp"] <= cut])]
    seen += [e["detail-type"] for e in env.feed_reports([r for r in reports if r["instance_id"] != KEPT])]
    config = load_event("configs/article-terminate.json")
    config["stages"]["nodeBootstrapped"][0]["onError"] = "STOP_SEQUENCE"
    env.clock.set(datetime(2026, 10, 21, 1, 13, tzinfo=UTC))
    env.pcs_client.update_compute_node_group(
        clusterIdentifier=CLUSTER, computeNodeGroupIdentifier=GROUP, nodeLifecycleActions=config
    )
    if flood:
        at = 1792545500
        env.feed_reports([_forged_failure(KEPT, n, at) for n in range(groups.INSTANCE_RUNS_MAX)])
        for chunk in range(4):
            env.feed_reports(
                [_forged_failure(f"i-f{chunk}{n:05d}", n, at) for n in range(groups.RUNS_READ_MAX)]
            )
    seen += [e["detail-type"] for e in env.feed_reports([r for r in reports if r["instance_id"] == KEPT])]
    seen += [e["detail-type"] for e in env.feed([row for row in scaling if row["event_timestamp"] > cut])]
    return seen


def test_the_kept_nodes_failure_contains_the_loop(env: Env) -> None:
    assert _quarantine_kept_node(env, flood=False)[-1] == "LoopContained"


# The kept node's launch (its LAUNCHED record), in epoch seconds.
KEPT_LAUNCHED_S = 1792545526


@pytest.mark.parametrize(
    "started_at",
    [None, KEPT_LAUNCHED_S, KEPT_LAUNCHED_S - 1, KEPT_LAUNCHED_S - 240],
    ids=[
        "as recorded",
        "in its launch second",
        "a second before (the node's clock behind)",
        "four minutes before (the node's clock behind)",
    ],
)
def test_a_flood_of_runs_under_the_kept_nodes_own_id_hides_none_of_its_failures(
    env: Env, started_at: int | None, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The group's read and the instance's own both stop at their bounds before the real run: its runs of
    the configuration's scripts in that boot are read script by script, from five minutes before its launch
    (a node's clock may be behind PCS's), and the loop stays contained (not told resolved while the script
    still fails). The bounds are a tenth of the function's here, so the floods that fill them cost a tenth."""
    monkeypatch.setattr(groups, "RUNS_READ_MAX", 100)
    monkeypatch.setattr(groups, "INSTANCE_RUNS_MAX", 100)
    seen = _quarantine_kept_node(env, flood=True, started_at=started_at)
    assert seen[-1] == "LoopContained", seen
    episode = env.wiring.store.load(CLUSTER, GROUP).episode
    assert episode is not None
    assert episode.contained_at is not None


def _another_clusters_loop(env: Env, log_stream: str) -> tuple[list[dict[str, Any]], dict[str, Any]]:
    """The article's loop in a second cluster's group, delivered in `log_stream`: its rows and the summary."""
    env.pcs.add_cluster("other", cluster_id="pcs_other00001")
    env.pcs.add_compute_node_group(
        "pcs_other00001",
        "other-group",
        group_id="pcs_og00000001",
        node_lifecycle_actions=load_event("configs/article-terminate.json"),
    )
    rows = [
        {**row, "resource_id": "pcs_other00001", "compute_node_group_id": "pcs_og00000001"}
        for row in stream("article-terminate-loop")
    ]
    messages = [(row["event_timestamp"], json.dumps(row)) for row in rows]
    env.catch_up(max(row["event_timestamp"] for row in rows))
    summary = env.scaling.handle_event(encode_subscription("/aws/vendedlogs/pcs", log_stream, messages))
    return rows, summary.to_dict()


def test_a_record_naming_another_cluster_than_its_streams_is_skipped(env: Env) -> None:
    """PCS writes a cluster's records to the cluster's own stream (`AWSLogs/PCS/<cluster-id>/...`)."""
    rows, summary = _another_clusters_loop(env, SCALING_STREAM)
    assert summary["events"] == []
    read = [row for row in rows if (row["status_code"], row["reason_code"]) not in PASSED_OVER]
    assert summary["skipped_reasons"] == {"another cluster's resource_id": len(read)}
    assert env.wiring.store.all_states() == []


@pytest.mark.parametrize(
    "log_stream",
    [
        f"AWSLogs/PCS/{CLUSTER}-x/node_lifecycle.log",
        "AWSLogs/PCS/pcs_other00001",
        "AWSLogs/PCS/",
        "myapp/i-0123456789abcdef0",
        "replay/no-one-cluster",
    ],
)
def test_a_stream_not_of_pcss_form_is_skipped_whole(env: Env, log_stream: str) -> None:
    """A writer held to one cluster's streams by a prefix (`AWSLogs/PCS/pcs_abc123de45*`) may make
    `AWSLogs/PCS/pcs_abc123de45-x/…`, and one held to streams of its own in the scaling log's group may
    make any other name: no PCS names a stream so, and its records could name any cluster."""
    rows, summary = _another_clusters_loop(env, log_stream)
    assert summary["events"] == []
    assert (summary["records"], summary["skipped"]) == (len(rows), len(rows))
    assert summary["skipped_reasons"] == {"stream not of PCS's form": len(rows)}
    assert env.wiring.store.all_states() == []
