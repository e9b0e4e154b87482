"""The scaling_events handler's cost against a bare loop over the same batches, at any number of groups
and any batch size.

The load is a large, mostly healthy cluster: its compute node groups scaling up within half an hour
(LAUNCHED, REGISTERED, ACTIVE, then TERMINATED/SCHEDULER_REQUESTED for each node), with one group in a
bootstrap-failure loop for four minutes (one detection, one resolution). It arrives as CloudWatch Logs
subscription batches. Each cell of the table is the handler's time over the bare loop's on the same
batches (lower is better); the bare loop only decodes a batch (base64, gzip, JSON), json-parses every
message and keeps the statuses the handler acts on. The handler runs against AWS answering instantly from
memory (`_InstantAws`): DynamoDB holds what it was written, as a table does, so the state reads and writes
are of their real size; PCS lists a cluster's groups in pages as PCS does. What is timed is the handler's
own work: the time the in-memory AWS takes to answer (its own bookkeeping, which a real service does on
its own machines) is taken out; the garbage collection a batch leaves for after it (the handler pauses
the collector while it reads one) is counted in, wherever it runs. Not timed, though they run in the
function: the AWS SDK's side of each call (the in-memory AWS takes the requests as the clients would;
botocore's validating, serializing, signing and parsing cost about 0.9 ms for a TransactWriteItems of six
updates, `--local-aws` includes them) and Powertools' wrapper of the handler (`app.lambda_handler`: +23% at
10 groups and batches of ten). Each batch is timed on both sides in turn, so machine noise hits both alike.
The AWS calls a batch makes are counted by operation. A batch of 10,000 is an upper bound: a delivery
carries at most one PutLogEvents batch (1 MiB), about 2,500 of these records.

    .venv/bin/python bench/ingest.py                       # groups 1-1,000 × batch 10-10,000 (1-2 minutes)
    .venv/bin/python bench/ingest.py --groups 1000 --batch 10 [--records 40000] [--profile]
    .venv/bin/python bench/ingest.py --memory              # peak memory at 1,000 groups, fresh processes
    .venv/bin/python bench/ingest.py --local-aws           # against moto and the local PCS, over HTTP
    .venv/bin/python bench/ingest.py --json
    .venv/bin/python bench/ingest.py --wired               # built by lifeguard.wiring, its lookups included
    .venv/bin/python bench/ingest.py --phases              # the handler's own time split by phase

`--phases` splits the handler's own time into reading the records (decode, parse, validate, filter),
deciding (the detection's work on each group's state), writing the states (the updates' own work, not the
answer) and the rest, each over the bare loop's time: where a cell's ratio comes from, and what it would
be if the writes cost nothing (its "all but the writes"). It also times `BookkeepingFloor` against the bare
loop on the same batches: a stand-in that reads the records as the handler does and keeps each group's
launches and outcomes, writing their updates, and nothing else (no detection, proof, episode, PCS read or
event). Its ratio is the least any handler keeping that state costs; what the handler has over it is what
the rest of its work costs.

`--memory` runs the 1,000-group workload (batches of 10,000, one batch in memory at a time, as a function
holds its event) in a fresh process and reports its peak RSS, the whole process as Lambda counts it, then
in a second one the Python heap's peak under tracemalloc and what the handler holds once done (its state
cache included). `--local-aws` is the end-to-end run: 100,000 records in batches of 1,000 over 10 groups
by default, the share of time spent waiting on the local AWS, a re-delivery of 10 batches, and the check
that records needing no AWS call make none (`BENCH_MOTO=thread` runs moto in this process).
"""

from __future__ import annotations

import argparse
import base64
import cProfile
import functools
import gc
import gzip
import heapq
import itertools
import json
import logging
import operator
import os
import pstats
import re
import resource
import subprocess
import sys
import tempfile
import textwrap
import time
import tracemalloc
from collections import Counter
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import asdict, dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

from lifeguard.aws.eventbridge import EventPublisher
from lifeguard.aws.pcs import PcsGateway
from lifeguard.detection import DetectionSettings
from lifeguard.handlers.batch import collector_paused
from lifeguard.handlers.scaling_events import BatchSummary, ScalingEventsHandler
from lifeguard.handlers.updater import GroupUpdater
from lifeguard.log_subscription import decode_subscription, encode_subscription
from lifeguard.scaling_log import ScalingLogParseError, read_scaling_log_message
from lifeguard.store.groups import GroupStore
from lifeguard.wiring import settle_collector

ROOT = Path(__file__).resolve().parent.parent
GROUPS = (1, 10, 100, 1_000)
BATCHES = (10, 100, 1_000, 10_000)
RECORDS = 40_000
MEMORY_GROUPS, MEMORY_BATCH, MEMORY_RECORDS = 1_000, 10_000, 100_000
LOCAL_GROUPS, LOCAL_BATCH, LOCAL_RECORDS = 10, 1_000, 100_000
MB = 1024 * 1024
CLUSTER = "pcs_benchclu01"
TABLE = "bench-state"
START = datetime(2026, 10, 21, 2, 0, tzinfo=UTC)
START_MS = int(START.timestamp() * 1000)
SPAN_MS = 30 * 60 * 1000
FAILING_MS = (10 * 60_000, 14 * 60_000)  # one group's bad script, pushed then fixed
# The handler judges record times against the invocation's clock: here, the end of the stream.
STREAM_END_S = (START_MS + SPAN_MS + 900_000) / 1000
# (status, reason, ms after launch) of a healthy node's records, in order; a failing node ends
# TERMINATED/BOOTSTRAP_FAILED where a healthy one becomes ACTIVE.
LIFE = (
    ("LAUNCHED", "SCHEDULER_REQUESTED", 0),
    ("REGISTERED", "REGISTER_SUCCESS", 80_000),
    ("ACTIVE", "BOOTSTRAP_SUCCESS", 150_000),
    ("TERMINATED", "SCHEDULER_REQUESTED", 900_000),
)
# What the bare loop keeps, as the handler does before it looks at reasons (REGISTERED is most records).
ACTED_ON = frozenset({"LAUNCHED", "ACTIVE", "TERMINATED"})
# The columns of the calls table, in the order a batch makes them; other operations follow by name.
SHORT_NAMES = {
    "BatchGetItem": "BatchGet",
    "GetItem": "GetItem",
    "Query": "Query",
    "ListComputeNodeGroups": "ListGrps",
    "GetComputeNodeGroup": "GetGroup",
    "ListTagsForResource": "ListTags",
    "TransactWriteItems": "TxWrite",
    "PutItem": "PutItem",
    "UpdateItem": "Update",
    "BatchWriteItem": "BatchWrt",
    "PutEvents": "PutEvts",
}


def group_ids(count: int) -> list[str]:
    """`count` distinct group ids as PCS makes them: `pcs_` and ten lowercase letters or digits."""
    return [f"pcs_bench{g:05d}" for g in range(count)]


def _lifecycle() -> dict[str, Any]:
    """Every group's configuration: one of the article's, so states carry a real one."""
    path = ROOT / "events" / "configs" / "article-reverted.json"
    lifecycle: dict[str, Any] = json.loads(path.read_text(encoding="utf-8"))
    return lifecycle


def _record(group: str, n: int, status: str, reason: str, at: int) -> dict[str, Any]:
    instance = f"i-{n:017x}"
    return {
        "resource_id": CLUSTER,
        "resource_type": "PCS_CLUSTER",
        "event_timestamp": at,
        "compute_node_group_id": group,
        "scheduler_node_id": f"{group[-5:]}-dy-c7i-{n:05x}",
        "status_code": status,
        "reason_code": reason,
        "description": "bench",
        "details": {
            "instance_id": instance,
            "instance_type": "c7i.large",
            "subnet_id": "subnet-0123456789abcdef0",
        },
    }


def record_count(wanted: int) -> int:
    """How many records `records` makes when asked for `wanted`: whole nodes of four."""
    return 4 * max(1, wanted // 4)


def records(groups: Sequence[str], count: int) -> Iterator[dict[str, Any]]:
    """About `count` records (whole nodes, four records each) in time order, made as they are read.

    Nodes launch evenly over half an hour, spread over the groups in turn. While the first group's script
    is broken, every tenth node is that group's and fails, so it loops at any number of groups."""
    nodes = record_count(count) // 4

    def node(n: int) -> tuple[str, int, bool]:
        launched = START_MS + n * SPAN_MS // nodes
        in_window = FAILING_MS[0] <= launched - START_MS < FAILING_MS[1]
        group = 0 if in_window and n % 10 == 0 else n % len(groups)
        return groups[group], launched, in_window and group == 0

    def stream(status: str, reason: str, after_ms: int) -> Iterator[tuple[int, dict[str, Any]]]:
        for n in range(nodes):
            group, launched, failing = node(n)
            if failing and status == "ACTIVE":
                status_now, reason_now = "TERMINATED", "BOOTSTRAP_FAILED"
            else:
                status_now, reason_now = status, reason
            yield launched + after_ms, _record(group, n, status_now, reason_now, launched + after_ms)

    # Each stream is in time order: merging them is the whole sort, one node's records at a time.
    for _, row in heapq.merge(*(stream(*step) for step in LIFE), key=lambda pair: pair[0]):
        yield row


def batches(rows: Iterable[dict[str, Any]], size: int) -> Iterator[dict[str, Any]]:
    """The rows as CloudWatch Logs subscription events of `size` records, made as they are read."""
    stream = f"AWSLogs/PCS/{CLUSTER}/node_lifecycle.log"
    for chunk in itertools.batched(rows, size):
        messages = [(row["event_timestamp"], json.dumps(row)) for row in chunk]
        event = encode_subscription("/aws/vendedlogs/pcs", stream, messages)
        del chunk, messages  # while the handler has the event, only the event is held
        yield event


def bare(event: dict[str, Any]) -> int:
    """The baseline: decode one batch, parse every message, keep the statuses acted on."""
    data = json.loads(gzip.decompress(base64.b64decode(event["awslogs"]["data"])))
    kept = 0
    for log_event in data["logEvents"]:
        if json.loads(log_event["message"]).get("status_code") in ACTED_ON:
            kept += 1
    return kept


COMPARISON = re.compile(r"([#\w.]+)\s*(=|<>|<=|>=|<|>)\s*(:\w+)")
COMPARE: dict[str, Callable[[Any, Any], bool]] = {
    "=": operator.eq,
    "<>": operator.ne,
    "<": operator.lt,
    "<=": operator.le,
    ">": operator.gt,
    ">=": operator.ge,
}


def _resolve(item: dict[str, Any], path: str, names: dict[str, str]) -> Any:
    """The attribute value at `path` (`a.#b`) of an item, or None."""
    value: Any = {"M": item}
    for step in path.split("."):
        value = value.get("M", {}).get(names.get(step, step)) if isinstance(value, dict) else None
        if value is None:
            return None
    return value


def _scalar(value: dict[str, Any]) -> Any:
    """An attribute value as Python compares it (numbers as numbers)."""
    ((kind, inner),) = value.items()
    return float(inner) if kind == "N" else inner


def _client_error(operation: str, code: str) -> Exception:
    from botocore.exceptions import ClientError

    return ClientError({"Error": {"Code": code, "Message": "bench"}}, operation)


def _answer(
    operation: str,
) -> Callable[[Callable[..., dict[str, Any]]], Callable[..., dict[str, Any]]]:
    """Count a call of the instant AWS, and the time it took to answer (no part of the handler's own work:
    a real service answers on its own machines)."""

    def wrap(method: Callable[..., dict[str, Any]]) -> Callable[..., dict[str, Any]]:
        @functools.wraps(method)
        def answered(self: _InstantAws, **request: Any) -> dict[str, Any]:
            self.calls[operation] += 1
            started = time.perf_counter()
            try:
                return method(self, **request)
            finally:
                self.seconds += time.perf_counter() - started

        return answered

    return wrap


class _InstantAws:
    """DynamoDB, PCS and EventBridge answering at once from memory, one object for all three clients.

    It holds the table's items as DynamoDB does (a read returns what the last write wrote, and a write's
    version condition is checked), lists a cluster's groups in pages of `maxResults` (PCS's default 10, at
    most 100), and counts calls by operation. The handler's decisions are not what is measured here, its
    cost is."""

    def __init__(self, groups: Sequence[str]) -> None:
        self.calls: Counter[str] = Counter()
        self.seconds = 0.0  # answering, in all
        self._items: dict[str, dict[str, dict[str, Any]]] = {}  # pk -> sk -> item
        modified = START - timedelta(hours=1)
        lifecycle = _lifecycle()
        self._groups: dict[str, dict[str, Any]] = {
            group: {
                "clusterId": CLUSTER,
                "id": group,
                "name": f"bench-{group[-5:]}",
                "status": "ACTIVE",
                "arn": f"arn:aws:pcs:us-east-1:123456789012:cluster/{CLUSTER}/computenodegroup/{group}",
                "createdAt": modified,
                "modifiedAt": modified,
                "nodeLifecycleActions": lifecycle,
            }
            for group in groups
        }
        listed = ("name", "id", "arn", "clusterId", "createdAt", "modifiedAt", "status")
        self._summaries = [{key: group[key] for key in listed} for group in self._groups.values()]

    def __getattr__(self, name: str) -> Any:
        raise AttributeError(f"bench/ingest.py's instant AWS does not answer {name}: add it to _InstantAws")

    # -- DynamoDB --

    def _get(self, key: dict[str, Any]) -> dict[str, Any] | None:
        return self._items.get(key["pk"]["S"], {}).get(key["sk"]["S"])

    def _holds(self, request: dict[str, Any], key: dict[str, Any]) -> bool:
        """Whether the request's condition holds: terms joined by OR and AND, each `attribute_exists(a)`,
        `attribute_not_exists(a)` or `a <op> :v` (as the stores write them, names through `#` placeholders).
        A term this fake cannot read holds: the write goes through."""
        condition = request.get("ConditionExpression")
        if not condition:
            return True
        item = self._get(key) or {}
        names = request.get("ExpressionAttributeNames", {})
        values = request.get("ExpressionAttributeValues", {})

        def holds(term: str) -> bool:
            function, _, argument = term.partition("(")
            if function in ("attribute_exists", "attribute_not_exists"):
                found = _resolve(item, argument.rstrip(")"), names) is not None
                return found == (function == "attribute_exists")
            match = COMPARISON.fullmatch(term)
            if match is None:
                return True
            path, operator, placeholder = match.groups()
            current, wanted = _resolve(item, path, names), values.get(placeholder)
            if current is None or wanted is None:
                return operator == "<>"
            return COMPARE[operator](_scalar(current), _scalar(wanted))

        return any(
            all(holds(term.strip()) for term in either.split(" AND ")) for either in condition.split(" OR ")
        )

    def _put(self, item: dict[str, Any]) -> None:
        self._items.setdefault(item["pk"]["S"], {})[item["sk"]["S"]] = item

    def _update(self, request: dict[str, Any]) -> dict[str, Any]:
        """`SET a = :x, a.b = :y REMOVE a.c ADD n :one` on the item (made when missing); containers on
        the way are copied, so no item handed out before changes under its reader."""
        key = request["Key"]
        item = dict(self._get(key) or key)
        names = request.get("ExpressionAttributeNames", {})
        values = request.get("ExpressionAttributeValues", {})
        copied: set[tuple[str, ...]] = set()
        clauses = re.split(r"\b(SET|REMOVE|ADD|DELETE)\s", request["UpdateExpression"])
        for action, body in zip(clauses[1::2], clauses[2::2], strict=True):
            for action_part in (part.strip() for part in body.split(",")):
                path, _, value = action_part.replace(" = ", " ").partition(" ")
                *parents, leaf = [names.get(step, step) for step in path.split(".")]
                target = item
                for depth, parent in enumerate(parents):
                    if tuple(parents[: depth + 1]) not in copied:
                        copied.add(tuple(parents[: depth + 1]))
                        target[parent] = {"M": dict(target[parent]["M"])}
                    target = target[parent]["M"]
                if action == "SET":
                    target[leaf] = values[value.strip()]
                elif action == "REMOVE":
                    target.pop(leaf, None)
                elif action == "ADD":
                    total = float(target.get(leaf, {"N": "0"})["N"]) + float(values[value.strip()]["N"])
                    target[leaf] = {"N": f"{total:g}"}
        self._put(item)
        return item

    @_answer("GetItem")
    def get_item(self, **request: Any) -> dict[str, Any]:
        item = self._get(request["Key"])
        return {"Item": item} if item is not None else {}

    @_answer("PutItem")
    def put_item(self, **request: Any) -> dict[str, Any]:
        if not self._holds(request, request["Item"]):
            raise _client_error("PutItem", "ConditionalCheckFailedException")
        self._put(request["Item"])
        return {}

    @_answer("UpdateItem")
    def update_item(self, **request: Any) -> dict[str, Any]:
        if not self._holds(request, request["Key"]):
            raise _client_error("UpdateItem", "ConditionalCheckFailedException")
        item = self._update(request)
        return {"Attributes": item} if request.get("ReturnValues", "NONE") != "NONE" else {}

    @_answer("DeleteItem")
    def delete_item(self, **request: Any) -> dict[str, Any]:
        if not self._holds(request, request["Key"]):
            raise _client_error("DeleteItem", "ConditionalCheckFailedException")
        self._items.get(request["Key"]["pk"]["S"], {}).pop(request["Key"]["sk"]["S"], None)
        return {}

    @_answer("BatchGetItem")
    def batch_get_item(self, **request: Any) -> dict[str, Any]:
        responses = {
            table: [item for key in asked["Keys"] if (item := self._get(key)) is not None]
            for table, asked in request["RequestItems"].items()
        }
        return {"Responses": responses, "UnprocessedKeys": {}}

    @_answer("BatchWriteItem")
    def batch_write_item(self, **request: Any) -> dict[str, Any]:
        for writes in request["RequestItems"].values():
            for write in writes:
                self._put(write["PutRequest"]["Item"])
        return {"UnprocessedItems": {}}

    @_answer("TransactWriteItems")
    def transact_write_items(self, **request: Any) -> dict[str, Any]:
        writes = [(kind, fields) for write in request["TransactItems"] for kind, fields in write.items()]
        if not all(self._holds(fields, fields.get("Item") or fields["Key"]) for _, fields in writes):
            raise _client_error("TransactWriteItems", "TransactionCanceledException")
        for kind, fields in writes:
            if kind == "Put":
                self._put(fields["Item"])
            elif kind == "Update":
                self._update(fields)
            elif kind == "Delete":
                self._items.get(fields["Key"]["pk"]["S"], {}).pop(fields["Key"]["sk"]["S"], None)
        return {}

    @_answer("Query")
    def query(self, **request: Any) -> dict[str, Any]:
        values = request["ExpressionAttributeValues"]
        prefix = values.get(":prefix", {}).get("S", "")
        partition = self._items.get(values[":pk"]["S"], {})
        found = [partition[sk] for sk in sorted(partition) if sk.startswith(prefix)]
        if request.get("ScanIndexForward") is False:
            found.reverse()
        return {"Items": found[: request.get("Limit", len(found))]}

    # -- EventBridge --

    @_answer("PutEvents")
    def put_events(self, **request: Any) -> dict[str, Any]:
        return {"FailedEntryCount": 0, "Entries": [{"EventId": "bench"} for _ in request["Entries"]]}

    # -- PCS --

    @_answer("ListComputeNodeGroups")
    def list_compute_node_groups(self, **request: Any) -> dict[str, Any]:
        size = min(100, request.get("maxResults") or 10)
        start = int(request.get("nextToken", 0))
        page = self._summaries[start : start + size]
        more = start + size < len(self._summaries)
        return {"computeNodeGroups": page, **({"nextToken": str(start + size)} if more else {})}

    @_answer("GetComputeNodeGroup")
    def get_compute_node_group(self, **request: Any) -> dict[str, Any]:
        group = self._groups.get(request["computeNodeGroupIdentifier"])
        if group is None:
            raise _client_error("GetComputeNodeGroup", "ResourceNotFoundException")
        return {"computeNodeGroup": dict(group)}

    @_answer("ListTagsForResource")
    def list_tags_for_resource(self, **request: Any) -> dict[str, Any]:
        return {"tags": {}}


def build_handler(aws: Any) -> ScalingEventsHandler:
    """The handler over `aws` for all three services, as the function wires it (notify, 2 in 60 min)."""
    store = GroupStore(aws, TABLE)
    return ScalingEventsHandler(
        store,
        PcsGateway(aws),
        GroupUpdater(store, EventPublisher(aws, "bench")),
        DetectionSettings("notify", 2, 60),
        clock=lambda: STREAM_END_S,
    )


def build_wired(aws: Any) -> ScalingEventsHandler:
    """The handler as the function's composition root builds it (`lifeguard.wiring`), with the lookups it
    adds (quarantines and changes, read from the table) and the same settings."""
    from lifeguard.wiring import build_scaling_events, wire

    def clients(service: str, *, attempts: int = 5) -> Any:
        return aws

    wiring = wire(TABLE, "bench", clients=clients, defaults=DetectionSettings("notify", 2, 60))
    return build_scaling_events(wiring, clock=lambda: STREAM_END_S)


@dataclass
class Cell:
    """One workload's figures: the handler against the bare loop on the same batches."""

    groups: int
    batch: int
    records: int
    batches: int
    handler_s: float  # the handler's own work: its time, less the instant AWS's answering
    bare_s: float
    events: dict[str, int]  # published, by detail-type
    calls: dict[str, int]
    aws_s: float = 0.0  # the instant AWS's answering, taken out of handler_s
    # Python's garbage collector outside the handler's calls, in handler_s (`_Collections`).
    collector_s: float = 0.0
    # With --phases: the handler's own time by phase (`PHASES`), the instant AWS's answering taken out.
    phases: dict[str, float] | None = None
    group_batches: int = 0  # the groups the batches touched, counted once a batch (with --phases)
    floor_ratio: float | None = None  # with --phases: `BookkeepingFloor`'s ratio on the same batches

    @property
    def ratio(self) -> float:
        """The handler's own time over the bare loop's."""
        return self.handler_s / self.bare_s

    def calls_per_batch(self) -> dict[str, float]:
        """AWS calls a batch, by operation."""
        return {name: count / self.batches for name, count in self.calls.items()}

    def to_dict(self) -> dict[str, Any]:
        """The cell for `--json`."""
        return {
            **asdict(self),
            "ratio": self.ratio,
            "handler_records_per_s": self.records / self.handler_s,
            "bare_records_per_s": self.records / self.bare_s,
            "calls_per_batch": self.calls_per_batch(),
        }


# What `--phases` calls `BookkeepingFloor`'s ratio.
FLOOR = "the bookkeeping floor (the records read, each group's launches and outcomes kept and written)"
# The handler's own work by phase (`--phases`): what each is, in the order printed.
PHASES = {
    "read": "decode the batch, parse, validate and filter its records",
    "decide": "the detection's work on each group's state (its PCS reads' own work included)",
    "write": "the state writes' own work: the updates' expressions and what the store notes of them",
    "rest": "grouping the records, loading the states, publishing, collecting garbage after a batch",
}


def _timed_phases(handler: ScalingEventsHandler, aws: _InstantAws, cell: Cell) -> None:
    """Time the phases of `handler` into `cell.phases` (made a split by `_phase_split`): its methods are
    wrapped on the instance (a timer costs about 0.2 µs a call, counted in the phase it times), the instant
    AWS's answering taken out; the groups each batch touched are counted."""
    spent = cell.phases = {"batch": 0.0, "decide": 0.0, "write": 0.0}

    def timed(owner: Any, name: str, phase: str) -> None:
        method = getattr(owner, name)

        @functools.wraps(method)
        def wrapper(*args: Any, **kwargs: Any) -> Any:
            answering, started = aws.seconds, time.perf_counter()
            try:
                return method(*args, **kwargs)
            finally:
                spent[phase] += time.perf_counter() - started - (aws.seconds - answering)

        setattr(owner, name, wrapper)

    timed(handler, "_handle", "batch")  # all but reading the records
    timed(handler.updater, "_apply", "decide")
    timed(handler.store, "save_many", "write")
    update_many = handler.updater.update_many

    def counted(mutations: Any, **options: Any) -> Any:
        cell.group_batches += len(mutations)
        return update_many(mutations, **options)

    handler.updater.update_many = counted  # type: ignore[method-assign]


def _phase_split(cell: Cell) -> None:
    """`cell.phases` as timed (`_handle` holds `_apply` and `save_many`) made into `PHASES`."""
    timed = cell.phases
    assert timed is not None
    batch = timed.pop("batch")
    timed["read"] = max(0.0, cell.handler_s - cell.collector_s - batch)
    timed["rest"] = max(0.0, batch - timed["decide"] - timed["write"]) + cell.collector_s
    cell.phases = {phase: timed[phase] for phase in PHASES}


class _Collections:
    """The time Python's garbage collector takes outside the handler's calls: the handler pauses it for a
    batch (`handle_event`), so what a batch leaves is collected after it, in whatever runs next (here the
    bare loop's turn, or the loop's own bookkeeping). A function runs nothing else: that time is the
    handler's, and the part of it inside the bare loop's turn is not the bare loop's."""

    def __init__(self) -> None:
        self.where = ""  # "handler", "bare" or "" (the loop's own)
        self.outside_s = 0.0  # every collection outside the handler's calls
        self.in_bare_s = 0.0  # those inside the bare loop's turn
        self._started = 0.0

    def __call__(self, phase: str, info: dict[str, int]) -> None:
        if self.where == "handler":
            return  # inside the handler's time already
        if phase == "start":
            self._started = time.perf_counter()
            return
        spent = time.perf_counter() - self._started
        self.outside_s += spent
        if self.where == "bare":
            self.in_bare_s += spent

    def timed(self, where: str, call: Callable[[Any], Any], event: Any) -> tuple[Any, float]:
        """`call(event)`'s answer and its time, the collections during it noted as `where`'s."""
        self.where = where
        try:
            started = time.perf_counter()
            answer = call(event)
            return answer, time.perf_counter() - started
        finally:
            self.where = ""

    def charged(self, handler_s: float, bare_s: float) -> tuple[float, float]:
        """The handler's and the bare loop's times as timed, with the collections outside the handler's
        calls moved to the handler."""
        return handler_s + self.outside_s, bare_s - self.in_bare_s


def measure(
    groups: int,
    batch: int,
    records_wanted: int,
    profiler: cProfile.Profile | None = None,
    build: Callable[[Any], ScalingEventsHandler] = build_handler,
    *,
    phases: bool = False,
) -> Cell:
    """Time a fresh handler (`build` over instant AWS) and the bare loop batch by batch, in turn, over
    `records_wanted` records (at least two batches); with `phases`, its own time by phase too."""
    ids = group_ids(groups)
    count = record_count(max(records_wanted, 2 * batch))
    events = list(batches(records(ids, count), batch))
    aws = _InstantAws(ids)
    handler = build(aws)
    cell = Cell(groups, batch, count, len(events), 0.0, 0.0, {}, {})
    if phases:
        _timed_phases(handler, aws, cell)
    emitted: Counter[str] = Counter()

    def handle(event: dict[str, Any]) -> BatchSummary:
        if profiler:
            profiler.enable()
        try:
            return handler.handle_event(event)
        finally:
            if profiler:
                profiler.disable()

    def answered(summary: BatchSummary) -> None:
        emitted.update(published.detail_type for published in summary.events)

    handler_s, bare_s, collections = _in_turn(events, handle, answered)
    cell.handler_s, cell.bare_s = collections.charged(handler_s - aws.seconds, bare_s)
    cell.aws_s = aws.seconds
    cell.collector_s = collections.outside_s
    cell.events, cell.calls = dict(emitted), dict(aws.calls)
    if phases:
        _phase_split(cell)
        floor_s, floor_bare_s, collections = _in_turn(events, BookkeepingFloor())
        cell.floor_ratio = operator.truediv(*collections.charged(floor_s, floor_bare_s))
    return cell


def _in_turn[A](
    events: list[dict[str, Any]],
    handle: Callable[[Any], A],
    answered: Callable[[A], object] = lambda answer: None,
) -> tuple[float, float, _Collections]:
    """`handle` and the bare loop timed on each batch in turn (`answered` sees each answer, untimed): their
    times, and the collections to charge."""
    # The records and batches this process holds for the benchmark are no part of a Lambda's heap: keep
    # them out of the garbage collector's scans, which would otherwise slow the handler, not the bare loop.
    gc.collect()
    gc.freeze()
    handler_s = bare_s = 0.0
    collections = _Collections()
    gc.callbacks.append(collections)
    try:
        for index, event in enumerate(events):
            if index % 2:  # which side goes first alternates, so neither always finds the caches warm
                bare_s += collections.timed("bare", bare, event)[1]
            answer, spent = collections.timed("handler", handle, event)
            handler_s += spent
            answered(answer)
            if not index % 2:
                bare_s += collections.timed("bare", bare, event)[1]
    finally:
        gc.callbacks.remove(collections)
        gc.unfreeze()
    return handler_s, bare_s, collections


class BookkeepingFloor:
    """The least a handler keeping what the detection reads can cost, for `--phases`: a batch read as the
    handler reads it (`decode_subscription`, `read_scaling_log_message`), its records grouped by group, and
    each group's launches and outcomes kept in dicts, the batch making each group's update of the entries
    it changed (a placeholder each, the version's condition), as `GroupStore` writes them. Nothing else: no
    detection, proof, episode, PCS read, event, bound, cache or transaction. What the handler's ratio has
    over this one's is what all of that costs; a goal below this one's ratio takes another design."""

    def __init__(self) -> None:
        self.states: dict[tuple[str, str], tuple[dict[str, int], dict[str, str], list[int]]] = {}

    def __call__(self, event: dict[str, Any]) -> list[dict[str, Any]]:
        with collector_paused:  # as the handler reads a batch
            return self._updates(decode_subscription(event))

    def _updates(self, batch: Any) -> list[dict[str, Any]]:
        by_group: dict[tuple[str, str], list[Any]] = {}
        for message, where in batch.messages():
            record = read_scaling_log_message(message, where=where)
            if record is not None and not isinstance(record, ScalingLogParseError):
                by_group.setdefault((record.resource_id, record.compute_node_group_id), []).append(record)
        return [self._update(key, group_records) for key, group_records in by_group.items()]

    def _update(self, key: tuple[str, str], group_records: list[Any]) -> dict[str, Any]:
        launches, outcomes, version = self.states.setdefault(key, ({}, {}, [0]))
        changed: dict[tuple[str, str], int | str | None] = {}  # (map, instance) -> what it holds now
        for record in group_records:
            instance, at = record.details.instance_id, record.event_timestamp
            if record.status_code == "LAUNCHED":
                launches[instance] = changed["launches", instance] = at
                continue
            launched = launches.pop(instance, None)
            if launched is not None:
                changed["launches", instance] = None
            succeeded = int(record.status_code == "ACTIVE")
            row = f'["{record.scheduler_node_id}", {at}, {succeeded}, {launched or "null"}]'
            outcomes[instance] = changed["outcomes", instance] = row
        names = {"#v": "version"}
        values = {":expected": {"N": str(version[0])}, ":next": {"N": str(version[0] + 1)}}
        sets, removes = ["#v = :next"], []
        for n, ((name, instance), held) in enumerate(changed.items()):
            names[f"#m{n}"], names[f"#e{n}"] = name, instance
            if held is None:
                removes.append(f"#m{n}.#e{n}")
            else:
                values[f":e{n}"] = {"N": str(held)} if name == "launches" else {"S": held}
                sets.append(f"#m{n}.#e{n} = :e{n}")
        version[0] += 1
        return {
            "Key": {"pk": {"S": key[0]}, "sk": {"S": key[1]}},
            "UpdateExpression": " ".join(
                ("SET " + ", ".join(sets), *(["REMOVE " + ", ".join(removes)] if removes else []))
            ),
            "ConditionExpression": "#v = :expected",
            "ExpressionAttributeNames": names,
            "ExpressionAttributeValues": values,
        }


def _warm_up(build: Callable[[Any], ScalingEventsHandler]) -> None:
    """Run the paths that import lazily (botocore's exceptions, …) once, so no cell pays for them."""
    measure(3, 10, 400, build=build)


def _short(name: str) -> str:
    return SHORT_NAMES.get(name, name[:9])


def _print_line(cell: Cell) -> None:
    calls = ", ".join(f"{name} {n:.3g}" for name, n in sorted(cell.calls_per_batch().items()))
    print(
        f"groups {cell.groups:,} × batch {cell.batch:,}: {cell.records:,} records in {cell.batches:,}"
        f" batches; handler {cell.records / cell.handler_s:,.0f} records/s, bare loop"
        f" {cell.records / cell.bare_s:,.0f} records/s, ratio {cell.ratio:.2f}x\n"
        f"  events: {_events(cell)}\n"
        f"  AWS calls a batch: {calls or 'none'}"
    )
    if cell.phases is not None:
        print(
            f"  the handler's own time by phase, over the bare loop's time, and a group's share in a batch"
            f" ({cell.group_batches:,} groups in all the batches):"
        )
        for phase, spent in cell.phases.items():
            each = spent / cell.group_batches * 1e6 if cell.group_batches else 0.0
            print(f"    {phase:<7}{spent / cell.bare_s:>6.2f}x {each:>7.1f} µs  {PHASES[phase]}")
        print(f"  all but the writes: {(cell.handler_s - cell.phases['write']) / cell.bare_s:.2f}x")
        print(f"  {FLOOR}: {cell.floor_ratio:.2f}x")


def _print_table(cells: list[Cell], records_wanted: int) -> None:
    rows = sorted({c.groups for c in cells})
    columns = sorted({c.batch for c in cells})
    at = {(c.groups, c.batch): c for c in cells}

    def grid(title: str, value: Callable[[Cell], str]) -> None:
        print(title)
        print(f"{'groups':>8}" + "".join(f"{f'batch {b:,}':>14}" for b in columns))
        for g in rows:
            print(f"{g:>8,}" + "".join(f"{value(at[(g, b)]):>14}" for b in columns))
        print()

    print(
        "scaling_events against the bare loop (decode + parse + filter) on the same batches, timed batch"
        f" by\nbatch in turn; the handler's own work (the in-memory AWS's answering taken out);"
        f" {records_wanted:,} records\na cell (two batches at least)\n"
    )
    grid("handler time / bare-loop time (lower is better)", lambda c: f"{c.ratio:.2f}x")
    if all(c.phases is not None for c in cells):
        print("by phase, each over the bare loop's time: read / decide / write / rest (`--phases` above)")
        print(f"{'groups':>8}" + "".join(f"{f'batch {b:,}':>22}" for b in columns))
        for g in rows:
            print(f"{g:>8,}" + "".join(f"{_split(at[(g, b)]):>22}" for b in columns))
        print()
        grid(f"{FLOOR}, on the same batches", lambda c: f"{c.floor_ratio:.2f}x")
    grid(
        "handler records/s (bare loop)",
        lambda c: f"{c.records / c.handler_s / 1000:.0f}k ({c.records / c.bare_s / 1000:.0f}k)",
    )
    seen = Counter(name for c in cells for name in c.calls)
    order = [name for name in SHORT_NAMES if name in seen] + sorted(set(seen) - set(SHORT_NAMES))
    print("AWS calls a batch, by operation")
    print(f"{'groups':>6} {'batch':>6}" + "".join(f"{_short(name):>9}" for name in order) + f"{'all':>7}")
    for c in sorted(cells, key=lambda c: (c.groups, c.batch)):
        per = c.calls_per_batch()
        print(
            f"{c.groups:>6,} {c.batch:>6,}"
            + "".join(f"{_count(per.get(name, 0.0)):>9}" for name in order)
            + f"{_count(sum(per.values())):>7}"
        )
    names = [f"{_short(name)} = {name}" for name in order if _short(name) != name]
    print(textwrap.fill("(" + ", ".join(names) + ")", 100) + "\n")
    published = {_events(c) for c in cells}
    if len(published) == 1:
        print(f"events published, in every cell: {published.pop()}")
    else:
        for c in cells:
            print(f"events published at groups {c.groups:,} × batch {c.batch:,}: {_events(c)}")


def _split(cell: Cell) -> str:
    phases = cell.phases or {}
    return "/".join(f"{phases.get(phase, 0.0) / cell.bare_s:.2f}" for phase in PHASES)


def _events(cell: Cell) -> str:
    return ", ".join(f"{kind} {n}" for kind, n in sorted(cell.events.items())) or "none"


def _count(value: float) -> str:
    if value == 0:
        return "·"
    return f"{value:.3g}" if value < 100 else f"{value:,.0f}"


def _quiet_lifeguard_log() -> None:
    """The layer's log at INFO, as the function runs it, taken and dropped: a record costs what it costs
    to make, and nothing is printed over the figures."""
    log = logging.getLogger("lifeguard")
    log.setLevel(logging.INFO)
    log.addHandler(logging.NullHandler())
    log.propagate = False


def run_table(
    groups: list[int],
    sizes: list[int],
    records_wanted: int,
    *,
    as_json: bool,
    profile: bool,
    build: Callable[[Any], ScalingEventsHandler] = build_handler,
    phases: bool = False,
) -> int:
    """The cells of `groups` × `sizes`, printed as tables (as one line when there is one cell); with
    `phases`, the handler's own time by phase too (`PHASES`)."""
    _quiet_lifeguard_log()
    _warm_up(build)
    profiler = cProfile.Profile() if profile else None
    cells = []
    started = time.perf_counter()
    for g in groups:
        for b in sizes:
            cell_started = time.perf_counter()
            cells.append(measure(g, b, records_wanted, profiler, build, phases=phases))
            print(
                f"  groups {g:,} × batch {b:,}: {cells[-1].ratio:.2f}x"
                f" ({time.perf_counter() - cell_started:.1f} s)",
                file=sys.stderr,
            )
    if profiler:
        print("the handler's calls, by own time (timings above are slowed by the profiler):", file=sys.stderr)
        stats = pstats.Stats(profiler, stream=sys.stderr).sort_stats(os.environ.get("BENCH_SORT", "tottime"))
        stats.print_stats(int(os.environ.get("BENCH_ROWS", "15")))
        if os.environ.get("BENCH_CALLEES"):
            stats.print_callees(os.environ["BENCH_CALLEES"])
        if os.environ.get("BENCH_CALLERS"):
            stats.print_callers(os.environ["BENCH_CALLERS"])
    peak_rss_mb = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024 / MB
    if as_json:
        print(json.dumps({"cells": [c.to_dict() for c in cells], "peak_rss_mb": peak_rss_mb}, indent=2))
        return 0
    if len(cells) == 1:
        _print_line(cells[0])
    else:
        _print_table(cells, records_wanted)
    print(
        f"{time.perf_counter() - started:.0f} s; this process's peak RSS {peak_rss_mb:.0f} MB (the"
        " benchmark's records included: `--memory` measures the function's)"
    )
    return 0


# -- memory --


def _memory_child(groups: int, events_path: Path, traced: bool) -> dict[str, float]:
    """One run as a function makes it: boto3's three clients loaded, then one event at a time, read from
    `events_path` (a JSON line each) as the runtime hands it over."""
    from lifeguard.aws.clients import aws_client

    os.environ.setdefault("AWS_DEFAULT_REGION", "us-east-1")
    clients = [aws_client(service) for service in ("dynamodb", "pcs", "events")]
    _quiet_lifeguard_log()
    aws = _InstantAws(group_ids(groups))
    if traced:
        tracemalloc.start()
    before_mb = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024 / MB
    base = tracemalloc.get_traced_memory()[0]
    handler = build_handler(aws)
    with events_path.open(encoding="utf-8") as lines:
        for line in lines:
            handler.handle_event(json.loads(line))
    del line
    gc.collect()
    figures: dict[str, float] = {
        "before_rss_mb": before_mb,
        "peak_rss_mb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024 / MB,
    }
    if traced:
        with_handler, peak = tracemalloc.get_traced_memory()
        del handler
        gc.collect()
        without = tracemalloc.get_traced_memory()[0]
        figures |= {
            "heap_peak_mb": (peak - base) / MB,
            "handler_holds_mb": (with_handler - without) / MB,
            "table_mb": (without - base) / MB,
        }
    del clients
    return figures


def run_memory(groups: int, batch: int, records_wanted: int, *, as_json: bool) -> int:
    """The memory child twice, in fresh processes: untraced for RSS, traced for the heap."""
    figures: dict[str, float] = {}
    with tempfile.TemporaryDirectory(prefix="lifeguard-bench-") as scratch:
        events_path = Path(scratch) / "events.jsonl"
        print(f"  writing {records_wanted:,} records in batches of {batch:,} …", file=sys.stderr)
        with events_path.open("w", encoding="utf-8") as out:
            for event in batches(records(group_ids(groups), records_wanted), batch):
                out.write(json.dumps(event) + "\n")
        for traced in (False, True):
            print(f"  a fresh process{' under tracemalloc' if traced else ''} …", file=sys.stderr)
            command = [sys.executable, __file__, "--memory-child", str(events_path), "--groups", str(groups)]
            child = subprocess.run(
                command + (["--traced"] if traced else []),
                capture_output=True,
                text=True,
                check=False,
                timeout=1800,
            )
            if child.returncode != 0:
                print(f"bench/ingest.py: the memory run failed:\n{child.stderr[-3000:]}", file=sys.stderr)
                return 1
            answer = json.loads(child.stdout)
            figures |= {k: v for k, v in answer.items() if not traced or "rss" not in k}
    if as_json:
        print(json.dumps({"groups": groups, "batch": batch, "records": records_wanted, **figures}, indent=2))
        return 0
    print(
        f"scaling_events at {groups:,} groups, {records_wanted:,} records in batches of {batch:,}, one batch"
        " in memory at a time (the issue's budget: 256 MB)"
    )
    lines = (
        ("peak RSS, the whole process", "peak_rss_mb", "as Lambda counts it"),
        ("  of which before the first batch", "before_rss_mb", "Python, the layer, boto3 and 3 clients"),
        ("Python heap peak (tracemalloc)", "heap_peak_mb", "allocated beyond what was held before"),
        ("held by the handler after the run", "handler_holds_mb", "its state cache included"),
        ("the instant table's items", "table_mb", "DynamoDB's, not the function's: in both peaks"),
    )
    for label, key, note in lines:
        print(f"  {label:<36} {figures[key]:6.1f} MB  ({note})")
    return 0


# -- the local AWS --


def run_local_aws(groups: int, batch: int, records_wanted: int, *, profile: bool) -> int:
    """The handler against moto and the local PCS over HTTP: throughput, time waiting on them, AWS calls."""
    from lifeguard.aws.clients import aws_client
    from lifeguard_cli.local import LocalPcs, ManualClock, local_aws
    from lifeguard_cli.local.stack import create_stack

    _quiet_lifeguard_log()
    ids = group_ids(groups)
    print(f"building {records_wanted:,} records in batches of {batch:,} …", file=sys.stderr)
    rows = list(records(ids, records_wanted))
    events = list(batches(rows, batch))
    gc.collect()
    gc.freeze()  # as in `measure`: the benchmark's records are no part of a Lambda's heap
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
        aws.pcs.add_cluster("bench", cluster_id=CLUSTER)
        for group in ids:
            aws.pcs.add_compute_node_group(CLUSTER, f"bench-{group[-5:]}", group_id=group)
        os.environ.update(aws.environ())
        stack = create_stack(aws.client("dynamodb"), aws.client("events"), aws.client("sqs"), "bench")
        dynamodb = aws_client("dynamodb", aws.moto.endpoint_url)
        bus = aws_client("events", aws.moto.endpoint_url)
        pcs = aws_client("pcs", aws.pcs_server.endpoint_url)
        for client in (dynamodb, bus, pcs):
            client.meta.events.register("before-call", count)
            client.meta.events.register("after-call", done)
        store = GroupStore(dynamodb, stack.table)
        controller = ScalingEventsHandler(
            store,
            PcsGateway(pcs),
            GroupUpdater(store, EventPublisher(bus, stack.event_bus)),
            DetectionSettings("notify", 2, 60),
            clock=lambda: STREAM_END_S,
        )
        rounds = []
        # The second pass delivers 10 batches again, as at-least-once delivery does after a retry.
        middle = len(events) // 2
        for attempt, delivered in enumerate((events, events[middle : middle + 10])):
            calls.clear()
            waited[0] = 0.0
            profiler = cProfile.Profile() if profile and attempt == 0 else None
            handler_s = bare_s = 0.0
            emitted = 0
            collections = _Collections()  # as in `measure`: what a batch leaves to collect is the handler's
            gc.callbacks.append(collections)
            try:
                for index, event in enumerate(delivered, start=1):
                    if profiler:
                        profiler.enable()
                    summary, spent = collections.timed("handler", controller.handle_event, event)
                    emitted += len(summary.events)
                    handler_s += spent
                    if profiler:
                        profiler.disable()
                    bare_s += collections.timed("bare", bare, event)[1]
                    if index % 20 == 0:
                        print(f"  pass {attempt + 1}: {index}/{len(delivered)} batches", file=sys.stderr)
            finally:
                gc.callbacks.remove(collections)
            handler_s, bare_s = collections.charged(handler_s, bare_s)
            if profiler:
                pstats.Stats(profiler, stream=sys.stderr).sort_stats("tottime").print_stats(25)
            count_records = min(len(rows) - (middle if attempt else 0) * batch, len(delivered) * batch)
            rounds.append((count_records, handler_s, bare_s, dict(calls), emitted, waited[0]))
        quiet = [
            r
            for r in rows
            if r["status_code"] in ("REGISTERED", "PENDING_REPLACEMENT")
            or (r["reason_code"] == "SCHEDULER_REQUESTED" and r["status_code"] == "TERMINATED")
        ][:5000]
        calls.clear()
        for event in batches(quiet, batch):
            controller.handle_event(event)
        quiet_calls = sum(calls.values())
        # The floor the local AWS sets: the one conditional write of the groups' states that a batch needs
        # (moto copies the whole table for every item of a transaction).
        keys = [(CLUSTER, group) for group in ids[:100]]
        states = list(GroupStore(dynamodb, stack.table).load_many(keys).values())
        writer = GroupStore(dynamodb, stack.table)
        started = time.perf_counter()
        for _ in range(20):
            assert not writer.save_many(states)
        write_ms = (time.perf_counter() - started) / 20 * 1000

    print(f"\n{len(rows):,} scaling-log records, {len(events)} batches of {batch:,}, {groups:,} groups")
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
        made_calls = ", ".join(f"{name} {n}" for name, n in sorted(made.items()))
        print(f"  {'':<19} AWS calls: {made_calls or 'none'}")
    print(f"  records that need no AWS call: {len(quiet):,} of them made {quiet_calls} calls")
    bare_batch_ms = rounds[0][2] / len(events) * 1000
    print(
        f"  the local AWS's floor: the one conditional write of {len(keys)} group states takes"
        f" {write_ms:.1f} ms, {write_ms / bare_batch_ms:.1f}x the bare loop's {bare_batch_ms:.1f} ms"
        " for a whole batch"
    )
    gc.unfreeze()
    cell = measure(groups, batch, records_wanted)
    print(
        f"  with AWS answering instantly (the handler's own work): {cell.records / cell.handler_s:,.0f}"
        f" records/s, ratio {cell.ratio:.2f}x"
    )
    return 0


def main() -> int:
    parser = argparse.ArgumentParser(
        description=__doc__.split("\n\n")[0].replace("\n", " "),
        formatter_class=argparse.RawDescriptionHelpFormatter,
        epilog="\n\n".join(__doc__.split("\n\n")[1:]),
    )
    parser.add_argument("--groups", type=int, help="one number of groups (default: 1, 10, 100 and 1,000)")
    parser.add_argument("--batch", type=int, help="one batch size (default: 10, 100, 1,000 and 10,000)")
    parser.add_argument(
        "--records",
        type=int,
        help=f"records a cell (default {RECORDS:,}, at least two batches; --memory and --local-aws:"
        f" {MEMORY_RECORDS:,})",
    )
    parser.add_argument("--json", action="store_true", help="the figures as JSON")
    parser.add_argument(
        "--profile",
        action="store_true",
        help="cProfile the handler, top functions to stderr (BENCH_SORT, BENCH_ROWS, BENCH_CALLERS, "
        "BENCH_CALLEES: pstats' sort key, rows, and callers or callees of the functions matching a pattern)",
    )
    parser.add_argument(
        "--memory", action="store_true", help="peak memory at 1,000 groups, in fresh processes"
    )
    parser.add_argument("--local-aws", action="store_true", help="against moto and the local PCS over HTTP")
    parser.add_argument(
        "--wired",
        action="store_true",
        help="the table: the handler built by lifeguard.wiring, as the function builds it",
    )
    parser.add_argument(
        "--phases",
        action="store_true",
        help="the handler's own time by phase: reading the records, deciding, writing the states, the rest",
    )
    parser.add_argument("--memory-child", type=Path, help=argparse.SUPPRESS)
    parser.add_argument("--traced", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args()
    sys.stdout.reconfigure(line_buffering=True)  # type: ignore[union-attr]  # in order with stderr's progress
    for name in ("groups", "batch", "records"):
        value = getattr(args, name)
        if value is not None and value < 1:
            parser.error(f"--{name} must be at least 1")
    if args.groups is not None and args.groups > 100_000:
        parser.error("--groups must be at most 100,000 (group ids have five digits)")
    # The collector as the scaling_events function sets it once started (its figures and memory included).
    settle_collector()
    if args.memory_child:
        print(json.dumps(_memory_child(args.groups, args.memory_child, args.traced)))
        return 0
    if args.memory:
        return run_memory(
            args.groups or MEMORY_GROUPS,
            args.batch or MEMORY_BATCH,
            args.records or MEMORY_RECORDS,
            as_json=args.json,
        )
    if args.local_aws:
        return run_local_aws(
            args.groups or LOCAL_GROUPS,
            args.batch or LOCAL_BATCH,
            args.records or LOCAL_RECORDS,
            profile=args.profile,
        )
    return run_table(
        [args.groups] if args.groups else list(GROUPS),
        [args.batch] if args.batch else list(BATCHES),
        args.records or RECORDS,
        as_json=args.json,
        profile=args.profile,
        build=build_wired if args.wired else build_handler,
        phases=args.phases,
    )


if __name__ == "__main__":
    sys.exit(main())
