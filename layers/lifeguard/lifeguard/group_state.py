"""What Lifeguard knows about one compute node group: recent launches and bootstrap outcomes, the
configuration last read from PCS, the last proven-good configuration, the open episode and an outbox of
events to publish. How it is stored is `lifeguard.store.groups`'s business."""

from __future__ import annotations

import heapq
import json
import sys
import zlib
from collections.abc import Callable, Collection, Iterable
from dataclasses import dataclass, field
from dataclasses import fields as dataclass_fields
from itertools import compress
from operator import attrgetter
from typing import Any, Final, TypeVar

from lifeguard.schema import (
    BAD,
    Loc,
    Model,
    Problem,
    boolean,
    checked,
    dict_of,
    encode_json,
    integer,
    json_object,
    list_of,
    model,
    optional,
    string,
)
from lifeguard.values import mutable

__all__ = [
    "MAPS",
    "OUTCOME_LIMIT",
    "PENDING_LAUNCH_LIMIT",
    "BootOutcome",
    "ChangedBy",
    "Episode",
    "Failure",
    "GroupState",
    "HeldBack",
    "KnownConfig",
    "ProvenGood",
    "Suspect",
    "Tracked",
]

# Bounds that keep a busy group's state item small (tens of KB, far below DynamoDB's 400 KB): the most
# recent outcomes (enough for any loop tail and for the intermittent rule's window on a busy group), and
# the launches still waiting for their outcome (an outcome takes its launch's time with it), trimmed when
# there are more than PENDING_LAUNCH_LIMIT to those of the last PENDING_LAUNCH_MS, then to the newest.
OUTCOME_LIMIT = 100
# The proof a newer one replaced is kept only this small (real configurations take a few KB): a state's item
# holds the configuration (64 KiB at most) and its proof too, and the outbox, within DynamoDB's 400 KB.
PROVEN_BEFORE_MAX_STORED_BYTES = 16 * 1024
PENDING_LAUNCH_MS = 60 * 60 * 1000
PENDING_LAUNCH_LIMIT = 1000


_V = TypeVar("_V")

# The parts of a state kept as maps of their own in the table (instance -> entry), written as changes.
MAPS = ("launches", "outcomes")
# Per map, the entries added or changed and the keys gone since the table last held it (`map_changes`).
MapChanges = dict[str, tuple[dict[str, Any], list[str]]]
ABSENT: Any = object()  # no entry (a map's values are never None, but `get` would not say so)

# Whether `GroupState.unchanged_body` checks the claim it rests on, writing the state out to compare (the
# tests set it: a mutation that said `maps_only` wrongly fails them instead of losing a change).
CHECK_MAPS_ONLY = False


class Tracked(dict[str, _V]):
    """A map of a group's state (its pending launches, its outcomes) that notes each instance a batch
    touched since the table last held it, with what the table holds of it (`touched`: its value then, or
    ABSENT), so a write sends what changed alone, without a copy of the map to compare with. Every way of
    changing a dict is followed; a plain dict put in a map's place is not (`map_changes`: the next write
    puts the state whole)."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.touched: dict[str, Any] | None = None

    def _touch(self, keys: Iterable[str]) -> None:
        """Note what the table holds of `keys`, unless noted since it was stored."""
        touched = self.touched
        if touched is not None:
            for key in keys:
                if key not in touched:
                    touched[key] = dict.get(self, key, ABSENT)

    # The ways of nearly every change, `_touch` written out in each, and the dict's own method called
    # directly: a batch makes a few of them for every group it touches.
    def __setitem__(self, key: str, value: _V) -> None:
        touched = self.touched
        if touched is not None and key not in touched:
            touched[key] = dict.get(self, key, ABSENT)
        dict.__setitem__(self, key, value)

    def __delitem__(self, key: str) -> None:
        touched = self.touched
        if touched is not None and key not in touched:
            touched[key] = dict.get(self, key, ABSENT)
        dict.__delitem__(self, key)

    def pop(self, key: str, *default: Any) -> Any:
        touched = self.touched
        if touched is not None and key not in touched and key in self:
            touched[key] = dict.__getitem__(self, key)
        return dict.pop(self, key, *default)

    def update(self, *args: Any, **kwargs: Any) -> None:
        entries = dict(*args, **kwargs)
        self._touch(entries)
        super().update(entries)

    def clear(self) -> None:
        self._touch(list(self))
        super().clear()

    def setdefault(self, key: str, default: Any = None) -> Any:
        if key not in self:
            self._touch((key,))
        return super().setdefault(key, default)

    def popitem(self) -> tuple[str, _V]:
        if self:
            self._touch((next(reversed(self)),))  # the last in, which `popitem` takes
        return super().popitem()

    def __ior__(self, other: Any) -> Tracked[_V]:  # type: ignore[override,misc]
        self.update(other)
        return self

    def __reduce__(self) -> tuple[Any, ...]:
        """How a copy (`copy`, `deepcopy`, pickle) is made: as a map no table holds yet, which follows
        nothing (its state's next write puts it whole) and leaves the original's notes as they were (the
        default would share them, then note every entry as new)."""
        return (Tracked, (dict(self),))


# A dataclass's own methods, not `lifeguard.values`' shared ones: a write compares each outcome it looks at,
# and the compiled `==` takes half the time.
@dataclass(frozen=True, slots=True)
class BootOutcome:
    """How an instance's bootstrap ended: ACTIVE/BOOTSTRAP_SUCCESS or TERMINATED/BOOTSTRAP_FAILED.

    A plain dataclass, not a model: one is made for every outcome record, and they are stored as rows.
    Frozen: an outcome that learns its launch time is replaced in the map, so the map notes the change.
    """

    instance_id: str
    scheduler_node_id: str | None
    event_timestamp: int
    succeeded: bool
    launched_at: int | None = None


@checked(instance_id=string(), scheduler_node_id=optional(string()), event_timestamp=integer())
@mutable(slots=True, kw_only=True)
class Failure(Model):
    """One failure of an episode's evidence, as events carry it."""

    instance_id: str
    scheduler_node_id: str | None = None
    event_timestamp: int


@checked(
    stage=string(),
    script=string(),
    on_error=string(),
    exit_code=optional(integer()),
    log_tail=string(),
    instances=list_of(string()),
)
@mutable(slots=True, kw_only=True)
class Suspect(Model):
    """The script that failed on the failing instances."""

    stage: str
    script: str
    on_error: str
    exit_code: int | None = None
    log_tail: str = ""
    instances: list[str] = field(default_factory=list)


_FAILURES = list_of(model(Failure))


@checked(
    episode_id=string(),
    kind=string(),
    opened_at=integer(),
    config_modified_at=optional(integer()),
    config_fingerprint=optional(string()),
    failures=_FAILURES,
    suspect=optional(model(Suspect)),
    revision=integer(),
    contained_at=optional(integer()),
    kept=list_of(string()),
    resolved_at=optional(integer()),
    resolved_by=optional(string()),
    signals=list_of(string()),
    no_script_failed=boolean(),
    changed_by=optional(json_object()),
    replacement_revision=optional(integer()),
    unhealthy=_FAILURES,
    failed_after_active_on=optional(integer()),
    also_failing=list_of(string()),
    hold_read=optional(integer()),
    held_until=optional(integer()),
    resumed_in_hold=optional(integer()),
    resumed_revision=optional(integer()),
    told_in_hold=list_of(string()),
)
@mutable(slots=True, kw_only=True)
class Episode(Model):
    """One loop of a group, from detection to the next bootstrap with no failed script. A quarantine that
    keeps failing nodes contains it (`contained_at`, the `kept` nodes) without ending it."""

    episode_id: str
    kind: str  # loop | intermittent | replacement
    opened_at: int  # event time (ms) of the failure that made the detection
    config_modified_at: int | None = None
    config_fingerprint: str | None = None
    failures: list[Failure] = field(default_factory=list)
    suspect: Suspect | None = None
    revision: int = 1
    contained_at: int | None = None  # event time of the first kept node's BOOTSTRAP_SUCCESS
    kept: list[str] = field(default_factory=list)  # instances kept with the script still failing
    resolved_at: int | None = None
    resolved_by: str | None = None  # the instance whose boot ended the episode
    signals: list[str] = field(default_factory=list)  # what the detection rests on (the events' `signals`)
    no_script_failed: bool = False  # the failing nodes reported runs, and none failed: not a script
    changed_by: dict[str, Any] | None = None  # the change the loop began after (the events' `changed_by`)
    # The revision at which nodes replaced as unhealthy made this a `replacement` loop (its own kind, or
    # a drain/replace loop inside a contained episode), and the unhealthy terminations it rests on.
    replacement_revision: int | None = None
    unhealthy: list[Failure] = field(default_factory=list)
    # The configuration (its modifiedAt) on which a node of the loop failed after PCS logged it ACTIVE (a
    # nodeReady script under TERMINATE): a success on it ends nothing until its node is seen to stay up.
    failed_after_active_on: int | None = None
    # `stage/name` of the scripts besides the suspect whose failure ended a failing node's boot
    # (`attribution.also_failing`): a quarantine switches them with it.
    also_failing: list[str] = field(default_factory=list)
    # The revision whose remediation decision was read (`HeldBack`), and until when (event time, ms) that
    # decision held Lifeguard's change back (the cooldown, the daily cap): the loop's first failure after
    # that announces the episode again, at its next revision, to be decided again.
    hold_read: int | None = None
    held_until: int | None = None
    # The end of the hold (event time, ms) in which the contained loop's resumption was told, at revision
    # `resumed_revision`, naming the scripts `told_in_hold` (`stage/name`). While the episode is at that
    # revision (`in_told_hold`) and the hold lasts, a kept node up again is listed, not told
    # (`handlers.containment.contain`), and the loop resuming again is taken in untold unless its reports
    # name another script.
    resumed_in_hold: int | None = None
    resumed_revision: int | None = None
    told_in_hold: list[str] = field(default_factory=list)

    def in_told_hold(self) -> bool:
        """Whether the episode is at the revision that told its contained loop resuming in a hold
        (`resumed_in_hold`): the hold's turns after it are listed, not told."""
        return self.resumed_in_hold is not None and self.resumed_revision == self.revision

    def add_signal(self, signal: str) -> bool:
        """Note that `signal` bears the episode out too; True when it is new."""
        if signal in self.signals:
            return False
        self.signals.append(signal)
        return True


@checked(
    modified_at=integer(),
    fingerprint=string(),
    node_lifecycle_actions=optional(json_object()),
    arn=optional(string()),
    name=optional(string()),
    status=optional(string()),
    tags=dict_of(string(), string()),
    checked_at=integer(),
    tags_checked_at=integer(),
    actions_read=boolean(),
)
@mutable(slots=True, kw_only=True)
class KnownConfig(Model):
    """The group as PCS last described it."""

    modified_at: int
    fingerprint: str
    node_lifecycle_actions: dict[str, Any] | None = None
    arn: str | None = None
    # Its name, what people know it by (`bounds.group_name_of`; None until read, or not of PCS's form):
    # the events name the group by it beside its id.
    name: str | None = None
    status: str | None = None
    tags: dict[str, str] = field(default_factory=dict)
    checked_at: int  # event time (ms) of the batch in which Lifeguard last confirmed it
    tags_checked_at: int = 0
    # False for a group learned from a listing: its modifiedAt is known, its actions (and fingerprint) not.
    actions_read: bool = True

    def confirms(self, earlier: KnownConfig | None) -> bool:
        """Whether this describes the group as `earlier` did, but for when it was last confirmed."""
        return earlier is not None and _describing(self) == _describing(earlier)


# All a configuration says of its group but when it was last confirmed (`KnownConfig.confirms`).
_DESCRIBING: Final = tuple(
    known.name for known in dataclass_fields(KnownConfig) if known.name != "checked_at"
)
# Its values as one tuple, compared in one go (a proof compares a configuration for every success).
_describing: Final = attrgetter(*_DESCRIBING)


@checked(
    fingerprint=string(),
    node_lifecycle_actions=optional(json_object()),
    modified_at=integer(),
    proven_at=integer(),
    instance_id=string(),
    evidence=string(),
)
@mutable(slots=True, kw_only=True)
class ProvenGood(Model):
    """The last configuration a node bootstrapped with successfully."""

    fingerprint: str
    node_lifecycle_actions: dict[str, Any] | None = None
    modified_at: int
    proven_at: int
    instance_id: str
    evidence: str = ""  # what proved it: the node's reports, or PCS's success alone (no quarantine in it)


# An outcome row as the state stores it: [instance_id, scheduler_node_id, event_timestamp, 0|1, launched_at].
_ROW: Final = (string(), optional(string()), integer(), integer(ge=0, le=1), optional(integer()))


def _outcomes(value: Any, loc: Loc, problems: list[Problem]) -> Any:
    """The outcomes from their rows (as stored), or the map itself (instance -> `BootOutcome`) as it is."""
    if isinstance(value, dict) and all(isinstance(o, BootOutcome) for o in value.values()):
        return value
    if not isinstance(value, list | tuple):
        problems.append(Problem(loc, "list_type", "Input should be a valid list"))
        return BAD
    found = len(problems)
    kept: dict[str, BootOutcome] = {}
    for index, row in enumerate(value):
        at = (*loc, index)
        if not isinstance(row, list | tuple):
            problems.append(Problem(at, "list_type", "Input should be a valid list"))
        elif len(row) != len(_ROW):
            kind, most = ("too_short", "at least") if len(row) < len(_ROW) else ("too_long", "at most")
            message = f"List should have {most} {len(_ROW)} items after validation, not {len(row)}"
            problems.append(Problem(at, kind, message))
        else:
            instance, node, event_timestamp, succeeded, launched_at = [
                check(entry, (*at, n), problems)
                for n, (check, entry) in enumerate(zip(_ROW, row, strict=True))
            ]
            if len(problems) == found:
                kept[instance] = BootOutcome(instance, node, event_timestamp, bool(succeeded), launched_at)
    return kept if len(problems) == found else BAD


def _rows(outcomes: dict[str, BootOutcome]) -> list[list[Any]]:
    # Outcomes are most of the item and are rewritten with every batch: stored as rows, not objects.
    return [
        [o.instance_id, o.scheduler_node_id, o.event_timestamp, int(o.succeeded), o.launched_at]
        for o in outcomes.values()
    ]


_OPTIONAL_EPISODE = optional(model(Episode))


@checked(
    cluster_id=string(),
    group_id=string(),
    version=integer(),
    launches=dict_of(string(), integer()),
    outcomes=_outcomes,
    unhealthy=dict_of(string(), integer()),
    config=optional(model(KnownConfig)),
    proven_good=optional(model(ProvenGood)),
    proven_before=optional(model(ProvenGood)),
    episode=_OPTIONAL_EPISODE,
    last_episode=_OPTIONAL_EPISODE,
    outbox=list_of(json_object()),
    detection_due=boolean(),
)
@mutable(slots=True, kw_only=True)
class GroupState(Model):
    """Everything the controller keeps about one compute node group."""

    cluster_id: str
    group_id: str
    version: int = 0
    launches: dict[str, int] = field(default_factory=dict)  # instances launched, outcome not seen yet
    outcomes: dict[str, BootOutcome] = field(default_factory=dict)  # stored as rows (`_rows`)
    unhealthy: dict[str, int] = field(default_factory=dict)  # instance -> TERMINATED/UNHEALTHY_NODE time
    config: KnownConfig | None = None
    proven_good: ProvenGood | None = None
    # The proof of another configuration that `proven_good` replaced, kept (when small) so that a proof
    # taken back leaves the one before it standing: the first node of a broken change proves it at its
    # ACTIVE, before its nodeReady script fails, and the configuration a revert needs was lost with it.
    proven_before: ProvenGood | None = None
    episode: Episode | None = None
    last_episode: Episode | None = None
    outbox: list[dict[str, Any]] = field(default_factory=list)
    # A detection a batch could not make (PCS refused the group's read): the next batch with any record of
    # the group makes it (`ScalingEventsHandler._mutation`).
    detection_due: bool = False
    # (event time, instance) of the outcomes, oldest on top, for the map it was made from (`_oldest`).
    _by_age: tuple[object, list[tuple[int, str]]] | None = field(
        default=None, init=False, repr=False, compare=False
    )
    # No launch or outcome is dated after this (set by `forget_after`, in memory only).
    _bounded_at: int | None = field(default=None, init=False, repr=False, compare=False)
    # The rest, as JSON, as the table holds it.
    _stored_body: str | None = field(default=None, init=False, repr=False, compare=False)
    # What that takes in memory (`stored_footprint`), worked out when it changes: a write of the maps alone
    # stores the same text again.
    _footprint: int = field(default=0, init=False, repr=False, compare=False)
    # Set by `changed_maps_only`: the rest is as the table holds it (`unchanged_body`).
    _maps_only: bool = field(default=False, init=False, repr=False, compare=False)
    # A change since the table last held the state went beyond the maps (`mutated`), written or not.
    _beyond_maps: bool = field(default=False, init=False, repr=False, compare=False)
    # The configuration's `checked_at` as the table holds it, and whether it holds it on its own, apart
    # from the rest (`checked_moved`).
    _stored_checked_at: int | None = field(default=None, init=False, repr=False, compare=False)
    _checked_apart: bool = field(default=False, init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        # The maps are `Tracked`, copies of those the state is made with (as validating them made them
        # before): each follows what a batch touches once `maps_stored` starts it.
        self.launches = Tracked(self.launches)
        self.outcomes = Tracked(self.outcomes)

    def model_dump(
        self, *, mode: str = "python", exclude: Collection[str] = (), exclude_none: bool = False
    ) -> dict[str, Any]:
        """As every record's, with the outcomes as rows (as the state stores them)."""
        dumped = Model.model_dump(self, mode=mode, exclude={*exclude, "outcomes"}, exclude_none=exclude_none)
        if "outcomes" in exclude:
            return dumped
        ordered = {}
        for declared in self.__schema__.fields:
            if declared.name == "outcomes":
                ordered[declared.key] = _rows(self.outcomes)
            elif declared.key in dumped:
                ordered[declared.key] = dumped[declared.key]
        return ordered

    def model_dump_json(self, *, exclude: Collection[str] = ()) -> str:
        """As every record's (the same text), made by the encoder in one pass: a state's JSON is made for
        every group a batch touches, to tell whether the rest of it changed."""
        fields = self.json_fields(exclude)
        if "outcomes" in fields:
            fields["outcomes"] = _rows(self.outcomes)
        return encode_json(fields)

    def oldest_outcome_at(self) -> int | None:
        """Event time of the oldest outcome kept."""
        oldest = self._oldest()
        return None if oldest is None else oldest[0]

    def outcome_changed(self) -> None:
        """Forget what is known of the outcomes' order (they changed in a way `outcome_added` did not
        say)."""
        self._by_age = None

    def outcome_added(self, outcome: BootOutcome) -> None:
        """Keep the outcomes' order known after `outcome` was set (new, earlier than the one it replaced,
        or a failure in place of a success: the entry of the time it had is passed over when it comes to
        the top)."""
        known = self._by_age
        if known is not None and known[0] is self.outcomes:
            heapq.heappush(known[1], (outcome.event_timestamp, outcome.instance_id))

    def _oldest(self) -> tuple[int, str] | None:
        """(event time, instance) of the oldest outcome, ties by instance; the order is made once from the
        map (again when the map was replaced, or holds many passed-over entries) and kept as outcomes come,
        so a busy group's batch finds its oldest without looking through its hundred outcomes."""
        outcomes = self.outcomes
        known = self._by_age
        if known is None or known[0] is not outcomes or len(known[1]) > 2 * len(outcomes) + 64:
            heap = [(o.event_timestamp, o.instance_id) for o in outcomes.values()]
            heapq.heapify(heap)
            known = self._by_age = (outcomes, heap)
        heap = known[1]
        while heap:
            at, instance = heap[0]
            outcome = outcomes.get(instance)
            if outcome is not None and outcome.event_timestamp == at:
                return heap[0]
            heapq.heappop(heap)  # gone, or now known at an earlier time
        return None

    def prune(self) -> None:
        """Keep the most recent outcomes, unhealthy terminations, and the launches still waiting."""
        if len(self.unhealthy) > OUTCOME_LIMIT:
            kept = sorted(self.unhealthy.items(), key=lambda item: (item[1], item[0]))[-OUTCOME_LIMIT:]
            self.unhealthy = dict(kept)
            self._maps_only = False
            self._beyond_maps = True
        outcomes = self.outcomes
        while len(outcomes) > OUTCOME_LIMIT:
            # The oldest go, one by one: the map notes each, so the write sends only those.
            oldest = self._oldest()
            if oldest is None:
                break
            del outcomes[oldest[1]]
        launches = self.launches
        if len(launches) <= PENDING_LAUNCH_LIMIT:
            return  # a busy group's launches are most of its state: a batch touches only what it changed
        # Over the bound, a burst of launches stays there, a few more each batch: what goes is found with
        # the times sorted, not (time, instance) pairs made and sorted for every launch. One by one, as the
        # outcomes: the map notes each.
        times = sorted(launches.values())
        newest_outcome = max((o.event_timestamp for o in outcomes.values()), default=0)
        oldest_kept = max(newest_outcome, times[-1]) - PENDING_LAUNCH_MS
        # An instance with an outcome waits no more (the fold keeps none such: an older release's may have).
        gone = [instance for instance in outcomes if instance in launches]
        if times[0] < oldest_kept:
            gone.extend(i for i, t in launches.items() if t < oldest_kept and i not in outcomes)
        if gone:
            for instance in gone:
                del launches[instance]
            times = sorted(launches.values())
        excess = len(launches) - PENDING_LAUNCH_LIMIT
        if excess > 0:  # the oldest go, ties by instance: of those no later than the last time that goes
            last = times[excess - 1]
            going = sorted((launches[i], i) for i in compress(launches, map(last.__ge__, launches.values())))
            for _, instance in going[:excess]:
                del launches[instance]

    def stored(self, body: str, *, checked_apart: bool = False) -> None:
        """Note that the table now holds this state: its maps (`maps_stored`) and the rest as the JSON
        `body` (read, or written), but for the configuration's `checked_at` when it holds that on its own
        (`checked_apart`: the body's is older)."""
        self.maps_stored()
        if body is not self._stored_body:
            self._stored_body = body
            self._footprint = sys.getsizeof(body) + len(body) * 3 // 2
        self._stored_checked_at = self.config.checked_at if self.config is not None else None
        self._checked_apart = checked_apart and self.config is not None
        self._maps_only = self._beyond_maps = False

    @property
    def checked_apart(self) -> bool:
        """Whether the table holds the configuration's `checked_at` on its own, newer than its body's."""
        return self._checked_apart

    def checked_moved(self) -> int | None:
        """The configuration's `checked_at` when it moved since the table last held the state, else None:
        a read of PCS that found the group as it was moves it alone, and a write may send it on its own."""
        config = self.config
        if config is None or config.checked_at == self._stored_checked_at:
            return None
        return config.checked_at

    @property
    def stored_footprint(self) -> int:
        """About the bytes the rest of the state (its maps aside: its configurations among it) takes in
        memory, as last read or written (0 before either): its JSON kept to compare with, at its width (1,
        2 or 4 bytes a character: one character past Latin-1 widens all of it), and what that JSON holds,
        about 1.5 bytes a character (measured: 2.44, 3.44 and 5.45 bytes a character in all)."""
        return self._footprint

    def body_changed(self, body: str) -> bool:
        """Whether the rest of the state, as JSON, differs from what the table holds."""
        return body != self._stored_body

    def mutated(self, maps_only: bool) -> None:
        """Note a change, and whether it touched the maps (`MAPS`) alone, and perhaps the configuration's
        `checked_at` (whether or not it is written)."""
        self._beyond_maps |= not maps_only

    def changed_maps_only(self, only: bool) -> None:
        """Say, right before a write, whether the change since the state was stored touched the maps
        (`MAPS`) alone, and perhaps the configuration's `checked_at` (`checked_moved`): then the rest is
        still as the table holds it, and the write takes it from there (`unchanged_body`) instead of writing
        it out to compare. Whoever says so must know: nothing else is looked at but what `mutated` noted.
        The tests check every such claim (`CHECK_MAPS_ONLY`)."""
        self._maps_only = only and not self._beyond_maps and self._stored_body is not None

    def unchanged_body(self) -> str | None:
        """The rest of the state as the table holds it, when `changed_maps_only` said it is unchanged since
        it was stored (its configuration's `checked_at` aside: `checked_moved`); else None (it must be
        written out to tell). Once: the claim holds for one write."""
        if not self._maps_only:
            return None
        self._maps_only = False
        if CHECK_MAPS_ONLY:
            self._check_unchanged()
        return self._stored_body

    def _check_unchanged(self) -> None:
        """Fail unless the rest of the state, with the `checked_at` its stored body holds, is that body."""
        config, stored = self.config, self._stored_body or ""
        moved = config.checked_at if config is not None else None
        held = (json.loads(stored).get("config") or {}).get("checked_at")
        try:
            if config is not None and held is not None:
                config.checked_at = held
            body = self.model_dump_json(exclude={"version", *MAPS})
        finally:
            if config is not None and moved is not None:
                config.checked_at = moved
        if body != stored:
            raise AssertionError(f"{self.group_id}: the state changed beyond its maps: {body}")

    def maps_stored(self) -> None:
        """Note that the table now holds the maps (`MAPS`) on their own, as they are: `map_changes` counts
        from here."""
        for name in MAPS:
            entries: dict[str, Any] = getattr(self, name)
            if type(entries) is not Tracked:
                entries = Tracked(entries)
                setattr(self, name, entries)
            touched = entries.touched
            if touched is None:
                entries.touched = {}
            elif touched:
                touched.clear()

    def touched_maps(self) -> list[tuple[dict[str, Any], dict[str, Any]]] | None:
        """Per map (`MAPS`), the map and its notes of the keys touched since the table last held it (each
        with what the table held of it, or ABSENT); None when it does not hold them on their own, or a map
        is a plain dict put in its place (the next write puts them whole)."""
        found = []
        for name in MAPS:
            entries: dict[str, Any] = getattr(self, name)
            touched = entries.touched if type(entries) is Tracked else None
            if touched is None:  # not held on their own yet (`maps_stored` starts it), or not followed
                return None
            found.append((entries, touched))
        return found

    def map_changes(self) -> MapChanges | None:
        """Per map (`MAPS`), the entries added or changed and the keys gone since the table last held it;
        None when `touched_maps` says the next write puts them whole. Only the keys touched since are looked
        at, each against what the table held (as the write does: `lifeguard.store.groups`)."""
        touched = self.touched_maps()
        if touched is None:
            return None
        changes = {}
        for name, (entries, notes) in zip(MAPS, touched, strict=True):
            changed: dict[str, Any] = {}
            gone: list[str] = []
            # A batch touches a few keys: each is looked at once, in the order it was touched. An entry
            # new since is changed without comparing (a comparison of records runs Python).
            for k, held in notes.items():
                value = entries.get(k, ABSENT)
                if value is ABSENT:
                    if held is not ABSENT:
                        gone.append(k)
                elif held is ABSENT or (held is not value and held != value):
                    changed[k] = value
            changes[name] = (changed, gone)
        return changes

    def prove(self, proof: ProvenGood) -> None:
        """Take `proof` as the group's proven-good configuration. The proof it replaces, of another
        configuration, is kept as `proven_before` when a revert could put it back (its actions kept, at most
        PROVEN_BEFORE_MAX_STORED_BYTES compressed: the item holds the group's configuration and proof too)."""
        known = self.proven_good
        if known is not None and known.fingerprint != proof.fingerprint:
            actions = known.node_lifecycle_actions
            small = (
                actions is not None
                and len(zlib.compress(json.dumps(actions, separators=(",", ":")).encode(), 1))
                <= PROVEN_BEFORE_MAX_STORED_BYTES
            )
            self.proven_before = known if small else None
        self.proven_good = proof

    def forget_after(self, latest_ms: int) -> bool:
        """Let go of launches, outcomes and unhealthy terminations dated after `latest_ms` (the group's newest
        event time, which its waits are judged at, is of them); True when there were any. A state this
        process already held to a bound no later than `latest_ms` is not looked through again: what it took
        in since was held to its batch's bound, no later than this one."""
        bounded = self._bounded_at
        self._bounded_at = latest_ms
        if bounded is not None and bounded <= latest_ms:
            return False
        future = [i for i, o in self.outcomes.items() if o.event_timestamp > latest_ms]
        for instance in future:
            launched_at = self.outcomes.pop(instance).launched_at
            if launched_at is not None:
                self.launches[instance] = launched_at  # waiting again, for an outcome that can be genuine
        if future:
            self.outcome_changed()
        late = [i for i, t in self.launches.items() if t > latest_ms]
        for instance in late:
            del self.launches[instance]
        ahead = [i for i, t in self.unhealthy.items() if t > latest_ms]
        for instance in ahead:
            del self.unhealthy[instance]
        return bool(future or late or ahead)

    def launched_at(self, outcome: BootOutcome) -> int | None:
        """When the instance of an outcome was launched, if its LAUNCHED record was seen."""
        return (
            outcome.launched_at if outcome.launched_at is not None else self.launches.get(outcome.instance_id)
        )


# Who put a group's configuration in place: (cluster, group, the configuration) -> the events' `changed_by`
# (`{"arn", "at", "source"}`), or None. The handlers are given one (CloudTrail's reviews, Lifeguard's ledger).
ChangedBy = Callable[[str, str, KnownConfig], "dict[str, Any] | None"]
# The remediation's decision on an episode's revision: (cluster, group, episode id, revision) -> whether it
# is decided (a decision that failed is not: its retry decides), and until when (epoch ms) it held the change
# back, if the cooldown or the daily cap did. The scaling_events handler is given one (the decisions' items).
HeldBack = Callable[[str, str, str, int], "tuple[bool, int | None]"]
