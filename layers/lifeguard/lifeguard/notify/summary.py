"""A controller event as people read it: subject, severity and a short plain-text summary.

The same words go to every channel; each channel shapes them (SNS: subject + text + JSON; Slack: blocks).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from lifeguard.bounds import clip, is_pcs_id, one_line, printable_lines, utc
from lifeguard.event_contract import (
    DRY_RUN_SAID,
    FIX_AND_PUSH,
    NODES_REPLACED,
    console_url,
    deployed_in,
    nodes_console_url,
    risks_found,
    undo_command,
)
from lifeguard.node.layout import LOG_TAIL_BYTES
from lifeguard.pcs_model import left_out_shown
from lifeguard.values import frozen

__all__ = [
    "LOG_TAIL_MAX_CHARS",
    "RISK_LINES_MAX",
    "RISK_LINE_MAX_CHARS",
    "SEVERITY",
    "SUBJECT_MAX_CHARS",
    "Summary",
    "diff_line",
    "risk_lines",
    "subject_line",
    "summarize",
]

SUBJECT_MAX_CHARS = 99  # SNS: under 100
SUBJECT_PREFIX = "[Lifeguard] "
_SCRIPT_SHOWN_LEAST = 8  # a script's name shortened to fewer characters than this is left out of a subject
# A review's risks in a message: enough to act on, and within a Slack section (3,000 characters).
RISK_LINES_MAX = 10
RISK_LINE_MAX_CHARS = 280
LOG_TAIL_MAX_CHARS = LOG_TAIL_BYTES  # what a node report keeps of a run's output
SEVERITY = {
    "BootstrapLoopDetected": "high",
    "RemediationApplied": "medium",
    "RemediationSkipped": "high",
    "RemediationFailed": "critical",
    "LoopContained": "medium",  # not a success: the script still fails on the kept nodes
    "LoopResolved": "info",
    "ConfigChangeReviewed": "low",  # a warning for whoever changed the group, not a page
}
# Each loop kind in a sentence: what the group is in, and what a remediation broke.
_LOOP_WORDS = {
    "loop": ("a bootstrap-failure loop", "loop"),
    "intermittent": ("an intermittent bootstrap-failure loop", "intermittent loop"),
    "replacement": ("a replacement loop", "replacement loop"),
}

_TITLES = {
    "BootstrapLoopDetected": "Bootstrap loop",
    "RemediationApplied": "Remediated",
    "RemediationSkipped": "Not remediated",
    "RemediationFailed": "Remediation FAILED",
    "LoopContained": "Contained, not fixed",
    "LoopResolved": "Resolved",
    "ConfigChangeReviewed": "Risky change",
}


def _severity(detail_type: str, *, late: bool, dry_run: bool) -> str:
    """The event's severity (`SEVERITY`): `info` for one delivered after its loop was over, and `low` for a
    skip that was a dry run (mode notify, or the stack's DryRun): the people who chose it were paged by the
    detection already, and a page a revision for what they chose is noise at 3 a.m. A skip Lifeguard did not
    choose (a cooldown, the daily cap, a refusal) stays `high`: the loop goes on with nobody acting."""
    if late:
        return "info"
    if detail_type == "RemediationSkipped" and dry_run:
        return "low"
    return SEVERITY.get(detail_type, "info")


def subject_line(title: str, group: object, script: object, cluster: object, *, limit: int) -> str:
    """`title: group (script) in cluster` as one ASCII line of at most `limit` characters. The script's name
    is shortened first, then left out: which group of which cluster is what a reader triages by (a subject
    cut at its end lost the cluster to a script name of 30 characters)."""
    head, tail = _ascii_line(f"{title}: {group}"), " in " + _ascii_line(str(cluster))
    line = head + tail
    if script:
        name = _ascii_line(str(script))
        room = limit - len(line) - len(" ()")
        if len(name) > room:
            name = name[: room - 3] + "..." if room >= _SCRIPT_SHOWN_LEAST else ""
        if name:
            line = f"{head} ({name}){tail}"
    return line if len(line) <= limit else line[: limit - 3] + "..."


def _ascii_line(text: str) -> str:
    # SNS subjects: ASCII, no line breaks or control characters.
    cleaned = "".join(c if 32 <= ord(c) < 127 else " " for c in text)
    return " ".join(cleaned.split())


@frozen
class Summary:
    """What a person is told about one event."""

    detail_type: str
    severity: str
    # What the subject names (title, group, script, cluster): the subject, and a heading of another length.
    named: tuple[Any, Any, Any, Any]
    headline: str
    evidence: tuple[str, ...]
    suspect: str | None
    log_tail: str | None
    action: str | None
    diff: tuple[str, ...]
    undo: str | None
    problems: tuple[str, ...] = ()
    # The cluster's page in the PCS console, and the way from it to the group: the console has no address
    # of a group's own that AWS documents (its guide: select the cluster, Compute node groups, the group).
    console: str | None = None
    console_group: str = ""
    # The group's own instances in the EC2 console (its failed nodes, a node a quarantine kept).
    nodes: str | None = None
    evidence_title: str = "Evidence"  # a review's evidence is its risks
    diff_title: str = "Change"  # a dry run's: what it would have changed

    @property
    def subject(self) -> str:
        """The SNS subject, `[Lifeguard] title: group (script) in cluster`, in SUBJECT_MAX_CHARS."""
        return SUBJECT_PREFIX + self.heading(SUBJECT_MAX_CHARS - len(SUBJECT_PREFIX))

    def heading(self, limit: int) -> str:
        """The subject without its prefix, in at most `limit` characters (a Slack header)."""
        return subject_line(*self.named, limit=limit)

    @property
    def console_way(self) -> str:
        """From the cluster's page to the group's."""
        return f"Compute node groups › {self.console_group}"

    def text(self) -> str:
        """The summary as plain text (SNS body, Slack fallback)."""
        lines = [self.headline, ""]
        if self.evidence:
            lines += [f"{self.evidence_title}:", *(f"  {line}" for line in self.evidence)]
        if self.suspect:
            lines.append(f"Failing script: {self.suspect}")
        if self.log_tail:
            # Each line fenced: a tail is what a node wrote (any node can), and none of its lines may pass
            # for one of the message's own (an `Undo:` line of its own).
            lines += ["Log tail:", *(f"  | {line}".rstrip() for line in self.log_tail.splitlines()[-20:])]
        if self.action:
            lines.append(f"Action: {self.action}")
        if self.diff:
            lines += [f"{self.diff_title}:", *(f"  {line}" for line in self.diff)]
        if self.console:
            lines.append(f"Console: {self.console} (then {self.console_way})")
        if self.nodes:
            lines.append(f"Nodes: {self.nodes}")
        if self.undo:
            lines.append(f"Undo: {self.undo}")
        if self.problems:
            lines += ["Not shown (not valid in the event):", *(f"  {line}" for line in self.problems)]
        return "\n".join(lines).rstrip() + "\n"


def summarize(
    detail_type: str, detail: Mapping[str, Any], *, problems: Sequence[str] = (), late: bool = False
) -> Summary:
    """The summary of one controller event (a detail `clean_detail` checked; `problems` are the fields it
    found invalid, named at the end). `late`: an event of the loop going on that arrived after its
    episode's LoopResolved (a retry, a delivery out of order), told as past news: no page for a loop that is
    over; or a LoopResolved that arrived after the episode went on at a later revision: not news of its
    end."""
    group = detail.get("compute_node_group_id") or "?"
    cluster = detail.get("cluster_id") or "?"
    # The group by its name too when the event carries one (what people know it by), by its id always (what
    # the commands take).
    name = detail.get("compute_node_group_name")
    known_as = f"{name} ({group} in {cluster})" if name else f"{group} ({cluster})"
    failures = detail.get("failures") or []
    suspect = detail.get("suspect") or None
    title = _TITLES.get(detail_type, detail_type)
    revision = detail.get("revision") or 1
    if detail_type == "BootstrapLoopDetected" and detail.get("kind") == "replacement":
        title = "Replacement loop"
    if detail_type == "BootstrapLoopDetected" and revision > 1:
        title = f"{title} (update {revision})"  # the same episode, better known or going on
    if detail_type == "RemediationApplied" and detail.get("action"):
        title = f"{title} ({detail['action']})"  # a quarantine, then its undrain: two subjects, not one twice
    reason = detail.get("reason")
    # `dry_run` says nothing was changed, whatever held it back: a dry run only when its reason says so
    # (mode notify or the stack's DryRun, `remediation.rails.dry_run`), not for a skip or a failure.
    held = detail_type.startswith("Remediation") and str(reason or "").startswith(DRY_RUN_SAID)
    if detail_type == "RemediationSkipped" and held:
        # Told apart by its subject from a skip nobody chose (a cooldown, the cap, a refusal: the loop goes
        # on with nobody acting), which people triage by it.
        title = f"Dry run (would {detail['action']})" if detail.get("action") else "Dry run"
    script = f"{suspect.get('stage')} › {suspect.get('script')}" if suspect else None
    if late:
        title = f"{title}, delivered late"
    named = (title, name or group, suspect.get("script") if suspect else None, cluster)
    kind = detail.get("kind") or "loop"
    in_words, broken = _LOOP_WORDS.get(str(kind), _LOOP_WORDS["loop"])
    happened = (
        "came up and were replaced as unhealthy"
        if kind == "replacement"
        else "failed to bootstrap and were terminated"
    )
    where = f"Compute node group {f'{name} ({group})' if name else group} of cluster {cluster}"
    detected = f"{where} is in {in_words}: {len(failures)} node(s) {happened}."
    # The containment's own reason says what to do (an older one may not): said once.
    instruction = (
        ""
        if FIX_AND_PUSH in str(reason or "")
        else f" {FIX_AND_PUSH}" + (", or undo Lifeguard's change." if detail.get("undo") else ".")
    )
    headline = {
        "BootstrapLoopDetected": detected,
        "RemediationApplied": f"Lifeguard changed the lifecycle actions of {known_as} to break the {broken}.",
        "RemediationSkipped": f"Lifeguard did not change {known_as}.",
        "RemediationFailed": f"Lifeguard could not change {known_as}; the loop may be going on.",
        "LoopContained": f"The loop of {known_as} stopped, but its script still fails: "
        f"{_kept_words(detail.get('kept') or [])}.{instruction}",
        # Why it is over (a node booted clean, or the failing script left the configuration) is the reason.
        "LoopResolved": f"The loop of {known_as} is over.",
        "ConfigChangeReviewed": _change_headline(known_as, detail),
    }.get(detail_type, f"{detail_type} for {known_as}.")
    if reason:
        headline = f"{headline} {_sentence(str(reason))}"
    if detail_type == "RemediationApplied" and not detail.get("dry_run"):
        # The nodes that booted before the change go too (in an intermittent loop, some may serve jobs).
        headline = f"{headline} {NODES_REPLACED} with nodes that boot the new configuration."
    if detail_type == "BootstrapLoopDetected" and revision > 1:
        headline = f"Update {revision} of episode {detail.get('episode_id')}: {headline}"
    if late and detail_type == "LoopResolved":
        headline = (
            f"Delivered late: episode {detail.get('episode_id')} went on after this resolution (a later "
            f"message tells it), so the loop is not over. {headline}"
        )
    elif late:
        headline = (
            f"Delivered late: episode {detail.get('episode_id')} was resolved before this message arrived, "
            f"so the loop it tells of is over. {headline}"
        )
    evidence = tuple(
        f"{f.get('instance_id')} ({f.get('scheduler_node_id') or '-'}) "
        f"failed at {utc(f.get('event_timestamp'))}"
        for f in failures[-10:]
    )
    if detail_type == "ConfigChangeReviewed":
        evidence = risk_lines(detail.get("risks") or [])
    if detail_type == "LoopContained":
        evidence += _kept_lines(detail.get("kept") or [])  # where on-call looks: the nodes kept
    if suspect:
        exit_code = suspect.get("exit_code")
        script = (
            f"{script} (onError {suspect.get('on_error')}, exit {exit_code if exit_code is not None else '?'}"
            f", {_reported_on(suspect.get('instances') or [], failures)})"
        )
    action = None
    if detail_type.startswith("Remediation"):
        dry = (
            (" (dry run: nothing changed)" if held else " (nothing changed)") if detail.get("dry_run") else ""
        )
        action = f"{detail.get('action') or 'no action'} in mode {detail.get('mode') or '-'}{dry}"
    diff = tuple(diff_line(change) for change in detail.get("diff") or [])
    log_tail = str(suspect.get("log_tail") or "")[-LOG_TAIL_MAX_CHARS:] if suspect else ""
    undo = _undo_line(detail, cluster, group)
    region = deployed_in()[1]
    # Every value from an event is shown as text: none can forge a line of the message (an "Undo:" line of
    # its own) or reach a terminal or mail reader as an escape sequence.
    return Summary(
        detail_type=detail_type,
        severity=_severity(detail_type, late=late, dry_run=held),
        named=named,
        headline=one_line(headline),
        evidence=tuple(one_line(line) for line in evidence),
        suspect=one_line(script) if script else None,
        log_tail=printable_lines(log_tail) if log_tail else None,
        action=one_line(action) if action else None,
        diff=tuple(one_line(line) for line in diff),
        undo=undo,
        console=console_url(str(cluster), region),
        console_group=one_line(name or group),
        nodes=nodes_console_url(str(group), region),
        problems=tuple(one_line(clip(problem, 300)) for problem in problems[:10]),
        evidence_title="Risks" if detail_type == "ConfigChangeReviewed" else "Evidence",
        diff_title="Would change" if held else "Change",
    )


def _reported_on(instances: Sequence[Any], failures: Sequence[Any]) -> str:
    """On how many nodes the suspect script failed, as their reports say: of the loop's failed nodes when
    they are all among them; else the nodes that reported it (a containment's are the nodes kept, which did
    not fail to bootstrap: "1 of 2 failed nodes" would say it spared one), and how many of them failed."""
    failed = {f.get("instance_id") for f in failures if isinstance(f, Mapping)}
    among = sum(1 for instance in instances if instance in failed)
    if instances and among == len(instances):
        return f"on {among} of {len(failures)} failed node(s)"
    said = f"on {len(instances)} node(s) that reported it"
    return f"{said}, {among} of the {len(failures)} failed node(s)" if among else said


def _kept_words(kept: Sequence[Any]) -> str:
    """How many nodes a containment keeps, and how many of them are drained: a drained node takes no jobs,
    and a group whose kept nodes are all drained serves nothing until the script is fixed."""
    drained = sum(1 for node in kept if isinstance(node, Mapping) and node.get("drained"))
    words = f"{len(kept)} node(s) kept with the failure"
    if drained:
        words += f", {'all' if drained == len(kept) else drained} drained (taking no jobs)"
    return words


# The kept nodes a containment names, the newest: as many as the failures it shows.
KEPT_LINES_MAX = 10


def _kept_lines(kept: Sequence[Any]) -> tuple[str, ...]:
    """Each node a containment keeps (the newest `KEPT_LINES_MAX`), and whether it is drained: the nodes to
    log in to and debug, and whether they take jobs meanwhile."""
    lines = tuple(
        f"{clip(node.get('instance_id'), 40)} kept with the failure, "
        + ("drained (taking no jobs)" if node.get("drained") else "taking jobs")
        for node in kept[-KEPT_LINES_MAX:]
        if isinstance(node, Mapping)
    )
    if len(kept) > KEPT_LINES_MAX:
        lines = (f"… and {len(kept) - KEPT_LINES_MAX} more kept node(s) in the event's `kept`", *lines)
    return lines


def _sentence(text: str) -> str:
    """A reason as a sentence of its own after the headline's: its first word capitalized when it is a
    plain lowercase word (not an id such as `pcs_…` or `lca-static`), a full stop at its end."""
    first = text.split(" ", 1)[0]
    if first.isalpha() and first.islower():
        text = text[0].upper() + text[1:]
    return text if text.endswith((".", "!", "?")) else f"{text}."


def _undo_line(detail: Mapping[str, Any], cluster: object, group: object) -> str | None:
    """The command that undoes the event's change, when it says there is one: made here from the group's
    ids, as this stack's functions make it (`undo_command`: the stack and region, or `--local` in a
    replay), never the event's own text. A command people are told to paste is not taken from the bus (a
    forged or recorded event would have them run another account's undo, or anything at all)."""
    if not (detail.get("undo") and is_pcs_id(cluster) and is_pcs_id(group)):
        return None
    return undo_command(str(cluster), str(group))


def _change_headline(known_as: str, detail: Mapping[str, Any]) -> str:
    """Who changed which group (`known_as`: its name and ids) when, and how many risks the review found."""
    risks = f"with {risks_found(detail)} risk(s)"  # all it found (its reason says how many are listed)
    changed_by = detail.get("changed_by")
    if not isinstance(changed_by, Mapping):
        return f"The lifecycle actions of {known_as} changed, {risks}."
    arn, at = changed_by.get("arn"), changed_by.get("at")
    when = f" at {utc(at)}" if at is not None else ""
    if changed_by.get("source") == "unknown":  # read back after a call that changed something else
        unknown = "(put there by whom is not known)"
        return f"The lifecycle actions of {known_as}, in place{when} {unknown}, {risks}."
    who = clip(arn, 300) if arn else "Someone (CloudTrail named no caller)"
    return f"{who} changed the lifecycle actions of {known_as}{when}, {risks}."


def risk_lines(risks: Sequence[Mapping[str, Any]]) -> tuple[str, ...]:
    """A review's risks as lines (`warning unpinned-mutable-source at stages.nodeBootstrapped[0]...: …`),
    the first `RISK_LINES_MAX` of them, each at most `RISK_LINE_MAX_CHARS`."""
    lines = [
        clip(
            f"{r.get('severity') or 'warning'} {r.get('code')} at {r.get('path')}: {r.get('message')}",
            RISK_LINE_MAX_CHARS,
        )
        for r in risks[:RISK_LINES_MAX]
    ]
    if len(risks) > RISK_LINES_MAX:
        lines.append(f"… and {len(risks) - RISK_LINES_MAX} more in the event's `risks`")
    return tuple(lines)


def diff_line(change: Mapping[str, Any]) -> str:
    """One `diff` entry of an event as a line: `path: old → new` (a script shown by its name; a field left
    out as what PCS does then, `TERMINATE (default)`, as `lifeguard undo` shows it)."""
    field = str(change.get("path")).rpartition(".")[2]

    def show(value: Any) -> str:
        if value is None:
            return left_out_shown(field)
        if isinstance(value, Mapping):
            return str(value.get("name", "{…}"))
        return str(value)

    return f"{change.get('path')}: {show(change.get('old'))} → {show(change.get('new'))}"
