"""Remediation: the detection it acts on (`loop_detection`), its settings, the registered actions
(quarantine, revert, notify: `actions`), the rails around them (`rails`), how a change is made and recorded
(`apply`), what it writes down (`records`), and the remediator that does it all per detection."""

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
from lifeguard.remediation.loop_detection import LoopDetection
from lifeguard.remediation.records import AppliedChange, AuditEntry, Decision, Ledger
from lifeguard.remediation.remediator import (
    RemediationBusyError,
    RemediationParkedError,
    Remediator,
    undo_command,
)
from lifeguard.remediation.settings import RemediationSettings

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
