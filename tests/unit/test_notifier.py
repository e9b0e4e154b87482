"""Every controller event to every channel (`notify.notifier`): each (event, channel) sent once, a failing
channel never blocking another, the episode's messages numbered, and what is invalid named, not fatal."""

from __future__ import annotations

import hashlib
import heapq
import re
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import pytest

from lifeguard.event_contract import make_detail
from lifeguard.notify import NotificationError, Notifier, SlackChannel
from lifeguard.notify.summary import SEVERITY, Summary
from lifeguard.store.notices import CLAIM_LEASE_SECONDS, NoticeStore
from tests.conftest import applied_event
from tests.unit.fakes import FakeDynamoDB, Interleaved, client_error


class Channel:
    """A channel that keeps what it was sent, and fails its next `failures` sends."""

    def __init__(self, name: str, failures: int = 0) -> None:
        self.name = name
        self.failures = failures
        self.sent: list[tuple[Summary, int | None]] = []

    def send(self, summary: Summary, detail: Mapping[str, Any], *, sequence: int | None = None) -> None:
        if self.failures:
            self.failures -= 1
            raise RuntimeError(f"{self.name} is down")
        self.sent.append((summary, sequence))


class Clock:
    def __init__(self) -> None:
        self.now = 1_792_544_802.0

    def __call__(self) -> float:
        return self.now


def controller(*channels: Channel, table: FakeDynamoDB | None = None) -> tuple[Notifier, list[str]]:
    metrics: list[str] = []
    notices = NoticeStore(table or FakeDynamoDB(), "t", clock=Clock())
    return Notifier(channels, notices, metric=lambda name, _: metrics.append(name)), metrics


def test_an_event_goes_to_every_channel_once_and_the_episodes_messages_are_numbered() -> None:
    sns, slack = Channel("sns"), Channel("slack")
    notify, _ = controller(sns, slack)
    first = notify.handle_event(applied_event("BootstrapLoopDetected"))
    assert (first.sent, first.already_sent) == (["sns", "slack"], [])
    again = notify.handle_event(applied_event("BootstrapLoopDetected"))
    assert (again.sent, again.already_sent) == ([], ["sns", "slack"])
    notify.handle_event(applied_event("RemediationApplied"))
    assert [sequence for _, sequence in sns.sent] == [1, 2]
    assert [sequence for _, sequence in slack.sent] == [1, 2]
    assert sns.sent[1][0].subject.startswith("[Lifeguard] Remediated (quarantine): pcs_abcdef01")


def test_a_new_revision_of_the_same_event_is_a_new_message() -> None:
    sns = Channel("sns")
    notify, _ = controller(sns)
    notify.handle_event(applied_event("BootstrapLoopDetected", revision=1))
    result = notify.handle_event(applied_event("BootstrapLoopDetected", revision=2))
    assert result.sent == ["sns"]
    assert sns.sent[1][0].headline.startswith("Update 2 of episode ep-1")


def test_a_failing_channel_never_blocks_another_and_the_retry_sends_only_what_was_missing(
    caplog: pytest.LogCaptureFixture,
) -> None:
    sns, slack = Channel("sns"), Channel("slack", failures=1)
    notify, metrics = controller(slack, sns)
    with pytest.raises(NotificationError, match=r"not delivered to slack \(slack is down\)"):
        notify.handle_event(applied_event())
    [said] = [r.getMessage() for r in caplog.records if r.levelname == "ERROR"]
    assert said.endswith("(group pcs_abcdef01 of cluster pcs_abc123de45) failed: slack is down")
    assert len(sns.sent) == 1
    assert metrics.count("NotificationFailures") == 1
    retry = notify.handle_event(applied_event())
    assert (retry.sent, retry.already_sent, retry.failed) == (["slack"], ["sns"], {})
    assert len(sns.sent) == 1


@pytest.mark.parametrize(
    "event",
    [
        {"detail-type": "Scheduled Event", "detail": {}},
        {"detail-type": "RemediationApplied", "detail": "not an object"},
        {},
        [],
        "RemediationApplied",
        None,
        7,
    ],
)
def test_what_is_not_a_controller_event_is_counted_and_sent_nowhere(event: Any) -> None:
    sns = Channel("sns")
    notify, metrics = controller(sns)
    result = notify.handle_event(event)
    assert result.sent == []
    assert sns.sent == []
    assert metrics == ["InvalidEvents"]


def test_invalid_fields_are_left_out_and_named_in_the_message() -> None:
    sns = Channel("sns")
    notify, metrics = controller(sns)
    event = applied_event()
    event["detail"] = {**event["detail"], "kind": "storm", "dry_run": "yes"}
    assert notify.handle_event(event).sent == ["sns"]
    summary = sns.sent[0][0]
    assert summary.problems == (
        "kind: Input should be 'loop', 'intermittent' or 'replacement'",
        "dry_run: Input should be a valid boolean",
    )
    assert "bootstrap-failure" not in summary.headline
    assert "NotificationsSent" in metrics
    assert "InvalidDetailFields" in metrics


def test_events_without_an_episode_are_told_apart_by_their_content() -> None:
    sns = Channel("sns")
    notify, _ = controller(sns)
    event = applied_event("RemediationSkipped", episode="not an episode id")
    assert notify.handle_event(event).sent == ["sns"]
    assert notify.handle_event(event).already_sent == ["sns"]
    other = applied_event("RemediationSkipped", episode="also not one")
    assert notify.handle_event(other).sent == ["sns"]
    assert [sequence for _, sequence in sns.sent] == [None, None]


def test_webhook_posts_are_paced_one_interval_apart_across_senders() -> None:
    table, clock = FakeDynamoDB(), Clock()
    first, second = NoticeStore(table, "t", clock=clock), NoticeStore(table, "t", clock=clock)
    assert first.reserve_post("hook", 1.0) == 0.0
    assert second.reserve_post("hook", 1.0) == pytest.approx(1.0)
    assert first.reserve_post("hook", 1.0) == pytest.approx(2.0)
    clock.now += 10
    assert second.reserve_post("hook", 1.0) == 0.0


def test_a_refusal_with_the_ids_of_an_episode_never_takes_the_place_of_its_genuine_skip() -> None:
    """A forged or stale detection is refused as a RemediationSkipped carrying the episode and revision it
    names: the genuine decision on that episode (a dry run, say) is still sent, and each only once."""
    slack = Channel("slack")
    notify, _ = controller(slack)
    refused = applied_event("RemediationSkipped")
    refused["detail"]["reason"] = (
        "Refused: the detection is not of the group's open episode; nothing was changed."
    )
    genuine = applied_event("RemediationSkipped")
    genuine["detail"]["reason"] = "Dry run (mode notify), nothing was changed; quarantine would change: ..."
    assert notify.handle_event(refused).sent == ["slack"]
    assert notify.handle_event(genuine).sent == ["slack"]
    assert notify.handle_event(genuine).already_sent == ["slack"]
    assert [summary.headline.endswith("would change: ...") for summary, _ in slack.sent] == [False, True]


SLACK_URL = "https://hooks.slack.com/services/T0/B0/x"
NOTIFY_TIMEOUT = int(
    re.search(r"NotifyFunction:.*?Timeout: (\d+)", Path("template.yaml").read_text(), re.S)[1]
)


class LambdaTimedOut(BaseException):
    """Lambda ends the invocation: no `except` of the handler's runs after it."""


def test_an_invocation_lambda_stopped_mid_send_leaves_the_message_to_its_retry() -> None:
    table, clock = FakeDynamoDB(), Clock()
    store = NoticeStore(table, "t", clock=clock)
    for _ in range(NOTIFY_TIMEOUT + 10):  # a burst: other invocations took the webhook's next slots
        store.reserve_post(hashlib.sha256(SLACK_URL.encode()).hexdigest(), 1.0)
    start = clock.now

    def sleep(seconds: float) -> None:
        clock.now += seconds
        if clock.now - start > NOTIFY_TIMEOUT:
            raise LambdaTimedOut

    slack = SlackChannel(lambda: SLACK_URL, sleep=sleep, clock=clock, pacer=store)
    with pytest.raises(LambdaTimedOut):
        Notifier([slack], store).handle_event(applied_event())
    clock.now += 60  # Lambda's retry: a new invocation, the same table
    result = Notifier([Channel("slack")], store).handle_event(applied_event())
    assert (result.sent, result.already_sent) == (["slack"], [])


def test_a_message_another_invocation_is_sending_is_retried_not_taken_for_sent() -> None:
    table, clock = FakeDynamoDB(), Clock()
    store = NoticeStore(table, "t", clock=clock)
    assert store.claim(("pcs_abc123de45", "pcs_abcdef01"), "ep-1:RemediationApplied:1", "sns") == "claimed"
    sns = Channel("sns")
    with pytest.raises(NotificationError, match="being sent by another invocation"):
        Notifier([sns], store).handle_event(applied_event())
    assert sns.sent == []
    clock.now += CLAIM_LEASE_SECONDS + 1  # the other invocation was stopped before it sent it
    assert Notifier([sns], store).handle_event(applied_event()).sent == ["sns"]
    assert Notifier([sns], store).handle_event(applied_event()).already_sent == ["sns"]


def test_a_duplicate_delivery_waits_for_the_other_invocations_send_instead_of_failing() -> None:
    """EventBridge delivers at least once: two invocations of one event at once. The one that found the
    message being sent raised, an error of the function that pages whoever watches NotifyErrorsAlarm,
    though nothing went wrong. It looks again every second, up to `wait_for_others_seconds`."""
    table, clock = FakeDynamoDB(), Clock()
    store = NoticeStore(table, "t", clock=clock)
    group, key = ("pcs_abc123de45", "pcs_abcdef01"), "ep-1:RemediationApplied:1"
    assert store.claim(group, key, "sns") == "claimed"  # the other invocation, sending
    waits: list[float] = []

    def sleep(seconds: float) -> None:
        waits.append(seconds)
        clock.now += seconds
        if len(waits) == 3:
            store.sent(group, key, "sns")  # the other one is done

    sns = Channel("sns")
    waiting = Notifier([sns], store, wait_for_others_seconds=20.0, sleep=sleep, clock=clock)
    result = waiting.handle_event(applied_event())
    assert (result.sent, result.already_sent, result.failed, waits) == ([], ["sns"], {}, [1.0, 1.0, 1.0])
    assert sns.sent == []
    # Another that never finishes (its lease still holds): given up after the wait, left to Lambda's retry.
    assert store.claim(group, "ep-1:RemediationApplied:2", "sns") == "claimed"
    waits.clear()
    with pytest.raises(NotificationError, match="being sent by another invocation"):
        waiting.handle_event(applied_event(revision=2))
    assert waits == [1.0] * 20
    assert sns.sent == []


def test_a_claim_that_failed_never_deletes_the_note_that_the_message_went_out() -> None:
    table = FakeDynamoDB()
    store = NoticeStore(table, "t", clock=Clock())
    slack = Channel("slack")
    assert Notifier([slack], store).handle_event(applied_event()).sent == ["slack"]
    # A duplicate delivery: the claim's conditional put finds the pair, and the read that tells "sent" from
    # "sending" is throttled. The claim was never this invocation's: nothing of it is given back.
    table.fail["GetItem"] = [client_error("ProvisionedThroughputExceededException", "GetItem")]
    with pytest.raises(NotificationError):
        Notifier([slack], store).handle_event(applied_event())
    assert Notifier([slack], store).handle_event(applied_event()).already_sent == ["slack"]  # the retry
    assert len(slack.sent) == 1


def test_a_claim_given_back_while_a_duplicate_looks_at_it_is_no_message_sent() -> None:
    # A holds the claim; a duplicate delivery (B) is refused it; A's send fails and A gives it back; then B
    # reads the claim: none. B took that for "sent" and sent nothing (the message out only if A's retries
    # still came).
    table, clock = FakeDynamoDB(), Clock()
    group, key = ("pcs_abc123de45", "pcs_abcdef01"), "ep-1:RemediationApplied:1"
    holder = NoticeStore(table, "t", clock=clock)
    assert holder.claim(group, key, "slack") == "claimed"
    given_back = Interleaved(table, "get_item", lambda: holder.unclaim(group, key, "slack"))
    duplicate = NoticeStore(given_back, "t", clock=clock)  # type: ignore[arg-type]
    assert duplicate.claim(group, key, "slack") == "claimed"
    assert given_back.ran
    assert holder.claim(group, key, "slack") == "sending"  # B's claim holds now
    duplicate.sent(group, key, "slack")
    assert holder.claim(group, key, "slack") == "sent"


def test_a_claim_whose_answer_was_lost_is_this_invocations_own() -> None:
    """The claim's PutItem was written, its answer lost, and botocore sent it again: it failed its own
    condition and was taken for another invocation's ("sending"), through Lambda's retries too (inside the
    lease): the event was parked unsent."""
    table, clock = FakeDynamoDB(), Clock()
    put, lost = table.put_item, []

    def put_item(**request: Any) -> Any:
        if "sending_until" in request["Item"] and not lost:
            lost.append(True)
            put(**request)  # written; the answer never comes, and the same request is sent again
            clock.now += 1.0
        return put(**request)

    table.put_item = put_item  # type: ignore[method-assign]
    sns = Channel("sns")
    result = Notifier([sns], NoticeStore(table, "t", clock=clock)).handle_event(applied_event())
    assert lost
    assert result.sent == ["sns"]
    assert len(sns.sent) == 1
    assert (
        NoticeStore(table, "t", clock=clock).claim(
            ("pcs_abc123de45", "pcs_abcdef01"), "ep-1:RemediationApplied:1", "sns"
        )
        == "sent"
    )


def test_a_burst_reaches_slack_at_its_pace_with_no_slot_left_unused_and_nothing_parked(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """300 events at once (a shared script looping sixty groups: each detected, attributed, remediated,
    reviewed): every invocation takes the webhook's next slot only if it can wait for it in the time it
    has, else fails at once and Lambda retries it a minute later; Lambda stops one past its Timeout, and
    gives up (parks the event) after its two retries."""

    from lifeguard.notify import SlackError
    from lifeguard.notify.summary import summarize

    monkeypatch.setattr("lifeguard.notify.slack._post", lambda *_: (200, b"ok"))  # Slack took it
    clock = Clock()
    store = NoticeStore(FakeDynamoDB(), "t", clock=clock)
    event = applied_event()
    summary = summarize(event["detail-type"], event["detail"])
    queue = [(clock.now, n, 0) for n in range(300)]
    heapq.heapify(queue)
    sent, parked, posted_at = 0, 0, []
    while queue:
        at, n, attempt = heapq.heappop(queue)
        clock.now = at
        waited = [0.0]

        def sleep(seconds: float, waited: list[float] = waited) -> None:
            waited[0] += seconds
            if waited[0] > NOTIFY_TIMEOUT:
                raise LambdaTimedOut

        slack = SlackChannel(
            lambda: SLACK_URL,
            sleep=sleep,
            pacer=store,
            time_left=lambda waited=waited: NOTIFY_TIMEOUT - waited[0],
        )
        try:
            slack.send(summary, event["detail"])
            sent += 1
            posted_at.append(at + waited[0])
        except (SlackError, LambdaTimedOut) as exc:
            ended = at + (NOTIFY_TIMEOUT if isinstance(exc, LambdaTimedOut) else 0)
            if attempt < 2:  # MaximumRetryAttempts: 2, a minute and then two after the failure
                heapq.heappush(queue, (ended + 60 * (attempt + 1), n, attempt + 1))
            else:
                parked += 1
    assert (sent, parked) == (300, 0)
    assert max(posted_at) - min(posted_at) < 300  # one a second: no slot taken and left unused


def test_a_claims_lease_outlasts_the_notify_function() -> None:
    assert NOTIFY_TIMEOUT < CLAIM_LEASE_SECONDS < NOTIFY_TIMEOUT + 60  # the first retry comes a minute after


def _review_sent(**fields: Any) -> tuple[list[str], list[str]]:
    """A ConfigChangeReviewed of alice's change with `fields` (the detail's, set as given, after it is made)
    through the notifier: the channels it went to, and the metrics counted."""
    detail = make_detail(
        cluster_id="pcs_abc123de45",
        compute_node_group_id="pcs_abcdef01",
        changed_by={
            "arn": "arn:aws:iam::111111111111:user/alice",
            "at": 1792545162000,
            "source": "cloudtrail",
        },
    )
    detail.update(fields)
    sns, metrics = Channel("sns"), []
    result = Notifier([sns], metric=lambda name, _: metrics.append(name)).handle_event(
        {"detail-type": "ConfigChangeReviewed", "detail": detail}
    )
    return result.sent, metrics


def test_a_risky_change_with_one_invalid_risk_is_still_sent_and_the_invalid_one_named() -> None:
    good = {
        "code": "unpinned-mutable-source",
        "path": "stages.nodeBootstrapped[0].scriptSource",
        "message": "s3://bkt/tune.sh is not pinned by a checksum",
        "severity": "warning",
    }
    sent, metrics = _review_sent(risks=[good, {**good, "code": "x" * 65}])
    assert "NotificationsNotNeeded" not in metrics
    assert sent == ["sns"]


def test_a_review_whose_only_risk_is_not_an_object_is_still_sent() -> None:
    """A risk that is not valid is still a risk: a review holding nothing else is not "not needed"."""
    sent, metrics = _review_sent(risks=["s3://bkt/tune.sh is not pinned by a checksum"])
    assert "NotificationsNotNeeded" not in metrics
    assert sent == ["sns"]


def test_an_episodes_numbers_have_no_gap_when_another_channel_is_retried() -> None:
    sns, slack = Channel("sns", failures=1), Channel("slack")
    notify, _ = controller(sns, slack)
    with pytest.raises(NotificationError):
        notify.handle_event(applied_event("BootstrapLoopDetected"))  # SNS down: Slack has "message 1"
    notify.handle_event(applied_event("BootstrapLoopDetected"))  # Lambda's retry: SNS only
    notify.handle_event(applied_event("RemediationApplied"))  # the episode's second message
    assert [sequence for _, sequence in slack.sent] == [1, 2]
    assert [sequence for _, sequence in sns.sent] == [1, 2]


class Keeping(Channel):
    """A channel that keeps the detail it was given too."""

    def __init__(self, name: str) -> None:
        super().__init__(name)
        self.details: list[Mapping[str, Any]] = []

    def send(self, summary: Summary, detail: Mapping[str, Any], *, sequence: int | None = None) -> None:
        super().send(summary, detail, sequence=sequence)
        self.details.append(detail)


def test_a_presigned_script_locations_credentials_reach_no_message() -> None:
    """PCS takes https script locations, presigned ones too: their query string (X-Amz-Signature, a
    token) went whole into the diff line, the SNS JSON and Slack. Shown as `?…`, and no user info."""
    from lifeguard.notify.slack import slack_message
    from lifeguard.notify.sns import sns_message

    location = (
        "https://alice:pw@scripts.example.com/fail.sh?X-Amz-Credential=AKIAEXAMPLE&X-Amz-Signature=SECRET"
    )
    event = applied_event("RemediationApplied")
    script = {"name": "fail", "scriptSource": {"scriptLocation": location}}
    event["detail"]["config_after"] = {"stages": {"nodeBootstrapped": [script]}}
    event["detail"]["diff"] = [
        {
            "path": "stages.nodeBootstrapped[0].scriptSource.scriptLocation",
            "old": "s3://b/x.sh",
            "new": location,
        }
    ]
    event["detail"]["reason"] = f"changed to {location}"
    keeping = Keeping("sns")
    notify, _ = controller(keeping)
    notify.handle_event(event)
    [(summary, _)] = keeping.sent
    [detail] = keeping.details
    shown = [summary.text(), sns_message(summary, detail), str(slack_message(summary, detail, sequence=1))]
    for text in shown:
        assert "SECRET" not in text
        assert "AKIAEXAMPLE" not in text
        assert "alice" not in text
    assert "https://scripts.example.com/fail.sh?…" in summary.text()


def test_slack_holds_are_merged_and_kept_by_a_slot_taken_before_them(monkeypatch: pytest.MonkeyPatch) -> None:
    """A 429's hold was added to the queue (`next_at + Retry-After`): 21 senders told "Retry-After: 30" put
    the next slot 651 s out, past Lambda's retries, and the burst was parked. And a sender whose slot was
    taken before another's 429 posted inside the time Slack asked for."""
    import lifeguard.notify.slack

    table, clock = FakeDynamoDB(), Clock()
    store = NoticeStore(table, "t", clock=clock)
    store.hold_post("hook", 30.0)
    clock.now += 1
    store.hold_post("hook", 30.0)  # another sender's 429 a second later: held to 31 s, not 61
    assert store.held_for("hook") == pytest.approx(30.0)
    assert store.reserve_post("hook", 1.0) == pytest.approx(30.0)

    webhook = hashlib.sha256(SLACK_URL.encode()).hexdigest()
    store.reserve_post(webhook, 1.0)  # another sender's slot: this one's comes a second later
    posted: list[float] = []
    held: list[float] = []

    def post(url: str, body: bytes, seconds: float) -> tuple[int, bytes]:
        posted.append(clock.now)
        return 200, b"ok"

    def sleep(seconds: float) -> None:
        clock.now += seconds
        if not held:  # while it waits for its slot, Slack answers another sender 429, Retry-After: 10
            store.hold_post(webhook, 10.0)
            held.append(clock.now + 10.0)

    monkeypatch.setattr(lifeguard.notify.slack, "_post", post)
    slack = SlackChannel(lambda: SLACK_URL, sleep=sleep, clock=clock, pacer=store)
    Notifier([slack], store).handle_event(applied_event())
    assert posted == [pytest.approx(held[0])]


def test_an_episode_is_noted_resolved_at_its_highest_revision_and_a_failed_note_holds_nothing_up() -> None:
    """Resolutions of one episode arriving out of order keep the highest revision (a detection of a
    reopened episode is of a higher one); the table failing to say makes no message late, and sends it."""
    table = FakeDynamoDB()
    store = NoticeStore(table, "t", clock=Clock())
    group = ("pcs_abc123de45", "pcs_abcdef01")
    assert store.resolved_revision(group, "ep-1") is None
    store.note_resolved(group, "ep-1", 3)
    store.note_resolved(group, "ep-1", 2)
    assert store.resolved_revision(group, "ep-1") == 3
    assert store.resolved_revision(group, "ep-2") is None
    table.fail["GetItem"] = [client_error("InternalServerError", "GetItem")]
    sns = Channel("sns")
    Notifier([sns], store).handle_event(applied_event("BootstrapLoopDetected", revision=3))
    [(summary, _)] = sns.sent
    assert summary.severity == "high"
    assert not summary.headline.startswith("Delivered late")


def test_a_containment_that_comes_after_its_resolution_is_past_news() -> None:
    """A containment whose first send failed comes again a minute or three later, by when the loop may be
    resolved: told as delivered late, without a page; a reopened episode's (a higher revision) is not."""
    store = NoticeStore(FakeDynamoDB(), "t", clock=Clock())
    sns = Channel("sns")
    notifier = Notifier([sns], store)
    notifier.handle_event(applied_event("LoopResolved", revision=2))
    notifier.handle_event(applied_event("LoopContained", revision=2))
    notifier.handle_event(applied_event("LoopContained", revision=3))
    [_, (late, _), (reopened, _)] = sns.sent
    assert (late.severity, reopened.severity) == ("info", SEVERITY["LoopContained"])
    assert late.headline.startswith("Delivered late: episode ep-1 was resolved")
    assert "delivered late" in late.subject
    assert "elivered late" not in reopened.headline + reopened.subject


@pytest.mark.parametrize("going_on", ["BootstrapLoopDetected", "LoopContained"])
def test_a_resolution_that_comes_after_its_episode_went_on_is_past_news(going_on: str) -> None:
    """The episode reopened (a nodeReady failure after the ACTIVE that ended it, or that node's late
    reports) and told so at revision 2; its revision-1 LoopResolved comes after (a retry, another order):
    said as late, not as the episode's newest word ("the loop is over" while it loops)."""
    store = NoticeStore(FakeDynamoDB(), "t", clock=Clock())
    sns = Channel("sns")
    notifier = Notifier([sns], store)
    notifier.handle_event(applied_event("BootstrapLoopDetected", revision=1))
    notifier.handle_event(applied_event(going_on, revision=2))
    notifier.handle_event(applied_event("LoopResolved", revision=1))
    notifier.handle_event(applied_event("LoopResolved", revision=2))  # the reopened episode's own end
    [_, (told, _), (stale, _), (resolved, _)] = sns.sent
    assert "elivered late" not in told.headline + told.subject
    assert stale.headline.startswith("Delivered late: episode ep-1 went on after this resolution")
    assert "delivered late" in stale.subject
    assert "elivered late" not in resolved.headline + resolved.subject
    assert store.going_on_revision(("pcs_abc123de45", "pcs_abcdef01"), "ep-1") == 2


@pytest.mark.parametrize("detail_type", ["RemediationApplied", "RemediationFailed", "RemediationSkipped"])
def test_a_remediations_outcome_after_a_resolution_is_told_as_it_is(detail_type: str) -> None:
    """What Lifeguard did, or could not do, is news when it is told: a reopened episode's remediation may
    carry the revision it was decided on, at or below the resolution's, and its group now holds
    Lifeguard's change (or not, and the loop goes on). Told in full, paged as ever."""
    store = NoticeStore(FakeDynamoDB(), "t", clock=Clock())
    sns = Channel("sns")
    notifier = Notifier([sns], store)
    notifier.handle_event(applied_event("LoopResolved", revision=2))
    notifier.handle_event(applied_event("BootstrapLoopDetected", revision=3))  # reopened
    notifier.handle_event(applied_event(detail_type, revision=2))
    (told, _) = sns.sent[-1]
    assert told.severity == SEVERITY[detail_type]
    assert "elivered late" not in told.headline + told.subject


def test_an_event_of_no_valid_revision_takes_no_numbered_ones_place() -> None:
    """An invalid revision is read as none: its message was the one of revision 1, and the genuine revision
    1 was then "already sent"."""
    store = NoticeStore(FakeDynamoDB(), "t", clock=Clock())
    sns = Channel("sns")
    junk = applied_event("RemediationFailed")
    junk["detail"]["revision"] = 10**9
    assert Notifier([sns], store).handle_event(junk).sent == ["sns"]
    assert Notifier([sns], store).handle_event(applied_event("RemediationFailed")).sent == ["sns"]


def test_a_claim_that_could_not_be_given_back_holds_off_no_retry_past_its_invocation() -> None:
    """A send failed, and so did the DeleteItem that gives its claim back: the claim held for 650 s, so
    Lambda's two retries (a minute and three later) each found it "being sent by another invocation" and the
    event was parked without another try. A claim holds until its invocation ends, and 15 s more."""
    table, clock = FakeDynamoDB(), Clock()
    store = NoticeStore(table, "t", clock=clock)
    sns = Channel("sns", failures=1)
    left = {"seconds": 40.0}  # what the invocation has left when it claims
    notifier = Notifier([sns], store, sleep=lambda _: None, clock=clock, time_left=lambda: left["seconds"])
    table.fail["DeleteItem"] = [client_error("ThrottlingException", "DeleteItem")]
    with pytest.raises(NotificationError, match="sns is down"):
        notifier.handle_event(applied_event())
    [claim] = [item for item in table.items.values() if "sending_until" in item]
    assert float(claim["sending_until"]["N"]) == clock.now + 40.0 + 15.0
    clock.now += 60.0  # Lambda's first retry
    assert notifier.handle_event(applied_event()).sent == ["sns"]
    assert len(sns.sent) == 1
    # A lease never passes CLAIM_LEASE_SECONDS, whatever the invocation says it has left.
    left["seconds"] = 10_000.0
    sns.failures = 1
    table.fail["DeleteItem"] = [client_error("ThrottlingException", "DeleteItem")]
    with pytest.raises(NotificationError):
        notifier.handle_event(applied_event(revision=2))
    longest = max(
        float(item["sending_until"]["N"]) for item in table.items.values() if "sending_until" in item
    )
    assert longest == clock.now + CLAIM_LEASE_SECONDS
