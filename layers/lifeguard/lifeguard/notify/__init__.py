"""Notifications: every controller event to SNS and Slack, each channel on its own."""

from __future__ import annotations

from lifeguard.notify.notifier import Channel, NotificationError, Notifier, NotifyResult
from lifeguard.notify.slack import SecretWebhook, SlackChannel, SlackError, slack_message
from lifeguard.notify.sns import SnsChannel, sns_message
from lifeguard.notify.summary import SEVERITY, Summary, summarize

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
