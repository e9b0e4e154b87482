"""The four handlers as `sam build` built them, each imported and invoked in a fresh python3.12 on its
built directory, the built layer of this machine's architecture and the oldest boto3 the layer claims,
against the local AWS; the node-bundle function on its own; and the layers' bytes: `.pyc` with
unchecked hashes that match their sources, and extensions of the layer's architecture."""

from __future__ import annotations

import base64
import gzip
import hashlib
import json
import time
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest

from lifeguard_cli.local import LocalPcs, ManualClock, serve_local_pcs
from lifeguard_cli.local.cloudformation import serve_cloudformation_responses
from lifeguard_cli.local.slack import SlackSink, serve_slack
from lifeguard_cli.local.stack import LocalChannels, LocalStack, create_notification_channels, create_stack
from tests.artifact.conftest import (
    Boto3,
    Build,
    Invocation,
    Runtime,
    assert_isolated,
    assert_under,
    invoke,
)
from tests.conftest import load_event

pytestmark = pytest.mark.artifact
CLUSTER, GROUP = "pcs_abc123de45", "pcs_abcdef01"
# Modules the handlers must take from the layer, never from anywhere else.
LAYER_MODULES = ("lifeguard", "aws_lambda_powertools")
ELF_MACHINES = {"arm64": 183, "x86_64": 62}  # e_machine: EM_AARCH64, EM_X86_64
PYC_MAGIC_312 = (3531).to_bytes(2, "little") + b"\r\n"
PYC_HASH_BASED, PYC_CHECK_SOURCE = 0b01, 0b10  # PEP 552 flags


def _subscription(name: str) -> dict[str, Any]:
    payload: dict[str, Any] = json.loads(
        gzip.decompress(base64.b64decode(load_event(f"subscriptions/{name}.json")["awslogs"]["data"]))
    )
    return payload


def retimed(name: str, shift_ms: int) -> dict[str, Any]:
    """A recorded subscription event of events/subscriptions/, every time in it moved by `shift_ms`: the
    deployed handlers judge record times against the wall clock."""
    payload = _subscription(name)
    for log_event in payload["logEvents"]:
        log_event["timestamp"] += shift_ms
        message = json.loads(log_event["message"])
        for key, per_ms in (("event_timestamp", 1), ("started_at", 1000), ("ended_at", 1000)):
            if isinstance(message.get(key), int):
                message[key] += shift_ms // per_ms
        log_event["message"] = json.dumps(message, separators=(",", ":"))
    return {"awslogs": {"data": base64.b64encode(gzip.compress(json.dumps(payload).encode())).decode()}}


@pytest.fixture(scope="module")
def shift_ms() -> int:
    """How far the article's records move so that the last was a minute ago (whole seconds)."""
    last = max(int(e["timestamp"]) for e in _subscription("article-terminate-loop")["logEvents"])
    return (int(time.time() * 1000) - 60_000 - last) // 1000 * 1000


@pytest.fixture(scope="module")
def runtime(local: Any, tmp_path_factory: pytest.TempPathFactory) -> Runtime:
    """The local AWS's endpoints and credentials, with no file of this machine's AWS configuration."""
    scratch = tmp_path_factory.mktemp("artifact-runtime")
    environ = {
        **local.environ(),
        "AWS_CONFIG_FILE": str(scratch / "no-aws-config"),
        "AWS_SHARED_CREDENTIALS_FILE": str(scratch / "no-aws-credentials"),
        "HOME": str(scratch),
        "LANG": "en_US.UTF-8",
        "TZ": ":UTC",
    }
    return Runtime(environ, scratch)


@dataclass(frozen=True)
class PublishedBundle:
    """One run of the built node-bundle function as CloudFormation's custom resource."""

    invocation: Invocation
    response: dict[str, Any]
    bucket: str
    log_group: str


@pytest.fixture(scope="module")
def published_bundle(build: Build, runtime: Runtime, oldest_boto3: Boto3, local: Any) -> PublishedBundle:
    """The built NodeBundleFunction, without the layer as deployed, answering a Create into a versioned
    bucket of the local S3; its Data are what the stack gives RemediateFunction."""
    s3 = local.client("s3")
    bucket = f"artifact-{uuid.uuid4().hex[:10]}-node-bundle"
    s3.create_bucket(Bucket=bucket)
    s3.put_bucket_versioning(Bucket=bucket, VersioningConfiguration={"Status": "Enabled"})
    log_group = f"/pcs-lifeguard/{bucket}/node-reports"
    path = [build.function_dir("NodeBundleFunction"), oldest_boto3.path]
    values = {
        "NodeBundleBucket": bucket,
        "NodeReportLogGroup": log_group,
        "NodeBundleFunction.Arn": "arn:aws:lambda:us-east-1:123456789012:function:node-bundle",
        "NodeBundleFunction.Version": "1",
        # Globals give every function these; the bundle function reads none of them.
        "StateTable": "unused",
        "EventBus": "unused",
        "AWS::StackName": "pcs-lifeguard-artifact",
    }
    with serve_cloudformation_responses() as cloudformation:
        event = {
            "RequestType": "Create",
            "ResponseURL": cloudformation.url,
            "StackId": "arn:aws:cloudformation:us-east-1:123456789012:stack/pcs-lifeguard/1",
            "RequestId": str(uuid.uuid4()),
            "LogicalResourceId": "NodeBundle",
            "ResourceType": build.resources["NodeBundle"]["Type"],
            "ResourceProperties": build.properties("NodeBundle", values),
        }
        invocation = invoke(build, runtime, "NodeBundleFunction", event, path=path, values=values)
    assert invocation.error is None, invocation.output
    assert_isolated(invocation, path)
    assert len(cloudformation.responses) == 1, invocation.output
    return PublishedBundle(invocation, cloudformation.responses[0], bucket, log_group)


@dataclass
class Deployment:
    """The stack's resources in the local AWS, with its own PCS, and the built handlers to invoke."""

    build: Build
    runtime: Runtime
    layer: Path
    boto3: Boto3
    local: Any
    pcs: LocalPcs
    stack: LocalStack
    channels: LocalChannels
    slack: SlackSink
    pcs_endpoint: str
    values: dict[str, str]

    def invoke(self, logical_id: str, event: dict[str, Any]) -> Invocation:
        """Invoke built handler `logical_id`; fails unless it returned and imported only what is built."""
        path = [self.build.function_dir(logical_id), self.layer, self.boto3.path]
        invocation = invoke(self.build, self.runtime, logical_id, event, path=path, values=self.values)
        assert invocation.error is None, f"{invocation.error}\n{invocation.output}"
        assert_isolated(invocation, path)
        assert_under(invocation.module_file("app"), path[0])
        for name in LAYER_MODULES:
            assert_under(invocation.module_file(name), self.layer)
        # No model library on any handler's path: its import alone would cost a cold start about 45 ms.
        assert not {"pydantic", "pydantic_core"} & set(invocation.modules), sorted(invocation.modules)
        for name in ("boto3", "botocore"):
            assert_under(invocation.module_file(name), self.boto3.path)
            assert invocation.versions[name] == self.boto3.version
        return invocation

    def bus(self) -> list[dict[str, Any]]:
        return self.stack.received_events(self.local.client("sqs"))

    def group(self) -> dict[str, Any]:
        """The article's group as PCS answers it now."""
        import boto3

        pcs = boto3.client(
            "pcs",
            endpoint_url=self.pcs_endpoint,
            region_name="us-east-1",
            aws_access_key_id="testing",
            aws_secret_access_key="testing",
        )
        found: Any = pcs.get_compute_node_group(clusterIdentifier=CLUSTER, computeNodeGroupIdentifier=GROUP)[
            "computeNodeGroup"
        ]
        return dict(found)


@pytest.fixture
def deployment(
    *,
    build: Build,
    runtime: Runtime,
    layer: Path,
    oldest_boto3: Boto3,
    local: Any,
    published_bundle: PublishedBundle,
    shift_ms: int,
) -> Iterator[Deployment]:
    """Table, bus, topic and Slack secret in moto, the article's group (tagged quarantine) in a PCS of its
    own whose configuration took effect before the moved records; the template's parameters at their
    defaults but SlackWebhookSecretArn."""
    first = min(e["timestamp"] for e in _subscription("article-terminate-loop")["logEvents"])
    clock = ManualClock(datetime.fromtimestamp((first + shift_ms) / 1000 - 300, UTC))
    pcs = LocalPcs(clock=clock, update_seconds=0)
    prefix = f"artifact-{uuid.uuid4().hex[:8]}"
    with serve_local_pcs(pcs) as server, serve_slack() as slack:
        pcs.add_cluster("lca", cluster_id=CLUSTER)
        pcs.add_compute_node_group(
            CLUSTER,
            "lca-static",
            group_id=GROUP,
            node_lifecycle_actions=load_event("configs/article-terminate.json"),
            tags={"lifeguard:mode": "quarantine"},
        )
        clock.set(datetime.now(UTC))
        stack = create_stack(local.client("dynamodb"), local.client("events"), local.client("sqs"), prefix)
        channels = create_notification_channels(
            local.client("sns"), local.client("sqs"), local.client("secretsmanager"), prefix, slack.url
        )
        response = published_bundle.response
        assert response["Status"] == "SUCCESS", f"the node bundle was not published: {response['Reason']}"
        data = response["Data"]
        values = {
            "StateTable": stack.table,
            "EventBus": stack.event_bus,
            "NotificationTopic": channels.topic_arn,
            "SlackWebhookSecretArn": channels.slack_secret,
            "AWS::StackName": "pcs-lifeguard-artifact",
            **{f"NodeBundle.{key}": str(value) for key, value in data.items()},
        }
        own = Runtime({**runtime.environ, "AWS_ENDPOINT_URL_PCS": server.endpoint_url}, runtime.scratch)
        yield Deployment(
            build, own, layer, oldest_boto3, local, pcs, stack, channels, slack, server.endpoint_url, values
        )


def test_scaling_events_detects_the_articles_loop(deployment: Deployment, shift_ms: int) -> None:
    records = len(_subscription("article-terminate-loop")["logEvents"])
    summary = deployment.invoke("ScalingEventsFunction", retimed("article-terminate-loop", shift_ms)).result
    assert (summary["records"], summary["skipped"], summary["groups"]) == (records, 0, 1), summary
    assert [e["detail-type"] for e in summary["events"]] == ["BootstrapLoopDetected"]
    detail = summary["events"][0]["detail"]
    assert (detail["cluster_id"], detail["compute_node_group_id"], detail["mode"]) == (
        CLUSTER,
        GROUP,
        "quarantine",
    )
    assert [f["instance_id"] for f in detail["failures"]] == ["i-059b4b99b4f2e9739", "i-06644f6e5a2b001c9"]
    assert detail["config_before"] == load_event("configs/article-terminate.json")
    assert [(e["detail-type"], e["detail"]["episode_id"]) for e in deployment.bus()] == [
        ("BootstrapLoopDetected", detail["episode_id"])
    ]


def test_node_reports_name_the_failing_script_of_the_open_loop(deployment: Deployment, shift_ms: int) -> None:
    deployment.invoke("ScalingEventsFunction", retimed("article-terminate-loop", shift_ms))
    summary = deployment.invoke("NodeReportsFunction", retimed("article-node-reports", shift_ms)).result
    assert (summary["reports"], summary["skipped"], summary["failed_runs"]) == (3, 0, 1), summary
    [event] = summary["events"]
    assert (event["detail-type"], event["detail"]["revision"]) == ("BootstrapLoopDetected", 2)
    suspect = event["detail"]["suspect"]
    assert (suspect["stage"], suspect["script"], suspect["on_error"], suspect["exit_code"]) == (
        "nodeBootstrapped",
        "fail-terminate",
        "TERMINATE",
        1,
    )


def test_remediate_quarantines_the_failing_script(deployment: Deployment) -> None:
    from lifeguard.lifecycle import fingerprint_of
    from lifeguard.store.groups import GroupStore
    from tests.integration.conftest import open_episode

    event = load_event("eventbridge/bootstrap-loop-detected.json")
    group = deployment.group()
    detail = event["detail"]
    assert detail["config_fingerprint"] == fingerprint_of(group["nodeLifecycleActions"])
    detail["config_modified_at"] = int(group["modifiedAt"].timestamp() * 1000)
    open_episode(GroupStore(deployment.local.client("dynamodb"), deployment.stack.table), detail)
    answer = deployment.invoke("RemediateFunction", event).result
    assert [e["detail-type"] for e in answer["events"]] == ["RemediationApplied"], answer
    assert answer["events"][0]["detail"]["action"] == "quarantine"
    expected = load_event("configs/article-terminate.json")
    expected["stages"]["nodeBootstrapped"][0]["onError"] = "STOP_SEQUENCE"
    actual = deployment.group()["nodeLifecycleActions"]
    assert actual == expected, json.dumps(actual, indent=1)
    assert [e["detail-type"] for e in deployment.bus()] == ["RemediationApplied"]


def test_notify_sends_the_remediation_to_sns_and_slack(deployment: Deployment) -> None:
    result = deployment.invoke("NotifyFunction", load_event("eventbridge/remediation-applied.json")).result
    assert (result["detail_type"], result["sent"], result["already_sent"]) == (
        "RemediationApplied",
        ["sns", "slack"],
        [],
    ), result
    assert not result["failed"], result
    [published] = deployment.channels.received_sns(deployment.local.client("sqs"))
    assert published["attributes"]["event"] == "RemediationApplied"
    assert published["attributes"]["compute_node_group_name"] == "lca-static"
    assert published["subject"].startswith("[Lifeguard] Remediated (quarantine): lca-static (fail-terminate)")
    [message] = deployment.slack.messages
    assert message["blocks"][0]["type"] == "header"


def test_the_node_bundle_function_publishes_the_bundle_and_installer_it_was_built_with(
    build: Build, published_bundle: PublishedBundle, oldest_boto3: Boto3, local: Any
) -> None:
    directory = build.function_dir("NodeBundleFunction")
    files = {name: directory / name for name in ("lifeguard-node.pyz", "install-shipper.sh")}
    assert all(path.is_file() and path.stat().st_size > 0 for path in files.values()), sorted(
        directory.iterdir()
    )
    response = published_bundle.response
    assert response["Status"] == "SUCCESS", response
    data = response["Data"]
    s3 = local.client("s3")
    for prefix, path in (("Bundle", files["lifeguard-node.pyz"]), ("Installer", files["install-shipper.sh"])):
        body = path.read_bytes()
        assert data[f"{prefix}Location"] == f"s3://{published_bundle.bucket}/lifeguard/{path.name}"
        assert data[f"{prefix}Sha256"] == hashlib.sha256(body).hexdigest()
        stored = s3.get_object(
            Bucket=published_bundle.bucket, Key=f"lifeguard/{path.name}", VersionId=data[f"{prefix}VersionId"]
        )
        assert stored["Body"].read() == body
    entry = json.loads(data["LifecycleEntry"])
    assert entry["arguments"][2] == published_bundle.log_group
    invocation = published_bundle.invocation
    assert not {"lifeguard", "pydantic", "aws_lambda_powertools"} & set(invocation.modules)
    assert invocation.versions["boto3"] == oldest_boto3.version


@pytest.mark.parametrize("architecture", sorted(ELF_MACHINES))
def test_every_module_of_the_layer_ships_compiled_with_an_unchecked_hash_of_its_source(
    build: Build, architecture: str
) -> None:
    import importlib.util

    layer = build.layer_dir(architecture)
    sources = sorted(layer.rglob("*.py"))
    assert len(sources) > 100, f"{layer} holds only {len(sources)} .py files"
    problems = []
    for source in sources:
        compiled = source.parent / "__pycache__" / f"{source.stem}.cpython-312.pyc"
        if not compiled.is_file():
            problems.append(f"{source.relative_to(layer)}: no {compiled.name}")
            continue
        header = compiled.read_bytes()[:16]
        flags = int.from_bytes(header[4:8], "little")
        if header[:4] != PYC_MAGIC_312:
            problems.append(f"{compiled.relative_to(layer)}: magic {header[:4]!r} is not CPython 3.12's")
        elif flags & (PYC_HASH_BASED | PYC_CHECK_SOURCE) != PYC_HASH_BASED:
            problems.append(f"{compiled.relative_to(layer)}: flags {flags:#04b}, not unchecked-hash (0b01)")
        elif header[8:16] != importlib.util.source_hash(source.read_bytes()):
            problems.append(f"{compiled.relative_to(layer)}: compiled from another version of its source")
    assert not problems, f"{len(problems)} of {len(sources)} modules:\n" + "\n".join(problems[:40])


@pytest.mark.parametrize("architecture", sorted(ELF_MACHINES))
def test_the_layer_holds_no_model_library_and_only_extensions_of_its_architecture(
    build: Build, architecture: str
) -> None:
    layer = build.layer_dir(architecture)
    assert (layer / "aws_lambda_powertools").is_dir(), sorted(p.name for p in layer.iterdir())
    assert not (layer / "pydantic").exists()
    assert not (layer / "pydantic_core").exists()
    extensions = sorted(
        p for p in layer.rglob("*") if p.is_file() and (p.suffix == ".so" or ".so." in p.name)
    )
    problems = []
    for extension in extensions:
        header = extension.read_bytes()[:20]
        if header[:4] != b"\x7fELF":
            problems.append(f"{extension.relative_to(layer)}: not an ELF file")
            continue
        machine = int.from_bytes(header[18:20], "little" if header[5] == 1 else "big")
        if machine != ELF_MACHINES[architecture]:
            problems.append(
                f"{extension.relative_to(layer)}: e_machine {machine}, not {ELF_MACHINES[architecture]}"
            )
    assert not problems, "\n".join(problems)


def test_review_changes_reviews_the_recorded_cloudtrail_call(deployment: Deployment) -> None:
    event = load_event("cloudtrail/update-compute-node-group.json")
    event["detail"]["eventTime"] = datetime.fromtimestamp(time.time() - 60, UTC).strftime(
        "%Y-%m-%dT%H:%M:%SZ"
    )
    answer = deployment.invoke("ReviewChangesFunction", event).result
    assert (answer["reviewed"], answer["skipped"]) == (1, 0), answer
    [published] = deployment.bus()
    assert published["detail-type"] == "ConfigChangeReviewed"
    detail = published["detail"]
    assert detail["changed_by"]["arn"] == "arn:aws:sts::123456789012:assumed-role/ClusterAdmin/alice"
    assert "unpinned-mutable-source" in {risk["code"] for risk in detail["risks"]}


def test_the_layer_holds_only_what_the_handlers_import(deployment: Deployment, shift_ms: int) -> None:
    """Nothing goes into the Lambda package that it does not use: of the layer, what the five built
    functions import handling their events, but for the node side (`lifeguard.node`, the bundle's) and
    a few modules Powertools imports only on paths these events do not take."""
    from lifeguard.store.groups import GroupStore
    from tests.integration.conftest import open_episode

    imported: set[Path] = set()
    scaling = deployment.invoke("ScalingEventsFunction", retimed("article-terminate-loop", shift_ms))
    reports = deployment.invoke("NodeReportsFunction", retimed("article-node-reports", shift_ms))
    detected = load_event("eventbridge/bootstrap-loop-detected.json")
    group = deployment.group()
    detected["detail"]["config_modified_at"] = int(group["modifiedAt"].timestamp() * 1000)
    open_episode(GroupStore(deployment.local.client("dynamodb"), deployment.stack.table), detected["detail"])
    remediate = deployment.invoke("RemediateFunction", detected)
    notify = deployment.invoke("NotifyFunction", load_event("eventbridge/remediation-applied.json"))
    trail = load_event("cloudtrail/update-compute-node-group.json")
    trail["detail"]["eventTime"] = datetime.fromtimestamp(time.time() - 60, UTC).strftime(
        "%Y-%m-%dT%H:%M:%SZ"
    )
    review = deployment.invoke("ReviewChangesFunction", trail)
    for invocation in (scaling, reports, remediate, notify, review):
        imported |= {Path(f).resolve() for f in invocation.modules.values()}
    layer = deployment.layer.resolve()
    shipped = [p for p in layer.rglob("*.py") if "__pycache__" not in p.parts]
    unused = [p for p in shipped if p not in imported]
    size = lambda paths: sum(  # noqa: E731 - source and its .pyc
        p.stat().st_size + (p.parent / "__pycache__" / f"{p.stem}.cpython-312.pyc").stat().st_size
        for p in paths
        if (p.parent / "__pycache__" / f"{p.stem}.cpython-312.pyc").exists()
    )
    by_top: dict[str, int] = {}
    for p in unused:
        rel = p.relative_to(layer).parts
        key = "/".join(rel[:2]) if len(rel) > 2 else rel[0]
        by_top[key] = by_top.get(key, 0) + 1
    biggest = sorted(by_top.items(), key=lambda kv: -kv[1])[:12]
    assert size(unused) < 0.2 * size(shipped), (
        f"{len(unused)} of {len(shipped)} modules ({size(unused) // 1024} KiB of {size(shipped) // 1024} "
        f"KiB) are never imported by any handler; by package: {biggest}"
    )
