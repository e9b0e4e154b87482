"""A loop contained, not resolved: a node kept with its script still failing (a quarantine's STOP_SEQUENCE,
which PCS logs as BOOTSTRAP_SUCCESS); or resolved: a node booted with no failed script. Both handlers come
here: the scaling log's success when the node's reports are already in, the node's reports when they come
after the success."""

from __future__ import annotations

import logging
from collections.abc import Callable, Collection, Mapping, Sequence
from typing import TYPE_CHECKING, Any, NamedTuple

from lifeguard.attribution import (
    KEPT_LIMIT,
    LAUNCH_BOOT_AFTER_OUTCOME_MS,
    BootRuns,
    as_configured,
    failed_runs,
    known_scripts,
    still_failing,
    suspect_of_runs,
)
from lifeguard.bounds import utc
from lifeguard.detection import DetectionSettings, up_before_last_failure
from lifeguard.event_contract import (
    FIX_AND_PUSH,
    ControllerEvent,
    episode_event,
    episode_signals,
    undo_command,
)
from lifeguard.group_state import OUTCOME_LIMIT, BootOutcome, Episode, Failure, GroupState, ProvenGood
from lifeguard.lifecycle_rules import drains_kept_nodes, ready_checks, ready_checks_run, scripts_of
from lifeguard.node_report import NodeReport

if TYPE_CHECKING:
    from lifeguard.scaling_log import ScalingLogRecord

__all__ = [
    "REPORTS_GRACE_MS",
    "SETTLED_SUCCESSES_MAX",
    "Settling",
    "awaits_ready_checks",
    "booted_actions",
    "booted_current",
    "contain",
    "kept_awaits_ready_checks",
    "kept_not_yet",
    "newest_event_ms",
    "reopen_after_ready_failure",
    "reopen_as_contained",
    "reports_its_end",
    "resolve",
    "revoke_false_proof",
    "revoke_proof_of_older_launch",
    "settle",
    "settle_in_turn",
    "to_settle",
]

logger = logging.getLogger("lifeguard")

# How long a success waits for what its node's reports, or PCS's end of the node, may still say of its boot.
REPORTS_GRACE_MS = 10 * 60 * 1000
# The successes of a loop one settling judges of each kind (`to_settle`: its nodes up before its last failure,
# its successes after it), besides those of the nodes a report or record just came of: each is a read of its
# node's reports.
SETTLED_SUCCESSES_MAX = 10
# How long after a success its node's reports may still overturn what it ended or proved: its launch boot's
# runs start up to LAUNCH_BOOT_AFTER_OUTCOME_MS after it, one may run for a day (the longest script timeout
# `lifeguard-node boot` takes) before its failure is shipped, and a delivery that failed is retried by
# Lambda for 6 hours. Reports that come later (measured on the invocation's clock) are stored, and
# overturn nothing: any node can write any report, and one forged days later would reopen a loop long over,
# whose episode a new loop on another configuration would then go on (told a cycle late, escalated up the
# ladder past the cooldown). A redrive of parked reports days later overturns nothing either (said).
_SCRIPT_RUN_MAX_MS = 24 * 3600 * 1000
_DELIVERY_RETRIES_MS = 6 * 3600 * 1000
REPORTS_OVERTURN_MS = LAUNCH_BOOT_AFTER_OUTCOME_MS + _SCRIPT_RUN_MAX_MS + _DELIVERY_RETRIES_MS


def contain(
    state: GroupState,
    settings: DetectionSettings,
    kept: BootOutcome,
    failed: Sequence[NodeReport],
    late: str = "",
    *,
    lifeguards: bool = True,
) -> list[ControllerEvent]:
    """Keep `kept` in the open episode; the first kept node makes it contained (LoopContained, once per
    episode, with the script still failing and how to go on); later ones are listed. `late` (an episode
    opened again: its LoopResolved was wrong) announces it again, whether or not it was contained before.
    `lifeguards`: a quarantine of Lifeguard's keeps the node (else the owners' own STOP_SEQUENCE did, and
    there is no change of Lifeguard's to undo)."""
    episode = state.episode
    assert episode is not None
    if kept.instance_id not in episode.kept and len(episode.kept) < KEPT_LIMIT:
        episode.kept.append(kept.instance_id)
    if episode.contained_at is not None and not late:
        return []
    if episode.contained_at is None:
        episode.contained_at = kept.event_timestamp
    hold_end = episode.resumed_in_hold
    if not late and episode.in_told_hold() and hold_end is not None and kept.event_timestamp <= hold_end:
        # Contained again in a hold its loop resumed in, as told last (with the hold's end): listed, not
        # told at each turn; the suspect stays the loop's.
        return []
    episode.suspect = suspect_of_runs(failed)
    suspect = episode.suspect
    node = f" ({kept.scheduler_node_id})" if kept.scheduler_node_id else ""
    reason = (
        f"{kept.instance_id}{node} came up at {utc(kept.event_timestamp)} with {suspect.stage} › "
        f"{suspect.script} still failing (onError {suspect.on_error}): the loop stopped, the script is "
        f"not fixed.{late} {FIX_AND_PUSH}" + (", or undo Lifeguard's change." if lifeguards else ".")
    )
    logger.warning("group %s: %s", state.group_id, reason)
    drained = drains_kept_nodes(state.config.node_lifecycle_actions if state.config else None)
    listed = [{"instance_id": instance, "drained": drained} for instance in episode.kept]
    undo = undo_command(state.cluster_id, state.group_id) if lifeguards else None
    return [episode_event("LoopContained", state, episode, settings, reason=reason, kept=listed, undo=undo)]


def reopen_as_contained(
    state: GroupState,
    settings: DetectionSettings,
    reports: Sequence[NodeReport],
    *,
    now_ms: int | None = None,
    lifeguards: Callable[[], bool] = lambda: True,
) -> list[ControllerEvent]:
    """When a node's failed runs arrive after the scaling log's success ended the episode with it (the two
    logs are delivered apart): that episode was contained, not resolved. It is open again, the node kept,
    and the configuration it proved is proven by nothing. Not past REPORTS_OVERTURN_MS after the success
    (at `now_ms`, the invocation's time, when given), nor once PCS ended the node on that boot."""
    last = state.last_episode
    if last is None or last.resolved_by is None or last.resolved_at is None:
        return []
    outcome = state.outcomes.get(last.resolved_by)
    if outcome is None:
        return []
    if not outcome.succeeded and outcome.event_timestamp - last.resolved_at <= LAUNCH_BOOT_AFTER_OUTCOME_MS:
        # PCS ended the node on that boot (a nodeReady script under TERMINATE): it keeps nothing. On the
        # loop's own configuration that end reopened the loop (`reopen_after_ready_failure`); on another, it
        # is that configuration's first failure. An end hours later (a reboot's script) leaves the node kept
        # until then, as before.
        return []
    # The runs of the boot that ended it: its first, since the launch (nodeReady's run after the success
    # was logged, as the article saw), of the group's scripts.
    runs = failed_runs(
        reports,
        outcome.instance_id,
        state.launched_at(outcome),
        known_scripts(state),
        outcome_ms=last.resolved_at,
    )
    failing = still_failing(runs, last.suspect, booted_actions(state, outcome))
    if not failing:
        return []  # the proof it made, if any, `revoke_false_proof` takes back
    # Its reports may say PCS is ending it (`reports_its_end`): contained all the same, as nothing would
    # judge it again once the grace is over (a forged report would keep the loop "over" while the node
    # stays up); fresh nodes failing after it tell the loop goes on.
    if _too_late(state, "reopen the episode it ended", outcome.instance_id, last.resolved_at, now_ms):
        return []
    if state.proven_good is not None and state.proven_good.instance_id == last.resolved_by:
        _revoke(state, f"{last.resolved_by} failed a script on that boot")
    last.resolved_at = last.resolved_by = None
    last.revision += 1  # its own events: the LoopResolved before was of the revision it had then
    state.episode, state.last_episode = last, None
    late = " (its node's reports came after the scaling log's success: the LoopResolved before it was wrong.)"
    return contain(state, settings, outcome, failing, late, lifeguards=lifeguards())


def _too_late(state: GroupState, what: str, instance: str, success_ms: int, now_ms: int | None) -> bool:
    """Whether failed runs of `instance` read at `now_ms` come too late to `what` its success at
    `success_ms` did (REPORTS_OVERTURN_MS), said when they do."""
    if now_ms is None or now_ms - success_ms <= REPORTS_OVERTURN_MS:
        return False
    logger.warning(
        "group %s: failed runs of %s came %.1f h after its success at %s, past what its launch boot can "
        "report (forged, or held up that long): stored, not taken to %s",
        state.group_id,
        instance,
        (now_ms - success_ms) / 3_600_000,
        utc(success_ms),
        what,
    )
    return True


def settle(
    state: GroupState,
    settings: DetectionSettings,
    success: BootOutcome,
    boot: BootRuns,
    *,
    now_ms: int,
    unreported: bool,
    held: bool = False,
    may_resolve: bool = True,
    own_script_only: bool = False,
    lifeguards: Callable[[], bool] = lambda: True,
) -> list[ControllerEvent]:
    """What `success`, a success of the open episode (`to_settle`: the first after its last failure, unless
    `may_resolve` says otherwise), says of it at `now_ms` (PCS's time: the group's newest event): nothing
    yet when `held` (`awaits_ready_checks`: nodes of this loop
    failed after their ACTIVE, in nodeReady, so a node is neither kept nor clean until it is seen to stay
    up); contained when its node reported a run of that boot that leaves the loop's script failing
    (`still_failing`), once its ready checks are through (`kept_awaits_ready_checks`); resolved when it
    reported runs and none does, or, when it reported nothing, resolved if `unreported` (the success alone
    is to be believed) and nothing yet otherwise. `lifeguards()` as for `contain`, asked only when the loop
    is contained or resolved (it may read Lifeguard's ledger). Not resolved unless `may_resolve` (an earlier
    node of the loop would be kept and is not yet, or a failure came after this one: it contains or not).
    `own_script_only`: kept only by a failure of the loop's own script (`_still_failing`)."""
    if held:
        return []
    failing = _still_failing(state, success, boot, own_script_only=own_script_only)
    if reports_its_end(state, success, boot.failed, kept=bool(failing)):
        return []
    if failing:
        if kept_awaits_ready_checks(state, success, boot, now_ms):
            return []
        return contain(state, settings, success, failing, lifeguards=lifeguards())
    if may_resolve and (boot.reported or unreported):
        return resolve(state, settings, success, boot.evidence(), lifeguards=lifeguards)
    return []


def _still_failing(
    state: GroupState, success: BootOutcome, boot: BootRuns, *, own_script_only: bool
) -> list[NodeReport]:
    """`still_failing` of the success's boot; with `own_script_only`, of the loop's own script alone: a node
    up before a later failure of the loop (`detection.up_before_last_failure`) is kept only by that (the
    quarantined script), not by another script the owners run under STOP_SEQUENCE, while the loop went on
    (when the loop names no script, as `still_failing` takes them)."""
    suspect = state.episode.suspect if state.episode else None
    failing = still_failing(boot.failed, suspect, booted_actions(state, success))
    if not own_script_only or suspect is None:  # no script named: as `still_failing` takes it
        return failing
    return [run for run in failing if (run.stage, run.script) == (suspect.stage, suspect.script)]


def kept_not_yet(
    state: GroupState, success: BootOutcome, boot: BootRuns, now_ms: int, *, own_script_only: bool = False
) -> bool:
    """Whether `success`'s node would be kept (its loop's script failing on) and is not yet, as `settle`
    judges it at `now_ms`: its ready checks are not through (`kept_awaits_ready_checks`), or its reports say
    PCS is ending it (`reports_its_end`). Another node of the loop may be up meanwhile: a later success is
    judged then (`SETTLED_SUCCESSES_MAX` of them at most)."""
    if not _still_failing(state, success, boot, own_script_only=own_script_only):
        return False
    return reports_its_end(state, success, boot.failed, kept=True) or kept_awaits_ready_checks(
        state, success, boot, now_ms
    )


def to_settle(state: GroupState, successes: Sequence[BootOutcome], judged: Collection[str]) -> list[Settling]:
    """The successes a settling of the open episode judges in turn, each with whether it may only contain:
    first the loop's nodes up before its last failure (`detection.up_before_last_failure`, containment
    only), then its successes after it (`successes`: `detection.resolving`). Of each, the first
    `SETTLED_SUCCESSES_MAX`, and those of the nodes `judged` (a report or a record of them came) past
    those: each judged is a read of its node's reports."""

    def bounded(outcomes: Sequence[BootOutcome]) -> list[BootOutcome]:
        past = [o for o in outcomes[SETTLED_SUCCESSES_MAX:] if o.instance_id in judged]
        return [*outcomes[:SETTLED_SUCCESSES_MAX], *past]

    episode = state.episode
    full = episode is not None and len(episode.kept) >= KEPT_LIMIT  # no node more can be listed
    up = [] if full else bounded(up_before_last_failure(state))
    earlier = [Settling(o, contains_only=True) for o in up]
    return [*earlier, *(Settling(o, contains_only=False) for o in bounded(successes))]


def settle_in_turn(
    state: GroupState,
    settings: DetectionSettings,
    settlings: Sequence[Settling],
    prepare: Callable[[BootOutcome, bool], tuple[BootRuns, int, bool] | None],
    lifeguards: Callable[[], bool],
) -> list[ControllerEvent]:
    """`settle` the open episode on `settlings` (`to_settle`) in turn, both handlers alike: past each node
    kept (another may be up too) and each that would be kept and is not yet (`kept_not_yet`: a later one
    then ends nothing on its own word), up to the first success that does neither (a node up before the
    loop's last failure, judged for containment only, never stops it), or the episode's end.
    `prepare(success, may_resolve)`: its boot's runs, the time it is judged at (PCS's), and whether its
    success alone is to be believed (`unreported`); None passes it over (a success about to fail), and the
    successes after it unless it may only contain."""
    told: list[ControllerEvent] = []
    waiting = False  # an earlier node would be kept and is not yet: a later one ends nothing
    for success, contains_only in settlings:
        episode = state.episode
        if episode is None:
            break
        may_resolve = not (waiting or contains_only)
        prepared = prepare(success, may_resolve)
        if prepared is None:
            if contains_only:
                continue
            break
        boot, now_ms, unreported = prepared
        listed = len(episode.kept)
        told.extend(
            settle(
                state,
                settings,
                success,
                boot,
                now_ms=now_ms,
                unreported=unreported,
                held=awaits_ready_checks(state, success, boot, now_ms),
                may_resolve=may_resolve,
                own_script_only=contains_only,
                lifeguards=lifeguards,
            )
        )
        if state.episode is None or len(episode.kept) != listed:
            continue  # resolved (the loop above ends), or kept: the next may be up too
        if kept_not_yet(state, success, boot, now_ms, own_script_only=contains_only):
            waiting = True
        elif not contains_only:
            break
    return told


class Settling(NamedTuple):
    """A success a settling judges, and whether it may only contain the loop (it ends nothing)."""

    success: BootOutcome
    contains_only: bool


def reports_its_end(
    state: GroupState, success: BootOutcome, failed: Sequence[NodeReport], *, kept: bool
) -> bool:
    """Whether `success`'s node reported, for that boot (`failed`, its failed runs), a failed run under
    TERMINATE (as the configuration it booted gives it, when known) that PCS ends the node for, whatever its
    ACTIVE said, its failure on its way: of the open loop's own script (a nodeReady loop), or of any script
    when the node would be `kept` (its loop's script failing on: a quarantined script's failure then fails
    a nodeReady check under TERMINATE, which the article shows runs all the same). Such a node stays up
    through nothing, so it neither ends nor contains the loop. A report holds a success back for
    `REPORTS_GRACE_MS` of the group's event time at most: a false one delays the loop's end, no more."""
    suspect = state.episode.suspect if state.episode else None
    if (suspect is None and not kept) or newest_event_ms(state) - success.event_timestamp > REPORTS_GRACE_MS:
        return False
    booted = booted_actions(state, success)
    runs = as_configured(failed, booted) if booted is not None else failed
    own = (suspect.stage, suspect.script) if suspect is not None else None
    return any(run.on_error == "TERMINATE" and (kept or (run.stage, run.script) == own) for run in runs)


def kept_awaits_ready_checks(state: GroupState, success: BootOutcome, boot: BootRuns, now_ms: int) -> bool:
    """Whether `success`'s node, whose loop's script failed on and which would be kept, is not kept yet. PCS
    logs a node ACTIVE once nodeBootstrapped is over and runs nodeReady after it (the article), and a node
    ships a failure at once: a quarantined script's STOP_SEQUENCE failure is in before the ACTIVE, and a
    nodeReady script under TERMINATE of the configuration it booted (a check that needs what the script
    does) may still end the node. It is kept once its reports show a run of each such script of that boot
    that did not fail (one that failed is `reports_its_end`'s), or once it is seen to stay up for
    `REPORTS_GRACE_MS` of PCS's time (`now_ms`: a late delivery ends no wait). A node not known to have
    booted the configuration as last read waits for nothing (its reports are then taken at their word); nor
    for a check after a nodeReady script that failed under STOP_SEQUENCE (`ready_checks_run`)."""
    booted = booted_actions(state, success)
    if booted is None or now_ms - success.event_timestamp > REPORTS_GRACE_MS:
        return False
    stopped = {
        run.script
        for run in as_configured(boot.failed, booted)
        if run.stage == "nodeReady" and run.on_error == "STOP_SEQUENCE"
    }
    return not ready_checks_run(booted, stopped) <= boot.ran


def awaits_ready_checks(state: GroupState, success: BootOutcome, boot: BootRuns, now_ms: int) -> bool:
    """Whether `success` ends nothing yet. PCS logs a node ACTIVE before nodeReady runs (the article), and a
    nodeReady script failing under TERMINATE then ends the node (`ready_checks`). Once a node of the open
    loop did just that (`Episode.failed_after_active_on`, from PCS's records alone), a node that booted the
    same configuration is not taken at its ACTIVE for `REPORTS_GRACE_MS` of event time (to `now_ms`: PCS's
    time, so a late delivery ends no wait), unless its reports
    show a run of each such script of that boot that did not fail. A report can only end the wait early (as
    before the wait existed: a false one is undone by PCS's end of the node, `reopen_after_ready_failure`);
    none can start it. Only a node known to have booted that configuration waits: launched on it, before any
    newer one, the group read since its launch."""
    episode, config = state.episode, state.config
    if episode is None or config is None or episode.failed_after_active_on is None:
        return False
    if now_ms - success.event_timestamp > REPORTS_GRACE_MS:
        return False
    launched = state.launched_at(success)
    looped_on = episode.failed_after_active_on
    if launched is None or launched < looped_on or config.checked_at < launched:
        return False
    if config.modified_at != looped_on and launched >= config.modified_at:
        return False  # it booted a newer configuration
    checks = ready_checks(config.node_lifecycle_actions) if config.modified_at == looped_on else None
    if not checks:
        return True  # no script a report could show passed (an older configuration's are not known here)
    return not checks <= boot.ran


def newest_event_ms(state: GroupState) -> int:
    """The group's newest event time known (its newest launch, outcome or unhealthy termination): the time a
    wait is judged at."""
    return max(
        max((o.event_timestamp for o in state.outcomes.values()), default=0),
        max(state.launches.values(), default=0),
        max(state.unhealthy.values(), default=0),
    )


def booted_current(state: GroupState, outcome: BootOutcome) -> bool:
    """Whether the outcome's node is known to have booted the group's configuration as last read: launched
    on it (at or after its modifiedAt), the group read since."""
    config, launched = state.config, state.launched_at(outcome)
    return config is not None and launched is not None and config.modified_at <= launched <= config.checked_at


def booted_actions(state: GroupState, outcome: BootOutcome) -> Mapping[str, Any] | None:
    """The lifecycle actions the outcome's node booted, when known (`booted_current`, the actions read);
    else None (its reports are then taken at their word)."""
    config = state.config
    if config is None or not config.actions_read or not booted_current(state, outcome):
        return None
    return config.node_lifecycle_actions or {}


def reopen_after_ready_failure(
    state: GroupState, settings: DetectionSettings, failure: BootOutcome
) -> list[ControllerEvent]:
    """When the node whose success ended the last episode fails after all (PCS logged it ACTIVE, then a
    nodeReady script under TERMINATE ended it) on the episode's own configuration: the loop never ended.
    The episode is open again, the failure its newest, told again (BootstrapLoopDetected: its LoopResolved
    was wrong), and a node on that configuration ends it only once it is seen to stay up
    (`awaits_ready_checks`). A node of another configuration failing so is that configuration's first
    failure: a loop of its own, told as any."""
    last, config = state.last_episode, state.config
    if last is None or config is None or last.resolved_by != failure.instance_id or last.resolved_at is None:
        return []
    if failure.event_timestamp - last.resolved_at > LAUNCH_BOOT_AFTER_OUTCOME_MS:
        return []  # not of the boot that ended it (nodeReady's scripts run within that bound)
    if last.config_modified_at != config.modified_at or not booted_current(state, failure):
        return []
    resolved_at = last.resolved_at
    last.resolved_at = last.resolved_by = None
    last.revision += 1
    if failure.instance_id not in {f.instance_id for f in last.failures}:
        failed = Failure(
            instance_id=failure.instance_id,
            scheduler_node_id=failure.scheduler_node_id,
            event_timestamp=failure.event_timestamp,
        )
        last.failures = [*last.failures, failed][-OUTCOME_LIMIT:]
    last.failed_after_active_on = config.modified_at
    state.episode, state.last_episode = last, None
    node = f" ({failure.scheduler_node_id})" if failure.scheduler_node_id else ""
    reason = (
        f"{failure.instance_id}{node} failed at {utc(failure.event_timestamp)}, after its BOOTSTRAP_SUCCESS "
        f"(a nodeReady script under TERMINATE): the loop did not end, the LoopResolved of "
        f"{utc(resolved_at)} was wrong"
    )
    logger.warning("group %s: %s", state.group_id, reason)
    return [episode_event("BootstrapLoopDetected", state, last, settings, reason=reason)]


def resolve(
    state: GroupState,
    settings: DetectionSettings,
    success: BootOutcome,
    evidence: str,
    *,
    lifeguards: Callable[[], bool] = lambda: False,
) -> list[ControllerEvent]:
    """End the open episode with `success`, a node that booted with no failed script (`evidence`: what
    says so): LoopResolved. `lifeguards()`: the configuration still holds a quarantine of Lifeguard's (it
    may read Lifeguard's ledger), said with the undo: the loop is over, but a failure of that script now
    keeps its node up without what the script does, logged as a success, until someone fixes the script and
    takes the change back."""
    episode = state.episode
    assert episode is not None
    episode.resolved_at = success.event_timestamp
    episode.resolved_by = success.instance_id
    episode.resumed_in_hold = None  # an episode opened again tells its own word, not a hold's
    node = f" ({success.scheduler_node_id})" if success.scheduler_node_id else ""
    when = utc(success.event_timestamp)
    reason = f"{success.instance_id}{node} bootstrapped successfully at {when} ({evidence})"
    undo = None
    if lifeguards():
        reason += (
            ". Lifeguard's quarantine is still in the configuration: a failure it stops is logged as a "
            "success, and its node comes up without what the script does. Once the script is fixed, push a "
            "configuration or undo Lifeguard's change (undone before, the loop may come back)"
        )
        undo = undo_command(state.cluster_id, state.group_id)
    state.last_episode, state.episode = episode, None
    return [episode_event("LoopResolved", state, episode, settings, reason=reason, undo=undo)]


def revoke_false_proof(
    state: GroupState, reports: Sequence[NodeReport], *, now_ms: int | None = None
) -> bool:
    """Forget the proven-good configuration when the node that proved it reported a failed script of it
    for that boot after all (its reports came after the scaling log's success, as a nodeReady run does),
    under the onError that configuration gives the script (the one the node booted: a run under another
    cannot be true of it); True when it did. Not past REPORTS_OVERTURN_MS after the proof (at `now_ms`,
    when given): a revert then has the proof to go back to."""
    dropped = False
    before = state.proven_before
    if before is not None:  # the proof kept behind the current one is held to its node's reports too
        failed = _failed_on_its_boot(state, before, reports, now_ms)
        if failed is not None:
            logger.warning(
                "group %s: configuration %s, proven before the current one, is not proven good: %s failed "
                "%s on that boot",
                state.group_id,
                before.fingerprint[:12],
                before.instance_id,
                failed,
            )
            state.proven_before, dropped = None, True
    proof = state.proven_good
    failed = _failed_on_its_boot(state, proof, reports, now_ms) if proof is not None else None
    if proof is None or failed is None:
        return dropped
    return _revoke(state, f"{proof.instance_id} failed {failed} on that boot")


def _failed_on_its_boot(
    state: GroupState, proof: ProvenGood, reports: Sequence[NodeReport], now_ms: int | None
) -> str | None:
    """The script the node that made `proof` reported failed on that boot, under the onError its
    configuration gives it (None: none did, or the report came too late to count)."""
    outcome = state.outcomes.get(proof.instance_id)
    since = state.launched_at(outcome) if outcome is not None else None
    actions = proof.node_lifecycle_actions or {}
    runs = failed_runs(reports, proof.instance_id, since, scripts_of(actions), outcome_ms=proof.proven_at)
    runs = as_configured(runs, actions)
    if not runs or _too_late(state, "revoke the proof it made", proof.instance_id, proof.proven_at, now_ms):
        return None
    return runs[-1].script


def revoke_proof_of_older_launch(state: GroupState, records: Sequence[ScalingLogRecord]) -> bool:
    """Forget the proven-good configuration when its node's LAUNCHED record, delivered after its success,
    shows it was launched before that configuration took effect (it booted an older one); True when it
    did."""
    proof = state.proven_good
    if proof is None:
        return False
    launched = [
        r.event_timestamp
        for r in records
        if r.status_code == "LAUNCHED" and r.instance_id == proof.instance_id
    ]
    if not launched or min(launched) >= proof.modified_at:
        return False
    return _revoke(state, f"{proof.instance_id} was launched before it took effect")


def revoke_proof_of_failed_node(state: GroupState) -> bool:
    """Forget the proven-good configuration when the node that proved it failed after all: PCS logs a node
    ACTIVE once nodeBootstrapped is over, before nodeReady runs, and a nodeReady script failing under
    TERMINATE then ends it as BOOTSTRAP_FAILED (its outcome, `detection.apply_record`); True when it did."""
    proof = state.proven_good
    if proof is None:
        return False
    outcome = state.outcomes.get(proof.instance_id)
    if outcome is None or outcome.succeeded:
        return False
    return _revoke(state, f"{proof.instance_id} failed after its BOOTSTRAP_SUCCESS (in nodeReady)")


def revoke_proof_of_looped_config(state: GroupState) -> bool:
    """Forget the proven-good configuration when the scaling log shows it looping since it was proven (a
    script it fetches broke in place, or its failures were intermittent): put back by a revert, it would
    loop again; True when it did."""
    proof, episode = state.proven_good, state.episode
    if proof is None or episode is None:
        return False  # most groups, at every batch
    last = _looped_since(proof, episode)
    if last is None:
        return False
    return _revoke(state, f"it looped since ({last.instance_id} failed at {utc(last.event_timestamp)})")


def _looped_since(proof: ProvenGood, episode: Episode | None) -> Failure | None:
    """The newest failure of `episode` that shows the configuration of `proof` looping after it was proven
    (the scaling log's: the nodes' reports alone decide nothing), if there is one."""
    if episode is None or episode.config_fingerprint != proof.fingerprint:
        return None
    if "scaling_log" not in episode_signals(episode):
        return None
    since = [failure for failure in episode.failures if failure.event_timestamp > proof.proven_at]
    return since[-1] if since else None


def _revoke(state: GroupState, why: str) -> bool:
    """Forget the group's proven-good configuration, and say why; True. The proof of another configuration
    it replaced (`proven_before`) stands again, unless its own node failed or its configuration looped since
    (looked at as for any proof)."""
    proof = state.proven_good
    assert proof is not None
    logger.warning(
        "group %s: configuration %s is not proven good: %s", state.group_id, proof.fingerprint[:12], why
    )
    before, state.proven_good, state.proven_before = state.proven_before, None, None
    if before is None or before.fingerprint == proof.fingerprint:
        return True
    if _looped_since(before, state.last_episode) is not None:  # a loop of it ended since: no proof either
        return True
    state.proven_good = before
    if not (revoke_proof_of_failed_node(state) or revoke_proof_of_looped_config(state)):
        logger.warning(
            "group %s: configuration %s, proven good by %s before it, is the proven-good one again",
            state.group_id,
            before.fingerprint[:12],
            before.instance_id,
        )
    return True
