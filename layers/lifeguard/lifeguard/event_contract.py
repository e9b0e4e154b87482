"""Controller events: what the Lambdas put on EventBridge (source `lifeguard`) and every consumer reads.

Every `detail` carries all the keys (`DETAIL_KEYS`), null or empty where they do not apply.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Mapping
from dataclasses import field
from functools import cache
from typing import TYPE_CHECKING, Any, Literal, get_args

from lifeguard._records import describe_validation_error
from lifeguard.schema import (
    BAD,
    Check,
    Invalid,
    Model,
    Problem,
    anything,
    as_json,
    boolean,
    checked,
    converted,
    integer,
    json_object,
    list_of,
    literal,
    model,
    optional,
    string,
)
from lifeguard.values import frozen, mutable

if TYPE_CHECKING:
    from lifeguard.detection import DetectionSettings
    from lifeguard.group_state import Episode, GroupState

__all__ = [
    "DETAIL_KEYS",
    "DETAIL_TYPES",
    "DRY_RUN_SAID",
    "ENTRY_MAX_BYTES",
    "FIX_AND_PUSH",
    "LOCAL_AWS_VARIABLE",
    "NODES_REPLACED",
    "NODE_GROUP_TAG",
    "RISKS_LISTED_MAX",
    "SIGNALS",
    "SOURCE",
    "ControllerEvent",
    "DetailType",
    "change_sentence",
    "clean_detail",
    "console_url",
    "deployed_in",
    "entry_size",
    "episode_event",
    "episode_signals",
    "group_name",
    "make_detail",
    "nodes_console_url",
    "risks_found",
    "risks_found_sentence",
    "trimmed_to_fit",
    "undo_command",
]

# How the reason of a remediation a dry run held back begins (mode notify, or the stack's DryRun): the
# notifications tell it from a skip or a failure, which change nothing either.
DRY_RUN_SAID = "Dry run ("
# What a contained loop asks of its owners (the containment's reason says it; an older one may not).
FIX_AND_PUSH = "Fix the script and push a configuration"
# What PCS does on every update of a group's lifecycle actions (the article: the running node was drained
# and a new instance took its place): whoever makes or undoes a change is told, the notifications and the
# CLI in the same words.
NODES_REPLACED = "PCS drains the group's running nodes and replaces them"

SOURCE = "lifeguard"
# The tag PCS puts on each instance it launches, naming its compute node group's id.
NODE_GROUP_TAG = "aws:pcs:compute-node-group-id"
DetailType = Literal[
    "BootstrapLoopDetected",
    "RemediationApplied",
    "RemediationSkipped",
    "RemediationFailed",
    "LoopContained",
    "LoopResolved",
    "ConfigChangeReviewed",
]
DETAIL_TYPES: tuple[DetailType, ...] = get_args(DetailType)
# What a detection rests on (a detail's `signals`).
Signal = Literal["scaling_log", "node_reports"]
SIGNALS: tuple[Signal, ...] = get_args(Signal)
_LIST_KEYS = frozenset({"failures", "diff", "signals", "kept", "risks"})
# DESIGN's keys, and the group's name beside its id (null where not known).
DETAIL_KEYS: tuple[str, ...] = (
    "episode_id",
    "cluster_id",
    "compute_node_group_id",
    "compute_node_group_name",
    "kind",
    "failures",
    "suspect",
    "mode",
    "dry_run",
    "config_before",
    "config_after",
    "diff",
    "reason",
    "undo",
    "signals",
    "changed_by",
    "kept",
    "risks",
)


# PutEvents: an entry, and a whole request, under 256 KB (Source, DetailType, Detail and resources).
ENTRY_MAX_BYTES = 256 * 1024 - 1024
_TRIMMED = "(trimmed to fit EventBridge; `lifeguard history` shows it)"
_ENTRY = "EventBridge's 256 KB"
# What goes first: the log tail (a notice shows it), the configurations (the audit trail keeps a
# remediation's; PCS holds the one in place), most of the evidence, a review's risks past the first ones,
# and only then the diff, the change itself, which is seldom large.
_TRIM_ORDER = ("log_tail", "config_before", "config_after", "failures", "risks", "diff")
# A review too big for an entry keeps its first risks, each message cut (a script location can be 1,024
# characters of text JSON writes six bytes each): the table's change record keeps them whole.
_RISKS_KEPT, _RISK_MESSAGE_KEPT = 50, 200


# A review's event lists at most this many risks; its reason then says how many were found.
RISKS_LISTED_MAX = 100
_RISKS_FOUND = "The review found {found} risks; the event lists the first {listed}."


def risks_found_sentence(found: int, listed: int = RISKS_LISTED_MAX) -> str:
    """What a review's reason says when it found more risks than its event lists."""
    return _RISKS_FOUND.format(found=found, listed=listed)


@cache
def _risks_found_pattern() -> re.Pattern[str]:
    head, rest = _RISKS_FOUND.split("{found}")
    middle, tail = rest.split("{listed}")
    return re.compile(re.escape(head) + r"(\d{1,7})" + re.escape(middle) + r"(\d{1,7})" + re.escape(tail))


def risks_found(detail: Mapping[str, Any]) -> int:
    """How many risks a review found: those its event lists, or the count its reason gives of more (when
    it says the event lists as many as it does)."""
    listed = detail.get("risks")
    count = len(listed) if isinstance(listed, list) else 0
    reason = detail.get("reason")
    if count and isinstance(reason, str):
        said = _risks_found_pattern().search(reason)
        if said is not None and int(said.group(2)) == count and int(said.group(1)) > count:
            return int(said.group(1))
    return count


def _fitted_reason(
    detail_type: str, reason: object, left_out: list[str], risks: str | None, into: str
) -> str | None:
    """An event's reason (None: left out too), what of it was left out to fit `into` and how many risks the
    review found when fewer are listed (`risks`), within the reason's bound: the notes are kept whole."""
    from lifeguard.bounds import REASON_MAX_CHARS

    notes = [risks] if risks else []
    if left_out:
        # A remediation's audit entry keeps both configurations and the diff; the configuration in place is
        # PCS's to show.
        if detail_type.startswith("Remediation"):
            kept = " (`lifeguard history` shows them)"
        elif any(name.startswith("config") for name in left_out):
            kept = " (`aws pcs get-compute-node-group` shows the configuration in place)"
        else:
            kept = ""
        notes.append(f"{' and '.join(left_out)} left out to fit {into}{kept}.")
    note = " ".join(notes)
    said = reason if isinstance(reason, str) and reason else ""
    if said and risks:  # the count the review's own reason gave is the new note's
        said = _risks_found_pattern().sub("", said).strip()
    room = REASON_MAX_CHARS - len(note) - 1
    if not said:
        return note or None
    return f"{said[:room]} {note}" if note else said


def trimmed_to_fit(
    detail_type: str,
    detail: Mapping[str, Any],
    fits: Callable[[Mapping[str, Any]], bool],
    *,
    into: str,
    last: tuple[str, ...] = (),
) -> Mapping[str, Any]:
    """The detail trimmed (`_TRIM_ORDER`, then the steps of `last`: `reason`, the reason's own words) until
    it `fits`, or as far as it goes. Every key keeps its contract's type (a configuration left out is null,
    a list left out is empty: a consumer reads it as it reads any event), and `reason` says what was left out
    (it is not taken for "none"), and how many risks a review found when it lists fewer."""
    if fits(detail):
        return detail
    trimmed = dict(detail)
    marker = _TRIMMED if into == _ENTRY else f"(trimmed to fit {into})"
    left_out: list[str] = []
    risks: str | None = None
    said: object = detail.get("reason")
    dropped = False  # the reason's own words left out (`last`)
    for step in (*_TRIM_ORDER, *last):
        if step == "log_tail":  # no note: the tail says so itself
            if isinstance(trimmed.get("suspect"), Mapping):
                trimmed["suspect"] = {**trimmed["suspect"], "log_tail": marker}
        elif step == "failures":
            trimmed["failures"] = list(trimmed.get("failures") or [])[-10:]  # the newest evidence
        elif step == "risks":
            listed = list(trimmed.get("risks") or [])
            if len(listed) > _RISKS_KEPT:
                risks = risks_found_sentence(risks_found(detail), _RISKS_KEPT)
            trimmed["risks"] = [_cut_risk(risk) for risk in listed[:_RISKS_KEPT]]
        elif step == "reason":
            said, dropped = None, True
        elif trimmed.get(step) not in (None, []):
            trimmed[step] = None if step.startswith("config") else []
            left_out.append(step)
        if left_out or risks or dropped:
            trimmed["reason"] = _fitted_reason(detail_type, said, left_out, risks, into)
        if fits(trimmed):
            break
    return trimmed


def entry_size(entry: Mapping[str, Any]) -> int:
    """A PutEvents entry's size as EventBridge counts it."""
    return sum(len(str(entry.get(key, "")).encode()) for key in ("Source", "DetailType", "Detail"))


def make_detail(**fields: Any) -> dict[str, Any]:
    """A detail with every key (`DETAIL_KEYS`: null, [] for lists, false for dry_run where not given), plus
    any extra fields (such as `revision`)."""
    detail: dict[str, Any] = {key: ([] if key in _LIST_KEYS else None) for key in DETAIL_KEYS}
    detail["dry_run"] = False
    detail.update(fields)
    return detail


@frozen
class ControllerEvent:
    """One event: its detail-type and detail; `key` names it uniquely (episode, type, revision)."""

    detail_type: DetailType
    detail: Mapping[str, Any]
    key: str

    def to_entry(self, bus_name: str) -> dict[str, Any]:
        """The PutEvents entry, within EventBridge's 256 KB an entry (`entry_size`): an event too big
        for it loses its log tail (replaced by a note), then its configurations (null, and `reason` says
        where to read them: the audit trail keeps a remediation's), then most of its evidence, then a
        review's risks are cut."""
        head = {"Source": SOURCE, "DetailType": self.detail_type}
        detail = self.fitted(ENTRY_MAX_BYTES - entry_size(head))
        return {**head, "Detail": json.dumps(detail, separators=(",", ":")), "EventBusName": bus_name}

    def fitted(self, max_bytes: int, *, into: str = _ENTRY) -> Mapping[str, Any]:
        """The detail, trimmed (`trimmed_to_fit`) until its JSON takes at most `max_bytes`, or as far as it
        goes; what was left out is said as left out to fit `into` (a PutEvents entry, unless said)."""

        def fits(detail: Mapping[str, Any]) -> bool:
            return len(json.dumps(detail, separators=(",", ":")).encode()) <= max_bytes

        return trimmed_to_fit(self.detail_type, self.detail, fits, into=into)

    def to_dict(self) -> dict[str, Any]:
        """As `lifeguard replay --json` and the outbox keep it."""
        return {"detail-type": self.detail_type, "detail": dict(self.detail), "key": self.key}

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> ControllerEvent:
        """Back from `to_dict`."""
        return cls(data["detail-type"], data["detail"], data["key"])


def _cut_risk(risk: Any) -> Any:
    """A risk of a review trimmed to fit EventBridge: its message cut (`_RISK_MESSAGE_KEPT`)."""
    if not isinstance(risk, Mapping) or not isinstance(risk.get("message"), str):
        return risk
    message = risk["message"]
    if len(message) > _RISK_MESSAGE_KEPT:
        message = message[: _RISK_MESSAGE_KEPT - 1] + "…"
    return {**risk, "message": message}


@cache
def _detail_fields() -> Mapping[str, Check]:
    """A check per detail key: the contract, bounded (built on first use, not at import: most of
    the module's importers only publish events and never check one)."""
    from lifeguard.bounds import (
        CLUSTER_ID,
        EPISODE_ID,
        EPOCH_MS_MAX,
        FINGERPRINT,
        GROUP_ID,
        GROUP_NAME,
        INSTANCE_ID,
        NODE_NAME,
        REVISION_MAX,
        SCRIPT_NAME,
        SHORT_TEXT,
        WORD,
    )
    from lifeguard.lifecycle import OnError, StageName
    from lifeguard.node.layout import output_tail

    # The records live only while a detail is checked, so they are plain (not frozen) and each has a
    # docstring: a dataclass without one has its signature worked out for it, which costs more than the
    # class.
    epoch_ms = integer(ge=0, lt=EPOCH_MS_MAX)
    path = string(max_length=200)

    @checked(instance_id=INSTANCE_ID, scheduler_node_id=optional(NODE_NAME), event_timestamp=epoch_ms)
    @mutable(slots=True, kw_only=True)
    class FailureDetail(Model):
        """A failed launch the detection counted."""

        instance_id: str
        scheduler_node_id: str | None = None
        event_timestamp: int

    @checked(
        stage=literal(*get_args(StageName)),
        script=SCRIPT_NAME,
        on_error=literal(*get_args(OnError)),
        exit_code=optional(integer(ge=-(2**31), lt=2**31)),
        log_tail=converted(string(), output_tail),  # held to the node's own cut
        instances=list_of(INSTANCE_ID, max_length=100),
    )
    @mutable(slots=True, kw_only=True)
    class SuspectDetail(Model):
        """The script the node reports name as failing the boot."""

        stage: str
        script: str
        on_error: str
        exit_code: int | None = None
        log_tail: str = ""
        instances: list[str] = field(default_factory=list)

    @checked(
        arn=optional(SHORT_TEXT),
        at=optional(epoch_ms),
        source=literal("cloudtrail", "lifeguard", "unknown"),
    )
    @mutable(slots=True, kw_only=True)
    class ChangedBy(Model):
        """The configuration change a loop began after."""

        arn: str | None = None
        at: int | None = None
        source: str = "unknown"

    @checked(instance_id=INSTANCE_ID, drained=boolean())
    @mutable(slots=True, kw_only=True)
    class KeptNode(Model):
        """A node kept up with its script still failing (a quarantine's STOP_SEQUENCE)."""

        instance_id: str
        drained: bool = False

    @checked(code=WORD, path=path, message=SHORT_TEXT, severity=literal("warning", "error", "info"))
    @mutable(slots=True, kw_only=True)
    class RiskDetail(Model):
        """A risk the configuration review found."""

        code: str
        path: str
        message: str
        severity: str = "warning"

    @checked(path=path, old=anything(), new=anything())
    @mutable(slots=True, kw_only=True)
    class DiffDetail(Model):
        """One changed value of a configuration."""

        path: str
        old: Any = None
        new: Any = None

    return {
        "episode_id": optional(EPISODE_ID),
        "cluster_id": optional(CLUSTER_ID),
        "compute_node_group_id": optional(GROUP_ID),
        "compute_node_group_name": optional(GROUP_NAME),
        "kind": optional(literal("loop", "intermittent", "replacement")),
        "failures": list_of(model(FailureDetail), max_length=100),
        "suspect": optional(model(SuspectDetail)),
        # "off" is read still (events and audit entries of earlier releases); none is published with it.
        "mode": optional(literal("quarantine", "revert", "notify", "off")),
        "dry_run": boolean(),
        "config_before": optional(json_object()),
        "config_after": optional(json_object()),
        "diff": list_of(model(DiffDetail), max_length=1000),
        "reason": optional(SHORT_TEXT),
        "undo": optional(SHORT_TEXT),
        "signals": list_of(literal(*SIGNALS), max_length=len(SIGNALS)),
        "changed_by": optional(model(ChangedBy)),
        "kept": list_of(model(KeptNode), max_length=100),
        "risks": list_of(model(RiskDetail), max_length=100),
        "revision": optional(integer(ge=1, le=REVISION_MAX)),
        "action": optional(WORD),
        "config_fingerprint": optional(FINGERPRINT),
        "config_modified_at": optional(epoch_ms),
    }


def clean_detail(detail: object) -> tuple[dict[str, Any], list[str]]:
    """A controller event's detail held to the contract, key by key: the valid values (every key
    present, null or empty where missing or invalid; extra known keys such as `revision` when valid;
    unknown keys dropped), and one line per value that was not valid (`revision: Input should be a valid
    integer`)."""
    cleaned = make_detail()
    if not isinstance(detail, Mapping):
        return cleaned, [f"detail: expected a JSON object, got {type(detail).__name__}"]
    problems: list[str] = []
    for key, check in _detail_fields().items():
        if key not in detail:
            continue
        found: list[Problem] = []
        try:
            value = check(detail[key], (), found)
            plain = None if value is BAD else as_json(value)
        except RecursionError:  # a configuration or diff value nested thousands deep
            problems.append(f"{key}: nested too deep")
            continue
        if value is BAD and key in _LISTS_OF_RECORDS and isinstance(detail[key], list):
            # One bad record leaves the others: a review with one risk of another shape still tells the
            # rest (it said "0 risk(s)").
            kept, bad = _good_items(check, detail[key][: _LISTS_OF_RECORDS[key]])
            problems.extend(f"{key}[{index}]: {why}" for index, why in bad)
            if len(detail[key]) > _LISTS_OF_RECORDS[key]:
                problems.append(f"{key}: over {_LISTS_OF_RECORDS[key]} items, the rest left out")
            cleaned[key] = kept
            continue
        if value is BAD:
            problems.append(f"{key}: {describe_validation_error(Invalid(found))}")
            continue
        cleaned[key] = plain
    return cleaned, problems


# The lists of records told one by one (a review's risks), and the most items each holds (`_detail_fields`).
_LISTS_OF_RECORDS = {"risks": 100}


def _good_items(check: Check, items: list[Any]) -> tuple[list[Any], list[tuple[int, str]]]:
    """The items the list's `check` takes one by one, and (index, why) of each it does not."""
    kept: list[Any] = []
    bad: list[tuple[int, str]] = []
    for index, item in enumerate(items):
        found: list[Problem] = []
        try:
            value = check([item], (), found)
        except RecursionError:
            bad.append((index, "nested too deep"))
            continue
        if value is BAD:
            bad.append((index, describe_validation_error(Invalid(found)).removeprefix("0.")))
        else:
            kept.extend(as_json(value))
    return kept, bad


def undo_command(cluster_id: str, group_id: str) -> str:
    """The command that puts back the configuration from before Lifeguard's last change, to be pasted as
    it is: in the stack (LIFEGUARD_STACK_NAME, which template.yaml sets) with its stack and region; in a
    replay or simulation (`LOCAL_AWS_VARIABLE`) with `--local`."""
    import os

    command = f"lifeguard undo {group_id} --cluster {cluster_id}"
    if os.environ.get(LOCAL_AWS_VARIABLE) == "1":
        return f"{command} --local"
    stack, region = deployed_in()
    if stack:
        command += f" --stack-name {stack}" + (f" --region {region}" if region else "")
    return command


# Set by `lifeguard replay` and `simulate` while the functions run against the local AWS.
LOCAL_AWS_VARIABLE = "LIFEGUARD_ON_LOCAL_AWS"


def deployed_in() -> tuple[str | None, str | None]:
    """The stack and region this Lambda runs in (LIFEGUARD_STACK_NAME, AWS_REGION), each None when unset
    or not of its form (they go into commands and links)."""
    import os
    import re

    stack = os.environ.get("LIFEGUARD_STACK_NAME", "")
    region = os.environ.get("AWS_REGION", "")
    return (
        stack if re.fullmatch(r"[A-Za-z][A-Za-z0-9-]{0,127}", stack) else None,
        region if re.fullmatch(r"[a-z]{2}(-[a-z]+)+-\d{1,2}", region) else None,
    )


def console_url(cluster_id: str, region: str | None) -> str | None:
    """The cluster's page in the AWS PCS console of the region's partition (None without a region or with
    an id not of PCS's form)."""
    from lifeguard.bounds import is_pcs_id

    if not region or not is_pcs_id(cluster_id):
        return None
    return f"https://{_console_host(region)}/pcs/home?region={region}#/clusters/{cluster_id}"


def nodes_console_url(group_id: str, region: str | None) -> str | None:
    """The group's instances in the EC2 console of the region's partition, found by the tag PCS puts on
    every instance it launches for a group (`aws:pcs:compute-node-group-id`): the one address of the
    console that opens on the group itself (None without a region or with an id not of PCS's form). Not
    filtered by state: the instances a loop terminated show beside a node a quarantine kept."""
    from lifeguard.bounds import is_pcs_id

    if not region or not is_pcs_id(group_id):
        return None
    return (
        f"https://{_console_host(region)}/ec2/home?region={region}#Instances:tag:{NODE_GROUP_TAG}={group_id}"
    )


def _console_host(region: str) -> str:
    """The console's host for a region: GovCloud's and China's consoles are their partitions' own."""
    if region.startswith("us-gov-"):
        return "console.amazonaws-us-gov.com"
    if region.startswith("cn-"):
        return "console.amazonaws.cn"
    return f"{region}.console.aws.amazon.com"


def change_sentence(changed_by: Mapping[str, Any] | None, *, went_on: str | None = None) -> str | None:
    """The change a loop began after, in words (None when there is none known); `went_on`: the change an
    open episode's loop (its kind) went on after."""
    from lifeguard.bounds import clip, utc

    if not changed_by:
        return None
    at = changed_by.get("at")
    when = f" at {utc(at)}" if isinstance(at, int) else ""
    after = f"the {went_on} went on after" if went_on else "the loop began after"
    if changed_by.get("source") == "lifeguard":
        return f"{after} Lifeguard's own change{when}"
    if changed_by.get("arn"):
        return f"{after} the change by {clip(changed_by['arn'], 200)}{when}"
    return f"{after} the configuration changed{when} (by whom is not known)"


def episode_signals(episode: Episode) -> list[str]:
    """What an episode's detection rests on: the scaling log's failures and the node reports (that named the
    failing script, or showed that none failed), in the contract's order."""
    signals = set(episode.signals) or {"scaling_log"}
    if episode.suspect is not None or episode.no_script_failed:
        signals.add("node_reports")
    return [signal for signal in SIGNALS if signal in signals]


def group_name(state: GroupState) -> str | None:
    """The group's name as PCS last gave it (`KnownConfig.name`), told beside its id; None when not known, or
    not of PCS's form (a state stored otherwise than Lifeguard stores it)."""
    from lifeguard.bounds import group_name_of

    return group_name_of(state.config.name) if state.config is not None else None


def episode_event(
    detail_type: str, state: GroupState, episode: Episode, settings: DetectionSettings, **extra: Any
) -> ControllerEvent:
    """An event of an episode, at its current revision (`extra` adds keys or overrides the episode's)."""
    fields: dict[str, Any] = {
        "episode_id": episode.episode_id,
        "cluster_id": state.cluster_id,
        "compute_node_group_id": state.group_id,
        "compute_node_group_name": group_name(state),
        "kind": episode.kind,
        "failures": [failure.model_dump() for failure in episode.failures],
        "suspect": episode.suspect.model_dump() if episode.suspect else None,
        "mode": settings.mode,
        "config_before": state.config.node_lifecycle_actions if state.config else None,
        "revision": episode.revision,
        "config_fingerprint": episode.config_fingerprint,
        "config_modified_at": episode.config_modified_at,
        "signals": episode_signals(episode),
        "changed_by": episode.changed_by,
    }
    if episode.replacement_revision == episode.revision:
        fields.update(kind="replacement", failures=[failure.model_dump() for failure in episode.unhealthy])
    detail = make_detail(**{**fields, **extra})
    key = f"{episode.episode_id}:{detail_type}:{episode.revision}"
    return ControllerEvent(detail_type, detail, key)  # type: ignore[arg-type]
