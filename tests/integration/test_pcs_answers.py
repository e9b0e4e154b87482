"""What PCS answers beyond the model Lifeguard ships: a field or stage PCS adds later is never erased by
Lifeguard's write of a group's whole `nodeLifecycleActions` (botocore leaves it out of what it reads)."""

from __future__ import annotations

import copy
import json
from collections.abc import Iterator
from typing import Any, ClassVar

import pytest

from lifeguard.aws.pcs import PcsGateway
from lifeguard.errors import AwsCallError
from lifeguard.remediation.remediator import may_have_taken
from tests.integration.conftest import pcs_on_loopback

pytestmark = pytest.mark.integration

CLUSTER, GROUP = "pcs_abc123de45", "pcs_abcdef0123"
ACTIONS = {
    "stages": {
        "nodeBootstrapped": [
            {"name": "mount", "scriptSource": {"scriptLocation": "s3://ops-bkt/m.sh"}, "onError": "TERMINATE"}
        ]
    }
}


def answer(actions: dict[str, Any]) -> dict[str, Any]:
    return {
        "computeNodeGroup": {
            "name": "g",
            "id": GROUP,
            "arn": f"arn:aws:pcs:us-east-1:123456789012:cluster/{CLUSTER}/computenodegroup/{GROUP}",
            "clusterId": CLUSTER,
            "createdAt": "2026-01-01T00:00:00Z",
            "modifiedAt": "2026-01-01T00:00:00Z",
            "status": "ACTIVE",
            "amiId": "ami-0123456789abcdef0",
            "subnetIds": ["subnet-0123456789abcdef0"],
            "customLaunchTemplate": {"id": "lt-0123456789abcdef0", "version": "1"},
            "iamInstanceProfileArn": "arn:aws:iam::123456789012:instance-profile/x",
            "scalingConfiguration": {"minInstanceCount": 0, "maxInstanceCount": 1},
            "instanceConfigs": [{"instanceType": "c7i.large"}],
            "nodeLifecycleActions": actions,
        }
    }


class Pcs:
    """Answers every call with the group holding `actions`, as a PCS of a later release would; the updates it
    was asked, kept."""

    actions: ClassVar[dict[str, Any]] = ACTIONS
    updates: ClassVar[list[dict[str, Any]]] = []

    @staticmethod
    def answer(operation: str, request: dict[str, Any]) -> tuple[int, str, bytes]:
        if operation == "UpdateComputeNodeGroup":
            Pcs.updates.append(request)
        return 200, "application/x-amz-json-1.0", json.dumps(answer(Pcs.actions)).encode()


@pytest.fixture
def pcs(monkeypatch: pytest.MonkeyPatch) -> Iterator[PcsGateway]:
    Pcs.updates = []
    with pcs_on_loopback(monkeypatch, Pcs.answer) as gateway:
        yield gateway


def test_a_lifecycle_field_the_model_does_not_know_stops_the_write_that_would_erase_it(
    pcs: PcsGateway,
) -> None:
    """A per-script field and a stage PCS added after the model Lifeguard ships: botocore left both out of
    the group read, and the quarantine, revert, undo or enrollment written back from it erased them."""
    later = copy.deepcopy(ACTIONS)
    later["stages"]["nodeBootstrapped"][0]["timeoutSeconds"] = 900
    later["stages"]["nodeTerminating"] = [
        {"name": "flush", "scriptSource": {"scriptLocation": "s3://b/f.sh"}}
    ]
    Pcs.actions = later
    read = pcs.get_group(CLUSTER, GROUP)
    assert read.node_lifecycle_actions == ACTIONS  # what botocore keeps of it
    with pytest.raises(AwsCallError) as refused:
        pcs.update_lifecycle_actions(CLUSTER, GROUP, ACTIONS, "token-0001")
    assert refused.value.code == "UnknownFields"
    said = str(refused.value)
    assert "nodeLifecycleActions.stages.nodeBootstrapped[0].timeoutSeconds" in said
    assert "nodeLifecycleActions.stages.nodeTerminating" in said
    assert "nothing was changed" in said
    assert Pcs.updates == []
    assert not may_have_taken(refused.value)  # never sent: a remediation records it abandoned


def test_a_group_read_again_without_unknown_fields_is_written_and_a_null_is_no_field(pcs: PcsGateway) -> None:
    later = copy.deepcopy(ACTIONS)
    later["stages"]["nodeReady"] = [{"name": "x", "scriptSource": {"scriptLocation": "s3://b/x.sh"}}]
    later["stages"]["nodeBootstrapped"][0]["timeoutSeconds"] = 900
    Pcs.actions = later
    pcs.get_group(CLUSTER, GROUP)
    with pytest.raises(AwsCallError, match="UnknownFields"):
        pcs.update_lifecycle_actions(CLUSTER, GROUP, ACTIONS, "token-0001")
    # The field gone again (or sent as null, which botocore drops as it drops an absent one): written.
    nulled = copy.deepcopy(ACTIONS)
    nulled["stages"]["nodeBootstrapped"][0]["arguments"] = None
    Pcs.actions = nulled
    pcs.get_group(CLUSTER, GROUP)
    pcs.update_lifecycle_actions(CLUSTER, GROUP, ACTIONS, "token-0002")
    assert [u["nodeLifecycleActions"] for u in Pcs.updates] == [ACTIONS]
