"""The `--html` report of `lifeguard simulate`: one self-contained page (inline CSS and SVG, no script,
nothing to fetch) for a person to look at rather than read.

Per compute node group, one lane per node slot over the scenario's minutes: each instance a bar from its
launch to its end (to the horizon when still up), coloured by what it was doing (booting, ACTIVE and
serving, ACTIVE but drained by Lifeguard) and by how it ended; a launch that failed is a small mark.
Lifeguard's changes, and the scenario's own, are vertical lines with a label. Above the lanes, the CLI's
numbers per group, Lifeguard against the baseline when there is one.

The document is trusted for its shape only: every string from it is escaped.
"""

from __future__ import annotations

import math
import re
from collections.abc import Callable, Iterable, Mapping, Sequence
from html import escape
from typing import Any

from lifeguard.notify.summary import diff_line
from lifeguard_cli.simulate.twin import BASELINE_NAMES, MEASURES, NEVER, acting_modes, measure_shown

__all__ = ["render_html"]

# What an instance was doing: (colour, legend).
_PHASES = {
    "booting": ("#9fb3cb", "booting (launched, not yet ACTIVE)"),
    "serving": ("#2f9e5b", "ACTIVE, serving"),
    "drained": ("#e3a21a", "ACTIVE, drained by Lifeguard"),
}
# How it ended: a bar that never became ACTIVE takes the colour whole, one that did gets an end cap.
_ENDS = {
    "BOOTSTRAP_FAILED": ("#d62f3a", "ended BOOTSTRAP_FAILED"),
    "UNHEALTHY_NODE": ("#8e44ad", "ended UNHEALTHY_NODE"),
    "REPLACEMENT_REQUESTED": ("#e0641b", "ended REPLACEMENT_REQUESTED"),
    "INSUFFICIENT_CAPACITY": ("#444444", "launch failed (INSUFFICIENT_CAPACITY)"),
}
_OTHER_END = "#777777"
_LIFEGUARD_MARK = "#1b2540"
_SCENARIO_MARK = "#2f6bd8"

# The lanes' geometry, in SVG user units (the chart is drawn 1200 wide and scales to the page).
_WIDTH = 1200.0
_LABEL_WIDTH = 150.0
_RIGHT_PAD = 24.0
_MARKER_ROWS = 3
_MARKER_ROW_HEIGHT = 14.0
_AXIS_HEIGHT = 34.0
_LANE_MAX = 22.0
_LANE_MIN = 2.0
_LANES_MAX_HEIGHT = 480.0  # lanes get thinner, down to _LANE_MIN, before the chart grows past this
_LABEL_MIN_SPACING = 11.0
_CHAR_WIDTH = 6.2  # of the 11-unit labels, for placing marker labels without overlap
_TICK_STEPS = (1, 2, 5, 10, 15, 20, 30, 60, 120, 180, 240, 360, 720, 1440)
_EVENTS_SHOWN = 500

_Scale = Callable[[float], float]  # a minute to its x in the chart

_CSS = """
body { font: 14px/1.45 system-ui, -apple-system, "Segoe UI", Roboto, Helvetica, Arial, sans-serif;
  color: #1d2330; background: #fff; margin: 0 auto; padding: 20px 28px 40px; max-width: 1260px; }
h1 { font-size: 22px; margin: 0 0 4px; }
h2 { font-size: 18px; margin: 28px 0 6px; border-bottom: 1px solid #dde2ea; padding-bottom: 4px; }
h3 { font-size: 14px; margin: 14px 0 2px; color: #3a4356; }
.sub, .id { color: #5b6577; }
.id { font-family: ui-monospace, "SFMono-Regular", Menlo, Consolas, monospace; font-size: 12px; }
.legend { display: flex; flex-wrap: wrap; gap: 6px 18px; margin: 12px 0 4px; font-size: 13px; }
.legend span { display: inline-flex; align-items: center; gap: 6px; }
.legend i { display: inline-block; width: 22px; height: 11px; border-radius: 2px; }
.legend i.mark { width: 0; height: 14px; border-radius: 0; border-left: 2px solid; }
.legend i.dashed { border-left-style: dashed; }
.legend i.cap { width: 4px; }
table { border-collapse: collapse; margin: 8px 0; font-size: 13px; }
th, td { padding: 3px 12px 3px 0; text-align: left; vertical-align: top; }
thead th { border-bottom: 2px solid #c9d0db; }
tbody tr + tr td, tbody tr + tr th { border-top: 1px solid #eef1f5; }
td.num { text-align: right; font-variant-numeric: tabular-nums; }
tr.group th { padding-top: 10px; font-size: 14px; }
.never { color: #b3261e; }
svg { display: block; width: 100%; height: auto; margin: 4px 0 10px; }
svg text { font-family: system-ui, -apple-system, "Segoe UI", Roboto, Helvetica, Arial, sans-serif; }
details { margin: 10px 0; }
summary { cursor: pointer; font-weight: 600; }
.empty { color: #5b6577; font-style: italic; }
"""


def render_html(document: Mapping[str, Any]) -> str:
    """The simulation `document` (the `--json` output) as one self-contained HTML page."""
    baseline: Mapping[str, Any] | None = document.get("baseline") or None
    horizon = float(document["horizon_minutes"]) or 1.0
    groups: Mapping[str, Mapping[str, Any]] = document["groups"]
    title = f"{document['scenario']}: Lifeguard ({acting_modes(document)})"
    subtitle = [f"seed {document.get('seed')}", f"horizon {_number(document['horizon_minutes'])} minutes"]
    if baseline is not None:
        subtitle.append(f"against {_baseline_name(baseline)}")
    parts = [
        "<!DOCTYPE html>",
        '<html lang="en"><head><meta charset="utf-8">',
        '<meta name="viewport" content="width=device-width, initial-scale=1">',
        '<link rel="icon" href="data:,">',
        f"<title>{_e(title)}</title>",
        f"<style>{_CSS}</style>",
        "</head><body>",
        f"<h1>{_e(document['scenario'])} <span class='sub'>· Lifeguard ({_e(acting_modes(document))})"
        "</span></h1>",
        f"<p class='sub'>{_e(', '.join(subtitle))}</p>",
        _summary_table(document, baseline),
        _legend(),
    ]
    for name, group in groups.items():
        parts.append(_group_section(name, group, document, baseline, horizon))
    parts.append(_changes_table(document.get("changes") or []))
    parts.append(_events_list(document.get("events") or [], groups))
    parts.append("</body></html>")
    return "\n".join(part for part in parts if part) + "\n"


def _summary_table(document: Mapping[str, Any], baseline: Mapping[str, Any] | None) -> str:
    head = ["<th>measure</th>", f"<th>Lifeguard ({_e(acting_modes(document))})</th>"]
    if baseline is not None:
        head.append(f"<th>{_e(_baseline_name(baseline))}</th>")
    rows = []
    for name, group in document["groups"].items():
        rows.append(f"<tr class='group'><th colspan='{len(head)}'>{_e(name)}</th></tr>")
        other: Mapping[str, Any] = {}
        if baseline is not None:
            other = (baseline.get("groups") or {}).get(name) or {}
        for key, label in MEASURES:
            cells = [f"<td>{_e(label)}</td>", _measure_cell(key, group)]
            if baseline is not None:
                cells.append(_measure_cell(key, other))
            rows.append(f"<tr>{''.join(cells)}</tr>")
    return (
        "<h2>Outcome</h2><table class='summary'>"
        f"<thead><tr>{''.join(head)}</tr></thead><tbody>{''.join(rows)}</tbody></table>"
    )


def _measure_cell(key: str, group: Mapping[str, Any]) -> str:
    shown = measure_shown(key, group)
    return f"<td class='num{' never' if shown == NEVER else ''}'>{_e(shown)}</td>"


def _legend() -> str:
    items = [
        f"<span><i style='background:{colour}'></i>{_e(text)}</span>" for colour, text in _PHASES.values()
    ]
    items += [
        f"<span><i style='background:{colour}'></i>{_e(text)}</span>"
        for end, (colour, text) in _ENDS.items()
        if end != "INSUFFICIENT_CAPACITY"
    ]
    capacity, capacity_text = _ENDS["INSUFFICIENT_CAPACITY"]
    items.append(
        "<span><svg width='12' height='12' viewBox='0 0 12 12' style='width:12px;margin:0'>"
        f"<path d='M6 1L11 6L6 11L1 6Z' fill='{capacity}'/></svg>{_e(capacity_text)}</span>"
    )
    items.append(
        f"<span><i class='mark' style='border-color:{_LIFEGUARD_MARK}'></i>Lifeguard's action</span>"
    )
    items.append(
        f"<span><i class='mark dashed' style='border-color:{_SCENARIO_MARK}'></i>the scenario's change</span>"
    )
    return (
        "<div class='legend'>"
        + "".join(items)
        + "</div><p class='sub'>A bar that became ACTIVE and then ended carries a cap in the colour of its "
        "end; a bar that reaches the right edge was still up at the horizon. Hover a bar or a line for "
        "details.</p>"
    )


def _group_section(
    name: str,
    group: Mapping[str, Any],
    document: Mapping[str, Any],
    baseline: Mapping[str, Any] | None,
    horizon: float,
) -> str:
    mine = [i for i in document.get("instances") or [] if i.get("group") == name]
    theirs = [i for i in (baseline or {}).get("instances") or [] if i.get("group") == name]
    # Both runs share the lanes, so a slot sits at the same height in both charts.
    slots = sorted({str(i.get("node")) for i in [*mine, *theirs]}, key=_natural)
    header = (
        f"<h2>{_e(name)} <span class='id'>{_e(group.get('compute_node_group_id', ''))}</span></h2>"
        f"<p class='sub'>{_e(_slots(group.get('nodes')))}</p>"
    )
    charts = [
        f"<h3>Lifeguard ({_e(acting_modes(document))})</h3>",
        _lanes(slots, mine, _for_group(document.get("changes"), name), horizon, f"{name}, Lifeguard"),
    ]
    if baseline is not None:
        charts += [
            f"<h3>{_e(_baseline_name(baseline))}</h3>",
            _lanes(slots, theirs, _for_group(baseline.get("changes"), name), horizon, f"{name}, baseline"),
        ]
    return f"<section>{header}{''.join(charts)}</section>"


def _slots(nodes: Any) -> str:
    return "1 node slot" if nodes == 1 else f"{_number(nodes)} node slots"


def _for_group(changes: Iterable[Mapping[str, Any]] | None, name: str) -> list[Mapping[str, Any]]:
    return [change for change in changes or [] if change.get("group") == name]


def _lanes(
    slots: Sequence[str],
    instances: Sequence[Mapping[str, Any]],
    changes: Sequence[Mapping[str, Any]],
    horizon: float,
    label: str,
) -> str:
    """One chart: a lane per slot, the instances as bars, the changes as vertical lines."""
    if not slots:
        return "<p class='empty'>No instance was launched.</p>"
    lane = min(_LANE_MAX, max(_LANE_MIN, _LANES_MAX_HEIGHT / len(slots)))
    top = _MARKER_ROWS * _MARKER_ROW_HEIGHT + 4
    lanes_height = lane * len(slots)
    height = top + lanes_height + _AXIS_HEIGHT
    left, right = _LABEL_WIDTH, _WIDTH - _RIGHT_PAD

    def x(minute: float) -> float:
        return left + (right - left) * min(max(minute, 0.0), horizon) / horizon

    out = [
        f"<svg viewBox='0 0 {_WIDTH:g} {height:.1f}' role='img' aria-label='{_e(label)}'>",
        f"<rect x='{left}' y='{top}' width='{right - left}' height='{lanes_height:.1f}' fill='#f7f8fa'/>",
    ]
    out += _axis(x, horizon, top, lanes_height)
    row = {slot: index for index, slot in enumerate(slots)}
    label_every = next(k for k in _label_steps() if k * lane >= _LABEL_MIN_SPACING)
    font = min(12.0, max(9.0, lane * 0.8)) if label_every == 1 else 10.0
    for index, slot in enumerate(slots):
        y = top + index * lane
        if lane >= 6 and index % 2:
            out.append(
                f"<rect x='{left}' y='{y:.2f}' width='{right - left}' height='{lane:.2f}' fill='#eef1f5'/>"
            )
        if index % label_every == 0:
            out.append(
                f"<text x='{left - 12}' y='{y + lane / 2:.2f}' font-size='{font:g}' text-anchor='end' "
                f"dominant-baseline='central' fill='#3a4356'>{_e(slot)}</text>"
            )
    bar = max(1.0, lane * 0.7)
    for instance in instances:
        y = top + row[str(instance.get("node"))] * lane + (lane - bar) / 2
        out += _bar(instance, x, y, bar, horizon)
    out += _markers(changes, x, top, lanes_height)
    out.append("</svg>")
    return "".join(out)


def _label_steps() -> Iterable[int]:
    step = 1
    while True:
        for factor in (1, 2, 5):
            yield step * factor
        step *= 10


def _axis(x: _Scale, horizon: float, top: float, lanes_height: float) -> list[str]:
    step = next((s for s in _TICK_STEPS if horizon / s <= 12), math.ceil(horizon / 12))
    bottom = top + lanes_height
    out = []
    for tick in range(0, int(horizon) + 1, step):
        at = x(float(tick))
        out.append(f"<line x1='{at:.1f}' y1='{top}' x2='{at:.1f}' y2='{bottom + 4:.1f}' stroke='#dde2ea'/>")
        out.append(
            f"<text x='{at:.1f}' y='{bottom + 16:.1f}' font-size='11' text-anchor='middle' "
            f"fill='#5b6577'>{tick}</text>"
        )
    out.append(
        f"<text x='{x(horizon):.1f}' y='{bottom + 30:.1f}' font-size='11' text-anchor='end' "
        "fill='#5b6577'>minutes from the scenario's start</text>"
    )
    return out


def _bar(instance: Mapping[str, Any], x: _Scale, y: float, height: float, horizon: float) -> list[str]:
    launched = _float(instance.get("launched_minute")) or 0.0
    active = _float(instance.get("active_minute"))
    drained = _float(instance.get("drained_minute"))
    ended = _float(instance.get("ended_minute"))
    end = instance.get("end")
    end_colour = _ENDS[end][0] if end in _ENDS else _OTHER_END
    tip = f"<title>{_e(_describe(instance))}</title>"
    if end == "INSUFFICIENT_CAPACITY" or (not instance.get("instance_id") and ended == launched):
        cx, cy, r = x(launched), y + height / 2, max(2.5, height / 2)
        return [
            f"<path d='M{cx:.1f} {cy - r:.1f}L{cx + r:.1f} {cy:.1f}L{cx:.1f} {cy + r:.1f}"
            f"L{cx - r:.1f} {cy:.1f}Z' fill='{end_colour}'>{tip}</path>"
        ]
    stop = horizon if ended is None else ended
    if active is None:
        segments = [(launched, stop, _PHASES["booting"][0] if ended is None else end_colour)]
    else:
        serving_stop = stop if drained is None else drained
        segments = [
            (launched, active, _PHASES["booting"][0]),
            (active, serving_stop, _PHASES["serving"][0]),
            (serving_stop, stop, _PHASES["drained"][0]),
        ]
    # A bar too short to see still shows: the first segment at least, at least 1.5 wide.
    segments = [segment for segment in segments if segment[1] > segment[0]] or segments[:1]
    out = ["<g>", tip]
    for start, finish, colour in segments:
        width = max(1.5, x(finish) - x(start))
        out.append(
            f"<rect x='{x(start):.2f}' y='{y:.2f}' width='{width:.2f}' height='{height:.2f}' "
            f"fill='{colour}'/>"
        )
    if active is not None and ended is not None:
        cap = min(4.0, max(2.0, x(stop) - x(launched)))
        out.append(
            f"<rect x='{x(stop) - cap:.2f}' y='{y:.2f}' width='{cap:.2f}' height='{height:.2f}' "
            f"fill='{end_colour}'/>"
        )
    out.append("</g>")
    return out


def _describe(instance: Mapping[str, Any]) -> str:
    who = instance.get("instance_id") or "no instance"
    lines = [
        f"{who} on {instance.get('node')}",
        f"launched at minute {_number(instance.get('launched_minute'))}",
    ]
    for key, what in (
        ("registered_minute", "registered"),
        ("active_minute", "ACTIVE"),
        ("drained_minute", "drained by Lifeguard"),
    ):
        if instance.get(key) is not None:
            lines.append(f"{what} at minute {_number(instance[key])}")
    if instance.get("ended_minute") is None:
        lines.append("still up at the horizon")
    else:
        lines.append(f"ended at minute {_number(instance['ended_minute'])}: {instance.get('end') or 'ended'}")
    return "\n".join(lines)


def _markers(changes: Sequence[Mapping[str, Any]], x: _Scale, top: float, lanes_height: float) -> list[str]:
    out = []
    row_ends = [-math.inf] * _MARKER_ROWS
    for change in sorted(changes, key=lambda c: _float(c.get("at_minute")) or 0.0):
        at = x(_float(change.get("at_minute")) or 0.0)
        lifeguard = change.get("by") == "lifeguard"
        text = str(change.get("action") or "change") if lifeguard else "scenario change"
        colour = _LIFEGUARD_MARK if lifeguard else _SCENARIO_MARK
        dash = "" if lifeguard else " stroke-dasharray='5 3'"
        tip = f"<title>{_e(_change_text(change))}</title>"
        out.append(
            f"<g><line x1='{at:.1f}' y1='{top - 2:.1f}' x2='{at:.1f}' y2='{top + lanes_height:.1f}' "
            f"stroke='{colour}' stroke-width='2'{dash}/>"
            f"<line x1='{at:.1f}' y1='{top:.1f}' x2='{at:.1f}' y2='{top + lanes_height:.1f}' "
            f"stroke='transparent' stroke-width='8'/>{tip}</g>"
        )
        width = len(text) * _CHAR_WIDTH
        start, anchor = at + 3, "start"
        if start + width > _WIDTH:
            start, anchor = at - 3 - width, "end"
        free = next((r for r, last in enumerate(row_ends) if last < start - 2), None)
        if free is None:
            continue  # no room: the line and its tooltip stay
        row_ends[free] = start + width
        label_x = start if anchor == "start" else at - 3
        label_y = top - 6 - free * _MARKER_ROW_HEIGHT
        out.append(
            f"<text x='{label_x:.1f}' y='{label_y:.1f}' font-size='11' text-anchor='{anchor}' "
            f"fill='{colour}' font-weight='600'>{_e(text)}{tip}</text>"
        )
    return out


def _change_text(change: Mapping[str, Any]) -> str:
    lines = [f"minute {_number(change.get('at_minute'))}, {change.get('group')}, by {_by(change)}"]
    lines += [diff_line(entry) for entry in change.get("diff") or []]
    return "\n".join(lines)


def _by(change: Mapping[str, Any]) -> str:
    if change.get("by") == "lifeguard":
        return f"Lifeguard ({change.get('action') or 'change'})"
    return "the scenario"


def _changes_table(changes: Sequence[Mapping[str, Any]]) -> str:
    if not changes:
        return "<h2>Configuration changes</h2><p class='empty'>None.</p>"
    rows = []
    for change in changes:
        diff = "<br>".join(_e(diff_line(entry)) for entry in change.get("diff") or [])
        rows.append(
            f"<tr><td class='num'>{_e(_number(change.get('at_minute')))}</td>"
            f"<td>{_e(change.get('group'))}</td><td>{_e(_by(change))}</td><td class='id'>{diff}</td></tr>"
        )
    return (
        "<h2>Configuration changes</h2><table><thead><tr><th>minute</th><th>group</th><th>by</th>"
        f"<th>diff</th></tr></thead><tbody>{''.join(rows)}</tbody></table>"
    )


def _events_list(events: Sequence[Mapping[str, Any]], groups: Mapping[str, Mapping[str, Any]]) -> str:
    if not events:
        return ""
    by_id = {str(group.get("compute_node_group_id")): name for name, group in groups.items()}
    rows = []
    for event in events[:_EVENTS_SHOWN]:
        detail = event.get("detail") or {}
        group_id = str(detail.get("compute_node_group_id", ""))
        rows.append(
            f"<tr><td class='num'>{_e(_number(event.get('minute')))}</td>"
            f"<td>{_e(event.get('detail-type'))}</td><td>{_e(by_id.get(group_id, group_id))}</td>"
            f"<td>{_e(detail.get('reason', ''))}</td></tr>"
        )
    more = len(events) - _EVENTS_SHOWN
    tail = f"<p class='sub'>… and {more} more in the --json document.</p>" if more > 0 else ""
    return (
        f"<details><summary>Lifeguard's events ({len(events)})</summary><table><thead><tr><th>minute</th>"
        f"<th>event</th><th>group</th><th>reason</th></tr></thead><tbody>{''.join(rows)}</tbody></table>"
        f"{tail}</details>"
    )


def _baseline_name(baseline: Mapping[str, Any]) -> str:
    name = str(baseline.get("name"))
    return BASELINE_NAMES.get(name, name)


def _natural(name: str) -> list[tuple[int, int, str]]:
    """`node-2` before `node-10`."""
    return [(0, int(part), "") if part.isdigit() else (1, 0, part) for part in re.split(r"(\d+)", name)]


def _float(value: Any) -> float | None:
    return None if value is None else float(value)


def _number(value: Any) -> str:
    if value is None:
        return "-"
    if isinstance(value, float):
        return f"{value:g}"
    return str(value)


def _e(value: Any) -> str:
    return escape("" if value is None else str(value), quote=True)
