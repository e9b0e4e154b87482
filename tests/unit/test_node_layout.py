"""Where lifecycle-action files live on a node (`node.layout`), names that could leave their folder refused,
and files written whole with PCS's modes."""

from __future__ import annotations

import os
import stat
from pathlib import Path

import pytest

from lifeguard.node.layout import (
    DIR_MODE,
    FILE_MODE,
    LOG_TAIL_BYTES,
    NodeLayout,
    UnsafeNameError,
    atomic_write,
    ensure_dir,
    output_tail,
)


def test_paths_follow_pcss_layout_and_names_keep_their_spaces(tmp_path: Path) -> None:
    layout = NodeLayout(tmp_path)
    actions = tmp_path / "var/log/amazon/pcs/lifecycle/actions"
    assert layout.executor_log == actions / "executor.log"
    assert layout.script_log("nodeReady", "mount fsx") == actions / "nodeReady" / "mount fsx.log"
    assert layout.cached_script("nodeBootstrapped", "a b") == (
        tmp_path / "etc/amazon/pcs/lifecycle/actions/config/scripts/nodeBootstrapped/a b"
    )


@pytest.mark.parametrize("name", ["", ".", "..", "../x", "a/b", "/etc/passwd", "a\0b"])
def test_a_name_that_could_leave_its_folder_is_refused(tmp_path: Path, name: str) -> None:
    layout = NodeLayout(tmp_path)
    with pytest.raises(UnsafeNameError):
        layout.cached_script("nodeReady", name)
    with pytest.raises(UnsafeNameError):
        layout.stage_dir(name)


def test_a_log_name_of_dot_dot_stays_in_its_folder(tmp_path: Path) -> None:
    # `..` + `.log` is an ordinary file name: the log of a script named `..` cannot escape.
    assert NodeLayout(tmp_path).script_log("nodeReady", "..").parent.name == "nodeReady"


def test_atomic_write_replaces_the_file_whole_with_its_mode_and_leaves_no_temp_file(tmp_path: Path) -> None:
    target = tmp_path / "deep" / "er" / "state.json"
    atomic_write(target, b"first", 0o600)
    atomic_write(target, b"second", FILE_MODE)
    assert target.read_bytes() == b"second"
    assert stat.S_IMODE(target.stat().st_mode) == FILE_MODE
    assert stat.S_IMODE(target.parent.stat().st_mode) == DIR_MODE
    assert sorted(p.name for p in target.parent.iterdir()) == ["state.json"]


def test_a_failed_write_keeps_the_old_file_and_cleans_up(tmp_path: Path) -> None:
    target = tmp_path / "state.json"
    atomic_write(target, b"old", FILE_MODE)
    with pytest.raises(TypeError):
        atomic_write(target, "not bytes", FILE_MODE)  # type: ignore[arg-type]
    assert target.read_bytes() == b"old"
    assert [p.name for p in tmp_path.iterdir()] == ["state.json"]


def test_ensure_dir_sets_the_folder_mode_even_on_an_existing_folder(tmp_path: Path) -> None:
    folder = tmp_path / "x"
    folder.mkdir(mode=0o777)
    assert ensure_dir(folder) == folder
    assert stat.S_IMODE(folder.stat().st_mode) == DIR_MODE


def test_ensure_dir_gives_every_folder_it_makes_the_mode_whatever_the_umask(tmp_path: Path) -> None:
    """Under umask 000 the parents of the script cache must not be world-writable: anyone could swap the
    cached script root runs on the next reboot."""
    previous = os.umask(0)
    try:
        ensure_dir(tmp_path / "etc" / "amazon" / "cache")
    finally:
        os.umask(previous)
    for folder in ("etc", "etc/amazon", "etc/amazon/cache"):
        assert stat.S_IMODE((tmp_path / folder).stat().st_mode) == DIR_MODE, folder
    (tmp_path / "opt").mkdir(mode=0o755)
    os.chmod(tmp_path / "opt", 0o755)
    ensure_dir(tmp_path / "opt" / "lifeguard")
    assert stat.S_IMODE((tmp_path / "opt").stat().st_mode) == 0o755  # a folder it did not make is left


def test_a_run_s_output_is_cut_to_its_last_4_kib_of_utf8_once_for_node_and_lambdas() -> None:
    assert output_tail(b"short\n") == "short\n"
    assert output_tail("short") == "short"
    long = ("x" * 5000 + "END").encode()
    assert output_tail(long) == ("x" * 5000 + "END")[-LOG_TAIL_BYTES:]
    # A character cut in two at the start is dropped, not half-kept; bytes that are not UTF-8 read as U+FFFD.
    euro = ("€" * 2000).encode()  # 3 bytes each: 4096 is not a multiple of 3
    tail = output_tail(euro)
    assert set(tail) == {"€"}
    assert len(tail.encode()) <= LOG_TAIL_BYTES
    assert output_tail(b"ok \xff\n") == "ok \ufffd\n"
