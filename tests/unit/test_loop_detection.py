"""The detection remediation acts on: read from a BootstrapLoopDetected detail held to the event contract,
refused with every problem named when it cannot be matched with an open episode."""

from __future__ import annotations

from typing import Any

import pytest

from lifeguard.event_contract import make_detail
from lifeguard.remediation import LoopDetection

FINGERPRINT = "a" * 64


def detail(**changed: Any) -> dict[str, Any]:
    fields: dict[str, Any] = {
        "episode_id": "ep-0123456789abcdef",
        "cluster_id": "pcs_abc123de45",
        "compute_node_group_id": "pcs_abcdef01",
        "kind": "loop",
        "failures": [{"instance_id": "i-0123456789abcdef0", "event_timestamp": 1792545162000}],
        "suspect": {"stage": "nodeBootstrapped", "script": "fail-terminate", "on_error": "TERMINATE"},
        "config_fingerprint": FINGERPRINT,
        "config_modified_at": 1792544000000,
        "revision": 2,
    }
    return make_detail(**{**fields, **changed})


def test_a_valid_detail_is_a_detection_with_what_remediation_reads() -> None:
    detection = LoopDetection.from_detail(detail())
    assert isinstance(detection, LoopDetection)
    assert (detection.episode_id, detection.revision, detection.config_fingerprint) == (
        "ep-0123456789abcdef",
        2,
        FINGERPRINT,
    )
    assert detection.suspect_script == ("nodeBootstrapped", "fail-terminate")


@pytest.mark.parametrize(
    ("changed", "problem"),
    [
        ({"episode_id": None}, "episode_id: required"),
        ({"config_fingerprint": None}, "config_fingerprint: required"),
        ({"config_modified_at": None}, "config_modified_at: required"),
        ({"cluster_id": "not a cluster"}, "cluster_id: "),
        ({"revision": "two"}, "revision: "),
    ],
)
def test_a_detail_that_cannot_be_matched_is_refused_with_its_problem_named(
    changed: dict[str, Any], problem: str
) -> None:
    refused = LoopDetection.from_detail(detail(**changed))
    assert not isinstance(refused, LoopDetection)
    cleaned, problems = refused
    assert any(p.startswith(problem) for p in problems), problems
    assert cleaned["compute_node_group_id"] == "pcs_abcdef01"  # what is valid is kept, for the audit


def test_an_invalid_value_is_named_once_not_also_as_missing() -> None:
    refused = LoopDetection.from_detail(detail(episode_id=7))
    assert not isinstance(refused, LoopDetection)
    assert [p.split(":", 1)[0] for p in refused[1]] == ["episode_id"]


def test_what_is_not_an_object_is_refused() -> None:
    refused = LoopDetection.from_detail(["not", "a", "detail"])
    assert not isinstance(refused, LoopDetection)
    assert refused[1][0].startswith("detail: expected a JSON object")


def test_a_detection_without_a_suspect_names_no_script() -> None:
    detection = LoopDetection.from_detail(detail(suspect=None))
    assert isinstance(detection, LoopDetection)
    assert detection.suspect_script is None


def test_a_partial_suspect_is_refused_by_the_contract_not_guessed_at() -> None:
    refused = LoopDetection.from_detail(detail(suspect={"stage": "nodeBootstrapped"}))
    assert not isinstance(refused, LoopDetection)
    assert refused[1][0].startswith("suspect: ")
