"""The node_reports Lambda's logic: store each failed script run, and name the suspect of open episodes.

A detection made before the reports arrived is enriched when they arrive: the episode's suspect is set
and BootstrapLoopDetected is published again with the same episode id and the next revision. More reports
for the same script update the evidence quietly: a new event only when the suspect changes.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from lifeguard.attribution import find_suspect
from lifeguard.bounds import implausible_time, utc
from lifeguard.detection import DetectionSettings
from lifeguard.event_contract import ControllerEvent, episode_event
from lifeguard.group_state import GroupState
from lifeguard.handlers.batch import Skips, data_batch
from lifeguard.handlers.containment import reopen_as_contained, revoke_false_proof
from lifeguard.handlers.updater import Change, GroupUpdater
from lifeguard.metrics import Metric, uncounted
from lifeguard.node_report import NodeReport, NodeReportParseError, parse_node_report
from lifeguard.store.groups import GroupStore

__all__ = ["NodeReportsHandler", "ReportsSummary"]

logger = logging.getLogger("lifeguard")


@dataclass
class ReportsSummary(Skips):
    """What one batch of node reports did: every report is `skipped` (by reason), `ignored` (a run that did
    not fail: nothing to keep) or stored as one of the `failed_runs`."""

    reports: int = 0
    ignored: int = 0
    failed_runs: int = 0
    events: list[ControllerEvent] = field(default_factory=list)

    def to_dict(self) -> dict[str, Any]:
        """The summary as the handler returns it."""
        return {
            "reports": self.reports,
            "skipped": self.skipped,
            "skipped_reasons": dict(self.skipped_reasons),
            "ignored": self.ignored,
            "failed_runs": self.failed_runs,
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
        metric: Metric | None = None,
        clock: Callable[[], float] = time.time,
    ) -> None:
        self.store = store
        self.updater = updater
        self.defaults = defaults
        self.metric = metric or uncounted
        self.clock = clock  # the invocation's clock, against which report times must be plausible

    def handle_event(self, event: Mapping[str, Any]) -> ReportsSummary:
        """One CloudWatch Logs subscription event of the node-report log group."""
        batch = data_batch(event, self.metric)
        if isinstance(batch, str):
            return ReportsSummary(skipped=int(batch == "invalid"))
        return self.handle_messages(batch.messages())

    def handle_messages(self, messages: Iterable[tuple[str, str]]) -> ReportsSummary:
        """Reports as shipped; a bad one is logged, counted and skipped."""
        summary = ReportsSummary()
        failed: list[NodeReport] = []
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
                summary.ignored += 1
        summary.failed_runs = self.store.put_reports(failed) if failed else 0
        groups = sorted({(r.cluster_id, r.compute_node_group_id) for r in failed})
        for cluster_id, group_id in groups:
            summary.events.extend(self._attribute(cluster_id, group_id))
        self.metric("NodeReports", summary.reports)
        if summary.skipped:
            self.metric("NodeReportsSkipped", summary.skipped)
        return summary

    def _attribute(self, cluster_id: str, group_id: str) -> list[ControllerEvent]:
        reports: list[NodeReport] | None = None

        def mutate(state: GroupState) -> Change:
            nonlocal reports
            episode = state.episode
            ended = state.last_episode is not None and state.last_episode.resolved_by is not None
            if episode is None and not ended and state.proven_good is None:
                return Change()
            if reports is None:
                reports = self.store.reports(cluster_id, group_id)
            if episode is None:
                settings = self.defaults.with_tags(state.config.tags if state.config else {})[0]
                reopened = reopen_as_contained(state, settings, reports)
                revoked = revoke_false_proof(state, reports)
                return Change(bool(reopened) or revoked, reopened)
            revoked = revoke_false_proof(state, reports)
            if episode.contained_at is not None:
                return Change(changed=revoked)  # its suspect is the script the kept nodes still fail
            suspect = find_suspect(episode.failures, reports)
            if suspect is None or suspect == episode.suspect:
                return Change(changed=revoked)
            before = episode.suspect
            episode.suspect = suspect
            if before is not None and (before.stage, before.script) == (suspect.stage, suspect.script):
                return Change(changed=True)  # more evidence for the same script: kept, not announced again
            episode.revision += 1
            settings = self.defaults.with_tags(state.config.tags if state.config else {})[0]
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
