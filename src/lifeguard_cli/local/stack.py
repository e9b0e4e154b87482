"""The stack's resources, made in the local AWS as template.yaml makes them in an account."""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

__all__ = [
    "LocalChannels",
    "LocalStack",
    "create_notification_channels",
    "create_stack",
    "create_state_table",
]

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


@dataclass(frozen=True)
class LocalChannels:
    """The notification side of a local deployment: an SNS topic (with an SQS queue subscribed, to read
    what it published) and a Secrets Manager secret holding the Slack webhook URL."""

    topic_arn: str
    topic_queue_url: str
    slack_secret: str

    def received_sns(self, sqs: Any) -> list[dict[str, Any]]:
        """What the topic published so far (consumed), as `{"channel": "sns", "subject", "message",
        "attributes"}`."""
        found: list[dict[str, Any]] = []
        while True:
            messages = sqs.receive_message(QueueUrl=self.topic_queue_url, MaxNumberOfMessages=10).get(
                "Messages", []
            )
            if not messages:
                return found
            for message in messages:
                envelope = json.loads(message["Body"])
                attributes = {k: v.get("Value") for k, v in envelope.get("MessageAttributes", {}).items()}
                found.append(
                    {
                        "channel": "sns",
                        "subject": envelope.get("Subject"),
                        "message": envelope.get("Message"),
                        "attributes": attributes,
                    }
                )
                sqs.delete_message(QueueUrl=self.topic_queue_url, ReceiptHandle=message["ReceiptHandle"])


def create_notification_channels(
    sns: Any, sqs: Any, secrets: Any, prefix: str, webhook_url: str
) -> LocalChannels:
    """The topic and its reading queue, and the webhook secret, as template.yaml's NotificationTopic and
    the operator's Slack secret are in an account."""
    topic_arn = sns.create_topic(Name=f"{prefix}-notifications")["TopicArn"]
    queue_url = sqs.create_queue(QueueName=f"{prefix}-notifications")["QueueUrl"]
    queue_arn = sqs.get_queue_attributes(QueueUrl=queue_url, AttributeNames=["QueueArn"])["Attributes"][
        "QueueArn"
    ]
    sns.subscribe(TopicArn=topic_arn, Protocol="sqs", Endpoint=queue_arn)
    secret = secrets.create_secret(Name=f"{prefix}/slack-webhook", SecretString=webhook_url)["ARN"]
    return LocalChannels(topic_arn=topic_arn, topic_queue_url=queue_url, slack_secret=secret)
