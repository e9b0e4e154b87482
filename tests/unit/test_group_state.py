"""A group's state: its bounds (prune), its clock corrections (forget_after), and how the store keeps it:
one compressed item written on its version, remembered between batches, read back exactly."""

from __future__ import annotations

import zlib
from typing import Any

import pytest

from lifeguard.errors import AwsCallError
from lifeguard.group_state import (
    OUTCOME_LIMIT,
    REPORT_TTL_SECONDS,
    BootOutcome,
    Episode,
    Failure,
    GroupState,
    KnownConfig,
    StateStore,
    VersionConflictError,
    group_key,
)
from lifeguard.node_report import NodeReport
from tests.unit.fakes import FakeDynamoDB, client_error
from tests.unit.test_node_report import REPORT

CLUSTER, GROUP = "pcs_abc123de45", "pcs_abcdef01"
T0 = 1792544247000
HOUR_MS = 3600 * 1000


def state_with(outcomes: int = 0, launches: dict[str, int] | None = None) -> GroupState:
    state = GroupState(cluster_id=CLUSTER, group_id=GROUP, launches=dict(launches or {}))
    for n in range(outcomes):
        state.outcomes[f"i-{n:04d}"] = BootOutcome(f"i-{n:04d}", "lca-static-1", T0 + n * 1000, n % 2 == 0)
    return state


def test_prune_keeps_the_most_recent_outcomes_and_forgets_the_cached_oldest() -> None:
    state = state_with(OUTCOME_LIMIT + 5)
    assert state.oldest_outcome_at() == T0
    state.prune()
    assert len(state.outcomes) == OUTCOME_LIMIT
    assert "i-0004" not in state.outcomes
    assert "i-0005" in state.outcomes
    assert state.oldest_outcome_at() == T0 + 5000


def test_prune_breaks_timestamp_ties_by_instance_id() -> None:
    state = GroupState(cluster_id=CLUSTER, group_id=GROUP)
    for n in reversed(range(OUTCOME_LIMIT + 1)):
        state.outcomes[f"i-{n:04d}"] = BootOutcome(f"i-{n:04d}", None, T0, False)
    state.prune()
    assert "i-0000" not in state.outcomes
    assert sorted(state.outcomes) == [f"i-{n:04d}" for n in range(1, OUTCOME_LIMIT + 1)]


def test_prune_keeps_only_launches_still_waiting_within_the_hour() -> None:
    state = state_with(
        1,
        launches={
            "i-0000": T0 - 60_000,  # its outcome arrived
            "i-stale": T0 + 2 * HOUR_MS - HOUR_MS - 1,  # more than an hour before the newest
            "i-edge": T0 + 2 * HOUR_MS - HOUR_MS,  # exactly an hour before the newest: kept
            "i-new": T0 + 2 * HOUR_MS,
        },
    )
    state.prune()
    assert state.launches == {"i-edge": T0 + HOUR_MS, "i-new": T0 + 2 * HOUR_MS}


def test_prune_caps_pending_launches_at_the_newest_thousand_in_time_order() -> None:
    state = state_with(launches={f"i-{n:05d}": T0 + n for n in range(1200)})
    state.prune()
    assert len(state.launches) == 1000
    assert min(state.launches.values()) == T0 + 200
    assert list(state.launches.values()) == sorted(state.launches.values())


def test_prune_of_an_empty_state_changes_nothing() -> None:
    state = state_with()
    state.prune()
    assert (state.outcomes, state.launches, state.oldest_outcome_at()) == ({}, {}, None)


def test_forget_after_drops_what_is_dated_later_and_says_whether_it_did() -> None:
    state = state_with(3, launches={"i-late": T0 + 10_000, "i-early": T0})
    assert state.oldest_outcome_at() == T0
    assert state.forget_after(T0 + 1000) is True
    assert sorted(state.outcomes) == ["i-0000", "i-0001"]
    assert state.launches == {"i-early": T0}
    assert state.forget_after(T0 + 1000) is False
    assert state.forget_after(T0 - 1) is True
    assert state.outcomes == {}
    assert state.oldest_outcome_at() is None


def test_launched_at_prefers_the_outcomes_own_launch_time_then_the_pending_launch() -> None:
    state = state_with(launches={"i-a": T0 - 5000})
    assert state.launched_at(BootOutcome("i-a", None, T0, True, launched_at=T0 - 9000)) == T0 - 9000
    assert state.launched_at(BootOutcome("i-a", None, T0, True)) == T0 - 5000
    assert state.launched_at(BootOutcome("i-b", None, T0, True)) is None


def test_outcomes_are_stored_as_rows_and_read_back_the_same() -> None:
    state = state_with(2)
    state.outcomes["i-0001"].launched_at = T0 - 1
    dumped = state.model_dump(mode="json")
    assert dumped["outcomes"] == [
        ["i-0000", "lca-static-1", T0, 1, None],
        ["i-0001", "lca-static-1", T0 + 1000, 0, T0 - 1],
    ]
    assert GroupState.model_validate_json(state.model_dump_json()).outcomes == state.outcomes


def full_state() -> GroupState:
    state = state_with(3, launches={"i-pending": T0 + 5000})
    state.config = KnownConfig(
        modified_at=T0, fingerprint="f" * 16, node_lifecycle_actions={"stages": {}}, checked_at=T0
    )
    state.episode = Episode(
        episode_id="ep-1",
        kind="loop",
        opened_at=T0,
        failures=[Failure(instance_id="i-0001", event_timestamp=T0 + 1000)],
    )
    state.outbox.append({"detail-type": "LoopResolved", "detail": {}, "key": "k", "queued_at": 1.0})
    return state


def test_a_saved_state_is_one_compressed_item_that_loads_back_equal() -> None:
    client = FakeDynamoDB()
    store = StateStore(client, "table")
    state = full_state()
    store.save(state)
    assert state.version == 1
    item = client.items[(group_key(CLUSTER, GROUP), "STATE")]
    assert item["version"] == {"N": "1"}
    assert b"i-pending" in zlib.decompress(item["state"]["B"])
    loaded = StateStore(client, "table").load(CLUSTER, GROUP)
    assert loaded.model_dump() == state.model_dump()


def test_a_state_item_written_as_plain_json_is_read_too() -> None:
    client = FakeDynamoDB()
    body = full_state().model_dump_json(exclude={"version"})
    client.items[(group_key(CLUSTER, GROUP), "STATE")] = {
        "pk": {"S": group_key(CLUSTER, GROUP)},
        "sk": {"S": "STATE"},
        "version": {"N": "7"},
        "state": {"S": body},
    }
    loaded = StateStore(client, "table").load(CLUSTER, GROUP)
    assert loaded.version == 7
    assert loaded.episode is not None
    assert loaded.episode.failures[0].instance_id == "i-0001"


def test_a_group_never_seen_loads_as_a_fresh_state() -> None:
    loaded = StateStore(FakeDynamoDB(), "table").load(CLUSTER, GROUP)
    assert (loaded.cluster_id, loaded.group_id, loaded.version, loaded.outcomes) == (CLUSTER, GROUP, 0, {})


def test_the_second_writer_of_a_version_gets_a_conflict_and_the_first_write_stands() -> None:
    client = FakeDynamoDB()
    first, second = StateStore(client, "table"), StateStore(client, "table")
    mine, theirs = first.load(CLUSTER, GROUP), second.load(CLUSTER, GROUP)
    mine.launches["i-mine"] = T0
    theirs.launches["i-theirs"] = T0
    first.save(mine)
    with pytest.raises(VersionConflictError):
        second.save(theirs)
    assert theirs.version == 0
    assert StateStore(client, "table").load(CLUSTER, GROUP).launches == {"i-mine": T0}


def test_save_prunes_before_writing() -> None:
    client = FakeDynamoDB()
    state = state_with(OUTCOME_LIMIT + 10)
    StateStore(client, "table").save(state)
    assert len(StateStore(client, "table").load(CLUSTER, GROUP).outcomes) == OUTCOME_LIMIT


def test_a_failed_read_is_one_aws_call_error_with_the_service_code() -> None:
    client = FakeDynamoDB()
    client.fail["GetItem"] = [client_error("ProvisionedThroughputExceededException", "GetItem", "slow down")]
    with pytest.raises(AwsCallError) as raised:
        StateStore(client, "table").load(CLUSTER, GROUP)
    assert (raised.value.operation, raised.value.code) == (
        "GetItem",
        "ProvisionedThroughputExceededException",
    )


def test_load_many_reads_remembered_states_from_memory_and_the_rest_100_at_a_time() -> None:
    client = FakeDynamoDB()
    writer = StateStore(client, "table")
    for n in range(3):
        writer.save(GroupState(cluster_id=CLUSTER, group_id=f"pcs_g{n}", launches={"i-x": n}))
    reader = StateStore(client, "table")
    remembered = GroupState(cluster_id=CLUSTER, group_id="pcs_mem")
    reader.save(remembered)
    keys = [(CLUSTER, f"pcs_g{n}") for n in range(150)] + [(CLUSTER, "pcs_mem")]
    found = reader.load_many(keys)
    assert list(found) == keys
    assert found[(CLUSTER, "pcs_mem")] is remembered
    assert found[(CLUSTER, "pcs_g2")].launches == {"i-x": 2}
    assert found[(CLUSTER, "pcs_g2")].version == 1
    assert found[(CLUSTER, "pcs_g149")].version == 0
    sizes = [len(r["RequestItems"]["table"]["Keys"]) for r in client.requests["BatchGetItem"]]
    assert sizes == [100, 50]


def test_load_many_asks_again_for_unprocessed_keys_and_gives_up_after_ten_rounds() -> None:
    client = FakeDynamoDB()
    StateStore(client, "table").save(GroupState(cluster_id=CLUSTER, group_id="pcs_g1", launches={"i-x": 1}))
    client.unprocessed = 1
    keys = [(CLUSTER, "pcs_g0"), (CLUSTER, "pcs_g1")]
    with pytest.raises(AwsCallError) as raised:
        StateStore(client, "table").load_many(keys)
    assert raised.value.code == "UnprocessedKeys"
    assert client.calls("BatchGetItem") == 10


def test_save_many_returns_the_states_of_a_transaction_that_lost_a_race() -> None:
    client = FakeDynamoDB()
    store = StateStore(client, "table")
    states = [GroupState(cluster_id=CLUSTER, group_id=f"pcs_g{n}") for n in range(150)]
    stale = StateStore(client, "table").load(CLUSTER, "pcs_g120")
    StateStore(client, "table").save(stale)  # someone else wrote group 120 first
    unwritten = store.save_many(states)
    assert [s.group_id for s in unwritten] == [f"pcs_g{n}" for n in range(100, 150)]
    assert {s.version for s in states[:100]} == {1}
    assert {s.version for s in unwritten} == {0}
    assert client.calls("TransactWriteItems") == 2
    # The losers are not remembered: the next read of them goes to the table.
    found = store.load_many([(CLUSTER, "pcs_g120"), (CLUSTER, "pcs_g5")])
    assert found[(CLUSTER, "pcs_g120")] is not unwritten[20]
    assert found[(CLUSTER, "pcs_g5")] is states[5]


def report(**changed: Any) -> NodeReport:
    """The node-report tests' failed run (the article's), with `changed` fields."""
    return NodeReport.model_validate(
        {**REPORT, "cluster_id": CLUSTER, "compute_node_group_id": GROUP, **changed}
    )


def test_put_reports_stores_each_run_once_in_batches_of_25_and_expires_them() -> None:
    client = FakeDynamoDB()
    store = StateStore(client, "table")
    runs = [report(started_at=1792544247 + n, ended_at=None) for n in range(30)]
    assert store.put_reports([*runs, runs[0], runs[1]]) == 30
    assert [len(r["RequestItems"]["table"]) for r in client.requests["BatchWriteItem"]] == [25, 5]
    item = client.items[
        (
            group_key(CLUSTER, GROUP),
            "REPORT#i-059b4b99b4f2e9739#000001#nodeBootstrapped#fail-terminate#1792544247",
        )
    ]
    assert item["expires_at"] == {"N": str(1792544247 + REPORT_TTL_SECONDS)}
    assert sorted(r.started_at for r in store.reports(CLUSTER, GROUP)) == [r.started_at for r in runs]


def test_put_reports_sends_unprocessed_items_again_and_gives_up_after_ten_rounds() -> None:
    client = FakeDynamoDB()
    client.unprocessed = 2
    with pytest.raises(AwsCallError) as raised:
        StateStore(client, "table").put_reports([report(started_at=1792544247 + n) for n in range(3)])
    assert raised.value.code == "UnprocessedItems"
    assert client.calls("BatchWriteItem") == 10


def test_reports_and_all_states_follow_every_page() -> None:
    client = FakeDynamoDB()
    client.page_size = 2
    store = StateStore(client, "table")
    store.put_reports([report(started_at=1792544247 + n) for n in range(5)])
    for group in ("pcs_b", "pcs_a", "pcs_c"):
        store.save(GroupState(cluster_id=CLUSTER, group_id=group))
    assert len(store.reports(CLUSTER, GROUP)) == 5
    assert client.calls("Query") == 3
    assert [s.group_id for s in store.all_states()] == ["pcs_a", "pcs_b", "pcs_c"]
    assert store.reports(CLUSTER, "pcs_other") == []


def test_put_reports_stores_more_than_250_runs_when_none_is_left_unprocessed() -> None:
    client = FakeDynamoDB()
    runs = [report(started_at=1792544247 + n) for n in range(251)]
    assert StateStore(client, "table").put_reports(runs) == 251
    assert client.calls("BatchWriteItem") == 11
