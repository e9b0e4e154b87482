"""The package as `pipx install` or a wheel installs it: every command runs from any directory, with the
recorded events, scenarios, template and functions it needs shipped as package data."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import sysconfig
import zipfile
from pathlib import Path

import pytest

from tests.conftest import REPO

pytestmark = pytest.mark.integration


def run(*command: str | Path, cwd: Path, timeout: float = 300) -> subprocess.CompletedProcess[str]:
    env = {key: value for key, value in os.environ.items() if key not in {"PYTHONPATH", "VIRTUAL_ENV"}}
    return subprocess.run(
        [str(part) for part in command],
        cwd=cwd,
        env={**env, "COLUMNS": "120"},
        capture_output=True,
        text=True,
        timeout=timeout,
        check=False,
    )


def build_wheel(source: Path, into: Path) -> Path:
    """The wheel of the project at `source`, built with this venv's setuptools."""
    built = run(
        sys.executable,
        "-m",
        "pip",
        "wheel",
        "--no-deps",
        "--no-build-isolation",
        "-q",
        "-w",
        into,
        source,
        cwd=into.parent,
    )
    assert built.returncode == 0, built.stderr
    (wheel,) = into.glob("pcs_lifeguard-*.whl")
    return wheel


def checkout_copy(into: Path) -> Path:
    """The project's files as a fresh clone has them (no build leftovers), copied to `into`: a wheel is
    built there, never in the checkout, where two test workers building at once would share `build/`."""
    listed = run("git", "ls-files", "--cached", "--others", "--exclude-standard", cwd=REPO).stdout.split("\n")
    for name in filter(None, listed):
        if (REPO / name).is_file():
            (into / name).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(REPO / name, into / name)
    return into


@pytest.fixture(scope="module")
def installed(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A fresh venv with the wheel of this checkout in it; its dependencies are the project venv's, on a
    path line (no .pth of that venv runs, so the checkout's editable install stays out)."""
    base = tmp_path_factory.mktemp("wheel")
    wheel = build_wheel(checkout_copy(base / "source"), base / "dist")
    venv = base / "venv"
    assert run(sys.executable, "-m", "venv", "--without-pip", venv, cwd=base).returncode == 0
    python = venv / "bin" / "python"
    done = run(sys.executable, "-m", "pip", "--python", python, "install", "-q", "--no-deps", wheel, cwd=base)
    assert done.returncode == 0, done.stderr
    site = run(python, "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])", cwd=base)
    Path(site.stdout.strip(), "project-dependencies.pth").write_text(sysconfig.get_paths()["purelib"] + "\n")
    return venv


def test_the_installed_package_is_the_wheels_not_the_checkout(installed: Path, tmp_path: Path) -> None:
    done = run(
        installed / "bin" / "python",
        "-c",
        "import lifeguard, lifeguard_cli.resources as r; "
        "print(lifeguard.__file__); print(r.resource('events'))",
        cwd=tmp_path,
    )
    assert done.returncode == 0, done.stderr
    package, events = done.stdout.splitlines()
    assert package.startswith(str(installed))
    assert events.startswith(str(installed))
    assert Path(events, "scenarios", "article-loop.yaml").is_file()


@pytest.mark.parametrize("recorded", [False, True], ids=["twin", "recorded-streams"])
def test_the_demo_runs_from_any_directory(installed: Path, tmp_path: Path, recorded: bool) -> None:
    done = run(
        installed / "bin" / "lifeguard",
        "demo",
        "--quiet",
        *(["--recorded"] if recorded else []),
        cwd=tmp_path,
    )
    assert done.returncode == 0, done.stderr
    assert "Traceback" not in done.stderr
    title = "What each scenario ended with" if recorded else "Lifeguard/PCS alone, per scenario"
    assert title in done.stdout
    assert "quarantine" in done.stdout
    assert list(tmp_path.iterdir()) == []  # nothing written where it ran


def test_the_readmes_replay_of_recorded_streams_runs_from_any_directory(
    installed: Path, tmp_path: Path
) -> None:
    """The README names them as the checkout has them (`events/streams/...`), or by their bare name."""
    done = run(
        installed / "bin" / "lifeguard",
        "replay",
        "--json",
        "--mode",
        "quarantine",
        "events/streams/article-terminate-loop.jsonl",
        "article-terminate-node-reports",
        cwd=tmp_path,
    )
    assert done.returncode == 0, done.stderr
    kinds = [event["detail-type"] for event in json.loads(done.stdout)["events"]]
    assert kinds[:2] == ["BootstrapLoopDetected", "RemediationApplied"]
    missing = run(installed / "bin" / "lifeguard", "replay", "no-such-stream", cwd=tmp_path)
    assert missing.returncode == 2
    assert "no-such-stream: cannot read it: No such file or directory" in missing.stderr


def test_lint_and_the_node_tool_run_from_the_wheel(installed: Path, tmp_path: Path) -> None:
    config = installed.glob(
        "lib/python3*/site-packages/lifeguard_cli/_data/events/configs/article-terminate.json"
    )
    linted = run(installed / "bin" / "lifeguard", "lint", next(config), cwd=tmp_path)
    assert linted.returncode == 0, linted.stderr
    # As the README and `lint -h` name them: the shipped copies, from any directory.
    for shipped in ("events/configs/article-terminate.json", "events/templates/pcs-cluster.yaml"):
        linted = run(installed / "bin" / "lifeguard", "lint", shipped, cwd=tmp_path)
        assert linted.returncode == 0, linted.stderr
    reverted = run(
        installed / "bin" / "lifeguard",
        "replay",
        "--json",
        "--config",
        "events/configs/article-reverted.json",
        "--mode",
        "revert",
        "events/streams/bad-change-then-loop.jsonl",
        cwd=tmp_path,
    )
    assert reverted.returncode == 0, reverted.stderr
    assert "RemediationApplied" in [event["detail-type"] for event in json.loads(reverted.stdout)["events"]]
    missing = run(installed / "bin" / "lifeguard", "lint", "events/configs/no-such.json", cwd=tmp_path)
    assert missing.returncode == 2
    assert "events/configs/no-such.json: cannot read it: No such file or directory" in missing.stderr
    node = run(installed / "bin" / "lifeguard-node", "--version", cwd=tmp_path)
    assert (node.returncode, node.stdout) == (0, "lifeguard-node 0.1.0\n")


def test_a_wheel_built_from_the_source_distribution_carries_the_same_files(tmp_path: Path) -> None:
    clone = checkout_copy(tmp_path / "clone")
    sdist = run(
        sys.executable,
        "-c",
        "import sys; from setuptools import build_meta; print(build_meta.build_sdist(sys.argv[1]))",
        tmp_path,
        cwd=clone,
    )
    assert sdist.returncode == 0, sdist.stderr
    archive = tmp_path / sdist.stdout.strip().splitlines()[-1]
    assert run("tar", "-xzf", archive, "-C", tmp_path, cwd=tmp_path).returncode == 0
    (source,) = [path for path in tmp_path.iterdir() if path.is_dir() and path != clone]
    wheel = build_wheel(source, tmp_path / "dist")
    with zipfile.ZipFile(wheel) as zipped:
        names = set(zipped.namelist())
    for shipped in (
        "lifeguard_cli/_data/template.yaml",
        "lifeguard_cli/_data/events/scenarios/article-loop.yaml",
        "lifeguard_cli/_data/events/node/install-shipper.sh",
        "lifeguard_cli/_data/functions/publish_bundle/app.py",
        "lifeguard/data/pcs/2023-02-10/service-2.json.gz",
    ):
        assert shipped in names


def test_the_wheel_requires_what_lifeguard_runs_on_with_no_extra_to_name(tmp_path: Path) -> None:
    """`pipx install .` installs no extra: a `lifeguard` whose typer came only with `[cli]` died at its first
    line. Every dependency of the CLI is the package's own."""
    wheel = build_wheel(checkout_copy(tmp_path / "source"), tmp_path / "dist")
    with zipfile.ZipFile(wheel) as zipped:
        (metadata,) = [name for name in zipped.namelist() if name.endswith(".dist-info/METADATA")]
        lines = zipped.read(metadata).decode().splitlines()
    required = {
        line.removeprefix("Requires-Dist: ").split("=")[0].split("[")[0]
        for line in lines
        if line.startswith("Requires-Dist: ") and "extra ==" not in line
    }
    assert {"typer", "rich", "moto", "boto3", "pydantic", "aws-lambda-powertools"} <= required
