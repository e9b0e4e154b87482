"""What remediation remembers per compute node group, in Lifeguard's table next to the group's state.

    sk = LOCK                        one remediation of the group at a time (a lease with an expiry)
    sk = LEDGER                      changes intended and applied (cooldown, daily cap, escalation, undo)
    sk = DECISION#<episode>#<rev>    the decision taken on one detection (duplicates are answered from it)
    sk = AUDIT#<time ms>#<episode>#<rev>#…  the audit trail: every decision with the config before and after

The ledger and decisions are written only by the holder of the lock; the lock itself is conditional.
A change is written to the ledger as `pending` (with its clientToken) before PCS is asked to make it, and
marked `applied` once PCS took it, so a change whose confirmation was lost is recognised on the retry.
Documents are JSON (`doc`), or zlib-compressed JSON (`docz`) when large, so an item with two full
lifecycle configurations stays far below DynamoDB's 400 KB.
"""

from __future__ import annotations

import contextlib
import json
import uuid
import zlib
from typing import Any, ClassVar, Literal

from pydantic import BaseModel, ConfigDict, Field

from lifeguard.errors import AwsCallError
from lifeguard.group_state import group_key

__all__ = ["AUDIT_TTL_SECONDS", "AppliedChange", "AuditEntry", "Decision", "Ledger", "RemediationStore"]

AUDIT_TTL_SECONDS = 90 * 24 * 3600
_COMPRESS_FROM_BYTES = 32 * 1024
_LEDGER_MAX_BYTES = 300 * 1024  # compressed: the ledger item never nears DynamoDB's 400 KB
ChangeStatus = Literal["pending", "applied", "abandoned"]


class _Model(BaseModel):
    model_config = ConfigDict(extra="ignore")


class AppliedChange(_Model):
    """A configuration change Lifeguard made (or an undo of one). `pending` from just before PCS is asked
    until PCS took it (`applied`); `abandoned` when someone else changed the group before a pending change
    could be confirmed."""

    at: float
    episode_id: str
    revision: int
    action: str
    config_before: dict[str, Any] | None
    config_after: dict[str, Any] | None
    fingerprint_before: str
    fingerprint_after: str
    modified_at_after: int | None = None
    undone_at: float | None = None
    status: ChangeStatus = "applied"
    client_token: str | None = None
    mode: str | None = None
    reason: str | None = None

    @property
    def counts(self) -> bool:
        """True for a change that was, or may have been, made by remediation (undos and abandoned intents
        are not)."""
        return self.action != "undo" and self.status != "abandoned"


class Ledger(_Model):
    """The changes Lifeguard made, or set out to make, to one group."""

    changes: list[AppliedChange] = Field(default_factory=list)

    def applied_since(self, since: float) -> list[AppliedChange]:
        """Changes made (or pending) at or after `since` (undos excluded)."""
        return [c for c in self.changes if c.at >= since and c.counts]

    def of_episode(self, episode_id: str) -> list[AppliedChange]:
        """The changes made (or pending) for one episode, oldest first."""
        return [c for c in self.changes if c.episode_id == episode_id and c.counts]

    def intent(self, episode_id: str, revision: int) -> AppliedChange | None:
        """The change set out for one detection (episode, revision), pending or applied, if any."""
        return next(
            (
                c
                for c in reversed(self.changes)
                if (c.episode_id, c.revision) == (episode_id, revision) and c.counts
            ),
            None,
        )

    def keep_recent(self, limit: int = 50) -> None:
        """Bound the item: the last `limit` changes are plenty for a day's cap and an undo."""
        self.changes = self.changes[-limit:]


class Decision(_Model):
    """The outcome of one detection (episode, revision): events published and how often it came."""

    status: str  # applied | skipped | failed
    events: list[dict[str, Any]] = Field(default_factory=list)
    published: bool = False
    deliveries: int = 1


class AuditEntry(_Model):
    """One line of a group's audit trail."""

    at: float
    decision: str  # applied | skipped | failed | undo | duplicate
    episode_id: str | None = None
    revision: int | None = None
    mode: str | None = None
    action: str | None = None
    dry_run: bool = False
    reason: str | None = None
    config_before: dict[str, Any] | None = None
    config_after: dict[str, Any] | None = None
    diff: list[dict[str, Any]] = Field(default_factory=list)
    actor: str = "lifeguard"


class RemediationStore:
    """Lock, ledger, decisions and audit of the groups, over one DynamoDB client."""

    # What each method needs the table's policy to allow (a test holds the remediate role to the methods
    # its code calls): the lock is a conditional put and delete, the documents are items, and the audit
    # trail is read back by a query (only the operator's `history` does).
    PERMISSIONS: ClassVar[dict[str, tuple[str, ...]]] = {
        "acquire": ("dynamodb:PutItem",),
        "release": ("dynamodb:DeleteItem",),
        "ledger": ("dynamodb:GetItem",),
        "save_ledger": ("dynamodb:PutItem",),
        "decision": ("dynamodb:GetItem",),
        "save_decision": ("dynamodb:PutItem",),
        "audit": ("dynamodb:PutItem",),
        "history": ("dynamodb:Query",),
    }

    def __init__(self, client: Any, table: str) -> None:
        self._client = client
        self.table = table

    def _key(self, cluster_id: str, group_id: str, sk: str) -> dict[str, Any]:
        return {"pk": {"S": group_key(cluster_id, group_id)}, "sk": {"S": sk}}

    def _call(self, operation: str, **request: Any) -> Any:
        from botocore.exceptions import BotoCoreError, ClientError

        method = getattr(self._client, _snake(operation))
        try:
            return method(TableName=self.table, **request)
        except ClientError as exc:
            if exc.response.get("Error", {}).get("Code") == "ConditionalCheckFailedException":
                raise
            raise AwsCallError.from_exception(operation, exc) from exc
        except BotoCoreError as exc:
            raise AwsCallError.from_exception(operation, exc) from exc

    # -- the lock --

    def acquire(self, cluster_id: str, group_id: str, holder: str, now: float, lease_seconds: float) -> bool:
        """Take the group's lock (or one whose lease ran out); False when someone else holds it."""
        from botocore.exceptions import ClientError

        try:
            self._call(
                "PutItem",
                Item={
                    **self._key(cluster_id, group_id, "LOCK"),
                    "holder": {"S": holder},
                    "lease_until": {"N": f"{now + lease_seconds:.3f}"},
                    "expires_at": {"N": str(int(now + lease_seconds + 3600))},
                },
                ConditionExpression="attribute_not_exists(pk) OR lease_until < :now OR holder = :me",
                ExpressionAttributeValues={":now": {"N": f"{now:.3f}"}, ":me": {"S": holder}},
            )
        except ClientError:
            return False
        return True

    def release(self, cluster_id: str, group_id: str, holder: str) -> None:
        """Give the lock back (a lock taken over by someone else after its lease is left alone)."""
        from botocore.exceptions import ClientError

        with contextlib.suppress(ClientError):
            self._call(
                "DeleteItem",
                Key=self._key(cluster_id, group_id, "LOCK"),
                ConditionExpression="holder = :me",
                ExpressionAttributeValues={":me": {"S": holder}},
            )

    # -- documents --

    def _get(self, cluster_id: str, group_id: str, sk: str) -> dict[str, Any] | None:
        item = self._call("GetItem", Key=self._key(cluster_id, group_id, sk), ConsistentRead=True).get("Item")
        return _doc_of(item) if item else None

    def _put(self, cluster_id: str, group_id: str, sk: str, doc: BaseModel, ttl: int | None = None) -> None:
        item = {**self._key(cluster_id, group_id, sk), **_doc_attribute(doc.model_dump_json())}
        if ttl is not None:
            item["expires_at"] = {"N": str(ttl)}
        self._call("PutItem", Item=item)

    def ledger(self, cluster_id: str, group_id: str) -> Ledger:
        """The group's ledger (empty when Lifeguard never changed it)."""
        doc = self._get(cluster_id, group_id, "LEDGER")
        return Ledger.model_validate(doc) if doc else Ledger()

    def save_ledger(self, cluster_id: str, group_id: str, ledger: Ledger) -> None:
        """Write the ledger (by the lock holder only), its oldest changes let go while it is too big."""
        ledger.keep_recent()
        while len(ledger.changes) > 1 and _stored_bytes(ledger.model_dump_json()) > _LEDGER_MAX_BYTES:
            ledger.changes = ledger.changes[1:]
        self._put(cluster_id, group_id, "LEDGER", ledger)

    def decision(self, cluster_id: str, group_id: str, episode_id: str, revision: int) -> Decision | None:
        """The decision taken on a detection, if any."""
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
        # Entries of the same millisecond (duplicates arriving together) must not overwrite each other.
        where = f"{entry.episode_id or '-'}#{entry.revision or 0}#{entry.decision}#{uuid.uuid4().hex[:8]}"
        sk = f"AUDIT#{int(entry.at * 1000):013d}#{where}"
        self._put(cluster_id, group_id, sk, entry, int(entry.at + AUDIT_TTL_SECONDS))

    def history(self, cluster_id: str, group_id: str, *, last: int | None = None) -> list[AuditEntry]:
        """The group's audit trail, oldest first (only the `last` entries when given)."""
        request: dict[str, Any] = {
            "KeyConditionExpression": "pk = :pk AND begins_with(sk, :prefix)",
            "ExpressionAttributeValues": {
                ":pk": {"S": group_key(cluster_id, group_id)},
                ":prefix": {"S": "AUDIT#"},
            },
        }
        if last is not None:
            request.update(ScanIndexForward=False, Limit=last)
        found: list[AuditEntry] = []
        while True:
            page = self._call("Query", **request)
            found.extend(AuditEntry.model_validate(_doc_of(item)) for item in page.get("Items", []))
            if last is not None:
                return found[::-1]
            if "LastEvaluatedKey" not in page:
                return found
            request["ExclusiveStartKey"] = page["LastEvaluatedKey"]


def _doc_attribute(text: str) -> dict[str, Any]:
    """A document as the item stores it: JSON text, or compressed once it is large."""
    if len(text) < _COMPRESS_FROM_BYTES:
        return {"doc": {"S": text}}
    return {"docz": {"B": zlib.compress(text.encode(), 6)}}


def _stored_bytes(text: str) -> int:
    (value,) = _doc_attribute(text).values()
    return len(value.get("S") or value["B"])


def _doc_of(item: dict[str, Any]) -> Any:
    if "docz" in item:
        return json.loads(zlib.decompress(item["docz"]["B"]))
    return json.loads(item["doc"]["S"])


def _decision_key(episode_id: str, revision: int) -> str:
    return f"DECISION#{episode_id}#{revision:04d}"


def _snake(operation: str) -> str:
    return "".join(f"_{c.lower()}" if c.isupper() else c for c in operation).lstrip("_")
