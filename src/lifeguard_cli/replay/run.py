"""The replay: the handlers, built by their composition roots against a fresh local AWS, fed the inputs.

Every compute node group the inputs name is created in the local PCS endpoint just before its first
record, and the handlers and the endpoint run on the stream's clock. The events the handlers publish go
on the stack's bus, and from it to the functions template.yaml's rules target (`bus.LocalBus`). A
CloudTrail record of a PCS call is made on the local PCS as it was on the real one, then put on the
default bus, whose rules route it (to the configuration review); a recorded controller event is put on the
stack's bus again (to remediate and notify, as the rules say). A --node-bundle that is not an s3:// or
https:// location of a file is refused before anything is read or run.
"""

from __future__ import annotations

import contextlib
import json
import logging
import os
import sys
import uuid
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, replace
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import TYPE_CHECKING, Any

from lifeguard.bounds import clip, event_time
from lifeguard.errors import LifeguardError
from lifeguard.event_contract import LOCAL_AWS_VARIABLE
from lifeguard_cli.replay.bus import STACK_BUS, LocalBus, template_rules
from lifeguard_cli.replay.errors import InvalidNodeBundleError, ReplayError
from lifeguard_cli.replay.inputs import (
    ApiCall,
    ConfigUpdate,
    ControllerEvent,
    Item,
    LogLines,
    SeenGroup,
    SubscriptionFile,
    group_name,
    read_inputs,
    seen_groups,
)
from lifeguard_cli.replay.render import config_line, event_line, row_entry
from lifeguard_cli.replay.result import ReplayResult, TimelineEntry
from lifeguard_cli.resources import resource

if TYPE_CHECKING:
    from lifeguard.detection import DetectionSettings
    from lifeguard.handlers.batch import Skips
    from lifeguard.handlers.config_review import ConfigReviewHandler
    from lifeguard.handlers.node_reports import NodeReportsHandler
    from lifeguard.handlers.scaling_events import ScalingEventsHandler
    from lifeguard.notify import Notifier
    from lifeguard.remediation import NodeBundle, RemediationSettings, Remediator
    from lifeguard_cli.local import LocalAWS, LocalPcs, ManualClock
    from lifeguard_cli.local.stack import LocalChannels, LocalStack

__all__ = [
    "DEFAULT_CONFIG",
    "Handlers",
    "LocalClients",
    "build_handlers",
    "handler_logs",
    "node_bundle_at",
    "on_local_aws",
    "replay",
]

DEFAULT_CONFIG = resource("events", "configs", "article-terminate.json")


def replay(
    paths: list[Path],
    *,
    config: Mapping[str, Any] | None = None,
    threshold: int | None = None,
    window_minutes: int | None = None,
    mode: str = "quarantine",
    dry_run: bool = False,
    node_bundle: str | None = None,
    verbose: bool = False,
    progress: Callable[[int, int], None] | None = None,
    keep: Callable[[LocalAWS, LocalStack, LocalChannels, ReplayResult], None] | None = None,
) -> ReplayResult:
    """Feed the inputs, in order, to the real handlers against a fresh local AWS; the remediate and notify
    handlers run on the events the others publish, as template.yaml routes them (SNS is read back through
    an SQS subscription, Slack is a loopback sink). `progress(done, total)` hears of each input fed (and
    of none yet, while the local AWS starts). `keep(aws, stack, channels, result)` is called with the local
    AWS still up once the replay is done (`replay --keep` serves it on from there)."""
    from lifeguard.detection import DetectionSettings
    from lifeguard.remediation import RemediationSettings
    from lifeguard_cli.local import LocalPcs, ManualClock, local_aws
    from lifeguard_cli.local.slack import serve_slack
    from lifeguard_cli.local.stack import Sends, create_notification_channels, create_stack

    bundle = node_bundle_at(node_bundle) if node_bundle is not None else None
    inputs = read_inputs(paths)
    for note in inputs.notes:
        print(f"lifeguard replay: {note}", file=sys.stderr)
    rules = template_rules()
    groups = seen_groups(inputs.items)
    actions = dict(config) if config is not None else json.loads(DEFAULT_CONFIG.read_text())
    start = min((group.earliest for group in groups), default=0)
    clock = ManualClock(datetime.fromtimestamp(start / 1000, UTC) - timedelta(seconds=2))
    try:
        detection = DetectionSettings.stack_defaults(mode, threshold, window_minutes)
    except ValueError as exc:  # out of its bounds, given or from LIFEGUARD_THRESHOLD/_WINDOW_MINUTES
        said = str(exc)
        for name, option in (("threshold:", "--threshold"), ("window_minutes:", "--window-minutes")):
            if said.startswith(name):  # given: named as the command line gave it
                said = option + said.removeprefix(name)
        raise ReplayError(f"the detection's threshold or window: {said}") from None
    try:
        remediation = RemediationSettings.from_environment(
            default_mode=mode,
            dry_run=dry_run,
            # A replay given a node bundle shows the drain step (DrainKeptNodes=true in the stack).
            drain_kept_nodes=bundle is not None,
            node_bundle=bundle,
        )
    except ValueError as exc:  # LIFEGUARD_COOLDOWN_MINUTES, _DAILY_CAP, … set to what is not one
        raise ReplayError(f"the remediation's settings: {exc}") from None
    result = ReplayResult(skipped_records=inputs.skipped)
    told = progress or (lambda done, total: None)
    told(0, len(inputs.items))
    with (
        local_aws(LocalPcs(clock=clock, update_seconds=PCS_UPDATE_SECONDS)) as aws,
        serve_slack() as slack,
        handler_logs(verbose),
        on_local_aws(),
    ):
        sends = Sends()
        clients = LocalClients(aws, configure=sends.watch)
        sqs, pcs = clients("sqs"), clients("pcs")
        prefix = f"replay-{uuid.uuid4().hex[:8]}"
        stack = create_stack(clients("dynamodb"), clients("events"), sqs, prefix)
        channels = create_notification_channels(
            clients("sns"), sqs, clients("secretsmanager"), prefix, slack.url
        )
        handlers = build_handlers(
            clients, stack, channels, clock, detection=detection, remediation=remediation
        )
        _create_groups(aws.pcs, groups, clock, actions, given=config is not None)

        def published() -> list[dict[str, Any]]:
            if not sends.take("events"):
                return []
            # EventBridge stamps an event with the time it was put: here, the stream's.
            at = event_time(clock())
            return [{**event, "time": at} for event in stack.received_events(sqs)]

        feeder = _Feeder(result, clock, pcs, handlers, groups)
        functions = {
            "RemediateFunction": feeder.remediate,
            "NotifyFunction": feeder.notify,
            "ReviewChangesFunction": feeder.review,
        }
        bus = LocalBus(rules, functions, published=published, seen=feeder.seen)
        for done, item in enumerate(inputs.items, start=1):
            feeder.feed(item, bus)
            told(done, len(inputs.items))
        result.notifications.extend(channels.received_sns(sqs))
        result.notifications.extend(
            {"channel": "slack", "text": message.get("text", "").splitlines()[0], "message": message}
            for message in slack.messages
        )
        for group in groups:
            found = pcs.get_compute_node_group(
                clusterIdentifier=group.cluster_id, computeNodeGroupIdentifier=group.group_id
            )
            result.groups.append(
                {
                    "cluster_id": group.cluster_id,
                    "compute_node_group_id": group.group_id,
                    "node_lifecycle_actions": found["computeNodeGroup"].get("nodeLifecycleActions"),
                }
            )
        if keep is not None:
            # An update PCS was making when the stream ended has settled since: the kept groups are
            # ACTIVE, so `lifeguard undo` can be tried on them.
            clock.set(clock() + timedelta(seconds=PCS_UPDATE_SECONDS + 1))
            clock.run()  # and one made from now on settles as on PCS, a minute later
            keep(aws, stack, channels, result)
    return result


# How long the local PCS takes to make an update (UPDATING, then ACTIVE), on the stream's clock.
PCS_UPDATE_SECONDS = 60


def build_handlers(
    clients: LocalClients,
    stack: LocalStack,
    channels: LocalChannels,
    clock: ManualClock,
    *,
    detection: DetectionSettings,
    remediation: RemediationSettings,
    metric: Callable[[str, float], None] | None = None,
) -> Handlers:
    """The functions' logic, by their composition roots, on the local stack and the stream's clock: record
    times are plausible against it, and remediation's rails (cooldown, cap, backoff) count on it. `metric`
    sees every metric they emit."""
    from lifeguard.wiring import (
        build_config_review,
        build_node_reports,
        build_notify,
        build_remediate,
        build_scaling_events,
        wire,
    )

    def stream_time() -> float:
        return clock().timestamp()

    def sleep(seconds: float) -> None:
        clock.advance(seconds)

    wiring = wire(
        stack.table, stack.event_bus, clients=clients, defaults=detection, clock=stream_time, metric=metric
    )
    return Handlers(
        scaling=build_scaling_events(wiring, clock=stream_time, metric=metric),
        reports=build_node_reports(wiring, clock=stream_time, metric=metric),
        remediate=build_remediate(
            wiring, settings=remediation, clock=stream_time, sleep=sleep, metric=metric
        ),
        review=build_config_review(wiring, clock=stream_time, metric=metric),
        # Notify keeps the wall's clock: its Slack pacing sleeps for real, and the stream's clock may stand
        # still or start over with the next input. The sink is local: no pacing needed.
        notify=build_notify(
            stack.table,
            topic_arn=channels.topic_arn,
            slack_secret=channels.slack_secret,
            clients=clients,
            slack_interval_seconds=0.0,
            metric=metric,
            retried=False,  # a channel's failure is a line of the timeline; nothing tries it again
        ),
    )


def node_bundle_at(location: str) -> NodeBundle:
    """The node bundle at `location`, which must be a location PCS fetches a lifecycle script from (its
    service model's pattern, at most 1,024 characters) and name a file: `s3://BUCKET/KEY` or
    `https://HOST/PATH`. Else an InvalidNodeBundleError that repeats no query string or user info."""
    from urllib.parse import urlsplit

    from lifeguard.pcs_model import validate_shape
    from lifeguard.remediation import NodeBundle

    try:
        parts = urlsplit(location)
    except ValueError:
        parts = None
    if (
        parts is None
        or validate_shape("ScriptSource", {"scriptLocation": location})
        or not parts.path.strip("/")
    ):
        if parts is not None and parts.scheme:
            shown = f"{parts.scheme}://{parts.netloc.rpartition('@')[2]}{parts.path}"
        else:
            shown = location.split("?", 1)[0].split("#", 1)[0]
        bucket = parts.netloc if parts is not None and parts.scheme == "s3" else None
        why = "an S3 bucket's name is 3 to 63 characters" if bucket and not 3 <= len(bucket) <= 63 else ""
        raise InvalidNodeBundleError(clip(shown, 120), why)
    return NodeBundle(location)


def _create_groups(
    pcs: LocalPcs,
    groups: list[SeenGroup],
    clock: ManualClock,
    actions: Mapping[str, Any],
    *,
    given: bool = False,
) -> None:
    """Each group (and its cluster) in the local PCS a second before the first record of all, with
    `actions`; unless those were `given`, a group a recorded controller event names has the configuration
    the event says it had. Not each before its own first record: the clock never goes back, and a group
    whose records begin hours later (another file, one record's wrong time) set it there before the others'
    records were fed, which were then judged against it (changed since, older than 14 days)."""
    taken: set[str] = set()
    clusters: set[str] = set()
    if groups:
        first = min(group.earliest for group in groups)
        clock.set(datetime.fromtimestamp(first / 1000, UTC) - timedelta(seconds=1))
    for group in sorted(groups, key=lambda seen: seen.earliest):
        if group.cluster_id not in clusters:
            pcs.add_cluster(f"replay-{len(clusters) + 1}", cluster_id=group.cluster_id)
            clusters.add(group.cluster_id)
        pcs.add_compute_node_group(
            group.cluster_id,
            group_name(group.name, group.group_id, taken),
            group_id=group.group_id,
            node_lifecycle_actions=actions if given or group.config is None else group.config,
        )


class LocalClients:
    """The composition roots' `Clients` over the local AWS: one client per service and retry budget, with
    the retries and timeouts a Lambda's `aws_client` has."""

    def __init__(self, aws: LocalAWS, *, configure: Callable[[str, Any], None] | None = None) -> None:
        self._aws = aws
        self._made: dict[tuple[str, int], Any] = {}
        self._configure = configure  # sees each client as it is made (a simulation hooks its faults there)

    def __call__(self, service: str, *, attempts: int = 5) -> Any:
        made = self._made.get((service, attempts))
        if made is None:
            from lifeguard.aws.clients import client_config

            config = client_config(attempts)
            made = self._made[(service, attempts)] = self._aws.client(service, config=config)
            if self._configure is not None:
                self._configure(service, made)
        return made


@dataclass(frozen=True)
class Handlers:
    """The functions' logic, as their composition roots build it."""

    scaling: ScalingEventsHandler
    reports: NodeReportsHandler
    remediate: Remediator
    notify: Notifier
    review: ConfigReviewHandler


def _unreadable(row: Mapping[str, Any], now_ms: int, *, reports: bool) -> str | None:
    """Why the handler skips a row (its parser's reason, or a time that cannot be genuine at `now_ms`, the
    handler's clock), or None when it reads it."""
    from lifeguard.bounds import implausible_time
    from lifeguard.node_report import NodeReportParseError, parse_node_report
    from lifeguard.scaling_log import ScalingLogParseError, parse_scaling_log_record

    if reports:
        report = parse_node_report(json.dumps(row, default=str))
        if isinstance(report, NodeReportParseError):
            return f"a node report: {report.reason}"
        times = (report.started_at * 1000, report.ended_or_started_at * 1000)
        why = next((found for at in times if (found := implausible_time(at, now_ms))), None)
        return f"a node report: run time {why}" if why else None
    record = parse_scaling_log_record(row)
    if isinstance(record, ScalingLogParseError):
        return f"a scaling-log record: {record.reason}"
    why = implausible_time(record.event_timestamp, now_ms)
    return f"a scaling-log record: event_timestamp {why}" if why else None


class _Feeder:
    """Feeds items to the handlers, moving the stream's clock along, and writes down what happens."""

    def __init__(
        self,
        result: ReplayResult,
        clock: ManualClock,
        pcs: Any,
        handlers: Handlers,
        groups: list[SeenGroup],
    ) -> None:
        self.result = result
        self.clock = clock
        self.pcs = pcs
        self.handlers = handlers
        self.groups = groups
        self.at: int | None = None  # the time of the item being fed: its events' time in the timeline

    def feed(self, item: Item, bus: LocalBus) -> None:
        """One item: a configuration change, a PCS call (made, then its CloudTrail event put on the
        default bus), or an invocation of scaling_events or node_reports whose events go on the bus."""
        if isinstance(item, ConfigUpdate):
            self._update(item)
            return
        if isinstance(item, ApiCall):
            self._call(item, bus)
            return
        if isinstance(item, ControllerEvent):
            self._republish(item, bus)
            return
        self._move_to(item.at)

        def invoke() -> None:
            summary: Skips
            if item.reports:
                reports = self.handlers.reports.handle_event(item.subscription_event())
                read = reports.reports
                summary = reports
            else:
                if isinstance(item, LogLines) and item.cluster is None:
                    # Lines of no one cluster of PCS's form: the function skips a stream that could hold them
                    # whole; each is read on its own here, to say what is wrong with it.
                    batch = self.handlers.scaling.handle_messages((m, "(line)") for m in item.messages)
                else:
                    batch = self.handlers.scaling.handle_event(item.subscription_event())
                read = batch.records
                summary = batch
            stream = (
                _another_pcs_log(item) if isinstance(item, SubscriptionFile) and not item.reports else None
            )
            if stream is not None:
                # The cluster's scheduler or job completion log, delivered to the scaling log's group too:
                # the function ignores it whole, and so is it told.
                self.result.ignore(read, "another of PCS's logs, not the scaling log")
                said = f"{read} message(s) of {stream}: another of PCS's logs, not the scaling log"
                self.result.timeline.append(TimelineEntry(self.at, "", "ignored", said))
                return
            # A record the function skipped is counted once: skipped, not replayed.
            self.result.records += read - summary.skipped
            self.result.skipped_records += summary.skipped
            if item.rows and summary.skipped == len(item.rows):
                # A line the handler skipped, or a whole batch (a stream of no PCS's form): their fields
                # would read as events they never were.
                kind = "node report" if item.reports else "scaling-log record"
                what = f"a {kind}" if len(item.rows) == 1 else f"{len(item.rows)} {kind}s"
                why = ", ".join(sorted(summary.skipped_reasons)) or "damaged"
                group = clip(item.rows[0].get("compute_node_group_id") or "", 64)
                # Where it was read, when it is one line: a record of no time is placed by nothing else.
                where = f" ({clip(item.where, 200)})" if isinstance(item, LogLines) and item.where else ""
                entry = TimelineEntry(self.at, group, "skipped", f"{what}: {clip(why, 200)}{where}")
                self.result.timeline.append(entry)
                return
            now_ms = int(self.clock().timestamp() * 1000)
            for row in item.rows:
                # In a batch the handler partly skipped, the rows it could not read are said to be skipped.
                unread = _unreadable(row, now_ms, reports=item.reports) if summary.skipped else None
                cluster = row.get("resource_id")
                outside = isinstance(cluster, str) and not self.handlers.scaling.watches(cluster)
                if unread is None and not item.reports and outside:
                    # Read as the stack reads it: a cluster outside LIFEGUARD_CLUSTER_IDS is not looked at.
                    self.result.records -= 1
                    self.result.ignore(1, "their cluster is not among LIFEGUARD_CLUSTER_IDS")
                    group = clip(row.get("compute_node_group_id") or "", 64)
                    said = f"cluster {clip(cluster, 64)} is not among LIFEGUARD_CLUSTER_IDS"
                    self.result.timeline.append(TimelineEntry(self.at, group, "ignored", said))
                elif unread is None:
                    self.result.timeline.append(row_entry(row))
                else:
                    group = clip(row.get("compute_node_group_id") or "", 64)
                    self.result.timeline.append(TimelineEntry(self.at, group, "skipped", clip(unread, 200)))

        bus.invoke(invoke)

    def seen(self, event: Mapping[str, Any]) -> None:
        """A controller event on the bus: into the result and the timeline."""
        published = {"detail-type": event["detail-type"], "detail": event["detail"]}
        self.result.events.append(published)
        what, detail = published["detail-type"], published["detail"]
        group = detail.get("compute_node_group_id") or ""
        self.result.timeline.append(TimelineEntry(self.at, group, what, event_line(detail, what), published))

    def notify(self, event: Mapping[str, Any]) -> None:
        """The notify function; a channel that failed is a timeline line."""
        try:
            self.handlers.notify.handle_event(event)
        except LifeguardError as exc:
            self._failed(event, "notification failed", exc)

    def remediate(self, event: Mapping[str, Any]) -> None:
        """The remediate function; a remediation parked (its RemediationFailed published) is a timeline
        line."""
        try:
            self.handlers.remediate.handle_event(event)
        except LifeguardError as exc:
            self._failed(event, "remediation parked", exc)

    def review(self, event: Mapping[str, Any]) -> None:
        """The review_changes function; a skipped call is counted as a skipped record, not a replayed one,
        and is a timeline line, as a failed review is."""
        try:
            summary = self.handlers.review.handle_event(event)
        except LifeguardError as exc:
            self._failed(event, "review failed", exc)
            return
        if summary.skipped:  # counted once: skipped, not replayed, and said in the timeline
            self.result.records -= summary.skipped
            self.result.skipped_records += summary.skipped
            why = ", ".join(sorted(summary.skipped_reasons))
            detail = event.get("detail")
            asked = detail.get("requestParameters") if isinstance(detail, Mapping) else None
            group = asked.get("computeNodeGroupIdentifier") if isinstance(asked, Mapping) else None
            entry = TimelineEntry(
                self.at,
                clip(group if isinstance(group, str) else "", 64),
                "skipped",
                f"a CloudTrail record: {why}",
            )
            self.result.timeline.append(entry)

    def _call(self, item: ApiCall, bus: LocalBus) -> None:
        """The call made on the local PCS (when it succeeded and set nodeLifecycleActions), then its
        CloudTrail event put on the default bus. A call of no plausible time is made on neither: the review
        skips its event, and a record skipped is not replayed."""
        self._move_to(item.at)
        group = item.group
        self.result.records += 1
        if group is not None and item.config is not None and self.at is not None:
            self._apply(group[0], group[1], item.config, f"{item.record.get('eventName')} of {group[1]}")
            identity = item.record.get("userIdentity")
            who = (identity.get("arn") if isinstance(identity, Mapping) else None) or "an unnamed caller"
            detail = f"{item.record.get('eventName')} by {who}: {config_line(item.config)}"
            self.result.timeline.append(TimelineEntry(self.at, group[1], "config changed", detail))
        bus.put(dict(item.event))

    def _republish(self, item: ControllerEvent, bus: LocalBus) -> None:
        """A recorded controller event, put on the stack's bus again: in the timeline, then delivered to
        the functions its rules target, followed by what they publish."""
        self._move_to(item.at)
        self.result.records += 1
        event = dict(item.event)
        self.seen(event)
        entry = self.result.timeline[-1]
        self.result.timeline[-1] = replace(entry, detail=f"(recorded) {entry.detail}")
        bus.put(event, bus=STACK_BUS)

    def _apply(self, cluster: str, group: str, config: Mapping[str, Any], what: str) -> None:
        from botocore.exceptions import BotoCoreError, ClientError

        try:
            self.pcs.update_compute_node_group(
                clusterIdentifier=cluster, computeNodeGroupIdentifier=group, nodeLifecycleActions=config
            )
        except (ClientError, BotoCoreError) as exc:
            said = clip(" ".join(str(exc).split()), 500)  # botocore's checks write a line per problem
            raise ReplayError(f"{what} was refused: {said}") from None

    def _failed(self, event: Mapping[str, Any], what: str, exc: LifeguardError) -> None:
        detail = event["detail"]
        group = detail.get("compute_node_group_id") or _requested_group(detail)
        self.result.timeline.append(TimelineEntry(self.at, group, what, str(exc)))

    def _move_to(self, at: int | None) -> None:
        """The item's time taken as `at`, and the clock moved to it (never back)."""
        self.at = at
        if at is not None:
            self.clock.set(datetime.fromtimestamp(at / 1000, UTC))

    def _update(self, item: ConfigUpdate) -> None:
        self.clock.set(datetime.fromtimestamp(item.at / 1000, UTC))
        cluster = next((g.cluster_id for g in self.groups if g.group_id == item.group_id), None)
        if cluster is None:
            raise ReplayError(f"update_config names {item.group_id}, which no record of the inputs names")
        self._apply(cluster, item.group_id, item.config, f"update_config of {item.group_id} at {item.at}")
        entry = TimelineEntry(item.at, item.group_id, "config updated", config_line(item.config))
        self.result.timeline.append(entry)


def _requested_group(record: Mapping[str, Any]) -> str:
    """The group a CloudTrail record's request names, as it names it."""
    request = record.get("requestParameters")
    named = request.get("computeNodeGroupIdentifier") if isinstance(request, Mapping) else None
    return str(named or "")


class _CurrentStderr:
    """Whatever sys.stderr is at the time of writing (a test's capture swaps it)."""

    def write(self, text: str) -> int:
        return sys.stderr.write(text)

    def flush(self) -> None:
        sys.stderr.flush()


@contextlib.contextmanager
def on_local_aws() -> Iterator[None]:
    """The functions run against the local AWS: the undo line of their notifications says `--local`
    (`undo_command`), so that pasted after `replay --keep` it undoes there, and never in the account
    whose ids the records carry. Put back as found after."""
    saved = os.environ.get(LOCAL_AWS_VARIABLE)
    os.environ[LOCAL_AWS_VARIABLE] = "1"
    try:
        yield
    finally:
        if saved is None:
            os.environ.pop(LOCAL_AWS_VARIABLE, None)
        else:
            os.environ[LOCAL_AWS_VARIABLE] = saved


@contextlib.contextmanager
def handler_logs(verbose: bool) -> Iterator[None]:
    """The handlers' logs on stderr as a Lambda writes them (JSON), warnings and worse, with --verbose;
    none otherwise (they would mix with the timeline or --json on stdout). Put back as found after."""
    logger = logging.getLogger("lifeguard")
    saved = (logger.handlers[:], logger.level, logger.propagate)
    handler: logging.Handler = logging.NullHandler()
    if verbose:
        from aws_lambda_powertools.logging.formatter import LambdaPowertoolsFormatter

        handler = logging.StreamHandler(_CurrentStderr())
        handler.setFormatter(LambdaPowertoolsFormatter(service="lifeguard"))
    logger.handlers = [handler]
    logger.setLevel(logging.WARNING if verbose else logging.CRITICAL)
    logger.propagate = False
    try:
        yield
    finally:
        logger.handlers, logger.propagate = saved[0], saved[2]
        logger.setLevel(saved[1])


def _another_pcs_log(item: SubscriptionFile) -> str | None:
    """The stream of a subscription file of another of a cluster's PCS logs, which the function ignores
    whole (`another_pcs_log`); None for any other."""
    from lifeguard.log_subscription import another_pcs_log, decode_subscription

    batch = decode_subscription(item.event)
    if not another_pcs_log(batch.log_stream):
        return None
    return clip(batch.log_stream, 200)
