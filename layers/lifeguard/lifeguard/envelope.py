"""Events as EventBridge delivers them: the envelope a function invoked by EventBridge rules takes.

The notify, remediate and review_changes functions are invoked by EventBridge rules alone. An event without
EventBridge's envelope (a hand-made `aws lambda invoke` payload, another service's event, a test event cut
short) is not one of theirs: it is ignored in one line, counted as `InvalidEvents`, before their handlers
read it.

The envelope is the one Powertools' `EventBridgeModel` describes. That model needs pydantic, which the
Lambda package does not carry (its import alone is about half of a function's cold start,
`bench/cold_start.py`), so the checks below do its work: field by field, in the model's order, they refuse
every event the model refuses and name its first problem where the model locates it
(`tests/unit/test_envelope.py` holds them to the model). They are stricter in one way: `time` is taken only
as EventBridge writes it (`2026-10-21T01:12:42Z`), not as any date or number the model would parse, and
`detail-type` only by that name.
"""

from __future__ import annotations

import functools
import logging
import re
from collections.abc import Callable
from datetime import datetime
from typing import Any, TypeVar

from lifeguard.bounds import clip, one_line
from lifeguard.metrics import Metric

__all__ = ["envelope_problem", "eventbridge_only"]

logger = logging.getLogger("lifeguard")

# EventBridge's `time`: UTC to the second (a fraction, if any, as RFC 3339 allows).
_TIME = re.compile(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(?:\.\d{1,9})?Z")
_STRING = "Input should be a valid string"
_MISSING = "Field required"

Context = TypeVar("Context")
Handler = Callable[[dict[str, Any], Context], dict[str, Any]]


def envelope_problem(event: object) -> str | None:
    """None when `event` is an event as EventBridge delivers it, else its first problem in one line
    (`field: what is wrong`, or `not a JSON object`)."""
    if type(event) is not dict:
        return "not a JSON object"
    for name, check in _FIELDS:  # in the model's order: its first problem is the one named
        if name not in event:
            return f"{name}: {_MISSING}"
        problem = check(event[name], event)
        if problem is not None:
            return f"{name}{problem}"
    # The replay's name, by its alias or (as the model takes it too) by its field's name.
    name = "replay-name" if "replay-name" in event else "replay_name"
    replay = event.get(name)
    if replay is not None and type(replay) is not str:
        return f"{name}: {_STRING}"
    return None


def _text(value: object, _event: dict[str, Any]) -> str | None:
    return None if type(value) is str else f": {_STRING}"


def _time(value: object, _event: dict[str, Any]) -> str | None:
    if type(value) is str and _TIME.fullmatch(value) is not None and _is_moment(value):
        return None
    shown = clip(one_line(value), 40)
    return f": not a time as EventBridge writes one, e.g. 2026-10-21T01:12:42Z ({shown})"


def _resources(value: object, _event: dict[str, Any]) -> str | None:
    if type(value) is not list:
        return ": Input should be a valid array"
    for index, resource in enumerate(value):
        if type(resource) is not str:
            return f".{index}: {_STRING}"
    return None


def _detail(value: object, event: dict[str, Any]) -> str | None:
    # EventBridge Scheduler sends an empty detail as the text `{}` (the model takes it, as `{}`).
    if type(value) is dict or (value == "{}" and event.get("source") == "aws.scheduler"):
        return None
    return ": Input should be an object"


# The envelope's fields in the model's order, each with its check: the problem after the field's name.
_FIELDS: tuple[tuple[str, Callable[[object, dict[str, Any]], str | None]], ...] = (
    ("version", _text),
    ("id", _text),
    ("source", _text),
    ("account", _text),
    ("time", _time),
    ("region", _text),
    ("resources", _resources),
    ("detail-type", _text),
    ("detail", _detail),
)


def _is_moment(text: str) -> bool:
    try:
        datetime.fromisoformat(text)
    except ValueError:
        return False
    return True


def eventbridge_only(metric: Metric) -> Callable[[Handler[Context]], Handler[Context]]:
    """A function's handler that takes EventBridge's events alone: any other event is said in one line,
    counted (`InvalidEvents`) and answered `{"ignored": why}`, unread (retrying it would not make it one)."""

    def wrap(handler: Handler[Context]) -> Handler[Context]:
        @functools.wraps(handler)
        def delivered(event: dict[str, Any], context: Context) -> dict[str, Any]:
            problem = envelope_problem(event)
            if problem is None:
                return handler(event, context)
            why = f"not an EventBridge event ({clip(problem, 300)})"
            logger.error("event ignored: %s", why)
            metric("InvalidEvents", 1)
            return {"ignored": why}

        return delivered

    return wrap
