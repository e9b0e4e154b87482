"""The remediate Lambda's logic: a BootstrapLoopDetected event in, one decision out, with rails.

Per detection (episode, revision), under the group's lock:
1. a detection already decided is a duplicate: counted in the audit trail, its events re-published only
   if they never were;
2. the group is read fresh (status, configuration, tags); it is acted on only when ACTIVE and still on
   the configuration the detection saw;
3. the action is the group's mode, moved up the escalation ladder when the loop went on under
   Lifeguard's own change of the same episode (quarantine → revert → a person);
4. cooldown and daily cap are checked, the plan is applied with a clientToken derived from the episode,
   PCS errors that pass are retried with backoff (honouring `retryAfterSeconds`);
5. the decision is audited and published as RemediationApplied / RemediationSkipped / RemediationFailed.
A failure that outlasts the retries is published, then raised (`RemediationParkedError`), so the Lambda's
retries and dead-letter queue keep the event: nothing is dropped.
"""

from __future__ import annotations

import hashlib
import logging
import time
import uuid
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any, TypeVar

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from lifeguard._records import describe_validation_error
from lifeguard.aws.events import EventPublisher
from lifeguard.aws.pcs import GroupSnapshot, PcsGateway
from lifeguard.detection import DetectionSettings
from lifeguard.errors import AwsCallError, GroupNotFoundError, LifeguardError
from lifeguard.events import ControllerEvent, make_detail
from lifeguard.lifecycle import fingerprint_of
from lifeguard.remediation.actions import ActionContext, Plan, action_for
from lifeguard.remediation.ledger import AppliedChange, AuditEntry, Decision, Ledger, RemediationStore
from lifeguard.settings import setting
from lifeguard.state import StateStore

__all__ = [
    "RETRYABLE_CODES",
    "LoopDetection",
    "RemediationBusyError",
    "RemediationController",
    "RemediationParkedError",
    "RemediationSettings",
    "undo_command",
]

logger = logging.getLogger("lifeguard")
T = TypeVar("T")
Metric = Callable[[str, float], None]

RETRYABLE_CODES = frozenset(
    {
        "ThrottlingException",
        "ConflictException",
        "InternalServerException",
        "ServiceUnavailableException",
        "EndpointConnectionError",
        "ConnectTimeoutError",
        "ReadTimeoutError",
    }
)
_DAY_SECONDS = 24 * 3600


class RemediationBusyError(LifeguardError):
    """Another remediation of the group holds its lock; the event is retried later."""


class RemediationParkedError(LifeguardError):
    """The remediation failed after its retries; RemediationFailed was published and the event is left to
    the Lambda's retries and dead-letter queue."""


def _utc(ms: int) -> str:
    return time.strftime("%Y-%m-%d %H:%M:%S UTC", time.gmtime(ms / 1000))


def undo_command(cluster_id: str, group_id: str) -> str:
    """The command that puts back the configuration from before Lifeguard's last change."""
    return f"lifeguard undo {group_id} --cluster {cluster_id}"


@dataclass(frozen=True)
class RemediationSettings:
    """Stack-wide remediation settings (explicit > LIFEGUARD_* environment > default)."""

    default_mode: str = "notify"
    dry_run: bool = False
    cooldown_seconds: float = 30 * 60
    daily_cap: int = 3
    node_bundle: str | None = None
    lock_wait_seconds: float = 30.0
    lease_seconds: float = 660.0  # longer than the function may run (template.yaml: Timeout 600)
    retry_attempts: int = 6
    update_wait_seconds: float = 240.0
    update_poll_seconds: float = 10.0
    retry_base_seconds: float = 1.0
    retry_max_seconds: float = 20.0

    @classmethod
    def from_environment(cls, **explicit: Any) -> RemediationSettings:
        """LIFEGUARD_DEFAULT_MODE, _DRY_RUN, _COOLDOWN_MINUTES, _DAILY_CAP, _NODE_BUNDLE."""
        return cls(
            default_mode=DetectionSettings.stack_defaults(mode=explicit.get("default_mode")).mode,
            dry_run=setting("dry_run", explicit.get("dry_run"), False, _flag),
            cooldown_seconds=60 * setting("cooldown_minutes", explicit.get("cooldown_minutes"), 30.0, float),
            daily_cap=setting("daily_cap", explicit.get("daily_cap"), 3, int),
            node_bundle=setting("node_bundle", explicit.get("node_bundle"), "", str) or None,
        )


def _flag(raw: str) -> bool:
    value = raw.strip().lower()
    if value in ("true", "1", "yes"):
        return True
    if value in ("false", "0", "no"):
        return False
    raise ValueError("expected true or false")


class LoopDetection(BaseModel):
    """The part of a BootstrapLoopDetected detail that remediation reads."""

    model_config = ConfigDict(extra="ignore")

    episode_id: str = Field(min_length=1)
    cluster_id: str = Field(min_length=1)
    compute_node_group_id: str = Field(min_length=1)
    kind: str | None = None
    failures: list[dict[str, Any]] = Field(default_factory=list)
    suspect: dict[str, Any] | None = None
    revision: int = 1
    config_fingerprint: str | None = None
    config_modified_at: int | None = None

    @property
    def suspect_script(self) -> tuple[str, str] | None:
        """(stage, script) of the suspect, when known."""
        if not self.suspect or not self.suspect.get("stage") or not self.suspect.get("script"):
            return None
        return str(self.suspect["stage"]), str(self.suspect["script"])


@dataclass
class _Outcome:
    status: str  # applied | skipped | failed
    mode: str
    action: str | None
    reason: str
    dry_run: bool
    config_before: dict[str, Any] | None = None
    plan: Plan | None = None


class RemediationController:
    """Decides and applies one remediation per detection."""

    def __init__(
        self,
        store: RemediationStore,
        states: StateStore,
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
        self.metric = metric or (lambda name, value: None)
        self.retries = 0

    # -- entry points --

    def handle_event(self, event: Mapping[str, Any]) -> list[ControllerEvent]:
        """One EventBridge event; anything but a valid BootstrapLoopDetected is logged and left alone."""
        if event.get("detail-type") != "BootstrapLoopDetected":
            logger.info(
                "not a BootstrapLoopDetected event (%s): nothing to remediate", event.get("detail-type")
            )
            return []
        try:
            detection = LoopDetection.model_validate(event.get("detail"))
        except ValidationError as exc:
            logger.error("BootstrapLoopDetected event ignored: %s", describe_validation_error(exc))
            self.metric("InvalidEvents", 1)
            return []
        return self.handle(detection)

    def handle(self, detection: LoopDetection) -> list[ControllerEvent]:
        """Decide on one detection under the group's lock; returns the events published."""
        cluster_id, group_id = detection.cluster_id, detection.compute_node_group_id
        holder = uuid.uuid4().hex
        self._lock(cluster_id, group_id, holder)
        try:
            known = self.store.decision(cluster_id, group_id, detection.episode_id, detection.revision)
            if known is not None and known.status != "failed":
                return self._duplicate(detection, known)
            outcome = self._decide(detection)
            event = self._event(detection, outcome)
            now = self.clock()
            self.store.audit(cluster_id, group_id, self._audit_entry(detection, outcome, event, now))
            decided = (detection.episode_id, detection.revision)
            decision = Decision(status=outcome.status, events=[event.to_dict()])
            self.store.save_decision(cluster_id, group_id, decided, decision=decision, now=now)
            self.publisher.publish([event])
            decision.published = True
            self.store.save_decision(cluster_id, group_id, decided, decision=decision, now=now)
            self.metric(event.detail_type, 1)
        finally:
            self.store.release(cluster_id, group_id, holder)
        if outcome.status == "failed":
            raise RemediationParkedError(f"{group_id}: {outcome.reason}")
        return [event]

    # -- steps --

    def _lock(self, cluster_id: str, group_id: str, holder: str) -> None:
        waited = 0.0
        while not self.store.acquire(cluster_id, group_id, holder, self.clock(), self.settings.lease_seconds):
            if waited >= self.settings.lock_wait_seconds:
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
            self.publisher.publish(events)
            known.published = True
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

    def _decide(self, detection: LoopDetection) -> _Outcome:
        cluster_id, group_id = detection.cluster_id, detection.compute_node_group_id
        mode = self.settings.default_mode
        try:
            group = self._settled_group(cluster_id, group_id)
            mode = self._mode(group)
        except GroupNotFoundError:
            return _Outcome("skipped", mode, None, "the compute node group no longer exists", True)
        except AwsCallError as exc:
            return _Outcome("failed", mode, None, f"{exc}; the event is parked for a retry", True)
        before = dict(group.node_lifecycle_actions) if group.node_lifecycle_actions else None
        if mode == "off":
            return _Outcome("skipped", mode, None, "the group's tag lifeguard:mode is off", True, before)
        if group.status != "ACTIVE":
            return _Outcome("skipped", mode, None, f"the group is {group.status}, not ACTIVE", True, before)
        ledger = self.store.ledger(cluster_id, group_id)
        earlier = ledger.of_episode(detection.episode_id)
        if earlier and detection.config_fingerprint != earlier[-1].fingerprint_after:
            last = earlier[-1]
            reason = (
                f"Already remediated: {last.action} was applied at {_utc(int(last.at * 1000))}; "
                "this detection is of the configuration before it."
            )
            return _Outcome("skipped", mode, None, reason, True, before)
        if not self._same_config(detection, group, before):
            changed = (
                "the group's configuration changed since the detection; the failures were of another "
                "configuration and new ones will be judged against the current one"
            )
            return _Outcome("skipped", mode, None, changed, True, before)
        action, ladder_reason = self._ladder(mode, earlier)
        if action is None:
            return _Outcome("skipped", mode, None, ladder_reason or "", True, before)
        state = self.states.load(cluster_id, group_id)
        good = state.proven_good
        plan = action_for(action).plan(
            ActionContext(
                before,
                detection.suspect_script,
                good.node_lifecycle_actions if good else None,
                self.settings.node_bundle,
                f"{good.instance_id} at {_utc(good.proven_at)}" if good else None,
            )
        )
        notes = "; ".join(plan.notes)
        would = f"{plan.action} would change: {notes}." if notes else ""
        if not plan.changes_something:
            nothing = f"Nothing to change: {notes}." if notes else "Nothing to change."
            return _Outcome("skipped", mode, plan.action, nothing, True, before, plan)
        if mode == "notify" or self.settings.dry_run:
            why = "mode notify" if mode == "notify" else "the stack's DryRun is on"
            text = f"Dry run ({why}), nothing was changed; {would}"
            return _Outcome("skipped", mode, plan.action, text.strip(), True, before, plan)
        now = self.clock()
        if not earlier:
            recent = ledger.applied_since(now - self.settings.cooldown_seconds)
            if recent:
                text = (
                    f"Cooldown: Lifeguard changed this group {int((now - recent[-1].at) / 60)} min ago; "
                    f"no new change within {int(self.settings.cooldown_seconds / 60)} min; {would}"
                )
                return _Outcome("skipped", mode, plan.action, text.strip(), True, before, plan)
        if len(ledger.applied_since(now - _DAY_SECONDS)) >= self.settings.daily_cap:
            text = f"Daily cap: Lifeguard already changed this group {self.settings.daily_cap} times in 24 h."
            return _Outcome("skipped", mode, plan.action, text, True, before, plan)
        return self._apply(
            detection,
            mode,
            group=group,
            before=before,
            plan=plan,
            ladder=(ledger, ladder_reason),
            notes=notes,
        )

    def _apply(
        self,
        detection: LoopDetection,
        mode: str,
        *,
        group: GroupSnapshot,
        before: dict[str, Any] | None,
        plan: Plan,
        ladder: tuple[Ledger, str | None],
        notes: str,
    ) -> _Outcome:
        after = plan.config_after or {}
        fingerprint_after = fingerprint_of(after)
        # PCS scopes clientTokens to the caller, not the group: the group is part of the seed.
        where = f"{group.cluster_id}:{group.group_id}"
        seed = f"{where}:{detection.episode_id}:{detection.revision}:{fingerprint_after}"
        token = "lifeguard-" + hashlib.sha256(seed.encode()).hexdigest()[:40]
        try:
            updated = self._retrying(
                lambda: self.pcs.update_lifecycle_actions(group.cluster_id, group.group_id, after, token)
            )
        except AwsCallError as exc:
            reason = f"{exc} (after {self.settings.retry_attempts} attempts); the event is parked for a retry"
            return _Outcome("failed", mode, plan.action, reason, False, before, plan)
        ledger, ladder_reason = ladder
        applied = AppliedChange(
            at=self.clock(),
            episode_id=detection.episode_id,
            revision=detection.revision,
            action=plan.action,
            config_before=before,
            config_after=after,
            fingerprint_before=fingerprint_of(before),
            fingerprint_after=fingerprint_after,
            modified_at_after=updated.modified_at_ms,
        )
        ledger.changes.append(applied)  # the ledger read for this decision, under the same lock
        self.store.save_ledger(group.cluster_id, group.group_id, ledger)
        said = f"Applied {plan.action}: {notes}." if notes else f"Applied {plan.action}."
        text = f"{ladder_reason} {said}" if ladder_reason else said
        logger.warning("group %s: %s applied (%s)", group.group_id, plan.action, detection.episode_id)
        return _Outcome("applied", mode, plan.action, text, False, before, plan)

    @staticmethod
    def _ladder(mode: str, earlier: list[AppliedChange]) -> tuple[str | None, str | None]:
        """The action for a detection: the mode, or the next rung when the loop went on under Lifeguard's
        own change of the same episode (quarantine, then revert, then a person)."""
        if mode == "notify" or not earlier:
            return mode, None
        done = ", ".join(change.action for change in earlier)
        if earlier[-1].action == "quarantine":
            return "revert", f"The loop went on after {done}: escalating to revert."
        return (
            None,
            f"The loop went on after {done}: Lifeguard stops changing this group; a person must look.",
        )

    def _settled_group(self, cluster_id: str, group_id: str) -> GroupSnapshot:
        """The group read fresh; while it is UPDATING (a change of its own in progress), it is read again
        every `update_poll_seconds` for up to `update_wait_seconds`."""
        waited = 0.0
        while True:
            group = self._retrying(lambda: self.pcs.get_group(cluster_id, group_id))
            if group.status != "UPDATING":
                return group
            if waited >= self.settings.update_wait_seconds:
                raise AwsCallError(
                    "GetComputeNodeGroup",
                    "StillUpdating",
                    f"{group_id} was still UPDATING after {int(waited)} s",
                )
            self.sleep(self.settings.update_poll_seconds)
            waited += self.settings.update_poll_seconds

    def _mode(self, group: GroupSnapshot) -> str:
        tags = self._retrying(lambda: self.pcs.list_tags(group.arn))
        settings, problems = DetectionSettings(self.settings.default_mode, 1, 1).with_tags(tags)
        for problem in problems:
            logger.warning("group %s: %s; using mode %s", group.group_id, problem, settings.mode)
        return settings.mode

    @staticmethod
    def _same_config(detection: LoopDetection, group: GroupSnapshot, before: dict[str, Any] | None) -> bool:
        if detection.config_fingerprint and detection.config_fingerprint != fingerprint_of(before):
            return False
        return detection.config_modified_at is None or detection.config_modified_at == group.modified_at_ms

    def _retrying(self, call: Callable[[], T]) -> T:
        for attempt in range(1, self.settings.retry_attempts + 1):
            try:
                return call()
            except GroupNotFoundError:
                raise
            except AwsCallError as exc:
                if exc.code not in RETRYABLE_CODES or attempt == self.settings.retry_attempts:
                    raise
                delay = min(
                    self.settings.retry_max_seconds, self.settings.retry_base_seconds * 2 ** (attempt - 1)
                )
                if exc.retry_after_seconds:
                    delay = max(delay, float(exc.retry_after_seconds))
                logger.info("%s; retrying in %.1f s (attempt %d)", exc, delay, attempt)
                self.retries += 1
                self.metric("PcsRetries", 1)
                self.sleep(delay)
        raise AssertionError("unreachable")

    # -- what is published and audited --

    def _event(self, detection: LoopDetection, outcome: _Outcome) -> ControllerEvent:
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
            kind=detection.kind,
            failures=detection.failures,
            suspect=detection.suspect,
            mode=outcome.mode,
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
        )
        key = f"{detection.episode_id}:{detail_type}:{detection.revision}"
        return ControllerEvent(detail_type, detail, key)  # type: ignore[arg-type]

    @staticmethod
    def _audit_entry(
        detection: LoopDetection, outcome: _Outcome, event: ControllerEvent, now: float
    ) -> AuditEntry:
        return AuditEntry(
            at=now,
            decision=outcome.status,
            episode_id=detection.episode_id,
            revision=detection.revision,
            mode=outcome.mode,
            action=outcome.action,
            dry_run=outcome.dry_run,
            reason=outcome.reason,
            config_before=outcome.config_before,
            config_after=event.detail.get("config_after"),
            diff=list(event.detail.get("diff") or []),
        )
