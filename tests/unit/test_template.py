"""template.yaml against what the code declares: each function's role allows exactly what its code calls
(nothing missing, nothing extra), the controller's events travel on the stack's own bus, nothing that fails
is dropped, and the stack wires the scaling logs of the clusters it is given."""

from __future__ import annotations

import functools
import json
import re
import sys
from pathlib import Path
from typing import Any

import pytest

from lifeguard.aws.eventbridge import EventPublisher
from lifeguard.aws.pcs import UPDATE_REQUIRES, PcsGateway
from lifeguard.handlers.config_review import ConfigReviewHandler
from lifeguard.handlers.updater import STALE_OUTBOX_SECONDS
from lifeguard.notify import SecretWebhook, SnsChannel
from lifeguard.remediation import ACTIONS
from lifeguard.store.changes import ChangeStore
from lifeguard.store.groups import GroupStore
from lifeguard.store.notices import NoticeStore
from lifeguard.store.remediations import RemediationStore
from lifeguard_cli.template import expanded_template, load_template

TEMPLATE = Path(__file__).parents[2] / "template.yaml"
README = TEMPLATE.parent / "README.md"

LAYER = TEMPLATE.parent / "layers" / "lifeguard" / "lifeguard"
# What the Lambda runtime does for every function: write its own log group.
RUNTIME = {"logs:CreateLogStream", "logs:PutLogEvents"}
# Where each function's code reaches its stores: (source files, the attribute the store is held in).
STORE_USES: dict[str, dict[str, tuple[tuple[str, ...], str]]] = {
    "ScalingEvents": {
        "state": (("handlers/scaling_events.py", "handlers/updater.py", "handlers/evidence.py"), "self.store")
    },
    "NodeReports": {
        "state": (("handlers/node_reports.py", "handlers/updater.py", "handlers/evidence.py"), "self.store")
    },
    "Remediate": {
        "state": (("remediation/remediator.py",), "self.states"),
        "remediation": (("remediation/remediator.py", "remediation/apply.py"), "self.store"),
    },
    "Notify": {"notices": (("notify/notifier.py", "wiring.py"), "notices")},
    "ReviewChanges": {
        "state": (("handlers/config_review.py",), "self.states"),
        "changes": (("handlers/config_review.py",), "self.changes"),
        "remediation": (("wiring.py",), "RemediationStore(w.store.client, w.store.table)"),
    },
}
STORES: dict[str, dict[str, tuple[str, ...]]] = {
    "state": GroupStore.PERMISSIONS,
    "remediation": RemediationStore.PERMISSIONS,
    "notices": NoticeStore.PERMISSIONS,
    "changes": ChangeStore.PERMISSIONS,
}


def store_permissions(function: str) -> set[str]:
    """The DynamoDB actions of every store method the function's code calls (read from the source)."""
    needed: set[str] = set()
    for store, (files, holder) in STORE_USES[function].items():
        source = "\n".join((LAYER / name).read_text() for name in files)
        called = set(re.findall(rf"\b{re.escape(holder)}\.(\w+)", source))
        declared = STORES[store]
        assert called, f"{function}: no call through {holder} found"
        needed |= {p for method in called & declared.keys() for p in declared[method]}
        # A method that touches the table must say what it needs (forget/client touch no table).
        assert called - declared.keys() <= {"forget", "remembered", "client"}, (
            function,
            called - declared.keys(),
        )
    return needed


def expected(function: str) -> set[str]:
    """Every action the function's code and its failure destination need."""
    needed = RUNTIME | store_permissions(function) | {"sqs:SendMessage"}
    if function == "ScalingEvents":
        needed |= set(EventPublisher.PERMISSIONS) | set(PcsGateway.PERMISSIONS)
    if function == "NodeReports":  # it reads the group before a detection from reports alone
        needed |= set(EventPublisher.PERMISSIONS) | set(PcsGateway.PERMISSIONS)
    if function == "Remediate":
        declared = {p for action in ACTIONS.values() for p in action.PERMISSIONS}
        needed |= declared | set(EventPublisher.PERMISSIONS)
        if "pcs:UpdateComputeNodeGroup" in declared:
            needed |= set(UPDATE_REQUIRES)
    if function == "ReviewChanges":
        needed |= set(EventPublisher.PERMISSIONS) | set(ConfigReviewHandler.PCS_PERMISSIONS)
    if function == "Notify":
        needed |= set(SnsChannel.PERMISSIONS) | set(SecretWebhook.PERMISSIONS)
        needed |= {"kms:Decrypt"}  # a webhook secret under a customer-managed key, via Secrets Manager only
    return needed


def template() -> dict[str, Any]:
    return load_template(TEMPLATE)


def resources(cluster_ids: tuple[str, ...] = ("pcs_abc123de45", "pcs_0fedcba987")) -> dict[str, Any]:
    """The Resources with every Fn::ForEach expanded as AWS::LanguageExtensions would, for `cluster_ids`."""
    return expanded_template(TEMPLATE, cluster_ids)["Resources"]


def role_statements(role: str, cluster_ids: tuple[str, ...] = ("pcs_abc123de45",)) -> list[dict[str, Any]]:
    """Every statement that applies to `role`: its inline policies (both sides of a condition) and the
    AWS::IAM::Policy resources attached to it."""
    found: list[dict[str, Any]] = []
    everything = resources(cluster_ids)
    for listed in everything[role]["Properties"]["Policies"]:
        policy = listed["Fn::If"][1] if "Fn::If" in listed else listed
        found.extend(policy["PolicyDocument"]["Statement"])
    for resource in everything.values():
        if resource["Type"] == "AWS::IAM::Policy" and {"Ref": role} in resource["Properties"]["Roles"]:
            found.extend(resource["Properties"]["PolicyDocument"]["Statement"])
    return found


def actions_of(statements: list[dict[str, Any]]) -> set[str]:
    actions: set[str] = set()
    for statement in statements:
        listed = statement["Action"]
        actions.update([listed] if isinstance(listed, str) else listed)
    return actions


def allowed(function: str) -> set[str]:
    return actions_of(role_statements(f"{function}Role"))


FUNCTIONS = ("ScalingEvents", "NodeReports", "Remediate", "Notify", "ReviewChanges")


FAILURE_QUEUES = {
    "ScalingEvents": "FailedBatchesQueue",
    "NodeReports": "FailedBatchesQueue",
    "Remediate": "ParkedEventsQueue",
    "Notify": "ParkedEventsQueue",
    "ReviewChanges": "ParkedEventsQueue",
}


@pytest.mark.parametrize("function", FUNCTIONS)
def test_each_role_allows_exactly_what_its_function_calls(function: str) -> None:
    assert allowed(function) == expected(function)
    statements = role_statements(f"{function}Role")
    (send,) = [s for s in statements if "sqs:SendMessage" in actions_of([s])]
    assert send["Resource"] == {"Fn::GetAtt": [FAILURE_QUEUES[function], "Arn"]}
    for statement in statements:
        if any(a.startswith("dynamodb:") for a in actions_of([statement])):
            assert statement["Resource"] == {"Fn::GetAtt": ["StateTable", "Arn"]}


@pytest.mark.parametrize("cluster_ids", [(), ("pcs_abc123de45", "pcs_0fedcba987")])
def test_the_pcs_actions_reach_the_clusters_named_and_without_names_only_this_account(
    cluster_ids: tuple[str, ...],
) -> None:
    everything = resources(cluster_ids or ("",))
    policies = {
        key: resource
        for key, resource in everything.items()
        if resource["Type"] == "AWS::IAM::Policy" and "pcs:" in str(resource["Properties"]["PolicyDocument"])
    }
    wanted = "HasClusters" if cluster_ids else "AnyCluster"
    active = {key: p for key, p in policies.items() if p.get("Condition") == wanted}
    arns = [
        arn
        for policy in active.values()
        for statement in policy["Properties"]["PolicyDocument"]["Statement"]
        for arn in (
            statement["Resource"] if isinstance(statement["Resource"], list) else [statement["Resource"]]
        )
    ]
    prefix = "arn:${AWS::Partition}:pcs:${AWS::Region}:${AWS::AccountId}:cluster/"
    assert arns
    assert all(a["Fn::Sub"].startswith(prefix) for a in arns)
    if cluster_ids:
        assert {a["Fn::Sub"][len(prefix) :].split("/")[0] for a in arns} == set(cluster_ids)
    else:
        assert {a["Fn::Sub"][len(prefix) :].split("/")[0] for a in arns} == {"*"}
    # Only remediate may change a group; scaling_events only reads.
    for policy in active.values():
        acts = actions_of(policy["Properties"]["PolicyDocument"]["Statement"])
        if "pcs:UpdateComputeNodeGroup" in acts:
            assert policy["Properties"]["Roles"] == [{"Ref": "RemediateRole"}]


def test_the_bundle_publisher_may_write_and_head_only_under_lifeguard() -> None:
    import importlib.util

    path = TEMPLATE.parent / "functions" / "publish_bundle" / "app.py"
    spec = importlib.util.spec_from_file_location("publish_bundle_app", path)
    assert spec is not None
    assert spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # its dataclasses look their module up
    spec.loader.exec_module(module)
    statements = role_statements("NodeBundleRole")
    assert actions_of(statements) == RUNTIME | set(module.PERMISSIONS)
    (publish,) = [s for s in statements if "s3:PutObject" in actions_of([s])]
    assert publish["Resource"] == {"Fn::Sub": "${NodeBundleBucket.Arn}/lifeguard/*"}


def test_a_bundle_publication_that_never_answers_fails_the_deployment_within_minutes_not_an_hour() -> None:
    """CloudFormation waits an hour for a custom resource's answer by default. The function answers within
    its timeout (a watchdog first), and Lambda retries a crash twice: three tries fit the resource's bound."""
    found = template()["Resources"]
    timeout = found["NodeBundleFunction"]["Properties"]["Timeout"]
    bound = found["NodeBundle"]["Properties"]["ServiceTimeout"]
    assert 3 * timeout < bound <= 900


def test_only_the_bundle_publisher_may_put_or_delete_what_nodes_run() -> None:
    # Anyone else who could put an object there could have the next deploy pin it, or delete the versions
    # enrolled nodes pin (their shipper then gone without a word: the installer is CONTINUE).
    policy = resources()["NodeBundleBucketPolicy"]["Properties"]["PolicyDocument"]["Statement"]
    (deny,) = [s for s in policy if s.get("Sid") == "OnlyThePublisherWrites"]
    assert (deny["Effect"], deny["Principal"]) == ("Deny", "*")
    assert set(deny["Action"]) == {"s3:PutObject", "s3:DeleteObject", "s3:DeleteObjectVersion"}
    assert deny["Condition"] == {
        "ArnNotEquals": {"aws:PrincipalArn": {"Fn::GetAtt": ["NodeBundleRole", "Arn"]}}
    }


def test_the_node_policy_allows_what_the_node_code_calls_on_the_bundle_and_the_report_group() -> None:
    from lifeguard.node.fetch import S3Fetcher
    from lifeguard.node.shipper import CloudWatchSink

    statements = resources()["NodePolicy"]["Properties"]["PolicyDocument"]["Statement"]
    by_sid = {s["Sid"]: s for s in statements}
    assert set(by_sid) == {"NodeBundle", "NodeReports"}
    # The bundle and the installer, pinned versions included (PCS and the installer fetch them).
    assert set(by_sid["NodeBundle"]["Action"]) == set(S3Fetcher.permissions)
    assert [r["Fn::Sub"] for r in by_sid["NodeBundle"]["Resource"]] == [
        "${NodeBundleBucket.Arn}/lifeguard/lifeguard-node.pyz",
        "${NodeBundleBucket.Arn}/lifeguard/install-shipper.sh",
    ]
    assert set(by_sid["NodeReports"]["Action"]) == set(CloudWatchSink.PERMISSIONS)
    assert by_sid["NodeReports"]["Resource"] == {"Fn::GetAtt": ["NodeReportLogGroup", "Arn"]}


@functools.cache
def _iam_actions() -> dict[str, Any]:
    """cfn-lint's copy of the Service Authorization Reference (2 MB: read once)."""
    import cfnlint.data.AdditionalSpecs

    policies: dict[str, Any] = json.loads(
        (Path(cfnlint.data.AdditionalSpecs.__file__).parent / "Policies.json").read_text(encoding="utf-8")
    )
    return policies


def _resource_types(action: str) -> list[str]:
    """The resource types IAM takes for `action` (an action that takes none is allowed on "*" alone: a
    statement naming ARNs never allows it)."""
    service, name = action.split(":")
    entry = _iam_actions()[service]["Actions"][name.lower()]
    types: list[str] = entry.get("Resources", [])
    return types


def test_nothing_but_ec2_describes_and_what_iam_cannot_scope_is_granted_on_every_resource() -> None:
    for function in FUNCTIONS:
        for statement in role_statements(f"{function}Role"):
            if statement["Resource"] == "*":
                for action in actions_of([statement]):
                    assert action.startswith("ec2:Describe") or not _resource_types(action), statement


@pytest.mark.parametrize("cluster_ids", [(), ("pcs_abc123de45",)])
def test_every_pcs_action_granted_on_named_resources_is_one_iam_scopes_to_them(
    cluster_ids: tuple[str, ...],
) -> None:
    # pcs:ListTagsForResource takes no resource type: granted on the clusters' ARNs it was refused, and no
    # group's tags (its mode) could be read, in AWS; the local PCS checks no IAM.
    for function in FUNCTIONS:
        for statement in role_statements(f"{function}Role", cluster_ids or ("",)):
            pcs = {a for a in actions_of([statement]) if a.startswith("pcs:")}
            if pcs and statement["Resource"] != "*":
                assert all(_resource_types(a) for a in pcs), statement
            if "pcs:ListTagsForResource" in pcs:
                assert statement["Resource"] == "*"
    for function in ("ScalingEvents", "NodeReports", "Remediate"):
        assert "pcs:ListTagsForResource" in allowed(function)


def test_pass_role_reaches_only_pcs_instance_roles_for_ec2() -> None:
    (passing,) = [s for s in role_statements("RemediateRole") if "iam:PassRole" in actions_of([s])]
    assert [r["Fn::Sub"].rsplit(":", 1)[1] for r in passing["Resource"]] == [
        "role/AWSPCS*",
        "role/*/AWSPCS*",
        "role/aws-pcs/*",
    ]
    assert passing["Condition"] == {"StringEquals": {"iam:PassedToService": "ec2.amazonaws.com"}}


def test_each_function_writes_only_its_own_log_group_which_expires() -> None:
    everything = resources()
    for function in (*FUNCTIONS, "NodeBundle"):
        properties = everything[f"{function}Function"]["Properties"]
        assert properties["LoggingConfig"] == {"LogGroup": {"Ref": f"{function}LogGroup"}}
        assert everything[f"{function}LogGroup"]["Properties"]["RetentionInDays"] == {
            "Ref": "LogRetentionDays"
        }
        (logs,) = [s for s in role_statements(f"{function}Role") if "logs:PutLogEvents" in actions_of([s])]
        assert logs["Resource"] == {"Fn::GetAtt": [f"{function}LogGroup", "Arn"]}


def test_detections_go_to_remediate_and_every_lifeguard_event_to_notify() -> None:
    everything = resources()
    remediate = everything["RemediateFunction"]["Properties"]["Events"]["LoopDetected"]["Properties"]
    notify = everything["NotifyFunction"]["Properties"]["Events"]["AllEvents"]["Properties"]
    assert remediate["Pattern"] == {"source": ["lifeguard"], "detail-type": ["BootstrapLoopDetected"]}
    assert notify["Pattern"] == {"source": ["lifeguard"]}


def test_every_rule_is_on_the_stack_bus_and_only_its_functions_may_put_events_there() -> None:
    everything = resources()
    for name, resource in everything.items():
        for event in resource.get("Properties", {}).get("Events", {}).values():
            if event["Type"] == "EventBridgeRule":
                bus = event["Properties"].get("EventBusName")
                # AWS's own events (CloudTrail) arrive on the default bus: a rule there sees only PCS.
                assert bus == {"Ref": "EventBus"} or event["Properties"]["Pattern"]["source"] == [
                    "aws.pcs"
                ], name
    policy = everything["EventBusPolicy"]["Properties"]
    assert policy["Statement"]["Effect"] == "Deny"
    assert policy["Statement"]["Principal"] == "*"
    exempt = policy["Statement"]["Condition"]["StringNotEquals"]["aws:PrincipalArn"]
    publishers = [f"{f}Role" for f in FUNCTIONS if "events:PutEvents" in allowed(f)]
    assert exempt == [{"Fn::GetAtt": [f"{role}", "Arn"]} for role in publishers]
    assert everything["ScalingEventsFunction"]["Properties"].get("Environment") is None  # from Globals
    assert template()["Globals"]["Function"]["Environment"]["Variables"]["LIFEGUARD_EVENT_BUS"] == {
        "Ref": "EventBus"
    }


def _translated(monkeypatch: pytest.MonkeyPatch) -> dict[str, Any]:
    """The Resources as CloudFormation gets them: Fn::ForEach expanded, then SAM's transform (which makes
    the functions' event rules), code locations stood in for by S3 ones as `sam package` writes them."""
    from samtranslator.translator.transform import transform

    monkeypatch.setenv("AWS_DEFAULT_REGION", "us-east-1")
    document = expanded_template(TEMPLATE, ("pcs_abc123de45",))
    for resource in document["Resources"].values():
        for uri in ("CodeUri", "ContentUri"):
            if uri in resource.get("Properties", {}):
                resource["Properties"][uri] = "s3://bucket/key"

    class NoManagedPolicies:
        def load(self) -> dict[str, str]:
            return {}

    translated: dict[str, Any] = transform(document, {}, NoManagedPolicies())
    return translated


def _references(value: Any) -> list[str]:
    """The logical ids `value` names by Ref or Fn::GetAtt."""
    if isinstance(value, list):
        return [name for item in value for name in _references(item)]
    if not isinstance(value, dict):
        return []
    found = []
    for key, inner in value.items():
        if key == "Ref" and isinstance(inner, str):
            found.append(inner)
        elif key == "Fn::GetAtt":
            found.append(inner[0] if isinstance(inner, list) else str(inner).split(".")[0])
        else:
            found.extend(_references(inner))
    return found


def test_every_reference_of_the_deployed_template_names_a_thing_in_it(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """`sam validate --lint` lets a Ref to a resource SAM never makes through (the template's language
    extensions): checked here on SAM's own output."""
    translated = _translated(monkeypatch)
    names = set(translated["Resources"]) | set(translated.get("Parameters", {}))
    missing = {name for name in _references(translated["Resources"]) if name not in names}
    assert {name for name in missing if not name.startswith("AWS::")} == set()


def test_an_event_a_rule_could_not_park_is_alarmed(monkeypatch: pytest.MonkeyPatch) -> None:
    """The rules park what they cannot deliver (DeadLetterConfig); one they could not park is lost, and
    only the rule's InvocationsFailedToBeSentToDlq says so: each rule has its alarm, on its bus."""
    everything = _translated(monkeypatch)["Resources"]
    rules = {k: v for k, v in everything.items() if v["Type"] == "AWS::Events::Rule"}
    assert len(rules) == 3
    alarmed = {}
    for alarm in (v["Properties"] for v in everything.values() if v["Type"] == "AWS::CloudWatch::Alarm"):
        if alarm.get("MetricName") == "InvocationsFailedToBeSentToDlq":
            assert alarm["Namespace"] == "AWS/Events"
            dimensions = {d["Name"]: d["Value"] for d in alarm["Dimensions"]}
            [rule] = _references(dimensions["RuleName"])
            alarmed[rule] = dimensions
            assert alarm["AlarmActions"] == [{"Ref": "AlarmTopic"}]
    assert set(alarmed) == set(rules)
    for name, rule in rules.items():
        [target] = rule["Properties"]["Targets"]
        assert target["DeadLetterConfig"] == {"Arn": {"Fn::GetAtt": ["ParkedEventsQueue", "Arn"]}}
        bus = rule["Properties"].get("EventBusName")
        if bus is None:  # the default bus: the rule's name alone (its Ref)
            assert alarmed[name] == {"RuleName": {"Ref": name}}
        else:  # a custom bus's rule is `bus|name` to Ref
            assert alarmed[name] == {
                "EventBusName": bus,
                "RuleName": {"Fn::Select": [1, {"Fn::Split": ["|", {"Ref": name}]}]},
            }


def test_failed_invocations_are_parked_not_dropped() -> None:
    everything = resources()
    # On-failure destinations, not dead-letter queues: a record names the function that failed its event
    # (remediate and notify both take BootstrapLoopDetected, and share a queue).
    parked_in = {
        "RemediateFunction": "ParkedEventsQueue",
        "NotifyFunction": "ParkedEventsQueue",
        "ReviewChangesFunction": "ParkedEventsQueue",
        "ScalingEventsFunction": "FailedBatchesQueue",
        "NodeReportsFunction": "FailedBatchesQueue",
    }
    for name, queue in parked_in.items():
        properties = everything[name]["Properties"]
        assert "DeadLetterQueue" not in properties
        assert properties["EventInvokeConfig"]["MaximumRetryAttempts"] == 2
        on_failure = properties["EventInvokeConfig"]["DestinationConfig"]["OnFailure"]
        assert on_failure == {"Type": "SQS", "Destination": {"Fn::GetAtt": [queue, "Arn"]}}
        # A record Lambda could not write is an event lost: alarmed.
        alarm = everything[f"{name.removesuffix('Function')}ParkingFailedAlarm"]["Properties"]
        assert (alarm["Namespace"], alarm["MetricName"]) == ("AWS/Lambda", "DestinationDeliveryFailures")
        assert alarm["Dimensions"] == [{"Name": "FunctionName", "Value": {"Fn::Sub": f"${{{name}}}"}}]
    for queue in ("ParkedEventsQueue", "FailedBatchesQueue"):
        assert everything[queue]["Properties"]["SqsManagedSseEnabled"] is True
        assert {f"{queue[: -len('Queue')]}DepthAlarm", f"{queue[: -len('Queue')]}AgeAlarm"} <= set(everything)
    for function in FUNCTIONS:
        assert {f"{function}ErrorsAlarm", f"{function}ThrottlesAlarm"} <= set(everything)
        throttled = everything[f"{function}ThrottlesAlarm"]
        assert throttled["Properties"]["MetricName"] == "Throttles"
        assert throttled.get("Condition") == ("NotifyUnreserved" if function == "Notify" else None)
    # A reserved notify throttles a burst by design: its events being late pages, not each throttle.
    assert template()["Conditions"]["NotifyUnreserved"] == {"Fn::Equals": [{"Ref": "NotifyConcurrency"}, 0]}
    delayed = everything["NotifyDelayedAlarm"]
    assert delayed["Condition"] == "ReserveNotifyConcurrency"
    properties = delayed["Properties"]
    assert (properties["Namespace"], properties["MetricName"], properties["Statistic"]) == (
        "AWS/Lambda",
        "AsyncEventAge",
        "Maximum",
    )
    assert properties["Dimensions"] == [{"Name": "FunctionName", "Value": {"Ref": "NotifyFunction"}}]
    assert (properties["Threshold"], properties["ComparisonOperator"]) == (
        15 * 60 * 1000,
        "GreaterThanThreshold",
    )
    alarms = [r for r in everything.values() if r["Type"] == "AWS::CloudWatch::Alarm"]
    assert all(a["Properties"]["AlarmActions"] == [{"Ref": "AlarmTopic"}] for a in alarms)
    assert everything["AlarmTopic"]["Properties"]["KmsMasterKeyId"] == {"Ref": "AlarmKey"}


def test_an_invocation_stopped_at_its_timeout_leaves_its_outbox_to_lambda_s_retry() -> None:
    """The functions that write an outbox end before its entries are stale (no live invocation's events are
    published twice), and Lambda's first retry, a minute after one stopped, finds them stale."""
    everything = resources()
    for name in ("ScalingEventsFunction", "NodeReportsFunction"):
        assert everything[name]["Properties"]["Timeout"] <= STALE_OUTBOX_SECONDS < 60


def test_what_holds_state_is_retained() -> None:
    everything = resources()
    for name in ("StateTable", "NodeBundleBucket", "ParkedEventsQueue", "FailedBatchesQueue"):
        assert everything[name]["DeletionPolicy"] == everything[name]["UpdateReplacePolicy"] == "Retain"
    assert everything["StateTable"]["Properties"]["DeletionProtectionEnabled"] is True  # from a hand's delete


def test_scaling_log_deliveries_one_per_cluster_guarded_for_an_empty_list() -> None:
    everything = resources(("pcs_abc123de45", "pcs_0fedcba987"))
    for suffix in ("pcsabc123de45", "pcs0fedcba987"):
        source = everything[f"ScalingLogSource{suffix}"]
        assert source["Condition"] == everything[f"ScalingLogDelivery{suffix}"]["Condition"] == "HasClusters"
        assert source["Properties"]["LogType"] == "PCS_SCALING_LOGS"
        assert source["Properties"]["ResourceArn"]["Fn::Sub"].endswith(f"cluster/pcs_{suffix[3:]}")
    # ClusterIds empty: the loop runs once over "", and everything it makes is conditional.
    for key, resource in resources(("",)).items():
        if key.startswith(("ScalingLogSource", "ScalingLogDelivery", "ClusterAccess", "ClusterChanges")):
            assert resource["Condition"] == "HasClusters", key


def test_no_concurrency_is_reserved_unless_asked_and_every_function_follows_the_architecture() -> None:
    everything = resources()
    reserved = everything["NotifyFunction"]["Properties"]["ReservedConcurrentExecutions"]
    assert reserved == {
        "Fn::If": ["ReserveNotifyConcurrency", {"Ref": "NotifyConcurrency"}, {"Ref": "AWS::NoValue"}]
    }
    parameter = template()["Parameters"]["NotifyConcurrency"]
    assert parameter["Default"] == "0"
    # Whole numbers only: "0.0" would pass the condition as not "0" and reserve nothing at all.
    taken = re.compile(parameter["AllowedPattern"])
    whole = ("0", "1", "5", "10", "99", "100", "555", "899", "900")
    assert [v for v in whole if taken.fullmatch(v)] == list(whole)
    # Lambda keeps 100 of the default 1,000 unreserved: a reservation above 900 fails the deploy.
    assert [v for v in ("0.0", "2.5", "00", "01", "901", "999", "1000", "-1", "") if taken.fullmatch(v)] == []
    assert template()["Globals"]["Function"]["Architectures"] == [{"Ref": "Architecture"}]
    assert template()["Parameters"]["Architecture"]["Default"] == "arm64"
    for function in FUNCTIONS:
        layers = everything[f"{function}Function"]["Properties"]["Layers"]
        assert layers == [
            {"Fn::If": ["IsArm64", {"Ref": "LifeguardLayerArm64"}, {"Ref": "LifeguardLayerX86"}]}
        ]
    for layer, arch in (("LifeguardLayerArm64", "arm64"), ("LifeguardLayerX86", "x86_64")):
        assert everything[layer]["Metadata"] == {"BuildMethod": "makefile", "BuildArchitecture": arch}


@pytest.mark.parametrize(
    ("parameter", "good", "bad"),
    [
        (
            "SlackWebhookSecretArn",
            [
                "",
                "arn:aws:secretsmanager:us-east-1:123456789012:secret:lifeguard/slack-AbCdEf",
                "arn:aws:secretsmanager:us-east-1:123456789012:secret:lifeguard/slack",
            ],
            ["lifeguard/slack", "arn:aws:s3:::bucket", "https://hooks.slack.com/services/x"],
        ),
        # Checked per id (CloudFormation splits a CommaDelimitedList first); an empty id is the Rule's.
        ("ClusterIds", ["", "pcs_abc123de45"], ["my-cluster", "pcs_", "pcs_abc def", "pcs_" + "a" * 41]),
        ("ScalingLogGroupName", ["", "/aws/vendedlogs/pcs/scaling"], ["has space", "x" * 513]),
    ],
)
def test_parameters_refuse_what_would_only_fail_later(
    parameter: str, good: list[str], bad: list[str]
) -> None:
    pattern = re.compile(template()["Parameters"][parameter]["AllowedPattern"])
    assert all(pattern.fullmatch(value) for value in good)
    assert not any(pattern.fullmatch(value) for value in bad)


def test_an_empty_cluster_id_in_a_list_is_refused_before_anything_is_made() -> None:
    rule = template()["Rules"]["NoEmptyClusterId"]
    assert rule["RuleCondition"] == {"Fn::Not": [{"Fn::EachMemberEquals": [{"Ref": "ClusterIds"}, ""]}]}
    assert rule["Assertions"][0]["Assert"] == {"Fn::Not": [{"Fn::Contains": [{"Ref": "ClusterIds"}, ""]}]}


def test_the_outputs_enroll_reads_are_there() -> None:
    outputs = template()["Outputs"]
    for name in (
        "NodeBundleLocation",
        "NodeBundleVersionId",
        "NodeBundleSha256",
        "ShipperLifecycleEntry",
        "NodePolicyArn",
        "NodeReportLogGroupName",
        "StateTableName",
        "EventBusName",
        "AlarmTopicArn",
        "FailedBatchesQueueUrl",
    ):
        assert name in outputs, name
    remediate = resources()["RemediateFunction"]["Properties"]["Environment"]["Variables"]
    assert remediate["LIFEGUARD_NODE_BUNDLE_SHA256"] == {"Fn::GetAtt": ["NodeBundle", "BundleSha256"]}
    assert remediate["LIFEGUARD_DRAIN_KEPT_NODES"] == {"Ref": "DrainKeptNodes"}


def test_the_template_s_defaults_are_the_code_s() -> None:
    from lifeguard.detection import DEFAULT_MODE, DEFAULT_THRESHOLD, DEFAULT_WINDOW_MINUTES
    from lifeguard.remediation.settings import DEFAULT_COOLDOWN_MINUTES, DEFAULT_DAILY_CAP

    parameters = template()["Parameters"]
    assert parameters["DefaultMode"]["Default"] == DEFAULT_MODE
    assert float(parameters["CooldownMinutes"]["Default"]) == DEFAULT_COOLDOWN_MINUTES
    assert parameters["DailyCap"]["Default"] == str(DEFAULT_DAILY_CAP)
    assert parameters["Threshold"]["Default"] == str(DEFAULT_THRESHOLD)
    assert parameters["WindowMinutes"]["Default"] == str(DEFAULT_WINDOW_MINUTES)


@pytest.mark.parametrize(
    ("name", "least", "most"),
    [("Threshold", 1, 100), ("WindowMinutes", 1, 10080), ("CooldownMinutes", 0, 10080), ("DailyCap", 1, 100)],
)
def test_a_whole_number_parameter_takes_exactly_the_whole_numbers_the_functions_read(
    name: str, least: int, most: int
) -> None:
    """A Number parameter took 2.5 (CloudFormation checks only its bounds), and every function then failed
    at its start reading it as a whole number. The pattern takes the whole numbers within the bounds the
    code reads them in, and nothing else."""
    import re

    parameter = template()["Parameters"][name]
    pattern = re.compile(parameter["AllowedPattern"])
    taken = [n for n in range(-5, 20_000) if pattern.fullmatch(str(n))]
    assert taken == list(range(least, most + 1))
    for refused in ("2.5", "2.0", "02", " 2", "1e2", "", "-0"):
        assert pattern.fullmatch(refused) is None, refused
    assert parameter["Type"] == "String"


def test_the_template_is_read_exactly_as_the_sam_cli_reads_it(monkeypatch: pytest.MonkeyPatch) -> None:
    # The operator CLI reads template.yaml with its own loader (PyYAML only); SAM's parser is the reference.
    import yaml  # type: ignore[import-untyped]
    from samcli.yamlhelper import yaml_parse  # type: ignore[import-untyped]

    # SAM's parser makes PyYAML's SafeLoader build OrderedDicts, for the whole process: every later
    # yaml.safe_load of this test worker then gave data yaml.safe_dump refuses. It also reads dates as text
    # in SafeConstructor's own table, under SafeLoader's: a scenario test after it in the same worker read
    # `name: 2026-13-45` as a name. Its changes stay here.
    for loader in (yaml.SafeLoader, yaml.constructor.SafeConstructor):
        for table in ("yaml_constructors", "yaml_multi_constructors"):
            monkeypatch.setattr(loader, table, dict(getattr(loader, table)))

    ours = load_template(TEMPLATE)
    assert json.loads(json.dumps(ours)) == json.loads(json.dumps(yaml_parse(TEMPLATE.read_text())))


def test_short_forms_become_long_forms_and_bare_dates_stay_text(tmp_path: Path) -> None:
    written = tmp_path / "t.yaml"
    written.write_text(
        "A: !Ref Bucket\nB: !GetAtt Queue.Arn\nC: !Sub '${AWS::StackName}-x'\n"
        "D: !If [HasClusters, !Ref X, !Ref AWS::NoValue]\nE: 2012-10-17\nF: !Condition IsArm64\n"
    )
    assert load_template(written) == {
        "A": {"Ref": "Bucket"},
        "B": {"Fn::GetAtt": ["Queue", "Arn"]},
        "C": {"Fn::Sub": "${AWS::StackName}-x"},
        "D": {"Fn::If": ["HasClusters", {"Ref": "X"}, {"Ref": "AWS::NoValue"}]},
        "E": "2012-10-17",
        "F": {"Condition": "IsArm64"},
    }


def test_the_review_hears_on_the_default_bus_only_pcs_calls_that_set_a_configuration() -> None:
    from lifeguard.cloudtrail import CHANGE_CALLS, CLOUDTRAIL_DETAIL_TYPE, PCS_EVENT_SOURCE, PCS_SOURCE

    rule = resources()["ReviewChangesFunction"]["Properties"]["Events"]["ConfigChange"]["Properties"]
    assert "EventBusName" not in rule  # AWS puts CloudTrail's events on the default bus
    assert rule["Pattern"] == {
        "source": [PCS_SOURCE],
        "detail-type": [CLOUDTRAIL_DETAIL_TYPE],
        "detail": {"eventSource": [PCS_EVENT_SOURCE], "eventName": list(CHANGE_CALLS)},
    }
    assert rule["DeadLetterConfig"] == {"Arn": {"Fn::GetAtt": ["ParkedEventsQueue", "Arn"]}}


@pytest.mark.parametrize("cluster_ids", [("",), ("pcs_abc123de45", "pcs_0fedcba987")])
def test_the_review_may_only_read_groups_of_the_clusters_it_protects(cluster_ids: tuple[str, ...]) -> None:
    statements = role_statements("ReviewChangesRole", cluster_ids)
    pcs = [s for s in statements if any(a.startswith("pcs:") for a in actions_of([s]))]
    assert actions_of(pcs) == {"pcs:GetComputeNodeGroup"}
    policies = [
        resource
        for resource in resources(cluster_ids).values()
        if resource["Type"] == "AWS::IAM::Policy"
        and {"Ref": "ReviewChangesRole"} in resource["Properties"]["Roles"]
    ]
    assert {policy["Condition"] for policy in policies} == {"HasClusters", "AnyCluster"}


def test_the_reviews_that_fail_are_parked_and_the_default_bus_rule_may_park_them() -> None:
    everything = resources()
    properties = everything["ReviewChangesFunction"]["Properties"]
    assert properties["EventInvokeConfig"]["DestinationConfig"]["OnFailure"] == {
        "Type": "SQS",
        "Destination": {"Fn::GetAtt": ["ParkedEventsQueue", "Arn"]},
    }
    assert properties["EventInvokeConfig"]["MaximumRetryAttempts"] == 2
    (statement,) = everything["ParkedEventsQueuePolicy"]["Properties"]["PolicyDocument"]["Statement"]
    sources = statement["Condition"]["ArnLike"]["aws:SourceArn"]
    # SAM names the rule of a function's EventBridgeRule event after the function and the event.
    assert {"Fn::GetAtt": ["ReviewChangesFunctionConfigChange", "Arn"]} in sources


def test_the_role_check_refuses_what_iam_would_and_reads_a_transaction_item_by_item() -> None:
    """`tests.roles` holds the integration tests' calls to the roles: it must refuse what IAM refuses."""
    import boto3

    from tests.roles import RoleCheck, actions_needed

    assert actions_needed(
        "dynamodb", "TransactWriteItems", {"TransactItems": [{"Update": {}}, {"Put": {}}]}
    ) == {
        "dynamodb:UpdateItem",
        "dynamodb:PutItem",
    }
    assert actions_needed("s3", "HeadObject", {}) == {"s3:GetObject"}
    check = RoleCheck()
    client = boto3.client("pcs", region_name="us-east-1", aws_access_key_id="x", aws_secret_access_key="x")
    token = check.function.set("Notify")
    try:
        check.call(client, "UpdateComputeNodeGroup", {})
    finally:
        check.function.reset(token)
    check.call(client, "UpdateComputeNodeGroup", {})  # no function's code: a test's own setup
    assert check.refused == ["NotifyRole does not allow pcs:UpdateComputeNodeGroup (UpdateComputeNodeGroup)"]


# The most ClusterIds the README and the template's description promise.
CLUSTER_IDS_MAX = 20
ROLE_INLINE_POLICIES_MAX = 10_240  # IAM: characters of all a role's inline policies, whitespace not counted


def _policy_chars(document: Any, stack: str) -> int:
    """A policy document's size as IAM counts it once deployed, its intrinsics given the longest values
    they can take: a 128-character stack name in the GovCloud partition (physical names and ARNs made
    from it are longest there)."""
    text = json.dumps(document, separators=(",", ":"))
    text = re.sub(r'\{"Fn::Sub":"([^"]*)"\}', lambda m: f'"{m.group(1)}"', text)
    arn = "arn:aws-us-gov:service:us-gov-west-1:123456789012:{}-{}-ABCDEFGHIJKL:*"
    text = re.sub(r'\{"Fn::GetAtt":\["(\w+)","Arn"\]\}', lambda m: f'"{arn.format(stack, m.group(1))}"', text)
    text = re.sub(r'\{"Ref":"(\w+)"\}', lambda m: f'"{stack}-{m.group(1)}-ABCDEFGHIJKL"', text)
    for name, value in {
        "${AWS::Partition}": "aws-us-gov",
        "${AWS::Region}": "us-gov-west-1",
        "${AWS::AccountId}": "123456789012",
        "${AWS::StackName}": stack,
    }.items():
        text = text.replace(name, value)
    text = re.sub(r"\$\{[\w.]+\}", "p" * 150, text)  # a parameter or attribute (a secret's ARN, a bucket's)
    assert "${" not in text, text  # every intrinsic given a value
    assert '{"Fn::' not in text, text
    return len(re.sub(r"\s", "", text))


def test_every_role_s_inline_policies_fit_iam_s_limit_at_the_most_cluster_ids_promised() -> None:
    # Each cluster id adds a policy to the roles: past IAM's 10,240 characters a role, the deploy fails.
    stack = "s" * 128
    ids = tuple(f"pcs_{n:010d}" for n in range(CLUSTER_IDS_MAX))  # PCS's ids: pcs_ and ten characters
    everything = resources(ids)
    sizes: dict[str, int] = {}
    for name, resource in everything.items():
        if resource["Type"] == "AWS::IAM::Role":
            for listed in resource["Properties"].get("Policies", []):
                sides = listed["Fn::If"][1:] if "Fn::If" in listed else [listed]
                largest = max(
                    _policy_chars(s["PolicyDocument"], stack) for s in sides if "PolicyDocument" in s
                )
                sizes[name] = sizes.get(name, 0) + largest
    for resource in everything.values():
        if resource["Type"] == "AWS::IAM::Policy" and resource.get("Condition") != "AnyCluster":
            for role in resource["Properties"]["Roles"]:
                size = _policy_chars(resource["Properties"]["PolicyDocument"], stack)
                sizes[role["Ref"]] = sizes.get(role["Ref"], 0) + size
    largest_role, largest = max(sizes.items(), key=lambda item: item[1])
    assert largest <= ROLE_INLINE_POLICIES_MAX, f"{largest_role}: {largest} characters"
    assert sizes["RemediateRole"] > 8_000  # the count sees the per-cluster policies (about 340 each)
    promised = f"At most {CLUSTER_IDS_MAX}"
    assert promised in README.read_text()
    assert promised in " ".join(template()["Parameters"]["ClusterIds"]["Description"].split())


def test_the_stack_set_steps_take_the_template_by_s3_when_it_is_past_what_a_body_takes() -> None:
    # CreateStackSet's TemplateBody takes at most 51,200 bytes; past that, TemplateURL.
    text = README.read_text()
    steps = text[text.index("**Many accounts (StackSets).**") :]
    steps = steps[: steps.index("\n## ")]
    if TEMPLATE.stat().st_size > 51_200:
        assert "--template-body file://" not in steps
        assert "--template-url https://" in steps
        assert "aws s3 cp packaged.yaml s3://" in steps


@pytest.mark.parametrize(
    "metric", ["GroupsUnreadable", "LaunchFailures", "OutboxEventsDropped", "ChangesUnreviewed"]
)
def test_what_a_successful_batch_cannot_say_is_alarmed(metric: str) -> None:
    # A PCS refusal (a permission missing) leaves the batch successful and the group unwatched, and PCS
    # failing to launch nodes (capacity, a quota: DESIGN says report it, never fix a script for it) leaves
    # the queue without nodes: only the handlers' metrics say so, in the namespace and service the
    # functions emit them under.
    found = template()
    environment = found["Globals"]["Function"]["Environment"]["Variables"]
    alarms = [
        r["Properties"]
        for r in found["Resources"].values()
        if isinstance(r, dict) and r.get("Type") == "AWS::CloudWatch::Alarm"
    ]
    (alarm,) = [a for a in alarms if a.get("MetricName") == metric]
    assert alarm["Namespace"] == environment["POWERTOOLS_METRICS_NAMESPACE"]
    assert alarm["Dimensions"] == [{"Name": "service", "Value": environment["POWERTOOLS_SERVICE_NAME"]}]
    assert (alarm["Threshold"], alarm["ComparisonOperator"]) == (0, "GreaterThanThreshold")
    assert alarm["AlarmActions"] == [{"Ref": "AlarmTopic"}]
    if metric == "LaunchFailures":  # a moment's shortage, which PCS's next launch gets past, pages no one
        assert (alarm["Period"], alarm["EvaluationPeriods"], alarm["DatapointsToAlarm"]) == (300, 3, 2)


def test_a_subscription_cloudwatch_logs_cannot_deliver_is_alarmed(monkeypatch: pytest.MonkeyPatch) -> None:
    """CloudWatch Logs failing to hand a batch to its function (the function's permission for it taken away)
    leaves no error in Lifeguard and nothing in a queue: each subscribed log group's DeliveryErrors pages."""
    everything = _translated(monkeypatch)["Resources"]
    subscribed = [
        v["Properties"]["LogGroupName"]
        for v in everything.values()
        if v["Type"] == "AWS::Logs::SubscriptionFilter"
    ]
    assert len(subscribed) == 2
    # CloudWatch Logs publishes DeliveryErrors per subscription filter (LogGroupName, DestinationType,
    # FilterName): an alarm on the dimension LogGroupName alone matches none of them. A Metrics Insights
    # query sums every series of the group, whatever the filter SAM made is named.
    query = "SELECT SUM(DeliveryErrors) FROM \"AWS/Logs\" WHERE LogGroupName = '${Name}'"
    alarmed = [
        alarm
        for alarm in (v["Properties"] for v in everything.values() if v["Type"] == "AWS::CloudWatch::Alarm")
        if "DeliveryErrors" in json.dumps(alarm)
    ]
    assert all("Dimensions" not in alarm and "MetricName" not in alarm for alarm in alarmed)
    assert sorted(json.dumps(a["Metrics"], sort_keys=True) for a in alarmed) == sorted(
        json.dumps(
            [
                {
                    "Id": "errors",
                    "Label": "DeliveryErrors of the log group's subscriptions",
                    "Expression": {"Fn::Sub": [query, {"Name": group}]},
                    "Period": 300,
                    "ReturnData": True,
                }
            ],
            sort_keys=True,
        )
        for group in subscribed
    )
    for alarm in alarmed:
        assert (alarm["Threshold"], alarm["ComparisonOperator"]) == (0, "GreaterThanThreshold")
        assert alarm["AlarmActions"] == [{"Ref": "AlarmTopic"}]


def test_a_scaling_log_read_but_mostly_skipped_is_alarmed() -> None:
    """Records that cannot be read (PCS's format changed) leave every batch successful and Lifeguard blind:
    the share unreadable of 15 minutes, of ten records or more, pages past half; of the metrics
    scaling_events emits, in the namespace and service the functions emit them under."""
    found = template()
    environment = found["Globals"]["Function"]["Environment"]["Variables"]
    alarm = found["Resources"]["RecordsSkippedAlarm"]["Properties"]
    stats = {m["Id"]: m["MetricStat"] for m in alarm["Metrics"] if "MetricStat" in m}
    assert {stat["Metric"]["MetricName"] for stat in stats.values()} == {
        "RecordsUnreadable",
        "RecordsProcessed",
    }
    emitted = (
        Path(__file__).parents[2] / "layers/lifeguard/lifeguard/handlers/scaling_events.py"
    ).read_text()
    for stat in stats.values():
        metric = stat["Metric"]
        assert f'metric("{metric["MetricName"]}"' in emitted
        assert metric["Namespace"] == environment["POWERTOOLS_METRICS_NAMESPACE"]
        assert metric["Dimensions"] == [{"Name": "service", "Value": environment["POWERTOOLS_SERVICE_NAME"]}]
    [expression] = [m for m in alarm["Metrics"] if "Expression" in m]
    by_id = {stat["Metric"]["MetricName"]: key for key, stat in stats.items()}
    skipped, processed = by_id["RecordsUnreadable"], by_id["RecordsProcessed"]
    assert expression["Expression"] == f"IF({processed} >= 10, FILL({skipped}, 0) / {processed}, 0)"
    assert (alarm["Threshold"], alarm["ComparisonOperator"]) == (0.5, "GreaterThanThreshold")
    assert alarm["AlarmActions"] == [{"Ref": "AlarmTopic"}]


def test_the_longest_cluster_id_the_stack_takes_names_a_delivery_source_cloudwatch_takes() -> None:
    # AWS::Logs::DeliverySource names are at most 60 characters: lifeguard-<cluster id>-<8 of the stack id>.
    pattern = template()["Parameters"]["ClusterIds"]["AllowedPattern"]
    longest = "pcs_" + "a" * 37
    assert re.fullmatch(pattern, longest)
    assert not re.fullmatch(pattern, longest + "a")
    (source,) = [r for key, r in resources((longest,)).items() if key.startswith("ScalingLogSource")]
    shape, values = source["Properties"]["Name"]["Fn::Sub"]
    assert shape == f"lifeguard-{longest}-${{Stack}}"
    # The stack id's uuid, its first group: 8 hex digits.
    assert values["Stack"]["Fn::Select"][0] == 0
    assert values["Stack"]["Fn::Select"][1]["Fn::Split"][0] == "-"
    assert len(shape.replace("${Stack}", "0" * 8)) == 60


def test_the_dashboard_charts_every_controller_event() -> None:
    """Each event the detectors and remediate publish is counted as a metric of its name; the dashboard's
    first widget charts all of them (LoopContained was missing)."""
    from lifeguard.event_contract import DETAIL_TYPES

    body = resources()["Dashboard"]["Properties"]["DashboardBody"]["Fn::Sub"][0]
    widget = body.split('"title": "Loops and remediations"', 1)[1].split("]]}}", 1)[0]
    charted = set(re.findall(r'"(\w+)", "service"|\[".", "(\w+)"', widget))
    names = {first or second for first, second in charted}
    assert names >= set(DETAIL_TYPES)


def test_each_stack_counts_its_own_metrics_in_its_alarms_and_dashboard() -> None:
    """The stacks of one account and region share the namespace: the functions' metrics carry the stack's
    name (Powertools' service), and every alarm and chart of them reads that name only. With a service
    every stack shared, a second stack's ignored records diluted the first one's unreadable share below its
    alarm's threshold, and each stack's alarms paged for the other's groups."""
    found = template()
    environment = found["Globals"]["Function"]["Environment"]["Variables"]
    assert environment["POWERTOOLS_SERVICE_NAME"] == {"Ref": "AWS::StackName"}
    namespace = environment["POWERTOOLS_METRICS_NAMESPACE"]
    read: list[Any] = []
    for resource in resources().values():
        if resource.get("Type") != "AWS::CloudWatch::Alarm":
            continue
        properties = resource["Properties"]
        stats = [m["MetricStat"]["Metric"] for m in properties.get("Metrics", []) if "MetricStat" in m]
        for metric in [properties, *stats]:
            if metric.get("Namespace") == namespace:
                read.append(metric["Dimensions"])
    assert len(read) >= 6
    assert all(dims == [{"Name": "service", "Value": {"Ref": "AWS::StackName"}}] for dims in read), read
    body = resources()["Dashboard"]["Properties"]["DashboardBody"]["Fn::Sub"][0]
    charted = re.findall(rf'\["{namespace}", "\w+", "service", "([^"]*)"\]', body)
    assert len(charted) == 3
    assert set(charted) == {"${AWS::StackName}"}
