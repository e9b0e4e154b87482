"""Health from every signal, end to end through `lifeguard replay` (the real handlers on a fresh local AWS):
node reports that detect on their own (announced, never acted on), both signals in either order with
duplicates, a boot that failed outside the lifecycle scripts, and the drain/replace loop a drained kept node
can start."""

from __future__ import annotations

from typing import Any

import pytest

from lifeguard.lifecycle_rules import DRAIN_SCRIPT_NAME
from tests.conftest import load_event
from tests.e2e.test_closed_loop import STREAMS, final_config, kinds, replay

pytestmark = pytest.mark.e2e
TERMINATE = load_event("configs/article-terminate.json")


def details(document: dict[str, Any], detail_type: str) -> list[dict[str, Any]]:
    return [e["detail"] for e in document["events"] if e["detail-type"] == detail_type]


def applied(document: dict[str, Any]) -> list[str]:
    return [d["action"] for d in details(document, "RemediationApplied")]


def test_node_reports_alone_detect_the_loop_once_and_change_nothing_any_node_could_have_written() -> None:
    document = replay("--mode", "quarantine", str(STREAMS / "reports-only-loop.jsonl"))
    assert kinds(document) == ["BootstrapLoopDetected", "RemediationSkipped"]
    [detected] = details(document, "BootstrapLoopDetected")
    assert detected["signals"] == ["node_reports"]
    assert detected["suspect"]["script"] == "fail-terminate"
    [skipped] = details(document, "RemediationSkipped")
    assert skipped["reason"].startswith("the loop is known from node reports alone, which any node can write")
    assert final_config(document) == TERMINATE  # nothing changed: only PCS's scaling log proves a loop


@pytest.mark.parametrize("stream", ["reports-then-scaling-log", "scaling-log-then-reports"])
def test_both_signals_in_either_order_and_delivered_twice_are_one_episode_and_one_remediation(
    stream: str,
) -> None:
    document = replay("--mode", "quarantine", str(STREAMS / f"{stream}.jsonl"))
    detections = details(document, "BootstrapLoopDetected")
    assert len({d["episode_id"] for d in detections}) == 1
    assert applied(document) == ["quarantine"]
    assert (
        detections[-1]["signals"] == ["scaling_log", "node_reports"] or stream == "reports-then-scaling-log"
    )
    assert final_config(document)["stages"]["nodeBootstrapped"][0]["onError"] == "STOP_SEQUENCE"


def test_a_boot_that_failed_with_every_script_succeeded_switches_no_script() -> None:
    document = replay("--mode", "quarantine", str(STREAMS / "no-script-failed.jsonl"))
    assert kinds(document)[:2] == ["BootstrapLoopDetected", "RemediationSkipped"]
    [detected] = details(document, "BootstrapLoopDetected")
    assert detected["suspect"] is None
    assert detected["reason"].startswith("no script failed on these nodes")
    [skipped] = details(document, "RemediationSkipped")
    assert "no script is switched" in skipped["reason"]
    assert final_config(document) == TERMINATE  # nothing changed


def test_a_drain_replace_loop_after_a_quarantine_with_draining_on_takes_the_drain_step_out() -> None:
    document = replay(
        "--mode",
        "quarantine",
        "--node-bundle",
        "s3://lifeguard-bundles/lifeguard-node.pyz",
        str(STREAMS / "quarantine-drained-replacement-loop.jsonl"),
    )
    assert kinds(document) == [
        "BootstrapLoopDetected",
        "RemediationApplied",
        "LoopContained",
        "BootstrapLoopDetected",
        "RemediationApplied",
    ]
    first, replacement = details(document, "BootstrapLoopDetected")
    assert (replacement["episode_id"], replacement["kind"]) == (first["episode_id"], "replacement")
    assert "drain/replace loop" in replacement["reason"]
    assert applied(document) == ["quarantine", "undrain"]
    [contained] = details(document, "LoopContained")
    assert contained["kept"] == [{"instance_id": "i-0c4d5e6f7a8b9c0d1", "drained": True}]
    stages = final_config(document)["stages"]
    assert DRAIN_SCRIPT_NAME not in [s["name"] for s in stages.get("nodeReady", [])]
    assert stages["nodeBootstrapped"][0]["onError"] == "STOP_SEQUENCE"  # still contained
