"""RemediationStore (`lifeguard.store.remediations`) over the in-memory DynamoDB: the lock's lease, the
ledger's bounds, decisions by detection, the audit trail, and errors named after the failed operation."""

from __future__ import annotations

import json
import random
import zlib
from typing import Any

import pytest

from lifeguard.errors import AwsCallError
from lifeguard.remediation.records import DAY_SECONDS, AppliedChange, AuditEntry, Decision, Ledger
from lifeguard.store.remediations import RemediationStore
from tests.unit.fakes import FakeDynamoDB, client_error

CLUSTER, GROUP = "pcs_abc123de45", "pcs_abcdef01"
PK = f"GROUP#{CLUSTER}#{GROUP}"
TABLE = "lifeguard"
NOW = 1_800_000_000.0
LEASE = 300.0
NINETY_DAYS = 90 * 24 * 3600


@pytest.fixture
def fake() -> FakeDynamoDB:
    return FakeDynamoDB()


@pytest.fixture
def store(fake: FakeDynamoDB) -> RemediationStore:
    return RemediationStore(fake, TABLE)


def lock_of(fake: FakeDynamoDB) -> dict[str, Any] | None:
    return fake.items.get((PK, "LOCK"))


def change(n: int, config: dict[str, Any] | None = None) -> AppliedChange:
    return AppliedChange(
        at=NOW + n,
        episode_id=f"ep-{n}",
        revision=1,
        action="quarantine",
        config_before=config or {"stages": {}},
        config_after={"stages": {}},
        fingerprint_before=f"before-{n}",
        fingerprint_after=f"after-{n}",
    )


def noise(rng: random.Random, chars: int) -> dict[str, Any]:
    """A configuration that compresses badly (random hex), so a few of them make a large ledger."""
    return {"stages": {"nodeBootstrapped": [{"name": "x", "note": rng.randbytes(chars // 2).hex()}]}}


# -- the lock --


def test_a_free_lock_is_taken_with_its_lease() -> None:
    fake = FakeDynamoDB()
    assert RemediationStore(fake, TABLE).acquire(CLUSTER, GROUP, "a", NOW, LEASE) is True
    lock = lock_of(fake)
    assert lock is not None
    assert lock["holder"] == {"S": "a"}
    assert float(lock["lease_until"]["N"]) == NOW + LEASE
    assert int(lock["expires_at"]["N"]) == int(NOW + LEASE + 3600)
    assert fake.requests["PutItem"][0]["TableName"] == TABLE


def test_a_lock_is_refused_while_another_holder_s_lease_runs(
    fake: FakeDynamoDB, store: RemediationStore
) -> None:
    assert store.acquire(CLUSTER, GROUP, "a", NOW, LEASE)
    assert store.acquire(CLUSTER, GROUP, "b", NOW + LEASE - 1, LEASE) is False
    assert store.acquire(CLUSTER, GROUP, "b", NOW + LEASE, LEASE) is False  # not yet ran out at its end
    lock = lock_of(fake)
    assert lock is not None
    assert lock["holder"] == {"S": "a"}
    assert float(lock["lease_until"]["N"]) == NOW + LEASE


def test_a_lock_whose_lease_ran_out_is_taken_over(fake: FakeDynamoDB, store: RemediationStore) -> None:
    assert store.acquire(CLUSTER, GROUP, "a", NOW, LEASE)
    assert store.acquire(CLUSTER, GROUP, "b", NOW + LEASE + 1, LEASE) is True
    lock = lock_of(fake)
    assert lock is not None
    assert lock["holder"] == {"S": "b"}
    assert float(lock["lease_until"]["N"]) == NOW + 2 * LEASE + 1


def test_the_same_holder_takes_its_lock_again_and_extends_the_lease(
    fake: FakeDynamoDB, store: RemediationStore
) -> None:
    assert store.acquire(CLUSTER, GROUP, "a", NOW, LEASE)
    assert store.acquire(CLUSTER, GROUP, "a", NOW + 10, LEASE) is True
    lock = lock_of(fake)
    assert lock is not None
    assert float(lock["lease_until"]["N"]) == NOW + 10 + LEASE


def test_release_deletes_the_holder_s_own_lock(fake: FakeDynamoDB, store: RemediationStore) -> None:
    store.acquire(CLUSTER, GROUP, "a", NOW, LEASE)
    store.release(CLUSTER, GROUP, "a")
    assert lock_of(fake) is None
    assert store.acquire(CLUSTER, GROUP, "b", NOW + 1, LEASE) is True


def test_release_leaves_a_lock_taken_over_by_someone_else_alone(
    fake: FakeDynamoDB, store: RemediationStore
) -> None:
    store.acquire(CLUSTER, GROUP, "a", NOW, LEASE)
    store.acquire(CLUSTER, GROUP, "b", NOW + LEASE + 1, LEASE)
    store.release(CLUSTER, GROUP, "a")  # a's late release: the condition fails, and is let go
    lock = lock_of(fake)
    assert lock is not None
    assert lock["holder"] == {"S": "b"}
    assert fake.calls("DeleteItem") == 1
    assert fake.requests["DeleteItem"][0]["ConditionExpression"] == "holder = :me"


def test_a_release_that_fails_is_let_go_and_the_lease_runs_out_by_itself(
    fake: FakeDynamoDB, store: RemediationStore
) -> None:
    store.acquire(CLUSTER, GROUP, "a", NOW, LEASE)
    fake.fail["DeleteItem"] = [client_error("InternalServerError", "DeleteItem")]
    store.release(CLUSTER, GROUP, "a")
    assert fake.calls("DeleteItem") == 1
    assert lock_of(fake) is not None
    assert store.acquire(CLUSTER, GROUP, "b", NOW + 1, LEASE) is False
    assert store.acquire(CLUSTER, GROUP, "b", NOW + LEASE + 1, LEASE) is True


# -- the ledger --


def test_a_group_never_changed_has_an_empty_ledger(fake: FakeDynamoDB, store: RemediationStore) -> None:
    assert store.ledger(CLUSTER, GROUP) == Ledger()
    assert fake.requests["GetItem"][0]["ConsistentRead"] is True


def test_a_ledger_comes_back_as_it_was_saved(store: RemediationStore) -> None:
    saved = Ledger(
        changes=[change(1), change(2).model_copy(update={"status": "pending", "client_token": "t"})]
    )
    store.save_ledger(CLUSTER, GROUP, saved.model_copy(deep=True))
    assert store.ledger(CLUSTER, GROUP) == saved
    assert store.ledger(CLUSTER, "pcs_other001") == Ledger()


def test_a_saved_ledger_keeps_the_last_50_changes(store: RemediationStore) -> None:
    store.save_ledger(CLUSTER, GROUP, Ledger(changes=[change(n) for n in range(60)]))
    kept = store.ledger(CLUSTER, GROUP).changes
    assert [c.episode_id for c in kept] == [f"ep-{n}" for n in range(10, 60)]


def test_the_changes_a_ledger_lets_go_still_count_for_the_cap_for_a_day(store: RemediationStore) -> None:
    # A daily cap up to 100 (the stack takes that) must see 60 changes of one day although 50 are kept;
    # an undo or an abandoned intent let go was no change of remediation's, and counts for nothing.
    changes = [change(n) for n in range(60)]
    changes[0] = changes[0].model_copy(update={"action": "undo"})
    changes[1] = changes[1].model_copy(update={"status": "abandoned"})
    store.save_ledger(CLUSTER, GROUP, Ledger(changes=changes))
    ledger = store.ledger(CLUSTER, GROUP)
    assert len(ledger.changes) == 50
    assert ledger.made_since(NOW) == [NOW + n for n in range(2, 60)]
    # A day after the newest change, the times let go are let go too.
    later = change(DAY_SECONDS + 100)
    ledger.changes.append(later)
    store.save_ledger(CLUSTER, GROUP, ledger)
    kept = store.ledger(CLUSTER, GROUP)
    assert kept.let_go == []
    assert kept.made_since(NOW) == [NOW + n for n in range(11, 60)] + [later.at]


def test_a_ledger_over_300_kb_compressed_lets_its_oldest_changes_go(
    fake: FakeDynamoDB, store: RemediationStore
) -> None:
    rng = random.Random(7)
    changes = [change(n, noise(rng, 40_000)) for n in range(16)]  # ~23 KB each, compressed
    whole = Ledger(changes=changes).model_dump_json()
    assert len(zlib.compress(whole.encode(), 6)) > 300 * 1024  # the premise: too big as it is
    store.save_ledger(CLUSTER, GROUP, Ledger(changes=list(changes)))
    item = fake.items[(PK, "LEDGER")]
    assert len(item["docz"]["B"]) <= 300 * 1024
    kept = store.ledger(CLUSTER, GROUP).changes
    assert 1 <= len(kept) < len(changes)
    assert kept == changes[-len(kept) :]  # the newest, in order
    one_more = Ledger(changes=changes[-len(kept) - 1 :]).model_dump_json()
    assert len(zlib.compress(one_more.encode(), 6)) > 300 * 1024  # only as many let go as needed


def test_a_single_change_over_the_limit_is_still_kept(store: RemediationStore) -> None:
    rng = random.Random(8)
    huge = change(1, noise(rng, 700_000))
    store.save_ledger(CLUSTER, GROUP, Ledger(changes=[huge]))
    assert store.ledger(CLUSTER, GROUP).changes == [huge]


# -- decisions --


def test_a_detection_without_a_decision_has_none(store: RemediationStore) -> None:
    assert store.decision(CLUSTER, GROUP, "ep-1", 1) is None


def test_a_decision_is_kept_for_90_days_by_episode_and_revision(
    fake: FakeDynamoDB, store: RemediationStore
) -> None:
    first = Decision(status="applied", events=[{"detail-type": "RemediationApplied"}], published=True)
    second = Decision(status="skipped", deliveries=3)
    other = Decision(status="failed")
    store.save_decision(CLUSTER, GROUP, ("ep-1", 1), decision=first, now=NOW)
    store.save_decision(CLUSTER, GROUP, ("ep-1", 2), decision=second, now=NOW + 5)
    store.save_decision(CLUSTER, GROUP, ("ep-2", 1), decision=other, now=NOW)
    assert store.decision(CLUSTER, GROUP, "ep-1", 1) == first
    assert store.decision(CLUSTER, GROUP, "ep-1", 2) == second
    assert store.decision(CLUSTER, GROUP, "ep-2", 1) == other
    assert store.decision(CLUSTER, GROUP, "ep-1", 3) is None
    assert store.decision(CLUSTER, "pcs_other001", "ep-1", 1) is None
    item = fake.items[(PK, "DECISION#ep-1#0002")]
    assert int(item["expires_at"]["N"]) == int(NOW + 5 + NINETY_DAYS)


def test_saving_a_decision_again_replaces_it(store: RemediationStore) -> None:
    store.save_decision(CLUSTER, GROUP, ("ep-1", 1), decision=Decision(status="applied"), now=NOW)
    store.save_decision(
        CLUSTER, GROUP, ("ep-1", 1), decision=Decision(status="applied", deliveries=2), now=NOW
    )
    found = store.decision(CLUSTER, GROUP, "ep-1", 1)
    assert found is not None
    assert found.deliveries == 2


# -- the audit trail --


def entry(at: float, decision: str = "applied", **more: Any) -> AuditEntry:
    return AuditEntry(at=at, decision=decision, episode_id="ep-1", revision=1, **more)


def test_two_entries_of_the_same_millisecond_are_both_kept(
    fake: FakeDynamoDB, store: RemediationStore
) -> None:
    store.audit(CLUSTER, GROUP, entry(NOW, "duplicate"))
    store.audit(CLUSTER, GROUP, entry(NOW, "duplicate"))
    audit_keys = [sk for pk, sk in fake.items if pk == PK and sk.startswith("AUDIT#")]
    assert len(audit_keys) == 2
    assert store.history(CLUSTER, GROUP) == [entry(NOW, "duplicate"), entry(NOW, "duplicate")]


def test_an_audit_entry_expires_90_days_after_it_was_made(
    fake: FakeDynamoDB, store: RemediationStore
) -> None:
    store.audit(CLUSTER, GROUP, entry(NOW))
    ((_, item),) = [(k, v) for k, v in fake.items.items() if k[1].startswith("AUDIT#")]
    assert int(item["expires_at"]["N"]) == int(NOW + NINETY_DAYS)


def test_history_is_oldest_first_and_last_n_is_the_newest_n_oldest_first(
    fake: FakeDynamoDB, store: RemediationStore
) -> None:
    entries = [entry(NOW + n, reason=f"#{n}") for n in range(5)]
    for n in (3, 0, 4, 1, 2):
        store.audit(CLUSTER, GROUP, entries[n])
    store.audit(CLUSTER, "pcs_other001", entry(NOW + 10, reason="another group"))
    assert store.history(CLUSTER, GROUP) == entries
    assert store.history(CLUSTER, GROUP, last=2) == entries[3:]
    assert store.history(CLUSTER, GROUP, last=10) == entries
    query = fake.requests["Query"][-1]
    assert (query["ScanIndexForward"], query["Limit"]) == (False, 10)
    assert store.history(CLUSTER, "pcs_nothing01") == []


def test_a_large_audit_entry_is_stored_compressed_and_read_back(
    fake: FakeDynamoDB, store: RemediationStore
) -> None:
    rng = random.Random(9)
    small = entry(NOW)
    large = entry(NOW + 1, config_before=noise(rng, 80_000), config_after={"stages": {}})
    store.audit(CLUSTER, GROUP, small)
    store.audit(CLUSTER, GROUP, large)
    items = [item for (pk, sk), item in sorted(fake.items.items()) if sk.startswith("AUDIT#")]
    assert set(items[0]) >= {"doc"}
    assert "docz" not in items[0]
    assert set(items[1]) >= {"docz"}
    assert "doc" not in items[1]
    assert len(items[1]["docz"]["B"]) < len(large.model_dump_json())
    assert json.loads(zlib.decompress(items[1]["docz"]["B"]))["config_before"] == large.config_before
    assert store.history(CLUSTER, GROUP) == [small, large]


# -- errors --


@pytest.mark.parametrize(
    ("operation", "call"),
    [
        ("GetItem", lambda s: s.ledger(CLUSTER, GROUP)),
        ("GetItem", lambda s: s.decision(CLUSTER, GROUP, "ep-1", 1)),
        ("PutItem", lambda s: s.save_ledger(CLUSTER, GROUP, Ledger())),
        (
            "PutItem",
            lambda s: s.save_decision(CLUSTER, GROUP, ("ep-1", 1), decision=Decision(status="x"), now=NOW),
        ),
        ("PutItem", lambda s: s.audit(CLUSTER, GROUP, entry(NOW))),
        ("PutItem", lambda s: s.acquire(CLUSTER, GROUP, "a", NOW, LEASE)),
        ("Query", lambda s: s.history(CLUSTER, GROUP)),
    ],
)
def test_a_failed_call_raises_an_aws_call_error_naming_the_operation(
    fake: FakeDynamoDB, store: RemediationStore, operation: str, call: Any
) -> None:
    fake.fail[operation] = [client_error("ProvisionedThroughputExceededException", operation, "too fast")]
    with pytest.raises(AwsCallError) as raised:
        call(store)
    assert raised.value.operation == operation
    assert raised.value.code == "ProvisionedThroughputExceededException"
    assert str(raised.value) == f"{operation} failed: ProvisionedThroughputExceededException: too fast"
    assert fake.calls(operation) == 1
