"""What the controller remembers per compute node group, and where: one DynamoDB table.

Each group has one state item (`pk = GROUP#<cluster>#<group>`, `sk = STATE`) holding recent launches and
bootstrap outcomes, the configuration last read from PCS, the last proven-good configuration, the open
episode and an outbox of events to publish. It is written only with a condition on its version, so
concurrent invocations never lose each other's updates: the loser reloads and re-applies its records,
which are idempotent. Failed script runs from node reports are items of their own (`sk = REPORT#…`).
"""

from __future__ import annotations

import zlib
from collections import OrderedDict
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any, ClassVar

from pydantic import BaseModel, ConfigDict, Field, PrivateAttr, field_serializer, field_validator

from lifeguard.errors import AwsCallError, LifeguardError
from lifeguard.node_report import NodeReport

__all__ = [
    "OUTCOME_LIMIT",
    "REPORT_TTL_SECONDS",
    "BootOutcome",
    "Episode",
    "Failure",
    "GroupState",
    "KnownConfig",
    "ProvenGood",
    "StateStore",
    "Suspect",
    "VersionConflictError",
    "group_key",
]

REPORT_TTL_SECONDS = 14 * 24 * 3600
# Bounds that keep a busy group's state item small (tens of KB, far below DynamoDB's 400 KB): the most
# recent outcomes (enough for any loop tail and for the intermittent rule's window on a busy group), and
# the launches still waiting for their outcome, for as long as a node may take to bootstrap.
OUTCOME_LIMIT = 100
PENDING_LAUNCH_MS = 60 * 60 * 1000
PENDING_LAUNCH_LIMIT = 1000


class VersionConflictError(LifeguardError):
    """Another invocation wrote the group's state first."""


def group_key(cluster_id: str, group_id: str) -> str:
    """The partition key of a group's items."""
    return f"GROUP#{cluster_id}#{group_id}"


class _Model(BaseModel):
    model_config = ConfigDict(extra="ignore")


@dataclass(slots=True)
class BootOutcome:
    """How an instance's bootstrap ended: ACTIVE/BOOTSTRAP_SUCCESS or TERMINATED/BOOTSTRAP_FAILED.

    A plain dataclass, not a model: one is made for every outcome record, and they are stored as rows.
    """

    instance_id: str
    scheduler_node_id: str | None
    event_timestamp: int
    succeeded: bool
    launched_at: int | None = None


class Failure(_Model):
    """One failure of an episode's evidence, as events carry it."""

    instance_id: str
    scheduler_node_id: str | None = None
    event_timestamp: int


class Suspect(_Model):
    """The script that failed on the failing instances."""

    stage: str
    script: str
    on_error: str
    exit_code: int | None = None
    log_tail: str = ""
    instances: list[str] = Field(default_factory=list)


class Episode(_Model):
    """One loop of a group, from detection to the next successful bootstrap."""

    episode_id: str
    kind: str  # loop | intermittent
    opened_at: int  # event time (ms) of the failure that made the detection
    config_modified_at: int | None = None
    config_fingerprint: str | None = None
    failures: list[Failure] = Field(default_factory=list)
    suspect: Suspect | None = None
    revision: int = 1
    resolved_at: int | None = None


class KnownConfig(_Model):
    """The group as PCS last described it."""

    modified_at: int
    fingerprint: str
    node_lifecycle_actions: dict[str, Any] | None = None
    arn: str | None = None
    status: str | None = None
    tags: dict[str, str] = Field(default_factory=dict)
    checked_at: int  # event time (ms) of the batch in which Lifeguard last confirmed it
    tags_checked_at: int = 0


class ProvenGood(_Model):
    """The last configuration a node bootstrapped with successfully."""

    fingerprint: str
    node_lifecycle_actions: dict[str, Any] | None = None
    modified_at: int
    proven_at: int
    instance_id: str


class GroupState(_Model):
    """Everything the controller keeps about one compute node group."""

    cluster_id: str
    group_id: str
    version: int = 0
    launches: dict[str, int] = Field(default_factory=dict)  # instances launched, outcome not seen yet
    outcomes: dict[str, BootOutcome] = Field(default_factory=dict)
    config: KnownConfig | None = None
    proven_good: ProvenGood | None = None
    episode: Episode | None = None
    last_episode: Episode | None = None
    outbox: list[dict[str, Any]] = Field(default_factory=list)
    _oldest_outcome: int | None = PrivateAttr(default=None)

    # Outcomes are most of the item and are rewritten with every batch: stored as rows, not objects.
    @field_serializer("outcomes")
    def _outcomes_as_rows(self, outcomes: dict[str, BootOutcome]) -> list[list[Any]]:
        return [
            [o.instance_id, o.scheduler_node_id, o.event_timestamp, int(o.succeeded), o.launched_at]
            for o in outcomes.values()
        ]

    @field_validator("outcomes", mode="before")
    @classmethod
    def _outcomes_from_rows(cls, value: Any) -> Any:
        if not isinstance(value, list):
            return value
        return {
            str(row[0]): BootOutcome(str(row[0]), row[1], int(row[2]), bool(row[3]), row[4]) for row in value
        }

    def oldest_outcome_at(self) -> int | None:
        """Event time of the oldest outcome kept (cached until `outcome_changed`)."""
        if self._oldest_outcome is None and self.outcomes:
            self._oldest_outcome = min(o.event_timestamp for o in self.outcomes.values())
        return self._oldest_outcome

    def outcome_changed(self) -> None:
        """Forget cached facts about the outcomes."""
        self._oldest_outcome = None

    def prune(self) -> None:
        """Keep the most recent outcomes and the launches still waiting for theirs."""
        if len(self.outcomes) > OUTCOME_LIMIT:
            recent = sorted(self.outcomes.values(), key=lambda o: (o.event_timestamp, o.instance_id))
            self.outcomes = {o.instance_id: o for o in recent[-OUTCOME_LIMIT:]}
            self.outcome_changed()
        if not self.launches:
            return
        outcomes = self.outcomes
        newest_outcome = max((o.event_timestamp for o in outcomes.values()), default=0)
        newest = max(newest_outcome, *self.launches.values())
        oldest_kept = newest - PENDING_LAUNCH_MS
        pending = {i: t for i, t in self.launches.items() if t >= oldest_kept and i not in outcomes}
        if len(pending) > PENDING_LAUNCH_LIMIT:
            newest_first = sorted(((t, i) for i, t in pending.items()), reverse=True)[:PENDING_LAUNCH_LIMIT]
            pending = {i: t for t, i in sorted(newest_first)}
        self.launches = pending

    def forget_after(self, latest_ms: int) -> bool:
        """Let go of launches and outcomes dated after `latest_ms`; True when there were any."""
        future = [i for i, o in self.outcomes.items() if o.event_timestamp > latest_ms]
        for instance in future:
            del self.outcomes[instance]
        if future:
            self.outcome_changed()
        late = [i for i, t in self.launches.items() if t > latest_ms]
        for instance in late:
            del self.launches[instance]
        return bool(future or late)

    def launched_at(self, outcome: BootOutcome) -> int | None:
        """When the instance of an outcome was launched, if its LAUNCHED record was seen."""
        return (
            outcome.launched_at if outcome.launched_at is not None else self.launches.get(outcome.instance_id)
        )


def _from_item(item: dict[str, Any]) -> GroupState:
    # Stored compressed: the item is rewritten with every batch, and its size is what DynamoDB charges.
    body = item["state"]
    raw = zlib.decompress(body["B"]) if "B" in body else body["S"].encode()
    state = GroupState.model_validate_json(raw)
    state.version = int(item["version"]["N"])
    return state


class StateStore:
    """The group state items and node-report items of the Lifeguard table.

    The states this store last wrote are kept in memory (a warm Lambda container's next batch skips the
    read): every write is conditional on the version, so a state another container changed meanwhile
    makes the write fail, and the caller redoes that group from a fresh read.
    """

    CACHE_LIMIT = 256
    # What each method needs the table's policy to allow (a test holds template.yaml's roles to it).
    PERMISSIONS: ClassVar[dict[str, tuple[str, ...]]] = {
        "load": ("dynamodb:GetItem",),
        "load_many": ("dynamodb:BatchGetItem",),
        "save": ("dynamodb:PutItem",),
        "save_many": ("dynamodb:TransactWriteItems",),
        "put_reports": ("dynamodb:BatchWriteItem",),
        "reports": ("dynamodb:Query",),
        "all_states": ("dynamodb:Scan",),
    }

    def __init__(self, client: Any, table: str) -> None:
        self._client = client
        self.table = table
        self.calls = 0
        self._written: OrderedDict[tuple[str, str], GroupState] = OrderedDict()

    @property
    def client(self) -> Any:
        """The DynamoDB client (other stores of the same table share it)."""
        return self._client

    def _remember(self, state: GroupState) -> None:
        key = (state.cluster_id, state.group_id)
        self._written[key] = state
        self._written.move_to_end(key)
        while len(self._written) > self.CACHE_LIMIT:
            self._written.popitem(last=False)

    def forget(self, keys: Iterable[tuple[str, str]]) -> None:
        """Drop remembered states (after a failed write: they may hold changes that were not written)."""
        for key in keys:
            self._written.pop(key, None)

    def load(self, cluster_id: str, group_id: str) -> GroupState:
        """The group's state (a fresh one when there is none), read consistently."""
        from botocore.exceptions import BotoCoreError, ClientError

        self.calls += 1
        try:
            item = self._client.get_item(
                TableName=self.table,
                Key={"pk": {"S": group_key(cluster_id, group_id)}, "sk": {"S": "STATE"}},
                ConsistentRead=True,
            ).get("Item")
        except (ClientError, BotoCoreError) as exc:
            raise AwsCallError.from_exception("GetItem", exc) from exc
        if item is None:
            return GroupState(cluster_id=cluster_id, group_id=group_id)
        return _from_item(item)

    def all_states(self) -> list[GroupState]:
        """Every group's state (a Scan: for the operator CLI, not for the handlers)."""
        from botocore.exceptions import BotoCoreError, ClientError

        found: list[GroupState] = []
        request: dict[str, Any] = {
            "TableName": self.table,
            "FilterExpression": "sk = :state",
            "ExpressionAttributeValues": {":state": {"S": "STATE"}},
        }
        while True:
            self.calls += 1
            try:
                page = self._client.scan(**request)
            except (ClientError, BotoCoreError) as exc:
                raise AwsCallError.from_exception("Scan", exc) from exc
            found.extend(_from_item(item) for item in page.get("Items", []))
            if "LastEvaluatedKey" not in page:
                return sorted(found, key=lambda state: (state.cluster_id, state.group_id))
            request["ExclusiveStartKey"] = page["LastEvaluatedKey"]

    def load_many(self, keys: list[tuple[str, str]]) -> dict[tuple[str, str], GroupState]:
        """The states of many groups: the ones this store last wrote from memory, the others in one
        BatchGetItem per 100 (consistent reads). A remembered state may be stale; its write will tell."""
        from botocore.exceptions import BotoCoreError, ClientError

        found: dict[tuple[str, str], GroupState] = {}
        missing = []
        for key in keys:
            if key in self._written:
                found[key] = self._written[key]
            else:
                missing.append(key)
                found[key] = GroupState(cluster_id=key[0], group_id=key[1])
        keys = missing
        for start in range(0, len(keys), 100):
            request: dict[str, Any] = {
                self.table: {
                    "Keys": [
                        {"pk": {"S": group_key(c, g)}, "sk": {"S": "STATE"}}
                        for c, g in keys[start : start + 100]
                    ],
                    "ConsistentRead": True,
                }
            }
            for _ in range(10):
                self.calls += 1
                try:
                    response = self._client.batch_get_item(RequestItems=request)
                except (ClientError, BotoCoreError) as exc:
                    raise AwsCallError.from_exception("BatchGetItem", exc) from exc
                for item in response.get("Responses", {}).get(self.table, []):
                    state = _from_item(item)
                    found[(state.cluster_id, state.group_id)] = state
                request = response.get("UnprocessedKeys") or {}
                if not request:
                    break
            else:
                raise AwsCallError("BatchGetItem", "UnprocessedKeys", "group states not read after 10 rounds")
        return found

    def save_many(self, states: list[GroupState]) -> list[GroupState]:
        """Write many states in one transaction per 100, each on its version. Returns the states not
        written: those of a transaction in which some version had moved (the caller retries them)."""
        from botocore.exceptions import BotoCoreError, ClientError

        unwritten: list[GroupState] = []
        for start in range(0, len(states), 100):
            chunk = states[start : start + 100]
            for state in chunk:
                state.prune()
            writes = [{"Put": {"TableName": self.table, **self._put_request(state)}} for state in chunk]
            self.calls += 1
            try:
                self._client.transact_write_items(TransactItems=writes)
            except ClientError as exc:
                self.forget((state.cluster_id, state.group_id) for state in chunk)
                code = exc.response.get("Error", {}).get("Code")
                if code in ("TransactionCanceledException", "TransactionConflictException"):
                    unwritten.extend(chunk)
                    continue
                raise AwsCallError.from_exception("TransactWriteItems", exc) from exc
            except BotoCoreError as exc:
                self.forget((state.cluster_id, state.group_id) for state in chunk)
                raise AwsCallError.from_exception("TransactWriteItems", exc) from exc
            for state in chunk:
                state.version += 1
                self._remember(state)
        return unwritten

    def _put_request(self, state: GroupState) -> dict[str, Any]:
        expected = state.version
        return {
            "Item": {
                "pk": {"S": group_key(state.cluster_id, state.group_id)},
                "sk": {"S": "STATE"},
                "version": {"N": str(expected + 1)},
                "state": {"B": zlib.compress(state.model_dump_json(exclude={"version"}).encode(), 1)},
            },
            "ConditionExpression": "attribute_not_exists(pk) OR version = :expected",
            "ExpressionAttributeValues": {":expected": {"N": str(expected)}},
        }

    def save(self, state: GroupState) -> None:
        """Write the state if nobody else did since it was loaded; raises VersionConflictError otherwise."""
        from botocore.exceptions import BotoCoreError, ClientError

        state.prune()
        expected = state.version
        self.calls += 1
        try:
            self._client.put_item(TableName=self.table, **self._put_request(state))
        except ClientError as exc:
            self.forget([(state.cluster_id, state.group_id)])
            if exc.response.get("Error", {}).get("Code") == "ConditionalCheckFailedException":
                raise VersionConflictError(
                    f"{state.group_id}: state changed since version {expected}"
                ) from None
            raise AwsCallError.from_exception("PutItem", exc) from exc
        except BotoCoreError as exc:
            self.forget([(state.cluster_id, state.group_id)])
            raise AwsCallError.from_exception("PutItem", exc) from exc
        state.version = expected + 1
        self._remember(state)

    def put_reports(self, reports: Iterable[NodeReport]) -> int:
        """Store failed script runs (idempotent: the same run is the same item); returns how many."""
        from botocore.exceptions import BotoCoreError, ClientError

        requests = {}
        for report in reports:
            run = f"{report.instance_id}#{report.boot:06d}#{report.stage}#{report.script}#{report.started_at}"
            key = f"REPORT#{run}"
            item = {
                "pk": {"S": group_key(report.cluster_id, report.compute_node_group_id)},
                "sk": {"S": key},
                "report": {"S": report.to_json()},
                "expires_at": {"N": str(report.ended_or_started_at + REPORT_TTL_SECONDS)},
            }
            requests[(item["pk"]["S"], key)] = {"PutRequest": {"Item": item}}
        pending = list(requests.values())
        retries = 0  # rounds that came back with unprocessed items (not chunks: a backlog has many)
        while pending:
            chunk, pending = pending[:25], pending[25:]
            self.calls += 1
            try:
                response = self._client.batch_write_item(RequestItems={self.table: chunk})
            except (ClientError, BotoCoreError) as exc:
                raise AwsCallError.from_exception("BatchWriteItem", exc) from exc
            unprocessed = response.get("UnprocessedItems", {}).get(self.table, [])
            if unprocessed:
                retries += 1
                if retries >= 10:
                    left = len(unprocessed) + len(pending)
                    raise AwsCallError("BatchWriteItem", "UnprocessedItems", f"{left} reports not stored")
                pending.extend(unprocessed)
        return len(requests)

    def reports(self, cluster_id: str, group_id: str) -> list[NodeReport]:
        """Every stored failed script run of a group."""
        from botocore.exceptions import BotoCoreError, ClientError

        found: list[NodeReport] = []
        request: dict[str, Any] = {
            "TableName": self.table,
            "KeyConditionExpression": "pk = :pk AND begins_with(sk, :prefix)",
            "ExpressionAttributeValues": {
                ":pk": {"S": group_key(cluster_id, group_id)},
                ":prefix": {"S": "REPORT#"},
            },
        }
        while True:
            self.calls += 1
            try:
                page = self._client.query(**request)
            except (ClientError, BotoCoreError) as exc:
                raise AwsCallError.from_exception("Query", exc) from exc
            found.extend(
                NodeReport.model_validate_json(item["report"]["S"]) for item in page.get("Items", [])
            )
            if "LastEvaluatedKey" not in page:
                return found
            request["ExclusiveStartKey"] = page["LastEvaluatedKey"]
