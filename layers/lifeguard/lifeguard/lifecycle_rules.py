"""The rules a `nodeLifecycleActions` config must follow, from one source.

PCS's service model (through `lifeguard.pcs_model`) gives the shapes and their constraints; the few rules
PCS documents beyond the model are here. The Lambdas' record classes (`lifeguard.lifecycle`), the node's
executor and the local PCS endpoint all check configs with `find_problems`.

Standard library only, and Python 3.9 compatible: the node bundle runs it on the node's own Python.
"""

from __future__ import annotations

from collections.abc import Callable, Collection, Iterator, Mapping
from typing import Any

from lifeguard.errors import Problem
from lifeguard.pcs_model import LEFT_OUT, join_path, shape, validate_shape

__all__ = [
    "DEFAULT_EXECUTION_POLICY",
    "DEFAULT_ON_ERROR",
    "DEFAULT_SCRIPT_CACHING_POLICY",
    "DRAIN_SCRIPT_NAME",
    "EXECUTION_POLICIES",
    "ON_ERRORS",
    "SCRIPT_CACHING_POLICIES",
    "STAGES",
    "drains_kept_nodes",
    "find_problems",
    "hides_failures",
    "holds_quarantine",
    "holds_script",
    "ready_checks",
    "ready_checks_run",
    "scripts_of",
    "stopping_scripts",
    "terminating_scripts",
]

REQUEST_SHAPE = "NodeLifecycleActionsRequest"

STAGES: tuple[str, ...] = tuple(shape("NodeLifecycleStages")["members"])
ON_ERRORS: tuple[str, ...] = tuple(shape("OnError")["enum"])
EXECUTION_POLICIES: tuple[str, ...] = tuple(shape("ExecutionPolicy")["enum"])
SCRIPT_CACHING_POLICIES: tuple[str, ...] = tuple(shape("ScriptCachingPolicy")["enum"])

# What PCS does when a field is omitted (`LEFT_OUT`).
DEFAULT_ON_ERROR = LEFT_OUT["onError"]
# The step a quarantine adds (with draining on) to drain the node it keeps: a script of Lifeguard's own.
DRAIN_SCRIPT_NAME = "lifeguard-drain"
DEFAULT_EXECUTION_POLICY = LEFT_OUT["executionPolicy"]
DEFAULT_SCRIPT_CACHING_POLICY = LEFT_OUT["scriptCachingPolicy"]


def find_problems(config: object, path: str = "") -> list[Problem]:
    """Every problem of a `nodeLifecycleActions` value, each with its JSON path (prefixed by `path`).

    An empty list means PCS accepts the config.
    """
    problems = validate_shape(REQUEST_SHAPE, config, path)
    stages = config.get("stages") if isinstance(config, Mapping) else None
    if isinstance(stages, Mapping):
        for stage in STAGES:
            scripts = stages.get(stage)
            if isinstance(scripts, list):
                problems.extend(_stage_problems(scripts, join_path(join_path(path, "stages"), stage)))
    return problems


def _stage_problems(scripts: list[Any], path: str) -> list[Problem]:
    problems: list[Problem] = []
    first_use: dict[str, int] = {}
    for index, script in enumerate(scripts):
        if not isinstance(script, Mapping):
            continue
        here = f"{path}[{index}]"
        name = script.get("name")
        if isinstance(name, str):
            if name in first_use:
                problems.append(
                    Problem(
                        f"{here}.name",
                        f"{name!r} is already the name of {path}[{first_use[name]}]; "
                        "script names must be unique within a stage",
                    )
                )
            else:
                first_use[name] = index
        source = script.get("scriptSource")
        if isinstance(source, Mapping) and "s3VersionId" in source:
            location = source.get("scriptLocation")
            if isinstance(location, str) and not location.startswith("s3://"):
                problems.append(
                    Problem(
                        f"{here}.scriptSource.s3VersionId",
                        "is only allowed with an s3:// scriptLocation",
                    )
                )
    return problems


def drains_kept_nodes(actions: Mapping[str, Any] | None) -> bool:
    """Whether a configuration holds Lifeguard's drain step (so the nodes it keeps are drained)."""
    stages = (actions or {}).get("stages")
    if not isinstance(stages, Mapping):
        return False
    return any(
        isinstance(script, Mapping) and script.get("name") == DRAIN_SCRIPT_NAME
        for scripts in stages.values()
        if isinstance(scripts, list)
        for script in scripts
    )


def holds_script(actions: Mapping[str, Any] | None, stage: str, name: str) -> bool:
    """Whether a configuration runs the script `name` in `stage`."""
    stages = (actions or {}).get("stages")
    scripts = stages.get(stage) if isinstance(stages, Mapping) else None
    if not isinstance(scripts, list):
        return False
    return any(isinstance(script, Mapping) and script.get("name") == name for script in scripts)


def stopping_scripts(actions: Mapping[str, Any] | None) -> set[tuple[str, str]]:
    """(stage, name) of every script of a configuration whose onError is STOP_SEQUENCE."""
    return {
        (stage, script["name"])
        for stage, script in _named_scripts(actions)
        if script.get("onError", DEFAULT_ON_ERROR) == "STOP_SEQUENCE"
    }


def on_errors(actions: Mapping[str, Any] | None) -> dict[tuple[str, str], str]:
    """The onError of every script of a configuration by (stage, name), PCS's default where none is given."""
    return {
        (stage, script["name"]): script.get("onError", DEFAULT_ON_ERROR)
        for stage, script in _named_scripts(actions)
    }


def scripts_of(actions: Mapping[str, Any] | None) -> set[tuple[str, str]]:
    """(stage, name) of every script of a configuration."""
    return {(stage, script["name"]) for stage, script in _named_scripts(actions)}


def hides_failures(actions: Mapping[str, Any] | None) -> bool:
    """Whether a node's BOOTSTRAP_SUCCESS on the configuration may hide a failed script (PCS logs a
    STOP_SEQUENCE failure as a success: such a success alone proves nothing): one of its scripts is under
    STOP_SEQUENCE, whoever put it there, or Lifeguard's drain step is in it."""
    return drains_kept_nodes(actions) or bool(stopping_scripts(actions))


def terminating_scripts(actions: Mapping[str, Any] | None) -> set[tuple[str, str]]:
    """(stage, name) of every script of a configuration whose failure gets the node terminated: onError
    TERMINATE, or none given (PCS's default)."""
    return {
        (stage, script["name"])
        for stage, script in _named_scripts(actions)
        if script.get("onError") in (None, DEFAULT_ON_ERROR)
    }


def ready_checks(actions: Mapping[str, Any] | None) -> set[tuple[str, str]]:
    """(stage, name) of every nodeReady script of a configuration whose failure gets the node terminated:
    PCS logs a node ACTIVE before nodeReady runs, so such a script's failure ends a node that was ACTIVE."""
    return {(stage, name) for stage, name in terminating_scripts(actions) if stage == "nodeReady"}


def ready_checks_run(actions: Mapping[str, Any] | None, stopped: Collection[str]) -> set[tuple[str, str]]:
    """The `ready_checks` a boot runs whose nodeReady scripts `stopped` (names) failed under STOP_SEQUENCE:
    PCS skips the rest of a stage after such a failure (the article), so a check after the first of them
    does not run, and ends no node."""
    checks = set()
    for stage, script in _named_scripts(actions):
        if stage != "nodeReady":
            continue
        if script["name"] in stopped:
            break
        if script.get("onError") in (None, DEFAULT_ON_ERROR):
            checks.add((stage, script["name"]))
    return checks


def _named_scripts(actions: Mapping[str, Any] | None) -> Iterator[tuple[str, Mapping[str, Any]]]:
    """(stage, script) of each script of a configuration that has a name (a value read from PCS or a
    stored state, so nothing of its shape is taken for granted)."""
    stages = (actions or {}).get("stages")
    if not isinstance(stages, Mapping):
        return
    for stage, scripts in stages.items():
        if isinstance(scripts, list):
            for script in scripts:
                if isinstance(script, Mapping) and isinstance(script.get("name"), str):
                    yield stage, script


def holds_quarantine(
    actions: Mapping[str, Any] | None, quarantined: Callable[[], set[tuple[str, str]]]
) -> bool:
    """Whether a configuration still holds a quarantine of Lifeguard's: Lifeguard's drain step, or one of
    the `quarantined()` scripts (stage, name) under STOP_SEQUENCE. `quarantined` (a read of Lifeguard's
    ledger) is asked only when the configuration has a script under STOP_SEQUENCE: most have none."""
    if drains_kept_nodes(actions):
        return True
    stopping = stopping_scripts(actions)
    return bool(stopping) and bool(stopping & quarantined())
