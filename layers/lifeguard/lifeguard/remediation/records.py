"""What remediation writes down per compute node group: the ledger of changes it made or set out to make
(cooldown, daily cap, escalation and undo read it), the decision taken on each detection (duplicates are
answered from it), and the audit trail (every decision, with the configuration before and after).

A change is written to the ledger as `pending` (with its clientToken) before PCS is asked to make it, and
marked `applied` once PCS took it, so a change whose confirmation was lost is recognised on the retry.
Where they are stored is `lifeguard.store.remediations`'s business.
"""

from __future__ import annotations

from dataclasses import dataclass, field
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

__all__ = ["AppliedChange", "AuditEntry", "Decision", "Ledger"]

ChangeStatus = Literal["pending", "applied", "abandoned"]

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
    undone_at=optional(number()),
    status=literal(*get_args(ChangeStatus)),
    client_token=_MAYBE_TEXT,
    mode=_MAYBE_TEXT,
    reason=_MAYBE_TEXT,
)
@dataclass(slots=True, kw_only=True)
class AppliedChange(Model):
    """A configuration change Lifeguard made (or an undo of one). `pending` from just before PCS is asked
    until PCS took it (`applied`); `abandoned` when someone else changed the group before a pending change
    could be confirmed."""

    at: float
    episode_id: str
    revision: int
    action: str
    config_before: dict[str, Any] | None
    config_after: dict[str, Any] | None
    fingerprint_before: str
    fingerprint_after: str
    modified_at_after: int | None = None
    undone_at: float | None = None
    status: ChangeStatus = "applied"
    client_token: str | None = None
    mode: str | None = None
    reason: str | None = None

    @property
    def counts(self) -> bool:
        """True for a change that was, or may have been, made by remediation (undos and abandoned intents
        are not)."""
        return self.action != "undo" and self.status != "abandoned"


@checked(changes=list_of(model(AppliedChange)))
@dataclass(slots=True, kw_only=True)
class Ledger(Model):
    """The changes Lifeguard made, or set out to make, to one group."""

    changes: list[AppliedChange] = field(default_factory=list)

    def applied_since(self, since: float) -> list[AppliedChange]:
        """Changes made (or pending) at or after `since` (undos excluded)."""
        return [c for c in self.changes if c.at >= since and c.counts]

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

    def quarantined(self) -> set[tuple[str, str]]:
        """(stage, name) of every script a quarantine of Lifeguard's switched to STOP_SEQUENCE (and that
        was not undone): a configuration still holding one of them is Lifeguard's work, not the user's."""
        switched: set[tuple[str, str]] = set()
        for change in self.changes:
            if change.action == "quarantine" and change.counts and change.undone_at is None:
                switched |= stopping_scripts(change.config_after) - stopping_scripts(change.config_before)
        return switched

    def keep_recent(self, limit: int = 50) -> None:
        """Bound the item: the last `limit` changes are plenty for a day's cap and an undo."""
        self.changes = self.changes[-limit:]


@checked(status=_TEXT, events=list_of(json_object()), published=boolean(), deliveries=integer())
@dataclass(slots=True, kw_only=True)
class Decision(Model):
    """The outcome of one detection (episode, revision): events published and how often it came."""

    status: str  # applied | skipped | failed
    events: list[dict[str, Any]] = field(default_factory=list)
    published: bool = False
    deliveries: int = 1


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
@dataclass(slots=True, kw_only=True)
class AuditEntry(Model):
    """One line of a group's audit trail."""

    at: float
    decision: str  # applied | skipped | failed | undo | duplicate
    episode_id: str | None = None
    revision: int | None = None
    mode: str | None = None
    action: str | None = None
    dry_run: bool = False
    reason: str | None = None
    config_before: dict[str, Any] | None = None
    config_after: dict[str, Any] | None = None
    diff: list[dict[str, Any]] = field(default_factory=list)
    actor: str = "lifeguard"
