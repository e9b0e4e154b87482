"""`lifeguard lint` takes inputs as AWS users have them: paths, `file://` as the AWS CLI takes it, stdin;
JSON or YAML; a bare config, a create/update request or a get response. An input that cannot be read is
one line on stderr (exit 2); content that is not a config is one problem (exit 1); never a traceback."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import yaml  # type: ignore[import-untyped]  # PyYAML ships no types
from typer.testing import CliRunner, Result

from lifeguard_cli.cli import app
from lifeguard_cli.documents import MAX_INPUT_BYTES, read_config_document
from lifeguard_cli.lint import lint_files
from tests.conftest import EVENTS, tuned_config

CONFIGS = EVENTS / "configs"
ARTICLE = CONFIGS / "article-terminate.json"
runner = CliRunner()


def article() -> dict[str, Any]:
    config: dict[str, Any] = json.loads(ARTICLE.read_text())
    return config


def lint(*args: str, stdin: bytes | None = None) -> Result:
    result = runner.invoke(app, ["lint", "--json", *args], input=stdin)
    assert result.exception is None or isinstance(result.exception, SystemExit), result.exception
    return result


def verdicts(result: Result) -> list[dict[str, Any]]:
    files: list[dict[str, Any]] = json.loads(result.stdout)["files"]
    return files


def only_problem(result: Result) -> tuple[str, str]:
    assert result.exit_code == 1
    [verdict] = verdicts(result)
    [problem] = verdict["problems"]
    return problem["path"], problem["message"]


def error_lines(result: Result) -> list[str]:
    """What lint said of an input it cannot read, but for the line saying what it is doing, which a loaded
    machine (CI's workers) prints first when the reading takes over a second (`_working`)."""
    assert result.exit_code == 2
    assert result.stdout == ""
    return [line for line in result.stderr.splitlines() if not line.startswith("linting ")]


# Sources: a path, file:// (absolute, relative, ~), and - for stdin.


def test_file_url_with_an_absolute_path_is_read_as_that_path(tmp_path: Path) -> None:
    path = tmp_path / "config.json"
    path.write_text(ARTICLE.read_text())
    result = lint(f"file://{path}")
    assert result.exit_code == 0
    assert verdicts(result)[0]["file"] == str(path)


def test_file_url_with_a_relative_path_is_read_from_the_working_directory(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    (tmp_path / "sub").mkdir()
    (tmp_path / "sub" / "config.json").write_text(ARTICLE.read_text())
    monkeypatch.chdir(tmp_path)
    result = lint("file://sub/config.json")
    assert result.exit_code == 0
    assert verdicts(result)[0]["file"] == "sub/config.json"


def test_file_url_expands_the_home_directory_as_the_aws_cli_does(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    (tmp_path / "config.json").write_text(ARTICLE.read_text())
    monkeypatch.setenv("HOME", str(tmp_path))
    assert lint("file://~/config.json").exit_code == 0


def test_dash_reads_stdin() -> None:
    result = lint("-", stdin=ARTICLE.read_bytes())
    assert result.exit_code == 0
    [verdict] = verdicts(result)
    assert verdict["file"] == "<stdin>"
    assert verdict["valid"] is True


def test_stdin_is_yaml_too() -> None:
    result = lint("-", stdin=yaml.safe_dump(article()).encode())
    assert result.exit_code == 0
    assert verdicts(result)[0]["kind"] == "bare"


@pytest.mark.parametrize(
    "args", [["-", "-"], ["--previous", "-", "-"]], ids=["two-files", "previous-and-file"]
)
def test_stdin_given_twice_is_an_error(args: list[str]) -> None:
    assert error_lines(lint(*args, stdin=ARTICLE.read_bytes())) == [
        "lifeguard lint: - (stdin) is given more than once: it can be read only once"
    ]


def test_previous_takes_file_urls_and_stdin(tmp_path: Path) -> None:
    old, new = tmp_path / "old.json", tmp_path / "new.json"
    old.write_text(tuned_config("a" * 64))
    new.write_text(tuned_config("b" * 64))
    for result in (
        lint("--previous", f"file://{old}", str(new)),
        lint("--previous", "-", f"file://{new}", stdin=old.read_bytes()),
    ):
        assert result.exit_code == 0
        assert [risk["code"] for risk in verdicts(result)[0]["risks"]] == ["updated-in-place"]


# Inputs that cannot be read: one line each on stderr, exit 2, and every one is reported.


def _not_utf8(path: Path) -> None:
    path.write_bytes(b'{"stages": "caf\xe9"}')


def _utf16(path: Path) -> None:
    path.write_bytes(json.dumps(article()).encode("utf-16"))


def _broken_utf16(path: Path) -> None:
    path.write_bytes(b"\xff\xfe\x00\xdc")  # a low surrogate alone


def _over_the_limit(path: Path) -> None:
    with path.open("wb") as file:
        file.truncate(MAX_INPUT_BYTES + 1)


@pytest.mark.parametrize(
    ("make", "reason"),
    [
        (None, "cannot read it: No such file or directory"),
        (Path.mkdir, "cannot read it: Is a directory"),
        (_not_utf8, "not UTF-8 text: invalid continuation byte at byte offset 15"),
        (_broken_utf16, "not UTF-16 text: illegal encoding at byte offset 2"),
        (_over_the_limit, "over 10 MB: not read"),
    ],
    ids=["missing", "directory", "not-utf8", "broken-utf16", "over-10mb"],
)
def test_an_unreadable_input_is_one_line_on_stderr(tmp_path: Path, make: Any, reason: str) -> None:
    path = tmp_path / "input.json"
    if make is not None:
        make(path)
    assert error_lines(lint(str(path))) == [f"lifeguard lint: {path}: {reason}"]
    assert error_lines(lint(f"file://{path}")) == [f"lifeguard lint: {path}: {reason}"]


def test_utf16_with_its_byte_order_mark_is_read_as_replay_reads_it(tmp_path: Path) -> None:
    """What Windows PowerShell's `>` writes."""
    path = tmp_path / "input.json"
    _utf16(path)
    done = lint(str(path), "--json")
    assert done.exit_code == 0, done.output
    assert json.loads(done.stdout)["valid"] is True


@pytest.mark.parametrize("given", ["", "file://"])
def test_an_empty_path_is_named_as_given(given: str) -> None:
    assert error_lines(lint(given)) == [f"lifeguard lint: {given!r}: no file named: an empty path"]


@pytest.mark.skipif(os.geteuid() == 0, reason="root reads any file")
def test_a_file_without_read_permission_is_one_line_on_stderr(tmp_path: Path) -> None:
    path = tmp_path / "secret.json"
    path.write_text("{}")
    path.chmod(0)
    assert error_lines(lint(str(path))) == [f"lifeguard lint: {path}: cannot read it: Permission denied"]


def test_every_unreadable_input_is_reported_and_nothing_is_judged(tmp_path: Path) -> None:
    lines = error_lines(lint(str(tmp_path / "a.json"), str(ARTICLE), str(tmp_path / "b.yaml")))
    assert [line.split(": ")[1] for line in lines] == [str(tmp_path / "a.json"), str(tmp_path / "b.yaml")]


def test_an_unreadable_previous_is_one_line_on_stderr(tmp_path: Path) -> None:
    missing = tmp_path / "old.json"
    assert error_lines(lint("--previous", str(missing), str(ARTICLE))) == [
        f"lifeguard lint: --previous {missing}: cannot read it: No such file or directory"
    ]


def test_an_invalid_previous_names_where_it_is_wrong(tmp_path: Path) -> None:
    old = tmp_path / "old.json"
    old.write_text('{"nodeLifecycleActions": {}}')
    assert error_lines(lint("--previous", str(old), str(ARTICLE))) == [
        f"lifeguard lint: --previous {old}: nodeLifecycleActions.stages: is required"
    ]


def test_stdin_over_the_limit_is_one_line_on_stderr() -> None:
    assert error_lines(lint("-", stdin=b" " * (MAX_INPUT_BYTES + 1))) == [
        "lifeguard lint: <stdin>: over 10 MB: not read"
    ]


def test_an_input_of_exactly_the_limit_is_read(tmp_path: Path) -> None:
    content = json.dumps(article()).encode()
    path = tmp_path / "padded.json"
    path.write_bytes(content + b" " * (MAX_INPUT_BYTES - len(content)))
    assert lint(str(path)).exit_code == 0


# Content: JSON or YAML, a byte-order mark, and the shapes the AWS CLI and the API use.


def test_a_utf8_byte_order_mark_is_accepted(tmp_path: Path) -> None:
    path = tmp_path / "bom.json"
    path.write_bytes(b"\xef\xbb\xbf" + ARTICLE.read_bytes())
    assert lint(str(path)).exit_code == 0


@pytest.mark.parametrize(
    ("wrap", "kind"),
    [
        (lambda config: config, "bare"),
        (
            lambda config: {
                "clusterIdentifier": "pcs_abc123de45",
                "computeNodeGroupIdentifier": "compute-1",
                "nodeLifecycleActions": config,
            },
            "request",
        ),
        (lambda config: {"computeNodeGroup": {"id": "pcs_x", "nodeLifecycleActions": config}}, "response"),
    ],
    ids=["bare", "update-request", "get-response"],
)
def test_yaml_documents_are_read_like_json_ones(tmp_path: Path, wrap: Any, kind: str) -> None:
    path = tmp_path / "input.yaml"
    path.write_text(yaml.safe_dump(wrap(article())))
    result = lint(str(path))
    assert result.exit_code == 0
    [verdict] = verdicts(result)
    assert verdict["kind"] == kind
    assert verdict["fingerprint"] == verdicts(lint(str(ARTICLE)))[0]["fingerprint"]


def test_a_yaml_request_points_problems_into_the_request(tmp_path: Path) -> None:
    config = article()
    config["stages"]["nodeBootstrapped"][0]["onError"] = "STOP"
    path = tmp_path / "request.yaml"
    path.write_text(yaml.safe_dump({"clusterIdentifier": "pcs_abc123de45", "nodeLifecycleActions": config}))
    where, message = only_problem(lint(str(path)))
    assert where == "nodeLifecycleActions.stages.nodeBootstrapped[0].onError"
    assert "'STOP' is not one of" in message


@pytest.mark.parametrize(
    ("document", "where", "message"),
    [
        (
            {"clusterIdentifier": "pcs_abc123de45", "computeNodeGroupIdentifier": "compute-1"},
            "",
            "an update-compute-node-group request without nodeLifecycleActions: nothing to lint",
        ),
        (
            {"clusterIdentifier": "pcs_abc123de45", "computeNodeGroupName": "compute-1", "subnetIds": []},
            "",
            "a create-compute-node-group request without nodeLifecycleActions: nothing to lint",
        ),
        (
            {"clusterIdentifier": "pcs_abc123de45"},
            "",
            "a create/update-compute-node-group request without nodeLifecycleActions: nothing to lint",
        ),
    ],
    ids=["update-request", "create-request", "request"],
)
def test_a_request_without_a_config_says_so(
    tmp_path: Path, document: dict[str, Any], where: str, message: str
) -> None:
    path = tmp_path / "input.json"
    path.write_text(json.dumps(document))
    assert only_problem(lint(str(path))) == (where, message)


def test_a_response_of_a_group_without_scripts_passes_and_says_so() -> None:
    """PCS leaves `nodeLifecycleActions` out of a group that runs none: `aws pcs get-compute-node-group …
    | lifeguard lint -` over every group of a cluster must pass it, as a template without node groups."""
    response = {"computeNodeGroup": {"id": "pcs_x", "status": "ACTIVE"}}
    result = lint("-", stdin=json.dumps(response).encode())
    assert result.exit_code == 0
    [verdict] = verdicts(result)
    assert verdict["problems"] == []
    [note] = verdict["notes"]
    assert (note["path"], note["message"]) == (
        "computeNodeGroup",
        "a get-compute-node-group response without nodeLifecycleActions (the group runs none, or the AWS "
        "CLI that printed it predates them): nothing to lint",
    )
    shown = runner.invoke(app, ["lint", "-"], input=json.dumps(response).encode())
    assert shown.exit_code == 0
    assert "the group runs none, or the AWS CLI that printed it predates them" in " ".join(
        shown.stdout.split()
    )


def test_a_config_holding_a_terminals_escapes_is_shown_without_them() -> None:
    """PCS takes a location of `s3://bucket/.+` and arguments of any characters: a config read from PCS
    may hold escapes that would clear the screen or hide a link, in a value or in a key. Lint shows them
    as `?`."""
    script = {
        "name": "setup",
        "scriptSource": {"scriptLocation": "s3://bkt/\x1b[2J\x1b[31mFAKE\u202etxt.sh"},
        "arguments": ["\x1b]8;;https://evil.example\x1b\\click\x1b]8;;\x1b\\"],
    }
    valid = {"stages": {"nodeBootstrapped": [script]}}
    a_key = {"stages": {"nodeBootstrapped": [], "node\x1b[2JX": []}}
    for config, status, expected in (
        (valid, 0, ["s3://bkt/?[2J?[31mFAKE?txt.sh", "?]8;;https://evil.example?\\click"]),
        (a_key, 1, ["stages.node?[2JX"]),
    ):
        shown = runner.invoke(app, ["lint", "-"], input=json.dumps(config).encode())
        assert shown.exit_code == status, shown.stdout
        assert "\x1b" not in shown.stdout
        assert "\u202e" not in shown.stdout
        text = "".join(shown.stdout.split())
        for value in expected:
            assert value in text


# Content that is not a config: one problem, exit 1, no traceback.


@pytest.mark.parametrize(
    ("name", "content", "message"),
    [
        ("empty.json", "", "is empty: nothing to lint"),
        ("blank.yaml", "\n  \n", "is empty: nothing to lint"),
        ("null.json", "null", "expected an object, got null"),
        ("list.yaml", "- a\n- b\n", "expected an object, got array"),
        ("broken.yaml", "stages: [\n", "neither JSON nor YAML at line 2 column 1: expected the node content"),
        ("tab.yaml", "stages:\n\t- a\n", "neither JSON nor YAML at line 2 column 1: found character '\\t'"),
        ("unhashable.yaml", "{[a]: b}\n", "neither JSON nor YAML at line 1 column 2: found unhashable key"),
        ("deep.json", "[" * 100_000 + "]" * 100_000, "nested too deep to be a config"),
        ("deep.yaml", "[" * 100_000 + "]" * 100_000, "nested too deep to be a config"),
        ("long.json", '{"stages": ' + "9" * 5000 + "}", "has a number of over 4300 digits"),
        ("long.yaml", "stages: " + "9" * 5000, "has a number of over 4300 digits"),
        (
            # 30 KB, read as 10,001 scripts (a million of them, 3 MB, took 1.5 GB and ended in MemoryError)
            "wide.yaml",
            'x: &s {name: "bad name!", scriptSource: "x"}\nnodeLifecycleActions:\n  stages:\n'
            "    nodeBootstrapped: [" + ",".join(["*s"] * 10_001) + "]\n",
            "holds more than 10000 YAML aliases (*name) (line 4 column 30024), each read as all it names",
        ),
    ],
)
def test_content_that_is_not_a_config_is_one_problem(
    tmp_path: Path, name: str, content: str, message: str
) -> None:
    path = tmp_path / name
    path.write_text(content)
    where, got = only_problem(lint(str(path)))
    assert where == ""
    assert got.startswith(message)


def test_a_yaml_config_with_a_few_aliases_is_read_as_it_names(tmp_path: Path) -> None:
    path = tmp_path / "aliased.yaml"
    path.write_text(
        "stages:\n"
        "  nodeBootstrapped: [&s {name: a, scriptSource: {scriptLocation: s3://lca-scripts-example/a.sh}}]\n"
        "  nodeReady: [*s]\n"
    )
    document = read_config_document(path)
    assert document.config is not None
    stages = document.config.stages
    assert [s.name for s in (*stages.scripts_of("nodeBootstrapped"), *stages.scripts_of("nodeReady"))] == [
        "a",
        "a",
    ]


def test_replay_config_reads_the_same_sources(tmp_path: Path) -> None:
    path = tmp_path / "config.yaml"
    path.write_text(yaml.safe_dump(article()))
    assert read_config_document(path).config is not None
    assert read_config_document(f"file://{path}").config is not None
    missing = read_config_document(tmp_path / "nope.json")
    assert [str(problem) for problem in missing.problems] == [
        "(document): cannot read it: No such file or directory"
    ]


def test_console_script_reads_a_pipe_on_stdin() -> None:
    lifeguard = Path(sys.executable).parent / "lifeguard"
    response = {"computeNodeGroup": {"nodeLifecycleActions": article()}}
    result = subprocess.run(
        [str(lifeguard), "lint", "--json", "-"],
        input=b"\xef\xbb\xbf" + yaml.safe_dump(response).encode(),
        capture_output=True,
        check=False,
    )
    assert result.returncode == 0, result.stderr
    assert json.loads(result.stdout)["files"][0]["kind"] == "response"


def test_a_path_object_is_always_a_file_even_one_named_dash(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    (tmp_path / "-").write_text(ARTICLE.read_text())
    monkeypatch.chdir(tmp_path)
    results, errors = lint_files([Path("-")], previous=Path("-"))
    assert errors == []
    assert [result.document.name for result in results] == ["-"]
    assert results[0].document.valid


@pytest.mark.parametrize(
    ("content", "at"), [(b"\x00" * 1000, 0), ('{"stages": {}}'.encode("utf-16-le"), 1)], ids=["nul", "utf16"]
)
def test_a_file_of_nul_characters_is_not_text_in_one_line(tmp_path: Path, content: bytes, at: int) -> None:
    """PyYAML's two-line complaint came out as an invalid document (exit 1); UTF-16 without its byte-order
    mark the same. Neither is text: unreadable, exit 2, one line."""
    path = tmp_path / "input.yaml"
    path.write_bytes(content)
    for args in ([str(path)], ["--previous", str(path), str(ARTICLE)]):
        result = lint(*args)
        assert result.exit_code == 2
        [line] = error_lines(result)
        assert line.endswith(f"{path}: not text: a NUL character at character {at}"), line
