"""Hostile input, as an attacker or a broken node would send it, mixed with a genuine loop.

Hypothesis strategies draw *recipes* of junk (what to break and how); a `World` (the local AWS, a local
PCS on a clock that follows the records, and the four handlers' controllers wired to them) renders them
next to a genuine loop of a fresh compute node group and runs them through the real handlers. Each
`World.*_round` checks the promises of `lifeguard.bounds` and returns what it saw, counted:

- no exception escapes a handler;
- the genuine loop is detected (and attributed, remediated, notified);
- every junk record is accounted for: skipped and counted with a reason, or ignored as a status the
  handler does not read (each recipe says which it must be);
- nothing that arrives changes a group that did not loop.

`tests/integration/test_hostile_input.py` runs a few dozen examples a handler; `bench/soak.py` runs
thousands and prints the counts.
"""

from __future__ import annotations

import json
import random
import uuid
from collections import Counter
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

import pytest
from hypothesis import strategies as st

from lifeguard.aws.clients import aws_client
from lifeguard.aws.pcs import PcsGateway
from lifeguard.event_contract import clean_detail
from lifeguard.handlers.node_reports import NodeReportsHandler
from lifeguard.handlers.scaling_events import ScalingEventsHandler
from lifeguard.log_subscription import encode_subscription
from lifeguard.notify import Notifier, SecretWebhook, SlackChannel, SnsChannel
from lifeguard.notify.slack import HEADER_MAX_CHARS, MAX_BLOCKS, SECTION_MAX_CHARS
from lifeguard.notify.sns import SNS_MAX_BYTES
from lifeguard.notify.summary import SUBJECT_MAX_CHARS
from lifeguard.remediation import RemediationSettings, Remediator
from lifeguard.store.notices import NoticeStore
from lifeguard.store.remediations import RemediationStore
from lifeguard.wiring import build_node_reports, build_remediate, build_scaling_events
from lifeguard_cli.local import LocalPcs, ManualClock, serve_local_pcs
from lifeguard_cli.local.slack import SlackSink, serve_slack
from lifeguard_cli.local.stack import LocalChannels, create_notification_channels
from tests.conftest import applied_event, load_event
from tests.integration.conftest import Deployment, deploy

SKIP, IGNORE, USE = "skip", "ignore", "use"
CLUSTER = "pcs_abc123de45"
START = datetime(2026, 10, 21, 1, 0, tzinfo=UTC)
TERMINATE = load_event("configs/article-terminate.json")
SCALING_STREAM = f"AWSLogs/PCS/{CLUSTER}/node_lifecycle.log"
MINUTE_MS = 60_000
DAY_MS = 24 * 60 * MINUTE_MS

# -- values that break a field, whatever the field --

HUGE = st.sampled_from([65, 2_100, 70_000, 600_000]).map(lambda n: "x" * n)
HUGE_NAME = st.sampled_from([129, 2_100, 600_000]).map(lambda n: "x" * n)  # Slurm node names: 128 at most
WRONG_TYPES = st.sampled_from([7, -1, 1.5, True, [], ["pcs_abc"], {"a": 1}])
BAD_TEXT = st.sampled_from(
    ["", " ", "pcs_a#b", "../../etc", "pcs_ä", "i-059b 4b99", "i-#1", "\u202eoverride", "\x00", "ab"]
)
BAD_ID = st.one_of(HUGE.map(lambda s: "pcs_" + s), BAD_TEXT, WRONG_TYPES)
BAD_TIME = st.sampled_from([10**17, -1, 10**30, 1.5, "now", None, [1], 2**63])
JSON_VALUES = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text(max_size=20),
    lambda children: (
        st.lists(children, max_size=4) | st.dictionaries(st.text(max_size=8), children, max_size=4)
    ),
    max_leaves=12,
)


@dataclass(frozen=True)
class Junk:
    """One hostile message: how to make it, and how the handler must account for it."""

    kind: str
    field: str = ""
    value: Any = None
    label: str = SKIP


def _deep(depth: int, opener: str) -> str:
    closer = "]" if opener == "[" else "}"
    inner = "1" if opener == "[" else '{"a":1}'
    return (opener if opener == "[" else '{"a":') * depth + inner + closer * depth


# -- scaling-log records --

SCALING_FIELDS = {
    "resource_id": BAD_ID,
    "compute_node_group_id": BAD_ID,
    "details.instance_id": BAD_ID,
    "scheduler_node_id": st.one_of(HUGE_NAME, st.sampled_from(["lca static", "n#1", "ä"]), WRONG_TYPES),
    "event_timestamp": BAD_TIME,
    "status_code": st.one_of(HUGE, st.sampled_from(["", "terminated!", "A B"]), WRONG_TYPES),
    "reason_code": st.one_of(HUGE, st.sampled_from(["", "x y"]), WRONG_TYPES),
    "details": st.sampled_from([7, "i-1", ["i-1"]]),
}
IGNORED_PAIRS = [
    ("REGISTERED", "REGISTER_SUCCESS"),
    ("PENDING_REPLACEMENT", "NODE_GROUP_UPDATE"),
    ("TERMINATED", "SCHEDULER_REQUESTED"),
    ("TERMINATED", "EXTERNALLY_TERMINATED"),
    ("LAUNCH_FAILED", "INSUFFICIENT_CAPACITY"),
    ("HIBERNATED", "SLEEPING"),
    ("ACTIVE", "WARMED_UP"),
]
OUTCOMES = [
    ("ACTIVE", "BOOTSTRAP_SUCCESS"),
    ("TERMINATED", "BOOTSTRAP_FAILED"),
    ("TERMINATED", "UNHEALTHY_NODE"),  # used: a loop of these on fresh instances is a replacement loop
    ("LAUNCHED", "SCHEDULER_REQUESTED"),
]

scaling_junk = st.one_of(
    st.builds(Junk, st.just("text"), value=st.text(max_size=300)),
    st.builds(Junk, st.just("binary"), value=st.binary(max_size=200)),
    st.builds(
        Junk,
        st.just("json"),
        value=JSON_VALUES.filter(lambda v: not (isinstance(v, dict) and "status_code" in v)),
    ),
    st.builds(
        Junk, st.just("deep"), field=st.sampled_from(["[", "{"]), value=st.sampled_from([1_000, 100_000])
    ),
    st.sampled_from(sorted(SCALING_FIELDS)).flatmap(
        lambda name: st.builds(Junk, st.just("field"), field=st.just(name), value=SCALING_FIELDS[name])
    ),
    # Outcomes of the genuine group dated where no genuine record can be: a year or a century ahead,
    # minutes ahead beyond the skew, weeks behind.
    st.builds(
        Junk,
        st.just("time"),
        field=st.sampled_from(OUTCOMES).map("/".join),
        value=st.sampled_from([6 * MINUTE_MS, 365 * DAY_MS, 100 * 365 * DAY_MS, -15 * DAY_MS, -400 * DAY_MS]),
    ),
    st.builds(
        Junk, st.just("status"), field=st.sampled_from(IGNORED_PAIRS).map("/".join), label=st.just(IGNORE)
    ),
    # A launch that names no cluster or group: of a kind Lifeguard follows, but of no group (skipped).
    st.builds(
        Junk,
        st.just("no-ids"),
        field=st.sampled_from(["resource_id", "compute_node_group_id"]),
        label=st.just(SKIP),
    ),
    # A made-up group of the cluster: PCS does not list it, so nothing of it is kept (skipped).
    st.builds(
        Junk, st.just("other-group"), field=st.sampled_from(OUTCOMES).map("/".join), label=st.just(SKIP)
    ),
)


def _record(group: str, instance: str, status: str, reason: str, at: int) -> dict[str, Any]:
    return {
        "resource_id": CLUSTER,
        "resource_type": "PCS_CLUSTER",
        "event_timestamp": at,
        "compute_node_group_id": group,
        "scheduler_node_id": "lca-static-1",
        "status_code": status,
        "reason_code": reason,
        "description": "hostile-input test",
        "details": {"instance_id": instance, "instance_type": "c7i.large", "subnet_id": "subnet-1"},
    }


def _set(record: dict[str, Any], path: str, value: Any) -> dict[str, Any]:
    where = record
    *parents, last = path.split(".")
    for part in parents:
        where = where[part]
    where[last] = value
    return record


def _instance(rng: random.Random) -> str:
    return f"i-{rng.getrandbits(68):017x}"


def render_scaling(junk: Junk, group: str, now: int, rng: random.Random) -> str:
    """The message a recipe stands for, next to the genuine group `group` at time `now` (epoch ms)."""
    fresh = _record(group, _instance(rng), "LAUNCHED", "SCHEDULER_REQUESTED", now - 5 * MINUTE_MS)
    if junk.kind == "text":
        return str(junk.value)
    if junk.kind == "binary":
        return bytes(junk.value).decode("latin-1")
    if junk.kind == "json":
        return json.dumps(junk.value)
    if junk.kind == "deep":
        return _deep(int(junk.value), junk.field)
    if junk.kind == "field":
        return json.dumps(_set(fresh, junk.field, junk.value))
    if junk.kind == "no-ids":
        fresh.pop(junk.field)
        return json.dumps(fresh)
    status, reason = junk.field.split("/")
    if junk.kind == "time":
        return json.dumps(_record(group, _instance(rng), status, reason, now + int(junk.value)))
    if junk.kind == "status":
        return json.dumps(_record(group, _instance(rng), status, reason, now - MINUTE_MS))
    other = f"pcs_{rng.getrandbits(40):010x}"
    return json.dumps(_record(other, _instance(rng), status, reason, now - 2 * MINUTE_MS))


def genuine_loop(group: str, t0: int, rng: random.Random) -> list[dict[str, Any]]:
    """The article's TERMINATE loop of `group`: two instances launched, registered, failed to bootstrap,
    and a third launched (about 11 minutes from `t0`)."""
    first, second, third = (_instance(rng) for _ in range(3))
    return [
        _record(group, first, "LAUNCHED", "MAINTAIN_MIN_CAPACITY", t0),
        _record(group, first, "REGISTERED", "REGISTER_SUCCESS", t0 + 78_000),
        _record(group, first, "TERMINATED", "BOOTSTRAP_FAILED", t0 + 117_000),
        _record(group, second, "LAUNCHED", "MAINTAIN_MIN_CAPACITY", t0 + 299_000),
        _record(group, second, "REGISTERED", "REGISTER_SUCCESS", t0 + 392_000),
        _record(group, second, "TERMINATED", "BOOTSTRAP_FAILED", t0 + 477_000),
        _record(group, third, "LAUNCHED", "MAINTAIN_MIN_CAPACITY", t0 + 660_000),
    ]


# -- node reports --

REPORT_FIELDS = {
    "cluster_id": BAD_ID,
    "compute_node_group_id": BAD_ID,
    "instance_id": BAD_ID,
    "node_id": st.one_of(HUGE_NAME, st.sampled_from(["n 1", "n#1"]), WRONG_TYPES),
    "boot": st.sampled_from([0, -1, 10**9, "1", 1.5, None]),
    "first_boot": st.sampled_from(["yes", 2, None]),
    "stage": st.one_of(HUGE, st.sampled_from(["nodeready", "", "other"]), WRONG_TYPES),
    "script": st.one_of(HUGE, st.sampled_from(["", "a#b", "-x", "a/b"]), WRONG_TYPES),
    "on_error": st.sampled_from(["terminate", "StopSequence", "", 1]),
    "exit_code": st.sampled_from([2**40, -(2**40), "1", 1.5, [1]]),
    "outcome": st.sampled_from(["FAILED", "", None, 1]),
    "started_at": st.sampled_from([10**126, -5, "yesterday", None, 1.5, 2**40]),
    "ended_at": st.sampled_from([10**126, -5, "later", 2**40]),
    "script_sha256": st.sampled_from(["abc", "Z" * 64, 64]),
}
report_junk = st.one_of(
    st.builds(Junk, st.just("text"), value=st.text(max_size=300)),
    st.builds(
        Junk, st.just("json"), value=JSON_VALUES.filter(lambda v: not (isinstance(v, dict) and "kind" in v))
    ),
    st.builds(
        Junk, st.just("deep"), field=st.sampled_from(["[", "{"]), value=st.sampled_from([1_000, 100_000])
    ),
    st.builds(Junk, st.just("kind"), value=st.sampled_from(["script", "", None, 7, ["script_run"]])),
    st.sampled_from(sorted(REPORT_FIELDS)).flatmap(
        lambda name: st.builds(Junk, st.just("field"), field=st.just(name), value=REPORT_FIELDS[name])
    ),
    st.builds(Junk, st.just("time"), value=st.sampled_from([10 * 60, 365 * 86_400, -20 * 86_400])),
    st.builds(
        Junk,
        st.just("not-failed"),
        field=st.sampled_from(["succeeded", "skipped"]),
        value=st.sampled_from([0, 10, 1_000_000]),  # bytes of log tail: trimmed, never refused
        label=st.just(IGNORE),
    ),
    st.builds(Junk, st.just("other-instance"), label=st.just(USE)),
)


def report(group: str, instance: str, script: str, outcome: str, at_s: int, **extra: Any) -> dict[str, Any]:
    return {
        "kind": "script_run",
        "cluster_id": CLUSTER,
        "compute_node_group_id": group,
        "instance_id": instance,
        "node_id": "lca-static-1",
        "boot": 1,
        "first_boot": True,
        "stage": "nodeBootstrapped",
        "script": script,
        "on_error": "TERMINATE",
        "exit_code": 1 if outcome == "failed" else 0,
        "outcome": outcome,
        "started_at": at_s,
        "ended_at": at_s,
        "log_tail": "intentional failure for verification\n" if outcome == "failed" else "",
        **extra,
    }


def render_report(junk: Junk, group: str, now_s: int, rng: random.Random) -> str:
    base = report(group, _instance(rng), "record-boot", "failed", now_s - 60)
    if junk.kind == "text":
        return str(junk.value)
    if junk.kind == "json":
        return json.dumps(junk.value)
    if junk.kind == "deep":
        return _deep(int(junk.value), junk.field)
    if junk.kind == "kind":
        return json.dumps({**base, "kind": junk.value})
    if junk.kind == "field":
        return json.dumps({**base, junk.field: junk.value})
    if junk.kind == "time":
        return json.dumps({**base, "started_at": now_s + junk.value, "ended_at": now_s + junk.value})
    if junk.kind == "not-failed":
        tail = "y" * int(junk.value)
        return json.dumps(report(group, _instance(rng), "record-boot", junk.field, now_s - 60, log_tail=tail))
    return json.dumps(base)  # a failed run of another instance: stored, and changes no attribution


# -- detections --

DETECTION_MUTATIONS = st.one_of(
    st.builds(
        Junk,
        st.just("drop"),
        field=st.sampled_from(
            ["config_fingerprint", "config_modified_at", "episode_id", "compute_node_group_id", "cluster_id"]
        ),
    ),
    st.builds(
        Junk,
        st.just("set"),
        field=st.sampled_from(["revision", "suspect", "failures", "diff", "kind", "dry_run", "mode"]),
        value=st.one_of(WRONG_TYPES, HUGE, st.just("2")),
    ),
    st.builds(
        Junk,
        st.just("set"),
        field=st.just("episode_id"),
        value=st.one_of(HUGE.map(lambda s: "ep-" + s), st.sampled_from(["ep-x", "ep-", "ep-#1", 7])),
    ),
    st.builds(
        Junk,
        st.just("set"),
        field=st.sampled_from(["config_fingerprint"]),
        value=st.sampled_from(["0" * 64, "abc", "Z" * 64, 1]),
    ),
    st.builds(
        Junk,
        st.just("set"),
        field=st.just("config_modified_at"),
        value=st.sampled_from([0, 10**17, -1, "1", 1.5]),
    ),
    st.builds(Junk, st.just("set"), field=st.just("revision"), value=st.sampled_from([2, 99, 0, -1, 10**9])),
    st.builds(Junk, st.just("healthy-group")),
    st.builds(Junk, st.just("detail"), value=st.one_of(JSON_VALUES, st.just(None))),
    st.builds(Junk, st.just("minimal")),  # the fuzzer's {"episode_id", "cluster_id", "compute_node_group_id"}
)


def render_detection(junk: Junk, genuine: dict[str, Any], healthy: str) -> dict[str, Any]:
    detail: Any = dict(genuine)
    if junk.kind == "drop":
        detail.pop(junk.field)
    elif junk.kind == "set":
        detail[junk.field] = junk.value
    elif junk.kind == "healthy-group":
        detail["compute_node_group_id"] = healthy
    elif junk.kind == "detail":
        detail = junk.value
    elif junk.kind == "minimal":
        detail = {"episode_id": "ep-x", "cluster_id": CLUSTER, "compute_node_group_id": healthy}
    return {"detail-type": "BootstrapLoopDetected", "source": "lifeguard", "detail": detail}


# -- notifications --

NOTIFY_FIELDS = [
    "revision",
    "suspect",
    "failures",
    "diff",
    "episode_id",
    "cluster_id",
    "kind",
    "reason",
    "undo",
    "config_before",
    "dry_run",
    "mode",
]
notify_junk = st.one_of(
    st.builds(
        Junk,
        st.just("set"),
        field=st.sampled_from(NOTIFY_FIELDS),
        value=st.one_of(WRONG_TYPES, HUGE, JSON_VALUES),
    ),
    st.builds(Junk, st.just("detail"), value=st.one_of(JSON_VALUES, st.just(None))),
    st.builds(Junk, st.just("type"), value=st.sampled_from(["Nope", "", None, 7, "RemediationApplied "])),
    st.builds(Junk, st.just("huge-tail"), value=st.sampled_from([5_000, 300_000])),
)


def render_notice(junk: Junk, genuine: dict[str, Any]) -> dict[str, Any]:
    event: dict[str, Any] = {
        "detail-type": genuine["detail-type"],
        "source": "lifeguard",
        "detail": dict(genuine["detail"]),
    }
    if junk.kind == "set":
        event["detail"][junk.field] = junk.value
    elif junk.kind == "detail":
        event["detail"] = junk.value
    elif junk.kind == "type":
        event["detail-type"] = junk.value
    else:
        suspect = dict(event["detail"]["suspect"])
        suspect["log_tail"] = "z" * int(junk.value)
        event["detail"]["suspect"] = suspect
    return event


# -- the world the rounds run in --


@dataclass(repr=False)
class World:
    """The local AWS, a local PCS on a clock that follows the records, and the handlers' controllers."""

    local: Any
    pcs: LocalPcs
    clock: ManualClock
    deployed: Deployment
    pcs_endpoint: str
    scaling: ScalingEventsHandler
    reports: NodeReportsHandler
    slack: SlackSink
    channels: LocalChannels
    counts: Counter[str]

    def _repr_pretty_(self, printer: Any, cycle: bool) -> None:
        printer.text("World(the local AWS)")  # Hypothesis shows it in a failing example

    def now_ms(self) -> int:
        return int(self.clock().timestamp() * 1000)

    def new_group(self, config: dict[str, Any] | None = None) -> str:
        """A fresh compute node group, its configuration in place for an hour of the clock."""
        self.clock.advance(3 * 3600)
        group = f"pcs_{uuid.uuid4().hex[:10]}"
        self.pcs.add_compute_node_group(
            CLUSTER, f"g-{group[4:]}", group_id=group, node_lifecycle_actions=config or TERMINATE
        )
        self.clock.advance(3600)
        return group

    def deliver_records(self, messages: list[str]) -> dict[str, Any]:
        event = encode_subscription(
            "/aws/vendedlogs/pcs", SCALING_STREAM, [(self.now_ms(), m) for m in messages]
        )
        summary: dict[str, Any] = self.scaling.handle_event(event).to_dict()
        return summary

    def remediator(self) -> Remediator:
        return build_remediate(
            self.deployed.wiring,
            settings=RemediationSettings(default_mode="quarantine", cooldown_seconds=0),
            pcs=PcsGateway(aws_client("pcs", self.pcs_endpoint, attempts=1)),
            clock=lambda: self.clock().timestamp(),
            sleep=self.clock.advance,
            metric=lambda name, value: self.counts.update({f"remediate:{name}": int(value)}),
        )

    def notifier(self) -> Notifier:
        endpoint = self.local.moto.endpoint_url
        webhook = SecretWebhook(aws_client("secretsmanager", endpoint), self.channels.slack_secret)
        channels = [
            SnsChannel(aws_client("sns", endpoint), self.channels.topic_arn),
            SlackChannel(webhook, min_interval_seconds=0.0, sleep=lambda s: None),
        ]
        notices = NoticeStore(
            aws_client("dynamodb", endpoint),
            self.deployed.stack.table,
            clock=lambda: self.clock().timestamp(),
        )
        return Notifier(
            channels, notices, metric=lambda name, value: self.counts.update({f"notify:{name}": int(value)})
        )

    def updates(self, group: str) -> int:
        return sum(
            1
            for call in self.pcs.calls
            if call.operation == "UpdateComputeNodeGroup"
            and call.error is None
            and call.params.get("computeNodeGroupIdentifier") == group
        )

    # -- the rounds --

    def scaling_round(self, junk: list[Junk], rng: random.Random) -> None:
        """A genuine loop and `junk` in one shuffled batch; the loop must be detected, every junk record
        skipped or ignored as its recipe says."""
        group = self.new_group()
        now = self.now_ms()
        genuine = genuine_loop(group, now - 12 * MINUTE_MS, rng)
        messages = [(json.dumps(row), USE) for row in genuine] + [
            (render_scaling(j, group, now, rng), j.label) for j in junk
        ]
        rng.shuffle(messages)
        summary = self.deliver_records([m for m, _ in messages])
        genuine_ignored = sum(1 for row in genuine if row["status_code"] == "REGISTERED")
        labels = Counter(label for _, label in messages)
        assert summary["records"] == len(messages)
        assert summary["skipped"] == labels[SKIP], summary
        assert summary["ignored"] == labels[IGNORE] + genuine_ignored, summary
        detected = [
            e
            for e in summary["events"]
            if e["detail-type"] == "BootstrapLoopDetected" and e["detail"]["compute_node_group_id"] == group
        ]
        assert len(detected) == 1, summary["events"]
        self._tally("scaling", "records", summary, "loops detected")

    def _tally(self, handler: str, unit: str, summary: dict[str, Any], done: str) -> None:
        """Count one payload a handler accounted for: its messages, skipped (by reason) and ignored."""
        assert sum(summary["skipped_reasons"].values()) == summary["skipped"]
        self.counts.update(
            {
                f"{handler}:payloads": 1,
                f"{handler}:{unit}": summary[unit],
                f"{handler}:skipped": summary["skipped"],
                f"{handler}:ignored": summary["ignored"],
                f"{handler}:{done}": 1,
                **{f"{handler}:skipped {reason}": n for reason, n in summary["skipped_reasons"].items()},
            }
        )

    def reports_round(self, junk: list[Junk], rng: random.Random) -> None:
        """A genuine loop, then its nodes' reports with `junk` in one shuffled batch: the loop must be
        attributed to the script that failed, every junk report skipped, ignored or stored as it says."""
        group = self.new_group()
        now = self.now_ms()
        rows = genuine_loop(group, now - 12 * MINUTE_MS, rng)
        summary = self.deliver_records([json.dumps(row) for row in rows])
        assert [e["detail-type"] for e in summary["events"]] == ["BootstrapLoopDetected"]
        failed = [row["details"]["instance_id"] for row in rows if row["reason_code"] == "BOOTSTRAP_FAILED"]
        now_s = now // 1000
        genuine = [
            report(group, instance, "fail-terminate", "failed", now_s - 400 + 360 * i)
            for i, instance in enumerate(failed)
        ]
        genuine.append(report(group, failed[0], "record-boot", "succeeded", now_s - 420))
        messages = [(json.dumps(row), USE if row["outcome"] == "failed" else IGNORE) for row in genuine]
        messages += [(render_report(j, group, now_s, rng), j.label) for j in junk]
        rng.shuffle(messages)
        event = encode_subscription(
            "/pcs-lifeguard/node-reports", f"{CLUSTER}/{failed[0]}", [(now, m) for m, _ in messages]
        )
        answer = self.reports.handle_event(event).to_dict()
        labels = Counter(label for _, label in messages)
        assert answer["reports"] == len(messages)
        assert (answer["skipped"], answer["ignored"], answer["failed_runs"]) == (
            labels[SKIP],
            labels[IGNORE],
            labels[USE],
        ), answer
        (updated,) = [e for e in answer["events"] if e["detail"]["compute_node_group_id"] == group]
        assert (updated["detail"]["suspect"]["script"], updated["detail"]["revision"]) == (
            "fail-terminate",
            2,
        )
        self._tally("reports", "reports", answer, "loops attributed")

    def remediate_round(self, junk: list[Junk], rng: random.Random) -> None:
        """Mutated detections around the genuine one: only the group that looped is changed, once; the
        healthy group never; every delivery is audited, answered as a duplicate, or counted as invalid."""
        healthy = self.new_group()
        group = self.new_group()
        now = self.now_ms()
        summary = self.deliver_records(
            [json.dumps(row) for row in genuine_loop(group, now - 12 * MINUTE_MS, rng)]
        )
        (detected,) = summary["events"]
        genuine = detected["detail"]
        deliveries = [render_detection(j, genuine, healthy) for j in junk]
        deliveries.insert(
            rng.randrange(len(deliveries) + 1), {"detail-type": "BootstrapLoopDetected", "detail": genuine}
        )
        controller = self.remediator()
        invalid_before = self.counts["remediate:InvalidEvents"] + self.counts["remediate:DuplicateDetections"]
        for delivery in deliveries:
            controller.handle_event(delivery, remaining_ms=600_000)
        assert self.updates(healthy) == 0
        assert self.updates(group) == 1
        config = self.pcs_client().get_compute_node_group(
            clusterIdentifier=CLUSTER, computeNodeGroupIdentifier=group
        )
        assert (
            config["computeNodeGroup"]["nodeLifecycleActions"]["stages"]["nodeBootstrapped"][0]["onError"]
            == "STOP_SEQUENCE"
        )
        store = RemediationStore(self.deployed.wiring.store.client, self.deployed.stack.table)
        audited = len(store.history(CLUSTER, group)) + len(store.history(CLUSTER, healthy))
        unaudited = (
            self.counts["remediate:InvalidEvents"]
            + self.counts["remediate:DuplicateDetections"]
            - invalid_before
        )
        duplicates = sum(
            1
            for entry in store.history(CLUSTER, group) + store.history(CLUSTER, healthy)
            if entry.decision == "duplicate"
        )
        assert audited - duplicates + unaudited == len(deliveries), (
            audited,
            duplicates,
            unaudited,
            len(deliveries),
        )
        self.counts.update({"remediate:detections": len(deliveries), "remediate:groups changed": 1})

    def notify_round(self, junk: list[Junk]) -> None:
        """Broken events around a genuine one: nothing escapes, the genuine one reaches SNS and Slack, and
        every message sent stays within SNS's and Slack's limits."""
        genuine = notice_event()
        events = [render_notice(j, genuine) for j in junk] + [genuine]
        controller = self.notifier()
        before = len(self.slack.messages)
        outcomes: Counter[str] = Counter()
        for event in events:
            result = controller.handle_event(event).to_dict()
            outcomes[
                "failed"
                if result["failed"]
                else "sent"
                if result["sent"]
                else "already"
                if result["already_sent"]
                else "invalid"
            ] += 1
        assert outcomes["failed"] == 0
        sns = self.channels.received_sns(self.local.client("sqs"))
        slack = self.slack.messages[before:]
        for message in sns:
            assert len(message["subject"]) <= SUBJECT_MAX_CHARS
            assert message["subject"].isascii()
            assert len(message["message"].encode()) <= SNS_MAX_BYTES
        for message in slack:
            assert len(message["blocks"]) <= MAX_BLOCKS
            assert len(message["blocks"][0]["text"]["text"]) <= HEADER_MAX_CHARS
            assert all(len(b.get("text", {}).get("text", "")) <= SECTION_MAX_CHARS for b in message["blocks"])
        assert any(genuine["detail"]["episode_id"] in m["blocks"][-1]["elements"][0]["text"] for m in slack)
        self.counts.update({"notify:events": len(events), **{f"notify:{k}": v for k, v in outcomes.items()}})

    def pcs_client(self) -> Any:
        return aws_client("pcs", self.pcs_endpoint)


def notice_event() -> dict[str, Any]:
    """A genuine RemediationApplied of a fresh episode."""
    event = applied_event(episode=f"ep-{uuid.uuid4().hex[:16]}")
    assert clean_detail(event["detail"])[1] == []
    return event


@contextmanager
def world(local: Any) -> Iterator[World]:
    """A World on the local AWS `local` (its moto), with a local PCS of its own."""
    monkeypatch = pytest.MonkeyPatch()
    clock = ManualClock(START)
    pcs = LocalPcs(clock=clock, update_seconds=0)
    try:
        with serve_local_pcs(pcs) as server, serve_slack() as slack:
            pcs.add_cluster("hostile", cluster_id=CLUSTER)
            monkeypatch.setenv("LIFEGUARD_DEFAULT_MODE", "quarantine")
            deployed = deploy(local, monkeypatch, server.endpoint_url, "hostile")
            now = lambda: clock().timestamp()  # noqa: E731 - the handlers run on the records' clock
            channels = create_notification_channels(
                local.client("sns"),
                local.client("sqs"),
                local.client("secretsmanager"),
                f"hostile-{uuid.uuid4().hex[:8]}",
                slack.url,
            )
            yield World(
                local,
                pcs,
                clock,
                deployed,
                server.endpoint_url,
                build_scaling_events(deployed.wiring, clock=now),
                build_node_reports(deployed.wiring, clock=now),
                slack,
                channels,
                Counter(),
            )
            local.client("dynamodb").delete_table(TableName=deployed.stack.table)
    finally:
        monkeypatch.undo()
