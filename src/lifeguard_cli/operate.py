"""`lifeguard status`, `history` and `undo`: the operator's view of what Lifeguard saw and did, and the way
back.

They read Lifeguard's table and PCS in the account and region of the deployed stack: its outputs name
the table and its parameters give the DefaultMode and DryRun the Lambdas run with (`--stack-name`,
`--region`, `--profile`; see `lifeguard_cli.deployment`). A table given by `--table` or `LIFEGUARD_TABLE`
is used as is, without reading the stack (the mode default is then `LIFEGUARD_DEFAULT_MODE`, else notify).
`--local` points them at the local AWS running (`lifeguard local up`, `replay --keep`), else at the one of
`AWS_ENDPOINT_URL` and `AWS_ENDPOINT_URL_PCS`."""

from __future__ import annotations

import hashlib
import os
import re
import time
import uuid
from collections.abc import Callable, Mapping
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from functools import partial
from typing import Any
from urllib.parse import urlsplit

from lifeguard.aws.pcs import GroupSnapshot, PcsGateway
from lifeguard.bounds import clip, clock_time, is_pcs_id, utc
from lifeguard.detection import mode_of, mode_tagged, stack_mode
from lifeguard.errors import AwsCallError, GroupNotFoundError, LifeguardError
from lifeguard.event_contract import NODES_REPLACED
from lifeguard.group_state import GroupState
from lifeguard.lifecycle import diff_api_configs, fingerprint_of
from lifeguard.remediation import AppliedChange, AuditEntry, Ledger
from lifeguard.remediation.apply import ChangeMaker
from lifeguard.remediation.rails import left_to_people
from lifeguard.remediation.remediator import NOT_TAKEN_CODES, may_have_taken
from lifeguard.settings import setting
from lifeguard.store.groups import GroupStore, UnreadableStateError
from lifeguard.store.remediations import RemediationStore
from lifeguard_cli.deployment import command_line

# `lifeguard undo`'s lock: its lease, on the operator's clock (released when the undo ends: a longer lease
# holds off remediations only after an undo that died), and how far that clock may run ahead of the Lambdas'.
UNDO_LEASE_SECONDS = 600.0
CLOCK_SKEW_SECONDS = 120.0
# Groups `status` reads at once: its reads are round trips, and PCS throttles a caller of many at a time.
STATUS_READERS = 4

__all__ = [
    "GroupStatus",
    "LocalTarget",
    "Operator",
    "OperatorError",
    "StackView",
    "UndoResult",
    "format_time",
    "local_target",
    "open_operator",
]


class OperatorError(LifeguardError):
    """A command cannot do what was asked; the message says why in one line."""


class CommandLineError(OperatorError):
    """The command line asks what cannot be (two clusters for one group): bad usage, exit 2."""


def format_time(seconds: float | None) -> str:
    """Seconds since the epoch as `YYYY-MM-DD HH:MM:SS` (UTC), `-` for none: a table's cell, under a heading
    that says UTC."""
    return "-" if seconds is None else clock_time(int(seconds * 1000))


def said_time(seconds: float) -> str:
    """A time in a sentence: `YYYY-MM-DD HH:MM:SS UTC` (a sentence has no heading to say the zone)."""
    return f"{format_time(seconds)} UTC"


@dataclass(frozen=True)
class GroupStatus:
    """One row of `lifeguard status`."""

    cluster_id: str
    group_id: str
    mode: str  # quarantine, revert, notify or off
    mode_source: str  # "tag" (lifeguard:mode, one that is no mode too) or "default" (the stack's DefaultMode)
    mode_problem: str | None  # why the group's tag was not taken, if it was not
    episode: dict[str, Any] | None
    last_action: dict[str, Any] | None
    proven_good: str | None
    # Lifeguard's last change not undone (what `undo` would put back), when a later entry (a skip) is the
    # last action: a quarantine that stands is not hidden behind "skipped".
    standing: dict[str, Any] | None = None
    name: str | None = None  # the group's name, as PCS lists it now (None: PCS would not list it)
    tags_from: str = "pcs"  # "pcs" (read as status ran) or "table" (as Lifeguard last read them)
    in_pcs: bool = True  # False: PCS has no such group any more (deleted): the row is Lifeguard's last record

    @property
    def shown_mode(self) -> str:
        """The mode as the table shows it: with where it came from, or why the tag was not taken."""
        if self.mode_problem is not None:
            return f"{self.mode} ({self.mode_problem})"
        return self.mode if self.mode_source == "tag" else f"{self.mode} (default)"

    def to_dict(self) -> dict[str, Any]:
        """As `--json` prints it."""
        return {
            "cluster_id": self.cluster_id,
            "compute_node_group_id": self.group_id,
            "compute_node_group_name": self.name,
            "mode": self.mode,
            "mode_source": self.mode_source,
            "mode_problem": self.mode_problem,
            "tags_from": self.tags_from,
            "in_pcs": self.in_pcs,
            "open_episode": self.episode,
            "last_action": self.last_action,
            "standing_change": self.standing,
            "proven_good_fingerprint": self.proven_good,
        }


@dataclass(frozen=True)
class UndoResult:
    """What `lifeguard undo` did (or would do)."""

    cluster_id: str
    group_id: str
    applied: bool
    change: AppliedChange
    diff: list[dict[str, Any]]
    lines: list[str]
    fingerprint_then: str | None = None  # the group's configuration when this was worked out
    dry_run: bool = False
    forced: bool = False  # the group changed since Lifeguard's change, and --force puts it back over that

    def to_dict(self) -> dict[str, Any]:
        """As `--json` prints it: the table's facts, its lines (the warnings with them) included."""
        return {
            "cluster_id": self.cluster_id,
            "compute_node_group_id": self.group_id,
            "applied": self.applied,
            "dry_run": self.dry_run,
            "forced": self.forced,
            "undoes": {
                "episode_id": self.change.episode_id,
                "action": self.change.action,
                "at": epoch_ms(self.change.at),
            },
            "config_after": self.change.config_before,
            "diff": self.diff,
            "lines": self.lines,
        }


@dataclass(frozen=True)
class StackView:
    """The deployed stack the commands read: where it is and how its Lambdas run."""

    stack_name: str
    region: str
    default_mode: str
    dry_run: bool
    # Where its events and notifications go (the stack's outputs; None where the stack has none): the bus,
    # the SNS topic, whether Slack is on (its SlackWebhookSecretArn parameter), the alarms' topic, and
    # the queue of events parked after every retry.
    bus: str | None = None
    topic: str | None = None
    slack: bool = False
    alarms: str | None = None
    parked: str | None = None
    failed: str | None = None  # the queue of scaling-log and node-report batches that failed every retry

    def to_dict(self) -> dict[str, Any]:
        """As `--json` prints it."""
        return {
            "stack_name": self.stack_name,
            "region": self.region,
            "default_mode": self.default_mode,
            "dry_run": self.dry_run,
            "event_bus": self.bus,
            "notification_topic": self.topic,
            "slack": self.slack,
            "alarm_topic": self.alarms,
            "parked_events_queue": self.parked,
            "failed_batches_queue": self.failed,
        }


# Read at most this many of a topic's subscriptions, or of the stack's alarms in ALARM: enough to say
# "some" (a count past it is said as at least that many).
HEALTH_READ_MAX = 100


@dataclass(frozen=True)
class StackHealth:
    """Whether the deployed stack can do its work, as its queues, topics and alarms say now: what waits in
    each queue, who is told (confirmed subscriptions of each topic), and which of its alarms are firing.
    None where it was not read: `unread` says why, one line each (the operator's permissions)."""

    parked_events: int | None = None
    failed_batches: int | None = None
    notification_subscribers: int | None = None
    alarm_subscribers: int | None = None
    alarms_firing: tuple[str, ...] | None = None
    unread: tuple[str, ...] = ()

    @staticmethod
    def at_least(count: int) -> bool:
        """Whether a count of subscribers, or of alarms in ALARM, is the most read (there may be more)."""
        return count >= HEALTH_READ_MAX

    def to_dict(self) -> dict[str, Any]:
        """As `--json` prints it; `read_max`: a count of subscribers or alarms this large may be more."""
        return {
            "read_max": HEALTH_READ_MAX,
            "parked_events": self.parked_events,
            "failed_batches": self.failed_batches,
            "notification_subscribers": self.notification_subscribers,
            "alarm_subscribers": self.alarm_subscribers,
            "alarms_firing": list(self.alarms_firing) if self.alarms_firing is not None else None,
            "unread": list(self.unread),
        }

    def attention(self, stack: StackView) -> list[str]:
        """What needs someone, one sentence each (empty when nothing does, as far as was read)."""
        said = []
        if self.parked_events:
            said.append(
                f"{self.parked_events} event(s) parked after every retry (remediations, notifications, "
                f"reviews): inspect and redrive them from {stack.parked}"
            )
        if self.failed_batches:
            said.append(
                f"{self.failed_batches} scaling-log or node-report batch(es) failed after every retry: "
                f"their error and records are in {stack.failed}"
            )
        if self.notification_subscribers == 0 and not stack.slack:
            said.append(
                "no one is subscribed to the notification topic and no Slack webhook is set: loops are told "
                f"to no one (aws sns subscribe --topic-arn {stack.topic} ...)"
            )
        if self.alarm_subscribers == 0:
            said.append(
                f"no one is subscribed to the alarm topic: Lifeguard's own failures page no one (aws sns "
                f"subscribe --topic-arn {stack.alarms} ...)"
            )
        if self.alarms_firing:
            said.append(f"alarms in ALARM: {', '.join(self.alarms_firing)}")
        return said


@dataclass(frozen=True)
class LocalTarget:
    """What `--local` reaches: a session of the local AWS, and the table or stack to read there."""

    session: Any
    table: str | None
    stack_name: str | None
    replayed_mode: str | None


def local_target(table: str | None, stack_name: str | None) -> LocalTarget:
    """The local AWS running now (`lifeguard local up`, or `replay --keep`, which replaces it), before the
    shell's variables, which may be the exports of one it replaced; its table or stack unless the command
    line names one. Raises OperatorError when there is none on loopback."""
    from lifeguard_cli.deployment import LOOPBACK, LoopbackSession
    from lifeguard_cli.local.background import read_state

    endpoints = (os.environ.get("AWS_ENDPOINT_URL", ""), os.environ.get("AWS_ENDPOINT_URL_PCS", ""))
    replayed_mode = None
    running = read_state()
    if running is not None:
        given = running["environ"]
        endpoints = (str(given.get("AWS_ENDPOINT_URL", "")), str(given.get("AWS_ENDPOINT_URL_PCS", "")))
        replayed_mode = str(given.get("LIFEGUARD_DEFAULT_MODE") or "") or None  # replay --keep's mode
        if not (table or stack_name):  # its table or stack (not the shell's), unless the command line's
            table, stack_name = running.get("table") or "", running.get("stack_name")
    if not all(urlsplit(url).hostname in LOOPBACK for url in endpoints):
        raise OperatorError(
            "--local needs a local AWS: lifeguard local up (or replay --keep), or AWS_ENDPOINT_URL "
            "and AWS_ENDPOINT_URL_PCS pointing at one on loopback"
        )
    # Every call to the local AWS, with test keys, whatever the shell, its profile or --profile say.
    return LocalTarget(LoopbackSession(*endpoints), table, stack_name, replayed_mode)


def open_operator(
    *,
    table: str | None = None,
    local: bool = False,
    stack_name: str | None = None,
    region: str | None = None,
    profile: str | None = None,
) -> Operator:
    """The operator of the deployed stack (see the module docstring for what is read from where)."""
    from lifeguard_cli.deployment import aws_session, read_deployment, read_samconfig, session_client

    session: Any = None
    replayed_mode: str | None = None
    if local:
        target = local_target(table, stack_name)
        session, table, stack_name = target.session, target.table, target.stack_name
        replayed_mode = target.replayed_mode
    name = table if table is not None else setting("table", None, "", str)
    if name:
        session = session or aws_session(region, profile, read_samconfig().region)
        return Operator(name, client=partial(session_client, session), default_mode=replayed_mode)
    deployment = read_deployment(stack_name, region=region, profile=profile, session=session)
    try:
        default_mode = stack_mode(deployment.parameters.get("DefaultMode") or None)
    except ValueError as exc:  # none in the stack, and LIFEGUARD_DEFAULT_MODE set to what is no mode
        raise OperatorError(str(exc)) from None
    stack = StackView(
        stack_name=deployment.stack_name,
        region=deployment.region,
        default_mode=default_mode,
        dry_run=deployment.parameters.get("DryRun", "false").lower() == "true",
        bus=deployment.outputs.get("EventBusName"),
        topic=deployment.outputs.get("NotificationTopicArn"),
        slack=bool(deployment.parameters.get("SlackWebhookSecretArn")),
        alarms=deployment.outputs.get("AlarmTopicArn"),
        parked=deployment.outputs.get("ParkedEventsQueueUrl"),
        failed=deployment.outputs.get("FailedBatchesQueueUrl"),
    )
    return Operator(deployment.output("StateTableName"), client=deployment.client, stack=stack)


class Operator:
    """The operator commands over one table and one PCS endpoint; `client(service)` makes their clients."""

    def __init__(
        self,
        table: str,
        *,
        client: Callable[[str], Any],
        default_mode: str | None = None,
        stack: StackView | None = None,
    ) -> None:
        self.client = client
        dynamodb = client("dynamodb")
        self.states = GroupStore(dynamodb, table)
        self.unreadable: list[str] = []  # state items of the table that could not be read (left out)
        # Groups whose tags PCS would not give as status ran (shown as last read): PCS's error.
        self.tags_unread: dict[tuple[str, str], AwsCallError] = {}
        # Groups PCS no longer has (deleted since Lifeguard last read them): their rows are as last recorded.
        self.gone: set[tuple[str, str]] = set()
        self.remediation = RemediationStore(dynamodb, table)
        # The options that chose this table and PCS (`--local`, `--stack-name X`, ...), as a command line
        # gives them: a command the operator is told to run next runs against the same ones.
        self.where = ""
        self._pcs_client: PcsGateway | None = None
        self.stack = stack
        try:
            self.default_mode = stack.default_mode if stack else stack_mode(default_mode)
        except ValueError as exc:  # LIFEGUARD_DEFAULT_MODE set to what is no mode
            raise OperatorError(str(exc)) from None

    @property
    def pcs(self) -> PcsGateway:
        """PCS, reached only by the commands that need it."""
        if self._pcs_client is None:
            self._pcs_client = PcsGateway(self.client("pcs"))
        return self._pcs_client

    # -- status and history --

    def health(self) -> StackHealth | None:
        """The deployed stack's health (`StackHealth`; None without a stack: `--table`). A read refused or
        failed is said in `unread`, and the rest is read all the same."""
        from lifeguard_cli.deployment import aws_error_line

        stack = self.stack
        if stack is None:
            return None
        unread: list[str] = []

        def read(what: str, call: Callable[[], Any]) -> Any:
            try:
                return call()
            except Exception as exc:  # noqa: BLE001 (each read on its own: the others still tell)
                unread.append(f"{what}: {aws_error_line(exc) or clip(str(exc), 200)}")
                return None

        def waiting(url: str | None) -> int | None:
            if not url:
                return None
            attributes = self.client("sqs").get_queue_attributes(
                QueueUrl=url,
                AttributeNames=["ApproximateNumberOfMessages", "ApproximateNumberOfMessagesNotVisible"],
            )["Attributes"]
            return sum(int(attributes.get(name, 0)) for name in attributes)

        def subscribers(topic: str | None) -> int | None:
            if not topic:
                return None
            pages = self.client("sns").get_paginator("list_subscriptions_by_topic").paginate(TopicArn=topic)
            confirmed = 0
            for page in pages:
                confirmed += sum(
                    1
                    for subscription in page.get("Subscriptions", [])
                    if subscription.get("SubscriptionArn", "").startswith("arn:")
                )
                if confirmed >= HEALTH_READ_MAX:
                    return HEALTH_READ_MAX  # at least: `StackHealth.at_least`
            return confirmed

        # CloudFormation names an alarm `<stack>-<logical id>-<suffix>`; a stack whose name begins with this
        # one's and a hyphen (`pcs-lifeguard-dev` beside `pcs-lifeguard`) shares the prefix, not the form.
        own = re.compile(rf"{re.escape(stack.stack_name)}-[A-Za-z0-9]+-[A-Za-z0-9]+")

        def firing() -> tuple[str, ...]:
            pages = (
                self.client("cloudwatch")
                .get_paginator("describe_alarms")
                .paginate(AlarmNamePrefix=f"{stack.stack_name}-", StateValue="ALARM")
            )
            names: list[str] = []
            for page in pages:
                alarms = [*page.get("MetricAlarms", []), *page.get("CompositeAlarms", [])]
                # In ALARM as each alarm says of itself too (not every endpoint filters by state).
                names.extend(
                    clip(a.get("AlarmName"), 255)
                    for a in alarms
                    if a.get("StateValue") == "ALARM" and own.fullmatch(str(a.get("AlarmName")))
                )
                if len(names) >= HEALTH_READ_MAX:
                    break
            return tuple(sorted(names)[:HEALTH_READ_MAX])  # as many at least: `StackHealth.at_least`

        return StackHealth(
            parked_events=read("the parked events' queue", lambda: waiting(stack.parked)),
            failed_batches=read("the failed batches' queue", lambda: waiting(stack.failed)),
            notification_subscribers=read("the notification topic", lambda: subscribers(stack.topic)),
            alarm_subscribers=read("the alarm topic", lambda: subscribers(stack.alarms)),
            alarms_firing=read("the stack's alarms", firing),
            unread=tuple(unread),
        )

    def status(self, cluster: str | None = None) -> list[GroupStatus]:
        """Every group Lifeguard knows (of one cluster, by name or id, when given)."""
        states = self.states.all_states(self.unreadable)
        cluster_id = cluster
        if cluster and not any(state.cluster_id == cluster for state in states):
            cluster_id = self.pcs.known_cluster_id(cluster)
            if cluster_id is None:
                raise OperatorError(
                    f"no cluster {cluster} in PCS, nor in Lifeguard's table (it knows clusters by id: "
                    f"{command_line('status', where=self.where)} lists them)"
                )
        chosen = [state for state in states if not cluster_id or state.cluster_id == cluster_id]
        # Each cluster's groups' names, listed once.
        names = {cluster: self._group_names(cluster) for cluster in sorted({s.cluster_id for s in chosen})}
        # A group's row is three reads (its last entry, its tags, its ledger), each a round trip: a few
        # groups at a time, in the table's order, so an account of thousands of groups is not read one call
        # after another. The first failure is the command's, as it would be one by one: `map` lets the groups
        # not yet begun go with it (and at Ctrl-C), rather than reading them to no end.
        with ThreadPoolExecutor(max_workers=STATUS_READERS) as pool:
            return list(pool.map(lambda state: self._row(state, names[state.cluster_id]), chosen))

    def _row(self, state: GroupState, names: Mapping[str, str]) -> GroupStatus:
        """The group's row of `status`."""
        key = (state.cluster_id, state.group_id)
        last = self.remediation.history(*key, last=1)
        tags = self._tags_now(state)
        mode, problem = mode_of(tags, self.default_mode)
        return GroupStatus(
            cluster_id=state.cluster_id,
            group_id=state.group_id,
            mode=mode,
            # A tag that is no mode decides too: notify (or off), not the stack's DefaultMode.
            mode_source="tag" if mode_tagged(tags) else "default",
            mode_problem=problem,
            episode=_episode(state),
            last_action=_last_action(last[0]) if last else None,
            proven_good=state.proven_good.fingerprint if state.proven_good else None,
            standing=self._standing(key, last[0] if last else None, state),
            name=names.get(state.group_id),
            tags_from="table" if key in self.tags_unread or key in self.gone else "pcs",
            in_pcs=key not in self.gone,
        )

    def _group_names(self, cluster_id: str) -> dict[str, str]:
        """The cluster's groups' names by id, as PCS lists them now; none when it will not list them (the
        ids alone are shown then)."""
        try:
            return {
                group_id: clip(group.name, 128)
                for group_id, group in self.pcs.list_groups(cluster_id).items()
            }
        except AwsCallError:
            return {}

    def _standing(
        self, key: tuple[str, str], last: AuditEntry | None, state: GroupState
    ) -> dict[str, Any] | None:
        """Lifeguard's last change of the group not undone, `{"at", "action", "episode_id", "holds"}` (`at`
        in epoch ms; `holds`: false when the configuration Lifeguard last read of the group was put in place
        after the change, and is another one), when the last action is another entry; None when there is
        none, or its ledger cannot be read."""
        if last is None or last.decision == "applied":
            return None
        try:
            ledger = self.remediation.ledger(*key)
        except (UnreadableStateError, AwsCallError):
            return None
        change = next((c for c in reversed(ledger.changes) if c.counts and c.undone_at is None), None)
        if change is None:
            return None
        # Replaced only when Lifeguard has read a configuration PCS put in place after the change, and it is
        # another: the one read before the change (not read again since) says nothing of it.
        config = state.config
        holds = (
            config is None
            or config.fingerprint == change.fingerprint_after
            or config.modified_at <= epoch_ms(change.at)
        )
        return {
            "at": epoch_ms(change.at),
            "action": change.action,
            "episode_id": change.episode_id,
            "holds": holds,
        }

    def _tags_now(self, state: GroupState) -> dict[str, str]:
        """The group's tags as PCS has them now (the functions read them again before they act, so a tag set
        since they last did is the mode they will act in); the ones Lifeguard last read when PCS cannot
        say (the group gone, the call refused)."""
        config = state.config
        if config is None:
            return {}
        try:
            arn = config.arn or self.pcs.get_group(state.cluster_id, state.group_id).arn
            return self.pcs.list_tags(arn) if arn else config.tags
        except GroupNotFoundError:  # deleted: no grant would give its tags
            self.gone.add((state.cluster_id, state.group_id))
            return config.tags
        except AwsCallError as exc:
            self.tags_unread[(state.cluster_id, state.group_id)] = exc
            return config.tags

    def history(
        self, group: str, cluster_id: str | None = None, *, last: int | None = None
    ) -> tuple[str, str, list[AuditEntry]]:
        """The audit trail of a group, oldest first, with how its episodes ended as the group's state tells
        it (contained by a kept node, or resolved): a contained loop is not a resolved one. `last`: only the
        latest entries, read as such (a group remediated and undone for months keeps 90 days of entries,
        each with two configurations)."""
        cluster, group_id = self.resolve(group, cluster_id)
        entries = self.remediation.history(cluster, group_id, last=last) + _episode_ends(
            self.states.load(cluster, group_id)
        )
        entries.sort(key=lambda entry: entry.at)
        return cluster, group_id, entries[-last:] if last else entries

    def resolve(self, group: str, cluster: str | None = None) -> tuple[str, str]:
        """(cluster id, group id) of `GROUP`, a group's name or id, or `CLUSTER/GROUP`; the cluster is a
        name or id too (`--cluster`), or the one the table knows the group in. Names are asked of PCS."""
        if "/" in group:
            named, _, group = group.partition("/")
            id_of = self.pcs.known_cluster_id
            if cluster and cluster != named and len({id_of(c) or c for c in (cluster, named)}) > 1:
                raise CommandLineError(f"--cluster {cluster} and {named}/{group} name two clusters; give one")
            cluster = named
        if cluster:
            # Both ids (the undo command a notification gives): the group's own item says, read alone. The
            # whole table is scanned only to find a group by its name or id without its cluster.
            if self._held(cluster, group):
                return cluster, group
            try:
                return self._ids(cluster, group)
            except AwsCallError as exc:  # GroupNotFoundError among them
                # PCS answers a cluster id it does not have as a missing grant: a typo'd id is said as one.
                denied = not isinstance(exc, GroupNotFoundError)
                if denied and exc.code != "AccessDeniedException":
                    raise
                cluster_id = self.pcs.known_cluster_id(cluster)
                if cluster_id is None:  # the cluster is what PCS does not know
                    raise OperatorError(f"no cluster {cluster} in PCS; check --cluster") from None
                if denied:  # a cluster PCS has: the refusal is the caller's grant
                    raise
                if self._held(cluster_id, group):  # a group PCS no longer has, its cluster given by name
                    return cluster_id, group
                raise OperatorError(f"no compute node group {group} in cluster {cluster} (PCS)") from None
        known = {(s.cluster_id, s.group_id) for s in self.states.all_states(self.unreadable)}
        matches = sorted(pair for pair in known if pair[1] == group)
        refused: list[str] = []  # clusters PCS would not be asked in
        if not matches:  # a name: ask PCS in each cluster Lifeguard knows
            for cluster_id in sorted({pair[0] for pair in known}):
                try:
                    matches.append(self._ids(cluster_id, group))
                except GroupNotFoundError:
                    continue
                except AwsCallError as exc:
                    # A cluster since deleted (PCS refuses an id it does not have), or one this caller may
                    # not read: the group may be in another; said below when it is in none.
                    if exc.code != "AccessDeniedException":
                        raise
                    refused.append(cluster_id)
        if not matches and any(cluster_id == group for cluster_id, _ in known):
            raise OperatorError(
                f"{group} is a cluster, not a compute node group: "
                f"{command_line('status', '--cluster', group, where=self.where)} lists "
                "its groups"
            )
        if not matches and is_pcs_id(group):  # an id, which only its cluster's PCS could confirm
            raise OperatorError(
                f"Lifeguard has seen no compute node group {group}: it acted on none by that id (pass "
                "--cluster to look it up in PCS)"
            )
        if not matches:
            refused = self._live(refused) if refused else refused  # a cluster since deleted holds no group
            unasked = f" (PCS refused to be asked in {', '.join(refused)})" if refused else ""
            raise OperatorError(
                f"no compute node group {group} in Lifeguard's table{unasked}; check the name or id, or pass "
                "--cluster"
            )
        if len(matches) > 1:
            raise OperatorError(f"{group} is in several clusters; pass --cluster")
        if refused:  # a cluster since deleted holds no group; one that may not be read may hold one
            refused = self._live(refused)
        if refused:  # one of them may hold a group of that name too: never picked in silence
            raise OperatorError(
                f"{group} is in cluster {matches[0][0]}, and PCS refused to be asked in "
                f"{', '.join(refused)}, which may hold one of that name too; pass --cluster {matches[0][0]}"
            )
        return matches[0]

    def _live(self, cluster_ids: list[str]) -> list[str]:
        """Of `cluster_ids`, those PCS still lists (all of them when it will not list its clusters)."""
        try:
            listed = self.pcs.cluster_ids()
        except AwsCallError:
            return cluster_ids
        return [cluster_id for cluster_id in cluster_ids if cluster_id in listed]

    def _held(self, cluster_id: str, group_id: str) -> bool:
        """Whether the table holds a readable state of the group (of these ids), read with one GetItem."""
        if not (is_pcs_id(cluster_id) and is_pcs_id(group_id)):
            return False
        try:
            return self.states.load(cluster_id, group_id).version > 0
        except UnreadableStateError:  # left out, as a Scan leaves it out
            return False

    def _ids(self, cluster: str, group: str) -> tuple[str, str]:
        """(cluster id, group id) as PCS knows the group of these names or ids."""
        found = self.pcs.get_group(cluster, group)  # a failed call is said as the command's one line
        return found.cluster_id, found.group_id

    # -- undo --

    def _episode_over(self, cluster: str, group_id: str, episode_id: str) -> bool | None:
        """Whether the episode is over (the group's state no longer holds it open), None when the state
        cannot be read."""
        try:
            state = self.states.load(cluster, group_id)
        except (UnreadableStateError, AwsCallError):
            return None
        return state.episode is None or state.episode.episode_id != episode_id

    def undo(
        self,
        group: str,
        cluster_id: str | None = None,
        *,
        dry_run: bool = False,
        force: bool = False,
        shown: UndoResult | None = None,
    ) -> UndoResult:
        """Put back the configuration from before Lifeguard's last change, after checking nobody changed
        the group since (unless `force`). With `shown` (the dry run a person agreed to), only that: the
        same change undone, the group as it was then."""
        cluster, group_id = (shown.cluster_id, shown.group_id) if shown else self.resolve(group, cluster_id)
        holder = f"undo-{uuid.uuid4().hex}"
        # The lease is taken on this machine's clock, which may be minutes off the Lambdas': it runs long
        # (released at the end), and a remediation's is taken as held a while past its end.
        if not dry_run and not self.remediation.acquire(
            cluster, group_id, holder, time.time(), UNDO_LEASE_SECONDS, skew_seconds=CLOCK_SKEW_SECONDS
        ):
            raise OperatorError(f"a remediation of {group_id} is running; try again in a few minutes")
        try:
            return self._undo(cluster, group_id, holder, dry_run=dry_run, force=force, shown=shown)
        finally:
            if not dry_run:
                self.remediation.release(cluster, group_id, holder)

    def _undo(
        self,
        cluster: str,
        group_id: str,
        holder: str,
        *,
        dry_run: bool,
        force: bool,
        shown: UndoResult | None,
    ) -> UndoResult:
        ledger = self.remediation.ledger(cluster, group_id)
        if not any(c.counts and c.undone_at is None for c in ledger.changes):
            raise OperatorError(f"Lifeguard has no change of {group_id} to undo")
        try:
            group = self.pcs.get_group(cluster, group_id)
        except GroupNotFoundError:
            raise OperatorError(
                f"{group_id} is no longer in cluster {cluster} (PCS): nothing to undo"
            ) from None
        current = dict(group.node_lifecycle_actions) if group.node_lifecycle_actions else None
        held = fingerprint_of(current)
        change, unmade = _to_undo(ledger, held)
        if change is None:
            # Not even --force: PCS never took it, so what it would put back is not Lifeguard's to give (it
            # may be the very configuration that looped, which someone has mended since).
            never = unmade[0]
            raise OperatorError(
                f"Lifeguard's {never.action} of {said_time(never.at)} was set out but PCS has not "
                "taken it: nothing to undo (the remediation's retry settles it)"
            )
        unknown = held not in (change.fingerprint_after, change.fingerprint_before)
        if change.status == "pending" and unknown and ledger.undo_of(change) is None:
            # Not even --force: PCS's answer was lost and the group changed since, so PCS may have made it
            # (and someone changed the group after) or not; neither is Lifeguard's to tell.
            raise OperatorError(
                f"Lifeguard's {change.action} of {said_time(change.at)} was set out, PCS's answer to it "
                f"lost, and {group_id} changed since: whether PCS made it is not known; what the group "
                "holds is not Lifeguard's to take back (the remediation's retry settles it)"
            )
        if change.status == "unconfirmed":
            # Not even --force: the group changed before the change was confirmed, so what it holds is
            # someone else's, and what an undo would put back may be the configuration that looped.
            raise OperatorError(
                f"Lifeguard's {change.action} of {said_time(change.at)} was never confirmed: the group "
                "changed before it was (PCS may have made it); what the group holds is not Lifeguard's "
                "to take back"
            )
        if shown is not None and (
            (change.at, change.episode_id) != (shown.change.at, shown.change.episode_id)
            or held != shown.fingerprint_then
        ):
            raise OperatorError(
                f"{group_id} changed while you were asked: nothing was undone; run lifeguard undo again"
            )
        earlier = self._earlier_undo(cluster, group_id, ledger, change, group, dry_run=dry_run)
        if earlier is not None:
            return earlier
        if held == change.fingerprint_before and held != change.fingerprint_after:
            # Not even --force: someone put the configuration from before back already. An update that
            # changes nothing still drains and replaces every node of the group.
            raise OperatorError(
                f"{group_id} already holds the configuration from before Lifeguard's {change.action} of "
                f"{said_time(change.at)} (put back since, at {said_time(group.modified_at_ms / 1000)}): "
                "nothing to undo"
            )
        forced = False
        lines = [f"undoes {change.action} of {said_time(change.at)} (episode {change.episode_id})"]
        lines += [f"  lets go {c.action} of {said_time(c.at)}: set out, never taken by PCS" for c in unmade]
        # Lifeguard's configuration set again since, by someone else (a template that took it in): the same
        # fingerprint, a later modifiedAt than Lifeguard's change left, or an undo of a later change of
        # Lifeguard's that put it back (after quarantine, then revert, then an undo of the revert).
        # Later in the ledger, not later by the clock: an undo is dated by the operator's clock, which may
        # be behind the function's.
        place = next((i for i, c in enumerate(ledger.changes) if c == change), len(ledger.changes))
        put_back = {
            later.modified_at_after
            for later in ledger.changes[place + 1 :]
            if later.action == "undo"
            and later.status == "applied"
            and later.fingerprint_after == change.fingerprint_after
        }
        set_again = (
            held == change.fingerprint_after
            and change.modified_at_after is not None
            and group.modified_at_ms not in {change.modified_at_after, *put_back}
        )
        if held != change.fingerprint_after or set_again:
            if not force:
                how = (
                    f"it was updated at {said_time(group.modified_at_ms / 1000)}, after Lifeguard's (its "
                    "lifecycle actions are still Lifeguard's: someone may have set them again, or changed "
                    "something else of the group)"
                    if set_again
                    else "someone else changed it"
                )
                shows = command_line("undo", group_id, "--cluster", cluster, where=self.where)
                raise OperatorError(
                    f"{group_id} changed since Lifeguard's {change.action} of {said_time(change.at)}: "
                    f"{how}; --force would put back the configuration from before over theirs ({shows} "
                    "--dry-run --force shows it first)"
                )
            lines.append(
                "the group changed since Lifeguard's change: --force puts the old configuration back anyway"
            )
            forced = True
        changes = diff_api_configs(current, change.config_before)
        lines += [f"  {c.describe()}" for c in changes] or ["  no change"]
        if changes:
            # A quarantine's kept node goes with the rest: whoever still debugs on it should know first.
            kept = ", a node kept for debugging among them" if change.action == "quarantine" else ""
            lines.append(f"  {NODES_REPLACED} with nodes that boot the configuration from before{kept}")
            over = self._episode_over(cluster, group_id, change.episode_id)
            if over is not True:  # open, or not known: what an undo brings back is said
                # The configuration put back is the one the loop ran on: its nodes may fail the same way,
                # and the remediation holds back (`rails.undone`). Whoever undoes knows both first.
                lines.append(
                    f"  episode {change.episode_id} is not over: its nodes failed on the configuration put "
                    "back, and new nodes may fail the same way"
                    if over is False
                    else f"  if episode {change.episode_id} is not over, new nodes may fail the same way"
                )
                lines.append(f"  then Lifeguard {left_to_people(f'episode {change.episode_id}')}")
        diff = [c.to_detail() for c in changes]
        if dry_run:
            return _shown(
                cluster, group_id, change=change, diff=diff, lines=lines, current=current, forced=forced
            )
        if group.status != "ACTIVE":
            raise OperatorError(f"{group_id} is {group.status}; try again when it is ACTIVE")
        if change.config_before is None:
            raise OperatorError(
                "the configuration from before had no lifecycle actions; PCS cannot remove them all"
            )
        token = (
            "lifeguard-undo-"
            + hashlib.sha256(f"{holder}:{change.fingerprint_after}".encode()).hexdigest()[:40]
        )
        now = time.time()
        undo = AppliedChange(
            at=now,
            episode_id=change.episode_id,
            revision=change.revision,
            action="undo",
            config_before=current,
            config_after=change.config_before,
            fingerprint_before=held,
            fingerprint_after=fingerprint_of(change.config_before),
            client_token=token,
        )
        if not self.remediation.holds(cluster, group_id, holder):
            raise OperatorError(
                f"a remediation of {group_id} took the group over while the undo read it: nothing was "
                "undone; run lifeguard undo again"
            )
        # Read again just before the write, --force or not: a change someone made since the first read
        # (a hand fix while the ledger, the episode and the lock were read) is theirs, never overwritten.
        again = self.pcs.get_group(cluster, group_id)
        if again.modified_at_ms != group.modified_at_ms:
            raise OperatorError(
                f"{group_id} was changed while the undo read it: nothing was undone; run lifeguard undo "
                "again to see what it holds now"
            )
        for never in unmade:
            never.status = (
                "abandoned"  # written with the undo's intent: a redrive of its event decides afresh
            )
        # The way remediation changes a group: the intent in the ledger first, then PCS, then applied.
        maker = ChangeMaker(self.remediation, self.pcs)
        maker.record(cluster, group_id, ledger=ledger, intent=undo)
        try:
            updated = maker.ask(cluster, group_id, undo)
        except AwsCallError as exc:
            if exc.code in NOT_TAKEN_CODES:  # throttled, a conflict, never sent: PCS took nothing
                maker.abandoned(cluster, group_id, ledger=ledger, intent=undo)
                raise OperatorError(
                    f"PCS did not take the undo of {group_id} ({exc.code}): nothing was undone; run "
                    "lifeguard undo again in a minute"
                ) from None
            if not may_have_taken(exc):
                maker.abandoned(cluster, group_id, ledger=ledger, intent=undo)  # PCS refused: nothing undone
                raise
            # PCS may have taken it, its answer lost or unreadable: the undo stays set out, and the next run
            # finds whether PCS holds it (`_earlier_undo`).
            raise OperatorError(
                f"PCS's answer to the undo of {group_id} was lost or unreadable ({exc.code}); it may have "
                "been made: run lifeguard undo again to find out"
            ) from None
        maker.applied(cluster, group_id, ledger=ledger, intent=undo, updated=updated)
        change.undone_at = now
        if change.status == "pending":
            change.status = "applied"  # PCS had taken it (its fingerprint was the group's): now undone
        self.remediation.save_ledger(cluster, group_id, ledger)
        self.remediation.audit(
            cluster,
            group_id,
            AuditEntry(
                at=now,
                decision="undo",
                episode_id=change.episode_id,
                revision=change.revision,
                action="undo",
                reason=f"operator undid {change.action} of {said_time(change.at)}"
                + (" (--force)" if force else ""),
                config_before=current,
                config_after=change.config_before,
                diff=diff,
                actor="operator",
            ),
        )
        return UndoResult(cluster, group_id, True, change, diff, [*lines, "applied"], forced=forced)

    def _earlier_undo(
        self,
        cluster: str,
        group_id: str,
        ledger: Ledger,
        change: AppliedChange,
        group: GroupSnapshot,
        *,
        dry_run: bool,
    ) -> UndoResult | None:
        """An undo of `change` an earlier run set out and PCS took, though the table failed before it was all
        written down (the undo still pending, or `change` not yet marked undone): written down now, and
        nothing more is done. An undo set out that PCS does not hold is let go. None: no such undo."""
        undo = ledger.undo_of(change)
        if undo is None:
            return None
        current = dict(group.node_lifecycle_actions) if group.node_lifecycle_actions else None
        maker = ChangeMaker(self.remediation, self.pcs)
        if fingerprint_of(current) != undo.fingerprint_after:
            if undo.status == "pending" and not dry_run:
                maker.abandoned(cluster, group_id, ledger=ledger, intent=undo)  # PCS never made it
            return None
        diff = [c.to_detail() for c in diff_api_configs(undo.config_before, undo.config_after)]
        lines = [
            f"undoes {change.action} of {said_time(change.at)} (episode {change.episode_id})",
            f"  already made by the undo of {said_time(undo.at)}: PCS holds it; written down now",
        ]
        if dry_run:
            return _shown(cluster, group_id, change=change, diff=diff, lines=lines, current=current)
        if undo.status == "pending":
            maker.applied(cluster, group_id, ledger=ledger, intent=undo, updated=group)
        change.undone_at = undo.at
        if change.status == "pending":
            change.status = "applied"
        self.remediation.save_ledger(cluster, group_id, ledger)
        self.remediation.audit(
            cluster,
            group_id,
            AuditEntry(
                at=undo.at,
                decision="undo",
                episode_id=change.episode_id,
                revision=change.revision,
                action="undo",
                reason=f"operator undid {change.action} of {said_time(change.at)} (written down by a "
                "later run: the table had failed after PCS took it)",
                config_before=undo.config_before,
                config_after=undo.config_after,
                diff=diff,
                actor="operator",
            ),
        )
        return UndoResult(cluster, group_id, True, change, diff, [*lines, "applied"])


def _to_undo(ledger: Ledger, current: str) -> tuple[AppliedChange | None, list[AppliedChange]]:
    """The change an undo takes back: Lifeguard's last that is not undone, past the ones set out that the
    group (its fingerprint `current`) does not hold, while it holds what they replaced. Those were never
    made (PCS failed them until their events were parked, and no retry came back): they are returned too,
    newest first, for the undo to let go. One set out while the group holds neither what it replaced nor
    what it set is returned as the change (PCS may have made it): the undo refuses it. Under the undo's
    lock no remediation is making them."""
    unmade: list[AppliedChange] = []
    for change in reversed(ledger.changes):
        if not change.counts or change.undone_at is not None:
            continue
        if (
            change.status == "pending"
            and change.fingerprint_after != current
            and ledger.undo_of(change) is None
        ):
            if change.fingerprint_before != current:
                return change, unmade  # the group holds neither: whether PCS made it is not known
            unmade.append(change)  # (one an undo was set out for: PCS made it, and the undo is looked at)
            continue
        return change, unmade
    return None, unmade


def _shown(
    cluster: str,
    group_id: str,
    *,
    change: AppliedChange,
    diff: list[dict[str, Any]],
    lines: list[str],
    current: dict[str, Any] | None,
    forced: bool = False,
) -> UndoResult:
    """A dry run's result: what the undo would do, and the group's configuration it was worked out on."""
    said = [*lines, "dry run: nothing changed"]
    return UndoResult(
        cluster, group_id, False, change, diff, said, fingerprint_of(current), dry_run=True, forced=forced
    )


def _episode(state: GroupState) -> dict[str, Any] | None:
    episode = state.episode
    if episode is None:
        return None
    suspect = episode.suspect
    return {
        "episode_id": episode.episode_id,
        "kind": episode.kind,
        "opened_at": episode.opened_at,
        "failures": len(episode.failures),
        "suspect": f"{suspect.stage}/{suspect.script}" if suspect else None,
        "contained_at": episode.contained_at,
        # A kept node PCS has since terminated (as unhealthy, or after a failed check) is kept no more.
        "kept": [instance for instance in episode.kept if _kept_node_end(state, instance) is None],
        "replaced": [instance for instance in episode.kept if instance in state.unhealthy],
        "ended": [
            instance
            for instance in episode.kept
            if instance not in state.unhealthy and _kept_node_end(state, instance) is not None
        ],
        # Told again as a replacement loop (its nodes replaced as unhealthy, again and again: a drain step
        # PCS answers by replacing the node): how many, else 0. The loop goes on, whatever kept it before.
        "replacement_loop": len(episode.unhealthy) if episode.replacement_revision is not None else 0,
    }


def _kept_node_end(state: GroupState, instance: str) -> tuple[int, str] | None:
    """When and how PCS ended a node a loop kept, if it did: terminated as unhealthy, or failed after its
    ACTIVE (a nodeReady check under TERMINATE, a reboot's script: its outcome is that failure now); None
    while it is up, or once the group's state no longer holds its end (its last `OUTCOME_LIMIT` outcomes,
    its last unhealthy terminations)."""
    if instance in state.unhealthy:
        return state.unhealthy[instance], "as unhealthy (TERMINATED/UNHEALTHY_NODE)"
    outcome = state.outcomes.get(instance)
    if outcome is not None and not outcome.succeeded:
        return outcome.event_timestamp, "after its ACTIVE (TERMINATED/BOOTSTRAP_FAILED)"
    return None


def _episode_ends(state: GroupState) -> list[AuditEntry]:
    """The group's open and last episodes' containment and resolution, as lines of its history."""
    found = []
    for episode in (state.last_episode, state.episode):
        if episode is None:
            continue
        script = f"{episode.suspect.stage}/{episode.suspect.script}" if episode.suspect else "its script"
        if episode.contained_at is not None:
            # The node kept first: later ones were kept after this moment, each in its turn.
            kept = episode.kept[0] if episode.kept else "a node"
            reason = f"contained, not fixed: {kept} kept with {script} still failing"
            found.append(_milestone(episode.contained_at, "contained", episode.episode_id, reason))
            for instance in episode.kept:
                end = _kept_node_end(state, instance)
                if end is not None:
                    at, how = end
                    reason = f"kept node {instance} terminated by PCS {how}"
                    decision = "replaced" if instance in state.unhealthy else "ended"
                    found.append(_milestone(at, decision, episode.episode_id, reason))
        if episode.resolved_at is not None:
            # Ended by a node's success (its reports, if any, in the LoopResolved event), or by a
            # configuration that no longer holds the script (at that configuration's time, no node).
            if episode.resolved_by:
                reason = f"resolved: {episode.resolved_by} bootstrapped successfully"
            else:
                reason = f"resolved: the configuration of {utc(episode.resolved_at)} no longer holds {script}"
            found.append(_milestone(episode.resolved_at, "resolved", episode.episode_id, reason))
    return found


def _milestone(at_ms: int, decision: str, episode_id: str, reason: str) -> AuditEntry:
    return AuditEntry(at=at_ms / 1000, decision=decision, episode_id=episode_id, reason=reason)


def epoch_ms(seconds: float) -> int:
    """A moment Lifeguard's ledger holds in seconds, as every `--json` document gives times: epoch ms, as
    scaling-log records and controller events do."""
    return round(seconds * 1000)


def _last_action(entry: AuditEntry) -> dict[str, Any]:
    return {
        "at": epoch_ms(entry.at),
        "decision": entry.decision,
        "action": entry.action,
        "dry_run": entry.dry_run,
        "reason": entry.reason,
    }
