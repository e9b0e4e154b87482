"""Where the twin's nodes boot: `lifeguard-node boot`, each boot its own process, forked from a warm host.

A node's boot is the real command line (`lifeguard.node.cli.main`, what the `lifeguard-node` script and the
node bundle run) in a process of its own, with the node's environment and root, its output in a file.
Starting Python and importing boto3 for each boot would cost about 0.6 s, longer than the boot itself; so
one host process imports them once and forks a child per boot (0.1 s a boot here). The child's exit status
is the boot's.

Protocol (one JSON object per line): the twin writes `{"argv": [...], "env": {...}, "output": PATH}`, the
host answers `{"exit": N}` when that boot's process has ended.

What a boot's scripts leave running (a daemon a script starts, `sleep 300 &`) lives on past the boot, as on
a node, which the twin does not keep as a process. On Linux the host takes such orphans in (it is their
subreaper) and ends them with itself: a node's processes end with the node, and no run leaves any behind.
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
import sys
import time
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import IO, Any

from lifeguard_cli.simulate.scenario import ScenarioError

__all__ = ["NodeHost", "main"]


class NodeHost:
    """The twin's side: a running host, asked for one boot at a time."""

    def __init__(self, env: Mapping[str, str]) -> None:
        self._process = subprocess.Popen(
            [sys.executable, "-m", "lifeguard_cli.simulate.nodehost"],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            env=dict(env),
            text=True,
        )

    def boot(self, argv: Sequence[str], env: Mapping[str, str], output: Path) -> int:
        """Run `lifeguard-node ARGV` with `env`, its output in `output`; its exit status."""
        stdin, stdout = self._pipes()
        stdin.write(json.dumps({"argv": list(argv), "env": dict(env), "output": str(output)}) + "\n")
        stdin.flush()
        answer = stdout.readline()
        if not answer:
            raise ScenarioError(f"the node host ended (exit {self._process.wait()}): see {output}")
        return int(json.loads(answer)["exit"])

    def close(self) -> None:
        """End the host (it ends by itself when its input closes)."""
        stdin, _ = self._pipes()
        stdin.close()
        try:
            self._process.wait(timeout=10)
        except subprocess.TimeoutExpired:
            self._process.kill()
            self._process.wait()

    def _pipes(self) -> tuple[IO[str], IO[str]]:
        stdin, stdout = self._process.stdin, self._process.stdout
        if stdin is None or stdout is None:
            raise ScenarioError("the node host has no pipes")
        return stdin, stdout


def _boot_child(request: Mapping[str, Any]) -> None:
    """In the forked child: become the node's process, run the command line, exit with its status."""
    from lifeguard.node import cli

    os.environ.clear()
    os.environ.update(request["env"])
    null = os.open(os.devnull, os.O_RDONLY)
    output = os.open(request["output"], os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    os.dup2(null, 0)
    os.dup2(output, 1)
    os.dup2(output, 2)
    code = 1
    try:
        signal.pthread_sigmask(signal.SIG_UNBLOCK, {signal.SIGINT})  # a Ctrl-C held off is taken here
        code = cli.main(request["argv"])
    except SystemExit as exc:  # argparse's usage errors
        code = exc.code if isinstance(exc.code, int) else 1
    finally:
        sys.stdout.flush()
        sys.stderr.flush()
        os._exit(code)


# prctl's option that makes a process the reaper of its descendants' orphans (linux/prctl.h).
PR_SET_CHILD_SUBREAPER = 36
PROC = Path("/proc")
# How long the host waits for what it killed at its end to be gone.
LEFTOVERS_WAIT_SECONDS = 5.0
# How long a boot stopped with the host may take to stop its script (the executor's kill grace is 5 s).
BOOT_STOP_WAIT_SECONDS = 10.0


def _take_in_orphans() -> bool:
    """Make this process the reaper of its boots' orphans (Linux), so what a script left running stays
    below it; False where that cannot be."""
    if not PROC.is_dir():
        return False
    try:
        import ctypes

        libc = ctypes.CDLL(None, use_errno=True)
        return int(libc.prctl(PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0)) == 0
    except (OSError, AttributeError):
        return False


def _children(parent: int) -> list[int]:
    """The processes whose parent is `parent`, read from /proc."""
    found = []
    for entry in os.scandir(PROC):
        if not entry.name.isdigit():
            continue
        try:
            stat = (PROC / entry.name / "stat").read_text()
        except OSError:  # ended meanwhile
            continue
        # The command's name is in parentheses and may hold anything: the fields follow its last ")".
        if int(stat[stat.rindex(")") + 2 :].split()[1]) == parent:
            found.append(int(entry.name))
    return found


def _reap() -> None:
    """Collect the orphans that have ended (taken in, they are this process's to wait for)."""
    while True:
        try:
            pid, _ = os.waitpid(-1, os.WNOHANG)
        except ChildProcessError:
            return
        if pid == 0:
            return


def _end_leftovers() -> None:
    """End what the boots' scripts left running, and wait until it is gone (at most a few seconds): each
    round ends the orphans taken in, whose own children are then taken in for the next."""
    deadline = time.monotonic() + LEFTOVERS_WAIT_SECONDS
    while time.monotonic() < deadline:
        _reap()
        left = _children(os.getpid())
        if not left:
            return
        for pid in left:
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.kill(pid, signal.SIGKILL)
        time.sleep(0.01)


def main() -> int:
    """The host: import what a boot needs once, then fork a child per request; at its end, end what the
    boots left running."""
    import boto3

    from lifeguard.node import cli  # noqa: F401 - imported before the forks, once

    boto3.client("s3", region_name=os.environ.get("AWS_REGION", "us-east-1"))  # the models, loaded once
    adopting = _take_in_orphans()
    booting: list[int] = []  # the boot running, if one is
    try:
        _serve(adopting, booting)
    finally:
        if adopting:
            if booting:  # stopped (Ctrl-C reaches the boot too): its own stopping is let finish first
                _wait_for(booting[0], BOOT_STOP_WAIT_SECONDS)
            _end_leftovers()
    return 0


def _wait_for(pid: int, seconds: float) -> None:
    """Wait for child `pid` to end, at most `seconds`."""
    deadline = time.monotonic() + seconds
    with contextlib.suppress(ChildProcessError):
        while os.waitpid(pid, os.WNOHANG)[0] == 0 and time.monotonic() < deadline:
            time.sleep(0.01)


def _serve(adopting: bool, booting: list[int]) -> None:
    for line in sys.stdin:
        request = json.loads(line)
        # Ctrl-C reaches the whole process group: held off across the fork, so that the child takes it
        # once its output is the node's file, not in the handlers a fork runs (their traceback went to the
        # terminal), and the host right after.
        signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGINT})
        pid = os.fork()
        if pid == 0:
            _boot_child(request)
        booting[:] = [pid]
        signal.pthread_sigmask(signal.SIG_UNBLOCK, {signal.SIGINT})
        _, status = os.waitpid(pid, 0)
        booting.clear()
        if adopting:
            _reap()  # orphans of earlier boots that have ended since
        sys.stdout.write(json.dumps({"exit": os.waitstatus_to_exitcode(status)}) + "\n")
        sys.stdout.flush()


if __name__ == "__main__":
    try:
        sys.exit(main())
    except KeyboardInterrupt:  # Ctrl-C reaches the whole process group: the CLI says it, not the host
        sys.exit(130)
