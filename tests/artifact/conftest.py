"""The built artifacts and a Lambda-like way to run them.

`sam build` wrote `.aws-sam/build/`: one directory per function (its `app.py`), one per layer
architecture (`python/`), and the built template that names them. `invoke` runs one built handler in a
fresh `python3.12 -I -S -B` whose `sys.path` is the function's directory, then the layer's `python/`
(when it has one), then a boto3 alone, then the standard library: what Lambda's python3.12 runtime has
(`/var/task`, `/opt/python`, `/var/runtime`), and nothing of this repository or its virtualenv. `-B`
keeps the build as it was built: the layer's `.pyc` are used, none is written.
"""

from __future__ import annotations

import inspect
import json
import os
import platform
import subprocess
import sys
import uuid
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
import yaml  # type: ignore[import-untyped]

from lifeguard_cli.local.artifact_boto3 import boto3_dir, claimed_oldest_boto3

ROOT = Path(__file__).resolve().parents[2]
BUILD = ROOT / ".aws-sam" / "build"
BUILT_TEMPLATE = BUILD / "template.yaml"
# platform.machine() → the layer's Metadata.BuildArchitecture (Lambda's names).
ARCHITECTURES = {"x86_64": "x86_64", "AMD64": "x86_64", "aarch64": "arm64", "arm64": "arm64"}
# Set to probe another boto3 than the one layers/lifeguard/requirements.txt claims, e.g. 1.34.0.
BOTO3_OVERRIDE = "LIFEGUARD_ARTIFACT_BOTO3"
INVOKE_TIMEOUT_SECONDS = 120


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line("markers", "artifact: runs what `sam build` wrote (skipped before a build)")


class TemplateValueError(LookupError):
    """The built template gives something a value the test has no local counterpart for."""


@dataclass(frozen=True)
class Build:
    """`.aws-sam/build`: where each function and layer was built, and the built template's settings."""

    root: Path
    template: Mapping[str, Any]

    @property
    def resources(self) -> Mapping[str, Any]:
        resources: Mapping[str, Any] = self.template["Resources"]
        return resources

    def layer_ids(self) -> dict[str, str]:
        """{BuildArchitecture: logical id} of the layers."""
        return {
            resource["Metadata"]["BuildArchitecture"]: logical_id
            for logical_id, resource in self.resources.items()
            if isinstance(resource, Mapping) and resource.get("Type") == "AWS::Serverless::LayerVersion"
        }

    def layer_dir(self, architecture: str) -> Path:
        """The built `python/` directory of the layer of `architecture` (arm64 or x86_64)."""
        logical_id = self.layer_ids().get(architecture)
        if logical_id is None:
            raise TemplateValueError(f"the built template has no layer with BuildArchitecture {architecture}")
        return self.root / str(self.resources[logical_id]["Properties"]["ContentUri"]) / "python"

    def function_dir(self, logical_id: str) -> Path:
        """The built code directory of function `logical_id`."""
        return self.root / str(self.resources[logical_id]["Properties"]["CodeUri"])

    def _function_setting(self, logical_id: str, name: str) -> Any:
        own = self.resources[logical_id]["Properties"].get(name)
        return own if own is not None else self.template.get("Globals", {}).get("Function", {}).get(name)

    def handler(self, logical_id: str) -> str:
        """`module.function`, as the template's Handler says."""
        return str(self._function_setting(logical_id, "Handler"))

    def memory_mb(self, logical_id: str) -> int:
        return int(self._function_setting(logical_id, "MemorySize") or 128)

    def timeout_seconds(self, logical_id: str) -> int:
        return int(self._function_setting(logical_id, "Timeout") or 3)

    def environment(self, logical_id: str, values: Mapping[str, str]) -> dict[str, str]:
        """The function's variables, Globals' then its own, each reference resolved by `resolve`."""
        variables: dict[str, Any] = {}
        for source in (self.template.get("Globals", {}).get("Function", {}), self.resources[logical_id]):
            properties = source.get("Properties", source)
            variables.update((properties.get("Environment") or {}).get("Variables") or {})
        return {
            name: self.resolve(value, values, f"{logical_id}: {name}") for name, value in variables.items()
        }

    def properties(self, logical_id: str, values: Mapping[str, str]) -> dict[str, str]:
        """A resource's top-level properties, resolved (a custom resource's ResourceProperties)."""
        properties = self.resources[logical_id]["Properties"]
        return {
            name: self.resolve(value, values, f"{logical_id}: {name}") for name, value in properties.items()
        }

    def resolve(self, value: Any, values: Mapping[str, str], where: str) -> str:
        """A literal as a string; `Ref` and `Fn::GetAtt` to what `values` names (`StateTable`,
        `NodeBundle.BundleSha256`), a parameter's `Ref` to `values` or else its Default."""
        if isinstance(value, str | int | float | bool):
            return str(value).lower() if isinstance(value, bool) else str(value)
        if isinstance(value, Mapping) and set(value) == {"Ref"}:
            name = str(value["Ref"])
            if name in values:
                return values[name]
            parameter = self.template.get("Parameters", {}).get(name)
            if parameter is not None and "Default" in parameter:
                return str(parameter["Default"])
        if isinstance(value, Mapping) and set(value) == {"Fn::Join"}:
            separator, parts = value["Fn::Join"]
            listed = self.resolve(parts, values, where) if isinstance(parts, Mapping) else None
            if listed is not None:  # a list parameter (CommaDelimitedList): its default, joined again
                return str(separator).join(part for part in listed.split(",") if part)
        if isinstance(value, Mapping) and set(value) == {"Fn::GetAtt"}:
            attribute = value["Fn::GetAtt"]
            name = ".".join(attribute) if isinstance(attribute, list) else str(attribute)
            if name in values:
                return values[name]
        raise TemplateValueError(f"{where} is {value!r}: the test makes no local value for it")


@pytest.fixture(scope="session")
def build() -> Build:
    """The built template and directories; skips when `sam build` has not run."""
    if not BUILT_TEMPLATE.exists():
        pytest.skip(f"{BUILT_TEMPLATE.relative_to(ROOT)} is missing: run `sam build` first (make sam)")
    return Build(BUILD, yaml.safe_load(BUILT_TEMPLATE.read_text(encoding="utf-8")))


@pytest.fixture(scope="session")
def architecture() -> str:
    """This machine's architecture, as Lambda names it."""
    machine = platform.machine()
    if machine not in ARCHITECTURES:
        pytest.skip(f"no Lambda architecture runs this machine's code ({machine})")
    return ARCHITECTURES[machine]


@pytest.fixture(scope="session")
def layer(build: Build, architecture: str) -> Path:
    """The built layer of this machine's architecture (the only one whose extensions load here)."""
    return build.layer_dir(architecture)


@dataclass(frozen=True)
class Boto3:
    """A boto3 alone on disk, and its version."""

    version: str
    path: Path


@pytest.fixture(scope="session")
def oldest_boto3() -> Boto3:
    """The oldest boto3 the layer claims (or $LIFEGUARD_ARTIFACT_BOTO3), installed once from PyPI."""
    version = os.environ.get(BOTO3_OVERRIDE) or claimed_oldest_boto3()
    return Boto3(version, boto3_dir(version))


@dataclass(frozen=True)
class Invocation:
    """One run of a built handler: what it returned or raised, and what it imported from where."""

    result: Any
    error: str | None
    sys_path: list[str]
    modules: dict[str, str]
    versions: dict[str, str]
    output: str

    def module_file(self, name: str) -> Path:
        """Where module `name` was imported from; fails when it was not imported."""
        assert name in self.modules, f"{name} was not imported\n{self.output}"
        return Path(self.modules[name])


@dataclass
class Runtime:
    """What a deployed function gets around its code: the local AWS's endpoints and credentials, and the
    variables Lambda itself sets."""

    environ: dict[str, str]
    scratch: Path
    invocations: list[Invocation] = field(default_factory=list)


def _lambda_runtime() -> None:
    # Runs in the fresh interpreter (this function's source is passed with -c): the handler is imported
    # and invoked once, as the runtime does, and the outcome is written to the answer file.
    import importlib
    import json
    import sys
    import time
    import traceback

    request = json.loads(sys.stdin.read())
    sys.path[:0] = request["path"]
    deadline = time.monotonic() + request["timeout_seconds"]

    class LambdaContext:
        function_name = request["function_name"]
        function_version = "$LATEST"
        memory_limit_in_mb = request["memory_mb"]
        invoked_function_arn = request["function_arn"]
        aws_request_id = request["request_id"]
        log_group_name = "/aws/lambda/" + request["function_name"]
        log_stream_name = "artifact-test"

        def get_remaining_time_in_millis(self) -> int:
            return max(int((deadline - time.monotonic()) * 1000), 0)

    answer: dict[str, object] = {"result": None, "error": None}
    module_name, function_name = request["handler"].rsplit(".", 1)
    try:
        handler = getattr(importlib.import_module(module_name), function_name)
        answer["result"] = handler(request["event"], LambdaContext())
    except Exception:  # noqa: BLE001 - whatever the handler raises is its outcome
        answer["error"] = traceback.format_exc()
    answer["sys_path"] = list(sys.path)
    answer["modules"] = {
        name: module.__file__
        for name, module in list(sys.modules.items())
        if isinstance(getattr(module, "__file__", None), str)
    }
    answer["versions"] = {
        name: str(getattr(sys.modules[name], "__version__", ""))
        for name in ("boto3", "botocore", "pydantic", "aws_lambda_powertools")
        if name in sys.modules
    }
    with open(request["answer"], "w", encoding="utf-8") as file:
        json.dump(answer, file, default=str)


_RUNTIME_SOURCE = inspect.getsource(_lambda_runtime) + "\n_lambda_runtime()\n"


def invoke(
    build: Build,
    runtime: Runtime,
    logical_id: str,
    event: Mapping[str, Any],
    *,
    path: list[Path],
    values: Mapping[str, str],
) -> Invocation:
    """Invoke built function `logical_id` once with `event`, `path` first on its sys.path, its template
    environment resolved with `values`."""
    name = f"{logical_id}-{uuid.uuid4().hex[:6]}"
    answer = runtime.scratch / f"{name}.json"
    environ = {
        **runtime.environ,
        "AWS_LAMBDA_FUNCTION_NAME": name,
        "AWS_LAMBDA_FUNCTION_MEMORY_SIZE": str(build.memory_mb(logical_id)),
        "AWS_LAMBDA_FUNCTION_VERSION": "$LATEST",
        "AWS_EXECUTION_ENV": "AWS_Lambda_python3.12",
        "LAMBDA_TASK_ROOT": str(path[0]),
        "LAMBDA_RUNTIME_DIR": str(path[-1]),
        "_HANDLER": build.handler(logical_id),
        **build.environment(logical_id, values),
    }
    request = {
        "path": [str(p) for p in path],
        "handler": build.handler(logical_id),
        "event": event,
        "function_name": name,
        "function_arn": f"arn:aws:lambda:us-east-1:123456789012:function:{name}",
        "memory_mb": build.memory_mb(logical_id),
        "timeout_seconds": build.timeout_seconds(logical_id),
        "request_id": str(uuid.uuid4()),
        "answer": str(answer),
    }
    process = subprocess.run(
        [sys.executable, "-I", "-S", "-B", "-c", _RUNTIME_SOURCE],
        input=json.dumps(request),
        env=environ,
        capture_output=True,
        text=True,
        timeout=INVOKE_TIMEOUT_SECONDS,
        check=False,
    )
    output = f"--- {logical_id} exit {process.returncode}\n{process.stdout[-6000:]}\n{process.stderr[-6000:]}"
    assert process.returncode == 0, f"the runtime itself failed\n{output}"
    assert answer.exists(), f"the runtime wrote no answer\n{output}"
    data = json.loads(answer.read_text(encoding="utf-8"))
    invocation = Invocation(
        data["result"], data["error"], data["sys_path"], data["modules"], data["versions"], output
    )
    runtime.invocations.append(invocation)
    return invocation


def assert_isolated(invocation: Invocation, path: list[Path]) -> None:
    """`path` came first on sys.path, the rest is the standard library alone, and every module imported
    came from one of them."""
    ours = [str(p) for p in path]
    assert invocation.sys_path[: len(ours)] == ours, invocation.sys_path
    stdlib = invocation.sys_path[len(ours) :]
    assert not [p for p in stdlib if "site-packages" in p or "dist-packages" in p], invocation.sys_path

    def allowed(file: str) -> bool:
        if any(file.startswith(entry + os.sep) for entry in ours):
            return True
        in_stdlib = any(file.startswith(entry.rstrip(os.sep) + os.sep) for entry in stdlib)
        return in_stdlib and f"{os.sep}site-packages{os.sep}" not in file

    strays = {name: file for name, file in invocation.modules.items() if not allowed(file)}
    assert not strays, f"modules from outside sys.path: {strays}"


def assert_under(file: Path, directory: Path) -> None:
    assert file.is_relative_to(directory), f"{file} is not under {directory}"
