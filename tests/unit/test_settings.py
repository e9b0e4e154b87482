"""Where a setting comes from: explicit argument > `LIFEGUARD_<NAME>` > default, and a bad environment value
named in the error."""

from __future__ import annotations

import pytest

from lifeguard.settings import setting


def test_an_explicit_value_wins_even_over_a_bad_environment_value(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("LIFEGUARD_DAILY_CAP", "many")
    assert setting("daily_cap", 7, 3, int) == 7
    assert setting("daily_cap", 0, 3, int) == 0  # a falsy explicit value is still explicit


def test_the_environment_variable_named_after_the_setting_comes_next(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("LIFEGUARD_FETCH_BACKOFF_SECONDS", "2.5")
    assert setting("fetch_backoff_seconds", None, 1.0, float) == 2.5
    assert setting("FETCH_BACKOFF_SECONDS", None, 1.0, float) == 2.5


@pytest.mark.parametrize("raw", [None, ""])
def test_an_unset_or_empty_variable_gives_the_default(
    monkeypatch: pytest.MonkeyPatch, raw: str | None
) -> None:
    if raw is None:
        monkeypatch.delenv("LIFEGUARD_THRESHOLD", raising=False)
    else:
        monkeypatch.setenv("LIFEGUARD_THRESHOLD", raw)
    assert setting("threshold", None, 2, int) == 2


def test_a_value_parse_refuses_is_an_error_naming_the_variable_and_the_value(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("LIFEGUARD_THRESHOLD", "two")
    with pytest.raises(
        ValueError, match=r"^LIFEGUARD_THRESHOLD='two' is not valid: invalid literal"
    ) as raised:
        setting("threshold", None, 2, int)
    assert raised.value.__cause__ is None


def test_errors_other_than_value_errors_are_not_reworded(monkeypatch: pytest.MonkeyPatch) -> None:
    def parse(raw: str) -> int:
        raise TypeError(raw)

    monkeypatch.setenv("LIFEGUARD_THRESHOLD", "x")
    with pytest.raises(TypeError):
        setting("threshold", None, 2, parse)
