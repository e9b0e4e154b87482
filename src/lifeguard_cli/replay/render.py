"""How a replay reads: one timeline line per record, report, configuration change and controller event,
then the totals."""

from __future__ import annotations

from collections import Counter
from collections.abc import Mapping
from typing import Any

from lifeguard.bounds import clip, clock_time
from lifeguard.notify.summary import diff_line
from lifeguard_cli.replay.inputs import row_time
from lifeguard_cli.replay.result import ReplayResult, TimelineEntry

__all__ = ["STYLES", "config_line", "event_line", "render_timeline", "review_line", "row_entry"]

STYLES = {
    "BootstrapLoopDetected": "bold red",
    "RemediationFailed": "bold red",
    "remediation parked": "bold red",
    "review failed": "red",
    "notification failed": "red",
    "RemediationApplied": "bold yellow",
    "RemediationSkipped": "yellow",
    "LoopResolved": "bold green",
    "ConfigChangeReviewed": "yellow",
    "config changed": "bold",
}


def row_entry(row: Mapping[str, Any]) -> TimelineEntry:
    """The line of a scaling-log record or a node report."""
    group = str(row.get("compute_node_group_id") or "")
    if row.get("kind") == "script_run":
        code = "" if row.get("exit_code") is None else f" exit={row.get('exit_code')}"
        detail = f"{row.get('stage')}/{row.get('script')} on {row.get('instance_id')}"
        return TimelineEntry(row_time(row), group, f"report {row.get('outcome')}{code}", detail)
    raw_details = row.get("details")
    details: Mapping[str, Any] = raw_details if isinstance(raw_details, dict) else {}
    node = row.get("scheduler_node_id") or ""
    what = f"{row.get('status_code')}/{row.get('reason_code')}"
    return TimelineEntry(row_time(row), group, what, f"{details.get('instance_id') or '-'} {node}".strip())


def event_line(detail: Mapping[str, Any], detail_type: str = "") -> str:
    """What a controller event says: a remediation's action and diff, or a detection's evidence and
    suspect; of a recorded event whose detail is not in the contract's shape, that it is not."""
    try:
        return _event_line(detail, detail_type)
    except (TypeError, KeyError, AttributeError, ValueError):
        return "a detail not in the shape Lifeguard's events take (the functions refuse it)"


def _event_line(detail: Mapping[str, Any], detail_type: str) -> str:
    if detail_type == "ConfigChangeReviewed":
        return review_line(detail)
    if detail_type.startswith("Remediation"):
        changes = "; ".join(diff_line(change) for change in detail.get("diff") or [])
        # The event's dry_run says only that nothing changed; its reason says why ("Dry run (…)", a rail).
        text = f"{detail.get('action') or detail.get('mode') or '-'}: {detail.get('reason') or ''}".strip()
        return f"{text} [{changes}]" if changes else text
    parts = [f"{detail.get('kind') or ''} {detail.get('episode_id') or ''}".strip()]
    failures = detail.get("failures") or []
    if failures:
        parts.append(f"{len(failures)} failed: " + ", ".join(f["instance_id"] for f in failures))
    suspect = detail.get("suspect")
    if suspect:
        where = f"{suspect['stage']}/{suspect['script']}"
        exit_code = suspect.get("exit_code")  # none when the script never ran (it could not be fetched)
        how = f"exit {exit_code if exit_code is not None else '?'}, onError {suspect['on_error']}"
        parts.append(f"suspect {where} ({how}, {len(suspect['instances'])} of {len(failures)} instances)")
    elif detail.get("reason"):
        parts.append(str(detail["reason"]))
    else:
        parts.append("suspect unknown (no node report yet)")
    return "; ".join(parts)


def review_line(detail: Mapping[str, Any]) -> str:
    """What a review says: who changed the group, the risks by code, how many changes."""
    changed_by = detail.get("changed_by") or {}
    who = changed_by.get("arn") or "an unnamed caller"
    risks = detail.get("risks") or []
    counted = Counter(str(risk.get("code")) for risk in risks)
    codes = ", ".join(f"{code}×{n}" if n > 1 else code for code, n in sorted(counted.items()))
    found = f"{len(risks)} risk(s): {codes}" if risks else "no risk"
    return f"by {who}; {found}; {len(detail.get('diff') or [])} change(s)"


def config_line(config: Mapping[str, Any]) -> str:
    """A configuration by its fingerprint and scripts."""
    from lifeguard.lifecycle import fingerprint_of

    stages = config.get("stages") or {}
    names = [f"{stage}:{s.get('name')}" for stage in stages for s in stages.get(stage) or []]
    return f"fingerprint {fingerprint_of(config)[:12]} ({', '.join(names) or 'no scripts'})"


# Characters of a timeline cell: an input's value may be of any length, and hold escape sequences a
# terminal would act on (`clip` shows `?` for them).
CELL_MAX = 2_000


def _when(at: int | None) -> str:
    return clock_time(at) if at is not None else "-"


def render_timeline(result: ReplayResult, console: Any) -> None:
    """The timeline as a table, then the totals."""
    from rich.text import Text

    from lifeguard_cli.tables import show
    from lifeguard_cli.tables import table as make_table

    table = make_table("time (UTC)", "group", "what", "detail")
    for entry in result.timeline:
        style = STYLES.get(entry.what, "")
        what, detail = clip(entry.what), clip(entry.detail, CELL_MAX)
        table.add_row(_when(entry.at), clip(entry.group), Text(what, style=style), detail)
    show(console, table)
    kinds: dict[str, int] = {}
    for event in result.events:
        kinds[event["detail-type"]] = kinds.get(event["detail-type"], 0) + 1
    summary = ", ".join(f"{count} {kind}" for kind, count in kinds.items()) or "no controller event"
    replayed = "1 record" if result.records == 1 else f"{result.records} records"
    reasons = result.ignored_reasons
    why = next(iter(reasons)) if len(reasons) == 1 else "; ".join(f"{n}: {r}" for r, n in reasons.items())
    ignored = f", {result.ignored_records} ignored ({why})" if result.ignored_records else ""
    console.print(f"\n{replayed} replayed, {result.skipped_records} skipped{ignored}; {summary}")
    channels: dict[str, int] = {}
    for notification in result.notifications:
        channels[notification["channel"]] = channels.get(notification["channel"], 0) + 1
    sent = ", ".join(f"{count} via {name}" for name, count in channels.items()) or "none"
    console.print(f"notifications: {sent}")
