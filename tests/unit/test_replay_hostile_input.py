"""What `lifeguard replay` prints of hostile or damaged input: no terminal escapes, bounded cells, a skipped
record said to be skipped, a damaged recorded event read without an internal error."""

from __future__ import annotations

import copy
import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from lifeguard.log_subscription import encode_subscription
from lifeguard_cli.cli import app
from tests.conftest import EVENTS, load_event

runner = CliRunner()
LIFEGUARD = Path(sys.executable).parent / "lifeguard"
ESC = "\x1b"
# Sets the terminal's title, then clears the screen: what a hostile string can do once printed raw.
HOSTILE = "\x1b]0;PWNED\x07\x1b[2J"
LOOP = EVENTS / "streams" / "article-terminate-loop.jsonl"


def _replay(*paths: Path) -> Any:
    return runner.invoke(app, ["replay", *map(str, paths)], env={"COLUMNS": "80"})


def _replayed_batch(tmp_path: Path, stream: str, messages: list[tuple[int, str]]) -> tuple[str, Path]:
    """`lifeguard replay` of one subscription batch of `stream`, as a file: what it said, on one line, and
    the file."""
    event = encode_subscription("/aws/vendedlogs/pcs/scaling", stream, messages)
    path = tmp_path / "subscription.json"
    path.write_text(json.dumps(event))
    result = _replay(path)
    assert result.exit_code == 0, result.output
    return " ".join(result.stdout.split()), path


def _cloudtrail_with_arn(arn: str) -> dict[str, Any]:
    event = load_event("cloudtrail/update-compute-node-group.json")
    event["detail"]["userIdentity"]["arn"] = arn
    return event


def test_replay_does_not_print_terminal_escapes_from_a_cloudtrail_caller(tmp_path: Path) -> None:
    path = tmp_path / "cloudtrail.json"
    path.write_text(json.dumps(_cloudtrail_with_arn("arn:aws:iam::123456789012:user/" + HOSTILE)))
    result = _replay(LOOP, path)
    assert result.exit_code == 0, result.output
    assert ESC not in result.stdout


def test_replay_bounds_what_it_prints_of_a_cloudtrail_caller(tmp_path: Path) -> None:
    path = tmp_path / "cloudtrail.json"
    path.write_text(json.dumps(_cloudtrail_with_arn("arn:aws:iam::123456789012:user/" + "u" * 200_000)))
    result = _replay(LOOP, path)
    assert result.exit_code == 0, result.output
    assert len(result.stdout) < 50_000, len(result.stdout)


def test_replay_does_not_print_terminal_escapes_from_a_recorded_controller_event(tmp_path: Path) -> None:
    event = load_event("eventbridge/bootstrap-loop-detected.json")
    event["detail"]["suspect"]["script"] = "fail" + HOSTILE
    path = tmp_path / "event.json"
    path.write_text(json.dumps(event))
    result = _replay(path)
    assert result.exit_code == 0, result.output
    assert ESC not in result.stdout


def test_a_recorded_controller_event_with_a_damaged_detail_is_not_an_internal_error(tmp_path: Path) -> None:
    event = load_event("eventbridge/bootstrap-loop-detected.json")
    damaged = copy.deepcopy(event)
    damaged["detail"]["failures"] = [1, 2]
    path = tmp_path / "event.json"
    path.write_text(json.dumps(damaged))
    done = subprocess.run([str(LIFEGUARD), "replay", str(path)], capture_output=True, text=True, check=False)
    assert "internal error" not in done.stderr, done.stderr
    assert done.returncode in (0, 2), done.stderr


def test_a_record_the_handler_skipped_in_a_subscription_batch_is_not_shown_as_an_event(
    tmp_path: Path,
) -> None:
    good = json.loads(LOOP.read_text().splitlines()[0])
    bad = {**good, "status_code": "TERMINATED" + HOSTILE, "scheduler_node_id": "n" * 100_000}
    at = good["event_timestamp"]
    event = encode_subscription(
        "/aws/vendedlogs/pcs/scaling",
        "AWSLogs/PCS/pcs_abc123de45/node_lifecycle.log",
        [(at, json.dumps(good)), (at, json.dumps(bad))],
    )
    path = tmp_path / "subscription.json"
    path.write_text(json.dumps(event))
    result = _replay(path)
    assert result.exit_code == 0, result.output
    assert "1 skipped" in result.stdout
    assert "TERMINATED" not in result.stdout  # the skipped record never happened as far as Lifeguard knows
    assert ESC not in result.stdout
    assert len(result.stdout) < 20_000, len(result.stdout)


def test_a_subscription_batch_of_a_stream_of_no_pcss_form_is_said_skipped_not_shown(tmp_path: Path) -> None:
    rows = [json.loads(line) for line in LOOP.read_text().splitlines()]
    said, _ = _replayed_batch(
        tmp_path, "testLogStream", [(row["event_timestamp"], json.dumps(row)) for row in rows]
    )
    assert f"{len(rows)} scaling-log records: stream not of PCS's form" in said, said
    assert "LAUNCHED" not in said  # no record of it was read
    assert "TERMINATED" not in said


def test_a_subscription_batch_of_the_clusters_scheduler_log_is_said_ignored_not_replayed(
    tmp_path: Path,
) -> None:
    """A cluster's job completion log delivered to the scaling log's group too: the function ignores it
    whole, and the replay says so in one line, not as records replayed."""
    jobcomp = json.dumps({"jobcomp": {"job_id": 42, "job_state": "COMPLETED"}})
    stream = "AWSLogs/PCS/pcs_abc123de45/jobcomp.log"
    said, path = _replayed_batch(tmp_path, stream, [(1792544247000, jobcomp)] * 3)
    assert f"3 message(s) of {stream}: another of PCS's logs, not the scaling log" in said, said
    assert "0 records replayed, 0 skipped, 3 ignored (another of PCS's logs, not the scaling log)" in said
    document = json.loads(runner.invoke(app, ["replay", "--json", str(path)]).stdout)
    assert (document["records"], document["skipped_records"], document["ignored_records"]) == (0, 0, 3)


def test_an_export_of_a_log_group_shared_with_the_clusters_other_logs_replays_the_scaling_log(
    tmp_path: Path,
) -> None:
    """`aws logs filter-log-events` of a group that also receives the cluster's job completions: their
    events are passed over (a job named `status_code` too), said, and the loop in the rest replayed; one
    such event made the whole file refused."""
    export = load_event("exports/filter-log-events-scaling-log.json")
    job = {"jobcomp": {"job_id": 43, "job_name": "status_code", "job_state": "COMPLETED"}}
    other = {**export["events"][0], "logStreamName": "AWSLogs/PCS/pcs_abc123de45/jobcomp.log"}
    export["events"][1:1] = [{**other, "message": json.dumps(job)}] * 2
    path = tmp_path / "export.json"
    path.write_text(json.dumps(export))
    result = _replay(path)
    assert result.exit_code == 0, result.output
    said = " ".join(result.output.split())
    assert "passed over 2 log events of the cluster's other PCS logs" in said, said
    assert "BootstrapLoopDetected" in said


def test_a_line_of_no_cluster_is_skipped_for_what_is_wrong_with_it(tmp_path: Path) -> None:
    """The function skips a stream of no PCS's form whole; a replayed line naming no cluster has no stream
    of PCS's, and is read on its own: what is wrong with it is said, not the stream it was put in."""
    good = json.loads(LOOP.read_text().splitlines()[0])
    failed = {**good, "status_code": "TERMINATED", "reason_code": "BOOTSTRAP_FAILED"}
    unnamed = {key: value for key, value in failed.items() if key != "resource_id"}
    path = tmp_path / "lines.jsonl"
    path.write_text("\n".join(json.dumps(row) for row in (good, unnamed)) + "\n")
    result = _replay(path)
    assert result.exit_code == 0, result.output
    assert "1 skipped" in result.stdout, result.stdout
    said = " ".join(result.stdout.split())
    assert "record without resource_id" in said, said
    assert "not of PCS's form" not in said


def test_a_record_the_handler_skipped_for_its_time_is_not_shown_as_an_event(tmp_path: Path) -> None:
    good = json.loads(LOOP.read_text().splitlines()[0])
    at = good["event_timestamp"]
    old = {
        **good,
        "status_code": "TERMINATED",
        "reason_code": "BOOTSTRAP_FAILED",
        "event_timestamp": at - 20 * 24 * 3600 * 1000,
    }
    event = encode_subscription(
        "/aws/vendedlogs/pcs/scaling",
        "AWSLogs/PCS/pcs_abc123de45/node_lifecycle.log",
        [(at, json.dumps(good)), (old["event_timestamp"], json.dumps(old))],
    )
    path = tmp_path / "subscription.json"
    path.write_text(json.dumps(event))
    result = _replay(path)
    assert result.exit_code == 0, result.output
    assert "1 skipped" in result.stdout, result.stdout
    assert "TERMINATED" not in result.stdout, result.stdout
    assert "older than 14 days" in " ".join(result.stdout.split())


def _replayed(path: Path) -> dict[str, Any]:
    result = runner.invoke(app, ["replay", "--json", str(path)], env={"COLUMNS": "80"})
    assert result.exit_code == 0, result.output
    figures: dict[str, Any] = json.loads(result.stdout)
    return figures


@pytest.fixture(scope="module")
def loop_alone() -> dict[str, Any]:
    """The article's loop replayed alone, once for the tests that set a line in it."""
    return _replayed(LOOP)


@pytest.mark.parametrize("when", ["garbage", "+02:00"])  # not a time; a time the review refuses (not UTC)
def test_a_cloudtrail_call_of_no_time_is_skipped_and_changes_no_configuration(
    tmp_path: Path, when: object, loop_alone: dict[str, Any]
) -> None:
    """A call skipped for its eventTime (the review takes an RFC 3339 time in UTC, as CloudTrail writes
    it) is not replayed: it did not change the group on the local PCS (it had, and so hid the loop that
    followed: no event, where the stream alone has two)."""
    call = load_event("cloudtrail/update-compute-node-group.json")
    written = call["detail"]["eventTime"]
    call["detail"]["eventTime"] = written.replace("Z", when) if when == "+02:00" else when
    lines = LOOP.read_text().splitlines()
    path = tmp_path / "stream.jsonl"
    path.write_text("\n".join([*lines[:3], json.dumps(call), *lines[3:]]) + "\n")
    alone, with_call = loop_alone, _replayed(path)
    assert with_call["skipped_records"] == 1
    assert with_call["records"] == alone["records"]
    assert [e["detail-type"] for e in with_call["events"]] == [e["detail-type"] for e in alone["events"]]
    assert alone["events"]
    shown = _replay(path).stdout
    assert "config changed" not in shown
    assert "invalid eventTime" in " ".join(shown.split())


def test_a_configuration_pcs_refuses_is_said_in_one_line(tmp_path: Path) -> None:
    call = load_event("cloudtrail/update-compute-node-group.json")
    call["detail"]["requestParameters"]["nodeLifecycleActions"] = {"stages": 5}
    path = tmp_path / "call.json"
    path.write_text(json.dumps(call))
    result = _replay(path)
    assert result.exit_code == 2, result.output
    said = result.stderr.strip() if result.stderr else result.output.strip()
    assert "was refused" in said
    assert "\n" not in said, said


@pytest.mark.parametrize("other", ["pcs_abcdef01", "pcs_zzzzzzzz01"])
def test_an_id_named_as_two_resources_is_refused_in_one_line(tmp_path: Path, other: str) -> None:
    """A line naming the stream's group under another cluster (or the group's id as a cluster's) was an
    internal error (the local PCS's ConflictException), exit 1: an input the replay cannot take, exit 2."""
    lines = LOOP.read_text().splitlines()
    lines[1] = json.dumps({**json.loads(lines[1]), "resource_id": other})
    path = tmp_path / "clash.jsonl"
    path.write_text("\n".join(lines) + "\n")
    result = _replay(path)
    assert result.exit_code == 2, result.output
    said = result.stderr.strip() if result.stderr else result.output.strip()
    assert "the inputs name group pcs_abcdef01 in two clusters" in said, said
    assert "\n" not in said, said


def test_a_number_too_long_to_read_is_said_so_not_nested_too_deep(tmp_path: Path) -> None:
    path = tmp_path / "int.json"
    path.write_text('{"a": ' + "9" * 5000 + "}")
    result = _replay(path)
    assert result.exit_code == 2
    said = result.stderr.strip() if result.stderr else result.output.strip()
    assert f"{path}:1: not JSON: a number of over 4300 digits." in said, said


@pytest.mark.parametrize(
    ("control", "said"),
    [
        (
            {"update_config": {"stages": {"nodeBootstrapped": [{"name": None}]}}},
            "update_config is no configuration PCS takes: "
            "stages.nodeBootstrapped[0].scriptSource: is required",
        ),
        ({"compute_node_group_id": {"a": 1}}, "a lifeguard_replay line needs update_config (an object)"),
    ],
    ids=["invalid-config", "group-not-an-id"],
)
def test_a_replay_update_line_is_checked_as_it_is_read(
    tmp_path: Path, control: dict[str, Any], said: str
) -> None:
    """An invalid update_config came out seconds into the replay as botocore's refusal of the call, naming
    no file or line; a group id of JSON's object became Python's text of it."""
    lines = LOOP.read_text().splitlines()
    first = json.loads(lines[0])
    update = {
        "update_config": {"stages": {}},
        "compute_node_group_id": first["compute_node_group_id"],
        "at": first["event_timestamp"] + 1000,
    }
    lines.insert(3, json.dumps({"lifeguard_replay": {**update, **control}}))
    path = tmp_path / "update.jsonl"
    path.write_text("\n".join(lines) + "\n")
    result = _replay(path)
    assert result.exit_code == 2, result.output
    text = result.stderr.strip() if result.stderr else result.output.strip()
    assert text.startswith(f"lifeguard replay: {path}:4: {said}"), text
    assert "\n" not in text
