"""`lifeguard-node`'s command line as argparse reads it: every command, its options, its help and its
usage errors. `cli.main` imports it for any command line but a boot's of the plainest form (`cli.plain_boot`
reads that one), so a boot pays neither for argparse nor for building this parser."""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence
from pathlib import Path
from types import SimpleNamespace
from typing import Any, NoReturn

from lifeguard import __version__
from lifeguard.node.cli import (
    BOOT_REQUIRED,
    BOOT_VALUES,
    EXIT_BAD_USAGE,
    POLL_INTERVAL_LEAST_SECONDS,
    POLL_INTERVAL_MOST_SECONDS,
    terminal_columns,
)
from lifeguard.node.defaults import DRAIN_WATCH_SECONDS, POLL_INTERVAL_SECONDS
from lifeguard.node.executor import EXIT_USAGE, SCRIPT_TIMEOUT_SECONDS

__all__ = ["parsed", "parser"]

# What `boot --help` says of each of `cli.BOOT_VALUES`, its options that take a value.
_BOOT_HELP = {
    "--config": "nodeLifecycleActions JSON as the PCS API takes it: a path, or file://PATH (as the AWS CLI)",
    "--root": "the node's root directory (/ on a node)",
    "--node-id": "Slurm node name (PCS_NODE_ID); default: <group name>-1, not the host name, as on PCS",
    "--cluster-id": "PCS_CLUSTER_ID; default: that variable, else pcs_local",
    "--cluster-name": "PCS_CLUSTER_NAME; default: the cluster id",
    "--compute-node-group-id": "PCS_COMPUTE_NODE_GROUP_ID; default: that variable, else pcs_localgroup",
    "--compute-node-group-name": (
        "PCS_COMPUTE_NODE_GROUP_NAME; default: the group id if given, else local-group"
    ),
    "--script-timeout": f"seconds a script may run (default {SCRIPT_TIMEOUT_SECONDS}; "
    "env LIFEGUARD_SCRIPT_TIMEOUT_SECONDS)",
}


def parsed(argv: Sequence[str]) -> SimpleNamespace:
    """The command and its arguments read from ARGV; bad usage, `--help` and `--version` exit here."""
    whole = parser()
    args = whole.parse_args(argv)
    if args.command is None:
        whole.error("the following arguments are required: command")
    return SimpleNamespace(**vars(args))


class _Formatter(argparse.HelpFormatter):
    """argparse's help, as wide as the terminal, found without importing shutil: argparse makes a formatter
    for every argument it adds, and without a width the first one imports shutil (bz2 and lzma with it), a
    tenth of a cached boot's start."""

    def __init__(self, prog: str, **kwargs: Any) -> None:
        kwargs.setdefault("width", terminal_columns() - 2)
        super().__init__(prog, **kwargs)


class _Parser(argparse.ArgumentParser):
    """A parser whose bad usage exits with `usage_exit_code`."""

    def __init__(self, *args: Any, usage_exit_code: int = EXIT_BAD_USAGE, **kwargs: Any) -> None:
        kwargs.setdefault("formatter_class", _Formatter)
        super().__init__(*args, **kwargs)
        self.usage_exit_code = usage_exit_code

    def error(self, message: str) -> NoReturn:
        """Print the usage and `message`, then exit with this parser's usage exit code."""
        self.print_usage(sys.stderr)
        self.exit(self.usage_exit_code, f"{self.prog}: {message}\n")


class _CommandParser(_Parser):
    """A command's parser. It reports the arguments it does not know itself: argparse would leave them to
    the top-level parser, whose exit code is not this command's."""

    def parse_known_args(  # type: ignore[override]
        self, args: Sequence[str] | None = None, namespace: argparse.Namespace | None = None
    ) -> tuple[argparse.Namespace, list[str]]:
        """Parse `args`; an argument this command does not know is bad usage."""
        known, unknown = super().parse_known_args(args, namespace)
        if unknown:
            self.error(f"unrecognized arguments: {' '.join(unknown)}")
        return known, unknown


def parser() -> argparse.ArgumentParser:
    """lifeguard-node's whole command line: its commands, their options, help and usage errors."""
    parser = _Parser(prog="lifeguard-node", description="PCS Lifeguard on the node.")
    parser.add_argument("--version", action="version", version=f"%(prog)s {__version__}")
    # Not `required`: argparse would then say a command is missing before it names an option it does not
    # know (`lifeguard-node --nosuch`); `main` says a command is missing once the options were read.
    commands = parser.add_subparsers(dest="command", parser_class=_CommandParser)

    boot = commands.add_parser(
        "boot",
        usage_exit_code=EXIT_USAGE,
        help="run one boot of this node's lifecycle actions",
        description="Run one boot: nodeBootstrapped, then nodeReady, with PCS's semantics. "
        "Example: lifeguard-node boot --config actions.json --root /",
    )
    for option, make in BOOT_VALUES.items():  # the one table of boot's options, each with its help here
        boot.add_argument(option, required=option in BOOT_REQUIRED, type=make, help=_BOOT_HELP[option])
    boot.add_argument("--json", action="store_true", help="print the result as JSON")

    ship = commands.add_parser(
        "ship",
        help="ship node reports of finished script runs to CloudWatch Logs",
        description="Tail executor.log and the script logs under ROOT and put one node report per finished "
        "script run into LOG_GROUP, stream <cluster-id>/<instance-id>. "
        "Example: lifeguard-node ship --root / --log-group /pcs-lifeguard/node-reports",
    )
    ship.add_argument("--root", required=True, type=Path, help="the node's root directory (/ on a node)")
    ship.add_argument("--log-group", required=True, help="CloudWatch Logs group of node reports")
    ship.add_argument("--once", action="store_true", help="ship what is there now, then exit")
    ship.add_argument("--cluster-id", help="default: PCS_CLUSTER_ID, else what the executor logged")
    ship.add_argument(
        "--compute-node-group-id", help="default: PCS_COMPUTE_NODE_GROUP_ID, else the executor's"
    )
    ship.add_argument("--node-id", help="Slurm node name; default: PCS_NODE_ID, else the executor's")
    ship.add_argument("--instance-id", help="default: LIFEGUARD_INSTANCE_ID, else IMDSv2")
    ship.add_argument(
        "--poll-interval",
        type=float,
        help=f"seconds between looks, {POLL_INTERVAL_LEAST_SECONDS:g} to {POLL_INTERVAL_MOST_SECONDS:g} "
        f"(default {POLL_INTERVAL_SECONDS})",
    )
    drain = commands.add_parser(
        "drain",
        help="drain this node in Slurm if a lifecycle script stops its sequence this boot",
        description="The nodeReady step a Lifeguard quarantine adds: when executor.log shows a STOP_SEQUENCE "
        "failure since this boot began, run scontrol to drain the node with REASON (the failed scripts are "
        "appended). Otherwise a detached watcher follows executor.log until this boot ends (at most "
        "--watch-seconds) and drains the node if a later script stops its sequence; the step itself returns "
        "at once. A node with no such failure stays in service. "
        'Example: lifeguard-node drain --reason "lifeguard: kept for debugging"',
    )
    drain.add_argument("--reason", required=True, help="Slurm's drain reason (the scripts are appended)")
    drain.add_argument(
        "--root", type=Path, help="the node's root directory (default: LIFEGUARD_NODE_ROOT, else /)"
    )
    drain.add_argument("--node-id", help="Slurm node name; default: PCS_NODE_ID, else the short host name")
    drain.add_argument("--since", type=float, help="epoch seconds this boot began (default: the kernel's)")
    drain.add_argument(
        "--watch-seconds",
        type=float,
        help=f"follow the rest of the boot this long at most (default {DRAIN_WATCH_SECONDS}; "
        "env LIFEGUARD_DRAIN_WATCH_SECONDS); 0: check once, start no watcher",
    )
    drain.add_argument(
        "--foreground", action="store_true", help="follow the rest of the boot in this process, not detached"
    )
    # What the detached watcher runs: follow executor.log from this byte (the step read up to there).
    drain.add_argument("--follow-from", type=int, help=argparse.SUPPRESS)
    return parser
