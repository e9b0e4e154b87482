"""What a replay is fed: its input files read into items, in order, and the compute node groups they name.

A file is a CloudWatch Logs subscription event (as `sam local invoke -e` takes it), a CloudTrail event of
a PCS call, or JSON lines: each line a scaling-log record, a node report (`"kind": "script_run"`), a
CloudTrail event of a PCS call (EventBridge's `AWS API Call via CloudTrail`, or a bare record with
`eventSource: pcs.amazonaws.com`), or a `lifeguard_replay` control line that changes a group's
configuration at a given time. Each record or report line is one invocation, so the events it causes
follow it in the timeline.
"""

from __future__ import annotations

import contextlib
import json
import sys
import uuid
from collections.abc import Mapping
from dataclasses import dataclass, replace
from datetime import datetime
from pathlib import Path
from typing import Any

from lifeguard.cloudtrail import CLOUDTRAIL_DETAIL_TYPE, PCS_EVENT_SOURCE, PCS_SOURCE
from lifeguard.log_subscription import InvalidSubscriptionEventError, decode_subscription, encode_subscription
from lifeguard_cli.replay.errors import ReplayError

__all__ = [
    "NODE_REPORT_LOG_GROUP",
    "SCALING_LOG_GROUP",
    "ApiCall",
    "ConfigUpdate",
    "Inputs",
    "Item",
    "LogLines",
    "SeenGroup",
    "SubscriptionFile",
    "api_call",
    "group_name",
    "read_inputs",
    "row_time",
    "seen_groups",
]

SCALING_LOG_GROUP = "/aws/vendedlogs/pcs/scaling"
NODE_REPORT_LOG_GROUP = "/pcs-lifeguard/replay/node-reports"


def row_time(row: Mapping[str, Any]) -> int | None:
    """When a record (`event_timestamp`, epoch ms) or a node report (`ended_at`, epoch s) happened, in ms."""
    value = row.get("event_timestamp")
    if isinstance(value, int):
        return value
    ended = row.get("ended_at")
    return ended * 1000 if isinstance(ended, int) else None


def _latest(rows: list[dict[str, Any]]) -> int | None:
    times = [t for t in (row_time(row) for row in rows) if t is not None]
    return max(times) if times else None


@dataclass(frozen=True)
class LogLines:
    """JSON lines fed as one subscription event: scaling-log records, or node reports when `reports`."""

    rows: list[dict[str, Any]]
    messages: list[str]
    reports: bool

    @property
    def at(self) -> int | None:
        """The latest time of its rows (epoch ms)."""
        return _latest(self.rows)

    def subscription_event(self) -> dict[str, Any]:
        """The lines as CloudWatch Logs delivers them to the scaling_events or node_reports function."""
        log_group = NODE_REPORT_LOG_GROUP if self.reports else SCALING_LOG_GROUP
        first = self.rows[0] if self.rows else {}
        if self.reports:
            stream = f"{first.get('cluster_id', 'unknown')}/{first.get('instance_id', 'unknown')}"
        else:
            stream = f"AWSLogs/PCS/{first.get('resource_id', 'unknown')}/node_lifecycle.log"
        return encode_subscription(log_group, stream, [(self.at or 0, message) for message in self.messages])


@dataclass(frozen=True)
class SubscriptionFile:
    """A subscription event read from a file, fed as it is; `reports` when it carries node reports."""

    event: Mapping[str, Any]
    rows: list[dict[str, Any]]
    reports: bool

    @property
    def at(self) -> int | None:
        """The latest time of its rows (epoch ms)."""
        return _latest(self.rows)

    def subscription_event(self) -> dict[str, Any]:
        """The event, as read."""
        return dict(self.event)


@dataclass(frozen=True)
class ConfigUpdate:
    """A `lifeguard_replay` control line: the group's `nodeLifecycleActions` become `config` at `at`."""

    group_id: str
    config: Mapping[str, Any]
    at: int


@dataclass(frozen=True)
class ApiCall:
    """A PCS call as CloudTrail recorded it, in the EventBridge event AWS puts on the default bus: in a
    replay the call is made on the local PCS first, as it was on the real one, then the event is put."""

    event: Mapping[str, Any]

    @property
    def record(self) -> Mapping[str, Any]:
        """The CloudTrail record."""
        detail = self.event.get("detail")
        return detail if isinstance(detail, Mapping) else {}

    def _part(self, key: str) -> Mapping[str, Any]:
        value = self.record.get(key)
        return value if isinstance(value, Mapping) else {}

    @property
    def request(self) -> Mapping[str, Any]:
        """`requestParameters`."""
        return self._part("requestParameters")

    @property
    def at(self) -> int | None:
        """`eventTime` in epoch ms."""
        value = self.record.get("eventTime")
        try:
            return int(datetime.fromisoformat(str(value)).timestamp() * 1000)
        except ValueError:
            return None

    @property
    def group(self) -> tuple[str, str] | None:
        """(cluster id, group id): the response's, else the request's identifiers."""
        response = self._part("responseElements").get("computeNodeGroup")
        answered = response if isinstance(response, Mapping) else {}
        cluster = answered.get("clusterId") or self.request.get("clusterIdentifier")
        group = answered.get("id") or self.request.get("computeNodeGroupIdentifier")
        return (cluster, group) if isinstance(cluster, str) and isinstance(group, str) else None

    @property
    def name(self) -> str:
        """The group's name, when the record gives it."""
        response = self._part("responseElements").get("computeNodeGroup")
        name = (response if isinstance(response, Mapping) else {}).get("name")
        name = name or self.request.get("computeNodeGroupName")
        return name if isinstance(name, str) else ""

    @property
    def config(self) -> Mapping[str, Any] | None:
        """The `nodeLifecycleActions` the call set, when it succeeded and carried them."""
        config = self.request.get("nodeLifecycleActions")
        failed = self.record.get("errorCode") is not None
        return config if isinstance(config, Mapping) and not failed else None


Item = LogLines | SubscriptionFile | ConfigUpdate | ApiCall


def api_call(data: Mapping[str, Any]) -> ApiCall | None:
    """The PCS call in `data` (an EventBridge CloudTrail event, or a bare record wrapped as EventBridge
    delivers it), or None when it is neither."""
    if data.get("detail-type") == CLOUDTRAIL_DETAIL_TYPE and data.get("source") == PCS_SOURCE:
        return ApiCall(data)
    if data.get("eventSource") != PCS_EVENT_SOURCE:
        return None
    return ApiCall(
        {
            "version": "0",
            "id": str(uuid.uuid5(uuid.NAMESPACE_URL, str(data.get("eventID")))),
            "detail-type": CLOUDTRAIL_DETAIL_TYPE,
            "source": PCS_SOURCE,
            "account": data.get("recipientAccountId", ""),
            "time": data.get("eventTime"),
            "region": data.get("awsRegion", ""),
            "resources": [],
            "detail": dict(data),
        }
    )


@dataclass(frozen=True)
class Inputs:
    """The items of every input file, in order, and how many lines were skipped as unreadable."""

    items: list[Item]
    skipped: int


def read_inputs(paths: list[Path]) -> Inputs:
    """Every file read into items; a line that is not a JSON object is skipped (and said on stderr)."""
    items: list[Item] = []
    skipped = 0
    for path in paths:
        try:
            text = path.read_text(encoding="utf-8")
        except (OSError, UnicodeDecodeError) as exc:
            raise ReplayError(f"cannot read {path}: {exc}") from None
        stripped = text.lstrip()
        if stripped.startswith("{") and '"awslogs"' in stripped[:200]:
            with contextlib.suppress(ValueError):
                items.append(_subscription(json.loads(text), path))
                continue
        call = _whole_file_call(text)
        if call is not None:
            items.append(call)
            continue
        skipped += _json_lines(text, path, items)
    return Inputs(items, skipped)


def _whole_file_call(text: str) -> ApiCall | None:
    """The file as one CloudTrail event (pretty-printed, as `sam local invoke -e` takes it), if it is one."""
    if "\n" not in text.strip():
        return None  # one line: read as JSON lines
    try:
        data = json.loads(text)
    except (ValueError, RecursionError):
        return None
    return api_call(data) if isinstance(data, dict) else None


def _subscription(event: Mapping[str, Any], path: Path) -> SubscriptionFile:
    try:
        batch = decode_subscription(event)
    except InvalidSubscriptionEventError as exc:
        raise ReplayError(f"{path}: {exc}") from None
    rows = []
    for log_event in batch.events:
        with contextlib.suppress(ValueError):
            row = json.loads(log_event.message)
            if isinstance(row, dict):
                rows.append(row)
    return SubscriptionFile(event, rows, any(row.get("kind") == "script_run" for row in rows))


def _json_lines(text: str, path: Path, items: list[Item]) -> int:
    """Append the items of a JSON-lines file; returns the number of lines skipped."""
    skipped = 0
    for number, line in enumerate(text.splitlines(), start=1):
        if not line.strip():
            continue
        try:
            row = json.loads(line)
        except ValueError:
            row = None
        if not isinstance(row, dict):
            skipped += 1
            print(f"lifeguard replay: {path}:{number}: skipped: not a JSON object", file=sys.stderr)
            continue
        control = row.get("lifeguard_replay")
        call = api_call(row)
        if isinstance(control, dict):
            items.append(_control(control, path, number))
        elif call is not None:
            items.append(call)
        else:
            items.append(LogLines([row], [line], reports=row.get("kind") == "script_run"))
    return skipped


def _control(control: Mapping[str, Any], path: Path, number: int) -> ConfigUpdate:
    try:
        group_id, config = str(control["compute_node_group_id"]), control["update_config"]
        return ConfigUpdate(group_id, config, int(control["at"]))
    except (KeyError, TypeError, ValueError):
        needs = "update_config, compute_node_group_id and at (epoch ms)"
        raise ReplayError(f"{path}:{number}: a lifeguard_replay line needs {needs}") from None


@dataclass(frozen=True)
class SeenGroup:
    """A compute node group the inputs name: when its first record is, and the name its nodes suggest."""

    cluster_id: str
    group_id: str
    earliest: int
    name: str


def seen_groups(items: list[Item]) -> list[SeenGroup]:
    """Every (cluster, group) the inputs name, in the order they first appear."""
    found: dict[tuple[str, str], SeenGroup] = {}
    for item in items:
        if isinstance(item, ApiCall):
            group, at = item.group, item.at
            if group is not None and at is not None:
                seen = found.get(group, SeenGroup(*group, at, item.name))
                found[group] = replace(seen, earliest=min(seen.earliest, at), name=seen.name or item.name)
            continue
        rows = item.rows if not isinstance(item, ConfigUpdate) else []
        for row in rows:
            cluster = row.get("resource_id") or row.get("cluster_id")
            group = row.get("compute_node_group_id")
            at = row_time(row)
            if not isinstance(cluster, str) or not isinstance(group, str) or at is None:
                continue
            node = str(row.get("scheduler_node_id") or row.get("node_id") or "")
            name = node.rsplit("-", 1)[0] if "-" in node else ""
            seen = found.get((cluster, group), SeenGroup(cluster, group, at, name))
            found[(cluster, group)] = replace(seen, earliest=min(seen.earliest, at), name=seen.name or name)
    return list(found.values())


def group_name(name: str, group_id: str, taken: set[str]) -> str:
    """A name PCS takes for the group: the one its nodes suggest, else one made of its id; never one in
    `taken` (to which it is added)."""
    candidate = name if 3 <= len(name) <= 25 and name[:1].isalpha() and not name.startswith("pcs_") else ""
    candidate = candidate or f"replay-{group_id.removeprefix('pcs_')}"[:25]
    while candidate in taken:
        candidate = f"{candidate[:20]}-{uuid.uuid4().hex[:4]}"
    taken.add(candidate)
    return candidate
