"""The node side's report (`node.report.ScriptRunReport`, standard library) and the Lambdas' record class
(`node_report.NodeReport`) state one schema: same fields in the same order, and what the shipper sends
parses into an equal NodeReport, field for field."""

from __future__ import annotations

import dataclasses
import hashlib
import json
import types
import typing
from pathlib import Path
from typing import Any, ClassVar

import pytest

from lifeguard.node.executor import EXIT_TERMINATE, Executor, NodeIdentity
from lifeguard.node.fetch import ScriptFetcher
from lifeguard.node.layout import NodeLayout
from lifeguard.node.report import ScriptRunReport
from lifeguard.node.shipper import ReportSink, Shipper, ShipperIdentity
from lifeguard.node_report import NodeReport, parse_node_report

FIELDS = [f.name for f in dataclasses.fields(ScriptRunReport)]
FAILING = b"#!/bin/bash\necho 'intentional failure for verification'\nexit 1\n"
PASSING = b"#!/bin/bash\necho ready\n"


class BucketFetcher(ScriptFetcher):
    """Serves scripts from a dict, as S3 would."""

    scheme: ClassVar[str] = "s3"
    permissions: ClassVar[tuple[str, ...]] = ()

    def __init__(self, objects: dict[str, bytes]) -> None:
        self.objects = objects

    def fetch_once(self, location: str, version_id: str | None) -> bytes:
        return self.objects[location]


class ListSink(ReportSink):
    """Keeps what it is given, in order."""

    def __init__(self) -> None:
        self.messages: list[str] = []

    def put(self, messages: list[str]) -> None:
        self.messages.extend(messages)

    def recent(self, limit: int) -> list[str]:
        return self.messages[-limit:]


def allows_none(annotation: Any) -> bool:
    if typing.get_origin(annotation) in (typing.Union, types.UnionType):
        return type(None) in typing.get_args(annotation)
    return annotation is type(None)


def test_the_dataclass_has_exactly_the_models_fields_in_its_order() -> None:
    assert [f.name for f in dataclasses.fields(NodeReport)] == FIELDS


def test_a_field_is_optional_on_the_node_exactly_when_the_model_allows_none() -> None:
    hints = typing.get_type_hints(ScriptRunReport)
    node_side = {name: allows_none(hints[name]) for name in FIELDS}
    model_hints = typing.get_type_hints(NodeReport)
    model = {f.name: allows_none(model_hints[f.name]) for f in dataclasses.fields(NodeReport)}
    assert node_side == model


def full_report() -> ScriptRunReport:
    """A report with no field at the model's default, so a field lost on the way would show."""
    return ScriptRunReport(
        cluster_id="pcs_abc123de45",
        compute_node_group_id="pcs_abcdef01",
        instance_id="i-059b4b99b4f2e9739",
        node_id="lca-static-1",
        boot=2,
        first_boot=False,
        stage="nodeReady",
        script="mount fsx",
        on_error="STOP_SEQUENCE",
        exit_code=-2,
        outcome="failed",
        started_at=1_792_544_247,
        ended_at=1_792_544_249,
        log_tail="mount: /fsx: \u00e9chec\n",
        script_sha256="ab" * 32,
    )


def test_kind_is_always_script_run() -> None:
    assert full_report().kind == "script_run"
    fields = {name: getattr(full_report(), name) for name in FIELDS if name != "kind"}
    with pytest.raises(TypeError, match="kind"):
        ScriptRunReport(kind="other", **fields)


def test_every_field_survives_the_json_into_the_model() -> None:
    report = full_report()
    line = report.to_json()
    assert line == (
        '{"kind":"script_run","cluster_id":"pcs_abc123de45","compute_node_group_id":"pcs_abcdef01",'
        '"instance_id":"i-059b4b99b4f2e9739","node_id":"lca-static-1","boot":2,"first_boot":false,'
        '"stage":"nodeReady","script":"mount fsx","on_error":"STOP_SEQUENCE","exit_code":-2,'
        '"outcome":"failed","started_at":1792544247,"ended_at":1792544249,'
        '"log_tail":"mount: /fsx: \\u00e9chec\\n","script_sha256":"' + "ab" * 32 + '"}'
    )
    parsed = parse_node_report(line)
    assert isinstance(parsed, NodeReport), parsed
    assert parsed == NodeReport.model_validate(dataclasses.asdict(report))
    assert parsed.model_dump() == dataclasses.asdict(report)


SHIPPER_IDENTITY = ShipperIdentity("pcs_abc123de45", "pcs_abcdef01", "i-059b4b99b4f2e9739", None)


def booted_and_shipped(tmp_path: Path) -> list[str]:
    """One boot of the article's TERMINATE loop by the real executor (real bash), shipped by the real
    shipper into a list."""
    layout = booted(tmp_path)
    sink = ListSink()
    Shipper(layout, SHIPPER_IDENTITY, sink).run(once=True)
    return sink.messages


def booted(tmp_path: Path) -> NodeLayout:
    """The node root of one boot of the article's TERMINATE loop by the real executor (real bash)."""
    config = {
        "stages": {
            "nodeBootstrapped": [
                {
                    "name": "ok-first",
                    "scriptSource": {"scriptLocation": "s3://lca-scripts-example/scripts/ok.sh"},
                    "onError": "CONTINUE",
                },
                {
                    "name": "fail-terminate",
                    "scriptSource": {"scriptLocation": "s3://lca-scripts-example/scripts/fail.sh"},
                    "onError": "TERMINATE",
                },
                {
                    "name": "record-after-fail",
                    "scriptSource": {"scriptLocation": "s3://lca-scripts-example/scripts/ok.sh"},
                },
            ]
        }
    }
    fetcher = BucketFetcher(
        {
            "s3://lca-scripts-example/scripts/ok.sh": PASSING,
            "s3://lca-scripts-example/scripts/fail.sh": FAILING,
        }
    )
    layout = NodeLayout(tmp_path)
    identity = NodeIdentity("pcs_abc123de45", "lca", "pcs_abcdef01", "lca-static", "lca-static-1")
    result = Executor(config, layout, identity, fetchers={"s3": fetcher}, fetch_backoff_seconds=0).boot()
    assert result.exit_code == EXIT_TERMINATE
    return layout


def test_what_the_shipper_sends_parses_into_an_equal_node_report(tmp_path: Path) -> None:
    messages = booted_and_shipped(tmp_path)
    assert len(messages) == 3
    parsed = [parse_node_report(message) for message in messages]
    assert all(isinstance(report, NodeReport) for report in parsed), parsed
    for message, report in zip(messages, parsed, strict=True):
        assert isinstance(report, NodeReport)
        sent = json.loads(message)
        assert list(sent) == FIELDS
        assert report.model_dump() == sent
        assert message == json.dumps(sent, separators=(",", ":"))  # compact, ASCII, as shipped before
        assert message == ScriptRunReport(**{k: v for k, v in sent.items() if k != "kind"}).to_json()
    ok, failed, skipped = parsed
    assert isinstance(ok, NodeReport)
    assert isinstance(failed, NodeReport)
    assert isinstance(skipped, NodeReport)
    assert (ok.script, ok.outcome, ok.exit_code, ok.log_tail) == ("ok-first", "succeeded", 0, "ready\n")
    assert ok.script_sha256 == hashlib.sha256(PASSING).hexdigest()
    assert (failed.script, failed.on_error, failed.outcome, failed.exit_code) == (
        "fail-terminate",
        "TERMINATE",
        "failed",
        1,
    )
    assert failed.log_tail == "intentional failure for verification\n"
    assert (failed.node_id, failed.boot, failed.first_boot) == ("lca-static-1", 1, True)
    assert failed.script_sha256 == hashlib.sha256(FAILING).hexdigest()
    assert (skipped.script, skipped.outcome, skipped.exit_code, skipped.script_sha256) == (
        "record-after-fail",
        "skipped",
        None,
        None,
    )
    assert skipped.log_tail.startswith("the node is terminated")
