"""The drain step of a quarantine, on a node: the quarantined configuration Lifeguard plans, booted by the
node executor with the node bundle fetched from S3 as its nodeReady script, and scontrol stood in for."""

from __future__ import annotations

import stat
from pathlib import Path

import pytest

from lifeguard.remediation import DRAIN_SCRIPT_NAME, ActionContext, NodeBundle, action_for
from lifeguard_cli.node_bundle import build_node_bundle
from tests.integration.conftest import Node

pytestmark = pytest.mark.integration


@pytest.fixture
def drained(node: Node, tmp_path: Path) -> Path:
    """A bundle in the node's bucket and an scontrol that records its arguments; returns that record."""
    bundle = tmp_path / "dist" / "lifeguard-node.pyz"
    bundle.parent.mkdir()
    digest = build_node_bundle(bundle)
    (tmp_path / "dist" / "sha256").write_text(digest)
    node.put_script("lifeguard/lifeguard-node.pyz", bundle.read_bytes())
    record = tmp_path / "scontrol.args"
    scontrol = tmp_path / "bin" / "scontrol"
    scontrol.parent.mkdir()
    scontrol.write_text(f'#!/bin/sh\necho "$@" >> {record}\n')
    scontrol.chmod(scontrol.stat().st_mode | stat.S_IXUSR)
    node.env["LIFEGUARD_SCONTROL"] = str(scontrol)
    node.env["LIFEGUARD_NODE_ROOT"] = str(node.root)  # on a node: /
    return record


def quarantined(node: Node, failing: bool, sha256: str) -> dict[str, object]:
    config = node.config("article-terminate")
    if not failing:
        config["stages"]["nodeBootstrapped"] = config["stages"]["nodeBootstrapped"][1:]
    plan = action_for("quarantine").plan(
        ActionContext(
            config,
            None,
            # Pinned by its checksum, as the stack's outputs pin it: the executor checks it on the node.
            node_bundle=NodeBundle(f"s3://{node.bucket}/lifeguard/lifeguard-node.pyz", sha256=sha256),
        )
    )
    assert plan.config_after is not None
    assert plan.config_after["stages"]["nodeReady"][0]["name"] == DRAIN_SCRIPT_NAME
    return plan.config_after


def bundle_sha256(drained: Path) -> str:
    return (drained.parent / "dist" / "sha256").read_text()


def test_a_node_whose_script_stopped_the_sequence_is_kept_and_drained(node: Node, drained: Path) -> None:
    run = node.boot(quarantined(node, failing=True, sha256=bundle_sha256(drained)))
    assert run.returncode == 3, run.stderr  # STOP_SEQUENCE: the node is kept, nodeReady still runs
    args = drained.read_text()
    assert args.startswith("update NodeName=lca-static-1 State=DRAIN Reason=lifeguard: kept for debugging")
    assert "(nodeBootstrapped/fail-terminate)" in args
    assert "drained: lifeguard: kept for debugging" in node.script_log("nodeReady", DRAIN_SCRIPT_NAME)
    assert "ready-check" in [r.get("script") for r in node.executor_records()]


def test_a_node_whose_scripts_all_ran_stays_in_service(node: Node, drained: Path) -> None:
    run = node.boot(quarantined(node, failing=False, sha256=bundle_sha256(drained)))
    assert run.returncode == 0, run.stderr
    assert not drained.exists()
    assert "not drained: no lifecycle script stopped its sequence this boot" in node.script_log(
        "nodeReady", DRAIN_SCRIPT_NAME
    )
