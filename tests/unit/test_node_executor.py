"""The executor in this process (`node.executor`), for what a real node cannot be made to do on demand."""

from __future__ import annotations

import errno
from pathlib import Path

import pytest

import lifeguard.node.executor
from lifeguard.node.executor import EXIT_COMPLETED, Executor, NodeIdentity
from lifeguard.node.layout import NodeLayout
from tests.unit.test_node_report_schema import PASSING, BucketFetcher

IDENTITY = NodeIdentity("pcs_abc123de45", "lca", "pcs_abcdef01", "lca-static", "lca-static-1")
MOUNT = "s3://lca-scripts-example/scripts/mount-fsx.sh"
CONFIG = {"stages": {"nodeBootstrapped": [{"name": "mount-fsx", "scriptSource": {"scriptLocation": MOUNT}}]}}


def test_a_boot_whose_count_a_full_disk_refuses_is_still_the_boot_its_scripts_made(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    def full_disk(*_: object, **__: object) -> None:
        raise OSError(errno.ENOSPC, "No space left on device")

    monkeypatch.setattr(lifeguard.node.executor, "atomic_write", full_disk)
    executor = Executor(
        CONFIG,
        NodeLayout(tmp_path),
        IDENTITY,
        fetchers={"s3": BucketFetcher({MOUNT: PASSING})},
        fetch_backoff_seconds=0,
    )
    result = executor.boot()
    assert result.exit_code == EXIT_COMPLETED
    assert [run.outcome for run in result.runs] == ["succeeded"]
    assert "the boot count cannot be saved" in capsys.readouterr().err
