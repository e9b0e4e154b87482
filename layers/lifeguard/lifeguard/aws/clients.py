"""boto3 clients, built once per process, that know PCS's current API even on an older runtime botocore."""

from __future__ import annotations

from functools import cache
from typing import Any

from lifeguard.pcs_model import DATA_PATH

__all__ = ["RETRIES", "LazyClient", "aws_client", "client_config", "lazy_client", "with_pcs_model"]

# botocore's standard mode: exponential backoff with jitter on throttling and 5xx, 5 attempts in all.
RETRIES: Any = {"mode": "standard", "total_max_attempts": 5}


@cache
def _session() -> Any:
    import boto3
    import botocore.session

    return boto3.session.Session(botocore_session=with_pcs_model(botocore.session.get_session()))


def with_pcs_model(core: Any) -> Any:
    """`core` (a botocore session) with the layer's copy of botocore's PCS model first, so
    `nodeLifecycleActions` is known whatever botocore the runtime or the operator has."""
    core.get_component("data_loader").search_paths.insert(0, str(DATA_PATH))
    return core


@cache
def aws_client(service: str, endpoint_url: str | None = None, *, attempts: int = 5) -> Any:
    """The process-wide client of `service`; endpoints and credentials come from boto3's standard
    configuration (including `AWS_ENDPOINT_URL_<SERVICE>`) unless `endpoint_url` is given. `attempts=1`
    leaves retrying to the caller (remediation honours PCS's `retryAfterSeconds`, botocore does not)."""
    return _session().client(service, endpoint_url=endpoint_url, config=client_config(attempts))


class LazyClient:
    """`aws_client(service)`, made when it is first used: a Lambda's cold start loads no boto3 and no
    service model until its first invocation calls AWS, and a handler that never calls a service (a batch
    that needs no PCS read) never loads its model."""

    __slots__ = ("_attempts", "_service")

    def __init__(self, service: str, attempts: int = 5) -> None:
        self._service = service
        self._attempts = attempts

    def __getattr__(self, name: str) -> Any:
        return getattr(aws_client(self._service, attempts=self._attempts), name)

    def __repr__(self) -> str:
        return f"LazyClient({self._service!r}, attempts={self._attempts})"


def lazy_client(service: str, *, attempts: int = 5) -> Any:
    """The composition roots' `Clients` in a Lambda: one process-wide client per service and retry budget,
    made on first use (`LazyClient`)."""
    return LazyClient(service, attempts)


def client_config(attempts: int = 5) -> Any:
    """The botocore configuration every Lifeguard client has: standard retries (`attempts` in all) and
    timeouts that end a stuck call well inside a Lambda's."""
    from botocore.config import Config

    retries: Any = {**RETRIES, "total_max_attempts": attempts}
    return Config(retries=retries, connect_timeout=5, read_timeout=20)
