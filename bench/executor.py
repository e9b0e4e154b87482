"""The executor's cost per script, against bash running the same cached scripts, measured in one run.

A reboot of a node whose 20 EVERY_BOOT scripts are cached (CACHE_ONCE) is what the executor adds to every
boot. The baseline is a bash loop running the same 20 cached no-op scripts; the difference divided by 20 is
the executor's own per-script overhead (target: under 5 ms). Rounds interleave so noise hits both sides.
"""

from __future__ import annotations

import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from lifeguard.node.executor import Executor, NodeIdentity
from lifeguard.node.fetch import ScriptFetcher
from lifeguard.node.layout import NodeLayout

SCRIPTS = 20
ROUNDS = 15
NO_OP = b"#!/bin/bash\n:\n"


class NoOpFetcher(ScriptFetcher):
    """Serves the no-op script for any location (the first boot fills the cache from it)."""

    scheme = "s3"
    permissions = ()

    def fetch_once(self, location: str, version_id: str | None) -> bytes:
        return NO_OP


def main() -> int:
    config = {
        "stages": {
            "nodeBootstrapped": [
                {
                    "name": f"noop-{index:02d}",
                    "scriptSource": {"scriptLocation": f"s3://bench-bucket/noop-{index:02d}.sh"},
                    "executionPolicy": "EVERY_BOOT",
                }
                for index in range(SCRIPTS)
            ]
        }
    }
    with tempfile.TemporaryDirectory() as directory:
        layout = NodeLayout(Path(directory))
        executor = Executor(config, layout, NodeIdentity.resolve(), fetchers={"s3": NoOpFetcher()})
        assert executor.boot().exit_code == 0  # first boot: fetch and cache
        cached = [str(layout.cached_script("nodeBootstrapped", f"noop-{i:02d}")) for i in range(SCRIPTS)]
        bash_loop = ["bash", "-c", 'for script in "$@"; do "$script"; done', "bash", *cached]
        executor_times, bash_times = [], []
        for _ in range(ROUNDS):
            started = time.perf_counter()
            assert executor.boot().exit_code == 0
            executor_times.append(time.perf_counter() - started)
            started = time.perf_counter()
            subprocess.run(bash_loop, check=True)
            bash_times.append(time.perf_counter() - started)
    executor_s, bash_s = statistics.median(executor_times), statistics.median(bash_times)
    overhead_ms = (executor_s - bash_s) / SCRIPTS * 1000
    print(f"{SCRIPTS} cached no-op scripts, median of {ROUNDS} interleaved rounds")
    print(f"  executor reboot      {executor_s * 1000:8.1f} ms")
    print(f"  bash loop (baseline) {bash_s * 1000:8.1f} ms")
    print(f"  ratio                {executor_s / bash_s:8.2f}x")
    print(
        f"  overhead per script  {overhead_ms:8.2f} ms  "
        f"(target < 5 ms: {'met' if overhead_ms < 5 else 'NOT met'})"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
