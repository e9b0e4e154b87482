"""The deployed stack as operator commands see it: its outputs and parameters (CloudFormation
DescribeStacks), and clients for the same account and region.

The stack is `--stack-name`, else `LIFEGUARD_STACK_NAME`, else `stack_name` in the `samconfig.toml` of the
current directory (what `sam deploy` used), else `pcs-lifeguard`. The region is `--region`, else boto3's
own (environment, profile), else the `region` `sam deploy --guided` saved in that `samconfig.toml`.
"""

from __future__ import annotations

import os
import tomllib
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

from lifeguard.errors import AwsCallError, LifeguardError
from lifeguard.settings import setting

__all__ = [
    "DEFAULT_STACK_NAME",
    "Deployment",
    "DeploymentError",
    "LoopbackSession",
    "SamConfig",
    "aws_error_line",
    "aws_session",
    "command_line",
    "read_deployment",
    "read_samconfig",
    "session_client",
]

DEFAULT_STACK_NAME = "pcs-lifeguard"
SAMCONFIG = "samconfig.toml"


class DeploymentError(LifeguardError):
    """The stack cannot be read, or lacks what a command needs; the message says why in one line."""


def command_line(*words: str, where: str = "") -> str:
    """A `lifeguard` command a message tells the operator to run, with `where`, the options that chose the
    stack the message's command ran against (`--local`, `--stack-name X`, ...): pasted, it goes there too,
    not to the default stack and region."""
    return " ".join(["lifeguard", *words, *([where] if where else [])])


@dataclass(frozen=True)
class SamConfig:
    """What `samconfig.toml` says about the default deployment."""

    stack_name: str | None = None
    region: str | None = None


def read_samconfig(directory: Path | None = None) -> SamConfig:
    """The default environment's `stack_name` and `region` from `samconfig.toml` in `directory` (the
    current one by default): the deploy command's parameters, else the global ones, as `sam deploy` reads
    them (`sam deploy --guided` saves the stack name it was given under the deploy command's). Empty when
    there is no such file; a file that is not TOML is an error."""
    path = (directory or Path.cwd()) / SAMCONFIG
    if not path.is_file():
        return SamConfig()
    try:
        document = tomllib.loads(path.read_text())
    except (OSError, UnicodeDecodeError, tomllib.TOMLDecodeError) as exc:
        raise DeploymentError(f"cannot read {path}: {exc}") from None
    default = document.get("default")
    sections = [default.get(command, {}) for command in ("deploy", "global")] if default else []
    values: dict[str, str] = {}
    for section in sections:
        parameters = section.get("parameters", {}) if isinstance(section, Mapping) else {}
        for key in ("stack_name", "region"):
            value = parameters.get(key) if isinstance(parameters, Mapping) else None
            if isinstance(value, str) and value and key not in values:
                values[key] = value
    return SamConfig(stack_name=values.get("stack_name"), region=values.get("region"))


@dataclass(frozen=True)
class Deployment:
    """One deployed stack: its outputs and parameters by name, and the session that read them."""

    stack_name: str
    region: str
    status: str
    outputs: Mapping[str, str]
    parameters: Mapping[str, str]
    session: Any = field(repr=False, compare=False)

    def output(self, name: str) -> str:
        """The value of output `name`; raises DeploymentError naming the stack when it has none."""
        value = self.outputs.get(name)
        if value is None:
            raise DeploymentError(
                f"stack {self.stack_name} ({self.status}, {self.region}) has no output {name}: "
                "deploy this version of Lifeguard (sam build && sam deploy)"
            )
        return value

    def parameter(self, name: str) -> str:
        """The value of parameter `name`; raises DeploymentError naming the stack when it has none."""
        value = self.parameters.get(name)
        if value is None:
            raise DeploymentError(f"stack {self.stack_name} ({self.region}) has no parameter {name}")
        return value

    def client(self, service: str) -> Any:
        """A boto3 client in the stack's account and region (see `session_client`)."""
        return session_client(self.session, service)


def session_client(session: Any, service: str) -> Any:
    """A boto3 client of `session` (endpoints from boto3's configuration, `AWS_ENDPOINT_URL_<SERVICE>`
    included), with the layer's retries and PCS model."""
    from lifeguard.aws.clients import client_config

    if session.region_name is None:
        raise DeploymentError(NO_REGION)
    return session.client(service, config=client_config())


NO_REGION = "no AWS region: pass --region, set AWS_REGION, or give the profile a region"
NO_CREDENTIALS = (
    "no AWS credentials: pass --profile, set AWS_PROFILE, or run aws configure (or aws sso login)"
)


def aws_error_line(exc: BaseException) -> str | None:
    """One line for an error of botocore that reached a command, or for a refused call of the layer's
    gateways (`AwsCallError`) that says what to grant or refresh; None for any other error: what to set,
    grant or fix, never a traceback."""
    from botocore import exceptions as aws

    if isinstance(exc, aws.NoRegionError):
        return NO_REGION
    if isinstance(exc, aws.NoCredentialsError | aws.PartialCredentialsError):
        return NO_CREDENTIALS
    if isinstance(exc, aws.ProfileNotFound):
        profile = exc.kwargs.get("profile")
        return f"no AWS profile {profile!r} in the AWS configuration (aws configure list-profiles)"
    if isinstance(exc, aws.SSOError | aws.TokenRetrievalError | aws.UnauthorizedSSOTokenError):
        return f"the AWS SSO session cannot be used ({exc}): run aws sso login"
    if isinstance(exc, aws.CredentialRetrievalError):  # a credential_process that failed, maybe silently
        said = str(exc).strip().rstrip(":")
        return f"{said}: check the profile's credential source (aws configure export-credentials)"
    if isinstance(exc, aws.EndpointConnectionError | aws.ConnectTimeoutError | aws.ReadTimeoutError):
        return _unreachable(str(exc))
    if isinstance(exc, aws.ClientError):
        error = exc.response.get("Error", {})
        operation, code, message = exc.operation_name, error.get("Code", "Error"), error.get("Message", "")
        return _refused(operation, code, message) or f"{operation} failed: {code}: {message}"
    if isinstance(exc, AwsCallError):  # a call of the layer's gateways, translated there: its own words
        if exc.code in _UNREACHABLE:
            return _unreachable(f"{exc.operation}: {exc.message}")
        return _refused(exc.operation, exc.code, exc.message) or _unset(exc)  # but for what to do
    if isinstance(exc, aws.BotoCoreError):
        return str(exc)
    return None


# botocore's names for a call that got no answer (a gateway's translation keeps them as its code).
_UNREACHABLE = frozenset(
    {"EndpointConnectionError", "ConnectTimeoutError", "ReadTimeoutError", "ConnectionClosedError"}
)


def _unreachable(what: str) -> str:
    """A call that got no answer: what to check, and the variable that points the call where it went (a
    service's own `AWS_ENDPOINT_URL_<SERVICE>` before `AWS_ENDPOINT_URL`, which sends every call)."""
    line = f"cannot reach AWS ({what}): check --region and the network"
    named = _endpoint_variable(what)
    if named is not None:
        name, endpoint = named
        sends = "every call" if name == "AWS_ENDPOINT_URL" else "its service's calls"
        line += f"; {name} sends {sends} to {endpoint}: is it up (lifeguard local up), or unset it"
    return line


def _endpoint_variable(what: str) -> tuple[str, str] | None:
    """The endpoint variable (name, value) whose host and port are those of the URL botocore names in
    `what` (`... endpoint URL: "http://..."`), None when none is (the call went elsewhere); without a URL
    named, `AWS_ENDPOINT_URL` when it is set."""
    import re

    everything = os.environ.get("AWS_ENDPOINT_URL", "")
    services = sorted(
        (name, value) for name, value in os.environ.items() if name.startswith("AWS_ENDPOINT_URL_")
    )
    found = re.search(r'endpoint URL: "([^"]*)"', what)
    if found is None:
        return ("AWS_ENDPOINT_URL", everything) if everything else None
    called = urlsplit(found.group(1)).netloc
    for name, value in [*services, ("AWS_ENDPOINT_URL", everything)]:  # a service's own first
        if value and urlsplit(value).netloc == called:
            return name, value
    return None


_DENIED = frozenset({"AccessDenied", "AccessDeniedException", "UnauthorizedOperation"})
_BAD_CREDENTIALS = frozenset(
    {"ExpiredToken", "ExpiredTokenException", "UnrecognizedClientException", "InvalidClientTokenId"}
)


def _refused(operation: str, code: str, message: str) -> str | None:
    """What to grant or refresh, when AWS refused a call for the credentials' sake; else None."""
    if code in _DENIED:
        return f"{operation} was denied: {message} (grant it to the credentials in use, or pass --profile)"
    if code in _BAD_CREDENTIALS:
        return f"{operation}: the AWS credentials are expired or invalid ({code}); refresh them"
    return None


_TABLE_OPERATIONS = frozenset(
    {"Scan", "Query", "GetItem", "BatchGetItem", "PutItem", "UpdateItem", "DeleteItem"}
)


def _unset(exc: AwsCallError) -> str | None:
    """What to set, when a gateway's call failed for want of a setting (credentials, a region, the
    table's name); else None."""
    if exc.code in ("NoCredentialsError", "PartialCredentialsError"):
        return NO_CREDENTIALS
    if exc.code == "NoRegionError":
        return NO_REGION
    if exc.code == "ResourceNotFoundException" and exc.operation in _TABLE_OPERATIONS:
        return (
            f"{exc.operation}: no such table of Lifeguard's in this region: check --table (or "
            "$LIFEGUARD_TABLE), --stack-name and --region"
        )
    return None


def aws_session(region: str | None, profile: str | None, fallback_region: str | None = None) -> Any:
    """A boto3 session of `profile` in `region`, else `AWS_REGION` (which the AWS CLI and the other SDKs
    put before the rest; boto3 alone reads it not), else boto3's own region (`AWS_DEFAULT_REGION`, the
    profile's), else `fallback_region`."""
    import boto3
    import botocore.session
    from botocore.exceptions import ProfileNotFound

    from lifeguard.aws.clients import with_pcs_model

    core = botocore.session.Session(profile=profile)
    region = region or os.environ.get("AWS_REGION") or None
    try:
        with_pcs_model(core)
        # Not set, or set empty (botocore would build https://cloudformation..amazonaws.com from that).
        if region is None and not core.get_config_variable("region"):
            region = fallback_region
            if not region:
                raise DeploymentError(NO_REGION)
        return boto3.session.Session(botocore_session=core, region_name=region)
    except ProfileNotFound as exc:
        raise DeploymentError(str(aws_error_line(exc))) from None


class LoopbackSession:
    """A boto3 session whose every client talks to a local AWS on loopback with test credentials: no
    setting of the shell or a profile (an `AWS_ENDPOINT_URL_<SERVICE>`, `ignore_configured_endpoint_urls`,
    keys) can send its calls to a real account."""

    def __init__(self, endpoint_url: str, pcs_endpoint_url: str, region: str = "us-east-1") -> None:
        import boto3
        import botocore.session

        from lifeguard.aws.clients import with_pcs_model

        for url in (endpoint_url, pcs_endpoint_url):
            if urlsplit(url).hostname not in LOOPBACK:
                raise DeploymentError(f"{url!r} is not a local AWS on loopback")
        # AWS_PROFILE is not read: a profile the shell names (missing here, perhaps) has no say in it.
        core = with_pcs_model(botocore.session.Session(session_vars={"profile": (None, None, None, None)}))
        core.set_credentials("testing", "testing", "testing")
        self._session: Any = boto3.session.Session(botocore_session=core, region_name=region)
        self._endpoints = (endpoint_url, pcs_endpoint_url)
        self.region_name = region

    def client(self, service: str, **kwargs: Any) -> Any:
        """A client of `service` on the local AWS (its PCS endpoint for pcs)."""
        endpoint = self._endpoints[1] if service == "pcs" else self._endpoints[0]
        return self._session.client(service, endpoint_url=endpoint, **kwargs)


LOOPBACK = ("127.0.0.1", "localhost", "::1")


def read_deployment(
    stack_name: str | None = None,
    *,
    region: str | None = None,
    profile: str | None = None,
    directory: Path | None = None,
    session: Any = None,
) -> Deployment:
    """DescribeStacks of the stack (see the module docstring for the defaults); raises DeploymentError
    with one line for a missing stack, missing credentials or region, or a failed call."""
    from botocore.exceptions import BotoCoreError, ClientError, NoCredentialsError, ProfileNotFound

    samconfig = read_samconfig(directory)
    name = setting("stack_name", stack_name, samconfig.stack_name or DEFAULT_STACK_NAME, str)
    session = session or aws_session(region, profile, samconfig.region)
    if session.region_name is None:
        raise DeploymentError(NO_REGION)
    where = f"stack {name} in {session.region_name}"
    try:
        stacks = session.client("cloudformation").describe_stacks(StackName=name)["Stacks"]
    except ClientError as exc:
        error = exc.response.get("Error", {})
        code, message = error.get("Code", "Error"), error.get("Message", str(exc))
        if code == "ValidationError" and "does not exist" in message:
            raise DeploymentError(
                f"no {where}: pass --stack-name (or LIFEGUARD_STACK_NAME), or --region"
            ) from None
        refused = _refused("DescribeStacks", code, message)  # what to grant or refresh, as for every call
        raise DeploymentError(f"cannot read {where}: {refused or f'{code}: {message}'}") from None
    except NoCredentialsError:
        raise DeploymentError(
            f"cannot read {where}: no AWS credentials (pass --profile, or configure the AWS CLI)"
        ) from None
    except ProfileNotFound as exc:
        raise DeploymentError(str(aws_error_line(exc))) from None
    except BotoCoreError as exc:
        raise DeploymentError(f"cannot read {where}: {aws_error_line(exc) or exc}") from None
    if not stacks:
        raise DeploymentError(f"no {where}")
    stack = stacks[0]
    return Deployment(
        stack_name=str(stack.get("StackName", name)),
        region=str(session.region_name),
        status=str(stack.get("StackStatus", "UNKNOWN")),
        outputs={o["OutputKey"]: str(o.get("OutputValue", "")) for o in stack.get("Outputs", [])},
        parameters={p["ParameterKey"]: str(p.get("ParameterValue", "")) for p in stack.get("Parameters", [])},
        session=session,
    )
