"""What PCS answers beyond the model Lifeguard ships: a field or stage PCS adds later is never erased by
Lifeguard's write of a group's whole `nodeLifecycleActions` (botocore leaves it out of what it reads)."""

from __future__ import annotations

import copy
import json
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any, ClassVar

import pytest

from lifeguard.aws.clients import aws_client
from lifeguard.aws.pcs import PcsGateway
from lifeguard.errors import AwsCallError
from lifeguard.remediation.remediator import may_have_taken

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


class Pcs(BaseHTTPRequestHandler):
    """Answers every call with the group holding `actions`, as a PCS of a later release would."""

    actions: ClassVar[dict[str, Any]] = ACTIONS
    updates: ClassVar[list[dict[str, Any]]] = []

    def do_POST(self) -> None:
        body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
        if self.headers.get("X-Amz-Target", "").endswith("UpdateComputeNodeGroup"):
            Pcs.updates.append(body)
        out = json.dumps(answer(Pcs.actions)).encode()
        self.send_response(200)
        self.send_header("Content-Type", "application/x-amz-json-1.0")
        self.send_header("Content-Length", str(len(out)))
        self.end_headers()
        self.wfile.write(out)

    def log_message(self, *args: object) -> None:
        pass


@pytest.fixture
def pcs(monkeypatch: pytest.MonkeyPatch) -> Iterator[PcsGateway]:
    for name, value in (
        ("AWS_ACCESS_KEY_ID", "testing"),
        ("AWS_SECRET_ACCESS_KEY", "testing"),
        ("AWS_DEFAULT_REGION", "us-east-1"),
        ("AWS_CONFIG_FILE", "/dev/null"),
    ):
        monkeypatch.setenv(name, value)
    Pcs.updates = []
    server = ThreadingHTTPServer(("127.0.0.1", 0), Pcs)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        yield PcsGateway(aws_client("pcs", f"http://127.0.0.1:{server.server_port}", attempts=1))
    finally:
        server.shutdown()
        server.server_close()


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
