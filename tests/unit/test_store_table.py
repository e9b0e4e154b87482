"""The table boundary: botocore's errors translated in one style (a failed condition, a cancelled
transaction, anything else an AwsCallError naming the operation), documents stored as text or compressed,
every request counted, batches chunked and their unprocessed keys and items sent again."""

from __future__ import annotations

import json
from typing import Any

import pytest
from botocore.exceptions import EndpointConnectionError

from lifeguard.errors import AwsCallError
from lifeguard.store.table import (
    COMPRESS_FROM_BYTES,
    ConditionFailedError,
    Table,
    TransactionConflictError,
    decode_doc,
    encode_doc,
    group_key,
    item_key,
    stored_bytes,
)
from tests.unit.fakes import FakeDynamoDB, client_error


def table(client: FakeDynamoDB | None = None) -> tuple[Table, FakeDynamoDB]:
    fake = client or FakeDynamoDB()
    return Table(fake, "t"), fake  # type: ignore[arg-type]  # the fake answers as DynamoDB does


def test_the_keys_of_a_group_are_its_partition_and_the_item_within_it() -> None:
    assert group_key("pcs_c", "pcs_g") == "GROUP#pcs_c#pcs_g"
    assert item_key("GROUP#pcs_c#pcs_g", "STATE") == {"pk": {"S": "GROUP#pcs_c#pcs_g"}, "sk": {"S": "STATE"}}


def test_a_failed_condition_is_its_own_error_and_the_item_is_left_as_it_was() -> None:
    t, fake = table()
    key = item_key("P", "S")
    t.put({**key, "v": {"N": "1"}}, condition="attribute_not_exists(pk)")
    with pytest.raises(ConditionFailedError, match="PutItem: the condition failed"):
        t.put({**key, "v": {"N": "2"}}, condition="attribute_not_exists(pk)")
    assert t.get(key) == {**key, "v": {"N": "1"}}
    assert fake.calls("PutItem") == 2


def test_a_cancelled_transaction_is_a_conflict_not_a_failure() -> None:
    t, fake = table()
    fake.fail["TransactWriteItems"] = [client_error("TransactionCanceledException", "TransactWriteItems")]
    with pytest.raises(TransactionConflictError, match="TransactionCanceledException"):
        t.write_together([("Put", {"Item": item_key("P", "S")})])


@pytest.mark.parametrize(
    ("error", "code"),
    [
        (
            client_error("ProvisionedThroughputExceededException", "GetItem", "slow down"),
            "ProvisionedThroughput",
        ),
        (EndpointConnectionError(endpoint_url="https://dynamodb.local"), "EndpointConnectionError"),
    ],
)
def test_any_other_error_is_one_aws_call_error_naming_the_operation(error: Exception, code: str) -> None:
    t, fake = table()
    fake.fail["GetItem"] = [error]
    with pytest.raises(AwsCallError) as raised:
        t.get(item_key("P", "S"))
    assert raised.value.operation == "GetItem"
    assert raised.value.code.startswith(code)


def test_errors_of_every_operation_are_translated_alike() -> None:
    t, fake = table()
    calls: dict[str, Any] = {
        "DeleteItem": lambda: t.delete(item_key("P", "S")),
        "UpdateItem": lambda: t.add(item_key("P", "S"), "messages", expires_at=1),
        "Query": lambda: list(t.query("P", "X#")),
        "Scan": lambda: list(t.scan("STATE")),
        "BatchGetItem": lambda: list(t.get_many([item_key("P", "S")])),
        "BatchWriteItem": lambda: t.put_many([item_key("P", "S")]),
    }
    for operation, call in calls.items():
        fake.fail[operation] = [client_error("InternalServerError", operation)]
        with pytest.raises(AwsCallError) as raised:
            call()
        assert (raised.value.operation, raised.value.code) == (operation, "InternalServerError")


def test_small_documents_are_text_and_large_ones_compressed_both_read_back() -> None:
    small = json.dumps({"a": 1})
    large = json.dumps({"log": "x" * COMPRESS_FROM_BYTES})
    assert encode_doc(small) == {"doc": {"S": small}}
    assert set(encode_doc(large)) == {"docz"}
    assert decode_doc(encode_doc(small)) == {"a": 1}
    assert decode_doc(encode_doc(large)) == json.loads(large)
    assert stored_bytes(large) < len(large) // 10


def test_a_counter_starts_at_one_and_counts_up() -> None:
    t, _ = table()
    key = item_key("P", "EPISODE#e#NOTICES")
    assert [t.add(key, "messages", expires_at=9) for _ in range(3)] == [1, 2, 3]


def test_get_many_reads_100_keys_a_request_and_asks_again_for_unprocessed_keys() -> None:
    t, fake = table()
    keys = [item_key("P", f"S{n:03d}") for n in range(250)]
    t.put_many([{**key, "n": {"N": str(n)}} for n, key in enumerate(keys)])
    fake.unprocessed = 3
    with pytest.raises(AwsCallError, match="not read after 10 rounds"):
        list(t.get_many(keys))
    fake.unprocessed = 0
    before = fake.calls("BatchGetItem")
    assert len(list(t.get_many(keys))) == 250
    assert fake.calls("BatchGetItem") - before == 3
    assert all(len(r["RequestItems"]["t"]["Keys"]) <= 100 for r in fake.requests["BatchGetItem"])


def test_put_many_writes_25_a_request_and_gives_up_after_ten_rounds_of_unprocessed_items() -> None:
    t, fake = table()
    t.put_many([item_key("P", f"S{n:03d}") for n in range(60)])
    assert fake.calls("BatchWriteItem") == 3
    assert len(fake.items) == 60
    fake.unprocessed = 1
    with pytest.raises(AwsCallError, match="items not written"):
        t.put_many([item_key("Q", "S")])


def test_query_follows_every_page_and_last_reads_one_page_newest_first() -> None:
    t, fake = table()
    fake.page_size = 2
    t.put_many([item_key("P", f"X#{n}") for n in range(5)] + [item_key("P", "Y#0")])
    assert [i["sk"]["S"] for i in t.query("P", "X#")] == [f"X#{n}" for n in range(5)]
    list(t.query("P", "X#", last=2))
    assert fake.requests["Query"][-1]["ScanIndexForward"] is False
    assert fake.requests["Query"][-1]["Limit"] == 2


def test_every_request_is_counted() -> None:
    t, _ = table()
    t.put(item_key("P", "S"))
    t.get(item_key("P", "S"))
    t.delete(item_key("P", "S"))
    assert t.calls == 3
