"""Reading `nodeLifecycleActions` out of the files people have: a bare config, a
`create/update-compute-node-group` request as the AWS CLI takes it with `file://`, a
`get-compute-node-group` response, or a CloudFormation/SAM template (JSON or YAML with the short tags)."""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

from lifeguard.errors import InvalidLifecycleConfigError, Problem
from lifeguard.lifecycle import NodeLifecycleActions
from lifeguard_cli.cloudformation import NodeGroupLint, is_template

__all__ = [
    "ConfigDocument",
    "config_document",
    "group_document",
    "read_config_document",
    "read_data",
    "template_without_groups",
]

DocumentKind = Literal["bare", "request", "response", "template"]

# Suffixes read as JSON only: a broken JSON file is reported as JSON, not half-read as YAML.
_JSON_ONLY = (".json",)


@dataclass(frozen=True)
class ConfigDocument:
    """A file's config (or one node group's, in a template): parsed when valid, else every problem with
    its path in the file. `notes` are values nothing can check before deployment: intrinsic functions,
    which `intrinsics` maps by API path to their names (`config` holds stand-ins for them)."""

    path: Path
    kind: DocumentKind | None
    config: NodeLifecycleActions | None
    problems: tuple[Problem, ...]
    resource: str | None = None
    notes: tuple[Problem, ...] = ()
    intrinsics: Mapping[str, str] = field(default_factory=dict)

    @property
    def valid(self) -> bool:
        """True when PCS would accept the config."""
        return not self.problems


def _locate(data: object) -> tuple[DocumentKind, str, object]:
    if isinstance(data, Mapping):
        if "nodeLifecycleActions" in data:
            return "request", "nodeLifecycleActions", data["nodeLifecycleActions"]
        group = data.get("computeNodeGroup")
        if isinstance(group, Mapping) and "nodeLifecycleActions" in group:
            return "response", "computeNodeGroup.nodeLifecycleActions", group["nodeLifecycleActions"]
    return "bare", "", data


def read_data(path: Path) -> tuple[Any, Problem | None]:
    """A file's content: JSON, or (except for `.json` files) YAML with CloudFormation's short tags.

    A file that cannot be read or parsed gives None and the one problem that says why.
    """
    try:
        text = path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        return None, Problem("", f"cannot read the file: {exc}")
    try:
        return json.loads(text), None
    except json.JSONDecodeError as exc:
        if path.suffix.lower() in _JSON_ONLY:
            where = f"line {exc.lineno} column {exc.colno}"
            return None, Problem("", f"not valid JSON at {where}: {exc.msg}")
    import yaml  # type: ignore[import-untyped]  # PyYAML ships no types

    from lifeguard_cli.template import load_template

    try:
        return load_template(path), None
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        where = f" at line {mark.line + 1} column {mark.column + 1}" if mark else ""
        reason = getattr(exc, "problem", None) or exc
        return None, Problem("", f"neither JSON nor YAML{where}: {reason}")


def config_document(path: Path, data: object) -> ConfigDocument:
    """Validate the config in a parsed bare config, request or response."""
    kind, prefix, config = _locate(data)
    try:
        return ConfigDocument(path, kind, NodeLifecycleActions.from_api(config, path=prefix), ())
    except InvalidLifecycleConfigError as exc:
        return ConfigDocument(path, kind, None, exc.problems)


def group_document(path: Path, group: NodeGroupLint) -> ConfigDocument:
    """One node group of a template as a document: problems and notes point into the template."""
    return ConfigDocument(
        path, "template", group.config, group.problems, group.logical_id, group.notes, group.intrinsics
    )


def template_without_groups(path: Path) -> ConfigDocument:
    """A template with nothing to lint: valid, and a note that says so."""
    note = Problem("Resources", "no AWS::PCS::ComputeNodeGroup with NodeLifecycleActions: nothing to lint")
    return ConfigDocument(path, "template", None, (), notes=(note,))


def read_config_document(path: Path) -> ConfigDocument:
    """Read and validate one config file; a file that cannot be read or parsed, or a template, is one
    problem, not an exception."""
    data, problem = read_data(path)
    if problem is not None:
        return ConfigDocument(path, None, None, (problem,))
    if is_template(data):
        message = (
            "is a CloudFormation template; a nodeLifecycleActions file (bare, request or response) is needed"
        )
        return ConfigDocument(path, "template", None, (Problem("", message),))
    return config_document(path, data)
