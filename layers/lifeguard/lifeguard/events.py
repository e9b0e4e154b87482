"""Controller events: what the Lambdas put on EventBridge (source `lifeguard`) and every consumer reads.

Every `detail` carries all the keys of DESIGN.md, null or empty where they do not apply.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Literal

__all__ = ["DETAIL_KEYS", "DETAIL_TYPES", "SOURCE", "ControllerEvent", "DetailType", "make_detail"]

SOURCE = "lifeguard"
DetailType = Literal[
    "BootstrapLoopDetected", "RemediationApplied", "RemediationSkipped", "RemediationFailed", "LoopResolved"
]
DETAIL_TYPES: tuple[DetailType, ...] = (
    "BootstrapLoopDetected",
    "RemediationApplied",
    "RemediationSkipped",
    "RemediationFailed",
    "LoopResolved",
)
_LIST_KEYS = frozenset({"failures", "diff"})
DETAIL_KEYS: tuple[str, ...] = (
    "episode_id",
    "cluster_id",
    "compute_node_group_id",
    "kind",
    "failures",
    "suspect",
    "mode",
    "dry_run",
    "config_before",
    "config_after",
    "diff",
    "reason",
    "undo",
)


def make_detail(**fields: Any) -> dict[str, Any]:
    """A detail with every DESIGN.md key (null, [] for lists, false for dry_run where not given), plus any
    extra fields (such as `revision`)."""
    detail: dict[str, Any] = {key: ([] if key in _LIST_KEYS else None) for key in DETAIL_KEYS}
    detail["dry_run"] = False
    detail.update(fields)
    return detail


@dataclass(frozen=True)
class ControllerEvent:
    """One event: its detail-type and detail; `key` names it uniquely (episode, type, revision)."""

    detail_type: DetailType
    detail: Mapping[str, Any]
    key: str

    def to_entry(self, bus_name: str) -> dict[str, Any]:
        """The PutEvents entry."""
        return {
            "Source": SOURCE,
            "DetailType": self.detail_type,
            "Detail": json.dumps(self.detail, separators=(",", ":")),
            "EventBusName": bus_name,
        }

    def to_dict(self) -> dict[str, Any]:
        """As `lifeguard replay --json` and the outbox keep it."""
        return {"detail-type": self.detail_type, "detail": dict(self.detail), "key": self.key}

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> ControllerEvent:
        """Back from `to_dict`."""
        return cls(data["detail-type"], data["detail"], data["key"])
