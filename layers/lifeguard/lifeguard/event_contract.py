"""Controller events: what the Lambdas put on EventBridge (source `lifeguard`) and every consumer reads.

Every `detail` carries all the keys of DESIGN.md, null or empty where they do not apply.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass
from functools import cache
from typing import TYPE_CHECKING, Annotated, Any, Literal, get_args

if TYPE_CHECKING:
    from lifeguard.detection import DetectionSettings
    from lifeguard.group_state import Episode, GroupState

__all__ = [
    "DETAIL_KEYS",
    "DETAIL_TYPES",
    "ENTRY_MAX_BYTES",
    "SIGNALS",
    "SOURCE",
    "ControllerEvent",
    "DetailType",
    "change_sentence",
    "clean_detail",
    "console_url",
    "deployed_in",
    "entry_size",
    "episode_event",
    "episode_signals",
    "make_detail",
    "undo_command",
]

SOURCE = "lifeguard"
DetailType = Literal[
    "BootstrapLoopDetected",
    "RemediationApplied",
    "RemediationSkipped",
    "RemediationFailed",
    "LoopContained",
    "LoopResolved",
    "ConfigChangeReviewed",
]
DETAIL_TYPES: tuple[DetailType, ...] = get_args(DetailType)
# What a detection rests on (DESIGN's `signals`).
Signal = Literal["scaling_log", "node_reports"]
SIGNALS: tuple[Signal, ...] = get_args(Signal)
_LIST_KEYS = frozenset({"failures", "diff", "signals", "kept", "risks"})
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
    "signals",
    "changed_by",
    "kept",
    "risks",
)


# PutEvents: an entry, and a whole request, under 256 KB (Source, DetailType, Detail and resources).
ENTRY_MAX_BYTES = 256 * 1024 - 1024
_TRIMMED = "(trimmed to fit EventBridge; `lifeguard history` shows it)"
_TRIM_ORDER = ("log_tail", "config_before", "config_after", "failures", "diff")


def entry_size(entry: Mapping[str, Any]) -> int:
    """A PutEvents entry's size as EventBridge counts it."""
    return sum(len(str(entry.get(key, "")).encode()) for key in ("Source", "DetailType", "Detail"))


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
        """The PutEvents entry, within EventBridge's 256 KB an entry (`entry_size`): an event too big
        for it loses its log tail, then its configurations, then most of its evidence, each replaced by a
        note (the audit trail in the table keeps the configurations)."""
        entry = {
            "Source": SOURCE,
            "DetailType": self.detail_type,
            "Detail": json.dumps(self.detail, separators=(",", ":")),
            "EventBusName": bus_name,
        }
        detail = dict(self.detail)
        for step in _TRIM_ORDER:
            if entry_size(entry) <= ENTRY_MAX_BYTES:
                break
            if step == "log_tail" and isinstance(detail.get("suspect"), Mapping):
                detail["suspect"] = {**detail["suspect"], "log_tail": _TRIMMED}
            elif step == "failures":
                detail["failures"] = list(detail.get("failures") or [])[-10:]
            elif detail.get(step) not in (None, []):
                detail[step] = _TRIMMED if step.startswith("config") else []
            entry["Detail"] = json.dumps(detail, separators=(",", ":"))
        return entry

    def to_dict(self) -> dict[str, Any]:
        """As `lifeguard replay --json` and the outbox keep it."""
        return {"detail-type": self.detail_type, "detail": dict(self.detail), "key": self.key}

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> ControllerEvent:
        """Back from `to_dict`."""
        return cls(data["detail-type"], data["detail"], data["key"])


_MODEL_KEYS = frozenset({"failures", "suspect", "diff", "changed_by", "kept", "risks"})


@cache
def _detail_fields() -> Mapping[str, Any]:
    """A validator per detail key: DESIGN's contract, bounded (built on first use, not at import)."""
    from pydantic import BaseModel, ConfigDict, Field, StringConstraints, TypeAdapter, field_validator

    from lifeguard.bounds import (
        EPOCH_MS_MAX,
        REVISION_MAX,
        ClusterId,
        EpisodeId,
        Fingerprint,
        GroupId,
        InstanceId,
        NodeName,
        ScriptName,
        ShortText,
    )
    from lifeguard.lifecycle import OnError, StageName
    from lifeguard.node.layout import output_tail

    word = Annotated[str, StringConstraints(max_length=64)]

    class _Strict(BaseModel):
        model_config = ConfigDict(extra="ignore", strict=True)

    class FailureDetail(_Strict):
        instance_id: InstanceId
        scheduler_node_id: NodeName | None = None
        event_timestamp: int = Field(ge=0, lt=EPOCH_MS_MAX)

    class SuspectDetail(_Strict):
        stage: StageName
        script: ScriptName
        on_error: OnError
        exit_code: int | None = Field(default=None, ge=-(2**31), lt=2**31)
        log_tail: str = ""
        instances: list[InstanceId] = Field(default_factory=list, max_length=100)

        @field_validator("log_tail")
        @classmethod
        def _tail(cls, value: str) -> str:
            return output_tail(value)

    class ChangedBy(_Strict):
        arn: ShortText | None = None
        at: int | None = Field(default=None, ge=0, lt=EPOCH_MS_MAX)
        source: Literal["cloudtrail", "lifeguard", "unknown"] = "unknown"

    class KeptNode(_Strict):
        instance_id: InstanceId
        drained: bool = False

    class RiskDetail(_Strict):
        code: word
        path: Annotated[str, StringConstraints(max_length=200)]
        message: ShortText
        severity: Literal["warning", "error", "info"] = "warning"

    class DiffDetail(_Strict):
        path: Annotated[str, StringConstraints(max_length=200)]
        old: Any = None
        new: Any = None

    strict = ConfigDict(strict=True)
    fields: dict[str, Any] = {
        "episode_id": EpisodeId | None,
        "cluster_id": ClusterId | None,
        "compute_node_group_id": GroupId | None,
        "kind": Literal["loop", "intermittent", "replacement"] | None,
        "failures": Annotated[list[FailureDetail], Field(max_length=100)],
        "suspect": SuspectDetail | None,
        "mode": Literal["quarantine", "revert", "notify", "off"] | None,
        "dry_run": bool,
        "config_before": dict[str, Any] | None,
        "config_after": dict[str, Any] | None,
        "diff": Annotated[list[DiffDetail], Field(max_length=1000)],
        "reason": ShortText | None,
        "undo": ShortText | None,
        "signals": Annotated[list[Signal], Field(max_length=len(SIGNALS))],
        "changed_by": ChangedBy | None,
        "kept": Annotated[list[KeptNode], Field(max_length=100)],
        "risks": Annotated[list[RiskDetail], Field(max_length=100)],
        "revision": Annotated[int, Field(ge=1, le=REVISION_MAX)] | None,
        "action": word | None,
        "config_fingerprint": Fingerprint | None,
        "config_modified_at": Annotated[int, Field(ge=0, lt=EPOCH_MS_MAX)] | None,
    }
    return {
        key: TypeAdapter(kind, config=None if key in _MODEL_KEYS else strict) for key, kind in fields.items()
    }


def clean_detail(detail: object) -> tuple[dict[str, Any], list[str]]:
    """A controller event's detail held to DESIGN's contract, key by key: the valid values (every DESIGN key
    present, null or empty where missing or invalid; extra known keys such as `revision` when valid;
    unknown keys dropped), and one line per value that was not valid (`revision: Input should be a valid
    integer`)."""
    from pydantic import ValidationError

    from lifeguard._records import describe_validation_error

    cleaned = make_detail()
    if not isinstance(detail, Mapping):
        return cleaned, [f"detail: expected a JSON object, got {type(detail).__name__}"]
    problems: list[str] = []
    for key, adapter in _detail_fields().items():
        if key not in detail:
            continue
        try:
            value = adapter.validate_python(detail[key])
        except ValidationError as exc:
            problems.append(f"{key}: {describe_validation_error(exc)}")
            continue
        cleaned[key] = adapter.dump_python(value, mode="json")
    return cleaned, problems


def undo_command(cluster_id: str, group_id: str) -> str:
    """The command that puts back the configuration from before Lifeguard's last change, to be pasted as
    it is: in the stack (LIFEGUARD_STACK_NAME, which template.yaml sets) with its stack and region."""
    command = f"lifeguard undo {group_id} --cluster {cluster_id}"
    stack, region = deployed_in()
    if stack:
        command += f" --stack-name {stack}" + (f" --region {region}" if region else "")
    return command


def deployed_in() -> tuple[str | None, str | None]:
    """The stack and region this Lambda runs in (LIFEGUARD_STACK_NAME, AWS_REGION), each None when unset
    or not of its form (they go into commands and links)."""
    import os
    import re

    stack = os.environ.get("LIFEGUARD_STACK_NAME", "")
    region = os.environ.get("AWS_REGION", "")
    return (
        stack if re.fullmatch(r"[A-Za-z][A-Za-z0-9-]{0,127}", stack) else None,
        region if re.fullmatch(r"[a-z]{2}(-[a-z]+)+-\d{1,2}", region) else None,
    )


def console_url(cluster_id: str, region: str | None) -> str | None:
    """The cluster's page in the AWS PCS console (None without a region or with an id not of PCS's form)."""
    import re

    if not region or not re.fullmatch(r"pcs_[a-z0-9]{10}", cluster_id):
        return None
    return f"https://{region}.console.aws.amazon.com/pcs/home?region={region}#/clusters/{cluster_id}"


def change_sentence(changed_by: Mapping[str, Any] | None) -> str | None:
    """The change a loop began after, in words (None when there is none known)."""
    from lifeguard.bounds import clip, utc

    if not changed_by:
        return None
    at = changed_by.get("at")
    when = f" at {utc(at)}" if isinstance(at, int) else ""
    if changed_by.get("source") == "lifeguard":
        return f"the loop began after Lifeguard's own change{when}"
    if changed_by.get("arn"):
        return f"the loop began after the change by {clip(changed_by['arn'], 200)}{when}"
    return f"the loop began after the configuration changed{when} (by whom is not known)"


def episode_signals(episode: Episode) -> list[str]:
    """What an episode's detection rests on: the scaling log's failures and the node reports (that named the
    failing script, or showed that none failed), in DESIGN's order."""
    signals = set(episode.signals) or {"scaling_log"}
    if episode.suspect is not None or episode.no_script_failed:
        signals.add("node_reports")
    return [signal for signal in SIGNALS if signal in signals]


def episode_event(
    detail_type: str, state: GroupState, episode: Episode, settings: DetectionSettings, **extra: Any
) -> ControllerEvent:
    """An event of an episode, at its current revision (`extra` adds keys or overrides the episode's)."""
    fields: dict[str, Any] = {
        "episode_id": episode.episode_id,
        "cluster_id": state.cluster_id,
        "compute_node_group_id": state.group_id,
        "kind": episode.kind,
        "failures": [failure.model_dump() for failure in episode.failures],
        "suspect": episode.suspect.model_dump() if episode.suspect else None,
        "mode": settings.mode,
        "config_before": state.config.node_lifecycle_actions if state.config else None,
        "revision": episode.revision,
        "config_fingerprint": episode.config_fingerprint,
        "config_modified_at": episode.config_modified_at,
        "signals": episode_signals(episode),
        "changed_by": episode.changed_by,
    }
    if episode.replacement_revision == episode.revision:
        fields.update(kind="replacement", failures=[failure.model_dump() for failure in episode.unhealthy])
    detail = make_detail(**{**fields, **extra})
    key = f"{episode.episode_id}:{detail_type}:{episode.revision}"
    return ControllerEvent(detail_type, detail, key)  # type: ignore[arg-type]
