"""Who changed a group's configuration, and when (layout: `lifeguard.store.table`).

A change is kept under the fingerprint of the configuration it put in place, so the detection, which
knows the fingerprint of the configuration a loop runs on, finds who made it with one GetItem. A later
change to the same configuration replaces the record: it is the one that put the configuration back.
"""

from __future__ import annotations

import json
import logging
import zlib
from dataclasses import asdict
from typing import TYPE_CHECKING, Any, ClassVar, Literal

from lifeguard.bounds import clip
from lifeguard.store.table import (
    ConditionFailedError,
    Item,
    Table,
    decode_doc,
    encode_doc,
    group_key,
    item_key,
)
from lifeguard.values import frozen

if TYPE_CHECKING:
    from mypy_boto3_dynamodb import DynamoDBClient

__all__ = ["CHANGE_TTL_SECONDS", "ChangeRecord", "ChangeStore"]

logger = logging.getLogger("lifeguard")

CHANGE_TTL_SECONDS = 30 * 24 * 3600
CHANGE = "CHANGE#"
# A group's changes read at once: one a configuration it held in 30 days, far fewer in a real group.
CHANGES_READ_MAX = 200

ChangeSource = Literal["cloudtrail", "lifeguard", "unknown"]


@frozen
class ChangeRecord:
    """One change of a group's `nodeLifecycleActions`: the configuration it put in place (`fingerprint`),
    who made it (`arn`, CloudTrail's `userIdentity.arn`, None when the record named nobody), when (`at`,
    epoch ms) and through which call (`event_name`, `event_id`)."""

    cluster_id: str
    group_id: str
    fingerprint: str
    arn: str | None
    at: int
    event_name: str
    event_id: str
    source: ChangeSource = "cloudtrail"
    # The call carried no configuration: this one was read back from PCS after it (the call may have
    # changed something else), so a call that carried it is the better witness.
    read_back: bool = False

    def to_changed_by(self) -> dict[str, Any]:
        """The change as controller events carry it (`changed_by`: `{"arn", "at", "source"}`)."""
        return {"arn": self.arn, "at": self.at, "source": self.source}


def _record_of(item: Item) -> ChangeRecord | None:
    """The record an item holds; None for one this code did not write (edited by hand, or damaged), said
    once in the log: as good as no record, so no review or detection fails on it, retry after retry."""
    try:
        data = decode_doc(item)
        return ChangeRecord(
            cluster_id=str(data["cluster_id"]),
            group_id=str(data["group_id"]),
            fingerprint=str(data["fingerprint"]),
            arn=None if data.get("arn") is None else str(data["arn"]),
            at=int(data["at"]),
            event_name=str(data.get("event_name") or ""),
            event_id=str(data.get("event_id") or ""),
            source=data.get("source") if data.get("source") in ("cloudtrail", "lifeguard") else "unknown",
            read_back=data.get("read_back") is True,
        )
    except (KeyError, TypeError, ValueError, AttributeError, RecursionError, zlib.error) as exc:
        where = clip(str(item.get("sk", {}).get("S")), 200)
        logger.warning("change record %s passed over, it cannot be read: %s", where, clip(repr(exc), 300))
        return None


def _witness(change: ChangeRecord) -> tuple[bool, int]:
    """How well a record tells who put its configuration in place: one of a call that carried it over one
    read back, then the later."""
    return not change.read_back, change.at


def _witness_rank(change: ChangeRecord) -> int:
    """`_witness` as one number the table compares (a carried call above any read back, then the later:
    `at` is epoch ms, held below 2100 by the CloudTrail review's bounds)."""
    return (0 if change.read_back else _CARRIED) + max(0, change.at)


_CARRIED = 10**14  # above any epoch ms before the year 5000


class ChangeStore:
    """The configuration changes of each group, by the fingerprint of the configuration they put in place;
    each kept 30 days after it was made."""

    # What each method needs the table's policy to allow (a test holds template.yaml's roles to it).
    PERMISSIONS: ClassVar[dict[str, tuple[str, ...]]] = {
        "put": ("dynamodb:PutItem",),
        "find": ("dynamodb:GetItem",),
        "of_group": ("dynamodb:Query",),
    }

    def __init__(self, client: DynamoDBClient, table: str) -> None:
        self._table = Table(client, table)

    @property
    def table(self) -> str:
        """The table's name."""
        return self._table.name

    def put(self, change: ChangeRecord) -> None:
        """Keep `change`, unless a later change to the same configuration of the group is kept already
        (CloudTrail's records arrive in no promised order: the one delivered last is not the newest), or
        `change` was read back after a call and the kept one came with the configuration it put in place."""
        kept = self.find(change.cluster_id, change.group_id, change.fingerprint)
        if kept is not None and _witness(kept) > _witness(change):
            return
        rank = {"N": str(_witness_rank(change))}
        try:
            # On the kept one's rank too: a review of a later change may have kept it since the read above
            # (two reviews at once), and this one must not write over it. An item of an older release,
            # without its rank, was weighed by the read.
            self._table.put(
                {
                    **item_key(
                        group_key(change.cluster_id, change.group_id), f"{CHANGE}{change.fingerprint}"
                    ),
                    **encode_doc(json.dumps(asdict(change), separators=(",", ":"))),
                    "witness": rank,
                    "expires_at": {"N": str(change.at // 1000 + CHANGE_TTL_SECONDS)},
                },
                condition="attribute_not_exists(pk) OR attribute_not_exists(witness) OR witness < :rank",
                values={":rank": rank},
            )
        except ConditionFailedError:
            return  # a change as good or better is kept

    def find(self, cluster_id: str, group_id: str, fingerprint: str) -> ChangeRecord | None:
        """The last change that put the configuration `fingerprint` in place on the group, or None when
        none is known (made before Lifeguard watched, more than 30 days ago, or not through the API)."""
        item = self._table.get(item_key(group_key(cluster_id, group_id), f"{CHANGE}{fingerprint}"))
        return _record_of(item) if item is not None else None

    def of_group(self, cluster_id: str, group_id: str) -> tuple[list[ChangeRecord], bool]:
        """The group's kept changes, one a configuration (at most `CHANGES_READ_MAX`, in one Query, in the
        order of their keys), and whether that is all of them: the read did not stop at its bound, and every
        item it read could be decoded (one that cannot is left out, and may be a change in between)."""
        items = list(self._table.query(group_key(cluster_id, group_id), CHANGE, most=CHANGES_READ_MAX))
        kept = [change for item in items if (change := _record_of(item)) is not None]
        return kept, len(items) < CHANGES_READ_MAX and len(kept) == len(items)
