"""`lifeguard-node`: the node side's command line (also the node bundle's entry point).

`lifeguard-node --version` prints the version; `-h`/`--help` works at the top level and on each command.
Exit status of `boot`: 0 completed (CONTINUE failures included), 3 a STOP_SEQUENCE failure stopped a stage,
4 a TERMINATE failure (the node must be terminated), 64 bad usage or an invalid config, 1 internal error.
Any other bad usage exits 2, as argparse's own: no command, an unknown command, a bad option of `ship` or
`drain`. `drain` (the nodeReady step of a quarantine) exits 0 whether or not it drained (and when it left a
watcher to follow the rest of the boot), 1 when scontrol failed or the watcher could not start, 2 when a
bound (`--watch-seconds`, `--follow-from`, LIFEGUARD_DRAIN_WATCH_SECONDS) is out of range or unreadable.
`ship` exits 2 when it cannot tell the node's ids (pass them), 1 when this Python has no boto3.
The shipper is imported by `ship` alone, so a boot pays nothing for it.
"""

from __future__ import annotations

import contextlib
import errno
import json
import os
import signal
import stat
import sys
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from types import SimpleNamespace
from typing import TYPE_CHECKING, Any, NoReturn

from lifeguard.errors import InvalidLifecycleConfigError
from lifeguard.node.clock import utc_stamp
from lifeguard.node.defaults import DRAIN_WATCH_SECONDS, LAST_LOOK_SECONDS, POLL_INTERVAL_SECONDS
from lifeguard.node.executor import (
    EXIT_INTERNAL_ERROR,
    EXIT_USAGE,
    SCRIPT_TIMEOUT_SECONDS,
    BootResult,
    Executor,
    ExecutorLog,
    NodeIdentity,
    ScriptRun,
)
from lifeguard.node.layout import NodeLayout, ensure_dir
from lifeguard.settings import setting

if TYPE_CHECKING:
    from lifeguard.node.drain import DrainDecision

__all__ = [
    "BOOT_REQUIRED",
    "BOOT_VALUES",
    "EXIT_BAD_USAGE",
    "POLL_INTERVAL_LEAST_SECONDS",
    "POLL_INTERVAL_MOST_SECONDS",
    "end_process",
    "main",
    "plain_boot",
    "terminal_columns",
]


# argparse's own status for a command line it cannot use; `boot` keeps EXIT_USAGE (64), its documented code.
EXIT_BAD_USAGE = 2
# Of LAST_LOOK_SECONDS, what a stopped shipper keeps to save its state and say what it left.
_LAST_LOOK_MARGIN_SECONDS = 0.3


def terminal_columns() -> int:
    """The terminal's width as `shutil.get_terminal_size` tells it: COLUMNS, else the terminal's, else 80."""
    with contextlib.suppress(ValueError):
        columns = int(os.environ.get("COLUMNS", "0"))
        if columns > 0:
            return columns
    stdout = sys.__stdout__
    with contextlib.suppress(AttributeError, ValueError, OSError):
        columns = os.get_terminal_size(stdout.fileno()).columns if stdout is not None else 0
        if columns > 0:
            return columns
    return 80


def main(argv: Sequence[str] | None = None) -> int:
    """Run the command; returns the exit status."""
    given = sys.argv[1:] if argv is None else list(argv)
    args = plain_boot(given)
    if args is None:  # any other command line: argparse reads it, and says what is wrong with it
        from lifeguard.node.options import parsed

        args = parsed(given)
    try:
        return _COMMANDS[args.command](args)
    except KeyboardInterrupt as exc:
        return 128 + (exc.signum if isinstance(exc, _Stopped) else signal.SIGINT)
    except Exception as exc:  # noqa: BLE001 - one clean line, never a traceback, for an unforeseen failure
        print(f"lifeguard-node: internal error: {type(exc).__name__}: {exc}", file=sys.stderr)
        return EXIT_INTERNAL_ERROR


def end_process(status: int) -> NoReturn:
    """End the process with `status` (the bundle's `__main__`). A boot's process ends without Python's
    teardown of its modules, 7 ms of a cached reboot on the node's Python 3.9: by then its files are closed,
    and its output is flushed here. `ship` and `drain` (a thread, a watcher) end as any process does."""
    if sys.argv[1:2] == ["boot"]:  # the command: the top level has no option that takes a value
        for stream in (sys.stdout, sys.stderr):
            with contextlib.suppress(Exception):  # a closed stdout: the boot's status is what matters
                stream.flush()
        os._exit(status)
    sys.exit(status)


def plain_boot(argv: Sequence[str]) -> SimpleNamespace | None:
    """`boot`'s arguments, as argparse would read them, from a command line of the plainest form: `boot`,
    then each option by its full name at most once, its value the next word and not beginning with `-`,
    the required ones given. None for anything else (help, an abbreviation, `--root=/`, an error), which
    `options.parsed` reads. A boot so spared argparse's import and parser starts 8-10 ms sooner on a node's
    Python 3.9, half a millisecond a script of a 20-script boot."""
    if not argv or argv[0] != "boot":
        return None
    values: dict[str, Any] = {}
    json_wanted = False
    words = iter(argv[1:])
    for word in words:
        if word == "--json":
            json_wanted = True
            continue
        make = BOOT_VALUES.get(word)
        value = next(words, None)
        if make is None or word in values or value is None or value.startswith("-"):
            return None
        try:
            values[word] = make(value)
        except ValueError:  # `--script-timeout soon`: argparse's message says what is wrong
            return None
    if not all(option in values for option in BOOT_REQUIRED):
        return None
    args = {option[2:].replace("-", "_"): values.get(option) for option in BOOT_VALUES}
    return SimpleNamespace(command="boot", json=json_wanted, **args)


# The most of a configuration `boot` reads: 40 scripts, each of 20 arguments of 256 characters, every one
# written as JSON escapes, are about 1.3 MB; more is no configuration PCS takes.
CONFIG_MAX_BYTES = 4 * 1024 * 1024


def _config_path(text: str) -> Path:
    """`--config`'s file: a path, or `file://PATH` as the AWS CLI's `--node-lifecycle-actions` takes the
    same JSON (the article's `update-compute-node-group` call): a form typed for one works for the other."""
    return Path(text[len("file://") :] if text.startswith("file://") else text)


# `boot`'s options that take a value, each with what makes its value: `options.parser` gives them to argparse,
# and `plain_boot` reads a boot's plainest command line by them. `--json` is the one flag.
BOOT_VALUES: dict[str, Callable[[str], Any]] = {
    "--config": _config_path,
    "--root": Path,
    "--node-id": str,
    "--cluster-id": str,
    "--cluster-name": str,
    "--compute-node-group-id": str,
    "--compute-node-group-name": str,
    "--script-timeout": float,
}
BOOT_REQUIRED = ("--config", "--root")


def _config_text(path: Path) -> str:
    """The configuration file's text: OSError for a file that is not one (a FIFO, a device: read without
    waiting for a writer), or one larger than CONFIG_MAX_BYTES."""
    fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK)
    try:
        mode = os.fstat(fd).st_mode
        if stat.S_ISDIR(mode):
            raise IsADirectoryError(errno.EISDIR, os.strerror(errno.EISDIR))
        if not stat.S_ISREG(mode):
            raise OSError(errno.EINVAL, "not a regular file")
        with os.fdopen(fd, "rb", closefd=False) as file:
            data = file.read(CONFIG_MAX_BYTES + 1)
    finally:
        os.close(fd)
    if len(data) > CONFIG_MAX_BYTES:
        raise OSError(errno.EFBIG, f"larger than {CONFIG_MAX_BYTES // (1024 * 1024)} MiB")
    return data.decode("utf-8")


def _boot(args: SimpleNamespace) -> int:
    try:
        config: Any = json.loads(_config_text(args.config))
    except OSError as exc:  # no such file, a directory, no permission: as the system says it
        print(f"lifeguard-node: cannot read {args.config}: {exc.strerror or exc}", file=sys.stderr)
        return EXIT_USAGE
    except UnicodeDecodeError as exc:
        where = f"{exc.reason} at byte offset {exc.start}"
        print(f"lifeguard-node: cannot read {args.config}: not UTF-8 text ({where})", file=sys.stderr)
        return EXIT_USAGE
    except (ValueError, RecursionError) as exc:  # nested thousands deep: not a configuration either
        print(f"lifeguard-node: {args.config} is not valid JSON: {exc}", file=sys.stderr)
        return EXIT_USAGE
    try:
        timeout = _seconds(
            "script timeout",
            setting("script_timeout_seconds", args.script_timeout, float(SCRIPT_TIMEOUT_SECONDS), float),
            least=0.001,
        )
        backoff = _seconds("fetch backoff", setting("fetch_backoff_seconds", None, 1.0, float), least=0.0)
        identity = NodeIdentity.resolve(
            args.cluster_id,
            args.cluster_name,
            args.compute_node_group_id,
            args.compute_node_group_name,
            args.node_id,
        )
        layout = NodeLayout(args.root.absolute())
        executor = Executor(
            config,
            layout,
            identity,
            script_timeout_seconds=timeout,
            fetch_backoff_seconds=backoff,
        )
        for needed in (layout.state, layout.actions):  # a --root that cannot hold them: a file, /proc, …
            ensure_dir(needed)
        ExecutorLog(layout.executor_log).close()  # nor its log: a directory, a symlink in its place
    except InvalidLifecycleConfigError as exc:
        print(f"lifeguard-node: {args.config}: nothing was run; {exc}", file=sys.stderr)
        return EXIT_USAGE
    except ValueError as exc:
        print(f"lifeguard-node: {exc}", file=sys.stderr)
        return EXIT_USAGE
    except OSError as exc:
        print(f"lifeguard-node: --root {args.root}: no node layout can be made there: {exc}", file=sys.stderr)
        return EXIT_USAGE
    with contextlib.suppress(OSError):  # the scripts' directory: there they start without a fork (process.py)
        os.chdir(layout.root)
    # An ignored SIGCHLD, kept across exec from whatever started the boot, has the kernel reap each script:
    # its exit status would be lost, and a failure read as a success.
    signal.signal(signal.SIGCHLD, signal.SIG_DFL)
    # Stopped (systemd, a person, the terminal it ran in hung up): as Ctrl-C, so the running script's
    # process group is stopped with it, and its record says so.
    signal.signal(signal.SIGTERM, _interrupted)
    if signal.getsignal(signal.SIGHUP) is not signal.SIG_IGN:  # `nohup lifeguard-node boot` stays as asked
        signal.signal(signal.SIGHUP, _interrupted)
    result = executor.boot()
    try:
        _report(result, as_json=args.json)
        if sys.stdout is not None:  # None: started with stdout closed (`>&-`), where print writes nothing
            sys.stdout.flush()
    except OSError as exc:  # stdout closed (`| true`) or full: the boot's verdict is its exit status still
        # What is left to flush would fail again at exit, which would then exit 120: it goes nowhere.
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        with contextlib.suppress(OSError):
            print(f"lifeguard-node boot: the summary was not written: {exc.strerror or exc}", file=sys.stderr)
    return result.exit_code


class _Stopped(KeyboardInterrupt):
    """The boot was sent SIGTERM or SIGHUP: it stops as on Ctrl-C, and exits 128 + the signal's number."""

    def __init__(self, signum: int) -> None:
        super().__init__(f"signal {signum}")
        self.signum = signum


def _interrupted(signum: int, _frame: object) -> None:
    raise _Stopped(signum)


# The longest wait a setting may ask for: a day (a script's timeout, a fetch's backoff).
SECONDS_MOST = 24 * 3600.0
# The shipper's look at executor.log: a failure report is wanted within seconds, and an idle look is a stat.
POLL_INTERVAL_LEAST_SECONDS, POLL_INTERVAL_MOST_SECONDS = 0.05, 60.0


def _seconds(what: str, value: float, *, least: float, most: float = SECONDS_MOST) -> float:
    """A duration from the command line or the environment, within bounds: `nan`, `inf` or a negative
    value would start a script the boot could not wait for, fail every script at once, or have the
    shipper spin or never look."""
    if not least <= value <= most:  # False for nan, too
        raise ValueError(f"the {what} must be from {least:g} to {most:g} seconds, not {value:g}")
    return value


def _given(*sources: tuple[str, str | None]) -> tuple[str, str] | None:
    """The first of (where, value) that holds a value."""
    return next(((where, value) for where, value in sources if value), None)


def _ship(args: SimpleNamespace) -> int:
    from lifeguard.node.shipper import (
        CloudWatchSink,
        DeliveryFailedError,
        Shipper,
        ShipperError,
        ShipperIdentity,
        ShipperUnavailableError,
        checked_id,
        identity_from_executor_log,
        instance_id_from_imds,
    )

    layout = NodeLayout(args.root)
    logged = identity_from_executor_log(layout)
    env = os.environ
    try:
        if not Path(args.root).is_dir():  # not a node's root: its ids and logs cannot be there
            raise ShipperError(f"--root {args.root}: no such folder")
        cluster = _given(
            ("--cluster-id", args.cluster_id),
            ("PCS_CLUSTER_ID", env.get("PCS_CLUSTER_ID")),
            (f"the cluster id in {layout.executor_log}", logged.get("cluster_id")),
        )
        group = _given(
            ("--compute-node-group-id", args.compute_node_group_id),
            ("PCS_COMPUTE_NODE_GROUP_ID", env.get("PCS_COMPUTE_NODE_GROUP_ID")),
            (f"the group id in {layout.executor_log}", logged.get("compute_node_group_id")),
        )
        if cluster is None or group is None:
            missing = "--cluster-id" if cluster is None else "--compute-node-group-id"
            raise ShipperError(f"cannot tell this node's ids: pass {missing}")
        instance = _given(
            ("--instance-id (or LIFEGUARD_INSTANCE_ID)", setting("instance_id", args.instance_id, "", str))
        ) or ("the instance id IMDSv2 gave", instance_id_from_imds())
        identity = ShipperIdentity(
            checked_id(cluster),
            checked_id(group),
            checked_id(instance, instance=True),
            args.node_id or env.get("PCS_NODE_ID") or logged.get("node_id"),
        )
        interval = _seconds(
            "poll interval",
            setting("poll_interval_seconds", args.poll_interval, POLL_INTERVAL_SECONDS, float),
            least=POLL_INTERVAL_LEAST_SECONDS,
            most=POLL_INTERVAL_MOST_SECONDS,
        )
        shipper = Shipper(layout, identity, CloudWatchSink(args.log_group, identity.stream))
        # Stopped (systemd, as the instance a TERMINATE failure ends shuts down): a last look at what was
        # logged since the last poll, then out; that failure is the report that matters most. Out within
        # LAST_LOOK_SECONDS of the signal whatever a put in flight does: a shutdown is not held up.
        import threading  # here: a cached reboot never loads it (1-2 ms of its start on the node's Python)

        stopped: list[threading.Timer] = []

        signaled: list[float] = []

        def stop_soon(_signum: int, _frame: object) -> None:
            if not stopped:
                signaled.append(time.monotonic())
                stopped.append(threading.Timer(LAST_LOOK_SECONDS, _out_of_time, args=(shipper,)))
                stopped[0].daemon = True
                stopped[0].start()

        previous = signal.signal(signal.SIGTERM, stop_soon)
        try:
            if not args.once:  # a service: its journal says when it began to look, and where it sends
                shipper.sink.connect()
                print(
                    f"lifeguard-node ship: shipping {layout.executor_log} to {args.log_group}/"
                    f"{identity.stream}, every {interval:g} s",
                    file=sys.stderr,
                    flush=True,
                )
            shipper.run(once=args.once, poll_interval=interval, stop=lambda: bool(stopped))
            if args.once:  # run by hand: what it did, in one line
                sent = shipper.delivered
                print(
                    f"lifeguard-node ship: delivered {sent} report(s) to {args.log_group}/{identity.stream}"
                    if sent
                    else f"lifeguard-node ship: nothing new to deliver to {args.log_group}/{identity.stream}"
                )
            if stopped:
                # Its failed puts tried again until just before the deadline, which ends it regardless.
                shipper.last_look(
                    LAST_LOOK_SECONDS - _LAST_LOOK_MARGIN_SECONDS - (time.monotonic() - signaled[0])
                )
                if shipper.state.pending:  # kept in its state: the shipper's next start sends them
                    left = len(shipper.state.pending)
                    print(
                        f"lifeguard-node ship: stopped with {left} report(s) not delivered", file=sys.stderr
                    )
        finally:  # on every way out: the deadline let go, SIGTERM as it was
            if stopped:
                stopped[0].cancel()
            signal.signal(signal.SIGTERM, previous)
    except (ShipperUnavailableError, DeliveryFailedError) as exc:  # no boto3; --once could not deliver
        print(f"lifeguard-node ship: {exc}", file=sys.stderr)
        return 1
    except (ShipperError, ValueError) as exc:  # ids it cannot tell, a setting out of its bounds: pass them
        print(f"lifeguard-node ship: {exc}", file=sys.stderr)
        return EXIT_BAD_USAGE
    if shipper.skipped_lines:
        print(
            f"lifeguard-node ship: skipped {shipper.skipped_lines} unreadable executor.log lines",
            file=sys.stderr,
        )
    return 0


def _out_of_time(shipper: Any) -> None:
    """The end of a stopped shipper whose last look took longer than LAST_LOOK_SECONDS (a put unanswered)."""
    with contextlib.suppress(Exception):
        left = len(shipper.state.pending)
        print(
            f"lifeguard-node ship: stopped after {LAST_LOOK_SECONDS:g} s with {left} report(s) not delivered",
            file=sys.stderr,
            flush=True,
        )
    os._exit(0)


def _drain(args: SimpleNamespace) -> int:
    from lifeguard.node import drain as node_drain  # here: a boot never loads the drain step

    try:
        root = args.root or Path(setting("node_root", None, "/", str))
        scontrol = setting("scontrol", None, "", str) or node_drain.find_scontrol(root)
        default_seconds = float(DRAIN_WATCH_SECONDS)
        seconds = setting("drain_watch_seconds", args.watch_seconds, default_seconds, float)
        named = "--watch-seconds" if args.watch_seconds is not None else "LIFEGUARD_DRAIN_WATCH_SECONDS"
        seconds = _seconds(f"watch ({named})", seconds, least=0)
        if args.follow_from is not None and args.follow_from < 0:  # the watcher's own, never a person's
            raise ValueError(f"the offset to follow from must be 0 or more, not {args.follow_from}")
        if not Path(root).is_dir():  # not a node's root: no boot's log to read, and "not drained" would lie
            raise ValueError(f"--root {root}: no such folder")
    except ValueError as exc:
        print(f"lifeguard-node drain: {exc}", file=sys.stderr)
        return EXIT_BAD_USAGE
    layout = NodeLayout(root)
    offset = args.follow_from
    watcher = offset is not None  # the detached watcher: its output is appended to a log across boots
    if offset is None:
        decision = node_drain.drain(
            layout, args.reason, node_id=args.node_id, since=args.since, scontrol=scontrol
        )
        if decision.drained or decision.error or seconds == 0:
            return _outcome(decision)
        print(f"not drained: {decision.reason} so far", flush=True)
        offset = decision.read_to
        if not args.foreground:
            return _start_watcher(layout, args, offset, seconds)
    else:
        _said(f"watching executor.log until this boot ends, at most {seconds:g} s", stamped=True)
    followed = node_drain.watch(
        layout, args.reason, offset=offset, node_id=args.node_id, watch_seconds=seconds, scontrol=scontrol
    )
    return _outcome(followed, stamped=watcher)


def _start_watcher(layout: NodeLayout, args: SimpleNamespace, offset: int, seconds: float) -> int:
    from lifeguard.node import drain as node_drain

    try:
        pid = node_drain.start_watcher(
            layout, args.reason, offset=offset, node_id=args.node_id, watch_seconds=seconds
        )
    except OSError as exc:
        print(f"lifeguard-node drain: cannot start the watcher: {exc}", file=sys.stderr)
        return EXIT_INTERNAL_ERROR
    print(
        f"watching: pid {pid} drains the node if a script stops its sequence before this boot ends "
        f"(at most {seconds:g} s); its log: {layout.drain_watch_log}"
    )
    return 0


def _said(text: str, *, stamped: bool = False, error: bool = False) -> None:
    """One line of output; the watcher's carry the time and its pid."""
    if stamped:
        text = f"{utc_stamp(time.time(), fraction=False)} [{os.getpid()}] {text}"
    print(text, file=sys.stderr if error else sys.stdout, flush=True)


def _outcome(decision: DrainDecision, *, stamped: bool = False) -> int:
    if decision.error:
        _said(f"lifeguard-node drain: {decision.error}", stamped=stamped, error=True)
        return EXIT_INTERNAL_ERROR
    _said(f"{'drained' if decision.drained else 'not drained'}: {decision.reason}", stamped=stamped)
    return 0


def _plain_error(run: ScriptRun) -> str | None:
    """A run's error in plain words: PCS's for an exit status (`ExitStatus(unix_wait_status(256))`, which
    executor.log keeps, as PCS's agent writes it) is said as the status it is."""
    error = run.error
    if error and run.exit_code is not None and "ExitStatus(unix_wait_status(" in error:
        return f"script '{run.script}' failed with exit status {run.exit_code}"
    return error


def _report(result: BootResult, *, as_json: bool) -> None:
    if as_json:
        runs = [{**run._asdict(), "error": _plain_error(run)} for run in result.runs]
        document = {
            "boot": result.boot,
            "first_boot": result.first_boot,
            "exit_code": result.exit_code,
            "runs": runs,
        }
        print(json.dumps(document, indent=2))
        return
    kind = "first boot" if result.first_boot else f"reboot (boot {result.boot})"
    print(f"{kind}: exit {result.exit_code}")
    width = terminal_columns()
    names = max((len(run.script) for run in result.runs), default=0)
    for run in result.runs:
        code = "" if run.exit_code is None else f" exit={run.exit_code}"
        line = f"  {run.stage:<17} {run.script:<{names}} {run.outcome:<9}{code}  onError {run.on_error}"
        error = run.error
        if error != _plain_error(run):
            error = None  # PCS's words for the exit status (executor.log keeps them): exit= says it here
        if error and len(line) + 2 + len(error) <= width:
            line += f"  {error}"
        elif error:  # under its run, wrapped between words
            import textwrap

            line += "\n" + textwrap.fill(
                error, max(width, 40), initial_indent=" " * 6, subsequent_indent=" " * 6
            )
        print(line)


_COMMANDS: dict[str, Callable[[SimpleNamespace], int]] = {"boot": _boot, "ship": _ship, "drain": _drain}

if __name__ == "__main__":
    sys.exit(main())
