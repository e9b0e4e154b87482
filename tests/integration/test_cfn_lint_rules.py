"""Lifeguard's rules as cfn-lint runs them (`cfn-lint --append-rules`): the findings of `lifeguard lint`,
with cfn-lint's rule ids, messages and line numbers."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from lifeguard.risks import RISK_CODES
from lifeguard_cli.cfn_rules import RISK_RULES
from tests.conftest import EVENTS, REPO

CFN_LINT = Path(sys.executable).parent / "cfn-lint"
RULES_MODULE = "lifeguard_cli.cfn_rules"
RULES_DIRECTORY = REPO / "src" / "lifeguard_cli" / "cfn_rules"
FIXTURES = REPO / "tests" / "fixtures" / "templates"
EXAMPLE = EVENTS / "templates" / "pcs-cluster.yaml"
LIFEGUARD_IDS = ("E91", "W91", "I91")


def cfn_lint(template: Path, rules: str = RULES_MODULE, *extra: str) -> list[dict[str, Any]]:
    """Lifeguard's findings of a cfn-lint run, as its JSON output gives them."""
    result = subprocess.run(
        [str(CFN_LINT), "--append-rules", rules, "--format", "json", *extra, "--", str(template)],
        capture_output=True,
        text=True,
        check=False,
        cwd=REPO,
    )
    assert "Traceback" not in result.stderr, result.stderr
    assert result.returncode in (0, 2, 4, 6, 8, 10, 12, 14), result.stderr  # cfn-lint's bitmask, no crash
    findings: list[dict[str, Any]] = json.loads(result.stdout or "[]")
    return [f for f in findings if f["Rule"]["Id"].startswith(LIFEGUARD_IDS)]


def line_of(template: Path, text: str) -> int:
    """The 1-based line of the only line of `template` that holds `text`."""
    [number] = [n for n, line in enumerate(template.read_text().splitlines(), 1) if text in line]
    return number


def test_bad_on_error_is_an_error_at_its_line() -> None:
    template = FIXTURES / "invalid-onerror.yaml"
    [finding] = cfn_lint(template)
    assert finding["Rule"]["Id"] == "E9101"
    assert finding["Level"] == "Error"
    assert finding["Message"] == (
        "NodeLifecycleActions.Stages.NodeBootstrapped[0].OnError: "
        "'TERMINATED' is not one of TERMINATE, STOP_SEQUENCE, CONTINUE"
    )
    actions = ["Resources", "ComputeNodes", "Properties", "NodeLifecycleActions"]
    assert finding["Location"]["Path"] == [*actions, "Stages", "NodeBootstrapped", 0, "OnError"]
    assert finding["Location"]["Start"]["LineNumber"] == line_of(template, "OnError: TERMINATED")


def test_risky_unpinned_terminate_script_gives_one_warning_per_risk() -> None:
    findings = cfn_lint(EXAMPLE)
    assert [(f["Rule"]["Id"], f["Level"]) for f in findings] == [("W9101", "Warning"), ("W9102", "Warning")]
    optional, unpinned = findings
    base = ["Resources", "Interactive", "Properties", "NodeLifecycleActions", "Stages", "NodeBootstrapped", 0]
    assert optional["Location"]["Path"] == base  # OnError is absent: the match is on the script
    assert optional["Message"].startswith(
        "NodeLifecycleActions.Stages.NodeBootstrapped[0].OnError: 'report-inventory' looks optional but is "
        "left on the default onError TERMINATE"
    )
    assert optional["Location"]["Start"]["LineNumber"] == line_of(EXAMPLE, "- Name: report-inventory")
    assert unpinned["Location"]["Path"] == [*base, "ScriptSource"]
    assert "'report-inventory' runs an S3 object without s3VersionId with no checksum" in unpinned["Message"]
    assert unpinned["Location"]["Start"]["LineNumber"] == line_of(EXAMPLE, "scripts/report-inventory.sh") - 1


def test_clean_group_has_no_findings_but_its_intrinsic_is_noted_on_request() -> None:
    assert not [f for f in cfn_lint(EXAMPLE) if f["Location"]["Path"][1] == "Batch"]
    noted = [
        f for f in cfn_lint(EXAMPLE, RULES_MODULE, "--include-checks", "I") if f["Rule"]["Id"] == "I9101"
    ]
    [note] = noted
    assert note["Location"]["Path"][1] == "Batch"
    assert note["Message"] == (
        "NodeLifecycleActions.Stages.NodeBootstrapped[0].ScriptSource.ScriptLocation: "
        "Fn::Sub is resolved only when the stack deploys: not checked"
    )
    assert note["Location"]["Start"]["LineNumber"] == line_of(EXAMPLE, "ScriptLocation: !Sub")


def test_sam_template_with_intrinsics_only_gets_notes() -> None:
    findings = cfn_lint(FIXTURES / "sam-intrinsics.yaml", RULES_MODULE, "--include-checks", "I")
    assert [f["Rule"]["Id"] for f in findings] == ["I9101"] * 4


def test_template_without_node_groups_gives_no_lifeguard_findings() -> None:
    assert cfn_lint(FIXTURES / "no-pcs.yaml", RULES_MODULE, "--include-checks", "I") == []


@pytest.mark.parametrize("template", [FIXTURES / "invalid-onerror.yaml", EXAMPLE], ids=lambda p: p.name)
def test_rules_directory_from_a_clone_gives_the_same_findings(template: Path) -> None:
    def summary(findings: list[dict[str, Any]]) -> list[tuple[str, str, int]]:
        return [(f["Rule"]["Id"], f["Message"], f["Location"]["Start"]["LineNumber"]) for f in findings]

    by_module = summary(cfn_lint(template))
    assert by_module
    assert summary(cfn_lint(template, str(RULES_DIRECTORY))) == by_module


def test_every_risk_code_has_its_warning_rule() -> None:
    assert sorted(RISK_RULES) == sorted(RISK_CODES)
    ids = [rule.id for rule in RISK_RULES.values()]
    assert all(rule_id.startswith("W91") for rule_id in ids)
    assert len(set(ids)) == len(ids)
