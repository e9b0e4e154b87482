"""What the built package weighs: the layer zipped as SAM uploads it, and unzipped, against Lambda's quotas.
Each handler's cold import is `bench/cold_start.py`'s.

    .venv/bin/sam build && .venv/bin/python bench/package.py [--json]
"""

from __future__ import annotations

import argparse
import io
import json
import sys
import zipfile
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import yaml  # type: ignore[import-untyped]

ROOT = Path(__file__).resolve().parent.parent
BUILD = ROOT / ".aws-sam" / "build"
ARCHITECTURES = {"x86_64": "x86_64", "AMD64": "x86_64", "aarch64": "arm64", "arm64": "arm64"}
# Lambda's quotas: a layer or function zip uploaded directly, and function plus layers unzipped.
ZIPPED_LIMIT_BYTES = 50 * 1024 * 1024
UNZIPPED_LIMIT_BYTES = 250 * 1024 * 1024


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


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--json", action="store_true", help="the figures as JSON")
    args = parser.parse_args()
    template_path = BUILD / "template.yaml"
    if not template_path.exists():
        print(
            f"bench/package.py: {template_path.relative_to(ROOT)} is missing: run `sam build` first",
            file=sys.stderr,
        )
        return 1
    template = yaml.safe_load(template_path.read_text(encoding="utf-8"))
    sizes = {}
    for arch, layer in sorted(_layers(template).items()):
        zipped, unzipped = zipped_size(layer)
        sizes[arch] = {"zipped_bytes": zipped, "unzipped_bytes": unzipped}
    if args.json:
        print(json.dumps({"layer_sizes": sizes}, indent=2))
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
    return 0


if __name__ == "__main__":
    sys.exit(main())
