"""The detection rules, table-driven, on states built from scaling-log records."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from lifeguard.attribution import LAUNCH_BOOT_AFTER_OUTCOME_MS
from lifeguard.detection import (
    LAUNCH_BOOT_MS,
    DetectionSettings,
    apply_record,
    detect,
    detect_replacement,
    drain_of,
    episode_id_for,
    mode_tagged,
    needs_fresh_config,
    proven_good,
    resolves,
    stack_mode,
)
from lifeguard.group_state import Episode, GroupState, KnownConfig
from lifeguard.scaling_log import ScalingLogRecord

MIN = 60_000
T0 = 1_792_544_685_000  # 2026-10-21 01:04:45 UTC, the article's first launch
SETTINGS = DetectionSettings(mode="quarantine", threshold=2, window_minutes=60)


def rec(kind: str, instance: str, minute: float) -> ScalingLogRecord:
    status, reason = {
        "L": ("LAUNCHED", "MAINTAIN_MIN_CAPACITY"),
        "F": ("TERMINATED", "BOOTSTRAP_FAILED"),
        "S": ("ACTIVE", "BOOTSTRAP_SUCCESS"),
        "R": ("TERMINATED", "REPLACEMENT_REQUESTED"),
        "X": ("TERMINATED", "EXTERNALLY_TERMINATED"),
        "C": ("LAUNCH_FAILED", "INSUFFICIENT_CAPACITY"),
        "Q": ("LAUNCH_FAILED", "LIMIT_EXCEEDED"),
        "U": ("TERMINATED", "UNHEALTHY_NODE"),
    }[kind]
    return ScalingLogRecord.model_validate(
        {
            "event_timestamp": T0 + int(minute * MIN),
            "status_code": status,
            "reason_code": reason,
            "resource_id": "pcs_abc123de45",
            "compute_node_group_id": "pcs_abcdef01",
            "scheduler_node_id": "lca-static-1",
            "details": {"instance_id": instance},
        }
    )


def state_of(spec: str) -> GroupState:
    """`L1@0 F1@2 …`: kind, instance number, minute."""
    state = GroupState(cluster_id="pcs_abc123de45", group_id="pcs_abcdef01")
    for token in spec.split():
        head, minute = token.split("@")
        apply_record(state, rec(head[0], f"i-{head[1:]}", float(minute)))
    return state


@pytest.mark.parametrize(
    ("spec", "expected"),
    [
        # Fresh instances replaced as unhealthy within the window of each other: a replacement loop.
        ("L1@0 U1@10 L2@12 U2@22", ["i-1", "i-2"]),
        # Two of the same kind hours apart (EC2's health checks now and then): no loop.
        ("L1@0 U1@10 L2@200 U2@210", None),
        # A node that served for longer than the window before it was found unhealthy: no part of a loop.
        ("L1@0 U1@100 L2@102 U2@112", None),
    ],
)
def test_replacement_loop_rules(spec: str, expected: list[str] | None) -> None:
    detection = detect_replacement(state_of(spec), SETTINGS, None)
    if expected is None:
        assert detection is None
        return
    assert detection is not None
    assert (detection.kind, [f.instance_id for f in detection.failures]) == ("replacement", expected)


@pytest.mark.parametrize(
    ("spec", "settings", "modified_minute", "expected"),
    [
        ("L1@0 F1@2 L2@5 F2@8", SETTINGS, None, ("loop", ["i-1", "i-2"])),
        ("L1@0 F1@2", SETTINGS, None, None),
        ("F1@2 S2@4 F3@8", SETTINGS, None, None),
        ("F1@2 F1@3", SETTINGS, None, None),  # one instance counts once
        ("F1@0 F2@61", SETTINGS, None, None),  # outside the window
        ("F1@0 F2@59", SETTINGS, None, ("loop", ["i-1", "i-2"])),
        ("F1@0 F2@60", SETTINGS, None, None),  # 60 min apart: not within 60 min
        # Five outcomes, three of them failures: the fewest an intermittent group is told at.
        ("F1@0 S2@5 F3@10 S4@15 F5@20", SETTINGS, None, ("intermittent", ["i-1", "i-3", "i-5"])),
        # A scale-out of four, half of it failing: a loop (at least half), not a scale-up's odd failure.
        ("L1@0 L2@0 L3@0 L4@0 S1@2 S2@2 F3@3 F4@3", SETTINGS, None, ("loop", ["i-3", "i-4"])),
        ("F1@0 F2@5 F3@9", DetectionSettings("notify", 3, 60), None, ("loop", ["i-1", "i-2", "i-3"])),
        ("F1@0 F2@5", DetectionSettings("notify", 3, 60), None, None),
        ("F1@0 F2@5", DetectionSettings("notify", 2, 4), None, None),
        ("C1@0 C2@1 Q3@2 C4@3", SETTINGS, None, None),  # capacity and quota are not bootstrap failures
        ("R1@0 X2@1 U3@2 R4@3", SETTINGS, None, None),
        # Launched before the configuration changed at minute 10: the old config's nodes do not count.
        ("L1@0 L2@1 F1@12 F2@13", SETTINGS, 10, None),
        ("L1@0 L2@11 F1@12 F2@13 L3@14 F3@16", SETTINGS, 10, ("loop", ["i-2", "i-3"])),
        # A failure whose launch was not seen counts when it came after the change; in a group whose
        # LAUNCHED records do come (here instance 9's), only 30 minutes after it: sooner, its node may have
        # been launched before it (its LAUNCHED delivered late), on the configuration replaced.
        ("F1@12 F2@13", SETTINGS, 10, ("loop", ["i-1", "i-2"])),
        ("F1@8 F2@9", SETTINGS, 10, None),
        ("L9@0 F1@12 F2@13", SETTINGS, 10, None),
        ("L9@0 F1@40 F2@41", SETTINGS, 10, ("loop", ["i-1", "i-2"])),
        ("L9@0 F1@39 F2@40 F3@41", SETTINGS, 10, ("loop", ["i-2", "i-3"])),
        # Nodes that came up before the run's were launched (a script broken in place since): a loop at once.
        ("L1@0 S1@5 L2@10 L3@11 F2@15 F3@16", SETTINGS, None, ("loop", ["i-2", "i-3"])),
        # Intermittent: >= 5 outcomes in the window, at least half failed, never two failures in a row.
        ("S1@0 F2@5 S3@10 F4@15 S5@20 F6@25", SETTINGS, None, ("intermittent", ["i-2", "i-4", "i-6"])),
        ("S1@0 F2@5 S3@10 F4@15", SETTINGS, None, None),
        ("S1@0 F2@5 S3@10 F4@15 S5@20 S6@25", SETTINGS, None, None),
        ("S1@0 F2@5 S3@10 F4@15 S5@70 F6@75 S7@80", SETTINGS, None, None),  # the window slides
        # A nodeReady script failing under TERMINATE: PCS logs each node ACTIVE once nodeBootstrapped is
        # over, then its failure. A failure outranks its node's success: a loop, in either order.
        ("L1@0 S1@2 F1@3 L2@6 S2@8 F2@9", SETTINGS, None, ("loop", ["i-1", "i-2"])),
        ("L1@0 F1@3 S1@2 L2@6 F2@9 S2@8", SETTINGS, None, ("loop", ["i-1", "i-2"])),
        # A scale-up: twelve nodes launched at once, ten come up, the two slowest fail last. They booted
        # beside nodes that came up: no loop (2 of 12), and none is intermittent either.
        (
            " ".join([f"L{n}@0" for n in range(1, 13)] + [f"S{n}@3" for n in range(1, 11)] + ["F11@5 F12@5"]),
            SETTINGS,
            None,
            None,
        ),
        # A scale-up of ten whose first outcomes are failures, the rest still booting: undecided, no loop
        # yet (the others coming up would make it none); once they came up, none.
        (" ".join([f"L{n}@0" for n in range(1, 11)] + ["F1@4 F2@4 F3@4"]), SETTINGS, None, None),
        (
            " ".join(
                [f"L{n}@0" for n in range(1, 11)] + ["F1@4 F2@4 F3@4"] + [f"S{n}@5" for n in range(4, 11)]
            ),
            SETTINGS,
            None,
            None,
        ),
        # Half of the ten failed: a loop whatever the rest do.
        (
            " ".join([f"L{n}@0" for n in range(1, 11)] + [f"F{n}@4" for n in range(1, 6)]),
            SETTINGS,
            None,
            ("loop", ["i-1", "i-2", "i-3", "i-4", "i-5"]),
        ),
        # A loop's replacement, launched after its failure, holds nothing back; nor do launches still
        # silent while nodes launched later told their outcomes (nodes ended before they bootstrapped, a
        # spot instance taken back, a scale-up cancelled, log none), nor launches half an hour overdue.
        ("L1@0 F1@2 L2@5 F2@8 L3@9", SETTINGS, None, ("loop", ["i-1", "i-2"])),
        ("L1@0 L2@0 F1@2 F2@2 L3@3 L4@3 L5@3", SETTINGS, None, ("loop", ["i-1", "i-2"])),
        ("L7@0 L8@0 L9@0 L1@31 F1@33 L2@35 F2@37", SETTINGS, None, ("loop", ["i-1", "i-2"])),
        ("L7@10 L8@10 L9@10 L1@31 F1@33 L2@35 F2@37", SETTINGS, None, ("loop", ["i-1", "i-2"])),
        # A busy group's script broken in place: a node launched at the breakage never boots (taken back),
        # every later one fails: a loop at the second failure, whatever the successes before.
        (
            "L1@0 S1@3 L2@3 S2@6 L3@6 S3@9 L4@9 L5@10 F5@14 L6@13 F6@17",
            SETTINGS,
            None,
            ("loop", ["i-5", "i-6"]),
        ),
        # The same with a node launched among the failing ones still silent: the window's successes from
        # before the breakage weigh nothing against the wave's failures (they held the loop back for long).
        (
            "L1@0 S1@3 L2@3 S2@6 L3@6 S3@9 L5@10 L4@12.5 F5@14 L6@13 F6@17",
            SETTINGS,
            None,
            ("loop", ["i-5", "i-6"]),
        ),
        # A wave of eight whose two fast failures come first, a second wave of four, one of which fails,
        # and six of the first still booting (slower than the failures, within twice their boot): no loop.
        (
            " ".join(
                [f"L{n}@0" for n in range(1, 9)] + ["F1@1.7 F2@1.8"] + [f"L{n}@2.5" for n in range(9, 13)]
            )
            + " F9@4.2",
            SETTINGS,
            None,
            None,
        ),
        # A scale-up of ten after a change, two fail, eight are ended while they boot (the job cancelled):
        # undecided at the second failure; the next node launched fails, and the loop is told.
        (" ".join([f"L{n}@0" for n in range(1, 11)] + ["F1@4 F2@4"]), SETTINGS, None, None),
        (
            " ".join([f"L{n}@0" for n in range(1, 11)] + ["F1@4 F2@4 L11@6 F11@10"]),
            SETTINGS,
            None,
            ("loop", ["i-1", "i-2", "i-11"]),
        ),
        # Twenty at once, the first five to finish fail: not intermittent either while fifteen still boot,
        # and no loop once they came up.
        (
            " ".join([f"L{n}@0" for n in range(1, 21)] + [f"F{n}@4" for n in range(1, 6)]),
            SETTINGS,
            None,
            None,
        ),
        (
            " ".join(
                [f"L{n}@0" for n in range(1, 21)]
                + [f"F{n}@4" for n in range(1, 6)]
                + [f"S{n}@5" for n in range(6, 21)]
            ),
            SETTINGS,
            None,
            None,
        ),
        # Four at once, three fail: at least half the window's boots failed, and they count as a loop.
        ("L1@0 L2@0 L3@0 L4@0 S1@2 F2@3 F3@3 F4@3", SETTINGS, None, ("loop", ["i-2", "i-3", "i-4"])),
        # Launched after the last node came up, failing in a row: a loop whatever came up before.
        (
            " ".join(
                [f"L{n}@0" for n in range(1, 11)]
                + [f"S{n}@3" for n in range(1, 11)]
                + ["L11@4 L12@4 F11@7 F12@7"]
            ),
            SETTINGS,
            None,
            ("loop", ["i-11", "i-12"]),
        ),
    ],
)
def test_detection_rules(
    spec: str,
    settings: DetectionSettings,
    modified_minute: int | None,
    expected: tuple[str, list[str]] | None,
) -> None:
    modified = None if modified_minute is None else T0 + modified_minute * MIN
    detection = detect(state_of(spec), settings, modified)
    if expected is None:
        assert detection is None
        return
    assert detection is not None
    assert (detection.kind, [f.instance_id for f in detection.failures]) == expected


@given(st.permutations(["L1@0", "F1@2", "L2@5", "F2@8", "L3@9", "S3@12", "L4@13", "F4@15", "L5@16", "F5@18"]))
def test_records_in_any_order_or_twice_give_the_same_detection(tokens: list[str]) -> None:
    in_order = detect(
        state_of(" ".join(sorted(tokens, key=lambda t: float(t.split("@")[1])))), SETTINGS, None
    )
    shuffled = state_of(" ".join(tokens + tokens))
    assert detect(shuffled, SETTINGS, None) == in_order
    assert in_order is not None
    assert [f.instance_id for f in in_order.failures] == ["i-4", "i-5"]


@given(st.permutations(["L1@0", "S1@2", "F1@3", "L2@6", "S2@8", "F2@9", "L3@12", "S3@14"]))
def test_a_failure_after_its_node_s_success_counts_whatever_the_order(tokens: list[str]) -> None:
    state = state_of(" ".join(tokens + tokens))
    assert {i: o.succeeded for i, o in state.outcomes.items()} == {"i-1": False, "i-2": False, "i-3": True}
    assert {i: o.event_timestamp for i, o in state.outcomes.items()} == {
        "i-1": T0 + 3 * MIN,
        "i-2": T0 + 9 * MIN,
        "i-3": T0 + 14 * MIN,
    }
    assert state.oldest_outcome_at() == T0 + 3 * MIN


@given(
    st.permutations(["L1@0", "S1@2", "F1@2882", "L2@1", "S2@3", "F2@2883", "S1@2884", "F3@2890", "L3@2888"])
)
def test_a_failure_days_after_its_node_came_up_is_a_later_boot_s_whatever_the_order(
    tokens: list[str],
) -> None:
    """Two nodes up for two days fail at a reboot (an EVERY_BOOT script): the failures are later boots', not
    the fresh instances' a loop is made of. They were folded as the nodes' outcomes, two failures in a row
    with no success in the window, and a healthy group was quarantined. A failure within a day and a half
    of its node's success still outranks it (nodeReady after ACTIVE, under TERMINATE)."""
    state = state_of(" ".join(tokens + tokens))
    assert {i: o.succeeded for i, o in state.outcomes.items()} == {"i-1": True, "i-2": True, "i-3": False}
    assert {i: o.event_timestamp for i, o in state.outcomes.items()} == {
        "i-1": T0 + 2 * MIN,
        "i-2": T0 + 3 * MIN,
        "i-3": T0 + 2890 * MIN,
    }
    assert detect(state, SETTINGS, None) is None


def test_a_failure_a_day_after_its_node_came_up_still_outranks_its_success() -> None:
    state = state_of("L1@0 S1@2 F1@1500 L2@1 S2@3 F2@1501")
    assert {i: o.succeeded for i, o in state.outcomes.items()} == {"i-1": False, "i-2": False}
    assert LAUNCH_BOOT_MS == LAUNCH_BOOT_AFTER_OUTCOME_MS + 24 * 3600 * 1000  # a day of script after it


OLD_SUCCESSES = "L1@0 S1@2 L2@1 S2@3 L3@2 S3@4 L4@3 S4@5"


@pytest.mark.parametrize(
    ("spec", "settings", "known_minute", "expected"),
    [
        # Nodes came up, then two launched after the configuration was last known failed, one launched
        # before the last success came up. On what was known that is no loop; on a configuration changed
        # after it was known, those successes say nothing, and it may be: the check fires, to read it.
        ("L1@0 L2@1 L3@2 S1@4 S2@5 S3@6 L4@7 L5@8 S4@9 L6@10 F5@12 F6@13", SETTINGS, 6, "loop"),
        ("L1@0 L2@1 L3@2 S1@4 S2@5 S3@6 L4@7 L5@8 S4@9 L6@10 F5@12 F6@13", SETTINGS, 11, None),
        # Only a success's node launched after it: the failed nodes ran what was known, and it holds.
        ("L1@0 L2@1 L5@3 L6@3 S1@4 S2@5 L4@7 F5@12 F6@13 S4@14", SETTINGS, 6, None),
        # Failures whose launches were not seen, after the configuration was last known: as launched after.
        ("L1@0 S1@2 L2@30 S2@38 F5@40 F6@41 L3@35 S3@42", SETTINGS, 39, "loop"),
        ("L1@0 S1@2 L2@30 S2@38 F5@40 F6@41 L3@35 S3@42", SETTINGS, 45, None),
        # Intermittent on a configuration newer than the four old nodes' (threshold 5: no run of failures
        # reaches it): three failures are half of what that configuration's own five boots may be.
        (
            f"{OLD_SUCCESSES} L5@10 F5@15 L6@11 S6@16 L7@12 F7@17 L8@13 S8@18 L9@14 F9@19",
            DetectionSettings(mode="quarantine", threshold=5, window_minutes=60),
            6,
            "intermittent",
        ),
        (
            f"{OLD_SUCCESSES} L5@10 F5@15 L6@11 S6@16 L7@12 F7@17 L8@13 S8@18 L9@14 F9@19",
            DetectionSettings(mode="quarantine", threshold=5, window_minutes=60),
            20,
            None,
        ),
    ],
)
def test_a_check_on_what_was_known_counts_no_success_once_a_failed_node_was_launched_after_it(
    spec: str, settings: DetectionSettings, known_minute: int, expected: str | None
) -> None:
    detection = detect(state_of(spec), settings, T0, cached=True, known_until=T0 + known_minute * MIN)
    assert (detection.kind if detection else None) == expected
    assert detect(state_of(spec), settings, T0) is None  # the rule itself, on what was known


def test_applying_a_record_twice_changes_nothing() -> None:
    state = state_of("L1@0 F1@2")
    assert not apply_record(state, rec("F", "i-1", 2))
    assert not apply_record(state, rec("L", "i-1", 0))
    assert not apply_record(state, rec("C", "i-9", 3))
    assert apply_record(state, rec("L", "i-1", -1))  # an earlier launch of the same instance wins


def with_episode(spec: str, kind: str = "loop") -> GroupState:
    """The state of `spec`, with an episode opened on what its records before the first success show."""
    state = state_of(spec)
    before = " ".join(t for t in spec.split() if not t.startswith("S") or float(t.split("@")[1]) < 2)
    detection = detect(state_of(before), SETTINGS, None) if kind == "loop" else detect(state, SETTINGS, None)
    assert detection is not None
    state.episode = Episode(
        episode_id="ep-1", kind=kind, opened_at=detection.latest, failures=list(detection.failures)
    )
    return state


@pytest.mark.parametrize(
    ("spec", "resolved_by"),
    [
        ("F1@2 F2@8", None),
        ("F1@2 F2@8 S3@12", "i-3"),
        ("F1@2 F2@8 S0@1", None),  # a success from before the failures arrived late
        ("F1@2 F2@8 F3@14 S4@20", "i-4"),
    ],
)
def test_a_loop_ends_with_a_success_after_its_last_failure(spec: str, resolved_by: str | None) -> None:
    success = resolves(with_episode(spec), SETTINGS)
    assert (success.instance_id if success else None) == resolved_by


@pytest.mark.parametrize("order", ["S3@12 S5@12 S4@12", "S5@12 S4@12 S3@12", "S4@12 S3@12 S5@12"])
def test_successes_at_one_time_are_taken_in_one_order_whatever_order_the_state_holds_them(order: str) -> None:
    # A state's outcomes come back from the table in no set order: the success that ended the loop (and
    # whether its node's reports contained or resolved it) changed from one run of a scenario to the next.
    success = resolves(with_episode(f"F1@2 F2@8 {order}"), SETTINGS)
    assert success is not None
    assert success.instance_id == "i-3"


def test_an_intermittent_episode_ends_after_three_successes_in_a_row() -> None:
    state = with_episode("S1@0 F2@5 S3@10 F4@15 S5@20 F6@25", kind="intermittent")
    assert resolves(state, SETTINGS) is None
    for instance, minute in (("i-7", 30), ("i-8", 35)):
        apply_record(state, rec("S", instance, minute))
        assert resolves(state, SETTINGS) is None  # S F S F alternating must not flap open and shut
    apply_record(state, rec("S", "i-9", 40))
    success = resolves(state, SETTINGS)
    assert success is not None
    assert success.instance_id == "i-9"


def test_evidence_from_before_the_last_episode_ended_does_not_count() -> None:
    state = state_of("F1@0 F2@5 S3@10 F4@12")
    assert detect(state, SETTINGS, None, since=T0 + 10 * MIN) is None
    apply_record(state, rec("F", "i-5", 14))
    detection = detect(state, SETTINGS, None, since=T0 + 10 * MIN)
    assert detection is not None
    assert [f.instance_id for f in detection.failures] == ["i-4", "i-5"]


def test_episode_ids_are_stable_for_the_same_evidence() -> None:
    detection = detect(state_of("F1@2 F2@8"), SETTINGS, None)
    assert detection is not None
    first = episode_id_for("pcs_abc123de45", "pcs_abcdef01", detection)
    assert first == episode_id_for("pcs_abc123de45", "pcs_abcdef01", detection)
    assert first != episode_id_for("pcs_abc123de45", "pcs_other001", detection)
    assert first.startswith("ep-")


@pytest.mark.parametrize(
    ("tags", "expected", "problems"),
    [
        ({}, ("notify", 2, 60), 0),
        ({"lifeguard:mode": "revert", "lifeguard:threshold": "3"}, ("revert", 3, 60), 0),
        ({"lifeguard:window-minutes": "15"}, ("notify", 2, 15), 0),
        ({"lifeguard:mode": "panic"}, ("notify", 2, 60), 1),
        ({"lifeguard:threshold": "0", "lifeguard:window-minutes": "x"}, ("notify", 2, 60), 2),
        ({"lifeguard:mode": "off"}, ("off", 2, 60), 0),
    ],
)
def test_tags_tune_a_group_and_bad_tags_are_reported(
    tags: dict[str, str], expected: tuple[str, int, int], problems: int
) -> None:
    settings, found = DetectionSettings("notify", 2, 60).with_tags(tags)
    assert (settings.mode, settings.threshold, settings.window_minutes) == expected
    assert len(found) == problems


def test_stack_defaults_come_from_the_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("LIFEGUARD_DEFAULT_MODE", "quarantine")
    monkeypatch.setenv("LIFEGUARD_THRESHOLD", "4")
    assert DetectionSettings.stack_defaults() == DetectionSettings("quarantine", 4, 60)
    assert DetectionSettings.stack_defaults(threshold=3).threshold == 3
    monkeypatch.setenv("LIFEGUARD_WINDOW_MINUTES", "soon")
    with pytest.raises(ValueError, match="LIFEGUARD_WINDOW_MINUTES='soon'"):
        DetectionSettings.stack_defaults()


def test_history_the_state_already_let_go_of_is_not_taken_back() -> None:
    from lifeguard.group_state import OUTCOME_LIMIT

    state = state_of(" ".join(f"S{n}@{10 + n}" for n in range(OUTCOME_LIMIT)))
    assert len(state.outcomes) == OUTCOME_LIMIT
    assert not apply_record(state, rec("F", "i-old", 1))  # older than all it keeps: already forgotten
    assert not apply_record(state, rec("L", "i-old", 1))
    assert apply_record(state, rec("F", "i-new", 10 + OUTCOME_LIMIT))


@pytest.mark.parametrize("value", ["0", "1", "101", "-3", "two", "9" * 256, ""])
def test_a_threshold_tag_out_of_its_bounds_is_ignored_and_said(value: str) -> None:
    """A tag cannot make one failure a loop (whoever may tag a group would have a group tagged `revert`
    changed on a single failure); the stack's Threshold can be 1."""
    settings, problems = DetectionSettings("revert", 3, 60).with_tags(
        {"lifeguard:threshold": value, "lifeguard:window-minutes": "10081"}
    )
    assert (settings.threshold, settings.window_minutes) == (3, 60)
    assert problems[0].startswith("tag lifeguard:threshold: ")
    assert problems[0].endswith("is not a whole number from 2 to 100")
    assert problems[1].endswith("is not a whole number from 1 to 10080")
    assert all(len(problem) < 120 for problem in problems)


def test_tags_within_their_bounds_tune_the_group() -> None:
    settings, problems = SETTINGS.with_tags(
        {"lifeguard:threshold": "100", "lifeguard:window-minutes": "10080"}
    )
    assert (settings.threshold, settings.window_minutes, problems) == (100, 10080, [])
    settings, problems = SETTINGS.with_tags({"lifeguard:threshold": "2", "lifeguard:window-minutes": "1"})
    assert (settings.threshold, settings.window_minutes, problems) == (2, 1, [])
    assert DetectionSettings("notify", 1, 60).threshold == 1  # the stack's own


def test_a_replacement_loop_is_told_at_the_groups_threshold() -> None:
    """`threshold` nodes replaced as unhealthy, the group's (a tag may ask 5), not two."""
    state = state_of("L1@0 U1@10 L2@12 U2@22")
    assert detect_replacement(state, SETTINGS, None) is not None
    assert detect_replacement(state, DetectionSettings("quarantine", 3, 60), None) is None


# -- the proven-good rule --


def known(modified_minute: float, checked_minute: float, fingerprint: str = "f" * 64) -> KnownConfig:
    return KnownConfig(
        modified_at=T0 + int(modified_minute * MIN),
        fingerprint=fingerprint,
        node_lifecycle_actions={"nodeBootstrapped": []},
        checked_at=T0 + int(checked_minute * MIN),
    )


def successes_of(spec: str) -> list[ScalingLogRecord]:
    return [
        rec(head[0], f"i-{head[1:]}", float(minute)) for head, minute in (t.split("@") for t in spec.split())
    ]


@pytest.mark.parametrize(
    ("spec", "modified", "checked", "expected"),
    [
        ("L1@10 S1@12", 5, 11, "i-1"),  # launched between the change and the read: proves it
        ("L1@10 S1@12", 11, 20, None),  # launched before the configuration took effect
        ("L1@10 S1@12", 5, 9, None),  # launched after the last read: may have run a newer one
        ("L1@10 S1@12 L2@11 S2@14", 5, 30, "i-2"),  # the newest success is the proof
        ("L1@10 F1@12", 5, 30, None),  # a failure proves nothing
        ("S1@12", 5, 9, None),  # its launch unseen, taken at its success: after the read
    ],
)
def test_a_configuration_is_proven_by_a_success_of_a_node_launched_on_it(
    spec: str, modified: float, checked: float, expected: str | None
) -> None:
    state = state_of(spec)
    proof = proven_good(
        state, [r for r in successes_of(spec) if r.is_bootstrap_success], known(modified, checked)
    )
    assert (proof.instance_id if proof else None) == expected
    if proof is not None:
        assert (proof.modified_at, proof.fingerprint) == (T0 + modified * MIN, "f" * 64)
        assert proof.node_lifecycle_actions == {"nodeBootstrapped": []}


def test_a_node_a_quarantine_kept_proves_nothing_though_pcs_logged_it_a_success() -> None:
    """PCS logs a STOP_SEQUENCE failure as BOOTSTRAP_SUCCESS: the episode's kept node booted with its script
    failing, whatever else would take its success for a proof. Another node's success on it proves."""
    state = state_of("L1@10 S1@12 L2@11 S2@13")
    state.episode = Episode(episode_id="ep-1", kind="loop", opened_at=T0, kept=["i-1", "i-2"])
    assert proven_good(state, successes_of("S1@12 S2@13"), known(5, 30)) is None
    state.episode.kept = ["i-1"]
    proof = proven_good(state, successes_of("S1@12 S2@13"), known(5, 30))
    assert proof is not None
    assert proof.instance_id == "i-2"


def test_the_proven_good_configuration_is_not_proven_again() -> None:
    state = state_of("L1@10 S1@12")
    config = known(5, 30)
    first = proven_good(state, successes_of("S1@12"), config)
    assert first is not None
    state.proven_good = first
    assert proven_good(state, successes_of("S1@12"), config) is None
    assert proven_good(state, successes_of("S1@12"), known(5, 30, fingerprint="e" * 64)) is not None


@pytest.mark.parametrize(
    ("spec", "checked", "expected"),
    [
        ("L1@10 S1@12", 11, False),  # launched before the read: what was read is what it ran
        ("L1@10 S1@12", 9, True),  # launched after the read, a minute or more ago: read again
        ("L1@10 S1@10.5", 9.8, False),  # launched after the read, but it is too soon to read again
    ],
)
def test_a_fresh_read_is_needed_only_for_nodes_launched_after_the_last_one(
    spec: str, checked: float, expected: bool
) -> None:
    state = state_of(spec)
    state.config = known(5, checked)
    successes = [r for r in successes_of(spec) if r.is_bootstrap_success]
    assert needs_fresh_config(state, successes, refresh_ms=MIN) is expected
    state.config = None
    assert needs_fresh_config(state, successes, refresh_ms=MIN) is True


def test_the_stack_mode_is_explicit_else_the_environment_else_notify_and_a_bad_one_is_named(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.delenv("LIFEGUARD_DEFAULT_MODE", raising=False)
    assert stack_mode() == "notify"
    monkeypatch.setenv("LIFEGUARD_DEFAULT_MODE", "revert")
    assert stack_mode() == "revert"
    assert stack_mode("quarantine") == "quarantine"
    monkeypatch.setenv("LIFEGUARD_DEFAULT_MODE", "fix-it")
    with pytest.raises(ValueError, match="LIFEGUARD_DEFAULT_MODE='fix-it' is not valid"):
        stack_mode()


def test_a_group_says_its_own_mode_only_with_the_tag() -> None:
    assert mode_tagged({"lifeguard:mode": "off"}) is True
    assert mode_tagged({"lifeguard:threshold": "3"}) is False
    assert mode_tagged({"Lifeguard:Mode": "off"}) is True  # only like it: it fails closed, said


def test_tags_whose_keys_are_only_like_lifeguards_ask_nothing_and_are_said() -> None:
    stack = DetectionSettings(mode="quarantine", threshold=2, window_minutes=60)
    tags = {"Lifeguard:Threshold": "5", " lifeguard:window-minutes": "10", "managed-by": "terraform"}
    assert stack.with_tags(tags) == (
        stack,
        [
            "tag 'Lifeguard:Threshold' is not lifeguard:threshold (tag keys are case-sensitive); ignored",
            "tag ' lifeguard:window-minutes' is not lifeguard:window-minutes (tag keys are case-sensitive); "
            "ignored",
        ],
    )
    assert stack.with_tags({"managed-by": "terraform"}) == (stack, [])
    assert drain_of({"Lifeguard:Drain": "true"}, False) == (
        False,
        "tag 'Lifeguard:Drain' is not lifeguard:drain (tag keys are case-sensitive); ignored",
    )


@pytest.mark.parametrize(
    ("tags", "default", "expected"),
    [
        ({}, False, (False, None)),
        ({}, True, (True, None)),
        ({"lifeguard:drain": "TRUE"}, False, (True, None)),
        ({"lifeguard:drain": "false"}, True, (False, None)),
        (
            {"lifeguard:drain": "yes please"},
            False,
            (False, "tag lifeguard:drain: 'yes please' is not true or false"),
        ),
    ],
)
def test_whether_kept_nodes_are_drained_is_the_group_s_tag_else_the_stack_s(
    tags: dict[str, str], default: bool, expected: tuple[bool, str | None]
) -> None:
    assert drain_of(tags, default) == expected
