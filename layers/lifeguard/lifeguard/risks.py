"""Risks in a valid `nodeLifecycleActions` config: things PCS accepts that hurt in production.

Each risk has a stable `code` for programs and a sentence for people, and points at the script by path.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from lifeguard.lifecycle import LifecycleScript, NodeLifecycleActions, StageName

__all__ = ["RISK_CODES", "Risk", "find_risks"]

RISK_CODES = (
    "optional-script-terminates",
    "unpinned-mutable-source",
    "stale-cache-every-boot",
    "updated-in-place",
    "node-ready-races-jobs",
)

# Word stems in a script's name or file name that say "nice to have": a failure should not cost the node.
_OPTIONAL_STEMS = (
    "optional",
    "check",
    "verify",
    "validat",
    "test",
    "debug",
    "diag",
    "report",
    "record",
    "notify",
    "metric",
    "monitor",
    "telemetry",
    "banner",
    "motd",
    "warm",
    "prefetch",
    "log",
    "inventory",
)
# Word stems that say "this sets the node up": work that jobs landing during nodeReady would race.
_SETUP_STEMS = (
    "install",
    "mount",
    "setup",
    "configur",
    "download",
    "pull",
    "sync",
    "fsx",
    "efs",
    "lustre",
    "nfs",
    "driver",
    "module",
    "package",
    "dnf",
    "yum",
    "pip",
    "conda",
    "spack",
    "container",
    "dataset",
)


def _has_stem(text: str, stems: tuple[str, ...]) -> bool:
    return any(word.startswith(stems) for word in re.split(r"[^a-z0-9]+", text.lower()) if word)


@dataclass(frozen=True)
class Risk:
    """One risk: a stable code, where it is, and what to do about it."""

    code: str
    path: str
    message: str

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
            risks.extend(_in_place_update(stage, path, script, previous, cache_once))
    return risks


def _script_risks(stage: StageName, path: str, script: LifecycleScript, cache_once: bool) -> list[Risk]:
    risks: list[Risk] = []
    source = script.script_source
    words = f"{script.name} {source.script_location.rsplit('/', 1)[-1]}"
    if script.on_error is None and _has_stem(words, _OPTIONAL_STEMS):
        risks.append(
            Risk(
                "optional-script-terminates",
                f"{path}.onError",
                f"{script.name!r} looks optional but is left on the default onError TERMINATE: one failure "
                "terminates the node and every replacement fails the same way; set CONTINUE (or "
                "STOP_SEQUENCE while debugging)",
            )
        )
    if not source.is_pinned:
        what = "an S3 object without s3VersionId" if source.is_s3 else "an https:// URL"
        risks.append(
            Risk(
                "unpinned-mutable-source",
                f"{path}.scriptSource",
                f"{script.name!r} runs {what} with no checksum: whatever is there when a node boots runs "
                "as root; pin it with checksum (sha256)" + (" or s3VersionId" if source.is_s3 else ""),
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
    if stage == "nodeReady" and _has_stem(words, _SETUP_STEMS):
        risks.append(
            Risk(
                "node-ready-races-jobs",
                path,
                f"{script.name!r} looks like node setup but runs in nodeReady, after slurmd registered: jobs "
                "can start before it finishes; move it to nodeBootstrapped, or drain the node while it runs",
            )
        )
    return risks


def _in_place_update(
    stage: StageName, path: str, script: LifecycleScript, previous: NodeLifecycleActions, cache_once: bool
) -> list[Risk]:
    found = previous.find_script(stage, script.name)
    if found is None or not cache_once or script.effective_execution_policy != "EVERY_BOOT":
        return []
    before = found[1].script_source
    after = script.script_source
    same_location = before.script_location == after.script_location
    if same_location and (before.checksum, before.s3_version_id) != (after.checksum, after.s3_version_id):
        return [
            Risk(
                "updated-in-place",
                f"{path}.scriptSource",
                f"{script.name!r} was updated in place at {after.script_location} and runs on EVERY_BOOT "
                "under CACHE_ONCE: nodes that booted before the change keep running the old cached copy on "
                "reboot; replace those nodes or use REFRESH_ON_REBOOT",
            )
        ]
    return []
