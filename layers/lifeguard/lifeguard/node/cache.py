"""The script cache: each script's copy under etc/amazon/pcs/lifecycle/actions/config/scripts.

A script is fetched by its location (retried, size- and checksum-checked: `lifeguard.node.fetch`), then
kept as `<stage>/<name>`, next to `<name>.source.json`, the record of the source it came from. A cached
copy is reused only for that same source (location, S3 version, checksum), and, when a checksum pins it,
only while its content is still that: a config that points a script elsewhere never runs the old copy, nor
does one whose copy changed on disk. Whether to reuse at all (scriptCachingPolicy) is the executor's call.
The fetcher (urllib, ssl) is imported at the first fetch: a reboot that reuses every copy never loads it.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import stat
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING

from lifeguard.named_tuple import NamedTuple
from lifeguard.node.layout import DIR_MODE, FILE_MODE, NodeLayout, atomic_write, open_log

if TYPE_CHECKING:
    from lifeguard.node.fetch import ScriptFetcher

__all__ = ["CACHED_SCRIPT_MODE", "ScriptCache", "ScriptSource"]

CACHED_SCRIPT_MODE = 0o750


class ScriptSource(NamedTuple):
    """Where a script's content comes from: what a cached copy must match to be reused."""

    location: str
    version_id: str | None = None
    checksum: str | None = None

    def as_record(self) -> dict[str, str | None]:
        """The source as the cache records it, in the PCS API's `scriptSource` words."""
        return {"scriptLocation": self.location, "s3VersionId": self.version_id, "checksum": self.checksum}


class ScriptCache:
    """The cached copies of a node's scripts, under its layout."""

    def __init__(
        self,
        layout: NodeLayout,
        *,
        fetchers: dict[str, ScriptFetcher] | None = None,
        backoff_seconds: float = 1.0,
    ) -> None:
        self.layout = layout
        self.fetchers = fetchers or {}
        self.backoff_seconds = backoff_seconds

    def path(self, stage: str, name: str) -> Path:
        """Where the cached copy of a script is (and where it runs from)."""
        return self.layout.cached_script(stage, name)

    def cached(self, stage: str, name: str, source: ScriptSource) -> bytes | None:
        """The cached copy, when it was fetched from `source` (and, when the source pins a `checksum`, its
        content still is that: a copy changed on disk since its download is fetched again, never run);
        None when there is no usable one."""
        path = self.path(stage, name)
        try:
            if not self._closed_to_others(path):
                return None  # what is there may be anyone's: fetched again, into folders now closed
        except OSError:
            return None  # the fetch says why
        try:
            if json.loads(_read(_record_path(path), _RECORD_MAX_BYTES)) != source.as_record():
                return None
            content = _read(path, CACHED_MAX_BYTES)
        except (OSError, ValueError):
            return None
        if source.checksum is not None and hashlib.sha256(content).hexdigest() != source.checksum.lower():
            return None
        return content

    def _closed_to_others(self, path: Path) -> bool:
        """Whether no folder from the cache's top (`etc/amazon` of the layout) down to `path`'s lets others
        than its owner write, and each folder of the cache itself (`scripts/` and below) is a real folder
        of the executor's own (root's, on a node). A folder that anyone may write (an image made so:
        `ensure_dir` sets the mode of the folders it makes, not of those there) lets a user put a folder,
        or a link to one, of theirs in a stage's place, with a script and its record in it, which root
        runs at the next reboot. Looked at from the top down, so that no folder is looked at through one
        not yet seen to be closed: one others may write loses their write bits (a folder of the cache gets
        PCS's folder mode); in the cache, a link, a file or another user's folder in a folder's place goes,
        with all it holds (a link is unlinked, never followed), and the fetch makes it again. Above the
        cache nothing is taken away: those folders hold the rest of the node's `etc/amazon` (an image may
        have left them a build user's, or made one a link), and a user who could write them could not
        have made them; a link there is followed and never changed. PermissionError when what is not the
        executor's cannot be taken away, or a link above the cache leads to a folder others may write."""
        # As text: every script's run looks at each folder, and Path's own work was most of a cached
        # reboot's time per script on the node's Python (0.3 ms of 0.45).
        cache = os.fspath(self.layout.cache)
        owner = os.geteuid()
        closed = True
        for folder in _folders_down(os.fspath(path), os.fspath(self.layout.root / "etc" / "amazon")):
            inside = folder == cache or folder.startswith(cache + os.sep)
            try:
                found = os.lstat(folder)
                if stat.S_ISLNK(found.st_mode) and not inside:
                    # A link above the cache (to a disk that persists, say) is followed, never changed: its
                    # target is not the node's to close. One others may write leaves no cache to trust.
                    target = os.stat(folder)
                    if stat.S_IMODE(target.st_mode) & 0o022:
                        raise PermissionError(
                            f"{folder}: a link above the script cache, to a folder others may write"
                        )
                    continue
            except FileNotFoundError:
                break  # nothing below it either: the fetch makes them (or says why it cannot)
            if inside and (not stat.S_ISDIR(found.st_mode) or found.st_uid != owner):
                _remove(Path(folder), found)
                if os.path.lexists(folder):
                    raise PermissionError(
                        f"{folder}: a link, a file or another user's folder in the script cache, which"
                        " cannot be taken away"
                    )
                return False
            mode = stat.S_IMODE(found.st_mode)
            if mode & 0o022:
                os.chmod(folder, DIR_MODE if inside else mode & ~0o022)
                closed = False
        return closed

    def fetch(
        self,
        stage: str,
        name: str,
        source: ScriptSource,
        *,
        on_retry: Callable[[int, str], None] | None = None,
    ) -> bytes:
        """Fetch the script from `source` and keep it as the cached copy, with its source record.

        Raises FetchError (the copy already cached stays as it was) when every try failed;
        `on_retry(attempt, reason)` hears of each failed try that will be retried.
        """
        from lifeguard.node.fetch import fetch_script

        path = self.path(stage, name)
        self._closed_to_others(path)
        content = fetch_script(
            source.location,
            version_id=source.version_id,
            checksum=source.checksum,
            backoff_seconds=self.backoff_seconds,
            fetchers=self.fetchers,
            on_retry=on_retry,
        )
        # The old record goes first: a node stopped between the two writes (a power loss) would otherwise
        # keep the new content under the old source, and a configuration set back to that source (a
        # revert) would run it. With no record the copy is fetched again.
        record = _record_path(path)
        with contextlib.suppress(FileNotFoundError):
            record.unlink()
        atomic_write(path, content, CACHED_SCRIPT_MODE)
        atomic_write(record, json.dumps(source.as_record()).encode(), FILE_MODE)
        return content


# PCS takes scripts of 2 MiB at most (`lifeguard.node.fetch.MAX_SCRIPT_BYTES`, not imported: a reboot that
# reuses every copy never loads the fetcher); a source record is a few hundred bytes.
CACHED_MAX_BYTES = 2 * 1024 * 1024
_RECORD_MAX_BYTES = 64 * 1024


def _read(path: Path, most: int) -> bytes:
    """A cached file, read as a log is (`open_log`: a regular file, not through a symlink, opened without
    waiting): a FIFO in its place held the reboot for ever (no script's timeout runs before its script
    starts), a link to /dev/zero ran it out of memory. Larger than `most`: ValueError, no copy; a file of
    another user's, or one others may write (put there while its folder was open to them): ValueError."""
    with open_log(path) as file:
        found = os.fstat(file.fileno())
        if found.st_uid != os.geteuid() or stat.S_IMODE(found.st_mode) & 0o022:
            raise ValueError(f"{path}: not the executor's own copy")
        # As large as the file says, not `most`: a buffer of 2 MiB made for each script of a few lines was a
        # fifth of a cached reboot's time per script. Grown since (one more byte came): read on to the bound.
        wanted = min(found.st_size, most) + 1
        data = file.read(wanted)
        if len(data) == wanted <= most:
            data += file.read(most + 1 - wanted)
    if len(data) > most:
        raise ValueError(f"{path}: larger than {most} bytes")
    return data


def _folders_down(path: str, top: str) -> list[str]:
    """The folders from `top` down to `path`'s own, as `Path.parent` names them (from the filesystem's
    root, or `.`, when `path` is not under `top`). Both as `os.fspath` gives a Path's: normalized, or the
    walk may pass `top` by and go on up."""
    folder = os.path.dirname(path) or "."
    folders = [folder]
    while folder != top:
        parent = os.path.dirname(folder) or "."
        if parent == folder:
            break
        folders.append(parent)
        folder = parent
    folders.reverse()
    return folders


def _remove(path: Path, found: os.stat_result) -> None:
    """Take away what is in a cache folder's place (`found`, its lstat): a link or a file unlinked, a
    folder removed with all it holds, links in it never followed."""
    if not stat.S_ISDIR(found.st_mode):
        with contextlib.suppress(FileNotFoundError):
            path.unlink()
        return
    import shutil  # only on a node whose cache was tampered with

    shutil.rmtree(path, ignore_errors=True)


def _record_path(path: Path) -> Path:
    return path.with_name(path.name + ".source.json")
