"""How any change of a group's lifecycle actions is made, by remediation and by `lifeguard undo` alike:
the intent is saved in the group's ledger (pending, with its clientToken) before PCS is asked, and marked
applied once PCS took it. A change lost between the two is recognised later by its fingerprints."""

from __future__ import annotations

from collections.abc import Callable

from lifeguard.aws.pcs import GroupSnapshot, PcsGateway
from lifeguard.remediation.records import AppliedChange, Ledger
from lifeguard.store.remediations import RemediationStore

__all__ = ["ChangeMaker"]

Retrying = Callable[[Callable[[], GroupSnapshot]], GroupSnapshot]


class ChangeMaker:
    """Makes recorded changes of compute node groups: the ledger in Lifeguard's table, the change in PCS."""

    def __init__(self, store: RemediationStore, pcs: PcsGateway) -> None:
        self.store = store
        self.pcs = pcs

    def record(self, cluster_id: str, group_id: str, *, ledger: Ledger, intent: AppliedChange) -> None:
        """Save `intent` as pending in the group's ledger, before PCS is asked to make it."""
        intent.status = "pending"
        ledger.changes.append(intent)
        self.store.save_ledger(cluster_id, group_id, ledger)

    def ask(
        self, cluster_id: str, group_id: str, intent: AppliedChange, retrying: Retrying = lambda call: call()
    ) -> GroupSnapshot:
        """Ask PCS for the intent's configuration (its clientToken makes a repeat a no-op), through
        `retrying`. PCS's error is raised; the intent stays pending for whoever finds it next."""
        return retrying(
            lambda: self.pcs.update_lifecycle_actions(
                cluster_id, group_id, intent.config_after or {}, intent.client_token or ""
            )
        )

    def applied(
        self, cluster_id: str, group_id: str, *, ledger: Ledger, intent: AppliedChange, updated: GroupSnapshot
    ) -> None:
        """Record that PCS took the intent (a failure here leaves it pending: a retry recognises it)."""
        intent.status = "applied"
        intent.modified_at_after = updated.modified_at_ms
        self.store.save_ledger(cluster_id, group_id, ledger)

    def abandoned(self, cluster_id: str, group_id: str, *, ledger: Ledger, intent: AppliedChange) -> None:
        """Record that the intent will not be made: PCS refused it, or the group moved on without it."""
        intent.status = "abandoned"
        self.store.save_ledger(cluster_id, group_id, ledger)

    def unconfirmed(self, cluster_id: str, group_id: str, *, ledger: Ledger, intent: AppliedChange) -> None:
        """Record that whether PCS made the intent can no longer be told (the group changed before it was
        confirmed): it is tried no more, and counts as made (`AppliedChange`)."""
        intent.status = "unconfirmed"
        self.store.save_ledger(cluster_id, group_id, ledger)
