"""What a replay is fed: its input files read into items, interleaved by time as they would have arrived (each
file's own order kept), and the compute node groups they name.

A file is one JSON document (pretty-printed or not) or JSON lines, plain or gzip-compressed, UTF-8 or
UTF-16 with its BOM (what PowerShell's `>` writes), at most `MAX_FILE_BYTES` once uncompressed. A document,
or each line, is one of:

- a CloudWatch Logs subscription event (as `sam local invoke -e` takes it), fed as it is;
- the output of `aws logs filter-log-events` or `aws logs get-log-events` (`--output json`, auto-paginated
  or not): `{"events": [{"timestamp", "message", ...}], ...}`, each message an entry as below;
- a CloudTrail log file as CloudTrail writes it to S3, `{"Records": [...]}`, each record an entry, or the
  output of `aws cloudtrail lookup-events`, `{"Events": [{"CloudTrailEvent": "...", ...}]}`, each event's
  record an entry, replayed oldest first;
- an entry: a PCS scaling-log record; a node report (`"kind": "script_run"`); a CloudTrail record of a
  PCS call, bare or as EventBridge delivers it (`AWS API Call via CloudTrail`); a controller event as
  Lifeguard puts it on its own bus (source `lifeguard`); or a `lifeguard_replay` control line that
  changes a group's configuration at a given time.

Each record, report, call or event is one invocation, so the events it causes follow it in the timeline.
CloudTrail records of other calls (other services share a trail's files; PCS's reads and deletes change no
configuration) are passed over. A file that yields nothing to replay is said in a note.

Damage is skipped and counted, the rest processed: a line or a log event's message that is not JSON, not
a JSON object, or longer than `MAX_ENTRY_CHARS` (a line cut or garbled on its way); an entry of an
accepted kind with a bad field (a scaling-log record without `resource_id`, say), which the handlers
skip and count as they do in the stack. The wrong input is an `UnreadableInputError`, raised before
anything runs, naming the file (and the line or entry) and the shapes a replay reads: a JSON object of no
accepted kind, a `nodeLifecycleActions` config or a template (for `--config` and `lifeguard lint`), and a
file of which nothing is JSON. An empty file, or one over its size, is one too.
"""

from __future__ import annotations

import codecs
import gzip
import heapq
import io
import json
import re
import sys
import uuid
import zlib
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field, replace
from datetime import datetime
from pathlib import Path
from typing import Any

from lifeguard._records import describe_validation_error
from lifeguard.bounds import EPOCH_MS_MAX, ID_MAX_CHARS, clip, is_pcs_id, pcs_pattern
from lifeguard.cloudtrail import (
    CHANGE_CALLS,
    CLOUDTRAIL_DETAIL_TYPE,
    PCS_EVENT_SOURCE,
    PCS_SOURCE,
    call_time_ms,
)
from lifeguard.envelope import envelope_problem
from lifeguard.event_contract import DETAIL_TYPES
from lifeguard.event_contract import SOURCE as LIFEGUARD_SOURCE
from lifeguard.lifecycle_rules import find_problems
from lifeguard.log_subscription import (
    InvalidSubscriptionEventError,
    another_pcs_log,
    decode_subscription,
    encode_subscription,
)
from lifeguard_cli.cloudformation import is_template
from lifeguard_cli.documents import STDIN_NAME, problems_said
from lifeguard_cli.replay.errors import ReplayError, UnreadableInputError
from lifeguard_cli.resources import resource, shipped_file

__all__ = [
    "ACCEPTED_SHAPES",
    "MAX_ENTRY_CHARS",
    "MAX_FILE_BYTES",
    "NODE_REPORT_LOG_GROUP",
    "SCALING_LOG_GROUP",
    "ApiCall",
    "ConfigUpdate",
    "ControllerEvent",
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
MAX_FILE_BYTES = 50 * 1024 * 1024
# A CloudWatch Logs event is at most 1 MB, an EventBridge event 256 KB: a longer line was never one.
MAX_ENTRY_CHARS = 1024 * 1024
ACCEPTED_SHAPES = (
    "JSON lines of PCS scaling-log records or node reports",
    "a CloudWatch Logs subscription event",
    "the output of aws logs filter-log-events or get-log-events (--output json)",
    "EventBridge events: Lifeguard's own, or PCS's AWS API Call via CloudTrail",
    'CloudTrail records, a CloudTrail log file ({"Records": [...]}), or aws cloudtrail lookup-events output',
)
_ACCEPTED = "A replay reads " + "; ".join(ACCEPTED_SHAPES)
# The fields that make an object a scaling-log record (a malformed one, when the others are wrong).
_SCALING_LOG_KEYS = ("status_code", "reason_code", "event_timestamp")
# Keys only the AWS CLI's answers to filter-log-events and get-log-events carry beside `events`.
_LOG_EXPORT_KEYS = ("searchedLogStreams", "nextToken", "nextForwardToken", "nextBackwardToken")
_MALFORMED_LISTED = 5


def _bounded_ms(value: object) -> int | None:
    """An epoch-ms time between 1970 and 2100, else None (a broken value, never a date)."""
    if isinstance(value, bool) or not isinstance(value, int):
        return None
    return value if 0 <= value <= EPOCH_MS_MAX else None


def row_time(row: Mapping[str, Any]) -> int | None:
    """When a record (`event_timestamp`, epoch ms) or a node report (`ended_at`, epoch s) happened, in ms;
    None when it has no plausible time."""
    at = _bounded_ms(row.get("event_timestamp"))
    if at is not None:
        return at
    ended = row.get("ended_at")
    return _bounded_ms(ended * 1000) if isinstance(ended, int) and not isinstance(ended, bool) else None


def _pcs_ids(cluster: object, group: object) -> tuple[str, str] | None:
    """(cluster id, group id) when both are identifiers PCS takes, else None."""
    if not isinstance(cluster, str) or not isinstance(group, str):
        return None
    if max(len(cluster), len(group)) > ID_MAX_CHARS:
        return None
    ok = re.fullmatch(pcs_pattern("ClusterIdentifier"), cluster) and re.fullmatch(
        pcs_pattern("ComputeNodeGroupIdentifier"), group
    )
    return (cluster, group) if ok else None


def _latest(rows: list[dict[str, Any]]) -> int | None:
    times = [t for t in (row_time(row) for row in rows) if t is not None]
    return max(times) if times else None


def _epoch_ms(value: object) -> int | None:
    """An RFC 3339 time with its zone (CloudTrail's `eventTime`, EventBridge's `time`) in epoch ms."""
    try:
        when = datetime.fromisoformat(str(value)[:40])
    except ValueError:
        return None
    return _bounded_ms(int(when.timestamp() * 1000)) if when.tzinfo is not None else None


@dataclass(frozen=True)
class LogLines:
    """JSON lines fed as one subscription event: scaling-log records, or node reports when `reports`."""

    rows: list[dict[str, Any]]
    messages: list[str]
    reports: bool
    where: str = ""  # the file and line it was read from, said when the function skips it

    @property
    def at(self) -> int | None:
        """The latest time of its rows (epoch ms)."""
        return _latest(self.rows)

    @property
    def cluster(self) -> str | None:
        """The cluster whose scaling-log stream PCS would write the lines to: the one cluster of PCS's form
        they all name; None for node reports, and lines naming none or several."""
        clusters = {row.get("resource_id") for row in self.rows}
        named = clusters.pop() if len(clusters) == 1 else None
        return named if not self.reports and is_pcs_id(named) else None

    def subscription_event(self) -> dict[str, Any]:
        """The lines as CloudWatch Logs delivers them to the scaling_events or node_reports function: scaling-
        log lines in their cluster's stream (`cluster`), as PCS writes them; lines of no one cluster in a
        stream of no PCS's form, which the function skips whole."""
        log_group = NODE_REPORT_LOG_GROUP if self.reports else SCALING_LOG_GROUP
        first = self.rows[0] if self.rows else {}
        if self.reports:
            stream = f"{first.get('cluster_id', 'unknown')}/{first.get('instance_id', 'unknown')}"
        elif self.cluster is not None:
            stream = f"AWSLogs/PCS/{self.cluster}/node_lifecycle.log"
        else:
            stream = "replay/no-one-cluster"
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
        """`eventTime` in epoch ms, read as the review reads it (a time it refuses is none)."""
        at = call_time_ms(self.record.get("eventTime"))
        return _bounded_ms(at) if at is not None else None

    @property
    def group(self) -> tuple[str, str] | None:
        """(cluster id, group id): the response's, else the request's identifiers."""
        response = self._part("responseElements").get("computeNodeGroup")
        answered = response if isinstance(response, Mapping) else {}
        cluster = answered.get("clusterId") or self.request.get("clusterIdentifier")
        group = answered.get("id") or self.request.get("computeNodeGroupIdentifier")
        return _pcs_ids(cluster, group)

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


@dataclass(frozen=True)
class ControllerEvent:
    """A controller event as Lifeguard put it on its own bus (a recorded `BootstrapLoopDetected`, say): in a
    replay it is put on the stack's bus again, so the functions the template's rules target (remediate,
    notify) run on it."""

    event: Mapping[str, Any]

    @property
    def detail(self) -> Mapping[str, Any]:
        """The event's `detail`."""
        detail = self.event.get("detail")
        return detail if isinstance(detail, Mapping) else {}

    @property
    def at(self) -> int | None:
        """The event's `time` in epoch ms."""
        return _epoch_ms(self.event.get("time"))

    @property
    def group(self) -> tuple[str, str] | None:
        """(cluster id, group id) of the detail."""
        return _pcs_ids(self.detail.get("cluster_id"), self.detail.get("compute_node_group_id"))

    @property
    def name(self) -> str:
        """The group's name as its failing nodes suggest it."""
        failures = self.detail.get("failures")
        first = failures[0] if isinstance(failures, list) and failures else None
        node = first.get("scheduler_node_id") if isinstance(first, Mapping) else None
        return node.rsplit("-", 1)[0] if isinstance(node, str) and "-" in node else ""

    @property
    def config(self) -> Mapping[str, Any] | None:
        """The group's `nodeLifecycleActions` when the event was published (`config_before`), when PCS
        would take it."""
        config = self.detail.get("config_before")
        return config if isinstance(config, Mapping) and not find_problems(config) else None


Item = LogLines | SubscriptionFile | ConfigUpdate | ApiCall | ControllerEvent


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
    """The items of every input file, in order; how many entries were skipped as damaged; and the notes
    to say on stderr (the damage, files with nothing to replay)."""

    items: list[Item]
    skipped: int
    notes: tuple[str, ...] = ()


def read_inputs(paths: list[Path]) -> Inputs:
    """Every file read into items, interleaved by time (`as_arrived`), or an `UnreadableInputError` for the
    first input a replay cannot take."""
    files: list[list[Item]] = []
    skipped = 0
    notes: list[str] = []
    for given in paths:
        path = shipped(given)
        reading = _Reading(path)
        text, reading.damaged = _text(path)
        reading.read(text)
        files.append(reading.items)
        skipped += len(reading.malformed)
        notes.extend(reading.notes())
    return Inputs(as_arrived(files), skipped, tuple(notes))


def as_arrived(files: list[list[Item]]) -> list[Item]:
    """The files' items as they would have reached the stack: interleaved by time, each file's own order
    kept (a file may hold a record delivered late on purpose), the earlier file first at the same time. An
    item of no time goes with the one before it in its file (the first ones, with the first that has one).
    A subscription event is one delivery, placed at its newest record's time, when CloudWatch Logs could
    have delivered it. Files exported side by side (the scaling log, a node's reports, the CloudTrail calls
    of the same hours) replay as they happened: fed file after file, every call and report came after the
    last failure."""

    def timed(items: list[Item]) -> Iterator[tuple[int, Item]]:
        at = next((item.at for item in items if item.at is not None), 0)
        for item in items:
            at = item.at if item.at is not None else at
            yield at, item

    return [item for _, item in heapq.merge(*(timed(items) for items in files), key=lambda pair: pair[0])]


def shipped(path: Path) -> Path:
    """`path` itself when it exists; else the recorded file Lifeguard ships under that name, so the
    README's examples run from any directory: `events/streams/X.jsonl` (relative to the checkout), or a
    recorded stream's bare name (`article-terminate-loop`). The path as given when neither is there."""
    found = shipped_file(path)
    if found is not path or len(path.parts) != 1:
        return found
    stream = resource("events", "streams", f"{path.name}.jsonl")
    return stream if stream.is_file() else path


def _recorded_streams() -> list[str]:
    """The bare names of the recorded streams Lifeguard ships (`events/streams/`)."""
    streams = resource("events", "streams")
    return sorted(found.stem for found in streams.glob("*.jsonl")) if streams.is_dir() else []


def named(path: Path) -> str:
    """An input as messages name it: its path, or `<stdin>` for `-`, as `lifeguard lint` names it."""
    return STDIN_NAME if str(path) == "-" else str(path)


def _text(path: Path) -> tuple[str, bool]:
    """The file's text: read at most `MAX_FILE_BYTES` (uncompressed when gzip), decoded by its BOM; and
    whether some of it is not UTF-8 (those bytes kept as lone surrogates, so that the lines holding them
    are skipped as damaged and the rest is read)."""
    limit = f"over the {MAX_FILE_BYTES // (1024 * 1024)} MB a replay reads from one file"
    name = named(path)
    try:
        if str(path) == "-":  # stdin: `aws logs filter-log-events ... | lifeguard replay -`
            raw = sys.stdin.buffer.read(MAX_FILE_BYTES + 1)
        else:
            with path.open("rb") as file:
                raw = file.read(MAX_FILE_BYTES + 1)
    except FileNotFoundError as exc:
        said = f"cannot read it: {exc.strerror or exc}"
        if len(path.parts) == 1 and not path.suffix:  # a bare name, as a recorded stream is named
            said += f", nor is it a recorded stream's name ({', '.join(_recorded_streams())})"
        raise UnreadableInputError(name, said) from None
    except OSError as exc:
        raise UnreadableInputError(name, f"cannot read it: {exc.strerror or exc}") from None
    if len(raw) > MAX_FILE_BYTES:
        raise UnreadableInputError(name, f"{limit}: export a shorter time range, or split it")
    if raw[:2] == b"\x1f\x8b":
        try:
            with gzip.GzipFile(fileobj=io.BytesIO(raw)) as unzipped:
                raw = unzipped.read(MAX_FILE_BYTES + 1)
        except (OSError, EOFError, zlib.error) as exc:
            raise UnreadableInputError(name, f"a gzip file that cannot be read ({exc})") from None
        if len(raw) > MAX_FILE_BYTES:
            raise UnreadableInputError(name, f"{limit} (once uncompressed)")
    utf16 = raw.startswith((codecs.BOM_UTF16_LE, codecs.BOM_UTF16_BE))
    try:
        return raw.decode("utf-16" if utf16 else "utf-8-sig"), False
    except UnicodeDecodeError:
        text = "" if utf16 else raw.decode("utf-8-sig", errors="surrogateescape")
        # Binary, not text with a damaged line: NUL bytes and no line of a JSON object in UTF-8 (a log cut
        # short by a crash may end in NULs and a torn line, and its other lines are still read).
        lines = text.splitlines()
        if utf16 or (b"\0" in raw and not any(ln.lstrip().startswith("{") and _utf8(ln) for ln in lines)):
            raise UnreadableInputError(
                name, "not text (neither UTF-8 nor UTF-16)", accepted=_ACCEPTED
            ) from None
        return text, True


def _is_trail_lookup(data: Mapping[str, Any]) -> bool:
    """Whether a document is `aws cloudtrail lookup-events` output: `Events` whose entries carry their
    record as `CloudTrailEvent` text."""
    events = data.get("Events")
    return (
        isinstance(events, list)
        and set(data) <= {"Events", "NextToken"}
        and all(isinstance(event, Mapping) and "CloudTrailEvent" in event for event in events)
    )


def _utf8(text: str) -> bool:
    """Whether the text holds none of the bytes that were not UTF-8 (kept as lone surrogates)."""
    if text.isascii():
        return True
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return False
    return True


@dataclass
class _Reading:
    """One file being read: its items, the entries of it passed over, the damaged entries skipped (each
    with where, relative to the file, and why), and how many entries a replay recognised."""

    path: Path
    items: list[Item] = field(default_factory=list)
    passed_over: int = 0
    malformed: list[tuple[str, str]] = field(default_factory=list)
    recognised: int = 0
    exports: int = 0  # log-event exports read, whose events may be none
    other_logs: int = 0  # events of an export of the cluster's other PCS logs, which the function ignores
    damaged: bool = False  # some bytes are not UTF-8: read as lines, and those holding them skipped

    @property
    def name(self) -> str:
        """The file as what a replay says of it names it."""
        return named(self.path)

    def read(self, text: str) -> None:
        """The file as one document when it parses whole (a one-line document has no length cap but the
        file's: CloudTrail writes its log files on one line), else as JSON lines; refused when none of its
        entries is of an accepted kind but some are damaged (it is not what a replay reads)."""
        stripped = text.strip()
        if not stripped:
            raise UnreadableInputError(self.name, "empty", accepted=_ACCEPTED)
        document_error: json.JSONDecodeError | None = None
        try:
            if self.damaged:
                raise ValueError("not UTF-8")  # read line by line: a damaged line is the damage's bound
            document = json.loads(text, object_pairs_hook=_as_given)
        except (ValueError, RecursionError) as exc:
            document_error = exc if isinstance(exc, json.JSONDecodeError) else None
            for number, line in enumerate(text.split("\n"), start=1):
                if line.strip():
                    self._entry(line, str(number), document=True)
        else:
            one_line = "\n" not in stripped
            self._document(document, "1" if one_line else "", stripped if one_line else None)
        if self.recognised or not self.malformed:
            return
        if self.damaged:  # read line by line for its bytes that are not UTF-8: not what a replay reads
            raise UnreadableInputError(
                self.name, "not text (bytes that are neither UTF-8 nor UTF-16)", accepted=_ACCEPTED
            )
        where, why = self.malformed[0]
        multiline = "\n" in stripped
        if why.startswith("not JSON") and document_error is not None and multiline and where[:1].isdigit():
            at = f"line {document_error.lineno} column {document_error.colno}"
            why = f"not JSON ({at}: {document_error.msg})"
            where = ""
        raise UnreadableInputError(self._where(where), why, accepted=_ACCEPTED)

    def notes(self) -> list[str]:
        """What to say about the file besides its items: damage skipped, or nothing to replay in it."""
        notes = []
        if self.malformed:
            count = len(self.malformed)
            listed = ", ".join(
                f"{_label(where)} ({why})" for where, why in self.malformed[:_MALFORMED_LISTED]
            )
            more = f" and {count - _MALFORMED_LISTED} more" if count > _MALFORMED_LISTED else ""
            entries = _plural(count, "entry", "entries")
            notes.append(f"{self.name}: skipped {count} damaged {entries}: {listed}{more}")
        if self.other_logs:
            events = _plural(self.other_logs, "log event")
            notes.append(
                f"{self.name}: passed over {self.other_logs} {events} of the cluster's other PCS logs "
                "(its scheduler's, its job completions'), as the function ignores them"
            )
        if not self.items and self.passed_over:
            records = _plural(self.passed_over, "CloudTrail record is", "CloudTrail records are")
            calls = " and ".join(CHANGE_CALLS)
            notes.append(
                f"{self.name}: nothing to replay: its {self.passed_over} {records} of other calls than "
                f"PCS's {calls}"
            )
        elif not self.items:
            notes.append(
                f"{self.name}: nothing to replay: {'no log events' if self.exports else 'no records'}"
            )
        return notes

    def _where(self, where: str) -> str:
        if not where:
            return self.name
        return f"{self.name}:{where}" if where[0].isdigit() else f"{self.name}: {where}"

    def _entry(self, text: str, where: str, *, document: bool) -> None:
        """A line (`document`: it may be a whole document) or a log event's message."""
        if len(text) > MAX_ENTRY_CHARS:
            self.malformed.append((where, f"longer than {MAX_ENTRY_CHARS // 1024} KiB"))
            return
        if self.damaged and not _utf8(text):
            self.malformed.append((where, "not UTF-8 text"))
            return
        try:
            data = json.loads(text, object_pairs_hook=_as_given)
        except (ValueError, RecursionError) as exc:
            # Where it broke, as a document's error says it (`documents.py`): json's words lead up to it.
            at = f" at column {exc.colno}" if isinstance(exc, json.JSONDecodeError) else ""
            if isinstance(exc, json.JSONDecodeError):
                reason = exc.msg
            elif isinstance(exc, RecursionError):
                reason = "nested too deep"
            else:  # an integer too long to convert
                reason = f"a number of over {sys.get_int_max_str_digits()} digits"
            self.malformed.append((where, f"not JSON{at}: {reason}"))
            return
        if document:
            self._document(data, where, text)
        else:
            self._row(data, where, text)

    def _document(self, data: object, where: str, text: str | None) -> None:
        if not isinstance(data, dict):
            self.malformed.append((where, "not a JSON object"))
            return
        if isinstance(data.get("awslogs"), Mapping):
            self.items.append(self._subscription(data, where))
            self.recognised += 1
        elif _is_log_export(data):
            self.exports += 1
            for index, event in enumerate(data["events"]):
                at = _within(where, f"events[{index}]")
                message = event.get("message") if isinstance(event, Mapping) else None
                stream = event.get("logStreamName") if isinstance(event, Mapping) else None
                if isinstance(stream, str) and another_pcs_log(stream):
                    self.other_logs += 1  # a scheduler's or job completion log in the same log group
                elif isinstance(message, str):
                    self._entry(message, f"{at}.message", document=False)
                else:
                    self.malformed.append((at, "not a log event with a message"))
        elif isinstance(data.get("Records"), list):
            for index, record in enumerate(data["Records"]):
                self._row(record, _within(where, f"Records[{index}]"), None)
        elif _is_trail_lookup(data):
            self._lookup(data["Events"], where)
        else:
            self._row(data, where, text)

    def _lookup(self, events: list[Any], where: str) -> None:
        """`aws cloudtrail lookup-events` output: each event's record is the JSON text of its
        `CloudTrailEvent`; the CLI lists the newest first, so they are replayed by `eventTime`."""
        records: list[tuple[str, int, str, dict[str, Any]]] = []
        for index, event in enumerate(events):
            at = _within(where, f"Events[{index}].CloudTrailEvent")
            text = event.get("CloudTrailEvent") if isinstance(event, Mapping) else None
            if not isinstance(text, str) or len(text) > MAX_ENTRY_CHARS:
                self.malformed.append((at, "not a CloudTrail event's record (JSON text, at most 1 MiB)"))
                continue
            try:
                record = json.loads(text)
            except (ValueError, RecursionError):
                self.malformed.append((at, "not JSON"))
                continue
            if not isinstance(record, dict):
                self.malformed.append((at, "not a JSON object"))
                continue
            records.append((str(record.get("eventTime", "")), -index, at, record))
        # Oldest first, ties too (the CLI lists the newest first): calls of one second in the order made.
        for _, _, at, record in sorted(records, key=lambda found: found[:2]):
            self._row(record, at, None)

    def _row(self, row: object, where: str, text: str | None) -> None:
        """One entry: a record, a report, a call, a controller event or a control line."""
        if not isinstance(row, dict):
            self.malformed.append((where, "not a JSON object"))
            return
        control = row.get("lifeguard_replay")
        call = api_call(row)
        if isinstance(control, dict):
            self.items.append(_control(control, self._where(where)))
        elif call is not None:
            # A PCS event EventBridge would not deliver is damaged, whatever call it names; a record that
            # names none is no call; one of another call is passed over.
            if (problem := _not_delivered(row)) is not None:
                self.malformed.append((where, problem))
                return
            name = call.record.get("eventName")
            if not isinstance(name, str):
                self.malformed.append((where, "a CloudTrail record of PCS without an eventName"))
                return
            if name in CHANGE_CALLS:
                self.items.append(call)
            else:
                self.passed_over += 1
        elif _is_cloudtrail(row):  # another service's: not a replay's to judge
            self.passed_over += 1
        elif row.get("source") == LIFEGUARD_SOURCE and "detail-type" in row:
            if row["detail-type"] not in DETAIL_TYPES:
                kind = clip(row["detail-type"], 60)
                self.malformed.append((where, f"a Lifeguard event of no known detail-type ({kind!r})"))
                return
            if not isinstance(row.get("detail"), dict):
                self.malformed.append((where, "a Lifeguard event without a detail"))
                return
            problem = _not_delivered(row)
            if problem is not None:
                self.malformed.append((where, problem))
                return
            self.items.append(ControllerEvent(row))
        elif row.get("kind") == "script_run" or any(key in row for key in _SCALING_LOG_KEYS):
            try:
                message = text if text is not None and "\n" not in text else _written(row)
            except RecursionError:  # a key given twice in JSON nested deeper than it can be written back
                self.malformed.append((where, "not JSON: nested too deep"))
                return
            reports = row.get("kind") == "script_run"
            self.items.append(LogLines([row], [message], reports=reports, where=self._where(where)))
        else:
            raise UnreadableInputError(self._where(where), _what(row), accepted=_ACCEPTED)
        self.recognised += 1

    def _subscription(self, event: Mapping[str, Any], where: str) -> SubscriptionFile:
        try:
            batch = decode_subscription(event)
        except InvalidSubscriptionEventError as exc:
            raise UnreadableInputError(self._where(where), str(exc)) from None
        rows = []
        for log_event in batch.events:
            try:
                row = json.loads(log_event.message)
            except (ValueError, RecursionError):
                continue  # the handler skips and counts it
            if isinstance(row, dict):
                rows.append(row)
        return SubscriptionFile(event, rows, any(row.get("kind") == "script_run" for row in rows))


class _GivenTwice(dict[str, Any]):
    """A JSON object that gives a key twice, with its members as given (`pairs`): written back so
    (`_written`), the handlers read it as the functions would, and skip it as ambiguous."""

    pairs: list[tuple[str, Any]]


def _as_given(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    """`json.loads`' `object_pairs_hook`: the object, keeping its members as given when a key comes twice."""
    made = dict(pairs)
    if len(made) == len(pairs):
        return made
    twice = _GivenTwice(made)
    twice.pairs = pairs
    return twice


def _written(value: Any) -> str:
    """An entry read from a document, as one line of JSON for the handlers: as `json.dumps` writes it,
    but an object that gave a key twice with both (`_GivenTwice`)."""
    if not _holds_twice(value):
        return json.dumps(value, separators=(",", ":"))
    if isinstance(value, dict):
        members = value.pairs if isinstance(value, _GivenTwice) else value.items()
        return "{" + ",".join(f"{json.dumps(key)}:{_written(member)}" for key, member in members) + "}"
    return "[" + ",".join(_written(member) for member in value) + "]"


def _holds_twice(value: Any) -> bool:
    """Whether `value` holds an object that gave a key twice, at any depth (looked through without
    recursion: JSON nested as deep as `json.loads` reads stays readable)."""
    pending = [value]
    while pending:
        found = pending.pop()
        if isinstance(found, _GivenTwice):
            return True
        if isinstance(found, dict):
            pending.extend(found.values())
        elif isinstance(found, list):
            pending.extend(found)
    return False


def _within(where: str, part: str) -> str:
    return f"{where}: {part}" if where else part


def _label(where: str) -> str:
    """Where an entry is, as said in a note: `line 3`, `events[2].message`."""
    return f"line {where}" if where[:1].isdigit() else where


def _plural(count: int, noun: str, plural: str | None = None) -> str:
    return noun if count == 1 else plural or f"{noun}s"


def _is_log_export(data: Mapping[str, Any]) -> bool:
    """The AWS CLI's answer to filter-log-events or get-log-events: log events, each with a message."""
    events = data.get("events")
    if not isinstance(events, list):
        return False
    if any(key in data for key in _LOG_EXPORT_KEYS):
        return True
    return bool(events) and all(isinstance(event, Mapping) and "message" in event for event in events)


def _not_delivered(row: Mapping[str, Any]) -> str | None:
    """Why `row`, an EventBridge event, is not one as EventBridge delivers it (Powertools' `EventBridgeModel`:
    `version`, `id`, `account`, `time`, `region`, `resources` and the rest, each of its kind), else None.
    A bare CloudTrail record, which a replay wraps itself, is not asked. The functions a replay feeds read
    what EventBridge gives them, and nothing less is fed to them: nothing their own check of the envelope
    would refuse."""
    if "detail-type" not in row:
        return None
    from aws_lambda_powertools.utilities.parser.models import EventBridgeModel  # pydantic: 0.1 s, once
    from pydantic import ValidationError

    try:
        EventBridgeModel.model_validate(row)
    except ValidationError as exc:
        return f"not an event as EventBridge delivers it: {clip(describe_validation_error(exc), 200)}"
    # What the model would parse but the functions do not take (`lifeguard.envelope`: a time as a number).
    problem = envelope_problem(row)
    return None if problem is None else f"not an event as EventBridge delivers it: {clip(problem, 200)}"


def _is_cloudtrail(row: Mapping[str, Any]) -> bool:
    """A CloudTrail record of another service, bare or as EventBridge delivers it."""
    detail_type = row.get("detail-type")
    if isinstance(detail_type, str) and detail_type.endswith("via CloudTrail"):
        return True
    return isinstance(row.get("eventSource"), str) and isinstance(row.get("eventName"), str)


def _what(row: Mapping[str, Any]) -> str:
    """What an object of no accepted shape is, as far as a replay can tell."""
    group = row.get("computeNodeGroup")
    if (
        "stages" in row
        or "nodeLifecycleActions" in row
        or (isinstance(group, Mapping) and "nodeLifecycleActions" in group)
    ):
        return "a nodeLifecycleActions config: pass it with --config"
    if is_template(row):
        return "a CloudFormation template: check it with lifeguard lint"
    if "detail-type" in row and "source" in row:
        source, detail_type = clip(row["source"], 60), clip(row["detail-type"], 80)
        return f"an EventBridge event of source {source!r} ({detail_type!r}), neither Lifeguard's nor PCS's"
    keys = ", ".join(repr(clip(key, 40)) for key in list(row)[:6])
    more = ", …" if len(row) > 6 else ""
    return f"a JSON object of no shape a replay reads (keys: {keys or 'none'}{more})"


def _control(control: Mapping[str, Any], where: str) -> ConfigUpdate:
    """A `lifeguard_replay` line's update, its configuration one PCS takes (checked as the line is read,
    not when the replay comes to it: nothing runs on inputs that cannot be replayed whole)."""
    group_id, config = control.get("compute_node_group_id"), control.get("update_config")
    at = _bounded_ms(control.get("at"))
    if isinstance(config, Mapping) and is_pcs_id(group_id) and at is not None:
        problems = find_problems(config)
        if problems:
            said = problems_said(problems)
            raise UnreadableInputError(where, f"update_config is no configuration PCS takes: {said}")
        return ConfigUpdate(str(group_id), config, at)
    needs = "update_config (an object), compute_node_group_id (a PCS id) and at (epoch ms)"
    raise UnreadableInputError(where, f"a lifeguard_replay line needs {needs}")


@dataclass(frozen=True)
class SeenGroup:
    """A compute node group the inputs name: when its first record is, the name its nodes suggest, and
    the configuration a controller event says it had (None when no event of the inputs says)."""

    cluster_id: str
    group_id: str
    earliest: int
    name: str
    config: Mapping[str, Any] | None = None


def seen_groups(items: list[Item]) -> list[SeenGroup]:
    """Every (cluster, group) the inputs name, in the order they first appear."""
    found: dict[tuple[str, str], SeenGroup] = {}
    for item in items:
        if isinstance(item, ApiCall | ControllerEvent):
            named, at = item.group, item.at
            if named is not None and at is not None:
                config = item.config if isinstance(item, ControllerEvent) else None
                seen = found.get(named, SeenGroup(*named, at, item.name, config))
                found[named] = replace(
                    seen,
                    earliest=min(seen.earliest, at),
                    name=seen.name or item.name,
                    config=seen.config or config,
                )
            continue
        rows = item.rows if not isinstance(item, ConfigUpdate) else []
        for row in rows:
            ids = _pcs_ids(row.get("resource_id") or row.get("cluster_id"), row.get("compute_node_group_id"))
            at = row_time(row)
            if ids is None or at is None:
                continue  # the handler skips and counts the record
            cluster, group = ids
            node = str(row.get("scheduler_node_id") or row.get("node_id") or "")
            name = node.rsplit("-", 1)[0] if "-" in node else ""
            seen = found.get((cluster, group), SeenGroup(cluster, group, at, name))
            found[(cluster, group)] = replace(seen, earliest=min(seen.earliest, at), name=seen.name or name)
    _one_resource_an_id(found)
    return list(found.values())


def _one_resource_an_id(found: Mapping[tuple[str, str], SeenGroup]) -> None:
    """Refuse inputs that name one id as two resources (a group in two clusters, a cluster's id as a
    group's): PCS's ids are each one resource's, and the local PCS the replay builds holds them so."""
    clusters: dict[str, str] = {}
    for cluster, group in found:
        if clusters.setdefault(group, cluster) != cluster:
            named = f"{clip(clusters[group])} and {clip(cluster)}"
            raise ReplayError(f"the inputs name group {clip(group)} in two clusters, {named}: {_ONE_EACH}")
    for cluster, _ in found:
        if cluster in clusters:
            raise ReplayError(f"the inputs name {clip(cluster)} as a cluster and as a group: {_ONE_EACH}")


_ONE_EACH = "a PCS id is one resource's; mend the records, or replay one cluster's at a time"


def group_name(name: str, group_id: str, taken: set[str]) -> str:
    """A name PCS takes for the group: the one its nodes suggest, else one made of its id; never one in
    `taken` (to which it is added)."""
    candidate = name if 3 <= len(name) <= 25 and name[:1].isalpha() and not name.startswith("pcs_") else ""
    candidate = candidate or f"replay-{group_id.removeprefix('pcs_')}"[:25]
    while candidate in taken:
        candidate = f"{candidate[:20]}-{uuid.uuid4().hex[:4]}"
    taken.add(candidate)
    return candidate
