"""Reading `nodeLifecycleActions` out of the files people have: a bare config, a
`create/update-compute-node-group` request as the AWS CLI takes it with `file://`, a
`get-compute-node-group` response, or a CloudFormation/SAM template (JSON or YAML with the short tags).

An input is named as the AWS CLI names it: a path, `file://PATH` (`~` and `$VARS` expanded, as the AWS CLI
does), or `-` for stdin. It is read as UTF-8 (a byte-order mark is dropped), at most `MAX_INPUT_BYTES`.
An input that cannot be read is an `UnreadableInputError`; one that is read but is not a config is a
document with problems.
"""

from __future__ import annotations

import json
import os
import sys
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

from lifeguard.bounds import clip, one_line
from lifeguard.errors import InvalidLifecycleConfigError, LifeguardError, Problem
from lifeguard.lifecycle import NodeLifecycleActions
from lifeguard_cli.cloudformation import NodeGroupLint, is_template
from lifeguard_cli.resources import shipped_file

__all__ = [
    "MAX_INPUT_BYTES",
    "STDIN",
    "ConfigDocument",
    "UnreadableInputError",
    "config_document",
    "group_document",
    "named_path",
    "parse_document",
    "problems_said",
    "read_config_document",
    "read_source",
    "stdin_twice",
    "template_without_groups",
]

DocumentKind = Literal["bare", "request", "response", "template"]

STDIN = "-"
MAX_INPUT_BYTES = 10 * 1024 * 1024

# As the AWS CLI's `--cli-input-json file://…` (awscli/paramfile.py): the prefix is case-sensitive.
_FILE_PREFIX = "file://"
STDIN_NAME = "<stdin>"  # how stdin (`-`) is named in what a command says of its input
_UTF16_BOMS = (b"\xff\xfe", b"\xfe\xff")

# Suffixes read as JSON only: a broken JSON file is reported as JSON, not half-read as YAML.
_JSON_ONLY = (".json",)

_TOO_DEEP = Problem("", "nested too deep to be a config")
_TOO_LONG = Problem("", f"has a number of over {sys.get_int_max_str_digits()} digits: not a config")

# The operation a request without `nodeLifecycleActions` is for, by the member that names its group.
_REQUESTS = {
    "computeNodeGroupIdentifier": "an update-compute-node-group request",
    "computeNodeGroupName": "a create-compute-node-group request",
    "clusterIdentifier": "a create/update-compute-node-group request",
}
_RESPONSE = "a get-compute-node-group response"


class UnreadableInputError(LifeguardError):
    """An input that cannot be read as text: missing, a directory, unreadable, not UTF-8, too large."""

    def __init__(self, name: str, reason: str) -> None:
        super().__init__(f"{name}: {reason}")
        self.name = name
        self.reason = reason


@dataclass(frozen=True)
class ConfigDocument:
    """An input's config (or one node group's, in a template): parsed when valid, else every problem with
    its path in the input. `name` is the input as shown to the user (a path, or `<stdin>`). `notes` are
    values nothing can check before deployment: intrinsic functions, which `intrinsics` maps by API path
    to their names (`config` holds stand-ins for them)."""

    name: str
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


def named_path(source: str) -> str:
    """The path an input names as typed: `file://PATH` as the AWS CLI takes it (`~` and variables
    expanded), else the text itself ('' names no file)."""
    if source.startswith(_FILE_PREFIX):
        return os.path.expandvars(os.path.expanduser(source.removeprefix(_FILE_PREFIX)))
    return source


def stdin_twice(sources: Sequence[str | Path | None]) -> str | None:
    """Why inputs cannot be read when `-` (stdin) is among them more than once, else None."""
    if list(sources).count(STDIN) > 1:
        return f"{STDIN} (stdin) is given more than once: it can be read only once"
    return None


def read_source(source: str | Path) -> tuple[str, str]:
    """The name to show for `source` and its text. A string is an input as typed (a path, `file://PATH`,
    or `-` for stdin); a `Path` is that file.

    Raises `UnreadableInputError` when it cannot be read, is over `MAX_INPUT_BYTES`, or is not text (UTF-8,
    or UTF-16 with its byte-order mark).
    """
    if source == STDIN:
        name = STDIN_NAME
        content = sys.stdin.buffer.read(MAX_INPUT_BYTES + 1)
    else:
        name = named_path(source) if isinstance(source, str) else str(source)
        if not name:
            raise UnreadableInputError(f"{source!r}", "no file named: an empty path")
        try:
            # A shipped example named as the README names it (`events/configs/…`) from any directory.
            with open(shipped_file(Path(name)), "rb") as file:
                content = file.read(MAX_INPUT_BYTES + 1)
        except OSError as exc:
            raise UnreadableInputError(name, f"cannot read it: {exc.strerror or exc}") from None
        except ValueError as exc:  # a path with a NUL byte in it
            raise UnreadableInputError(name, f"cannot read it: {exc}") from None
    if len(content) > MAX_INPUT_BYTES:
        raise UnreadableInputError(name, f"over {MAX_INPUT_BYTES // 1024 // 1024} MB: not read")
    utf16 = content.startswith(_UTF16_BOMS)  # as Windows PowerShell's `>` writes it
    try:
        text = content.decode("utf-16" if utf16 else "utf-8-sig")
    except UnicodeDecodeError as exc:
        kind = "UTF-16" if utf16 else "UTF-8"
        raise UnreadableInputError(
            name, f"not {kind} text: {exc.reason} at byte offset {exc.start}"
        ) from None
    nul = text.find("\x00")
    if nul >= 0:  # no text holds one: a binary file, or UTF-16 without its byte-order mark
        raise UnreadableInputError(name, f"not text: a NUL character at character {nul}")
    return name, text


def parse_document(name: str, text: str) -> tuple[Any, Problem | None]:
    """An input's content: JSON, or (unless `name` ends in `.json`) YAML with CloudFormation's short tags.

    Content that is empty or cannot be parsed gives None and the one problem that says why.
    """
    if not text.strip():
        return None, Problem("", "is empty: nothing to lint")
    try:
        return json.loads(text), None
    except RecursionError:
        return None, _TOO_DEEP
    except ValueError as exc:  # JSONDecodeError, or an integer too long to convert
        if name.lower().endswith(_JSON_ONLY):
            if isinstance(exc, json.JSONDecodeError):
                return None, Problem("", f"not valid JSON at line {exc.lineno} column {exc.colno}: {exc.msg}")
            return None, _TOO_LONG
    import yaml  # type: ignore[import-untyped]  # PyYAML ships no types

    from lifeguard_cli.template import TooManyAliasesError, parse_yaml

    try:
        return parse_yaml(text), None
    except RecursionError:
        return None, _TOO_DEEP
    except TooManyAliasesError as exc:
        where = f" (line {exc.mark.line + 1} column {exc.mark.column + 1})" if exc.mark else ""
        return None, Problem("", f"holds {exc}{where}, each read as all it names: not read")
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        where = f" at line {mark.line + 1} column {mark.column + 1}" if mark else ""
        reason = " ".join(str(getattr(exc, "problem", None) or exc).split())  # PyYAML's run over lines
        return None, Problem("", f"neither JSON nor YAML{where}: {clip(reason, 300)}")
    except ValueError:  # an integer too long to convert
        return None, _TOO_LONG


def _locate(data: object) -> tuple[DocumentKind, str, object, str | None]:
    """The kind of a parsed input, where its config is, and the config; the last item, for a request or
    response without a config, says which it is (its config is then None)."""
    if isinstance(data, Mapping):
        if "nodeLifecycleActions" in data:
            return "request", "nodeLifecycleActions", data["nodeLifecycleActions"], None
        group = data.get("computeNodeGroup")
        if isinstance(group, Mapping) and "nodeLifecycleActions" in group:
            return "response", "computeNodeGroup.nodeLifecycleActions", group["nodeLifecycleActions"], None
        if isinstance(group, Mapping):
            return "response", "computeNodeGroup", None, _RESPONSE
        request = next((what for member, what in _REQUESTS.items() if member in data), None)
        if request is not None:
            return "request", "", None, request
    return "bare", "", data, None


def config_document(name: str, data: object) -> ConfigDocument:
    """Validate the config in a parsed bare config, request or response."""
    kind, prefix, config, without = _locate(data)
    if without == _RESPONSE:
        # A group without lifecycle scripts: PCS leaves the key out. Valid, as a template without node
        # groups is (a loop over every group's `get-compute-node-group` passes it).
        why = "the group runs none, or the AWS CLI that printed it predates them"
        note = Problem(prefix, f"{without} without nodeLifecycleActions ({why}): nothing to lint")
        return ConfigDocument(name, kind, None, (), notes=(note,))
    if without is not None:
        problem = Problem(prefix, f"{without} without nodeLifecycleActions: nothing to lint")
        return ConfigDocument(name, kind, None, (problem,))
    try:
        return ConfigDocument(name, kind, NodeLifecycleActions.from_api(config, path=prefix), ())
    except InvalidLifecycleConfigError as exc:
        return ConfigDocument(name, kind, None, exc.problems)


def group_document(name: str, group: NodeGroupLint) -> ConfigDocument:
    """One node group of a template as a document: problems and notes point into the template."""
    return ConfigDocument(
        name, "template", group.config, group.problems, group.logical_id, group.notes, group.intrinsics
    )


def template_without_groups(name: str) -> ConfigDocument:
    """A template with nothing to lint: valid, and a note that says so."""
    note = Problem("Resources", "no AWS::PCS::ComputeNodeGroup with NodeLifecycleActions: nothing to lint")
    return ConfigDocument(name, "template", None, (), notes=(note,))


# The problems of an input said in one line of an error, at most; the rest are counted.
PROBLEMS_SAID = 5


def problems_said(problems: Sequence[Problem]) -> str:
    """An input's problems as one bounded line: the first PROBLEMS_SAID (each one clipped; a problem of the
    whole input without a path), then how many more (`lifeguard lint` of the file lists every one)."""
    said = [
        one_line(clip(str(problem) if problem.path else problem.message, 300))
        for problem in problems[:PROBLEMS_SAID]
    ]
    more = len(problems) - len(said)
    return "; ".join(said) + (f" (and {more} more: `lifeguard lint` lists them)" if more > 0 else "")


def template_not_linted_whole(name: str, why: str) -> ConfigDocument:
    """A template whose node groups were not all linted, and `why` (it makes more resources than
    CloudFormation takes, or its loops more than lint expands): invalid."""
    problem = Problem("Resources", f"{why}: the node groups past them are not linted")
    return ConfigDocument(name, "template", None, (problem,))


def read_config_document(source: str | Path) -> ConfigDocument:
    """Read and validate one config (`source` as `read_source` takes it); an input that cannot be read or
    parsed, or a template, is one problem, not an exception."""
    try:
        name, text = read_source(source)
    except UnreadableInputError as exc:
        return ConfigDocument(exc.name, None, None, (Problem("", exc.reason),))
    data, problem = parse_document(name, text)
    if problem is not None:
        return ConfigDocument(name, None, None, (problem,))
    if is_template(data):
        message = (
            "is a CloudFormation template; a nodeLifecycleActions file (bare, request or response) is needed"
        )
        return ConfigDocument(name, "template", None, (Problem("", message),))
    return config_document(name, data)
