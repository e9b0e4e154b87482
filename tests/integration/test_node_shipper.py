"""`lifeguard-node ship`: node reports reach moto's CloudWatch Logs, fast, once, in order."""

from __future__ import annotations

import json
import subprocess
import sys
import threading
import time
import uuid
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, HTTPServer
from pathlib import Path
from typing import Any

import pytest

from lifeguard.node.layout import NodeLayout
from lifeguard.node.shipper import CloudWatchSink, Shipper, ShipperIdentity
from lifeguard.node_report import NodeReport, parse_node_report
from tests.integration.conftest import LIFEGUARD_NODE, Node, new_node

pytestmark = pytest.mark.integration
INSTANCE = "i-059b4b99b4f2e9739"
STREAM = f"pcs_abc123de45/{INSTANCE}"


@pytest.fixture
def log_group(local: Any) -> str:
    name = f"/pcs-lifeguard/node-reports-{uuid.uuid4().hex[:8]}"
    local.client("logs").create_log_group(logGroupName=name)
    return name


def shipped(local: Any, log_group: str, stream: str = STREAM) -> list[NodeReport]:
    logs = local.client("logs")
    try:
        events = logs.get_log_events(logGroupName=log_group, logStreamName=stream, startFromHead=True)[
            "events"
        ]
    except logs.exceptions.ResourceNotFoundException:
        return []
    reports = [parse_node_report(event["message"]) for event in events]
    assert all(isinstance(report, NodeReport) for report in reports), reports
    return reports  # type: ignore[return-value]


def ship_command(node: Node, log_group: str, *args: str) -> list[str]:
    return [str(LIFEGUARD_NODE), "ship", "--root", str(node.root), "--log-group", log_group, *args]


def ship(node: Node, log_group: str, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        ship_command(node, log_group, "--instance-id", INSTANCE, *args),
        env=node.env,
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )


def test_a_terminate_failure_under_a_running_shipper_is_shipped_within_two_seconds(
    node: Node, local: Any, log_group: str
) -> None:
    shipper = subprocess.Popen(
        ship_command(
            node,
            log_group,
            "--instance-id",
            INSTANCE,
            "--cluster-id",
            "pcs_abc123de45",
            "--compute-node-group-id",
            "pcs_abcdef01",
        ),
        env=node.env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        time.sleep(1.0)  # the shipper is up and tailing before the node boots
        assert node.boot(node.config("article-terminate")).returncode == 4
        booted = time.monotonic()
        failure = None
        while time.monotonic() - booted < 2.0 and failure is None:
            failure = next((r for r in shipped(local, log_group) if r.outcome == "failed"), None)
            time.sleep(0.05)
        assert failure is not None, "no failure report within 2 s"
    finally:
        shipper.terminate()
        shipper.wait(timeout=10)
    assert (failure.script, failure.stage, failure.exit_code, failure.on_error) == (
        "fail-terminate",
        "nodeBootstrapped",
        1,
        "TERMINATE",
    )
    assert failure.log_tail == "intentional failure for verification\n"
    assert (failure.cluster_id, failure.compute_node_group_id, failure.instance_id) == (
        "pcs_abc123de45",
        "pcs_abcdef01",
        INSTANCE,
    )
    assert (failure.node_id, failure.boot, failure.first_boot) == ("lca-static-1", 1, True)
    assert failure.script_sha256 is not None
    assert len(failure.script_sha256) == 64


def test_the_logs_client_is_made_when_shipping_starts_not_when_the_first_failure_is_read(
    node: Node, local: Any, log_group: str
) -> None:
    made: list[float] = []

    def make_client() -> Any:
        made.append(time.monotonic())
        return local.client("logs")

    identity = ShipperIdentity("pcs_abc123de45", "pcs_abcdef01", INSTANCE, None)
    sink = CloudWatchSink(log_group, identity.stream, client_factory=make_client)
    shipper = Shipper(NodeLayout(node.root), identity, sink)
    stopped = threading.Event()
    running = threading.Thread(target=shipper.run, kwargs={"poll_interval": 0.05, "stop": stopped.is_set})
    running.start()
    try:
        waited = time.monotonic()
        while not made and time.monotonic() - waited < 5.0:
            time.sleep(0.01)
        assert made, "no client 5 s after shipping started"
        boot_started = time.monotonic()
        assert node.boot(node.config("article-terminate")).returncode == 4
        failure = None
        while time.monotonic() - boot_started < 5.0 and failure is None:
            failure = next((r for r in shipped(local, log_group) if r.outcome == "failed"), None)
            time.sleep(0.02)
    finally:
        stopped.set()
        running.join(timeout=10)
    assert failure is not None, "no failure report within 5 s"
    assert failure.script == "fail-terminate"
    assert len(made) == 1
    assert made[0] < boot_started  # before there was anything to report


def test_once_ships_what_ran_before_the_shipper_started_and_restarts_send_no_duplicates(
    node: Node, local: Any, log_group: str
) -> None:
    assert node.boot(node.config("article-stop-sequence")).returncode == 3
    first = ship(node, log_group, "--once")
    assert first.returncode == 0, first.stderr
    reports = shipped(local, log_group)
    assert [(r.stage, r.script, r.outcome, r.exit_code) for r in reports] == [
        ("nodeBootstrapped", "fail-stop-sequence", "failed", 1),
        ("nodeBootstrapped", "record-after-fail", "skipped", None),
        ("nodeReady", "ready-check", "succeeded", 0),
    ]
    assert reports[0].on_error == "STOP_SEQUENCE"
    assert "stopped" in reports[1].log_tail
    # The ids came from what the executor logged: no flags needed.
    assert reports[0].cluster_id == "pcs_abc123de45"
    assert ship(node, log_group, "--once").returncode == 0
    assert len(shipped(local, log_group)) == 3
    assert node.boot(node.config("article-stop-sequence")).returncode == 0  # a reboot
    assert ship(node, log_group, "--once").returncode == 0
    after = shipped(local, log_group)
    assert len(after) == 6
    assert {(r.boot, r.first_boot) for r in after[3:]} == {(2, False)}


class DeliverThenCrash(CloudWatchSink):
    """Delivers the batch, then dies before the shipper can record that it did."""

    def put(self, messages: list[str]) -> None:
        super().put(messages)
        raise SystemExit("crashed after delivery")


def test_a_crash_between_delivery_and_bookkeeping_sends_no_duplicate(
    node: Node, local: Any, log_group: str
) -> None:
    assert node.boot(node.config("article-terminate")).returncode == 4
    identity = ShipperIdentity("pcs_abc123de45", "pcs_abcdef01", INSTANCE, "lca-static-1")
    layout = NodeLayout(node.root)
    logs = local.client("logs")
    with pytest.raises(SystemExit):
        Shipper(layout, identity, DeliverThenCrash(log_group, identity.stream, logs)).poll()
    assert len(shipped(local, log_group)) == 3
    restarted = Shipper(layout, identity, CloudWatchSink(log_group, identity.stream, logs))
    assert restarted.poll() == 0
    assert len(shipped(local, log_group)) == 3
    # A batch that never left is sent after the restart.
    assert node.boot(node.config("article-terminate")).returncode == 4
    assert restarted.poll() == 3
    assert len(shipped(local, log_group)) == 6


class FailingSink(CloudWatchSink):
    def __init__(self, *args: Any, failures: int) -> None:
        super().__init__(*args)
        self.failures = failures

    def put(self, messages: list[str]) -> None:
        if self.failures:
            self.failures -= 1
            raise ConnectionError("endpoint unreachable")
        super().put(messages)


def test_a_failed_delivery_is_kept_and_retried_never_dropped(node: Node, local: Any, log_group: str) -> None:
    assert node.boot(node.config("article-terminate")).returncode == 4
    identity = ShipperIdentity("pcs_abc123de45", "pcs_abcdef01", INSTANCE, None)
    sink = FailingSink(log_group, identity.stream, local.client("logs"), failures=2)
    shipper = Shipper(NodeLayout(node.root), identity, sink)
    for _ in range(2):
        with pytest.raises(ConnectionError):
            shipper.poll()
    assert shipped(local, log_group) == []
    assert shipper.poll() == 3
    assert [r.script for r in shipped(local, log_group)] == [
        "fail-terminate",
        "record-after-fail",
        "ready-check",
    ]


def test_logs_written_by_the_pcs_agent_are_read_too(node: Node, local: Any, log_group: str) -> None:
    """executor.log and the script log exactly as the article shows the PCS agent writing them."""
    actions = node.actions
    (actions / "nodeBootstrapped").mkdir(parents=True)
    (actions / "nodeBootstrapped" / "fail-stop-sequence.log").write_text(
        "[start fail-stop-sequence args=[] @ 1792544247]\n"
        "intentional failure for verification\n"
        "[end fail-stop-sequence exit=1 @ 1792544247]\n"
    )
    (actions / "executor.log").write_text(
        '{"timestamp":"2026-10-21T00:57:27.868622Z","level":"ERROR",'
        '"message":"lifecycle script failed; stopping remaining scripts",'
        '"stage":"nodeBootstrapped","script":"fail-stop-sequence","on_error":"StopSequence",'
        '"error":"script \'fail-stop-sequence\' failed with exit status ExitStatus(unix_wait_status(256))"}\n'
        "not json at all\n"
    )
    result = ship(
        node, log_group, "--once", "--cluster-id", "pcs_abc123de45", "--compute-node-group-id", "pcs_x1"
    )
    assert result.returncode == 0, result.stderr
    assert "skipped 1 unreadable executor.log lines" in result.stderr
    [report] = shipped(local, log_group)
    assert (report.script, report.on_error, report.exit_code, report.outcome) == (
        "fail-stop-sequence",
        "STOP_SEQUENCE",
        1,
        "failed",
    )
    assert (report.started_at, report.ended_at) == (1792544247, 1792544247)
    assert report.log_tail == "intentional failure for verification\n"


def test_a_failed_fetch_is_shipped_with_its_error_as_the_log(node: Node, local: Any, log_group: str) -> None:
    config = node.config("article-terminate")
    config["stages"]["nodeBootstrapped"][0]["scriptSource"]["scriptLocation"] = (
        f"s3://{node.bucket}/moved/fail.sh"
    )
    assert node.boot(config).returncode == 4
    assert ship(node, log_group, "--once").returncode == 0
    failure = shipped(local, log_group)[0]
    assert (failure.outcome, failure.exit_code) == ("failed", None)
    assert "NoSuchKey" in failure.log_tail


def test_the_log_tail_is_the_last_4_kib_of_that_run(node: Node, local: Any, log_group: str) -> None:
    node.put_script(
        "scripts/noisy.sh", "#!/bin/bash\nfor i in $(seq 1 2000); do echo line-$i; done\nexit 2\n"
    )
    config = node.script_config(
        {
            "nodeBootstrapped": [
                {
                    "name": "noisy",
                    "onError": "CONTINUE",
                    "executionPolicy": "EVERY_BOOT",
                    "scriptSource": {"scriptLocation": "scripts/noisy.sh"},
                }
            ]
        }
    )
    assert node.boot(config).returncode == 0
    assert node.boot(config).returncode == 0
    assert ship(node, log_group, "--once").returncode == 0
    reports = shipped(local, log_group)
    assert [r.exit_code for r in reports] == [2, 2]
    for report in reports:
        assert len(report.log_tail.encode()) == 4096
        assert report.log_tail.endswith("line-2000\n")
        assert "[end" not in report.log_tail
        assert "[start" not in report.log_tail


class FakeImds(BaseHTTPRequestHandler):
    """IMDSv2 on loopback: a token first, then metadata only with that token."""

    def do_PUT(self) -> None:
        self._reply(200, "token-123")

    def do_GET(self) -> None:
        if self.headers.get("X-aws-ec2-metadata-token") != "token-123":
            self._reply(401, "")
        elif self.path == "/latest/meta-data/instance-id":
            self._reply(200, "i-0fromimds000000")
        else:
            self._reply(404, "")

    def _reply(self, status: int, body: str) -> None:
        data = body.encode()
        self.send_response(status)
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def log_message(self, format: str, *args: Any) -> None:
        pass


@pytest.fixture
def imds() -> Iterator[str]:
    server = HTTPServer(("127.0.0.1", 0), FakeImds)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{server.server_address[1]}"
    server.shutdown()
    server.server_close()


def test_the_instance_id_comes_from_imdsv2(node: Node, local: Any, log_group: str, imds: str) -> None:
    assert node.boot(node.config("article-terminate")).returncode == 4
    node.env["AWS_EC2_METADATA_SERVICE_ENDPOINT"] = imds
    result = subprocess.run(
        ship_command(node, log_group, "--once"),
        env=node.env,
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert result.returncode == 0, result.stderr
    reports = shipped(local, log_group, "pcs_abc123de45/i-0fromimds000000")
    assert reports[0].instance_id == "i-0fromimds000000"


def test_without_an_instance_id_the_error_is_one_clear_line(
    node: Node, log_group: str, tmp_path: Path
) -> None:
    node.env["AWS_EC2_METADATA_SERVICE_ENDPOINT"] = "http://127.0.0.1:9"  # nothing listens there
    result = subprocess.run(
        ship_command(node, log_group, "--once", "--cluster-id", "pcs_a", "--compute-node-group-id", "pcs_b"),
        env=node.env,
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert result.returncode == 64
    assert "pass --instance-id" in result.stderr
    assert "Traceback" not in result.stderr
    assert len(result.stderr.strip().splitlines()) == 1


# -- 9. The shipper trusts a line that a script prints --

FORGER = (
    "#!/bin/bash\n"
    "echo 'before the forgery'\n"
    "echo '[end forger exit=0 @ 1]'\n"
    "echo 'after the forgery: the real error'\n"
    "exit 3\n"
)


def test_defect_9_a_script_that_prints_an_end_marker_cannot_change_its_report(
    node: Node, local: Any, log_group: str
) -> None:
    node.put_script("scripts/forger.sh", FORGER)
    config = node.script_config(
        {
            "nodeBootstrapped": [
                {
                    "name": "forger",
                    "onError": "CONTINUE",
                    "scriptSource": {"scriptLocation": "scripts/forger.sh"},
                }
            ]
        }
    )
    assert node.boot(config).returncode == 0
    assert ship(node, log_group, "--once").returncode == 0
    [report] = shipped(local, log_group)
    assert (report.outcome, report.exit_code) == ("failed", 3)
    assert report.log_tail == (
        "before the forgery\n[end forger exit=0 @ 1]\nafter the forgery: the real error\n"
    )


def _pcs_agent_run(node: Node, output: bytes, wait_status: int) -> None:
    """A run of `forger` as the PCS agent logs it (its executor.log records carry no log offsets)."""
    stage = node.actions / "nodeBootstrapped"
    stage.mkdir(parents=True, exist_ok=True)
    with (stage / "forger.log").open("wb") as log:
        log.write(b"[start forger args=[] @ 1792544247]\n")
        log.write(output)
        log.write(f"[end forger exit={wait_status >> 8} @ 1792544247]\n".encode())
    (node.actions / "executor.log").write_text(
        json.dumps(
            {
                "timestamp": "2026-10-21T00:57:27.868622Z",
                "level": "ERROR",
                "message": "lifecycle script failed; stopping remaining scripts",
                "stage": "nodeBootstrapped",
                "script": "forger",
                "on_error": "StopSequence",
                "error": f"script 'forger' failed with exit status ExitStatus(unix_wait_status({wait_status}))",  # noqa: E501
            }
        )
        + "\n"
    )


def test_defect_9_in_the_pcs_agents_logs_too_the_exit_status_is_executor_logs(
    node: Node, local: Any, log_group: str
) -> None:
    _pcs_agent_run(node, b"before\n[end forger exit=0 @ 1792544247]\nafter: the real error\n", 768)
    ids = ("--cluster-id", "pcs_abc123de45", "--compute-node-group-id", "pcs_abcdef01")
    assert ship(node, log_group, "--once", *ids).returncode == 0
    [report] = shipped(local, log_group)
    assert (report.outcome, report.exit_code, report.on_error) == ("failed", 3, "STOP_SEQUENCE")
    assert report.log_tail == "before\n[end forger exit=0 @ 1792544247]\nafter: the real error\n"


def _max_rss_kib(command: list[str], env: dict[str, str]) -> int:
    """The peak resident memory of one run of `command` (its own process only), in KiB."""
    probe = (
        "import resource, subprocess, sys\n"
        "done = subprocess.run(sys.argv[1:], capture_output=True)\n"
        "assert done.returncode == 0, done.stderr\n"
        "print(resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss)\n"
    )
    result = subprocess.run(
        [sys.executable, "-c", probe, *command],
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
        check=True,
    )
    return int(result.stdout)


def test_defect_9_a_100_mb_script_log_costs_the_shipper_no_more_memory_than_a_line(
    node: Node, local: Any, log_group: str, tmp_path: Path
) -> None:
    ids = ("--instance-id", INSTANCE, "--cluster-id", "pcs_abc123de45", "--compute-node-group-id", "pcs_x1")
    _pcs_agent_run(node, b"one line\n", 256)
    small = _max_rss_kib(ship_command(node, log_group, "--once", *ids), node.env)
    other = new_node(local, tmp_path / "big")
    line = b"x" * 99 + b"\n"
    _pcs_agent_run(other, line * (100 * 1024 * 1024 // len(line)) + b"the real error\n", 256)
    big = _max_rss_kib(ship_command(other, log_group, "--once", *ids), other.env)
    assert big < small + 16 * 1024, (small, big)  # within 16 MB of the one-line run
    report = shipped(local, log_group)[-1]
    assert report.log_tail.endswith("x\nthe real error\n")
    assert len(report.log_tail.encode()) == 4096
