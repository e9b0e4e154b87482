"""Each function's module loads its own code and no other function's, no boto3 until its first event calls
AWS (its clients are made on first use), and no model library at all: what a cold start pays for. Each
import runs in a fresh, isolated interpreter, as Lambda's runtime imports a handler."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

from lifeguard.wiring import YOUNG_COLLECTION_EVERY
from tests.conftest import REPO

PYTHONS_DEFAULT = 700

OTHERS = {
    "scaling_events": (
        "lifeguard.handlers.node_reports",
        "lifeguard.remediation.remediator",
        "lifeguard.notify.slack",
        "lifeguard.cloudtrail",
        # Read only when a loop is decided (its ledger, who changed its configuration): not at a cold start.
        "lifeguard.remediation.records",
        "lifeguard.store.remediations",
        "lifeguard.store.changes",
    ),
    "node_reports": (
        "lifeguard.handlers.scaling_events",
        "lifeguard.remediation.remediator",
        "lifeguard.notify.slack",
        "lifeguard.cloudtrail",
        "lifeguard.scaling_log",  # its rules read states, not scaling records
    ),
    "remediate": (
        "lifeguard.handlers.scaling_events",
        "lifeguard.handlers.node_reports",
        "lifeguard.notify.slack",
        "lifeguard.cloudtrail",
        # It reads a group's state and ledger: no records of the scaling log or the nodes, no batch.
        "lifeguard.scaling_log",
        "lifeguard.node_report",
        "lifeguard.log_subscription",
    ),
    "notify": (  # SNS alone, as the stack's default (no Slack webhook)
        "lifeguard.notify.slack",
        "lifeguard.detection",
        "lifeguard.handlers.scaling_events",
        "lifeguard.remediation.remediator",
        "lifeguard.cloudtrail",
    ),
    "review_changes": (
        "lifeguard.handlers.scaling_events",
        "lifeguard.remediation.remediator",
        "lifeguard.notify.slack",
        # Its events come from EventBridge: no subscription batch, no scaling or node records.
        "lifeguard.log_subscription",
        "lifeguard.scaling_log",
        "lifeguard.node_report",
    ),
}
OWN = {
    "scaling_events": "lifeguard.handlers.scaling_events",
    "node_reports": "lifeguard.handlers.node_reports",
    "remediate": "lifeguard.remediation.remediator",
    "notify": "lifeguard.notify.notifier",
    "review_changes": "lifeguard.handlers.config_review",
}
# Imports the function's app, reports which of the asked modules it loaded, then makes the function's first
# AWS client (the table's, as its first event would) and reports again.
PROBE = """
import gc, json, sys
sys.path[:0] = [sys.argv[1], sys.argv[2]]
asked = json.loads(sys.argv[3])
import app
loaded = [name for name in asked if name in sys.modules]
from lifeguard.aws.clients import lazy_client
lazy_client("dynamodb").meta
print(json.dumps({
    "at_import": loaded, "after_a_client": "boto3" in sys.modules, "pydantic": "pydantic" in sys.modules,
    "young_collections_every": gc.get_threshold()[0],
}))
"""
ENVIRONMENT = {
    "AWS_DEFAULT_REGION": "us-east-1",
    "AWS_ACCESS_KEY_ID": "testing",
    "AWS_SECRET_ACCESS_KEY": "testing",
    "AWS_CONFIG_FILE": os.devnull,
    "AWS_SHARED_CREDENTIALS_FILE": os.devnull,
    "LIFEGUARD_TABLE": "lifeguard-test",
    "LIFEGUARD_TOPIC_ARN": "arn:aws:sns:us-east-1:123456789012:lifeguard-test",
    "POWERTOOLS_SERVICE_NAME": "lifeguard",
    "PATH": os.environ.get("PATH", ""),
}


def run_in_function(function: str, script: str, argument: str, environment: dict[str, str]) -> str:
    """What `script` prints, run in a fresh isolated interpreter as Lambda runs the function (its directory
    and the layer first on the path: `sys.argv[1]` and `[2]`; `argument` is `sys.argv[3]`)."""
    done = subprocess.run(
        [
            sys.executable,
            "-I",
            "-c",
            script,
            str(REPO / "functions" / function),
            str(REPO / "layers" / "lifeguard"),
            argument,
        ],
        env=environment,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    return done.stdout


def _probe(function: str, asked: list[str], environment: dict[str, str]) -> dict[str, object]:
    printed = run_in_function(function, PROBE, json.dumps(asked), environment)
    result: dict[str, object] = json.loads(printed.splitlines()[-1])
    return result


@pytest.mark.parametrize("function", sorted(OTHERS))
def test_a_function_loads_its_own_code_and_boto3_only_with_its_first_client(function: str) -> None:
    result = _probe(function, ["boto3", "pydantic", OWN[function], *OTHERS[function]], ENVIRONMENT)
    # The functions that read batches of records collect their young garbage less often (`settle_collector`).
    young = YOUNG_COLLECTION_EVERY if function in ("scaling_events", "node_reports") else PYTHONS_DEFAULT
    assert result == {
        "at_import": [OWN[function]],
        "after_a_client": True,
        "pydantic": False,
        "young_collections_every": young,
    }


def test_notify_with_slack_alone_loads_no_sns_code() -> None:
    environment = {k: v for k, v in ENVIRONMENT.items() if k != "LIFEGUARD_TOPIC_ARN"}
    environment["LIFEGUARD_SLACK_SECRET"] = "arn:aws:secretsmanager:us-east-1:123456789012:secret:hook-AbCdEf"
    result = _probe("notify", ["lifeguard.notify.sns", "lifeguard.notify.slack"], environment)
    assert result["at_import"] == ["lifeguard.notify.slack"]
