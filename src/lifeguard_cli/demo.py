"""`lifeguard demo`: the twin of a PCS cluster (`lifeguard simulate`) on each one-group built-in scenario,
with Lifeguard and with PCS alone, then one table of them all; with `--recorded`, the article's recorded
events instead, scenario by scenario, each replayed through all four handlers against a fresh local AWS."""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from lifeguard.lifecycle import NodeLifecycleActions, diff_configs
from lifeguard_cli.replay import ReplayResult, replay
from lifeguard_cli.resources import resource

__all__ = [
    "DEMO_MAX_NODES",
    "SCENARIOS",
    "Scenario",
    "ScenarioResult",
    "demo_scenarios",
    "demo_table",
    "run_demo",
    "run_simulated_demo",
]

EVENTS = resource("events")


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


# The demo's scenarios: the built-in ones of one group of at most this many nodes (the 50-node wave runs in
# the tests and the bench).
DEMO_MAX_NODES = 10


def demo_scenarios() -> list[Any]:
    """The one-group built-in scenarios, the article's first."""
    from lifeguard_cli.simulate import built_in_scenarios, load_scenario

    found = [load_scenario(path) for path in built_in_scenarios()]
    small = [s for s in found if len(s.groups) == 1 and s.groups[0].min <= DEMO_MAX_NODES]
    return sorted(small, key=lambda s: (not s.name.startswith("article"), s.path.name if s.path else ""))


def run_simulated_demo(
    scenarios: list[Any],
    on_scenario: Callable[[int, dict[str, Any]], None] | None = None,
    *,
    on_start: Callable[[int], None] | None = None,
) -> list[dict[str, Any]]:
    """Each scenario with Lifeguard (mode quarantine; a group's tag may say otherwise) and with PCS alone,
    in one local AWS; `on_start(number)` is told as each begins (0: the local AWS starting) and
    `on_scenario(number, document)` sees each as soon as it is done (progress)."""
    from lifeguard_cli.simulate import Simulator, span_minutes

    documents = []
    if on_start is not None:
        on_start(0)
    with Simulator(sum(span_minutes(s, "pcs") for s in scenarios)) as simulator:
        for number, scenario in enumerate(scenarios, start=1):
            if on_start is not None:
                on_start(number)
            document = simulator.run(scenario, mode="quarantine", seed=1, baseline="pcs")
            documents.append(document)
            if on_scenario is not None:
                on_scenario(number, document)
    return documents


def demo_table(documents: list[dict[str, Any]]) -> Any:
    """One row per scenario: what Lifeguard changed, and each measure as Lifeguard/PCS alone (`_pair`), shown
    as each scenario's own table shows it (`measure_shown`: a group that never failed recovers from `no
    failure`, not `never`)."""
    from lifeguard_cli.simulate.twin import measure_shown
    from lifeguard_cli.tables import table as make_table

    table = make_table(
        "scenario",
        "Lifeguard changed",
        *(label for _, label in _DEMO_MEASURES),
        title="Lifeguard/PCS alone, per scenario (minutes on the twin's clock)",
    )
    for document in documents:
        ((name, group),) = document["groups"].items()
        alone = document["baseline"]["groups"][name]
        mine = [c for c in document["changes"] if c["by"] == "lifeguard"]
        changed = ", ".join(f"{c.get('action') or 'change'} ({c['at_minute']:g})" for c in mine)
        table.add_row(
            document["scenario"],
            changed or "nothing",
            *(_pair(measure_shown(key, group), measure_shown(key, alone)) for key, _ in _DEMO_MEASURES),
        )
    return table


def _pair(mine: str, alone: str) -> str:
    """A measure with Lifeguard and with PCS alone, one word (`13/never`): a table too narrow for its
    columns breaks lines between words, never inside a pair. A pair of words alike is said once (`no
    failure`: neither failed)."""
    return mine if mine == alone and " " in mine else f"{mine}/{alone}"


# The measures of the twin's (`MEASURES`) the demo's table shows, and their short headings. Serving at the
# end tells a bad change PCS alone never got out of from one whose first node served all along.
_DEMO_MEASURES = (
    ("bootstrap_failed", "burned"),
    ("first_active_minute", "to active"),
    ("first_serving_minute", "to serving"),
    ("recovery_minutes", "failure→serving"),
    ("instance_minutes_wasted", "wasted min"),
    ("serving_at_end", "serving at end"),
)
