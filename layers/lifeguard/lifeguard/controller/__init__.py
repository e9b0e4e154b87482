"""The controller: what the Lambdas do, wired from the environment.

Environment (explicit argument > variable > default, as everywhere):
`LIFEGUARD_TABLE` (required), `LIFEGUARD_EVENT_BUS` (default `default`), `LIFEGUARD_DEFAULT_MODE`
(`notify`), `LIFEGUARD_THRESHOLD` (2), `LIFEGUARD_WINDOW_MINUTES` (60).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from lifeguard.aws.clients import aws_client
from lifeguard.aws.events import EventPublisher
from lifeguard.aws.pcs import PcsGateway
from lifeguard.controller.node_reports import NodeReportsController, ReportsSummary
from lifeguard.controller.scaling_events import BatchSummary, ScalingEventsController
from lifeguard.controller.updater import Change, GroupUpdater
from lifeguard.detection import DetectionSettings
from lifeguard.errors import LifeguardError
from lifeguard.settings import setting
from lifeguard.state import StateStore

__all__ = [
    "BatchSummary",
    "Change",
    "GroupUpdater",
    "NodeReportsController",
    "ReportsSummary",
    "ScalingEventsController",
    "Wiring",
    "build_node_reports",
    "build_scaling_events",
    "wire",
]

Metric = Callable[[str, float], None]


@dataclass(frozen=True)
class Wiring:
    """The AWS side of the controller: state, PCS and events."""

    store: StateStore
    pcs: PcsGateway
    updater: GroupUpdater
    defaults: DetectionSettings


def wire(table: str | None = None, event_bus: str | None = None) -> Wiring:
    """Clients and settings from the environment (one client per service per process)."""
    table_name = setting("table", table, "", str)
    if not table_name:
        raise LifeguardError("LIFEGUARD_TABLE is not set: the name of Lifeguard's DynamoDB table")
    store = StateStore(aws_client("dynamodb"), table_name)
    publisher = EventPublisher(aws_client("events"), setting("event_bus", event_bus, "default", str))
    return Wiring(
        store,
        PcsGateway(aws_client("pcs")),
        GroupUpdater(store, publisher),
        DetectionSettings.stack_defaults(),
    )


def build_scaling_events(
    wiring: Wiring | None = None, *, metric: Metric | None = None
) -> ScalingEventsController:
    """The scaling_events Lambda's controller."""
    w = wiring or wire()
    return ScalingEventsController(w.store, w.pcs, w.updater, w.defaults, metric=metric)


def build_node_reports(
    wiring: Wiring | None = None, *, metric: Metric | None = None
) -> NodeReportsController:
    """The node_reports Lambda's controller."""
    w = wiring or wire()
    return NodeReportsController(w.store, w.updater, w.defaults, metric=metric)
