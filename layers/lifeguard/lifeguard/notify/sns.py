"""SNS: one topic; subject under 100 characters; attributes subscribers can filter on; the readable
summary followed by the JSON detail, kept within SNS's 256 KB."""

from __future__ import annotations

import json
import time
from collections.abc import Callable, Mapping
from typing import Any

from lifeguard.errors import AwsCallError
from lifeguard.event_contract import trimmed_to_fit
from lifeguard.notify.summary import Summary

__all__ = ["PUBLISH_ATTEMPTS", "SNS_MAX_BYTES", "UNANSWERED_CODES", "SnsChannel", "sns_message"]

SNS_MAX_BYTES = 256 * 1024
_HEADROOM_BYTES = 2048  # subject and attributes count towards the limit too


def sns_message(summary: Summary, detail: Mapping[str, Any]) -> str:
    """The body: summary, then the detail as JSON, trimmed as an event is (`trimmed_to_fit`: log tail,
    configurations, evidence, risks, diff; then the reason's own words) to fit, each key of its contract's
    type and the reason saying what was left out. Should it still not fit, the JSON is left out whole, and
    said: a subscriber parses it, and half of it would not parse."""
    budget = SNS_MAX_BYTES - _HEADROOM_BYTES
    shown: dict[str, Any] = dict(detail)
    if "undo" in shown:
        shown["undo"] = summary.undo  # the command the summary made, never the event's text
    # Text that is not Unicode (a lone surrogate in a value the event carries as it came) is shown as
    # its escape: SNS takes UTF-8 only, and a retry would fail the same way.
    text = summary.text().encode("utf-8", "backslashreplace").decode("utf-8")
    room = budget - len(text.encode()) - 2

    def fits(value: Mapping[str, Any]) -> bool:
        return len(json.dumps(value, indent=1, default=str).encode()) <= room

    trimmed = trimmed_to_fit(summary.detail_type, shown, fits, into=_SNS, last=("reason",))
    body = f"{text}\n{json.dumps(trimmed, indent=1, default=str)}\n"
    if len(body.encode()) <= budget:
        return body
    body = f"{text}\n{json.dumps(trimmed, default=str)}\n"
    if len(body.encode()) <= budget:
        return body
    room = budget - len(_LEFT_OUT.encode())
    return text.encode()[:room].decode(errors="ignore") + _LEFT_OUT


_SNS = "SNS"  # said as left out to fit it: "(trimmed to fit SNS)"
_LEFT_OUT = "\n(the event's JSON detail is left out: even trimmed, it does not fit SNS's 256 KB)\n"


# Failures of a Publish after which SNS may have published the message: it went out whole, and its answer
# did not come back (botocore's names for them). Sent again, a slow SNS has it published once an attempt.
UNANSWERED_CODES = frozenset({"ReadTimeoutError", "ConnectionClosedError", "ResponseStreamingError"})
# Failures that say SNS published nothing: throttled, or never sent (any answer of 429 or 5xx too).
_NOT_PUBLISHED_CODES = frozenset(
    {
        "Throttled",
        "Throttling",
        "ThrottlingException",
        "TooManyRequestsException",
        "EndpointConnectionError",
        "ConnectTimeoutError",
        "ProxyConnectionError",
    }
)
PUBLISH_ATTEMPTS = 3


class SnsChannel:
    """Publishes events to one topic. Over a client that does not retry (`attempts=1`, as the notify
    function builds it), a Publish is tried `attempts` times while SNS says it published nothing (throttled,
    a 5xx, not reached), and never again in the invocation once it went out unanswered (it may have been
    published: Lambda's retries alone send it again, three times in all, as Slack's channel does). botocore's
    own retries sent it again at once: one event, published 15 times when SNS answered late."""

    name = "sns"
    PERMISSIONS = ("sns:Publish",)

    def __init__(
        self,
        client: Any,
        topic_arn: str,
        *,
        attempts: int = PUBLISH_ATTEMPTS,
        sleep: Callable[[float], None] = time.sleep,
    ) -> None:
        self._client = client
        self.topic_arn = topic_arn
        self.attempts = attempts
        self.sleep = sleep

    def send(self, summary: Summary, detail: Mapping[str, Any], *, sequence: int | None = None) -> None:
        """Publish; raises AwsCallError when it did not go, or may not have."""
        from botocore.exceptions import BotoCoreError, ClientError

        attributes = {
            "cluster_id": detail.get("cluster_id") or "-",
            "compute_node_group_id": detail.get("compute_node_group_id") or "-",
            "event": summary.detail_type,
            "severity": summary.severity,
        }
        if detail.get("compute_node_group_name"):  # a subscription's filter may name the group as people do
            attributes["compute_node_group_name"] = detail["compute_node_group_name"]
        request = {
            "TopicArn": self.topic_arn,
            "Subject": summary.subject,
            "Message": sns_message(summary, detail),
            "MessageAttributes": {
                key: {"DataType": "String", "StringValue": str(value)} for key, value in attributes.items()
            },
        }
        for attempt in range(1, self.attempts + 1):
            try:
                self._client.publish(**request)
                return
            except (ClientError, BotoCoreError) as exc:
                error = AwsCallError.from_exception("Publish", exc)
                if error.code in UNANSWERED_CODES:
                    raise AwsCallError(
                        "Publish",
                        error.code,
                        f"SNS did not answer the message it was sent ({error.message}); it may have been "
                        "published: not published again in this invocation",
                    ) from exc
                if not _not_published(error) or attempt == self.attempts:
                    raise error from exc
            self.sleep(0.5 * 2 ** (attempt - 1))


def _not_published(error: AwsCallError) -> bool:
    status = error.status
    return error.code in _NOT_PUBLISHED_CODES or (status is not None and (status == 429 or status >= 500))
