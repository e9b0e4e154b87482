"""The scaling_events handler's throughput on 100,000 records, against a bare loop over the same batches.

The load is a large, mostly healthy cluster: 10 compute node groups scaling up by 25,000 nodes within
half an hour (LAUNCHED, REGISTERED, ACTIVE, then TERMINATED/SCHEDULER_REQUESTED each), with one group in
a bootstrap-failure loop for four minutes. It arrives as CloudWatch Logs subscription batches of 1,000
records. The baseline only decodes each batch (base64, gzip, JSON) and json-parses every message; the
handler does all of its work against the local AWS (moto in its own process, the local PCS endpoint).
Also reports the share of time spent waiting on the local AWS, counts AWS calls, and checks that records
that need none (REGISTERED, PENDING_REPLACEMENT, TERMINATED/SCHEDULER_REQUESTED) make none.
BENCH_RECORDS=N changes the size; BENCH_PROFILE=1 profiles the first pass.
"""

from __future__ import annotations

import base64
import cProfile
import gc
import gzip
import json
import os
import pstats
import statistics
import sys
import time
from collections import Counter
from datetime import UTC, datetime, timedelta
from typing import Any

from lifeguard.aws.clients import aws_client
from lifeguard.aws.eventbridge import EventPublisher
from lifeguard.aws.pcs import PcsGateway
from lifeguard.detection import DetectionSettings
from lifeguard.handlers.scaling_events import ScalingEventsHandler
from lifeguard.handlers.updater import GroupUpdater
from lifeguard.log_subscription import encode_subscription
from lifeguard.store.groups import GroupStore
from lifeguard_cli.local import LocalPcs, ManualClock, local_aws
from lifeguard_cli.local.stack import create_stack

RECORDS = int(os.environ.get("BENCH_RECORDS", "100000"))
BATCH = 1_000
GROUPS = 10
CLUSTER = "pcs_benchclu01"
START = datetime(2026, 10, 21, 2, 0, tzinfo=UTC)
START_MS = int(START.timestamp() * 1000)
SPAN_MS = 30 * 60 * 1000
# The handler judges record times against the invocation's clock: here, the end of the stream.
STREAM_END_S = (START_MS + SPAN_MS + 900_000) / 1000


def _record(group: int, instance: str, status: str, reason: str, at: int) -> dict[str, Any]:
    return {
        "resource_id": CLUSTER,
        "resource_type": "PCS_CLUSTER",
        "event_timestamp": at,
        "compute_node_group_id": f"pcs_benchgrp{group:02d}",
        "scheduler_node_id": f"g{group}-dy-c7i-{instance[-5:]}",
        "status_code": status,
        "reason_code": reason,
        "description": "bench",
        "details": {
            "instance_id": instance,
            "instance_type": "c7i.large",
            "subnet_id": "subnet-0123456789abcdef0",
        },
    }


def _records() -> list[dict[str, Any]]:
    rows = []
    nodes = RECORDS // 4
    for n in range(nodes):
        group = n % GROUPS
        instance = f"i-{n:017x}"
        launched = START_MS + n * SPAN_MS // nodes
        # One group breaks for four minutes (a bad script pushed, then fixed): one loop, one resolution.
        failing = group == 0 and 10 * 60_000 <= launched - START_MS < 14 * 60_000
        ending = ("TERMINATED", "BOOTSTRAP_FAILED") if failing else ("ACTIVE", "BOOTSTRAP_SUCCESS")
        rows += [
            _record(group, instance, "LAUNCHED", "SCHEDULER_REQUESTED", launched),
            _record(group, instance, "REGISTERED", "REGISTER_SUCCESS", launched + 80_000),
            _record(group, instance, *ending, launched + 150_000),
            _record(group, instance, "TERMINATED", "SCHEDULER_REQUESTED", launched + 900_000),
        ]
    rows.sort(key=lambda row: row["event_timestamp"])
    return rows


def _batches(rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
    stream = f"AWSLogs/PCS/{CLUSTER}/node_lifecycle.log"
    return [
        encode_subscription(
            "/aws/vendedlogs/pcs",
            stream,
            [(r["event_timestamp"], json.dumps(r)) for r in rows[i : i + BATCH]],
        )
        for i in range(0, len(rows), BATCH)
    ]


class _Instant:
    """DynamoDB, PCS and EventBridge answering instantly and holding nothing: what is left is the
    handler's own work (its decisions are not what is measured here, its cost is)."""

    def transact_write_items(self, **request: Any) -> dict[str, Any]:
        return {}

    def batch_get_item(self, **request: Any) -> dict[str, Any]:
        return {"Responses": {}}

    def get_item(self, **request: Any) -> dict[str, Any]:
        return {}

    def put_item(self, **request: Any) -> dict[str, Any]:
        return {}

    def query(self, **request: Any) -> dict[str, Any]:
        return {"Items": []}

    def put_events(self, **request: Any) -> dict[str, Any]:
        return {"Entries": [{} for _ in request["Entries"]]}

    def list_compute_node_groups(self, **request: Any) -> dict[str, Any]:
        groups = [
            {
                "id": f"pcs_benchgrp{g:02d}",
                "name": f"bench-{g}",
                "status": "ACTIVE",
                "modifiedAt": START - timedelta(hours=1),
            }
            for g in range(GROUPS)
        ]
        return {"computeNodeGroups": groups}

    def get_compute_node_group(self, **request: Any) -> dict[str, Any]:
        group = request["computeNodeGroupIdentifier"]
        return {
            "computeNodeGroup": {
                "clusterId": CLUSTER,
                "id": group,
                "name": group,
                "status": "ACTIVE",
                "arn": f"arn:aws:pcs:us-east-1:123456789012:cluster/{CLUSTER}/computenodegroup/{group}",
                "modifiedAt": START - timedelta(hours=1),
            }
        }

    def list_tags_for_resource(self, **request: Any) -> dict[str, Any]:
        return {"tags": {}}


def _own_cost(batches: list[dict[str, Any]]) -> tuple[float, float]:
    """Seconds for the handler against instant AWS, and for the bare loop, on the same batches."""
    instant = _Instant()
    store = GroupStore(instant, "bench")
    controller = ScalingEventsHandler(
        store,
        PcsGateway(instant),
        GroupUpdater(store, EventPublisher(instant, "bench")),
        DetectionSettings("notify", 2, 60),
        clock=lambda: STREAM_END_S,
    )
    started = time.perf_counter()
    for event in batches:
        controller.handle_event(event)
    handler_s = time.perf_counter() - started
    started = time.perf_counter()
    _bare(batches)
    return handler_s, time.perf_counter() - started


def _bare(batches: list[dict[str, Any]]) -> int:
    parsed = 0
    for event in batches:
        data = json.loads(gzip.decompress(base64.b64decode(event["awslogs"]["data"])))
        for log_event in data["logEvents"]:
            json.loads(log_event["message"])
            parsed += 1
    return parsed


def main() -> int:
    print(f"building {RECORDS:,} records in batches of {BATCH:,} …", file=sys.stderr)
    rows = _records()
    batches = _batches(rows)
    # The 100,000 records this process holds for the benchmark are no part of a Lambda's heap: keep them
    # out of the garbage collector's scans, which would otherwise slow the handler, not the bare loop.
    gc.collect()
    gc.freeze()
    calls: Counter[str] = Counter()
    waited = [0.0]
    started_call: list[float] = []

    def count(event_name: str, **kwargs: Any) -> None:
        calls[event_name.rsplit(".", maxsplit=1)[-1]] += 1
        started_call.append(time.perf_counter())

    def done(**kwargs: Any) -> None:
        waited[0] += time.perf_counter() - started_call.pop()

    pcs_state = LocalPcs(clock=ManualClock(START - timedelta(hours=1)), update_seconds=60)
    with local_aws(pcs_state, separate_process=os.environ.get("BENCH_MOTO", "process") == "process") as aws:
        for group in range(GROUPS):
            if group == 0:
                aws.pcs.add_cluster("bench", cluster_id=CLUSTER)
            aws.pcs.add_compute_node_group(CLUSTER, f"bench-{group}", group_id=f"pcs_benchgrp{group:02d}")
        os.environ.update(aws.environ())
        stack = create_stack(aws.client("dynamodb"), aws.client("events"), aws.client("sqs"), "bench")
        dynamodb = aws_client("dynamodb", aws.moto.endpoint_url)
        events = aws_client("events", aws.moto.endpoint_url)
        pcs = aws_client("pcs", aws.pcs_server.endpoint_url)
        for client in (dynamodb, events, pcs):
            client.meta.events.register("before-call", count)
            client.meta.events.register("after-call", done)
        store = GroupStore(dynamodb, stack.table)
        controller = ScalingEventsHandler(
            store,
            PcsGateway(pcs),
            GroupUpdater(store, EventPublisher(events, stack.event_bus)),
            DetectionSettings("notify", 2, 60),
            clock=lambda: STREAM_END_S,
        )
        rounds = []
        # The second pass delivers 10 batches again, as at-least-once delivery does after a retry.
        for attempt, delivered in enumerate((batches, batches[40:50])):
            calls.clear()
            waited[0] = 0.0
            started = time.perf_counter()
            emitted = 0
            profiler = cProfile.Profile() if os.environ.get("BENCH_PROFILE") and attempt == 0 else None
            if profiler:
                profiler.enable()
            for index, event in enumerate(delivered, start=1):
                emitted += len(controller.handle_event(event).events)
                if index % 20 == 0:
                    print(f"  pass {attempt + 1}: {index}/{len(delivered)} batches", file=sys.stderr)
            handler_s = time.perf_counter() - started
            if profiler:
                profiler.disable()
                pstats.Stats(profiler, stream=sys.stderr).sort_stats("tottime").print_stats(25)
            bare_runs = []
            for _ in range(3):
                started = time.perf_counter()
                _bare(delivered)
                bare_runs.append(time.perf_counter() - started)
            count_records = len(delivered) * BATCH
            rounds.append(
                (count_records, handler_s, statistics.median(bare_runs), dict(calls), emitted, waited[0])
            )
        quiet = [
            r
            for r in rows
            if r["status_code"] in ("REGISTERED", "PENDING_REPLACEMENT")
            or (r["reason_code"] == "SCHEDULER_REQUESTED" and r["status_code"] == "TERMINATED")
        ][:5000]
        calls.clear()
        for i in range(0, len(quiet), BATCH):
            controller.handle_event(
                encode_subscription(
                    "/aws/vendedlogs/pcs",
                    "s",
                    [(r["event_timestamp"], json.dumps(r)) for r in quiet[i : i + BATCH]],
                )
            )
        quiet_calls = sum(calls.values())
        # The floor the local AWS sets: the one conditional write of the ten groups' states that a batch
        # needs (moto copies the whole table for every item of a transaction).
        keys = [(CLUSTER, f"pcs_benchgrp{g:02d}") for g in range(GROUPS)]
        states = list(GroupStore(dynamodb, stack.table).load_many(keys).values())
        writer = GroupStore(dynamodb, stack.table)
        started = time.perf_counter()
        for _ in range(20):
            assert not writer.save_many(states)
        write_ms = (time.perf_counter() - started) / 20 * 1000

    print(f"\n{RECORDS:,} scaling-log records, {len(batches)} batches of {BATCH:,}, {GROUPS} groups")
    for label, (n, handler_s, bare_s, made, emitted, aws_s) in zip(
        ("all batches", "10 again"), rounds, strict=True
    ):
        print(
            f"  {label:<19} handler {n / handler_s:>9,.0f} records/s   bare loop {n / bare_s:>9,.0f}"
            f" records/s   ratio {handler_s / bare_s:5.2f}x   events {emitted}"
        )
        own = handler_s - aws_s
        print(
            f"  {'':<19} {100 * aws_s / handler_s:.0f}% waiting on the local AWS; without it the ratio is"
            f" {own / bare_s:.2f}x"
        )
        print(f"  {'':<19} AWS calls: " + ", ".join(f"{name} {n}" for name, n in sorted(made.items())))
    print(f"  records that need no AWS call: {len(quiet):,} of them made {quiet_calls} calls")
    bare_batch_ms = rounds[0][2] / len(batches) * 1000
    print(
        f"  the local AWS's floor: the batch's one conditional write of {GROUPS} group states takes"
        f" {write_ms:.1f} ms, {write_ms / bare_batch_ms:.1f}x the bare loop's {bare_batch_ms:.1f} ms"
        " for the whole batch"
    )
    handler_s, bare_s = _own_cost(batches)
    print(
        f"  with AWS answering instantly (the handler's own work): {RECORDS / handler_s:,.0f} records/s,"
        f" ratio {handler_s / bare_s:.2f}x"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
