"""Build the node bundle: one file a node fetches and runs with its own Python (3.9+).

The bundle is a zipapp of the node side of the layer: `lifeguard.node` and the modules it imports, with
the PCS service model they check configs against. It needs only the standard library, plus boto3 for
`s3://` fetches and CloudWatch Logs (Amazon Linux 2023: `dnf install -y python3-boto3`). Being pure
Python it runs on x86_64 and arm64 alike. The zip is reproducible: same sources, same bytes, same sha256.

    python -m lifeguard_cli.node_bundle dist/lifeguard-node.pyz
"""

from __future__ import annotations

import hashlib
import sys
import zipfile
from pathlib import Path

__all__ = ["BUNDLE_FILES", "build_node_bundle"]

LAYER = Path(__file__).resolve().parents[2] / "layers" / "lifeguard"
# The node side and what it imports; the pydantic models of the Lambdas stay out.
BUNDLE_FILES = (
    "lifeguard/__init__.py",
    "lifeguard/errors.py",
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
    "lifeguard/node/process.py",
    "lifeguard/node/report.py",
    "lifeguard/node/shipper.py",
)
_MAIN = b"import sys\n\nfrom lifeguard.node.cli import main\n\nsys.exit(main())\n"
_SHEBANG = b"#!/usr/bin/env python3\n"
_EPOCH = (1980, 1, 1, 0, 0, 0)


def _add(archive: zipfile.ZipFile, name: str, data: bytes) -> None:
    info = zipfile.ZipInfo(name, date_time=_EPOCH)
    info.compress_type = zipfile.ZIP_DEFLATED
    info.external_attr = 0o644 << 16
    archive.writestr(info, data)


def build_node_bundle(output: Path, layer: Path = LAYER) -> str:
    """Write the bundle to `output` (and `output.sha256`); returns its sha256."""
    output.parent.mkdir(parents=True, exist_ok=True)
    temporary = output.with_name(output.name + ".tmp")
    with temporary.open("wb") as file:
        file.write(_SHEBANG)
        with zipfile.ZipFile(file, "w") as archive:
            _add(archive, "__main__.py", _MAIN)
            for name in BUNDLE_FILES:
                _add(archive, name, (layer / name).read_bytes())
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
    digest = build_node_bundle(output)
    print(f"{output}  {output.stat().st_size:,} bytes  sha256 {digest}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
