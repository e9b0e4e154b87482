"""boto3 on the node: the node's own (Amazon Linux 2023: python3-boto3), possibly older than the
features Lifeguard uses, so service endpoints from the environment are passed explicitly."""

from __future__ import annotations

import os
import re
from collections.abc import Callable, Mapping
from typing import Any

from lifeguard.errors import LifeguardError

__all__ = [
    "IMDS_ENDPOINT",
    "ImdsError",
    "MissingBoto3Error",
    "imds",
    "instance_region",
    "is_region",
    "node_client",
]


class MissingBoto3Error(LifeguardError, ImportError):
    """This Python has no boto3."""


class ImdsError(LifeguardError):
    """The instance metadata service did not answer a read (off EC2, or it answered no text)."""


IMDS_ENDPOINT = "http://169.254.169.254"


def imds(path: str, timeout_seconds: float = 1.0) -> str:
    """One IMDSv2 read (endpoint from AWS_EC2_METADATA_SERVICE_ENDPOINT when set)."""
    import http.client  # here: a boot whose scripts are cached never reads the metadata
    import urllib.request

    base = os.environ.get("AWS_EC2_METADATA_SERVICE_ENDPOINT", IMDS_ENDPOINT).rstrip("/")
    token_request = urllib.request.Request(
        f"{base}/latest/api/token", method="PUT", headers={"X-aws-ec2-metadata-token-ttl-seconds": "60"}
    )
    try:
        with urllib.request.urlopen(token_request, timeout=timeout_seconds) as response:
            token = response.read().decode()
        request = urllib.request.Request(
            f"{base}/latest/meta-data/{path}", headers={"X-aws-ec2-metadata-token": token}
        )
        with urllib.request.urlopen(request, timeout=timeout_seconds) as response:
            return str(response.read().decode().strip())
    except (OSError, http.client.HTTPException, ValueError) as exc:  # unreached, not HTTP, not text
        said = " ".join(f"{type(exc).__name__}: {exc}".split())[:300]  # one line, whatever it answered
        raise ImdsError(f"cannot read {path} from IMDSv2 at {base} ({said})") from None


# A region's name as AWS gives them (us-east-1, us-gov-west-1, eu-central-2).
_REGION = re.compile(r"[a-z]{2}(-[a-z]+)+-\d{1,2}")


def instance_region() -> str | None:
    """The instance's own region through IMDSv2, None off EC2, where the metadata service is turned off
    (AWS_EC2_METADATA_DISABLED, as boto3 honours it) or answers no region's name: the region of a client
    nothing else names one for (a systemd service, a lifecycle script: no AWS_REGION)."""
    if os.environ.get("AWS_EC2_METADATA_DISABLED", "").lower() == "true":
        return None
    try:
        region = imds("placement/region")
    except ImdsError:
        return None
    return region if is_region(region) else None


def is_region(name: str) -> bool:
    """Whether `name` is a region's name as AWS gives them: a client's endpoint is made of it."""
    return _REGION.fullmatch(name) is not None


# A service's own variable is named for its service id (botocore's `AWS_ENDPOINT_URL_<SERVICE ID>`), which
# for CloudWatch Logs is not its client's name.
_SERVICE_IDS = {"logs": "CLOUDWATCH_LOGS"}


def _endpoint_variables(service: str) -> tuple[str, ...]:
    """The variables that may set `service`'s endpoint, the first set winning, as botocore reads them: the
    service's own (by its service id; by its client's name too, as earlier releases read it), then
    AWS_ENDPOINT_URL."""
    own = f"AWS_ENDPOINT_URL_{_SERVICE_IDS.get(service, service.upper())}"
    return tuple(dict.fromkeys((own, f"AWS_ENDPOINT_URL_{service.upper()}", "AWS_ENDPOINT_URL")))


def node_client(
    service: str,
    needed_for: str,
    *,
    region: Callable[[], str | None] | None = None,
    config: Mapping[str, Any] | None = None,
) -> Any:
    """A boto3 client of `service`, honouring AWS_ENDPOINT_URL_<SERVICE> / AWS_ENDPOINT_URL even where boto3
    predates them; its region is boto3's (AWS_DEFAULT_REGION, the profile), else AWS_REGION (which boto3
    does not read, though other SDKs and Lambda set it), else `region`'s answer; `config`: botocore Config's
    arguments (its retries, timeouts)."""
    try:
        import boto3
    except ImportError:
        raise MissingBoto3Error(
            f"{needed_for} need boto3, which this Python does not have "
            "(on Amazon Linux 2023: dnf install -y python3-boto3)"
        ) from None
    endpoint = next((os.environ[name] for name in _endpoint_variables(service) if os.environ.get(name)), None)
    region_name = (
        boto3.session.Session().region_name or os.environ.get("AWS_REGION") or (region() if region else None)
    )
    extra: dict[str, Any] = {}
    if config:
        from botocore.config import Config

        extra["config"] = Config(**config)
    return boto3.client(service, endpoint_url=endpoint or None, region_name=region_name, **extra)  # type: ignore[call-overload]
