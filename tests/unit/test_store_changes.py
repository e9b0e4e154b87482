"""Who changed a group's configuration (`store.changes`): kept under the group by the fingerprint of the
configuration the change put in place, found again by it, and let go 30 days after the change."""

from __future__ import annotations

import pytest

from lifeguard.store.changes import CHANGE_TTL_SECONDS, ChangeRecord, ChangeStore
from tests.unit.fakes import FakeDynamoDB

CLUSTER, GROUP = "pcs_abc123de45", "pcs_abcdef01"
FINGERPRINT = "a" * 64
ARN = "arn:aws:sts::123456789012:assumed-role/ClusterAdmin/alice"


def change(**fields: object) -> ChangeRecord:
    values: dict[str, object] = {
        "cluster_id": CLUSTER,
        "group_id": GROUP,
        "fingerprint": FINGERPRINT,
        "arn": ARN,
        "at": 1792544400000,
        "event_name": "UpdateComputeNodeGroup",
        "event_id": "e3a1f7c2-8b4d-4c6e-9f0a-1b2c3d4e5f60",
        **fields,
    }
    return ChangeRecord(**values)  # type: ignore[arg-type]


def test_a_change_is_found_by_the_fingerprint_of_the_configuration_it_put_in_place() -> None:
    store = ChangeStore(FakeDynamoDB(), "t")
    store.put(change())
    found = store.find(CLUSTER, GROUP, FINGERPRINT)
    assert found == change()
    assert found.to_changed_by() == {"arn": ARN, "at": 1792544400000, "source": "cloudtrail"}


def test_nothing_is_found_for_another_configuration_or_another_group() -> None:
    store = ChangeStore(FakeDynamoDB(), "t")
    store.put(change())
    assert store.find(CLUSTER, GROUP, "b" * 64) is None
    assert store.find(CLUSTER, "pcs_0fedcba987", FINGERPRINT) is None


def test_the_item_sits_under_the_group_and_expires_30_days_after_the_change() -> None:
    table = FakeDynamoDB()
    ChangeStore(table, "t").put(change())
    ((pk, sk),) = table.items
    assert (pk, sk) == (f"GROUP#{CLUSTER}#{GROUP}", f"CHANGE#{FINGERPRINT}")
    expires = int(table.items[(pk, sk)]["expires_at"]["N"])
    assert expires == 1792544400 + CHANGE_TTL_SECONDS == 1792544400 + 30 * 24 * 3600
    assert [request["TableName"] for request in table.requests["PutItem"]] == ["t"]


def test_a_later_change_back_to_the_same_configuration_names_its_own_author() -> None:
    store = ChangeStore(FakeDynamoDB(), "t")
    store.put(change())
    later = change(arn="arn:aws:iam::123456789012:user/bob", at=1792548000000, event_id="f" * 36)
    store.put(later)
    assert store.find(CLUSTER, GROUP, FINGERPRINT) == later


def test_an_older_change_delivered_after_a_newer_one_leaves_the_newer_author() -> None:
    """CloudTrail's records reach EventBridge in no promised order: carol put the configuration back at
    01:05 and her record came first; alice's of 01:00 to the same configuration, delivered after it, must
    not take her place."""
    store = ChangeStore(FakeDynamoDB(), "t")
    carol = change(arn="arn:aws:sts::123456789012:assumed-role/ClusterAdmin/carol", at=1792544700000)
    store.put(carol)
    store.put(change())
    assert store.find(CLUSTER, GROUP, FINGERPRINT) == carol


def test_an_unnamed_caller_is_kept_as_none() -> None:
    store = ChangeStore(FakeDynamoDB(), "t")
    store.put(change(arn=None))
    found = store.find(CLUSTER, GROUP, FINGERPRINT)
    assert found is not None
    assert found.to_changed_by()["arn"] is None


@pytest.mark.parametrize(
    "held",
    [
        {"doc": {"S": '{"arn": 1}'}},
        {"doc": {"S": "{not json"}},  # damaged: the review raised, and so on every retry, then parked
        {"doc": {"S": "[1, 2]"}},
        {"docz": {"B": b"not zlib"}},
        {},
    ],
)
def test_an_item_this_code_did_not_write_is_as_good_as_none(held: dict[str, object]) -> None:
    table = FakeDynamoDB()
    key = (f"GROUP#{CLUSTER}#{GROUP}", f"CHANGE#{FINGERPRINT}")
    table.items[key] = {"pk": {"S": key[0]}, "sk": {"S": key[1]}, **held}
    store = ChangeStore(table, "t")
    assert store.find(CLUSTER, GROUP, FINGERPRINT) is None
    assert store.of_group(CLUSTER, GROUP) == ([], False)  # not all read: it may be a change in between
    store.put(change())  # a change of that configuration is kept over it
    assert store.find(CLUSTER, GROUP, FINGERPRINT) == change()


def test_two_reviews_at_once_keep_the_later_change_as_one_after_the_other_do() -> None:
    """The review holding the older record read "nothing kept", the newer one was kept meanwhile, and the
    older was written over it: the next loop on that configuration named the wrong person and time."""
    from tests.unit.fakes import Interleaved

    older = change()
    newer = change(arn="arn:aws:iam::123456789012:user/bob", at=1792548000000, event_id="f" * 36)
    for first, second in ((older, newer), (newer, older)):
        one_after_the_other = ChangeStore(FakeDynamoDB(), "t")
        one_after_the_other.put(first)
        one_after_the_other.put(second)
        assert one_after_the_other.find(CLUSTER, GROUP, FINGERPRINT) == newer
    table = FakeDynamoDB()
    other = ChangeStore(table, "t")
    at_once = ChangeStore(Interleaved(table, "put_item", lambda: other.put(newer)), "t")  # type: ignore[arg-type]
    at_once.put(older)
    assert ChangeStore(table, "t").find(CLUSTER, GROUP, FINGERPRINT) == newer
    # A record read back after a call does not write over one its call carried, at once either.
    carried = change(at=1792540000000)
    read_back = change(at=1792549000000, read_back=True, arn=None)
    table = FakeDynamoDB()
    other = ChangeStore(table, "t")
    ChangeStore(Interleaved(table, "put_item", lambda: other.put(carried)), "t").put(read_back)  # type: ignore[arg-type]
    assert ChangeStore(table, "t").find(CLUSTER, GROUP, FINGERPRINT) == carried
