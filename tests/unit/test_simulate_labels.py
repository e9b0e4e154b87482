"""How a simulation's results name the Lifeguard they show: by the modes it acted in."""

from __future__ import annotations

from typing import Any

from lifeguard_cli.simulate.html import render_html
from lifeguard_cli.simulate.render import summary_table


def _document(*modes: str) -> dict[str, Any]:
    events = [
        {"detail-type": "RemediationApplied", "minute": 9.0, "detail": {"mode": mode}} for mode in modes
    ]
    return {
        "scenario": "tagged",
        "mode": "quarantine",
        "seed": 1,
        "horizon_minutes": 30,
        "groups": {},
        "events": events,
        "changes": [],
        "notifications": [],
        "timeline": [],
        "instances": [],
    }


def test_the_column_is_headed_by_the_mode_the_group_acted_in_not_the_stacks_default() -> None:
    """A group tagged `lifeguard:mode: revert` under a quarantine stack was reverted: its results read
    `Lifeguard (revert)`, as its Slack message says, not the stack's default."""
    assert summary_table(_document("revert")).columns[2].header == "Lifeguard (revert)"
    assert (
        summary_table(_document("revert", "quarantine")).columns[2].header == "Lifeguard (revert, quarantine)"
    )
    assert summary_table(_document()).columns[2].header == "Lifeguard (quarantine)"  # no event: the default
    assert "<title>tagged: Lifeguard (revert)</title>" in render_html(_document("revert"))
