"""PCS, as Lifeguard needs it: a compute node group's configuration, status, timing and tags; the retries
that honour PCS's `retryAfterSeconds`; and what one batch reads of PCS (`BatchReads`)."""

from __future__ import annotations

import json
import logging
from collections import Counter, OrderedDict
from collections.abc import Callable, Mapping
from datetime import datetime
from typing import Any, NamedTuple

from lifeguard.bounds import CONFIG_MAX_STORED_BYTES, clip, group_name_of, is_pcs_id
from lifeguard.errors import AwsCallError, GroupNotFoundError
from lifeguard.group_state import GroupState, KnownConfig
from lifeguard.lifecycle import canonical_json, fingerprint_of_json
from lifeguard.store.table import state_bytes
from lifeguard.values import frozen

__all__ = [
    "ANSWER_UNREAD_CODES",
    "RETRYABLE_CODES",
    "TAGS_READ",
    "UPDATE_REQUIRES",
    "BatchReads",
    "GroupSnapshot",
    "GroupSummary",
    "KeptListings",
    "PcsGateway",
    "RetryPolicy",
    "call_with_retries",
    "is_transient",
]

logger = logging.getLogger("lifeguard")

# Failures that a later attempt can cure: PCS's throttling, conflicts while a group updates and its 5xx;
# the throttling and transient codes AWS's front end answers any service with (`InternalFailure` with a 500,
# `ServiceUnavailable` with a 503: botocore's standard retry mode retries them); and the connection errors
# botocore names after their class (every `ConnectionError` and `HTTPClientError` of botocore's).
RETRYABLE_CODES = frozenset(
    {
        "ThrottlingException",
        "ConflictException",
        "InternalServerException",
        "ServiceUnavailableException",
        "InternalFailure",
        "ServiceUnavailable",
        "RequestTimeout",
        "RequestTimeoutException",
        "PriorRequestNotComplete",
        "Throttling",
        "TooManyRequestsException",
        "ConnectionError",
        "EndpointConnectionError",
        "ConnectTimeoutError",
        "ProxyConnectionError",
        "SSLError",
        "HTTPClientError",
        "ReadTimeoutError",
        "ConnectionClosedError",
        "ResponseStreamingError",
    }
)

# Failures after PCS answered a call as taken: an answer that cannot be read or trusted (ids or an ARN not of
# PCS's form, a body cut short). An update failing so may have been made.
ANSWER_UNREAD_CODES = frozenset({"InvalidAnswer", "ResponseParserError", "IncompleteReadError"})


def is_transient(error: AwsCallError) -> bool:
    """True when retrying the call may succeed: a code above, or an answer of HTTP 429 or 5xx whatever its
    code says (an answer without PCS's modeled error, a front end's with an HTML or empty body, botocore
    names by its status: '503')."""
    code, status = error.code, error.status
    if code in RETRYABLE_CODES or (status is not None and (status == 429 or status >= 500)):
        return True
    return len(code) == 3 and code.isascii() and code.isdigit() and (code == "429" or code[0] == "5")


@frozen
class GroupSnapshot:
    """A compute node group as GetComputeNodeGroup returned it."""

    cluster_id: str
    group_id: str
    name: str
    arn: str
    status: str
    modified_at_ms: int
    node_lifecycle_actions: Mapping[str, Any] | None
    created_at_ms: int | None = None  # None: an answer without `createdAt`


class GroupSummary(NamedTuple):
    """A compute node group as ListComputeNodeGroups lists it: enough to tell whether it changed. A tuple:
    a listing makes one for every group of the cluster (a thousand a batch, for a large account)."""

    group_id: str
    name: str
    status: str
    modified_at: datetime
    arn: str | None = None

    @property
    def modified_at_ms(self) -> int:
        """`modifiedAt` in epoch milliseconds (worked out for the groups asked about, not the whole list)."""
        return int(self.modified_at.timestamp() * 1000)


def _translate(operation: str, exc: Exception) -> AwsCallError:
    error = AwsCallError.from_exception(operation, exc)
    if error.code == "ResourceNotFoundException":
        return GroupNotFoundError.from_exception(operation, exc)
    return error


# An answer's status and name as Lifeguard takes them (botocore holds neither to the model: an odd value
# would be written into reasons, the audit trail and events whole). PCS's are a word and up to 25 characters.
STATUS_MAX, NAME_MAX = 40, 64


# An ARN as Lifeguard keeps it (IAM's bound of one); an id must be of PCS's form (`is_pcs_id`): both
# become keys of the table, fields of events and arguments of later calls.
ARN_MAX = 2048
# The tags Lifeguard reads of a group (`detection`'s lifeguard:*, `remediation.iac`'s owners), each value
# at most AWS's 256 characters: no other tag is kept in its state, whatever a group carries.
TAGS_READ = frozenset(
    {
        "lifeguard:mode",
        "lifeguard:threshold",
        "lifeguard:window-minutes",
        "lifeguard:drain",
        "aws:cloudformation:stack-name",
        "managed-by",
        "ManagedBy",
    }
)
TAG_VALUE_MAX = 256
# Lifeguard's own tags, as the key of one given in another case or with spaces around it reads: such a tag
# is kept too (its key clipped to AWS's 128), so the detection can say it is not read as its look-alike.
_OWN_TAGS_FOLDED = frozenset(key for key in TAGS_READ if key.startswith("lifeguard:"))
TAG_KEY_MAX = 128


def _is_arn(value: object) -> bool:
    return isinstance(value, str) and len(value) <= ARN_MAX and value.isprintable()


_UNKNOWN_SHOWN = 5
_UNKNOWN_MAX = 20


def _unknown_fields(raw: Any, parsed: Any, path: str, found: list[str] | None = None) -> list[str]:
    """The paths (at most `_UNKNOWN_MAX`) of what `raw`, an answer's JSON, holds and `parsed`, botocore's
    parse of it, left out: members its model does not know. A null is no member (botocore drops it)."""
    found = [] if found is None else found
    if isinstance(raw, dict) and isinstance(parsed, dict):
        for key, value in raw.items():
            if len(found) >= _UNKNOWN_MAX:
                break
            where = f"{path}.{clip(str(key), 64)}"
            if key not in parsed:
                if value is not None:
                    found.append(where)
            else:
                _unknown_fields(value, parsed[key], where, found)
    elif isinstance(raw, list) and isinstance(parsed, list):
        for index, (item, read) in enumerate(zip(raw, parsed, strict=False)):
            if len(found) >= _UNKNOWN_MAX:
                break
            _unknown_fields(item, read, f"{path}[{index}]", found)
    return found


def _snapshot(group: Mapping[str, Any], operation: str) -> GroupSnapshot:
    """The group as an answer describes it, its ids and ARN held to their form: an answer with others is
    refused (not transient: the group's records wait for a later read)."""
    cluster_id, group_id, arn = group.get("clusterId"), group.get("id"), group.get("arn")
    if not (is_pcs_id(cluster_id) and is_pcs_id(group_id) and _is_arn(arn)):
        shown = f"id {clip(group_id, 80)!r}, clusterId {clip(cluster_id, 80)!r}, arn {clip(arn, 80)!r}"
        raise AwsCallError(operation, "InvalidAnswer", f"ids or ARN not of PCS's form: {shown}")
    modified, name, status = group.get("modifiedAt"), group.get("name"), group.get("status")
    if not (isinstance(modified, datetime) and isinstance(name, str) and isinstance(status, str)):
        shown = f"name {clip(name, 80)!r}, status {clip(status, 40)!r}, modifiedAt {clip(modified, 40)!r}"
        raise AwsCallError(operation, "InvalidAnswer", f"a group without its name, status or time: {shown}")
    created = group.get("createdAt")
    return GroupSnapshot(
        cluster_id=str(cluster_id),
        group_id=str(group_id),
        name=clip(name, NAME_MAX),
        arn=str(arn),
        status=clip(status, STATUS_MAX),
        modified_at_ms=int(modified.timestamp() * 1000),
        node_lifecycle_actions=group.get("nodeLifecycleActions"),
        created_at_ms=int(created.timestamp() * 1000) if isinstance(created, datetime) else None,
    )


# What UpdateComputeNodeGroup checks with the caller's own permissions besides pcs:UpdateComputeNodeGroup
# (PCS user guide, "Minimum permissions for AWS PCS"): the group's network, launch template and instance
# types, the instances and fleets it launches (and tags), and the instance profile it passes to EC2.
UPDATE_REQUIRES = (
    "ec2:DescribeVpcs",
    "ec2:DescribeSubnets",
    "ec2:DescribeSecurityGroups",
    "ec2:DescribeLaunchTemplates",
    "ec2:DescribeLaunchTemplateVersions",
    "ec2:DescribeInstanceTypes",
    "ec2:DescribeInstanceTypeOfferings",
    "ec2:RunInstances",
    "ec2:CreateFleet",
    "ec2:CreateTags",
    "iam:PassRole",
    "iam:GetInstanceProfile",
)


@frozen
class RetryPolicy:
    """How a PCS call is retried: exponential backoff from `base_seconds` up to `max_seconds`, or longer
    when PCS says `retryAfterSeconds` (honoured up to `max_retry_after_seconds`), `attempts` in all."""

    attempts: int = 6
    base_seconds: float = 1.0
    max_seconds: float = 20.0
    max_retry_after_seconds: float = 60.0

    def delay(self, attempt: int, error: AwsCallError) -> float:
        """The pause before attempt `attempt + 1`, after `error`."""
        delay = min(self.max_seconds, self.base_seconds * 2.0 ** (attempt - 1))
        if error.retry_after_seconds:
            delay = max(delay, min(float(error.retry_after_seconds), self.max_retry_after_seconds))
        return delay


def call_with_retries[T](
    call: Callable[[], T],
    policy: RetryPolicy,
    *,
    time_left: Callable[[], float],
    sleep: Callable[[float], None],
    on_retry: Callable[[AwsCallError, float, int], None] = lambda error, delay, attempt: None,
) -> tuple[T, int]:
    """`call()`, retried on transient PCS errors per `policy`; returns its answer and the attempts made.
    A non-transient error (GroupNotFoundError included) is raised at once; a pause that would not fit in
    `time_left()` is not taken, and the error is raised saying so."""
    for attempt in range(1, policy.attempts + 1):
        try:
            return call(), attempt
        except GroupNotFoundError:
            raise
        except AwsCallError as exc:
            if not is_transient(exc) or attempt == policy.attempts:
                raise
            delay = policy.delay(attempt, exc)
            left = time_left()
            if delay > left:
                raise AwsCallError(
                    exc.operation,
                    exc.code,
                    f"{exc.message}; not retried: {max(0, int(left))} s left in this invocation",
                ) from exc
            on_retry(exc, delay, attempt)
            sleep(delay)
    raise AssertionError("unreachable")


class PcsGateway:
    """The PCS calls Lifeguard makes. Over a client of the default `aws_client`, botocore retries throttling
    and 5xx before an error reaches here; remediation's client (`attempts=1`) leaves that to
    `call_with_retries`, which honours PCS's `retryAfterSeconds`."""

    # What the scaling_events function's role must allow (a test holds template.yaml to it); the
    # remediation actions declare their own.
    PERMISSIONS = ("pcs:GetComputeNodeGroup", "pcs:ListComputeNodeGroups", "pcs:ListTagsForResource")

    def __init__(self, client: Any) -> None:
        self._client = client
        self.calls = 0
        self.listing_pages: dict[str, int] = {}  # pages each cluster's last listing took (`BatchReads`)
        # Per group (cluster id, group id) last read: what its nodeLifecycleActions held that this release's
        # PCS model does not know (`_unknown_fields`).
        self._unknown: dict[tuple[str, str], list[str]] = {}
        self._answers_watched = False  # at the first read: a lazy client is not built at import

    def get_group(self, cluster_id: str, group_id: str) -> GroupSnapshot:
        """GetComputeNodeGroup; raises GroupNotFoundError or AwsCallError."""
        from botocore.exceptions import BotoCoreError, ClientError

        if not self._answers_watched:
            self._answers_watched = True
            events = getattr(getattr(self._client, "meta", None), "events", None)
            if events is not None:
                events.register("after-call.pcs.GetComputeNodeGroup", self._note_unknown_fields)
        try:
            self.calls += 1
            group = self._client.get_compute_node_group(
                clusterIdentifier=cluster_id, computeNodeGroupIdentifier=group_id
            )["computeNodeGroup"]
        except (ClientError, BotoCoreError) as exc:
            raise _translate("GetComputeNodeGroup", exc) from exc
        return _snapshot(group, "GetComputeNodeGroup")

    def cluster_id(self, identifier: str) -> str:
        """The id of the cluster named or identified by `identifier` (GetCluster, as PCS takes either);
        raises GroupNotFoundError when there is none, or AwsCallError."""
        from botocore.exceptions import BotoCoreError, ClientError

        try:
            self.calls += 1
            cluster = self._client.get_cluster(clusterIdentifier=identifier)["cluster"]
        except (ClientError, BotoCoreError) as exc:
            raise _translate("GetCluster", exc) from exc
        return str(cluster["id"])

    def known_cluster_id(self, identifier: str) -> str | None:
        """`cluster_id`, or None when PCS knows no cluster by that name or id. PCS answers an id it does not
        have as it answers a missing grant (AccessDeniedException, "the cluster ID doesn't exist"): a
        refused id that ListClusters does not list is none; the refusal stands when it is listed, or when
        PCS will not list its clusters."""
        try:
            return self.cluster_id(identifier)
        except GroupNotFoundError:
            return None
        except AwsCallError as exc:
            if exc.code != "AccessDeniedException" or not is_pcs_id(identifier):
                raise
            try:
                listed = self.cluster_ids()
            except AwsCallError:
                raise exc from None
            if identifier in listed:
                raise
            return None

    def cluster_ids(self) -> set[str]:
        """The ids of the account's clusters in this region (ListClusters, all pages, at most
        `LIST_PAGES_MAX`); raises AwsCallError."""
        from botocore.exceptions import BotoCoreError, ClientError

        found: set[str] = set()
        request: dict[str, Any] = {"maxResults": LIST_PAGE_SIZE}
        try:
            for _ in range(LIST_PAGES_MAX):
                self.calls += 1
                page = self._client.list_clusters(**request)
                found.update(c["id"] for c in page.get("clusters", []) if is_pcs_id(c.get("id")))
                if not page.get("nextToken"):
                    break
                request["nextToken"] = page["nextToken"]
        except (ClientError, BotoCoreError) as exc:
            raise _translate("ListClusters", exc) from exc
        return found

    def update_lifecycle_actions(
        self, cluster_id: str, group_id: str, actions: Mapping[str, Any], client_token: str
    ) -> GroupSnapshot:
        """UpdateComputeNodeGroup with only `nodeLifecycleActions`; the same token never applies twice.
        Refused before PCS is asked (AwsCallError `UnknownFields`, not transient) when the group's last read
        held lifecycle fields this release's PCS model does not know: botocore left them out of what was
        read, and the whole `nodeLifecycleActions` written back would erase them."""
        from botocore.exceptions import BotoCoreError, ClientError

        unknown = self._unknown.get((cluster_id, group_id))
        if unknown:
            shown = ", ".join(unknown[:_UNKNOWN_SHOWN]) + (" …" if len(unknown) > _UNKNOWN_SHOWN else "")
            raise AwsCallError(
                "UpdateComputeNodeGroup",
                "UnknownFields",
                f"the group's configuration holds what this release of Lifeguard does not know ({shown}):"
                " writing it back would erase that; nothing was changed (upgrade Lifeguard)",
            )
        try:
            self.calls += 1
            group = self._client.update_compute_node_group(
                clusterIdentifier=cluster_id,
                computeNodeGroupIdentifier=group_id,
                nodeLifecycleActions=dict(actions),
                clientToken=client_token,
            )["computeNodeGroup"]
        except (ClientError, BotoCoreError) as exc:
            raise _translate("UpdateComputeNodeGroup", exc) from exc
        return _snapshot(group, "UpdateComputeNodeGroup")

    def _note_unknown_fields(self, http_response: Any, parsed: Any, **_: Any) -> None:
        """After a GetComputeNodeGroup: note, for its group, the lifecycle fields of the raw answer that
        botocore's parse left out (a field or a stage PCS added after this release's model)."""
        group = parsed.get("computeNodeGroup") if isinstance(parsed, dict) else None
        if getattr(http_response, "status_code", None) != 200 or not isinstance(group, dict):
            return
        try:
            raw = json.loads(http_response.content)
        except (ValueError, TypeError, AttributeError):
            return  # botocore read it, or said why it could not (a stubbed answer has no body)
        raw_group = raw.get("computeNodeGroup") if isinstance(raw, dict) else None
        if not isinstance(raw_group, dict):
            return
        key = (str(group.get("clusterId")), str(group.get("id")))
        unknown = _unknown_fields(
            raw_group.get("nodeLifecycleActions"), group.get("nodeLifecycleActions"), "nodeLifecycleActions"
        )
        if unknown:
            self._unknown[key] = unknown
        else:
            self._unknown.pop(key, None)

    def list_tags(self, arn: str) -> dict[str, str]:
        """ListTagsForResource."""
        from botocore.exceptions import BotoCoreError, ClientError

        self.calls += 1
        try:
            tags = self._client.list_tags_for_resource(resourceArn=arn).get("tags", {})
        except (ClientError, BotoCoreError) as exc:
            raise _translate("ListTagsForResource", exc) from exc
        return {
            clip(key, TAG_KEY_MAX): clip(value, TAG_VALUE_MAX)
            for key, value in (tags.items() if isinstance(tags, Mapping) else ())
            if isinstance(key, str)
            and (key in TAGS_READ or key.strip().lower() in _OWN_TAGS_FOLDED)
            and isinstance(value, str)
        }

    def list_groups(self, cluster_id: str) -> dict[str, GroupSummary]:
        """Every compute node group of a cluster by id (ListComputeNodeGroups, all pages of 100, at most
        `LIST_PAGES_MAX` of them)."""
        from botocore.exceptions import BotoCoreError, ClientError

        found: dict[str, GroupSummary] = {}
        request: dict[str, Any] = {"clusterIdentifier": cluster_id, "maxResults": LIST_PAGE_SIZE}
        pages = 1
        try:
            while True:
                self.calls += 1
                page = self._client.list_compute_node_groups(**request)
                for group in page.get("computeNodeGroups", []):
                    if not is_pcs_id(group["id"]):
                        continue  # no state of Lifeguard's can have such an id: nothing to tell of it
                    arn = group.get("arn")
                    found[group["id"]] = GroupSummary(
                        group["id"],
                        clip(group["name"], NAME_MAX),
                        clip(group["status"], STATUS_MAX),
                        group["modifiedAt"],
                        arn if _is_arn(arn) else None,
                    )
                if not page.get("nextToken") or pages >= LIST_PAGES_MAX:
                    self.listing_pages[cluster_id] = pages
                    return found
                pages += 1
                request["nextToken"] = page["nextToken"]
        except (ClientError, BotoCoreError) as exc:
            raise _translate("ListComputeNodeGroups", exc) from exc


# Pages of ListComputeNodeGroups followed at most (a nextToken that never ends cannot hold a batch), and
# the groups asked for a page (PCS's most; its default is 10).
LIST_PAGES_MAX = 100
LIST_PAGE_SIZE = 100


class KeptListings:
    """Each cluster's last listing, kept from one batch to the next (a warm container's), for proofs alone.

    A listing made after the records of event time T were logged shows every group as it was from its
    `modifiedAt` up to T: a later batch's proof that needs a group read again (`needs_fresh_config`) takes
    it from there, when the group is listed unchanged and T is later than its last read, instead of reading
    it again. Decisions never take a kept listing: they read the group in their own batch. The direct reads
    since a cluster's last listing are counted here, so a cluster whose batches each read a few groups is
    listed once they add up to its listing's pages, not never. At most `CLUSTERS_MAX` clusters are kept
    (an account's clusters; records naming others cannot grow it: a cluster is kept only once PCS listed
    it), the least recently listed first out.
    """

    CLUSTERS_MAX = 64

    def __init__(self) -> None:
        self._listings: OrderedDict[str, tuple[int, dict[str, GroupSummary]]] = OrderedDict()
        self._direct: Counter[str] = Counter()  # direct reads of each cluster's groups since its last listing

    def read_directly(self, cluster_id: str) -> None:
        """Count a direct read of one of the cluster's groups (the counts of clusters named by records
        alone are let go when there are more than `CLUSTERS_MAX`: they only delay a listing)."""
        if cluster_id not in self._direct and len(self._direct) >= self.CLUSTERS_MAX:
            self._direct = Counter({c: n for c, n in self._direct.items() if c in self._listings})
        self._direct[cluster_id] += 1

    def direct_reads(self, cluster_id: str) -> int:
        """Direct reads of the cluster's groups since its last listing."""
        return self._direct[cluster_id]

    def keep(self, cluster_id: str, at_ms: int, listing: dict[str, GroupSummary]) -> None:
        """Keep a cluster's listing, made after the records up to event time `at_ms` were logged."""
        self._listings.pop(cluster_id, None)
        self._listings[cluster_id] = (at_ms, listing)
        self._direct.pop(cluster_id, None)
        while len(self._listings) > self.CLUSTERS_MAX:
            dropped, _ = self._listings.popitem(last=False)
            self._direct.pop(dropped, None)

    def listed(self, cluster_id: str, group_id: str) -> tuple[int, GroupSummary] | None:
        """The group as the cluster's kept listing shows it, with when that listing was made; None when
        no listing of the cluster is kept or it does not show the group."""
        kept = self._listings.get(cluster_id)
        summary = kept[1].get(group_id) if kept is not None else None
        return (kept[0], summary) if kept is not None and summary is not None else None

    def unchanged(self, state: GroupState, known: KnownConfig) -> KnownConfig | None:
        """The group's configuration confirmed up to the cluster's kept listing: when that listing is later
        than the last read and lists the group unchanged; else None."""
        kept = self._listings.get(state.cluster_id)
        if kept is None or kept[0] <= known.checked_at:
            return None
        summary = kept[1].get(state.group_id)
        if summary is None or summary.modified_at_ms != known.modified_at:
            return None
        update = {"checked_at": kept[0], "status": summary.status, "name": group_name_of(summary.name)}
        return known.model_copy(update={**update, "tags": dict(known.tags)})


class BatchReads:
    """PCS as one batch sees it, read as little as possible.

    A group is read with GetComputeNodeGroup once per batch at most. A cluster is listed with
    ListComputeNodeGroups (pages of 100) once a batch at most, and only when that costs no more than the reads
    it saves: once the batch would read as many of the cluster's known groups directly as its listing takes
    pages (as many as its last listing took, `PcsGateway.listing_pages`; one when not known yet), and only for
    clusters with at least `LISTING_FROM_GROUPS` groups in the batch. The listing tells which known groups
    changed (only those are read again). A group seen for the first time is read only when a decision needs it
    (a detection, a success to settle: never budgeted) or, to prove a configuration good, for at most
    `PROOF_READS` groups a batch; past that it is learned from the listing (when it last changed, not its
    scripts: `KnownConfig.actions_read` False), and proves its configuration with a later success. The first
    batch of an account of a thousand groups makes a few calls, not a thousand. Tags are read only when a
    decision needs them, at most every `tag_refresh_ms` of event time. Given `now_ms` (the invocation's
    clock), what a read finds is known as of the batch's time but never later than it (`_as_of`).

    Given `kept` (the handler's, from batch to batch), a proof of a group not read in this batch first looks
    at the cluster's kept listing (`KeptListings`) unless the batch listed the cluster itself, the direct
    reads count from the cluster's last listing in any batch, and a listing made here is kept as of that
    time too.
    """

    LISTING_FROM_GROUPS = 3  # below this, reading the groups directly costs no more than listing them
    PROOF_READS = 20

    def __init__(
        self,
        pcs: PcsGateway,
        tag_refresh_ms: int,
        groups_per_cluster: Mapping[str, int],
        *,
        kept: KeptListings | None = None,
        now_ms: int | None = None,
    ) -> None:
        self.pcs = pcs
        self.tag_refresh_ms = tag_refresh_ms
        self.groups_per_cluster = groups_per_cluster
        self._listings: dict[str, dict[str, GroupSummary]] = {}
        self._kept = kept if kept is not None else KeptListings()
        self._now_ms = now_ms
        # Each group's configuration as made for the state that asked (None: gone, or refused), and PCS's
        # answers it was made of: a mutation run again on the state read fresh after its write lost a race
        # has it made again of that state (`current`), without asking PCS again.
        self._current: dict[tuple[str, str], tuple[GroupState, KnownConfig | None]] = {}
        self._snapshots: dict[tuple[str, str], GroupSnapshot | AwsCallError] = {}
        self._tags: dict[tuple[str, str], tuple[dict[str, str], int] | AwsCallError] = {}
        self.unreadable: dict[tuple[str, str], str] = {}
        self.unlisted: set[tuple[str, str]] = set()  # groups named that PCS does not list (`listed`)
        # Groups seen for the first time whose cluster PCS refused to list: no state may keep their records
        # (`listed`), so the batch is parked for them (`UnlistedClusterError`). Their refusal's error code.
        self.unlearned: dict[tuple[str, str], str] = {}
        self._unlistable: dict[str, str] = {}  # clusters PCS refused to list in this batch: its error code
        self.proof_reads = self.PROOF_READS

    def listed(self, state: GroupState, batch_time: int) -> KnownConfig | None:
        """A group Lifeguard has no state of yet, as its cluster's listing shows it (the cluster listed
        once a batch, pages of 100): when it last changed, not its scripts (`KnownConfig.actions_read`
        False). None when PCS lists no such group (`unlisted`; a cluster PCS does not have lists none) or
        refuses to list the cluster (`unreadable`, and `unlearned`: no state keeps its records). A group
        is kept only once PCS lists it: else whoever can write the scaling log could have a state stored,
        never to expire, for every id it makes up. A group the cluster's kept listing shows
        (`KeptListings`) costs no call; only one it does not (new since, or made up) has the cluster
        listed again, once a batch."""
        key = (state.cluster_id, state.group_id)
        kept = self._kept.listed(state.cluster_id, state.group_id)
        if kept is not None:  # listed by PCS in an earlier batch: a group of the cluster, as of then
            return _listed(kept[1], None, kept[0], self.tag_refresh_ms)
        listing = self._listing(state.cluster_id, batch_time, needed=True)
        if listing is None:  # PCS refused to list the cluster (asked once a batch): no state keeps these
            self.unreadable[key] = self.unlearned[key] = self._unlistable[state.cluster_id]
            return None
        summary = listing.get(state.group_id)
        if summary is None:
            self.unlisted.add(key)
            return None
        return _listed(summary, None, self._as_of(batch_time), self.tag_refresh_ms)

    def proof_waits(self, state: GroupState) -> bool:
        """Whether a proof of the group would learn nothing it can prove with in this batch: its
        configuration is known from a listing alone (no actions, which a proof needs) and the batch's proof
        reads are spent, so a read would only find it listed again. It waits for a later batch, whose
        success asks again (`detection.needs_fresh_config`)."""
        known = state.config
        return known is not None and not known.actions_read and not self.proof_reads and state.episode is None

    def current(
        self, state: GroupState, batch_time: int, *, tags: bool, proof: bool = False
    ) -> KnownConfig | None:
        """The group's configuration now (with fresh tags when `tags`), or None when the group is gone. For
        `proof` only (no decision waits on it), it may come from the listing, without its actions
        (`KnownConfig.actions_read` False), once this batch's proof reads are spent."""
        key = (state.cluster_id, state.group_id)
        made = self._current.get(key)
        if made is not None and made[0] is not state:
            # The mutation runs again, on the state read fresh after its write lost a race: what was made
            # of the state that lost (its configuration as then known, its tags) is made again of this one,
            # from what PCS answered in this batch. Another writer may have read newer tags meanwhile.
            made = None
        if proof and not tags and made is None:
            confirmed = self._kept_unchanged(state)
            if confirmed is not None:
                return confirmed
        try:
            found = made[1] if made is not None else None
            if made is None or (found is not None and not found.actions_read and not proof):
                found = self._read(state, batch_time, proof=proof)
                self._current[key] = (state, found)
            if found is not None and tags and batch_time - found.tags_checked_at >= self.tag_refresh_ms:
                found.tags, found.tags_checked_at = self._tags_of(key, found, batch_time)
        except AwsCallError as exc:
            if is_transient(exc):
                raise  # the batch is retried whole; what it already wrote is idempotent
            # PCS refuses this group (permissions, a value it will not take): the other groups go on, and
            # this one's records stay in its state for the next batch to judge.
            self._current[key] = (state, None)
            self.unreadable[key] = exc.code
            logger.error("group %s of cluster %s cannot be read: %s", state.group_id, state.cluster_id, exc)
            return None
        # Each caller its own copy of what it may change (the tags); the actions are only ever read.
        return found.model_copy(update={"tags": dict(found.tags)}) if found else None

    def _read(self, state: GroupState, batch_time: int, *, proof: bool) -> KnownConfig | None:
        known, as_of = state.config, self._as_of(batch_time)
        # Only a proof may go without the actions, and only where no episode is open (its decisions read
        # the configuration they act on: a quarantine in it, a drain step).
        listing_will_do = proof and not self.proof_reads and state.episode is None
        listing = self._listing(state.cluster_id, batch_time, needed=listing_will_do)
        if listing is None and listing_will_do and known is not None:
            return known  # the cluster cannot be listed: the proof waits (its reads are spent), unread
        if listing is not None:
            summary = listing.get(state.group_id)
            if summary is None:
                return self._gone(state)
            unchanged = known is not None and summary.modified_at_ms == known.modified_at
            if known is not None and unchanged and (known.actions_read or listing_will_do):
                update = {"checked_at": as_of, "status": summary.status, "name": group_name_of(summary.name)}
                return known.model_copy(update=update)
            if listing_will_do:
                return _listed(summary, known, as_of, self.tag_refresh_ms)

        def read() -> GroupSnapshot:
            if proof:
                self.proof_reads = max(0, self.proof_reads - 1)
            if known is not None and known.actions_read:
                # A read a listing could have spared (it would show the group unchanged): a group seen for
                # the first time, or known from a listing alone, is read for its actions, which no listing
                # holds.
                self._kept.read_directly(state.cluster_id)
            return self.pcs.get_group(state.cluster_id, state.group_id)

        try:
            snapshot = _asked(self._snapshots, (state.cluster_id, state.group_id), read)
        except GroupNotFoundError:
            return self._gone(state)
        actions = dict(snapshot.node_lifecycle_actions) if snapshot.node_lifecycle_actions else None
        text = canonical_json(actions)
        fingerprint, kept = fingerprint_of_json(text), actions
        if state_bytes(text) > CONFIG_MAX_STORED_BYTES:
            # Known by its fingerprint only, as if listed: the group's state stays an item DynamoDB takes.
            logger.warning(
                "group %s: its configuration is too large to keep; known by its fingerprint", state.group_id
            )
            kept = None
        return KnownConfig(
            modified_at=snapshot.modified_at_ms,
            fingerprint=fingerprint,
            node_lifecycle_actions=kept,
            actions_read=kept is not None or actions is None,
            arn=snapshot.arn,
            name=group_name_of(snapshot.name),
            status=snapshot.status,
            tags=dict(known.tags) if known else {},
            checked_at=as_of,
            tags_checked_at=known.tags_checked_at if known else -self.tag_refresh_ms,
        )

    def _tags_of(
        self, key: tuple[str, str], found: KnownConfig, batch_time: int
    ) -> tuple[dict[str, str], int]:
        """The group's tags read from PCS (once a batch) and the time they are known as of."""
        tags, as_of = _asked(
            self._tags, key, lambda: (self.pcs.list_tags(found.arn or ""), self._as_of(batch_time))
        )
        return dict(tags), as_of

    def _as_of(self, batch_time: int) -> int:
        """The time a read made in this batch knows the group as of: the batch's (its newest record's), but
        never later than `now_ms`, when the read is made. A record may be dated ahead of the invocation's
        clock (`FUTURE_SKEW_MS`): a configuration taken as known up to then would let a node launched
        between the read and that time, on a newer configuration, prove the one read."""
        return batch_time if self._now_ms is None else min(batch_time, self._now_ms)

    def _kept_unchanged(self, state: GroupState) -> KnownConfig | None:
        """For a proof, the state's own configuration confirmed up to the cluster's kept listing (not made
        in this batch), or None. Worked out from the state it is given, every time, and never remembered
        for the batch: a decision reads the group, and a mutation run again on a state another writer
        changed is judged on that state."""
        known = state.config
        if known is None or not known.actions_read or state.episode is not None:
            return None
        if state.cluster_id in self._listings:
            return None  # listed in this batch: that listing is newer
        return self._kept.unchanged(state, known)

    def _listing(self, cluster_id: str, batch_time: int, *, needed: bool) -> dict[str, GroupSummary] | None:
        """The cluster's listing of this batch, listed now if it is `needed` or pays for itself; else None,
        as for a cluster PCS refused to list (asked once a batch, `_unlistable`: its known groups are read one
        by one, and its new ones are `unlearned`). A cluster PCS does not have lists no group; a transient
        failure is raised (the batch is retried whole)."""
        if cluster_id in self._unlistable:
            return None
        if cluster_id not in self._listings:
            many = self.groups_per_cluster.get(cluster_id, 0) >= self.LISTING_FROM_GROUPS
            paid = self._kept.direct_reads(cluster_id) + 1 >= self.pcs.listing_pages.get(cluster_id, 1)
            if not (needed or (many and paid)):
                return None
            try:
                listing = self._listings[cluster_id] = self.pcs.list_groups(cluster_id)
            except GroupNotFoundError:
                self._listings[cluster_id] = {}  # no such cluster: none of its groups is kept
                return self._listings[cluster_id]
            except AwsCallError as exc:
                if is_transient(exc):
                    raise
                self._unlistable[cluster_id] = exc.code
                logger.error("cluster %s cannot be listed: %s", cluster_id, exc)
                return None
            self._kept.keep(cluster_id, self._as_of(batch_time), listing)
        return self._listings[cluster_id]

    @staticmethod
    def _gone(state: GroupState) -> None:
        logger.warning(
            "group %s of cluster %s no longer exists; records ignored", state.group_id, state.cluster_id
        )


def _asked[A](
    answers: dict[tuple[str, str], A | AwsCallError], key: tuple[str, str], ask: Callable[[], A]
) -> A:
    """PCS's answer to `ask` about the group `key`, asked once a batch: an answer, or a refusal (a group
    gone among them), is kept in `answers` and raised again; a transient error is not kept (a later call
    asks again)."""
    answer = answers.get(key)
    if answer is None:
        try:
            answer = answers[key] = ask()
        except AwsCallError as exc:
            if is_transient(exc):
                raise
            answer = answers[key] = exc
    if isinstance(answer, AwsCallError):
        raise answer
    return answer


def _listed(
    summary: GroupSummary, known: KnownConfig | None, batch_time: int, tag_refresh_ms: int
) -> KnownConfig:
    """A group as its listing tells it: when it last changed, not its lifecycle actions (read later)."""
    return KnownConfig(
        modified_at=summary.modified_at_ms,
        fingerprint="",
        node_lifecycle_actions=None,
        actions_read=False,
        arn=summary.arn or (known.arn if known else None),
        name=group_name_of(summary.name),
        status=summary.status,
        tags=dict(known.tags) if known else {},
        checked_at=batch_time,
        tags_checked_at=known.tags_checked_at if known else -tag_refresh_ms,
    )
