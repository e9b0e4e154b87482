"""A local AWS that stays up after the command that started it returns: `lifeguard local up` (the stack's
resources in it, as `sam deploy` makes them) and `lifeguard replay --keep` (what a replay left), until
`lifeguard local down`.

The command forks before it starts anything; the child makes the local AWS, writes its state file and the
command's output, and then serves in its own session until SIGTERM, while the parent relays that output
and returns. `--local` finds the local AWS through the state file: `LIFEGUARD_LOCAL_STATE`, else
`pcs-lifeguard/local.json` under `XDG_CACHE_HOME` (default `~/.cache`).
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import sys
import threading
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any

__all__ = [
    "exports",
    "foreign_state",
    "in_background",
    "read_state",
    "serve_until_stopped",
    "shell_environ",
    "starting",
    "state_path",
    "stop",
]

READY = b"\x00lifeguard-local-ready\n"  # the child's last word to its parent: up, and serving


def state_path() -> Path:
    """Where the running local AWS is described."""
    explicit = os.environ.get("LIFEGUARD_LOCAL_STATE")
    if explicit:
        return Path(explicit)
    cache = Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache")
    return cache / "pcs-lifeguard" / "local.json"


def read_state() -> dict[str, Any] | None:
    """The running local AWS (None when there is none: no state file, or its process is gone, or its pid
    is another process's now, as after a reboot)."""
    try:
        state = json.loads(state_path().read_text())
        pid = int(state["pid"])
        os.kill(pid, 0)
        if state.get("started") != _started(pid) or not isinstance(state.get("environ"), dict):
            return None
    except (OSError, ValueError, KeyError, TypeError, AttributeError):
        return None
    return state if isinstance(state, dict) else None


def _a_state(path: Path) -> bool:
    """Whether `path` holds a state file as `lifeguard local up` writes one (its process running or not):
    any other file is not this command's to delete, whatever `LIFEGUARD_LOCAL_STATE` names."""
    try:
        state = json.loads(path.read_bytes())
    except (OSError, ValueError):
        return False
    return (
        isinstance(state, dict)
        and isinstance(state.get("pid"), int)
        and isinstance(state.get("environ"), dict)
    )


def foreign_state() -> Path | None:
    """The state path, when a file is there that is not a state file (`_a_state`); else None."""
    path = state_path()
    return path if (path.exists() or path.is_symlink()) and not _a_state(path) else None


def _started(pid: int) -> str | None:
    """When process `pid` started (/proc's starttime, in clock ticks since boot): with the pid, a process's
    identity; None where there is no /proc."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    fields = stat.rpartition(")")[2].split()  # after the command name, which may hold spaces
    return fields[19] if len(fields) > 19 else None


def exports(environ: Mapping[str, str]) -> str:
    """The lines to paste into a shell to point the AWS CLI and boto3 at the local AWS."""
    return "\n".join(f"export {key}={value}" for key, value in environ.items())


@contextlib.contextmanager
def starting() -> Iterator[int]:
    """Hold the starts' lock (a file beside the state file) while a local AWS is started: two at once
    would each write the state file, and the first one's process would be left serving, stopped by no
    `local down`. Yields the lock's descriptor, which the started child must not keep (`in_background`'s
    `close_in_child`): the lock is let go once the new one is up."""
    import fcntl

    path = state_path().with_name(state_path().name + ".lock")
    path.parent.mkdir(parents=True, exist_ok=True)
    fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o600)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        yield fd
    finally:
        os.close(fd)


def shell_environ(state: Mapping[str, Any]) -> dict[str, str]:
    """What a shell needs exported for `--local` to find the running local AWS's stack or table."""
    environ = dict(state["environ"])
    if state.get("stack_name"):
        environ["LIFEGUARD_STACK_NAME"] = str(state["stack_name"])
    elif state.get("table"):
        environ["LIFEGUARD_TABLE"] = str(state["table"])
    return environ


def in_background(
    work: Callable[[Callable[[Mapping[str, Any]], None]], None], *, close_in_child: Sequence[int] = ()
) -> int:
    """Run `work(ready)` in a child that outlives this process; returns the exit status for this one.

    The child's stdout and stderr come to this process's until it calls `ready(state)`, which writes the
    state file and lets this process go: 0 when it did, else the child's exit status (at least 1). The
    child closes `close_in_child` first.
    """
    import selectors

    sys.stdout.flush()
    sys.stderr.flush()
    out_read, out_write = os.pipe()
    err_read, err_write = os.pipe()
    child = os.fork()
    if child:
        os.close(out_write)
        os.close(err_write)
        relayed = {out_read: sys.stdout.buffer, err_read: sys.stderr.buffer}
        selector = selectors.DefaultSelector()
        for fd in relayed:
            selector.register(fd, selectors.EVENT_READ)
        tail = b""
        while selector.get_map():
            for key, _ in selector.select():
                chunk = os.read(key.fd, 65536)
                if not chunk:
                    selector.unregister(key.fd)
                    os.close(key.fd)
                    continue
                if key.fd == out_read:  # the marker may come split over reads: hold back what could be it
                    chunk, tail = (tail + chunk), b""
                    shown, marker, _ = chunk.partition(READY)
                    if marker:
                        tail = READY
                    else:
                        keep = next((n for n in range(len(READY) - 1, 0, -1) if shown.endswith(READY[:n])), 0)
                        shown, tail = (shown[:-keep], shown[-keep:]) if keep else (shown, b"")
                    chunk = shown
                relayed[key.fd].write(chunk)
                relayed[key.fd].flush()
        if tail == READY:
            return 0
        _, status = os.waitpid(child, 0)  # it ended before it was up: its status is the command's
        code = os.waitstatus_to_exitcode(status)
        return 128 - code if code < 0 else code or 1
    os.close(out_read)
    os.close(err_read)
    for fd in close_in_child:
        os.close(fd)
    os.setsid()
    devnull = os.open(os.devnull, os.O_RDWR)
    os.dup2(devnull, 0)
    os.dup2(out_write, 1)
    os.dup2(err_write, 2)
    os.close(out_write)
    os.close(err_write)

    def ready(state: Mapping[str, Any]) -> None:
        path = state_path()
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(json.dumps({**state, "pid": os.getpid(), "started": _started(os.getpid())}, indent=2))
        # The parent may be gone (Ctrl-C as this one came up, after it relayed what is kept): what it said
        # is kept is kept all the same, not torn down by the broken pipe.
        with contextlib.suppress(OSError, ValueError):
            sys.stdout.flush()
            sys.stderr.flush()
            os.write(1, READY)
        os.dup2(devnull, 1)
        os.dup2(devnull, 2)

    code = 0
    try:
        work(ready)
    except SystemExit as exc:
        code = exc.code if isinstance(exc.code, int) else 1
    except BaseException as exc:  # noqa: BLE001 - the parent shows the line; nothing else will
        print(f"lifeguard local: {type(exc).__name__}: {exc}", file=sys.stderr, flush=True)
        code = 1
    finally:
        try:
            with contextlib.suppress(OSError, ValueError):  # the parent may be gone: a broken pipe
                sys.stdout.flush()
                sys.stderr.flush()
            with contextlib.suppress(OSError, ValueError, AttributeError):
                if json.loads(state_path().read_text()).get("pid") == os.getpid():
                    state_path().unlink()
        finally:
            os._exit(code)


def serve_until_stopped() -> None:
    """Block until SIGTERM or SIGINT (what `lifeguard local down` sends)."""
    stopped = threading.Event()
    for signum in (signal.SIGTERM, signal.SIGINT):
        signal.signal(signum, lambda *_: stopped.set())
    stopped.wait()


def stop(timeout_seconds: float = 15.0) -> int | None:
    """Stop the running local AWS; its pid, or None when none was running."""
    state = read_state()
    if state is None:
        if _a_state(state_path()):  # of a local AWS gone (a reboot, a kill): let go of
            with contextlib.suppress(OSError):
                state_path().unlink()
        return None
    pid = int(state["pid"])
    with contextlib.suppress(ProcessLookupError):
        os.kill(pid, signal.SIGTERM)
    deadline = time.monotonic() + timeout_seconds
    while time.monotonic() < deadline:
        try:
            os.kill(pid, 0)
        except ProcessLookupError:
            break
        time.sleep(0.05)
    else:
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, signal.SIGKILL)
    with contextlib.suppress(OSError):
        state_path().unlink()
    return pid
