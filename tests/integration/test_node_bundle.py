"""The node bundle: one reproducible file that runs on the node's Python 3.9, and the lifecycle script
that installs it and starts the shipper as a service."""

from __future__ import annotations

import contextlib
import gzip
import hashlib
import http.server
import io
import json
import os
import shlex
import signal
import stat
import subprocess
import sys
import threading
import time
import uuid
import zipfile
from pathlib import Path
from typing import Any

import pytest

from lifeguard.lifecycle_rules import find_problems
from lifeguard.node_report import NodeReport, parse_node_report
from lifeguard_cli.node_bundle import BUNDLE_FILES, LAYER, build_node_bundle, compiled
from tests.conftest import EVENTS, NODE_PYTHON, load_event
from tests.integration.conftest import Node

pytestmark = pytest.mark.integration
INSTALL_SHIPPER = EVENTS / "node" / "install-shipper.sh"
PYTHON39 = Path(os.environ.get("LIFEGUARD_PYTHON39", "/root/.pyenv/versions/3.9.18/bin/python3.9"))

needs_node_python = pytest.mark.skipif(
    not NODE_PYTHON.exists(), reason="no Python 3.9 venv (.venv/node39): setup.sh found no python3.9"
)


@pytest.fixture(scope="module")
def bundle(tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("dist") / "lifeguard-node.pyz"
    build_node_bundle(path)
    return path


def test_the_bundle_is_reproducible_and_carries_its_checksum(bundle: Path, tmp_path: Path) -> None:
    again = tmp_path / "lifeguard-node.pyz"
    digest = build_node_bundle(again)
    assert again.read_bytes() == bundle.read_bytes()
    assert digest == hashlib.sha256(bundle.read_bytes()).hexdigest()
    assert (tmp_path / "lifeguard-node.pyz.sha256").read_text() == f"{digest}  lifeguard-node.pyz\n"
    assert bundle.read_bytes().startswith(b"#!/usr/bin/env python3\n")
    assert stat.S_IMODE(bundle.stat().st_mode) == 0o755


def test_the_bundle_is_the_same_built_on_windows(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """zipfile notes the system that made each entry (Windows 0, others 3): the bundle's sha256 would
    depend on who ran `sam build`."""
    here = build_node_bundle(tmp_path / "here.pyz", python="")
    monkeypatch.setattr(sys, "platform", "win32")
    assert build_node_bundle(tmp_path / "windows.pyz", python="") == here


@needs_node_python
def test_a_set_constant_compiles_to_the_same_bytes_at_every_build() -> None:
    """Python 3.9 marshals a set constant in its strings' hash order: the compiler's hash seed must be
    fixed, or the bundle's checksum, which nodes verify, would change at every build of one source."""
    source = [("m.py", b"def stage(name):\n    return name in {'nodeBootstrapped', 'nodeReady', 'x', 'y'}\n")]
    assert len({compiled(str(NODE_PYTHON), source)["m.py"] for _ in range(6)}) == 1


def test_the_bundle_checks_configs_with_the_layers_own_rules(bundle: Path) -> None:
    with zipfile.ZipFile(bundle) as archive:
        names = set(archive.namelist())
        for name in ("lifeguard/lifecycle_rules.py", "lifeguard/pcs_model.py"):
            assert archive.read(name) == (LAYER / name).read_bytes()
        model = archive.read("lifeguard/data/pcs/2023-02-10/service-2.json.gz")
    assert gzip.decompress(model) == gzip.decompress(
        (LAYER / "lifeguard/data/pcs/2023-02-10/service-2.json.gz").read_bytes()
    )
    sources = {"__main__.py", *BUNDLE_FILES}
    compiled = {f"{name}c" for name in sources if name.endswith(".py")} if NODE_PYTHON.exists() else set()
    assert names == sources | compiled
    assert "lifeguard/lifecycle.py" not in names  # the Lambdas' record classes stay in the layer


def _module_file(python: str, bundle: Path) -> str:
    done = subprocess.run(
        [
            python,
            "-I",
            "-c",
            "import sys; sys.path.insert(0, sys.argv[1]); "
            "import lifeguard.node.executor as module; print(module.__file__)",
            str(bundle),
        ],
        capture_output=True,
        text=True,
        check=True,
    )
    return done.stdout.strip()


@needs_node_python
def test_the_node_runs_the_bundle_compiled_and_another_python_from_its_sources(
    bundle: Path, tmp_path: Path
) -> None:
    assert _module_file(str(NODE_PYTHON), bundle).endswith("lifeguard/node/executor.pyc")
    assert _module_file(sys.executable, bundle).endswith("lifeguard/node/executor.py")
    sources_only = tmp_path / "sources.pyz"
    build_node_bundle(sources_only, python="")
    with zipfile.ZipFile(sources_only) as archive:
        assert not [name for name in archive.namelist() if name.endswith(".pyc")]
    assert _module_file(str(NODE_PYTHON), sources_only).endswith("lifeguard/node/executor.py")


def run_bundle(python: Path, bundle: Path, node: Node, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [str(python), str(bundle), *args],
        env=node.env,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )


@needs_node_python
def test_the_bundle_boots_and_ships_on_python_3_9(bundle: Path, node: Node, local: Any) -> None:
    version = subprocess.run(
        [str(NODE_PYTHON), "-c", "import sys; print(sys.version_info[:2])"],
        capture_output=True,
        text=True,
        check=True,
    )
    assert version.stdout.strip() == "(3, 9)"
    config = node.root.parent / "config.json"
    config.write_text(json.dumps(node.config("article-stop-sequence")))
    booted = run_bundle(
        NODE_PYTHON,
        bundle,
        node,
        "boot",
        "--config",
        str(config),
        "--root",
        str(node.root),
        "--cluster-id",
        "pcs_abc123de45",
        "--compute-node-group-id",
        "pcs_abcdef01",
    )
    assert booted.returncode == 3, booted.stderr
    assert "fail-stop-sequence" in booted.stdout
    group = f"/lifeguard/bundle-{uuid.uuid4().hex[:6]}"
    local.client("logs").create_log_group(logGroupName=group)
    shipped = run_bundle(
        NODE_PYTHON,
        bundle,
        node,
        "ship",
        "--root",
        str(node.root),
        "--log-group",
        group,
        "--instance-id",
        "i-0123456789abcdef0",
        "--once",
    )
    assert shipped.returncode == 0, shipped.stderr
    events = local.client("logs").get_log_events(
        logGroupName=group, logStreamName="pcs_abc123de45/i-0123456789abcdef0", startFromHead=True
    )["events"]
    reports = [parse_node_report(event["message"]) for event in events]
    assert [(r.script, r.outcome) for r in reports if isinstance(r, NodeReport)] == [
        ("fail-stop-sequence", "failed"),
        ("record-after-fail", "skipped"),
        ("ready-check", "succeeded"),
    ]


@needs_node_python
def test_the_bundle_rejects_an_invalid_config_as_the_layer_does(bundle: Path, node: Node) -> None:
    data = load_event("configs/invalid-many-problems.json")
    config = node.root.parent / "bad.json"
    config.write_text(json.dumps(data))
    result = run_bundle(NODE_PYTHON, bundle, node, "boot", "--config", str(config), "--root", str(node.root))
    assert result.returncode == 64
    for problem in find_problems(data):
        assert str(problem) in result.stderr


@pytest.mark.skipif(not PYTHON39.exists(), reason="no bare python3.9 on this machine")
def test_without_boto3_the_node_says_so_clearly(bundle: Path, node: Node) -> None:
    assert (
        subprocess.run([str(PYTHON39), "-c", "import boto3"], capture_output=True, check=False).returncode
        != 0
    )
    config = node.root.parent / "config.json"
    config.write_text(json.dumps(node.config("article-terminate")))
    booted = run_bundle(PYTHON39, bundle, node, "boot", "--config", str(config), "--root", str(node.root))
    assert booted.returncode == 4
    failure = [json.loads(line) for line in (node.actions / "executor.log").read_text().splitlines()][2]
    assert "s3:// scripts need boto3" in failure["error"]
    shipped = run_bundle(
        PYTHON39,
        bundle,
        node,
        "ship",
        "--root",
        str(node.root),
        "--log-group",
        "g",
        "--instance-id",
        "i-1",
        "--once",
    )
    assert shipped.returncode == 1  # no boto3: not bad usage (2), and 64 is `boot`'s alone
    assert "shipping reports need boto3" in shipped.stderr


FAKE_SYSTEMCTL = """#!/bin/bash
# Records each call; "restart" starts the unit's ExecStart in the background, as systemd would, with the
# node paths moved under LIFEGUARD_INSTALL_ROOT.
echo "$*" >> "$LIFEGUARD_INSTALL_ROOT/systemctl.calls"
if [ "$1" = restart ]; then
    unit="$LIFEGUARD_INSTALL_ROOT/etc/systemd/system/$2"
    command=$(sed -n 's/^ExecStart=//p' "$unit")
    command=${command//\\/opt\\/lifeguard\\//$LIFEGUARD_INSTALL_ROOT\\/opt\\/lifeguard\\/}
    command=${command//--root \\/ /--root $LIFEGUARD_INSTALL_ROOT }
    setsid bash -c "exec $command" > "$LIFEGUARD_INSTALL_ROOT/shipper.out" 2>&1 < /dev/null &
    echo $! > "$LIFEGUARD_INSTALL_ROOT/shipper.pid"
fi
"""


@pytest.fixture
def installable(bundle: Path, node: Node, local: Any, tmp_path: Path) -> dict[str, str]:
    """The bundle in the node's bucket, a fake systemctl first on PATH, and a log group."""
    node.s3.put_object(Bucket=node.bucket, Key="lifeguard/lifeguard-node.pyz", Body=bundle.read_bytes())
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    systemctl = bin_dir / "systemctl"
    systemctl.write_text(FAKE_SYSTEMCTL)
    systemctl.chmod(0o755)
    group = f"/lifeguard/install-{uuid.uuid4().hex[:6]}"
    local.client("logs").create_log_group(logGroupName=group)
    node.env.update(
        PATH=f"{bin_dir}:{node.env['PATH']}",
        LIFEGUARD_INSTALL_ROOT=str(node.root),
        LIFEGUARD_PYTHON=sys.executable,
        LIFEGUARD_INSTANCE_ID="i-0aaaabbbbccccdddd",
        LIFEGUARD_POLL_INTERVAL_SECONDS="0.2",
        PCS_CLUSTER_ID="pcs_abc123de45",
        PCS_COMPUTE_NODE_GROUP_ID="pcs_abcdef01",
        PCS_NODE_ID="lca-static-1",
    )
    return {
        "location": f"s3://{node.bucket}/lifeguard/lifeguard-node.pyz",
        "sha256": hashlib.sha256(bundle.read_bytes()).hexdigest(),
        "log_group": group,
    }


def stop_shipper(node: Node) -> None:
    """Stop the shipper the fake systemctl started: its process group, and then any process still running
    from the node's root (a restart may have started another one since the pid was written)."""
    pid_file = node.root / "shipper.pid"
    if pid_file.exists():
        with contextlib.suppress(ProcessLookupError):
            os.killpg(int(pid_file.read_text()), signal.SIGTERM)
    marker = str(node.root).encode()
    for proc in Path("/proc").iterdir():
        if not proc.name.isdigit() or int(proc.name) == os.getpid():
            continue
        with contextlib.suppress(OSError):
            if marker in (proc / "cmdline").read_bytes():
                os.kill(int(proc.name), signal.SIGKILL)


def test_install_shipper_verifies_installs_and_starts_the_service(
    node: Node, installable: dict[str, str]
) -> None:
    try:
        result = run_install_shipper(
            node, installable["location"], installable["sha256"], installable["log_group"]
        )
        assert result.returncode == 0, result.stderr
        installed = node.root / "opt/lifeguard/lifeguard-node.pyz"
        assert hashlib.sha256(installed.read_bytes()).hexdigest() == installable["sha256"]
        unit = (node.root / "etc/systemd/system/lifeguard-shipper.service").read_text()
        [exec_start] = [line for line in unit.splitlines() if line.startswith("ExecStart=")]
        assert shlex.split(exec_start.removeprefix("ExecStart="))[1:] == [
            "/opt/lifeguard/lifeguard-node.pyz",
            "ship",
            "--root",
            "/",
            "--log-group",
            installable["log_group"],
            "--cluster-id",
            "pcs_abc123de45",
            "--compute-node-group-id",
            "pcs_abcdef01",
            "--node-id",
            "lca-static-1",
        ]
        assert "Restart=always" in unit
        calls = (node.root / "systemctl.calls").read_text().splitlines()
        assert calls == [
            "daemon-reload",
            "enable lifeguard-shipper.service",
            "restart lifeguard-shipper.service",
        ]
    finally:
        stop_shipper(node)


def test_install_shipper_leaves_root_s_files_root_s_whatever_the_umask_and_directory_it_runs_in(
    node: Node, installable: dict[str, str], tmp_path: Path
) -> None:
    """PCS's agent runs lifecycle scripts as root with its own umask, in a directory of its choosing: the
    installed bundle, its directory and the unit root runs from stay writable by root alone, and Python
    imports no boto3.py from that directory."""
    here = tmp_path / "agent-cwd"
    here.mkdir()
    planted = tmp_path / "planted"
    (here / "boto3.py").write_text(f"open({str(planted)!r}, 'w').write('imported')\n")
    (node.root / "opt/lifeguard").mkdir(parents=True)
    (node.root / "opt/lifeguard").chmod(0o777)  # left from before, open to all
    args = [installable["location"], installable["sha256"], installable["log_group"]]
    try:
        result = subprocess.run(
            ["bash", "-c", 'umask 000 && exec bash "$0" "$@"', str(INSTALL_SHIPPER), *args],
            env=node.env,
            cwd=here,
            capture_output=True,
            text=True,
            timeout=60,
            check=False,
        )
        assert result.returncode == 0, result.stderr
        assert not planted.exists()
        mode = lambda path: stat.S_IMODE(path.stat().st_mode)  # noqa: E731
        assert mode(node.root / "opt/lifeguard") == 0o755
        assert mode(node.root / "opt/lifeguard/lifeguard-node.pyz") == 0o755
        assert mode(node.root / "etc/systemd/system/lifeguard-shipper.service") == 0o644
    finally:
        stop_shipper(node)


@pytest.mark.parametrize("left", ["a folder", "a link to a folder"])
def test_install_shipper_replaces_whatever_another_user_left_at_the_bundle_s_path(
    node: Node, installable: dict[str, str], tmp_path: Path, left: str
) -> None:
    """A folder at the bundle's path, put there while its directory was open to all: the bundle was moved
    into it, and the service root runs (`python3 /opt/lifeguard/lifeguard-node.pyz`) ran the folder's
    `__main__.py`, someone else's code, at every boot."""
    install_dir = node.root / "opt/lifeguard"
    install_dir.mkdir(parents=True)
    install_dir.chmod(0o777)  # left from before, open to all
    planted = install_dir / "lifeguard-node.pyz"
    folder = planted if left == "a folder" else tmp_path / "theirs"
    folder.mkdir()
    (folder / "__main__.py").write_text("print('not the bundle')\n")
    if left != "a folder":
        planted.symlink_to(folder)
    try:
        result = run_install_shipper(
            node, installable["location"], installable["sha256"], installable["log_group"]
        )
        assert result.returncode == 0, result.stderr
        assert planted.is_file()
        assert not planted.is_symlink()
        assert hashlib.sha256(planted.read_bytes()).hexdigest() == installable["sha256"]
        assert (folder / "__main__.py").exists() == (left != "a folder")  # theirs, where it was
        assert sorted(path.name for path in install_dir.iterdir()) == ["lifeguard-node.pyz"]
    finally:
        stop_shipper(node)


class _Imds(http.server.BaseHTTPRequestHandler):
    """IMDSv2 on loopback: a token for a PUT, the region for a GET that carries it."""

    def do_PUT(self) -> None:
        self._answer(b"token-1" if self.path == "/latest/api/token" else None)

    def do_GET(self) -> None:
        known = self.headers.get("X-aws-ec2-metadata-token") == "token-1"
        wanted = self.path == "/latest/meta-data/placement/region"
        self._answer(b"us-gov-west-1" if known and wanted else None)

    def _answer(self, body: bytes | None) -> None:
        self.send_response(200 if body is not None else 401)
        self.end_headers()
        self.wfile.write(body or b"")

    def log_message(self, *_: Any) -> None:
        pass


def test_install_shipper_fetches_in_the_instance_s_region_which_pcs_does_not_give_its_scripts(
    node: Node, installable: dict[str, str]
) -> None:
    """Without AWS_REGION, boto3 goes to the commercial partition's S3, which refuses GovCloud's and
    China's credentials: the installer asks IMDSv2 for the instance's region, as the shipper does."""
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), _Imds)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    for name in ("AWS_REGION", "AWS_DEFAULT_REGION"):
        node.env.pop(name, None)
    node.env["AWS_EC2_METADATA_SERVICE_ENDPOINT"] = f"http://127.0.0.1:{server.server_port}"
    try:
        result = run_install_shipper(
            node, installable["location"], installable["sha256"], installable["log_group"]
        )
        assert result.returncode == 0, result.stderr
        assert "fetching from S3 in us-gov-west-1" in result.stderr
    finally:
        stop_shipper(node)
        server.shutdown()


def test_install_shipper_refuses_a_bundle_with_the_wrong_checksum(
    node: Node, installable: dict[str, str]
) -> None:
    result = run_install_shipper(node, installable["location"], "0" * 64, installable["log_group"])
    assert result.returncode == 3
    assert "checksum mismatch" in result.stdout
    assert not (node.root / "opt/lifeguard/lifeguard-node.pyz").exists()
    assert list((node.root / "opt/lifeguard").iterdir()) == []
    assert not (node.root / "systemctl.calls").exists()


@pytest.mark.parametrize("what", ["a moved object", "a deleted version"])
def test_install_shipper_says_a_failed_fetch_in_one_line_naming_it(
    node: Node, installable: dict[str, str], what: str
) -> None:
    """It was a botocore traceback of ten lines, naming neither the bucket nor the key nor the version."""
    location, version = installable["location"], ""
    if what == "a moved object":
        location = location.replace("lifeguard-node.pyz", "moved.pyz")
    else:
        version = "3HL4kqtJlcpXroDTDmJ.rmSpXd3dIbrHY"
    result = run_install_shipper(node, location, installable["sha256"], installable["log_group"], version)
    assert result.returncode == 1
    [said] = [line for line in result.stderr.splitlines() if "fetching from S3" not in line]
    where = location + (f" (version {version})" if version else "")
    assert said.startswith(f"install-shipper: cannot fetch {where}: ")
    assert said.endswith("; nothing installed")
    assert list((node.root / "opt/lifeguard").iterdir()) == []
    assert not (node.root / "systemctl.calls").exists()


def test_install_shipper_says_a_failed_https_fetch_in_one_line_without_its_query(
    node: Node, installable: dict[str, str]
) -> None:
    """It exited with curl's own status (7 here), curl's line alone on stderr, unlike an s3:// fetch."""
    location = "https://127.0.0.1:9/lifeguard-node.pyz?X-Amz-Signature=secret"
    result = run_install_shipper(node, location, installable["sha256"], installable["log_group"])
    assert result.returncode == 1
    [said] = result.stderr.splitlines()
    assert said.startswith("install-shipper: cannot fetch https://127.0.0.1:9/lifeguard-node.pyz: ")
    assert said.endswith("; nothing installed")
    assert "secret" not in result.stdout + result.stderr
    assert list((node.root / "opt/lifeguard").iterdir()) == []


def test_install_shipper_gives_dnf_a_time_and_says_when_it_is_over(
    node: Node, installable: dict[str, str], tmp_path: Path
) -> None:
    """A node without boto3 that cannot reach the package repositories was held by dnf's retries."""
    bin_dir = tmp_path / "bin"
    (bin_dir / "dnf").write_text("#!/bin/bash\nsleep 30\n")
    (bin_dir / "dnf").chmod(0o755)
    (bin_dir / "python-without-boto3").write_text(f'#!/bin/bash\nexec {sys.executable} -I -S "$@"\n')
    (bin_dir / "python-without-boto3").chmod(0o755)
    node.env.update(LIFEGUARD_PYTHON=str(bin_dir / "python-without-boto3"), LIFEGUARD_DNF_TIMEOUT_SECONDS="1")
    started = time.monotonic()
    result = run_install_shipper(
        node, installable["location"], installable["sha256"], installable["log_group"]
    )
    assert time.monotonic() - started < 20
    assert result.returncode == 1
    assert result.stderr.splitlines() == [
        "install-shipper: dnf did not install python3-boto3 in 1 s; nothing installed"
    ]
    assert not (node.root / "opt/lifeguard").exists()


def _zip_of_main_alone() -> bytes:
    made = io.BytesIO()
    with zipfile.ZipFile(made, "w") as archive:
        archive.writestr("__main__.py", "print('another application')\n")
    return made.getvalue()


@pytest.mark.parametrize(
    ("broken", "why"),
    [
        (b"not a bundle", "it is no Python zip application"),
        (_zip_of_main_alone(), "it holds no lifeguard.node"),
    ],
)
def test_install_shipper_installs_nothing_the_node_s_python_cannot_run(
    node: Node, installable: dict[str, str], broken: bytes, why: str
) -> None:
    """A bundle the node's Python cannot run (older than 3.9, or not the bundle) was installed, and said
    shipping: its service then failed every 2 s, and no report ever left a node."""
    node.s3.put_object(Bucket=node.bucket, Key="lifeguard/broken.pyz", Body=broken)
    location = installable["location"].replace("lifeguard-node.pyz", "broken.pyz")
    result = run_install_shipper(node, location, hashlib.sha256(broken).hexdigest(), installable["log_group"])
    assert result.returncode == 1
    assert result.stdout == (
        f"install-shipper: {sys.executable} cannot run the bundle at {location}: {why}; nothing installed\n"
    )
    assert list((node.root / "opt/lifeguard").iterdir()) == []
    assert not (node.root / "systemctl.calls").exists()


def test_install_shipper_refuses_a_bundle_over_its_bound_before_it_fills_the_disk(
    node: Node, installable: dict[str, str]
) -> None:
    # A wrong location (a huge object, an endless server) was downloaded whole onto the root volume.
    node.s3.put_object(Bucket=node.bucket, Key="lifeguard/huge.pyz", Body=b"\0" * (8 * 1024 * 1024 + 1))
    huge = f"s3://{node.bucket}/lifeguard/huge.pyz"
    result = run_install_shipper(node, huge, installable["sha256"], installable["log_group"])
    assert result.returncode == 3, result.stderr
    assert (
        result.stdout == f"install-shipper: the bundle at {huge} is over 8388608 bytes; nothing installed\n"
    )
    assert list((node.root / "opt/lifeguard").iterdir()) == []
    assert not (node.root / "systemctl.calls").exists()


def test_install_shipper_as_the_first_lifecycle_script_gets_a_terminate_failure_off_the_node(
    node: Node, installable: dict[str, str], local: Any
) -> None:
    node.put_script("lifeguard/install-shipper.sh", INSTALL_SHIPPER.read_bytes())
    config = node.config("article-terminate")
    config["stages"]["nodeBootstrapped"].insert(
        0,
        {
            "name": "lifeguard-shipper",
            "scriptSource": {"scriptLocation": f"s3://{node.bucket}/lifeguard/install-shipper.sh"},
            "arguments": [installable["location"], installable["sha256"], installable["log_group"]],
            "executionPolicy": "EVERY_BOOT",
            "onError": "CONTINUE",
        },
    )
    try:
        assert node.boot(config).returncode == 4
        logs = local.client("logs")
        deadline = time.monotonic() + 10
        scripts: list[str] = []
        while time.monotonic() < deadline and "fail-terminate" not in scripts:
            try:
                events = logs.get_log_events(
                    logGroupName=installable["log_group"],
                    logStreamName="pcs_abc123de45/i-0aaaabbbbccccdddd",
                    startFromHead=True,
                )["events"]
            except logs.exceptions.ResourceNotFoundException:
                events = []
            scripts = [json.loads(e["message"])["script"] for e in events]
            time.sleep(0.1)
        assert scripts[:2] == ["lifeguard-shipper", "fail-terminate"], (node.root / "shipper.out").read_text()
        # The service outlived the script that started it.
        os.kill(int((node.root / "shipper.pid").read_text()), 0)
    finally:
        stop_shipper(node)


def run_install_shipper(node: Node, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        ["bash", str(INSTALL_SHIPPER), *args],
        env=node.env,
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )


def test_install_shipper_given_a_version_id_installs_that_version_not_the_latest(
    bundle: Path, node: Node, installable: dict[str, str]
) -> None:
    key = "lifeguard/lifeguard-node.pyz"
    node.s3.put_bucket_versioning(Bucket=node.bucket, VersioningConfiguration={"Status": "Enabled"})
    pinned = node.s3.put_object(Bucket=node.bucket, Key=key, Body=bundle.read_bytes())["VersionId"]
    later = b"#!/usr/bin/env python3\n# a later build published at the same key\n"
    node.s3.put_object(Bucket=node.bucket, Key=key, Body=later)
    try:
        latest = run_install_shipper(
            node, installable["location"], installable["sha256"], installable["log_group"]
        )
        assert latest.returncode == 3  # without the version, the later build is fetched and refused
        assert "checksum mismatch" in latest.stdout
        result = run_install_shipper(
            node, installable["location"], installable["sha256"], installable["log_group"], pinned
        )
        assert result.returncode == 0, result.stderr
        installed = node.root / "opt/lifeguard/lifeguard-node.pyz"
        assert installed.read_bytes() == bundle.read_bytes()
        assert f"version {pinned}" in result.stdout
        assert (node.root / "systemctl.calls").read_text().splitlines()[-1] == (
            "restart lifeguard-shipper.service"
        )
    finally:
        stop_shipper(node)


def test_install_shipper_refuses_a_version_id_for_an_https_bundle(
    node: Node, installable: dict[str, str]
) -> None:
    result = run_install_shipper(
        node, "https://example.com/lifeguard-node.pyz", installable["sha256"], installable["log_group"], "v1"
    )
    assert result.returncode == 2
    assert "a version id applies to s3:// bundles only" in result.stdout
    assert not (node.root / "opt/lifeguard/lifeguard-node.pyz").exists()
