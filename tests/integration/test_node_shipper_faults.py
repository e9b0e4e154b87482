"""The shipper under faults: a script log it cannot read, a run that never gets its end marker, CloudWatch
Logs refusing the reports or their time, and a node whose log group is gone."""

from __future__ import annotations

import json
import subprocess
import time
import uuid
from typing import Any

import pytest

from lifeguard.node_report import NodeReport, parse_node_report
from tests.integration.conftest import LIFEGUARD_NODE, Node

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
    return [parse_node_report(event["message"]) for event in events]  # type: ignore[misc]


def ship_command(node: Node, log_group: str, *args: str) -> list[str]:
    return [
        str(LIFEGUARD_NODE),
        "ship",
        "--root",
        str(node.root),
        "--log-group",
        log_group,
        "--instance-id",
        INSTANCE,
        *args,
    ]


def ship(node: Node, log_group: str, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        ship_command(node, log_group, *args),
        env=node.env,
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )


def messages(node: Node, message: str) -> list[dict[str, Any]]:
    return [record for record in node.executor_records() if record["message"] == message]


def test_a_terminate_failure_whose_log_path_is_a_directory_is_shipped(
    node: Node, local: Any, log_group: str
) -> None:
    """The executor records the failure (exit 126, 'its log cannot be written: Is a directory'); the
    shipper must ship it like any TERMINATE failure, not crash on it every poll."""
    config = node.config("article-terminate")
    (node.actions / "nodeBootstrapped" / "fail-terminate.log").mkdir(parents=True)
    assert node.boot(config).returncode == 4
    result = ship(node, log_group, "--once")
    assert result.returncode == 0, result.stderr
    reports = shipped(local, log_group)
    assert [(r.script, r.outcome, r.exit_code) for r in reports][:1] == [("fail-terminate", "failed", 126)]


def test_a_running_shipper_ships_a_terminate_failure_whose_log_path_is_a_directory(
    node: Node, local: Any, log_group: str
) -> None:
    """Same as above under the long-running shipper (the way a node runs it): it must ship the TERMINATE
    failure within 2 s (DESIGN, Node CLI), not retry a crash forever while the instance is terminated."""
    ids = ("--cluster-id", "pcs_abc123de45", "--compute-node-group-id", "pcs_abcdef01")
    shipper = subprocess.Popen(
        ship_command(node, log_group, *ids), env=node.env, stdout=subprocess.PIPE, stderr=subprocess.PIPE
    )
    try:
        time.sleep(1.0)
        (node.actions / "nodeBootstrapped" / "fail-terminate.log").mkdir(parents=True)
        assert node.boot(node.config("article-terminate")).returncode == 4
        deadline = time.monotonic() + 6.0
        while time.monotonic() < deadline and not shipped(local, log_group):
            time.sleep(0.1)
    finally:
        shipper.terminate()
        shipper.wait(timeout=10)
    assert [r.script for r in shipped(local, log_group)][:1] == ["fail-terminate"]


def test_a_terminate_failure_that_filled_the_disk_is_shipped_within_two_seconds(
    node: Node, local: Any, log_group: str
) -> None:
    """A TERMINATE script that fills the disk (the boot's file-size limit stands in for it): the executor
    records the failure at once (exit 126); DESIGN: the shipper 'flushes within 2 s of a script ending, so
    a TERMINATE failure is shipped before the instance goes'."""
    import sys

    node.put_script("scripts/fill.sh", "#!/bin/bash\nhead -c 3000000 /dev/zero\n")
    config = node.script_config(
        {"nodeBootstrapped": [{"name": "fill", "scriptSource": {"scriptLocation": "scripts/fill.sh"}}]}
    )
    limited = [
        sys.executable,
        "-c",
        "import os, resource, sys; resource.setrlimit(resource.RLIMIT_FSIZE, (1 << 20, 1 << 20)); "
        "os.execv(sys.argv[1], sys.argv[1:])",
        str(LIFEGUARD_NODE),
    ]
    ids = ("--cluster-id", "pcs_abc123de45", "--compute-node-group-id", "pcs_abcdef01")
    shipper = subprocess.Popen(
        ship_command(node, log_group, *ids), env=node.env, stdout=subprocess.PIPE, stderr=subprocess.PIPE
    )
    try:
        time.sleep(1.0)
        assert node.boot(config, command=limited).returncode == 4
        booted = time.monotonic()
        failure = None
        while time.monotonic() - booted < 8.0 and failure is None:
            failure = next((r for r in shipped(local, log_group) if r.outcome == "failed"), None)
            time.sleep(0.05)
        took = time.monotonic() - booted
    finally:
        shipper.terminate()
        shipper.wait(timeout=10)
    assert failure is not None
    assert (failure.script, failure.exit_code) == ("fill", 126)
    assert took <= 2.0, f"the TERMINATE failure was shipped {took:.1f} s after the boot ended"


def test_reports_cloudwatch_rejects_for_their_timestamp_are_not_counted_as_delivered(
    node: Node, local: Any, log_group: str
) -> None:
    """PutLogEvents does not raise for events more than 2 h in the future (or 14 days old): it answers
    `rejectedLogEventsInfo` and drops them. A node whose clock ran 3 h fast at boot (then stepped back by
    chrony) keeps the TERMINATE reports it could not send then, and sends them and every later one once
    the clock is right (the sink's times follow a clock set back)."""
    from lifeguard.node.layout import NodeLayout
    from lifeguard.node.shipper import CloudWatchSink, RejectedEventsError, Shipper, ShipperIdentity

    skew = [3 * 3600.0]
    identity = ShipperIdentity("pcs_abc123de45", "pcs_abcdef01", INSTANCE, "lca-static-1")
    sink = CloudWatchSink(
        log_group, identity.stream, local.client("logs"), clock=lambda: time.time() + skew[0]
    )
    shipper = Shipper(NodeLayout(node.root), identity, sink)
    assert node.boot(node.config("article-terminate")).returncode == 4
    with pytest.raises(RejectedEventsError, match="is the node's clock right"):
        shipper.poll()
    assert len(shipper.state.pending) == 3  # kept, not counted as delivered
    skew[0] = 0.0  # chrony stepped the clock back
    assert shipper.poll() == 3
    assert node.boot(node.config("article-terminate")).returncode == 4
    assert shipper.poll() == 3
    assert len(shipped(local, log_group)) == 6, "reports were rejected by CloudWatch Logs and dropped"


def test_a_refusing_cloudwatch_logs_is_retried_with_backoff_not_hammered_at_the_poll_rate(
    node: Node, local: Any
) -> None:
    """A log group that does not exist (deleted, a typo in the enrolment) or a role without
    logs:PutLogEvents makes every delivery fail. Each poll then calls PutLogEvents and CreateLogStream
    again, 10 times a second, for the life of the node: on a 500-node cluster that is 5000
    CreateLogStream calls a second against an account quota of 50 TPS (throttling every other user of
    the API). A failing delivery must back off (exponentially, or at least to seconds)."""
    import threading

    from lifeguard.node.layout import NodeLayout
    from lifeguard.node.shipper import CloudWatchSink, Shipper, ShipperIdentity

    client = local.client("logs")
    calls: list[str] = []
    client.meta.events.register("before-call.cloudwatch-logs.*", lambda model, **_: calls.append(model.name))
    identity = ShipperIdentity("pcs_abc123de45", "pcs_abcdef01", INSTANCE, "lca-static-1")
    sink = CloudWatchSink("/pcs-lifeguard/no-such-group", identity.stream, client)
    shipper = Shipper(NodeLayout(node.root), identity, sink)
    assert node.boot(node.config("article-terminate")).returncode == 4
    stop = threading.Event()
    runner = threading.Thread(target=shipper.run, kwargs={"stop": stop.is_set})
    runner.start()
    time.sleep(5.0)
    stop.set()
    runner.join(timeout=10)
    attempts = calls.count("PutLogEvents")
    assert attempts <= 8, (
        f"{attempts} PutLogEvents and {calls.count('CreateLogStream')} CreateLogStream in 5 s"
    )


def test_a_pcs_agent_download_failure_is_shipped_within_two_seconds(
    node: Node, local: Any, log_group: str
) -> None:
    """In production the PCS agent runs the scripts and the shipper reads its executor.log. DESIGN's trap
    ('a moved bucket'): the TERMINATE script cannot be downloaded, so it has no script log at all. Its
    failure record must be shipped within 2 s (DESIGN, Node CLI), not held 5 s waiting for an end marker
    that will never come (with every record behind it)."""
    ids = ("--cluster-id", "pcs_abc123de45", "--compute-node-group-id", "pcs_abcdef01")
    shipper = subprocess.Popen(
        ship_command(node, log_group, *ids), env=node.env, stdout=subprocess.PIPE, stderr=subprocess.PIPE
    )
    try:
        time.sleep(1.0)
        node.actions.mkdir(parents=True)
        record = {
            "timestamp": time.strftime("%Y-%m-%dT%H:%M:%S.000000Z", time.gmtime()),
            "level": "ERROR",
            "message": "lifecycle script failed; terminating node",
            "stage": "nodeBootstrapped",
            "script": "mount-fsx",
            "on_error": "Terminate",
            "error": "failed to download s3://moved-bucket/scripts/mount-fsx.sh: NoSuchBucket",
        }
        (node.actions / "executor.log").write_text(json.dumps(record) + "\n")
        written = time.monotonic()
        failure = None
        while time.monotonic() - written < 8.0 and failure is None:
            failure = next(iter(shipped(local, log_group)), None)
            time.sleep(0.05)
        took = time.monotonic() - written
    finally:
        shipper.terminate()
        shipper.wait(timeout=10)
    assert failure is not None
    assert (failure.script, failure.on_error, failure.outcome) == ("mount-fsx", "TERMINATE", "failed")
    assert took <= 2.0, f"the TERMINATE failure was shipped {took:.1f} s after it was logged"


def test_a_rotated_executor_log_is_read_from_its_start(node: Node, local: Any, log_group: str) -> None:
    """executor.log rotated (logrotate's `create`: renamed, a new file made) while the shipper was not
    looking (stopped, restarting, or between two polls). The new file's records must all be shipped; the
    shipper must not seek into the new file at the old file's offset and lose its first records."""
    config = node.config("article-first-boot-every-boot")
    assert node.boot(config).returncode == 0
    assert ship(node, log_group, "--once").returncode == 0
    assert len(shipped(local, log_group)) == 3
    log = node.actions / "executor.log"
    log.rename(log.with_name("executor.log.1"))
    for _ in range(3):  # three reboots: the new file grows past where the old one ended
        assert node.boot(config).returncode == 0
    assert log.stat().st_size > log.with_name("executor.log.1").stat().st_size
    assert ship(node, log_group, "--once").returncode == 0
    after = [(r.boot, r.script, r.outcome) for r in shipped(local, log_group)[3:]]
    assert after == [
        (boot, script, outcome)
        for boot in (2, 3, 4)
        for script, outcome in (
            ("record-first-boot", "skipped"),
            ("record-every-boot", "succeeded"),
            ("ready-check", "skipped"),
        )
    ]
