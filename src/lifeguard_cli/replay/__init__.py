"""`lifeguard replay`: the real Lambda handlers, in-process, against a fresh local AWS, fed recorded events.

Inputs are what AWS gives: scaling-log records and node reports as JSON lines (with `lifeguard_replay`
control lines), CloudWatch Logs subscription events as `sam local invoke -e` takes them, the output of
`aws logs filter-log-events` / `get-log-events`, EventBridge events and CloudTrail records (`inputs`).
The handlers are built by their composition roots on the stream's clock (`run`); what they publish is
routed by template.yaml's event rules (`bus`); the outcome (`result`) reads as a timeline (`render`).
"""

from __future__ import annotations

from lifeguard_cli.replay.errors import ReplayError
from lifeguard_cli.replay.render import render_timeline
from lifeguard_cli.replay.result import ReplayResult, TimelineEntry
from lifeguard_cli.replay.run import replay

__all__ = ["ReplayError", "ReplayResult", "TimelineEntry", "render_timeline", "replay"]
