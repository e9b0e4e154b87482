"""moto in server mode, reached by plain boto3 clients through the environment LocalAWS gives."""

from __future__ import annotations

import json
import os
import sys
import threading
import time
import uuid
from typing import Any

import boto3
import pytest
from botocore.exceptions import ClientError

from lifeguard_cli.local.stack import (
    LocalStack,
    Sends,
    create_notification_channels,
    create_stack,
    describe_replay_stack,
)

pytestmark = pytest.mark.integration


def test_environment_points_plain_clients_at_the_local_aws(
    local: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    for key, value in local.environ().items():
        monkeypatch.setenv(key, value)
    assert os.environ["AWS_ENDPOINT_URL_PCS"] == local.pcs_server.endpoint_url
    local.pcs.add_cluster("env-check")
    assert "env-check" in [c["name"] for c in boto3.client("pcs").list_clusters()["clusters"]]
    sqs = boto3.client("sqs")
    url = sqs.create_queue(QueueName="env-check")["QueueUrl"]
    assert url.startswith(local.moto.endpoint_url) or "env-check" in url


def test_sns_delivers_to_an_sqs_subscription_over_http(local: Any) -> None:
    sns, sqs = local.client("sns"), local.client("sqs")
    topic = sns.create_topic(Name="lifeguard-it")["TopicArn"]
    queue_url = sqs.create_queue(QueueName="lifeguard-it")["QueueUrl"]
    queue_arn = sqs.get_queue_attributes(QueueUrl=queue_url, AttributeNames=["QueueArn"])["Attributes"][
        "QueueArn"
    ]
    sns.subscribe(TopicArn=topic, Protocol="sqs", Endpoint=queue_arn)
    sns.publish(TopicArn=topic, Subject="loop detected", Message="lca-static is looping")
    [message] = sqs.receive_message(QueueUrl=queue_url, WaitTimeSeconds=1)["Messages"]
    assert json.loads(message["Body"])["Message"] == "lca-static is looping"


def test_what_sns_and_eventbridge_were_sent_is_in_the_reading_queues_when_the_call_returns(
    local: Any,
) -> None:
    """Replay and simulate read the stack's queues only after a Publish or PutEvents (`Sends`): that holds
    only because the local AWS delivers within the call, which this checks, with no wait in the reads."""
    sends = Sends()
    clients = {name: local.client(name) for name in ("sns", "sqs", "events", "dynamodb", "secretsmanager")}
    for name, client in clients.items():
        sends.watch(name, client)
    prefix = f"sends-{uuid.uuid4().hex[:8]}"
    stack = create_stack(clients["dynamodb"], clients["events"], clients["sqs"], prefix)
    channels = create_notification_channels(
        clients["sns"], clients["sqs"], clients["secretsmanager"], prefix, "http://127.0.0.1:9/hook"
    )
    assert (sends.take("sns"), sends.take("events")) == (False, False)  # making the stack sends nothing

    clients["sns"].publish(TopicArn=channels.topic_arn, Subject="loop", Message="lca-static is looping")
    assert (sends.take("sns"), sends.take("sns"), sends.take("events")) == (True, False, False)
    assert [sent["message"] for sent in channels.received_sns(clients["sqs"])] == ["lca-static is looping"]

    entry = {"Source": "lifeguard", "DetailType": "LoopResolved", "Detail": "{}"}
    clients["events"].put_events(Entries=[{**entry, "EventBusName": stack.event_bus}])
    assert (sends.take("events"), sends.take("events"), sends.take("sns")) == (True, False, False)
    assert [event["detail-type"] for event in stack.received_events(clients["sqs"])] == ["LoopResolved"]

    with pytest.raises(ClientError):  # refused: noted all the same (a queue read once too often)
        clients["sns"].publish(TopicArn=channels.topic_arn + "-gone", Message="x")
    assert sends.take("sns")


def keyed_table(local: Any, name: str) -> Any:
    """A DynamoDB client of the local AWS, and a table `name` keyed by `pk` made with it."""
    ddb = local.client("dynamodb")
    ddb.create_table(
        TableName=name,
        BillingMode="PAY_PER_REQUEST",
        AttributeDefinitions=[{"AttributeName": "pk", "AttributeType": "S"}],
        KeySchema=[{"AttributeName": "pk", "KeyType": "HASH"}],
    )
    return ddb


def test_dynamodb_conditional_writes_work_over_http(local: Any) -> None:
    ddb = keyed_table(local, "lifeguard-it")
    item = {"pk": {"S": "episode#1"}}
    ddb.put_item(TableName="lifeguard-it", Item=item, ConditionExpression="attribute_not_exists(pk)")
    with pytest.raises(ddb.exceptions.ConditionalCheckFailedException):
        ddb.put_item(TableName="lifeguard-it", Item=item, ConditionExpression="attribute_not_exists(pk)")


def test_of_many_conditional_writes_of_one_version_at_once_exactly_one_wins(local: Any) -> None:
    """As in DynamoDB: moto's backends take no locks, and its server answers one request at a time."""
    ddb = keyed_table(local, "lifeguard-race")

    def write(key: str, writer: int, barrier: threading.Barrier, won: list[int]) -> None:
        client = local.client("dynamodb")
        barrier.wait()
        try:
            client.put_item(
                TableName="lifeguard-race",
                Item={"pk": {"S": key}, "writer": {"N": str(writer)}},
                ConditionExpression="attribute_not_exists(pk)",
            )
            won.append(writer)
        except client.exceptions.ConditionalCheckFailedException:
            pass

    writers = 8
    switching = sys.getswitchinterval()
    sys.setswitchinterval(1e-6)  # threads (moto's among them) switch as often as they can: races show
    try:
        for round_number in range(10):
            key, barrier, won = f"state#{round_number}", threading.Barrier(writers), list[int]()
            threads = [threading.Thread(target=write, args=(key, n, barrier, won)) for n in range(writers)]
            for thread in threads:
                thread.start()
            for thread in threads:
                thread.join()
            assert len(won) == 1, f"round {round_number}: writers {won} all won"
            stored = ddb.get_item(TableName="lifeguard-race", Key={"pk": {"S": key}})["Item"]
            assert stored["writer"] == {"N": str(won[0])}
    finally:
        sys.setswitchinterval(switching)


def test_cloudwatch_logs_keeps_events_in_order(local: Any) -> None:
    logs = local.client("logs")
    logs.create_log_group(logGroupName="/lifeguard/it")
    logs.create_log_stream(logGroupName="/lifeguard/it", logStreamName="pcs_a/i-1")
    now_ms = int(time.time() * 1000)
    logs.put_log_events(
        logGroupName="/lifeguard/it",
        logStreamName="pcs_a/i-1",
        logEvents=[{"timestamp": now_ms + i, "message": f"m{i}"} for i in range(3)],
    )
    events = logs.get_log_events(logGroupName="/lifeguard/it", logStreamName="pcs_a/i-1")["events"]
    assert [event["message"] for event in events] == ["m0", "m1", "m2"]


def test_a_stack_create_retried_after_its_answer_was_lost_finds_its_own_stack(local: Any) -> None:
    """On a busy machine the client may send CreateStack again after the local AWS made the stack: the
    second finds that very stack (same outputs) and goes on; a stack of that name naming another table is
    still an error, as CloudFormation's AlreadyExistsException."""
    name = f"retried-{uuid.uuid4().hex[:8]}"
    stack = LocalStack(table=f"{name}-table", event_bus=f"{name}-bus", events_queue_url="-")
    describe_replay_stack(local.client, name, stack, {"DefaultMode": "quarantine"})
    describe_replay_stack(local.client, name, stack, {"DefaultMode": "quarantine"})  # the retry
    outputs = local.client("cloudformation").describe_stacks(StackName=name)["Stacks"][0]["Outputs"]
    assert {o["OutputKey"]: o["OutputValue"] for o in outputs}["StateTableName"] == f"{name}-table"
    other = LocalStack(table="another-table", event_bus=f"{name}-bus", events_queue_url="-")
    with pytest.raises(ClientError, match="AlreadyExists"):
        describe_replay_stack(local.client, name, other, {})


def test_a_transaction_leaves_no_copy_of_its_table_behind(local: Any) -> None:
    """moto deep-copies a table for each TransactWriteItems (to roll back) and tracks every model it makes
    for its dashboard: a replay held one copy of the whole table per batch. Only the table itself stays."""
    import gc

    from moto.dynamodb.models.table import Table

    dynamodb = local.client("dynamodb")
    name = f"untracked-{uuid.uuid4().hex[:8]}"
    dynamodb.create_table(
        TableName=name,
        KeySchema=[{"AttributeName": "pk", "KeyType": "HASH"}],
        AttributeDefinitions=[{"AttributeName": "pk", "AttributeType": "S"}],
        BillingMode="PAY_PER_REQUEST",
    )
    for n in range(20):
        item = {"pk": {"S": f"k{n}"}, "body": {"S": "x" * 1000}}
        dynamodb.transact_write_items(TransactItems=[{"Put": {"TableName": name, "Item": item}}])
    gc.collect()
    assert len([o for o in gc.get_objects() if type(o) is Table and o.name == name]) == 1
    assert dynamodb.scan(TableName=name)["Count"] == 20
