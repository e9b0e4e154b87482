"""template.yaml as tools that do not know AWS::LanguageExtensions need it: parsed into CloudFormation's
long form (`Ref`, `Fn::GetAtt`, …, as SAM reads it) with every `Fn::ForEach` expanded.

Checkov reads the expanded copy (it would not see what the loops make), and the template tests read the
same expansion, so both check what CloudFormation will create.

    python -m lifeguard_cli.template template.yaml OUT.json [CLUSTER_ID ...]
"""

from __future__ import annotations

import json
import re
import sys
from pathlib import Path
from typing import Any

__all__ = [
    "EXAMPLE_CLUSTERS",
    "YAML_ALIASES_MAX",
    "TooManyAliasesError",
    "expand",
    "expanded_template",
    "load_template",
    "parse_yaml",
    "substitute",
]

EXAMPLE_CLUSTERS = ("pcs_abc123de45",)
# Aliases (`*name`) a YAML document may hold: a template's few, many times over.
YAML_ALIASES_MAX = 10_000


class TooManyAliasesError(ValueError):
    """A YAML document with more than YAML_ALIASES_MAX aliases: not read (`mark`: where the one past them
    is)."""

    def __init__(self, mark: Any) -> None:
        super().__init__(f"more than {YAML_ALIASES_MAX} YAML aliases (*name)")
        self.mark = mark


def _loader() -> type[Any]:
    """A YAML loader that reads CloudFormation's short forms as SAM does (`!Ref X` is `{"Ref": "X"}`,
    `!GetAtt X.Arn` is `{"Fn::GetAtt": ["X", "Arn"]}`, `!Sub …` is `{"Fn::Sub": …}`), and dates as text
    (`Version: 2012-10-17` stays a string). A key given twice in one mapping is an error, as CloudFormation
    makes it (PyYAML would keep the last: `OnError: STOP_SEQUENCE` then `OnError: CONTINUE` read as
    CONTINUE). PyYAML comes with moto's server: the operator CLI needs no SAM CLI to read the template."""
    import yaml  # type: ignore[import-untyped]  # PyYAML ships no types

    class CloudFormationLoader(yaml.SafeLoader):  # type: ignore[misc]
        aliases = 0

        def compose_node(self, parent: yaml.Node | None, index: object) -> yaml.Node:
            # Each alias is read as what it names, wherever it stands: a file of 3 MB with a million of
            # one anchor is a million scripts to check, gigabytes where its bytes are bounded.
            if self.check_event(yaml.AliasEvent):
                self.aliases += 1
                if self.aliases > YAML_ALIASES_MAX:
                    raise TooManyAliasesError(self.peek_event().start_mark)
            return super().compose_node(parent, index)

        def construct_mapping(self, node: yaml.Node, deep: bool = False) -> dict[Any, Any]:
            if isinstance(node, yaml.MappingNode):
                seen: set[str] = set()
                for key, _ in node.value:
                    if not isinstance(key, yaml.ScalarNode):
                        continue
                    if key.value in seen:
                        raise yaml.constructor.ConstructorError(
                            None,
                            None,
                            f"key {key.value[:100]!r} given twice in one mapping (CloudFormation refuses it)",
                            key.start_mark,
                        )
                    seen.add(key.value)
            mapping: dict[Any, Any] = super().construct_mapping(node, deep=deep)
            return mapping

    def intrinsic(loader: yaml.SafeLoader, _suffix: str, node: yaml.Node) -> dict[str, Any]:
        tag = node.tag[1:]
        name = tag if tag in ("Ref", "Condition") else f"Fn::{tag}"
        value: Any
        if tag == "GetAtt" and isinstance(node, yaml.ScalarNode):
            value = str(node.value).split(".", 1)
        elif isinstance(node, yaml.ScalarNode):
            value = loader.construct_scalar(node)
        elif isinstance(node, yaml.SequenceNode):
            value = loader.construct_sequence(node, deep=True)
        else:
            assert isinstance(node, yaml.MappingNode)
            value = loader.construct_mapping(node, deep=True)
        return {name: value}

    text = CloudFormationLoader.yaml_constructors["tag:yaml.org,2002:str"]
    CloudFormationLoader.add_constructor("tag:yaml.org,2002:timestamp", text)
    CloudFormationLoader.add_multi_constructor("!", intrinsic)
    return CloudFormationLoader


def load_template(path: Path) -> dict[str, Any]:
    """The template in long form, as SAM parses it (`!GetAtt X.Arn` is `{"Fn::GetAtt": ["X", "Arn"]}`)."""
    text = path.read_text()
    try:
        loaded: dict[str, Any] = json.loads(text)  # a JSON template is YAML too, but read faster as JSON
    except ValueError:
        loaded = parse_yaml(text)
    return loaded


def parse_yaml(text: str) -> Any:
    """YAML as CloudFormation reads it (its short-form tags in long form); raises yaml.YAMLError."""
    import yaml

    return yaml.load(text, Loader=_loader())  # a SafeLoader: no arbitrary objects


def substitute(value: Any, name: str, item: str) -> Any:
    """`value` with a `Fn::ForEach` loop's identifier `name` made `item`: `${name}` the item, `&{name}` the
    item without its other than letters and digits."""
    if isinstance(value, str):
        bare = re.sub(r"[^A-Za-z0-9]", "", item)
        return value.replace(f"${{{name}}}", item).replace(f"&{{{name}}}", bare)
    if isinstance(value, list):
        return [substitute(each, name, item) for each in value]
    if isinstance(value, dict):
        return {substitute(k, name, item): substitute(v, name, item) for k, v in value.items()}
    return value


def expand(section: dict[str, Any], clusters: tuple[str, ...] = EXAMPLE_CLUSTERS) -> dict[str, Any]:
    """A section with each `Fn::ForEach::*` entry replaced by what it makes: `${Identifier}` becomes the
    item, `&{Identifier}` the item without its non-alphanumeric characters, and a collection that is
    `Ref: ClusterIds` iterates over `clusters`."""
    expanded: dict[str, Any] = {}
    for key, value in section.items():
        if not key.startswith("Fn::ForEach::"):
            expanded[key] = value
            continue
        name, collection, fragment = value
        items = list(clusters) if collection == {"Ref": "ClusterIds"} else collection
        for item in items:
            expanded.update(expand(substitute(fragment, name, item), clusters))
    return expanded


def expanded_template(path: Path, clusters: tuple[str, ...] = EXAMPLE_CLUSTERS) -> dict[str, Any]:
    """The whole template with its loops expanded and the LanguageExtensions transform dropped."""
    template = load_template(path)
    for section in ("Conditions", "Resources", "Outputs"):
        if section in template:
            template[section] = expand(template[section], clusters)
    transforms = template.get("Transform")
    if isinstance(transforms, list):
        template["Transform"] = [t for t in transforms if t != "AWS::LanguageExtensions"]
    return template


def main(argv: list[str] | None = None) -> int:
    """`python -m lifeguard_cli.template TEMPLATE OUT.json [CLUSTER_ID ...]`."""
    args = sys.argv[1:] if argv is None else argv
    if len(args) < 2:
        print("usage: python -m lifeguard_cli.template TEMPLATE OUT.json [CLUSTER_ID ...]", file=sys.stderr)
        return 64
    template = expanded_template(Path(args[0]), tuple(args[2:]) or EXAMPLE_CLUSTERS)
    out = Path(args[1])
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(template, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
