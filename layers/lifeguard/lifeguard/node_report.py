"""The node report: what the sidecar ships off a node for each finished script run.

One JSON object per run, put into a CloudWatch Logs group under stream `<cluster-id>/<instance-id>`.
Like scaling-log records, a bad report comes back as a `NodeReportParseError` value, never an exception.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Literal, get_args

from lifeguard._records import describe_validation_error, load_json_object, reason_of
from lifeguard.bounds import (
    EPOCH_S_MAX,
    INSTANCE_ID,
    NODE_NAME,
    PCS_ID,
    SCRIPT_NAME,
    clip,
)
from lifeguard.lifecycle import OnError, StageName
from lifeguard.node.layout import LOG_TAIL_BYTES, output_tail
from lifeguard.schema import Invalid, Model, boolean, checked, converted, integer, literal, optional, string
from lifeguard.values import frozen

__all__ = ["LOG_TAIL_BYTES", "NodeReport", "NodeReportParseError", "RunOutcome", "parse_node_report"]

RunOutcome = Literal["succeeded", "failed", "skipped"]


@checked(
    kind=literal("script_run"),
    cluster_id=PCS_ID,
    compute_node_group_id=PCS_ID,
    instance_id=INSTANCE_ID,
    node_id=optional(NODE_NAME),
    boot=integer(ge=1, le=1_000_000),
    first_boot=boolean(),
    stage=literal(*get_args(StageName)),
    script=SCRIPT_NAME,
    on_error=literal(*get_args(OnError)),
    exit_code=optional(integer(ge=-(2**31), lt=2**31)),
    outcome=literal(*get_args(RunOutcome)),
    started_at=integer(ge=0, lt=EPOCH_S_MAX),
    ended_at=optional(integer(ge=0, lt=EPOCH_S_MAX)),
    # An over-long tail is trimmed, not refused: the report's verdict matters more than its log.
    log_tail=converted(string(), output_tail),
    script_sha256=optional(string(pattern=r"^[0-9a-f]{64}$")),
)
@frozen(slots=True, kw_only=True)
class NodeReport(Model):
    """One script run on one node; every field is bounded (`lifeguard.bounds`), so a stored report keeps
    within DynamoDB's key and item limits whatever a broken or hostile node sends. Strict, as every check
    is: a number sent as text is a broken report, not one to guess at."""

    kind: Literal["script_run"] = "script_run"
    cluster_id: str
    compute_node_group_id: str
    instance_id: str
    node_id: str | None = None
    boot: int  # 1 for the first boot of the instance, 2 for its first reboot, …
    first_boot: bool
    stage: StageName
    script: str
    on_error: OnError
    exit_code: int | None = None  # None when the script never ran (fetch failed)
    outcome: RunOutcome
    started_at: int  # epoch seconds
    ended_at: int | None = None  # epoch seconds
    log_tail: str = ""  # the last LOG_TAIL_BYTES bytes of the run's output
    script_sha256: str | None = None

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


@frozen
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
    except Invalid as exc:
        reason = reason_of(exc)
        return NodeReportParseError(f"not a node report: {describe_validation_error(exc)}", where, reason)
