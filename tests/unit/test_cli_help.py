"""`lifeguard … -h` as people read it at 80 columns: every line fits, and an example is never split inside a
word (a path cut after `article-`, `pcs-` of a stack name), so it runs as pasted."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
from typer.testing import CliRunner

from lifeguard_cli.cli import app
from tests.conftest import EVENTS

COMMANDS = [
    ["lint"],
    ["replay"],
    ["demo"],
    ["simulate"],
    ["status"],
    ["history"],
    ["undo"],
    ["enroll"],
    ["local", "up"],
    ["local", "down"],
]


@pytest.mark.parametrize("command", COMMANDS, ids=" ".join)
def test_help_fits_80_columns_and_its_example_runs_as_pasted(command: list[str]) -> None:
    shown = CliRunner().invoke(app, [*command, "-h"], env={"COLUMNS": "80"})
    assert shown.exit_code == 0
    lines = shown.stdout.splitlines()
    assert [line for line in lines if len(line) > 80] == []
    assert [line for line in lines if re.search(r"[\w/.]-$", line)] == []
    start = next(i for i, line in enumerate(lines) if line.strip().startswith("Example"))
    first = lines[start].strip().removeprefix("Example:").strip()
    pasted = [first] if first else []
    for line in lines[start + 1 :]:
        if pasted and not pasted[-1].endswith("\\"):
            break
        pasted.append(line.strip())
    words = " ".join(line.removesuffix("\\") for line in pasted).split()
    assert words[:2] == ["lifeguard", command[0]]
    assert all(" \\" not in line.removesuffix(" \\") for line in pasted)


def test_progress_with_no_terminal_says_each_run_and_how_far_it_is_every_ten_seconds(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """A CI log: one line as the run starts, then nothing for minutes, was all a long simulation said."""
    from lifeguard_cli import cli

    now = [0.0]
    monkeypatch.setattr("time.monotonic", lambda: now[0])
    with cli._progress("article TERMINATE loop (mode quarantine)") as update:
        for at, fraction in ((0.0, 0.0), (4.0, 0.1), (10.0, 0.25), (15.0, 0.4), (21.0, 0.6)):
            now[0] = at
            update("lifeguard", fraction)
    assert capsys.readouterr().err.splitlines() == [
        "simulating article TERMINATE loop (mode quarantine): the lifeguard run…",
        "simulating article TERMINATE loop (mode quarantine): the lifeguard run, 25%",
        "simulating article TERMINATE loop (mode quarantine): the lifeguard run, 60%",
    ]


@pytest.mark.parametrize(
    "command",
    [
        ["status", "--cluster"],
        ["history", "g", "--cluster"],
        ["lint", "--previous"],
        ["replay", "--config"],
        ["simulate", "--seed"],
        ["undo", "g", "--stack-name"],
        ["local", "up", "--mode"],
        ["simulate"],
    ],
    ids=" ".join,
)
def test_every_usage_error_shows_the_usage_above_its_one_error_line(command: list[str]) -> None:
    """README (Operating): a command line it cannot take shows the command's usage and `-h` above its one
    `Error:` line, exit 2; an option given without its value too (Click raises that one without them)."""
    shown = CliRunner().invoke(app, command)
    assert shown.exit_code == 2
    lines = shown.stderr.splitlines()
    name = " ".join(word for word in command if not word.startswith("-") and word != "g")
    assert lines[0].startswith(f"Usage: lifeguard {name} ")
    assert lines[1] == f"Try 'lifeguard {name} -h' for help."
    assert [line for line in lines if line.startswith("Error:")] == [lines[-1]]


@pytest.mark.parametrize("command", [["status"], ["history", "g"], ["undo", "g", "--yes"]], ids=" ".join)
@pytest.mark.parametrize("cluster", ["ab", "pcs_", "-x", ""])
def test_a_cluster_no_pcs_call_takes_is_bad_usage_on_every_command(command: list[str], cluster: str) -> None:
    """`status --cluster ab` went to AWS and came back as GetCluster's ValidationException (exit 1), and
    `--cluster ""` listed every cluster, where history and undo refused it as usage."""
    shown = CliRunner().invoke(app, [*command, f"--cluster={cluster}"])
    assert shown.exit_code == 2
    assert shown.stderr.splitlines()[-1].endswith(
        f"Invalid value for '--cluster': {cluster!r} is not a cluster name or id as PCS takes one"
    )


@pytest.mark.parametrize(
    ("command", "usage"),
    [
        (["undo"], "Usage: lifeguard undo [OPTIONS] GROUP"),
        (["history"], "Usage: lifeguard history [OPTIONS] GROUP"),
        (["lint"], "Usage: lifeguard lint [OPTIONS] FILE..."),
        (["simulate"], "Usage: lifeguard simulate [OPTIONS] [SCENARIO]"),
    ],
    ids=lambda value: value[0] if isinstance(value, list) else None,
)
def test_usage_writes_arguments_as_the_readme_does(command: list[str], usage: str) -> None:
    """A required argument bare, an optional one in brackets, as Click and POSIX write them (not
    typer's `{GROUP}`)."""
    shown = CliRunner().invoke(app, [*command, "-h"], env={"COLUMNS": "80"})
    assert shown.stdout.splitlines()[0] == usage


@pytest.mark.parametrize(
    ("command", "said"),
    [
        (["undo", "lca-static"], "lifeguard undo: this changes the group in PCS: pass --yes to confirm\n"),
        (
            ["enroll", "pcs_abc123de45/lca-static"],
            "lifeguard enroll: this changes the group in PCS: pass --yes to confirm\n",
        ),
    ],
    ids=["undo", "enroll"],
)
def test_a_change_without_yes_and_no_terminal_is_bad_usage_before_aws_is_asked(
    command: list[str], said: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """No terminal to ask on and no --yes: exit 2 naming --yes, whatever AWS would have said (here: no
    region, no credentials; the usage is told first)."""
    for name in ("AWS_DEFAULT_REGION", "AWS_REGION", "AWS_PROFILE", "AWS_ENDPOINT_URL"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("AWS_CONFIG_FILE", "/nonexistent")
    done = CliRunner().invoke(app, command)
    assert (done.exit_code, done.stderr) == (2, said)


@pytest.mark.parametrize(
    ("command", "error"),
    [
        (["replay", "--mode", "off", "x.jsonl"], "'off' is not one of 'quarantine', 'revert', 'notify'."),
        (
            ["local", "up", "--mode", "bogus"],
            "'bogus' is not one of 'quarantine', 'revert', 'notify', 'off'.",
        ),
    ],
    ids=["replay", "local-up"],
)
def test_a_value_not_taken_says_so_in_clicks_words_not_pydantics(command: list[str], error: str) -> None:
    """typer checks values through pydantic, whose message began 'Value error, '."""
    shown = CliRunner().invoke(app, command)
    assert shown.exit_code == 2
    assert shown.stderr.splitlines()[-1] == f"Error: Invalid value for '--mode': {error}"


@pytest.mark.parametrize(
    ("content", "said"),
    [
        (None, "cannot read it: No such file or directory"),
        (
            '{"clusterIdentifier": "c", "computeNodeGroupIdentifier": "g"}',
            "an update-compute-node-group request without nodeLifecycleActions",
        ),
        (
            '{"computeNodeGroup": {"id": "pcs_abc", "clusterId": "pcs_x", "name": "n"}}',
            "computeNodeGroup: a get-compute-node-group response without nodeLifecycleActions "
            "(the group runs none, or the AWS CLI that printed it predates them)",
        ),
    ],
    ids=["missing", "request", "response"],
)
def test_a_replay_config_with_no_configuration_says_why_in_one_line(
    tmp_path: Path, content: str | None, said: str
) -> None:
    """Lint's words came through as they were ('(document): ...', '...: nothing to lint'), and a response of
    a group that runs no scripts said nothing at all after its name."""
    config = tmp_path / "config.json"
    if content is not None:
        config.write_text(content)
    shown = CliRunner().invoke(app, ["replay", "--config", str(config), str(tmp_path / "x.jsonl")])
    assert (shown.exit_code, shown.stderr) == (2, f"lifeguard replay: --config {config}: {said}\n")


def test_a_demo_scenario_is_headed_by_the_modes_lifeguard_acted_in() -> None:
    """The demo runs under a quarantine stack; a group tagged `revert` is reverted, and its heading says
    so, as the table's column does, not the stack's default alone."""
    from lifeguard_cli import cli

    tagged = {
        "scenario": "bad change, then revert",
        "mode": "quarantine",
        "events": [{"detail": {"mode": "revert"}}, {"detail": {"mode": "revert"}}],
    }
    assert cli._scenario_heading(3, 8, tagged) == "3/8 bad change, then revert (mode revert)"
    quiet = {"scenario": "healthy scale-up", "mode": "quarantine", "events": []}
    assert cli._scenario_heading(5, 8, quiet) == "5/8 healthy scale-up (mode quarantine)"


def test_the_readme_gives_each_operating_command_with_the_options_it_takes() -> None:
    """README (Operating): its block names each command's own options, and none it does not take; the
    options of every command that reach the stack (`--stack-name`, `--region`, `--profile`, `--table`,
    `--local`) are said once, under it."""
    import typer

    readme = (Path(__file__).resolve().parents[2] / "README.md").read_text()
    block = readme.split("## Operating", 1)[1].split("```bash", 1)[1].split("```", 1)[0]
    given: dict[str, set[str]] = {}
    for line in block.splitlines():
        if line.startswith("lifeguard "):
            given[line.split()[1]] = set(re.findall(r"--[a-z-]+|-[a-z]\b", line.split("#")[0]))
    group = typer.main.get_command(app)
    shared = {"--stack-name", "--region", "--profile", "--table", "--local", "--help", "-h"}
    taken = {
        name: {
            option
            for param in group.commands[name].params  # type: ignore[attr-defined]
            for option in (*param.opts, *param.secondary_opts)
            if option.startswith("-")
        }
        - shared
        for name in given
    }
    assert set(given) == {"status", "history", "undo"}
    assert given == taken


def _said(stderr: str) -> list[str]:
    """What lint said on stderr, but for the line saying what it is doing, which a loaded machine (CI's
    workers) prints first when the reading takes over a second (`_working`)."""
    return [line for line in stderr.splitlines() if not line.startswith("linting ")]


@pytest.mark.parametrize("command", ["replay", "lint"])
def test_a_config_of_many_problems_is_said_in_one_bounded_line(tmp_path: Path, command: str) -> None:
    """A 2 MB config of 100,000 unknown keys: replay's --config error was one line of 9 MB, and lint's
    --previous one line a problem (100,001 of them). The first five are said, and how many more."""
    config = tmp_path / "config.json"
    config.write_text(
        json.dumps({"stages": {"nodeBootstrapped": []}, **{f"k{n}": 1 for n in range(100_000)}})
    )
    args = ["--config", str(config), str(tmp_path / "x.jsonl")] if command == "replay" else []
    if command == "lint":
        args = ["--previous", str(config), str(EVENTS / "configs" / "article-terminate.json")]
    shown = CliRunner().invoke(app, [command, *args])
    assert shown.exit_code == 2
    [line] = _said(shown.stderr)
    assert len(line) < 2_000
    assert line.endswith("(and 99996 more: `lifeguard lint` lists them)"), line[-200:]
    assert "k3: is not a field of NodeLifecycleActionsRequest" in line


def test_a_previous_of_a_group_that_runs_no_scripts_is_linted_against_nothing(tmp_path: Path) -> None:
    """Such a response has a note and no problem: bounding the problems' line made it an error with no
    reason (exit 2); it lints as before."""
    previous = tmp_path / "response.json"
    previous.write_text('{"computeNodeGroup": {"name": "g", "id": "pcs_abcdef01"}}')
    shown = CliRunner().invoke(
        app, ["lint", "--previous", str(previous), str(EVENTS / "configs" / "article-reverted.json")]
    )
    assert shown.exit_code == 0, shown.output
    assert _said(shown.stderr) == []


def test_a_problem_that_holds_a_line_break_is_said_on_one_line(tmp_path: Path) -> None:
    config = tmp_path / "config.json"
    config.write_text(json.dumps({"stages": {"nodeBootstrapped": []}, "k\nforged: line": 1}))
    shown = CliRunner().invoke(
        app, ["lint", "--previous", str(config), str(EVENTS / "configs" / "article-terminate.json")]
    )
    assert shown.exit_code == 2
    [line] = _said(shown.stderr)
    assert "k⏎forged: line" in line, line


@pytest.mark.parametrize("module", ["lifeguard_cli", "lifeguard_cli.cli"])
def test_the_cli_runs_as_a_module_as_its_command_does(module: str) -> None:
    """`python -m lifeguard_cli.cli status` printed nothing and exited 0: a command taken as done."""
    import subprocess
    import sys

    done = subprocess.run(
        [sys.executable, "-m", module, "--version"], capture_output=True, text=True, timeout=60, check=False
    )
    assert (done.returncode, done.stdout.startswith("lifeguard ")) == (0, True), done.stderr
    bad = subprocess.run(
        [sys.executable, "-m", module, "nosuch"], capture_output=True, text=True, timeout=60, check=False
    )
    assert bad.returncode == 2
