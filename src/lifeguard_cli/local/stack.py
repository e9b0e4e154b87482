"""The stack's resources, made in the local AWS as template.yaml makes them in an account."""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

__all__ = ["LocalStack", "create_stack", "create_state_table"]

# As template.yaml's StateTable (a test holds the two together).
STATE_TABLE_SCHEMA: dict[str, Any] = {
    "BillingMode": "PAY_PER_REQUEST",
    "AttributeDefinitions": [
        {"AttributeName": "pk", "AttributeType": "S"},
        {"AttributeName": "sk", "AttributeType": "S"},
    ],
    "KeySchema": [{"AttributeName": "pk", "KeyType": "HASH"}, {"AttributeName": "sk", "KeyType": "RANGE"}],
}


def create_state_table(dynamodb: Any, name: str) -> None:
    """Lifeguard's table, with TTL on `expires_at`."""
    dynamodb.create_table(TableName=name, **STATE_TABLE_SCHEMA)
    dynamodb.update_time_to_live(
        TableName=name, TimeToLiveSpecification={"Enabled": True, "AttributeName": "expires_at"}
    )


@dataclass(frozen=True)
class LocalStack:
    """The names of one local deployment, and a queue that receives every controller event."""

    table: str
    event_bus: str
    events_queue_url: str

    def received_events(self, sqs: Any) -> list[dict[str, Any]]:
        """Controller events the bus delivered to the queue so far (consumed)."""
        found: list[dict[str, Any]] = []
        while True:
            messages = sqs.receive_message(QueueUrl=self.events_queue_url, MaxNumberOfMessages=10).get(
                "Messages", []
            )
            if not messages:
                return found
            for message in messages:
                found.append(json.loads(message["Body"]))
                sqs.delete_message(QueueUrl=self.events_queue_url, ReceiptHandle=message["ReceiptHandle"])


def create_stack(dynamodb: Any, events: Any, sqs: Any, prefix: str) -> LocalStack:
    """A table, an event bus, and a rule that copies every `lifeguard` event on it to an SQS queue."""
    table = f"{prefix}-state"
    create_state_table(dynamodb, table)
    bus = f"{prefix}-bus"
    events.create_event_bus(Name=bus)
    queue_url = sqs.create_queue(QueueName=f"{prefix}-events")["QueueUrl"]
    queue_arn = sqs.get_queue_attributes(QueueUrl=queue_url, AttributeNames=["QueueArn"])["Attributes"][
        "QueueArn"
    ]
    rule = f"{prefix}-all"
    events.put_rule(
        Name=rule, EventBusName=bus, EventPattern=json.dumps({"source": ["lifeguard"]}), State="ENABLED"
    )
    events.put_targets(Rule=rule, EventBusName=bus, Targets=[{"Id": "queue", "Arn": queue_arn}])
    return LocalStack(table=table, event_bus=bus, events_queue_url=queue_url)
