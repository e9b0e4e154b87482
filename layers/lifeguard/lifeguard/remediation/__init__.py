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
from lifeguard.remediation.controller import (
    LoopDetection,
    RemediationBusyError,
    RemediationController,
    RemediationParkedError,
    RemediationSettings,
    undo_command,
)
from lifeguard.remediation.ledger import AppliedChange, AuditEntry, Decision, Ledger, RemediationStore

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
    "RemediationController",
    "RemediationParkedError",
    "RemediationSettings",
    "RemediationStore",
    "action_for",
    "undo_command",
]
