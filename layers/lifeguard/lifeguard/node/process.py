"""Running one lifecycle script as a process, its output appended to the script's log.

A run is one block of the script's log (the node layout, `lifeguard.node.layout`):

    [start <name> args=["a","b"] @ <epoch s>]
    ...the script's stdout and stderr...
    [end <name> exit=<code> @ <epoch s>]

The script runs with no stdin, in its own process group; a file without "#!" runs under bash, as a shell would
run it (a program, an ELF file, runs itself). Its exit code reads as a shell's: the script's own status, 128+N
when signal N killed it, 126 when it could not be started, 124 when it outlived its timeout (as timeout(1)).
On a timeout its whole process group gets SIGTERM, then SIGKILL after a grace, so no child in it outlives it
(one that left the group, `setsid`, is its own: a daemon the script started).

A process already in the script's directory (`lifeguard-node boot` moves to the node's root) starts it
with posix_spawn: no copy of this process is made, which on the node's Python 3.9 (whose subprocess
forks) is about a millisecond a script. Anywhere else, subprocess starts it (imported then: a boot that
spawns never loads it, 4-5 ms of a start on 3.9). Both give the script the same: no stdin, the log as
stdout and stderr, its own session, default SIGPIPE and SIGXFSZ, no other file descriptor.
"""

from __future__ import annotations

import contextlib
import errno
import json
import os
import select
import signal
import time
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING

from lifeguard.named_tuple import NamedTuple
from lifeguard.node import clock as node_clock
from lifeguard.node.layout import FILE_MODE

if TYPE_CHECKING:
    import subprocess

__all__ = [
    "CANNOT_START_EXIT_CODE",
    "KILL_GRACE_SECONDS",
    "TIMEOUT_EXIT_CODE",
    "ProcessResult",
    "run_script",
    "stop_signal",
]

KILL_GRACE_SECONDS = 5.0
TIMEOUT_EXIT_CODE = 124  # as timeout(1) reports it
CANNOT_START_EXIT_CODE = 126  # as a shell reports a file it cannot run
INTERPRETER_SHOWN_BYTES = 200  # of a script's "#!" line, when its interpreter cannot be run


class ProcessResult(NamedTuple):
    """How a run ended: its exit code, why it failed (None when it exited 0), and where its block is in the
    script's log (from the start marker's first byte to just after the end marker)."""

    exit_code: int
    error: str | None
    log_span: tuple[int, int]


def run_script(
    name: str,
    script: Path,
    arguments: Sequence[str],
    *,
    content: bytes,
    log: Path,
    env: Mapping[str, str],
    cwd: Path,
    started: int,
    timeout_seconds: float,
    kill_grace_seconds: float = KILL_GRACE_SECONDS,
    clock: Callable[[], float] = node_clock.now,
) -> ProcessResult:
    """Run `script` (whose bytes are `content`) with `arguments`, appending its block to `log`.

    `started` is the epoch second the start marker carries; the end marker is dated by `clock`.
    """
    # Never through a symlink: a link planted in a log's place would have the script's output appended to
    # its target, and the target's mode changed.
    fd = os.open(log, os.O_RDWR | os.O_APPEND | os.O_CREAT | os.O_NOFOLLOW, FILE_MODE)
    os.fchmod(fd, FILE_MODE)
    try:
        log_start = os.lseek(fd, 0, os.SEEK_END)
        args = json.dumps(list(arguments), separators=(",", ":"), ensure_ascii=False)
        os.write(fd, f"[start {name} args={args} @ {started}]\n".encode())
        command = [str(script), *arguments]
        if not content.startswith((b"#!", b"\x7fELF")):  # a program runs itself, as a shell would run it
            command = ["/bin/bash", str(script), *arguments]
        try:
            exit_code, error = _run(
                name,
                command,
                fd,
                content=content,
                env=env,
                cwd=cwd,
                timeout_seconds=timeout_seconds,
                kill_grace_seconds=kill_grace_seconds,
            )
        except KeyboardInterrupt as exc:  # stopped with the boot: its block ends as any run's does
            _end_marker(fd, name, 128 + stop_signal(exc), clock)
            raise
        except ValueError:  # an argument the kernel cannot pass (a NUL byte): it never started
            _end_marker(fd, name, CANNOT_START_EXIT_CODE, clock)
            raise
        # The script has run: its exit status decides, as PCS judges a script, even when a full disk
        # takes its end marker (the shipper then reports it from the executor's record).
        _end_marker(fd, name, exit_code, clock)
        log_end = os.lseek(fd, 0, os.SEEK_END)
    finally:
        os.close(fd)
    return ProcessResult(exit_code, error, (log_start, log_end))


def _not_started(name: str, content: bytes, exc: OSError) -> str:
    """Why the script could not be started. The kernel says "No such file or directory" of a script that is
    there when the interpreter its first line names is not: that line is said, and a carriage return
    ending it (a script saved with Windows line endings: `#!/bin/bash\\r`, the classic), named."""
    said = f"script '{name}' could not be started: {exc.strerror}"
    if exc.errno != errno.ENOENT or not content.startswith(b"#!"):
        return said
    line = content[2:].split(b"\n", 1)[0]
    # As the kernel reads it: the interpreter is the line's first word, spaces and tabs around it.
    interpreter = line.lstrip(b" \t").replace(b"\t", b" ").split(b" ", 1)[0][:INTERPRETER_SHOWN_BYTES]
    shown = repr(interpreter.decode("utf-8", "replace"))
    if interpreter.endswith(b"\r"):
        windows = "its first line ends in a carriage return (Windows line endings)"
        return f"{said}: {windows}, so its interpreter is {shown}"
    if os.path.lexists(interpreter):  # there, but cannot start itself (a script whose own is missing)
        return f"{said}: its first line names the interpreter {shown}, which cannot be started"
    return f"{said}: the interpreter its first line names, {shown}, is not on the node"


def stop_signal(stopped: KeyboardInterrupt) -> int:
    """The signal that stopped the boot: the one a SIGTERM handler names (`signum`), else Ctrl-C's."""
    signum = getattr(stopped, "signum", signal.SIGINT)
    return int(signum)


def _end_marker(fd: int, name: str, exit_code: int, clock: Callable[[], float]) -> None:
    """The run's end marker, on its own line (a disk that refuses it costs the run nothing)."""
    with contextlib.suppress(OSError):
        size = os.lseek(fd, 0, os.SEEK_END)
        if size and os.pread(fd, 1, size - 1) != b"\n":
            os.write(fd, b"\n")  # the end marker starts its own line even after output without one
        os.write(fd, f"[end {name} exit={exit_code} @ {int(clock())}]\n".encode())


class _Spawned:
    """A script started by posix_spawn, waited for as a Popen is (-N when signal N killed it), but for
    its timeout: TimeoutError."""

    def __init__(self, pid: int) -> None:
        self.pid = pid
        self.returncode: int | None = None

    def wait(self, timeout: float | None = None) -> int:
        if self.returncode is None and timeout is not None and not self._ends_within(timeout):
            raise TimeoutError(timeout)
        if self.returncode is None:
            _, status = os.waitpid(self.pid, 0)
            self.returncode = os.waitstatus_to_exitcode(status)
        return self.returncode

    def _ends_within(self, timeout: float) -> bool:
        try:
            pidfd = os.pidfd_open(self.pid)
        except OSError:  # no descriptor to be had (EMFILE, ENFILE): poll, as Popen does
            return self._polled(timeout)
        try:
            return _ended(pidfd, timeout)
        finally:
            os.close(pidfd)

    def _polled(self, timeout: float) -> bool:
        deadline = time.monotonic() + timeout
        delay = 0.0005
        while True:
            pid, status = os.waitpid(self.pid, os.WNOHANG)
            if pid:
                self.returncode = os.waitstatus_to_exitcode(status)
                return True
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                return False
            time.sleep(min(delay, remaining))
            delay = min(delay * 2, 0.05)


def _spawn(command: list[str], fd: int, env: Mapping[str, str]) -> _Spawned:
    """posix_spawn the script in this process's directory, with what Popen below would give it."""
    inherited = [
        int(entry)
        for entry in os.listdir("/proc/self/fd")
        if int(entry) > 2 and _inheritable(int(entry))  # what this process was given, e.g. by its parent
    ]
    pid = os.posix_spawn(
        command[0],
        command,
        env,
        file_actions=[
            (os.POSIX_SPAWN_OPEN, 0, os.devnull, os.O_RDONLY, 0),
            (os.POSIX_SPAWN_DUP2, fd, 1),
            (os.POSIX_SPAWN_DUP2, fd, 2),
            *((os.POSIX_SPAWN_CLOSE, other) for other in inherited),
        ],
        setsid=True,
        setsigdef=(signal.SIGPIPE, signal.SIGXFSZ),
    )
    return _Spawned(pid)


# For annotations alone: made at run time, its text would be compiled (see `lifeguard.named_tuple`).
if TYPE_CHECKING:
    _Process = subprocess.Popen[bytes] | _Spawned


def _popen(command: list[str], fd: int, env: Mapping[str, str], cwd: Path) -> subprocess.Popen[bytes]:
    import subprocess  # here: a boot whose scripts are spawned never loads it

    return subprocess.Popen(
        command,
        stdin=subprocess.DEVNULL,
        stdout=fd,
        stderr=fd,
        env=env,
        cwd=str(cwd),
        start_new_session=True,  # its own process group, so a timeout kills its children too
    )


def _waited(process: _Process, timeout: float) -> int:
    """`process.wait(timeout)`, its timeout a TimeoutError whichever way the script was started."""
    if isinstance(process, _Spawned):
        return process.wait(timeout)
    import subprocess  # loaded already: the process is a Popen

    try:
        return process.wait(timeout=timeout)
    except subprocess.TimeoutExpired:
        raise TimeoutError(timeout) from None


def _inheritable(fd: int) -> bool:
    try:
        return os.get_inheritable(fd)
    except OSError:  # the directory listing's own descriptor, closed by now
        return False


def _can_spawn(cwd: Path, fd: int) -> bool:
    """posix_spawn when this process is in `cwd`, the log is not one of the standard descriptors it
    replaces, and the kernel gives pidfds and /proc (what `_Spawned` and `_spawn` rely on)."""
    if fd < 3 or not _SPAWN_SUPPORTED:
        return False
    try:
        return os.getcwd() == os.fspath(cwd)
    except OSError:
        return False


def _spawn_supported() -> bool:
    if not hasattr(os, "posix_spawn") or not hasattr(os, "pidfd_open") or not os.path.isdir("/proc/self/fd"):
        return False
    try:
        os.close(os.pidfd_open(os.getpid()))  # a kernel (or seccomp profile) may refuse it
    except OSError:
        return False
    return True


_SPAWN_SUPPORTED = _spawn_supported()


def _run(
    name: str,
    command: list[str],
    fd: int,
    *,
    content: bytes,
    env: Mapping[str, str],
    cwd: Path,
    timeout_seconds: float,
    kill_grace_seconds: float,
) -> tuple[int, str | None]:
    process: _Process
    try:
        process = _spawn(command, fd, env) if _can_spawn(cwd, fd) else _popen(command, fd, env, cwd)
    except OSError as exc:
        return CANNOT_START_EXIT_CODE, _not_started(name, content, exc)
    try:
        returncode = _wait(process, timeout_seconds)
    except TimeoutError:
        _kill(process, kill_grace_seconds)
        return TIMEOUT_EXIT_CODE, f"script '{name}' timed out after {timeout_seconds:g} s"
    except BaseException:  # the boot itself is being stopped (Ctrl-C, SIGTERM): its script goes with it
        _kill(process, kill_grace_seconds)
        raise
    if returncode == 0:
        return 0, None
    if returncode < 0:
        return (
            128 - returncode,
            f"script '{name}' was killed by signal {-returncode} ({_signal_name(-returncode)})",
        )
    # As PCS's agent writes it (the article's executor.log): the wait status of an exit, `code << 8`.
    return (
        returncode,
        f"script '{name}' failed with exit status ExitStatus(unix_wait_status({returncode << 8}))",
    )


def _signal_name(number: int) -> str:
    """SIGTERM, ...; a real-time signal, which has no name of its own, as SIGRTMIN+N."""
    try:
        return signal.Signals(number).name
    except ValueError:
        return f"SIGRTMIN+{number - signal.SIGRTMIN}" if number >= signal.SIGRTMIN else f"signal {number}"


def _wait(process: _Process, timeout_seconds: float) -> int:
    """The exit status, as soon as the process ends (a pidfd, not Popen.wait's polling, which notices an
    end only at its next poll: milliseconds per script)."""
    try:
        pidfd = os.pidfd_open(process.pid)
    except (AttributeError, OSError):  # not Linux 5.3+, or no descriptor to be had: polling
        return _waited(process, timeout_seconds)
    try:
        if not _ended(pidfd, timeout_seconds):
            raise TimeoutError(timeout_seconds)
        return process.wait()
    finally:
        os.close(pidfd)


def _ended(pidfd: int, timeout_seconds: float) -> bool:
    """Whether the process of `pidfd` ends within the timeout. poll, not select: select refuses a
    descriptor numbered 1024 or more, which a node with a higher limit and many files open can hand out."""
    poller = select.poll()
    poller.register(pidfd, select.POLLIN)
    return bool(poller.poll(max(timeout_seconds, 0.0) * 1000))


def _kill(process: _Process, grace_seconds: float) -> None:
    """SIGTERM the script's process group, then SIGKILL whatever is left of it after the grace. The grace
    ends early once the whole group has ended, not the script alone: a script without a trap ends at once,
    and its children, sent the same SIGTERM, may still be cleaning up (unmounting, releasing a lock)."""
    with contextlib.suppress(ProcessLookupError):
        os.killpg(process.pid, signal.SIGTERM)
    deadline = time.monotonic() + grace_seconds
    try:
        with contextlib.suppress(TimeoutError):
            _waited(process, grace_seconds)
        pause = 0.005
        while (left := deadline - time.monotonic()) > 0 and _group_runs(process.pid):
            time.sleep(min(pause, left))
            pause = min(pause * 2, 0.1)
    finally:  # a second stop (Ctrl-C twice, SIGTERM then SIGINT) cuts the grace short, never the kill
        with contextlib.suppress(ProcessLookupError):
            os.killpg(process.pid, signal.SIGKILL)
        process.wait()


def _group_runs(pgid: int) -> bool:
    """Whether a process of the group `pgid` still runs (a zombie, ended and not yet reaped, does not);
    where there is no /proc to tell, whether the group has any process at all."""
    try:
        os.killpg(pgid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        pass  # a process of it this one may not signal: it is there
    try:
        entries = os.listdir("/proc")
    except OSError:
        return True
    group = str(pgid).encode()
    for entry in entries:
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/stat", "rb") as stat:
                line = stat.read()
        except OSError:  # ended meanwhile
            continue
        state, _, pgrp = line[line.rfind(b")") + 2 :].split(b" ", 3)[:3]  # after the name: state ppid pgrp
        if pgrp == group and state != b"Z":
            return True
    return False
