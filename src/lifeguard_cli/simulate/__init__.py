"""`lifeguard simulate`: a twin of a PCS cluster on a virtual clock, where Lifeguard's own changes decide
what the next node boots (`twin`), run from scenario files (`scenario`), with Lifeguard and, beside it on
the same seed, a baseline: PCS alone, or ParallelCluster's protected mode."""

from __future__ import annotations

import contextlib
import functools
import os
import sys
import tempfile
from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

from lifeguard_cli.simulate.scenario import (
    BUILT_IN,
    FAULT_KINDS,
    Scenario,
    ScenarioError,
    built_in_scenarios,
    load_scenario,
)

__all__ = [
    "BASELINES",
    "BUILT_IN",
    "FAULT_KINDS",
    "MODES",
    "Scenario",
    "ScenarioError",
    "Simulator",
    "built_in_scenarios",
    "load_scenario",
    "simulate",
    "span_minutes",
]

MODES = ("quarantine", "revert", "notify", "off")
BASELINES = ("pcs", "parallelcluster")
_GAP = timedelta(minutes=10)  # between two runs on the virtual clock

Progress = Callable[[str, float], None]


def simulate(
    scenario: Scenario,
    *,
    mode: str = "quarantine",
    seed: int = 1,
    baseline: str | None = None,
    progress: Progress | None = None,
    verbose: bool = False,
) -> dict[str, Any]:
    """Run `scenario` with Lifeguard in `mode` (and the `baseline` beside it on the same seed) in a local
    AWS of its own; the `--json` document. `progress(run, fraction)` is told how far each run has come."""
    with Simulator(span_minutes(scenario, baseline), verbose=verbose) as simulator:
        return simulator.run(scenario, mode=mode, seed=seed, baseline=baseline, progress=progress)


def span_minutes(scenario: Scenario, baseline: str | None) -> float:
    """The virtual minutes a scenario's runs take, gaps included."""
    runs = 2 if baseline is not None else 1
    return runs * (scenario.horizon_minutes + _GAP.total_seconds() / 60)


class Simulator:
    """One local AWS (moto, the local PCS, a Slack sink) and one node host, for runs that take at most
    `minutes` of virtual time in all: they run one after another on one clock, which ends before now
    (CloudWatch Logs takes events from the last 14 days, up to 2 hours ahead)."""

    def __init__(self, minutes: float, *, verbose: bool = False) -> None:
        self._next = datetime.now(UTC).replace(second=0, microsecond=0) - timedelta(minutes=minutes)
        self._verbose = verbose
        self._stack = contextlib.ExitStack()

    def __enter__(self) -> Simulator:
        from lifeguard_cli.local import LocalPcs, ManualClock, local_aws
        from lifeguard_cli.local.slack import serve_slack
        from lifeguard_cli.replay.run import handler_logs, on_local_aws
        from lifeguard_cli.simulate.nodehost import NodeHost

        stack = self._stack.__enter__()
        try:
            self.clock = ManualClock(self._next)
            self.aws = stack.enter_context(local_aws(LocalPcs(clock=self.clock, update_seconds=60)))
            self.slack = stack.enter_context(serve_slack())
            stack.enter_context(handler_logs(self._verbose))
            stack.enter_context(on_local_aws())
            scratch = tempfile.TemporaryDirectory(prefix="lifeguard-simulate-")
            self.workdir = Path(stack.enter_context(scratch))
            self.host = NodeHost({**os.environ, **self.aws.environ()})
            stack.callback(self.host.close)
        except BaseException:
            self._stack.__exit__(*sys.exc_info())
            raise
        return self

    def __exit__(self, *exc: object) -> None:
        self._stack.__exit__(None, None, None)

    def run(
        self,
        scenario: Scenario,
        *,
        mode: str = "quarantine",
        seed: int = 1,
        baseline: str | None = None,
        progress: Progress | None = None,
    ) -> dict[str, Any]:
        """One scenario with Lifeguard in `mode`, then its `baseline`; the `--json` document."""
        from lifeguard_cli.simulate.twin import RunOptions, Surroundings, TwinRun, run_twin, scripts_for

        if mode not in MODES:
            raise ScenarioError(f"--mode {mode}: one of {', '.join(MODES)}")
        if baseline is not None and baseline not in BASELINES:
            raise ScenarioError(f"--baseline {baseline}: one of {', '.join(BASELINES)}")
        runs = [RunOptions("lifeguard", mode, seed)]
        if baseline is not None:
            runs.append(RunOptions(baseline, None, seed, protected_mode=baseline == "parallelcluster"))
        scripts_for(scenario, self.aws.client("s3"))
        done: list[TwinRun] = []
        for options in runs:
            tell = None if progress is None else functools.partial(progress, options.label)
            start, self._next = self._next, self._next + timedelta(minutes=scenario.horizon_minutes) + _GAP
            around = Surroundings(self.aws, self.slack, self.host, self.clock, self.workdir)
            done.append(run_twin(scenario, options, around, start=start, progress=tell))
        return _document(scenario, mode, seed, done)


def _document(scenario: Scenario, mode: str, seed: int, runs: list[Any]) -> dict[str, Any]:
    main, *others = runs
    document: dict[str, Any] = {
        "scenario": scenario.name,
        "mode": mode,
        "seed": seed,
        "horizon_minutes": scenario.horizon_minutes,
        **_run_part(main),
        "events": main.events,
        "notifications": main.notifications,
        "faults": main.faults,
        "invocations": main.invocations,
        "metrics": main.metrics,
        "audit": main.audit,
    }
    for other in others:
        document["baseline"] = {"name": other.options.label, **_run_part(other)}
    return document


def _run_part(run: Any) -> dict[str, Any]:
    """What the document says of any run, Lifeguard's or a baseline's."""
    return {
        "started_at": run.started_at,
        "groups": {name: run.group_summary(name) for name in run.groups},
        "instances": [instance.to_dict() for instance in run.instances],
        "slurm": run.slurm(),
        "changes": run.changes,
        "timeline": run.timeline,
        "boots": run.boots,
        "wall_seconds": round(run.wall_seconds, 2),
    }
