"""The node's clock: the machine's, or the twin's virtual one when LIFEGUARD_SIM_CLOCK_OFFSET_SECONDS is
set."""

from __future__ import annotations

import time
from datetime import UTC, datetime

import pytest
from hypothesis import example, given
from hypothesis import strategies as st

from lifeguard.node import clock


@pytest.mark.parametrize("raw", ["", "soon", "nan", "inf", str(400 * 24 * 3600)])
def test_without_a_usable_offset_the_node_keeps_the_machine_s_clock(
    raw: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv(clock.CLOCK_OFFSET_VARIABLE, raw)
    assert clock.offset() == 0.0
    assert abs(clock.now() - time.time()) < 1


def test_an_offset_shifts_every_time_the_node_side_takes(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(clock.CLOCK_OFFSET_VARIABLE, "-3600.5")
    assert clock.offset() == -3600.5
    assert abs(clock.now() - (time.time() - 3600.5)) < 1


@pytest.mark.parametrize(
    ("raw", "seconds"), [(None, 0.0), ("27", 27.0), ("0.5", 0.5), ("-27", 0.0), ("nan", 0.0), ("7200", 0.0)]
)
def test_only_a_number_of_seconds_within_an_hour_moves_the_twins_node_clock_between_stages(
    raw: str | None, seconds: float, monkeypatch: pytest.MonkeyPatch
) -> None:
    if raw is None:
        monkeypatch.delenv(clock.READY_AFTER_VARIABLE, raising=False)
    else:
        monkeypatch.setenv(clock.READY_AFTER_VARIABLE, raw)
    assert clock.ready_after() == seconds


def test_advancing_the_clock_moves_this_process_and_what_it_starts(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(clock.CLOCK_OFFSET_VARIABLE, "-3600")
    assert clock.advance(27.25) == "-3572.750"
    assert clock.offset() == -3572.75
    assert abs(clock.now() - (time.time() - 3572.75)) < 1


@given(st.floats(min_value=-4e9, max_value=4e9))
@example(1792544247.9999996).via("rounds up into the next second")
@example(1792544247.0000004).via("rounds down")
@example(375926671.9173455).via("half a microsecond, as datetime rounds it")
@example(-5.000000000000001e-07).via("just before the epoch")
@example(-1.9999996).via("rounds down into the next second, before the epoch")
def test_a_stamp_is_the_one_datetime_writes(seconds: float) -> None:
    moment = datetime.fromtimestamp(seconds, UTC)
    assert clock.utc_stamp(seconds) == moment.strftime("%Y-%m-%dT%H:%M:%S.%fZ")
    assert clock.utc_stamp(seconds, fraction=False) == moment.strftime("%Y-%m-%dT%H:%M:%SZ")


@pytest.mark.parametrize(
    ("stamp", "seconds"),
    [
        ("2026-10-21T00:57:27.868622Z", 1792544247.868622),
        ("2026-10-21T00:57:27.868622123Z", 1792544247.868622123),  # 9 digits: Python 3.9 reads 3 or 6
        ("2026-10-21T00:57:27.8Z", 1792544247.8),
        ("2026-10-21t00:57:27z", 1792544247.0),  # RFC 3339 allows the lower case
        ("2026-10-21T02:57:27+02:00", 1792544247.0),
        ("2026-10-21T00:57:27", 1792544247.0),  # no zone: UTC, as the executors write
    ],
)
def test_an_rfc3339_stamp_is_read_whatever_its_fraction_case_or_zone(stamp: str, seconds: float) -> None:
    from lifeguard.node.clock import read_stamp

    assert read_stamp(stamp) == pytest.approx(seconds, abs=1e-6)


@pytest.mark.parametrize("stamp", ["soon", "2026-10-21", 1792544247, None, "2026-13-40T00:00:00Z"])
def test_what_is_no_rfc3339_stamp_reads_as_none(stamp: object) -> None:
    from lifeguard.node.clock import read_stamp

    assert read_stamp(stamp) is None
