"""The rails of a remediation, each on its own: pure functions of the ledger, the detection, the settings
and the time."""

from __future__ import annotations

from typing import Any

import pytest

from lifeguard.bounds import utc
from lifeguard.detection import mode_of
from lifeguard.group_state import Episode, GroupState
from lifeguard.lifecycle import fingerprint_of
from lifeguard.remediation import LoopDetection, RemediationSettings, rails
from lifeguard.remediation.records import AppliedChange, Ledger

NOW = 1_800_000_000.0
CONFIG = {"stages": {"nodeBootstrapped": [{"name": "a", "scriptSource": {"scriptLocation": "s3://b/a.sh"}}]}}
MODIFIED_AT = 1_799_999_000_000


def detection(**changes: object) -> LoopDetection:
    fields: dict[str, object] = {
        "episode_id": "ep-1",
        "cluster_id": "pcs_abc123de45",
        "compute_node_group_id": "pcs_abcdef01",
        "config_fingerprint": fingerprint_of(CONFIG),
        "config_modified_at": MODIFIED_AT,
        **changes,
    }
    return LoopDetection.model_validate(fields)


def change(at: float, action: str = "quarantine", episode: str = "ep-1", **more: object) -> AppliedChange:
    fields: dict[str, object] = {
        "at": at,
        "episode_id": episode,
        "revision": 1,
        "action": action,
        "config_before": CONFIG,
        "config_after": {"stages": {}},
        "fingerprint_before": fingerprint_of(CONFIG),
        "fingerprint_after": fingerprint_of({"stages": {}}),
        **more,
    }
    return AppliedChange.model_validate(fields)


def episode(**changes: object) -> Episode:
    fields: dict[str, object] = {
        "episode_id": "ep-1",
        "kind": "loop",
        "opened_at": MODIFIED_AT + 60_000,
        "config_fingerprint": fingerprint_of(CONFIG),
        "config_modified_at": MODIFIED_AT,
        **changes,
    }
    return Episode.model_validate(fields)


ENDED = "Refused: episode ep-1 ended at 2027-01-15 08:00:00 UTC (a node bootstrapped); nothing was changed."
NO_OPEN_EP_1 = "Refused: Lifeguard has no open episode ep-1 for this group; nothing was changed."
NOT_THIS_CONFIG = (
    "Refused: the detection is of configuration {} modified at {}, not the one episode ep-1 is about; "
)


@pytest.mark.parametrize(
    ("seen", "open_episode", "last_episode", "ledger", "reason"),
    [
        pytest.param({}, None, None, [], NO_OPEN_EP_1, id="no-episode"),
        pytest.param(
            {},
            None,
            episode(resolved_at=1_800_000_000_000),
            [],
            ENDED,
            id="the-last-episode-ended",
        ),
        pytest.param({}, None, episode(), [], NO_OPEN_EP_1, id="the-last-episode-not-marked-ended"),
        pytest.param(
            {}, None, episode(episode_id="ep-0", resolved_at=1), [], NO_OPEN_EP_1, id="another-ended"
        ),
        pytest.param({}, episode(episode_id="ep-2"), None, [], NO_OPEN_EP_1, id="another-episode-open"),
        pytest.param(
            {},
            episode(episode_id="ep-2"),
            episode(resolved_at=1_800_000_000_000),
            [],
            ENDED,
            id="ended-and-another-open",
        ),
        pytest.param(
            {"revision": 3},
            episode(revision=2),
            None,
            [],
            "Refused: revision 3 is newer than the open episode's (2); nothing was changed.",
            id="a-newer-revision",
        ),
        pytest.param(
            {"config_fingerprint": fingerprint_of({"stages": {}})},
            episode(),
            None,
            [],
            NOT_THIS_CONFIG.format("c734f76ba6d0", "2027-01-15 07:43:20 UTC") + "nothing was changed.",
            id="another-fingerprint",
        ),
        pytest.param(
            {"config_modified_at": MODIFIED_AT + 60_000},
            episode(),
            None,
            [],
            NOT_THIS_CONFIG.format(fingerprint_of(CONFIG)[:12], "2027-01-15 07:44:20 UTC")
            + "nothing was changed.",
            id="another-modified-at",
        ),
        pytest.param(
            {"config_fingerprint": fingerprint_of({"stages": {}})},
            episode(),
            None,
            [change(NOW - 60, episode="ep-0"), change(NOW - 60, status="pending")],
            "Already remediated: quarantine was set out (not yet confirmed) at 2027-01-15 07:59:00 UTC; "
            "this detection is of the configuration before it.",
            id="another-configuration-after-lifeguard-s-change",
        ),
        pytest.param({}, episode(), None, [], None, id="matching"),
        pytest.param({"revision": 1}, episode(revision=2), None, [], None, id="an-older-revision-matching"),
    ],
)
def test_a_detection_not_of_the_group_s_open_episode_is_refused(
    seen: dict[str, object],
    open_episode: Episode | None,
    last_episode: Episode | None,
    ledger: list[AppliedChange],
    reason: str | None,
) -> None:
    state = GroupState(
        cluster_id="pcs_abc123de45", group_id="pcs_abcdef01", episode=open_episode, last_episode=last_episode
    )
    assert rails.unmatched(detection(**seen), state, Ledger(changes=ledger)) == reason


def test_the_mode_tag_is_read_in_one_place_and_a_bad_one_fails_closed() -> None:
    assert mode_of({}, "notify") == ("notify", None)
    assert mode_of({"lifeguard:mode": "revert"}, "notify") == ("revert", None)
    # Tags are typed by hand: the case and spaces around a mode do not matter.
    for spelled in ("Off", "OFF", "off ", " off\n"):
        assert mode_of({"lifeguard:mode": spelled}, "quarantine") == ("off", None)
    # One that names no mode never lets the stack's acting default change the group: whoever tagged it
    # may have meant off. It is notified of (or left alone where the stack's default is off).
    mode, problem = mode_of({"lifeguard:mode": "nuke"}, "quarantine")
    assert mode == "notify"
    assert problem is not None
    assert "'nuke' is not one of quarantine, revert, notify, off; notify until it is one" in problem
    assert mode_of({"lifeguard:mode": "of"}, "revert")[0] == "notify"
    assert mode_of({"lifeguard:mode": "of"}, "off")[0] == "off"


OFF = {"lifeguard:mode": "off"}


@pytest.mark.parametrize(
    ("mode", "status", "tags", "reason"),
    [
        ("off", "ACTIVE", OFF, "the group's tag lifeguard:mode is off"),
        ("quarantine", "UPDATING", {}, "the group is UPDATING, not ACTIVE"),
        ("off", "UPDATING", {"lifeguard:mode": " Off"}, "the group's tag lifeguard:mode is off"),
        ("quarantine", "ACTIVE", {}, None),
        ("notify", "ACTIVE", {}, None),
        # Off by the stack's DefaultMode: the message names the stack, not a tag the group does not have.
        ("off", "ACTIVE", {}, "the stack's DefaultMode is off (the group has no tag lifeguard:mode)"),
        (
            "off",
            "ACTIVE",
            {"lifeguard:mode": "of"},
            "the group's tag lifeguard:mode names no mode, and the stack's DefaultMode is off",
        ),
    ],
)
def test_a_group_whose_mode_is_off_or_that_is_not_active_is_not_changed(
    mode: str, status: str, tags: dict[str, str], reason: str | None
) -> None:
    assert rails.group_unfit(mode, status, tags) == reason


def test_a_detection_of_the_configuration_before_lifeguard_s_own_change_is_already_remediated() -> None:
    holds_lifeguards = ({"stages": {}}, MODIFIED_AT + 120_000)  # the group, as read: Lifeguard's change
    assert rails.already_remediated(detection(), [], Ledger(), *holds_lifeguards) is None
    earlier = [change(NOW - 60)]
    reason = rails.already_remediated(detection(), earlier, Ledger(changes=earlier), *holds_lifeguards)
    assert reason is not None
    assert reason.startswith("Already remediated: quarantine was applied at")
    # The same episode, now failing on the configuration Lifeguard made: not "already" (the ladder's turn).
    after = detection(config_fingerprint=earlier[0].fingerprint_after)
    assert rails.already_remediated(after, earlier, Ledger(changes=earlier), *holds_lifeguards) is None
    pending = [change(NOW - 60, status="pending")]
    said = rails.already_remediated(detection(), pending, Ledger(changes=pending), *holds_lifeguards)
    assert "was set out (not yet confirmed)" in str(said)


def test_a_group_put_back_over_lifeguard_s_change_is_remediated_again_unless_the_operator_undid_it() -> None:
    earlier = [change(NOW - 600)]
    # The group holds the detection's configuration again (a deploy, a person, an update PCS did not keep):
    # Lifeguard's change is gone and the loop goes on.
    put_back = (CONFIG, MODIFIED_AT)
    assert rails.already_remediated(detection(), earlier, Ledger(changes=earlier), *put_back) is None
    # The operator's undo put it back: Lifeguard leaves the episode to people.
    undo = change(NOW - 660, action="undo")  # the operator's clock may be behind the Lambdas'
    ledger = Ledger(changes=[*earlier, undo])
    said = rails.already_remediated(detection(), earlier, ledger, *put_back)
    assert str(said).startswith("Undone: the operator undid Lifeguard's quarantine at")
    marked = [change(NOW - 600, undone_at=NOW - 300)]
    assert str(rails.already_remediated(detection(), marked, Ledger(changes=marked), *put_back)).startswith(
        "Undone:"
    )


def test_a_configuration_that_moved_since_the_detection_is_not_changed() -> None:
    assert rails.configuration_moved(detection(), CONFIG, MODIFIED_AT) is None
    assert rails.configuration_moved(detection(), CONFIG, MODIFIED_AT + 1) is not None
    assert rails.configuration_moved(detection(), {"stages": {}}, MODIFIED_AT) is not None


def test_the_ladder_goes_quarantine_then_revert_then_a_person() -> None:
    quarantined = fingerprint_of({"stages": {}})
    assert rails.ladder("quarantine", [], fingerprint_of(CONFIG)) == ("quarantine", None)
    assert rails.ladder("notify", [change(NOW)], quarantined) == ("notify", None)
    action, why = rails.ladder("quarantine", [change(NOW)], quarantined)
    assert action == "revert"
    assert why == "The loop went on after quarantine: escalating to revert."
    reverted = {"stages": {"nodeBootstrapped": []}}
    revert = change(
        NOW,
        "revert",
        config_before={"stages": {}},
        fingerprint_before=quarantined,
        config_after=reverted,
        fingerprint_after=fingerprint_of(reverted),
    )
    action, why = rails.ladder("quarantine", [change(NOW), revert], fingerprint_of(reverted))
    assert action is None
    assert why is not None
    assert "quarantine, revert" in why
    assert "a person must look" in why


def test_the_ladder_starts_again_when_someone_else_replaced_lifeguard_s_change() -> None:
    # The group holds the looping configuration again, put there over Lifeguard's quarantine.
    action, why = rails.ladder("quarantine", [change(NOW - 600)], fingerprint_of(CONFIG))
    assert action == "quarantine"
    assert str(why).startswith("Lifeguard's quarantine of ")
    assert "is no longer in the group (someone else changed its configuration since)" in str(why)
    # That second quarantine's loop goes on: the ladder counts from it (revert), not from the first.
    again = [change(NOW - 600), change(NOW - 60)]
    action, why = rails.ladder("quarantine", again, fingerprint_of({"stages": {}}))
    assert action == "revert"
    assert why == "The loop went on after quarantine: escalating to revert."


def test_dry_run_holds_mode_notify_and_the_stack_s_dry_run() -> None:
    settings = RemediationSettings()
    assert rails.dry_run("quarantine", settings, "x") is None
    assert rails.dry_run("notify", settings, "quarantine would change: y.") == (
        "Dry run (mode notify), nothing was changed; quarantine would change: y."
    )
    held = rails.dry_run("revert", RemediationSettings(dry_run=True), "")
    assert held == "Dry run (the stack's DryRun is on), nothing was changed;"


def test_the_cooldown_holds_a_new_episode_but_not_an_escalation() -> None:
    settings = RemediationSettings(cooldown_seconds=30 * 60)
    recent = Ledger(changes=[change(NOW - 10 * 60, episode="ep-0")])
    held = rails.cooldown(recent, False, settings, NOW, "")
    assert held is not None
    # Held back until the cooldown of the last change is over, and decided again then.
    assert held.until == NOW - 10 * 60 + 30 * 60
    assert held.reason == (
        "Cooldown: Lifeguard changed this group 10 min ago; no new change within 30 min; Lifeguard decides "
        f"again at the loop's first failure after {utc(int(held.until * 1000))}."
    )
    assert rails.cooldown(recent, True, settings, NOW, "") is None  # an escalation: the loop goes on
    assert rails.cooldown(recent, False, settings, NOW + 21 * 60, "") is None  # 31 min later
    undone = Ledger(changes=[change(NOW - 60, action="undo")])
    assert rails.cooldown(undone, False, settings, NOW, "") is None  # an undo is not a remediation


def test_only_a_loop_going_on_under_lifeguards_own_change_escalates() -> None:
    earlier = [change(NOW - 60)]
    assert rails.escalates(earlier, fingerprint_of({"stages": {}}))  # its change is what the loop runs on
    assert not rails.escalates(earlier, fingerprint_of(CONFIG))  # someone put the failing one back
    assert not rails.escalates([], fingerprint_of({"stages": {}}))


def test_the_daily_cap_counts_the_last_24_hours_only() -> None:
    settings = RemediationSettings(daily_cap=2)
    two = Ledger(changes=[change(NOW - 3600), change(NOW - 7200)])
    held = rails.daily_cap(two, settings, NOW)
    assert held is not None
    assert held.until == NOW - 7200 + 24 * 3600  # the oldest of the two is a day old: one more may be made
    assert held.reason == (
        "Daily cap: Lifeguard already changed this group 2 times in 24 h; Lifeguard decides again at the "
        f"loop's first failure after {utc(int(held.until * 1000))}."
    )
    three = Ledger(changes=[change(NOW - 600), change(NOW - 3600), change(NOW - 7200)])
    held = rails.daily_cap(three, settings, NOW)
    assert held is not None
    assert held.until == NOW - 3600 + 24 * 3600  # two of the three must be a day old
    assert rails.daily_cap(three, settings, held.until) is not None  # the cap counts a change a day old
    assert rails.daily_cap(three, settings, held.until + 1) is None
    assert rails.daily_cap(two, settings, NOW + 24 * 3600) is None
    abandoned = Ledger(changes=[change(NOW - 3600), change(NOW - 7200, status="abandoned")])
    assert rails.daily_cap(abandoned, settings, NOW) is None


_QUARANTINED = {"stages": {"nodeBootstrapped": [{"name": "a", "onError": "STOP_SEQUENCE"}]}}
_DRAINED = {"stages": {**_QUARANTINED["stages"], "nodeReady": [{"name": "lifeguard-drain"}]}}
# Someone else's deploy over Lifeguard's quarantine: another script, Lifeguard's drain step kept.
_THEIRS_DRAINED = {
    "stages": {
        "nodeBootstrapped": [{"name": "a", "onError": "STOP_SEQUENCE"}, {"name": "b"}],
        "nodeReady": [{"name": "lifeguard-drain"}],
    }
}
_THEIRS = {"stages": {"nodeBootstrapped": _THEIRS_DRAINED["stages"]["nodeBootstrapped"]}}


def test_an_undrain_after_someone_else_s_change_is_no_rung_and_the_ladder_starts_at_the_mode() -> None:
    quarantine = change(
        NOW - 3600,
        config_before=CONFIG,
        fingerprint_before=fingerprint_of(CONFIG),
        config_after=_DRAINED,
        fingerprint_after=fingerprint_of(_DRAINED),
    )
    undrain = change(
        NOW - 600,
        "undrain",
        revision=3,
        config_before=_THEIRS_DRAINED,
        fingerprint_before=fingerprint_of(_THEIRS_DRAINED),  # not what the quarantine made: a discontinuity
        config_after=_THEIRS,
        fingerprint_after=fingerprint_of(_THEIRS),
    )
    # Script b loops under theirs (after Lifeguard took its drain step out of it).
    action, why = rails.ladder("quarantine", [quarantine, undrain], fingerprint_of(_THEIRS))
    assert action == "quarantine", why


def test_a_configuration_is_too_large_to_change_from_the_first_byte_past_what_lifeguard_keeps() -> None:
    """Held at its bound: a configuration whose stored size passes CONFIG_MAX_STORED_BYTES by a little is
    not changed (its undo could not be kept), one at the bound is."""
    import random
    import string

    from lifeguard.bounds import CONFIG_MAX_STORED_BYTES
    from lifeguard.lifecycle import canonical_json
    from lifeguard.store.table import state_bytes

    rng = random.Random(5)
    config: dict[str, Any] = {"stages": {"nodeBootstrapped": [], "nodeReady": []}}
    size = 0
    while size <= CONFIG_MAX_STORED_BYTES:
        under = size
        # Scripts of PCS's largest arguments (20 of 256) until near the bound, then of one short one.
        near = size > CONFIG_MAX_STORED_BYTES - 8 * 1024
        scripts = config["stages"]["nodeReady" if near else "nodeBootstrapped"]
        scripts.append(
            {
                "name": f"pad-{len(scripts)}",
                "onError": "CONTINUE",
                "scriptSource": {"scriptLocation": "s3://bucket-x/pad.sh"},
                "arguments": [
                    "".join(rng.choice(string.ascii_letters) for _ in range(40 if near else 256))
                    for _ in range(1 if near else 20)
                ],
            }
        )
        size = state_bytes(canonical_json(config))
        if size <= CONFIG_MAX_STORED_BYTES:
            assert rails.configuration_too_large(config) is None
    assert under <= CONFIG_MAX_STORED_BYTES < size < CONFIG_MAX_STORED_BYTES + 1024  # just past it
    said = rails.configuration_too_large(config)
    assert said is not None
    assert f"more than the {CONFIG_MAX_STORED_BYTES // 1024} KiB Lifeguard keeps" in said


def test_a_configuration_is_measured_as_the_state_that_keeps_it_compresses_it() -> None:
    """Control characters in arguments (PCS takes any character) are written as escapes by JSON, which a
    group's state body (zlib level 1) takes a third more of than the level-6 measure said: a configuration
    measured within 64 KiB took 83 KiB there, and a state within every bound passed DynamoDB's 400 KB."""
    import random
    import zlib

    from lifeguard.bounds import CONFIG_MAX_STORED_BYTES
    from lifeguard.lifecycle import canonical_json

    rng = random.Random(1)
    scripts = [
        {
            "name": f"s{n}",
            "scriptSource": {"scriptLocation": "s3://bucket-x/x.sh"},
            "arguments": ["".join(chr(rng.randrange(1, 32)) for _ in range(256)) for _ in range(10)],
        }
        for n in range(20)
    ]
    config = {"stages": {"nodeBootstrapped": scripts}}
    text = canonical_json(config).encode()
    assert len(zlib.compress(text, 6)) <= CONFIG_MAX_STORED_BYTES < len(zlib.compress(text, 1))
    assert rails.configuration_too_large(config) is not None


@pytest.mark.parametrize("status", ["pending", "applied", "unconfirmed"])
def test_an_undo_pcs_refused_for_good_is_no_undo_of_the_change(status: str) -> None:
    """An operator's undo PCS refused (abandoned) leaves the change in place: it is still the episode's
    change, which later detections build on, not one that was undone."""
    made = change(100.0, status="applied")
    undo = change(200.0, "undo", status=status)
    assert Ledger(changes=[made, undo]).undo_of(made) == undo
    refused = change(200.0, "undo", status="abandoned")
    assert Ledger(changes=[made, refused]).undo_of(made) is None
    assert Ledger(changes=[made, refused, undo]).undo_of(made) == undo  # tried again, and set out


def test_the_scripts_lifeguard_quarantined_are_those_of_changes_made_and_not_undone() -> None:
    """What a configuration holds of Lifeguard's own work: a quarantine undone, or never made, is none of
    it (a node booting those scripts proves the owners' configuration)."""
    stopped = {
        "stages": {
            "nodeBootstrapped": [{**CONFIG["stages"]["nodeBootstrapped"][0], "onError": "STOP_SEQUENCE"}]
        }
    }

    def quarantine(**more: object) -> AppliedChange:
        return change(100.0, config_after=stopped, fingerprint_after=fingerprint_of(stopped), **more)

    assert Ledger(changes=[quarantine()]).quarantined() == {("nodeBootstrapped", "a")}
    assert Ledger(changes=[quarantine(undone_at=200.0)]).quarantined() == set()
    assert Ledger(changes=[quarantine(status="abandoned")]).quarantined() == set()


def test_an_undo_of_a_change_the_ledger_let_go_is_told_by_its_time() -> None:
    """A change no longer in the ledger (let go to bound the item) is matched to an undo recorded after it,
    by time: not to one recorded before it."""
    gone = change(300.0, status="applied")
    before = change(200.0, "undo", status="applied")
    after = change(400.0, "undo", status="applied")
    assert Ledger(changes=[before]).undo_of(gone) is None
    assert Ledger(changes=[after]).undo_of(gone) == after


def test_a_configuration_exactly_at_the_stored_bound_is_kept_and_one_byte_more_is_not(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The undo keeps up to CONFIG_MAX_STORED_BYTES of a configuration: that much is changed and kept."""
    monkeypatch.setattr(rails, "state_bytes", lambda _: rails.CONFIG_MAX_STORED_BYTES)
    assert rails.configuration_too_large({}) is None
    monkeypatch.setattr(rails, "state_bytes", lambda _: rails.CONFIG_MAX_STORED_BYTES + 1)
    assert "nothing is changed" in (rails.configuration_too_large({}) or "")
