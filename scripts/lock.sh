#!/usr/bin/env bash
# Re-resolves requirements-lock.txt from pyproject.toml's pins in a throwaway venv. Run after changing a pin.
set -euo pipefail
cd "$(dirname "$0")/.."
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
"${PYTHON312:-.venv/bin/python3.12}" -m venv "$tmp/venv"
"$tmp/venv/bin/pip" install --quiet --disable-pip-version-check '.[dev]' 2> >(grep -v '^WARNING: Location' >&2)
{
    echo "# Every package of the development environment, pinned. Regenerate with scripts/lock.sh."
    "$tmp/venv/bin/pip" freeze --exclude pcs-lifeguard
} > requirements-lock.txt
echo "lock: $(grep -vc '^#' requirements-lock.txt) packages pinned"
