"""The state and operations of the local PCS, independent of HTTP.

`LocalPcs.handle` answers one PCS request (operation name and JSON body) with an HTTP status and a JSON
body. Every request is checked against the operation's input shape of botocore's PCS model (a request
botocore would not send, or that AWS would reject by the model's constraints, gets a `ValidationException`
with `fieldList`), and every response against the output shape. Compute node groups go CREATING/UPDATING →
ACTIVE on an injectable clock; an update while UPDATING is a `ConflictException`; faults can be injected
per operation.
"""

from __future__ import annotations

import copy
import hashlib
import json
import secrets
import string
import threading
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from typing import Any, ClassVar

from lifeguard.bounds import is_pcs_id
from lifeguard.errors import Problem
from lifeguard.lifecycle_rules import find_problems
from lifeguard.pcs_model import service_model, validate_shape
from lifeguard_cli.local.pcs.clock import Clock, system_clock

__all__ = ["Call", "LocalPcs", "PcsApiError"]

_ID_ALPHABET = string.ascii_lowercase + string.digits


class PcsApiError(Exception):
    """An error response of the PCS API: its code, HTTP status, message and modeled fields."""

    STATUS: ClassVar[Mapping[str, int]] = {
        "ValidationException": 400,
        "AccessDeniedException": 403,
        "ResourceNotFoundException": 404,
        "ConflictException": 409,
        "ServiceQuotaExceededException": 402,
        "ThrottlingException": 429,
        "InternalServerException": 500,
        "UnknownOperationException": 400,
        # What AWS's front end answers any service with, PCS's model aside (faults injected in tests).
        "InternalFailure": 500,
        "ServiceUnavailable": 503,
        "TooManyRequestsException": 429,
    }

    def __init__(self, code: str, message: str, **fields: Any) -> None:
        super().__init__(f"{code}: {message}")
        self.code = code
        self.message = message
        self.fields = fields

    @property
    def status(self) -> int:
        """The HTTP status PCS answers this error with."""
        return self.STATUS.get(self.code, 400)

    def body(self) -> dict[str, Any]:
        """The JSON error body of the JSON 1.0 protocol."""
        return {"__type": self.code, "message": self.message, **self.fields}

    @classmethod
    def validation(cls, problems: list[Problem], reason: str = "fieldValidationFailed") -> PcsApiError:
        """A ValidationException listing every problem in `fieldList`."""
        first = problems[0]
        more = f" (and {len(problems) - 1} more)" if len(problems) > 1 else ""
        return cls(
            "ValidationException",
            f"{first}{more}",
            reason=reason,
            fieldList=[{"name": p.path or "(request)", "message": p.message} for p in problems],
        )


@dataclass
class _Fault:
    operation: str | None
    code: str
    remaining: int
    retry_after_seconds: int | None
    message: str


@dataclass
class _Resource:
    kind: str  # "cluster" | "computenodegroup" | "queue"
    id: str
    name: str
    arn: str
    cluster_id: str | None
    created_at: datetime
    modified_at: datetime
    spec: dict[str, Any]
    status: str = "ACTIVE"
    settles_at: datetime | None = None
    tags: dict[str, str] = field(default_factory=dict)


@dataclass
class Call:
    """One request the endpoint received: for tests that count calls."""

    operation: str
    params: dict[str, Any]
    at: datetime
    error: str | None = None


_GROUP_IDENTITY = frozenset({"clusterIdentifier", "computeNodeGroupIdentifier", "computeNodeGroupName"})
_NOT_STORED = frozenset({"clientToken", "tags"}) | _GROUP_IDENTITY


class LocalPcs:
    """The state and operations of a local PCS, independent of HTTP (thread-safe)."""

    def __init__(
        self,
        *,
        clock: Clock | None = None,
        region: str = "us-east-1",
        account_id: str = "123456789012",
        create_seconds: float = 0.0,
        update_seconds: float = 2.0,
    ) -> None:
        self.clock: Clock = clock or system_clock
        self.region = region
        self.account_id = account_id
        self.create_seconds = create_seconds
        self.update_seconds = update_seconds
        self.calls: list[Call] = []
        self._resources: dict[str, _Resource] = {}
        self._faults: list[_Fault] = []
        self._tokens: dict[tuple[str, str], tuple[str, dict[str, Any]]] = {}
        self._lock = threading.RLock()
        model = service_model()
        self._operations: Mapping[str, Any] = model["operations"]
        self._handlers: dict[str, Callable[[dict[str, Any]], dict[str, Any]]] = {
            "CreateCluster": self._create_cluster,
            "GetCluster": self._get_cluster,
            "ListClusters": self._list_clusters,
            "DeleteCluster": self._delete_cluster,
            "CreateComputeNodeGroup": self._create_group,
            "GetComputeNodeGroup": self._get_group,
            "ListComputeNodeGroups": self._list_groups,
            "UpdateComputeNodeGroup": self._update_group,
            "DeleteComputeNodeGroup": self._delete_group,
            "CreateQueue": self._create_queue,
            "GetQueue": self._get_queue,
            "ListQueues": self._list_queues,
            "DeleteQueue": self._delete_queue,
            "TagResource": self._tag_resource,
            "UntagResource": self._untag_resource,
            "ListTagsForResource": self._list_tags,
        }

    # -- faults and seeding (in-process API for tests, replays and the simulation) --

    def inject_fault(
        self,
        code: str,
        *,
        operation: str | None = None,
        times: int = 1,
        retry_after_seconds: int | None = None,
        message: str | None = None,
    ) -> None:
        """Answer the next `times` calls of `operation` (any operation when None) with error `code`."""
        with self._lock:
            self._faults.append(
                _Fault(operation, code, times, retry_after_seconds, message or f"injected {code}")
            )

    def clear_faults(self) -> None:
        """Answer every call again (the faults injected and not yet spent are dropped)."""
        with self._lock:
            self._faults.clear()

    def add_cluster(self, name: str, *, cluster_id: str | None = None) -> dict[str, Any]:
        """Create an ACTIVE cluster directly, optionally with a given id (as a recorded stream names it)."""
        spec = {
            "scheduler": {"type": "SLURM", "version": "25.05"},
            "size": "SMALL",
            "networking": {"subnetIds": ["subnet-0123456789abcdef0"]},
        }
        with self._lock:
            resource = self._new_resource("cluster", name, None, spec, cluster_id)
            return self._view(resource)

    def add_compute_node_group(
        self,
        cluster: str,
        name: str,
        *,
        group_id: str | None = None,
        node_lifecycle_actions: Mapping[str, Any] | None = None,
        tags: Mapping[str, str] | None = None,
    ) -> dict[str, Any]:
        """Create an ACTIVE compute node group directly, optionally with a given id."""
        with self._lock:
            parent = self._find("cluster", cluster, None)
            spec: dict[str, Any] = {
                "subnetIds": ["subnet-0123456789abcdef0"],
                "iamInstanceProfileArn": f"arn:aws:iam::{self.account_id}:instance-profile/pcs-compute",
                "scalingConfiguration": {"minInstanceCount": 1, "maxInstanceCount": 1},
                "instanceConfigs": [{"instanceType": "c7i.large"}],
                "customLaunchTemplate": {"id": "lt-0123456789abcdef0", "version": "1"},
            }
            if node_lifecycle_actions is not None:
                spec["nodeLifecycleActions"] = copy.deepcopy(dict(node_lifecycle_actions))
            resource = self._new_resource("computenodegroup", name, parent.id, spec, group_id)
            resource.tags.update(tags or {})
            return self._view(resource)

    # -- the protocol --

    def handle(self, operation: str, body: bytes) -> tuple[int, dict[str, Any]]:
        """Answer one request: (HTTP status, JSON body)."""
        now = self.clock()
        try:
            params = self._parse(operation, body)
        except PcsApiError as error:
            self._record(Call(operation, {}, now, error.code))
            return error.status, error.body()
        try:
            with self._lock:
                self._settle()
                self._raise_injected(operation)
                # A change is kept only with an answer the model takes: a request value the resource
                # cannot hold (subnetIds is any list in a request, at least one `subnet-…` in a group) is
                # refused as PCS refuses it, and nothing of it stays (nor its clientToken).
                kept = (
                    copy.deepcopy((self._resources, self._tokens)) if operation.startswith(_CHANGES) else None
                )
                result = self._handlers[operation](params)
                problems = validate_shape(self._operations[operation]["output"]["shape"], _wire(result))
                if problems and kept is not None:
                    self._resources, self._tokens = kept
                    raise PcsApiError.validation(
                        [p._replace(path=p.path.partition(".")[2]) for p in problems]
                    )
            if problems:
                raise PcsApiError(
                    "InternalServerException",
                    f"the local endpoint built a response the PCS model rejects: {problems[0]}",
                )
        except PcsApiError as error:
            self._record(Call(operation, params, now, error.code))
            return error.status, error.body()
        self._record(Call(operation, params, now))
        return 200, _wire(result)

    def operate(self, operation: str, params: Mapping[str, Any]) -> dict[str, Any]:
        """One operation done by PCS's own side (a simulation's operator, its nodes' view of their group):
        validated as a request is, answered as the wire would, but never hit by an injected fault and not
        in `calls`. Raises PcsApiError as the endpoint would answer it."""
        params = self._parse(operation, json.dumps(params).encode())
        with self._lock:
            self._settle()
            return dict(_wire(self._handlers[operation](params)))

    def _record(self, call: Call) -> None:
        with self._lock:
            self.calls.append(call)

    def _parse(self, operation: str, body: bytes) -> dict[str, Any]:
        if operation not in self._operations:
            raise PcsApiError("UnknownOperationException", f"unknown operation {operation!r}")
        if operation not in self._handlers:
            raise PcsApiError(
                "ValidationException", f"{operation} is not served by the local endpoint", reason="other"
            )
        try:
            params = json.loads(body or b"{}")
        except ValueError as exc:
            raise PcsApiError(
                "ValidationException", f"body is not JSON: {exc}", reason="cannotParse"
            ) from None
        if not isinstance(params, dict):
            raise PcsApiError("ValidationException", "body is not a JSON object", reason="cannotParse")
        input_shape = self._operations[operation]["input"]["shape"]
        problems = validate_shape(input_shape, params)
        actions = params.get("nodeLifecycleActions")
        if actions is not None and not problems:
            problems = find_problems(actions, "nodeLifecycleActions")
        if problems:
            raise PcsApiError.validation(problems)
        return params

    def _raise_injected(self, operation: str) -> None:
        for fault in self._faults:
            if fault.remaining > 0 and fault.operation in (None, operation):
                fault.remaining -= 1
                fields: dict[str, Any] = {}
                if fault.code == "ThrottlingException" and fault.retry_after_seconds is not None:
                    fields["retryAfterSeconds"] = fault.retry_after_seconds
                if fault.code in ("ConflictException", "ResourceNotFoundException"):
                    fields.update(resourceId="injected", resourceType="computeNodeGroup")
                # The members the model requires of these errors, as PCS sends them.
                if fault.code == "ValidationException":
                    fields.update(reason="other")
                if fault.code == "ServiceQuotaExceededException":
                    fields.update(serviceCode="pcs")
                raise PcsApiError(fault.code, fault.message, **fields)

    def _settle(self) -> None:
        now = self.clock()
        for resource in self._resources.values():
            if resource.settles_at is not None and now >= resource.settles_at:
                resource.status, resource.settles_at = "ACTIVE", None

    # -- resources --

    def _new_id(self) -> str:
        while True:
            candidate = "pcs_" + "".join(secrets.choice(_ID_ALPHABET) for _ in range(10))
            if candidate not in self._resources:
                return candidate

    def _new_resource(
        self, kind: str, name: str, cluster_id: str | None, spec: dict[str, Any], resource_id: str | None
    ) -> _Resource:
        resource_id = resource_id or self._new_id()
        if resource_id in self._resources:
            raise PcsApiError(
                "ConflictException",
                f"{resource_id} already exists",
                resourceId=resource_id,
                resourceType=kind,
            )
        for other in self._resources.values():
            if other.kind == kind and other.cluster_id == cluster_id and other.name == name:
                raise PcsApiError(
                    "ConflictException",
                    f"a {kind} named {name!r} already exists",
                    resourceId=other.id,
                    resourceType=kind,
                )
        prefix = f"arn:aws:pcs:{self.region}:{self.account_id}:cluster/"
        arn = {
            "cluster": f"{prefix}{resource_id}",
            "computenodegroup": f"{prefix}{cluster_id}/computenodegroup/{resource_id}",
            "queue": f"{prefix}{cluster_id}/queue/{resource_id}",
        }[kind]
        now = self.clock()
        resource = _Resource(kind, resource_id, name, arn, cluster_id, now, now, spec)
        if self.create_seconds > 0:
            resource.status = "CREATING"
            resource.settles_at = now + timedelta(seconds=self.create_seconds)
        self._resources[resource_id] = resource
        return resource

    def _find(self, kind: str, identifier: str, cluster_id: str | None) -> _Resource:
        for resource in self._resources.values():
            if (
                resource.kind == kind
                and identifier in (resource.id, resource.name)
                and (cluster_id is None or resource.cluster_id == cluster_id)
            ):
                return resource
        raise PcsApiError(
            "ResourceNotFoundException",
            f"{kind} {identifier!r} not found",
            resourceId=identifier,
            resourceType=kind,
        )

    def _cluster(self, params: Mapping[str, Any]) -> _Resource:
        identifier = params["clusterIdentifier"]
        try:
            return self._find("cluster", identifier, None)
        except PcsApiError:
            if is_pcs_id(identifier):
                # PCS answers a cluster id it does not have as it answers a missing grant (its model's
                # AccessDeniedException: "The cluster ID doesn't exist"); a name, as not found.
                raise PcsApiError(
                    "AccessDeniedException",
                    f"not authorized to access cluster {identifier}, or the cluster ID doesn't exist",
                ) from None
            raise

    def _group(self, params: Mapping[str, Any]) -> _Resource:
        cluster = self._cluster(params)
        return self._find("computenodegroup", params["computeNodeGroupIdentifier"], cluster.id)

    def _by_arn(self, arn: str) -> _Resource:
        for resource in self._resources.values():
            if resource.arn == arn:
                return resource
        raise PcsApiError(
            "ResourceNotFoundException", f"no resource {arn}", resourceId=arn, resourceType="resource"
        )

    def _summary(self, resource: _Resource) -> dict[str, Any]:
        view: dict[str, Any] = {
            "name": resource.name,
            "id": resource.id,
            "arn": resource.arn,
            "createdAt": resource.created_at,
            "modifiedAt": resource.modified_at,
            "status": resource.status,
        }
        if resource.cluster_id is not None:
            view["clusterId"] = resource.cluster_id
        return view

    def _view(self, resource: _Resource) -> dict[str, Any]:
        return {**self._summary(resource), **copy.deepcopy(resource.spec)}

    def _idempotent(
        self, operation: str, params: Mapping[str, Any], apply: Callable[[], dict[str, Any]]
    ) -> dict[str, Any]:
        token = params.get("clientToken")
        if token is None:
            return apply()
        digest = hashlib.sha256(
            json.dumps({k: v for k, v in params.items() if k != "clientToken"}, sort_keys=True).encode()
        ).hexdigest()
        key = (operation, token)
        if key in self._tokens:
            seen_digest, result = self._tokens[key]
            if seen_digest != digest:
                raise PcsApiError(
                    "ConflictException",
                    f"clientToken {token!r} was already used with different parameters",
                    resourceId=token,
                    resourceType="clientToken",
                )
            return copy.deepcopy(result)
        result = apply()
        self._tokens[key] = (digest, copy.deepcopy(result))
        return result

    # -- operations --

    def _create_cluster(self, params: dict[str, Any]) -> dict[str, Any]:
        def apply() -> dict[str, Any]:
            spec = {k: v for k, v in params.items() if k not in {"clusterName", "clientToken", "tags"}}
            resource = self._new_resource("cluster", params["clusterName"], None, spec, None)
            resource.tags.update(params.get("tags", {}))
            return {"cluster": self._view(resource)}

        return self._idempotent("CreateCluster", params, apply)

    def _get_cluster(self, params: dict[str, Any]) -> dict[str, Any]:
        return {"cluster": self._view(self._cluster(params))}

    def _list_clusters(self, params: dict[str, Any]) -> dict[str, Any]:
        items = [self._summary(r) for r in self._resources.values() if r.kind == "cluster"]
        page, token = _paginate(items, params)
        return {"clusters": page, **({"nextToken": token} if token else {})}

    def _delete_cluster(self, params: dict[str, Any]) -> dict[str, Any]:
        cluster = self._cluster(params)
        if any(r.cluster_id == cluster.id for r in self._resources.values()):
            raise PcsApiError(
                "ConflictException",
                "the cluster still has compute node groups or queues",
                resourceId=cluster.id,
                resourceType="cluster",
            )
        del self._resources[cluster.id]
        return {}

    def _create_group(self, params: dict[str, Any]) -> dict[str, Any]:
        def apply() -> dict[str, Any]:
            cluster = self._cluster(params)
            spec = {k: v for k, v in params.items() if k not in _NOT_STORED}
            resource = self._new_resource(
                "computenodegroup", params["computeNodeGroupName"], cluster.id, spec, None
            )
            resource.tags.update(params.get("tags", {}))
            return {"computeNodeGroup": self._view(resource)}

        return self._idempotent("CreateComputeNodeGroup", params, apply)

    def _get_group(self, params: dict[str, Any]) -> dict[str, Any]:
        return {"computeNodeGroup": self._view(self._group(params))}

    def _list_groups(self, params: dict[str, Any]) -> dict[str, Any]:
        cluster = self._cluster(params)
        items = [
            self._summary(r)
            for r in self._resources.values()
            if r.kind == "computenodegroup" and r.cluster_id == cluster.id
        ]
        page, token = _paginate(items, params)
        return {"computeNodeGroups": page, **({"nextToken": token} if token else {})}

    def _update_group(self, params: dict[str, Any]) -> dict[str, Any]:
        def apply() -> dict[str, Any]:
            group = self._group(params)
            if group.status != "ACTIVE":
                raise PcsApiError(
                    "ConflictException",
                    f"compute node group {group.id} is {group.status}; try again when it is ACTIVE",
                    resourceId=group.id,
                    resourceType="computeNodeGroup",
                )
            group.spec.update({k: v for k, v in params.items() if k not in _NOT_STORED})
            now = self.clock()
            group.modified_at = now
            if self.update_seconds > 0:
                group.status = "UPDATING"
                group.settles_at = now + timedelta(seconds=self.update_seconds)
            return {"computeNodeGroup": self._view(group)}

        return self._idempotent("UpdateComputeNodeGroup", params, apply)

    def _delete_group(self, params: dict[str, Any]) -> dict[str, Any]:
        group = self._group(params)
        del self._resources[group.id]
        return {}

    def _create_queue(self, params: dict[str, Any]) -> dict[str, Any]:
        def apply() -> dict[str, Any]:
            cluster = self._cluster(params)
            spec = {"computeNodeGroupConfigurations": params.get("computeNodeGroupConfigurations", [])}
            if "slurmConfiguration" in params:
                spec["slurmConfiguration"] = params["slurmConfiguration"]
            resource = self._new_resource("queue", params["queueName"], cluster.id, spec, None)
            resource.tags.update(params.get("tags", {}))
            return {"queue": self._view(resource)}

        return self._idempotent("CreateQueue", params, apply)

    def _get_queue(self, params: dict[str, Any]) -> dict[str, Any]:
        cluster = self._cluster(params)
        queue = self._find("queue", params["queueIdentifier"], cluster.id)
        return {"queue": self._view(queue)}

    def _list_queues(self, params: dict[str, Any]) -> dict[str, Any]:
        cluster = self._cluster(params)
        items = [
            self._summary(r)
            for r in self._resources.values()
            if r.kind == "queue" and r.cluster_id == cluster.id
        ]
        page, token = _paginate(items, params)
        return {"queues": page, **({"nextToken": token} if token else {})}

    def _delete_queue(self, params: dict[str, Any]) -> dict[str, Any]:
        cluster = self._cluster(params)
        queue = self._find("queue", params["queueIdentifier"], cluster.id)
        del self._resources[queue.id]
        return {}

    def _tag_resource(self, params: dict[str, Any]) -> dict[str, Any]:
        self._by_arn(params["resourceArn"]).tags.update(params["tags"])
        return {}

    def _untag_resource(self, params: dict[str, Any]) -> dict[str, Any]:
        resource = self._by_arn(params["resourceArn"])
        for key in params["tagKeys"]:
            resource.tags.pop(key, None)
        return {}

    def _list_tags(self, params: dict[str, Any]) -> dict[str, Any]:
        return {"tags": dict(self._by_arn(params["resourceArn"]).tags)}


# The operations that change resources (what a refused answer must leave as it was).
_CHANGES = ("Create", "Update", "Delete", "Tag", "Untag")


def _paginate(
    items: list[dict[str, Any]], params: Mapping[str, Any]
) -> tuple[list[dict[str, Any]], str | None]:
    token = params.get("nextToken") or "0"
    if not (token.isascii() and token.isdigit() and int(token) <= len(items)):
        # The model: "Using an expired pagination token returns an HTTP 400 InvalidToken error."
        raise PcsApiError("ValidationException", "the pagination token is not valid", reason="other")
    start = int(token)
    size = int(params.get("maxResults") or 10)  # PCS's default page: 10 (at most 100 when asked)
    end = start + size
    return items[start:end], (str(end) if end < len(items) else None)


def _wire(value: Any) -> Any:
    """As the wire has it: timestamps in ISO 8601, UTC (the model's `timestampFormat` for PCS's)."""
    if isinstance(value, datetime):
        return value.astimezone(UTC).isoformat(timespec="milliseconds").replace("+00:00", "Z")
    if isinstance(value, Mapping):
        return {k: _wire(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_wire(v) for v in value]
    return value
