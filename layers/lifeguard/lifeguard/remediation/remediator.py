"""The remediate Lambda's logic: a BootstrapLoopDetected event in, one decision out, with rails.

Nothing that arrives can make Lifeguard change a group that did not loop: a detection is acted on only
when it is valid (the events' contract, bounded: `lifeguard.event_contract.clean_detail`) and matches the open
episode Lifeguard keeps for the group, with the same episode id, configuration fingerprint and
`config_modified_at`. Anything else is refused, audited and published as RemediationSkipped with the reason.

Per detection (episode, revision), under the group's lock (a lease that ends with the invocation, and is
released on the way out):
1. a detection already decided is a duplicate: counted in the audit trail, its events re-published only
   if they never were;
2. a change already set out for it is reconciled: PCS took it (it is recorded as applied), did not (it is
   made now, with the same clientToken), or someone changed the group meanwhile (it is abandoned);
3. the detection must match the group's open episode;
4. the group is read fresh (status, configuration, tags); it is acted on only when ACTIVE and still on
   the configuration the detection saw;
5. the action is the group's mode, moved up the escalation ladder when the loop went on under
   Lifeguard's own change of the same episode (quarantine → revert → a person);
6. cooldown and daily cap are checked; the change is written to the ledger as pending, then applied with
   a clientToken derived from the episode, PCS errors that pass are retried with backoff (honouring
   `retryAfterSeconds` up to a minute), and no wait outlasts the time the invocation has left;
7. the decision is audited and published as RemediationApplied / RemediationSkipped / RemediationFailed.
A failure that outlasts the retries is published, then raised (`RemediationParkedError`), so the Lambda's
retries and parked queue keep the event: nothing is dropped, and a change PCS took is never reported
as skipped.
"""

from __future__ import annotations

import hashlib
import logging
import time
import uuid
from collections.abc import Callable, Mapping
from dataclasses import replace
from typing import Any, NamedTuple, TypeVar

from lifeguard.aws.eventbridge import EventPublisher
from lifeguard.aws.pcs import (
    ANSWER_UNREAD_CODES,
    GroupSnapshot,
    PcsGateway,
    RetryPolicy,
    call_with_retries,
    is_transient,
)
from lifeguard.bounds import CLIENT_TOKEN_PREFIX, clip, utc
from lifeguard.detection import drain_of, mode_of
from lifeguard.errors import AwsCallError, GroupNotFoundError, LifeguardError
from lifeguard.event_contract import ControllerEvent, group_name, make_detail, undo_command
from lifeguard.group_state import Episode, GroupState, ProvenGood
from lifeguard.lifecycle import diff_api_configs, fingerprint_of
from lifeguard.lifecycle_rules import drains_kept_nodes
from lifeguard.metrics import Metric, uncounted
from lifeguard.remediation import rails
from lifeguard.remediation.actions import ActionContext, Plan, TakeOutDrain, action_for
from lifeguard.remediation.apply import ChangeMaker
from lifeguard.remediation.iac import ManagedBy, managed_by
from lifeguard.remediation.loop_detection import LoopDetection
from lifeguard.remediation.records import AppliedChange, AuditEntry, Decision, Ledger
from lifeguard.remediation.settings import RemediationSettings
from lifeguard.store.groups import GroupStore
from lifeguard.store.remediations import RemediationStore
from lifeguard.values import mutable

__all__ = [
    "NOT_TAKEN_CODES",
    "RemediationBusyError",
    "RemediationParkedError",
    "Remediator",
    "may_have_taken",
    "undo_command",
]

# The answer to a replacement loop that no change of Lifeguard's caused.
_REPLACED_CLEAN = (
    "The nodes replaced as unhealthy reported every nodeBootstrapped script run and none failed: Lifeguard's "
    "drain step drained none of them, so it stays. Look at the nodes' health (EC2 status checks, slurmd, "
    "Slurm's drain reason)."
)
_REPLACED_NOT_BY_LIFEGUARD = (
    "Nodes launched on the current configuration were replaced as unhealthy, and no change of Lifeguard's "
    "drains them: no script to switch, nothing to take out. Look at the nodes' health (EC2 status checks, "
    "slurmd, Slurm's drain reason)."
)

logger = logging.getLogger("lifeguard")
T = TypeVar("T")


class RemediationBusyError(LifeguardError):
    """Another remediation of the group holds its lock; the event is retried later."""


class _MovedOnError(LifeguardError):
    """The group's configuration is no longer the one a change was planned on; `maybe_made` when an attempt
    before failed in a way that does not say PCS did not take it (a 5xx, a lost answer)."""

    def __init__(self, maybe_made: bool, *, as_intended: bool = False) -> None:
        super().__init__("the group's configuration moved on")
        self.maybe_made = maybe_made
        self.as_intended = as_intended  # to the very configuration the change would have set


class _UnwantedError(LifeguardError):
    """The change is no longer to be made, found while its update waited to be retried (`why`): its episode
    ended, or the group was tagged off or notify, or the stack went DryRun. `maybe_made` as
    `_MovedOnError`'s."""

    def __init__(self, why: str, maybe_made: bool) -> None:
        super().__init__(why)
        self.why = why
        self.maybe_made = maybe_made


# Failures of an update that say PCS did not take it: refused (throttled, a conflict) or never sent.
NOT_TAKEN_CODES = frozenset(
    {
        "ThrottlingException",
        "Throttling",
        "TooManyRequestsException",
        "ConflictException",
        "429",
        "EndpointConnectionError",
        "ConnectTimeoutError",
        "ProxyConnectionError",
    }
)


def may_have_taken(exc: AwsCallError) -> bool:
    """Whether PCS may have made an update whose call failed with `exc`: its answer lost or unreadable. Not
    when it was throttled, a conflict or never sent (`NOT_TAKEN_CODES`), nor refused for the change itself
    (a value, a permission: not transient, its answer read)."""
    refused = not is_transient(exc) and exc.code not in ANSWER_UNREAD_CODES
    return exc.code not in NOT_TAKEN_CODES and not refused


class RemediationParkedError(LifeguardError):
    """The remediation failed after its retries; RemediationFailed was published and the event is left to
    the Lambda's retries and parked queue."""


@mutable
class _Verdict:
    status: str  # applied | skipped | failed
    mode: str
    action: str | None
    reason: str
    dry_run: bool
    config_before: dict[str, Any] | None = None
    plan: Plan | None = None
    refused: bool = False  # the detection matched no open episode: no decision is recorded for it
    held_by_dry_run: bool = False  # mode notify or the stack's DryRun held the change back (the audit's)
    held_until: float | None = None  # the cooldown or the daily cap held it back until then (`rails.Hold`)


class _GroupRead(NamedTuple):
    """The group as read under the lock, for a plan: its mode, whether kept nodes are drained and who owns
    it (its tags, given too), and its configuration (`before`)."""

    group: GroupSnapshot
    mode: str
    drain: bool
    owner: ManagedBy | None
    tags: Mapping[str, str]
    before: dict[str, Any] | None


# Plans of one decision at most: each after the state was found changed in its plan's part (`_basis`) by
# the time the change was to be set out. Node reports change it a few times in a loop, not continually.
PLANS_MAX = 3


class Remediator:
    """Decides and applies one remediation per detection."""

    def __init__(
        self,
        store: RemediationStore,
        states: GroupStore,
        pcs: PcsGateway,
        publisher: EventPublisher,
        settings: RemediationSettings,
        *,
        clock: Callable[[], float] | None = None,
        sleep: Callable[[float], None] | None = None,
        metric: Metric | None = None,
    ) -> None:
        self.store = store
        self.states = states
        self.pcs = pcs
        self.publisher = publisher
        self.settings = settings
        self.clock = clock or time.time
        self.sleep = sleep or time.sleep
        self.metric = metric or uncounted
        self.retries = 0
        self.attempts = 0  # of the last call made through `_retrying`
        # Waits made (`_wait`), and how many had been made when the group was last read to be planned on:
        # a change is made on that read only while no wait came between (`_guarded`).
        self.waits = 0
        self._waits_at_read = 0
        self._waits_at_state = 0  # waits made when Lifeguard's state of the group was read (`_decide`)
        self.tags_ignored: list[str] = []  # the group's tags that say no mode or drain (`_tagged`), said
        # Changes of other detections a decision found PCS had made (`_settle_others`): audited and told
        # once the decision is (`_tell_settled`).
        self._settled: list[AppliedChange] = []
        self._settled_in: Ledger | None = None  # the ledger `_settled` are entries of

    @property
    def changes(self) -> ChangeMaker:
        """How this remediator changes a group: through its store and its PCS, whichever they are now."""
        return ChangeMaker(self.store, self.pcs)

    # -- entry points --

    def handle_event(
        self, event: Mapping[str, Any], *, remaining_ms: int | None = None
    ) -> list[ControllerEvent]:
        """One EventBridge event; `remaining_ms` is the time the invocation has left (Lambda's context).
        Anything but a BootstrapLoopDetected is left alone; an invalid one is refused."""
        if not isinstance(event, Mapping):  # what EventBridge delivers is an object; anything else is not
            logger.error("event ignored: not a JSON object (%s)", type(event).__name__)
            return []
        if event.get("detail-type") != "BootstrapLoopDetected":
            logger.info(
                "not a BootstrapLoopDetected event (%s): nothing to remediate", clip(event.get("detail-type"))
            )
            return []
        seconds = remaining_ms / 1000 if remaining_ms is not None else self.settings.invocation_seconds
        detection = LoopDetection.from_detail(event.get("detail"))
        if not isinstance(detection, LoopDetection):
            return self._refuse(*detection)
        return self.handle(detection, deadline=self.clock() + seconds)

    def handle(self, detection: LoopDetection, *, deadline: float | None = None) -> list[ControllerEvent]:
        """Decide on one detection under the group's lock, every wait ending before `deadline` (clock
        time); returns the events published."""
        cluster_id, group_id = detection.cluster_id, detection.compute_node_group_id
        deadline = deadline if deadline is not None else self.clock() + self.settings.invocation_seconds
        holder = uuid.uuid4().hex
        self._lock(cluster_id, group_id, holder, deadline)
        try:
            known = self.store.decision(cluster_id, group_id, detection.episode_id, detection.revision)
            if known is not None and known.status != "failed":
                return self._duplicate(detection, known)
            self._settled, self._settled_in = [], None
            outcome, detection = self._decide(detection, deadline)
            event = self._event(detection, outcome)
            now = self.clock()
            self._tell_settled(cluster_id, group_id, now, name=detection.compute_node_group_name)
            entry = self._audit_entry(detection, outcome, event, now)
            if outcome.refused:
                # Not a decision on the episode: a forged copy of its id must not pre-empt the real one.
                self.store.audit(cluster_id, group_id, entry)
                self.publisher.publish([event])
                self.metric(event.detail_type, 1)
            else:
                decided = (detection.episode_id, detection.revision)
                decision = Decision(
                    status=outcome.status, events=[event.to_dict()], held_until=outcome.held_until
                )
                self.store.save_audited_decision(
                    cluster_id, group_id, decided, decision=decision, entry=entry, now=now
                )
                # Counted once stored, whether or not it is published now: a retry then answers from the
                # decision (DuplicateDetections); one that found none decides, and counts, again.
                self.metric(event.detail_type, 1)
                self._publish_decided(
                    cluster_id, group_id, decided, decision=decision, events=[event], now=now
                )
        finally:
            self.store.release(cluster_id, group_id, holder)
        if outcome.status == "failed":
            said = f"group {group_id} of cluster {cluster_id}: {outcome.reason}"
            logger.error("%s", said)  # one line naming the group, beside Lambda's record of the error
            raise RemediationParkedError(said)
        return [event]

    # -- steps --

    def _refuse(self, detail: dict[str, Any], problems: list[str]) -> list[ControllerEvent]:
        """An invalid detection: audited and published as RemediationSkipped when it names a valid group,
        logged and counted when it does not even do that."""
        self.metric("RefusedDetections", 1)
        said = clip("; ".join(problems), 600)
        reason = f"Refused: the detection is not valid ({said}); nothing was changed."
        cluster_id, group_id = detail["cluster_id"], detail["compute_node_group_id"]
        if not cluster_id or not group_id:
            logger.error("BootstrapLoopDetected event ignored: %s", reason)
            self.metric("InvalidEvents", 1)
            return []
        logger.error("group %s of cluster %s: %s", group_id, cluster_id, reason)
        episode_id, revision = detail["episode_id"], detail.get("revision") or 1
        said_back = {**detail, "mode": None, "dry_run": True, "reason": reason, "undo": None}
        # Named by its ids alone: a refused event's name is only what it says.
        said_back.update(config_after=None, diff=[], action=None, compute_node_group_name=None)
        event = ControllerEvent(
            "RemediationSkipped",
            make_detail(**said_back),
            f"{episode_id or 'refused-' + uuid.uuid4().hex[:12]}:RemediationSkipped:{revision}",
        )
        self.store.audit(
            cluster_id,
            group_id,
            AuditEntry(
                at=self.clock(), decision="skipped", episode_id=episode_id, revision=revision, reason=reason
            ),
        )
        self.publisher.publish([event])
        return [event]

    def _lock(self, cluster_id: str, group_id: str, holder: str, deadline: float) -> None:
        waited = 0.0
        while True:
            now = self.clock()
            lease = max(deadline - now, 1.0) + self.settings.lease_margin_seconds
            if self.store.acquire(cluster_id, group_id, holder, now, lease):
                return
            if waited >= min(self.settings.lock_wait_seconds, deadline - now - self.settings.reserve_seconds):
                self.metric("LockBusy", 1)
                raise RemediationBusyError(f"{group_id}: another remediation holds the lock; retry later")
            self.sleep(0.5)
            waited += 0.5

    def _duplicate(self, detection: LoopDetection, known: Decision) -> list[ControllerEvent]:
        cluster_id, group_id = detection.cluster_id, detection.compute_node_group_id
        now = self.clock()
        known.deliveries += 1
        events = [ControllerEvent.from_dict(entry) for entry in known.events]
        if not known.published:
            events = self._still_true(detection, known, events)
            self.publisher.publish(events)
            known.events, known.published = [event.to_dict() for event in events], True
        decided = (detection.episode_id, detection.revision)
        self.store.save_decision(cluster_id, group_id, decided, decision=known, now=now)
        self.store.audit(
            cluster_id,
            group_id,
            AuditEntry(
                at=now,
                decision="duplicate",
                episode_id=detection.episode_id,
                revision=detection.revision,
                reason=f"detection delivered again ({known.deliveries} deliveries); already {known.status}",
            ),
        )
        self.metric("DuplicateDetections", 1)
        logger.info("%s revision %d already %s", detection.episode_id, detection.revision, known.status)
        return []

    def _still_true(
        self, detection: LoopDetection, known: Decision, events: list[ControllerEvent]
    ) -> list[ControllerEvent]:
        """The events of a decision never published, as they are true now: a change the operator undid
        meanwhile is told as undone (RemediationSkipped, no undo line), not as in place."""
        if known.status != "applied":
            return events
        cluster_id, group_id = detection.cluster_id, detection.compute_node_group_id
        ledger = self.store.ledger(cluster_id, group_id)
        intent = ledger.intent(detection.episode_id, detection.revision)
        said = rails.undone(ledger, intent) if intent is not None else None
        if said is None:
            return events
        return [
            ControllerEvent(
                "RemediationSkipped",
                {**event.detail, "reason": said, "undo": None},
                event.key.replace(":RemediationApplied:", ":RemediationSkipped:"),
            )
            if event.detail_type == "RemediationApplied"
            else event
            for event in events
        ]

    def _decide(self, detection: LoopDetection, deadline: float) -> tuple[_Verdict, LoopDetection]:
        """The outcome, and the detection as Lifeguard's own state tells it (its evidence and suspect are
        the open episode's, not what the event says)."""
        cluster_id, group_id = detection.cluster_id, detection.compute_node_group_id
        ledger = self.store.ledger(cluster_id, group_id)
        intent = ledger.intent(detection.episode_id, detection.revision)
        state = self.states.load(cluster_id, group_id)
        self._waits_at_state = self.waits
        if intent is not None:
            # A retry or a redrive of a change set out before: whatever it says, what is decided and told
            # is Lifeguard's own (the intent, the episode), as for a first delivery.
            return self._reconcile(detection, ledger, intent, deadline), _as_known(detection, state)
        unmatched = rails.unmatched(detection, state, ledger)
        clusters = self.settings.clusters
        if unmatched is None and clusters and cluster_id not in clusters:
            # Published before the stack's ClusterIds were narrowed, or by someone else on the bus.
            unmatched = (
                f"Refused: cluster {clip(cluster_id)} is not one of the stack's ClusterIds; nothing was "
                "changed."
            )
        if unmatched is not None:
            self.metric("RefusedDetections", 1)
            refused = _Verdict("skipped", self._known_mode(state), None, unmatched, True, refused=True)
            return refused, detection.model_copy(update={"compute_node_group_name": group_name(state)})
        self.tags_ignored = []
        verdict, detection = self._decide_matched(detection, state, ledger, deadline)
        if self.tags_ignored:  # whoever mistyped a tag learns it where they read the outcome, not in a log
            ignored = "; ".join(self.tags_ignored)
            verdict = replace(verdict, reason=f"{verdict.reason} Tag ignored: {ignored}.".strip())
        return verdict, detection

    def _decide_matched(
        self, event: LoopDetection, state: GroupState, ledger: Ledger, deadline: float
    ) -> tuple[_Verdict, LoopDetection]:
        """The outcome of a detection that matched the open episode, and the detection as the state it was
        planned on tells it (`_as_known`). The plan is made from the state, which node reports change at
        any time: read again just before the change, a state whose plan's part moved (`_basis`) is planned
        on again, the group as read."""
        cluster_id, group_id = event.cluster_id, event.compute_node_group_id
        detection = _as_known(event, state)
        mode = self._known_mode(state)
        try:
            group = self._settled_group(cluster_id, group_id, deadline)
            mode, drain, owner, tags = self._tagged(group, deadline)
        except GroupNotFoundError:
            return _Verdict("skipped", mode, None, "the compute node group no longer exists", True), detection
        except AwsCallError as exc:
            return _Verdict("failed", mode, None, f"{exc}; the event is parked for a retry", True), detection
        before = dict(group.node_lifecycle_actions) if group.node_lifecycle_actions else None
        self._settle_others(detection, ledger, group)
        read = _GroupRead(group, mode, drain, owner, tags, before)
        for _ in range(PLANS_MAX):
            planned = self._planned(detection, state, ledger, read)
            if isinstance(planned, _Verdict):
                return planned, detection
            plan, said = planned
            fresh = self.states.load(cluster_id, group_id)
            ended = self._ended_meanwhile(detection, fresh, ledger)
            if ended is not None:
                return _Verdict("skipped", mode, plan.action, ended, True, before), detection
            if _basis(fresh) == _basis(state):
                break
            state, detection = fresh, _as_known(event, fresh)
        else:  # left to the retry: a skip would be this revision's decision for good
            kept = self._meanwhile(
                "the episode's suspect or proven-good configuration kept changing; the event is parked for "
                "a retry"
            )
            return _Verdict("failed", mode, plan.action, kept, True, before), detection
        verdict = self._apply(
            detection,
            ledger,
            plan,
            before=before,
            modified_at=group.modified_at_ms,
            mode=mode,
            said=said,
            deadline=deadline,
        )
        return verdict, detection

    def _planned(
        self, detection: LoopDetection, state: GroupState, ledger: Ledger, read: _GroupRead
    ) -> _Verdict | tuple[Plan, str]:
        """The change to make on the group as read, and its sentence; or the outcome, when it is not to be
        made."""
        mode, before = read.mode, read.before
        earlier = ledger.of_episode(detection.episode_id)
        assert state.episode is not None  # matched
        held = (
            rails.group_unfit(mode, read.group.status, read.tags)
            or rails.not_borne_out(state.episode)
            or rails.already_remediated(detection, earlier, ledger, before, read.group.modified_at_ms)
            or rails.configuration_moved(detection, before, read.group.modified_at_ms)
            or rails.configuration_invalid(before)
            or rails.configuration_too_large(before)
        )
        if held:
            return _Verdict("skipped", mode, None, held, True, before)
        if detection.kind == "replacement":
            if not drains_kept_nodes(before) or not _drain_step_is_lifeguards(ledger):
                return _Verdict("skipped", mode, None, _REPLACED_NOT_BY_LIFEGUARD, True, before)
            if state.episode.no_script_failed:
                return _Verdict("skipped", mode, None, _REPLACED_CLEAN, True, before)
            # A drain/replace loop of Lifeguard's own drain step: the step is taken out at once (neither the
            # cooldown nor the daily cap holds back undoing Lifeguard's own harm; an escalation, unlike it,
            # is held back by the daily cap).
            plan, lead, paced = TakeOutDrain().plan(ActionContext(before)), None, False
        else:
            action, lead = rails.ladder(mode, earlier, detection.config_fingerprint)
            if action is None:
                return _Verdict("skipped", mode, None, lead or "", True, before)
            good = state.proven_good
            plan = action_for(action).plan(
                ActionContext(
                    before,
                    detection.suspect_script,
                    good.node_lifecycle_actions if good else None,
                    self.settings.node_bundle if read.drain else None,
                    _proof(good, self.clock()) if good else None,
                    state.episode.no_script_failed if state.episode else False,
                    tuple(change.config_before for change in earlier if change.config_before),
                    _looped_since(ledger, good.proven_at) if good else (),
                    _also_failing(state.episode),
                )
            )
            paced = True
        notes = "; ".join(plan.notes)
        would = f"{plan.action} would change: {notes}." if notes else ""
        if not plan.changes_something:
            nothing = f"Nothing to change: {notes}." if notes else "Nothing to change."
            return _Verdict("skipped", mode, plan.action, nothing, True, before, plan)
        too_large = rails.configuration_too_large(plan.config_after)  # a revert's proven-good one
        if too_large:
            return _Verdict("skipped", mode, plan.action, too_large, True, before)
        now = self.clock()
        dry = rails.dry_run(mode, self.settings, would)
        if dry:
            return _Verdict("skipped", mode, plan.action, dry, True, before, plan, held_by_dry_run=True)
        hold = (
            rails.cooldown(
                ledger, rails.escalates(earlier, detection.config_fingerprint), self.settings, now, would
            )
            or rails.daily_cap(ledger, self.settings, now)
            if paced
            else None
        )
        if hold:
            return _Verdict(
                "skipped", mode, plan.action, hold.reason, True, before, plan, held_until=hold.until
            )
        said = f"Applied {plan.action}: {notes}." if notes else f"Applied {plan.action}."
        if not paced:
            said = f"{said[:-1]} (not held back by the cooldown or the daily cap)."
        owner = read.owner
        said = " ".join(
            part
            for part in (lead, said, owner.note(plan.changes, plan.config_after) if owner else None)
            if part
        )
        return plan, said

    def _ended_meanwhile(self, detection: LoopDetection, fresh: GroupState, ledger: Ledger) -> str | None:
        """Why the change is not to be made after all, when the episode no longer stands in `fresh` (the
        state read again just before the change is set out, waits or none): a node booted clean meanwhile
        (LoopResolved told), or it was about another configuration by now. The reads of PCS take seconds
        (the group UPDATING, a call retried: minutes, at worst), and scaling_events ends an episode whenever
        a node comes up. (PCS takes no condition on an update: what ends in the moment between this read and
        the change is told by the next LoopResolved.)"""
        moved = rails.unmatched(detection, fresh, ledger)
        if moved is None:
            return None
        return self._meanwhile(moved.removeprefix("Refused: "))

    def _meanwhile(self, what: str) -> str:
        waited = "waited" if self.waits != self._waits_at_state else "read the group"
        return f"Not made (it changed while Lifeguard {waited}): {what}"

    def _settle_others(self, detection: LoopDetection, ledger: Ledger, group: GroupSnapshot) -> None:
        """Changes set out for other detections and still pending (PCS failed them until their events were
        parked, and no retry came back): settled by what the group holds, read under the lock. PCS holds
        one: it is recorded as applied. The group holds the configuration from before, unchanged since the
        change was set out: it is let go, as never made (left pending, it would count as Lifeguard's for the
        ladder, the cooldown and the daily cap; a redrive of its event then decides afresh, on the group as
        it is). The group changed since, to something else: PCS may have made it first, so it is recorded
        `unconfirmed` and still counts. One recorded applied is `untold` until `_tell_settled` told it: a
        decision that failed before it did leaves it to its retry (or the next decision) to tell."""
        current = fingerprint_of(dict(group.node_lifecycle_actions) if group.node_lifecycle_actions else None)
        self._settled_in = ledger
        for change in ledger.changes:
            if change.status == "applied" and change.untold:
                # Settled by a decision that failed before it told it; unless a redrive of its own event
                # told it since (its decision applied).
                own = self.store.decision(
                    detection.cluster_id, detection.compute_node_group_id, change.episode_id, change.revision
                )
                if own is not None and own.status == "applied":
                    if not own.published:  # decided and audited, its publishing failed: published now
                        self._publish_decided(
                            detection.cluster_id,
                            detection.compute_node_group_id,
                            (change.episode_id, change.revision),
                            decision=own,
                            events=[ControllerEvent.from_dict(entry) for entry in own.events],
                            now=self.clock(),
                        )
                    change.untold = False
                    self.store.save_ledger(detection.cluster_id, detection.compute_node_group_id, ledger)
                else:
                    self._settled.append(change)
                continue
            if change.status != "pending" or change.action == "undo" or ledger.undo_of(change) is not None:
                continue  # an operator's undo set out (and the change it undoes) is the next undo's to settle
            if (change.episode_id, change.revision) == (detection.episode_id, detection.revision):
                continue
            if change.fingerprint_after == current:
                change.untold = True  # saved with it: a retry of this decision tells it if this one cannot
                self.changes.applied(
                    detection.cluster_id,
                    detection.compute_node_group_id,
                    ledger=ledger,
                    intent=change,
                    updated=group,
                )
                self._settled.append(change)
            elif change.fingerprint_before == current and group.modified_at_ms <= change.at * 1000:
                self.changes.abandoned(
                    detection.cluster_id, detection.compute_node_group_id, ledger=ledger, intent=change
                )
            else:
                self.changes.unconfirmed(
                    detection.cluster_id, detection.compute_node_group_id, ledger=ledger, intent=change
                )
            logger.warning(
                "group %s: %s of %s (revision %d), set out and never confirmed, recorded as %s",
                detection.compute_node_group_id,
                change.action,
                change.episode_id,
                change.revision,
                change.status,
            )

    def _publish_decided(
        self,
        cluster_id: str,
        group_id: str,
        decided: tuple[str, int],
        *,
        decision: Decision,
        events: list[ControllerEvent],
        now: float,
    ) -> None:
        """Publish a stored decision's events, then store it as published: a retry after a failed publish
        finds it unpublished and publishes it (`_duplicate`, `_settle_others`)."""
        self.publisher.publish(events)
        decision.published = True
        self.store.save_decision(cluster_id, group_id, decided, decision=decision, now=now)

    def _tell_settled(self, cluster_id: str, group_id: str, now: float, *, name: str | None) -> None:
        """A change another decision found PCS had made (its own detection's event parked, its answers lost):
        audited and published as RemediationApplied of its detection, with its diff and the undo command
        (none when the operator undid it since: said so instead), and stored as that detection's decision
        with its audit line (one transaction), so the trail and the channels say what the group holds and
        a redrive of its event answers from it."""
        for change in self._settled:
            plan = _plan_of(change)
            said = change.reason or f"Applied {change.action}."
            reason = f"{said} (PCS had taken the change before it was confirmed; found by a later decision)"
            undo: str | None = undo_command(cluster_id, group_id)
            undone = rails.undone(self._settled_in, change) if self._settled_in is not None else None
            if undone is not None:
                reason, undo = f"{reason} Since then: {undone.removeprefix('Undone: ')}", None
            mode = change.mode or self.settings.default_mode
            detail = make_detail(
                episode_id=change.episode_id,
                cluster_id=cluster_id,
                compute_node_group_id=group_id,
                compute_node_group_name=name,
                mode=None if mode == "off" else mode,  # as `_event` says
                config_before=change.config_before,
                config_after=change.config_after,
                diff=[c.to_detail() for c in plan.changes],
                reason=reason,
                undo=undo,
                revision=change.revision,
                action=change.action,
            )
            key = f"{change.episode_id}:RemediationApplied:{change.revision}"
            event = ControllerEvent("RemediationApplied", detail, key)
            entry = AuditEntry(
                at=now,
                decision="applied",
                episode_id=change.episode_id,
                revision=change.revision,
                mode=mode,
                action=change.action,
                reason=reason,
                config_before=change.config_before,
                config_after=change.config_after,
                diff=list(detail["diff"]),
            )
            decided = (change.episode_id, change.revision)
            decision = Decision(status="applied", events=[event.to_dict()])
            self.store.save_audited_decision(
                cluster_id, group_id, decided, decision=decision, entry=entry, now=now
            )
            self.metric("ChangesReconciled", 1)
            self._publish_decided(cluster_id, group_id, decided, decision=decision, events=[event], now=now)
        if self._settled and self._settled_in is not None:  # told: no retry tells them again
            for change in self._settled:
                change.untold = False
            self.store.save_ledger(cluster_id, group_id, self._settled_in)

    def _apply(
        self,
        detection: LoopDetection,
        ledger: Ledger,
        plan: Plan,
        *,
        before: dict[str, Any] | None,
        modified_at: int,
        mode: str,
        said: str,
        deadline: float,
    ) -> _Verdict:
        """Record the intent of `plan` (on the group as read under the lock: `before`, last modified at
        `modified_at`), then make the change (the one path for every change)."""
        cluster_id, group_id = detection.cluster_id, detection.compute_node_group_id
        now = self.clock()
        after = plan.config_after or {}
        fingerprint_after = fingerprint_of(after)
        # PCS scopes clientTokens to the caller, not the group: the group is part of the seed.
        seed = f"{cluster_id}:{group_id}:{detection.episode_id}:{detection.revision}:{fingerprint_after}"
        intent = AppliedChange(
            at=now,
            episode_id=detection.episode_id,
            revision=detection.revision,
            action=plan.action,
            config_before=before,
            config_after=after,
            fingerprint_before=fingerprint_of(before),
            fingerprint_after=fingerprint_after,
            modified_at_before=modified_at,
            status="pending",
            client_token=CLIENT_TOKEN_PREFIX + hashlib.sha256(seed.encode()).hexdigest()[:40],
            mode=mode,
            reason=said,
        )
        # The intent is recorded before the change: if what follows is lost, a retry recognises the change.
        self.changes.record(cluster_id, group_id, ledger=ledger, intent=intent)
        return self._make_change(detection, ledger, intent, plan, deadline)

    def _reconcile(
        self, detection: LoopDetection, ledger: Ledger, intent: AppliedChange, deadline: float
    ) -> _Verdict:
        """A detection whose change was set out before (a retry, a redrive): find out what became of it."""
        cluster_id, group_id = detection.cluster_id, detection.compute_node_group_id
        plan = _plan_of(intent)
        mode = intent.mode or self.settings.default_mode
        said = intent.reason or f"Applied {intent.action}."
        undone = rails.undone(ledger, intent)
        if undone is not None:  # made, then undone by the operator, before this retry came
            return _Verdict("skipped", mode, intent.action, undone, True, intent.config_before, plan)
        if intent.status == "applied":
            return _Verdict("applied", mode, intent.action, said, False, intent.config_before, plan)
        if intent.status == "unconfirmed":
            why = _unconfirmed_reason(f"the group changed before Lifeguard's {intent.action} was confirmed")
            return _Verdict("skipped", mode, intent.action, why, True, intent.config_before)
        try:
            group = self._settled_group(cluster_id, group_id, deadline)
        except GroupNotFoundError:
            return self._abandon(detection, ledger, intent, "the compute node group no longer exists")
        except AwsCallError as exc:
            reason = f"{exc}; the event is parked for a retry"
            return _Verdict("failed", mode, intent.action, reason, False, intent.config_before, plan)
        current = fingerprint_of(dict(group.node_lifecycle_actions) if group.node_lifecycle_actions else None)
        if current == intent.fingerprint_after:
            self.changes.applied(cluster_id, group_id, ledger=ledger, intent=intent, updated=group)
            logger.warning(
                "group %s: %s found applied on a retry (%s)", group_id, intent.action, intent.client_token
            )
            self.metric("ChangesReconciled", 1)
            text = f"{said} (PCS had taken the change before it was confirmed; recorded on a retry)"
            return _Verdict("applied", mode, intent.action, text, False, intent.config_before, plan)
        if current == intent.fingerprint_before:
            # When the group was last changed before the change was set out, as read then (an older
            # release's intent does not say: the detection's, which its rails matched to the group).
            untouched_at = (
                intent.modified_at_before
                if intent.modified_at_before is not None
                else detection.config_modified_at
            )
            if group.modified_at_ms != untouched_at:
                # The configuration from before, but set again since (PCS took the change and someone put
                # the old one back, or changed something else): made now, it would undo their work.
                return self._unconfirmed(
                    detection,
                    ledger,
                    intent,
                    f"the group changed after Lifeguard's {intent.action} was set out (clientToken "
                    f"{intent.client_token})",
                )
            try:
                unwanted = self._no_longer_wanted(detection, intent, group, deadline)
            except AwsCallError as exc:
                reason = f"{exc}; the event is parked for a retry"
                return _Verdict("failed", mode, intent.action, reason, False, intent.config_before, plan)
            if unwanted is not None:
                return self._abandon(detection, ledger, intent, unwanted)
            return self._make_change(detection, ledger, intent, plan, deadline)
        return self._unconfirmed(
            detection,
            ledger,
            intent,
            f"someone changed the group before Lifeguard's {intent.action} could be confirmed "
            f"(clientToken {intent.client_token})",
        )

    def _no_longer_wanted(
        self, detection: LoopDetection, intent: AppliedChange, group: GroupSnapshot, deadline: float
    ) -> str | None:
        """Why a change set out before and never made (PCS refused it until the event was parked) is not to
        be made now, on a retry or a redrive that may come days later: its episode ended, or the group's
        mode or the stack's DryRun says nothing may change. None: it is still the change to make."""
        episode = self.states.load(detection.cluster_id, detection.compute_node_group_id).episode
        if episode is None or episode.episode_id != detection.episode_id:
            return f"the episode ended before Lifeguard's {intent.action} could be made; nothing was changed"
        mode, _, _, tags = self._tagged(group, deadline)
        held = rails.group_unfit(mode, group.status, tags) or rails.dry_run(mode, self.settings, "")
        if held is None:
            return None
        return f"{held.rstrip('; ')}: Lifeguard's {intent.action}, set out before, was not made"

    def _abandon(self, detection: LoopDetection, ledger: Ledger, intent: AppliedChange, why: str) -> _Verdict:
        self.changes.abandoned(
            detection.cluster_id, detection.compute_node_group_id, ledger=ledger, intent=intent
        )
        mode = intent.mode or self.settings.default_mode
        return _Verdict(
            "skipped", mode, intent.action, why[0].upper() + why[1:] + ".", True, intent.config_before
        )

    def _unconfirmed(
        self, detection: LoopDetection, ledger: Ledger, intent: AppliedChange, what: str
    ) -> _Verdict:
        """A change set out before that PCS may have made before someone changed the group (`what` says
        how it was found): recorded `unconfirmed`, so it counts as made; nothing more is done."""
        self.changes.unconfirmed(
            detection.cluster_id, detection.compute_node_group_id, ledger=ledger, intent=intent
        )
        logger.warning(
            "group %s: %s of %s (revision %d) unconfirmed: %s",
            detection.compute_node_group_id,
            intent.action,
            intent.episode_id,
            intent.revision,
            what,
        )
        mode = intent.mode or self.settings.default_mode
        return _Verdict("skipped", mode, intent.action, _unconfirmed_reason(what), True, intent.config_before)

    def _make_change(
        self, detection: LoopDetection, ledger: Ledger, intent: AppliedChange, plan: Plan, deadline: float
    ) -> _Verdict:
        cluster_id, group_id = detection.cluster_id, detection.compute_node_group_id
        mode = intent.mode or self.settings.default_mode
        taken: list[bool] = []  # of each attempt that failed: whether PCS may have taken it all the same

        def unwanted(group: GroupSnapshot) -> str | None:
            attempts = self.attempts  # the tags' read is retried on its own: the update's count is kept
            try:
                return self._no_longer_wanted(detection, intent, group, deadline)
            finally:
                self.attempts = attempts

        try:
            updated = self.changes.ask(
                cluster_id,
                group_id,
                intent,
                lambda call: self._retrying(
                    self._guarded(call, cluster_id, group_id, intent, taken, unwanted=unwanted), deadline
                ),
            )
        except GroupNotFoundError:
            return self._abandon(detection, ledger, intent, "the compute node group no longer exists")
        except _UnwantedError as unwanted_now:
            if unwanted_now.maybe_made:
                return self._unconfirmed(detection, ledger, intent, unwanted_now.why)
            return self._abandon(detection, ledger, intent, unwanted_now.why)
        except _MovedOnError as moved:
            why = f"the group's configuration changed while Lifeguard's {intent.action} waited to be retried"
            if moved.as_intended:
                why = (
                    f"while Lifeguard's {intent.action} waited to be retried, someone else set the group to "
                    "the configuration it would have set: their change, not Lifeguard's, and none to undo"
                )
            if moved.maybe_made:  # an attempt before may have been taken, and someone changed it since
                return self._unconfirmed(detection, ledger, intent, why)
            return self._abandon(detection, ledger, intent, f"{why}; nothing was changed")
        except AwsCallError as exc:
            attempts = self.attempts
            plural = "s" if attempts != 1 else ""
            reason = f"{exc} (after {attempts} attempt{plural}); the event is parked for a retry"
            if not any(taken):
                # PCS refused the change itself (a value, a permission), or refused every attempt for
                # throttling or a conflict: it did not make it, so the intent is let go, and a retry or
                # redrive decides afresh. Left pending, it would hold off an operator's undo of
                # Lifeguard's earlier change for good, or be found after someone changed the group and
                # counted as a change PCS may have made (the cooldown, the cap and the ladder with it).
                # Not when an attempt may have been taken (its answer lost), whatever failed after it (the
                # next attempt's refusal, or that attempt's look at the group).
                self.changes.abandoned(cluster_id, group_id, ledger=ledger, intent=intent)
            # Else the intent stays pending: the retry finds out whether PCS took it after all.
            return _Verdict("failed", mode, intent.action, reason, False, intent.config_before, plan)
        self.changes.applied(cluster_id, group_id, ledger=ledger, intent=intent, updated=updated)
        logger.warning("group %s: %s applied (%s)", group_id, intent.action, detection.episode_id)
        said = intent.reason or f"Applied {intent.action}."
        return _Verdict("applied", mode, intent.action, said, False, intent.config_before, plan)

    def _guarded(
        self,
        update: Callable[[], GroupSnapshot],
        cluster_id: str,
        group_id: str,
        intent: AppliedChange,
        taken: list[bool],
        *,
        unwanted: Callable[[GroupSnapshot], str | None],
    ) -> Callable[[], GroupSnapshot]:
        """`update`, made only on the group as the intent found it whenever Lifeguard waited since it read the
        group (a retry of the tags' read, PCS refusing an attempt before for a conflict or throttling):
        someone may have changed the group meanwhile, and their change is never overwritten (`_MovedOnError`);
        and only while it is still wanted (`unwanted` says why not: PCS's backoff can take minutes, in which
        the loop may end or the group be tagged off, `_UnwantedError`). A group that holds the intent's
        configuration already took the attempt before (its answer was lost): that is the answer, when an
        attempt may have been taken; with none, someone else set it (an operator's own STOP_SEQUENCE, the
        manual fix of a loop), and it is theirs, never claimed as Lifeguard's change (its undo would take
        their fix back). One that holds the configuration from before has moved on too when its modifiedAt
        moved: changed otherwise (a new AMI), or that configuration set again since an attempt PCS may have
        taken. `taken` gets, for each attempt that fails, whether PCS may have made it all
        the same (an answer lost, not a refusal)."""
        attempts = 0

        def attempt() -> GroupSnapshot:
            nonlocal attempts
            attempts += 1
            if attempts > 1 or self.waits != self._waits_at_read:
                group = self.pcs.get_group(cluster_id, group_id)
                held = fingerprint_of(dict(group.node_lifecycle_actions or {}) or None)
                if held == intent.fingerprint_after:
                    if any(taken):
                        return group
                    raise _MovedOnError(False, as_intended=True)
                # The group changed since it was read, its lifecycle actions or anything else (a new AMI
                # mends a loop too, and the first read refused such a change since the detection); or the
                # configuration from before set again since an attempt PCS may have taken: sent again, the
                # update's clientToken would have PCS answer the first as made, and make nothing.
                before = intent.modified_at_before
                moved = before is not None and group.modified_at_ms != before
                if held != intent.fingerprint_before or moved:
                    raise _MovedOnError(any(taken))
                why = unwanted(group)
                if why is not None:
                    raise _UnwantedError(why, any(taken))
            try:
                return update()
            except AwsCallError as exc:
                # Taken perhaps: an answer lost or unreadable. Not: throttled, a conflict, no connection,
                # or a refusal of the change itself (a value, a permission: PCS made nothing).
                taken.append(may_have_taken(exc))
                raise

        return attempt

    def _wait(self, seconds: float) -> None:
        """A wait between AWS calls (a retry's backoff, a group UPDATING), counted: the group may change
        meanwhile."""
        self.waits += 1
        self.sleep(seconds)

    def _settled_group(self, cluster_id: str, group_id: str, deadline: float) -> GroupSnapshot:
        """The group read fresh; while it is UPDATING (a change of its own in progress), it is read again
        every `update_poll_seconds` for up to `update_wait_seconds`, and never past the deadline."""
        waited = 0.0
        while True:
            group = self._retrying(lambda: self.pcs.get_group(cluster_id, group_id), deadline)
            if group.status != "UPDATING":
                self._waits_at_read = self.waits
                return group
            poll = self.settings.update_poll_seconds
            left = deadline - self.clock() - self.settings.reserve_seconds
            if waited >= self.settings.update_wait_seconds or poll > left:
                raise AwsCallError(
                    "GetComputeNodeGroup",
                    "StillUpdating",
                    f"{group_id} was still UPDATING after {int(waited)} s",
                )
            self._wait(poll)
            waited += poll

    def _tagged(
        self, group: GroupSnapshot, deadline: float
    ) -> tuple[str, bool, ManagedBy | None, Mapping[str, str]]:
        """The group's mode, whether kept nodes are drained, and the tool that owns it, from its tags as PCS
        holds them now (which are given too)."""
        tags = self._retrying(lambda: self.pcs.list_tags(group.arn), deadline)
        mode, problem = mode_of(tags, self.settings.default_mode)
        self.tags_ignored = [problem] if problem else []
        if problem:
            logger.warning("group %s: %s; using mode %s", group.group_id, problem, mode)
        drain, problem = drain_of(tags, self.settings.drain_kept_nodes)
        if problem:
            self.tags_ignored.append(f"{problem}; {'draining' if drain else 'not draining'} kept nodes")
            logger.warning("group %s: %s; using %s", group.group_id, problem, drain)
        return mode, drain, managed_by(tags), tags

    def _known_mode(self, state: GroupState) -> str:
        """The group's mode as Lifeguard last read its tags (no PCS call)."""
        return mode_of(state.config.tags if state.config else {}, self.settings.default_mode)[0]

    def _retrying(self, call: Callable[[], T], deadline: float) -> T:
        self.attempts = 1

        def retried(error: AwsCallError, delay: float, attempt: int) -> None:
            logger.info("%s; retrying in %.1f s (attempt %d)", error, delay, attempt)
            self.attempts = attempt + 1
            self.retries += 1
            self.metric("PcsRetries", 1)

        policy = RetryPolicy(
            self.settings.retry_attempts,
            self.settings.retry_base_seconds,
            self.settings.retry_max_seconds,
            self.settings.max_retry_after_seconds,
        )
        answer, self.attempts = call_with_retries(
            call,
            policy,
            time_left=lambda: deadline - self.clock() - self.settings.reserve_seconds,
            sleep=self._wait,
            on_retry=retried,
        )
        return answer

    # -- what is published and audited --

    def _event(self, detection: LoopDetection, outcome: _Verdict) -> ControllerEvent:
        plan = outcome.plan
        detail_type = {
            "applied": "RemediationApplied",
            "skipped": "RemediationSkipped",
            "failed": "RemediationFailed",
        }[outcome.status]
        detail = make_detail(
            episode_id=detection.episode_id,
            cluster_id=detection.cluster_id,
            compute_node_group_id=detection.compute_node_group_id,
            compute_node_group_name=detection.compute_node_group_name,
            kind=detection.kind,
            failures=detection.failures,
            suspect=detection.suspect,
            # DESIGN's modes are quarantine, revert and notify: a group left alone has none (its reason says
            # which tag or the stack's DefaultMode made it off).
            mode=None if outcome.mode == "off" else outcome.mode,
            dry_run=outcome.dry_run,
            config_before=outcome.config_before,
            config_after=plan.config_after if plan else None,
            diff=[change.to_detail() for change in plan.changes] if plan else [],
            reason=outcome.reason,
            undo=undo_command(detection.cluster_id, detection.compute_node_group_id)
            if outcome.status == "applied"
            else None,
            revision=detection.revision,
            action=outcome.action,
            config_fingerprint=detection.config_fingerprint,
            config_modified_at=detection.config_modified_at,
        )
        key = f"{detection.episode_id}:{detail_type}:{detection.revision}"
        return ControllerEvent(detail_type, detail, key)  # type: ignore[arg-type]

    @staticmethod
    def _audit_entry(
        detection: LoopDetection, outcome: _Verdict, event: ControllerEvent, now: float
    ) -> AuditEntry:
        return AuditEntry(
            at=now,
            decision=outcome.status,
            episode_id=detection.episode_id,
            revision=detection.revision,
            mode=outcome.mode,
            action=outcome.action,
            dry_run=outcome.held_by_dry_run,
            reason=outcome.reason,
            config_before=outcome.config_before,
            config_after=event.detail.get("config_after"),
            diff=list(event.detail.get("diff") or []),
        )


def _drain_step_is_lifeguards(ledger: Ledger) -> bool:
    """Whether the drain step in the configuration is Lifeguard's: the last change of Lifeguard's (made, not
    undone) that put it in or took it out put it in. One the group's owners added themselves (Lifeguard's
    message shows them how) is theirs: taking it out is no undoing of Lifeguard's own harm."""
    put_in = False
    for change in ledger.changes:
        if not change.counts or change.undone_at is not None:
            continue
        before, after = drains_kept_nodes(change.config_before), drains_kept_nodes(change.config_after)
        if before != after:
            put_in = after
    return put_in


def _as_known(detection: LoopDetection, state: GroupState) -> LoopDetection:
    """The detection with its evidence and suspect as its episode holds them (the open one, or the one
    that ended last), and the group's name as the state knows it, not as the event says them: anyone who
    can put events on the bus can write those.
    An episode the state no longer holds leaves the event's failures (ids and times of PCS's form) and
    drops its suspect, whose log tail is the event's own text."""
    episode = next(
        (
            e
            for e in (state.episode, state.last_episode)
            if e is not None and e.episode_id == detection.episode_id
        ),
        None,
    )
    name = group_name(state)
    if episode is None:
        return detection.model_copy(update={"suspect": None, "compute_node_group_name": name})
    replacement = episode.replacement_revision == detection.revision
    return detection.model_copy(
        update={
            "compute_node_group_name": name,
            "kind": "replacement" if replacement else episode.kind,
            "failures": [f.model_dump() for f in (episode.unhealthy if replacement else episode.failures)],
            "suspect": episode.suspect.model_dump() if episode.suspect else None,
        }
    )


def _plan_of(change: AppliedChange) -> Plan:
    """The plan a recorded change carried out (its diff, for the event)."""
    return Plan(
        change.action,
        change.config_after,
        (),
        tuple(diff_api_configs(change.config_before, change.config_after)),
    )


def _proof(good: ProvenGood, now: float) -> str:
    """Which node proved a configuration, when (how many days before `now`, once a day or more: a revert
    to an old proof takes out whatever changed since), and on what evidence."""
    evidence = f" ({good.evidence})" if good.evidence else ""
    days = int((now * 1000 - good.proven_at) // 86_400_000)
    ago = f", {days} day{'s' if days != 1 else ''} ago" if days >= 1 else ""
    return f"{good.instance_id} at {utc(good.proven_at)}{ago}{evidence}"


def _unconfirmed_reason(what: str) -> str:
    """Why an unconfirmed change (`what` happened to it) ends the decision, as its one sentence."""
    return (
        f"{what[0].upper()}{what[1:]}: PCS may have made it, so it counts as Lifeguard's change for the "
        "cooldown and the daily cap; nothing more was done."
    )


def _basis(state: GroupState) -> tuple[Any, ...]:
    """What of a group's state (its episode matched) a plan is made from: the script the open episode names
    (not its evidence, which grows with every node failing on it), the other scripts failing, whether no
    script failed, whether it is a replacement loop, and the configuration proven good. Node reports change
    them while a decision reads the group (a suspect withdrawn, a proof revoked)."""
    episode = state.episode
    assert episode is not None  # matched
    suspect = episode.suspect
    named = (suspect.stage, suspect.script) if suspect is not None else None
    failing = (named, tuple(episode.also_failing), episode.no_script_failed)
    return (*failing, episode.replacement_revision, state.proven_good)


def _also_failing(episode: Episode | None) -> tuple[tuple[str, str], ...]:
    """(stage, script) of the episode's `also_failing` (`stage/name` each: a stage's name holds no `/`)."""
    found = []
    for entry in episode.also_failing if episode is not None else []:
        stage, _, script = entry.partition("/")
        if stage and script:
            found.append((stage, script))
    return tuple(found)


def _looped_since(ledger: Ledger, proven_at_ms: int) -> tuple[dict[str, Any], ...]:
    """The configurations Lifeguard changed for a loop after `proven_at_ms` (what each change replaced)."""
    return tuple(
        change.config_before
        for change in ledger.changes
        if change.counts and change.config_before and change.at * 1000 > proven_at_ms
    )
