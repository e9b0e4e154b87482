"""Build the node bundle: one file a node fetches and runs with its own Python (3.9+).

The bundle is a zipapp of the node side of the layer: `lifeguard.node` and the modules it imports, with
the PCS service model they check configs against. It needs only the standard library, plus boto3 for
`s3://` fetches and CloudWatch Logs (Amazon Linux 2023: `dnf install -y python3-boto3`). Being pure
Python it runs on x86_64 and arm64 alike. The zip is reproducible: same sources, same bytes, same sha256,
on any system that builds it with zlib's own deflate (a Python linked with zlib-ng, as Fedora's, deflates
to other bytes).

Each module ships compiled for the node's Python too (`name.pyc` beside `name.py`, unchecked hash, as
zipimport looks for it), so a boot does not compile the bundle every time: about 36 ms of a 20-script
reboot. It is compiled by a Python 3.9 found at build time (`LIFEGUARD_NODE_PYTHON`, else `python3.9` on
PATH, else the project's `.venv/node39`); without one the bundle carries sources only, which any Python
runs, and the build says so. Another Python reads past the `.pyc` (its magic differs) to the source.

    python -m lifeguard_cli.node_bundle dist/lifeguard-node.pyz
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import subprocess
import sys
import zipfile
from collections.abc import Sequence
from pathlib import Path

__all__ = ["BUNDLE_FILES", "build_node_bundle"]

_CHECKOUT_LAYER = Path(__file__).resolve().parents[2] / "layers" / "lifeguard"


def _installed_layer() -> Path:
    # Here, not at the top: the stack's build runs this file as a script with a bare python3.
    import lifeguard

    return Path(lifeguard.__file__).resolve().parents[1]


# The layer's directory in a checkout; installed, the directory the `lifeguard` package is in.
LAYER = _CHECKOUT_LAYER if _CHECKOUT_LAYER.is_dir() else _installed_layer()
NODE_PYTHON_VERSION = "3.9"  # Amazon Linux 2023's python3
_PROJECT_NODE_PYTHON = _CHECKOUT_LAYER.parents[1] / ".venv" / "node39" / "bin" / "python"
# Run by the node's Python: compile each source (JSON on stdin: [[name, text], ...]) to unchecked-hash .pyc
# bytes named as in the archive, returned as JSON of hex strings.
_COMPILE = """
import importlib._bootstrap_external as ext, importlib.util, json, sys
out = {}
for name, text in json.load(sys.stdin):
    data = text.encode()
    code = compile(data, name, "exec", dont_inherit=True)
    out[name] = bytes(ext._code_to_hash_pyc(code, importlib.util.source_hash(data), False)).hex()
json.dump(out, sys.stdout)
"""
# The node side and what it imports; the Lambdas' record classes stay out.
BUNDLE_FILES = (
    "lifeguard/__init__.py",
    "lifeguard/errors.py",
    "lifeguard/named_tuple.py",
    "lifeguard/pcs_model.py",
    "lifeguard/lifecycle_rules.py",
    "lifeguard/settings.py",
    "lifeguard/data/pcs/2023-02-10/service-2.json.gz",
    "lifeguard/node/__init__.py",
    "lifeguard/node/__main__.py",
    "lifeguard/node/boto.py",
    "lifeguard/node/cache.py",
    "lifeguard/node/clock.py",
    "lifeguard/node/cli.py",
    "lifeguard/node/defaults.py",
    "lifeguard/node/drain.py",
    "lifeguard/node/executor.py",
    "lifeguard/node/fetch.py",
    "lifeguard/node/layout.py",
    "lifeguard/node/options.py",
    "lifeguard/node/process.py",
    "lifeguard/node/report.py",
    "lifeguard/node/shipper.py",
)
_MAIN = "lifeguard/node/__main__.py"  # the bundle runs as `python -m lifeguard.node` does
_SHEBANG = b"#!/usr/bin/env python3\n"
_EPOCH = (1980, 1, 1, 0, 0, 0)


def _add(archive: zipfile.ZipFile, name: str, data: bytes) -> None:
    info = zipfile.ZipInfo(name, date_time=_EPOCH)
    info.compress_type = zipfile.ZIP_DEFLATED
    info.create_system = 3  # Unix's, as the mode is: zipfile writes 0 on Windows, another sha256
    info.external_attr = 0o644 << 16
    archive.writestr(info, data)


def node_python() -> str | None:
    """The first Python 3.9 at hand that runs (a pyenv shim may not), or None."""
    for candidate in (
        os.environ.get("LIFEGUARD_NODE_PYTHON"),
        str(_PROJECT_NODE_PYTHON) if _PROJECT_NODE_PYTHON.exists() else None,
        shutil.which(f"python{NODE_PYTHON_VERSION}"),
    ):
        if candidate and _version(candidate) == NODE_PYTHON_VERSION:
            return candidate
    return None


def _version(python: str) -> str | None:
    try:
        done = subprocess.run(
            [python, "-I", "-c", "import sys; print('%d.%d' % sys.version_info[:2])"],
            capture_output=True,
            text=True,
            timeout=60,
            check=False,
        )
    except OSError:
        return None
    return done.stdout.strip() if done.returncode == 0 else None


def compiled(python: str, sources: Sequence[tuple[str, bytes]]) -> dict[str, bytes]:
    """Each source compiled by `python` (the node's version), keyed by its archive name."""
    version = _version(python)
    if version != NODE_PYTHON_VERSION:
        raise ValueError(f"{python} is Python {version}, not the node's {NODE_PYTHON_VERSION}")
    done = subprocess.run(
        # -s, not -I or -E (which ignore it): PYTHONHASHSEED must hold, or 3.9 marshals set constants in
        # their strings' hash order, varying from build to build. The environment is this one alone.
        [python, "-s", "-c", _COMPILE],
        env={"PYTHONHASHSEED": "0", "PATH": os.environ.get("PATH", "")},
        input=json.dumps([[name, data.decode()] for name, data in sources]),
        capture_output=True,
        text=True,
        check=True,
        timeout=120,
    )
    return {name: bytes.fromhex(pyc) for name, pyc in json.loads(done.stdout).items()}


def build_node_bundle(output: Path, layer: Path = LAYER, python: str | None = None) -> str:
    """Write the bundle to `output` (and `output.sha256`); returns its sha256.

    `python`: the node's Python that compiles the .pyc (default: `node_python()`; "" for sources only).
    """
    files = [("__main__.py", (layer / _MAIN).read_bytes())]
    files += [(name, (layer / name).read_bytes()) for name in BUNDLE_FILES]
    compiler = node_python() if python is None else python
    pycs = compiled(compiler, [(n, data) for n, data in files if n.endswith(".py")]) if compiler else {}
    output.parent.mkdir(parents=True, exist_ok=True)
    temporary = output.with_name(output.name + ".tmp")
    with temporary.open("wb") as file:
        file.write(_SHEBANG)
        with zipfile.ZipFile(file, "w") as archive:
            for name, data in files:
                _add(archive, name, data)
                if name in pycs:
                    _add(archive, name + "c", pycs[name])
    temporary.chmod(0o755)
    temporary.replace(output)
    digest = hashlib.sha256(output.read_bytes()).hexdigest()
    output.with_name(output.name + ".sha256").write_text(f"{digest}  {output.name}\n")
    return digest


def main(argv: list[str] | None = None) -> int:
    """`python -m lifeguard_cli.node_bundle OUTPUT`."""
    args = sys.argv[1:] if argv is None else argv
    if len(args) != 1:
        print("usage: python -m lifeguard_cli.node_bundle OUTPUT.pyz", file=sys.stderr)
        return 64
    output = Path(args[0])
    if node_python() is None:
        print(
            f"node bundle: no Python {NODE_PYTHON_VERSION} found; the bundle carries sources only "
            "(set LIFEGUARD_NODE_PYTHON to compile it)",
            file=sys.stderr,
        )
    digest = build_node_bundle(output)
    print(f"{output}  {output.stat().st_size:,} bytes  sha256 {digest}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
