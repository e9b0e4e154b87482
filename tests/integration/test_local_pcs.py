"""The local PCS endpoint through a plain boto3 client over loopback HTTP."""

from __future__ import annotations

import json
import urllib.request
from collections.abc import Iterator
from datetime import UTC, datetime
from typing import Any

import boto3
import pytest
from botocore.config import Config
from botocore.exceptions import ClientError

from lifeguard_cli.local import LocalPcs, LocalPcsServer, ManualClock, serve_local_pcs
from tests.conftest import load_event

pytestmark = pytest.mark.integration
NO_RETRIES = Config(retries={"mode": "standard", "total_max_attempts": 1})
PROFILE = "arn:aws:iam::123456789012:instance-profile/pcs-compute"


@pytest.fixture
def clock() -> ManualClock:
    return ManualClock(datetime(2026, 10, 21, 1, 0, tzinfo=UTC))


@pytest.fixture
def server(clock: ManualClock) -> Iterator[LocalPcsServer]:
    with serve_local_pcs(LocalPcs(clock=clock, update_seconds=120)) as running:
        yield running


@pytest.fixture
def pcs(server: LocalPcsServer) -> Any:
    return boto3.client(
        "pcs",
        endpoint_url=server.endpoint_url,
        region_name="us-east-1",
        aws_access_key_id="testing",
        aws_secret_access_key="testing",
        config=NO_RETRIES,
    )


def create_cluster(pcs: Any) -> str:
    cluster = pcs.create_cluster(
        clusterName="lca",
        scheduler={"type": "SLURM", "version": "25.05"},
        size="SMALL",
        networking={"subnetIds": ["subnet-0123456789abcdef0"]},
    )["cluster"]
    return str(cluster["id"])


def create_group(pcs: Any, cluster_id: str, name: str = "lca-static", **extra: Any) -> dict[str, Any]:
    group: dict[str, Any] = pcs.create_compute_node_group(
        clusterIdentifier=cluster_id,
        computeNodeGroupName=name,
        subnetIds=["subnet-0123456789abcdef0"],
        customLaunchTemplate={"id": "lt-0123456789abcdef0", "version": "1"},
        iamInstanceProfileArn=PROFILE,
        scalingConfiguration={"minInstanceCount": 1, "maxInstanceCount": 1},
        instanceConfigs=[{"instanceType": "c7i.large"}],
        **extra,
    )["computeNodeGroup"]
    return group


def test_create_and_get_a_group_with_the_articles_lifecycle_actions(pcs: Any, clock: ManualClock) -> None:
    cluster_id = create_cluster(pcs)
    config = load_event("configs/article-first-boot-every-boot.json")
    created = create_group(
        pcs, cluster_id, nodeLifecycleActions=config, tags={"lifeguard:mode": "quarantine"}
    )
    assert created["id"].startswith("pcs_")
    assert created["status"] == "ACTIVE"
    got = pcs.get_compute_node_group(clusterIdentifier="lca", computeNodeGroupIdentifier="lca-static")
    group = got["computeNodeGroup"]
    assert group["nodeLifecycleActions"] == config
    assert group["createdAt"] == clock()
    assert group["arn"].endswith(f"/computenodegroup/{created['id']}")
    assert pcs.list_tags_for_resource(resourceArn=group["arn"])["tags"] == {"lifeguard:mode": "quarantine"}


def test_update_goes_updating_then_active_on_the_clock(pcs: Any, clock: ManualClock) -> None:
    cluster_id = create_cluster(pcs)
    group = create_group(pcs, cluster_id, nodeLifecycleActions=load_event("configs/article-terminate.json"))
    clock.advance(600)
    stop = load_event("configs/article-stop-sequence.json")
    updated = pcs.update_compute_node_group(
        clusterIdentifier=cluster_id, computeNodeGroupIdentifier=group["id"], nodeLifecycleActions=stop
    )["computeNodeGroup"]
    assert updated["status"] == "UPDATING"
    assert updated["modifiedAt"] == clock()
    assert updated["modifiedAt"] > updated["createdAt"]
    with pytest.raises(ClientError) as caught:
        pcs.update_compute_node_group(
            clusterIdentifier=cluster_id, computeNodeGroupIdentifier=group["id"], nodeLifecycleActions=stop
        )
    assert caught.value.response["Error"]["Code"] == "ConflictException"
    assert caught.value.response["resourceId"] == group["id"]
    clock.advance(121)
    now = pcs.get_compute_node_group(clusterIdentifier=cluster_id, computeNodeGroupIdentifier=group["id"])
    assert now["computeNodeGroup"]["status"] == "ACTIVE"
    assert now["computeNodeGroup"]["nodeLifecycleActions"] == stop


def test_invalid_lifecycle_actions_get_a_validation_exception_with_every_field(pcs: Any) -> None:
    cluster_id = create_cluster(pcs)
    bad = load_event("configs/article-terminate.json")
    bad["stages"]["nodeBootstrapped"][0]["name"] = "bad/name"
    bad["stages"]["nodeBootstrapped"][1]["name"] = "x" * 65
    with pytest.raises(ClientError) as caught:
        create_group(pcs, cluster_id, nodeLifecycleActions=bad)
    response = caught.value.response
    assert response["Error"]["Code"] == "ValidationException"
    assert response["reason"] == "fieldValidationFailed"
    assert [field["name"] for field in response["fieldList"]] == [
        "nodeLifecycleActions.stages.nodeBootstrapped[0].name",
        "nodeLifecycleActions.stages.nodeBootstrapped[1].name",
    ]


def test_documented_rules_beyond_the_model_are_enforced_too(pcs: Any) -> None:
    cluster_id = create_cluster(pcs)
    duplicate = load_event("configs/invalid-duplicate-names.json")
    with pytest.raises(ClientError) as caught:
        create_group(pcs, cluster_id, nodeLifecycleActions=duplicate)
    assert (
        caught.value.response["fieldList"][0]["name"]
        == "nodeLifecycleActions.stages.nodeBootstrapped[1].name"
    )


def raw_call(server: LocalPcsServer, target: str, body: dict[str, Any]) -> tuple[int, dict[str, Any]]:
    request = urllib.request.Request(
        server.endpoint_url,
        data=json.dumps(body).encode(),
        headers={"X-Amz-Target": target, "Content-Type": "application/x-amz-json-1.0"},
        method="POST",
    )
    try:
        with urllib.request.urlopen(request, timeout=10) as response:
            return response.status, json.loads(response.read())
    except urllib.error.HTTPError as error:
        return error.code, json.loads(error.read())


def test_requests_botocore_would_not_send_are_rejected(server: LocalPcsServer) -> None:
    status, body = raw_call(
        server,
        "AWSParallelComputingService.GetComputeNodeGroup",
        {"clusterIdentifier": "lca", "computeNodeGroupId": "x"},
    )
    assert status == 400
    assert body["__type"] == "ValidationException"
    names = {field["name"] for field in body["fieldList"]}
    assert names == {"computeNodeGroupIdentifier", "computeNodeGroupId"}
    status, body = raw_call(server, "AWSParallelComputingService.Nope", {})
    assert (status, body["__type"]) == (400, "UnknownOperationException")
    status, body = raw_call(server, "SomethingElse.GetCluster", {})
    assert body["__type"] == "UnknownOperationException"


def test_injected_throttling_carries_retry_after_seconds(pcs: Any, server: LocalPcsServer) -> None:
    cluster_id = create_cluster(pcs)
    server.pcs.inject_fault("ThrottlingException", operation="GetCluster", times=2, retry_after_seconds=7)
    for _ in range(2):
        with pytest.raises(ClientError) as caught:
            pcs.get_cluster(clusterIdentifier=cluster_id)
        assert caught.value.response["Error"]["Code"] == "ThrottlingException"
        assert caught.value.response["retryAfterSeconds"] == 7
    assert pcs.get_cluster(clusterIdentifier=cluster_id)["cluster"]["id"] == cluster_id
    assert [call.error for call in server.pcs.calls if call.operation == "GetCluster"] == [
        "ThrottlingException",
        "ThrottlingException",
        None,
    ]


def test_injected_internal_error_is_a_500_that_botocore_retries(server: LocalPcsServer) -> None:
    server.pcs.inject_fault("InternalServerException", operation="ListClusters", times=2)
    retrying = boto3.client(
        "pcs",
        endpoint_url=server.endpoint_url,
        region_name="us-east-1",
        aws_access_key_id="testing",
        aws_secret_access_key="testing",
        config=Config(retries={"mode": "standard", "max_attempts": 3}),
    )
    response = retrying.list_clusters()
    assert response["ResponseMetadata"]["RetryAttempts"] == 2
    assert [c.error for c in server.pcs.calls if c.operation == "ListClusters"] == [
        "InternalServerException",
        "InternalServerException",
        None,
    ]


def test_client_token_makes_an_update_apply_once(
    pcs: Any, server: LocalPcsServer, clock: ManualClock
) -> None:
    cluster_id = create_cluster(pcs)
    group = create_group(pcs, cluster_id, nodeLifecycleActions=load_event("configs/article-terminate.json"))
    stop = load_event("configs/article-stop-sequence.json")
    args = {
        "clusterIdentifier": cluster_id,
        "computeNodeGroupIdentifier": group["id"],
        "nodeLifecycleActions": stop,
        "clientToken": "episode-1-quarantine",
    }
    first = pcs.update_compute_node_group(**args)["computeNodeGroup"]
    clock.advance(1)
    again = pcs.update_compute_node_group(**args)["computeNodeGroup"]
    assert again["modifiedAt"] == first["modifiedAt"]
    with pytest.raises(ClientError) as caught:
        pcs.update_compute_node_group(
            **{**args, "nodeLifecycleActions": load_event("configs/article-reverted.json")}
        )
    assert caught.value.response["Error"]["Code"] == "ConflictException"


def test_list_paginates_and_unknown_groups_are_not_found(pcs: Any) -> None:
    cluster_id = create_cluster(pcs)
    for index in range(3):
        create_group(pcs, cluster_id, name=f"group-{index}")
    pages = list(
        pcs.get_paginator("list_compute_node_groups").paginate(
            clusterIdentifier=cluster_id, PaginationConfig={"PageSize": 2}
        )
    )
    assert [len(page["computeNodeGroups"]) for page in pages] == [2, 1]
    with pytest.raises(ClientError) as caught:
        pcs.get_compute_node_group(clusterIdentifier=cluster_id, computeNodeGroupIdentifier="pcs_missing1")
    assert caught.value.response["Error"]["Code"] == "ResourceNotFoundException"
    pcs.delete_compute_node_group(clusterIdentifier=cluster_id, computeNodeGroupIdentifier="group-0")
    names = [
        g["name"] for g in pcs.list_compute_node_groups(clusterIdentifier=cluster_id)["computeNodeGroups"]
    ]
    assert names == ["group-1", "group-2"]


def test_seeded_ids_match_a_recorded_stream(server: LocalPcsServer, pcs: Any) -> None:
    server.pcs.add_cluster("lca", cluster_id="pcs_abc123de45")
    server.pcs.add_compute_node_group(
        "pcs_abc123de45",
        "lca-static",
        group_id="pcs_abcdef01",
        node_lifecycle_actions=load_event("configs/article-terminate.json"),
    )
    group = pcs.get_compute_node_group(
        clusterIdentifier="pcs_abc123de45", computeNodeGroupIdentifier="pcs_abcdef01"
    )
    assert group["computeNodeGroup"]["name"] == "lca-static"
    summaries = pcs.list_clusters()["clusters"]
    assert [c["id"] for c in summaries] == ["pcs_abc123de45"]


def test_tags_can_be_changed(pcs: Any) -> None:
    cluster_id = create_cluster(pcs)
    arn = create_group(pcs, cluster_id)["arn"]
    pcs.tag_resource(resourceArn=arn, tags={"lifeguard:mode": "revert", "lifeguard:threshold": "3"})
    pcs.untag_resource(resourceArn=arn, tagKeys=["lifeguard:threshold"])
    assert pcs.list_tags_for_resource(resourceArn=arn)["tags"] == {"lifeguard:mode": "revert"}


@pytest.mark.parametrize("length", ["abc", "-1", "99999999999999999999", "1000000000"])
def test_a_content_length_that_is_no_length_is_answered_as_a_validation_error(
    server: LocalPcsServer, length: str
) -> None:
    """`Content-Length: abc` raised in the handler: a traceback, and the connection dropped with no answer
    (a negative one read to no end). It is answered, 400 ValidationException, as a body not JSON is."""
    import socket

    host, port = server.endpoint_url.removeprefix("http://").split(":")
    with socket.create_connection((host, int(port)), timeout=5) as connection:
        connection.sendall(
            b"POST / HTTP/1.1\r\nHost: x\r\nX-Amz-Target: AWSParallelComputingService.ListClusters\r\n"
            + f"Content-Length: {length}\r\n\r\n{{}}".encode()
        )
        answer = b""
        while chunk := connection.recv(
            4096
        ):  # to its end: the endpoint closes a connection it cannot read on
            answer += chunk
    head, _, body = answer.partition(b"\r\n\r\n")
    assert head.startswith(b"HTTP/1.1 400 ")
    assert json.loads(body)["__type"] == "ValidationException"
