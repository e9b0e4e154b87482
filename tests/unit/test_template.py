"""template.yaml against what the code declares: each function's role allows what its code calls, and the
EventBridge rules route the controller events as DESIGN.md says."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from lifeguard.notify import SecretWebhook, SnsChannel
from lifeguard.remediation import ACTIONS

TEMPLATE = Path(__file__).parents[2] / "template.yaml"


def template() -> dict[str, Any]:
    import yaml

    class Loader(yaml.SafeLoader):
        pass

    def tagged(loader: yaml.SafeLoader, suffix: str, node: yaml.Node) -> Any:
        if isinstance(node, yaml.MappingNode):
            return {f"!{suffix}": loader.construct_mapping(node, deep=True)}
        if isinstance(node, yaml.SequenceNode):
            return {f"!{suffix}": loader.construct_sequence(node, deep=True)}
        return {f"!{suffix}": loader.construct_scalar(node)}  # type: ignore[arg-type]

    Loader.add_multi_constructor("!", tagged)
    loaded: dict[str, Any] = yaml.load(TEMPLATE.read_text(), Loader=Loader)
    return loaded


def statements(function: str) -> list[dict[str, Any]]:
    found = []
    for listed in template()["Resources"][function]["Properties"]["Policies"]:
        policy = listed["!If"][1] if isinstance(listed, dict) and "!If" in listed else listed
        if isinstance(policy, dict) and "Statement" in policy:
            found.extend(policy["Statement"])
    return found


def allowed(function: str) -> set[str]:
    actions: set[str] = set()
    for statement in statements(function):
        listed = statement["Action"]
        actions.update([listed] if isinstance(listed, str) else listed)
    return actions


def test_the_remediate_role_allows_what_every_registered_action_declares() -> None:
    needed = {permission for action in ACTIONS.values() for permission in action.PERMISSIONS}
    assert needed <= allowed("RemediateFunction")


def test_the_notify_role_may_publish_to_the_topic_and_read_the_webhook_secret() -> None:
    policies = template()["Resources"]["NotifyFunction"]["Properties"]["Policies"]
    assert any("SNSPublishMessagePolicy" in p for p in policies if isinstance(p, dict))
    assert SnsChannel.PERMISSIONS == ("sns:Publish",)  # what SNSPublishMessagePolicy grants
    assert set(SecretWebhook.PERMISSIONS) <= allowed("NotifyFunction")


def test_detections_go_to_remediate_and_every_lifeguard_event_to_notify() -> None:
    resources = template()["Resources"]
    remediate = resources["RemediateFunction"]["Properties"]["Events"]["LoopDetected"]["Properties"][
        "Pattern"
    ]
    notify = resources["NotifyFunction"]["Properties"]["Events"]["AllEvents"]["Properties"]["Pattern"]
    assert remediate == {"source": ["lifeguard"], "detail-type": ["BootstrapLoopDetected"]}
    assert notify == {"source": ["lifeguard"]}


def test_failed_invocations_are_parked_not_dropped() -> None:
    resources = template()["Resources"]
    for name in ("RemediateFunction", "NotifyFunction"):
        properties = resources[name]["Properties"]
        assert properties["DeadLetterQueue"]["Type"] == "SQS"
        assert properties["EventInvokeConfig"]["MaximumRetryAttempts"] == 2
