"""Remediation's items of a group (layout: `lifeguard.store.table`): its lock, ledger, decisions and audit.

The ledger and decisions are written only by the holder of the lock; the lock itself is conditional.
"""

from __future__ import annotations

import contextlib
import uuid
from typing import TYPE_CHECKING, Any, ClassVar

from lifeguard.errors import AwsCallError
from lifeguard.remediation.records import AuditEntry, Decision, Ledger
from lifeguard.schema import Model
from lifeguard.store.groups import reading
from lifeguard.store.table import (
    ConditionFailedError,
    Item,
    Table,
    decode_doc,
    encode_doc,
    group_key,
    item_key,
    stored_bytes,
)

if TYPE_CHECKING:
    from mypy_boto3_dynamodb import DynamoDBClient

__all__ = ["AUDIT_TTL_SECONDS", "RemediationStore"]

AUDIT_TTL_SECONDS = 90 * 24 * 3600
_LEDGER_MAX_BYTES = 300 * 1024  # compressed: the ledger item never nears DynamoDB's 400 KB
LOCK = "LOCK"
LEDGER = "LEDGER"
AUDIT = "AUDIT#"


def _decision_key(episode_id: str, revision: int) -> str:
    return f"DECISION#{episode_id}#{revision:04d}"


class RemediationStore:
    """Lock, ledger, decisions and audit of the groups, over one DynamoDB client."""

    # What each method needs the table's policy to allow (a test holds the remediate role to the methods
    # its code calls): the lock is a conditional put and delete, the documents are items, and the audit
    # trail is read back by a query (only the operator's `history` does).
    PERMISSIONS: ClassVar[dict[str, tuple[str, ...]]] = {
        "acquire": ("dynamodb:PutItem",),
        "release": ("dynamodb:DeleteItem",),
        "holds": ("dynamodb:GetItem",),
        "ledger": ("dynamodb:GetItem",),
        "save_ledger": ("dynamodb:PutItem",),
        "decision": ("dynamodb:GetItem",),
        "save_decision": ("dynamodb:PutItem",),
        "save_audited_decision": ("dynamodb:PutItem",),  # one TransactWriteItems of two puts
        "audit": ("dynamodb:PutItem",),
        "history": ("dynamodb:Query",),
    }

    def __init__(self, client: DynamoDBClient, table: str) -> None:
        self._table = Table(client, table)

    @property
    def table(self) -> str:
        """The table's name."""
        return self._table.name

    @staticmethod
    def _key(cluster_id: str, group_id: str, sk: str) -> Item:
        return item_key(group_key(cluster_id, group_id), sk)

    # -- the lock --

    def acquire(
        self,
        cluster_id: str,
        group_id: str,
        holder: str,
        now: float,
        lease_seconds: float,
        *,
        skew_seconds: float = 0.0,
    ) -> bool:
        """Take the group's lock (or one whose lease ran out); False when someone else holds it. A taker
        whose clock may be ahead of the Lambdas' (an operator's machine) gives `skew_seconds`: a lease is
        still held that long past its end."""
        try:
            self._table.put(
                {
                    **self._key(cluster_id, group_id, LOCK),
                    "holder": {"S": holder},
                    "lease_until": {"N": f"{now + lease_seconds:.3f}"},
                    "expires_at": {"N": str(int(now + lease_seconds + 3600))},
                },
                condition="attribute_not_exists(pk) OR lease_until < :now OR holder = :me",
                values={":now": {"N": f"{now - skew_seconds:.3f}"}, ":me": {"S": holder}},
            )
        except ConditionFailedError:
            return False
        return True

    def holds(self, cluster_id: str, group_id: str, holder: str) -> bool:
        """Whether `holder` still holds the group's lock (no one took it over once its lease ran out)."""
        item = self._table.get(self._key(cluster_id, group_id, LOCK))
        return item is not None and item.get("holder", {}).get("S") == holder

    def release(self, cluster_id: str, group_id: str, holder: str) -> None:
        """Give the lock back (a lock taken over by someone else after its lease is left alone; a release
        that fails is let go too: the lease runs out by itself)."""
        with contextlib.suppress(ConditionFailedError, AwsCallError):
            self._table.delete(
                self._key(cluster_id, group_id, LOCK), condition="holder = :me", values={":me": {"S": holder}}
            )

    # -- documents --

    def _get(self, cluster_id: str, group_id: str, sk: str) -> Any:
        item = self._table.get(self._key(cluster_id, group_id, sk))
        return decode_doc(item) if item else None

    def _put(self, cluster_id: str, group_id: str, sk: str, doc: Model, ttl: int | None = None) -> None:
        self._table.put(self._item(cluster_id, group_id, sk, doc, ttl))

    def _item(self, cluster_id: str, group_id: str, sk: str, doc: Model, ttl: int | None = None) -> Item:
        item = {**self._key(cluster_id, group_id, sk), **encode_doc(doc.model_dump_json())}
        if ttl is not None:
            item["expires_at"] = {"N": str(ttl)}
        return item

    def ledger(self, cluster_id: str, group_id: str) -> Ledger:
        """The group's ledger (empty when Lifeguard never changed it); UnreadableStateError for an item no
        release of Lifeguard wrote (edited by hand, or damaged): nothing Lifeguard did to the group can be
        known, and what needs it holds off (a remediation above all), but no other group."""
        with reading("ledger", group_id):  # the table's own errors are LifeguardErrors: they pass
            doc = self._get(cluster_id, group_id, LEDGER)
            return Ledger.model_validate(doc) if doc else Ledger()

    def save_ledger(self, cluster_id: str, group_id: str, ledger: Ledger) -> None:
        """Write the ledger (by the lock holder only), its oldest changes let go while it is too big (when
        they were made is kept: `Ledger.let_go_oldest`)."""
        ledger.keep_recent()
        while len(ledger.changes) > 1 and stored_bytes(ledger.model_dump_json()) > _LEDGER_MAX_BYTES:
            ledger.let_go_oldest()
        self._put(cluster_id, group_id, LEDGER, ledger)

    def decision(self, cluster_id: str, group_id: str, episode_id: str, revision: int) -> Decision | None:
        """The decision taken on a detection, if any; UnreadableStateError for an item no release of
        Lifeguard wrote (as `ledger`)."""
        with reading("decision", group_id):
            doc = self._get(cluster_id, group_id, _decision_key(episode_id, revision))
            return Decision.model_validate(doc) if doc else None

    def save_decision(
        self, cluster_id: str, group_id: str, detection: tuple[str, int], *, decision: Decision, now: float
    ) -> None:
        """Write the decision on a detection (episode id, revision), by the lock holder only."""
        key = _decision_key(*detection)
        self._put(cluster_id, group_id, key, decision, int(now + AUDIT_TTL_SECONDS))

    def audit(self, cluster_id: str, group_id: str, entry: AuditEntry) -> None:
        """Append to the group's audit trail."""
        self._table.put(self._audit_item(cluster_id, group_id, entry))

    def save_audited_decision(
        self,
        cluster_id: str,
        group_id: str,
        detection: tuple[str, int],
        *,
        decision: Decision,
        entry: AuditEntry,
        now: float,
    ) -> None:
        """Write the decision on a detection and its line in the audit trail together (one transaction):
        a retry after either failed finds no decision, decides again and audits once, where a trail
        written before a decision that failed got the same change twice."""
        key = _decision_key(*detection)
        decided = self._item(cluster_id, group_id, key, decision, int(now + AUDIT_TTL_SECONDS))
        self._table.write_together(
            [("Put", {"Item": self._audit_item(cluster_id, group_id, entry)}), ("Put", {"Item": decided})]
        )

    def _audit_item(self, cluster_id: str, group_id: str, entry: AuditEntry) -> Item:
        # Entries of the same millisecond (duplicates arriving together) must not overwrite each other.
        where = f"{entry.episode_id or '-'}#{entry.revision or 0}#{entry.decision}#{uuid.uuid4().hex[:8]}"
        sk = f"{AUDIT}{int(entry.at * 1000):013d}#{where}"
        return self._item(cluster_id, group_id, sk, entry, int(entry.at + AUDIT_TTL_SECONDS))

    def history(self, cluster_id: str, group_id: str, *, last: int | None = None) -> list[AuditEntry]:
        """The group's audit trail, oldest first (only the `last` entries when given)."""
        items = self._table.query(group_key(cluster_id, group_id), AUDIT, last=last)
        found = [AuditEntry.model_validate(decode_doc(item)) for item in items]
        return found[::-1] if last is not None else found
