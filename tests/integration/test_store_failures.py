"""The state store and the updater under a broken network and a refusing EventBridge (moto server, real
HTTP): a write whose answer is lost, a read that fails after a transaction went through, an outbox that
keeps growing."""

from __future__ import annotations

import json
import uuid
from typing import Any

import pytest
from botocore.exceptions import ConnectionClosedError
from botocore.httpsession import URLLib3Session

from lifeguard.aws.clients import client_config
from lifeguard.aws.eventbridge import EventPublisher
from lifeguard.errors import AwsCallError
from lifeguard.event_contract import ControllerEvent, make_detail
from lifeguard.group_state import GroupState
from lifeguard.handlers.updater import Change, GroupUpdater
from lifeguard.store.groups import GroupStore
from lifeguard_cli.local.stack import create_stack

pytestmark = pytest.mark.integration
CLUSTER, GROUP = "pcs_abc123de45", "pcs_abcdef01"


def lose_answer_once(client: Any, operation: str) -> list[int]:
    """The next `operation` reaches DynamoDB and is applied, but its answer is lost on the way back
    (a connection reset): botocore's standard retry sends the same request again."""
    lost: list[int] = []
    http = URLLib3Session()

    def before_send(request: Any, **_: Any) -> None:
        if not lost:
            lost.append(http.send(request).status_code)  # it reached the server and was applied
            raise ConnectionClosedError(endpoint_url=request.url)

    client.meta.events.register(f"before-send.dynamodb.{operation}", before_send)
    return lost


@pytest.fixture
def world(local: Any) -> Any:
    stack = create_stack(
        local.client("dynamodb"), local.client("events"), local.client("sqs"), f"sf-{uuid.uuid4().hex[:8]}"
    )
    dynamodb = local.client("dynamodb", config=client_config(5))
    store = GroupStore(dynamodb, stack.table)
    publisher = EventPublisher(local.client("events"), stack.event_bus, sleep=lambda _: None)
    return stack, dynamodb, store, publisher


def announce(instance: str) -> Any:
    """Records a launch (idempotent, as every mutation must be) and announces the loop once."""

    def mutate(state: GroupState) -> Change:
        if instance in state.launches:
            return Change()
        state.launches[instance] = 1
        event = ControllerEvent("BootstrapLoopDetected", make_detail(episode_id="ep-1"), "ep-1:Detected:1")
        return Change(True, [event])

    return mutate


def test_a_write_whose_answer_is_lost_still_publishes_its_event(world: Any, local: Any) -> None:
    stack, dynamodb, store, publisher = world
    lost = lose_answer_once(dynamodb, "PutItem")
    published = GroupUpdater(store, publisher).update(CLUSTER, GROUP, announce("i-1"))
    assert lost == [200]  # the first PutItem was applied; its retry met its own write
    state = GroupStore(local.client("dynamodb"), stack.table).load(CLUSTER, GROUP)
    received = stack.received_events(local.client("sqs"))
    assert [event.key for event in published] == ["ep-1:Detected:1"], (
        f"published {published}; on the bus {len(received)}; left in the outbox {state.outbox}"
    )


def fail_always(client: Any, operation: str) -> None:
    """Every `operation` is lost on the network (botocore retries, then gives up)."""

    def before_send(request: Any, **_: Any) -> None:
        raise ConnectionClosedError(endpoint_url=request.url)

    client.meta.events.register(f"before-send.dynamodb.{operation}", before_send)


def noop(state: GroupState) -> Change:
    return Change()


def launch(instance: str) -> Any:
    def mutate(state: GroupState) -> Change:
        if instance in state.launches:
            return Change()
        state.launches[instance] = 1
        return Change(True, maps_only=True)

    return mutate


def test_a_failed_version_read_after_the_transaction_still_publishes_the_written_groups_events(
    world: Any, local: Any
) -> None:
    stack, _, _, publisher = world
    dynamodb = local.client("dynamodb", config=client_config(2))
    store = GroupStore(dynamodb, stack.table)
    clock = [1_800_000_000.0]
    updater = GroupUpdater(store, publisher, clock=lambda: clock[0])
    a, b = (CLUSTER, "pcs_aaaaaaa1"), (CLUSTER, "pcs_bbbbbbb2")
    updater.update_many({a: launch("i-1"), b: launch("i-2")})  # a warm container now remembers both
    fail_always(dynamodb, "BatchGetItem")  # throttled, or the network: the check of b's version fails
    with pytest.raises(AwsCallError, match="BatchGetItem"):
        updater.update_many({a: announce("i-3"), b: noop})  # a's write (with its event) goes through
    # Lambda retries the batch a minute later, the table readable again.
    dynamodb.meta.events.unregister("before-send.dynamodb.BatchGetItem")
    clock[0] += 60
    retried = GroupUpdater(
        GroupStore(local.client("dynamodb"), stack.table), publisher, clock=lambda: clock[0]
    )
    retried.update_many({a: announce("i-3"), b: noop})
    state = GroupStore(local.client("dynamodb"), stack.table).load(*a)
    received = stack.received_events(local.client("sqs"))
    assert len(received) == 1, f"on the bus: {len(received)}; a's outbox: {state.outbox}"


def big_config() -> dict[str, Any]:
    """A configuration PCS accepts and Lifeguard keeps (under CONFIG_MAX_STORED_BYTES stored): 20 scripts
    of 20 arguments of 160 random base64 characters (tokens, keys): about 64 KiB compressed."""
    import base64
    import os

    scripts = [
        {
            "name": f"s{n}",
            "scriptSource": {"scriptLocation": "s3://bkt/x.sh"},
            "arguments": [base64.b64encode(os.urandom(120)).decode() for _ in range(20)],
        }
        for n in range(20)
    ]
    return {"stages": {"nodeBootstrapped": scripts}}


def stored_with(store: GroupStore, good: dict[str, Any], broken: dict[str, Any]) -> None:
    """The group's state stored with `broken` its configuration and `good` its proven-good one."""
    from lifeguard.group_state import KnownConfig, ProvenGood
    from lifeguard.lifecycle import canonical_json, fingerprint_of_json

    state = store.load(CLUSTER, GROUP)
    state.config = KnownConfig(
        modified_at=2,
        fingerprint=fingerprint_of_json(canonical_json(broken)),
        node_lifecycle_actions=broken,
        checked_at=2,
    )
    state.proven_good = ProvenGood(
        fingerprint="f", node_lifecycle_actions=good, modified_at=1, proven_at=1, instance_id="i-0"
    )
    store.save(state)


def test_the_outbox_stays_bounded_and_the_item_writable_while_putevents_fails(
    world: Any, local: Any, caplog: pytest.LogCaptureFixture
) -> None:
    from lifeguard.bounds import CONFIG_MAX_STORED_BYTES
    from lifeguard.lifecycle import canonical_json
    from lifeguard.store.table import state_bytes

    stack, _, _, _ = world
    store = GroupStore(local.client("dynamodb"), stack.table)
    good, broken = big_config(), big_config()
    for config in (good, broken):
        assert state_bytes(canonical_json(config)) <= CONFIG_MAX_STORED_BYTES  # kept whole
    stored_with(store, good, broken)
    # EventBridge refuses every put (the bus deleted, a policy changed, an outage): each revision of the
    # episode (a config change, escalation) queues an event that carries config_before.
    publisher = EventPublisher(local.client("events"), "no-such-bus", sleep=lambda _: None)
    updater = GroupUpdater(store, publisher)

    def revision(n: int) -> Any:
        def mutate(s: GroupState) -> Change:
            if any(e["key"] == f"ep-1:Detected:{n}" for e in s.outbox):
                return Change()
            detail = make_detail(episode_id="ep-1", config_before=s.config.node_lifecycle_actions)
            return Change(True, [ControllerEvent("BootstrapLoopDetected", detail, f"ep-1:Detected:{n}")])

        return mutate

    errors = []
    for n in range(1, 9):
        try:
            updater.update(CLUSTER, GROUP, revision(n))
        except AwsCallError as exc:
            errors.append(str(exc))
    assert all("PutEvents" in error for error in errors), "\n".join(f"{i}: {e}" for i, e in enumerate(errors))
    assert len(errors) == 8
    state = store.load(CLUSTER, GROUP)
    # The newest kept whole (a consumer takes it as it was made); the older ones dropped, each said.
    kept = [entry["key"] for entry in state.outbox]
    assert kept[-1] == "ep-1:Detected:8"
    assert len(kept) < 8
    assert all(entry["detail"]["config_before"] == broken for entry in state.outbox)
    said = [
        r.getMessage() for r in caplog.records if r.levelname == "ERROR" and "outbox of" in r.getMessage()
    ]
    dropped = [key for key in (f"ep-1:Detected:{n}" for n in range(1, 9)) if key not in kept]
    assert all(any(key in line for line in said) for key in dropped)


def test_a_change_whose_events_would_pass_the_item_bound_keeps_them_trimmed_and_the_group_writable(
    world: Any, local: Any, caplog: pytest.LogCaptureFixture
) -> None:
    """One batch can make several events of a group (a loop detected, resolved and detected again), each
    carrying the configuration: with configurations of tens of KiB of random arguments, kept whole they
    would take the item past DynamoDB's 400 KB, and every write of the group would fail from then on."""
    from lifeguard.store.table import state_bytes

    stack, _, _, working = world
    store = GroupStore(local.client("dynamodb"), stack.table)
    stored_with(store, big_config(), big_config())
    publisher = EventPublisher(local.client("events"), "no-such-bus", sleep=lambda _: None)
    updater = GroupUpdater(store, publisher)
    made: list[ControllerEvent] = []

    def several(s: GroupState) -> Change:
        before = s.config.node_lifecycle_actions
        events = [
            ControllerEvent(
                "BootstrapLoopDetected",
                make_detail(episode_id="ep-1", reason="looped", config_before=before),
                f"ep-1:Detected:{n}",
            )
            for n in range(1, 5)
        ]
        made[:] = events
        return Change(True, events)

    with pytest.raises(AwsCallError, match="PutEvents"):  # written, then EventBridge refused them
        updater.update(CLUSTER, GROUP, several)
    state = store.load(CLUSTER, GROUP)
    assert [entry["key"] for entry in state.outbox] == [event.key for event in made]
    assert sum(state_bytes(json.dumps(entry)) for entry in state.outbox) <= 96 * 1024
    for entry in state.outbox:
        assert entry["detail"]["config_before"] is None
        assert entry["detail"]["reason"] == (
            "looped config_before left out to fit the group's outbox (96 KB, in its table item) "
            "(`aws pcs get-compute-node-group` shows the configuration in place)."
        )
    assert any("kept in the outbox trimmed" in r.getMessage() for r in caplog.records)
    # The group stays writable: its next batch goes through, and publishes the events left, as kept.
    published = GroupUpdater(store, working).update(CLUSTER, GROUP, lambda s: Change(True))
    assert [event.key for event in published] == [event.key for event in made]
    after = store.load(CLUSTER, GROUP)
    assert after.version > state.version  # written (and written again once the outbox was published)
    assert after.outbox == []
