"""`lifeguard demo`: the closed loop on the article's recorded events, scenario by scenario, each replayed
through all four handlers against a fresh local AWS, then one table of what happened."""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from lifeguard.lifecycle import NodeLifecycleActions, diff_configs
from lifeguard_cli.replay import ReplayResult, replay

__all__ = ["SCENARIOS", "Scenario", "ScenarioResult", "run_demo"]

EVENTS = Path(__file__).resolve().parents[2] / "events"


@dataclass(frozen=True)
class Scenario:
    """One replay of the demo."""

    name: str
    story: str
    mode: str
    streams: tuple[str, ...]
    config: str = "article-terminate"


SCENARIOS = (
    Scenario(
        "article loop, quarantine",
        "The article's TERMINATE loop with node reports: fail-terminate is switched to STOP_SEQUENCE.",
        "quarantine",
        ("article-terminate-loop-with-reports",),
    ),
    Scenario(
        "bad change, revert",
        "A node boots fine, then a bad script is pushed: the proven-good configuration is put back.",
        "revert",
        ("bad-change-then-loop",),
        "article-reverted",
    ),
    Scenario(
        "quarantine fails, escalation",
        "The quarantine keeps the loop going (another script fails): detected again, escalated to revert.",
        "quarantine",
        ("quarantine-then-escalation",),
        "article-reverted",
    ),
    Scenario(
        "article loop, notify",
        "The same loop in mode notify: nothing changes, the notifications say what quarantine would do.",
        "notify",
        ("article-terminate-loop-with-reports",),
    ),
)


@dataclass(frozen=True)
class ScenarioResult:
    """What one scenario ended with."""

    scenario: Scenario
    result: ReplayResult
    changes: tuple[str, ...]

    def to_dict(self) -> dict[str, Any]:
        """As `--json` prints it."""
        return {
            "scenario": self.scenario.name,
            "mode": self.scenario.mode,
            "events": [event["detail-type"] for event in self.result.events],
            "notifications": {
                channel: sum(1 for n in self.result.notifications if n["channel"] == channel)
                for channel in ("sns", "slack")
            },
            "changes": list(self.changes),
        }


def _config(name: str) -> dict[str, Any]:
    loaded: dict[str, Any] = json.loads((EVENTS / "configs" / f"{name}.json").read_text())
    return loaded


def _lifeguards_changes(result: ReplayResult) -> tuple[str, ...]:
    """Each change Lifeguard applied (or would have, in a dry run), in words."""
    said = []
    for event in result.events:
        detail = event["detail"]
        if not event["detail-type"].startswith("Remediation") or not detail.get("config_after"):
            continue
        before = (
            NodeLifecycleActions.from_api(detail["config_before"]) if detail.get("config_before") else None
        )
        after = NodeLifecycleActions.from_api(detail["config_after"])
        would = " (dry run, not applied)" if detail.get("dry_run") else ""
        said += [
            f"{detail.get('action')}{would}: {change.describe()}" for change in diff_configs(before, after)
        ]
    return tuple(said)


def run_demo(on_scenario: Callable[[Scenario, ScenarioResult], None] | None = None) -> list[ScenarioResult]:
    """Replay every scenario; `on_scenario` sees each as soon as it is done (progress)."""
    results = []
    for scenario in SCENARIOS:
        start = _config(scenario.config)
        paths = [EVENTS / "streams" / f"{stream}.jsonl" for stream in scenario.streams]
        result = replay(paths, config=start, mode=scenario.mode)
        done = ScenarioResult(scenario, result, _lifeguards_changes(result))
        results.append(done)
        if on_scenario is not None:
            on_scenario(scenario, done)
    return results
