"""The closed loop as a user runs it: `lifeguard replay --mode …` feeds a recorded stream to the real
scaling_events and node_reports handlers, their events to the real remediate and notify handlers, against
a fresh local AWS; the group's configuration at the end, SNS (read back through SQS) and a loopback Slack
webhook show what happened."""

from __future__ import annotations

import copy
import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from tests.conftest import EVENTS, load_event

pytestmark = pytest.mark.e2e
LIFEGUARD = Path(sys.executable).parent / "lifeguard"
STREAMS = EVENTS / "streams"
TERMINATE = load_event("configs/article-terminate.json")
GOOD = load_event("configs/article-reverted.json")


def replay(*args: str) -> dict[str, Any]:
    done = subprocess.run(
        [str(LIFEGUARD), "replay", "--json", *args], capture_output=True, text=True, timeout=300, check=False
    )
    assert done.returncode == 0, done.stderr
    assert "Traceback" not in done.stderr
    document: dict[str, Any] = json.loads(done.stdout)
    return document


def kinds(document: dict[str, Any]) -> list[str]:
    return [event["detail-type"] for event in document["events"]]


def final_config(document: dict[str, Any]) -> Any:
    (group,) = document["groups"]
    return group["node_lifecycle_actions"]


def channels(document: dict[str, Any]) -> dict[str, list[dict[str, Any]]]:
    found: dict[str, list[dict[str, Any]]] = {"sns": [], "slack": []}
    for notification in document["notifications"]:
        found[notification["channel"]].append(notification)
    return found


def test_quarantine_ends_with_fail_terminate_on_stop_sequence_and_nothing_else_changed() -> None:
    document = replay("--mode", "quarantine", str(STREAMS / "article-terminate-loop-with-reports.jsonl"))
    assert kinds(document) == ["BootstrapLoopDetected", "RemediationApplied"]
    expected = copy.deepcopy(TERMINATE)
    expected["stages"]["nodeBootstrapped"][0]["onError"] = "STOP_SEQUENCE"
    assert final_config(document) == expected
    applied = document["events"][1]["detail"]
    assert applied["diff"] == [
        {"path": "stages.nodeBootstrapped[0].onError", "old": "TERMINATE", "new": "STOP_SEQUENCE"}
    ]
    assert applied["undo"] == "lifeguard undo pcs_abcdef01 --cluster pcs_abc123de45 --local"
    sent = channels(document)
    assert [n["attributes"]["event"] for n in sent["sns"]] == ["BootstrapLoopDetected", "RemediationApplied"]
    assert all(len(n["subject"]) < 100 for n in sent["sns"])
    assert len(sent["slack"]) == 2
    assert "fail-terminate" in json.dumps(sent["slack"][1]["message"]["blocks"])


def test_revert_puts_back_the_configuration_proven_good_before_the_bad_change() -> None:
    document = replay(
        "--mode",
        "revert",
        "--config",
        str(EVENTS / "configs" / "article-reverted.json"),
        str(STREAMS / "bad-change-then-loop.jsonl"),
    )
    assert kinds(document) == ["BootstrapLoopDetected", "RemediationApplied", "LoopResolved"]
    applied = document["events"][1]["detail"]
    assert applied["action"] == "revert"
    assert applied["config_before"] == TERMINATE
    assert applied["config_after"] == GOOD
    assert final_config(document) == GOOD
    sent = channels(document)
    assert [n["attributes"]["event"] for n in sent["sns"]] == [
        "BootstrapLoopDetected",
        "RemediationApplied",
        "LoopResolved",
    ]
    assert len(sent["slack"]) == 3


def test_notify_changes_nothing_and_says_what_quarantine_would_do() -> None:
    document = replay("--mode", "notify", str(STREAMS / "article-terminate-loop-with-reports.jsonl"))
    assert kinds(document) == ["BootstrapLoopDetected", "RemediationSkipped"]
    skipped = document["events"][1]["detail"]
    assert skipped["dry_run"] is True
    assert skipped["diff"] == [
        {"path": "stages.nodeBootstrapped[0].onError", "old": "TERMINATE", "new": "STOP_SEQUENCE"}
    ]
    assert final_config(document) == TERMINATE
    sent = channels(document)
    assert (len(sent["sns"]), len(sent["slack"])) == (2, 2)


def test_dry_run_makes_quarantine_a_notification() -> None:
    document = replay("--dry-run", str(STREAMS / "article-terminate-loop-with-reports.jsonl"))
    assert kinds(document) == ["BootstrapLoopDetected", "RemediationSkipped"]
    assert "DryRun" in document["events"][1]["detail"]["reason"]
    assert final_config(document) == TERMINATE


def test_the_third_node_of_the_article_never_triggers_a_second_remediation() -> None:
    # Without node reports the suspect is unknown: every script that can terminate is quarantined, and
    # the instance launched before that change fails later without opening anything new.
    document = replay(str(STREAMS / "article-terminate-loop.jsonl"))
    assert kinds(document) == ["BootstrapLoopDetected", "RemediationApplied"]
    reason = document["events"][1]["detail"]["reason"]
    assert "suspect unknown" in reason
    stages = final_config(document)["stages"]
    assert [s.get("onError") for s in stages["nodeBootstrapped"]] == ["STOP_SEQUENCE", "STOP_SEQUENCE"]
    assert stages["nodeReady"] == TERMINATE["stages"]["nodeReady"]


def test_the_timeline_shows_remediation_and_notifications() -> None:
    done = subprocess.run(
        [str(LIFEGUARD), "replay", str(STREAMS / "article-terminate-loop-with-reports.jsonl")],
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    assert "RemediationApplied" in done.stdout
    assert "onError: TERMINATE → STOP_SEQUENCE" in done.stdout
    assert "notifications: 2 via sns, 2 via slack" in done.stdout


def test_a_loop_that_goes_on_after_quarantine_is_detected_again_and_escalated_to_revert() -> None:
    document = replay(
        "--mode",
        "quarantine",
        "--config",
        str(EVENTS / "configs" / "article-reverted.json"),
        str(STREAMS / "quarantine-then-escalation.jsonl"),
    )
    assert kinds(document) == [
        "BootstrapLoopDetected",
        "RemediationApplied",
        "BootstrapLoopDetected",
        "RemediationApplied",
        "LoopResolved",
    ]
    first, quarantine, again, revert, _ = (event["detail"] for event in document["events"])
    assert quarantine["action"] == "quarantine"
    assert again["episode_id"] == first["episode_id"]
    assert again["revision"] == first["revision"] + 1
    assert again["config_fingerprint"] != first["config_fingerprint"]  # the quarantined configuration
    assert again["suspect"]["script"] == "record-after-fail"
    # It names the change it went on after: Lifeguard's quarantine, not the change the loop began after.
    assert again["changed_by"] == {"arn": None, "at": again["config_modified_at"], "source": "lifeguard"}
    assert again["changed_by"] != first["changed_by"]
    assert again["reason"].startswith("the loop went on after Lifeguard's own change at ")
    assert revert["action"] == "revert"
    assert "escalating to revert" in revert["reason"]
    assert final_config(document) == GOOD


def test_the_demo_replays_every_scenario_and_sums_them_up() -> None:
    done = subprocess.run(
        [str(LIFEGUARD), "demo", "--recorded", "--json"],
        capture_output=True,
        text=True,
        timeout=600,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    assert "[4/4] article loop, notify: done" in done.stderr  # progress, apart from the document
    scenarios = {s["scenario"]: s for s in json.loads(done.stdout)["scenarios"]}
    assert scenarios["article loop, quarantine"]["changes"] == [
        "quarantine: nodeBootstrapped › fail-terminate: onError TERMINATE → STOP_SEQUENCE"
    ]
    assert scenarios["bad change, revert"]["events"][-1] == "LoopResolved"
    assert [c.split(":")[0] for c in scenarios["quarantine fails, escalation"]["changes"]] == [
        "quarantine",
        "revert",
    ]
    assert scenarios["article loop, notify"]["changes"][0].startswith("quarantine (dry run, not applied)")
    assert all(
        s["notifications"]["sns"] == s["notifications"]["slack"] == len(s["events"])
        for s in scenarios.values()
    )


def test_with_the_node_bundle_the_quarantine_adds_the_drain_step() -> None:
    bundle = "s3://lifeguard-artifacts-example/lifeguard/lifeguard-node.pyz"
    document = replay("--node-bundle", bundle, str(STREAMS / "article-terminate-loop-with-reports.jsonl"))
    ready = final_config(document)["stages"]["nodeReady"]
    assert ready[0]["name"] == "lifeguard-drain"
    assert ready[0]["scriptSource"] == {"scriptLocation": bundle}
    assert ready[0]["onError"] == "CONTINUE"
    assert ready[1:] == TERMINATE["stages"]["nodeReady"]


def test_a_kept_node_still_failing_its_script_contains_the_loop_and_resolves_nothing() -> None:
    # The article's loop with no proven-good configuration: revert falls back to quarantine; the next node
    # fails fail-terminate under STOP_SEQUENCE (its report says so) and PCS logs it BOOTSTRAP_SUCCESS.
    document = replay("--mode", "revert", str(STREAMS / "article-quarantine-contained.jsonl"))
    assert kinds(document) == ["BootstrapLoopDetected", "RemediationApplied", "LoopContained"]
    contained = document["events"][2]["detail"]
    assert contained["kept"] == [{"instance_id": "i-0c4d5e6f7a8b9c0d1", "drained": False}]
    assert (contained["suspect"]["script"], contained["suspect"]["on_error"]) == (
        "fail-terminate",
        "STOP_SEQUENCE",
    )
    assert contained["undo"] == "lifeguard undo pcs_abcdef01 --cluster pcs_abc123de45 --local"
    sent = channels(document)
    assert [n["attributes"]["event"] for n in sent["sns"]][-1] == "LoopContained"
    assert "Contained, not fixed" in sent["sns"][-1]["subject"]


def test_revert_never_puts_back_a_proven_configuration_that_looped_since(tmp_path: Path) -> None:
    # The stream above, after a node proved the article's TERMINATE configuration good at 00:48:20: that
    # configuration then looped (its script broke in place), Lifeguard quarantined it, the loop ended when
    # someone put a new configuration in place, and that one loops. The proof is no way back.
    def record(at: int, status: str, reason: str) -> str:
        details = {"instance_id": "i-0aaaaaaaaaaaaaaa1", "instance_type": "c7i.large"}
        return json.dumps(
            {
                "resource_id": "pcs_abc123de45",
                "resource_type": "PCS_CLUSTER",
                "event_timestamp": at,
                "compute_node_group_id": "pcs_abcdef01",
                "scheduler_node_id": "lca-static-1",
                "status_code": status,
                "reason_code": reason,
                "description": status.lower(),
                "details": details,
            }
        )

    proven = [
        record(1792543400000, "LAUNCHED", "MAINTAIN_MIN_CAPACITY"),
        record(1792543480000, "REGISTERED", "REGISTER_SUCCESS"),
        record(1792543700000, "ACTIVE", "BOOTSTRAP_SUCCESS"),
        record(1792544600000, "TERMINATED", "SCHEDULER_REQUESTED"),
    ]
    stream = tmp_path / "proven-then-looped.jsonl"
    stream.write_text(
        "\n".join(proven) + "\n" + (STREAMS / "article-contained-then-bad-change.jsonl").read_text()
    )
    document = replay("--mode", "revert", str(stream))
    assert kinds(document)[-2:] == ["BootstrapLoopDetected", "RemediationApplied"]
    applied = document["events"][-1]["detail"]
    assert applied["action"] == "quarantine", applied["reason"]
    final = final_config(document)
    assert "fail-terminate" not in [script["name"] for script in final["stages"]["nodeBootstrapped"]]
    assert final["stages"]["nodeBootstrapped"][0]["onError"] == "STOP_SEQUENCE"


def test_a_node_ready_loop_whose_reports_come_before_each_active_stays_one_open_episode() -> None:
    # A group whose LAUNCHED records are not delivered; each node's report (mount-fsx, nodeReady, failed
    # under TERMINATE) reaches Lifeguard before PCS's ACTIVE: each ACTIVE ended the loop, and the next
    # failure opened another. One loop was four episodes in 40 minutes.
    fixtures = Path(__file__).parents[1] / "fixtures" / "replay"
    document = replay(
        "--mode",
        "notify",
        "--config",
        str(fixtures / "ready-loop-config.json"),
        str(fixtures / "ready-loop-reports-before-active.jsonl"),
    )
    assert kinds(document) == ["BootstrapLoopDetected", "RemediationSkipped"]
    assert document["events"][0]["detail"]["suspect"]["script"] == "mount-fsx"


def test_revert_never_puts_back_a_configuration_whose_script_is_known_to_fail() -> None:
    # The contained loop above; then someone puts a good configuration back with a new, failing
    # mount-shared first. The contained loop is over (its script is gone); the new loop is a new episode,
    # and revert, with no configuration proven good (the kept node proved nothing), quarantines mount-shared.
    document = replay("--mode", "revert", str(STREAMS / "article-contained-then-bad-change.jsonl"))
    assert kinds(document) == [
        "BootstrapLoopDetected",
        "RemediationApplied",
        "LoopContained",
        "LoopResolved",
        "BootstrapLoopDetected",
        "RemediationApplied",
    ]
    resolved, detected, applied = (event["detail"] for event in document["events"][3:])
    assert "no longer holds nodeBootstrapped › fail-terminate" in resolved["reason"]
    assert detected["episode_id"] != resolved["episode_id"]
    assert detected["suspect"]["script"] == "mount-shared"
    assert applied["reason"].startswith("Applied quarantine: no proven-good configuration is known")
    final = final_config(document)
    names = [script["name"] for script in final["stages"]["nodeBootstrapped"]]
    assert "fail-terminate" not in names
    assert final["stages"]["nodeBootstrapped"][0] == {
        "name": "mount-shared",
        "scriptSource": {"scriptLocation": "s3://lca-scripts-example/scripts/mount-shared.sh"},
        "onError": "STOP_SEQUENCE",
    }
