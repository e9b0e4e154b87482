"""The one line an operator command prints for an AWS failure (`lifeguard_cli.deployment.aws_error_line`):
what to set, grant or start, naming what is at fault."""

from __future__ import annotations

import pytest
from botocore.exceptions import CredentialRetrievalError, EndpointConnectionError

from lifeguard.errors import AwsCallError
from lifeguard_cli.deployment import aws_error_line

UP, DOWN = "http://127.0.0.1:37475", "http://127.0.0.1:9"


@pytest.fixture(autouse=True)
def _no_endpoints(monkeypatch: pytest.MonkeyPatch) -> None:
    import os

    for name in [name for name in os.environ if name.startswith("AWS_ENDPOINT_URL")]:
        monkeypatch.delenv(name)


def test_an_unreachable_service_endpoint_is_named_not_the_one_that_is_up(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The local AWS up and only the PCS endpoint down: the line blamed AWS_ENDPOINT_URL, the one that is
    up, for a call it did not send."""
    monkeypatch.setenv("AWS_ENDPOINT_URL", UP)
    monkeypatch.setenv("AWS_ENDPOINT_URL_PCS", DOWN)
    refused = AwsCallError(
        "GetComputeNodeGroup", "EndpointConnectionError", f'Could not connect to the endpoint URL: "{DOWN}/"'
    )
    line = aws_error_line(refused)
    assert line is not None
    assert line.endswith(
        f"; AWS_ENDPOINT_URL_PCS sends its service's calls to {DOWN}: is it up (lifeguard local up), "
        "or unset it"
    )


def test_the_endpoint_for_every_call_is_named_when_it_is_the_one_called(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("AWS_ENDPOINT_URL", DOWN)
    monkeypatch.setenv("AWS_ENDPOINT_URL_PCS", UP)
    line = aws_error_line(EndpointConnectionError(endpoint_url=f"{DOWN}/"))
    assert line is not None
    assert line.endswith(
        f"; AWS_ENDPOINT_URL sends every call to {DOWN}: is it up (lifeguard local up), or unset it"
    )


@pytest.mark.parametrize("set_elsewhere", [False, True], ids=["none-set", "set-elsewhere"])
def test_no_endpoint_variable_of_the_call_says_only_what_to_check(
    monkeypatch: pytest.MonkeyPatch, set_elsewhere: bool
) -> None:
    """A call that went to AWS itself (a profile's own endpoint, or --local's) is not laid at the door of
    an AWS_ENDPOINT_URL that points elsewhere."""
    if set_elsewhere:
        monkeypatch.setenv("AWS_ENDPOINT_URL", UP)
    line = aws_error_line(EndpointConnectionError(endpoint_url="https://pcs.us-east-1.amazonaws.com/"))
    assert line is not None
    assert line.endswith("): check --region and the network")


@pytest.mark.parametrize("said", ["", "token expired"])
def test_a_credential_process_that_fails_says_where_to_look(said: str) -> None:
    """A credential_process that failed without a word ended the line with a colon and nothing after."""
    line = aws_error_line(CredentialRetrievalError(provider="custom-process", error_msg=said))
    expected = "Error when retrieving credentials from custom-process" + (f": {said}" if said else "")
    assert line == f"{expected}: check the profile's credential source (aws configure export-credentials)"


@pytest.mark.parametrize(
    ("code", "said"),
    [
        (
            "AccessDenied",
            "DescribeStacks was denied: User: arn:aws:iam::123456789012:user/ops is not authorized to "
            "perform: cloudformation:DescribeStacks (grant it to the credentials in use, or pass --profile)",
        ),
        (
            "ExpiredToken",
            "DescribeStacks: the AWS credentials are expired or invalid (ExpiredToken); refresh them",
        ),
        ("Throttling", "Throttling: Rate exceeded"),
    ],
)
def test_the_stacks_read_says_what_to_grant_or_refresh_as_every_other_call_does(code: str, said: str) -> None:
    """The stack is every operator command's first call: a refusal of it was printed as AWS worded it, without
    the advice the later calls' lines give."""
    import boto3
    from botocore.stub import Stubber

    from lifeguard_cli.deployment import DeploymentError, read_deployment

    session = boto3.Session(aws_access_key_id="a", aws_secret_access_key="b", region_name="us-east-1")
    client = session.client("cloudformation")
    messages = {
        "AccessDenied": "User: arn:aws:iam::123456789012:user/ops is not authorized to perform: "
        "cloudformation:DescribeStacks",
        "ExpiredToken": "The security token included in the request is expired",
        "Throttling": "Rate exceeded",
    }
    stubbed = Stubber(client)
    stubbed.add_client_error("describe_stacks", service_error_code=code, service_message=messages[code])

    class Session:
        region_name = "us-east-1"

        def client(self, service: str) -> object:
            assert service == "cloudformation"
            return client

    with stubbed, pytest.raises(DeploymentError) as raised:
        read_deployment("pcs-lifeguard", session=Session())
    assert str(raised.value) == f"cannot read stack pcs-lifeguard in us-east-1: {said}"
