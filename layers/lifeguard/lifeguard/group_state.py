"""What Lifeguard knows about one compute node group: recent launches and bootstrap outcomes, the
configuration last read from PCS, the last proven-good configuration, the open episode and an outbox of
events to publish. How it is stored is `lifeguard.store.groups`'s business."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, PrivateAttr, field_serializer, field_validator

__all__ = [
    "OUTCOME_LIMIT",
    "BootOutcome",
    "ChangedBy",
    "Episode",
    "Failure",
    "GroupState",
    "KnownConfig",
    "ProvenGood",
    "Suspect",
]

# Bounds that keep a busy group's state item small (tens of KB, far below DynamoDB's 400 KB): the most
# recent outcomes (enough for any loop tail and for the intermittent rule's window on a busy group), and
# the launches still waiting for their outcome (an outcome takes its launch's time with it), trimmed when
# there are more than PENDING_LAUNCH_LIMIT to those of the last PENDING_LAUNCH_MS, then to the newest.
OUTCOME_LIMIT = 100
PENDING_LAUNCH_MS = 60 * 60 * 1000
PENDING_LAUNCH_LIMIT = 1000


class _Model(BaseModel):
    model_config = ConfigDict(extra="ignore")


class Launches(dict[str, int]):
    """A group's pending launches (instance -> launch time) that note which instances a batch touched since
    the table last held them (`touched`), so a write sends those alone. A change it cannot follow
    (`update`, `clear`, ...) makes it lose track (`touched` None): the next write compares them all."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.touched: set[str] | None = None

    def __setitem__(self, key: str, value: int) -> None:
        super().__setitem__(key, value)
        if self.touched is not None:
            self.touched.add(key)

    def __delitem__(self, key: str) -> None:
        super().__delitem__(key)
        if self.touched is not None:
            self.touched.add(key)

    def pop(self, key: str, *default: Any) -> Any:
        if self.touched is not None and key in self:
            self.touched.add(key)
        return super().pop(key, *default)

    def _lost(self) -> None:
        self.touched = None

    def update(self, *args: Any, **kwargs: Any) -> None:
        self._lost()
        super().update(*args, **kwargs)

    def clear(self) -> None:
        self._lost()
        super().clear()

    def setdefault(self, key: str, default: int = 0) -> int:
        self._lost()
        return super().setdefault(key, default)

    def popitem(self) -> tuple[str, int]:
        self._lost()
        return super().popitem()

    def __ior__(self, other: Any) -> Launches:  # type: ignore[override,misc]
        self._lost()
        return super().__ior__(other)


@dataclass(slots=True)
class BootOutcome:
    """How an instance's bootstrap ended: ACTIVE/BOOTSTRAP_SUCCESS or TERMINATED/BOOTSTRAP_FAILED.

    A plain dataclass, not a model: one is made for every outcome record, and they are stored as rows.
    """

    instance_id: str
    scheduler_node_id: str | None
    event_timestamp: int
    succeeded: bool
    launched_at: int | None = None


class Failure(_Model):
    """One failure of an episode's evidence, as events carry it."""

    instance_id: str
    scheduler_node_id: str | None = None
    event_timestamp: int


class Suspect(_Model):
    """The script that failed on the failing instances."""

    stage: str
    script: str
    on_error: str
    exit_code: int | None = None
    log_tail: str = ""
    instances: list[str] = Field(default_factory=list)


class Episode(_Model):
    """One loop of a group, from detection to the next bootstrap with no failed script. A quarantine that
    keeps failing nodes contains it (`contained_at`, the `kept` nodes) without ending it."""

    episode_id: str
    kind: str  # loop | intermittent | replacement
    opened_at: int  # event time (ms) of the failure that made the detection
    config_modified_at: int | None = None
    config_fingerprint: str | None = None
    failures: list[Failure] = Field(default_factory=list)
    suspect: Suspect | None = None
    revision: int = 1
    contained_at: int | None = None  # event time of the first kept node's BOOTSTRAP_SUCCESS
    kept: list[str] = Field(default_factory=list)  # instances kept with the script still failing
    resolved_at: int | None = None
    resolved_by: str | None = None  # the instance whose boot ended the episode
    signals: list[str] = Field(default_factory=list)  # what the detection rests on (DESIGN's `signals`)
    no_script_failed: bool = False  # the failing nodes reported runs, and none failed: not a script
    changed_by: dict[str, Any] | None = None  # the change the loop began after (DESIGN's `changed_by`)
    # The revision at which nodes replaced as unhealthy made this a `replacement` loop (its own kind, or
    # a drain/replace loop inside a contained episode), and the unhealthy terminations it rests on.
    replacement_revision: int | None = None
    unhealthy: list[Failure] = Field(default_factory=list)

    def add_signal(self, signal: str) -> bool:
        """Note that `signal` bears the episode out too; True when it is new."""
        if signal in self.signals:
            return False
        self.signals.append(signal)
        return True


class KnownConfig(_Model):
    """The group as PCS last described it."""

    modified_at: int
    fingerprint: str
    node_lifecycle_actions: dict[str, Any] | None = None
    arn: str | None = None
    status: str | None = None
    tags: dict[str, str] = Field(default_factory=dict)
    checked_at: int  # event time (ms) of the batch in which Lifeguard last confirmed it
    tags_checked_at: int = 0
    # False for a group learned from a listing: its modifiedAt is known, its actions (and fingerprint) not.
    actions_read: bool = True


class ProvenGood(_Model):
    """The last configuration a node bootstrapped with successfully."""

    fingerprint: str
    node_lifecycle_actions: dict[str, Any] | None = None
    modified_at: int
    proven_at: int
    instance_id: str
    evidence: str = ""  # what proved it: the node's reports, or PCS's success alone (no quarantine in it)


class GroupState(_Model):
    """Everything the controller keeps about one compute node group."""

    cluster_id: str
    group_id: str
    version: int = 0
    launches: dict[str, int] = Field(default_factory=dict)  # instances launched, outcome not seen yet
    outcomes: dict[str, BootOutcome] = Field(default_factory=dict)
    unhealthy: dict[str, int] = Field(default_factory=dict)  # instance -> TERMINATED/UNHEALTHY_NODE time
    config: KnownConfig | None = None
    proven_good: ProvenGood | None = None
    episode: Episode | None = None
    last_episode: Episode | None = None
    outbox: list[dict[str, Any]] = Field(default_factory=list)
    _oldest_outcome: int | None = PrivateAttr(default=None)
    # The launches as the table holds them, when it holds them on their own (None: it does not, yet).
    _stored_launches: dict[str, int] | None = PrivateAttr(default=None)

    @field_validator("launches", mode="after")
    @classmethod
    def _launches_followed(cls, value: dict[str, int]) -> dict[str, int]:
        return Launches(value)

    # Outcomes are most of the item and are rewritten with every batch: stored as rows, not objects.
    @field_serializer("outcomes")
    def _outcomes_as_rows(self, outcomes: dict[str, BootOutcome]) -> list[list[Any]]:
        return [
            [o.instance_id, o.scheduler_node_id, o.event_timestamp, int(o.succeeded), o.launched_at]
            for o in outcomes.values()
        ]

    @field_validator("outcomes", mode="before")
    @classmethod
    def _outcomes_from_rows(cls, value: Any) -> Any:
        if not isinstance(value, list):
            return value
        return {
            str(row[0]): BootOutcome(str(row[0]), row[1], int(row[2]), bool(row[3]), row[4]) for row in value
        }

    def oldest_outcome_at(self) -> int | None:
        """Event time of the oldest outcome kept (cached until `outcome_changed`)."""
        if self._oldest_outcome is None and self.outcomes:
            self._oldest_outcome = min(o.event_timestamp for o in self.outcomes.values())
        return self._oldest_outcome

    def outcome_changed(self) -> None:
        """Forget cached facts about the outcomes."""
        self._oldest_outcome = None

    def prune(self) -> None:
        """Keep the most recent outcomes, unhealthy terminations, and the launches still waiting."""
        if len(self.unhealthy) > OUTCOME_LIMIT:
            kept = sorted(self.unhealthy.items(), key=lambda item: (item[1], item[0]))[-OUTCOME_LIMIT:]
            self.unhealthy = dict(kept)
        if len(self.outcomes) > OUTCOME_LIMIT:
            recent = sorted(self.outcomes.values(), key=lambda o: (o.event_timestamp, o.instance_id))
            self.outcomes = {o.instance_id: o for o in recent[-OUTCOME_LIMIT:]}
            self.outcome_changed()
        if len(self.launches) <= PENDING_LAUNCH_LIMIT:
            return  # a busy group's launches are most of its state: a batch touches only what it changed
        outcomes = self.outcomes
        newest_outcome = max((o.event_timestamp for o in outcomes.values()), default=0)
        newest = max(newest_outcome, *self.launches.values())
        oldest_kept = newest - PENDING_LAUNCH_MS
        pending = {i: t for i, t in self.launches.items() if t >= oldest_kept and i not in outcomes}
        if len(pending) > PENDING_LAUNCH_LIMIT:
            newest_first = sorted(((t, i) for i, t in pending.items()), reverse=True)[:PENDING_LAUNCH_LIMIT]
            pending = {i: t for t, i in sorted(newest_first)}
        self.launches = pending

    def launches_stored(self) -> None:
        """Note that the table now holds these launches on their own (`launch_changes` counts from here)."""
        launches, stored = self.launches, self._stored_launches
        if isinstance(launches, Launches) and launches.touched is not None and stored is not None:
            for instance in launches.touched:
                if instance in launches:
                    stored[instance] = launches[instance]
                else:
                    stored.pop(instance, None)
        else:
            self._stored_launches = dict(launches)
            if not isinstance(launches, Launches):
                launches = self.launches = Launches(launches)
        launches.touched = set()

    def launch_changes(self) -> tuple[dict[str, int], list[str]] | None:
        """The launches added or moved, and the ones gone, since the table last held them; None when it
        does not hold them on their own (the next write must write them all). Only the instances touched
        since are looked at, unless the launches lost track of them."""
        stored, launches = self._stored_launches, self.launches
        if stored is None:
            return None
        touched = launches.touched if isinstance(launches, Launches) else None
        looked_at = launches if touched is None else touched
        changed = {i: launches[i] for i in looked_at if i in launches and stored.get(i) != launches[i]}
        gone = [i for i in (stored if touched is None else touched) if i not in launches and i in stored]
        return changed, gone

    def forget_after(self, latest_ms: int) -> bool:
        """Let go of launches and outcomes dated after `latest_ms`; True when there were any."""
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
        return bool(future or late)

    def launched_at(self, outcome: BootOutcome) -> int | None:
        """When the instance of an outcome was launched, if its LAUNCHED record was seen."""
        return (
            outcome.launched_at if outcome.launched_at is not None else self.launches.get(outcome.instance_id)
        )


# Who put a group's configuration in place: (cluster, group, the configuration) -> DESIGN's `changed_by`
# (`{"arn", "at", "source"}`), or None. The handlers are given one (CloudTrail's reviews, Lifeguard's ledger).
ChangedBy = Callable[[str, str, KnownConfig], "dict[str, Any] | None"]
