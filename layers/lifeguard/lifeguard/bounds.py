"""The bounds every value from outside is held to before Lifeguard uses or stores it.

A scaling-log record, a node report, a controller event, a tag or a PCS answer is checked against these
before it reaches a decision, a DynamoDB key or an item; what fails is skipped and counted with a reason.

- **Ids** match PCS's own patterns, read from the vendored service model (`ClusterIdentifier`,
  `ComputeNodeGroupIdentifier`), and are at most `ID_MAX_CHARS` long: the model bounds names (40 and 25
  characters) but not ids (`pcs_` and ten characters in practice), and a group's partition key
  (`GROUP#<cluster>#<group>`) must stay far below DynamoDB's 2,048 bytes. A scaling-log record and a node
  report name their cluster and group by id alone (`PCS_ID`), as PCS writes them: a group named by its name
  would be another key, another state, episode and rails (its cooldown and cap) for the same group, which
  PCS's calls take by name as well.
- **Instance ids** are `i-` and up to 32 letters or digits (EC2's are 8 or 17 hex digits); Slurm node
  names at most 128 characters of letters, digits, `.`, `_` and `-`; script names PCS's own pattern.
  None of them can hold the `#` that separates the parts of a sort key (at most 1,024 bytes).
- **Times** are plausible against the invocation's clock: no more than `FUTURE_SKEW_MS` (5 minutes)
  ahead, which is the clock skew AWS itself tolerates when it checks a request's signature, and no more
  than `PAST_MS` (14 days) behind, the oldest event CloudWatch Logs accepts at all, which leaves room for
  hours of late delivery, Lambda's retries for up to 6 hours and a redrive from the parked queue. A
  future-dated outcome would otherwise stay the group's newest for as long as it is kept and blind the
  detection to every genuine loop after it. `lifeguard replay` and the simulation run the handlers on
  their stream's clock, so recorded streams and exported logs stay valid.
- **Subscription payloads** decompress to at most `SUBSCRIPTION_MAX_BYTES`: a CloudWatch Logs delivery
  is at most 1 MB compressed (Lambda's payload limit) and carries at most one PutLogEvents batch (1 MiB of
  messages), so 16 MiB leaves room for JSON escaping while a gzip bomb never fills a 512 MB function.
"""

from __future__ import annotations

import re
from datetime import UTC, datetime
from functools import cache

from lifeguard.pcs_model import shape
from lifeguard.schema import BAD, Check, string

__all__ = [
    "CLUSTER_ID",
    "EPISODE_ID",
    "EPISODE_ID_PATTERN",
    "EPOCH_MS_MAX",
    "EPOCH_S_MAX",
    "FINGERPRINT",
    "FINGERPRINT_PATTERN",
    "FUTURE_SKEW_MS",
    "GROUP_ID",
    "GROUP_NAME",
    "ID_MAX_CHARS",
    "INSTANCE_ID",
    "INSTANCE_ID_PATTERN",
    "NODE_NAME",
    "NODE_NAME_PATTERN",
    "PAST_MS",
    "PCS_ID",
    "PCS_ID_PATTERN",
    "REASON_MAX_CHARS",
    "REVISION_MAX",
    "SCRIPT_NAME",
    "SHORT_TEXT",
    "SUBSCRIPTION_MAX_BYTES",
    "WORD",
    "anchored",
    "clip",
    "clock_time",
    "event_time",
    "group_name_of",
    "implausible_time",
    "is_pcs_id",
    "one_line",
    "pcs_pattern",
    "plausible_times",
    "printable_lines",
    "redacted",
    "utc",
]

ID_MAX_CHARS = 64
INSTANCE_ID_PATTERN = r"^i-[A-Za-z0-9]{1,32}$"
NODE_NAME_PATTERN = r"^[A-Za-z0-9._-]{1,128}$"
EPISODE_ID_PATTERN = r"^ep-[A-Za-z0-9]{1,32}$"
FINGERPRINT_PATTERN = r"^[0-9a-f]{64}$"
REVISION_MAX = 10_000
REASON_MAX_CHARS = 8_000
FUTURE_SKEW_MS = 5 * 60 * 1000
PAST_MS = 14 * 24 * 3600 * 1000
EPOCH_MS_MAX = 4_102_444_800_000  # 2100-01-01: any time beyond is a broken value, not a date
EPOCH_S_MAX = EPOCH_MS_MAX // 1000
SUBSCRIPTION_MAX_BYTES = 16 * 1024 * 1024
# What a compute node group's configuration may take stored (compressed) for Lifeguard to keep it: a
# group's state, the ledger (before and after each change, for the undo), the audit entry and the
# decision each hold one or two, and an item is at most DynamoDB's 400 KB. PCS's own bounds allow about
# 700 KB of JSON (40 scripts of 20 arguments of 256 characters); real ones are a few KB.
CONFIG_MAX_STORED_BYTES = 64 * 1024
# How the clientToken of Lifeguard's own UpdateComputeNodeGroup calls begins (the rest is a digest).
CLIENT_TOKEN_PREFIX = "lifeguard-"


def anchored(pattern: str) -> str:
    """`pattern` matched against the whole string: the PCS model's patterns are searched (as `re.search`
    does), so a valid id inside junk would pass."""
    return f"^(?:{pattern})$"


@cache
def pcs_pattern(shape_name: str) -> str:
    """The anchored pattern of a string shape of the vendored PCS model."""
    return anchored(str(shape(shape_name)["pattern"]))


# The bounds as checks of `lifeguard.schema`, for the record classes.
CLUSTER_ID: Check = string(max_length=ID_MAX_CHARS, pattern=pcs_pattern("ClusterIdentifier"))
GROUP_ID: Check = string(max_length=ID_MAX_CHARS, pattern=pcs_pattern("ComputeNodeGroupIdentifier"))
# An id, never a name: the identifiers' first alternative (names hold no `_`, so none passes for an id).
PCS_ID_PATTERN = r"^pcs_[a-zA-Z0-9]+$"
PCS_ID: Check = string(max_length=ID_MAX_CHARS, pattern=PCS_ID_PATTERN)


_PCS_ID_MATCH = re.compile(PCS_ID_PATTERN).fullmatch  # compiled once: a listing checks every group's id


def is_pcs_id(value: object) -> bool:
    """Whether `value` is a PCS id (`PCS_ID`'s checks, without a problem to say): a text that goes into a
    table's key, an event or a command only when it is."""
    return isinstance(value, str) and len(value) <= ID_MAX_CHARS and _PCS_ID_MATCH(value) is not None


# A compute node group's name as PCS takes one (3-25 characters, never `pcs_...`): what people know it by.
GROUP_NAME: Check = string(min_length=3, max_length=25, pattern=pcs_pattern("ComputeNodeGroupName"))


def group_name_of(value: object) -> str | None:
    """`value` when it is a compute node group's name of PCS's form (`GROUP_NAME`), the only kind kept and
    told; else None."""
    return value if isinstance(value, str) and GROUP_NAME(value, (), []) is not BAD else None


INSTANCE_ID: Check = string(pattern=INSTANCE_ID_PATTERN)
NODE_NAME: Check = string(pattern=NODE_NAME_PATTERN)
SCRIPT_NAME: Check = string(max_length=64, pattern=pcs_pattern("NodeLifecycleScriptNameString"))
EPISODE_ID: Check = string(pattern=EPISODE_ID_PATTERN)
FINGERPRINT: Check = string(pattern=FINGERPRINT_PATTERN)
SHORT_TEXT: Check = string(max_length=REASON_MAX_CHARS)
WORD: Check = string(max_length=64)


def plausible_times(now_ms: int) -> tuple[int, int]:
    """The earliest and the latest time (epoch ms) that can be genuine at `now_ms`."""
    return now_ms - PAST_MS, now_ms + FUTURE_SKEW_MS


def implausible_time(at_ms: int, now_ms: int) -> str | None:
    """Why a time (epoch ms) cannot be genuine at `now_ms` (outside `plausible_times`), or None when it
    can."""
    earliest, latest = plausible_times(now_ms)
    if at_ms > latest:
        return "ahead of the clock"
    if at_ms < earliest:
        return "older than 14 days"
    return None


def utc(ms: object) -> str:
    """Epoch milliseconds as `YYYY-MM-DD HH:MM:SS UTC`; `?` for anything that is not such a time."""
    shown = clock_time(ms)
    return "?" if shown == "?" else f"{shown} UTC"


def event_time(moment: datetime) -> str:
    """A moment as EventBridge stamps an event (`2026-10-21T01:12:42Z`), for programs; a naive one is
    taken as UTC already."""
    return (moment.astimezone(UTC) if moment.tzinfo else moment).strftime("%Y-%m-%dT%H:%M:%SZ")


def clock_time(ms: object) -> str:
    """Epoch milliseconds as `YYYY-MM-DD HH:MM:SS` (UTC, for a column that says so); `?` for anything that
    is not such a time. The one place times are written for people."""
    if isinstance(ms, bool) or not isinstance(ms, int | float) or not 0 <= ms < EPOCH_MS_MAX:
        return "?"
    return datetime.fromtimestamp(ms / 1000, UTC).strftime("%Y-%m-%d %H:%M:%S")


# C0, DEL and C1 (\x9b: CSI); and every format character (Unicode's Cf, as of 15.0), which reorders or hides
# text where it is shown: bidirectional embeddings, overrides and isolates and marks, zero-width spaces and
# joiners, the word joiner, the soft hyphen, the byte-order mark, tag characters. A value cannot show as
# another ("Trojan Source": a location whose name reads backwards, or `set<U+2060>up.sh` read as `setup.sh`).
_CONTROL = re.compile(
    r"[\x00-\x08\x0b-\x1f\x7f-\x9f\xad\u0600-\u0605\u061c\u06dd\u070f\u0890\u0891\u08e2\u180e"
    r"\u200b-\u200f\u202a-\u202e\u2060-\u2064\u2066-\u206f\ufeff\ufff9-\ufffb\U000110bd\U000110cd"
    r"\U00013430-\U0001343f\U0001bca0-\U0001bca3\U0001d173-\U0001d17a\U000e0001\U000e0020-\U000e007f]"
)


def clip(text: object, limit: int = 200) -> str:
    """A value as one short printable line for a log or an error: control characters replaced, cut at
    `limit` characters."""
    # Every character `_CONTROL` replaces is one `isprintable` refuses (Cc, Cf): printable text, most
    # values (a listing clips every group's name and status), needs no pattern run.
    shown = text if type(text) is str and text.isprintable() else _CONTROL.sub("?", str(text))
    return shown if len(shown) <= limit else shown[: limit - 1] + "…"


_LINE_BREAK = re.compile("\r\n|[\n\r\x0b\x0c\x85\u2028\u2029]")


def one_line(text: object) -> str:
    """A value as people are shown it on one line of a message: a line break as `⏎` (no value can forge a
    line of its own), a tab as a space, any other control character (a terminal's escapes) as `?`."""
    return _CONTROL.sub("?", _LINE_BREAK.sub("⏎", str(text)).replace("\t", " "))


def printable_lines(text: object) -> str:
    """A value of many lines (a script's output) as people are shown it: its lines kept, any other control
    character (a terminal's escapes, a carriage return) as `?`."""
    return _CONTROL.sub("?", str(text).replace("\r\n", "\n"))


# A URL's query string or fragment, where a presigned URL (or a token in `?private_token=`) carries its
# credentials, and its user info: none of it leaves Lifeguard in a message.
_URL_SECRETS = re.compile(r"((?:https?|s3)://)(?:[^\s/@?#]*@)?([^\s?#]*)[?#][^\s\"'<>]*", re.IGNORECASE)
_URL_USER = re.compile(r"((?:https?|s3)://)[^\s/@?#]*@", re.IGNORECASE)
_SCHEME = re.compile(r"(?:https?|s3)://", re.IGNORECASE)  # where `_URL_SECRETS` may match
_SPACE = re.compile(r"\s")
_QUERY_MARK = re.compile(r"[?#]")


def _secrets_out(text: str) -> str:
    """`_URL_SECRETS.sub(r"\\1\\2?…", text)` in one pass. A URL's path runs to its `?` or `#`, or to the
    next space: left to itself, the pattern tries every scheme of a run without either again, each to the
    run's end (`s3://` repeated 13,000 times took 11 s). A run is looked at once: when no `?` or `#` follows
    its first scheme before the space, none of its schemes has a query; when one does, it matches there."""
    parts, position, end = [], 0, 0
    while (scheme := _SCHEME.search(text, position)) is not None:
        start = scheme.start()
        if start >= end:  # the run's end, found once a run (a quote ends a URL, not its run)
            space = _SPACE.search(text, start)
            end = len(text) if space is None else space.start()
        found = _URL_SECRETS.match(text, start) if _QUERY_MARK.search(text, start, end) else None
        if found is None:
            parts.append(text[position:end])
            position = end
            continue
        parts.append(text[position:start])
        parts.append(found.expand(r"\1\2?…"))
        position = found.end()
    parts.append(text[position:])
    return "".join(parts)


def redacted(value: object) -> object:
    """`value` (text, or lists and mappings of it) with every URL's query string and fragment shown as
    `?…`, and its user info left out: script locations in configurations, diffs and risks as they go to
    people. Other values as they are."""
    if isinstance(value, str):
        if "://" not in value:
            return value
        return _URL_USER.sub(r"\1", _secrets_out(value))
    if isinstance(value, dict):
        return {key: redacted(item) for key, item in value.items()}
    if isinstance(value, list | tuple):
        return [redacted(item) for item in value]
    return value
