"""`lifeguard replay` takes its inputs as AWS users have them (`replay.inputs`): JSON lines, subscription
events, the AWS CLI's log-event exports, EventBridge events, CloudTrail records and log files; anything
else is one clean error naming the file (and line) and what a replay reads, before anything runs."""

from __future__ import annotations

import gzip
import json
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from lifeguard.scaling_log import ScalingLogParseError, read_scaling_log_message
from lifeguard_cli.cli import app
from lifeguard_cli.replay import ReplayError, replay
from lifeguard_cli.replay import inputs as replay_inputs
from lifeguard_cli.replay.errors import InvalidNodeBundleError, UnreadableInputError
from lifeguard_cli.replay.inputs import (
    ACCEPTED_SHAPES,
    ApiCall,
    ControllerEvent,
    LogLines,
    read_inputs,
    row_time,
    seen_groups,
)
from lifeguard_cli.replay.run import node_bundle_at
from tests.conftest import EVENTS

STREAMS = EVENTS / "streams"
EXPORTS = EVENTS / "exports"
LOOP = STREAMS / "article-terminate-loop.jsonl"
GOOD = LOOP.read_text()
CONFIG = (EVENTS / "configs" / "article-terminate.json").read_text()
runner = CliRunner()


def write(tmp_path: Path, text: str | bytes, name: str = "input.jsonl") -> Path:
    path = tmp_path / name
    if isinstance(text, bytes):
        path.write_bytes(text)
    else:
        path.write_text(text, encoding="utf-8")
    return path


def rows_of(path: Path) -> list[dict[str, Any]]:
    inputs = read_inputs([path])
    assert all(isinstance(item, LogLines) for item in inputs.items)
    return [row for item in inputs.items if isinstance(item, LogLines) for row in item.rows]


def jsonl_rows(path: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in path.read_text().splitlines()]


# -- the shapes a replay reads --


def test_filter_log_events_output_reads_as_the_stream_it_was_exported_from() -> None:
    inputs = read_inputs([EXPORTS / "filter-log-events-scaling-log.json"])
    assert rows_of(EXPORTS / "filter-log-events-scaling-log.json") == jsonl_rows(LOOP)
    assert [item.reports for item in inputs.items if isinstance(item, LogLines)] == [False] * 8
    assert (inputs.skipped, inputs.notes) == (0, ())


def test_get_log_events_output_of_a_node_report_stream_reads_as_node_reports() -> None:
    path = EXPORTS / "get-log-events-node-reports.json"
    reports = jsonl_rows(STREAMS / "article-terminate-node-reports.jsonl")
    assert rows_of(path) == [r for r in reports if r["instance_id"] == "i-059b4b99b4f2e9739"]
    assert all(item.reports for item in read_inputs([path]).items if isinstance(item, LogLines))


def test_a_log_export_compacted_to_one_line_or_gzipped_reads_the_same(tmp_path: Path) -> None:
    document = json.loads((EXPORTS / "filter-log-events-scaling-log.json").read_text())
    one_line = write(tmp_path, json.dumps(document) + "\n", "one.json")
    zipped = write(tmp_path, gzip.compress(json.dumps(document).encode()), "export.json.gz")
    assert rows_of(one_line) == rows_of(zipped) == jsonl_rows(LOOP)


def test_a_file_powershell_wrote_utf16_with_a_bom_reads_the_same(tmp_path: Path) -> None:
    text = (EXPORTS / "filter-log-events-scaling-log.json").read_text()
    path = write(tmp_path, text.replace("\n", "\r\n").encode("utf-16"), "x.json")
    assert rows_of(path) == jsonl_rows(LOOP)


def test_a_cloudtrail_log_file_yields_its_pcs_change_and_passes_over_other_calls(tmp_path: Path) -> None:
    recorded = json.loads((EVENTS / "cloudtrail" / "update-compute-node-group.json").read_text())
    document = json.loads((EXPORTS / "cloudtrail-log-file.json").read_text())
    as_written = write(tmp_path, gzip.compress(json.dumps(document).encode()), "trail.json.gz")
    for path in (EXPORTS / "cloudtrail-log-file.json", as_written):
        inputs = read_inputs([path])
        [call] = inputs.items
        assert isinstance(call, ApiCall)
        assert call.record == recorded["detail"]
        assert (inputs.skipped, inputs.notes) == (0, ())


def test_a_one_line_document_has_no_line_cap_but_a_line_of_a_stream_has(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(replay_inputs, "MAX_ENTRY_CHARS", 1000)
    compact = json.dumps(json.loads((EXPORTS / "cloudtrail-log-file.json").read_text()))
    [call] = read_inputs([write(tmp_path, compact + "\n", "trail.json")]).items
    assert isinstance(call, ApiCall)
    inputs = read_inputs([write(tmp_path, GOOD + compact + "\n")])
    assert inputs.skipped == 1
    assert "line 9 (longer than 0 KiB)" in inputs.notes[0]


def test_a_cloudtrail_file_of_other_calls_only_says_so_in_one_note(tmp_path: Path) -> None:
    document = json.loads((EXPORTS / "cloudtrail-log-file.json").read_text())
    document["Records"] = document["Records"][:2]  # DescribeInstances, GetComputeNodeGroup
    inputs = read_inputs([write(tmp_path, json.dumps(document, indent=2), "trail.json")])
    assert (inputs.items, inputs.skipped) == ([], 0)
    [note] = inputs.notes
    assert "nothing to replay: its 2 CloudTrail records are of other calls" in note


def test_a_cloudtrail_event_eventbridge_would_not_deliver_or_naming_no_call_is_damaged(
    tmp_path: Path,
) -> None:
    """An "AWS API Call via CloudTrail" event without its envelope, or a record naming no call, was
    passed over as "of other calls" (exit 0, nothing said of the damage); one of another call is passed
    over, said in the singular when it is one."""
    recorded = json.loads((EVENTS / "cloudtrail" / "update-compute-node-group.json").read_text())
    bare = {"detail-type": "AWS API Call via CloudTrail", "source": "aws.pcs", "detail": {}}
    with pytest.raises(UnreadableInputError, match="not an event as EventBridge delivers it: version"):
        read_inputs([write(tmp_path, json.dumps(bare), "bare.json")])
    del recorded["detail"]["eventName"]
    with pytest.raises(UnreadableInputError, match="a CloudTrail record of PCS without an eventName"):
        read_inputs([write(tmp_path, json.dumps(recorded), "noname.json")])
    recorded["detail"]["eventName"] = "ListClusters"
    inputs = read_inputs([write(tmp_path, json.dumps(recorded), "other.json")])
    assert (inputs.items, inputs.skipped) == ([], 0)
    [note] = inputs.notes
    assert "nothing to replay: its 1 CloudTrail record is of other calls" in note


def test_lifeguards_own_events_are_read_with_the_group_and_config_they_name() -> None:
    path = EVENTS / "eventbridge" / "bootstrap-loop-detected.json"
    [event] = read_inputs([path]).items
    assert isinstance(event, ControllerEvent)
    [group] = seen_groups([event])
    detail = json.loads(path.read_text())["detail"]
    assert (group.cluster_id, group.group_id, group.earliest, group.name) == (
        "pcs_abc123de45",
        "pcs_abcdef01",
        1792545162000,
        "lca-static",
    )
    assert group.config == detail["config_before"]


def test_every_shape_also_reads_as_a_line_of_json_lines(tmp_path: Path) -> None:
    documents = [
        json.loads((EXPORTS / name).read_text())
        for name in ("filter-log-events-scaling-log.json", "cloudtrail-log-file.json")
    ]
    documents.append(json.loads((EVENTS / "eventbridge" / "remediation-applied.json").read_text()))
    documents.append(json.loads((EVENTS / "subscriptions" / "article-node-reports.json").read_text()))
    path = write(tmp_path, "".join(json.dumps(document) + "\n" for document in documents))
    kinds = [type(item).__name__ for item in read_inputs([path]).items]
    assert kinds == ["LogLines"] * 8 + ["ApiCall", "ControllerEvent", "SubscriptionFile"]


@pytest.mark.parametrize("shape", ["pretty", "records"])
def test_a_record_giving_a_key_twice_reaches_the_handler_as_given(tmp_path: Path, shape: str) -> None:
    """The function skips a record that gives a key twice (which value holds is ambiguous). A replay read
    a pretty-printed document, or a `Records` entry, into a dict and wrote it back: the last value held,
    and the replay decided otherwise than the function would."""
    first = json.loads(GOOD.splitlines()[0])
    body = (
        json.dumps(first, indent=2)[:-2]
        + ',\n  "status_code": "ACTIVE",\n  "details": {"instance_id": "i-1", "instance_id": "i-2"}\n}'
    )
    text = body if shape == "pretty" else '{"Records": [' + body + "]}"
    [item] = read_inputs([write(tmp_path, text, "input.json")]).items
    assert isinstance(item, LogLines)
    [message] = item.messages
    assert message.count('"status_code"') == 2
    assert '"details":{"instance_id":"i-1","instance_id":"i-2"}' in message  # nested, and given twice too
    read = read_scaling_log_message(message)  # as the function reads the message it is given
    assert isinstance(read, ScalingLogParseError)
    assert read.reason == "duplicate key"


def test_a_record_nested_deep_still_reads(tmp_path: Path) -> None:
    first = json.loads(GOOD.splitlines()[0])
    deep = "[" * 900 + "]" * 900
    text = json.dumps(first, indent=1)[:-1] + f', "x": {deep}}}'
    [item] = read_inputs([write(tmp_path, text, "input.json")]).items
    assert isinstance(item, LogLines)


# -- damage inside a stream: skipped, counted, said once --


def test_damaged_lines_in_a_stream_are_skipped_counted_and_said_in_one_note(tmp_path: Path) -> None:
    lines = LOOP.read_text().splitlines()
    lines.insert(2, "{not json")
    lines.insert(4, "[1, 2, 3]")
    lines.insert(6, "{" + " " * replay_inputs.MAX_ENTRY_CHARS + "}")
    lines.insert(8, json.dumps({"status_code": "TERMINATED"}))  # a record with its fields missing
    lines.insert(10, '{"status_code": "TERMIN')  # cut short
    inputs = read_inputs([write(tmp_path, "\n".join(lines) + "\n", "broken.jsonl")])
    assert inputs.skipped == 4
    [note] = inputs.notes
    assert note == (
        f"{tmp_path / 'broken.jsonl'}: skipped 4 damaged entries: line 3 (not JSON at column 2: Expecting "
        "property name enclosed in double quotes), line 5 (not a JSON object), line 7 (longer than 1024 "
        "KiB), line 11 (not JSON at column 17: Unterminated string starting at)"
    )
    # The damaged record is of an accepted kind: fed, for the handler to skip and count as in the stack.
    assert {"status_code": "TERMINATED"} in rows_of_items(inputs.items)
    assert len(inputs.items) == 9


def rows_of_items(items: list[Any]) -> list[dict[str, Any]]:
    return [row for item in items if isinstance(item, LogLines) for row in item.rows]


def test_a_lifeguard_event_of_no_known_detail_type_or_without_detail_is_damage(tmp_path: Path) -> None:
    unknown = json.dumps({"source": "lifeguard", "detail-type": "LoopForgotten", "detail": {}})
    bare = json.dumps({"source": "lifeguard", "detail-type": "LoopResolved"})
    inputs = read_inputs([write(tmp_path, f"{LOOP.read_text()}{unknown}\n{bare}\n")])
    assert inputs.skipped == 2
    assert "line 9 (a Lifeguard event of no known detail-type ('LoopForgotten'))" in inputs.notes[0]
    assert "line 10 (a Lifeguard event without a detail)" in inputs.notes[0]


def test_an_event_eventbridge_would_not_deliver_is_damage_named_by_its_field(tmp_path: Path) -> None:
    detected = json.loads((EVENTS / "eventbridge" / "bootstrap-loop-detected.json").read_text())
    call = json.loads((EVENTS / "cloudtrail" / "update-compute-node-group.json").read_text())
    untimed = {**detected, "time": "at dawn"}
    unaccounted = {key: value for key, value in detected.items() if key != "account"}
    nowhere = {**call, "resources": "arn:aws:pcs:us-east-1:123456789012:cluster/pcs_abc123de45"}
    counted = {**detected, "time": 1792545162}  # a time the model parses, but not as EventBridge writes it
    lines = [json.dumps(event) for event in (detected, untimed, unaccounted, call, nowhere, counted)]
    inputs = read_inputs([write(tmp_path, "\n".join(lines) + "\n")])
    assert [type(item).__name__ for item in inputs.items] == ["ControllerEvent", "ApiCall"]
    assert inputs.skipped == 4
    [note] = inputs.notes
    assert "line 2 (not an event as EventBridge delivers it: time: Input should be a valid datetime" in note
    assert "line 3 (not an event as EventBridge delivers it: account: Field required)" in note
    assert "line 5 (not an event as EventBridge delivers it: resources: Input should be a valid list)" in note
    assert "line 6 (not an event as EventBridge delivers it: time: not a time as EventBridge writes" in note


def test_a_bare_cloudtrail_record_needs_no_eventbridge_envelope(tmp_path: Path) -> None:
    record = json.loads((EVENTS / "cloudtrail" / "update-compute-node-group.json").read_text())["detail"]
    inputs = read_inputs([write(tmp_path, json.dumps(record) + "\n")])
    [call] = inputs.items
    assert isinstance(call, ApiCall)
    assert inputs.skipped == 0
    assert call.event["detail"] == record


def test_times_beyond_any_date_are_no_time() -> None:
    assert row_time({"event_timestamp": 10**20}) is None
    assert row_time({"event_timestamp": True}) is None
    assert row_time({"ended_at": 10**17}) is None
    assert row_time({"event_timestamp": 1792544685000}) == 1792544685000
    broken = {"resource_id": "pcs_abc123de45", "compute_node_group_id": "pcs_abcdef01", "event_timestamp": -1}
    odd_ids = {"resource_id": "x", "compute_node_group_id": "y" * 99, "event_timestamp": 1792544685000}
    assert seen_groups([LogLines([broken, odd_ids], ["", ""], reports=False)]) == []


# -- anything else: one error, naming the file (and line) and what a replay reads --


@pytest.mark.parametrize(
    ("content", "where", "says"),
    [
        ('{"a":1}\n', "input.jsonl:1", "a JSON object of no shape a replay reads (keys: 'a')"),
        (GOOD + '{"a": 1, "b": 2}\n', "input.jsonl:9", "(keys: 'a', 'b')"),
        ("hello\nworld\n", "input.jsonl", "not JSON (line 1 column 1: Expecting value)"),
        ('{\n  "events": [\n', "input.jsonl", "not JSON (line 3 column 1"),
        ("[1, 2, 3]\n", "input.jsonl:1", "not a JSON object"),
        ("[\n  1\n]\n", "input.jsonl", "not a JSON object"),
        ("", "input.jsonl", "empty"),
        (" \n\n", "input.jsonl", "empty"),
        (CONFIG, "input.jsonl", "a nodeLifecycleActions config: pass it with --config"),
        (json.dumps({"nodeLifecycleActions": json.loads(CONFIG)}), "input.jsonl:1", "pass it with --config"),
        (
            json.dumps({"computeNodeGroup": {"nodeLifecycleActions": json.loads(CONFIG)}}),
            "input.jsonl:1",
            "pass it with --config",
        ),
        ('{"Resources": {}}\n', "input.jsonl:1", "a CloudFormation template"),
        (
            json.dumps({"source": "aws.ec2", "detail-type": "EC2 Instance State-change Notification"}),
            "input.jsonl:1",
            "an EventBridge event of source 'aws.ec2'",
        ),
        (
            json.dumps(
                {"events": [{"timestamp": 1, "message": "START RequestId: 1"}], "searchedLogStreams": []}
            ),
            "input.jsonl:1: events[0].message",
            "not JSON",
        ),
        (
            json.dumps({"events": [{"timestamp": 1, "message": '{"level": "INFO"}'}], "nextToken": "x"}),
            "input.jsonl:1: events[0].message",
            "(keys: 'level')",
        ),
        (
            json.dumps({"Records": [{"eventSource": "pcs.amazonaws.com", "eventName": "X"}, {"x": 1}]}),
            "input.jsonl:1: Records[1]",
            "(keys: 'x')",
        ),
        (b"\x00\x9f\xff binary", "input.jsonl", "not text (neither UTF-8 nor UTF-16)"),
    ],
)
def test_an_input_of_no_accepted_shape_is_one_error(
    tmp_path: Path, content: str | bytes, where: str, says: str
) -> None:
    path = write(tmp_path, content)
    with pytest.raises(UnreadableInputError) as raised:
        read_inputs([LOOP, path])
    message = str(raised.value)
    assert raised.value.where == f"{tmp_path}/{where}"
    assert says in message
    assert all(shape in message for shape in ACCEPTED_SHAPES)
    assert "\n" not in message


def test_a_line_that_is_not_utf8_is_skipped_and_counted_and_the_rest_is_read(tmp_path: Path) -> None:
    """A byte of Latin-1 in one line of an export (a garbled copy, a script's output): that line is damage,
    not the file."""
    lines = GOOD.encode().splitlines(keepends=True)
    path = write(tmp_path, b"".join(lines[:3]) + b'{"resource_id": "caf\xe9"}\n' + b"".join(lines[3:]))
    read = read_inputs([path])
    assert read.skipped == 1
    assert len(read.items) == len(read_inputs([LOOP]).items)
    assert read.notes == (f"{path}: skipped 1 damaged entry: line 4 (not UTF-8 text)",)


def test_a_line_torn_with_nul_bytes_is_skipped_and_the_rest_is_read(tmp_path: Path) -> None:
    """A log cut short by a crash: NUL bytes and a byte that is not UTF-8 in one line are that line's
    damage, not the file's (a file of nothing but such bytes is still refused as not text)."""
    lines = GOOD.encode().splitlines(keepends=True)
    path = write(tmp_path, b"".join(lines[:3]) + b"\xff\xfe\x00bad\n" + b"".join(lines[3:]))
    read = read_inputs([path])
    assert read.skipped == 1
    assert len(read.items) == len(read_inputs([LOOP]).items)


def test_a_pretty_printed_document_with_a_byte_that_is_not_utf8_is_refused_as_not_text(
    tmp_path: Path,
) -> None:
    """Read line by line for that byte, no line of an indented document is JSON: it is said to be what it
    is, not 'not JSON' at its first line."""
    document = json.dumps({"events": [{"timestamp": 1, "message": "caf"}]}, indent=2).encode()
    path = write(tmp_path, document.replace(b'"caf"', b'"caf\xe9"'), "export.json")
    with pytest.raises(UnreadableInputError) as raised:
        read_inputs([path])
    assert "not text (bytes that are neither UTF-8 nor UTF-16)" in str(raised.value)


@pytest.mark.parametrize(
    ("control", "says"),
    [
        ({"compute_node_group_id": "pcs_abcdef01", "at": 1}, "a lifeguard_replay line needs"),
        ({"compute_node_group_id": "pcs_abcdef01", "update_config": {}, "at": 10**20}, "at (epoch ms)"),
        (
            {"compute_node_group_id": "pcs_abcdef01", "update_config": [], "at": 1},
            "update_config (an object)",
        ),
    ],
)
def test_a_broken_control_line_is_an_error_naming_its_line(
    tmp_path: Path, control: dict[str, Any], says: str
) -> None:
    path = write(tmp_path, GOOD + json.dumps({"lifeguard_replay": control}) + "\n")
    with pytest.raises(ReplayError) as raised:
        read_inputs([path])
    assert str(raised.value).startswith(f"{path}:9: a lifeguard_replay line needs")
    assert says in str(raised.value)


def test_a_missing_file_or_a_directory_is_one_clean_error(tmp_path: Path) -> None:
    with pytest.raises(UnreadableInputError, match=r"nope\.jsonl: cannot read it: No such file or directory"):
        read_inputs([tmp_path / "nope.jsonl"])
    with pytest.raises(UnreadableInputError, match="cannot read it: Is a directory"):
        read_inputs([tmp_path])


def test_a_misspelt_streams_name_is_told_with_the_recorded_ones() -> None:
    """`lifeguard replay article-terminate-loo` said only `No such file or directory`, where `simulate`
    lists its built-in scenarios: a bare name is told with the recorded streams' names."""
    with pytest.raises(UnreadableInputError) as raised:
        read_inputs([Path("article-terminate-loo")])
    said = str(raised.value)
    assert said.startswith("article-terminate-loo: cannot read it: No such file or directory, nor is it a")
    assert "article-terminate-loop, " in said
    assert "\n" not in said


def test_a_file_over_the_size_cap_is_refused_unread(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(replay_inputs, "MAX_FILE_BYTES", 1000)
    big = write(tmp_path, GOOD * 2)
    with pytest.raises(UnreadableInputError, match=r"input\.jsonl: over the 0 MB a replay reads"):
        read_inputs([big])
    bomb = write(tmp_path, gzip.compress(b" " * 5000), "bomb.json.gz")
    with pytest.raises(UnreadableInputError, match=r"bomb\.json\.gz: over .* \(once uncompressed\)"):
        read_inputs([bomb])
    with pytest.raises(UnreadableInputError, match="a gzip file that cannot be read"):
        read_inputs([write(tmp_path, gzip.compress(GOOD.encode())[:40], "cut.json.gz")])


# -- through the CLI: exit 2 and one line, before any local AWS starts --


def test_the_cli_says_a_wrong_input_in_one_line_and_exits_2(tmp_path: Path) -> None:
    result = runner.invoke(app, ["replay", str(LOOP), str(write(tmp_path, CONFIG, "config.json"))])
    assert result.exit_code == 2
    [line] = result.stderr.splitlines()
    assert line.startswith(f"lifeguard replay: {tmp_path}/config.json: a nodeLifecycleActions config:")
    assert "skipped" not in result.output


@pytest.mark.parametrize(
    "location",
    [
        "foo",
        "",
        "bucket/key",
        "s3://bucket",
        "s3://bucket/",
        "https://example.com",
        "https://example.com/",
        "http://example.com/lifeguard.pyz",
        "file:///tmp/lifeguard.pyz",
        "s3://B/key",
        "https://example.com/" + "x" * 1100,
        "https://exa mple.com/x",
    ],
)
def test_a_node_bundle_that_is_not_an_s3_or_https_location_is_refused_before_anything_runs(
    tmp_path: Path, location: str
) -> None:
    with pytest.raises(InvalidNodeBundleError, match="give s3://BUCKET/KEY or https://HOST/PATH"):
        replay([tmp_path / "never-read.jsonl"], node_bundle=location)


def test_a_node_bundle_in_a_bucket_of_a_name_s3_cannot_have_says_so(tmp_path: Path) -> None:
    """`s3://b/key` has the form asked for: what is wrong is the bucket's name, too short for S3."""
    with pytest.raises(InvalidNodeBundleError, match=r"\(an S3 bucket's name is 3 to 63 characters\)"):
        replay([tmp_path / "never-read.jsonl"], node_bundle="s3://b/lifeguard/lifeguard-node.pyz")


def test_a_refused_node_bundle_repeats_no_secret(tmp_path: Path) -> None:
    location = "https://user:hunter2@example.com/?X-Amz-Signature=abc123"
    result = runner.invoke(app, ["replay", "--node-bundle", location, str(LOOP)])
    assert result.exit_code == 2
    assert "--node-bundle 'https://example.com/': not a node bundle location" in result.stderr
    assert "hunter2" not in result.output
    assert "abc123" not in result.output


@pytest.mark.parametrize(
    "location",
    [
        "s3://lifeguard-artifacts-123456789012/node/lifeguard-node.pyz",
        "https://downloads.example.com/lifeguard/lifeguard-node.pyz",
        "https://downloads.example.com/lifeguard-node.pyz?X-Amz-Signature=abc",
    ],
)
def test_a_node_bundle_in_s3_or_over_https_is_taken(location: str) -> None:
    assert node_bundle_at(location).location == location


# -- replayed: an export of the scaling log and of a node's reports, and a recorded event of Lifeguard's --


@pytest.mark.integration
def test_exports_and_a_recorded_event_replay_as_the_stream_does() -> None:
    result = runner.invoke(
        app,
        [
            "replay",
            "--json",
            "--mode",
            "notify",
            str(EXPORTS / "filter-log-events-scaling-log.json"),
            str(EXPORTS / "get-log-events-node-reports.json"),
            str(EVENTS / "eventbridge" / "remediation-applied.json"),
        ],
    )
    assert result.exit_code == 0, result.output
    document = json.loads(result.stdout)
    kinds = [event["detail-type"] for event in document["events"]]
    # The three files interleaved by time, as their entries arrived: the node's report before the failure
    # PCS logged after it, so the detection names its suspect at once; the recorded event at its own time.
    assert kinds == ["BootstrapLoopDetected", "RemediationSkipped", "RemediationApplied"]
    detections = [e["detail"] for e in document["events"] if e["detail-type"] == "BootstrapLoopDetected"]
    assert detections[0]["failures"][0]["instance_id"] == "i-059b4b99b4f2e9739"
    assert detections[0]["suspect"]["script"] == "fail-terminate"
    assert document["skipped_records"] == 0
    # The recorded event went where the template routes it: notify (SNS and Slack), not remediate.
    subjects = [n["subject"] for n in document["notifications"] if n["channel"] == "sns"]
    assert len(subjects) == 3
    assert subjects[-1].startswith("[Lifeguard]")


def test_files_are_interleaved_by_time_each_files_order_kept() -> None:
    """Items as they would have arrived: by time across files, a file's own order kept (a late record stays
    where its file puts it), the first file first at a tie, an item of no time with its file's neighbour
    before it, or the first after it when it leads (it went ahead of every other file's)."""
    from types import SimpleNamespace

    from lifeguard_cli.replay.inputs import as_arrived

    def items(*times: int | None, file: str) -> list[Any]:
        return [SimpleNamespace(at=at, name=f"{file}{n}") for n, at in enumerate(times)]

    scaling = items(10, 30, 20, 50, file="s")  # s2 (20) delivered late, after s1 (30)
    reports = items(None, 25, None, 40, file="r")  # r0 leads with no time; r2 goes with r1
    merged = as_arrived([scaling, reports])
    assert [item.name for item in merged] == ["s0", "r0", "r1", "r2", "s1", "s2", "r3", "s3"]
    assert [item.name for item in as_arrived([items(5, file="a"), items(5, file="b")])] == ["a0", "b0"]
