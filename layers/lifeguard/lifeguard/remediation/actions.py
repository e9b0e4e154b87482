"""Remediation actions: a registry of small classes, each planning one kind of change and declaring the
PCS permissions that applying it needs (a test holds template.yaml to them).

An action only plans: it turns the group's current `nodeLifecycleActions` and what the detection knows into
the configuration to put in place, with the sentences a person needs to trust it. Applying, rails and
audit belong to `lifeguard.remediation.remediator`.
"""

from __future__ import annotations

import copy
from abc import ABC, abstractmethod
from collections.abc import Mapping
from dataclasses import field
from typing import Any, ClassVar

from lifeguard.errors import InvalidLifecycleConfigError
from lifeguard.lifecycle import ConfigChange, NodeLifecycleActions, diff_configs, fingerprint_of
from lifeguard.lifecycle_rules import DEFAULT_ON_ERROR, DRAIN_SCRIPT_NAME
from lifeguard.values import frozen

__all__ = [
    "ACTIONS",
    "DRAIN_SCRIPT_NAME",
    "ActionContext",
    "NodeBundle",
    "Notify",
    "Plan",
    "Quarantine",
    "RemediationAction",
    "Revert",
    "action_for",
]

_STAGES = ("nodeBootstrapped", "nodeReady")
_MAX_SCRIPTS_A_STAGE = 20
_MAX_ARGUMENT_CHARS = 256


@frozen
class NodeBundle:
    """Where the node bundle is, pinned: the stack publishes it to a versioned bucket and says its version
    and sha256, so a drain step Lifeguard writes keeps running the bytes it was written with."""

    location: str
    version_id: str | None = None
    sha256: str | None = None

    def script_source(self) -> dict[str, str]:
        """The `scriptSource` of a lifecycle script that runs the bundle."""
        source = {"scriptLocation": self.location}
        if self.version_id and self.location.startswith("s3://"):
            source["s3VersionId"] = self.version_id
        if self.sha256:
            source["checksum"] = self.sha256
        return source


@frozen
class ActionContext:
    """What an action plans from: the group's configuration now, the suspect script (stage, script) if
    known, the last proven-good configuration, and the node bundle when kept nodes are drained."""

    config: Mapping[str, Any] | None
    suspect: tuple[str, str] | None = None
    proven_good: Mapping[str, Any] | None = None
    node_bundle: NodeBundle | None = None
    proven_good_by: str | None = None  # e.g. "i-0a1b… at 2026-10-20 23:48:37 UTC"
    no_script_failed: bool = False  # the failing nodes' reports show every script they ran succeeded
    # The configurations the episode's loop ran on before Lifeguard's changes of it (an escalation's
    # current configuration is Lifeguard's own): a revert never puts one of them back.
    looped_on: tuple[Mapping[str, Any], ...] = ()
    # The configurations Lifeguard changed for an earlier loop since the proven-good one was proven: a
    # revert never puts one of them back either (a script it fetches may have broken in place since).
    looped_since_proof: tuple[Mapping[str, Any], ...] = ()
    # (stage, script) of the scripts besides the suspect whose failure ended a failing node's boot (a
    # loop failing on one script on some nodes, on another on others): a quarantine switches them too.
    also_failing: tuple[tuple[str, str], ...] = ()


@frozen
class Plan:
    """The configuration an action would put in place (None: no change) and why, in sentences."""

    action: str
    config_after: dict[str, Any] | None
    notes: tuple[str, ...] = ()
    changes: tuple[ConfigChange, ...] = field(default=())

    @property
    def changes_something(self) -> bool:
        """True when applying the plan changes the group's configuration."""
        return self.config_after is not None and bool(self.changes)


class RemediationAction(ABC):
    """One way to break a loop."""

    name: ClassVar[str]
    PERMISSIONS: ClassVar[tuple[str, ...]]

    @abstractmethod
    def plan(self, context: ActionContext) -> Plan:
        """The change this action would make to the group in `context`."""


ACTIONS: dict[str, type[RemediationAction]] = {}


def _register(cls: type[RemediationAction]) -> type[RemediationAction]:
    ACTIONS[cls.name] = cls
    return cls


def action_for(name: str) -> RemediationAction:
    """The registered action called `name`; raises KeyError naming the known ones."""
    try:
        return ACTIONS[name]()
    except KeyError:
        raise KeyError(f"no remediation action {name!r}; known: {', '.join(sorted(ACTIONS))}") from None


def _planned(action: str, before: Mapping[str, Any] | None, after: dict[str, Any], notes: list[str]) -> Plan:
    """A plan whose target configuration has been checked against PCS's rules."""
    try:
        new = NodeLifecycleActions.from_api(after)
    except InvalidLifecycleConfigError as exc:
        first = exc.problems[0]
        return Plan(action, None, (*notes, f"the planned configuration would be invalid ({first})"))
    old = NodeLifecycleActions.from_api(before) if before else None
    return Plan(action, new.to_api(), tuple(notes), tuple(diff_configs(old, new)))


@_register
class Quarantine(RemediationAction):
    """Switch the failing script(s) to `onError: STOP_SEQUENCE`, so the next node is kept (and drained,
    when the node bundle is available) instead of terminated."""

    name = "quarantine"
    PERMISSIONS = ("pcs:GetComputeNodeGroup", "pcs:UpdateComputeNodeGroup", "pcs:ListTagsForResource")

    def plan(self, context: ActionContext) -> Plan:
        if not context.config:
            return Plan(self.name, None, ("the group has no lifecycle actions to quarantine",))
        if context.no_script_failed:
            return Plan(
                self.name,
                None,
                (
                    "no script failed on these nodes (their reports show every script they ran succeeded), "
                    "so no script is switched: the boot failed outside the lifecycle scripts (the PCS agent, "
                    "slurmd or the AMI)",
                ),
            )
        after = copy.deepcopy(dict(context.config))
        stages: dict[str, list[dict[str, Any]]] = after.setdefault("stages", {})
        notes: list[str] = []
        targets = self._targets(stages, context.suspect, context.also_failing, notes)
        if not targets:
            notes.append("no script has an effective onError TERMINATE: nothing to switch")
            return Plan(self.name, None, tuple(notes))
        for stage, index in targets:
            stages[stage][index]["onError"] = "STOP_SEQUENCE"
        names = ", ".join(stages[stage][index]["name"] for stage, index in targets)
        notes.insert(
            0, f"onError STOP_SEQUENCE for {names}: a failure now keeps the node instead of terminating it"
        )
        if context.node_bundle:
            self._add_drain(stages, context.node_bundle, targets, notes)
        return _planned(self.name, context.config, after, notes)

    @staticmethod
    def _also(
        stages: Mapping[str, list[dict[str, Any]]],
        others: tuple[tuple[str, str], ...],
        suspect: tuple[str, int],
        notes: list[str],
    ) -> list[tuple[str, int]]:
        """The scripts besides the suspect (at `suspect`, its stage and index) that ended failing nodes'
        boots, where they are under TERMINATE (not Lifeguard's drain step), said in a note."""
        found = [
            (stage, index)
            for stage, name in others
            if name != DRAIN_SCRIPT_NAME
            for index, script in enumerate(stages.get(stage) or [])
            if script.get("name") == name
            and script.get("onError", DEFAULT_ON_ERROR) == "TERMINATE"
            and (stage, index) != suspect
        ]
        if found:
            names = ", ".join(f"{stage} › {stages[stage][index]['name']}" for stage, index in found)
            notes.append(f"also switched {names}: its failure ended the boot of other failing nodes")
        return found

    @classmethod
    def _targets(
        cls,
        stages: Mapping[str, list[dict[str, Any]]],
        suspect: tuple[str, str] | None,
        also_failing: tuple[tuple[str, str], ...],
        notes: list[str],
    ) -> list[tuple[str, int]]:
        if suspect is not None:
            stage, name = suspect
            for index, script in enumerate(stages.get(stage) or []):
                if script.get("name") == name:
                    if script.get("onError", DEFAULT_ON_ERROR) == "TERMINATE":
                        # With it, the other scripts that ended a failing node's boot (`also_failing`).
                        return [(stage, index), *cls._also(stages, also_failing, (stage, index), notes)]
                    notes.append(
                        f"the suspect {stage} › {name} already has onError {script['onError']}; "
                        "switching the scripts that can still terminate the node instead"
                    )
                    break
            else:
                notes.append(
                    f"the suspect {stage} › {name} is not in the current configuration; "
                    "switching the scripts that can terminate the node instead"
                )
        targets = [
            (stage, index)
            for stage in _STAGES
            for index, script in enumerate(stages.get(stage) or [])
            if script.get("onError", DEFAULT_ON_ERROR) == "TERMINATE"
            and script.get("name") != DRAIN_SCRIPT_NAME
        ]
        if suspect is None and targets:
            names = ", ".join(f"{stage} › {stages[stage][index]['name']}" for stage, index in targets)
            notes.append(
                f"suspect unknown (no node report): switched every script that can terminate a node: {names}"
            )
        return targets

    @staticmethod
    def _add_drain(
        stages: dict[str, list[dict[str, Any]]],
        bundle: NodeBundle,
        targets: list[tuple[str, int]],
        notes: list[str],
    ) -> None:
        ready = stages.setdefault("nodeReady", [])
        if any(script.get("name") == DRAIN_SCRIPT_NAME for script in ready):
            return
        if len(ready) >= _MAX_SCRIPTS_A_STAGE:
            notes.append("nodeReady already has 20 scripts: no drain step added; drain the kept node by hand")
            return
        names = ", ".join(stages[stage][index]["name"] for stage, index in targets)
        reason = f"lifeguard: kept for debugging, {names} failed"[:_MAX_ARGUMENT_CHARS]
        # First in nodeReady: a STOP_SEQUENCE failure skips the rest of its own stage, so a drain step
        # placed after a failing nodeReady script would never run.
        ready.insert(
            0,
            {
                "name": DRAIN_SCRIPT_NAME,
                "scriptSource": bundle.script_source(),
                "arguments": ["drain", "--reason", reason],
                "onError": "CONTINUE",
                # On every boot: a quarantined EVERY_BOOT script fails again on a reboot, and that node is
                # drained too (the step does nothing on a boot where no script stopped its sequence).
                "executionPolicy": "EVERY_BOOT",
            },
        )
        notes.append("added a nodeReady step that drains a node on which a quarantined script failed")


def _runs_as(config: Mapping[str, Any] | None) -> str:
    """What a configuration runs, as a fingerprint with every default written out (its plain fingerprint
    when it is not one PCS would take)."""
    if not config:
        return fingerprint_of(None)
    try:
        return NodeLifecycleActions.from_api(config).effective_fingerprint()
    except InvalidLifecycleConfigError:
        return fingerprint_of(config)


def _same_up_to(good: Mapping[str, Any], current: Mapping[str, Any] | None, suspect: tuple[str, str]) -> bool:
    """Whether two configurations run the same up to and including the script `suspect` ((stage, name))
    of `current`: the same scripts, in the same order, each as it is run (PCS's defaults spelled out or
    not), and the same settings around them. What runs after the failing script cannot be why it fails,
    so a revert that changes none of what runs up to it cannot stop the loop. False when the suspect is
    not in both."""
    stage, name = suspect
    if stage not in _STAGES:
        return False
    cut = []
    for config in (good, current or {}):
        stages = config.get("stages") or {}
        scripts = stages.get(stage) or []
        at = next((i for i, script in enumerate(scripts) if script.get("name") == name), None)
        if at is None:
            return False
        before = {s: stages[s] for s in _STAGES[: _STAGES.index(stage)] if stages.get(s)}
        cut.append(_runs_as({**config, "stages": {**before, stage: scripts[: at + 1]}}))
    return cut[0] == cut[1]


@_register
class Revert(RemediationAction):
    """Put back the group's last proven-good lifecycle configuration (quarantine when none is known)."""

    name = "revert"
    PERMISSIONS = ("pcs:GetComputeNodeGroup", "pcs:UpdateComputeNodeGroup", "pcs:ListTagsForResource")

    def plan(self, context: ActionContext) -> Plan:
        good = context.proven_good
        if good is None:
            return self._quarantine_instead(context, "no proven-good configuration is known")
        by = f" by {context.proven_good_by}" if context.proven_good_by else ""
        notes = [f"back to the configuration proven good{by}"]
        plan = _planned(self.name, context.config, copy.deepcopy(dict(good)), notes)
        if plan.config_after is None:  # kept before a rule PCS holds it to now: said as such, not as current
            return self._quarantine_instead(context, plan.notes[-1].replace("planned", "proven-good", 1))
        same = _runs_as(good)
        if not plan.changes_something or same == _runs_as(context.config):
            return self._quarantine_instead(context, "the proven-good configuration is the current one")
        if any(same == _runs_as(config) for config in context.looped_on):
            why = "the proven-good configuration is the one this loop began on (did what it fetches change?)"
            return self._quarantine_instead(context, why)
        if any(same == _runs_as(config) for config in context.looped_since_proof):
            why = "the proven-good configuration looped since it was proven (did what it fetches change?)"
            return self._quarantine_instead(context, why)
        if context.suspect is not None and _same_up_to(good, context.config, context.suspect):
            stage, name = context.suspect
            why = (
                f"the proven-good configuration runs what the current one runs up to and including the "
                f"failing script ({stage} › {name}), as it is: a node would fail the same way (did what it "
                "fetches change in place?)"
            )
            return self._quarantine_instead(context, why)
        return plan

    @staticmethod
    def _quarantine_instead(context: ActionContext, why: str) -> Plan:
        fallback = Quarantine().plan(context)
        notes = (f"{why}: quarantined instead", *fallback.notes)
        return Plan(fallback.action, fallback.config_after, notes, fallback.changes)


@_register
class TakeOutDrain(RemediationAction):
    """Take Lifeguard's drain step out again: PCS replaces the drained nodes as unhealthy (a drain/replace
    loop), so the kept nodes must stay in service undrained. Never a mode: the answer to a `replacement`
    loop that follows Lifeguard's own drain step."""

    name = "undrain"
    PERMISSIONS = ("pcs:GetComputeNodeGroup", "pcs:UpdateComputeNodeGroup")

    def plan(self, context: ActionContext) -> Plan:
        after = copy.deepcopy(dict(context.config or {}))
        stages: dict[str, list[dict[str, Any]]] = after.get("stages") or {}
        kept = {
            stage: [s for s in scripts if s.get("name") != DRAIN_SCRIPT_NAME]
            for stage, scripts in stages.items()
        }
        if kept == stages:
            return Plan(self.name, None, ("the configuration holds no drain step of Lifeguard's",))
        after["stages"] = {stage: scripts for stage, scripts in kept.items() if scripts}
        notes = [
            f"took out Lifeguard's {DRAIN_SCRIPT_NAME} step: PCS replaced the drained nodes as unhealthy, so "
            "kept nodes now stay in service undrained, with the quarantined script still failing"
        ]
        return _planned(self.name, context.config, after, notes)


@_register
class Notify(RemediationAction):
    """Change nothing; the plan is what quarantine would do (its `action` says so), published as a dry run."""

    name = "notify"
    PERMISSIONS = ("pcs:GetComputeNodeGroup", "pcs:ListTagsForResource")

    def plan(self, context: ActionContext) -> Plan:
        return Quarantine().plan(context)
