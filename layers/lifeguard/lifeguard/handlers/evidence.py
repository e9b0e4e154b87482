"""A group's node reports as the handlers weigh them: read from the table once per batch, and only when a
decision needs them (a success in an open episode, one that would prove a configuration, a detection).

A group's runs are one read, up to its bound. A node can write any number of runs, under any instance: when
a flood fills the read, the runs of the instances a decision is about are read instance by instance (the
newest `INSTANCES_READ_MAX` of them), so a flood under other instances hides none of theirs."""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Any

from lifeguard.attribution import (
    LAUNCH_BOOT_AFTER_OUTCOME_MS,
    BootRuns,
    boot_runs,
    failed_runs,
    known_scripts,
    launched_s,
)
from lifeguard.group_state import BootOutcome, Failure, GroupState
from lifeguard.lifecycle_rules import hides_failures, ready_checks, stopping_scripts
from lifeguard.node_report import NodeReport
from lifeguard.store.groups import REPORTED_LOOP_READ_MAX, GroupStore, Runs

__all__ = ["INSTANCES_READ_MAX", "GroupEvidence", "proof_evidence"]

# Instances read one by one for one decision, past a group's read that stopped at its bound: the newest.
INSTANCES_READ_MAX = 20
# The end of a launch boot's runs read when its outcome is not known (epoch seconds, 11 digits: start times
# of fewer digits sort among them as text, `GroupStore.read_launch_failures`).
_ANY_TIME_S = 99_999_999_999
# A boot whose node's runs were not read (`BootRuns.read`).
_UNREAD = BootRuns([], 0, read=False)


class GroupEvidence:
    """The failed runs and the run marks one group's nodes reported (`marks=False`: the failed runs only)."""

    def __init__(
        self,
        store: GroupStore,
        state: GroupState,
        *,
        marks: bool = True,
        spent: Callable[[int], object] | None = None,
    ) -> None:
        self.store = store
        self._state = state
        self._marks = marks
        self._spent = spent  # told how many runs each read found, when given (a batch's budget of them)
        self._group: Runs | None = None
        self._instances: dict[str, Runs] = {}

    def _counted(self, runs: Runs) -> Runs:
        if self._spent is not None:
            self._spent(len(runs.reports) + len(runs.marks))
        return runs

    def _read(self, instance: str | None = None) -> Runs:
        cluster_id, group_id = self._state.cluster_id, self._state.group_id
        if instance is None:
            if self._group is None:
                self._group = self._counted(self.store.read_runs(cluster_id, group_id, marks=self._marks))
            return self._group
        if instance not in self._instances:
            self._instances[instance] = self._counted(
                self.store.read_runs(cluster_id, group_id, instance, marks=self._marks)
            )
        return self._instances[instance]

    def complete(self) -> bool:
        """Whether the group's read holds all its failed runs."""
        return self._read().reports_complete

    def reports(self) -> list[NodeReport]:
        """The group's failed runs, as one read holds them."""
        return self._read().reports

    def reports_for_a_loop(self) -> list[NodeReport]:
        """The group's failed runs for a loop the reports alone show: the group's read, and past its bound
        a read of up to REPORTED_LOOP_READ_MAX of them (no instance is named to read one by one)."""
        group = self._read()
        if group.reports_complete:
            return group.reports
        cluster_id, group_id = self._state.cluster_id, self._state.group_id
        runs = self.store.read_runs(cluster_id, group_id, marks=False, most=REPORTED_LOOP_READ_MAX)
        return self._counted(runs).reports

    def reports_of(self, instances: Iterable[str]) -> list[NodeReport]:
        """The failed runs of `instances` (among others, when the group's read holds them all). Under an
        instance whose own read is full (a flood of runs under its id, whose keys sort before the genuine
        one's: another script's name), its launch boot's runs of the configuration's scripts are read too,
        script by script (`_launch_failures`): the flood would otherwise be all that is seen of it, and name
        the script to blame."""
        group = self._read()
        if group.reports_complete:
            return group.reports
        newest = list(dict.fromkeys(instances))[-INSTANCES_READ_MAX:]
        found: list[NodeReport] = []
        for instance in newest:
            own = self._read(instance)
            found.extend(own.reports)
            if not own.reports_complete:
                found.extend(self._launch_failures(instance, self._state.outcomes.get(instance)))
        return found

    def _launch_failures(self, instance: str, outcome: BootOutcome | None) -> list[NodeReport]:
        """The instance's failed runs of the configuration's scripts in its launch boot (up to
        LAUNCH_BOOT_AFTER_OUTCOME_MS after its outcome, or to any time when none is known), each script's
        read on its own key range; none when the scripts are not known."""
        scripts = known_scripts(self._state)
        if not scripts:
            return []
        since = self._state.launched_at(outcome) if outcome is not None else None
        low = launched_s(since) or 0  # as `failed_runs` takes them
        high = (outcome.event_timestamp + LAUNCH_BOOT_AFTER_OUTCOME_MS) // 1000 if outcome else _ANY_TIME_S
        return self.store.read_launch_failures(
            self._state.cluster_id, self._state.group_id, instance, scripts, (low, high)
        )

    def _instance_read(self, instance: str) -> Runs | None:
        """The instance's own read, made when there is room for one more (`INSTANCES_READ_MAX`)."""
        if instance in self._instances or len(self._instances) < INSTANCES_READ_MAX:
            return self._read(instance)
        return None

    def of(self, outcome: BootOutcome) -> BootRuns:
        """What the outcome's node reported for that boot, of the scripts of the group's configuration (as
        last read, when its scripts are known). Its own runs are read for it only where the group's read
        stopped before them (a flood of failed runs; for its marks, a busy group's fortnight of them)."""
        since = self._state.launched_at(outcome)
        scripts = known_scripts(self._state)
        instance = outcome.instance_id
        group = self._read()
        reports = group.reports
        at = outcome.event_timestamp  # the launch boot's runs only (a reboot's say nothing of it)
        complete = group.reports_complete and group.marks_complete
        own = None if complete else self._instance_read(instance)
        if not group.reports_complete and own is not None:
            reports = own.reports
            if not own.reports_complete and scripts:
                # A flood under the instance's own id: its runs of the configuration's scripts in that boot
                # are read script by script, on their own key ranges.
                reports = reports + self._launch_failures(instance, outcome)
        failed = failed_runs(reports, instance, since, scripts, outcome_ms=at)
        marks = group.marks
        if not group.marks_complete and own is not None:
            marks = own.marks
        clean = boot_runs((), marks, instance, since, scripts, outcome_ms=at)
        if not failed:
            # Past the decision's reads of single instances, a node whose runs the group's read may not hold
            # is not known to have run clean, nor to have sent nothing: a flood of runs under another id
            # would otherwise let a node whose script failed prove its configuration good.
            return clean if complete or own is not None else _UNREAD
        # A boot with a failed run is judged on its failures; the scripts that ran clean in it, and failed
        # in no report of it, still say which ready checks its node passed (`awaits_ready_checks`: a kept
        # node seen to stay up). A mark of a script a report says failed proves nothing: any node can write
        # one.
        return BootRuns(failed, 0, clean.ran - {(run.stage, run.script) for run in failed})

    def no_script_failed(self, failures: Sequence[Failure]) -> bool:
        """Whether every failing instance reported a run of every nodeBootstrapped script of the group's
        configuration for its boot, and of every nodeReady one under TERMINATE (`ready_checks`: PCS logs
        ACTIVE before nodeReady runs, and such a script's failure ends the node all the same), and none of
        them failed: the boot failed outside the lifecycle scripts (the PCS agent, slurmd, the AMI). Some
        runs are not enough: any node can write a report, and one success written for the very script that
        failed (or a ready check whose report never left its node) would otherwise keep a real loop from its
        quarantine."""
        scripts = known_scripts(self._state)
        config = self._state.config
        ready = ready_checks(config.node_lifecycle_actions) if scripts and config is not None else set()
        wanted = {script for script in scripts or () if script[0] == "nodeBootstrapped"} | ready
        if not failures or not wanted:
            return False
        for failure in failures:
            outcome = self._state.outcomes.get(failure.instance_id) or BootOutcome(
                failure.instance_id, failure.scheduler_node_id, failure.event_timestamp, False
            )
            runs = self.of(outcome)
            if runs.failed or not wanted <= runs.ran:
                return False
        return True


def proof_evidence(actions: Mapping[str, Any] | None, boot: BootRuns) -> str | None:
    """What proves the configuration `actions` good by a node's success and its boot's runs (`boot`), in
    words; None when they prove nothing. Its reports show every run succeeded (with a run of each
    nodeBootstrapped script under STOP_SEQUENCE, when it has one: PCS logs such a script's failure as a
    success, and any node can write a report of another's success), or it sent none and the configuration
    hides no failure."""
    if not boot.read:
        return None  # its runs unread: not known to have run clean
    hidden = hides_failures(actions)
    if boot.reported and not boot.failed and (not hidden or _stopping_before_active(actions) <= boot.ran):
        return f"BOOTSTRAP_SUCCESS, and {boot.evidence()}"
    if boot.reported or hidden:
        return None
    return "BOOTSTRAP_SUCCESS; no node reports yet, and no STOP_SEQUENCE script in its configuration"


def _stopping_before_active(actions: Mapping[str, Any] | None) -> set[tuple[str, str]]:
    """The nodeBootstrapped scripts under STOP_SEQUENCE: a boot's reports prove a configuration that hides
    failures only with a run of each (nodeReady's come after ACTIVE; a failure of theirs, when it comes,
    takes the proof back)."""
    return {script for script in stopping_scripts(actions) if script[0] == "nodeBootstrapped"}
