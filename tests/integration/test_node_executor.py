"""`lifeguard-node boot` reproduces every observation of the article, against moto's S3 over HTTP."""

from __future__ import annotations

import dataclasses
import json
import os
import re
import shutil
import signal
import socket
import stat
import subprocess
import sys
import time
from datetime import datetime
from pathlib import Path
from typing import Any

import pytest

from lifeguard.node.layout import NodeLayout
from tests.integration.conftest import DISK_FULL_NODE, LIFEGUARD_NODE, Node

pytestmark = pytest.mark.integration

RECORD_LINE = (
    r"\d{{4}}-\d\d-\d\dT\d\d:\d\d:\d\dZ label={label} first_boot={first} node=lca-static-1 cng=lca-static"
)


def messages(node: Node, message: str) -> list[dict[str, Any]]:
    return [record for record in node.executor_records() if record["message"] == message]


# The article's bootstrap.log line (PCS's bootstrap agent's, for a stage that ended on a failure).
BOOTSTRAP_LINE = (
    r"\[\d{{4}}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{{3}}\+00:00\] - /opt/aws/pcs/bin/pcs_bootstrap_finalize\.sh: "
    r"WARN: Lifecycle execute completed with exit {exit} for stage {stage}\n"
)


def bootstrap_log(node: Node) -> str:
    path = node.root / "var/log/amazon/pcs/bootstrap.log"
    return path.read_text() if path.exists() else ""


def blocks(log: str, name: str) -> list[tuple[str, str, str]]:
    """(args, output, exit) of each start…end block of a script log, checking the markers' exact form."""
    found = re.findall(
        rf"^\[start {re.escape(name)} args=(\[[^\n]*\]) @ \d+\]\n"
        rf"(.*?)\[end {re.escape(name)} exit=(-?\d+) @ \d+\]\n",
        log,
        re.MULTILINE | re.DOTALL,
    )
    assert "".join(f"{a}{o}{e}" for a, o, e in found), f"no complete block in {log!r}"
    return found


def test_first_boot_then_reboot_runs_every_boot_scripts_again_from_the_cache(node: Node) -> None:
    config = node.config("article-first-boot-every-boot")
    first = node.boot(config)
    assert first.returncode == 0, first.stderr
    ready_log = node.actions / "nodeReady" / "ready-check.log"
    ready_mtime = ready_log.stat().st_mtime_ns
    time.sleep(0.05)
    second = node.boot(config)
    assert second.returncode == 0, second.stderr

    lines = node.record_file.read_text().splitlines()
    assert len(lines) == 3
    assert re.fullmatch(RECORD_LINE.format(label="bootstrapped-first-boot-only", first=1), lines[0])
    assert re.fullmatch(RECORD_LINE.format(label="bootstrapped-every-boot", first=1), lines[1])
    assert re.fullmatch(RECORD_LINE.format(label="bootstrapped-every-boot", first=0), lines[2])

    every = blocks(node.script_log("nodeBootstrapped", "record-every-boot"), "record-every-boot")
    assert every == [('["bootstrapped-every-boot"]', "recorded bootstrapped-every-boot\n", "0")] * 2
    first_only = blocks(node.script_log("nodeBootstrapped", "record-first-boot"), "record-first-boot")
    assert first_only == [
        ('["bootstrapped-first-boot-only"]', "recorded bootstrapped-first-boot-only\n", "0")
    ]
    assert len(blocks(ready_log.read_text(), "ready-check")) == 1
    assert ready_log.stat().st_mtime_ns == ready_mtime  # FIRST_BOOT_ONLY (omitted) was not re-run

    reuse = messages(node, "Reusing cached script (CACHE_ONCE)")
    assert [(r["script"], r["stage"], r["level"]) for r in reuse] == [
        ("record-every-boot", "nodeBootstrapped", "INFO")
    ]
    # The article's record, field by field in its order: timestamp, level, message, script, stage.
    assert list(reuse[0])[:5] == ["timestamp", "level", "message", "script", "stage"]
    fetched = [r["script"] for r in messages(node, "fetching script")]
    assert fetched == ["record-first-boot", "record-every-boot", "ready-check"]  # none on the reboot
    completed = [(r["script"], r["boot"]) for r in messages(node, "script completed")]
    assert completed == [
        ("record-first-boot", 1),
        ("record-every-boot", 1),
        ("ready-check", 1),
        ("record-every-boot", 2),
    ]
    assert (
        node.root / "etc/amazon/pcs/lifecycle/actions/config/scripts/nodeBootstrapped/record-every-boot"
    ).exists()


def test_logs_are_laid_out_with_pcs_permissions(node: Node) -> None:
    assert node.boot(node.config("article-first-boot-every-boot")).returncode == 0
    mode = lambda path: stat.S_IMODE(path.stat().st_mode)  # noqa: E731
    assert mode(node.actions / "executor.log") == 0o644
    assert mode(node.actions / "nodeBootstrapped") == 0o750
    assert mode(node.actions / "nodeReady") == 0o750
    assert mode(node.actions / "nodeBootstrapped" / "record-first-boot.log") == 0o640
    assert sorted(p.name for p in (node.actions / "nodeBootstrapped").iterdir()) == [
        "record-every-boot.log",
        "record-first-boot.log",
    ]
    record = node.executor_records()[2]
    assert re.fullmatch(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{6}Z", record["timestamp"])
    # DESIGN: every record carries at least these (a boot's own records are of no stage or script: null).
    for each in node.executor_records():
        assert {"timestamp", "level", "message", "stage", "script"} <= set(each), each
    [started] = messages(node, "boot started")
    assert (started["stage"], started["script"]) == (None, None)


@pytest.mark.parametrize("umask", [0o077, 0o002])
def test_the_logs_modes_are_pcss_whatever_the_umask(node: Node, umask: int) -> None:
    """The PCS agent's service may run under any umask (a hardened AMI's 077): the folders and logs are
    laid out as the article shows them all the same, neither tighter (the shipper reads them) nor looser."""
    was = os.umask(umask)
    try:
        assert node.boot(node.config("article-first-boot-every-boot")).returncode == 0
    finally:
        os.umask(was)
    mode = lambda path: stat.S_IMODE(path.stat().st_mode)  # noqa: E731
    assert mode(node.actions / "executor.log") == 0o644
    assert mode(node.actions / "nodeBootstrapped") == 0o750
    assert mode(node.actions / "nodeBootstrapped" / "record-first-boot.log") == 0o640
    made = [node.root / "var" / "log" / "amazon", *(node.root / "var" / "log" / "amazon").rglob("*")]
    assert {str(p): oct(mode(p)) for p in made if p.is_dir() and mode(p) != 0o750} == {}


def test_a_script_log_left_with_another_mode_is_given_pcss(node: Node) -> None:
    stage = node.actions / "nodeBootstrapped"
    stage.mkdir(parents=True)
    log = stage / "record-first-boot.log"
    log.write_text("an earlier boot's\n")
    log.chmod(0o666)
    assert node.boot(node.config("article-first-boot-every-boot")).returncode == 0
    assert stat.S_IMODE(log.stat().st_mode) == 0o640
    assert log.read_text().startswith("an earlier boot's\n")  # appended to, as PCS's are


def test_stop_sequence_skips_rest_of_stage_but_runs_next_stage(node: Node) -> None:
    result = node.boot(node.config("article-stop-sequence"))
    assert result.returncode == 3, result.stderr
    log = node.script_log("nodeBootstrapped", "fail-stop-sequence")
    assert blocks(log, "fail-stop-sequence") == [("[]", "intentional failure for verification\n", "1")]
    assert re.search(r"\[end fail-stop-sequence exit=1 @ \d+\]\n\Z", log)
    assert not node.record_file.exists()  # record-after-fail did not run
    assert not (node.actions / "nodeBootstrapped" / "record-after-fail.log").exists()
    assert len(blocks(node.script_log("nodeReady", "ready-check"), "ready-check")) == 1
    [failure] = messages(node, "lifecycle script failed; stopping remaining scripts")
    assert (failure["level"], failure["stage"], failure["script"], failure["on_error"]) == (
        "ERROR",
        "nodeBootstrapped",
        "fail-stop-sequence",
        "StopSequence",
    )
    # The article's record, word for word, its fields in PCS's order (a grep copied from it finds it).
    assert (
        failure["error"]
        == "script 'fail-stop-sequence' failed with exit status ExitStatus(unix_wait_status(256))"
    )
    assert list(failure)[:7] == ["timestamp", "level", "message", "stage", "script", "on_error", "error"]
    assert (
        '"script":"fail-stop-sequence","on_error":"StopSequence","error":"script '
        in (node.actions / "executor.log").read_text()
    )
    [skipped] = messages(node, "script skipped")
    assert skipped["script"] == "record-after-fail"
    # bootstrap.log says the stage's exit as the article's node did (PCS's bootstrap agent, word for word).
    assert re.fullmatch(BOOTSTRAP_LINE.format(exit=3, stage="nodeBootstrapped"), bootstrap_log(node))
    # The node joined: its next boot is a reboot.
    assert node.boot(node.config("article-stop-sequence")).returncode == 0
    assert "first_boot=0" not in node.script_log("nodeBootstrapped", "fail-stop-sequence")


def test_a_fifo_in_a_logs_place_neither_holds_the_boot_nor_is_written(node: Node) -> None:
    """A FIFO at bootstrap.log (a script or a hand may leave one; root runs the boot) held a failed boot
    for good, waiting for a reader: the line is said lost and the boot ends by its scripts. One at
    executor.log, before anything runs, is a root no node layout can be made in."""
    pcs = node.root / "var/log/amazon/pcs"
    pcs.mkdir(parents=True)
    os.mkfifo(pcs / "bootstrap.log")
    started = time.monotonic()
    result = node.boot(node.config("article-stop-sequence"))
    assert result.returncode == 3, result.stderr
    assert time.monotonic() - started < 30
    assert "bootstrap.log: not a regular file; its line for nodeBootstrapped is lost" in result.stderr
    assert stat.S_ISFIFO(os.lstat(pcs / "bootstrap.log").st_mode)
    other = dataclasses.replace(node, root=node.root.parent / "other-root")
    other.actions.mkdir(parents=True)
    os.mkfifo(other.actions / "executor.log")
    done = other.boot(other.config("article-stop-sequence"))
    assert done.returncode == 64, done.stderr
    assert "no node layout can be made there" in done.stderr


def test_boot_json_is_the_boot_and_each_run_for_programs(node: Node) -> None:
    result = node.boot(node.config("article-stop-sequence"), "--json")
    assert result.returncode == 3, result.stderr
    document = json.loads(result.stdout)
    assert (document["boot"], document["first_boot"], document["exit_code"]) == (1, True, 3)
    runs = [(r["stage"], r["script"], r["outcome"], r["exit_code"]) for r in document["runs"]]
    assert runs == [
        ("nodeBootstrapped", "fail-stop-sequence", "failed", 1),
        ("nodeBootstrapped", "record-after-fail", "skipped", None),
        ("nodeReady", "ready-check", "succeeded", 0),
    ]
    failed = document["runs"][0]
    assert failed["on_error"] == "STOP_SEQUENCE"
    assert len(failed["script_sha256"]) == 64
    assert failed["log_span"][0] < failed["log_span"][1]
    # In plain words; executor.log keeps PCS's (`ExitStatus(unix_wait_status(256))`) for the shipper.
    assert failed["error"] == "script 'fail-stop-sequence' failed with exit status 1"
    assert "unix_wait_status(256)" in json.dumps(node.executor_records())


def test_terminate_stops_everything_and_node_ready_never_runs(node: Node) -> None:
    result = node.boot(node.config("article-terminate"))
    assert result.returncode == 4, result.stderr
    assert blocks(node.script_log("nodeBootstrapped", "fail-terminate"), "fail-terminate")[0][2] == "1"
    assert not node.record_file.exists()
    assert not (node.actions / "nodeReady").exists()
    [failure] = messages(node, "lifecycle script failed; terminating node")
    assert (failure["on_error"], failure["exit_code"]) == ("Terminate", 1)
    assert re.fullmatch(BOOTSTRAP_LINE.format(exit=4, stage="nodeBootstrapped"), bootstrap_log(node))
    assert [r["script"] for r in messages(node, "script skipped")] == ["record-after-fail", "ready-check"]
    # Every later boot on the same root is a reboot (DESIGN), after a TERMINATE boot too: PCS replaces
    # that node with another instance, whose disk is another root.
    again = node.boot(node.config("article-terminate"))
    assert again.returncode == 0  # its TERMINATE script is FIRST_BOOT_ONLY: a reboot does not run it
    assert [r["first_boot"] for r in messages(node, "boot started")] == [True, False]


def _marker(log: str, name: str, which: str) -> int:
    """The epoch second of the first `[start NAME …]` or `[end NAME …]` marker of a script log."""
    found = re.search(rf"^\[{which} {re.escape(name)} [^\n]*@ (\d+)\]$", log, re.MULTILINE)
    assert found, log
    return int(found.group(1))


@pytest.mark.parametrize(("ready_after", "moved"), [(None, 0), ("27", 27), ("-5", 0), ("soon", 0)])
def test_the_twins_node_clock_moves_on_between_the_stages_as_slurmd_starts(
    node: Node, ready_after: str | None, moved: int
) -> None:
    # The twin's nodes only: PCS logs the article's node ACTIVE 25 s after nodeBootstrapped is over and runs
    # its nodeReady check 2 s after that; the twin's node boots both stages at once, its clock moved on.
    if ready_after is not None:
        node.env = {**node.env, "LIFEGUARD_SIM_READY_AFTER_SECONDS": ready_after}
    assert node.boot(node.config("article-stop-sequence")).returncode == 3
    bootstrapped = _marker(
        node.script_log("nodeBootstrapped", "fail-stop-sequence"), "fail-stop-sequence", "end"
    )
    ready = _marker(node.script_log("nodeReady", "ready-check"), "ready-check", "start")
    assert moved <= ready - bootstrapped <= moved + 2
    stamps = {r["stage"]: r["timestamp"] for r in node.executor_records() if "stage" in r}
    gap = datetime.fromisoformat(stamps["nodeReady"]) - datetime.fromisoformat(stamps["nodeBootstrapped"])
    assert moved <= gap.total_seconds() <= moved + 2


def test_a_node_terminated_in_node_bootstrapped_never_gets_to_slurmd_on_the_twins_clock(node: Node) -> None:
    node.env = {**node.env, "LIFEGUARD_SIM_READY_AFTER_SECONDS": "27"}
    assert node.boot(node.config("article-terminate")).returncode == 4
    records = node.executor_records()
    spread = datetime.fromisoformat(records[-1]["timestamp"]) - datetime.fromisoformat(
        records[0]["timestamp"]
    )
    # Its nodeReady scripts skipped at once, on the clock as it was: not 27 s on. The whole boot is in the
    # spread (its script fetched from the local S3), which a loaded machine took 2.2 s over.
    assert spread.total_seconds() < 27 / 2


def test_a_failure_is_one_even_when_the_boot_was_started_with_sigchld_ignored(node: Node) -> None:
    """An ignored SIGCHLD is kept across exec: a boot started so would otherwise have each script reaped by
    the kernel, its exit status lost."""
    ignoring = [
        sys.executable,
        "-c",
        "import os, signal, sys; signal.signal(signal.SIGCHLD, signal.SIG_IGN); "
        "os.execv(sys.argv[1], sys.argv[1:])",
        str(LIFEGUARD_NODE),
    ]
    result = node.boot(node.config("article-terminate"), command=ignoring)
    assert result.returncode == 4, result.stderr
    [failure] = messages(node, "lifecycle script failed; terminating node")
    assert (failure["on_error"], failure["exit_code"]) == ("Terminate", 1)
    assert re.fullmatch(BOOTSTRAP_LINE.format(exit=4, stage="nodeBootstrapped"), bootstrap_log(node))


@pytest.mark.parametrize("damage", ['{"completed_boots": Infinity}', '{"completed_boots": -1}', "[]"])
def test_a_damaged_boot_state_makes_a_first_boot_not_a_crash(node: Node, damage: str) -> None:
    """The boot state is read as the executor writes it; anything else (damaged, or left by something
    else) makes the boot a first boot, as a missing file does."""
    state = NodeLayout(node.root).boot_state
    state.parent.mkdir(parents=True, exist_ok=True)
    state.write_text(damage)
    result = node.boot(node.config("article-first-boot-every-boot"))
    assert result.returncode == 0, result.stderr
    [started] = messages(node, "boot started")
    assert (started["boot"], started["first_boot"]) == (1, True)


@pytest.mark.parametrize("on_error", ["CONTINUE", "TERMINATE"])
def test_a_script_whose_log_cannot_be_written_fails_by_its_on_error_not_the_boot(
    node: Node, on_error: str
) -> None:
    """A directory left where a script's log goes (or a full disk) makes that script fail, judged by its
    onError as PCS would judge any failure, instead of an internal error that skips the rest."""
    config = node.config("article-terminate")
    config["stages"]["nodeBootstrapped"][0]["onError"] = on_error
    (node.actions / "nodeBootstrapped" / "fail-terminate.log").mkdir(parents=True)
    result = node.boot(config)
    assert result.returncode == (0 if on_error == "CONTINUE" else 4), result.stderr
    [failure] = [
        r for r in node.executor_records() if r.get("script") == "fail-terminate" and "failed" in r["message"]
    ]
    assert failure["exit_code"] == 126
    assert "its log cannot be written: Is a directory" in failure["error"]
    ran_after = (node.actions / "nodeReady" / "ready-check.log").exists()
    assert ran_after == (on_error == "CONTINUE")


def test_a_symlink_where_a_scripts_log_goes_is_not_followed(node: Node) -> None:
    """A link planted in a script log's place had the script's output appended to its target, and the
    target's mode changed to the log's: the script fails by its onError, as with any log it cannot write."""
    config = node.config("article-terminate")
    config["stages"]["nodeBootstrapped"][0]["onError"] = "CONTINUE"
    target = node.root.parent / "not-a-log"
    target.write_text("kept\n")
    target.chmod(0o600)
    (node.actions / "nodeBootstrapped").mkdir(parents=True)
    (node.actions / "nodeBootstrapped" / "fail-terminate.log").symlink_to(target)
    result = node.boot(config)
    assert result.returncode == 0, result.stderr
    [failure] = [
        r for r in node.executor_records() if r.get("script") == "fail-terminate" and "failed" in r["message"]
    ]
    assert (failure["exit_code"], "its log cannot be written" in failure["error"]) == (126, True)
    assert target.read_text() == "kept\n"
    assert target.stat().st_mode & 0o777 == 0o600


def test_a_full_disk_fails_the_script_that_filled_it_and_the_boot_goes_on(node: Node) -> None:
    """A script that fills the disk (here: the boot's file-size limit) fails, by its own exit status (its
    writer killed by SIGXFSZ, as on a full disk it gets ENOSPC); its CONTINUE holds, and the next stage
    runs."""
    node.put_script("scripts/fill.sh", "#!/bin/bash\nhead -c 3000000 /dev/zero\n")
    config = node.config("article-terminate")
    fill = node.script_config(
        {
            "nodeBootstrapped": [
                {"name": "fill", "scriptSource": {"scriptLocation": "scripts/fill.sh"}, "onError": "CONTINUE"}
            ]
        }
    )
    config["stages"]["nodeBootstrapped"] = fill["stages"]["nodeBootstrapped"]
    result = node.boot(config, command=DISK_FULL_NODE)
    assert result.returncode == 0, result.stderr
    [failure] = messages(node, "lifecycle script failed; continuing")
    assert (failure["script"], failure["exit_code"]) == ("fill", 128 + signal.SIGXFSZ)
    assert failure["error"] == "script 'fill' was killed by signal 25 (SIGXFSZ)"
    assert (node.actions / "nodeReady" / "ready-check.log").exists()


def test_continue_records_the_failure_and_goes_on(node: Node) -> None:
    config = node.config("article-terminate")
    config["stages"]["nodeBootstrapped"][0]["onError"] = "CONTINUE"
    result = node.boot(config)
    assert result.returncode == 0, result.stderr
    assert re.fullmatch(RECORD_LINE.format(label="after-fail", first=1), node.record_file.read_text().strip())
    [failure] = messages(node, "lifecycle script failed; continuing")
    assert (failure["level"], failure["on_error"]) == ("WARN", "Continue")
    assert (node.actions / "nodeReady" / "ready-check.log").exists()
    assert bootstrap_log(node) == ""  # the stages completed: no warning


def test_checksum_mismatch_is_a_failed_download_handled_by_on_error(node: Node) -> None:
    config = node.config("article-first-boot-every-boot")
    config["stages"]["nodeBootstrapped"][0]["scriptSource"]["checksum"] = "0" * 64
    result = node.boot(config)
    assert result.returncode == 4
    assert not (node.actions / "nodeBootstrapped" / "record-first-boot.log").exists()  # never ran
    [failure] = messages(node, "lifecycle script failed; terminating node")
    assert "checksum mismatch" in failure["error"]
    assert "after 3 attempts" in failure["error"]
    assert failure["exit_code"] is None
    assert len(messages(node, "script download failed; retrying")) == 2


def test_a_correct_checksum_passes(node: Node) -> None:
    import hashlib

    from tests.conftest import ARTICLE_SCRIPTS

    config = node.config("article-first-boot-every-boot")
    digest = hashlib.sha256((ARTICLE_SCRIPTS / "record-boot.sh").read_bytes()).hexdigest()
    config["stages"]["nodeBootstrapped"][0]["scriptSource"]["checksum"] = digest.upper()
    assert node.boot(config).returncode == 0


def test_refresh_on_reboot_with_the_object_deleted_fails_without_cache_fallback(node: Node) -> None:
    config = node.config("article-first-boot-every-boot")
    config["scriptCachingPolicy"] = "REFRESH_ON_REBOOT"
    assert node.boot(config).returncode == 0
    node.s3.delete_object(Bucket=node.bucket, Key="scripts/record-boot.sh")
    result = node.boot(config)
    assert result.returncode == 4  # record-every-boot is on the default TERMINATE
    [failure] = messages(node, "lifecycle script failed; terminating node")
    assert failure["script"] == "record-every-boot"
    assert "NoSuchKey" in failure["error"]
    assert len(node.record_file.read_text().splitlines()) == 2  # nothing ran on the reboot
    assert messages(node, "Reusing cached script (CACHE_ONCE)") == []


def test_cache_once_keeps_running_the_first_boot_copy_after_the_object_changed(node: Node) -> None:
    config = node.config("article-first-boot-every-boot")
    assert node.boot(config).returncode == 0
    node.put_script("scripts/record-boot.sh", "#!/bin/bash\necho changed-in-place\n")
    assert node.boot(config).returncode == 0
    last = blocks(node.script_log("nodeBootstrapped", "record-every-boot"), "record-every-boot")[-1]
    assert last[1] == "recorded bootstrapped-every-boot\n"
    # REFRESH_ON_REBOOT on the same change runs the new content.
    config["scriptCachingPolicy"] = "REFRESH_ON_REBOOT"
    assert node.boot(config).returncode == 0
    last = blocks(node.script_log("nodeBootstrapped", "record-every-boot"), "record-every-boot")[-1]
    assert last[1] == "changed-in-place\n"


def test_a_cached_copy_changed_on_disk_is_fetched_again_when_a_checksum_pins_it(node: Node) -> None:
    """A checksum says what runs: a CACHE_ONCE copy changed since its download (by an earlier script, a
    package, a bad disk) is never run as root; the script is fetched again and checked."""
    import hashlib

    from tests.conftest import ARTICLE_SCRIPTS

    config = node.config("article-first-boot-every-boot")
    digest = hashlib.sha256((ARTICLE_SCRIPTS / "record-boot.sh").read_bytes()).hexdigest()
    for script in config["stages"]["nodeBootstrapped"]:
        script["scriptSource"]["checksum"] = digest
    assert node.boot(config).returncode == 0
    planted = node.root / "planted"
    cached = node.root / "etc/amazon/pcs/lifecycle/actions/config/scripts/nodeBootstrapped/record-every-boot"
    cached.write_text(f"#!/bin/bash\ntouch {planted}\n")
    assert node.boot(config).returncode == 0
    assert not planted.exists()
    last = blocks(node.script_log("nodeBootstrapped", "record-every-boot"), "record-every-boot")[-1]
    assert last[1] == "recorded bootstrapped-every-boot\n"
    assert hashlib.sha256(cached.read_bytes()).hexdigest() == digest  # the copy fetched again
    assert messages(node, "Reusing cached script (CACHE_ONCE)") == []


def test_a_boot_stopped_while_a_script_runs_records_that_script_failed_with_it(node: Node) -> None:
    """systemd stopping the boot at a shutdown, or a person: the running script is stopped with it, and its
    end marker and its record say so, or the script that held the node is never reported."""
    node.put_script("scripts/hang.sh", "#!/bin/bash\necho mounting /fsx\nsleep 60\n")
    config = node.script_config(
        {"nodeBootstrapped": [{"name": "mount-fsx", "scriptSource": {"scriptLocation": "scripts/hang.sh"}}]}
    )
    path = node.root.parent / "hang.json"
    path.write_text(json.dumps(config))
    command = [str(LIFEGUARD_NODE), "boot", "--config", str(path), "--root", str(node.root)]
    boot = subprocess.Popen(command, env=node.env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    log = node.actions / "nodeBootstrapped" / "mount-fsx.log"
    deadline = time.monotonic() + 30
    while not (log.exists() and b"mounting" in log.read_bytes()) and time.monotonic() < deadline:
        time.sleep(0.05)
    boot.send_signal(signal.SIGTERM)
    assert boot.wait(timeout=30) == 128 + signal.SIGTERM
    [failure] = messages(node, "lifecycle script failed; boot stopped")
    assert failure["script"] == "mount-fsx"
    assert failure["exit_code"] == 143
    assert failure["error"] == "script 'mount-fsx' was stopped with the boot (signal 15)"
    assert blocks(node.script_log("nodeBootstrapped", "mount-fsx"), "mount-fsx") == [
        ("[]", "mounting /fsx\n", "143")
    ]


def test_a_boot_stopped_while_a_script_is_fetched_records_that_script_failed_with_it(node: Node) -> None:
    """A fetch may hold the boot for minutes (three tries of up to 70 s): stopped then, the script it was
    fetching is recorded as failed with the boot, or the node goes with nothing to report."""
    with socket.socket() as silent:  # the node's proxy: takes the connection, never answers its CONNECT
        silent.bind(("127.0.0.1", 0))
        silent.listen()
        location = "https://scripts.example.com/mount.sh"
        env = {**node.env, "https_proxy": f"http://127.0.0.1:{silent.getsockname()[1]}"}
        config = {
            "stages": {
                "nodeBootstrapped": [{"name": "mount-fsx", "scriptSource": {"scriptLocation": location}}]
            }
        }
        path = node.root.parent / "fetching.json"
        path.write_text(json.dumps(config))
        command = [str(LIFEGUARD_NODE), "boot", "--config", str(path), "--root", str(node.root)]
        boot = subprocess.Popen(command, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        deadline = time.monotonic() + 30
        fetching = lambda: (node.actions / "executor.log").exists() and messages(node, "fetching script")  # noqa: E731
        while not fetching() and time.monotonic() < deadline:
            time.sleep(0.05)
        boot.send_signal(signal.SIGTERM)
        assert boot.wait(timeout=30) == 128 + signal.SIGTERM
    [failure] = messages(node, "lifecycle script failed; boot stopped")
    assert (failure["script"], failure["level"], failure["exit_code"]) == ("mount-fsx", "ERROR", None)
    assert failure["error"] == "script 'mount-fsx' was stopped with the boot while it was fetched (signal 15)"


@pytest.mark.parametrize("sent", ["TERM", "HUP"])
def test_a_script_that_signals_the_boot_stops_it_and_is_recorded_as_its_stopper(
    node: Node, sent: str
) -> None:
    """A CONTINUE script that signals its parent, the executor: the boot stops (as at a shutdown), and its
    record says the boot stopped, not that it went on; the next script never ran."""
    node.put_script("scripts/kp.sh", f"#!/bin/bash\nkill -{sent} $PPID\nsleep 5\n")
    node.put_script("scripts/next.sh", "#!/bin/bash\necho next ran\n")
    config = node.script_config(
        {
            "nodeBootstrapped": [
                {"name": "kp", "scriptSource": {"scriptLocation": "scripts/kp.sh"}, "onError": "CONTINUE"},
                {"name": "next", "scriptSource": {"scriptLocation": "scripts/next.sh"}},
            ]
        }
    )
    result = node.boot(config)
    assert result.returncode == 128 + getattr(signal, f"SIG{sent}")
    [failure] = messages(node, "lifecycle script failed; boot stopped")
    assert (failure["script"], failure["level"]) == ("kp", "ERROR")
    assert messages(node, "lifecycle script failed; continuing") == []
    assert not (node.actions / "nodeBootstrapped" / "next.log").exists()


def test_a_script_over_its_timeout_fails_and_its_children_are_killed(node: Node) -> None:
    marker = node.root / "child-survived"
    node.put_script("scripts/slow.sh", f"#!/bin/bash\n(sleep 3; touch {marker}) &\nsleep 30\n")
    config = node.script_config(
        {"nodeBootstrapped": [{"name": "slow", "scriptSource": {"scriptLocation": "scripts/slow.sh"}}]}
    )
    started = time.monotonic()
    result = node.boot(config, "--script-timeout", "1")
    assert result.returncode == 4
    assert time.monotonic() - started < 15
    [failure] = messages(node, "lifecycle script failed; terminating node")
    assert "timed out after 1 s" in failure["error"]
    assert blocks(node.script_log("nodeBootstrapped", "slow"), "slow")[0][2] == "124"
    time.sleep(3.5)
    assert not marker.exists()


def test_a_script_killed_by_a_signal_fails(node: Node) -> None:
    node.put_script("scripts/killed.sh", "#!/bin/bash\necho before\nkill -9 $$\necho after\n")
    config = node.script_config(
        {
            "nodeBootstrapped": [
                {
                    "name": "killed",
                    "scriptSource": {"scriptLocation": "scripts/killed.sh"},
                    "onError": "STOP_SEQUENCE",
                }
            ]
        }
    )
    assert node.boot(config).returncode == 3
    [failure] = messages(node, "lifecycle script failed; stopping remaining scripts")
    assert "killed by signal 9 (SIGKILL)" in failure["error"]
    assert blocks(node.script_log("nodeBootstrapped", "killed"), "killed") == [("[]", "before\n", "137")]


def test_names_with_spaces_keep_them(node: Node) -> None:
    config = node.script_config(
        {
            "nodeBootstrapped": [
                {
                    "name": "record every boot",
                    "arguments": ["spaced name"],
                    "scriptSource": {"scriptLocation": "scripts/record-boot.sh"},
                }
            ]
        }
    )
    assert node.boot(config).returncode == 0
    log = (node.actions / "nodeBootstrapped" / "record every boot.log").read_text()
    assert blocks(log, "record every boot") == [('["spaced name"]', "recorded spaced name\n", "0")]


@pytest.mark.parametrize("name", ["../../../etc/escaped", "a/b", "..", "nul\u0000byte", "-leading-dash"])
def test_hostile_names_are_refused_before_anything_runs(node: Node, name: str) -> None:
    config = node.config("article-first-boot-every-boot")
    config["stages"]["nodeBootstrapped"][0]["name"] = name
    result = node.boot(config)
    assert result.returncode == 64
    assert "stages.nodeBootstrapped[0].name" in result.stderr
    assert "nothing was run" in result.stderr
    assert not (node.root / "var/log").exists()
    assert not (node.root.parent / "etc").exists()


def test_an_invalid_config_lists_every_problem_and_runs_nothing(node: Node) -> None:
    config = node.config("article-terminate")
    config["stages"]["nodeBootstrapped"][0]["onError"] = "TERMINATED"
    config["stages"]["nodeReady"][0]["executionPolicy"] = "ALWAYS"
    result = node.boot(config)
    assert result.returncode == 64
    assert "stages.nodeBootstrapped[0].onError: 'TERMINATED' is not one of" in result.stderr
    assert "stages.nodeReady[0].executionPolicy: 'ALWAYS' is not one of" in result.stderr
    assert not node.actions.exists()


def test_bad_usage_exits_64(node: Node) -> None:
    from tests.integration.conftest import LIFEGUARD_NODE

    result = subprocess.run(
        [str(LIFEGUARD_NODE), "boot", "--root", str(node.root)], capture_output=True, text=True, check=False
    )
    assert result.returncode == 64
    assert "--config" in result.stderr


@pytest.mark.parametrize("columns", ["80", "120"])
def test_the_boots_report_fits_the_width_its_errors_under_their_run(node: Node, columns: str) -> None:
    """A script that cannot be fetched has a long error: beside its run it would make a line of 150-180
    characters; it goes under the run, wrapped between words, to COLUMNS."""
    config = node.config("article-terminate")
    for script in config["stages"]["nodeBootstrapped"]:
        script["scriptSource"]["scriptLocation"] = f"s3://{node.bucket}/no/such/key-{script['name']}.sh"
    node.env.update(COLUMNS=columns, LIFEGUARD_FETCH_BACKOFF_SECONDS="0.001")
    result = node.boot(config)
    assert result.returncode == 4, result.stderr
    lines = result.stdout.splitlines()
    assert max(len(line) for line in lines) <= int(columns)
    assert any("fail-terminate" in line and "onError TERMINATE" in line for line in lines)
    notes = " ".join(line.strip() for line in lines if line.startswith(" " * 6))
    assert "no/such/key-" in notes  # the error is all there, only wrapped


def test_a_root_that_cannot_hold_a_node_layout_is_bad_usage(node: Node) -> None:
    """A file, or a root whose `var` is a file: one line naming --root, exit 64, not an internal error."""
    shutil.rmtree(node.root / "var", ignore_errors=True)
    node.root.mkdir(parents=True, exist_ok=True)
    (node.root / "var").write_text("not a directory")
    result = node.boot(node.config("article-first-boot-every-boot"))
    assert result.returncode == 64, result.stderr
    assert result.stderr.startswith(f"lifeguard-node: --root {node.root}: no node layout can be made there: ")
    assert len(result.stderr.splitlines()) == 1
    assert not node.record_file.exists()


@pytest.mark.parametrize(
    ("args", "env", "said"),
    [
        (("--script-timeout", "nan"), {}, "the script timeout must be from 0.001 to 86400 seconds, not nan"),
        (("--script-timeout", "inf"), {}, "the script timeout must be from 0.001 to 86400 seconds, not inf"),
        (("--script-timeout", "-1"), {}, "the script timeout must be from 0.001 to 86400 seconds, not -1"),
        ((), {"LIFEGUARD_FETCH_BACKOFF_SECONDS": "nan"}, "the fetch backoff must be from 0 to 86400"),
    ],
)
def test_a_timeout_or_backoff_out_of_bounds_is_bad_usage_and_runs_nothing(
    node: Node, args: tuple[str, ...], env: dict[str, str], said: str
) -> None:
    """nan or inf would start a script the boot cannot wait for; a negative timeout fails every script."""
    node.env.update(env)
    result = node.boot(node.config("article-first-boot-every-boot"), *args)
    assert result.returncode == 64
    assert result.stderr.startswith(f"lifeguard-node: {said}")
    assert not node.record_file.exists()


def test_scripts_get_the_pcs_environment_and_their_arguments_exactly(node: Node) -> None:
    node.put_script(
        "scripts/show.sh",
        "#!/bin/bash\nprintf '<%s>\\n' \"$@\"\nenv | grep '^PCS_' | sort\n"
        'echo "EXTRA=$LIFEGUARD_TEST_EXTRA"\n',
    )
    arguments = ["a b", "", "$HOME", "--x='1'", "\u00e9t\u00e9", "*"]
    config = node.script_config(
        {
            "nodeBootstrapped": [
                {
                    "name": "show",
                    "arguments": arguments,
                    "scriptSource": {"scriptLocation": "scripts/show.sh"},
                }
            ]
        }
    )
    node.env["LIFEGUARD_TEST_EXTRA"] = "inherited"
    assert node.boot(config, "--cluster-name", "lca").returncode == 0
    [(args, output, code)] = blocks(node.script_log("nodeBootstrapped", "show"), "show")
    assert args == '["a b","","$HOME","--x=\'1\'","\u00e9t\u00e9","*"]'
    assert output == "".join(f"<{a}>\n" for a in arguments) + (
        "PCS_CLUSTER_ID=pcs_abc123de45\nPCS_CLUSTER_NAME=lca\nPCS_COMPUTE_NODE_GROUP_ID=pcs_abcdef01\n"
        "PCS_COMPUTE_NODE_GROUP_NAME=lca-static\nPCS_IS_FIRST_BOOT=1\nPCS_NODE_ID=lca-static-1\n"
        "EXTRA=inherited\n"
    )
    assert code == "0"


def _recorded_then(node: Node, script: dict[str, Any]) -> dict[str, Any]:
    """A nodeBootstrapped stage that records each boot (EVERY_BOOT, first_boot in the record file), then
    `script`."""
    record = {
        "name": "record",
        "arguments": ["x"],
        "executionPolicy": "EVERY_BOOT",
        "scriptSource": {"scriptLocation": "scripts/record-boot.sh"},
    }
    return node.script_config({"nodeBootstrapped": [record, script]})


def test_a_crash_mid_boot_makes_the_next_boot_a_reboot(node: Node) -> None:
    """The second script kills the executor itself: the boot never finishes, and the machine was not
    terminated. The next boot on the same disk is a reboot (DESIGN: every later boot on the same root),
    not the first boot again."""
    node.put_script("scripts/crash.sh", "#!/bin/bash\nkill -9 $PPID\nsleep 1\n")
    config = _recorded_then(node, {"name": "crash", "scriptSource": {"scriptLocation": "scripts/crash.sh"}})
    assert node.boot(config).returncode == -9
    config["stages"]["nodeBootstrapped"].pop()
    assert node.boot(config).returncode == 0
    assert node.boot(config).returncode == 0
    firsts = [line.split("first_boot=")[1][0] for line in node.record_file.read_text().splitlines()]
    assert firsts == ["1", "0", "0"]
    assert [r["boot"] for r in messages(node, "boot started")] == [1, 2, 3]


def test_a_first_boot_only_script_that_reboots_the_node_runs_once(node: Node) -> None:
    """A FIRST_BOOT_ONLY script that installs a driver and reboots (here: stops the boot as a shutdown
    does) ran again at every boot, each one a first boot: the node rebooted forever."""
    node.put_script(
        "scripts/install-and-reboot.sh", "#!/bin/bash\necho installed\nkill -TERM $PPID\nsleep 5\n"
    )
    config = _recorded_then(
        node,
        {
            "name": "install-and-reboot",
            "onError": "CONTINUE",
            "scriptSource": {"scriptLocation": "scripts/install-and-reboot.sh"},
        },
    )
    assert node.boot(config).returncode == 128 + signal.SIGTERM
    assert node.boot(config).returncode == 0
    assert node.boot(config).returncode == 0
    firsts = [line.split("first_boot=")[1][0] for line in node.record_file.read_text().splitlines()]
    assert firsts == ["1", "0", "0"]
    assert node.script_log("nodeBootstrapped", "install-and-reboot").count("[start install-and-reboot ") == 1


def test_output_without_a_final_newline_still_ends_with_the_marker_on_its_own_line(node: Node) -> None:
    node.put_script("scripts/partial.sh", "#!/bin/bash\nprintf 'no newline'\n")
    config = node.script_config(
        {"nodeReady": [{"name": "partial", "scriptSource": {"scriptLocation": "scripts/partial.sh"}}]}
    )
    assert node.boot(config).returncode == 0
    assert blocks(node.script_log("nodeReady", "partial"), "partial") == [("[]", "no newline\n", "0")]


def test_a_script_without_shebang_runs_under_bash(node: Node) -> None:
    node.put_script("scripts/plain.sh", "echo plain ${BASH_VERSION:+bash}\n")
    config = node.script_config(
        {"nodeReady": [{"name": "plain", "scriptSource": {"scriptLocation": "scripts/plain.sh"}}]}
    )
    assert node.boot(config).returncode == 0
    assert blocks(node.script_log("nodeReady", "plain"), "plain")[0][1] == "plain bash\n"


def test_runs_are_appended_and_never_leave_temp_files(node: Node) -> None:
    config = node.config("article-first-boot-every-boot")
    for _ in range(3):
        assert node.boot(config).returncode == 0
    cache = node.root / "etc/amazon/pcs/lifecycle/actions/config/scripts"
    leftovers = [p for p in cache.rglob("*") if p.name.startswith(".tmp-")]
    assert leftovers == []
    assert len(blocks(node.script_log("nodeBootstrapped", "record-every-boot"), "record-every-boot")) == 3
    assert os.path.getsize(node.actions / "nodeReady" / "ready-check.log") > 0


def test_an_argument_exec_cannot_pass_fails_that_script_by_its_on_error_not_the_boot(
    node: Node,
) -> None:
    """PCS's argument shape is any string of up to 256 characters, a NUL byte included, which exec cannot
    pass: that script cannot start, a failure judged by its onError (CONTINUE here: nodeReady runs), never
    an internal error that leaves the boot without its failure record."""
    node.put_script("scripts/ok.sh", "#!/bin/bash\necho fine\n")
    config = node.script_config(
        {
            "nodeBootstrapped": [
                {
                    "name": "with-nul",
                    "onError": "CONTINUE",
                    "arguments": ["x\u0000y"],
                    "scriptSource": {"scriptLocation": "scripts/ok.sh"},
                }
            ],
            "nodeReady": [{"name": "ready", "scriptSource": {"scriptLocation": "scripts/ok.sh"}}],
        }
    )
    result = node.boot(config)
    assert result.returncode == 0, result.stderr
    [failed] = [r for r in node.executor_records() if r.get("script") == "with-nul" and "error" in r]
    assert (failed["error"], failed["exit_code"]) == (
        "script 'with-nul' cannot be started: embedded null byte",
        126,
    )
    assert [r["script"] for r in node.executor_records() if r["message"] == "script completed"] == ["ready"]
    # Its log's block ends as any run's does: the shipper finds a whole block for the failure.
    block = ('["x\\u0000y"]', "", "126")
    assert blocks(node.script_log("nodeBootstrapped", "with-nul"), "with-nul") == [block]


def test_a_program_without_a_shebang_runs_itself_as_a_shell_would_run_it(node: Node) -> None:
    """An ELF file as the script (a compiled check): a shell execs it; run through bash it fails with 126."""
    node.put_script("scripts/true-binary", Path("/bin/true").read_bytes())
    compiled = {"name": "compiled", "scriptSource": {"scriptLocation": "scripts/true-binary"}}
    config = node.script_config({"nodeBootstrapped": [compiled]})
    result = node.boot(config)
    assert result.returncode == 0, result.stderr
    assert blocks(node.script_log("nodeBootstrapped", "compiled"), "compiled") == [("[]", "", "0")]


def test_a_config_nested_too_deep_to_read_is_bad_usage_not_an_internal_error(node: Node) -> None:
    path = node.root.parent / "nested.json"
    path.write_text("[" * 100_000 + "]" * 100_000)
    result = node.boot(path)
    assert result.returncode == 64, result.stderr
    assert "is not valid JSON" in result.stderr


@pytest.mark.parametrize("signum", [2, 15])
def test_stopping_the_boot_stops_the_script_it_is_running(node: Node, signum: int) -> None:
    """Ctrl-C, or a service manager's SIGTERM: the boot exits 128 + the signal, and the root script it was
    running (in a session of its own, which the signal never reaches) does not go on alone."""
    marker = node.root / "still-running"
    node.put_script("scripts/slow.sh", f"#!/bin/bash\nsleep 3\ntouch {marker}\n")
    config = node.script_config(
        {"nodeBootstrapped": [{"name": "slow", "scriptSource": {"scriptLocation": "scripts/slow.sh"}}]}
    )
    path = node.root.parent / "slow.json"
    path.write_text(json.dumps(config))
    # Started as from a terminal, SIGINT at its default: a background job (a CI runner's) starts with it
    # ignored, which the boot then keeps, as every program does.
    from_a_terminal = (
        "import os, signal, sys; signal.signal(signal.SIGINT, signal.SIG_DFL); "
        "os.execv(sys.argv[1], sys.argv[1:])"
    )
    command = [
        str(LIFEGUARD_NODE),
        "boot",
        "--config",
        str(path),
        "--root",
        str(node.root),
        "--node-id",
        "n1",
    ]
    boot = subprocess.Popen(
        [sys.executable, "-c", from_a_terminal, *command],
        env=node.env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
    )
    deadline = time.monotonic() + 10
    log = node.actions / "nodeBootstrapped" / "slow.log"
    while not log.exists() and time.monotonic() < deadline:
        time.sleep(0.05)
    time.sleep(0.3)
    boot.send_signal(signum)
    assert boot.wait(timeout=10) == 128 + signum
    time.sleep(3.5)
    assert not marker.exists(), "the script ran on after its boot was stopped"


def test_a_script_that_removes_the_log_tree_does_not_fail_the_next_script(node: Node) -> None:
    """A script (log cleanup, AMI-style `rm -rf /var/log/amazon/pcs/...`) removes the lifecycle log
    folder. The next script of the stage is a healthy one: it must run and succeed, and its record must be
    in executor.log where the shipper reads it; not fail with 126 (TERMINATE: the node is killed) while
    its record goes to a deleted file."""
    node.put_script("scripts/clean.sh", "#!/bin/bash\nrm -rf var/log/amazon/pcs/lifecycle/actions\n")
    node.put_script("scripts/ok.sh", "#!/bin/bash\necho fine\n")
    config = node.script_config(
        {
            "nodeBootstrapped": [
                {"name": "clean", "scriptSource": {"scriptLocation": "scripts/clean.sh"}},
                {"name": "healthy", "scriptSource": {"scriptLocation": "scripts/ok.sh"}},
            ]
        }
    )
    result = node.boot(config)
    assert result.returncode == 0, (result.stdout, result.stderr)
    # Both said: the record of the script that cleaned the folder goes to a new executor.log.
    assert [r["script"] for r in messages(node, "script completed")] == ["clean", "healthy"]


def test_records_written_after_a_script_removed_the_log_tree_reach_executor_log(node: Node) -> None:
    """After a script removed the folder, the boot's later records (the rest of the stage, nodeReady,
    'boot completed') must be in executor.log at its path: the shipper reads that path, and a record
    written to the deleted file is lost to it (and to the admin reading the node)."""
    node.put_script("scripts/clean.sh", "#!/bin/bash\nrm -rf var/log/amazon/pcs/lifecycle/actions\n")
    config = node.config("article-stop-sequence")
    config["stages"]["nodeBootstrapped"].insert(
        0,
        {
            "name": "clean",
            "onError": "CONTINUE",
            "scriptSource": {"scriptLocation": f"s3://{node.bucket}/scripts/clean.sh"},
        },
    )
    node.boot(config)
    log = node.actions / "executor.log"
    assert log.exists(), "executor.log is gone: every later record went to the deleted file"
    said = [(r["message"], r.get("script")) for r in node.executor_records()]
    assert ("lifecycle script failed; stopping remaining scripts", "fail-stop-sequence") in said
    assert said[-1][0] == "boot completed"


def test_two_boots_at_once_on_one_root_do_not_both_run_first_boot_only_scripts(node: Node) -> None:
    """DESIGN: first boot is decided by state under DIR; 'every later boot on the same DIR is a reboot'.
    Two `boot` runs started together (a unit started twice, an admin re-running it) must not both be the
    first boot and run the FIRST_BOOT_ONLY scripts twice, concurrently."""
    import threading

    node.put_script(
        "scripts/slow-once.sh",
        '#!/bin/bash\necho "ran first_boot=$PCS_IS_FIRST_BOOT" >> var/lib/once.log\nsleep 2\n',
    )
    config = node.script_config(
        {
            "nodeBootstrapped": [
                {"name": "install", "scriptSource": {"scriptLocation": "scripts/slow-once.sh"}},
            ]
        }
    )
    results: list[Any] = []
    threads = [threading.Thread(target=lambda: results.append(node.boot(config))) for _ in range(2)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    ran = (node.root / "var/lib/once.log").read_text().splitlines()
    assert ran == ["ran first_boot=1"], ran


@pytest.mark.parametrize("stdout", ["full", "closed"])
def test_the_boots_verdict_is_its_exit_status_when_its_summary_cannot_be_written(
    node: Node, stdout: str
) -> None:
    """`boot > /dev/full`, or `boot | true`: printing the summary failed after the boot, and the boot exited
    1 (an internal error) where its verdict was 4 (TERMINATE): whoever ran it read the wrong outcome."""
    from tests.integration.conftest import LIFEGUARD_NODE

    config = node.root.parent / "terminate.json"
    config.write_text(json.dumps(node.config("article-terminate")))
    command = [str(LIFEGUARD_NODE), "boot", "--config", str(config), "--root", str(node.root)]
    command += ["--node-id", "lca-static-1", "--cluster-id", "pcs_abc123de45"]
    command += ["--compute-node-group-id", "pcs_abcdef01"]
    if stdout == "full":
        with open("/dev/full", "w") as full:
            boot = subprocess.run(
                command, env=node.env, stdout=full, stderr=subprocess.PIPE, text=True, check=False
            )
        code, err = boot.returncode, boot.stderr
    else:
        started = subprocess.Popen(
            command, env=node.env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True
        )
        assert started.stdout is not None
        assert started.stderr is not None
        started.stdout.close()  # nobody reads what it prints
        err = started.stderr.read()
        code = started.wait(timeout=120)
    assert code == 4, err
    assert "internal error" not in err
    assert "the summary was not written" in err
