"""Lambda: PCS's CreateComputeNodeGroup / UpdateComputeNodeGroup calls (CloudTrail, on the account's
default bus) in; ConfigChangeReviewed, and who made the change, out."""

from __future__ import annotations

from typing import Any

from aws_lambda_powertools import Logger, Metrics
from aws_lambda_powertools.logging.utils import copy_config_to_registered_loggers
from aws_lambda_powertools.metrics import MetricUnit
from aws_lambda_powertools.utilities.typing import LambdaContext

from lifeguard.envelope import eventbridge_only
from lifeguard.wiring import build_config_review

logger = Logger()
metrics = Metrics()
copy_config_to_registered_loggers(source_logger=logger, include={"lifeguard"})


def count(name: str, value: float) -> None:
    """Count one thing: a metric of this invocation, sent when it ends."""
    metrics.add_metric(name=name, unit=MetricUnit.Count, value=value)


reviewer = build_config_review(metric=count)
handler = reviewer


@logger.inject_lambda_context
@metrics.log_metrics
@eventbridge_only(count)
def lambda_handler(event: dict[str, Any], context: LambdaContext) -> dict[str, Any]:
    """Review one configuration call; raises only on a transient AWS failure, so the event is retried. A
    call recorded in another account or made in another region (CloudTrail events forwarded between
    buses) is not this stack's."""
    _, _, _, region, account, *_ = context.invoked_function_arn.split(":")
    return reviewer.handle_event(event, account=account, region=region).to_dict()
