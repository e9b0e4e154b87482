"""Bad input never fails a batch, never blinds a group, and never changes a group that did not loop.

Property tests drive hostile payloads (`tests/hostile.py`) mixed with a genuine loop through each of the
four handlers against the local AWS; then one test per defect the fuzzing found, named after it.
"""

from __future__ import annotations

import base64
import gzip
import json
import os
import random
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from lifeguard.errors import AwsCallError
from lifeguard.event_contract import make_detail
from lifeguard.group_state import BootOutcome
from lifeguard.log_subscription import encode_subscription
from lifeguard.remediation import RemediationParkedError
from lifeguard.scaling_log import PASSED_OVER
from lifeguard.store.remediations import RemediationStore
from tests.hostile import (
    CLUSTER,
    MINUTE_MS,
    Junk,
    World,
    genuine_loop,
    notice_event,
    notify_junk,
    render_detection,
    report,
    report_junk,
    scaling_junk,
    world,
)
from tests.hostile import DETECTION_MUTATIONS as detection_junk

pytestmark = pytest.mark.integration
LIFEGUARD = Path(sys.executable).parent / "lifeguard"
HOSTILE = settings(
    max_examples=int(os.environ.get("LIFEGUARD_HOSTILE_EXAMPLES", "25")),
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large, HealthCheck.large_base_example],
    deadline=None,
    database=None,
)
SEEDS = st.integers(min_value=0, max_value=2**32)


@pytest.fixture(scope="module")
def hostile(local: Any) -> Iterator[World]:
    with world(local) as made:
        yield made


# -- the properties, one per handler --


@HOSTILE
@given(junk=st.lists(scaling_junk, min_size=1, max_size=12), seed=SEEDS)
def test_hostile_records_beside_a_loop_are_each_skipped_or_ignored_and_the_loop_is_detected(
    hostile: World, junk: list[Junk], seed: int
) -> None:
    hostile.scaling_round(junk, random.Random(seed))


@HOSTILE
@given(junk=st.lists(report_junk, min_size=1, max_size=12), seed=SEEDS)
def test_hostile_reports_beside_genuine_ones_are_each_accounted_for_and_the_loop_is_attributed(
    hostile: World, junk: list[Junk], seed: int
) -> None:
    hostile.reports_round(junk, random.Random(seed))


@settings(HOSTILE, max_examples=max(5, HOSTILE.max_examples // 3))
@given(junk=st.lists(detection_junk, min_size=1, max_size=8), seed=SEEDS)
def test_mutated_detections_change_only_the_group_that_looped_and_only_once(
    hostile: World, junk: list[Junk], seed: int
) -> None:
    hostile.remediate_round(junk, random.Random(seed))


@HOSTILE
@given(junk=st.lists(notify_junk, min_size=1, max_size=6))
def test_broken_events_never_stop_a_notification_and_every_message_keeps_within_limits(
    hostile: World, junk: list[Junk]
) -> None:
    hostile.notify_round(junk)


# -- 1. A malformed detection changes a healthy group --


def test_defect_1_a_malformed_detection_never_changes_a_healthy_group(hostile: World) -> None:
    healthy = hostile.new_group()
    group = hostile.pcs_client().get_compute_node_group(
        clusterIdentifier=CLUSTER, computeNodeGroupIdentifier=healthy
    )["computeNodeGroup"]
    from lifeguard.lifecycle import fingerprint_of

    forged = [
        {"episode_id": "ep-x", "cluster_id": CLUSTER, "compute_node_group_id": healthy},
        # Even a detection that knows the group's configuration exactly is not an episode Lifeguard opened.
        make_detail(
            episode_id="ep-0123456789abcdef",
            cluster_id=CLUSTER,
            compute_node_group_id=healthy,
            kind="loop",
            config_fingerprint=fingerprint_of(group["nodeLifecycleActions"]),
            config_modified_at=int(group["modifiedAt"].timestamp() * 1000),
        ),
    ]
    controller = hostile.remediator()
    for detail in forged:
        (refused,) = controller.handle_event({"detail-type": "BootstrapLoopDetected", "detail": detail})
        assert refused.detail_type == "RemediationSkipped"
        assert refused.detail["reason"].startswith("Refused: ")
    assert hostile.updates(healthy) == 0
    history = RemediationStore(hostile.deployed.wiring.store.client, hostile.deployed.stack.table).history(
        CLUSTER, healthy
    )
    assert [entry.decision for entry in history] == ["skipped", "skipped"]


# -- 2. One record fails a whole scaling_events batch --


@pytest.mark.parametrize(
    ("breaks", "reason"),
    [
        ({"resource_id": "pcs_abc_def"}, "invalid resource_id"),  # PCS's pattern refuses it
        ({"event_timestamp": 10**17}, "invalid event_timestamp"),
        ({"compute_node_group_id": "pcs_" + "a" * 2_100}, "invalid compute_node_group_id"),
        ({"details": {"instance_id": "i-" + "0" * 600_000}}, "invalid details.instance_id"),
    ],
)
def test_defect_2_one_record_never_fails_a_scaling_events_batch(
    hostile: World, breaks: dict[str, Any], reason: str
) -> None:
    group = hostile.new_group()
    now = hostile.now_ms()
    rng = random.Random(2)
    genuine = genuine_loop(group, now - 12 * MINUTE_MS, rng)
    broken = [
        {**row, **breaks}
        for row in genuine_loop(f"pcs_{rng.getrandbits(40):010x}", now - 12 * MINUTE_MS, rng)
    ]
    messages = [json.dumps(row) for pair in zip(genuine, broken, strict=True) for row in pair]
    summary = hostile.deliver_records(messages)
    # A broken record of a status the detection never reads (REGISTERED) is ignored unvalidated: nothing
    # of it is used or kept. Every other broken one is skipped, with its reason.
    read = [row for row in broken if (row["status_code"], row["reason_code"]) not in PASSED_OVER]
    assert 0 < len(read) < len(broken)
    assert summary["skipped_reasons"] == {reason: len(read)}
    assert summary["ignored"] == 2 * (len(broken) - len(read))
    assert [e["detail"]["compute_node_group_id"] for e in summary["events"]] == [group]


def test_defect_2_a_payload_that_is_not_base64_gzip_or_too_big_is_refused_alone(hostile: World) -> None:
    bomb = base64.b64encode(gzip.compress(b"{" + b" " * (64 * 1024 * 1024) + b"}", 9)).decode()
    for data in ("awslogs.data é", bomb):
        summary = hostile.scaling.handle_event({"awslogs": {"data": data}}).to_dict()
        assert (summary["skipped"], summary["records"], summary["events"]) == (1, 0, [])
    # The next payload, with the genuine loop, is handled as ever.
    group = hostile.new_group()
    rows = genuine_loop(group, hostile.now_ms() - 12 * MINUTE_MS, random.Random(3))
    assert [e["detail-type"] for e in hostile.deliver_records([json.dumps(r) for r in rows])["events"]] == [
        "BootstrapLoopDetected"
    ]


def test_defect_2_a_group_pcs_refuses_to_describe_leaves_the_other_groups_loops_detected(
    hostile: World,
) -> None:
    refused, group = hostile.new_group(), hostile.new_group()
    now = hostile.now_ms()
    rng = random.Random(4)
    rows = genuine_loop(refused, now - 12 * MINUTE_MS, rng) + genuine_loop(group, now - 11 * MINUTE_MS, rng)
    hostile.pcs.inject_fault("AccessDeniedException", operation="GetComputeNodeGroup", times=1)
    summary = hostile.deliver_records(
        [json.dumps(r) for r in sorted(rows, key=lambda r: r["event_timestamp"])]
    )
    assert summary["unreadable_groups"] == 1
    assert len(summary["events"]) == 1  # the group PCS described; the other one is judged again later


# -- 3. One report fails a whole node_reports batch --


def test_defect_3_one_report_never_fails_a_node_reports_batch(hostile: World) -> None:
    group = hostile.new_group()
    now = hostile.now_ms()
    rows = genuine_loop(group, now - 12 * MINUTE_MS, random.Random(5))
    hostile.deliver_records([json.dumps(r) for r in rows])
    failed = [r["details"]["instance_id"] for r in rows if r["reason_code"] == "BOOTSTRAP_FAILED"]
    now_s = now // 1000
    genuine = [json.dumps(report(group, i, "fail-terminate", "failed", now_s - 300)) for i in failed]
    base = report(group, failed[0], "fail-terminate", "failed", now_s - 300)
    hostile_reports = [
        "[" * 100_000 + "]" * 100_000,  # RecursionError in json.loads
        json.dumps({**base, "instance_id": "i-" + "a" * 2_100}),  # past DynamoDB's key limit
        json.dumps({**base, "script": "s" * 600_000}),  # past its item limit
        json.dumps({**base, "started_at": 10**126, "ended_at": 10**126}),  # overflows the TTL
    ]
    messages = [(now, m) for m in (hostile_reports[:2] + genuine + hostile_reports[2:])]
    event = encode_subscription("/pcs-lifeguard/node-reports", f"{CLUSTER}/{failed[0]}", messages)
    summary = hostile.reports.handle_event(event).to_dict()
    assert summary["skipped_reasons"] == {
        "not JSON": 1,
        "invalid instance_id": 1,
        "invalid script": 1,
        "invalid started_at": 1,
    }
    assert summary["failed_runs"] == 2
    (attributed,) = summary["events"]
    assert attributed["detail"]["suspect"]["script"] == "fail-terminate"


# -- 4. One implausible record blinds a group --


AHEAD = "event_timestamp ahead of the clock"
YEAR_MS = 365 * 24 * 60 * MINUTE_MS


@pytest.mark.parametrize(
    ("status", "ahead_ms", "reason"),
    [
        (("ACTIVE", "BOOTSTRAP_SUCCESS"), YEAR_MS, AHEAD),
        (("ACTIVE", "BOOTSTRAP_SUCCESS"), 100 * YEAR_MS, "invalid event_timestamp"),  # past 2100: no date
        (("TERMINATED", "BOOTSTRAP_FAILED"), YEAR_MS, AHEAD),
        (("ACTIVE", "BOOTSTRAP_SUCCESS"), 6 * MINUTE_MS, AHEAD),  # beyond the 5 minutes of skew
    ],
)
def test_defect_4_an_implausible_record_never_blinds_a_group(
    hostile: World, status: tuple[str, str], ahead_ms: int, reason: str
) -> None:
    group = hostile.new_group()
    rng = random.Random(6)
    future = genuine_loop(group, hostile.now_ms() + ahead_ms, rng)[2]
    future.update(status_code=status[0], reason_code=status[1])
    summary = hostile.deliver_records([json.dumps(future)])
    assert summary["skipped_reasons"] == {reason: 1}
    for later_ms, resolve in ((60 * MINUTE_MS, True), (24 * 60 * MINUTE_MS, False)):  # an hour, a day later
        hostile.clock.advance(later_ms / 1000)
        rows = genuine_loop(group, hostile.now_ms() - 12 * MINUTE_MS, rng)
        detected = hostile.deliver_records([json.dumps(r) for r in rows])["events"]
        assert [e["detail-type"] for e in detected] == ["BootstrapLoopDetected"]
        if resolve:  # a good node ends the first episode, so the second loop is a new one
            success = {**rows[-1], "status_code": "ACTIVE", "reason_code": "BOOTSTRAP_SUCCESS"}
            success["event_timestamp"] = hostile.now_ms()
            assert [e["detail-type"] for e in hostile.deliver_records([json.dumps(success)])["events"]] == [
                "LoopResolved"
            ]


def test_defect_4_an_outcome_kept_from_the_future_before_times_were_bounded_is_let_go(hostile: World) -> None:
    group = hostile.new_group()
    store = hostile.deployed.wiring.store
    poisoned = store.load(CLUSTER, group)
    ahead = hostile.now_ms() + 365 * 24 * 60 * MINUTE_MS
    poisoned.outcomes["i-0ffffffffffffffff"] = BootOutcome("i-0ffffffffffffffff", "lca-static-1", ahead, True)
    store.save(poisoned)
    rows = genuine_loop(group, hostile.now_ms() - 12 * MINUTE_MS, random.Random(7))
    assert [e["detail-type"] for e in hostile.deliver_records([json.dumps(r) for r in rows])["events"]] == [
        "BootstrapLoopDetected"
    ]
    assert "i-0ffffffffffffffff" not in store.load(CLUSTER, group).outcomes


# -- 5. A change made but recorded as skipped --


class _LosesTheRecordOfTheChange(RemediationStore):
    """DynamoDB failing right after PCS took the change (and, with `dies`, the function with it: the lock
    is never given back)."""

    def __init__(self, client: Any, table: str, *, dies: bool = False) -> None:
        super().__init__(client, table)
        self.dies = dies

    def save_ledger(self, cluster_id: str, group_id: str, ledger: Any) -> None:
        if any(change.status == "applied" for change in ledger.changes):
            raise AwsCallError("PutItem", "ProvisionedThroughputExceededException", "injected")
        super().save_ledger(cluster_id, group_id, ledger)

    def release(self, cluster_id: str, group_id: str, holder: str) -> None:
        if not self.dies:
            super().release(cluster_id, group_id, holder)


def _looping_group(hostile: World) -> tuple[str, dict[str, Any]]:
    group = hostile.new_group()
    rows = genuine_loop(group, hostile.now_ms() - 12 * MINUTE_MS, random.Random(8))
    (detected,) = hostile.deliver_records([json.dumps(r) for r in rows])["events"]
    return group, {"detail-type": "BootstrapLoopDetected", "detail": detected["detail"]}


@pytest.mark.parametrize("dies", [False, True], ids=["dynamodb-error", "function-dies"])
def test_defect_5_a_change_pcs_took_is_recorded_as_applied_and_can_be_undone(
    hostile: World, dies: bool
) -> None:
    group, detection = _looping_group(hostile)
    wiring = hostile.deployed.wiring
    first = hostile.remediator()
    first.store = _LosesTheRecordOfTheChange(wiring.store.client, hostile.deployed.stack.table, dies=dies)
    started = hostile.clock().timestamp()
    with pytest.raises(AwsCallError, match="ProvisionedThroughputExceeded"):
        first.handle_event(detection, remaining_ms=600_000)
    assert hostile.updates(group) == 1
    store = RemediationStore(wiring.store.client, hostile.deployed.stack.table)
    (pending,) = store.ledger(CLUSTER, group).changes
    assert (pending.status, pending.client_token is not None) == ("pending", True)
    if dies:
        lock = wiring.store.client.get_item(
            TableName=hostile.deployed.stack.table,
            Key={"pk": {"S": f"GROUP#{CLUSTER}#{group}"}, "sk": {"S": "LOCK"}},
        )["Item"]
        # The lease ends with the invocation that died (600 s) and a margin, before Lambda's retry.
        assert float(lock["lease_until"]["N"]) <= started + 605
        hostile.clock.advance(660)
    (applied,) = hostile.remediator().handle_event(detection, remaining_ms=600_000)
    assert applied.detail_type == "RemediationApplied"
    assert "recorded on a retry" in applied.detail["reason"]
    assert hostile.updates(group) == 1  # recognised as Lifeguard's own, not made again
    assert [c.status for c in store.ledger(CLUSTER, group).changes] == ["applied"]
    undone = subprocess.run(
        [str(LIFEGUARD), "undo", group, "--cluster", CLUSTER, "--local", "--yes"],
        env={
            **os.environ,
            **hostile.local.environ(),
            "AWS_ENDPOINT_URL_PCS": hostile.pcs_endpoint,
            "LIFEGUARD_TABLE": hostile.deployed.stack.table,
        },
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert undone.returncode == 0, undone.stderr
    assert hostile.updates(group) == 2


def test_defect_5_a_redrive_after_someone_changed_the_group_makes_nothing_and_counts_the_pending_change(
    hostile: World,
) -> None:
    group, detection = _looping_group(hostile)
    hostile.pcs.inject_fault("InternalServerException", operation="UpdateComputeNodeGroup", times=6)
    with pytest.raises(RemediationParkedError):
        hostile.remediator().handle_event(detection, remaining_ms=600_000)
    good = json.loads(json.dumps(detection["detail"]["config_before"]))
    good["stages"]["nodeBootstrapped"] = good["stages"]["nodeBootstrapped"][1:]
    hostile.pcs_client().update_compute_node_group(
        clusterIdentifier=CLUSTER, computeNodeGroupIdentifier=group, nodeLifecycleActions=good
    )
    (skipped,) = hostile.remediator().handle_event(detection, remaining_ms=600_000)
    assert skipped.detail_type == "RemediationSkipped"
    assert skipped.detail["reason"].startswith("Someone changed the group before Lifeguard's quarantine")
    store = RemediationStore(hostile.deployed.wiring.store.client, hostile.deployed.stack.table)
    # PCS's 500s do not say the change was never made: it still counts for the cooldown and the cap.
    assert [c.status for c in store.ledger(CLUSTER, group).changes] == ["unconfirmed"]


# -- 6. retryAfterSeconds is honoured without a cap --


def test_defect_6_retry_waits_are_capped_by_the_time_the_invocation_has_left(hostile: World) -> None:
    group, detection = _looping_group(hostile)
    sleeps: list[float] = []
    controller = hostile.remediator()
    controller.sleep = lambda seconds: (sleeps.append(seconds), hostile.clock.advance(seconds))[0]
    hostile.pcs.inject_fault(
        "ThrottlingException", operation="UpdateComputeNodeGroup", times=2, retry_after_seconds=400
    )
    (applied,) = controller.handle_event(detection, remaining_ms=600_000)
    assert applied.detail_type == "RemediationApplied"
    assert sleeps == [60.0, 60.0]  # each wait capped at a minute
    group, detection = _looping_group(hostile)
    sleeps.clear()
    hostile.pcs.inject_fault(
        "ThrottlingException", operation="UpdateComputeNodeGroup", times=2, retry_after_seconds=400
    )
    with pytest.raises(RemediationParkedError, match="not retried: 50 s left in this invocation"):
        controller.handle_event(detection, remaining_ms=80_000)
    assert sleeps == []  # a minute's wait would outlast the 80 s this invocation has
    assert hostile.updates(group) == 0


# -- 7. A 2,000-character episode_id --


def test_defect_7_an_overlong_episode_id_is_refused_before_anything_is_changed(hostile: World) -> None:
    group, detection = _looping_group(hostile)
    long = {**detection, "detail": {**detection["detail"], "episode_id": "ep-" + "a" * 2_000}}
    (refused,) = hostile.remediator().handle_event(long, remaining_ms=600_000)
    assert refused.detail_type == "RemediationSkipped"
    assert "episode_id: String should match pattern" in refused.detail["reason"]
    assert refused.detail["episode_id"] is None
    assert hostile.updates(group) == 0
    history = RemediationStore(hostile.deployed.wiring.store.client, hostile.deployed.stack.table).history(
        CLUSTER, group
    )
    assert [entry.decision for entry in history] == ["skipped"]


# -- 8. notify crashes on wrong-typed fields --


@pytest.mark.parametrize(
    ("field", "value"),
    [
        ("revision", "2"),
        ("suspect", "fail-terminate"),
        ("failures", 3),
        ("failures", {"a": 1}),
        ("diff", 1.5),
    ],
)
def test_defect_8_notify_sends_what_is_valid_and_says_what_was_not(
    hostile: World, field: str, value: Any
) -> None:
    event = notice_event()
    event["detail"][field] = value
    before = len(hostile.slack.messages)
    result = hostile.notifier().handle_event(event).to_dict()
    assert sorted(result["sent"]) == ["slack", "sns"]
    (slack,) = hostile.slack.messages[before:]
    assert f"{field}: " in slack["text"]
    assert "Not shown (not valid in the event):" in slack["text"]
    assert "Lifeguard changed the lifecycle actions of pcs_abcdef01" in slack["text"]


def test_remediation_publishes_what_it_refuses_and_notify_tells_it(hostile: World) -> None:
    group, detection = _looping_group(hostile)
    junk = render_detection(Junk("set", "revision", "2"), detection["detail"], group)
    (refused,) = hostile.remediator().handle_event(junk, remaining_ms=600_000)
    event = {"detail-type": refused.detail_type, "detail": dict(refused.detail)}
    assert sorted(hostile.notifier().handle_event(event).to_dict()["sent"]) == ["slack", "sns"]


def test_a_ledger_of_large_configurations_stays_within_dynamodbs_item_limit(hostile: World) -> None:
    from lifeguard.remediation import AppliedChange, Ledger

    group = hostile.new_group()
    rng = random.Random(9)
    stages = [
        {
            "name": f"s{i}",
            "scriptSource": {"scriptLocation": "s3://bucket-name/key"},
            # Arguments nobody could compress: what a PCS answer may hold at most.
            "arguments": ["".join(rng.choice("abcdefghijklmnopqrstuvwxyz0123456789") for _ in range(256))]
            * 20,
        }
        for i in range(20)
    ]
    config = {"stages": {"nodeBootstrapped": stages, "nodeReady": stages}}
    ledger = Ledger(
        changes=[
            AppliedChange(
                at=float(n),
                episode_id=f"ep-{n}",
                revision=1,
                action="quarantine",
                config_before=config,
                config_after=config,
                fingerprint_before="0" * 64,
                fingerprint_after="1" * 64,
            )
            for n in range(50)
        ]
    )
    assert len(ledger.model_dump_json()) > 10 * 400 * 1024
    store = RemediationStore(hostile.deployed.wiring.store.client, hostile.deployed.stack.table)
    store.save_ledger(CLUSTER, group, ledger)
    kept = store.ledger(CLUSTER, group).changes
    assert kept[-1].episode_id == "ep-49"  # the newest are kept, the oldest let go
    audit = {"at": 1.0, "decision": "applied", "config_before": config, "config_after": config}
    from lifeguard.remediation import AuditEntry

    store.audit(CLUSTER, group, AuditEntry.model_validate(audit))
    assert store.history(CLUSTER, group)[-1].config_after == config
