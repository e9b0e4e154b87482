"""Lambda (CloudFormation custom resource): publish the node bundle and the shipper installer.

On Create and Update, `lifeguard-node.pyz` and `install-shipper.sh` (packaged next to this file) are put
under `lifeguard/` in the stack's versioned bucket, and the answer carries each object's location,
version id and sha256, plus `LifecycleEntry`: the `nodeBootstrapped` script that installs the shipper,
pinned to those versions, as the PCS API takes it. A file whose bytes are already the current version
keeps that version, so an update that does not change the bundle does not move the pins. On Delete
nothing changes: enrolled groups keep fetching the versions they pin, and the bucket is retained.

Deployed without the Lifeguard layer (it publishes the layer's code), so it is standard library and
boto3 only. Every outcome is answered, a failure with a one-line reason, so CloudFormation never waits
for a timeout.
"""

from __future__ import annotations

import hashlib
import http.client
import json
import logging
import os
import re
import threading
import time
import urllib.request
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

__all__ = [
    "BUNDLE_KEY",
    "INSTALLER_KEY",
    "SHIPPER_SCRIPT_NAME",
    "PublishError",
    "PublishedObject",
    "lambda_handler",
    "lifecycle_entry",
    "publish_node_bundle",
]

BUNDLE_FILE = "lifeguard-node.pyz"
INSTALLER_FILE = "install-shipper.sh"
BUNDLE_KEY = f"lifeguard/{BUNDLE_FILE}"
INSTALLER_KEY = f"lifeguard/{INSTALLER_FILE}"
SHIPPER_SCRIPT_NAME = "lifeguard-shipper"
HERE = Path(__file__).resolve().parent
# PCS's bound on a lifecycle script's argument (NodeLifecycleScriptArgument in the service model).
ARGUMENT_MAX_CHARS = 256
# CloudFormation refuses a response body over 4 KiB; a reason is one line well within it.
REASON_MAX_CHARS = 1000
# Answer FAILED this long before Lambda's own timeout would leave CloudFormation waiting for an hour.
TIMEOUT_MARGIN_SECONDS = 5.0
# What the function's role must allow under lifeguard/ (a test holds template.yaml to it): HeadObject,
# to keep an unchanged file's version, is authorised as s3:GetObject; reading its bytes back, by version, as
# s3:GetObjectVersion.
PERMISSIONS = ("s3:PutObject", "s3:GetObject", "s3:GetObjectVersion")
RESPONSE_ATTEMPTS = 3
RESPONSE_TIMEOUT_SECONDS = 10.0
_SHA256_METADATA = "sha256"
_BUCKET_NAME = re.compile(r"[a-z0-9][a-z0-9.-]{1,61}[a-z0-9]")

logger = logging.getLogger("lifeguard.publish_bundle")
logger.setLevel(logging.INFO)


class PublishError(Exception):
    """The bundle cannot be published; the message is the one-line reason CloudFormation shows."""


@dataclass(frozen=True)
class PublishedObject:
    """One object as published: where it is, which version, and the sha256 of its bytes."""

    location: str
    version_id: str
    sha256: str


def lifecycle_entry(installer: PublishedObject, bundle: PublishedObject, log_group: str) -> dict[str, Any]:
    """The `nodeBootstrapped` script that installs the shipper, pinned to both versions and checksums.

    First in the stage, on every boot, and never costing the node its boot (onError CONTINUE).
    """
    return {
        "name": SHIPPER_SCRIPT_NAME,
        "scriptSource": {
            "scriptLocation": installer.location,
            "s3VersionId": installer.version_id,
            "checksum": installer.sha256,
        },
        "arguments": [bundle.location, bundle.sha256, log_group, bundle.version_id],
        "executionPolicy": "EVERY_BOOT",
        "onError": "CONTINUE",
    }


def publish_node_bundle(s3: Any, bucket: str, log_group: str, directory: Path = HERE) -> dict[str, str]:
    """Put the bundle and the installer from `directory` into `bucket`; returns the custom resource's Data.

    Raises PublishError with a one-line reason.
    """
    if not _BUCKET_NAME.fullmatch(bucket):
        raise PublishError(f"BucketName {bucket!r} is not an S3 bucket name PCS can fetch scripts from")
    if not log_group or len(log_group) > ARGUMENT_MAX_CHARS:
        raise PublishError(
            f"LogGroupName must be 1 to {ARGUMENT_MAX_CHARS} characters (a PCS script argument), "
            f"not {len(log_group)}"
        )
    bundle = _publish_file(s3, bucket, BUNDLE_KEY, directory / BUNDLE_FILE)
    installer = _publish_file(s3, bucket, INSTALLER_KEY, directory / INSTALLER_FILE)
    entry = lifecycle_entry(installer, bundle, log_group)
    too_long = [value for value in entry["arguments"] if len(value) > ARGUMENT_MAX_CHARS]
    if too_long:
        raise PublishError(f"a shipper argument is over {ARGUMENT_MAX_CHARS} characters: {too_long[0][:60]}…")
    return {
        "BundleLocation": bundle.location,
        "BundleVersionId": bundle.version_id,
        "BundleSha256": bundle.sha256,
        "InstallerLocation": installer.location,
        "InstallerVersionId": installer.version_id,
        "InstallerSha256": installer.sha256,
        "LifecycleEntry": json.dumps(entry, separators=(",", ":")),
    }


def _publish_file(s3: Any, bucket: str, key: str, path: Path) -> PublishedObject:
    from botocore.exceptions import BotoCoreError, ClientError

    location = f"s3://{bucket}/{key}"
    try:
        body = path.read_bytes()
    except OSError as exc:
        raise PublishError(f"{path.name} is not in the function's package: {exc.strerror}") from None
    digest = hashlib.sha256(body).hexdigest()
    current = _current_version(s3, bucket, key, digest, len(body))
    if current is not None:
        logger.info("%s is unchanged (sha256 %s): keeping version %s", location, digest, current)
        return PublishedObject(location, current, digest)
    try:
        answer = s3.put_object(Bucket=bucket, Key=key, Body=body, Metadata={_SHA256_METADATA: digest})
    except ClientError as exc:
        error = exc.response.get("Error", {})
        code, message = error.get("Code", "Error"), error.get("Message", str(exc))
        raise PublishError(f"cannot put {location}: {code}: {message}") from None
    except BotoCoreError as exc:
        raise PublishError(f"cannot put {location}: {exc}") from None
    version = answer.get("VersionId")
    if not version or version == "null":
        raise PublishError(
            f"bucket {bucket} gave {key} no version id: enable versioning on it, so that nodes can pin "
            "what they fetch"
        )
    logger.info("published %s version %s (sha256 %s)", location, version, digest)
    return PublishedObject(location, str(version), digest)


def _current_version(s3: Any, bucket: str, key: str, digest: str, size: int) -> str | None:
    """The version id of the object at `key` when it already holds these bytes, else None. The sha256
    recorded when it was published says which to look at; the bytes are read back and hashed, since
    anyone who may put an object there may write that label on other bytes (the next release's digest is
    known: the build is reproducible), and the pins would then name them."""
    from botocore.exceptions import BotoCoreError, ClientError

    try:
        head = s3.head_object(Bucket=bucket, Key=key)
    except (ClientError, BotoCoreError):
        return None  # absent or unreadable: PutObject says what is wrong, if anything
    version = head.get("VersionId")
    if head.get("Metadata", {}).get(_SHA256_METADATA) != digest or not version or version == "null":
        return None
    try:
        held = s3.get_object(Bucket=bucket, Key=key, VersionId=version)["Body"].read(size + 1)
    except (ClientError, BotoCoreError) as exc:
        logger.warning(
            "cannot read s3://%s/%s version %s back (%s): publishing it again", bucket, key, version, exc
        )
        return None
    if hashlib.sha256(held).hexdigest() != digest:
        logger.warning(
            "s3://%s/%s version %s is labelled sha256 %s but holds other bytes", bucket, key, version, digest
        )
        return None
    return str(version)


def _s3_client() -> Any:
    import boto3
    from botocore.config import Config

    config = Config(connect_timeout=5, read_timeout=30, retries={"mode": "standard", "total_max_attempts": 3})
    return boto3.client("s3", config=config)


class _Responder:
    """Sends the one answer of an invocation to CloudFormation's response URL, as cfn-response does."""

    def __init__(self, event: Mapping[str, Any]) -> None:
        self._event = event
        self._lock = threading.Lock()
        self.sent = False

    def send(self, status: str, physical_id: str, data: Mapping[str, str] | None, reason: str = "") -> None:
        """PUT the response; only the first call of an invocation sends anything."""
        with self._lock:
            if self.sent:
                return
            self.sent = True
        # CloudFormation refuses a body over 4 KiB: the reason is kept to printable ASCII (JSON escapes any
        # other character in up to 6 bytes), at most REASON_MAX_CHARS of it.
        said = "".join(c if " " <= c <= "~" else "?" for c in " ".join(reason.split()))
        body = json.dumps(
            {
                "Status": status,
                "Reason": said[:REASON_MAX_CHARS] or status,
                "PhysicalResourceId": physical_id,
                "StackId": self._event.get("StackId"),
                "RequestId": self._event.get("RequestId"),
                "LogicalResourceId": self._event.get("LogicalResourceId"),
                "NoEcho": False,
                "Data": dict(data or {}),
            }
        ).encode()
        url = str(self._event.get("ResponseURL"))
        if not _cloudformation_url(url):
            # Whoever may invoke the function could otherwise have it PUT to any address (an internal one).
            logger.error("not answered: the ResponseURL is not CloudFormation's (https, *.amazonaws.com)")
            return
        # The URL is presigned for an empty content type; it is never logged (it carries a signature).
        request = urllib.request.Request(
            url,
            data=body,
            method="PUT",
            headers={"content-type": "", "content-length": str(len(body))},
        )
        for attempt in range(1, RESPONSE_ATTEMPTS + 1):
            try:
                with urllib.request.urlopen(request, timeout=RESPONSE_TIMEOUT_SECONDS) as response:
                    logger.info("answered %s (HTTP %s)", status, response.status)
                    return
            except (OSError, http.client.HTTPException) as exc:  # an answer not HTTP (BadStatusLine) too
                logger.warning("answering %s failed (attempt %d): %s", status, attempt, type(exc).__name__)
                time.sleep(attempt)


# The DNS suffixes of AWS's partitions (botocore's partitions.json): CloudFormation's presigned S3 URL is
# on one of them, whichever partition the stack is in.
_AWS_DNS_SUFFIXES = (
    ".amazonaws.com",
    ".amazonaws.com.cn",
    ".amazonaws.eu",
    ".c2s.ic.gov",
    ".sc2s.sgov.gov",
    ".cloud.adc-e.uk",
    ".csp.hci.ic.gov",
)


def _cloudformation_url(url: str) -> bool:
    """Whether an answer may go to `url`: CloudFormation's presigned S3 URL (https, a host of an AWS
    partition's domain), or any when the function's AWS is a local one (AWS_ENDPOINT_URL: the tests, and
    replays, answer to a CloudFormation of their own on loopback)."""
    if os.environ.get("AWS_ENDPOINT_URL"):
        return True
    try:
        parts = urlsplit(url)
    except ValueError:
        return False
    host = (parts.hostname or "").lower()
    return parts.scheme == "https" and host.endswith(_AWS_DNS_SUFFIXES)


def _physical_id(event: Mapping[str, Any]) -> str:
    existing = event.get("PhysicalResourceId")
    if isinstance(existing, str) and existing:
        return existing
    return f"{event.get('LogicalResourceId', 'NodeBundle')}-{event.get('RequestId', 'unknown')}"


def _handle(event: Mapping[str, Any], responder: _Responder) -> None:
    request_type = event.get("RequestType")
    if request_type == "Delete":
        responder.send(
            "SUCCESS", _physical_id(event), {}, "nothing deleted: enrolled groups pin these versions"
        )
        return
    if request_type not in ("Create", "Update"):
        raise PublishError(f"unknown RequestType {request_type!r}")
    properties = event.get("ResourceProperties") or {}
    bucket, log_group = properties.get("BucketName"), properties.get("LogGroupName")
    if not isinstance(bucket, str) or not isinstance(log_group, str):
        raise PublishError("ResourceProperties needs BucketName and LogGroupName (strings)")
    data = publish_node_bundle(_s3_client(), bucket, log_group)
    physical_id = f"{data['BundleLocation']}#{data['BundleVersionId']}"
    responder.send("SUCCESS", physical_id, data)


def lambda_handler(event: dict[str, Any], context: Any) -> None:
    """Publish on Create and Update, keep everything on Delete; always answer CloudFormation."""
    responder = _Responder(event)
    remaining_ms = getattr(context, "get_remaining_time_in_millis", lambda: 0)()
    watchdog = None
    if remaining_ms > 0:
        seconds = max(remaining_ms / 1000 - TIMEOUT_MARGIN_SECONDS, 0.5)
        watchdog = threading.Timer(
            seconds,
            responder.send,
            ("FAILED", _physical_id(event), None, "timed out publishing the node bundle"),
        )
        watchdog.daemon = True
        watchdog.start()
    try:
        _handle(event, responder)
    except PublishError as exc:
        logger.error("%s", exc)
        responder.send("FAILED", _physical_id(event), None, str(exc))
    except Exception as exc:  # any failure must still be answered
        logger.exception("publishing the node bundle failed")
        responder.send("FAILED", _physical_id(event), None, f"{type(exc).__name__}: {exc}")
    finally:
        if watchdog is not None:
            watchdog.cancel()
            # A watchdog that fired may still be retrying its answer: Lambda freezes the process once the
            # handler returns, and an answer not sent leaves CloudFormation waiting for an hour.
            watchdog.join()
