"""Remediation's stack-wide settings: the default mode, dry run, cooldown, daily cap, draining kept nodes
and the node bundle (explicit > LIFEGUARD_* environment > default), and the waits and retries of one
invocation."""

from __future__ import annotations

import re
from typing import Any

from lifeguard.bounds import FINGERPRINT_PATTERN
from lifeguard.detection import DEFAULT_MODE, stack_mode
from lifeguard.remediation.actions import NodeBundle
from lifeguard.settings import bounded_setting, cluster_ids, setting
from lifeguard.values import frozen

__all__ = ["DEFAULT_COOLDOWN_MINUTES", "DEFAULT_DAILY_CAP", "RemediationSettings"]

# The stack's defaults (template.yaml's CooldownMinutes and DailyCap say the same).
DEFAULT_COOLDOWN_MINUTES = 30.0
DEFAULT_DAILY_CAP = 3


@frozen
class RemediationSettings:
    """Stack-wide remediation settings (explicit > LIFEGUARD_* environment > default)."""

    default_mode: str = DEFAULT_MODE
    dry_run: bool = False
    cooldown_seconds: float = DEFAULT_COOLDOWN_MINUTES * 60
    daily_cap: int = DEFAULT_DAILY_CAP
    # Quarantine adds a drain step (the node bundle, pinned) only when kept nodes are to be drained.
    drain_kept_nodes: bool = False
    node_bundle: NodeBundle | None = None
    # The stack's ClusterIds: a detection of a group of another cluster changes nothing (empty: any cluster).
    clusters: frozenset[str] = frozenset()
    # A second revision's remediation waits for the first's, which may hold the lock while its group is
    # UPDATING (`update_wait_seconds`) and for its calls: with 30 s and Lambda's two retries it covered
    # about 4.5 minutes, and a holder that took longer had the later revision parked as busy, paging.
    lock_wait_seconds: float = 300.0
    # When the invocation's remaining time is not known: the function's timeout (template.yaml).
    invocation_seconds: float = 600.0
    # Kept back from every wait: what recording, auditing and publishing a decision takes.
    reserve_seconds: float = 30.0
    # The lease ends this long after the invocation must have: before Lambda's first retry (a minute).
    lease_margin_seconds: float = 5.0
    retry_attempts: int = 6
    update_wait_seconds: float = 240.0
    update_poll_seconds: float = 10.0
    retry_base_seconds: float = 1.0
    retry_max_seconds: float = 20.0
    max_retry_after_seconds: float = 60.0

    @classmethod
    def from_environment(cls, **explicit: Any) -> RemediationSettings:
        """LIFEGUARD_DEFAULT_MODE, _DRY_RUN, _COOLDOWN_MINUTES, _DAILY_CAP, _DRAIN_KEPT_NODES, _CLUSTER_IDS,
        and the node bundle: _NODE_BUNDLE (its location), _NODE_BUNDLE_VERSION, _NODE_BUNDLE_SHA256."""
        location = setting("node_bundle", None, "", str)
        bundle = explicit.get("node_bundle") or (
            NodeBundle(
                location,
                setting("node_bundle_version", None, "", str) or None,
                setting("node_bundle_sha256", None, "", _sha256) or None,
            )
            if location
            else None
        )
        return cls(
            default_mode=stack_mode(explicit.get("default_mode")),
            dry_run=setting("dry_run", explicit.get("dry_run"), False, _flag),
            cooldown_seconds=60
            * bounded_setting(
                "cooldown_minutes",
                explicit.get("cooldown_minutes"),
                DEFAULT_COOLDOWN_MINUTES,
                float,
                least=0.0,
                most=COOLDOWN_MINUTES_MAX,
            ),
            daily_cap=bounded_setting(
                "daily_cap", explicit.get("daily_cap"), DEFAULT_DAILY_CAP, int, least=1, most=DAILY_CAP_MAX
            ),
            drain_kept_nodes=setting("drain_kept_nodes", explicit.get("drain_kept_nodes"), False, _flag),
            node_bundle=bundle,
            clusters=cluster_ids(explicit.get("cluster_ids")),
        )

    @property
    def drain_bundle(self) -> NodeBundle | None:
        """The bundle a quarantine's drain step runs, or None when kept nodes are not drained."""
        return self.node_bundle if self.drain_kept_nodes else None


# The template's bounds of CooldownMinutes and DailyCap: a value past them (an environment edited by hand:
# a NaN cooldown held nothing back, a cap of 0 held everything) is refused at import, naming it.
COOLDOWN_MINUTES_MAX, DAILY_CAP_MAX = 7.0 * 24 * 60, 100


def _sha256(raw: str) -> str:
    value = raw.strip().lower()
    if not re.fullmatch(FINGERPRINT_PATTERN, value):
        raise ValueError("expected a sha256: 64 hexadecimal digits")
    return value


def _flag(raw: str) -> bool:
    value = raw.strip().lower()
    if value in ("true", "1", "yes"):
        return True
    if value in ("false", "0", "no"):
        return False
    raise ValueError("expected true or false")
