"""A group's state: its bounds (prune), its clock corrections (forget_after), its outcomes as rows (how the
store keeps it is tests/unit/test_store_groups.py)."""

from __future__ import annotations

import copy
import pickle
import random
from dataclasses import fields, replace
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from lifeguard.group_state import (
    ABSENT,
    MAPS,
    OUTCOME_LIMIT,
    PENDING_LAUNCH_LIMIT,
    BootOutcome,
    GroupState,
    KnownConfig,
    ProvenGood,
    Tracked,
)

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


def test_prune_keeps_only_launches_still_waiting_within_the_hour_once_over_their_bound() -> None:
    waiting = {
        "i-0000": T0 - 60_000,  # its outcome arrived
        "i-stale": T0 + 2 * HOUR_MS - HOUR_MS - 1,  # more than an hour before the newest
        "i-edge": T0 + 2 * HOUR_MS - HOUR_MS,  # exactly an hour before the newest: kept
        "i-new": T0 + 2 * HOUR_MS,
    }
    state = state_with(1, launches=waiting)
    state.prune()
    assert state.launches == waiting  # under the bound: a batch does not pay for a pass over them
    filler = {f"i-f{n:04d}": T0 + HOUR_MS + 1 + n for n in range(PENDING_LAUNCH_LIMIT - 2)}
    state = state_with(1, launches={**waiting, **filler})
    state.prune()
    assert state.launches == {"i-edge": T0 + HOUR_MS, **filler, "i-new": T0 + 2 * HOUR_MS}


def launch_changes(state: GroupState) -> tuple[dict[str, int], list[str]] | None:
    changes = state.map_changes()
    return changes["launches"] if changes is not None else None


def test_launch_changes_count_from_what_the_table_holds() -> None:
    state = state_with(launches={"i-a": T0, "i-b": T0 + 1})
    assert state.map_changes() is None  # the table holds none on their own yet
    state.maps_stored()
    assert launch_changes(state) == ({}, [])
    state.launches["i-c"] = T0 + 2
    state.launches["i-a"] = T0 - 5
    del state.launches["i-b"]
    assert launch_changes(state) == ({"i-a": T0 - 5, "i-c": T0 + 2}, ["i-b"])
    state.maps_stored()
    assert launch_changes(state) == ({}, [])


def test_an_entry_touched_back_to_what_the_table_holds_is_not_sent_and_a_write_starts_afresh() -> None:
    state = state_with(2, launches={"i-a": T0})
    state.maps_stored()
    state.launches["i-a"] = T0 + 7
    state.launches["i-a"] = T0  # as stored again
    state.outcomes["i-0001"] = replace(state.outcomes["i-0001"])  # an equal outcome, another object
    assert state.map_changes() == {"launches": ({}, []), "outcomes": ({}, [])}
    state.launches["i-b"] = T0 + 1
    state.maps_stored()
    assert (state.launches.touched, state.outcomes.touched) == ({}, {})


def test_an_entry_added_and_gone_within_a_batch_is_not_sent() -> None:
    state = state_with(launches={"i-a": T0})
    state.maps_stored()
    state.launches["i-new"] = T0 + 1
    del state.launches["i-new"]
    state.launches.pop("i-a")
    state.launches["i-a"] = T0 + 2  # gone, then back with another time: a change
    assert launch_changes(state) == ({"i-a": T0 + 2}, [])


@pytest.mark.parametrize("how", ["copy", "deepcopy", "pickle", "model_copy"])
def test_a_copy_of_a_stored_state_s_maps_is_written_whole_and_leaves_the_original_s_notes(how: str) -> None:
    state = state_with(1, launches={"i-a": T0, "i-b": T0 + 1})
    state.maps_stored()
    del state.launches["i-a"]
    if how == "model_copy":
        duplicate = state.model_copy(deep=True)
        launches = duplicate.launches
    else:
        copied = {
            "copy": copy.copy,
            "deepcopy": copy.deepcopy,
            "pickle": lambda m: pickle.loads(pickle.dumps(m)),
        }
        launches = copied[how](state.launches)
        duplicate = replace(state, launches=launches)
    assert isinstance(launches, Tracked)
    assert launches == {"i-b": T0 + 1}
    launches.pop("i-b")
    assert launches.touched is None
    assert duplicate.map_changes() is None  # no table holds the copy: its write is whole
    assert launch_changes(state) == ({}, ["i-a"])  # the original's notes, as they were
    assert state.launches == {"i-b": T0 + 1}


def test_an_outcome_that_learns_its_launch_is_a_change_of_its_map() -> None:
    state = state_with(2)
    state.maps_stored()
    state.outcomes["i-0001"] = replace(state.outcomes["i-0001"], launched_at=T0 - 1)
    changes = state.map_changes()
    assert changes is not None
    assert changes["outcomes"] == (
        {"i-0001": BootOutcome("i-0001", "lca-static-1", T0 + 1000, False, T0 - 1)},
        [],
    )


def test_prune_caps_pending_launches_at_the_newest_thousand_in_time_order() -> None:
    state = state_with(launches={f"i-{n:05d}": T0 + n for n in range(1200)})
    state.prune()
    assert len(state.launches) == 1000
    assert min(state.launches.values()) == T0 + 200
    assert list(state.launches.values()) == sorted(state.launches.values())


def launches_kept_as_prune_kept_them_by_sorting(state: GroupState) -> dict[str, int]:
    """The launches a pruned state keeps, worked out as `prune` did before it found them without sorting
    them all: the reference of the test below."""
    launches, outcomes = dict(state.launches), state.outcomes
    if len(launches) <= PENDING_LAUNCH_LIMIT:
        return launches
    newest = max(max((o.event_timestamp for o in outcomes.values()), default=0), *launches.values())
    pending = {i: t for i, t in launches.items() if t >= newest - HOUR_MS and i not in outcomes}
    if len(pending) > PENDING_LAUNCH_LIMIT:
        newest_first = sorted(((t, i) for i, t in pending.items()), reverse=True)[:PENDING_LAUNCH_LIMIT]
        pending = {i: t for t, i in newest_first}
    return {i: t for i, t in launches.items() if i in pending}


@settings(max_examples=120, deadline=None)
@given(
    seed=st.integers(min_value=0, max_value=2**32),
    count=st.integers(min_value=PENDING_LAUNCH_LIMIT - 3, max_value=PENDING_LAUNCH_LIMIT + 150),
    span_ms=st.sampled_from([1_000, 600_000, HOUR_MS, 3 * HOUR_MS]),  # 1,000 distinct times: ties
    outcomes=st.integers(min_value=0, max_value=OUTCOME_LIMIT),
    waiting_too=st.integers(min_value=0, max_value=5),  # instances with an outcome, still waiting
)
def test_prune_keeps_the_launches_it_kept_when_it_sorted_them_all(
    seed: int, count: int, span_ms: int, outcomes: int, waiting_too: int
) -> None:
    rng = random.Random(seed)
    state = state_with()
    for n in range(outcomes):  # some may come hours after every launch: the newest time is theirs
        at = T0 + rng.randrange(span_ms + 2 * HOUR_MS)
        state.outcomes[f"i-{n:04d}"] = BootOutcome(f"i-{n:04d}", None, at, n % 2 == 0)
    for instance in list(state.outcomes)[:waiting_too]:
        state.launches[instance] = T0 + rng.randrange(span_ms)
    for n in range(count):
        state.launches[f"i-{rng.randrange(10**6):07d}{n}"] = T0 + rng.randrange(span_ms) // 1000 * 1000
    state.maps_stored()
    expected = launches_kept_as_prune_kept_them_by_sorting(state)
    before = dict(state.launches)
    state.prune()
    assert state.launches == expected
    assert list(state.launches) == [i for i in before if i in expected]  # in the order they came
    changes = state.map_changes()
    assert changes is not None
    changed, gone = changes["launches"]
    assert (changed, sorted(gone)) == ({}, sorted(i for i in before if i not in expected))  # each noted


def test_launches_of_instances_with_outcomes_go_before_the_oldest_are_counted_past_the_bound() -> None:
    state = state_with(5)  # their launches are the oldest: they go as waiting no more, not as the oldest
    for n in range(5):
        state.launches[f"i-{n:04d}"] = T0 - HOUR_MS // 2 + n
    state.launches.update({f"i-w{n:04d}": T0 + n for n in range(PENDING_LAUNCH_LIMIT + 10)})
    state.prune()
    assert state.launches == {f"i-w{n:04d}": T0 + n for n in range(10, PENDING_LAUNCH_LIMIT + 10)}


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


def test_forget_after_drops_an_unhealthy_termination_dated_later_too() -> None:
    """The group's newest event time, which its waits are judged at, counts unhealthy terminations: one
    dated ahead would end a wait before its time."""
    state = state_with()
    state.unhealthy = {"i-ahead": T0 + HOUR_MS, "i-now": T0}
    assert state.forget_after(T0 + 1000) is True
    assert state.unhealthy == {"i-now": T0}


def test_forget_after_puts_a_forgotten_outcomes_launch_back_to_wait() -> None:
    state = state_with()
    state.outcomes["i-skewed"] = BootOutcome("i-skewed", None, T0 + HOUR_MS, False, launched_at=T0)
    assert state.forget_after(T0 + 1000) is True
    assert (state.outcomes, state.launches) == ({}, {"i-skewed": T0})


def test_launched_at_prefers_the_outcomes_own_launch_time_then_the_pending_launch() -> None:
    state = state_with(launches={"i-a": T0 - 5000})
    assert state.launched_at(BootOutcome("i-a", None, T0, True, launched_at=T0 - 9000)) == T0 - 9000
    assert state.launched_at(BootOutcome("i-a", None, T0, True)) == T0 - 5000
    assert state.launched_at(BootOutcome("i-b", None, T0, True)) is None


def test_outcomes_are_stored_as_rows_and_read_back_the_same() -> None:
    state = state_with(2)
    state.outcomes["i-0001"] = replace(state.outcomes["i-0001"], launched_at=T0 - 1)
    dumped = state.model_dump(mode="json")
    assert dumped["outcomes"] == [
        ["i-0000", "lca-static-1", T0, 1, None],
        ["i-0001", "lca-static-1", T0 + 1000, 0, T0 - 1],
    ]
    assert GroupState.model_validate_json(state.model_dump_json()).outcomes == state.outcomes


def test_tracked_launches_name_only_what_a_batch_touched_however_it_touched_them() -> None:
    state = state_with(launches={f"i-{n:04d}": T0 + n for n in range(500)})
    state.maps_stored()
    assert isinstance(state.launches, Tracked)
    assert state.launches.touched == {}
    state.launches["i-new"] = T0 + 9000
    state.launches.pop("i-0007")
    state.launches.pop("i-never", None)  # not there: nothing to send
    state.launches["i-new"] = T0 + 9001  # touched again: what the table held is kept from the first touch
    assert state.launches.touched == {"i-new": ABSENT, "i-0007": T0 + 7}
    assert launch_changes(state) == ({"i-new": T0 + 9001}, ["i-0007"])
    state.maps_stored()
    assert launch_changes(state) == ({}, [])
    state.launches.update({"i-0001": T0 - 1}, **{"i-0002": T0 + 2})  # followed as the others
    assert launch_changes(state) == ({"i-0001": T0 - 1}, [])
    state.launches.setdefault("i-0003", T0)  # there: nothing changed
    state.launches.setdefault("i-more", T0)
    state.launches |= {"i-0004": T0 - 4}
    state.launches.popitem()  # the last in: i-more
    assert launch_changes(state) == ({"i-0001": T0 - 1, "i-0004": T0 - 4}, [])
    state.maps_stored()
    state.launches.popitem()
    assert launch_changes(state) == ({}, ["i-new"])  # the last in
    state.launches.clear()
    changed, gone = launch_changes(state) or ({"?": 0}, [])
    assert changed == {}
    assert sorted(gone) == sorted([*(f"i-{n:04d}" for n in range(500) if n != 7), "i-new"])
    state.maps_stored()
    state.launches = {"i-only": T0}  # a plain dict put in its place: not followed, written whole
    assert state.map_changes() is None
    state.maps_stored()
    assert isinstance(state.launches, Tracked)
    assert launch_changes(state) == ({}, [])


@settings(max_examples=150, deadline=None)
@given(
    st.lists(
        st.lists(
            st.tuples(
                st.sampled_from(["set", "del", "pop", "update"]),
                st.sampled_from(MAPS),
                st.integers(min_value=0, max_value=12),  # the instance
                st.integers(min_value=0, max_value=3),  # its time
            ),
            max_size=12,
        ),
        max_size=6,
    )
)
def test_a_write_s_changes_make_the_table_s_maps_the_state_s(
    batches: list[list[tuple[str, str, int, int]]],
) -> None:
    """Batches change the maps (as the detection does, or with any other method of a dict); after each, the
    table's maps are written as a write would, with the changes (`map_changes`): the table then holds the
    state's maps, and nothing is changed once they are stored."""
    state = state_with(2)
    state.maps_stored()
    table = {name: dict(getattr(state, name)) for name in MAPS}
    for steps in batches:
        for action, name, number, seconds in steps:
            entries: dict[str, Any] = getattr(state, name)
            instance = f"i-{number:04d}"
            value = T0 + seconds if name == "launches" else BootOutcome(instance, None, T0 + seconds, True)
            if action == "set":
                entries[instance] = value
            elif action == "del" and instance in entries:
                del entries[instance]
            elif action == "pop":
                entries.pop(instance, None)
            elif action == "update":
                entries.update({instance: value})
        changes = state.map_changes()
        assert changes is not None
        for name, (changed, gone) in changes.items():
            assert all(table[name].get(key) != value for key, value in changed.items())
            assert all(key in table[name] for key in gone)
            table[name].update(changed)
            for key in gone:
                del table[name][key]
        state.maps_stored()
        assert table == {name: dict(getattr(state, name)) for name in MAPS}
        assert state.map_changes() == {name: ({}, []) for name in MAPS}


def test_the_oldest_outcome_stays_known_as_outcomes_come_and_the_oldest_go() -> None:
    state = state_with(OUTCOME_LIMIT)
    assert state.oldest_outcome_at() == T0
    earlier = BootOutcome("i-early", None, T0 - 500, True)
    state.outcomes[earlier.instance_id] = earlier
    state.outcome_added(earlier)
    assert state.oldest_outcome_at() == T0 - 500
    state.prune()  # one over the bound: the earliest goes, and the next is the oldest kept
    assert "i-early" not in state.outcomes
    assert state.oldest_outcome_at() == T0 == min(o.event_timestamp for o in state.outcomes.values())


def test_a_state_held_to_a_bound_is_not_looked_through_again_until_the_bound_goes_back() -> None:
    state = state_with(3, launches={"i-late": T0 + 10_000})
    assert state.forget_after(T0 + 5000) is True
    assert state.forget_after(T0 + 6000) is False  # nothing it holds can be later than the last bound
    assert state.forget_after(T0 + 1000) is True  # an earlier bound: looked through again
    assert sorted(state.outcomes) == ["i-0000", "i-0001"]


@settings(max_examples=200, deadline=None)
@given(
    st.lists(
        st.tuples(
            st.sampled_from(["outcome", "prune", "forget", "reload"]),
            st.integers(min_value=0, max_value=150),  # the instance
            st.integers(min_value=0, max_value=400),  # its time, in seconds after T0
        ),
        max_size=300,
    )
)
def test_the_oldest_outcome_and_the_pruned_ones_are_those_a_full_look_finds(
    steps: list[tuple[str, int, int]],
) -> None:
    """Outcomes come as the detection folds them (a new instance, or an earlier time for a known one), the
    state is pruned, held to a bound, or replaced by a read: the oldest it reports, and those a prune lets
    go, are always those of a look through every outcome, ties by instance."""
    state = state_with(0)
    for action, number, seconds in steps:
        instance, at = f"i-{number:04d}", T0 + seconds * 1000
        if action == "outcome":
            known = state.outcomes.get(instance)
            if known is None or at < known.event_timestamp:
                state.outcomes[instance] = BootOutcome(instance, None, at, True)
                state.outcome_added(state.outcomes[instance])
        elif action == "prune":
            expected = sorted(state.outcomes.values(), key=lambda o: (o.event_timestamp, o.instance_id))
            state.prune()
            assert sorted(state.outcomes) == sorted(o.instance_id for o in expected[-OUTCOME_LIMIT:])
        elif action == "forget":
            state.forget_after(at)
        else:
            state.outcomes = Tracked(dict(state.outcomes))  # as a read from the table puts it
        want = min((o.event_timestamp for o in state.outcomes.values()), default=None)
        assert state.oldest_outcome_at() == want


def read_config(**changes: Any) -> KnownConfig:
    """A configuration as a read of PCS describes it, with `changes`."""
    described: dict[str, Any] = {
        "modified_at": 1,
        "fingerprint": "f" * 64,
        "node_lifecycle_actions": {"stages": {"nodeBootstrapped": []}},
        "arn": "arn:aws:pcs:us-east-1:1:cluster/c/computenodegroup/g",
        "status": "ACTIVE",
        "tags": {"team": "hpc"},
        "checked_at": 10,
        "tags_checked_at": 5,
        "actions_read": True,
    }
    return KnownConfig(**{**described, **changes})


# Another value for every field a configuration has: a test below fails when a field is added without one.
_OTHER: dict[str, Any] = {
    "modified_at": 2,
    "fingerprint": "e" * 64,
    "node_lifecycle_actions": {"stages": {"nodeReady": []}},
    "arn": None,
    "name": "gpu-nodes",
    "status": "UPDATING",
    "tags": {"team": "hpc", "lifeguard:mode": "off"},
    "checked_at": 20,
    "tags_checked_at": 6,
    "actions_read": False,
}


def test_every_field_of_a_configuration_has_another_value_to_try() -> None:
    assert set(_OTHER) == {known.name for known in fields(KnownConfig)}


@pytest.mark.parametrize("name", sorted(set(_OTHER) - {"checked_at"}))
def test_a_read_that_finds_any_field_but_its_time_changed_does_not_confirm_the_configuration(
    name: str,
) -> None:
    assert not read_config(**{name: _OTHER[name]}).confirms(read_config())


def test_a_read_that_finds_the_configuration_as_it_was_confirms_it_whenever_it_was_made() -> None:
    assert read_config(checked_at=20).confirms(read_config())
    assert read_config(tags={"team": "hpc"}).confirms(read_config())  # equal, not the same dict
    assert not read_config().confirms(None)


def _proof(tag: str, arguments: list[str] | None = None, with_actions: bool = True) -> ProvenGood:
    script = {
        "name": tag,
        "scriptSource": {"scriptLocation": f"s3://b/{tag}.sh"},
        "arguments": arguments or [],
    }
    actions = {"stages": {"nodeBootstrapped": [script]}} if with_actions else None
    return ProvenGood(
        fingerprint=tag * 8,
        node_lifecycle_actions=actions,
        modified_at=T0,
        proven_at=T0,
        instance_id=f"i-{tag}",
    )


def test_a_new_proof_keeps_the_one_of_another_configuration_before_it_when_a_revert_could_use_it() -> None:
    state = state_with()
    first, second, third = _proof("a"), _proof("b"), _proof("b")
    state.prove(first)
    assert (state.proven_good, state.proven_before) == (first, None)
    state.prove(second)
    assert (state.proven_good, state.proven_before) == (second, first)
    state.prove(third)  # the same configuration proven again: the one before is still the other's
    assert (state.proven_good, state.proven_before) == (third, first)
    # One too big to keep beside the configuration and its proof, or kept by its fingerprint alone (no
    # actions: nothing a revert could put back), is not kept.
    rng = random.Random(7)
    random_text = ["".join(chr(rng.randrange(33, 127)) for _ in range(256)) for _ in range(100)]
    for before in (_proof("c", random_text), _proof("d", with_actions=False)):
        state = state_with()
        state.prove(before)
        state.prove(_proof("e"))
        assert state.proven_before is None
