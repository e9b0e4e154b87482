"""The scaling_events Lambda's logic: PCS scaling-log records in, episodes and proven-good configs out.

Per batch, records are grouped by compute node group; each group costs one state read and, when
something changed, one conditional write. PCS is called only when a decision needs it: to confirm a
detection with the group's current `modifiedAt` and tags, and, from success records, at most once per
group per `proven_good_refresh_seconds` of event time.
"""

from __future__ import annotations

import logging
import operator
import re
import time
from collections.abc import Callable, Iterable, Mapping
from dataclasses import field
from typing import TYPE_CHECKING, Any

from lifeguard.attribution import (
    BootRuns,
    as_booted,
    as_configured,
    attribute,
    known_scripts,
    still_failing,
)
from lifeguard.aws.pcs import BatchReads, KeptListings, PcsGateway
from lifeguard.bounds import FUTURE_SKEW_MS, clip, implausible_time, plausible_times, utc
from lifeguard.detection import (
    TAG_THRESHOLD_LEAST,
    Detection,
    DetectionSettings,
    RecordFolder,
    detect,
    detect_replacement,
    episode_id_for,
    needs_fresh_config,
    proven_good,
    replaced_since_up,
    resolving,
)
from lifeguard.errors import UnlistedClusterError
from lifeguard.event_contract import ControllerEvent, change_sentence, episode_event, episode_signals
from lifeguard.group_state import BootOutcome, ChangedBy, Episode, GroupState, HeldBack, KnownConfig
from lifeguard.handlers.batch import Skips, collector_paused, count_events, data_batch
from lifeguard.handlers.containment import (
    REPORTS_GRACE_MS,
    booted_actions,
    booted_current,
    contain,
    newest_event_ms,
    reopen_after_ready_failure,
    reports_its_end,
    revoke_proof_of_failed_node,
    revoke_proof_of_looped_config,
    revoke_proof_of_older_launch,
    settle_in_turn,
    to_settle,
)
from lifeguard.handlers.evidence import GroupEvidence, proof_evidence
from lifeguard.handlers.updater import Change, GroupUpdater
from lifeguard.lifecycle_rules import (
    drains_kept_nodes,
    hides_failures,
    holds_quarantine,
    holds_script,
)
from lifeguard.log_subscription import MALFORMED_LOG_EVENT, another_pcs_log
from lifeguard.metrics import Metric, uncounted
from lifeguard.scaling_log import (
    BOOTSTRAP_OUTCOMES,
    KNOWN_PAIRS,
    UNHEALTHY_TERMINATION,
    ScalingLogParseError,
    ScalingLogRecord,
    read_scaling_log_message,
)
from lifeguard.store.groups import GroupStore
from lifeguard.store.table import group_key
from lifeguard.values import mutable

if TYPE_CHECKING:  # imported by the functions that read reports: its model is built on import
    from lifeguard.node_report import NodeReport

__all__ = ["BatchSummary", "ScalingEventsHandler", "stream_cluster"]

# Scripts the resumptions told in one hold may name (`Episode.told_in_hold`): a configuration's scripts, so
# reports naming each in turn (any node can write one) are told once each, not at every turn.
TOLD_IN_HOLD_MAX = 20
# The pairs, besides every LAUNCHED, that a group's state takes in: outcomes and unhealthy terminations.
_FOLDED = BOOTSTRAP_OUTCOMES | {UNHEALTHY_TERMINATION}
_EVENT_TIME = operator.attrgetter("event_timestamp")  # a group's records are taken in time order

logger = logging.getLogger("lifeguard")


@mutable
class BatchSummary(Skips):
    """What one batch did, for logs, metrics, tests and `lifeguard replay`.

    Every record is accounted for: `skipped` (not a valid record, or implausible; `skipped_reasons` says
    why, by reason: a record of a status the detection reads that names no node or group among them),
    `ignored` (valid, but of a status the detection does not read, or of a cluster outside the stack's
    ClusterIds), or used.
    """

    records: int = 0
    ignored: int = 0
    unknown_codes: int = 0
    launch_failures: int = 0
    groups: int = 0
    unreadable_groups: int = 0
    events: list[ControllerEvent] = field(default_factory=list)
    # Of `skipped`, the messages that are no scaling-log record as Lifeguard reads one (RecordsUnreadable,
    # which RecordsSkippedAlarm pages on: PCS's format changed); counted with RecordsProcessed.
    unreadable: int = 0

    def to_dict(self) -> dict[str, Any]:
        """The summary as the handler returns it."""
        return {
            "records": self.records,
            "skipped": self.skipped,
            "skipped_reasons": dict(self.skipped_reasons),
            "ignored": self.ignored,
            "unknown_codes": self.unknown_codes,
            "launch_failures": self.launch_failures,
            "groups": self.groups,
            "unreadable_groups": self.unreadable_groups,
            "events": [{"detail-type": e.detail_type, "detail": dict(e.detail)} for e in self.events],
        }


# The stream PCS writes a cluster's scaling log to (DESIGN, and PCS's user guide).
_CLUSTER_STREAM = re.compile(r"AWSLogs/PCS/(pcs_[A-Za-z0-9]{1,60})/node_lifecycle\.log")
# Any stream of a cluster's: one of another name is read as its scaling log, as before PCS's name was
# known (should PCS rename it, a format changed with it still pages RecordsSkippedAlarm), but for the
# cluster's other PCS logs (`another_pcs_log`).
_PCS_STREAM = re.compile(r"AWSLogs/PCS/(pcs_[A-Za-z0-9]{1,60})/[A-Za-z0-9][A-Za-z0-9._-]{0,200}")


def stream_cluster(log_stream: str) -> str | None:
    """The cluster whose scaling log a stream is, when it is named as PCS names it; else None."""
    found = _CLUSTER_STREAM.fullmatch(log_stream)
    return found.group(1) if found else None


def _unlisted(summary: BatchSummary, key: tuple[str, str], records: list[ScalingLogRecord]) -> None:
    """Skip the records of a group Lifeguard has no state of and PCS does not list in their cluster (no
    PCS wrote them, or the group is gone)."""
    _skip_group(
        summary, key, records, "a group its cluster does not have", f"PCS does not list it in {clip(key[0])}"
    )


def _damaged(summary: BatchSummary, key: tuple[str, str], records: list[ScalingLogRecord], why: str) -> None:
    """Skip the records of a group whose state item, or its ledger's, cannot be read (edited by hand, or
    damaged; `why` names which): the batch's other groups go on, and so do this group's next batches, each
    skipped alike until the item is mended or deleted (a state deleted starts the group afresh)."""
    said = f"{why}; mend or delete that item (pk {clip(group_key(*key), 300)})"
    _skip_group(summary, key, records, "state item unreadable", said, level=logging.ERROR)


def _skip_group(
    summary: BatchSummary,
    key: tuple[str, str],
    records: list[ScalingLogRecord],
    reason: str,
    said: str,
    *,
    level: int = logging.WARNING,
) -> None:
    """Skip the records of one group, counted by record under `reason`, said in one line."""
    summary.skipped += len(records)
    summary.skipped_reasons[reason] += len(records)
    logger.log(level, "skipped %d record(s) of group %s: %s (%s)", len(records), clip(key[1]), reason, said)


def _unlearned(
    refused: Mapping[tuple[str, str], str], by_group: Mapping[tuple[str, str], list[ScalingLogRecord]]
) -> UnlistedClusterError:
    """The error that parks a batch whose new groups' clusters PCS refused to list, in one line: what is
    held, which clusters, PCS's answer and what to grant."""
    records = sum(len(by_group[key]) for key in refused)
    clusters = sorted({(cluster, code) for (cluster, _), code in refused.items()})
    named = ", ".join(f"{clip(cluster)} ({clip(code, 100)})" for cluster, code in clusters[:5])
    more = f" and {len(clusters) - 5} more" if len(clusters) > 5 else ""
    # PCS answers a cluster id it does not have (a cluster deleted since) as it answers a missing grant.
    gone = (
        " PCS answers AccessDeniedException for a cluster id it does not have too: the records of a cluster "
        "deleted since can be let go from the queue."
        if any(code == "AccessDeniedException" for _, code in clusters)
        else ""
    )
    return UnlistedClusterError(
        f"{records} record(s) of {len(refused)} group(s) seen for the first time are held: PCS refused to "
        f"list cluster {named}{more}; grant pcs:ListComputeNodeGroups on it.{gone} The rest of the batch is "
        "done; it fails so that Lambda retries it, then parks it in the failed-batches queue to send again."
    )


def _implausible(summary: BatchSummary, record: ScalingLogRecord, where: str, now_ms: int) -> None:
    """Skip a record whose time cannot be genuine at the invocation's clock (`plausible_times`)."""
    at = record.event_timestamp
    summary.skip(f"event_timestamp {implausible_time(at, now_ms)}", where, utc(at))


class ScalingEventsHandler:
    """Detects bootstrap-failure loops per compute node group."""

    def __init__(
        self,
        store: GroupStore,
        pcs: PcsGateway,
        updater: GroupUpdater,
        defaults: DetectionSettings,
        *,
        metric: Metric | None = None,
        clock: Callable[[], float] = time.time,
        proven_good_refresh_seconds: float = 60.0,
        tag_refresh_seconds: float = 300.0,
        quarantined: Callable[[str, str], set[tuple[str, str]]] = lambda _cluster, _group: set(),
        changed_by: ChangedBy = lambda _cluster, _group, _config: None,
        held_back: HeldBack = lambda _cluster, _group, _episode, _revision: (True, None),
        clusters: frozenset[str] = frozenset(),
    ) -> None:
        self.store = store
        self.pcs = pcs
        self.updater = updater
        self.defaults = defaults
        self.metric = metric or uncounted
        self.clock = clock  # the invocation's clock, against which record times must be plausible
        self.proven_good_refresh_ms = int(proven_good_refresh_seconds * 1000)
        self.tag_refresh_ms = int(tag_refresh_seconds * 1000)
        # (stage, script) of the scripts Lifeguard's quarantines switched in a group (its ledger): a node
        # without reports proves a configuration only when none of them is still quarantined in it.
        self.quarantined = quarantined
        # Who put the group's configuration in place (CloudTrail's review, Lifeguard's ledger): a detection
        # names the change its loop began after.
        self.changed_by = changed_by
        # The remediation's decision on an episode's revision (Lifeguard's decisions): a change the cooldown
        # or the daily cap held back is decided again once the hold is over (`_past_hold`).
        self.held_back = held_back
        # Each cluster's last listing, for the proofs of later batches (`KeptListings`).
        self.listings = KeptListings()
        # The stack's ClusterIds (empty: every cluster of the account). A scaling-log group several stacks
        # deliver to holds other stacks' clusters, which this stack may not read: their records are
        # ignored, counted, not parked as a cluster PCS refused to list.
        self.clusters = clusters

    def watches(self, cluster_id: str | None) -> bool:
        """Whether the records of `cluster_id` are read: it is among the stack's ClusterIds, or the stack
        names none (every cluster of the account). A record naming no cluster is read, and judged."""
        return _other_cluster(cluster_id, self.clusters) is None

    # -- entry points --

    def handle_event(self, event: Mapping[str, Any]) -> BatchSummary:
        """One CloudWatch Logs subscription event (CONTROL_MESSAGE batches are ignored), read with Python's
        cyclic garbage collector paused. What a batch makes (its records, the states' changes, their
        writes) holds almost no reference cycle: reference counting frees it. A collection during the batch
        walks what the batch still holds (`bench/ingest.py`, 1,000 groups at batches of 1,000: 39
        collections inside the batches, 72 ms of the handler's 1 s; the run's collections freed about 100
        objects in all). The collector resumes when the batch ends, over whatever cycles it left (a batch
        is at most one PutLogEvents call's records, 1 MiB); a collector the caller had paused stays
        paused (`CollectorPause`)."""
        with collector_paused:
            return self._handle_event(event)

    def _handle_event(self, event: Mapping[str, Any]) -> BatchSummary:
        batch = data_batch(event, self.metric)
        if isinstance(batch, str):
            return BatchSummary(skipped=int(batch == "invalid"))
        cluster = stream_cluster(batch.log_stream)
        if another_pcs_log(batch.log_stream):
            return self._another_pcs_log(batch.log_stream, batch.count)
        if cluster is None and (found := _PCS_STREAM.fullmatch(batch.log_stream)) is not None:
            cluster = found.group(1)  # PCS's, renamed? Read as before, and said.
            logger.warning(
                "stream %s is read as cluster %s's scaling log, which PCS names %s",
                clip(batch.log_stream),
                cluster,
                f"AWSLogs/PCS/{cluster}/node_lifecycle.log",
            )
        if cluster is None:
            return self._refused_stream(batch.log_stream, batch.count)
        if (other := _other_cluster(cluster, self.clusters)) is not None:
            return self._unwatched_stream(other, batch.count)
        return self.handle_messages(batch.messages(), cluster=cluster, malformed=batch.malformed_events())

    def _unwatched_stream(self, cluster: str, count: int) -> BatchSummary:
        """A batch of the scaling log of a cluster outside the stack's ClusterIds (another stack's, in a
        group both deliver to): ignored, counted, said in one line."""
        summary = BatchSummary(records=count, ignored=count)
        logger.info(
            "ignored %d record(s) of cluster %s: not among the stack's ClusterIds", count, clip(cluster)
        )
        self.metric("RecordsProcessed", count)
        return summary

    @staticmethod
    def _another_pcs_log(log_stream: str, count: int) -> BatchSummary:
        """A batch of another of a cluster's PCS logs (its scheduler's, its job completions), delivered to
        the scaling log's group too: no scaling record is in it. Ignored in one line, and not counted among
        the records processed, which RecordsSkippedAlarm weighs the unreadable ones against (a busy
        scheduler's lines would hide a change of the scaling log's format)."""
        logger.info(
            "ignored %d message(s) of stream %s: another of PCS's logs, not the scaling log (%s)",
            count,
            clip(log_stream),
            "AWSLogs/PCS/<cluster-id>/node_lifecycle.log",
        )
        return BatchSummary(records=count, ignored=count)

    def _refused_stream(self, log_stream: str, count: int) -> BatchSummary:
        """A batch of a stream not named as PCS names a cluster's (`AWSLogs/PCS/<cluster-id>/<name>`, a
        cluster id of PCS's form): no PCS wrote it, and its records could name any cluster, so a writer
        held to one cluster's streams by a prefix (`AWSLogs/PCS/pcs_abc123de45*`: `…/pcs_abc123de45-x/…`),
        or to streams of its own in the scaling log's group, would reach every other. Its records are
        skipped, counted in one line."""
        summary = BatchSummary(records=count)
        reason = "stream not of PCS's form"
        summary.skipped = count
        summary.skipped_reasons[reason] = count
        logger.warning("skipped the %d message(s) of stream %s: %s", count, clip(log_stream), reason)
        self.metric("RecordsProcessed", count)
        if count:
            self.metric("RecordsSkipped", count)
        return summary

    def handle_messages(
        self,
        messages: Iterable[tuple[str, str]],
        *,
        cluster: str | None = None,
        malformed: Iterable[tuple[str, str]] = (),
    ) -> BatchSummary:
        """Log-event messages with where they came from; a bad or implausible one is logged, counted with
        its reason and skipped, and the rest of the batch goes on. A record of a status the detection never
        reads (REGISTERED, TERMINATED/SCHEDULER_REQUESTED, ...: `passed_over`) is ignored unvalidated.
        `cluster`: the cluster whose scaling log the messages are (its stream's, `stream_cluster`); a record
        naming another one is skipped: PCS writes a cluster's records to its own stream alone. `malformed`:
        `(where, what is wrong)` of the batch's log events that were not as CloudWatch Logs sends them
        (`LogBatch.malformed_events`), skipped and counted as unreadable records."""
        summary = BatchSummary()
        for where, why in malformed:
            summary.records += 1
            summary.unreadable += 1
            summary.skip(MALFORMED_LOG_EVENT, where, why)
        now_ms = int(self.clock() * 1000)
        earliest, latest = plausible_times(now_ms)
        kept: list[ScalingLogRecord] = []
        watched = self.clusters  # a record of another (another stack's) is set aside by `_handle`, uncounted
        for message, where in messages:
            summary.records += 1
            record = read_scaling_log_message(message, where=where)
            if record is None:  # passed over
                summary.ignored += 1
            elif isinstance(record, ScalingLogParseError):
                summary.unreadable += 1
                summary.skip(record.reason, where, record.message)
            elif cluster is not None and record.resource_id not in (None, cluster):
                summary.skip(
                    "another cluster's resource_id",
                    where,
                    f"names {record.resource_id}, in the scaling log of {cluster}",
                )
            elif earliest <= record.event_timestamp <= latest or _other_cluster(record.resource_id, watched):
                kept.append(record)
            else:
                _implausible(summary, record, where, now_ms)
        self._handle(kept, summary)
        return summary

    def handle_records(self, records: Iterable[ScalingLogRecord]) -> BatchSummary:
        """Parsed records (tests, benchmarks), held to the same clock."""
        summary = BatchSummary()
        now_ms = int(self.clock() * 1000)
        earliest, latest = plausible_times(now_ms)
        kept: list[ScalingLogRecord] = []
        watched = self.clusters
        for record in records:
            summary.records += 1
            if earliest <= record.event_timestamp <= latest or _other_cluster(record.resource_id, watched):
                kept.append(record)
            else:
                _implausible(summary, record, "(record)", now_ms)
        self._handle(kept, summary)
        return summary

    # -- the batch --

    def _handle(self, records: list[ScalingLogRecord], summary: BatchSummary) -> None:
        by_group: dict[tuple[str, str], list[ScalingLogRecord]] = {}
        unwatched: set[str] = set()
        watched = self.clusters  # empty: every cluster
        for record in records:
            cluster_id = record.resource_id
            if watched and (other := _other_cluster(cluster_id, watched)) is not None:
                summary.ignored += 1  # another stack's cluster (`clusters`): not counted, nor told
                unwatched.add(other)
                continue
            status, reason = record.status_code, record.reason_code
            pair = (status, reason)
            if pair not in KNOWN_PAIRS:
                summary.unknown_codes += 1
                logger.info(
                    "unknown scaling-log codes %s (%s)",
                    ", ".join(record.unknown_codes),
                    "kept as a launch" if status == "LAUNCHED" else "kept, not acted on",
                )
            if status == "LAUNCH_FAILED":
                summary.launch_failures += 1
                logger.warning(
                    "launch failure %s/%s in group %s: capacity or quota, not a script; no action",
                    record.status_code,
                    record.reason_code,
                    record.compute_node_group_id,
                )
            group_id = record.compute_node_group_id
            acted_on = status == "LAUNCHED" or pair in _FOLDED
            if acted_on and cluster_id and group_id and record.details.instance_id:
                key = (cluster_id, group_id)
                kept = by_group.get(key)
                if kept is None:
                    by_group[key] = [record]
                else:
                    kept.append(record)
            elif acted_on:  # a record of a node Lifeguard follows, that does not say which node or group
                missing = [
                    name
                    for name, value in (
                        ("resource_id", cluster_id),
                        ("compute_node_group_id", group_id),
                        ("details.instance_id", record.instance_id),
                    )
                    if not value
                ]
                summary.skip(f"{status} record without {' or '.join(missing)}", group_id or "(record)")
            else:
                summary.ignored += 1
        if unwatched:
            named = ", ".join(clip(cluster) for cluster in sorted(unwatched)[:5])
            logger.info(
                "ignored the records of %d cluster(s) not among the stack's ClusterIds: %s",
                len(unwatched),
                named,
            )
        mutations = {}
        per_cluster: dict[str, int] = {}
        for cluster_id, _ in by_group:
            per_cluster[cluster_id] = per_cluster.get(cluster_id, 0) + 1
        now_ms = int(self.clock() * 1000)
        reads = BatchReads(self.pcs, self.tag_refresh_ms, per_cluster, kept=self.listings, now_ms=now_ms)
        latest_ms = now_ms + FUTURE_SKEW_MS
        for (cluster_id, group_id), group_records in by_group.items():
            group_records.sort(key=_EVENT_TIME)
            mutations[(cluster_id, group_id)] = self._mutation(
                cluster_id, group_id, group_records, reads, latest_ms
            )
        damaged: dict[tuple[str, str], str] = {}
        if mutations:
            try:
                self.updater.update_many(mutations, unreadable=damaged, published=summary.events)
            except BaseException:  # what was published before the failure is not made again on the retry
                count_events(summary.events, self.metric)
                raise
        for key in sorted(reads.unlisted):
            _unlisted(summary, key, by_group[key])
        for key, why in sorted(damaged.items()):
            _damaged(summary, key, by_group[key], why)
        summary.groups = len(by_group) - len(reads.unlisted) - len(damaged)
        summary.unreadable_groups = len(reads.unreadable) + len(damaged)
        self.metric("RecordsProcessed", summary.records)
        if summary.skipped:
            self.metric("RecordsSkipped", summary.skipped)
        if summary.unreadable:
            self.metric("RecordsUnreadable", summary.unreadable)
        if summary.unreadable_groups:
            self.metric("GroupsUnreadable", summary.unreadable_groups)
        if summary.unknown_codes:
            self.metric("UnknownCodes", summary.unknown_codes)
        if summary.launch_failures:
            self.metric("LaunchFailures", summary.launch_failures)
        count_events(summary.events, self.metric)
        if reads.unlearned:
            raise _unlearned(reads.unlearned, by_group)

    def _mutation(
        self,
        cluster_id: str,
        group_id: str,
        records: list[ScalingLogRecord],
        reads: BatchReads,
        latest_ms: int,
    ) -> Callable[[GroupState], Change]:
        """What a batch's records do to one group's state (re-runnable: PCS is read once per batch).
        Outcomes dated after `latest_ms` (kept before times were bounded) are let go first: they would
        otherwise stay the group's newest and blind the detection."""
        batch_time = records[-1].event_timestamp
        configs_set = 0

        def refresh(state: GroupState, *, tags: bool = False, proof: bool = False) -> bool:
            nonlocal configs_set
            if proof and not tags and reads.proof_waits(state):
                return False
            current = reads.current(state, batch_time, tags=tags, proof=proof)
            if current is None:
                return False
            if not current.confirms(state.config):  # more than when it was confirmed
                configs_set += 1
            state.config = current
            return True

        def mutate(state: GroupState) -> Change:
            nonlocal configs_set
            configs_before, proofs_before = configs_set, (state.proven_good, state.proven_before)
            learned = False
            if state.version == 0:  # no state of it stored yet: only a group PCS lists gets one
                listed = reads.listed(state, batch_time)
                if listed is None:
                    return Change()
                state.config, learned = listed, True
                configs_set += 1
            if self._settings(state).mode == "off":
                # Its records are not kept; its tags are read again (at most every tag_refresh_ms of event
                # time, on a failure), so a group whose tag was taken off is watched again.
                if not self._tags_due(state, records):
                    return Change(changed=learned)
                refreshed = refresh(state, tags=True)
                if self._settings(state).mode == "off":
                    return Change(changed=refreshed or learned)
            change = Change(changed=state.forget_after(latest_ms) or learned)
            fold = RecordFolder(state)
            runs = GroupEvidence(self.store, state)
            # Beyond the launches and outcomes, a batch changes a state only through an episode (open
            # before, or opened now), a configuration read that found more than the group as it was, a
            # proof, or an unhealthy termination.
            beyond_maps = state.episode is not None
            late_launches: list[ScalingLogRecord] = []  # LAUNCHED records of nodes already seen ACTIVE
            # The episode's revision as the batch found it: the one whose remediation decision may be made
            # by now, read at most once a batch (`_past_hold`); one this batch announces is decided later.
            hold = _HoldCheck(state.episode) if state.episode is not None else None
            # Record by record, in time order: a batch that holds a whole loop and its end reports both, as
            # the same records delivered one by one would.
            for record in records:
                known = state.outcomes.get(record.details.instance_id or "")
                failure = record.is_bootstrap_failure
                if failure and _awaiting(state):
                    # A success waiting to be seen to stay up is judged at this failure's time first: a
                    # failure after its wait is over is another loop's, not this one's going on.
                    self._settle(
                        state,
                        refresh,
                        change,
                        runs,
                        now_ms=record.event_timestamp,
                        failing=record.instance_id,
                    )
                if not fold(record):
                    if record.is_bootstrap_success and known is not None and not known.succeeded:
                        # Its ACTIVE delivered after its failure: it failed after ACTIVE all the same (a
                        # nodeReady script under TERMINATE), as had the records come in PCS's order.
                        change.changed |= _note_failed_after_active(state, record.instance_id or "")
                    continue
                change.changed = True
                launched = record.status_code == "LAUNCHED"
                # A LAUNCHED delivered after its node's unhealthy termination says the node was fresh: the
                # termination may count for a replacement loop now, as when it came.
                late_unhealthy = launched and record.details.instance_id in state.unhealthy
                # Most records are a node's first: its launch, or its success outside a loop. Nothing below
                # acts on those (a success proves its configuration after the records: `_prove_good`).
                if (
                    known is None
                    and not late_unhealthy
                    and (launched or (state.episode is None and record.is_bootstrap_success))
                ):
                    continue
                if known is not None and known.succeeded and launched:
                    late_launches.append(record)
                unhealthy = record.is_unhealthy_termination or late_unhealthy
                # A node ACTIVE, then failing (in nodeReady, under TERMINATE): its success read the
                # configuration just before, so the failure is looked at on what that read found.
                failed_after_active = failure and known is not None and known.succeeded
                beyond_maps |= unhealthy
                # A LAUNCHED delivered after its node's failure says which configuration the node ran: the
                # failure may count now, as when it came.
                late_launch = _launch_of_a_failure(state, record)
                reopened = (
                    failed_after_active
                    and state.episode is None
                    and self._reopen(state, record.instance_id or "", change)
                )
                if (failure or late_launch) and state.episode is None:
                    self._detect(state, refresh, change, runs)
                elif not reopened and (
                    (failure and self._may_have_changed(state, record))
                    or ((failed_after_active or late_launch) and _changed(state))
                    or (failure and _a_loop_of_the_same_configuration(state, self._settings(state)))
                ):
                    self._detect_again(state, refresh, change, runs)
                elif record.is_bootstrap_success and state.episode is not None:
                    self._settle(state, refresh, change, runs, judged=record.instance_id)
                if failure and state.episode is not None:
                    self._bear_out(state, change, runs)
                    self._past_hold(state, record, change, runs, hold)
                if failed_after_active:
                    _note_failed_after_active(state, record.instance_id or "")
                if unhealthy:
                    self._detect_replacement(state, refresh, change, runs)
            if state.episode is not None and state.episode.resumed_in_hold is not None:
                self._tell_held_containment(state, change, runs, records[-1].event_timestamp)
            # A detection PCS's refusal of the group's read held back (of either loop) is made by the next
            # batch holding any record of the group (its redelivery too: its failures are stored, and fold
            # no more), not only by its next failure, a cycle later.
            was_due = state.detection_due
            if was_due and state.episode is None:
                self._detect(state, refresh, change, runs)
                if state.episode is None:
                    self._detect_replacement(state, refresh, change, runs)
            due = (
                state.episode is None
                and (cluster_id, group_id) in reads.unreadable
                and (was_due or any(r.is_bootstrap_failure or r.is_unhealthy_termination for r in records))
            )
            if due != was_due:
                state.detection_due = due
                change.changed = beyond_maps = True
            if state.episode is not None and change.changed:
                # A success waiting for its reports, too long; a node kept past the reports' grace, listed.
                self._settle(state, refresh, change, runs)
            # A proof made now is held to the batch's records too: a node ACTIVE, then failures of the same
            # configuration in the same batch, proved a configuration that had looped since.
            change.changed |= self._prove_good(state, records, refresh, runs, late_launches)
            change.changed |= revoke_proof_of_older_launch(state, records)
            change.changed |= revoke_proof_of_failed_node(state)
            change.changed |= revoke_proof_of_looped_config(state)
            proved = proofs_before[0] is not state.proven_good or proofs_before[1] is not state.proven_before
            beyond_maps |= proved or state.episode is not None or configs_set != configs_before
            change.maps_only = not beyond_maps
            return change

        return mutate

    def _tags_due(self, state: GroupState, records: list[ScalingLogRecord]) -> bool:
        """Whether a batch of a group tagged off reads its tags again: it holds a failure, and the tags
        were last read `tag_refresh_ms` of event time before it, or never."""
        if not any(r.is_bootstrap_failure or r.is_unhealthy_termination for r in records):
            return False
        config = state.config
        return config is None or records[-1].event_timestamp - config.tags_checked_at >= self.tag_refresh_ms

    def _settle(
        self,
        state: GroupState,
        refresh: Callable[..., bool],
        change: Change,
        runs: GroupEvidence,
        *,
        now_ms: int | None = None,
        failing: str | None = None,
        judged: str | None = None,
    ) -> None:
        """The success that ends the open episode, if any: contained when its node reported a failed script
        for that boot, resolved when it reported none, or (its node reported nothing) resolved unless that
        proves nothing yet (`_proves_nothing`) or it waits to be seen to stay up (`awaits_ready_checks`, at
        `now_ms`, the group's newest event time unless given). Not the success of `failing`, whose failure
        is about to be taken in: it did not stay up. Then the loop's next successes, while a node would be
        kept and is not yet (`kept_not_yet`: the next ends nothing on its own word, only on its reports) or
        once one is kept (another may be up too); nodes up before the loop's last failure are judged first,
        for containment only (`to_settle`: `judged`, the success record's node, is judged past the first
        ten)."""
        settings = self._settings(state)

        def prepare(success: BootOutcome, may_resolve: bool) -> tuple[BootRuns, int, bool] | None:
            if success.instance_id == failing:
                return None
            boot = runs.of(success)
            # What did it boot? Read when its reports cannot say (a quarantine, a drain step may be gone
            # from the configuration as last read), or when it may wait (`awaits_ready_checks` needs it).
            if boot.failed or not boot.reported or _awaiting(state):
                change.changed |= self._read_launched_config(state, success, refresh)
            at_ms = newest_event_ms(state) if now_ms is None else now_ms
            # A node whose runs went unread (`BootRuns.read`) did not report nothing: it ends nothing in
            # this batch, and is judged at the group's next, its reads made afresh.
            unreported = (
                may_resolve
                and boot.read
                and not boot.failed
                and not self._proves_nothing(state, success, boot, at_ms)
            )
            return boot, at_ms, unreported

        listed = len(state.episode.kept) if state.episode is not None else 0
        settled = settle_in_turn(
            state,
            settings,
            to_settle(state, resolving(state, settings), (judged,) if judged is not None else ()),
            prepare,
            # Asked (the ledger read) only for a node kept with a failure: whose quarantine keeps it.
            lambda: state.config is not None and self._holds_quarantine(state, state.config),
        )
        change.events.extend(settled)
        change.changed |= bool(settled) or (state.episode is not None and len(state.episode.kept) != listed)

    def _reopen(self, state: GroupState, instance_id: str, change: Change) -> bool:
        """A node PCS logged ACTIVE failed after all (a nodeReady script under TERMINATE): the episode its
        success had ended is open again (`reopen_after_ready_failure`), told once; whether it was."""
        outcome = state.outcomes.get(instance_id)
        reopened = reopen_after_ready_failure(state, self._settings(state), outcome) if outcome else []
        change.events.extend(reopened)
        change.changed |= bool(reopened)
        return bool(reopened)

    @staticmethod
    def _read_launched_config(state: GroupState, success: BootOutcome, refresh: Callable[..., bool]) -> bool:
        """Read the group again when the success's node launched after the last read (what did it boot:
        Lifeguard's quarantine, its drain step?); whether the state changed."""
        launched = state.launched_at(success) or success.event_timestamp
        if state.config is None or state.config.checked_at < launched:
            return refresh(state)
        return False

    def _proves_nothing(self, state: GroupState, success: BootOutcome, boot: BootRuns, at_ms: int) -> bool:
        """A success whose node has sent no report yet, in a group whose nodes ship reports, while the
        configuration may hide a failure (`hides_failures`: a script under STOP_SEQUENCE, Lifeguard's or
        the owner's, or Lifeguard's drain step): PCS logs such a script's failure as BOOTSTRAP_SUCCESS, so it
        ends nothing yet; its reports, when they come, contain or resolve the episode (node_reports). A node
        silent for `REPORTS_GRACE_MS` after its success, or a group whose nodes send no reports at all, is
        judged on the success alone, as before reports existed."""
        episode = state.episode
        if boot.reported or state.config is None or episode is None or "node_reports" not in episode.signals:
            return False
        if at_ms - success.event_timestamp > REPORTS_GRACE_MS:  # event time: a late delivery ends no wait
            return False
        return hides_failures(state.config.node_lifecycle_actions)

    def _holds_quarantine(self, state: GroupState, config: KnownConfig) -> bool:
        """`holds_quarantine` of the configuration, Lifeguard's ledger read only when it is asked."""
        return holds_quarantine(
            config.node_lifecycle_actions, lambda: self.quarantined(state.cluster_id, state.group_id)
        )

    def _first_look(self, state: GroupState) -> DetectionSettings:
        """The settings a rule first looks with: the group's once its tags were read; before, the stack's
        with the least threshold a tag may ask, so that a group tagged to loop sooner than the stack's
        Threshold is read, and judged by its tags, at its own count, not the stack's. Within the stack's
        window: two failures days apart read no group (one PCS refuses would be asked at every batch)."""
        config = state.config
        if config is not None and config.tags_checked_at > 0:
            return self._settings(state)
        stack = self.defaults
        return DetectionSettings(stack.mode, min(stack.threshold, TAG_THRESHOLD_LEAST), stack.window_minutes)

    def _settings(self, state: GroupState) -> DetectionSettings:
        if state.config is None:
            return self.defaults
        settings, problems = self.defaults.with_tags(state.config.tags)
        for problem in problems:
            logger.warning("group %s: %s; using %s", state.group_id, problem, settings)
        return settings

    def _prove_good(
        self,
        state: GroupState,
        records: list[ScalingLogRecord],
        refresh: Callable[..., bool],
        runs: GroupEvidence,
        late_launches: list[ScalingLogRecord],
    ) -> bool:
        """Store the configuration a successful node was launched with as the group's proven-good one (the
        rule: `detection.proven_good`), reading PCS first only when `detection.needs_fresh_config` says. A
        LAUNCHED delivered after its node's success (`late_launches`, each the first of its node) stands for
        that success: the launch time it brings may let it prove now, as had the records come in order;
        the batch's own successes go after them, newest last, and are looked at first."""
        successes = [r for r in records if r.is_bootstrap_success and r.instance_id]
        if late_launches:
            successes = late_launches + successes
        if not successes:
            return False
        changed = False
        if needs_fresh_config(state, successes, self.proven_good_refresh_ms):
            changed = refresh(state, proof=True)
        config = state.config
        # A configuration learned from a listing proves nothing yet: its actions are read in a later batch.
        if config is None or not config.actions_read:
            return changed
        actions = config.node_lifecycle_actions
        proof = proven_good(
            state, successes, config, lambda outcome: proof_evidence(actions, runs.of(outcome))
        )
        if proof is None:
            return changed
        state.prove(proof)
        logger.info(
            "group %s: configuration %s proven good by %s (%s)",
            state.group_id,
            proof.fingerprint[:12],
            proof.instance_id,
            proof.evidence,
        )
        return True

    def _confirmed(
        self,
        state: GroupState,
        refresh: Callable[..., bool],
        change: Change,
        rule: Callable[[GroupState, DetectionSettings, int | None, bool], Detection | None],
    ) -> tuple[DetectionSettings, KnownConfig, Detection] | None:
        """A detection `rule` (state, settings, the configuration's modifiedAt, whether that is only what was
        last known) that fires on what is known, confirmed against the group read fresh from PCS (its
        modifiedAt and tags): the one PCS read a detection costs, and none when the rule does not fire on
        what is known. Before the group's tags were first read, what is known is judged on the least
        threshold a tag may ask (`_first_look`)."""
        cached = state.config.modified_at if state.config else None
        if rule(state, self._first_look(state), cached, True) is None:
            return None
        if not refresh(state, tags=True):
            return None
        change.changed = True
        settings, config = self._settings(state), state.config
        if settings.mode == "off" or config is None:
            return None
        detection = rule(state, settings, config.modified_at, False)
        return (settings, config, detection) if detection is not None else None

    def _detect(
        self, state: GroupState, refresh: Callable[..., bool], change: Change, runs: GroupEvidence
    ) -> None:
        since = state.last_episode.resolved_at if state.last_episode else None
        # What is known of the configuration holds until it was last confirmed (`checked_at`).
        confirmed = self._confirmed(
            state,
            refresh,
            change,
            lambda s, t, m, cached: detect(
                s, t, m, since, cached=cached, known_until=s.config.checked_at if s.config else None
            ),
        )
        if confirmed is None:
            return
        settings, config, detection = confirmed
        episode = Episode(
            episode_id=episode_id_for(state.cluster_id, state.group_id, detection),
            kind=detection.kind,
            opened_at=detection.latest,
            config_modified_at=config.modified_at,
            config_fingerprint=config.fingerprint,
            failures=list(detection.failures),
            signals=["scaling_log"],
        )
        episode.changed_by = self.changed_by(state.cluster_id, state.group_id, config)
        reason = "; ".join(
            part for part in (_attribute(state, episode, runs), change_sentence(episode.changed_by)) if part
        )
        state.episode = episode
        names = ", ".join(f"{f.instance_id} at {utc(f.event_timestamp)}" for f in episode.failures)
        logger.warning("group %s: %s detected (%s)", state.group_id, detection.kind, names)
        change.events.append(
            episode_event("BootstrapLoopDetected", state, episode, settings, reason=reason or None)
        )

    def _bear_out(self, state: GroupState, change: Change, runs: GroupEvidence) -> None:
        """An episode the node reports opened, once the scaling log bears it out: its own loop rule fires on
        the episode's configuration. Any node can write reports, and only PCS writes the scaling log, so
        remediation acts on an episode only with this signal (`rails.not_borne_out`): it is added, and the
        episode announced again at its next revision (a contained one is not: nothing is left to do). The
        evidence becomes the scaling log's failures, and the suspect is named again from their nodes'
        reports: what reports of other instances said (forged, for all anyone knows) decides nothing."""
        episode = state.episode
        assert episode is not None
        if "scaling_log" in episode_signals(episode):
            return
        settings = self._settings(state)
        since = state.last_episode.resolved_at if state.last_episode else None
        detection = detect(state, settings, episode.config_modified_at, since)
        if detection is None:
            return
        episode.add_signal("scaling_log")
        if episode.contained_at is not None:
            return
        episode.signals = ["scaling_log"]  # node_reports again only if its nodes' reports bear it out
        reason = (
            f"the scaling log bears out the loop the node reports found: {len(detection.failures)} instances "
            f"TERMINATED/BOOTSTRAP_FAILED within {settings.window_minutes} min"
        )
        _told_again(state, detection, settings, runs, change, reason=reason)

    def _past_hold(
        self,
        state: GroupState,
        record: ScalingLogRecord,
        change: Change,
        runs: GroupEvidence,
        hold: _HoldCheck | None,
    ) -> None:
        """A failure of an open loop whose remediation the cooldown or the daily cap held back: once the hold
        is over, the loop going on is announced again, at the episode's next revision, so remediation
        decides again (held back, not let go: a loop left alone after a page nobody answered burns
        instances all night). The decision is read once per revision (again on later failures while it is
        not made yet, at most once a batch, and not in the batch that announced it); a contained episode,
        or one the scaling log does not bear out, has nothing for remediation to decide."""
        episode = state.episode
        assert episode is not None
        if episode.contained_at is not None or "scaling_log" not in episode_signals(episode):
            return
        if episode.hold_read != episode.revision:
            if hold is None or hold.asked or hold.revision != (episode.episode_id, episode.revision):
                return  # a revision this batch announced is decided after it
            hold.asked = True
            if not self._decided(state, episode, change):
                return
        held_until = episode.held_until
        if held_until is None or record.event_timestamp <= held_until:
            return  # the rails hold a change up to that time itself
        settings = self._settings(state)
        since = state.last_episode.resolved_at if state.last_episode else None
        detection = detect(state, settings, episode.config_modified_at, since)
        if settings.mode == "off" or detection is None:
            return  # nothing to decide again now (the group is left alone, or its failures are no loop)
        episode.held_until = None
        change.changed = True
        reason = (
            f"the loop went on after the hold on Lifeguard's change ended at {utc(held_until)}: "
            f"{len(detection.failures)} instances TERMINATED/BOOTSTRAP_FAILED within "
            f"{settings.window_minutes} min, on the same configuration; decided again"
        )
        _told_again(state, detection, settings, runs, change, reason=reason)

    def _tell_held_containment(
        self, state: GroupState, change: Change, runs: GroupEvidence, latest_ms: int
    ) -> None:
        """A loop contained again in the hold its resumption was told in was listed, not told
        (`Episode.resumed_in_hold`): at the group's first record after that hold, the containment is told,
        or the last word would stay that the loop resumed."""
        episode = state.episode
        assert episode is not None
        hold_end = episode.resumed_in_hold
        if hold_end is None or latest_ms <= hold_end:
            return
        told_here = episode.in_told_hold()
        episode.resumed_in_hold = None
        change.changed = True
        contained_at = episode.contained_at
        if not told_here or contained_at is None or contained_at > hold_end:
            # The episode moved on since (another revision told its own word), it loops (decided again at its
            # failure after the hold), or it was told when it was kept.
            return
        # The newest kept node still up (PCS may have ended one since), with its script still failing; one
        # whose reports say PCS is ending it only when no other is (told once: a report, true or forged,
        # must not keep the containment untold for good).
        chosen: tuple[BootOutcome, list[NodeReport]] | None = None
        for instance in reversed(episode.kept):
            outcome = state.outcomes.get(instance)
            if outcome is None or not outcome.succeeded:
                continue
            if replaced_since_up(state, outcome):
                continue
            boot = runs.of(outcome)
            failing = still_failing(boot.failed, episode.suspect, booted_actions(state, outcome))
            if not failing:
                continue
            if not reports_its_end(state, outcome, boot.failed, kept=True):
                chosen = (outcome, failing)
                break
            chosen = chosen or (outcome, failing)  # the newest reported ending, if no other is up
        if chosen is None:
            logger.info(
                "group %s: its loop, contained while Lifeguard's change was held back, is not told contained "
                "after the hold: no kept node of it is known to be up with its script failing",
                state.group_id,
            )
            return
        kept, failing = chosen
        config = state.config
        late = f" It was kept while Lifeguard's change was held back (to {utc(hold_end)}), told now."
        change.events.extend(
            contain(
                state,
                self._settings(state),
                kept,
                failing,
                late,
                lifeguards=config is not None and self._holds_quarantine(state, config),
            )
        )

    def _taken_in_hold(
        self, state: GroupState, episode: Episode, detection: Detection, runs: GroupEvidence, change: Change
    ) -> bool:
        """Whether a contained loop resuming on the same configuration is taken into the episode untold: the
        remediation holds Lifeguard's change back (the cooldown, the daily cap) past its failures, and a
        resumption of this hold was told already, naming the script these reports name or they name none.
        Told at each turn (a kept node up, then failing in nodeReady, the next failing) with its containment
        and a skip, it paged every 12 minutes all night; each script named is told once in a hold, and the
        loop's first failure after the hold is decided again. A resumption told is noted (False)."""
        if not self._decided(state, episode, change):
            return False
        held_until = episode.held_until
        if held_until is None or detection.latest > held_until:
            return False
        named = _named_script(state, detection, runs)
        told = episode.in_told_hold() and episode.resumed_in_hold == held_until
        if told and (named is None or named in episode.told_in_hold):
            episode.contained_at = None
            episode.failures = list(detection.failures)
            change.changed = True
            logger.info(
                "group %s: the contained loop resumes again while Lifeguard's change is held back until %s: "
                "told again only after that",
                state.group_id,
                utc(held_until),
            )
            return True
        if not told:
            episode.told_in_hold = []
        episode.resumed_in_hold, episode.resumed_revision = held_until, episode.revision + 1
        if named is not None and len(episode.told_in_hold) < TOLD_IN_HOLD_MAX:
            episode.told_in_hold.append(named)  # told by the caller, at that revision
        return False

    def _decided(self, state: GroupState, episode: Episode, change: Change) -> bool:
        """Whether the remediation decided on the episode's revision: read once per revision (`HeldBack`),
        kept with until when it held Lifeguard's change back (`Episode.held_until`)."""
        if episode.hold_read == episode.revision:
            return True
        group = (state.cluster_id, state.group_id)
        decided, until = self.held_back(*group, episode.episode_id, episode.revision)
        if decided:
            episode.hold_read, episode.held_until = episode.revision, until
            change.changed = True
        return decided

    def _detect_replacement(
        self, state: GroupState, refresh: Callable[..., bool], change: Change, runs: GroupEvidence
    ) -> None:
        """Nodes of the current configuration replaced as unhealthy, again and again: a `replacement` loop,
        a new episode, or a new revision of the open one (a drain/replace loop after a quarantine kept and
        drained its nodes). Only unhealthy terminations after the last such detection count again. A new
        episode whose replaced nodes all reported every nodeBootstrapped script run and none failed is no
        drain/replace loop (Lifeguard's drain step drains a node only after a failed script): it says so
        (`Episode.no_script_failed`), and remediation leaves the drain step in place."""
        episode = state.episode
        if episode is not None and episode.replacement_revision is not None and episode.unhealthy:
            since: int | None = max(f.event_timestamp for f in episode.unhealthy)
        elif episode is None and state.last_episode is not None:
            since = state.last_episode.resolved_at
        else:
            since = None
        confirmed = self._confirmed(
            state, refresh, change, lambda s, t, m, _: detect_replacement(s, t, m, since)
        )
        if confirmed is None:
            return
        settings, config, detection = confirmed
        drained = drains_kept_nodes(config.node_lifecycle_actions)
        booted_clean = episode is None and drained and runs.no_script_failed(detection.failures)
        if booted_clean:
            why = (
                ": their reports show every nodeBootstrapped script ran and none failed, so Lifeguard's "
                "drain step drained none of them"
            )
        elif drained:
            why = ": PCS replaces the nodes Lifeguard's drain step drains, a drain/replace loop"
        else:
            why = ""
        reason = (
            f"{len(detection.failures)} instances launched on the current configuration were terminated as "
            f"unhealthy (TERMINATED/UNHEALTHY_NODE) within {settings.window_minutes} min{why}"
        )
        if episode is None:
            episode = Episode(
                episode_id=episode_id_for(state.cluster_id, state.group_id, detection),
                kind="replacement",
                opened_at=detection.latest,
                failures=list(detection.failures),
                signals=["scaling_log"],
                replacement_revision=1,
                no_script_failed=booted_clean,
            )
            state.episode = episode
        else:
            episode.revision += 1
            episode.replacement_revision = episode.revision
        episode.unhealthy = list(detection.failures)
        episode.config_modified_at = config.modified_at
        episode.config_fingerprint = config.fingerprint
        logger.warning("group %s: replacement loop: %s", state.group_id, reason)
        change.events.append(
            episode_event("BootstrapLoopDetected", state, episode, settings, reason=reason or None)
        )

    def _may_have_changed(self, state: GroupState, record: ScalingLogRecord) -> bool:
        """Whether the configuration is worth reading again for an open episode: at most once per
        refresh interval of event time, so a group that keeps failing costs one PCS read a minute."""
        config = state.config
        return config is None or record.event_timestamp - config.checked_at >= self.proven_good_refresh_ms

    def _detect_again(
        self, state: GroupState, refresh: Callable[..., bool], change: Change, runs: GroupEvidence
    ) -> None:
        """An open episode whose loop goes on under a newer configuration (a remediation that did not
        work, or another broken change): the episode is detected again, as a new revision, so remediation
        can escalate. Failures of nodes launched before the change never count. An open replacement loop
        whose nodes now fail to bootstrap on the same configuration (a script's object overwritten in place),
        or an open intermittent episode whose failures now come in a row, is detected again too, on the
        failures after its own (`_new_failures_since`)."""
        episode = state.episode
        assert episode is not None
        if not refresh(state, tags=True):
            return
        config = state.config
        if config is None:
            return
        since = None
        if config.modified_at == episode.config_modified_at:
            since = _new_failures_since(episode)
            if since is None:
                return
        suspect = episode.suspect
        if (
            since is None
            and episode.contained_at is not None
            and suspect is not None
            and not holds_script(config.node_lifecycle_actions, suspect.stage, suspect.script)
        ):
            # The contained loop's script is gone from the configuration: that loop is over. What fails
            # now is a new loop of the new configuration, a new episode.
            change.changed = True
            episode.resolved_at = config.modified_at
            settings = self._settings(state)
            reason = (
                f"the configuration of {utc(config.modified_at)} no longer holds {suspect.stage} › "
                f"{suspect.script}"
            )
            change.events.append(episode_event("LoopResolved", state, episode, settings, reason=reason))
            state.last_episode, state.episode = episode, None
            self._detect(state, refresh, change, runs)
            return
        settings = self._settings(state)
        detection = detect(state, settings, config.modified_at, since)
        if settings.mode == "off" or detection is None:
            return
        contained = since is not None and episode.contained_at is not None
        if since is not None and (episode.kind == "intermittent" or contained) and detection.kind != "loop":
            return  # the same intermittent failures, or a contained loop's: the episode already says so
        if contained and self._taken_in_hold(state, episode, detection, runs, change):
            return
        was = episode.kind
        change.changed = True
        episode.contained_at = None  # failing again on fresh instances: not contained (its kept stay listed)
        episode.config_modified_at = config.modified_at
        episode.config_fingerprint = config.fingerprint
        episode.failures = list(detection.failures)
        # What fails now is what the rule found (a replacement loop's nodes now failing to bootstrap are a
        # loop of scripts again, which remediation switches or reverts).
        episode.kind = detection.kind
        episode.replacement_revision = None
        episode.add_signal("scaling_log")  # the scaling log's own rule fired
        _attribute(state, episode, runs)
        episode.revision += 1
        if since is None:  # the change it went on after is named, as the one it began after was
            episode.changed_by = self.changed_by(state.cluster_id, state.group_id, config)
            reason = change_sentence(episode.changed_by, went_on=episode.kind) or (
                f"the {episode.kind} went on after the configuration changed at {utc(config.modified_at)}"
            )
        elif contained:
            reason = (
                f"the group loops again after its loop was contained: {len(detection.failures)} instances "
                f"TERMINATED/BOOTSTRAP_FAILED in a row within {settings.window_minutes} min, on the same "
                "configuration"
            )
        elif was == "intermittent":
            reason = (
                f"the intermittent failures became a loop: {len(detection.failures)} instances "
                f"TERMINATED/BOOTSTRAP_FAILED in a row within {settings.window_minutes} min, on the same "
                "configuration"
            )
        else:
            reason = (
                "the nodes of the replacement loop now fail to bootstrap: "
                f"{len(detection.failures)} instances TERMINATED/BOOTSTRAP_FAILED within "
                f"{settings.window_minutes} min, on the same configuration"
            )
        logger.warning("group %s: %s", state.group_id, reason)
        change.events.append(episode_event("BootstrapLoopDetected", state, episode, settings, reason=reason))


class _HoldCheck:
    """The open episode's revision (id, revision) as a batch found it, and whether the batch read its
    remediation decision (`ScalingEventsHandler._past_hold`)."""

    __slots__ = ("asked", "revision")

    def __init__(self, episode: Episode) -> None:
        self.revision = (episode.episode_id, episode.revision)
        self.asked = False


def _other_cluster(cluster_id: str | None, watched: frozenset[str]) -> str | None:
    """`cluster_id` when it is a cluster outside the stack's ClusterIds (`watched`; empty: none is)."""
    return cluster_id if watched and cluster_id is not None and cluster_id not in watched else None


def _new_failures_since(episode: Episode) -> int | None:
    """For an open episode whose configuration is unchanged, the time after which its nodes' bootstrap
    failures are a loop it does not tell yet (None: there is none to look for). A replacement loop whose
    nodes now fail to bootstrap (a script's object overwritten in place): else no success would ever end
    it. An intermittent episode whose failures come in a row now: it ends only after three successes in a
    row, which a static group that is whole again never boots, and a loop a day later would go untold. A
    contained episode: its kept nodes stay up, and a loop of fresh instances since (another script broken
    in place, a kept node's failure in nodeBootstrapped written by someone else) is not the one it tells."""
    if episode.contained_at is not None:
        return episode.contained_at
    if episode.kind == "replacement" and episode.unhealthy:
        return max(f.event_timestamp for f in episode.unhealthy)
    if episode.kind == "intermittent" and episode.failures:
        return max(f.event_timestamp for f in episode.failures)
    return None


def _a_loop_of_the_same_configuration(state: GroupState, settings: DetectionSettings) -> bool:
    """Whether the open episode's failures since its own (`_new_failures_since`) are a loop it does not
    tell yet, on the configuration it opened on as far as is known: told at once (the configuration is read
    to confirm it), not only once the configuration is due to be read again, so records delivered
    together tell it as records delivered one by one do."""
    episode, config = state.episode, state.config
    if episode is None or config is None or config.modified_at != episode.config_modified_at:
        return False
    since = _new_failures_since(episode)
    if since is None:
        return False
    found = detect(state, settings, config.modified_at, since, cached=True)
    # An intermittent episode, or a contained one, is told again for a loop only (failures in a row): a
    # contained one's kept nodes come up between its fresh failures, and say the script fails already.
    again_for_a_loop = episode.kind == "intermittent" or episode.contained_at is not None
    return found is not None and (not again_for_a_loop or found.kind == "loop")


def _named_script(state: GroupState, detection: Detection, runs: GroupEvidence) -> str | None:
    """`stage/name` of the script the reports of a detection's failures name (what the attribution weighs:
    failures under TERMINATE of the configuration's scripts, as it runs them), or None when they name none
    (none reported, or they contradict each other: any node can write a report)."""
    instances = [failure.instance_id for failure in detection.failures]
    failing = runs.reports_of(instances)
    config = state.config
    if config is not None and config.actions_read:
        failing = as_configured(failing, config.node_lifecycle_actions or {})
    suspect, _ = attribute(detection.failures, failing, known_scripts(state))
    return None if suspect is None else f"{suspect.stage}/{suspect.script}"


def _told_again(
    state: GroupState,
    detection: Detection,
    settings: DetectionSettings,
    runs: GroupEvidence,
    change: Change,
    *,
    reason: str,
) -> None:
    """The open episode told again at its next revision, on `detection` (its kind and failures, its
    suspect named from the reports): `reason`, and what the reports say when they name no script."""
    episode = state.episode
    assert episode is not None
    episode.kind = detection.kind
    episode.failures = list(detection.failures)
    said = _attribute(state, episode, runs)
    episode.revision += 1
    logger.warning("group %s: %s", state.group_id, reason)
    reason = f"{reason}; {said}" if said else reason
    change.events.append(episode_event("BootstrapLoopDetected", state, episode, settings, reason=reason))


def _awaiting(state: GroupState) -> bool:
    """Whether the open episode's successes may wait to be seen to stay up (`awaits_ready_checks`)."""
    return state.episode is not None and state.episode.failed_after_active_on is not None


def _note_failed_after_active(state: GroupState, instance_id: str) -> bool:
    """A node PCS logged ACTIVE failed after all, in the open loop: when it booted the configuration as
    known, the loop's nodes on it are not taken at their ACTIVE from now on (`awaits_ready_checks`).
    Whether the episode changed."""
    episode, outcome = state.episode, state.outcomes.get(instance_id)
    if episode is None or state.config is None or not outcome or not booted_current(state, outcome):
        return False
    changed = episode.failed_after_active_on != state.config.modified_at
    episode.failed_after_active_on = state.config.modified_at
    return changed


def _changed(state: GroupState) -> bool:
    """Whether the open episode's group has a configuration newer than the one the episode opened on."""
    episode, config = state.episode, state.config
    return episode is not None and config is not None and config.modified_at != episode.config_modified_at


def _launch_of_a_failure(state: GroupState, record: ScalingLogRecord) -> bool:
    """Whether the record is the LAUNCHED of an instance whose bootstrap failure came first."""
    if record.status_code != "LAUNCHED":
        return False
    outcome = state.outcomes.get(record.instance_id or "")
    return outcome is not None and not outcome.succeeded


def _attribute(state: GroupState, episode: Episode, runs: GroupEvidence) -> str | None:
    """Name the episode's failing script from the node reports (one of the group's configuration), or say
    that none failed or none reported; the sentence for the detection's `reason` (None when a script is
    named)."""
    failing = runs.reports_of(failure.instance_id for failure in episode.failures)
    scripts = known_scripts(state)
    booted = as_booted(state, episode, failing)
    episode.suspect, episode.also_failing = attribute(episode.failures, booted, scripts)
    episode.no_script_failed = episode.suspect is None and runs.no_script_failed(episode.failures)
    if episode.suspect is not None or episode.no_script_failed:
        episode.add_signal("node_reports")
    if episode.no_script_failed:
        return (
            "no script failed on these nodes: their reports show every lifecycle script they ran "
            "succeeded, so the boot failed elsewhere (the PCS agent, slurmd or the AMI)"
        )
    if episode.suspect is None:
        instances = {failure.instance_id for failure in episode.failures}
        failed = [
            run
            for run in failing
            if run.failed
            and run.instance_id in instances
            and (scripts is None or (run.stage, run.script) in scripts)
        ]
        if failed and all(run.on_error != "TERMINATE" for run in failed):
            last = max(failed, key=lambda run: (run.boot, run.ended_or_started_at))
            return (
                "no node report named a script failing under TERMINATE: the failing nodes reported only "
                f"failures that leave a node up (last {last.stage}/{last.script} under {last.on_error}), "
                "so the boot failed elsewhere or its report never left the node"
            )
        return "no node report named a failing script (are the nodes shipping reports?)"
    return None
