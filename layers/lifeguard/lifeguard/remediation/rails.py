"""The rails around a remediation, as pure functions of what Lifeguard knows: the group's ledger, the
detection, the group's configuration as PCS holds it, the settings and the time.

Each rail answers None when it lets the remediation through, or the sentence that says why not (that
sentence is the `reason` of the RemediationSkipped event and of the audit entry). The remediator reads the
group, asks the rails in order, and applies what they let through:

1. `unmatched`: the detection is not of the group's open episode (a forged, replayed or stale event);
2. `group_unfit`: the group's mode is off, or PCS does not hold it ACTIVE;
   `not_borne_out`: the loop is known from node reports alone, which any node can write;
3. `already_remediated`: Lifeguard already changed this episode's configuration (or the operator undid
   that change);
4. `configuration_moved`: the group's configuration is no longer the one that failed;
   `configuration_invalid`: PCS gave it in a form PCS itself would refuse (nothing is built on it);
   `configuration_too_large`: it is too large for Lifeguard to keep for its undo;
5. `ladder`: the action for the mode, escalated when the loop went on after Lifeguard's own change;
6. `dry_run`: mode notify or the stack's DryRun;
7. `cooldown` and `daily_cap`: how often one group may be changed.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any, NamedTuple

from lifeguard.bounds import CONFIG_MAX_STORED_BYTES, utc
from lifeguard.detection import TAG_MODE
from lifeguard.event_contract import DRY_RUN_SAID, episode_signals
from lifeguard.lifecycle import canonical_json, fingerprint_of
from lifeguard.lifecycle_rules import find_problems
from lifeguard.remediation.records import DAY_SECONDS, AppliedChange, Ledger
from lifeguard.store.table import state_bytes

if TYPE_CHECKING:
    from lifeguard.group_state import Episode, GroupState
    from lifeguard.remediation.loop_detection import LoopDetection
    from lifeguard.remediation.settings import RemediationSettings

__all__ = [
    "DAY_SECONDS",
    "Hold",
    "already_remediated",
    "configuration_moved",
    "cooldown",
    "daily_cap",
    "dry_run",
    "group_unfit",
    "ladder",
    "left_to_people",
    "not_borne_out",
    "undone",
    "unmatched",
]


def left_to_people(episode: str = "this episode") -> str:
    """What Lifeguard does with an episode once the operator undid its change: said by the remediation that
    then holds back (`undone`), and by `lifeguard undo` before it asks."""
    return f"leaves {episode} to people (a fix, or the group's lifeguard:mode tag, ends it)"


def unmatched(detection: LoopDetection, state: GroupState, ledger: Ledger) -> str | None:
    """Why a detection does not match the group's open episode (None when it does)."""
    episode_id = detection.episode_id
    episode = state.episode
    if episode is None or episode.episode_id != episode_id:
        last = state.last_episode
        if last is not None and last.episode_id == episode_id and last.resolved_at is not None:
            return (
                f"Refused: episode {episode_id} ended at {utc(last.resolved_at)} (a node bootstrapped); "
                "nothing was changed."
            )
        return f"Refused: Lifeguard has no open episode {episode_id} for this group; nothing was changed."
    if detection.revision > episode.revision:
        return (
            f"Refused: revision {detection.revision} is newer than the open episode's ({episode.revision}); "
            "nothing was changed."
        )
    seen = (detection.config_fingerprint, detection.config_modified_at)
    if seen != (episode.config_fingerprint, episode.config_modified_at):
        earlier = ledger.of_episode(episode_id)
        if earlier:
            return _already(earlier[-1])
        return (
            f"Refused: the detection is of configuration {detection.config_fingerprint[:12]} modified at "
            f"{utc(detection.config_modified_at)}, not the one episode {episode_id} is about; "
            "nothing was changed."
        )
    return None


def group_unfit(mode: str, status: str, tags: Mapping[str, str]) -> str | None:
    """Why the group is not to be changed whatever its configuration: its mode is off (saying whether its
    tag or the stack's DefaultMode made it so), or it is not ACTIVE (PCS refuses an update while the group
    is creating, updating or deleting)."""
    if mode == "off":
        tag = tags.get(TAG_MODE)
        if tag is None:
            return f"the stack's DefaultMode is off (the group has no tag {TAG_MODE})"
        if tag.strip().lower() == "off":
            return f"the group's tag {TAG_MODE} is off"
        return f"the group's tag {TAG_MODE} names no mode, and the stack's DefaultMode is off"
    if status != "ACTIVE":
        return f"the group is {status}, not ACTIVE"
    return None


# Why a loop known from node reports alone is not acted on (the README's Trust section says the same).
NOT_BORNE_OUT = (
    "the loop is known from node reports alone, which any node can write: Lifeguard changes a group only "
    "once PCS's scaling log bears the loop out (its own failures reach the threshold; is the group's "
    "scaling log delivered? ClusterIds, or ScalingLogGroupName)"
)


def not_borne_out(episode: Episode) -> str | None:
    """Why the episode is not to be acted on yet: PCS's scaling log has not borne it out (`scaling_log` is
    not among its signals). A node, running its scripts as root, can write any report to the report log
    group, naming any group and instance; nothing but PCS writes the scaling log (the README's Trust
    section: keep other writers off its log group)."""
    return None if "scaling_log" in episode_signals(episode) else NOT_BORNE_OUT


def already_remediated(
    detection: LoopDetection,
    earlier: list[AppliedChange],
    ledger: Ledger,
    config: Mapping[str, Any] | None,
    modified_at_ms: int,
) -> str | None:
    """Lifeguard already changed the configuration this detection is of (within its episode): the detection
    came after the change (the group holds another configuration), or the operator undid the change. A
    group that holds the detection's configuration, put in place over Lifeguard's change by someone else
    (a deploy of its infrastructure as code, a person, an update PCS did not keep), is not: its loop goes
    on, and the ladder starts again (`ladder`)."""
    if not earlier:
        return None
    last = earlier[-1]
    said = undone(ledger, last)  # whatever the group holds now (Lifeguard's configuration put back, too)
    if said is not None or detection.config_fingerprint == last.fingerprint_after:
        return said
    if configuration_moved(detection, config, modified_at_ms) is not None:
        return _already(last)
    return None


def undone(ledger: Ledger, change: AppliedChange) -> str | None:
    """The operator undid (or set out to undo) Lifeguard's `change`: Lifeguard leaves its episode be."""
    undo = ledger.undo_of(change)
    if undo is None and change.undone_at is None:
        return None
    at = change.undone_at if change.undone_at is not None else (undo.at if undo is not None else change.at)
    return (
        f"Undone: the operator undid Lifeguard's {change.action} at {utc(int(at * 1000))}; Lifeguard "
        f"{left_to_people()}."
    )


def configuration_moved(
    detection: LoopDetection, config: Mapping[str, Any] | None, modified_at_ms: int
) -> str | None:
    """The group's configuration is no longer the one whose nodes failed."""
    if (detection.config_fingerprint, detection.config_modified_at) == (
        fingerprint_of(config),
        modified_at_ms,
    ):
        return None
    return (
        "the group's configuration changed since the detection; the failures were of another "
        "configuration and new ones will be judged against the current one"
    )


def configuration_invalid(config: Mapping[str, Any] | None) -> str | None:
    """The group's configuration, as PCS answered it, breaks PCS's own rules (two scripts of one name, a
    value out of its bounds): no change is planned from it, and the reason says what is wrong."""
    problems = find_problems(config) if config is not None else []
    if not problems:
        return None
    return (
        f"the group's configuration, as PCS gave it, is not valid ({problems[0]}); nothing is planned from it"
    )


def configuration_too_large(config: Mapping[str, Any] | None) -> str | None:
    """The group's configuration is too large to keep for an undo: a change Lifeguard could not record
    (or take back) is not made."""
    size = state_bytes(canonical_json(config))  # as BatchReads measures a configuration it reads
    if size <= CONFIG_MAX_STORED_BYTES:
        return None
    return (
        f"the group's configuration takes {size // 1024} KiB stored, more than the "
        f"{CONFIG_MAX_STORED_BYTES // 1024} KiB Lifeguard keeps to undo a change; nothing is changed"
    )


def ladder(mode: str, earlier: list[AppliedChange], fingerprint: str) -> tuple[str | None, str | None]:
    """The action for a detection of the configuration `fingerprint` and why, when it is not simply the
    mode's: the mode, or the next rung when the loop went on under Lifeguard's own change of the same
    episode (quarantine, then revert, then a person; None: no action). Someone else's change over
    Lifeguard's (a change whose configuration before is not the one Lifeguard's last made) puts the ladder
    back at its start: Lifeguard's steps were taken out, not tried and failed."""
    if mode == "notify" or not earlier:
        return mode, None
    last = earlier[-1]
    if not escalates(earlier, fingerprint):  # `already_remediated` lets this through: someone else's
        return mode, (
            f"Lifeguard's {last.action} of {utc(int(last.at * 1000))} is no longer in the group (someone "
            f"else changed its configuration since) and the loop goes on: the ladder starts again, at {mode}."
        )
    since: list[AppliedChange] = []
    for change in earlier:
        if since and change.fingerprint_before != since[-1].fingerprint_after:
            since = []  # someone else changed the group between these two changes of Lifeguard's
        since.append(change)
    done = ", ".join(change.action for change in since)
    steps = [change for change in since if change.action != "undrain"]  # taking out a drain step is no rung
    if not steps:
        return mode, None
    # One rung up, once: a revert that found nothing proven good quarantines instead (recorded as a
    # quarantine, in mode revert when it was the first), and is still the revert's rung, so the next step
    # is a person, not another quarantine.
    if len(steps) == 1 and steps[0].action == "quarantine" and steps[0].mode != "revert":
        return "revert", f"The loop went on after {done}: escalating to revert."
    return None, f"The loop went on after {done}: Lifeguard stops changing this group; a person must look."


def dry_run(mode: str, settings: RemediationSettings, would: str) -> str | None:
    """Nothing may change: mode notify, or the stack's DryRun (`would` says what would have changed)."""
    if mode != "notify" and not settings.dry_run:
        return None
    why = "mode notify" if mode == "notify" else "the stack's DryRun is on"
    return f"{DRY_RUN_SAID}{why}), nothing was changed; {would}".strip()


class Hold(NamedTuple):
    """A change the cooldown or the daily cap holds back: why, and until when (epoch seconds). The loop's
    first failure after that has it decided again (scaling_events announces it at its next revision):
    held back, not let go."""

    reason: str
    until: float


def _held(reason: str, until: float) -> Hold:
    """The hold, its reason saying when it ends (one sentence, as every event's `reason`)."""
    when = utc(int(until * 1000))
    return Hold(
        f"{reason.rstrip('.; ')}; Lifeguard decides again at the loop's first failure after {when}.", until
    )


def escalates(earlier: list[AppliedChange], fingerprint: str) -> bool:
    """Whether a detection of the configuration `fingerprint` is a step up `ladder`'s rungs: the loop goes
    on under Lifeguard's own last change of its episode. Not when someone else changed the group since (the
    ladder starts again): Lifeguard answering that at once would fight the person, or their deploy, change
    for change, and each change of the lifecycle actions drains and replaces the group's nodes."""
    return bool(earlier) and earlier[-1].fingerprint_after == fingerprint


def cooldown(
    ledger: Ledger, escalating: bool, settings: RemediationSettings, now: float, would: str
) -> Hold | None:
    """No new change of a group within the cooldown of Lifeguard's last one (an escalation, `escalates`, is
    not held back: the loop it answers goes on under Lifeguard's own change)."""
    if escalating:
        return None
    recent = ledger.made_since(now - settings.cooldown_seconds)
    if not recent:
        return None
    reason = (
        f"Cooldown: Lifeguard changed this group {int((now - recent[-1]) / 60)} min ago; "
        f"no new change within {int(settings.cooldown_seconds / 60)} min; {would}"
    ).strip()
    return _held(reason, recent[-1] + settings.cooldown_seconds)


def daily_cap(ledger: Ledger, settings: RemediationSettings, now: float) -> Hold | None:
    """At most `daily_cap` changes of one group in 24 hours (a rolling day: the hold ends when the oldest
    change that keeps the count at the cap is a day old)."""
    made = ledger.made_since(now - DAY_SECONDS)
    if len(made) < settings.daily_cap:
        return None
    times = "once" if settings.daily_cap == 1 else f"{settings.daily_cap} times"
    reason = f"Daily cap: Lifeguard already changed this group {times} in 24 h."
    return _held(reason, made[len(made) - settings.daily_cap] + DAY_SECONDS)


def _already(last: AppliedChange) -> str:
    done = {"applied": "was applied", "unconfirmed": "was set out (never confirmed)"}.get(
        last.status, "was set out (not yet confirmed)"
    )
    return (
        f"Already remediated: {last.action} {done} at {utc(int(last.at * 1000))}; "
        "this detection is of the configuration before it."
    )
