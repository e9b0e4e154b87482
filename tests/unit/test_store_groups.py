"""The group store over the table: a state as one compressed, versioned item (a second writer of a version
loses), many states read 100 at a time and written in transactions, node reports stored once each, every
page followed, and a failed call one AwsCallError."""

from __future__ import annotations

import json
import zlib
from typing import Any

import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st

from lifeguard.errors import AwsCallError
from lifeguard.group_state import (
    OUTCOME_LIMIT,
    PENDING_LAUNCH_LIMIT,
    BootOutcome,
    Episode,
    Failure,
    GroupState,
    KnownConfig,
)
from lifeguard.node_report import NodeReport
from lifeguard.store import groups as groups_store
from lifeguard.store.groups import (
    MAP_CHANGES_MAX,
    REPORT_TTL_SECONDS,
    RUNS_READ_MAX,
    GroupStore,
    VersionConflictError,
)
from lifeguard.store.table import group_key
from tests.unit.fakes import TRANSACTION_BYTES, FakeDynamoDB, client_error, item_size
from tests.unit.test_group_state import CLUSTER, GROUP, T0, state_with
from tests.unit.test_node_report import REPORT


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
    store = GroupStore(client, "table")
    state = full_state()
    store.save(state)
    assert state.version == 1
    item = client.items[(group_key(CLUSTER, GROUP), "STATE")]
    assert item["version"] == {"N": "1"}
    assert b"i-pending" not in zlib.decompress(item["state"]["B"])  # the launches have their own map
    assert item["launches"] == {"M": {"i-pending": {"N": str(T0 + 5000)}}}
    loaded = GroupStore(client, "table").load(CLUSTER, GROUP)
    assert loaded.model_dump() == state.model_dump()


def test_a_state_written_again_sends_only_the_launches_that_changed() -> None:
    client = FakeDynamoDB()
    store = GroupStore(client, "table")
    state = full_state()
    state.launches.update({f"i-wait{n:03d}": T0 + n for n in range(300)})
    store.save(state)
    state.launches["i-new"] = T0 + 9000
    del state.launches["i-wait007"]
    store.save(state)
    update = client.requests["UpdateItem"][-1]
    values = update["ExpressionAttributeValues"]
    sent = [value for name, value in values.items() if name not in (":expected", ":next")]
    assert sent == [{"N": str(T0 + 9000)}]  # one launch added, one gone: not the 300 still waiting
    assert "i-wait007" in update["ExpressionAttributeNames"].values()
    assert "state" not in update["ExpressionAttributeNames"].values()  # the rest did not change
    loaded = GroupStore(client, "table").load(CLUSTER, GROUP)
    assert (loaded.version, loaded.launches) == (2, state.launches)
    assert loaded.model_dump() == state.model_dump()
    # Too many changes for one update expression: the whole state is put again.
    state.launches = {f"i-next{n:03d}": T0 + n for n in range(150)}
    store.save(state)
    assert client.calls("PutItem") == 2
    assert GroupStore(client, "table").load(CLUSTER, GROUP).launches == state.launches


def test_outcomes_are_a_map_of_their_own_and_the_rest_is_sent_only_when_it_changed() -> None:
    client = FakeDynamoDB()
    store = GroupStore(client, "table")
    state = full_state()
    store.save(state)
    item = client.items[(group_key(CLUSTER, GROUP), "STATE")]
    assert json.loads(item["outcomes"]["M"]["i-0001"]["S"]) == ["lca-static-1", T0 + 1000, 0, None]
    assert b"i-0001" not in zlib.decompress(item["state"]["B"]).split(b'"episode"')[0]
    state.outcomes["i-0009"] = BootOutcome("i-0009", None, T0 + 9000, True, T0 + 8000)
    assert state.episode is not None
    state.episode.revision = 2
    store.save(state)
    update = client.requests["UpdateItem"][-1]
    assert set(update["ExpressionAttributeNames"].values()) >= {"state", "outcomes", "i-0009"}
    loaded = GroupStore(client, "table").load(CLUSTER, GROUP)
    assert loaded.model_dump() == state.model_dump()
    assert loaded.outcomes["i-0009"] == BootOutcome("i-0009", None, T0 + 9000, True, T0 + 8000)


def test_a_change_of_the_maps_alone_is_written_without_writing_the_rest_out_again(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    client = FakeDynamoDB()
    store = GroupStore(client, "table")
    state = full_state()
    store.save(state)
    written_out: list[str] = []
    dump = GroupState.model_dump_json
    monkeypatch.setattr(
        GroupState, "model_dump_json", lambda self, **kw: written_out.append("x") or dump(self, **kw)
    )
    monkeypatch.setattr("lifeguard.group_state.CHECK_MAPS_ONLY", False)
    state.launches["i-new"] = T0 + 9000
    state.changed_maps_only(True)
    store.save(state)
    assert written_out == []
    update = client.requests["UpdateItem"][-1]
    assert "state" not in update["ExpressionAttributeNames"].values()
    assert GroupStore(client, "table").load(CLUSTER, GROUP).model_dump() == state.model_dump()
    # The claim holds for one write: the next one writes the rest out to compare, unless told again.
    state.launches["i-newer"] = T0 + 9001
    store.save(state)
    assert written_out == ["x"]


def test_a_claim_of_maps_alone_that_is_wrong_fails_the_tests_instead_of_losing_the_change() -> None:
    client = FakeDynamoDB()
    store = GroupStore(client, "table")
    state = full_state()
    store.save(state)
    assert state.episode is not None
    state.episode.add_signal("node_reports")
    state.changed_maps_only(True)
    with pytest.raises(AssertionError, match="changed beyond its maps"):
        store.save(state)


def test_no_claim_of_maps_alone_holds_for_a_state_never_stored_or_once_unhealthy_are_trimmed() -> None:
    fresh = full_state()
    fresh.changed_maps_only(True)
    assert fresh.unchanged_body() is None  # never stored: there is nothing to take the rest from
    client = FakeDynamoDB()
    store = GroupStore(client, "table")
    state = full_state()
    state.unhealthy = {f"i-sick{n:04d}": T0 + n for n in range(OUTCOME_LIMIT)}
    store.save(state)
    state.unhealthy["i-sicker"] = T0 + 10_000  # over the bound: the save trims the oldest away
    state.changed_maps_only(True)
    store.save(state)  # a wrong claim would fail here (the tests check every one)
    assert "i-sick0000" not in GroupStore(client, "table").load(CLUSTER, GROUP).unhealthy


def test_an_update_over_a_version_that_moved_is_a_conflict() -> None:
    client = FakeDynamoDB()
    first, second = GroupStore(client, "table"), GroupStore(client, "table")
    first.save(full_state())
    mine, theirs = first.load(CLUSTER, GROUP), second.load(CLUSTER, GROUP)
    mine.launches["i-mine"] = T0
    first.save(mine)
    theirs.launches["i-theirs"] = T0
    with pytest.raises(VersionConflictError):
        second.save(theirs)
    assert client.calls("UpdateItem") == 2
    assert "i-theirs" not in GroupStore(client, "table").load(CLUSTER, GROUP).launches


def test_a_state_item_written_as_plain_json_is_read_too() -> None:
    client = FakeDynamoDB()
    body = full_state().model_dump_json(exclude={"version"})
    client.items[(group_key(CLUSTER, GROUP), "STATE")] = {
        "pk": {"S": group_key(CLUSTER, GROUP)},
        "sk": {"S": "STATE"},
        "version": {"N": "7"},
        "state": {"S": body},
    }
    loaded = GroupStore(client, "table").load(CLUSTER, GROUP)
    assert loaded.version == 7
    assert loaded.launches == {"i-pending": T0 + 5000}  # written before launches had their own map
    assert loaded.episode is not None
    assert loaded.episode.failures[0].instance_id == "i-0001"


def test_a_group_never_seen_loads_as_a_fresh_state() -> None:
    loaded = GroupStore(FakeDynamoDB(), "table").load(CLUSTER, GROUP)
    assert (loaded.cluster_id, loaded.group_id, loaded.version, loaded.outcomes) == (CLUSTER, GROUP, 0, {})


def test_the_second_writer_of_a_version_gets_a_conflict_and_the_first_write_stands() -> None:
    client = FakeDynamoDB()
    first, second = GroupStore(client, "table"), GroupStore(client, "table")
    mine, theirs = first.load(CLUSTER, GROUP), second.load(CLUSTER, GROUP)
    mine.launches["i-mine"] = T0
    theirs.launches["i-theirs"] = T0
    first.save(mine)
    with pytest.raises(VersionConflictError):
        second.save(theirs)
    assert theirs.version == 0
    assert GroupStore(client, "table").load(CLUSTER, GROUP).launches == {"i-mine": T0}


def test_save_prunes_before_writing() -> None:
    client = FakeDynamoDB()
    state = state_with(OUTCOME_LIMIT + 10)
    GroupStore(client, "table").save(state)
    assert len(GroupStore(client, "table").load(CLUSTER, GROUP).outcomes) == OUTCOME_LIMIT


def test_a_failed_read_is_one_aws_call_error_with_the_service_code() -> None:
    client = FakeDynamoDB()
    client.fail["GetItem"] = [client_error("ProvisionedThroughputExceededException", "GetItem", "slow down")]
    with pytest.raises(AwsCallError) as raised:
        GroupStore(client, "table").load(CLUSTER, GROUP)
    assert (raised.value.operation, raised.value.code) == (
        "GetItem",
        "ProvisionedThroughputExceededException",
    )


def test_load_many_reads_remembered_states_from_memory_and_the_rest_100_at_a_time() -> None:
    client = FakeDynamoDB()
    writer = GroupStore(client, "table")
    for n in range(3):
        writer.save(GroupState(cluster_id=CLUSTER, group_id=f"pcs_g{n}", launches={"i-x": n}))
    reader = GroupStore(client, "table")
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
    GroupStore(client, "table").save(GroupState(cluster_id=CLUSTER, group_id="pcs_g1", launches={"i-x": 1}))
    client.unprocessed = 1
    keys = [(CLUSTER, "pcs_g0"), (CLUSTER, "pcs_g1")]
    store, waits = GroupStore(client, "table"), []
    store._table.sleep = waits.append
    with pytest.raises(AwsCallError) as raised:
        store.load_many(keys)
    assert raised.value.code == "UnprocessedKeys"
    assert client.calls("BatchGetItem") == 10
    _backed_off(waits)


def _backed_off(waits: list[float]) -> None:
    """Nine waits between ten rounds, each from half to all of 50 ms doubled each round, up to a second."""
    assert len(waits) == 9
    for round_, wait in enumerate(waits, start=1):
        ceiling = min(0.05 * 2 ** (round_ - 1), 1.0)
        assert ceiling / 2 <= wait <= ceiling


def test_save_many_returns_the_states_of_a_transaction_that_lost_a_race() -> None:
    client = FakeDynamoDB()
    store = GroupStore(client, "table")
    states = [GroupState(cluster_id=CLUSTER, group_id=f"pcs_g{n}") for n in range(150)]
    stale = GroupStore(client, "table").load(CLUSTER, "pcs_g120")
    GroupStore(client, "table").save(stale)  # someone else wrote group 120 first
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
    store = GroupStore(client, "table")
    runs = [report(started_at=1792544247 + n, ended_at=None) for n in range(30)]
    assert store.put_reports([*runs, runs[0], runs[1]]) == 30
    assert [len(r["RequestItems"]["table"]) for r in client.requests["BatchWriteItem"]] == [25, 5]
    run = "REPORT#i-059b4b99b4f2e9739#000001#nodeBootstrapped#fail-terminate#1792544247#"
    pk = group_key(CLUSTER, GROUP)
    [item] = [item for (key, sk), item in client.items.items() if key == pk and sk.startswith(run)]
    assert item["expires_at"] == {"N": str(1792544247 + REPORT_TTL_SECONDS)}
    assert sorted(r.started_at for r in store.read_runs(CLUSTER, GROUP, marks=False).reports) == [
        r.started_at for r in runs
    ]


def test_put_reports_sends_unprocessed_items_again_and_gives_up_after_ten_rounds() -> None:
    client = FakeDynamoDB()
    client.unprocessed = 2
    store, waits = GroupStore(client, "table"), []
    store._table.sleep = waits.append
    with pytest.raises(AwsCallError) as raised:
        store.put_reports([report(started_at=1792544247 + n) for n in range(3)])
    assert raised.value.code == "UnprocessedItems"
    assert client.calls("BatchWriteItem") == 10
    _backed_off(waits)


def test_reports_and_all_states_follow_every_page() -> None:
    client = FakeDynamoDB()
    client.page_size = 2
    store = GroupStore(client, "table")
    store.put_reports([report(started_at=1792544247 + n) for n in range(5)])
    for group in ("pcs_b", "pcs_a", "pcs_c"):
        store.save(GroupState(cluster_id=CLUSTER, group_id=group))
    assert len(store.read_runs(CLUSTER, GROUP, marks=False).reports) == 5
    assert client.calls("Query") == 3
    assert [s.group_id for s in store.all_states()] == ["pcs_a", "pcs_b", "pcs_c"]
    assert store.read_runs(CLUSTER, "pcs_other", marks=False).reports == []


def test_a_group_flooded_with_runs_is_read_up_to_the_bound_and_says_so(
    monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    """A node can write any number of runs for its group: the handlers read at most RUNS_READ_MAX of them
    (no further pages), so a flood costs a bounded read, not the function's memory."""
    monkeypatch.setattr(groups_store, "RUNS_READ_MAX", 7)
    client = FakeDynamoDB()
    client.page_size = 2
    store = GroupStore(client, "table")
    store.put_reports([report(started_at=1792544247 + n) for n in range(30)])
    assert len(store.read_runs(CLUSTER, GROUP, marks=False).reports) == 7
    assert client.calls("Query") == 4  # pages of two: the fourth holds the seventh
    reports, marks, *_ = store.read_runs(CLUSTER, GROUP)
    assert (len(reports), marks) == (7, [])
    assert "reported more than 7 runs in a fortnight" in caplog.text


def test_put_reports_stores_more_than_250_runs_when_none_is_left_unprocessed() -> None:
    client = FakeDynamoDB()
    runs = [report(started_at=1792544247 + n) for n in range(251)]
    assert GroupStore(client, "table").put_reports(runs) == 251
    assert client.calls("BatchWriteItem") == 11


def test_the_cache_holds_a_thousand_groups_and_lets_the_least_recent_go_by_weight() -> None:
    client = FakeDynamoDB()
    store = GroupStore(client, "table")
    keys = [(CLUSTER, f"pcs_g{n:08d}") for n in range(1000)]
    store.save_many([GroupState(cluster_id=c, group_id=g) for c, g in keys])
    assert store.cached == 1000
    store.load_many(keys)
    assert client.calls("BatchGetItem") == 0  # a warm container's next batch reads nothing
    client = FakeDynamoDB()
    small = GroupStore(client, "table")
    small.CACHE_ENTRIES = 3 * 50 + 2  # three bare states, and two launches
    heavy = GroupState(cluster_id=CLUSTER, group_id="pcs_heavy001", launches={"i-a": T0, "i-b": T0})
    small.save_many([GroupState(cluster_id=c, group_id=g) for c, g in keys[:3]])
    small.save(heavy)
    assert small.cached == 3  # the heavy state pushed the least recently written out
    small.load_many([*keys[1:3], (CLUSTER, "pcs_heavy001")])
    assert client.calls("BatchGetItem") == 0
    small.load_many(keys[:1])
    assert client.calls("BatchGetItem") == 1


def test_a_state_written_again_is_the_most_recent_and_weighs_what_it_holds_now() -> None:
    client = FakeDynamoDB()
    store = GroupStore(client, "table")
    store.CACHE_ENTRIES = 3 * 50 + 2  # three bare states, and two launches
    first, second, third = (GroupState(cluster_id=CLUSTER, group_id=f"pcs_g{n:08d}") for n in range(3))
    store.save_many([first, second, third])
    first.launches["i-a"] = T0
    store.save(first)  # now the most recent, one launch heavier
    heavy = GroupState(cluster_id=CLUSTER, group_id="pcs_heavy001", launches={"i-b": T0})
    store.save(heavy)  # 4 x 50 + 2 is over: the least recent (second) goes, and only it
    assert store.cached == 3
    store.load_many([(CLUSTER, first.group_id), (CLUSTER, third.group_id), (CLUSTER, heavy.group_id)])
    assert client.calls("BatchGetItem") == 0
    store.load_many([(CLUSTER, second.group_id)])
    assert client.calls("BatchGetItem") == 1


def test_a_groups_failed_runs_and_marks_come_in_one_query_and_nothing_else_with_them() -> None:
    client = FakeDynamoDB()
    store = GroupStore(client, "table")
    failed = report(started_at=1792544247)
    succeeded = report(started_at=1792544300, script="ok", outcome="succeeded", exit_code=0)
    assert not succeeded.failed
    store.put_reports([failed, succeeded])
    store.save(full_state())  # the STATE item of the same partition is not a run
    reports, marks, *_ = store.read_runs(CLUSTER, GROUP)
    assert client.calls("Query") == 1
    assert reports == store.read_runs(CLUSTER, GROUP, marks=False).reports == [failed]
    assert [(m.script, m.started_at, m.outcome) for m in marks] == [("ok", 1792544300, "succeeded")]


def test_a_mark_written_under_a_nodes_own_lands_beside_it_and_takes_nothing_of_it() -> None:
    """Any node can write a report of any run: one of the same run that did not fail either, but another
    outcome or end (which dates its expiry), is a mark of its own; the node's stays as it was, and expires
    when it would have. The same report sent again is the same mark."""
    client = FakeDynamoDB()
    store = GroupStore(client, "table")
    own = report(started_at=1792544300, ended_at=1792544310, script="ok", outcome="succeeded", exit_code=0)
    forged = report(
        started_at=1792544300, ended_at=1792544300 - 14 * 86_400 + 120, script="ok", outcome="skipped"
    )
    store.put_reports([own, forged, own])
    marks = sorted(store.read_runs(CLUSTER, GROUP).marks, key=lambda m: m.outcome)
    assert [(m.script, m.started_at, m.outcome) for m in marks] == [
        ("ok", 1792544300, "skipped"),
        ("ok", 1792544300, "succeeded"),
    ]
    pk = group_key(CLUSTER, GROUP)
    expiries = {
        item["outcome"]["S"]: item["expires_at"]["N"]
        for (key, _), item in client.items.items()
        if key == pk and "outcome" in item
    }
    assert expiries == {
        "succeeded": str(1792544310 + REPORT_TTL_SECONDS),
        "skipped": str(forged.ended_or_started_at + REPORT_TTL_SECONDS),
    }


def test_a_mark_an_older_release_wrote_is_read() -> None:
    client = FakeDynamoDB()
    store = GroupStore(client, "table")
    pk = group_key(CLUSTER, GROUP)
    sk = "RAN#i-059b4b99b4f2e9739#000001#nodeBootstrapped#ok#1792544300"
    client.items[(pk, sk)] = {"pk": {"S": pk}, "sk": {"S": sk}, "outcome": {"S": "succeeded"}}
    [mark] = store.read_runs(CLUSTER, GROUP).marks
    assert (mark.script, mark.started_at, mark.outcome) == ("ok", 1792544300, "succeeded")


def test_one_instances_runs_are_read_for_themselves_and_a_full_read_says_it_is_not_complete() -> None:
    client = FakeDynamoDB()
    store = GroupStore(client, "table")
    mine = [report(started_at=1792544247), report(started_at=1792544300, script="ok", outcome="succeeded")]
    other = report(instance_id="i-0other00000000001", started_at=1792544250)
    store.put_reports([*mine, other])
    read = store.read_runs(CLUSTER, GROUP, mine[0].instance_id)
    assert (read.reports, [m.script for m in read.marks]) == ([mine[0]], ["ok"])
    assert read.reports_complete
    assert read.marks_complete
    assert store.read_runs(CLUSTER, GROUP, mine[0].instance_id, marks=False).marks == []
    assert store.read_runs(CLUSTER, GROUP).reports_complete
    store.put_reports(report(started_at=1792540000 + n, instance_id="i-0flood") for n in range(RUNS_READ_MAX))
    assert not store.read_runs(CLUSTER, GROUP).reports_complete
    assert store.read_runs(CLUSTER, GROUP, mine[0].instance_id).reports == [mine[0]]


def test_an_item_with_some_maps_reads_each_where_it_is_and_is_put_whole_next() -> None:
    client = FakeDynamoDB()
    state = full_state()
    body = state.model_dump_json(exclude={"version", "launches"})  # outcomes still in the JSON
    client.items[(group_key(CLUSTER, GROUP), "STATE")] = {
        **{"pk": {"S": group_key(CLUSTER, GROUP)}, "sk": {"S": "STATE"}},
        "version": {"N": "3"},
        "state": {"B": zlib.compress(body.encode())},
        "launches": {"M": {"i-pending": {"N": str(T0 + 5000)}}},
    }
    store = GroupStore(client, "table")
    loaded = store.load(CLUSTER, GROUP)
    assert (loaded.launches, sorted(loaded.outcomes)) == ({"i-pending": T0 + 5000}, sorted(state.outcomes))
    store.save(loaded)
    assert client.calls("PutItem") == 1
    assert "outcomes" in client.items[(group_key(CLUSTER, GROUP), "STATE")]


def state_item(client: FakeDynamoDB) -> dict[str, Any]:
    """The group's state item as the table holds it."""
    return client.items[(group_key(CLUSTER, GROUP), "STATE")]


def stored_body(client: FakeDynamoDB) -> dict[str, Any]:
    """The rest of the state as the table's item holds it."""
    body: dict[str, Any] = json.loads(zlib.decompress(state_item(client)["state"]["B"]))
    return body


def saved(client: FakeDynamoDB) -> tuple[GroupStore, GroupState, KnownConfig]:
    """A store over `client`, the full state it saved, and that state's configuration."""
    store = GroupStore(client, "table")
    state = full_state()
    store.save(state)
    assert state.config is not None
    return store, state, state.config


def confirmed(store: GroupStore, state: GroupState, at: int) -> None:
    """Save the state as a read of PCS that found the group as it was at `at` leaves it."""
    assert state.config is not None
    state.config.checked_at = at
    state.changed_maps_only(True)
    store.save(state)


def test_a_configuration_confirmed_as_it_was_sends_its_time_alone_until_the_rest_is_written() -> None:
    client = FakeDynamoDB()
    store, state, _ = saved(client)
    # A read of PCS found the group as it was: the launches and when it was confirmed moved, nothing else.
    state.launches["i-new"] = T0 + 61_000
    confirmed(store, state, T0 + 60_000)
    update = client.requests["UpdateItem"][-1]
    assert "state" not in update["ExpressionAttributeNames"].values()
    assert update["ExpressionAttributeValues"][":checked"] == {"N": str(T0 + 60_000)}
    assert state_item(client)["checked_at"] == {"N": str(T0 + 60_000)}
    assert state_item(client)["checked_version"] == state_item(client)["version"] == {"N": "2"}
    assert stored_body(client)["config"]["checked_at"] == T0  # the body as it was
    # A later write of the launches alone keeps the time good at its version.
    state.launches["i-newer"] = T0 + 62_000
    state.changed_maps_only(True)
    store.save(state)
    assert state_item(client)["checked_version"] == state_item(client)["version"] == {"N": "3"}
    loaded = GroupStore(client, "table").load(CLUSTER, GROUP)
    assert loaded.config is not None
    assert loaded.config.checked_at == T0 + 60_000
    assert loaded.model_dump() == state.model_dump()
    # Loaded by another container, confirmed again: the time alone again.
    confirmed(GroupStore(client, "table"), loaded, T0 + 120_000)
    assert state_item(client)["checked_at"] == {"N": str(T0 + 120_000)}
    # A change of the rest writes it, with the time in it, and the time on its own goes.
    again = GroupStore(client, "table").load(CLUSTER, GROUP)
    assert again.episode is not None
    again.episode.revision = 2
    GroupStore(client, "table").save(again)
    assert "checked_at" not in state_item(client)
    assert "checked_version" not in state_item(client)
    assert stored_body(client)["config"]["checked_at"] == T0 + 120_000
    assert GroupStore(client, "table").load(CLUSTER, GROUP).model_dump() == again.model_dump()


def test_a_time_left_out_of_date_by_a_write_that_did_not_know_it_is_ignored_and_then_removed() -> None:
    client = FakeDynamoDB()
    store, state, _ = saved(client)
    confirmed(store, state, T0 + 60_000)
    # An older release (a deploy under way, a rollback) writes the rest, with a later time, on the next
    # version, and leaves the attributes it does not know as they were.
    item = state_item(client)
    body = {**stored_body(client), "config": {**stored_body(client)["config"], "checked_at": T0 + 120_000}}
    item["state"] = {"B": zlib.compress(json.dumps(body).encode())}
    item["version"] = {"N": str(int(item["version"]["N"]) + 1)}
    loaded = GroupStore(client, "table").load(CLUSTER, GROUP)
    assert loaded.config is not None
    assert loaded.config.checked_at == T0 + 120_000  # the body's: the time on its own is out of date
    assert loaded.episode is not None
    loaded.episode.revision = 2
    GroupStore(client, "table").save(loaded)
    assert "checked_at" not in state_item(client)
    assert "checked_version" not in state_item(client)
    assert GroupStore(client, "table").load(CLUSTER, GROUP).model_dump() == loaded.model_dump()


@pytest.mark.parametrize("held_apart", [True, False])
def test_a_state_put_whole_takes_the_time_its_configuration_was_confirmed_into_the_rest(
    held_apart: bool,
) -> None:
    client = FakeDynamoDB()
    store, state, _ = saved(client)
    if held_apart:
        confirmed(store, state, T0 + 60_000)
        assert "checked_at" in state_item(client)
    # Too many changes for an update, claimed as maps alone: the item is put whole, the time in its body.
    state.launches.update({f"i-many{n:03d}": T0 + n for n in range(MAP_CHANGES_MAX + 1)})
    confirmed(store, state, T0 + 60_000)
    assert client.calls("PutItem") == 2
    assert "checked_at" not in state_item(client)
    assert stored_body(client)["config"]["checked_at"] == T0 + 60_000
    assert GroupStore(client, "table").load(CLUSTER, GROUP).model_dump() == state.model_dump()


def test_more_entries_gone_than_an_update_may_hold_put_the_item_whole() -> None:
    client = FakeDynamoDB()
    store, state, _ = saved(client)
    state.launches.update({f"i-old{n:03d}": T0 + n for n in range(MAP_CHANGES_MAX + 1)})
    store.save(state)
    puts = client.calls("PutItem")
    state.launches.clear()
    store.save(state)
    assert client.calls("PutItem") == puts + 1
    assert GroupStore(client, "table").load(CLUSTER, GROUP).launches == {}


@pytest.mark.parametrize("gone", [0, 40, MAP_CHANGES_MAX])
def test_an_update_carries_as_many_changes_of_one_map_as_it_may_hold(gone: int) -> None:
    client = FakeDynamoDB()
    store, state, _ = saved(client)
    state.launches.update({f"i-old{n:03d}": T0 + n for n in range(MAP_CHANGES_MAX)})
    store.save(state)
    for n in range(gone):
        del state.launches[f"i-old{n:03d}"]
    state.launches.update({f"i-new{n:03d}": T0 + n for n in range(MAP_CHANGES_MAX - gone)})
    store.save(state)
    assert client.calls("PutItem") == 1  # the first save: the rest are updates
    entries = [
        name for name in client.requests["UpdateItem"][-1]["ExpressionAttributeNames"] if "#m0" in name
    ]
    assert len(entries) == 1 + MAP_CHANGES_MAX  # the map's name, and every launch added or gone
    assert GroupStore(client, "table").load(CLUSTER, GROUP).launches == state.launches


@pytest.mark.parametrize("body", [True, False])
def test_an_update_of_as_many_changes_as_it_may_hold_is_an_expression_dynamodb_takes(body: bool) -> None:
    client = FakeDynamoDB()
    store, state, config = saved(client)
    if not body:
        confirmed(store, state, T0 + 60_000)  # the time on its own, which the next write moves again
    # As many changes as an update may hold, all sets (longer than removals; each map's placeholders are
    # as long as the other's), and beside them what else it may carry: the body and the removal of the
    # time held apart, or the time again.
    if body:
        config.status = "UPDATING"
    else:
        config.checked_at = T0 + 120_000
        state.changed_maps_only(True)
    state.launches.update({f"i-{n:017x}": T0 + n for n in range(MAP_CHANGES_MAX)})
    store.save(state)
    expression = client.requests["UpdateItem"][-1]["UpdateExpression"]
    assert len(expression.encode()) <= 4096, len(expression)  # DynamoDB's bounds on an expression
    operators = expression.count("=") + expression.count(".")  # the most DynamoDB may count as operators
    assert operators <= 300, operators
    assert ("#s = :state" in expression) is body
    assert GroupStore(client, "table").load(CLUSTER, GROUP).model_dump() == state.model_dump()


def test_a_claim_of_maps_alone_hides_no_other_change_of_the_configuration() -> None:
    store, state, config = saved(FakeDynamoDB())
    config.status = "UPDATING"
    with pytest.raises(AssertionError, match="changed beyond its maps"):
        confirmed(store, state, T0 + 60_000)


@pytest.mark.parametrize(
    "held", [{"N": "1.5e12"}, {"N": "99999999999999999"}, {"S": "later"}, {"N": "-1"}, {"N": "1²"}]
)
def test_a_time_of_confirmation_the_item_holds_out_of_bounds_is_not_taken(held: dict[str, str]) -> None:
    client = FakeDynamoDB()
    saved(client)
    state_item(client)["checked_at"] = held
    state_item(client)["checked_version"] = state_item(client)["version"]
    loaded = GroupStore(client, "table").load(CLUSTER, GROUP)
    assert loaded.config is not None
    assert loaded.config.checked_at == T0  # the body's


@settings(max_examples=200, deadline=None)
@given(
    node=st.none() | st.text(max_size=8),
    at=st.integers(min_value=-(2**70), max_value=2**70),
    succeeded=st.booleans(),
    launched=st.none() | st.integers(min_value=-(2**70), max_value=2**70),
)
@example(node='a"b\\c\n\u2028é\ud800', at=0, succeeded=True, launched=None)
def test_an_outcome_is_stored_as_the_json_of_its_row(
    node: str | None, at: int, succeeded: bool, launched: int | None
) -> None:
    client = FakeDynamoDB()
    state = full_state()
    state.outcomes["i-row"] = BootOutcome("i-row", node, at, succeeded, launched)
    GroupStore(client, "table").save(state)
    stored = client.items[(group_key(CLUSTER, GROUP), "STATE")]["outcomes"]["M"]["i-row"]["S"]
    assert stored == json.dumps([node, at, int(succeeded), launched])
    assert GroupStore(client, "table").load(CLUSTER, GROUP).outcomes["i-row"] == state.outcomes["i-row"]


@settings(max_examples=200, deadline=None)
@given(
    node=st.none() | st.text(max_size=4) | st.integers() | st.booleans(),
    at=st.integers() | st.booleans(),
    launched=st.none() | st.integers() | st.booleans() | st.floats(allow_nan=False, allow_infinity=False),
)
def test_an_outcome_of_values_read_back_from_an_item_is_stored_as_json_dumps_writes_them(
    node: Any, at: Any, launched: Any
) -> None:
    """Rows read back from an item hold what JSON held: the row's text is still `json.dumps`'s."""
    client = FakeDynamoDB()
    state = full_state()
    state.outcomes["i-row"] = BootOutcome("i-row", node, at, True, launched)
    GroupStore(client, "table").save(state)
    stored = state_item(client)["outcomes"]["M"]["i-row"]["S"]
    assert stored == json.dumps([node, at, 1, launched])


def test_states_at_their_bounds_are_written_in_transactions_dynamodb_takes() -> None:
    """DynamoDB refuses a transaction whose items add up to more than 4 MB, on every retry: 100 busy groups
    (records can fill each to its bounds: 1,000 pending launches, 100 outcomes, ids and node names at
    their longest) take more, so they are written in as many transactions as fit, none of them refused."""
    table = FakeDynamoDB()
    store = GroupStore(table, "t")
    states = []
    for g in range(100):
        state = GroupState(cluster_id=CLUSTER, group_id=f"pcs_busy{g:06d}")
        for n in range(PENDING_LAUNCH_LIMIT):
            state.launches[f"i-{g:06d}{'l' * 20}{n:06d}"] = T0 + n
        for n in range(OUTCOME_LIMIT):
            instance = f"i-{g:06d}{'o' * 20}{n:06d}"
            state.outcomes[instance] = BootOutcome(instance, "n" * 128, T0 + n, True, T0)
        states.append(state)
    assert store.save_many(states) == []
    transactions = table.requests["TransactWriteItems"]
    assert len(transactions) > 1
    for request in transactions:
        keys = [(w["Put"]["Item"]["pk"]["S"], w["Put"]["Item"]["sk"]["S"]) for w in request["TransactItems"]]
        assert sum(item_size(table.items[key]) for key in keys) <= TRANSACTION_BYTES
    assert all(store.load(CLUSTER, s.group_id).version == 1 for s in states)


@pytest.mark.parametrize(("character", "cached"), [("a", 11), ("–", 5), ("😀", 1)])
def test_a_state_s_configurations_weigh_in_the_cache_as_what_they_take_in_memory(
    character: str, cached: int
) -> None:
    """A configuration may take hundreds of KB (40 scripts of 20 arguments of 256 characters): a thousand
    such groups held by their count alone would take the function's 256 MB. Each state weighs what its
    JSON takes in memory too, wider by a character past Latin-1 anywhere in it, so the cache lets the
    least recent go before it holds more than its bound."""
    client = FakeDynamoDB()
    store = GroupStore(client, "table")
    store.CACHE_ENTRIES = 10 * 50 + 2_200  # ten bare states, and a 100,000-character state of ASCII
    bare = [GroupState(cluster_id=CLUSTER, group_id=f"pcs_g{n:08d}") for n in range(10)]
    store.save_many(bare)
    assert store.cached == 10
    big = GroupState(cluster_id=CLUSTER, group_id="pcs_big00001")
    arguments = ["a" * 255 + character] + ["a" * 256] * 19
    scripts = [
        {"name": f"s{n}", "scriptSource": {"scriptLocation": "s3://b/x.sh"}, "arguments": arguments}
        for n in range(20)
    ]
    actions = {"nodeBootstrapped": scripts}
    big.config = KnownConfig(
        modified_at=T0, fingerprint="f" * 64, node_lifecycle_actions=actions, checked_at=T0
    )
    store.save(big)
    # About 2.5, 3.5 and 5.5 bytes a character: 1,758, 2,462 and 3,869 units; the least recent go first.
    assert store.cached == cached
    store.load_many([(CLUSTER, "pcs_big00001")])
    assert client.calls("BatchGetItem") == 0


def test_a_state_weighs_in_the_cache_what_its_last_write_holds() -> None:
    """A group first written bare, then with a large configuration, weighs the second: the cache lets the
    least recent go then, not at the next state it takes in."""
    store = GroupStore(FakeDynamoDB(), "table")
    store.CACHE_ENTRIES = 10 * 50 + 2_200  # ten bare states, and a 100,000-character state of ASCII
    store.save_many([GroupState(cluster_id=CLUSTER, group_id=f"pcs_g{n:08d}") for n in range(10)])
    grown = GroupState(cluster_id=CLUSTER, group_id="pcs_big00001")
    store.save(grown)
    assert store.cached == 11
    actions = {"nodeBootstrapped": [{"name": "s", "arguments": ["a" * 256] * 520}]}
    grown.config = KnownConfig(
        modified_at=T0, fingerprint="f" * 64, node_lifecycle_actions=actions, checked_at=T0
    )
    store.save(grown)
    assert store.cached == 9  # about 2,300 units: the two least recent bare states go
    assert store.remembered([(CLUSTER, "pcs_big00001"), (CLUSTER, "pcs_g00000000")]) == {
        (CLUSTER, "pcs_big00001")
    }


def test_a_transaction_that_lost_a_race_is_forgotten_with_its_unwritten_changes() -> None:
    table = FakeDynamoDB()
    store = GroupStore(table, "t")
    store.save(GroupState(cluster_id=CLUSTER, group_id=GROUP))
    state = store.load_many([(CLUSTER, GROUP)])[(CLUSTER, GROUP)]  # the remembered object itself
    state.launches["i-9"] = 1
    table.fail["TransactWriteItems"] = [
        client_error("TransactionCanceledException", "TransactWriteItems", "ConditionalCheckFailed")
    ]
    assert store.save_many([state]) == [state]
    assert store.remembered([(CLUSTER, GROUP)]) == set()


def test_a_states_outcomes_weigh_in_the_cache() -> None:
    """Each outcome a remembered state holds counts toward the cache's bound (CACHE_ENTRIES), as each
    pending launch does: states of a hundred outcomes take three times a bare one's place."""
    store = GroupStore(FakeDynamoDB(), "t")
    store.CACHE_ENTRIES = 10 * 150
    for g in range(11):
        state = GroupState(cluster_id=CLUSTER, group_id=f"pcs_g{g:08d}")
        for n in range(100):
            state.outcomes[f"i-{n:017d}"] = BootOutcome(f"i-{n:017d}", None, T0 + n, True, None)
        store.save(state)
    assert store.cached == 10


def test_outcomes_count_toward_a_transactions_4_mb() -> None:
    """A hundred groups each with a configuration of ~22 KB of random arguments and a hundred outcomes of
    128-character node names: more than 4 MB in one transaction, which DynamoDB refuses on every retry.
    They are written in more than one."""
    import secrets

    table = FakeDynamoDB()
    store = GroupStore(table, "t")
    states = []
    for g in range(100):
        state = GroupState(cluster_id=CLUSTER, group_id=f"pcs_busy{g:06d}")
        actions = {
            "nodeBootstrapped": [
                {
                    "name": "s",
                    "scriptSource": {"scriptLocation": "s3://b/x.sh"},
                    "arguments": [secrets.token_urlsafe(22_000)],
                }
            ]
        }
        state.config = KnownConfig(
            modified_at=T0, fingerprint="f" * 64, node_lifecycle_actions=actions, checked_at=T0
        )
        for n in range(100):
            instance = f"i-{g:06d}{'o' * 20}{n:06d}"
            state.outcomes[instance] = BootOutcome(instance, "n" * 128, T0 + n, True, T0)
        states.append(state)
    assert store.save_many(states) == []
    assert table.calls("TransactWriteItems") >= 2


def test_each_transaction_keeps_to_its_byte_bound() -> None:
    from lifeguard.store.groups import TRANSACTION_BYTES_MAX, _item_bound, _transactions

    states = [GroupState(cluster_id=CLUSTER, group_id=f"pcs_g{g:08d}") for g in range(10)]
    writes: list[Any] = [(None, "x" * 390_000, False)] * 10
    parts = list(_transactions(states, writes))
    assert len(parts) > 1
    for part in parts:
        bound = sum(_item_bound(s, w[1]) for s, w in zip(states[part], writes[part], strict=True))
        assert bound <= TRANSACTION_BYTES_MAX
