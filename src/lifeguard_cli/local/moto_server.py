"""moto in server mode on a free loopback port: real HTTP, real boto3 serialization."""

from __future__ import annotations

import logging
import socket
import subprocess
import sys
import threading
import time
import urllib.request
from collections.abc import Callable, Iterable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any

from lifeguard_cli.local.loopback import SHUTDOWN_POLL_SECONDS

__all__ = ["MotoServer", "serve_moto"]

WsgiApp = Callable[[dict[str, Any], Callable[..., Any]], Iterable[bytes]]


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
def serve_moto(*, separate_process: bool = False) -> Iterator[MotoServer]:
    """Run moto's server on 127.0.0.1 with a free port for the duration of the block.

    In a thread of this process by default (fast to start); with `separate_process`, as its own process,
    so that measuring a client is not measuring moto sharing its interpreter.
    """
    if separate_process:
        with _moto_process() as running:
            yield running
        return
    # Heavy: only when a local AWS is wanted. The same parts moto's ThreadedMotoServer puts together.
    from moto.moto_server.werkzeug_app import (
        DomainDispatcherApplication,
        MotoRequestHandler,
        create_backend_app,
    )
    from werkzeug.serving import make_server

    logging.getLogger("werkzeug").setLevel(logging.ERROR)
    app = _one_at_a_time(DomainDispatcherApplication(create_backend_app))
    server = make_server("127.0.0.1", 0, app, threaded=True, request_handler=MotoRequestHandler)
    thread = threading.Thread(
        target=server.serve_forever, args=(SHUTDOWN_POLL_SECONDS,), name="moto", daemon=True
    )
    thread.start()
    try:
        yield MotoServer(f"http://127.0.0.1:{server.server_port}")
    finally:
        server.shutdown()
        thread.join()


# moto's backends are this process's, whichever server answers: every in-thread server shares one lock.
_BACKENDS = threading.Lock()


def _one_at_a_time(app: WsgiApp) -> WsgiApp:
    """`app` answering one request at a time. moto's backends take no locks: two conditional writes at once
    could both pass their condition (two writers of one version both win), which DynamoDB never lets
    happen, and two first requests of a region at once could each make its backend, one lost. Requests
    still connect at once; they are answered in turn, as atomically as the real services. The backends
    are the process's, so two servers in one process (a session's, a replay's) take turns too.

    After each request, the DynamoDB models moto tracks for its dashboard alone are let go: it tracks every
    instance ever made, and a transaction deep-copies each table it writes (to roll back), so a replay held
    a copy of the whole table per TransactWriteItems (100,000 records: 2.5 GB). The tables themselves are
    the backends'; nothing else reads the lists."""
    from moto.core.model_instances import model_data

    dynamodb = model_data["dynamodb"]  # moto's DynamoDB models, filled in as it imports them

    def serve(environ: dict[str, Any], start_response: Callable[..., Any]) -> Iterable[bytes]:
        with _BACKENDS:
            answer = list(app(environ, start_response))
            for model in dynamodb.values():
                tracked = getattr(model, "instances_tracked", None)
                if tracked:
                    tracked.clear()
            return answer

    return serve


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


@contextmanager
def _moto_process(start_timeout_seconds: float = 30.0) -> Iterator[MotoServer]:
    port = _free_port()
    process = subprocess.Popen(
        [sys.executable, "-m", "moto.server", "-H", "127.0.0.1", "-p", str(port)],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    server = MotoServer(f"http://127.0.0.1:{port}")
    try:
        deadline = time.monotonic() + start_timeout_seconds
        while True:
            try:
                with urllib.request.urlopen(f"{server.endpoint_url}/moto-api/", timeout=1) as response:
                    response.read()
                break
            except OSError:
                if process.poll() is not None or time.monotonic() > deadline:
                    raise RuntimeError(f"moto server did not start on port {port}") from None
                time.sleep(0.1)
        yield server
    finally:
        process.terminate()
        process.wait(timeout=10)
