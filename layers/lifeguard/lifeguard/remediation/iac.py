"""Groups that infrastructure as code owns: its next deploy puts back whatever Lifeguard changed, so a
remediation of such a group says so, and what to put in the template to keep the change.

CloudFormation tags what it creates with `aws:cloudformation:stack-name`; Terraform tags nothing by itself,
so a group says it with a `managed-by` (or `ManagedBy`) tag whose value starts with `terraform`.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from lifeguard.bounds import clip
from lifeguard.lifecycle import ConfigChange
from lifeguard.values import frozen

__all__ = ["TAGS_TERRAFORM", "TAG_CLOUDFORMATION", "ManagedBy", "managed_by"]

TAG_CLOUDFORMATION = "aws:cloudformation:stack-name"
TAGS_TERRAFORM = ("managed-by", "ManagedBy")
_WORD = re.compile(r"(^|\.)([a-z])")
_UPPER = re.compile(r"([A-Z])")


@frozen
class ManagedBy:
    """The tool that owns a group, and its stack or workspace."""

    tool: str  # CloudFormation | Terraform
    name: str

    def note(self, changes: Sequence[ConfigChange], after: Mapping[str, Any] | None) -> str:
        """The sentences a remediation's reason ends with: the next deploy undoes the change; keep it so.
        A stage where a script is added or taken out is given whole, as `after` holds it: a path's index
        there is of the new list (of the old one for a script taken out), and the template holds the old
        one, so edits by index would land on other scripts."""
        edits = _edits(changes, after)
        if self.tool == "CloudFormation":
            paths = [
                f"NodeLifecycleActions.{_WORD.sub(_upper, path)}: {_value(new, _pascal)}"
                for path, new in edits
            ]
            return (
                f"This group belongs to CloudFormation stack {self.name}: its next deploy puts the old "
                "NodeLifecycleActions back. To keep this change, put it in the template: "
                + "; ".join(paths)
                + "."
            )
        paths = [
            f"node_lifecycle_actions.{_UPPER.sub(_snake, path)} = {_value(new, _snake_case)}"
            for path, new in edits
        ]
        return (
            f"This group is managed by Terraform ({self.name}): the next terraform apply puts the old "
            "lifecycle actions back. To keep this change, put it in the configuration: "
            + "; ".join(paths)
            + "."
        )


# The stage a change's path is in (`stages.nodeReady[0].onError`: nodeReady), and a change of a whole script
# (added or taken out), not of a field of one: `stages.nodeReady[0]`.
_STAGE = re.compile(r"stages\.([A-Za-z]+)")
_WHOLE_SCRIPT = re.compile(_STAGE.pattern + r"(?:\[\d+\])?")


def _edits(changes: Sequence[ConfigChange], after: Mapping[str, Any] | None) -> list[tuple[str, object]]:
    """(path, new value) of each edit to keep the change: the changes' own, but for a stage where a script
    was added or taken out, which is given whole (its list in `after`) once, where its first change was."""
    whole = {
        match.group(1) for change in changes if (match := _WHOLE_SCRIPT.fullmatch(change.path)) is not None
    }
    if not whole:
        return [(change.path, change.new) for change in changes]
    stages = after.get("stages") if isinstance(after, Mapping) else None
    edits: list[tuple[str, object]] = []
    given: set[str] = set()
    for change in changes:
        stage = found.group(1) if (found := _STAGE.match(change.path)) is not None else ""
        if stage not in whole:
            edits.append((change.path, change.new))
        elif stage not in given:
            given.add(stage)
            edits.append((f"stages.{stage}", stages.get(stage) if isinstance(stages, Mapping) else None))
    return edits


def managed_by(tags: Mapping[str, str]) -> ManagedBy | None:
    """Who owns the group, from its tags (None: nobody Lifeguard knows of)."""
    stack = tags.get(TAG_CLOUDFORMATION)
    if stack:
        return ManagedBy("CloudFormation", clip(stack, 128))
    for tag in TAGS_TERRAFORM:
        value = tags.get(tag, "")
        if value.strip().lower().startswith("terraform"):
            return ManagedBy("Terraform", clip(value, 128))
    return None


def _upper(match: re.Match[str]) -> str:
    return match.group(1) + match.group(2).upper()


def _snake(match: re.Match[str]) -> str:
    return "_" + match.group(1).lower()


def _pascal(key: str) -> str:
    return key[:1].upper() + key[1:]


def _snake_case(key: str) -> str:
    return _UPPER.sub(_snake, key)


def _keys(value: object, spell: Callable[[str], str]) -> object:
    """`value` with every key of its objects spelled as the tool spells properties (a script added
    whole: `ScriptSource`/`script_source`, not the API's `scriptSource`)."""
    if isinstance(value, Mapping):
        return {spell(str(key)): _keys(item, spell) for key, item in value.items()}
    if isinstance(value, list):
        return [_keys(item, spell) for item in value]
    return value


# A value is shown whole up to this (a script added with its arguments: an owner pastes it); past it, the
# event's config_after holds it.
_VALUE_MAX_CHARS = 2_000


def _value(value: object, spell: Callable[[str], str]) -> str:
    text = value if isinstance(value, str) else json.dumps(_keys(value, spell), separators=(",", ":"))
    if len(text) <= _VALUE_MAX_CHARS:
        return text
    return clip(text, _VALUE_MAX_CHARS - 40) + " (cut: config_after has it whole)"
