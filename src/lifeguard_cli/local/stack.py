"""The stack's resources, made in the local AWS as template.yaml makes them in an account."""

from __future__ import annotations

import importlib.util
import json
import shutil
import sys
import tempfile
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from functools import cache
from pathlib import Path
from types import ModuleType
from typing import Any

from lifeguard_cli.resources import resource

__all__ = [
    "STACK_PARAMETERS",
    "LocalChannels",
    "LocalDeployment",
    "LocalStack",
    "create_deployed_stack",
    "create_notification_channels",
    "create_stack",
    "create_state_table",
    "describe_replay_stack",
    "publish_bundle",
]

PUBLISH_FUNCTION = resource("functions", "publish_bundle", "app.py")
INSTALL_SHIPPER = resource("events", "node", "install-shipper.sh")
# The template's parameters that operator commands read, with template.yaml's defaults.
STACK_PARAMETERS = {"DefaultMode": "notify", "DryRun": "false", "ClusterIds": "", "DrainKeptNodes": "false"}

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


# The calls that fill the local stack's reading queues, by service.
_SENDS = {"sns": "Publish", "events": "PutEvents"}


class Sends:
    """Whether the functions called SNS's Publish or EventBridge's PutEvents since the queue that reads each
    back was last read. Both deliver to those queues within the call (moto does so before it answers), so
    a queue no call can have filled is not read: a replay or a simulation reads it after each invocation.
    `watch` is `LocalClients`' `configure`: it hooks each client as it is made."""

    def __init__(self) -> None:
        self._sent = dict.fromkeys(_SENDS, False)

    def watch(self, service: str, client: Any) -> None:
        if service in _SENDS:
            client.meta.events.register(f"after-call.{service}.{_SENDS[service]}", self._noter(service))

    def _noter(self, service: str) -> Callable[..., None]:
        def note(**_: Any) -> None:  # answered or refused: a queue is read once too often, never too few
            self._sent[service] = True

        return note

    def take(self, service: str) -> bool:
        """Whether `service` was called since the last `take` of it."""
        sent, self._sent[service] = self._sent[service], False
        return sent


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


@cache
def _publish_function() -> ModuleType:
    name = "lifeguard_publish_bundle_app"
    spec = importlib.util.spec_from_file_location(name, PUBLISH_FUNCTION)
    if spec is None or spec.loader is None:
        raise RuntimeError(f"cannot load the publish_bundle function from {PUBLISH_FUNCTION}")
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module  # its dataclasses resolve their module through sys.modules
    spec.loader.exec_module(module)
    return module


def publish_bundle(s3: Any, bucket: str, log_group: str, *, bundle: Path | None = None) -> dict[str, str]:
    """Publish the node bundle and the shipper installer to `bucket` (versioned) with the
    publish_bundle function's own code, as the stack's custom resource does; returns its Data.

    The bundle is built from the layer with `lifeguard_cli.node_bundle` unless `bundle` is given.
    """
    from lifeguard_cli.node_bundle import build_node_bundle

    function = _publish_function()
    with tempfile.TemporaryDirectory(prefix="lifeguard-publish-") as scratch:
        package = Path(scratch)
        if bundle is None:
            build_node_bundle(package / function.BUNDLE_FILE)
        else:
            shutil.copyfile(bundle, package / function.BUNDLE_FILE)
        shutil.copyfile(INSTALL_SHIPPER, package / function.INSTALLER_FILE)
        data: dict[str, str] = function.publish_node_bundle(s3, bucket, log_group, package)
    return data


@dataclass(frozen=True)
class LocalDeployment:
    """A local twin of the deployed stack as operator commands read it: a CloudFormation stack whose
    outputs and parameters carry the template's names, over resources made in the local AWS."""

    stack_name: str
    bucket: str
    log_group: str
    outputs: Mapping[str, str]
    parameters: Mapping[str, str]
    stack: LocalStack


def _node_policy(bucket: str, log_group: str) -> dict[str, Any]:
    return {
        "Version": "2012-10-17",
        "Statement": [
            {
                "Sid": "FetchTheShipper",
                "Effect": "Allow",
                "Action": ["s3:GetObject", "s3:GetObjectVersion"],
                "Resource": [f"arn:aws:s3:::{bucket}/lifeguard/*"],
            },
            {
                "Sid": "ShipNodeReports",
                "Effect": "Allow",
                "Action": ["logs:CreateLogStream", "logs:PutLogEvents", "logs:GetLogEvents"],
                "Resource": [f"arn:aws:logs:*:*:log-group:{log_group}:*"],
            },
        ],
    }


def describe_replay_stack(
    client: Callable[[str], Any],
    stack_name: str,
    stack: LocalStack,
    parameters: Mapping[str, str],
    *,
    channels: LocalChannels | None = None,
) -> None:
    """A CloudFormation stack `stack_name` that names a replay's table and bus (and `channels`' topic and
    Slack secret, where its notifications went) as the deployed stack's outputs and parameters do, with
    `parameters` (its DefaultMode, DryRun) over the template's defaults: what `lifeguard status --local`
    reads of a stack, for the outcome `replay --keep` leaves."""
    outputs = {"StateTableName": stack.table, "EventBusName": stack.event_bus}
    values = {**STACK_PARAMETERS, **parameters}
    if channels is not None:
        outputs["NotificationTopicArn"] = channels.topic_arn
        values["SlackWebhookSecretArn"] = channels.slack_secret
    template = {
        "AWSTemplateFormatVersion": "2010-09-09",
        "Parameters": {key: {"Type": "String", "Default": STACK_PARAMETERS.get(key, "")} for key in values},
        "Resources": {"Events": {"Type": "AWS::SQS::Queue", "Properties": {"QueueName": f"{stack_name}-q"}}},
        "Outputs": {key: {"Value": value} for key, value in outputs.items()},
    }
    _create_stack(client("cloudformation"), stack_name, template, values)


def create_deployed_stack(
    client: Callable[[str], Any],
    prefix: str,
    *,
    stack_name: str | None = None,
    parameters: Mapping[str, str] | None = None,
) -> LocalDeployment:
    """What a deployed stack holds, in the local AWS (`client(service)` makes a boto3 client of it).

    The versioned node-bundle bucket with the bundle and installer published by the publish_bundle
    function's code, the table, the bus, the topics and the queues; then a CloudFormation stack
    `stack_name` (default `{prefix}-stack`) that makes the node-report log group and the node policy and
    whose outputs and parameters have the template's names. moto runs no Lambda, so the custom resource's
    answers are literal outputs. `prefix` is lowercase letters, digits and hyphens.
    """
    s3, sns, sqs = client("s3"), client("sns"), client("sqs")
    bucket = f"{prefix}-node-bundle"
    s3.create_bucket(Bucket=bucket)
    s3.put_bucket_versioning(Bucket=bucket, VersioningConfiguration={"Status": "Enabled"})
    log_group = f"/lifeguard/{prefix}/node-reports"
    published = publish_bundle(s3, bucket, log_group)
    stack = create_stack(client("dynamodb"), client("events"), sqs, prefix)
    literal = {
        "NodeBundleBucketName": bucket,
        "NodeBundleLocation": published["BundleLocation"],
        "NodeBundleVersionId": published["BundleVersionId"],
        "NodeBundleSha256": published["BundleSha256"],
        "ShipperInstallerLocation": published["InstallerLocation"],
        "ShipperInstallerVersionId": published["InstallerVersionId"],
        "ShipperInstallerSha256": published["InstallerSha256"],
        "ShipperLifecycleEntry": published["LifecycleEntry"],
        "StateTableName": stack.table,
        "EventBusName": stack.event_bus,
        "NotificationTopicArn": sns.create_topic(Name=f"{prefix}-notifications")["TopicArn"],
        "AlarmTopicArn": sns.create_topic(Name=f"{prefix}-alarms")["TopicArn"],
        "ParkedEventsQueueUrl": sqs.create_queue(QueueName=f"{prefix}-parked")["QueueUrl"],
        "FailedBatchesQueueUrl": sqs.create_queue(QueueName=f"{prefix}-failed-batches")["QueueUrl"],
    }
    values = {**STACK_PARAMETERS, **(parameters or {})}
    template = {
        "AWSTemplateFormatVersion": "2010-09-09",
        "Parameters": {key: {"Type": "String", "Default": value} for key, value in STACK_PARAMETERS.items()},
        "Resources": {
            "NodeReportLogGroup": {
                "Type": "AWS::Logs::LogGroup",
                "Properties": {"LogGroupName": log_group, "RetentionInDays": 14},
            },
            "NodePolicy": {
                "Type": "AWS::IAM::ManagedPolicy",
                "Properties": {
                    "ManagedPolicyName": f"{prefix}-node",
                    "PolicyDocument": _node_policy(bucket, log_group),
                },
            },
        },
        "Outputs": {
            "NodeReportLogGroupName": {"Value": {"Ref": "NodeReportLogGroup"}},
            "NodePolicyArn": {"Value": {"Ref": "NodePolicy"}},
            **{key: {"Value": value} for key, value in literal.items()},
        },
    }
    name = stack_name or f"{prefix}-stack"
    cloudformation = client("cloudformation")
    described = _create_stack(cloudformation, name, template, values)
    return LocalDeployment(
        stack_name=name,
        bucket=bucket,
        log_group=log_group,
        outputs=_outputs(described),
        parameters=values,
        stack=stack,
    )


def _create_stack(
    cloudformation: Any, name: str, template: Mapping[str, Any], parameters: Mapping[str, str]
) -> dict[str, Any]:
    """Create the stack `name` in the local AWS and describe it. A create that was made but whose answer
    was lost (a busy machine: the client tried again) finds its own stack there: the same outputs, taken
    as made; any other stack of that name is an error, as CloudFormation's."""
    from botocore.exceptions import ClientError

    retried: ClientError | None = None
    try:
        cloudformation.create_stack(
            StackName=name,
            TemplateBody=json.dumps(template),
            Parameters=[{"ParameterKey": key, "ParameterValue": value} for key, value in parameters.items()],
        )
    except ClientError as exc:
        if exc.response.get("Error", {}).get("Code") != "AlreadyExistsException":
            raise
        retried = exc
    described: dict[str, Any] = cloudformation.describe_stacks(StackName=name)["Stacks"][0]
    literal, outputs = _literal_outputs(template), _outputs(described)
    if retried is not None and {key: outputs.get(key) for key in literal} != literal:
        raise retried
    return described


def _outputs(described: Mapping[str, Any]) -> dict[str, str]:
    """A described stack's outputs, by key."""
    return {o["OutputKey"]: o["OutputValue"] for o in described.get("Outputs", [])}


def _literal_outputs(template: Mapping[str, Any]) -> dict[str, str]:
    """The outputs of a template whose value is a literal, as a described stack gives them."""
    outputs = template["Outputs"].items()
    return {key: output["Value"] for key, output in outputs if isinstance(output["Value"], str)}
