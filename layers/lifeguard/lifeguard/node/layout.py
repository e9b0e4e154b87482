"""Where PCS keeps lifecycle-action files on a node, under a root directory (`/` on a real node)."""

from __future__ import annotations

import contextlib
import errno
import os
import stat
from collections.abc import Iterator
from pathlib import Path
from typing import BinaryIO

__all__ = [
    "DIR_MODE",
    "EXECUTOR_LOG_MODE",
    "FILE_MODE",
    "LOG_TAIL_BYTES",
    "NodeLayout",
    "UnsafeNameError",
    "atomic_write",
    "ensure_dir",
    "open_log",
    "read_lines",
]

# As PCS lays them out: stage folders drwxr-x---, script logs -rw-r-----, executor.log -rw-r--r--.
DIR_MODE = 0o750
FILE_MODE = 0o640
EXECUTOR_LOG_MODE = 0o644
# What a node report keeps of a run's output: its last 4 KiB (a node report's `log_tail`).
LOG_TAIL_BYTES = 4096


def output_tail(output: str | bytes) -> str:
    """The end of a run's output that fits in `LOG_TAIL_BYTES` of UTF-8: the one cut, on the node and in
    the Lambdas alike (bytes that are not UTF-8 read as U+FFFD; a character cut in two is dropped)."""
    text = output.decode("utf-8", "replace") if isinstance(output, bytes) else output
    encoded = text.encode()
    if len(encoded) <= LOG_TAIL_BYTES:
        return text
    return encoded[-LOG_TAIL_BYTES:].decode("utf-8", "ignore")


class UnsafeNameError(ValueError):
    """A script name that would leave its folder (the config check refuses these first)."""


class NodeLayout:
    """Paths of the node layout under `root`."""

    def __init__(self, root: Path) -> None:
        self.root = Path(root)
        self.actions = self.root / "var/log/amazon/pcs/lifecycle/actions"
        self.executor_log = self.actions / "executor.log"
        self.bootstrap_log = self.root / "var/log/amazon/pcs/bootstrap.log"
        self.config = self.root / "etc/amazon/pcs/lifecycle/actions/config"
        self.cache = self.config / "scripts"
        self.state = self.root / "var/lib/lifeguard"
        self.boot_state = self.state / "boot-state.json"
        self.shipper_state = self.state / "shipper-state.json"
        self.drain_watch_log = self.state / "drain-watch.log"  # what the drain step's watcher found and did

    def stage_dir(self, stage: str) -> Path:
        """The log folder of a stage."""
        return _child(self.actions, stage)

    def script_log(self, stage: str, name: str) -> Path:
        """`<stage>/<name>.log`; names keep their spaces but can never leave the stage folder."""
        return _child(self.stage_dir(stage), name + ".log")

    def cached_script(self, stage: str, name: str) -> Path:
        """The cached copy of a script."""
        return _child(_child(self.cache, stage), name)


def _child(parent: Path, name: str) -> Path:
    if not name or name in (".", "..") or "/" in name or "\0" in name or name != os.path.basename(name):
        raise UnsafeNameError(f"unsafe file name {name!r}")
    return parent / name


def open_log(path: Path) -> BinaryIO:
    """A log of the node layout, opened to be read: a regular file, not reached through a symlink, opened
    without waiting. A FIFO in a log's place held its reader forever, and a link to `/dev/zero` never ends:
    anything but a regular file raises OSError, as a log that cannot be read does."""
    fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC)
    try:
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            raise OSError(f"{path}: not a regular file")
        return os.fdopen(fd, "rb")
    except BaseException:
        os.close(fd)
        raise


def open_appended(path: Path, mode: int) -> int:
    """A log the executor writes (executor.log, bootstrap.log), opened to append (made with `mode` if
    missing): a regular file, not reached through a symlink, opened without waiting. A FIFO in its place
    held the boot forever (root runs it: a script or a hand may leave one); anything but a regular file
    raises OSError, as a log that cannot be written does."""
    flags = os.O_WRONLY | os.O_APPEND | os.O_CREAT | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC
    try:
        fd = os.open(path, flags, mode)
    except OSError as exc:
        if exc.errno == errno.ENXIO:  # a FIFO no one reads (or a device), refused rather than waited on
            raise OSError(errno.EINVAL, "not a regular file", str(path)) from None
        raise
    try:
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            raise OSError(errno.EINVAL, "not a regular file", str(path))
    except BaseException:
        os.close(fd)
        raise
    return fd


# Logs are read this much at a time, and a line longer than a piece comes in pieces: a log of any size, or a
# line of any length, costs no more memory to read.
READ_CHUNK_BYTES = 64 * 1024
LINE_PIECE_BYTES = 64 * 1024


def read_lines(file: BinaryIO, offset: int) -> Iterator[tuple[bytes, int]]:
    """The complete lines of `file` from `offset` (each with its newline, and the offset after it), read in
    chunks. A line longer than `LINE_PIECE_BYTES` comes in pieces, each but its last without a newline; a
    line still being written (no newline yet, shorter than a piece) is not given."""
    carry = b""
    while True:
        chunk = file.read(READ_CHUNK_BYTES)
        if not chunk:
            return
        data = carry + chunk
        start = 0
        while True:
            newline = data.find(b"\n", start)
            if newline < 0:
                break
            offset += newline + 1 - start
            yield data[start : newline + 1], offset
            start = newline + 1
        carry = data[start:]
        if len(carry) > LINE_PIECE_BYTES:
            offset += len(carry)
            yield carry, offset
            carry = b""


def ensure_dir(path: Path) -> Path:
    """Create `path` (and the parents it lacks) with PCS's folder mode. Each folder made gets the mode
    itself: `mkdir(parents=True)` leaves parents at the umask, and a world-writable parent of the script
    cache would let anyone swap a script that root runs on the next reboot."""
    missing: list[Path] = []
    folder = path
    while not folder.exists() and folder != folder.parent:
        missing.append(folder)
        folder = folder.parent
    for made in reversed(missing):
        with contextlib.suppress(FileExistsError):  # made meanwhile by another writer: given the mode below
            made.mkdir(mode=DIR_MODE)
        os.chmod(made, DIR_MODE)
    os.chmod(path, DIR_MODE)
    return path


def atomic_write(path: Path, data: bytes, mode: int) -> None:
    """Write via a temporary file and a rename, so a crash leaves the old file or the new, never half."""
    ensure_dir(path.parent)
    # A name no other writer picks (tempfile's mkstemp, without the imports a reboot would pay for it).
    temp = path.parent / f".tmp-{path.name}.{os.urandom(8).hex()}"
    fd = os.open(temp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC, 0o600)
    try:
        with os.fdopen(fd, "wb") as file:
            file.write(data)
            file.flush()
            os.fchmod(file.fileno(), mode)
            os.fsync(file.fileno())
        os.replace(temp, path)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(temp)
        raise
