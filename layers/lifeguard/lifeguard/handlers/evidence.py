"""A group's node reports as the handlers weigh them: read from the table once per batch, and only when a
decision needs them (a success in an open episode, one that would prove a configuration, a detection)."""

from __future__ import annotations

from collections.abc import Sequence

from lifeguard.attribution import BootRuns, boot_runs, failed_runs, known_scripts
from lifeguard.group_state import BootOutcome, Failure, GroupState
from lifeguard.node_report import NodeReport
from lifeguard.store.groups import GroupStore, RunMark

__all__ = ["GroupEvidence"]


class GroupEvidence:
    """The failed runs and the run marks one group's nodes reported."""

    def __init__(self, store: GroupStore, state: GroupState) -> None:
        self.store = store
        self._state = state
        self._reports: list[NodeReport] | None = None
        self._marks: list[RunMark] | None = None

    def _read(self) -> None:
        self._reports, self._marks = self.store.runs(self._state.cluster_id, self._state.group_id)

    def reports(self) -> list[NodeReport]:
        """The group's failed runs (read with its marks, in one query)."""
        if self._reports is None:
            self._read()
        return self._reports or []

    def marks(self) -> list[RunMark]:
        """The group's runs that did not fail (read with its failed runs, in one query)."""
        if self._marks is None:
            self._read()
        return self._marks or []

    def of(self, outcome: BootOutcome) -> BootRuns:
        """What the outcome's node reported for that boot, of the scripts of the group's configuration (as
        last read, when its scripts are known): its marks are read only when no run failed."""
        since = self._state.launched_at(outcome)
        scripts = known_scripts(self._state)
        failed = failed_runs(self.reports(), outcome.instance_id, since, scripts)
        if failed:
            return BootRuns(failed, 0)
        return boot_runs((), self.marks(), outcome.instance_id, since, scripts)

    def no_script_failed(self, failures: Sequence[Failure]) -> bool:
        """Whether every failing instance reported runs for its boot and none of them failed: the boot
        failed outside the lifecycle scripts (the PCS agent, slurmd, the AMI)."""
        if not failures:
            return False
        for failure in failures:
            outcome = self._state.outcomes.get(failure.instance_id) or BootOutcome(
                failure.instance_id, failure.scheduler_node_id, failure.event_timestamp, False
            )
            runs = self.of(outcome)
            if runs.failed or not runs.reported:
                return False
        return True
