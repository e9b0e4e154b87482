"""Output for people: the console every command prints to, and tables that read at 80 columns.

The console is as wide as the terminal, or `COLUMNS`, or 80 when the output is piped; piped lines carry
no trailing padding. A table made by `table()` wraps its cells at word boundaries and never breaks a
word of up to `WORD_MAX` characters (an event name, `executionPolicy`, a group id): each column is at
least as wide as its longest such word, and only longer words are folded. A longer word that a line can
hold (a script's S3 location) is kept whole too: `show()` prints the table so, or with its last column
under each row, or else with its columns stacked (each row a block of `column  value` lines). `COLUMNS=0`
(or text) is a width not known, as `shutil` reads it.
"""

from __future__ import annotations

import io
import sys
from typing import IO, TYPE_CHECKING, Any, TextIO, cast

if TYPE_CHECKING:
    from rich.console import Console
    from rich.table import Table

__all__ = [
    "BROKEN_PIPE_EXIT",
    "WORD_MAX",
    "console",
    "keep_words_whole",
    "show",
    "stop_on_broken_pipe",
    "table",
]

WORD_MAX = 40


class _TrimmedLines(io.TextIOBase):
    """A text stream that writes each line to `out` without its trailing spaces."""

    def __init__(self, out: TextIO) -> None:
        self._out = out
        self._pending = ""

    def writable(self) -> bool:
        return True

    def write(self, text: str) -> int:
        *lines, self._pending = (self._pending + text).split("\n")
        for line in lines:
            self._out.write(line.rstrip(" ") + "\n")
        return len(text)

    def flush(self) -> None:
        if self._pending.strip(" "):
            self._out.write(self._pending.rstrip(" "))
            self._pending = ""
        self._out.flush()


# The exit status of output cut short by its reader (`lifeguard lint x.json | head -1`): a process killed
# by SIGPIPE, as the shell reports it, and never 1 (for `lint`, "not valid").
BROKEN_PIPE_EXIT = 141


def stop_on_broken_pipe() -> None:
    """Leave as a process killed by SIGPIPE would: stdout's reader is gone, so nothing more is written to
    it (Python would complain on the way out), and the status is `BROKEN_PIPE_EXIT`."""
    import os

    devnull = os.open(os.devnull, os.O_WRONLY)
    os.dup2(devnull, sys.stdout.fileno())
    raise SystemExit(BROKEN_PIPE_EXIT)


def console(*, stderr: bool = False) -> Console:
    """The console for people: the terminal's width (or `COLUMNS`, else 80); piped, no trailing spaces.
    Whatever it prints shows a control character of its text (a terminal's escape, a carriage return, a
    bidirectional override: a script's location or argument, a key of a document, an AWS answer may hold
    any) as `?`: no value can clear the screen, hide a link or reorder what a prompt asks to confirm. Lines
    and tabs are kept, and so are the console's own styles and cursor moves."""
    from rich.console import Console, ConsoleOptions, RenderableType, RenderHook, RenderResult
    from rich.segment import Segment

    from lifeguard.bounds import printable_lines

    class _Printable:
        def __init__(self, renderable: RenderableType) -> None:
            self.renderable = renderable

        def __rich_console__(self, out: Console, options: ConsoleOptions) -> RenderResult:
            for segment in out.render(self.renderable, options):
                text = segment.text
                if segment.control or text.isprintable() or text in ("\n", ""):
                    yield segment
                else:
                    yield Segment(printable_lines(text), segment.style)

    class _PrintableOnly(RenderHook):
        def process_renderables(self, renderables: list[Any]) -> list[Any]:
            return [_Printable(renderable) for renderable in renderables]

    class _Console(Console):
        def on_broken_pipe(self) -> None:
            stop_on_broken_pipe()

    stream = sys.stderr if stderr else sys.stdout
    width = None if _columns_usable() else _unknown_width(stream)
    if stream.isatty():
        made = _Console(highlight=False, stderr=stderr, width=width)
    else:
        made = _Console(highlight=False, file=cast(IO[str], _TrimmedLines(stream)), width=width)
    made.push_render_hook(_PrintableOnly())
    return made


def _columns_usable() -> bool:
    """Whether rich may read the width itself: `COLUMNS` is unset or a width. `0` or text means "not
    known", as `shutil.get_terminal_size` reads it (rich would print nothing at width 0)."""
    import os

    value = os.environ.get("COLUMNS")
    return value is None or (value.isdigit() and int(value) > 0)


def _unknown_width(stream: TextIO) -> int:
    """The terminal's width, or 80 when the output is piped."""
    import os

    try:
        return os.get_terminal_size(stream.fileno()).columns or 80
    except (OSError, ValueError, io.UnsupportedOperation):
        return 80


def table(*columns: str, title: str | None = None, right: tuple[str, ...] = ()) -> Table:
    """A borderless table with a bold header; the columns named in `right` are right-aligned."""
    from rich.table import Table

    made = Table(box=None, header_style="bold", pad_edge=False, title=title, title_justify="left")
    for column in columns:
        made.add_column(column, overflow="fold", justify="right" if column in right else "left")
    return made


def keep_words_whole(made: Table, width: int, word_max: int = WORD_MAX) -> bool:
    """Fix each column's width so that `made` fits `width` with no word of up to `word_max` characters
    broken. Each column gets its longest such word; what is left goes first to the cells (the columns
    that want least first, each at most an even share of what remains), then to headers, which wrap
    rather than take room from cells. False (and `made` unchanged) when even the words cannot fit."""
    columns = made.columns
    least, cells_most, header_most = [], [], []
    for column in columns:
        header, cells = _text(column.header), [_text(cell) for cell in column._cells]
        words = [w for text in [header, *cells] for w in text.split() if len(w) <= word_max]
        least.append(max(map(len, words), default=1))
        cells_most.append(max([least[-1], *(len(line) for text in cells for line in text.splitlines())]))
        header_most.append(max([cells_most[-1], *(len(line) for line in header.splitlines())]))
    room = width - 2 * (len(columns) - 1)  # one space each side of the inner column edges
    if sum(least) > room:
        return False
    widths = list(least)
    spare = room - sum(least)
    for most in (cells_most, header_most):
        wanted = [m - w for m, w in zip(most, widths, strict=True)]
        for count, index in enumerate(sorted(range(len(columns)), key=lambda i: wanted[i])):
            given = min(wanted[index], spare // (len(columns) - count))
            widths[index] += given
            spare -= given
    for column, chosen in zip(columns, widths, strict=True):
        column.width = max(chosen, 1)
    return True


def show(out: Console, made: Table) -> None:
    """Print `made` with its words whole. When its columns cannot all be that wide at once, its last
    column goes on a line of its own under each row (a timeline's detail, say); when even the others
    cannot, each row is a block of `column  value` lines. A cell given as a string is shown as written,
    never read as markup (it may be a script's name or argument)."""
    from rich.text import Text

    for column in made.columns:
        column._cells = [Text(cell) if isinstance(cell, str) else cell for cell in column._cells]
    # Every word a line holds whole: in the table, with its last column under each row, or stacked; else
    # the short words whole, the longer folded.
    for word_max in (out.width - _UNDER, WORD_MAX):
        if keep_words_whole(made, out.width, word_max):
            out.print(made)
            return
        if len(made.columns) > 2 and _show_last_under(out, made, word_max):
            return
        if word_max > WORD_MAX and _stacked_holds_words(made, out.width - _UNDER):
            break
    _show_stacked(out, made)


def _stacked_holds_words(made: Table, width: int) -> bool:
    """Whether each row as a block of `column  value` lines holds every word of up to `width` whole."""
    label = max((len(_text(column.header)) for column in made.columns), default=0) + 2
    words = [w for column in made.columns for cell in column._cells for w in _text(cell).split()]
    return label + max((len(w) for w in words if len(w) <= width), default=0) <= width


_UNDER = 4  # the indent of a last column shown under its row
_SHORT = 12  # a last column no longer than this (its heading too) is never shown under its row


def _show_last_under(out: Console, made: Table, word_max: int) -> bool:
    from rich.padding import Padding
    from rich.text import Text

    *lead, last = made.columns
    if max(len(_text(cell)) for cell in [last.header, *last._cells]) <= _SHORT:
        return False  # a short value (lint's `pinned`) on a line of its own reads worse than a block
    heading = _like(made, lead, title=made.title)
    for index in range(made.row_count):
        heading.add_row(*(column._cells[index] for column in lead))
    if not keep_words_whole(heading, out.width, word_max):
        return False
    widths = [column.width for column in heading.columns]
    heading.rows.clear()
    for column in heading.columns:
        column._cells.clear()
    out.print(heading)
    # The last column's own heading, where its values go: under the others', indented as they are.
    out.print(Text(" " * _UNDER + _text(last.header), style="bold"))
    for index in range(made.row_count):
        row = _like(made, lead, header=False)
        for column, width in zip(row.columns, widths, strict=True):
            column.width = width
        row.add_row(*(column._cells[index] for column in lead))
        out.print(row)
        if _text(last._cells[index]).strip():
            out.print(Padding(last._cells[index], (0, 0, 0, _UNDER)))
    return True


def _like(made: Table, columns: list[Any], *, header: bool = True, title: Any = None) -> Table:
    """An empty table with these columns of `made`."""
    from rich.table import Table

    copy = Table(box=None, header_style="bold", pad_edge=False, show_header=header, title=title)
    copy.title_justify = "left"
    for column in columns:
        copy.add_column(column.header, justify=column.justify, overflow="fold")
    return copy


def _show_stacked(out: Console, made: Table) -> None:
    """Each row a block of `column  value` lines; a value with a word too long to sit beside the column
    names (a script's S3 location at 60 columns) goes under its name, indented, where a line holds it."""
    from rich.padding import Padding
    from rich.table import Table
    from rich.text import Text

    if made.title:
        out.print(made.title, style="italic")
    label = max((len(_text(column.header)) for column in made.columns), default=0)
    beside = out.width - label - 2
    for index in range(made.row_count):
        if index:
            out.print()
        block: Table | None = None
        for column in made.columns:
            cell = column._cells[index]
            words = _text(cell).split()
            if not words:
                continue
            if max(map(len, words)) <= beside:
                if block is None:
                    block = Table.grid(padding=(0, 2))
                    block.add_column(style="bold", no_wrap=True, min_width=label)
                    block.add_column(overflow="fold")
                block.add_row(column.header, cell)
                continue
            if block is not None:
                out.print(block)
                block = None
            out.print(Text(_text(column.header), style="bold"))
            out.print(Padding(cell, (0, 0, 0, _UNDER)))
        if block is not None:
            out.print(block)


def _text(cell: Any) -> str:
    return str(cell.plain) if hasattr(cell, "plain") else cell if isinstance(cell, str) else ""
