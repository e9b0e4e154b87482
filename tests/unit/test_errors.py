"""Lifeguard's exceptions: the one translation of a failed AWS call, and a config error that lists every
problem at once."""

from __future__ import annotations

from typing import Any

import pytest
from botocore.exceptions import ClientError, EndpointConnectionError, ReadTimeoutError

from lifeguard.errors import (
    AwsCallError,
    GroupNotFoundError,
    InvalidLifecycleConfigError,
    LifeguardError,
    Problem,
)


def client_error(response: dict[str, Any], operation: str = "UpdateComputeNodeGroup") -> ClientError:
    return ClientError(response, operation)


def test_a_client_error_gives_its_service_code_and_message() -> None:
    exc = client_error({"Error": {"Code": "ConflictException", "Message": "group is UPDATING"}})
    error = AwsCallError.from_exception("UpdateComputeNodeGroup", exc)
    assert (error.operation, error.code, error.message) == (
        "UpdateComputeNodeGroup",
        "ConflictException",
        "group is UPDATING",
    )
    assert str(error) == "UpdateComputeNodeGroup failed: ConflictException: group is UPDATING"
    assert error.retry_after_seconds is None
    assert isinstance(error, LifeguardError)
    assert isinstance(error, RuntimeError)


@pytest.mark.parametrize(
    ("retry_after", "kept"),
    [(30, 30), (0, 0), (3600, 3600), (86_400, 3600), (-1, None), (True, None), ("30", None), (2.5, None)],
)
def test_pcs_retry_after_is_kept_when_it_is_a_sane_whole_number_capped_at_an_hour(
    retry_after: object, kept: int | None
) -> None:
    exc = client_error(
        {"Error": {"Code": "ThrottlingException", "Message": "slow"}, "retryAfterSeconds": retry_after}
    )
    assert AwsCallError.from_exception("UpdateComputeNodeGroup", exc).retry_after_seconds == kept


@pytest.mark.parametrize(
    ("status", "kept"),
    [(500, 500), (429, 429), (400, 400), (99, None), (600, None), ("500", None), (True, None)],
)
def test_the_answer_s_http_status_is_kept_when_it_is_one(status: object, kept: int | None) -> None:
    exc = client_error(
        {"Error": {"Code": "InternalFailure", "Message": "x"}, "ResponseMetadata": {"HTTPStatusCode": status}}
    )
    assert AwsCallError.from_exception("UpdateComputeNodeGroup", exc).status == kept


def test_an_error_without_a_response_has_no_status() -> None:
    exc = EndpointConnectionError(endpoint_url="https://pcs")
    assert AwsCallError.from_exception("GetComputeNodeGroup", exc).status is None


def test_an_error_without_a_response_is_named_by_its_type() -> None:
    error = AwsCallError.from_exception("PutEvents", EndpointConnectionError(endpoint_url="https://events"))
    assert error.code == "EndpointConnectionError"
    assert "https://events" in error.message
    timeout = AwsCallError.from_exception("GetItem", ReadTimeoutError(endpoint_url="https://dynamodb"))
    assert timeout.code == "ReadTimeoutError"


def test_an_empty_code_or_message_falls_back_and_long_ones_are_cut() -> None:
    empty = client_error({"Error": {"Code": "", "Message": ""}})
    error = AwsCallError.from_exception("GetItem", empty)
    assert error.code == "ClientError"
    assert error.message == str(empty)
    huge = client_error({"Error": {"Code": "C" * 500, "Message": "m" * 5000}})
    error = AwsCallError.from_exception("GetItem", huge)
    assert (len(error.code), len(error.message)) == (100, 1000)


def test_a_missing_group_is_an_aws_call_error() -> None:
    error = GroupNotFoundError("GetComputeNodeGroup", "ResourceNotFoundException", "no such group")
    assert isinstance(error, AwsCallError)
    assert error.code == "ResourceNotFoundException"


def test_a_config_error_lists_every_problem_with_its_path() -> None:
    problems = [
        Problem("stages.nodeBootstrapped[2].onError", "'TERMINATED' is not one of TERMINATE"),
        Problem("", "expected an object"),
    ]
    error = InvalidLifecycleConfigError(problems)
    assert isinstance(error, ValueError)
    assert error.problems == tuple(problems)
    assert str(error) == (
        "invalid nodeLifecycleActions (2 problems):\n"
        "  stages.nodeBootstrapped[2].onError: 'TERMINATED' is not one of TERMINATE\n"
        "  (document): expected an object"
    )
    assert str(InvalidLifecycleConfigError(problems[:1])).startswith(
        "invalid nodeLifecycleActions (1 problem):"
    )
    assert problems[1].to_dict() == {"path": "", "message": "expected an object"}
