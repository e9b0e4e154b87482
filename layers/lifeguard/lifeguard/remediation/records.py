"""What remediation writes down per compute node group: the ledger of changes it made or set out to make
(cooldown, daily cap, escalation and undo read it), the decision taken on each detection (duplicates are
answered from it), and the audit trail (every decision, with the configuration before and after).

A change is written to the ledger as `pending` (with its clientToken) before PCS is asked to make it, and
marked `applied` once PCS took it, so a change whose confirmation was lost is recognised on the retry;
`abandoned` when it was never made, `unconfirmed` when no one can tell any more (below).
Where they are stored is `lifeguard.store.remediations`'s business.
"""

from __future__ import annotations

from dataclasses import field
from typing import Any, Literal, get_args

from lifeguard.lifecycle_rules import stopping_scripts
from lifeguard.schema import (
    Model,
    boolean,
    checked,
    integer,
    json_object,
    list_of,
    literal,
    model,
    number,
    optional,
    string,
)
from lifeguard.values import mutable

__all__ = ["DAY_SECONDS", "AppliedChange", "AuditEntry", "Decision", "Ledger"]

ChangeStatus = Literal["pending", "applied", "abandoned", "unconfirmed"]

# These records are Lifeguard's own documents, read back from its table: their checks hold each value to
# its type (a time may be stored as a whole number) and no further; what comes from outside was bounded
# before it was written down.
_TEXT = string()
_MAYBE_TEXT = optional(string())
_CONFIG = optional(json_object())


@checked(
    at=number(),
    episode_id=_TEXT,
    revision=integer(),
    action=_TEXT,
    config_before=_CONFIG,
    config_after=_CONFIG,
    fingerprint_before=_TEXT,
    fingerprint_after=_TEXT,
    modified_at_after=optional(integer()),
    modified_at_before=optional(integer()),
    undone_at=optional(number()),
    status=literal(*get_args(ChangeStatus)),
    client_token=_MAYBE_TEXT,
    mode=_MAYBE_TEXT,
    reason=_MAYBE_TEXT,
    untold=boolean(),
)
@mutable(slots=True, kw_only=True)
class AppliedChange(Model):
    """A configuration change Lifeguard made (or an undo of one). `pending` from just before PCS is asked
    until PCS took it (`applied`); `abandoned` when it will never be made (PCS refused it, or the group,
    read again, still held the configuration from before, untouched since); `unconfirmed` when the group,
    read again, held neither it nor the untouched configuration from before: PCS may have made it before
    someone changed the group. An unconfirmed change counts, as a made one does, for the ladder, the
    cooldown and the daily cap (a lost answer and a person's edit must not free Lifeguard to change the
    group again), but is no one's to undo: what the group holds is someone else's."""

    at: float
    episode_id: str
    revision: int
    action: str
    config_before: dict[str, Any] | None
    config_after: dict[str, Any] | None
    fingerprint_before: str
    fingerprint_after: str
    modified_at_after: int | None = None
    # The group's modifiedAt as read under the lock when the change was set out (None: an older
    # release's): a retry that finds the configuration from before, set again since, makes nothing.
    modified_at_before: int | None = None
    undone_at: float | None = None
    status: ChangeStatus = "applied"
    client_token: str | None = None
    mode: str | None = None
    reason: str | None = None
    # Found applied by a later decision (its own detection's event parked) and not told yet: that decision,
    # or its retry, tells it (RemediationApplied of its detection), then clears this.
    untold: bool = False

    @property
    def counts(self) -> bool:
        """True for a change that was, or may have been, made by remediation (undos and abandoned intents
        are not)."""
        return self.action != "undo" and self.status != "abandoned"


# The daily cap's day; the changes a ledger keeps at most (the times of those it lets go are kept a day).
DAY_SECONDS = 24 * 3600
CHANGES_KEPT = 50
_LET_GO_MAX = 1000  # a day of changes at the highest daily cap the stack takes (100), ten times over


@checked(changes=list_of(model(AppliedChange)), let_go=list_of(number()))
@mutable(slots=True, kw_only=True)
class Ledger(Model):
    """The changes Lifeguard made, or set out to make, to one group; and when the ones it let go to bound
    its item were made (those of the last day), which the cooldown and the daily cap still count."""

    changes: list[AppliedChange] = field(default_factory=list)
    let_go: list[float] = field(default_factory=list)

    def made_since(self, since: float) -> list[float]:
        """When the changes made (or pending) at or after `since` were made, oldest first (undos and
        abandoned intents excluded; the changes let go included)."""
        kept = [c.at for c in self.changes if c.at >= since and c.counts]
        return sorted([at for at in self.let_go if at >= since] + kept)

    def let_go_oldest(self) -> None:
        """Let go of the oldest change (the item is too big), keeping when it was made if it counts."""
        oldest = self.changes.pop(0)
        if oldest.counts:
            self.let_go.append(oldest.at)
        newest = max((c.at for c in self.changes), default=oldest.at)
        self.let_go = [at for at in self.let_go if at >= newest - DAY_SECONDS][-_LET_GO_MAX:]

    def of_episode(self, episode_id: str) -> list[AppliedChange]:
        """The changes made (or pending) for one episode, oldest first."""
        return [c for c in self.changes if c.episode_id == episode_id and c.counts]

    def intent(self, episode_id: str, revision: int) -> AppliedChange | None:
        """The change set out for one detection (episode, revision), pending or applied, if any."""
        return next(
            (
                c
                for c in reversed(self.changes)
                if (c.episode_id, c.revision) == (episode_id, revision) and c.counts
            ),
            None,
        )

    def undo_of(self, change: AppliedChange) -> AppliedChange | None:
        """The operator's undo set out for `change` (pending or made; not one let go), if any: one recorded
        after it. The ledger's order says so, not the times: an undo's is the operator's clock, which may be
        behind the Lambdas' (a change not in the ledger is compared by time)."""
        where = [i for i, c in enumerate(self.changes) if c == change]
        after = self.changes[where[-1] + 1 :] if where else self.changes
        return next(
            (
                c
                for c in reversed(after)
                if c.action == "undo"
                and c.status != "abandoned"
                and (c.episode_id, c.revision) == (change.episode_id, change.revision)
                and (bool(where) or c.at >= change.at)
            ),
            None,
        )

    def quarantined(self) -> set[tuple[str, str]]:
        """(stage, name) of every script a quarantine of Lifeguard's switched to STOP_SEQUENCE (and that
        was not undone): a configuration still holding one of them is Lifeguard's work, not the user's."""
        switched: set[tuple[str, str]] = set()
        for change in self.changes:
            if change.action == "quarantine" and change.counts and change.undone_at is None:
                switched |= stopping_scripts(change.config_after) - stopping_scripts(change.config_before)
        return switched

    def keep_recent(self, limit: int = CHANGES_KEPT) -> None:
        """Bound the item: the last `limit` changes are plenty for an undo (the cap counts the rest)."""
        while len(self.changes) > limit:
            self.let_go_oldest()


@checked(
    status=_TEXT,
    events=list_of(json_object()),
    published=boolean(),
    deliveries=integer(),
    held_until=optional(number()),
)
@mutable(slots=True, kw_only=True)
class Decision(Model):
    """The outcome of one detection (episode, revision): events published and how often it came; for a
    change the cooldown or the daily cap held back, until when (epoch seconds: the loop's first failure
    after that has it decided again, at the episode's next revision)."""

    status: str  # applied | skipped | failed
    events: list[dict[str, Any]] = field(default_factory=list)
    published: bool = False
    deliveries: int = 1
    held_until: float | None = None


@checked(
    at=number(),
    decision=_TEXT,
    episode_id=_MAYBE_TEXT,
    revision=optional(integer()),
    mode=_MAYBE_TEXT,
    action=_MAYBE_TEXT,
    dry_run=boolean(),
    reason=_MAYBE_TEXT,
    config_before=_CONFIG,
    config_after=_CONFIG,
    diff=list_of(json_object()),
    actor=_TEXT,
)
@mutable(slots=True, kw_only=True)
class AuditEntry(Model):
    """One line of a group's audit trail."""

    at: float
    decision: str  # applied | skipped | failed | undo | duplicate
    episode_id: str | None = None
    revision: int | None = None
    mode: str | None = None
    action: str | None = None
    dry_run: bool = False  # held back by mode notify or the stack's DryRun (not every change not made)
    reason: str | None = None
    config_before: dict[str, Any] | None = None
    config_after: dict[str, Any] | None = None
    diff: list[dict[str, Any]] = field(default_factory=list)
    actor: str = "lifeguard"
