"""Scenario files of `lifeguard simulate`: YAML or JSON, read and checked before anything runs.

The keys are fixed (`name`, `horizon_minutes`, `scripts` or `scripts_dir`, `groups`,
`changes`, `faults`, `timings`, `replace_drained_nodes`) plus the project's own (`stack`, documented in
events/scenarios/README.md). Every value is bounded; a problem is one `ScenarioError` line naming the file
and the key (`article.yaml: groups[0].min: …`).
"""

from __future__ import annotations

import contextlib
import json
import math
import re
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, field, fields
from functools import partial
from pathlib import Path
from typing import Any, NoReturn, TypeVar

from lifeguard.bounds import clip, one_line
from lifeguard.errors import LifeguardError
from lifeguard_cli.resources import resource, shipped_file

__all__ = [
    "BUILT_IN",
    "FAULT_KINDS",
    "SCRIPTS_BUCKET",
    "Change",
    "Fault",
    "GroupSpec",
    "Scenario",
    "ScenarioError",
    "StackSettings",
    "Timings",
    "built_in_scenarios",
    "load_scenario",
]

T = TypeVar("T")
BUILT_IN = resource("events", "scenarios")
SCRIPTS_BUCKET = "sim-scripts"  # a config names a scenario's script as s3://sim-scripts/<file name>
MAX_HORIZON_MINUTES = 24 * 60
MAX_NODES = 100  # a group's static nodes
MAX_GROUPS = 20
MAX_SCRIPTS = 100
MAX_SCRIPT_BYTES = 4 * 1024 * 1024  # above PCS's 2 MiB, so a scenario can show the fetch refusing one
MAX_CHANGES = 100
MAX_FAULTS = 100
MAX_TAGS = 50
MAX_FILE_BYTES = 16 * 1024 * 1024
MAX_TOTAL_NODES = 200  # static nodes of all groups: each boot is a real process
_MIN_CYCLE_SECONDS = {"relaunch": 1.0, "capacity_retry": 1.0, "replacement_launch": 1.0}
_SCRIPT_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]{0,127}")
_GROUP_NAME = re.compile(r"[A-Za-z][A-Za-z0-9-]{2,24}")  # PCS's computeNodeGroupName
_SCENARIO_KEYS = frozenset(
    {
        "name",
        "horizon_minutes",
        "scripts",
        "scripts_dir",
        "groups",
        "changes",
        "faults",
        "timings",
        "replace_drained_nodes",
        "stack",
        "description",
    }
)


class ScenarioError(LifeguardError):
    """A scenario that cannot be run: each problem on a line of its own, `<file>: <key>: <problem>`."""

    def __init__(self, message: str, problems: list[str] | None = None) -> None:
        super().__init__(message)
        self.problems = problems or [message]


class _Stop(Exception):
    """A part of the scenario cannot be read further: its problem is noted, the other parts go on."""


@dataclass(frozen=True)
class Timings:
    """Seconds between the transitions the twin writes, after the article's cluster (one TERMINATE cycle:
    78 + 24 + 40 + 180 s, about 5.4 minutes)."""

    register: float = 78.0  # launched -> REGISTERED
    scripts_start: float = 24.0  # REGISTERED -> the lifecycle scripts start
    active: float = 25.0  # the scripts done -> ACTIVE/BOOTSTRAP_SUCCESS
    fail_to_terminated: float = 40.0  # a TERMINATE failure -> TERMINATED/BOOTSTRAP_FAILED
    relaunch: float = 180.0  # a static node terminated -> its next instance LAUNCHED
    update_to_pending: float = 30.0  # UpdateComputeNodeGroup -> PENDING_REPLACEMENT of older nodes
    pending_to_terminated: float = 120.0  # PENDING_REPLACEMENT -> TERMINATED/REPLACEMENT_REQUESTED
    # replaced -> its replacement LAUNCHED: the article's update had its new instance LAUNCHED about 295 s
    # after it and ACTIVE about 7 minutes after it (30 + 120 + 145 + 78 + 24 + 25 s), as did its revert
    replacement_launch: float = 145.0
    drained_to_unhealthy: float = 300.0  # a drained static node -> TERMINATED/UNHEALTHY_NODE
    capacity_retry: float = 65.0  # LAUNCH_FAILED -> the next attempt
    delivery: float = 5.0  # a log event written -> delivered to its subscription


@dataclass(frozen=True)
class StackSettings:
    """The stack's parameters the scenario sets, as template.yaml names them (the rest keep the stack's
    defaults; `--mode` sets DefaultMode)."""

    threshold: int | None = None
    window_minutes: int | None = None
    cooldown_minutes: int | None = None
    daily_cap: int | None = None
    dry_run: bool = False
    drain_kept_nodes: bool = False


@dataclass(frozen=True)
class GroupSpec:
    """A compute node group of static nodes: `min` instances are kept up (`max` is recorded as PCS's)."""

    name: str
    min: int
    max: int
    config: Mapping[str, Any]
    tags: Mapping[str, str] = field(default_factory=dict)


@dataclass(frozen=True)
class Change:
    """What an operator does at a minute: the group's nodeLifecycleActions become `config`."""

    at_minute: float
    group: str
    config: Mapping[str, Any]


@dataclass(frozen=True)
class Fault:
    """A fault injected from `at_minute` (until `until_minute` for the kinds that last)."""

    kind: str
    at_minute: float
    until_minute: float | None = None
    times: int = 1
    group: str | None = None
    operation: str | None = None
    status: int | None = None
    retry_after_seconds: int | None = None
    seconds: float = 0.0


# kind -> (the keys it takes besides kind and at_minute, what it does: for the README and --help)
FAULT_KINDS: dict[str, tuple[frozenset[str], str]] = {
    "insufficient_capacity": (
        frozenset({"until_minute", "group"}),
        "launches fail with LAUNCH_FAILED/INSUFFICIENT_CAPACITY until until_minute",
    ),
    "pcs_throttle": (
        frozenset({"times", "operation", "retry_after_seconds"}),
        "PCS answers ThrottlingException (with retryAfterSeconds) to the next `times` calls",
    ),
    "pcs_error": (frozenset({"times", "operation"}), "PCS answers 500 InternalServerException"),
    "pcs_conflict": (frozenset({"times", "operation"}), "PCS answers ConflictException"),
    "dynamodb_error": (frozenset({"times"}), "DynamoDB answers 500 to the next `times` requests"),
    "eventbridge_error": (frozenset({"times"}), "EventBridge answers 500 to the next `times` requests"),
    "slack_error": (
        frozenset({"times", "status", "retry_after_seconds"}),
        "the Slack webhook answers `status` (429, 500 or 503)",
    ),
    "slack_timeout": (frozenset({"times"}), "the Slack webhook does not answer in time"),
    "log_delay": (
        frozenset({"until_minute", "seconds"}),
        "log deliveries due until until_minute arrive `seconds` late",
    ),
    "log_duplicate": (frozenset({"until_minute"}), "log deliveries until until_minute arrive twice"),
    "log_reorder": (
        frozenset({"until_minute"}),
        "log deliveries due until until_minute are held, then arrive newest first",
    ),
    "remediate_dies": (
        frozenset(),
        "the first remediate invocation from at_minute that changes a group dies right after "
        "UpdateComputeNodeGroup; Lambda retries it",
    ),
}


@dataclass(frozen=True)
class Scenario:
    """A scenario, checked: every group's config and every change is still PCS's to accept or refuse."""

    name: str
    path: Path | None
    horizon_minutes: float
    scripts: Mapping[str, bytes]
    groups: tuple[GroupSpec, ...]
    changes: tuple[Change, ...] = ()
    faults: tuple[Fault, ...] = ()
    timings: Timings = field(default_factory=Timings)
    replace_drained_nodes: bool = True
    stack: StackSettings = field(default_factory=StackSettings)
    description: str = ""

    def unknown_scripts(self) -> list[str]:
        """One line for each script a configuration names in the scenario's bucket
        (`s3://sim-scripts/<file>`) that the scenario does not hold, or in another bucket (the twin's S3
        holds none but the scenario's: a configuration pasted from a real cluster names its own), or at an
        https URL (the twin's nodes reach no network: a script of the internet is not run on this machine):
        its nodes fail to fetch it, as they would on AWS, which is what a scenario may mean, and what a typo
        in a name also does."""
        said = []
        configs = [(f"groups[{n}] ({group.name})", group.config) for n, group in enumerate(self.groups)]
        configs += [(f"the change at minute {c.at_minute:g} ({c.group})", c.config) for c in self.changes]
        prefix = f"s3://{SCRIPTS_BUCKET}/"
        for where, config in configs:
            for stage, scripts in (config.get("stages") or {}).items():
                for script in scripts or []:
                    location = str((script.get("scriptSource") or {}).get("scriptLocation", ""))
                    name = location[len(prefix) :]
                    if location.startswith(prefix) and name not in self.scripts:
                        said.append(
                            f"{where}: {stage} › {script.get('name')} names {location}, which is not among "
                            "the scenario's scripts: its nodes fail to fetch it"
                        )
                    elif location.startswith("s3://") and not location.startswith(prefix):
                        said.append(
                            f"{where}: {stage} › {script.get('name')} names {location}, outside the "
                            f"scenario's bucket ({prefix}), the only one the twin's S3 holds: its nodes "
                            "fail to fetch it"
                        )
                    elif not location.startswith("s3://"):  # https: the twin's nodes reach no network
                        said.append(
                            f"{where}: {stage} › {script.get('name')} names {location}: the twin fetches "
                            f"nothing from the network, so its nodes fail to fetch it (give the script in "
                            f"scripts: and name it {prefix}<file>)"
                        )
        return said


def built_in_scenarios() -> list[Path]:
    """The scenarios that ship with Lifeguard (events/scenarios/*.yaml), by name."""
    return sorted(BUILT_IN.glob("*.yaml"))


def load_scenario(source: str | Path) -> Scenario:
    """The scenario at `source`, a path (`events/scenarios/…` the shipped copy when there is no such file
    here, as `replay` and `lint` take the README's paths) or the name of a built-in one (`article-loop`)."""
    path = shipped_file(Path(source))
    name = Path(source).name
    named = str(source) == name and name not in ("", ".", "..")  # a name, not a path to go by (`./x`)
    if not path.exists() and named and (BUILT_IN / f"{source}.yaml").exists():
        path = BUILT_IN / f"{source}.yaml"
    try:
        with path.open("rb") as file:  # read to its bound: a FIFO or a device says no size beforehand
            raw = file.read(MAX_FILE_BYTES + 1)
        if len(raw) > MAX_FILE_BYTES:
            raise ScenarioError(f"{path}: over {MAX_FILE_BYTES} bytes: not a scenario")
        text = raw.decode("utf-8-sig")
    except FileNotFoundError:
        names = ", ".join(p.stem for p in built_in_scenarios())
        raise ScenarioError(f"{source}: no such file, nor a built-in scenario ({names})") from None
    except OSError as exc:  # a directory, no permission: as the system says it
        raise ScenarioError(f"{path}: cannot read it: {exc.strerror or exc}") from None
    except UnicodeDecodeError as exc:
        where = f"{exc.reason} at byte offset {exc.start}"
        raise ScenarioError(f"{path}: not a scenario: not UTF-8 text ({where})") from None
    return parse_scenario(_parse_text(text, path), path)


def _parse_text(text: str, path: Path) -> Any:
    if path.suffix.lower() == ".json":
        try:
            return json.loads(text, object_pairs_hook=_once_each)
        except ValueError as exc:
            raise ScenarioError(f"{path}: not valid JSON: {exc}") from None
        except RecursionError:
            raise ScenarioError(f"{path}: nested too deep to be a scenario") from None
    import yaml  # type: ignore[import-untyped]  # PyYAML ships no types

    try:
        return _strict_yaml(yaml, text)
    except RecursionError:
        raise ScenarioError(f"{path}: nested too deep to be a scenario") from None
    except ValueError as exc:  # an integer of more digits than Python converts (4,300)
        raise ScenarioError(f"{path}: not valid YAML: {exc}") from None
    except yaml.YAMLError as exc:
        where = getattr(exc, "problem_mark", None)
        line = f" (line {where.line + 1})" if where is not None else ""
        said = getattr(exc, "problem", None) or getattr(exc, "reason", None) or exc
        raise ScenarioError(one_line(clip(f"{path}: not valid YAML{line}: {said}", 500))) from None


def _once_each(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    """A JSON object whose keys each come once: a second `horizon_minutes` would replace the first,
    silently."""
    found: dict[str, Any] = {}
    for key, value in pairs:
        if key in found:
            raise ValueError(f"duplicate key {clip(key, 60)!r}")
        found[key] = value
    return found


def _strict_yaml(yaml: Any, text: str) -> Any:
    """The document, read as PyYAML's SafeLoader reads it, but refused where a mapping gives a key twice
    (YAML forbids it; PyYAML keeps the last, silently). Checked on the document's nodes as written, before
    anything is built: building resolves merges (`<<`) in place, and what a merge brings is YAML's to
    override."""
    loader = yaml.SafeLoader(text)
    try:
        node = loader.get_single_node()
        if node is None:
            return None
        _each_key_once(yaml, node, set())
        return loader.construct_document(node)
    finally:
        loader.dispose()


def _each_key_once(yaml: Any, node: Any, seen: set[int]) -> None:
    if id(node) in seen:  # an alias: checked where its anchor stands
        return
    seen.add(id(node))
    if isinstance(node, yaml.MappingNode):
        keys: set[tuple[str, str]] = set()
        for key, value in node.value:
            if isinstance(key, yaml.ScalarNode) and key.tag != "tag:yaml.org,2002:merge":
                if (key.tag, key.value) in keys:
                    raise yaml.constructor.ConstructorError(
                        None, None, f"duplicate key {clip(key.value, 60)!r}", key.start_mark
                    )
                keys.add((key.tag, key.value))
            _each_key_once(yaml, key, seen)
            _each_key_once(yaml, value, seen)
    elif isinstance(node, yaml.SequenceNode):
        for item in node.value:
            _each_key_once(yaml, item, seen)


def _leading(value: int) -> str:
    """A huge integer's first digits, for a message: YAML reads `0x…` of any length, which `str` refuses
    past 4,300 digits."""
    try:
        return str(value)[:12]
    except ValueError:
        return f"{'-' if value < 0 else ''}a number of {value.bit_length():,} bits"


def parse_scenario(data: Any, path: Path | None = None) -> Scenario:
    """A scenario from its parsed document; `path` locates `scripts_dir` and names the file in errors."""
    check = _Checker(str(path) if path else "scenario")
    try:
        top = check.mapping(data, "")
    except _Stop:
        check.raise_problems()
    unknown = sorted(set(top) - _SCENARIO_KEYS)
    for key in unknown:
        check.note(key, f"unknown key (the keys: {', '.join(sorted(_SCENARIO_KEYS))})")
    name = check.part(lambda: check.text(top.get("name"), "name", limit=200), "")
    horizon = check.part(
        lambda: check.number(top.get("horizon_minutes", 60), "horizon_minutes", 1, MAX_HORIZON_MINUTES),
        float(MAX_HORIZON_MINUTES),
    )
    scripts: dict[str, bytes] = check.part(lambda: _scripts(check, top, path), {})
    groups = _groups(check, top.get("groups"))
    # A change or a fault may name a group refused for a problem of its own: that problem alone is said.
    names = {group.name for group in groups} | _names_given(top.get("groups"))
    nodes = sum(group.min for group in groups)
    if nodes > MAX_TOTAL_NODES:
        check.note("groups", f"{nodes} static nodes in all; at most {MAX_TOTAL_NODES}")
    listed_changes: list[Any] = check.part(
        partial(check.items, top.get("changes", []), "changes", MAX_CHANGES), []
    )
    changes = [
        check.part(partial(_change, check, item, f"changes[{index}]", names, horizon), None)
        for index, item in enumerate(listed_changes)
    ]
    listed_faults: list[Any] = check.part(
        partial(check.items, top.get("faults", []), "faults", MAX_FAULTS), []
    )
    faults = [
        check.part(partial(_fault, check, item, f"faults[{index}]", names, horizon), None)
        for index, item in enumerate(listed_faults)
    ]
    timings = check.part(lambda: _timings(check, top.get("timings", {})), Timings())
    drained = check.part(
        lambda: check.flag(top.get("replace_drained_nodes", True), "replace_drained_nodes"), True
    )
    stack = check.part(lambda: _stack(check, top.get("stack", {})), StackSettings())
    description = check.part(
        lambda: check.text(top.get("description", ""), "description", limit=2000, empty=True), ""
    )
    check.raise_problems()
    return Scenario(
        name=name,
        path=path,
        horizon_minutes=horizon,
        scripts=scripts,
        groups=groups,
        changes=tuple(sorted((c for c in changes if c is not None), key=lambda change: change.at_minute)),
        faults=tuple(f for f in faults if f is not None),
        timings=timings,
        replace_drained_nodes=drained,
        stack=stack,
        description=description,
    )


class _Checker:
    """Checks values, noting every problem `<file>: <key>: <problem>`; a part that cannot be read further
    stops (`_Stop`) and the others go on, then `raise_problems` raises them all at once."""

    def __init__(self, file: str) -> None:
        self.file = file
        self.problems: list[str] = []

    def note(self, where: str, problem: str) -> None:
        """A problem; the check goes on. Said on one line: a key of the file may hold a line break or a
        terminal's escape, shown as `?`."""
        self.problems.append(one_line(clip(f"{self.file}: {where or '(the document)'}: {problem}", 2000)))

    def fail(self, where: str, problem: str) -> NoReturn:
        """A problem that stops the part being read."""
        self.note(where, problem)
        raise _Stop

    def part(self, read: Callable[[], T], default: T) -> T:
        """`read()`, or `default` when it stopped on a problem."""
        try:
            return read()
        except _Stop:
            return default

    @contextlib.contextmanager
    def whole(self) -> Iterator[None]:
        """A part whose values are each checked (`part`) and every problem noted, then stopped if any was."""
        noted = len(self.problems)
        yield
        if len(self.problems) > noted:
            raise _Stop

    def raise_problems(self) -> None:
        """ScenarioError with every problem noted, if there is any."""
        if self.problems:
            count = len(self.problems)
            first = self.problems[0] if count == 1 else f"{count} problems: {self.problems[0]}"
            raise ScenarioError(first, list(self.problems))

    def mapping(self, value: Any, where: str) -> Mapping[str, Any]:
        if not isinstance(value, Mapping) or not all(isinstance(key, str) for key in value):
            self.fail(where, "must be a mapping of names to values")
        return dict(value)

    def items(self, value: Any, where: str, limit: int) -> list[Any]:
        if not isinstance(value, list):
            self.fail(where, "must be a list")
        if len(value) > limit:
            self.fail(where, f"{len(value)} entries; at most {limit}")
        return list(value)

    def text(self, value: Any, where: str, *, limit: int, empty: bool = False) -> str:
        if not isinstance(value, str) or (not value.strip() and not empty):
            self.fail(where, "must be a non-empty string" if not empty else "must be a string")
        if len(value) > limit:
            self.fail(where, f"{len(value)} characters; at most {limit}")
        return str(value)

    def number(self, value: Any, where: str, low: float, high: float) -> float:
        if isinstance(value, int) and not isinstance(value, bool) and abs(value) > 10**12:
            self.fail(where, f"{_leading(value)}… is out of range: from {low:g} to {high:g}")
        if isinstance(value, bool) or not isinstance(value, int | float) or not math.isfinite(value):
            self.fail(where, f"must be a number from {low:g} to {high:g}")
        if not low <= value <= high:
            self.fail(where, f"{value:g} is out of range: from {low:g} to {high:g}")
        return float(value)

    def integer(self, value: Any, where: str, low: int, high: int) -> int:
        if isinstance(value, bool) or not isinstance(value, int):
            self.fail(where, f"must be an integer from {low} to {high}")
        if abs(value) > 10**12:
            self.fail(where, f"{_leading(value)}… is out of range: from {low} to {high}")
        if not low <= value <= high:
            self.fail(where, f"{value} is out of range: from {low} to {high}")
        return int(value)

    def flag(self, value: Any, where: str) -> bool:
        if not isinstance(value, bool):
            self.fail(where, "must be true or false")
        return bool(value)


def _scripts(check: _Checker, top: Mapping[str, Any], path: Path | None) -> dict[str, bytes]:
    if "scripts" in top and "scripts_dir" in top:
        check.fail("scripts_dir", "give either scripts or scripts_dir, not both")
    found: dict[str, bytes] = {}
    if "scripts_dir" in top:
        relative = check.text(top["scripts_dir"], "scripts_dir", limit=1024)
        directory = ((path.parent if path else Path.cwd()) / relative).resolve()
        if not directory.is_dir():
            check.fail("scripts_dir", f"{directory} is not a directory")
        try:
            files = sorted(p for p in directory.iterdir() if p.is_file())
            if len(files) > MAX_SCRIPTS:
                check.fail("scripts_dir", f"{len(files)} files; at most {MAX_SCRIPTS}")
            for file in files:
                if file.stat().st_size > MAX_SCRIPT_BYTES:
                    check.fail(f"scripts_dir/{file.name}", f"over {MAX_SCRIPT_BYTES} bytes")
                found[file.name] = file.read_bytes()
        except OSError as exc:
            check.fail("scripts_dir", f"cannot read {directory}: {exc.strerror or exc}")
    else:
        scripts = check.mapping(top.get("scripts", {}), "scripts")
        if len(scripts) > MAX_SCRIPTS:
            check.fail("scripts", f"{len(scripts)} scripts; at most {MAX_SCRIPTS}")
        for name, content in scripts.items():
            text = check.text(content, f"scripts.{name}", limit=MAX_SCRIPT_BYTES, empty=True)
            try:
                found[name] = text.encode()
            except UnicodeEncodeError:
                check.fail(f"scripts.{name}", "not text that UTF-8 can hold (a lone surrogate?)")
            if len(found[name]) > MAX_SCRIPT_BYTES:
                check.fail(f"scripts.{name}", f"over {MAX_SCRIPT_BYTES} bytes")
    for name in found:
        if not _SCRIPT_NAME.fullmatch(name):
            check.fail(f"scripts.{name}", "a script's file name is letters, digits, '.', '_' and '-'")
    return found


def _names_given(value: Any) -> set[str]:
    """The names the scenario's groups are given, each group read or not."""
    listed = value if isinstance(value, list) else []
    return {item["name"] for item in listed if isinstance(item, dict) and isinstance(item.get("name"), str)}


def _groups(check: _Checker, value: Any) -> tuple[GroupSpec, ...]:
    if value is None:
        check.note("groups", "at least one group")
        return ()
    items: list[Any] = check.part(partial(check.items, value, "groups", MAX_GROUPS), [])
    if isinstance(value, list) and not value:
        check.note("groups", "at least one group")
    groups: list[GroupSpec] = []
    for index, item in enumerate(items):
        found = check.part(partial(_group, check, item, f"groups[{index}]", groups), None)
        if found is not None:
            groups.append(found)
    return tuple(groups)


def _group(check: _Checker, item: Any, where: str, groups: list[GroupSpec]) -> GroupSpec:
    """One group; `groups` are the ones read before it (a name is used once)."""
    group = check.mapping(item, where)
    noted = len(check.problems)
    for key in sorted(set(group) - {"name", "min", "max", "tags", "config"}):  # every one, at once
        check.note(f"{where}.{key}", "unknown key (name, min, max, tags, config)")
    # Each part read on its own: every problem of the group is said at once.
    name = check.part(partial(_group_name, check, group.get("name"), f"{where}.name", groups), "")
    low = check.part(partial(check.integer, group.get("min", 1), f"{where}.min", 0, MAX_NODES), 1)
    least = max(low, 1)  # PCS's maxInstanceCount is at least 1, a group of no static nodes too
    high = check.part(
        partial(check.integer, group.get("max", least), f"{where}.max", least, MAX_NODES), least
    )
    no_tags: Mapping[str, Any] = {}
    tags = check.part(partial(_tags, check, group.get("tags", {}), f"{where}.tags"), no_tags)
    config = check.part(partial(_config, check, group.get("config"), f"{where}.config"), dict(no_tags))
    if len(check.problems) > noted:
        raise _Stop
    return GroupSpec(name, low, high, dict(config), dict(tags))


def _group_name(check: _Checker, value: Any, where: str, groups: list[GroupSpec]) -> str:
    name = check.text(value, where, limit=25)
    if not _GROUP_NAME.fullmatch(name):
        check.fail(where, f"{name!r} is not a PCS compute node group name")
    if any(other.name == name for other in groups):
        check.fail(where, f"{name!r} is named twice")
    return name


def _tags(check: _Checker, value: Any, where: str) -> Mapping[str, Any]:
    tags = check.mapping(value, where)
    if len(tags) > MAX_TAGS:
        check.fail(where, f"{len(tags)} tags; at most {MAX_TAGS}, as PCS allows")
    for key, tag in tags.items():  # every bad tag said at once, not the first alone
        check.part(partial(check.text, key, where, limit=128), "")
        check.part(partial(check.text, tag, f"{where}.{key}", limit=256, empty=True), "")
    return tags


def _config(check: _Checker, value: Any, where: str) -> dict[str, Any]:
    """nodeLifecycleActions checked as PCS checks them, before anything runs (PCS checks them again)."""
    from lifeguard.lifecycle_rules import find_problems

    config = dict(check.mapping(value, where))
    problems = find_problems(config)
    for problem in problems:
        check.note(f"{where}.{problem.path}" if problem.path else where, problem.message)
    if problems:
        raise _Stop
    return config


def _change(check: _Checker, item: Any, where: str, names: set[str], horizon: float) -> Change:
    """A change, every problem of its keys noted before it stops (as a fault's)."""
    change = check.mapping(item, where)

    def group() -> str:
        named = check.text(change.get("group"), f"{where}.group", limit=25)
        if named not in names:
            check.fail(f"{where}.group", f"{named!r} is not a group of the scenario")
        return named

    with check.whole():
        for key in sorted(set(change) - {"at_minute", "group", "config"}):
            check.note(f"{where}.{key}", "unknown key (at_minute, group, config)")
        at = check.part(partial(check.number, change.get("at_minute"), f"{where}.at_minute", 0, horizon), 0.0)
        named = check.part(group, "")
        none: dict[str, Any] = {}
        config = check.part(partial(_config, check, change.get("config"), f"{where}.config"), none)
        return Change(at_minute=at, group=named, config=config)


def _fault(check: _Checker, item: Any, where: str, names: set[str], horizon: float) -> Fault:
    """A fault, every problem of its keys noted before it stops (its kind first: it says which keys it
    takes)."""
    fault = check.mapping(item, where)
    kind = check.text(fault.get("kind"), f"{where}.kind", limit=64)
    if kind not in FAULT_KINDS:
        check.fail(f"{where}.kind", f"{kind!r} is not one of {', '.join(FAULT_KINDS)}")
    allowed = FAULT_KINDS[kind][0] | {"kind", "at_minute"}

    def group() -> str | None:
        named = fault.get("group")
        if named is not None and check.text(named, f"{where}.group", limit=25) not in names:
            check.fail(f"{where}.group", f"{named!r} is not a group of the scenario")
        return named

    def status() -> int | None:
        given = fault.get("status")
        if given is not None and (type(given) is not int or given not in (429, 500, 503)):
            check.fail(f"{where}.status", "must be 429, 500 or 503")
        return given

    def operation() -> str | None:
        given = fault.get("operation")
        if given is not None:
            from lifeguard.pcs_model import service_model

            known = service_model()["operations"]
            if check.text(given, f"{where}.operation", limit=64) not in known:
                check.fail(f"{where}.operation", f"{given!r} is not an operation of the PCS API")
        return given

    def optional(key: str, read: Callable[[Any], T]) -> T | None:
        given = fault.get(key)
        return None if given is None else read(given)

    with check.whole():
        for key in sorted(set(fault) - allowed):
            check.note(f"{where}.{key}", f"not a key of a {kind} fault ({', '.join(sorted(allowed))})")
        at = check.part(partial(check.number, fault.get("at_minute"), f"{where}.at_minute", 0, horizon), 0.0)
        ends = f"{where}.until_minute"
        until = check.part(
            partial(optional, "until_minute", lambda v: check.number(v, ends, at, horizon)),
            None,
        )
        times = check.part(partial(check.integer, fault.get("times", 1), f"{where}.times", 1, 100), 1)
        retry_after = check.part(
            partial(
                optional,
                "retry_after_seconds",
                lambda v: check.integer(v, f"{where}.retry_after_seconds", 0, 600),
            ),
            None,
        )
        seconds = check.part(partial(check.number, fault.get("seconds", 0), f"{where}.seconds", 0, 3600), 0.0)
        return Fault(
            kind=kind,
            at_minute=at,
            until_minute=until,
            times=times,
            group=check.part(group, None),
            operation=check.part(operation, None),
            status=check.part(status, None),
            retry_after_seconds=retry_after,
            seconds=seconds,
        )


def _timings(check: _Checker, value: Any) -> Timings:
    given = check.mapping(value, "timings")
    known = {f.name for f in fields(Timings)}
    read: dict[str, float] = {}
    with check.whole():
        for key in sorted(set(given) - known):
            check.note(f"timings.{key}", f"unknown timing (the timings: {', '.join(sorted(known))})")
        for key, raw in given.items():
            if key in known:
                low = _MIN_CYCLE_SECONDS.get(key, 0.0)
                number = check.part(partial(check.number, raw, f"timings.{key}", low, 3600), None)
                if number is not None:
                    read[key] = number
    return Timings(**read)


_STACK_KEYS = {
    "Threshold": "threshold",
    "WindowMinutes": "window_minutes",
    "CooldownMinutes": "cooldown_minutes",
    "DailyCap": "daily_cap",
    "DryRun": "dry_run",
    "DrainKeptNodes": "drain_kept_nodes",
}


def _stack(check: _Checker, value: Any) -> StackSettings:
    """The stack's parameters a scenario sets, each checked as template.yaml takes it; every problem of the
    part is noted before it stops."""
    given = check.mapping(value, "stack")
    settings: dict[str, Any] = {}
    with check.whole():
        for key in sorted(set(given) - set(_STACK_KEYS)):
            check.note(f"stack.{key}", f"not a stack parameter a scenario sets ({', '.join(_STACK_KEYS)})")
        for key, raw in given.items():
            if key in _STACK_KEYS:
                read: bool | int | None = check.part(partial(_stack_value, check, key, raw), None)
                if read is not None:
                    settings[_STACK_KEYS[key]] = read
    return StackSettings(**settings)


def _stack_value(check: _Checker, key: str, raw: Any) -> bool | int:
    where = f"stack.{key}"
    if key in ("DryRun", "DrainKeptNodes"):
        return check.flag(raw, where)
    if key in ("Threshold", "DailyCap"):
        return check.integer(raw, where, 1, 100)
    if key == "WindowMinutes":
        return check.integer(raw, where, 1, 7 * 24 * 60)  # as template.yaml
    return check.integer(raw, where, 0, 7 * 24 * 60)  # CooldownMinutes: whole minutes, as template.yaml
