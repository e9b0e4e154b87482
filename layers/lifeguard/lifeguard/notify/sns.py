"""SNS: one topic; subject under 100 characters; attributes subscribers can filter on; the readable
summary followed by the JSON detail, kept within SNS's 256 KB."""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

from lifeguard.errors import AwsCallError
from lifeguard.notify.summary import Summary

__all__ = ["SNS_MAX_BYTES", "SnsChannel", "sns_message"]

SNS_MAX_BYTES = 256 * 1024
_HEADROOM_BYTES = 2048  # subject and attributes count towards the limit too


def sns_message(summary: Summary, detail: Mapping[str, Any]) -> str:
    """The body: summary, then the detail as JSON, trimmed (log tail, configs, diff, failures, risks,
    reason) to fit. Should it still not fit, the JSON is left out whole, and said: a subscriber parses it,
    and half of it would not parse."""
    budget = SNS_MAX_BYTES - _HEADROOM_BYTES
    trimmed: dict[str, Any] = dict(detail)
    if "undo" in trimmed:
        trimmed["undo"] = summary.undo  # the command the summary made, never the event's text
    # Text that is not Unicode (a lone surrogate in a value the event carries as it came) is shown as
    # its escape: SNS takes UTF-8 only, and a retry would fail the same way.
    text = summary.text().encode("utf-8", "backslashreplace").decode("utf-8")
    for step in ("log_tail", "config_before", "config_after", "diff", "failures", "risks", "reason"):
        body = f"{text}\n{json.dumps(trimmed, indent=1, default=str)}\n"
        if len(body.encode()) <= budget:
            return body
        if step == "log_tail" and isinstance(trimmed.get("suspect"), Mapping):
            trimmed["suspect"] = {**trimmed["suspect"], "log_tail": "(trimmed to fit SNS)"}
        elif step in trimmed:
            trimmed[step] = "(trimmed to fit SNS)"
    body = f"{text}\n{json.dumps(trimmed, default=str)}\n"
    if len(body.encode()) <= budget:
        return body
    room = budget - len(_LEFT_OUT.encode())
    return text.encode()[:room].decode(errors="ignore") + _LEFT_OUT


_LEFT_OUT = "\n(the event's JSON detail is left out: even trimmed, it does not fit SNS's 256 KB)\n"


class SnsChannel:
    """Publishes events to one topic."""

    name = "sns"
    PERMISSIONS = ("sns:Publish",)

    def __init__(self, client: Any, topic_arn: str) -> None:
        self._client = client
        self.topic_arn = topic_arn

    def send(self, summary: Summary, detail: Mapping[str, Any], *, sequence: int | None = None) -> None:
        """Publish (botocore retries throttling and 5xx); raises AwsCallError when it did not go."""
        from botocore.exceptions import BotoCoreError, ClientError

        attributes = {
            "cluster_id": detail.get("cluster_id") or "-",
            "compute_node_group_id": detail.get("compute_node_group_id") or "-",
            "event": summary.detail_type,
            "severity": summary.severity,
        }
        try:
            self._client.publish(
                TopicArn=self.topic_arn,
                Subject=summary.subject,
                Message=sns_message(summary, detail),
                MessageAttributes={
                    key: {"DataType": "String", "StringValue": str(value)}
                    for key, value in attributes.items()
                },
            )
        except (ClientError, BotoCoreError) as exc:
            raise AwsCallError.from_exception("Publish", exc) from exc
