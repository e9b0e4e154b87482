"""Lambda: the PCS scaling log (CloudWatch Logs subscription) in, BootstrapLoopDetected / LoopResolved out."""

from __future__ import annotations

from typing import Any

from aws_lambda_powertools import Logger, Metrics
from aws_lambda_powertools.logging.utils import copy_config_to_registered_loggers
from aws_lambda_powertools.metrics import MetricUnit
from aws_lambda_powertools.utilities.typing import LambdaContext

from lifeguard.wiring import build_scaling_events, settle_collector

logger = Logger()
metrics = Metrics()
copy_config_to_registered_loggers(source_logger=logger, include={"lifeguard"})
handler = build_scaling_events(
    metric=lambda name, value: metrics.add_metric(name=name, unit=MetricUnit.Count, value=value)
)
settle_collector()


@logger.inject_lambda_context
@metrics.log_metrics
def lambda_handler(event: dict[str, Any], context: LambdaContext) -> dict[str, Any]:
    """Detect loops in one batch of scaling-log records."""
    return handler.handle_event(event).to_dict()
