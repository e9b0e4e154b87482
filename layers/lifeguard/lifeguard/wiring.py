"""The composition roots: each Lambda's handler logic built from the environment.

Environment (explicit argument > variable > default, as everywhere):
`LIFEGUARD_TABLE` (required), `LIFEGUARD_EVENT_BUS` (default `default`), `LIFEGUARD_DEFAULT_MODE`
(`notify`), `LIFEGUARD_THRESHOLD` (2), `LIFEGUARD_WINDOW_MINUTES` (60); remediation:
`LIFEGUARD_DRY_RUN` (false), `LIFEGUARD_COOLDOWN_MINUTES` (30), `LIFEGUARD_DAILY_CAP` (3),
`LIFEGUARD_NODE_BUNDLE` (the node bundle's s3:// or https:// location, for the drain step); notify:
`LIFEGUARD_TOPIC_ARN` and `LIFEGUARD_SLACK_SECRET` (each optional: an unset channel is not used).
"""

from __future__ import annotations

import functools
import gc
import logging
import time
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, Protocol

from lifeguard.aws.clients import lazy_client
from lifeguard.errors import LifeguardError
from lifeguard.metrics import Metric, uncounted
from lifeguard.settings import cluster_ids, setting
from lifeguard.values import frozen

# Each composition root imports what its own function uses, when it is built: a cold start loads no other
# function's code (the notify function needs no detection, the scaling_events function no Slack).
if TYPE_CHECKING:
    from lifeguard.aws.eventbridge import EventPublisher
    from lifeguard.aws.pcs import PcsGateway
    from lifeguard.detection import DetectionSettings
    from lifeguard.group_state import ChangedBy, HeldBack, KnownConfig
    from lifeguard.handlers.config_review import ConfigReviewHandler
    from lifeguard.handlers.node_reports import NodeReportsHandler
    from lifeguard.handlers.scaling_events import ScalingEventsHandler
    from lifeguard.handlers.updater import GroupUpdater
    from lifeguard.notify import Notifier
    from lifeguard.remediation import RemediationSettings, Remediator
    from lifeguard.remediation.records import Ledger
    from lifeguard.store.changes import ChangeStore
    from lifeguard.store.groups import GroupStore
    from lifeguard.store.remediations import RemediationStore

__all__ = [
    "Wiring",
    "build_node_reports",
    "build_notify",
    "build_remediate",
    "build_scaling_events",
    "settle_collector",
    "wire",
]

logger = logging.getLogger("lifeguard")

# Allocations between two young-generation collections of Python's garbage collector, in a function that
# reads batches of records (Python's default: 700). A batch allocates tens of thousands of short-lived
# objects, almost none of them in reference cycles (reference counting frees them): at 700, most young
# collections find nothing to collect and walk what is alive. A cycle left waiting is held for at most
# this many more allocations (a few MB).
YOUNG_COLLECTION_EVERY = 10_000


def settle_collector() -> None:
    """At the end of a batch function's start: what it built goes into the collector's permanent
    generation (never walked again), and young collections run every `YOUNG_COLLECTION_EVERY` allocations
    (`bench/ingest.py`: 1,000 groups at batches of 100 4.80x -> 4.41x of the bare loop, 100 groups 3.58x ->
    3.23x; the other cells within noise)."""
    gc.freeze()
    gc.set_threshold(YOUNG_COLLECTION_EVERY, *gc.get_threshold()[1:])


@frozen
class Wiring:
    """The AWS side of the controller: state, PCS and events."""

    store: GroupStore
    pcs: PcsGateway
    updater: GroupUpdater
    defaults: DetectionSettings
    clients: Clients = lazy_client

    @property
    def publisher(self) -> EventPublisher:
        """The controller events' publisher."""
        return self.updater.publisher


class Clients(Protocol):
    """Where the composition roots get their AWS clients: `lazy_client` in a Lambda (one client per service
    per process, made on first use), a local AWS's factory in a replay or a test."""

    def __call__(self, service: str, *, attempts: int = ...) -> Any: ...


def wire(
    table: str | None = None,
    event_bus: str | None = None,
    *,
    clients: Clients = lazy_client,
    defaults: DetectionSettings | None = None,
    clock: Callable[[], float] | None = None,
    metric: Metric | None = None,
) -> Wiring:
    """Clients and settings from the environment (one client per service per process), unless given;
    `clock` (default: the wall's) dates the outbox's events, which the next invocation publishes once they
    are stale (a replay or a simulation passes its own, as it does to the handlers); `metric` counts the
    publisher's retries and the events an outbox at its bound dropped."""
    from lifeguard.aws.eventbridge import EventPublisher
    from lifeguard.aws.pcs import PcsGateway
    from lifeguard.detection import DetectionSettings
    from lifeguard.handlers.updater import GroupUpdater
    from lifeguard.store.groups import GroupStore

    table_name = setting("table", table, "", str)
    if not table_name:
        raise LifeguardError("LIFEGUARD_TABLE is not set: the name of Lifeguard's DynamoDB table")
    store = GroupStore(clients("dynamodb"), table_name)
    publisher = EventPublisher(
        clients("events"), setting("event_bus", event_bus, "default", str), metric=metric or uncounted
    )
    return Wiring(
        store,
        PcsGateway(clients("pcs")),
        GroupUpdater(store, publisher, clock=clock or time.time, metric=metric or uncounted),
        defaults or DetectionSettings.stack_defaults(),
        clients,
    )


def build_scaling_events(
    wiring: Wiring | None = None, *, metric: Metric | None = None, clock: Callable[[], float] | None = None
) -> ScalingEventsHandler:
    """The scaling_events Lambda's handler; `clock` (default: the wall's) is what record times must be
    plausible against (a replay passes its stream's)."""
    from lifeguard.handlers.scaling_events import ScalingEventsHandler

    w = wiring or wire(metric=metric)
    ledgers = _ledgers(w)
    return ScalingEventsHandler(
        w.store,
        w.pcs,
        w.updater,
        w.defaults,
        metric=metric,
        clock=clock or time.time,
        quarantined=lambda cluster, group: ledgers().ledger(cluster, group).quarantined(),
        changed_by=change_lookup(w, ledgers),
        held_back=hold_lookup(ledgers),
        clusters=cluster_ids(),
    )


def _ledgers(w: Wiring) -> Callable[[], RemediationStore]:
    """The remediation store, imported and made at its first use: only a loop's decisions read a ledger, so
    a batch function's cold start loads none of the remediation's records."""

    @functools.cache
    def ledgers() -> RemediationStore:
        from lifeguard.store.remediations import RemediationStore

        return RemediationStore(w.store.client, w.store.table)

    return ledgers


def hold_lookup(ledgers: Callable[[], RemediationStore]) -> HeldBack:
    """The remediation's decision on an episode's revision, as the scaling_events handler asks for it
    (`HeldBack`): a decision that failed is not made yet (its retry decides); one whose item cannot be read
    held nothing back (the group's records are still judged, as before decisions were read)."""
    from lifeguard.store.groups import UnreadableStateError

    def held_back(cluster_id: str, group_id: str, episode_id: str, revision: int) -> tuple[bool, int | None]:
        try:
            decision = ledgers().decision(cluster_id, group_id, episode_id, revision)
        except UnreadableStateError as exc:  # edited by hand, or damaged: the group is judged all the same
            logger.warning("%s; its loop is not decided again after a hold", exc)
            return True, None
        if decision is None or decision.status == "failed":
            return False, None
        until = decision.held_until
        return True, None if until is None else int(until * 1000)

    return held_back


# A CloudTrail record of the change is taken for the one that put a configuration in place when it is this
# close to the configuration's modifiedAt (the same fingerprint may have been set before, by someone else).
CHANGE_MATCH_MS = 10 * 60 * 1000


def change_lookup(w: Wiring, ledgers: Callable[[], RemediationStore] | None = None) -> ChangedBy:
    """Who put a group's configuration in place: Lifeguard's own change (its ledger, to the millisecond of
    the configuration's modifiedAt), else the review of its CloudTrail call (which names Lifeguard's role
    for Lifeguard's own), else nobody known (`source: unknown`, at the configuration's modifiedAt)."""
    ledgers = ledgers or _ledgers(w)  # the handler's own, when it has one

    @functools.cache
    def changes() -> ChangeStore:
        from lifeguard.store.changes import ChangeStore

        return ChangeStore(w.store.client, w.store.table)

    def changed_by(cluster_id: str, group_id: str, config: KnownConfig) -> dict[str, Any] | None:
        for change in reversed(ledgers().ledger(cluster_id, group_id).changes):
            if change.status == "applied" and change.modified_at_after == config.modified_at:
                return {"arn": None, "at": int(change.at * 1000), "source": "lifeguard"}
        found = changes().find(cluster_id, group_id, config.fingerprint)
        if found is not None and abs(found.at - config.modified_at) <= CHANGE_MATCH_MS:
            return found.to_changed_by()
        return {"arn": None, "at": config.modified_at, "source": "unknown"}

    return changed_by


def build_node_reports(
    wiring: Wiring | None = None, *, metric: Metric | None = None, clock: Callable[[], float] | None = None
) -> NodeReportsHandler:
    """The node_reports Lambda's handler (`clock` as for `build_scaling_events`)."""
    from lifeguard.handlers.node_reports import NodeReportsHandler

    w = wiring or wire(metric=metric)
    ledgers = _ledgers(w)
    return NodeReportsHandler(
        w.store,
        w.updater,
        w.defaults,
        pcs=w.pcs,
        clusters=cluster_ids(),
        changed_by=change_lookup(w, ledgers),
        quarantined=lambda cluster, group: ledgers().ledger(cluster, group).quarantined(),
        metric=metric,
        clock=clock or time.time,
    )


def build_remediate(
    wiring: Wiring | None = None,
    *,
    settings: RemediationSettings | None = None,
    pcs: PcsGateway | None = None,
    clock: Callable[[], float] | None = None,
    sleep: Callable[[float], None] | None = None,
    metric: Metric | None = None,
) -> Remediator:
    """The remediate Lambda's remediator; its PCS client leaves retries to it (for retryAfterSeconds).
    `clock` and `sleep` (default: the wall's) are what its rails and backoff count on."""
    from lifeguard.aws.pcs import PcsGateway
    from lifeguard.remediation import RemediationSettings, Remediator
    from lifeguard.store.remediations import RemediationStore

    w = wiring or wire(metric=metric)
    return Remediator(
        RemediationStore(w.store.client, w.store.table),
        w.store,
        pcs or PcsGateway(w.clients("pcs", attempts=1)),
        w.publisher,
        settings or RemediationSettings.from_environment(),
        clock=clock,
        sleep=sleep,
        metric=metric,
    )


def build_notify(
    table: str | None = None,
    *,
    topic_arn: str | None = None,
    slack_secret: str | None = None,
    clock: Callable[[], float] | None = None,
    metric: Metric | None = None,
    clients: Clients = lazy_client,
    slack_interval_seconds: float = 1.0,
    time_left: Callable[[], float] | None = None,
    retried: bool = True,
) -> Notifier:
    """The notify Lambda's notifier: SNS when a topic is set, Slack when a webhook secret is set, each
    webhook paced to one message every `slack_interval_seconds` (Slack's limit; a local sink needs none),
    never waiting for a slot longer than the invocation has left (`time_left`, seconds). A channel's failure
    says what becomes of the event in the stack (`TRIED_THEN_PARKED`) unless nothing retries it
    (`retried=False`: a replay)."""
    from lifeguard.notify.notifier import TRIED_THEN_PARKED, WAIT_FOR_OTHERS_SECONDS, Channel, Notifier
    from lifeguard.store.notices import NoticeStore

    table_name = setting("table", table, "", str)
    notices = NoticeStore(clients("dynamodb"), table_name, clock=clock or time.time) if table_name else None
    channels: list[Channel] = []
    topic = setting("topic_arn", topic_arn, "", str)
    if topic:  # each channel's module loaded only when the stack sets it up
        from lifeguard.notify.sns import SnsChannel

        # Not retried by botocore: a Publish that went out unanswered is not sent again (`SnsChannel`).
        channels.append(SnsChannel(clients("sns", attempts=1), topic))
    secret = setting("slack_secret", slack_secret, "", str)
    if secret:
        from lifeguard.notify.slack import SecretWebhook, SlackChannel

        # Paced through the table: concurrent invocations keep one message a second per webhook.
        pacer = notices
        webhook = SecretWebhook(clients("secretsmanager"), secret)
        channels.append(
            SlackChannel(
                webhook,
                pacer=pacer,
                min_interval_seconds=slack_interval_seconds,
                metric=metric or uncounted,
                time_left=time_left,
            )
        )
    if not channels:
        raise LifeguardError(
            "neither LIFEGUARD_TOPIC_ARN nor LIFEGUARD_SLACK_SECRET is set: nowhere to notify"
        )
    return Notifier(
        channels,
        notices,
        metric=metric,
        wait_for_others_seconds=WAIT_FOR_OTHERS_SECONDS,
        failed_then=TRIED_THEN_PARKED if retried else "",
        time_left=time_left,
    )


def build_config_review(
    wiring: Wiring | None = None, *, metric: Metric | None = None, clock: Callable[[], float] | None = None
) -> ConfigReviewHandler:
    """The review_changes Lambda's handler: PCS's configuration calls (CloudTrail) reviewed against the
    group's last known configuration, who made each kept in the table (`clock` as for
    `build_scaling_events`: what `eventTime` must be plausible against)."""
    from lifeguard.handlers.config_review import ConfigReviewHandler
    from lifeguard.store.changes import ChangeStore

    w = wiring or wire(metric=metric)
    changes = ChangeStore(w.store.client, w.store.table)

    def ledger(cluster_id: str, group_id: str) -> Ledger:
        from lifeguard.store.remediations import RemediationStore  # here: only a call of Lifeguard's asks

        return RemediationStore(w.store.client, w.store.table).ledger(cluster_id, group_id)

    return ConfigReviewHandler(
        w.store,
        changes,
        w.pcs,
        w.publisher,
        ledger=ledger,
        metric=metric,
        clock=clock or time.time,
        clusters=cluster_ids(),
    )
