"""The executor's cost per script, against bash running the same cached scripts, measured in one run.

A reboot of a node whose 20 EVERY_BOOT scripts are cached (CACHE_ONCE) is what the executor adds to every
boot. The baseline is a bash loop running the same 20 cached no-op scripts; the difference divided by 20 is
the executor's own per-script overhead (target: under 5 ms). It is measured for the executor's reboot in
this process, and for the whole `lifeguard-node boot` process (Python's start, the imports, the config
check) against the bash process: the node bundle as a node runs it, on the node's Python (3.9,
.venv/node39) when there is one, compiled and sources only; and the layer's directory on this Python (the
interpreter the project's venv was made from: the venv's own start-up hooks are not a node's).
Rounds interleave so noise hits every side alike.
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from lifeguard.node.executor import Executor, NodeIdentity
from lifeguard.node.fetch import ScriptFetcher
from lifeguard.node.layout import NodeLayout
from lifeguard_cli.node_bundle import build_node_bundle

SCRIPTS = 20
ROUNDS = 15
TARGET_MS = 5.0
NO_OP = b"#!/bin/bash\n:\n"
REPO = Path(__file__).resolve().parents[1]
NODE_PYTHON = REPO / ".venv" / "node39" / "bin" / "python"
# This Python without the project's venv: the venv's site loads the editable install's finder at every start
# (about 25 ms, a node has no such thing). A venv's python is a link to the interpreter it was made from.
BASE_PYTHON = str(Path(sys.executable).resolve())
# `python -I` ignores PYTHONPATH: the layer goes first on sys.path by hand, as the zipapp puts itself there,
# and the process ends as `python -m lifeguard.node` ends it (`node/__main__.py`).
NODE_MAIN = (
    f"import sys; sys.path.insert(0, {str(REPO / 'layers' / 'lifeguard')!r}); "
    "from lifeguard.node.cli import end_process, main; end_process(main())"
)


class NoOpFetcher(ScriptFetcher):
    """Serves the no-op script for any location (the first boot fills the cache from it)."""

    scheme = "s3"
    permissions = ()

    def fetch_once(self, location: str, version_id: str | None) -> bytes:
        return NO_OP


def _timed(run: list[float], command: list[str]) -> None:
    started = time.perf_counter()
    subprocess.run(command, check=True, stdout=subprocess.DEVNULL)
    run.append(time.perf_counter() - started)


def _line(label: str, seconds: float, bash_s: float) -> str:
    overhead_ms = (seconds - bash_s) / SCRIPTS * 1000
    verdict = "met" if overhead_ms < TARGET_MS else "NOT met"
    return (
        f"  {label:<29} {seconds * 1000:8.1f} ms  ratio {seconds / bash_s:5.2f}x  "
        f"overhead per script {overhead_ms:6.2f} ms  (target < {TARGET_MS:g} ms: {verdict})"
    )


def main() -> int:
    argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    ).parse_args()  # no options: --help says what it measures
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
        config_file = Path(directory) / "config.json"
        config_file.write_text(json.dumps(config))
        boot_args = ["boot", "--config", str(config_file), "--root", directory]
        processes = {f"layer, this Python {_version(BASE_PYTHON)}": [BASE_PYTHON, "-I", "-c", NODE_MAIN]}
        if NODE_PYTHON.exists():
            bundle = Path(directory) / "lifeguard-node.pyz"
            sources_only = Path(directory) / "sources-only.pyz"
            build_node_bundle(bundle, python=str(NODE_PYTHON))
            build_node_bundle(sources_only, python="")
            node = f"Python {_version(str(NODE_PYTHON))}"
            processes[f"bundle, node's {node}"] = [str(NODE_PYTHON), "-I", str(bundle)]
            processes["  same, sources only"] = [str(NODE_PYTHON), "-I", str(sources_only)]
        executor_times: list[float] = []
        bash_times: list[float] = []
        process_times: dict[str, list[float]] = {label: [] for label in processes}
        for _ in range(ROUNDS):
            started = time.perf_counter()
            assert executor.boot().exit_code == 0
            executor_times.append(time.perf_counter() - started)
            for label, command in processes.items():
                _timed(process_times[label], [*command, *boot_args])
            _timed(bash_times, bash_loop)
    bash_s = statistics.median(bash_times)
    print(f"{SCRIPTS} cached no-op scripts, median of {ROUNDS} interleaved rounds")
    print(f"  {'bash loop (baseline)':<29} {bash_s * 1000:8.1f} ms")
    print(_line("executor reboot", statistics.median(executor_times), bash_s))
    print("  lifeguard-node boot, the whole process (python -I), against the bash process:")
    for label in processes:
        print(_line(label, statistics.median(process_times[label]), bash_s))
    return 0


def _version(python: str) -> str:
    done = subprocess.run(
        [python, "-I", "-c", "import platform; print(platform.python_version())"],
        capture_output=True,
        text=True,
        check=True,
    )
    return done.stdout.strip()


if __name__ == "__main__":
    sys.exit(main())
