"""The `lifeguard` operator CLI."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Annotated

import typer
from rich.console import Console

from lifeguard_cli.lint import lint_files, render_lint

__all__ = ["app", "main"]

app = typer.Typer(
    name="lifeguard",
    help="PCS Lifeguard: stop bootstrap-failure loops of AWS PCS compute node groups.",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
)


@app.callback()
def _root() -> None:
    """PCS Lifeguard: stop bootstrap-failure loops of AWS PCS compute node groups."""


@app.command()
def lint(
    files: Annotated[
        list[Path],
        typer.Argument(help="nodeLifecycleActions JSON: bare, a create/update request, or a get response."),
    ],
    strict: Annotated[bool, typer.Option("--strict", help="Treat risks as errors (exit 1).")] = False,
    previous: Annotated[
        Path | None,
        typer.Option("--previous", help="The config these replace: also flags scripts updated in place."),
    ] = None,
    as_json: Annotated[bool, typer.Option("--json", help="One JSON document for programs.")] = False,
) -> None:
    """Validate nodeLifecycleActions files as PCS would, and warn about risky settings.

    Exit 0 when every file is valid (risks are warnings), 1 when one is invalid or, with --strict, risky.

    Example: lifeguard lint events/configs/article-terminate.json
    """
    results, errors = lint_files(files, previous)
    if errors:
        for error in errors:
            typer.echo(f"lifeguard lint: --previous {error}", err=True)
        raise typer.Exit(1)
    passed = all(result.passes(strict=strict) for result in results)
    if as_json:
        document = {"valid": passed, "strict": strict, "files": [result.to_dict() for result in results]}
        typer.echo(json.dumps(document, indent=2))
    else:
        render_lint(results, _console(), strict=strict)
    raise typer.Exit(0 if passed else 1)


def _console() -> Console:
    # Piped output is read in logs and CI, where 80 columns fold every table row in three.
    return Console(highlight=False, width=None if sys.stdout.isatty() else 140)


def main() -> None:
    """Console-script entry point."""
    app()
