"""boto3 on the node: the node's own (Amazon Linux 2023: python3-boto3), possibly older than the
features Lifeguard uses, so service endpoints from the environment are passed explicitly."""

from __future__ import annotations

import os
from collections.abc import Callable, Mapping
from typing import Any

from lifeguard.errors import LifeguardError

__all__ = ["MissingBoto3Error", "node_client"]


class MissingBoto3Error(LifeguardError, ImportError):
    """This Python has no boto3."""


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
    endpoint = os.environ.get(f"AWS_ENDPOINT_URL_{service.upper()}") or os.environ.get("AWS_ENDPOINT_URL")
    region_name = (
        boto3.session.Session().region_name or os.environ.get("AWS_REGION") or (region() if region else None)
    )
    extra: dict[str, Any] = {}
    if config:
        from botocore.config import Config

        extra["config"] = Config(**config)
    return boto3.client(service, endpoint_url=endpoint or None, region_name=region_name, **extra)  # type: ignore[call-overload]
