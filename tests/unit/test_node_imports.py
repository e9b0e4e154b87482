"""`lifeguard-node boot` loads what a boot needs and no more: a reboot that reuses every cached script
imports neither the fetcher (urllib, ssl), the shipper, the drain step nor dataclasses (with inspect),
tempfile and shutil; a script that must be fetched
brings the fetcher in. Each boot runs in a fresh, isolated interpreter, as on a node."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any, ClassVar

import pytest

from lifeguard.node.executor import EXIT_COMPLETED, EXIT_TERMINATE, Executor, NodeIdentity
from lifeguard.node.fetch import ScriptFetcher
from lifeguard.node.layout import NodeLayout
from tests.conftest import NODE_PYTHON, REPO

LAYER = REPO / "layers" / "lifeguard"
FETCHER = ("lifeguard.node.fetch", "urllib.request", "ssl")
SHIPPER = ("lifeguard.node.shipper",)
DRAIN = ("lifeguard.node.drain",)
# What the boot's own records and file writes once cost every boot (about 20 ms on the node's Python 3.9),
# what argparse's help formatter imports to size itself (shutil, with bz2 and lzma: about 5 ms), and
# datetime and gzip (the time module stamps the log lines, zlib reads the PCS model: 2-5 ms), subprocess
# (scripts are spawned; it is the fallback's: 4-5 ms), threading (the shipper's: 1-2 ms), and argparse with
# gettext and locale and the whole command line's parser (a plain boot's is read without them: 8-10 ms).
# On the node's Python 3.9, math too (a shared library; the clock's stamps need none of it), which the
# urllib.parse of later Pythons imports.
HEAVY = (
    "argparse",
    "gettext",
    "locale",
    "lifeguard.node.options",
    "dataclasses",
    "inspect",
    "tempfile",
    "shutil",
    "bz2",
    "lzma",
    "datetime",
    "gzip",
    "subprocess",
    "threading",
)
SCRIPTS = 3
# S3 on a loopback port nothing listens on: a fetch fails at once, and never leaves the machine.
NO_S3 = {
    "AWS_ENDPOINT_URL_S3": "http://127.0.0.1:9",
    "AWS_ACCESS_KEY_ID": "testing",
    "AWS_SECRET_ACCESS_KEY": "testing",
    "AWS_DEFAULT_REGION": "us-east-1",
    "AWS_CONFIG_FILE": os.devnull,
    "AWS_SHARED_CREDENTIALS_FILE": os.devnull,
    "AWS_MAX_ATTEMPTS": "1",
    "AWS_EC2_METADATA_DISABLED": "true",
}
# The last line of its output says how the boot ended and which of the modules asked about it loaded.
PROBE = """
import json, sys
sys.path.insert(0, sys.argv[1])
from lifeguard.node.cli import main
exit_code = main(sys.argv[3:])
loaded = [name for name in json.loads(sys.argv[2]) if name in sys.modules]
print(json.dumps({"exit_code": exit_code, "loaded": loaded}))
"""


class RecordingScriptFetcher(ScriptFetcher):
    """Serves a script that appends its name to `ran.txt`, for any s3:// location (the first boot)."""

    scheme: ClassVar[str] = "s3"
    permissions: ClassVar[tuple[str, ...]] = ()

    def fetch_once(self, location: str, version_id: str | None) -> bytes:
        return b'#!/bin/bash\necho "$0" >> ran.txt\n'


def config(location: str = "s3://lifeguard-test-bucket/scripts/{index}.sh") -> dict[str, Any]:
    """EVERY_BOOT scripts under CACHE_ONCE: a reboot runs the cached copies of the same sources."""
    scripts = [
        {
            "name": f"every-boot-{index}",
            "scriptSource": {"scriptLocation": location.format(index=index)},
            "executionPolicy": "EVERY_BOOT",
        }
        for index in range(SCRIPTS)
    ]
    return {"scriptCachingPolicy": "CACHE_ONCE", "stages": {"nodeBootstrapped": scripts}}


def boot_in_fresh_python(
    root: Path,
    actions: dict[str, Any],
    asked_about: tuple[str, ...] = (*FETCHER, *SHIPPER, *DRAIN),
    python: str = sys.executable,
) -> dict[str, Any]:
    config_file = root.parent / f"{root.name}-config.json"
    config_file.write_text(json.dumps(actions))
    asked = json.dumps(asked_about)
    argv = ["boot", "--config", str(config_file), "--root", str(root), "--node-id", "lca-static-1"]
    done = subprocess.run(
        [python, "-I", "-c", PROBE, str(LAYER), asked, *argv],
        env={**os.environ, **NO_S3, "LIFEGUARD_FETCH_BACKOFF_SECONDS": "0"},
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    result: dict[str, Any] = json.loads(done.stdout.splitlines()[-1])
    return result


def records(root: Path, message: str) -> list[dict[str, Any]]:
    log = NodeLayout(root).executor_log
    return [r for r in map(json.loads, log.read_text().splitlines()) if r["message"] == message]


@pytest.fixture
def cached_node(tmp_path: Path) -> Path:
    """A node after its first boot: every script fetched (in this process) and cached."""
    root = tmp_path / "node"
    executor = Executor(config(), NodeLayout(root), NodeIdentity.resolve(node_id="lca-static-1"))
    executor.cache.fetchers["s3"] = RecordingScriptFetcher()
    assert executor.boot().exit_code == EXIT_COMPLETED
    return root


# This Python, and the node's (Python 3.9, as setup.sh makes it) when there is one.
PYTHONS = [
    pytest.param(sys.executable, id="this-python"),
    pytest.param(
        str(NODE_PYTHON),
        id="node-python",
        marks=pytest.mark.skipif(
            not NODE_PYTHON.exists(), reason="no .venv/node39: setup.sh found no python3.9"
        ),
    ),
]


@pytest.mark.parametrize("python", PYTHONS)
def test_a_cached_reboot_loads_neither_the_fetcher_nor_the_shipper(cached_node: Path, python: str) -> None:
    heavy = (*HEAVY, "math") if python == str(NODE_PYTHON) else HEAVY
    result = boot_in_fresh_python(cached_node, config(), (*FETCHER, *SHIPPER, *DRAIN, *heavy), python)
    assert result == {"exit_code": EXIT_COMPLETED, "loaded": []}
    assert len(records(cached_node, "Reusing cached script (CACHE_ONCE)")) == SCRIPTS
    assert len(records(cached_node, "script completed")) == 2 * SCRIPTS  # the first boot and this reboot
    assert len((cached_node / "ran.txt").read_text().splitlines()) == 2 * SCRIPTS


@pytest.mark.parametrize("first_boot", [True, False], ids=["first-boot", "reboot-with-a-moved-script"])
def test_a_script_that_must_be_fetched_loads_the_fetcher_on_the_spot(
    first_boot: bool, cached_node: Path, tmp_path: Path
) -> None:
    moved = config("s3://lifeguard-test-bucket/moved/{index}.sh")  # no cached copy is of this source
    root = tmp_path / "new-node" if first_boot else cached_node
    result = boot_in_fresh_python(root, moved)
    assert result == {"exit_code": EXIT_TERMINATE, "loaded": list(FETCHER)}
    # The fetch was made, failed its three tries, and the boot reported it as PCS does.
    [failure] = records(root, "lifecycle script failed; terminating node")
    assert failure["script"] == "every-boot-0"
    assert failure["error"].startswith("cannot fetch s3://lifeguard-test-bucket/moved/0.sh after 3 attempts")
    assert "127.0.0.1:9" in failure["error"]
    assert failure["exit_code"] is None


# `python -m lifeguard.node` with its `main` replaced: what the collector is when `main` runs, and after an
# import of the CLI that fails.
ENTRY_PROBE = """
import gc, runpy, sys
sys.path.insert(0, sys.argv[1])
import lifeguard.node.cli as cli
cli.main = lambda: print("main", gc.isenabled()) or 0
try:
    runpy.run_module("lifeguard.node", run_name="__main__")
except SystemExit as done:
    print("exit", done.code)
sys.modules["lifeguard.node.cli"] = None  # the next import of it fails
try:
    runpy.run_module("lifeguard.node", run_name="__main__")
except ImportError:
    print("import failed", gc.isenabled())
"""


def test_the_entry_point_collects_garbage_again_once_its_imports_are_done() -> None:
    """The bundle's `__main__` turns the collector off while the CLI loads, and on again before `main`,
    even when the import fails: `ship` and the drain watcher run for the node's life."""
    done = subprocess.run(
        [sys.executable, "-I", "-c", ENTRY_PROBE, str(LAYER)],
        capture_output=True,
        text=True,
        timeout=60,
        check=True,
    )
    assert done.stdout.splitlines() == ["main True", "exit 0", "import failed True"]


# `python -m lifeguard.node ARGS` with an exit handler, as any module's teardown, that says it ran.
TEARDOWN_PROBE = """
import atexit, runpy, sys
sys.path.insert(0, sys.argv[1])
atexit.register(lambda: print("teardown", flush=True))
sys.argv = ["lifeguard-node", *sys.argv[2:]]
runpy.run_module("lifeguard.node", run_name="__main__")
"""


@pytest.mark.parametrize("python", PYTHONS)
def test_a_boot_process_ends_without_the_interpreters_teardown_its_output_whole(
    cached_node: Path, tmp_path: Path, python: str
) -> None:
    """A boot's process skips Python's teardown of its modules (7 ms on 3.9): its summary, its errors and
    its exit status are all there, through pipes. Another command ends as any process does."""
    config_file = tmp_path / "config.json"
    config_file.write_text(json.dumps(config()))
    boot = ["boot", "--config", str(config_file), "--root", str(cached_node), "--json"]

    def run(*argv: str) -> subprocess.CompletedProcess[str]:
        command = [python, "-I", "-c", TEARDOWN_PROBE, str(LAYER), *argv]
        return subprocess.run(command, capture_output=True, text=True, timeout=60, check=False)

    done = run(*boot)
    assert (done.returncode, done.stderr) == (EXIT_COMPLETED, "")
    assert [r["outcome"] for r in json.loads(done.stdout)["runs"]] == ["succeeded"] * SCRIPTS
    config_file.write_text('{"stages": {"nodeBootstrapped": [{"name": "x"}]}}')
    refused = run(*boot)
    assert (refused.returncode, refused.stdout) == (64, "")
    assert refused.stderr.startswith(f"lifeguard-node: {config_file}: nothing was run; invalid")
    assert run("--version").stdout.splitlines()[-1] == "teardown"


# A boot with `compile()` recording what it compiles, other than a module's source as it is imported.
COMPILE_PROBE = """
import builtins, json, sys
sys.path.insert(0, sys.argv[1])
compiled, compile_ = [], builtins.compile
def recording(source, filename, *args, **kwargs):
    if not str(filename).endswith(".py"):
        compiled.append(str(source)[:80])
    return compile_(source, filename, *args, **kwargs)
builtins.compile = recording
from lifeguard.node.cli import main
exit_code = main(sys.argv[2:])
print(json.dumps({"exit_code": exit_code, "compiled": compiled}))
"""


@pytest.mark.parametrize("python", PYTHONS)
def test_a_cached_reboot_compiles_no_text(cached_node: Path, tmp_path: Path, python: str) -> None:
    """A process's first `compile()` sets up the syntax-tree types (about 3 ms on the node's Python 3.9):
    typing compiles each annotation of a NamedTuple, or of a Union, made at run time. The node's tuples are
    `lifeguard.named_tuple`'s, which compile nothing."""
    config_file = tmp_path / "config.json"
    config_file.write_text(json.dumps(config()))
    argv = ["boot", "--config", str(config_file), "--root", str(cached_node)]
    done = subprocess.run(
        [python, "-I", "-c", COMPILE_PROBE, str(LAYER), *argv],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout.splitlines()[-1]) == {"exit_code": EXIT_COMPLETED, "compiled": []}
