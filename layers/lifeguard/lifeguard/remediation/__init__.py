"""Remediation: the detection it acts on (`loop_detection`), its settings, the registered actions
(quarantine, revert, notify: `actions`), the rails around them (`rails`), how a change is made and recorded
(`apply`), what it writes down (`records`), and the remediator that does it all per detection."""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
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

# Each name is imported from its module when first asked for: a handler that needs the ledger's records
# (`lifeguard.store.remediations`) does not load the remediator, its actions and rails.
_HOMES = {
    "ACTIONS": "lifeguard.remediation.actions",
    "ActionContext": "lifeguard.remediation.actions",
    "AppliedChange": "lifeguard.remediation.records",
    "AuditEntry": "lifeguard.remediation.records",
    "DRAIN_SCRIPT_NAME": "lifeguard.remediation.actions",
    "Decision": "lifeguard.remediation.records",
    "Ledger": "lifeguard.remediation.records",
    "LoopDetection": "lifeguard.remediation.loop_detection",
    "NodeBundle": "lifeguard.remediation.actions",
    "Plan": "lifeguard.remediation.actions",
    "RemediationAction": "lifeguard.remediation.actions",
    "RemediationBusyError": "lifeguard.remediation.remediator",
    "RemediationParkedError": "lifeguard.remediation.remediator",
    "RemediationSettings": "lifeguard.remediation.settings",
    "Remediator": "lifeguard.remediation.remediator",
    "action_for": "lifeguard.remediation.actions",
    "undo_command": "lifeguard.remediation.remediator",
}

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


def __getattr__(name: str) -> Any:
    home = _HOMES.get(name)
    if home is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    return getattr(importlib.import_module(home), name)
