"""A BootstrapLoopDetected event as remediation reads it: validated and bounded by the event contract
(`lifeguard.event_contract.clean_detail`), with every field it needs to match an open episode."""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, ConfigDict, Field

from lifeguard.event_contract import clean_detail

__all__ = ["LoopDetection"]

# What a detection must carry to be matched with an open episode (Lifeguard's own always do).
_REQUIRED = ("episode_id", "cluster_id", "compute_node_group_id", "config_fingerprint", "config_modified_at")


class LoopDetection(BaseModel):
    """The part of a BootstrapLoopDetected detail that remediation reads, as `clean_detail` validated it."""

    model_config = ConfigDict(extra="ignore")

    episode_id: str
    cluster_id: str
    compute_node_group_id: str
    kind: str | None = None
    failures: list[dict[str, Any]] = Field(default_factory=list)
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
