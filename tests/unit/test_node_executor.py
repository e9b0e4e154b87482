"""The executor in this process (`node.executor`), for what a real node cannot be made to do on demand."""

from __future__ import annotations

import errno
import json
import os
from pathlib import Path

import pytest

import lifeguard.node.executor
from lifeguard.node import cli as node_cli
from lifeguard.node.executor import EXIT_COMPLETED, EXIT_TERMINATE, Executor, NodeIdentity
from lifeguard.node.layout import NodeLayout
from lifeguard.node.shipper import Shipper
from tests.unit.test_node_report_schema import PASSING, SHIPPER_IDENTITY, BucketFetcher, ListSink

IDENTITY = NodeIdentity("pcs_abc123de45", "lca", "pcs_abcdef01", "lca-static", "lca-static-1")
MOUNT = "s3://lca-scripts-example/scripts/mount-fsx.sh"
CONFIG = {"stages": {"nodeBootstrapped": [{"name": "mount-fsx", "scriptSource": {"scriptLocation": MOUNT}}]}}


def _executor(root: Path) -> Executor:
    fetchers = {"s3": BucketFetcher({MOUNT: PASSING})}
    return Executor(CONFIG, NodeLayout(root), IDENTITY, fetchers=fetchers, fetch_backoff_seconds=0)


def test_a_boot_whose_count_a_full_disk_refuses_is_still_the_boot_its_scripts_made(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    def full_disk(*_: object, **__: object) -> None:
        raise OSError(errno.ENOSPC, "No space left on device")

    monkeypatch.setattr(lifeguard.node.executor, "atomic_write", full_disk)
    result = _executor(tmp_path).boot()
    assert result.exit_code == EXIT_COMPLETED
    assert [run.outcome for run in result.runs] == ["succeeded"]
    assert "the boot count cannot be saved" in capsys.readouterr().err


def test_a_reboot_saves_and_syncs_its_state_once_before_its_first_script(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The boot saved as under way counts as done at the next boot: its end is not written and synced
    again (a write and a sync a boot), and the state the reboot leaves makes the boot after it boot 3."""
    executor = _executor(tmp_path)
    assert executor.boot().first_boot
    real_write, real_fsync = lifeguard.node.executor.atomic_write, os.fsync
    saved: list[tuple[str, bytes]] = []
    synced: list[int] = []

    def write(path: Path, data: bytes, mode: int) -> None:
        saved.append((path.name, data))
        real_write(path, data, mode)

    def fsync(fd: int) -> None:
        synced.append(fd)
        real_fsync(fd)

    monkeypatch.setattr(lifeguard.node.executor, "atomic_write", write)
    monkeypatch.setattr(os, "fsync", fsync)
    assert executor.boot().boot == 2
    assert saved == [("boot-state.json", b'{"completed_boots": 1, "started": 2}')]
    assert len(synced) == 1
    assert executor.boot().boot == 3


def test_a_boot_state_a_script_took_away_is_saved_again_at_the_boots_end(tmp_path: Path) -> None:
    """A script that mounts a volume over the state's folder, or moves it to a larger disk, takes the
    state saved as the boot began away: the boot's end saves it again where it now goes, so the next boot
    is a reboot, and a FIRST_BOOT_ONLY script (a mkfs, a join) does not run twice."""
    state_folder = NodeLayout(tmp_path).state
    setup, moves = "s3://lca-scripts-example/setup.sh", "s3://lca-scripts-example/move-state.sh"
    move = f'mv "{state_folder}" "{state_folder}.moved" && mkdir "{state_folder}"\n'
    config = {
        "stages": {
            "nodeBootstrapped": [
                {"name": "setup", "scriptSource": {"scriptLocation": setup}},
                {
                    "name": "move-state",
                    "scriptSource": {"scriptLocation": moves},
                    "executionPolicy": "EVERY_BOOT",
                },
            ]
        }
    }
    fetchers = {"s3": BucketFetcher({setup: b"echo setup\n", moves: move.encode()})}
    executor = Executor(config, NodeLayout(tmp_path), IDENTITY, fetchers=fetchers, fetch_backoff_seconds=0)
    assert executor.boot().first_boot
    again = executor.boot()
    assert (again.boot, again.first_boot) == (2, False)
    assert [run.outcome for run in again.runs] == ["skipped", "succeeded"]


def test_a_boot_whose_start_could_not_be_saved_saves_its_end(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """The disk full as the boot began, and not at its end (a script made room): the next boot is a
    reboot all the same, and a FIRST_BOOT_ONLY script does not run twice."""
    real_write = lifeguard.node.executor.atomic_write
    refused: list[Path] = []

    def full_once(path: Path, data: bytes, mode: int) -> None:
        if path.name == "boot-state.json" and not refused:
            refused.append(path)
            raise OSError(errno.ENOSPC, "No space left on device")
        real_write(path, data, mode)

    monkeypatch.setattr(lifeguard.node.executor, "atomic_write", full_once)
    executor = _executor(tmp_path)
    assert executor.boot().first_boot
    assert "the boot count cannot be saved" in capsys.readouterr().err
    again = executor.boot()
    assert (again.boot, again.first_boot) == (2, False)
    assert [run.outcome for run in again.runs] == ["skipped"]  # FIRST_BOOT_ONLY, PCS's default


def test_each_script_gets_thirty_minutes_by_default(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """README: `--script-timeout` (default 30 minutes, each script's). Cut short, a 4-minute mount would be
    killed on every node: under TERMINATE, the loop Lifeguard exists to stop."""
    config = {
        "stages": {
            "nodeBootstrapped": [
                {"name": "mount-fsx", "scriptSource": {"scriptLocation": "s3://lca-scripts-example/mount.sh"}}
            ]
        }
    }
    identity = NodeIdentity("pcs_abc123de45", "lca", "pcs_abcdef01", "lca-static", "lca-static-1")
    assert Executor(config, NodeLayout(tmp_path), identity).script_timeout_seconds == 1800
    with pytest.raises(SystemExit):
        node_cli.main(["boot", "--help"])
    assert "default 1800" in capsys.readouterr().out


def test_a_local_node_is_named_as_pcs_names_one_not_by_its_host_name(monkeypatch: pytest.MonkeyPatch) -> None:
    """The article: the Slurm node name (lca-static-1) differs from the host name, so scripts must use
    PCS_NODE_ID. A local boot without the flags names its node `<group name>-1` and its group by a name
    that is not its id, so a script that takes one for the other fails here as it would on PCS."""
    for name in ("PCS_CLUSTER_ID", "PCS_CLUSTER_NAME", "PCS_COMPUTE_NODE_GROUP_ID"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.delenv("PCS_COMPUTE_NODE_GROUP_NAME", raising=False)
    monkeypatch.delenv("PCS_NODE_ID", raising=False)
    local = NodeIdentity.resolve()
    assert (local.compute_node_group_id, local.compute_node_group_name, local.node_id) == (
        "pcs_localgroup",
        "local-group",
        "local-group-1",
    )
    named = NodeIdentity.resolve(compute_node_group_id="pcs_abcdef01", compute_node_group_name="lca-static")
    assert named.node_id == "lca-static-1"
    monkeypatch.setenv("PCS_NODE_ID", "gpu-7")  # as PCS sets it for a lifecycle action
    assert NodeIdentity.resolve().node_id == "gpu-7"
    assert NodeIdentity.resolve(node_id="n1").node_id == "n1"


def test_a_presigned_locations_credentials_reach_no_log(tmp_path: Path) -> None:
    """executor.log is readable by every user of the node (as PCS's is): a location's query string (a
    presigned URL's signature and key) and fragment are left out of every record and log, ever."""
    signed = (
        "https://lca-scripts-example.s3.amazonaws.com/scripts/mount-fsx.sh"
        "?X-Amz-Credential=AKIAEXAMPLEKEY&X-Amz-Signature=s3cr3tsignature#fragment"
    )
    config = {
        "stages": {"nodeBootstrapped": [{"name": "mount-fsx", "scriptSource": {"scriptLocation": signed}}]}
    }
    executor = Executor(
        config,
        NodeLayout(tmp_path),
        IDENTITY,
        fetchers={"https": BucketFetcher({signed: PASSING})},
        fetch_backoff_seconds=0,
    )
    result = executor.boot()
    assert [run.outcome for run in result.runs] == ["succeeded"]
    logs = tmp_path / "var" / "log"
    written = {path: path.read_bytes() for path in logs.rglob("*") if path.is_file()}
    assert any(b"scripts/mount-fsx.sh" in content for content in written.values())  # the location, redacted
    for path, content in written.items():
        for secret in (b"s3cr3tsignature", b"AKIAEXAMPLEKEY", b"fragment"):
            assert secret not in content, path
    # The script cache keeps the whole location, to tell whether its copy is still that source's: no one's
    # but root's (and its group's, as PCS lays out its own files).
    for path in tmp_path.rglob("*.source.json"):
        assert path.stat().st_mode & 0o007 == 0, oct(path.stat().st_mode)


def test_the_nodes_identity_wins_over_what_the_boots_environment_holds(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A service environment left with a PCS_* variable (a stale PCS_IS_FIRST_BOOT=1, another node's id)
    does not reach the scripts: a reboot is no first boot (the article's first_boot=0), and the node is the
    one the boot was given."""
    out = tmp_path / "seen"
    script = f'#!/bin/bash\necho "$PCS_NODE_ID $PCS_IS_FIRST_BOOT $PCS_COMPUTE_NODE_GROUP_ID" >> {out}\n'
    config = {
        "stages": {
            "nodeBootstrapped": [
                {"name": "env", "scriptSource": {"scriptLocation": MOUNT}, "executionPolicy": "EVERY_BOOT"}
            ]
        }
    }
    monkeypatch.setenv("PCS_IS_FIRST_BOOT", "1")
    monkeypatch.setenv("PCS_NODE_ID", "stale-node")
    monkeypatch.setenv("PCS_COMPUTE_NODE_GROUP_ID", "pcs_stale00001")
    for _ in range(2):
        executor = Executor(
            config,
            NodeLayout(tmp_path / "root"),
            IDENTITY,
            fetchers={"s3": BucketFetcher({MOUNT: script.encode()})},
            fetch_backoff_seconds=0,
        )
        assert executor.boot().exit_code == EXIT_COMPLETED
    assert out.read_text().splitlines() == [
        "lca-static-1 1 pcs_abcdef01",
        "lca-static-1 0 pcs_abcdef01",
    ]


class _LoudDenial(BucketFetcher):
    """An S3-compatible store whose refusal says two million characters (a proxy's error page)."""

    def fetch_once(self, location: str, version_id: str | None) -> bytes:
        raise PermissionError("AccessDenied: " + "A" * 2_000_000)


def test_a_fetch_failure_with_an_endless_error_text_is_logged_short_and_reported(tmp_path: Path) -> None:
    """An endpoint's error text went into executor.log whole (three records of 2 MB for one script): the
    shipper passes over a record longer than the megabyte it reads at a time, and the TERMINATE failure
    that ends the boot, the one a loop is made of, was never reported."""
    script = {"name": "mount-fsx", "scriptSource": {"scriptLocation": MOUNT}}
    layout = NodeLayout(tmp_path)
    config = {"stages": {"nodeBootstrapped": [script]}}
    executor = Executor(config, layout, IDENTITY, fetchers={"s3": _LoudDenial({})}, fetch_backoff_seconds=0)
    assert executor.boot().exit_code == EXIT_TERMINATE
    longest = max(len(line) for line in layout.executor_log.read_bytes().splitlines())
    assert longest < 4 * 1024
    sink = ListSink()
    Shipper(layout, SHIPPER_IDENTITY, sink).run(once=True)
    reports = [json.loads(message) for message in sink.messages]
    said = [(r["script"], r["outcome"], r["on_error"]) for r in reports]
    assert said == [("mount-fsx", "failed", "TERMINATE")]
    assert "AccessDenied: AAAA" in reports[0]["log_tail"]
    assert reports[0]["log_tail"].endswith("... (2000014 characters in all)")
