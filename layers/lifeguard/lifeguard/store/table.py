"""Lifeguard's one DynamoDB table: its item layout, and the one place botocore's errors are translated.

Every item is keyed by `pk` (the partition) and `sk` (the item within it):

    pk = GROUP#<cluster>#<group>
        sk = STATE                            the group's state (`GroupState`: zlib JSON `state`, `version`,
                                              its pending launches as a map `launches`: instance -> ms, and
                                              its outcomes as a map `outcomes`: instance -> JSON row)
        sk = REPORT#<instance>#<boot>#<stage>#<script>#<started>#<digest>   a failed script run (`report`,
                                              JSON; the digest is of the report: a different one lands beside)
        sk = RAN#<instance>#<boot>#<stage>#<script>#<started>#<digest>   a run that did not fail (`outcome`;
                                              the digest is of its outcome and end: another lands beside)
                                              (no other sort key begins with R: one Query reads both)
        sk = LOCK                             remediation's lease on the group (`holder`, `lease_until`)
        sk = LEDGER                           the changes remediation made or set out to make (`doc`/`docz`)
        sk = DECISION#<episode>#<revision>    the decision taken on one detection (`doc`/`docz`)
        sk = AUDIT#<time ms>#<episode>#<revision>#<decision>#<nonce>   the audit trail (`doc`/`docz`)
        sk = NOTICE#<event key>#<channel>     an (event, channel) claimed by notify
        sk = EPISODE#<episode>#NOTICES        how many messages an episode had (`messages`)
        sk = EPISODE#<episode>#NUMBER#<event key>   the number of one of its messages (`number`)
        sk = CHANGE#<fingerprint>             who put that configuration in place, and when (`doc`)
    pk = WEBHOOK#<sha256 of the URL>
        sk = PACE                             the webhook's next free slot (`next_at`)

Items that age out carry `expires_at` (epoch seconds, the table's TTL attribute): all but a group's STATE
and LEDGER, which stay while the table does (a group deleted from PCS keeps its two, a few KB to a few
hundred, until deleted by hand). Documents are JSON text
(`doc`), or zlib-compressed JSON (`docz`) once large, so an item holding two lifecycle configurations stays
far below DynamoDB's 400 KB.

Errors, one style for every store: a conditional write that found the item otherwise raises
`ConditionFailedError`, a cancelled transaction `TransactionConflictError`, anything else `AwsCallError`
naming the operation. The stores decide what each means (a lost race, a lease held, a version moved).
"""

from __future__ import annotations

import itertools
import json
import time
import zlib
from collections.abc import Callable, Iterator, Mapping, Sequence
from typing import TYPE_CHECKING, Any, TypeVar

from lifeguard.errors import AwsCallError, LifeguardError

if TYPE_CHECKING:
    from mypy_boto3_dynamodb import DynamoDBClient

__all__ = [
    "ConditionFailedError",
    "Item",
    "Table",
    "TransactionConflictError",
    "Write",
    "decode_doc",
    "encode_doc",
    "group_key",
    "item_key",
    "stored_bytes",
]

Item = dict[str, Any]  # an item in DynamoDB's attribute-value form: {"pk": {"S": "…"}, …}
# One write as a transaction holds it: ("Put" or "Update", the request's fields but TableName).
Write = tuple[str, Mapping[str, Any]]

COMPRESS_FROM_BYTES = 32 * 1024
BATCH_GET_MAX = 100  # keys a BatchGetItem takes
BATCH_WRITE_MAX = 25  # requests a BatchWriteItem takes
TRANSACTION_MAX = 100  # items a TransactWriteItems takes
ROUNDS = 10  # rounds of unprocessed keys or items before giving up
# DynamoDB leaves keys or items unprocessed when it throttles, and a round sent again at once meets the same
# throttle: each waits, up to a second, with jitter (about 5 s in all before giving up).
BACKOFF_FIRST_SECONDS, BACKOFF_MAX_SECONDS = 0.05, 1.0


def backoff(round_: int) -> float:
    """The wait before round `round_` (1, 2, ...) of unprocessed keys or items: exponential, jittered."""
    import random

    return min(BACKOFF_FIRST_SECONDS * 2.0 ** (round_ - 1), BACKOFF_MAX_SECONDS) * random.uniform(0.5, 1.0)


class ConditionFailedError(LifeguardError):
    """A conditional write found the item not as its condition said."""


class TransactionConflictError(LifeguardError):
    """A transaction was cancelled: some item's condition failed, or another transaction held it."""


def group_key(cluster_id: str, group_id: str) -> str:
    """The partition key of a group's items."""
    return f"GROUP#{cluster_id}#{group_id}"


def item_key(pk: str, sk: str) -> Item:
    """The key of one item."""
    return {"pk": {"S": pk}, "sk": {"S": sk}}


def encode_doc(text: str) -> Item:
    """A JSON document as an item stores it: text, or compressed once it is large."""
    if len(text) < COMPRESS_FROM_BYTES:
        return {"doc": {"S": text}}
    return {"docz": {"B": zlib.compress(text.encode(), 6)}}


def decode_doc(item: Mapping[str, Any]) -> Any:
    """The JSON document an item holds."""
    if "docz" in item:
        return json.loads(zlib.decompress(item["docz"]["B"]))
    return json.loads(item["doc"]["S"])


def stored_bytes(text: str) -> int:
    """How many bytes a document takes in its item."""
    (value,) = encode_doc(text).values()
    return len(value.get("S") or value["B"])


# How a group's state item compresses its body (`store.groups`): quickly, as it is written at every batch.
STATE_LEVEL = 1


def state_bytes(text: str) -> int:
    """How many bytes JSON text takes in a group's state body, compressed as the body is (STATE_LEVEL):
    what is bounded to be kept there (a configuration, the outbox's events) is measured so. Measured as a
    document of its own (level 6), text JSON writes as escapes (control characters) took a third more in
    the state than measured, and a state within every bound passed DynamoDB's 400 KB. Text under
    COMPRESS_FROM_BYTES is taken at its length, no less than it takes compressed but for zlib's few bytes
    (JSON's own text is ASCII): most configurations and events are, and are not compressed to be measured."""
    if len(text) < COMPRESS_FROM_BYTES:
        return len(text)
    return len(zlib.compress(text.encode(), STATE_LEVEL))


_T = TypeVar("_T")


def _translated(operation: str, exc: Exception) -> None:
    """Raise botocore's error `exc` of `operation` as the stores' (`ConditionFailedError`,
    `TransactionConflictError`, else `AwsCallError`); return when it is not botocore's (the caller raises
    it as it is)."""
    from botocore.exceptions import BotoCoreError, ClientError

    if isinstance(exc, ClientError):
        code = exc.response.get("Error", {}).get("Code")
        if code == "ConditionalCheckFailedException":
            raise ConditionFailedError(f"{operation}: the condition failed") from None
        if code in ("TransactionCanceledException", "TransactionConflictException"):
            raise TransactionConflictError(f"{operation}: {code}") from None
        raise AwsCallError.from_exception(operation, exc) from exc
    if isinstance(exc, BotoCoreError):
        raise AwsCallError.from_exception(operation, exc) from exc


class Table:
    """The table's operations as the stores use them, over one DynamoDB client; `calls` counts requests."""

    def __init__(self, client: DynamoDBClient, name: str) -> None:
        self.client = client
        self.name = name
        self.calls = 0
        self.sleep: Callable[[float], None] = time.sleep  # between rounds of unprocessed keys or items

    def _request(self, operation: str, call: Callable[..., _T], **request: Any) -> _T:
        """One request of `operation`, counted; its error as the stores' (`_translated`). A plain call, not
        a context manager: that costs more than the rest of a small batch's write."""
        self.calls += 1
        try:
            return call(**request)
        except Exception as exc:
            _translated(operation, exc)
            raise

    def get(self, key: Item) -> Item | None:
        """One item, read consistently (None when there is none)."""
        response = self._request(
            "GetItem", self.client.get_item, TableName=self.name, Key=key, ConsistentRead=True
        )
        return response.get("Item")

    def put(self, item: Item, *, condition: str | None = None, values: Item | None = None) -> None:
        """Write one item, on a condition when given."""
        request: dict[str, Any] = {"TableName": self.name, "Item": item}
        if condition is not None:
            request["ConditionExpression"] = condition
        if values:
            request["ExpressionAttributeValues"] = values
        self._request("PutItem", self.client.put_item, **request)

    def delete(self, key: Item, *, condition: str | None = None, values: Item | None = None) -> None:
        """Delete one item, on a condition when given."""
        request: dict[str, Any] = {"TableName": self.name, "Key": key}
        if condition is not None:
            request["ConditionExpression"] = condition
        if values:
            request["ExpressionAttributeValues"] = values
        self._request("DeleteItem", self.client.delete_item, **request)

    def add(self, key: Item, attribute: str, *, expires_at: int) -> int:
        """Add one to a counter attribute (created at 0) and set the item's expiry; returns the new count."""
        response = self._request(
            "UpdateItem",
            self.client.update_item,
            TableName=self.name,
            Key=key,
            UpdateExpression=f"ADD {attribute} :one SET expires_at = :ttl",
            ExpressionAttributeValues={":one": {"N": "1"}, ":ttl": {"N": str(expires_at)}},
            ReturnValues="UPDATED_NEW",
        )
        return int(response["Attributes"][attribute]["N"])

    def query(
        self,
        pk: str,
        prefix: str,
        *,
        last: int | None = None,
        most: int | None = None,
        descending: bool = False,
        upto: str | None = None,
    ) -> Iterator[Item]:
        """The partition's items whose sort key starts with `prefix`, in key order (`descending`: the
        reverse; only the `last` ones, newest first, when given; at most the first `most`, when given).
        With `upto`, the items whose sort key is from `prefix` to `upto` instead (both included).
        Read consistently: a handler decides on what it has just written."""
        values = {":pk": {"S": pk}, ":prefix": {"S": prefix}}
        condition = "pk = :pk AND begins_with(sk, :prefix)"
        if upto is not None:
            condition = "pk = :pk AND sk BETWEEN :prefix AND :upto"
            values[":upto"] = {"S": upto}
        request: dict[str, Any] = {
            "TableName": self.name,
            "KeyConditionExpression": condition,
            "ExpressionAttributeValues": values,
            "ConsistentRead": True,
        }
        if descending:
            request["ScanIndexForward"] = False
        if last is not None:
            request.update(ScanIndexForward=False, Limit=last)
        items = self._pages("Query", request, once=last is not None)
        yield from items if most is None else itertools.islice(items, most)

    def scan(self, sk: str) -> Iterator[Item]:
        """Every item whose sort key is `sk` (a Scan: for the operator, never for the handlers)."""
        request: dict[str, Any] = {
            "TableName": self.name,
            "FilterExpression": "sk = :sk",
            "ExpressionAttributeValues": {":sk": {"S": sk}},
        }
        yield from self._pages("Scan", request)

    def _pages(self, operation: str, request: dict[str, Any], *, once: bool = False) -> Iterator[Item]:
        call = self.client.query if operation == "Query" else self.client.scan
        while True:
            page = self._request(operation, call, **request)
            yield from page.get("Items", [])
            if once or "LastEvaluatedKey" not in page:
                return
            request["ExclusiveStartKey"] = page["LastEvaluatedKey"]

    def get_many(self, keys: Sequence[Item]) -> Iterator[Item]:
        """Many items, read consistently: one BatchGetItem per 100 keys, unprocessed keys sent again."""
        for start in range(0, len(keys), BATCH_GET_MAX):
            request: Any = {
                self.name: {"Keys": list(keys[start : start + BATCH_GET_MAX]), "ConsistentRead": True}
            }
            for round_ in range(ROUNDS):
                if round_:
                    self.sleep(backoff(round_))
                response = self._request("BatchGetItem", self.client.batch_get_item, RequestItems=request)
                yield from response.get("Responses", {}).get(self.name, [])
                request = response.get("UnprocessedKeys") or {}
                if not request:
                    break
            else:
                raise AwsCallError("BatchGetItem", "UnprocessedKeys", f"keys not read after {ROUNDS} rounds")

    def put_many(self, items: Sequence[Item]) -> None:
        """Write many items (no conditions): BatchWriteItem 25 at a time, unprocessed items sent again."""
        pending: list[Any] = [{"PutRequest": {"Item": item}} for item in items]
        retries = 0  # rounds that came back with unprocessed items (not chunks: a backlog has many)
        while pending:
            chunk, pending = pending[:BATCH_WRITE_MAX], pending[BATCH_WRITE_MAX:]
            response = self._request(
                "BatchWriteItem", self.client.batch_write_item, RequestItems={self.name: chunk}
            )
            unprocessed = response.get("UnprocessedItems", {}).get(self.name, [])
            if unprocessed:
                retries += 1
                if retries >= ROUNDS:
                    left = len(unprocessed) + len(pending)
                    raise AwsCallError("BatchWriteItem", "UnprocessedItems", f"{left} items not written")
                pending.extend(unprocessed)
                self.sleep(backoff(retries))

    def write(self, write: Write) -> None:
        """One write, a PutItem or an UpdateItem (conditional when its fields say so)."""
        kind, fields = write
        call = self.client.put_item if kind == "Put" else self.client.update_item
        self._request(f"{kind}Item", call, TableName=self.name, **fields)

    def write_together(self, writes: Sequence[Write]) -> None:
        """Up to 100 writes (puts and updates, each on its condition) in one transaction: all or none."""
        items: Any = [{kind: {"TableName": self.name, **fields}} for kind, fields in writes]
        self._request("TransactWriteItems", self.client.transact_write_items, TransactItems=items)
