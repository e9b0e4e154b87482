"""The notify Lambda's logic: every `lifeguard` event to every channel, each channel on its own.

A channel that fails never blocks another: its failure is counted and, once the other channels are done,
raised (`NotificationError`) so the Lambda retries the event. Each (event, channel) is claimed in the
table before sending, so a retried or re-delivered event reaches a channel that already has it no more.
"""

from __future__ import annotations

import hashlib
import json
import logging
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, ClassVar, Protocol

from lifeguard.bounds import clip
from lifeguard.errors import AwsCallError, LifeguardError
from lifeguard.event_contract import DETAIL_TYPES, clean_detail
from lifeguard.group_state import group_key
from lifeguard.metrics import Metric, uncounted
from lifeguard.notify.summary import Summary, summarize

__all__ = ["Channel", "NoticeStore", "NotificationError", "Notifier", "NotifyResult"]

logger = logging.getLogger("lifeguard")
NOTICE_TTL_SECONDS = 30 * 24 * 3600


class NotificationError(LifeguardError):
    """Some channel did not get the event after its retries; the others did."""


class Channel(Protocol):
    """A place notifications go."""

    name: str

    def send(self, summary: Summary, detail: Mapping[str, Any], *, sequence: int | None = None) -> None:
        """Deliver one event (the `sequence`-th message of its episode) or raise."""


class NoticeStore:
    """Which (event, channel) pairs went out, in Lifeguard's table; how many messages each episode had; and
    each webhook's pace."""

    PERMISSIONS: ClassVar[dict[str, tuple[str, ...]]] = {
        "claim": ("dynamodb:PutItem",),
        "unclaim": ("dynamodb:DeleteItem",),
        "next_sequence": ("dynamodb:UpdateItem",),
        "reserve_post": ("dynamodb:GetItem", "dynamodb:PutItem"),
    }

    def __init__(self, client: Any, table: str, *, clock: Callable[[], float]) -> None:
        self._client = client
        self.table = table
        self._clock = clock

    def claim(self, pk: str, key: str, channel: str) -> bool:
        """Claim sending `key` to `channel`; False when it was sent (or is being sent) already."""
        from botocore.exceptions import ClientError

        try:
            self._client.put_item(
                TableName=self.table,
                Item={
                    "pk": {"S": pk},
                    "sk": {"S": f"NOTICE#{key}#{channel}"},
                    "expires_at": {"N": str(int(self._clock()) + NOTICE_TTL_SECONDS)},
                },
                ConditionExpression="attribute_not_exists(pk)",
            )
        except ClientError as exc:
            if exc.response.get("Error", {}).get("Code") == "ConditionalCheckFailedException":
                return False
            raise AwsCallError.from_exception("PutItem", exc) from exc
        return True

    def unclaim(self, pk: str, key: str, channel: str) -> None:
        """Give a claim back after the send failed, so a retry sends it."""
        self._client.delete_item(
            TableName=self.table, Key={"pk": {"S": pk}, "sk": {"S": f"NOTICE#{key}#{channel}"}}
        )

    def reserve_post(self, webhook_key: str, interval_seconds: float, attempts: int = 32) -> float:
        """Take the webhook's next free slot, at least `interval_seconds` after the one taken before it by any
        invocation; returns the seconds to wait for it. The slot is claimed with a conditional write, so
        two concurrent senders never get the same one."""
        from botocore.exceptions import ClientError

        key = {"pk": {"S": f"WEBHOOK#{webhook_key}"}, "sk": {"S": "PACE"}}
        for _ in range(attempts):
            now = self._clock()
            item = self._client.get_item(TableName=self.table, Key=key, ConsistentRead=True).get("Item")
            taken = item["next_at"]["N"] if item else None
            slot = max(now, float(taken) if taken is not None else now)
            condition = (
                {
                    "ConditionExpression": "next_at = :taken",
                    "ExpressionAttributeValues": {":taken": {"N": taken}},
                }
                if taken is not None
                else {"ConditionExpression": "attribute_not_exists(pk)"}
            )
            try:
                self._client.put_item(
                    TableName=self.table,
                    Item={
                        **key,
                        "next_at": {"N": f"{slot + interval_seconds:.3f}"},
                        "expires_at": {"N": str(int(now) + 3600)},
                    },
                    **condition,
                )
            except ClientError as exc:
                if exc.response.get("Error", {}).get("Code") == "ConditionalCheckFailedException":
                    continue  # another sender took that slot: take the next one
                raise AwsCallError.from_exception("PutItem", exc) from exc
            return slot - now
        return interval_seconds  # contended beyond reason: keep at least the interval

    def next_sequence(self, pk: str, episode_id: str) -> int:
        """The number of this episode's next message (1, 2, …), so readers see the messages as one story."""
        response = self._client.update_item(
            TableName=self.table,
            Key={"pk": {"S": pk}, "sk": {"S": f"EPISODE#{episode_id}#NOTICES"}},
            UpdateExpression="ADD messages :one SET expires_at = :ttl",
            ExpressionAttributeValues={
                ":one": {"N": "1"},
                ":ttl": {"N": str(int(self._clock()) + NOTICE_TTL_SECONDS)},
            },
            ReturnValues="UPDATED_NEW",
        )
        return int(response["Attributes"]["messages"]["N"])


@dataclass
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


class Notifier:
    """Fans one controller event out to the channels."""

    def __init__(
        self, channels: Sequence[Channel], notices: NoticeStore | None = None, *, metric: Metric | None = None
    ) -> None:
        self.channels = list(channels)
        self.notices = notices
        self.metric = metric or uncounted

    def handle_event(self, event: Mapping[str, Any]) -> NotifyResult:
        """One EventBridge event (`detail-type`, `detail`); raises NotificationError if a channel failed."""
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
        if problems:
            self.metric("InvalidDetailFields", len(problems))
            logger.warning("%s with invalid fields: %s", detail_type, clip("; ".join(problems), 500))
        summary = summarize(detail_type, detail, problems=problems)
        pk = group_key(str(detail["cluster_id"] or "-"), str(detail["compute_node_group_id"] or "-"))
        key = _notice_key(detail_type, detail, raw)
        sequence: int | None = None
        for channel in self.channels:
            try:
                if self.notices is not None and not self.notices.claim(pk, key, channel.name):
                    result.already_sent.append(channel.name)
                    continue
                if sequence is None and self.notices is not None and detail["episode_id"]:
                    sequence = self.notices.next_sequence(pk, str(detail["episode_id"]))
                channel.send(summary, detail, sequence=sequence)
                result.sent.append(channel.name)
                self.metric("NotificationsSent", 1)
            except Exception as exc:  # noqa: BLE001 (one channel's failure must never stop another)
                result.failed[channel.name] = str(exc)
                self.metric("NotificationFailures", 1)
                logger.error("%s notification of %s failed: %s", channel.name, key, exc)
                if self.notices is not None:
                    try:
                        self.notices.unclaim(pk, key, channel.name)
                    except Exception:
                        logger.exception("could not release the %s claim of %s", channel.name, key)
        if result.failed:
            failed = ", ".join(f"{name} ({why})" for name, why in result.failed.items())
            raise NotificationError(f"{key}: not delivered to {failed}; the event will be retried")
        return result


def _notice_key(detail_type: str, detail: Mapping[str, Any], raw: Mapping[str, Any]) -> str:
    """What makes an event the same event again: its episode, type and revision; for an event without a
    valid episode id (a refused detection), its content."""
    if detail["episode_id"]:
        return f"{detail['episode_id']}:{detail_type}:{detail.get('revision') or 1}"
    digest = hashlib.sha256(json.dumps(raw, sort_keys=True, default=str).encode()).hexdigest()[:24]
    return f"-:{detail_type}:{digest}"
