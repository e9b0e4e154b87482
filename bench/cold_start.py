"""Each built handler's cold start as a ratio to `import boto3`, in fresh processes (lower is better).

Run after `sam build`. Every handler of the built template is imported as Lambda's runtime imports it: a
fresh `python3.12 -I -S -B` whose path is the built function's directory, the built layer of this
machine's architecture and a boto3 alone (the oldest the layer claims), with template.yaml's environment.
The handlers make their clients on first use, so `import app` alone would leave boto3 to the first event:
each figure is `import app` and then `import boto3` (what the first invocation imports before its first
call; the clients it then makes, about 60 ms, are in neither side), against `import boto3` alone on the same
path, measured beside it. Once as built (the layer's `.pyc`
shipped) and once from a read-only copy of the layer without them (what Python would compile at every
cold start, as /opt is read-only). Each figure is the median of interleaved rounds, so machine noise hits
both sides alike. `--why` adds, per handler, the modules that take longest to import (`-X importtime`,
cumulative), for whoever makes it faster.

    .venv/bin/sam build && .venv/bin/python bench/cold_start.py [--runs 7] [--why] [--json] [--boto3 X.Y.Z]
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import shutil
import stat
import statistics
import subprocess
import sys
import tempfile
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import yaml  # type: ignore[import-untyped]
from package import ARCHITECTURES, BUILD, ROOT, _layers  # bench/package.py, beside this script

from lifeguard_cli.local.artifact_boto3 import boto3_dir, claimed_oldest_boto3

# The handlers a cold start matters for, in the order they are reported; others in the template follow.
HANDLERS = (
    "ScalingEventsFunction",
    "NodeReportsFunction",
    "RemediateFunction",
    "NotifyFunction",
    "ReviewChangesFunction",
)
NO_PYC = " (no .pyc)"
ALONE = " (app alone)"
SLOWEST = 5
CANDIDATE = "app, boto3"  # the handler, and the boto3 its first call needs

# Enough for each handler's module-level wiring; no call leaves the process at import. template.yaml's own
# variables (its Globals) are added to these (`_environment`).
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
import {modules}
print(time.perf_counter() - start)
"""


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


def _imported(
    modules: str, path: list[Path], environment: Mapping[str, str], *flags: str
) -> subprocess.CompletedProcess[str]:
    """A fresh `python -I -S -B` (and `flags`) that imported `modules` (e.g. "app, boto3") with `path` first
    on sys.path; it printed the seconds that took."""
    code = _IMPORT.format(path=[str(p) for p in path], modules=modules)
    process = subprocess.run(
        [sys.executable, *flags, "-I", "-S", "-B", "-c", code],
        env=dict(environment),
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    if process.returncode != 0:
        raise RuntimeError(f"importing {modules} from {path[0]} failed:\n{process.stderr[-3000:]}")
    return process


def _import_seconds(modules: str, path: list[Path], environment: Mapping[str, str]) -> float:
    """Seconds a fresh interpreter takes to import `modules` with `path` first."""
    return float(_imported(modules, path, environment).stdout.strip().splitlines()[-1])


def measure_imports(
    functions: Mapping[str, Path],
    layer: Path,
    bare_layer: Path,
    boto3: Path,
    *,
    runs: int,
    environment: Mapping[str, str],
) -> dict[str, dict[str, float]]:
    """Per handler, median ms of `import app, boto3` and median ratio to `import boto3`, with and without
    the `.pyc`, and of `import app` alone (as built: what the handler's module costs before any event)."""
    cases = {
        f"{name}{suffix}": ([directory, layer_dir, boto3], modules)
        for name, directory in functions.items()
        for suffix, layer_dir, modules in (
            ("", layer, CANDIDATE),
            (NO_PYC, bare_layer, CANDIDATE),
            (ALONE, layer, "app"),
        )
    }
    baseline_path = [next(iter(functions.values())), layer, boto3]
    _import_seconds("boto3", baseline_path, environment)
    for case_path, modules in cases.values():  # warm the file cache and fail early
        _import_seconds(modules, case_path, environment)
    baseline: list[float] = []
    seconds: dict[str, list[float]] = {name: [] for name in cases}
    ratios: dict[str, list[float]] = {name: [] for name in cases}
    for _ in range(runs):
        for name, (case_path, modules) in cases.items():
            base = _import_seconds("boto3", baseline_path, environment)
            candidate = _import_seconds(modules, case_path, environment)
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


def _environment(template: Mapping[str, Any]) -> dict[str, str]:
    """ENVIRONMENT, with the built template's own plain variables for every function (its Globals)."""
    globals_ = template.get("Globals", {}).get("Function", {}).get("Environment", {}).get("Variables", {})
    own = {key: value for key, value in globals_.items() if isinstance(value, str)}
    return {**ENVIRONMENT, **own}


def built_handlers(template: Mapping[str, Any]) -> dict[str, Path]:
    """{function: its built directory} for every Python function of the built template with an `app`."""
    found = {}
    for name, resource in template["Resources"].items():
        if not isinstance(resource, Mapping) or resource.get("Type") != "AWS::Serverless::Function":
            continue
        directory = BUILD / str(resource["Properties"].get("CodeUri", ""))
        if (directory / "app.py").exists():
            found[name] = directory
    ordered = [name for name in HANDLERS if name in found] + sorted(set(found) - set(HANDLERS))
    return {name: found[name] for name in ordered}


def slowest_imports(
    path: list[Path], environment: Mapping[str, str], count: int = SLOWEST
) -> tuple[float, list[tuple[str, str, float, float]]]:
    """(ms importing `app` in all, the `count` modules under it with the longest cumulative import, each
    as (module, the module that imported it, cumulative ms, own ms)), from one fresh `-X importtime` run."""
    process = _imported("app", path, environment, "-X", "importtime")
    modules: list[list[Any]] = []
    waiting: list[list[Any]] = []  # importtime prints a module after the ones it imported
    for line in process.stderr.splitlines():
        if not line.startswith("import time:") or "self [us]" in line:
            continue
        own, cumulative, raw = line.removeprefix("import time:").split("|")
        depth = len(raw) - len(raw.lstrip())
        module = raw.strip()
        while waiting and waiting[-1][0] > depth:
            waiting.pop()[1][1] = module
        entry = [module, "", int(cumulative) / 1000, int(own) / 1000]
        modules.append(entry)
        waiting.append([depth, entry])
    total = next((entry[2] for entry in modules if entry[0] == "app"), 0.0)
    under = sorted((entry for entry in modules if entry[0] != "app"), key=lambda entry: -entry[2])
    return total, [(module, by, cumulative, own) for module, by, cumulative, own in under[:count]]


def main() -> int:
    parser = argparse.ArgumentParser(
        description=__doc__.split("\n\n")[0],
        epilog="\n\n".join(__doc__.split("\n\n")[1:]),
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("--runs", type=int, default=7, help="interleaved rounds per figure (at least 5)")
    parser.add_argument("--why", action="store_true", help=f"each handler's {SLOWEST} slowest imports")
    parser.add_argument("--boto3", help="the boto3 version on the path (default: the layer's claimed oldest)")
    parser.add_argument("--json", action="store_true", help="the figures as JSON")
    args = parser.parse_args()
    if args.runs < 5:
        parser.error("--runs must be at least 5")
    template_path = BUILD / "template.yaml"
    if not template_path.exists():
        print(
            f"bench/cold_start.py: {template_path.relative_to(ROOT)} is missing: run `.venv/bin/sam build`"
            " (or `make bench`) first",
            file=sys.stderr,
        )
        return 1
    template = yaml.safe_load(template_path.read_text(encoding="utf-8"))
    layers = _layers(template)
    architecture = ARCHITECTURES.get(platform.machine(), "")
    if architecture not in layers:
        print(f"bench/cold_start.py: no built layer runs on {platform.machine()}", file=sys.stderr)
        return 1
    try:
        version = args.boto3 or claimed_oldest_boto3()
        boto3 = boto3_dir(version)
    except (ValueError, OSError, subprocess.CalledProcessError) as exc:
        print(f"bench/cold_start.py: {exc} (or pass --boto3 X.Y.Z)", file=sys.stderr)
        return 1
    functions = built_handlers(template)
    environment = _environment(template)
    layer = layers[architecture] / "python"
    print(f"  {len(functions)} handlers, {args.runs} rounds …", file=sys.stderr)
    with _layer_without_pyc(layer) as bare_layer:
        figures = measure_imports(
            functions, layer, bare_layer, boto3, runs=args.runs, environment=environment
        )
    why = {}
    if args.why:
        why = {
            name: slowest_imports([directory, layer, boto3], environment)
            for name, directory in functions.items()
        }
    baseline_ms = figures["import boto3"]["ms"]
    report = {
        "architecture": architecture,
        "python": platform.python_version(),
        "boto3": version,
        "runs": args.runs,
        "import_boto3_ms": baseline_ms,
        "handlers": {
            name: {
                "as_built": figures[name],
                "no_pyc": figures[name + NO_PYC],
                "app_alone": figures[name + ALONE],
                **(
                    {
                        "slowest_imports": [
                            {"module": module, "imported_by": by, "cumulative_ms": cumulative, "self_ms": own}
                            for module, by, cumulative, own in why[name][1]
                        ]
                    }
                    if name in why
                    else {}
                ),
            }
            for name in functions
        },
    }
    if args.json:
        print(json.dumps(report, indent=2))
        return 0
    print(
        "cold start of each built handler (`import app, boto3`), as a ratio to `import boto3` in a fresh"
        " process (lower is better)"
    )
    print(
        f"{architecture}, Python {report['python']}, boto3 {version}, median of {args.runs} interleaved"
        f" rounds; `import boto3` alone: {baseline_ms:.0f} ms\n"
    )
    print(f"{'handler':<24} {'as built':>17} {'no .pyc':>17} {'app alone':>17}")
    for name in functions:
        cells = (figures[name], figures[name + NO_PYC], figures[name + ALONE])
        print(f"{name:<24}" + "".join(f" {c['ratio']:>7.2f}x {c['ms']:>5.0f} ms" for c in cells))
    print(
        "\n`app alone`: the handler's own module, as built; its clients, and boto3 with them, come with the"
        " first event."
    )
    for name, (total, slowest) in why.items():
        print(f"\n{name}: `import app` {total:.0f} ms in one `-X importtime` run; the slowest imports:")
        print(f"  {'cumulative':>10} {'self':>8}  module (imported by)")
        for module, by, cumulative, own in slowest:
            print(f"  {cumulative:>7.1f} ms {own:>5.1f} ms  {module} ({by})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
