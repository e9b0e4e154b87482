"""Running one script (`node.process`): a real bash process, its block in the script's log, its exit code
as a shell reports it, and a timeout that kills its whole process group."""

from __future__ import annotations

import errno
import os
import resource
import signal
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from lifeguard.node.process import ProcessResult, run_script

STARTED = 1_792_544_000
ENDED = STARTED + 7


@pytest.fixture(autouse=True, params=["spawned", "forked"])
def started(request: pytest.FixtureRequest, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> str:
    """Every test both ways: from the script's directory (posix_spawn) and from elsewhere (subprocess)."""

    def not_this_way(*args: object, **kwargs: object) -> None:
        raise AssertionError(f"the script should have been {request.param}")

    if request.param == "spawned":
        monkeypatch.chdir(tmp_path)
        monkeypatch.setattr(subprocess, "Popen", not_this_way)
    else:
        monkeypatch.setattr(os, "posix_spawn", not_this_way)
    return str(request.param)


def run(
    tmp_path: Path,
    body: str,
    *arguments: str,
    name: str = "script",
    timeout_seconds: float = 10.0,
    kill_grace_seconds: float = 1.0,
    env: dict[str, str] | None = None,
    clock_value: float = ENDED,
) -> tuple[ProcessResult, str]:
    script = tmp_path / name
    content = body.encode()
    script.write_bytes(content)
    script.chmod(0o750)
    log = tmp_path / f"{name}.log"
    result = run_script(
        name,
        script,
        arguments,
        content=content,
        log=log,
        env=env if env is not None else {"PATH": os.environ["PATH"]},
        cwd=tmp_path,
        started=STARTED,
        timeout_seconds=timeout_seconds,
        kill_grace_seconds=kill_grace_seconds,
        clock=lambda: clock_value,
    )
    return result, log.read_text()


def test_output_is_captured_between_the_markers_and_the_span_covers_the_block(tmp_path: Path) -> None:
    result, log = run(tmp_path, "#!/bin/bash\necho out\necho err >&2\n", "a b", "")
    assert (result.exit_code, result.error) == (0, None)
    assert log == (f'[start script args=["a b",""] @ {STARTED}]\nout\nerr\n[end script exit=0 @ {ENDED}]\n')
    assert result.log_span == (0, len(log.encode()))


def test_a_second_run_appends_its_block_after_the_first(tmp_path: Path) -> None:
    first, _ = run(tmp_path, "#!/bin/bash\necho one\n")
    second, log = run(tmp_path, "#!/bin/bash\necho two\n")
    assert second.log_span[0] == first.log_span[1]
    data = log.encode()
    assert data[second.log_span[0] : second.log_span[1]] == (
        f"[start script args=[] @ {STARTED}]\ntwo\n[end script exit=0 @ {ENDED}]\n".encode()
    )


def test_a_non_zero_exit_is_reported_with_its_status(tmp_path: Path) -> None:
    result, log = run(tmp_path, "#!/bin/bash\necho failing\nexit 3\n")
    assert result.exit_code == 3
    assert result.error == "script 'script' failed with exit status ExitStatus(unix_wait_status(768))"
    assert log.endswith(f"failing\n[end script exit=3 @ {ENDED}]\n")


def test_a_script_killed_by_a_signal_exits_128_plus_the_signal(tmp_path: Path) -> None:
    result, log = run(tmp_path, "#!/bin/bash\necho before\nkill -9 $$\necho after\n")
    assert result.exit_code == 137
    assert result.error == "script 'script' was killed by signal 9 (SIGKILL)"
    assert "after" not in log


def test_a_script_killed_by_a_real_time_signal_exits_128_plus_the_signal_and_its_block_ends(
    tmp_path: Path,
) -> None:
    """A real-time signal has no name in Python's `signal.Signals`: the run is still the script's."""
    rt = int(signal.SIGRTMIN) + 1
    result, log = run(tmp_path, f"#!/bin/bash\necho before\nkill -{rt} $$\n")
    assert result.exit_code == 128 + rt
    assert result.error == f"script 'script' was killed by signal {rt} (SIGRTMIN+1)"
    assert log.endswith(f"before\n[end script exit={128 + rt} @ {ENDED}]\n")


def test_a_script_that_ran_is_judged_by_its_exit_even_when_its_end_marker_cannot_be_written(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """PCS judges a script by its exit status: a full disk that takes the end marker fails no script."""
    write = os.write

    def full_at_the_end(fd: int, data: bytes) -> int:
        if bytes(data).startswith(b"[end "):
            raise OSError(errno.ENOSPC, "No space left on device")
        return write(fd, data)

    monkeypatch.setattr(os, "write", full_at_the_end)
    result, log = run(tmp_path, "#!/bin/bash\necho installed\n")
    assert (result.exit_code, result.error) == (0, None)
    assert log == f"[start script args=[] @ {STARTED}]\ninstalled\n"
    assert result.log_span == (0, len(log.encode()))


def test_a_file_without_shebang_runs_under_bash(tmp_path: Path) -> None:
    result, log = run(tmp_path, 'echo "bash=${BASH_VERSION:+yes}"\n')
    assert result.exit_code == 0
    assert "bash=yes\n" in log


def test_a_script_that_cannot_start_exits_126(tmp_path: Path) -> None:
    result, log = run(tmp_path, "#!/no/such/interpreter\n")
    assert result.exit_code == 126
    assert result.error is not None
    assert result.error.startswith("script 'script' could not be started: ")
    assert log.endswith(f"[end script exit=126 @ {ENDED}]\n")


def test_a_script_saved_with_windows_line_endings_says_so(tmp_path: Path) -> None:
    """`#!/bin/bash\r` (a script edited on Windows) failed with "No such file or directory" alone, of a
    script that is there: the admin looked for the wrong file."""
    result, _ = run(tmp_path, "#!/bin/bash\r\necho hi\r\n")
    assert result.exit_code == 126
    assert result.error == (
        "script 'script' could not be started: No such file or directory: its first line ends in a carriage"
        " return (Windows line endings), so its interpreter is '/bin/bash\\r'"
    )


def test_a_script_whose_interpreter_is_not_on_the_node_names_it(tmp_path: Path) -> None:
    result, _ = run(tmp_path, "#! /no/such/python2\t-S\r\nprint 'hi'\n")
    assert result.exit_code == 126
    assert result.error == (
        "script 'script' could not be started: No such file or directory: the interpreter its first line"
        " names, '/no/such/python2', is not on the node"
    )


def test_a_script_whose_interpreter_is_there_but_cannot_start_is_not_said_missing(tmp_path: Path) -> None:
    interpreter = tmp_path / "interp"
    interpreter.write_bytes(b"#!/no/such/sh\n")
    interpreter.chmod(0o755)
    result, _ = run(tmp_path, f"#!{interpreter}\necho hi\n")
    assert result.exit_code == 126
    assert result.error == (
        "script 'script' could not be started: No such file or directory: its first line names the"
        f" interpreter {str(interpreter)!r}, which cannot be started"
    )


def test_the_script_gets_exactly_the_environment_and_directory_given(tmp_path: Path) -> None:
    env = {"PATH": os.environ["PATH"], "PCS_NODE_ID": "lca-static-1"}
    result, log = run(tmp_path, '#!/bin/bash\necho "$PCS_NODE_ID ${HOME:-unset}"\npwd\n', env=env)
    assert result.exit_code == 0
    assert f"lca-static-1 unset\n{tmp_path}\n" in log


def test_the_script_gets_no_descriptor_but_its_stdin_stdout_and_stderr(tmp_path: Path) -> None:
    given = os.open(tmp_path / "given-by-a-parent", os.O_WRONLY | os.O_CREAT, 0o600)
    os.set_inheritable(given, True)  # as a descriptor this process was started with would be
    # The boot's own stdin a pipe (a terminal, a service's socket): the script reads none of it.
    read_end, write_end = os.pipe()
    own_stdin = os.dup(0)
    os.dup2(read_end, 0)
    try:
        result, log = run(
            tmp_path,
            '#!/bin/bash\necho "stdin $(readlink /proc/$$/fd/0)"\n'
            "ls /proc/$$/fd\n",  # ls's own descriptors are not bash's
        )
    finally:
        os.dup2(own_stdin, 0)
        for fd in (own_stdin, read_end, write_end, given):
            os.close(fd)
    assert result.exit_code == 0
    seen = {line for line in log.splitlines() if line.isdigit()}
    assert str(given) not in seen
    assert seen <= {"0", "1", "2", "255"}  # 255: bash's own handle on the script
    assert "stdin /dev/null\n" in log


def test_output_without_a_final_newline_leaves_the_end_marker_on_its_own_line(tmp_path: Path) -> None:
    _, log = run(tmp_path, "#!/bin/bash\nprintf partial\n")
    assert log.endswith(f"\npartial\n[end script exit=0 @ {ENDED}]\n")


def test_a_timeout_kills_the_whole_process_group_and_exits_124(tmp_path: Path) -> None:
    survived = tmp_path / "child-survived"
    began = time.monotonic()
    # The child would note it survived 2 s after it began: the group's kill, due 0.2 s in, has the rest
    # of those 2 s on a busy machine.
    result, log = run(
        tmp_path, f"#!/bin/bash\n(sleep 2; touch {survived}) &\nsleep 30\n", timeout_seconds=0.2
    )
    assert time.monotonic() - began < 5
    assert result.exit_code == 124
    assert result.error == "script 'script' timed out after 0.2 s"
    assert log.endswith(f"[end script exit=124 @ {ENDED}]\n")
    time.sleep(max(0.0, began + 2.5 - time.monotonic()))
    assert not survived.exists()


def test_on_a_timeout_the_scripts_children_are_sent_sigterm_before_the_kill(tmp_path: Path) -> None:
    """The whole group gets SIGTERM first, so a child can clean up (unmount, release a lock) in the grace,
    not only the script itself: the grace lasts until the whole group has ended, not the script alone
    (which, without a trap, ends at once)."""
    termed, ready = tmp_path / "child-termed", tmp_path / "child-ready"
    # The child notes both with bash's own redirections, its clean-up taking half a second, and the
    # script is timed out well after the child listens.
    body = (
        f"#!/bin/bash\n(trap 'sleep 0.5; : > {termed}; exit' TERM; : > {ready}; sleep 30 & wait) &\n"
        f"until [ -e {ready} ]; do sleep 0.01; done\nsleep 30\n"
    )
    result, _ = run(tmp_path, body, timeout_seconds=3.0, kill_grace_seconds=5.0)
    assert result.exit_code == 124
    deadline = time.monotonic() + 3
    while not termed.exists() and time.monotonic() < deadline:
        time.sleep(0.05)
    assert termed.exists()


def test_without_pidfds_popen_s_own_polling_times_a_script_out(
    tmp_path: Path, started: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A kernel before 5.3 gives no pidfd: a script started by subprocess is waited for by Popen's polling,
    and its timeout is the same 124 and the same kill of its group."""
    if started == "spawned":
        pytest.skip("posix_spawn is used only where pidfds are")
    monkeypatch.delattr(os, "pidfd_open")
    survived = tmp_path / "child-survived"
    result, log = run(
        tmp_path, f"#!/bin/bash\n(sleep 0.6; touch {survived}) &\nsleep 30\n", timeout_seconds=0.2
    )
    assert (result.exit_code, result.error) == (124, "script 'script' timed out after 0.2 s")
    assert log.endswith(f"[end script exit=124 @ {ENDED}]\n")
    assert run(tmp_path, "#!/bin/bash\nexit 3\n", name="quick")[0].exit_code == 3
    time.sleep(0.8)
    assert not survived.exists()


def test_without_a_descriptor_for_a_pidfd_a_script_is_still_waited_for_and_timed_out(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A node out of file descriptors cannot open a pidfd for a script it started: the run is polled
    for instead, its exit status and its timeout as ever, and no script outlives its run."""

    def out_of_descriptors(pid: int) -> int:
        raise OSError(errno.EMFILE, os.strerror(errno.EMFILE))

    monkeypatch.setattr(os, "pidfd_open", out_of_descriptors)
    assert run(tmp_path, "#!/bin/bash\nexit 3\n", name="quick")[0].exit_code == 3
    survived = tmp_path / "child-survived"
    result, log = run(
        tmp_path,
        f"#!/bin/bash\ntrap '' TERM\n(sleep 0.6; touch {survived}) &\nsleep 30\n",
        timeout_seconds=0.2,
        kill_grace_seconds=0.2,
    )
    assert (result.exit_code, result.error) == (124, "script 'script' timed out after 0.2 s")
    assert log.endswith(f"[end script exit=124 @ {ENDED}]\n")
    time.sleep(0.8)
    assert not survived.exists()


@pytest.fixture
def descriptors_past_1024() -> Iterator[None]:
    """More than 1,024 descriptors open, as on a node whose limit is higher and whose boot holds many files:
    the next one opened, a script's pidfd among them, is numbered past what select can take."""
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if hard != resource.RLIM_INFINITY and hard < 2048:
        pytest.skip(f"the hard limit on open files is {hard}")
    resource.setrlimit(resource.RLIMIT_NOFILE, (max(soft, 2048), hard))
    held = [os.open(os.devnull, os.O_RDONLY) for _ in range(1100)]
    try:
        assert held[-1] >= 1024
        yield
    finally:
        for fd in held:
            os.close(fd)
        resource.setrlimit(resource.RLIMIT_NOFILE, (soft, hard))


@pytest.mark.usefixtures("descriptors_past_1024")
def test_a_script_started_with_descriptors_past_1024_open_is_waited_for_and_timed_out(tmp_path: Path) -> None:
    assert run(tmp_path, "#!/bin/bash\nexit 3\n", name="quick")[0].exit_code == 3
    result, log = run(
        tmp_path, "#!/bin/bash\ntrap '' TERM\nsleep 30\n", timeout_seconds=0.2, kill_grace_seconds=0.2
    )
    assert (result.exit_code, result.error) == (124, "script 'script' timed out after 0.2 s")
    assert log.endswith(f"[end script exit=124 @ {ENDED}]\n")


@pytest.mark.parametrize("grace", [0.2, 0.5])
def test_a_script_that_ignores_sigterm_is_killed_after_the_grace(tmp_path: Path, grace: float) -> None:
    began = time.monotonic()
    # Three seconds for bash to set its trap on a busy machine (a SIGTERM before it would end bash at
    # once), and the file it writes once the trap is set says it was.
    trapped = tmp_path / "trapped"
    body = f"#!/bin/bash\ntrap '' TERM\ntouch {trapped}\nsleep 30\n"
    result, _ = run(tmp_path, body, timeout_seconds=3.0, kill_grace_seconds=grace)
    elapsed = time.monotonic() - began
    assert trapped.exists()
    assert result.exit_code == 124
    assert 3.0 + grace <= elapsed < 3.0 + grace + 3


def _group_alive(pgid: int) -> list[str]:
    """The processes of the group `pgid` that still run (zombies left out), from /proc."""
    alive = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            fields = (entry / "stat").read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue
        if int(fields[2]) == pgid and fields[0] != "Z":
            alive.append(entry.name)
    return alive


def test_a_second_stop_during_the_grace_still_kills_the_scripts_group(tmp_path: Path) -> None:
    """A boot stopped (SIGTERM), then stopped again during the kill's grace (Ctrl-C twice, SIGTERM then
    SIGINT at a shutdown): the second stop cut the grace short and the SIGKILL never came, so the script's
    children, root's, ran on after the executor had gone."""
    pidfile = tmp_path / "pgid"
    body = f'#!/bin/bash\ntrap "sleep 30" TERM\necho $$ > {pidfile}\nsleep 60 &\nwait\n'

    def second_stop(signum: int, frame: object) -> None:
        raise KeyboardInterrupt

    previous = signal.signal(signal.SIGALRM, second_stop)
    try:
        signal.setitimer(signal.ITIMER_REAL, 1.5)  # during the grace of the timeout's kill
        began = time.monotonic()
        with pytest.raises(KeyboardInterrupt):
            run(tmp_path, body, timeout_seconds=1.0, kill_grace_seconds=20.0)
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, previous)
    assert time.monotonic() - began < 10
    pgid = int(pidfile.read_text())
    deadline = time.monotonic() + 5
    while _group_alive(pgid) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert _group_alive(pgid) == []
