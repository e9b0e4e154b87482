"""`lifeguard status`'s read of the deployed stack's health: each read on its own, a refused one said."""

from __future__ import annotations

from dataclasses import replace
from typing import Any

from lifeguard_cli.cli import _health_line
from lifeguard_cli.operate import Operator, StackHealth, StackView
from tests.unit.fakes import FakeDynamoDB, client_error

STACK = StackView(
    stack_name="pcs-lifeguard",
    region="us-east-1",
    default_mode="notify",
    dry_run=False,
    topic="arn:aws:sns:us-east-1:123456789012:notifications",
    alarms="arn:aws:sns:us-east-1:123456789012:alarms",
    parked="https://sqs.us-east-1.amazonaws.com/123456789012/parked",
    failed="https://sqs.us-east-1.amazonaws.com/123456789012/failed",
)


class _Refused:
    """A client whose every call is refused as IAM refuses it."""

    def __init__(self, operation: str) -> None:
        self.operation = operation

    def __getattr__(self, _: str) -> Any:
        def refused(*_: Any, **__: Any) -> Any:
            raise client_error("AccessDeniedException", self.operation, "not authorized")

        return refused


class _Paged:
    """A client of one paginated operation, answering `pages`."""

    def __init__(self, pages: list[dict[str, Any]]) -> None:
        self.pages = pages
        self.asked: list[dict[str, Any]] = []

    def get_paginator(self, _: str) -> Any:
        outer = self

        class Paginator:
            def paginate(self, **params: Any) -> list[dict[str, Any]]:
                outer.asked.append(params)
                return outer.pages

        return Paginator()


def test_a_refused_read_is_said_and_the_others_still_tell() -> None:
    sns = _Paged(
        [
            {
                "Subscriptions": [
                    {"SubscriptionArn": "arn:aws:sns:us-east-1:123456789012:alarms:1"},
                    {"SubscriptionArn": "PendingConfirmation"},  # not told until confirmed
                ]
            }
        ]
    )
    cloudwatch = _Paged(
        [{"MetricAlarms": [{"AlarmName": "pcs-lifeguard-NotifyErrorsAlarm-X", "StateValue": "ALARM"}]}]
    )
    clients = {"dynamodb": FakeDynamoDB(), "sqs": _Refused("GetQueueAttributes"), "sns": sns}
    clients["cloudwatch"] = cloudwatch
    health = Operator("t", client=clients.__getitem__, stack=STACK).health()
    assert health is not None
    assert (health.parked_events, health.failed_batches) == (None, None)
    assert (health.notification_subscribers, health.alarm_subscribers) == (1, 1)
    assert health.alarms_firing == ("pcs-lifeguard-NotifyErrorsAlarm-X",)
    assert cloudwatch.asked == [{"AlarmNamePrefix": "pcs-lifeguard-", "StateValue": "ALARM"}]
    assert len(health.unread) == 2
    assert health.unread[0].startswith("the parked events' queue: ")
    assert "GetQueueAttributes" in health.unread[0]
    assert "GetQueueAttributes was denied: not authorized (grant it" in health.unread[0]
    # Nothing is said to need attention that was not read.
    assert health.attention(STACK) == ["alarms in ALARM: pcs-lifeguard-NotifyErrorsAlarm-X"]


def test_without_a_stack_there_is_no_health_to_read() -> None:
    assert Operator("t", client=lambda _: FakeDynamoDB()).health() is None


def test_a_topic_nobody_subscribes_to_needs_attention_unless_slack_is_told() -> None:
    health = StackHealth(notification_subscribers=0, alarm_subscribers=0, alarms_firing=())
    said = health.attention(STACK)
    assert [line.split(":")[0] for line in said] == [
        "no one is subscribed to the notification topic and no Slack webhook is set",
        "no one is subscribed to the alarm topic",
    ]
    with_slack = StackView(**{**STACK.__dict__, "slack": True})
    assert [line.split(":")[0] for line in health.attention(with_slack)] == [
        "no one is subscribed to the alarm topic"
    ]


def test_counts_read_up_to_their_bound_say_there_may_be_more() -> None:
    """150 confirmed subscribers, 120 alarms firing: read up to 100 each, and said as 100+, not 100; a
    queue's depth is exact, however large."""
    subscriptions = [{"SubscriptionArn": f"arn:aws:sns:us-east-1:123456789012:n:{i}"} for i in range(150)]
    alarms = [{"AlarmName": f"pcs-lifeguard-A{i}Alarm-X", "StateValue": "ALARM"} for i in range(120)]
    clients: dict[str, Any] = {
        "dynamodb": FakeDynamoDB(),
        "sqs": _Queues(150),
        "sns": _Paged([{"Subscriptions": subscriptions[:80]}, {"Subscriptions": subscriptions[80:]}]),
        "cloudwatch": _Paged([{"MetricAlarms": alarms[:60]}, {"MetricAlarms": alarms[60:]}]),
    }
    health = Operator("t", client=clients.__getitem__, stack=STACK).health()
    assert health is not None
    assert (health.parked_events, health.notification_subscribers) == (150, 100)
    assert health.alarms_firing is not None
    assert len(health.alarms_firing) == 100
    line = _health_line(health, STACK)
    assert line.startswith("health: parked events 150, failed batches 150; subscribers: notifications 100+,")
    assert line.endswith("alarms in ALARM: 100+")
    assert health.to_dict()["read_max"] == 100


def test_what_a_stack_has_none_of_is_a_dash_and_what_was_not_read_a_question_mark() -> None:
    """A replay's stack keeps no queues or topics: its health read `?` for each, with no `not read:` line to
    say why, as if reads had failed."""
    bare = replace(STACK, topic=None, alarms=None, parked=None, failed=None)
    clients: dict[str, Any] = {"dynamodb": FakeDynamoDB(), "cloudwatch": _Paged([{"MetricAlarms": []}])}
    health = Operator("t", client=clients.__getitem__, stack=bare).health()
    assert health is not None
    assert health.unread == ()
    line = _health_line(health, bare)
    assert line == (
        "health: parked events -, failed batches -; subscribers: notifications -, alarms -; "
        "alarms in ALARM: none"
    )
    assert "?" in _health_line(replace(health, parked_events=None), STACK)


class _Queues:
    """SQS answering every queue's depth with `depth` visible messages."""

    def __init__(self, depth: int) -> None:
        self.depth = depth

    def get_queue_attributes(self, **_: Any) -> dict[str, Any]:
        return {"Attributes": {"ApproximateNumberOfMessages": str(self.depth)}}
