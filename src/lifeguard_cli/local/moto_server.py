"""moto in server mode on a free loopback port: real HTTP, real boto3 serialization."""

from __future__ import annotations

import logging
import urllib.request
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass

__all__ = ["MotoServer", "serve_moto"]


@dataclass(frozen=True)
class MotoServer:
    """A running moto server: DynamoDB, SNS, SQS, S3, CloudWatch Logs, EventBridge, Secrets Manager, …"""

    endpoint_url: str

    def reset(self) -> None:
        """Forget every resource (moto's own reset API)."""
        request = urllib.request.Request(f"{self.endpoint_url}/moto-api/reset", method="POST")
        with urllib.request.urlopen(request, timeout=10) as response:
            response.read()


@contextmanager
def serve_moto() -> Iterator[MotoServer]:
    """Run moto's threaded server on 127.0.0.1 with a free port for the duration of the block."""
    from moto.server import ThreadedMotoServer  # heavy: only when a local AWS is wanted

    logging.getLogger("werkzeug").setLevel(logging.ERROR)
    server = ThreadedMotoServer(ip_address="127.0.0.1", port=0, verbose=False)
    server.start()
    host, port = server.get_host_and_port()
    try:
        yield MotoServer(f"http://{host}:{port}")
    finally:
        server.stop()
