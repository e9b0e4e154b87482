"""`lifeguard replay` reads CloudTrail's records of PCS's calls (`replay.inputs`): an EventBridge event, a
bare record wrapped as EventBridge delivers it, or the pretty-printed recorded file; each names its group
and when, and the configuration the call set only when it succeeded."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from lifeguard_cli.replay.inputs import ApiCall, LogLines, api_call, read_inputs, seen_groups
from tests.conftest import EVENTS, load_event

EVENT = EVENTS / "cloudtrail" / "update-compute-node-group.json"
STREAM = EVENTS / "streams" / "cloudtrail-risky-change-then-loop.jsonl"


def recorded() -> dict[str, Any]:
    event: dict[str, Any] = load_event("cloudtrail/update-compute-node-group.json")
    return event


def test_a_bare_record_is_wrapped_as_eventbridge_delivers_it() -> None:
    call = api_call(recorded()["detail"])
    assert call is not None
    assert (call.event["source"], call.event["detail-type"]) == ("aws.pcs", "AWS API Call via CloudTrail")
    assert call.event["detail"] == recorded()["detail"]
    assert (call.group, call.at, call.name) == (
        ("pcs_abc123de45", "pcs_abcdef01"),
        1792544400000,
        "lca-static",
    )
    assert call.config == recorded()["detail"]["requestParameters"]["nodeLifecycleActions"]


def test_a_failed_call_sets_no_configuration() -> None:
    event = recorded()
    event["detail"]["errorCode"] = "ValidationException"
    call = api_call(event)
    assert call is not None
    assert call.config is None


def test_other_lines_are_not_calls() -> None:
    assert api_call({"eventSource": "ec2.amazonaws.com"}) is None
    assert api_call({"detail-type": "BootstrapLoopDetected", "source": "lifeguard"}) is None
    assert api_call({"status_code": "LAUNCHED"}) is None


def test_the_recorded_file_and_the_stream_line_are_read_as_the_same_call(tmp_path: Path) -> None:
    [from_file] = read_inputs([EVENT]).items
    inputs = read_inputs([STREAM])
    calls = [item for item in inputs.items if isinstance(item, ApiCall)]
    assert isinstance(from_file, ApiCall)
    assert [call.record for call in calls] == [from_file.record]
    assert inputs.skipped == 0
    assert all(isinstance(item, ApiCall | LogLines) for item in inputs.items)
    one_line = tmp_path / "one.jsonl"
    one_line.write_text(json.dumps(recorded()) + "\n")
    assert [item.record for item in read_inputs([one_line]).items if isinstance(item, ApiCall)] == [
        from_file.record
    ]


def test_a_call_names_its_group_from_when_it_was_made() -> None:
    [group] = seen_groups(read_inputs([EVENT]).items)
    assert (group.cluster_id, group.group_id, group.earliest, group.name) == (
        "pcs_abc123de45",
        "pcs_abcdef01",
        1792544400000,
        "lca-static",
    )


def test_calls_that_set_no_configuration_are_passed_over_wherever_they_are(tmp_path: Path) -> None:
    read_call = recorded()["detail"] | {"eventName": "GetComputeNodeGroup", "readOnly": True}
    other_service = {"eventSource": "ec2.amazonaws.com", "eventName": "RunInstances", "eventTime": "x"}
    via_eventbridge = {"source": "aws.ec2", "detail-type": "AWS API Call via CloudTrail", "detail": {}}
    lines = [read_call, other_service, via_eventbridge, recorded()]
    path = tmp_path / "calls.jsonl"
    path.write_text("".join(json.dumps(line) + "\n" for line in lines))
    inputs = read_inputs([path])
    assert [item.record for item in inputs.items if isinstance(item, ApiCall)] == [recorded()["detail"]]
    assert len(inputs.items) == 1
    assert (inputs.skipped, inputs.notes) == (0, ())


def test_cloudtrail_lookup_events_output_is_read_as_its_records_oldest_first(tmp_path: Path) -> None:
    """`aws cloudtrail lookup-events` lists the newest first, each record as the JSON text of its event's
    `CloudTrailEvent`: read as the records themselves, in the order they were made."""
    first = recorded()["detail"]
    later = {**first, "eventID": "later", "eventTime": "2026-10-21T01:30:00Z"}
    lookup = {
        "Events": [
            {
                "EventId": record["eventID"],
                "EventName": record["eventName"],
                "ReadOnly": "false",
                "EventTime": record["eventTime"],
                "EventSource": record["eventSource"],
                "Username": "someone",
                "Resources": [],
                "CloudTrailEvent": json.dumps(record),
            }
            for record in (later, first)
        ],
        "NextToken": "more",
    }
    path = tmp_path / "lookup-events.json"
    path.write_text(json.dumps(lookup, indent=4))
    inputs = read_inputs([path])
    assert [item.record["eventID"] for item in inputs.items if isinstance(item, ApiCall)] == [
        first["eventID"],
        "later",
    ]
    assert inputs.skipped == 0
    # Two calls of one second: still in the order they were made (the CLI lists the newest first).
    same = {**later, "eventID": "same-second", "eventTime": later["eventTime"]}
    lookup["Events"].insert(0, {**lookup["Events"][0], "CloudTrailEvent": json.dumps(same)})
    path.write_text(json.dumps(lookup))
    assert [item.record["eventID"] for item in read_inputs([path]).items if isinstance(item, ApiCall)] == [
        first["eventID"],
        "later",
        "same-second",
    ]
    lookup["Events"][0]["CloudTrailEvent"] = "{not json"
    path.write_text(json.dumps(lookup))
    damaged = read_inputs([path])
    assert damaged.skipped == 1
    assert damaged.notes == (
        f"{path}: skipped 1 damaged entry: line 1: Events[0].CloudTrailEvent (not JSON)",
    )


def test_lookup_events_names_its_first_problem_first(tmp_path: Path) -> None:
    from lifeguard_cli.replay.inputs import UnreadableInputError

    path = tmp_path / "lookup.json"
    events = [{"CloudTrailEvent": "{bad"}, {"CloudTrailEvent": 5}, {"CloudTrailEvent": "[]"}]
    path.write_text(json.dumps({"Events": events}))
    with pytest.raises(UnreadableInputError, match=r"Events\[0\]"):
        read_inputs([path])
