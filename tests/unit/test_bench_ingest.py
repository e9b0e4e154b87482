"""`bench/ingest.py --phases`: the split of the handler's own time adds up to it, and counts the groups;
the bookkeeping floor beside it keeps what the handler keeps."""

from __future__ import annotations

import gc
import importlib.util
import itertools
import json
import subprocess
import sys
import time
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest

BENCH = Path(__file__).resolve().parents[2] / "bench" / "ingest.py"


@pytest.fixture(scope="module")
def ingest() -> ModuleType:
    spec = importlib.util.spec_from_file_location("bench_ingest", BENCH)
    assert spec is not None
    assert spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # dataclasses look their module up
    spec.loader.exec_module(module)
    return module


def test_the_phases_split_the_handlers_own_time(ingest: ModuleType) -> None:
    cell = ingest.measure(5, 10, 400, phases=True)
    assert cell.phases is not None
    assert list(cell.phases) == list(ingest.PHASES)
    assert all(spent > 0 for spent in cell.phases.values())
    assert sum(cell.phases.values()) == pytest.approx(cell.handler_s, rel=1e-6)
    # The groups counted are those each batch's launches and outcomes name, batch by batch.
    folded = {
        ("ACTIVE", "BOOTSTRAP_SUCCESS"),
        ("TERMINATED", "BOOTSTRAP_FAILED"),
        ("TERMINATED", "UNHEALTHY_NODE"),
    }
    rows = ingest.records(ingest.group_ids(5), 400)
    expected = sum(
        len(
            {
                row["compute_node_group_id"]
                for row in chunk
                if row["status_code"] == "LAUNCHED" or (row["status_code"], row["reason_code"]) in folded
            }
        )
        for chunk in itertools.batched(rows, 10)
    )
    assert cell.group_batches == expected > cell.batches
    assert cell.floor_ratio is not None
    assert cell.floor_ratio > 0


def test_without_phases_nothing_is_wrapped(ingest: ModuleType) -> None:
    cell = ingest.measure(5, 10, 400)
    assert cell.phases is None
    assert cell.group_batches == 0
    assert cell.floor_ratio is None


def test_the_bookkeeping_floor_keeps_what_the_handler_keeps(ingest: ModuleType) -> None:
    """The floor does the bookkeeping the handler does, no less: after the same batches, each group's
    launches and outcomes are those of the handler's state, each outcome a success or not alike."""
    ids = ingest.group_ids(3)
    events = list(ingest.batches(ingest.records(ids, 400), 10))
    handler = ingest.build_handler(ingest._InstantAws(ids))
    floor = ingest.BookkeepingFloor()
    updates = 0
    for event in events:
        handler.handle_event(event)
        updates += len(floor(event))
    assert updates > len(events)
    failed = 0
    for group in ids:
        state = handler.store.load(ingest.CLUSTER, group)
        launches, outcomes, _ = floor.states[ingest.CLUSTER, group]
        assert launches == dict(state.launches)
        assert outcomes.keys() == state.outcomes.keys()
        for instance, row in outcomes.items():
            assert json.loads(row)[2] == int(state.outcomes[instance].succeeded)
        failed += sum(not outcome.succeeded for outcome in state.outcomes.values())
    assert failed > 0  # the failing group's loop is in the stream


def test_collections_outside_the_handlers_calls_are_the_handlers_not_the_bare_loops(
    ingest: ModuleType,
) -> None:
    collections = ingest._Collections()
    for where, spent in (("handler", 5), ("bare", 3), ("", 2)):
        collections.where = where
        collections("start", {})
        collections._started -= spent  # as if the collection took `spent` seconds
        collections("stop", {})
    # Within the moments between each start and stop (microseconds; more on a busy machine).
    assert collections.outside_s == pytest.approx(5, abs=0.05)  # the bare loop's 3 and the loop's own 2
    assert collections.in_bare_s == pytest.approx(3, abs=0.05)
    assert collections.charged(100, 40) == pytest.approx((105, 37))


def test_a_handler_that_leaves_garbage_for_after_its_batch_is_charged_for_its_collection(
    ingest: ModuleType, monkeypatch: pytest.MonkeyPatch
) -> None:
    class Littering:
        """The real handler, leaving reference cycles behind each batch for the collector to find."""

        def __init__(self, aws: Any) -> None:
            self.handler = ingest.build_handler(aws)

        def handle_event(self, event: Any) -> Any:
            gc.disable()  # as the handler does for its batch: the cycles wait for after it
            try:
                for _ in range(3_000):
                    cycle: list[Any] = []
                    cycle.append(cycle)
                return self.handler.handle_event(event)
            finally:
                gc.enable()

    charged: list[tuple[float, float]] = []
    real = ingest._Collections.charged

    def charging(collections: Any, handler_s: float, bare_s: float) -> tuple[float, float]:
        charged.append(real(collections, handler_s, bare_s))
        return charged[-1]

    monkeypatch.setattr(ingest._Collections, "charged", charging)
    assert gc.isenabled()
    cell = ingest.measure(3, 10, 400, build=Littering)
    assert cell.collector_s > 0  # collected in the bare loop's turn or between, and charged here
    assert [(cell.handler_s, cell.bare_s)] == charged
    assert cell.handler_s > cell.collector_s
    assert ingest.measure(3, 10, 400).collector_s < cell.collector_s


def test_a_collection_in_the_bare_loops_turn_is_taken_out_of_its_time(
    ingest: ModuleType, monkeypatch: pytest.MonkeyPatch
) -> None:
    bare = ingest.bare
    timed: list[float] = []
    collected = [0.0]  # the time of the collections made in the bare loop's turns, as timed there
    # Objects made once the cell has begun (so not frozen with the rest) that every collection scans: a
    # collection then takes milliseconds, and the microseconds around the collector's callbacks, which
    # the test's own timing holds and the callbacks' does not, stay a small part of it on a busy machine.
    heap: list[list[int]] = []

    def collecting(event: Any) -> int:
        heap or heap.extend([] for _ in range(100_000))
        started = time.perf_counter()
        gc.collect()  # a collection in the bare loop's turn, as the handler's garbage can make one there
        collected[0] += time.perf_counter() - started
        return int(bare(event))

    charged: list[tuple[float, float, float]] = []
    real = ingest._Collections.charged

    def charging(collections: Any, handler_s: float, bare_s: float) -> tuple[float, float]:
        charged.append((collections.in_bare_s, handler_s, bare_s))
        timed.append(collections.outside_s)
        result: tuple[float, float] = real(collections, handler_s, bare_s)
        return result

    monkeypatch.setattr(ingest, "bare", collecting)
    monkeypatch.setattr(ingest._Collections, "charged", charging)
    cell = ingest.measure(3, 10, 400)
    [(in_bare, handler_s, bare_s)] = charged
    assert in_bare > 0.8 * collected[0]  # every one of them, whichever side went first
    assert cell.bare_s == pytest.approx(bare_s - in_bare)
    assert cell.handler_s == pytest.approx(handler_s + timed[0])


def test_the_command_prints_the_phases_and_their_json() -> None:
    command = [sys.executable, str(BENCH), "--groups", "3", "--batch", "10", "--records", "300", "--phases"]
    shown = subprocess.run(command, capture_output=True, text=True, check=True, timeout=120).stdout
    for phase in ("read", "decide", "write", "rest"):
        assert f"    {phase} " in shown
    assert "all but the writes:" in shown
    assert "the bookkeeping floor" in shown
    figures = json.loads(
        subprocess.run([*command, "--json"], capture_output=True, text=True, check=True).stdout
    )
    (cell,) = figures["cells"]
    assert set(cell["phases"]) == {"read", "decide", "write", "rest"}
    assert cell["group_batches"] >= cell["batches"]
    assert cell["floor_ratio"] > 0
