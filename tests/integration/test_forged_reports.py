"""Node reports forged by a node holding root (any node may write any report), or sent late by a broken
node, against the real handlers end to end (`lifeguard replay --json` on the local AWS).

Each test builds its stream from scaling-log records (PCS's, trusted) and node reports (anyone's), runs the
replay, and checks what README says of them; the `test_control_*` tests show what the same stream does
without the forged or late report.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.integration

ROOT = Path(__file__).resolve().parents[2]
LIFEGUARD = Path(sys.executable).parent / "lifeguard"

C, G = "pcs_abc123de45", "pcs_abcdef01"
T0 = 1792544685000
HOUR = 3600 * 1000


def rec(t: int, status: str, reason: str, iid: str) -> dict:
    return {
        "resource_id": C,
        "resource_type": "PCS_CLUSTER",
        "event_timestamp": t,
        "compute_node_group_id": G,
        "scheduler_node_id": "lca-static-1",
        "status_code": status,
        "reason_code": reason,
        "description": "x",
        "details": {"instance_id": iid, "instance_type": "c7i.large", "subnet_id": "subnet-1"},
    }


def rep(
    t_s: int,
    iid: str,
    script: str,
    outcome: str,
    *,
    on_error: str = "TERMINATE",
    stage: str = "nodeBootstrapped",
) -> dict:
    return {
        "kind": "script_run",
        "cluster_id": C,
        "compute_node_group_id": G,
        "instance_id": iid,
        "node_id": "lca-static-1",
        "boot": 1,
        "first_boot": True,
        "stage": stage,
        "script": script,
        "on_error": on_error,
        "exit_code": 1 if outcome == "failed" else 0,
        "outcome": outcome,
        "started_at": t_s,
        "ended_at": t_s,
        "log_tail": "x\n",
        "script_sha256": None,
    }


def failed_boot(t: int, iid: str, *, report: str | None = "fail-terminate") -> list[dict]:
    """A node of the article's TERMINATE config failing fail-terminate (its own report, when `report`)."""
    out = [
        rec(t, "LAUNCHED", "MAINTAIN_MIN_CAPACITY", iid),
        rec(t + 60000, "REGISTERED", "REGISTER_SUCCESS", iid),
    ]
    if report:
        out.append(rep((t + 90000) // 1000, iid, report, "failed"))
    out.append(rec(t + 120000, "TERMINATED", "BOOTSTRAP_FAILED", iid))
    return out


def good_boot(t: int, iid: str, *, ready: str | None = "succeeded") -> list[dict]:
    """A node booting with every nodeBootstrapped script succeeded (reports before ACTIVE), then nodeReady's
    ready-check (CONTINUE) reported after ACTIVE, as the article saw."""
    out = [
        rec(t, "LAUNCHED", "MAINTAIN_MIN_CAPACITY", iid),
        rec(t + 60000, "REGISTERED", "REGISTER_SUCCESS", iid),
        rep((t + 80000) // 1000, iid, "fail-terminate", "succeeded"),
        rep((t + 85000) // 1000, iid, "record-after-fail", "succeeded"),
        rec(t + 120000, "ACTIVE", "BOOTSTRAP_SUCCESS", iid),
    ]
    if ready:
        out.append(
            rep((t + 125000) // 1000, iid, "ready-check", ready, on_error="CONTINUE", stage="nodeReady")
        )
    return out


def replay(tmp_path: Path, lines: list[dict], mode: str, *options: str) -> dict:
    """`lifeguard replay --json --mode MODE [OPTIONS]` of the lines, as a user runs it."""
    stream = tmp_path / "stream.jsonl"
    stream.write_text("".join(json.dumps(line) + "\n" for line in lines))
    done = subprocess.run(
        [str(LIFEGUARD), "replay", "--json", "--mode", mode, *options, str(stream)],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout)


def kinds(result: dict) -> list[str]:
    return [e["detail-type"] for e in result["events"]]


def on_error_of(result: dict, script: str) -> str:
    stages = result["groups"][0]["node_lifecycle_actions"]["stages"]
    for scripts in stages.values():
        for entry in scripts:
            if entry["name"] == script:
                return entry.get("onError", "TERMINATE")
    raise AssertionError(script)


def detections_after(result: dict, t_ms: int) -> list[dict]:
    return [
        e
        for e in result["events"]
        if e["detail-type"] == "BootstrapLoopDetected"
        and any(f["event_timestamp"] >= t_ms for f in e["detail"]["failures"])
    ]


# -- 1. A resolved loop reopened as "contained" by one report; the next real loop is told all the same

RESOLVER = "i-0000000000000a003"


def _resolved_loop() -> list[dict]:
    # notify (the stack's DefaultMode): the owners fix the script's S3 object, no configuration change
    return (
        failed_boot(T0, "i-0000000000000a001")
        + failed_boot(T0 + 300000, "i-0000000000000a002")
        + good_boot(T0 + 600000, RESOLVER)
    )


def _next_loop() -> list[dict]:
    t = T0 + 3 * HOUR  # the script's object breaks again, same configuration
    return [line for k in range(3) for line in failed_boot(t + k * 300000, f"i-0000000000000a00{4 + k}")]


def _forged() -> list[dict]:
    # any node: a failed TERMINATE run of record-after-fail for the node PCS logged ACTIVE (impossible:
    # a TERMINATE failure gets the node terminated)
    return [rep((T0 + 690000) // 1000, RESOLVER, "record-after-fail", "failed")]


def test_control_next_loop_is_told_without_forged_report(tmp_path: Path) -> None:
    result = replay(tmp_path, _resolved_loop() + _next_loop(), "notify")
    assert detections_after(result, T0 + 3 * HOUR), kinds(result)


def test_forged_failed_run_for_resolving_node_makes_no_loop_contained(tmp_path: Path) -> None:
    result = replay(tmp_path, _resolved_loop() + _forged(), "notify")
    assert "LoopResolved" in kinds(result)
    assert "LoopContained" not in kinds(result), "a forged report turned a resolved loop into a contained one"


def test_forged_failed_run_for_resolving_node_does_not_silence_next_real_loop(tmp_path: Path) -> None:
    result = replay(tmp_path, _resolved_loop() + _forged() + _next_loop(), "notify")
    assert detections_after(result, T0 + 3 * HOUR), (
        "3 fresh instances TERMINATED/BOOTSTRAP_FAILED in a row, never told: " + ", ".join(kinds(result))
    )


def test_a_loop_after_a_containment_on_the_same_configuration_is_told(tmp_path: Path) -> None:
    """The loop quarantined (fail-terminate under STOP_SEQUENCE), and the next node kept with it still
    failing: contained. Fresh instances failing in a row on that same configuration hours later (its other
    TERMINATE script fails now) are a loop all the same, told, as the loop going on after the change."""
    kept = [
        rec(T0 + 600000, "LAUNCHED", "MAINTAIN_MIN_CAPACITY", RESOLVER),
        rec(T0 + 660000, "REGISTERED", "REGISTER_SUCCESS", RESOLVER),
        rep((T0 + 680000) // 1000, RESOLVER, "fail-terminate", "failed", on_error="STOP_SEQUENCE"),
        rec(T0 + 720000, "ACTIVE", "BOOTSTRAP_SUCCESS", RESOLVER),
    ]
    t = T0 + 3 * HOUR
    again = [
        line
        for k in range(3)
        for line in failed_boot(t + k * 300000, f"i-0000000000000a00{4 + k}", report="record-after-fail")
    ]
    lines = failed_boot(T0, "i-0000000000000a001") + failed_boot(T0 + 300000, "i-0000000000000a002")
    result = replay(tmp_path, lines + kept + again, "quarantine")
    assert "LoopContained" in kinds(result)
    (told,) = detections_after(result, T0 + 3 * HOUR)
    assert told["detail"]["reason"].startswith("the loop went on after Lifeguard's own change at ")
    assert told["detail"]["suspect"]["script"] == "record-after-fail"
    (contained,) = [e for e in result["events"] if e["detail-type"] == "LoopContained"]
    assert told["detail"]["episode_id"] == contained["detail"]["episode_id"]


@pytest.mark.parametrize("on_error", ["CONTINUE", "STOP_SEQUENCE"])
def test_a_report_the_resolving_nodes_configuration_rules_out_contains_nothing(
    tmp_path: Path, on_error: str
) -> None:
    """Any node writes that the node which ended the loop had fail-terminate fail under CONTINUE (or
    STOP_SEQUENCE), though the configuration it booted runs that script under TERMINATE: PCS would have
    ended the node. The loop stays resolved and its proof of good stands; the next real loop on that
    configuration is told as a loop of its own."""
    late = [rep((T0 + 690000) // 1000, RESOLVER, "fail-terminate", "failed", on_error=on_error)]
    result = replay(tmp_path, _resolved_loop() + late + _next_loop(), "notify")
    assert "LoopContained" not in kinds(result), kinds(result)
    assert kinds(result)[:3] == ["BootstrapLoopDetected", "RemediationSkipped", "LoopResolved"]
    (told,) = detections_after(result, T0 + 3 * HOUR)
    assert not told["detail"]["reason"].startswith("the group loops again after its loop was contained")


def test_continue_failure_of_resolving_node_does_not_silence_next_real_loop(tmp_path: Path) -> None:
    # No attacker: the node that came up after the fix had its nodeReady CONTINUE script fail (reported after
    # ACTIVE, as nodeReady runs). README: the script still failing is a TERMINATE or STOP_SEQUENCE failure,
    # "not a CONTINUE one of a later stage".
    lines = (
        failed_boot(T0, "i-0000000000000a001")
        + failed_boot(T0 + 300000, "i-0000000000000a002")
        + good_boot(T0 + 600000, RESOLVER, ready="failed")
        + _next_loop()
    )
    result = replay(tmp_path, lines, "notify")
    contained = [e for e in result["events"] if e["detail-type"] == "LoopContained"]
    assert not [e for e in contained if e["detail"]["suspect"]["on_error"] == "CONTINUE"], (
        "LoopContained names a CONTINUE script as the one still failing"
    )
    assert detections_after(result, T0 + 3 * HOUR), ", ".join(kinds(result))


# -- 2. Forged reports for the instances of a real loop whose own reports are not in (yet)

A, B = "i-0000000000000b001", "i-0000000000000b002"


def _loop_with(forged: str | None, outcome: str) -> list[dict]:
    lines = []
    for t, iid in ((T0, A), (T0 + 300000, B)):
        lines += failed_boot(t, iid, report=None)[:2]
        if forged:
            lines.append(rep((t + 70000) // 1000, iid, forged, outcome))  # written by the attacker
        lines.append(rec(t + 120000, "TERMINATED", "BOOTSTRAP_FAILED", iid))
    return lines


def _late_real_reports() -> list[dict]:
    # the nodes' own reports, delivered after PCS's TERMINATED records (a slow or throttled shipper)
    return [
        rep((T0 + 90000) // 1000, A, "fail-terminate", "failed"),
        rep((T0 + 390000) // 1000, B, "fail-terminate", "failed"),
    ]


def test_control_no_reports_switches_every_terminate_script(tmp_path: Path) -> None:
    result = replay(tmp_path, _loop_with(None, "failed"), "quarantine")
    assert "RemediationApplied" in kinds(result)
    assert on_error_of(result, "fail-terminate") == "STOP_SEQUENCE"


def _loop_goes_on(forged: bool) -> list[dict]:
    """The loop going on after a quarantine of the wrong script: two more fresh instances fail the same
    way (their own report when the nodes ship, the attacker's forged one when they do not)."""
    lines: list[dict] = []
    for k, iid in enumerate(("i-0000000000000b003", "i-0000000000000b004")):
        t = T0 + 900000 + k * 330000
        boot = failed_boot(t, iid, report=None if forged else "fail-terminate")
        if forged:
            boot.insert(2, rep((t + 70000) // 1000, iid, "record-after-fail", "failed"))
        lines += boot
    return lines


@pytest.mark.parametrize("late", [False, True], ids=["no-own-reports", "own-reports-late"])
def test_forged_failure_gets_the_wrong_script_switched_only_until_the_loop_goes_on(
    tmp_path: Path, late: bool
) -> None:
    """Forged failed runs of record-after-fail for a real loop's instances whose own reports are not in
    (yet): the first quarantine switches record-after-fail (README, what a node can still do). When the
    nodes' own reports come, the instances are contradicted and the suspect is withdrawn, told again; and
    the loop going on is escalated, so fail-terminate, the script that fails, is switched in the end."""
    lines = _loop_with("record-after-fail", "failed") + (_late_real_reports() if late else [])
    result = replay(tmp_path, lines + _loop_goes_on(forged=not late), "quarantine")
    assert on_error_of(result, "fail-terminate") == "STOP_SEQUENCE", ", ".join(kinds(result))
    withdrawn = [
        e
        for e in result["events"]
        if e["detail-type"] == "BootstrapLoopDetected"
        and "is not the suspect" in (e["detail"]["reason"] or "")
    ]
    assert bool(withdrawn) is late
    if late:
        assert withdrawn[0]["detail"]["suspect"] is None


def test_forged_success_marks_do_not_stop_the_quarantine_of_a_real_loop(tmp_path: Path) -> None:
    # One forged 'succeeded' run per failing instance: "no script failed on these nodes", nothing switched;
    # without it, every TERMINATE script is switched (control above): worse than a suspect made unknown.
    result = replay(tmp_path, _loop_with("fail-terminate", "succeeded"), "quarantine")
    assert "RemediationApplied" in kinds(result), ", ".join(kinds(result))
    assert on_error_of(result, "fail-terminate") == "STOP_SEQUENCE"


# -- 3. One forged 'succeeded' mark does not prove a configuration with a STOP_SEQUENCE script good

N = "i-0000000000000e001"
CONFIGS = ROOT / "events" / "configs"


def _proof_then_bad_change(forged: bool) -> list[dict]:
    bad = json.loads((CONFIGS / "article-terminate.json").read_text())
    lines = [
        rec(T0, "LAUNCHED", "MAINTAIN_MIN_CAPACITY", N),
        rec(T0 + 60000, "REGISTERED", "REGISTER_SUCCESS", N),
    ]
    if forged:  # the node's own shipper is not installed; any node writes this one line
        lines.append(rep((T0 + 80000) // 1000, N, "record-after-fail", "succeeded"))
    lines.append(rec(T0 + 120000, "ACTIVE", "BOOTSTRAP_SUCCESS", N))
    t = T0 + HOUR
    lines.append({"lifeguard_replay": {"update_config": bad, "compute_node_group_id": G, "at": t}})
    lines += failed_boot(t + 60000, "i-0000000000000e002", report=None)
    lines += failed_boot(t + 360000, "i-0000000000000e003", report=None)
    return lines


def _replay_revert(tmp_path: Path, lines: list[dict]) -> dict:
    return replay(tmp_path, lines, "revert", "--config", str(CONFIGS / "article-stop-sequence.json"))


def test_control_stop_sequence_config_without_reports_is_not_proven(tmp_path: Path) -> None:
    result = _replay_revert(tmp_path, _proof_then_bad_change(forged=False))
    assert on_error_of(result, "fail-terminate") == "STOP_SEQUENCE"  # quarantined instead of reverted


def test_one_forged_mark_does_not_prove_a_stop_sequence_config_good(tmp_path: Path) -> None:
    """README: without reports, a success proves nothing of a configuration with a script under
    STOP_SEQUENCE (PCS logs its failure as BOOTSTRAP_SUCCESS); nor do reports without a run of each such
    nodeBootstrapped script: one forged mark of record-after-fail (which a failing fail-stop-sequence
    would have skipped) is not the proof."""
    result = _replay_revert(tmp_path, _proof_then_bad_change(forged=True))
    reverts = [
        e
        for e in result["events"]
        if e["detail-type"] == "RemediationApplied" and "proven good" in (e["detail"].get("reason") or "")
    ]
    assert not reverts, reverts[0]["detail"]["reason"]


# -- Honest clusters, reports before or after PCS's records: what contains a loop, and what ends it

GROUP = "pcs_abcdef01"


def replay_config(tmp_path: Path, lines: list[dict], mode: str, config: dict) -> dict:
    """`replay` with the groups' configuration given."""
    path = tmp_path / "config.json"
    path.write_text(json.dumps(config))
    return replay(tmp_path, lines, mode, "--config", str(path))


def article_with(ready_on_error: str) -> dict:
    config = json.loads((CONFIGS / "article-terminate.json").read_text())
    config["stages"]["nodeReady"][0]["onError"] = ready_on_error
    return config


def boot_ok(t: int, iid: str, ready: str = "succeeded", ready_on_error: str = "TERMINATE") -> list[dict]:
    """An honest node of the article's config: both nodeBootstrapped scripts succeed (reported before
    ACTIVE), ACTIVE, then nodeReady's ready-check reported after ACTIVE (as the article saw)."""
    return [
        rec(t, "LAUNCHED", "MAINTAIN_MIN_CAPACITY", iid),
        rec(t + 60000, "REGISTERED", "REGISTER_SUCCESS", iid),
        rep((t + 80000) // 1000, iid, "fail-terminate", "succeeded"),
        rep((t + 85000) // 1000, iid, "record-after-fail", "succeeded"),
        rec(t + 120000, "ACTIVE", "BOOTSTRAP_SUCCESS", iid),
        rep((t + 125000) // 1000, iid, "ready-check", ready, on_error=ready_on_error, stage="nodeReady"),
    ]


# -- 1. An honest nodeReady TERMINATE failure after ACTIVE holds every later success back, forever


def test_control_nodeready_terminate_failure_reported_after_active_resolves(tmp_path: Path) -> None:
    """The loop of fail-terminate is fixed in place (notify). The first node after the fix comes up ACTIVE,
    then its nodeReady ready-check (onError TERMINATE, the default) fails once: PCS terminates it. Three
    more nodes then boot with every script succeeded: the loop is resolved."""
    end = "BOOTSTRAP_FAILED"
    bad = "i-00000000000000f03"
    lines = failed_boot(T0, "i-00000000000000f01") + failed_boot(T0 + 300000, "i-00000000000000f02")
    lines += boot_ok(T0 + 600000, bad, ready="failed")
    lines.append(rec(T0 + 600000 + 180000, "TERMINATED", end, bad))  # the node's end, however PCS logs it
    for k in range(3):
        lines += boot_ok(T0 + 1200000 + k * 600000, f"i-00000000000000f1{k}")
    result = replay_config(tmp_path, lines, "notify", article_with("TERMINATE"))
    assert "BootstrapLoopDetected" in kinds(result)
    assert "LoopResolved" in kinds(result), ", ".join(kinds(result))


def test_a_nodeready_terminate_loop_left_to_go_on_is_one_episode_till_a_node_stays_up(tmp_path: Path) -> None:
    """Notify, the article's timing: each node is ACTIVE, then its ready-check (onError TERMINATE) fails
    and PCS ends it, node after node. No ACTIVE of such a node ends the loop (it waits for the node's
    ready-check); the first node whose ready-check passes does, when its report comes."""
    lines: list[dict] = []
    for k in range(5):
        t, iid = T0 + k * 360000, f"i-00000000000000e0{k}"
        lines += boot_ok(t, iid, ready="failed")
        lines.append(rec(t + 130000, "TERMINATED", "BOOTSTRAP_FAILED", iid))
    lines += boot_ok(T0 + 5 * 360000, "i-00000000000000e09")
    result = replay_config(tmp_path, lines, "notify", article_with("TERMINATE"))
    told = kinds(result)
    assert "BootstrapLoopDetected" in told
    assert told.count("LoopResolved") == 1, ", ".join(told)
    resolved = next(e for e in result["events"] if e["detail-type"] == "LoopResolved")
    assert "i-00000000000000e09" in resolved["detail"]["reason"]


def test_a_forged_nodeready_terminate_failure_does_not_hold_a_fixed_loops_end_back(tmp_path: Path) -> None:
    """The loop of fail-terminate is fixed in place (notify); no node of it failed after its ACTIVE. Another
    node writes a report that the first fixed node's ready-check (onError TERMINATE) failed; the node's
    own report says it passed, and PCS never ends it. A report alone cannot make a success wait: the loop
    is resolved by that node."""
    fixed = "i-00000000000000d03"
    lines = failed_boot(T0, "i-00000000000000d01") + failed_boot(T0 + 300000, "i-00000000000000d02")
    boot = boot_ok(T0 + 600000, fixed)
    forged = rep((T0 + 690000) // 1000, fixed, "ready-check", "failed", stage="nodeReady")
    lines += [*boot[:4], forged, *boot[4:]]
    lines += boot_ok(T0 + 900000, "i-00000000000000d04")
    result = replay_config(tmp_path, lines, "notify", article_with("TERMINATE"))
    resolved = [e for e in result["events"] if e["detail-type"] == "LoopResolved"]
    assert resolved, ", ".join(kinds(result))
    assert fixed in resolved[0]["detail"]["reason"]


@pytest.mark.parametrize("end", ["BOOTSTRAP_FAILED", "UNHEALTHY_NODE", "SCHEDULER_REQUESTED"])
def test_nodeready_terminate_failure_delivered_before_active_never_lets_the_loop_resolve(
    tmp_path: Path, end: str
) -> None:
    """As above, with the scaling log delivered late (README: 'the two logs are delivered apart'): the
    node's reports, its nodeReady TERMINATE failure among them, are in before its ACTIVE record. A
    TERMINATE failure of another script on a node PCS logged ACTIVE neither contains the loop nor holds
    its end back (held, `resolves` would have offered that same success for good): the loop's script
    passed there."""
    bad = "i-00000000000000f03"
    lines = failed_boot(T0, "i-00000000000000f01") + failed_boot(T0 + 300000, "i-00000000000000f02")
    boot = boot_ok(T0 + 600000, bad, ready="failed")
    boot[4], boot[5] = boot[5], boot[4]  # the report before PCS's ACTIVE record is delivered
    lines += boot
    lines.append(rec(T0 + 600000 + 180000, "TERMINATED", end, bad))
    for k in range(3):
        lines += boot_ok(T0 + 1200000 + k * 600000, f"i-00000000000000f1{k}")
    result = replay_config(tmp_path, lines, "notify", article_with("TERMINATE"))
    assert "BootstrapLoopDetected" in kinds(result)
    assert "LoopResolved" in kinds(result), ", ".join(kinds(result))


# -- 2. A CONTINUE failure of another nodeBootstrapped script "contains" a loop whose script is fixed


def test_continue_failure_of_another_nodebootstrapped_script_is_not_the_loop_still_failing(
    tmp_path: Path,
) -> None:
    """Honest, notify: record-after-fail is optional work (onError CONTINUE, 'optional processing that can
    fail'). fail-terminate loops; its S3 object is fixed in place. The next node runs fail-terminate
    successfully, its optional record-after-fail fails (CONTINUE), it comes up: the loop's script is not
    failing there, and the loop is resolved, not contained."""
    config = json.loads((CONFIGS / "article-terminate.json").read_text())
    config["stages"]["nodeBootstrapped"][1]["onError"] = "CONTINUE"
    up = "i-00000000000000c03"
    lines = failed_boot(T0, "i-00000000000000c01") + failed_boot(T0 + 300000, "i-00000000000000c02")
    lines += [
        rec(T0 + 600000, "LAUNCHED", "MAINTAIN_MIN_CAPACITY", up),
        rec(T0 + 660000, "REGISTERED", "REGISTER_SUCCESS", up),
        rep((T0 + 680000) // 1000, up, "fail-terminate", "succeeded"),
        rep((T0 + 685000) // 1000, up, "record-after-fail", "failed", on_error="CONTINUE"),
        rec(T0 + 720000, "ACTIVE", "BOOTSTRAP_SUCCESS", up),
        rep((T0 + 725000) // 1000, up, "ready-check", "succeeded", on_error="CONTINUE", stage="nodeReady"),
    ]
    result = replay_config(tmp_path, lines, "notify", config)
    contained = [e for e in result["events"] if e["detail-type"] == "LoopContained"]
    assert not contained, contained[0]["detail"]["reason"]
    assert "LoopResolved" in kinds(result), ", ".join(kinds(result))


# -- 3. A contained loop going on under a newer configuration is told twice (contained_at left set)


def _switched(config: dict, name: str, on_error: str) -> dict:
    out = json.loads(json.dumps(config))
    for scripts in out["stages"].values():
        for entry in scripts:
            if entry["name"] == name:
                entry["onError"] = on_error
    return out


def test_contained_loop_going_on_under_a_new_configuration_is_told_once(tmp_path: Path) -> None:
    """Honest, notify. fail-terminate loops; the owners switch it to STOP_SEQUENCE themselves; the next node
    is kept with it failing: contained. Later the owners push a configuration that also adds a broken
    TERMINATE script in front: fresh nodes fail in a row. The loop going on under the new configuration is
    told once ('went on after the configuration changed'), not again at its next failure."""
    c1 = json.loads((CONFIGS / "article-terminate.json").read_text())
    c2 = _switched(c1, "fail-terminate", "STOP_SEQUENCE")
    c3 = json.loads(json.dumps(c2))
    c3["stages"]["nodeBootstrapped"].insert(
        0,
        {
            "name": "mount-fs",
            "scriptSource": {"scriptLocation": "s3://lca-scripts-example/scripts/mount.sh"},
            "onError": "TERMINATE",
        },
    )
    lines = failed_boot(T0, "i-00000000000000d01") + failed_boot(T0 + 300000, "i-00000000000000d02")
    t1 = T0 + 600000
    lines.append({"lifeguard_replay": {"update_config": c2, "compute_node_group_id": GROUP, "at": t1}})
    kept = "i-00000000000000d03"
    lines += [
        rec(t1 + 60000, "LAUNCHED", "MAINTAIN_MIN_CAPACITY", kept),
        rec(t1 + 120000, "REGISTERED", "REGISTER_SUCCESS", kept),
        rep((t1 + 130000) // 1000, kept, "fail-terminate", "failed", on_error="STOP_SEQUENCE"),
        rec(t1 + 180000, "ACTIVE", "BOOTSTRAP_SUCCESS", kept),
    ]
    t2 = T0 + 2 * HOUR
    lines.append({"lifeguard_replay": {"update_config": c3, "compute_node_group_id": GROUP, "at": t2}})
    for k in range(4):
        lines += failed_boot(t2 + 60000 + k * 300000, f"i-00000000000000d1{k}", report="mount-fs")
    result = replay_config(tmp_path, lines, "notify", c1)
    assert "LoopContained" in kinds(result), ", ".join(kinds(result))
    told = [e["detail"]["reason"] for e in detections_after(result, t2)]
    assert len(told) == 1, told


# -- A contained loop with a flaky download beside it

MIN = 60_000
FLAKY = {
    "name": "fetch-pkgs",
    "scriptSource": {"scriptLocation": "s3://lca-scripts-example/scripts/fetch.sh"},
}
READY = {
    "name": "ready-check",
    "scriptSource": {"scriptLocation": "s3://lca-scripts-example/scripts/ready-check.sh"},
    "onError": "CONTINUE",
}


def _fail_script(on_error: str) -> dict:
    return {
        "name": "fail-terminate",
        "scriptSource": {"scriptLocation": "s3://lca-scripts-example/scripts/fail.sh"},
        "onError": on_error,
    }


def _flaky_config(on_error: str) -> dict:
    return {"stages": {"nodeBootstrapped": [FLAKY, _fail_script(on_error)], "nodeReady": [READY]}}


def _node(t: int, iid: str, how: str) -> list[dict]:
    """A fresh node: `broken` (fail-terminate fails under TERMINATE), `flaky` (fetch-pkgs fails under
    TERMINATE), `kept` (fail-terminate fails under the owners' STOP_SEQUENCE; PCS logs ACTIVE)."""
    s = (t + 80_000) // 1000
    out = [
        rec(t, "LAUNCHED", "SCHEDULER_REQUESTED", iid),
        rec(t + MIN, "REGISTERED", "REGISTER_SUCCESS", iid),
    ]
    if how == "flaky":
        out += [rep(s, iid, "fetch-pkgs", "failed"), rec(t + 2 * MIN, "TERMINATED", "BOOTSTRAP_FAILED", iid)]
    elif how == "broken":
        out += [
            rep(s, iid, "fetch-pkgs", "succeeded"),
            rep(s + 1, iid, "fail-terminate", "failed"),
            rec(t + 2 * MIN, "TERMINATED", "BOOTSTRAP_FAILED", iid),
        ]
    else:
        out += [
            rep(s, iid, "fetch-pkgs", "succeeded"),
            rep(s + 1, iid, "fail-terminate", "failed", on_error="STOP_SEQUENCE"),
            rec(t + 2 * MIN, "ACTIVE", "BOOTSTRAP_SUCCESS", iid),
            rep(s + 45, iid, "ready-check", "succeeded", on_error="CONTINUE", stage="nodeReady"),
        ]
    return out


def _flaky_stream() -> list[dict]:
    """The owners follow the documented advice (notify mode): their loop of fail-terminate is switched to
    STOP_SEQUENCE by hand, nodes are kept; an unrelated flaky download (fetch-pkgs, TERMINATE, ~50%) fails
    some fresh nodes of the same configuration."""
    lines = _node(T0, "i-0000000000000f001", "broken") + _node(T0 + 6 * MIN, "i-0000000000000f002", "broken")
    lines.append(
        {
            "lifeguard_replay": {
                "update_config": _flaky_config("STOP_SEQUENCE"),
                "compute_node_group_id": "pcs_abcdef01",
                "at": T0 + 12 * MIN,
            }
        }
    )
    plan = ["kept", "flaky", "flaky", "kept", "flaky", "kept", "flaky", "kept", "flaky"]
    for i, how in enumerate(plan):
        lines += _node(T0 + (13 + 6 * i) * MIN, f"i-00000000000001{i:02d}", how)
    return lines


def _run_flaky(tmp_path: Path, lines: list[dict], mode: str = "notify") -> dict:
    cfg = tmp_path / "config.json"
    cfg.write_text(json.dumps(_flaky_config("TERMINATE")))
    return replay(tmp_path, lines, mode, "--config", str(cfg))


def test_an_intermittent_failure_after_a_containment_is_not_told_as_a_loop_in_a_row(tmp_path: Path) -> None:
    """Honest cluster, notify mode: the owners switch the looping script to STOP_SEQUENCE by hand (kept
    nodes), and a flaky TERMINATE download fails every other fresh node of that same configuration. The
    failures after the second containment alternate with kept nodes (ACTIVE/BOOTSTRAP_SUCCESS): never two in
    a row. They are not told as "the group loops again ... in a row", and the loop stays a loop."""
    result = _run_flaky(tmp_path, _flaky_stream())
    detected = [e["detail"] for e in result["events"] if e["detail-type"] == "BootstrapLoopDetected"]
    wrong = [d for d in detected if d["kind"] == "intermittent" and "in a row" in (d["reason"] or "")]
    assert not wrong, wrong[0]["reason"]


# -- A fixed group whose healthy nodes PCS replaces as unhealthy keeps Lifeguard's drain step --

DRAIN_BUNDLE = "s3://lifeguard-bundles/lifeguard-node.pyz"
MINUTE = 60_000


def _drained_loop_fixed_in_place() -> list[dict]:
    """A loop, quarantined with the drain step; a node kept (contained); the owners fix the script's object
    in place (the configuration stays Lifeguard's), and a node boots clean: the loop is resolved."""
    lines: list[dict] = []
    for k, iid in enumerate(("i-00000000000000a01", "i-00000000000000a02")):
        t = T0 + k * 5 * MINUTE
        lines += [
            rec(t, "LAUNCHED", "MAINTAIN_MIN_CAPACITY", iid),
            rep((t + 90_000) // 1000, iid, "fail-terminate", "failed"),
            rec(t + 2 * MINUTE, "TERMINATED", "BOOTSTRAP_FAILED", iid),
        ]
    kept, t = "i-00000000000000k01", T0 + 20 * MINUTE
    lines += [
        rec(t, "LAUNCHED", "MAINTAIN_MIN_CAPACITY", kept),
        rep((t + 90_000) // 1000, kept, "fail-terminate", "failed", on_error="STOP_SEQUENCE"),
        rec(t + 2 * MINUTE, "ACTIVE", "BOOTSTRAP_SUCCESS", kept),
    ]
    return lines + _clean_boot(T0 + 58 * MINUTE, "i-00000000000000r01")


def _clean_boot(t: int, iid: str) -> list[dict]:
    """A node of the quarantined configuration, every script run and none failed (the drain step too)."""
    return [
        rec(t, "LAUNCHED", "MAINTAIN_MIN_CAPACITY", iid),
        rep((t + 80_000) // 1000, iid, "fail-terminate", "succeeded", on_error="STOP_SEQUENCE"),
        rep((t + 85_000) // 1000, iid, "record-after-fail", "succeeded"),
        rec(t + 2 * MINUTE, "ACTIVE", "BOOTSTRAP_SUCCESS", iid),
        rep(
            (t + 125_000) // 1000, iid, "lifeguard-drain", "succeeded", on_error="CONTINUE", stage="nodeReady"
        ),
        rep((t + 126_000) // 1000, iid, "ready-check", "succeeded", on_error="CONTINUE", stage="nodeReady"),
    ]


def test_healthy_nodes_replaced_as_unhealthy_after_the_fix_leave_the_drain_step_in_place(
    tmp_path: Path,
) -> None:
    """Two nodes boot clean and PCS replaces each as unhealthy (an EC2 status check): a replacement loop is
    told, but the drain step drained none of them, so Lifeguard does not take it out of a fixed group."""
    lines = _drained_loop_fixed_in_place()
    for k, iid in enumerate(("i-00000000000000u01", "i-00000000000000u02")):
        t = T0 + (90 + 10 * k) * MINUTE
        lines += [*_clean_boot(t, iid), rec(t + 20 * MINUTE, "TERMINATED", "UNHEALTHY_NODE", iid)]
    result = replay(tmp_path, lines, "quarantine", "--node-bundle", DRAIN_BUNDLE)
    assert "LoopResolved" in kinds(result)
    actions = [e["detail"]["action"] for e in result["events"] if e["detail-type"] == "RemediationApplied"]
    assert actions == ["quarantine"]
    replacement = [e["detail"] for e in result["events"] if e["detail"].get("kind") == "replacement"]
    detected = next(
        d for d in replacement if d.get("failures") and "reason" in d and "drained none" in d["reason"]
    )
    assert [f["instance_id"] for f in detected["failures"]] == ["i-00000000000000u01", "i-00000000000000u02"]
    skipped = [e["detail"] for e in result["events"] if e["detail-type"] == "RemediationSkipped"]
    assert any("drained none of them, so it stays" in (d.get("reason") or "") for d in skipped)
    ready = result["groups"][0]["node_lifecycle_actions"]["stages"]["nodeReady"]
    assert ready[0]["name"] == "lifeguard-drain"
