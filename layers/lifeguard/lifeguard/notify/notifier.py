"""The notify Lambda's logic: every `lifeguard` event to every channel, each channel on its own (a
configuration change only when its review found risks: `ConfigChangeReviewed` with `risks`, as a warning).

A channel that fails never blocks another: its failure is counted and, once the other channels are done,
raised (`NotificationError`) so the Lambda retries the event. Each (event, channel) is claimed in the
table before sending, so a retried or re-delivered event reaches a channel that already has it no more.
"""

from __future__ import annotations

import hashlib
import json
import logging
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import field
from typing import Any, Protocol, cast

from lifeguard.bounds import clip, redacted
from lifeguard.errors import LifeguardError
from lifeguard.event_contract import DETAIL_TYPES, clean_detail
from lifeguard.metrics import Metric, uncounted
from lifeguard.notify.summary import Summary, summarize
from lifeguard.store.notices import CLAIM_LEASE_SECONDS, CLAIM_MARGIN_SECONDS, NoticeStore
from lifeguard.values import mutable

__all__ = ["Channel", "NotificationError", "Notifier", "NotifyResult"]

logger = logging.getLogger("lifeguard")


class NotificationError(LifeguardError):
    """Some channel did not get the event after its retries; the others did."""


class Channel(Protocol):
    """A place notifications go."""

    name: str

    def send(self, summary: Summary, detail: Mapping[str, Any], *, sequence: int | None = None) -> None:
        """Deliver one event (the `sequence`-th message of its episode) or raise."""


@mutable
class NotifyResult:
    """What happened to one event, per channel."""

    detail_type: str | None = None
    sent: list[str] = field(default_factory=list)
    already_sent: list[str] = field(default_factory=list)
    failed: dict[str, str] = field(default_factory=dict)

    def to_dict(self) -> dict[str, Any]:
        """As the handler returns it."""
        return {
            "detail_type": self.detail_type,
            "sent": self.sent,
            "already_sent": self.already_sent,
            "failed": self.failed,
        }


# How long an invocation waits for another one sending the same message (a duplicate delivery, both
# running at once) to be done, looking every second: most sends take under a second, and a raise (Lambda's
# retry a minute later) counts as the function's error, which pages whoever watches NotifyErrorsAlarm.
WAIT_FOR_OTHERS_SECONDS = 20.0

# What becomes of an event a channel did not get, in the stack: the notify function's asynchronous
# invocation is tried three times in all (EventInvokeConfig: two retries, about 1 and 3 minutes apart), then
# the event is parked in ParkedEventsQueue. True on every try, the last one too.
TRIED_THEN_PARKED = (
    "the notify function tries an event three times, about 1 and 3 minutes apart, then parks it"
)


class Notifier:
    """Fans one controller event out to the channels."""

    def __init__(
        self,
        channels: Sequence[Channel],
        notices: NoticeStore | None = None,
        *,
        metric: Metric | None = None,
        wait_for_others_seconds: float = 0.0,
        failed_then: str = "",
        sleep: Callable[[float], None] = time.sleep,
        clock: Callable[[], float] = time.monotonic,
        time_left: Callable[[], float] | None = None,
    ) -> None:
        self.channels = list(channels)
        self.notices = notices
        self.metric = metric or uncounted
        self.wait_for_others_seconds = wait_for_others_seconds
        self.failed_then = failed_then  # what becomes of an event a channel did not get, said with it
        self._sleep = sleep
        self._clock = clock
        self._time_left = time_left  # the seconds the invocation has left (None: no end known)

    def _claim(self, notices: NoticeStore, group: tuple[str, str], key: str, channel: str) -> str:
        """The claim of (`key`, `channel`); while another invocation is sending it, looked at again every
        second for `wait_for_others_seconds`: it is sent by then (or given back, and claimed here). The
        claim holds until the invocation ends, when that is known (`CLAIM_MARGIN_SECONDS` more)."""
        lease = CLAIM_LEASE_SECONDS
        if self._time_left is not None:
            lease = min(lease, max(self._time_left(), 0.0) + CLAIM_MARGIN_SECONDS)
        claim = notices.claim(group, key, channel, lease_seconds=lease)
        until = self._clock() + self.wait_for_others_seconds
        while claim == "sending" and self._clock() + 1.0 <= until:
            self._sleep(1.0)
            claim = notices.claim(group, key, channel, lease_seconds=lease)
        return claim

    def _late(self, group: tuple[str, str], detail_type: str, detail: Mapping[str, Any]) -> bool:
        """Whether an event of the loop comes after news that makes it past: a detection or containment
        (the loop goes on) after its episode's LoopResolved at its revision or a later one, or a LoopResolved
        after the episode was told going on at a later revision (reopened: a nodeReady failure after the
        ACTIVE that ended it, the ended node's late reports), as a retry of a message a channel failed does,
        or the events of one batch started in another order. Each notes its own revision first and then
        reads the other's, so of two racing, the later is seen. A remediation's outcome is never late: it
        tells what Lifeguard did or could not do, now, and a reopened episode's may carry the revision it
        was decided on. Without the table, or when it fails, none is late: a message is never held up by
        it."""
        episode = detail["episode_id"]
        if self.notices is None or not episode or detail_type not in _OF_AN_EPISODE:
            return False
        revision = int(detail.get("revision") or 1)
        try:
            if detail_type == "LoopResolved":
                self.notices.note_resolved(group, str(episode), revision)
                going_on = self.notices.going_on_revision(group, str(episode))
                return going_on is not None and going_on > revision
            self.notices.note_going_on(group, str(episode), revision)
            resolved = self.notices.resolved_revision(group, str(episode))
        except Exception:  # the message goes out as it is
            logger.exception("could not look up whether episode %s was resolved", episode)
            return False
        return resolved is not None and revision <= resolved

    def handle_event(self, event: Mapping[str, Any]) -> NotifyResult:
        """One EventBridge event (`detail-type`, `detail`); raises NotificationError if a channel failed."""
        if not isinstance(event, Mapping):  # what EventBridge delivers is an object; anything else is not
            event = {}
        detail_type = event.get("detail-type")
        raw = event.get("detail")
        result = NotifyResult(detail_type=detail_type if detail_type in DETAIL_TYPES else None)
        if detail_type not in DETAIL_TYPES or not isinstance(raw, Mapping):
            logger.error(
                "event ignored: not a Lifeguard controller event (detail-type %r)", clip(detail_type)
            )
            self.metric("InvalidEvents", 1)
            return result
        # What is valid is sent; what is not is named in the message instead of failing every channel.
        detail, problems = clean_detail(raw)
        # No URL's query string (a presigned script location's credentials) goes to Slack or SNS.
        detail = cast("dict[str, Any]", redacted(detail))
        problems = [str(redacted(problem)) for problem in problems]
        if problems:
            self.metric("InvalidDetailFields", len(problems))
            logger.warning("%s with invalid fields: %s", detail_type, clip("; ".join(problems), 500))
        if not _worth_sending(detail_type, raw):
            logger.info(
                "%s of %s without a risk the change brought: nothing to notify",
                detail_type,
                clip(detail["compute_node_group_id"]),
            )
            self.metric("NotificationsNotNeeded", 1)
            return result
        group = (str(detail["cluster_id"] or "-"), str(detail["compute_node_group_id"] or "-"))
        summary = summarize(
            detail_type, detail, problems=problems, late=self._late(group, detail_type, detail)
        )
        key = _notice_key(detail_type, detail, raw)
        sequence: int | None = None
        for channel in self.channels:
            claim: str | None = None  # what the claim found, once it answered
            try:
                claim = (
                    self._claim(self.notices, group, key, channel.name)
                    if self.notices is not None
                    else "claimed"
                )
                if claim == "sent":
                    result.already_sent.append(channel.name)
                    continue
                if claim == "sending":
                    # Another invocation still holds it (a duplicate delivery, its send slow): retried,
                    # it finds it sent, or takes it over once that invocation's lease ran out.
                    result.failed[channel.name] = "being sent by another invocation"
                    continue
                if sequence is None and self.notices is not None and detail["episode_id"]:
                    sequence = self.notices.sequence_of(group, str(detail["episode_id"]), key)
                channel.send(summary, detail, sequence=sequence)
                result.sent.append(channel.name)
                self.metric("NotificationsSent", 1)
                if self.notices is not None:
                    # Sent all the same if this fails: at worst the claim's lease lets a retry send it again.
                    try:
                        self.notices.sent(group, key, channel.name)
                    except Exception:
                        logger.exception("could not note that %s went out to %s", key, channel.name)
            except Exception as exc:  # noqa: BLE001 (one channel's failure must never stop another)
                result.failed[channel.name] = str(exc)
                self.metric("NotificationFailures", 1)
                logger.error(
                    "%s notification of %s (group %s of cluster %s) failed: %s",
                    channel.name,
                    key,
                    clip(group[1]),
                    clip(group[0]),
                    exc,
                )
                # Only a claim this invocation holds is given back: one that failed or found the pair sent
                # (or held by another invocation) is not its own to delete.
                if self.notices is not None and claim == "claimed":
                    try:
                        self.notices.unclaim(group, key, channel.name)
                    except Exception:
                        logger.exception("could not release the %s claim of %s", channel.name, key)
        if result.failed:
            failed = ", ".join(f"{name} ({why})" for name, why in result.failed.items())
            then = f"; {self.failed_then}" if self.failed_then else ""
            raise NotificationError(f"{key}: not delivered to {failed}{then}")
        return result


def _worth_sending(detail_type: str, raw: Mapping[str, Any]) -> bool:
    """Every event is, but a review of a change that brought no risk: a change without risk is news to
    nobody, nor is one whose risks were all there before it (severity `info`). Judged on the event as it
    came: a risk that is not valid is still a risk (the message names it)."""
    if detail_type != "ConfigChangeReviewed":
        return True
    risks = raw.get("risks")
    if not isinstance(risks, list):
        return bool(risks)
    return any(not isinstance(risk, Mapping) or risk.get("severity") != "info" for risk in risks)


# The events of an episode's loop, whose messages after its LoopResolved are past news (`Notifier._late`).
_OF_AN_EPISODE = frozenset({"BootstrapLoopDetected", "LoopContained", "LoopResolved"})


def _notice_key(detail_type: str, detail: Mapping[str, Any], raw: Mapping[str, Any]) -> str:
    """What makes an event the same event again: its episode, type and revision; for an event without a
    valid episode id (a refused detection), its content. A RemediationSkipped is its content too: the
    refusal of a forged or stale detection carries the ids of the episode it names, and must not take the
    place of the decision on the genuine one. A review is its call (who, when, which group, the configuration
    it put in place): a CloudTrail record delivered twice is reviewed twice, the second time on what the
    table had learned meanwhile (its reason, its diff), and is still one message."""
    told: Any = raw
    if detail_type == "ConfigChangeReviewed":
        told = [
            raw.get(name)
            for name in ("cluster_id", "compute_node_group_id", "changed_by", "config_fingerprint")
        ]
    digest = hashlib.sha256(json.dumps(told, sort_keys=True, default=str).encode()).hexdigest()[:24]
    if not detail["episode_id"]:
        return f"-:{detail_type}:{digest}"
    key = f"{detail['episode_id']}:{detail_type}:{detail.get('revision') or 1}"
    # A revision given but not valid is no revision 1: its content keeps it from taking that one's place.
    unnumbered = detail.get("revision") is None and raw.get("revision") is not None
    return f"{key}:{digest}" if detail_type == "RemediationSkipped" or unnumbered else key
