"""`lifeguard replay` as a user runs it: the real handlers, a fresh local AWS, the recorded streams."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from lifeguard.event_contract import DETAIL_KEYS
from lifeguard_cli.cli import app
from tests.conftest import EVENTS

pytestmark = pytest.mark.integration
STREAMS = EVENTS / "streams"
runner = CliRunner()


def replay_json(*args: str) -> dict[str, Any]:
    """A replay in mode notify: detection is under test here, remediation changes nothing (tests/e2e)."""
    result = runner.invoke(app, ["replay", "--json", "--mode", "notify", *args])
    assert result.exit_code == 0, result.output
    document: dict[str, Any] = json.loads(result.stdout)
    return document


def kinds(document: dict[str, Any]) -> list[str]:
    """The detection events of a replay (remediation's dry runs follow each BootstrapLoopDetected)."""
    found = [event["detail-type"] for event in document["events"]]
    assert found.count("RemediationSkipped") == found.count("BootstrapLoopDetected")
    return [kind for kind in found if not kind.startswith("Remediation")]


def detections(document: dict[str, Any]) -> list[dict[str, Any]]:
    return [e["detail"] for e in document["events"] if e["detail-type"] == "BootstrapLoopDetected"]


def test_the_articles_terminate_loop_yields_exactly_one_detection_naming_the_group() -> None:
    document = replay_json(str(STREAMS / "article-terminate-loop.jsonl"))
    assert kinds(document) == ["BootstrapLoopDetected"]
    detail = document["events"][0]["detail"]
    assert set(DETAIL_KEYS) <= set(detail)
    assert (detail["cluster_id"], detail["compute_node_group_id"]) == ("pcs_abc123de45", "pcs_abcdef01")
    assert document["skipped_records"] == 0


def test_with_node_reports_fed_the_one_detection_names_fail_terminate() -> None:
    document = replay_json(str(STREAMS / "article-terminate-loop-with-reports.jsonl"))
    assert kinds(document) == ["BootstrapLoopDetected"]
    suspect = document["events"][0]["detail"]["suspect"]
    assert (suspect["stage"], suspect["script"], suspect["exit_code"]) == (
        "nodeBootstrapped",
        "fail-terminate",
        1,
    )
    assert suspect["instances"] == ["i-059b4b99b4f2e9739", "i-06644f6e5a2b001c9"]


def test_reports_after_the_detection_update_the_same_episode(tmp_path: Path) -> None:
    """A file's own order is the order of arrival: the node's reports delivered after the scaling log's
    failures (a shipper that caught up late) name the suspect at the episode's next revision."""
    late = tmp_path / "reports-late.jsonl"
    late.write_text(
        (STREAMS / "article-terminate-loop.jsonl").read_text()
        + (STREAMS / "article-terminate-node-reports.jsonl").read_text()
    )
    document = replay_json(str(late))
    details = detections(document)
    assert kinds(document) == ["BootstrapLoopDetected", "BootstrapLoopDetected"]
    assert details[0]["episode_id"] == details[1]["episode_id"]
    assert (details[0]["suspect"], details[1]["suspect"]["script"]) == (None, "fail-terminate")
    assert [d["revision"] for d in details] == [1, 2]


def test_files_side_by_side_replay_as_their_entries_arrived() -> None:
    """The scaling log and the node's reports of the same minutes, in two files: interleaved by time, the
    reports (shipped as each script ended) come before the failures PCS logs after them, and the detection
    names its suspect at once. Fed file after file, every report came after the last failure: the timeline
    went back in time, and the episode was told twice."""
    files = [
        str(STREAMS / "article-terminate-loop.jsonl"),
        str(STREAMS / "article-terminate-node-reports.jsonl"),
    ]
    [detail] = detections(replay_json(*files))
    assert (detail["revision"], detail["suspect"]["script"]) == (1, "fail-terminate")
    shown = runner.invoke(app, ["replay", "--mode", "notify", *files])
    assert shown.exit_code == 0, shown.output
    times = [line[:19] for line in shown.stdout.splitlines() if line[:4].isdigit()]
    assert len(times) == 16  # 8 records, 6 reported runs, the detection and the remediation's answer
    assert times == sorted(times)


def test_stdin_is_read_as_a_file_and_one_record_is_said_as_one() -> None:
    loop = (STREAMS / "article-terminate-loop.jsonl").read_text()
    piped = runner.invoke(app, ["replay", "--json", "--mode", "notify", "-"], input=loop)
    assert piped.exit_code == 0, piped.output
    assert kinds(json.loads(piped.stdout)) == ["BootstrapLoopDetected"]
    one = runner.invoke(app, ["replay", "--mode", "notify", "-"], input=loop.splitlines()[0] + "\n")
    assert one.exit_code == 0, one.output
    assert "\n1 record replayed, 0 skipped; no controller event" in one.stdout
    # Named as `lifeguard lint` names it: `<stdin>`, not `-`.
    damaged = runner.invoke(app, ["replay", "--mode", "notify", "-"], input=loop + '{"status_code": \n')
    assert damaged.exit_code == 0, damaged.output
    assert "lifeguard replay: <stdin>: skipped 1 damaged entry: line 9 (not JSON" in damaged.stderr
    empty = runner.invoke(app, ["replay", "-"], input="")
    assert (empty.exit_code, empty.stderr.startswith("lifeguard replay: <stdin>: empty")) == (2, True)


def test_the_same_stream_three_times_yields_the_same_single_event() -> None:
    loop = str(STREAMS / "article-terminate-loop.jsonl")
    assert kinds(replay_json(loop, loop, loop)) == ["BootstrapLoopDetected"]


def test_a_subscription_event_as_sam_local_invoke_takes_it(tmp_path: Path) -> None:
    """Each file one event as `sam local invoke -e` takes it, or one line each of a file, in its order."""
    loop, reports = (
        EVENTS / "subscriptions" / name
        for name in ("article-terminate-loop.json", "article-node-reports.json")
    )
    lines = tmp_path / "events.jsonl"
    lines.write_text("".join(json.dumps(json.loads(path.read_text())) + "\n" for path in (loop, reports)))
    document = replay_json(str(lines))
    assert kinds(document) == ["BootstrapLoopDetected", "BootstrapLoopDetected"]
    assert detections(document)[1]["suspect"]["instances"] == ["i-059b4b99b4f2e9739"]
    [detail] = detections(replay_json(str(loop), str(reports)))  # as they arrived: the reports first
    assert detail["suspect"]["instances"] == ["i-059b4b99b4f2e9739"]


@pytest.mark.parametrize(
    ("name", "expected"),
    [
        ("article-terminate-revert", ["BootstrapLoopDetected", "LoopResolved"]),
        ("article-stop-sequence", []),
        ("healthy-scale-up", []),
        ("capacity-shortage", []),
        ("intermittent", ["BootstrapLoopDetected"]),
    ],
)
def test_each_recorded_stream(name: str, expected: list[str]) -> None:
    assert kinds(replay_json(str(STREAMS / f"{name}.jsonl"))) == expected


def test_the_recorded_quarantine_keeps_its_node_contained_when_replayed_with_the_quarantine() -> None:
    """article-quarantine-contained was recorded under Lifeguard's quarantine: its third node booted
    fail-terminate under STOP_SEQUENCE, failed it and was kept. Replayed with the quarantine (the local PCS
    takes it, as PCS did), the loop is contained, not resolved. In notify the group keeps the configuration
    that runs the script under TERMINATE, so that node's report of a STOP_SEQUENCE failure cannot be true of
    what it booted: its success ends the loop."""
    stream = str(STREAMS / "article-quarantine-contained.jsonl")
    done = runner.invoke(app, ["replay", "--json", "--mode", "quarantine", stream])
    assert done.exit_code == 0, done.output
    told = [event["detail-type"] for event in json.loads(done.stdout)["events"]]
    assert told == ["BootstrapLoopDetected", "RemediationApplied", "LoopContained"]
    assert kinds(replay_json(stream)) == ["BootstrapLoopDetected", "LoopResolved"]


@pytest.mark.parametrize(
    ("name", "value"),
    [("LIFEGUARD_COOLDOWN_MINUTES", "abc"), ("LIFEGUARD_DAILY_CAP", "abc")],
)
def test_a_remediation_setting_the_environment_spoils_is_said_not_an_internal_error(
    name: str, value: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv(name, value)
    result = runner.invoke(app, ["replay", str(STREAMS / "article-terminate-loop.jsonl")])
    assert result.exit_code == 2, result.output
    assert result.stderr.startswith(f"lifeguard replay: the remediation's settings: {name}={value!r}")
    assert len(result.stderr.splitlines()) == 1


def test_inputs_are_named_as_lint_takes_them(tmp_path: Path) -> None:
    """`file://PATH`, as the AWS CLI takes it, was read as a relative path `file:/…`; an empty name as the
    current directory; `-` twice as one stdin."""
    loop, config = STREAMS / "article-terminate-loop.jsonl", EVENTS / "configs" / "article-terminate.json"
    document = replay_json("--config", f"file://{config}", f"file://{loop}")
    assert kinds(document) == ["BootstrapLoopDetected"]
    for args, said in (
        ([""], "lifeguard replay: '': no file named: an empty path"),
        (["-", "-"], "lifeguard replay: - (stdin) is given more than once: it can be read only once"),
        (
            ["--config", "-", "-"],
            "lifeguard replay: - (stdin) is given more than once: it can be read only once",
        ),
        (["--config", "", str(loop)], "lifeguard replay: --config '': no file named: an empty path"),
        (
            ["--config", f"file://{tmp_path}/nope.json", str(loop)],
            f"lifeguard replay: --config {tmp_path}/nope.json: cannot read it: No such file or directory",
        ),
    ):
        result = runner.invoke(app, ["replay", *args])
        assert (result.exit_code, result.stderr.strip()) == (2, said)


def test_threshold_and_window_tune_the_detection() -> None:
    loop = str(STREAMS / "article-terminate-loop.jsonl")
    assert kinds(replay_json("--threshold", "3", loop)) == []
    assert kinds(replay_json("--window-minutes", "5", loop)) == []  # the failures are 6 minutes apart
    assert kinds(replay_json("--window-minutes", "7", loop)) == ["BootstrapLoopDetected"]


@pytest.mark.parametrize(
    ("args", "environ", "said"),
    [
        (["--threshold", "101"], {}, "--threshold 101 is not from 1 to 100"),
        (["--threshold", "0"], {}, "--threshold 0 is not from 1 to 100"),
        (["--window-minutes", "0"], {}, "--window-minutes 0 is not from 1 to 10080"),
        (["--window-minutes", "100000"], {}, "--window-minutes 100000 is not from 1 to 10080"),
        ([], {"LIFEGUARD_THRESHOLD": "abc"}, "LIFEGUARD_THRESHOLD"),
        (
            [],
            {"LIFEGUARD_WINDOW_MINUTES": "5000000"},
            "LIFEGUARD_WINDOW_MINUTES: 5000000 is not from 1 to 10080",
        ),
    ],
)
def test_a_threshold_or_window_out_of_its_bounds_is_bad_usage(
    args: list[str], environ: dict[str, str], said: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Given or from the environment, past the bounds the stack's parameters have: one line, exit 2."""
    from lifeguard.detection import MAX_THRESHOLD, MAX_WINDOW_MINUTES

    for name, value in environ.items():
        monkeypatch.setenv(name, value)
    result = runner.invoke(app, ["replay", *args, str(STREAMS / "article-terminate-loop.jsonl")])
    assert result.exit_code == 2, result.output
    assert result.stderr.startswith("lifeguard replay: the detection's threshold or window: ")
    assert said in result.stderr
    assert len(result.stderr.splitlines()) == 1
    shown = " ".join(runner.invoke(app, ["replay", "--help"], env={"COLUMNS": "200"}).stdout.split())
    assert f"(1 to {MAX_THRESHOLD})" in shown
    assert f"(1 to {MAX_WINDOW_MINUTES}, a week)" in shown


def test_the_config_given_is_the_groups_config(tmp_path: Path) -> None:
    document = replay_json(
        "--config",
        str(EVENTS / "configs" / "article-stop-sequence.json"),
        str(STREAMS / "article-terminate-loop.jsonl"),
    )
    config = json.loads((EVENTS / "configs" / "article-stop-sequence.json").read_text())
    assert document["events"][0]["detail"]["config_before"] == config


def test_malformed_lines_are_counted_never_fatal(tmp_path: Path) -> None:
    lines = (STREAMS / "article-terminate-loop.jsonl").read_text().splitlines()
    lines.insert(2, "{not json")
    lines.insert(4, "[1, 2, 3]")
    lines.insert(6, json.dumps({"status_code": "TERMINATED"}))
    broken = tmp_path / "broken.jsonl"
    broken.write_text("\n".join(lines) + "\n")
    document = replay_json(str(broken))
    assert document["skipped_records"] == 3
    assert kinds(document) == ["BootstrapLoopDetected"]
    # Each line counted once: replayed, or skipped (the record the function skips is not replayed too).
    assert document["records"] == len(lines) - 3


def test_a_missing_file_is_one_clean_line_and_exit_2(tmp_path: Path) -> None:
    result = runner.invoke(app, ["replay", str(tmp_path / "nope.jsonl")])
    assert result.exit_code == 2
    assert "cannot read" in result.output


def test_an_invalid_config_is_refused_before_anything_runs() -> None:
    result = runner.invoke(
        app,
        [
            "replay",
            "--config",
            str(EVENTS / "configs" / "invalid-onerror-typo.json"),
            str(STREAMS / "article-terminate-loop.jsonl"),
        ],
    )
    assert result.exit_code == 2
    assert "'TERMINATED' is not one of" in result.output


def test_the_timeline_reads_as_a_timeline() -> None:
    lifeguard = Path(sys.executable).parent / "lifeguard"
    result = subprocess.run(
        [str(lifeguard), "replay", "--mode", "notify", str(STREAMS / "article-terminate-revert.jsonl")],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
        env={**os.environ, "COLUMNS": "200"},  # each row on one line
    )
    assert result.returncode == 0, result.stderr
    lines = result.stdout.splitlines()
    assert lines[0].split() == ["time", "(UTC)", "group", "what", "detail"]
    rows = [line for line in lines if line.startswith("2026-")]
    order = [
        word
        for line in rows
        for word in line.split()
        if word in ("TERMINATED/BOOTSTRAP_FAILED", "BootstrapLoopDetected", "config", "LoopResolved")
    ]
    assert order == [
        "TERMINATED/BOOTSTRAP_FAILED",
        "TERMINATED/BOOTSTRAP_FAILED",
        "BootstrapLoopDetected",
        "config",
        "LoopResolved",
    ]
    assert "2026-10-21 01:12:42" in result.stdout
    assert "1 BootstrapLoopDetected, 1 RemediationSkipped, 1 LoopResolved" in result.stdout
    assert "notifications: 3 via sns, 3 via slack" in result.stdout
    assert "Traceback" not in result.stderr


@pytest.mark.parametrize(
    ("name", "expected"),
    [
        ("article-terminate-loop", ["BootstrapLoopDetected"]),
        ("article-terminate-revert", ["BootstrapLoopDetected", "LoopResolved"]),
        ("article-stop-sequence", []),
        ("healthy-scale-up", []),
        ("capacity-shortage", []),
        ("intermittent", ["BootstrapLoopDetected"]),
        ("control-message", []),
    ],
)
def test_each_recorded_subscription_event(name: str, expected: list[str]) -> None:
    assert kinds(replay_json(str(EVENTS / "subscriptions" / f"{name}.json"))) == expected


def test_a_risky_change_recorded_by_cloudtrail_is_reviewed_before_the_loop_it_causes() -> None:
    document = replay_json(
        "--config",
        str(EVENTS / "configs" / "article-reverted.json"),
        str(STREAMS / "cloudtrail-risky-change-then-loop.jsonl"),
    )
    assert kinds(document) == ["ConfigChangeReviewed", "BootstrapLoopDetected"]
    review, detection = (
        e["detail"] for e in document["events"] if not e["detail-type"].startswith("Remediation")
    )
    assert set(DETAIL_KEYS) <= set(review)
    assert review["episode_id"] is None
    assert review["changed_by"] == {
        "arn": "arn:aws:sts::123456789012:assumed-role/ClusterAdmin/alice",
        "at": 1792544400000,
        "source": "cloudtrail",
    }
    new_script = {
        "name": "verify-mounts",
        "scriptSource": {"scriptLocation": "s3://lca-scripts-example/scripts/fail.sh"},
    }
    assert review["diff"] == [{"path": "stages.nodeBootstrapped[0]", "old": None, "new": new_script}]
    # A mount check on TERMINATE, as the article advises: its risk is its unpinned source.
    assert [(r["code"], r["path"]) for r in review["risks"][:1]] == [
        ("unpinned-mutable-source", "stages.nodeBootstrapped[0].scriptSource"),
    ]
    assert review["config_before"] == json.loads((EVENTS / "configs" / "article-reverted.json").read_text())
    assert detection["suspect"]["script"] == "verify-mounts"
    assert detection["config_fingerprint"] == review["config_fingerprint"]
    # The detection names the change its loop began after.
    assert detection["changed_by"] == review["changed_by"]
    assert detection["reason"].endswith(
        "the loop began after the change by arn:aws:sts::123456789012:assumed-role/ClusterAdmin/alice at "
        "2026-10-21 01:00:00 UTC"
    )
    subjects = [n["subject"] for n in document["notifications"] if n["channel"] == "sns"]
    assert subjects[0] == "[Lifeguard] Risky change: lca-static in pcs_abc123de45"  # the group by its name
    assert review["compute_node_group_name"] == "lca-static"
    assert document["groups"][0]["node_lifecycle_actions"]["stages"]["nodeBootstrapped"][0] == new_script


def test_the_recorded_cloudtrail_event_replays_alone_and_reads_in_the_timeline() -> None:
    path = str(EVENTS / "cloudtrail" / "update-compute-node-group.json")
    document = replay_json(path)
    assert kinds(document) == ["ConfigChangeReviewed"]
    assert document["events"][0]["detail"]["config_before"] is None  # a group Lifeguard never saw
    result = runner.invoke(app, ["replay", "--mode", "notify", path], env={"COLUMNS": "200"})
    assert result.exit_code == 0, result.output
    rows = [line for line in result.stdout.splitlines() if line.startswith("2026-")]
    assert [row.split()[3:5] for row in rows] == [["config", "changed"], ["ConfigChangeReviewed", "by"]]
    assert "1 ConfigChangeReviewed" in result.stdout


def test_a_cloudtrail_record_the_review_skips_is_skipped_not_replayed_and_in_the_timeline(
    tmp_path: Path,
) -> None:
    """A record with a field the function refuses (here a clientToken over its bound) counts once, as a
    skipped record, and reads in the timeline, as a skipped scaling-log record does."""
    event = json.loads((EVENTS / "cloudtrail" / "update-compute-node-group.json").read_text())
    event["detail"]["requestParameters"]["clientToken"] = "x" * 5000
    path = tmp_path / "call.json"
    path.write_text(json.dumps(event))
    document = replay_json(str(path))
    assert (document["records"], document["skipped_records"], document["events"]) == (0, 1, [])
    result = runner.invoke(app, ["replay", "--mode", "notify", str(path)], env={"COLUMNS": "200"})
    assert result.exit_code == 0, result.output
    rows = [line.split()[3:7] for line in result.stdout.splitlines() if line.startswith("2026-")]
    # The call PCS took is replayed on the local PCS; the function skipped its record.
    assert rows == [
        ["config", "changed", "UpdateComputeNodeGroup", "by"],
        ["skipped", "a", "CloudTrail", "record:"],
    ]
    assert "0 records replayed, 1 skipped" in result.stdout


def test_a_kept_replays_pcs_runs_on_with_real_time_so_a_later_update_settles() -> None:
    """After `replay --keep`, an undo made on the kept local PCS settles a minute later, as on PCS: its
    clock runs on from the stream's end (stopped, a group once changed stayed UPDATING for good)."""
    import time

    from lifeguard_cli.replay.run import replay

    seen: list[tuple[Any, Any]] = []

    def keep(aws: Any, stack: Any, channels: Any, result: Any) -> None:
        before = aws.pcs.clock()
        time.sleep(1.2)
        seen.append((before, aws.pcs.clock()))

    replay([EVENTS / "streams" / "article-terminate-loop.jsonl"], keep=keep)
    ((before, after),) = seen
    assert (after - before).total_seconds() >= 1.0


def test_records_of_a_cluster_outside_the_exported_cluster_ids_are_said_ignored_not_replayed(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The replay reads LIFEGUARD_CLUSTER_IDS as the stack does: a stream of another cluster is ignored,
    and the replay says so, record by record and in its totals, instead of counting it replayed."""
    stream = str(STREAMS / "article-terminate-loop.jsonl")
    monkeypatch.setenv("LIFEGUARD_CLUSTER_IDS", "pcs_other00001")
    document = replay_json(stream)
    assert document["events"] == []
    assert document["records"] == 0
    assert document["ignored_records"] > 0
    shown = runner.invoke(app, ["replay", "--mode", "notify", stream])
    assert shown.exit_code == 0, shown.output
    said = f"0 records replayed, 0 skipped, {document['ignored_records']} ignored (their cluster is not among"
    assert said in " ".join(shown.output.split())
    assert "cluster pcs_abc123de45 is not among LIFEGUARD_CLUSTER_IDS" in " ".join(shown.output.split())

    monkeypatch.setenv("LIFEGUARD_CLUSTER_IDS", "pcs_other00001, pcs_abc123de45")
    watched = replay_json(stream)
    assert kinds(watched) == ["BootstrapLoopDetected"]
    assert (watched["ignored_records"], watched["records"]) == (0, document["ignored_records"])


def _shifted(tmp_path: Path, days: float, name: str = "later.jsonl") -> Path:
    """The article's loop, another cluster's group, `days` later."""
    rows = [
        json.loads(line)
        for line in (STREAMS / "article-terminate-loop.jsonl").read_text().splitlines()
        if line
    ]
    for row in rows:
        row["event_timestamp"] += int(days * 86400 * 1000)
        row["resource_id"], row["compute_node_group_id"] = "pcs_zzz999yy88", "pcs_bbbbbb02"
    out = tmp_path / name
    out.write_text("".join(json.dumps(row) + "\n" for row in rows))
    return out


def _detected(document: dict[str, Any]) -> list[str]:
    return [detail["compute_node_group_id"] for detail in detections(document)]


def test_streams_of_other_times_replay_each_group_at_its_own(tmp_path: Path) -> None:
    """Each group was made a second before its own first record, on a clock that never goes back: a
    second file hours later set it there before the first file's records were fed, and they were judged
    against it: the first group's configuration changed after its failures (no loop), or its records older
    than 14 days (skipped). Every group is made before the first record of all."""
    escalation = STREAMS / "quarantine-then-escalation.jsonl"
    alone = _detected(replay_json(str(escalation)))
    assert alone == ["pcs_abcdef01"]
    together = _detected(replay_json(str(escalation), str(_shifted(tmp_path, 5 / 24))))
    assert [group for group in together if group == "pcs_abcdef01"] == alone
    later = replay_json(
        str(STREAMS / "article-terminate-loop.jsonl"), str(_shifted(tmp_path, 15, "days.jsonl"))
    )
    assert later["skipped_records"] == 0
    assert _detected(later) == ["pcs_abcdef01", "pcs_bbbbbb02"]


def test_a_group_of_one_record_far_ahead_does_not_set_the_clock_for_the_others(tmp_path: Path) -> None:
    """A group whose one record's time is decades ahead (a typo) was made at that time, before any
    record was fed: every other record was judged against that clock, too old, and the loop went unseen."""
    typo = {
        "resource_id": "pcs_abc123de45",
        "resource_type": "PCS_CLUSTER",
        "event_timestamp": 4_000_000_000_000,
        "compute_node_group_id": "pcs_typo0001",  # a group of its own, made at its first record's time
        "scheduler_node_id": "x-1",
        "status_code": "LAUNCHED",
        "reason_code": "MAINTAIN_MIN_CAPACITY",
        "description": "d",
        "details": {"instance_id": "i-0123456789abcdef0"},
    }
    path = tmp_path / "with-typo.jsonl"
    path.write_text((STREAMS / "article-terminate-loop.jsonl").read_text() + json.dumps(typo) + "\n")
    assert _detected(replay_json(str(path))) == ["pcs_abcdef01"]


def test_a_record_skipped_for_a_bad_field_is_placed_by_its_file_and_line(tmp_path: Path) -> None:
    """A record the function skips for a bad field (a time that is no time) read in the timeline as "-
    pcs_abcdef01 skipped a scaling-log record: invalid event_timestamp": no time, no file, no line to find
    it by in an export of thousands."""
    lines = (STREAMS / "article-terminate-loop.jsonl").read_text().splitlines(keepends=True)
    bad = json.loads(lines[2])
    bad["event_timestamp"] = "yesterday"
    path = tmp_path / "bad.jsonl"
    path.write_text("".join([*lines[:6], json.dumps(bad) + "\n", *lines[6:]]))
    result = runner.invoke(app, ["replay", "--mode", "notify", str(path)], env={"COLUMNS": "250"})
    assert result.exit_code == 0, result.output
    [skipped] = [line for line in result.stdout.splitlines() if " skipped " in line and "record:" in line]
    assert skipped.rstrip().endswith(f"({path}:7)")
