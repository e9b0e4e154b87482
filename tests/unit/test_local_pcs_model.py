"""The local PCS's resource model and clock, called in process: `LocalPcs.handle` without HTTP."""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from lifeguard.errors import Problem
from lifeguard_cli.local.pcs import LocalPcs, ManualClock, PcsApiError
from tests.conftest import load_event

START = datetime(2026, 10, 21, 1, 0, tzinfo=UTC)
PROFILE = "arn:aws:iam::123456789012:instance-profile/pcs-compute"
CLUSTER = {
    "clusterName": "lca",
    "scheduler": {"type": "SLURM", "version": "25.05"},
    "size": "SMALL",
    "networking": {"subnetIds": ["subnet-0123456789abcdef0"]},
}
GROUP = {
    "clusterIdentifier": "lca",
    "computeNodeGroupName": "lca-static",
    "subnetIds": ["subnet-0123456789abcdef0"],
    "customLaunchTemplate": {"id": "lt-0123456789abcdef0", "version": "1"},
    "iamInstanceProfileArn": PROFILE,
    "scalingConfiguration": {"minInstanceCount": 1, "maxInstanceCount": 1},
    "instanceConfigs": [{"instanceType": "c7i.large"}],
}


@pytest.fixture
def clock() -> ManualClock:
    return ManualClock(START)


@pytest.fixture
def pcs(clock: ManualClock) -> LocalPcs:
    return LocalPcs(clock=clock, update_seconds=120)


def answer(pcs: LocalPcs, operation: str, params: dict[str, Any]) -> tuple[int, dict[str, Any]]:
    """What the endpoint answers `operation` with `params` as its JSON body."""
    return pcs.handle(operation, json.dumps(params).encode())


def ok(pcs: LocalPcs, operation: str, **params: Any) -> dict[str, Any]:
    """The body of a call that must succeed."""
    status, body = answer(pcs, operation, params)
    assert status == 200, body
    return body


def create_group(pcs: LocalPcs, **extra: Any) -> dict[str, Any]:
    if not any(c.operation == "CreateCluster" and c.error is None for c in pcs.calls):
        ok(pcs, "CreateCluster", **CLUSTER)
    group: dict[str, Any] = ok(pcs, "CreateComputeNodeGroup", **{**GROUP, **extra})["computeNodeGroup"]
    return group


def test_a_created_group_is_got_back_with_its_spec_timestamps_and_tags(pcs: LocalPcs) -> None:
    config = load_event("configs/article-first-boot-every-boot.json")
    created = create_group(pcs, nodeLifecycleActions=config, tags={"lifeguard:mode": "quarantine"})
    assert created["id"].startswith("pcs_")
    assert created["status"] == "ACTIVE"

    group = ok(pcs, "GetComputeNodeGroup", clusterIdentifier="lca", computeNodeGroupIdentifier="lca-static")[
        "computeNodeGroup"
    ]
    assert group["id"] == created["id"]
    assert group["nodeLifecycleActions"] == config
    assert group["instanceConfigs"] == [{"instanceType": "c7i.large"}]
    assert group["createdAt"] == group["modifiedAt"] == "2026-10-21T01:00:00.000Z"  # ISO 8601, as the model
    assert group["arn"].startswith("arn:aws:pcs:us-east-1:123456789012:cluster/pcs_")
    assert group["arn"].endswith(f"/computenodegroup/{created['id']}")
    assert "tags" not in group
    tags = ok(pcs, "ListTagsForResource", resourceArn=group["arn"])["tags"]
    assert tags == {"lifeguard:mode": "quarantine"}


def test_update_goes_updating_then_active_and_refuses_a_second_update_meanwhile(
    pcs: LocalPcs, clock: ManualClock
) -> None:
    group = create_group(pcs, nodeLifecycleActions=load_event("configs/article-terminate.json"))
    clock.advance(600)
    stop = load_event("configs/article-stop-sequence.json")
    update = {
        "clusterIdentifier": "lca",
        "computeNodeGroupIdentifier": group["id"],
        "nodeLifecycleActions": stop,
    }

    updated = ok(pcs, "UpdateComputeNodeGroup", **update)["computeNodeGroup"]
    assert updated["status"] == "UPDATING"
    assert updated["modifiedAt"] == "2026-10-21T01:10:00.000Z"
    assert updated["createdAt"] == "2026-10-21T01:00:00.000Z"

    status, body = answer(pcs, "UpdateComputeNodeGroup", update)
    assert status == 409
    assert body["__type"] == "ConflictException"
    assert body["resourceId"] == group["id"]

    clock.advance(119)
    got = ok(pcs, "GetComputeNodeGroup", clusterIdentifier="lca", computeNodeGroupIdentifier=group["id"])
    assert got["computeNodeGroup"]["status"] == "UPDATING"
    clock.advance(1)
    got = ok(pcs, "GetComputeNodeGroup", clusterIdentifier="lca", computeNodeGroupIdentifier=group["id"])
    assert got["computeNodeGroup"]["status"] == "ACTIVE"
    assert got["computeNodeGroup"]["nodeLifecycleActions"] == stop


def test_a_new_resource_is_creating_until_create_seconds_pass(clock: ManualClock) -> None:
    pcs = LocalPcs(clock=clock, create_seconds=30)
    cluster = ok(pcs, "CreateCluster", **CLUSTER)["cluster"]
    assert cluster["status"] == "CREATING"
    clock.advance(30)
    assert ok(pcs, "GetCluster", clusterIdentifier="lca")["cluster"]["status"] == "ACTIVE"


def test_lists_page_by_max_results_and_next_token(pcs: LocalPcs) -> None:
    for index in range(3):
        create_group(pcs, computeNodeGroupName=f"group-{index}")

    first = ok(pcs, "ListComputeNodeGroups", clusterIdentifier="lca", maxResults=2)
    assert [g["name"] for g in first["computeNodeGroups"]] == ["group-0", "group-1"]
    rest = ok(
        pcs, "ListComputeNodeGroups", clusterIdentifier="lca", maxResults=2, nextToken=first["nextToken"]
    )
    assert [g["name"] for g in rest["computeNodeGroups"]] == ["group-2"]
    assert "nextToken" not in rest
    assert [c["name"] for c in ok(pcs, "ListClusters")["clusters"]] == ["lca"]


def test_deleted_groups_are_gone_and_a_cluster_with_groups_cannot_be_deleted(pcs: LocalPcs) -> None:
    group = create_group(pcs)
    status, body = answer(pcs, "DeleteCluster", {"clusterIdentifier": "lca"})
    assert (status, body["__type"]) == (409, "ConflictException")

    ok(pcs, "DeleteComputeNodeGroup", clusterIdentifier="lca", computeNodeGroupIdentifier="lca-static")
    status, body = answer(
        pcs, "GetComputeNodeGroup", {"clusterIdentifier": "lca", "computeNodeGroupIdentifier": group["id"]}
    )
    assert (status, body["__type"], body["resourceId"]) == (404, "ResourceNotFoundException", group["id"])
    ok(pcs, "DeleteCluster", clusterIdentifier="lca")
    assert ok(pcs, "ListClusters")["clusters"] == []


def test_a_cluster_id_pcs_does_not_have_is_refused_as_a_missing_grant_and_a_name_is_not_found(
    pcs: LocalPcs,
) -> None:
    """PCS's model: AccessDeniedException when "the cluster ID doesn't exist" (a cluster deleted since, or
    an id of another account). A local not-found sent Lifeguard down paths AWS never takes."""
    create_group(pcs)
    for operation, params in (
        ("GetComputeNodeGroup", {"computeNodeGroupIdentifier": "lca-static"}),
        ("ListComputeNodeGroups", {}),
        ("GetCluster", {}),
    ):
        status, body = answer(pcs, operation, {"clusterIdentifier": "pcs_0000000000", **params})
        assert (status, body["__type"]) == (403, "AccessDeniedException"), operation
        status, body = answer(pcs, operation, {"clusterIdentifier": "no-such-cluster", **params})
        assert (status, body["__type"]) == (404, "ResourceNotFoundException"), operation


def test_tags_can_be_added_and_removed(pcs: LocalPcs) -> None:
    arn = create_group(pcs)["arn"]
    ok(pcs, "TagResource", resourceArn=arn, tags={"lifeguard:mode": "revert", "lifeguard:threshold": "3"})
    ok(pcs, "UntagResource", resourceArn=arn, tagKeys=["lifeguard:threshold", "absent"])
    assert ok(pcs, "ListTagsForResource", resourceArn=arn)["tags"] == {"lifeguard:mode": "revert"}
    status, body = answer(pcs, "ListTagsForResource", {"resourceArn": arn + "-gone"})
    assert (status, body["__type"]) == (404, "ResourceNotFoundException")


def test_client_token_applies_an_update_once_and_refuses_it_reused_for_other_parameters(
    pcs: LocalPcs, clock: ManualClock
) -> None:
    group = create_group(pcs)
    update = {
        "clusterIdentifier": "lca",
        "computeNodeGroupIdentifier": group["id"],
        "nodeLifecycleActions": load_event("configs/article-stop-sequence.json"),
        "clientToken": "episode-1-quarantine",
    }
    first = ok(pcs, "UpdateComputeNodeGroup", **update)
    clock.advance(1)
    assert ok(pcs, "UpdateComputeNodeGroup", **update) == first

    other = {**update, "nodeLifecycleActions": load_event("configs/article-reverted.json")}
    status, body = answer(pcs, "UpdateComputeNodeGroup", other)
    assert (status, body["__type"], body["resourceType"]) == (409, "ConflictException", "clientToken")


def bad_name() -> dict[str, Any]:
    config = load_event("configs/article-terminate.json")
    config["stages"]["nodeBootstrapped"][0]["name"] = "bad/name"
    config["stages"]["nodeBootstrapped"][1]["name"] = "x" * 65
    return config


@pytest.mark.parametrize(
    ("operation", "params", "fields"),
    [
        pytest.param(
            "GetComputeNodeGroup",
            {"clusterIdentifier": "lca", "computeNodeGroupId": "x"},
            ["computeNodeGroupIdentifier", "computeNodeGroupId"],
            id="missing-and-unknown-member",
        ),
        pytest.param(
            "CreateComputeNodeGroup",
            {**GROUP, "nodeLifecycleActions": bad_name()},
            [
                "nodeLifecycleActions.stages.nodeBootstrapped[0].name",
                "nodeLifecycleActions.stages.nodeBootstrapped[1].name",
            ],
            id="model-constraints-on-lifecycle-actions",
        ),
        pytest.param(
            "CreateComputeNodeGroup",
            {**GROUP, "nodeLifecycleActions": load_event("configs/invalid-duplicate-names.json")},
            ["nodeLifecycleActions.stages.nodeBootstrapped[1].name"],
            id="documented-rule-beyond-the-model",
        ),
        pytest.param(
            "CreateCluster",
            {**CLUSTER, "size": "HUGE"},
            ["size"],
            id="enum",
        ),
    ],
)
def test_a_request_the_model_refuses_is_a_validation_exception_listing_every_field(
    pcs: LocalPcs, operation: str, params: dict[str, Any], fields: list[str]
) -> None:
    ok(pcs, "CreateCluster", **{**CLUSTER, "clusterName": "other"})
    status, body = answer(pcs, operation, params)
    assert status == 400
    assert body["__type"] == "ValidationException"
    assert body["reason"] == "fieldValidationFailed"
    assert sorted(f["name"] for f in body["fieldList"]) == sorted(fields)
    assert pcs.calls[-1].operation == operation
    assert pcs.calls[-1].error == "ValidationException"
    assert [c["name"] for c in ok(pcs, "ListClusters")["clusters"]] == ["other"]


@pytest.mark.parametrize(
    ("operation", "body", "code", "reason"),
    [
        ("GetCluster", b"{not json", "ValidationException", "cannotParse"),
        ("GetCluster", b"[]", "ValidationException", "cannotParse"),
        ("UpdateCluster", b"{}", "ValidationException", "other"),
        ("Nope", b"{}", "UnknownOperationException", None),
    ],
)
def test_a_request_that_cannot_be_served_is_refused_before_any_handler(
    pcs: LocalPcs, operation: str, body: bytes, code: str, reason: str | None
) -> None:
    status, answered = pcs.handle(operation, body)
    assert (status, answered["__type"], answered.get("reason")) == (400, code, reason)
    assert (pcs.calls[-1].operation, pcs.calls[-1].params, pcs.calls[-1].error) == (operation, {}, code)


def test_a_response_the_model_rejects_is_an_internal_error(pcs: LocalPcs) -> None:
    pcs.add_cluster("lca")
    pcs.add_compute_node_group("lca", "seeded", node_lifecycle_actions={"notAMember": True})
    status, body = answer(
        pcs, "GetComputeNodeGroup", {"clusterIdentifier": "lca", "computeNodeGroupIdentifier": "seeded"}
    )
    assert status == 500
    assert body["__type"] == "InternalServerException"
    assert "PCS model rejects" in body["message"]


def test_an_injected_fault_answers_its_operation_the_given_times(pcs: LocalPcs) -> None:
    ok(pcs, "CreateCluster", **CLUSTER)
    pcs.inject_fault("ThrottlingException", operation="GetCluster", times=2, retry_after_seconds=7)

    for _ in range(2):
        status, body = answer(pcs, "GetCluster", {"clusterIdentifier": "lca"})
        assert (status, body["__type"], body["retryAfterSeconds"]) == (429, "ThrottlingException", 7)
        assert ok(pcs, "ListClusters")["clusters"]
    assert ok(pcs, "GetCluster", clusterIdentifier="lca")["cluster"]["name"] == "lca"
    assert [c.error for c in pcs.calls if c.operation == "GetCluster"] == [
        "ThrottlingException",
        "ThrottlingException",
        None,
    ]


def test_a_fault_without_an_operation_hits_the_next_call_of_any_operation(pcs: LocalPcs) -> None:
    pcs.inject_fault("ConflictException", message="busy")
    status, body = answer(pcs, "ListClusters", {})
    assert status == 409
    assert body == {
        "__type": "ConflictException",
        "message": "busy",
        "resourceId": "injected",
        "resourceType": "computeNodeGroup",
    }
    assert ok(pcs, "ListClusters") == {"clusters": []}


def test_seeded_resources_keep_the_ids_a_recorded_stream_names(pcs: LocalPcs) -> None:
    pcs.add_cluster("lca", cluster_id="pcs_abc123de45")
    seeded = pcs.add_compute_node_group(
        "lca", "lca-static", group_id="pcs_abcdef01", tags={"lifeguard:mode": "quarantine"}
    )
    assert (seeded["id"], seeded["clusterId"]) == ("pcs_abcdef01", "pcs_abc123de45")
    got = ok(
        pcs,
        "GetComputeNodeGroup",
        clusterIdentifier="pcs_abc123de45",
        computeNodeGroupIdentifier="pcs_abcdef01",
    )
    assert got["computeNodeGroup"]["name"] == "lca-static"
    with pytest.raises(PcsApiError) as caught:
        pcs.add_cluster("again", cluster_id="pcs_abc123de45")
    assert (caught.value.code, caught.value.status) == ("ConflictException", 409)


def test_a_validation_error_names_its_first_problem_and_counts_the_rest() -> None:
    error = PcsApiError.validation([Problem("size", "bad"), Problem("", "worse"), Problem("x", "too")])
    assert error.message.endswith(" (and 2 more)")
    assert error.body()["fieldList"][1] == {"name": "(request)", "message": "worse"}
    assert (error.status, PcsApiError("SomethingNew", "?").status) == (400, 400)


def test_the_manual_clock_moves_only_forward_and_only_when_told() -> None:
    clock = ManualClock(START)
    assert clock() == clock() == START
    assert clock.advance(90) == START + timedelta(seconds=90)
    clock.set(START)
    assert clock() == START + timedelta(seconds=90)
    clock.set(START + timedelta(hours=1))
    assert clock() == START + timedelta(hours=1)
    assert ManualClock()() == datetime(2026, 10, 21, tzinfo=UTC)


def test_without_a_clock_the_model_uses_the_system_time() -> None:
    before = datetime.now(UTC)
    cluster = LocalPcs().add_cluster("lca")
    assert before <= cluster["createdAt"] <= datetime.now(UTC)


IDENT = {"clusterIdentifier": "lca", "computeNodeGroupIdentifier": "lca-static"}


@pytest.mark.parametrize("subnets", [[], ["subnet-1"]])
def test_a_request_value_a_group_cannot_hold_is_refused_and_changes_nothing(
    pcs: LocalPcs, subnets: list[str]
) -> None:
    """The request's subnetIds is any list, a group's at least one `subnet-…`: PCS refuses such an update
    (4xx), it does not keep it and answer 500, nor keep its clientToken."""
    before = create_group(pcs)
    status, body = answer(
        pcs, "UpdateComputeNodeGroup", {**IDENT, "subnetIds": subnets, "clientToken": "lifeguard-test-0001"}
    )
    assert (status, body["__type"].rpartition("#")[2]) == (400, "ValidationException")
    assert body["fieldList"][0]["name"].startswith("subnetIds")
    assert ok(pcs, "GetComputeNodeGroup", **IDENT)["computeNodeGroup"] == before
    again = {**IDENT, "subnetIds": ["subnet-0123456789abcdef1"], "clientToken": "lifeguard-test-0001"}
    assert answer(pcs, "UpdateComputeNodeGroup", again)[0] == 200  # the token was not spent
    status, _ = answer(
        pcs, "CreateComputeNodeGroup", {**GROUP, "computeNodeGroupName": "g-two", "subnetIds": subnets}
    )
    assert status == 400
    listed = ok(pcs, "ListComputeNodeGroups", clusterIdentifier="lca")["computeNodeGroups"]
    assert [g["name"] for g in listed] == ["lca-static"]


@pytest.mark.parametrize("token", ["not-a-token", "-1", "99"])
def test_a_pagination_token_pcs_did_not_give_is_a_validation_exception(pcs: LocalPcs, token: str) -> None:
    create_group(pcs)
    status, body = answer(pcs, "ListComputeNodeGroups", {"clusterIdentifier": "lca", "nextToken": token})
    assert (status, body["__type"].rpartition("#")[2]) == (400, "ValidationException")


def test_the_models_patterns_are_ascii_as_pcs_reads_them(pcs: LocalPcs) -> None:
    ok(pcs, "CreateCluster", **CLUSTER)
    profile = "arn:aws:iam::123456789012:instance-profile/prófile"
    status, _ = answer(pcs, "CreateComputeNodeGroup", {**GROUP, "iamInstanceProfileArn": profile})
    assert status == 400


@pytest.mark.parametrize(
    "code", ["ValidationException", "ServiceQuotaExceededException", "ConflictException"]
)
def test_an_injected_error_carries_every_member_the_model_requires_of_it(pcs: LocalPcs, code: str) -> None:
    from lifeguard.pcs_model import shape

    ok(pcs, "CreateCluster", **CLUSTER)
    pcs.inject_fault(code, operation="GetCluster")
    status, body = answer(pcs, "GetCluster", {"clusterIdentifier": "lca"})
    assert status >= 400
    assert set(shape(code).get("required", [])) <= set(body)
