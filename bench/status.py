"""`lifeguard status` over many groups: its reads made a few groups at a time (`STATUS_READERS`) against
the same reads one group after another, each call given a network's round trip.

Each group's row is three round trips (its last audit entry, its tags, its ledger when a later entry hides a
change); against AWS they wait on the network, which loopback does not. So every call here waits
`--rtt-ms` (default 30 ms, a laptop to a region) before it is sent, and both runs read the same groups of
moto and the local PCS, alternating, in one process. The ratio is the baseline's time over the
candidate's (higher is better).

    .venv/bin/python bench/status.py [--groups 300] [--rtt-ms 30] [--rounds 2] [--json]
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from typing import Any

from lifeguard.aws.clients import aws_client
from lifeguard.group_state import GroupState, KnownConfig
from lifeguard.store.groups import GroupStore
from lifeguard_cli import operate
from lifeguard_cli.local import LocalPcs, local_aws
from lifeguard_cli.local.stack import create_stack

CLUSTER = "pcs_abc123de45"


def _timed(table: str, client: Any, readers: int) -> tuple[float, int]:
    operate.STATUS_READERS = readers
    operator = operate.Operator(table, client=client, default_mode="notify")
    started = time.perf_counter()
    rows = operator.status()
    return time.perf_counter() - started, len(rows)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--groups", type=int, default=300, help="groups Lifeguard knows (default 300)")
    parser.add_argument("--rtt-ms", type=float, default=30.0, help="each call's round trip (default 30)")
    parser.add_argument("--rounds", type=int, default=2, help="runs of each, alternating (default 2)")
    parser.add_argument("--json", action="store_true", help="the figures as JSON")
    args = parser.parse_args()
    if args.groups < 1 or args.rounds < 1 or args.rtt_ms < 0:
        parser.error("--groups and --rounds must be at least 1, --rtt-ms at least 0")
    pcs = LocalPcs(update_seconds=0)
    pcs.add_cluster("bench", cluster_id=CLUSTER)
    candidate, baseline = [], []
    readers = operate.STATUS_READERS
    with local_aws(pcs, separate_process=True) as aws:
        stack = create_stack(aws.client("dynamodb"), aws.client("events"), aws.client("sqs"), "bench-status")
        store = GroupStore(aws.client("dynamodb"), stack.table)
        print(f"  {args.groups} groups in the local PCS and Lifeguard's table …", file=sys.stderr)
        for n in range(args.groups):
            group_id = f"pcs_g{n:07d}"
            made = pcs.add_compute_node_group(CLUSTER, f"group-{n}", group_id=group_id, tags={})
            state = GroupState(cluster_id=CLUSTER, group_id=group_id)
            state.config = KnownConfig(modified_at=1, fingerprint="a" * 64, arn=made["arn"], checked_at=0)
            store.save(state)
        os.environ.update(aws.environ())  # test keys and the region, as the operator's shell would have
        endpoints = {"pcs": aws.pcs_server.endpoint_url}

        def client(service: str) -> Any:
            made = aws_client(service, endpoints.get(service, aws.moto.endpoint_url))
            wait = args.rtt_ms / 1000
            made.meta.events.register("before-send", lambda **_: time.sleep(wait), unique_id="bench-rtt")
            return made

        for number in range(1, args.rounds + 1):
            print(f"  round {number}/{args.rounds} …", file=sys.stderr)
            baseline.append(_timed(stack.table, client, 1)[0])
            seconds, rows = _timed(stack.table, client, readers)
            candidate.append(seconds)
            assert rows == args.groups, rows
    operate.STATUS_READERS = readers
    ratios = [b / c for b, c in zip(baseline, candidate, strict=True)]
    figures = {
        "groups": args.groups,
        "rtt_ms": args.rtt_ms,
        "readers": readers,
        "candidate_s": candidate,
        "baseline_s": baseline,
        "ratios": ratios,
    }
    if args.json:
        print(json.dumps(figures, indent=2))
        return 0
    print(f"status of {args.groups} groups, every call {args.rtt_ms:g} ms away (moto and the local PCS):")
    print(f"{'run':>5}  {'one group at a time':>20}  {f'{readers} at a time':>12}  {'ratio':>6}")
    for number, (b, c, r) in enumerate(zip(baseline, candidate, ratios, strict=True), 1):
        print(f"{number:>5}  {b:>19.2f}s  {c:>11.2f}s  {r:>5.2f}x")
    return 0


if __name__ == "__main__":
    sys.exit(main())
