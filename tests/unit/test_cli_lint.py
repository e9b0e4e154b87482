"""`lifeguard lint` as a user runs it: the shipped examples are accepted or rejected as their names say."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from lifeguard_cli.cli import app
from tests.conftest import EVENTS, tuned_config

CONFIGS = EVENTS / "configs"
runner = CliRunner()

# Each invalid example and every (path, message fragment) it must be rejected with.
INVALID: dict[str, list[tuple[str, str]]] = {
    "invalid-onerror-typo.json": [
        (
            "stages.nodeBootstrapped[0].onError",
            "'TERMINATED' is not one of TERMINATE, STOP_SEQUENCE, CONTINUE",
        )
    ],
    "invalid-duplicate-names.json": [
        ("stages.nodeBootstrapped[1].name", "'setup' is already the name of stages.nodeBootstrapped[0]")
    ],
    "invalid-version-on-https.json": [
        ("stages.nodeReady[0].scriptSource.s3VersionId", "only allowed with an s3:// scriptLocation")
    ],
    "invalid-not-json.json": [("", "not valid JSON at line 5 column 5")],
    "invalid-many-problems.json": [
        ("scriptCachingPolicy", "'ALWAYS' is not one of CACHE_ONCE, REFRESH_ON_REBOOT"),
        ("stages.nodeBootstrapped[0].name", "'bad/name' must start with a letter or digit"),
        (
            "stages.nodeBootstrapped[0].scriptSource.scriptLocation",
            "must be an s3://bucket/key or an https://",
        ),
        ("stages.nodeBootstrapped[0].scriptSource.checksum", "is 6 characters long; at least 64 required"),
        ("stages.nodeBootstrapped[0].arguments", "has 21 items; at most 20 allowed"),
        ("stages.nodeBootstrapped[0].executionPolicy", "'EVERY_REBOOT' is not one of"),
        ("stages.nodeBootstrapped[0].timeout", "is not a field of NodeLifecycleScript"),
        ("stages.nodeBootstrapped[1].scriptSource", "is required"),
        ("stages.nodeReady", "has 0 items; at least 1 required"),
    ],
}


def lint_json(*args: str) -> tuple[int, dict[str, Any]]:
    result = runner.invoke(app, ["lint", "--json", *args])
    return result.exit_code, json.loads(result.stdout)


def test_every_example_is_named_for_its_verdict() -> None:
    names = sorted(path.name for path in CONFIGS.glob("*.json"))
    assert sorted(name for name in names if name.startswith("invalid-")) == sorted(INVALID)
    assert len(names) > len(INVALID)


@pytest.mark.parametrize(
    "path", sorted(p for p in CONFIGS.glob("*.json") if not p.name.startswith("invalid-"))
)
def test_valid_examples_are_accepted(path: Path) -> None:
    code, report = lint_json(str(path))
    assert code == 0
    assert report["valid"] is True
    [verdict] = report["files"]
    assert verdict["problems"] == []
    assert len(verdict["fingerprint"]) == 64
    assert verdict["scripts"]


@pytest.mark.parametrize("name", sorted(INVALID))
def test_invalid_examples_are_rejected_with_every_problem(name: str) -> None:
    code, report = lint_json(str(CONFIGS / name))
    assert code == 1
    [verdict] = report["files"]
    assert verdict["valid"] is False
    got = [(p["path"], p["message"]) for p in verdict["problems"]]
    assert len(got) == len(INVALID[name])
    for (path, fragment), (got_path, message) in zip(INVALID[name], got, strict=True):
        assert got_path == path
        assert fragment in message


def test_request_document_paths_point_into_the_request(tmp_path: Path) -> None:
    request = json.loads((CONFIGS / "update-request-stop-sequence.json").read_text())
    request["nodeLifecycleActions"]["stages"]["nodeBootstrapped"][0]["onError"] = "STOP"
    bad = tmp_path / "request.json"
    bad.write_text(json.dumps(request))
    code, report = lint_json(str(bad))
    assert code == 1
    [problem] = report["files"][0]["problems"]
    assert problem["path"] == "nodeLifecycleActions.stages.nodeBootstrapped[0].onError"
    assert report["files"][0]["kind"] == "request"


def test_get_response_documents_are_read_too(tmp_path: Path) -> None:
    config = json.loads((CONFIGS / "article-terminate.json").read_text())
    response = tmp_path / "get.json"
    response.write_text(json.dumps({"computeNodeGroup": {"id": "pcs_x", "nodeLifecycleActions": config}}))
    code, report = lint_json(str(response))
    assert code == 0
    assert report["files"][0]["kind"] == "response"


def test_strict_turns_risks_into_failure() -> None:
    article = str(CONFIGS / "article-terminate.json")
    assert lint_json(article)[0] == 0
    code, report = lint_json("--strict", article)
    assert code == 1
    assert "optional-script-terminates" in {risk["code"] for risk in report["files"][0]["risks"]}


def test_one_invalid_file_fails_the_run_but_all_are_reported() -> None:
    code, report = lint_json(
        str(CONFIGS / "article-terminate.json"), str(CONFIGS / "invalid-onerror-typo.json")
    )
    assert code == 1
    assert [verdict["valid"] for verdict in report["files"]] == [True, False]


def test_human_output_shows_the_table_and_problems() -> None:
    files = [str(CONFIGS / "article-stop-sequence.json"), str(CONFIGS / "invalid-onerror-typo.json")]
    result = runner.invoke(app, ["lint", *files], env={"COLUMNS": "160"})  # rows unfolded
    assert result.exit_code == 1
    out = result.stdout
    assert "fail-stop-sequence" in out
    assert "STOP_SEQUENCE" in out
    assert "TERMINATE (default)" in out
    assert "invalid: 1 problem" in out
    assert "stages.nodeBootstrapped[0].onError: 'TERMINATED' is not one of" in out


def test_the_results_of_a_template_of_many_groups_are_printed_with_progress(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """3,000 groups print for about ten seconds: with the output piped, nothing said how far it was."""
    import functools

    import lifeguard_cli.cli

    resources = {
        f"Group{n}": {
            "Type": "AWS::PCS::ComputeNodeGroup",
            "Properties": {"Name": f"g{n}", "NodeLifecycleActions": {"Stages": {}}},
        }
        for n in range(40)
    }
    template = tmp_path / "groups.json"
    template.write_text(json.dumps({"AWSTemplateFormatVersion": "2010-09-09", "Resources": resources}))
    # Progress from the start rather than past its first second, so these 40 show it.
    steps = lifeguard_cli.cli._steps
    monkeypatch.setattr(lifeguard_cli.cli, "_steps", functools.partial(steps, after_seconds=0.0))
    result = runner.invoke(app, ["lint", str(template)])
    assert result.exit_code == 0, result.output
    assert result.stdout.count("valid  template") == 40
    said = [line for line in result.stderr.splitlines() if line.startswith("lint: printing")]
    assert said[0] == "lint: printing the results of each file and group: 1 of 40"
    assert said[-1] == "lint: printing the results of each file and group: 40 of 40"


def test_previous_flags_in_place_updates(tmp_path: Path) -> None:
    def write(name: str, checksum: str) -> Path:
        path = tmp_path / name
        path.write_text(tuned_config(checksum))
        return path

    code, report = lint_json("--previous", str(write("old.json", "a" * 64)), str(write("new.json", "b" * 64)))
    assert code == 0
    assert [risk["code"] for risk in report["files"][0]["risks"]] == ["updated-in-place"]


def test_missing_file_is_one_clean_line_on_stderr(tmp_path: Path) -> None:
    missing = tmp_path / "nope.json"
    result = runner.invoke(app, ["lint", "--json", str(missing)])
    assert result.exit_code == 2
    assert result.stdout == ""
    assert result.stderr == f"lifeguard lint: {missing}: cannot read it: No such file or directory\n"


def test_console_script_runs_without_a_traceback() -> None:
    lifeguard = Path(sys.executable).parent / "lifeguard"
    result = subprocess.run(
        [str(lifeguard), "lint", str(CONFIGS / "invalid-many-problems.json")],
        capture_output=True,
        text=True,
        check=False,
        env={**os.environ, "COLUMNS": "200"},  # the header holds the file's path, as long as the checkout's
    )
    assert result.returncode == 1
    assert "Traceback" not in result.stdout + result.stderr
    assert "invalid: 9 problems" in result.stdout


def test_a_valid_config_piped_into_head_never_exits_as_not_valid() -> None:
    """The reader going away (`| head -1`) ends lint as SIGPIPE would end it (141), never with lint's 1
    ("not valid"), which `set -o pipefail` in a CI job would take for a broken configuration."""
    lifeguard = Path(sys.executable).parent / "lifeguard"
    scripts = [{"name": f"s{i}", "scriptSource": {"scriptLocation": f"s3://bucket/k{i}"}} for i in range(20)]
    config = json.dumps({"stages": {"nodeBootstrapped": scripts}})
    done = subprocess.run(
        ["bash", "-c", f'{lifeguard} lint - | head -1; echo "lint exited ${{PIPESTATUS[0]}}" >&2'],
        input=config,
        capture_output=True,
        text=True,
        check=False,
    )
    assert "valid" in done.stdout
    assert "lint exited 141" in done.stderr, done.stderr
    assert "Traceback" not in done.stderr


def test_thousands_of_problems_list_the_first_for_people_and_every_one_for_programs(tmp_path: Path) -> None:
    from lifeguard_cli.lint import PROBLEMS_SHOWN

    scripts = [
        {"name": f"s{index}", "scriptSource": {"scriptLocation": f"s3://b/k{index}.sh"}}
        for index in range(3000)
    ]
    path = tmp_path / "broken.json"
    path.write_text(json.dumps({"stages": {"nodeBootstrapped": scripts}}))
    people = runner.invoke(app, ["lint", str(path)], env={"COLUMNS": "200"})
    assert people.exit_code == 1
    assert "invalid: 3001 problems" in people.stdout
    errors = [line for line in people.stdout.splitlines() if line.lstrip().startswith("error ")]
    assert len(errors) == PROBLEMS_SHOWN
    assert people.stdout.rstrip().endswith(f"… and {3001 - PROBLEMS_SHOWN} more (--json lists every one)")
    programs = runner.invoke(app, ["lint", "--json", str(path)])
    (document,) = json.loads(programs.stdout)["files"]
    assert len(document["problems"]) == 3001


def test_an_invalid_value_of_any_length_is_shown_shortened(tmp_path: Path) -> None:
    """An onError of a million characters (a damaged or hostile file) is named, not printed whole."""
    script = {"name": "a", "scriptSource": {"scriptLocation": "s3://bucket/key"}, "onError": "X" * 1_000_000}
    path = tmp_path / "huge.json"
    path.write_text(json.dumps({"stages": {"nodeBootstrapped": [script]}}))
    result = runner.invoke(app, ["lint", str(path)], env={"COLUMNS": "80"})
    assert result.exit_code == 1
    assert "is not one of TERMINATE, STOP_SEQUENCE, CONTINUE" in result.stdout.replace("\n", " ")
    assert len(result.stdout) < 5_000, len(result.stdout)


def test_a_script_location_longer_than_a_cell_is_shown_whole_at_80_and_100_columns(tmp_path: Path) -> None:
    """A table that cannot hold a 45-character location whole is printed one block a row, where it is."""
    location = "s3://lca-scripts-example/scripts/gpu-check.sh"
    script = {"name": "gpu-check", "scriptSource": {"scriptLocation": location}}
    path = tmp_path / "c.json"
    path.write_text(json.dumps({"stages": {"nodeBootstrapped": [script]}}))
    for columns in ("80", "100"):
        result = runner.invoke(app, ["lint", str(path)], env={"COLUMNS": columns})
        assert result.exit_code == 0
        assert location in result.stdout.split(), result.stdout
        assert max(map(len, result.stdout.splitlines())) <= int(columns)


@pytest.mark.parametrize("columns", ["0", "wide"])
def test_a_columns_that_says_no_width_is_read_as_not_known_not_as_nothing_fits(
    tmp_path: Path, columns: str
) -> None:
    """`COLUMNS=0` means "not known" (as shutil reads it): the problems are printed at 80 columns."""
    script = {"name": "a", "scriptSource": {"scriptLocation": "s3://bucket-x/a.sh"}, "onError": "TERMINATED"}
    path = tmp_path / "c.json"
    path.write_text(json.dumps({"stages": {"nodeBootstrapped": [script]}}))
    result = runner.invoke(app, ["lint", str(path)], env={"COLUMNS": columns})
    assert result.exit_code == 1
    assert "TERMINATED" in result.stdout
    assert max(map(len, result.stdout.splitlines())) <= 80


def test_a_templates_long_location_breaks_between_its_parts_not_inside_a_name() -> None:
    """At 80 columns a resource path longer than the line goes on at a `.` or a `[`, never mid-name."""
    result = runner.invoke(
        app, ["lint", str(EVENTS / "templates" / "pcs-cluster.yaml")], env={"COLUMNS": "80"}
    )
    assert result.exit_code == 0
    lines = result.stdout.splitlines()
    assert max(map(len, lines)) <= 80
    starts = [n for n, line in enumerate(lines) if line.startswith("  warning Resources.Interactive")]
    assert starts, result.stdout
    for n in starts:
        first, second = lines[n], lines[n + 1].strip()
        assert first.endswith(".")  # Stages. / NodeBootstrapped[0]… on the next line
        assert second.startswith("NodeBootstrapped[0].")
        assert "Resources.Interactive.Properties.NodeLifecycleActions.Stages.NodeBootstrapped[0]." in (
            first.split("warning ", 1)[1] + second
        )


def test_lint_json_says_whether_it_was_strict() -> None:
    article = str(CONFIGS / "article-terminate.json")
    plain = json.loads(runner.invoke(app, ["lint", "--json", article]).stdout)
    strict = json.loads(runner.invoke(app, ["lint", "--json", "--strict", article]).stdout)
    assert (plain["valid"], plain["strict"]) == (True, False)
    assert (strict["valid"], strict["strict"]) == (False, True)


def test_strict_labels_the_risks_that_fail_it_as_errors() -> None:
    """With --strict the run fails on its risks: whoever reads it sees them as errors, not warnings."""
    article = str(CONFIGS / "article-terminate.json")
    plain = runner.invoke(app, ["lint", article], env={"COLUMNS": "160"})
    strict = runner.invoke(app, ["lint", "--strict", article], env={"COLUMNS": "160"})
    assert (plain.exit_code, strict.exit_code) == (0, 1)

    def labels(output: str) -> set[str]:
        return {
            line.split()[0]
            for line in output.splitlines()
            if line.startswith("  ") and line.split()[0] in ("error", "warning")
        }

    assert labels(plain.stdout) == {"warning"}
    assert labels(strict.stdout) == {"error"}
    # Its heading says so too: valid (PCS takes it), and failing --strict, not `valid` alone over errors.
    [heading] = [line for line in strict.stdout.splitlines() if line.startswith(article)]
    assert " valid, fails --strict: 4 risks " in heading
    assert "fails --strict" not in plain.stdout
