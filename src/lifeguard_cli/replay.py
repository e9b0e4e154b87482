"""`lifeguard replay`: the real Lambda handlers, in-process, against a fresh local AWS, fed recorded events.

Inputs are JSON lines (scaling-log records, node reports, and `lifeguard_replay` control lines) or
CloudWatch Logs subscription events as `sam local invoke -e` takes them. Every compute node group a record
names is created in the local PCS endpoint just before its first record, and the endpoint's clock follows
the stream.
"""

from __future__ import annotations

import contextlib
import importlib.util
import io
import json
import logging
import os
import sys
import uuid
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from pathlib import Path
from types import ModuleType
from typing import Any

from lifeguard.bounds import clock_time
from lifeguard.errors import LifeguardError
from lifeguard.log_subscription import InvalidSubscriptionEventError, decode_subscription, encode_subscription
from lifeguard.notify.slack import SlackChannel
from lifeguard.notify.summary import diff_line

__all__ = ["ReplayError", "ReplayResult", "TimelineEntry", "replay"]

FUNCTIONS = Path(__file__).resolve().parents[2] / "functions"
DEFAULT_CONFIG = Path(__file__).resolve().parents[2] / "events" / "configs" / "article-terminate.json"
SCALING_LOG_GROUP = "/aws/vendedlogs/pcs/scaling"
NODE_REPORT_LOG_GROUP = "/pcs-lifeguard/replay/node-reports"


class ReplayError(LifeguardError):
    """The replay itself cannot run (a missing file, an invalid --config)."""


@dataclass(frozen=True)
class _Records:
    rows: list[dict[str, Any]]
    messages: list[str]


@dataclass(frozen=True)
class _Reports:
    rows: list[dict[str, Any]]
    messages: list[str]


@dataclass(frozen=True)
class _Control:
    group_id: str
    config: Mapping[str, Any]
    at: int


@dataclass(frozen=True)
class _Subscription:
    event: Mapping[str, Any]
    rows: list[dict[str, Any]]
    reports: bool


Item = _Records | _Reports | _Control | _Subscription


@dataclass(frozen=True)
class TimelineEntry:
    """One line of the timeline: when, which group, what happened."""

    at: int | None
    group: str
    what: str
    detail: str
    event: Mapping[str, Any] | None = None


@dataclass
class ReplayResult:
    """Every controller event in the order emitted, the timeline, what was skipped, what the notification
    channels received, and each group's lifecycle actions at the end."""

    events: list[dict[str, Any]] = field(default_factory=list)
    timeline: list[TimelineEntry] = field(default_factory=list)
    skipped_records: int = 0
    records: int = 0
    notifications: list[dict[str, Any]] = field(default_factory=list)
    groups: list[dict[str, Any]] = field(default_factory=list)

    def to_json(self) -> dict[str, Any]:
        """The `--json` document."""
        return {
            "events": self.events,
            "skipped_records": self.skipped_records,
            "notifications": self.notifications,
            "groups": self.groups,
        }


def _read(paths: list[Path], result: ReplayResult) -> list[Item]:
    items: list[Item] = []
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
        items.extend(_json_lines(text, path, result))
    return items


def _subscription(event: Mapping[str, Any], path: Path) -> _Subscription:
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
    reports = any(row.get("kind") == "script_run" for row in rows)
    return _Subscription(event, rows, reports)


def _json_lines(text: str, path: Path, result: ReplayResult) -> Iterator[Item]:
    records: list[dict[str, Any]] = []
    messages: list[str] = []
    kind: str | None = None

    def flush() -> Iterator[Item]:
        nonlocal records, messages
        if records or messages:
            yield (_Reports if kind == "reports" else _Records)(records, messages)
        records, messages = [], []

    for number, line in enumerate(text.splitlines(), start=1):
        if not line.strip():
            continue
        try:
            row = json.loads(line)
        except ValueError:
            row = None
        if not isinstance(row, dict):
            result.skipped_records += 1
            print(f"lifeguard replay: {path}:{number}: skipped: not a JSON object", file=sys.stderr)
            continue
        control = row.get("lifeguard_replay")
        if isinstance(control, dict):
            yield from flush()
            yield _control(control, path, number)
            continue
        line_kind = "reports" if row.get("kind") == "script_run" else "records"
        if line_kind != kind:
            yield from flush()
            kind = line_kind
        # One invocation per line keeps the timeline exact: events follow the record that caused them.
        records.append(row)
        messages.append(line)
        yield from flush()
    yield from flush()


def _control(control: Mapping[str, Any], path: Path, number: int) -> _Control:
    try:
        return _Control(str(control["compute_node_group_id"]), control["update_config"], int(control["at"]))
    except (KeyError, TypeError, ValueError):
        needs = "update_config, compute_node_group_id and at (epoch ms)"
        raise ReplayError(f"{path}:{number}: a lifeguard_replay line needs {needs}") from None


def _timestamp(row: Mapping[str, Any]) -> int | None:
    value = row.get("event_timestamp")
    if isinstance(value, int):
        return value
    ended = row.get("ended_at")
    return ended * 1000 if isinstance(ended, int) else None


def _groups(items: list[Item]) -> dict[tuple[str, str], tuple[int, str]]:
    """Every (cluster, group) the inputs name, with its earliest time and a name for it."""
    found: dict[tuple[str, str], tuple[int, str]] = {}
    for item in items:
        rows = item.rows if not isinstance(item, _Control) else []
        for row in rows:
            cluster = row.get("resource_id") or row.get("cluster_id")
            group = row.get("compute_node_group_id")
            at = _timestamp(row)
            if not isinstance(cluster, str) or not isinstance(group, str) or at is None:
                continue
            node = str(row.get("scheduler_node_id") or row.get("node_id") or "")
            name = node.rsplit("-", 1)[0] if "-" in node else ""
            earliest, known = found.get((cluster, group), (at, name))
            found[(cluster, group)] = (min(earliest, at), known or name)
    return found


def _group_name(name: str, group_id: str, taken: set[str]) -> str:
    candidate = name if 3 <= len(name) <= 25 and name[:1].isalpha() and not name.startswith("pcs_") else ""
    candidate = candidate or f"replay-{group_id.removeprefix('pcs_')}"[:25]
    while candidate in taken:
        candidate = f"{candidate[:20]}-{uuid.uuid4().hex[:4]}"
    taken.add(candidate)
    return candidate


@dataclass
class _Context:
    """What the Powertools decorators read off a Lambda context."""

    function_name: str
    memory_limit_in_mb: int = 512
    invoked_function_arn: str = "arn:aws:lambda:us-east-1:123456789012:function:replay"
    aws_request_id: str = field(default_factory=lambda: str(uuid.uuid4()))

    def get_remaining_time_in_millis(self) -> int:
        """A whole invocation ahead (template.yaml's longest timeout): the stream's clock measures it."""
        return 600_000


def _load_handler(name: str) -> ModuleType:
    path = FUNCTIONS / name / "app.py"
    spec = importlib.util.spec_from_file_location(f"lifeguard_replay_{name}_{uuid.uuid4().hex}", path)
    if spec is None or spec.loader is None:
        raise ReplayError(f"cannot load the {name} handler from {path}")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@contextlib.contextmanager
def _environment(values: Mapping[str, str]) -> Iterator[None]:
    saved = {key: os.environ.get(key) for key in values}
    os.environ.update(values)
    try:
        yield
    finally:
        for key, value in saved.items():
            if value is None:
                os.environ.pop(key, None)
            else:
                os.environ[key] = value


def replay(
    paths: list[Path],
    *,
    config: Mapping[str, Any] | None = None,
    threshold: int | None = None,
    window_minutes: int | None = None,
    mode: str = "quarantine",
    dry_run: bool = False,
    node_bundle: str | None = None,
    verbose: bool = False,
) -> ReplayResult:
    """Feed the inputs, in order, to the real handlers against a fresh local AWS; the remediate and notify
    handlers run on the events the others emit (SNS is read back through an SQS subscription, Slack is a
    loopback sink)."""
    from lifeguard.aws import clients
    from lifeguard_cli.local import LocalPcs, ManualClock, local_aws
    from lifeguard_cli.local.slack import serve_slack
    from lifeguard_cli.local.stack import create_notification_channels, create_stack

    result = ReplayResult()
    items = _read(paths, result)
    groups = _groups(items)
    actions = dict(config) if config is not None else json.loads(DEFAULT_CONFIG.read_text())
    start = min((earliest for earliest, _ in groups.values()), default=0)
    clock = ManualClock(datetime.fromtimestamp(start / 1000, UTC) - timedelta(seconds=2))
    with local_aws(LocalPcs(clock=clock, update_seconds=60)) as aws, serve_slack() as slack:
        prefix = f"replay-{uuid.uuid4().hex[:8]}"
        stack = create_stack(aws.client("dynamodb"), aws.client("events"), aws.client("sqs"), prefix)
        channels = create_notification_channels(
            aws.client("sns"), aws.client("sqs"), aws.client("secretsmanager"), prefix, slack.url
        )
        environment = {
            **aws.environ(),
            "LIFEGUARD_TABLE": stack.table,
            "LIFEGUARD_EVENT_BUS": stack.event_bus,
            "LIFEGUARD_DEFAULT_MODE": mode,
            "LIFEGUARD_DRY_RUN": "true" if dry_run else "false",
            "LIFEGUARD_NODE_BUNDLE": node_bundle or "",
            # A replay given a node bundle shows the drain step (DrainKeptNodes=true in the stack).
            "LIFEGUARD_DRAIN_KEPT_NODES": "true" if node_bundle else "false",
            "LIFEGUARD_TOPIC_ARN": channels.topic_arn,
            "LIFEGUARD_SLACK_SECRET": channels.slack_secret,
            "POWERTOOLS_METRICS_NAMESPACE": "PCSLifeguard",
            "POWERTOOLS_LOG_LEVEL": "WARNING" if verbose else "CRITICAL",
            "POWERTOOLS_SERVICE_NAME": "lifeguard",
        }
        if threshold is not None:
            environment["LIFEGUARD_THRESHOLD"] = str(threshold)
        if window_minutes is not None:
            environment["LIFEGUARD_WINDOW_MINUTES"] = str(window_minutes)
        with _environment(environment):
            clients.aws_client.cache_clear()
            clients._session.cache_clear()
            scaling = _load_handler("scaling_events")
            reports = _load_handler("node_reports")
            remediate = _load_handler("remediate")
            notify = _load_handler("notify")
            # The handlers run on the stream's clock, not the wall's: record times are plausible against
            # it, and remediation's rails (cooldown, cap, backoff) count on it.
            for handler in (scaling, reports, remediate):
                handler.controller.clock = lambda: clock().timestamp()
            remediate.controller.sleep = clock.advance
            for channel in notify.controller.channels:
                if isinstance(channel, SlackChannel):
                    channel.min_interval_seconds = 0.0  # the sink is local: no pacing needed
            _logs_to_stderr()
            pcs = aws.client("pcs")
            taken: set[str] = set()
            clusters: set[str] = set()
            for (cluster, group), (earliest, name) in sorted(groups.items(), key=lambda kv: kv[1][0]):
                clock.set(datetime.fromtimestamp(earliest / 1000, UTC) - timedelta(seconds=1))
                if cluster not in clusters:
                    aws.pcs.add_cluster(f"replay-{len(clusters) + 1}", cluster_id=cluster)
                    clusters.add(cluster)
                aws.pcs.add_compute_node_group(
                    cluster, _group_name(name, group, taken), group_id=group, node_lifecycle_actions=actions
                )
            feeder = _Feeder(result, clock, pcs, scaling, reports, groups, remediate, notify)
            for item in items:
                # The handlers print EMF metrics (and, with --verbose, logs) to stdout: not into the timeline.
                with contextlib.redirect_stdout(sys.stderr if verbose else io.StringIO()):
                    feeder.feed(item)
            result.notifications.extend(channels.received_sns(aws.client("sqs")))
            result.notifications.extend(
                {"channel": "slack", "text": message.get("text", "").splitlines()[0], "message": message}
                for message in slack.messages
            )
            for cluster, group in groups:
                found = pcs.get_compute_node_group(
                    clusterIdentifier=cluster, computeNodeGroupIdentifier=group
                )
                result.groups.append(
                    {
                        "cluster_id": cluster,
                        "compute_node_group_id": group,
                        "node_lifecycle_actions": found["computeNodeGroup"].get("nodeLifecycleActions"),
                    }
                )
        clients.aws_client.cache_clear()
        clients._session.cache_clear()
    return result


class _CurrentStderr:
    """Whatever sys.stderr is at the time of writing (the handlers outlive one replay)."""

    def write(self, text: str) -> int:
        return sys.stderr.write(text)

    def flush(self) -> None:
        sys.stderr.flush()


def _logs_to_stderr() -> None:
    # The handlers' JSON logs would mix with the timeline or --json on stdout.
    for name in ("lifeguard", os.environ.get("POWERTOOLS_SERVICE_NAME", "lifeguard")):
        for handler in logging.getLogger(name).handlers:
            if isinstance(handler, logging.StreamHandler):
                handler.stream = _CurrentStderr()


@dataclass
class _Feeder:
    """Feeds items to the handlers, moving the local PCS clock along the stream."""

    result: ReplayResult
    clock: Any
    pcs: Any
    scaling: ModuleType
    reports: ModuleType
    groups: Mapping[tuple[str, str], tuple[int, str]]
    remediate: ModuleType
    notify: ModuleType

    def feed(self, item: Item) -> None:
        if isinstance(item, _Control):
            self._update(item)
            return
        times = [t for t in (_timestamp(row) for row in item.rows) if t is not None]
        at = max(times) if times else None
        if at is not None:
            self.clock.set(datetime.fromtimestamp(at / 1000, UTC))
        if isinstance(item, _Subscription):
            event = dict(item.event)
            is_reports = item.reports
        else:
            is_reports = isinstance(item, _Reports)
            log_group = NODE_REPORT_LOG_GROUP if is_reports else SCALING_LOG_GROUP
            stream = _stream_name(item.rows, is_reports)
            event = encode_subscription(log_group, stream, [(at or 0, message) for message in item.messages])
        module = self.reports if is_reports else self.scaling
        summary = module.lambda_handler(event, _Context(function_name=module.__name__))
        self.result.records += summary.get("records", summary.get("reports", 0))
        self.result.skipped_records += summary.get("skipped", 0)
        self.result.timeline.extend(_row_entry(row) for row in item.rows)
        for published in summary.get("events", []):
            self._emitted(published, at)

    def _emitted(self, published: Mapping[str, Any], at: int | None) -> None:
        """A controller event: into the result, then to remediate (detections) and notify, as the
        EventBridge rules of template.yaml route it."""
        from lifeguard.errors import LifeguardError

        self.result.events.append(dict(published))
        detail = published["detail"]
        group = detail.get("compute_node_group_id") or ""
        what = published["detail-type"]
        self.result.timeline.append(TimelineEntry(at, group, what, _event_line(detail, what), published))
        event = {
            "version": "0",
            "id": str(uuid.uuid4()),
            "detail-type": what,
            "source": "lifeguard",
            "time": datetime.fromtimestamp(at / 1000 if at else 0, UTC).isoformat(),
            "detail": detail,
        }
        try:
            self.notify.lambda_handler(event, _Context(function_name="notify"))
        except LifeguardError as exc:
            self.result.timeline.append(TimelineEntry(at, group, "notification failed", str(exc)))
        if what != "BootstrapLoopDetected":
            return
        try:
            answer = self.remediate.lambda_handler(event, _Context(function_name="remediate"))
        except LifeguardError as exc:
            self.result.timeline.append(TimelineEntry(at, group, "remediation parked", str(exc)))
            for entry in self._failed_events(detail):
                self._emitted(entry, at)
            return
        for decided in answer.get("events", []):
            self._emitted(decided, at)

    def _failed_events(self, detail: Mapping[str, Any]) -> list[dict[str, Any]]:
        """The RemediationFailed event a parked remediation published (from its decision record)."""
        controller = self.remediate.controller
        decision = controller.store.decision(
            detail["cluster_id"],
            detail["compute_node_group_id"],
            detail["episode_id"],
            detail.get("revision", 1),
        )
        if decision is None:
            return []
        return [{"detail-type": e["detail-type"], "detail": e["detail"]} for e in decision.events]

    def _update(self, item: _Control) -> None:
        from botocore.exceptions import BotoCoreError, ClientError

        self.clock.set(datetime.fromtimestamp(item.at / 1000, UTC))
        cluster = next((c for c, g in self.groups if g == item.group_id), None)
        if cluster is None:
            raise ReplayError(f"update_config names {item.group_id}, which no record of the inputs names")
        try:
            self.pcs.update_compute_node_group(
                clusterIdentifier=cluster,
                computeNodeGroupIdentifier=item.group_id,
                nodeLifecycleActions=item.config,
            )
        except (ClientError, BotoCoreError) as exc:
            raise ReplayError(f"update_config of {item.group_id} at {item.at} was refused: {exc}") from None
        entry = TimelineEntry(item.at, item.group_id, "config updated", _config_line(item.config))
        self.result.timeline.append(entry)


def _stream_name(rows: list[dict[str, Any]], is_reports: bool) -> str:
    first = rows[0] if rows else {}
    if is_reports:
        return f"{first.get('cluster_id', 'unknown')}/{first.get('instance_id', 'unknown')}"
    return f"AWSLogs/PCS/{first.get('resource_id', 'unknown')}/node_lifecycle.log"


def _row_entry(row: Mapping[str, Any]) -> TimelineEntry:
    group = str(row.get("compute_node_group_id") or "")
    if row.get("kind") == "script_run":
        code = "" if row.get("exit_code") is None else f" exit={row.get('exit_code')}"
        detail = f"{row.get('stage')}/{row.get('script')} on {row.get('instance_id')}"
        return TimelineEntry(_timestamp(row), group, f"report {row.get('outcome')}{code}", detail)
    raw_details = row.get("details")
    details: Mapping[str, Any] = raw_details if isinstance(raw_details, dict) else {}
    node = row.get("scheduler_node_id") or ""
    what = f"{row.get('status_code')}/{row.get('reason_code')}"
    return TimelineEntry(_timestamp(row), group, what, f"{details.get('instance_id') or '-'} {node}".strip())


def _event_line(detail: Mapping[str, Any], detail_type: str = "") -> str:
    if detail_type.startswith("Remediation"):
        changes = "; ".join(diff_line(change) for change in detail.get("diff") or [])
        dry = " (dry run)" if detail.get("dry_run") else ""
        text = f"{detail.get('action') or detail.get('mode')}{dry}: {detail.get('reason') or ''}".strip()
        return f"{text} [{changes}]" if changes else text
    parts = [f"{detail.get('kind') or ''} {detail.get('episode_id') or ''}".strip()]
    failures = detail.get("failures") or []
    if failures:
        parts.append(f"{len(failures)} failed: " + ", ".join(f["instance_id"] for f in failures))
    suspect = detail.get("suspect")
    if suspect:
        where = f"{suspect['stage']}/{suspect['script']}"
        how = f"exit {suspect['exit_code']}, onError {suspect['on_error']}"
        parts.append(f"suspect {where} ({how}, {len(suspect['instances'])} of {len(failures)} instances)")
    elif detail.get("reason"):
        parts.append(str(detail["reason"]))
    else:
        parts.append("suspect unknown (no node report yet)")
    return "; ".join(parts)


def _config_line(config: Mapping[str, Any]) -> str:
    from lifeguard.lifecycle import fingerprint_of

    stages = config.get("stages") or {}
    names = [f"{stage}:{s.get('name')}" for stage in stages for s in stages.get(stage) or []]
    return f"fingerprint {fingerprint_of(config)[:12]} ({', '.join(names) or 'no scripts'})"


def _when(at: int | None) -> str:
    return clock_time(at) if at is not None else "-"


def render_timeline(result: ReplayResult, console: Any) -> None:
    """The timeline as a table, then the totals."""
    from rich.table import Table
    from rich.text import Text

    table = Table(box=None, header_style="bold", pad_edge=False)
    for column in ("time (UTC)", "group", "what", "detail"):
        table.add_column(column, overflow="fold")
    for entry in result.timeline:
        style = {
            "BootstrapLoopDetected": "bold red",
            "RemediationFailed": "bold red",
            "remediation parked": "bold red",
            "notification failed": "red",
            "RemediationApplied": "bold yellow",
            "RemediationSkipped": "yellow",
            "LoopResolved": "bold green",
        }.get(entry.what, "")
        table.add_row(_when(entry.at), entry.group, Text(entry.what, style=style), entry.detail)
    console.print(table)
    kinds: dict[str, int] = {}
    for event in result.events:
        kinds[event["detail-type"]] = kinds.get(event["detail-type"], 0) + 1
    summary = ", ".join(f"{count} {kind}" for kind, count in kinds.items()) or "no controller event"
    console.print(f"\n{result.records} records replayed, {result.skipped_records} skipped; {summary}")
    channels: dict[str, int] = {}
    for notification in result.notifications:
        channels[notification["channel"]] = channels.get(notification["channel"], 0) + 1
    sent = ", ".join(f"{count} via {name}" for name, count in channels.items()) or "none"
    console.print(f"notifications: {sent}")
