"""The replay's event bus routes as template.yaml says: every controller event to the functions the
stack's rules target, a changed rule changes the routing, and a rule it cannot follow is refused by name."""

from __future__ import annotations

import copy
import json
from typing import Any

import pytest

from lifeguard.event_contract import DETAIL_TYPES, SOURCE
from lifeguard_cli.replay import ReplayError
from lifeguard_cli.replay.bus import DEFAULT_BUS, STACK_BUS, TEMPLATE, LocalBus, route, stack_rules
from lifeguard_cli.template import expanded_template


@pytest.fixture(scope="module")
def stack_template() -> dict[str, Any]:
    return expanded_template(TEMPLATE)


def event(detail_type: str, source: str = SOURCE) -> dict[str, Any]:
    return {"source": source, "detail-type": detail_type, "detail": {"compute_node_group_id": "pcs_abcdef01"}}


def rule_of(template: dict[str, Any], function: str, name: str) -> dict[str, Any]:
    properties: dict[str, Any] = template["Resources"][function]["Properties"]["Events"][name]["Properties"]
    return properties


@pytest.mark.parametrize("detail_type", DETAIL_TYPES)
def test_each_controller_event_goes_where_the_template_routes_it(
    stack_template: dict[str, Any], detail_type: str
) -> None:
    expected = (
        ["NotifyFunction", "RemediateFunction"]
        if detail_type == "BootstrapLoopDetected"
        else ["NotifyFunction"]
    )
    assert sorted(route(stack_rules(stack_template), event(detail_type))) == expected


def test_an_event_of_another_source_goes_nowhere(stack_template: dict[str, Any]) -> None:
    assert route(stack_rules(stack_template), event("BootstrapLoopDetected", source="aws.pcs")) == []


def test_a_changed_pattern_changes_the_routing(stack_template: dict[str, Any]) -> None:
    changed = copy.deepcopy(stack_template)
    rule_of(changed, "RemediateFunction", "LoopDetected")["Pattern"]["detail-type"] = ["RemediationFailed"]
    rules = stack_rules(changed)
    assert route(rules, event("BootstrapLoopDetected")) == ["NotifyFunction"]
    assert sorted(route(rules, event("RemediationFailed"))) == ["NotifyFunction", "RemediateFunction"]


def test_a_rule_off_the_stacks_bus_routes_nothing(stack_template: dict[str, Any]) -> None:
    changed = copy.deepcopy(stack_template)
    del rule_of(changed, "NotifyFunction", "AllEvents")["EventBusName"]  # the account's default bus
    assert route(stack_rules(changed), event("LoopResolved")) == []


def test_an_events_rule_resource_routes_to_the_functions_it_targets(stack_template: dict[str, Any]) -> None:
    changed = copy.deepcopy(stack_template)
    del changed["Resources"]["NotifyFunction"]["Properties"]["Events"]["AllEvents"]
    changed["Resources"]["ResolvedRule"] = {
        "Type": "AWS::Events::Rule",
        "Properties": {
            "EventBusName": {"Fn::GetAtt": ["EventBus", "Name"]},
            "EventPattern": json.dumps({"source": ["lifeguard"], "detail-type": ["LoopResolved"]}),
            "Targets": [
                {"Id": "notify", "Arn": {"Fn::GetAtt": ["NotifyFunction", "Arn"]}},
                {"Id": "parked", "Arn": {"Fn::GetAtt": ["ParkedEventsQueue", "Arn"]}},  # not a function
            ],
        },
    }
    rules = stack_rules(changed)
    assert route(rules, event("LoopResolved")) == ["NotifyFunction"]
    assert route(rules, event("RemediationApplied")) == []


@pytest.mark.parametrize(
    ("pattern", "problem"),
    [
        (
            {"source": ["lifeguard"], "detail": {"kind": [{"prefix": "lo"}]}},
            "detail.kind [{'prefix': 'lo'}] is not a list of exact values",
        ),
        ({"source": ["lifeguard"], "detail": ["loop"]}, "detail ['loop'] is not an object of fields"),
        (
            {"source": ["lifeguard"], "detail-type": [{"prefix": "Remediation"}]},
            "detail-type [{'prefix': 'Remediation'}] is not a list of exact values",
        ),
        ({"source": "lifeguard"}, "source 'lifeguard' is not a list of exact values"),
        ({"source": []}, "source [] is not a list of exact values"),
        ({}, "the pattern is not a JSON object"),
        ("{not json", "the pattern is not a JSON object"),
    ],
)
def test_a_pattern_the_replay_cannot_match_is_refused_by_name(
    stack_template: dict[str, Any], pattern: Any, problem: str
) -> None:
    changed = copy.deepcopy(stack_template)
    rule_of(changed, "RemediateFunction", "LoopDetected")["Pattern"] = pattern
    with pytest.raises(ReplayError) as raised:
        stack_rules(changed)
    assert f"RemediateFunction.Events.LoopDetected: {problem}" in str(raised.value)


def test_every_rule_it_cannot_follow_is_named_at_once(stack_template: dict[str, Any]) -> None:
    changed = copy.deepcopy(stack_template)
    rule_of(changed, "RemediateFunction", "LoopDetected")["Pattern"]["account"] = ["123456789012"]
    rule_of(changed, "NotifyFunction", "AllEvents")["InputPath"] = "$.detail"
    with pytest.raises(ReplayError) as raised:
        stack_rules(changed)
    message = str(raised.value)
    assert "LoopDetected: pattern key 'account'" in message
    assert "AllEvents: InputPath rewrites the event" in message


class Outbox(list[dict[str, Any]]):
    """What the functions published since the bus last took it."""

    def take(self) -> list[dict[str, Any]]:
        found = self[:]
        self.clear()
        return found


def test_the_bus_delivers_what_each_function_published_after_the_event_that_caused_it(
    stack_template: dict[str, Any],
) -> None:
    happened: list[str] = []
    outbox = Outbox()

    def remediate(delivered: dict[str, Any]) -> None:
        happened.append(f"remediate {delivered['detail-type']}")
        outbox.append(event("RemediationApplied"))

    bus = LocalBus(
        stack_rules(stack_template),
        {
            "RemediateFunction": remediate,
            "NotifyFunction": lambda delivered: happened.append(f"notify {delivered['detail-type']}"),
            "ReviewChangesFunction": lambda delivered: happened.append("review"),
        },
        published=outbox.take,
        seen=lambda delivered: happened.append(f"seen {delivered['detail-type']}"),
    )
    bus.invoke(lambda: outbox.extend([event("BootstrapLoopDetected"), event("LoopResolved")]))
    assert happened == [
        "seen BootstrapLoopDetected",
        "remediate BootstrapLoopDetected",
        "notify BootstrapLoopDetected",
        "seen RemediationApplied",
        "notify RemediationApplied",
        "seen LoopResolved",
        "notify LoopResolved",
    ]


def test_a_rule_targeting_a_function_the_replay_does_not_run_is_refused(
    stack_template: dict[str, Any],
) -> None:
    with pytest.raises(ReplayError, match="routes events to NotifyFunction"):
        LocalBus(
            stack_rules(stack_template),
            {"RemediateFunction": lambda _: None},
            published=list,
            seen=lambda _: None,
        )


def cloudtrail(name: str = "UpdateComputeNodeGroup") -> dict[str, Any]:
    """PCS's call as EventBridge puts it on the account's default bus."""
    return {
        "source": "aws.pcs",
        "detail-type": "AWS API Call via CloudTrail",
        "detail": {"eventSource": "pcs.amazonaws.com", "eventName": name},
    }


def test_a_pcs_call_on_the_default_bus_goes_to_the_review_and_nowhere_else(
    stack_template: dict[str, Any],
) -> None:
    rules = stack_rules(stack_template)
    assert route(rules, cloudtrail(), bus=DEFAULT_BUS) == ["ReviewChangesFunction"]
    assert route(rules, cloudtrail("CreateComputeNodeGroup"), bus=DEFAULT_BUS) == ["ReviewChangesFunction"]
    assert route(rules, cloudtrail("DeleteComputeNodeGroup"), bus=DEFAULT_BUS) == []
    assert route(rules, cloudtrail(), bus=STACK_BUS) == []  # only AWS puts these, and on its bus
    assert route(rules, event("BootstrapLoopDetected"), bus=DEFAULT_BUS) == []


def test_a_changed_detail_pattern_changes_the_routing(stack_template: dict[str, Any]) -> None:
    changed = copy.deepcopy(stack_template)
    rule_of(changed, "ReviewChangesFunction", "ConfigChange")["Pattern"]["detail"]["eventName"] = [
        "CreateComputeNodeGroup"
    ]
    rules = stack_rules(changed)
    assert route(rules, cloudtrail(), bus=DEFAULT_BUS) == []
    assert route(rules, cloudtrail("CreateComputeNodeGroup"), bus=DEFAULT_BUS) == ["ReviewChangesFunction"]


def test_an_event_put_on_the_default_bus_is_followed_by_what_its_function_published(
    stack_template: dict[str, Any],
) -> None:
    happened: list[str] = []
    outbox = Outbox()

    def review(delivered: dict[str, Any]) -> None:
        happened.append(f"review {delivered['detail']['eventName']}")
        outbox.append(event("ConfigChangeReviewed"))

    bus = LocalBus(
        stack_rules(stack_template),
        {
            "RemediateFunction": lambda _: happened.append("remediate"),
            "NotifyFunction": lambda delivered: happened.append(f"notify {delivered['detail-type']}"),
            "ReviewChangesFunction": review,
        },
        published=outbox.take,
        seen=lambda delivered: happened.append(f"seen {delivered['detail-type']}"),
    )
    bus.put(cloudtrail())
    assert happened == [
        "review UpdateComputeNodeGroup",
        "seen ConfigChangeReviewed",
        "notify ConfigChangeReviewed",
    ]
