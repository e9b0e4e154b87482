"""The review of configuration changes against the local AWS over HTTP: DynamoDB, EventBridge and SQS in
moto, PCS in the local endpoint. The recorded CloudTrail call is made on PCS as it was, then reviewed; the
change's author is then found by the fingerprint the detection keeps for the group."""

from __future__ import annotations

import json
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

import pytest

from lifeguard.aws.clients import aws_client
from lifeguard.event_contract import DETAIL_KEYS
from lifeguard.log_subscription import encode_subscription
from lifeguard.store.changes import ChangeStore
from lifeguard.wiring import Wiring, build_config_review, build_scaling_events
from lifeguard_cli.local import LocalPcs, ManualClock, serve_local_pcs
from lifeguard_cli.local.stack import LocalStack
from tests.conftest import EVENTS, load_event
from tests.integration.conftest import deploy

pytestmark = pytest.mark.integration
CLUSTER, GROUP = "pcs_abc123de45", "pcs_abcdef01"
ARN = "arn:aws:sts::123456789012:assumed-role/ClusterAdmin/alice"
EVENT: dict[str, Any] = load_event("cloudtrail/update-compute-node-group.json")
AT = 1792544400000
NEW = EVENT["detail"]["requestParameters"]["nodeLifecycleActions"]
STREAM = [
    json.loads(line)
    for line in (EVENTS / "streams" / "cloudtrail-risky-change-then-loop.jsonl").read_text().splitlines()
]
RECORDS = [row for row in STREAM if "status_code" in row]


@dataclass
class Env:
    wiring: Wiring
    stack: LocalStack
    clock: ManualClock
    local: Any
    pcs_client: Any

    def now(self) -> float:
        return self.clock().timestamp()

    def at(self, epoch_ms: int) -> None:
        self.clock.set(datetime.fromtimestamp(epoch_ms / 1000, UTC))

    def scaling(self, rows: list[dict[str, Any]]) -> None:
        self.at(max(row["event_timestamp"] for row in rows))
        messages = [(row["event_timestamp"], json.dumps(row)) for row in rows]
        event = encode_subscription(
            "/aws/vendedlogs/pcs", f"AWSLogs/PCS/{CLUSTER}/node_lifecycle.log", messages
        )
        build_scaling_events(self.wiring, clock=self.now).handle_event(event)

    def bus_events(self) -> list[dict[str, Any]]:
        return self.stack.received_events(self.local.client("sqs"))


@pytest.fixture
def env(local: Any, monkeypatch: pytest.MonkeyPatch) -> Iterator[Env]:
    clock = ManualClock(datetime.fromtimestamp(RECORDS[0]["event_timestamp"] / 1000 - 600, UTC))
    pcs = LocalPcs(clock=clock, update_seconds=60)
    with serve_local_pcs(pcs) as server:
        pcs.add_cluster("lca", cluster_id=CLUSTER)
        pcs.add_compute_node_group(
            CLUSTER,
            "lca-static",
            group_id=GROUP,
            node_lifecycle_actions=load_event("configs/article-reverted.json"),
        )
        deployed = deploy(local, monkeypatch, server.endpoint_url, "review")
        yield Env(deployed.wiring, deployed.stack, clock, local, aws_client("pcs", server.endpoint_url))


def test_a_risky_change_is_reviewed_published_and_its_author_found_by_the_detections_fingerprint(
    env: Env,
) -> None:
    env.scaling([row for row in RECORDS if row["event_timestamp"] < AT])  # a good boot: the config is known
    env.bus_events()
    env.at(AT)
    env.pcs_client.update_compute_node_group(  # the call CloudTrail recorded, made as it was
        clusterIdentifier=CLUSTER, computeNodeGroupIdentifier=GROUP, nodeLifecycleActions=NEW
    )
    summary = build_config_review(env.wiring, clock=lambda: env.now() + 90).handle_event(EVENT)
    assert (summary.reviewed, summary.skipped) == (1, 0)

    [published] = env.bus_events()
    assert (published["source"], published["detail-type"]) == ("lifeguard", "ConfigChangeReviewed")
    detail = published["detail"]
    assert set(DETAIL_KEYS) <= set(detail)
    assert detail["changed_by"] == {"arn": ARN, "at": AT, "source": "cloudtrail"}
    assert detail["config_before"] == load_event("configs/article-reverted.json")
    assert detail["config_after"] == NEW
    assert [change["path"] for change in detail["diff"]] == ["stages.nodeBootstrapped[0]"]
    assert {"optional-script-terminates", "unpinned-mutable-source"} <= {r["code"] for r in detail["risks"]}

    # The loop that follows is detected on the configuration the change put in place: the fingerprint the
    # detection keeps for it is the one the change was kept under.
    env.scaling([row for row in RECORDS if row["event_timestamp"] > AT])
    [detected] = [e["detail"] for e in env.bus_events() if e["detail-type"] == "BootstrapLoopDetected"]
    assert detected["config_fingerprint"] == detail["config_fingerprint"]
    changes = ChangeStore(env.wiring.store.client, env.wiring.store.table)
    found = changes.find(CLUSTER, GROUP, detected["config_fingerprint"])
    assert found is not None
    assert found.to_changed_by() == detail["changed_by"]


def test_a_failed_call_reaches_nothing(env: Env) -> None:
    env.at(AT)
    event = json.loads(json.dumps(EVENT))
    event["detail"]["errorCode"] = "ConflictException"
    summary = build_config_review(env.wiring, clock=env.now).handle_event(event)
    assert (summary.reviewed, summary.ignored) == (0, 1)
    assert env.bus_events() == []
