"""A BootstrapLoopDetected event as remediation reads it: validated and bounded by the event contract
(`lifeguard.event_contract.clean_detail`), with every field it needs to match an open episode."""

from __future__ import annotations

from dataclasses import field
from typing import Any

from lifeguard.event_contract import clean_detail
from lifeguard.schema import Model, checked, integer, json_object, list_of, optional, string
from lifeguard.values import mutable

__all__ = ["LoopDetection"]

# What a detection must carry to be matched with an open episode (Lifeguard's own always do).
_REQUIRED = ("episode_id", "cluster_id", "compute_node_group_id", "config_fingerprint", "config_modified_at")


# The contract's bounds were applied by `clean_detail`; these checks hold each value to its type.
@checked(
    episode_id=string(),
    cluster_id=string(),
    compute_node_group_id=string(),
    compute_node_group_name=optional(string()),
    kind=optional(string()),
    failures=list_of(json_object()),
    suspect=optional(json_object()),
    revision=integer(),
    config_fingerprint=string(),
    config_modified_at=integer(),
)
@mutable(slots=True, kw_only=True)
class LoopDetection(Model):
    """The part of a BootstrapLoopDetected detail that remediation reads, as `clean_detail` validated it."""

    episode_id: str
    cluster_id: str
    compute_node_group_id: str
    # As Lifeguard's state names the group (`remediator._as_known`), never as the event does.
    compute_node_group_name: str | None = None
    kind: str | None = None
    failures: list[dict[str, Any]] = field(default_factory=list)
    suspect: dict[str, Any] | None = None
    revision: int = 1
    config_fingerprint: str
    config_modified_at: int

    @classmethod
    def from_detail(cls, detail: object) -> LoopDetection | tuple[dict[str, Any], list[str]]:
        """The detection in `detail`, or (what of it is valid, every problem) when it is not one."""
        cleaned, problems = clean_detail(detail)
        invalid = {problem.split(":", 1)[0] for problem in problems}
        problems += [
            f"{key}: required" for key in _REQUIRED if cleaned.get(key) is None and key not in invalid
        ]
        if problems:
            return cleaned, problems
        return cls.model_validate({key: value for key, value in cleaned.items() if value is not None})

    @property
    def suspect_script(self) -> tuple[str, str] | None:
        """(stage, script) of the suspect, when known."""
        if not self.suspect or not self.suspect.get("stage") or not self.suspect.get("script"):
            return None
        return str(self.suspect["stage"]), str(self.suspect["script"])
