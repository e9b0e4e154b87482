"""Rules of the local PCS and the twin no other test held: names are unique in a cluster, a group is found
only through its own cluster, an update keeps what it changed, lists come in PCS's pages of 10; the twin's
default TERMINATE cycle is the article's 5-6 minutes and its timings are bounded."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
import yaml

from lifeguard_cli.local.pcs import LocalPcs, ManualClock
from lifeguard_cli.simulate.scenario import BUILT_IN, ScenarioError, Timings, parse_scenario
from tests.unit.test_local_pcs_model import CLUSTER, GROUP, START


def call(pcs: LocalPcs, op: str, **params: Any) -> tuple[int, dict[str, Any]]:
    return pcs.handle(op, json.dumps(params).encode())


@pytest.fixture
def pcs() -> LocalPcs:
    p = LocalPcs(clock=ManualClock(START), update_seconds=0)
    assert call(p, "CreateCluster", **CLUSTER)[0] == 200
    return p


def test_a_second_group_of_the_same_name_in_a_cluster_is_a_conflict(pcs: LocalPcs) -> None:
    assert call(pcs, "CreateComputeNodeGroup", **GROUP)[0] == 200
    status, body = call(pcs, "CreateComputeNodeGroup", **GROUP)
    assert (status, body["__type"]) == (409, "ConflictException")
    listed = call(pcs, "ListComputeNodeGroups", clusterIdentifier="lca")[1]["computeNodeGroups"]
    assert len(listed) == 1


def test_a_group_is_not_found_through_another_cluster(pcs: LocalPcs) -> None:
    assert call(pcs, "CreateComputeNodeGroup", **GROUP)[0] == 200
    assert call(pcs, "CreateCluster", **{**CLUSTER, "clusterName": "other"})[0] == 200
    status, body = call(
        pcs, "GetComputeNodeGroup", clusterIdentifier="other", computeNodeGroupIdentifier="lca-static"
    )
    assert (status, body["__type"]) == (404, "ResourceNotFoundException")


def test_an_updated_scaling_configuration_is_what_get_answers(pcs: LocalPcs) -> None:
    assert call(pcs, "CreateComputeNodeGroup", **GROUP)[0] == 200
    scaling = {"minInstanceCount": 2, "maxInstanceCount": 4}
    assert (
        call(
            pcs,
            "UpdateComputeNodeGroup",
            clusterIdentifier="lca",
            computeNodeGroupIdentifier="lca-static",
            scalingConfiguration=scaling,
        )[0]
        == 200
    )
    got = call(pcs, "GetComputeNodeGroup", clusterIdentifier="lca", computeNodeGroupIdentifier="lca-static")
    assert got[1]["computeNodeGroup"]["scalingConfiguration"] == scaling


def test_a_list_without_max_results_answers_pages_of_10(pcs: LocalPcs) -> None:
    for i in range(12):
        assert call(pcs, "CreateQueue", clusterIdentifier="lca", queueName=f"q{i:02d}")[0] == 200
    first = call(pcs, "ListQueues", clusterIdentifier="lca")[1]
    assert len(first["queues"]) == 10
    assert first["nextToken"]
    second = call(pcs, "ListQueues", clusterIdentifier="lca", nextToken=first["nextToken"])[1]
    assert len(second["queues"]) == 2
    assert "nextToken" not in second


def test_the_twins_default_terminate_cycle_is_the_articles_5_to_6_minutes() -> None:
    """The article: launches at 01:04:45, 01:09:44, 01:15:45; "one cycle took about 5-6 minutes"."""
    t = Timings()
    cycle = t.register + t.scripts_start + t.fail_to_terminated + t.relaunch
    assert 5 * 60 <= cycle <= 6 * 60


def _article() -> dict[str, Any]:
    return yaml.safe_load((BUILT_IN / "article-loop.yaml").read_text())


@pytest.mark.parametrize(("key", "value"), [("relaunch", 0), ("relaunch", 0.5), ("register", 3601)])
def test_timings_out_of_their_bounds_are_refused(key: str, value: float) -> None:
    data = _article()
    data["timings"] = {key: value}
    with pytest.raises(ScenarioError, match=f"timings.{key}"):
        parse_scenario(data, Path("s.yaml"))
