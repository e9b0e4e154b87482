"""The script cache (`node.cache`): a fetched script is kept with the record of its source, and a cached
copy comes back only for that same source."""

from __future__ import annotations

import hashlib
import json
import os
import stat
from pathlib import Path
from typing import ClassVar

import pytest
from hypothesis import given
from hypothesis import strategies as st

from lifeguard.node.cache import ScriptCache, ScriptSource
from lifeguard.node.fetch import FetchError, ScriptFetcher
from lifeguard.node.layout import NodeLayout

STAGE, NAME = "nodeBootstrapped", "mount-fsx"
SCRIPT = b"#!/bin/bash\necho mounted\n"
SOURCE = ScriptSource("s3://lca-scripts-example/scripts/mount.sh")


class BucketFetcher(ScriptFetcher):
    """Serves objects from a dict; a key listed in `failures` fails that many tries first."""

    scheme: ClassVar[str] = "s3"
    permissions: ClassVar[tuple[str, ...]] = ()

    def __init__(self, objects: dict[str, bytes], failures: dict[str, int] | None = None) -> None:
        self.objects = objects
        self.failures = dict(failures or {})
        self.tries: list[tuple[str, str | None]] = []

    def fetch_once(self, location: str, version_id: str | None) -> bytes:
        self.tries.append((location, version_id))
        if self.failures.get(location, 0) > 0:
            self.failures[location] -= 1
            raise OSError("connection reset")
        if location not in self.objects:
            raise FetchError("NoSuchKey: The specified key does not exist.")
        return self.objects[location]


def cache_of(tmp_path: Path, fetcher: BucketFetcher) -> ScriptCache:
    return ScriptCache(NodeLayout(tmp_path), fetchers={"s3": fetcher}, backoff_seconds=0.0)


def mode(path: Path) -> int:
    return stat.S_IMODE(path.stat().st_mode)


def test_a_fetched_script_is_kept_with_its_source_record_under_the_pcs_cache(tmp_path: Path) -> None:
    cache = cache_of(tmp_path, BucketFetcher({SOURCE.location: SCRIPT}))
    assert cache.fetch(STAGE, NAME, SOURCE) == SCRIPT
    copy = tmp_path / "etc/amazon/pcs/lifecycle/actions/config/scripts" / STAGE / NAME
    assert cache.path(STAGE, NAME) == copy
    assert copy.read_bytes() == SCRIPT
    assert mode(copy) == 0o750
    record = copy.with_name(NAME + ".source.json")
    assert json.loads(record.read_text()) == {
        "scriptLocation": SOURCE.location,
        "s3VersionId": None,
        "checksum": None,
    }
    assert mode(record) == 0o640
    assert sorted(p.name for p in copy.parent.iterdir()) == [NAME, NAME + ".source.json"]


def test_the_cached_copy_comes_back_for_the_same_source_without_a_fetch(tmp_path: Path) -> None:
    fetcher = BucketFetcher({SOURCE.location: SCRIPT})
    cache = cache_of(tmp_path, fetcher)
    cache.fetch(STAGE, NAME, SOURCE)
    fetcher.objects[SOURCE.location] = b"#!/bin/bash\necho changed\n"
    assert cache.cached(STAGE, NAME, ScriptSource(SOURCE.location)) == SCRIPT
    assert len(fetcher.tries) == 1


@pytest.mark.parametrize(
    "other",
    [
        ScriptSource("s3://lca-scripts-example/scripts/other.sh"),
        ScriptSource(SOURCE.location, version_id="3HL4kqtJlcpXroDTDmJ.rmSpXd3dIbrHY"),
        ScriptSource(SOURCE.location, checksum=hashlib.sha256(SCRIPT).hexdigest()),
    ],
)
def test_a_copy_of_another_source_is_never_reused(tmp_path: Path, other: ScriptSource) -> None:
    cache = cache_of(tmp_path, BucketFetcher({SOURCE.location: SCRIPT}))
    cache.fetch(STAGE, NAME, SOURCE)
    assert cache.cached(STAGE, NAME, other) is None
    assert cache.cached(STAGE, NAME, SOURCE) == SCRIPT


DAMAGE = [
    "no copy",
    "no record",
    "record not json",
    "record of a list",
    # A FIFO held the reboot for ever, before any script's timeout ran; /dev/zero ran it out of memory.
    "copy a fifo",
    "record a fifo",
    "copy a link to /dev/zero",
    "copy over 2 MiB",
]


@pytest.mark.parametrize("damage", DAMAGE)
def test_no_usable_copy_is_none(tmp_path: Path, damage: str) -> None:
    cache = cache_of(tmp_path, BucketFetcher({SOURCE.location: SCRIPT}))
    cache.fetch(STAGE, NAME, SOURCE)
    copy = cache.path(STAGE, NAME)
    record = copy.with_name(NAME + ".source.json")
    if damage == "no copy":
        copy.unlink()
    elif damage == "no record":
        record.unlink()
    elif damage == "record not json":
        record.write_text("{half")
    elif damage == "record of a list":
        record.write_text(json.dumps([SOURCE.location]))
    elif damage.endswith("a fifo"):
        damaged = copy if damage.startswith("copy") else record
        damaged.unlink()
        os.mkfifo(damaged)
    elif damage == "copy a link to /dev/zero":
        copy.unlink()
        copy.symlink_to("/dev/zero")
    else:
        copy.write_bytes(b"#" * (2 * 1024 * 1024 + 1))
    assert cache.cached(STAGE, NAME, SOURCE) is None


def test_a_cache_folder_others_may_write_is_made_pcss_again(tmp_path: Path) -> None:
    """An image whose cache folder anyone may write (0777) let a user rename a stage's folder away and put
    their own script, and its source record, in its place: root ran it at the next reboot."""
    fetcher = BucketFetcher({SOURCE.location: SCRIPT})
    cache = cache_of(tmp_path, fetcher)
    cache.fetch(STAGE, NAME, SOURCE)
    scripts = tmp_path / "etc/amazon/pcs/lifecycle/actions/config/scripts"
    for folder in (scripts, scripts / STAGE, tmp_path / "etc/amazon"):
        folder.chmod(0o777)
    assert cache.cached(STAGE, NAME, SOURCE) is None  # what is there may be anyone's
    assert cache.fetch(STAGE, NAME, SOURCE) == SCRIPT
    folder = cache.path(STAGE, NAME).parent
    while folder != tmp_path / "etc":
        assert mode(folder) & 0o022 == 0, folder
        folder = folder.parent
    assert cache.cached(STAGE, NAME, SOURCE) == SCRIPT
    assert len(fetcher.tries) == 2


OTHER_UID = 65534  # nobody
as_root = pytest.mark.skipif(os.geteuid() != 0, reason="making a file another user's takes root")


def plant(
    folder: Path,
    name: str,
    script: bytes,
    source: ScriptSource,
    *,
    uid: int | None = OTHER_UID,
    bits: int = 0o755,
) -> None:
    """What a user who may write `folder` puts there: a script of theirs under `name` and the record of the
    source the configuration names, so that the copy looks fetched from it."""
    folder.mkdir(exist_ok=True)
    for path, data in (
        (folder / name, script),
        (folder / f"{name}.source.json", json.dumps(source.as_record()).encode()),
    ):
        path.unlink(missing_ok=True)
        path.write_bytes(data)
        path.chmod(bits)
        if uid is not None:
            os.chown(path, uid, uid)


@as_root
def test_a_stage_folder_of_another_user_is_taken_away_not_trusted_for_its_mode(tmp_path: Path) -> None:
    """With the cache's folder open to all, a user put a folder of theirs (0755) in a stage's place, with a
    script and its record: the folder's mode was made PCS's again, but the folder stayed theirs, and root
    ran their script at the reboot after."""
    fetcher = BucketFetcher({SOURCE.location: SCRIPT})
    cache = cache_of(tmp_path, fetcher)
    cache.fetch(STAGE, NAME, SOURCE)
    stage = cache.path(STAGE, NAME).parent
    stage.parent.chmod(0o777)
    for path in stage.iterdir():
        path.unlink()
    stage.rmdir()
    stage.mkdir(mode=0o755)
    os.chown(stage, OTHER_UID, OTHER_UID)
    plant(stage, NAME, b"#!/bin/bash\necho theirs\n", SOURCE)
    for _ in range(2):  # the second look finds every folder closed: the planted copy is still not theirs
        assert cache.cached(STAGE, NAME, SOURCE) is None
    assert cache.fetch(STAGE, NAME, SOURCE) == SCRIPT
    assert stage.lstat().st_uid == os.geteuid()
    assert mode(stage) == 0o750
    assert cache.cached(STAGE, NAME, SOURCE) == SCRIPT


@as_root
def test_a_copy_planted_while_its_folder_was_open_is_fetched_again_after_the_folder_is_closed(
    tmp_path: Path,
) -> None:
    """The first script of an open stage folder closes it (and is fetched again); a second script's copy,
    put there by another user meanwhile, was then reused as root's own."""
    other = ScriptSource("s3://lca-scripts-example/scripts/other.sh")
    fetcher = BucketFetcher({SOURCE.location: SCRIPT, other.location: b"#!/bin/bash\necho other\n"})
    cache = cache_of(tmp_path, fetcher)
    cache.fetch(STAGE, NAME, SOURCE)
    cache.fetch(STAGE, "other", other)
    stage = cache.path(STAGE, NAME).parent
    stage.chmod(0o777)
    plant(stage, "other", b"#!/bin/bash\necho theirs\n", other)
    assert cache.cached(STAGE, NAME, SOURCE) is None  # the folder was open: closed now, fetched again
    assert cache.cached(STAGE, "other", other) is None
    planted_by_root = b"#!/bin/bash\necho open to all\n"
    plant(stage, "other", planted_by_root, other, uid=None, bits=0o777)  # root's, writable by anyone
    assert cache.cached(STAGE, "other", other) is None
    assert cache.fetch(STAGE, "other", other) == b"#!/bin/bash\necho other\n"
    assert cache.cached(STAGE, "other", other) == b"#!/bin/bash\necho other\n"


def test_a_link_in_a_cache_folders_place_is_unlinked_never_followed(tmp_path: Path) -> None:
    """A stage folder that is a link to a folder anyone may write (/tmp): its target was made 0750 and
    root's script written into it, where anyone could swap it before it ran."""
    fetcher = BucketFetcher({SOURCE.location: SCRIPT})
    cache = cache_of(tmp_path, fetcher)
    cache.fetch(STAGE, NAME, SOURCE)
    stage = cache.path(STAGE, NAME).parent
    shared = tmp_path / "shared"
    shared.mkdir()
    shared.chmod(0o1777)
    plant(shared, NAME, b"#!/bin/bash\necho theirs\n", SOURCE, uid=None)
    for path in stage.iterdir():
        path.unlink()
    stage.rmdir()
    stage.symlink_to(shared)
    assert cache.cached(STAGE, NAME, SOURCE) is None
    assert not stage.is_symlink()
    assert mode(shared) == 0o1777
    assert sorted(p.name for p in shared.iterdir()) == [NAME, f"{NAME}.source.json"]
    assert cache.fetch(STAGE, NAME, SOURCE) == SCRIPT
    assert stage.is_dir()
    assert not stage.is_symlink()
    assert mode(stage) == 0o750
    assert (shared / NAME).read_bytes() == b"#!/bin/bash\necho theirs\n"


def test_a_cache_folder_that_cannot_be_taken_away_fails_the_fetch(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A folder in the cache's place that stays there (removing it failed) is never written into."""
    import lifeguard.node.cache as cache_module

    fetcher = BucketFetcher({SOURCE.location: SCRIPT})
    cache = cache_of(tmp_path, fetcher)
    stage = cache.path(STAGE, NAME).parent
    stage.parent.mkdir(parents=True)
    stage.symlink_to(tmp_path)
    monkeypatch.setattr(cache_module, "_remove", lambda path, found: None)
    assert cache.cached(STAGE, NAME, SOURCE) is None
    with pytest.raises(PermissionError, match="in the script cache, which cannot be taken away"):
        cache.fetch(STAGE, NAME, SOURCE)
    assert fetcher.tries == []


@as_root
@pytest.mark.parametrize("above", ["etc/amazon", "etc/amazon/pcs/lifecycle/actions/config"])
def test_a_folder_above_the_cache_of_another_user_or_a_link_is_closed_never_taken_away(
    tmp_path: Path, above: str
) -> None:
    """The folders above `scripts/` hold the rest of the node's `etc/amazon` (SSM's, PCS's own): an image
    that left one a build user's, or made `config` a link to a disk that persists, lost them all (rmtree)
    at the first look. They are closed to others, never taken away."""
    fetcher = BucketFetcher({SOURCE.location: SCRIPT})
    cache = cache_of(tmp_path, fetcher)
    cache.fetch(STAGE, NAME, SOURCE)
    folder = tmp_path / above
    beside = folder / "agent-config.json"
    beside.write_text("{}")
    os.chown(folder, OTHER_UID, OTHER_UID)
    folder.chmod(0o777)
    assert cache.cached(STAGE, NAME, SOURCE) is None  # it was open: closed now, the script fetched again
    assert beside.read_text() == "{}"
    assert mode(folder) == 0o755  # closed to others' writes, still theirs to read
    assert cache.fetch(STAGE, NAME, SOURCE) == SCRIPT
    assert cache.cached(STAGE, NAME, SOURCE) == SCRIPT
    assert beside.read_text() == "{}"
    # A link in its place, to a folder kept elsewhere: followed, not unlinked.
    kept = tmp_path / "persist"
    folder.rename(kept)
    folder.symlink_to(kept)
    assert cache.cached(STAGE, NAME, SOURCE) == SCRIPT
    assert folder.is_symlink()
    assert (kept / "agent-config.json").read_text() == "{}"


def test_a_link_above_the_cache_is_followed_and_never_changed(tmp_path: Path) -> None:
    """`etc/amazon/pcs` a link to a folder elsewhere: its target had its mode changed (a link to /tmp took
    every user's write away), and the cache's folders were taken away there. A link to a closed folder is
    followed; one to a folder others may write leaves no cache to trust: nothing is reused or fetched."""
    fetcher = BucketFetcher({SOURCE.location: SCRIPT})
    cache = cache_of(tmp_path, fetcher)
    cache.fetch(STAGE, NAME, SOURCE)
    pcs = tmp_path / "etc/amazon/pcs"
    elsewhere = tmp_path / "persist"
    pcs.rename(elsewhere)
    pcs.symlink_to(elsewhere)
    assert cache.cached(STAGE, NAME, SOURCE) == SCRIPT  # a closed folder: followed
    elsewhere.chmod(0o1777)
    assert cache.cached(STAGE, NAME, SOURCE) is None
    with pytest.raises(PermissionError, match="a link above the script cache, to a folder others may write"):
        cache.fetch(STAGE, NAME, SOURCE)
    assert mode(elsewhere) == 0o1777
    assert pcs.is_symlink()
    assert (elsewhere / "lifecycle/actions/config/scripts" / STAGE / NAME).read_bytes() == SCRIPT
    assert len(fetcher.tries) == 1


def test_a_cache_on_a_filesystem_that_ignores_modes_still_fetches(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """On a mount whose modes cannot change (vfat, CIFS with dir_mode=0777), a folder stays open however
    often it is closed: the fetch still takes the script (as before folders were held to their owner),
    and the copy is fetched again at each look, never reused from a folder anyone may write."""
    import lifeguard.node.cache as cache_module

    fetcher = BucketFetcher({SOURCE.location: SCRIPT})
    cache = cache_of(tmp_path, fetcher)
    cache.fetch(STAGE, NAME, SOURCE)
    cache.path(STAGE, NAME).parent.chmod(0o777)
    monkeypatch.setattr(cache_module.os, "chmod", lambda path, mode: None)
    assert cache.cached(STAGE, NAME, SOURCE) is None
    assert cache.fetch(STAGE, NAME, SOURCE) == SCRIPT
    assert cache.cached(STAGE, NAME, SOURCE) is None
    assert len(fetcher.tries) == 2


def test_nothing_is_cached_before_a_fetch(tmp_path: Path) -> None:
    cache = cache_of(tmp_path, BucketFetcher({}))
    assert cache.cached(STAGE, NAME, SOURCE) is None
    assert not (tmp_path / "etc").exists()


def test_a_failed_fetch_leaves_the_cached_copy_as_it_was(tmp_path: Path) -> None:
    fetcher = BucketFetcher({SOURCE.location: SCRIPT})
    cache = cache_of(tmp_path, fetcher)
    cache.fetch(STAGE, NAME, SOURCE)
    mismatched = ScriptSource(SOURCE.location, checksum="0" * 64)
    with pytest.raises(FetchError, match="after 3 attempts: checksum mismatch"):
        cache.fetch(STAGE, NAME, mismatched)
    assert cache.cached(STAGE, NAME, SOURCE) == SCRIPT
    assert cache.cached(STAGE, NAME, mismatched) is None


def test_a_node_stopped_between_the_copy_and_its_record_never_reuses_the_copy_for_the_old_source(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The new content under the old source's record: a configuration set back to the old source (a revert)
    would have run the new script from the cache."""
    import lifeguard.node.cache as cache_module

    new = ScriptSource("s3://lca-scripts-example/scripts/mount-v2.sh")
    cache = cache_of(tmp_path, BucketFetcher({SOURCE.location: SCRIPT, new.location: b"#!/bin/bash\nv2\n"}))
    cache.fetch(STAGE, NAME, SOURCE)
    written = cache_module.atomic_write

    def stopped_before_the_record(path: Path, data: bytes, mode: int) -> None:
        if path.name.endswith(".source.json"):
            raise KeyboardInterrupt  # the power goes
        written(path, data, mode)

    monkeypatch.setattr(cache_module, "atomic_write", stopped_before_the_record)
    with pytest.raises(KeyboardInterrupt):
        cache.fetch(STAGE, NAME, new)
    assert cache.path(STAGE, NAME).read_bytes() == b"#!/bin/bash\nv2\n"
    assert cache.cached(STAGE, NAME, SOURCE) is None
    assert cache.cached(STAGE, NAME, new) is None


def test_a_checksum_and_version_are_passed_on_and_a_good_checksum_is_kept(tmp_path: Path) -> None:
    fetcher = BucketFetcher({SOURCE.location: SCRIPT})
    cache = cache_of(tmp_path, fetcher)
    source = ScriptSource(
        SOURCE.location, version_id="v1", checksum=hashlib.sha256(SCRIPT).hexdigest().upper()
    )
    assert cache.fetch(STAGE, NAME, source) == SCRIPT
    assert fetcher.tries == [(SOURCE.location, "v1")]
    assert cache.cached(STAGE, NAME, source) == SCRIPT


def test_each_retried_try_is_told_and_the_script_is_kept_once_fetched(tmp_path: Path) -> None:
    fetcher = BucketFetcher({SOURCE.location: SCRIPT}, failures={SOURCE.location: 2})
    cache = cache_of(tmp_path, fetcher)
    retries: list[tuple[int, str]] = []
    assert cache.fetch(STAGE, NAME, SOURCE, on_retry=lambda n, why: retries.append((n, why))) == SCRIPT
    assert retries == [(1, "connection reset"), (2, "connection reset")]
    assert cache.cached(STAGE, NAME, SOURCE) == SCRIPT


def test_the_caches_bound_is_the_fetchers() -> None:
    """The cache keeps its own copy of the fetcher's 2 MiB (a reboot that reuses every copy never imports
    the fetcher): the two stay one bound."""
    from lifeguard.node.cache import CACHED_MAX_BYTES
    from lifeguard.node.fetch import MAX_SCRIPT_BYTES

    assert CACHED_MAX_BYTES == MAX_SCRIPT_BYTES


_SEGMENT = st.sampled_from(["etc", "amazon", "pcs", "scripts", "a", "b", ".", "..", ""])


@given(
    lead=st.sampled_from(["", "/", "//", "./"]),
    top=st.lists(_SEGMENT, max_size=4),
    below=st.lists(_SEGMENT, max_size=5),
    under=st.booleans(),
)
def test_the_folders_looked_at_are_those_path_s_parents_walk(
    lead: str, top: list[str], below: list[str], under: bool
) -> None:
    """The folders `_closed_to_others` looks at, from the cache's top down, worked out as text: the same as
    Path's own walk up (which cost 0.3 ms a script on the node's Python), for any layout root."""
    from lifeguard.node.cache import _folders_down

    top_path = Path(lead + "/".join(top))
    script = Path(lead + "/".join([*(top if under else ["x"]), *below, "script"]))
    walked = [script.parent]
    while walked[-1] != top_path and walked[-1] != walked[-1].parent:
        walked.append(walked[-1].parent)
    assert _folders_down(os.fspath(script), os.fspath(top_path)) == [str(f) for f in reversed(walked)]


def test_a_copy_that_grew_after_its_size_was_read_is_read_whole_and_held_to_the_bound(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A cached file is read to the size its fstat gave, plus one byte: one that grew meanwhile is read on,
    to the cache's bound and no further."""
    from lifeguard.node import cache as node_cache

    copy = tmp_path / "copy"
    real_fstat = os.fstat

    def smaller(fd: int) -> os.stat_result:  # the size before the file grew
        found = real_fstat(fd)
        return os.stat_result((*found[:6], 3, *found[7:]))

    monkeypatch.setattr(node_cache.os, "fstat", smaller)
    copy.write_bytes(b"#!/bin/bash\necho grown\n")
    copy.chmod(0o640)
    assert node_cache._read(copy, 1000) == b"#!/bin/bash\necho grown\n"
    with pytest.raises(ValueError, match="larger than 20 bytes"):
        node_cache._read(copy, 20)
    copy.write_bytes(b"x" * 21)
    assert node_cache._read(copy, 21) == b"x" * 21  # at the bound exactly: whole


def test_a_regular_file_whose_size_says_zero_is_read_whole() -> None:
    """A file whose fstat says 0 bytes though it holds more (/proc's) is read on past its size."""
    from lifeguard.node import cache as node_cache

    proc = Path("/proc/self/mountinfo")
    if not proc.exists() or os.stat(proc).st_uid != os.geteuid():
        pytest.skip("no /proc/self of this user's")
    assert os.stat(proc).st_size == 0
    data = node_cache._read(proc, 1 << 20)
    assert data.endswith(b"\n")
    assert data.count(b"\n") == proc.read_bytes().count(b"\n")
