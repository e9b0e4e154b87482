"""In-memory stand-ins for the AWS clients the layer calls: they keep items and record requests, and answer
the conditions the stores write the way DynamoDB does, so what is under test stays Lifeguard's. PCS is not
faked: `LocalPcsClient` puts the project's own local PCS (`lifeguard_cli.local.pcs.LocalPcs`) behind a
boto3-shaped client, in process."""

from __future__ import annotations

import copy
import json
import uuid
from collections.abc import Callable, Mapping
from datetime import datetime
from functools import cache
from typing import TYPE_CHECKING, Any

from botocore.exceptions import ClientError

if TYPE_CHECKING:
    from botocore.model import OperationModel, ServiceModel

    from lifeguard_cli.local.pcs import LocalPcs, ManualClock

Key = tuple[str, str]


# DynamoDB: "The aggregate size of the items in the transaction cannot exceed 4 MB."
TRANSACTION_BYTES = 4_000_000


def item_size(value: Mapping[str, Any]) -> int:
    """An item's size as DynamoDB counts it: each attribute's name and value (UTF-8 text, binary bytes,
    a number's digits by pairs, a map's or list's entries and 3 bytes of its own)."""
    return sum(len(name.encode()) + _value_size(inner) for name, inner in value.items())


def _value_size(value: Mapping[str, Any]) -> int:
    ((kind, inner),) = value.items()
    if kind == "S":
        return len(inner.encode())
    if kind == "B":
        return len(inner)
    if kind == "N":
        return (len(inner.lstrip("-").replace(".", "").strip("0")) + 1) // 2 + 1
    if kind == "M":
        return 3 + sum(len(name.encode()) + 1 + _value_size(entry) for name, entry in inner.items())
    if kind == "L":
        return 3 + sum(1 + _value_size(entry) for entry in inner)
    return 1  # BOOL, NULL


def client_error(code: str, operation: str, message: str = "refused") -> ClientError:
    """A botocore ClientError as a service answers it."""
    return ClientError({"Error": {"Code": code, "Message": message}}, operation)


class FakeDynamoDB:
    """One table's items by (pk, sk), and every request made, by operation name.

    `fail` maps an operation to an error it raises on its next call(s); `unprocessed` makes BatchGetItem and
    BatchWriteItem leave that many keys or items for the caller to send again.
    """

    def __init__(self) -> None:
        self.items: dict[Key, dict[str, Any]] = {}
        self.requests: dict[str, list[dict[str, Any]]] = {}
        self.fail: dict[str, list[Exception]] = {}
        self.unprocessed = 0
        self.page_size = 1000

    def _record(self, operation: str, request: dict[str, Any]) -> None:
        self.requests.setdefault(operation, []).append(copy.deepcopy(request))
        errors = self.fail.get(operation)
        if errors:
            raise errors.pop(0)

    @staticmethod
    def _key(item: dict[str, Any]) -> Key:
        return item["pk"]["S"], item["sk"]["S"]

    def _check(self, key: Key, condition: str | None, values: dict[str, Any]) -> bool:
        current = self.items.get(key)
        if condition is None:
            return True
        if condition == "attribute_not_exists(pk)":
            return current is None
        if condition == "attribute_not_exists(pk) OR version = :expected":
            return current is None or current.get("version") == values[":expected"]
        if condition == "#v = :expected":  # the version, named (an item without one fails it, as in DynamoDB)
            return current is not None and current.get("version") == values[":expected"]
        if condition == "next_at = :taken":
            return current is not None and current["next_at"] == values[":taken"]
        if condition == "attribute_not_exists(pk) OR lease_until < :now OR holder = :me":
            return (
                current is None
                or float(current["lease_until"]["N"]) < float(values[":now"]["N"])
                or current["holder"] == values[":me"]
            )
        if condition == "attribute_not_exists(pk) OR sending_until < :now":
            return current is None or (
                "sending_until" in current
                and float(current["sending_until"]["N"]) < float(values[":now"]["N"])
            )
        if condition == "holder = :me":
            return current is not None and current.get("holder") == values[":me"]
        if condition == "attribute_not_exists(pk) OR attribute_not_exists(witness) OR witness < :rank":
            return (
                current is None
                or "witness" not in current
                or int(current["witness"]["N"]) < int(values[":rank"]["N"])
            )
        if condition == "attribute_not_exists(pk) OR revision < :revision":
            return current is None or int(current["revision"]["N"]) < int(values[":revision"]["N"])
        raise AssertionError(f"the fake does not know the condition {condition!r}")

    def get_item(self, **request: Any) -> dict[str, Any]:
        self._record("GetItem", request)
        item = self.items.get(self._key(request["Key"]))
        return {"Item": copy.deepcopy(item)} if item is not None else {}

    def put_item(self, **request: Any) -> dict[str, Any]:
        self._record("PutItem", request)
        key = self._key(request["Item"])
        if not self._check(
            key, request.get("ConditionExpression"), request.get("ExpressionAttributeValues", {})
        ):
            raise client_error("ConditionalCheckFailedException", "PutItem", "The conditional request failed")
        self.items[key] = copy.deepcopy(request["Item"])
        return {}

    def delete_item(self, **request: Any) -> dict[str, Any]:
        self._record("DeleteItem", request)
        key = self._key(request["Key"])
        if not self._check(
            key, request.get("ConditionExpression"), request.get("ExpressionAttributeValues", {})
        ):
            raise client_error(
                "ConditionalCheckFailedException", "DeleteItem", "The conditional request failed"
            )
        self.items.pop(key, None)
        return {}

    def _update(self, request: dict[str, Any]) -> None:
        """A state's update: `SET a = :x, a.b = :y REMOVE a.c`, names through `#` placeholders."""
        names, values = request.get("ExpressionAttributeNames", {}), request["ExpressionAttributeValues"]
        expressions = request["UpdateExpression"] + " " + request.get("ConditionExpression", "")
        used = expressions.replace(".", " ").replace(",", " ").split()
        unused = [name for name in names if name not in used]
        assert not unused, f"ValidationException: ExpressionAttributeNames unused in expressions: {unused}"
        item = self.items[self._key(request["Key"])]
        sets, _, removes = request["UpdateExpression"].removeprefix("SET ").partition(" REMOVE ")
        for assignment in sets.split(", "):
            path, value = assignment.split(" = ")
            *parents, leaf = [names.get(part, part) for part in path.split(".")]
            target = item
            for parent in parents:
                target = target[parent]["M"]
            target[leaf] = copy.deepcopy(values[value])
        for path in filter(None, removes.split(", ")):
            *parents, leaf = [names.get(part, part) for part in path.split(".")]
            target = item
            for parent in parents:
                target = target[parent]["M"]
            target.pop(leaf, None)

    def update_item(self, **request: Any) -> dict[str, Any]:
        self._record("UpdateItem", request)
        key = self._key(request["Key"])
        if request["UpdateExpression"].startswith("SET #v = :next"):
            if not self._check(key, request["ConditionExpression"], request["ExpressionAttributeValues"]):
                raise client_error(
                    "ConditionalCheckFailedException", "UpdateItem", "The conditional request failed"
                )
            self._update(request)
            return {}
        assert request["UpdateExpression"] == "ADD messages :one SET expires_at = :ttl"
        values = request["ExpressionAttributeValues"]
        item = self.items.setdefault(key, {**request["Key"]})
        count = int(item.get("messages", {"N": "0"})["N"]) + int(values[":one"]["N"])
        item["messages"] = {"N": str(count)}
        item["expires_at"] = values[":ttl"]
        return {"Attributes": {"messages": {"N": str(count)}, "expires_at": values[":ttl"]}}

    def batch_get_item(self, **request: Any) -> dict[str, Any]:
        self._record("BatchGetItem", request)
        ((table, wanted),) = request["RequestItems"].items()
        keys = wanted["Keys"]
        served, left = (
            (keys[: -self.unprocessed], keys[-self.unprocessed :]) if self.unprocessed else (keys, [])
        )
        found = [copy.deepcopy(self.items[self._key(k)]) for k in served if self._key(k) in self.items]
        answer: dict[str, Any] = {"Responses": {table: found}}
        if left:
            answer["UnprocessedKeys"] = {table: {**wanted, "Keys": left}}
        return answer

    def transact_write_items(self, **request: Any) -> dict[str, Any]:
        self._record("TransactWriteItems", request)
        writes = [(kind, fields) for write in request["TransactItems"] for kind, fields in write.items()]
        for kind, fields in writes:
            ok = self._check(
                self._key(fields["Item"] if kind == "Put" else fields["Key"]),
                fields.get("ConditionExpression"),
                fields.get("ExpressionAttributeValues", {}),
            )
            if not ok:
                raise client_error(
                    "TransactionCanceledException", "TransactWriteItems", "ConditionalCheckFailed"
                )
        keys = [self._key(fields["Item"] if kind == "Put" else fields["Key"]) for kind, fields in writes]
        before = {key: self.items.get(key) for key in keys}
        for kind, fields in writes:
            if kind == "Put":
                self.items[self._key(fields["Item"])] = copy.deepcopy(fields["Item"])
            else:
                self._update(fields)
        if sum(item_size(self.items[key]) for key in keys) > TRANSACTION_BYTES:
            for key, item in before.items():  # all or none
                if item is None:
                    self.items.pop(key, None)
                else:
                    self.items[key] = item
            raise client_error(
                "ValidationException", "TransactWriteItems", "Transaction request cannot be larger than 4 MB"
            )
        return {}

    def batch_write_item(self, **request: Any) -> dict[str, Any]:
        self._record("BatchWriteItem", request)
        ((table, writes),) = request["RequestItems"].items()
        assert len(writes) <= 25, "BatchWriteItem takes at most 25 requests"
        done, left = (
            (writes[: -self.unprocessed], writes[-self.unprocessed :]) if self.unprocessed else (writes, [])
        )
        for write in done:
            item = write["PutRequest"]["Item"]
            self.items[self._key(item)] = copy.deepcopy(item)
        return {"UnprocessedItems": {table: left} if left else {}}

    def _pages(self, operation: str, request: dict[str, Any], match: Callable[[Key], bool]) -> dict[str, Any]:
        self._record(operation, request)
        # As DynamoDB does: in key order, or the reverse across all pages when asked.
        keys = sorted(
            (key for key in self.items if match(key)), reverse=request.get("ScanIndexForward") is False
        )
        start = int(request.get("ExclusiveStartKey", {}).get("at", 0))
        page = keys[start : start + self.page_size]
        answer: dict[str, Any] = {"Items": [copy.deepcopy(self.items[key]) for key in page]}
        if start + self.page_size < len(keys):
            answer["LastEvaluatedKey"] = {"at": start + self.page_size}
        return answer

    def query(self, **request: Any) -> dict[str, Any]:
        condition = request["KeyConditionExpression"]
        values = request["ExpressionAttributeValues"]
        pk, prefix = values[":pk"]["S"], values[":prefix"]["S"]
        if condition == "pk = :pk AND sk BETWEEN :prefix AND :upto":  # both ends included, as text
            upto = values[":upto"]["S"]
            answer = self._pages("Query", request, lambda key: key[0] == pk and prefix <= key[1] <= upto)
        else:
            assert condition == "pk = :pk AND begins_with(sk, :prefix)"
            answer = self._pages("Query", request, lambda key: key[0] == pk and key[1].startswith(prefix))
        # No more than the limit (the pages are in the order asked for).
        items = answer["Items"]
        return {**answer, "Items": items[: request["Limit"]] if "Limit" in request else items}

    def scan(self, **request: Any) -> dict[str, Any]:
        assert request["FilterExpression"] == "sk = :sk"
        wanted = request["ExpressionAttributeValues"][":sk"]["S"]
        return self._pages("Scan", request, lambda key: key[1] == wanted)

    def single_writes(self) -> int:
        """Items written one by one (puts and updates), not in a transaction."""
        return self.calls("PutItem") + self.calls("UpdateItem")

    def calls(self, operation: str) -> int:
        """How many requests of `operation` were made."""
        return len(self.requests.get(operation, []))


class FakeEventBridge:
    """EventBridge that keeps every entry put (and each request's, `requests`), and refuses its next
    `refuse_calls` calls outright."""

    def __init__(self) -> None:
        self.entries: list[dict[str, Any]] = []
        self.requests: list[list[dict[str, Any]]] = []
        self.refuse_calls = 0

    def put_events(self, Entries: list[dict[str, Any]]) -> dict[str, Any]:
        if self.refuse_calls:
            self.refuse_calls -= 1
            raise client_error("InternalException", "PutEvents", "unavailable")
        self.requests.append(copy.deepcopy(Entries))
        self.entries.extend(copy.deepcopy(Entries))
        return {"FailedEntryCount": 0, "Entries": [{"EventId": str(n)} for n in range(len(Entries))]}

    def keys(self) -> list[str]:
        """The `episode_id` of each detail put, in order."""
        return [json.loads(entry["Detail"])["episode_id"] for entry in self.entries]

    def events(self) -> list[tuple[str, dict[str, Any]]]:
        """Each entry put as (detail-type, detail), in order."""
        return [(entry["DetailType"], json.loads(entry["Detail"])) for entry in self.entries]


@cache
def _pcs_model() -> ServiceModel:
    from botocore.model import ServiceModel

    from lifeguard.pcs_model import service_model

    return ServiceModel(dict(service_model()), service_name="pcs")


class LocalPcsClient:
    """A boto3 PCS client's calls (`get_compute_node_group(**params)`, …) answered by a `LocalPcs` in
    process: what botocore and the local endpoint's HTTP transport would make of each call, without a
    socket.

    As botocore does, a call fills in a missing idempotency token, is validated against PCS's input shape
    (a bad parameter raises botocore's ParamValidationError) and serialized as JSON 1.0; LocalPcs answers
    as its transport would; the answer is parsed against PCS's output shape (timestamps become datetimes),
    and an error is raised as a ClientError carrying PCS's modeled fields (`retryAfterSeconds`).
    """

    def __init__(self, pcs: LocalPcs) -> None:
        # Imported here: the DynamoDB and EventBridge fakes' users need neither botocore's protocol code
        # nor the CLI package.
        from botocore import xform_name
        from botocore.parsers import create_parser
        from botocore.serialize import create_serializer

        self.pcs = pcs
        self._model = _pcs_model()
        self._operations = {xform_name(name): name for name in self._model.operation_names}
        self._serializer = create_serializer("json", include_validation=True)
        self._parser = create_parser("json")

    def __getattr__(self, name: str) -> Callable[..., dict[str, Any]]:
        operation = self.__dict__.get("_operations", {}).get(name)
        if operation is None:
            raise AttributeError(f"PCS has no operation {name!r}")
        return lambda **params: self._call(self._model.operation_model(operation), params)

    def _call(self, model: OperationModel, params: dict[str, Any]) -> dict[str, Any]:
        from botocore.awsrequest import HeadersDict

        from lifeguard_cli.local.pcs.transport import CONTENT_TYPE, TARGET_PREFIX

        for member in model.idempotent_members:
            params.setdefault(member, str(uuid.uuid4()))
        request = self._serializer.serialize_to_request(params, model)
        assert request["headers"]["X-Amz-Target"] == TARGET_PREFIX + model.name
        status, payload = self.pcs.handle(model.name, request["body"])
        headers = HeadersDict({"Content-Type": CONTENT_TYPE, "x-amzn-RequestId": uuid.uuid4().hex})
        if status >= 300:
            headers["x-amzn-ErrorType"] = str(payload.get("__type", ""))
        response = {"status_code": status, "headers": headers, "body": json.dumps(payload).encode()}
        # botocore parses an answer against the operation's output shape, None where it has none
        parsed: dict[str, Any] = self._parser.parse(response, model.output_shape)  # type: ignore[arg-type]
        if status < 300:
            return parsed
        code = parsed.get("Error", {}).get("Code")
        error_shape = self._model.shape_for_error_code(code) if code else None
        if error_shape is not None:
            parsed.update(self._parser.parse(response, error_shape))
        raise ClientError(parsed, model.name)  # type: ignore[arg-type]


def local_pcs_with_group(
    start: datetime,
    cluster_id: str,
    group_id: str,
    actions: Mapping[str, Any] | None,
    *,
    update_seconds: float = 60,
    tags: dict[str, str] | None = None,
) -> tuple[ManualClock, LocalPcs, LocalPcsClient]:
    """The article's cluster and its group `lca-static` in a local PCS on a manual clock from `start`, and a
    client of it."""
    from lifeguard_cli.local.pcs import LocalPcs, ManualClock

    clock = ManualClock(start)
    pcs = LocalPcs(clock=clock, update_seconds=update_seconds)
    pcs.add_cluster("lca", cluster_id=cluster_id)
    pcs.add_compute_node_group(
        cluster_id, "lca-static", group_id=group_id, node_lifecycle_actions=actions, tags=tags
    )
    return clock, pcs, LocalPcsClient(pcs)


class Interleaved:
    """Delegates to `table`; the first call of `operation` whose request `when` accepts first runs `other`
    (another invocation, on the same table), then goes on."""

    def __init__(
        self,
        table: FakeDynamoDB,
        operation: str,
        other: Callable[[], Any],
        when: Callable[[dict[str, Any]], bool] = lambda _: True,
    ) -> None:
        self._table, self._operation, self._other, self._when = table, operation, other, when
        self.ran = False

    def __getattr__(self, name: str) -> Any:
        method = getattr(self._table, name)
        if name != self._operation:
            return method

        def call(**request: Any) -> Any:
            if not self.ran and self._when(request):
                self.ran = True
                self._other()
            return method(**request)

        return call


def state_key(request: dict[str, Any]) -> bool:
    key = request.get("Key") or request.get("Item") or {}
    return key.get("sk", {}).get("S") == "STATE"
