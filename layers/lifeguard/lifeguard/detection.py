"""The detection rules, as pure functions of a group's state: no AWS here.

- **Loop**: `threshold` bootstrap failures of distinct instances in a row (by `event_timestamp`, no
  BOOTSTRAP_SUCCESS of the group between them), within `window` of the latest.
- **Intermittent**: within the window, at least 5 bootstrap outcomes of which at least half failed.
- **Proven good**: a configuration is proven good by a successful node launched on it (`proven_good`).

Only instances launched after the group's current configuration took effect (`modifiedAt`) count, so
nodes of a configuration that has since been changed never trigger a second remediation. An instance whose
launch was not seen counts when its outcome came after `modifiedAt`.
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import replace
from typing import TYPE_CHECKING, Literal

from lifeguard.bounds import clip
from lifeguard.group_state import (
    OUTCOME_LIMIT,
    BootOutcome,
    Episode,
    Failure,
    GroupState,
    KnownConfig,
    ProvenGood,
)
from lifeguard.settings import bounded_setting, setting
from lifeguard.values import frozen

if TYPE_CHECKING:  # records are read by their handler: a function that only asks a rule loads no reader
    from lifeguard.scaling_log import ScalingLogRecord

__all__ = [
    "DEFAULT_MODE",
    "DEFAULT_THRESHOLD",
    "DEFAULT_WINDOW_MINUTES",
    "INTERMITTENT_MIN_OUTCOMES",
    "INTERMITTENT_RESOLVE_STREAK",
    "LAUNCH_BOOT_MS",
    "MODES",
    "Detection",
    "DetectionSettings",
    "RecordFolder",
    "apply_record",
    "detect",
    "detect_replacement",
    "drain_of",
    "episode_id_for",
    "forgotten_before",
    "is_relevant",
    "launch_of",
    "mode_of",
    "mode_tagged",
    "needs_fresh_config",
    "proven_already",
    "proven_good",
    "proven_good_by",
    "replaced_since_up",
    "resolves",
    "resolving",
    "stack_mode",
    "up_before_last_failure",
]

DEFAULT_THRESHOLD = 2
DEFAULT_WINDOW_MINUTES = 60
INTERMITTENT_MIN_OUTCOMES = 5
INTERMITTENT_RESOLVE_STREAK = 3  # successes in a row that end an intermittent episode
# Bounds of the tunables (tags are set by whoever may tag a group): a loop cannot be longer than the
# outcomes a group keeps, and a week is the longest window that still tells a loop from bad luck.
MAX_THRESHOLD = OUTCOME_LIMIT
# The least threshold a tag may set. Whoever may tag a group (not only who may change it) could otherwise
# make one failure (a spot interruption during boot, a fetch that failed once) a loop, and have a group
# tagged `revert` changed that never looped. The stack's Threshold may be 1: its deployer's choice.
TAG_THRESHOLD_LEAST = 2
# How long after a node came up (ACTIVE/BOOTSTRAP_SUCCESS) its launch boot may still fail: its nodeReady
# runs start up to `attribution.LAUNCH_BOOT_AFTER_OUTCOME_MS` after it (6 hours) and one may run for a day
# (the longest script timeout). A failure logged later is a later boot's (a reboot's EVERY_BOOT script, two
# days on): the node's launch boot succeeded, and it is no fresh instance of a loop.
LAUNCH_BOOT_MS = 30 * 3600 * 1000
# How long after a configuration change an instance whose LAUNCHED was not seen may still have been launched
# before it: longer than a PCS node takes from launch to its bootstrap outcome (the article's: 2-7 minutes).
UNSEEN_LAUNCH_MS = 30 * 60 * 1000
# Nodes launched within this of each other may tell their outcomes in any order (`_wave_undecided`).
WAVE_SLACK_MS = 2 * 60 * 1000
MAX_WINDOW_MINUTES = 7 * 24 * 60
MODES = ("quarantine", "revert", "notify", "off")
DEFAULT_MODE = "notify"  # a group without a lifeguard:mode tag, when the stack says nothing else
TAG_MODE, TAG_THRESHOLD, TAG_WINDOW = "lifeguard:mode", "lifeguard:threshold", "lifeguard:window-minutes"
TAG_DRAIN = "lifeguard:drain"

Kind = Literal["loop", "intermittent", "replacement"]


@frozen
class DetectionSettings:
    """A group's mode and tuning: its `lifeguard:*` tags, else the stack's defaults."""

    mode: str
    threshold: int
    window_minutes: int

    @property
    def window_ms(self) -> int:
        """The window in milliseconds."""
        return self.window_minutes * 60_000

    @classmethod
    def stack_defaults(
        cls, mode: str | None = None, threshold: int | None = None, window_minutes: int | None = None
    ) -> DetectionSettings:
        """Explicit values, else LIFEGUARD_DEFAULT_MODE / _THRESHOLD / _WINDOW_MINUTES, else built-ins. A
        value out of its bounds is a ValueError naming where it came from (`threshold`, or the variable)."""
        return cls(
            mode=stack_mode(mode),
            threshold=bounded_setting(
                "threshold", threshold, DEFAULT_THRESHOLD, int, least=1, most=MAX_THRESHOLD
            ),
            window_minutes=bounded_setting(
                "window_minutes",
                window_minutes,
                DEFAULT_WINDOW_MINUTES,
                int,
                least=1,
                most=MAX_WINDOW_MINUTES,
            ),
        )

    def with_tags(self, tags: Mapping[str, str]) -> tuple[DetectionSettings, list[str]]:
        """These settings overridden by a group's tags; also the problems of tags that were ignored (one
        whose key is only like Lifeguard's, in another case or with spaces: AWS's tag keys are
        case-sensitive, and what it asks is not taken)."""
        if not tags or (
            TAG_MODE not in tags
            and TAG_THRESHOLD not in tags
            and TAG_WINDOW not in tags
            and not any(key not in _OWN_TAGS and key.strip().lower() in _OWN_TAGS for key in tags)
        ):
            return self, []  # most groups: read for every batch that names them
        problems: list[str] = []
        mode, threshold, window = self.mode, self.threshold, self.window_minutes
        mode, problem = mode_of(tags, mode)
        if problem:
            problems.append(problem)
        for tag, current, least, most in (
            (TAG_THRESHOLD, threshold, TAG_THRESHOLD_LEAST, MAX_THRESHOLD),
            (TAG_WINDOW, window, 1, MAX_WINDOW_MINUTES),
        ):
            lookalike = _lookalike(tags, tag)
            if lookalike is not None:
                problems.append(_not_read(lookalike, tag, "ignored"))
            if tag in tags:
                try:
                    value = _within(int(tags[tag]), most, least)
                except ValueError:
                    problems.append(
                        f"tag {tag}: {clip(tags[tag], 40)!r} is not a whole number from {least} to {most}"
                    )
                    value = current
                threshold, window = (value, window) if tag == TAG_THRESHOLD else (threshold, value)
        return DetectionSettings(mode, threshold, window), problems


def stack_mode(explicit: str | None = None) -> str:
    """The stack's default mode: `explicit`, else LIFEGUARD_DEFAULT_MODE, else `notify` (a bad one raises,
    naming the variable)."""
    return setting("default_mode", explicit, DEFAULT_MODE, _mode)


def mode_of(tags: Mapping[str, str], default_mode: str) -> tuple[str, str | None]:
    """A group's mode: its `lifeguard:mode` tag (in any case, spaces around it let go), else
    `default_mode`; and the problem of a tag that was ignored (None when there is none). The one place the
    mode tag is read. A tag that says no mode fails closed: the group is only notified of (or left alone,
    in a stack whose default is `off`), since whoever tagged it may have meant `off`."""
    value = tags.get(TAG_MODE)
    closed = default_mode if default_mode in ("notify", "off") else "notify"
    if value is None:
        lookalike = _lookalike(tags, TAG_MODE)
        if lookalike is not None:  # whoever tagged it asked for a mode, perhaps `off`: none is taken
            return closed, _not_read(lookalike, TAG_MODE, f"{closed} until it is")
        return default_mode, None
    try:
        return _mode(value.strip().lower()), None
    except ValueError as exc:
        return closed, f"tag {TAG_MODE}: {exc}; {closed} until it is one"


def drain_of(tags: Mapping[str, str], default: bool) -> tuple[bool, str | None]:
    """Whether a quarantine drains the nodes it keeps: the group's `lifeguard:drain` tag (`true`/`false`),
    else the stack's DrainKeptNodes; and the problem of a tag that was ignored."""
    value = tags.get(TAG_DRAIN)
    if value is None:
        lookalike = _lookalike(tags, TAG_DRAIN)
        return default, _not_read(lookalike, TAG_DRAIN, "ignored") if lookalike is not None else None
    if value.strip().lower() in ("true", "false"):
        return value.strip().lower() == "true", None
    return default, f"tag {TAG_DRAIN}: {clip(value, 40)!r} is not true or false"


def mode_tagged(tags: Mapping[str, str]) -> bool:
    """Whether the group says its own mode (a `lifeguard:mode` tag, or one only like it, which fails
    closed), rather than taking the stack's."""
    return TAG_MODE in tags or _lookalike(tags, TAG_MODE) is not None


_OWN_TAGS = frozenset((TAG_MODE, TAG_THRESHOLD, TAG_WINDOW, TAG_DRAIN))


def _lookalike(tags: Mapping[str, str], tag: str) -> str | None:
    """The key of a tag that reads as `tag` in another case or with spaces around it, if the group has one
    (and not `tag` itself)."""
    if tag in tags:
        return None
    return next((key for key in tags if key != tag and key.strip().lower() == tag), None)


def _not_read(key: str, tag: str, then: str) -> str:
    return f"tag {clip(key, 40)!r} is not {tag} (tag keys are case-sensitive); {then}"


def _mode(value: str) -> str:
    if value not in MODES:
        raise ValueError(f"{clip(value, 40)!r} is not one of {', '.join(MODES)}")
    return value


def _within(value: int, most: int, least: int = 1) -> int:
    if not least <= value <= most:
        raise ValueError(f"{value} is not from {least} to {most}")
    return value


def forgotten_before(state: GroupState) -> int | None:
    """The time before which the state has let history go: a record older than that, of an instance it
    does not know, was forgotten (keeping it again would only see it pruned again)."""
    return state.oldest_outcome_at() if len(state.outcomes) >= OUTCOME_LIMIT else None


def apply_record(state: GroupState, record: ScalingLogRecord) -> bool:
    """Fold one record into the state; True when the state changed. Applying a record twice, or records
    in any order, gives the same state."""
    return RecordFolder(state)(record)


class RecordFolder:
    """`apply_record` for a whole batch: what the state has already let go of is worked out once."""

    def __init__(self, state: GroupState) -> None:
        self.state = state
        self.cutoff = forgotten_before(state)

    def __call__(self, record: ScalingLogRecord) -> bool:
        """Fold one record; True when the state changed."""
        return _fold(self.state, record, self.cutoff)


def _fold(state: GroupState, record: ScalingLogRecord, cutoff: int | None) -> bool:
    instance = record.details.instance_id
    if instance is None:
        return False
    outcomes, launches, at = state.outcomes, state.launches, record.event_timestamp
    if cutoff is not None and at < cutoff and instance not in outcomes and instance not in launches:
        return False
    if record.status_code == "LAUNCHED":
        seen = outcomes.get(instance)
        if seen is not None:
            if seen.launched_at is None or at < seen.launched_at:
                outcomes[instance] = replace(seen, launched_at=at)
                return True
            return False
        known = launches.get(instance)
        if known is None or at < known:
            launches[instance] = at
            return True
        return False
    if record.is_unhealthy_termination:
        known_at = state.unhealthy.get(instance)
        if known_at is not None and known_at <= at:
            return False
        state.unhealthy[instance] = at
        return True
    succeeded = record.is_bootstrap_success
    if not (succeeded or record.is_bootstrap_failure):
        return False
    known_outcome = outcomes.get(instance)
    # An instance bootstraps once: its first outcome is the one that counts, but a failure outranks a
    # success. PCS logs a node ACTIVE (BOOTSTRAP_SUCCESS) once nodeBootstrapped is over, before nodeReady
    # runs (the article); a nodeReady script failing under TERMINATE then ends that node as a failure.
    if known_outcome is not None and _stands(known_outcome, succeeded, at):
        return False
    launched_at = launches.pop(instance, None)  # no longer waiting: its outcome keeps the time
    if launched_at is None and known_outcome is not None:
        launched_at = known_outcome.launched_at
    outcome = BootOutcome(instance, record.scheduler_node_id, at, succeeded, launched_at)
    outcomes[instance] = outcome
    state.outcome_added(outcome)
    return True


def _stands(known: BootOutcome, succeeded: bool, at: int) -> bool:
    """Whether an instance's known outcome stands against another of its records (`succeeded`, at `at`):
    the first outcome counts, a failure outranks a success, but not a failure `LAUNCH_BOOT_MS` after the
    success (a later boot's: the node came up, and served). One order of all, so the records of an instance
    come to the same outcome in any order."""
    if known.succeeded != succeeded:
        success_at, failure_at = (
            (known.event_timestamp, at) if known.succeeded else (at, known.event_timestamp)
        )
        if failure_at - success_at > LAUNCH_BOOT_MS:
            return known.succeeded
    return (known.succeeded, known.event_timestamp) <= (succeeded, at)


def is_relevant(state: GroupState, outcome: BootOutcome, modified_at: int | None) -> bool:
    """True when the instance ran the group's current configuration: launched at or after its `modifiedAt`.
    An instance whose LAUNCHED was not seen is taken to have run it when its outcome came after the change;
    in a group whose LAUNCHED records do come (it shows the launch of some instance), only when its outcome
    came `UNSEEN_LAUNCH_MS` after the change: its LAUNCHED may be on its way (a batch delivered late), and
    one that failed sooner may have been launched before the change, on the configuration it replaced, and
    never counts against the new one."""
    if modified_at is None:
        return True
    launched = state.launched_at(outcome)
    if launched is not None:
        return launched >= modified_at
    margin = UNSEEN_LAUNCH_MS if _launches_come(state) else 0
    return outcome.event_timestamp >= modified_at + margin


def _launches_come(state: GroupState) -> bool:
    """Whether the group's scaling log shows its instances' launches (LAUNCHED records with their ids)."""
    return bool(state.launches) or any(o.launched_at is not None for o in state.outcomes.values())


@frozen
class Detection:
    """A rule that fired, with its evidence (oldest first)."""

    kind: Kind
    failures: tuple[Failure, ...]

    @property
    def latest(self) -> int:
        """Event time of the newest failure of the evidence."""
        return max(f.event_timestamp for f in self.failures)


def _failure(outcome: BootOutcome) -> Failure:
    return Failure(
        instance_id=outcome.instance_id,
        scheduler_node_id=outcome.scheduler_node_id,
        event_timestamp=outcome.event_timestamp,
    )


def detect(
    state: GroupState,
    settings: DetectionSettings,
    modified_at: int | None,
    since: int | None = None,
    *,
    cached: bool = False,
    known_until: int | None = None,
) -> Detection | None:
    """The loop rule if it fires, else the intermittent rule if it fires, else None.

    Only outcomes after `since` (the end of the group's previous episode) are evidence; `modified_at` is
    when the group's configuration took effect (None: every outcome counts). `cached`: `modified_at` is
    what was last known (None: nothing), and the configuration may be newer, so that fewer nodes ran it:
    the rule fires wherever it could, for the caller to confirm it with the configuration read. No success
    then counts when nothing is known, nor when a failed node was launched after `known_until` (when the
    configuration was last confirmed): a newer one may have taken effect before that node, and the
    successes of nodes launched earlier say nothing of it (with them, the failures would not count).
    """
    ordered = sorted(
        (o for o in state.outcomes.values() if since is None or o.event_timestamp > since),
        key=lambda o: (o.event_timestamp, o.instance_id),
    )
    if not ordered:
        return None
    unknown = cached and (modified_at is None or _launched_after(state, ordered, known_until))
    tail: list[BootOutcome] = []
    for outcome in reversed(ordered):
        if not outcome.succeeded:
            tail.append(outcome)
        elif not unknown and is_relevant(state, outcome, modified_at):
            break
        # A node launched on an older configuration says nothing of this one's boots; with the
        # configuration not known yet, any success may be such a node's (the caller confirms with it).
    newest = ordered[-1].event_timestamp
    recent = [
        o
        for o in ordered
        if o.event_timestamp > newest - settings.window_ms and is_relevant(state, o, modified_at)
    ]
    failed = [o for o in recent if not o.succeeded]
    if tail:
        newest = tail[0].event_timestamp
        # A failed node launched before a node of this configuration came up booted beside it (a scale-up
        # launches many at once, and the slow ones fail last): the configuration boots, and such a failure
        # counts towards a loop only when at least half the window's boots failed (2 of 12 is no loop).
        came_up = (
            None
            if unknown or 2 * len(failed) >= len(recent)
            else max(
                (o.event_timestamp for o in ordered if o.succeeded and is_relevant(state, o, modified_at)),
                default=None,
            )
        )
        counted = [
            o
            for o in reversed(tail)
            if is_relevant(state, o, modified_at)
            and o.event_timestamp > newest - settings.window_ms
            and not _booted_beside(state, o, came_up)
        ]
        if len(counted) >= settings.threshold and not _wave_undecided(state, counted, modified_at):
            return Detection("loop", tuple(_failure(o) for o in counted[-OUTCOME_LIMIT:]))
    # Intermittent: boots succeed between the failures, at least half of them fail. Failures in a row (none
    # succeeding since the first) are a loop, told at its threshold, which may be above
    # INTERMITTENT_MIN_OUTCOMES (a stack's or a tag's of 8, say), whatever booted clean before them.
    first_failed = min((o.event_timestamp for o in failed), default=None)
    mixed = first_failed is not None and any(o.succeeded and o.event_timestamp > first_failed for o in recent)
    if unknown:  # without the successes: as many failures as half of enough outcomes of a newer one
        intermittent = mixed and 2 * len(failed) >= INTERMITTENT_MIN_OUTCOMES
    else:
        intermittent = mixed and len(recent) >= INTERMITTENT_MIN_OUTCOMES and 2 * len(failed) >= len(recent)
    if intermittent and not _wave_undecided(state, failed, modified_at):
        return Detection("intermittent", tuple(_failure(o) for o in failed[-OUTCOME_LIMIT:]))
    return None


def _wave_undecided(state: GroupState, failures: list[BootOutcome], modified_at: int | None) -> bool:
    """Whether nodes launched with `failures`, still booting, could yet show the configuration boots: a
    scale-up launches many at once, and when its first outcomes are failures, its siblings' successes, still
    to come, make them no loop (`_booted_beside`). Undecided while the failures are fewer than half of the
    outcomes of nodes launched with them or since (the wave: from the first failed node's launch, less
    `WAVE_SLACK_MS`) with the siblings counted as successes; the window's older successes, which a loop
    after them sets aside, weigh nothing. A sibling is a launch without an outcome made in the wave, no
    later than the newest failed node's (a loop's replacements, launched after its failures, hold nothing
    back), and younger than twice the longest boot the group's outcomes took, plus `WAVE_SLACK_MS` (at most
    `UNSEEN_LAUNCH_MS`): a node ended before it bootstrapped (a spot instance taken back, a scale-up
    cancelled) logs no outcome, and holds nothing back once its boot is overdue."""
    launched = [at for o in failures if (at := state.launched_at(o)) is not None]
    if not launched or not state.launches:
        return False
    start, last = min(launched) - WAVE_SLACK_MS, max(launched)
    newest = max(o.event_timestamp for o in failures)
    outcomes = state.outcomes.values()
    boots = [o.event_timestamp - at for o in outcomes if (at := state.launched_at(o)) is not None]
    booting_for = min(UNSEEN_LAUNCH_MS, 2 * max(boots, default=0) + WAVE_SLACK_MS)
    siblings = sum(
        1
        for at in state.launches.values()
        if start <= at <= last and newest - at < booting_for and (modified_at is None or at >= modified_at)
    )
    if not siblings:
        return False
    wave = [o for o in outcomes if (at := state.launched_at(o)) is not None and at >= start]
    failed = sum(1 for o in wave if not o.succeeded)
    return 2 * failed < len(wave) + siblings


def _launched_after(state: GroupState, outcomes: list[BootOutcome], known_until: int | None) -> bool:
    """Whether a failed node among `outcomes` was launched after `known_until` (when its launch is not
    known, failed after it)."""
    if known_until is None:
        return False
    for outcome in outcomes:
        if not outcome.succeeded:
            launched = state.launched_at(outcome)
            if (outcome.event_timestamp if launched is None else launched) > known_until:
                return True
    return False


def _booted_beside(state: GroupState, failure: BootOutcome, came_up: int | None) -> bool:
    """Whether a failed node was launched before `came_up`, when a node of the configuration came up."""
    launched = state.launched_at(failure)
    return came_up is not None and launched is not None and launched < came_up


def _fresh_replacements(
    state: GroupState, settings: DetectionSettings, modified_at: int | None, since: int | None = None
) -> list[Failure]:
    """The unhealthy terminations (TERMINATED/UNHEALTHY_NODE) after `since` of fresh instances: launched on
    the configuration of `modified_at` (None: any) and replaced within a window of their launch."""
    fresh = []
    for instance, when in state.unhealthy.items():
        if since is not None and when <= since:
            continue
        outcome = state.outcomes.get(instance)
        launched = state.launched_at(outcome) if outcome else state.launches.get(instance)
        if modified_at is not None and (launched is None or launched < modified_at):
            continue  # not known to be a node of the current configuration
        if launched is None or when - launched > settings.window_ms:
            continue  # a node that served a while and then failed its health checks: no loop
        node = outcome.scheduler_node_id if outcome else None
        fresh.append(Failure(instance_id=instance, scheduler_node_id=node, event_timestamp=when))
    return fresh


def detect_replacement(
    state: GroupState, settings: DetectionSettings, modified_at: int | None, since: int | None = None
) -> Detection | None:
    """`threshold` nodes terminated as unhealthy (TERMINATED/UNHEALTHY_NODE) within the window of the
    newest, each a fresh instance (launched on the current configuration, after `modifiedAt`, and replaced
    within a window of its launch), after `since`: a `replacement` loop. Other terminations
    (REPLACEMENT_REQUESTED, SCHEDULER_REQUESTED, ...) and launch failures never count."""
    fresh = _fresh_replacements(state, settings, modified_at, since)
    if not fresh:
        return None
    newest = max(f.event_timestamp for f in fresh)
    counted = sorted(
        (f for f in fresh if f.event_timestamp > newest - settings.window_ms),
        key=lambda f: (f.event_timestamp, f.instance_id),
    )
    # The newest `OUTCOME_LIMIT` are the evidence, as many as an event carries (a batch may hold more
    # outcomes than the state keeps once written).
    return (
        Detection("replacement", tuple(counted[-OUTCOME_LIMIT:]))
        if len(counted) >= settings.threshold
        else None
    )


def resolves(state: GroupState, settings: DetectionSettings) -> BootOutcome | None:
    """The success that ends the open episode, if there is one (`resolving`'s first)."""
    successes = resolving(state, settings)
    return successes[0] if successes else None


def resolving(state: GroupState, settings: DetectionSettings) -> list[BootOutcome]:
    """The successes that may end the open episode, oldest first: of a loop, each success after its last
    failure (the first ends it, unless its node would be kept and is not yet: a later one is judged then);
    of the other kinds, the one that ends it.

    A loop ends with a BOOTSTRAP_SUCCESS after its last failure; an intermittent episode with
    `INTERMITTENT_RESOLVE_STREAK` successes in a row after its last failure (so it does not flap). Nodes
    kept with a failing script (a contained episode's `kept`) are not successes: PCS logs a STOP_SEQUENCE
    failure as BOOTSTRAP_SUCCESS. Whether a success's node failed a script is the caller's to check.
    """
    episode = state.episode
    if episode is None:
        return []
    if episode.kind == "replacement":
        # Nodes replaced as unhealthy had booted: a boot after the last replacement ends it once a whole
        # window has passed without another (the newest thing known of the group tells the time; a
        # bootstrap failure since is another loop's, judged once this one is over).
        # The last replacement is the group's newest of a fresh node since the episode opened, evidence or
        # not: one after the detection never becomes evidence (another detection needs `threshold` more),
        # and waiting for one later than the evidence left the episode open for good. A node that served a
        # while and then failed its health checks is no part of the loop, and holds nothing open.
        replaced = _fresh_replacements(state, settings, episode.config_modified_at, episode.opened_at)
        last_unhealthy = max(
            [f.event_timestamp for f in episode.unhealthy or episode.failures]
            + [f.event_timestamp for f in replaced]
        )
        newest = max((o.event_timestamp for o in state.outcomes.values()), default=last_unhealthy)
        if newest <= last_unhealthy + settings.window_ms:
            return []
        return _successes_after(state, episode, last_unhealthy)[:1]
    later = _successes_after(state, episode, _last_failure(state, episode))
    if episode.kind == "loop":
        return later
    return later[INTERMITTENT_RESOLVE_STREAK - 1 : INTERMITTENT_RESOLVE_STREAK]


def _last_failure(state: GroupState, episode: Episode) -> int:
    """The time of the last failure a success must come after to end the episode: the episode's, and those
    of nodes not known to have been launched before the group's configuration as it is now known (a node
    launched before a fix fails late on the old one, whenever its record comes, and holds no success of
    the fix back)."""
    now_on = state.config.modified_at if state.config is not None else episode.config_modified_at
    return max(
        [f.event_timestamp for f in episode.failures]
        + [
            o.event_timestamp
            for o in state.outcomes.values()
            if not o.succeeded and not _older(state, o, now_on)
        ]
    )


def up_before_last_failure(state: GroupState) -> list[BootOutcome]:
    """Of an open loop, the successes after its first failure and before its last of nodes not kept and up
    as far as PCS said (no failure of theirs, no unhealthy termination since), oldest first. Such a node's
    success was not taken when it came (its node would be kept, and was not yet: its ready checks), and
    another node's failure came after it: it may be up with the loop's script failing, to be kept. It ends
    nothing: a failure came after it."""
    episode = state.episode
    if episode is None or episode.kind != "loop" or not episode.failures:
        return []
    first, last = min(f.event_timestamp for f in episode.failures), _last_failure(state, episode)
    return [
        o
        for o in _successes_after(state, episode, first)
        if o.event_timestamp <= last and not replaced_since_up(state, o)
    ]


def replaced_since_up(state: GroupState, outcome: BootOutcome) -> bool:
    """Whether PCS replaced the success's node as unhealthy since it came up (a drained kept node): not up."""
    return state.unhealthy.get(outcome.instance_id, -1) >= outcome.event_timestamp


def _older(state: GroupState, outcome: BootOutcome, modified_at: int | None) -> bool:
    """Whether the outcome's node is known to have been launched before `modified_at` (a node whose launch
    is not known may have run the configuration, and is not taken to be older)."""
    launched = state.launched_at(outcome)
    return modified_at is not None and launched is not None and launched < modified_at


def _successes_after(state: GroupState, episode: Episode, after: int) -> list[BootOutcome]:
    """The episode's successes after `after`, oldest first (at one time, by instance id: the state's maps
    come back from the table in no set order): not of the nodes it kept, and of nodes launched on its
    configuration or a later one (one launched before it booted an older one, and says nothing of the
    loop)."""
    return sorted(
        (
            o
            for o in state.outcomes.values()
            if o.succeeded
            and o.event_timestamp > after
            and o.instance_id not in episode.kept
            and is_relevant(state, o, episode.config_modified_at)
        ),
        key=lambda o: (o.event_timestamp, o.instance_id),
    )


def launch_of(state: GroupState, record: ScalingLogRecord) -> int:
    """When the record's instance was launched (the record's own time when its launch was not seen)."""
    outcome = state.outcomes.get(record.instance_id or "")
    launched = state.launched_at(outcome) if outcome else None
    return launched if launched is not None else record.event_timestamp


def needs_fresh_config(state: GroupState, successes: Sequence[ScalingLogRecord], refresh_ms: int) -> bool:
    """Whether the group's configuration must be read again before successes can prove it.

    The configuration read at `checked_at` with `modifiedAt` M was the group's configuration all the time
    from M to `checked_at`: a node launched in between proves it without another read. Only a node
    launched after `checked_at` needs a fresh one, at most once per `refresh_ms` of event time.
    """
    config = state.config
    if config is None or not config.actions_read:
        return True
    newest_launch = max(launch_of(state, r) for r in successes)
    return (
        newest_launch > config.checked_at and successes[-1].event_timestamp - config.checked_at >= refresh_ms
    )


def proven_good(
    state: GroupState,
    successes: Sequence[ScalingLogRecord],
    config: KnownConfig,
    evidence: Callable[[BootOutcome], str | None] = lambda _: "BOOTSTRAP_SUCCESS",
) -> ProvenGood | None:
    """The proof that `config` is good, from the newest success of a node that ran it, or None (no such
    node, or `config` is already the group's proven-good one).

    A success proves the configuration when its node was launched on it (after its `modifiedAt`, no later
    than when it was last read, `checked_at`) and `evidence` says what proves it: its node's reports show
    no failed script for that boot, or, without reports, no quarantine of Lifeguard's is in the
    configuration (None: it proves nothing; PCS logs a STOP_SEQUENCE failure as BOOTSTRAP_SUCCESS).
    """
    if proven_already(state, config):
        return None  # most successes of a healthy group
    outcomes = state.outcomes
    candidates = ((outcomes.get(r.instance_id or ""), r.event_timestamp) for r in reversed(successes))
    return _first_proof(state, candidates, config, evidence)


def proven_good_by(
    state: GroupState,
    outcomes: Sequence[BootOutcome],
    config: KnownConfig,
    evidence: Callable[[BootOutcome], str | None],
) -> ProvenGood | None:
    """`proven_good`, from the successes of these outcomes (oldest first), as their node reports come after
    the scaling log's success: the newest that proves it."""
    if proven_already(state, config):
        return None
    candidates = ((outcome, outcome.event_timestamp) for outcome in reversed(outcomes))
    return _first_proof(state, candidates, config, evidence)


def proven_already(state: GroupState, config: KnownConfig) -> bool:
    """Whether `config` is the group's proven-good configuration already."""
    known = state.proven_good
    return known is not None and (known.fingerprint, known.modified_at) == (
        config.fingerprint,
        config.modified_at,
    )


def _first_proof(
    state: GroupState,
    candidates: Iterable[tuple[BootOutcome | None, int]],
    config: KnownConfig,
    evidence: Callable[[BootOutcome], str | None],
) -> ProvenGood | None:
    """The proof of `config` by the first of the candidate successes that proves it, or None. Each comes
    with the time its node is taken to have been launched at when its LAUNCHED was not seen (its record's,
    as `launch_of` takes it)."""
    kept = state.episode.kept if state.episode else ()
    for outcome, unseen_launch in candidates:
        if outcome is None or not outcome.succeeded or not is_relevant(state, outcome, config.modified_at):
            continue
        if outcome.instance_id in kept:
            continue
        launched = state.launched_at(outcome)
        if (launched if launched is not None else unseen_launch) > config.checked_at:
            continue  # launched after the last read: it may have run a newer configuration
        proof = evidence(outcome)
        if proof is not None:
            return _proof(config, outcome, proof)
    return None


def _proof(config: KnownConfig, outcome: BootOutcome, proof: str) -> ProvenGood:
    return ProvenGood(
        fingerprint=config.fingerprint,
        node_lifecycle_actions=config.node_lifecycle_actions,
        modified_at=config.modified_at,
        proven_at=outcome.event_timestamp,
        instance_id=outcome.instance_id,
        evidence=proof,
    )


def episode_id_for(cluster_id: str, group_id: str, detection: Detection) -> str:
    """A stable id: the same evidence gives the same episode id, in any invocation."""
    first = detection.failures[0]
    seed = f"{cluster_id}|{group_id}|{first.instance_id}|{first.event_timestamp}"
    return "ep-" + hashlib.sha256(seed.encode()).hexdigest()[:16]
