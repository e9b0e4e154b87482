"""The bounds every value from outside is held to (`lifeguard.bounds`), and what keeps events within
EventBridge's size."""

from __future__ import annotations

import json
import sys
import unicodedata
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from lifeguard.aws.eventbridge import EventPublisher
from lifeguard.bounds import (
    _URL_SECRETS,
    CLUSTER_ID,
    FUTURE_SKEW_MS,
    GROUP_ID,
    INSTANCE_ID,
    PAST_MS,
    SCRIPT_NAME,
    _secrets_out,
    clip,
    implausible_time,
    is_pcs_id,
    one_line,
    pcs_pattern,
    printable_lines,
    redacted,
    utc,
)
from lifeguard.event_contract import ENTRY_MAX_BYTES, ControllerEvent, clean_detail, entry_size, make_detail
from lifeguard.pcs_model import shape
from lifeguard.schema import BAD, Check
from tests.unit.fakes import FakeEventBridge


def _takes(check: Check, value: str) -> bool:
    return check(value, (), []) is not BAD


NOW = 1_792_544_802_000


@pytest.mark.parametrize(
    ("at", "says"),
    [
        (NOW, None),
        (NOW + FUTURE_SKEW_MS, None),
        (NOW + FUTURE_SKEW_MS + 1, "ahead of the clock"),
        (NOW + 365 * 24 * 3600 * 1000, "ahead of the clock"),
        (NOW - PAST_MS, None),
        (NOW - PAST_MS - 1, "older than 14 days"),
    ],
)
def test_a_time_is_plausible_from_14_days_behind_to_5_minutes_ahead_of_the_clock(
    at: int, says: str | None
) -> None:
    assert implausible_time(at, NOW) == says


def test_ids_follow_pcss_own_patterns_matched_whole() -> None:
    assert pcs_pattern("ClusterIdentifier") == f"^(?:{shape('ClusterIdentifier')['pattern']})$"
    for good in ("pcs_abc123de45", "lca-cluster"):
        assert CLUSTER_ID(good, (), []) == good
    # botocore's patterns are searched; held whole, a valid id inside junk is junk.
    for bad in ("xx pcs_abc123de45", "pcs_abc_def", "pcs_" + "a" * 61, "ab", "pcs_abc\n"):
        assert not _takes(CLUSTER_ID, bad)
    assert not _takes(GROUP_ID, "pcs_a#b")


def test_is_pcs_id_holds_ids_to_their_length_as_the_check_does() -> None:
    """The id taken from a listing, CloudTrail or an undo line goes into a table's key only when it is one:
    at most 64 characters, as PCS_ID's check."""
    assert is_pcs_id("pcs_" + "a" * 60)
    assert not is_pcs_id("pcs_" + "a" * 61)
    assert not is_pcs_id(None)


@pytest.mark.parametrize("bad", ["i-", "i-" + "0" * 33, "i-0#1", "x-0123", "i-0123 "])
def test_instance_ids_hold_no_separator_and_stay_short(bad: str) -> None:
    assert not _takes(INSTANCE_ID, bad)


def test_script_names_are_pcss() -> None:
    assert SCRIPT_NAME("fail terminate_1-x", (), []) == "fail terminate_1-x"
    for bad in ("", "-x", "a/b", "a" * 65):
        assert not _takes(SCRIPT_NAME, bad)


@pytest.mark.parametrize("value", [10**17, -1, "now", None, True, 1.5e300])
def test_a_time_that_is_no_date_reads_as_a_question_mark(value: Any) -> None:
    assert utc(value) == "?"


def test_utc_reads_a_time() -> None:
    assert utc(NOW) == "2026-10-21 01:06:42 UTC"


@pytest.mark.parametrize(
    ("field", "value", "says"),
    [
        ("revision", "2", "revision: Input should be a valid integer"),
        ("failures", 3, "failures: Input should be a valid list"),
        ("suspect", "fail-terminate", "suspect: Input should be a valid dictionary"),
        ("episode_id", "ep-" + "a" * 2000, "episode_id: String should match pattern"),
        ("config_fingerprint", "abc", "config_fingerprint: String should match pattern"),
        ("dry_run", "true", "dry_run: Input should be a valid boolean"),
    ],
)
def test_a_detail_is_held_to_designs_contract_key_by_key(field: str, value: Any, says: str) -> None:
    detail = make_detail(episode_id="ep-1", cluster_id="pcs_abc123de45", compute_node_group_id="pcs_abcdef01")
    cleaned, problems = clean_detail({**detail, field: value, "unknown": "dropped"})
    (problem,) = problems
    assert problem.startswith(says)
    assert cleaned.get(field) in (None, [], False)
    assert cleaned["cluster_id"] == "pcs_abc123de45"
    assert "unknown" not in cleaned


def _big_config(scripts: int = 20) -> dict[str, Any]:
    script = {
        "name": "s",
        "scriptSource": {"scriptLocation": "s3://bucket-name/key"},
        "arguments": ["a" * 256] * 20,
    }
    stage = [{**script, "name": f"s{i}"} for i in range(scripts)]
    return {"stages": {"nodeBootstrapped": stage, "nodeReady": stage}}


def test_an_event_too_big_for_eventbridge_loses_its_log_tail_then_its_configurations() -> None:
    detail = make_detail(
        episode_id="ep-1",
        config_before=_big_config(),
        config_after=_big_config(),
        suspect={"stage": "nodeReady", "script": "s1", "log_tail": "t" * 4096},
        failures=[{"instance_id": f"i-{n}", "event_timestamp": n} for n in range(100)],
    )
    event = ControllerEvent("RemediationApplied", detail, "ep-1:RemediationApplied:1")
    assert len(json.dumps(detail)) > ENTRY_MAX_BYTES
    entry = event.to_entry("bus")
    assert entry_size(entry) <= ENTRY_MAX_BYTES
    sent = json.loads(entry["Detail"])
    assert sent["suspect"]["log_tail"].startswith("(trimmed")
    # Left out, a configuration is null (the contract's object or null), and the reason says so.
    assert sent["config_before"] is None
    assert sent["reason"].startswith("config_before left out to fit EventBridge's 256 KB")
    assert sent["config_after"] == detail["config_after"]  # trimmed no further than needed
    assert len(sent["failures"]) == 100


def test_putevents_requests_stay_under_256_kb_and_10_entries() -> None:
    events = [
        ControllerEvent(
            "RemediationApplied", make_detail(episode_id=f"ep-{i}", config_before=_big_config(4)), f"k{i}"
        )
        for i in range(8)
    ]
    client = FakeEventBridge()
    EventPublisher(client, "bus").publish(events)
    assert [json.loads(e["Detail"])["episode_id"] for r in client.requests for e in r] == [
        f"ep-{i}" for i in range(8)
    ]
    for request in client.requests:
        assert len(request) <= 10
        assert sum(entry_size(entry) for entry in request) <= ENTRY_MAX_BYTES
    assert len(client.requests) == 2  # 8 entries of 40 KB: cut by size, not by count


def test_times_for_people_and_for_programs_have_one_writer_each() -> None:
    from datetime import UTC, datetime, timedelta, timezone

    from lifeguard.bounds import clock_time, event_time, utc

    moment = datetime(2026, 10, 21, 1, 12, 42, tzinfo=UTC)
    assert event_time(moment) == "2026-10-21T01:12:42Z"
    assert event_time(moment.astimezone(timezone(timedelta(hours=2)))) == "2026-10-21T01:12:42Z"
    assert event_time(moment.replace(tzinfo=None)) == "2026-10-21T01:12:42Z"
    ms = int(moment.timestamp() * 1000)
    assert (clock_time(ms), utc(ms)) == ("2026-10-21 01:12:42", "2026-10-21 01:12:42 UTC")
    assert clock_time("soon") == "?"


# Every format character (Unicode's Cf) of the Python that runs the tests: each hides or reorders text.
_FORMAT_CHARACTERS = [chr(c) for c in range(sys.maxunicode + 1) if unicodedata.category(chr(c)) == "Cf"]


@pytest.mark.parametrize("show", [clip, one_line, printable_lines])
def test_no_format_character_is_shown_as_it_is(show: Any) -> None:
    """A word joiner, a zero-width joiner, a soft hyphen, a byte-order mark or a tag character in a script's
    location would show `set<U+2060>up.sh` as `setup.sh`: another object read as the one the operator
    knows. Every format character shows as `?`, as the bidirectional controls always did."""
    assert len(_FORMAT_CHARACTERS) > 150
    shown = [show(f"set{character}up.sh") for character in _FORMAT_CHARACTERS]
    assert set(shown) == {"set?up.sh"}


def test_a_lookalike_location_shows_its_hidden_character_in_sns_and_slack() -> None:
    from lifeguard.lifecycle import NodeLifecycleActions, diff_configs
    from lifeguard.notify.slack import shown_text, slack_message
    from lifeguard.notify.summary import summarize

    def config(location: str) -> dict[str, Any]:
        script = {"name": "setup", "scriptSource": {"scriptLocation": location}, "onError": "TERMINATE"}
        return {"stages": {"nodeBootstrapped": [script]}}

    before = NodeLifecycleActions.from_api(config("s3://team-scripts/setup.sh"))
    after = NodeLifecycleActions.from_api(config("s3://team-scripts/set\u2060up.sh"))  # PCS takes it
    detail, problems = clean_detail(
        make_detail(
            cluster_id="pcs_abc123de45",
            compute_node_group_id="pcs_abcdef01",
            config_before=before.to_api(),
            config_after=after.to_api(),
            diff=[change.to_detail() for change in diff_configs(before, after)],
            risks=[],
        )
    )
    summary = summarize("ConfigChangeReviewed", detail, problems=problems)
    blocks = slack_message(summary, detail)["blocks"]
    slack = shown_text("\n".join(block["text"]["text"] for block in blocks if "text" in block))
    for shown in (summary.text(), slack):
        assert "s3://team-scripts/setup.sh → s3://team-scripts/set?up.sh" in shown
        assert "\u2060" not in shown


@settings(max_examples=3000, deadline=None)
@given(
    st.lists(
        st.sampled_from(
            [
                "s3://",
                "https://",
                "HTTP://",
                "?",
                "#",
                "@",
                "/",
                " ",
                "\n",
                '"',
                "'",
                "<",
                ">",
                "a",
                "x=1",
                "s3:",
            ]
        ),
        max_size=16,
    ).map("".join)
)
def test_secrets_are_taken_out_of_urls_as_the_pattern_takes_them_in_one_pass(text: str) -> None:
    """The pattern alone tried every scheme of a run without a query again, to the run's end: `s3://` 13,000
    times in a diff's value took 11 s of the notify function. One pass takes out exactly what it does."""
    assert _secrets_out(text) == _URL_SECRETS.sub(r"\1\2?…", text)


def test_a_url_after_thousands_of_schemes_still_loses_its_secret() -> None:
    text = "s3://" * 50_000 + "bucket/key?X-Amz-Signature=abc " + "https://u:p@h/x#tok"
    shown = redacted(text)
    assert isinstance(shown, str)
    assert "abc" not in shown
    assert "tok" not in shown
    assert "u:p" not in shown
    assert shown.endswith("bucket/key?… https://h/x?…")
