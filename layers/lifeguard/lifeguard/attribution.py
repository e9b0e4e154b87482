"""Which script made the failing instances fail, from the node reports shipped off them.

A node report is what a node says of itself, and a node runs its scripts as root: any node of the account
can write any report to the report log group. So a report names a suspect only among the scripts of the
group's configuration as PCS gives it (`scripts`), and a loop from the reports alone counts only instances
the scaling log, which PCS writes, launched in that group (`instances`), wherever the group's scaling log
is delivered. A loop's failures are its newest `OUTCOME_LIMIT`, however many instances reported.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Collection, Iterable, Mapping, Sequence
from typing import Any, Protocol

from lifeguard.bounds import FUTURE_SKEW_MS
from lifeguard.group_state import OUTCOME_LIMIT, Episode, Failure, GroupState, Suspect
from lifeguard.lifecycle_rules import on_errors, scripts_of
from lifeguard.node_report import NodeReport
from lifeguard.values import frozen

__all__ = [
    "ALSO_FAILING_MAX",
    "DISPUTED_TAIL",
    "LAUNCH_BOOT_AFTER_OUTCOME_MS",
    "BootRuns",
    "ReportedLoop",
    "as_booted",
    "as_configured",
    "attribute",
    "boot_runs",
    "contradicted",
    "failed_runs",
    "find_suspect",
    "known_scripts",
    "launch_boot",
    "launched_instances",
    "launched_s",
    "reported_loop",
    "still_failing",
    "suspect_of_runs",
]

KEPT_LIMIT = 100  # nodes an episode lists as kept (the events' `kept`, bounded as the event's list is)


# How long after PCS logged a node's outcome its launch boot's runs may still start: nodeReady's start then
# (the article: 2 s after ACTIVE) and run one after another, each for as long as its script takes.
LAUNCH_BOOT_AFTER_OUTCOME_MS = 6 * 3600 * 1000


def failed_runs(
    reports: Iterable[NodeReport],
    instance_id: str,
    since_ms: int | None,
    scripts: Collection[tuple[str, str]] | None = None,
    *,
    outcome_ms: int | None = None,
) -> list[NodeReport]:
    """The failed script runs an instance reported for its boot (runs started at or after `since_ms`, its
    launch, when known), oldest first. Only runs of `scripts` ((stage, name) of the configuration the node
    ran; None when it is not known) count: any node can write a report naming any script. With
    `outcome_ms` (when PCS logged the boot's outcome), only the launch boot's (`launch_boot`)."""
    since_s = launched_s(since_ms)
    return sorted(
        (
            r
            for r in reports
            if r.failed
            and r.instance_id == instance_id
            and (since_s is None or r.started_at >= since_s)
            and (scripts is None or (r.stage, r.script) in scripts)
            and (outcome_ms is None or launch_boot(r, outcome_ms))
        ),
        key=lambda r: (r.boot, r.started_at),
    )


def launched_s(since_ms: int | None) -> int | None:
    """The earliest start, on the node's clock (whole seconds), of a run of a node PCS launched at `since_ms`
    (PCS's clock): the node's clock may be behind PCS's as far as a time may be ahead of Lifeguard's
    (`FUTURE_SKEW_MS`). A node's runs dated before its launch by a clock minutes behind were none of its
    boot's: its failure hidden, the loop said over and its configuration proven good. No run of another
    node comes in: an instance id is never used again, and a reboot's runs are not its launch boot's."""
    return (since_ms - FUTURE_SKEW_MS) // 1000 - 1 if since_ms is not None else None


def launch_boot(run: _Mark, outcome_ms: int) -> bool:
    """Whether a run is of the boot the instance was launched to, whose outcome PCS logged at `outcome_ms`:
    its first boot's, started within `LAUNCH_BOOT_AFTER_OUTCOME_MS` after it (nodeReady's run after the
    success). A later boot's (a reboot's) says nothing of what the launch proved; the time bound holds
    where a boot's number cannot be trusted (a shipper of an earlier release numbered no boot under PCS's
    agent)."""
    return run.boot == 1 and run.started_at * 1000 <= outcome_ms + LAUNCH_BOOT_AFTER_OUTCOME_MS


class _Mark(Protocol):
    @property
    def instance_id(self) -> str: ...
    @property
    def boot(self) -> int: ...
    @property
    def started_at(self) -> int: ...
    @property
    def stage(self) -> str: ...
    @property
    def script(self) -> str: ...


@frozen
class BootRuns:
    """What an instance's reports say about one boot: its failed runs, how many runs did not fail, and of
    which scripts ((stage, name)). `read`: False when the node's runs could not all be read (a flood filled
    the group's read, and the decision's reads of single instances were spent): no failure found then says
    nothing, neither that the boot went clean nor that its node sent no report."""

    failed: list[NodeReport]
    others: int
    ran: frozenset[tuple[str, str]] = frozenset()
    read: bool = True

    @property
    def reported(self) -> bool:
        """Whether the node reported any run of this boot."""
        return bool(self.failed) or self.others > 0

    def evidence(self) -> str:
        """The boot's reports in a few words."""
        if not self.reported:
            return "no node reports yet"
        if self.failed:
            return f"its reports show {len(self.failed)} failed run(s), last {self.failed[-1].script}"
        return f"its reports show {self.others} script run(s), none failed"


def still_failing(
    failed: Iterable[NodeReport], suspect: Suspect | None, booted: Mapping[str, Any] | None = None
) -> list[NodeReport]:
    """Of the failed runs of a node PCS logged ACTIVE, those that leave the loop's script failing on a node
    that stays up: under STOP_SEQUENCE (a quarantine, or the owners'), or under CONTINUE of the loop's own
    script (`suspect`: the owners let it go on; with none named, any of nodeBootstrapped, the loop's
    stage). Not a CONTINUE failure of another script (the article's nodeReady ready-check: not the loop),
    nor a TERMINATE one, which PCS answers by terminating the node: not its boot's, or not true, or (in
    nodeReady, after ACTIVE) another script's, the loop's having passed. Given the configuration the node
    is known to have booted (`booted`, its `nodeLifecycleActions`), a run counts only under the onError
    that configuration gives its script: a report of a STOP_SEQUENCE failure of a script it runs under
    TERMINATE cannot be true (PCS would have ended the node), whoever wrote it."""
    named = (suspect.stage, suspect.script) if suspect is not None else None

    def loops(run: NodeReport) -> bool:
        return (run.stage, run.script) == named if named is not None else run.stage == "nodeBootstrapped"

    if booted is not None:
        failed = as_configured(failed, booted)
    return [
        run
        for run in failed
        if run.on_error == "STOP_SEQUENCE" or (run.on_error == "CONTINUE" and loops(run))
    ]


def as_configured(runs: Iterable[NodeReport], actions: Mapping[str, Any]) -> list[NodeReport]:
    """The runs whose onError is the one `actions` (the configuration their node booted) gives their script:
    a report of a run under another cannot be true of that boot, whoever wrote it."""
    given = on_errors(actions)
    return [run for run in runs if given.get((run.stage, run.script)) == run.on_error]


def as_booted(state: GroupState, episode: Episode, runs: Iterable[NodeReport]) -> list[NodeReport]:
    """The runs of an episode's failing nodes that can be true of the configuration they booted: while the
    group's configuration as last read is the one the episode opened on (its fingerprint), a run under
    another onError than that configuration gives its script is no run of theirs (`as_configured`: a
    TERMINATE failure of a script it runs under CONTINUE, written to name that script, or to contradict the
    node's own report and withdraw the suspect). After a change (a quarantine's, the owners') the
    configuration they booted is not known here, and the runs are taken as they say."""
    config = state.config
    runs = list(runs)
    if config is None or not config.actions_read or config.fingerprint != episode.config_fingerprint:
        return runs
    return as_configured(runs, config.node_lifecycle_actions or {})


def boot_runs(
    reports: Iterable[NodeReport],
    marks: Iterable[_Mark],
    instance_id: str,
    since_ms: int | None,
    scripts: Collection[tuple[str, str]] | None = None,
    *,
    outcome_ms: int | None = None,
) -> BootRuns:
    """The runs an instance reported for its boot (started at or after `since_ms`, its launch, if known),
    of `scripts` only when given and of the launch boot only with `outcome_ms` (as `failed_runs`)."""
    since_s = launched_s(since_ms)
    mine = [
        m
        for m in marks
        if m.instance_id == instance_id
        and (since_s is None or m.started_at >= since_s)
        and (scripts is None or (m.stage, m.script) in scripts)
        and (outcome_ms is None or launch_boot(m, outcome_ms))
    ]
    failed = failed_runs(reports, instance_id, since_ms, scripts, outcome_ms=outcome_ms)
    return BootRuns(failed, len(mine), frozenset((m.stage, m.script) for m in mine))


def suspect_of_runs(runs: Sequence[NodeReport]) -> Suspect:
    """The script a kept node still fails: its boot's deciding failed run."""
    run = _fatal_run(runs)
    return Suspect(
        stage=run.stage,
        script=run.script,
        on_error=run.on_error,
        exit_code=run.exit_code,
        log_tail=run.log_tail,
        instances=sorted({r.instance_id for r in runs}),
    )


def contradicted(instances: Collection[str], reports: Iterable[NodeReport]) -> set[str]:
    """Of `instances`, those whose failed runs say two things at once (`_contradicted`)."""
    by_instance: dict[str, list[NodeReport]] = {}
    for report in reports:
        if report.failed and report.instance_id in instances:
            by_instance.setdefault(report.instance_id, []).append(report)
    return {instance for instance, runs in by_instance.items() if _contradicted(runs)}


def _contradicted(runs: Iterable[NodeReport]) -> bool:
    """Whether an instance's failed runs say two things at once: a failure under TERMINATE ends a boot and
    the instance is terminated, so failed TERMINATE runs of two scripts cannot both be its own. One of them
    was written by someone else, and neither names a suspect."""
    return len({(r.stage, r.script) for r in runs if r.failed and r.on_error == "TERMINATE"}) > 1


def _fatal_run(runs: Sequence[NodeReport]) -> NodeReport:
    """The run that decided an instance's boot: its last failed TERMINATE run (it ended the boot), else its
    last failed STOP_SEQUENCE run (it stopped a stage: a quarantine keeps the node there, and a CONTINUE
    failure of a later stage is not why), else its last failed run."""
    ordered = sorted(runs, key=lambda r: (r.boot, r.ended_at or r.started_at, r.started_at))
    terminating = [r for r in ordered if r.on_error == "TERMINATE"]
    stopping = [r for r in ordered if r.on_error == "STOP_SEQUENCE"]
    return (terminating or stopping or ordered)[-1]


def find_suspect(
    failures: Sequence[Failure],
    reports: Iterable[NodeReport],
    scripts: Collection[tuple[str, str]] | None = None,
) -> Suspect | None:
    """The script that failed on all (or most) of the failing instances, or None when no report names one
    (`attribute`'s suspect)."""
    return attribute(failures, reports, scripts)[0]


def attribute(
    failures: Sequence[Failure],
    reports: Iterable[NodeReport],
    scripts: Collection[tuple[str, str]] | None = None,
) -> tuple[Suspect | None, list[str]]:
    """The suspect: the script that failed on all (or most) of the failing instances, or None when no report
    names one. Only runs of `scripts` ((stage, name) of the group's configuration; None when it is not
    known) count, and only failures under TERMINATE: PCS terminates a node (BOOTSTRAP_FAILED) for those
    alone, and a node whose script fails under STOP_SEQUENCE or CONTINUE stays up (the article), so such a
    failure is not why its node failed, however many of the failing nodes report one. Ties go to the script
    of the most recent failure.

    With it, `stage/name` of the scripts besides it that ended the boot of some failing instance, sorted,
    at most ALSO_FAILING_MAX: a loop whose nodes fail on two scripts (one on an instance type, the other on
    another) is not broken by switching the suspect alone. Empty without a suspect.
    """
    fatal, disputed = _fatal_runs(failures, reports, scripts)
    if not fatal:
        return None, []
    votes = Counter((run.stage, run.script) for run in fatal.values())
    failed_at = {f.instance_id: f.event_timestamp for f in failures}
    recency: dict[tuple[str, str], int] = {}
    for instance, run in fatal.items():
        key = (run.stage, run.script)
        recency[key] = max(recency.get(key, 0), failed_at[instance])
    stage, script = max(votes, key=lambda key: (votes[key], recency[key]))
    matching = [
        (instance, run) for instance, run in fatal.items() if (run.stage, run.script) == (stage, script)
    ]
    # What the script said is told from the latest run no other report contradicts: any node can write a
    # report of another's run, and one written after the node's own would otherwise be what is told.
    undisputed = [pair for pair in matching if pair[0] not in disputed]
    latest = max(undisputed or matching, key=lambda pair: pair[1].ended_at or pair[1].started_at)[1]
    ordered_instances = [f.instance_id for f in failures if f.instance_id in dict(matching)]
    suspect = Suspect(
        stage=stage,
        script=script,
        on_error=latest.on_error,
        exit_code=latest.exit_code if undisputed else None,
        log_tail=latest.log_tail if undisputed else DISPUTED_TAIL,
        instances=ordered_instances,
    )
    others = sorted(set(votes) - {(stage, script)})
    return suspect, [f"{other_stage}/{other}" for other_stage, other in others][:ALSO_FAILING_MAX]


def _fatal_runs(
    failures: Sequence[Failure],
    reports: Iterable[NodeReport],
    scripts: Collection[tuple[str, str]] | None,
) -> tuple[dict[str, NodeReport], set[str]]:
    """Each failing instance's run that ended its boot: its last failed TERMINATE run (`attribute`'s
    rules), for the instances whose runs do not contradict each other; and the instances whose run is
    disputed: reported otherwise too (a TERMINATE failure ends its boot and PCS terminates the instance, so
    an instance fails so once in its life: two reports of it that differ cannot both be the node's)."""
    failing = {f.instance_id for f in failures}
    by_instance: dict[str, list[NodeReport]] = {}
    for report in reports:
        if scripts is not None and (report.stage, report.script) not in scripts:
            continue
        if report.failed and report.on_error == "TERMINATE" and report.instance_id in failing:
            by_instance.setdefault(report.instance_id, []).append(report)
    fatal = {instance: _fatal_run(runs) for instance, runs in by_instance.items() if not _contradicted(runs)}
    disputed = {instance for instance, run in fatal.items() if _disputed(run, by_instance[instance])}
    return fatal, disputed


def _disputed(run: NodeReport, runs: Iterable[NodeReport]) -> bool:
    """Whether another of `runs` (an instance's failed TERMINATE runs of one script: `_contradicted` sets
    aside those of two) says otherwise: another boot, exit status, output, start or end."""
    return any(other != run for other in runs)


ALSO_FAILING_MAX = 20  # a stage's scripts at most: what an episode keeps of them
# The suspect's output when every report of its latest runs is disputed (`_disputed`): none is told as the
# script's.
DISPUTED_TAIL = (
    "(not shown: its nodes' reports of this run disagree, and any node can write a report of another's run)"
)


@frozen
class ReportedLoop:
    """A loop the node reports show on their own: the same script failed under TERMINATE on `failures`."""

    stage: str
    script: str
    failures: tuple[Failure, ...]  # oldest first; the time is the failed run's end


def reported_loop(
    reports: Iterable[NodeReport],
    threshold: int,
    window_ms: int,
    since_ms: int | None = None,
    *,
    scripts: Collection[tuple[str, str]] | None = None,
) -> ReportedLoop | None:
    """`threshold` instances whose boot ended on a failure of the same script under TERMINATE (the run that
    got each node terminated), within `window_ms` of the newest and after `since_ms` (the configuration's
    `modifiedAt`, or the end of the group's last episode), or None. Only runs of `scripts` count, when
    given (the module docstring)."""
    by_instance: dict[str, list[NodeReport]] = {}
    for report in reports:
        if not report.failed or report.on_error != "TERMINATE":
            continue
        if since_ms is not None and report.started_at * 1000 < since_ms:
            continue
        if scripts is not None and (report.stage, report.script) not in scripts:
            continue
        by_instance.setdefault(report.instance_id, []).append(report)
    fatal = {
        instance: max(runs, key=lambda r: (r.boot, r.ended_or_started_at))
        for instance, runs in by_instance.items()
        if not _contradicted(runs)
    }
    if not fatal:
        return None
    newest = max(r.ended_or_started_at for r in fatal.values()) * 1000
    recent = [r for r in fatal.values() if r.ended_or_started_at * 1000 > newest - window_ms]
    by_script: dict[tuple[str, str], list[NodeReport]] = {}
    for run in recent:
        by_script.setdefault((run.stage, run.script), []).append(run)
    (stage, script), runs = max(
        by_script.items(), key=lambda item: (len(item[1]), max(r.ended_or_started_at for r in item[1]))
    )
    if len(runs) < threshold:
        return None
    ordered = sorted(runs, key=lambda r: (r.ended_or_started_at, r.instance_id))[-OUTCOME_LIMIT:]
    failures = tuple(
        Failure(
            instance_id=r.instance_id,
            scheduler_node_id=r.node_id,
            event_timestamp=r.ended_or_started_at * 1000,
        )
        for r in ordered
    )
    return ReportedLoop(stage, script, failures)


def known_scripts(state: GroupState) -> set[tuple[str, str]] | None:
    """(stage, name) of the scripts of the group's configuration as last read, None when its scripts are
    not known (learned from a listing): a report names a suspect only among them."""
    config = state.config
    return scripts_of(config.node_lifecycle_actions) if config is not None and config.actions_read else None


def launched_instances(state: GroupState) -> set[str] | None:
    """The instances the scaling log launched in the group; None when it has said nothing of any (it is
    not delivered: the reports are all there is, and a loop may be judged from them alone)."""
    known = set(state.launches) | set(state.outcomes)
    return known or None
