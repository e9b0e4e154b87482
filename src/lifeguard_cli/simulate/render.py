"""How a simulation reads in a terminal: the timeline (repeats folded), what Lifeguard changed, the Slack
message as it would read, and a table of the outcome, Lifeguard against the baseline."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

from rich.console import Console
from rich.table import Table
from rich.text import Text

from lifeguard.notify.slack import shown_text
from lifeguard.notify.summary import diff_line
from lifeguard_cli.replay.render import STYLES
from lifeguard_cli.simulate.twin import BASELINE_NAMES, MEASURES, acting_modes, measure_shown
from lifeguard_cli.tables import show
from lifeguard_cli.tables import table as make_table

__all__ = ["fold_timeline", "render_simulation", "slack_text", "summary_table"]

_STYLES = {
    **STYLES,
    "LoopContained": "green",
    "TERMINATED/BOOTSTRAP_FAILED": "red",
    "TERMINATED/UNHEALTHY_NODE": "red",
    "ACTIVE/BOOTSTRAP_SUCCESS": "green",
}


def fold_timeline(timeline: Iterable[Mapping[str, Any]]) -> list[dict[str, Any]]:
    """The timeline with runs of the same thing, in the same minute and group, folded into one line: the
    same outcome too, where the detail says one after its subject (`compute-1 i-…: completed`), so that a
    line never stands for a node that did otherwise."""
    folded: list[dict[str, Any]] = []
    for entry in timeline:
        last = folded[-1] if folded else None
        if (
            last is not None
            and all(last[key] == entry[key] for key in ("minute", "group", "what"))
            and _outcome(last["detail"]) == _outcome(entry["detail"])
        ):
            last["count"] += 1
            continue
        folded.append({**entry, "count": 1})
    return folded


def _outcome(detail: object) -> str:
    """What a timeline entry's detail says happened, after its subject (`<node> <instance>: <outcome>`)."""
    return str(detail).partition(": ")[2]


def slack_text(message: Mapping[str, Any]) -> str:
    """A Slack message's blocks as the channel shows them, in plain lines."""
    lines: list[str] = []
    for block in message.get("blocks") or []:
        if not isinstance(block, Mapping):
            continue
        text = block.get("text")
        if isinstance(text, Mapping) and text.get("text"):
            lines.append(str(text["text"]))
        for element in block.get("elements") or []:
            if isinstance(element, Mapping) and element.get("text"):
                lines.append(str(element["text"]))
    shown = "\n".join(lines) or str(message.get("text") or "")
    return shown_text(shown)


def _minute(value: Any) -> str:
    return "never" if value is None else f"{value:g}"


def summary_table(document: Mapping[str, Any]) -> Table:
    """Per group: the outcome with Lifeguard, and with the baseline when there is one."""
    baseline = document.get("baseline")
    mine = f"Lifeguard ({acting_modes(document)})"
    other_name = _baseline_name(baseline["name"]) if baseline else None
    columns = ("group", "measure", mine, *([other_name] if other_name else []))
    table = make_table(*columns, right=(mine, *([other_name] if other_name else [])))
    for name, group in document["groups"].items():
        other = baseline["groups"].get(name, {}) if baseline else {}
        for index, (key, label) in enumerate(MEASURES):
            cells = [name if index == 0 else "", label, measure_shown(key, group)]
            if baseline:
                cells.append(measure_shown(key, other))
            table.add_row(*(Text(cell) for cell in cells))
    return table


def _baseline_name(name: str) -> str:
    return BASELINE_NAMES.get(name, name)


def render_simulation(document: Mapping[str, Any], console: Console, *, timeline: bool = True) -> None:
    """The whole simulation for a person."""
    if timeline:
        table = make_table("min", "group", "what", "detail", right=("min",))
        for entry in fold_timeline(document["timeline"]):
            what = entry["what"]
            shown = f"{what} ×{entry['count']}" if entry["count"] > 1 else what
            more = f" (and {entry['count'] - 1} more)" if entry["count"] > 1 else ""
            style = _STYLES.get(what, "")
            detail = f"{entry['detail']}{more}"
            # What a scenario or an event says is shown as written, never read as markup.
            cells = (_minute(entry["minute"]), entry["group"], shown, detail)
            table.add_row(*(Text(str(cell)) for cell in cells), style=style)
        show(console, table)
        console.print()
    changes = document["changes"]
    console.print("[bold]Configuration changes[/bold]" if changes else "[bold]No configuration change[/bold]")
    for change in changes:
        action = change.get("action") or "change"
        who = f"Lifeguard ({action})" if change["by"] == "lifeguard" else "the scenario"
        console.print(f"  minute {_minute(change['at_minute'])}, {change['group']}, by {who}:", markup=False)
        for entry in change["diff"]:
            console.print(f"    {diff_line(entry)}", markup=False)
    slack = [n for n in document["notifications"] if n["channel"] == "slack"]
    if slack:
        # The message of Lifeguard's last change, as the channel shows it; else the last one sent.
        changed = [n for n in slack if "RemediationApplied" in slack_text(n["message"]).rsplit("\n", 1)[-1]]
        shown = (changed or slack)[-1]
        which = "the message of Lifeguard's last change" if changed else "the last message"
        console.print()
        # Not numbered: the message's own footer numbers it within its episode.
        console.print(f"[bold]Slack: {which} ({len(slack)} sent in all)[/bold]")
        text_shown = slack_text(shown["message"])
        for line in text_shown.splitlines():
            # Wrapped here, not by the console, so each wrapped line keeps the gutter.
            text = console.render_str(line, markup=False)  # :wrench: as the channel shows it
            for part in text.wrap(console, max(console.width - 4, 20)) or [Text()]:
                console.print(Text.assemble("  │ ", part), soft_wrap=True)
        if "lifeguard undo " in text_shown:
            note = Text(
                "(that undo is for the simulation's own local AWS, gone with it: `lifeguard replay --keep` "
                "leaves one up to try undo on)"
            )
            for part in note.wrap(console, max(console.width - 2, 20)):
                console.print(Text.assemble("  ", part), soft_wrap=True)
    invocations = document.get("invocations") or {}
    if invocations.get("failed"):
        console.print(
            f"\nFunction invocations that failed: {invocations['failed']} "
            f"({invocations['retried']} retried, {invocations['parked']} parked)"
        )
    console.print()
    show(console, summary_table(document))
