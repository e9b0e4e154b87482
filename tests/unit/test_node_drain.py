"""Which scripts stopped their sequence this boot (`node.drain`), read from executor.log: only this boot's,
each once, whatever else the log holds; and the watcher that follows the rest of the boot, to its end
record or its bound, draining at most once."""

from __future__ import annotations

import json
import time
from pathlib import Path

import pytest

from lifeguard.node.cli import main
from lifeguard.node.drain import booted_at, drain, find_scontrol, stopped_scripts, watch
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


# -- the rest of the boot: the watcher a drain step leaves when nothing had stopped yet --

BOOT_STARTED = {"timestamp": "2026-10-21T00:54:00Z", "level": "INFO", "message": "boot started"}
BOOT_COMPLETED = {"timestamp": "2026-10-21T00:58:00Z", "level": "INFO", "message": "boot completed"}


def ready(script: str, message: str = STOPPED) -> dict[str, object]:
    return {**record(script, "2026-10-21T00:57:00Z", message), "stage": "nodeReady"}


def fake_scontrol(tmp_path: Path) -> tuple[str, Path]:
    """An scontrol that records each call's arguments, one line a call."""
    calls = tmp_path / "scontrol.calls"
    script = tmp_path / "scontrol"
    script.write_text(f'#!/bin/sh\necho "$@" >> {calls}\n')
    script.chmod(0o755)
    return str(script), calls


def append(layout: NodeLayout, *lines: object) -> None:
    with layout.executor_log.open("a") as log:
        for line in lines:
            log.write((line if isinstance(line, str) else json.dumps(line)) + "\n")


class Boot:
    """The executor going on while the watcher sleeps: each sleep appends the next batch of records."""

    def __init__(self, layout: NodeLayout, *batches: tuple[object, ...]) -> None:
        self.layout = layout
        self.batches = list(batches)
        self.now = 0.0
        self.slept: list[float] = []

    def clock(self) -> float:
        return self.now

    def sleep(self, seconds: float) -> None:
        self.slept.append(seconds)
        self.now += seconds
        if self.batches:
            append(self.layout, *self.batches.pop(0))


def test_a_nodeReady_failure_after_the_step_drains_the_node_once_naming_it(tmp_path: Path) -> None:
    layout = write_log(tmp_path, BOOT_STARTED, record("mount-fsx", message="script completed"))
    scontrol, calls = fake_scontrol(tmp_path)
    now = drain(layout, "lifeguard: kept", node_id="lca-static-1", since=BOOT, scontrol=scontrol)
    assert (now.drained, now.reason) == (False, "no lifecycle script stopped its sequence this boot")
    assert now.read_to == layout.executor_log.stat().st_size
    boot = Boot(
        layout,
        (ready("lifeguard-drain", "script completed"),),
        (),
        (ready("configure-gpu"), ready("configure-gpu"), ready("after-gpu", "script skipped")),
        (ready("later-failure"), BOOT_COMPLETED),
    )
    decision = watch(
        layout,
        "lifeguard: kept",
        offset=now.read_to,
        node_id="lca-static-1",
        scontrol=scontrol,
        clock=boot.clock,
        sleep=boot.sleep,
    )
    assert (decision.stopped, decision.drained, decision.error) == (("nodeReady/configure-gpu",), True, None)
    assert calls.read_text() == (
        "update NodeName=lca-static-1 State=DRAIN Reason=lifeguard: kept (nodeReady/configure-gpu)\n"
    )
    assert len(boot.slept) == 3  # it stopped looking once it drained: one drain, whatever comes after
    assert boot.batches == [(ready("later-failure"), BOOT_COMPLETED)]


@pytest.mark.parametrize("end", [BOOT_COMPLETED, BOOT_STARTED], ids=["boot completed", "next boot started"])
def test_the_watcher_ends_at_the_boots_end_and_a_node_whose_scripts_all_ran_stays_in_service(
    tmp_path: Path, end: dict[str, object]
) -> None:
    layout = write_log(tmp_path, BOOT_STARTED)
    offset = layout.executor_log.stat().st_size
    boot = Boot(
        layout,
        (ready("lifeguard-drain", "script completed"), ready("ready-check", "script completed")),
        (ready("optional", "lifecycle script failed; continuing"), end, ready("next-boot-failure")),
    )
    decision = watch(
        layout,
        "lifeguard: kept",
        offset=offset,
        scontrol="/nonexistent/scontrol",
        clock=boot.clock,
        sleep=boot.sleep,
    )
    assert (decision.stopped, decision.drained, decision.error) == ((), False, None)
    assert decision.reason == "no lifecycle script stopped its sequence this boot: the boot ended"
    assert len(boot.slept) == 2
    # The watcher read up to the end record, not into the next boot.
    assert layout.executor_log.read_bytes()[: decision.read_to].endswith(json.dumps(end).encode() + b"\n")


def test_the_watcher_gives_up_at_its_bound_without_draining(tmp_path: Path) -> None:
    layout = write_log(tmp_path, BOOT_STARTED)
    offset = layout.executor_log.stat().st_size
    append(layout, ready("lifeguard-drain", "script completed"))
    boot = Boot(layout)
    decision = watch(
        layout,
        "lifeguard: kept",
        offset=offset,
        watch_seconds=1.1,
        poll_seconds=0.25,
        scontrol="/nonexistent/scontrol",
        clock=boot.clock,
        sleep=boot.sleep,
    )
    assert (decision.drained, decision.error) == (False, None)
    assert decision.reason == "no lifecycle script stopped its sequence this boot within 1.1 s"
    assert boot.slept == pytest.approx([0.25, 0.25, 0.25, 0.25, 0.1])
    assert boot.now == pytest.approx(1.1)


def test_a_record_still_being_written_is_read_once_its_line_is_complete(tmp_path: Path) -> None:
    layout = write_log(tmp_path, BOOT_STARTED)
    offset = layout.executor_log.stat().st_size
    line = json.dumps(ready("configure-gpu"))
    with layout.executor_log.open("a") as log:
        log.write(line[:20])
    scontrol, calls = fake_scontrol(tmp_path)
    boot = Boot(layout, (line[20:],))
    first = drain(layout, "kept", node_id="n1", since=BOOT, scontrol=scontrol)
    assert (first.drained, first.read_to) == (False, offset)
    decision = watch(
        layout, "kept", offset=offset, node_id="n1", scontrol=scontrol, clock=boot.clock, sleep=boot.sleep
    )
    assert decision.stopped == ("nodeReady/configure-gpu",)
    assert calls.read_text() == "update NodeName=n1 State=DRAIN Reason=kept (nodeReady/configure-gpu)\n"


def test_a_log_shorter_than_the_offset_was_replaced_and_is_read_from_its_start(tmp_path: Path) -> None:
    layout = write_log(tmp_path, ready("configure-gpu"))
    scontrol, calls = fake_scontrol(tmp_path)
    decision = watch(layout, "kept", offset=10_000, node_id="n1", scontrol=scontrol, sleep=pytest.fail)
    assert decision.drained
    assert calls.read_text().count("\n") == 1


def test_a_failing_scontrol_is_reported_not_retried(tmp_path: Path) -> None:
    layout = write_log(tmp_path, BOOT_STARTED)
    failing = tmp_path / "scontrol"
    failing.write_text("#!/bin/sh\necho 'slurm_update error: Invalid node name specified' >&2\nexit 1\n")
    failing.chmod(0o755)
    boot = Boot(layout, (ready("configure-gpu"),), (BOOT_COMPLETED,))
    offset = layout.executor_log.stat().st_size
    decision = watch(
        layout, "kept", offset=offset, node_id="n1", scontrol=str(failing), clock=boot.clock, sleep=boot.sleep
    )
    assert (decision.drained, decision.stopped) == (False, ("nodeReady/configure-gpu",))
    assert decision.error == f"{failing} failed: slurm_update error: Invalid node name specified"
    assert boot.batches == [(BOOT_COMPLETED,)]


# -- the command --


def run_drain(tmp_path: Path, capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, list[str], str]:
    code = main(["drain", "--reason", "lifeguard: kept", "--root", str(tmp_path), "--node-id", "n1", *args])
    out, err = capsys.readouterr()
    return code, out.splitlines(), err


def test_drain_at_once_says_so_and_leaves_no_watcher(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    layout = write_log(tmp_path, BOOT_STARTED, record("mount-fsx"))
    scontrol, calls = fake_scontrol(tmp_path)
    monkeypatch.setenv("LIFEGUARD_SCONTROL", scontrol)
    code, out, err = run_drain(tmp_path, capsys, "--since", str(BOOT))
    assert (code, out, err) == (0, ["drained: lifeguard: kept (nodeBootstrapped/mount-fsx)"], "")
    assert calls.read_text().count("\n") == 1
    assert not layout.drain_watch_log.exists()


def pcs_scontrol(root: Path, version: str, calls: Path) -> Path:
    """An scontrol where PCS installs Slurm on a node, recording each call's arguments."""
    script = root / "opt/aws/pcs/scheduler" / f"slurm-{version}" / "bin" / "scontrol"
    script.parent.mkdir(parents=True)
    script.write_text(f'#!/bin/sh\necho "{version} $@" >> {calls}\n')
    script.chmod(0o755)
    return script


def test_a_node_whose_path_holds_no_scontrol_is_drained_with_pcss_own_of_the_newest_slurm(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """A lifecycle script's PATH does not hold Slurm on a PCS node: it is under
    /opt/aws/pcs/scheduler/slurm-<version>/bin (the article's ready-check looks there). A bare `scontrol`
    failed to run, and the kept node took jobs."""
    write_log(tmp_path, BOOT_STARTED, record("mount-fsx"))
    calls = tmp_path / "scontrol.calls"
    for version in ("9.11", "25.05", "26.05"):
        pcs_scontrol(tmp_path, version, calls)
    pcs_scontrol(tmp_path, "27.05", calls).chmod(0o644)  # an install half done: not one to run
    monkeypatch.delenv("LIFEGUARD_SCONTROL", raising=False)
    monkeypatch.setenv("PATH", str(tmp_path / "empty"))  # no scontrol on PATH
    code, out, err = run_drain(tmp_path, capsys, "--since", str(BOOT))
    assert (code, out, err) == (0, ["drained: lifeguard: kept (nodeBootstrapped/mount-fsx)"], "")
    assert calls.read_text() == (
        "26.05 update NodeName=n1 State=DRAIN Reason=lifeguard: kept (nodeBootstrapped/mount-fsx)\n"
    )


def test_scontrol_on_path_is_used_before_pcss_own(tmp_path: Path) -> None:
    on_path, _ = fake_scontrol(tmp_path)
    pcs_scontrol(tmp_path, "26.05", tmp_path / "calls")
    assert find_scontrol(tmp_path, path=str(Path(on_path).parent)) == on_path
    assert find_scontrol(tmp_path, path=str(tmp_path / "empty")) == str(
        tmp_path / "opt/aws/pcs/scheduler/slurm-26.05/bin/scontrol"
    )


def test_a_node_with_no_scontrol_anywhere_is_not_drained_and_says_where_it_looked(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    write_log(tmp_path, BOOT_STARTED, record("mount-fsx"))
    monkeypatch.delenv("LIFEGUARD_SCONTROL", raising=False)
    monkeypatch.setenv("PATH", str(tmp_path / "empty"))
    code, out, err = run_drain(tmp_path, capsys, "--since", str(BOOT))
    assert code != 0
    said = "scontrol could not run: No such file or directory (not on PATH, nor in /opt/aws/pcs/scheduler/"
    assert said in "\n".join(out) + err


def test_watch_seconds_zero_checks_once_as_before(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    layout = write_log(tmp_path, BOOT_STARTED)
    monkeypatch.setenv("LIFEGUARD_DRAIN_WATCH_SECONDS", "0")
    code, out, err = run_drain(tmp_path, capsys, "--since", str(BOOT))
    assert (code, out, err) == (0, ["not drained: no lifecycle script stopped its sequence this boot"], "")
    assert not layout.drain_watch_log.exists()


def test_foreground_follows_the_boot_in_this_process_up_to_its_bound(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    layout = write_log(tmp_path, BOOT_STARTED)
    started = time.monotonic()
    code, out, err = run_drain(
        tmp_path, capsys, "--since", str(BOOT), "--foreground", "--watch-seconds", "0.3"
    )
    assert time.monotonic() - started >= 0.3
    assert (code, err) == (0, "")
    assert out == [
        "not drained: no lifecycle script stopped its sequence this boot so far",
        "not drained: no lifecycle script stopped its sequence this boot within 0.3 s",
    ]
    assert not layout.drain_watch_log.exists()


@pytest.mark.parametrize(
    ("args", "env", "message"),
    [
        (
            ["--watch-seconds", "-1"],
            None,
            "the watch (--watch-seconds) must be from 0 to 86400 seconds, not -1",
        ),
        (
            ["--watch-seconds", "nan"],
            None,
            "the watch (--watch-seconds) must be from 0 to 86400 seconds, not nan",
        ),
        (["--watch-seconds", "1e9"], None, "must be from 0 to 86400 seconds, not 1e+09"),
        (["--follow-from", "-5"], None, "the offset to follow from must be 0 or more, not -5"),
        ([], "soon", "LIFEGUARD_DRAIN_WATCH_SECONDS='soon' is not valid"),
        ([], "1e9", "the watch (LIFEGUARD_DRAIN_WATCH_SECONDS) must be from 0 to 86400 seconds, not 1e+09"),
    ],
)
def test_a_bad_bound_is_bad_usage_and_drains_nothing(
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
    *,
    args: list[str],
    env: str | None,
    message: str,
) -> None:
    write_log(tmp_path, record("mount-fsx"))
    monkeypatch.setenv("LIFEGUARD_SCONTROL", "/nonexistent/scontrol")
    if env is not None:
        monkeypatch.setenv("LIFEGUARD_DRAIN_WATCH_SECONDS", env)
    code, out, err = run_drain(tmp_path, capsys, *args)
    assert (code, out) == (2, [])
    assert message in err


def test_a_root_that_is_no_folder_is_bad_usage_not_a_node_with_nothing_to_drain(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """A mistyped --root was answered "not drained: no lifecycle script stopped its sequence", exit 0."""
    monkeypatch.setenv("LIFEGUARD_SCONTROL", "/nonexistent/scontrol")
    code, out, err = run_drain(tmp_path / "nope", capsys, "--watch-seconds", "0")
    assert (code, out) == (2, [])
    assert err == f"lifeguard-node drain: --root {tmp_path / 'nope'}: no such folder\n"


def test_a_log_of_one_endless_line_is_read_in_chunks_and_the_records_after_it_found(tmp_path: Path) -> None:
    """executor.log was read whole: one line of 300 MB took 310 MB to look for a STOP_SEQUENCE failure."""
    import tracemalloc

    layout = write_log(tmp_path, "x" * (40 * 1024 * 1024), record("mount-fsx"), '{"message": "half')
    tracemalloc.start()
    try:
        found = stopped_scripts(layout, since=BOOT)
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert found == ["nodeBootstrapped/mount-fsx"]
    assert peak < 4 * 1024 * 1024


def test_the_drain_reason_is_cut_to_what_slurm_keeps(tmp_path: Path) -> None:
    """A node's Reason is kept to SLURM_REASON_MAX_CHARS (255): a long one (a long --reason, many stopped
    scripts) is cut there, so `sinfo -R` stays readable and the drain itself goes through."""
    layout = write_log(tmp_path, BOOT_STARTED, ready("configure-gpu"))
    scontrol, calls = fake_scontrol(tmp_path)
    decision = drain(layout, "k" * 300, node_id="n1", since=BOOT, scontrol=scontrol)
    assert decision.drained
    [call] = calls.read_text().splitlines()
    assert call == "update NodeName=n1 State=DRAIN Reason=" + "k" * 255


@pytest.mark.parametrize("name", ["lca-static-[1-100]", "ALL", "all", "n1,n2", "n1 State=RESUME", ""])
def test_a_node_name_that_is_not_one_nodes_drains_nothing(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, name: str
) -> None:
    """`scontrol update NodeName=` takes a host list or ALL: a drain from a name in the environment that is
    one (or from --node-id) would take other nodes out of service, with no loop of theirs."""
    layout = write_log(tmp_path, BOOT_STARTED, ready("configure-gpu"))
    scontrol, calls = fake_scontrol(tmp_path)
    monkeypatch.setenv("PCS_NODE_ID", name)
    monkeypatch.setattr("socket.gethostname", lambda: "")  # an empty name is no node's either
    decision = drain(layout, "kept", since=BOOT, scontrol=scontrol)
    assert (decision.drained, decision.stopped) == (False, ("nodeReady/configure-gpu",))
    assert decision.error == f"the node name {name!r} is not one Slurm node's: nothing drained"
    assert not calls.exists() or calls.read_text() == ""
    monkeypatch.setenv("PCS_NODE_ID", "lca-static-1")
    assert drain(layout, "kept", since=BOOT, scontrol=scontrol).drained
    assert (
        calls.read_text()
        == "update NodeName=lca-static-1 State=DRAIN Reason=kept (nodeReady/configure-gpu)\n"
    )


def test_an_earlier_boots_stop_dated_ahead_by_its_clock_is_not_this_boots(tmp_path: Path) -> None:
    """The boot's date alone let an earlier boot's STOP_SEQUENCE through when that boot's clock was ahead:
    a node that booted clean after it was drained. The executor's record of this boot's start ends what
    came before; PCS's agent writes none, and the date decides alone there (the first test)."""
    layout = write_log(
        tmp_path,
        {**BOOT_STARTED, "timestamp": "2026-10-21T01:50:00Z"},
        record("mount-fsx", "2026-10-21T01:52:00Z"),  # boot 1, an hour ahead
        {**BOOT_STARTED, "timestamp": "2026-10-21T00:54:00Z"},  # boot 2, the clock set right
        record("mount-fsx", message="script completed"),
    )
    assert stopped_scripts(layout, since=BOOT) == []
    decision = drain(layout, "quarantined by Lifeguard", since=BOOT, scontrol="/nonexistent/scontrol")
    assert (decision.stopped, decision.drained) == ((), False)
    again = write_log(tmp_path / "again", BOOT_STARTED, record("mount-fsx"), record("ready", message="x"))
    assert stopped_scripts(again, since=BOOT) == ["nodeBootstrapped/mount-fsx"]  # this boot's own: kept


@pytest.mark.parametrize(
    "said",
    ["Unable to contact slurm controller (connect failure)", "Socket timed out on send/recv operation"],
    ids=["out of reach", "too busy"],
)
def test_a_slurmctld_out_of_reach_is_tried_again_and_the_node_drained_once_it_answers(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, said: str
) -> None:
    """slurmctld busy with a wave of registrations (or failing over) as nodeReady runs: one try left the
    kept node in service, taking jobs. Tried again, 3 times in all; any other refusal is final (above)."""
    import lifeguard.node.drain as drain_module

    monkeypatch.setattr(drain_module, "SCONTROL_PAUSE_SECONDS", 0.0)
    layout = write_log(tmp_path, BOOT_STARTED, record("mount-fsx"))
    tries = tmp_path / "tries"
    flaky = tmp_path / "scontrol"
    flaky.write_text(
        "#!/bin/sh\n"
        f'echo x >> "{tries}"\n'
        f'if [ "$(wc -l < "{tries}")" -le "$FAILS" ]; then\n'
        f"  echo 'slurm_update error: {said}' >&2; exit 1\n"
        "fi\n"
    )
    flaky.chmod(0o755)
    monkeypatch.setenv("FAILS", "2")
    decision = drain(layout, "kept", since=BOOT, node_id="n1", scontrol=str(flaky))
    assert (decision.drained, decision.error, len(tries.read_text().splitlines())) == (True, None, 3)
    tries.unlink()
    monkeypatch.setenv("FAILS", "3")
    decision = drain(layout, "kept", since=BOOT, node_id="n1", scontrol=str(flaky))
    assert (decision.drained, len(tries.read_text().splitlines())) == (False, 3)
    assert decision.error == (f"{flaky} failed: slurm_update error: {said} (3 tries)")


def test_a_watcher_that_cannot_start_makes_the_drain_step_fail(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """Exit 1 when the watcher cannot start: the step runs under CONTINUE, so executor.log says it failed
    (a later nodeReady STOP_SEQUENCE failure will not be drained), where exit 0 said it completed."""
    layout = write_log(tmp_path, BOOT_STARTED)
    scontrol, _ = fake_scontrol(tmp_path)
    monkeypatch.setenv("LIFEGUARD_SCONTROL", scontrol)
    layout.drain_watch_log.mkdir(parents=True)  # its log cannot be opened: the watcher cannot start
    code, _, err = run_drain(tmp_path, capsys, "--since", str(BOOT))
    assert "cannot start the watcher" in err
    assert code == 1
