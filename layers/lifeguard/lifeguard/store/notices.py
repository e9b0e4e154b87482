"""Notify's items (layout: `lifeguard.store.table`): which (event, channel) pairs went out, how many
messages each episode had, and each webhook's pace."""

from __future__ import annotations

import contextlib
import os
from collections.abc import Callable
from typing import TYPE_CHECKING, ClassVar, Literal

from lifeguard.store.table import ConditionFailedError, Item, Table, group_key, item_key

if TYPE_CHECKING:
    from mypy_boto3_dynamodb import DynamoDBClient

__all__ = [
    "CLAIM_LEASE_SECONDS",
    "CLAIM_MARGIN_SECONDS",
    "NOTICE_TTL_SECONDS",
    "Claim",
    "Group",
    "NoticeStore",
]

NOTICE_TTL_SECONDS = 30 * 24 * 3600
# How long a claim holds while its message is being sent, at most: longer than the notify function may run
# (its Timeout, 600 s), so a live sender is never doubled, and short enough that the retry of an invocation
# Lambda stopped (at its timeout, in a long wait for Slack) takes it over instead of finding it "sent". A
# sender that knows when its invocation ends claims until then and CLAIM_MARGIN_SECONDS more (clocks
# apart): a claim it could not give back (its send failed, and so did the DeleteItem) then holds off no
# retry of Lambda's, a minute later or more.
CLAIM_LEASE_SECONDS = 650.0
CLAIM_MARGIN_SECONDS = 15.0
# Claims tried when the one that held it is given back between the claim and its read (its send failed).
CLAIM_ATTEMPTS = 3
Group = tuple[str, str]  # (cluster id, compute node group id) an event is about
Claim = Literal["claimed", "sent", "sending"]


class NoticeStore:
    """Which (event, channel) pairs went out, in Lifeguard's table; how many messages each episode had; and
    each webhook's pace."""

    PERMISSIONS: ClassVar[dict[str, tuple[str, ...]]] = {
        "claim": ("dynamodb:PutItem", "dynamodb:GetItem"),
        "sent": ("dynamodb:PutItem",),
        "unclaim": ("dynamodb:DeleteItem",),
        "sequence_of": ("dynamodb:GetItem", "dynamodb:UpdateItem", "dynamodb:PutItem"),
        "reserve_post": ("dynamodb:GetItem", "dynamodb:PutItem"),
        "hold_post": ("dynamodb:GetItem", "dynamodb:PutItem"),
        "held_for": ("dynamodb:GetItem",),
        "note_resolved": ("dynamodb:PutItem",),
        "resolved_revision": ("dynamodb:GetItem",),
        "note_going_on": ("dynamodb:PutItem",),
        "going_on_revision": ("dynamodb:GetItem",),
    }

    def __init__(self, client: DynamoDBClient, table: str, *, clock: Callable[[], float]) -> None:
        self._table = Table(client, table)
        self._clock = clock

    @property
    def table(self) -> str:
        """The table's name."""
        return self._table.name

    def claim(
        self, group: Group, key: str, channel: str, *, lease_seconds: float = CLAIM_LEASE_SECONDS
    ) -> Claim:
        """Claim sending `key` to `channel`, for `lease_seconds`: "claimed", or "sent" when it went
        out already, or "sending" while another invocation's claim holds. A claim given back between this
        one's refusal and its read (the other's send failed) is no message sent: it is claimed again. A
        claim whose answer was lost and that botocore sent again meets itself: it is known by its holder
        (one id a call), not taken for another invocation's."""
        where = item_key(group_key(*group), f"NOTICE#{key}#{channel}")
        holder = {"S": os.urandom(16).hex()}  # not uuid: 3-6 ms more of the notify function's cold start
        for _ in range(CLAIM_ATTEMPTS):
            now = self._clock()
            try:
                self._table.put(
                    {
                        **where,
                        "sending_until": {"N": f"{now + lease_seconds:.3f}"},
                        "holder": holder,
                        "expires_at": {"N": str(int(now) + NOTICE_TTL_SECONDS)},
                    },
                    condition="attribute_not_exists(pk) OR sending_until < :now",
                    values={":now": {"N": f"{now:.3f}"}},
                )
            except ConditionFailedError:
                held = self._table.get(where)
                if held is None:
                    continue  # given back since (its send failed): nothing went out, the claim is free
                if "sending_until" not in held:
                    return "sent"
                return "claimed" if held.get("holder") == holder else "sending"
            return "claimed"
        return "sending"  # given back and taken again meanwhile, each time: another invocation holds it

    def sent(self, group: Group, key: str, channel: str) -> None:
        """Note that `key` went out to `channel`: the claim holds for good (until it expires)."""
        self._table.put(
            {
                **item_key(group_key(*group), f"NOTICE#{key}#{channel}"),
                "expires_at": {"N": str(int(self._clock()) + NOTICE_TTL_SECONDS)},
            }
        )

    def unclaim(self, group: Group, key: str, channel: str) -> None:
        """Give a claim back after the send failed, so a retry sends it."""
        self._table.delete(item_key(group_key(*group), f"NOTICE#{key}#{channel}"))

    def reserve_post(
        self, webhook_key: str, interval_seconds: float, max_wait: float | None = None, attempts: int = 32
    ) -> float | None:
        """Take the webhook's next free slot, at least `interval_seconds` after the one taken before it by any
        invocation; returns the seconds to wait for it. The slot is claimed with a conditional write, so
        two concurrent senders never get the same one. None, and no slot taken, when the next free one is
        more than `max_wait` seconds away (the invocation could not wait for it: a slot it took and never
        used would hold up every sender after it)."""
        key = item_key(f"WEBHOOK#{webhook_key}", "PACE")
        for _ in range(attempts):
            now = self._clock()
            item = self._table.get(key)
            taken = item["next_at"]["N"] if item else None
            slot = max(now, float(taken) if taken is not None else now)
            if max_wait is not None and slot - now > max_wait:
                return None
            held = float(item["held_until"]["N"]) if item and "held_until" in item else None
            try:
                self._put_pace(key, taken, slot + interval_seconds, held, now)
            except ConditionFailedError:
                continue  # another sender took that slot: take the next one
            return slot - now
        return interval_seconds  # contended beyond reason: keep at least the interval

    def hold_post(self, webhook_key: str, seconds: float, attempts: int = 32) -> None:
        """Take no message on the webhook for `seconds` from now (Slack's Retry-After): its next free slot
        is no earlier than that, and `held_until` says so to a sender whose slot was taken before. Holds
        from several senders are merged (the latest end stands), never added up."""
        key = item_key(f"WEBHOOK#{webhook_key}", "PACE")
        for _ in range(attempts):
            now = self._clock()
            item = self._table.get(key)
            taken = item["next_at"]["N"] if item else None
            until = max(now + seconds, float(item.get("held_until", {}).get("N", 0)) if item else 0.0)
            slot = max(until, float(taken) if taken is not None else until)
            try:
                self._put_pace(key, taken, slot, until, now)
            except ConditionFailedError:
                continue  # a slot was taken meanwhile: merge with what is there now
            return

    def _put_pace(
        self, key: Item, taken: str | None, next_at: float, held_until: float | None, now: float
    ) -> None:
        """Write the webhook's pace over the `next_at` it was read with (`taken`; none: no item yet), or
        raise ConditionFailedError when another sender moved it since."""
        held = {"held_until": {"N": f"{held_until:.3f}"}} if held_until is not None else {}
        self._table.put(
            {**key, "next_at": {"N": f"{next_at:.3f}"}, **held, "expires_at": {"N": str(int(now) + 3600)}},
            condition="next_at = :taken" if taken is not None else "attribute_not_exists(pk)",
            values={":taken": {"N": taken}} if taken is not None else None,
        )

    def held_for(self, webhook_key: str) -> float:
        """Seconds from now the webhook takes no message for (a Retry-After's rest; 0 when none holds)."""
        item = self._table.get(item_key(f"WEBHOOK#{webhook_key}", "PACE"))
        until = float(item.get("held_until", {}).get("N", 0)) if item else 0.0
        return max(0.0, until - self._clock())

    def note_resolved(self, group: Group, episode_id: str, revision: int) -> None:
        """Note that the episode was resolved at `revision` (the highest noted stands): a detection of it
        at that revision or before that arrives later (a retry, a delivery out of order) is told as late."""
        self._note(group, episode_id, "RESOLVED", revision)

    def resolved_revision(self, group: Group, episode_id: str) -> int | None:
        """The revision at which the episode was noted resolved (`note_resolved`), if it was."""
        return self._noted(group, episode_id, "RESOLVED")

    def note_going_on(self, group: Group, episode_id: str, revision: int) -> None:
        """Note that the episode was told going on (detected, contained) at `revision` (the highest noted
        stands): a resolution of an earlier revision that arrives later is told as late."""
        self._note(group, episode_id, "GOING_ON", revision)

    def going_on_revision(self, group: Group, episode_id: str) -> int | None:
        """The highest revision at which the episode was noted going on (`note_going_on`), if it was."""
        return self._noted(group, episode_id, "GOING_ON")

    def _note(self, group: Group, episode_id: str, what: str, revision: int) -> None:
        with contextlib.suppress(ConditionFailedError):  # noted at this revision or a later one already
            self._table.put(
                {
                    **item_key(group_key(*group), f"EPISODE#{episode_id}#{what}"),
                    "revision": {"N": str(revision)},
                    "expires_at": {"N": str(int(self._clock()) + NOTICE_TTL_SECONDS)},
                },
                condition="attribute_not_exists(pk) OR revision < :revision",
                values={":revision": {"N": str(revision)}},
            )

    def _noted(self, group: Group, episode_id: str, what: str) -> int | None:
        item = self._table.get(item_key(group_key(*group), f"EPISODE#{episode_id}#{what}"))
        text = item.get("revision", {}).get("N") if item else None
        return int(text) if isinstance(text, str) and text.isdigit() and len(text) <= 9 else None

    def sequence_of(self, group: Group, episode_id: str, key: str) -> int:
        """The number of the episode's message `key` (1, 2, …), so readers see the messages as one story:
        the next one the first time it is asked for, the same one after (a retry of another channel takes
        no number)."""
        expires = int(self._clock()) + NOTICE_TTL_SECONDS
        numbered = item_key(group_key(*group), f"EPISODE#{episode_id}#NUMBER#{key}")
        held = self._table.get(numbered)
        if held is not None:
            return int(held["number"]["N"])
        counter = item_key(group_key(*group), f"EPISODE#{episode_id}#NOTICES")
        number = self._table.add(counter, "messages", expires_at=expires)
        try:
            self._table.put(
                {**numbered, "number": {"N": str(number)}, "expires_at": {"N": str(expires)}},
                condition="attribute_not_exists(pk)",
            )
        except ConditionFailedError:  # numbered by a concurrent invocation first: its number stands
            held = self._table.get(numbered)
            return int(held["number"]["N"]) if held is not None else number
        return number
