"""Reading `nodeLifecycleActions` out of the files people have: a bare config, a
`create/update-compute-node-group` request as the AWS CLI takes it with `file://`, or a
`get-compute-node-group` response."""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

from lifeguard.errors import InvalidLifecycleConfigError, Problem
from lifeguard.lifecycle import NodeLifecycleActions

__all__ = ["ConfigDocument", "read_config_document"]

DocumentKind = Literal["bare", "request", "response"]


@dataclass(frozen=True)
class ConfigDocument:
    """A file's config: parsed when valid, else every problem with its path in the file."""

    path: Path
    kind: DocumentKind | None
    config: NodeLifecycleActions | None
    problems: tuple[Problem, ...]

    @property
    def valid(self) -> bool:
        """True when PCS would accept the config."""
        return self.config is not None


def _locate(data: object) -> tuple[DocumentKind, str, object]:
    if isinstance(data, Mapping):
        if "nodeLifecycleActions" in data:
            return "request", "nodeLifecycleActions", data["nodeLifecycleActions"]
        group = data.get("computeNodeGroup")
        if isinstance(group, Mapping) and "nodeLifecycleActions" in group:
            return "response", "computeNodeGroup.nodeLifecycleActions", group["nodeLifecycleActions"]
    return "bare", "", data


def read_config_document(path: Path) -> ConfigDocument:
    """Read and validate one file; a file that cannot be read or parsed is one problem, not an exception."""
    try:
        text = path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        return ConfigDocument(path, None, None, (Problem("", f"cannot read the file: {exc}"),))
    try:
        data: Any = json.loads(text)
    except json.JSONDecodeError as exc:
        where = f"line {exc.lineno} column {exc.colno}"
        return ConfigDocument(path, None, None, (Problem("", f"not valid JSON at {where}: {exc.msg}"),))
    kind, prefix, config = _locate(data)
    try:
        return ConfigDocument(path, kind, NodeLifecycleActions.from_api(config, path=prefix), ())
    except InvalidLifecycleConfigError as exc:
        return ConfigDocument(path, kind, None, exc.problems)
