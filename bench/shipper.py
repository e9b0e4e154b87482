"""How soon a failed script's report is in CloudWatch Logs after the script ends, against the delivery alone.

Each round boots a node (`lifeguard-node boot`, a real process, the article's TERMINATE failure fetched from
moto's S3) under a running shipper (`lifeguard-node ship`, a real process, its default poll interval), and
times from the moment the failed run's record is in the node's executor.log (watched every 2 ms) to the
moment its report can be read from moto's CloudWatch Logs (GetLogEvents every 10 ms). Beside it, in the
same round, the baseline: one PutLogEvents of a report of the same size from a warm client, read back the
same way, which is what any delivery costs here. Prints the median and worst of each and their ratio
(lower is better); the goal is half a second at worst.

    .venv/bin/python bench/shipper.py [--rounds 10] [--json]
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import threading
import time
import uuid
from pathlib import Path
from typing import Any

from lifeguard.node.defaults import POLL_INTERVAL_SECONDS
from lifeguard_cli.local import local_aws

ROOT = Path(__file__).resolve().parent.parent
NODE = Path(sys.executable).parent / "lifeguard-node"
CLUSTER, GROUP = "pcs_abc123de45", "pcs_abcdef01"
GOAL_SECONDS = 0.5
FAILING = "#!/bin/bash\necho 'intentional failure for verification'\nexit 1\n"
READ_EVERY, WATCH_EVERY = 0.010, 0.002


def _seen(logs: Any, group: str, stream: str, wanted: str) -> bool:
    try:
        events = logs.get_log_events(logGroupName=group, logStreamName=stream, startFromHead=True)["events"]
    except logs.exceptions.ResourceNotFoundException:
        return False
    return any(wanted in event["message"] for event in events)


def _until_seen(logs: Any, group: str, stream: str, wanted: str, timeout: float = 30.0) -> float:
    """The moment `wanted` can be read from the stream (polled every READ_EVERY)."""
    deadline = time.monotonic() + timeout
    while not _seen(logs, group, stream, wanted):
        if time.monotonic() > deadline:
            raise SystemExit(f"bench/shipper.py: {wanted!r} not in {stream} after {timeout:.0f} s")
        time.sleep(READ_EVERY)
    return time.monotonic()


def _watch_failure(executor_log: Path, found: list[float], stop: threading.Event) -> None:
    """Note the moment the failed run's record is in executor.log."""
    while not stop.is_set():
        try:
            text = executor_log.read_text()
        except FileNotFoundError:
            text = ""
        if '"script":"fail-terminate"' in text and '"exit_code":1' in text:
            found.append(time.monotonic())
            return
        time.sleep(WATCH_EVERY)


def _round(aws: Any, env: dict[str, str], config: Path, group: str, scratch: Path) -> tuple[float, float]:
    """(seconds from the failure's record to its report in CloudWatch Logs, seconds of a bare delivery)."""
    logs = aws.client("logs")
    instance = f"i-{uuid.uuid4().hex[:17]}"
    root = scratch / instance / "root"
    (root / "var/lib").mkdir(parents=True)
    stream = f"{CLUSTER}/{instance}"
    shipper = subprocess.Popen(
        [str(NODE), "ship", "--root", str(root), "--log-group", group, "--instance-id", instance,
         "--cluster-id", CLUSTER, "--compute-node-group-id", GROUP],
        env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True,
    )  # fmt: skip
    try:
        time.sleep(1.0)  # the shipper is up and tailing before the node boots, as on a node
        found: list[float] = []
        stop = threading.Event()
        watcher = threading.Thread(target=_watch_failure, args=(root / _EXECUTOR_LOG, found, stop))
        watcher.start()
        boot = subprocess.run(
            [str(NODE), "boot", "--config", str(config), "--root", str(root), "--node-id", "lca-static-1",
             "--cluster-id", CLUSTER, "--compute-node-group-id", GROUP,
             "--compute-node-group-name", "lca-static"],
            env=env, capture_output=True, text=True, timeout=120, check=False,
        )  # fmt: skip
        if boot.returncode != 4:
            raise SystemExit(f"bench/shipper.py: the boot exited {boot.returncode}:\n{boot.stderr[-2000:]}")
        seen = _until_seen(logs, group, stream, '"outcome":"failed"')
        stop.set()
        watcher.join()
        if not found:
            raise SystemExit("bench/shipper.py: the failed run's record never reached executor.log")
        shipped = seen - found[0]
    finally:
        shipper.terminate()
        shipper.wait(timeout=10)
    # The baseline: a report-sized event put from a warm client, read back the same way.
    bare_stream = f"{stream}-bare"
    logs.create_log_stream(logGroupName=group, logStreamName=bare_stream)
    marker = uuid.uuid4().hex
    message = json.dumps({"marker": marker, "padding": "x" * 600})
    put = time.monotonic()
    logs.put_log_events(
        logGroupName=group,
        logStreamName=bare_stream,
        logEvents=[{"timestamp": int(time.time() * 1000), "message": message}],
    )
    return shipped, _until_seen(logs, group, bare_stream, marker) - put


_EXECUTOR_LOG = "var/log/amazon/pcs/lifecycle/actions/executor.log"


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rounds", type=int, default=10, help="boots to time (default 10)")
    parser.add_argument("--json", action="store_true", help="the figures as JSON")
    args = parser.parse_args()
    if args.rounds < 1:
        parser.error("--rounds must be at least 1")
    shipped: list[float] = []
    bare: list[float] = []
    with local_aws(separate_process=True) as aws, tempfile.TemporaryDirectory(prefix="bench-ship-") as tmp:
        scratch = Path(tmp)
        s3 = aws.client("s3")
        bucket = f"bench-scripts-{uuid.uuid4().hex[:8]}"
        s3.create_bucket(Bucket=bucket)
        s3.put_object(Bucket=bucket, Key="scripts/fail.sh", Body=FAILING.encode())
        config = scratch / "config.json"
        script = {
            "name": "fail-terminate",
            "scriptSource": {"scriptLocation": f"s3://{bucket}/scripts/fail.sh"},
        }
        config.write_text(json.dumps({"stages": {"nodeBootstrapped": [{**script, "onError": "TERMINATE"}]}}))
        group = f"/pcs-lifeguard/bench-{uuid.uuid4().hex[:8]}"
        aws.client("logs").create_log_group(logGroupName=group)
        env = {**os.environ, **aws.environ(), "AWS_ENDPOINT_URL_S3": aws.moto.endpoint_url}
        for number in range(1, args.rounds + 1):
            print(f"  round {number}/{args.rounds} …", file=sys.stderr)
            candidate, baseline = _round(aws, env, config, group, scratch)
            shipped.append(candidate)
            bare.append(baseline)
    figures = {
        "rounds": args.rounds,
        "poll_interval_s": POLL_INTERVAL_SECONDS,
        "shipped_median_s": statistics.median(shipped),
        "shipped_max_s": max(shipped),
        "bare_median_s": statistics.median(bare),
        "ratio_median": statistics.median(s / b for s, b in zip(shipped, bare, strict=True)),
        "goal_max_s": GOAL_SECONDS,
    }
    if args.json:
        print(json.dumps(figures, indent=2))
        return 0
    print(
        "a failed script's report in CloudWatch Logs after the script ended, against one PutLogEvents\n"
        f"read back the same way (moto, {args.rounds} rounds, the shipper polling every"
        f" {POLL_INTERVAL_SECONDS} s)\n"
    )
    print(f"{'':28}{'median':>10}{'worst':>10}")
    print(f"{'the shipper':28}{figures['shipped_median_s']:>9.3f}s{figures['shipped_max_s']:>9.3f}s")
    print(f"{'a bare delivery':28}{figures['bare_median_s']:>9.3f}s{max(bare):>9.3f}s")
    print(f"\nratio (shipper / bare, median of the rounds): {figures['ratio_median']:.1f}x")
    met = "met" if figures["shipped_max_s"] <= GOAL_SECONDS else "NOT met"
    print(f"goal: {GOAL_SECONDS} s at worst: {met}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
