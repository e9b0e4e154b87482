"""Lifeguard in the twin: the stack's resources in the local AWS, the five functions as their composition
roots build them, on the twin's clock, invoked as AWS would invoke them.

Subscription payloads go to scaling_events and node_reports, a CloudTrail record of an operator's call to
the default bus, and every event either publishes goes on the bus, whose rules (read from template.yaml)
route it to remediate, notify or review_changes. A function that raises is retried as Lambda retries an
asynchronous invocation, then its event is parked. Faults are armed here on what the functions talk to:
PCS answers errors, DynamoDB and EventBridge answer 500, the Slack webhook fails or stalls, or remediate
dies right after its UpdateComputeNodeGroup.
"""

from __future__ import annotations

import json
import random
from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING, Any

from lifeguard.bounds import event_time
from lifeguard_cli.replay.render import event_line
from lifeguard_cli.simulate.scenario import Fault, StackSettings
from lifeguard_cli.simulate.twin import RETRY_DELAYS

if TYPE_CHECKING:
    from lifeguard_cli.simulate.twin import _Twin

__all__ = ["LocalLifeguard"]

_PCS_FAULTS = {
    "pcs_throttle": "ThrottlingException",
    "pcs_error": "InternalServerException",
    "pcs_conflict": "ConflictException",
}
# What a service answers when it fails (the JSON protocols' error bodies).
_HTTP_FAULTS = {
    "dynamodb_error": ("dynamodb", "com.amazonaws.dynamodb.v20120810#InternalServerError"),
    "eventbridge_error": ("events", "InternalException"),
}
_SLACK_STALL_SECONDS = 6.0  # longer than the notifier waits for Slack (5 s)


class _InvocationDied(BaseException):
    """A remediate invocation's end right after its UpdateComputeNodeGroup (a fault): no handler code
    catches it, as none would run after a crash; Lambda sees a failed invocation."""


class LocalLifeguard:
    """The stack in the twin."""

    def __init__(self, twin: _Twin, mode: str) -> None:
        from lifeguard_cli.local.stack import Sends, create_notification_channels, create_stack
        from lifeguard_cli.replay.bus import LocalBus, template_rules
        from lifeguard_cli.replay.run import LocalClients, build_handlers

        self.twin = twin
        self._http_faults: dict[str, int] = {}
        self._die_after_update = False
        self._remediating = False
        self._slack_seen = len(twin.slack.messages)  # the sink is shared by the runs of one simulation
        self._actions: dict[str, str] = {}
        # CloudTrail's event ids: drawn apart from the twin's own random (its instance ids), so a baseline
        # run, which has no CloudTrail, launches the same instances as this run.
        self._event_ids = random.Random(f"cloudtrail/{twin.options.seed}")
        self._sends = Sends()
        clients = LocalClients(twin.aws, configure=self._configure)
        self._sqs = clients("sqs")
        self.stack = create_stack(clients("dynamodb"), clients("events"), self._sqs, twin.prefix)
        self.channels = create_notification_channels(
            clients("sns"), self._sqs, clients("secretsmanager"), twin.prefix, twin.slack.url
        )
        detection, remediation = _settings(twin.scenario.stack, mode, self._node_bundle())
        self.handlers = build_handlers(
            clients,
            self.stack,
            self.channels,
            twin.clock,
            detection=detection,
            remediation=remediation,
            metric=self._metric,
        )
        self.bus = LocalBus(
            template_rules(),
            {
                "RemediateFunction": self._function("remediate", self._remediate),
                "NotifyFunction": self._function("notify", self.handlers.notify.handle_event),
                "ReviewChangesFunction": self._function("review_changes", self.handlers.review.handle_event),
            },
            published=self._published,
            seen=self._seen,
        )

    def _node_bundle(self) -> Any:
        """The node bundle, published to the twin's S3 as the stack publishes it, when a group drains."""
        from lifeguard.detection import TAG_DRAIN
        from lifeguard.remediation import NodeBundle
        from lifeguard_cli.local.stack import publish_bundle

        groups = self.twin.result.groups.values()
        tagged = any(g.spec.tags.get(TAG_DRAIN, "").lower() == "true" for g in groups)
        if not (tagged or self.twin.scenario.stack.drain_kept_nodes):
            return None
        s3 = self.twin.aws.client("s3")
        bucket = f"{self.twin.prefix}-node-bundle"
        s3.create_bucket(Bucket=bucket)
        s3.put_bucket_versioning(Bucket=bucket, VersioningConfiguration={"Status": "Enabled"})
        data = publish_bundle(s3, bucket, self.twin.report_log)
        return NodeBundle(data["BundleLocation"], data["BundleVersionId"], data["BundleSha256"])

    # -- invocations --

    def deliver(self, reports: bool, payload: Mapping[str, Any]) -> None:
        """A subscription payload to node_reports (`reports`) or scaling_events."""
        if reports:
            self.bus.invoke(
                lambda: self._function("node_reports", self.handlers.reports.handle_event)(payload)
            )
        else:
            self.bus.invoke(
                lambda: self._function("scaling_events", self.handlers.scaling.handle_event)(payload)
            )

    def cloudtrail(self, request: Mapping[str, Any], group: Mapping[str, Any]) -> None:
        """CloudTrail's record of an operator's UpdateComputeNodeGroup (`group`: PCS's answer), put on the
        default bus."""
        at = event_time(self.twin.moment())
        digits = f"{self._event_ids.getrandbits(128):032x}"
        event_id = "-".join(digits[a:b] for a, b in ((0, 8), (8, 12), (12, 16), (16, 20), (20, 32)))
        event = {
            "version": "0",
            "id": event_id,
            "detail-type": "AWS API Call via CloudTrail",
            "source": "aws.pcs",
            "account": "123456789012",
            "time": at,
            "region": "us-east-1",
            "resources": [],
            "detail": {
                "eventVersion": "1.10",
                "userIdentity": {
                    "type": "IAMUser",
                    "arn": "arn:aws:iam::123456789012:user/operator",
                    "accountId": "123456789012",
                },
                "eventTime": at,
                "eventSource": "pcs.amazonaws.com",
                "eventName": "UpdateComputeNodeGroup",
                "awsRegion": "us-east-1",
                "eventID": event_id,
                "requestParameters": dict(request),
                "responseElements": {
                    "computeNodeGroup": {"id": group["id"], "clusterId": group["clusterId"]}
                },
            },
        }
        self.bus.put(event)

    def _function(self, name: str, handle: Callable[[Any], object]) -> Callable[[Any], None]:
        """`handle` as Lambda runs it for an asynchronous invocation: retried after a failure, then
        parked."""

        def invoke(event: Any, attempt: int = 0) -> None:
            try:
                handle(event)
            except (Exception, _InvocationDied) as exc:  # noqa: BLE001 - as Lambda: any failure is retried
                self.twin.sync()  # it failed after its own waits
                counts = self.twin.result.invocations
                counts["failed"] += 1
                what = f"{type(exc).__name__}: {str(exc).splitlines()[0] if str(exc) else ''}"
                if attempt < len(RETRY_DELAYS):
                    counts["retried"] += 1
                    self.twin.note("", f"{name} failed, retried", what)
                    when = self.twin.now + RETRY_DELAYS[attempt]
                    self.twin.at(when, lambda: self.bus.invoke(lambda: invoke(event, attempt + 1)))
                else:
                    counts["parked"] += 1
                    self.twin.note("", f"{name} failed, parked", what)

        return invoke

    def _remediate(self, event: Mapping[str, Any]) -> None:
        self._remediating = True
        try:
            self.handlers.remediate.handle_event(event)
        finally:
            self._remediating = False

    def _published(self) -> list[dict[str, Any]]:
        self.twin.sync()  # EventBridge stamps an event when it is put: after the handler's own waits
        if not self._sends.take("events"):
            return []
        at = event_time(self.twin.moment())
        return [{**event, "time": at} for event in self.stack.received_events(self._sqs)]

    def _seen(self, event: Mapping[str, Any]) -> None:
        detail = event.get("detail") or {}
        published = {
            "detail-type": event.get("detail-type"),
            "source": event.get("source"),
            "time": event.get("time"),
            "minute": round(self.twin.now / 60, 1),
            "detail": detail,
        }
        self.twin.result.events.append(published)
        group = self._group_name(detail.get("compute_node_group_id"))
        if event.get("detail-type") == "RemediationApplied" and detail.get("action"):
            action = str(detail["action"])
            mine = [c for c in self.twin.result.changes if c["group"] == group and c["by"] == "lifeguard"]
            if mine and mine[-1].get("action") is None:
                mine[-1]["action"] = action  # PCS changed before the event was published (a retry)
            else:
                self._actions[str(detail.get("compute_node_group_id"))] = action
        what = str(event.get("detail-type"))
        self.twin.note(group, what, event_line(detail, what))

    def _metric(self, name: str, value: float) -> None:
        metrics = self.twin.result.metrics
        metrics[name] = metrics.get(name, 0) + value

    def _group_name(self, group_id: Any) -> str:
        return next(
            (n for n, g in self.twin.result.groups.items() if g.group_id == group_id), str(group_id or "")
        )

    def last_action(self, group_id: str) -> str | None:
        """The action of the RemediationApplied published for the group since its last change, if any
        (taken: the next change has its own)."""
        return self._actions.pop(group_id, None)

    def collect(self) -> None:
        """What SNS and Slack received since the last look, on the twin's clock."""
        minute = round(self.twin.now / 60, 1)
        for sent in self.channels.received_sns(self._sqs) if self._sends.take("sns") else []:
            self.twin.result.notifications.append({**sent, "minute": minute})
        messages = self.twin.slack.messages
        for message in messages[self._slack_seen :]:
            text = str(message.get("text", "")).splitlines()[0] if message.get("text") else ""
            self.twin.result.notifications.append(
                {"channel": "slack", "text": text, "message": message, "minute": minute}
            )
        self._slack_seen = len(messages)

    def finish(self) -> None:
        """At the horizon: the last notifications, and each group's audit trail as `lifeguard history`
        reads it."""
        from lifeguard.store.remediations import RemediationStore

        self.collect()
        store = RemediationStore(self.twin.aws.client("dynamodb"), self.stack.table)
        start = self.twin.start.timestamp()
        for name, group in self.twin.result.groups.items():
            self.twin.result.audit[name] = [
                {
                    "minute": round((entry.at - start) / 60, 1),
                    "decision": entry.decision,
                    "action": entry.action,
                    "episode_id": entry.episode_id,
                    "revision": entry.revision,
                    "reason": entry.reason,
                }
                for entry in store.history(self.twin.cluster_id, group.group_id)
            ]

    # -- faults --

    def arm(self, fault: Fault) -> None:
        """Arm `fault` on what the functions talk to."""
        if fault.kind in _PCS_FAULTS:
            self.twin.aws.pcs.inject_fault(
                _PCS_FAULTS[fault.kind],
                operation=fault.operation,
                times=fault.times,
                retry_after_seconds=fault.retry_after_seconds if fault.kind == "pcs_throttle" else None,
            )
        elif fault.kind in _HTTP_FAULTS:
            service = _HTTP_FAULTS[fault.kind][0]
            self._http_faults[service] = self._http_faults.get(service, 0) + fault.times
        elif fault.kind == "slack_error":
            retry_after = None if fault.retry_after_seconds is None else str(fault.retry_after_seconds)
            self.twin.slack.fail_next(fault.status or 500, times=fault.times, retry_after=retry_after)
        elif fault.kind == "slack_timeout":
            self.twin.slack.stall_next(_SLACK_STALL_SECONDS, times=fault.times)
        elif fault.kind == "remediate_dies":
            self._die_after_update = True

    def _configure(self, service: str, client: Any) -> None:
        """Hooks on the functions' clients: what they send to SNS and EventBridge, the armed HTTP faults,
        and the remediate invocation's death."""
        self._sends.watch(service, client)
        if service in ("dynamodb", "events"):
            client.meta.events.register(
                f"before-send.{client.meta.service_model.service_id.hyphenize()}", self._failing(service)
            )
        if service == "pcs":
            client.meta.events.register("after-call.pcs.UpdateComputeNodeGroup", self._after_update)

    def _failing(self, service: str) -> Callable[..., Any]:
        code = next(error for svc, error in _HTTP_FAULTS.values() if svc == service)

        def answer(request: Any, **_: Any) -> Any:
            if self._http_faults.get(service, 0) <= 0:
                return None
            self._http_faults[service] -= 1
            from botocore.awsrequest import AWSResponse
            from botocore.compat import HTTPHeaders

            headers = HTTPHeaders()
            headers["Content-Type"] = "application/x-amz-json-1.1"
            body = json.dumps({"__type": code, "message": "injected fault"}).encode()
            return AWSResponse(request.url, 500, headers, _Raw(body))

        return answer

    def _after_update(self, http_response: Any = None, **_: Any) -> None:
        if self._die_after_update and self._remediating and getattr(http_response, "status_code", 0) == 200:
            self._die_after_update = False
            raise _InvocationDied("the invocation died right after UpdateComputeNodeGroup (fault)")


def _settings(stack: StackSettings, mode: str, bundle: Any) -> tuple[Any, Any]:
    """The stack's settings: the scenario's, else template.yaml's defaults; never the caller's LIFEGUARD_*
    environment (a simulation is the same run wherever it runs)."""
    from lifeguard.detection import DEFAULT_THRESHOLD, DEFAULT_WINDOW_MINUTES, DetectionSettings
    from lifeguard.remediation import RemediationSettings
    from lifeguard.remediation.settings import DEFAULT_COOLDOWN_MINUTES, DEFAULT_DAILY_CAP

    detection = DetectionSettings(
        mode,
        stack.threshold if stack.threshold is not None else DEFAULT_THRESHOLD,
        stack.window_minutes if stack.window_minutes is not None else DEFAULT_WINDOW_MINUTES,
    )
    cooldown = stack.cooldown_minutes if stack.cooldown_minutes is not None else DEFAULT_COOLDOWN_MINUTES
    remediation = RemediationSettings(
        default_mode=mode,
        dry_run=stack.dry_run,
        cooldown_seconds=cooldown * 60,
        daily_cap=stack.daily_cap if stack.daily_cap is not None else DEFAULT_DAILY_CAP,
        drain_kept_nodes=stack.drain_kept_nodes,
        node_bundle=bundle,
    )
    return detection, remediation


class _Raw:
    """A response body as botocore reads it."""

    def __init__(self, body: bytes) -> None:
        self._body = body

    def stream(self, **_: Any) -> Any:
        yield self._body
