"""The replay's errors: what stops it before or while it runs, said in one line.

ReplayError                                 the replay cannot run (a rule it cannot follow, a refused call)
 ├── UnreadableInputError (ValueError)      an input file, or a line of it, is of no shape a replay reads
 └── InvalidNodeBundleError (ValueError)    --node-bundle is not an s3:// or https:// location
"""

from __future__ import annotations

from lifeguard.errors import LifeguardError

__all__ = ["InvalidNodeBundleError", "ReplayError", "UnreadableInputError"]


class ReplayError(LifeguardError):
    """The replay itself cannot run (a missing file, an invalid --config, a rule it cannot follow)."""


class UnreadableInputError(ReplayError, ValueError):
    """An input a replay cannot take: `where` names the file (and the line, or the entry of a document),
    `problem` says what it is instead; the message ends with the shapes a replay does read."""

    def __init__(self, where: str, problem: str, *, accepted: str = "") -> None:
        self.where = where
        self.problem = problem
        super().__init__(f"{where}: {problem}" + (f". {accepted}" if accepted else ""))


class InvalidNodeBundleError(ReplayError, ValueError):
    """--node-bundle is not a location a lifecycle script can be fetched from; `shown` is the location
    without its query string (a presigned URL's signature is never repeated)."""

    def __init__(self, shown: str, why: str = "") -> None:
        self.shown = shown
        super().__init__(
            f"--node-bundle {shown!r}: not a node bundle location{f' ({why})' if why else ''}: give "
            "s3://BUCKET/KEY or https://HOST/PATH"
        )
