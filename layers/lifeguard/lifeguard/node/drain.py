"""`lifeguard-node drain`: the nodeReady step a quarantine adds. When a lifecycle script failed with
STOP_SEQUENCE during this boot, the node is half-configured: drain it in Slurm, with a reason naming the
script, so it is kept for debugging but takes no jobs. A node whose scripts all ran is left in service.

Python 3.9 compatible (the node bundle runs it on the node's own Python).
"""

from __future__ import annotations

import json
import os
import socket
import subprocess
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path

from lifeguard.node.executor import FAILURE_MESSAGES
from lifeguard.node.layout import NodeLayout

__all__ = ["DrainDecision", "booted_at", "drain", "stopped_scripts"]

SLURM_REASON_MAX_CHARS = 255
_STOPPED = FAILURE_MESSAGES["STOP_SEQUENCE"]


@dataclass(frozen=True)
class DrainDecision:
    """What `drain` found and did."""

    stopped: tuple[str, ...]  # "<stage>/<script>" of each STOP_SEQUENCE failure this boot
    drained: bool
    reason: str
    error: str | None = None


def booted_at(proc_stat: Path = Path("/proc/stat")) -> float:
    """This boot's start (epoch seconds) from the kernel's `btime`; 0 when it cannot be read."""
    try:
        for line in proc_stat.read_text().splitlines():
            if line.startswith("btime "):
                return float(line.split()[1])
    except (OSError, ValueError, IndexError):
        pass
    return 0.0


def _epoch(timestamp: object) -> float | None:
    if not isinstance(timestamp, str):
        return None
    try:
        return datetime.fromisoformat(timestamp.replace("Z", "+00:00")).timestamp()
    except ValueError:
        return None


def stopped_scripts(layout: NodeLayout, since: float) -> list[str]:
    """`<stage>/<script>` of every STOP_SEQUENCE failure that executor.log records at or after `since`."""
    try:
        lines = layout.executor_log.read_text(encoding="utf-8", errors="replace").splitlines()
    except OSError:
        return []
    found: list[str] = []
    for line in lines:
        try:
            record = json.loads(line)
        except ValueError:
            continue
        if not isinstance(record, dict) or record.get("message") != _STOPPED:
            continue
        at = _epoch(record.get("timestamp"))
        if at is not None and at < since:
            continue
        where = f"{record.get('stage', '?')}/{record.get('script', '?')}"
        if where not in found:
            found.append(where)
    return found


def drain(
    layout: NodeLayout,
    reason: str,
    *,
    node_id: str | None = None,
    since: float | None = None,
    scontrol: str = "scontrol",
) -> DrainDecision:
    """Drain this node in Slurm if a script stopped its sequence this boot."""
    stopped = tuple(stopped_scripts(layout, booted_at() if since is None else since))
    if not stopped:
        return DrainDecision((), False, "no lifecycle script stopped its sequence this boot")
    node = node_id or os.environ.get("PCS_NODE_ID") or socket.gethostname().split(".")[0]
    text = f"{reason} ({', '.join(stopped)})"[:SLURM_REASON_MAX_CHARS]
    command = [scontrol, "update", f"NodeName={node}", "State=DRAIN", f"Reason={text}"]
    try:
        done = subprocess.run(command, capture_output=True, text=True, timeout=60, check=False)
    except (OSError, subprocess.TimeoutExpired) as exc:
        return DrainDecision(stopped, False, text, f"{scontrol} could not run: {exc}")
    if done.returncode != 0:
        detail = (done.stderr or done.stdout).strip().splitlines()[-1:] or [f"exit {done.returncode}"]
        return DrainDecision(stopped, False, text, f"{scontrol} failed: {detail[0]}")
    return DrainDecision(stopped, True, text)
