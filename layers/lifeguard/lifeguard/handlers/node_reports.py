"""The node_reports Lambda's logic: store each script run, name the suspect of open episodes, and detect a
loop from the reports alone.

A detection made before the reports arrived is enriched when they arrive: the episode's suspect is set
and BootstrapLoopDetected is published again with the same episode id and the next revision. More reports
for the same script update the evidence quietly: a new event only when the suspect changes.

Scaling-log delivery is opt-in: in a group whose scaling log is not delivered (Lifeguard knows none of its
launches), `threshold` instances reporting a failure of the same script the configuration runs under
TERMINATE, within the window, are a loop on their own (kind `loop`, signals `node_reports`). The group's
configuration is read from PCS first (reports carry no fingerprint), and only runs started after its
`modifiedAt` count. Any node can write any report, so such a loop is announced, never acted on: remediation
waits until the scaling log bears it out (`scaling_log` among its signals). Where the scaling log is
delivered, it alone opens loops, and the reports name the failing script.
"""

from __future__ import annotations

import logging
import time
from collections import Counter, defaultdict
from collections.abc import Callable, Iterable, Mapping
from dataclasses import field
from operator import attrgetter
from typing import Any

from lifeguard.attribution import (
    as_booted,
    attribute,
    contradicted,
    find_suspect,
    known_scripts,
    launched_instances,
    reported_loop,
)
from lifeguard.aws.pcs import BatchReads, PcsGateway
from lifeguard.bounds import clip, implausible_time, utc
from lifeguard.detection import (
    Detection,
    DetectionSettings,
    detect,
    episode_id_for,
    proven_already,
    proven_good_by,
    resolving,
)
from lifeguard.errors import AwsCallError
from lifeguard.event_contract import ControllerEvent, change_sentence, episode_event
from lifeguard.group_state import ChangedBy, Episode, GroupState, Suspect
from lifeguard.handlers.batch import Skips, count_events, data_batch
from lifeguard.handlers.containment import (
    newest_event_ms,
    reopen_as_contained,
    revoke_false_proof,
    settle_in_turn,
    to_settle,
)
from lifeguard.handlers.evidence import GroupEvidence, proof_evidence
from lifeguard.handlers.updater import Change, GroupUpdater
from lifeguard.lifecycle_rules import holds_quarantine, terminating_scripts
from lifeguard.log_subscription import MALFORMED_LOG_EVENT
from lifeguard.metrics import Metric, uncounted
from lifeguard.node_report import NodeReport, NodeReportParseError, parse_node_report
from lifeguard.store.groups import (
    REPORTED_LOOP_READ_MAX,
    RUNS_READ_MAX,
    GroupStore,
    UnreadableStateError,
)
from lifeguard.values import mutable

__all__ = ["DETECTION_READS_MAX", "NodeReportsHandler", "ReportsSummary"]

# Groups a batch of reports may read from PCS to judge a loop from the reports alone: reports name any
# group, and a batch of forged ones naming thousands would cost as many reads (and PCS's quota, which the
# remediation needs). The others wait for their next report, which a looping group sends within minutes.
DETECTION_READS_MAX = 20
# Groups without a state of Lifeguard's (no scaling-log record, no episode, no proof) a batch judges: each
# costs a read of its state and of its reports, and all a forged report naming a made-up group costs is its
# line (a delivery of 1 MiB names 3,850: minutes of reads, past the function's timeout, and the batch never
# judged). The groups of the most failing nodes in the batch go first; the others wait for their next
# report, as those past `DETECTION_READS_MAX` do.
UNKNOWN_GROUPS_JUDGED_MAX = 100
# Runs a batch reads for the groups it has no state of, all of them together: a node can store thousands of
# failed runs under any group id (those under CONTINUE cost no read to store), and judging such a group read
# up to RUNS_READ_MAX of them, and REPORTED_LOOP_READ_MAX more for a loop the reports alone might show: 100
# groups' reads of runs of up to 25 KB (a log tail of escapes) came to 15 GB a batch, 50 KB of reports
# making each delivery read until the function's timeout. One group read whole fits: a loop the reports
# alone show needs that one group. A group past it waits for its next report, counted as the others.
STATELESS_RUNS_READ_MAX = RUNS_READ_MAX + REPORTED_LOOP_READ_MAX

logger = logging.getLogger("lifeguard")


@mutable
class ReportsSummary(Skips):
    """What one batch of node reports did: every report is `skipped` (by reason), `ignored` (a run that did
    not fail: kept only as a mark that its boot ran it) or stored whole as one of the `failed_runs`."""

    reports: int = 0
    ignored: int = 0
    failed_runs: int = 0
    # Groups whose state item cannot be read, or that PCS would not give: their reports stored, not judged.
    unreadable_groups: int = 0
    events: list[ControllerEvent] = field(default_factory=list)

    def to_dict(self) -> dict[str, Any]:
        """The summary as the handler returns it."""
        return {
            "reports": self.reports,
            "skipped": self.skipped,
            "skipped_reasons": dict(self.skipped_reasons),
            "ignored": self.ignored,
            "failed_runs": self.failed_runs,
            "unreadable_groups": self.unreadable_groups,
            "events": [{"detail-type": e.detail_type, "detail": dict(e.detail)} for e in self.events],
        }


class NodeReportsHandler:
    """Keeps failed script runs and attributes open episodes to a script."""

    def __init__(
        self,
        store: GroupStore,
        updater: GroupUpdater,
        defaults: DetectionSettings,
        *,
        pcs: PcsGateway | None = None,
        clusters: frozenset[str] = frozenset(),
        metric: Metric | None = None,
        clock: Callable[[], float] = time.time,
        tag_refresh_seconds: float = 300.0,
        changed_by: ChangedBy = lambda _cluster, _group, _config: None,
        quarantined: Callable[[str, str], set[tuple[str, str]]] | None = None,
    ) -> None:
        self.store = store
        # (stage, script) of the scripts Lifeguard's quarantines switched in a group (its ledger), to tell
        # a node kept by Lifeguard's quarantine from one the owners' own STOP_SEQUENCE kept; None: not known
        # (the undo is offered).
        self.quarantined = quarantined
        self.updater = updater
        self.defaults = defaults
        self.pcs = pcs  # None: reports name suspects, but never detect a loop on their own
        self.clusters = clusters  # the stack's ClusterIds; empty: every cluster of the account
        self.tag_refresh_ms = int(tag_refresh_seconds * 1000)
        self.changed_by = changed_by  # as the scaling_events handler's
        self.metric = metric or uncounted
        self.clock = clock  # the invocation's clock, against which report times must be plausible

    def handle_event(self, event: Mapping[str, Any]) -> ReportsSummary:
        """One CloudWatch Logs subscription event of the node-report log group."""
        batch = data_batch(event, self.metric)
        if isinstance(batch, str):
            return ReportsSummary(skipped=int(batch == "invalid"))
        return self.handle_messages(batch.messages(), malformed=batch.malformed_events())

    def handle_messages(
        self, messages: Iterable[tuple[str, str]], *, malformed: Iterable[tuple[str, str]] = ()
    ) -> ReportsSummary:
        """Reports as shipped; a bad one is logged, counted and skipped, as is each of `malformed` (`(where,
        what is wrong)` of the log events not as CloudWatch Logs sends them)."""
        summary = ReportsSummary()
        for where, why in malformed:
            summary.reports += 1
            summary.skip(MALFORMED_LOG_EVENT, where, why)
        failed: list[NodeReport] = []
        others: list[NodeReport] = []
        now_ms = int(self.clock() * 1000)
        for message, where in messages:
            summary.reports += 1
            report = parse_node_report(message, where=where)
            if isinstance(report, NodeReportParseError):
                summary.skip(report.reason, where, report.message)
                continue
            implausible = implausible_time(report.started_at * 1000, now_ms) or implausible_time(
                report.ended_or_started_at * 1000, now_ms
            )
            if implausible is not None:
                summary.skip(f"run time {implausible}", where, utc(report.started_at * 1000))
                continue
            if report.failed:
                failed.append(report)
            else:
                others.append(report)
                summary.ignored += 1
        if failed or others:
            self.store.put_reports([*failed, *others])
        reported: defaultdict[tuple[str, str], set[str]] = defaultdict(set)  # the batch's nodes, by group
        for r in (*failed, *others):
            reported[(r.cluster_id, r.compute_node_group_id)].add(r.instance_id)
        summary.failed_runs = len({_failed_run(report) for report in failed})
        # Only the groups of the stack's ClusterIds are judged (an episode a cluster taken out of them had
        # open included): their reports are stored, and the rest of the batch is not theirs to act on.
        groups = sorted(
            {(r.cluster_id, r.compute_node_group_id) for r in failed if self._watched(r.cluster_id)}
        )
        looping = {(r.cluster_id, r.compute_node_group_id) for r in failed if r.on_error == "TERMINATE"}
        for cluster_id in sorted({cluster for cluster, _ in looping if not self._watched(cluster)}):
            # Stored, as every report is; said, or a group enrolled by hand in another cluster loops unseen.
            logger.warning(
                "cluster %s: its nodes report scripts failing under TERMINATE, and it is not one of the "
                "stack's ClusterIds: no loop is looked for there",
                cluster_id,
            )
        reads = None
        budget = _JudgedGroups()
        if self.pcs is not None:
            looped = Counter(cluster for cluster, _ in looping)
            reads = BatchReads(self.pcs, self.tag_refresh_ms, looped, now_ms=now_ms)
        damaged: dict[tuple[str, str], str] = {}  # groups whose state or ledger cannot be read, and why
        unknown_judged = 0
        unknown: set[tuple[str, str]] = set()
        if len(groups) > DETECTION_READS_MAX:  # the reads may run out: the groups Lifeguard knows go first
            stored = self.store.load_many(groups, damaged)
            unknown = {key for key in groups if key not in stored or stored[key].version == 0}
            failing = {(r.cluster_id, r.compute_node_group_id, r.instance_id) for r in failed}
            nodes = Counter((cluster_id, group_id) for cluster_id, group_id, _ in failing)
            groups.sort(key=lambda key: (key in unknown, -nodes[key], key))
        failure: AwsCallError | None = None  # a group's call that failed: the others are tried, then raised
        for cluster_id, group_id in groups:
            if (cluster_id, group_id) in damaged:
                continue
            detect = reads if (cluster_id, group_id) in looping else None
            if (cluster_id, group_id) in unknown:
                if detect is None:
                    continue  # no state to settle or revoke, no loop to look for: nothing to judge
                if unknown_judged >= UNKNOWN_GROUPS_JUDGED_MAX:
                    budget.deferred.add((cluster_id, group_id))
                    continue
                unknown_judged += 1
            try:
                judged = frozenset(reported[(cluster_id, group_id)])
                told = self._attribute(cluster_id, group_id, detect, budget, now_ms, judged=judged)
                summary.events.extend(told)
            except UnreadableStateError as exc:
                damaged[(cluster_id, group_id)] = str(exc)
            except AwsCallError as exc:
                failure = failure or exc
        # Groups whose nodes reported only runs that did not fail: they may settle an open episode, or
        # prove the configuration a success booted before its reports came. One BatchGetItem for them all;
        # a write (of its version at least: `_witnessed`) only where an episode is open or a proof may be.
        quiet = sorted(
            {(r.cluster_id, r.compute_node_group_id) for r in others if self._watched(r.cluster_id)}
            - set(groups)
        )
        if quiet:
            # Read from the table, not this container's memory: scaling_events (another function) opens
            # and ends episodes, and a state remembered here would hide one it opened since.
            self.store.forget(quiet)
            for (cluster_id, group_id), state in self.store.load_many(quiet, damaged).items():
                try:
                    if state.episode is not None:
                        judged = frozenset(reported[(cluster_id, group_id)])
                        summary.events.extend(self._settle_open(cluster_id, group_id, judged))
                    elif _may_prove(state, reported[(cluster_id, group_id)]):
                        self._prove_late(cluster_id, group_id, reported[(cluster_id, group_id)])
                except UnreadableStateError as exc:  # its ledger
                    damaged[(cluster_id, group_id)] = str(exc)
                except AwsCallError as exc:
                    failure = failure or exc
        if failure is not None:
            # The batch is retried: its reports are stored, its groups judged again; the events published
            # meanwhile are out of their outboxes, not made again: counted now.
            count_events(summary.events, self.metric)
            raise failure
        for (cluster_id, group_id), why in sorted(damaged.items()):
            # Its reports are stored: they are judged once the item is mended or deleted.
            logger.error(
                "group %s of cluster %s not judged: %s; mend or delete that item",
                clip(group_id),
                clip(cluster_id),
                why,
            )
        # And groups PCS would not give (a refused read: permissions, a value it will not take), as
        # scaling_events counts them: their reports are stored and judged again with the next report.
        unreadable = set(damaged) | set(reads.unreadable if reads is not None else ())
        summary.unreadable_groups = len(unreadable)
        if unreadable:
            self.metric("GroupsUnreadable", len(unreadable))
        if budget.deferred:
            logger.warning(
                "%d groups' reports were not judged for a loop in this batch (at most %d read from PCS, %d"
                " without a state of Lifeguard's, %d of their runs read)",
                len(budget.deferred),
                DETECTION_READS_MAX,
                UNKNOWN_GROUPS_JUDGED_MAX,
                STATELESS_RUNS_READ_MAX,
            )
            self.metric("DetectionsDeferred", len(budget.deferred))
        self.metric("NodeReports", summary.reports)
        if summary.skipped:
            self.metric("NodeReportsSkipped", summary.skipped)
        count_events(summary.events, self.metric)
        return summary

    def _watched(self, cluster_id: str) -> bool:
        return not self.clusters or cluster_id in self.clusters

    def _attribute(
        self,
        cluster_id: str,
        group_id: str,
        reads: BatchReads | None,
        budget: _JudgedGroups,
        now_ms: int,
        *,
        judged: frozenset[str],
    ) -> list[ControllerEvent]:
        """Judge one group on the batch's reports (of its nodes `judged`), at the batch's time `now_ms` (how
        late they come)."""

        def mutate(state: GroupState) -> Change:
            return _witnessed(state, judge(state))

        def judge(state: GroupState) -> Change:
            episode = state.episode
            ended = state.last_episode is not None and state.last_episode.resolved_by is not None
            if episode is None and not ended and state.proven_good is None and reads is None:
                return Change()
            # Read on every run: a run again after a lost race must see the reports the winner stored too.
            spent = None
            if state.version == 0:  # no state of Lifeguard's: its reads come out of the batch's budget
                if not budget.may_read_runs((cluster_id, group_id), RUNS_READ_MAX):
                    return Change()
                spent = budget.spend_runs
            evidence = GroupEvidence(self.store, state, marks=False, spent=spent)
            reports = evidence.reports_of(_judged_nodes(state))
            if episode is None:
                settings = self._settings(state)
                reopened = reopen_as_contained(
                    state, settings, reports, now_ms=now_ms, lifeguards=lambda: self._lifeguards(state)
                )
                revoked = revoke_false_proof(state, reports, now_ms=now_ms)
                if reopened or reads is None:
                    return Change(bool(reopened) or revoked, reopened)
                detected = self._detect(state, evidence, reads, budget)
                return Change(bool(detected) or revoked, detected)
            revoked = revoke_false_proof(state, reports, now_ms=now_ms)
            kept = len(episode.kept)
            settled = self._settle(state, judged)
            if settled:
                return Change(True, settled)
            if episode.contained_at is not None:  # its suspect is the script the kept nodes still fail
                return Change(changed=revoked or len(episode.kept) != kept)  # a node kept, listed
            failing = as_booted(state, episode, evidence.reports_of(f.instance_id for f in episode.failures))
            scripts = known_scripts(state)
            suspect, others = attribute(episode.failures, failing, scripts)
            if suspect is None and episode.suspect is not None:
                return self._withdraw(state, episode.suspect, failing, revoked)
            if suspect is None or (suspect == episode.suspect and others == episode.also_failing):
                return Change(changed=revoked)
            episode.also_failing = others
            before = episode.suspect
            episode.suspect = suspect
            episode.no_script_failed = False  # a script failed after all: its runs came after the others
            # The reports bear the loop out (its nodes ship reports: a later success waits for theirs).
            episode.add_signal("node_reports")
            if before is not None and (before.stage, before.script) == (suspect.stage, suspect.script):
                return Change(changed=True)  # more evidence for the same script: kept, not announced again
            episode.revision += 1
            settings = self._settings(state)
            logger.warning(
                "group %s: episode %s attributed to %s/%s (%d of %d instances)",
                group_id,
                episode.episode_id,
                suspect.stage,
                suspect.script,
                len(suspect.instances),
                len(episode.failures),
            )
            return Change(True, [episode_event("BootstrapLoopDetected", state, episode, settings)])

        return self.updater.update(cluster_id, group_id, mutate)

    def _withdraw(
        self, state: GroupState, named: Suspect, failing: list[NodeReport], revoked: bool
    ) -> Change:
        """The suspect an open episode named no longer holds: the instances that named it now report failed
        TERMINATE runs of two scripts (`contradicted`: one of them was written by another node, as when a
        node's own reports come after a forged one). The episode names none, and is told again, so its
        remediation switches every TERMINATE script rather than the one another node named."""
        episode = state.episode
        assert episode is not None
        if not contradicted(set(named.instances), failing):
            return Change(changed=revoked)  # its reports gone (expired): what they said stands
        episode.suspect = None
        episode.revision += 1
        settings = self._settings(state)
        reason = (
            f"{named.stage} › {named.script} is not the suspect: the nodes that named it also report another "
            "TERMINATE script failed (one of the two was written by another node)"
        )
        logger.warning("group %s: %s", state.group_id, reason)
        return Change(True, [episode_event("BootstrapLoopDetected", state, episode, settings, reason=reason)])

    def _settle_open(self, cluster_id: str, group_id: str, judged: frozenset[str]) -> list[ControllerEvent]:
        def mutate(state: GroupState) -> Change:
            if state.episode is None:
                return Change()
            kept = len(state.episode.kept)
            settled = self._settle(state, judged)
            listed = state.episode is not None and len(state.episode.kept) != kept  # kept, not told
            return _witnessed(state, Change(bool(settled) or listed, settled))

        return self.updater.update(cluster_id, group_id, mutate)

    def _prove_late(self, cluster_id: str, group_id: str, instances: set[str]) -> None:
        """A success the scaling log logged before its node's reports came, which proved nothing then (the
        configuration may hide a failure: a script under STOP_SEQUENCE): now its reports may prove the
        configuration, as they would have had they come first. A static group's one node may boot no other
        success to prove it with."""

        def mutate(state: GroupState) -> Change:
            if state.episode is not None or not _may_prove(state, instances):
                return Change()
            config = state.config
            assert config is not None  # `_may_prove`
            runs, actions = GroupEvidence(self.store, state), config.node_lifecycle_actions
            successes = sorted(
                (state.outcomes[i] for i in instances if i in state.outcomes), key=_OUTCOME_TIME
            )
            proof = proven_good_by(state, successes, config, lambda o: proof_evidence(actions, runs.of(o)))
            if proof is None:
                # Not written: a node could then have the group written at each report it sends. A success
                # whose reports a scaling_events write read just before they were stored proves its
                # configuration with the next success instead.
                return Change()
            state.prove(proof)
            logger.info(
                "group %s: configuration %s proven good by %s (%s), its reports after its success",
                state.group_id,
                proof.fingerprint[:12],
                proof.instance_id,
                proof.evidence,
            )
            return Change(changed=True)

        self.updater.update(cluster_id, group_id, mutate)

    def _settle(self, state: GroupState, judged: frozenset[str]) -> list[ControllerEvent]:
        """A success the scaling log logged before its node's reports came, which ended nothing then (a
        quarantine of Lifeguard's was in the configuration): now its reports say whether the loop is
        contained (a script still failed) or resolved (none did). `judged`: the nodes whose reports came,
        whose successes are judged past the first `SETTLED_SUCCESSES_MAX` too (`to_settle`), as in
        scaling_events."""
        settings = self._settings(state)
        evidence, now_ms = GroupEvidence(self.store, state), newest_event_ms(state)
        return settle_in_turn(
            state,
            settings,
            to_settle(state, resolving(state, settings), judged),
            lambda success, _: (evidence.of(success), now_ms, False),
            lambda: self._lifeguards(state),
        )

    def _settings(self, state: GroupState) -> DetectionSettings:
        """The group's detection settings: the stack's, with its tags over them."""
        return self.defaults.with_tags(state.config.tags if state.config else {})[0]

    def _lifeguards(self, state: GroupState) -> bool:
        """Whether the group's configuration holds a quarantine of Lifeguard's: its drain step, or a script
        its ledger quarantined (without the ledger's lookup, none is known to be)."""
        quarantined = self.quarantined
        actions = state.config.node_lifecycle_actions if state.config else None
        if quarantined is None:
            return holds_quarantine(actions, set)
        return holds_quarantine(actions, lambda: quarantined(state.cluster_id, state.group_id))

    def _detect(
        self, state: GroupState, evidence: GroupEvidence, reads: BatchReads, budget: _JudgedGroups
    ) -> list[ControllerEvent]:
        """A loop from the reports alone (module docstring), or nothing."""
        if launched_instances(state) is not None:
            return []  # its scaling log is delivered: that opens loops, the reports name the script
        key = (state.cluster_id, state.group_id)
        stateless = state.version == 0
        if stateless and not evidence.complete() and not budget.may_read_runs(key, REPORTED_LOOP_READ_MAX):
            return []
        reports = evidence.reports_for_a_loop()
        since = state.last_episode.resolved_at if state.last_episode else None
        settings = self._settings(state)
        if reported_loop(reports, settings.threshold, settings.window_ms, since) is None:
            return []  # not even with what is known: no PCS call
        if not budget.may_read((state.cluster_id, state.group_id)):
            return []
        batch_time = max(r.ended_or_started_at for r in reports) * 1000
        config = reads.current(state, batch_time, tags=True)
        if config is None:
            return []
        state.config = config
        settings, problems = self.defaults.with_tags(config.tags)
        for problem in problems:
            logger.warning("group %s: %s; using %s", state.group_id, problem, settings)
        if settings.mode == "off":
            return []
        since = max(since or 0, config.modified_at)
        # Only a script the configuration runs under TERMINATE gets a node terminated: a report saying one
        # of its other scripts did is not a loop.
        scripts = terminating_scripts(config.node_lifecycle_actions)
        loop = reported_loop(reports, settings.threshold, settings.window_ms, since, scripts=scripts)
        if loop is None:
            return []
        detection = Detection("loop", loop.failures)
        episode = Episode(
            episode_id=episode_id_for(state.cluster_id, state.group_id, detection),
            kind="loop",
            opened_at=detection.latest,
            config_modified_at=config.modified_at,
            config_fingerprint=config.fingerprint,
            failures=list(loop.failures),
            suspect=find_suspect(loop.failures, reports, scripts),
            signals=["node_reports"],
            changed_by=self.changed_by(state.cluster_id, state.group_id, config),
        )
        if detect(state, settings, config.modified_at, since) is not None:
            episode.add_signal("scaling_log")  # the scaling log's own rule fires too: remediation may act
        state.episode = episode
        reason = (
            f"detected from node reports: {len(loop.failures)} instances failed {loop.stage} › {loop.script} "
            f"(onError TERMINATE) within {settings.window_minutes} min"
        )
        began = change_sentence(episode.changed_by)
        reason = f"{reason}; {began}" if began else reason
        logger.warning("group %s: %s", state.group_id, reason)
        return [episode_event("BootstrapLoopDetected", state, episode, settings, reason=reason)]


def _may_prove(state: GroupState, instances: set[str]) -> bool:
    """Whether reports of `instances` that did not fail may prove the group's configuration: known whole,
    not proven already, and one of them a success of the group's."""
    config = state.config
    if config is None or not config.actions_read or proven_already(state, config):
        return False
    outcomes = state.outcomes
    return any(i in outcomes and outcomes[i].succeeded for i in instances)


_OUTCOME_TIME = attrgetter("event_timestamp")


def _witnessed(state: GroupState, change: Change) -> Change:
    """The change, written even when it changes nothing (the state's version moves on), for a group Lifeguard
    keeps a state of. The reports were stored before the state was read, and scaling_events reads a group's
    reports after its state: a scaling_events invocation taking in the success (or the failures) of the
    same nodes at the same time, which read the reports before they were stored, then finds its own write
    refused and judges again with them; or it wrote first, and this write is refused and judged again
    with what it wrote. Without it, each side judged without the other's half and neither wrote: a kept
    node's failed report and its success never contained the loop, and a CONTINUE script's failure left
    the success that proved its configuration standing."""
    if state.version == 0 or change.changed or change.events:
        return change  # a group without a state is not made one here; a change is its own witness
    return Change(changed=True, maps_only=True)


class _JudgedGroups:
    """The groups one batch read PCS for to judge a loop from reports alone (`DETECTION_READS_MAX`), and
    those it left for their next report."""

    def __init__(self) -> None:
        self.judged: set[tuple[str, str]] = set()
        self.deferred: set[tuple[str, str]] = set()
        self.stateless_runs = 0  # runs read for groups without a state (`STATELESS_RUNS_READ_MAX`)

    def may_read_runs(self, key: tuple[str, str], most: int) -> bool:
        """Whether a group without a state may read up to `most` more runs in this batch."""
        if self.stateless_runs + most > STATELESS_RUNS_READ_MAX:
            self.deferred.add(key)
            return False
        return True

    def spend_runs(self, count: int) -> None:
        """Runs a group without a state read."""
        self.stateless_runs += count

    def may_read(self, key: tuple[str, str]) -> bool:
        """Whether the group may be read (again, when it was already: a mutation run again)."""
        if key not in self.judged and len(self.judged) >= DETECTION_READS_MAX:
            self.deferred.add(key)
            return False
        self.judged.add(key)
        return True


def _failed_run(report: NodeReport) -> tuple[object, ...]:
    """A failed run, however many reports tell of it: its group, node, boot, stage, script and start."""
    return (
        report.cluster_id,
        report.compute_node_group_id,
        report.instance_id,
        report.boot,
        report.stage,
        report.script,
        report.started_at,
    )


def _judged_nodes(state: GroupState) -> list[str]:
    """The nodes whose boot a resolution or a proof rests on: a failed run of theirs undoes it."""
    nodes = []
    if state.last_episode is not None and state.last_episode.resolved_by is not None:
        nodes.append(state.last_episode.resolved_by)
    for proof in (state.proven_good, state.proven_before):
        if proof is not None:
            nodes.append(proof.instance_id)
    return nodes
