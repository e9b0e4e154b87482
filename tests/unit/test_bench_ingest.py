"""`bench/ingest.py --phases`: the split of the handler's own time adds up to it, and counts the groups."""

from __future__ import annotations

import importlib.util
import itertools
import json
import subprocess
import sys
from pathlib import Path
from types import ModuleType

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


def test_without_phases_nothing_is_wrapped(ingest: ModuleType) -> None:
    cell = ingest.measure(5, 10, 400)
    assert cell.phases is None
    assert cell.group_batches == 0


def test_the_command_prints_the_phases_and_their_json() -> None:
    command = [sys.executable, str(BENCH), "--groups", "3", "--batch", "10", "--records", "300", "--phases"]
    shown = subprocess.run(command, capture_output=True, text=True, check=True, timeout=120).stdout
    for phase in ("read", "decide", "write", "rest"):
        assert f"    {phase} " in shown
    assert "all but the writes:" in shown
    figures = json.loads(
        subprocess.run([*command, "--json"], capture_output=True, text=True, check=True).stdout
    )
    (cell,) = figures["cells"]
    assert set(cell["phases"]) == {"read", "decide", "write", "rest"}
    assert cell["group_batches"] >= cell["batches"]
