"""The `nodeLifecycleActions` of the PCS compute node groups in a CloudFormation or SAM template, checked
with exactly the rules a plain config gets.

CloudFormation spells PCS's API names in PascalCase (`OnError` for `onError`, `S3VersionId` for
`s3VersionId`). A group's `NodeLifecycleActions` is translated to the API's shape by walking PCS's service
model (a member's CloudFormation name is its API name with the first letter upper-cased), validated by
`NodeLifecycleActions.from_api`, searched by `find_risks`, and every finding is pointed back into the
template: `Resources.ComputeNodes.Properties.NodeLifecycleActions.Stages.NodeBootstrapped[0].OnError`.

An intrinsic function (`{"Ref": …}`, `{"Fn::Sub": …}`) is resolved only when the stack deploys. It is noted
once, replaced by a value its shape accepts (its text where that fits, as `s3://${Bucket}/a.sh` keeps its
scheme and file name), and nothing at or under it is reported, but for the branches of an `Fn::If` that
are values, each checked alone. A property given as `!Ref AWS::NoValue` is not there. The groups an
`Fn::ForEach` loop makes are linted as it makes them.

`lifeguard lint` and the cfn-lint rules (`lifeguard_cli.cfn_rules`) both call `lint_template`.
"""

from __future__ import annotations

import itertools
import re
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from typing import Any, Literal

from lifeguard.errors import InvalidLifecycleConfigError, Problem
from lifeguard.lifecycle import NodeLifecycleActions
from lifeguard.lifecycle_rules import REQUEST_SHAPE, find_problems
from lifeguard.pcs_model import shape, validate_shape
from lifeguard.risks import Risk, find_risks

__all__ = [
    "GROUP_TYPE",
    "PROPERTY",
    "FindingKind",
    "NodeGroupLint",
    "TemplateFinding",
    "TemplatePath",
    "is_template",
    "lint_node_group",
    "lint_template",
    "render_path",
]

GROUP_TYPE = "AWS::PCS::ComputeNodeGroup"
PROPERTY = "NodeLifecycleActions"

TemplatePath = tuple[str | int, ...]
ApiPath = tuple[str | int, ...]
FindingKind = Literal["problem", "risk", "note"]

_API_SEGMENT = re.compile(r"\[(\d+)\]|([^.\[\]]+)")


@dataclass(frozen=True)
class TemplateFinding:
    """A problem, risk or note of one node group, and where it is in the template."""

    kind: FindingKind
    where: TemplatePath
    message: str
    code: str | None = None

    @property
    def path(self) -> str:
        """`where` as text: `Resources.X.Properties.NodeLifecycleActions.Stages.NodeReady[0].Name`."""
        return render_path(self.where)


@dataclass(frozen=True)
class NodeGroupLint:
    """The verdict on one `AWS::PCS::ComputeNodeGroup` of a template.

    `config` is the group's config as the PCS API takes it, with intrinsic functions replaced by
    stand-ins; None when it is invalid, or is an intrinsic function as a whole. `intrinsics` maps the API
    path of each stand-in (`stages.nodeBootstrapped[0].onError`) to its function (`Ref`).
    """

    logical_id: str
    config: NodeLifecycleActions | None
    findings: tuple[TemplateFinding, ...]
    intrinsics: Mapping[str, str] = field(default_factory=dict)

    @property
    def valid(self) -> bool:
        """True when PCS would accept the config (as far as it can be known before deployment)."""
        return not any(finding.kind == "problem" for finding in self.findings)

    @property
    def problems(self) -> tuple[Problem, ...]:
        """What PCS would reject, with template paths."""
        return tuple(Problem(f.path, f.message) for f in self.findings if f.kind == "problem")

    @property
    def risks(self) -> tuple[Risk, ...]:
        """What PCS accepts but hurts in production, with template paths."""
        return tuple(Risk(f.code or "", f.path, f.message) for f in self.findings if f.kind == "risk")

    @property
    def notes(self) -> tuple[Problem, ...]:
        """The values that are intrinsic functions, which nothing can check before deployment."""
        return tuple(Problem(f.path, f.message) for f in self.findings if f.kind == "note")


def render_path(where: TemplatePath) -> str:
    """`("Resources", "X", "Stages", "NodeReady", 0)` as `Resources.X.Stages.NodeReady[0]`."""
    text = ""
    for part in where:
        text += f"[{part}]" if isinstance(part, int) else (f".{part}" if text else part)
    return text


def is_template(data: object) -> bool:
    """True for a CloudFormation or SAM template: a document with a top-level `Resources` mapping."""
    return isinstance(data, Mapping) and isinstance(data.get("Resources"), Mapping)


def lint_template(template: Mapping[str, Any], *, over: list[str] | None = None) -> list[NodeGroupLint]:
    """Every PCS compute node group of the template that has `NodeLifecycleActions`, linted, in order, of
    its first 500 resources (CloudFormation's bound, its loops' included, expanded up to EXPANSIONS_MAX
    items); `over`, when given, gets why groups past them were not linted, if any were not
    (TOO_MANY_RESOURCES: CloudFormation refuses the template; TOO_MANY_EXPANSIONS)."""
    return [lint_node_group(logical_id, value) for logical_id, value in _node_groups(template, over)]


# CloudFormation's bounds: loops nest at most 5 deep, and a template makes at most 500 resources.
_FOR_EACH = "Fn::ForEach::"
_FOR_EACH_DEPTH = 5
_RESOURCES_MAX = 500
# Loop items expanded at most, all loops of a template together: loops of loops that make nothing would
# otherwise cost their product (24 million for five of 30); ten times the resources a template may make.
EXPANSIONS_MAX = 10 * _RESOURCES_MAX
TOO_MANY_RESOURCES = "makes more than 500 resources, which CloudFormation refuses"
TOO_MANY_EXPANSIONS = f"its loops expand more than {EXPANSIONS_MAX:,} items, past what lint follows"


def _node_groups(template: Mapping[str, Any], over: list[str] | None = None) -> Iterator[tuple[str, object]]:
    resources = template.get("Resources")
    if not isinstance(resources, Mapping):
        return
    budget = [EXPANSIONS_MAX, 0]  # the items left to expand, and whether a loop was cut short
    # One more than CloudFormation takes, to tell a template that makes more.
    made = itertools.islice(_resources(resources, budget), _RESOURCES_MAX + 1)
    for count, (logical_id, resource) in enumerate(made, start=1):
        if count > _RESOURCES_MAX:
            if over is not None:
                over.append(TOO_MANY_RESOURCES)
            return
        if not isinstance(resource, Mapping) or resource.get("Type") != GROUP_TYPE:
            continue
        properties = resource.get("Properties")
        if isinstance(properties, Mapping) and PROPERTY in properties:
            yield str(logical_id), properties[PROPERTY]
    if budget[1] and over is not None:
        over.append(TOO_MANY_EXPANSIONS)


def _resources(section: Mapping[Any, Any], budget: list[int], depth: int = 0) -> Iterator[tuple[str, object]]:
    """The resources a section makes, each `Fn::ForEach::*` loop's as AWS::LanguageExtensions makes them
    (as cfn-lint lints them): `${Identifier}` the item, `&{Identifier}` the item without its other than
    letters and digits. A collection known only when the stack deploys (`!Ref` of a parameter) makes one
    resource of each fragment, its identifier standing for the item. `budget`: the fragments left to
    expand, shared by every loop (loops of loops that make nothing would otherwise cost their product), and
    set to 1 past it when a loop was cut short."""
    from lifeguard_cli.template import substitute

    for key, value in section.items():
        if not (isinstance(key, str) and key.startswith(_FOR_EACH)):
            yield str(key), value
            continue
        if depth >= _FOR_EACH_DEPTH or not (isinstance(value, list) and len(value) == 3):
            continue
        name, collection, fragment = value
        if not isinstance(name, str) or not isinstance(fragment, Mapping):
            continue
        literal = isinstance(collection, list) and all(isinstance(item, str) for item in collection)
        for item in collection if literal else [name]:
            if budget[0] <= 0:
                budget[1] = 1
                return
            budget[0] -= 1
            yield from _resources(substitute(fragment, name, item), budget, depth + 1)


def lint_node_group(logical_id: str, value: object) -> NodeGroupLint:
    """Lint one group's `NodeLifecycleActions` value (CloudFormation's spelling) with the layer's rules."""
    translation = _Translation(("Resources", logical_id, "Properties", PROPERTY))
    config_api = translation.translate(REQUEST_SHAPE, value)
    notes = tuple(
        TemplateFinding(
            "note",
            translation.where(api),
            f"{function} is resolved only when the stack deploys: "
            + ("each branch that is a value checked alone" if function == "Fn::If" else "not checked"),
        )
        for api, function in translation.intrinsics
        if _known_function(function)  # a misspelled one is a problem
    )
    intrinsics = {render_path(api): function for api, function in translation.intrinsics}
    problems = [*translation.problems]
    for problem in find_problems(config_api):
        api = _api_path(problem.path)
        if not translation.is_intrinsic(api):
            problems.append(TemplateFinding("problem", translation.where(api), problem.message))
    if problems or translation.is_intrinsic(()):
        return NodeGroupLint(logical_id, None, (*problems, *notes), intrinsics)
    try:
        config = NodeLifecycleActions.from_api(config_api)
    except InvalidLifecycleConfigError:
        # Only stand-ins disagree with each other (two names that are the same `Ref`): nothing to report.
        return NodeGroupLint(logical_id, None, notes, intrinsics)
    risks = []
    for risk in find_risks(config):
        api = _api_path(risk.path)
        if not translation.is_intrinsic(api):
            risks.append(TemplateFinding("risk", translation.where(api), risk.message, risk.code))
    return NodeGroupLint(logical_id, config, (*risks, *notes), intrinsics)


def _api_path(path: str) -> ApiPath:
    return tuple(int(index) if index else name for index, name in _API_SEGMENT.findall(path) if index or name)


def _cloudformation_name(api_name: str) -> str:
    return api_name[:1].upper() + api_name[1:]


_NO_VALUE = {"Ref": "AWS::NoValue"}
# The intrinsic functions a property value may be (CloudFormation's, and AWS::LanguageExtensions'); a `!Tag`
# or `Fn::` name of no other spelling is a typo CloudFormation refuses.
_FUNCTIONS = frozenset(
    {
        "Ref",
        "Fn::Base64",
        "Fn::Cidr",
        "Fn::FindInMap",
        "Fn::GetAtt",
        "Fn::GetAZs",
        "Fn::If",
        "Fn::ImportValue",
        "Fn::Join",
        "Fn::Length",
        "Fn::Select",
        "Fn::Split",
        "Fn::Sub",
        "Fn::ToJsonString",
        "Fn::Transform",
    }
)

_IF_DEPTH = 10  # `Fn::If`s nested as branches of each other, looked into at most


def _known_function(function: str) -> bool:
    """Whether CloudFormation knows `function` in a property: one of `_FUNCTIONS`, or a loop
    (`Fn::ForEach::Name`, which AWS::LanguageExtensions takes in resource properties too)."""
    return function in _FUNCTIONS or function.startswith(_FOR_EACH)


def _no_function(function: str) -> str:
    return f"{function} is no CloudFormation function: CloudFormation refuses the template"


def _intrinsic_function(value: object) -> str | None:
    if isinstance(value, Mapping) and len(value) == 1:
        [name] = value
        if name == "Ref" or (isinstance(name, str) and name.startswith("Fn::")):
            return str(name)
    return None


@dataclass
class _Translation:
    """One group's value in the API's spelling, and the way back from API paths to template paths."""

    base: TemplatePath
    intrinsics: list[tuple[ApiPath, str]] = field(default_factory=list)
    problems: list[TemplateFinding] = field(default_factory=list)

    def translate(self, shape_name: str, value: object, api: ApiPath = ()) -> object:
        """`value` (a value of `shape_name` as CloudFormation spells it) as the PCS API spells it."""
        function = _intrinsic_function(value)
        if function is not None:
            self.intrinsics.append((api, function))
            if not _known_function(function):  # `!Sbu`, `!ref`: CloudFormation refuses the template
                self.problems.append(TemplateFinding("problem", self.where(api), _no_function(function)))
            if function == "Fn::If" and isinstance(value, Mapping):
                self._check_branches(shape_name, value[function], (*self.where(api), function))
            return _stand_in(shape_name, _text_of(value))
        spec = shape(shape_name)
        if spec["type"] == "structure" and isinstance(value, Mapping):
            members: Mapping[str, Any] = spec.get("members", {})
            by_cloudformation_name = {_cloudformation_name(name): name for name in members}
            translated: dict[str, object] = {}
            for key, item in value.items():
                if item == _NO_VALUE:
                    continue  # CloudFormation deploys the property as if it were not written
                if isinstance(key, str) and key.startswith(_FOR_EACH):
                    # A loop beside the mapping's keys (AWS::LanguageExtensions makes its keys at deploy).
                    self.intrinsics.append(((*api, key), key))
                    continue
                member = by_cloudformation_name.get(key)
                if member is None:
                    known = ", ".join(by_cloudformation_name)
                    where = (*self.where(api), str(key))
                    message = f"is not a property of {shape_name} (known: {known})"
                    self.problems.append(TemplateFinding("problem", where, message))
                    continue
                translated[member] = self.translate(members[member]["shape"], item, (*api, member))
            return translated
        if spec["type"] == "list" and isinstance(value, list):
            member_shape = spec["member"]["shape"]
            return [self.translate(member_shape, item, (*api, index)) for index, item in enumerate(value)]
        if spec["type"] == "string" and isinstance(value, bool):
            return "true" if value else "false"  # as CloudFormation passes a YAML boolean for a string
        if spec["type"] == "string" and isinstance(value, int | float):
            return str(value)  # a number, as CloudFormation passes it for a string (`Name: 2024`)
        # A wrong type is the rules' to report; cfn-lint hands in str subclasses that carry line numbers.
        return str(value) if isinstance(value, str) else value

    def _check_branches(self, shape_name: str, argument: object, where: TemplatePath, depth: int = 0) -> None:
        """The branches of an `Fn::If` (at `where`) that are values, not functions (`!Ref AWS::NoValue`),
        each checked as a value of `shape_name`, and those of an `Fn::If` that is a branch: which one the
        stack takes is known only when it deploys, but a branch PCS refuses is refused whenever its
        condition holds (`- !If [Prod, {script}, !Ref AWS::NoValue]`)."""
        if not (isinstance(argument, list) and len(argument) == 3) or depth >= _IF_DEPTH:
            return
        for side in (1, 2):
            branch = argument[side]
            function = _intrinsic_function(branch)
            if function == "Fn::If" and isinstance(branch, Mapping):
                self._check_branches(shape_name, branch[function], (*where, side, function), depth + 1)
            if function is not None:
                if not _known_function(function):
                    self.problems.append(TemplateFinding("problem", (*where, side), _no_function(function)))
                continue
            inner = _Translation((*where, side))
            translated = inner.translate(shape_name, branch)
            self.problems.extend(inner.problems)
            for problem in validate_shape(shape_name, translated):
                found = _api_path(problem.path)
                if not inner.is_intrinsic(found):
                    self.problems.append(TemplateFinding("problem", inner.where(found), problem.message))

    def where(self, api: ApiPath) -> TemplatePath:
        """The template path of an API path: only keys spelled the CloudFormation way were translated, so
        each member is its CloudFormation name."""
        return (*self.base, *(part if isinstance(part, int) else _cloudformation_name(part) for part in api))

    def is_intrinsic(self, api: ApiPath) -> bool:
        """True when `api` is an intrinsic function's value or lies under one."""
        return any(api[: len(root)] == root for root, _ in self.intrinsics)


def _text_of(value: Any) -> str:
    """An intrinsic function as the text it will likely resolve to: `!Sub s3://${Bucket}/a.sh` is
    `s3://Bucket/a.sh`, `!Ref ScriptName` is `ScriptName`, `!GetAtt Bucket.Arn` is `Bucket.Arn`."""
    [(function, argument)] = value.items()
    if function == "Fn::Sub":
        template = argument[0] if isinstance(argument, list) and argument else argument
        if isinstance(template, str):
            return re.sub(r"\$\{!?([^}]*)\}", r"\1", template)
    if function == "Fn::GetAtt" and isinstance(argument, list):
        return ".".join(str(part) for part in argument)
    if function == "Ref" and isinstance(argument, str):
        return argument
    return str(function)


def _stand_in(shape_name: str, text: str) -> object:
    """A value `shape_name` accepts, close to `text`."""
    spec = shape(shape_name)
    kind = spec["type"]
    if kind == "structure":
        members = spec.get("members", {})
        return {name: _stand_in(members[name]["shape"], text) for name in spec.get("required", ())}
    if kind == "list":
        return [_stand_in(spec["member"]["shape"], text) for _ in range(spec.get("min", 0))]
    if kind == "string":
        if "enum" in spec:
            return spec["enum"][0]
        slug = (re.sub(r"[^a-z0-9]+", "-", text.lower()).strip("-") or "value").ljust(3, "0")[:63]
        web = [f"s3://{slug}/{slug}", f"https://{slug}.example/{slug}"]
        candidates = [text, text.lower(), slug, *(web[::-1] if text.startswith("https") else web), "0" * 64]
        return next((c for c in candidates if not validate_shape(shape_name, c)), text)
    if kind == "boolean":
        return False
    return spec.get("min", 0)
