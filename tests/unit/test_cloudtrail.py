"""CloudTrail's records of PCS's configuration calls (`lifeguard.cloudtrail`): the recorded event and a bare
record read the same, a failed call is ignored, and every hostile value is a counted reason, never an
exception."""

from __future__ import annotations

import copy
import json
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from lifeguard.cloudtrail import CallIgnored, CallParseError, ConfigCall, parse_config_call
from lifeguard.lifecycle import fingerprint_of
from tests.conftest import load_event

EVENT = "cloudtrail/update-compute-node-group.json"
AT = 1792544400000  # the recorded call's eventTime
NOW = AT + 60_000
ARN = "arn:aws:sts::123456789012:assumed-role/ClusterAdmin/alice"


def recorded() -> dict[str, Any]:
    event: dict[str, Any] = load_event(EVENT)
    return event


def parse(event: object, now_ms: int = NOW) -> ConfigCall | CallIgnored | CallParseError:
    return parse_config_call(event, now_ms=now_ms)


def test_the_recorded_update_is_read_with_who_when_and_the_new_configuration() -> None:
    call = parse(recorded())
    assert isinstance(call, ConfigCall)
    assert (call.event_name, call.at, call.arn) == ("UpdateComputeNodeGroup", AT, ARN)
    assert (call.cluster_id, call.group_id, call.needs_ids) == ("pcs_abc123de45", "pcs_abcdef01", False)
    assert call.changed_by() == {"arn": ARN, "at": AT, "source": "cloudtrail"}
    request = recorded()["detail"]["requestParameters"]["nodeLifecycleActions"]
    assert call.config is not None
    assert call.config.to_api() == request
    # The fingerprint the detection computes from PCS's answer, when PCS keeps what it was given.
    assert call.config.fingerprint() == fingerprint_of(request)


def test_a_bare_record_reads_as_the_event_that_carries_it() -> None:
    assert parse(recorded()["detail"]) == parse(recorded())


def test_a_failed_call_changed_nothing_and_is_ignored() -> None:
    event = recorded()
    event["detail"]["errorCode"] = "ValidationException"
    event["detail"]["errorMessage"] = "nope"
    ignored = parse(event)
    assert isinstance(ignored, CallIgnored)
    assert "failed (ValidationException)" in ignored.message


def test_another_pcs_call_is_ignored() -> None:
    event = recorded()
    event["detail"]["eventName"] = "DeleteComputeNodeGroup"
    assert isinstance(parse(event), CallIgnored)


def test_a_group_named_by_names_needs_its_ids_read() -> None:
    event = recorded()
    detail = event["detail"]
    detail["requestParameters"].update(clusterIdentifier="lca", computeNodeGroupIdentifier="lca-static")
    del detail["responseElements"]
    call = parse(event)
    assert isinstance(call, ConfigCall)
    assert (call.cluster_identifier, call.group_identifier) == ("lca", "lca-static")
    assert (call.cluster_id, call.group_id, call.needs_ids) == (None, None, True)


def test_a_call_whose_record_has_no_response_takes_its_ids_from_the_request() -> None:
    # A failed call's record, or one CloudTrail left the response out of: the request's ids of PCS's form
    # are the ids, with no read of PCS to learn them.
    event = recorded()
    del event["detail"]["responseElements"]
    call = parse(event)
    assert isinstance(call, ConfigCall)
    assert (call.cluster_id, call.group_id, call.needs_ids) == ("pcs_abc123de45", "pcs_abcdef01", False)


def test_a_create_names_its_group_by_the_response_id() -> None:
    event = recorded()
    detail = event["detail"]
    detail["eventName"] = "CreateComputeNodeGroup"
    request = detail["requestParameters"]
    del request["computeNodeGroupIdentifier"]
    request["computeNodeGroupName"] = "lca-static"
    call = parse(event)
    assert isinstance(call, ConfigCall)
    assert (call.group_identifier, call.group_id) == ("lca-static", "pcs_abcdef01")


def test_a_request_without_lifecycle_actions_carries_no_configuration() -> None:
    event = recorded()
    del event["detail"]["requestParameters"]["nodeLifecycleActions"]
    call = parse(event)
    assert isinstance(call, ConfigCall)
    assert call.config is None


def test_a_caller_without_an_arn_is_unnamed() -> None:
    event = recorded()
    event["detail"]["userIdentity"] = {"type": "AWSService", "invokedBy": "pcs.amazonaws.com"}
    call = parse(event)
    assert isinstance(call, ConfigCall)
    assert call.changed_by()["arn"] is None


def _set(path: str, value: Any) -> dict[str, Any]:
    event = recorded()
    target: Any = event
    *parents, last = path.split(".")
    for part in parents:
        target = target[part]
    if value is _DELETE:
        del target[last]
    else:
        target[last] = value
    return event


_DELETE = object()
_DEEP: Any = {}
_node: Any = _DEEP
for _ in range(5000):
    _node["stages"] = {}
    _node = _node["stages"]


@pytest.mark.parametrize(
    ("event", "reason"),
    [
        ("not an event", "not a JSON object"),
        ([1, 2], "not a JSON object"),
        (_set("detail-type", "Object Created"), "not a CloudTrail event of PCS"),
        (_set("source", "aws.ec2"), "not a CloudTrail event of PCS"),
        (_set("detail", "text"), "detail is not a JSON object"),
        (_set("detail.eventSource", "ec2.amazonaws.com"), "not a PCS call"),
        (_set("detail.eventID", _DELETE), "missing eventID"),
        (_set("detail.eventID", "x" * 65), "invalid eventID"),
        (_set("detail.eventID", "id#with#hash"), "invalid eventID"),
        (_set("detail.eventTime", 1792544400), "invalid eventTime"),
        (_set("detail.eventTime", "yesterday"), "invalid eventTime"),
        (_set("detail.eventTime", "2026-10-21T01:00:00"), "invalid eventTime"),  # no zone
        (_set("detail.eventTime", "2026-10-21T01:00:00+02:00"), "invalid eventTime"),  # not UTC
        (_set("detail.eventTime", "2" * 10_000), "invalid eventTime"),
        (_set("detail.eventTime", "2027-10-21T01:00:00Z"), "eventTime ahead of the clock"),
        (_set("detail.eventTime", "2026-09-01T01:00:00Z"), "eventTime older than 14 days"),
        (_set("detail.userIdentity", "root"), "invalid userIdentity"),
        (_set("detail.userIdentity.arn", 42), "invalid userIdentity.arn"),
        (_set("detail.userIdentity.arn", "alice"), "invalid userIdentity.arn"),
        (_set("detail.userIdentity.arn", ARN + "x" * 3000), "invalid userIdentity.arn"),
        (_set("detail.userIdentity.arn", ARN + "\n"), "invalid userIdentity.arn"),
        # CloudTrail leaves out a request of over 100 KB (a configuration of long arguments can be one).
        (_set("detail.requestParameters", _DELETE), "requestParameters left out"),
        (_set("detail.requestParameters", None), "requestParameters left out"),
        (_set("detail.requestParameters", ["a"]), "invalid requestParameters"),
        (
            _set("detail.requestParameters.clusterIdentifier", _DELETE),
            "missing requestParameters.clusterIdentifier",
        ),
        (
            _set("detail.requestParameters.clusterIdentifier", "pcs_a#b"),
            "invalid requestParameters.clusterIdentifier",
        ),
        (
            _set("detail.requestParameters.clusterIdentifier", "pcs_" + "a" * 100),
            "invalid requestParameters.clusterIdentifier",
        ),
        (
            _set("detail.requestParameters.computeNodeGroupIdentifier", 7),
            "invalid requestParameters.computeNodeGroupIdentifier",
        ),
        (
            _set("detail.requestParameters.nodeLifecycleActions", "{}"),
            "invalid requestParameters.nodeLifecycleActions",
        ),
        (
            _set(
                "detail.requestParameters.nodeLifecycleActions",
                {"stages": {"nodeBootstrapped": [{"name": "x"}]}},
            ),
            "invalid nodeLifecycleActions",
        ),
        (_set("detail.requestParameters.nodeLifecycleActions", _DEEP), "invalid nodeLifecycleActions"),
        (
            _set(
                "detail.requestParameters.nodeLifecycleActions",
                {
                    "stages": {
                        "nodeBootstrapped": [
                            {"name": "a", "scriptSource": {"scriptLocation": "s3://b/" + "k" * 300_000}}
                        ]
                    }
                },
            ),
            "nodeLifecycleActions too large",
        ),
        (
            _set("detail.responseElements.computeNodeGroup.id", "i-not-a-group"),
            "invalid responseElements.computeNodeGroup.id",
        ),
    ],
)
def test_a_hostile_value_is_a_reason_to_skip(event: object, reason: str) -> None:
    found = parse(event)
    assert isinstance(found, CallParseError), found
    assert found.reason == reason, found.message
    assert len(str(found)) < 1000


@pytest.mark.parametrize(
    ("path", "value"),
    [
        ("detail.recipientAccountId", 123456789012),
        ("account", 123456789012),
        ("detail.awsRegion", ["us-east-1"]),
        ("region", 1),
    ],
)
def test_an_account_or_region_not_a_string_is_an_invalid_event_not_another_stacks(
    path: str, value: object
) -> None:
    """The account as a number, equal to the stack's own, was ignored as "recorded in account
    123456789012, not this stack's": counted as another stack's call, not as the malformed event it is."""
    found = parse_config_call(_set(path, value), now_ms=NOW, account="123456789012", region="us-east-1")
    assert isinstance(found, CallParseError), found
    key = path.rsplit(".", 1)[-1]
    assert (found.reason, found.message) == (f"invalid {key}", f"{key} is not a string")


def test_an_event_of_another_source_is_skipped_naming_its_source() -> None:
    found = parse(_set("source", "aws.ec2"))
    assert isinstance(found, CallParseError)
    assert found.message == "not a CloudTrail event of PCS (source 'aws.ec2')"


def test_an_update_that_names_no_group_is_refused() -> None:
    event = recorded()
    del event["detail"]["requestParameters"]["computeNodeGroupIdentifier"]
    del event["detail"]["responseElements"]
    found = parse(event)
    assert isinstance(found, CallParseError)
    assert found.reason == "missing requestParameters.computeNodeGroupIdentifier"


def test_where_names_the_record_by_its_event_id_bounded() -> None:
    found = parse(_set("detail.eventTime", "nope"))
    assert isinstance(found, CallParseError)
    assert found.where == recorded()["detail"]["eventID"]


_JSON = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text(max_size=20),
    lambda children: (
        st.lists(children, max_size=4) | st.dictionaries(st.text(max_size=10), children, max_size=4)
    ),
    max_leaves=20,
)
_KEYS = (
    "eventID",
    "eventTime",
    "eventName",
    "errorCode",
    "userIdentity",
    "requestParameters",
    "responseElements",
)


@given(key=st.sampled_from(_KEYS), value=_JSON)
def test_any_value_in_any_field_is_read_or_refused_never_raised(key: str, value: Any) -> None:
    event = copy.deepcopy(recorded())
    event["detail"][key] = value
    found = parse(event)
    assert isinstance(found, ConfigCall | CallIgnored | CallParseError)
    json.dumps(str(found))
