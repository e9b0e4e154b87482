"""PCS's API calls as CloudTrail records them: the calls that set a compute node group's configuration,
parsed and bounded.

EventBridge delivers CloudTrail's management events on the account's default bus as `AWS API Call via
CloudTrail` (source `aws.pcs`, the record in `detail`); a bare record (`eventSource: pcs.amazonaws.com`)
is read the same way. Only `CreateComputeNodeGroup` and `UpdateComputeNodeGroup` are read:

- a call with `errorCode` changed nothing: it is a `CallIgnored`, as is any other call;
- anything else that is not such a record, or holds a value beyond its bounds, is a `CallParseError`
  with a short `reason` for counting. Nothing here raises on what it is given.

Bounds, besides those of `lifeguard.bounds` (ids, times against the invocation's clock): `eventID` is
CloudTrail's (a UUID: letters, digits and `-`, at most 64); `userIdentity.arn` an ARN of at most 2,048
characters (IAM's limit), absent for some callers (an AWS service); `eventTime` RFC 3339 in UTC; the
`nodeLifecycleActions` of the request valid by PCS's rules and at most 256 KiB of JSON (an EventBridge
event is at most 256 KB in all). The group is named by the ids of `responseElements.computeNodeGroup`
when the record has them, else by the request's identifiers, which may be names (`needs_ids`). A record
without `requestParameters` (CloudTrail leaves out those of over 100 KB) names no group: it is said as such.
"""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Mapping
from datetime import UTC, datetime
from typing import Any

from lifeguard._records import describe_validation_error, reason_of
from lifeguard.bounds import (
    CLUSTER_ID,
    GROUP_ID,
    PCS_ID,
    anchored,
    clip,
    group_name_of,
    implausible_time,
    is_pcs_id,
)
from lifeguard.errors import InvalidLifecycleConfigError
from lifeguard.lifecycle import NodeLifecycleActions
from lifeguard.schema import Invalid, Model, checked, json_object, model, optional, string
from lifeguard.values import frozen, mutable

__all__ = [
    "CHANGE_CALLS",
    "CLOUDTRAIL_DETAIL_TYPE",
    "CONFIG_MAX_BYTES",
    "PCS_EVENT_SOURCE",
    "PCS_SOURCE",
    "CallIgnored",
    "CallParseError",
    "ConfigCall",
    "call_time_ms",
    "cloudtrail_record",
    "parse_config_call",
]

CLOUDTRAIL_DETAIL_TYPE = "AWS API Call via CloudTrail"
PCS_SOURCE = "aws.pcs"  # EventBridge's `source` of PCS's CloudTrail events
PCS_EVENT_SOURCE = "pcs.amazonaws.com"  # CloudTrail's `eventSource`
CHANGE_CALLS = ("CreateComputeNodeGroup", "UpdateComputeNodeGroup")
CONFIG_MAX_BYTES = 256 * 1024
ARN_MAX_CHARS = 2048
_ARN_PATTERN = r"arn:aws[a-z-]*:[a-z0-9-]{1,64}:[a-z0-9-]*:[0-9]{0,12}:[^\x00-\x1f\x7f]+"
_GROUP_NAME_PATTERN = r"[A-Za-z][A-Za-z0-9-]{2,25}"

# Checked strictly (a string is a `str`, an object a JSON object); keys besides these are CloudTrail's own
# and are ignored.


@checked(arn=optional(string(max_length=ARN_MAX_CHARS, pattern=anchored(_ARN_PATTERN))))
@mutable(slots=True, kw_only=True)
class _UserIdentity(Model):
    arn: str | None = None


@checked(
    clusterIdentifier=CLUSTER_ID,
    computeNodeGroupIdentifier=optional(GROUP_ID),
    computeNodeGroupName=optional(string(pattern=anchored(_GROUP_NAME_PATTERN))),
    nodeLifecycleActions=optional(json_object()),
    clientToken=optional(string(max_length=100)),
)
@mutable(slots=True, kw_only=True)
class _Request(Model):
    clusterIdentifier: str
    computeNodeGroupIdentifier: str | None = None
    computeNodeGroupName: str | None = None
    nodeLifecycleActions: dict[str, Any] | None = None
    clientToken: str | None = None


@checked(id=optional(PCS_ID), clusterId=optional(PCS_ID))
@mutable(slots=True, kw_only=True)
class _Group(Model):
    id: str | None = None
    clusterId: str | None = None


@checked(computeNodeGroup=optional(model(_Group)))
@mutable(slots=True, kw_only=True)
class _Response(Model):
    computeNodeGroup: _Group | None = None


@checked(
    eventID=string(pattern=r"^[A-Za-z0-9-]{1,64}$"),
    eventTime=string(max_length=40),
    userIdentity=optional(model(_UserIdentity)),
    requestParameters=model(_Request),
    responseElements=optional(model(_Response)),
)
@mutable(slots=True, kw_only=True)
class _Record(Model):
    eventID: str
    eventTime: str
    userIdentity: _UserIdentity | None = None
    requestParameters: _Request
    responseElements: _Response | None = None


@frozen
class CallIgnored:
    """A PCS call that changed no configuration (a failed call, or another operation), and why."""

    message: str
    where: str | None = None


@frozen
class CallParseError:
    """An event that is not a readable record of a PCS call: what is wrong (`reason`, short, for counting;
    `message`, in full) and where (the record's `eventID` when it has one)."""

    message: str
    where: str | None = None
    reason: str = "not a CloudTrail record"
    # A change that was made (no errorCode) whose record cannot be read, its request left out by CloudTrail
    # or not as the review takes it: not an invalid event, a change nobody reviewed (`ChangesUnreviewed`,
    # alarmed). Set by `parse_config_call` for every such record.
    unreviewed: bool = False

    def __str__(self) -> str:
        prefix = f"{self.where}: " if self.where else ""
        return f"{prefix}{self.message}"


@frozen
class ConfigCall:
    """A successful CreateComputeNodeGroup or UpdateComputeNodeGroup, bounded.

    `cluster_identifier` and `group_identifier` name the group as the call did (ids or names);
    `cluster_id` and `group_id` are its ids when the record gives them. `config` is the request's
    `nodeLifecycleActions` (None when the request did not carry any).
    """

    event_id: str
    event_name: str
    at: int
    arn: str | None
    cluster_identifier: str
    group_identifier: str
    cluster_id: str | None
    group_id: str | None
    config: NodeLifecycleActions | None
    client_token: str | None = None

    @property
    def needs_ids(self) -> bool:
        """True when the record does not give the group's ids (the call named it by names)."""
        return self.cluster_id is None or self.group_id is None

    @property
    def group_name(self) -> str | None:
        """The group's name, when the call named it by it (a create always does; `bounds.group_name_of`)."""
        return group_name_of(self.group_identifier)

    def changed_by(self) -> dict[str, Any]:
        """Who made the change, and when, as controller events carry it."""
        return {"arn": self.arn, "at": self.at, "source": "cloudtrail"}


def cloudtrail_record(event: object) -> Mapping[str, Any] | str:
    """The CloudTrail record of PCS in `event` (an EventBridge event, or a bare record), or why there is
    none."""
    if not isinstance(event, Mapping):
        return "not a JSON object"
    if "detail" in event or "detail-type" in event:
        if event.get("detail-type") != CLOUDTRAIL_DETAIL_TYPE:
            return f"not a CloudTrail event of PCS (detail-type {clip(event.get('detail-type'), 60)!r})"
        if event.get("source") != PCS_SOURCE:
            return f"not a CloudTrail event of PCS (source {clip(event.get('source'), 60)!r})"
        event = event.get("detail")
        if not isinstance(event, Mapping):
            return "detail is not a JSON object"
    if event.get("eventSource") != PCS_EVENT_SOURCE:
        return f"not a PCS call (eventSource {clip(event.get('eventSource'), 60)!r})"
    return event


def call_time_ms(text: object) -> int | None:
    """A CloudTrail `eventTime` in epoch ms: an RFC 3339 time in UTC, as CloudTrail writes it; else None."""
    if not isinstance(text, str):
        return None
    try:
        moment = datetime.fromisoformat(text)
    except ValueError:
        return None
    if moment.tzinfo is None or moment.utcoffset() != UTC.utcoffset(None):
        return None
    return int(moment.timestamp() * 1000)


def _pcs_id(value: str | None) -> str | None:
    return value if is_pcs_id(value) else None


def parse_config_call(
    event: object, *, now_ms: int, account: str | None = None, region: str | None = None
) -> ConfigCall | CallIgnored | CallParseError:
    """The configuration call in `event` (see the module's docstring); `now_ms` is the invocation's clock,
    against which `eventTime` must be plausible. With `account` (the function's own), a call recorded in
    another account (its `recipientAccountId`, or the event's `account`: forwarded between buses) is
    ignored: its groups are not this stack's; so is one made in another `region` (`awsRegion`, or the
    event's `region`), whose groups this stack neither watches nor can read."""
    record = cloudtrail_record(event)
    if isinstance(record, str):
        return CallParseError(record, None, reason_of(record))
    raw_id = record.get("eventID")
    where = clip(raw_id, 64) if isinstance(raw_id, str) else None
    if account is not None:
        envelope = event.get("account") if isinstance(event, Mapping) and "detail" in event else None
        for key, recorded_in in (
            ("recipientAccountId", record.get("recipientAccountId")),
            ("account", envelope),
        ):
            if recorded_in is not None and type(recorded_in) is not str:  # 123456789012 as a number: no id
                return CallParseError(f"{key} is not a string", where, f"invalid {key}")
            if recorded_in is not None and recorded_in != account:
                return CallIgnored(f"recorded in account {clip(recorded_in, 20)}, not this stack's", where)
    if region is not None:
        envelope = event.get("region") if isinstance(event, Mapping) and "detail" in event else None
        for key, made_in in (("awsRegion", record.get("awsRegion")), ("region", envelope)):
            if made_in is not None and type(made_in) is not str:
                return CallParseError(f"{key} is not a string", where, f"invalid {key}")
            if made_in is not None and made_in != region:
                return CallIgnored(f"made in region {clip(made_in, 30)}, not this stack's", where)
    name = record.get("eventName")
    if name not in CHANGE_CALLS:
        return CallIgnored(f"{clip(name, 64)} sets no configuration", where)
    error = record.get("errorCode")
    if error is not None:
        return CallIgnored(f"{name} failed ({clip(error, 100)}): nothing changed", where)
    call = _successful_call(record, name, where, now_ms)
    if isinstance(call, CallParseError):
        # PCS made this change (no errorCode; the rule delivers CloudTrail's records alone, and no one else
        # may send aws.pcs's): one that cannot be read (redacted, a field newer than the model) is a change
        # nobody reviewed, which pages, not an invalid event.
        return dataclasses.replace(call, unreviewed=True)
    return call


def _successful_call(
    record: Mapping[str, Any], name: str, where: str | None, now_ms: int
) -> ConfigCall | CallParseError:
    """The call a record without `errorCode` made, bounded, or what is wrong with the record."""
    if record.get("requestParameters") is None:  # absent or null: as CloudTrail records a request of >100 KB
        identity = record.get("userIdentity")
        caller = identity.get("arn") if isinstance(identity, Mapping) else None
        by = f" by {clip(caller, 300)}" if isinstance(caller, str) else ""
        return CallParseError(
            f"{name}{by} without requestParameters (CloudTrail leaves out a request of over 100 KB, as a "
            "configuration of long arguments can be): which group changed, and to what, is not known; "
            "not reviewed",
            where,
            "requestParameters left out",
        )
    try:
        parsed = _Record.model_validate(record)
    except Invalid as exc:
        return CallParseError(f"not a {name} record: {describe_validation_error(exc)}", where, reason_of(exc))
    at = call_time_ms(parsed.eventTime)
    if at is None:
        return CallParseError(
            f"eventTime {clip(parsed.eventTime, 40)!r} is not an RFC 3339 time in UTC",
            where,
            "invalid eventTime",
        )
    if (implausible := implausible_time(at, now_ms)) is not None:
        return CallParseError(f"eventTime is {implausible}", where, f"eventTime {implausible}")
    request = parsed.requestParameters
    response = parsed.responseElements.computeNodeGroup if parsed.responseElements else None
    group_identifier = (
        request.computeNodeGroupIdentifier
        if name == "UpdateComputeNodeGroup"
        else request.computeNodeGroupName
    )
    group_id = (response.id if response else None) or _pcs_id(group_identifier)
    if group_identifier is None:
        group_identifier = group_id
    if group_identifier is None:
        field = "computeNodeGroupIdentifier" if name == "UpdateComputeNodeGroup" else "computeNodeGroupName"
        return CallParseError(f"{name} names no group", where, f"missing requestParameters.{field}")
    config: NodeLifecycleActions | None = None
    if request.nodeLifecycleActions is not None:
        try:
            text = json.dumps(request.nodeLifecycleActions, separators=(",", ":"), ensure_ascii=False)
            size = len(text.encode())
        except UnicodeEncodeError:  # a lone surrogate, which JSON's \ud800 escape makes and UTF-8 cannot hold
            return CallParseError(
                "nodeLifecycleActions holds text that is not UTF-8", where, "invalid nodeLifecycleActions"
            )
        except (RecursionError, ValueError, TypeError):  # RecursionError: JSON nested thousands deep
            return CallParseError("nodeLifecycleActions is not JSON", where, "invalid nodeLifecycleActions")
        if size > CONFIG_MAX_BYTES:
            return CallParseError(
                f"nodeLifecycleActions of {size} bytes (at most {CONFIG_MAX_BYTES})",
                where,
                "nodeLifecycleActions too large",
            )
        try:
            config = NodeLifecycleActions.from_api(
                request.nodeLifecycleActions, path="requestParameters.nodeLifecycleActions"
            )
        except InvalidLifecycleConfigError as exc:
            first = exc.problems[0]
            more = f" (and {len(exc.problems) - 1} more)" if len(exc.problems) > 1 else ""
            return CallParseError(f"{first}{more}", where, "invalid nodeLifecycleActions")
    return ConfigCall(
        event_id=parsed.eventID,
        event_name=name,
        at=at,
        arn=parsed.userIdentity.arn if parsed.userIdentity else None,
        cluster_identifier=request.clusterIdentifier,
        group_identifier=group_identifier,
        cluster_id=(response.clusterId if response else None) or _pcs_id(request.clusterIdentifier),
        group_id=group_id,
        client_token=request.clientToken,
        config=config,
    )
