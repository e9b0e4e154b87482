#!/usr/bin/env bash
# Creates .venv with the Lambda runtime's Python (3.12) and installs the project and its pinned tools.
# Idempotent: reinstalls only when pyproject.toml or requirements-lock.txt changed.
set -euo pipefail
cd "$(dirname "$0")/.."

RUNTIME=3.12
NODE_PYTHON=3.9  # the node's system Python on Amazon Linux 2023
VENV=.venv
NODE_VENV=.venv/node39

find_python() {  # find_python 3.12 -> path of an interpreter of exactly that version
    local version=$1 candidate
    for candidate in "python${version}" \
        "$(command -v pyenv >/dev/null 2>&1 && pyenv root)/versions/${version}"*/bin/"python${version}" \
        "/usr/local/bin/python${version}" "/usr/bin/python${version}"; do
        # pyenv shims exist for versions that are installed but not selected, so run it to be sure.
        if [ -n "$candidate" ] && "$candidate" -c "import sys, venv; assert sys.version_info[:2] == (${version/./, })" \
            >/dev/null 2>&1; then
            "$candidate" -c 'import sys; print(sys.executable)'
            return 0
        fi
    done
    return 1
}

if [ ! -x "$VENV/bin/python${RUNTIME}" ]; then
    if ! python=$(find_python "$RUNTIME"); then
        echo "setup: python${RUNTIME} not found (needed for the Lambda runtime and 'sam build');" \
            "install it, e.g. 'pyenv install ${RUNTIME}'" >&2
        exit 1
    fi
    echo "setup: creating $VENV with $python"
    rm -rf "$VENV"
    "$python" -m venv "$VENV"
fi

side_venv() {  # side_venv DIR PYTHON REQUIREMENTS WHAT -> DIR holds exactly REQUIREMENTS (reinstalled when they change)
    local dir=$1 python=$2 requirements=$3 what=$4 want
    want=$(sha256sum "$requirements" | cut -d' ' -f1)
    if [ -f "$dir/.installed" ] && [ "$(cat "$dir/.installed")" = "$want" ]; then
        return 0
    fi
    echo "setup: creating $dir with $python ($what)"
    rm -rf "$dir"
    "$python" -m venv "$dir"
    "$dir/bin/python" -m pip install --quiet --disable-pip-version-check -r "$requirements" \
        2> >(grep -v '^WARNING: Location' >&2)
    echo "$want" > "$dir/.installed"
}

# The side venvs install beside the project's own (each waits on the package index as much as it computes).
side_pids=()

# checkov checks the template; its pins clash with the project's, so it has a venv of its own.
side_venv .venv/checkov "$VENV/bin/python" requirements-checkov.txt "checkov, pinned" &
side_pids+=($!)

# The node code runs on the node's Python 3.9; tests run the node bundle with it when it is there.
if node_python=$(find_python "$NODE_PYTHON"); then
    side_venv "$NODE_VENV" "$node_python" requirements-node39.txt "the node's Python" &
    side_pids+=($!)
else
    echo "setup: python${NODE_PYTHON} not found; the node bundle's Python ${NODE_PYTHON} tests will be skipped" >&2
fi

stamp="$VENV/.installed"
want=$(cat pyproject.toml requirements-lock.txt | sha256sum | cut -d' ' -f1)
if [ ! -f "$stamp" ] || [ "$(cat "$stamp")" != "$want" ]; then
    echo "setup: installing pinned dependencies into $VENV (about a minute on a new machine)"
    "$VENV/bin/python" -m pip install --quiet --disable-pip-version-check -c requirements-lock.txt \
        -e '.[dev]' 2> >(grep -v '^WARNING: Location' >&2)
    echo "$want" > "$stamp"
fi

for pid in "${side_pids[@]}"; do
    wait "$pid" || { echo "setup: a side venv failed to install (above)" >&2; exit 1; }
done

# The HTML report of `lifeguard simulate` is tested in a real headless browser: Debian's chromium.
if [ ! -x /usr/bin/chromium ]; then
    if [ "$(id -u)" -eq 0 ]; then
        echo "setup: installing chromium with apt-get (for the HTML report's browser tests)"
        apt-get update -qq
        DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends chromium >/dev/null
    else
        echo "setup: /usr/bin/chromium not found (the HTML report's browser tests need it); run" \
            "'sudo apt-get update && sudo apt-get install -y --no-install-recommends chromium'" >&2
    fi
fi
