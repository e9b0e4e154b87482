"""The remediation actions' plans: what each would put in place, and what it says about it."""

from __future__ import annotations

import copy
import json
import re
from dataclasses import replace
from typing import Any

import pytest

from lifeguard.lifecycle import NodeLifecycleActions
from lifeguard.remediation import ACTIONS, DRAIN_SCRIPT_NAME, ActionContext, NodeBundle, action_for
from lifeguard.remediation.iac import ManagedBy
from lifeguard.risks import find_risks
from tests.conftest import load_event

TERMINATE = load_event("configs/article-terminate.json")
GOOD = load_event("configs/article-reverted.json")
# As the stack publishes it: a versioned bucket, the version and the sha256 (outputs of the template).
BUNDLE = NodeBundle(
    "s3://lifeguard-artifacts/lifeguard-node.pyz", "3HL4kqtJlcpXroDTDmJ-rmSpXd3dIbrHY", "ab" * 32
)


def script(config: dict[str, Any], stage: str, name: str) -> dict[str, Any]:
    return next(s for s in config["stages"][stage] if s["name"] == name)


def test_quarantine_switches_only_the_suspect_and_changes_nothing_else() -> None:
    plan = action_for("quarantine").plan(ActionContext(TERMINATE, ("nodeBootstrapped", "fail-terminate")))
    assert plan.changes_something
    after = plan.config_after
    assert after is not None
    assert script(after, "nodeBootstrapped", "fail-terminate")["onError"] == "STOP_SEQUENCE"
    expected = copy.deepcopy(TERMINATE)
    expected["stages"]["nodeBootstrapped"][0]["onError"] = "STOP_SEQUENCE"
    assert after == expected
    assert [c.to_detail() for c in plan.changes] == [
        {"path": "stages.nodeBootstrapped[0].onError", "old": "TERMINATE", "new": "STOP_SEQUENCE"}
    ]


def test_quarantine_without_a_suspect_switches_every_script_that_can_terminate_and_says_so() -> None:
    plan = action_for("quarantine").plan(ActionContext(TERMINATE, None))
    after = plan.config_after
    assert after is not None
    # record-after-fail has no onError: TERMINATE by default, so it can have failed the boot too.
    assert script(after, "nodeBootstrapped", "fail-terminate")["onError"] == "STOP_SEQUENCE"
    assert script(after, "nodeBootstrapped", "record-after-fail")["onError"] == "STOP_SEQUENCE"
    assert script(after, "nodeReady", "ready-check")["onError"] == "CONTINUE"
    assert any("suspect unknown" in note for note in plan.notes)


def test_quarantine_switches_the_scripts_that_ended_other_failing_nodes_boots_with_the_suspect() -> None:
    config = copy.deepcopy(TERMINATE)
    config["stages"]["nodeBootstrapped"].append(
        {"name": "install-gpu", "scriptSource": {"scriptLocation": "s3://lca-scripts/gpu.sh"}}
    )
    drain = {"name": DRAIN_SCRIPT_NAME, "scriptSource": {"scriptLocation": BUNDLE.location}}
    config["stages"]["nodeReady"].append(drain)  # the owners' copy, on PCS's default TERMINATE
    also = (
        ("nodeBootstrapped", "install-gpu"),
        ("nodeReady", "ready-check"),
        ("nodeReady", "gone"),
        ("nodeReady", DRAIN_SCRIPT_NAME),
    )
    plan = action_for("quarantine").plan(
        ActionContext(config, ("nodeBootstrapped", "fail-terminate"), also_failing=also)
    )
    after = plan.config_after
    assert after is not None
    assert script(after, "nodeBootstrapped", "fail-terminate")["onError"] == "STOP_SEQUENCE"
    assert script(after, "nodeBootstrapped", "install-gpu")["onError"] == "STOP_SEQUENCE"
    # Under CONTINUE already (it ends no boot), or not in the configuration: nothing to switch.
    assert script(after, "nodeReady", "ready-check")["onError"] == "CONTINUE"
    assert "onError" not in script(after, "nodeBootstrapped", "record-after-fail")  # no loop's script
    assert "onError" not in script(after, "nodeReady", DRAIN_SCRIPT_NAME)  # Lifeguard's own step
    assert plan.notes[0].startswith("onError STOP_SEQUENCE for fail-terminate, install-gpu:")
    assert (
        "also switched nodeBootstrapped › install-gpu: its failure ended the boot of other failing nodes"
        in (plan.notes)
    )


def test_quarantine_of_a_suspect_that_is_no_longer_in_the_config_falls_back_and_says_so() -> None:
    plan = action_for("quarantine").plan(ActionContext(TERMINATE, ("nodeBootstrapped", "renamed-away")))
    assert plan.changes_something
    assert any("not in the current configuration" in note for note in plan.notes)


def test_quarantine_with_the_node_bundle_adds_a_drain_step_first_in_node_ready() -> None:
    plan = action_for("quarantine").plan(
        ActionContext(TERMINATE, ("nodeBootstrapped", "fail-terminate"), node_bundle=BUNDLE)
    )
    after = plan.config_after
    assert after is not None
    drain = after["stages"]["nodeReady"][0]
    assert drain["name"] == DRAIN_SCRIPT_NAME
    assert drain["onError"] == "CONTINUE"
    # On every boot: a quarantined EVERY_BOOT script fails again on a reboot, and that node is drained too.
    assert drain["executionPolicy"] == "EVERY_BOOT"
    assert drain["scriptSource"] == {
        "scriptLocation": BUNDLE.location,
        "s3VersionId": BUNDLE.version_id,
        "checksum": BUNDLE.sha256,
    }
    assert drain["arguments"][:2] == ["drain", "--reason"]
    assert "fail-terminate" in drain["arguments"][2]
    # PCS would take it, and Lifeguard's own lint finds nothing it wrote unpinned.
    risks = find_risks(NodeLifecycleActions.from_api(after))
    assert not [r for r in risks if r.path.startswith("stages.nodeReady[0]")], risks
    again = action_for("quarantine").plan(ActionContext(after, None, node_bundle=BUNDLE))
    assert [s["name"] for s in (again.config_after or after)["stages"]["nodeReady"]].count(
        DRAIN_SCRIPT_NAME
    ) == 1


def test_quarantine_of_a_configuration_that_holds_the_drain_step_already_adds_no_second_one() -> None:
    """The owners kept Lifeguard's drain step through their own change (or added it as its message says),
    and the failing script is back on TERMINATE: the quarantine switches it and keeps the one drain step (a
    second of the same name would be a configuration PCS refuses, and the loop would go on)."""
    drained = (
        action_for("quarantine")
        .plan(ActionContext(TERMINATE, ("nodeBootstrapped", "fail-terminate"), node_bundle=BUNDLE))
        .config_after
    )
    assert drained is not None
    put_back = copy.deepcopy(drained)
    for script in put_back["stages"]["nodeBootstrapped"]:
        if script["name"] == "fail-terminate":
            script["onError"] = "TERMINATE"
    plan = action_for("quarantine").plan(
        ActionContext(put_back, ("nodeBootstrapped", "fail-terminate"), node_bundle=BUNDLE)
    )
    assert plan.changes_something
    assert plan.config_after == drained
    names = [script["name"] for script in plan.config_after["stages"]["nodeReady"]]
    assert names.count(DRAIN_SCRIPT_NAME) == 1


def test_a_drain_reason_naming_many_long_scripts_is_cut_to_an_argument_pcs_takes() -> None:
    """No suspect: every TERMINATE script is switched and named in the drain step's reason. Eight of 40
    characters make 372: PCS refuses an argument over 256, and the whole quarantine with it."""
    names = [f"step-{n}-" + "x" * 33 for n in range(8)]
    config = {
        "stages": {
            "nodeBootstrapped": [
                {"name": name, "scriptSource": {"scriptLocation": f"s3://lca-scripts/{name}.sh"}}
                for name in names
            ]
        }
    }
    plan = action_for("quarantine").plan(ActionContext(config, None, node_bundle=BUNDLE))
    after = plan.config_after
    assert after is not None
    reason = after["stages"]["nodeReady"][0]["arguments"][2]
    assert len(reason) == 256
    assert reason.startswith(f"lifeguard: kept for debugging, {names[0]}")


def test_an_owners_drain_step_on_terminate_is_not_switched_with_the_scripts() -> None:
    """Lifeguard's drain step, added by the owners without an onError (TERMINATE by PCS's default), is no
    script a loop is about: a quarantine without a suspect switches the others alone."""
    config = copy.deepcopy(TERMINATE)
    drain = {"name": DRAIN_SCRIPT_NAME, "scriptSource": {"scriptLocation": BUNDLE.location}}
    setup = {
        "name": "setup",
        "scriptSource": {"scriptLocation": "s3://lca-scripts/setup.sh"},
        "onError": "TERMINATE",
    }
    config["stages"]["nodeReady"] = [drain, setup]
    after = action_for("quarantine").plan(ActionContext(config, None)).config_after
    assert after is not None
    assert "onError" not in script(after, "nodeReady", DRAIN_SCRIPT_NAME)
    assert script(after, "nodeReady", "setup")["onError"] == "STOP_SEQUENCE"


def test_a_bundle_known_only_by_location_is_written_as_it_is() -> None:
    bare = NodeBundle("https://example.com/lifeguard-node.pyz", "ignored-off-s3")
    assert bare.script_source() == {"scriptLocation": "https://example.com/lifeguard-node.pyz"}


def test_quarantine_does_not_add_a_21st_node_ready_script() -> None:
    config = copy.deepcopy(TERMINATE)
    config["stages"]["nodeReady"] = [
        {
            "name": f"step-{i}",
            "scriptSource": {"scriptLocation": "s3://lca-scripts-example/s.sh"},
            "onError": "CONTINUE",
        }
        for i in range(20)
    ]
    plan = action_for("quarantine").plan(
        ActionContext(config, ("nodeBootstrapped", "fail-terminate"), node_bundle=BUNDLE)
    )
    assert plan.config_after is not None
    assert len(plan.config_after["stages"]["nodeReady"]) == 20
    assert any("drain the kept node by hand" in note for note in plan.notes)


def test_quarantine_has_nothing_to_do_when_no_script_can_terminate() -> None:
    config = copy.deepcopy(TERMINATE)
    for stage in config["stages"].values():
        for each in stage:
            each["onError"] = "CONTINUE"
    plan = action_for("quarantine").plan(ActionContext(config, None))
    assert not plan.changes_something
    assert plan.notes == ("no script has an effective onError TERMINATE: nothing to switch",)


def test_revert_puts_back_the_proven_good_config() -> None:
    plan = action_for("revert").plan(
        ActionContext(TERMINATE, None, proven_good=GOOD, proven_good_by="i-1 at t")
    )
    assert plan.action == "revert"
    assert plan.config_after == GOOD
    assert any("proven good by i-1 at t" in note for note in plan.notes)


@pytest.mark.parametrize(
    ("proven_good", "says"),
    [
        (None, "no proven-good configuration is known"),
        (TERMINATE, "proven-good configuration is the current one"),
    ],
)
def test_revert_without_a_better_config_falls_back_to_quarantine(proven_good: Any, says: str) -> None:
    plan = action_for("revert").plan(
        ActionContext(TERMINATE, ("nodeBootstrapped", "fail-terminate"), proven_good)
    )
    assert plan.action == "quarantine"
    assert plan.changes_something
    assert says in plan.notes[0]


def test_revert_to_a_proven_good_config_pcs_would_refuse_now_says_so() -> None:
    """A configuration proven good before a rule held it (two scripts of one name, say) cannot be put
    back: the quarantine in its place said "the proven-good configuration is the current one", which was
    false, in the audit trail, the event, Slack and SNS."""
    good = copy.deepcopy(GOOD)
    scripts = good["stages"]["nodeBootstrapped"]
    scripts.append(copy.deepcopy(scripts[0]))
    plan = action_for("revert").plan(ActionContext(TERMINATE, ("nodeBootstrapped", "fail-terminate"), good))
    assert plan.action == "quarantine"
    assert plan.changes_something
    assert plan.notes[0].startswith("the proven-good configuration would be invalid ("), plan.notes[0]
    assert plan.notes[0].endswith(": quarantined instead")


def test_notify_plans_what_quarantine_would_do() -> None:
    context = ActionContext(TERMINATE, ("nodeBootstrapped", "fail-terminate"))
    assert (
        action_for("notify").plan(context).config_after == action_for("quarantine").plan(context).config_after
    )


def test_every_action_declares_its_permissions_and_an_unknown_one_is_named() -> None:
    assert set(ACTIONS) == {"quarantine", "revert", "notify", "undrain"}
    for cls in ACTIONS.values():
        assert all(p.startswith("pcs:") for p in cls.PERMISSIONS)
    with pytest.raises(KeyError, match="known: notify, quarantine, revert, undrain"):
        action_for("reboot")


def test_kept_nodes_are_drained_only_when_the_stack_says_so(monkeypatch: pytest.MonkeyPatch) -> None:
    from lifeguard.remediation import RemediationSettings

    monkeypatch.setenv("LIFEGUARD_NODE_BUNDLE", BUNDLE.location)
    monkeypatch.setenv("LIFEGUARD_NODE_BUNDLE_VERSION", str(BUNDLE.version_id))
    monkeypatch.setenv("LIFEGUARD_NODE_BUNDLE_SHA256", str(BUNDLE.sha256).upper())
    default = RemediationSettings.from_environment()
    assert default.node_bundle == BUNDLE  # the stack always says where the bundle is, pinned
    assert default.drain_bundle is None  # DrainKeptNodes defaults to false: no drain step
    plan = action_for("quarantine").plan(
        ActionContext(TERMINATE, ("nodeBootstrapped", "fail-terminate"), node_bundle=default.drain_bundle)
    )
    assert plan.config_after is not None
    assert plan.config_after["stages"]["nodeReady"] == TERMINATE["stages"]["nodeReady"]

    monkeypatch.setenv("LIFEGUARD_DRAIN_KEPT_NODES", "true")
    assert RemediationSettings.from_environment().drain_bundle == BUNDLE
    monkeypatch.setenv("LIFEGUARD_DRAIN_KEPT_NODES", "1")
    assert RemediationSettings.from_environment().drain_bundle == BUNDLE
    monkeypatch.setenv("LIFEGUARD_NODE_BUNDLE_SHA256", "not-a-digest")
    with pytest.raises(ValueError, match="LIFEGUARD_NODE_BUNDLE_SHA256"):
        RemediationSettings.from_environment()


def test_the_stacks_cooldown_minutes_daily_cap_and_dry_run_are_read_from_the_environment(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The template sets them in minutes and words (CooldownMinutes, DailyCap, DryRun); the rails count in
    seconds."""
    from lifeguard.remediation import RemediationSettings

    monkeypatch.setenv("LIFEGUARD_COOLDOWN_MINUTES", "30")
    monkeypatch.setenv("LIFEGUARD_DAILY_CAP", "4")
    monkeypatch.setenv("LIFEGUARD_DRY_RUN", "1")
    read = RemediationSettings.from_environment()
    assert (read.cooldown_seconds, read.daily_cap, read.dry_run) == (1800, 4, True)
    monkeypatch.setenv("LIFEGUARD_DRY_RUN", "false")
    assert RemediationSettings.from_environment().dry_run is False
    assert RemediationSettings.from_environment(cooldown_minutes=2).cooldown_seconds == 120


@pytest.mark.parametrize(
    ("variable", "value", "said"),
    [
        ("LIFEGUARD_COOLDOWN_MINUTES", "nan", "LIFEGUARD_COOLDOWN_MINUTES: nan is not from 0 to 10080"),
        ("LIFEGUARD_COOLDOWN_MINUTES", "inf", "LIFEGUARD_COOLDOWN_MINUTES: inf is not from 0 to 10080"),
        ("LIFEGUARD_COOLDOWN_MINUTES", "-30", "LIFEGUARD_COOLDOWN_MINUTES: -30 is not from 0 to 10080"),
        ("LIFEGUARD_DAILY_CAP", "0", "LIFEGUARD_DAILY_CAP: 0 is not from 1 to 100"),
        ("LIFEGUARD_DAILY_CAP", "-1", "LIFEGUARD_DAILY_CAP: -1 is not from 1 to 100"),
    ],
)
def test_a_cooldown_or_daily_cap_past_the_templates_bounds_is_refused_naming_it(
    monkeypatch: pytest.MonkeyPatch, variable: str, value: str, said: str
) -> None:
    """The template holds them to its bounds; an environment edited by hand was taken as it was: a NaN
    cooldown held nothing back, a cap of 0 held every remediation."""
    from lifeguard.remediation import RemediationSettings

    monkeypatch.setenv(variable, value)
    with pytest.raises(ValueError, match=f"^{re.escape(said)}$"):
        RemediationSettings.from_environment()
    monkeypatch.setenv(variable, "10080" if "COOLDOWN" in variable else "100")  # the bounds are taken
    assert RemediationSettings.from_environment().daily_cap in (3, 100)


def test_undrain_takes_out_only_lifeguards_drain_step() -> None:
    drained = action_for("quarantine").plan(
        ActionContext(TERMINATE, ("nodeBootstrapped", "fail-terminate"), node_bundle=BUNDLE)
    )
    assert drained.config_after is not None
    plan = action_for("undrain").plan(ActionContext(drained.config_after))
    assert (
        plan.config_after
        == action_for("quarantine")
        .plan(ActionContext(TERMINATE, ("nodeBootstrapped", "fail-terminate")))
        .config_after
    )
    assert [c.to_detail()["path"] for c in plan.changes] == ["stages.nodeReady[0]"]
    assert action_for("undrain").plan(ActionContext(TERMINATE)).config_after is None  # nothing of Lifeguard's


def test_undrain_of_a_stage_that_held_the_drain_step_alone_takes_the_stage_out() -> None:
    """The configuration goes back to what it was before the step was added (its fingerprint with it), not
    to one with an empty nodeReady."""
    config = copy.deepcopy(TERMINATE)
    del config["stages"]["nodeReady"]
    drained = action_for("quarantine").plan(
        ActionContext(config, ("nodeBootstrapped", "fail-terminate"), node_bundle=BUNDLE)
    )
    assert drained.config_after is not None
    assert [s["name"] for s in drained.config_after["stages"]["nodeReady"]] == [DRAIN_SCRIPT_NAME]
    after = action_for("undrain").plan(ActionContext(drained.config_after)).config_after
    assert after is not None
    assert set(after["stages"]) == {"nodeBootstrapped"}


def test_revert_to_a_proven_good_config_that_only_spells_out_the_defaults_quarantines_instead() -> None:
    proven = copy.deepcopy(TERMINATE)  # the same configuration as the current one, its defaults written out
    proven["scriptCachingPolicy"] = "CACHE_ONCE"
    proven["stages"]["nodeBootstrapped"][1]["onError"] = "TERMINATE"
    proven["stages"]["nodeBootstrapped"][1]["executionPolicy"] = "FIRST_BOOT_ONLY"
    proven["stages"]["nodeReady"][0]["arguments"] = []  # no arguments, written out
    plan = action_for("revert").plan(ActionContext(TERMINATE, ("nodeBootstrapped", "fail-terminate"), proven))
    assert plan.action == "quarantine", [c.describe() for c in plan.changes]
    assert plan.notes[0] == "the proven-good configuration is the current one: quarantined instead"
    assert NodeLifecycleActions.from_api(proven).effective_fingerprint() == (
        NodeLifecycleActions.from_api(TERMINATE).effective_fingerprint()
    )


def _setup(**fields: Any) -> dict[str, Any]:
    return {"name": "setup", "scriptSource": {"scriptLocation": "s3://lca-scripts/setup.sh"}, **fields}


def _extra(name: str) -> dict[str, Any]:
    return {"name": name, "scriptSource": {"scriptLocation": f"s3://lca-scripts/{name}.sh"}}


def test_revert_to_a_configuration_that_runs_the_same_up_to_the_failing_script_quarantines_instead() -> None:
    """setup.sh was overwritten in place in S3, and the owners added a script after it: the proven-good
    configuration fetches the same failing setup.sh, and nothing before it differs. A revert put it back,
    the loop went on, and the ladder gave the group up to a person; a quarantine keeps a node."""
    good = {"stages": {"nodeBootstrapped": [_setup()]}}
    current = {"stages": {"nodeBootstrapped": [_setup(onError="TERMINATE"), _extra("extra")]}}
    plan = action_for("revert").plan(ActionContext(current, ("nodeBootstrapped", "setup"), good))
    assert plan.action == "quarantine"
    assert plan.notes[0].startswith(
        "the proven-good configuration runs what the current one runs up to and including the failing "
        "script (nodeBootstrapped › setup), as it is"
    )
    assert plan.config_after is not None
    assert plan.config_after["stages"]["nodeBootstrapped"][0]["onError"] == "STOP_SEQUENCE"


@pytest.mark.parametrize(
    "current",
    [
        {"stages": {"nodeBootstrapped": [_extra("break-things"), _setup()]}},  # a script before it
        {"stages": {"nodeBootstrapped": [_setup(arguments=["--new"])]}},  # the script itself
    ],
    ids=["before", "itself"],
)
def test_revert_goes_ahead_when_what_runs_up_to_the_failing_script_differs(current: dict[str, Any]) -> None:
    good = {"stages": {"nodeBootstrapped": [_setup()], "nodeReady": [_extra("first")]}}
    plan = action_for("revert").plan(ActionContext(current, ("nodeBootstrapped", "setup"), good))
    assert plan.action == "revert"
    assert plan.config_after == good


def test_a_failing_ready_script_is_judged_with_every_nodebootstrapped_script_before_it() -> None:
    ready = {"name": "check", "scriptSource": {"scriptLocation": "s3://lca-scripts/check.sh"}}
    good = {"stages": {"nodeBootstrapped": [_setup()], "nodeReady": [ready]}}
    suspect = ("nodeReady", "check")
    changed_before = {"stages": {"nodeBootstrapped": [_setup(), _extra("x")], "nodeReady": [ready]}}
    assert action_for("revert").plan(ActionContext(changed_before, suspect, good)).action == "revert"
    changed_after = {"stages": {"nodeBootstrapped": [_setup()], "nodeReady": [ready, _extra("y")]}}
    assert action_for("revert").plan(ActionContext(changed_after, suspect, good)).action == "quarantine"


def test_revert_goes_ahead_when_the_proven_configuration_let_the_failing_script_fail() -> None:
    """Proven with the script under CONTINUE: its failure did not end the node there."""
    good = {"stages": {"nodeBootstrapped": [_setup(onError="CONTINUE")]}}
    current = {"stages": {"nodeBootstrapped": [_setup()]}}
    plan = action_for("revert").plan(ActionContext(current, ("nodeBootstrapped", "setup"), good))
    assert plan.action == "revert"


def test_revert_never_puts_back_the_configuration_the_loop_began_on() -> None:
    # It was proven good, then began to loop (an unpinned script changed in S3); the escalation's current
    # configuration is Lifeguard's quarantine of it.
    quarantined = copy.deepcopy(TERMINATE)
    quarantined["stages"]["nodeBootstrapped"][0]["onError"] = "STOP_SEQUENCE"
    context = ActionContext(
        quarantined, ("nodeBootstrapped", "fail-terminate"), TERMINATE, looped_on=(TERMINATE,)
    )
    plan = action_for("revert").plan(context)
    assert plan.action == "quarantine"
    assert plan.notes[0].startswith("the proven-good configuration is the one this loop began on")
    assert plan.config_after is not None  # the suspect stays quarantined (not put back to TERMINATE)
    assert script(plan.config_after, "nodeBootstrapped", "fail-terminate")["onError"] == "STOP_SEQUENCE"


def test_revert_never_puts_back_a_configuration_lifeguard_changed_for_a_loop_since_it_was_proven() -> None:
    # Proven good, then it looped (an earlier episode, which Lifeguard quarantined); now someone's new
    # configuration loops: the proof's configuration is no way back.
    bad_change = copy.deepcopy(TERMINATE)
    bad_change["stages"]["nodeBootstrapped"][0]["name"] = "mount-shared"
    context = ActionContext(
        bad_change, ("nodeBootstrapped", "mount-shared"), TERMINATE, looped_since_proof=(TERMINATE,)
    )
    plan = action_for("revert").plan(context)
    assert plan.action == "quarantine"
    assert plan.notes[0].startswith("the proven-good configuration looped since it was proven")
    assert plan.config_after is not None
    assert script(plan.config_after, "nodeBootstrapped", "mount-shared")["onError"] == "STOP_SEQUENCE"
    # Without that loop the revert goes ahead.
    assert action_for("revert").plan(replace(context, looped_since_proof=())).action == "revert"


@pytest.mark.parametrize(
    ("tool", "prefix", "keys", "source"),
    [
        (
            "CloudFormation",
            "NodeLifecycleActions.Stages.NodeReady: ",
            {"Name", "ScriptSource", "Arguments", "OnError", "ExecutionPolicy"},
            {"ScriptLocation", "S3VersionId", "Checksum"},
        ),
        (
            "Terraform",
            "node_lifecycle_actions.stages.node_ready = ",
            {"name", "script_source", "arguments", "on_error", "execution_policy"},
            {"script_location", "s3_version_id", "checksum"},
        ),
    ],
)
def test_the_iac_note_gives_an_added_script_whole_in_the_tools_own_names(
    tool: str, prefix: str, keys: set[str], source: set[str]
) -> None:
    plan = action_for("quarantine").plan(
        ActionContext(TERMINATE, ("nodeBootstrapped", "fail-terminate"), node_bundle=BUNDLE)
    )
    note = ManagedBy(tool, "hpc-cluster").note(plan.changes, plan.config_after)
    # The stage the drain step is added to is given whole (an index there is of the new list, and the
    # template holds the old one), the step first in it.
    [added] = [part for part in note.split("; ") if prefix in part]
    step, *rest = json.loads(added.split(prefix, 1)[1].removesuffix("."))  # whole: an owner can paste it
    assert len(rest) == len(TERMINATE["stages"]["nodeReady"])
    assert set(step) == keys
    assert set(step[next(key for key in keys if key.lower().startswith("script"))]) == source
