"""What Lifeguard saves in bootstrap-failure loops against PCS alone and ParallelCluster's protected mode.

Measured on the simulator's twin of a cluster, every scenario on one seed in one run. Every built-in
scenario (or each `--scenario`) runs with Lifeguard (DefaultMode quarantine; a group's `lifeguard:mode` tag
wins) beside `--baseline pcs`, then again beside `--baseline parallelcluster`: the simulator runs Lifeguard
before each baseline, so Lifeguard runs twice per scenario; the tables show the first of its runs and say
when the second disagrees (same seed, same run is the simulator's promise). Per group: instances burned
(BOOTSTRAP_FAILED), the minute of the first serving node, wasted instance minutes, and each baseline's
figure over Lifeguard's (above 1 Lifeguard does better; "-" when there is no ratio). Then the wall time of
every run, and the goals for 60-minute scenarios: one group (article-loop) under 10 s, 50 nodes (wave-50)
under 60 s. It reports; it asserts nothing.

    .venv/bin/python bench/loop.py                                   # all of them (a few minutes)
    .venv/bin/python bench/loop.py --scenario article-loop --seed 7
    .venv/bin/python bench/loop.py --json
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from lifeguard_cli.simulate import (
    BASELINES,
    Scenario,
    ScenarioError,
    Simulator,
    built_in_scenarios,
    load_scenario,
    span_minutes,
)

MODE = "quarantine"
FIGURES = (
    "launched",
    "bootstrap_failed",
    "first_serving_minute",
    "recovery_minutes",
    "instance_minutes_wasted",
    "serving_at_end",
)
RATIOS = ("bootstrap_failed", "first_serving_minute", "recovery_minutes", "instance_minutes_wasted")
# scenario (file name) -> the Lifeguard run's wall time it should stay under, and what it stands for
WALL_GOALS_SECONDS = {"article-loop": (10.0, "one group"), "wave-50": (60.0, "50 nodes")}
GOAL_HORIZON_MINUTES = 60
COLUMNS = ("Lifeguard", "PCS alone", "ParallelCluster", "PCS/LG", "PC/LG")


def _figures(groups: dict[str, Any]) -> dict[str, dict[str, Any]]:
    return {name: {key: summary[key] for key in FIGURES} for name, summary in groups.items()}


def _ratio(baseline: float | None, lifeguard: float | None) -> float | None:
    """The baseline's figure over Lifeguard's; None when either is never reached or Lifeguard's is 0."""
    if baseline is None or lifeguard is None or lifeguard == 0:
        return None
    return round(baseline / lifeguard, 2)


class RunLines:
    """Progress on stderr: one line as each of the `total` runs starts."""

    def __init__(self, total: int) -> None:
        self.total = total
        self.started = 0

    def of(self, scenario: str, baseline: str) -> Callable[[str, float], None]:
        """The simulator's `progress` for one scenario beside one baseline."""
        said: set[str] = set()

        def line(run: str, fraction: float) -> None:
            if run not in said:
                said.add(run)
                self.started += 1
                print(
                    f"[{self.started}/{self.total}] {scenario} (--baseline {baseline}): the {run} run…",
                    file=sys.stderr,
                )

        return line


def measure(key: str, scenario: Scenario, simulator: Simulator, seed: int, lines: RunLines) -> dict[str, Any]:
    """One scenario beside each baseline: the figures of every group, the ratios and the wall times."""
    documents = {
        baseline: simulator.run(
            scenario, mode=MODE, seed=seed, baseline=baseline, progress=lines.of(key, baseline)
        )
        for baseline in BASELINES
    }
    lifeguard_runs = [_figures(document["groups"]) for document in documents.values()]
    lifeguard = lifeguard_runs[0]
    result: dict[str, Any] = {
        "scenario": key,
        "name": scenario.name,
        "horizon_minutes": scenario.horizon_minutes,
        "lifeguard": {
            "groups": lifeguard,
            "wall_seconds": [document["wall_seconds"] for document in documents.values()],
            "runs_agree": all(run == lifeguard for run in lifeguard_runs),
        },
        "ratios": {},
    }
    if not result["lifeguard"]["runs_agree"]:
        result["lifeguard"]["other_run_groups"] = lifeguard_runs[1:]
    for baseline, document in documents.items():
        groups = _figures(document["baseline"]["groups"])
        result[baseline] = {"groups": groups, "wall_seconds": document["baseline"]["wall_seconds"]}
        for name, mine in lifeguard.items():
            theirs = groups.get(name, {})
            result["ratios"].setdefault(name, {})[baseline] = {
                figure: _ratio(theirs.get(figure), mine[figure]) for figure in RATIOS
            }
    return result


def goals(results: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The wall-time goals of the 60-minute scenarios that ran, against the slower Lifeguard run."""
    checks = []
    for result in results:
        goal = WALL_GOALS_SECONDS.get(result["scenario"])
        if goal is None or result["horizon_minutes"] != GOAL_HORIZON_MINUTES:
            continue
        measured = max(result["lifeguard"]["wall_seconds"])
        checks.append(
            {
                "scenario": result["scenario"],
                "what": goal[1],
                "wall_seconds": measured,
                "goal_seconds": goal[0],
                "met": measured < goal[0],
            }
        )
    return checks


def _minutes(value: float | None) -> str:
    return "never" if value is None else f"{value:.1f}"


def _number(value: float | None) -> str:
    if value is None:
        return "-"
    return str(value) if isinstance(value, int) else f"{value:.1f}"


def _times(value: float | None) -> str:
    return "-" if value is None else f"{value:.2f}x"


def _differences(first: dict[str, Any], second: dict[str, Any]) -> str:
    return ", ".join(
        f"{group} {figure} {figures[figure]} vs {second.get(group, {}).get(figure)}"
        for group, figures in first.items()
        for figure in FIGURES
        if figures[figure] != second.get(group, {}).get(figure)
    )


def render(report: dict[str, Any]) -> str:
    """The tables, the wall times and the goals, as text."""
    lines = [
        f"seed {report['seed']}, Lifeguard in mode {report['mode']}; Lifeguard runs twice per scenario "
        "(once beside each baseline), the tables show its first run",
        "ratios are the baseline's figure over Lifeguard's: above 1.00x Lifeguard does better",
    ]
    rows = (
        ("instances burned", "bootstrap_failed", _number),
        ("minutes to a serving node", "first_serving_minute", _minutes),
        ("failure to serving minutes", "recovery_minutes", _minutes),
        ("wasted instance minutes", "instance_minutes_wasted", _number),
        ("serving at the end", "serving_at_end", _number),
    )
    for result in report["scenarios"]:
        lines += ["", f"{result['scenario']}: {result['name']} ({result['horizon_minutes']:g} min)"]
        mine = result["lifeguard"]["groups"]
        for other in result["lifeguard"].get("other_run_groups", []):
            lines.append(
                f"  NOTE: Lifeguard's second run on the same seed differs: {_differences(mine, other)}"
            )
        for group, figures in mine.items():
            pcs = result["pcs"]["groups"].get(group, {})
            cluster = result["parallelcluster"]["groups"].get(group, {})
            ratios = result["ratios"][group]
            lines.append(f"  {'group ' + group:<28}" + "".join(f"{c:>17}" for c in COLUMNS))
            for label, figure, show in rows:
                cells = [show(figures[figure]), show(pcs.get(figure)), show(cluster.get(figure))]
                if figure in RATIOS:
                    cells += [_times(ratios["pcs"][figure]), _times(ratios["parallelcluster"][figure])]
                lines.append(f"    {label:<26}" + "".join(f"{c:>17}" for c in cells))
    lines += ["", f"{'wall time (s)':<28}{'Lifeguard':>17}{'Lifeguard again':>17}{'PCS':>17}{'PC':>17}"]
    for result in report["scenarios"]:
        first, second = result["lifeguard"]["wall_seconds"]
        seconds = (first, second, result["pcs"]["wall_seconds"], result["parallelcluster"]["wall_seconds"])
        lines.append(f"  {result['scenario']:<26}" + "".join(f"{s:>17.2f}" for s in seconds))
    if report["goals"]:
        lines += ["", "goals for 60-minute scenarios (the slower of Lifeguard's two runs):"]
        for check in report["goals"]:
            lines.append(
                f"  {check['scenario']:<14} {check['what']:<10} {check['wall_seconds']:6.2f} s"
                f"  vs goal < {check['goal_seconds']:g} s: {'met' if check['met'] else 'NOT met'}"
            )
    lines += ["", f"{report['runs']} runs in {report['wall_seconds']:.1f} s"]
    return "\n".join(lines)


def main() -> int:
    parser = argparse.ArgumentParser(
        description=__doc__.splitlines()[0],
        formatter_class=argparse.RawDescriptionHelpFormatter,
        epilog="example: .venv/bin/python bench/loop.py --scenario article-loop --scenario wave-50",
    )
    parser.add_argument(
        "--scenario",
        action="append",
        metavar="NAME",
        help="a built-in scenario (article-loop, wave-50, …) or a scenario file; repeatable (default: all)",
    )
    parser.add_argument("--seed", type=int, default=1, help="the seed of every run (default 1)")
    parser.add_argument("--json", action="store_true", help="one JSON document instead of the tables")
    parser.add_argument("--verbose", action="store_true", help="the handlers' warnings on stderr")
    args = parser.parse_args()
    sources: list[str | Path] = list(args.scenario or built_in_scenarios())
    try:  # every scenario is checked before anything runs
        scenarios = {Path(source).stem: load_scenario(source) for source in sources}
    except ScenarioError as exc:
        print(f"bench/loop.py: {exc}", file=sys.stderr)
        return 2
    minutes = sum(span_minutes(s, baseline) for s in scenarios.values() for baseline in BASELINES)
    lines = RunLines(2 * len(BASELINES) * len(scenarios))
    started = time.perf_counter()
    with Simulator(minutes, verbose=args.verbose) as simulator:
        results = [measure(key, scenario, simulator, args.seed, lines) for key, scenario in scenarios.items()]
    report = {
        "seed": args.seed,
        "mode": MODE,
        "lifeguard_runs_per_scenario": len(BASELINES),
        "runs": lines.total,
        "wall_seconds": round(time.perf_counter() - started, 1),
        "scenarios": results,
        "goals": goals(results),
    }
    if args.json:
        print(json.dumps(report, indent=2))
    else:
        print(render(report))
    return 0


if __name__ == "__main__":
    sys.exit(main())
