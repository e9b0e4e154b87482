"""The files the CLI runs with besides its code: the recorded events and scenarios (`events/`), the stack's
`template.yaml` (its event rules route a replay) and the publish_bundle function (the local stack
publishes the node bundle with it).

Run from the project's checkout (an editable install, `make demo`), they are the checkout's own. An
installed package (`pipx install .`, a wheel) carries copies of them in `lifeguard_cli/_data`, put there
when the wheel is built (setup.py), so every command works from any directory.
"""

from __future__ import annotations

from pathlib import Path

__all__ = ["BUNDLED", "BUNDLED_PATHS", "CHECKOUT", "resource", "shipped_file"]

CHECKOUT = Path(__file__).resolve().parents[2]
BUNDLED = Path(__file__).resolve().parent / "_data"
# What setup.py copies into a wheel, relative to the checkout (setup.py reads it from here).
BUNDLED_PATHS = ("events", "template.yaml", "functions/publish_bundle/app.py")


def resource(*parts: str) -> Path:
    """The path of a shipped file, e.g. `resource("events", "configs", "article-terminate.json")`."""
    base = CHECKOUT if (CHECKOUT / "template.yaml").is_file() and (CHECKOUT / "events").is_dir() else BUNDLED
    return base.joinpath(*parts)


def shipped_file(path: Path) -> Path:
    """`path` itself when it exists (or is absolute); else, for a relative path under `events/` or the
    template, the copy Lifeguard ships under that name, so the README's and `--help`'s examples run from any
    directory once installed. The path as given when there is no such copy either."""
    if path.exists() or path.is_absolute():
        return path
    parts = path.parts
    if parts[:1] == ("events",) or parts == ("template.yaml",):
        candidate = resource(*parts)
        if candidate.is_file():
            return candidate
    return path
