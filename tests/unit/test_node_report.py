from __future__ import annotations

import json
from typing import Any

import pytest

from lifeguard.node_report import LOG_TAIL_BYTES, NodeReport, NodeReportParseError, parse_node_report

REPORT: dict[str, Any] = {
    "kind": "script_run",
    "cluster_id": "pcs_abc123de45",
    "compute_node_group_id": "pcs_abcdef01",
    "instance_id": "i-059b4b99b4f2e9739",
    "node_id": "lca-static-1",
    "boot": 1,
    "first_boot": True,
    "stage": "nodeBootstrapped",
    "script": "fail-terminate",
    "on_error": "TERMINATE",
    "exit_code": 1,
    "outcome": "failed",
    "started_at": 1792544247,
    "ended_at": 1792544247,
    "log_tail": "intentional failure for verification\n",
    "script_sha256": "a" * 64,
}


def test_design_example_parses_and_round_trips() -> None:
    report = parse_node_report(json.dumps(REPORT))
    assert isinstance(report, NodeReport)
    assert report.failed
    assert json.loads(report.to_json()) == REPORT


def test_fetch_failure_has_no_exit_code() -> None:
    report = parse_node_report({**REPORT, "exit_code": None, "script_sha256": None})
    assert isinstance(report, NodeReport)
    assert report.exit_code is None


def test_over_long_log_tail_keeps_its_last_bytes() -> None:
    report = parse_node_report({**REPORT, "log_tail": "head\n" + "é" * 5000 + "END"})
    assert isinstance(report, NodeReport)
    assert report.log_tail.endswith("END")
    assert len(report.log_tail.encode()) <= LOG_TAIL_BYTES


@pytest.mark.parametrize(
    ("change", "reason"),
    [
        ({"kind": "heartbeat"}, "kind='heartbeat'"),
        ({"stage": "nodeBooted"}, "stage"),
        ({"on_error": "TERMINATED"}, "on_error"),
        ({"outcome": "crashed"}, "outcome"),
        ({"boot": 0}, "boot"),
        ({"instance_id": ""}, "instance_id"),
        ({"script_sha256": "xyz"}, "script_sha256"),
        ({"log_tail": "\ud800"}, "log_tail: Value error"),  # text UTF-8 cannot hold: a node's junk
        ({"node_id": "n\udfff"}, "node_id: Input should be a valid string"),
    ],
)
def test_bad_reports_become_typed_errors(change: dict[str, Any], reason: str) -> None:
    result = parse_node_report({**REPORT, **change}, where="pcs_abc123de45/i-059b4b99b4f2e9739")
    assert isinstance(result, NodeReportParseError)
    assert reason in result.message
    assert str(result).startswith("pcs_abc123de45/i-059b4b99b4f2e9739: ")


def test_non_json_is_a_typed_error() -> None:
    assert isinstance(parse_node_report(b"\xff\xfe"), NodeReportParseError)
    assert isinstance(parse_node_report("[]"), NodeReportParseError)
