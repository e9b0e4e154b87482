from __future__ import annotations

import copy
import hashlib
import json
from collections.abc import Callable
from typing import Any, get_args

import pytest

from lifeguard.errors import InvalidLifecycleConfigError
from lifeguard.lifecycle import (
    ExecutionPolicy,
    NodeLifecycleActions,
    OnError,
    ScriptCachingPolicy,
    StageName,
    canonical_json,
    diff_configs,
    fingerprint_of,
    render_diff,
)
from lifeguard.lifecycle_rules import (
    EXECUTION_POLICIES,
    ON_ERRORS,
    SCRIPT_CACHING_POLICIES,
    STAGES,
    holds_quarantine,
    ready_checks,
    terminating_scripts,
)
from tests.conftest import load_event


def article(name: str) -> dict[str, Any]:
    data: dict[str, Any] = load_event(f"configs/article-{name}.json")
    return data


def test_static_enum_types_are_the_models_enums() -> None:
    assert get_args(OnError) == ON_ERRORS
    assert get_args(ExecutionPolicy) == EXECUTION_POLICIES
    assert get_args(ScriptCachingPolicy) == SCRIPT_CACHING_POLICIES
    assert get_args(StageName) == STAGES


def test_omitted_fields_take_pcs_defaults_but_stay_omitted() -> None:
    config = NodeLifecycleActions.from_api(article("stop-sequence"))
    [(_, _, failing), (_, _, after), (_, _, ready)] = list(config.scripts())
    assert failing.effective_on_error == "STOP_SEQUENCE"
    assert after.on_error is None
    assert after.effective_on_error == "TERMINATE"
    assert ready.effective_execution_policy == "FIRST_BOOT_ONLY"
    assert config.effective_script_caching_policy == "CACHE_ONCE"
    assert "onError" not in config.to_api()["stages"]["nodeBootstrapped"][1]
    assert "scriptCachingPolicy" not in config.to_api()


@pytest.mark.parametrize("name", ["first-boot-every-boot", "stop-sequence", "terminate", "reverted"])
def test_article_configs_round_trip_exactly(name: str) -> None:
    data = article(name)
    assert NodeLifecycleActions.from_api(data).to_api() == data


def test_scripts_run_in_stage_order_then_list_order() -> None:
    config = NodeLifecycleActions.from_api(article("first-boot-every-boot"))
    assert [(stage, script.name) for stage, _, script in config.scripts()] == [
        ("nodeBootstrapped", "record-first-boot"),
        ("nodeBootstrapped", "record-every-boot"),
        ("nodeReady", "ready-check"),
    ]
    assert config.find_script("nodeBootstrapped", "record-every-boot") is not None
    assert config.find_script("nodeReady", "record-every-boot") is None


def test_fingerprint_ignores_key_order_and_tracks_content() -> None:
    data = article("terminate")
    shuffled = json.loads(json.dumps(data, sort_keys=True))
    shuffled["stages"] = dict(reversed(list(shuffled["stages"].items())))
    a = NodeLifecycleActions.from_api(data)
    b = NodeLifecycleActions.from_api(shuffled)
    assert a.fingerprint() == b.fingerprint()
    changed = copy.deepcopy(data)
    changed["stages"]["nodeBootstrapped"][0]["onError"] = "STOP_SEQUENCE"
    assert NodeLifecycleActions.from_api(changed).fingerprint() != a.fingerprint()
    assert len(a.fingerprint()) == 64


def test_canonical_json_is_the_compact_sorted_utf8_text_fingerprints_are_made_of() -> None:
    # Fingerprints are stored (states, ledgers) and compared across releases: the text they are made of
    # stays the same, non-ASCII written as itself.
    value = {"b": ["é", 1.5, None], "a": {"z": True, "y": "x"}}
    assert canonical_json(value) == '{"a":{"y":"x","z":true},"b":["é",1.5,null]}'
    assert fingerprint_of(value) == hashlib.sha256(canonical_json(value).encode()).hexdigest()


def test_every_problem_is_reported_at_once_with_its_path() -> None:
    with pytest.raises(InvalidLifecycleConfigError) as caught:
        NodeLifecycleActions.from_api(load_event("configs/invalid-many-problems.json"))
    paths = [problem.path for problem in caught.value.problems]
    assert paths == [
        "scriptCachingPolicy",
        "stages.nodeBootstrapped[0].name",
        "stages.nodeBootstrapped[0].scriptSource.scriptLocation",
        "stages.nodeBootstrapped[0].scriptSource.checksum",
        "stages.nodeBootstrapped[0].arguments",
        "stages.nodeBootstrapped[0].executionPolicy",
        "stages.nodeBootstrapped[0].timeout",
        "stages.nodeBootstrapped[1].scriptSource",
        "stages.nodeReady",
    ]
    assert "9 problems" in str(caught.value)


def test_path_prefix_points_into_a_request_document() -> None:
    with pytest.raises(InvalidLifecycleConfigError) as caught:
        NodeLifecycleActions.from_api({"stages": {"nodeReady": []}}, path="nodeLifecycleActions")
    assert [p.path for p in caught.value.problems] == ["nodeLifecycleActions.stages.nodeReady"]


def test_model_validate_also_enforces_the_rules() -> None:
    data = article("terminate")
    data["stages"]["nodeBootstrapped"][1]["name"] = "fail-terminate"
    with pytest.raises(ValueError, match="unique within a stage"):
        NodeLifecycleActions.model_validate(data)


@pytest.mark.parametrize(
    ("mutate", "path", "message"),
    [
        (lambda s: s.update(onError="TERMINATED"), "stages.nodeBootstrapped[0].onError", "is not one of"),
        (lambda s: s.update(name=""), "stages.nodeBootstrapped[0].name", "at least 1 required"),
        (lambda s: s.update(name="x" * 65), "stages.nodeBootstrapped[0].name", "at most 64 allowed"),
        (lambda s: s.update(name="-lead"), "stages.nodeBootstrapped[0].name", "must start with"),
        (lambda s: s.update(name="with space ok"), None, None),
        (lambda s: s.update(arguments=["a" * 257]), "stages.nodeBootstrapped[0].arguments[0]", "at most 256"),
        (lambda s: s.update(arguments="a b"), "stages.nodeBootstrapped[0].arguments", "expected an array"),
        (
            lambda s: s["scriptSource"].update(checksum="Z" * 64),
            "stages.nodeBootstrapped[0].scriptSource.checksum",
            "sha256 digest",
        ),
        (
            lambda s: s["scriptSource"].update(scriptLocation="http://example.com/x.sh"),
            "stages.nodeBootstrapped[0].scriptSource.scriptLocation",
            "s3://bucket/key or an https://host/path",
        ),
        (
            lambda s: s["scriptSource"].update(scriptLocation="s3://b/setup.sh"),  # a valid location's form
            "stages.nodeBootstrapped[0].scriptSource.scriptLocation",
            "(a bucket of 3 to 63 lowercase letters, digits, '.' and '-'; a host with its domain",
        ),
        (
            lambda s: s["scriptSource"].update(scriptLocation="https://example.com/x.sh", s3VersionId="v1"),
            "stages.nodeBootstrapped[0].scriptSource.s3VersionId",
            "only allowed with an s3://",
        ),
        (lambda s: s.pop("scriptSource"), "stages.nodeBootstrapped[0].scriptSource", "is required"),
        (lambda s: s.update(onError=None), "stages.nodeBootstrapped[0].onError", "got null"),
    ],
)
def test_invalid_script_fields_are_rejected_with_their_path(
    mutate: Any, path: str | None, message: str | None
) -> None:
    data = article("terminate")
    mutate(data["stages"]["nodeBootstrapped"][0])
    if path is None:
        NodeLifecycleActions.from_api(data)
        return
    with pytest.raises(InvalidLifecycleConfigError) as caught:
        NodeLifecycleActions.from_api(data)
    [problem] = caught.value.problems
    assert problem.path == path
    assert message is not None
    assert message in problem.message


def test_twenty_scripts_a_stage_pass_and_twenty_one_fail() -> None:
    def stage(count: int) -> dict[str, Any]:
        scripts = [
            {"name": f"s{i}", "scriptSource": {"scriptLocation": "s3://bkt/x.sh"}} for i in range(count)
        ]
        return {"stages": {"nodeBootstrapped": scripts}}

    NodeLifecycleActions.from_api(stage(20))
    with pytest.raises(InvalidLifecycleConfigError, match="has 21 items; at most 20 allowed"):
        NodeLifecycleActions.from_api(stage(21))


def test_same_name_in_two_stages_is_allowed() -> None:
    data = article("terminate")
    data["stages"]["nodeReady"][0]["name"] = "fail-terminate"
    NodeLifecycleActions.from_api(data)


def test_diff_names_the_script_the_field_and_both_values() -> None:
    before = NodeLifecycleActions.from_api(article("terminate"))
    after_data = article("terminate")
    after_data["stages"]["nodeBootstrapped"][0]["onError"] = "STOP_SEQUENCE"
    after = NodeLifecycleActions.from_api(after_data)
    [change] = diff_configs(before, after)
    assert change.to_detail() == {
        "path": "stages.nodeBootstrapped[0].onError",
        "old": "TERMINATE",
        "new": "STOP_SEQUENCE",
    }
    assert (change.stage, change.script, change.field) == ("nodeBootstrapped", "fail-terminate", "onError")
    assert change.describe() == "nodeBootstrapped › fail-terminate: onError TERMINATE → STOP_SEQUENCE"


def test_diff_shows_defaults_for_omitted_fields() -> None:
    before = NodeLifecycleActions.from_api(article("terminate"))
    after_data = article("terminate")
    after_data["stages"]["nodeBootstrapped"][1]["onError"] = "CONTINUE"
    [change] = diff_configs(before, NodeLifecycleActions.from_api(after_data))
    assert change.old is None
    assert change.describe() == "nodeBootstrapped › record-after-fail: onError TERMINATE (default) → CONTINUE"


def test_diff_of_the_articles_revert_lists_the_removed_script() -> None:
    changes = diff_configs(
        NodeLifecycleActions.from_api(article("terminate")),
        NodeLifecycleActions.from_api(article("reverted")),
    )
    assert [c.path for c in changes] == ["stages.nodeBootstrapped[0]"]
    assert changes[0].new is None
    assert changes[0].old["name"] == "fail-terminate"
    assert render_diff(changes) == (
        "nodeBootstrapped › fail-terminate: removed "
        "(s3://lca-scripts-example/scripts/fail.sh, onError TERMINATE)"
    )


def test_diff_reports_added_scripts_reorder_and_caching_policy() -> None:
    before = NodeLifecycleActions.from_api(article("first-boot-every-boot"))
    data = article("first-boot-every-boot")
    data["scriptCachingPolicy"] = "REFRESH_ON_REBOOT"
    data["stages"]["nodeBootstrapped"].reverse()
    data["stages"]["nodeReady"].append(
        {"name": "drain", "scriptSource": {"scriptLocation": "s3://bkt/drain.sh"}, "onError": "CONTINUE"}
    )
    changes = diff_configs(before, NodeLifecycleActions.from_api(data))
    assert [(c.path, c.field) for c in changes] == [
        ("scriptCachingPolicy", "scriptCachingPolicy"),
        ("stages.nodeBootstrapped", "order"),
        ("stages.nodeReady[1]", None),
    ]
    assert "CACHE_ONCE (default) → REFRESH_ON_REBOOT" in changes[0].describe()
    assert changes[2].describe() == "nodeReady › drain: added (s3://bkt/drain.sh, onError CONTINUE)"


def test_no_change_reads_as_such() -> None:
    config = NodeLifecycleActions.from_api(article("terminate"))
    assert diff_configs(config, config) == []
    assert render_diff([]) == "no change"


def test_which_scripts_a_configuration_holds_and_whether_it_drains_kept_nodes() -> None:
    from lifeguard.lifecycle_rules import DRAIN_SCRIPT_NAME, drains_kept_nodes, holds_script

    actions = {
        "stages": {
            "nodeBootstrapped": [{"name": "mount-shared", "scriptSource": {"scriptLocation": "s3://b/m.sh"}}],
            "nodeReady": [{"name": DRAIN_SCRIPT_NAME, "scriptSource": {"scriptLocation": "s3://b/d.pyz"}}],
        }
    }
    assert holds_script(actions, "nodeBootstrapped", "mount-shared") is True
    assert holds_script(actions, "nodeReady", "mount-shared") is False
    assert holds_script(None, "nodeBootstrapped", "mount-shared") is False
    assert drains_kept_nodes(actions) is True
    assert drains_kept_nodes({"stages": {"nodeReady": []}}) is False
    assert drains_kept_nodes({"stages": "garbage"}) is False


def test_a_script_without_on_error_terminates_the_node_as_pcs_defaults() -> None:
    actions = article("terminate")  # record-after-fail gives no onError; ready-check is CONTINUE
    assert terminating_scripts(actions) == {
        ("nodeBootstrapped", "fail-terminate"),
        ("nodeBootstrapped", "record-after-fail"),
    }
    ready = copy.deepcopy(actions)
    del ready["stages"]["nodeReady"][0]["onError"]
    assert ready_checks(ready) == {("nodeReady", "ready-check")}


def test_only_lifeguards_own_stop_sequence_holds_a_quarantine() -> None:
    # The owners' STOP_SEQUENCE script is theirs: a configuration holds Lifeguard's quarantine only when a
    # script Lifeguard switched is still under STOP_SEQUENCE (or its drain step is there).
    actions = copy.deepcopy(article("terminate"))
    actions["stages"]["nodeBootstrapped"][0]["onError"] = "STOP_SEQUENCE"
    asked: list[bool] = []

    def quarantined(scripts: set[tuple[str, str]]) -> Callable[[], set[tuple[str, str]]]:
        def read() -> set[tuple[str, str]]:
            asked.append(True)
            return scripts

        return read

    assert holds_quarantine(actions, quarantined({("nodeBootstrapped", "fail-terminate")}))
    assert not holds_quarantine(actions, quarantined({("nodeBootstrapped", "record-after-fail")}))
    assert not holds_quarantine(actions, quarantined(set()))
    asked.clear()
    assert not holds_quarantine(article("terminate"), quarantined({("nodeBootstrapped", "fail-terminate")}))
    assert asked == []  # no script under STOP_SEQUENCE: the ledger is not read
