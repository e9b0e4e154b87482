"""The publish_bundle custom resource as SAM builds it (its Makefile) and CloudFormation calls it: the node
bundle and the shipper installer in the stack's versioned bucket, pinned, and every answer PUT to the
response URL."""

from __future__ import annotations

import hashlib
import importlib.util
import json
import shutil
import socket
import subprocess
import sys
import threading
import time
import uuid
import zipfile
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from types import ModuleType
from typing import Any

import botocore
import pytest

from lifeguard_cli.lint import lint_files
from lifeguard_cli.local.cloudformation import ResponseSink, serve_cloudformation_responses
from lifeguard_cli.node_bundle import build_node_bundle
from tests.conftest import EVENTS, REPO
from tests.roles import as_function

pytestmark = pytest.mark.integration
MAKEFILE = REPO / "functions" / "publish_bundle" / "Makefile"
PACKAGE_FILES = {"app.py", "lifeguard-node.pyz", "install-shipper.sh"}


@pytest.fixture(scope="module")
def package(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The function's package as `sam build` makes it: make run from a scratch directory, as SAM does."""
    scratch = tmp_path_factory.mktemp("scratch")
    done = subprocess.run(
        ["make", "-f", str(MAKEFILE), "build-NodeBundleFunction", "ARTIFACTS_DIR=artifacts"],
        cwd=scratch,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    return scratch / "artifacts"


@pytest.fixture
def answers() -> Iterator[ResponseSink]:
    """A loopback stand-in for CloudFormation's presigned response URL."""
    with serve_cloudformation_responses() as sink:
        yield sink


@pytest.fixture
def aws(local: Any, monkeypatch: pytest.MonkeyPatch) -> Any:
    """The function's boto3 pointed at the local AWS, as Lambda's environment points it at S3."""
    for key, value in local.environ().items():
        monkeypatch.setenv(key, value)
    return local


def load_function(package: Path) -> ModuleType:
    """The handler module of a built package, loaded from there (it reads its files next to itself)."""
    name = f"publish_bundle_{uuid.uuid4().hex}"
    spec = importlib.util.spec_from_file_location(name, package / "app.py")
    assert spec is not None
    assert spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    spec.loader.exec_module(module)
    module.lambda_handler = as_function("NodeBundle", module.lambda_handler)  # held to NodeBundleRole
    return module


@dataclass
class FakeContext:
    """The part of Lambda's context the handler reads."""

    remaining_ms: int = 60_000

    def get_remaining_time_in_millis(self) -> int:
        return self.remaining_ms


def cfn_event(
    request_type: str, url: str, bucket: str, log_group: str = "/lifeguard/node-reports", **extra: Any
) -> dict[str, Any]:
    return {
        "RequestType": request_type,
        "ResponseURL": url,
        "StackId": "arn:aws:cloudformation:us-east-1:123456789012:stack/pcs-lifeguard/guid",
        "RequestId": str(uuid.uuid4()),
        "LogicalResourceId": "NodeBundle",
        "ResourceType": "Custom::NodeBundle",
        "ResourceProperties": {
            "ServiceToken": "arn:aws:lambda:…",
            "BucketName": bucket,
            "LogGroupName": log_group,
        },
        **extra,
    }


def versioned_bucket(local: Any) -> str:
    s3 = local.client("s3")
    bucket = f"lifeguard-bundle-{uuid.uuid4().hex[:10]}"
    s3.create_bucket(Bucket=bucket)
    s3.put_bucket_versioning(Bucket=bucket, VersioningConfiguration={"Status": "Enabled"})
    return bucket


def read_version(local: Any, location: str, version: str) -> bytes:
    bucket, _, key = location.removeprefix("s3://").partition("/")
    body: bytes = local.client("s3").get_object(Bucket=bucket, Key=key, VersionId=version)["Body"].read()
    return body


def test_the_makefile_builds_the_package_from_any_directory(package: Path, tmp_path: Path) -> None:
    assert {path.name for path in package.iterdir()} == PACKAGE_FILES
    assert (package / "app.py").read_bytes() == (REPO / "functions/publish_bundle/app.py").read_bytes()
    assert (package / "install-shipper.sh").read_bytes() == (EVENTS / "node/install-shipper.sh").read_bytes()
    build_node_bundle(tmp_path / "lifeguard-node.pyz")
    assert (package / "lifeguard-node.pyz").read_bytes() == (tmp_path / "lifeguard-node.pyz").read_bytes()
    shown = subprocess.run(
        ["python3", str(package / "lifeguard-node.pyz"), "--help"],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert shown.returncode == 0, shown.stderr
    assert "boot" in shown.stdout
    assert "ship" in shown.stdout


def test_create_publishes_both_files_pinned_and_answers_the_entry(
    package: Path, answers: ResponseSink, aws: Any
) -> None:
    bucket = versioned_bucket(aws)
    function = load_function(package)
    function.lambda_handler(cfn_event("Create", answers.url, bucket), FakeContext())
    path, headers, answer = answers.received[0]
    assert answer["Status"] == "SUCCESS", answer["Reason"]
    assert path.startswith("/cloudformation-response?")
    assert headers.get("Content-Type", headers.get("Content-type")) == ""
    assert answer["LogicalResourceId"] == "NodeBundle"
    data = answer["Data"]
    bundle_bytes = read_version(aws, data["BundleLocation"], data["BundleVersionId"])
    installer_bytes = read_version(aws, data["InstallerLocation"], data["InstallerVersionId"])
    assert bundle_bytes == (package / "lifeguard-node.pyz").read_bytes()
    assert installer_bytes == (package / "install-shipper.sh").read_bytes()
    assert data["BundleSha256"] == hashlib.sha256(bundle_bytes).hexdigest()
    assert data["InstallerSha256"] == hashlib.sha256(installer_bytes).hexdigest()
    assert data["BundleLocation"] == f"s3://{bucket}/lifeguard/lifeguard-node.pyz"
    assert data["InstallerLocation"] == f"s3://{bucket}/lifeguard/install-shipper.sh"
    assert answer["PhysicalResourceId"] == f"{data['BundleLocation']}#{data['BundleVersionId']}"
    assert json.loads(data["LifecycleEntry"]) == {
        "name": "lifeguard-shipper",
        "scriptSource": {
            "scriptLocation": data["InstallerLocation"],
            "s3VersionId": data["InstallerVersionId"],
            "checksum": data["InstallerSha256"],
        },
        "arguments": [
            data["BundleLocation"],
            data["BundleSha256"],
            "/lifeguard/node-reports",
            data["BundleVersionId"],
        ],
        "executionPolicy": "EVERY_BOOT",
        "onError": "CONTINUE",
    }


def test_the_entry_passes_the_lint_strictly(
    package: Path, answers: ResponseSink, aws: Any, tmp_path: Path
) -> None:
    function = load_function(package)
    function.lambda_handler(cfn_event("Create", answers.url, versioned_bucket(aws)), FakeContext())
    entry = json.loads(answers.only()["Data"]["LifecycleEntry"])
    config = tmp_path / "config.json"
    config.write_text(json.dumps({"stages": {"nodeBootstrapped": [entry]}}))
    (result,), errors = lint_files([config])
    assert errors == []
    assert result.document.problems == ()
    assert [risk.code for risk in result.risks] == []
    assert result.passes(strict=True)
    assert result.to_dict()["scripts"][0]["pinned"] is True


def rebuilt(package: Path, directory: Path) -> Path:
    """A copy of the package whose bundle is a different build (same code, another zip comment)."""
    shutil.copytree(package, directory)
    with zipfile.ZipFile(directory / "lifeguard-node.pyz", "a") as archive:
        archive.comment = b"a later build"
    return directory


def test_an_update_with_a_new_bundle_publishes_a_new_version_and_keeps_the_old(
    package: Path, answers: ResponseSink, aws: Any, tmp_path: Path
) -> None:
    bucket = versioned_bucket(aws)
    load_function(package).lambda_handler(cfn_event("Create", answers.url, bucket), FakeContext())
    first = answers.received[0][2]
    later = rebuilt(package, tmp_path / "later")
    load_function(later).lambda_handler(
        cfn_event("Update", answers.url, bucket, PhysicalResourceId=first["PhysicalResourceId"]),
        FakeContext(),
    )
    second = answers.received[1][2]
    assert second["Status"] == "SUCCESS", second["Reason"]
    old, new = first["Data"], second["Data"]
    assert new["BundleVersionId"] != old["BundleVersionId"]
    assert new["BundleSha256"] == hashlib.sha256((later / "lifeguard-node.pyz").read_bytes()).hexdigest()
    assert new["BundleSha256"] != old["BundleSha256"]
    assert second["PhysicalResourceId"] == f"{new['BundleLocation']}#{new['BundleVersionId']}"
    # Groups enrolled before the update still fetch exactly what they pinned.
    pinned = read_version(aws, old["BundleLocation"], old["BundleVersionId"])
    assert hashlib.sha256(pinned).hexdigest() == old["BundleSha256"]
    # The installer did not change: it keeps its version, and entries differ only in the bundle.
    assert new["InstallerVersionId"] == old["InstallerVersionId"]
    assert json.loads(new["LifecycleEntry"])["arguments"][3] == new["BundleVersionId"]


def test_an_update_with_the_same_files_keeps_every_version(
    package: Path, answers: ResponseSink, aws: Any
) -> None:
    bucket = versioned_bucket(aws)
    function = load_function(package)
    function.lambda_handler(cfn_event("Create", answers.url, bucket), FakeContext())
    first = answers.received[0][2]
    function.lambda_handler(
        cfn_event("Update", answers.url, bucket, PhysicalResourceId=first["PhysicalResourceId"]),
        FakeContext(),
    )
    second = answers.received[1][2]
    assert second["Status"] == "SUCCESS"
    assert second["Data"] == first["Data"]
    assert second["PhysicalResourceId"] == first["PhysicalResourceId"]
    versions = aws.client("s3").list_object_versions(Bucket=bucket, Prefix="lifeguard/")["Versions"]
    assert len(versions) == 2


def test_other_bytes_labelled_with_the_bundle_s_digest_are_not_pinned(
    package: Path, answers: ResponseSink, aws: Any
) -> None:
    """Anyone who may put an object in the bucket may label other bytes with the next release's digest
    (the build is reproducible): the pins must name the bundle's bytes, not the label's."""
    bucket = versioned_bucket(aws)
    bundle = (package / "lifeguard-node.pyz").read_bytes()
    digest = hashlib.sha256(bundle).hexdigest()
    forged = aws.client("s3").put_object(
        Bucket=bucket, Key="lifeguard/lifeguard-node.pyz", Body=b"not the bundle", Metadata={"sha256": digest}
    )["VersionId"]
    load_function(package).lambda_handler(cfn_event("Create", answers.url, bucket), FakeContext())
    answer = answers.received[0][2]
    assert answer["Status"] == "SUCCESS", answer["Reason"]
    pinned = answer["Data"]
    assert pinned["BundleVersionId"] != forged
    assert read_version(aws, pinned["BundleLocation"], pinned["BundleVersionId"]) == bundle


def test_delete_answers_success_and_leaves_every_object(
    package: Path, answers: ResponseSink, aws: Any
) -> None:
    bucket = versioned_bucket(aws)
    function = load_function(package)
    function.lambda_handler(cfn_event("Create", answers.url, bucket), FakeContext())
    created = answers.received[0][2]
    function.lambda_handler(
        cfn_event("Delete", answers.url, bucket, PhysicalResourceId=created["PhysicalResourceId"]),
        FakeContext(),
    )
    deleted = answers.received[1][2]
    assert deleted["Status"] == "SUCCESS"
    assert deleted["PhysicalResourceId"] == created["PhysicalResourceId"]
    listing = aws.client("s3").list_object_versions(Bucket=bucket, Prefix="lifeguard/")
    assert "DeleteMarkers" not in listing
    assert len(listing["Versions"]) == 2
    data = created["Data"]
    assert (
        read_version(aws, data["BundleLocation"], data["BundleVersionId"])
        == (package / "lifeguard-node.pyz").read_bytes()
    )


def test_a_missing_bucket_answers_failed_naming_the_bucket(
    package: Path, answers: ResponseSink, aws: Any
) -> None:
    bucket = f"lifeguard-missing-{uuid.uuid4().hex[:10]}"
    load_function(package).lambda_handler(cfn_event("Create", answers.url, bucket), FakeContext())
    answer = answers.only()
    assert answer["Status"] == "FAILED"
    assert bucket in answer["Reason"]
    assert "NoSuchBucket" in answer["Reason"]
    assert "\n" not in answer["Reason"]
    assert answer["Data"] == {}
    assert answer["PhysicalResourceId"]


def test_an_unversioned_bucket_answers_failed(package: Path, answers: ResponseSink, aws: Any) -> None:
    bucket = f"lifeguard-plain-{uuid.uuid4().hex[:10]}"
    aws.client("s3").create_bucket(Bucket=bucket)
    load_function(package).lambda_handler(cfn_event("Create", answers.url, bucket), FakeContext())
    answer = answers.only()
    assert answer["Status"] == "FAILED"
    assert answer["Reason"].startswith(f"bucket {bucket} gave lifeguard/lifeguard-node.pyz no version id")


@pytest.mark.parametrize(
    ("properties", "reason"),
    [
        ({"BucketName": "b-ok"}, "ResourceProperties needs BucketName and LogGroupName"),
        ({"LogGroupName": "/g"}, "ResourceProperties needs BucketName and LogGroupName"),
        ({"BucketName": "Not_A_Bucket", "LogGroupName": "/g"}, "is not an S3 bucket name"),
        ({"BucketName": "b-ok", "LogGroupName": "/g" * 200}, "LogGroupName must be 1 to 256 characters"),
    ],
)
def test_bad_properties_answer_failed_with_the_reason(
    package: Path, answers: ResponseSink, aws: Any, properties: dict[str, str], reason: str
) -> None:
    event = cfn_event("Create", answers.url, "unused")
    event["ResourceProperties"] = {"ServiceToken": "arn:aws:lambda:…", **properties}
    load_function(package).lambda_handler(event, FakeContext())
    answer = answers.only()
    assert answer["Status"] == "FAILED"
    assert reason in answer["Reason"]


@pytest.fixture
def stalled_s3(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    """An S3 endpoint that accepts connections and answers nothing for a second, then refuses them."""
    listener = socket.socket()
    listener.bind(("127.0.0.1", 0))
    listener.listen()
    stop = threading.Event()

    def hold() -> None:
        held: list[socket.socket] = []
        listener.settimeout(0.1)
        while not stop.is_set():
            try:
                held.append(listener.accept()[0])
            except TimeoutError:
                continue
        for connection in held:
            connection.close()
        listener.close()

    thread = threading.Thread(target=hold, daemon=True)
    thread.start()
    monkeypatch.setenv("AWS_ENDPOINT_URL_S3", f"http://127.0.0.1:{listener.getsockname()[1]}")
    timer = threading.Timer(1.0, stop.set)
    timer.start()
    try:
        yield
    finally:
        stop.set()
        timer.cancel()
        thread.join(5)


def test_an_invocation_about_to_time_out_answers_failed_once(
    package: Path, answers: ResponseSink, aws: Any, stalled_s3: None
) -> None:
    function = load_function(package)
    remaining_ms = int((function.TIMEOUT_MARGIN_SECONDS + 0.3) * 1000)
    function.lambda_handler(cfn_event("Create", answers.url, "lifeguard-stalled"), FakeContext(remaining_ms))
    answer = answers.only()
    assert answer["Status"] == "FAILED"
    assert answer["Reason"] == "timed out publishing the node bundle"


def test_the_handler_returns_only_once_a_fired_watchdog_has_answered(
    package: Path, answers: ResponseSink, aws: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The watchdog answers FAILED before the timeout (0.5 s here); CloudFormation's URL answers 503 once,
    so that answer is retried a second later, while the publication fails and the handler ends. The
    handler must not return before the answer is sent: Lambda freezes the process then, and CloudFormation
    would wait an hour."""
    answers.refuse = 1
    function = load_function(package)

    def slow_then_failing(*_: object) -> None:
        deadline = time.monotonic() + 30.0
        while answers.refuse and time.monotonic() < deadline:  # until the watchdog's first answer is refused
            time.sleep(0.05)
        raise function.PublishError("S3 gave up")

    monkeypatch.setattr(function, "publish_node_bundle", slow_then_failing)
    monkeypatch.setattr(function, "_s3_client", lambda: None)
    remaining_ms = int((function.TIMEOUT_MARGIN_SECONDS + 0.3) * 1000)
    function.lambda_handler(cfn_event("Create", answers.url, "lifeguard-stalled"), FakeContext(remaining_ms))
    assert answers.only()["Reason"] == "timed out publishing the node bundle"  # sent before the return


def test_an_answer_met_with_no_http_status_is_sent_again(
    package: Path, answers: ResponseSink, aws: Any
) -> None:
    """A malformed reply (BadStatusLine, not an OSError) ended the answer after one attempt, and the handler
    returned normally: no answer, no retry, and CloudFormation waiting its hour."""
    answers.garble = 1
    load_function(package).lambda_handler(
        cfn_event("Create", answers.url, versioned_bucket(aws)), FakeContext()
    )
    assert answers.only()["Status"] == "SUCCESS"


def test_a_failed_answer_fits_cloudformation_s_4_kib_whatever_its_reason_holds(
    package: Path, answers: ResponseSink, aws: Any
) -> None:
    event = cfn_event("Create", answers.url, "unused")
    event["ResourceProperties"] = {
        "ServiceToken": "arn:aws:lambda:…",
        "BucketName": "é" * 5000,
        "LogGroupName": "g",
    }
    load_function(package).lambda_handler(event, FakeContext())
    answer = answers.only()
    assert answer["Status"] == "FAILED"
    assert len(json.dumps(answer).encode()) <= 4096
    assert answer["Reason"].isascii()


def test_an_answer_goes_only_to_cloudformation_s_response_url(
    package: Path, answers: ResponseSink, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Whoever may invoke the function could hand it any URL: in an account (no local AWS), an answer goes
    only to https on amazonaws.com, never to a plain-http or internal address."""
    monkeypatch.delenv("AWS_ENDPOINT_URL", raising=False)
    function = load_function(package)
    function.lambda_handler(cfn_event("Delete", answers.url, "b-ok"), FakeContext())
    assert answers.received == []
    allowed = function._cloudformation_url
    assert allowed(
        "https://cloudformation-custom-resource-response-useast1.s3.amazonaws.com/a?X-Amz-Signature=s"
    )
    assert allowed(
        "https://cloudformation-custom-resource-response-cnnorth1.s3.cn-north-1.amazonaws.com.cn/a"
    )
    # Every partition botocore knows (a stack in the European Sovereign Cloud was never answered).
    partitions = json.loads((Path(botocore.__file__).parent / "data" / "partitions.json").read_text())
    for partition in partitions["partitions"]:
        suffix = partition["outputs"]["dnsSuffix"]
        assert allowed(f"https://cloudformation-custom-resource-response-x.s3.{suffix}/a"), suffix
    for url in (
        "http://cloudformation-custom-resource-response-useast1.s3.amazonaws.com/a",
        "https://169.254.169.254/latest/meta-data",
        "https://amazonaws.com.evil.example/a",
        "https://evil.example/?host=.amazonaws.com",
        "not a url",
    ):
        assert not allowed(url), url
