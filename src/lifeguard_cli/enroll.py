"""`lifeguard enroll`: put the stack's shipper entry first in a compute node group's `nodeBootstrapped`
stage (or take it out), so the group's nodes ship their script outcomes to Lifeguard.

The entry is the stack's output `ShipperLifecycleEntry`: `install-shipper.sh` pinned by `s3VersionId`
and `checksum`, given the bundle's location, sha256, the node-report log group and the bundle's version,
on EVERY_BOOT with onError CONTINUE. A group runs the shipper at most once: a script named
`lifeguard-shipper`, or one fetched from an `install-shipper.sh`, is the shipper whatever its version.
"""

from __future__ import annotations

import copy
import dataclasses
import hashlib
import json
from collections.abc import Collection, Mapping, Sequence
from dataclasses import dataclass
from typing import Any
from urllib.parse import urlsplit

from lifeguard.aws.pcs import GroupSnapshot, PcsGateway
from lifeguard.errors import AwsCallError, GroupNotFoundError, LifeguardError
from lifeguard.event_contract import NODES_REPLACED
from lifeguard.lifecycle import ConfigChange, NodeLifecycleActions, diff_configs, fingerprint_of
from lifeguard.lifecycle_rules import STAGES, find_problems
from lifeguard.pcs_model import shape
from lifeguard_cli.deployment import Deployment, command_line

__all__ = [
    "ENTRY_OUTPUT",
    "MAX_SCRIPTS_PER_STAGE",
    "SHIPPER_SCRIPT_NAME",
    "EnrollError",
    "EnrollResult",
    "ShipperEntry",
    "change_enrollment",
    "find_shipper",
    "with_shipper",
    "without_shipper",
]

ENTRY_OUTPUT = "ShipperLifecycleEntry"
SHIPPER_SCRIPT_NAME = "lifeguard-shipper"
INSTALLER_FILE_NAME = "install-shipper.sh"
STAGE = "nodeBootstrapped"
MAX_SCRIPTS_PER_STAGE = int(shape("NodeLifecycleScriptList")["max"])


class EnrollError(LifeguardError):
    """A group cannot be enrolled (or removed) as asked; the message says why in one line."""


@dataclass(frozen=True)
class ShipperEntry:
    """The stack's `nodeBootstrapped` script that installs the shipper, as the PCS API takes it."""

    script: Mapping[str, Any]

    @classmethod
    def from_deployment(cls, deployment: Deployment) -> ShipperEntry:
        """The entry of the stack's `ShipperLifecycleEntry` output, checked against PCS's rules."""
        raw = deployment.output(ENTRY_OUTPUT)
        where = f"stack {deployment.stack_name}'s {ENTRY_OUTPUT}"
        try:
            script = json.loads(raw)
        except ValueError:
            raise EnrollError(f"{where} is not JSON") from None
        if not isinstance(script, dict):
            raise EnrollError(f"{where} is not a lifecycle script object")
        problems = find_problems({"stages": {STAGE: [script]}})
        if problems:
            first = str(problems[0]).replace(f"stages.{STAGE}[0]", ENTRY_OUTPUT, 1)
            raise EnrollError(f"{where} is not a script PCS accepts: {first}")
        if script.get("name") != SHIPPER_SCRIPT_NAME or script.get("onError") != "CONTINUE":
            raise EnrollError(f"{where} must be named {SHIPPER_SCRIPT_NAME} with onError CONTINUE")
        return cls(script)

    @property
    def installer_location(self) -> str:
        """Where the installer script is fetched from."""
        return str(self.script["scriptSource"]["scriptLocation"])

    def pins(self) -> dict[str, str | None]:
        """What the entry pins: the installer's and the bundle's location, version and sha256, and the
        log group the node reports go to."""
        source = self.script["scriptSource"]
        arguments = list(self.script.get("arguments") or [])
        arguments += [None] * (4 - len(arguments))
        return {
            "installer_location": source.get("scriptLocation"),
            "installer_version_id": source.get("s3VersionId"),
            "installer_sha256": source.get("checksum"),
            "bundle_location": arguments[0],
            "bundle_sha256": arguments[1],
            "log_group": arguments[2],
            "bundle_version_id": arguments[3],
        }


def _is_shipper(script: Any, installer_location: str | None) -> bool:
    if not isinstance(script, Mapping):
        return False
    location = script.get("scriptSource", {}).get("scriptLocation")
    if not isinstance(location, str):
        return script.get("name") == SHIPPER_SCRIPT_NAME
    # The stack publishes its installer as lifeguard/install-shipper.sh: that key in any bucket is one of
    # its versions. A script of the group's own merely named install-shipper.sh elsewhere is not.
    path = urlsplit(location).path
    return (
        script.get("name") == SHIPPER_SCRIPT_NAME
        or location == installer_location
        or path.endswith(f"/lifeguard/{INSTALLER_FILE_NAME}")
    )


def find_shipper(
    actions: Mapping[str, Any] | None, installer_location: str | None = None
) -> list[tuple[str, int, Mapping[str, Any]]]:
    """Every script of `actions` that installs the shipper, as (stage, index, script)."""
    stages = (actions or {}).get("stages") or {}
    return [
        (stage, index, script)
        for stage in STAGES
        for index, script in enumerate(stages.get(stage) or [])
        if _is_shipper(script, installer_location)
    ]


def _check(config: dict[str, Any]) -> dict[str, Any]:
    problems = find_problems(config)
    if problems:
        raise EnrollError(f"the new configuration would not be valid: {problems[0]}")
    return config


def with_shipper(
    actions: Mapping[str, Any] | None,
    entry: ShipperEntry,
    group: str,
    *,
    remove: str = "lifeguard enroll --remove",
) -> dict[str, Any]:
    """`actions` with `entry` first in nodeBootstrapped; raises EnrollError when the group already runs
    the shipper first, runs another version of it (`remove`: the command that takes it out), or its stage
    is full. The stack's entry found elsewhere is moved first: after a script that terminates the node, it
    never runs in the very boot whose failure its reports are for."""
    found = find_shipper(actions, entry.installer_location)
    if found:
        stage, index, script = next((f for f in found if dict(f[2]) != dict(entry.script)), found[0])
        where = f"stages.{stage}[{index}] {script.get('name')!r}"
        if dict(script) != dict(entry.script):
            raise EnrollError(
                f"{group} already runs the shipper ({where}, another version); to run the stack's: "
                f"{remove}, then enroll again (PCS replaces the group's nodes at each)"
            )
        if len(found) == 1 and (stage, index) == (STAGE, 0):
            raise EnrollError(
                f"{group} already runs the shipper ({where}, the stack's current entry): nothing to do"
            )
        actions = without_shipper(actions, entry, group)  # then first, once
    config: dict[str, Any] = copy.deepcopy(dict(actions)) if actions else {"stages": {}}
    scripts = list(config["stages"].get(STAGE) or [])
    if len(scripts) >= MAX_SCRIPTS_PER_STAGE:
        raise EnrollError(
            f"{group}'s {STAGE} stage already holds {len(scripts)} scripts, PCS's maximum: "
            "make room for the shipper first"
        )
    config["stages"][STAGE] = [copy.deepcopy(dict(entry.script)), *scripts]
    return _check(config)


def without_shipper(actions: Mapping[str, Any] | None, entry: ShipperEntry, group: str) -> dict[str, Any]:
    """`actions` without any shipper script; raises EnrollError when there is none. A stage left empty
    is left out (PCS takes no empty stage)."""
    if not find_shipper(actions, entry.installer_location):
        raise EnrollError(f"{group} does not run the shipper: nothing to remove")
    config: dict[str, Any] = copy.deepcopy(dict(actions or {}))
    stages = config["stages"]
    for stage in STAGES:
        kept = [s for s in stages.get(stage) or [] if not _is_shipper(s, entry.installer_location)]
        if kept:
            stages[stage] = kept
        else:
            stages.pop(stage, None)
    return _check(config)


@dataclass(frozen=True)
class EnrollResult:
    """What `lifeguard enroll` did (or, with `--dry-run`, would do) to one group."""

    action: str
    cluster_id: str
    group_id: str
    group_name: str
    applied: bool
    entry: ShipperEntry
    config_before: Mapping[str, Any] | None
    config_after: Mapping[str, Any]
    changes: Sequence[ConfigChange]
    status: str

    def to_dict(self) -> dict[str, Any]:
        """As `--json` prints it."""
        return {
            "action": self.action,
            "cluster_id": self.cluster_id,
            "compute_node_group_id": self.group_id,
            "compute_node_group_name": self.group_name,
            "applied": self.applied,
            "dry_run": not self.applied,
            "status": self.status,
            "entry": dict(self.entry.script),
            "pins": self.entry.pins(),
            "config_before": self.config_before,
            "config_after": self.config_after,
            "diff": [change.to_detail() for change in self.changes],
        }

    def lines(self) -> list[str]:
        """The summary for a person."""
        what = f"the shipper goes first in {STAGE}" if self.action == "enroll" else "the shipper is taken out"
        lines = [f"{self.cluster_id}/{self.group_id} ({self.group_name}): {what}"]
        lines += [f"  {change.describe()}" for change in self.changes]
        if self.action == "enroll":
            pins = self.entry.pins()
            lines += [
                f"  installer {pins['installer_location']} version {pins['installer_version_id']} "
                f"sha256 {pins['installer_sha256']}",
                f"  bundle    {pins['bundle_location']} version {pins['bundle_version_id']} "
                f"sha256 {pins['bundle_sha256']}",
                f"  reports   to the log group {pins['log_group']}",
            ]
        run = "run it" if self.action == "enroll" else "run without it"
        # As the article saw: an update of the lifecycle actions has PCS drain the group's nodes and
        # replace them; whoever confirms should know the running ones go.
        lines.append(f"  {NODES_REPLACED} with nodes that {run}")
        if not self.applied:
            if self.status != "ACTIVE":
                lines.append(f"  the group is {self.status}: PCS takes no change until it is ACTIVE")
            lines.append("dry run: nothing changed")
        else:
            lines.append(f"applied (the group is {self.status}); nodes launched from now on {run}")
        return lines


def _client_token(action: str, group: GroupSnapshot, config: Mapping[str, Any]) -> str:
    # Tied to the group's modifiedAt: a retry of the same request never applies twice, while enrolling
    # again after a removal is a new request, not the answer cached for the first enrollment.
    seed = f"{group.cluster_id}:{group.group_id}:{group.modified_at_ms}:{fingerprint_of(config)}"
    return f"lifeguard-{action}-{hashlib.sha256(seed.encode()).hexdigest()[:40]}"


def change_enrollment(
    action: str,
    pcs: PcsGateway,
    entry: ShipperEntry,
    group_ref: str,
    cluster_ref: str,
    *,
    dry_run: bool = False,
    shown: EnrollResult | None = None,
    watched: Collection[str] = (),
    where: str = "",
) -> EnrollResult:
    """`enroll`: add `entry` first in the group's nodeBootstrapped stage; `remove`: take every shipper
    script out of its lifecycle actions (UpdateComputeNodeGroup with a clientToken). The group and cluster
    are ids or names. With `shown` (the dry run a person agreed to), only on the configuration it was
    worked out on. `watched`: the stack's ClusterIds (empty: every cluster); a group of another cluster
    is not enrolled, its nodes' reports never looked at. `where`: the options that chose the stack
    (`--local`, `--stack-name X`, ...), given in a command it tells to run."""
    try:
        group = pcs.get_group(cluster_ref, group_ref)
    except AwsCallError as exc:  # GroupNotFoundError among them
        missing = isinstance(exc, GroupNotFoundError)
        if not missing and exc.code != "AccessDeniedException":
            raise
        if pcs.known_cluster_id(cluster_ref) is None:  # the cluster is what PCS does not know
            raise EnrollError(f"no cluster {cluster_ref} in PCS; check --cluster") from None
        if not missing:
            raise  # a grant missing indeed
        if pcs.known_cluster_id(group_ref) is not None:  # a cluster given as the group, as history says it
            raise EnrollError(
                f"{group_ref} is a cluster, not a compute node group: "
                f"{command_line('status', '--cluster', group_ref, where=where)} lists its groups"
            ) from None
        raise EnrollError(f"no compute node group {group_ref} in cluster {cluster_ref}") from None
    if action == "enroll" and watched and group.cluster_id not in watched:
        raise EnrollError(
            f"cluster {group.cluster_id} is not one of the stack's ClusterIds "
            f"({', '.join(sorted(watched))}): its nodes' reports would be stored and never looked at; deploy "
            "the stack with it in ClusterIds first"
        )
    before = dict(group.node_lifecycle_actions) if group.node_lifecycle_actions else None
    if shown is not None and fingerprint_of(before) != fingerprint_of(shown.config_before):
        raise EnrollError(f"{group.group_id} changed while you were asked: nothing changed; run again")
    if action == "enroll":
        remove = command_line(
            "enroll", group.group_id, "--cluster", group.cluster_id, "--remove", where=where
        )
        after = with_shipper(before, entry, group.group_id, remove=remove)
    else:
        after = without_shipper(before, entry, group.group_id)
    changes = diff_configs(
        NodeLifecycleActions.from_api(before) if before else None, NodeLifecycleActions.from_api(after)
    )
    result = EnrollResult(
        action=action,
        cluster_id=group.cluster_id,
        group_id=group.group_id,
        group_name=group.name,
        applied=False,
        entry=entry,
        config_before=before,
        config_after=after,
        changes=changes,
        status=group.status,
    )
    if dry_run:
        return result
    if group.status != "ACTIVE":
        raise EnrollError(f"{group.group_id} is {group.status}; try again when it is ACTIVE")
    # PCS has no conditional update: the group is read again right before it is written, so a change
    # someone made meanwhile is not overwritten (what is left is the moment between the two calls).
    now = pcs.get_group(group.cluster_id, group.group_id)
    if now.modified_at_ms != group.modified_at_ms:
        changed = f"{group.group_id} was changed by someone else meanwhile; nothing changed: run again"
        raise EnrollError(changed)
    token = _client_token(action, group, after)
    updated = pcs.update_lifecycle_actions(group.cluster_id, group.group_id, after, token)
    return dataclasses.replace(result, applied=True, status=updated.status)
