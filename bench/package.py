"""What the built package costs a cold start: the layer's zipped size, and each built handler's import
time as a ratio to `import boto3` measured side by side in one run, with the layer's `.pyc` and without.

Run after `sam build`. Every import runs in a fresh `python3.12 -I -S -B` whose path is the built
function's directory, the built layer of this machine's architecture and a boto3 alone (the oldest the
layer claims, `lifeguard_cli/local/artifact_boto3.py`), as Lambda's runtime has them; the baseline
imports boto3 alone on the same path. "no .pyc" is a read-only copy of the layer without `__pycache__`
(as /opt is read-only, Python compiles every module on every cold start and writes nothing). Each
figure is the median of interleaved rounds, so machine noise hits every side alike; lower is better.

    .venv/bin/python bench/package.py [--runs 7] [--boto3 1.34.0] [--json]
"""

from __future__ import annotations

import argparse
import io
import json
import os
import platform
import shutil
import stat
import statistics
import subprocess
import sys
import tempfile
import zipfile
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import yaml  # type: ignore[import-untyped]

from lifeguard_cli.local.artifact_boto3 import boto3_dir, claimed_oldest_boto3

ROOT = Path(__file__).resolve().parent.parent
BUILD = ROOT / ".aws-sam" / "build"
HANDLERS = ("ScalingEventsFunction", "NodeReportsFunction", "RemediateFunction", "NotifyFunction")
ARCHITECTURES = {"x86_64": "x86_64", "AMD64": "x86_64", "aarch64": "arm64", "arm64": "arm64"}
# Lambda's quotas: a layer or function zip uploaded directly, and function plus layers unzipped.
ZIPPED_LIMIT_BYTES = 50 * 1024 * 1024
UNZIPPED_LIMIT_BYTES = 250 * 1024 * 1024
# Enough for each handler's module-level wiring; no call leaves the process at import.
ENVIRONMENT = {
    "AWS_DEFAULT_REGION": "us-east-1",
    "AWS_REGION": "us-east-1",
    "AWS_ACCESS_KEY_ID": "bench",
    "AWS_SECRET_ACCESS_KEY": "bench",
    "AWS_CONFIG_FILE": os.devnull,
    "AWS_SHARED_CREDENTIALS_FILE": os.devnull,
    "AWS_EXECUTION_ENV": "AWS_Lambda_python3.12",
    "LIFEGUARD_TABLE": "bench-state",
    "LIFEGUARD_EVENT_BUS": "bench-bus",
    "LIFEGUARD_TOPIC_ARN": "arn:aws:sns:us-east-1:123456789012:bench",
    "POWERTOOLS_SERVICE_NAME": "lifeguard",
    "POWERTOOLS_METRICS_NAMESPACE": "PCSLifeguard",
    "LANG": "en_US.UTF-8",
    "TZ": ":UTC",
}
_IMPORT = """
import sys, time
sys.path[:0] = {path!r}
start = time.perf_counter()
import {module}
print(time.perf_counter() - start)
"""


def _layers(template: Mapping[str, Any]) -> dict[str, Path]:
    """{BuildArchitecture: the built layer's directory (holding python/)}."""
    return {
        resource["Metadata"]["BuildArchitecture"]: BUILD / resource["Properties"]["ContentUri"]
        for resource in template["Resources"].values()
        if isinstance(resource, Mapping) and resource.get("Type") == "AWS::Serverless::LayerVersion"
    }


def zipped_size(content: Path) -> tuple[int, int]:
    """(zipped, unzipped) bytes of `content` zipped as SAM uploads it: its entries at the zip's root."""
    buffer = io.BytesIO()
    unzipped = 0
    with zipfile.ZipFile(buffer, "w", zipfile.ZIP_DEFLATED) as archive:
        for path in sorted(content.rglob("*")):
            if path.is_file():
                archive.write(path, path.relative_to(content).as_posix())
                unzipped += path.stat().st_size
    return buffer.tell(), unzipped


@contextmanager
def _layer_without_pyc(layer: Path) -> Iterator[Path]:
    """A copy of the layer's python/ without any `.pyc`, read-only as /opt is."""
    with tempfile.TemporaryDirectory(prefix="lifeguard-layer-") as scratch:
        copy = Path(scratch) / "python"
        shutil.copytree(layer, copy, ignore=shutil.ignore_patterns("__pycache__", "*.pyc"))
        entries = [copy, *copy.rglob("*")]
        for entry in entries:
            mode = entry.stat().st_mode
            entry.chmod(mode & ~(stat.S_IWUSR | stat.S_IWGRP | stat.S_IWOTH))
        try:
            yield copy
        finally:
            for entry in entries:
                entry.chmod(entry.stat().st_mode | stat.S_IWUSR)


def _import_seconds(module: str, path: list[Path]) -> float:
    """Seconds a fresh interpreter takes to import `module` with `path` first on sys.path."""
    code = _IMPORT.format(path=[str(p) for p in path], module=module)
    process = subprocess.run(
        [sys.executable, "-I", "-S", "-B", "-c", code],
        env=ENVIRONMENT,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    if process.returncode != 0:
        raise RuntimeError(f"importing {module} from {path[0]} failed:\n{process.stderr[-3000:]}")
    return float(process.stdout.strip().splitlines()[-1])


def measure_imports(
    functions: Mapping[str, Path], layer: Path, bare_layer: Path, boto3: Path, runs: int
) -> dict[str, dict[str, float]]:
    """Per handler, median import ms and median ratio to `import boto3`, with and without the `.pyc`."""
    cases = {
        f"{name}{suffix}": [directory, layer_dir, boto3]
        for name, directory in functions.items()
        for suffix, layer_dir in (("", layer), (" (no .pyc)", bare_layer))
    }
    baseline_path = [next(iter(functions.values())), layer, boto3]
    for case_path in (baseline_path, *cases.values()):  # warm the file cache and fail early
        _import_seconds("app" if case_path is not baseline_path else "boto3", case_path)
    baseline: list[float] = []
    seconds: dict[str, list[float]] = {name: [] for name in cases}
    ratios: dict[str, list[float]] = {name: [] for name in cases}
    for _ in range(runs):
        for name, case_path in cases.items():
            base = _import_seconds("boto3", baseline_path)
            candidate = _import_seconds("app", case_path)
            baseline.append(base)
            seconds[name].append(candidate)
            ratios[name].append(candidate / base)
    figures = {"import boto3": {"ms": statistics.median(baseline) * 1000, "ratio": 1.0}}
    for name in cases:
        figures[name] = {
            "ms": statistics.median(seconds[name]) * 1000,
            "ratio": statistics.median(ratios[name]),
        }
    return figures


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=7, help="interleaved rounds per figure (at least 5)")
    parser.add_argument("--boto3", help="the boto3 version on the path (default: the layer's claimed oldest)")
    parser.add_argument("--json", action="store_true", help="the figures as JSON")
    args = parser.parse_args()
    if args.runs < 5:
        parser.error("--runs must be at least 5")
    template_path = BUILD / "template.yaml"
    if not template_path.exists():
        print(
            f"bench/package.py: {template_path.relative_to(ROOT)} is missing: run `sam build` first",
            file=sys.stderr,
        )
        return 1
    template = yaml.safe_load(template_path.read_text(encoding="utf-8"))
    layers = _layers(template)
    architecture = ARCHITECTURES.get(platform.machine(), "")
    if architecture not in layers:
        print(f"bench/package.py: no built layer runs on {platform.machine()}", file=sys.stderr)
        return 1
    try:
        version = args.boto3 or claimed_oldest_boto3()
        boto3 = boto3_dir(version)
    except (ValueError, OSError, subprocess.CalledProcessError) as exc:
        print(f"bench/package.py: {exc} (or pass --boto3 X.Y.Z)", file=sys.stderr)
        return 1
    sizes = {}
    for arch in sorted({architecture, "arm64"} & set(layers)):
        zipped, unzipped = zipped_size(layers[arch])
        sizes[arch] = {"zipped_bytes": zipped, "unzipped_bytes": unzipped}
    functions = {name: BUILD / template["Resources"][name]["Properties"]["CodeUri"] for name in HANDLERS}
    layer = layers[architecture] / "python"
    with _layer_without_pyc(layer) as bare_layer:
        imports = measure_imports(functions, layer, bare_layer, boto3, args.runs)
        stray = sorted(p for p in bare_layer.rglob("*.pyc"))
        if stray:
            print(f"bench/package.py: the read-only copy gained {stray[0]} (.pyc written)", file=sys.stderr)
            return 1
    report = {
        "architecture": architecture,
        "python": platform.python_version(),
        "boto3": version,
        "runs": args.runs,
        "layer_sizes": sizes,
        "imports": imports,
    }
    if args.json:
        print(json.dumps(report, indent=2))
        return 0
    mib = 1024 * 1024
    print(f"{'layer (as SAM zips it)':<34} {'zipped':>10} {'unzipped':>10}")
    for arch, size in sizes.items():
        print(
            f"{'LifeguardLayer ' + arch:<34} {size['zipped_bytes'] / mib:>7.2f} MiB "
            f"{size['unzipped_bytes'] / mib:>7.2f} MiB"
        )
    print(
        f"{'(Lambda: direct upload, unzipped)':<34} {ZIPPED_LIMIT_BYTES / mib:>7.0f} MiB "
        f"{UNZIPPED_LIMIT_BYTES / mib:>7.0f} MiB"
    )
    print()
    print(f"cold import on {architecture}, Python {report['python']}, boto3 {version}, median of {args.runs}")
    print(f"{'what (candidate vs import boto3)':<44} {'ratio':>8} {'ms':>9}")
    for name, figure in imports.items():
        print(f"{name:<44} {figure['ratio']:>7.2f}x {figure['ms']:>9.1f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
