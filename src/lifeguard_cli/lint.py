"""`lifeguard lint`: validate configs, list every problem with its path, and warn about risks."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from rich.console import Console
from rich.table import Table
from rich.text import Text

from lifeguard.lifecycle import NodeLifecycleActions
from lifeguard.risks import Risk, find_risks
from lifeguard_cli.documents import ConfigDocument, read_config_document

__all__ = ["LintResult", "lint_files", "render_lint"]


@dataclass(frozen=True)
class LintResult:
    """The verdict on one file."""

    document: ConfigDocument
    risks: tuple[Risk, ...]

    def passes(self, *, strict: bool) -> bool:
        """Valid, and with `strict` also free of risks."""
        return self.document.valid and not (strict and self.risks)

    def to_dict(self) -> dict[str, Any]:
        """The verdict as JSON for programs."""
        config = self.document.config
        return {
            "file": str(self.document.path),
            "kind": self.document.kind,
            "valid": self.document.valid,
            "fingerprint": config.fingerprint() if config else None,
            "problems": [problem.to_dict() for problem in self.document.problems],
            "risks": [risk.to_dict() for risk in self.risks],
            "scripts": _scripts(config) if config else [],
        }


def _scripts(config: NodeLifecycleActions) -> list[dict[str, Any]]:
    return [
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
        }
        for stage, index, script in config.scripts()
    ]


def lint_files(paths: Sequence[Path], previous: Path | None = None) -> tuple[list[LintResult], list[str]]:
    """Lint each file, against `previous` (the config they replace) when given.

    Returns the results and any errors about `previous` itself.
    """
    errors: list[str] = []
    before: NodeLifecycleActions | None = None
    if previous is not None:
        prior = read_config_document(previous)
        if prior.config is None:
            errors.extend(f"{previous}: {problem}" for problem in prior.problems)
        before = prior.config
    results = []
    for path in paths:
        document = read_config_document(path)
        risks = tuple(find_risks(document.config, before)) if document.config else ()
        results.append(LintResult(document, risks))
    return results, errors


def render_lint(results: Sequence[LintResult], console: Console, *, strict: bool) -> None:
    """Print a summary table per valid file, every problem of invalid ones, and the risks."""
    for result in results:
        document = result.document
        header = Text(str(document.path), style="bold")
        if document.config is None:
            count = len(document.problems)
            header.append(f"  invalid: {count} problem{'s' if count != 1 else ''}", style="bold red")
            console.print(header)
            for problem in document.problems:
                console.print(Text.assemble("  ", ("error", "red"), f" {problem}"))
            console.print()
            continue
        config = document.config
        policy = config.effective_script_caching_policy
        policy_note = "" if config.script_caching_policy else " (default)"
        header.append("  valid", style="bold green")
        header.append(f"  {document.kind} · scriptCachingPolicy {policy}{policy_note}")
        header.append(f" · fingerprint {config.fingerprint()[:12]}")
        console.print(header)
        console.print(_table(config))
        level = ("error", "red") if strict else ("warning", "yellow")
        for risk in result.risks:
            console.print(
                Text.assemble("  ", level, f" {risk.path}: {risk.message} ", (f"({risk.code})", "dim"))
            )
        console.print()


def _table(config: NodeLifecycleActions) -> Table:
    table = Table(show_edge=False, pad_edge=False, box=None, header_style="bold")
    for column in ("stage", "#", "script", "source", "args", "onError", "executionPolicy", "pinned"):
        table.add_column(column, overflow="fold")
    for row in _scripts(config):
        table.add_row(
            row["stage"] if row["index"] == 0 else "",
            str(row["index"]),
            row["name"],
            row["scriptLocation"],
            " ".join(row["arguments"]) or "-",
            row["onError"] + (" (default)" if row["onErrorDefaulted"] else ""),
            row["executionPolicy"] + (" (default)" if row["executionPolicyDefaulted"] else ""),
            "yes" if row["pinned"] else "no",
        )
    if not table.rows:
        table.add_row("-", "-", "(no scripts)", "-", "-", "-", "-", "-")
    return table
