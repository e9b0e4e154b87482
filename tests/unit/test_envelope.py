"""The envelope the EventBridge-invoked functions take, held to Powertools' `EventBridgeModel`: no event the
model refuses gets through, the first problem is named where the model locates it, and each function answers
an event without the envelope in one line, unread, before it makes any AWS client."""

from __future__ import annotations

import json
from typing import Any

import pytest
from aws_lambda_powertools.utilities.parser.models.event_bridge import EventBridgeModel
from hypothesis import example, given, settings
from hypothesis import strategies as st
from pydantic import ValidationError

from lifeguard.envelope import envelope_problem, eventbridge_only
from tests.conftest import load_event
from tests.unit.test_cold_imports import ENVIRONMENT as COLD_START_ENVIRONMENT
from tests.unit.test_cold_imports import run_in_function

DELIVERED = {
    "version": "0",
    "id": "6a7e8feb-b491-4cf7-a9f1-bf3703467718",
    "detail-type": "BootstrapLoopDetected",
    "source": "lifeguard",
    "account": "123456789012",
    "time": "2026-10-21T01:12:42Z",
    "region": "us-east-1",
    "resources": [],
    "detail": {"cluster_id": "pcs_abc123de45"},
}
FIELDS = (
    "version",
    "id",
    "source",
    "account",
    "time",
    "region",
    "resources",
    "detail-type",
    "detail",
    "replay-name",
    "replay_name",
    "detail_type",
)
ODD_VALUES = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(-(2**40), 2**40),
    st.floats(allow_nan=False),
    st.text(max_size=30),
    st.lists(st.one_of(st.text(max_size=5), st.integers()), max_size=3),
    st.dictionaries(st.text(max_size=5), st.integers(), max_size=2),
    st.sampled_from(
        [
            "2026-10-21T01:12:42Z",
            "2026-10-21T01:12:42.123Z",
            "2026-10-21T01:12:42.1234567Z",
            "2026-10-21T01:12:42+00:00",
            "2026-10-21",
            "2026-02-30T01:12:42Z",
            "0000-01-01T00:00:00Z",
            "2026-10-21T24:00:00Z",
            "1761009162",
            "{}",
            "",
        ]
    ),
)
# An event as EventBridge delivers it, with some fields taken away or given other values.
MUTATED = st.builds(
    lambda taken, given: {
        **{key: value for key, value in DELIVERED.items() if key not in taken},
        **given,
    },
    st.sets(st.sampled_from(FIELDS), max_size=3),
    st.dictionaries(st.sampled_from(FIELDS), ODD_VALUES, max_size=3),
)


def _model_problem(event: object) -> str | None:
    """Where the model finds the first problem (`` for the whole event), or None when it takes it."""
    try:
        EventBridgeModel.model_validate(event)
    except ValidationError as exc:
        return str(exc.errors()[0]["loc"][0]) if exc.errors()[0]["loc"] else ""
    return None


def _ours(problem: str) -> str:
    """The top-level field an `envelope_problem` names (`` for the whole event)."""
    return "" if problem == "not a JSON object" else problem.split(":", 1)[0].split(".", 1)[0]


@settings(max_examples=600, deadline=None)
@given(MUTATED)
@example(DELIVERED)
@example({**DELIVERED, "resources": ["arn:aws:pcs:us-east-1:123456789012:cluster/pcs_abc123de45", 7]})
@example({**DELIVERED, "replay_name": 3})
@example({**DELIVERED, "detail": "{}", "source": "aws.scheduler"})
@example([DELIVERED])
@example("BootstrapLoopDetected")
def test_the_envelope_is_refused_wherever_the_model_refuses_it(event: Any) -> None:
    ours, model = envelope_problem(event), _model_problem(event)
    if ours is None:
        # Taken: the model takes it, and reads the same detail-type and detail from it.
        assert model is None, event
        parsed = EventBridgeModel.model_validate(event)
        detail = {} if event["detail"] == "{}" else event["detail"]  # EventBridge Scheduler's empty detail
        assert (parsed.detail_type, parsed.detail) == (event["detail-type"], detail)
    elif model is None:
        # Stricter than the model in two ways only: EventBridge's own time format, detail-type by that name.
        assert _ours(ours) in ("time", "detail-type"), (ours, event)
    else:
        # Both refuse: at the same field, unless the first problem found here is one of the two above.
        assert _ours(ours) == model or _ours(ours) in ("time", "detail-type"), (ours, model, event)


def test_events_as_eventbridge_delivers_them_are_taken() -> None:
    cloudtrail = load_event("cloudtrail/update-compute-node-group.json")
    assert envelope_problem(cloudtrail) is None
    assert envelope_problem(DELIVERED) is None
    assert envelope_problem({**DELIVERED, "time": "2026-10-21T01:12:42.5Z", "replay-name": "archive"}) is None


@pytest.mark.parametrize(
    ("event", "problem"),
    [
        ({"detail-type": "BootstrapLoopDetected", "detail": {}}, "version: Field required"),
        ({**DELIVERED, "account": 123456789012}, "account: Input should be a valid string"),
        ({**DELIVERED, "resources": "arn"}, "resources: Input should be a valid array"),
        ({**DELIVERED, "resources": ["arn", None]}, "resources.1: Input should be a valid string"),
        ({**DELIVERED, "detail": "{}"}, "detail: Input should be an object"),
        ({**DELIVERED, "replay-name": 3}, "replay-name: Input should be a valid string"),
        (["a", "list"], "not a JSON object"),
    ],
)
def test_the_first_problem_is_named_in_one_line(event: object, problem: str) -> None:
    assert envelope_problem(event) == problem


def test_a_time_not_as_eventbridge_writes_it_is_named_with_its_value() -> None:
    problem = envelope_problem({**DELIVERED, "time": "yesterday\nat noon"})
    assert (
        problem == "time: not a time as EventBridge writes one, e.g. 2026-10-21T01:12:42Z (yesterday⏎at noon)"
    )


def test_an_event_without_the_envelope_is_answered_unread_and_counted() -> None:
    read: list[dict[str, Any]] = []
    counted: list[tuple[str, float]] = []

    @eventbridge_only(lambda name, value: counted.append((name, value)))
    def handler(event: dict[str, Any], context: object) -> dict[str, Any]:
        read.append(event)
        return {"read": True}

    assert handler({"detail-type": "BootstrapLoopDetected", "detail": {}}, None) == {
        "ignored": "not an EventBridge event (version: Field required)"
    }
    assert (read, counted) == ([], [("InvalidEvents", 1)])
    assert handler(DELIVERED, None) == {"read": True}
    assert read == [DELIVERED]


# Imports a function's app as Lambda does, invokes it with the event given, then says what it answered and
# whether it made an AWS client (boto3 comes with the first).
PROBE = """
import json, sys
sys.path[:0] = [sys.argv[1], sys.argv[2]]
import app

class Context:
    function_name = "probe"
    function_version = "$LATEST"
    memory_limit_in_mb = 256
    invoked_function_arn = "arn:aws:lambda:us-east-1:123456789012:function:probe"
    aws_request_id = "00000000-0000-0000-0000-000000000000"

    def get_remaining_time_in_millis(self):
        return 60_000

answer = app.lambda_handler(json.loads(sys.argv[3]), Context())
print(json.dumps({"answer": answer, "aws": "boto3" in sys.modules}))
"""
# As the cold-import probes run a function, its metrics named.
ENVIRONMENT = {**COLD_START_ENVIRONMENT, "POWERTOOLS_METRICS_NAMESPACE": "PCSLifeguard"}


def _invoke(function: str, event: object) -> tuple[dict[str, Any], list[dict[str, Any]]]:
    """What the function answered, whether it made an AWS client, and what it logged (JSON lines)."""
    *logged, last = run_in_function(function, PROBE, json.dumps(event), ENVIRONMENT).splitlines()
    return json.loads(last), [json.loads(line) for line in logged if line.startswith("{")]


@pytest.mark.parametrize("function", ["notify", "remediate", "review_changes"])
def test_each_eventbridge_function_ignores_an_event_without_the_envelope_in_one_line(function: str) -> None:
    # A BootstrapLoopDetected cut short: what `aws lambda invoke` with a hand-made payload would send.
    cut = {"detail-type": "BootstrapLoopDetected", "source": "lifeguard", "detail": {"cluster_id": "pcs_x"}}
    result, logged = _invoke(function, cut)
    why = "not an EventBridge event (version: Field required)"
    assert result == {"answer": {"ignored": why}, "aws": False}
    errors = [line for line in logged if line.get("level") == "ERROR"]
    assert [line["message"] for line in errors] == [f"event ignored: {why}"]
    counted = [line for line in logged if "_aws" in line]  # the metrics, as Powertools sends them
    assert [line.get("InvalidEvents") for line in counted] == [[1.0]]


@pytest.mark.parametrize(
    ("function", "answer"),
    [
        ("notify", {"detail_type": None, "sent": [], "already_sent": [], "failed": {}}),
        ("remediate", {"events": []}),
        (
            "review_changes",
            {
                "reviewed": 0,
                "ignored": 0,
                "skipped": 1,
                "skipped_reasons": {"not a CloudTrail event of PCS": 1},
                "events": [],
            },
        ),
    ],
)
def test_each_eventbridge_function_reads_an_event_with_the_envelope(
    function: str, answer: dict[str, Any]
) -> None:
    # Another service's event with the whole envelope: read by the handler, which lets it go (the review
    # counts it skipped, as it did before the envelope was checked).
    event = {**DELIVERED, "detail-type": "EC2 Instance State-change Notification", "source": "aws.ec2"}
    result, logged = _invoke(function, event)
    assert result == {"answer": answer, "aws": False}
    assert not any("not an EventBridge event" in str(line.get("message")) for line in logged)
