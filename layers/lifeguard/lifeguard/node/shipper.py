"""`lifeguard-node ship`: get each script run's outcome off the node before TERMINATE takes the node.

It tails executor.log (written by Lifeguard's executor or by the PCS agent) and the per-script logs,
turns every finished script run into a node report, and puts the reports into CloudWatch Logs, stream
`<cluster-id>/<instance-id>`. Its position is kept under the root, and a batch is recorded before it is
sent, so a restart neither loses nor repeats a report.
"""

from __future__ import annotations

import contextlib
import json
import os
import re
import time
import urllib.request
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from typing import Any

from lifeguard.errors import LifeguardError
from lifeguard.lifecycle_rules import DEFAULT_ON_ERROR, ON_ERRORS
from lifeguard.node.boto import MissingBoto3Error, node_client
from lifeguard.node.executor import PCS_ON_ERROR_NAMES
from lifeguard.node.layout import FILE_MODE, NodeLayout, atomic_write

__all__ = [
    "LOG_TAIL_BYTES",
    "POLL_INTERVAL_SECONDS",
    "CloudWatchSink",
    "ReportSink",
    "Shipper",
    "ShipperError",
    "ShipperIdentity",
    "identity_from_executor_log",
    "instance_id_from_imds",
]

LOG_TAIL_BYTES = 4096
POLL_INTERVAL_SECONDS = 0.5  # a finished script's report is out well within 2 s
END_MARKER_GRACE_SECONDS = 5.0  # how long a run's record may wait for its script log's end marker
MAX_BATCH_EVENTS = 1000
IMDS_ENDPOINT = "http://169.254.169.254"

_API_ON_ERROR = {**{name: name for name in ON_ERRORS}, **{v: k for k, v in PCS_ON_ERROR_NAMES.items()}}
_START = re.compile(rb"^\[start (?P<name>.+) args=.* @ (?P<ts>\d+)\]$", re.MULTILINE)
_END = re.compile(rb"^\[end (?P<name>.+) exit=(?P<code>-?\d+) @ (?P<ts>\d+)\]$", re.MULTILINE)
_WAIT_STATUS = re.compile(r"unix_wait_status\((\d+)\)|exit status (-?\d+)")


class ShipperError(LifeguardError):
    """The shipper cannot start: a missing identity or an unusable sink."""


@dataclass(frozen=True)
class ShipperIdentity:
    """Whose reports these are."""

    cluster_id: str
    compute_node_group_id: str
    instance_id: str
    node_id: str | None

    @property
    def stream(self) -> str:
        """The CloudWatch Logs stream of this node."""
        return f"{self.cluster_id}/{self.instance_id}"


def _imds(path: str, timeout_seconds: float = 1.0) -> str:
    """One IMDSv2 read (endpoint from AWS_EC2_METADATA_SERVICE_ENDPOINT when set)."""
    base = os.environ.get("AWS_EC2_METADATA_SERVICE_ENDPOINT", IMDS_ENDPOINT).rstrip("/")
    token_request = urllib.request.Request(
        f"{base}/latest/api/token", method="PUT", headers={"X-aws-ec2-metadata-token-ttl-seconds": "60"}
    )
    try:
        with urllib.request.urlopen(token_request, timeout=timeout_seconds) as response:
            token = response.read().decode()
        request = urllib.request.Request(
            f"{base}/latest/meta-data/{path}", headers={"X-aws-ec2-metadata-token": token}
        )
        with urllib.request.urlopen(request, timeout=timeout_seconds) as response:
            return str(response.read().decode().strip())
    except OSError as exc:
        raise ShipperError(f"cannot read {path} from IMDSv2 at {base} ({exc})") from None


def instance_id_from_imds() -> str:
    """The EC2 instance id, through IMDSv2."""
    try:
        return _imds("instance-id")
    except ShipperError as exc:
        raise ShipperError(f"{exc}; pass --instance-id") from None


class ReportSink:
    """Where reports go. `put` delivers all or raises; `recent` lists the last messages delivered."""

    def put(self, messages: list[str]) -> None:
        """Deliver messages, in order."""
        raise NotImplementedError

    def recent(self, limit: int) -> list[str]:
        """Up to `limit` of the most recently delivered messages, oldest first."""
        raise NotImplementedError


class CloudWatchSink(ReportSink):
    """PutLogEvents into `<log group>` / `<cluster-id>/<instance-id>`, creating the stream when missing."""

    def __init__(self, log_group: str, stream: str, client: Any = None) -> None:
        self.log_group = log_group
        self.stream = stream
        self._client = client
        self._last_ms = 0

    def _logs(self) -> Any:
        if self._client is None:
            try:
                # A systemd service has no AWS_REGION; on EC2 the instance's own region is the one.
                self._client = node_client(
                    "logs", "shipping reports", region=lambda: _imds("placement/region")
                )
            except MissingBoto3Error as exc:
                raise ShipperError(str(exc)) from None
        return self._client

    def put(self, messages: list[str]) -> None:
        """PutLogEvents, in batches; event times never go backwards so the stream keeps the order."""
        logs = self._logs()
        for start in range(0, len(messages), MAX_BATCH_EVENTS):
            chunk = messages[start : start + MAX_BATCH_EVENTS]
            now_ms = max(int(time.time() * 1000), self._last_ms)
            self._last_ms = now_ms
            events = [{"timestamp": now_ms, "message": message} for message in chunk]
            request = {"logGroupName": self.log_group, "logStreamName": self.stream, "logEvents": events}
            try:
                logs.put_log_events(**request)
            except logs.exceptions.ResourceNotFoundException:
                with contextlib.suppress(logs.exceptions.ResourceAlreadyExistsException):
                    logs.create_log_stream(logGroupName=self.log_group, logStreamName=self.stream)
                logs.put_log_events(**request)

    def recent(self, limit: int) -> list[str]:
        """The stream's last `limit` messages (none when the stream does not exist yet)."""
        logs = self._logs()
        try:
            response = logs.get_log_events(
                logGroupName=self.log_group, logStreamName=self.stream, limit=limit, startFromHead=False
            )
        except logs.exceptions.ResourceNotFoundException:
            return []
        return [event["message"] for event in response.get("events", [])]


@dataclass
class _State:
    executor_offset: int = 0
    script_offsets: dict[str, int] = field(default_factory=dict)
    boot: int = 1
    first_boot: bool = True
    pending: list[str] = field(default_factory=list)
    waiting_since: float | None = None

    @classmethod
    def load(cls, path: Path) -> _State:
        try:
            data = json.loads(path.read_text())
        except (OSError, ValueError):
            return cls()
        return cls(
            executor_offset=int(data.get("executor_offset", 0)),
            script_offsets={str(k): int(v) for k, v in data.get("script_offsets", {}).items()},
            boot=int(data.get("boot", 1)),
            first_boot=bool(data.get("first_boot", True)),
            pending=[str(m) for m in data.get("pending", [])],
        )

    def save(self, path: Path) -> None:
        data = {
            "executor_offset": self.executor_offset,
            "script_offsets": self.script_offsets,
            "boot": self.boot,
            "first_boot": self.first_boot,
            "pending": self.pending,
        }
        atomic_write(path, json.dumps(data).encode(), FILE_MODE)


class Shipper:
    """Turns the node's lifecycle logs into node reports and delivers them exactly once."""

    def __init__(
        self,
        layout: NodeLayout,
        identity: ShipperIdentity,
        sink: ReportSink,
        *,
        clock: Callable[[], float] = time.monotonic,
        end_marker_grace_seconds: float = END_MARKER_GRACE_SECONDS,
    ) -> None:
        self.layout = layout
        self.identity = identity
        self.sink = sink
        self.clock = clock
        self.end_marker_grace_seconds = end_marker_grace_seconds
        self.state = _State.load(layout.shipper_state)
        self.skipped_lines = 0
        self.node_id = identity.node_id  # when not given, learnt from the executor's boot records
        self._recovered = False

    def poll(self) -> int:
        """Read what is new, deliver it; returns how many reports were delivered (raises when delivery fails,
        keeping them pending for the next poll)."""
        if not self._recovered:
            self._recover_pending()
            self._recovered = True
        if not self.state.pending:
            reports = self._collect()
            if not reports:
                return 0
            self.state.pending = reports
        # Recorded before sending: a crash mid-send is resolved against the stream on restart.
        self.state.save(self.layout.shipper_state)
        delivered = len(self.state.pending)
        self.sink.put(self.state.pending)
        self.state.pending = []
        self.state.save(self.layout.shipper_state)
        return delivered

    def _recover_pending(self) -> None:
        if not self.state.pending:
            return
        already = self.sink.recent(limit=max(len(self.state.pending), 1) * 2)
        # The pending batch went out in order: whatever prefix of it the stream already ends with is sent.
        for count in range(len(self.state.pending), 0, -1):
            if already[-count:] == self.state.pending[:count]:
                self.state.pending = self.state.pending[count:]
                break
        self.state.save(self.layout.shipper_state)

    def run(
        self,
        *,
        once: bool = False,
        poll_interval: float = POLL_INTERVAL_SECONDS,
        stop: Callable[[], bool] = lambda: False,
    ) -> None:
        """Poll until stopped; with `once`, until nothing more can be shipped now."""
        if once:
            self.end_marker_grace_seconds = 0.0  # ship what is there now, even a run without its log
        while not stop():
            try:
                delivered = self.poll()
            except ShipperError:
                raise
            except Exception:  # a failed delivery stays pending and is retried
                if once:
                    raise
                delivered = 0
            if once and delivered == 0 and not self.state.pending:
                return
            if not delivered:
                time.sleep(poll_interval)

    # -- reading --

    def _collect(self) -> list[str]:
        path = self.layout.executor_log
        try:
            size = path.stat().st_size
        except FileNotFoundError:
            return []
        if size < self.state.executor_offset:  # rotated or truncated: start over
            self.state.executor_offset = 0
        with path.open("rb") as file:
            file.seek(self.state.executor_offset)
            data = file.read()
        reports: list[str] = []
        offset = self.state.executor_offset
        for line in data.splitlines(keepends=True):
            if not line.endswith(b"\n"):
                break  # a record still being written
            outcome = self._handle(line, reports)
            if outcome == "wait":
                break
            offset += len(line)
        self.state.executor_offset = offset
        return reports

    def _handle(self, line: bytes, reports: list[str]) -> str:
        try:
            record = json.loads(line)
        except ValueError:
            self.skipped_lines += 1
            return "done"
        if not isinstance(record, dict):
            self.skipped_lines += 1
            return "done"
        message = str(record.get("message", ""))
        if message == "boot started":
            self.state.boot = int(record.get("boot", self.state.boot + 1))
            self.state.first_boot = bool(record.get("first_boot", self.state.boot == 1))
            if self.node_id is None and isinstance(record.get("node_id"), str):
                self.node_id = record["node_id"]
            return "done"
        if message == "script completed":
            outcome = "succeeded"
        elif message.startswith("lifecycle script failed"):
            outcome = "failed"
        elif message == "script skipped":
            outcome = "skipped"
        else:
            return "done"
        stage, script = record.get("stage"), record.get("script")
        if not isinstance(stage, str) or not isinstance(script, str):
            self.skipped_lines += 1
            return "done"
        run: dict[str, Any] | None = None
        if outcome != "skipped" and not ("exit_code" in record and record["exit_code"] is None):
            run = self._script_run(stage, script)
            if run is None:
                if self.state.waiting_since is None:
                    self.state.waiting_since = self.clock()
                if self.clock() - self.state.waiting_since < self.end_marker_grace_seconds:
                    return "wait"
        self.state.waiting_since = None
        reports.append(json.dumps(self._report(record, outcome, stage, script, run), separators=(",", ":")))
        return "done"

    def _script_run(self, stage: str, script: str) -> dict[str, Any] | None:
        """The next complete start…end block of a script's log, consumed; None when not all there yet."""
        try:
            path = self.layout.script_log(stage, script)
        except ValueError:
            return None
        key = f"{stage}/{script}.log"
        offset = self.state.script_offsets.get(key, 0)
        try:
            with path.open("rb") as file:
                file.seek(offset)
                data = file.read()
        except FileNotFoundError:
            return None
        start = _START.search(data)
        if start is None:
            return None
        end = None
        for candidate in _END.finditer(data, start.end()):
            if candidate.group("name") == start.group("name"):
                end = candidate
                break
        if end is None:
            return None
        self.state.script_offsets[key] = offset + end.end() + 1
        output = data[start.end() + 1 : end.start()]
        return {
            "started_at": int(start.group("ts")),
            "ended_at": int(end.group("ts")),
            "exit_code": int(end.group("code")),
            "log_tail": output[-LOG_TAIL_BYTES:].decode("utf-8", "replace"),
        }

    def _report(
        self, record: Mapping[str, Any], outcome: str, stage: str, script: str, run: dict[str, Any] | None
    ) -> dict[str, Any]:
        on_error = _API_ON_ERROR.get(str(record.get("on_error")), DEFAULT_ON_ERROR)
        when = _epoch_seconds(record.get("timestamp"))
        exit_code = run["exit_code"] if run else record.get("exit_code", _exit_code_of(record.get("error")))
        note = str(record.get("error") or record.get("reason") or "")
        return {
            "kind": "script_run",
            "cluster_id": self.identity.cluster_id,
            "compute_node_group_id": self.identity.compute_node_group_id,
            "instance_id": self.identity.instance_id,
            "node_id": self.node_id,
            "boot": self.state.boot,
            "first_boot": self.state.first_boot,
            "stage": stage,
            "script": script,
            "on_error": on_error,
            "exit_code": exit_code,
            "outcome": outcome,
            "started_at": run["started_at"] if run else record.get("started_at", when),
            "ended_at": run["ended_at"] if run else record.get("ended_at", when),
            "log_tail": (run["log_tail"] if run and run["log_tail"] else note)[-LOG_TAIL_BYTES:],
            "script_sha256": record.get("script_sha256"),
        }


def identity_from_executor_log(layout: NodeLayout) -> dict[str, str]:
    """The ids Lifeguard's executor wrote in its last `boot started` record (empty for the PCS agent's)."""
    found: dict[str, str] = {}
    try:
        with layout.executor_log.open("rb") as file:
            for line in file:
                if b'"boot started"' not in line:
                    continue
                try:
                    record = json.loads(line)
                except ValueError:
                    continue
                for key in ("cluster_id", "compute_node_group_id", "node_id"):
                    if isinstance(record.get(key), str):
                        found[key] = record[key]
    except OSError:
        pass
    return found


def _epoch_seconds(timestamp: object) -> int:
    if isinstance(timestamp, str):
        try:
            return int(datetime.fromisoformat(timestamp.replace("Z", "+00:00")).timestamp())
        except ValueError:
            pass
    return int(time.time())


def _exit_code_of(error: object) -> int | None:
    """The exit status in an error text, PCS's (`ExitStatus(unix_wait_status(256))`) or Lifeguard's."""
    if not isinstance(error, str):
        return None
    match = _WAIT_STATUS.search(error)
    if match is None:
        return None
    if match.group(1) is not None:
        status = int(match.group(1))
        return status >> 8 if status & 0x7F == 0 else 128 + (status & 0x7F)
    return int(match.group(2))
