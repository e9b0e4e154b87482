"""The node report as the node writes it: one finished script run, one JSON object.

Its fields, their order and their JSON are those of `lifeguard.node_report.NodeReport`, the checked record
the Lambdas validate reports with. The node runs its own Python (3.9) with no more of the layer than the
executor needs, so this dataclass states the same schema with the standard library alone;
tests/unit/test_node_report_schema.py holds the two to each other.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field, fields
from typing import Literal

__all__ = ["ScriptRunReport"]


@dataclass(frozen=True)
class ScriptRunReport:
    """One script run on one node, as the shipper sends it (`lifeguard.node_report` reads it)."""

    kind: Literal["script_run"] = field(default="script_run", init=False)
    cluster_id: str
    compute_node_group_id: str
    instance_id: str
    node_id: str | None
    boot: int  # 1 for the first boot of the instance, 2 for its first reboot, …
    first_boot: bool
    stage: str
    script: str
    on_error: str  # TERMINATE | STOP_SEQUENCE | CONTINUE, as the PCS API spells it
    exit_code: int | None  # None when the script never ran (fetch failed, skipped)
    outcome: str  # succeeded | failed | skipped
    started_at: int  # epoch seconds
    ended_at: int | None  # epoch seconds
    log_tail: str  # the end of the run's output (the last LOG_TAIL_BYTES)
    script_sha256: str | None

    def to_json(self) -> str:
        """The report as one compact JSON line, its keys in field order."""
        return json.dumps({f.name: getattr(self, f.name) for f in fields(self)}, separators=(",", ":"))
