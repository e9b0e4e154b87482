"""The local AWS of tests, `lifeguard replay` and `lifeguard demo`: moto in server mode plus Lifeguard's
own local PCS endpoint, both on loopback, started and stopped together."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import ExitStack, contextmanager
from dataclasses import dataclass
from typing import Any

from lifeguard_cli.local.moto_server import MotoServer, serve_moto
from lifeguard_cli.local.pcs import LocalPcs, LocalPcsServer, ManualClock, PcsApiError, serve_local_pcs

__all__ = [
    "LocalAWS",
    "LocalPcs",
    "LocalPcsServer",
    "ManualClock",
    "MotoServer",
    "PcsApiError",
    "local_aws",
    "serve_local_pcs",
    "serve_moto",
]

REGION = "us-east-1"


@dataclass(frozen=True)
class LocalAWS:
    """Endpoints of a running local AWS and the environment that points boto3 at them."""

    moto: MotoServer
    pcs_server: LocalPcsServer

    @property
    def pcs(self) -> LocalPcs:
        """The local PCS's state: seeding, faults, calls."""
        return self.pcs_server.pcs

    def environ(self) -> dict[str, str]:
        """Variables that make any boto3 client in the process talk to this local AWS."""
        return {
            "AWS_ENDPOINT_URL": self.moto.endpoint_url,
            "AWS_ENDPOINT_URL_PCS": self.pcs_server.endpoint_url,
            "AWS_ACCESS_KEY_ID": "testing",
            "AWS_SECRET_ACCESS_KEY": "testing",
            "AWS_SESSION_TOKEN": "testing",
            "AWS_DEFAULT_REGION": REGION,
            "AWS_REGION": REGION,
        }

    def client(self, service: str, **kwargs: Any) -> Any:
        """A boto3 client of `service` against this local AWS."""
        import boto3

        endpoint = self.pcs_server.endpoint_url if service == "pcs" else self.moto.endpoint_url
        return boto3.client(
            service,  # type: ignore[call-overload]
            endpoint_url=endpoint,
            region_name=REGION,
            aws_access_key_id="testing",
            aws_secret_access_key="testing",
            **kwargs,
        )


@contextmanager
def local_aws(pcs: LocalPcs | None = None, *, separate_process: bool = False) -> Iterator[LocalAWS]:
    """Start moto and a local PCS on loopback; stop both when the block ends."""
    with ExitStack() as stack:
        moto = stack.enter_context(serve_moto(separate_process=separate_process))
        pcs_server = stack.enter_context(serve_local_pcs(pcs))
        yield LocalAWS(moto, pcs_server)
