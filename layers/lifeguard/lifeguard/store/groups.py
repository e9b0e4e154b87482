"""The group state items and the node-report items (layout: `lifeguard.store.table`).

A group's state is written only with a condition on its version, so concurrent invocations never lose each
other's updates: the loser reloads and re-applies its records, which are idempotent.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import logging
import zlib
from collections import OrderedDict
from collections.abc import Callable, Iterable, Iterator
from json.encoder import encode_basestring_ascii
from typing import TYPE_CHECKING, Any, ClassVar, NamedTuple

from lifeguard.bounds import EPOCH_MS_MAX, clip
from lifeguard.errors import LifeguardError
from lifeguard.group_state import ABSENT, MAPS, BootOutcome, GroupState
from lifeguard.store.table import (
    STATE_LEVEL,
    TRANSACTION_MAX,
    ConditionFailedError,
    Item,
    Table,
    TransactionConflictError,
    Write,
    group_key,
    item_key,
)
from lifeguard.values import frozen

if TYPE_CHECKING:
    from mypy_boto3_dynamodb import DynamoDBClient

    from lifeguard.node_report import NodeReport

__all__ = [
    "INSTANCE_RUNS_MAX",
    "LAUNCH_RUNS_MAX",
    "REPORTED_LOOP_READ_MAX",
    "REPORT_TTL_SECONDS",
    "RUNS_READ_MAX",
    "GroupStore",
    "RunMark",
    "Runs",
    "VersionConflictError",
]

logger = logging.getLogger("lifeguard")

REPORT_TTL_SECONDS = 14 * 24 * 3600
STATE = "STATE"
REPORT = "REPORT#"
RAN = "RAN#"
RUNS = "R"  # what REPORT# and RAN# begin with, and no other sort key
REPORT_DIGEST_CHARS = 16  # of the sha256 of a failed run's report, ending its key
# The runs of one group read at most: its nodes write them, and a node can write any number. A failed run
# takes about 5 KB (up to 24 KB with an escaped log tail), and a group looping for days in notify mode keeps
# thousands of them for a fortnight: at 5,000 each of its batches read 25-120 MB (1 MB pages, one after the
# other). Past this bound the evidence is partial, and said: the instances a decision is about are then
# read one by one (`lifeguard.handlers.evidence`), a few KB each.
RUNS_READ_MAX = 1_000
# The failed runs read for a loop the reports alone show (a group whose scaling log is not delivered): its
# failures are not named by the scaling log, so past the group's read there is no instance to read one by
# one, and a partial read (keys sort by instance, not time) could miss the newest. Read only for such a
# group, and only when its 1,000 did not hold them all.
REPORTED_LOOP_READ_MAX = 5_000
# The runs of one instance read at most, of each kind: a real instance's are its scripts (at most 20 a stage)
# times its boots in a fortnight.
INSTANCE_RUNS_MAX = 1_000
# Failed runs read for one script of one launch boot, when an instance's own runs fill their read.
LAUNCH_RUNS_MAX = 3_000
# The state item's attributes holding its configuration's `checked_at` when only that moved (epoch ms), and
# the item's version they were written at: a write that does not know them (an older release's, during a
# deploy or after a rollback) moves the version on and leaves them out of date, so they are then ignored.
CHECKED = "checked_at"
CHECKED_VERSION = "checked_version"


class VersionConflictError(LifeguardError):
    """Another invocation wrote the group's state first."""


# A write sends the map entries that changed, not all of them, unless there are more changes than this, or
# the table does not hold the maps on their own yet. An update expression is at most 4 KB and 300 operators:
# counting each entry's `=` and its path's `.` as one each (the most DynamoDB may count), 145 changes make
# at most 293 with the rest of an update, in 3.2 KB; a busy group's batch of 1,000 records makes up to 135.
MAP_CHANGES_MAX = 145
# How each map's entries (`GroupState.MAPS`) are held as attribute values, and read back.
_ENCODE: dict[str, Callable[[Any], Item]] = {
    "launches": lambda at: {"N": str(at)},
    "outcomes": lambda o: {"S": _outcome_text(o)},
}
_DECODE: dict[str, Callable[[str, Item], Any]] = {
    "launches": lambda _instance, value: int(value["N"]),
    "outcomes": lambda instance, value: BootOutcome(instance, *_outcome_row(value["S"])),
}


def _outcome_text(outcome: BootOutcome) -> str:
    """The outcome's row as JSON, the text `json.dumps` makes, written directly: one is made for every
    outcome a batch changed, and the encoder's set-up is most of its cost."""
    node, at, launched = outcome.scheduler_node_id, outcome.event_timestamp, outcome.launched_at
    row = [node, at, int(outcome.succeeded), launched]
    if type(at) is not int or not (node is None or type(node) is str):
        return json.dumps(row)
    if launched is not None and type(launched) is not int:
        return json.dumps(row)
    quoted = "null" if node is None else encode_basestring_ascii(node)
    return f"[{quoted}, {at}, {row[2]}, {'null' if launched is None else launched}]"


def _outcome_row(text: str) -> tuple[str | None, int, bool, int | None]:
    node, at, succeeded, launched_at = json.loads(text)
    return node, int(at), bool(succeeded), launched_at


def _state_of(item: Item) -> GroupState:
    # The rest of the state is stored compressed: its size is what DynamoDB charges.
    body = item["state"]
    raw = zlib.decompress(body["B"]) if "B" in body else body["S"].encode()
    state = GroupState.model_validate_json(raw)
    state.version = int(item["version"]["N"])
    checked = _checked_at(item)
    if checked is not None and state.config is not None:
        state.config.checked_at = checked
    for name in MAPS:  # a map the item does not have was written in the JSON, before maps had attributes
        if name in item:
            decode = _DECODE[name]
            setattr(state, name, {key: decode(key, value) for key, value in item[name]["M"].items()})
    if all(name in item for name in MAPS):  # else the next write puts the item whole
        state.stored(raw.decode(), checked_apart=checked is not None)
    return state


# What reading an item that is no state of Lifeguard's raises: an attribute missing or of another type,
# a body that is not compressed JSON of a state (`Invalid` is a ValueError), a map entry of another form.
_UNREADABLE = (KeyError, TypeError, ValueError, AttributeError, IndexError, zlib.error)


class UnreadableStateError(LifeguardError):
    """A group's state item that no release of Lifeguard wrote: edited by hand, or damaged."""


def _why(exc: Exception) -> str:
    return clip(f"{type(exc).__name__}: {exc}", 300)


@contextlib.contextmanager
def reading(what: str, group_id: str) -> Iterator[None]:
    """Turn what reading a group's item raises when no release of Lifeguard wrote it (edited by hand, or
    damaged) into UnreadableStateError naming the item (`what`: state, ledger) and the group."""
    try:
        yield
    except _UNREADABLE as exc:
        why = _why(exc)
        raise UnreadableStateError(f"the {what} item of {clip(group_id)} cannot be read: {why}") from None


def _state_at(item: Item, key: tuple[str, str]) -> GroupState:
    """The state an item keyed by `key` (cluster, group) holds; UnreadableStateError for an item no release
    of Lifeguard wrote there (edited by hand, or damaged), one holding another group's state included: its
    write would go to that group's item."""
    with reading("state", key[1]):
        state = _state_of(item)
    if (state.cluster_id, state.group_id) != key:
        held = f"{clip(state.cluster_id)}/{clip(state.group_id)}"
        raise UnreadableStateError(f"the state item of {clip(key[1])} holds the state of {held}")
    return state


def _checked_at(item: Item) -> int | None:
    """The configuration's `checked_at` the item holds on its own (newer than its body's), if it holds one
    written at its current version."""
    text = item.get(CHECKED, {}).get("N")
    written_at = item.get(CHECKED_VERSION, {}).get("N")
    if written_at != item["version"]["N"] or not (isinstance(text, str) and _decimal(text)):
        return None
    return int(text) if int(text) < EPOCH_MS_MAX else None


def _decimal(text: str) -> bool:
    return text.isascii() and text.isdigit() and len(text) <= 20


def _versioned_write(state: GroupState) -> tuple[Write, str, bool]:
    """The state's write, made only over the version it was read at (or where there is none), the JSON of
    the rest of the state it holds, and whether it holds the configuration's `checked_at` on its own
    (`CHECKED`). A busy group's pending launches and outcomes are most of its state: when the table holds
    them, only the entries a batch changed are sent (an update), and the rest of the state only when it
    changed; a read of PCS that found the group as it was sends its time alone. A batch pays for what it
    changed."""
    version = state.version
    unchanged = state.unchanged_body()
    touched = state.touched_maps()
    if touched is None:
        return _put_whole(state, unchanged)
    names = {"#v": "version"}
    values: Item = {":expected": {"N": str(version)}, ":next": {"N": str(version + 1)}}
    sets = ["#v = :next"]
    removes: list[str] = []
    text = unchanged if unchanged is not None else state.model_dump_json(exclude={"version", *MAPS})
    apart = state.checked_apart
    if unchanged is None and state.body_changed(text):
        names["#s"], values[":state"] = "state", _body(text)
        sets.append("#s = :state")
        # The body holds the time now; one an older release left out of date goes too.
        names["#c"], names["#cv"] = CHECKED, CHECKED_VERSION
        removes.extend(("#c", "#cv"))
        apart = False
    else:
        moved = state.checked_moved()
        if moved is not None:
            names["#c"], values[":checked"] = CHECKED, {"N": str(moved)}
            sets.append("#c = :checked")
        if moved is not None or apart:  # written at this version, or still good at the next
            names["#cv"] = CHECKED_VERSION
            sets.append("#cv = :next")
            apart = True
    # What changed is what `GroupState.map_changes` says, worked out here as it is written: each key
    # touched is looked at once and takes the next placeholder, with no lists of changes made in between.
    # An update holds MAP_CHANGES_MAX changes at most: past them the item is put whole.
    room = MAP_CHANGES_MAX
    for (entries, notes), (name, map_name, added, removed, encode) in zip(touched, _MAP_WRITES, strict=True):
        set_count = gone_count = 0
        for entry, held in notes.items():
            value = entries.get(entry, ABSENT)
            if value is ABSENT:
                if held is not ABSENT:
                    if not room:
                        return _put_whole(state, unchanged)
                    room -= 1
                    entry_name, removal = removed[gone_count]
                    names[entry_name] = entry
                    removes.append(removal)
                    gone_count += 1
            elif held is ABSENT or (held is not value and held != value):
                if not room:
                    return _put_whole(state, unchanged)
                room -= 1
                entry_name, value_name, assignment = added[set_count]
                names[entry_name] = entry
                values[value_name] = encode(value)
                sets.append(assignment)
                set_count += 1
        if set_count or gone_count:  # DynamoDB refuses a name the expressions do not use: set only if used
            names[map_name] = name
    expression = "SET " + ", ".join(sets) + (" REMOVE " + ", ".join(removes) if removes else "")
    update = {
        "Key": item_key(group_key(state.cluster_id, state.group_id), STATE),
        "UpdateExpression": expression,
        "ConditionExpression": "#v = :expected",
        "ExpressionAttributeNames": names,
        "ExpressionAttributeValues": values,
    }
    return ("Update", update), text, apart


def _put_whole(state: GroupState, unchanged: str | None) -> tuple[Write, str, bool]:
    """The state's item put whole, over the version it was read at (or where there is none): the table does
    not hold its maps on their own yet, or more of them changed than an update may send."""
    if unchanged is None or state.checked_apart or state.checked_moved() is not None:
        unchanged = None  # the body takes the configuration's checked_at again: the item is put whole
    text = unchanged if unchanged is not None else state.model_dump_json(exclude={"version", *MAPS})
    maps = {name: {"M": {k: _ENCODE[name](v) for k, v in getattr(state, name).items()}} for name in MAPS}
    key = item_key(group_key(state.cluster_id, state.group_id), STATE)
    item = {**key, "version": {"N": str(state.version + 1)}, "state": _body(text), **maps}
    put = {
        "Item": item,
        "ConditionExpression": "attribute_not_exists(pk) OR version = :expected",
        "ExpressionAttributeValues": {":expected": {"N": str(state.version)}},
    }
    return ("Put", put), text, False


# Each map's placeholders in an update: its name's, and (name, value, assignment) of each entry it sets, and
# (name, removal) of each it removes, made once (an update holds at most MAP_CHANGES_MAX changes).
_PLACEHOLDERS: tuple[tuple[str, list[tuple[str, str, str]], list[tuple[str, str]]], ...] = tuple(
    (
        f"#m{m}",
        [(f"#m{m}a{n}", f":m{m}a{n}", f"#m{m}.#m{m}a{n} = :m{m}a{n}") for n in range(MAP_CHANGES_MAX)],
        [(f"#m{m}r{n}", f"#m{m}.#m{m}r{n}") for n in range(MAP_CHANGES_MAX)],
    )
    for m in range(len(MAPS))
)
# Per map: its name, its placeholders and how its entries are encoded, in one row.
_MAP_WRITES = tuple(
    (name, map_name, added, removed, _ENCODE[name])
    for name, (map_name, added, removed) in zip(MAPS, _PLACEHOLDERS, strict=True)
)


# DynamoDB refuses a transaction whose items add up to more than 4 MB (a ValidationException on every
# retry: the batch would fail whole, its genuine records with it). A state's item is counted at its bound:
# its key and numbers, its body (the JSON, no smaller compressed), and each entry of its maps at the most an
# entry of its kind can take (an instance id of 34 characters; a launch's time; an outcome's row with a node
# name of 128). Pruned states hold at most PENDING_LAUNCH_LIMIT launches and OUTCOME_LIMIT outcomes.
TRANSACTION_BYTES_MAX = 3_500_000
_ITEM_BASE_BYTES = 1_024
_LAUNCH_MAX_BYTES, _OUTCOME_MAX_BYTES = 64, 256


def _item_bound(state: GroupState, body: str) -> int:
    """The most a state's item can take in DynamoDB once written with `body` (its JSON)."""
    body_bytes = len(body) if body.isascii() else len(body.encode())
    return (
        _ITEM_BASE_BYTES
        + body_bytes
        + len(state.launches) * _LAUNCH_MAX_BYTES
        + len(state.outcomes) * _OUTCOME_MAX_BYTES
    )


def _transactions(states: list[GroupState], writes: list[tuple[Write, str, bool]]) -> Iterator[slice]:
    """The states (and their writes) of each transaction, in order: at most TRANSACTION_MAX, and items of
    at most TRANSACTION_BYTES_MAX in all (`_item_bound`)."""
    start, size = 0, 0
    for index, (state, (_, body, _)) in enumerate(zip(states, writes, strict=True)):
        bound = _item_bound(state, body)
        if index > start and (index - start == TRANSACTION_MAX or size + bound > TRANSACTION_BYTES_MAX):
            yield slice(start, index)
            start, size = index, 0
        size += bound
    if start < len(states):
        yield slice(start, len(states))


def _body(text: str) -> Item:
    return {"B": zlib.compress(text.encode(), STATE_LEVEL)}


class Runs(NamedTuple):
    """Runs as one read found them: failed runs, marks of runs that did not fail, and whether the read
    holds all there are of each (it did not stop at its bound before them)."""

    reports: list[NodeReport]
    marks: list[RunMark]
    reports_complete: bool
    marks_complete: bool


def _reports_of(items: Iterable[Item], group_id: str) -> Iterator[NodeReport]:
    """The stored failed runs of `items`. One no release of Lifeguard wrote as it is (edited by hand,
    damaged, or beyond a bound tightened since) is passed over and said: missing evidence, not a reason to
    hold up the group, or every group of its batch."""
    # Imported here: the functions that remediate or review changes write states and read no runs.
    from lifeguard.node_report import NodeReport

    for item in items:
        try:
            yield NodeReport.model_validate_json(item["report"]["S"])
        except _UNREADABLE as exc:
            logger.warning(
                "group %s: stored run %s passed over, it cannot be read: %s",
                clip(group_id),
                clip(str(item.get("sk", {}).get("S")), 200),
                _why(exc),
            )


def _report_item(report: NodeReport) -> Item:
    """A failed run is kept whole (`report`); a run that did not fail only as a mark that the boot ran it
    (its key and `outcome`): enough to tell a node whose scripts all succeeded from one that sent nothing.
    Each is keyed by what it holds too: any node can write a report of any run, and one written under a run
    already stored (the same run with another onError or outcome, or ended at another time, which dates
    its expiry) lands beside it, never over it, so the node's own report still says what it said, for as
    long as it said. The same report sent again is the same item."""
    run = f"{report.instance_id}#{report.boot:06d}#{report.stage}#{report.script}#{report.started_at}"
    pk = group_key(report.cluster_id, report.compute_node_group_id)
    ended = report.ended_or_started_at
    expires = {"expires_at": {"N": str(ended + REPORT_TTL_SECONDS)}}
    if not report.failed:
        digest = _digest(f"{report.outcome}#{ended}")
        return {**item_key(pk, f"{RAN}{run}#{digest}"), "outcome": {"S": report.outcome}, **expires}
    body = report.to_json()
    return {**item_key(pk, f"{REPORT}{run}#{_digest(body)}"), "report": {"S": body}, **expires}


def _digest(text: str) -> str:
    return hashlib.sha256(text.encode()).hexdigest()[:REPORT_DIGEST_CHARS]


def _said_partial(group_id: str) -> None:
    logger.warning(
        "group %s: its nodes reported more than %d runs in a fortnight (a node writing floods of them?); "
        "the runs of the instances a decision is about are read one by one",
        group_id,
        RUNS_READ_MAX,
    )


@frozen
class RunMark:
    """A script run that did not fail, as its mark tells it."""

    instance_id: str
    boot: int
    stage: str
    script: str
    started_at: int  # epoch seconds
    outcome: str


def _mark_of(item: Item) -> RunMark | None:
    # Five parts, then the digest of what the mark holds (none in a mark an older release wrote).
    parts = item["sk"]["S"][len(RAN) :].split("#")
    if len(parts) not in (5, 6) or not (parts[1].isdigit() and parts[4].isdigit()):
        return None
    instance, boot, stage, script, started = parts[:5]
    return RunMark(instance, int(boot), stage, script, int(started), item.get("outcome", {}).get("S", "?"))


class GroupStore:
    """The group state items and node-report items of the Lifeguard table.

    The states this store last wrote are kept in memory (a warm Lambda container's next batch skips the
    read): every write is conditional on the version, so a state another container changed meanwhile
    makes the write fail, and the caller redoes that group from a fresh read. The cache holds every group
    the account has, up to `CACHE_ENTRIES` (a unit is about 150 bytes in memory: 75 MB at most; a state
    weighs 50, plus one a launch or outcome it holds and one each 150 bytes its other fields take past
    the 50's 7,500, `GroupState.stored_footprint`: its configurations, which may take hundreds of KB
    each), least recently written first out.
    """

    CACHE_ENTRIES = 500_000
    UNIT_BYTES = 150
    # What each method needs the table's policy to allow (a test holds template.yaml's roles to it).
    PERMISSIONS: ClassVar[dict[str, tuple[str, ...]]] = {
        "load": ("dynamodb:GetItem",),
        "load_many": ("dynamodb:BatchGetItem",),
        "versions": ("dynamodb:BatchGetItem",),
        # A state the table holds is written as an update. IAM checks each item of a transaction as its
        # own PutItem or UpdateItem: it has no action TransactWriteItems.
        "save": ("dynamodb:PutItem", "dynamodb:UpdateItem"),
        "save_many": ("dynamodb:PutItem", "dynamodb:UpdateItem"),
        "put_reports": ("dynamodb:BatchWriteItem",),
        "read_runs": ("dynamodb:Query",),
        "read_launch_failures": ("dynamodb:Query",),
        "all_states": ("dynamodb:Scan",),
    }

    def __init__(self, client: DynamoDBClient, table: str) -> None:
        self._table = Table(client, table)
        self._written: OrderedDict[tuple[str, str], tuple[GroupState, int]] = OrderedDict()
        self._weight = 0

    @property
    def client(self) -> DynamoDBClient:
        """The DynamoDB client (other stores of the same table share it)."""
        return self._table.client

    @property
    def table(self) -> str:
        """The table's name."""
        return self._table.name

    @property
    def calls(self) -> int:
        """DynamoDB requests made so far."""
        return self._table.calls

    @property
    def cached(self) -> int:
        """How many groups' states are remembered."""
        return len(self._written)

    def _remember(self, state: GroupState) -> None:
        key = (state.cluster_id, state.group_id)
        weight = 50 + len(state.launches) + len(state.outcomes)
        beyond = state.stored_footprint // self.UNIT_BYTES - 50
        if beyond > 0:
            weight += beyond
        written = self._written
        held = written.pop(key, None)  # put back last: the most recently written, last out
        if held is not None:
            self._weight -= held[1]
        written[key] = (state, weight)
        self._weight += weight
        while self._weight > self.CACHE_ENTRIES and len(written) > 1:
            _, (_, dropped) = written.popitem(last=False)
            self._weight -= dropped

    def versions(self, keys: list[tuple[str, str]]) -> dict[tuple[str, str], int]:
        """The version the table holds of each group's state (groups without one left out), read
        consistently in one BatchGetItem per 100; the states' bodies are not decoded. An item without a
        version of a state's form is at version -1, which no state is read at: its group is read again,
        and found unreadable there."""
        wanted = {group_key(*key): key for key in keys}
        found = {}
        for item in self._table.get_many([item_key(pk, STATE) for pk in wanted]):
            version = item.get("version", {}).get("N")
            decimal = isinstance(version, str) and _decimal(version)
            found[wanted[item["pk"]["S"]]] = int(version) if decimal else -1
        return found

    def remembered(self, keys: Iterable[tuple[str, str]]) -> set[tuple[str, str]]:
        """Which of `keys` `load_many` would answer from memory (the states this store last wrote)."""
        return {key for key in keys if key in self._written}

    def forget(self, keys: Iterable[tuple[str, str]]) -> None:
        """Drop remembered states (after a failed write: they may hold changes that were not written)."""
        for key in keys:
            remembered = self._written.pop(key, None)
            if remembered is not None:
                self._weight -= remembered[1]

    def load(self, cluster_id: str, group_id: str) -> GroupState:
        """The group's state (a fresh one when there is none), read consistently; raises
        UnreadableStateError for an item no release of Lifeguard wrote (edited by hand, or damaged)."""
        item = self._table.get(item_key(group_key(cluster_id, group_id), STATE))
        if item is None:
            return GroupState(cluster_id=cluster_id, group_id=group_id)
        return _state_at(item, (cluster_id, group_id))

    def all_states(self, unreadable: list[str] | None = None) -> list[GroupState]:
        """Every group's state (a Scan: for the operator CLI, not for the handlers). An item no release of
        Lifeguard wrote is left out, and said in `unreadable` (its key and why), so one bad item hides no
        other group."""
        found = []
        for item in self._table.scan(STATE):
            try:
                found.append(_state_of(item))
            except _UNREADABLE as exc:
                if unreadable is not None:
                    unreadable.append(f"{clip(item.get('pk', {}).get('S'), 200)}: {_why(exc)}")
        return sorted(found, key=lambda state: (state.cluster_id, state.group_id))

    def load_many(
        self, keys: list[tuple[str, str]], unreadable: dict[tuple[str, str], str] | None = None
    ) -> dict[tuple[str, str], GroupState]:
        """The states of many groups: the ones this store last wrote from memory, the others in one
        BatchGetItem per 100 (consistent reads). A remembered state may be stale; its write will tell. An
        item that cannot be read (as `load` says) is left out and said in `unreadable` (why, by group), so
        one damaged item holds up no other group; without `unreadable`, it raises UnreadableStateError."""
        found: dict[tuple[str, str], GroupState] = {}
        wanted: dict[str, tuple[str, str]] = {}
        for key in keys:
            if key in self._written:
                found[key] = self._written[key][0]
            else:
                wanted[group_key(*key)] = key
                found[key] = GroupState(cluster_id=key[0], group_id=key[1])
        for item in self._table.get_many([item_key(pk, STATE) for pk in wanted]):
            key = wanted[item["pk"]["S"]]
            try:
                found[key] = _state_at(item, key)
            except UnreadableStateError as exc:
                if unreadable is None:
                    raise
                del found[key]
                unreadable[key] = str(exc)
        return found

    def save_many(
        self, states: list[GroupState], *, written: list[GroupState] | None = None
    ) -> list[GroupState]:
        """Write many states in transactions of at most 100 whose items stay within DynamoDB's 4 MB
        (`_transactions`), each on its version. Returns the states not
        written: those of a transaction in which some version had moved (the caller retries them).
        `written`, when given, gets the states written as each transaction goes through (what a failure
        of a later one leaves written)."""
        unwritten: list[GroupState] = []
        for state in states:
            state.prune()
        all_writes = [_versioned_write(state) for state in states]
        for part in _transactions(states, all_writes):
            chunk, writes = states[part], all_writes[part]
            try:
                self._table.write_together([write for write, _, _ in writes])
            except TransactionConflictError:
                self.forget((state.cluster_id, state.group_id) for state in chunk)
                unwritten.extend(chunk)
                continue
            except LifeguardError:
                self.forget((state.cluster_id, state.group_id) for state in chunk)
                raise
            for state, (_, text, apart) in zip(chunk, writes, strict=True):
                state.version += 1
                state.stored(text, checked_apart=apart)
                self._remember(state)
            if written is not None:
                written.extend(chunk)
        return unwritten

    def save(self, state: GroupState) -> None:
        """Write the state if nobody else did since it was loaded; raises VersionConflictError otherwise."""
        state.prune()
        expected = state.version
        write, text, apart = _versioned_write(state)
        try:
            self._table.write(write)
        except ConditionFailedError:
            self.forget([(state.cluster_id, state.group_id)])
            raise VersionConflictError(f"{state.group_id}: state changed since version {expected}") from None
        except LifeguardError:
            self.forget([(state.cluster_id, state.group_id)])
            raise
        state.version = expected + 1
        state.stored(text, checked_apart=apart)
        self._remember(state)

    def put_reports(self, reports: Iterable[NodeReport]) -> int:
        """Store script runs: a failed run whole, another as its mark (idempotent: the same run is the same
        item); returns how many items."""
        items = {}
        for report in reports:
            item = _report_item(report)
            items[(item["pk"]["S"], item["sk"]["S"])] = item
        self._table.put_many(list(items.values()))
        return len(items)

    def read_launch_failures(
        self,
        cluster_id: str,
        group_id: str,
        instance: str,
        scripts: Iterable[tuple[str, str]],
        started: tuple[int, int],
    ) -> list[NodeReport]:
        """The failed runs an instance reported of `scripts` ((stage, name)) in its launch boot (boot 1),
        started from `started[0]` to `started[1]` (epoch seconds): one Query per script on its own key
        range, so no number of runs of other scripts, boots or times hides them (a node may write any run
        under any instance). A range holds, besides runs of that time, only start times of fewer digits that
        sort among them (sort keys compare as text), at most a ninth of its seconds: `LAUNCH_RUNS_MAX`
        reads past them in a range of up to 7 hours (a launch boot's runs start until 6 hours after its
        outcome, `attribution.launch_boot`)."""
        pk = group_key(cluster_id, group_id)
        low, high = started
        found: list[NodeReport] = []
        for stage, script in sorted(scripts):
            run = f"{REPORT}{instance}#{1:06d}#{stage}#{script}#"
            # To `#~` after the last second: its keys go on with `#<digest>` (an older release's end there).
            items = list(self._table.query(pk, f"{run}{low}", upto=f"{run}{high}#~", most=LAUNCH_RUNS_MAX))
            if len(items) >= LAUNCH_RUNS_MAX:
                logger.warning("group %s: %s's runs of %r fill their read", group_id, instance, script)
            found.extend(_reports_of(items, group_id))
        return found

    def read_runs(
        self,
        cluster_id: str,
        group_id: str,
        instance: str | None = None,
        *,
        marks: bool = True,
        most: int | None = None,
    ) -> Runs:
        """A group's stored failed runs, and (`marks`) the marks of its runs that did not fail; of one
        `instance` only, when given. The group's are one Query (their sort keys are the only ones that begin
        with R: `lifeguard.store.table`) read from the end, so the failed runs (REPORT#) come before the
        marks (RAN#): a flood of runs that did not fail never pushes the evidence of the failed ones past
        the read's bound. A flood of failed runs can (any node may write them): a read that stops at its
        bound says so (`Runs.reports_complete`), and the instances a decision is about are then read one
        by one (`lifeguard.handlers.evidence`). `most`: the group's read's bound (RUNS_READ_MAX)."""
        pk = group_key(cluster_id, group_id)
        if instance is None:
            most = RUNS_READ_MAX if most is None else most
            items = list(self._table.query(pk, RUNS if marks else REPORT, most=most, descending=True))
            items.reverse()  # each kind in key order, as before
            whole = len(items) < most
            # Read from the end, every failed run comes before any mark: a mark read says they all were.
            reports_complete = whole or items[0]["sk"]["S"].startswith(RAN)
            marks_complete = whole and marks
            if not reports_complete:
                _said_partial(group_id)
        else:
            parts = [
                list(self._table.query(pk, f"{kind}{instance}#", most=INSTANCE_RUNS_MAX))
                for kind in ((REPORT, RAN) if marks else (REPORT,))
            ]
            items = [item for part in parts for item in part]
            reports_complete = len(parts[0]) < INSTANCE_RUNS_MAX
            marks_complete = marks and len(parts[-1]) < INSTANCE_RUNS_MAX
            if not reports_complete:
                logger.warning(
                    "group %s: its instance %s reported over %d failed runs",
                    group_id,
                    instance,
                    INSTANCE_RUNS_MAX,
                )
        found = Runs([], [], reports_complete, marks_complete)
        found.reports.extend(_reports_of((i for i in items if i["sk"]["S"].startswith(REPORT)), group_id))
        for item in items:
            if item["sk"]["S"].startswith(RAN) and (mark := _mark_of(item)) is not None:
                found.marks.append(mark)
        return found
