"""Risks in a valid `nodeLifecycleActions` config: things PCS accepts that hurt in production.

Each risk has a stable `code` for programs and a sentence for people, and points at the script by path.
"""

from __future__ import annotations

import re

from lifeguard.lifecycle import LifecycleScript, NodeLifecycleActions, ScriptSource, StageName
from lifeguard.values import frozen

__all__ = ["RISK_CODES", "Risk", "find_risks"]

RISK_CODES = (
    "optional-script-terminates",
    "unpinned-mutable-source",
    "stale-cache-every-boot",
    "updated-in-place",
    "node-ready-races-jobs",
    "stop-sequence-hides-failures",
    "version-of-another-object",
    "first-boot-only-undone-by-reboot",
    "node-ready-terminates-active-node",
)

# Words in a script's name or file name that say "nice to have": a failure should not cost the node. Whole
# words with their usual endings, not prefixes: `setup-logical-volumes` or `restore-checkpoint` is not a log
# or a check, and telling its owner to let it fail would let nodes come up without their volumes.
# Of them, the words of a check: one of what the node cannot work without (`_GUARDED_WORDS`) is no option.
_CHECK_WORDS = (
    r"check(?:s|er|ers|ing|ed)?",
    r"verif(?:y|ies|ied|ier|ying|ication|ications)",
    r"validat(?:e|es|ed|ing|ion|ions|or|ors)",
    r"test(?:s|er|ers|ing|ed)?",
)
# Of them, the words of a report or a watch of something: with a check's, what sets nothing up (`_OBSERVING`).
_REPORT_WORDS = (r"report(?:s|er|ers|ing|ed)?", r"monitor(?:s|ing|ed)?")
_OPTIONAL_WORDS = (
    r"optional",
    *_CHECK_WORDS,
    *_REPORT_WORDS,
    r"debug(?:s|ging|ger)?",
    r"diag(?:s|nose|noses|nosis|nostic|nostics)?",
    r"record(?:s|er|ing|ed)?",
    r"notif(?:y|ies|ied|ier|ying|ication|ications)",
    r"metric(?:s)?",
    r"telemetry",
    r"banner(?:s)?",
    r"motd",
    r"warm(?:s|up|ing|ed)?",
    r"prefetch(?:es|er|ing|ed)?",
    r"log(?:s|ging|ger|gers|ged)?",
    r"inventor(?:y|ies)",
)
# Words that say "this sets the node up": work that jobs landing during nodeReady would race.
_SETUP_WORDS = (
    r"install(?:s|er|ers|ing|ed|ation|ations)?",
    r"mount(?:s|er|ing|ed)?",
    r"setup(?:s)?",
    r"configur(?:e|es|ed|ing|ation|ations)",
    r"download(?:s|er|ing|ed)?",
    r"pull(?:s|er|ing|ed)?",
    r"sync(?:s|er|ing|ed)?",
    r"fsx",
    r"efs",
    r"lustre",
    r"nfs",
    r"driver(?:s)?",
    r"modul(?:e|es)",
    r"packag(?:e|es|ing|ed)",
    r"dnf",
    r"yum",
    r"pip(?:3)?",
    r"conda",
    r"spack",
    r"container(?:s)?",
    r"dataset(?:s)?",
)

# What a node cannot work without: the article's case for TERMINATE is a failure that renders the node
# unusable, "such as shared storage mounts"; a driver or network adapter the node's jobs need is another, and
# so are its accelerators and its health (`gpu-check`, `verify-gpus`, `health-check`): a GPU node whose GPUs
# fail their check serves jobs that fail on it, and a replacement is what an HPC administrator wants.
_GUARDED_WORDS = (
    r"gpu(?:s)?",
    r"nvidia",
    r"cuda",
    r"nccl",
    r"neuron",
    r"health(?:y)?",
    r"mount(?:s|er|ing|ed)?",
    r"storage",
    r"fsx",
    r"efs",
    r"lustre",
    r"nfs",
    r"beegfs",
    r"gpfs",
    r"weka",
    r"scratch",
    r"driver(?:s)?",
    r"efa(?:s)?",
)

# What a reboot undoes unless it is done again: a mount, a tmpfs, a kernel setting or module loaded at run
# time, huge pages, swap. A storage name alone is not one (`install-lustre-client` installs, and that
# lasts), nor is a name that says it makes its work last (`persist-fstab-mounts`, `hugepages-grub`).
_REBOOT_UNDONE_WORDS = (
    r"(?:re)?mount(?:s|ing|ed)?",
    r"tmpfs",
    r"ramdisk",
    r"sysctl(?:s)?",
    r"modprobe",
    r"hugepage(?:s)?",
    r"swap(?:file)?",
)
_LASTING_WORDS = (
    r"fstab",
    r"persist(?:s|ent|ing|ed)?",
    r"grub",
    r"install(?:s|er|ing|ed)?",
    r"packag(?:e|es|ing|ed)",
)


def _words(forms: tuple[str, ...]) -> re.Pattern[str]:
    return re.compile("|".join(forms))


_OPTIONAL = _words(_OPTIONAL_WORDS)
_CHECK = _words(_CHECK_WORDS)
# The optional words that are not a check's: a report, log, notice or metric of a check (`report-gpu-check`,
# `notify-health-check`) leaves the node as it found it.
_BESIDE_A_CHECK = _words(tuple(word for word in _OPTIONAL_WORDS if word not in _CHECK_WORDS))
_GUARDED = _words(_GUARDED_WORDS)
_SETUP = _words(_SETUP_WORDS)
# A check, report or monitor of something (`verify-mounts`, `report-fsx`, `monitor-efs`) sets nothing up.
_OBSERVING = _words((*_CHECK_WORDS, *_REPORT_WORDS))
_REBOOT_UNDONE = _words(_REBOOT_UNDONE_WORDS)
# A name that begins with one of these sets something up (`mount-efs-logs`, `install-efa-driver`).
_SETUP_VERB = _words(
    (
        r"(?:re)?mount(?:s|ing)?",
        r"install(?:s|ing)?",
        r"setup",
        r"set",
        r"configur(?:e|es|ing)",
        r"attach(?:es|ing)?",
        r"load(?:s|ing)?",
        r"enabl(?:e|es|ing)",
        r"prepar(?:e|es|ing)",
    )
)
_LASTING = _words(_LASTING_WORDS)


# Where a name written in camelCase or PascalCase has a word boundary: `VerifyMounts`, `installCUDA`,
# `NFSMount` read as the words kebab-case would give.
_CASE_BOUNDARY = re.compile(r"(?<=[a-z0-9])(?=[A-Z])|(?<=[A-Z])(?=[A-Z][a-z])")
# The same, an acronym's plural kept whole (`CheckGPUs`: `gpus`, not `gp us`). Both readings are taken: this
# one alone reads `VerifyEFAIsUp` as `efais up`.
_PLURAL_BOUNDARY = re.compile(_CASE_BOUNDARY.pattern + r"(?![A-Z]s(?![a-z]))")  # on its last alternative


def _split(text: str) -> list[str]:
    """The words of `text` in order, lower-cased, split at anything but letters and digits."""
    return re.split(r"[^a-z0-9]+", text.lower())


def _words_of(text: str) -> set[str]:
    """The words of `text`, read as written (`FSx`) and split at its case (`VerifyMounts`, `CheckGPUs`)."""
    found = {*_split(text), *_split(_CASE_BOUNDARY.sub(" ", text)), *_split(_PLURAL_BOUNDARY.sub(" ", text))}
    found.discard("")
    return found


def _first_word(text: str) -> str:
    """The first word of `text` as `_words_of` reads it (`MountEfsLogs`: `mount`), past the number that
    orders a script among others (`01-mount-efs-logs`: `mount`), or ''."""
    return next((word for word in _split(_CASE_BOUNDARY.sub(" ", text)) if word and not word.isdigit()), "")


def _has_word(found: set[str], words: re.Pattern[str]) -> bool:
    """Whether one of `found` (`_words_of`) is one of `words`."""
    return any(words.fullmatch(word) for word in found)


@frozen
class Risk:
    """One risk: a stable code, where it is, and what to do about it."""

    code: str
    path: str
    message: str
    # What the risk is of, when its sentence does not say (a script's location): two risks of the same
    # sentence about different things are two risks (`lifeguard.handlers.config_review`). Not shown.
    about: str = ""

    def to_dict(self) -> dict[str, str]:
        """The risk as JSON for programs."""
        return {"code": self.code, "path": self.path, "message": self.message}


def find_risks(config: NodeLifecycleActions, previous: NodeLifecycleActions | None = None) -> list[Risk]:
    """The risks of `config`; with `previous` (the config it replaces), also scripts updated in place."""
    risks: list[Risk] = []
    cache_once = config.effective_script_caching_policy == "CACHE_ONCE"
    for stage, index, script in config.scripts():
        path = f"stages.{stage}[{index}]"
        risks.extend(_script_risks(stage, path, script, cache_once))
        if previous is not None:
            risks.extend(_in_place_update(stage, path, script, previous))
            risks.extend(_version_of_another_object(stage, path, script, previous))
    return risks


def _file_name(source: ScriptSource) -> str:
    """The file a script's location names: an https URL's last path segment, without its query or fragment
    (`mount-fsx.sh?ref=debug` is no debug script); an S3 key's last segment as it is (`?` and `#` are
    characters of a key)."""
    location = source.script_location
    if not source.is_s3:
        location = location.split("#", 1)[0].split("?", 1)[0]
    return location.rsplit("/", 1)[-1]


def _script_risks(stage: StageName, path: str, script: LifecycleScript, cache_once: bool) -> list[Risk]:
    risks: list[Risk] = []
    source = script.script_source
    file_name = _file_name(source)
    words = _words_of(f"{script.name} {file_name}")
    # A check of what the node cannot work without (`verify-mounts`, `check-shared-storage`) is no option,
    # nor is setting it up, said by the name's first word (`mount-efs-logs`, `install-nvidia-driver-debug`:
    # a node without its mount is what TERMINATE is for); a report, a log or a debug of it is
    # (`report-mount-status`, `log-mounts`, `debug-efa`).
    optional = script.on_error is None and _has_word(words, _OPTIONAL)
    guarded = _has_word(words, _GUARDED)
    guarded_check = guarded and _has_word(words, _CHECK) and not _has_word(words, _BESIDE_A_CHECK)
    guarded_setup = (
        guarded
        and any(_SETUP_VERB.fullmatch(_first_word(text)) for text in (script.name, file_name))
        and not _has_word(words, _OBSERVING)
    )
    told_optional = optional and not guarded_check and not guarded_setup
    if told_optional:
        risks.append(
            Risk(
                "optional-script-terminates",
                f"{path}.onError",
                f"{script.name!r} looks optional but is left on the default onError TERMINATE: one failure "
                "terminates the node and every replacement fails the same way; set CONTINUE (or "
                "STOP_SEQUENCE while debugging)",
            )
        )
    if script.on_error == "STOP_SEQUENCE":
        risks.append(
            Risk(
                "stop-sequence-hides-failures",
                f"{path}.onError",
                f"{script.name!r} runs under STOP_SEQUENCE: PCS logs its failure as a success (the node "
                "ACTIVE and serving, the rest of its stage skipped) and only the node's own logs tell; "
                "meant for debugging: once it is fixed, set TERMINATE or CONTINUE (`lifeguard undo` takes "
                "back a quarantine of Lifeguard's)",
            )
        )
    if not source.is_pinned:
        if not source.is_s3:
            what = "an https:// URL"
        elif source.s3_version_id == "null":
            what = "an S3 object at s3VersionId null (a bucket without versioning: each upload replaces it)"
        else:
            what = "an S3 object without s3VersionId"
        risks.append(
            Risk(
                "unpinned-mutable-source",
                f"{path}.scriptSource",
                f"{script.name!r} runs {what} with no checksum: whatever is there when a node boots runs "
                "as root; pin it with checksum (sha256)" + (" or s3VersionId" if source.is_s3 else ""),
                # The same risk of the script moved to another location (another owner's bucket) is the
                # change's own, not one the replaced configuration had already.
                about=source.script_location,
            )
        )
        if cache_once and script.effective_execution_policy == "EVERY_BOOT":
            risks.append(
                Risk(
                    "stale-cache-every-boot",
                    f"{path}.executionPolicy",
                    f"{script.name!r} runs on EVERY_BOOT under CACHE_ONCE from a location that can be "
                    "updated in place: rebooted nodes keep running the copy cached at first boot while new "
                    "nodes run the new one; pin the version or use REFRESH_ON_REBOOT",
                )
            )
    # A check or a report of a mount (`verify-mounts`, `report-mount-status`) sets nothing up to undo; a
    # mount of what is there for logs (`mount-efs-logs`) does.
    undone = (
        _has_word(words, _REBOOT_UNDONE)
        and (guarded_setup or not _has_word(words, _OPTIONAL))
        and not _has_word(words, _LASTING)
    )
    if script.execution_policy is None and undone:
        risks.append(
            Risk(
                "first-boot-only-undone-by-reboot",
                f"{path}.executionPolicy",
                f"{script.name!r} looks like setup a reboot undoes (a mount, a kernel setting) but leaves "
                "executionPolicy to its default FIRST_BOOT_ONLY: PCS does not run it again after a reboot "
                "(the article saw only EVERY_BOOT scripts run again), so a rebooted node serves jobs without "
                "what it set up, unless the script made that permanent (fstab); set EVERY_BOOT, as "
                "ParallelCluster ran every script, or FIRST_BOOT_ONLY to say it must run once",
            )
        )
    # A check or a report of setup (`verify-mounts`, `check-pip-packages`) sets nothing up for jobs to race:
    # it is the article's ready-check, where nodeReady is the place for it.
    if stage == "nodeReady" and _has_word(words, _SETUP) and not _has_word(words, _OBSERVING):
        risks.append(
            Risk(
                "node-ready-races-jobs",
                path,
                f"{script.name!r} looks like node setup but runs in nodeReady, after slurmd registered: jobs "
                "can start before it finishes; move it to nodeBootstrapped, or drain the node while it runs",
            )
        )
    if stage == "nodeReady" and script.on_error is None and not told_optional and not guarded_check:
        # Said once: an optional-looking one is told so above.
        risks.append(
            Risk(
                "node-ready-terminates-active-node",
                f"{path}.onError",
                f"{script.name!r} runs in nodeReady on the default onError TERMINATE: PCS logs the node "
                "ACTIVE before nodeReady runs and Slurm may already have given it jobs (the article), so a "
                "failure terminates a node running them, and each replacement fails the same way; set "
                "CONTINUE to keep the node (the article's ready-check), or TERMINATE to say it must not "
                "serve without the script",
            )
        )
    return risks


def _in_place_update(
    stage: StageName, path: str, script: LifecycleScript, previous: NodeLifecycleActions
) -> list[Risk]:
    """A script pinned to a new checksum at the same location. Fetched there by no S3 version before, the
    object was replaced in place (or the old checksum was wrong), and from its upload to the update (in
    either order) a node fetched content that did not match the checksum it was given, and failed the
    script; at the same S3 version, whose content never changes, one of the two checksums is wrong.
    Pinning an unpinned script (what `unpinned-mutable-source` advises) replaces nothing, and the nodes that
    booted before the update are not left running an old copy: PCS drains and replaces them (the article's
    update)."""
    found = previous.find_script(stage, script.name)
    if found is None:
        return []
    before, after = found[1].script_source, script.script_source
    old, new = _digest(before), _digest(after)
    if before.script_location != after.script_location or old is None or new is None:
        return []
    if old == new:
        return _new_version_old_checksum(script, path, before, after)
    version = _version(before)
    if version is None:
        message = (
            f"{script.name!r} was pinned to new content at the same location, {after.script_location}: the "
            "object there was replaced in place (or the old checksum was wrong), so a node that booted "
            "between its upload and this update fetched content that did not match the checksum it was "
            "given and failed the script; put new content at a new location"
            + (", or pin s3VersionId" if after.is_s3 and _version(after) is None else "")
        )
    elif version == _version(after):
        message = (
            f"{script.name!r} has a new checksum for the same s3VersionId {version}, whose content never "
            "changes: one of the two checksums is wrong, and if it is the new one every node fails the "
            "script"
        )
    else:
        return []  # nodes fetched the old version until the update, and the new one since
    return [Risk("updated-in-place", f"{path}.scriptSource", message)]


def _new_version_old_checksum(
    script: LifecycleScript, path: str, before: ScriptSource, after: ScriptSource
) -> list[Risk]:
    """A script moved to another S3 version of its object with the checksum of the one before (a new
    version uploaded, its s3VersionId given, its checksum not): unless the two hold the same bytes, every
    node fails the checksum, a download failure, and under the default TERMINATE loops."""
    old_version, new_version = _version(before), _version(after)
    if old_version is None or new_version is None or old_version == new_version:
        return []
    message = (
        f"{script.name!r} moved from s3VersionId {old_version} to {new_version} with the same checksum: "
        "unless the new version holds the same bytes, every node fails its checksum (a download failure) "
        "and fails the script; give the new version's checksum"
    )
    return [Risk("updated-in-place", f"{path}.scriptSource.checksum", message)]


def _version_of_another_object(
    stage: StageName, path: str, script: LifecycleScript, previous: NodeLifecycleActions
) -> list[Risk]:
    """A script moved to a new S3 location that keeps the s3VersionId of the old one (a copy of the old
    entry with its location edited): an S3 version is of one object, and a copy is given a version of its
    own, so no node finds that version there (NoSuchVersion) and each fails the script; under the default
    TERMINATE, the article's loop."""
    found = previous.find_script(stage, script.name)
    if found is None:
        return []
    before, after = found[1].script_source, script.script_source
    version = _version(after)
    if not after.is_s3 or version is None or before.script_location == after.script_location:
        return []
    if _version(before) != version:
        return []
    return [
        Risk(
            "version-of-another-object",
            f"{path}.scriptSource.s3VersionId",
            f"{script.name!r} moved from {before.script_location} to {after.script_location} but keeps the "
            f"old object's s3VersionId {version}: a version is of one object, so no node can fetch it at the "
            "new location and every one fails the script; give the new object's version",
        )
    ]


def _digest(source: ScriptSource) -> str | None:
    """The sha256 a source is pinned to (hex, in either case as PCS takes it)."""
    return source.checksum.lower() if source.checksum is not None else None


def _version(source: ScriptSource) -> str | None:
    """The S3 version a source is fetched at; the version `null`, or an empty one (PCS takes it), names the
    object as no version does."""
    return source.s3_version_id if source.s3_version_id not in ("null", "") else None
