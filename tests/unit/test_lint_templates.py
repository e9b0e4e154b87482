"""`lifeguard lint` on CloudFormation/SAM templates: each PCS compute node group is checked with the same
rules as a plain config, and every finding points into the template."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from lifeguard_cli.cli import app
from lifeguard_cli.cloudformation import (
    EXPANSIONS_MAX,
    TOO_MANY_EXPANSIONS,
    TOO_MANY_RESOURCES,
    lint_node_group,
)
from lifeguard_cli.lint import lint_files
from tests.conftest import EVENTS, REPO

CONFIGS = EVENTS / "configs"
EXAMPLE = EVENTS / "templates" / "pcs-cluster.yaml"
FIXTURES = REPO / "tests" / "fixtures" / "templates"
ACTIONS = "Resources.ComputeNodes.Properties.NodeLifecycleActions"
runner = CliRunner()


def lint_json(*args: str) -> tuple[int, dict[str, Any]]:
    result = runner.invoke(app, ["lint", "--json", *args])
    return result.exit_code, json.loads(result.stdout)


def pascal(value: Any) -> Any:
    """A config as CloudFormation spells it: every key with its first letter upper-cased."""
    if isinstance(value, dict):
        return {key[:1].upper() + key[1:]: pascal(item) for key, item in value.items()}
    if isinstance(value, list):
        return [pascal(item) for item in value]
    return value


def template_of(actions: Any) -> dict[str, Any]:
    properties = {"ClusterId": "pcs_abc123de45", "NodeLifecycleActions": actions}
    return {"Resources": {"ComputeNodes": {"Type": "AWS::PCS::ComputeNodeGroup", "Properties": properties}}}


def script(**fields: Any) -> dict[str, Any]:
    return {
        "Name": "setup",
        "ScriptSource": {"ScriptLocation": "s3://bkt/setup.sh", "Checksum": "a" * 64},
    } | fields


def test_example_template_lints_each_group_as_one_result() -> None:
    code, report = lint_json(str(EXAMPLE))
    assert code == 0
    assert [(v["file"], v["kind"], v["resource"]) for v in report["files"]] == [
        (str(EXAMPLE), "template", "Batch"),
        (str(EXAMPLE), "template", "Interactive"),
    ]
    batch, interactive = report["files"]
    assert batch["problems"] == batch["risks"] == []
    assert [note["path"] for note in batch["notes"]] == [
        "Resources.Batch.Properties.NodeLifecycleActions.Stages.NodeBootstrapped[0].ScriptSource.ScriptLocation"
    ]
    assert batch["scripts"][0]["intrinsic"] == {"scriptLocation": "Fn::Sub"}
    assert batch["fingerprint"] is None
    base = "Resources.Interactive.Properties.NodeLifecycleActions.Stages.NodeBootstrapped[0]"
    assert [(risk["code"], risk["path"]) for risk in interactive["risks"]] == [
        ("optional-script-terminates", f"{base}.OnError"),
        ("unpinned-mutable-source", f"{base}.ScriptSource"),
    ]
    assert len(interactive["fingerprint"]) == 64


def test_strict_fails_the_risky_group_only() -> None:
    code, report = lint_json("--strict", str(EXAMPLE))
    assert code == 1
    assert report["valid"] is False
    assert [bool(verdict["risks"]) for verdict in report["files"]] == [False, True]


def test_invalid_group_is_reported_with_its_template_path() -> None:
    code, report = lint_json(str(FIXTURES / "invalid-onerror.yaml"))
    assert code == 1
    [verdict] = report["files"]
    assert (verdict["resource"], verdict["valid"]) == ("ComputeNodes", False)
    assert verdict["problems"] == [
        {
            "path": f"{ACTIONS}.Stages.NodeBootstrapped[0].OnError",
            "message": "'TERMINATED' is not one of TERMINATE, STOP_SEQUENCE, CONTINUE",
        }
    ]


def test_json_templates_are_read_too(tmp_path: Path) -> None:
    bad = template_of({"Stages": {"NodeReady": [script(OnError="STOP")]}})
    path = tmp_path / "stack.json"
    path.write_text(json.dumps(bad))
    code, report = lint_json(str(path))
    assert code == 1
    assert [p["path"] for p in report["files"][0]["problems"]] == [f"{ACTIONS}.Stages.NodeReady[0].OnError"]


# CloudFormation fragments PCS (or CloudFormation) would reject, and every (path, message fragment).
INVALID: list[tuple[str, object, list[tuple[str, str]]]] = [
    (
        "camelCase-key",
        {"Stages": {"NodeBootstrapped": [script(onError="CONTINUE")]}},
        [("Stages.NodeBootstrapped[0].onError", "is not a property of NodeLifecycleScript (known: Name,")],
    ),
    (
        "unknown-key",
        {"Stages": {"NodeBootstrapped": [script(Timeout=30)]}},
        [("Stages.NodeBootstrapped[0].Timeout", "is not a property of NodeLifecycleScript")],
    ),
    (
        "missing-script-source",
        {"Stages": {"NodeBootstrapped": [{"Name": "setup"}]}},
        [("Stages.NodeBootstrapped[0].ScriptSource", "is required")],
    ),
    ("missing-stages", {"ScriptCachingPolicy": "CACHE_ONCE"}, [("Stages", "is required")]),
    (
        "short-checksum",
        {
            "Stages": {
                "NodeReady": [script(ScriptSource={"ScriptLocation": "s3://bkt/a.sh", "Checksum": "abc"})]
            }
        },
        [("Stages.NodeReady[0].ScriptSource.Checksum", "is 3 characters long; at least 64 required")],
    ),
    (
        "version-on-https",
        {
            "Stages": {
                "NodeReady": [
                    script(ScriptSource={"ScriptLocation": "https://example.com/a.sh", "S3VersionId": "v1"})
                ]
            }
        },
        [("Stages.NodeReady[0].ScriptSource.S3VersionId", "only allowed with an s3:// scriptLocation")],
    ),
    (
        "duplicate-names",
        {"Stages": {"NodeBootstrapped": [script(), script()]}},
        [("Stages.NodeBootstrapped[1].Name", "'setup' is already the name of")],
    ),
    (
        "bad-caching-policy",
        {"ScriptCachingPolicy": "ALWAYS", "Stages": {"NodeReady": [script()]}},
        [("ScriptCachingPolicy", "'ALWAYS' is not one of CACHE_ONCE, REFRESH_ON_REBOOT")],
    ),
    ("not-a-mapping", "CACHE_ONCE", [("", "expected an object, got string")]),
]


@pytest.mark.parametrize(("actions", "expected"), [case[1:] for case in INVALID], ids=[c[0] for c in INVALID])
def test_invalid_groups_list_every_problem_with_its_template_path(
    actions: object, expected: list[tuple[str, str]]
) -> None:
    group = lint_node_group("ComputeNodes", actions)
    assert not group.valid
    assert group.config is None
    got = [(problem.path, problem.message) for problem in group.problems]
    assert len(got) == len(expected)
    for (path, fragment), (got_path, message) in zip(expected, got, strict=True):
        assert got_path == f"{ACTIONS}.{path}".rstrip(".")
        assert fragment in message


@pytest.mark.parametrize(
    "path",
    sorted(p for p in CONFIGS.glob("*.json") if p.name.startswith(("article-", "invalid-d", "invalid-v"))),
)
def test_a_template_gets_exactly_the_verdict_of_the_same_config(path: Path) -> None:
    config = json.loads(path.read_text())
    [plain] = lint_files([path])[0]
    group = lint_node_group("ComputeNodes", pascal(config))
    assert group.valid == plain.document.valid
    assert [p.message for p in group.problems] == [p.message for p in plain.document.problems]
    assert [r.code for r in group.risks] == [r.code for r in plain.risks]
    assert [r.path for r in group.risks] == [f"{ACTIONS}.{pascal_path(r.path)}" for r in plain.risks]
    if plain.document.config is not None:
        assert group.config is not None
        assert group.config.fingerprint() == plain.document.config.fingerprint()


def pascal_path(path: str) -> str:
    return ".".join(part[:1].upper() + part[1:] for part in path.split("."))


INTRINSICS: list[tuple[str, dict[str, Any], str]] = [
    ("ref-on-error", script(Name="verify", OnError={"Ref": "OnError"}), "Stages.NodeBootstrapped[0].OnError"),
    ("ref-name", script(Name={"Ref": "ScriptName"}), "Stages.NodeBootstrapped[0].Name"),
    (
        "sub-location",
        script(ScriptSource={"ScriptLocation": {"Fn::Sub": "s3://${Bucket}/a.sh"}, "Checksum": "a" * 64}),
        "Stages.NodeBootstrapped[0].ScriptSource.ScriptLocation",
    ),
    (
        "getatt-checksum",
        script(
            ScriptSource={"ScriptLocation": "s3://bkt/a.sh", "Checksum": {"Fn::GetAtt": ["Sum", "Value"]}}
        ),
        "Stages.NodeBootstrapped[0].ScriptSource.Checksum",
    ),
    (
        "if-arguments",
        script(Arguments={"Fn::If": ["Debug", ["-v"], []]}),
        "Stages.NodeBootstrapped[0].Arguments",
    ),
    (
        "if-script-source",
        script(ScriptSource={"Fn::If": ["A", {"ScriptLocation": "s3://bkt/a.sh"}, {"Ref": "Source"}]}),
        "Stages.NodeBootstrapped[0].ScriptSource",
    ),
    ("if-whole-script", {"Fn::If": ["A", script(), {"Ref": "AWS::NoValue"}]}, "Stages.NodeBootstrapped[0]"),
]


@pytest.mark.parametrize(("item", "where"), [c[1:] for c in INTRINSICS], ids=[c[0] for c in INTRINSICS])
def test_intrinsic_values_are_noted_once_and_never_fail(item: dict[str, Any], where: str) -> None:
    group = lint_node_group("ComputeNodes", {"Stages": {"NodeBootstrapped": [item]}})
    assert group.valid
    assert group.config is not None
    assert [note.path for note in group.notes] == [f"{ACTIONS}.{where}"]
    assert "resolved only when the stack deploys" in group.notes[0].message
    assert not [risk for risk in group.risks if risk.path.startswith(f"{ACTIONS}.{where}")]


def test_the_branches_of_an_if_are_each_checked_as_the_value_they_stand_for() -> None:
    """`- !If [Prod, {script}, !Ref AWS::NoValue]` hid every problem of the script behind a note: a branch
    PCS refuses is refused whenever its condition holds (cfn-lint's own rules say so too)."""
    bad = script(Name="mount fsx!", OnError="terminate")
    group = lint_node_group(
        "ComputeNodes",
        {
            "Stages": {
                "NodeBootstrapped": [
                    {"Fn::If": ["Prod", bad, {"Ref": "AWS::NoValue"}]},
                    script(
                        Name="tail",
                        ScriptSource={"ScriptLocation": {"Fn::If": ["Prod", "s3://bkt/a.sh", "ftp://x"]}},
                    ),
                ]
            }
        },
    )
    assert not group.valid
    assert [(p.path.removeprefix(ACTIONS), p.message.split()[0]) for p in group.problems] == [
        (".Stages.NodeBootstrapped[0].Fn::If[1].Name", "'mount"),
        (".Stages.NodeBootstrapped[0].Fn::If[1].OnError", "'terminate'"),
        (".Stages.NodeBootstrapped[1].ScriptSource.ScriptLocation.Fn::If[2]", "'ftp://x'"),
    ]
    assert [note.message.split(": ")[1] for note in group.notes] == [
        "each branch that is a value checked alone"
    ] * 2


def test_a_property_given_as_no_value_is_not_there() -> None:
    """`S3VersionId: !Ref AWS::NoValue` deploys no version: the script is unpinned, as lint says of it, not
    pinned by a stand-in version."""
    source = {"ScriptLocation": "s3://bkt/mount.sh", "S3VersionId": {"Ref": "AWS::NoValue"}}
    group = lint_node_group("ComputeNodes", {"Stages": {"NodeBootstrapped": [script(ScriptSource=source)]}})
    assert group.valid
    assert group.notes == ()
    assert "unpinned-mutable-source" in [risk.code for risk in group.risks]


def test_an_if_that_is_a_branch_of_an_if_has_its_branches_checked_too() -> None:
    bad = script(Name="bad!")
    nested = {"Fn::If": ["A", {"Fn::If": ["B", bad, {"Ref": "AWS::NoValue"}]}, {"Ref": "AWS::NoValue"}]}
    group = lint_node_group("ComputeNodes", {"Stages": {"NodeBootstrapped": [nested]}})
    assert [p.path.removeprefix(ACTIONS) for p in group.problems] == [
        ".Stages.NodeBootstrapped[0].Fn::If[1].Fn::If[1].Name"
    ]


def test_loops_of_loops_that_make_nothing_are_expanded_a_bounded_number_of_times(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Five loops of 30 items, each inside the last, around nothing: 24 million expansions of a 1 KB file
    took lint 43 s; the expansions are bounded (EXPANSIONS_MAX, ten times the resources a template may
    make), and a template whose loops were cut short is not said to be valid: what they make was not all
    seen."""
    import lifeguard_cli.cloudformation

    fragment: dict[str, Any] = {}
    for depth in range(5):
        fragment = {f"Fn::ForEach::L{depth}": [f"I{depth}", [str(n) for n in range(30)], fragment]}
    path = tmp_path / "loops.json"
    path.write_text(json.dumps({"Resources": fragment}))
    expanded = []  # each call of `_resources` but the first expands one item of a loop
    resources = lifeguard_cli.cloudformation._resources
    monkeypatch.setattr(
        lifeguard_cli.cloudformation, "_resources", lambda *args: expanded.append(1) or resources(*args)
    )
    code, report = lint_json(str(path))
    assert code == 1
    [verdict] = report["files"]
    assert verdict["resource"] is None
    assert verdict["problems"] == [
        {"path": "Resources", "message": f"{TOO_MANY_EXPANSIONS}: the node groups past them are not linted"}
    ]
    assert len(expanded) - 1 == EXPANSIONS_MAX


def test_loops_of_loops_making_more_than_500_groups_are_not_said_valid(tmp_path: Path) -> None:
    """A loop of 300 around a loop of 2 groups, and one group after, misspelled: the expansion's budget,
    shared by the loops, ran out at 334 groups and the rest went unsaid (valid, exit 0)."""
    group = template_of(
        {"Stages": {"NodeBootstrapped": [script(OnError="CONTINUE", ExecutionPolicy="EVERY_BOOT")]}}
    )
    inner = {"Fn::ForEach::In": ["J", ["a", "b"], {"G${I}${J}": group["Resources"]["ComputeNodes"]}]}
    last = template_of({"Stages": {"NodeBootstrapped": [script(OnError="TERMINATED")]}})
    resources = {"Fn::ForEach::Out": ["I", [str(n) for n in range(300)], inner], **last["Resources"]}
    path = tmp_path / "stack.json"
    path.write_text(json.dumps({"Resources": resources}))
    code, report = lint_json(str(path))
    assert code == 1
    *groups, verdict = report["files"]
    assert len(groups) == 500
    assert verdict["problems"][0]["message"].startswith(TOO_MANY_RESOURCES)


def test_numbers_and_booleans_are_strings_as_cloudformation_passes_them() -> None:
    """CloudFormation passes a YAML number or boolean given for a string as its text (`Name: setup2024`
    is text already; `Arguments: [8080, true, 1.5]` are three numbers and a boolean to YAML)."""
    group = lint_node_group(
        "ComputeNodes", {"Stages": {"NodeBootstrapped": [script(Arguments=[8080, True, 1.5, False])]}}
    )
    assert group.valid, [p.message for p in group.problems]
    assert group.config is not None
    [(_, _, setup)] = list(group.config.scripts())
    assert list(setup.arguments) == ["8080", "true", "1.5", "false"]


def test_a_key_given_twice_is_an_error_not_the_last_one_silently(tmp_path: Path) -> None:
    """PyYAML keeps the last of two `OnError`; CloudFormation refuses the template."""
    template = tmp_path / "twice.yaml"
    template.write_text(
        "Resources:\n  N:\n    Type: AWS::PCS::ComputeNodeGroup\n    Properties:\n"
        "      ClusterId: pcs_abc123de45\n      NodeLifecycleActions:\n        Stages:\n"
        "          NodeBootstrapped:\n            - Name: setup\n"
        f"              ScriptSource: {{ScriptLocation: s3://bkt/setup.sh, Checksum: {'a' * 64}}}\n"
        "              OnError: STOP_SEQUENCE\n              OnError: CONTINUE\n"
    )
    code, report = lint_json(str(template))
    assert code == 1
    [problem] = report["files"][0]["problems"]
    assert "line 12 column 15: key 'OnError' given twice" in problem["message"]


def test_an_intrinsic_on_error_hides_the_default_terminate_risk_but_not_the_others() -> None:
    unpinned = {"ScriptLocation": "s3://bkt/verify.sh"}
    group = lint_node_group(
        "ComputeNodes",
        {
            "Stages": {
                "NodeBootstrapped": [script(Name="verify", ScriptSource=unpinned, OnError={"Ref": "P"})]
            }
        },
    )
    assert [risk.code for risk in group.risks] == ["unpinned-mutable-source"]


def test_invalid_values_beside_an_intrinsic_are_still_reported() -> None:
    group = lint_node_group(
        "ComputeNodes", {"Stages": {"NodeBootstrapped": [script(Name={"Ref": "N"}, OnError="TERMINATED")]}}
    )
    assert [p.path for p in group.problems] == [f"{ACTIONS}.Stages.NodeBootstrapped[0].OnError"]
    assert [n.path for n in group.notes] == [f"{ACTIONS}.Stages.NodeBootstrapped[0].Name"]


def test_a_misspelled_function_is_a_problem_not_a_note() -> None:
    """`!Sbu`, `!ref`, `!Reff` read as functions of those names and passed as values resolved at deploy:
    CloudFormation refuses them. A function CloudFormation knows is still a note."""
    scripts = [
        script(ScriptSource={"ScriptLocation": {"Fn::Sbu": "s3://${B}/a.sh"}, "Checksum": {"Fn::ref": "S"}}),
        {"Fn::Bogus": "x"},
        script(Name="b", OnError={"Ref": "Mode"}),
    ]
    group = lint_node_group("ComputeNodes", {"Stages": {"NodeBootstrapped": scripts}})
    assert not group.valid
    assert [(p.path, p.message) for p in group.problems] == [
        (f"{ACTIONS}.Stages.NodeBootstrapped[0].ScriptSource.ScriptLocation", f"Fn::Sbu {NO_FUNCTION}"),
        (f"{ACTIONS}.Stages.NodeBootstrapped[0].ScriptSource.Checksum", f"Fn::ref {NO_FUNCTION}"),
        (f"{ACTIONS}.Stages.NodeBootstrapped[1]", f"Fn::Bogus {NO_FUNCTION}"),
    ]
    assert [n.path for n in group.notes] == [f"{ACTIONS}.Stages.NodeBootstrapped[2].OnError"]


NO_FUNCTION = "is no CloudFormation function: CloudFormation refuses the template"


def test_a_loop_in_a_property_is_a_function_and_a_misspelling_in_an_if_branch_is_not() -> None:
    """AWS::LanguageExtensions takes `Fn::ForEach` in resource properties: a note, not a problem. A
    misspelled function as a branch of an `Fn::If` (of an `Fn::If`) is one."""
    loop = {"Fn::ForEach::Stage": ["S", ["NodeBootstrapped", "NodeReady"], {"${S}": [script()]}]}
    group = lint_node_group("ComputeNodes", {"Stages": loop})
    assert group.valid
    assert [n.path for n in group.notes] == [f"{ACTIONS}.Stages"]
    # Beside the mapping's own keys (AWS's example puts it so): a loop, not an unknown member.
    beside = {"NodeBootstrapped": [script()], "Fn::ForEach::S": ["S", ["NodeReady"], {"${S}": [script()]}]}
    group = lint_node_group("ComputeNodes", {"Stages": beside})
    assert group.valid, group.problems
    assert [n.path for n in group.notes] == [f"{ACTIONS}.Stages.Fn::ForEach::S"]
    branch = {"Fn::If": ["C", {"Fn::Sbu": "CACHE_ONCE"}, {"Fn::If": ["D", "CACHE_ONCE", {"Fn::ref": "X"}]}]}
    group = lint_node_group(
        "ComputeNodes", {"ScriptCachingPolicy": branch, "Stages": {"NodeBootstrapped": [script()]}}
    )
    assert [(p.path, p.message) for p in group.problems] == [
        (f"{ACTIONS}.ScriptCachingPolicy.Fn::If[1]", f"Fn::Sbu {NO_FUNCTION}"),
        (f"{ACTIONS}.ScriptCachingPolicy.Fn::If[2].Fn::If[2]", f"Fn::ref {NO_FUNCTION}"),
    ]


def test_a_whole_intrinsic_value_is_not_checked_and_does_not_fail(tmp_path: Path) -> None:
    path = tmp_path / "stack.json"
    whole = {"Fn::If": ["A", {"Stages": {"NodeReady": [script()]}}, {"Ref": "AWS::NoValue"}]}
    path.write_text(json.dumps(template_of(whole)))
    code, report = lint_json(str(path))
    assert code == 0
    [verdict] = report["files"]
    assert (verdict["valid"], verdict["scripts"], verdict["problems"]) == (True, [], [])
    assert [note["path"] for note in verdict["notes"]] == [ACTIONS]


def test_sam_template_with_short_tags_is_read_as_long_form() -> None:
    code, report = lint_json(str(FIXTURES / "sam-intrinsics.yaml"))
    assert code == 0
    [verdict] = report["files"]
    assert [(n["path"].removeprefix(ACTIONS), n["message"].split()[0]) for n in verdict["notes"]] == [
        (".ScriptCachingPolicy", "Fn::If"),
        (".Stages.NodeBootstrapped[0].ScriptSource.ScriptLocation", "Fn::Sub"),
        (".Stages.NodeBootstrapped[0].ScriptSource.Checksum", "Ref"),
        (".Stages.NodeBootstrapped[0].OnError", "Ref"),
    ]
    assert verdict["risks"] == []


def test_groups_a_loop_makes_are_linted_as_the_loop_makes_them(tmp_path: Path) -> None:
    """AWS::LanguageExtensions' `Fn::ForEach` made groups `lifeguard lint` never looked at ("nothing to
    lint", exit 0) while cfn-lint, which expands the loop first, failed them: each is linted as made, a
    collection known only at deploy time once, its identifier standing for the item."""

    def bad(name: str) -> Any:
        return template_of({"Stages": {"NodeBootstrapped": [script(Name=name)]}})["Resources"]["ComputeNodes"]

    known = {"Fn::ForEach::Groups": ["G", ["a", "b"], {"Group${G}": bad("setup ${G}!")}]}
    deployed = {"Fn::ForEach::More": ["N", {"Ref": "Names"}, {"More&{N}": bad("mount ${N}!")}]}
    path = tmp_path / "loops.json"
    path.write_text(json.dumps({"Transform": "AWS::LanguageExtensions", "Resources": known | deployed}))
    code, report = lint_json(str(path))
    assert code == 1
    assert [(f["resource"], [p["message"][:20] for p in f["problems"]]) for f in report["files"]] == [
        ("Groupa", ["'setup a!' must star"]),
        ("Groupb", ["'setup b!' must star"]),
        ("MoreN", ["'mount N!' must star"]),
    ]


def test_template_without_node_groups_is_one_line_and_passes() -> None:
    result = runner.invoke(app, ["lint", str(FIXTURES / "no-pcs.yaml")])
    assert result.exit_code == 0
    verdict = "no AWS::PCS::ComputeNodeGroup with NodeLifecycleActions: nothing to lint"
    assert (
        " ".join(result.stdout.split()) == f"{FIXTURES / 'no-pcs.yaml'} {verdict}"
    )  # one line, however wide
    code, report = lint_json(str(FIXTURES / "no-pcs.yaml"))
    assert code == 0
    assert report["files"][0]["resource"] is None
    assert report["files"][0]["notes"][0]["path"] == "Resources"


def test_previous_is_refused_for_templates_with_one_line() -> None:
    result = runner.invoke(app, ["lint", "--previous", str(CONFIGS / "article-terminate.json"), str(EXAMPLE)])
    assert result.exit_code == 2  # a usage that cannot be linted
    assert (
        result.stderr.strip()
        == f"lifeguard lint: {EXAMPLE}: --previous compares nodeLifecycleActions files, not templates"
    )


def test_a_template_as_previous_is_refused() -> None:
    result = runner.invoke(app, ["lint", "--previous", str(EXAMPLE), str(CONFIGS / "article-terminate.json")])
    assert result.exit_code == 2
    assert "lifeguard lint: --previous" in result.stderr
    assert "is a CloudFormation template" in result.stderr


def test_broken_yaml_is_one_problem_with_its_line(tmp_path: Path) -> None:
    broken = tmp_path / "stack.yaml"
    broken.write_text("Resources:\n  X: [unclosed\n")
    code, report = lint_json(str(broken))
    assert code == 1
    [problem] = report["files"][0]["problems"]
    assert problem["message"].startswith("neither JSON nor YAML at line 3")


def test_human_output_names_the_group_and_marks_intrinsic_cells() -> None:
    result = runner.invoke(
        app, ["lint", str(EXAMPLE), str(FIXTURES / "invalid-onerror.yaml")], env={"COLUMNS": "160"}
    )
    assert result.exit_code == 1
    out = result.stdout
    assert f"{EXAMPLE} › Batch  valid" in out
    assert "<Fn::Sub>" in out
    assert f"{EXAMPLE} › Interactive  valid" in out
    assert "(optional-script-terminates)" in out
    assert "ComputeNodes  invalid: 1 problem" in out


def test_a_template_of_more_resources_than_cloudformation_takes_is_invalid_and_says_so(
    tmp_path: Path,
) -> None:
    """600 groups, the last one's OnError misspelled: the first 500 were linted, all valid, exit 0, and the
    rest passed over unsaid. CloudFormation refuses a template of over 500 resources."""
    group = template_of(
        {"Stages": {"NodeBootstrapped": [script(OnError="CONTINUE", ExecutionPolicy="EVERY_BOOT")]}}
    )
    resources = {f"G{n}": group["Resources"]["ComputeNodes"] for n in range(600)}
    path = tmp_path / "stack.json"
    path.write_text(json.dumps({"Resources": resources}))
    code, report = lint_json(str(path))
    assert code == 1
    assert report["valid"] is False
    *groups, verdict = report["files"]
    assert len(groups) == 500
    assert verdict["problems"] == [
        {
            "path": "Resources",
            "message": "makes more than 500 resources, which CloudFormation refuses: the node groups "
            "past them are not linted",
        }
    ]
    path.write_text(json.dumps({"Resources": dict(list(resources.items())[:500])}))
    assert lint_json(str(path))[0] == 0
