"""`lifeguard simulate --html`: the report as a person sees it.

`render_html` on the sample documents under `tests/fixtures/simulate/` (escaping, "never", the baseline's
numbers, the lanes' geometry), then the page in a real headless Chromium: the screenshot is a picture of
the window's size and not blank, the page logged nothing to the console and fetched nothing.

Chromium's stderr log (`--enable-logging=stderr`) prints each console message of a page as a `CONSOLE`
line, without its level; the report runs no script, so any console message at all is an error. Its NetLog
(`--log-net-log`) lists each request with the page that made it; the browser's own (component updates)
are told apart by their network isolation key, which is `file://` for the page's. Both detectors are
shown to fire on pages made to fail.
"""

from __future__ import annotations

import copy
import json
import os
import re
import shutil
import signal
import struct
import subprocess
import zlib
from dataclasses import dataclass, field
from html.parser import HTMLParser
from pathlib import Path
from typing import Any

import pytest

from lifeguard_cli.simulate.html import render_html
from tests.conftest import REPO

FIXTURES = REPO / "tests" / "fixtures" / "simulate"
CHROMIUM = Path("/usr/bin/chromium")
CHROMIUM_TIMEOUT_SECONDS = 120  # a 2-core machine running the whole suite at once can take a minute
WINDOW = (1280, 900)
HOSTILE = "<script>alert(1)</script>"
# A blank page has 1 colour, a page of plain text about 250 (antialiasing), the report over 1,000.
MIN_DISTINCT_COLOURS = 400
_CONSOLE_LINE = re.compile(r':CONSOLE[:(]\d+\)?\] "(?P<message>.*)", source: (?P<source>.*) \(\d+\)$')


def load_document(name: str) -> dict[str, Any]:
    document: dict[str, Any] = json.loads((FIXTURES / name).read_text())
    return document


# What a person reads: the summary table's rows and the charts' marks.


class _Report(HTMLParser):
    """The summary table's rows as cell texts, and each chart's viewBox, rects and texts."""

    def __init__(self) -> None:
        super().__init__()
        self.rows: list[list[str]] = []
        self.charts: list[Chart] = []
        self._in_summary = False
        self._cell: list[str] | None = None
        self._text: list[str] | None = None
        self._in_title = False  # a mark's tooltip is not its text

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        found = {name: value or "" for name, value in attrs}
        if tag == "table":
            self._in_summary = found.get("class") == "summary"
        elif tag == "tr" and self._in_summary:
            self.rows.append([])
        elif tag in {"td", "th"} and self._in_summary:
            self._cell = []
        elif tag == "svg" and "aria-label" in found:
            self.charts.append(Chart(found["aria-label"], [float(v) for v in found["viewbox"].split()]))
        elif tag == "rect" and self.charts:
            self.charts[-1].rects.append({k: found[k] for k in ("x", "y", "width", "height", "fill")})
        elif tag == "text" and self.charts:
            self._text = []
        elif tag == "title":
            self._in_title = True

    def handle_endtag(self, tag: str) -> None:
        if tag in {"td", "th"} and self._cell is not None:
            self.rows[-1].append("".join(self._cell).strip())
            self._cell = None
        elif tag == "table":
            self._in_summary = False
        elif tag == "text" and self._text is not None:
            self.charts[-1].texts.append("".join(self._text).strip())
            self._text = None
        elif tag == "title":
            self._in_title = False

    def handle_data(self, data: str) -> None:
        if self._in_title:
            return
        for sink in (self._cell, self._text):
            if sink is not None:
                sink.append(data)


@dataclass
class Chart:
    """One lane chart: its label, viewBox, rects (the first is the plot's background) and texts."""

    label: str
    view_box: list[float]
    rects: list[dict[str, str]] = field(default_factory=list)
    texts: list[str] = field(default_factory=list)

    @property
    def plot_right(self) -> float:
        plot = self.rects[0]
        return float(plot["x"]) + float(plot["width"])


def read_report(page: str) -> _Report:
    report = _Report()
    report.feed(page)
    report.close()
    return report


def summary_row(page: str, measure: str) -> list[str]:
    (row,) = [row for row in read_report(page).rows if row and row[0] == measure]
    return row


def test_hostile_strings_are_escaped_everywhere() -> None:
    document = load_document("document.json")
    document["scenario"] = f"{HOSTILE} & co"
    document["groups"] = {HOSTILE: document["groups"]["lca-static"]}
    document["baseline"]["groups"] = {HOSTILE: document["baseline"]["groups"]["lca-static"]}
    document["baseline"]["name"] = HOSTILE
    for instance in [*document["instances"], *document["baseline"]["instances"]]:
        instance.update(group=HOSTILE, node=f"{HOSTILE}-1", instance_id=f"i-{HOSTILE}")
    for change in document["changes"]:
        change.update(group=HOSTILE, action=HOSTILE, diff=[{"path": HOSTILE, "old": HOSTILE, "new": HOSTILE}])
    document["events"][0]["detail"]["reason"] = f"<img src=x onerror=alert(1)> {HOSTILE}"

    page = render_html(document)

    assert "<script" not in page.lower()
    assert "<img" not in page.lower()
    assert "&lt;script&gt;alert(1)&lt;/script&gt;" in page
    assert "<title>&lt;script&gt;alert(1)&lt;/script&gt; &amp; co: Lifeguard (quarantine)</title>" in page
    assert [row[0] for row in read_report(page).rows].count(HOSTILE) == 1
    (lifeguard, baseline) = read_report(page).charts
    assert "quarantine" not in lifeguard.texts
    assert HOSTILE in lifeguard.texts  # the action's label, as text
    assert f"{HOSTILE}-1" in baseline.texts  # the lane's label


def test_minutes_never_reached_print_never() -> None:
    page = render_html(load_document("document.json"))
    assert summary_row(page, "minutes to an active node") == ["minutes to an active node", "12.4", "never"]
    assert summary_row(page, "minutes to a serving node") == ["minutes to a serving node", "12.4", "never"]


def test_baseline_numbers_stand_beside_lifeguards() -> None:
    page = render_html(load_document("document.json"))
    report = read_report(page)
    assert report.rows[0] == ["measure", "Lifeguard (quarantine)", "PCS alone"]
    assert summary_row(page, "instances launched")[1:] == ["4", "25"]
    assert summary_row(page, "instances burned (BOOTSTRAP_FAILED)")[1:] == ["3", "24"]
    assert summary_row(page, "instance minutes wasted")[1:] == ["6.1", "48"]
    assert summary_row(page, "nodes serving at the end")[1:] == ["1", "0"]
    assert [chart.label for chart in report.charts] == ["lca-static, Lifeguard", "lca-static, baseline"]


def test_without_a_baseline_only_lifeguards_run_is_shown() -> None:
    document = load_document("document.json")
    del document["baseline"]
    page = render_html(document)
    report = read_report(page)
    assert report.rows[0] == ["measure", "Lifeguard (quarantine)"]
    assert summary_row(page, "instances launched") == ["instances launched", "4"]
    assert [chart.label for chart in report.charts] == ["lca-static, Lifeguard"]
    assert "PCS alone" not in page


def test_an_instance_still_up_at_the_horizon_runs_to_the_right_edge() -> None:
    (lifeguard, baseline) = read_report(render_html(load_document("document.json"))).charts
    # The quarantined loop's last instance serves to the end; PCS alone's last one is still booting.
    for chart in (lifeguard, baseline):
        ends = [float(rect["x"]) + float(rect["width"]) for rect in chart.rects[1:]]
        assert max(ends) == pytest.approx(chart.plot_right)


def test_changes_are_labelled_lines_lifeguards_and_the_scenarios() -> None:
    report = read_report(render_html(load_document("wave.json")))
    lifeguard = next(chart for chart in report.charts if chart.label == "gpu-wave, Lifeguard")
    baseline = next(chart for chart in report.charts if chart.label == "gpu-wave, baseline")
    assert {"quarantine", "drain", "revert", "scenario change"} <= set(lifeguard.texts)
    assert "scenario change" in baseline.texts
    assert "quarantine" not in baseline.texts


def hundred_slots() -> dict[str, Any]:
    """wave.json with 100 slots in gpu-wave, each with an instance serving to the horizon."""
    document = load_document("wave.json")
    template = next(i for i in document["instances"] if i["group"] == "gpu-wave" and i["end"] is None)
    document["instances"] = [{**template, "node": f"gpu-wave-{slot}"} for slot in range(1, 101)]
    document["groups"]["gpu-wave"]["nodes"] = 100
    del document["baseline"]
    return document


def test_a_hundred_node_slots_keep_a_chart_of_sensible_height_and_readable_labels() -> None:
    (chart,) = read_report(render_html(hundred_slots())).charts

    assert chart.view_box[3] <= 600  # in units of a 1200-wide chart
    lane_labels = [text for text in chart.texts if text.startswith("gpu-wave-")]
    assert "gpu-wave-1" in lane_labels
    assert 10 <= len(lane_labels) < 100  # every n-th lane, far enough apart to read
    bars = [rect for rect in chart.rects[1:] if rect["fill"] != "#eef1f5"]
    assert len({rect["y"] for rect in bars}) == 100  # yet every lane has its bar


def test_the_report_asks_for_nothing_outside_itself() -> None:
    for name in ("document.json", "wave.json"):
        page = render_html(load_document(name)).lower()
        for outside in ("://", "src=", "@import", "url(", "<script", "<link rel='stylesheet'"):
            assert outside not in page, (name, outside)


# The page in a real browser.


@dataclass
class BrowserRun:
    """What Chromium made of a page: its screenshot, console messages and network requests."""

    screenshot: Path
    console: list[str]
    requests: list[str]


def open_in_chromium(page: Path, workdir: Path, *, browser: Path = CHROMIUM) -> BrowserRun:
    """Load `page` in headless Chromium with a fresh profile, as a window of WINDOW, and screenshot it."""
    if not browser.exists():
        pytest.fail(f"{browser} not found: run `make setup` (it installs Debian's chromium)", pytrace=False)
    workdir.mkdir(parents=True, exist_ok=True)
    screenshot, netlog = workdir / "screenshot.png", workdir / "netlog.json"
    command = [
        str(browser),
        "--headless",
        "--no-sandbox",
        "--disable-gpu",
        "--disable-quic",
        "--no-first-run",
        "--disable-background-networking",
        "--disable-component-update",
        "--disable-sync",
        f"--user-data-dir={workdir / 'profile'}",
        "--enable-logging=stderr",
        "--v=0",
        f"--log-net-log={netlog}",
        "--run-all-compositor-stages-before-draw",
        f"--screenshot={screenshot}",
        f"--window-size={WINDOW[0]},{WINDOW[1]}",
        page.resolve().as_uri(),
    ]
    # Headless Chromium now and then never exits (seen once in a whole suite on a loaded 2-core machine,
    # where it takes 1-2 s alone): a run that hangs is killed and run once more, on a fresh profile.
    for _ in range(2):
        shutil.rmtree(workdir / "profile", ignore_errors=True)
        process = subprocess.Popen(
            command, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, start_new_session=True
        )
        try:
            _, stderr = process.communicate(timeout=CHROMIUM_TIMEOUT_SECONDS)
            break
        except subprocess.TimeoutExpired:
            os.killpg(process.pid, signal.SIGKILL)
            process.communicate()
    else:
        pytest.fail(f"chromium took more than {CHROMIUM_TIMEOUT_SECONDS} s on {page.name}, twice")
    assert process.returncode == 0, stderr
    return BrowserRun(screenshot, console_messages(stderr), page_requests(netlog))


def console_messages(stderr: str) -> list[str]:
    """The page's console messages in Chromium's stderr log: `message (source)`."""
    found = []
    for line in stderr.splitlines():
        match = _CONSOLE_LINE.search(line)
        if match:
            found.append(f"{match['message']} ({match['source']})")
    return found


def page_requests(netlog: Path) -> list[str]:
    """The URLs a file:// page asked the network for, from Chromium's NetLog."""
    log = json.loads(netlog.read_text())
    start_job = log["constants"]["logEventTypes"]["URL_REQUEST_START_JOB"]
    return [
        event["params"]["url"]
        for event in log["events"]
        if event["type"] == start_job
        and "url" in event.get("params", {})
        and event["params"].get("network_isolation_key", "").startswith("file://")
    ]


def png_colours(path: Path) -> tuple[int, int, set[bytes]]:
    """Width, height and the distinct pixel colours of an 8-bit RGB(A) PNG, decoded with zlib alone."""
    data = path.read_bytes()
    assert data[:8] == b"\x89PNG\r\n\x1a\n", f"{path} is not a PNG"
    position, chunks = 8, []
    header: tuple[int, ...] = ()
    while position < len(data):
        length, kind = struct.unpack(">I4s", data[position : position + 8])
        body = data[position + 8 : position + 8 + length]
        (crc,) = struct.unpack(">I", data[position + 8 + length : position + 12 + length])
        assert zlib.crc32(kind + body) == crc, f"{path}: {kind!r} chunk damaged"
        if kind == b"IHDR":
            header = struct.unpack(">IIBBBBB", body)
        elif kind == b"IDAT":
            chunks.append(body)
        elif kind == b"IEND":
            break
        position += 12 + length
    width, height, depth, colour_type, _, _, interlace = header
    assert (depth, colour_type, interlace) in {(8, 2, 0), (8, 6, 0)}, header
    pixel = 3 if colour_type == 2 else 4
    stride = width * pixel
    raw = zlib.decompress(b"".join(chunks))
    assert len(raw) == height * (stride + 1)
    previous = bytes(stride)
    colours: set[bytes] = set()
    for row in range(height):
        start = row * (stride + 1)
        line = _unfilter(raw[start], bytearray(raw[start + 1 : start + 1 + stride]), previous, pixel)
        colours.update(line[i : i + pixel] for i in range(0, stride, pixel))
        previous = line
    return width, height, colours


def _unfilter(kind: int, line: bytearray, previous: bytes, pixel: int) -> bytes:
    """One scanline with its PNG filter undone (RFC 2083, 6.2-6.6)."""
    if kind == 1:
        for i in range(pixel, len(line)):
            line[i] = (line[i] + line[i - pixel]) & 0xFF
    elif kind == 2:
        line = bytearray((a + b) & 0xFF for a, b in zip(line, previous, strict=True))
    elif kind == 3:
        for i in range(len(line)):
            left = line[i - pixel] if i >= pixel else 0
            line[i] = (line[i] + ((left + previous[i]) >> 1)) & 0xFF
    elif kind == 4:
        for i in range(len(line)):
            a = line[i - pixel] if i >= pixel else 0
            b = previous[i]
            c = previous[i - pixel] if i >= pixel else 0
            p = a + b - c
            pa, pb, pc = abs(p - a), abs(p - b), abs(p - c)
            near = a if pa <= pb and pa <= pc else b if pb <= pc else c
            line[i] = (line[i] + near) & 0xFF
    else:
        assert kind == 0, f"PNG filter type {kind}"
    return bytes(line)


@pytest.mark.e2e
@pytest.mark.parametrize("name", ["document.json", "wave.json", "hundred slots"])
def test_the_report_renders_in_chromium_without_a_console_error(name: str, tmp_path: Path) -> None:
    document = hundred_slots() if name == "hundred slots" else load_document(name)
    page = tmp_path / "report.html"
    page.write_text(render_html(document), encoding="utf-8")

    run = open_in_chromium(page, tmp_path / "chromium")

    assert run.console == []
    assert run.requests == []
    width, height, colours = png_colours(run.screenshot)
    assert (width, height) == WINDOW
    assert len(colours) > MIN_DISTINCT_COLOURS


@pytest.mark.e2e
@pytest.mark.parametrize(
    ("script", "expected"),
    [
        ("throw new Error('deliberate failure');", "Uncaught Error: deliberate failure"),
        ("console.error('deliberate console error');", "deliberate console error"),
        ("undefinedFunctionOfTheReport();", "ReferenceError: undefinedFunctionOfTheReport is not defined"),
    ],
)
def test_the_console_check_sees_a_deliberate_error(script: str, expected: str, tmp_path: Path) -> None:
    page = tmp_path / "broken.html"
    report = render_html(load_document("document.json"))
    page.write_text(report.replace("</body>", f"<script>{script}</script></body>"))

    run = open_in_chromium(page, tmp_path / "chromium")

    assert len(run.console) == 1
    assert expected in run.console[0]
    assert page.as_uri() in run.console[0]


@pytest.mark.e2e
def test_the_network_check_sees_a_page_that_fetches(tmp_path: Path) -> None:
    page = tmp_path / "fetching.html"
    page.write_text(
        render_html(load_document("document.json")).replace(
            "</body>", "<img src='https://fonts.example.invalid/logo.png' alt=''></body>"
        )
    )

    run = open_in_chromium(page, tmp_path / "chromium")

    assert run.requests == ["https://fonts.example.invalid/logo.png"]


@pytest.mark.e2e
def test_the_screenshot_check_sees_a_blank_page(tmp_path: Path) -> None:
    page = tmp_path / "blank.html"
    page.write_text("<!DOCTYPE html><html><head><title>blank</title></head><body></body></html>")

    run = open_in_chromium(page, tmp_path / "chromium")

    width, height, colours = png_colours(run.screenshot)
    assert (width, height) == WINDOW
    assert len(colours) <= MIN_DISTINCT_COLOURS


def test_without_chromium_the_browser_tests_fail_and_say_to_run_make_setup(tmp_path: Path) -> None:
    page = tmp_path / "report.html"
    page.write_text(render_html(load_document("document.json")))
    with pytest.raises(pytest.fail.Exception, match=r"run `make setup`"):
        open_in_chromium(page, tmp_path / "chromium", browser=tmp_path / "no-chromium")


def test_rendering_leaves_the_document_as_it_was() -> None:
    document = load_document("wave.json")
    before = copy.deepcopy(document)
    render_html(document)
    assert document == before
