"""`lifeguard lint`: validate configs, find every problem with its path, and warn about risks.

A plain file (bare config, request, response) is one result; a CloudFormation/SAM template is one result
per `AWS::PCS::ComputeNodeGroup` with `NodeLifecycleActions`, checked by `lifeguard_cli.cloudformation`
with the same rules.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from rich.console import Console
from rich.table import Table
from rich.text import Text

from lifeguard.lifecycle import NodeLifecycleActions
from lifeguard.risks import Risk, find_risks
from lifeguard_cli.cloudformation import is_template, lint_template
from lifeguard_cli.documents import (
    ConfigDocument,
    UnreadableInputError,
    config_document,
    group_document,
    parse_document,
    problems_said,
    read_config_document,
    read_source,
    stdin_twice,
    template_not_linted_whole,
    template_without_groups,
)
from lifeguard_cli.tables import show
from lifeguard_cli.tables import table as make_table

__all__ = ["PROBLEMS_SHOWN", "LintResult", "lint_files", "render_lint"]

# The problems of one file or group listed for people, its first ones (all are counted; --json lists
# every one): a file of thousands of broken scripts is read in a screen, not in 110,000 lines.
PROBLEMS_SHOWN = 100


@dataclass(frozen=True)
class LintResult:
    """The verdict on one file, or on one node group of a template."""

    document: ConfigDocument
    risks: tuple[Risk, ...]

    def passes(self, *, strict: bool) -> bool:
        """Valid, and with `strict` also free of risks."""
        return self.document.valid and not (strict and self.risks)

    def to_dict(self) -> dict[str, Any]:
        """The verdict as JSON for programs."""
        document = self.document
        config = document.config
        return {
            "file": document.name,
            "kind": document.kind,
            "resource": document.resource,
            "valid": document.valid,
            "fingerprint": _fingerprint(document),
            "problems": [problem.to_dict() for problem in document.problems],
            "risks": [risk.to_dict() for risk in self.risks],
            "notes": [note.to_dict() for note in document.notes],
            "scripts": _scripts(config, document.intrinsics) if config else [],
        }


def _fingerprint(document: ConfigDocument) -> str | None:
    """The config's fingerprint; None when there is none, or intrinsic functions leave it unknown."""
    if document.config is None or document.notes:
        return None
    return document.config.fingerprint()


# The columns of a script row and the API field each shows.
_CELLS = {
    "name": "name",
    "scriptLocation": "scriptSource.scriptLocation",
    "arguments": "arguments",
    "onError": "onError",
    "executionPolicy": "executionPolicy",
    "pinned": "scriptSource",
}


def _intrinsic_at(intrinsics: Mapping[str, str], path: str) -> str | None:
    """The intrinsic function that `path` is, or lies under."""
    for where, function in intrinsics.items():
        if path == where or path.startswith((f"{where}.", f"{where}[")):
            return function
    return None


def _scripts(config: NodeLifecycleActions, intrinsics: Mapping[str, str]) -> list[dict[str, Any]]:
    rows = []
    for stage, index, script in config.scripts():
        base = f"stages.{stage}[{index}]"
        unresolved = {
            cell: function
            for cell, field in _CELLS.items()
            if (function := _intrinsic_at(intrinsics, f"{base}.{field}")) is not None
        }
        rows.append(
            {
                "stage": stage,
                "index": index,
                "name": script.name,
                "scriptLocation": script.script_source.script_location,
                "arguments": list(script.effective_arguments),
                "onError": script.effective_on_error,
                "onErrorDefaulted": script.on_error is None,
                "executionPolicy": script.effective_execution_policy,
                "executionPolicyDefaulted": script.execution_policy is None,
                "pinned": script.script_source.is_pinned,
                # Cells whose value is an intrinsic function: what they hold is a stand-in.
                "intrinsic": unresolved,
            }
        )
    return rows


def lint_files(
    sources: Sequence[str | Path], previous: str | Path | None = None
) -> tuple[list[LintResult], list[str]]:
    """Lint each input (as `documents.read_source` takes it: a path, `file://PATH`, or `-` for stdin),
    against `previous` (the config they replace, given the same ways) when given.

    Returns the results and the errors that stop the run (one line each): an input cannot be read, `-` is
    given twice, `previous` is invalid, or a template is given with `previous`.
    """
    twice = stdin_twice([*sources, previous])
    if twice is not None:
        return [], [twice]
    errors: list[str] = []
    before: NodeLifecycleActions | None = None
    if previous is not None:
        prior = read_config_document(previous)
        # A problem of the whole input (unreadable, not JSON) is said as the input's own, without a path; a
        # group that runs no scripts has none, and nothing to compare with.
        if prior.config is None and prior.problems:
            errors.append(f"--previous {prior.name}: {problems_said(prior.problems)}")
        before = prior.config
    results: list[LintResult] = []
    for source in sources:
        try:
            name, text = read_source(source)
        except UnreadableInputError as exc:
            errors.append(str(exc))
            continue
        data, unparsed = parse_document(name, text)
        if unparsed is not None:
            results.append(LintResult(ConfigDocument(name, None, None, (unparsed,)), ()))
        elif not is_template(data):
            document = config_document(name, data)
            risks = tuple(find_risks(document.config, before)) if document.config else ()
            results.append(LintResult(document, risks))
        elif previous is not None:
            errors.append(f"{name}: --previous compares nodeLifecycleActions files, not templates")
        else:
            over: list[str] = []
            groups = lint_template(data, over=over)
            results.extend(LintResult(group_document(name, group), group.risks) for group in groups)
            if over:
                results.append(LintResult(template_not_linted_whole(name, over[0]), ()))
            elif not groups:
                results.append(LintResult(template_without_groups(name), ()))
    return results, errors


def render_lint(
    results: Sequence[LintResult],
    console: Console,
    *,
    strict: bool,
    told: Callable[[int, int], None] | None = None,
) -> None:
    """Print a summary table per valid file or group, every problem of invalid ones, the risks and notes;
    `told(done, total)` after each (progress: a template of thousands of groups prints for a while)."""
    for done, result in enumerate(results, start=1):
        _render_result(result, console, strict=strict)
        if told is not None:
            told(done, len(results))


def _render_result(result: LintResult, console: Console, *, strict: bool) -> None:
    document = result.document
    header = Text(document.name, style="bold")
    if document.resource is not None:
        header.append(f" › {document.resource}", style="bold")
    if not document.valid:
        count = len(document.problems)
        header.append(f"  invalid: {count} problem{'s' if count != 1 else ''}", style="bold red")
        console.print(header)
        shown = document.problems[:PROBLEMS_SHOWN]
        _labelled(console, ("error", "red"), *(Text(str(problem)) for problem in shown))
        if count > len(shown):
            console.print(f"  … and {count - len(shown)} more (--json lists every one)", markup=False)
    elif document.config is None and document.resource is None:
        # A template without node groups: its one note is the verdict.
        console.print(header.append(f"  {document.notes[0].message}" if document.notes else ""))
        console.print()
        return
    elif document.config is None:
        console.print(header.append("  not checked", style="bold yellow"))
    else:
        config = document.config
        policy: str = config.effective_script_caching_policy
        policy_note = "" if config.script_caching_policy else " (default)"
        function = _intrinsic_at(document.intrinsics, "scriptCachingPolicy")
        if function is not None:
            policy, policy_note = f"<{function}>", ""
        header.append("  valid", style="bold green")
        if strict and result.risks:  # PCS takes it; --strict fails it (exit 1) on its risks
            count = len(result.risks)
            header.append(f", fails --strict: {count} risk{'s' if count != 1 else ''}", style="bold red")
        header.append(f"  {document.kind} · scriptCachingPolicy {policy}{policy_note}")
        fingerprint = _fingerprint(document)
        if fingerprint:
            header.append(f" · fingerprint {fingerprint[:12]}")
        console.print(header)
        show(console, _table(config, document.intrinsics))
        level = ("error", "red") if strict else ("warning", "yellow")
        for risk in result.risks:
            _labelled(
                console, level, Text.assemble(f"{risk.path}: {risk.message} ", (f"({risk.code})", "dim"))
            )
    for note in document.notes:
        _labelled(console, ("note", "cyan"), Text(str(note)))
    console.print()


def _labelled(console: Console, label: tuple[str, str], *messages: Text) -> None:
    """`  error message…` for each message, wrapping under itself, not under the label; a location longer
    than the line (a template's resource path) is broken after a `.` or before a `[`, not inside a name."""
    lines = Table.grid(padding=(0, 1), pad_edge=False)
    lines.add_column(no_wrap=True)
    lines.add_column(overflow="fold")
    width = console.width - len(label[0]) - 3  # "  ", the label, the column's padding
    for message in messages:
        lines.add_row(Text.assemble("  ", label), _path_broken(message, width))
    console.print(lines)


_PATH_PARTS = re.compile(r"[^.\[]+\.?|\[[^\]]*\]\.?")


def _path_broken(message: Text, width: int) -> Text:
    """`message` with its leading location (`path: …`) broken into lines of at most `width` at its parts'
    ends, when it is longer than that; as it is otherwise."""
    path, colon, _ = message.plain.partition(": ")
    if not colon or len(path) <= width or " " in path or width < 20:
        return message
    lines, line = [], ""
    for part in _PATH_PARTS.findall(path):
        if line and len(line) + len(part) > width:
            lines.append(line)
            line = ""
        line += part
    broken = message.copy()
    at = 0
    for done in lines:  # a line break in place of nothing: each ends where the next part begins
        at += len(done)
        broken = broken[:at] + Text("\n") + broken[at:]
        at += 1
    return broken


def _table(config: NodeLifecycleActions, intrinsics: Mapping[str, str]) -> Table:
    table = make_table("stage", "#", "script", "source", "args", "onError", "executionPolicy", "pinned")
    for row in _scripts(config, intrinsics):
        cells = {
            "name": row["name"],
            "scriptLocation": row["scriptLocation"],
            "arguments": " ".join(row["arguments"]) or "-",
            "onError": row["onError"] + (" (default)" if row["onErrorDefaulted"] else ""),
            "executionPolicy": row["executionPolicy"]
            + (" (default)" if row["executionPolicyDefaulted"] else ""),
            "pinned": "yes" if row["pinned"] else "no",
        }
        cells.update({cell: f"<{function}>" for cell, function in row["intrinsic"].items()})
        table.add_row(row["stage"] if row["index"] == 0 else "", str(row["index"]), *cells.values())
    if not table.rows:
        table.add_row("-", "-", "(no scripts)", "-", "-", "-", "-", "-")
    return table
