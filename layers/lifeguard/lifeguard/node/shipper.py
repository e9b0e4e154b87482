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
import stat
import sys
import time
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, field
from functools import partial
from pathlib import Path
from typing import Any, BinaryIO

from lifeguard.errors import LifeguardError
from lifeguard.lifecycle_rules import DEFAULT_ON_ERROR, ON_ERRORS, STAGES
from lifeguard.named_tuple import NamedTuple
from lifeguard.node import clock as node_clock
from lifeguard.node.boto import ImdsError, MissingBoto3Error, imds, is_region, node_client
from lifeguard.node.defaults import LAST_LOOK_SECONDS, POLL_INTERVAL_SECONDS
from lifeguard.node.executor import PCS_ON_ERROR_NAMES
from lifeguard.node.layout import (
    FILE_MODE,
    LINE_PIECE_BYTES,
    LOG_TAIL_BYTES,
    NodeLayout,
    atomic_write,
    open_log,
    output_tail,
    read_lines,
)
from lifeguard.node.report import ScriptRunReport
from lifeguard.pcs_model import validate_shape

__all__ = [
    "LOG_TAIL_BYTES",
    "POLL_INTERVAL_SECONDS",
    "CloudWatchSink",
    "DeliveryFailedError",
    "RejectedEventsError",
    "ReportSink",
    "Shipper",
    "ShipperError",
    "ShipperIdentity",
    "checked_id",
    "identity_from_executor_log",
    "instance_id_from_imds",
]

# How long a run's record may wait for its script log's end marker: it is shipped within 2 s of the script's
# end (DESIGN) with the marker or without it (a script PCS's agent could not download has no log at all).
END_MARKER_GRACE_SECONDS = 1.0
# A delivery that fails is tried again after the poll interval, doubling up to this: a node whose log group
# is missing or whose role may not write to it must not spend the account's CloudWatch Logs quota. A new
# record in the executor's log cuts the wait short (a TERMINATE failure is shipped within 2 s of its end,
# an outage before it or not: the node is about to go).
RETRY_MAX_SECONDS = 30.0
# The most events GetLogEvents returns (its `limit`'s bound): a restart reads at most this much of its
# stream's tail. A crash leaves at most one batch sent and still pending, as each is let go once sent.
RECENT_EVENTS_MAX = 10_000
# A time this far behind the last one sent is a clock set back (chrony stepping it): the events take it.
CLOCK_STEP_MS = 60_000
MAX_BATCH_EVENTS = 1000
# PutLogEvents takes at most 1,048,576 bytes a batch, each event counted as its UTF-8 message and 26
# bytes more: a report's escaped log tail can be six times its 4 KiB, so batches are cut by size too.
MAX_BATCH_BYTES = 1_048_576
EVENT_OVERHEAD_BYTES = 26

_API_ON_ERROR = {**{name: name for name in ON_ERRORS}, **{v: k for k, v in PCS_ON_ERROR_NAMES.items()}}
_START_TIME = re.compile(rb" @ (\d{1,12})\]")
_END_REST = re.compile(rb"(-?\d{1,10}) @ (\d{1,12})\]")
_WAIT_STATUS = re.compile(r"unix_wait_status\((\d+)\)|exit status (-?\d+)")
# A start marker holds at most 20 arguments of 256 characters: a line longer than a piece is none.
_MARKER_MAX_BYTES = LINE_PIECE_BYTES
_END_MARKER_MAX_BYTES = 128  # `[end <name of 64 at most> exit=<code> @ <epoch s>]`
_END_SKEW_SECONDS = 2  # the end marker is written just before the executor.log record, in whole seconds
_EXECUTOR_READ_BYTES = 1024 * 1024  # of executor.log a poll: the rest waits for the next
# What a report holds is held to what the controller takes (`lifeguard.node_report`, whose bounds the
# node's Python cannot import: a test keeps them the same). A value of executor.log beyond them is
# written by something other than an executor: the record is passed over, or the value left out.
_NODE_NAME = re.compile(r"[A-Za-z0-9._-]{1,128}")  # lifeguard.bounds.NODE_NAME_PATTERN
_SHA256 = re.compile(r"[0-9a-f]{64}")
_PCS_ID = re.compile(r"pcs_[a-zA-Z0-9]{1,60}")  # lifeguard.bounds.PCS_ID, of ID_MAX_CHARS at most
_INSTANCE_ID = re.compile(r"i-[A-Za-z0-9]{1,32}")  # lifeguard.bounds.INSTANCE_ID_PATTERN
_EPOCH_S_MAX = 4_102_444_800  # lifeguard.bounds.EPOCH_S_MAX
_BOOT_MAX = 1_000_000
_EXIT_CODE_BOUND = 2**31  # an exit status is a C int


class ShipperError(LifeguardError):
    """The shipper cannot start: a missing identity or an unusable sink."""


class ShipperUnavailableError(ShipperError):
    """The shipper cannot run on this Python at all (no boto3): not a matter of how it was started."""


class DeliveryFailedError(LifeguardError):
    """`ship --once` could not deliver the reports (the log group missing, no permission, no network): they
    stay pending for the next run."""


class RejectedEventsError(LifeguardError):
    """CloudWatch Logs answered a PutLogEvents without keeping its events (their time): tried again."""


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


def _imds(path: str) -> str:
    """One IMDSv2 read, its failure the shipper's."""
    try:
        return imds(path)
    except ImdsError as exc:
        raise ShipperError(str(exc)) from None


_GLUED_TRIES = 16


def _glued_record(line: bytes) -> dict[str, Any] | None:
    """The record that ends a line which does not read as JSON whole: one written after what a writer
    killed mid-line left (a reboot, a power loss: a torn record, or the NUL bytes a file system leaves),
    which has no line break of its own. The first `{"` from which the rest of the line is one JSON object,
    among the first `_GLUED_TRIES` (a line a script wrote to look like many is not read over and over);
    None when none is."""
    decoder = json.JSONDecoder()
    text = line.decode("utf-8", "replace").rstrip()
    at = text.find('{"', 1)
    for _ in range(_GLUED_TRIES):
        if at < 0:
            break
        try:
            record, end = decoder.raw_decode(text, at)
        except (ValueError, RecursionError):
            record, end = None, 0
        if isinstance(record, dict) and end == len(text):
            return record
        at = text.find('{"', at + 1)
    return None


def checked_id(given: tuple[str, str], *, instance: bool = False) -> str:
    """An id of the node's cluster or group (`pcs_…`), or its instance (`i-…`), as the controller takes it:
    reports under any other (a cluster's name for its id, a typo) are delivered, then dropped by the
    controller, every one, while the node says they went; and the stream is named by the ids. `given`:
    where the value came from, and the value."""
    where, value = given
    if (_INSTANCE_ID if instance else _PCS_ID).fullmatch(value) is None:
        form = "an instance id (i-…)" if instance else "a PCS id (pcs_ and letters or digits)"
        shown = value if len(value) <= 80 else value[:80] + "…"
        raise ShipperError(f"{where} {shown!r} is not {form}")
    return value


def instance_id_from_imds() -> str:
    """The EC2 instance id, through IMDSv2."""
    try:
        return _imds("instance-id")
    except ShipperError as exc:
        raise ShipperError(f"{exc}; pass --instance-id") from None


class ReportSink:
    """Where reports go. `connect` readies it when shipping starts; `put` delivers all or raises; `recent`
    lists the last messages delivered."""

    def connect(self) -> None:
        """Make what delivery needs (a client), so the first report does not wait for it."""

    def put(self, messages: list[str]) -> None:
        """Deliver messages, in order."""
        raise NotImplementedError

    def recent(self, limit: int) -> list[str]:
        """Up to `limit` of the most recently delivered messages, oldest first."""
        raise NotImplementedError


class CloudWatchSink(ReportSink):
    """PutLogEvents into `<log group>` / `<cluster-id>/<instance-id>`, creating the stream when missing.

    Without a `client`, `client_factory` makes one (default: the node's boto3, in the instance's region).
    """

    # What the node's instance role needs on the group (the stack's NodePolicy; a test holds it to this):
    # GetLogEvents is how a restarted shipper reads its stream's tail so it never sends a report twice.
    PERMISSIONS = ("logs:CreateLogStream", "logs:PutLogEvents", "logs:GetLogEvents")

    def __init__(
        self,
        log_group: str,
        stream: str,
        client: Any = None,
        *,
        clock: Callable[[], float] = node_clock.now,
        client_factory: Callable[[], Any] | None = None,
    ) -> None:
        self.log_group = log_group
        self.stream = stream
        self._client = client
        self._client_factory = client_factory or _logs_client
        self._clock = clock
        self._last_ms = 0

    def connect(self) -> None:
        """Create the CloudWatch Logs client now: importing boto3 and making a client takes longer than
        a report may wait. Raises ShipperError when this Python has no boto3."""
        self._logs()

    def _logs(self) -> Any:
        if self._client is None:
            try:
                self._client = self._client_factory()
            except MissingBoto3Error as exc:
                raise ShipperUnavailableError(str(exc)) from None
        return self._client

    def put(self, messages: list[str]) -> None:
        """PutLogEvents, in batches; event times do not go backwards (so the stream keeps the order) but
        for a clock set back (`CLOCK_STEP_MS`). Raises RejectedEventsError when CloudWatch Logs took the
        request but not its events (a clock more than 2 hours ahead, or 14 days behind): they stay
        pending, never counted as delivered."""
        logs = self._logs()
        for chunk in _batches(messages):
            clock_ms = int(self._clock() * 1000)
            now_ms = clock_ms if self._last_ms - clock_ms > CLOCK_STEP_MS else max(clock_ms, self._last_ms)
            events = [{"timestamp": now_ms, "message": message} for message in chunk]
            request = {"logGroupName": self.log_group, "logStreamName": self.stream, "logEvents": events}
            try:
                response = logs.put_log_events(**request)
            except logs.exceptions.ResourceNotFoundException:
                with contextlib.suppress(logs.exceptions.ResourceAlreadyExistsException):
                    logs.create_log_stream(logGroupName=self.log_group, logStreamName=self.stream)
                response = logs.put_log_events(**request)
            rejected = (response or {}).get("rejectedLogEventsInfo") or {}
            if rejected:
                raise RejectedEventsError(
                    f"CloudWatch Logs rejected the reports' time {now_ms} ms ({', '.join(sorted(rejected))}):"
                    " is the node's clock right?"
                )
            self._last_ms = now_ms

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


def _sleep(seconds: float, step: float, stop: Callable[[], bool]) -> None:
    """Sleep `seconds`, looking at `stop` every `step`: a long wait never holds up stopping."""
    until = time.monotonic() + seconds
    while not stop():
        left = until - time.monotonic()
        if left <= 0:
            return
        time.sleep(min(step, left))


def _batches(messages: list[str]) -> Iterator[list[str]]:
    """`messages` in order, in batches PutLogEvents takes (`MAX_BATCH_EVENTS`, `MAX_BATCH_BYTES`)."""
    batch: list[str] = []
    size = 0
    for message in messages:
        cost = len(message.encode()) + EVENT_OVERHEAD_BYTES
        if batch and (len(batch) == MAX_BATCH_EVENTS or size + cost > MAX_BATCH_BYTES):
            yield batch
            batch, size = [], 0
        batch.append(message)
        size += cost
    if batch:
        yield batch


def _instance_region() -> str:
    """The instance's own region, through IMDSv2 (off EC2: set AWS_REGION)."""
    try:
        region = _imds("placement/region")
    except ShipperError as exc:
        raise ShipperError(f"{exc}; off EC2, set AWS_REGION") from None
    if not is_region(region):  # an endpoint's host name would be made of it
        raise ShipperError(f"IMDSv2 answered {region[:80]!r} for the region, which is none; set AWS_REGION")
    return region


# One request a try, bounded: the shipper's own tries (`Shipper.run`, backing off, cut short by a new
# record) are the retries. botocore's defaults (a 60 s read timeout, 5 attempts) held one try for 5 minutes
# against an endpoint that took the connection and never answered, the TERMINATE report waiting behind it.
LOGS_CONFIG = {"retries": {"total_max_attempts": 1}, "connect_timeout": 3, "read_timeout": 5}


def _logs_client() -> Any:
    # A systemd service has no AWS_REGION; on EC2 the instance's own region is the one.
    return node_client("logs", "shipping reports", region=_instance_region, config=LOGS_CONFIG)


@dataclass
class _State:
    executor_offset: int = 0
    executor_inode: int = 0  # of the executor.log the offset is in (0: not known, a state saved before)
    # Its first bytes (hex, up to _HEAD_BYTES): a log emptied and written again in place (logrotate's
    # copytruncate) keeps its inode and may be longer than the offset by the next look, but not its start.
    executor_head: str = ""
    script_offsets: dict[str, int] = field(default_factory=dict)
    # Of each script log, the end marker (hex) its offset is just after: a log whose bytes there are others
    # is another file, written anew (none: a state saved before).
    script_marks: dict[str, str] = field(default_factory=dict)
    boot: int = 1
    first_boot: bool = True
    pending: list[str] = field(default_factory=list)
    waiting_since: float | None = None
    # The kernel's boot id of the boot `boot` counts ("": not known), and the instance the count is of (a
    # state baked into the image this node booted from is another instance's).
    boot_id: str = ""
    instance_id: str = ""

    @classmethod
    def load(cls, path: Path) -> _State:
        """The state as saved; a fresh one when the file is missing or is not what `save` writes (a
        damaged file must not stop the shipper: reading again from the start only sends reports again,
        and the node_reports function stores a run once)."""
        try:
            data = json.loads(path.read_text())
            state = cls(
                executor_offset=_offset(data["executor_offset"]),
                executor_inode=_offset(data.get("executor_inode", 0)),
                executor_head=bytes.fromhex(data.get("executor_head", ""))[:_HEAD_BYTES].hex(),
                script_offsets={str(k): _offset(v) for k, v in data["script_offsets"].items()},
                script_marks={
                    str(k): bytes.fromhex(v).hex() for k, v in data.get("script_marks", {}).items()
                },
                boot=_offset(data["boot"]),
                first_boot=data["first_boot"],
                pending=data["pending"],
                boot_id=data.get("boot_id", ""),
                instance_id=data.get("instance_id", ""),
            )
            if (
                type(state.first_boot) is not bool
                or not all(type(m) is str for m in state.pending)
                or type(state.boot_id) is not str
                or type(state.instance_id) is not str
            ):
                raise TypeError("not a state as saved")
        except (OSError, ValueError, KeyError, TypeError, AttributeError, OverflowError):
            return cls()
        return state

    def save(self, path: Path) -> None:
        data = {
            "executor_offset": self.executor_offset,
            "executor_inode": self.executor_inode,
            "executor_head": self.executor_head,
            "script_offsets": self.script_offsets,
            "script_marks": self.script_marks,
            "boot": self.boot,
            "first_boot": self.first_boot,
            "pending": self.pending,
            "boot_id": self.boot_id,
            "instance_id": self.instance_id,
        }
        atomic_write(path, json.dumps(data).encode(), FILE_MODE)


# The end of a run's end marker kept with the offset after it: `[end <name> exit=N @ <epoch>]`.
_MARK_BYTES = 64


def _instance_of(report: str) -> object:
    """The instance a pending report (its JSON) is of; None when it does not say."""
    try:
        data = json.loads(report)
    except ValueError:
        return None
    return data.get("instance_id") if isinstance(data, dict) else None


def _offset(value: object) -> int:
    """A byte offset or a boot count as `save` writes it: an int from 0 (no bool, float or text)."""
    if type(value) is not int or not 0 <= value < 2**63:
        raise ValueError(f"not an offset: {value!r}")
    return value


class KernelBoot(NamedTuple):
    """The boot the node is in: the kernel's id of it, and when it began (epoch s)."""

    boot_id: str
    started_at: int


# The start of executor.log the shipper keeps to know the file again: a record's time is in its first bytes.
_HEAD_BYTES = 64

# /proc/stat's btime is the clock less the uptime: a clock adjusted since moves it by a second or so.
_BOOT_TIME_SLACK_SECONDS = 2


def kernel_boot() -> KernelBoot | None:
    """The boot the node is in (/proc/sys/kernel/random/boot_id, /proc/stat's btime); None where either
    cannot be read."""
    try:
        boot_id = Path("/proc/sys/kernel/random/boot_id").read_text().strip()
        with open("/proc/stat", "rb") as proc:
            for line in proc:
                if line.startswith(b"btime "):
                    return KernelBoot(boot_id, int(line.split()[1])) if boot_id else None
    except (OSError, ValueError, IndexError):
        return None
    return None


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
        boot: Callable[[], KernelBoot | None] = kernel_boot,
    ) -> None:
        self.layout = layout
        self.identity = identity
        self.sink = sink
        self.clock = clock
        self.end_marker_grace_seconds = end_marker_grace_seconds
        self.state = _State.load(layout.shipper_state)
        # Pending reports of another instance (a state file baked into the image this node booted from)
        # are not this node's to send into its stream, nor is its count of boots.
        self.state.pending = [m for m in self.state.pending if _instance_of(m) == identity.instance_id]
        if self.state.instance_id != identity.instance_id:
            self.state.instance_id, self.state.boot, self.state.first_boot = identity.instance_id, 1, True
            self.state.boot_id = ""
        # PCS's agent writes no `boot started` record: the kernel says which boot the node is in. The first
        # one the shipper sees is the one counted; another one (its id) is a reboot, and the runs logged
        # since it began are the next boot's.
        self._kernel = boot()
        if self._kernel is not None and not self.state.boot_id:
            self.state.boot_id = self._kernel.boot_id
        self.skipped_lines = 0
        self.delivered = 0  # reports delivered since it started
        self.node_id = identity.node_id  # when not given, learnt from the executor's boot records
        self._recovered = False
        self._unsaved = False  # the state could not be saved (`_save`)
        self._unread: str | None = None  # why executor.log could not be read, as last said (`_collect`)

    def poll(self) -> int:
        """Read what is new, deliver it; returns how many reports were delivered (raises when delivery fails,
        keeping them pending for the next poll)."""
        if not self._recovered:
            self._recover_pending()
            self._recovered = True
        if not self.state.pending:
            reports = self._collect_on()
            if not reports:
                return 0
            self.state.pending = reports
        # Recorded before sending: a crash mid-send is resolved against the stream on restart.
        self._save()
        delivered = 0
        # Batch by batch, each let go once delivered: a failure partway is retried from where it failed,
        # not from the first batch again.
        for batch in list(_batches(self.state.pending)):
            self.sink.put(batch)
            delivered += len(batch)
            self.delivered += len(batch)
            self.state.pending = self.state.pending[len(batch) :]
            self._save()
        return delivered

    def _collect_on(self) -> list[str]:
        """What is new, read on past stretches of executor.log that hold no report (a megabyte a read): a
        failure after a megabyte of other records is found in this look, by `--once` and by the last look
        at a shutdown, not only by a later poll. A look that read on without finding a report saves where
        it got to, so a restart does not read the same stretch again."""
        read_on = False
        while True:
            where = (self.state.executor_inode, self.state.executor_offset)
            reports = self._collect()
            if reports:
                return reports
            if (self.state.executor_inode, self.state.executor_offset) == where:
                if read_on:
                    self._save()
                return []
            read_on = True

    def _save(self) -> None:
        """Save the state. A disk that refuses it (full, often why a script failed) stops nothing: the
        reports go out all the same, and a restart at worst sends some again, which node_reports stores
        once. Said on stderr the first time."""
        try:
            self.state.save(self.layout.shipper_state)
        except OSError as exc:
            if not self._unsaved:
                print(f"lifeguard-node ship: its state cannot be saved ({exc}); shipping on", file=sys.stderr)
            self._unsaved = True

    def _recover_pending(self) -> None:
        if not self.state.pending:
            return
        try:
            already = self.sink.recent(limit=min(RECENT_EVENTS_MAX, max(len(self.state.pending), 1) * 2))
        except Exception as exc:  # noqa: BLE001 - whatever stops the read (a role without logs:GetLogEvents)
            # Never a reason to hold back every later report: the pending ones go out again, and the
            # controller stores a report it already has once.
            why = " ".join(f"{type(exc).__name__}: {exc}".split())[:300]
            print(
                f"lifeguard-node ship: the stream's last reports cannot be read ({why}); "
                f"the {len(self.state.pending)} pending report(s) are sent again",
                file=sys.stderr,
            )
            return
        # The pending batch went out in order: whatever prefix of it the stream already ends with is sent.
        for count in range(min(len(self.state.pending), len(already)), 0, -1):
            if already[-count:] == self.state.pending[:count]:
                self.state.pending = self.state.pending[count:]
                break
        self._save()

    def run(
        self,
        *,
        once: bool = False,
        poll_interval: float = POLL_INTERVAL_SECONDS,
        stop: Callable[[], bool] = lambda: False,
    ) -> None:
        """Poll until stopped; with `once`, until nothing more can be shipped now. The sink is readied
        first (raising ShipperError when it cannot be), so the first report goes out as soon as it is
        read."""
        if once:
            self.end_marker_grace_seconds = 0.0  # ship what is there now, even a run without its log
        self.sink.connect()
        retry_in = poll_interval
        failed = 0  # tries in a row that could not deliver
        while not stop():
            # What the log held before this try: a record the executor adds while a put fails (a
            # connection timing out takes most of an outage) cuts the wait that follows short too.
            logged = self._executor_log_size()
            try:
                delivered = self.poll()
            except ShipperError:
                raise
            except Exception as exc:  # a failed delivery stays pending and is retried, less and less often
                if once:
                    where = getattr(self.sink, "log_group", None)
                    to = f" to log group {where}" if where else ""
                    raise DeliveryFailedError(
                        f"could not deliver the reports{to}: {type(exc).__name__}: {exc}"
                    ) from exc
                failed += 1
                if failed & (failed - 1) == 0:  # the 1st, 2nd, 4th, 8th, ...: said, and not at every try
                    print(
                        f"lifeguard-node ship: {self._undelivered(exc)}; try {failed} failed, the next in "
                        f"{retry_in:g} s",
                        file=sys.stderr,
                    )
                _sleep(retry_in, poll_interval, partial(self._stopped_or_logged, stop, logged))
                retry_in = min(RETRY_MAX_SECONDS, retry_in * 2)
                continue
            if failed:
                print(f"lifeguard-node ship: delivered again after {failed} failed tries", file=sys.stderr)
                failed = 0
            retry_in = poll_interval
            if once and delivered == 0 and not self.state.pending:
                return
            if not delivered:
                _sleep(poll_interval, min(poll_interval, 0.1), stop)

    def _undelivered(self, exc: BaseException) -> str:
        """What a failed delivery left, in one line."""
        where = getattr(self.sink, "log_group", None)
        to = f" to log group {where}" if where else ""
        why = " ".join(f"{type(exc).__name__}: {exc}".split())
        return f"{len(self.state.pending)} report(s) not delivered{to} ({why[:300]})"

    def last_look(
        self, seconds: float = LAST_LOOK_SECONDS, *, sleep: Callable[[float], None] = time.sleep
    ) -> None:
        """What is pending, then what was logged since, until a look ships nothing: a shipper stopped while a
        batch waits for its retry still reads the record that came meanwhile. A look that fails (CloudWatch
        Logs throttling a fleet whose loop ends its nodes at once) is tried again, a little later each time,
        for `seconds`: the report of the failure that ends the node is the one that matters most, and one
        left pending goes down with the node. Their end is the caller's (`lifeguard-node ship` is ended
        LAST_LOOK_SECONDS after the signal, whatever a put in flight does)."""
        self.end_marker_grace_seconds = 0.0
        deadline, pause = self.clock() + seconds, 0.1
        while self.clock() < deadline:
            try:
                if not self.poll():  # the pending batch, then what was read after it, then nothing more
                    return
            except Exception:  # noqa: BLE001 - tried again while there is time; kept pending after it
                left = deadline - self.clock()
                if left <= 0:
                    return
                sleep(min(pause, left))
                pause = min(2 * pause, 1.0)

    # -- reading --

    def _stopped_or_logged(self, stop: Callable[[], bool], size: int) -> bool:
        """Whether to wait no longer: told to stop, or the executor's log is no longer `size` long."""
        return stop() or self._executor_log_size() != size

    def _executor_log_size(self) -> int:
        try:
            return self.layout.executor_log.stat().st_size
        except OSError:
            return -1

    def _rotated(self) -> tuple[Path, os.stat_result] | None:
        """The file the offset is in, renamed beside the log by a rotation (executor.log.1,
        executor.log-20261021), while it holds records not read: the TERMINATE one may be among them."""
        for path in self._beside():
            try:
                found = path.lstat()
            except OSError:
                continue
            if found.st_ino == self.state.executor_inode and found.st_size > self.state.executor_offset:
                return path, found
        return None

    def _beside(self) -> list[Path]:
        """The files beside executor.log named after it (executor.log.1, executor.log-20261021, …): where a
        rotation puts what it took from the log."""
        log = self.layout.executor_log
        try:
            names = sorted(os.listdir(log.parent))
        except OSError:
            return []
        return [log.parent / name for name in names if name.startswith(log.name) and name != log.name]

    def _unreadable(self, why: str) -> None:
        """Say on stderr why executor.log is not read, once until it is read again or the reason changes:
        no report of it goes out, and a shipper that said nothing left a TERMINATE failure unseen."""
        if why != self._unread:
            print(f"lifeguard-node ship: {why}; no report of it goes out", file=sys.stderr)
        self._unread = why

    def _follow_copy(self, emptied: int) -> bool:
        """Whether executor.log (inode `emptied`), emptied in place by logrotate's copytruncate, left what
        was not read yet in a copy beside it (executor.log.1: its first bytes the saved head, longer than the
        offset): the state then follows the copy, by its inode, read to its end before the log's new start,
        as a renamed log is (`_rotated`). A delivery outage across a rotation lost those records, the
        TERMINATE one among them."""
        state = self.state
        if not state.executor_head:
            return False
        head = bytes.fromhex(state.executor_head)
        for path in self._beside():
            try:
                with open_log(path) as copy:
                    found = os.fstat(copy.fileno())
                    if (
                        found.st_ino != emptied
                        and found.st_size > state.executor_offset
                        and copy.read(len(head)) == head
                    ):
                        state.executor_inode = found.st_ino
                        return True
            except OSError:
                continue
        return False

    def _collect(self) -> list[str]:
        path = self.layout.executor_log
        try:
            found: os.stat_result | None = path.lstat()
        except FileNotFoundError:
            found = None
        if found is not None and not stat.S_ISREG(found.st_mode):
            self._unreadable(f"{path} is not a regular file (a symlink, a FIFO, a directory): it is not read")
            found = None  # what a rotation left of the log before it is still read
        state = self.state
        if found is None or found.st_ino != state.executor_inode:
            rotated = self._rotated() if state.executor_inode else None
            if rotated is not None:  # the rest of the file the offset is in first, under its new name
                path, found = rotated
            elif found is None:
                return []
            else:
                if state.executor_inode:  # another file now (rotated: renamed, a new one made): its start
                    state.executor_offset, state.executor_head = 0, ""
                state.executor_inode = found.st_ino
        size = found.st_size
        if size == state.executor_offset:
            return []  # nothing new: an idle poll is one stat
        try:
            with open_log(path) as file:
                # Truncated, or emptied and written again in place (logrotate's copytruncate): its start,
                # once the rest of what was not read is read from the copy the rotation left, if any.
                head = bytes.fromhex(state.executor_head)
                if state.executor_offset and (size < state.executor_offset or file.read(len(head)) != head):
                    if self._follow_copy(found.st_ino):
                        return self._collect()
                    state.executor_offset, state.executor_head = 0, ""
                file.seek(state.executor_offset)
                data = file.read(_EXECUTOR_READ_BYTES)
        except FileNotFoundError:
            return []  # gone since: nothing to read (this time)
        except OSError as exc:  # no permission, or no regular file since the look above
            self._unreadable(f"{path} cannot be read: {exc.strerror or exc}")
            return []
        if path == self.layout.executor_log:  # read; not the rest of a rotated one, beside a log not read
            self._unread = None
        if not state.executor_offset:
            state.executor_head = data[:_HEAD_BYTES].hex()
        reports: list[str] = []
        offset = state.executor_offset
        if len(data) == _EXECUTOR_READ_BYTES and b"\n" not in data:
            self.skipped_lines += 1  # no record is a megabyte long: pass over it
            state.executor_offset = offset + len(data)
            return reports
        waited = False
        start = 0
        while (end := data.find(b"\n", start) + 1) > 0:  # lines end at \n only: a lone \r is a character
            line, start = data[start:end], end
            try:
                outcome = self._handle(line, reports)
            # A fault of the record's own (a value no check foresaw): no report can be made of it, at any
            # look, so it is passed over. Any other (memory, files, the PCS model unread) may pass: it is
            # raised, and the look tried again, as a failed delivery is.
            except (ValueError, TypeError, LookupError, AttributeError, ArithmeticError) as exc:
                self.skipped_lines += 1
                why = " ".join(f"{type(exc).__name__}: {exc}".split())[:300]
                print(
                    f"lifeguard-node ship: passed over a record of {path} at byte {offset}: {why}",
                    file=sys.stderr,
                )
                outcome = "done"
            if outcome == "wait":
                waited = True
                break
            offset += len(line)
        if not waited:
            # The grace runs from the first record of a pass that waited for its run's log: the records
            # after it (a moved bucket fails every download, none with a log) share it, so the TERMINATE
            # one is still shipped within 2 s.
            state.waiting_since = None
        state.executor_offset = offset
        return reports

    def _handle(self, line: bytes, reports: list[str]) -> str:
        try:
            record = json.loads(line)
        except (ValueError, RecursionError):
            record = _glued_record(line)
            if record is None:
                self.skipped_lines += 1
                return "done"
        if not isinstance(record, dict):
            self.skipped_lines += 1
            return "done"
        message = str(record.get("message", ""))
        kernel = self._kernel
        # Logged in the boot the node is in now (not before a reboot that came since).
        now = (
            kernel is not None
            and _epoch_seconds(record.get("timestamp")) >= kernel.started_at - _BOOT_TIME_SLACK_SECONDS
        )
        if message == "boot started":  # Lifeguard's executor says which boot it is
            self.state.boot = min(max(_int_or(record.get("boot"), self.state.boot + 1), 1), _BOOT_MAX)
            self.state.first_boot = bool(record.get("first_boot", self.state.boot == 1))
            if now and kernel is not None:
                self.state.boot_id = kernel.boot_id
            if self.node_id is None and isinstance(record.get("node_id"), str):
                self.node_id = record["node_id"]
            return "done"
        if now and kernel is not None and kernel.boot_id != self.state.boot_id:
            self.state.boot, self.state.first_boot = self.state.boot + 1, False
            self.state.boot_id = kernel.boot_id
        if message == "script completed":
            outcome = "succeeded"
        elif message.startswith("lifecycle script failed"):
            outcome = "failed"
        elif message == "script skipped":
            outcome = "skipped"
        else:
            return "done"
        stage, script = record.get("stage"), record.get("script")
        if not (stage in STAGES and isinstance(script, str) and _script_name(script)):
            # Not a stage, or not a name PCS takes (at most 64 characters): never a report, which could
            # be too large for PutLogEvents and hold up every report after it.
            self.skipped_lines += 1
            return "done"
        run: dict[str, Any] | None = None
        if outcome != "skipped" and not ("exit_code" in record and record["exit_code"] is None):
            span = (record.get("log_start"), record.get("log_end"))
            run = self._run_at(stage, script, span) or self._script_run(
                stage, script, _exit_of(record, outcome), _ended_at(record)
            )
            if run is None:
                if self.state.waiting_since is None:
                    self.state.waiting_since = self.clock()
                # The grace runs from when the record was reached, and from when it was written: records
                # written together (failed downloads between cached runs, a look after a restart) do not
                # each wait their own in turn after the one before, which put the TERMINATE record seconds
                # behind. A clock stepped back since makes a record look new: the first bound holds then.
                written = node_clock.read_stamp(record.get("timestamp"))
                fresh = written is None or node_clock.now() - written < self.end_marker_grace_seconds
                if fresh and self.clock() - self.state.waiting_since < self.end_marker_grace_seconds:
                    return "wait"
            else:
                self.state.waiting_since = None  # a run found in its log: the next one waits anew
        reports.append(self._report(record, outcome, stage, script, run).to_json())
        return "done"

    def _run_at(self, stage: str, script: str, span: tuple[object, object]) -> dict[str, Any] | None:
        """The run where Lifeguard's executor says it is in the script's log (`log_start`, `log_end`):
        its start marker, and the last 4 KiB before its end marker, read and nothing else. None when the
        record gives no place, or the log does not hold the run there (rotated, truncated)."""
        start, end = span
        if not (isinstance(start, int) and isinstance(end, int) and 0 <= start < end):
            return None
        try:
            path = self.layout.script_log(stage, script)
            with open_log(path) as file:
                file.seek(start)
                first = file.readline(_MARKER_MAX_BYTES)
                window_from = max(start + len(first), end - LOG_TAIL_BYTES - _END_MARKER_MAX_BYTES)
                if window_from > end:  # its first line runs past its end: the log was rewritten
                    return None
                file.seek(window_from)
                window = file.read(end - window_from)  # never -1, which would read the whole log
        except (OSError, ValueError):
            return None
        started_at = _marker_time(first.removesuffix(b"\n"), f"[start {script} args=".encode())
        output, _, marker = window.removesuffix(b"\n").rpartition(b"\n")
        end_prefix = f"[end {script} exit=".encode()
        found = _END_REST.fullmatch(marker, len(end_prefix)) if marker.startswith(end_prefix) else None
        if started_at is None or found is None or len(window) != end - window_from:
            return None
        self._read_to(f"{stage}/{script}.log", end, window)
        return {
            "started_at": started_at,
            "ended_at": int(found.group(2)),
            "exit_code": int(found.group(1)),
            "log_tail": output_tail(output + b"\n" if output else b""),
        }

    def _script_run(
        self, stage: str, script: str, exit_code: int | None, ended_at: int
    ) -> dict[str, Any] | None:
        """The run the executor.log record is about, in the script's log: its start marker, then the last
        end marker with its exit code (when the record tells it) dated no later than the record. A line
        the script printed that looks like an end marker is output, not the end: the real end marker comes
        after all of the script's output. A start marker dated no later than the record, and no earlier than
        the run being read, begins a run (one left without its end, by a crash or a reboot, is no part of
        it); others, and end markers dated before the run's start, are output. The log is read in chunks,
        only its lines that begin as a marker does looked at, and the last 4 KiB of the run's output read
        once its end is found: 100 MB of output costs no more memory than a line. None when the run is not
        all there yet."""
        try:
            path = self.layout.script_log(stage, script)
        except ValueError:
            return None
        key = f"{stage}/{script}.log"
        start_prefix, end_prefix = f"[start {script} args=".encode(), f"[end {script} exit=".encode()
        latest = ended_at + _END_SKEW_SECONDS
        started_at: int | None = None
        output_from = 0  # where the output of the run being read begins
        found: dict[str, Any] | None = None
        try:
            with open_log(path) as file:
                offset = self._read_from(key, file)
                file.seek(offset)
                # Only lines that begin as a marker does can be one: the others are the script's output,
                # passed over by one search in C, and its tail read once the run's end is found.
                for raw, end_offset in _marker_lines(file, offset):
                    line = raw.removesuffix(b"\n")
                    # Markers are matched by their known prefix, never by a backtracking pattern: a
                    # script's output is not trusted to be cheap to search.
                    start = _marker_time(line, start_prefix)
                    if (
                        start is not None
                        and start <= latest
                        and (started_at is None or start >= started_at)
                        and (found is None or start >= found["ended_at"])
                    ):
                        if found is not None:
                            break  # the next run: the one the record is about ended before it began
                        # A run begins: one before it that never ended (a crash, a reboot mid-script) is
                        # another run, neither its output nor this start marker (its arguments) this one's.
                        # A marker dated before the run's own start is output (a script printing its log).
                        started_at, output_from = start, end_offset
                        continue
                    if started_at is None:
                        continue  # before the first run
                    end = _END_REST.fullmatch(line, len(end_prefix)) if line.startswith(end_prefix) else None
                    if end is not None:
                        code, at = int(end.group(1)), int(end.group(2))
                        if started_at <= at <= latest and exit_code in (None, code):
                            output_to = end_offset - len(raw)
                            found = {
                                "exit_code": code,
                                "ended_at": at,
                                "offset": end_offset,
                                "mark": raw,
                                "tail": (max(output_from, output_to - LOG_TAIL_BYTES), output_to),
                            }
                if started_at is None or found is None:
                    return None
                tail_from, tail_to = found["tail"]
                file.seek(tail_from)
                tail = file.read(tail_to - tail_from)
        except OSError:  # not there (yet), or not a file one can read: the run is shipped without it
            return None
        self._read_to(key, found["offset"], found["mark"])
        return {
            "started_at": started_at,
            "ended_at": found["ended_at"],
            "exit_code": found["exit_code"],
            "log_tail": tail.decode("utf-8", "replace"),
        }

    def _read_from(self, key: str, file: Any) -> int:
        """Where a script log (open as `file`) holds its next run: just after the end marker of the last run
        read, when the log still holds that marker there; else from its start, as executor.log is read.
        A log removed and written anew (a clean-up between boots), or a state baked into the image of
        another instance, holds other bytes there, whatever the file's length or inode (ext4 gives a new
        file the inode of the one just removed)."""
        offset = self.state.script_offsets.get(key, 0)
        mark = bytes.fromhex(self.state.script_marks.get(key, ""))
        if offset < len(mark) or os.fstat(file.fileno()).st_size < offset:
            return 0
        file.seek(offset - len(mark))
        return offset if file.read(len(mark)) == mark and file.tell() == offset else 0

    def _read_to(self, key: str, offset: int, before: bytes) -> None:
        """Note that the script log was read up to `offset`, which `before` (its end marker) ends at."""
        self.state.script_offsets[key] = offset
        self.state.script_marks[key] = before[-_MARK_BYTES:].hex()

    def _report(
        self, record: Mapping[str, Any], outcome: str, stage: str, script: str, run: dict[str, Any] | None
    ) -> ScriptRunReport:
        on_error = _API_ON_ERROR.get(str(record.get("on_error")), DEFAULT_ON_ERROR)
        when = _epoch_seconds(record.get("timestamp"))
        # executor.log says how the script ended; its own log only says what it printed.
        told = _exit_of(record, outcome)
        exit_code = told if told is not None else (run["exit_code"] if run else None)
        if exit_code is not None and not -_EXIT_CODE_BOUND <= exit_code < _EXIT_CODE_BOUND:
            exit_code = None
        # A lone surrogate (a JSON escape in the record) is text no UTF-8 carries, and no report may: `?`.
        note = str(record.get("error") or record.get("reason") or "").encode("utf-8", "replace").decode()
        sha256 = record.get("script_sha256")
        node_id = self.node_id
        return ScriptRunReport(
            cluster_id=self.identity.cluster_id,
            compute_node_group_id=self.identity.compute_node_group_id,
            instance_id=self.identity.instance_id,
            node_id=node_id if isinstance(node_id, str) and _NODE_NAME.fullmatch(node_id) else None,
            boot=self.state.boot,
            first_boot=self.state.first_boot,
            stage=stage,
            script=script,
            on_error=on_error,
            exit_code=exit_code,
            outcome=outcome,
            started_at=_epoch_or(run["started_at"] if run else record.get("started_at"), when),
            ended_at=_epoch_or(run["ended_at"] if run else record.get("ended_at"), when),
            log_tail=output_tail(run["log_tail"] if run and run["log_tail"] else note),
            script_sha256=sha256 if isinstance(sha256, str) and _SHA256.fullmatch(sha256) else None,
        )


def identity_from_executor_log(layout: NodeLayout) -> dict[str, str]:
    """The ids Lifeguard's executor wrote in its last `boot started` record (empty for the PCS agent's)."""
    found: dict[str, str] = {}
    try:
        with open_log(layout.executor_log) as file:
            for line, _ in read_lines(file, 0):  # in chunks: a line of any length costs no more memory
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


# Bytes read at a time when looking for markers among a script's output.
_SCAN_CHUNK_BYTES = 1024 * 1024


# What a marker line begins with (`[start <name> args=…`, `[end <name> exit=…`), found after a newline.
_MARKER_HEADS = (b"[start ", b"[end ")
_NEXT_MARKER = re.compile(rb"\n\[(?:start|end) ")


def _marker_lines(file: BinaryIO, offset: int) -> Iterator[tuple[bytes, int]]:
    """The complete lines of `file` from `offset` (a line's start) that begin as a marker does (`[start `,
    `[end `) and are no longer than a marker can be, as `read_lines` gives lines (each with its newline, and
    the offset after it). The lines between them are passed over by one search in C, never one by one,
    so 100 MB of output costs what reading it does (a script's own `[INFO] …` lines too); at most a
    marker's length is held beyond the chunk being read."""
    data, base, at, line_start = b"", offset, 0, True
    while True:
        chunk = file.read(_SCAN_CHUNK_BYTES)
        if not chunk:
            return
        data, base, at = data[at:] + chunk, base + at, 0
        while at < len(data):
            if not line_start:
                candidate = _NEXT_MARKER.search(data, at)
                if candidate is None:
                    # No marker can begin before the end of what was read but one cut by the chunk's end:
                    # the last line's start is kept, when its head may still become a marker's.
                    last = data.rfind(b"\n", at) + 1
                    if last and len(data) - last < len(_MARKER_HEADS[0]):
                        at, line_start = last, True
                        break
                    at, line_start = len(data), False
                    break
                at, line_start = candidate.start() + 1, True
            rest = data[at : at + len(_MARKER_HEADS[0])]
            if len(rest) < len(_MARKER_HEADS[0]) and any(head.startswith(rest) for head in _MARKER_HEADS):
                break  # too little of the line read to tell: held until the next chunk
            if not data.startswith(_MARKER_HEADS, at):
                line_start = False
                continue
            newline = data.find(b"\n", at, at + _MARKER_MAX_BYTES + 1)
            if newline >= 0:
                yield data[at : newline + 1], base + newline + 1
                at = newline + 1
            elif len(data) - at > _MARKER_MAX_BYTES:
                line_start = False  # longer than any marker: output
            else:
                break  # its end is in the next chunk (or not written yet): held until then


def _marker_time(line: bytes, prefix: bytes) -> int | None:
    """The time of a start marker of the script whose marker begins with `prefix`; None for other lines."""
    if not line.startswith(prefix) or len(line) > _MARKER_MAX_BYTES:
        return None
    found = _START_TIME.fullmatch(line, line.rfind(b" @ "))
    return int(found.group(1)) if found else None


def _exit_of(record: Mapping[str, Any], outcome: str) -> int | None:
    """The exit status executor.log gives: Lifeguard's `exit_code`, PCS's error text, 0 for success."""
    code = record.get("exit_code")
    if isinstance(code, int) and not isinstance(code, bool):
        return code
    if outcome == "succeeded":
        return 0
    return _exit_code_of(record.get("error"))


def _ended_at(record: Mapping[str, Any]) -> int:
    """When the run ended, as executor.log says (its `ended_at`, else the record's time)."""
    return _int_or(record.get("ended_at"), _epoch_seconds(record.get("timestamp")))


def _int_or(value: object, default: int) -> int:
    return value if isinstance(value, int) and not isinstance(value, bool) else default


def _epoch_or(value: object, default: int) -> int:
    """An epoch second as a report holds one (1970 to 2100); `default` for anything else."""
    return value if isinstance(value, int) and 0 <= value < _EPOCH_S_MAX else default


def _epoch_seconds(timestamp: object) -> int:
    """The whole epoch second of a record's time; now, when it has none that can be read (or none a
    report can hold)."""
    seconds = node_clock.read_stamp(timestamp)
    return _epoch_or(int(seconds) if seconds is not None else None, int(node_clock.now()))


def _script_name(name: str) -> bool:
    """Whether `name` is a script name PCS takes."""
    return not validate_shape("NodeLifecycleScriptNameString", name)


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
