"""The twin of a PCS cluster: static nodes that boot the real `lifeguard-node boot`, on a virtual clock.

One run is one scenario with Lifeguard (or, for a baseline, without it, or with ParallelCluster's protected
mode), in a local AWS it shares with the other runs of the same `lifeguard simulate`:

- PCS is the local endpoint. The twin creates the cluster and the groups through it (so PCS validates the
  scenario's configurations), and reads a group's configuration at each launch: a node boots the
  configuration PCS held when it launched.
- A node is a temp root. At registration it runs `lifeguard-node boot` (`nodehost`) on its configuration,
  scripts fetched from moto's S3, on the twin's clock (LIFEGUARD_SIM_CLOCK_OFFSET_SECONDS); then the real
  shipper sends its reports to the node-report log group. The boot's exit decides the outcome: 0 or 3
  ACTIVE/BOOTSTRAP_SUCCESS, else TERMINATED/BOOTSTRAP_FAILED. A drain step's `scontrol` is a script that
  writes down the drain: the node is then active but not serving.
- Every transition goes to the scaling-log group in PCS's format, with the scenario's timings. After a
  configuration change PCS replaces the older nodes (PENDING_REPLACEMENT/NODE_GROUP_UPDATE, from which a
  node takes no more jobs, then TERMINATED/REPLACEMENT_REQUESTED); a drained static node is replaced as
  unhealthy unless the scenario says `replace_drained_nodes: false`.
- CloudWatch Logs delivers what both groups received to scaling_events and node_reports as subscription
  payloads, `timings.delivery` seconds after it was written (later, twice or out of order under a log
  fault). The events the handlers publish go on the bus and, by template.yaml's rules, to remediate and
  notify. A function that raises is retried as Lambda retries an asynchronous invocation (twice, one and
  two minutes later), then its event is parked.
"""

from __future__ import annotations

import contextlib
import functools
import heapq
import json
import math
import os
import random
import shutil
import time
import uuid
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any

from lifeguard.bounds import event_time
from lifeguard_cli.simulate.scenario import (
    FAULT_KINDS,
    SCRIPTS_BUCKET,
    Fault,
    GroupSpec,
    Scenario,
    ScenarioError,
)
from lifeguard_cli.simulate.slurm import node_states, states_at_end

__all__ = ["BASELINE_NAMES", "MEASURES", "Instance", "RunOptions", "Surroundings", "TwinRun", "run_twin"]

ACCOUNT = "123456789012"
INSTANCE_TYPE = "c7i.large"
SUBNET = "subnet-0123456789abcdef0"
# (key of a group's summary, what people call it): the rows of the terminal's and the HTML report's tables.
MEASURES = (
    ("launched", "instances launched"),
    ("bootstrap_failed", "instances burned (BOOTSTRAP_FAILED)"),
    ("first_active_minute", "minutes to an active node"),
    ("first_serving_minute", "minutes to a serving node"),
    ("recovery_minutes", "minutes from the first failure to a serving node"),
    ("instance_minutes_wasted", "instance minutes wasted"),
    ("active_at_end", "nodes active at the end"),
    ("serving_at_end", "nodes serving at the end"),
    ("slurm_at_end", "Slurm state at the end (sinfo)"),
)
BASELINE_NAMES = {"pcs": "PCS alone", "parallelcluster": "ParallelCluster protected mode"}
NEVER, NO_FAILURE = "never", "no failure"


def measure_shown(key: str, group: Mapping[str, Any]) -> str:
    """A group's measure (`MEASURES`) as the reports show it: a time that never came `never`, the recovery
    of a group none of whose nodes failed `no failure` (not a recovery that never came), a count or a number
    as it is, and what is not known `-`."""
    value = group.get(key)
    if value is None and key == "recovery_minutes" and not group.get("bootstrap_failed"):
        return NO_FAILURE
    if value is None:
        return NEVER if key.endswith(("_minute", "_minutes")) else "-"
    return f"{value:g}" if isinstance(value, float) else str(value)


# As Lambda retries an asynchronous invocation that failed: twice, about one and two minutes later.
RETRY_DELAYS = (60.0, 120.0)
# A boot takes its real time on the virtual clock, rounded up to this: a few hundred milliseconds more or
# less (a loaded machine) do not move what follows, so a seed gives the same run.
BOOT_QUANTUM_SECONDS = 5
MAX_ACTIONS = 1_000_000  # transitions in one run: far more than 100 nodes make in a day
# Each boot is a real process running real scripts, one after another: a run boots at most MAX_BOOTS nodes
# (about three minutes of boots here; `wave-50` makes 150) and spends at most MAX_BOOT_SECONDS of real time in
# them, so a scenario whose loop turns every few seconds, or whose scripts sleep, is refused mid-run with
# what to change rather than left running for hours.
MAX_BOOTS = 1_000
MAX_BOOT_SECONDS = 600.0
# And a run takes at most this much real time in all: what is not a boot (a launch that failed for capacity,
# its record delivered and judged) costs real time too, and a day of them would run for hours.
MAX_RUN_SECONDS = 900.0
SCRIPT_TIMEOUT_SECONDS = 120  # real seconds a script of the twin's nodes may run
NO_NETWORK = "http://127.0.0.1:9"  # the proxy of the nodes' https fetches: loopback's discard port, closed
# nodeReady starts this long after PCS logged the node ACTIVE (the article: ACTIVE at 00:57:52, its
# nodeReady check at 00:57:54): the node's clock moves on by `active` and this between the stages.
READY_AFTER_ACTIVE_SECONDS = 2.0
MAX_DELIVERY_EVENTS = 500  # log events in one subscription payload (CloudWatch Logs caps its size)
# Whether slurmd runs yet: PCS starts it after nodeBootstrapped (the article: Slurm commands are "Not
# available" there) and nodeReady runs once it registered, so the twin's node has it from the moment the
# executor lays out nodeReady's logs.
_SLURMD_UP = '[ -d "$LIFEGUARD_NODE_ROOT/var/log/amazon/pcs/lifecycle/actions/nodeReady" ]'
_SCONTROL = (
    "#!/bin/bash\n# The twin's scontrol: writes down what the node asked Slurm, and shows the node as Slurm\n"
    "# shows one that registered (the article's ready-check reads it in nodeReady). Its answer is one\n"
    "# write, as Slurm's is: `scontrol show node X | grep -q ...` under pipefail would otherwise fail\n"
    "# when grep has matched and gone before a second write (SIGPIPE).\n"
    f"if ! {_SLURMD_UP}; then\n"
    '  echo "scontrol: error: slurmd is not running yet on this node (nodeBootstrapped)" >&2\n'
    "  exit 1\n"
    "fi\n"
    'echo "$*" >> "$LIFEGUARD_SIM_SLURM_LOG"\n'
    'if [ "$1" = show ] && [ "$2" = node ]; then\n'
    "  cat <<SHOWN\n"
    "NodeName=${3:-$PCS_NODE_ID} Arch=x86_64 CoresPerSocket=1\n"
    "   State=IDLE+CLOUD ThreadsPerCore=1 TmpDisk=0 Weight=1 Owner=N/A MCS_label=N/A\n"
    "SHOWN\n"
    "fi\n"
)
# The twin's systemctl: slurmd is active on a node that registered (the article's ready-check asks), and
# inactive before (exit 3, as systemctl's is-active says of a unit that is not running).
_SYSTEMCTL = (
    '#!/bin/bash\nif [ "$1" = is-active ]; then\n'
    f"  if {_SLURMD_UP}; then echo active; else echo inactive; exit 3; fi\n"
    "fi\n"
)

# The twin's date: the node's clock runs on the twin's (executor.log and the script logs' markers are dated
# on it), so a script's `date` without a date of its own tells that time too, as on a node, to the second.
_DATE = (
    "#!/bin/bash\n"
    'for arg in "$@"; do\n'
    '  case "$arg" in -d*|--date*|-r*|--reference*|-s*|--set*|-f*|--file*) exec /usr/bin/date "$@";; esac\n'
    "done\n"
    "offset=${LIFEGUARD_SIM_CLOCK_OFFSET_SECONDS:-0}\n"
    'exec /usr/bin/date -d "@$(( $(/usr/bin/date +%s) + ${offset%.*} ))" "$@"\n'
)


@dataclass(frozen=True)
class RunOptions:
    """How one run goes: `mode` None runs PCS alone (no Lifeguard); `protected_mode` stops launching a
    group's nodes after 10 consecutive bootstrap failures (ParallelCluster's protected mode)."""

    label: str
    mode: str | None
    seed: int
    protected_mode: bool = False
    protected_after: int = 10


@dataclass(frozen=True)
class Surroundings:
    """What the runs of one simulation share: the local AWS, the Slack sink, the node host, the virtual
    clock (the local PCS's) and a scratch directory for the nodes' roots."""

    aws: Any
    slack: Any
    host: Any
    clock: Any
    workdir: Path


@dataclass
class Instance:
    """One instance of a node slot, on virtual seconds from the scenario's start."""

    group: str
    node: str
    instance_id: str | None  # None: a launch that failed
    launched: float
    config: Mapping[str, Any]
    revision: int
    registered: float | None = None
    active: float | None = None
    drained: float | None = None
    ended: float | None = None
    end: str | None = None
    pending_replacement: bool = False
    pending_at: float | None = None
    boot_failed: bool = False  # its boot is over, failed (a TERMINATE failure, or one PCS never heard of)

    @property
    def alive(self) -> bool:
        """Not terminated (nor a failed launch)."""
        return self.ended is None

    @property
    def failed(self) -> bool:
        """Its boot failed: terminated for it, or over with the failure and not yet terminated (the
        horizon between a nodeReady failure under TERMINATE and PCS ending the node)."""
        return self.end == "BOOTSTRAP_FAILED" or self.boot_failed

    def served(self) -> bool:
        """Became ACTIVE and took jobs: not drained by its boot (a drain in nodeReady, Lifeguard's drain step
        keeping a failed node to debug, comes seconds after PCS logged the node ACTIVE), nor failed after (a
        nodeReady script under TERMINATE ends a node PCS logged ACTIVE: the jobs it took were lost with
        it)."""
        return self.active is not None and self.drained is None and not self.failed

    def to_dict(self) -> dict[str, Any]:
        """As the document lists it, in minutes."""
        return {
            "group": self.group,
            "node": self.node,
            "instance_id": self.instance_id,
            "launched_minute": _minutes(self.launched),
            "registered_minute": _minutes(self.registered),
            "active_minute": _minutes(self.active),
            "drained_minute": _minutes(self.drained),
            "pending_replacement_minute": _minutes(self.pending_at),
            "ended_minute": _minutes(self.ended),
            "end": self.end,
        }


@dataclass
class _Group:
    spec: GroupSpec
    group_id: str
    config: dict[str, Any]
    revision: int = 0
    consecutive_failures: int = 0
    protected_at: float | None = None


@dataclass
class TwinRun:
    """What a run produced, on its virtual clock."""

    options: RunOptions
    horizon: float
    groups: dict[str, _Group] = field(default_factory=dict)
    instances: list[Instance] = field(default_factory=list)
    events: list[dict[str, Any]] = field(default_factory=list)
    notifications: list[dict[str, Any]] = field(default_factory=list)
    changes: list[dict[str, Any]] = field(default_factory=list)
    timeline: list[dict[str, Any]] = field(default_factory=list)
    faults: list[dict[str, Any]] = field(default_factory=list)
    invocations: dict[str, int] = field(default_factory=lambda: {"failed": 0, "retried": 0, "parked": 0})
    metrics: dict[str, float] = field(default_factory=dict)  # as the functions emit them, summed
    audit: dict[str, list[dict[str, Any]]] = field(default_factory=dict)  # per group, at the horizon
    boots: int = 0
    wall_seconds: float = 0.0
    started_at: str = ""  # the scenario's minute 0 on the virtual clock (ISO 8601, UTC)

    def group_summary(self, name: str) -> dict[str, Any]:
        """The contract's numbers of one group at the horizon."""
        group = self.groups[name]
        mine = [i for i in self.instances if i.group == name]
        up = [i for i in mine if i.alive and i.active is not None]
        # A node PCS is about to replace for an update is drained (the article's): it takes no more jobs;
        # one whose nodeReady failed under TERMINATE is about to be ended: active, neither serving nor
        # drained.
        drained = [i for i in up if i.drained is not None or i.pending_replacement]
        serving = [i for i in up if i.drained is None and not i.pending_replacement and not i.failed]
        first_serving = [i.active for i in mine if i.served() and i.active is not None]
        wasted = sum(
            (i.ended if i.ended is not None else self.horizon) - i.launched
            for i in mine
            if i.instance_id is not None
            and not i.served()
            # Still booting at the horizon (its boot not over, or over and not yet ACTIVE): not yet wasted.
            and (i.ended is not None or i.active is not None or i.boot_failed)
        )
        ends = [i.end for i in mine]
        return {
            "compute_node_group_id": group.group_id,
            "nodes": group.spec.min,
            "launched": sum(1 for i in mine if i.instance_id is not None),
            "bootstrap_failed": ends.count("BOOTSTRAP_FAILED"),
            "active_at_end": len(up),
            "drained_at_end": len(drained),
            "serving_at_end": len(serving),
            "first_active_minute": _minutes(
                min((i.active for i in mine if i.active is not None), default=None)
            ),
            "first_serving_minute": _minutes(min(first_serving, default=None)),
            "recovery_minutes": self._recovery(mine),
            "final_config": group.config,
            "instance_minutes_wasted": round(wasted / 60, 1),
            "launch_failed": ends.count("INSUFFICIENT_CAPACITY"),
            "replaced": ends.count("REPLACEMENT_REQUESTED"),
            "unhealthy": ends.count("UNHEALTHY_NODE"),
            "protected_minute": _minutes(group.protected_at),
            "slurm_at_end": states_at_end(self.slurm(), name),
        }

    def slurm(self) -> list[dict[str, Any]]:
        """What Slurm showed of each node slot over the run (`slurm.node_states`)."""
        return node_states((instance.to_dict() for instance in self.instances), self.horizon / 60)

    @staticmethod
    def _recovery(instances: list[Instance]) -> float | None:
        """Minutes from the group's first bootstrap failure to the first node that served after it (None:
        no failure, or no node served again)."""
        failed = [i.ended for i in instances if i.end == "BOOTSTRAP_FAILED" and i.ended is not None]
        if not failed:
            return None
        first = min(failed)
        served = [i.active for i in instances if i.served() and i.active is not None and i.active > first]
        return _minutes(min(served) - first) if served else None


def _minutes(seconds: float | None) -> float | None:
    return None if seconds is None else round(seconds / 60, 1)


def run_twin(
    scenario: Scenario,
    options: RunOptions,
    around: Surroundings,
    *,
    start: datetime,
    progress: Callable[[float], None] | None = None,
) -> TwinRun:
    """Run `scenario` from `start` (the virtual clock is moved to it) to its horizon."""
    twin = _Twin(scenario, options, around, start)
    began = time.perf_counter()
    twin.run(progress)
    twin.result.wall_seconds = time.perf_counter() - began
    return twin.result


class _Twin:
    def __init__(
        self, scenario: Scenario, options: RunOptions, around: Surroundings, start: datetime
    ) -> None:
        self.scenario = scenario
        self.options = options
        self.timings = scenario.timings
        self.aws = around.aws
        self.slack = around.slack
        self.host = around.host
        self.start = start
        self.clock = around.clock
        self.workdir = around.workdir
        self.random = random.Random(options.seed)
        self.horizon = scenario.horizon_minutes * 60
        self.result = TwinRun(options, self.horizon, started_at=event_time(start))
        self.now = 0.0
        self._queue: list[tuple[float, int, Callable[[], None]]] = []
        self._sequence = 0
        self._tokens: dict[tuple[str, str], str | None] = {}
        self._due: set[tuple[str, str]] = set()
        self._held: list[tuple[str, str]] = []
        self._lifeguard: Any = None
        self._boot_seconds = 0.0  # real time spent in boots
        self._hung_boots = 0  # boots that ran a script into SCRIPT_TIMEOUT_SECONDS
        self._logs = around.aws.client("logs")
        prefix = f"sim-{options.label}-{uuid.uuid4().hex[:8]}"  # runs share the local AWS
        self.prefix = prefix
        self.scaling_log = f"/aws/vendedlogs/pcs/{prefix}/scaling"
        self.report_log = f"/lifeguard/{prefix}/node-reports"
        for group in (self.scaling_log, self.report_log):
            self._logs.create_log_group(logGroupName=group)
        self.cluster_id = self._create_cluster()
        self.scaling_stream = f"AWSLogs/PCS/{self.cluster_id}/node_lifecycle.log"
        for spec in scenario.groups:
            self.result.groups[spec.name] = self._create_group(spec)
        if options.mode is not None:
            from lifeguard_cli.simulate.lifeguard import LocalLifeguard

            self._lifeguard = LocalLifeguard(self, options.mode)

    # -- the clock and the queue --

    def at(self, seconds: float, action: Callable[[], None]) -> None:
        """Do `action` at `seconds` of virtual time (never before now)."""
        self._sequence += 1
        heapq.heappush(self._queue, (max(seconds, self.now), self._sequence, action))

    def moment(self, seconds: float | None = None) -> datetime:
        """The virtual time at `seconds` from the start (now when None)."""
        return self.start + timedelta(seconds=self.now if seconds is None else seconds)

    def sync(self) -> None:
        """Take up the time the handlers' own waits moved the clock on."""
        self.now = max(self.now, (self.clock() - self.start).total_seconds())

    def run(self, progress: Callable[[float], None] | None) -> None:
        self.clock.set(self.start)
        for group in self.result.groups.values():
            for number in range(1, group.spec.min + 1):
                node = f"{group.spec.name}-{number}"
                self.at(0.0, functools.partial(self._launch, group, node))
        for change in self.scenario.changes:
            self.at(change.at_minute * 60, functools.partial(self._operator_change, change))
        for fault in self.scenario.faults:
            self.at(fault.at_minute * 60, functools.partial(self._arm, fault))
        done = 0
        began = time.monotonic()
        while self._queue and self._queue[0][0] <= self.horizon:
            seconds, _, action = heapq.heappop(self._queue)
            done += 1
            if done > MAX_ACTIONS:
                minute = self.now / 60
                raise ScenarioError(
                    f"{self.scenario.name}: more than {MAX_ACTIONS} transitions by minute {minute:.1f}: "
                    "are some timings 0?"
                )
            if done % 64 == 0 and time.monotonic() - began > MAX_RUN_SECONDS:
                raise ScenarioError(
                    f"{self.scenario.name}: the {self.options.label} run took over {MAX_RUN_SECONDS:.0f} s "
                    f"of real time by minute {self.now / 60:.1f}: give horizon_minutes fewer minutes, the "
                    "groups fewer nodes, or timings a longer cycle"
                )
            self.now = max(self.now, seconds)
            self.clock.set(self.moment())
            action()
            self.sync()
            if self._lifeguard is not None:
                self._lifeguard.collect()
            self._watch_configs()
            if progress is not None:  # at every step: boots of hanging scripts take minutes of one minute
                progress(min(self.now, self.horizon) / self.horizon)
        self.now = self.horizon
        if self._lifeguard is not None:
            self._lifeguard.finish()
        if progress is not None:
            progress(1.0)

    # -- PCS --

    def _create_cluster(self) -> str:
        from lifeguard_cli.local import PcsApiError

        pcs = self.aws.pcs
        try:
            created = pcs.operate(
                "CreateCluster",
                {
                    "clusterName": self.prefix,
                    "scheduler": {"type": "SLURM", "version": "24.11"},
                    "size": "SMALL",
                    "networking": {"subnetIds": [SUBNET]},
                },
            )
        except PcsApiError as exc:
            raise ScenarioError(f"the local PCS refused the cluster: {exc}") from None
        return str(created["cluster"]["id"])

    def _create_group(self, spec: GroupSpec) -> _Group:
        from lifeguard_cli.local import PcsApiError

        request = {
            "clusterIdentifier": self.cluster_id,
            "computeNodeGroupName": spec.name,
            "subnetIds": [SUBNET],
            "customLaunchTemplate": {"id": "lt-0123456789abcdef0", "version": "1"},
            "iamInstanceProfileArn": f"arn:aws:iam::{ACCOUNT}:instance-profile/pcs-compute",
            "scalingConfiguration": {"minInstanceCount": spec.min, "maxInstanceCount": spec.max},
            "instanceConfigs": [{"instanceType": INSTANCE_TYPE}],
            "nodeLifecycleActions": dict(spec.config),
            **({"tags": dict(spec.tags)} if spec.tags else {}),
        }
        try:
            created = self.aws.pcs.operate("CreateComputeNodeGroup", request)
        except PcsApiError as exc:
            raise ScenarioError(f"group {spec.name}: PCS refuses its config: {exc}") from None
        group = created["computeNodeGroup"]
        return _Group(spec, str(group["id"]), dict(group.get("nodeLifecycleActions") or {}))

    def pcs_config(self, group: _Group) -> dict[str, Any]:
        """The group's nodeLifecycleActions as PCS holds them now."""
        found = self.aws.pcs.operate(
            "GetComputeNodeGroup",
            {"clusterIdentifier": self.cluster_id, "computeNodeGroupIdentifier": group.group_id},
        )
        return dict(found["computeNodeGroup"].get("nodeLifecycleActions") or {})

    def _operator_change(self, change: Any, attempt: int = 1) -> None:
        """The scenario's operator updates a group (again 30 s later while PCS says it is busy), and
        CloudTrail's record of the call goes on the default bus."""
        from lifeguard_cli.local import PcsApiError

        group = self.result.groups[change.group]
        request = {
            "clusterIdentifier": self.cluster_id,
            "computeNodeGroupIdentifier": group.group_id,
            "nodeLifecycleActions": dict(change.config),
        }
        try:
            answer = self.aws.pcs.operate("UpdateComputeNodeGroup", request)
        except PcsApiError as exc:
            if exc.code == "ConflictException" and attempt < 20:
                self.at(self.now + 30, lambda: self._operator_change(change, attempt + 1))
                return
            raise ScenarioError(f"changes at minute {change.at_minute:g}: PCS refuses it: {exc}") from None
        self._changed(group, by="scenario")
        if self._lifeguard is not None:
            self._lifeguard.cloudtrail(request, answer["computeNodeGroup"])

    def _watch_configs(self) -> None:
        for group in self.result.groups.values():
            if self.pcs_config(group) != group.config:
                self._changed(group, by="lifeguard")

    def _changed(self, group: _Group, *, by: str) -> None:
        """A new configuration of `group`: written down, and PCS replaces the nodes launched before it."""
        from lifeguard.lifecycle import NodeLifecycleActions, diff_configs

        before, after = group.config, self.pcs_config(group)
        group.config, group.revision = after, group.revision + 1
        diff = diff_configs(NodeLifecycleActions.from_api(before), NodeLifecycleActions.from_api(after))
        change: dict[str, Any] = {
            "at_minute": _minutes(self.now),
            "group": group.spec.name,
            "by": by,
            "diff": [entry.to_detail() for entry in diff],
        }
        if by == "lifeguard" and self._lifeguard is not None:
            change["action"] = self._lifeguard.last_action(group.group_id)
        self.result.changes.append(change)
        self.note(group.spec.name, f"config changed by {by}", "; ".join(entry.describe() for entry in diff))
        for instance in self.result.instances:
            if instance.group == group.spec.name and instance.alive and instance.revision < group.revision:
                self.at(self.now + self.timings.update_to_pending, functools.partial(self._pending, instance))

    # -- a node's life --

    def _launch(self, group: _Group, node: str) -> None:
        if group.protected_at is not None:
            return  # protected mode: the queue's nodes are no longer launched
        if self._capacity_short(group.spec.name):
            failed = Instance(group.spec.name, node, None, self.now, group.config, group.revision)
            failed.ended, failed.end = self.now, "INSUFFICIENT_CAPACITY"
            self.result.instances.append(failed)
            self._scaling(
                failed, "LAUNCH_FAILED", "INSUFFICIENT_CAPACITY", "launch failed insufficient capacity"
            )
            self.at(self.now + self.timings.capacity_retry, lambda: self._launch(group, node))
            return
        instance_id = f"i-{self.random.getrandbits(68):017x}"
        instance = Instance(
            group.spec.name, node, instance_id, self.now, self.pcs_config(group), group.revision
        )
        self.result.instances.append(instance)
        self._scaling(instance, "LAUNCHED", "MAINTAIN_MIN_CAPACITY", "launched maintain min capacity")
        self.at(self.now + self.timings.register, lambda: self._register(group, instance))

    def _register(self, group: _Group, instance: Instance) -> None:
        if not instance.alive or instance.pending_replacement:
            return
        instance.registered = self.now
        self._scaling(instance, "REGISTERED", "REGISTER_SUCCESS", "registered register success")
        self.at(self.now + self.timings.scripts_start, lambda: self._boot(group, instance))

    def _boot(self, group: _Group, instance: Instance) -> None:
        if not instance.alive or instance.pending_replacement:
            return
        exit_code, drained, seconds, ready, root = self._run_boot(group, instance)
        if ready is not None:
            # slurmd registers once nodeBootstrapped is over, and PCS logs the node ACTIVE then: nodeReady
            # runs after it (the article: ACTIVE at 00:57:52, its nodeReady check at 00:57:54; the node's
            # clock moved on between the stages), so a slow nodeReady script does not hold the node back
            # from jobs, and PCS logs the node ACTIVE before it knows how nodeReady ends: a TERMINATE
            # failure there ends a node that was ACTIVE.
            failing = exit_code not in (0, 3)
            self.at(
                self.now + ready + self.timings.active,
                lambda: self._active(group, instance, failing=failing),
            )
        # Nodes boot side by side: this boot's time delays this node only.
        self.at(self.now + seconds, lambda: self._booted(group, instance, exit_code, drained, root))

    def _booted(self, group: _Group, instance: Instance, exit_code: int, drained: bool, root: Path) -> None:
        """The boot is over: its reports go out, and PCS acts on its outcome (if it has not replaced the node
        meanwhile)."""
        instance.boot_failed = exit_code not in (0, 3)
        self._ship(group, instance, root)
        shutil.rmtree(root, ignore_errors=True)  # a node's disk goes with it
        if not instance.alive:
            return
        outcome = {0: "completed", 3: "a STOP_SEQUENCE failure", 4: "a TERMINATE failure"}.get(
            exit_code, f"exit {exit_code}"
        )
        drain = ", drained" if drained else ""
        self.note(group.spec.name, "boot", f"{instance.node} {instance.instance_id}: {outcome}{drain}")
        if drained:
            instance.drained = self.now
            if instance.active is not None:  # ACTIVE before its nodeReady (the drain step's) was over
                self._replace_if_drained(group, instance)
        if exit_code not in (0, 3):
            self.at(self.now + self.timings.fail_to_terminated, lambda: self._failed(group, instance))

    def _active(self, group: _Group, instance: Instance, *, failing: bool = False) -> None:
        # A node PCS put in PENDING_REPLACEMENT while it booted takes no jobs, as it neither registers nor
        # boots once pending: it is replaced without going ACTIVE, and never served.
        if not instance.alive or instance.pending_replacement:
            return
        instance.active = self.now
        if not failing:  # a node whose nodeReady fails under TERMINATE is one more failure in a row
            group.consecutive_failures = 0
        self._scaling(instance, "ACTIVE", "BOOTSTRAP_SUCCESS", "active bootstrap success")
        if instance.drained is not None:
            self._replace_if_drained(group, instance)

    def _replace_if_drained(self, group: _Group, instance: Instance) -> None:
        """PCS replaces an active static node that stays drained, as unhealthy (when the scenario says so)."""
        if self.scenario.replace_drained_nodes:
            self.at(self.now + self.timings.drained_to_unhealthy, lambda: self._unhealthy(group, instance))

    def _failed(self, group: _Group, instance: Instance) -> None:
        if not instance.alive:
            return
        self._end(instance, "BOOTSTRAP_FAILED", "Backing Instance Failed To Bootstrap")
        group.consecutive_failures += 1
        if self.options.protected_mode and group.consecutive_failures >= self.options.protected_after:
            group.protected_at = self.now
            self.note(
                group.spec.name,
                "protected mode",
                f"{group.consecutive_failures} bootstrap failures in a row: no more launches",
            )
        self.at(self.now + self.timings.relaunch, lambda: self._launch(group, instance.node))

    def _unhealthy(self, group: _Group, instance: Instance) -> None:
        if not instance.alive:
            return
        self._end(instance, "UNHEALTHY_NODE", "terminated unhealthy node")
        self.at(self.now + self.timings.relaunch, lambda: self._launch(group, instance.node))

    def _pending(self, instance: Instance) -> None:
        if not instance.alive or instance.pending_replacement:
            return
        instance.pending_replacement, instance.pending_at = True, self.now
        self._scaling(
            instance, "PENDING_REPLACEMENT", "NODE_GROUP_UPDATE", "pending replacement node group update"
        )
        self.at(self.now + self.timings.pending_to_terminated, lambda: self._replaced(instance))

    def _replaced(self, instance: Instance) -> None:
        if not instance.alive:
            return
        self._end(instance, "REPLACEMENT_REQUESTED", "terminated replacement requested")
        group = self.result.groups[instance.group]
        self.at(self.now + self.timings.replacement_launch, lambda: self._launch(group, instance.node))

    def _end(self, instance: Instance, reason: str, description: str) -> None:
        instance.ended, instance.end = self.now, reason
        self._scaling(instance, "TERMINATED", reason, description)

    def _capacity_short(self, group: str) -> bool:
        minute = self.now / 60
        return any(
            fault.kind == "insufficient_capacity"
            and fault.at_minute <= minute
            and (fault.until_minute is None or minute < fault.until_minute)
            and fault.group in (None, group)
            for fault in self.scenario.faults
        )

    def _run_boot(self, group: _Group, instance: Instance) -> tuple[int, bool, float, float | None, Path]:
        """`lifeguard-node boot` on the node's configuration: the exit status, whether the node was drained,
        the boot's virtual seconds, those until nodeBootstrapped was over (None when the node never got to
        nodeReady: a TERMINATE failure in nodeBootstrapped, or a boot that did not run), and the node's
        root."""
        self._within_budget()
        self.result.boots += 1
        home = self.workdir / self.prefix / f"{instance.node}-{instance.instance_id}"
        root = home / "root"
        root.mkdir(parents=True)
        (home / "actions.json").write_text(json.dumps(instance.config))
        tools = home / "bin"  # first on the scripts' PATH: the node's Slurm, as far as scripts see it
        tools.mkdir()
        for name, text in (("scontrol", _SCONTROL), ("systemctl", _SYSTEMCTL), ("date", _DATE)):
            (tools / name).write_text(text)
            (tools / name).chmod(0o755)
        scontrol = tools / "scontrol"
        slurm_log = home / "slurm.log"
        began, started = time.time(), time.monotonic()
        offset = self.moment().timestamp() - began  # the node's clock runs on the twin's
        ready_after = self.timings.active + READY_AFTER_ACTIVE_SECONDS
        env = {
            **self.aws.environ(),
            "PATH": f"{tools}:{os.environ.get('PATH', '/usr/bin:/bin')}",
            "HOME": str(home),
            "LANG": "C.UTF-8",
            "LIFEGUARD_SIM_CLOCK_OFFSET_SECONDS": f"{offset:.3f}",
            "LIFEGUARD_SIM_READY_AFTER_SECONDS": f"{ready_after:.3f}",
            "LIFEGUARD_SIM_SEED": str(self.options.seed),
            "LIFEGUARD_SIM_BOOT": str(self.result.boots),
            "LIFEGUARD_SIM_SLURM_LOG": str(slurm_log),
            "LIFEGUARD_SCONTROL": str(scontrol),
            # An https script is fetched through a proxy that is not there: refused at once, on this
            # machine. The twin runs no script from the internet (its local AWS is reached over http).
            "https_proxy": NO_NETWORK,
            "HTTPS_PROXY": NO_NETWORK,
            "LIFEGUARD_NODE_ROOT": str(root),
            "LIFEGUARD_INSTANCE_ID": instance.instance_id or "",
            "LIFEGUARD_FETCH_BACKOFF_SECONDS": "0.05",
            "LIFEGUARD_DRAIN_WATCH_SECONDS": "10",
            # Scripts run in real time: one that hangs is stopped (exit 124) rather than the simulation.
            "LIFEGUARD_SCRIPT_TIMEOUT_SECONDS": str(SCRIPT_TIMEOUT_SECONDS),
        }
        argv = [
            "boot",
            "--config",
            str(home / "actions.json"),
            "--root",
            str(root),
            "--node-id",
            instance.node,
            "--cluster-id",
            self.cluster_id,
            "--cluster-name",
            self.prefix,
            "--compute-node-group-id",
            group.group_id,
            "--compute-node-group-name",
            group.spec.name,
        ]
        exit_code = self.host.boot(argv, env, home / "boot.out")
        self._boot_seconds += time.monotonic() - started
        self._hung_boots += _ran_out_of_time(root)
        quanta = max(1, math.ceil((time.monotonic() - started) / BOOT_QUANTUM_SECONDS))
        _wait_for_watcher(root)
        seconds = BOOT_QUANTUM_SECONDS * quanta
        # Slurm takes `state=drain` in any case, as `scontrol update nodename=X state=drain` writes it.
        drained = slurm_log.exists() and "state=drain" in slurm_log.read_text().lower()
        executor_log = root / "var/log/amazon/pcs/lifecycle/actions/executor.log"
        bootstrapped = _stage_over(executor_log, "nodeBootstrapped")
        if exit_code not in (0, 3) and (
            exit_code != 4 or not executor_log.is_file() or _terminated_in(executor_log, "nodeBootstrapped")
        ):
            return exit_code, drained, seconds, None, root
        ready = 0.0
        if bootstrapped is not None:
            # Whole quanta it took (none for quick scripts): ACTIVE comes `active` after the scripts start
            # then, as in the article (00:57:27 to 00:57:52).
            ready = min(
                seconds,
                BOOT_QUANTUM_SECONDS
                * math.floor(max(0.0, bootstrapped - offset - began) / BOOT_QUANTUM_SECONDS),
            )
        # nodeReady ran `ready_after` later on the node's clock than the real time it took (the executor
        # moved the clock on between the stages): the boot is over that much later.
        return exit_code, drained, seconds + ready_after, ready, root

    def _within_budget(self) -> None:
        """Refuse the next boot past the run's budget of boots or of real time in them (MAX_BOOTS)."""
        minute = self.now / 60
        if self.result.boots >= MAX_BOOTS:
            spent = f"{MAX_BOOTS:,} node boots by minute {minute:.1f}"
        elif self._boot_seconds > MAX_BOOT_SECONDS:
            spent = f"{MAX_BOOT_SECONDS:.0f} s of real time in its nodes' scripts by minute {minute:.1f}"
        else:
            return
        advice = "give horizon_minutes fewer minutes, the groups fewer nodes, or timings a longer cycle"
        if self._hung_boots:  # not the scenario's size: a script that hangs, stopped at its limit each boot
            advice = (
                f"{self._hung_boots} of its boots ran a script into its {SCRIPT_TIMEOUT_SECONDS} s limit "
                "(exit 124, in their logs): a script that hangs"
            )
        raise ScenarioError(
            f"{self.scenario.name}: the {self.options.label} run took {spent} (each boot runs the real "
            f"scripts): {advice}"
        )

    def _ship(self, group: _Group, instance: Instance, root: Path) -> None:
        """The node's reports to the node-report log group, by the real shipper, on the twin's clock."""
        from lifeguard.node.layout import NodeLayout
        from lifeguard.node.shipper import CloudWatchSink, Shipper, ShipperIdentity

        identity = ShipperIdentity(self.cluster_id, group.group_id, instance.instance_id or "", instance.node)
        sink = CloudWatchSink(
            self.report_log, identity.stream, self._logs, clock=lambda: self.moment().timestamp()
        )
        # A twin's node boots on the twin's clock, not this machine's kernel: its executor says its boots.
        shipper = Shipper(NodeLayout(root), identity, sink, boot=lambda: None)
        shipper.run(once=True)
        self._written(self.report_log, identity.stream)

    # -- the scaling log and its delivery --

    def _scaling(self, instance: Instance, status: str, reason: str, description: str) -> None:
        group = self.result.groups[instance.group]
        details = {"instance_type": INSTANCE_TYPE, "subnet_id": SUBNET}
        if instance.instance_id is not None:
            details = {"instance_id": instance.instance_id, **details}
        record = {
            "resource_id": self.cluster_id,
            "resource_type": "PCS_CLUSTER",
            "event_timestamp": int(self.moment().timestamp() * 1000),
            "compute_node_group_id": group.group_id,
            "scheduler_node_id": instance.node,
            "status_code": status,
            "reason_code": reason,
            "description": description,
            "details": details,
        }
        self._put(self.scaling_log, self.scaling_stream, json.dumps(record))
        self.note(
            instance.group, f"{status}/{reason}", f"{instance.node} {instance.instance_id or ''}".strip()
        )

    def _put(self, log_group: str, stream: str, message: str) -> None:
        if (log_group, stream) not in self._tokens:
            self._logs.create_log_stream(logGroupName=log_group, logStreamName=stream)
            self._tokens[(log_group, stream)] = None
        event = {"timestamp": int(self.moment().timestamp() * 1000), "message": message}
        self._logs.put_log_events(logGroupName=log_group, logStreamName=stream, logEvents=[event])
        self._written(log_group, stream)

    def _written(self, log_group: str, stream: str) -> None:
        """A stream received events: its subscription delivers them `timings.delivery` seconds later."""
        self._tokens.setdefault((log_group, stream), None)
        key = (log_group, stream)
        if key in self._due or self._lifeguard is None:
            return
        self._due.add(key)
        delay = self.timings.delivery + sum(f.seconds for f in self._active_faults("log_delay"))
        self.at(self.now + delay, lambda: self._deliver(key))

    def _deliver(self, key: tuple[str, str]) -> None:
        if self._active_faults("log_reorder"):
            if not self._held:
                until = min(
                    f.until_minute or self.scenario.horizon_minutes
                    for f in self._active_faults("log_reorder")
                )
                self.at(until * 60, self._release)
            self._held.append(key)
            return
        self._due.discard(key)
        for payload in self._read(key):
            copies = 2 if self._active_faults("log_duplicate") else 1
            for _ in range(copies):
                self._lifeguard.deliver(key[0] == self.report_log, payload)

    def _release(self) -> None:
        """Deliveries held by a reorder fault: every held log event in a payload of its own, newest first."""
        from lifeguard.log_subscription import encode_subscription

        held, self._held = self._held, []
        events: list[tuple[int, int, str, str, str]] = []
        for key in held:
            self._due.discard(key)
            for number, (timestamp, message) in enumerate(self._new_events(key)):
                events.append((timestamp, number, key[0], key[1], message))
        for timestamp, number, log_group, stream, message in sorted(events, reverse=True):
            payload = encode_subscription(log_group, stream, [(timestamp, message)], first_id=number)
            copies = 2 if self._active_faults("log_duplicate") else 1
            for _ in range(copies):
                self._lifeguard.deliver(log_group == self.report_log, payload)

    def _read(self, key: tuple[str, str]) -> list[dict[str, Any]]:
        """What the stream received since the last delivery, as subscription payloads."""
        from lifeguard.log_subscription import encode_subscription

        events = self._new_events(key)
        return [
            encode_subscription(key[0], key[1], events[start : start + MAX_DELIVERY_EVENTS], first_id=start)
            for start in range(0, len(events), MAX_DELIVERY_EVENTS)
        ]

    def _new_events(self, key: tuple[str, str]) -> list[tuple[int, str]]:
        """The stream's events since the last read (GetLogEvents, from the token kept)."""
        log_group, stream = key
        events: list[tuple[int, str]] = []
        token = self._tokens.get(key)
        while True:
            request: dict[str, Any] = {
                "logGroupName": log_group,
                "logStreamName": stream,
                "startFromHead": True,
            }
            if token is not None:
                request["nextToken"] = token
            try:
                answer = self._logs.get_log_events(**request)
            except self._logs.exceptions.ResourceNotFoundException:
                if token is not None:
                    raise
                break  # a node that ran no script shipped no report: its stream was never made
            events.extend((event["timestamp"], event["message"]) for event in answer.get("events", []))
            if answer.get("nextForwardToken") in (None, token):
                break
            token = answer["nextForwardToken"]
            if not answer.get("events"):
                break
        self._tokens[key] = token
        return events

    # -- faults --

    def _active_faults(self, kind: str) -> list[Fault]:
        minute = self.now / 60
        return [
            fault
            for fault in self.scenario.faults
            if fault.kind == kind
            and fault.at_minute <= minute
            and (fault.until_minute is None or minute < fault.until_minute)
        ]

    def _arm(self, fault: Fault) -> None:
        entry = {"kind": fault.kind, "at_minute": fault.at_minute}
        self.result.faults.append(entry)
        if self._lifeguard is not None:
            self._lifeguard.arm(fault)
        self.note(
            "",
            f"fault: {fault.kind}",
            json.dumps(_fault_as_written(fault)),
        )

    # -- the timeline --

    def note(self, group: str, what: str, detail: str) -> None:
        """A line of the run's timeline."""
        self.result.timeline.append(
            {"minute": _minutes(self.now), "group": group, "what": what, "detail": detail}
        )


def _fault_as_written(fault: Fault) -> dict[str, Any]:
    """A fault as a scenario writes it: its kind, its minute (0 too), and the keys its kind takes that hold
    a value (a lasting fault has no `times`)."""
    takes = FAULT_KINDS[fault.kind][0]
    given = {k: v for k, v in fault.__dict__.items() if k in takes and v is not None}
    return {"kind": fault.kind, "at_minute": fault.at_minute, **given}


def _executor_records(executor_log: Path) -> Iterator[dict[str, Any]]:
    """The node's executor.log records, as JSON objects (lines that are not are passed over); none when it
    cannot be read."""
    try:
        lines = executor_log.read_text(errors="replace").splitlines()
    except OSError:
        return
    for line in lines:
        try:
            record = json.loads(line)
        except ValueError:
            continue
        if isinstance(record, dict):
            yield record


def _stage_over(executor_log: Path, stage: str) -> float | None:
    """When the node's executor.log last wrote of `stage` (epoch seconds on the node's clock): the stage was
    over then. None when it wrote nothing of it."""
    last = None
    for record in _executor_records(executor_log):
        if record.get("stage") != stage:
            continue
        try:
            at = datetime.fromisoformat(record["timestamp"]).timestamp()
        except (ValueError, TypeError, KeyError):
            continue
        last = at if last is None else max(last, at)
    return last


def _terminated_in(executor_log: Path, stage: str) -> bool:
    """Whether a script of `stage` failed under onError TERMINATE, as the node's executor.log says (the
    boot ended there; the later stage's scripts were skipped)."""
    return any(
        record.get("stage") == stage
        and record.get("level") == "ERROR"
        and record.get("on_error") == "Terminate"
        for record in _executor_records(executor_log)
    )


def _ran_out_of_time(root: Path) -> bool:
    """Whether a script of the boot in `root` was stopped at its time limit (exit 124: the executor logs it
    as `timed out after`), not only slow: a boot of slow scripts under the limit hangs nothing."""
    from lifeguard.node.layout import NodeLayout

    try:
        return b"timed out after" in NodeLayout(root).executor_log.read_bytes()
    except OSError:
        return False


def _wait_for_watcher(root: Path, seconds: float = 5.0) -> None:
    """A drain step that found nothing left a watcher that ends at the boot's end record: wait for its
    last word, so a drain it made is seen with this boot."""
    from lifeguard.node.layout import NodeLayout

    log = NodeLayout(root).drain_watch_log
    deadline = time.monotonic() + seconds
    while log.exists() and time.monotonic() < deadline:
        text = log.read_text(errors="replace")
        if "drained:" in text or "lifeguard-node drain:" in text:
            return
        time.sleep(0.01)


def scripts_for(scenario: Scenario, s3: Any) -> None:
    """The scenario's scripts in the twin's S3, as its configs name them."""
    with contextlib.suppress(s3.exceptions.BucketAlreadyOwnedByYou):
        s3.create_bucket(Bucket=SCRIPTS_BUCKET)
    # Runs of one simulation share the bucket: a script another scenario left is not this one's.
    for page in s3.get_paginator("list_objects_v2").paginate(Bucket=SCRIPTS_BUCKET):
        for found in page.get("Contents", []):
            s3.delete_object(Bucket=SCRIPTS_BUCKET, Key=found["Key"])
    for name, content in scenario.scripts.items():
        s3.put_object(Bucket=SCRIPTS_BUCKET, Key=name, Body=content)


def iter_groups(run: TwinRun) -> Iterator[tuple[str, dict[str, Any]]]:
    """Each group's summary, in the scenario's order."""
    for name in run.groups:
        yield name, run.group_summary(name)


def acting_modes(document: Mapping[str, Any]) -> str:
    """The modes Lifeguard acted in during a run, as its column is headed (`quarantine`, or
    `quarantine, revert` where a group's `lifeguard:mode` tag said otherwise): the modes its events carry,
    in order, else the stack's default."""
    modes: list[str] = []
    for event in document.get("events") or []:
        mode = (event.get("detail") or {}).get("mode")
        if isinstance(mode, str) and mode not in modes:
            modes.append(mode)
    return ", ".join(modes) or str(document["mode"])
