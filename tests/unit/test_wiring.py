"""The composition roots: each Lambda's logic built from the environment and the clients it is given,
with what is missing named in one line."""

from __future__ import annotations

from typing import Any

import pytest

from lifeguard.errors import LifeguardError
from lifeguard.notify import NotificationError, SlackChannel, SnsChannel
from lifeguard.wiring import build_notify, build_remediate, build_scaling_events, wire
from tests.conftest import applied_event
from tests.unit.fakes import client_error


class Clients:
    """Hands out one placeholder client per service and records what was asked for (no call is made)."""

    def __init__(self) -> None:
        self.asked: list[tuple[str, int]] = []

    def __call__(self, service: str, *, attempts: int = 5) -> Any:
        self.asked.append((service, attempts))
        return object()


@pytest.fixture(autouse=True)
def _no_lifeguard_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in ("TABLE", "EVENT_BUS", "TOPIC_ARN", "SLACK_SECRET", "DEFAULT_MODE"):
        monkeypatch.delenv(f"LIFEGUARD_{name}", raising=False)


def test_without_a_table_wire_says_which_variable_to_set() -> None:
    with pytest.raises(LifeguardError, match="LIFEGUARD_TABLE is not set"):
        wire(clients=Clients())


def test_wire_takes_its_clients_from_what_it_is_given() -> None:
    clients = Clients()
    wiring = wire("lifeguard-table", "lifeguard-bus", clients=clients)
    assert sorted(service for service, _ in clients.asked) == ["dynamodb", "events", "pcs"]
    assert wiring.store.table == "lifeguard-table"
    assert wiring.publisher.bus_name == "lifeguard-bus"


def test_the_remediator_asks_for_a_pcs_client_that_leaves_retries_to_it() -> None:
    clients = Clients()
    wiring = wire("t", clients=clients)
    clock = lambda: 1234.5  # noqa: E731
    slept: list[float] = []
    remediator = build_remediate(wiring, clock=clock, sleep=slept.append)
    assert ("pcs", 1) in clients.asked
    assert remediator.clock() == 1234.5
    remediator.sleep(2.0)
    assert slept == [2.0]


def test_the_scaling_events_handler_runs_on_the_clock_it_is_given() -> None:
    handler = build_scaling_events(wire("t", clients=Clients()), clock=lambda: 42.0)
    assert handler.clock() == 42.0


def test_notify_without_a_channel_says_nowhere_to_notify() -> None:
    with pytest.raises(LifeguardError, match="nowhere to notify"):
        build_notify("t", clients=Clients())


def test_notify_uses_the_channels_that_are_set_and_paces_slack_as_told() -> None:
    clients = Clients()
    notifier = build_notify(
        "t",
        topic_arn="arn:aws:sns:us-east-1:123456789012:t",
        slack_secret="s",
        clients=clients,
        slack_interval_seconds=0,
    )
    assert [type(c) for c in notifier.channels] == [SnsChannel, SlackChannel]
    slack = notifier.channels[1]
    assert isinstance(slack, SlackChannel)
    assert slack.min_interval_seconds == 0
    # A duplicate delivery running beside the first waits for its send (`Notifier._claim`), not raises.
    assert notifier.wait_for_others_seconds == 20.0
    assert sorted(service for service, _ in clients.asked) == ["dynamodb", "secretsmanager", "sns"]
    # No botocore retries under SNS: a Publish sent again after its answer timed out publishes it again.
    assert ("sns", 1) in clients.asked
    only_sns = build_notify(topic_arn="arn:aws:sns:us-east-1:123456789012:t", clients=Clients())
    assert [c.name for c in only_sns.channels] == ["sns"]
    assert only_sns.notices is None  # no table: nothing claimed, every channel sent


class _SnsDown:
    def publish(self, **_: Any) -> None:
        raise client_error("Publish", "InternalErrorException")


@pytest.mark.parametrize("retried", [True, False])
def test_a_channel_that_failed_says_what_becomes_of_the_event(retried: bool) -> None:
    """In the stack the event is tried three times, then parked, and the error says so on every try (the
    last one too); a replay, which tries nothing again, says nothing of it."""
    notifier = build_notify(
        topic_arn="arn:aws:sns:us-east-1:123456789012:t",
        clients=lambda service, **_: _SnsDown(),
        retried=retried,
    )
    with pytest.raises(NotificationError) as raised:
        notifier.handle_event(applied_event())
    text = str(raised.value)
    assert "not delivered to sns (" in text
    assert "Publish failed" in text
    then = "; the notify function tries an event three times, about 1 and 3 minutes apart, then parks it"
    assert text.endswith(then) is retried
    assert "will be retried" not in text


def test_who_changed_a_configuration_is_lifeguard_when_its_ledger_holds_that_very_change() -> None:
    """Lifeguard's own update is also a CloudTrail call, by its role: the ledger, which matches the
    configuration's modifiedAt to the millisecond, says it was Lifeguard's; a person's change to the same
    configuration later is the review's."""
    from lifeguard.group_state import KnownConfig
    from lifeguard.remediation import AppliedChange, Ledger
    from lifeguard.store.changes import ChangeRecord, ChangeStore
    from lifeguard.store.remediations import RemediationStore
    from lifeguard.wiring import change_lookup
    from tests.unit.fakes import FakeDynamoDB

    table, cluster, group, fingerprint, modified = (
        FakeDynamoDB(),
        "pcs_abc123de45",
        "pcs_abcdef01",
        "a" * 64,
        1_792_545_000_000,
    )
    wiring = wire("t", "b", clients=lambda service, **_: table if service == "dynamodb" else object())
    role = "arn:aws:sts::123456789012:assumed-role/pcs-lifeguard-RemediateRole-1A2B/remediate"
    ChangeStore(table, "t").put(
        ChangeRecord(cluster, group, fingerprint, role, modified + 400, "UpdateComputeNodeGroup", "e" * 36)
    )
    ledger = Ledger(
        changes=[
            AppliedChange(
                at=modified / 1000 - 1,
                episode_id="ep-1",
                revision=1,
                action="quarantine",
                config_before=None,
                config_after=None,
                fingerprint_before="b" * 64,
                fingerprint_after=fingerprint,
                modified_at_after=modified,
            )
        ]
    )
    RemediationStore(table, "t").save_ledger(cluster, group, ledger)
    changed_by = change_lookup(wiring)
    ours = KnownConfig(modified_at=modified, fingerprint=fingerprint, checked_at=modified)
    assert changed_by(cluster, group, ours) == {"arn": None, "at": modified - 1000, "source": "lifeguard"}
    theirs = KnownConfig(
        modified_at=modified + 60_000, fingerprint=fingerprint, checked_at=modified
    )  # by bob
    ChangeStore(table, "t").put(
        ChangeRecord(
            cluster,
            group,
            fingerprint,
            "arn:aws:iam::123456789012:user/bob",
            modified + 60_000,
            "UpdateComputeNodeGroup",
            "f" * 36,
        )
    )
    assert changed_by(cluster, group, theirs)["source"] == "cloudtrail"


def test_notify_claims_each_message_until_its_invocation_ends() -> None:
    """The function's time left bounds each claim (`Notifier._claim`): a claim its failed send could not give
    back holds off no retry of Lambda's."""
    from tests.unit.fakes import FakeDynamoDB

    table = FakeDynamoDB()
    notifier = build_notify(
        "t",
        topic_arn="arn:aws:sns:us-east-1:123456789012:t",
        clients=lambda service, **_: table if service == "dynamodb" else _SnsDown(),
        clock=lambda: 1_000.0,
        time_left=lambda: 30.0,
    )
    table.fail["DeleteItem"] = [client_error("ThrottlingException", "DeleteItem")]
    with pytest.raises(NotificationError):
        notifier.handle_event(applied_event())
    [claim] = [item for item in table.items.values() if "sending_until" in item]
    assert float(claim["sending_until"]["N"]) == 1_000.0 + 30.0 + 15.0


def test_the_functions_updater_counts_what_an_outbox_drops_in_their_metrics() -> None:
    counted: list[tuple[str, float]] = []
    wiring = wire("t", clients=Clients(), metric=lambda name, value: counted.append((name, value)))
    wiring.updater.metric("OutboxEventsDropped", 2)
    assert counted == [("OutboxEventsDropped", 2)]
