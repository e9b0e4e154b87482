"""`lifeguard-node boot`: one boot of one node, running `nodeLifecycleActions` with PCS's semantics.

nodeBootstrapped runs in order, then nodeReady. First boot or reboot is decided from state under the
root, written only once a boot finished. FIRST_BOOT_ONLY scripts run on the first boot, EVERY_BOOT ones on
every boot. onError TERMINATE stops everything (exit 4), STOP_SEQUENCE skips the rest of its stage (exit 3
at the end), CONTINUE records and goes on. Logs follow the node layout (`layout`), so the shipper reads
this executor's files and the PCS agent's alike. Fetching and caching scripts is `lifeguard.node.cache`;
running one as a process, `lifeguard.node.process`. The fetcher is imported only when a script must be
fetched: a reboot that reuses every cached script never loads urllib or ssl.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import sys
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any

from lifeguard.errors import InvalidLifecycleConfigError
from lifeguard.lifecycle_rules import (
    DEFAULT_EXECUTION_POLICY,
    DEFAULT_ON_ERROR,
    DEFAULT_SCRIPT_CACHING_POLICY,
    STAGES,
    find_problems,
)
from lifeguard.named_tuple import NamedTuple
from lifeguard.node import clock as node_clock
from lifeguard.node.cache import ScriptCache, ScriptSource
from lifeguard.node.layout import (
    EXECUTOR_LOG_MODE,
    FILE_MODE,
    NodeLayout,
    atomic_write,
    ensure_dir,
    open_appended,
)
from lifeguard.node.process import CANNOT_START_EXIT_CODE, KILL_GRACE_SECONDS, run_script, stop_signal

if TYPE_CHECKING:
    from lifeguard.node.fetch import ScriptFetcher

__all__ = [
    "BOOT_COMPLETED",
    "BOOT_STARTED",
    "EXIT_COMPLETED",
    "EXIT_INTERNAL_ERROR",
    "EXIT_STOP_SEQUENCE",
    "EXIT_TERMINATE",
    "EXIT_USAGE",
    "PCS_ON_ERROR_NAMES",
    "SCRIPT_TIMEOUT_SECONDS",
    "BootResult",
    "Executor",
    "NodeIdentity",
    "ScriptRun",
    "ScriptSpec",
]

EXIT_COMPLETED = 0
EXIT_INTERNAL_ERROR = 1
EXIT_STOP_SEQUENCE = 3
EXIT_TERMINATE = 4
EXIT_USAGE = 64

# Each script's, not the boot's: PCS gives a node about 30 minutes to join Slurm, so one script that takes
# all of it has failed the node already (several long ones together can outlast the window: PCS, not the
# executor, ends such a node).
SCRIPT_TIMEOUT_SECONDS = 30 * 60

_NULL = object()  # a field written as JSON null rather than left out

# How the PCS agent spells onError in executor.log (`"on_error":"StopSequence"`).
PCS_ON_ERROR_NAMES = {"TERMINATE": "Terminate", "STOP_SEQUENCE": "StopSequence", "CONTINUE": "Continue"}
# The records that open and close a boot in executor.log (the drain watcher ends at either).
BOOT_STARTED = "boot started"
BOOT_COMPLETED = "boot completed"
SKIPPED = "script skipped"  # a script not run: its onError given, as in its other records
FAILURE_MESSAGES = {
    "TERMINATE": "lifecycle script failed; terminating node",
    "STOP_SEQUENCE": "lifecycle script failed; stopping remaining scripts",
    "CONTINUE": "lifecycle script failed; continuing",
}
# A script stopped with the boot (a shutdown, a person, a signal to the executor): whatever its onError, no
# script runs after it. A failure all the same, said as PCS's are begun (the shipper reads them so).
STOPPED_MESSAGE = "lifecycle script failed; boot stopped"


class NodeIdentity(NamedTuple):
    """Who this node is, as PCS tells its scripts."""

    cluster_id: str
    cluster_name: str
    compute_node_group_id: str
    compute_node_group_name: str
    node_id: str

    @classmethod
    def resolve(
        cls,
        cluster_id: str | None = None,
        cluster_name: str | None = None,
        compute_node_group_id: str | None = None,
        compute_node_group_name: str | None = None,
        node_id: str | None = None,
    ) -> NodeIdentity:
        """Flags first, then the PCS_* variables already in the environment, then local defaults. As on
        PCS, the local node's Slurm name (`<group name>-1`) is not its host name, and its group's name
        is not its id: a script that takes one for the other fails here as it would there (the article's
        ready-check uses PCS_NODE_ID for that reason)."""
        env = os.environ
        cluster = cluster_id or env.get("PCS_CLUSTER_ID") or "pcs_local"
        group = compute_node_group_id or env.get("PCS_COMPUTE_NODE_GROUP_ID")
        group_name = (
            compute_node_group_name
            or env.get("PCS_COMPUTE_NODE_GROUP_NAME")
            or (group if group is not None else "local-group")
        )
        identity = cls(
            cluster_id=cluster,
            cluster_name=cluster_name or env.get("PCS_CLUSTER_NAME") or cluster,
            compute_node_group_id=group or "pcs_localgroup",
            compute_node_group_name=group_name,
            node_id=node_id or env.get("PCS_NODE_ID") or f"{group_name}-1",
        )
        for name, value in identity._asdict().items():
            _text(name, value)
        return identity

    def environ(self, first_boot: bool) -> dict[str, str]:
        """The PCS_* variables every script gets."""
        return {
            "PCS_CLUSTER_ID": self.cluster_id,
            "PCS_CLUSTER_NAME": self.cluster_name,
            "PCS_COMPUTE_NODE_GROUP_ID": self.compute_node_group_id,
            "PCS_COMPUTE_NODE_GROUP_NAME": self.compute_node_group_name,
            "PCS_NODE_ID": self.node_id,
            "PCS_IS_FIRST_BOOT": "1" if first_boot else "0",
        }


def _text(name: str, value: str) -> None:
    """Refuse (ValueError) an id or name that is not UTF-8 text: bytes a terminal or a variable passed that
    no script's environment or executor.log record could carry."""
    if value.isascii():
        return
    try:
        value.encode("utf-8")
    except UnicodeEncodeError:
        raise ValueError(f"the node's id {name} {value!r} is not UTF-8 text") from None


class ScriptSpec(NamedTuple):
    """One script of a validated config, with PCS's defaults applied."""

    stage: str
    position: int  # in its stage's list
    name: str
    location: str
    version_id: str | None
    checksum: str | None
    arguments: tuple[str, ...]
    on_error: str
    execution_policy: str

    @classmethod
    def all_of(cls, config: Mapping[str, Any]) -> list[ScriptSpec]:
        """Every script of a config that `find_problems` accepted, in run order."""
        specs = []
        for stage in STAGES:
            for index, script in enumerate(config["stages"].get(stage) or []):
                source = script["scriptSource"]
                specs.append(
                    cls(
                        stage=stage,
                        position=index,
                        name=script["name"],
                        location=source["scriptLocation"],
                        version_id=source.get("s3VersionId") or None,
                        checksum=source.get("checksum"),
                        arguments=tuple(script.get("arguments") or ()),
                        on_error=script.get("onError", DEFAULT_ON_ERROR),
                        execution_policy=script.get("executionPolicy", DEFAULT_EXECUTION_POLICY),
                    )
                )
        return specs

    @property
    def source(self) -> ScriptSource:
        """What identifies the content: a cached copy of another source is never reused."""
        return ScriptSource(self.location, self.version_id, self.checksum)


class _StoppedWhileRunning(Exception):
    """The boot was stopped while a script ran: `run` says so, `cause` is how it was stopped."""

    def __init__(self, run: ScriptRun, cause: KeyboardInterrupt) -> None:
        super().__init__(run.error)
        self.run = run
        self.cause = cause


class ScriptRun(NamedTuple):
    """What became of one script in one boot."""

    stage: str
    script: str
    on_error: str
    outcome: str  # succeeded | failed | skipped
    exit_code: int | None = None
    error: str | None = None
    started_at: int | None = None
    ended_at: int | None = None
    script_sha256: str | None = None
    log_span: tuple[int, int] | None = None  # the run's bytes in its script log, start marker to end marker


class BootResult:
    """The outcome of a boot: its exit status and every script's run (filled in as the boot goes)."""

    __slots__ = ("boot", "exit_code", "first_boot", "runs")

    def __init__(self, boot: int, first_boot: bool) -> None:
        self.boot = boot
        self.first_boot = first_boot
        self.exit_code = EXIT_COMPLETED
        self.runs: list[ScriptRun] = []

    def __repr__(self) -> str:
        return (
            f"BootResult(boot={self.boot}, first_boot={self.first_boot}, exit_code={self.exit_code}, "
            f"runs={self.runs!r})"
        )


def _utc_timestamp() -> str:
    return node_clock.utc_stamp(node_clock.now())


# What PCS's bootstrap agent says in bootstrap.log of a stage that ended on a failure (the article's line, for
# a STOP_SEQUENCE failure in nodeBootstrapped: `... WARN: Lifecycle execute completed with exit 3 for stage
# nodeBootstrapped`), in its own words, so that what greps a node's bootstrap.log finds it here too.
BOOTSTRAP_FINALIZE = "/opt/aws/pcs/bin/pcs_bootstrap_finalize.sh"


def _say_stage_exit(path: Path, stage: str, exit_code: int) -> None:
    """Append the line of a stage that ended with `exit_code` (3 STOP_SEQUENCE, 4 TERMINATE) to bootstrap.log,
    `[2026-10-21T00:57:27.869+00:00] - <finalize script>: WARN: ...`. The log folder is the executor's (made
    with executor.log), and is never given another mode here. A line that cannot be written (a full disk) is
    said on stderr, and the boot goes on."""
    stamp = node_clock.utc_stamp(node_clock.now())  # 2026-10-21T00:57:27.869123Z
    line = (
        f"[{stamp[:23]}+00:00] - {BOOTSTRAP_FINALIZE}: WARN: Lifecycle execute completed with exit"
        f" {exit_code} for stage {stage}\n"
    )
    try:
        fd = open_appended(path, EXECUTOR_LOG_MODE)
        try:
            os.write(fd, line.encode())
        finally:
            os.close(fd)
    except OSError as exc:
        print(
            f"lifeguard-node: {path.name}: {exc.strerror or exc}; its line for {stage} is lost",
            file=sys.stderr,
        )


class ExecutorLog:
    """executor.log: one JSON object per line, as the PCS agent writes it."""

    def __init__(self, path: Path) -> None:
        self._path = path
        self._fd = self._open()
        self._lost = 0  # records a full disk (or any write error) kept out

    def _open(self) -> int:
        ensure_dir(self._path.parent)
        fd = open_appended(self._path, EXECUTOR_LOG_MODE)
        os.fchmod(fd, EXECUTOR_LOG_MODE)
        return fd

    def _current(self) -> int:
        """The descriptor of the file at the log's path now: a script that removed or replaced it (the log
        folder cleaned) would otherwise have every later record written to a file no one can read."""
        try:
            same = os.path.samestat(os.stat(self._path), os.fstat(self._fd))
        except OSError:
            same = False
        if not same:
            with contextlib.suppress(OSError):
                fd = self._open()
                os.close(self._fd)
                self._fd = fd
        return self._fd

    def write(self, level: str, message: str, **fields: Any) -> None:
        """Append one record at once (one write, unbuffered), so the shipper sees it. A record that cannot
        be written (the disk is full) is said once on stderr and the boot goes on: PCS's semantics do not
        wait for a log."""
        record: dict[str, Any] = {"timestamp": _utc_timestamp(), "level": level, "message": message}
        for key, value in fields.items():
            if value is _NULL:
                record[key] = None
            elif value is not None:
                record[key] = value
        line = json.dumps(record, ensure_ascii=False, separators=(",", ":")) + "\n"
        try:
            os.write(self._current(), line.encode())
        except OSError as exc:
            if not self._lost:
                print(f"lifeguard-node: executor.log: {exc.strerror}; records are lost", file=sys.stderr)
            self._lost += 1

    def close(self) -> None:
        """Close the file."""
        os.close(self._fd)


class Executor:
    """Runs the boots of one node under a root directory."""

    def __init__(
        self,
        config: Mapping[str, Any],
        layout: NodeLayout,
        identity: NodeIdentity,
        *,
        script_timeout_seconds: float = SCRIPT_TIMEOUT_SECONDS,
        fetch_backoff_seconds: float = 1.0,
        fetchers: dict[str, ScriptFetcher] | None = None,
        kill_grace_seconds: float = KILL_GRACE_SECONDS,
        clock: Callable[[], float] = node_clock.now,
    ) -> None:
        problems = find_problems(config)
        if problems:
            raise InvalidLifecycleConfigError(problems)
        self.config = config
        self.layout = layout
        self.identity = identity
        self.script_timeout_seconds = script_timeout_seconds
        self.cache = ScriptCache(layout, fetchers=fetchers, backoff_seconds=fetch_backoff_seconds)
        self.kill_grace_seconds = kill_grace_seconds
        self.clock = clock
        self.caching_policy = config.get("scriptCachingPolicy", DEFAULT_SCRIPT_CACHING_POLICY)
        self.specs = ScriptSpec.all_of(config)

    # -- boot state --

    def _completed_boots(self) -> int:
        """The boots completed on this node as the state file says; 0 (this is a first boot) when it is
        missing or not what `_mark_boot` writes (a count from 0: not Infinity, -1 or text). A boot that
        started and never ended (`started`: a script rebooted the node, a power loss) counts: the next is
        a reboot, as on PCS, and a FIRST_BOOT_ONLY script that reboots the node runs once, not forever."""
        try:
            state = json.loads(self.layout.boot_state.read_text())
            count, started = state["completed_boots"], state.get("started")
        except (OSError, ValueError, KeyError, TypeError, AttributeError):
            return 0
        if not (type(count) is int and 0 <= count < 2**31):
            return 0
        return started if started == count + 1 and type(started) is int else count

    def _mark_boot(self, completed: int, *, started: int | None = None) -> os.stat_result | None:
        """Save how many boots completed, and the one under way (`started`), if any; the saved file's
        status, None when the state cannot be written."""
        state = {"completed_boots": completed, **({"started": started} if started is not None else {})}
        try:
            atomic_write(self.layout.boot_state, json.dumps(state).encode(), FILE_MODE)
            return os.stat(self.layout.boot_state)
        except OSError as exc:  # a full disk: the boot is what its scripts made it all the same
            print(f"lifeguard-node boot: the boot count cannot be saved ({exc})", file=sys.stderr)
            return None

    def _still_saved(self, saved: os.stat_result | None) -> bool:
        """Whether the state saved as the boot began is still the one at its path: a script may have taken
        it away (a volume mounted over /var/lib, the folder cleaned or moved to a larger disk)."""
        try:
            return saved is not None and os.path.samestat(saved, os.stat(self.layout.boot_state))
        except OSError:
            return False

    # -- the boot --

    def boot(self) -> BootResult:
        """Run one boot: every stage, every script, with PCS's onError and executionPolicy semantics. One boot
        of a root at a time: a second started meanwhile waits for the first, then is what follows it (a
        reboot, when the first completed), never a second first boot."""
        import fcntl

        lock = os.open(ensure_dir(self.layout.state) / "boot.lock", os.O_RDWR | os.O_CREAT, 0o600)
        try:
            fcntl.flock(lock, fcntl.LOCK_EX)
            return self._boot()
        finally:
            os.close(lock)

    def _boot(self) -> BootResult:
        completed = self._completed_boots()
        result = BootResult(boot=completed + 1, first_boot=completed == 0)
        saved = self._mark_boot(completed, started=result.boot)
        log = ExecutorLog(self.layout.executor_log)
        try:
            # DESIGN: every record carries `stage` and `script`; a boot's own records are of neither (null).
            log.write(
                "INFO",
                BOOT_STARTED,
                stage=_NULL,
                script=_NULL,
                boot=result.boot,
                first_boot=result.first_boot,
                cluster_id=self.identity.cluster_id,
                compute_node_group_id=self.identity.compute_node_group_id,
                node_id=self.identity.node_id,
            )
            self._run_stages(result, log)
            ended = {"boot": result.boot, "exit_code": result.exit_code}
            log.write("INFO", BOOT_COMPLETED, stage=_NULL, script=_NULL, **ended)
        finally:
            log.close()
        # Every later boot on this root is a reboot (DESIGN), this one's end whatever it was: PCS replaces a
        # node a TERMINATE failure ends with a new instance, whose disk is another root. The boot saved as
        # under way already counts so (`_completed_boots`): its end is saved only when that state could not
        # be saved, or is no longer there, so a boot writes and syncs its state once (a sync is 0.2 ms on
        # a local disk, more on a network one).
        if not self._still_saved(saved):
            self._mark_boot(result.boot)
        return result

    def _run_stages(self, result: BootResult, log: ExecutorLog) -> None:
        env = dict(os.environ)
        env.update(self.identity.environ(result.first_boot))
        terminated_by: str | None = None
        for stage in STAGES:
            stopped_by: str | None = None
            stage_exit = EXIT_COMPLETED
            specs = [spec for spec in self.specs if spec.stage == stage]
            if stage == "nodeReady" and terminated_by is None:
                # The twin's node (0 elsewhere): slurmd starts and registers, and PCS logs it ACTIVE, first.
                slurmd_seconds = node_clock.ready_after()
                if slurmd_seconds:
                    env[node_clock.CLOCK_OFFSET_VARIABLE] = node_clock.advance(slurmd_seconds)
            for spec in specs:
                skip = self._skip_reason(spec, result.first_boot, terminated_by, stopped_by)
                if skip is not None:
                    on_error = PCS_ON_ERROR_NAMES[spec.on_error]  # as its other records say it
                    log.write("INFO", SKIPPED, stage=stage, script=spec.name, on_error=on_error, reason=skip)
                    result.runs.append(ScriptRun(stage, spec.name, spec.on_error, "skipped", error=skip))
                    continue
                # For each script: the one before may have removed the log folder (cleaning up).
                with contextlib.suppress(OSError):  # else its log cannot be written: a failure of its own
                    ensure_dir(self.layout.stage_dir(stage))
                run = self._run_script(spec, result, env, log)
                result.runs.append(run)
                if run.outcome != "failed":
                    continue
                if spec.on_error == "TERMINATE":
                    terminated_by = spec.name
                    result.exit_code = stage_exit = EXIT_TERMINATE
                elif spec.on_error == "STOP_SEQUENCE":
                    stopped_by = spec.name
                    result.exit_code = max(result.exit_code, EXIT_STOP_SEQUENCE)
                    stage_exit = max(stage_exit, EXIT_STOP_SEQUENCE)
            if stage_exit != EXIT_COMPLETED:
                _say_stage_exit(self.layout.bootstrap_log, stage, stage_exit)

    def _skip_reason(
        self, spec: ScriptSpec, first_boot: bool, terminated_by: str | None, stopped_by: str | None
    ) -> str | None:
        if terminated_by is not None:
            return f"the node is terminated: {terminated_by!r} failed with onError TERMINATE"
        if stopped_by is not None:
            return f"stage stopped: {stopped_by!r} failed with onError STOP_SEQUENCE"
        if not first_boot and spec.execution_policy == "FIRST_BOOT_ONLY":
            return "FIRST_BOOT_ONLY script on a reboot"
        return None

    def _run_script(
        self, spec: ScriptSpec, result: BootResult, env: dict[str, str], log: ExecutorLog
    ) -> ScriptRun:
        content = self._reused_content(spec, result.first_boot, log)
        if content is None:
            from lifeguard.node.fetch import FetchError  # here: a cached reboot never loads the fetcher

            try:
                content = self._fetch(spec, log)
            except KeyboardInterrupt as exc:
                # Stopped while the script is fetched (a try may take 70 s, three of them): its record says
                # so, as of a script stopped while it runs, or the node is gone with no report of it.
                signum = stop_signal(exc)
                why = f"script '{spec.name}' was stopped with the boot while it was fetched (signal {signum})"
                stopped = ScriptRun(spec.stage, spec.name, spec.on_error, "failed", error=why)
                self._log_outcome(log, result, stopped, STOPPED_MESSAGE)
                raise
            except FetchError as exc:
                failed = ScriptRun(spec.stage, spec.name, spec.on_error, "failed", error=str(exc))
                self._log_outcome(log, result, failed)
                return failed
            except OSError as exc:  # the cache cannot hold it (a full disk, a directory in its place)
                return self._not_run(spec, result, log, f"cannot be cached: {exc.strerror or exc}")
        try:
            run = self._execute(spec, content, env)
        except _StoppedWhileRunning as stopped:
            # The boot is stopped (SIGTERM at a shutdown, Ctrl-C) while the script runs, the script with it:
            # its record says so, or the shipper has nothing to report of the script that held the node.
            self._log_outcome(log, result, stopped.run, STOPPED_MESSAGE)
            raise stopped.cause from None
        except OSError as exc:  # its log cannot be written: a script failure, judged by its onError
            return self._not_run(spec, result, log, f"its log cannot be written: {exc.strerror or exc}")
        except ValueError as exc:  # an argument the kernel cannot pass (a NUL byte): judged as above
            return self._not_run(spec, result, log, f"cannot be started: {exc}")
        self._log_outcome(log, result, run)
        return run

    def _not_run(self, spec: ScriptSpec, result: BootResult, log: ExecutorLog, why: str) -> ScriptRun:
        failed = ScriptRun(
            spec.stage,
            spec.name,
            spec.on_error,
            "failed",
            CANNOT_START_EXIT_CODE,
            f"script '{spec.name}' {why}",
        )
        self._log_outcome(log, result, failed)
        return failed

    def _execute(self, spec: ScriptSpec, content: bytes, env: dict[str, str]) -> ScriptRun:
        digest = hashlib.sha256(content).hexdigest()
        started = int(self.clock())
        try:
            process = run_script(
                spec.name,
                self.cache.path(spec.stage, spec.name),
                spec.arguments,
                content=content,
                log=self.layout.script_log(spec.stage, spec.name),
                env=env,
                cwd=self.layout.root,
                started=started,
                timeout_seconds=self.script_timeout_seconds,
                kill_grace_seconds=self.kill_grace_seconds,
                clock=self.clock,
            )
        except KeyboardInterrupt as exc:
            signum = stop_signal(exc)
            stopped = ScriptRun(
                spec.stage,
                spec.name,
                spec.on_error,
                "failed",
                128 + signum,
                f"script '{spec.name}' was stopped with the boot (signal {signum})",
                started,
                int(self.clock()),
                digest,
            )
            raise _StoppedWhileRunning(stopped, exc) from exc
        return ScriptRun(
            spec.stage,
            spec.name,
            spec.on_error,
            "succeeded" if process.exit_code == 0 else "failed",
            process.exit_code,
            process.error,
            started,
            int(self.clock()),
            digest,
            process.log_span,
        )

    def _log_outcome(
        self, log: ExecutorLog, result: BootResult, run: ScriptRun, failed: str | None = None
    ) -> None:
        """The run's record in executor.log; `failed`: what a failure says, when not its onError's."""
        if run.outcome == "succeeded":
            level, message = "INFO", "script completed"
        else:
            level = "WARN" if run.on_error == "CONTINUE" and failed is None else "ERROR"
            message = failed or FAILURE_MESSAGES[run.on_error]
        log.write(
            level,
            message,
            # PCS's own fields first, in its order (`"script":…,"on_error":…,"error":…`), then Lifeguard's.
            stage=run.stage,
            script=run.script,
            on_error=PCS_ON_ERROR_NAMES[run.on_error],
            error=run.error,
            boot=result.boot,
            first_boot=result.first_boot,
            # A run that never started (the fetch failed) says so with an explicit null exit code.
            exit_code=run.exit_code if run.exit_code is not None else _NULL,
            started_at=run.started_at,
            ended_at=run.ended_at,
            script_sha256=run.script_sha256,
            # Where the run is in its script log: the shipper reads its tail there, whatever it printed.
            log_start=run.log_span[0] if run.log_span else None,
            log_end=run.log_span[1] if run.log_span else None,
        )

    # -- fetching (through the cache) --

    def _reused_content(self, spec: ScriptSpec, first_boot: bool, log: ExecutorLog) -> bytes | None:
        """The cached copy a CACHE_ONCE reboot runs; None when the script must be fetched."""
        if self.caching_policy != "CACHE_ONCE" or first_boot:
            return None
        # Without a cached copy of this same source, a reboot fetches as a first boot does.
        content = self.cache.cached(spec.stage, spec.name, spec.source)
        if content is not None:
            log.write("INFO", "Reusing cached script (CACHE_ONCE)", script=spec.name, stage=spec.stage)
        return content

    def _fetch(self, spec: ScriptSpec, log: ExecutorLog) -> bytes:
        """Fetch the script into the cache (raises FetchError); each failed try that is retried is logged."""
        from lifeguard.node.fetch import redact

        log.write(
            "INFO", "fetching script", stage=spec.stage, script=spec.name, location=redact(spec.location)
        )

        def on_retry(attempt: int, reason: str) -> None:
            log.write(
                "WARN",
                "script download failed; retrying",
                stage=spec.stage,
                script=spec.name,
                attempt=attempt,
                error=reason,
            )

        return self.cache.fetch(spec.stage, spec.name, spec.source, on_retry=on_retry)
