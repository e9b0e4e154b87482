"""A soak of hostile input: thousands of generated payloads through the four handlers against the local AWS.

Each payload is a genuine loop (or its node reports, its detection, its notification) mixed with junk an
attacker or a broken node would send: text, JSON nested 100,000 deep, ids past DynamoDB's key limit, a
600 KB instance id, times a century ahead, wrong types, forged detections of a healthy group, ... drawn
by the same Hypothesis strategies as `tests/integration/test_hostile_input.py`, with the same checks on
every one (`tests/hostile.py`): no exception escapes, the genuine loop is detected, attributed,
remediated and notified, every junk record is skipped with a reason or ignored as its recipe says, and
only the group that looped is ever changed. It prints what it saw, counted; it asserts no timing.

    .venv/bin/python bench/soak.py              # about 12,000 payloads (20-30 minutes on 2 cores)
    .venv/bin/python bench/soak.py --scale 0.1  # a tenth of that
    .venv/bin/python bench/soak.py --json
"""

from __future__ import annotations

import argparse
import json
import logging
import random
import sys
import time
from collections import Counter
from collections.abc import Callable
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # the tests' strategies and harness

from hypothesis import HealthCheck, Phase, given, settings
from hypothesis import strategies as st

from lifeguard_cli.local import local_aws
from tests.hostile import (
    DETECTION_MUTATIONS,
    World,
    notify_junk,
    report_junk,
    scaling_junk,
    world,
)

# Rounds per handler at --scale 1; a round is one hostile payload (remediate: a detection and up to 8
# mutations of it, each its own invocation; notify: up to 6 broken events and a genuine one).
ROUNDS = {"scaling_events": 4_000, "node_reports": 3_000, "remediate": 700, "notify": 700}
ROUNDS_A_WORLD = 250  # a fresh table now and then: moto copies a table for every transactional write
SEEDS = st.integers(min_value=0, max_value=2**32)


def _rounds(name: str, w: World) -> tuple[Any, Callable[..., None]]:
    if name == "scaling_events":
        return st.lists(scaling_junk, min_size=1, max_size=12), w.scaling_round
    if name == "node_reports":
        return st.lists(report_junk, min_size=1, max_size=12), w.reports_round
    if name == "remediate":
        return st.lists(DETECTION_MUTATIONS, min_size=1, max_size=8), w.remediate_round
    return st.lists(notify_junk, min_size=1, max_size=6), lambda junk, rng: w.notify_round(junk)


def _generate(strategy: Any, round_of: Callable[..., None], *, examples: int) -> None:
    """`examples` rounds drawn by Hypothesis (no shrinking: a failure is shown as drawn, and stops)."""

    @settings(
        max_examples=examples,
        database=None,
        phases=[Phase.generate],
        deadline=None,
        suppress_health_check=list(HealthCheck),
    )
    @given(junk=strategy, seed=SEEDS)
    def one(junk: list[Any], seed: int) -> None:
        round_of(junk, random.Random(seed))

    one()


def soak(name: str, rounds: int, local: Any, counts: Counter[str]) -> None:
    """`rounds` generated payloads through one handler; their counts are added to `counts`."""
    done = 0
    started = time.monotonic()
    while done < rounds:
        chunk = min(ROUNDS_A_WORLD, rounds - done)
        with world(local) as w:
            _generate(*_rounds(name, w), examples=chunk)
            counts.update(w.counts)
        done += chunk
        rate = done / (time.monotonic() - started)
        print(f"  {name}: {done:,}/{rounds:,} payloads ({rate:.1f}/s)", file=sys.stderr)


def _table(counts: Counter[str], seconds: float) -> str:
    lines = [f"{'handler':<15} {'what':<52} {'count':>9}", "-" * 78]
    for key in sorted(counts):
        handler, _, what = key.partition(":")
        lines.append(f"{handler:<15} {what:<52} {counts[key]:>9,}")
    payloads = counts["scaling:payloads"] + counts["reports:payloads"] + counts["remediate:detections"]
    payloads += counts["notify:events"]
    lines += ["-" * 78, f"{payloads:,} hostile payloads in {seconds / 60:.1f} min: no exception escaped,"]
    lines.append("every genuine loop was detected, attributed, remediated once and notified.")
    return "\n".join(lines)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--scale", type=float, default=1.0, help="a share of the default rounds (e.g. 0.1)")
    parser.add_argument("--json", action="store_true", help="the counts as JSON")
    parser.add_argument("--verbose", action="store_true", help="the handlers' own log lines on stderr")
    args = parser.parse_args()
    if not args.verbose:  # each skipped record is logged: thousands of lines nobody reads here
        logging.getLogger("lifeguard").setLevel(logging.CRITICAL)
    counts: Counter[str] = Counter()
    started = time.monotonic()
    with local_aws() as local:
        for name, rounds in ROUNDS.items():
            soak(name, max(1, int(rounds * args.scale)), local, counts)
    seconds = time.monotonic() - started
    if args.json:
        print(json.dumps({"seconds": round(seconds, 1), "counts": dict(sorted(counts.items()))}, indent=1))
    else:
        print(_table(counts, seconds))
    return 0


if __name__ == "__main__":
    sys.exit(main())
