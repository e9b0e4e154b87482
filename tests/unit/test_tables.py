"""Tables for people (`lifeguard_cli.tables`): they fit the width, keep words whole, stack when they
cannot, and piped lines carry no trailing padding."""

from __future__ import annotations

import io
import subprocess
import sys

import pytest
from rich.console import Console

from lifeguard_cli.tables import console, show, table

DETAIL = (
    "quarantine: fail-terminate onError TERMINATE → STOP_SEQUENCE; suspect nodeBootstrapped/fail-terminate"
)


def rendered(
    width: int, *rows: tuple[str, ...], columns: tuple[str, ...] = ("time", "what", "detail")
) -> str:
    made = table(*columns)
    for row in rows:
        made.add_row(*row)
    out = io.StringIO()
    show(Console(file=out, width=width, highlight=False, color_system=None), made)
    return out.getvalue()


def test_a_table_fits_the_width_and_breaks_no_word() -> None:
    text = rendered(80, ("2026-11-30 10:00:05", "BootstrapLoopDetected", DETAIL))
    lines = text.splitlines()
    assert max(len(line.rstrip()) for line in lines) <= 80
    assert "BootstrapLoopDetected" in text  # whole, not "BootstrapLoopDetect/ed"
    assert {"STOP_SEQUENCE;", "TERMINATE", "onError"} <= set(text.split())


def test_a_table_that_fits_is_one_line_a_row() -> None:
    text = rendered(200, ("2026-11-30 10:00:05", "BootstrapLoopDetected", DETAIL))
    assert len(text.splitlines()) == 2  # the header and the row


def test_a_last_column_too_wide_goes_under_each_row() -> None:
    rows = [
        ("2026-11-30 10:00:05", "LAUNCHED/MAINTAIN_MIN_CAPACITY", "nodeBootstrapped/fail-terminate " * 3)
    ] * 2
    lines = rendered(60, *rows).splitlines()
    assert lines[0].split() == ["time", "what"]
    assert lines[1] == "    detail"  # the last column's heading, where its values go
    assert lines[2].split() == ["2026-11-30", "10:00:05", "LAUNCHED/MAINTAIN_MIN_CAPACITY"]
    assert lines[3].startswith("    nodeBootstrapped/fail-terminate")
    assert sum(line.startswith("2026-11-30") for line in lines) == 2
    assert max(len(line.rstrip()) for line in lines) <= 60


def test_a_word_longer_than_the_cap_is_kept_whole_where_its_row_can_hold_it() -> None:
    """A script's location is one word of 42 characters: at 80 columns it goes whole under its row rather
    than folded into a narrow column ("(s3://lca-scripts-ex" / "ample/scripts/fail.s")."""
    change = "revert: fail-terminate: removed (s3://lca-scripts-example/scripts/fail.sh, onError TERMINATE)"
    row = ("bad change, revert", "BootstrapLoopDetected, RemediationApplied, LoopResolved", "3 SNS", change)
    text = rendered(80, row, columns=("scenario", "events", "notifications", "changes"))
    assert "(s3://lca-scripts-example/scripts/fail.sh," in text.split()
    assert max(len(line.rstrip()) for line in text.splitlines()) <= 80
    assert (
        len(rendered(200, row, columns=("scenario", "events", "notifications", "changes")).splitlines()) == 2
    )
    unbroken = "s3://" + "x" * 120  # longer than any line: folded, as before
    assert max(len(line) for line in rendered(80, ("t", "w", unbroken)).splitlines()) <= 80


def test_columns_too_many_for_the_width_are_stacked_one_block_a_row() -> None:
    columns = ("stage", "#", "script", "source", "args", "onError", "executionPolicy", "pinned")
    row = ("nodeBootstrapped", "0", "fail-terminate", "s3://b/k.sh", "-", "TERMINATE (default)", "ONCE", "no")
    text = rendered(40, row, row, columns=columns)
    blocks = text.split("\n\n")
    assert len(blocks) == 2
    assert [line.split()[0] for line in blocks[0].splitlines()] == list(columns)
    assert "executionPolicy  ONCE" in blocks[0]


def test_a_short_last_column_never_goes_under_its_row_the_rows_are_stacked_instead() -> None:
    """lint's table at 80 columns, piped: all but `pinned` fit, and `pinned` went on a line of its own
    under every row (`    no`), its heading under the others'. A short value is no detail to set apart."""
    columns = ("stage", "#", "script", "source", "args", "onError", "executionPolicy", "pinned")
    row = ("nodeBootstrapped", "0", "a", "s3://rvb/fail.sh", "-", "TERMINATE", "FIRST_BOOT_ONLY", "no")
    text = rendered(80, row, columns=columns)
    assert [line.split()[0] for line in text.splitlines()] == list(columns)  # one block, a line a column
    assert text.splitlines()[-1].split() == ["pinned", "no"]


def test_a_stacked_value_too_long_to_sit_beside_its_name_goes_under_it_whole() -> None:
    """At 60 columns a 47-character S3 location does not fit beside a 15-character column name, but does
    on a line of its own: it was folded there ("…/record-boo" / "t.sh")."""
    columns = ("stage", "#", "script", "source", "args", "onError", "executionPolicy", "pinned")
    location = "s3://lca-scripts-example/scripts/record-boot.sh"
    row = ("nodeBootstrapped", "1", "record-after-fail", location, "after-fail", "TERMINATE", "ONCE", "no")
    lines = rendered(60, row, columns=columns).splitlines()
    assert max(len(line.rstrip()) for line in lines) <= 60
    at = lines.index("source")
    assert lines[at + 1].rstrip() == f"    {location}"
    assert lines[at + 2].split() == ["args", "after-fail"]
    assert lines[at - 1].index("record-after-fail") == lines[at + 2].index("after-fail")  # still aligned


def test_piped_output_has_no_trailing_spaces_and_honours_columns() -> None:
    program = (
        "from lifeguard_cli.tables import console, show, table\n"
        "t = table('a', 'b')\n"
        "t.add_row('x', 'word ' * 30)\n"
        "show(console(), t)\n"
    )
    for columns, widest in (("60", 60), ("120", 120)):
        done = subprocess.run(
            [sys.executable, "-c", program],
            capture_output=True,
            text=True,
            check=True,
            env={"COLUMNS": columns, "PATH": ""},
        )
        lines = done.stdout.splitlines()
        assert all(line == line.rstrip() for line in lines)
        assert max(len(line) for line in lines) <= widest
        assert max(len(line) for line in lines) > widest - 10


@pytest.mark.parametrize("stderr", [False, True])
def test_the_console_of_a_pipe_is_not_a_terminal(stderr: bool) -> None:
    assert console(stderr=stderr).is_terminal is False


def test_progress_of_long_work_goes_to_stderr_in_a_few_lines(capsys: pytest.CaptureFixture[str]) -> None:
    from lifeguard_cli.cli import _steps

    with _steps("replaying", after_seconds=0) as update:
        update(0, 2000)
        for done in range(1, 2001):
            update(done, 2000)
    captured = capsys.readouterr()
    assert captured.out == ""
    lines = captured.err.splitlines()
    assert lines[0] == "replaying: starting the local AWS…"
    assert lines[-1] == "replaying: 2000 of 2000"
    assert len(lines) <= 3  # a line every five seconds, not one a record


def test_quick_work_shows_no_progress(capsys: pytest.CaptureFixture[str]) -> None:
    from lifeguard_cli.cli import _steps

    with _steps("replaying") as update:
        update(0, 3)
        update(3, 3)
    assert capsys.readouterr().err == ""


def test_work_past_a_second_says_so_on_stderr_and_quick_work_does_not(
    capsys: pytest.CaptureFixture[str],
) -> None:
    import time

    from lifeguard_cli.cli import _working

    with _working("linting 1 input", after_seconds=0.05):
        time.sleep(2.0)  # the timer, due at 0.05 s, has the rest to say it on a busy machine
    with _working("linting 2 inputs", after_seconds=5):
        pass
    captured = capsys.readouterr()
    assert (captured.out, captured.err) == ("", "linting 1 input…\n")


def test_a_cell_is_shown_as_written_never_read_as_markup() -> None:
    text = rendered(80, ("[/x]", "[red]secret[/red]", "[bold]"))
    assert "[/x]" in text
    assert "[red]secret[/red]" in text


def test_a_slack_message_wrapped_at_80_columns_keeps_its_gutter_on_every_line() -> None:
    from lifeguard_cli.simulate.render import render_simulation

    long = "Lifeguard changed the lifecycle actions of pcs_abcdef01 (pcs_abc123de45) to break the loop. " * 2
    blocks = [{"type": "section", "text": {"type": "mrkdwn", "text": f":wrench: {long}"}}]
    document = {
        "mode": "quarantine",
        "changes": [],
        "groups": {},
        "notifications": [{"channel": "slack", "message": {"blocks": blocks}}],
    }
    out = io.StringIO()
    render_simulation(document, Console(file=out, width=80, color_system=None), timeline=False)
    lines = out.getvalue().split("(1 sent in all)\n", 1)[1].split("\n\n", 1)[0].splitlines()
    assert len(lines) >= 3  # wrapped
    assert all(line.startswith("  │ ") and len(line) <= 80 for line in lines)
    assert lines[0].startswith("  │ 🔧 Lifeguard changed")  # the shortcode as the channel shows it


_HOSTILE_PRINTS = (
    "from rich.text import Text\n"
    "from lifeguard_cli.tables import console, show, table\n"
    "out = console()\n"
    "out.print('[bold]own style[/bold]')\n"
    "out.print('location s3://b/\\x1b[2J\\x1b[Hall good\\u202ehs.lairt', markup=False)\n"
    "out.print(Text('arg \\x1b]8;;https://evil.example\\x1b\\\\click\\x1b]8;;\\x1b\\\\'))\n"
    "t = table('script', 'source')\n"
    "t.add_row('set\\u2060up', 's3://b/\\x1b[31mred\\rover')\n"
    "show(out, t)\n"
)


@pytest.mark.parametrize("where", ["a pipe", "a terminal"])
def test_a_value_printed_cannot_send_the_terminal_its_own_escapes(where: str) -> None:
    """A script's location or argument may hold a terminal's escapes or a bidirectional override (PCS's
    patterns let them through): whatever the console prints shows them as `?`, on a terminal too, where the
    console's own styles still go out."""
    import os

    env = {"COLUMNS": "100", "PATH": "", "TERM": "xterm-256color"}
    if where == "a pipe":
        done = subprocess.run(
            [sys.executable, "-c", _HOSTILE_PRINTS], capture_output=True, check=True, env=env
        )
        shown = done.stdout.decode()
    else:
        leader, follower = os.openpty()
        try:
            done = subprocess.run(  # a few hundred bytes: the terminal's buffer holds them all
                [sys.executable, "-c", _HOSTILE_PRINTS],
                stdout=follower,
                stderr=subprocess.PIPE,
                env=env,
                check=False,
                timeout=60,
            )
            os.close(follower)
            chunks = []
            while True:
                try:
                    chunk = os.read(leader, 65536)
                except OSError:  # EIO: the writer is gone
                    break
                if not chunk:
                    break
                chunks.append(chunk)
        finally:
            os.close(leader)
        assert done.returncode == 0, done.stderr
        shown = b"".join(chunks).decode()
        assert "\x1b[1mown style" in shown  # the console's own style
    for hostile in ("\x1b[2J", "\x1b[H", "\x1b]8", "\x1b[31m", "\u202e", "\u2060", "\rover"):
        assert hostile not in shown
    assert "?[2J?[Hall good?hs.lairt" in shown
    assert "set?up" in shown
    assert "?]8;;https://evil.example?\\click" in shown
    if where == "a pipe":
        assert "\x1b" not in shown
