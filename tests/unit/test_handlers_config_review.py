"""The review of configuration changes (`handlers.config_review`) without a local AWS: the table and the bus
are in-memory fakes, PCS is the project's local PCS in process, and the change is the recorded CloudTrail
event that puts an unpinned TERMINATE script at the front of nodeBootstrapped."""

from __future__ import annotations

import copy
import json
from datetime import UTC, datetime
from typing import Any

import pytest

from lifeguard.aws.eventbridge import EventPublisher
from lifeguard.aws.pcs import PcsGateway
from lifeguard.errors import AwsCallError
from lifeguard.event_contract import ENTRY_MAX_BYTES, clean_detail, entry_size
from lifeguard.group_state import GroupState, KnownConfig, ProvenGood
from lifeguard.handlers.config_review import ConfigReviewHandler, ReviewSummary
from lifeguard.lifecycle import fingerprint_of
from lifeguard.notify.slack import shown_text, slack_message
from lifeguard.notify.sns import sns_message
from lifeguard.notify.summary import summarize
from lifeguard.remediation import AppliedChange, Ledger
from lifeguard.remediation.records import ChangeStatus
from lifeguard.store.changes import CHANGES_READ_MAX, ChangeRecord, ChangeStore
from lifeguard.store.groups import GroupStore
from lifeguard.store.remediations import RemediationStore
from tests.conftest import load_event
from tests.unit.fakes import FakeDynamoDB, FakeEventBridge, local_pcs_with_group

CLUSTER, GROUP = "pcs_abc123de45", "pcs_abcdef01"
AT = 1792544400000
ARN = "arn:aws:sts::123456789012:assumed-role/ClusterAdmin/alice"
BEFORE: dict[str, Any] = load_event("configs/article-reverted.json")


def recorded() -> dict[str, Any]:
    event: dict[str, Any] = load_event("cloudtrail/update-compute-node-group.json")
    return event


NEW: dict[str, Any] = recorded()["detail"]["requestParameters"]["nodeLifecycleActions"]


class World:
    """The table, the bus, a PCS holding the group with the configuration the call set, and the handler on
    a clock a minute after the call."""

    def __init__(
        self,
        pcs_config: dict[str, Any] | None = None,
        *,
        clusters: frozenset[str] = frozenset(),
        runs_scripts: bool = True,
    ) -> None:
        self.table = FakeDynamoDB()
        self.bus = FakeEventBridge()
        self.states = GroupStore(self.table, "t")
        self.changes = ChangeStore(self.table, "t")
        start = datetime.fromtimestamp(AT / 1000, UTC)
        actions = (pcs_config or NEW) if runs_scripts else None
        self.clock, self.pcs, client = local_pcs_with_group(start, CLUSTER, GROUP, actions)
        self.metrics: list[str] = []
        self.handler = ConfigReviewHandler(
            self.states,
            self.changes,
            PcsGateway(client),
            EventPublisher(self.bus, "bus", sleep=lambda _: None),
            ledger=RemediationStore(self.table, "t").ledger,
            metric=lambda name, _: self.metrics.append(name),
            clock=lambda: AT / 1000 + 60,
            clusters=clusters,
        )

    def knows(
        self,
        config: dict[str, Any] | None,
        *,
        proven: dict[str, Any] | None = None,
        modified_at: int | None = None,
        proven_modified_at: int = AT - 7_200_000,
    ) -> None:
        """The group's state holds `config` as the detection last read it, modified an hour before the call
        unless `modified_at` says (and `proven` as proven good, modified at `proven_modified_at`)."""
        state = GroupState(cluster_id=CLUSTER, group_id=GROUP)
        state.config = KnownConfig(
            modified_at=AT - 3_600_000 if modified_at is None else modified_at,
            fingerprint=fingerprint_of(config),
            node_lifecycle_actions=config,
            checked_at=AT - 60_000,
        )
        if proven is not None:
            state.proven_good = ProvenGood(
                fingerprint=fingerprint_of(proven),
                node_lifecycle_actions=proven,
                modified_at=proven_modified_at,
                proven_at=max(proven_modified_at + 200_000, AT - 7_000_000),
                instance_id="i-0a1b2c3d4e5f60718",
            )
        self.states.save(state)

    def review(self, event: dict[str, Any]) -> ReviewSummary:
        return self.handler.handle_event(event)

    def reviews(self) -> list[dict[str, Any]]:
        return [detail for kind, detail in self.bus.events() if kind == "ConfigChangeReviewed"]

    def pcs_reads(self) -> int:
        return sum(1 for call in self.pcs.calls if call.operation == "GetComputeNodeGroup")


def test_a_risky_change_is_reviewed_against_the_last_known_configuration() -> None:
    world = World()
    world.knows(BEFORE)
    summary = world.review(recorded())
    assert (summary.reviewed, summary.skipped, summary.ignored) == (1, 0, 0)
    [detail] = world.reviews()
    assert (detail["cluster_id"], detail["compute_node_group_id"], detail["episode_id"]) == (
        CLUSTER,
        GROUP,
        None,
    )
    assert detail["changed_by"] == {"arn": ARN, "at": AT, "source": "cloudtrail"}
    assert (detail["config_before"], detail["config_after"]) == (BEFORE, NEW)
    assert detail["diff"] == [
        {"path": "stages.nodeBootstrapped[0]", "old": None, "new": NEW["stages"]["nodeBootstrapped"][0]}
    ]
    new_script_risks = [
        (r["code"], r["path"]) for r in detail["risks"] if "[0]" in r["path"] and "Bootstrapped" in r["path"]
    ]
    # A mount check left on TERMINATE is as the article advises: its risk is its source, not its onError.
    assert new_script_risks == [("unpinned-mutable-source", "stages.nodeBootstrapped[0].scriptSource")]
    # The change brought the new script's risk (a warning, listed first); the scripts it kept had theirs.
    assert [(r["severity"], r["path"]) for r in detail["risks"]] == [
        ("warning", "stages.nodeBootstrapped[0].scriptSource"),
        ("info", "stages.nodeBootstrapped[1].onError"),
        ("info", "stages.nodeBootstrapped[1].scriptSource"),
        ("info", "stages.nodeReady[0].scriptSource"),
    ]
    assert detail["reason"] == (
        "3 of the 4 risk(s) were there before this change (severity info): the configuration it replaced "
        "had them."
    )
    assert world.pcs_reads() == 0  # the request carried the configuration and the ids
    assert world.metrics.count("ConfigChangeReviewed") == 1


def test_a_review_names_the_group_as_the_state_knows_it_when_the_call_gave_ids_alone() -> None:
    world = World()
    world.knows(BEFORE)
    world.review(recorded())
    [unnamed] = world.reviews()
    assert unnamed["compute_node_group_name"] is None  # nothing read names it: its ids tell it
    named = World()
    named.knows(BEFORE)
    state = named.states.load(CLUSTER, GROUP)
    assert state.config is not None
    state.config.name = "lca-static"
    named.states.save(state)
    named.review(recorded())
    [review] = named.reviews()
    assert review["compute_node_group_name"] == "lca-static"
    assert named.pcs_reads() == 0


def test_a_change_that_brings_no_risk_tells_the_ones_already_there_as_info() -> None:
    """The article's fix, onError CONTINUE on the script that failed: the risks of the scripts it left as
    they were are not laid at its door (all info)."""
    world = World()
    world.knows(BEFORE)
    fixed = copy.deepcopy(BEFORE)
    fixed["stages"]["nodeBootstrapped"][0]["onError"] = "CONTINUE"
    event = recorded()
    event["detail"]["requestParameters"]["nodeLifecycleActions"] = fixed
    world.review(event)
    [detail] = world.reviews()
    assert detail["risks"]
    assert {r["severity"] for r in detail["risks"]} == {"info"}
    assert "were there before this change" in detail["reason"]
    # A script added last brings its risk: listed first, so the event's bound never cuts it.
    added = {"name": "late-setup", "scriptSource": {"scriptLocation": "s3://lca-scripts-example/late.sh"}}
    fixed["stages"]["nodeReady"].append(added)
    world = World()
    world.knows(BEFORE)
    world.review(event)
    first = world.reviews()[0]["risks"][0]
    assert (first["severity"], first["path"]) == ("warning", "stages.nodeReady[1].scriptSource")


def test_an_unpinned_script_moved_to_another_location_brings_its_risk() -> None:
    """The same unpinned script, fetched now from someone else's bucket: root runs whatever is there. Its
    risk was taken for the one the replaced configuration had (its sentence named no location): all info,
    and no message went out."""
    world = World()
    world.knows(BEFORE)
    moved = copy.deepcopy(BEFORE)
    moved["stages"]["nodeBootstrapped"][0]["scriptSource"]["scriptLocation"] = "s3://someone-elses/payload.sh"
    event = recorded()
    event["detail"]["requestParameters"]["nodeLifecycleActions"] = moved
    world.review(event)
    [detail] = world.reviews()
    warned = [(r["code"], r["path"]) for r in detail["risks"] if r["severity"] == "warning"]
    assert warned == [("unpinned-mutable-source", "stages.nodeBootstrapped[0].scriptSource")]
    assert any(change["new"] == "s3://someone-elses/payload.sh" for change in detail["diff"])
    # The same script unpinned where it was is still a risk the configuration had.
    world = World()
    world.knows(BEFORE)
    kept = copy.deepcopy(BEFORE)
    kept["stages"]["nodeBootstrapped"][0]["onError"] = "CONTINUE"
    event["detail"]["requestParameters"]["nodeLifecycleActions"] = kept
    world.review(event)
    assert {r["severity"] for r in world.reviews()[0]["risks"]} == {"info"}


def test_who_made_the_change_is_found_by_the_fingerprint_the_detection_keeps() -> None:
    world = World()
    world.knows(BEFORE)
    world.review(recorded())
    # The detection fingerprints the group as PCS answers it (lifeguard.aws.pcs.BatchReads).
    answered = PcsGateway(local_pcs_with_group(datetime.now(UTC), CLUSTER, GROUP, NEW)[2])
    fingerprint = fingerprint_of(dict(answered.get_group(CLUSTER, GROUP).node_lifecycle_actions or {}))
    found = world.changes.find(CLUSTER, GROUP, fingerprint)
    assert found is not None
    assert found.to_changed_by() == {"arn": ARN, "at": AT, "source": "cloudtrail"}
    assert world.reviews()[0]["config_fingerprint"] == fingerprint


def test_a_group_never_seen_is_reviewed_whole_and_says_so() -> None:
    world = World()
    world.review(recorded())
    [detail] = world.reviews()
    assert detail["config_before"] is None
    assert [change["path"] for change in detail["diff"]] == [
        "stages.nodeBootstrapped[0]",
        "stages.nodeBootstrapped[1]",
        "stages.nodeReady[0]",
    ]
    assert "not seen this group before" in detail["reason"]


def test_a_group_known_only_from_a_listing_is_reviewed_whole_and_says_so() -> None:
    world = World()
    state = GroupState(cluster_id=CLUSTER, group_id=GROUP)
    state.config = KnownConfig(
        modified_at=AT - 3_600_000, fingerprint="", actions_read=False, checked_at=AT - 60_000
    )
    world.states.save(state)
    world.review(recorded())
    [detail] = world.reviews()
    assert detail["config_before"] is None
    assert len(detail["diff"]) == 3
    assert "not its scripts" in detail["reason"]


def test_when_the_detection_already_read_the_new_configuration_it_is_held_against_the_proven_good() -> None:
    world = World()
    world.knows(NEW, proven=BEFORE, modified_at=AT + 800)  # read after the call made it: PCS's modifiedAt
    world.review(recorded())
    [detail] = world.reviews()
    assert detail["config_before"] == BEFORE
    assert [change["path"] for change in detail["diff"]] == ["stages.nodeBootstrapped[0]"]
    assert "proven good" in detail["reason"]


def test_a_proof_of_a_configuration_put_in_place_after_the_call_is_not_what_the_call_replaced() -> None:
    # A record delivered late: the configuration proven good since was put in place after the call, so the
    # call did not replace it, and its scripts are not "there before".
    world = World()
    world.knows(NEW, proven=BEFORE, modified_at=AT + 800, proven_modified_at=AT + 1000)
    world.review(recorded())
    [detail] = world.reviews()
    assert (detail["config_before"], detail["diff"]) == (None, [])
    assert "is not known" in detail["reason"]


def test_when_what_was_replaced_is_unknown_the_risks_are_still_told() -> None:
    world = World()
    world.knows(NEW, modified_at=AT + 800)
    world.review(recorded())
    [detail] = world.reviews()
    assert (detail["config_before"], detail["diff"]) == (None, [])
    assert "optional-script-terminates" in {r["code"] for r in detail["risks"]}
    assert "not known" in detail["reason"]


@pytest.mark.parametrize("damaged", ["state", "ledger"])
def test_a_group_whose_state_or_ledger_cannot_be_read_is_still_reviewed(damaged: str) -> None:
    """A state or ledger item no release wrote (edited by hand, damaged) raised out of the review: the
    CloudTrail event was retried, then parked, and so was every later change of the group. It is reviewed
    as a group Lifeguard never saw, or as anyone's change (never passed over as Lifeguard's own)."""
    world = World()
    world.knows(BEFORE)
    pk = f"GROUP#{CLUSTER}#{GROUP}"
    if damaged == "state":
        world.table.items[(pk, "STATE")]["state"] = {"B": b"not zlib"}
    else:
        world.table.items[(pk, "LEDGER")] = {
            "pk": {"S": pk},
            "sk": {"S": "LEDGER"},
            "doc": {"S": '{"changes": 7}'},
        }
    event = recorded()
    event["detail"]["requestParameters"]["clientToken"] = TOKEN
    summary = world.review(event)
    assert (summary.reviewed, summary.ignored, summary.skipped) == (1, 0, 0)
    [detail] = world.reviews()
    assert (detail["config_before"] is None) == (damaged == "state")


def test_a_failed_call_is_ignored_and_nothing_is_read_kept_or_published() -> None:
    world = World()
    event = recorded()
    event["detail"]["errorCode"] = "ConflictException"
    summary = world.review(event)
    assert (summary.reviewed, summary.ignored, summary.skipped) == (0, 1, 0)
    assert world.bus.entries == []
    assert world.table.items == {}
    assert world.pcs_reads() == 0


_NODE_READY = ("detail", "requestParameters", "nodeLifecycleActions", "stages", "nodeReady", 0)


@pytest.mark.parametrize(
    ("path", "value", "reason"),
    [
        (("detail", "eventTime"), "not a time", "invalid eventTime"),
        (("detail", "userIdentity"), {"arn": "x" * 5000}, "invalid userIdentity.arn"),
        (("detail", "requestParameters"), None, "requestParameters left out"),
        (("detail", "requestParameters"), [], "invalid requestParameters"),
        (("detail",), [], "detail is not a JSON object"),
        # What json.loads makes of the JSON text "\ud800", as Lambda hands the event over: no UTF-8 holds it.
        ((*_NODE_READY, "arguments"), ["\ud800"], "invalid nodeLifecycleActions"),
        ((*_NODE_READY, "scriptSource", "scriptLocation"), "s3://b/\udfff", "invalid nodeLifecycleActions"),
        # Redacted, or a field newer than the model Lifeguard ships: PCS made the change all the same.
        (
            _NODE_READY[:-3],
            "HIDDEN_DUE_TO_SECURITY_REASONS",
            "invalid requestParameters.nodeLifecycleActions",
        ),
        ((*_NODE_READY, "timeoutSeconds"), 300, "invalid nodeLifecycleActions"),
    ],
)
def test_a_malformed_event_is_a_counted_skip_not_an_exception(
    path: tuple[str | int, ...], value: Any, reason: str, caplog: pytest.LogCaptureFixture
) -> None:
    world = World()
    event = recorded()
    target: Any = event
    for part in path[:-1]:
        target = target[part]
    target[path[-1]] = value
    summary = world.review(event)
    assert (summary.reviewed, summary.skipped, dict(summary.skipped_reasons)) == (0, 1, {reason: 1})
    assert world.bus.entries == []
    # A successful call's record that cannot be read is no invalid event (the rule delivers CloudTrail's
    # alone, and no one else may send `aws.pcs`'s): PCS made a change nobody reviewed, which pages.
    unreviewed = path != ("detail",)
    assert world.metrics == ["ChangesUnreviewed" if unreviewed else "InvalidEvents"]
    [line] = [r for r in caplog.records if "skipped" in r.getMessage()]
    assert len(line.getMessage()) < 600


def test_a_request_without_a_configuration_is_read_back_from_pcs_by_name() -> None:
    world = World()
    world.knows(BEFORE)
    event = recorded()
    detail = event["detail"]
    del detail["requestParameters"]["nodeLifecycleActions"]
    del detail["responseElements"]
    detail["requestParameters"].update(clusterIdentifier="lca", computeNodeGroupIdentifier="lca-static")
    summary = world.review(event)
    assert summary.reviewed == 1
    assert world.pcs_reads() == 1
    [review] = world.reviews()
    assert (review["cluster_id"], review["compute_node_group_id"]) == (CLUSTER, GROUP)
    assert review["compute_node_group_name"] == "lca-static"  # as PCS's answer names it
    assert review["config_after"] == NEW
    found = world.changes.find(CLUSTER, GROUP, fingerprint_of(NEW))
    assert found is not None
    # The call changed something else: who put the configuration in place is not known, and the caller is
    # named as the one whose call it was read back after, never as the one who changed it.
    assert review["changed_by"] == {"arn": None, "at": AT, "source": "unknown"}
    assert review["reason"].startswith(
        f"UpdateComputeNodeGroup by {ARN} carried no nodeLifecycleActions: reviewed is the configuration PCS "
        "holds after it, put in place by whom is not known."
    )
    assert (found.arn, found.source, found.read_back) == (None, "unknown", True)


def made_again_after_a_call_by_name(world: World, seconds: float) -> ReviewSummary:
    """The recorded call made by name with no ids in its record, its group deleted and made again under
    that name `seconds` after the call (as pcs_0000new001), then reviewed."""
    event = recorded()
    detail = event["detail"]
    del detail["requestParameters"]["nodeLifecycleActions"]
    del detail["responseElements"]
    detail["requestParameters"].update(clusterIdentifier="lca", computeNodeGroupIdentifier="lca-static")
    world.pcs.operate(
        "DeleteComputeNodeGroup", {"clusterIdentifier": CLUSTER, "computeNodeGroupIdentifier": GROUP}
    )
    world.clock.advance(seconds=seconds)
    world.pcs.add_compute_node_group(
        CLUSTER, "lca-static", group_id="pcs_0000new001", node_lifecycle_actions=NEW
    )
    return world.review(event)


@pytest.mark.parametrize("after_ms", [0, 400, 999, 3_000, 5_999])
def test_a_group_made_in_the_calls_second_or_within_the_clocks_apart_is_the_one_it_changed(
    after_ms: int,
) -> None:
    """CloudTrail's eventTime is of whole seconds, PCS's createdAt of milliseconds on another clock: an
    update by name right after the group's create (or the create itself, its record carrying no ids) was
    taken for a call on a group made again since, and its change went unreviewed."""
    summary = made_again_after_a_call_by_name(World(), after_ms / 1000)
    assert (summary.reviewed, summary.ignored) == (1, 0)


def test_a_call_by_name_whose_group_was_made_again_since_is_told_of_neither_group() -> None:
    """A call naming `lca-static`, reviewed after the group was deleted and made again under that name:
    read by name, PCS answers with the new group, which was announced as changed by the call's caller (and
    kept a change record naming them for its later loops)."""
    world = World()
    world.knows(BEFORE)
    summary = made_again_after_a_call_by_name(world, 30)  # half a minute after the call, before the review
    assert (summary.reviewed, summary.ignored) == (0, 1)
    assert world.bus.entries == []
    assert world.changes.find(CLUSTER, "pcs_0000new001", fingerprint_of(NEW)) is None
    assert world.metrics == ["ChangesIgnored"]


def test_an_update_of_something_else_leaves_the_known_configuration_and_is_ignored() -> None:
    world = World(pcs_config=BEFORE)
    world.knows(BEFORE)
    event = recorded()
    request = event["detail"]["requestParameters"]
    del request["nodeLifecycleActions"]
    request["scalingConfiguration"] = {"minInstanceCount": 0, "maxInstanceCount": 4}
    summary = world.review(event)
    assert (summary.reviewed, summary.ignored) == (0, 1)
    assert world.bus.entries == []


@pytest.mark.parametrize("by_name", [False, True])
def test_a_change_to_a_cluster_outside_the_stacks_cluster_ids_is_none_of_its_business(by_name: bool) -> None:
    # With ClusterIds set, every PCS change of the account was reviewed and told (its scripts' locations
    # and arguments to SNS and Slack); one naming no configuration failed the role's read, as unreadable.
    world = World(clusters=frozenset({"pcs_0fedcba987"}))
    world.knows(BEFORE)
    event = recorded()
    if by_name:  # the cluster is learnt from PCS: read, then let go
        del event["detail"]["requestParameters"]["nodeLifecycleActions"]
        del event["detail"]["responseElements"]
        event["detail"]["requestParameters"].update(
            clusterIdentifier="lca", computeNodeGroupIdentifier="lca-static"
        )
    summary = world.review(event)
    assert (summary.reviewed, summary.skipped, summary.ignored) == (0, 0, 1)
    assert world.bus.entries == []
    assert world.changes.find(CLUSTER, GROUP, fingerprint_of(NEW)) is None
    assert world.metrics == ["ChangesIgnored"]
    assert world.pcs_reads() == (1 if by_name else 0)
    # The stack's own cluster is reviewed as before.
    watched = World(clusters=frozenset({CLUSTER}))
    watched.knows(BEFORE)
    assert watched.review(recorded()).reviewed == 1


def test_a_group_pcs_no_longer_has_is_ignored_not_told_as_unwatched() -> None:
    """Deleted since the call: nothing to review. It was counted GroupsUnreadable, whose alarm says a group
    goes unwatched until it can be read: a page for a group that is gone."""
    world = World()
    event = recorded()
    del event["detail"]["requestParameters"]["nodeLifecycleActions"]
    event["detail"]["requestParameters"]["computeNodeGroupIdentifier"] = "pcs_0fedcba987"
    del event["detail"]["responseElements"]
    summary = world.review(event)
    assert (summary.ignored, dict(summary.skipped_reasons)) == (1, {})
    assert world.bus.entries == []
    assert world.metrics == ["ChangesIgnored"]


def test_pcs_refusing_the_read_is_a_skip_but_a_transient_failure_is_raised_for_a_retry() -> None:
    event = recorded()
    del event["detail"]["requestParameters"]["nodeLifecycleActions"]
    world = World()
    world.pcs.inject_fault("AccessDeniedException", operation="GetComputeNodeGroup")
    summary = world.review(copy.deepcopy(event))
    assert dict(summary.skipped_reasons) == {"GetComputeNodeGroup refused (AccessDeniedException)": 1}
    assert world.metrics == ["GroupsUnreadable"]  # a permission to grant, not an invalid event
    world.pcs.inject_fault("ThrottlingException", operation="GetComputeNodeGroup", times=10)
    with pytest.raises(AwsCallError):
        world.review(copy.deepcopy(event))


@pytest.mark.parametrize(
    ("clusters", "cluster", "ignored"),
    [
        (frozenset({"pcs_0fedcba987"}), "other-cluster", True),  # another stack's, by its name
        (frozenset(), "other-cluster", False),  # every cluster watched: a permission to grant
        (frozenset({CLUSTER}), CLUSTER, False),  # the stack's own, by id: a permission to grant
    ],
)
def test_a_refused_read_of_a_cluster_named_by_name_outside_the_cluster_ids_pages_no_one(
    clusters: frozenset[str], cluster: str, ignored: bool
) -> None:
    """With ClusterIds set, the role reads only those clusters: a change to another one, named by its name
    (the call carries no id to tell), is refused by PCS. It was counted GroupsUnreadable, whose alarm pages,
    for every such change of the account."""
    event = recorded()
    del event["detail"]["requestParameters"]["nodeLifecycleActions"]
    del event["detail"]["responseElements"]
    event["detail"]["requestParameters"].update(
        clusterIdentifier=cluster, computeNodeGroupIdentifier="lca-static"
    )
    world = World(clusters=clusters)
    world.pcs.inject_fault("AccessDeniedException", operation="GetComputeNodeGroup")
    summary = world.review(event)
    assert world.bus.entries == []
    if ignored:
        assert (summary.ignored, dict(summary.skipped_reasons)) == (1, {})
        assert world.metrics == ["ChangesIgnored"]
    else:
        assert dict(summary.skipped_reasons) == {"GetComputeNodeGroup refused (AccessDeniedException)": 1}
        assert world.metrics == ["GroupsUnreadable"]


def test_the_same_event_delivered_twice_publishes_the_same_review() -> None:
    world = World()
    world.knows(BEFORE)
    world.review(recorded())
    world.review(recorded())
    first, second = world.reviews()
    assert first == second  # notify's claims (by content) send it once


@pytest.mark.parametrize(
    ("token", "action", "reviewed"),
    [
        ("lifeguard-" + "0" * 40, "quarantine", 0),  # Lifeguard's own: its RemediationApplied told of it
        ("lifeguard-" + "0" * 40, "undo", 1),  # an operator's undo, made through Lifeguard: reviewed
        ("lifeguard-" + "f" * 40, "quarantine", 1),  # a token of the same form that Lifeguard never used
        (None, "quarantine", 1),
    ],
)
def test_lifeguards_own_change_is_told_apart_by_its_client_token_in_the_ledger(
    token: str | None, action: str, reviewed: int
) -> None:
    """Reviewed, Lifeguard's own quarantine reads as a risky change by its role; it is known by the
    clientToken its ledger holds, which no other caller can have chosen."""
    world = World()
    world.knows(BEFORE)
    ledger = Ledger(
        changes=[
            AppliedChange(
                at=AT / 1000,
                episode_id="ep-1",
                revision=1,
                action=action,
                config_before=BEFORE,
                config_after=NEW,
                fingerprint_before=fingerprint_of(BEFORE),
                fingerprint_after=fingerprint_of(NEW),
                client_token="lifeguard-" + "0" * 40,
            )
        ]
    )
    RemediationStore(world.table, "t").save_ledger(CLUSTER, GROUP, ledger)
    event = recorded()
    if token is not None:
        event["detail"]["requestParameters"]["clientToken"] = token
    summary = world.review(event)
    assert (summary.reviewed, summary.ignored) == (reviewed, 1 - reviewed)
    assert len(world.reviews()) == reviewed


BOB = "arn:aws:sts::123456789012:assumed-role/ClusterAdmin/bob"
TOKEN = "lifeguard-" + "0" * 40


def scaling_update(arn: str) -> dict[str, Any]:
    """An update of the group's scaling five minutes after the recorded call: no nodeLifecycleActions."""
    event = recorded()
    detail = event["detail"]
    detail.update(eventID="b0b0-1", eventTime="2026-10-21T01:05:00Z")
    detail["userIdentity"]["arn"] = arn
    del detail["requestParameters"]["nodeLifecycleActions"]
    detail["requestParameters"]["scalingConfiguration"] = {"minInstanceCount": 0, "maxInstanceCount": 8}
    return event


def ledger_change(
    before: dict[str, Any],
    after: dict[str, Any],
    *,
    at_s: float = AT / 1000 + 300,
    action: str = "quarantine",
    status: ChangeStatus = "applied",
    token: str = TOKEN,
) -> AppliedChange:
    """A change of Lifeguard's ledger, from `before` to `after`, made (or set out) at `at_s`."""
    return AppliedChange(
        at=at_s,
        episode_id="ep-1",
        revision=1,
        action=action,
        config_before=before,
        config_after=after,
        fingerprint_before=fingerprint_of(before),
        fingerprint_after=fingerprint_of(after),
        status=status,
        client_token=token,
    )


def quarantined_new() -> dict[str, Any]:
    """NEW with its first script switched to STOP_SEQUENCE, as Lifeguard's quarantine leaves it."""
    quarantined = copy.deepcopy(NEW)
    quarantined["stages"]["nodeBootstrapped"][0]["onError"] = "STOP_SEQUENCE"
    return quarantined


def lifeguard_put(world: World, after: dict[str, Any], *changes: AppliedChange) -> None:
    """Lifeguard's quarantine put `after` in place (the group's ledger says so, with its clientToken), and
    `changes` followed it."""
    ledger = Ledger(changes=[ledger_change(NEW, after), *changes])
    RemediationStore(world.table, "t").save_ledger(CLUSTER, GROUP, ledger)


def test_a_call_that_carried_no_configuration_does_not_take_the_blame_for_an_earlier_change() -> None:
    world = World()  # PCS holds Alice's NEW; the detection has not read the group since
    world.knows(BEFORE)
    world.handler.clock = lambda: AT / 1000 + 700
    world.review(recorded())  # Alice's
    summary = world.review(scaling_update(BOB))
    assert (summary.reviewed, summary.ignored) == (0, 1)
    found = world.changes.find(CLUSTER, GROUP, fingerprint_of(NEW))
    assert found is not None
    assert found.arn == ARN
    assert [review["changed_by"]["arn"] for review in world.reviews()] == [ARN]


def test_a_call_without_a_configuration_in_the_same_second_as_the_one_that_set_it_takes_no_blame() -> None:
    # CloudTrail's times are to the second: an apply's two calls (its configuration, then its scaling) can
    # share one. The second call did not put the configuration in place, and is not reviewed again.
    world = World()
    world.knows(BEFORE)
    world.handler.clock = lambda: AT / 1000 + 700
    world.review(recorded())  # Alice's
    same_second = scaling_update(BOB)
    same_second["detail"]["eventTime"] = recorded()["detail"]["eventTime"]
    summary = world.review(same_second)
    assert (summary.reviewed, summary.ignored) == (0, 1)
    assert [review["changed_by"]["arn"] for review in world.reviews()] == [ARN]


def test_scaling_updates_of_a_group_never_seen_review_its_configuration_once() -> None:
    """Each update of a group's scaling carries no configuration; the first is reviewed on what PCS holds
    after it, and the next left it as it was: its risks were told again (a new message each, its time in
    the notice key) at every scaling change until the detection first saw the group."""
    world = World()  # no state of the group: the detection has not seen it
    world.handler.clock = lambda: AT / 1000 + 700
    first = world.review(scaling_update(BOB))
    later = scaling_update(BOB)
    later["detail"].update(eventID="b0b0-2", eventTime="2026-10-21T01:06:00Z")
    again = world.review(later)
    assert (first.reviewed, again.reviewed, again.ignored) == (1, 0, 1)
    assert len(world.reviews()) == 1
    assert again.events == []


def test_a_read_back_review_whose_publish_failed_is_published_by_lambdas_retry() -> None:
    """A call that carried no configuration keeps its read-back record before its review is published: a
    PutEvents that failed every attempt left the record, and Lambda's retry of the same event found it and
    took the call as reviewed. The review was never published, and the retry, which returned, parked
    nothing. A call that carried one is reviewed again on the retry too."""
    for event in (scaling_update(BOB), recorded()):
        world = World()
        world.knows(BEFORE)
        world.handler.clock = lambda: AT / 1000 + 700
        world.bus.refuse_calls = 3  # each of PutEvents' attempts in the first invocation
        with pytest.raises(AwsCallError):
            world.review(copy.deepcopy(event))
        retry = world.review(copy.deepcopy(event))
        assert (retry.reviewed, retry.ignored) == (1, 0)
        assert len(world.reviews()) == 1
        assert world.reviews()[0]["diff"]
    # The detection read the group between the failed attempt and the retry (a scaling update launches
    # nodes, and their records make it read): the retry still reviews what PCS holds, its risks told.
    world = World()
    world.knows(BEFORE)
    world.handler.clock = lambda: AT / 1000 + 700
    world.bus.refuse_calls = 3
    with pytest.raises(AwsCallError):
        world.review(scaling_update(BOB))
    state = world.states.load(CLUSTER, GROUP)
    state.config = KnownConfig(
        modified_at=AT - 60_000,
        fingerprint=fingerprint_of(NEW),
        node_lifecycle_actions=NEW,
        checked_at=AT + 720_000,
    )
    world.states.save(state)
    retry = world.review(scaling_update(BOB))
    assert (retry.reviewed, retry.ignored) == (1, 0)
    [review] = world.reviews()
    assert review["risks"]
    assert review["reason"].startswith("UpdateComputeNodeGroup by arn:aws:sts::")
    # A later call of the same kind is not reviewed again: its configuration was told.
    later = scaling_update(BOB)
    later["detail"].update(eventID="b0b0-2", eventTime="2026-10-21T01:07:00Z")
    assert world.review(later).ignored == 1


def test_a_configuration_read_back_again_after_a_change_to_another_is_reviewed_again() -> None:
    """Read back after a scaling update, then changed to another by a call reviewed, then changed back by a
    call CloudTrail left unread (its request too large to record): the next scaling update's read is news."""
    world = World()
    world.handler.clock = lambda: AT / 1000 + 3000
    assert world.review(scaling_update(BOB)).reviewed == 1  # NEW, read back at 01:05
    other = recorded()
    other["detail"].update(eventID="a11c-2", eventTime="2026-10-21T01:10:00Z")
    other["detail"]["requestParameters"]["nodeLifecycleActions"] = BEFORE
    assert world.review(other).reviewed == 1  # BEFORE, carried
    later = scaling_update(BOB)
    later["detail"].update(eventID="b0b0-3", eventTime="2026-10-21T01:30:00Z")
    assert world.review(later).reviewed == 1  # NEW again, PCS holds: changed back meanwhile


def test_a_configuration_a_call_set_then_changed_back_unrecorded_is_reviewed_again() -> None:
    """As above, NEW first set by a call that carried it: PCS holding NEW again is news, not Alice's."""
    world = World()
    world.handler.clock = lambda: AT / 1000 + 3000
    assert world.review(recorded()).reviewed == 1  # Alice's NEW, 01:00
    other = recorded()
    other["detail"].update(eventID="a11c-2", eventTime="2026-10-21T01:10:00Z")
    other["detail"]["requestParameters"]["nodeLifecycleActions"] = BEFORE
    assert world.review(other).reviewed == 1
    later = scaling_update(BOB)
    later["detail"].update(eventID="b0b0-3", eventTime="2026-10-21T01:30:00Z")
    assert world.review(later).reviewed == 1
    assert world.reviews()[-1]["changed_by"]["arn"] is None  # not laid at Alice's door


def test_a_damaged_change_record_does_not_have_every_scaling_update_reviewed_again() -> None:
    world = World()
    world.handler.clock = lambda: AT / 1000 + 3000
    key = (f"GROUP#{CLUSTER}#{GROUP}", "CHANGE#" + "0" * 64)
    world.table.items[key] = {"pk": {"S": key[0]}, "sk": {"S": key[1]}, "doc": {"S": "{}"}}
    reviewed = []
    for minute, event_id in ((5, "b0b0-1"), (10, "b0b0-2"), (20, "b0b0-3")):
        update = scaling_update(BOB)
        update["detail"].update(eventID=event_id, eventTime=f"2026-10-21T01:{minute:02d}:00Z")
        reviewed.append(world.review(update).reviewed)
    assert reviewed == [1, 0, 0]


def test_a_scaling_update_of_a_group_that_runs_no_scripts_is_no_review() -> None:
    """It reviewed nothing (no configuration, no risk, no diff) and published it, counted, every time."""
    world = World(runs_scripts=False)
    world.handler.clock = lambda: AT / 1000 + 700
    summary = world.review(scaling_update(BOB))
    assert (summary.reviewed, summary.ignored) == (0, 1)
    assert world.reviews() == []
    assert "ConfigChangeReviewed" not in world.metrics


def test_a_call_that_carried_the_configuration_outranks_one_read_back_delivered_before_it() -> None:
    world = World()
    world.knows(BEFORE)
    world.handler.clock = lambda: AT / 1000 + 700
    world.review(scaling_update(BOB))  # delivered first: NEW read back after it, put there by nobody known
    world.review(recorded())  # Alice's call, earlier, carrying NEW: she put it in place
    found = world.changes.find(CLUSTER, GROUP, fingerprint_of(NEW))
    assert found is not None
    assert (found.arn, found.read_back) == (ARN, False)


def test_lifeguards_quarantine_is_not_reviewed_as_the_next_callers_risky_change() -> None:
    quarantined = quarantined_new()
    world = World(pcs_config=quarantined)
    world.knows(NEW)
    lifeguard_put(world, quarantined)
    world.handler.clock = lambda: AT / 1000 + 700
    summary = world.review(scaling_update(ARN))
    assert (summary.reviewed, summary.ignored) == (0, 1)
    assert world.reviews() == []


def test_lifeguards_client_token_sent_with_another_configuration_is_reviewed() -> None:
    # CloudTrail shows Lifeguard's clientToken to whoever reads it; sent with a configuration of one's own,
    # it does not make the change Lifeguard's.
    world = World()
    world.knows(BEFORE)
    lifeguard_put(world, {"stages": {"nodeBootstrapped": [NEW["stages"]["nodeBootstrapped"][1]]}})
    event = recorded()
    event["detail"]["requestParameters"]["clientToken"] = TOKEN
    assert world.review(event).reviewed == 1


def test_a_call_delivered_late_is_not_said_to_replace_a_configuration_set_after_it() -> None:
    world = World()
    state = GroupState(cluster_id=CLUSTER, group_id=GROUP)
    state.config = KnownConfig(
        modified_at=AT + 300_000,  # set at 01:05; the call is of 01:00
        fingerprint=fingerprint_of(BEFORE),
        node_lifecycle_actions=BEFORE,
        checked_at=AT + 360_000,
    )
    world.states.save(state)
    world.handler.clock = lambda: AT / 1000 + 3600
    world.review(recorded())
    [review] = world.reviews()
    assert review["config_before"] is None
    assert "set after it" in review["reason"]
    assert review["diff"] == []  # not every script as added: what it replaced is not known
    assert {risk["code"] for risk in review["risks"]} >= {"unpinned-mutable-source"}


@pytest.mark.parametrize(("verifying", "found"), [(20, 119), (14, 101)])
def test_every_risk_found_is_counted_though_the_event_lists_a_hundred(verifying: int, found: int) -> None:
    """Each `verify-` and `install-` script holds three risks, the last `install-` two: 20 + 20 hold 119;
    14 + 20 hold 101, one more than the event lists."""

    def script(name: str, policy: str | None = "EVERY_BOOT", **more: str) -> dict[str, Any]:
        location = f"s3://lca-scripts-example/{name}.sh"
        made = {"name": name, "scriptSource": {"scriptLocation": location}, **more}
        return {**made, "executionPolicy": policy} if policy else made

    ready = [script(f"install-{n}", onError="CONTINUE") for n in range(19)]
    config = {
        "stages": {
            "nodeBootstrapped": [script(f"verify-{n}") for n in range(verifying)],
            "nodeReady": [*ready, script("install-19", None, onError="CONTINUE")],
        }
    }
    world = World(pcs_config=config)
    counted: dict[str, int] = {}
    world.handler.metric = lambda name, value: counted.__setitem__(name, counted.get(name, 0) + value)
    event = recorded()
    event["detail"]["requestParameters"]["nodeLifecycleActions"] = config
    world.review(event)
    [review] = world.reviews()
    assert (len(review["risks"]), counted["RisksFound"]) == (100, found)
    assert f"The review found {found} risks; the event lists the first 100." in review["reason"]


def resent_by(arn: str, *, minutes: int) -> dict[str, Any]:
    """An infrastructure-as-code apply `minutes` after the recorded call: the group's whole definition
    again, its nodeLifecycleActions (NEW) unchanged beside a new scaling."""
    event = recorded()
    detail = event["detail"]
    at = datetime.fromtimestamp(AT / 1000 + 60 * minutes, UTC)
    detail.update(eventID=f"b0b0-{minutes}", eventTime=at.strftime("%Y-%m-%dT%H:%M:%SZ"))
    detail["userIdentity"]["arn"] = arn
    detail["requestParameters"]["scalingConfiguration"] = {"minInstanceCount": 0, "maxInstanceCount": 4}
    return event


def detection_read(world: World, actions: dict[str, Any], *, modified_at: int, checked_at: int) -> None:
    """The detection read the group from PCS at `checked_at`: `actions`, modified at `modified_at`."""
    state = world.states.load(CLUSTER, GROUP)
    state.config = KnownConfig(
        modified_at=modified_at,
        fingerprint=fingerprint_of(actions),
        node_lifecycle_actions=actions,
        checked_at=checked_at,
    )
    world.states.save(state)


MINUTE = 60_000


def test_a_call_that_sends_again_the_configuration_in_place_is_no_change_and_takes_no_blame() -> None:
    world = World()
    world.knows(BEFORE)
    assert world.review(recorded()).reviewed == 1  # Alice puts NEW in place
    detection_read(world, NEW, modified_at=AT + 800, checked_at=AT + 58 * MINUTE)
    world.handler.clock = lambda: AT / 1000 + 3_700
    summary = world.review(resent_by(BOB, minutes=60))
    assert (summary.reviewed, summary.ignored) == (0, 1)
    assert len(world.reviews()) == 1  # no second warning about what Alice's review told
    found = world.changes.find(CLUSTER, GROUP, fingerprint_of(NEW))
    assert found is not None
    assert found.arn == ARN  # a loop on NEW is still laid at Alice's door


def test_a_call_that_sends_again_what_pcs_dated_a_second_before_its_setters_record_is_no_change() -> None:
    # PCS's modifiedAt and CloudTrail's eventTime of the call that set it come from different clocks: the
    # change kept of that call may be dated after the configuration's modifiedAt. It put the same
    # configuration in place, so it is nothing between the read and Bob's call.
    world = World()
    world.knows(BEFORE)
    assert world.review(recorded()).reviewed == 1  # Alice puts NEW in place
    detection_read(world, NEW, modified_at=AT - 1000, checked_at=AT + 58 * MINUTE)
    world.handler.clock = lambda: AT / 1000 + 3_700
    summary = world.review(resent_by(BOB, minutes=60))
    assert (summary.reviewed, summary.ignored) == (0, 1)
    found = world.changes.find(CLUSTER, GROUP, fingerprint_of(NEW))
    assert found is not None
    assert found.arn == ARN


@pytest.mark.parametrize(
    "meanwhile",
    [
        "read long before",  # a change between that read and the call may still be on its way
        "a change delivered since",  # Carol's, delivered after the read: NEW was replaced meanwhile
        "lifeguard's change set out",  # an undo or quarantine PCS may have taken
        "a change in the same second",  # CloudTrail's times are whole seconds: Carol's, then Bob's apply
    ],
)
def test_a_call_is_no_change_only_when_nothing_may_have_come_between(meanwhile: str) -> None:
    world = World()
    world.knows(BEFORE)
    world.review(recorded())  # Alice puts NEW in place
    checked = AT + (30 if meanwhile == "read long before" else 57) * MINUTE
    detection_read(world, NEW, modified_at=AT + 800, checked_at=checked)
    if meanwhile in ("a change delivered since", "a change in the same second"):
        carol = resent_by(ARN.replace("alice", "carol"), minutes=58 if meanwhile.endswith("since") else 60)
        carol["detail"]["eventID"] = "ca401-1"
        carol["detail"]["requestParameters"]["nodeLifecycleActions"] = BEFORE
        world.handler.clock = lambda: AT / 1000 + 3_600
        assert world.review(carol).reviewed == 1
    if meanwhile == "lifeguard's change set out":
        change = ledger_change(NEW, quarantined_new(), at_s=(AT + 58 * MINUTE) / 1000, status="pending")
        RemediationStore(world.table, "t").save_ledger(CLUSTER, GROUP, Ledger(changes=[change]))
    world.handler.clock = lambda: AT / 1000 + 3_700
    # Bob's apply sends NEW: it may have put it back, so it is reviewed, and NEW is his.
    assert world.review(resent_by(BOB, minutes=60)).reviewed == 1
    found = world.changes.find(CLUSTER, GROUP, fingerprint_of(NEW))
    assert found is not None
    assert found.arn == BOB


def test_a_call_is_reviewed_when_the_groups_kept_changes_fill_their_read() -> None:
    """A group's kept changes are read at most CHANGES_READ_MAX at once, in the order of their keys, not
    of their times: past that bound, a change between the read and the call may be among those unread."""
    world = World()
    world.knows(BEFORE)
    world.review(recorded())  # Alice puts NEW in place
    detection_read(world, NEW, modified_at=AT + 800, checked_at=AT + 58 * MINUTE)
    ci = "arn:aws:iam::123456789012:role/ci"
    # One item of the read cannot be decoded (edited by hand): it counts towards the bound all the same.
    damaged = {"pk": {"S": f"GROUP#{CLUSTER}#{GROUP}"}, "sk": {"S": "CHANGE#" + "0" * 64}, "doc": {"S": "{}"}}
    world.table.put_item(TableName="t", Item=damaged)
    for n in range(1, CHANGES_READ_MAX):  # configurations a pinned deploy a day put in place this month
        at = AT - 29 * 24 * 60 * MINUTE + n * MINUTE
        change = ChangeRecord(CLUSTER, GROUP, f"{n:064x}", ci, at, "UpdateComputeNodeGroup", f"e{n}")
        world.changes.put(change)
    world.handler.clock = lambda: AT / 1000 + 3_700
    assert world.review(resent_by(BOB, minutes=60)).reviewed == 1


def test_an_undo_pcs_may_not_have_taken_does_not_hide_the_looping_configuration_put_back() -> None:
    world = World()
    world.knows(NEW)
    quarantined = quarantined_new()
    # `lifeguard undo` lost PCS's answer: set out, and PCS never took it (the group holds the quarantine).
    undo = ledger_change(
        quarantined,
        NEW,
        at_s=AT / 1000 + 400,
        action="undo",
        status="pending",
        token="lifeguard-undo-" + "0" * 40,
    )
    lifeguard_put(world, quarantined, undo)
    world.handler.clock = lambda: AT / 1000 + 3_700
    # Bob's apply puts the looping NEW back over the quarantine: a change, and his.
    assert world.review(resent_by(BOB, minutes=60)).reviewed == 1


def test_a_change_whose_record_comes_late_does_not_make_the_one_after_it_no_change() -> None:
    world = World()
    world.knows(BEFORE)
    world.handler.clock = lambda: AT / 1000 + 7_300
    assert world.review(recorded()).reviewed == 1  # Alice puts NEW in place
    bob = resent_by(BOB, minutes=30)  # Bob puts BEFORE back ...
    bob["detail"]["requestParameters"]["nodeLifecycleActions"] = BEFORE
    carol = resent_by(ARN.replace("alice", "carol"), minutes=60)  # ... and Carol NEW again
    assert world.review(carol).reviewed == 1  # Bob's record, retried, comes after Carol's
    assert world.review(bob).reviewed == 1


def test_a_review_of_many_scripts_updated_in_place_at_long_locations_still_fits_one_eventbridge_entry() -> (
    None
):
    """A location may be 1,024 characters of any text (`s3://bucket/.+`), which JSON writes as escapes of six
    bytes each: forty scripts re-pinned in place made a review EventBridge refuses on every retry."""
    location = "s3://lca-scripts-example/" + "\U0001f600" * 490

    def config(checksum: str) -> dict[str, Any]:
        def script(stage: str, index: int) -> dict[str, Any]:
            return {
                "name": f"check-{stage}-{index}".ljust(64, "x"),
                "scriptSource": {"scriptLocation": f"{location}{index}.sh", "checksum": checksum * 64},
                "executionPolicy": "EVERY_BOOT",
            }

        return {
            "stages": {
                stage: [script(stage, i) for i in range(20)] for stage in ("nodeBootstrapped", "nodeReady")
            }
        }

    before, after = config("a"), config("b")
    world = World(after)
    world.knows(before)
    event = recorded()
    event["detail"]["requestParameters"]["nodeLifecycleActions"] = after
    event["detail"]["responseElements"]["computeNodeGroup"]["nodeLifecycleActions"] = after
    assert world.review(event).reviewed == 1
    [entry] = world.bus.entries
    assert entry_size(entry) <= ENTRY_MAX_BYTES
    risks = json.loads(entry["Detail"])["risks"]
    assert {risk["code"] for risk in risks} >= {"updated-in-place"}
    assert all(len(risk["message"]) <= 200 for risk in risks)
    assert any(risk["message"].endswith("…") for risk in risks)


def test_s3_version_id_null_is_no_pin_the_review_warns_of_a_script_any_upload_replaces() -> None:
    """S3 names the one version of an object in a bucket without versioning `null`: each upload replaces it,
    so `s3VersionId: "null"` (as `list-object-versions` prints it) runs whatever was uploaded last."""
    world = World()
    world.knows(BEFORE)
    event = recorded()
    script = event["detail"]["requestParameters"]["nodeLifecycleActions"]["stages"]["nodeBootstrapped"][0]
    script["scriptSource"]["s3VersionId"] = "null"
    assert world.review(event).reviewed == 1
    [detail] = world.reviews()
    [risk] = [r for r in detail["risks"] if r["path"] == "stages.nodeBootstrapped[0].scriptSource"]
    assert risk["code"] == "unpinned-mutable-source"
    assert "s3VersionId null" in risk["message"]


def test_a_location_that_reverses_its_own_text_shows_as_written_in_sns_and_slack() -> None:
    """PCS takes any character in an S3 key (`s3://bucket/.+`): a right-to-left override would show the
    rest of the warning's line reversed in a mail reader or Slack ("Trojan Source")."""
    location = "s3://lca-scripts-example/x/\u202ehs.lmth-snoitidnoc-esu\u202c"

    def config(checksum: str) -> dict[str, Any]:
        source = {"scriptLocation": location, "checksum": checksum * 64}
        tune = {
            "name": "tune",
            "scriptSource": source,
            "executionPolicy": "EVERY_BOOT",
            "onError": "CONTINUE",
        }
        return {"stages": {"nodeBootstrapped": [tune]}}

    world = World(config("b"))
    world.knows(config("a"))
    event = recorded()
    event["detail"]["requestParameters"]["nodeLifecycleActions"] = config("b")
    event["detail"]["responseElements"]["computeNodeGroup"]["nodeLifecycleActions"] = config("b")
    assert world.review(event).reviewed == 1
    [detail] = world.reviews()
    assert [r["code"] for r in detail["risks"]] == ["updated-in-place"]
    cleaned, problems = clean_detail(detail)
    summary = summarize("ConfigChangeReviewed", cleaned, problems=problems)
    sns_text = sns_message(summary, cleaned).split("\n{", 1)[0]
    slack = shown_text(slack_message(summary, cleaned)["blocks"][2]["text"]["text"])
    for shown in (sns_text, slack):
        assert "x/?hs.lmth-snoitidnoc-esu?" in shown
        assert not {"\u202e", "\u202c"} & set(shown)


@pytest.mark.parametrize(
    ("where", "other", "own"),
    [
        ("account", "999999999999", {"account": "123456789012"}),
        ("detail.recipientAccountId", "999999999999", {"account": "123456789012"}),
        ("region", "eu-west-1", {"region": "us-east-1"}),
        ("detail.awsRegion", "eu-west-1", {"region": "us-east-1"}),
    ],
)
def test_a_call_of_another_account_or_region_is_ignored_and_nothing_is_read_kept_or_published(
    where: str, other: str, own: dict[str, str]
) -> None:
    """An organization that forwards CloudTrail's events between buses delivers other accounts' PCS calls too
    (source aws.pcs is kept), and a bus that gathers several regions' events delivers calls on groups of
    another region: neither is this stack's, which watches (and can read) its own account's and region's."""
    world = World()
    world.knows(BEFORE)
    event = recorded()
    *parents, leaf = where.split(".")
    (event[parents[0]] if parents else event)[leaf] = other
    summary = world.handler.handle_event(event, **own)
    assert (summary.reviewed, summary.ignored, summary.skipped) == (0, 1, 0)
    assert world.reviews() == []
    assert world.pcs_reads() == 0
    assert world.handler.handle_event(recorded(), **own).reviewed == 1  # its own account's and region's


def test_the_function_reviews_the_clusters_of_the_stacks_cluster_ids(monkeypatch: pytest.MonkeyPatch) -> None:
    from lifeguard.detection import DetectionSettings
    from lifeguard.handlers.updater import GroupUpdater
    from lifeguard.wiring import Wiring, build_config_review

    world = World()
    publisher = EventPublisher(world.bus, "bus", sleep=lambda _: None)
    wiring = Wiring(
        world.states,
        world.handler.pcs,
        GroupUpdater(world.states, publisher),
        DetectionSettings("notify", 2, 60),
    )
    monkeypatch.setenv("LIFEGUARD_CLUSTER_IDS", f"{CLUSTER},pcs_0fedcba987")
    assert build_config_review(wiring).clusters == {CLUSTER, "pcs_0fedcba987"}
    monkeypatch.setenv("LIFEGUARD_CLUSTER_IDS", "")
    assert build_config_review(wiring).clusters == frozenset()


def test_an_abandoned_change_of_lifeguards_does_not_make_a_configuration_sent_again_a_change() -> None:
    """Alice put NEW in place; Lifeguard set out a quarantine and abandoned it (never made); Bob's apply
    sends NEW again. NEW is still Alice's, and no second warning is laid at Bob's door."""
    world = World()
    world.knows(BEFORE)
    world.review(recorded())
    detection_read(world, NEW, modified_at=AT + 800, checked_at=AT + 57 * MINUTE)
    change = ledger_change(NEW, quarantined_new(), at_s=(AT + 58 * MINUTE) / 1000, status="abandoned")
    RemediationStore(world.table, "t").save_ledger(CLUSTER, GROUP, Ledger(changes=[change]))
    world.handler.clock = lambda: AT / 1000 + 3_700
    summary = world.review(resent_by(BOB, minutes=60))
    assert (summary.reviewed, summary.ignored) == (0, 1)
    assert len(world.reviews()) == 1


def test_a_scaling_change_of_a_cluster_outside_cluster_ids_is_let_be_without_reading_it() -> None:
    """An update of another stack's cluster that carries no lifecycle actions (a scaling change): the role
    may not read that cluster, and a refused read would count as an unreadable group and alarm."""
    world = World(clusters=frozenset({"pcs_0fedcba987"}))
    world.knows(BEFORE)
    summary = world.review(scaling_update(BOB))
    assert (summary.reviewed, summary.skipped, summary.ignored) == (0, 0, 1)
    assert world.pcs_reads() == 0


def test_a_change_recorded_without_its_request_is_said_with_its_caller_and_counted_unreviewed(
    caplog: pytest.LogCaptureFixture,
) -> None:
    """Over 100 KB, CloudTrail leaves a request out: which group changed is not known, but who did is, and
    whoever answers ChangesUnreviewedAlarm asks them."""
    world = World()
    event = recorded()
    del event["detail"]["requestParameters"]
    del event["detail"]["responseElements"]
    arn = event["detail"]["userIdentity"]["arn"]
    summary = world.review(event)
    assert (summary.reviewed, summary.skipped) == (0, 1)
    assert world.metrics == ["ChangesUnreviewed"]
    [line] = [r.getMessage() for r in caplog.records if "skipped" in r.getMessage()]
    assert f"UpdateComputeNodeGroup by {arn} without requestParameters" in line


_REPORT_STATUS = {
    "name": "report-status",
    "scriptSource": {"scriptLocation": "s3://lca-scripts-example/scripts/r.sh"},
}


def _reviewed(before: dict[str, Any], after: dict[str, Any]) -> dict[str, Any]:
    """The review of a change from `before` (the configuration Lifeguard knew) to `after`."""
    world = World(after)
    world.knows(before)
    event = recorded()
    event["detail"]["requestParameters"]["nodeLifecycleActions"] = after
    world.review(event)
    [detail] = world.reviews()
    return detail


def test_a_script_copied_to_the_other_stage_brings_risks_of_its_own() -> None:
    """One risk of the replaced configuration stood for any number of its like: a script copied into
    nodeReady under its name (PCS's names are a stage's own), on the default TERMINATE, which ends a node
    PCS logged ACTIVE, was said to have been there before, its risks all `info`, and nothing notified."""
    detail = _reviewed(
        {"stages": {"nodeBootstrapped": [_REPORT_STATUS]}},
        {"stages": {"nodeBootstrapped": [_REPORT_STATUS], "nodeReady": [copy.deepcopy(_REPORT_STATUS)]}},
    )
    severities = {(risk["path"].split("[")[0], risk["severity"]) for risk in detail["risks"]}
    assert ("stages.nodeReady", "warning") in severities
    assert ("stages.nodeReady", "info") not in severities
    assert ("stages.nodeBootstrapped", "info") in severities
    assert "2 of the 4 risk(s) were there before this change" in detail["reason"]


def test_a_script_moved_to_the_other_stage_keeps_its_risks_as_they_were() -> None:
    detail = _reviewed(
        {"stages": {"nodeBootstrapped": [_REPORT_STATUS]}},
        {"stages": {"nodeReady": [copy.deepcopy(_REPORT_STATUS)]}},
    )
    assert {risk["severity"] for risk in detail["risks"]} == {"info"}
    assert "2 of the 2 risk(s) were there before this change" in detail["reason"]


def test_a_scaling_update_delivered_after_a_later_change_is_not_reviewed_again() -> None:
    """Bob's scaling update at 01:01, delivered after Alice's change at 01:02 that carried the
    configuration: it was reviewed again as put in place at 01:01 by nobody known (PCS held the one before
    then), and its risks told a second time."""
    world = World()
    world.knows(BEFORE)
    world.handler.clock = lambda: AT / 1000 + 700
    change = recorded()
    change["detail"]["eventTime"] = "2026-10-21T01:02:00Z"
    assert world.review(change).reviewed == 1
    late = scaling_update(BOB)
    late["detail"]["eventTime"] = "2026-10-21T01:01:00Z"
    summary = world.review(late)
    assert (summary.reviewed, summary.ignored) == (0, 1)
    assert [review["changed_by"]["arn"] for review in world.reviews()] == [ARN]
