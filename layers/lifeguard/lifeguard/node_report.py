"""The node report: what the sidecar ships off a node for each finished script run.

One JSON object per run, put into a CloudWatch Logs group under stream `<cluster-id>/<instance-id>`.
Like scaling-log records, a bad report comes back as a `NodeReportParseError` value, never an exception.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator

from lifeguard._records import describe_validation_error, load_json_object, reason_of
from lifeguard.bounds import EPOCH_S_MAX, ClusterId, GroupId, InstanceId, NodeName, ScriptName, clip
from lifeguard.lifecycle import OnError, StageName
from lifeguard.node.layout import LOG_TAIL_BYTES, output_tail

__all__ = ["LOG_TAIL_BYTES", "NodeReport", "NodeReportParseError", "RunOutcome", "parse_node_report"]

RunOutcome = Literal["succeeded", "failed", "skipped"]


class NodeReport(BaseModel):
    """One script run on one node; every field is bounded (`lifeguard.bounds`), so a stored report keeps
    within DynamoDB's key and item limits whatever a broken or hostile node sends."""

    # Strict: a number sent as text is a broken report, not one to guess at.
    # Built when first used: the scaling_events function reads reports only to attribute a loop.
    model_config = ConfigDict(frozen=True, extra="ignore", strict=True, defer_build=True)

    kind: Literal["script_run"] = "script_run"
    cluster_id: ClusterId
    compute_node_group_id: GroupId
    instance_id: InstanceId
    node_id: NodeName | None = None
    boot: int = Field(
        ge=1, le=1_000_000, description="1 for the first boot of the instance, 2 for its first reboot, …"
    )
    first_boot: bool
    stage: StageName
    script: ScriptName
    on_error: OnError
    exit_code: int | None = Field(
        default=None, ge=-(2**31), lt=2**31, description="None when the script never ran (fetch failed)"
    )
    outcome: RunOutcome
    started_at: int = Field(ge=0, lt=EPOCH_S_MAX, description="epoch seconds")
    ended_at: int | None = Field(default=None, ge=0, lt=EPOCH_S_MAX, description="epoch seconds")
    log_tail: str = Field(default="", description=f"the last {LOG_TAIL_BYTES} bytes of the run's output")
    script_sha256: str | None = Field(default=None, pattern=r"^[0-9a-f]{64}$")

    @field_validator("log_tail")
    @classmethod
    def _keep_tail(cls, value: str) -> str:
        # An over-long tail is trimmed, not refused: the report's verdict matters more than its log.
        return output_tail(value)

    @property
    def ended_or_started_at(self) -> int:
        """When the run ended (or started, when its end is unknown), in epoch seconds."""
        return self.ended_at if self.ended_at is not None else self.started_at

    @property
    def failed(self) -> bool:
        """True when the run failed (its onError then decided what happened to the node)."""
        return self.outcome == "failed"

    def to_json(self) -> str:
        """The report as one compact JSON line."""
        return self.model_dump_json()


@dataclass(frozen=True)
class NodeReportParseError:
    """A log event that is not a node report: what is wrong (`reason`, short, for counting; `message`, in
    full) and where."""

    message: str
    where: str | None = None
    reason: str = "not a node report"

    def __str__(self) -> str:
        prefix = f"{self.where}: " if self.where else ""
        return f"{prefix}{self.message}"


def parse_node_report(
    raw: str | bytes | Mapping[str, Any], *, where: str | None = None
) -> NodeReport | NodeReportParseError:
    """Parse one shipped node report."""
    data = load_json_object(raw)
    if isinstance(data, str):
        return NodeReportParseError(data, where, reason_of(data))
    if data.get("kind") != "script_run":
        return NodeReportParseError(f"not a node report (kind={clip(data.get('kind'), 40)!r})", where)
    try:
        return NodeReport.model_validate(data)
    except ValidationError as exc:
        reason = reason_of(exc)
        return NodeReportParseError(f"not a node report: {describe_validation_error(exc)}", where, reason)
