"""Lambda: BootstrapLoopDetected in; the remediation, with rails, out (RemediationApplied/Skipped/Failed)."""

from __future__ import annotations

from typing import Any

from aws_lambda_powertools import Logger, Metrics
from aws_lambda_powertools.logging.utils import copy_config_to_registered_loggers
from aws_lambda_powertools.metrics import MetricUnit
from aws_lambda_powertools.utilities.typing import LambdaContext

from lifeguard.envelope import eventbridge_only
from lifeguard.wiring import build_remediate

logger = Logger()
metrics = Metrics()
copy_config_to_registered_loggers(source_logger=logger, include={"lifeguard"})


def count(name: str, value: float) -> None:
    """Count one thing: a metric of this invocation, sent when it ends."""
    metrics.add_metric(name=name, unit=MetricUnit.Count, value=value)


remediator = build_remediate(metric=count)


@logger.inject_lambda_context
@metrics.log_metrics
@eventbridge_only(count)
def lambda_handler(event: dict[str, Any], context: LambdaContext) -> dict[str, Any]:
    """Remediate one detection; a failure that outlasts its retries raises, so the event is parked."""
    events = remediator.handle_event(event, remaining_ms=context.get_remaining_time_in_millis())
    return {"events": [{"detail-type": e.detail_type, "detail": dict(e.detail)} for e in events]}
