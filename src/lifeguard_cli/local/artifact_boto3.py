"""A boto3 alone, as the Lambda runtime ships it: boto3 and the botocore of the same version (and their own
dependencies) installed with pip into `.aws-sam/artifact-boto3/<version>/`, once.

The artifact test (`tests/artifact`) and `bench/package.py` put it on the path of the built handlers in
place of the runtime's boto3. By default it is the oldest boto3 the layer claims to work with, from the
line `# boto3 >= X.Y.Z comes with the runtime` of `layers/lifeguard/requirements.txt`.

    python -m lifeguard_cli.local.artifact_boto3           # prints the directory of the claimed oldest boto3
    python -m lifeguard_cli.local.artifact_boto3 1.34.0    # of another version
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

__all__ = ["CACHE", "REQUIREMENTS", "boto3_dir", "claimed_oldest_boto3"]

ROOT = Path(__file__).resolve().parents[3]
REQUIREMENTS = ROOT / "layers" / "lifeguard" / "requirements.txt"
CACHE = ROOT / ".aws-sam" / "artifact-boto3"
_CLAIM = re.compile(r"^#\s*boto3\s*>=\s*(\d+\.\d+\.\d+)\b", re.MULTILINE)
_VERSION = re.compile(r"\d+\.\d+\.\d+")
_COMPLETE = ".complete"


def claimed_oldest_boto3(requirements: Path = REQUIREMENTS) -> str:
    """The version of the layer's `# boto3 >= X.Y.Z` comment line; ValueError when it has none."""
    found = _CLAIM.search(requirements.read_text(encoding="utf-8"))
    if found is None:
        raise ValueError(
            f"{requirements.relative_to(ROOT)} claims no oldest boto3: it needs a line "
            "`# boto3 >= X.Y.Z comes with the runtime`"
        )
    return found.group(1)


def boto3_dir(version: str, cache: Path = CACHE) -> Path:
    """The directory holding boto3 `version` and botocore `version`, installed on first use (needs PyPI).

    Since 1.33 boto3 and botocore share version numbers, and the runtime ships a matching pair.
    """
    if not _VERSION.fullmatch(version):
        raise ValueError(f"{version!r} is not a boto3 version (X.Y.Z)")
    target = cache / version
    if (target / _COMPLETE).exists():
        return target
    cache.mkdir(parents=True, exist_ok=True)
    scratch = cache / f".{version}-{os.getpid()}"
    shutil.rmtree(scratch, ignore_errors=True)
    subprocess.run(
        [
            sys.executable,
            "-m",
            "pip",
            "install",
            "--quiet",
            "--disable-pip-version-check",
            "--no-input",
            "--no-warn-conflicts",
            "--target",
            str(scratch),
            f"boto3=={version}",
            f"botocore=={version}",
        ],
        check=True,
    )
    (scratch / _COMPLETE).touch()
    try:
        scratch.rename(target)
    except OSError:  # another process finished first (or left an incomplete copy)
        if not (target / _COMPLETE).exists():
            shutil.rmtree(target, ignore_errors=True)
            scratch.rename(target)
        else:
            shutil.rmtree(scratch, ignore_errors=True)
    return target


def main(argv: list[str]) -> int:
    """Print the directory of the boto3 named on the command line (default: the claimed oldest)."""
    try:
        version = argv[0] if argv else claimed_oldest_boto3()
        print(boto3_dir(version))
    except (ValueError, OSError, subprocess.CalledProcessError) as exc:
        print(f"artifact_boto3: {exc}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
