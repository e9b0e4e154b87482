from __future__ import annotations

import gzip
import json
import re
from collections.abc import Callable
from pathlib import Path

import botocore
import pytest

from lifeguard import pcs_model
from lifeguard.errors import Problem, ServiceModelError
from lifeguard.pcs_model import API_VERSION, DATA_PATH, service_model, validate_shape


def test_vendored_model_is_botocores_own_model() -> None:
    installed = Path(botocore.__file__).parent / "data" / "pcs" / API_VERSION / "service-2.json.gz"
    vendored = DATA_PATH / "pcs" / API_VERSION / "service-2.json.gz"
    assert json.loads(gzip.decompress(vendored.read_bytes())) == json.loads(
        gzip.decompress(installed.read_bytes())
    )


@pytest.mark.parametrize(
    "damage",
    [
        lambda raw: raw[: len(raw) // 2],
        lambda raw: b"not gzip at all",
        lambda raw: gzip.compress(b"{not json"),
    ],
    ids=["truncated", "not-gzip", "not-json"],
)
def test_a_damaged_model_is_one_service_model_error(
    damage: Callable[[bytes], bytes], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    vendored = DATA_PATH / "pcs" / API_VERSION / "service-2.json.gz"
    damaged = tmp_path / "lifeguard"
    (damaged / "data" / "pcs" / API_VERSION).mkdir(parents=True)
    (damaged / "data" / "pcs" / API_VERSION / "service-2.json.gz").write_bytes(damage(vendored.read_bytes()))
    monkeypatch.setattr(pcs_model, "__file__", str(damaged / "pcs_model.py"))
    service_model.cache_clear()
    try:
        with pytest.raises(ServiceModelError, match="cannot read the PCS service model"):
            service_model()
    finally:
        service_model.cache_clear()


def test_vendored_model_knows_node_lifecycle_actions() -> None:
    members = service_model()["shapes"]["UpdateComputeNodeGroupRequest"]["members"]
    assert members["nodeLifecycleActions"]["shape"] == "UpdateNodeLifecycleActionsRequest"


def test_every_pattern_of_the_model_compiles_in_python() -> None:
    patterns = [s["pattern"] for s in service_model()["shapes"].values() if "pattern" in s]
    assert patterns
    for pattern in patterns:
        re.compile(pattern)


@pytest.mark.parametrize(
    ("shape", "value", "expected"),
    [
        (
            "OnError",
            "TERMINATED",
            Problem("", "'TERMINATED' is not one of TERMINATE, STOP_SEQUENCE, CONTINUE"),
        ),
        ("OnError", 3, Problem("", "expected a string, got number")),
        ("NodeLifecycleScriptArguments", ["x"] * 21, Problem("", "has 21 items; at most 20 allowed")),
        (
            "NodeLifecycleScriptArgument",
            "x" * 257,
            Problem("", "is 257 characters long; at most 256 allowed"),
        ),
        ("NodeLifecycleScriptList", [], Problem("", "has 0 items; at least 1 required")),
        ("ScriptSource", {}, Problem("scriptLocation", "is required")),
        ("ScriptSource", [], Problem("", "expected an object, got array")),
        ("MaxResults", 0, Problem("", "is 0; at least 1 required")),
        ("MaxResults", True, Problem("", "expected an integer, got boolean")),
        ("RequestTagMap", {}, Problem("", "has 0 entries; at least 1 required")),
        ("TagKey", "", Problem("", "is 0 characters long; at least 1 required")),
    ],
)
def test_validate_shape_reports_each_constraint(shape: str, value: object, expected: Problem) -> None:
    assert validate_shape(shape, value) == [expected]


def test_pattern_must_match_the_whole_string() -> None:
    [problem] = validate_shape("NodeLifecycleScriptNameString", "ok-name/../escape")
    assert problem.message.startswith("'ok-name/../escape' must start with a letter or digit")


@pytest.mark.parametrize("terminator", ["\n", "\r", "\u2028", "\u2029"])
def test_a_pattern_s_dot_matches_no_line_terminator_as_in_ecmascript(terminator: str) -> None:
    """`s3://…/.+`: Python's `.` takes `\r` and U+2028, ECMAScript's (the model's) and Java's do not."""
    location = f"s3://bucket/a{terminator}b.sh"
    assert validate_shape("ScriptSourceScriptLocationString", location)
    assert not validate_shape("ScriptSourceScriptLocationString", "s3://bucket/a b.sh")
    # A `.` in a class (the bucket's) is a dot.
    assert not validate_shape("ScriptSourceScriptLocationString", "s3://my.bucket.name/a.sh")


def test_unknown_member_is_reported_with_the_known_ones() -> None:
    [problem] = validate_shape("ScriptSource", {"scriptLocation": "s3://bucket/key", "url": "x"})
    assert problem.path == "url"
    assert "known: scriptLocation, s3VersionId, checksum" in problem.message


def test_paths_nest_through_structures_lists_and_maps() -> None:
    problems = validate_shape(
        "TagResourceRequest",
        {"resourceArn": "arn:aws:pcs:us-east-1:123456789012:cluster/pcs_a", "tags": {"k": 5}},
    )
    assert problems == [Problem('tags["k"]', "expected a string, got number")]


def test_a_lone_surrogate_is_no_text_pcs_can_be_sent() -> None:
    """`"\\ud800"` in a JSON config decodes to a lone surrogate: no UTF-8 request can carry it, so PCS could
    never hold it; the node ran it and failed the script with 126 under its onError instead."""
    script = {
        "name": "a",
        "scriptSource": {"scriptLocation": "s3://lca-scripts-example/k.sh"},
        "arguments": ["ok", "\ud800"],
    }
    problems = pcs_model.validate_shape("NodeLifecycleActions", {"stages": {"nodeBootstrapped": [script]}})
    assert [(p.path, p.message) for p in problems] == [
        ("stages.nodeBootstrapped[0].arguments[1]", "is not Unicode text (it holds a lone surrogate)")
    ]
    assert "Unicode" not in str(pcs_model.validate_shape("NodeLifecycleScriptNameString", "caf\u00e9"))
