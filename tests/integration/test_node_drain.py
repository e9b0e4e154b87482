"""The drain step of a quarantine, on a node: the quarantined configuration Lifeguard plans, booted by the
node executor with the node bundle fetched from S3 as its nodeReady script, and scontrol stood in for.
The step drains at once for a failure before it, and leaves a watcher for the nodeReady scripts after it;
every test runs on the layer's Python and again on the node's Python 3.9 (bundle and executor alike)."""

from __future__ import annotations

import json
import os
import re
import signal
import stat
import subprocess
import sys
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from lifeguard.node.layout import NodeLayout
from lifeguard.remediation import DRAIN_SCRIPT_NAME, ActionContext, NodeBundle, action_for
from lifeguard_cli.node_bundle import build_node_bundle
from tests.conftest import NODE_PYTHON, REPO
from tests.integration.conftest import LIFEGUARD_NODE, Node, NodeRun

pytestmark = pytest.mark.integration

WATCHER_ENDS_WITHIN_SECONDS = 10.0  # after the boot's end record: a few polls, plus a loaded machine


@dataclass
class Drained:
    """A node whose lifecycle actions can fetch the node bundle, and an scontrol recording its calls."""

    node: Node
    calls: Path  # one line of arguments per scontrol call
    sha256: str
    lifeguard_node: list[str]  # how this Python runs `lifeguard-node`

    def read_text(self) -> str:
        return self.calls.read_text()

    def exists(self) -> bool:
        return self.calls.exists()

    def boot(self, config: dict[str, Any]) -> NodeRun:
        return self.node.boot(config, command=self.lifeguard_node)

    def step_log(self) -> str:
        return self.node.script_log("nodeReady", DRAIN_SCRIPT_NAME)

    def watch_log(self) -> str:
        return NodeLayout(self.node.root).drain_watch_log.read_text()

    def watchers(self, output: str | None = None) -> list[int]:
        """The pids of the watchers the drain step said it started."""
        text = self.step_log() if output is None else output
        return [int(pid) for pid in re.findall(r"^watching: pid (\d+) ", text, re.MULTILINE)]

    def watchers_end(self, pids: list[int], within: float = WATCHER_ENDS_WITHIN_SECONDS) -> bool:
        deadline = time.monotonic() + within
        while any(map(watching, pids)):
            if time.monotonic() > deadline:
                return False
            time.sleep(0.05)
        return True


def watching(pid: int) -> bool:
    """Whether `pid` is still a drain watcher (it is not our child: once ended it may linger as a zombie,
    whose command line is empty)."""
    try:
        return b"--follow-from" in Path(f"/proc/{pid}/cmdline").read_bytes()
    except OSError:
        return False


@pytest.fixture(params=["layer python", "python 3.9"])
def drained(node: Node, tmp_path: Path, request: pytest.FixtureRequest) -> Iterator[Drained]:
    """A bundle in the node's bucket and an scontrol that records its arguments. On Python 3.9 the node
    boots with the bundle on 3.9, and `python3` (the bundle's shebang) is 3.9 too."""
    bundle = tmp_path / "dist" / "lifeguard-node.pyz"
    bundle.parent.mkdir()
    digest = build_node_bundle(bundle)
    node.put_script("lifeguard/lifeguard-node.pyz", bundle.read_bytes())
    record = tmp_path / "scontrol.args"
    scontrol = tmp_path / "bin" / "scontrol"
    scontrol.parent.mkdir()
    scontrol.write_text(f'#!/bin/sh\necho "$@" >> {record}\n')
    scontrol.chmod(scontrol.stat().st_mode | stat.S_IXUSR)
    node.env["LIFEGUARD_SCONTROL"] = str(scontrol)
    node.env["LIFEGUARD_NODE_ROOT"] = str(node.root)  # on a node: /
    lifeguard_node = [str(LIFEGUARD_NODE)]
    if request.param == "python 3.9":
        if not NODE_PYTHON.exists():
            pytest.skip("no Python 3.9 venv (.venv/node39): setup.sh found no python3.9")
        python3 = scontrol.parent / "python3"
        python3.write_text(f'#!/bin/sh\necho "$@" >> {tmp_path / "python3.calls"}\nexec {NODE_PYTHON} "$@"\n')
        python3.chmod(0o755)
        node.env["PATH"] = f"{python3.parent}{os.pathsep}{node.env['PATH']}"
        lifeguard_node = [str(NODE_PYTHON), str(bundle)]
    drained = Drained(node, record, digest, lifeguard_node)
    yield drained
    log = node.actions / "nodeReady" / f"{DRAIN_SCRIPT_NAME}.log"
    if request.param == "python 3.9" and log.exists():
        assert " drain --reason " in (tmp_path / "python3.calls").read_text()  # the step ran on 3.9
    for pid in drained.watchers(log.read_text() if log.exists() else ""):
        if watching(pid):  # a test that failed may leave one: no process outlives the tests
            os.kill(pid, signal.SIGKILL)


def plan_quarantine(
    config: dict[str, Any], node: Node, sha256: str, suspect: tuple[str, str] | None = None
) -> dict[str, Any]:
    plan = action_for("quarantine").plan(
        ActionContext(
            config,
            suspect,
            # Pinned by its checksum, as the stack's outputs pin it: the executor checks it on the node.
            node_bundle=NodeBundle(f"s3://{node.bucket}/lifeguard/lifeguard-node.pyz", sha256=sha256),
        )
    )
    assert plan.config_after is not None
    assert plan.config_after["stages"]["nodeReady"][0]["name"] == DRAIN_SCRIPT_NAME
    return plan.config_after


def quarantined(node: Node, failing: bool, sha256: str) -> dict[str, object]:
    config = node.config("article-terminate")
    if not failing:
        config["stages"]["nodeBootstrapped"] = config["stages"]["nodeBootstrapped"][1:]
    return plan_quarantine(config, node, sha256)


def bundle_sha256(drained: Drained) -> str:
    return drained.sha256


def test_a_node_whose_script_stopped_the_sequence_is_kept_and_drained(node: Node, drained: Drained) -> None:
    run = drained.boot(quarantined(node, failing=True, sha256=bundle_sha256(drained)))
    assert run.returncode == 3, run.stderr  # STOP_SEQUENCE: the node is kept, nodeReady still runs
    args = drained.read_text()
    assert args.startswith("update NodeName=lca-static-1 State=DRAIN Reason=lifeguard: kept for debugging")
    assert "(nodeBootstrapped/fail-terminate)" in args
    assert "drained: lifeguard: kept for debugging" in node.script_log("nodeReady", DRAIN_SCRIPT_NAME)
    assert "ready-check" in [r.get("script") for r in node.executor_records()]
    # Drained at once, once: no watcher was left for the rest of the boot.
    assert args.count("\n") == 1
    assert drained.watchers() == []
    assert not NodeLayout(node.root).drain_watch_log.exists()


def test_a_node_whose_scripts_all_ran_stays_in_service(node: Node, drained: Drained) -> None:
    run = drained.boot(quarantined(node, failing=False, sha256=bundle_sha256(drained)))
    assert run.returncode == 0, run.stderr
    assert not drained.exists()
    assert "not drained: no lifecycle script stopped its sequence this boot" in node.script_log(
        "nodeReady", DRAIN_SCRIPT_NAME
    )
    watchers = drained.watchers()
    assert len(watchers) == 1
    assert drained.watchers_end(watchers), "the watcher outlived the boot's end record"
    assert not drained.exists()
    assert (
        drained.watch_log()
        .splitlines()[-1]
        .endswith("not drained: no lifecycle script stopped its sequence this boot: the boot ended")
    )


def test_a_nodeReady_script_that_stops_the_sequence_after_the_step_gets_the_node_drained(
    node: Node, drained: Drained
) -> None:
    config = node.script_config(
        {
            "nodeBootstrapped": [
                {
                    "name": "record-bootstrapped",
                    "scriptSource": {"scriptLocation": "scripts/record-boot.sh"},
                    "arguments": ["bootstrapped"],
                }
            ],
            "nodeReady": [
                {"name": "configure-gpu", "scriptSource": {"scriptLocation": "scripts/fail.sh"}},
                {
                    "name": "ready-check",
                    "scriptSource": {"scriptLocation": "scripts/ready-check.sh"},
                    "onError": "CONTINUE",
                },
            ],
        }
    )
    after = plan_quarantine(config, node, drained.sha256, suspect=("nodeReady", "configure-gpu"))
    assert [(s["name"], s["onError"]) for s in after["stages"]["nodeReady"]] == [
        (DRAIN_SCRIPT_NAME, "CONTINUE"),
        ("configure-gpu", "STOP_SEQUENCE"),
        ("ready-check", "CONTINUE"),
    ]

    run = drained.boot(after)

    assert run.returncode == 3, run.stderr
    outcomes = {
        r.get("script"): r["message"] for r in node.executor_records() if r.get("stage") == "nodeReady"
    }
    assert outcomes[DRAIN_SCRIPT_NAME] == "script completed"  # the step returned at once, exit 0
    assert outcomes["configure-gpu"] == "lifecycle script failed; stopping remaining scripts"
    assert outcomes["ready-check"] == "script skipped"
    assert "not drained: no lifecycle script stopped its sequence this boot so far" in drained.step_log()
    watchers = drained.watchers()
    assert len(watchers) == 1
    assert drained.watchers_end(watchers), "the watcher outlived the boot's end record"
    assert drained.read_text() == (
        "update NodeName=lca-static-1 State=DRAIN "
        "Reason=lifeguard: kept for debugging, configure-gpu failed (nodeReady/configure-gpu)\n"
    )
    assert (
        drained.watch_log()
        .splitlines()[-1]
        .endswith("drained: lifeguard: kept for debugging, configure-gpu failed (nodeReady/configure-gpu)")
    )


def test_the_step_returns_at_once_and_its_watcher_ends_at_its_bound(node: Node, drained: Drained) -> None:
    """A boot that never records its end (the executor died, or PCS's agent writes no such record)."""
    layout = NodeLayout(node.root)
    layout.executor_log.parent.mkdir(parents=True)
    layout.executor_log.write_text(
        json.dumps({"timestamp": "2026-10-21T00:54:00Z", "message": "boot started"}) + "\n"
    )
    # Long enough for the step's own start (a Python process, the bundle on the node's Python) on a
    # loaded machine: the step must return well before its watcher's bound, and find it watching.
    bound = 5.0
    started = time.monotonic()
    # Output is captured: were the watcher to hold the step's stdout, this would wait for it to end.
    step = subprocess.run(
        [*drained.lifeguard_node, "drain", "--reason", "lifeguard: kept", "--watch-seconds", str(bound)],
        env={**node.env, "PCS_NODE_ID": "lca-static-1"},
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    returned = time.monotonic() - started
    assert step.returncode == 0, step.stderr
    assert (
        step.stdout.splitlines()[0]
        == "not drained: no lifecycle script stopped its sequence this boot so far"
    )
    watchers = drained.watchers(step.stdout)
    assert len(watchers) == 1
    assert returned < bound
    assert watching(watchers[0])
    assert os.getsid(watchers[0]) == watchers[0]  # its own session, out of the step's process group
    assert drained.watchers_end(watchers)
    assert time.monotonic() - started >= bound
    assert not drained.exists()
    assert (
        drained.watch_log()
        .splitlines()[-1]
        .endswith(f"not drained: no lifecycle script stopped its sequence this boot within {bound:g} s")
    )


_DATING = """
import json, sys
from pathlib import Path
from lifeguard.node.drain import stopped_scripts
from lifeguard.node.layout import NodeLayout, ensure_dir
layout = NodeLayout(Path(sys.argv[1]))
ensure_dir(layout.actions)
failure = {"level": "ERROR", "message": "lifecycle script failed; stopping remaining scripts",
           "stage": "nodeBootstrapped", "script": "fail-stop-sequence", "on_error": "StopSequence"}
layout.executor_log.write_text("".join(
    json.dumps({**failure, "timestamp": stamp}) + "\\n" for stamp in sys.argv[2:]))
print(json.dumps(stopped_scripts(layout, since=1792546200.0)))  # this boot began at 01:30:00Z
"""


@pytest.mark.parametrize("fraction", ["", ".8", ".868", ".868622", ".868622123"])
def test_the_previous_boots_failures_are_dated_so_on_the_nodes_python_as_on_any(
    tmp_path: Path, fraction: str
) -> None:
    """RFC 3339 allows a fraction of any length; Python 3.9's fromisoformat (the node's) reads 3 or 6
    digits only, and a record it could not date counted as this boot's: a quarantined node was drained
    again on every reboot for a failure of the boot before."""
    earlier = f"2026-10-21T00:57:27{fraction}Z"
    pythons = [sys.executable, *([str(NODE_PYTHON)] if NODE_PYTHON.exists() else [])]
    for python in pythons:
        done = subprocess.run(
            [python, "-c", _DATING, str(tmp_path / Path(python).name), earlier],
            capture_output=True,
            text=True,
            env={"PYTHONPATH": str(REPO / "layers" / "lifeguard"), "PATH": "/usr/bin:/bin"},
            timeout=60,
            check=True,
        )
        assert json.loads(done.stdout) == [], (python, done.stdout)
