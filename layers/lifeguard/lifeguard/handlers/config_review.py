"""The review_changes Lambda's logic: every change of a group's `nodeLifecycleActions` made through PCS's
API (CloudTrail, `lifeguard.cloudtrail`) is reviewed as it happens, and who made it is kept.

Per call:
1. the new configuration is the request's `nodeLifecycleActions`, or, when the request carries none, the
   group's as GetComputeNodeGroup answers it (which also gives the ids of a group the call named by name);
2. it is held against the configuration it replaced: the group's last known one (the state the detection
   keeps), or, when the detection already read the new one, the last one proven good; none when the group
   was never seen, or the known one was set after the call. A call that carried no configuration is
   ignored when it left the known one as it was, or when a call that carried the one PCS holds, or
   Lifeguard, is known to have put it in place;
3. the review is `lifeguard lint --previous`'s: the risks (`lifeguard.risks.find_risks`) and the diff;
4. who made the change is kept under the new configuration's fingerprint (`ChangeStore`), so a loop that
   follows can be laid at its door, and `ConfigChangeReviewed` is published.
A malformed event is one log line and a counted skip; only a transient AWS failure (which Lambda's retries
can cure) leaves the handler as an exception.
"""

from __future__ import annotations

import logging
import time
from collections import Counter
from collections.abc import Callable, Mapping
from dataclasses import field
from typing import TYPE_CHECKING, Any, ClassVar, NamedTuple

from lifeguard.aws.eventbridge import EventPublisher
from lifeguard.aws.pcs import PcsGateway, is_transient
from lifeguard.bounds import CLIENT_TOKEN_PREFIX, clip, group_name_of, utc
from lifeguard.cloudtrail import CallIgnored, CallParseError, ConfigCall, parse_config_call
from lifeguard.errors import AwsCallError, GroupNotFoundError, InvalidLifecycleConfigError
from lifeguard.event_contract import (
    RISKS_LISTED_MAX,
    ControllerEvent,
    group_name,
    make_detail,
    risks_found_sentence,
)
from lifeguard.group_state import GroupState
from lifeguard.handlers.batch import Skips
from lifeguard.lifecycle import NodeLifecycleActions, diff_configs, fingerprint_of
from lifeguard.metrics import Metric, uncounted
from lifeguard.risks import Risk, find_risks
from lifeguard.store.changes import ChangeRecord, ChangeStore
from lifeguard.store.groups import GroupStore, UnreadableStateError
from lifeguard.values import frozen, mutable

if TYPE_CHECKING:
    from lifeguard.remediation.records import AppliedChange, Ledger

__all__ = ["RISK_SEVERITY", "RISK_SEVERITY_BEFORE", "ConfigReviewHandler", "ReviewSummary"]

logger = logging.getLogger("lifeguard")

# `lifeguard lint` warns about risks (only --strict makes them errors): a review warns the same way of the
# risks a change brought, and tells those the configuration it replaced had already (`RISK_SEVERITY_BEFORE`).
RISK_SEVERITY = "warning"
RISK_SEVERITY_BEFORE = "info"
_RISKS_MAX = RISKS_LISTED_MAX  # what the event contract takes
_RISK_MESSAGE_MAX_CHARS = 1000
_PATH_MAX_CHARS = 200
_CLOCKS_APART_MS = 5_000  # how far CloudTrail's eventTime and PCS's modifiedAt of one change may differ
# How close to a call Lifeguard's read of the group must be for the call to be said to change nothing.
_RESENT_READ_MS = 5 * 60 * 1000


class _MadeSinceError(Exception):
    """The group a call named (by name) was made again since the call: the one it changed is gone."""


@mutable
class ReviewSummary(Skips):
    """What one event did: a call `reviewed`, `ignored` (it changed no configuration) or `skipped` (by
    reason), and the events published."""

    reviewed: int = 0
    ignored: int = 0
    events: list[ControllerEvent] = field(default_factory=list)

    def to_dict(self) -> dict[str, Any]:
        """The summary as the handler returns it."""
        return {
            "reviewed": self.reviewed,
            "ignored": self.ignored,
            "skipped": self.skipped,
            "skipped_reasons": dict(self.skipped_reasons),
            "events": [{"detail-type": e.detail_type, "detail": dict(e.detail)} for e in self.events],
        }


@frozen
class _Target:
    """The group a call changed, by its ids, and the configuration it has now."""

    cluster_id: str
    group_id: str
    config: NodeLifecycleActions | None
    carried: bool  # the configuration is the request's, not read back from PCS
    name: str | None = None  # its name, when PCS's answer or the call gave one (`bounds.group_name_of`)


_NOT_WATCHED = "cluster {cluster} is not one of the stack's ClusterIds"


class ConfigReviewHandler:
    """Reviews each configuration change of a compute node group, and keeps who made it."""

    # What its role must allow of PCS (a test holds template.yaml to it); the stores declare their own.
    PCS_PERMISSIONS: ClassVar[tuple[str, ...]] = ("pcs:GetComputeNodeGroup",)

    def __init__(
        self,
        states: GroupStore,
        changes: ChangeStore,
        pcs: PcsGateway,
        publisher: EventPublisher,
        *,
        ledger: Callable[[str, str], Ledger] | None = None,
        metric: Metric | None = None,
        clock: Callable[[], float] = time.time,
        clusters: frozenset[str] = frozenset(),
    ) -> None:
        self.states = states
        # The stack's ClusterIds (empty: every cluster of the account): a change to another cluster is none
        # of this stack's, neither reviewed nor told (its role may not even read it).
        self.clusters = clusters
        self.changes = changes
        self.ledger = ledger  # a group's ledger: Lifeguard's own changes, told apart by their clientToken
        self.pcs = pcs
        self.publisher = publisher
        self.metric = metric or uncounted
        self.clock = clock  # the invocation's clock, against which eventTime must be plausible

    def handle_event(
        self, event: Mapping[str, Any], *, account: str | None = None, region: str | None = None
    ) -> ReviewSummary:
        """One EventBridge event of a PCS call (CloudTrail); raises only on a transient AWS failure. With
        `account` and `region` (the function's own), a call recorded in another account or made in another
        region is ignored."""
        summary = ReviewSummary()
        call = parse_config_call(event, now_ms=int(self.clock() * 1000), account=account, region=region)
        if isinstance(call, CallIgnored):
            return self._ignore(summary, call.message, call.where)
        if isinstance(call, CallParseError):
            return self._skip(summary, call.reason, call.where, call.message, unreviewed=call.unreviewed)
        if self.clusters and call.cluster_id is not None and call.cluster_id not in self.clusters:
            return self._ignore(summary, _NOT_WATCHED.format(cluster=clip(call.cluster_id)), call.event_id)
        try:
            target = self._target(call)
        except GroupNotFoundError:
            # Deleted since the call: nothing is left to review or watch. Not GroupsUnreadable, whose alarm
            # says a group goes unwatched until it can be read.
            gone = f"{clip(call.group_identifier)} is no longer in PCS (deleted since the call)"
            return self._ignore(summary, gone, call.event_id)
        except _MadeSinceError as exc:
            return self._ignore(summary, str(exc), call.event_id)
        except AwsCallError as exc:
            if is_transient(exc):
                raise  # Lambda's retries may cure it
            if self.clusters and call.cluster_id is None and exc.code == "AccessDeniedException":
                # A cluster named by its name, and the stack's role reads only its ClusterIds: most likely
                # another stack's (every change of the account comes here), though the name cannot be told
                # apart from a watched cluster's. Not GroupsUnreadable, whose alarm would page for each; a
                # watched cluster the role cannot read pages all the same, through the scaling log's reads.
                logger.warning(
                    "call %s: PCS refused reading cluster %s (AccessDeniedException): not reviewed, taken "
                    "for a cluster outside the stack's ClusterIds (its role reads only those); were it one "
                    "of them, grant pcs:GetComputeNodeGroup on it",
                    clip(call.event_id),
                    clip(call.cluster_identifier),
                )
                named = clip(call.cluster_identifier)
                unknown = f"cluster {named} is not known to be one of the stack's ClusterIds"
                return self._ignore(summary, unknown, call.event_id)
            reason = f"GetComputeNodeGroup refused ({exc.code})"
            return self._unreadable(summary, reason, call.event_id, str(exc))
        except InvalidLifecycleConfigError as exc:
            reason = "invalid nodeLifecycleActions from PCS"
            return self._unreadable(summary, reason, call.event_id, str(exc))
        if self.clusters and target.cluster_id not in self.clusters:
            return self._ignore(summary, _NOT_WATCHED.format(cluster=clip(target.cluster_id)), call.event_id)
        own = self._lifeguards_own(call, target)
        if own is not None:
            return self._ignore(summary, own, call.event_id)
        retried = False  # a call that carried none, reviewed before and not told (its publish failed)
        if not target.carried:
            known, retried = self._put_in_place_by(call, target)
            if known is not None:
                return self._ignore(
                    summary, f"{call.event_name} carried no nodeLifecycleActions; {known}", call.event_id
                )
        try:
            state = self.states.load(target.cluster_id, target.group_id)
        except UnreadableStateError as exc:  # reviewed as a group Lifeguard never saw: no change is lost
            logger.warning("%s; %s reviewed against no earlier configuration", exc, call.event_id)
            state = GroupState(cluster_id=target.cluster_id, group_id=target.group_id)
        if target.carried:
            resent = self._resent(call, target, state)
            if resent is not None:
                return self._ignore(summary, resent, call.event_id)
        reviewed = _review(call, target, state, retried=retried)
        if reviewed is None:
            return self._ignore(
                summary, f"{call.event_name} left nodeLifecycleActions as they were", call.event_id
            )
        review, risks = reviewed
        if target.config is not None:
            self.changes.put(
                ChangeRecord(
                    cluster_id=target.cluster_id,
                    group_id=target.group_id,
                    fingerprint=target.config.fingerprint(),
                    # A call that carried no configuration changed none: read back, it is kept as the
                    # time the configuration was known to be in place, by nobody known.
                    arn=call.arn if target.carried else None,
                    at=call.at,
                    event_name=call.event_name,
                    event_id=call.event_id,
                    source="cloudtrail" if target.carried else "unknown",
                    read_back=not target.carried,
                )
            )
        self.publisher.publish([review])
        summary.reviewed += 1
        summary.events.append(review)
        self.metric("ConfigChangeReviewed", 1)
        if risks:
            self.metric("RisksFound", risks)
        logger.info(
            "%s of %s by %s reviewed: %d risk(s), %d change(s)",
            call.event_name,
            target.group_id,
            clip(call.arn or "an unnamed caller"),
            risks,
            len(review.detail["diff"]),
        )
        return summary

    def _lifeguards_own(self, call: ConfigCall, target: _Target) -> str | None:
        """Why the call is Lifeguard's own remediation (its RemediationApplied told of it; reviewed, it
        would read as a risky change by Lifeguard's role), or None. Known by its clientToken in the group's
        ledger and the configuration that change put in place: CloudTrail shows the token to whoever reads
        it, and another caller sending it with a configuration of their own is reviewed. An undo, which an
        operator asks for, is reviewed."""
        token = call.client_token
        if self.ledger is None or token is None or not token.startswith(CLIENT_TOKEN_PREFIX):
            return None
        fingerprint = _fingerprint(target.config)
        for change in self._changes_made(target) or ():
            if (
                change.client_token == token
                and change.action != "undo"
                and change.fingerprint_after == fingerprint
            ):
                return f"Lifeguard's own {change.action} of {target.group_id} (clientToken {token})"
        return None

    def _put_in_place_by(self, call: ConfigCall, target: _Target) -> tuple[str | None, bool]:
        """For a call that carried no configuration (an update of the group's scaling, say, reviewed on
        what PCS holds after it): who is known to have put that configuration in place before it (a call
        that carried it, or Lifeguard), or that it was read back and reviewed after an earlier such call;
        else None. The call did not change it: it is not laid at its door, nor reviewed again (a group's
        every scaling update repeated the first one's risks), nor by a call delivered after a later one that
        put it in place (PCS held another when it was made, one no longer to be read). And whether this very
        call was reviewed before: its record is kept before its review is published, and a publish that
        failed is retried by Lambda with the same event, which must review it again (notify tells a review
        once, by its key), even once the detection has read the configuration since."""
        fingerprint = _fingerprint(target.config)
        kept = self.changes.find(target.cluster_id, target.group_id, fingerprint)
        if kept is not None and kept.read_back and kept.event_id == call.event_id:
            return None, True
        # Known from a call after this one (this one delivered late): what PCS holds was told then.
        if kept is not None and (
            kept.at > call.at or self._none_between(target, fingerprint, kept.at, call.at)
        ):
            if kept.read_back:
                said = (
                    f"the configuration PCS holds was reviewed after {clip(kept.event_name)}, {utc(kept.at)}"
                )
                return said, False
            return (
                f"the configuration PCS holds was put in place by {clip(kept.arn or 'an unnamed caller')}",
                False,
            )
        for change in self._changes_made(target) or ():
            if change.fingerprint_after == fingerprint:
                return f"the configuration PCS holds was put in place by Lifeguard's {change.action}", False
        return None, False

    def _none_between(self, target: _Target, fingerprint: str, since: int, until: int) -> bool:
        """Whether no change to another configuration is known between `since` and `until`: one between
        (changed back since, by a call CloudTrail left unread) makes the configuration PCS holds news again.
        Of the changes that could be read: a damaged one, or more than a read takes, would otherwise have
        every scaling update reviewed and told again until it expired."""
        kept, _ = self.changes.of_group(target.cluster_id, target.group_id)
        return not any(since < change.at < until and change.fingerprint != fingerprint for change in kept)

    def _resent(self, call: ConfigCall, target: _Target, state: GroupState) -> str | None:
        """Why a call that carried a configuration changed none, or None (it is reviewed). An
        infrastructure-as-code apply sends the group's whole definition every time: a call is taken to have
        sent again the configuration in place when PCS showed Lifeguard that configuration, modified before
        the call, within `_RESENT_READ_MS` of it (CloudTrail's records arrive late and in no order, so a
        change between that read and the call could still be on its way: the read must be that close), and
        nothing Lifeguard knows of came in between (a reviewed change, Lifeguard's own, set out or made).
        Not laid at its door, and not told again: the change that put it there was."""
        config = state.config
        if (
            config is None
            or not config.actions_read
            or config.fingerprint != _fingerprint(target.config)
            or not config.modified_at < call.at - _CLOCKS_APART_MS
            or config.checked_at < call.at - _RESENT_READ_MS
        ):
            return None
        since = config.modified_at
        kept, whole = self.changes.of_group(target.cluster_id, target.group_id)
        if not whole:
            return None  # the read stopped at its bound, in no order of time: a change between may be unread
        for change in kept:
            # Up to the call's own second: CloudTrail's times are whole seconds, and a change and the call
            # that put the configuration back can share one (the call's own record is of this fingerprint).
            if since < change.at <= call.at and change.fingerprint != config.fingerprint:
                return None
        made_by_lifeguard = self._changes_made(target)
        if made_by_lifeguard is None:
            return None  # what Lifeguard did cannot be known: reviewed
        for made in made_by_lifeguard:
            if made.status != "abandoned" and since < made.at * 1000 < call.at:
                return None  # Lifeguard's change, or an undo PCS may not have taken
        return (
            f"{call.event_name} sent the nodeLifecycleActions already in place (PCS showed them, modified "
            f"{utc(config.modified_at)}, at {utc(config.checked_at)}): no change"
        )

    def _changes_made(self, target: _Target) -> list[AppliedChange] | None:
        """Lifeguard's changes of the group (none without a ledger to read); None when its ledger item
        cannot be read: the change is reviewed as anyone's, never passed over for Lifeguard's own."""
        if self.ledger is None:
            return []
        try:
            return self.ledger(target.cluster_id, target.group_id).changes
        except UnreadableStateError as exc:
            logger.warning("%s; Lifeguard's own changes of it are not known", exc)
            return None

    def _target(self, call: ConfigCall) -> _Target:
        """The group's ids and its new configuration: the request's, or PCS's when the request carries
        none or names the group by name."""
        if call.config is not None and call.cluster_id is not None and call.group_id is not None:
            return _Target(call.cluster_id, call.group_id, call.config, carried=True, name=call.group_name)
        snapshot = self.pcs.get_group(call.cluster_identifier, call.group_identifier)
        # CloudTrail's eventTime is of whole seconds, PCS's createdAt of milliseconds on another clock: a
        # group made in the call's second (a create, an update right after it) is the one it changed.
        if snapshot.created_at_ms is not None and snapshot.created_at_ms > call.at + 999 + _CLOCKS_APART_MS:
            # A call by name, and the group deleted and made again under that name since: the one it
            # changed is gone, and the new one must not be told of it (nor take its caller as a changer).
            raise _MadeSinceError(
                f"{clip(call.group_identifier)} is another group now ({snapshot.group_id}, created "
                f"{utc(snapshot.created_at_ms)}, after the call): the one the call changed is gone"
            )
        name = group_name_of(snapshot.name) or call.group_name
        if call.config is not None:
            return _Target(snapshot.cluster_id, snapshot.group_id, call.config, carried=True, name=name)
        actions = snapshot.node_lifecycle_actions
        config = (
            NodeLifecycleActions.from_api(dict(actions), path="nodeLifecycleActions") if actions else None
        )
        return _Target(snapshot.cluster_id, snapshot.group_id, config, carried=False, name=name)

    def _ignore(self, summary: ReviewSummary, message: str, where: str | None) -> ReviewSummary:
        summary.ignored += 1
        self.metric("ChangesIgnored", 1)
        logger.info("call %s ignored: %s", clip(where or "-"), clip(message))
        return summary

    def _skip(
        self, summary: ReviewSummary, reason: str, where: str | None, detail: str, *, unreviewed: bool = False
    ) -> ReviewSummary:
        """An event skipped in one line; counted InvalidEvents, or ChangesUnreviewed for a change CloudTrail
        recorded without its request (`CallParseError.unreviewed`): no review follows it, and one pages."""
        summary.skip(reason, where or "event", detail)
        self.metric("ChangesUnreviewed" if unreviewed else "InvalidEvents", 1)
        return summary

    def _unreadable(
        self, summary: ReviewSummary, reason: str, where: str | None, detail: str
    ) -> ReviewSummary:
        """A well-formed event whose group PCS would not give (gone, a permission missing, an answer that is
        no valid configuration): skipped, and counted as what it is, not as an invalid event."""
        summary.skip(reason, where or "event", detail)
        self.metric("GroupsUnreadable", 1)
        return summary


class _Before(NamedTuple):
    """What a change replaced, as far as Lifeguard can tell."""

    config: NodeLifecycleActions | None  # the configuration it replaced, when known
    reason: str | None  # a sentence when that is not the last known configuration
    already_known: bool  # the last known configuration already is the new one
    unknown: bool  # what it replaced is not known (not: it replaced nothing)


def _previous(state: GroupState, new_fingerprint: str, call_at: int) -> _Before:
    """The configuration the change replaced, a sentence when it is not the last known one, whether the
    last known configuration already is the new one, and whether what it replaced is not known. A
    configuration set after the call (one delivered late) is not what it replaced."""
    known = state.config
    if known is None:
        return _Before(
            None, "Lifeguard had not seen this group before: every script is new to it.", False, False
        )
    if not known.actions_read:
        return _Before(
            None,
            "Lifeguard knew when this group last changed, not its scripts: every script is new to it.",
            False,
            False,
        )
    if known.fingerprint != new_fingerprint:
        if known.modified_at > call_at:
            return _Before(None, _LATER, False, True)
        return _Before(_parsed(known.node_lifecycle_actions), None, False, False)
    proven = state.proven_good
    if proven is not None and proven.fingerprint != new_fingerprint and proven.modified_at <= call_at:
        return _Before(
            _parsed(proven.node_lifecycle_actions),
            "Compared with the configuration last proven good: Lifeguard had read the new one from PCS "
            "before the change was reported.",
            True,
            False,
        )
    return _Before(
        None,
        "What this change replaced is not known: Lifeguard had read the new one from PCS before.",
        True,
        True,
    )


_RISKS_BEFORE = (
    "{before} of the {found} risk(s) were there before this change (severity info): the configuration it "
    "replaced had them."
)
_LATER = (
    "What this change replaced is not known: the configuration Lifeguard last read was set after it (the "
    "change was reported late)."
)


def _fingerprint(config: NodeLifecycleActions | None) -> str:
    return config.fingerprint() if config is not None else fingerprint_of(None)


def _parsed(actions: Mapping[str, Any] | None) -> NodeLifecycleActions | None:
    if not actions:
        return None
    try:
        return NodeLifecycleActions.from_api(dict(actions))
    except InvalidLifecycleConfigError:
        return None  # kept before a rule existed: reviewed as if unknown


def _had_before(risks: list[Risk], previous: list[Risk]) -> list[bool]:
    """Which of `risks` the replaced configuration had already (`previous`, its own): each of its risks
    stands for one at most, the one at its own place first, else the same finding wherever its script now
    stands (a script moved). A script copied beside it (the same name and location in the other stage, a
    nodeReady script on TERMINATE) is new, and its risks are the change's: one old risk had stood for any
    number of its like."""
    at_place = Counter((r.code, r.message, r.about, r.path) for r in previous)
    anywhere = Counter((r.code, r.message, r.about) for r in previous)
    had = [False] * len(risks)
    for index, risk in enumerate(risks):
        place = (risk.code, risk.message, risk.about, risk.path)
        if at_place[place] > 0:
            at_place[place] -= 1
            anywhere[place[:3]] -= 1
            had[index] = True
    for index, risk in enumerate(risks):
        finding = (risk.code, risk.message, risk.about)
        if not had[index] and anywhere[finding] > 0:
            anywhere[finding] -= 1
            had[index] = True
    return had


def _review(
    call: ConfigCall, target: _Target, state: GroupState, *, retried: bool = False
) -> tuple[ControllerEvent, int] | None:
    """The ConfigChangeReviewed of the call and how many risks the review found (the event lists at most
    `_RISKS_MAX`), or None when it changed nothing Lifeguard can tell. `retried`: a call that carried no
    configuration, whose review was made before and not told: made again whatever was read since."""
    new = target.config
    new_fingerprint = _fingerprint(new)
    previous, reason, already_known, unknown_before = _previous(state, new_fingerprint, call.at)
    if not target.carried and (new is None or (already_known and not retried)):
        # An update of something else: the configuration is the one already known, or the group runs
        # none (a review of nothing, at every scaling change of such a group).
        return None
    changed_by = call.changed_by()
    if not target.carried:
        # Reviewed is what PCS holds after a call that changed something else: not laid at its door.
        changed_by = {"arn": None, "at": call.at, "source": "unknown"}
        by = clip(call.arn or "an unnamed caller", 300)
        read_back = (
            f"{call.event_name} by {by} carried no nodeLifecycleActions: reviewed is the configuration PCS "
            "holds after it, put in place by whom is not known."
        )
        reason = f"{read_back} {reason}" if reason else read_back
    risks = find_risks(new, previous) if new is not None else []
    # A risk the replaced configuration had already (the same finding, wherever its script now stands) is
    # not the change's: told, after those the change brought, and not worth a warning of its own.
    had = _had_before(risks, find_risks(previous) if previous is not None else [])
    before = [risk for risk, there in zip(risks, had, strict=True) if there]
    brought = len(risks) - len(before)
    risks = [risk for risk, there in zip(risks, had, strict=True) if not there] + before
    said = []
    if before:
        said.append(_RISKS_BEFORE.format(before=len(before), found=len(risks)))
    if len(risks) > _RISKS_MAX:
        said.append(risks_found_sentence(len(risks)))
    if said:
        reason = " ".join([reason, *said] if reason else said)
    diff = [] if unknown_before else [change.to_detail() for change in diff_configs(previous, new)]
    detail = make_detail(
        cluster_id=target.cluster_id,
        compute_node_group_id=target.group_id,
        compute_node_group_name=target.name or group_name(state),
        config_before=previous.to_api() if previous is not None else None,
        config_after=new.to_api() if new is not None else None,
        diff=diff,
        reason=reason,
        changed_by=changed_by,
        risks=[
            {
                "code": risk.code,
                "path": clip(risk.path, _PATH_MAX_CHARS),
                "message": clip(risk.message, _RISK_MESSAGE_MAX_CHARS),
                "severity": RISK_SEVERITY if n < brought else RISK_SEVERITY_BEFORE,
            }
            for n, risk in enumerate(risks[:_RISKS_MAX])
        ],
        config_fingerprint=new_fingerprint,
    )
    event = ControllerEvent("ConfigChangeReviewed", detail, f"{call.event_id}:ConfigChangeReviewed")
    return event, len(risks)
