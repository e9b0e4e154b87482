"""Notifications: every controller event to SNS and Slack, each channel on its own."""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from lifeguard.notify.notifier import Channel, NotificationError, Notifier, NotifyResult
    from lifeguard.notify.slack import SecretWebhook, SlackChannel, SlackError, slack_message
    from lifeguard.notify.sns import SnsChannel, sns_message
    from lifeguard.notify.summary import SEVERITY, Summary, summarize

# Each name is imported from its module when first asked for: what imports one part loads no other.
_HOMES = {
    "Channel": "lifeguard.notify.notifier",
    "NotificationError": "lifeguard.notify.notifier",
    "Notifier": "lifeguard.notify.notifier",
    "NotifyResult": "lifeguard.notify.notifier",
    "SEVERITY": "lifeguard.notify.summary",
    "SecretWebhook": "lifeguard.notify.slack",
    "SlackChannel": "lifeguard.notify.slack",
    "SlackError": "lifeguard.notify.slack",
    "SnsChannel": "lifeguard.notify.sns",
    "Summary": "lifeguard.notify.summary",
    "slack_message": "lifeguard.notify.slack",
    "sns_message": "lifeguard.notify.sns",
    "summarize": "lifeguard.notify.summary",
}

__all__ = [
    "SEVERITY",
    "Channel",
    "NotificationError",
    "Notifier",
    "NotifyResult",
    "SecretWebhook",
    "SlackChannel",
    "SlackError",
    "SnsChannel",
    "Summary",
    "slack_message",
    "sns_message",
    "summarize",
]


def __getattr__(name: str) -> Any:
    home = _HOMES.get(name)
    if home is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    return getattr(importlib.import_module(home), name)
