"""The one way the controller changes a group's state: load, change, conditional write, publish.

Events are put in the state's outbox by the same write that makes them true, then published, then
cleared. If publishing fails, the events stay in the outbox and the next invocation for the group
publishes them (once they are older than `STALE_OUTBOX_SECONDS`, so a live invocation is not doubled;
the failed invocation marks them due at once on its way out, so its own retry sends them; one Lambda
stopped at its Timeout never gets that far, and its retry finds them stale). Every group of a batch is
tried before the first failure is raised.
"""

from __future__ import annotations

import contextlib
import json
import logging
import time
import uuid
from collections.abc import Callable, Mapping
from dataclasses import field
from typing import Any

from lifeguard.aws.eventbridge import EventPublisher
from lifeguard.errors import AwsCallError
from lifeguard.event_contract import ControllerEvent
from lifeguard.group_state import GroupState
from lifeguard.metrics import Metric, uncounted
from lifeguard.store.groups import GroupStore, UnreadableStateError, VersionConflictError
from lifeguard.store.table import state_bytes
from lifeguard.values import mutable

__all__ = ["STALE_OUTBOX_SECONDS", "Change", "GroupUpdater"]

# The Timeout of the functions that write an outbox (ScalingEvents, NodeReports: template.yaml, a test holds
# them together). An entry this old belongs to no invocation still running, and Lambda's retry of the one
# that queued it and was stopped at its Timeout, a minute later, finds it stale and publishes it.
STALE_OUTBOX_SECONDS = 45.0
MAX_ATTEMPTS = 10
# The outbox is in the group's item, so it is bounded while EventBridge refuses events: the newest events
# are kept, at most OUTBOX_MAX of them taking at most OUTBOX_MAX_STORED_BYTES compressed (a configuration
# Lifeguard keeps takes up to 64 KiB, and the item also holds the group's and its proven-good one), the
# events of the change being written always. Far more than a group's events between two invocations; one
# dropped is logged as an error. Events are kept whole: one published from the outbox is the one made,
# unless the change's own events take more than OUTBOX_MAX_STORED_BYTES between them (several events of
# one batch, each carrying a configuration of tens of KiB of random arguments): each is then kept
# trimmed as EventBridge's entries are, to its share of that (`ControllerEvent.fitted`: its
# configurations left out, its reason saying so), or the item would pass DynamoDB's 400 KB and no write
# of the group would ever go through again. The events published right after the write are the ones
# made; one published from the outbox (after a lost answer, a timeout or a failed put) is the trimmed.
OUTBOX_MAX = 16
OUTBOX_MAX_STORED_BYTES = 96 * 1024
logger = logging.getLogger("lifeguard")


@mutable(slots=True)
class Change:
    """What a mutation did: whether the state changed, and the events it makes true. `maps_only`: what
    changed, if anything, is the pending launches and outcomes alone (`GroupState.MAPS`), and perhaps when
    the configuration was last confirmed (`KnownConfig.checked_at`), so the write sends the rest of the
    state as the table holds it without writing it out again to compare; a mutation that cannot say so
    leaves it False."""

    changed: bool = False
    events: list[ControllerEvent] = field(default_factory=list)
    maps_only: bool = False
    dropped: int = 0  # outbox entries the change's write lets go at the outbox's bound (set by the updater)


class GroupUpdater:
    """Applies mutations to group states with optimistic concurrency and an outbox."""

    def __init__(
        self,
        store: GroupStore,
        publisher: EventPublisher,
        *,
        clock: Callable[[], float] = time.time,
        max_attempts: int = MAX_ATTEMPTS,
        metric: Metric = uncounted,
    ) -> None:
        self.store = store
        self.publisher = publisher
        self.clock = clock
        self.max_attempts = max_attempts
        self.metric = metric  # counts the events an outbox at its bound dropped (`OutboxEventsDropped`)
        self.conflicts = 0

    def update(
        self, cluster_id: str, group_id: str, mutate: Callable[[GroupState], Change]
    ) -> list[ControllerEvent]:
        """Run `mutate` on the group's current state until its write wins; publish what it made true (and
        any events a failed invocation left in the outbox); returns the events published.

        `mutate` may run more than once (after a conflict) and must give the same result on the same state.
        """
        lost: set[str] = set()  # the attempts that lost their race (each queues its events under its own id)
        for _ in range(self.max_attempts):
            state = self.store.load(cluster_id, group_id)
            attempt = uuid.uuid4().hex
            change, stale = self._apply(state, mutate, attempt)
            if not change.changed and not change.events:
                break
            state.changed_maps_only(change.maps_only and not change.events)
            try:
                self.store.save(state)
            except VersionConflictError:
                self.conflicts += 1
                lost.add(attempt)
                continue
            self._count_dropped(change)
            break
        else:
            raise AwsCallError(
                "PutItem", "VersionConflict", f"{group_id}: {self.max_attempts} conflicting writes"
            )
        # A write whose answer was lost, and that botocore sent again, loses the race to itself: the
        # mutation run again finds its work done and makes no event, but the events it queued are in the
        # outbox (under its attempt's id), too young to be stale. They are this invocation's to publish;
        # those another invocation queued are its own to publish.
        told = {event.key for event in stale + change.events}
        landed = [
            ControllerEvent.from_dict(entry)
            for entry in state.outbox
            if entry.get("by") in lost and entry.get("key") not in told
        ]
        return self._publish(cluster_id, group_id, stale + change.events + landed)

    def update_many(
        self,
        mutations: Mapping[tuple[str, str], Callable[[GroupState], Change]],
        *,
        unreadable: dict[tuple[str, str], str] | None = None,
        published: list[ControllerEvent] | None = None,
    ) -> list[ControllerEvent]:
        """`update` for many groups with one read and one transactional write per 100 groups; groups whose
        write lost a race are redone one by one. A group whose state item, or another item its mutation
        reads (its ledger), cannot be read is left as it is and said in `unreadable` (why, by group), when
        given (`GroupStore.load_many`); else it raises. The events published, returned, are also added to
        `published` as they go, when given: a batch that fails after some were published knows them (they
        are out of their outboxes, not made again on its retry)."""
        out: list[ControllerEvent] = [] if published is None else published
        keys = list(mutations)
        states = self.store.load_many(keys, unreadable)
        if len(states) < len(keys):
            keys = [key for key in keys if key in states]
        applied: dict[tuple[str, str], tuple[Change, list[ControllerEvent]]] = {}
        written: list[GroupState] = []
        try:
            to_write, unchanged = [], []
            for key in keys:
                state = states[key]
                try:
                    change, _ = applied[key] = self._apply(state, mutations[key])
                except UnreadableStateError as exc:  # another item of the group (its ledger) is damaged
                    if unreadable is None:
                        raise
                    unreadable[key] = str(exc)
                    self.store.forget([key])  # the mutation may have changed it before it stopped
                    continue
                if change.changed or change.events:
                    state.changed_maps_only(change.maps_only and not change.events)
                    to_write.append(state)
                else:
                    unchanged.append(key)
            # A remembered state whose mutation changed nothing is never checked against the table (only
            # a write is): another container may have moved the group on. Those are looked at below.
            remembered = self.store.remembered(unchanged) if unchanged else set()
            unwritten = self.store.save_many(to_write, written=written) if to_write else []
            for state in written:
                self._count_dropped(applied[(state.cluster_id, state.group_id)][0])
            lost = {(state.cluster_id, state.group_id) for state in unwritten}
            if remembered:
                lost.update(self._moved_on(sorted(remembered), states))  # redone from a fresh read
        except BaseException:
            self.store.forget(keys)  # remembered states may hold changes that were never written
            # A transaction of an earlier 100 groups may have gone through (or all of them, and a read
            # after failed): their events are true.
            self._publish_written(written, applied, out)
            raise
        failure: AwsCallError | None = None
        for key in [key for key in keys if key in applied]:
            try:
                if key in lost:
                    self.conflicts += 1
                    out.extend(self.update(key[0], key[1], mutations[key]))
                    continue
                change, stale = applied[key]
                if stale or change.events:
                    out.extend(self._publish(key[0], key[1], stale + change.events))
            except UnreadableStateError as exc:  # remembered, damaged in the table since: redone from it
                if unreadable is None:
                    raise
                unreadable[key] = str(exc)
            except AwsCallError as exc:
                failure = failure or exc  # the other groups' events are still tried
        if failure is not None:
            raise failure
        return out

    def _moved_on(
        self, keys: list[tuple[str, str]], states: Mapping[tuple[str, str], GroupState]
    ) -> list[tuple[str, str]]:
        """Of `keys` (remembered states a batch changed nothing of), those the table holds at another
        version than remembered (one BatchGetItem per 100), forgotten: they are redone from the table. The
        others stay remembered as they are (with what a mutation changed there without saying so)."""
        stored = self.store.versions(keys)
        moved = [key for key in keys if stored.get(key, 0) != states[key].version]
        self.store.forget(moved)
        return moved

    def _publish_written(
        self,
        written: list[GroupState],
        applied: Mapping[tuple[str, str], tuple[Change, list[ControllerEvent]]],
        out: list[ControllerEvent],
    ) -> None:
        """Publish the events of the states a failed batch did write, into `out` (best effort: what fails is
        marked due for the retry, and the batch's own failure is what is raised)."""
        for state in written:
            change, stale = applied[(state.cluster_id, state.group_id)]
            if stale or change.events:
                with contextlib.suppress(AwsCallError):
                    out.extend(self._publish(state.cluster_id, state.group_id, stale + change.events))

    def _apply(
        self, state: GroupState, mutate: Callable[[GroupState], Change], attempt: str | None = None
    ) -> tuple[Change, list[ControllerEvent]]:
        now = self.clock()
        stale = [
            ControllerEvent.from_dict(entry)
            for entry in state.outbox
            if now - float(entry.get("queued_at", 0)) >= STALE_OUTBOX_SECONDS
        ]
        change = mutate(state)
        if change.events:
            by = {"by": attempt} if attempt is not None else {}
            fresh, fresh_bytes = _kept_entries(change.events, {"queued_at": now, **by})
            state.outbox.extend(fresh)
            kept = _bounded(state.outbox, len(fresh), fresh_bytes)
            if len(kept) < len(state.outbox):
                dropped = state.outbox[: len(state.outbox) - len(kept)]
                state.outbox = kept
                logger.error(
                    "outbox of %s full: %d event(s) never published are dropped (%s)",
                    state.group_id,
                    len(dropped),
                    ", ".join(str(entry.get("key")) for entry in dropped),
                )
                change.dropped = len(dropped)
        state.mutated(maps_only=change.maps_only and not change.events)
        return change, stale

    def _count_dropped(self, change: Change) -> None:
        """Count the outbox entries a written change let go (`OutboxEventsDropped`): a write that lost its
        race let none go."""
        if change.dropped:
            self.metric("OutboxEventsDropped", change.dropped)

    def _publish(
        self, cluster_id: str, group_id: str, events: list[ControllerEvent]
    ) -> list[ControllerEvent]:
        if events:
            try:
                self.publisher.publish(events)
            except AwsCallError:
                self._due_now(cluster_id, group_id, {event.key for event in events})
                raise
            self._clear(cluster_id, group_id, {event.key for event in events})
        return events

    def _due_now(self, cluster_id: str, group_id: str, keys: set[str]) -> None:
        """Mark events that could not be published as due at once: the retry of this invocation (a minute
        later, before they would count as stale) publishes them instead of leaving them for the group's
        next record, which may never come. Best effort: the invocation is failing already."""
        for _ in range(self.max_attempts):
            try:
                state = self.store.load(cluster_id, group_id)
                due = [entry for entry in state.outbox if entry.get("key") in keys and entry.get("queued_at")]
                if not due:
                    return
                for entry in due:
                    entry["queued_at"] = 0
                self.store.save(state)
                return
            except VersionConflictError:
                self.conflicts += 1
            except AwsCallError as exc:
                logger.warning("outbox of %s not marked due: %s", group_id, exc)
                return

    def _clear(self, cluster_id: str, group_id: str, keys: set[str]) -> None:
        for _ in range(self.max_attempts):
            state = self.store.load(cluster_id, group_id)
            kept = [entry for entry in state.outbox if entry.get("key") not in keys]
            if len(kept) == len(state.outbox):
                return
            state.outbox = kept
            try:
                self.store.save(state)
                return
            except VersionConflictError:
                self.conflicts += 1
        logger.warning(
            "outbox of %s not cleared after %d attempts; events may be published again",
            group_id,
            self.max_attempts,
        )


def _kept_entries(events: list[ControllerEvent], extra: dict[str, Any]) -> tuple[list[dict[str, Any]], int]:
    """The outbox entries of a change's events (with `extra`), and what they take stored: whole, unless they
    take more than OUTBOX_MAX_STORED_BYTES between them; then each fitted to its share of that (its JSON, no
    smaller compressed)."""
    entries = [{**event.to_dict(), **extra} for event in events]
    size = _stored_size(entries)
    if size <= OUTBOX_MAX_STORED_BYTES:
        return entries, size
    share = OUTBOX_MAX_STORED_BYTES // len(events)
    into = f"the group's outbox ({OUTBOX_MAX_STORED_BYTES // 1024} KB, in its table item)"
    fitted = [
        {**ControllerEvent(e.detail_type, e.fitted(share, into=into), e.key).to_dict(), **extra}
        for e in events
    ]
    logger.warning(
        "%d event(s) of one change take more than %d KB: kept in the outbox trimmed (%s); published whole "
        "right after the write, trimmed if from the outbox",
        len(events),
        OUTBOX_MAX_STORED_BYTES // 1024,
        ", ".join(event.key for event in events),
    )
    return fitted, _stored_size(fitted)


def _stored_size(entries: list[dict[str, Any]]) -> int:
    """What outbox entries take stored in the state's body (each compressed on its own: no less than in
    the body, with the rest)."""
    return sum(state_bytes(json.dumps(entry)) for entry in entries)


def _bounded(outbox: list[dict[str, Any]], fresh: int, fresh_bytes: int) -> list[dict[str, Any]]:
    """The newest entries of `outbox` within OUTBOX_MAX and OUTBOX_MAX_STORED_BYTES; its last `fresh` (the
    change being written, taking `fresh_bytes` stored) kept whatever they take."""
    if len(outbox) <= fresh:
        return outbox
    size = fresh_bytes
    start = len(outbox) - fresh
    while start > 0 and len(outbox) - start < OUTBOX_MAX:
        size += state_bytes(json.dumps(outbox[start - 1]))
        if size > OUTBOX_MAX_STORED_BYTES:
            break
        start -= 1
    return outbox[start:]
