"""Write a template with its Fn::ForEach loops expanded, as AWS::LanguageExtensions would expand them, so
tools that do not know the transform (checkov) see and check every resource the loops make.

    python scripts/expand_template.py template.yaml OUT.json [CLUSTER_ID ...]

Each `${Identifier}` is replaced by the item and `&{Identifier}` by the item without its non-alphanumeric
characters; a collection that is `Ref: ClusterIds` iterates over the given cluster ids (one example id by
default). Everything else is left as it is.
"""

from __future__ import annotations

import json
import re
import sys
from pathlib import Path
from typing import Any

from samcli.yamlhelper import yaml_parse

EXAMPLE_CLUSTERS = ["pcs_abc123de45"]


def substitute(value: Any, name: str, item: str) -> Any:
    """`value` with the loop identifier `name` replaced by `item`."""
    if isinstance(value, str):
        bare = re.sub(r"[^A-Za-z0-9]", "", item)
        return value.replace(f"${{{name}}}", item).replace(f"&{{{name}}}", bare)
    if isinstance(value, list):
        return [substitute(each, name, item) for each in value]
    if isinstance(value, dict):
        return {substitute(k, name, item): substitute(v, name, item) for k, v in value.items()}
    return value


def expand(section: dict[str, Any], clusters: list[str]) -> dict[str, Any]:
    """A template section with each `Fn::ForEach::*` entry replaced by what it makes."""
    expanded: dict[str, Any] = {}
    for key, value in section.items():
        if not key.startswith("Fn::ForEach::"):
            expanded[key] = value
            continue
        name, collection, fragment = value
        items = clusters if collection == {"Ref": "ClusterIds"} else collection
        for item in items:
            expanded.update(expand(substitute(fragment, name, item), clusters))
    return expanded


def main(argv: list[str]) -> int:
    if len(argv) < 2:
        print("usage: expand_template.py TEMPLATE OUT.json [CLUSTER_ID ...]", file=sys.stderr)
        return 64
    template = yaml_parse(Path(argv[0]).read_text())
    clusters = argv[2:] or EXAMPLE_CLUSTERS
    for section in ("Conditions", "Resources", "Outputs"):
        if section in template:
            template[section] = expand(template[section], clusters)
    transforms = template.get("Transform")
    if isinstance(transforms, list):
        template["Transform"] = [t for t in transforms if t != "AWS::LanguageExtensions"]
    out = Path(argv[1])
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(template, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
