"""Lambda: node reports (CloudWatch Logs subscription) in; failed runs stored, open episodes attributed."""

from __future__ import annotations

from typing import Any

from aws_lambda_powertools import Logger, Metrics
from aws_lambda_powertools.logging.utils import copy_config_to_registered_loggers
from aws_lambda_powertools.metrics import MetricUnit
from aws_lambda_powertools.utilities.typing import LambdaContext

from lifeguard.wiring import build_node_reports, settle_collector

logger = Logger()
metrics = Metrics()
copy_config_to_registered_loggers(source_logger=logger, include={"lifeguard"})
handler = build_node_reports(
    metric=lambda name, value: metrics.add_metric(name=name, unit=MetricUnit.Count, value=value)
)
settle_collector()


@logger.inject_lambda_context
@metrics.log_metrics
def lambda_handler(event: dict[str, Any], context: LambdaContext) -> dict[str, Any]:
    """Store one batch of node reports and name the suspect of open episodes."""
    return handler.handle_event(event).to_dict()
