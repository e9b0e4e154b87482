"""`lifeguard simulate`: the twin of a PCS cluster, where Lifeguard's own changes decide what boots next.

Each built-in scenario runs as a user would run it (one local AWS for the module, as `bench/loop.py` and
the demo share one), and the tests check what a user would: instances burned before the loop broke, the
group's final configuration, whether a node serves at the end, that nothing was done where nothing was
due, and that the outcome is decided by the scripts, on the twin's virtual clock, the same for a seed.
"""

from __future__ import annotations

import copy
import json
import os
import subprocess
import sys
import time
from collections.abc import Iterator
from datetime import datetime
from pathlib import Path
from typing import Any

import pytest
import yaml

from lifeguard_cli.simulate import Simulator, load_scenario
from lifeguard_cli.simulate.scenario import BUILT_IN, Scenario, ScenarioError, parse_scenario

pytestmark = pytest.mark.e2e
LIFEGUARD = Path(sys.executable).parent / "lifeguard"
THRESHOLD = 2  # the stack's default Threshold


@pytest.fixture(scope="module")
def simulator() -> Iterator[Simulator]:
    with Simulator(7 * 24 * 60) as running:  # room for every run of the module on one clock
        yield running


def group(document: dict[str, Any], name: str | None = None) -> dict[str, Any]:
    groups = document["groups"]
    found: dict[str, Any] = groups[name] if name else next(iter(groups.values()))
    return found


def kinds(document: dict[str, Any]) -> list[str]:
    return [event["detail-type"] for event in document["events"]]


def lifeguards(document: dict[str, Any]) -> list[dict[str, Any]]:
    return [change for change in document["changes"] if change["by"] == "lifeguard"]


def scenario_config(name: str, group_index: int = 0) -> dict[str, Any]:
    data = yaml.safe_load((BUILT_IN / f"{name}.yaml").read_text())
    config: dict[str, Any] = data["groups"][group_index]["config"]
    return config


def test_the_article_loop_is_broken_by_a_quarantine_after_threshold_instances(simulator: Simulator) -> None:
    document = simulator.run(load_scenario("article-loop"), mode="quarantine", seed=1)
    lca = group(document, "lca-static")
    assert lca["bootstrap_failed"] == THRESHOLD
    assert kinds(document) == ["BootstrapLoopDetected", "RemediationApplied", "LoopContained"]
    [change] = document["changes"]
    assert change["by"] == "lifeguard"
    assert change["action"] == "quarantine"
    assert change["diff"] == [
        {"path": "stages.nodeBootstrapped[0].onError", "old": "TERMINATE", "new": "STOP_SEQUENCE"}
    ]
    expected = copy.deepcopy(scenario_config("article-loop"))
    expected["stages"]["nodeBootstrapped"][0]["onError"] = "STOP_SEQUENCE"
    assert lca["final_config"] == expected
    # A node active with its failing script stopped: it serves (no drain step), and its reports said so.
    assert (lca["active_at_end"], lca["serving_at_end"], lca["drained_at_end"]) == (1, 1, 0)
    assert lca["slurm_at_end"] == "idle"  # the article's STOP_SEQUENCE node: IDLE+CLOUD, taking jobs
    contained = document["events"][-1]["detail"]
    assert contained["suspect"]["script"] == "fail-terminate"
    assert contained["suspect"]["on_error"] == "STOP_SEQUENCE"
    assert lca["first_serving_minute"] == lca["first_active_minute"] < 20
    # Only the instances that never served count as waste: the two that failed, about 2.4 minutes each.
    assert 4 <= lca["instance_minutes_wasted"] <= 6
    sent = {n["channel"] for n in document["notifications"]}
    assert sent == {"sns", "slack"}


def test_every_time_is_on_the_twins_virtual_clock(simulator: Simulator) -> None:
    document = simulator.run(load_scenario("article-loop"), seed=1)
    start = datetime.fromisoformat(document["started_at"])
    assert (datetime.now(start.tzinfo) - start).total_seconds() > 3600  # the clock is not the wall's
    for event in document["events"]:
        at = (datetime.fromisoformat(event["time"]) - start).total_seconds() / 60
        assert abs(at - event["minute"]) <= 1, event["detail-type"]
    failures = document["events"][0]["detail"]["failures"]
    launched = [i["launched_minute"] for i in document["instances"]]
    for failure, minute in zip(failures, launched, strict=False):
        failed_at = (failure["event_timestamp"] / 1000 - start.timestamp()) / 60
        assert minute < failed_at < minute + 5  # the node's report times: the twin's, not the machine's


@pytest.mark.parametrize(
    ("mode", "events", "changed"),
    [
        ("notify", ["BootstrapLoopDetected", "RemediationSkipped"], False),
        ("off", [], False),
        # No configuration was ever proven good: revert falls back to quarantine.
        ("revert", ["BootstrapLoopDetected", "RemediationApplied", "LoopContained"], True),
    ],
)
def test_the_mode_decides_what_lifeguard_does_to_the_loop(
    simulator: Simulator, mode: str, events: list[str], changed: bool
) -> None:
    document = simulator.run(load_scenario("article-loop"), mode=mode, seed=1)
    lca = group(document)
    assert kinds(document) == events
    if changed:
        assert [c["action"] for c in lifeguards(document)] == ["quarantine"]
        assert lca["serving_at_end"] == 1
    else:
        assert document["changes"] == []
        assert lca["final_config"] == scenario_config("article-loop")
        assert lca["serving_at_end"] == 0
        assert lca["bootstrap_failed"] >= 10  # the loop goes on: one instance every 5-6 minutes
    if mode == "notify":
        assert document["events"][1]["detail"]["dry_run"] is True


def test_against_pcs_alone_and_parallelclusters_protected_mode(simulator: Simulator) -> None:
    scenario = load_scenario("article-loop")
    alone = simulator.run(scenario, seed=1, baseline="pcs")
    protected = simulator.run(scenario, seed=1, baseline="parallelcluster")
    assert group(alone)["bootstrap_failed"] == group(protected)["bootstrap_failed"] == THRESHOLD
    pcs = alone["baseline"]
    assert pcs["name"] == "pcs"
    assert pcs["changes"] == []
    assert group(pcs)["serving_at_end"] == 0
    assert group(pcs)["first_serving_minute"] is None
    assert group(pcs)["bootstrap_failed"] >= 10
    assert group(pcs)["instance_minutes_wasted"] > 4 * group(alone)["instance_minutes_wasted"]
    # As the article's sinfo: the node never reaches plain idle, and each failure's instance is the Reason.
    assert {change["state"] for change in pcs["slurm"]} == {"idle#", "idle%", "idle~"}
    reasons = {change["reason"] for change in pcs["slurm"] if change["state"] == "idle%"}
    failed = [i["instance_id"] for i in pcs["instances"] if i["end"] == "BOOTSTRAP_FAILED"]
    assert reasons == {f"Backing Instance Failed To Bootstrap: {instance}" for instance in failed}
    assert group(pcs)["slurm_at_end"] != "idle"
    cluster = protected["baseline"]
    assert cluster["name"] == "parallelcluster"
    assert group(cluster)["bootstrap_failed"] == 10  # then it stops launching, and fixes nothing
    assert group(cluster)["launched"] == 10
    assert group(cluster)["protected_minute"] is not None
    assert group(cluster)["serving_at_end"] == 0


@pytest.mark.parametrize(("name", "nodes"), [("article-stop-sequence", 1), ("healthy-scale-up", 4)])
def test_no_action_where_none_is_due(simulator: Simulator, name: str, nodes: int) -> None:
    document = simulator.run(load_scenario(name), seed=1)
    found = group(document)
    assert document["changes"] == []
    assert kinds(document) == []
    assert found["bootstrap_failed"] == 0
    assert found["launched"] == found["serving_at_end"] == nodes
    assert found["first_serving_minute"] is not None
    assert found["first_serving_minute"] < 3
    assert found["final_config"] == scenario_config(name)


def test_a_ready_check_that_asks_slurm_finds_the_node_registered(simulator: Simulator) -> None:
    # The article's nodeReady check: slurmd is active and Slurm shows the node. On the twin's node those
    # answer as on a registered PCS node, so the check passes even on the default onError TERMINATE.
    data = yaml.safe_load((BUILT_IN / "article-stop-sequence.yaml").read_text())
    data["scripts"]["ready-check.sh"] = (
        "#!/bin/bash\nset -euo pipefail\n"
        'test "$(systemctl is-active slurmd)" = active\n'
        'scontrol show node "$PCS_NODE_ID" | grep -q "^NodeName=$PCS_NODE_ID .*"\n'
        'scontrol show node "$PCS_NODE_ID" | grep -q "State=IDLE+CLOUD"\n'
    )
    del data["groups"][0]["config"]["stages"]["nodeReady"][0]["onError"]
    document = simulator.run(parse_scenario(data), seed=1)
    found = group(document)
    assert (found["bootstrap_failed"], found["serving_at_end"]) == (0, 1)
    assert kinds(document) == []


def test_a_group_with_no_scripts_and_a_change_that_takes_every_script_out_run_to_the_end(
    simulator: Simulator,
) -> None:
    """A configuration of no scripts is one PCS takes (an admin's way to stop a loop): its nodes ship no
    report, and the run ended at the first with "GetLogEvents failed: ResourceNotFoundException"."""
    data = yaml.safe_load((BUILT_IN / "article-loop.yaml").read_text())
    data["groups"].append({"name": "bare", "min": 1, "max": 1, "config": {"stages": {}}})
    data["changes"] = [{"at_minute": 8, "group": data["groups"][0]["name"], "config": {"stages": {}}}]
    document = simulator.run(parse_scenario(data), mode="quarantine", seed=1)
    bare = group(document, "bare")
    assert (bare["bootstrap_failed"], bare["serving_at_end"]) == (0, 1)
    emptied = group(document, data["groups"][0]["name"])
    assert emptied["final_config"] == {"stages": {}}
    assert emptied["serving_at_end"] >= 1


def test_a_node_of_quick_scripts_is_active_25_s_after_they_start_as_the_article_found(
    simulator: Simulator,
) -> None:
    # The article: the scripts start at 00:57:27, PCS logs the node ACTIVE at 00:57:52. A boot's time was
    # rounded up to the twin's 5 s quantum before those 25 s: ACTIVE came 30 s after.
    data = yaml.safe_load((BUILT_IN / "article-stop-sequence.yaml").read_text())
    document = simulator.run(parse_scenario(data), seed=1)
    [first, *_] = document["instances"]
    timings = parse_scenario(data).timings
    after = (first["active_minute"] - first["registered_minute"]) * 60  # minutes to a tenth: 6 s
    assert abs(after - (timings.scripts_start + timings.active)) <= 3, after


def test_a_script_s_date_is_the_time_its_log_is_dated_by_as_on_the_article_s_node(
    simulator: Simulator, tmp_path: Path
) -> None:
    # The article: record-boot.sh's `date -u` line (00:49:33) and its log's `@ 1792543773` marker are the
    # same instant. The twin dated the markers on its clock and a script's `date` on the machine's.
    seen = tmp_path / "seen.txt"
    log = '"$LIFEGUARD_NODE_ROOT/var/log/amazon/pcs/lifecycle/actions/nodeBootstrapped/clock.log"'
    data = yaml.safe_load((BUILT_IN / "article-stop-sequence.yaml").read_text())
    data["scripts"]["clock.sh"] = f"#!/bin/bash\nhead -1 {log} > {seen}\ndate +%s >> {seen}\n"
    source = {"scriptLocation": "s3://sim-scripts/clock.sh"}
    data["groups"][0]["config"]["stages"]["nodeBootstrapped"] = [{"name": "clock", "scriptSource": source}]
    simulator.run(parse_scenario(data), seed=1)
    start, said = seen.read_text().splitlines()
    marked = int(start.rsplit("@ ", 1)[1].rstrip("]"))
    assert abs(int(said) - marked) <= 2, (start, said)


def test_node_ready_runs_just_after_pcs_logs_the_node_active_as_the_article_found(
    simulator: Simulator, tmp_path: Path
) -> None:
    # The article: ACTIVE/BOOTSTRAP_SUCCESS at 00:57:52, its nodeReady check started at 00:57:54. The twin's
    # nodeReady ran (and its reports went out) about 25 s before its node was ACTIVE.
    seen = tmp_path / "seen.txt"
    data = yaml.safe_load((BUILT_IN / "article-stop-sequence.yaml").read_text())
    data["scripts"]["ready-check.sh"] = f"#!/bin/bash\ndate +%s.%N >> {seen}\n"
    document = simulator.run(parse_scenario({**data, "horizon_minutes": 6}), seed=1)
    [first, *_] = document["instances"]
    started = datetime.fromisoformat(document["started_at"]).timestamp()
    ran = (float(seen.read_text().splitlines()[0]) - started) / 60
    # Minutes to a tenth (6 s) on the instance: nodeReady 2 s after ACTIVE, never the 25 s before.
    assert first["active_minute"] - 0.06 <= ran <= first["active_minute"] + 0.1, (ran, first)


def test_slurm_is_not_available_in_node_bootstrapped_as_the_article_found(simulator: Simulator) -> None:
    # The article: nodeBootstrapped runs "before slurmd starts", Slurm commands "Not available" there;
    # nodeReady "after slurmd registers". A script that needs Slurm in nodeBootstrapped fails on PCS.
    data = yaml.safe_load((BUILT_IN / "article-stop-sequence.yaml").read_text())
    data["scripts"]["before-slurmd.sh"] = (
        "#!/bin/bash\n"
        'test "$(systemctl is-active slurmd)" = inactive || exit 10\n'
        'if scontrol show node "$PCS_NODE_ID"; then exit 11; fi\n'
    )
    data["scripts"]["needs-slurm.sh"] = '#!/bin/bash\nscontrol show node "$PCS_NODE_ID" | grep -q IDLE\n'
    source = {"scriptLocation": "s3://sim-scripts/before-slurmd.sh"}
    data["groups"][0]["config"]["stages"]["nodeBootstrapped"] = [
        {"name": "before-slurmd", "scriptSource": source}
    ]
    document = simulator.run(parse_scenario(data), seed=1)
    found = group(document)
    assert (found["bootstrap_failed"], found["serving_at_end"]) == (0, 1)
    source = {"scriptLocation": "s3://sim-scripts/needs-slurm.sh"}
    data["groups"][0]["config"]["stages"]["nodeBootstrapped"] = [
        {"name": "needs-slurm", "scriptSource": source}
    ]
    document = simulator.run(parse_scenario({**data, "horizon_minutes": 15}), seed=1)
    assert group(document)["bootstrap_failed"] >= 2  # fails on every node, as it would on PCS


def test_a_node_is_active_once_node_bootstrapped_is_over_while_node_ready_still_runs(
    simulator: Simulator,
) -> None:
    # The article: ACTIVE/BOOTSTRAP_SUCCESS at 00:57:52, its nodeReady check at 00:57:54; "jobs can be
    # assigned even before the script completes". A slow nodeReady script does not hold the node back.
    quick = group(
        simulator.run(
            parse_scenario(yaml.safe_load((BUILT_IN / "article-stop-sequence.yaml").read_text())), seed=1
        )
    )
    data = yaml.safe_load((BUILT_IN / "article-stop-sequence.yaml").read_text())
    data["scripts"]["ready-check.sh"] = "#!/bin/bash\nsleep 6\necho slow\n"  # longer than a boot quantum
    slow = group(simulator.run(parse_scenario(data), seed=1))
    assert slow["bootstrap_failed"] == 0
    assert (slow["first_active_minute"], slow["first_serving_minute"]) == (
        quick["first_active_minute"],
        quick["first_serving_minute"],
    )
    assert slow["first_active_minute"] is not None


def _node_ready_loop(horizon_minutes: int, **fields: Any) -> Scenario:
    """One group whose nodeBootstrapped script passes and whose nodeReady script fails under TERMINATE
    (`fields` over the scenario)."""
    data = _scenario(
        horizon_minutes=horizon_minutes,
        scripts={"ok.sh": "#!/bin/bash\necho ok\n", "fail.sh": "#!/bin/bash\nexit 1\n"},
        **fields,
    )
    fail = {"name": "ready-fail", "scriptSource": {"scriptLocation": "s3://sim-scripts/fail.sh"}}
    data["groups"][0]["config"]["stages"]["nodeReady"] = [{**fail, "onError": "TERMINATE"}]
    return parse_scenario(data)


def test_a_node_ready_script_failing_under_terminate_ends_an_active_node_and_its_loop_is_broken(
    simulator: Simulator,
) -> None:
    # PCS logs the node ACTIVE before nodeReady runs (the article), so a nodeReady script that fails under
    # TERMINATE ends a node that was ACTIVE: ACTIVE, then TERMINATED/BOOTSTRAP_FAILED, node after node.
    document = simulator.run(_node_ready_loop(30), seed=1, baseline="pcs")
    first = document["instances"][0]
    told = [line["what"] for line in document["timeline"] if first["instance_id"] in line["detail"]]
    assert told.index("ACTIVE/BOOTSTRAP_SUCCESS") < told.index("TERMINATED/BOOTSTRAP_FAILED")
    alone = document["baseline"]["groups"]["grp"]
    assert alone["serving_at_end"] == 0  # PCS alone: the loop goes on
    assert alone["first_active_minute"] is not None  # its nodes went ACTIVE ...
    assert alone["first_serving_minute"] is None  # ... and none stayed to serve: their minutes are wasted
    assert alone["instance_minutes_wasted"] > 10
    assert "BootstrapLoopDetected" in kinds(document)  # each failure counts, though its node was ACTIVE
    [change] = lifeguards(document)
    assert change["action"] == "quarantine"
    summary = group(document)
    assert summary["bootstrap_failed"] == 2
    assert summary["serving_at_end"] == 1


def test_a_node_ready_loop_left_to_go_on_stays_one_open_episode(simulator: Simulator) -> None:
    # Mode notify: nothing changes the group, so node after node goes ACTIVE and then fails its nodeReady
    # script under TERMINATE. No ACTIVE of such a node ends the loop: one episode, told once, never resolved.
    document = simulator.run(_node_ready_loop(60), mode="notify", seed=1)
    assert group(document)["bootstrap_failed"] >= 8  # the loop went on for the whole hour
    told = kinds(document)
    assert "LoopResolved" not in told
    assert told.count("BootstrapLoopDetected") == 1
    assert document["changes"] == []


def test_a_node_ready_loop_delivered_late_stays_one_open_episode(simulator: Simulator) -> None:
    # The scaling log delivered 700 s late from minute 10: a node's wait is judged in PCS's event time, so
    # a late delivery ends none of them.
    late = _node_ready_loop(60, faults=[{"kind": "log_delay", "at_minute": 10, "seconds": 700}])
    document = simulator.run(late, mode="notify", seed=1)
    told = kinds(document)
    assert "LoopResolved" not in told
    assert told.count("BootstrapLoopDetected") == 1


def test_a_capacity_shortage_is_no_loop_and_changes_no_script(simulator: Simulator) -> None:
    document = simulator.run(load_scenario("capacity-shortage"), seed=1)
    found = group(document)
    assert "BootstrapLoopDetected" not in kinds(document)
    assert document["changes"] == []
    assert found["launch_failed"] > 10
    assert found["serving_at_end"] == 2
    assert found["first_serving_minute"] > 20  # once capacity came back


def test_a_bad_change_is_reverted_to_the_configuration_a_node_proved_good(simulator: Simulator) -> None:
    document = simulator.run(load_scenario("bad-change-revert"), seed=1)
    found = group(document)
    assert [(c["by"], c.get("action")) for c in document["changes"]] == [
        ("scenario", None),
        ("lifeguard", "revert"),
    ]
    assert found["final_config"] == scenario_config("bad-change-revert")
    assert found["bootstrap_failed"] == THRESHOLD
    assert found["serving_at_end"] == 1
    assert kinds(document) == [
        "ConfigChangeReviewed",
        "BootstrapLoopDetected",
        "RemediationApplied",
        "LoopResolved",
    ]
    detected = document["events"][1]["detail"]
    assert detected["changed_by"]["arn"] == "arn:aws:iam::123456789012:user/operator"
    assert "proven good by" in document["events"][2]["detail"]["reason"]
    # The node that serves at the end booted after the revert.
    revert_minute = document["changes"][1]["at_minute"]
    last = document["instances"][-1]
    assert last["launched_minute"] > revert_minute
    assert last["end"] is None
    assert last["active_minute"] is not None


def test_a_quarantine_that_does_not_end_the_loop_is_escalated_to_revert(simulator: Simulator) -> None:
    document = simulator.run(load_scenario("quarantine-escalation"), seed=1)
    found = group(document)
    assert [c.get("action") for c in lifeguards(document)] == ["quarantine", "revert"]
    assert found["final_config"] == scenario_config("quarantine-escalation")
    assert found["serving_at_end"] == 1
    assert kinds(document)[-1] == "LoopResolved"


def _record_boot(*extra: dict[str, Any]) -> dict[str, Any]:
    record = {
        "name": "record-boot",
        "scriptSource": {"scriptLocation": "s3://sim-scripts/record-boot.sh"},
        "arguments": ["every-boot"],
    }
    return {"stages": {"nodeBootstrapped": [*extra, record]}}


def _mount(name: str) -> dict[str, Any]:
    return {"name": name, "scriptSource": {"scriptLocation": f"s3://sim-scripts/{name}.sh"}}


def test_a_second_bad_change_within_the_cooldown_is_reverted_once_the_cooldown_is_over(
    simulator: Simulator, tmp_path: Path
) -> None:
    """A second broken change 12 minutes after Lifeguard reverted the first: the cooldown held the revert
    back, and the skip was the loop's decision for good (27 instances burned in 180 minutes, no node). The
    loop's first failure after the cooldown has it decided again: reverted then."""
    scenario = {
        "name": "second bad change within the cooldown",
        "horizon_minutes": 120,
        "scripts": {
            "record-boot.sh": '#!/bin/bash\necho "$1" >> "$HOME/lca-boot-record.log"\n',
            "mount-fsx.sh": "#!/bin/bash\necho 'mount failed'\nexit 32\n",
            "mount-efs.sh": "#!/bin/bash\necho 'efs mount failed'\nexit 32\n",
        },
        "groups": [
            {
                "name": "lca-static",
                "min": 1,
                "max": 1,
                "tags": {"lifeguard:mode": "revert"},
                "config": _record_boot(),
            }
        ],
        "changes": [
            {"at_minute": 15, "group": "lca-static", "config": _record_boot(_mount("mount-fsx"))},
            {"at_minute": 40, "group": "lca-static", "config": _record_boot(_mount("mount-efs"))},
        ],
    }
    path = tmp_path / "second-bad-change.yaml"
    path.write_text(yaml.safe_dump(scenario))
    document = simulator.run(load_scenario(path), seed=1)
    found = group(document)
    first, second = lifeguards(document)
    assert (first["action"], second["action"]) == ("revert", "revert")
    assert 40 < first["at_minute"] + 30 <= second["at_minute"] < first["at_minute"] + 40
    [held] = [e["detail"] for e in document["events"] if e["detail-type"] == "RemediationSkipped"]
    assert held["reason"].startswith("Cooldown: Lifeguard changed this group")
    assert "Lifeguard decides again at the loop's first failure after" in held["reason"]
    again = [
        e["detail"]
        for e in document["events"]
        if e["detail-type"] == "BootstrapLoopDetected" and e["detail"]["episode_id"] == held["episode_id"]
    ]
    assert [d["revision"] for d in again] == [1, 2]
    assert again[1]["reason"].startswith("the loop went on after the hold on Lifeguard's change ended at")
    assert found["final_config"] == _record_boot()
    assert found["serving_at_end"] == 1
    assert found["bootstrap_failed"] <= 8


def test_an_intermittent_script_is_quarantined_and_every_node_serves(simulator: Simulator) -> None:
    document = simulator.run(load_scenario("intermittent"), seed=1)
    found = group(document)
    assert [c.get("action") for c in lifeguards(document)] == ["quarantine"]
    assert found["serving_at_end"] == 4
    assert found["final_config"]["stages"]["nodeBootstrapped"][0]["onError"] == "STOP_SEQUENCE"


def test_the_same_seed_gives_the_same_run_and_the_seed_reaches_the_scripts(simulator: Simulator) -> None:
    scenario = load_scenario("intermittent")
    runs = [simulator.run(scenario, seed=seed) for seed in (1, 1, 3)]

    def outcome(document: dict[str, Any]) -> Any:
        summary = {k: v for k, v in group(document).items() if k != "compute_node_group_id"}
        ends = [(i["node"], i["end"], i["launched_minute"]) for i in document["instances"]]
        return summary, ends, [(c["at_minute"], c["diff"]) for c in document["changes"]], kinds(document)

    assert outcome(runs[0]) == outcome(runs[1])
    # Another seed fails other boots: which instances failed differs.
    assert [i["end"] for i in runs[0]["instances"]] != [i["end"] for i in runs[2]["instances"]]


def _scenario(**fields: Any) -> dict[str, Any]:
    """One group of one node whose script `ok.sh` succeeds, with `fields` over it."""
    config = {
        "stages": {
            "nodeBootstrapped": [{"name": "ok", "scriptSource": {"scriptLocation": "s3://sim-scripts/ok.sh"}}]
        }
    }
    return {
        "name": "one node",
        "horizon_minutes": 12,
        "scripts": {"ok.sh": "#!/bin/bash\necho ok\n"},
        "groups": [{"name": "grp", "min": 1, "config": config}],
        **fields,
    }


def test_a_node_put_in_pending_replacement_while_it_booted_never_serves(simulator: Simulator) -> None:
    """An update at minute 1.5, after the node registered (1.3) and before it would be ACTIVE (2.2): PCS puts
    it in PENDING_REPLACEMENT (no more jobs) and replaces it. It never goes ACTIVE, never served, and its
    minutes are wasted; the first serving node is its replacement. The baseline (no Lifeguard, no
    CloudTrail) launches the very same instances, Lifeguard having changed nothing."""
    changed = copy.deepcopy(_scenario()["groups"][0]["config"])
    changed["stages"]["nodeBootstrapped"][0]["arguments"] = ["v2"]
    scenario = parse_scenario(_scenario(changes=[{"at_minute": 1.5, "group": "grp", "config": changed}]))
    document = simulator.run(scenario, seed=1, baseline="pcs")
    first, replacement = document["instances"]
    assert first["end"] == "REPLACEMENT_REQUESTED"
    assert first["active_minute"] is None
    booted = [line["what"] for line in document["timeline"] if first["instance_id"] in line["detail"]]
    assert "PENDING_REPLACEMENT/NODE_GROUP_UPDATE" in booted
    assert "ACTIVE/BOOTSTRAP_SUCCESS" not in booted
    summary = group(document)
    assert summary["first_serving_minute"] == replacement["active_minute"] > first["ended_minute"]
    assert summary["instance_minutes_wasted"] == pytest.approx(
        first["ended_minute"] - first["launched_minute"]
    )
    assert not lifeguards(document)
    theirs = document["baseline"]["instances"]
    assert [i["instance_id"] for i in theirs] == [first["instance_id"], replacement["instance_id"]]


def test_a_run_past_its_budget_of_boots_is_refused_with_what_to_change(
    simulator: Simulator, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Each boot is a real process run one after another: a loop turning every few seconds over a day of
    200 nodes would run for hours. A run stops at its budget with one error naming what to change."""
    from lifeguard_cli.simulate import twin

    monkeypatch.setattr(twin, "MAX_BOOTS", 6)
    scenario = _scenario(
        horizon_minutes=1440,
        timings={"register": 0, "scripts_start": 0, "fail_to_terminated": 0, "relaunch": 1},
        scripts={"ok.sh": "#!/bin/bash\nexit 1\n"},
    )
    scenario["groups"][0]["tags"] = {"lifeguard:mode": "off"}
    with pytest.raises(ScenarioError) as raised:
        simulator.run(parse_scenario(scenario), seed=1)
    assert str(raised.value).startswith("one node: the lifeguard run took 6 node boots by minute ")
    assert "give horizon_minutes fewer minutes" in str(raised.value)


def test_a_run_past_its_real_time_is_refused_though_it_boots_no_node(
    simulator: Simulator, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A day of launches failing for capacity boots nothing, yet each failure is a record delivered and
    judged: a run of 200 nodes retrying every second took hours. The run has a budget of real time too."""
    from lifeguard_cli.simulate import twin

    monkeypatch.setattr(twin, "MAX_RUN_SECONDS", 2.0)
    scenario = _scenario(
        horizon_minutes=1440,
        timings={"capacity_retry": 1},
        faults=[{"kind": "insufficient_capacity", "group": "grp", "at_minute": 0}],
    )
    scenario["groups"][0]["min"] = 50
    began = time.monotonic()
    with pytest.raises(ScenarioError) as raised:
        simulator.run(parse_scenario(scenario), seed=1)
    assert time.monotonic() - began < 30
    assert str(raised.value).startswith("one node: the lifeguard run took over 2 s of real time by minute ")
    assert "give horizon_minutes fewer minutes" in str(raised.value)


def test_a_run_of_hanging_scripts_shows_progress_and_says_the_scripts_hang(
    simulator: Simulator, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Boots whose script hangs each run to the script's limit, one after another, in the same virtual
    minute: no progress was told (it was, once a virtual minute), and the budget's error advised fewer
    minutes or nodes, which could not help. Progress is told at every step, and the error names the
    boots that ran a script into its limit."""
    from lifeguard_cli.simulate import twin

    monkeypatch.setattr(twin, "SCRIPT_TIMEOUT_SECONDS", 1)
    monkeypatch.setattr(twin, "MAX_BOOT_SECONDS", 2.5)
    scenario = _scenario(horizon_minutes=30, scripts={"ok.sh": "#!/bin/bash\nsleep 30\n"})
    scenario["groups"][0]["min"] = 5
    scenario["groups"][0]["tags"] = {"lifeguard:mode": "off"}
    told: list[float] = []
    with pytest.raises(ScenarioError) as raised:
        simulator.run(parse_scenario(scenario), seed=1, progress=lambda run, fraction: told.append(fraction))
    said = str(raised.value)
    assert "s of real time in its nodes' scripts by minute 1.7" in said
    assert said.endswith(
        "boots ran a script into its 1 s limit (exit 124, in their logs): a script that hangs"
    )
    assert "horizon_minutes" not in said
    assert len(told) >= 3  # a step at a time, within the same virtual minute


def test_slow_scripts_under_their_limit_are_not_said_to_hang(
    simulator: Simulator, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Boots of two scripts under the limit each, over it together: they were counted as scripts run into
    their limit (the boot's time was), and the error said the scripts hang where none did."""
    from lifeguard_cli.simulate import twin

    monkeypatch.setattr(twin, "SCRIPT_TIMEOUT_SECONDS", 2)
    monkeypatch.setattr(twin, "MAX_BOOT_SECONDS", 5)
    scenario = _scenario(horizon_minutes=30, scripts={"ok.sh": "#!/bin/bash\nsleep 1.2\n"})
    step = {"name": "ok", "scriptSource": {"scriptLocation": "s3://sim-scripts/ok.sh"}}
    scenario["groups"][0]["config"]["stages"]["nodeBootstrapped"] = [step, {**step, "name": "ok2"}]
    scenario["groups"][0]["min"] = 5
    scenario["groups"][0]["tags"] = {"lifeguard:mode": "off"}
    with pytest.raises(ScenarioError) as raised:
        simulator.run(parse_scenario(scenario), seed=1)
    assert "a script that hangs" not in str(raised.value)
    assert str(raised.value).endswith(
        "give horizon_minutes fewer minutes, the groups fewer nodes, or timings a longer cycle"
    )


def test_a_script_at_an_https_url_is_not_fetched_from_the_network_and_is_said(simulator: Simulator) -> None:
    """A configuration of the console's "HTTPS URL" kind: the twin's nodes fetched it over the network
    (a DNS lookup here, a download and a run of a script of the internet on this machine elsewhere), and
    nothing said so. The fetch is refused on this machine, at once, and said before the run."""
    location = "https://scripts.example.com/setup.sh"
    scenario = _scenario(horizon_minutes=15)
    scenario["groups"][0]["config"]["stages"]["nodeBootstrapped"][0]["scriptSource"]["scriptLocation"] = (
        location
    )
    scenario["groups"][0]["tags"] = {"lifeguard:mode": "notify"}
    parsed = parse_scenario(scenario)
    assert parsed.unknown_scripts() == [
        f"groups[0] (grp): nodeBootstrapped › ok names {location}: the twin fetches nothing from the "
        "network, so its nodes fail to fetch it (give the script in scripts: and name it s3://sim-scripts/<file>)"
    ]
    document = simulator.run(parsed, seed=1)
    assert document["instances"][0]["end"] == "BOOTSTRAP_FAILED"
    detected = next(e for e in document["events"] if e["detail-type"] == "BootstrapLoopDetected")
    # Refused by the nodes' proxy on loopback, not looked up: no name of the URL's host was resolved.
    assert detected["detail"]["suspect"]["log_tail"].endswith("[Errno 111] Connection refused")


def test_a_drained_quarantined_node_replaced_by_pcs_gets_its_drain_step_taken_out_once(
    simulator: Simulator,
) -> None:
    document = simulator.run(load_scenario("quarantine-drain-replaced"), seed=1)
    found = group(document)
    first, second = lifeguards(document)
    assert first["action"] == "quarantine"
    assert any(
        d["path"] == "stages.nodeReady[0]" and d["new"]["name"] == "lifeguard-drain" for d in first["diff"]
    )
    assert second["action"] == "undrain"
    assert [d["path"] for d in second["diff"]] == ["stages.nodeReady[0]"]
    assert found["unhealthy"] == THRESHOLD  # the replacement loop was broken at the threshold
    ends = [i["end"] for i in document["instances"] if i["launched_minute"] > second["at_minute"]]
    assert "UNHEALTHY_NODE" not in ends
    assert found["serving_at_end"] == 1
    # Drained nodes were active, never serving: active and serving differ until the drain step is gone.
    drained = [i for i in document["instances"] if i["drained_minute"] is not None]
    assert len(drained) == THRESHOLD
    # Their drain step runs in nodeReady, seconds after PCS logged them ACTIVE: still none of them served.
    assert all(i["active_minute"] is not None for i in drained)
    assert found["first_serving_minute"] > second["at_minute"]
    assert "drain" in {change["state"] for change in document["slurm"]}
    assert found["slurm_at_end"] == "idle"
    assert (
        found["final_config"]["stages"]["nodeReady"]
        == scenario_config("quarantine-drain-replaced")["stages"]["nodeReady"]
    )


def test_a_wave_of_50_nodes_hit_by_a_bad_change_all_come_up_after_lifeguards_change(
    simulator: Simulator,
) -> None:
    document = simulator.run(load_scenario("wave-50"), seed=1)
    found = group(document)
    [change] = lifeguards(document)
    assert change["action"] == "quarantine"
    after = [i for i in document["instances"] if i["launched_minute"] > change["at_minute"]]
    assert len(after) >= 50
    assert all(i["end"] != "BOOTSTRAP_FAILED" for i in after)
    assert found["serving_at_end"] == 50
    assert found["bootstrap_failed"] == 50  # the fifty launched on the bad change, none after the break


# -- faults, end to end: the loop is broken with exactly one change, and the failure is visible --

FAULTS: dict[str, tuple[dict[str, Any], str]] = {
    "pcs throttling": (
        {"kind": "pcs_throttle", "times": 2, "retry_after_seconds": 7, "operation": "UpdateComputeNodeGroup"},
        "PcsRetries",
    ),
    "pcs 500s": ({"kind": "pcs_error", "times": 2, "operation": "UpdateComputeNodeGroup"}, "PcsRetries"),
    "pcs conflict": ({"kind": "pcs_conflict", "operation": "UpdateComputeNodeGroup"}, "PcsRetries"),
    # Five errors exhaust one call's SDK retries: the function fails, and Lambda retries it.
    "dynamodb errors": ({"kind": "dynamodb_error", "times": 5}, "invocations"),
    # Five fail one PutEvents; the publisher tries again (and says so), and the events go out.
    "eventbridge errors": ({"kind": "eventbridge_error", "times": 5}, "PublishRetries"),
    "slack 500s": ({"kind": "slack_error", "times": 8, "status": 500}, "NotificationFailures"),
    "slack 429": (
        {"kind": "slack_error", "times": 2, "status": 429, "retry_after_seconds": 1},
        "SlackRetries",
    ),
    # A post unanswered in time may have been posted: not posted again at once, but by Lambda's retry.
    "slack timeout": ({"kind": "slack_timeout"}, "NotificationFailures"),
    "remediate dies": ({"kind": "remediate_dies"}, "ChangesReconciled"),
    "late logs": ({"kind": "log_delay", "until_minute": 20, "seconds": 240}, "late"),
    "duplicated logs": ({"kind": "log_duplicate", "until_minute": 25}, "duplicates"),
    "reordered logs": ({"kind": "log_reorder", "at_minute": 1, "until_minute": 9}, "late"),
}


@pytest.mark.parametrize("name", list(FAULTS))
def test_under_a_fault_the_loop_is_broken_with_exactly_one_change_and_the_failure_shows(
    simulator: Simulator, name: str
) -> None:
    fault, shows = FAULTS[name]
    data = yaml.safe_load((BUILT_IN / "article-loop.yaml").read_text())
    data["faults"] = [{"at_minute": 6, **fault}]
    data["horizon_minutes"] = 25  # the loop breaks by minute 8, the next node is up by 17 (logs late)
    document = simulator.run(parse_scenario(data, BUILT_IN / "article-loop.yaml"), seed=1)
    lca = group(document)
    assert [c.get("action") for c in lifeguards(document)] == ["quarantine"], name
    assert lca["serving_at_end"] == 1, name
    assert lca["bootstrap_failed"] == THRESHOLD, name  # instances burned before the break
    assert lca["final_config"]["stages"]["nodeBootstrapped"][0]["onError"] == "STOP_SEQUENCE"
    assert kinds(document).count("RemediationApplied") == 1, name
    applied = [entry for entry in document["audit"]["lca-static"] if entry["decision"] == "applied"]
    assert [entry["action"] for entry in applied] == ["quarantine"], name  # Lifeguard's own record agrees
    assert [f["kind"] for f in document["faults"]] == [fault["kind"]]
    metrics, invocations = document["metrics"], document["invocations"]
    if shows == "invocations":
        assert invocations["failed"] >= 1
        assert invocations["retried"] == invocations["failed"]
        assert invocations["parked"] == 0
        assert any("failed, retried" in t["what"] for t in document["timeline"])
    elif shows == "late":
        assert lca["bootstrap_failed"] == THRESHOLD
        assert "LoopResolved" not in kinds(document)  # a STOP_SEQUENCE node's success proves nothing
        assert kinds(document)[-1] == "LoopContained"
    elif shows == "duplicates":
        assert metrics["RecordsProcessed"] >= 2 * lca["launched"]
        assert kinds(document) == ["BootstrapLoopDetected", "RemediationApplied", "LoopContained"]
    else:
        assert metrics.get(shows, 0) >= 1, metrics
    # Every event reached Slack in the end, whatever failed on the way.
    assert sum(1 for n in document["notifications"] if n["channel"] == "slack") == len(document["events"])
    if shows == "ChangesReconciled":
        assert invocations == {"failed": 1, "retried": 1, "parked": 0}


# -- the command line --


def simulate_cli(*args: str, columns: int = 80) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [str(LIFEGUARD), "simulate", *args],
        capture_output=True,
        text=True,
        timeout=600,
        check=False,
        env={**os.environ, "COLUMNS": str(columns)},
    )


def test_the_built_in_scenarios_are_listed_as_a_table_that_fits_or_as_json() -> None:
    names = sorted(path.stem for path in BUILT_IN.glob("*.yaml"))
    listed = simulate_cli("--list", "--json")
    assert listed.returncode == 0, listed.stderr
    scenarios = json.loads(listed.stdout)["scenarios"]
    assert [entry["scenario"] for entry in scenarios] == names
    assert next(e for e in scenarios if e["scenario"] == "article-loop")["name"] == "article TERMINATE loop"
    table = simulate_cli("--list", columns=60)
    assert table.returncode == 0, table.stderr
    assert max(len(line) for line in table.stdout.splitlines()) <= 60
    assert all(name in table.stdout for name in names)


def test_a_script_the_scenario_does_not_hold_is_noted_before_the_run(tmp_path: Path) -> None:
    data = yaml.safe_load((BUILT_IN / "article-loop.yaml").read_text())
    data["horizon_minutes"] = 2
    source = data["groups"][0]["config"]["stages"]["nodeBootstrapped"][0]["scriptSource"]
    source["scriptLocation"] = "s3://sim-scripts/fial.sh"
    scenario = tmp_path / "typo.yaml"
    scenario.write_text(yaml.safe_dump(data))
    done = simulate_cli(str(scenario), "--json")
    assert done.returncode == 0, done.stderr
    assert done.stderr.startswith(
        "lifeguard simulate: note: groups[0] (lca-static): nodeBootstrapped › fail-terminate names "
        "s3://sim-scripts/fial.sh, which is not among the scenario's scripts"
    )
    json.loads(done.stdout)  # the document alone on stdout


def test_the_json_document_holds_the_contract_and_the_baseline() -> None:
    done = simulate_cli("article-loop", "--json", "--baseline", "pcs", "--seed", "3")
    assert done.returncode == 0, done.stderr
    assert "Traceback" not in done.stderr
    assert "simulating article TERMINATE loop" in done.stderr  # progress, apart from the document
    assert "note:" not in done.stderr  # every script it names is among its own
    document = json.loads(done.stdout)
    assert (document["scenario"], document["mode"], document["seed"]) == (
        "article TERMINATE loop",
        "quarantine",
        3,
    )
    contract = {
        "launched",
        "bootstrap_failed",
        "active_at_end",
        "drained_at_end",
        "serving_at_end",
        "first_active_minute",
        "first_serving_minute",
        "final_config",
        "instance_minutes_wasted",
    }
    assert contract <= set(document["groups"]["lca-static"])
    assert contract <= set(document["baseline"]["groups"]["lca-static"])
    assert {"events", "notifications", "changes"} <= set(document)
    assert {"detail-type", "source", "detail"} <= set(document["events"][0])
    assert document["events"][0]["source"] == "lifeguard"
    assert {"at_minute", "group", "by", "diff"} <= set(document["changes"][0])
    sent = {n["channel"]: n for n in document["notifications"]}
    assert {"channel", "subject", "message", "attributes"} <= set(sent["sns"])
    assert {"channel", "text", "message"} <= set(sent["slack"])
    assert sent["slack"]["message"]["blocks"]


def test_for_people_the_timeline_the_diff_the_slack_message_and_the_table() -> None:
    done = simulate_cli("article-loop", "--baseline", "pcs", columns=120)
    assert done.returncode == 0, done.stderr
    out = done.stdout
    assert "TERMINATED/BOOTSTRAP_FAILED" in out
    assert "stages.nodeBootstrapped[0].onError: TERMINATE → STOP_SEQUENCE" in out
    assert "Slack: the message of Lifeguard's last change (" in out
    assert "Slurm state at the end (sinfo)" in out
    # Its undo line cannot run once the simulation's local AWS is gone: said so under the message.
    assert "lifeguard undo " in out
    assert "that undo is for the simulation's own local AWS, gone with it" in " ".join(out.split())
    assert "instances burned (BOOTSTRAP_FAILED)" in out
    assert "PCS alone" in out


def test_a_bad_scenario_is_one_line_naming_the_key_and_exit_2(tmp_path: Path) -> None:
    data = yaml.safe_load((BUILT_IN / "article-loop.yaml").read_text())
    data["groups"][0]["min"] = 101
    bad = tmp_path / "bad.yaml"
    bad.write_text(yaml.safe_dump(data))
    done = simulate_cli(str(bad))
    assert done.returncode == 2
    assert done.stderr.strip().splitlines() == [
        f"lifeguard simulate: {bad}: groups[0].min: 101 is out of range: from 0 to 100"
    ]
    missing = simulate_cli("no-such-scenario")
    assert missing.returncode == 2
    assert "no such file, nor a built-in scenario (article-loop" in missing.stderr
    refused = tmp_path / "refused.json"
    data["groups"][0]["min"] = 1
    data["groups"][0]["config"]["stages"]["nodeBootstrapped"][0]["onError"] = "EXPLODE"
    refused.write_text(json.dumps(data))
    done = simulate_cli(str(refused))
    assert done.returncode == 2
    assert done.stderr.strip().splitlines() == [
        f"lifeguard simulate: {refused}: groups[0].config.stages.nodeBootstrapped[0].onError: 'EXPLODE' is "
        "not one of TERMINATE, STOP_SEQUENCE, CONTINUE"
    ]
    assert "Traceback" not in done.stderr


def test_the_demo_runs_the_twin_on_every_one_group_scenario_against_pcs_alone() -> None:
    done = subprocess.run(
        [str(LIFEGUARD), "demo", "--json"], capture_output=True, text=True, timeout=600, check=False
    )
    assert done.returncode == 0, done.stderr
    names = sorted(p.stem for p in BUILT_IN.glob("*.yaml") if p.stem != "wave-50")
    assert f"[{len(names)}/{len(names)}]" in done.stderr  # progress, apart from the document
    # Said as the local AWS starts and as each scenario begins, not only when one is done (8 s of nothing).
    said = done.stderr.splitlines()
    assert said[0] == f"{len(names)} scenarios on the twin; starting the local AWS…"
    assert said[1] == f"[1/{len(names)}] article TERMINATE loop…"
    assert said[2].startswith(f"[1/{len(names)}] article TERMINATE loop: done (")
    documents = {d["scenario"]: d for d in json.loads(done.stdout)["scenarios"]}
    assert len(documents) == len(names)
    assert all(d["baseline"]["name"] == "pcs" for d in documents.values())
    loop = documents["article TERMINATE loop"]
    assert group(loop)["bootstrap_failed"] == THRESHOLD
    assert group(loop["baseline"])["bootstrap_failed"] >= 10
    assert [c["action"] for c in lifeguards(documents["quarantine escalated to revert"])] == [
        "quarantine",
        "revert",
    ]
    assert lifeguards(documents["healthy scale-up"]) == []


def test_the_html_report_is_written_from_the_run(tmp_path: Path) -> None:
    report = tmp_path / "report.html"
    done = simulate_cli("article-loop", "--baseline", "parallelcluster", "--html", str(report), "--json")
    assert done.returncode == 0, done.stderr
    page = report.read_text()
    document = json.loads(done.stdout)
    assert "article TERMINATE loop" in page
    assert "ParallelCluster protected mode" in page
    assert f"{group(document)['instance_minutes_wasted']:g}" in page
    assert page.count("<svg") >= 2  # the lanes of Lifeguard's run and of the baseline's
    unwritable = simulate_cli("article-loop", "--html", str(tmp_path / "missing" / "r.html"))
    assert unwritable.returncode == 2
    assert "is not a directory one can write to" in unwritable.stderr


def test_ctrl_c_stops_a_simulation_in_one_line_with_no_traceback() -> None:
    """Ctrl-C reaches the whole process group, the node host the twin boots its nodes in included."""
    import signal

    running = subprocess.Popen(
        [str(LIFEGUARD), "simulate", "wave-50"],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        start_new_session=True,
        env={**os.environ, "COLUMNS": "80"},
    )
    time.sleep(4)  # the twin is up, its node host booting nodes
    os.killpg(running.pid, signal.SIGINT)
    _, err = running.communicate(timeout=60)
    assert running.returncode == 130
    assert "Traceback" not in err


def test_sigterm_stops_a_simulation_as_ctrl_c_does_its_files_let_go(tmp_path: Path) -> None:
    """SIGTERM (`timeout`, a CI job cancelled, `kill`) ended the process on the spot: its scratch
    directory, the nodes' roots and logs, stayed in the temporary directory. It unwinds as Ctrl-C does."""
    import signal

    running = subprocess.Popen(
        [str(LIFEGUARD), "simulate", "wave-50"],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env={**os.environ, "COLUMNS": "80", "TMPDIR": str(tmp_path)},
    )
    deadline = time.monotonic() + 60
    while not list(tmp_path.glob("lifeguard-simulate-*")) and time.monotonic() < deadline:
        time.sleep(0.2)
    time.sleep(3)  # the twin is up, its node host booting nodes
    assert list(tmp_path.glob("lifeguard-simulate-*")), "the run made no scratch directory to let go"
    running.send_signal(signal.SIGTERM)  # to the process alone, as `kill` and `timeout` send it
    _, err = running.communicate(timeout=60)
    assert running.returncode == 128 + signal.SIGTERM
    assert "Traceback" not in err
    assert list(tmp_path.glob("lifeguard-simulate-*")) == []


def test_a_node_still_booting_at_the_horizon_has_wasted_nothing_yet(simulator: Simulator) -> None:
    """Two minutes: the nodes' scripts are done, PCS has not logged them ACTIVE yet. Not one minute of
    theirs is wasted (the scenarios' README): they have neither failed nor been given the chance to serve."""
    data = yaml.safe_load((BUILT_IN / "healthy-scale-up.yaml").read_text())
    data["horizon_minutes"] = 2
    document = simulator.run(parse_scenario(data, BUILT_IN / "healthy-scale-up.yaml"), seed=1)
    found = group(document)
    assert found["launched"] > 0
    assert found["active_at_end"] == 0
    assert found["instance_minutes_wasted"] == 0
