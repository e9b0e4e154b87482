"""What a replay produced: the controller events, the timeline, what the channels received."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

__all__ = ["ReplayResult", "TimelineEntry"]


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
    # Records the function ignores: of clusters the stack does not watch (LIFEGUARD_CLUSTER_IDS), or of
    # another of a cluster's PCS logs; how many for each reason.
    ignored_records: int = 0
    ignored_reasons: dict[str, int] = field(default_factory=dict)
    notifications: list[dict[str, Any]] = field(default_factory=list)
    groups: list[dict[str, Any]] = field(default_factory=list)

    def ignore(self, count: int, reason: str) -> None:
        """`count` records ignored, for `reason`."""
        self.ignored_records += count
        self.ignored_reasons[reason] = self.ignored_reasons.get(reason, 0) + count

    def to_json(self) -> dict[str, Any]:
        """The `--json` document."""
        return {
            "events": self.events,
            "records": self.records,
            "skipped_records": self.skipped_records,
            "ignored_records": self.ignored_records,
            "notifications": self.notifications,
            "groups": self.groups,
        }
