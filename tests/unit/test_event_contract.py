"""Controller events: every detail carries every key, travels within EventBridge's entry size (trimmed in
a fixed order, no further than needed) and is held to the contract when read back."""

from __future__ import annotations

import copy
import json
from typing import Any

import pytest

from lifeguard.event_contract import (
    DETAIL_KEYS,
    ENTRY_MAX_BYTES,
    SOURCE,
    ControllerEvent,
    clean_detail,
    entry_size,
    make_detail,
    risks_found,
    risks_found_sentence,
)
from lifeguard.node_report import LOG_TAIL_BYTES
from lifeguard.notify.summary import summarize
from tests.conftest import ARTICLE_SUSPECT, applied_event, load_event

TRIMMED = "(trimmed to fit EventBridge; `lifeguard history` shows it)"


def test_a_bare_detail_has_every_design_key_empty() -> None:
    detail = make_detail()
    assert list(detail) == list(DETAIL_KEYS)
    assert detail["failures"] == []
    assert detail["diff"] == []
    assert detail["dry_run"] is False
    assert {key for key, value in detail.items() if value is not None} == {
        "failures",
        "diff",
        "dry_run",
        "signals",
        "kept",
        "risks",
    }


def test_given_fields_win_and_extra_fields_are_kept_after_the_design_keys() -> None:
    detail = make_detail(dry_run=True, failures=[{"instance_id": "i-1"}], revision=3)
    assert detail["dry_run"] is True
    assert detail["failures"] == [{"instance_id": "i-1"}]
    assert list(detail)[-1] == "revision"
    assert make_detail()["failures"] is not make_detail()["failures"]


def test_entry_size_counts_utf8_bytes_of_source_type_and_detail_only() -> None:
    entry = {"Source": "ab", "DetailType": "é", "Detail": "€", "EventBusName": "x" * 1000, "Other": "y"}
    assert entry_size(entry) == 2 + 2 + 3
    assert entry_size({}) == 0


def test_a_small_event_is_sent_as_it_is_on_the_given_bus() -> None:
    event = applied_event()
    entry = ControllerEvent("RemediationApplied", event["detail"], "ep-1:RemediationApplied:1").to_entry("lg")
    assert entry["Source"] == SOURCE
    assert entry["DetailType"] == "RemediationApplied"
    assert entry["EventBusName"] == "lg"
    assert json.loads(entry["Detail"]) == event["detail"]
    assert " " not in entry["Detail"].split('"log_tail"')[0]  # compact separators


def test_an_event_still_too_big_keeps_only_its_last_ten_failures_then_loses_its_diff() -> None:
    failures = [
        {"instance_id": f"i-{n:017d}", "scheduler_node_id": "lca-static-1", "event_timestamp": n}
        for n in range(100)
    ]
    diff = [
        {"path": f"stages.nodeReady[{n}].arguments", "old": "o" * 3000, "new": "n" * 3000} for n in range(50)
    ]
    detail = make_detail(episode_id="ep-1", failures=failures, diff=diff, suspect=ARTICLE_SUSPECT)
    original = copy.deepcopy(detail)
    entry = ControllerEvent("RemediationApplied", detail, "k").to_entry("bus")
    assert entry_size(entry) <= ENTRY_MAX_BYTES
    sent = json.loads(entry["Detail"])
    assert sent["suspect"]["log_tail"] == TRIMMED
    assert sent["suspect"]["script"] == "fail-terminate"
    assert sent["config_before"] is None  # nothing to trim is left as it was
    assert [f["event_timestamp"] for f in sent["failures"]] == list(range(90, 100))
    assert sent["diff"] == []
    assert sent["reason"] == "diff left out to fit EventBridge's 256 KB (`lifeguard history` shows them)."
    assert detail == original  # the event itself is not changed


def test_an_event_of_no_reason_trimmed_of_its_log_tail_alone_has_no_reason_still() -> None:
    suspect = {**ARTICLE_SUSPECT, "log_tail": "e" * 300_000}
    detail = make_detail(episode_id="ep-1", suspect=suspect)
    sent = json.loads(ControllerEvent("BootstrapLoopDetected", detail, "k").to_entry("bus")["Detail"])
    assert sent["suspect"]["log_tail"] == TRIMMED
    assert sent["reason"] is None  # not "": nothing was said, and nothing left out needs saying


def test_a_review_too_big_lists_its_first_risks_keeps_its_diff_and_says_how_many_it_found() -> None:
    """A review's risks went after its diff, and the cut was not said: its notice showed a risky change with
    no change listed, and counted the risks left (50) where its reason spoke of 80."""
    risks = [
        {"code": "unpinned", "path": f"stages.nodeReady[{n % 20}]", "message": "m" * 4000, "severity": "info"}
        for n in range(80)
    ]
    diff = [{"path": "stages.nodeReady[0].scriptSource.checksum", "old": "a" * 64, "new": "b" * 64}]
    said = "40 of the 80 risk(s) were there before this change (severity info)."
    detail = make_detail(diff=diff, risks=risks, reason=said)
    sent = json.loads(ControllerEvent("ConfigChangeReviewed", detail, "k").to_entry("bus")["Detail"])
    assert sent["diff"] == diff
    assert [r["path"] for r in sent["risks"]] == [r["path"] for r in risks[:50]]
    assert sent["reason"] == f"{said} The review found 80 risks; the event lists the first 50."
    assert risks_found(sent) == 80
    assert "with 80 risk(s)" in summarize("ConfigChangeReviewed", sent).headline
    # A review that listed its first 100 of 150 says the count once, of what it now lists.
    detail = make_detail(risks=[*risks, *risks[:20]], reason=risks_found_sentence(150))
    sent = json.loads(ControllerEvent("ConfigChangeReviewed", detail, "k").to_entry("bus")["Detail"])
    assert sent["reason"] == "The review found 150 risks; the event lists the first 50."
    assert risks_found(sent) == 150


# More than an entry holds once the configurations are out: what is trimmed after them.
_MANY_FAILURES = [
    {"instance_id": f"i-{n:017d}", "event_timestamp": n, "note": "x" * 3000} for n in range(100)
]


def _huge_config(tag: str) -> dict[str, Any]:
    """About 240 KB of valid lifecycle actions: 20 scripts a stage, long locations, 20 long arguments."""

    def script(n: int) -> dict[str, Any]:
        location = f"s3://lca-scripts-example/{tag}/{'d' * 880}/{n}.sh"
        return {"name": f"s{n}", "scriptSource": {"scriptLocation": location}, "arguments": ["a" * 256] * 20}

    return {"stages": {stage: [script(n) for n in range(20)] for stage in ("nodeBootstrapped", "nodeReady")}}


@pytest.mark.parametrize(
    ("detail_type", "kept"),
    [
        ("RemediationApplied", "`lifeguard history` shows them"),
        ("RemediationSkipped", "`lifeguard history` shows them"),
        ("ConfigChangeReviewed", "`aws pcs get-compute-node-group` shows the configuration in place"),
        # A detection's configuration is the group's, as PCS held it: no audit entry keeps it.
        ("BootstrapLoopDetected", "`aws pcs get-compute-node-group` shows the configuration in place"),
    ],
)
def test_configurations_left_out_to_fit_are_null_and_the_reason_says_so(detail_type: str, kept: str) -> None:
    """A configuration too big for the entry was replaced by a note where the contract has an object or
    null: the notification then listed it as "not valid in the event" (and a review's pointed to a history
    that does not keep it)."""
    detail = make_detail(
        cluster_id="pcs_abc123de45",
        compute_node_group_id="pcs_abcdef01",
        config_before=_huge_config("before"),
        config_after=_huge_config("after"),
        reason="Applied quarantine.",
        failures=_MANY_FAILURES,
    )
    entry = ControllerEvent(detail_type, detail, "k").to_entry("bus")
    assert entry_size(entry) <= ENTRY_MAX_BYTES
    sent = json.loads(entry["Detail"])
    assert (sent["config_before"], sent["config_after"], len(sent["failures"])) == (None, None, 10)
    assert sent["reason"] == (
        f"Applied quarantine. config_before and config_after left out to fit EventBridge's 256 KB ({kept})."
    )
    cleaned, problems = clean_detail(sent)
    assert problems == []
    assert cleaned["reason"] == sent["reason"]


def test_a_reason_at_its_bound_keeps_the_note_of_what_was_left_out() -> None:
    detail = make_detail(config_after=_huge_config("after"), reason="r" * 8000, failures=_MANY_FAILURES)
    sent = json.loads(ControllerEvent("RemediationApplied", detail, "k").to_entry("bus")["Detail"])
    assert sent["reason"].endswith(
        "config_after left out to fit EventBridge's 256 KB (`lifeguard history` shows them)."
    )
    assert len(sent["reason"]) <= 8000
    assert clean_detail(sent)[1] == []


def test_a_big_diff_is_kept_when_trimming_the_failures_is_enough() -> None:
    failures = [{"instance_id": f"i-{n}", "event_timestamp": n, "note": "x" * 3000} for n in range(100)]
    diff = [{"path": "stages.nodeBootstrapped[0].onError", "old": "TERMINATE", "new": "STOP_SEQUENCE"}]
    entry = ControllerEvent("RemediationApplied", make_detail(failures=failures, diff=diff), "k").to_entry(
        "b"
    )
    sent = json.loads(entry["Detail"])
    assert len(sent["failures"]) == 10
    assert sent["diff"] == diff


def test_to_dict_and_from_dict_round_trip() -> None:
    event = ControllerEvent("LoopResolved", make_detail(episode_id="ep-1"), "ep-1:LoopResolved:1")
    again = ControllerEvent.from_dict(json.loads(json.dumps(event.to_dict())))
    assert again == event
    assert event.to_dict()["detail-type"] == "LoopResolved"


@pytest.mark.parametrize("detail", [None, [], "detail", 3])
def test_a_detail_that_is_not_an_object_cleans_to_an_empty_detail_and_one_problem(detail: Any) -> None:
    cleaned, problems = clean_detail(detail)
    assert cleaned == make_detail()
    assert problems == [f"detail: expected a JSON object, got {type(detail).__name__}"]


def test_a_valid_detail_comes_through_clean_detail_unchanged_with_its_known_extras() -> None:
    detail = applied_event(revision=4)["detail"]
    cleaned, problems = clean_detail(detail)
    assert problems == []
    assert cleaned == detail
    assert (cleaned["revision"], cleaned["action"]) == (4, "quarantine")


def test_a_group_s_name_of_pcs_s_form_comes_through_beside_its_id() -> None:
    cleaned, problems = clean_detail({**applied_event()["detail"], "compute_node_group_name": "gpu-a100"})
    assert problems == []
    assert cleaned["compute_node_group_name"] == "gpu-a100"
    assert clean_detail(applied_event()["detail"])[0].get("compute_node_group_name") is None


def test_an_event_names_the_group_only_by_a_stored_name_of_pcs_s_form() -> None:
    from lifeguard.detection import DetectionSettings
    from lifeguard.event_contract import episode_event
    from lifeguard.group_state import Episode, GroupState, KnownConfig

    config = KnownConfig(modified_at=1, fingerprint="a" * 64, name="lca-static", checked_at=1)
    state = GroupState(cluster_id="pcs_abc123de45", group_id="pcs_abcdef01", config=config)
    episode = Episode(
        episode_id="ep-1", kind="loop", opened_at=1, config_modified_at=1, config_fingerprint="a" * 64
    )
    settings = DetectionSettings(mode="quarantine", threshold=2, window_minutes=60)
    assert episode_event("LoopResolved", state, episode, settings).detail["compute_node_group_name"] == (
        "lca-static"
    )
    config.name = "x" * 300 + "\n*<!channel>*"  # a state not stored as Lifeguard stores it
    detail = episode_event("LoopResolved", state, episode, settings).detail
    assert detail["compute_node_group_name"] is None
    state.config = None
    assert episode_event("LoopResolved", state, episode, settings).detail["compute_node_group_name"] is None


def test_the_recorded_events_are_clean() -> None:
    for name in ("bootstrap-loop-detected", "remediation-applied"):
        detail = load_event(f"eventbridge/{name}.json")["detail"]
        assert clean_detail(detail) == (detail, [])


def test_clean_detail_keeps_the_last_4_kib_of_a_log_tail_on_a_character_boundary() -> None:
    tail = "start " + "é" * LOG_TAIL_BYTES + " the real error"
    cleaned, problems = clean_detail(make_detail(suspect={**ARTICLE_SUSPECT, "log_tail": tail}))
    assert problems == []
    kept = cleaned["suspect"]["log_tail"]
    assert kept.endswith("é the real error")
    assert len(kept.encode()) <= LOG_TAIL_BYTES
    assert not kept.startswith("start")


def _nested(depth: int) -> dict[str, Any]:
    value: dict[str, Any] = {}
    for _ in range(depth):
        value = {"a": value}
    return value


@pytest.mark.parametrize(
    ("field", "value", "says"),
    [
        ("failures", [{"instance_id": f"i-{n}", "event_timestamp": n} for n in range(101)], "failures: List"),
        ("failures", [{"instance_id": "i-1", "event_timestamp": -1}], "failures: 0.event_timestamp"),
        ("suspect", {**ARTICLE_SUSPECT, "on_error": "TERMINATED"}, "suspect: on_error"),
        ("suspect", {**ARTICLE_SUSPECT, "exit_code": "1"}, "suspect: exit_code"),
        ("kind", "storm", "kind: Input should be"),
        ("mode", "fix", "mode: Input should be"),
        ("revision", 0, "revision: Input should be greater than or equal to 1"),
        ("revision", True, "revision: Input should be a valid integer"),
        ("reason", "r" * 8001, "reason: String should have at most 8000 characters"),
        ("diff", [{"path": "p" * 201}], "diff: 0.path"),
        ("reason", "bad \ud800", "reason: Input should be a valid string, unable to parse"),
        ("suspect", {**ARTICLE_SUSPECT, "log_tail": "\ud800"}, "suspect: log_tail: Value error"),
        ("config_after", _nested(5000), "config_after: nested too deep"),
        ("compute_node_group_name", "pcs_abcdef01", "compute_node_group_name: String should match"),
        ("compute_node_group_name", "gpu <!channel>", "compute_node_group_name: String should match"),
        ("compute_node_group_name", "g" * 26, "compute_node_group_name: String should have at most 25"),
        ("compute_node_group_name", 7, "compute_node_group_name: Input should be a valid string"),
    ],
)
def test_an_invalid_value_is_dropped_and_named(field: str, value: Any, says: str) -> None:
    detail = applied_event()["detail"]
    cleaned, problems = clean_detail({**detail, field: value})
    assert len(problems) == 1
    assert problems[0].startswith(says), problems[0]
    assert cleaned.get(field) in (None, [])
    assert cleaned["episode_id"] == "ep-1"


def test_the_signals_changed_by_kept_and_risks_of_design_are_held_to_their_shapes() -> None:
    detail, problems = clean_detail(
        make_detail(
            signals=["scaling_log", "node_reports"],
            changed_by={
                "arn": "arn:aws:iam::123456789012:user/alice",
                "at": 1792545162000,
                "source": "cloudtrail",
            },
            kept=[{"instance_id": "i-0123456789abcdef0", "drained": True}],
            risks=[{"code": "L101", "path": "stages.nodeBootstrapped[0]", "message": "fails the boot"}],
        )
    )
    assert problems == []
    assert detail["signals"] == ["scaling_log", "node_reports"]
    assert detail["changed_by"]["source"] == "cloudtrail"
    assert detail["kept"] == [{"instance_id": "i-0123456789abcdef0", "drained": True}]
    assert detail["risks"][0]["severity"] == "warning"


def test_bad_signals_changed_by_kept_and_risks_are_named_and_left_empty() -> None:
    detail, problems = clean_detail(
        make_detail(
            signals=["gossip"],
            changed_by={"source": "rumour"},
            kept=[{"instance_id": "not-an-instance"}],
            risks="everything",
        )
    )
    assert sorted(p.split(":", 1)[0] for p in problems) == ["changed_by", "kept", "risks", "signals"]
    assert (detail["signals"], detail["changed_by"], detail["kept"], detail["risks"]) == ([], None, [], [])
