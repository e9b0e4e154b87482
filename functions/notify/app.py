"""Lambda: every `lifeguard` event in; SNS and Slack messages out, each channel on its own."""

from __future__ import annotations

import time
from typing import Any

from aws_lambda_powertools import Logger, Metrics
from aws_lambda_powertools.logging.utils import copy_config_to_registered_loggers
from aws_lambda_powertools.metrics import MetricUnit
from aws_lambda_powertools.utilities.typing import LambdaContext

from lifeguard.envelope import eventbridge_only
from lifeguard.wiring import build_notify

logger = Logger()
metrics = Metrics()
copy_config_to_registered_loggers(source_logger=logger, include={"lifeguard"})


def count(name: str, value: float) -> None:
    """Count one thing: a metric of this invocation, sent when it ends."""
    metrics.add_metric(name=name, unit=MetricUnit.Count, value=value)


# When the running invocation must have ended (time.monotonic()): Slack's pacing takes no slot it could
# not wait for.
_deadline = {"at": float("inf")}
notifier = build_notify(
    metric=count,
    time_left=lambda: _deadline["at"] - time.monotonic(),
)


@logger.inject_lambda_context
@metrics.log_metrics
@eventbridge_only(count)
def lambda_handler(event: dict[str, Any], context: LambdaContext) -> dict[str, Any]:
    """Notify one event; raises when a channel failed after its retries, so the event is retried."""
    _deadline["at"] = time.monotonic() + context.get_remaining_time_in_millis() / 1000
    return notifier.handle_event(event).to_dict()
