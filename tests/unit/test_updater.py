"""The one way a group's state changes (`handlers.updater`): load, mutate, write on the version,
publish, clear the outbox. A lost race is redone on a fresh read; events that could not be published stay
in the outbox until a later invocation finds them stale."""

from __future__ import annotations

import contextlib
from collections.abc import Callable

import pytest

from lifeguard.aws.eventbridge import EventPublisher
from lifeguard.errors import AwsCallError
from lifeguard.event_contract import ControllerEvent, make_detail
from lifeguard.group_state import GroupState
from lifeguard.handlers.updater import STALE_OUTBOX_SECONDS, Change, GroupUpdater
from lifeguard.store.groups import GroupStore, UnreadableStateError
from lifeguard.store.table import group_key
from tests.unit.fakes import FakeDynamoDB, FakeEventBridge, Interleaved, client_error, state_key

CLUSTER, GROUP = "pcs_abc123de45", "pcs_abcdef01"
NOW = 1_792_544_802.0


class Clock:
    def __init__(self) -> None:
        self.now = NOW

    def __call__(self) -> float:
        return self.now


class World:
    """One table and one bus, seen by as many invocations as a test needs."""

    def __init__(self) -> None:
        self.table = FakeDynamoDB()
        self.bus = FakeEventBridge()
        self.clock = Clock()
        self.counted: list[tuple[str, float]] = []  # the updaters' metrics

    def updater(self, max_attempts: int = 10) -> GroupUpdater:
        publisher = EventPublisher(self.bus, "bus", sleep=lambda _: None)
        return GroupUpdater(
            GroupStore(self.table, "t"),
            publisher,
            clock=self.clock,
            max_attempts=max_attempts,
            metric=lambda name, value: self.counted.append((name, value)),
        )

    def state(self, group: str = GROUP) -> GroupState:
        return GroupStore(self.table, "t").load(CLUSTER, group)


def launch(instance: str, episode: str | None = None) -> Callable[[GroupState], Change]:
    """Records a launch (idempotent); announces `episode` when given."""

    def mutate(state: GroupState) -> Change:
        if state.launches.get(instance) == 1:
            return Change()
        state.launches[instance] = 1
        events = [
            ControllerEvent("LoopResolved", make_detail(episode_id=episode), f"{episode}:LoopResolved:1")
        ]
        return Change(True, events if episode else [])

    return mutate


def test_an_update_writes_publishes_and_clears_its_outbox() -> None:
    world = World()
    published = world.updater().update(CLUSTER, GROUP, launch("i-1", "ep-1"))
    assert [event.key for event in published] == ["ep-1:LoopResolved:1"]
    assert world.bus.keys() == ["ep-1"]
    stored = world.state()
    assert stored.launches == {"i-1": 1}
    assert stored.outbox == []


def test_a_mutation_that_changes_nothing_writes_nothing() -> None:
    world = World()
    world.updater().update(CLUSTER, GROUP, launch("i-1"))
    writes = world.table.single_writes()
    assert world.updater().update(CLUSTER, GROUP, launch("i-1")) == []
    assert world.table.single_writes() == writes
    assert world.state().version == 1


def test_a_lost_race_is_redone_on_a_fresh_read_and_both_changes_stand() -> None:
    world = World()
    updater = world.updater()
    raced = False

    def mutate(state: GroupState) -> Change:
        nonlocal raced
        if not raced:
            raced = True
            world.updater().update(CLUSTER, GROUP, launch("i-other"))  # another invocation wins the write
        return launch("i-mine", "ep-1")(state)

    updater.update(CLUSTER, GROUP, mutate)
    assert updater.conflicts == 1
    assert world.state().launches == {"i-other": 1, "i-mine": 1}
    assert world.bus.keys() == ["ep-1"]  # published once, by the write that won


def test_an_update_that_always_loses_gives_up_after_its_attempts() -> None:
    world = World()
    updater = world.updater(max_attempts=3)
    count = 0

    def always_raced(state: GroupState) -> Change:
        nonlocal count
        count += 1
        world.updater().update(CLUSTER, GROUP, launch(f"i-other{count}"))
        return launch("i-mine")(state)

    with pytest.raises(AwsCallError) as raised:
        updater.update(CLUSTER, GROUP, always_raced)
    assert raised.value.code == "VersionConflict"
    assert count == 3
    assert "i-mine" not in world.state().launches


def test_events_another_invocation_queued_stay_in_the_outbox_until_they_are_stale() -> None:
    # An invocation that wrote its events and may still be publishing them (it has not failed yet): a
    # second invocation leaves them to it until they are stale.
    world = World()
    world.updater().update(CLUSTER, GROUP, launch("i-0"))
    store = GroupStore(world.table, "t")
    state = store.load(CLUSTER, GROUP)
    event = ControllerEvent("LoopResolved", make_detail(episode_id="ep-1"), "ep-1:LoopResolved:1")
    state.outbox.append({**event.to_dict(), "queued_at": NOW})
    store.save(state)

    world.clock.now = NOW + STALE_OUTBOX_SECONDS - 1  # the invocation that queued them may be publishing
    assert world.updater().update(CLUSTER, GROUP, launch("i-1")) == []
    assert world.bus.entries == []

    world.clock.now = NOW + STALE_OUTBOX_SECONDS
    published = world.updater().update(CLUSTER, GROUP, launch("i-2"))
    assert [event.key for event in published] == ["ep-1:LoopResolved:1"]
    assert world.bus.keys() == ["ep-1"]
    assert world.state().outbox == []


def test_events_an_invocation_failed_to_publish_are_due_at_once_for_its_retry() -> None:
    # Lambda retries the failed invocation a minute later, before the events would be stale: they are
    # marked due on the way out, so the retry (or any invocation for the group) publishes them.
    world = World()
    world.bus.refuse_calls = 3
    with pytest.raises(AwsCallError):
        world.updater().update(CLUSTER, GROUP, launch("i-1", "ep-1"))
    (queued,) = world.state().outbox
    assert (queued["key"], queued["queued_at"]) == ("ep-1:LoopResolved:1", 0)

    world.clock.now = NOW + 60
    published = world.updater().update(CLUSTER, GROUP, launch("i-1"))
    assert [event.key for event in published] == ["ep-1:LoopResolved:1"]
    assert world.bus.keys() == ["ep-1"]
    assert world.state().outbox == []


def test_every_group_of_a_batch_is_tried_before_a_failed_publish_is_raised() -> None:
    world = World()
    world.bus.refuse_calls = 3  # the first group's events, every try
    keys = [(CLUSTER, f"pcs_g{n}") for n in range(3)]
    with pytest.raises(AwsCallError):
        world.updater().update_many({key: launch("i-1", f"ep-{key[1][-1]}") for key in keys})
    assert sorted(world.bus.keys()) == ["ep-1", "ep-2"]
    assert [entry["queued_at"] for entry in world.state("pcs_g0").outbox] == [0]
    assert world.state("pcs_g1").outbox == []


def test_update_many_reads_and_writes_once_and_redoes_only_after_a_lost_race() -> None:
    world = World()
    updater = world.updater()
    keys = [(CLUSTER, f"pcs_g{n}") for n in range(3)]
    published = updater.update_many({key: launch("i-1", f"ep-{key[1][-1]}") for key in keys})
    assert [event.key for event in published] == [
        "ep-0:LoopResolved:1",
        "ep-1:LoopResolved:1",
        "ep-2:LoopResolved:1",
    ]
    assert (world.table.calls("BatchGetItem"), world.table.calls("TransactWriteItems")) == (1, 1)
    assert world.table.single_writes() == 3  # then each group's outbox cleared, once published
    assert all(world.state(group).outbox == [] for _, group in keys)

    raced = False

    def racing(state: GroupState) -> Change:
        nonlocal raced
        if not raced:
            raced = True
            world.updater().update(CLUSTER, "pcs_g1", launch("i-other"))
        return launch("i-2", f"ep-r{state.group_id[-1]}")(state)

    published = updater.update_many(dict.fromkeys(keys, racing))
    # A transaction is all or nothing: every group of it is redone, one by one, on a fresh read.
    assert updater.conflicts == 3
    assert sorted(event.key for event in published) == [f"ep-r{n}:LoopResolved:1" for n in range(3)]
    assert world.state("pcs_g1").launches == {"i-1": 1, "i-other": 1, "i-2": 1}
    assert all(world.state(group).outbox == [] for _, group in keys)


def test_a_change_beyond_the_maps_left_unwritten_is_written_with_the_next_change_of_the_maps_alone() -> None:
    world = World()
    updater = world.updater()
    key = (CLUSTER, GROUP)
    updater.update_many({key: launch("i-first")})

    def changed_without_saying(state: GroupState) -> Change:
        state.unhealthy["i-sick"] = 7  # beyond the maps, and the mutation says nothing changed
        return Change(changed=False)

    def launches_alone(state: GroupState) -> Change:
        state.launches["i-second"] = 1
        return Change(changed=True, maps_only=True)

    updater.update_many({key: changed_without_saying})
    updater.update_many({key: launches_alone})  # the same remembered state, written now
    state = world.state()
    assert set(state.launches) == {"i-first", "i-second"}
    assert state.unhealthy == {"i-sick": 7}


def test_events_of_a_written_transaction_are_published_by_the_retry_of_an_invocation_that_failed() -> None:
    world = World()
    keys = [(CLUSTER, f"pcs_g{n:03d}") for n in range(101)]  # two transactions: 100 groups, then 1
    batch = {key: launch("i-1", f"ep-{key[1]}") for key in keys}
    calls = 0
    original = world.table.transact_write_items

    def second_throttled(**request: object) -> object:
        nonlocal calls
        calls += 1
        if calls == 2:
            raise client_error("ProvisionedThroughputExceededException", "TransactWriteItems")
        return original(**request)

    world.table.transact_write_items = second_throttled  # type: ignore[method-assign]
    with pytest.raises(AwsCallError):
        world.updater().update_many(batch)
    assert world.state("pcs_g000").launches == {"i-1": 1}  # written in the first transaction
    # The written transaction's events went out as the invocation failed; the other group's did not.
    sent = world.bus.keys()
    assert "ep-pcs_g000" in sent
    assert "ep-pcs_g100" not in sent

    # Lambda retries the batch a minute later (README: "the failed invocation tries every group's events,
    # marks the ones that failed as due, and raises, so Lambda's retry a minute later publishes them").
    world.clock.now = NOW + 60
    world.updater().update_many(batch)
    published = world.bus.keys()
    assert "ep-pcs_g000" in published
    assert published.count("ep-pcs_g100") == 1
    assert world.state("pcs_g000").outbox == []


def test_while_eventbridge_refuses_every_put_the_outbox_keeps_the_newest_sixteen_and_says_what_it_dropped(
    caplog: pytest.LogCaptureFixture,
) -> None:
    world = World()
    world.bus.refuse_calls = 10**6
    for n in range(20):
        with pytest.raises(AwsCallError):
            world.updater().update(CLUSTER, GROUP, launch(f"i-{n}", f"ep-{n}"))
    kept = [entry["key"] for entry in world.state().outbox]
    assert kept == [f"ep-{n}:LoopResolved:1" for n in range(4, 20)]
    dropped = [
        r.getMessage() for r in caplog.records if r.levelname == "ERROR" and "outbox of" in r.getMessage()
    ]
    assert len(dropped) == 4
    assert "ep-0:LoopResolved:1" in dropped[0]
    # Counted too, for the alarm that pages on it (an ERROR line alone pages no one).
    assert [(name, value) for name, value in world.counted if name == "OutboxEventsDropped"] == [
        ("OutboxEventsDropped", 1)
    ] * 4


def test_a_drop_is_counted_once_and_only_by_the_write_that_made_it() -> None:
    """A write that lost its race let nothing go: counting at the mutation counted the drop of every attempt
    (and one the other writer had made moot), paging OutboxEventsDroppedAlarm for events still held."""
    world = World()
    world.bus.refuse_calls = 10**6
    for n in range(16):
        with pytest.raises(AwsCallError):
            world.updater().update(CLUSTER, GROUP, launch(f"i-{n}", f"ep-{n}"))
    assert world.counted == []  # sixteen held: none dropped
    other = world.updater()

    def other_writes_first() -> None:  # another invocation (its publishing fails too, after its write)
        with contextlib.suppress(AwsCallError):
            other.update(CLUSTER, GROUP, launch("i-other"))

    raced = Interleaved(world.table, "update_item", other_writes_first, state_key)
    updater = GroupUpdater(
        GroupStore(raced, "t"),
        EventPublisher(world.bus, "bus", sleep=lambda _: None),
        clock=world.clock,
        metric=lambda name, value: world.counted.append((name, value)),
    )
    with pytest.raises(AwsCallError):
        updater.update(CLUSTER, GROUP, launch("i-16", "ep-16"))
    assert raced.ran
    assert updater.conflicts >= 1  # its first write lost the race, and was made again
    assert world.counted == [("OutboxEventsDropped", 1)]  # the one write that went through
    assert [entry["key"] for entry in world.state().outbox][-1] == "ep-16:LoopResolved:1"


def test_a_batch_counts_the_drops_of_the_states_it_wrote() -> None:
    world = World()
    world.bus.refuse_calls = 10**6
    for n in range(16):
        with pytest.raises(AwsCallError):
            world.updater().update(CLUSTER, GROUP, launch(f"i-{n}", f"ep-{n}"))
    with pytest.raises(AwsCallError):
        world.updater().update_many({(CLUSTER, GROUP): launch("i-16", "ep-16")})
    assert world.counted == [("OutboxEventsDropped", 1)]


A, B = (CLUSTER, "pcs_aaaaaaa1"), (CLUSTER, "pcs_bbbbbbb1")


def test_a_batch_that_raises_forgets_the_remembered_states_it_changed_and_its_retry_writes_them() -> None:
    """A mutation changes the remembered state in place; another group's raises before anything is written.
    The retry (same warm container) must not find the change made already and write nothing: the records
    would be lost."""
    world = World()
    updater = world.updater()
    updater.update_many({A: launch("i-0"), B: launch("i-0")})  # both remembered at version 1

    def fails(state: GroupState) -> Change:
        raise RuntimeError("the mutation of B failed")

    with pytest.raises(RuntimeError):
        updater.update_many({A: launch("i-1"), B: fails})
    updater.update_many({A: launch("i-1")})
    assert world.state(A[1]).launches == {"i-0": 1, "i-1": 1}


def test_a_group_whose_ledger_is_unreadable_is_forgotten_with_what_its_mutation_changed() -> None:
    world = World()
    updater = world.updater()
    updater.update_many({A: launch("i-0")})

    def partly(state: GroupState) -> Change:
        state.launches["i-2"] = 1
        raise UnreadableStateError("the ledger item cannot be read")

    unreadable: dict[tuple[str, str], str] = {}
    updater.update_many({A: partly}, unreadable=unreadable)
    assert A in unreadable
    updater.update_many({A: launch("i-2")})
    assert world.state(A[1]).launches == {"i-0": 1, "i-2": 1}


def test_a_remembered_state_whose_item_was_deleted_is_redone_from_the_table() -> None:
    """Someone deleted the group's state item (as the README says to, for a damaged one): a warm container
    whose batch changes nothing must not go on with its remembered copy, never written again."""
    world = World()
    updater = world.updater()
    updater.update_many({A: launch("i-0")})
    del world.table.items[(group_key(*A), "STATE")]
    updater.update_many({A: launch("i-0")})
    assert world.state(A[1]).launches == {"i-0": 1}
