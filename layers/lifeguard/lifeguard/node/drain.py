"""`lifeguard-node drain`: the nodeReady step a quarantine adds. When a lifecycle script fails with
STOP_SEQUENCE during this boot, the node is half-configured: drain it in Slurm, with a reason naming the
script, so it is kept for debugging and given no new job (nodeReady runs after slurmd registered the node:
a job Slurm gave it before the step keeps running). A node whose scripts all ran is left in service.

The step is first in nodeReady, since a STOP_SEQUENCE failure skips the rest of its own stage. When it runs,
executor.log can hold a failure of nodeBootstrapped, but not yet one of the nodeReady scripts after it:

- `drain`: a STOP_SEQUENCE failure recorded since this boot began drains the node at once.
- `watch`, in a detached process `start_watcher` starts (so the step ends at once and the sequence goes
  on): follows executor.log from where `drain` stopped reading and drains on the first STOP_SEQUENCE failure
  there. It ends at the boot's end record (the executor's "boot completed", or a next "boot started"), and
  after `DRAIN_WATCH_SECONDS` at the latest, since PCS's own agent may write no such record.

Either drains at most once; a node with no STOP_SEQUENCE failure is never drained.
Python 3.9 compatible (the node bundle runs it on the node's own Python).
"""

from __future__ import annotations

import json
import os
import re
import shutil
import socket
import subprocess
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from lifeguard.node import clock as node_clock
from lifeguard.node.defaults import DRAIN_WATCH_SECONDS
from lifeguard.node.executor import BOOT_COMPLETED, BOOT_STARTED, FAILURE_MESSAGES
from lifeguard.node.layout import FILE_MODE, NodeLayout, ensure_dir, open_log, read_lines

__all__ = [
    "DRAIN_POLL_SECONDS",
    "DRAIN_WATCH_SECONDS",
    "NOTHING_STOPPED",
    "DrainDecision",
    "booted_at",
    "drain",
    "find_scontrol",
    "start_watcher",
    "stopped_scripts",
    "watch",
]

SLURM_REASON_MAX_CHARS = 255
# A drain is tried again while slurmctld cannot be reached (busy with a wave of nodes registering, or
# failing over): the kept node would otherwise stay in service. Three tries of at most 20 s, 5 s apart: the
# minute one try had. Any other refusal (a node name Slurm does not know) is final at once.
SCONTROL_TIMEOUT_SECONDS = 20
SCONTROL_TRIES = 3
SCONTROL_PAUSE_SECONDS = 5.0
# What scontrol says of a slurmctld out of reach, or too busy to answer in time (a wave of registrations):
# worth another try, as no other refusal is.
_UNREACHED = ("Unable to contact slurm controller", "Socket timed out on send/recv operation")
# Where PCS installs Slurm on a node, one folder a version (the article's ready-check looks there too: a
# lifecycle script's PATH does not hold it).
PCS_SLURM_BINS = "opt/aws/pcs/scheduler/slurm-*/bin"
DRAIN_POLL_SECONDS = 0.25
NOTHING_STOPPED = "no lifecycle script stopped its sequence this boot"
_STOPPED = FAILURE_MESSAGES["STOP_SEQUENCE"]
_BOOT_ENDS = (BOOT_COMPLETED, BOOT_STARTED)


@dataclass(frozen=True)
class DrainDecision:
    """What `drain` or `watch` found and did."""

    stopped: tuple[str, ...]  # "<stage>/<script>" of each STOP_SEQUENCE failure this boot
    drained: bool
    reason: str
    error: str | None = None
    read_to: int = 0  # the bytes of executor.log read: a watcher follows from there


@dataclass(frozen=True)
class _Scan:
    stopped: tuple[str, ...]
    boot_over: bool
    offset: int


def booted_at(proc_stat: Path = Path("/proc/stat")) -> float:
    """This boot's start (epoch seconds) from the kernel's `btime`; 0 when it cannot be read."""
    try:
        for line in proc_stat.read_text().splitlines():
            if line.startswith("btime "):
                return float(line.split()[1])
    except (OSError, ValueError, IndexError):
        pass
    return 0.0


def _scan(layout: NodeLayout, since: float | None, offset: int, *, to_boot_end: bool) -> _Scan:
    """The STOP_SEQUENCE failures in executor.log's complete lines from byte `offset` (a line still being
    written waits for the next look), dated `since` or later when given. With `to_boot_end`, reading stops
    at the first record that ends the boot: what follows belongs to another boot. Without it, a boot's
    start (the executor's record) lets go of what was found before it: an earlier boot's, whatever its
    date (a clock that was ahead then); PCS's agent writes no such record, and its date alone decides. Read
    in chunks: a log of any size, or a line of any length, costs no more memory."""
    found: list[str] = []
    try:
        with open_log(layout.executor_log) as file:
            if os.fstat(file.fileno()).st_size < offset:
                offset = 0  # truncated or replaced: read it anew
            file.seek(offset)
            held, over = b"", False  # the line's pieces read so far; whether it is longer than any record
            for piece, after in read_lines(file, offset):
                offset = after
                if not over:
                    held += piece
                    over = len(held) > _RECORD_MAX_BYTES
                if not piece.endswith(b"\n"):
                    continue  # more of the line to come
                line, passed_over, held, over = held, over, b"", False
                if passed_over:
                    continue
                try:
                    record = json.loads(line)
                except ValueError:
                    continue
                if not isinstance(record, dict):
                    continue
                at = node_clock.read_stamp(record.get("timestamp"))
                if since is not None and at is not None and at < since:
                    continue
                message = record.get("message")
                if to_boot_end and message in _BOOT_ENDS:
                    return _Scan(tuple(found), True, offset)
                if message == BOOT_STARTED:
                    found.clear()
                if message == _STOPPED:
                    where = f"{record.get('stage', '?')}/{record.get('script', '?')}"
                    if where not in found:
                        found.append(where)
    except OSError:
        pass
    return _Scan(tuple(found), False, offset)


# No executor.log record is longer: a line that is, is passed over unread.
_RECORD_MAX_BYTES = 1024 * 1024


def stopped_scripts(layout: NodeLayout, since: float) -> list[str]:
    """`<stage>/<script>` of every STOP_SEQUENCE failure that executor.log records at or after `since`."""
    return list(_scan(layout, since, 0, to_boot_end=False).stopped)


def drain(
    layout: NodeLayout,
    reason: str,
    *,
    node_id: str | None = None,
    since: float | None = None,
    scontrol: str = "scontrol",
) -> DrainDecision:
    """Drain this node in Slurm if executor.log records a script that stopped its sequence this boot."""
    # The kernel's boot time on the node's clock (the executor dates its records by that clock).
    scan = _scan(layout, booted_at() + node_clock.offset() if since is None else since, 0, to_boot_end=False)
    if not scan.stopped:
        return DrainDecision((), False, NOTHING_STOPPED, read_to=scan.offset)
    return _drain_node(scan, reason, node_id, scontrol)


def watch(
    layout: NodeLayout,
    reason: str,
    *,
    offset: int,
    node_id: str | None = None,
    watch_seconds: float = DRAIN_WATCH_SECONDS,
    scontrol: str = "scontrol",
    poll_seconds: float = DRAIN_POLL_SECONDS,
    clock: Callable[[], float] = time.monotonic,
    sleep: Callable[[float], None] = time.sleep,
) -> DrainDecision:
    """Follow executor.log from byte `offset` until the boot ends, `watch_seconds` at most, and drain this
    node on the first STOP_SEQUENCE failure recorded there."""
    deadline = clock() + watch_seconds
    while True:
        scan = _scan(layout, None, offset, to_boot_end=True)
        offset = scan.offset
        if scan.stopped:
            return _drain_node(scan, reason, node_id, scontrol)
        if scan.boot_over:
            return DrainDecision((), False, f"{NOTHING_STOPPED}: the boot ended", read_to=offset)
        left = deadline - clock()
        if left <= 0:
            return DrainDecision((), False, f"{NOTHING_STOPPED} within {watch_seconds:g} s", read_to=offset)
        sleep(min(poll_seconds, left))


def find_scontrol(root: Path, path: str | None = None) -> str:
    """The node's scontrol: the one on PATH (`path`, default the environment's), else PCS's own under
    `root` (`PCS_SLURM_BINS`), of the newest Slurm version there; "scontrol" when neither has one (its run
    then says so)."""
    found = shutil.which("scontrol", path=path)
    if found:
        return found
    installed = [
        candidate
        for candidate in root.glob(PCS_SLURM_BINS + "/scontrol")
        if candidate.is_file() and os.access(candidate, os.X_OK)
    ]
    if not installed:
        return "scontrol"
    return str(max(installed, key=_slurm_version))


def _slurm_version(scontrol: Path) -> tuple[int, ...]:
    """(26, 5) of `…/slurm-26.05/bin/scontrol`: 9.x sorts before 10.x, as `sort` would not."""
    return tuple(int(part) for part in re.findall(r"\d+", scontrol.parent.parent.name))


# One Slurm node's name (PCS's are `<group name>-<n>`): never a host list (`lca-static-[1-100]`) or ALL,
# which `scontrol update NodeName=` would drain whole.
_ONE_NODE = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]{0,127}")


def _drain_node(scan: _Scan, reason: str, node_id: str | None, scontrol: str) -> DrainDecision:
    stopped = scan.stopped
    node = node_id or os.environ.get("PCS_NODE_ID") or socket.gethostname().split(".")[0]
    text = f"{reason} ({', '.join(stopped)})"[:SLURM_REASON_MAX_CHARS]
    if not _ONE_NODE.fullmatch(node) or node.upper() == "ALL":
        error = f"the node name {node[:130]!r} is not one Slurm node's: nothing drained"
        return DrainDecision(stopped, False, text, error, scan.offset)
    command = [scontrol, "update", f"NodeName={node}", "State=DRAIN", f"Reason={text}"]
    error = ""
    for tried in range(1, SCONTROL_TRIES + 1):
        if tried > 1:
            time.sleep(SCONTROL_PAUSE_SECONDS)
        error, final = _run_scontrol(command)
        if not error:
            return DrainDecision(stopped, True, text, read_to=scan.offset)
        if final:
            break
        error = f"{error} ({tried} {'try' if tried == 1 else 'tries'})"
    return DrainDecision(stopped, False, text, error, scan.offset)


def _run_scontrol(command: list[str]) -> tuple[str, bool]:
    """Run scontrol once: ("", _) when it drained the node, else its error and whether it is final (only
    slurmctld out of reach, or no answer in time, is worth another try)."""
    scontrol = command[0]
    try:
        done = subprocess.run(
            command, capture_output=True, text=True, timeout=SCONTROL_TIMEOUT_SECONDS, check=False
        )
    except FileNotFoundError as exc:
        where = f" (not on PATH, nor in /{PCS_SLURM_BINS})" if os.sep not in scontrol else ""
        return f"{scontrol} could not run: {exc.strerror}{where}", True
    except subprocess.TimeoutExpired as exc:
        return f"{scontrol} could not run: {exc}", False
    except OSError as exc:
        return f"{scontrol} could not run: {exc}", True
    if done.returncode != 0:
        said = (done.stderr or done.stdout).strip()
        detail = said.splitlines()[-1:] or [f"exit {done.returncode}"]
        return f"{scontrol} failed: {detail[0]}", not any(reason in said for reason in _UNREACHED)
    return "", True


def start_watcher(
    layout: NodeLayout,
    reason: str,
    *,
    offset: int,
    node_id: str | None = None,
    watch_seconds: float = DRAIN_WATCH_SECONDS,
) -> int:
    """Start `lifeguard-node drain --follow-from OFFSET` detached (its own session, no stdin, its output
    appended to `layout.drain_watch_log`) and return its pid without waiting for it."""
    # The folder (or the bundle's zip) this package was imported from, so the watcher runs the same code.
    home = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(filter(None, (home, env.get("PYTHONPATH"))))
    command = [sys.executable or "python3", "-u", "-m", "lifeguard.node", "drain", "--reason", reason]
    command += ["--root", os.path.abspath(layout.root), "--follow-from", str(offset)]
    command += ["--watch-seconds", repr(float(watch_seconds))]
    if node_id:
        command += ["--node-id", node_id]
    ensure_dir(layout.drain_watch_log.parent)
    log = os.open(layout.drain_watch_log, os.O_WRONLY | os.O_APPEND | os.O_CREAT, FILE_MODE)
    try:
        process = subprocess.Popen(
            command,
            stdin=subprocess.DEVNULL,
            stdout=log,
            stderr=log,
            cwd="/",
            env=env,
            start_new_session=True,  # out of the step's process group: PCS's end of the step leaves it be
        )
    finally:
        os.close(log)
    return process.pid
