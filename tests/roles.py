"""Every AWS call a function's code makes in a test, held to that function's role in template.yaml as IAM
holds it: the actions a call needs are those IAM checks (an item of a DynamoDB transaction is checked as
its own PutItem/UpdateItem/DeleteItem/ConditionCheckItem: there is no IAM action TransactWriteItems), and a
call its role does not allow is written down; the test fails at its end, naming each.

Moto does not enforce IAM, and the template test compares the roles with what the stores say they need:
this is what checks what they say against what they do. A function's code is the time spent inside its
handler's entry points (`ENTRY_POINTS`); setup and assertions of a test are no function's.
"""

from __future__ import annotations

import contextvars
import functools
from collections.abc import Callable, Iterator
from typing import Any

import pytest
from botocore.client import BaseClient

from tests.unit.test_template import allowed

_TRANSACT_ITEM = {
    "Put": "dynamodb:PutItem",
    "Update": "dynamodb:UpdateItem",
    "Delete": "dynamodb:DeleteItem",
    "ConditionCheck": "dynamodb:ConditionCheckItem",
}
# S3 operations whose IAM action has another name.
_S3_ACTIONS = {"HeadObject": "s3:GetObject", "ListObjectsV2": "s3:ListBucket", "HeadBucket": "s3:ListBucket"}


def actions_needed(service: str, operation: str, params: dict[str, Any]) -> set[str]:
    """The IAM actions one API call needs (`service`: the endpoint prefix, as IAM names the service)."""
    if service == "dynamodb" and operation == "TransactWriteItems":
        return {_TRANSACT_ITEM[kind] for item in params.get("TransactItems", ()) for kind in item}
    if service == "dynamodb" and operation == "TransactGetItems":
        return {"dynamodb:GetItem"}
    if service == "s3" and operation in _S3_ACTIONS:
        return {_S3_ACTIONS[operation]}
    return {f"{service}:{operation}"}


def _entry_points() -> dict[str, list[tuple[type, str]]]:
    from lifeguard.handlers.config_review import ConfigReviewHandler
    from lifeguard.handlers.node_reports import NodeReportsHandler
    from lifeguard.handlers.scaling_events import ScalingEventsHandler
    from lifeguard.notify.notifier import Notifier
    from lifeguard.remediation.remediator import Remediator

    return {
        "ScalingEvents": [
            (ScalingEventsHandler, name) for name in ("handle_event", "handle_messages", "handle_records")
        ],
        "NodeReports": [(NodeReportsHandler, name) for name in ("handle_event", "handle_messages")],
        "Remediate": [(Remediator, name) for name in ("handle_event", "handle")],
        "Notify": [(Notifier, "handle_event")],
        "ReviewChanges": [(ConfigReviewHandler, "handle_event")],
    }


_CHECKS: list[RoleCheck] = []  # the running test's (`roles_hold`)


def as_function(function: str, method: Callable[..., Any]) -> Callable[..., Any]:
    """`method` run as `function`'s code (a handler the tests load themselves, as a built package's)."""

    @functools.wraps(method)
    def entered(*args: Any, **kwargs: Any) -> Any:
        return _CHECKS[-1].as_function(function, method)(*args, **kwargs)

    return entered


class RoleCheck:
    """The calls made inside a function's entry points that its role does not allow."""

    def __init__(self) -> None:
        self.function: contextvars.ContextVar[str | None] = contextvars.ContextVar("function", default=None)
        self.refused: list[str] = []
        self.checked = 0
        self._allowed: dict[str, set[str]] = {}

    def allows(self, function: str) -> set[str]:
        if function not in self._allowed:
            self._allowed[function] = allowed(function)
        return self._allowed[function]

    def as_function(self, function: str, method: Callable[..., Any]) -> Callable[..., Any]:
        @functools.wraps(method)
        def entered(*args: Any, **kwargs: Any) -> Any:
            token = self.function.set(function)
            try:
                return method(*args, **kwargs)
            finally:
                self.function.reset(token)

        return entered

    def call(self, client: BaseClient, operation: str, params: dict[str, Any]) -> None:
        function = self.function.get()
        if function is None:
            return
        self.checked += 1
        service = client.meta.service_model.endpoint_prefix
        missing = actions_needed(service, operation, params) - self.allows(function)
        if missing:
            self.refused.append(f"{function}Role does not allow {', '.join(sorted(missing))} ({operation})")


@pytest.fixture(autouse=True)
def roles_hold(monkeypatch: pytest.MonkeyPatch) -> Iterator[RoleCheck]:
    """Hold every call of a function's code to its role (module docstring); fail the test on any other."""
    check = RoleCheck()
    for function, points in _entry_points().items():
        for owner, name in points:
            monkeypatch.setattr(owner, name, check.as_function(function, getattr(owner, name)))
    original = BaseClient._make_api_call

    def made(client: BaseClient, operation: str, params: dict[str, Any]) -> Any:
        check.call(client, operation, params)
        return original(client, operation, params)

    monkeypatch.setattr(BaseClient, "_make_api_call", made)
    _CHECKS.append(check)
    try:
        yield check
    finally:
        _CHECKS.remove(check)
    refused = "\n".join(sorted(set(check.refused)))
    assert not refused, f"calls the template's roles do not allow:\n{refused}"
