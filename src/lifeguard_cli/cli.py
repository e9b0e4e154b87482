"""The `lifeguard` operator CLI."""

from __future__ import annotations

import contextlib
import json
import os
import re
import shlex
import sys
import textwrap
from collections.abc import Iterator
from enum import StrEnum
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

import typer
from rich.console import Console
from rich.text import Text

from lifeguard.detection import MAX_THRESHOLD, MAX_WINDOW_MINUTES
from lifeguard_cli.documents import named_path, problems_said, read_config_document, stdin_twice
from lifeguard_cli.lint import lint_files, render_lint

if TYPE_CHECKING:
    from lifeguard.errors import AwsCallError
    from lifeguard_cli.operate import StackHealth, StackView

__all__ = ["app", "main"]

app = typer.Typer(
    name="lifeguard",
    help="PCS Lifeguard: stop bootstrap-failure loops of AWS PCS compute node groups.",
    no_args_is_help=True,
    pretty_exceptions_enable=False,
    context_settings={"help_option_names": ["-h", "--help"]},
    # Plain help: flags without a type, values as their metavars, no boxes to break at 80 columns.
    rich_markup_mode=None,
)
# An argument's help names what it takes by its metavar (GROUP, FILE...), not by typer's Python type
# (`<str>`, `<list[Path]>`); options with a value have metavars, flags show none in plain help.
setattr(typer.core.TyperArgument, "display_type_rich", lambda self, ctx: None)  # noqa: B010
# A usage line as the README writes the commands and as Click and POSIX do: a required argument bare
# (`undo [OPTIONS] GROUP`), an optional one in brackets; not typer's `{GROUP}`.
setattr(  # noqa: B010
    typer.core.TyperArgument,
    "_usage_display_name",
    lambda self: (
        (self.display_name_raw if self.required else f"[{self.display_name_raw}]")
        + ("..." if self.nargs != 1 else "")
    ),
)
# --debug (or LIFEGUARD_DEBUG=1): an unforeseen error shows its traceback instead of one line.
_DEBUG = {"on": False}


# Typer carries its own Click (`typer._click`): its commands raise that Click's usage errors.
_UsageError = typer._click.exceptions.UsageError


class _Command(typer.core.TyperCommand):
    """A command whose every usage error shows the command's usage and `-h` above its `Error:` line: Click's
    parser raises some (`Option '--cluster' requires an argument.`) without the context that shows them."""

    def parse_args(self, ctx: typer._click.core.Context, args: list[str]) -> list[str]:
        try:
            return super().parse_args(ctx, args)
        except _UsageError as exc:
            exc.ctx = exc.ctx or ctx
            # typer checks values through pydantic, which begins a ValueError's message so.
            exc.message = exc.message.removeprefix("Value error, ")
            raise


class ReplayMode(StrEnum):
    """Remediation modes a replay can run with."""

    quarantine = "quarantine"
    revert = "revert"
    notify = "notify"


def _version(value: bool) -> None:
    if value:
        from lifeguard import __version__

        typer.echo(f"lifeguard {__version__}")
        raise typer.Exit()


@app.callback()
def _root(
    version: Annotated[
        bool,
        typer.Option("--version", callback=_version, is_eager=True, help="Print the version and exit."),
    ] = False,
    debug: Annotated[
        bool,
        typer.Option("--debug", envvar="LIFEGUARD_DEBUG", help="Show the traceback of an unforeseen error."),
    ] = False,
) -> None:
    """PCS Lifeguard: stop bootstrap-failure loops of AWS PCS compute node groups."""
    _DEBUG["on"] = debug


@app.command(cls=_Command)
def lint(
    files: Annotated[
        list[str],
        typer.Argument(
            help="nodeLifecycleActions in JSON or YAML (bare, a create/update request, or a "
            "get-compute-node-group response), or a CloudFormation/SAM template: each "
            "AWS::PCS::ComputeNodeGroup is linted. A path, file://PATH as the AWS CLI takes it, "
            "or - for stdin.",
            metavar="FILE",
        ),
    ],
    strict: Annotated[bool, typer.Option("--strict", help="Treat risks as errors (exit 1).")] = False,
    previous: Annotated[
        str | None,
        typer.Option(
            "--previous",
            metavar="FILE",
            help="The config these replace: also flags scripts updated in place (not with templates).",
        ),
    ] = None,
    as_json: Annotated[bool, typer.Option("--json", help="One JSON document for programs.")] = False,
) -> None:
    """Validate nodeLifecycleActions files and templates as PCS would, and warn about risky settings.

    Exit 0 when every file and group is valid (risks are warnings), 1 when one is invalid or, with
    --strict, risky. Intrinsic functions (!Ref, !Sub, ...) in a template are noted, not checked.

    \b
    Example:
      lifeguard lint events/configs/article-terminate.json \\
        events/templates/pcs-cluster.yaml
    """
    with _working(f"linting {len(files)} input{'s' if len(files) != 1 else ''}"):
        results, errors = lint_files(files, previous)
    if errors:  # an input that cannot be read, or a usage that cannot be linted: nothing was judged
        for error in errors:
            typer.echo(f"lifeguard lint: {error}", err=True)
        raise typer.Exit(2)
    passed = all(result.passes(strict=strict) for result in results)
    if as_json:
        document = {"valid": passed, "strict": strict, "files": [result.to_dict() for result in results]}
        typer.echo(json.dumps(document, indent=2))
    elif sys.stdout.isatty():  # what is printed, group by group, shows how far it is
        render_lint(results, _console(), strict=strict)
    else:
        with _steps("lint: printing the results of each file and group") as progress:
            render_lint(results, _console(), strict=strict, told=progress)
    raise typer.Exit(0 if passed else 1)


def _input_paths(command: str, given: list[str], config: str | None = None) -> list[Path]:
    """The files named as `lint` takes them: a path, `file://PATH`, or `-` for stdin (once, with
    `--config` too); an empty name is bad usage (exit 2), not the current directory."""
    twice = stdin_twice([*given, config])
    if twice is not None:
        typer.echo(f"lifeguard {command}: {twice}", err=True)
        raise typer.Exit(2)
    paths = []
    for name in given:
        path = named_path(name)
        if not path:
            typer.echo(f"lifeguard {command}: {name!r}: no file named: an empty path", err=True)
            raise typer.Exit(2)
        paths.append(Path(path))
    return paths


@app.command(cls=_Command)
def replay(
    given: Annotated[
        list[str],
        typer.Argument(
            metavar="FILE",
            help="Scaling-log records or node reports (JSON lines), subscription events, aws logs "
            "filter-log-events / get-log-events output, EventBridge or CloudTrail events; in order. "
            "- for stdin.",
        ),
    ],
    config: Annotated[
        str | None,
        typer.Option(
            "--config",
            metavar="FILE",
            help="Lifecycle actions of the groups (default: the article's TERMINATE config).",
        ),
    ] = None,
    threshold: Annotated[
        int | None,
        # The bounds are checked with the environment's (one line, exit 2, whichever gave the value).
        typer.Option("--threshold", metavar="N", help=f"Failures that make a loop (1 to {MAX_THRESHOLD})."),
    ] = None,
    window_minutes: Annotated[
        int | None,
        typer.Option(
            "--window-minutes",
            metavar="MINUTES",
            help=f"The window those failures must fall in (1 to {MAX_WINDOW_MINUTES}, a week).",
        ),
    ] = None,
    mode: Annotated[
        ReplayMode, typer.Option("--mode", help="The groups' remediation mode (the stack default in replay).")
    ] = ReplayMode.quarantine,
    dry_run: Annotated[
        bool, typer.Option("--dry-run", help="As the stack's DryRun: every mode only says what it would do.")
    ] = False,
    node_bundle: Annotated[
        str | None,
        typer.Option(
            "--node-bundle",
            metavar="URL",
            help="s3:// or https:// location of the node bundle (adds the drain step).",
        ),
    ] = None,
    as_json: Annotated[
        bool,
        typer.Option(
            "--json", help="One JSON document: events, skipped records, notifications, final configs."
        ),
    ] = False,
    verbose: Annotated[bool, typer.Option("--verbose", help="The handlers' warnings on stderr.")] = False,
    keep: Annotated[
        bool,
        typer.Option(
            "--keep",
            help="Leave the local AWS up with what the replay left, for status, history and undo --local "
            "(until lifeguard local down).",
        ),
    ] = False,
) -> None:
    """Replay recorded events through the real handlers against a local AWS (no Docker, no account).

    Detection, then remediation (--mode) and notifications (SNS read back, Slack on a loopback sink).

    \b
    Example:
      lifeguard replay --mode quarantine \\
        events/streams/article-terminate-loop.jsonl \\
        events/streams/article-terminate-node-reports.jsonl
    """
    from lifeguard_cli.replay import ReplayError, render_timeline
    from lifeguard_cli.replay import replay as run_replay

    files = _input_paths("replay", given, config)
    actions = None
    if config is not None:
        document = read_config_document(config)
        if document.config is None:
            # What stops lint stops a replay, in a replay's words: a problem of the whole input without
            # a path, and a response of a group that runs no scripts is no configuration to replay with.
            said = problems_said((*document.problems, *document.notes)).replace(": nothing to lint", "")
            typer.echo(f"lifeguard replay: --config {document.name}: {said}", err=True)
            raise typer.Exit(2)
        actions = document.config.to_api()

    def show(result: Any) -> None:
        if as_json:
            typer.echo(json.dumps(result.to_json(), indent=2))
        else:
            render_timeline(result, _console())

    def run(keep_up: Any = None) -> None:
        try:
            with _steps("replaying") as progress:
                result = run_replay(
                    files,
                    config=actions,
                    threshold=threshold,
                    window_minutes=window_minutes,
                    mode=mode.value,
                    dry_run=dry_run,
                    node_bundle=node_bundle,
                    verbose=verbose,
                    progress=progress,
                    keep=keep_up,
                )
        except ReplayError as exc:
            typer.echo(f"lifeguard replay: {exc}", err=True)
            raise typer.Exit(2) from None
        if keep_up is None:
            show(result)

    if not keep:
        run()
        return
    if Path("-") in files:
        typer.echo("lifeguard replay: --keep reads files, not stdin (-): save it to a file first", err=True)
        raise typer.Exit(2)
    _refuse_foreign_state("replay")
    from lifeguard_cli.local import background

    def kept(ready: Any) -> None:
        def keep_up(aws: Any, stack: Any, channels: Any, result: Any) -> None:
            from lifeguard_cli.local.stack import describe_replay_stack

            show(result)
            # A stack of the replay's table, with its mode and dry run as the stack's parameters: status
            # shows them as a deployed stack's.
            parameters = {"DefaultMode": mode.value, "DryRun": str(dry_run).lower()}
            describe_replay_stack(aws.client, LOCAL_STACK, stack, parameters, channels=channels)
            environ = {
                **aws.environ(),
                "LIFEGUARD_STACK_NAME": LOCAL_STACK,
                "LIFEGUARD_DEFAULT_MODE": mode.value,
            }
            typer.echo(
                f"\nkept: the local AWS serves on with this replay's stack {LOCAL_STACK}, "
                f"table {stack.table}",
                err=True,
            )
            typer.echo(
                "lifeguard status --local  (and history, undo); lifeguard local down to stop", err=True
            )
            # One local AWS at a time: the replay's replaces the one running, once it has run (a replay
            # refused, whatever the reason, leaves that one as it was).
            replaced = background.stop()
            if replaced is not None:
                typer.echo(
                    f"kept: it replaces the local AWS that was up (pid {replaced}); the shell's exports of "
                    'that one point nowhere now: eval "$(lifeguard local up)" exports this one\'s',
                    err=True,
                )
            ready({"environ": environ, "table": None, "stack_name": LOCAL_STACK, "mode": mode.value})
            background.serve_until_stopped()

        try:
            run(keep_up)
        except typer.Exit as exc:
            raise SystemExit(exc.exit_code) from None

    with background.starting() as lock:
        code = background.in_background(kept, close_in_child=(lock,))
    if code:
        raise typer.Exit(code)


@app.command(cls=_Command)
def demo(
    as_json: Annotated[
        bool, typer.Option("--json", help="One JSON document: each scenario's outcome.")
    ] = False,
    quiet: Annotated[
        bool, typer.Option("--quiet", help="Only the summary table, not each scenario's report.")
    ] = False,
    recorded: Annotated[
        bool,
        typer.Option("--recorded", help="Replay the four recorded streams instead (as lifeguard replay)."),
    ] = False,
) -> None:
    """A twin of a PCS cluster runs each one-group built-in scenario with Lifeguard and with PCS alone.

    Nodes boot the real lifeguard-node boot; what Lifeguard changes decides what the next node boots. For
    each scenario: the timeline, Lifeguard's diff, the Slack message, and Lifeguard against PCS alone; then
    one table of them all. A local AWS, no Docker, no account.

    Example: lifeguard demo --quiet
    """
    if recorded:
        _recorded_demo(as_json=as_json, quiet=quiet)
        return
    from rich.rule import Rule

    from lifeguard_cli.demo import demo_scenarios, demo_table, run_simulated_demo
    from lifeguard_cli.simulate.render import render_simulation
    from lifeguard_cli.tables import show as show_table

    console = _console()
    err = _console_err()
    scenarios = demo_scenarios()

    def start(number: int) -> None:
        if number == 0:
            err.print(f"{len(scenarios)} scenarios on the twin; starting the local AWS…", markup=False)
        else:
            err.print(f"[{number}/{len(scenarios)}] {scenarios[number - 1].name}…", markup=False)

    def show(number: int, document: dict[str, Any]) -> None:
        name = document["scenario"]
        err.print(f"[{number}/{len(scenarios)}] {name}: done ({document['wall_seconds']:g} s)", markup=False)
        if as_json or quiet:
            return
        console.print(Rule(Text(_scenario_heading(number, len(scenarios), document))))
        console.print(scenarios[number - 1].description.strip(), markup=False)
        console.print()
        render_simulation(document, console)
        console.print()

    documents = run_simulated_demo(scenarios, show, on_start=start)
    if as_json:
        typer.echo(json.dumps({"scenarios": documents}, indent=2))
        return
    show_table(console, demo_table(documents))


def _scenario_heading(number: int, count: int, document: dict[str, Any]) -> str:
    """A demo scenario's heading, with the modes Lifeguard acted in (a group's `lifeguard:mode` tag may
    say another than the stack's), as its column in the table is headed."""
    from lifeguard_cli.simulate.twin import acting_modes

    return f"{number}/{count} {document['scenario']} (mode {acting_modes(document)})"


def _recorded_demo(*, as_json: bool, quiet: bool) -> None:
    """The recorded streams replayed through the four handlers, then a table of what each ended with."""
    from rich.rule import Rule

    from lifeguard_cli.demo import SCENARIOS, Scenario, ScenarioResult, run_demo
    from lifeguard_cli.replay import render_timeline
    from lifeguard_cli.tables import show as show_table
    from lifeguard_cli.tables import table as make_table

    console = _console()
    err = _console_err()

    def show(scenario: Scenario, done: ScenarioResult) -> None:
        number = SCENARIOS.index(scenario) + 1
        if as_json or quiet:
            err.print(f"[{number}/{len(SCENARIOS)}] {scenario.name}: done")
            return
        console.print(Rule(f"{number}/{len(SCENARIOS)} {scenario.name} (mode {scenario.mode})"))
        console.print(scenario.story)
        render_timeline(done.result, console)
        console.print()

    results = run_demo(show)
    if as_json:
        typer.echo(json.dumps({"scenarios": [r.to_dict() for r in results]}, indent=2))
        return
    table = make_table(
        "scenario", "events", "notifications", "Lifeguard's changes", title="What each scenario ended with"
    )
    for done in results:
        summary = done.to_dict()
        sent = summary["notifications"]
        table.add_row(
            done.scenario.name,
            ", ".join(summary["events"]),
            f"{sent['sns']} SNS, {sent['slack']} Slack",
            "\n".join(done.changes) or "none",
        )
    show_table(console, table)


class SimulateMode(StrEnum):
    """The stack's DefaultMode in a simulation, or of the local stack (`local up`): all of its values."""

    quarantine = "quarantine"
    revert = "revert"
    notify = "notify"
    off = "off"


class Baseline(StrEnum):
    """What Lifeguard is compared with, on the same seed."""

    pcs = "pcs"
    parallelcluster = "parallelcluster"


@app.command(cls=_Command)
def simulate(
    scenario: Annotated[
        str,
        typer.Argument(
            metavar="SCENARIO",
            help="A scenario file (YAML or JSON; events/scenarios/README.md) or the name of a built-in one "
            "(article-loop, bad-change-revert, wave-50, …: see --list).",
        ),
    ] = "",
    mode: Annotated[
        SimulateMode,
        typer.Option("--mode", help="The stack's DefaultMode (a group's lifeguard:mode tag wins)."),
    ] = SimulateMode.quarantine,
    seed: Annotated[
        int,
        typer.Option(
            "--seed", min=0, max=2**31 - 1, metavar="N", help="Same seed, same run (LIFEGUARD_SIM_SEED)."
        ),
    ] = 1,
    as_json: Annotated[
        bool, typer.Option("--json", help="One JSON document (its keys: the README's Simulation section).")
    ] = False,
    html: Annotated[
        Path | None,
        typer.Option("--html", metavar="FILE", help="Also write a self-contained HTML report to this file."),
    ] = None,
    baseline: Annotated[
        Baseline | None,
        typer.Option(
            "--baseline",
            help="Run it again on the same seed with PCS alone or ParallelCluster's "
            "protected mode, and compare.",
        ),
    ] = None,
    list_scenarios: Annotated[
        bool, typer.Option("--list", help="List the built-in scenarios (a table, or --json).")
    ] = False,
    verbose: Annotated[bool, typer.Option("--verbose", help="The handlers' warnings on stderr.")] = False,
) -> None:
    """Run a twin of a PCS cluster on a virtual clock, where Lifeguard's own changes decide what boots next.

    Each node boots the real lifeguard-node boot on the configuration PCS held at its launch, the scaling
    log and node reports reach the real handlers through CloudWatch Logs, and remediation changes the group
    on the local PCS endpoint. An hour of cluster time takes seconds; no AWS account, no Docker.

    Example: lifeguard simulate article-loop --baseline pcs
    """
    from lifeguard_cli.simulate import ScenarioError, built_in_scenarios, load_scenario
    from lifeguard_cli.simulate import simulate as run_simulation
    from lifeguard_cli.simulate.render import render_simulation

    console = _console()
    if list_scenarios:
        from lifeguard_cli.tables import show as show_table
        from lifeguard_cli.tables import table as make_table

        listed = [(path.stem, load_scenario(path)) for path in built_in_scenarios()]
        if as_json:
            scenarios = [
                {
                    "scenario": stem,
                    "name": found.name,
                    "groups": len(found.groups),
                    "horizon_minutes": found.horizon_minutes,
                }
                for stem, found in listed
            ]
            typer.echo(json.dumps({"scenarios": scenarios}, indent=2))
            return
        made = make_table("scenario", "what it runs", "groups", "minutes", right=("groups", "minutes"))
        for stem, found in listed:
            made.add_row(stem, found.name, str(len(found.groups)), f"{found.horizon_minutes:g}")
        show_table(console, made)
        return
    if not scenario:
        raise _UsageError(
            "give a SCENARIO (a file, or a built-in name: --list)", typer._click.globals.get_current_context()
        )
    if html is not None and (html.is_dir() or not (html.parent.is_dir() and os.access(html.parent, os.W_OK))):
        problem = (
            "a directory: name a file"
            if html.is_dir()
            else f"{html.parent} is not a directory one can write to"
        )
        typer.echo(f"lifeguard simulate: --html {html}: {problem}", err=True)
        raise typer.Exit(2)
    try:
        loaded = load_scenario(scenario)
        for line in loaded.unknown_scripts():  # meant (a fetch failure), or a typo: said either way
            typer.echo(f"lifeguard simulate: note: {line}", err=True)
        with _progress(f"{loaded.name} (mode {mode.value})") as progress, _stopped_as_interrupted():
            document = run_simulation(
                loaded,
                mode=mode.value,
                seed=seed,
                baseline=baseline.value if baseline else None,
                progress=progress,
                verbose=verbose,
            )
    except ScenarioError as exc:
        for problem in exc.problems:  # every problem at once, one line each
            typer.echo(f"lifeguard simulate: {problem}", err=True)
        raise typer.Exit(2) from None
    if html is not None:
        from lifeguard_cli.simulate.html import render_html

        try:
            html.write_text(render_html(document), encoding="utf-8")
        except OSError as exc:
            typer.echo(f"lifeguard simulate: cannot write {html}: {exc.strerror or exc}", err=True)
            raise typer.Exit(1) from None
        typer.echo(f"lifeguard simulate: wrote {html}", err=True)
    if as_json:
        typer.echo(json.dumps(document, indent=2))
        return
    render_simulation(document, console)


# What status, history and undo say while AWS has not answered for a second (a slow or hung endpoint:
# each call may take its five attempts of 20 s).
_READING = "reading Lifeguard's stack, table and PCS"


@contextlib.contextmanager
def _working(what: str, *, after_seconds: float = 1.0) -> Iterator[None]:
    """Say `what` is going on, on stderr, once it has taken `after_seconds` (a spinner on a terminal)."""
    import threading

    err = _console_err()
    status = err.status(what) if err.is_terminal else None

    def show() -> None:
        if status is not None:
            status.start()
        else:
            err.print(f"{what}…", markup=False)

    timer = threading.Timer(after_seconds, show)
    timer.daemon = True
    timer.start()
    try:
        yield
    finally:
        timer.cancel()
        if status is not None:
            status.stop()


@contextlib.contextmanager
def _steps(what: str, *, after_seconds: float = 1.0) -> Iterator[Any]:
    """`update(done, total)` for work of `total` steps, shown on stderr once it has taken `after_seconds`:
    a bar on a terminal, else a line every few seconds and one at the end."""
    import time

    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn

    err = _console_err()
    started = time.monotonic()
    shown: dict[str, Any] = {"said_at": 0.0}

    def update(done: int, total: int) -> None:
        now = time.monotonic()
        if now - started < after_seconds:
            return
        if err.is_terminal:
            if "bar" not in shown:
                bar = Progress(
                    TextColumn(what), BarColumn(), MofNCompleteColumn(), console=err, transient=True
                )
                shown["bar"], shown["task"] = bar, bar.add_task(what, total=total)
                bar.start()
            shown["bar"].update(shown["task"], completed=done, total=total)
        elif now - shown["said_at"] >= 5.0 or (done == total and shown["said_at"]):
            shown["said_at"] = now
            err.print(
                f"{what}: {done} of {total}" if done else f"{what}: starting the local AWS…", markup=False
            )

    try:
        yield update
    finally:
        if "bar" in shown:
            shown["bar"].stop()


@contextlib.contextmanager
def _stopped_as_interrupted() -> Iterator[None]:
    """SIGTERM (`timeout`, a CI job cancelled, `kill`) taken as Ctrl-C is: the run unwinds, its node
    processes, local AWS and scratch directory let go, exit 143. By default it ended the process on the
    spot, and left the run's files in the temporary directory."""
    import signal

    def stop(signum: int, frame: object) -> None:
        raise SystemExit(128 + signum)

    previous = signal.signal(signal.SIGTERM, stop)
    try:
        yield
    finally:
        signal.signal(signal.SIGTERM, previous)


@contextlib.contextmanager
def _progress(what: str) -> Iterator[Any]:
    """Progress on stderr: a bar per run on a terminal, else a line as each run starts and every 10 s."""
    import time

    from rich.markup import escape
    from rich.progress import BarColumn, Progress, TextColumn

    err = _console_err()
    if not err.is_terminal:
        said: dict[str, float] = {}

        def line(run: str, fraction: float) -> None:
            # Its start, then how far it is every 10 s: a CI log shows a long run going on.
            now = time.monotonic()
            if run not in said:
                said[run] = now
                err.print(f"simulating {what}: the {run} run…", markup=False, soft_wrap=True)
            elif now - said[run] >= 10.0:
                said[run] = now
                err.print(f"simulating {what}: the {run} run, {fraction:.0%}", markup=False, soft_wrap=True)

        yield line
        return
    with Progress(TextColumn("{task.description}"), BarColumn(), console=err, transient=True) as bar:
        tasks: dict[str, Any] = {}

        def update(run: str, fraction: float) -> None:
            if run not in tasks:
                tasks[run] = bar.add_task(escape(f"{what}: {run}"), total=1.0)
            bar.update(tasks[run], completed=fraction)

        yield update


def _region_name(value: str | None) -> str | None:
    """A region as botocore takes one (refused here, as bad usage, rather than by the first call)."""
    import re

    if not value:
        return None  # `--region "$REGION"` with REGION unset: the default region, as before
    if not re.fullmatch(r"[a-zA-Z0-9](?:[a-zA-Z0-9-]{0,61}[a-zA-Z0-9])?", value):
        raise typer.BadParameter(f"{value!r} is not a region name (as us-east-1)")
    return value


def _stack_name(value: str | None) -> str | None:
    """A stack name as CloudFormation takes one (or a stack's ARN), refused here as bad usage."""
    import re

    if not value:
        return None
    if not (
        re.fullmatch(r"[A-Za-z][A-Za-z0-9-]{0,127}", value)
        or re.fullmatch(
            r"arn:aws[a-z-]*:cloudformation:[a-z0-9-]+:\d{12}:stack/[A-Za-z][A-Za-z0-9-]*/[\w-]+", value
        )
    ):
        raise typer.BadParameter(
            f"{value!r} is not a stack name (a letter, then letters, digits and hyphens, at most 128)"
        )
    return value


def _pcs_name(value: str | None, shape: str, kind: str) -> str | None:
    """A name or id as PCS takes it (its service model's pattern for `shape`)."""
    import re

    from lifeguard.bounds import pcs_pattern

    if value is not None and not re.search(pcs_pattern(shape), value):
        raise typer.BadParameter(f"{value!r} is not a {kind} name or id as PCS takes one")
    return value


def _cluster_name(value: str | None) -> str | None:
    return _pcs_name(value, "ClusterIdentifier", "cluster")


def _node_group_name(value: str) -> str:
    return _pcs_name(value, "ComputeNodeGroupIdentifier", "compute node group") or value


def _group_name(value: str) -> str:
    """GROUP, or CLUSTER/GROUP, each a name or id as PCS takes it."""
    *cluster, group = value.split("/", 1)
    for part in cluster:
        _cluster_name(part)
    _node_group_name(group)
    return value


_TABLE = typer.Option(
    "--table",
    metavar="TABLE",
    help="Lifeguard's DynamoDB table, instead of the stack's (default: $LIFEGUARD_TABLE).",
)
_LOCAL = typer.Option(
    "--local",
    help="Use the local AWS: the one lifeguard local up (or replay --keep) left running, else "
    "AWS_ENDPOINT_URL / AWS_ENDPOINT_URL_PCS on loopback.",
)
_CLUSTER = typer.Option(
    "--cluster",
    metavar="CLUSTER",
    help="The cluster (name or id) of GROUP, when the table knows it in several.",
    callback=_cluster_name,
)
_STACK = typer.Option(
    "--stack-name",
    metavar="NAME",
    help="Lifeguard's stack (default: $LIFEGUARD_STACK_NAME, samconfig.toml's stack_name, pcs-lifeguard).",
    callback=_stack_name,
)
_REGION = typer.Option(
    "--region",
    metavar="REGION",
    help="The stack's region (default: the AWS CLI's, else samconfig.toml's).",
    callback=_region_name,
)
_PROFILE = typer.Option("--profile", metavar="PROFILE", help="AWS CLI profile to use.")


def _unused_with_local(region: str | None, profile: str | None) -> None:
    """Say which of --region and --profile, given with --local, go unused."""
    unused = [
        f"{option} {value}" for option, value in (("--region", region), ("--profile", profile)) if value
    ]
    if unused:
        typer.echo(
            f"lifeguard: --local: {' and '.join(unused)} not used "
            "(the local AWS is one region, with test keys)",
            err=True,
        )


def _operator(
    table: str | None, local: bool, stack_name: str | None, region: str | None, profile: str | None
) -> Any:
    """The operator of the command's table and PCS; what it cannot open (no local AWS for --local, no stack)
    is an OperatorError or a DeploymentError: the command's one line, exit 1 (`_one_line_errors`). With
    --local, a --region or --profile given is said to go unused (the local AWS has one region, test keys)."""
    from lifeguard_cli.operate import open_operator

    if local:
        _unused_with_local(region, profile)
    operator = open_operator(table=table, local=local, stack_name=stack_name, region=region, profile=profile)
    operator.where = _where(local, stack_name, region, profile, table)
    return operator


def _where(
    local: bool, stack_name: str | None, region: str | None, profile: str | None, table: str | None = None
) -> str:
    """The options that chose the stack, as a command line gives them: a command the operator is told to
    run next (the preview of a forced undo, the status of a cluster) goes to the same one. With --local, a
    --region or --profile given goes unused (said at once), and is left out."""
    if local:
        region = profile = None
    given = (("--stack-name", stack_name), ("--region", region), ("--profile", profile), ("--table", table))
    return shlex.join(
        [*(["--local"] if local else []), *(part for name, value in given if value for part in (name, value))]
    )


@contextlib.contextmanager
def _one_line_errors(command: str) -> Iterator[None]:
    """A LifeguardError, or an error of AWS, as one line naming the command; exit 1 (2 for a command line
    that asks what cannot be, `CommandLineError`)."""
    from lifeguard.bounds import one_line  # an AWS answer's message: no line or escape of its own
    from lifeguard.errors import LifeguardError
    from lifeguard_cli.deployment import aws_error_line
    from lifeguard_cli.operate import CommandLineError

    try:
        yield
    except LifeguardError as exc:
        if _DEBUG["on"]:
            raise
        typer.echo(f"lifeguard {command}: {one_line(aws_error_line(exc) or exc)}", err=True)
        raise typer.Exit(2 if isinstance(exc, CommandLineError) else 1) from None
    except Exception as exc:
        line = aws_error_line(exc)
        if line is None or _DEBUG["on"]:
            raise
        typer.echo(f"lifeguard {command}: {one_line(line)}", err=True)
        raise typer.Exit(1) from None


@app.command(cls=_Command)
def status(
    cluster: Annotated[
        str | None,
        typer.Option(
            "--cluster",
            metavar="CLUSTER",
            help="Only the groups of this cluster (name or id).",
            callback=_cluster_name,
        ),
    ] = None,
    stack_name: Annotated[str | None, _STACK] = None,
    region: Annotated[str | None, _REGION] = None,
    profile: Annotated[str | None, _PROFILE] = None,
    table: Annotated[str | None, _TABLE] = None,
    local: Annotated[bool, _LOCAL] = False,
    as_json: Annotated[bool, typer.Option("--json", help="One JSON document.")] = False,
) -> None:
    """The compute node groups Lifeguard watches: mode, open episode, last action.

    \b
    Example:
      lifeguard status --cluster pcs_abc123de45 \\
        --stack-name pcs-lifeguard --region us-east-1
    """
    from lifeguard_cli.operate import format_time
    from lifeguard_cli.tables import show as show_table
    from lifeguard_cli.tables import table as make_table

    with _one_line_errors("status"), _working(_READING):
        operator = _operator(table, local, stack_name, region, profile)
        rows = operator.status(cluster)
    _say_unreadable("status", operator.unreadable)
    if operator.gone:
        named = ", ".join(group for _, group in sorted(operator.gone)[:5])
        typer.echo(
            f"lifeguard status: {len(operator.gone)} group(s) no longer in PCS (deleted since Lifeguard last "
            f"read them): {named}; shown as Lifeguard last recorded them",
            err=True,
        )
    if operator.tags_unread:
        errors = list(operator.tags_unread.values())
        codes = ", ".join(sorted({error.code for error in errors})[:3])
        typer.echo(
            f"lifeguard status: the mode of {len(errors)} group(s) is from the tags Lifeguard last read, not "
            f"as they are now: PCS answered {codes}{_unread_hint(errors)}",
            err=True,
        )
    stack = operator.stack
    health = operator.health()
    if as_json:
        document = {
            "stack": stack.to_dict() if stack else None,
            "health": health.to_dict() if health else None,
            "groups": [row.to_dict() for row in rows],
        }
        typer.echo(json.dumps(document, indent=2))
        return
    view = make_table("cluster", "group", "mode", "open episode", "last action (UTC)")
    for row in rows:
        episode = row.episode
        open_text = (
            f"{episode['kind']} {episode['episode_id']} ({episode['failures']} failed"
            + (f", {episode['suspect']})" if episode["suspect"] else ")")
            + (f"; contained, not fixed: {len(episode['kept'])} kept" if episode["contained_at"] else "")
            + (f", {len(episode['replaced'])} replaced as unhealthy" if episode["replaced"] else "")
            + (f", {len(episode['ended'])} failed since" if episode.get("ended") else "")
            + (
                f"; now a replacement loop: {episode['replacement_loop']} nodes replaced as unhealthy"
                if episode["replacement_loop"]
                else ""
            )
            if episode
            else "-"
        )
        last = row.last_action
        last_text = _last_action_text(last, format_time) if last else "-"
        if row.standing:  # behind a later skip: the change that holds the group still
            standing = row.standing
            since = "stands" if standing["holds"] else "replaced since by another configuration"
            last_text += f"; {standing['action']} of {format_time(standing['at'] / 1000)} {since}"
        group_text = f"{row.name} ({row.group_id})" if row.name else row.group_id
        group_text = group_text if row.in_pcs else f"{row.group_id} (no longer in PCS)"
        view.add_row(row.cluster_id, group_text, row.shown_mode, open_text, last_text)
    console = _console()
    if stack:
        dry = "true (every mode only says what it would do)" if stack.dry_run else "false"
        console.print(
            f"stack {stack.stack_name} ({stack.region}): DefaultMode {stack.default_mode}, DryRun {dry}"
        )
        told = f"SNS {stack.topic}" if stack.topic else "no SNS topic"
        told += " and Slack" if stack.slack else " (no Slack webhook)"
        lines = [f"notifications: {told}; alarms: {stack.alarms or '-'}"]
        if stack.parked:
            lines.append(f"parked events (inspect and redrive): {stack.parked}")
        if health is not None:
            lines.append(_health_line(health, stack))
            lines.extend(f"attention: {said}" for said in health.attention(stack))
            lines.extend(f"not read: {said}" for said in health.unread)
        _say(console, lines)  # an ARN, a queue's URL copied whole
    if rows:
        show_table(console, view)
    elif cluster:
        console.print(f"Lifeguard has seen no compute node group of cluster {cluster}.", markup=False)
    else:
        console.print("Lifeguard has seen no compute node group yet.")


def _health_line(health: StackHealth, stack: StackView) -> str:
    """The stack's health in one line: what waits in its queues, who is told, which alarms fire. `-` for
    what the stack has none of (a replay's keeps no queues or topics), `?` for what was not read (said on
    a `not read:` line)."""

    def count(value: int | None, there: object = True) -> str:  # `there`: falsy when the stack has none
        return "-" if not there else "?" if value is None else str(value)

    def read_to_max(value: int | None, there: object = True) -> str:  # subscribers, alarms: to a bound
        return f"{value}+" if value is not None and health.at_least(value) else count(value, there)

    firing = health.alarms_firing
    alarms = "?" if firing is None else (read_to_max(len(firing)) if firing else "none")
    return (
        f"health: parked events {count(health.parked_events, stack.parked)}, failed batches "
        f"{count(health.failed_batches, stack.failed)}; subscribers: notifications "
        f"{read_to_max(health.notification_subscribers, stack.topic)}, alarms "
        f"{read_to_max(health.alarm_subscribers, stack.alarms)}; alarms in ALARM: {alarms}"
    )


@app.command(cls=_Command)
def history(
    group: Annotated[
        str,
        typer.Argument(
            metavar="GROUP", help="Compute node group name or id (or CLUSTER/GROUP).", callback=_group_name
        ),
    ],
    cluster: Annotated[str | None, _CLUSTER] = None,
    stack_name: Annotated[str | None, _STACK] = None,
    region: Annotated[str | None, _REGION] = None,
    profile: Annotated[str | None, _PROFILE] = None,
    table: Annotated[str | None, _TABLE] = None,
    local: Annotated[bool, _LOCAL] = False,
    last: Annotated[
        int | None,
        typer.Option("--last", min=1, max=100_000, metavar="N", help="Only the N latest entries."),
    ] = None,
    as_json: Annotated[bool, typer.Option("--json", help="One JSON document.")] = False,
) -> None:
    """The audit trail of a group: every decision, with the configuration before and after.

    Example: lifeguard history pcs_abcdef01
    """
    from lifeguard.notify.summary import diff_line
    from lifeguard_cli.operate import epoch_ms, format_time
    from lifeguard_cli.tables import show as show_table
    from lifeguard_cli.tables import table as make_table

    with _one_line_errors("history"), _working(_READING):
        operator = _operator(table, local, stack_name, region, profile)
        cluster_id, group_id, entries = operator.history(group, cluster, last=last)
    _say_unreadable("history", operator.unreadable)
    if as_json:
        document = {
            "cluster_id": cluster_id,
            "compute_node_group_id": group_id,
            "entries": [{**entry.model_dump(), "at": epoch_ms(entry.at)} for entry in entries],
        }
        typer.echo(json.dumps(document, indent=2))
        return
    view = make_table("time (UTC)", "decision", "episode", "action", "changes", "reason")
    for entry in entries:
        action = f"{entry.action or '-'}{' (dry run)' if entry.dry_run else ''}"
        # A containment or resolution read off the group's state has no revision of its own: none shown.
        episode = f"{entry.episode_id or '-'}" + (f" r{entry.revision}" if entry.revision else "")
        changes = "\n".join(diff_line(change) for change in entry.diff) or "-"
        if entry.diff and entry.decision not in ("applied", "undo"):  # a dry run's, a skip's: not made
            changes = f"not made:\n{changes}"
        view.add_row(format_time(entry.at), entry.decision, episode, action, changes, entry.reason or "")
    console = _console()
    console.print(f"{cluster_id}/{group_id}: {len(entries)} {'entry' if len(entries) == 1 else 'entries'}")
    if entries:
        show_table(console, view)


@app.command(cls=_Command)
def undo(
    group: Annotated[
        str,
        typer.Argument(
            metavar="GROUP", help="Compute node group name or id (or CLUSTER/GROUP).", callback=_group_name
        ),
    ],
    cluster: Annotated[str | None, _CLUSTER] = None,
    dry_run: Annotated[
        bool, typer.Option("--dry-run", help="Show what would be put back; change nothing.")
    ] = False,
    force: Annotated[
        bool,
        typer.Option("--force", help="Put it back even if someone changed the group since Lifeguard did."),
    ] = False,
    yes: Annotated[bool, typer.Option("--yes", "-y", help="Do not ask before changing the group.")] = False,
    stack_name: Annotated[str | None, _STACK] = None,
    region: Annotated[str | None, _REGION] = None,
    profile: Annotated[str | None, _PROFILE] = None,
    table: Annotated[str | None, _TABLE] = None,
    local: Annotated[bool, _LOCAL] = False,
    as_json: Annotated[bool, typer.Option("--json", help="One JSON document.")] = False,
) -> None:
    """Put back the configuration from before Lifeguard's last change of GROUP.

    It shows the change and asks first, unless --yes (without a terminal to ask on, --yes is required).

    Example: lifeguard undo pcs_abcdef01 --cluster pcs_abc123de45 --dry-run
    """
    if not dry_run and not yes and not sys.stdin.isatty():  # bad usage: said before AWS is asked anything
        typer.echo("lifeguard undo: this changes the group in PCS: pass --yes to confirm", err=True)
        raise typer.Exit(2)
    with _one_line_errors("undo"):
        with _working(_READING):
            operator = _operator(table, local, stack_name, region, profile)
        if not dry_run and not yes:
            with _working(_READING):
                preview = operator.undo(group, cluster, dry_run=True, force=force)
            # On stderr: stdout stays the result's (--json).
            _say_undo(_console_err(), preview.cluster_id, preview.group_id, preview.lines[:-1])
            if not _asked("Put this configuration back?"):
                typer.echo("nothing changed", err=True)
                raise typer.Exit(1)
            with _working("undoing"):
                result = operator.undo(group, cluster, force=force, shown=preview)
        else:
            with _working("undoing" if not dry_run else _READING):
                result = operator.undo(group, cluster, dry_run=dry_run, force=force)
    if as_json:
        typer.echo(json.dumps(result.to_dict(), indent=2))
        return
    _say_undo(_console(), result.cluster_id, result.group_id, result.lines)


def _say_unreadable(command: str, unreadable: list[str]) -> None:
    """One line on stderr for each state item of the table that could not be read, and was left out."""
    for item in unreadable:
        typer.echo(f"lifeguard {command}: left out a state item that cannot be read: {item}", err=True)


def _asked(question: str) -> bool:
    """The operator's yes to `question` (no by default). Ctrl-C or the end of input at the prompt is a no
    said as one ("nothing changed"): Ctrl-C exits 130, as it does anywhere else, not with Click's
    "Aborted!"."""
    # Asked on stderr and read here: Click's confirm writes the space after its prompt to stdout, which is
    # the result's (a `--json` document would start with it).
    while True:
        try:
            typer.echo(f"{question} [y/N]: ", err=True, nl=False)  # a Ctrl-C once it is shown is caught
            answer = sys.stdin.readline()
        except KeyboardInterrupt:
            typer.echo("\nnothing changed", err=True)
            raise typer.Exit(130) from None
        if not answer:  # the end of input (Ctrl-D)
            typer.echo("\nnothing changed", err=True)
            raise typer.Exit(1)
        word = answer.strip().lower()
        if word in ("y", "yes"):
            return True
        if word in ("", "n", "no"):
            return False
        typer.echo("Error: invalid input", err=True)


def _last_action_text(last: dict[str, Any], format_time: Any) -> str:
    """`2026-10-21 01:13 applied quarantine`, `... skipped`, `... undo` (its decision and its action are
    one word: not said twice), `(dry run)` after one that was."""
    words = [format_time(last["at"] / 1000), last["decision"]]  # `at` in epoch ms, as --json gives it
    if last["action"] and last["action"] != last["decision"]:
        words.append(last["action"])
    return " ".join(words) + (" (dry run)" if last["dry_run"] else "")


def _unread_hint(errors: list[AwsCallError]) -> str:
    """What to do about PCS's refusals of status's reads: a grant for the calls denied (the call that
    failed: GetComputeNodeGroup too, for a group known without its ARN), another run for a throttle or an
    outage; nothing for another refusal, which no grant mends."""
    from lifeguard.aws.pcs import is_transient

    hints = []
    denied = sorted({error.operation for error in errors if error.code == "AccessDeniedException"})
    if denied:
        hints.append("grant " + ", ".join(f"pcs:{operation}" for operation in denied))
    if any(is_transient(error) for error in errors):
        hints.append("PCS is throttling or unavailable: run it again in a minute")
    return f" ({'; '.join(hints)})" if hints else ""


def _say_undo(out: Console, cluster_id: str, group_id: str, lines: list[str]) -> None:
    """The group, then what the undo does, line by line (`_say`)."""
    _say(out, [f"{cluster_id}/{group_id}:", *lines])


def _say(out: Console, lines: list[str]) -> None:
    """Lines for people, each wrapped between words to the width, its continuation indented under it."""
    for line in lines:
        indent = line[: len(line) - len(line.lstrip())]
        # Between words only: an ARN or an S3 location is copied whole, its hyphens no place to break.
        parts = textwrap.wrap(
            line,
            width=max(20, out.width),
            subsequent_indent=indent + "  ",
            break_on_hyphens=False,
            break_long_words=False,
        )
        for part in parts or [""]:
            out.print(part, markup=False, highlight=False, soft_wrap=True)


@app.command(cls=_Command)
def enroll(
    group: Annotated[
        str,
        typer.Argument(
            metavar="GROUP",
            help="Compute node group id or name (or CLUSTER/GROUP).",
            callback=_group_name,
        ),
    ],
    cluster: Annotated[
        str | None,
        typer.Option(
            "--cluster",
            metavar="CLUSTER",
            help="The group's cluster (id or name), unless GROUP is CLUSTER/GROUP.",
            callback=_cluster_name,
        ),
    ] = None,
    stack_name: Annotated[str | None, _STACK] = None,
    region: Annotated[str | None, _REGION] = None,
    profile: Annotated[str | None, _PROFILE] = None,
    local: Annotated[bool, _LOCAL] = False,
    remove: Annotated[bool, typer.Option("--remove", help="Take the shipper out instead.")] = False,
    dry_run: Annotated[bool, typer.Option("--dry-run", help="Show the change; change nothing.")] = False,
    yes: Annotated[bool, typer.Option("--yes", "-y", help="Do not ask before changing the group.")] = False,
    as_json: Annotated[bool, typer.Option("--json", help="One JSON document.")] = False,
) -> None:
    """Put the stack's shipper first in GROUP's nodeBootstrapped stage, pinned to the published bundle.

    The entry is the stack's ShipperLifecycleEntry output (onError CONTINUE, EVERY_BOOT). PCS drains the
    group's running nodes and replaces them; nodes launched afterwards ship their script outcomes to
    Lifeguard; their instance role needs the NodePolicyArn output.
    It shows the change and asks first, unless --yes (without a terminal to ask on, --yes is required).

    Example: lifeguard enroll lca-static --cluster lca --dry-run
    """
    from functools import partial

    from lifeguard.aws.pcs import PcsGateway
    from lifeguard_cli.deployment import read_deployment
    from lifeguard_cli.enroll import ShipperEntry, change_enrollment

    named_cluster, _, named_group = group.rpartition("/")
    if named_cluster and cluster and named_cluster != cluster:
        typer.echo(f"lifeguard enroll: --cluster {cluster} and {group} name two clusters; give one", err=True)
        raise typer.Exit(2)
    group, cluster = named_group, cluster or named_cluster
    if not cluster:
        typer.echo("lifeguard enroll: which cluster? pass --cluster, or GROUP as CLUSTER/GROUP", err=True)
        raise typer.Exit(2)
    if not dry_run and not yes and not sys.stdin.isatty():  # bad usage: said before AWS is asked anything
        typer.echo("lifeguard enroll: this changes the group in PCS: pass --yes to confirm", err=True)
        raise typer.Exit(2)
    with _one_line_errors("enroll"):
        if local:
            from lifeguard_cli.operate import local_target

            _unused_with_local(region, profile)
            target = local_target(None, stack_name)
            deployment = read_deployment(target.stack_name, session=target.session)
            if "ShipperLifecycleEntry" not in deployment.outputs:
                typer.echo(
                    "lifeguard enroll: the local AWS replay --keep left publishes no shipper: stop it with "
                    "lifeguard local down, then enroll on the one lifeguard local up starts",
                    err=True,
                )
                raise typer.Exit(1)
        else:
            deployment = read_deployment(stack_name, region=region, profile=profile)
        entry = ShipperEntry.from_deployment(deployment)
        # CloudFormation gives a CommaDelimitedList as `a,b` (moto as a list's repr): its ids either way.
        watched = re.findall(r"pcs_[A-Za-z0-9]+", deployment.parameters.get("ClusterIds", ""))
        where = _where(local, stack_name, region, profile)
        change = partial(change_enrollment, "remove" if remove else "enroll", watched=watched, where=where)
        pcs = PcsGateway(deployment.client("pcs"))
        policy = deployment.outputs.get("NodePolicyArn")
        needs = f"  instances need the managed policy {policy}" if policy and not remove else None
        if not dry_run and not yes:
            preview = change(pcs, entry, group, cluster, dry_run=True)
            # stdout stays the result's (--json); the instance role's need is said before it is agreed to
            _say(_console_err(), [*preview.lines()[:-1], *([needs] if needs else [])])
            if preview.status != "ACTIVE":  # nothing to agree to: PCS would refuse it
                typer.echo("nothing changed", err=True)
                raise typer.Exit(1)
            if not _asked("Make this change?"):
                typer.echo("nothing changed", err=True)
                raise typer.Exit(1)
            result = change(pcs, entry, group, cluster, shown=preview)
        else:
            result = change(pcs, entry, group, cluster, dry_run=dry_run)
    if as_json:
        typer.echo(json.dumps({"stack_name": deployment.stack_name, **result.to_dict()}, indent=2))
        return
    lines = result.lines()
    if needs and result.action == "enroll":
        lines.insert(-1, needs)
    _say(_console(), lines)


local_app = typer.Typer(
    help="A local AWS that stays up: moto and the local PCS endpoint, with the stack's resources in it.",
    no_args_is_help=True,
    context_settings={"help_option_names": ["-h", "--help"]},
)
app.add_typer(local_app, name="local")
LOCAL_STACK = "pcs-lifeguard-local"


@local_app.command("up", cls=_Command)
def local_up(
    mode: Annotated[
        SimulateMode | None,
        typer.Option("--mode", help="The local stack's DefaultMode parameter.  [default: notify]"),
    ] = None,
) -> None:
    """Start a local AWS in the background with a local deployment of the stack, and print the variables
    that point the AWS CLI at it. `--local` finds it; `lifeguard local down` stops it.

    Example: lifeguard local up && lifeguard status --local
    """
    from lifeguard_cli.local import background

    wanted = (mode or SimulateMode.notify).value

    def up(ready: Any) -> None:
        from lifeguard_cli.local import LocalPcs, local_aws
        from lifeguard_cli.local.stack import create_deployed_stack

        with local_aws(LocalPcs(update_seconds=0)) as aws:
            deployed = create_deployed_stack(
                aws.client, "local", stack_name=LOCAL_STACK, parameters={"DefaultMode": wanted}
            )
            environ = {**aws.environ(), "LIFEGUARD_STACK_NAME": deployed.stack_name}
            typer.echo(f"# the local AWS is up: stack {deployed.stack_name}, table {deployed.stack.table}")
            typer.echo(background.exports(environ))
            ready({"environ": environ, "table": None, "stack_name": deployed.stack_name, "mode": wanted})
            background.serve_until_stopped()

    _refuse_foreign_state("local up")
    with background.starting() as lock:
        running = background.read_state()
        if running is not None:
            serving = running.get("mode") or running["environ"].get("LIFEGUARD_DEFAULT_MODE")
            if mode is not None and serving and serving != mode.value:
                typer.echo(
                    f"lifeguard local up: the local AWS is up already (pid {running['pid']}) with "
                    f"DefaultMode {serving}: lifeguard local down, then local up --mode {mode.value}",
                    err=True,
                )
                raise typer.Exit(1)
            with_mode = f", DefaultMode {serving}" if serving else ""
            typer.echo(f"# the local AWS is up already (pid {running['pid']}{with_mode})")
            typer.echo(background.exports(background.shell_environ(running)))
            return
        typer.echo("starting the local AWS and its stack…", err=True)  # about two seconds
        code = background.in_background(up, close_in_child=(lock,))
    if code:
        raise typer.Exit(code)


@local_app.command("down", cls=_Command)
def local_down() -> None:
    """Stop the local AWS that `lifeguard local up` or `replay --keep` left running.

    Example: lifeguard local down
    """
    from lifeguard_cli.local import background

    _refuse_foreign_state("local down", keeping=False)
    pid = background.stop()
    typer.echo("no local AWS was running" if pid is None else f"the local AWS (pid {pid}) is stopped")


def _refuse_foreign_state(command: str, *, keeping: bool = True) -> None:
    """Exit 1 when the state file's place holds a file no local AWS wrote (`LIFEGUARD_LOCAL_STATE` naming
    another file): starting one would write over it, stopping one would delete it; or, `keeping` a local
    AWS up, when its folder cannot be made (a file in the way): said before anything starts."""
    from lifeguard_cli.local import background

    if keeping:
        place = background.state_path().parent
        try:
            place.mkdir(parents=True, exist_ok=True)
        except OSError as exc:
            why = exc.strerror or str(exc)
            typer.echo(
                f"lifeguard {command}: cannot keep the local AWS's state in {place}: {why} "
                "(LIFEGUARD_LOCAL_STATE?)",
                err=True,
            )
            raise typer.Exit(1) from None
    foreign = background.foreign_state()
    if foreign is not None:
        typer.echo(
            f"lifeguard {command}: {foreign} is not a local AWS state file (LIFEGUARD_LOCAL_STATE?): "
            "left as it is",
            err=True,
        )
        raise typer.Exit(1)


def _console() -> Console:
    from lifeguard_cli.tables import console

    return console()


def _console_err() -> Console:
    from lifeguard_cli.tables import console

    return console(stderr=True)


def _debug_first(arguments: list[str]) -> list[str]:
    """The command line with a `--debug` given after the command moved before it, where it is an option of
    `lifeguard` itself (`lifeguard status --debug` as `lifeguard --debug status`); none after `--`."""
    before = arguments[: arguments.index("--")] if "--" in arguments else arguments
    if "--debug" not in before[1:]:
        return arguments
    at = before.index("--debug", 1)
    return ["--debug", *arguments[:at], *arguments[at + 1 :]]


def main() -> None:
    """Console-script entry point: an unforeseen error is one line and exit 1 (its traceback with --debug)."""
    try:
        app(args=_debug_first(sys.argv[1:]))
    except BrokenPipeError:  # typer.echo's reader went away (rich's console says so itself)
        from lifeguard_cli.tables import stop_on_broken_pipe

        stop_on_broken_pipe()
    except Exception as exc:
        if _DEBUG["on"]:
            raise
        from lifeguard.bounds import one_line  # an AWS answer's message: no line or escape of its own
        from lifeguard_cli.deployment import aws_error_line

        line = aws_error_line(exc) or f"internal error: {type(exc).__name__}: {exc} (--debug shows where)"
        typer.echo(f"lifeguard: {one_line(line)}", err=True)
        sys.exit(1)


if __name__ == "__main__":  # `python -m lifeguard_cli.cli` ran nothing and exited 0: a command taken as done
    main()
