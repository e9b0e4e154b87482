"""How much Lifeguard's tolerant parsing costs over plain `json.loads`, measured side by side in one run.

A subscription batch carries up to 10,000 log events; the scaling-events Lambda parses every one, so the
per-record overhead over the unavoidable JSON decode is what decides its duration. Prints ratios (lower
is better), each the median of interleaved rounds so machine noise hits both sides alike. The handler reads
a record in the form PCS writes it without `json.loads` (`read_scaling_log_message`), and ignores the
REGISTERED quarter of these unvalidated.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
from collections.abc import Callable
from pathlib import Path

from lifeguard.lifecycle import NodeLifecycleActions
from lifeguard.scaling_log import parse_scaling_log_record, read_scaling_log_message

ROUNDS = 7
RECORDS = 10_000
EVENTS = Path(__file__).resolve().parent.parent / "events"


def _records(*, subnet: bool = False) -> list[str]:
    """Records of four kinds in turn; with `subnet`, each with the three details the article's records
    carry (the form the handler reads without `json.loads`)."""
    kinds = [
        ("LAUNCHED", "MAINTAIN_MIN_CAPACITY"),
        ("REGISTERED", "REGISTER_SUCCESS"),
        ("TERMINATED", "BOOTSTRAP_FAILED"),
        ("ACTIVE", "BOOTSTRAP_SUCCESS"),
    ]
    lines = []
    for i in range(RECORDS):
        status, reason = kinds[i % len(kinds)]
        lines.append(
            json.dumps(
                {
                    "resource_id": "pcs_abc123de45",
                    "resource_type": "PCS_CLUSTER",
                    "event_timestamp": 1792544247000 + i * 1000,
                    "compute_node_group_id": "pcs_abcdef01",
                    "scheduler_node_id": f"lca-static-{i % 16}",
                    "status_code": status,
                    "reason_code": reason,
                    "description": "bench",
                    "details": {
                        "instance_id": f"i-{i:017x}",
                        "instance_type": "c7i.large",
                        **({"subnet_id": "subnet-1"} if subnet else {}),
                    },
                }
            )
        )
    return lines


def _time(work: Callable[[], object]) -> float:
    start = time.perf_counter()
    work()
    return time.perf_counter() - start


def _ratio(name: str, candidate: Callable[[], object], baseline: Callable[[], object], unit: int) -> None:
    ratios, per_item = [], []
    for _ in range(ROUNDS):
        base = _time(baseline)
        cand = _time(candidate)
        ratios.append(cand / base)
        per_item.append(cand / unit * 1e6)
    print(f"{name:<44} {statistics.median(ratios):>7.2f}x  {statistics.median(per_item):>8.1f} µs/item")


def main() -> int:
    argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    ).parse_args()  # no options: --help says what it measures
    lines = _records()
    config_text = (EVENTS / "configs" / "article-first-boot-every-boot.json").read_text()
    configs = [config_text] * 2_000
    print(f"{'what (candidate vs json.loads baseline)':<44} {'ratio':>8}  {'candidate':>14}")
    _ratio(
        f"scaling-log records ({RECORDS:,})",
        lambda: [parse_scaling_log_record(line) for line in lines],
        lambda: [json.loads(line) for line in lines],
        RECORDS,
    )
    written = _records(subnet=True)
    _ratio(
        f"the same as the handler reads them ({RECORDS:,})",
        lambda: [read_scaling_log_message(line) for line in written],
        lambda: [json.loads(line) for line in written],
        RECORDS,
    )
    garbage = ["{not json"] * RECORDS
    _ratio(
        f"malformed records ({RECORDS:,})",
        lambda: [parse_scaling_log_record(line) for line in garbage],
        lambda: [_loads_or_none(line) for line in garbage],
        RECORDS,
    )
    _ratio(
        f"lifecycle configs, full validation ({len(configs):,})",
        lambda: [NodeLifecycleActions.from_api(json.loads(text)) for text in configs],
        lambda: [json.loads(text) for text in configs],
        len(configs),
    )
    return 0


def _loads_or_none(text: str) -> object:
    try:
        return json.loads(text)
    except ValueError:
        return None


if __name__ == "__main__":
    sys.exit(main())
