"""The twin's node host (`lifeguard_cli.simulate.nodehost`): a real host process forking a real boot."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path


def _one_boot(host: str, argv: list[str], output: Path) -> None:
    """Run the host (`python -c host`) for one boot of `argv`, its output in `output`; it answers exit 0."""
    request = json.dumps({"argv": argv, "env": {}, "output": str(output)})
    done = subprocess.run(
        [sys.executable, "-c", host],
        check=False,
        input=request + "\n",
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout) == {"exit": 0}


def test_a_boot_is_forked_with_ctrl_c_held_off_until_its_output_is_its_own(tmp_path: Path) -> None:
    """Ctrl-C reaches the whole process group: in the handlers a fork runs in the child (logging's among
    them) it raised a KeyboardInterrupt whose traceback went to the terminal. The child's side of the fork
    runs with SIGINT blocked; the boot itself takes it, its output in the node's file."""
    seen = tmp_path / "blocked-in-child"
    host = textwrap.dedent(
        f"""
        import os, signal, sys
        def note():
            with open({str(seen)!r}, "w") as out:
                out.write(str(signal.SIGINT in signal.pthread_sigmask(signal.SIG_BLOCK, [])))
        os.register_at_fork(after_in_child=note)
        from lifeguard.node import cli
        real = cli.main
        def main(argv):  # what the boot's scripts would inherit
            print("SIGINT blocked:", signal.SIGINT in signal.pthread_sigmask(signal.SIG_BLOCK, []))
            return real(argv)
        cli.main = main
        from lifeguard_cli.simulate import nodehost
        sys.exit(nodehost.main())
        """
    )
    output = tmp_path / "boot.out"
    _one_boot(host, ["--version"], output)
    assert seen.read_text() == "True"
    blocked, version = output.read_text().splitlines()  # the boot ran, its output in its file
    assert blocked == "SIGINT blocked: False"  # its scripts take Ctrl-C
    assert version.startswith("lifeguard-node ")


def test_what_a_boot_left_running_ends_with_the_host(tmp_path: Path) -> None:
    """A script's daemon (`sleep 300 &`, in a session of its own, or below a process that waits on it)
    outlives its boot, as on a node; the twin keeps no node as a process, so the host takes it in and ends
    it with itself: a run leaves nothing."""
    pids = tmp_path / "pids"
    host = textwrap.dedent(
        f"""
        import subprocess, sys
        from lifeguard.node import cli
        def main(argv):  # a boot whose script starts a daemon, then a grandchild of it, and ends
            daemon = subprocess.Popen(["sleep", "300"], start_new_session=True)
            # a shell that waits on its own sleep: the sleep is a grandchild of the host once the boot ends
            nested = subprocess.Popen(
                ["sh", "-c", "sleep 300 >/dev/null & echo $!; wait"], stdout=subprocess.PIPE, text=True
            )
            grandchild = nested.stdout.readline().strip()
            with open({str(pids)!r}, "w") as out:
                out.write(f"{{daemon.pid}} {{nested.pid}} {{grandchild}}")
            return 0
        cli.main = main
        from lifeguard_cli.simulate import nodehost
        sys.exit(nodehost.main())
        """
    )
    _one_boot(host, [], tmp_path / "boot.out")
    left = [int(pid) for pid in pids.read_text().split()]
    assert len(left) == 3
    deadline = time.monotonic() + 5
    while (alive := [pid for pid in left if _running(pid)]) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert alive == []


def _running(pid: int) -> bool:
    """Whether `pid` is a process that has not ended (a zombie, waiting to be collected, has)."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except FileNotFoundError:
        return False
    return stat[stat.rindex(")") + 2] != "Z"


def test_a_boot_stopped_with_the_host_finishes_stopping_before_the_leftovers_end(tmp_path: Path) -> None:
    """Ctrl-C reaches the host and the boot: the boot stops its script and records it; the host ended every
    process below it at once, the boot among them, before it had."""
    started, stopped = tmp_path / "started", tmp_path / "stopped"
    host = textwrap.dedent(
        f"""
        import sys, time
        from lifeguard.node import cli
        def main(argv):
            try:  # said started from inside: a Ctrl-C right after it is the boot's to take
                open({str(started)!r}, "w").close()
                time.sleep(60)
            except KeyboardInterrupt:  # the boot's own stopping: its script, its records
                time.sleep(0.3)
                open({str(stopped)!r}, "w").close()
            return 130
        cli.main = main
        from lifeguard_cli.simulate import nodehost
        sys.exit(nodehost.main())
        """
    )
    request = json.dumps({"argv": [], "env": {}, "output": str(tmp_path / "boot.out")})
    with subprocess.Popen(
        [sys.executable, "-c", host],
        stdin=subprocess.PIPE,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        text=True,
        start_new_session=True,  # its own group, as the CLI's: Ctrl-C reaches it and its boot, not pytest
    ) as running:
        assert running.stdin is not None
        running.stdin.write(request + "\n")
        running.stdin.flush()
        deadline = time.monotonic() + 60
        while not started.exists() and time.monotonic() < deadline:
            time.sleep(0.02)
        assert started.exists()
        os.killpg(running.pid, signal.SIGINT)
        running.wait(timeout=30)
    assert stopped.exists()
