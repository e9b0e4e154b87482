"""`nodeLifecycleActions` exactly as the PCS API shapes it: record classes, fingerprint and diff.

Parsing checks every rule of `lifeguard.lifecycle_rules` and reports all problems at once. Omitted fields
stay omitted: `to_api()` gives back exactly what was given, while `effective_*` properties say what PCS
does by default.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Iterator, Mapping, Sequence
from typing import Any, Final, Literal, get_args

from lifeguard.errors import InvalidLifecycleConfigError
from lifeguard.lifecycle_rules import (
    DEFAULT_EXECUTION_POLICY,
    DEFAULT_ON_ERROR,
    DEFAULT_SCRIPT_CACHING_POLICY,
    find_problems,
)
from lifeguard.pcs_model import left_out_shown
from lifeguard.schema import (
    BAD,
    Invalid,
    Loc,
    Model,
    Problem,
    Schema,
    checked,
    list_of,
    literal,
    model,
    optional,
    slot_setters,
    string,
)
from lifeguard.values import frozen

__all__ = [
    "ConfigChange",
    "ExecutionPolicy",
    "LifecycleScript",
    "LifecycleStages",
    "NodeLifecycleActions",
    "OnError",
    "ScriptCachingPolicy",
    "ScriptSource",
    "StageName",
    "canonical_json",
    "diff_api_configs",
    "diff_configs",
    "fingerprint_of",
    "fingerprint_of_json",
    "render_diff",
]

# Static types for PCS's enums; tests pin them to the service model's enums.
OnError = Literal["TERMINATE", "STOP_SEQUENCE", "CONTINUE"]
ExecutionPolicy = Literal["FIRST_BOOT_ONLY", "EVERY_BOOT"]
ScriptCachingPolicy = Literal["CACHE_ONCE", "REFRESH_ON_REBOOT"]
StageName = Literal["nodeBootstrapped", "nodeReady"]
STAGE_NAMES: tuple[StageName, ...] = get_args(StageName)

# The record classes below dump only what is not None, and that is exactly what was given: PCS's rules
# (`find_problems`) refuse an explicit `null` for every field, so a None is always a field left out.


@checked(
    script_location=string(),
    s3_version_id=optional(string()),
    checksum=optional(string()),
    keys={"script_location": "scriptLocation", "s3_version_id": "s3VersionId"},
    forbid_extra=True,
)
@frozen(slots=True, kw_only=True)
class ScriptSource(Model):
    """Where a script is fetched from, and how its content is pinned."""

    script_location: str
    s3_version_id: str | None = None
    checksum: str | None = None

    @property
    def is_s3(self) -> bool:
        """True for an `s3://` location."""
        return self.script_location.startswith("s3://")

    @property
    def is_pinned(self) -> bool:
        """True when the content cannot change under the same config (a checksum or an S3 version). The
        version `null` is no pin: it is the one version of an object in a bucket without versioning (or with
        it suspended), which every upload replaces."""
        return self.checksum is not None or (bool(self.s3_version_id) and self.s3_version_id != "null")


@checked(
    name=string(),
    script_source=model(ScriptSource),
    arguments=optional(list_of(string(), as_tuple=True)),
    on_error=optional(literal(*get_args(OnError))),
    execution_policy=optional(literal(*get_args(ExecutionPolicy))),
    keys={"script_source": "scriptSource", "on_error": "onError", "execution_policy": "executionPolicy"},
    forbid_extra=True,
)
@frozen(slots=True, kw_only=True)
class LifecycleScript(Model):
    """One script of a stage."""

    name: str
    script_source: ScriptSource
    arguments: tuple[str, ...] | None = None
    on_error: OnError | None = None
    execution_policy: ExecutionPolicy | None = None

    @property
    def effective_on_error(self) -> OnError:
        """`onError` as PCS applies it: TERMINATE when omitted."""
        return self.on_error or DEFAULT_ON_ERROR  # type: ignore[return-value]

    @property
    def effective_execution_policy(self) -> ExecutionPolicy:
        """`executionPolicy` as PCS applies it: FIRST_BOOT_ONLY when omitted."""
        return self.execution_policy or DEFAULT_EXECUTION_POLICY  # type: ignore[return-value]

    @property
    def effective_arguments(self) -> tuple[str, ...]:
        """The positional parameters the script receives."""
        return self.arguments or ()

    def to_api(self) -> dict[str, Any]:
        """The script exactly as the PCS API takes it."""
        return self.model_dump(mode="json", exclude_none=True)


_SCRIPTS = optional(list_of(model(LifecycleScript), as_tuple=True))


@checked(
    node_bootstrapped=_SCRIPTS,
    node_ready=_SCRIPTS,
    keys={"node_bootstrapped": "nodeBootstrapped", "node_ready": "nodeReady"},
    forbid_extra=True,
)
@frozen(slots=True, kw_only=True)
class LifecycleStages(Model):
    """The scripts of each stage, in the order PCS runs them."""

    node_bootstrapped: tuple[LifecycleScript, ...] | None = None
    node_ready: tuple[LifecycleScript, ...] | None = None

    def scripts_of(self, stage: StageName) -> tuple[LifecycleScript, ...]:
        """The scripts of one stage (empty when the stage is omitted)."""
        scripts = self.node_bootstrapped if stage == "nodeBootstrapped" else self.node_ready
        return scripts or ()


@checked(
    stages=model(LifecycleStages),
    script_caching_policy=optional(literal(*get_args(ScriptCachingPolicy))),
    keys={"script_caching_policy": "scriptCachingPolicy"},
    forbid_extra=True,
)
@frozen(slots=True, kw_only=True)
class NodeLifecycleActions(Model):
    """A compute node group's `nodeLifecycleActions`."""

    stages: LifecycleStages
    script_caching_policy: ScriptCachingPolicy | None = None

    @classmethod
    def model_validate(cls, data: object) -> NodeLifecycleActions:
        """A config from `data`, held to PCS's rules too; raises `Invalid` with one `value_error` that
        lists every problem (an instance is taken as it is)."""
        if isinstance(data, NodeLifecycleActions):
            return data
        problems: list[Problem] = []
        parsed = _ruled(data, (), problems)
        if parsed is None:
            raise Invalid(problems)
        return parsed

    @classmethod
    def from_api(cls, data: object, *, path: str = "") -> NodeLifecycleActions:
        """Parse a config as the PCS API takes it.

        Raises `InvalidLifecycleConfigError` with every problem, paths prefixed by `path`.
        """
        problems = find_problems(data, path)
        if problems:
            raise InvalidLifecycleConfigError(problems)
        return _actions(data)

    def to_api(self) -> dict[str, Any]:
        """The config exactly as the PCS API takes it: what was omitted stays omitted."""
        return self.model_dump(mode="json", exclude_none=True)

    def canonical_json(self) -> str:
        """The API shape as canonical JSON: sorted keys, no whitespace, UTF-8."""
        return canonical_json(self.to_api())

    def fingerprint(self) -> str:
        """sha256 of the canonical JSON; equal configs have equal fingerprints."""
        return fingerprint_of(self.to_api())

    def effective_fingerprint(self) -> str:
        """The fingerprint of what PCS runs: every default written out (scriptCachingPolicy, each script's
        onError, executionPolicy and arguments), so a configuration that only spells out a default, or
        leaves one out, is the same configuration."""
        api = self.to_api()
        api["scriptCachingPolicy"] = self.effective_script_caching_policy
        for stage, index, script in self.scripts():
            entry = api["stages"][stage][index]
            entry["onError"] = script.effective_on_error
            entry["executionPolicy"] = script.effective_execution_policy
            entry["arguments"] = list(script.effective_arguments)
        return fingerprint_of(api)

    @property
    def effective_script_caching_policy(self) -> ScriptCachingPolicy:
        """`scriptCachingPolicy` as PCS applies it: CACHE_ONCE when omitted."""
        return self.script_caching_policy or DEFAULT_SCRIPT_CACHING_POLICY  # type: ignore[return-value]

    def scripts(self) -> Iterator[tuple[StageName, int, LifecycleScript]]:
        """Every script with its stage and index, in the order PCS runs them."""
        for stage in STAGE_NAMES:
            for index, script in enumerate(self.stages.scripts_of(stage)):
                yield stage, index, script

    def find_script(self, stage: StageName, name: str) -> tuple[int, LifecycleScript] | None:
        """The index and script named `name` in `stage`, or None."""
        for index, script in enumerate(self.stages.scripts_of(stage)):
            if script.name == name:
                return index, script
        return None


def _ruled(data: object, loc: Loc, problems: list[Problem]) -> NodeLifecycleActions | None:
    """A config from `data` when it passes PCS's rules, else None after adding one problem at `loc` that
    lists them all: a `value_error`, as pydantic reports an exception of a validator."""
    found = find_problems(data)
    if found:
        problems.append(Problem(loc, "value_error", f"Value error, {InvalidLifecycleConfigError(found)}"))
        return None
    return _actions(data)


class _RuledSchema(Schema):
    """`NodeLifecycleActions` as a field of another record is held to PCS's rules as well."""

    def build(self, data: Mapping[str, Any], loc: Loc, problems: list[Problem]) -> Any:
        parsed = _ruled(data, loc, problems)
        return BAD if parsed is None else parsed


NodeLifecycleActions.__schema__ = _RuledSchema(
    NodeLifecycleActions, NodeLifecycleActions.__schema__.fields, forbid_extra=True
)


# The objects of a config that passed `find_problems`, built as they are: every type, key and bound is
# checked by then, so a second pass through the field checks would only cost each parse its time. Their
# slots are filled directly (a frozen dataclass's `__init__` sets each field through
# `object.__setattr__`, and that is most of the cost of a parse once the rules have run); `slot_setters`
# refuses to load when a class's fields are not the ones its builder fills, so none is left unset.
_new = object.__new__


_SOURCE_SLOTS = slot_setters(ScriptSource, "script_location", "s3_version_id", "checksum")
_SCRIPT_SLOTS = slot_setters(
    LifecycleScript, "name", "script_source", "arguments", "on_error", "execution_policy"
)
_STAGES_SLOTS = slot_setters(LifecycleStages, "node_bootstrapped", "node_ready")
_ACTIONS_SLOTS = slot_setters(NodeLifecycleActions, "stages", "script_caching_policy")


def _actions(config: Any) -> NodeLifecycleActions:
    set_stages, set_policy = _ACTIONS_SLOTS
    set_bootstrapped, set_ready = _STAGES_SLOTS
    raw = config["stages"]
    bootstrapped, ready = raw.get("nodeBootstrapped"), raw.get("nodeReady")
    stages = _new(LifecycleStages)
    set_bootstrapped(stages, None if bootstrapped is None else tuple(map(_script, bootstrapped)))
    set_ready(stages, None if ready is None else tuple(map(_script, ready)))
    actions = _new(NodeLifecycleActions)
    set_stages(actions, stages)
    set_policy(actions, config.get("scriptCachingPolicy"))
    return actions


def _script(raw: Any) -> LifecycleScript:
    set_location, set_version, set_checksum = _SOURCE_SLOTS
    set_name, set_source, set_arguments, set_on_error, set_policy = _SCRIPT_SLOTS
    raw_source, arguments = raw["scriptSource"], raw.get("arguments")
    source = _new(ScriptSource)
    set_location(source, raw_source["scriptLocation"])
    set_version(source, raw_source.get("s3VersionId"))
    set_checksum(source, raw_source.get("checksum"))
    script = _new(LifecycleScript)
    set_name(script, raw["name"])
    set_source(script, source)
    set_arguments(script, None if arguments is None else tuple(arguments))
    set_on_error(script, raw.get("onError"))
    set_policy(script, raw.get("executionPolicy"))
    return script


# `json.dumps` with options makes an encoder for every call (half the time of a configuration's text).
_CANONICAL: Final = json.JSONEncoder(sort_keys=True, separators=(",", ":"), ensure_ascii=False)


def canonical_json(api_value: object) -> str:
    """Canonical JSON of an API value: sorted keys, no whitespace, UTF-8."""
    return _CANONICAL.encode(api_value)


def fingerprint_of(api_value: object) -> str:
    """sha256 of an API value's canonical JSON (a group without lifecycle actions has the one of `null`)."""
    return fingerprint_of_json(canonical_json(api_value))


def fingerprint_of_json(text: str) -> str:
    """`fingerprint_of` the value whose `canonical_json` is `text`."""
    return hashlib.sha256(text.encode()).hexdigest()


@frozen
class ConfigChange:
    """One difference between two configs.

    `path` is the JSON path in the new config (in the old one for a removed script); `old`/`new` are API
    values, None where absent. `stage`, `script` and `field` say the same in domain words.
    """

    path: str
    old: Any
    new: Any
    stage: StageName | None = None
    script: str | None = None
    field: str | None = None

    def to_detail(self) -> dict[str, Any]:
        """The change as the `diff` entries of controller events take it."""
        return {"path": self.path, "old": self.old, "new": self.new}

    def describe(self) -> str:
        """One line for a person, e.g. `nodeBootstrapped › fail-terminate: onError TERMINATE (default) →
        STOP_SEQUENCE`."""
        where = f"{self.stage} › {self.script}" if self.script else (self.stage or "config")
        if self.field is None and self.script is not None:
            if self.old is None:
                return f"{where}: added ({_script_summary(self.new)})"
            if self.new is None:
                return f"{where}: removed ({_script_summary(self.old)})"
        if self.field == "order":
            return f"{where}: order {' → '.join(self.old)} became {' → '.join(self.new)}"
        field = self.field or self.path
        return f"{where}: {field} {_show(field, self.old)} → {_show(field, self.new)}"


_SCRIPT_FIELDS = (
    "scriptSource.scriptLocation",
    "scriptSource.s3VersionId",
    "scriptSource.checksum",
    "arguments",
    "onError",
    "executionPolicy",
)


def _show(field: str, value: Any) -> str:
    if value is None:
        return left_out_shown(field)
    return value if isinstance(value, str) else json.dumps(value)


def _script_summary(script: Mapping[str, Any]) -> str:
    on_error = script.get("onError") or f"{DEFAULT_ON_ERROR} (default)"
    return f"{script['scriptSource']['scriptLocation']}, onError {on_error}"


def _field_value(script: Mapping[str, Any], field: str) -> Any:
    value: Any = script
    for part in field.split("."):
        value = value.get(part) if isinstance(value, Mapping) else None
    return value


def diff_configs(old: NodeLifecycleActions | None, new: NodeLifecycleActions | None) -> list[ConfigChange]:
    """What changed from `old` to `new`, script by script (scripts are matched by name within a stage)."""
    old_api = old.to_api() if old else {"stages": {}}
    new_api = new.to_api() if new else {"stages": {}}
    changes: list[ConfigChange] = []
    old_policy, new_policy = old_api.get("scriptCachingPolicy"), new_api.get("scriptCachingPolicy")
    if old_policy != new_policy:
        changes.append(
            ConfigChange("scriptCachingPolicy", old_policy, new_policy, field="scriptCachingPolicy")
        )
    for stage in STAGE_NAMES:
        changes.extend(
            _diff_stage(stage, old_api["stages"].get(stage) or [], new_api["stages"].get(stage) or [])
        )
    return changes


def diff_api_configs(old: Mapping[str, Any] | None, new: Mapping[str, Any] | None) -> list[ConfigChange]:
    """`diff_configs` of two configurations as the PCS API gives them (None or empty: no actions)."""
    return diff_configs(
        NodeLifecycleActions.from_api(old) if old else None,
        NodeLifecycleActions.from_api(new) if new else None,
    )


def _diff_stage(
    stage: StageName, old_scripts: Sequence[Mapping[str, Any]], new_scripts: Sequence[Mapping[str, Any]]
) -> list[ConfigChange]:
    base = f"stages.{stage}"
    old_by_name = {script["name"]: (index, script) for index, script in enumerate(old_scripts)}
    new_by_name = {script["name"]: (index, script) for index, script in enumerate(new_scripts)}
    changes = [
        ConfigChange(f"{base}[{index}]", script, None, stage, name)
        for name, (index, script) in old_by_name.items()
        if name not in new_by_name
    ]
    for name, (index, script) in new_by_name.items():
        if name not in old_by_name:
            changes.append(ConfigChange(f"{base}[{index}]", None, script, stage, name))
            continue
        previous = old_by_name[name][1]
        for field in _SCRIPT_FIELDS:
            before, after = _field_value(previous, field), _field_value(script, field)
            if before != after:
                changes.append(ConfigChange(f"{base}[{index}].{field}", before, after, stage, name, field))
    kept_old = [name for name in old_by_name if name in new_by_name]
    kept_new = [name for name in new_by_name if name in old_by_name]
    if kept_old != kept_new:
        changes.append(ConfigChange(base, kept_old, kept_new, stage, None, "order"))
    return changes


def render_diff(changes: Sequence[ConfigChange]) -> str:
    """The changes as lines for a notification; `no change` when there is none."""
    if not changes:
        return "no change"
    return "\n".join(change.describe() for change in changes)
