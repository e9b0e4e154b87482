"""`lifeguard-node`'s conventions: `--version`, `-h`/`--help` everywhere, and the exit status of bad usage
(64 for `boot`, its documented code; 2, argparse's own, for everything else)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tomllib
from pathlib import Path

import hypothesis
import pytest
from hypothesis import HealthCheck, settings
from hypothesis import strategies as st

import lifeguard
from lifeguard.node.cli import BOOT_REQUIRED, BOOT_VALUES, main, plain_boot
from lifeguard.node.options import parsed
from tests.conftest import NODE_PYTHON, REPO

LAYER = REPO / "layers" / "lifeguard"
COMMANDS = ("boot", "ship", "drain")


def run(argv: list[str], capsys: pytest.CaptureFixture[str]) -> tuple[int, str, str]:
    """The exit status, stdout and stderr of `lifeguard-node ARGV` when argparse ends it."""
    with pytest.raises(SystemExit) as exited:
        main(argv)
    out, err = capsys.readouterr()
    code = exited.value.code
    assert isinstance(code, int)
    return code, out, err


def test_the_package_version_is_the_project_version() -> None:
    project = tomllib.loads((REPO / "pyproject.toml").read_text(encoding="utf-8"))["project"]
    assert lifeguard.__version__ == project["version"]


def test_version_prints_the_name_and_version_and_exits_0(capsys: pytest.CaptureFixture[str]) -> None:
    assert run(["--version"], capsys) == (0, f"lifeguard-node {lifeguard.__version__}\n", "")


@pytest.mark.skipif(not NODE_PYTHON.exists(), reason="no Python 3.9 venv (.venv/node39)")
def test_version_works_on_the_nodes_python() -> None:
    probe = (
        "import sys; sys.path.insert(0, sys.argv[1]); from lifeguard.node.cli import main; main(sys.argv[2:])"
    )
    done = subprocess.run(
        [str(NODE_PYTHON), "-I", "-c", probe, str(LAYER), "--version"],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert (done.returncode, done.stdout, done.stderr) == (0, f"lifeguard-node {lifeguard.__version__}\n", "")


@pytest.mark.parametrize("flag", ["-h", "--help"])
@pytest.mark.parametrize("command", [None, *COMMANDS])
def test_help_at_the_top_level_and_on_each_command_exits_0(
    capsys: pytest.CaptureFixture[str], command: str | None, flag: str
) -> None:
    argv = [flag] if command is None else [command, flag]
    code, out, err = run(argv, capsys)
    assert (code, err) == (0, "")
    prog = "lifeguard-node" if command is None else f"lifeguard-node {command}"
    assert out.startswith(f"usage: {prog} ")
    if command is None:
        assert all(name in out for name in COMMANDS)
        assert "--version" in out
    else:
        assert f"Example: lifeguard-node {command} " in " ".join(out.split())


@pytest.mark.parametrize("columns", ["52", "100", "not a number"])
def test_help_is_as_wide_as_columns_says(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch, columns: str
) -> None:
    def no_terminal(*_: object) -> os.terminal_size:
        raise OSError("not a terminal")

    monkeypatch.setenv("COLUMNS", columns)
    monkeypatch.setattr(os, "get_terminal_size", no_terminal)
    code, out, _ = run(["boot", "--help"], capsys)
    width = int(columns) if columns.isdigit() else 80  # not a terminal: 80
    # The description is wrapped at the width less two, as argparse does: its first line is filled up to
    # there, but for the word that did not fit.
    first = next(line for line in out.splitlines() if line.startswith("Run one boot"))
    assert code == 0
    assert width - 2 - len("nodeBootstrapped, ") <= len(first) <= width - 2


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        ([], "the following arguments are required: command"),
        (["bogus"], "argument command: invalid choice: 'bogus'"),
        (["--nosuch"], "lifeguard-node: unrecognized arguments: --nosuch"),
        (
            ["--bogus", "ship", "--root", "/", "--log-group", "g"],
            "lifeguard-node: unrecognized arguments: --bogus",
        ),
        (["ship", "--root", "/"], "lifeguard-node ship: the following arguments are required: --log-group"),
        (["ship", "--log-group", "g"], "lifeguard-node ship: the following arguments are required: --root"),
        (["ship", "--root", "/", "--log-group", "g", "--bogus"], "ship: unrecognized arguments: --bogus"),
        (
            ["ship", "--root", "/", "--log-group", "g", "--poll-interval", "soon"],
            "invalid float value: 'soon'",
        ),
        (["drain"], "lifeguard-node drain: the following arguments are required: --reason"),
        (["drain", "--reason", "kept", "--bogus"], "lifeguard-node drain: unrecognized arguments: --bogus"),
        (["drain", "--reason", "kept", "--watch-seconds", "soon"], "invalid float value: 'soon'"),
        (["drain", "--reason", "kept", "--follow-from", "1.5"], "invalid int value: '1.5'"),
    ],
    ids=[
        "no-command",
        "unknown-command",
        "unknown-option-alone",
        "unknown-top-level-option",
        "ship-without-log-group",
        "ship-without-root",
        "ship-unknown-option",
        "ship-bad-poll-interval",
        "drain-without-reason",
        "drain-unknown-option",
        "drain-bad-watch-seconds",
        "drain-bad-follow-from",
    ],
)
def test_bad_usage_exits_2_with_the_usage_and_one_line_of_error(
    capsys: pytest.CaptureFixture[str], argv: list[str], message: str
) -> None:
    code, out, err = run(argv, capsys)
    assert (code, out) == (2, "")
    assert err.startswith("usage: lifeguard-node")
    assert message in err.splitlines()[-1]


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["boot", "--root", "/"], "the following arguments are required: --config"),
        (["boot", "--config", "actions.json"], "the following arguments are required: --root"),
        (["boot", "--config", "actions.json", "--root", "/", "--bogus"], "unrecognized arguments: --bogus"),
        (["boot", "--config", "actions.json", "--root", "/", "--script-timeout", "soon"], "invalid float"),
    ],
    ids=["without-config", "without-root", "unknown-option", "bad-script-timeout"],
)
def test_bad_usage_of_boot_exits_64(
    capsys: pytest.CaptureFixture[str], argv: list[str], message: str
) -> None:
    code, out, err = run(argv, capsys)
    assert (code, out) == (64, "")
    assert err.startswith("usage: lifeguard-node boot")
    assert err.splitlines()[-1].startswith("lifeguard-node boot: ")
    assert message in err.splitlines()[-1]


# Words a boot's command line may hold: options, their near misses, values argparse reads as options.
WORDS = [
    *BOOT_VALUES,
    "--json",
    "boot",
    "ship",
    "--conf",
    "--root=/",
    "--json=1",
    "-h",
    "--help",
    "--",
    "-",
    "-1",
    "-x y",
    "1.5",
    " 2 ",
    "nan",
    "1_0",
    "soon",
    "",
    "a b",
    "actions.json",
    "file:///tmp/actions.json",
    "/",
    "node\udcff",
]
VALUES = [word for word in WORDS if not word.startswith("-")]


def as_argparse_reads(argv: list[str]) -> str:
    """What argparse makes of ARGV (`repr`: a nan equals itself), or how it refused it."""
    try:
        return repr(sorted(vars(parsed(argv)).items()))
    except SystemExit as refused:
        return f"exit {refused.code}"


@hypothesis.given(st.lists(st.sampled_from(WORDS), max_size=12).map(lambda words: ["boot", *words]))
@settings(max_examples=400, suppress_health_check=[HealthCheck.too_slow])
def test_a_boot_read_without_argparse_is_what_argparse_reads(argv: list[str]) -> None:
    """`plain_boot` reads a command line argparse reads alike, or leaves it to argparse; any mix of words."""
    plain = plain_boot(argv)
    if plain is not None:
        assert repr(sorted(vars(plain).items())) == as_argparse_reads(argv)


@st.composite
def plain_boot_lines(draw: st.DrawFn) -> list[str]:
    """`boot`, both required options and any others, each once with a value, in any order, maybe --json."""
    others = [option for option in BOOT_VALUES if option not in BOOT_REQUIRED]
    optional = draw(st.lists(st.sampled_from(others), unique=True))
    pairs = [[option, draw(st.sampled_from(VALUES))] for option in [*BOOT_REQUIRED, *optional]]
    pairs = draw(st.permutations(pairs))
    flags = [["--json"]] * draw(st.integers(0, 2))
    words = [word for pair in draw(st.permutations([*pairs, *flags])) for word in pair]
    return ["boot", *words]


@hypothesis.given(plain_boot_lines())
@settings(max_examples=300, suppress_health_check=[HealthCheck.too_slow])
def test_a_plain_boot_is_read_without_argparse_as_argparse_reads_it(argv: list[str]) -> None:
    timeout = argv[argv.index("--script-timeout") + 1] if "--script-timeout" in argv else "0"
    try:
        float(timeout)
    except ValueError:  # not a number: argparse says so
        assert plain_boot(argv) is None
        return
    plain = plain_boot(argv)
    assert plain is not None
    assert repr(sorted(vars(plain).items())) == as_argparse_reads(argv)


@pytest.mark.parametrize(
    "argv",
    [
        ["boot", "--conf", "actions.json", "--root", "/"],
        ["boot", "--config=actions.json", "--root", "/"],
        ["boot", "--config", "actions.json", "--root", "/", "-h"],
        ["boot", "--config", "a.json", "--config", "b.json", "--root", "/"],
        ["boot", "--config", "actions.json", "--root", "-"],
        ["boot", "--config", "actions.json", "--root", "/", "--script-timeout", "-1"],
        ["boot", "--config", "actions.json", "--root", "/", "--node-id"],
        ["boot", "--config", "actions.json"],
        ["--version", "boot", "--config", "actions.json", "--root", "/"],
    ],
    ids=[
        "abbreviation",
        "value-after-equals",
        "help",
        "given-twice",
        "dash-value",
        "negative-number",
        "value-missing",
        "required-missing",
        "option-before-the-command",
    ],
)
def test_any_other_boot_line_is_left_to_argparse(argv: list[str]) -> None:
    assert plain_boot(argv) is None


def test_ship_that_cannot_tell_the_nodes_ids_is_bad_usage_and_without_boto3_an_error(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """`ship` exits 2 when it must be told the ids (as argparse's bad usage: 64 is `boot`'s alone), and 1
    when this Python cannot run it at all."""
    from lifeguard.node import shipper
    from lifeguard.node.boto import MissingBoto3Error

    for variable in ("PCS_CLUSTER_ID", "PCS_COMPUTE_NODE_GROUP_ID", "LIFEGUARD_INSTANCE_ID"):
        monkeypatch.delenv(variable, raising=False)
    command = ["ship", "--root", str(tmp_path), "--log-group", "g", "--once"]
    assert main(command) == 2
    assert capsys.readouterr().err == "lifeguard-node ship: cannot tell this node's ids: pass --cluster-id\n"
    # A root that is not there is said as such, not as ids it could not find in it.
    assert main(["ship", "--root", str(tmp_path / "nosuch"), "--log-group", "g", "--once"]) == 2
    assert capsys.readouterr().err == f"lifeguard-node ship: --root {tmp_path / 'nosuch'}: no such folder\n"

    def no_boto3() -> None:
        raise MissingBoto3Error("no boto3 on this Python: install it, or use the node bundle")

    monkeypatch.setattr(shipper, "_logs_client", no_boto3)
    ids = [
        "--cluster-id",
        "pcs_a",
        "--compute-node-group-id",
        "pcs_b",
        "--instance-id",
        "i-0123456789abcdef0",
    ]
    assert main([*command, *ids]) == 1
    assert "no boto3" in capsys.readouterr().err


@pytest.mark.parametrize("interval", ["nan", "inf", "-1", "0", "3600"])
@pytest.mark.parametrize("given", ["option", "environment"])
def test_a_poll_interval_out_of_its_bounds_is_refused_before_the_shipper_starts(
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
    interval: str,
    given: str,
) -> None:
    """`nan` crashed the shipper once it ran, 0 or less spun a core (and PutLogEvents in an outage), `inf`
    never looked: refused at start, as bad usage, before any AWS client is made."""
    from lifeguard.node import shipper

    def no_client() -> None:
        raise AssertionError("a client was made")

    monkeypatch.setattr(shipper, "_logs_client", no_client)
    command = ["ship", "--root", str(tmp_path), "--log-group", "g", "--cluster-id", "pcs_a"]
    command += ["--compute-node-group-id", "pcs_b", "--instance-id", "i-0123456789abcdef0"]
    if given == "option":
        command += ["--poll-interval", interval]
    else:
        monkeypatch.setenv("LIFEGUARD_POLL_INTERVAL_SECONDS", interval)
    assert main(command) == 2
    err = capsys.readouterr().err
    assert err.startswith("lifeguard-node ship: the poll interval must be from 0.05 to 60 seconds, not ")
    assert err.count("\n") == 1


def test_a_config_boot_cannot_read_is_named_with_why_in_words(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    binary = tmp_path / "actions.json"
    binary.write_bytes(b"\xba\xbb{}")
    gone = tmp_path / "gone.json"
    fifo = tmp_path / "fifo.json"  # no writer: read, it would wait for ever
    os.mkfifo(fifo)
    huge = tmp_path / "huge.json"
    huge.write_bytes(b" " * (4 * 1024 * 1024) + b"{}")
    cases = {
        tmp_path: "Is a directory",
        gone: "No such file or directory",
        binary: "not UTF-8 text (invalid start byte at byte offset 0)",
        fifo: "not a regular file",
        Path("/dev/zero"): "not a regular file",
        huge: "larger than 4 MiB",
    }
    for config, said in cases.items():
        assert main(["boot", "--config", str(config), "--root", str(tmp_path / "root")]) == 64
        assert capsys.readouterr().err == f"lifeguard-node: cannot read {config}: {said}\n"


def test_boot_takes_its_config_as_a_path_or_as_the_aws_cli_takes_it(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """The article passes the same JSON to `aws pcs update-compute-node-group --node-lifecycle-actions
    file://<path>`: typed so for `boot`, it was read as the path `file:/<path>`, which no file is."""
    config = tmp_path / "actions.json"
    config.write_text('{"stages": {}}')
    for given in (str(config), f"file://{config}"):
        assert main(["boot", "--config", given, "--root", str(tmp_path / "root"), "--json"]) == 0, given
        assert json.loads(capsys.readouterr().out)["runs"] == []
    assert main(["boot", "--config", f"file://{tmp_path}/gone.json", "--root", str(tmp_path / "r")]) == 64
    assert (
        capsys.readouterr().err
        == f"lifeguard-node: cannot read {tmp_path}/gone.json: No such file or directory\n"
    )


def test_a_failed_scripts_line_says_its_exit_once_and_other_errors_in_full(
    capsys: pytest.CaptureFixture[str],
) -> None:
    """executor.log keeps PCS's words for an exit status (`ExitStatus(unix_wait_status(256))`, the article);
    the boot's summary for people says `exit=1` alone. An error of another kind is shown."""
    from lifeguard.node.cli import _report
    from lifeguard.node.executor import BootResult, ScriptRun

    result = BootResult(1, True)
    result.exit_code = 4
    failed = "script 'fail' failed with exit status ExitStatus(unix_wait_status(256))"
    result.runs = [
        ScriptRun("nodeBootstrapped", "fail", "TERMINATE", "failed", 1, failed),
        ScriptRun(
            "nodeBootstrapped", "fetch", "CONTINUE", "failed", None, "s3 download failed: AccessDenied"
        ),
    ]
    _report(result, as_json=False)
    out = capsys.readouterr().out
    assert "unix_wait_status" not in out
    assert "  nodeBootstrapped  fail  failed    exit=1  onError TERMINATE\n" in out
    assert "s3 download failed: AccessDenied" in out


def _a_config(tmp_path: Path) -> Path:
    config = tmp_path / "actions.json"
    script = {"name": "ok", "scriptSource": {"scriptLocation": "s3://lca-scripts-example/scripts/ok.sh"}}
    config.write_text(json.dumps({"stages": {"nodeBootstrapped": [script]}}))
    return config


@pytest.mark.parametrize("given", ["--node-id", "PCS_CLUSTER_ID"])
def test_an_id_that_is_not_utf8_is_bad_usage_and_nothing_runs(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch, given: str
) -> None:
    """`--node-id $'node\\xff'` (Python's argv holds it as a surrogate) failed writing the boot's first
    record: an internal error, exit 1, where DESIGN has 64 for bad usage, nothing run."""
    root = tmp_path / "root"
    command = ["boot", "--config", str(_a_config(tmp_path)), "--root", str(root)]
    bad = b"node\xff".decode("utf-8", "surrogateescape")
    if given == "--node-id":
        command += ["--node-id", bad]
    else:
        monkeypatch.setenv("PCS_CLUSTER_ID", bad)
    assert main(command) == 64
    err = capsys.readouterr().err
    assert err.startswith("lifeguard-node: the node's id ")
    assert "is not UTF-8 text" in err
    assert err.count("\n") == 1
    assert not (root / "var/log/amazon/pcs/lifecycle/actions/executor.log").exists()


@pytest.mark.parametrize("planted", ["directory", "symlink"])
def test_an_executor_log_that_cannot_be_a_log_is_bad_usage_and_no_link_is_followed(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], planted: str
) -> None:
    """A directory in executor.log's place was an internal error (exit 1); a symlink had the boot's
    records appended to, and the mode of, whatever it pointed at."""
    root = tmp_path / "root"
    log = root / "var/log/amazon/pcs/lifecycle/actions/executor.log"
    log.parent.mkdir(parents=True)
    target = tmp_path / "secret"
    target.write_text("kept\n")
    target.chmod(0o600)
    if planted == "directory":
        log.mkdir()
    else:
        log.symlink_to(target)
    assert main(["boot", "--config", str(_a_config(tmp_path)), "--root", str(root)]) == 64
    assert "no node layout can be made there" in capsys.readouterr().err
    assert target.read_text() == "kept\n"
    assert target.stat().st_mode & 0o777 == 0o600


def test_the_readme_gives_each_node_command_with_the_options_it_takes() -> None:
    """README (The node side): its synopsis of `lifeguard-node` names every option of each command, and
    none that the command does not take."""
    import argparse
    import re

    from lifeguard.node.options import parser

    readme = (REPO / "README.md").read_text()
    block = readme.split("## The node side", 1)[1].split("```", 2)[1]
    synopsis: dict[str, set[str]] = {}
    command = ""
    for line in block.splitlines():
        if line.startswith("lifeguard-node "):
            command = line.split()[1]
        synopsis.setdefault(command, set()).update(re.findall(r"--[a-z-]+", line))
    commands = next(a for a in parser()._actions if isinstance(a, argparse._SubParsersAction))
    taken = {  # what `--help` shows: an option for the step's own watcher is not
        name: {
            option
            for action in sub._actions
            if action.help != argparse.SUPPRESS
            for option in action.option_strings
            if option.startswith("--") and option != "--help"
        }
        for name, sub in commands.choices.items()
    }
    synopsis.pop("", None)
    assert synopsis == taken


def test_a_boot_started_with_stdout_closed_exits_with_the_boots_status(tmp_path: Path) -> None:
    """`lifeguard-node boot ... >&-`: Python has no stdout at all, and the summary goes nowhere; the boot's
    exit status is its scripts' (an internal error, exit 1, would read as a failed boot)."""
    config = tmp_path / "actions.json"
    config.write_text('{"stages": {}}')
    entry = (  # as the bundle's entry (`node/__main__.py`), the layer first on the path
        "import sys; sys.path.insert(0, sys.argv.pop(1)); "
        "from lifeguard.node.cli import end_process, main; end_process(main())"
    )
    boot = ["boot", "--config", str(config), "--root", str(tmp_path / "root")]
    done = subprocess.run(
        ["bash", "-c", 'exec "$@" >&-', "bash", sys.executable, "-I", "-c", entry, str(LAYER), *boot],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert (done.returncode, done.stderr) == (0, "")
