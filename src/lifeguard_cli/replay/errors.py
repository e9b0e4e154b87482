"""The replay's one error: what stops it before or while it runs, said in one line."""

from __future__ import annotations

from lifeguard.errors import LifeguardError

__all__ = ["ReplayError"]


class ReplayError(LifeguardError):
    """The replay itself cannot run (a missing file, an invalid --config, a rule it cannot follow)."""
