"""Any config the PCS model and the documented rules allow round-trips unchanged; a config broken in one
place is rejected with that place's path."""

from __future__ import annotations

import copy
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from lifeguard.errors import InvalidLifecycleConfigError
from lifeguard.lifecycle import NodeLifecycleActions
from lifeguard.lifecycle_rules import (
    EXECUTION_POLICIES,
    ON_ERRORS,
    SCRIPT_CACHING_POLICIES,
    STAGES,
    find_problems,
)

names = st.from_regex(r"[A-Za-z0-9][A-Za-z0-9 _-]{0,63}", fullmatch=True)
s3_locations = st.from_regex(r"s3://[a-z0-9][a-z0-9.-]{1,20}[a-z0-9]/[A-Za-z0-9/_.-]{1,40}", fullmatch=True)
https_locations = st.from_regex(
    r"https://([a-z0-9]([a-z0-9-]{0,10}[a-z0-9])?\.){1,3}[a-z]{2,6}(:[0-9]{1,5})?(/[A-Za-z0-9/_.?=&-]{0,40})?",
    fullmatch=True,
)
checksums = st.from_regex(r"[0-9a-fA-F]{64}", fullmatch=True)
arguments = st.lists(st.text(max_size=256), max_size=20)


@st.composite
def script_sources(draw: st.DrawFn) -> dict[str, Any]:
    is_s3 = draw(st.booleans())
    source: dict[str, Any] = {"scriptLocation": draw(s3_locations if is_s3 else https_locations)}
    if is_s3 and draw(st.booleans()):
        source["s3VersionId"] = draw(st.text(max_size=64))
    if draw(st.booleans()):
        source["checksum"] = draw(checksums)
    return source


def _maybe(draw: st.DrawFn, key: str, strategy: st.SearchStrategy[Any], into: dict[str, Any]) -> None:
    if draw(st.booleans()):
        into[key] = draw(strategy)


@st.composite
def scripts(draw: st.DrawFn, name: str) -> dict[str, Any]:
    script: dict[str, Any] = {"name": name, "scriptSource": draw(script_sources())}
    _maybe(draw, "arguments", arguments, script)
    _maybe(draw, "onError", st.sampled_from(ON_ERRORS), script)
    _maybe(draw, "executionPolicy", st.sampled_from(EXECUTION_POLICIES), script)
    return script


@st.composite
def configs(draw: st.DrawFn) -> dict[str, Any]:
    stages: dict[str, Any] = {}
    for stage in STAGES:
        if draw(st.booleans()):
            stage_names = draw(st.lists(names, min_size=1, max_size=5, unique=True))
            stages[stage] = [draw(scripts(name)) for name in stage_names]
    config: dict[str, Any] = {"stages": stages}
    _maybe(draw, "scriptCachingPolicy", st.sampled_from(SCRIPT_CACHING_POLICIES), config)
    return config


@given(configs())
@settings(max_examples=300)
def test_valid_configs_round_trip_unchanged(config: dict[str, Any]) -> None:
    original = copy.deepcopy(config)
    parsed = NodeLifecycleActions.from_api(config)
    assert parsed.to_api() == original
    assert NodeLifecycleActions.from_api(parsed.to_api()).fingerprint() == parsed.fingerprint()


# Each mutation breaks one script in one way and names the path (relative to the script) it must be
# reported at.
MUTATIONS: dict[str, tuple[Any, str]] = {
    "bad onError": (lambda s, _: s.update(onError="TERMINATED"), "onError"),
    "bad executionPolicy": (lambda s, _: s.update(executionPolicy="ALWAYS"), "executionPolicy"),
    "name with slash": (lambda s, _: s.update(name=s["name"][:10] + "/x"), "name"),
    "name too long": (lambda s, _: s.update(name="n" * 65), "name"),
    "no scriptSource": (lambda s, _: s.pop("scriptSource"), "scriptSource"),
    "short checksum": (lambda s, _: s["scriptSource"].update(checksum="ab" * 10), "scriptSource.checksum"),
    "ftp location": (
        lambda s, _: s["scriptSource"].update(scriptLocation="ftp://h/x"),
        "scriptSource.scriptLocation",
    ),
    "21 arguments": (lambda s, _: s.update(arguments=["a"] * 21), "arguments"),
    "long argument": (lambda s, _: s.update(arguments=["a" * 257]), "arguments[0]"),
    "unknown field": (lambda s, _: s.update(timeoutSeconds=30), "timeoutSeconds"),
    "version on https": (
        lambda s, _: s["scriptSource"].update(scriptLocation="https://example.com/x", s3VersionId="v"),
        "scriptSource.s3VersionId",
    ),
    "duplicate name": (lambda s, first: s.update(name=first["name"]), "name"),
}


@given(configs(), st.sampled_from(sorted(MUTATIONS)), st.data())
@settings(max_examples=300)
def test_mutated_configs_are_rejected_at_the_mutated_path(
    config: dict[str, Any], mutation: str, data: st.DataObject
) -> None:
    populated = [stage for stage in STAGES if config["stages"].get(stage)]
    if not populated:
        config["stages"]["nodeReady"] = [data.draw(scripts("ready"))]
        populated = ["nodeReady"]
    stage = data.draw(st.sampled_from(populated))
    stage_scripts = config["stages"][stage]
    if mutation == "duplicate name":
        stage_scripts.append(data.draw(scripts("placeholder")))
    index = (
        len(stage_scripts) - 1
        if mutation == "duplicate name"
        else data.draw(st.integers(0, len(stage_scripts) - 1))
    )
    mutate, relative = MUTATIONS[mutation]
    mutate(stage_scripts[index], stage_scripts[0])
    expected = f"stages.{stage}[{index}].{relative}"
    problems = find_problems(config)
    assert expected in [problem.path for problem in problems]
    with pytest.raises(InvalidLifecycleConfigError) as caught:
        NodeLifecycleActions.from_api(config)
    assert expected in [problem.path for problem in caught.value.problems]
