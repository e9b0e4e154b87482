"""Which scripts stopped their sequence this boot (`node.drain`), read from executor.log: only this boot's,
each once, whatever else the log holds."""

from __future__ import annotations

import json
from pathlib import Path

from lifeguard.node.drain import booted_at, drain, stopped_scripts
from lifeguard.node.layout import NodeLayout

STOPPED = "lifecycle script failed; stopping remaining scripts"
BOOT = 1_792_544_000.0  # 2026-10-21T00:53:20Z


def write_log(tmp_path: Path, *lines: object) -> NodeLayout:
    layout = NodeLayout(tmp_path)
    layout.executor_log.parent.mkdir(parents=True)
    layout.executor_log.write_text(
        "\n".join(line if isinstance(line, str) else json.dumps(line) for line in lines) + "\n"
    )
    return layout


def record(
    script: str, timestamp: str | None = "2026-10-21T00:55:00Z", message: str = STOPPED
) -> dict[str, object]:
    found: dict[str, object] = {
        "level": "ERROR",
        "message": message,
        "stage": "nodeBootstrapped",
        "script": script,
    }
    if timestamp is not None:
        found["timestamp"] = timestamp
    return found


def test_stopped_scripts_of_this_boot_are_found_once_each_in_log_order(tmp_path: Path) -> None:
    layout = write_log(
        tmp_path,
        record("earlier-boot", "2026-10-21T00:50:00Z"),
        record("mount-fsx"),
        record("mount-fsx", "2026-10-21T00:56:00+00:00"),
        record("ran-fine", message="script completed"),
        record("terminated", message="lifecycle script failed; terminating node"),
        "not json at all",
        "[1, 2]",
        record("no-time", timestamp=None),
        record("bad-time", timestamp="yesterday"),
        {"message": STOPPED},
    )
    assert stopped_scripts(layout, since=BOOT) == [
        "nodeBootstrapped/mount-fsx",
        "nodeBootstrapped/no-time",
        "nodeBootstrapped/bad-time",
        "?/?",
    ]


def test_a_record_exactly_at_the_boot_counts(tmp_path: Path) -> None:
    layout = write_log(tmp_path, record("at-boot", "2026-10-21T00:53:20Z"))
    assert stopped_scripts(layout, since=BOOT) == ["nodeBootstrapped/at-boot"]
    assert stopped_scripts(layout, since=BOOT + 0.001) == []


def test_no_executor_log_means_nothing_stopped_and_nothing_to_drain(tmp_path: Path) -> None:
    layout = NodeLayout(tmp_path)
    assert stopped_scripts(layout, since=0) == []
    decision = drain(layout, "quarantined by Lifeguard", since=0, scontrol="/nonexistent/scontrol")
    assert (decision.stopped, decision.drained, decision.error) == ((), False, None)
    assert decision.reason == "no lifecycle script stopped its sequence this boot"


def test_the_boot_time_is_the_kernels_btime_or_zero(tmp_path: Path) -> None:
    stat = tmp_path / "stat"
    stat.write_text("cpu  1 2 3\nbtime 1792544000\nprocesses 42\n")
    assert booted_at(stat) == BOOT
    stat.write_text("btime soon\n")
    assert booted_at(stat) == 0.0
    stat.write_text("cpu 1\n")
    assert booted_at(stat) == 0.0
    assert booted_at(tmp_path / "missing") == 0.0
