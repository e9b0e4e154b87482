"""Fixtures of the node-side tests: the article's scripts in moto's S3, and `lifeguard-node` run as a
real process against them."""

from __future__ import annotations

import contextlib
import http.server
import json
import os
import subprocess
import sys
import threading
import uuid
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from tests.conftest import ARTICLE_SCRIPTS, load_event
from tests.roles import roles_hold  # noqa: F401 - every test here holds each function to its role

LIFEGUARD_NODE = Path(sys.executable).parent / "lifeguard-node"
# `lifeguard-node` with no file of it allowed past 1 MiB: a full disk, as the boot's scripts meet it.
DISK_FULL_NODE = [
    sys.executable,
    "-c",
    "import os, resource, sys; resource.setrlimit(resource.RLIMIT_FSIZE, (1 << 20, 1 << 20)); "
    "os.execv(sys.argv[1], sys.argv[1:])",
    str(LIFEGUARD_NODE),
]


@dataclass
class NodeRun:
    """One `lifeguard-node` process: its exit status and output."""

    returncode: int
    stdout: str
    stderr: str


@dataclass
class Node:
    """A node's root directory and the means to boot it against the local AWS."""

    root: Path
    bucket: str
    env: dict[str, str]
    s3: Any

    @property
    def actions(self) -> Path:
        return self.root / "var/log/amazon/pcs/lifecycle/actions"

    @property
    def record_file(self) -> Path:
        return self.root / "var/lib/lca-boot-record.log"

    def config(self, name: str) -> dict[str, Any]:
        """An example config with its bucket pointed at this node's bucket."""
        text = json.dumps(load_event(f"configs/{name}.json")).replace("lca-scripts-example", self.bucket)
        data: dict[str, Any] = json.loads(text)
        return data

    def script_config(self, scripts: dict[str, list[dict[str, Any]]], **top: Any) -> dict[str, Any]:
        """A config of scripts given as {stage: [script, …]}, locations relative to the bucket."""
        for stage_scripts in scripts.values():
            for script in stage_scripts:
                source = script["scriptSource"]
                source["scriptLocation"] = f"s3://{self.bucket}/{source['scriptLocation']}"
        return {"stages": scripts, **top}

    def put_script(self, key: str, body: str | bytes) -> None:
        data = body.encode() if isinstance(body, str) else body
        self.s3.put_object(Bucket=self.bucket, Key=key, Body=data)

    def boot(self, config: dict[str, Any] | Path, *args: str, command: list[str] | None = None) -> NodeRun:
        """Run `lifeguard-node boot` on this root, as the article's node lca-static-1 of group lca-static
        (`config` as JSON, or the file that holds it as it is)."""
        if isinstance(config, Path):
            path = config
        else:
            path = self.root.parent / f"config-{uuid.uuid4().hex[:8]}.json"
            path.write_text(json.dumps(config))
        base = command or [str(LIFEGUARD_NODE)]
        result = subprocess.run(
            [
                *base,
                "boot",
                "--config",
                str(path),
                "--root",
                str(self.root),
                "--node-id",
                "lca-static-1",
                "--cluster-id",
                "pcs_abc123de45",
                "--compute-node-group-id",
                "pcs_abcdef01",
                "--compute-node-group-name",
                "lca-static",
                *args,
            ],
            env=self.env,
            capture_output=True,
            text=True,
            timeout=120,
            check=False,
        )
        return NodeRun(result.returncode, result.stdout, result.stderr)

    def executor_records(self) -> list[dict[str, Any]]:
        lines = (self.actions / "executor.log").read_text().splitlines()
        return [json.loads(line) for line in lines]

    def script_log(self, stage: str, name: str) -> str:
        return (self.actions / stage / f"{name}.log").read_text()


def new_node(local: Any, directory: Path) -> Node:
    """A fresh node root under `directory` and a fresh bucket holding the article's three scripts."""
    s3 = local.client("s3")
    bucket = f"lca-scripts-{uuid.uuid4().hex[:10]}"
    s3.create_bucket(Bucket=bucket)
    for script in ("record-boot.sh", "ready-check.sh", "fail.sh"):
        s3.put_object(Bucket=bucket, Key=f"scripts/{script}", Body=(ARTICLE_SCRIPTS / script).read_bytes())
    root = directory / "root"
    (root / "var/lib").mkdir(parents=True)
    env = {**os.environ, **local.environ()}
    env.update(
        AWS_ENDPOINT_URL_S3=local.moto.endpoint_url,
        LCA_BOOT_RECORD=str(root / "var/lib/lca-boot-record.log"),
        LIFEGUARD_FETCH_BACKOFF_SECONDS="0.05",
    )
    return Node(root, bucket, env, s3)


@pytest.fixture
def node(local: Any, tmp_path: Path) -> Node:
    """A fresh node root and a fresh bucket holding the article's three scripts under scripts/."""
    return new_node(local, tmp_path)


@dataclass
class Deployment:
    """One local deployment of the stack (table, bus, a queue on the bus) and the controller's wiring to
    it, with PCS at `pcs_endpoint`."""

    stack: Any
    wiring: Any


def deploy(local: Any, monkeypatch: pytest.MonkeyPatch, pcs_endpoint: str, prefix: str) -> Deployment:
    """Point boto3 at the local AWS, make the stack's resources, and wire the controller to them."""
    from lifeguard.aws.clients import aws_client
    from lifeguard.aws.eventbridge import EventPublisher
    from lifeguard.aws.pcs import PcsGateway
    from lifeguard.detection import DetectionSettings
    from lifeguard.handlers.updater import GroupUpdater
    from lifeguard.store.groups import GroupStore
    from lifeguard.wiring import Wiring
    from lifeguard_cli.local.stack import create_stack

    for key, value in local.environ().items():
        monkeypatch.setenv(key, value)
    stack = create_stack(
        local.client("dynamodb"),
        local.client("events"),
        local.client("sqs"),
        f"{prefix}-{uuid.uuid4().hex[:8]}",
    )
    store = GroupStore(aws_client("dynamodb", local.moto.endpoint_url), stack.table)
    publisher = EventPublisher(aws_client("events", local.moto.endpoint_url), stack.event_bus)
    wiring = Wiring(
        store,
        PcsGateway(aws_client("pcs", pcs_endpoint)),
        GroupUpdater(store, publisher),
        DetectionSettings.stack_defaults(),
    )
    return Deployment(stack, wiring)


def open_episode(store: Any, detail: dict[str, Any]) -> None:
    """Make the group's state hold the open episode a BootstrapLoopDetected detail is about, as the
    scaling_events handler does before it publishes one (remediation acts only on such an episode)."""
    from lifeguard.group_state import Episode, Failure, Suspect

    state = store.load(detail["cluster_id"], detail["compute_node_group_id"])
    episode = state.episode
    if episode is None or episode.episode_id != detail["episode_id"]:
        episode = Episode(episode_id=detail["episode_id"], kind=detail.get("kind") or "loop", opened_at=0)
    episode.revision = max(episode.revision, detail.get("revision") or 1)
    episode.config_fingerprint = detail["config_fingerprint"]
    episode.config_modified_at = detail["config_modified_at"]
    episode.failures = [Failure.model_validate(f) for f in detail.get("failures") or []]
    suspect = detail.get("suspect")
    episode.suspect = Suspect.model_validate(suspect) if suspect else None
    state.episode = episode
    store.save(state)


def on_a_terminal(
    command: list[str], answer: str, *, env: dict[str, str], cwd: Path | None = None
) -> subprocess.CompletedProcess[str]:
    """`command` run with a terminal on stdin (a pseudo-terminal), `answer` typed into it."""
    leader, follower = os.openpty()
    try:
        os.write(leader, f"{answer}\n".encode())
        return subprocess.run(
            command,
            stdin=follower,
            env=env,
            cwd=cwd,
            capture_output=True,
            text=True,
            timeout=120,
            check=False,
        )
    finally:
        os.close(leader)
        os.close(follower)


# How a PCS endpoint on loopback answers a call: (HTTP status, content type, body), from the operation's
# name and its request.
PcsAnswer = Callable[[str, dict[str, Any]], tuple[int, str, bytes]]


@contextlib.contextmanager
def pcs_on_loopback(monkeypatch: pytest.MonkeyPatch, answer: PcsAnswer) -> Iterator[Any]:
    """A PcsGateway (one attempt a call: botocore's own retries would only take longer) to a PCS endpoint on
    loopback whose every call `answer` answers."""
    from lifeguard.aws.clients import aws_client
    from lifeguard.aws.pcs import PcsGateway

    for name, value in (
        ("AWS_ACCESS_KEY_ID", "testing"),
        ("AWS_SECRET_ACCESS_KEY", "testing"),
        ("AWS_DEFAULT_REGION", "us-east-1"),
        ("AWS_CONFIG_FILE", "/dev/null"),
    ):
        monkeypatch.setenv(name, value)

    class Pcs(http.server.BaseHTTPRequestHandler):
        def do_POST(self) -> None:
            request = json.loads(self.rfile.read(int(self.headers.get("content-length", 0))) or b"{}")
            operation = self.headers.get("X-Amz-Target", "").rpartition(".")[2]
            status, content_type, body = answer(operation, request)
            self.send_response(status)
            self.send_header("Content-Type", content_type)
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, *args: Any) -> None:
            pass

    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Pcs)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        yield PcsGateway(aws_client("pcs", f"http://127.0.0.1:{server.server_port}", attempts=1))
    finally:
        server.shutdown()
        server.server_close()
