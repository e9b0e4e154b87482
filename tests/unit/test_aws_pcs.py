"""PCS as Lifeguard calls it (`lifeguard.aws.pcs`): the gateway over the project's local PCS in process
(`fakes.LocalPcsClient`, botocore's serializer and parser, no socket), what one batch reads
(`BatchReads`), and the retry loop on a fake call and a fake clock."""

from __future__ import annotations

import copy
from datetime import UTC, datetime
from typing import Any

import pytest

from lifeguard.aws.pcs import (
    RETRYABLE_CODES,
    BatchReads,
    KeptListings,
    PcsGateway,
    RetryPolicy,
    call_with_retries,
    is_transient,
)
from lifeguard.errors import AwsCallError, GroupNotFoundError
from lifeguard.group_state import GroupState, KnownConfig
from lifeguard.lifecycle import fingerprint_of
from tests.conftest import load_event
from tests.unit.fakes import local_pcs_with_group

CLUSTER, GROUP = "pcs_abc123de45", "pcs_abcdef01"
START = datetime(2026, 10, 21, 1, 20, tzinfo=UTC)
START_MS = int(START.timestamp() * 1000)
TERMINATE = load_event("configs/article-terminate.json")
QUARANTINED = copy.deepcopy(TERMINATE)
QUARANTINED["stages"]["nodeBootstrapped"][0]["onError"] = "STOP_SEQUENCE"
ARN = f"arn:aws:pcs:us-east-1:123456789012:cluster/{CLUSTER}/computenodegroup/{GROUP}"
REFRESH_MS = 10 * 60 * 1000


class World:
    """A local PCS on a manual clock with the article's group, and a gateway to it."""

    def __init__(self, *, tags: dict[str, str] | None = None) -> None:
        self.clock, self.pcs, self.api = local_pcs_with_group(
            START, CLUSTER, GROUP, TERMINATE, update_seconds=60, tags=tags
        )
        self.gateway = PcsGateway(self.api)

    def add_groups(self, count: int) -> list[str]:
        """`count` more groups of the cluster; their ids."""
        return [
            self.pcs.add_compute_node_group(
                CLUSTER, f"g{n:03d}", group_id=f"pcs_g{n:07d}", node_lifecycle_actions=TERMINATE
            )["id"]
            for n in range(count)
        ]

    def update(self, group_id: str, actions: dict[str, Any]) -> None:
        """Someone changes a group's lifecycle actions, a minute from now."""
        self.clock.advance(60)
        self.api.update_compute_node_group(
            clusterIdentifier=CLUSTER, computeNodeGroupIdentifier=group_id, nodeLifecycleActions=actions
        )

    def calls(self, operation: str) -> int:
        return sum(1 for call in self.pcs.calls if call.operation == operation)

    def reads(self, groups_per_cluster: int = 1) -> BatchReads:
        return BatchReads(self.gateway, REFRESH_MS, {CLUSTER: groups_per_cluster})

    def known(self, group_id: str, batch_time: int, **more: Any) -> GroupState:
        """The group's state, with its configuration as PCS holds it now (read at `batch_time`)."""
        snapshot = self.gateway.get_group(CLUSTER, group_id)
        actions = dict(snapshot.node_lifecycle_actions or {})
        config = KnownConfig(
            modified_at=snapshot.modified_at_ms,
            fingerprint=fingerprint_of(actions),
            node_lifecycle_actions=actions,
            arn=snapshot.arn,
            name=snapshot.name,
            status=snapshot.status,
            checked_at=batch_time,
            **more,
        )
        self.pcs.calls.clear()
        return GroupState(cluster_id=CLUSTER, group_id=group_id, config=config)


# -- PcsGateway --


def test_a_group_s_snapshot_carries_what_pcs_says_of_it() -> None:
    world = World()
    snapshot = world.gateway.get_group(CLUSTER, GROUP)
    assert (snapshot.cluster_id, snapshot.group_id, snapshot.name) == (CLUSTER, GROUP, "lca-static")
    assert snapshot.arn == ARN
    assert snapshot.status == "ACTIVE"
    assert snapshot.modified_at_ms == START_MS
    assert snapshot.node_lifecycle_actions == TERMINATE
    world.update(GROUP, QUARANTINED)
    moved = world.gateway.get_group(CLUSTER, GROUP)
    assert moved.modified_at_ms == START_MS + 60_000
    assert moved.status == "UPDATING"
    assert moved.node_lifecycle_actions == QUARANTINED
    assert world.gateway.calls == 2


class _OddAnswers:
    """A PCS client whose answers hold a status and a name no PCS model allows (botocore parses an answer
    without holding it to the model's enum or pattern), 300 KB each."""

    ODD = "SUSPENDED" + "\x1b[2J" + "f" * 300_000

    def _group(self) -> dict[str, Any]:
        return {
            "id": GROUP,
            "name": self.ODD,
            "arn": ARN,
            "clusterId": CLUSTER,
            "status": self.ODD,
            "modifiedAt": START,
        }

    def get_compute_node_group(self, **_: Any) -> dict[str, Any]:
        return {"computeNodeGroup": self._group()}

    def list_compute_node_groups(self, **_: Any) -> dict[str, Any]:
        return {"computeNodeGroups": [self._group()]}


def test_an_answer_s_status_and_name_are_bounded_and_one_line() -> None:
    gateway = PcsGateway(_OddAnswers())  # type: ignore[arg-type]
    snapshot = gateway.get_group(CLUSTER, GROUP)
    listed = gateway.list_groups(CLUSTER)[GROUP]
    for status, name in ((snapshot.status, snapshot.name), (listed.status, listed.name)):
        assert len(status) <= 40
        assert len(name) <= 64
        assert status.startswith("SUSPENDED?[2J")  # what it says, shown; its terminal escape is not
        assert "\x1b" not in name


def test_a_group_without_lifecycle_actions_has_none() -> None:
    world = World()
    world.pcs.add_compute_node_group(CLUSTER, "bare", group_id="pcs_bare0001")
    assert world.gateway.get_group(CLUSTER, "pcs_bare0001").node_lifecycle_actions is None


def test_a_missing_group_raises_group_not_found() -> None:
    world = World()
    with pytest.raises(GroupNotFoundError) as raised:
        world.gateway.get_group(CLUSTER, "pcs_missing01")
    assert raised.value.operation == "GetComputeNodeGroup"
    assert raised.value.code == "ResourceNotFoundException"
    assert not is_transient(raised.value)


def test_list_groups_pages_through_every_group_of_the_cluster() -> None:
    world = World()
    ids = world.add_groups(150)  # PCS answers 100 a page
    world.pcs.add_cluster("other", cluster_id="pcs_other00001")
    world.pcs.add_compute_node_group("pcs_other00001", "elsewhere", group_id="pcs_elsewhere")
    found = world.gateway.list_groups(CLUSTER)
    assert set(found) == {GROUP, *ids}
    assert world.calls("ListComputeNodeGroups") == 2
    assert world.gateway.calls == 2
    summary = found[GROUP]
    assert (summary.group_id, summary.name, summary.status, summary.modified_at_ms) == (
        GROUP,
        "lca-static",
        "ACTIVE",
        START_MS,
    )
    first, second = [c for c in world.pcs.calls if c.operation == "ListComputeNodeGroups"]
    assert first.params["maxResults"] == second.params["maxResults"] == 100  # PCS's default page is 10
    assert second.params["nextToken"] == "100"


def test_list_tags_keeps_the_tags_lifeguard_reads_each_bounded() -> None:
    world = World(tags={"lifeguard:mode": "revert", "team": "hpc", "managed-by": "terraform"})
    assert world.gateway.list_tags(ARN) == {"lifeguard:mode": "revert", "managed-by": "terraform"}
    assert world.calls("ListTagsForResource") == 1
    # One of Lifeguard's own in another case, or with spaces around its key, is kept: the detection says it
    # is not read as its look-alike (another tool's in another case is nobody's).
    world = World(tags={"Lifeguard:Mode": "off", "Managed-By": "terraform", "lifeguard:moder": "x"})
    assert world.gateway.list_tags(ARN) == {"Lifeguard:Mode": "off"}


def test_the_tags_read_are_every_tag_the_detection_and_the_owners_note_read() -> None:
    from lifeguard.aws.pcs import TAGS_READ
    from lifeguard.detection import TAG_DRAIN, TAG_MODE, TAG_THRESHOLD, TAG_WINDOW
    from lifeguard.remediation.iac import TAG_CLOUDFORMATION, TAGS_TERRAFORM

    assert {TAG_MODE, TAG_THRESHOLD, TAG_WINDOW, TAG_DRAIN, TAG_CLOUDFORMATION, *TAGS_TERRAFORM} == TAGS_READ


class _OutOfFormAnswers(_OddAnswers):
    """Answers whose ids, ARN and tags no PCS would give: 100 KB, and markup in them."""

    def __init__(self, **group: Any) -> None:
        self.changed = group

    def _group(self) -> dict[str, Any]:
        return {**super()._group(), **self.changed}

    def list_tags_for_resource(self, **_: Any) -> dict[str, Any]:
        many = {f"k{n}": "v" * 300_000 for n in range(1000)}
        return {"tags": {**many, "lifeguard:mode": "quarantine" + " " * 300_000}}


@pytest.mark.parametrize(
    "changed",
    [
        {"id": "pcs_" + "a" * 100_000 + "\n<!channel>"},
        {"clusterId": "not-an-id"},
        {"arn": "arn:aws:pcs:" + "x" * 3000},
        {"arn": None},
        {"modifiedAt": None},
        {"status": 7},
        {"name": None},
    ],
    ids=["huge-id", "cluster-name", "long-arn", "no-arn", "no-time", "status-number", "no-name"],
)
def test_an_answer_whose_ids_or_arn_are_not_of_pcs_s_form_is_refused(changed: dict[str, Any]) -> None:
    gateway = PcsGateway(_OutOfFormAnswers(**changed))  # type: ignore[arg-type]
    with pytest.raises(AwsCallError) as raised:
        gateway.get_group(CLUSTER, GROUP)
    assert (raised.value.operation, raised.value.code) == ("GetComputeNodeGroup", "InvalidAnswer")
    assert not is_transient(raised.value)  # the group's records wait for a later read
    assert len(str(raised.value)) < 1000


def test_a_read_keeps_the_group_s_name_and_one_not_of_pcs_s_form_is_kept_as_none() -> None:
    world = World()
    read = world.reads().current(GroupState(cluster_id=CLUSTER, group_id=GROUP), START_MS, tags=False)
    assert read is not None
    assert read.name == "lca-static"
    for odd in ("pcs_" + "a" * 20, "x" * 26, "lca static", "<!channel>", "ab"):
        gateway = PcsGateway(_OutOfFormAnswers(name=odd))  # type: ignore[arg-type]
        found = BatchReads(gateway, REFRESH_MS, {CLUSTER: 1}).current(
            GroupState(cluster_id=CLUSTER, group_id=GROUP), START_MS, tags=False
        )
        assert found is not None
        assert found.name is None, odd


def test_a_listing_that_finds_a_group_unchanged_names_it_when_its_state_did_not() -> None:
    # A state stored before the name was kept: the listing that confirms it names the group, no read made.
    world = World()
    others = world.add_groups(3)
    state = world.known(GROUP, START_MS)
    assert state.config is not None
    state.config.name = None
    confirmed = world.reads(groups_per_cluster=4).current(state, START_MS + 120_000, tags=False)
    assert world.calls("GetComputeNodeGroup") == 0
    assert confirmed is not None
    assert confirmed.name == "lca-static"
    assert not confirmed.confirms(state.config)  # a change of the state: written
    # A later batch's proof confirmed from the cluster's kept listing names it too.
    other = world.known(others[0], START_MS)
    assert other.config is not None
    other.config.name = None
    kept = KeptListings()
    listed_at = START_MS + 180_000
    BatchReads(world.gateway, REFRESH_MS, {CLUSTER: 4}, kept=kept, now_ms=listed_at).current(
        state, listed_at, tags=False, proof=True
    )
    later = BatchReads(world.gateway, REFRESH_MS, {CLUSTER: 1}, kept=kept, now_ms=listed_at + 60_000)
    world.pcs.calls.clear()
    proved = later.current(other, listed_at + 30_000, tags=False, proof=True)
    assert world.pcs.calls == []
    assert proved is not None
    assert proved.name == "g000"


def test_a_listing_passes_over_an_id_not_of_pcs_s_form_and_an_arn_out_of_bounds() -> None:
    assert PcsGateway(_OutOfFormAnswers(id="pcs_x" * 30_000)).list_groups(CLUSTER) == {}  # type: ignore[arg-type]
    listed = PcsGateway(_OutOfFormAnswers(arn="a" * 3000)).list_groups(CLUSTER)  # type: ignore[arg-type]
    assert listed[GROUP].arn is None


def test_tags_out_of_bounds_keep_only_those_read_and_clipped() -> None:
    tags = PcsGateway(_OutOfFormAnswers()).list_tags(ARN)  # type: ignore[arg-type]
    assert list(tags) == ["lifeguard:mode"]
    assert len(tags["lifeguard:mode"]) == 256


def test_an_update_sends_only_the_lifecycle_actions_and_its_client_token_applies_once() -> None:
    world = World()
    world.clock.advance(30)
    first = world.gateway.update_lifecycle_actions(CLUSTER, GROUP, QUARANTINED, "token-0001")
    assert first.node_lifecycle_actions == QUARANTINED
    assert first.status == "UPDATING"
    assert first.modified_at_ms == START_MS + 30_000
    world.clock.advance(120)  # settled: a second update would be taken, and move modifiedAt
    again = world.gateway.update_lifecycle_actions(CLUSTER, GROUP, QUARANTINED, "token-0001")
    assert again.modified_at_ms == first.modified_at_ms
    updates = [c for c in world.pcs.calls if c.operation == "UpdateComputeNodeGroup"]
    assert [c.params for c in updates] == 2 * [
        {
            "clusterIdentifier": CLUSTER,
            "computeNodeGroupIdentifier": GROUP,
            "nodeLifecycleActions": QUARANTINED,
            "clientToken": "token-0001",
        }
    ]
    assert world.gateway.get_group(CLUSTER, GROUP).modified_at_ms == START_MS + 30_000


@pytest.mark.parametrize(
    ("operation", "call"),
    [
        (
            "UpdateComputeNodeGroup",
            lambda g: g.update_lifecycle_actions(CLUSTER, GROUP, QUARANTINED, "token-0003"),
        ),
        ("GetComputeNodeGroup", lambda g: g.get_group(CLUSTER, GROUP)),
        ("ListComputeNodeGroups", lambda g: g.list_groups(CLUSTER)),
        ("ListTagsForResource", lambda g: g.list_tags(ARN)),
    ],
)
def test_pcs_errors_are_translated_with_pcs_s_retry_after(operation: str, call: Any) -> None:
    world = World()
    world.pcs.inject_fault("ThrottlingException", operation=operation, retry_after_seconds=5, message="slow")
    with pytest.raises(AwsCallError) as raised:
        call(world.gateway)
    error = raised.value
    assert type(error) is AwsCallError
    assert (error.operation, error.code, error.message) == (operation, "ThrottlingException", "slow")
    assert error.retry_after_seconds == 5
    assert is_transient(error)
    assert world.calls(operation) == 1


def test_a_conflict_while_the_group_updates_is_transient() -> None:
    world = World()
    world.gateway.update_lifecycle_actions(CLUSTER, GROUP, QUARANTINED, "token-0001")
    with pytest.raises(AwsCallError) as raised:
        world.gateway.update_lifecycle_actions(CLUSTER, GROUP, TERMINATE, "token-0002")
    assert raised.value.code == "ConflictException"
    assert raised.value.retry_after_seconds is None
    assert is_transient(raised.value)


def test_a_request_botocore_refuses_is_translated_and_not_retried() -> None:
    world = World()
    with pytest.raises(AwsCallError) as raised:
        world.gateway.update_lifecycle_actions(CLUSTER, GROUP, QUARANTINED, "short")  # tokens take 8+
    assert (raised.value.operation, raised.value.code) == ("UpdateComputeNodeGroup", "ParamValidationError")
    assert not is_transient(raised.value)
    assert world.pcs.calls == []


@pytest.mark.parametrize(
    ("code", "transient"),
    [
        *((code, True) for code in sorted(RETRYABLE_CODES)),
        ("ValidationException", False),
        ("AccessDeniedException", False),
        ("ResourceNotFoundException", False),
        ("ServiceQuotaExceededException", False),
        # A front end's answer without PCS's modeled body: botocore names it by its HTTP status.
        *((status, True) for status in ("500", "502", "503", "504", "429")),
        *((status, False) for status in ("400", "403", "404", "413", "5000", "50")),
    ],
)
def test_only_errors_a_later_attempt_can_cure_are_transient(code: str, transient: bool) -> None:
    assert is_transient(AwsCallError("GetComputeNodeGroup", code, "x")) is transient


@pytest.mark.parametrize(
    ("code", "status", "transient"),
    [
        # AWS's front end answers any service so (botocore's standard retry mode retries these).
        ("InternalFailure", 500, True),
        ("ServiceUnavailable", 503, True),
        ("RequestTimeoutException", 408, True),
        ("TooManyRequestsException", 429, True),
        # A code Lifeguard does not know, of an answer whose status says a later attempt may succeed.
        ("SomeNewServerError", 500, True),
        ("SomeNewThrottle", 429, True),
        ("SomeNewRefusal", 400, False),
        ("AccessDeniedException", 403, False),
        ("ServiceQuotaExceededException", 402, False),
    ],
)
def test_an_answer_of_http_429_or_5xx_is_transient_whatever_its_code(
    code: str, status: int, transient: bool
) -> None:
    assert is_transient(AwsCallError("UpdateComputeNodeGroup", code, "x", status=status)) is transient


def test_every_connection_error_of_botocore_s_is_transient() -> None:
    """botocore's connection errors are named after their class (`AwsCallError.from_exception`): each of
    them (a TLS failure, a proxy's, a stream cut short included) is worth another attempt."""
    import botocore.exceptions

    families = (botocore.exceptions.ConnectionError, botocore.exceptions.HTTPClientError)
    names = {
        name
        for name, value in vars(botocore.exceptions).items()
        if isinstance(value, type) and issubclass(value, families)
    }
    assert names
    assert {
        name for name in names if not is_transient(AwsCallError("GetComputeNodeGroup", name, "x"))
    } == set()


# -- BatchReads --


def test_a_group_is_read_once_per_batch() -> None:
    world = World()
    state = GroupState(cluster_id=CLUSTER, group_id=GROUP)
    reads = world.reads()
    first = reads.current(state, START_MS, tags=False)
    assert first is not None
    assert first.fingerprint == fingerprint_of(TERMINATE)
    assert first.node_lifecycle_actions == TERMINATE
    assert (first.arn, first.status, first.modified_at, first.checked_at) == (
        ARN,
        "ACTIVE",
        START_MS,
        START_MS,
    )
    first.tags["mutated"] = "by the caller"
    second = reads.current(state, START_MS, tags=False)
    assert second is not None
    assert "mutated" not in second.tags  # each caller gets its own copy
    assert world.calls("GetComputeNodeGroup") == 1
    assert world.calls("ListComputeNodeGroups") == 0
    world.reads().current(state, START_MS + 1000, tags=False)  # the next batch reads again
    assert world.calls("GetComputeNodeGroup") == 2


def test_what_a_read_finds_is_known_as_of_its_batch_but_never_later_than_the_clock() -> None:
    """A batch's newest record may be dated ahead of the invocation's clock (the skew its times may have):
    what a read finds is known up to when it was made, by a direct read, its tags, a listing."""
    world = World()
    new, known = world.add_groups(2)
    ahead = START_MS + 240_000
    reads = BatchReads(world.gateway, REFRESH_MS, {CLUSTER: 1}, now_ms=START_MS)
    read = reads.current(GroupState(cluster_id=CLUSTER, group_id=GROUP), ahead, tags=True)
    assert read is not None
    assert (read.checked_at, read.tags_checked_at) == (START_MS, START_MS)
    state = world.known(known, START_MS - 1000)
    listed = BatchReads(world.gateway, REFRESH_MS, {CLUSTER: 3}, now_ms=START_MS)
    learned = listed.listed(GroupState(cluster_id=CLUSTER, group_id=new), ahead)
    confirmed = listed.current(state, ahead, tags=False)
    assert world.calls("ListComputeNodeGroups") == 1
    assert world.calls("GetComputeNodeGroup") == 0
    assert learned is not None
    assert confirmed is not None
    assert (learned.checked_at, confirmed.checked_at) == (START_MS, START_MS)
    behind = BatchReads(world.gateway, REFRESH_MS, {CLUSTER: 1}, now_ms=ahead)
    again = behind.current(GroupState(cluster_id=CLUSTER, group_id=GROUP), START_MS + 1000, tags=False)
    assert again is not None
    assert again.checked_at == START_MS + 1000  # a batch behind the clock is known as of its own time


def test_several_known_groups_of_a_cluster_are_listed_and_only_those_that_moved_read_again() -> None:
    world = World()
    others = world.add_groups(3)
    states = [world.known(group_id, START_MS) for group_id in (GROUP, *others)]
    world.update(others[0], QUARANTINED)
    world.pcs.calls.clear()
    batch_time = START_MS + 120_000
    reads = world.reads(groups_per_cluster=4)
    found = [reads.current(state, batch_time, tags=False) for state in states]
    assert world.calls("ListComputeNodeGroups") == 1
    gets = [
        c.params["computeNodeGroupIdentifier"]
        for c in world.pcs.calls
        if c.operation == "GetComputeNodeGroup"
    ]
    assert gets == [others[0]]
    moved = found[1]
    assert moved is not None
    assert moved.fingerprint == fingerprint_of(QUARANTINED)
    assert moved.modified_at == START_MS + 60_000
    assert moved.status == "UPDATING"
    for state, same in zip([states[0], *states[2:]], [found[0], *found[2:]], strict=True):
        assert state.config is not None
        assert same == state.config.model_copy(update={"checked_at": batch_time, "status": "ACTIVE"})


def test_a_large_cluster_is_listed_only_once_the_reads_it_saves_cost_as_much_as_its_pages() -> None:
    world = World()
    others = world.add_groups(249)  # 250 groups: a listing of 3 pages
    states = [world.known(group_id, START_MS) for group_id in (GROUP, *others[:5])]
    first = world.reads(groups_per_cluster=6)
    assert all(first.current(state, START_MS + 1000, tags=False) for state in states)
    # Its size unknown, the cluster is listed at once, and the size kept for the next batches.
    assert (world.calls("ListComputeNodeGroups"), world.calls("GetComputeNodeGroup")) == (3, 0)
    assert world.gateway.listing_pages == {CLUSTER: 3}
    world.pcs.calls.clear()
    second = world.reads(groups_per_cluster=6)
    assert all(second.current(state, START_MS + 2000, tags=False) for state in states)
    # Two groups read directly, then the third would make three reads: the listing pays from there.
    assert (world.calls("GetComputeNodeGroup"), world.calls("ListComputeNodeGroups")) == (2, 3)
    world.pcs.calls.clear()
    third = world.reads(groups_per_cluster=2)
    assert all(third.current(state, START_MS + 3000, tags=False) for state in states[:2])
    assert (world.calls("GetComputeNodeGroup"), world.calls("ListComputeNodeGroups")) == (2, 0)


def test_fewer_groups_than_worth_a_listing_are_read_directly() -> None:
    world = World()
    other = world.add_groups(1)[0]
    states = [world.known(group_id, START_MS) for group_id in (GROUP, other)]
    reads = world.reads(groups_per_cluster=2)
    for state in states:
        assert reads.current(state, START_MS + 1000, tags=False) is not None
    assert world.calls("ListComputeNodeGroups") == 0
    assert world.calls("GetComputeNodeGroup") == 2


def test_a_listed_cluster_without_the_group_means_it_is_gone() -> None:
    world = World()
    others = world.add_groups(2)
    states = [world.known(group_id, START_MS) for group_id in (GROUP, *others)]
    world.api.delete_compute_node_group(clusterIdentifier=CLUSTER, computeNodeGroupIdentifier=others[1])
    world.pcs.calls.clear()
    reads = world.reads(groups_per_cluster=3)
    assert reads.current(states[2], START_MS + 1000, tags=False) is None
    assert reads.current(states[0], START_MS + 1000, tags=False) is not None
    assert world.calls("ListComputeNodeGroups") == 1
    assert world.calls("GetComputeNodeGroup") == 0
    assert reads.unreadable == {}


def test_a_kept_listing_confirms_later_proofs_and_never_a_decision_or_a_moved_group() -> None:
    world = World()
    others = world.add_groups(3)
    states = [world.known(group_id, START_MS) for group_id in (GROUP, *others)]
    world.update(others[1], QUARANTINED)  # before the listing
    world.pcs.calls.clear()
    kept = KeptListings()
    listed_at = START_MS + 120_000
    first = BatchReads(world.gateway, REFRESH_MS, {CLUSTER: 4}, kept=kept, now_ms=listed_at + 5_000)
    assert first.current(states[0], listed_at, tags=False, proof=True) is not None
    assert world.calls("ListComputeNodeGroups") == 1  # one page: paid by the first read
    world.update(others[0], QUARANTINED)  # after the listing
    world.pcs.calls.clear()
    later = BatchReads(world.gateway, REFRESH_MS, {CLUSTER: 1}, kept=kept, now_ms=listed_at + 600_000)
    batch_time = listed_at + 300_000
    # Moved after the listing: confirmed as of the listing, which holds up to when it was made (a node
    # launched since may have booted the newer configuration, and proves nothing with this one).
    confirmed = later.current(states[1], batch_time, tags=False, proof=True)
    assert states[1].config is not None
    assert confirmed == states[1].config.model_copy(update={"checked_at": listed_at, "status": "ACTIVE"})
    assert world.pcs.calls == []
    # Moved before the listing: the listing shows it moved, so it is read again.
    moved = later.current(states[2], batch_time, tags=False, proof=True)
    assert moved is not None
    assert (moved.fingerprint, moved.checked_at) == (fingerprint_of(QUARANTINED), batch_time)
    assert world.calls("GetComputeNodeGroup") == 1
    # A decision reads the group itself.
    decided = later.current(states[3], batch_time, tags=False)
    assert decided is not None
    assert decided.checked_at == batch_time
    assert world.calls("GetComputeNodeGroup") == 2


def test_a_proof_confirmed_from_a_kept_listing_is_not_remembered_for_the_batch() -> None:
    world = World()
    others = world.add_groups(3)
    state = world.known(GROUP, START_MS)
    kept = KeptListings()
    listed_at = START_MS + 120_000
    first = BatchReads(world.gateway, REFRESH_MS, {CLUSTER: 4}, kept=kept, now_ms=listed_at)
    assert first.current(world.known(others[0], START_MS), listed_at, tags=False, proof=True) is not None
    world.update(GROUP, QUARANTINED)
    world.pcs.calls.clear()
    batch_time = listed_at + 600_000
    reads = BatchReads(world.gateway, REFRESH_MS, {CLUSTER: 1}, kept=kept, now_ms=batch_time)
    proof = reads.current(state, batch_time, tags=False, proof=True)
    assert proof is not None
    assert (proof.fingerprint, proof.checked_at) == (fingerprint_of(TERMINATE), listed_at)
    assert world.pcs.calls == []
    # A decision on the same group in the same batch reads it: what PCS holds now.
    decided = reads.current(state, batch_time, tags=True)
    assert decided is not None
    assert (decided.fingerprint, decided.checked_at) == (fingerprint_of(QUARANTINED), batch_time)
    assert world.calls("GetComputeNodeGroup") == 1
    # A state read after the listing (another writer's, as a mutation run again after a lost race gets
    # it) is not confirmed from the older listing: it gets the batch's read.
    newer = world.known(GROUP, batch_time - 1000)
    again = BatchReads(world.gateway, REFRESH_MS, {CLUSTER: 1}, kept=kept, now_ms=batch_time).current(
        newer, batch_time, tags=False, proof=True
    )
    assert again is not None
    assert (again.fingerprint, again.checked_at) == (fingerprint_of(QUARANTINED), batch_time)


def test_a_kept_listing_older_than_the_last_read_confirms_nothing_and_holds_to_its_own_time() -> None:
    world = World()
    others = world.add_groups(1)
    kept = KeptListings()
    now_ms = START_MS + 60_000
    forged = now_ms + 240_000  # a record's time in the future, within the skew the handler lets through
    first = BatchReads(world.gateway, REFRESH_MS, {CLUSTER: 3}, kept=kept, now_ms=now_ms)
    assert first.current(world.known(GROUP, START_MS), forged, tags=False, proof=True) is not None
    assert world.calls("ListComputeNodeGroups") == 1
    world.pcs.calls.clear()
    state = world.known(others[0], START_MS)
    confirmed = BatchReads(world.gateway, REFRESH_MS, {CLUSTER: 1}, kept=kept).current(
        state, forged, tags=False, proof=True
    )
    assert confirmed is not None
    assert confirmed.checked_at == now_ms  # the listing holds up to when it was made, not to a forged time
    assert world.pcs.calls == []
    read_after = world.known(others[0], now_ms + 1)
    again = BatchReads(world.gateway, REFRESH_MS, {CLUSTER: 1}, kept=kept).current(
        read_after, forged, tags=False, proof=True
    )
    assert again is not None
    assert again.checked_at == forged  # read again: the kept listing is older than the last read
    assert world.calls("GetComputeNodeGroup") == 1


def test_direct_reads_add_up_from_batch_to_batch_until_a_listing_pays() -> None:
    world = World()
    others = world.add_groups(249)  # 250 groups: 3 pages
    states = [world.known(group_id, START_MS) for group_id in others[:6]]
    world.gateway.listing_pages[CLUSTER] = 3
    kept = KeptListings()
    for n, state in enumerate(states[:2]):  # a batch each, one group each: read directly
        reads = BatchReads(world.gateway, REFRESH_MS, {CLUSTER: 3}, kept=kept)
        assert reads.current(state, START_MS + n, tags=False) is not None
    assert (world.calls("GetComputeNodeGroup"), world.calls("ListComputeNodeGroups")) == (2, 0)
    assert kept.direct_reads(CLUSTER) == 2
    reads = BatchReads(world.gateway, REFRESH_MS, {CLUSTER: 3}, kept=kept)
    assert reads.current(states[2], START_MS + 5, tags=False) is not None
    # The third read would make three: the listing (3 pages) pays from there.
    assert (world.calls("GetComputeNodeGroup"), world.calls("ListComputeNodeGroups")) == (2, 3)
    assert kept.direct_reads(CLUSTER) == 0
    # Without kept listings, each batch counts from nothing.
    world.pcs.calls.clear()
    for n, state in enumerate(states[3:]):
        reads = BatchReads(world.gateway, REFRESH_MS, {CLUSTER: 3})
        assert reads.current(state, START_MS + n, tags=False) is not None
    assert (world.calls("GetComputeNodeGroup"), world.calls("ListComputeNodeGroups")) == (3, 0)


def test_reads_a_listing_cannot_spare_never_pay_for_one() -> None:
    # A group seen for the first time, or known from a listing alone, is read for its actions: a listing
    # holds none, so however many such reads add up, they are not a reason to list the cluster.
    world = World()
    others = world.add_groups(249)  # 250 groups: 3 pages
    world.gateway.listing_pages[CLUSTER] = 3
    kept = KeptListings()
    listed_only = world.known(others[5], START_MS)
    assert listed_only.config is not None
    listed_only.config.actions_read = False
    fresh = [GroupState(cluster_id=CLUSTER, group_id=group_id) for group_id in others[:5]]
    for n, state in enumerate([*fresh, listed_only]):
        reads = BatchReads(world.gateway, REFRESH_MS, {CLUSTER: 3}, kept=kept)
        found = reads.current(state, START_MS + n, tags=False, proof=True)
        assert found is not None
        assert found.actions_read
    assert (world.calls("GetComputeNodeGroup"), world.calls("ListComputeNodeGroups")) == (6, 0)
    assert kept.direct_reads(CLUSTER) == 0


def test_kept_listings_and_read_counts_are_bounded_by_clusters() -> None:
    kept = KeptListings()
    for n in range(KeptListings.CLUSTERS_MAX * 3):
        kept.read_directly(f"pcs_forged{n:05d}")
    assert len(kept._direct) <= KeptListings.CLUSTERS_MAX
    for n in range(KeptListings.CLUSTERS_MAX + 5):
        kept.keep(f"pcs_real{n:06d}", START_MS, {})
    assert len(kept._listings) == KeptListings.CLUSTERS_MAX
    assert "pcs_real000000" not in kept._listings  # the least recently listed went first


def test_tags_are_read_only_when_asked_and_at_most_every_refresh_interval() -> None:
    world = World(tags={"lifeguard:mode": "revert"})
    state = GroupState(cluster_id=CLUSTER, group_id=GROUP)
    assert world.reads().current(state, START_MS, tags=False) is not None
    assert world.calls("ListTagsForResource") == 0

    reads = world.reads()
    config = reads.current(state, START_MS, tags=True)
    assert config is not None
    assert config.tags == {"lifeguard:mode": "revert"}
    assert config.tags_checked_at == START_MS
    assert reads.current(state, START_MS, tags=True) is not None  # the same batch: not again
    assert world.calls("ListTagsForResource") == 1

    world.api.tag_resource(resourceArn=ARN, tags={"lifeguard:mode": "off"})
    state.config = config
    within = world.reads().current(state, START_MS + REFRESH_MS - 1, tags=True)
    assert within is not None
    assert within.tags == {"lifeguard:mode": "revert"}  # the tags read less than a refresh ago
    assert world.calls("ListTagsForResource") == 1
    after = world.reads().current(state, START_MS + REFRESH_MS, tags=True)
    assert after is not None
    assert after.tags == {"lifeguard:mode": "off"}
    assert after.tags_checked_at == START_MS + REFRESH_MS
    assert world.calls("ListTagsForResource") == 2


def test_a_group_pcs_refuses_to_show_is_unreadable_and_the_others_go_on() -> None:
    world = World()
    other = world.add_groups(1)[0]
    world.pcs.inject_fault("AccessDeniedException", operation="GetComputeNodeGroup")
    reads = world.reads()
    refused = GroupState(cluster_id=CLUSTER, group_id=GROUP)
    assert reads.current(refused, START_MS, tags=False) is None
    assert reads.unreadable == {(CLUSTER, GROUP): "AccessDeniedException"}
    assert reads.current(refused, START_MS, tags=False) is None  # not asked again this batch
    assert reads.current(GroupState(cluster_id=CLUSTER, group_id=other), START_MS, tags=False) is not None
    assert world.calls("GetComputeNodeGroup") == 2


def test_a_group_asked_for_again_by_another_state_is_made_of_it_from_what_pcs_answered() -> None:
    """A mutation run again after its write lost a race asks on the state read fresh: the configuration is
    made again of that state (its tags as the other writer read them), of PCS's answers in this batch."""
    world = World(tags={"lifeguard:mode": "off"})
    reads = world.reads()
    lost = GroupState(cluster_id=CLUSTER, group_id=GROUP)
    first = reads.current(lost, START_MS, tags=True)
    assert first is not None
    assert (first.tags, first.tags_checked_at) == ({"lifeguard:mode": "off"}, START_MS)
    newer = {"lifeguard:mode": "notify"}
    fresh = world.known(GROUP, START_MS - 1000, tags=newer, tags_checked_at=START_MS - 1000)
    again = reads.current(fresh, START_MS, tags=False)
    assert again is not None
    assert (again.tags, again.tags_checked_at, again.checked_at) == (newer, START_MS - 1000, START_MS)
    stale = world.known(GROUP, START_MS - 1000)  # tags never read: due, and taken as this batch read them
    due = reads.current(stale, START_MS, tags=True)
    assert due is not None
    assert (due.tags, due.tags_checked_at) == ({"lifeguard:mode": "off"}, START_MS)
    assert (world.calls("GetComputeNodeGroup"), world.calls("ListTagsForResource")) == (0, 0)
    read_since = world.known(GROUP, START_MS - 1000)
    world.pcs.inject_fault("AccessDeniedException", operation="GetComputeNodeGroup")
    refusing = world.reads()
    assert refusing.current(GroupState(cluster_id=CLUSTER, group_id=GROUP), START_MS, tags=False) is None
    assert refusing.current(read_since, START_MS, tags=False) is None
    assert world.calls("GetComputeNodeGroup") == 1  # refused once: not asked again this batch


def test_a_group_whose_tags_are_refused_is_unreadable() -> None:
    world = World()
    world.pcs.inject_fault("AccessDeniedException", operation="ListTagsForResource")
    reads = world.reads()
    assert reads.current(GroupState(cluster_id=CLUSTER, group_id=GROUP), START_MS, tags=True) is None
    assert reads.unreadable == {(CLUSTER, GROUP): "AccessDeniedException"}


def test_throttling_is_raised_for_the_batch_to_be_retried_whole() -> None:
    world = World()
    world.pcs.inject_fault("ThrottlingException", operation="GetComputeNodeGroup", retry_after_seconds=3)
    reads = world.reads()
    state = GroupState(cluster_id=CLUSTER, group_id=GROUP)
    with pytest.raises(AwsCallError) as raised:
        reads.current(state, START_MS, tags=False)
    assert raised.value.code == "ThrottlingException"
    assert reads.unreadable == {}
    assert reads.current(state, START_MS, tags=False) is not None  # not remembered as gone


def test_a_deleted_group_is_none() -> None:
    world = World()
    state = world.known(GROUP, START_MS)
    world.api.delete_compute_node_group(clusterIdentifier=CLUSTER, computeNodeGroupIdentifier=GROUP)
    world.pcs.calls.clear()
    reads = world.reads()
    assert reads.current(state, START_MS + 1000, tags=True) is None
    assert reads.unreadable == {}
    assert world.calls("GetComputeNodeGroup") == 1
    assert world.calls("ListTagsForResource") == 0


# -- the retry loop --


class Flaky:
    """A PCS call that fails with the given errors, then answers."""

    def __init__(self, *errors: AwsCallError) -> None:
        self.errors = list(errors)
        self.calls = 0

    def __call__(self) -> str:
        self.calls += 1
        if self.errors:
            raise self.errors.pop(0)
        return "answer"


def throttled(retry_after: int | None = None) -> AwsCallError:
    return AwsCallError(
        "UpdateComputeNodeGroup", "ThrottlingException", "slow down", retry_after_seconds=retry_after
    )


def test_transient_errors_are_retried_with_backoff_and_retry_after_honoured_up_to_its_cap() -> None:
    sleeps: list[float] = []
    retried: list[int] = []
    call = Flaky(throttled(), throttled(), throttled(retry_after=7), throttled(retry_after=600))
    answer, attempts = call_with_retries(
        call,
        RetryPolicy(attempts=6, base_seconds=1.0, max_seconds=20.0, max_retry_after_seconds=60.0),
        time_left=lambda: 1000.0,
        sleep=sleeps.append,
        on_retry=lambda error, delay, attempt: retried.append(attempt),
    )
    assert (answer, attempts) == ("answer", 5)
    assert sleeps == [1.0, 2.0, 7.0, 60.0]
    assert retried == [1, 2, 3, 4]


def test_a_permanent_error_or_a_missing_group_is_raised_at_once() -> None:
    refused = AwsCallError("UpdateComputeNodeGroup", "ValidationException", "bad config")
    with pytest.raises(AwsCallError, match="bad config"):
        call_with_retries(Flaky(refused), RetryPolicy(), time_left=lambda: 1000.0, sleep=lambda s: None)
    gone = GroupNotFoundError("GetComputeNodeGroup", "ResourceNotFoundException", "no group")
    call = Flaky(gone)
    with pytest.raises(GroupNotFoundError):
        call_with_retries(call, RetryPolicy(), time_left=lambda: 1000.0, sleep=lambda s: None)
    assert call.calls == 1


def test_a_pause_that_does_not_fit_the_invocation_is_not_taken() -> None:
    sleeps: list[float] = []
    with pytest.raises(AwsCallError, match="not retried: 5 s left in this invocation"):
        call_with_retries(
            Flaky(throttled(retry_after=30)), RetryPolicy(), time_left=lambda: 5.0, sleep=sleeps.append
        )
    assert sleeps == []


def test_the_last_attempt_s_error_is_raised() -> None:
    call = Flaky(*[throttled() for _ in range(3)])
    with pytest.raises(AwsCallError, match="slow down"):
        call_with_retries(call, RetryPolicy(attempts=3), time_left=lambda: 1000.0, sleep=lambda s: None)
    assert call.calls == 3


def test_a_cluster_is_known_by_name_or_id_and_an_id_pcs_has_none_of_is_none() -> None:
    """PCS answers a cluster id it does not have as a missing grant: the operator CLI's commands (status,
    undo, enroll) said "GetCluster was denied … grant it" of a cluster that is not there."""
    world = World()
    assert world.gateway.known_cluster_id("lca") == CLUSTER
    assert world.gateway.known_cluster_id(CLUSTER) == CLUSTER
    assert world.gateway.known_cluster_id("nosuch") is None
    assert world.gateway.known_cluster_id("pcs_zzzzzzzzzz") is None
    with pytest.raises(AwsCallError, match="AccessDeniedException"):
        world.gateway.cluster_id("pcs_zzzzzzzzzz")
