"""The timeline's line for an event, as `lifeguard replay`, `simulate` and `demo` print it."""

from __future__ import annotations

from lifeguard_cli.replay.render import event_line


def _detection(exit_code: int | None) -> dict[str, object]:
    suspect = {
        "stage": "nodeBootstrapped",
        "script": "setup",
        "on_error": "TERMINATE",
        "exit_code": exit_code,
        "log_tail": "",
        "instances": ["i-0aaaaaaaaaaaaaaa1", "i-0aaaaaaaaaaaaaaa2"],
    }
    failures = [
        {"instance_id": i, "scheduler_node_id": "n1", "event_timestamp": 0} for i in suspect["instances"]
    ]
    return {"kind": "loop", "episode_id": "ep-1", "failures": failures, "suspect": suspect}


def test_a_suspect_that_never_ran_shows_its_exit_as_slack_does() -> None:
    """A script that could not be fetched has no exit code: `exit ?`, as the Slack message says, not
    Python's `None`."""
    line = event_line(_detection(None), "BootstrapLoopDetected")
    assert "suspect nodeBootstrapped/setup (exit ?, onError TERMINATE, 2 of 2 instances)" in line
    assert "None" not in line
    assert "(exit 1, onError TERMINATE" in event_line(_detection(1), "BootstrapLoopDetected")


def test_a_reviews_line_counts_each_kind_of_risk_it_names() -> None:
    """`6 risk(s): optional-script-terminates, unpinned-mutable-source` named two where six were found."""
    from lifeguard_cli.replay.render import review_line

    risks = [{"code": "unpinned-mutable-source"}] * 4 + [{"code": "optional-script-terminates"}] * 2
    detail = {"changed_by": {"arn": "arn:aws:iam::123456789012:user/ops"}, "risks": risks, "diff": [{}]}
    assert review_line(detail) == (
        "by arn:aws:iam::123456789012:user/ops; 6 risk(s): optional-script-terminates×2,"
        " unpinned-mutable-source×4; 1 change(s)"
    )
    assert review_line({"risks": [{"code": "updated-in-place"}]}) == (
        "by an unnamed caller; 1 risk(s): updated-in-place; 0 change(s)"
    )
