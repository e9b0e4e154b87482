#!/usr/bin/env bash
# Creates .venv with the Lambda runtime's Python (3.12) and installs the project and its pinned tools.
# Idempotent: reinstalls only when pyproject.toml or requirements-lock.txt changed.
set -euo pipefail
cd "$(dirname "$0")/.."

RUNTIME=3.12
VENV=.venv

find_python() {
    local candidate
    for candidate in "python${RUNTIME}" \
        "$(command -v pyenv >/dev/null 2>&1 && pyenv root)/versions/${RUNTIME}"*/bin/"python${RUNTIME}" \
        "/usr/local/bin/python${RUNTIME}" "/usr/bin/python${RUNTIME}"; do
        # pyenv shims exist for versions that are installed but not selected, so run it to be sure.
        if [ -n "$candidate" ] && "$candidate" -c 'import sys, venv; assert sys.version_info[:2] == (3, 12)' \
            >/dev/null 2>&1; then
            "$candidate" -c 'import sys; print(sys.executable)'
            return 0
        fi
    done
    return 1
}

if [ ! -x "$VENV/bin/python${RUNTIME}" ]; then
    if ! python=$(find_python); then
        echo "setup: python${RUNTIME} not found (needed for the Lambda runtime and 'sam build');" \
            "install it, e.g. 'pyenv install ${RUNTIME}'" >&2
        exit 1
    fi
    echo "setup: creating $VENV with $python"
    rm -rf "$VENV"
    "$python" -m venv "$VENV"
fi

stamp="$VENV/.installed"
want=$(cat pyproject.toml requirements-lock.txt | sha256sum | cut -d' ' -f1)
if [ ! -f "$stamp" ] || [ "$(cat "$stamp")" != "$want" ]; then
    echo "setup: installing pinned dependencies into $VENV (about a minute on a new machine)"
    "$VENV/bin/python" -m pip install --quiet --disable-pip-version-check -c requirements-lock.txt \
        -e '.[cli,dev]' 2> >(grep -v '^WARNING: Location' >&2)
    echo "$want" > "$stamp"
fi
