"""A configuration change's review in the notifications (`notify.notifier`, `notify.summary`): sent only when
it found risks the change brought, as a warning, naming who changed which group when and the risks, within
bounds."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from lifeguard.event_contract import RISKS_LISTED_MAX, make_detail, risks_found_sentence
from lifeguard.notify import Notifier
from lifeguard.notify.slack import slack_message
from lifeguard.notify.sns import sns_message
from lifeguard.notify.summary import RISK_LINE_MAX_CHARS, RISK_LINES_MAX, Summary, summarize
from lifeguard.store.notices import NoticeStore
from tests.unit.fakes import FakeDynamoDB

ARN = "arn:aws:sts::123456789012:assumed-role/ClusterAdmin/alice"
RISK = {
    "code": "unpinned-mutable-source",
    "path": "stages.nodeBootstrapped[0].scriptSource",
    "message": "'verify-mounts' runs an S3 object without s3VersionId with no checksum",
    "severity": "warning",
}


class Channel:
    def __init__(self, name: str) -> None:
        self.name = name
        self.sent: list[tuple[Summary, Mapping[str, Any]]] = []

    def send(self, summary: Summary, detail: Mapping[str, Any], *, sequence: int | None = None) -> None:
        self.sent.append((summary, detail))


def review(risks: list[dict[str, Any]]) -> dict[str, Any]:
    detail = make_detail(
        cluster_id="pcs_abc123de45",
        compute_node_group_id="pcs_abcdef01",
        changed_by={"arn": ARN, "at": 1792544400000, "source": "cloudtrail"},
        diff=[{"path": "stages.nodeBootstrapped[0]", "old": None, "new": {"name": "verify-mounts"}}],
        risks=risks,
    )
    return {"detail-type": "ConfigChangeReviewed", "source": "lifeguard", "detail": detail}


def notifier(*channels: Channel) -> tuple[Notifier, list[str]]:
    metrics: list[str] = []
    notices = NoticeStore(FakeDynamoDB(), "t", clock=lambda: 1792544460.0)
    return Notifier(channels, notices, metric=lambda name, _: metrics.append(name)), metrics


def test_a_change_without_risks_is_news_to_nobody() -> None:
    sns = Channel("sns")
    notify, metrics = notifier(sns)
    result = notify.handle_event(review([]))
    assert (result.sent, sns.sent) == ([], [])
    assert metrics == ["NotificationsNotNeeded"]


def test_a_change_whose_risks_were_all_there_before_is_news_to_nobody() -> None:
    sns = Channel("sns")
    notify, metrics = notifier(sns)
    before = {**RISK, "severity": "info"}  # the configuration it replaced had it
    assert (notify.handle_event(review([before, before])).sent, sns.sent) == ([], [])
    assert metrics == ["NotificationsNotNeeded"]
    # One risk the change brought, and the message tells both.
    assert notify.handle_event(review([RISK, before])).sent == ["sns"]
    text = sns.sent[0][0].text()
    assert "warning unpinned-mutable-source" in text
    assert "info unpinned-mutable-source" in text


def test_a_risky_change_is_sent_as_a_warning_naming_who_which_group_when_and_the_risks() -> None:
    sns, slack = Channel("sns"), Channel("slack")
    notify, _ = notifier(sns, slack)
    assert notify.handle_event(review([RISK])).sent == ["sns", "slack"]
    summary, detail = sns.sent[0]
    assert summary.severity == "low"
    assert summary.subject == "[Lifeguard] Risky change: pcs_abcdef01 in pcs_abc123de45"
    text = summary.text()
    assert (
        f"{ARN} changed the lifecycle actions of pcs_abcdef01 (pcs_abc123de45) at 2026-10-21 01:00:00 UTC"
        in text
    )
    assert (
        "Risks:\n  warning unpinned-mutable-source at stages.nodeBootstrapped[0].scriptSource: "
        "'verify-mounts'" in text
    )
    assert "stages.nodeBootstrapped[0]: (unset) → verify-mounts" in text
    assert "Risks:" in sns_message(summary, detail)
    blocks = slack_message(summary, detail)["blocks"]
    assert any("unpinned-mutable-source" in block.get("text", {}).get("text", "") for block in blocks)
    titled = [block["text"]["text"] for block in blocks if "unpinned-mutable-source" in str(block)]
    assert titled[0].startswith("*Risks*\n")  # as the SNS text says: a review's evidence is its risks


def test_the_risks_told_are_bounded_in_number_and_length() -> None:
    long = {**RISK, "message": "x" * 5000}
    summary = summarize("ConfigChangeReviewed", review([long] * (RISK_LINES_MAX + 5))["detail"])
    assert len(summary.evidence) == RISK_LINES_MAX + 1
    assert all(len(line) <= RISK_LINE_MAX_CHARS for line in summary.evidence)
    assert summary.evidence[-1].startswith("… and 5 more")
    assert len(summary.text()) < 5000


def test_a_review_that_found_more_risks_than_its_event_lists_counts_them_all() -> None:
    """120 risks, the event's first 100: the headline said "with 100 risk(s)", the reason "120"."""
    event = review([RISK] * RISKS_LISTED_MAX)
    event["detail"]["reason"] = risks_found_sentence(120)
    summary = summarize("ConfigChangeReviewed", event["detail"])
    assert (
        ", with 120 risk(s). The review found 120 risks; the event lists the first 100." in summary.headline
    )
    event["detail"]["reason"] = None  # a reason that does not say: what the event lists
    assert summarize("ConfigChangeReviewed", event["detail"]).headline.endswith(", with 100 risk(s).")


def test_a_change_whose_caller_is_unnamed_says_so() -> None:
    event = review([RISK])
    event["detail"]["changed_by"] = {"arn": None, "at": None, "source": "cloudtrail"}
    summary = summarize("ConfigChangeReviewed", event["detail"])
    assert summary.headline.startswith("Someone (CloudTrail named no caller) changed the lifecycle actions")


def test_a_configuration_read_back_after_a_call_that_changed_something_else_names_no_one_as_its_author() -> (
    None
):
    """A scaling update carries no lifecycle actions: the review of what PCS holds after it said its caller
    "changed the lifecycle actions"."""
    event = review([RISK])
    event["detail"]["changed_by"] = {"arn": None, "at": 1792544400000, "source": "unknown"}
    summary = summarize("ConfigChangeReviewed", event["detail"])
    assert summary.headline == (
        "The lifecycle actions of pcs_abcdef01 (pcs_abc123de45), in place at 2026-10-21 01:00:00 UTC (put "
        "there by whom is not known), with 1 risk(s)."
    )
    assert "changed the lifecycle actions" not in summary.text()


def test_a_review_of_a_call_delivered_twice_is_one_message_though_the_table_learned_more_in_between() -> None:
    """EventBridge delivers at least once: the second review of the same CloudTrail record may say more
    (the detection read the group in between: another reason, another diff), and is the same change."""
    first = review([RISK])
    again = review([RISK])
    again["detail"]["reason"] = "Compared with the configuration last proven good."
    again["detail"]["diff"] = []
    other_call = review([RISK])
    other_call["detail"]["changed_by"] = {**first["detail"]["changed_by"], "at": 1792544460000}
    slack = Channel("slack")
    notify, _ = notifier(slack)
    assert notify.handle_event(first).sent == ["slack"]
    assert notify.handle_event(again).already_sent == ["slack"]
    assert notify.handle_event(other_call).sent == ["slack"]  # a later call by the same caller is news
    assert len(slack.sent) == 2


def test_two_calls_of_one_caller_in_the_same_second_with_other_configurations_are_two_messages() -> None:
    # CloudTrail's times are to the second: an apply that corrects itself at once makes two calls the caller
    # and the time cannot tell apart. The configuration each put in place does.
    first, second = review([RISK]), review([RISK])
    first["detail"]["config_fingerprint"] = "a" * 64
    second["detail"]["config_fingerprint"] = "b" * 64
    slack = Channel("slack")
    notify, _ = notifier(slack)
    assert notify.handle_event(first).sent == ["slack"]
    assert notify.handle_event(second).sent == ["slack"]
    assert len(slack.sent) == 2


def test_one_risk_of_another_shape_leaves_the_others_told() -> None:
    """The whole list was refused for one bad risk: the message said "with 0 risk(s)" and showed none."""
    from lifeguard.event_contract import clean_detail

    good = {"code": "optional-script-terminates", "path": "stages.nodeReady[0].onError", "message": "m"}
    detail, problems = clean_detail(review([good, {"code": 7}, good])["detail"])
    assert detail["risks"] == [{**good, "severity": "warning"}] * 2
    assert [problem.split(":")[0] for problem in problems] == ["risks[1]"]
    headline = summarize("ConfigChangeReviewed", detail, problems=problems).headline
    assert "with 2 risk(s)" in headline
