"""The shipper's own bookkeeping (`node.shipper`): batches PutLogEvents takes, and a state file it can always
start from."""

from __future__ import annotations

import dataclasses
import errno
import io
import json
import os
import threading
import time
import tracemalloc
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import lifeguard.node.shipper
from lifeguard.node.executor import EXIT_TERMINATE, Executor, NodeIdentity
from lifeguard.node.layout import NodeLayout
from lifeguard.node.shipper import (
    EVENT_OVERHEAD_BYTES,
    MAX_BATCH_BYTES,
    MAX_BATCH_EVENTS,
    CloudWatchSink,
    DeliveryFailedError,
    KernelBoot,
    Shipper,
    ShipperIdentity,
    _batches,
    _State,
    identity_from_executor_log,
)
from lifeguard.node_report import NodeReport, parse_node_report
from tests.unit.test_node_report_schema import (
    FAILING,
    PASSING,
    SHIPPER_IDENTITY,
    BucketFetcher,
    ListSink,
    booted,
)


def test_batches_keep_the_order_and_within_putlogevents_count_and_bytes() -> None:
    """A report's escaped log tail can be six times its 4 KiB: eighty such reports are more than the
    1 MiB a PutLogEvents batch may hold, and a batch CloudWatch refuses would be refused forever."""
    big = ["\\u0001" * 4096 + f"#{n}" for n in range(80)]
    small = [f"report {n}" for n in range(2500)]
    for messages in (big, small, big + small):
        batches = list(_batches(messages))
        assert [m for batch in batches for m in batch] == messages
        assert all(len(batch) <= MAX_BATCH_EVENTS for batch in batches)
        assert all(
            sum(len(m.encode()) + EVENT_OVERHEAD_BYTES for m in batch) <= MAX_BATCH_BYTES for batch in batches
        )
    assert len(list(_batches(big))) == 2
    assert list(_batches([])) == []


@pytest.mark.parametrize(
    "damage",
    [
        '{"executor_offset": "x"}',
        '{"script_offsets": []}',
        "[]",
        '{"executor_offset": 0, "script_offsets": {}, "boot": Infinity, "first_boot": true, "pending": []}',
        '{"executor_offset": -5, "script_offsets": {}, "boot": 1, "first_boot": true, "pending": []}',
        '{"executor_offset": 0, "script_offsets": {"a": 1.5}, "boot": 1, "first_boot": true, "pending": []}',
        '{"executor_offset": 0, "script_offsets": {}, "boot": 1, "first_boot": true, "pending": 5}',
        '{"executor_offset": 0, "script_offsets": {}, "boot": 1, "first_boot": "yes", "pending": []}',
        '{"executor_offset": 0, "script_offsets": {}, "boot": 1, "first_boot": true, "pending": [1]}',
        "not json",
    ],
)
def test_a_damaged_state_file_is_started_afresh_not_a_shipper_stopped_for_good(
    tmp_path: Path, damage: str
) -> None:
    path = tmp_path / "shipper-state.json"
    path.write_text(damage)
    assert _State.load(path) == _State()


def test_a_state_as_saved_is_loaded_as_it_was(tmp_path: Path) -> None:
    path = tmp_path / "shipper-state.json"
    saved = _State(
        executor_offset=120,
        executor_inode=42,
        executor_head=b'{"timestamp":"2026-10-21T00:49:33.129571Z"'.hex(),
        script_offsets={"a.log": 7},
        script_marks={"a.log": b"[end a exit=0 @ 1]\n".hex()},
        boot=3,
        first_boot=False,
        pending=["r"],
    )
    saved.save(path)
    assert json.loads(path.read_text())["boot"] == 3
    assert _State.load(path) == saved


def test_a_run_whose_place_in_its_log_no_longer_holds_is_not_read_whole(tmp_path: Path) -> None:
    """A log rewritten so that the run's first line now runs past the run's recorded end: the run is not
    found there (as for any log rotated or truncated), instead of a read of the whole log."""
    layout = NodeLayout(tmp_path)
    log = layout.script_log("nodeBootstrapped", "a")
    log.parent.mkdir(parents=True)
    log.write_bytes(b"[start a args=[] @ 1]\n" + b"x" * 1_000_000 + b"\n[end a exit=1 @ 2]\n")
    identity = ShipperIdentity("pcs_abc123de45", "pcs_abcdef01", "i-0123456789abcdef0", None)
    shipper = Shipper(layout, identity, sink=None)  # type: ignore[arg-type]  # nothing is sent here
    tracemalloc.start()
    try:
        # Its start marker alone is 22 bytes: its window would begin one byte past its end, and read(-1)
        # reads to the end of the file.
        assert shipper._run_at("nodeBootstrapped", "a", (0, 21)) is None
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert peak < 200_000  # the megabyte after it was never read


def test_pending_reports_of_another_instance_are_not_sent_into_this_ones_stream(tmp_path: Path) -> None:
    """A state file baked into the image a node booted from holds the build host's pending reports: they
    are not this node's, and go nowhere."""
    layout = NodeLayout(tmp_path)
    layout.shipper_state.parent.mkdir(parents=True, exist_ok=True)
    ours = json.dumps({"kind": "script_run", "instance_id": "i-0123456789abcdef0", "script": "a"})
    theirs = json.dumps({"kind": "script_run", "instance_id": "i-0fedcba9876543210", "script": "b"})
    _State(pending=[theirs, ours]).save(layout.shipper_state)
    identity = ShipperIdentity("pcs_abc123de45", "pcs_abcdef01", "i-0123456789abcdef0", None)
    shipper = Shipper(layout, identity, sink=None)  # type: ignore[arg-type]  # nothing is sent here
    assert shipper.state.pending == [ours]


def test_a_full_disk_that_refuses_the_shippers_state_stops_no_report(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """A full disk is often why a script failed: the shipper cannot save where it is, and the TERMINATE
    failure's report goes out all the same (a restart may send some again; node_reports stores them once)."""
    layout = booted(tmp_path)

    def full_disk(*_: object, **__: object) -> None:
        raise OSError(errno.ENOSPC, "No space left on device")

    monkeypatch.setattr(lifeguard.node.shipper, "atomic_write", full_disk)
    sink = ListSink()
    deadline = time.monotonic() + 5
    Shipper(layout, SHIPPER_IDENTITY, sink).run(
        poll_interval=0.01, stop=lambda: len(sink.messages) >= 3 or time.monotonic() > deadline
    )
    assert [json.loads(m)["script"] for m in sink.messages] == [
        "ok-first",
        "fail-terminate",
        "record-after-fail",
    ]
    assert capsys.readouterr().err.count("its state cannot be saved") == 1


class ThrottledOnce:
    """CloudWatch Logs whose second PutLogEvents is throttled."""

    class exceptions:
        class ResourceNotFoundException(Exception):
            pass

        class ResourceAlreadyExistsException(Exception):
            pass

    def __init__(self) -> None:
        self.stream: list[str] = []
        self.calls = 0

    def put_log_events(self, logEvents: list[dict[str, object]], **_: object) -> dict[str, object]:
        self.calls += 1
        if self.calls == 2:
            raise RuntimeError("ThrottlingException: Rate exceeded")
        self.stream += [str(event["message"]) for event in logEvents]
        return {}

    def get_log_events(self, limit: int, **_: object) -> dict[str, object]:
        return {"events": [{"message": m} for m in self.stream[-limit:]]}


def test_a_batch_delivered_before_a_failed_one_is_not_sent_again(tmp_path: Path) -> None:
    """A backlog of two PutLogEvents batches (log tails of control characters, ~24 KiB each escaped) whose
    second is throttled: the retry sends the second only."""
    layout = NodeLayout(tmp_path)
    pending = [
        json.dumps(
            {
                "kind": "script_run",
                "instance_id": SHIPPER_IDENTITY.instance_id,
                "script": f"s{n}",
                "log_tail": "\x01" * 4000,
            }
        )
        for n in range(60)
    ]
    _State(pending=pending).save(layout.shipper_state)
    logs = ThrottledOnce()
    shipper = Shipper(layout, SHIPPER_IDENTITY, CloudWatchSink("g", SHIPPER_IDENTITY.stream, logs))
    with pytest.raises(RuntimeError):
        shipper.poll()
    shipper.poll()
    assert logs.stream == pending


class Timed(ThrottledOnce):
    """CloudWatch Logs that takes every put and keeps each event's time."""

    def __init__(self) -> None:
        super().__init__()
        self.times: list[int] = []

    def put_log_events(self, logEvents: list[dict[str, object]], **_: object) -> dict[str, object]:
        self.times += [int(str(event["timestamp"])) for event in logEvents]
        return {}


def test_a_clock_stepped_back_by_chrony_dates_the_next_reports_by_the_corrected_clock() -> None:
    """A node whose clock ran an hour ahead until chrony stepped it back: the reports after the step carry
    the corrected time, not the hour-ahead one of the last report (CloudWatch Logs refuses events more than
    2 hours ahead); a small step back still keeps the stream's order."""
    now = [1_792_544_247.0 + 3600]
    logs = Timed()
    sink = CloudWatchSink("g", SHIPPER_IDENTITY.stream, logs, clock=lambda: now[0])
    sink.put(["before the step"])
    now[0] -= 3600  # chrony steps the clock back an hour
    sink.put(["after the step"])
    now[0] -= 1  # a second back: jitter, not a step
    sink.put(["jitter"])
    assert logs.times == [1_792_547_847_000, 1_792_544_247_000, 1_792_544_247_000]


def _report_of(script: str) -> str:
    return json.dumps({"kind": "script_run", "instance_id": SHIPPER_IDENTITY.instance_id, "script": script})


@pytest.mark.parametrize("pending", [["fail-terminate"], ["ok-first", "fail-terminate"]])
def test_a_restart_after_the_first_report_of_its_batch_went_out_sends_it_not_again(
    tmp_path: Path, pending: list[str]
) -> None:
    """The shipper stopped after PutLogEvents took the first of its pending reports: the restart finds it
    in the stream (a prefix of one) and sends the rest only (README: a restart neither loses nor repeats)."""
    layout = NodeLayout(tmp_path)
    reports = [_report_of(name) for name in pending]
    _State(pending=reports).save(layout.shipper_state)
    sink = ListSink()
    sink.messages = [_report_of("earlier"), reports[0]]
    Shipper(layout, SHIPPER_IDENTITY, sink, boot=lambda: None).poll()
    assert sink.messages == [_report_of("earlier"), *reports]


def test_the_last_look_ships_a_terminate_failure_whose_log_is_gone_without_waiting_for_it(
    tmp_path: Path,
) -> None:
    """SIGTERM within a second of a TERMINATE failure whose script log is not there (a full disk, the log
    folder taken): the last look ships it from executor.log rather than wait for an end marker that never
    comes, or the report naming the culprit goes down with the node (DESIGN: shipped before it goes)."""
    layout = booted(tmp_path)
    layout.script_log("nodeBootstrapped", "fail-terminate").unlink()
    sink = ListSink()
    Shipper(layout, SHIPPER_IDENTITY, sink, boot=lambda: None).last_look(2.0)
    shipped = [json.loads(m) for m in sink.messages]
    assert [(r["script"], r["outcome"]) for r in shipped] == [
        ("ok-first", "succeeded"),
        ("fail-terminate", "failed"),
        ("record-after-fail", "skipped"),
    ]
    assert shipped[1]["exit_code"] == 1


class ReadDenied(ThrottledOnce):
    """CloudWatch Logs that takes every put but refuses GetLogEvents (a role without it, an SCP)."""

    def put_log_events(self, logEvents: list[dict[str, object]], **_: object) -> dict[str, object]:
        self.stream += [str(event["message"]) for event in logEvents]
        return {}

    def get_log_events(self, limit: int, **_: object) -> dict[str, object]:
        raise PermissionError("AccessDeniedException: not authorized to perform logs:GetLogEvents")


def test_a_stream_whose_tail_cannot_be_read_holds_back_no_report(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # A restart with a report pending reads the stream's tail first, not to send it twice: a refused read
    # failed every poll, and every later report (a TERMINATE failure's among them) stayed on the node.
    layout = NodeLayout(tmp_path)
    pending = [json.dumps({"kind": "script_run", "instance_id": SHIPPER_IDENTITY.instance_id, "script": "a"})]
    _State(pending=pending).save(layout.shipper_state)
    logs = ReadDenied()
    shipper = Shipper(layout, SHIPPER_IDENTITY, CloudWatchSink("g", SHIPPER_IDENTITY.stream, logs))
    assert shipper.poll() == 1
    assert logs.stream == pending
    said = capsys.readouterr().err
    assert "the stream's last reports cannot be read (PermissionError: AccessDeniedException" in said
    assert "the 1 pending report(s) are sent again" in said


@settings(max_examples=500, deadline=None)
@given(
    text=st.lists(
        st.sampled_from([b"x", b"[", b"\n", b"[start ", b"[end ", b"[sta", b"[en", b"d "]), max_size=40
    ).map(b"".join),
    offset=st.integers(min_value=0, max_value=10),
    chunk=st.integers(min_value=1, max_value=9),
    longest=st.integers(min_value=5, max_value=14),
)
def test_the_marker_scan_gives_every_complete_marker_like_line_and_no_other(
    text: bytes, offset: int, chunk: int, longest: int
) -> None:
    # Script output is passed over by one search, in chunks (read line by line, 100 MB took the shipper
    # 0.6-10 s; looked at line by line when it began with `[`, 100 MB of `[INFO] …` 2.2 s): whatever the
    # chunks cut, the lines it gives are those a line-by-line read finds.
    head = b"y" * (offset - 1) + b"\n" if offset else b""
    expected, at = [], len(head)
    for line in text.splitlines(keepends=True):
        at += len(line)
        if line.endswith(b"\n") and line.startswith((b"[start ", b"[end ")) and len(line) <= longest + 1:
            expected.append((line, at))
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(lifeguard.node.shipper, "_SCAN_CHUNK_BYTES", chunk)
        patch.setattr(lifeguard.node.shipper, "_MARKER_MAX_BYTES", longest)
        file = io.BytesIO(head + text)
        file.seek(len(head))
        assert list(lifeguard.node.shipper._marker_lines(file, len(head))) == expected


# -- boots, under PCS's own agent (which writes no `boot started` record) --

FIRST_RUN, REBOOT, SECOND_RUN = 1792543659, 1792543740, 1792543773  # the article's, and a reboot between


def _agent_record(at: float, message: str = "script completed") -> str:
    when = datetime.fromtimestamp(at, UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ")
    record = {"timestamp": when, "level": "INFO", "message": message}
    return json.dumps({**record, "stage": "nodeBootstrapped", "script": "record-every-boot"}) + "\n"


def _agent_run(layout: NodeLayout, at: int) -> None:
    """One EVERY_BOOT run as PCS's agent logs it (the article's): its script log block, then its record."""
    layout.stage_dir("nodeBootstrapped").mkdir(parents=True, exist_ok=True)
    with layout.script_log("nodeBootstrapped", "record-every-boot").open("a") as log:
        log.write(f'[start record-every-boot args=["bootstrapped-every-boot"] @ {at}]\n')
        log.write(f"recorded bootstrapped-every-boot\n[end record-every-boot exit=0 @ {at}]\n")
    with layout.executor_log.open("a") as log:
        log.write(_agent_record(at))


def _shipped(
    layout: NodeLayout, boot: KernelBoot, instance: str = SHIPPER_IDENTITY.instance_id
) -> list[tuple[int, int, bool]]:
    sink = ListSink()
    identity = ShipperIdentity(
        SHIPPER_IDENTITY.cluster_id, SHIPPER_IDENTITY.compute_node_group_id, instance, None
    )
    Shipper(layout, identity, sink, boot=lambda: boot).run(once=True)
    return [(r["started_at"], r["boot"], r["first_boot"]) for r in map(json.loads, sink.messages)]


FIRST_BOOT, SECOND_BOOT = KernelBoot("boot-one", FIRST_RUN - 30), KernelBoot("boot-two", REBOOT)


def test_a_reboot_under_pcs_agent_is_a_reboot_in_the_reports(tmp_path: Path) -> None:
    """The article's EVERY_BOOT script after `scontrol reboot` ran with PCS_IS_FIRST_BOOT=0: its report
    says boot 2, not the first boot again (the kernel's boot id tells the boots apart)."""
    layout = NodeLayout(tmp_path)
    _agent_run(layout, FIRST_RUN)
    assert _shipped(layout, FIRST_BOOT) == [(FIRST_RUN, 1, True)]
    _agent_run(layout, SECOND_RUN)
    assert _shipped(layout, SECOND_BOOT) == [(SECOND_RUN, 2, False)]
    assert _shipped(layout, SECOND_BOOT) == []  # the same boot's shipper started again: no boot 3
    _agent_run(layout, SECOND_RUN + 600)
    # Restarted within that boot after the clock was stepped (btime is the clock less the uptime).
    assert _shipped(layout, SECOND_BOOT._replace(started_at=REBOOT + 120)) == [(SECOND_RUN + 600, 2, False)]


def test_runs_logged_before_a_reboot_and_shipped_after_it_are_of_the_boot_before(tmp_path: Path) -> None:
    layout = NodeLayout(tmp_path)
    identity = SHIPPER_IDENTITY.instance_id
    lifeguard.node.shipper._State(boot_id=FIRST_BOOT.boot_id, instance_id=identity).save(layout.shipper_state)
    _agent_run(layout, FIRST_RUN)  # the node went down before it was shipped
    _agent_run(layout, SECOND_RUN)
    assert _shipped(layout, SECOND_BOOT) == [(FIRST_RUN, 1, True), (SECOND_RUN, 2, False)]


def test_the_first_boot_of_an_image_with_pcs_logs_in_it_is_boot_1(tmp_path: Path) -> None:
    """The image was made from a node that ran PCS's agent (its log is in it) but no shipper: its runs are
    not this instance's boots, and this instance's first boot is its first."""
    layout = NodeLayout(tmp_path)
    _agent_run(layout, FIRST_RUN)
    _agent_run(layout, SECOND_RUN)
    assert _shipped(layout, SECOND_BOOT) == [(FIRST_RUN, 1, True), (SECOND_RUN, 1, True)]


def test_a_count_of_boots_baked_into_the_image_is_not_this_instances(tmp_path: Path) -> None:
    layout = NodeLayout(tmp_path)
    _agent_run(layout, FIRST_RUN)
    assert _shipped(layout, FIRST_BOOT, instance="i-0baked0000000000") == [(FIRST_RUN, 1, True)]
    _agent_run(layout, SECOND_RUN)
    assert _shipped(layout, SECOND_BOOT) == [(SECOND_RUN, 1, True)]  # this instance's first boot


@pytest.mark.parametrize("how", ["once", "last look"])
def test_a_failure_after_a_megabyte_of_records_without_a_report_is_shipped_in_one_look(
    tmp_path: Path, how: str
) -> None:
    """executor.log read a megabyte at a time: a read that held no report ended the look, so `--once` and
    the last look at a shutdown (after a TERMINATE failure) shipped nothing, and the place it read to was
    not saved (a restart read the same megabyte again)."""
    layout = NodeLayout(tmp_path)
    layout.stage_dir("nodeBootstrapped").mkdir(parents=True)
    filler = _agent_record(FIRST_RUN, "Reusing cached script (CACHE_ONCE)")
    layout.executor_log.write_text(filler * (2 * 1024 * 1024 // len(filler) + 10))
    layout.script_log("nodeBootstrapped", "record-every-boot").write_text("")
    _agent_failure(layout, FIRST_RUN + 5, "mount: /shared: no such host\n")
    sink = ListSink()
    shipper = Shipper(layout, SHIPPER_IDENTITY, sink, boot=lambda: FIRST_BOOT)
    if how == "once":
        shipper.run(once=True)
    else:
        shipper.last_look()
    [report] = map(json.loads, sink.messages)
    assert (report["outcome"], report["log_tail"]) == ("failed", "mount: /shared: no such host\n")
    assert _State.load(layout.shipper_state).executor_offset == layout.executor_log.stat().st_size


def test_a_look_that_reads_on_past_records_without_a_report_saves_where_it_got_to(tmp_path: Path) -> None:
    layout = NodeLayout(tmp_path)
    filler = _agent_record(FIRST_RUN, "Reusing cached script (CACHE_ONCE)")
    layout.executor_log.parent.mkdir(parents=True)
    layout.executor_log.write_text(filler * (1536 * 1024 // len(filler)))
    Shipper(layout, SHIPPER_IDENTITY, ListSink(), boot=lambda: FIRST_BOOT).run(once=True)
    assert _State.load(layout.shipper_state).executor_offset == layout.executor_log.stat().st_size


@pytest.mark.parametrize("left", ['{"timestamp": "2026-10-21T00:57:2', "\0" * 4096], ids=["torn", "nuls"])
def test_a_record_written_after_what_a_killed_writer_left_on_its_line_is_still_read(
    tmp_path: Path, left: str
) -> None:
    """A reboot or a power loss mid-write leaves a torn record, or NULs, with no line break: the next boot's
    first record was glued to it, read as one line that is no JSON, and skipped (a TERMINATE failure's
    too)."""
    layout = NodeLayout(tmp_path)
    layout.stage_dir("nodeBootstrapped").mkdir(parents=True)
    layout.executor_log.write_text(_agent_record(FIRST_RUN) + left)
    layout.script_log("nodeBootstrapped", "record-every-boot").write_text("")
    _agent_failure(layout, FIRST_RUN + 5, "mount: /shared: no such host\n")
    sink = ListSink()
    Shipper(layout, SHIPPER_IDENTITY, sink, boot=lambda: FIRST_BOOT).run(once=True)
    assert [(r["outcome"], r["log_tail"]) for r in map(json.loads, sink.messages)] == [
        ("succeeded", ""),
        ("failed", "mount: /shared: no such host\n"),
    ]


def test_a_line_of_many_objects_is_no_glued_record_and_is_looked_at_a_bounded_number_of_times() -> None:
    from lifeguard.node.shipper import _glued_record

    assert _glued_record(b'junk{"message": "script completed"}\n') == {"message": "script completed"}
    assert _glued_record(b'junk{"a": 1}{"b": 2} tail\n') is None
    deep = b"x" + b'{"a": 1}' * 100 + b'{"message": "x"}'
    assert _glued_record(deep) is None  # past the first 16 tries


def _agent_failure(layout: NodeLayout, at: int, output: str, *, log: str = "replace") -> None:
    """A STOP_SEQUENCE failure of record-every-boot as PCS's agent logs it (no exit code, no place in the
    log): its script log written anew (`replace`: removed, then written; `rename`: a new file moved over
    it), then its record."""
    path = layout.script_log("nodeBootstrapped", "record-every-boot")
    block = f"[start record-every-boot args=[] @ {at}]\n{output}[end record-every-boot exit=1 @ {at}]\n"
    if log == "rename":
        path.with_suffix(".new").write_text(block)
        path.with_suffix(".new").replace(path)
    else:
        path.unlink()
        path.write_text(block)
    with layout.executor_log.open("a") as file:
        file.write(_agent_record(at, "lifecycle script failed; stopping remaining scripts"))


def test_a_record_no_report_can_be_made_of_holds_up_none_after_it(tmp_path: Path) -> None:
    """A record whose error held a lone surrogate (a JSON escape no UTF-8 can carry) raised in every look,
    was taken for a failed delivery and tried again for ever: the TERMINATE failure after it never left."""
    layout = NodeLayout(tmp_path)
    layout.stage_dir("nodeBootstrapped").mkdir(parents=True)
    when = datetime.fromtimestamp(FIRST_RUN, UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ")
    odd = {
        "timestamp": when,
        "level": "ERROR",
        "message": "lifecycle script failed; stopping remaining scripts",
    }
    odd |= {"stage": "nodeBootstrapped", "script": "fetch-tools", "error": "\udce9 download failed"}
    layout.executor_log.write_text(json.dumps(odd) + "\n")
    layout.script_log("nodeBootstrapped", "record-every-boot").write_text("")
    _agent_failure(layout, FIRST_RUN + 5, "mount: /shared: no such host\n")
    sink = ListSink()
    Shipper(layout, SHIPPER_IDENTITY, sink, boot=lambda: FIRST_BOOT).run(once=True)
    reports = [json.loads(m) for m in sink.messages]
    assert [(r["script"], r["log_tail"]) for r in reports] == [
        ("fetch-tools", "? download failed"),
        ("record-every-boot", "mount: /shared: no such host\n"),
    ]
    assert all(isinstance(parse_node_report(m), NodeReport) for m in sink.messages)


def test_a_record_that_trips_the_shipper_is_passed_over_and_said(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """Whatever a record makes the shipper raise (a fault of its own, a value no check foresaw) was taken for
    a failed delivery, tried at every look for ever, and held back every report after it."""
    layout = NodeLayout(tmp_path)
    layout.stage_dir("nodeBootstrapped").mkdir(parents=True)
    layout.executor_log.write_text(
        _agent_record(FIRST_RUN, "lifecycle script failed; stopping remaining scripts")
    )
    layout.script_log("nodeBootstrapped", "record-every-boot").write_text("")
    _agent_failure(layout, FIRST_RUN + 5, "mount: /shared: no such host\n")
    report = Shipper._report

    def trips_on_the_first(self: Shipper, record: Any, *rest: Any) -> Any:
        if _epoch_of(record) == FIRST_RUN:
            raise KeyError("started_at")
        return report(self, record, *rest)

    monkeypatch.setattr(Shipper, "_report", trips_on_the_first)
    sink = ListSink()
    shipper = Shipper(layout, SHIPPER_IDENTITY, sink, boot=lambda: FIRST_BOOT)
    shipper.run(once=True)
    assert [json.loads(m)["log_tail"] for m in sink.messages] == ["mount: /shared: no such host\n"]
    assert shipper.skipped_lines == 1
    [said] = capsys.readouterr().err.splitlines()
    assert said == f"lifeguard-node ship: passed over a record of {layout.executor_log} at byte 0: " + (
        "KeyError: 'started_at'"
    )


def test_a_fault_that_may_pass_is_tried_again_not_the_record_passed_over(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A look that failed for what is not the record's (too many open files while the PCS model is read)
    is tried again, as a failed delivery is: the TERMINATE failure goes out at the next look."""
    from lifeguard.errors import ServiceModelError

    layout = NodeLayout(tmp_path)
    layout.stage_dir("nodeBootstrapped").mkdir(parents=True)
    layout.script_log("nodeBootstrapped", "record-every-boot").write_text("")
    _agent_failure(layout, FIRST_RUN, "mount: /shared: no such host\n")
    name_ok = lifeguard.node.shipper._script_name
    failures = [ServiceModelError("[Errno 24] Too many open files")]

    def flaky(name: str) -> bool:
        if failures:
            raise failures.pop()
        return name_ok(name)

    monkeypatch.setattr(lifeguard.node.shipper, "_script_name", flaky)
    sink = ListSink()
    shipper = Shipper(layout, SHIPPER_IDENTITY, sink, end_marker_grace_seconds=0, boot=lambda: FIRST_BOOT)
    with pytest.raises(ServiceModelError):
        shipper.poll()
    assert shipper.poll() == 1
    assert [json.loads(m)["log_tail"] for m in sink.messages] == ["mount: /shared: no such host\n"]


def _epoch_of(record: Any) -> int:
    return int(
        datetime.strptime(record["timestamp"], "%Y-%m-%dT%H:%M:%S.%fZ").replace(tzinfo=UTC).timestamp()
    )


@pytest.mark.parametrize("written_ago", [0.0, 5.0], ids=["just written", "written before a look"])
def test_a_run_whose_log_ends_after_its_record_waits_for_it_only_while_the_record_is_new(
    tmp_path: Path, written_ago: float
) -> None:
    """The agent's record may come before its script log's end: a record written just now waits for it
    (up to the grace), so the report carries the run's output; one written before the look began (a look
    after a restart, a record read among others) does not wait another grace of its own."""
    layout = NodeLayout(tmp_path)
    layout.stage_dir("nodeBootstrapped").mkdir(parents=True)
    at = time.time() - written_ago
    log = layout.script_log("nodeBootstrapped", "record-every-boot")
    log.write_text(f"[start record-every-boot args=[] @ {int(at)}]\nmount: /shared: no such host\n")
    layout.executor_log.write_text(_agent_record(at, "lifecycle script failed; stopping remaining scripts"))
    looked = [0.0]
    sink = ListSink()
    shipper = Shipper(layout, SHIPPER_IDENTITY, sink, clock=lambda: looked[0], boot=lambda: FIRST_BOOT)
    first = shipper.poll()
    with log.open("a") as file:
        file.write(f"[end record-every-boot exit=1 @ {int(at)}]\n")
    looked[0] = 0.3
    shipper.poll()
    [report] = map(json.loads, sink.messages)
    if written_ago:
        assert first == 1
        assert report["log_tail"] == ""  # the run not found: what the record says (nothing, here)
    else:
        assert first == 0
        assert report["log_tail"] == "mount: /shared: no such host\n"


def _tails(layout: NodeLayout, boot: KernelBoot) -> list[tuple[int, str]]:
    sink = ListSink()
    Shipper(layout, SHIPPER_IDENTITY, sink, boot=lambda: boot).run(once=True)
    return [(r["started_at"], r["log_tail"]) for r in map(json.loads, sink.messages)]


@pytest.mark.parametrize(
    ("log", "first_output"), [("replace", "ok\n" * 1700), ("replace", ""), ("rename", "")]
)
def test_a_script_log_written_anew_between_boots_is_read_from_its_start(
    tmp_path: Path, log: str, first_output: str
) -> None:
    """A clean-up between boots removes a script's log, and its next run writes a new one: read from where
    the old file was read to, the run is not found (the new file is shorter) or found mid-output (longer),
    and its report lost the output that names the failure. The new file is read from its start, whether it
    is shorter or longer, a file moved over the log or one written in its place (on ext4 it takes the
    removed one's inode: neither its length nor its inode tells it from the old)."""
    layout = NodeLayout(tmp_path)
    _agent_run(layout, FIRST_RUN)
    if first_output:  # a first run that wrote more than the next will
        path = layout.script_log("nodeBootstrapped", "record-every-boot")
        path.write_text(path.read_text().replace("recorded", first_output + "recorded"))
    assert [at for at, _ in _tails(layout, FIRST_BOOT)] == [FIRST_RUN]
    output = "mount.lustre: fs-0123 not found\n" * (1 if first_output else 40)
    _agent_failure(layout, SECOND_RUN, output, log=log)
    assert _tails(layout, SECOND_BOOT) == [(SECOND_RUN, output)]


def test_script_log_offsets_baked_into_the_image_are_not_read_in_this_instances_logs(tmp_path: Path) -> None:
    """The image's state file holds the offsets its builder's script logs were read to; this instance's
    logs are others, shorter: their runs are read from their start, with their output."""
    layout = NodeLayout(tmp_path)
    baked = _State(
        script_offsets={"nodeBootstrapped/record-every-boot.log": 20_000},
        boot=3,
        first_boot=False,
        boot_id="builder",
        instance_id="i-0baked0000000000",
    )
    baked.save(layout.shipper_state)
    layout.stage_dir("nodeBootstrapped").mkdir(parents=True)
    layout.script_log("nodeBootstrapped", "record-every-boot").touch()
    _agent_failure(layout, FIRST_RUN, "mount.lustre: fs-0123 not found\n")
    assert _tails(layout, FIRST_BOOT) == [(FIRST_RUN, "mount.lustre: fs-0123 not found\n")]


def test_a_records_time_is_read_whatever_its_fraction_as_on_the_nodes_python() -> None:
    """Python 3.9's fromisoformat takes a fraction of 3 or 6 digits only; agents write others too."""
    for written in ("2026-10-21T00:47:39Z", "2026-10-21T00:47:39.5Z", "2026-10-21T00:47:39.551852123Z"):
        assert lifeguard.node.shipper._epoch_seconds(written) == FIRST_RUN


# -- what executor.log holds is bounded before it becomes a report --


def _executor_record(**fields: object) -> str:
    at = datetime.fromtimestamp(FIRST_RUN, UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ")
    record = {"timestamp": at, "level": "ERROR", "message": "lifecycle script failed; terminating node"}
    return json.dumps({**record, "stage": "nodeBootstrapped", "on_error": "Terminate", **fields}) + "\n"


def test_a_record_no_executor_writes_is_passed_over_and_holds_up_no_report(tmp_path: Path) -> None:
    """Any process on the node may write executor.log. A record naming a script by 170,000 characters
    became a report of 2 MB, over PutLogEvents' 1 MiB: refused at every poll, it held up every report after
    it, the TERMINATE one too. A record of no stage or no name PCS takes is passed over; a value beyond
    what the controller takes is left out of the report, never sent to be refused there."""
    layout = NodeLayout(tmp_path)
    layout.executor_log.parent.mkdir(parents=True, exist_ok=True)
    with layout.executor_log.open("w") as log:
        log.write(_executor_record(script="\u4e00" * 170_000, exit_code=1))
        log.write(_executor_record(script="x" * 65, exit_code=1))
        log.write(_executor_record(stage="nodeSomewhere", script="fail-terminate", exit_code=1))
        log.write(_executor_record(stage=["nodeBootstrapped"], script="fail-terminate", exit_code=1))
        log.write(
            _executor_record(
                script="fail-terminate",
                exit_code=2**40,
                started_at=10**30,
                ended_at=-5,
                script_sha256="Z" * 5000,
                error="exit status 1",
            )
        )
    sink = ListSink()
    identity = dataclasses.replace(SHIPPER_IDENTITY, node_id="lca static 1\n" * 400)
    shipper = Shipper(layout, identity, sink, end_marker_grace_seconds=0, boot=lambda: FIRST_BOOT)
    shipper.run(once=True)
    assert shipper.skipped_lines == 4
    [message] = sink.messages
    report = parse_node_report(message)  # what the controller takes
    assert isinstance(report, NodeReport), report
    assert (report.script, report.outcome, report.on_error) == ("fail-terminate", "failed", "TERMINATE")
    assert (report.exit_code, report.node_id, report.script_sha256) == (None, None, None)
    assert report.started_at == report.ended_at == FIRST_RUN  # the record's own time
    assert len(message) < 2_000


def test_a_carriage_return_in_executor_log_holds_up_no_report(tmp_path: Path) -> None:
    """A line with a lone \\r (a process's progress bar written into executor.log) was split there, its
    first piece taken for a record still being written: the shipper waited on it for ever, the TERMINATE
    report after it too."""
    layout = NodeLayout(tmp_path)
    layout.executor_log.parent.mkdir(parents=True, exist_ok=True)
    with layout.executor_log.open("w", newline="") as log:
        log.write("downloading 10%\rdownloading 100%\n")
        log.write(_executor_record(script="fail-terminate", exit_code=1))
    sink = ListSink()
    shipper = Shipper(layout, SHIPPER_IDENTITY, sink, end_marker_grace_seconds=0, boot=lambda: FIRST_BOOT)
    shipper.run(once=True)
    assert [json.loads(m)["script"] for m in sink.messages] == ["fail-terminate"]
    assert shipper.skipped_lines == 1


def _failure_at(at: int, script: str) -> str:
    when = datetime.fromtimestamp(at, UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ")
    return _executor_record(timestamp=when, script=script, exit_code=1)


def _scripts_shipped(shipper: Shipper, sink: ListSink) -> list[str]:
    shipper.run(once=True)
    shipped = [json.loads(m)["script"] for m in sink.messages]
    sink.messages.clear()
    return shipped


def _first_shipped(tmp_path: Path) -> tuple[NodeLayout, ListSink, Shipper]:
    """A node whose executor.log holds one failure, shipped."""
    layout = NodeLayout(tmp_path)
    layout.executor_log.parent.mkdir(parents=True, exist_ok=True)
    layout.executor_log.write_text(_failure_at(FIRST_RUN, "first"))
    sink = ListSink()
    shipper = Shipper(layout, SHIPPER_IDENTITY, sink, end_marker_grace_seconds=0, boot=lambda: FIRST_BOOT)
    assert _scripts_shipped(shipper, sink) == ["first"]
    return layout, sink, shipper


def test_executor_log_emptied_and_refilled_in_place_is_read_from_its_start(tmp_path: Path) -> None:
    """logrotate's copytruncate keeps the inode: a log written past the saved offset while the shipper was
    down was read from that offset, and the TERMINATE record before it was never shipped."""
    layout, sink, _ = _first_shipped(tmp_path)
    inode = layout.executor_log.stat().st_ino
    with layout.executor_log.open("r+") as log:  # copytruncate: the same file, emptied, then written
        log.truncate(0)
        log.write(_failure_at(FIRST_RUN + 60, "fail-terminate") + _failure_at(FIRST_RUN + 61, "after-it"))
    assert layout.executor_log.stat().st_ino == inode
    restarted = Shipper(layout, SHIPPER_IDENTITY, sink, end_marker_grace_seconds=0, boot=lambda: FIRST_BOOT)
    assert _scripts_shipped(restarted, sink) == ["fail-terminate", "after-it"]
    assert _scripts_shipped(restarted, sink) == []  # and not again


def test_executor_log_copied_and_emptied_during_an_outage_is_read_from_the_copy_first(tmp_path: Path) -> None:
    """While a batch is pending (CloudWatch Logs out of reach) the shipper reads no further; logrotate's
    copytruncate then copied executor.log beside it (executor.log.1) and emptied it in place. The records
    logged in the outage were only in the copy, and were never shipped: the TERMINATE one among them."""
    layout, sink, shipper = _first_shipped(tmp_path)
    down = Unreachable()
    shipper.sink = down
    with layout.executor_log.open("a") as log:
        log.write(_failure_at(FIRST_RUN + 10, "in-the-outage"))
    with pytest.raises(DeliveryFailedError):
        shipper.run(once=True)
    with layout.executor_log.open("a") as log:
        log.write(_failure_at(FIRST_RUN + 20, "fail-terminate"))
    copy = layout.executor_log.with_name("executor.log.1")
    copy.write_bytes(layout.executor_log.read_bytes())  # copytruncate: a copy, then the log emptied
    with layout.executor_log.open("r+") as log:
        log.truncate(0)
        log.write(_failure_at(FIRST_RUN + 30, "after-the-rotation"))
    shipper.sink = sink
    assert _scripts_shipped(shipper, sink) == ["in-the-outage", "fail-terminate", "after-the-rotation"]
    assert _scripts_shipped(shipper, sink) == []


def test_executor_log_renamed_by_a_rotation_is_read_to_its_end_before_the_new_one(tmp_path: Path) -> None:
    """Records written to the log before it was renamed (executor.log.1) and not yet read are shipped, then
    the new log's from its start."""
    layout, sink, shipper = _first_shipped(tmp_path)
    with layout.executor_log.open("a") as log:
        log.write(_failure_at(FIRST_RUN + 60, "fail-terminate"))
    layout.executor_log.rename(layout.executor_log.with_name("executor.log.1"))
    layout.executor_log.write_text(_failure_at(FIRST_RUN + 120, "in-the-new-log"))
    assert _scripts_shipped(shipper, sink) == ["fail-terminate", "in-the-new-log"]
    assert _scripts_shipped(shipper, sink) == []


def test_a_skipped_script_is_reported_under_its_own_on_error(tmp_path: Path) -> None:
    """A script skipped after a TERMINATE failure was reported as TERMINATE whatever its onError: its
    executor.log record left it out."""
    layout = NodeLayout(tmp_path)

    def script(name: str, location: str, on_error: str) -> dict[str, object]:
        return {"name": name, "scriptSource": {"scriptLocation": location}, "onError": on_error}

    ok, fail = "s3://lca-scripts-example/scripts/ok.sh", "s3://lca-scripts-example/scripts/fail.sh"
    config = {
        "stages": {
            "nodeBootstrapped": [script("fail-terminate", fail, "TERMINATE"), script("ok3", ok, "CONTINUE")],
            "nodeReady": [script("ready-check", ok, "STOP_SEQUENCE")],
        }
    }
    fetcher = BucketFetcher({ok: PASSING, fail: FAILING})
    identity = NodeIdentity("pcs_abc123de45", "lca", "pcs_abcdef01", "lca-static", "lca-static-1")
    executor = Executor(config, layout, identity, fetchers={"s3": fetcher}, fetch_backoff_seconds=0)
    assert executor.boot().exit_code == EXIT_TERMINATE
    sink = ListSink()
    Shipper(layout, SHIPPER_IDENTITY, sink).run(once=True)
    reports = [json.loads(message) for message in sink.messages]
    assert [(r["script"], r["outcome"], r["on_error"]) for r in reports] == [
        ("fail-terminate", "failed", "TERMINATE"),
        ("ok3", "skipped", "CONTINUE"),
        ("ready-check", "skipped", "STOP_SEQUENCE"),
    ]


def test_the_shippers_bounds_are_the_controllers() -> None:
    """The node's Python cannot import `lifeguard.bounds`: the shipper holds its own copies."""
    from lifeguard import bounds
    from lifeguard.node import shipper

    assert "^" + shipper._NODE_NAME.pattern + "$" == bounds.NODE_NAME_PATTERN
    assert shipper._EPOCH_S_MAX == bounds.EPOCH_S_MAX
    assert "^" + shipper._INSTANCE_ID.pattern + "$" == bounds.INSTANCE_ID_PATTERN
    assert bounds.PCS_ID_PATTERN == "^pcs_[a-zA-Z0-9]+$"  # and at most ID_MAX_CHARS long
    assert shipper._PCS_ID.pattern == f"pcs_[a-zA-Z0-9]{{1,{bounds.ID_MAX_CHARS - 4}}}"


@pytest.mark.parametrize("planted", ["fifo", "link to /dev/zero", "directory"])
def test_a_script_log_that_is_no_regular_file_holds_up_no_report(tmp_path: Path, planted: str) -> None:
    """A FIFO in a script log's place held the shipper in `open` forever, and a link to /dev/zero in an
    endless read: the TERMINATE report after it was never shipped. Only a regular file, not reached
    through a link, is read; the report goes without the log's tail."""
    layout = NodeLayout(tmp_path)
    stage = layout.stage_dir("nodeBootstrapped")
    stage.mkdir(parents=True)
    log = layout.script_log("nodeBootstrapped", "fail-terminate")
    if planted == "fifo":
        os.mkfifo(log)
    elif planted == "directory":
        log.mkdir()
    else:
        log.symlink_to("/dev/zero")
    with layout.executor_log.open("w") as file:
        file.write(_executor_record(script="fail-terminate", exit_code=1, error="exit status 1"))
    sink = ListSink()
    shipper = Shipper(layout, SHIPPER_IDENTITY, sink, end_marker_grace_seconds=0, boot=lambda: FIRST_BOOT)
    running = threading.Thread(target=shipper.run, kwargs={"once": True}, daemon=True)
    running.start()
    running.join(timeout=20)
    assert not running.is_alive(), "the shipper is held by the planted log"
    [report] = map(json.loads, sink.messages)
    assert (report["script"], report["outcome"], report["exit_code"]) == ("fail-terminate", "failed", 1)


@pytest.mark.parametrize("planted", ["symlink", "dangling symlink", "symlink to an empty file", "fifo"])
def test_an_executor_log_that_is_no_regular_file_is_said_once(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], planted: str
) -> None:
    """A symlink (or a FIFO) in executor.log's place is not read (logs never are through one), and nothing
    said so: no report went out, `ship --once` said there was nothing new, and a TERMINATE failure in it
    was lost without a word. It is said on stderr once, not at every poll, and again once it changes."""
    layout = NodeLayout(tmp_path)
    layout.executor_log.parent.mkdir(parents=True)
    record = _executor_record(script="fail-terminate", exit_code=1, error="exit status 1")
    real = tmp_path / "elsewhere.log"
    if planted == "fifo":
        os.mkfifo(layout.executor_log)
    else:
        if planted != "dangling symlink":
            real.write_text("" if planted == "symlink to an empty file" else record)
        layout.executor_log.symlink_to(real)
    sink = ListSink()
    shipper = Shipper(layout, SHIPPER_IDENTITY, sink, end_marker_grace_seconds=0, boot=lambda: FIRST_BOOT)
    for _ in range(3):
        shipper.poll()
    said = capsys.readouterr().err.splitlines()
    assert said == [
        f"lifeguard-node ship: {layout.executor_log} is not a regular file (a symlink, a FIFO, a directory): "
        "it is not read; no report of it goes out"
    ]
    assert sink.messages == []
    layout.executor_log.unlink()
    layout.executor_log.write_text(record)  # a regular file now: read, and its report goes
    shipper.poll()
    assert capsys.readouterr().err == ""
    [report] = map(json.loads, sink.messages)
    assert report["script"] == "fail-terminate"


def test_a_symlink_put_in_place_of_a_rotated_log_is_said_once(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """The rest of the rotated log is read (its TERMINATE report goes), and the symlink in its place is said
    once: the read of the rotated file took the line back, and it was said again."""
    layout = NodeLayout(tmp_path)
    layout.executor_log.parent.mkdir(parents=True)
    layout.executor_log.write_text(_executor_record(script="ok", exit_code=0, error=""))
    sink = ListSink()
    shipper = Shipper(layout, SHIPPER_IDENTITY, sink, end_marker_grace_seconds=0, boot=lambda: FIRST_BOOT)
    shipper.poll()
    with layout.executor_log.open("a") as log:
        log.write(_executor_record(script="fail-terminate", exit_code=1, error="exit status 1"))
    layout.executor_log.rename(layout.executor_log.with_name("executor.log.1"))
    layout.executor_log.symlink_to(tmp_path / "elsewhere.log")
    capsys.readouterr()
    for _ in range(4):
        shipper.poll()
    assert len(capsys.readouterr().err.splitlines()) == 1
    assert "fail-terminate" in [json.loads(message)["script"] for message in sink.messages]


def test_an_executor_log_of_one_endless_line_costs_no_more_memory_to_find_the_nodes_ids(
    tmp_path: Path,
) -> None:
    layout = NodeLayout(tmp_path)
    layout.executor_log.parent.mkdir(parents=True)
    boot = {"message": "boot started", "cluster_id": "pcs_abc123de45", "node_id": "lca-static-1"}
    with layout.executor_log.open("wb") as file:
        file.write(b"x" * (40 * 1024 * 1024) + b"\n" + json.dumps(boot).encode() + b"\n")
    tracemalloc.start()
    try:
        found = identity_from_executor_log(layout)
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert found == {"cluster_id": "pcs_abc123de45", "node_id": "lca-static-1"}
    assert peak < 4 * 1024 * 1024


class Unreachable(ListSink):
    """CloudWatch Logs out of reach: every put fails."""

    def put(self, messages: list[str]) -> None:
        raise OSError(errno.ENETUNREACH, "Network is unreachable")


class Throttled(ListSink):
    """CloudWatch Logs throttling the first `refusals` puts (a fleet whose loop ends its nodes at once)."""

    def __init__(self, refusals: int) -> None:
        super().__init__()
        self.refusals = refusals
        self.puts = 0

    def put(self, messages: list[str]) -> None:
        self.puts += 1
        if self.puts <= self.refusals:
            raise RuntimeError("ThrottlingException: Rate exceeded")
        super().put(messages)


def test_the_last_look_tries_a_throttled_put_again_while_it_has_time(tmp_path: Path) -> None:
    """The last look before the shutdown stopped at its first failed put, 0.07 s into its 5 s: the report of
    the TERMINATE failure that ends the node, kept pending in the state of a node being terminated, was lost
    whenever CloudWatch Logs throttled at that moment."""
    layout = booted(tmp_path)
    sink = Throttled(refusals=3)
    now = [0.0]
    slept: list[float] = []

    def sleep(seconds: float) -> None:
        slept.append(seconds)
        now[0] += seconds

    shipper = Shipper(layout, SHIPPER_IDENTITY, sink, clock=lambda: now[0])
    shipper.last_look(5.0, sleep=sleep)
    assert sink.puts == 4
    assert "fail-terminate" in [json.loads(message)["script"] for message in sink.messages]
    assert shipper.state.pending == []
    assert slept == [0.1, 0.2, 0.4]
    # With no time left, it is out with the reports pending (the next start of a shipper sends them).
    stuck = Throttled(refusals=100)
    late = Shipper(booted(tmp_path / "late"), SHIPPER_IDENTITY, stuck, clock=lambda: now[0])
    late.last_look(1.0, sleep=sleep)
    assert (stuck.messages, bool(late.state.pending)) == ([], True)
    assert sum(slept[3:]) == pytest.approx(1.0)


def test_failed_deliveries_are_tried_again_less_and_less_often_up_to_every_30_s(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """An outage is not hammered, and once it is over the reports wait at most 30 s more (when no record
    of the executor's cuts the wait short)."""
    layout = booted(tmp_path)
    waits: list[float] = []

    def sleep(seconds: float, step: float, stop: object) -> None:
        waits.append(seconds)

    monkeypatch.setattr(lifeguard.node.shipper, "_sleep", sleep)
    Shipper(layout, SHIPPER_IDENTITY, Unreachable()).run(poll_interval=1.0, stop=lambda: len(waits) >= 8)
    assert waits == [1.0, 2.0, 4.0, 8.0, 16.0, 30.0, 30.0, 30.0]
    said = capsys.readouterr().err
    assert "try 1 failed, the next in 1 s" in said
    assert "try 8 failed, the next in 30 s" in said


def test_a_logs_endpoint_that_takes_the_connection_and_never_answers_costs_a_try_seconds(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """botocore's defaults (a 60 s read timeout, 5 attempts) held one try 5 minutes: the shipper's own
    tries, which a new record cuts short, never got their turn, and the TERMINATE report waited behind it
    until the instance was gone. One request a try, bounded."""
    import socket

    listener = socket.socket()
    listener.bind(("127.0.0.1", 0))
    listener.listen(8)  # the kernel takes the connection; nothing ever answers
    monkeypatch.setenv("AWS_ENDPOINT_URL_LOGS", f"http://127.0.0.1:{listener.getsockname()[1]}")
    for name, value in (
        ("AWS_DEFAULT_REGION", "us-east-1"),
        ("AWS_ACCESS_KEY_ID", "t"),
        ("AWS_SECRET_ACCESS_KEY", "t"),
    ):
        monkeypatch.setenv(name, value)
    try:
        client = lifeguard.node.shipper._logs_client()
        config = client.meta.config
        assert (config.connect_timeout, config.read_timeout, config.retries["total_max_attempts"]) == (
            3,
            5,
            1,
        )
        started = time.monotonic()
        with pytest.raises(Exception, match="Read timeout"):
            CloudWatchSink("reports", "pcs_abc123de45/i-0123456789abcdef0", client).put(["a report"])
        assert time.monotonic() - started < 15
    finally:
        listener.close()


def test_a_node_clients_endpoint_is_its_services_own_variable_before_the_general_one(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """botocore names CloudWatch Logs' variable by its service id (AWS_ENDPOINT_URL_CLOUDWATCH_LOGS), and
    a service's own wins over AWS_ENDPOINT_URL: the node read AWS_ENDPOINT_URL_LOGS alone, so with both set
    its reports went to the general endpoint."""
    from lifeguard.node.boto import node_client

    monkeypatch.setenv("AWS_DEFAULT_REGION", "us-east-1")
    monkeypatch.setenv("AWS_ENDPOINT_URL", "http://127.0.0.1:1")
    assert node_client("logs", "reports").meta.endpoint_url == "http://127.0.0.1:1"
    monkeypatch.setenv("AWS_ENDPOINT_URL_LOGS", "http://127.0.0.1:2")  # as earlier releases read it
    assert node_client("logs", "reports").meta.endpoint_url == "http://127.0.0.1:2"
    monkeypatch.setenv("AWS_ENDPOINT_URL_CLOUDWATCH_LOGS", "http://127.0.0.1:3")
    assert node_client("logs", "reports").meta.endpoint_url == "http://127.0.0.1:3"
    monkeypatch.setenv("AWS_ENDPOINT_URL_S3", "http://127.0.0.1:4")
    assert node_client("s3", "fetches").meta.endpoint_url == "http://127.0.0.1:4"


def test_a_node_clients_region_is_boto3s_then_aws_region_then_the_instances(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """boto3 reads AWS_DEFAULT_REGION, not AWS_REGION, which the shipper's error told people to set off EC2
    (and other SDKs, and Lambda, use): both are taken, before the instance's own region is asked."""
    from lifeguard.node.boto import node_client

    asked: list[str] = []

    def instance_region() -> str:
        asked.append("imds")
        return "ap-northeast-1"

    for name in ("AWS_DEFAULT_REGION", "AWS_REGION", "AWS_PROFILE"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("AWS_CONFIG_FILE", os.devnull)
    assert node_client("logs", "reports", region=instance_region).meta.region_name == "ap-northeast-1"
    monkeypatch.setenv("AWS_REGION", "eu-west-1")
    assert node_client("logs", "reports", region=instance_region).meta.region_name == "eu-west-1"
    monkeypatch.setenv("AWS_DEFAULT_REGION", "us-east-2")
    assert node_client("logs", "reports", region=instance_region).meta.region_name == "us-east-2"
    assert asked == ["imds"]


@pytest.mark.parametrize(
    "answer", [b"garbage\r\n\r\n", b"HTTP/1.1 200 OK\r\nContent-Length: 9\r\n\r\n\xff\xfe"]
)
def test_an_imds_that_answers_no_http_or_no_text_is_said_in_one_line(
    monkeypatch: pytest.MonkeyPatch, answer: bytes
) -> None:
    """Something on the metadata address that does not speak HTTP (or sends bytes that are no text) ended
    the shipper as an internal error (BadStatusLine, IncompleteRead): it is a ShipperError saying to pass
    --instance-id, as an unreachable IMDS is."""
    import socket

    from lifeguard.node.shipper import ShipperError, instance_id_from_imds

    server = socket.create_server(("127.0.0.1", 0))
    port = server.getsockname()[1]

    def answering() -> None:
        for _ in range(2):
            try:
                connection, _ = server.accept()
            except OSError:
                return
            with connection:
                connection.recv(4096)
                connection.sendall(answer)

    threading.Thread(target=answering, daemon=True).start()
    monkeypatch.setenv("AWS_EC2_METADATA_SERVICE_ENDPOINT", f"http://127.0.0.1:{port}")
    try:
        with pytest.raises(ShipperError, match=r"cannot read instance-id from IMDSv2 .*; pass --instance-id"):
            instance_id_from_imds()
    finally:
        server.close()


def test_the_shippers_region_from_imds_is_taken_only_as_a_regions_name(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The CloudWatch Logs client's endpoint is made of the region: whatever the metadata address answered
    was taken as it was."""
    from lifeguard.node import shipper

    monkeypatch.setattr(shipper, "_imds", lambda path: "us-gov-west-1")
    assert shipper._instance_region() == "us-gov-west-1"
    monkeypatch.setattr(shipper, "_imds", lambda path: "evil.example.com/x")
    with pytest.raises(
        shipper.ShipperError, match=r"answered 'evil.example.com/x' for the region, which is none"
    ):
        shipper._instance_region()
