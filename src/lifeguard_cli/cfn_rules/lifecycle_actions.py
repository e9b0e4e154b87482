"""Lifeguard's lint of PCS `NodeLifecycleActions` as cfn-lint rules: validation problems are errors, each
risk code is a warning of its own (so it can be ignored alone), and values that are intrinsic functions
are informational.

    cfn-lint template.yaml --append-rules lifeguard_cli.cfn_rules

The findings are those of `lifeguard lint` (`lifeguard_cli.cloudformation.lint_template`), pointed at the
template's lines by path.
"""

from __future__ import annotations

from typing import Any

from cfnlint.rules import CloudFormationLintRule, RuleMatch  # type: ignore[import-untyped]

from lifeguard_cli.cloudformation import FindingKind, TemplatePath, lint_template, render_path

__all__ = [
    "RISK_RULES",
    "IntrinsicNotChecked",
    "InvalidNodeLifecycleActions",
    "NodeReadyRacesJobs",
    "OptionalScriptTerminates",
    "StaleCacheEveryBoot",
    "StopSequenceHidesFailures",
    "UnpinnedMutableSource",
    "UpdatedInPlace",
]

_SOURCE_URL = "https://docs.aws.amazon.com/pcs/latest/userguide/node-lifecycle-actions.html"
_TAGS = ["resources", "pcs", "lifeguard"]


def _matches(cfn: Any, kind: FindingKind, code: str | None = None) -> list[Any]:
    """The findings of one kind (and risk code) in the template cfn-lint read, as its matches."""
    matches = []
    for group in lint_template(cfn.template):
        for finding in group.findings:
            if finding.kind == kind and finding.code == code:
                inside = render_path(finding.where[3:])  # from NodeLifecycleActions on
                where = _present(cfn.template, finding.where)
                matches.append(RuleMatch(where, f"{inside}: {finding.message}"))
    return matches


def _present(template: Any, where: TemplatePath) -> list[str | int]:
    """The longest part of `where` that is in the template: cfn-lint finds no line for a key that is
    absent (an `OnError` left to its default), so the match points at the object it belongs in."""
    node, present = template, []
    for part in where:
        in_mapping = isinstance(node, dict) and part in node
        in_list = isinstance(node, list) and isinstance(part, int) and part < len(node)
        if not (in_mapping or in_list):
            break
        node = node[part]
        present.append(part)
    return present


class _LifeguardRule:
    """What every rule here shares: where it is documented, its tags, and what it reports (the findings of
    one `kind`; for a risk rule, of one `risk_code`). Not a cfn-lint rule itself, so cfn-lint does not load
    it."""

    source_url = _SOURCE_URL
    tags = _TAGS
    kind: FindingKind = "risk"
    risk_code: str | None = None
    id: str

    def match(self, cfn: Any) -> list[Any]:
        """The template's findings this rule reports."""
        return _matches(cfn, self.kind, self.risk_code)


class InvalidNodeLifecycleActions(_LifeguardRule, CloudFormationLintRule):  # type: ignore[misc]
    """A config that PCS would reject, with every problem (Lifeguard's validation)."""

    id = "E9101"
    shortdesc = "PCS would reject these NodeLifecycleActions"
    description = "Validates AWS::PCS::ComputeNodeGroup NodeLifecycleActions with PCS's rules (Lifeguard)"
    kind = "problem"


class IntrinsicNotChecked(_LifeguardRule, CloudFormationLintRule):  # type: ignore[misc]
    """A value that is an intrinsic function, which nothing can check before the stack deploys."""

    id = "I9101"
    shortdesc = "NodeLifecycleActions value resolved only at deployment"
    description = "An intrinsic function in NodeLifecycleActions: Lifeguard cannot check its value"
    kind = "note"


class OptionalScriptTerminates(_LifeguardRule, CloudFormationLintRule):  # type: ignore[misc]
    """An optional-looking script left on the default onError TERMINATE."""

    id = "W9101"
    shortdesc = "Optional lifecycle script terminates the node on failure"
    description = "A check/report/log script on the default TERMINATE can start a boot loop (Lifeguard)"
    risk_code = "optional-script-terminates"


class UnpinnedMutableSource(_LifeguardRule, CloudFormationLintRule):  # type: ignore[misc]
    """A script fetched from a location that can change, with no checksum or S3 version."""

    id = "W9102"
    shortdesc = "Lifecycle script is not pinned"
    description = "A script without Checksum or S3VersionId runs whatever is there at boot (Lifeguard)"
    risk_code = "unpinned-mutable-source"


class StaleCacheEveryBoot(_LifeguardRule, CloudFormationLintRule):  # type: ignore[misc]
    """An unpinned EVERY_BOOT script under CACHE_ONCE: rebooted and new nodes run different copies."""

    id = "W9103"
    shortdesc = "EVERY_BOOT script can run a stale cached copy"
    description = "An unpinned EVERY_BOOT script under CACHE_ONCE diverges between nodes (Lifeguard)"
    risk_code = "stale-cache-every-boot"


class UpdatedInPlace(_LifeguardRule, CloudFormationLintRule):  # type: ignore[misc]
    """A script updated in place (needs the previous config, so a template alone never shows it)."""

    id = "W9104"
    shortdesc = "Lifecycle script updated in place"
    description = "A script pinned to new content at the same location was replaced in place (Lifeguard)"
    risk_code = "updated-in-place"


class NodeReadyRacesJobs(_LifeguardRule, CloudFormationLintRule):  # type: ignore[misc]
    """A setup-looking script in nodeReady, after slurmd registered: jobs can land before it finishes."""

    id = "W9105"
    shortdesc = "Setup script runs in NodeReady"
    description = "Setup work in NodeReady races the jobs Slurm already sends to the node (Lifeguard)"
    risk_code = "node-ready-races-jobs"


class StopSequenceHidesFailures(_LifeguardRule, CloudFormationLintRule):  # type: ignore[misc]
    """A script under STOP_SEQUENCE: PCS logs its failure as a success; meant for debugging."""

    id = "W9106"
    shortdesc = "Lifecycle script runs under STOP_SEQUENCE"
    description = "A STOP_SEQUENCE failure is logged as a success and hides in the node's logs (Lifeguard)"
    risk_code = "stop-sequence-hides-failures"


class VersionOfAnotherObject(_LifeguardRule, CloudFormationLintRule):  # type: ignore[misc]
    """A script moved to a new S3 location with the old one's s3VersionId (needs the previous config)."""

    id = "W9107"
    shortdesc = "Lifecycle script keeps another object's S3 version"
    description = "An S3VersionId carried over to a new ScriptLocation names no version there (Lifeguard)"
    risk_code = "version-of-another-object"


class FirstBootOnlyUndoneByReboot(_LifeguardRule, CloudFormationLintRule):  # type: ignore[misc]
    """Setup a reboot undoes (a mount, a kernel setting) on the default FIRST_BOOT_ONLY: not run again."""

    id = "W9108"
    shortdesc = "Setup a reboot undoes runs on the first boot only"
    description = "A mount left on the default FIRST_BOOT_ONLY is gone after a reboot (Lifeguard)"
    risk_code = "first-boot-only-undone-by-reboot"


class NodeReadyTerminatesActiveNode(_LifeguardRule, CloudFormationLintRule):  # type: ignore[misc]
    """A nodeReady script on the default onError TERMINATE: it fails on a node PCS already logged ACTIVE."""

    id = "W9109"
    shortdesc = "NodeReady script terminates an active node on failure"
    description = "A NodeReady script on the default TERMINATE ends a node that may run jobs (Lifeguard)"
    risk_code = "node-ready-terminates-active-node"


# Each risk code of the layer (`lifeguard.risks.RISK_CODES`) and the rule that reports it.
RISK_RULES: dict[str, type[_LifeguardRule]] = {
    str(rule.risk_code): rule
    for rule in (
        OptionalScriptTerminates,
        UnpinnedMutableSource,
        StaleCacheEveryBoot,
        UpdatedInPlace,
        NodeReadyRacesJobs,
        StopSequenceHidesFailures,
        VersionOfAnotherObject,
        FirstBootOnlyUndoneByReboot,
        NodeReadyTerminatesActiveNode,
    )
}
