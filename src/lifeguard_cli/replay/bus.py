"""The stack's event buses in a replay: the rules read from template.yaml, and each event delivered to the
functions they target.

A rule is an `AWS::Events::Rule`, or an `EventBridgeRule` event of a function, which SAM makes into one,
on the stack's own bus (`AWS::Events::EventBus`: the controller's events) or on the account's default
bus (no `EventBusName`, or `default`: where AWS puts CloudTrail's records of PCS's calls); rules on any
other bus are not the stack's to follow. A replay matches events as EventBridge does on `source`,
`detail-type` and fields of `detail` (one level deep), each a list of exact values; a pattern that says
anything else, or a target that rewrites the event, is refused with every problem named, so the replay
never routes differently from the stack without saying so. Targets that are not functions (a queue, a
topic) invoke nothing here.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from functools import cache
from pathlib import Path
from typing import Any

from lifeguard_cli.replay.errors import ReplayError
from lifeguard_cli.resources import resource as shipped

__all__ = [
    "DEFAULT_BUS",
    "STACK_BUS",
    "TEMPLATE",
    "LocalBus",
    "Rule",
    "route",
    "stack_rules",
    "template_rules",
]

TEMPLATE = shipped("template.yaml")
MATCHED_KEYS = ("source", "detail-type")
STACK_BUS = "stack"  # the stack's own bus: Lifeguard's events
DEFAULT_BUS = "default"  # the account's default bus: AWS's events (CloudTrail)
_FUNCTION_TYPES = ("AWS::Serverless::Function", "AWS::Lambda::Function")
_REWRITES = ("Input", "InputPath", "InputTransformer")

Event = dict[str, Any]
Deliver = Callable[[Event], None]


@dataclass(frozen=True)
class Rule:
    """One rule of a bus (`STACK_BUS` or `DEFAULT_BUS`): the values of `source`, `detail-type` and of
    fields of `detail` it matches (None: any) and the functions it invokes, by logical id."""

    name: str
    sources: tuple[str, ...] | None
    detail_types: tuple[str, ...] | None
    targets: tuple[str, ...]
    bus: str = STACK_BUS
    detail: tuple[tuple[str, tuple[str, ...]], ...] = ()

    def matches(self, event: Mapping[str, Any]) -> bool:
        """Whether EventBridge would deliver `event` through this rule."""
        detail = event.get("detail")
        fields: Mapping[str, Any] = detail if isinstance(detail, Mapping) else {}
        return all(
            values is None or event.get(key) in values
            for key, values in (("source", self.sources), ("detail-type", self.detail_types))
        ) and all(fields.get(key) in values for key, values in self.detail)


def route(rules: Sequence[Rule], event: Mapping[str, Any], *, bus: str = STACK_BUS) -> list[str]:
    """The functions `event`, put on `bus`, is delivered to, once per matching rule that targets them, in
    rule order."""
    return [target for rule in rules if rule.bus == bus and rule.matches(event) for target in rule.targets]


def stack_rules(template: Mapping[str, Any]) -> tuple[Rule, ...]:
    """The rules on the stack's own bus and on the account's default bus, from a template in long form with
    its loops expanded (`lifeguard_cli.template.expanded_template`); raises ReplayError naming every rule
    it cannot follow."""
    resources: Mapping[str, Any] = template.get("Resources") or {}
    buses = {name for name, resource in resources.items() if resource.get("Type") == "AWS::Events::EventBus"}
    if not buses:
        raise ReplayError("template.yaml has no AWS::Events::EventBus: no bus to route the events on")
    rules: list[Rule] = []
    problems: list[str] = []
    for name, resource in resources.items():
        properties = resource.get("Properties") or {}
        if resource.get("Type") == "AWS::Events::Rule":
            bus = _bus_of(properties.get("EventBusName"), buses)
            if bus is None or not _enabled(name, properties, problems):
                continue
            targets = []
            for index, target in enumerate(properties.get("Targets") or []):
                where = f"{name}.Targets[{index}]"
                function = _function_of(where, target.get("Arn"), resources, problems)
                if function is not None:
                    _refuse_rewrites(where, target, problems)
                    targets.append(function)
            _add(rules, problems, name, properties.get("EventPattern"), targets, bus=bus)
        elif resource.get("Type") in _FUNCTION_TYPES:
            for event_name, event in (properties.get("Events") or {}).items():
                rule_properties = event.get("Properties") or {}
                where = f"{name}.Events.{event_name}"
                bus = _bus_of(rule_properties.get("EventBusName"), buses)
                if event.get("Type") != "EventBridgeRule" or bus is None:
                    continue
                if _enabled(where, rule_properties, problems):
                    _refuse_rewrites(where, rule_properties, problems)
                    _add(rules, problems, where, rule_properties.get("Pattern"), [name], bus=bus)
    if problems:
        raise ReplayError("template.yaml: a replay cannot follow these event rules: " + "; ".join(problems))
    return tuple(rules)


@cache
def template_rules(path: Path = TEMPLATE) -> tuple[Rule, ...]:
    """The rules of the stack's bus in the template at `path` (read once per process)."""
    try:
        from lifeguard_cli.template import expanded_template

        template = expanded_template(path)
    except ImportError as exc:
        raise ReplayError(f"reading {path.name} needs PyYAML ({exc.name}): install the cli extras") from None
    except OSError as exc:
        raise ReplayError(f"cannot read {path}: {exc.strerror or exc}") from None
    return stack_rules(template)


def _bus_of(name: Any, buses: set[str]) -> str | None:
    """`STACK_BUS`, `DEFAULT_BUS`, or None for a bus that is neither."""
    if isinstance(name, Mapping) and "Ref" in name:
        return STACK_BUS if name["Ref"] in buses else None
    if isinstance(name, Mapping) and "Fn::GetAtt" in name:
        return STACK_BUS if _get_att(name)[0] in buses else None
    return DEFAULT_BUS if name in (None, "default") else None  # another bus by name


def _enabled(where: str, properties: Mapping[str, Any], problems: list[str]) -> bool:
    state = properties.get("State", "ENABLED")
    if state not in ("ENABLED", "DISABLED"):
        problems.append(f"{where}: State {state!r} is not ENABLED or DISABLED")
    return bool(state == "ENABLED")


def _get_att(value: Mapping[str, Any]) -> tuple[str, str]:
    found = value["Fn::GetAtt"]
    parts = found.split(".", 1) if isinstance(found, str) else list(found)
    return (str(parts[0]), str(parts[1])) if len(parts) == 2 else (str(parts[0]), "")


def _function_of(where: str, arn: Any, resources: Mapping[str, Any], problems: list[str]) -> str | None:
    """The logical id of the function a target invokes, or None when the target is not a function."""
    if not isinstance(arn, Mapping) or "Fn::GetAtt" not in arn:
        problems.append(f"{where}: Arn {arn!r} is not a Fn::GetAtt of a resource of the template")
        return None
    resource, attribute = _get_att(arn)
    if resources.get(resource, {}).get("Type") not in _FUNCTION_TYPES:
        return None
    if attribute != "Arn":
        problems.append(f"{where}: invokes {resource}.{attribute}, not {resource}.Arn")
        return None
    return resource


def _refuse_rewrites(where: str, properties: Mapping[str, Any], problems: list[str]) -> None:
    problems.extend(
        f"{where}: {key} rewrites the event its function gets" for key in _REWRITES if key in properties
    )


def _exact(values: Any) -> bool:
    return isinstance(values, list) and bool(values) and all(isinstance(v, str) for v in values)


def _add(
    rules: list[Rule],
    problems: list[str],
    name: str,
    pattern: Any,
    targets: list[str],
    *,
    bus: str = STACK_BUS,
) -> None:
    if isinstance(pattern, str):
        try:
            pattern = json.loads(pattern)
        except ValueError:
            pattern = None
    if not isinstance(pattern, Mapping) or not pattern:
        problems.append(f"{name}: the pattern is not a JSON object")
        return
    problems.extend(
        f"{name}: pattern key {key!r} (a replay matches on {', '.join(MATCHED_KEYS)} and detail only)"
        for key in pattern
        if key not in (*MATCHED_KEYS, "detail")
    )
    matched: dict[str, tuple[str, ...] | None] = {}
    for key in MATCHED_KEYS:
        values = pattern.get(key)
        if values is not None and not _exact(values):
            problems.append(f"{name}: {key} {values!r} is not a list of exact values")
        matched[key] = tuple(values) if isinstance(values, list) else None
    detail = pattern.get("detail", {})
    if not isinstance(detail, Mapping):
        problems.append(f"{name}: detail {detail!r} is not an object of fields")
        detail = {}
    for key, values in detail.items():
        if not _exact(values):
            problems.append(f"{name}: detail.{key} {values!r} is not a list of exact values")
    fields = tuple((str(key), tuple(values)) for key, values in detail.items() if _exact(values))
    rules.append(Rule(name, matched["source"], matched["detail-type"], tuple(targets), bus, fields))


class LocalBus:
    """Delivers what each invocation published to the functions the rules target.

    After an invocation, the events it published (`published()`, in order) are delivered one by one:
    each is passed to `seen`, then to every function it is routed to, and then the events those functions
    published are delivered the same way, before the next one. So what an event causes follows it, as its
    notification precedes the notifications of what it caused.
    """

    def __init__(
        self,
        rules: Sequence[Rule],
        functions: Mapping[str, Deliver],
        *,
        published: Callable[[], list[Event]],
        seen: Deliver,
    ) -> None:
        unknown = sorted({target for rule in rules for target in rule.targets} - set(functions))
        if unknown:
            names = ", ".join(unknown)
            raise ReplayError(f"template.yaml routes events to {names}, which a replay does not run")
        self.rules = tuple(rules)
        self._functions = functions
        self._published = published
        self._seen = seen

    def invoke(self, call: Callable[[], object]) -> None:
        """Run `call`, an invocation that publishes on the bus, then deliver what it published."""
        call()
        self._deliver(self._published())

    def put(self, event: Event, *, bus: str = DEFAULT_BUS) -> None:
        """An event AWS puts on `bus` (CloudTrail's record of a call, on the default bus): delivered to the
        functions that bus's rules target, then what they published is delivered as `invoke` does."""
        caused: list[Event] = []
        for function in route(self.rules, event, bus=bus):
            self._functions[function](event)
            caused.extend(self._published())
        self._deliver(caused)

    def _deliver(self, events: list[Event]) -> None:
        for event in events:
            self._seen(event)
            caused: list[Event] = []
            for function in route(self.rules, event):
                self._functions[function](event)
                caused.extend(self._published())
            self._deliver(caused)
