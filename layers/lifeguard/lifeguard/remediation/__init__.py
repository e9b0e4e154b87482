"""Remediation: registered actions (quarantine, revert, notify), the rails around them, and their ledger."""

from __future__ import annotations

from lifeguard.remediation.actions import (
    ACTIONS,
    DRAIN_SCRIPT_NAME,
    ActionContext,
    NodeBundle,
    Plan,
    RemediationAction,
    action_for,
)
from lifeguard.remediation.records import AppliedChange, AuditEntry, Decision, Ledger
from lifeguard.remediation.remediator import (
    LoopDetection,
    RemediationBusyError,
    RemediationParkedError,
    RemediationSettings,
    Remediator,
    undo_command,
)

__all__ = [
    "ACTIONS",
    "DRAIN_SCRIPT_NAME",
    "ActionContext",
    "AppliedChange",
    "AuditEntry",
    "Decision",
    "Ledger",
    "LoopDetection",
    "NodeBundle",
    "Plan",
    "RemediationAction",
    "RemediationBusyError",
    "RemediationParkedError",
    "RemediationSettings",
    "Remediator",
    "action_for",
    "undo_command",
]
